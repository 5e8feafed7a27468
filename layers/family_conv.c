/* The "conv" family (layers/family.h): residual layers h = h + GELU(conv_i(h)) of causal
 * dilated 1-D convolutions, dilation 2^i (a TCN-style residual block with one
 * convolution; Bai et al. 2018, van den Oord et al. 2016). Receptive field
 * 1 + (K - 1)(2^L - 1) positions.
 *
 * Named dims: B batch (streams), T seq_len, C chunk events, L n_layers, D d_model,
 * K kernel_size, R_i = (K - 1) 2^i the history layer i reads.
 *
 * Parameters (after the input's): "conv.<i>.weight" [D, D, K], "conv.<i>.bias" [D]
 * (PyTorch's Conv1d layout and init).
 * Streaming state per stream: per layer its last R_i inputs, Σ_i R_i D values (bounded).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kernels/conv.h"
#include "kernels/gelu.h"
#include "kernels/stream.h"
#include "layers/model_internal.h"

static int64_t history(const lb_model_config *c, int i) { return (c->kernel_size - 1) * ((int64_t)1 << i); }

/* ---- configuration ---- */

static void defaults(lb_model_config *c) { c->n_layers = 4; }
static int64_t body_width(const lb_model_config *c) { return c->d_model; }
static double layer_floats(const lb_model_config *c) { return (double)c->d_model; }
static double state_floats(const lb_model_config *c, int64_t t)
{
    (void)t;
    return (double)(c->kernel_size - 1) * (double)(((int64_t)1 << c->n_layers) - 1) * (double)c->d_model;
}

static void size(lb_model_config *c, const lb_family_size *s)
{
    c->d_model = s->width;
    c->kernel_size = s->kernel;
    c->n_layers = s->layers > 0 ? s->layers : lb_conv_layers_for(s->train_len, s->kernel);
}

static void describe(const lb_model_config *c, char *text, size_t size)
{
    snprintf(text, size, "%d layers, kernel %lld, d_model %lld, dilations 1..%lld: receptive field %lld", c->n_layers,
             (long long)c->kernel_size, (long long)c->d_model, (long long)1 << (c->n_layers - 1),
             (long long)(1 + (c->kernel_size - 1) * (((int64_t)1 << c->n_layers) - 1)));
}

static lb_status check(const lb_model_config *c)
{
    if (c->n_layers > 24)
        return lb_error(LB_ERR_VALUE, "model config: n_layers = %d is more than 24 conv layers (dilation doubles per "
                                      "layer: 2^23 already)",
                        c->n_layers);
    return LB_OK;
}

/* Per layer and position one convolution, 2 K D² (the taps before the sequence's start
 * count too: the kernel multiplies its zero padding). Every position is computed. */
static double flops(const lb_model_config *c, int64_t t, int64_t read, double *attention)
{
    (void)read;
    *attention = 0;
    const double d = (double)c->d_model;
    return (double)t * c->n_layers * 2 * (double)c->kernel_size * d * d;
}

/* ---- parameters and forward ---- */

static lb_status build(lb_model *m, lb_rng *r_pos, lb_rng *r_body)
{
    (void)r_pos;
    const lb_model_config *c = &m->cfg;
    if (!(m->conv = calloc((size_t)c->n_layers, sizeof *m->conv)))
        return lb_error(LB_ERR_MEMORY, "model: out of memory for %d conv layers", c->n_layers);
    char name[64];
    for (int i = 0; i < c->n_layers; i++) {
        snprintf(name, sizeof name, "conv.%d", i);
        if (lb_conv1d_init(&m->conv[i], &m->params, name, c->d_model, c->d_model, c->kernel_size, (int64_t)1 << i,
                           c->dtype, r_body) != LB_OK)
            return lb_last_status();
    }
    return LB_OK;
}

static void model_free(lb_model *m) { free(m->conv); }

/* One residual layer given its convolution y = conv_i(x): x + GELU(y). */
static lb_var *residual(lb_graph *g, lb_var *x, lb_var *y) { return lb_add(g, x, lb_gelu(g, y)); }

static lb_var *forward(lb_graph *g, const lb_model *m, lb_var *x, const lb_model_input *in, const lb_attn_queries *read,
                       int training, lb_rng *rng, lb_var **weights)
{
    (void)in, (void)training, (void)rng, (void)weights;
    for (int i = 0; x && i < m->cfg.n_layers; i++)
        x = residual(g, x, lb_conv1d_forward(g, &m->conv[i], x));
    return read ? lb_gather_positions(g, x, read) : x;
}

/* ---- streaming: each layer's last R_i inputs ---- */

typedef struct conv_state {
    lb_tensor **hist;      /* L histories [B, R_i, D] (NULL when R_i = 0) */
    lb_tensor **hist_next; /* the histories after the current step */
    void **taps;           /* L weights in tap-major layout [K, D, D] (the event step) */
} conv_state;

static lb_status state_new(lb_model_state *s, const lb_stream_options *o)
{
    (void)o;
    const lb_model_config *c = &s->model->cfg;
    conv_state *v = calloc(1, sizeof *v);
    if (!v)
        return lb_error(LB_ERR_MEMORY, "model state: out of memory");
    s->body = v;
    if (!(v->hist = calloc((size_t)c->n_layers, sizeof *v->hist)) ||
        !(v->hist_next = calloc((size_t)c->n_layers, sizeof *v->hist_next)))
        return lb_error(LB_ERR_MEMORY, "model state: out of memory");
    for (int i = 0; i < c->n_layers; i++) {
        int64_t shape[3] = {s->batch, history(c, i), c->d_model};
        if (shape[1] > 0 && (!(v->hist[i] = lb_tensor_zeros(c->dtype, 3, shape)) ||
                             !(v->hist_next[i] = lb_tensor_zeros(c->dtype, 3, shape))))
            return lb_last_status();
    }
    return LB_OK;
}

static lb_status work_new(lb_model_state *s)
{
    const lb_model *m = s->model;
    const lb_model_config *c = &m->cfg;
    conv_state *v = s->body;
    const int64_t k = c->kernel_size, d = c->d_model;
    const size_t bytes = (size_t)(k * d * d) * lb_dtype_size(c->dtype);
    if (!(v->taps = calloc((size_t)c->n_layers, sizeof *v->taps)))
        return lb_error(LB_ERR_MEMORY, "model state: out of memory");
    for (int i = 0; i < c->n_layers; i++) {
        if (!(v->taps[i] = malloc(bytes)))
            return lb_error(LB_ERR_MEMORY, "model state: out of memory for the conv's tap-major weights");
        lb_k_conv1d_pack_taps(c->dtype, d, d, k, lb_tensor_data(m->conv[i].weight->value), v->taps[i]);
        s->work_bytes += bytes;
    }
    return LB_OK;
}

static void state_free(lb_model_state *s)
{
    conv_state *v = s->body;
    if (!v)
        return;
    for (int i = 0; i < s->model->cfg.n_layers; i++) {
        if (v->hist && v->hist_next) {
            lb_tensor_free(v->hist[i]);
            lb_tensor_free(v->hist_next[i]);
        }
        if (v->taps)
            free(v->taps[i]);
    }
    free(v->hist);
    free(v->hist_next);
    free(v->taps);
    free(v);
}

static void state_reset(lb_model_state *s, int64_t b)
{
    conv_state *v = s->body;
    for (int i = 0; i < s->model->cfg.n_layers; i++)
        if (v->hist[i])
            lb_model_zero_stream_rows(v->hist[i], 0, b);
}

static size_t state_bytes(const lb_model_state *s, int64_t b)
{
    (void)b;
    const lb_model_config *c = &s->model->cfg;
    size_t total = 0;
    for (int i = 0; i < c->n_layers; i++)
        total += (size_t)history(c, i) * (size_t)c->d_model * lb_dtype_size(c->dtype);
    return total;
}

static size_t state_allocated(const lb_model_state *s)
{
    const conv_state *v = s->body;
    size_t total = 0;
    for (int i = 0; i < s->model->cfg.n_layers; i++)
        total += lb_model_tensor_bytes(v->hist[i]) + lb_model_tensor_bytes(v->hist_next[i]);
    return total;
}

/* The stack over the chunk: each layer convolves [history, chunk] and keeps the last R_i
 * inputs up to each stream's last valid event in hist_next[i]. x [B, C, D] -> [B, C, D]. */
static lb_var *chunk(lb_model_state *s, lb_var *x, const lb_decode_chunk *ch, int ragged)
{
    (void)ragged;
    lb_graph *g = s->graph;
    const lb_model *m = s->model;
    conv_state *v = s->body;
    int64_t n = x->value->shape[1];
    int64_t *zero = calloc((size_t)s->batch, sizeof *zero), *rows = calloc((size_t)s->batch, sizeof *rows);
    if (!zero || !rows) {
        free(zero);
        free(rows);
        lb_error(LB_ERR_MEMORY, "conv step: out of memory");
        return NULL;
    }
    for (int i = 0; x && i < m->cfg.n_layers; i++) {
        int64_t r = history(&m->cfg, i);
        lb_var *y;
        if (r == 0) {
            y = lb_conv1d_forward(g, &m->conv[i], x);
        } else {
            lb_var *parts[2] = {lb_input_copy(g, v->hist[i], 0), x};
            lb_var *ext = lb_concat(g, 2, parts, 1); /* [B, R + C, D] */
            for (int64_t b = 0; b < s->batch; b++)
                rows[b] = r;
            if (!ext || lb_k_copy_rows(v->hist_next[i], zero, ext->value, ch->valid, rows) != LB_OK) {
                x = NULL;
                break;
            }
            y = lb_slice(g, lb_conv1d_forward(g, &m->conv[i], ext), 1, r, r + n, 1);
        }
        x = residual(g, x, y);
    }
    free(zero);
    free(rows);
    return x;
}

/* One event per stream: x = x + GELU(conv_i(x)) per layer on s->x [B, D], each layer's
 * input pushed onto its history (into hist_next). Returns s->x. */
static const void *event(lb_model_state *s, const lb_decode_chunk *ch)
{
    const lb_model *m = s->model;
    const lb_model_config *c = &m->cfg;
    conv_state *v = s->body;
    const int64_t b = s->batch, d = c->d_model;
    for (int i = 0; i < c->n_layers; i++) {
        const int64_t r = history(c, i);
        /* a [B, D] = conv_i at the event, reading the history before it */
        lb_k_conv1d_step(c->dtype, b, d, d, c->kernel_size, m->conv[i].dilation, s->x,
                         r > 0 ? lb_tensor_data(v->hist[i]) : NULL, v->taps[i], lb_tensor_data(m->conv[i].bias->value),
                         s->a);
        if (r > 0)
            lb_k_history_push(c->dtype, b, r, d, lb_tensor_data(v->hist[i]), s->x, ch->valid,
                              lb_tensor_data(v->hist_next[i]));
        lb_k_gelu(c->dtype, b * d, s->a, s->x, 1);
    }
    return s->x;
}

static void commit(lb_model_state *s, const int64_t *valid)
{
    (void)valid;
    conv_state *v = s->body;
    for (int i = 0; i < s->model->cfg.n_layers; i++) {
        lb_tensor *t = v->hist[i];
        v->hist[i] = v->hist_next[i];
        v->hist_next[i] = t;
    }
}

static const lb_family_ops ops = {check,     build,    NULL,       model_free,  forward,     lb_family_no_scratch,
                                  state_new, work_new, state_free, state_reset, state_bytes, state_allocated,
                                  NULL,      chunk,    event,      commit,      NULL};

const lb_family lb_family_conv = {LB_MODEL_CONV, "conv", "residual causal dilated 1-D convolutions (dilation 2^i)", 0,
                                  defaults, lb_family_always, lb_family_any_length, lb_family_never, body_width,
                                  layer_floats, state_floats, size, describe, &ops, flops};

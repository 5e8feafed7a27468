/* Streaming inference (layers/stream.h). Named dims: B streams, C chunk events,
 * L layers, D d_model, H hidden_size, R_i = (K - 1) 2^i the conv history of layer i. */
#include "layers/stream.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "kernels/conv.h"
#include "kernels/gelu.h"
#include "kernels/lstm.h"
#include "kernels/stream.h"
#include "layers/model_internal.h"
#include "tensor/kernels.h"

enum { DEFAULT_CAPACITY = 256 };

struct lb_model_state {
    lb_model *model;
    int64_t batch;
    int64_t *events;        /* [B] events seen per stream */
    lb_graph *graph;        /* one step's computation, reset after each step */
    lb_kv_cache *caches;    /* attention: L caches */
    lb_tensor *h, *c;       /* lstm: [L, B, H] carried state */
    lb_tensor *h_next, *c_next; /* lstm: the state after the current step */
    lb_tensor **hist;       /* conv: L histories [B, R_i, D] (NULL when R_i = 0) */
    lb_tensor **hist_next;  /* conv: the histories after the current step */
    int64_t window;         /* attention: keys each query sees (0 = all) */
    /* The graph-free step of one event per stream (step_event): buffers allocated once. */
    void *x, *a, *f;         /* [B, D] the residual stream; [B, max(D, H)] a layer's output;
                              * [B, max(4H, d_ff, D)] gates or the FFN's hidden rows */
    void **w_t;             /* lstm: per layer W_ihᵀ [n_in, 4H] then W_hhᵀ [H, 4H] (2 L entries;
                             * NULL where the float32 loops do not run) */
    void **taps;            /* conv: L weights in tap-major layout [K, D, D] */
    lb_mha_step_work attn;  /* attention: the layer's per-event buffers (shared by the layers) */
    size_t work_bytes;      /* what the above hold */
    int64_t *valid1;        /* [B] and */
    int32_t *positions1;    /* [B]: a one-event chunk's valid counts and positions */
    int graph_used;         /* the graph holds a step's nodes */
};

/* The data of an optional parameter (a bias a model may lack), or NULL. */
static const void *var_data(const lb_var *v) { return v ? lb_tensor_data(v->value) : NULL; }

static int64_t conv_history(const lb_model_config *c, int i) { return (c->kernel_size - 1) * ((int64_t)1 << i); }

void lb_model_state_free(lb_model_state *s)
{
    if (!s)
        return;
    const lb_model_config *c = &s->model->cfg;
    for (int i = 0; s->caches && i < c->n_layers; i++)
        lb_kv_cache_free(&s->caches[i]);
    for (int i = 0; s->hist && i < c->n_layers; i++) {
        lb_tensor_free(s->hist[i]);
        lb_tensor_free(s->hist_next[i]);
    }
    free(s->caches);
    free(s->hist);
    free(s->hist_next);
    lb_tensor_free(s->h);
    lb_tensor_free(s->c);
    lb_tensor_free(s->h_next);
    lb_tensor_free(s->c_next);
    lb_graph_free(s->graph);
    for (int i = 0; s->w_t && i < 2 * c->n_layers; i++)
        free(s->w_t[i]);
    for (int i = 0; s->taps && i < c->n_layers; i++)
        free(s->taps[i]);
    free(s->w_t);
    free(s->taps);
    free(s->x);
    free(s->a);
    free(s->f);
    lb_mha_step_work_free(&s->attn);
    free(s->valid1);
    free(s->positions1);
    free(s->events);
    free(s);
}

/* The buffers of the graph-free step (token models only: a feature model's step goes
 * through the graph). The LSTM's W_ihᵀ and W_hhᵀ and the conv's tap-major weights are
 * copies of the model's parameters made here (the model must not change while the
 * state is used, layers/stream.h). */
static lb_status work_build(lb_model_state *s)
{
    const lb_model *m = s->model;
    const lb_model_config *c = &m->cfg;
    if (!m->embedding)
        return LB_OK;
    const size_t es = lb_dtype_size(c->dtype);
    const int64_t b = s->batch, d = c->d_model, h = c->kind == LB_MODEL_LSTM ? c->hidden_size : 0;
    int64_t wide = d > h ? d : h, widest = wide;
    if (4 * h > widest)
        widest = 4 * h;
    if (lb_model_kind_is_attention(c->kind) && c->d_ff > widest)
        widest = c->d_ff;
    size_t total = (size_t)(b * (d + wide + widest)) * es;
    if (!(s->x = calloc((size_t)(b * d), es)) || !(s->a = calloc((size_t)(b * wide), es)) ||
        !(s->f = calloc((size_t)(b * widest), es)))
        return lb_error(LB_ERR_MEMORY, "model state: out of memory for the step's buffers");
    if (lb_model_kind_is_attention(c->kind)) {
        if (lb_mha_step_work_init(&s->attn, &m->transformer.blocks[0].attn, c->dtype, b) != LB_OK)
            return lb_last_status();
        total += lb_mha_step_work_bytes(&s->attn);
    } else if (c->kind == LB_MODEL_LSTM) {
        if (!(s->w_t = calloc((size_t)(2 * c->n_layers), sizeof *s->w_t)))
            return lb_error(LB_ERR_MEMORY, "model state: out of memory");
        for (int i = 0; lb_k_lstm_step_uses_copies(c->dtype, 4 * h) && i < c->n_layers; i++) {
            const lb_tensor *w[2] = {m->lstm.weight_ih[i]->value, m->lstm.weight_hh[i]->value}; /* [4H, n] */
            for (int j = 0; j < 2; j++) {
                size_t bytes = (size_t)lb_tensor_numel(w[j]) * es;
                if (!(s->w_t[2 * i + j] = malloc(bytes)))
                    return lb_error(LB_ERR_MEMORY, "model state: out of memory for the LSTM's weight copies");
                lb_k_lstm_transpose_weight(c->dtype, 4 * h, w[j]->shape[1], lb_tensor_data(w[j]), s->w_t[2 * i + j]);
                total += bytes;
            }
        }
    } else {
        if (!(s->taps = calloc((size_t)c->n_layers, sizeof *s->taps)))
            return lb_error(LB_ERR_MEMORY, "model state: out of memory");
        const int64_t k = c->kernel_size;
        for (int i = 0; i < c->n_layers; i++) {
            if (!(s->taps[i] = malloc((size_t)(k * d * d) * es)))
                return lb_error(LB_ERR_MEMORY, "model state: out of memory for the conv's tap-major weights");
            lb_k_conv1d_pack_taps(c->dtype, d, d, k, lb_tensor_data(m->conv[i].weight->value), s->taps[i]);
            total += (size_t)(k * d * d) * es;
        }
    }
    s->work_bytes = total;
    return LB_OK;
}

static lb_status state_build(lb_model_state *s, const lb_stream_options *o)
{
    const lb_model_config *c = &s->model->cfg;
    int64_t b = s->batch, d = c->d_model;
    size_t es = lb_dtype_size(c->dtype);
    if (lb_model_kind_is_attention(c->kind)) {
        s->window = c->kind == LB_MODEL_LOCAL ? c->window : 0;
        if (o->max_context > 0 && (s->window == 0 || o->max_context < s->window))
            s->window = o->max_context;
        /* max_bytes shared by the L caches, 2 B D values per cached event each. */
        int64_t max_rows = 0;
        if (o->max_bytes > 0) {
            max_rows = (int64_t)(o->max_bytes / ((size_t)c->n_layers * 2 * (size_t)b * (size_t)d * es));
            if (max_rows < 1 || (s->window > 0 && max_rows < s->window))
                return lb_error(LB_ERR_MEMORY, "model state: max_bytes = %zu cannot hold %lld cached events for %lld "
                                               "streams (%zu bytes each)",
                                o->max_bytes, (long long)(s->window > 0 ? s->window : 1), (long long)b,
                                (size_t)c->n_layers * 2 * (size_t)b * (size_t)d * es);
        }
        int64_t capacity = o->capacity > 0 ? o->capacity : DEFAULT_CAPACITY;
        if (s->window > 0 && o->capacity <= 0)
            capacity = 2 * s->window;
        if (!(s->caches = calloc((size_t)c->n_layers, sizeof *s->caches)))
            return lb_error(LB_ERR_MEMORY, "model state: out of memory");
        for (int i = 0; i < c->n_layers; i++)
            if (lb_kv_cache_init(&s->caches[i], c->dtype, b, c->n_heads, d / c->n_heads, capacity, s->window,
                                 max_rows) != LB_OK)
                return lb_last_status();
    } else if (c->kind == LB_MODEL_LSTM) {
        int64_t shape[3] = {c->n_layers, b, c->hidden_size};
        if (!(s->h = lb_tensor_zeros(c->dtype, 3, shape)) || !(s->c = lb_tensor_zeros(c->dtype, 3, shape)) ||
            !(s->h_next = lb_tensor_zeros(c->dtype, 3, shape)) || !(s->c_next = lb_tensor_zeros(c->dtype, 3, shape)))
            return lb_last_status();
    } else {
        if (!(s->hist = calloc((size_t)c->n_layers, sizeof *s->hist)) ||
            !(s->hist_next = calloc((size_t)c->n_layers, sizeof *s->hist_next)))
            return lb_error(LB_ERR_MEMORY, "model state: out of memory");
        for (int i = 0; i < c->n_layers; i++) {
            int64_t shape[3] = {b, conv_history(c, i), d};
            if (shape[1] > 0 && (!(s->hist[i] = lb_tensor_zeros(c->dtype, 3, shape)) ||
                                 !(s->hist_next[i] = lb_tensor_zeros(c->dtype, 3, shape))))
                return lb_last_status();
        }
    }
    if (work_build(s) != LB_OK)
        return lb_last_status();
    if (o->max_bytes > 0 && lb_model_state_allocated(s) > o->max_bytes)
        return lb_error(LB_ERR_MEMORY, "model state: %zu bytes for %lld streams are over max_bytes = %zu",
                        lb_model_state_allocated(s), (long long)b, o->max_bytes);
    return LB_OK;
}

lb_model_state *lb_model_state_new(lb_model *m, int64_t streams, const lb_stream_options *opt)
{
    lb_stream_options o = opt ? *opt : (lb_stream_options){0};
    if (!m) {
        lb_error(LB_ERR_VALUE, "model state: the model is NULL");
        return NULL;
    }
    const lb_model_config *c = &m->cfg;
    if (lb_model_kind_is_attention(c->kind) && !c->causal) {
        lb_error(LB_ERR_VALUE, "model state: this %s model is not causal (each position attends to later ones), so "
                               "its output at an event depends on events not yet seen and it cannot stream",
                 lb_model_kind_name(c->kind));
        return NULL;
    }
    if (streams < 1 || o.capacity < 0 || o.max_context < 0) {
        lb_error(LB_ERR_VALUE, "model state: streams = %lld must be >= 1, capacity = %lld and max_context = %lld >= 0",
                 (long long)streams, (long long)o.capacity, (long long)o.max_context);
        return NULL;
    }
    lb_model_state *s = calloc(1, sizeof *s);
    if (!s) {
        lb_error(LB_ERR_MEMORY, "model state: out of memory");
        return NULL;
    }
    s->model = m;
    s->batch = streams;
    if (!(s->events = calloc((size_t)streams, sizeof *s->events)) || !(s->graph = lb_graph_new()) ||
        !(s->valid1 = calloc((size_t)streams, sizeof *s->valid1)) ||
        !(s->positions1 = calloc((size_t)streams, sizeof *s->positions1))) {
        lb_error(LB_ERR_MEMORY, "model state: out of memory for %lld streams", (long long)streams);
        lb_model_state_free(s);
        return NULL;
    }
    lb_graph_set_grad_enabled(s->graph, 0);
    if (state_build(s, &o) != LB_OK) {
        lb_error_context("making the streaming state of a model with kind = %s for %lld stream%s", lb_model_kind_name(c->kind),
                         (long long)streams, streams == 1 ? "" : "s");
        lb_model_state_free(s);
        return NULL;
    }
    return s;
}

/* LB_ERR_VALUE naming the function, the stream and the range when stream is not in
 * [0, B) (or -1 where `all` allows it); LB_OK otherwise. */
static lb_status check_stream(const lb_model_state *s, int64_t stream, int all, const char *fn)
{
    if ((stream >= 0 && stream < s->batch) || (all && stream == -1))
        return LB_OK;
    return lb_error(LB_ERR_VALUE, "%s: stream %lld is outside [0, %lld)%s", fn, (long long)stream, (long long)s->batch,
                    all ? " (or -1 for every stream)" : "");
}

void lb_model_state_reset(lb_model_state *s, int64_t stream)
{
    LB_CHECK_ARG(s);
    if (check_stream(s, stream, 1, "lb_model_state_reset") != LB_OK)
        return;
    const lb_model_config *c = &s->model->cfg;
    for (int64_t b = 0; b < s->batch; b++) {
        if (stream >= 0 && b != stream)
            continue;
        s->events[b] = 0;
        for (int i = 0; s->caches && i < c->n_layers; i++)
            lb_kv_cache_clear(&s->caches[i], b);
        for (int l = 0; s->h && l < c->n_layers; l++) {
            size_t row = (size_t)c->hidden_size * lb_dtype_size(c->dtype), at = (size_t)(l * s->batch + b) * row;
            memset((char *)lb_tensor_data(s->h) + at, 0, row);
            memset((char *)lb_tensor_data(s->c) + at, 0, row);
        }
        for (int i = 0; s->hist && i < c->n_layers; i++)
            if (s->hist[i]) {
                size_t per = (size_t)(s->hist[i]->shape[1] * s->hist[i]->shape[2]) * lb_dtype_size(c->dtype);
                memset((char *)lb_tensor_data(s->hist[i]) + (size_t)b * per, 0, per);
            }
    }
}

int64_t lb_model_state_streams(const lb_model_state *s)
{
    LB_CHECK_ARG(s, -1);
    return s->batch;
}

int64_t lb_model_state_events(const lb_model_state *s, int64_t stream)
{
    LB_CHECK_ARG(s, -1);
    if (check_stream(s, stream, 0, "lb_model_state_events") != LB_OK)
        return -1;
    return s->events[stream];
}

lb_kv_cache *lb_model_state_kv_cache(lb_model_state *s, int layer)
{
    LB_CHECK_ARG(s, NULL);
    return s && s->caches && layer >= 0 && layer < s->model->cfg.n_layers ? &s->caches[layer] : NULL;
}

size_t lb_model_state_bytes(const lb_model_state *s, int64_t stream)
{
    LB_CHECK_ARG(s, 0);
    const lb_model_config *c = &s->model->cfg;
    size_t es = lb_dtype_size(c->dtype), l = (size_t)c->n_layers;
    if (check_stream(s, stream, 0, "lb_model_state_bytes") != LB_OK)
        return 0;
    if (s->caches) {
        int64_t held = s->caches[0].length[stream];
        if (s->window > 0 && held > s->window)
            held = s->window;
        return 2 * l * (size_t)held * (size_t)c->d_model * es;
    }
    if (s->h)
        return 2 * l * (size_t)c->hidden_size * es;
    size_t total = 0;
    for (int i = 0; i < c->n_layers; i++)
        total += (size_t)conv_history(c, i) * (size_t)c->d_model * es;
    return total;
}

static size_t tensor_bytes(const lb_tensor *t)
{
    return t ? (size_t)lb_tensor_numel(t) * lb_dtype_size(t->dtype) : 0;
}

size_t lb_model_state_allocated(const lb_model_state *s)
{
    LB_CHECK_ARG(s, 0);
    const lb_model_config *c = &s->model->cfg;
    size_t total = tensor_bytes(s->h) + tensor_bytes(s->c) + tensor_bytes(s->h_next) + tensor_bytes(s->c_next);
    for (int i = 0; i < c->n_layers; i++) {
        if (s->caches)
            total += lb_kv_cache_bytes(&s->caches[i]);
        if (s->hist)
            total += tensor_bytes(s->hist[i]) + tensor_bytes(s->hist_next[i]);
    }
    return total;
}

size_t lb_model_state_work_bytes(const lb_model_state *s)
{
    LB_CHECK_ARG(s, 0);
    return s->work_bytes;
}

/* ---- one step ---- */

/* Copies layer rows [L, B, H] of stream b from src into dst. */
static void copy_stream_rows(lb_tensor *dst, const lb_tensor *src, int64_t b)
{
    int64_t l = dst->shape[0], batch = dst->shape[1];
    size_t row = (size_t)dst->shape[2] * lb_dtype_size(dst->dtype);
    for (int64_t i = 0; i < l; i++)
        memcpy((char *)lb_tensor_data(dst) + (size_t)(i * batch + b) * row,
               (const char *)lb_tensor_data(src) + (size_t)(i * batch + b) * row, row);
}

/* The LSTM over the chunk from the carried (h, c); the state after the chunk goes to
 * h_next, c_next. x [B, C, D] -> [B, C, H]. Streams with fewer valid events than C
 * are run one event at a time so that each keeps the state after its last event. */
static lb_var *lstm_chunk(lb_model_state *s, lb_var *x, const int64_t *valid, int ragged)
{
    lb_graph *g = s->graph;
    const lb_lstm *l = &s->model->lstm;
    lb_var *hn = NULL, *cn = NULL;
    if (!ragged) {
        lb_var *out = lb_lstm_forward(g, l, x, lb_input_copy(g, s->h, 0), lb_input_copy(g, s->c, 0), &hn, &cn);
        if (!out || lb_tensor_copy_into(s->h_next, hn->value) != LB_OK ||
            lb_tensor_copy_into(s->c_next, cn->value) != LB_OK)
            return NULL;
        return out;
    }
    int64_t n = x->value->shape[1];
    lb_var **outs = calloc((size_t)n, sizeof *outs);
    if (!outs || lb_tensor_copy_into(s->h_next, s->h) != LB_OK || lb_tensor_copy_into(s->c_next, s->c) != LB_OK) {
        free(outs);
        lb_error(LB_ERR_MEMORY, "lstm step: out of memory");
        return NULL;
    }
    lb_var *out = NULL;
    int64_t t = 0;
    for (; t < n; t++) {
        outs[t] = lb_lstm_forward(g, l, lb_slice(g, x, 1, t, t + 1, 1), lb_input_copy(g, s->h_next, 0),
                                  lb_input_copy(g, s->c_next, 0), &hn, &cn); /* [B, 1, H] */
        if (!outs[t])
            break;
        for (int64_t b = 0; b < s->batch; b++)
            if (t < valid[b]) {
                copy_stream_rows(s->h_next, hn->value, b);
                copy_stream_rows(s->c_next, cn->value, b);
            }
    }
    if (t == n)
        out = lb_concat(g, (int)n, outs, 1);
    free(outs);
    return out;
}

/* The conv body over the chunk: each layer convolves [history, chunk] and keeps the
 * last R_i inputs up to each stream's last valid event in hist_next[i].
 * x [B, C, D] -> [B, C, D]. */
static lb_var *conv_chunk(lb_model_state *s, lb_var *x, const int64_t *valid)
{
    lb_graph *g = s->graph;
    const lb_model *m = s->model;
    int64_t n = x->value->shape[1];
    int64_t *zero = calloc((size_t)s->batch, sizeof *zero), *rows = calloc((size_t)s->batch, sizeof *rows);
    if (!zero || !rows) {
        free(zero);
        free(rows);
        lb_error(LB_ERR_MEMORY, "conv step: out of memory");
        return NULL;
    }
    for (int i = 0; x && i < m->cfg.n_layers; i++) {
        int64_t r = conv_history(&m->cfg, i);
        lb_var *y;
        if (r == 0) {
            y = lb_conv1d_forward(g, &m->conv[i], x);
        } else {
            lb_var *parts[2] = {lb_input_copy(g, s->hist[i], 0), x};
            lb_var *ext = lb_concat(g, 2, parts, 1); /* [B, R + C, D] */
            for (int64_t b = 0; b < s->batch; b++)
                rows[b] = r;
            if (!ext || lb_k_copy_rows(s->hist_next[i], zero, ext->value, valid, rows) != LB_OK)
                break;
            y = lb_slice(g, lb_conv1d_forward(g, &m->conv[i], ext), 1, r, r + n, 1);
        }
        x = lb_model_conv_residual(g, x, y);
    }
    free(zero);
    free(rows);
    return x;
}

/* Checks the chunk and fills valid [B] and positions [B, C]. */
static lb_status chunk_check(const lb_model_state *s, const lb_model_input *in, int64_t *valid, int32_t *positions,
                             int *ragged)
{
    const lb_model_config *c = &s->model->cfg;
    if (!in)
        return lb_error(LB_ERR_VALUE, "model step: the input is NULL");
    if (in->batch != s->batch)
        return lb_error(LB_ERR_SHAPE, "model step: the chunk has %lld streams but the state was made for %lld",
                        (long long)in->batch, (long long)s->batch);
    lb_model_input all = *in;
    all.lengths = NULL;
    if (lb_model_check_input(s->model, &all) != LB_OK)
        return lb_last_status();
    int64_t n = in->seq_len;
    *ragged = 0;
    for (int64_t b = 0; b < s->batch; b++) {
        valid[b] = in->lengths ? in->lengths[b] : n;
        if (valid[b] < 0 || valid[b] > n)
            return lb_error(LB_ERR_VALUE, "model step: lengths[%lld] = %lld is outside [0, C = %lld]", (long long)b,
                            (long long)valid[b], (long long)n);
        if (valid[b] != n)
            *ragged = 1;
        if (s->events[b] + n > INT32_MAX)
            return lb_error(LB_ERR_VALUE, "model step: stream %lld has seen %lld events; positions past %d are not "
                                          "supported (reset the stream)",
                            (long long)b, (long long)s->events[b], (int)INT32_MAX);
        if (lb_model_kind_is_attention(c->kind) && c->pos == LB_POS_LEARNED && s->events[b] + valid[b] > c->max_seq_len)
            return lb_error(LB_ERR_VALUE, "model step: stream %lld would reach %lld events, but the model's learned "
                                          "positions (--pos learned) end at max_seq_len = %lld, the rows of its "
                                          "position table (rows past the training data's length were never "
                                          "trained; sinusoidal, rotary or no positions have no such limit)",
                            (long long)b, (long long)(s->events[b] + valid[b]), (long long)c->max_seq_len);
        for (int64_t i = 0; i < n; i++) /* padding rows sit at the stream's last valid position */
            positions[b * n + i] = (int32_t)(s->events[b] + (i < valid[b] ? i : (valid[b] > 0 ? valid[b] - 1 : 0)));
    }
    return LB_OK;
}

/* Makes the step permanent for every stream. */
static void commit(lb_model_state *s, const int64_t *valid)
{
    const lb_model_config *c = &s->model->cfg;
    for (int i = 0; s->caches && i < c->n_layers; i++)
        lb_kv_cache_advance(&s->caches[i], valid);
    if (s->h) {
        lb_tensor *t = s->h;
        s->h = s->h_next;
        s->h_next = t;
        t = s->c;
        s->c = s->c_next;
        s->c_next = t;
    }
    for (int i = 0; s->hist && i < c->n_layers; i++) {
        lb_tensor *t = s->hist[i];
        s->hist[i] = s->hist_next[i];
        s->hist_next[i] = t;
    }
    for (int64_t b = 0; b < s->batch; b++)
        s->events[b] += valid[b];
}

/* ---- one event per stream without a graph ----
 * The same computation as step_run for C = 1, straight into the state's buffers:
 * embedding (and positions) -> body -> head, one row per stream. Streams with no
 * event in this chunk (valid 0) are computed like the others and then left as they
 * were (their output row is unspecified, as in step_run). */

/* The LSTM: layer k reads x (k = 0) or layer k-1's new h, carries (h, c) into
 * (h_next, c_next); returns the last layer's h [B, H]. */
static const void *lstm_event(lb_model_state *s, const int64_t *valid)
{
    const lb_model_config *c = &s->model->cfg;
    const lb_lstm *l = &s->model->lstm;
    const int64_t b = s->batch, hs = c->hidden_size;
    const size_t layer = (size_t)(b * hs) * lb_dtype_size(c->dtype);
    const char *in = s->x;
    int64_t n_in = c->d_model;
    for (int k = 0; k < c->n_layers; k++) {
        char *h = (char *)lb_tensor_data(s->h_next) + (size_t)k * layer;
        lb_k_lstm_step(c->dtype, b, n_in, hs, in, lb_tensor_data(l->weight_ih[k]->value), s->w_t[2 * k],
                       lb_tensor_data(l->bias_ih[k]->value), lb_tensor_data(l->bias_hh[k]->value),
                       lb_tensor_data(l->weight_hh[k]->value), s->w_t[2 * k + 1],
                       (const char *)lb_tensor_data(s->h) + (size_t)k * layer,
                       (const char *)lb_tensor_data(s->c) + (size_t)k * layer, s->f, h,
                       (char *)lb_tensor_data(s->c_next) + (size_t)k * layer);
        in = h;
        n_in = hs;
    }
    for (int64_t bi = 0; bi < b; bi++)
        if (!valid[bi]) { /* no event: the stream keeps its (h, c) */
            copy_stream_rows(s->h_next, s->h, bi);
            copy_stream_rows(s->c_next, s->c, bi);
        }
    return (const char *)lb_tensor_data(s->h_next) + (size_t)(c->n_layers - 1) * layer;
}

/* The conv stack: x = x + GELU(conv_i(x)) per layer, each layer's input pushed onto
 * its history (into hist_next). Returns x [B, D]. */
static const void *conv_event(lb_model_state *s, const int64_t *valid)
{
    const lb_model *m = s->model;
    const lb_model_config *c = &m->cfg;
    const int64_t b = s->batch, d = c->d_model;
    for (int i = 0; i < c->n_layers; i++) {
        const int64_t r = conv_history(c, i);
        /* a [B, D] = conv_i at the event, reading the history before it */
        lb_k_conv1d_step(c->dtype, b, d, d, c->kernel_size, m->conv[i].dilation, s->x,
                         r > 0 ? lb_tensor_data(s->hist[i]) : NULL, s->taps[i], lb_tensor_data(m->conv[i].bias->value),
                         s->a);
        if (r > 0)
            lb_k_history_push(c->dtype, b, r, d, lb_tensor_data(s->hist[i]), s->x, valid, lb_tensor_data(s->hist_next[i]));
        lb_k_gelu(c->dtype, b * d, s->a, s->x, 1);
    }
    return s->x;
}

/* The transformer stack (pre-norm blocks, then ln_f) on the event. Returns [B, D]. */
static const void *attention_event(lb_model_state *s, const lb_decode_chunk *chunk)
{
    const lb_transformer *tr = &s->model->transformer;
    const lb_model_config *c = &s->model->cfg;
    const lb_dtype dt = c->dtype;
    const int64_t b = s->batch, d = c->d_model, n = b * d;
    for (int i = 0; i < tr->n_layers; i++) {
        const lb_transformer_block *blk = &tr->blocks[i];
        const lb_ffn *ffn = &blk->ffn;
        /* x = x + MHA(LN1(x)) */
        lb_k_layer_norm_rows(dt, b, d, s->x, lb_tensor_data(blk->ln1.weight->value),
                             var_data(blk->ln1.bias), blk->ln1.eps, s->a);
        if (lb_mha_step(&blk->attn, s->a, &s->caches[i], chunk, &s->attn, s->f) != LB_OK)
            return NULL;
        LB_DISPATCH(dt, T, {
            T *px = s->x;
            const T *po = s->f;
            for (int64_t j = 0; j < n; j++)
                px[j] = px[j] + po[j];
        });
        /* x = x + fc2(GELU(fc1(LN2(x)))) */
        lb_k_layer_norm_rows(dt, b, d, s->x, lb_tensor_data(blk->ln2.weight->value),
                             var_data(blk->ln2.bias), blk->ln2.eps, s->a);
        lb_k_affine_rows(dt, b, d, ffn->fc1.out_features, s->a, lb_tensor_data(ffn->fc1.weight->value),
                         var_data(ffn->fc1.bias), s->f);
        lb_k_gelu(dt, b * ffn->fc1.out_features, s->f, s->f, 0);
        lb_k_affine_rows(dt, b, ffn->fc1.out_features, d, s->f, lb_tensor_data(ffn->fc2.weight->value),
                         var_data(ffn->fc2.bias), s->a);
        LB_DISPATCH(dt, T, {
            T *px = s->x;
            const T *pf = s->a;
            for (int64_t j = 0; j < n; j++)
                px[j] = px[j] + pf[j];
        });
    }
    lb_k_layer_norm_rows(dt, b, d, s->x, lb_tensor_data(tr->ln_f.weight->value), var_data(tr->ln_f.bias),
                         tr->ln_f.eps, s->a);
    return s->a;
}

/* One event per stream (in->seq_len = 1, token model), the head's output into out
 * [B, classes] (regression [B]); an error commits nothing. */
static lb_status step_event(lb_model_state *s, const lb_model_input *in, const int64_t *valid,
                            const int32_t *positions, void *out)
{
    const lb_model *m = s->model;
    const lb_model_config *c = &m->cfg;
    const int64_t b = s->batch, d = c->d_model;
    const size_t row = (size_t)d * lb_dtype_size(c->dtype);
    for (int i = 0; s->caches && i < c->n_layers; i++)
        if (lb_kv_cache_reserve(&s->caches[i], 1) != LB_OK)
            return lb_last_status();
    const char *emb = lb_tensor_data(m->embedding->value); /* [V, D] */
    for (int64_t bi = 0; bi < b; bi++)
        memcpy((char *)s->x + (size_t)bi * row, emb + (size_t)in->tokens[bi] * row, row);
    const void *h;
    if (s->caches) {
        lb_positional_add_rows(&m->pos, c->dtype, b, s->x, positions);
        lb_decode_chunk chunk = {b, 1, valid, positions};
        h = attention_event(s, &chunk);
    } else if (s->h) {
        h = lstm_event(s, valid);
    } else {
        h = conv_event(s, valid);
    }
    if (!h)
        return lb_last_status();
    lb_model_head_rows(m, b, h, out);
    return LB_OK;
}

/* The body and head on the chunk; NULL on error with nothing committed. */
static lb_tensor *step_run(lb_model_state *s, const lb_model_input *in, const int64_t *valid, const int32_t *positions,
                           int ragged)
{
    lb_graph *g = s->graph;
    const lb_model *m = s->model;
    const lb_model_config *c = &m->cfg;
    int64_t b = in->batch, n = in->seq_len;
    s->graph_used = 1;
    lb_decode_chunk chunk = {b, n, valid, positions};
    for (int i = 0; s->caches && i < c->n_layers; i++)
        if (lb_kv_cache_reserve(&s->caches[i], n) != LB_OK)
            return NULL;
    lb_var *x = lb_model_embed(g, m, in), *h;
    if (s->caches)
        h = lb_transformer_forward_cached(g, &m->transformer, lb_positional_add_at(g, &m->pos, x, positions), s->caches,
                                          &chunk);
    else if (s->h)
        h = x ? lstm_chunk(s, x, valid, ragged) : NULL;
    else
        h = x ? conv_chunk(s, x, valid) : NULL;
    lb_var *y = lb_model_head(g, m, h); /* [B, C, classes or 1] */
    if (!y)
        return NULL;
    int64_t shape[3] = {b, n, c->num_classes};
    lb_tensor *view = lb_tensor_reshape(y->value, c->num_classes > 0 ? 3 : 2, shape);
    lb_tensor *out = view ? lb_tensor_copy(view, c->dtype) : NULL;
    lb_tensor_free(view);
    return out;
}

/* Checks the chunk and runs it (the event step when it can, else the graph), writing
 * into `out` when given (one event: [B, classes] or [B] of the model dtype), else
 * returning a new [B, C, classes] / [B, C] tensor. Commits on success. */
static lb_tensor *step_chunk(lb_model_state *s, const lb_model_input *in, lb_tensor *out, lb_status *status)
{
    int64_t n = in && in->seq_len > 0 ? in->seq_len : 1;
    int one = n == 1;
    int64_t *valid = one ? s->valid1 : malloc((size_t)s->batch * sizeof *valid);
    int32_t *positions = one ? s->positions1 : malloc((size_t)(s->batch * n) * sizeof *positions);
    lb_tensor *made = NULL;
    int ragged = 0;
    *status = LB_ERR_VALUE;
    if (!valid || !positions)
        *status = lb_error(LB_ERR_MEMORY, "model step: out of memory");
    else if ((*status = chunk_check(s, in, valid, positions, &ragged)) == LB_OK) {
        if (one && s->x && !out) {
            const lb_model_config *c = &s->model->cfg;
            int64_t shape[3] = {s->batch, 1, c->num_classes};
            made = lb_tensor_empty(c->dtype, c->num_classes > 0 ? 3 : 2, shape);
            *status = made ? step_event(s, in, valid, positions, lb_tensor_data(made)) : lb_last_status();
        } else if (one && s->x) {
            *status = step_event(s, in, valid, positions, lb_tensor_data(out));
        } else {
            made = step_run(s, in, valid, positions, ragged);
            *status = made ? LB_OK : lb_last_status();
            if (made && out) { /* a feature model's event, into the caller's tensor */
                memcpy(lb_tensor_data(out), lb_tensor_data(made), (size_t)lb_tensor_numel(made) * lb_dtype_size(made->dtype));
                lb_tensor_free(made);
                made = NULL;
            }
        }
    }
    if (*status == LB_OK) {
        commit(s, valid);
    } else {
        lb_tensor_free(made);
        made = NULL;
        lb_error_context("a streaming step of a model with kind = %s", lb_model_kind_name(s->model->cfg.kind));
    }
    if (s->graph_used) {
        lb_graph_reset(s->graph);
        s->graph_used = 0;
    }
    if (!one) {
        free(valid);
        free(positions);
    }
    return made;
}

lb_tensor *lb_model_step_chunk(lb_model_state *s, const lb_model_input *in)
{
    if (!s) {
        lb_error(LB_ERR_VALUE, "model step: the state is NULL");
        return NULL;
    }
    lb_status st;
    return step_chunk(s, in, NULL, &st);
}

lb_status lb_model_step_into(lb_model_state *s, const int32_t *tokens, lb_tensor *out)
{
    if (!s)
        return lb_error(LB_ERR_VALUE, "model step: the state is NULL");
    const lb_model_config *c = &s->model->cfg;
    char so[128];
    int want = c->num_classes > 0 ? 2 : 1;
    if (!out || out->ndim != want || out->shape[0] != s->batch || (want == 2 && out->shape[1] != c->num_classes) ||
        out->dtype != c->dtype || !lb_tensor_is_contiguous(out))
        return lb_error(LB_ERR_SHAPE, "model step: out %s must be a contiguous %s tensor [B = %lld%s] of the model's dtype",
                        out ? lb_tensor_describe(out, so, sizeof so) : "NULL", lb_dtype_name(c->dtype),
                        (long long)s->batch, c->num_classes > 0 ? ", num_classes" : "");
    lb_model_input in = {s->batch, 1, tokens, NULL, NULL};
    lb_status st;
    step_chunk(s, &in, out, &st);
    return st;
}

lb_tensor *lb_model_step(lb_model_state *s, const int32_t *tokens)
{
    if (!s) {
        lb_error(LB_ERR_VALUE, "model step: the state is NULL");
        return NULL;
    }
    const lb_model_config *c = &s->model->cfg;
    int64_t shape[2] = {s->batch, c->num_classes};
    lb_tensor *out = lb_tensor_empty(c->dtype, c->num_classes > 0 ? 2 : 1, shape);
    if (!out || lb_model_step_into(s, tokens, out) != LB_OK) {
        lb_tensor_free(out);
        return NULL;
    }
    return out;
}

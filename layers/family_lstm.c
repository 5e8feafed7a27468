/* The "lstm" family (layers/family.h): a stack of torch.nn.LSTM-compatible layers
 * (layers/lstm.h; Hochreiter & Schmidhuber 1997, PyTorch's gate order i, f, g, o).
 *
 * Named dims: B batch (streams), C chunk events, L n_layers, D d_model (the embedding
 * width, the first layer's input), H hidden_size.
 *
 * Parameters (after the input's): "lstm.weight_ih_l<k>" [4H, D or H], "lstm.weight_hh_l<k>"
 * [4H, H], "lstm.bias_ih_l<k>" [4H], "lstm.bias_hh_l<k>" [4H], PyTorch's names and init.
 * Streaming state per stream: per layer (h, c), 2 L H values, whatever the length.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kernels/lstm.h"
#include "layers/model_internal.h"

/* ---- configuration ---- */

static int64_t body_width(const lb_model_config *c) { return c->hidden_size; }
static double layer_floats(const lb_model_config *c) { return (double)c->hidden_size; }
static double state_floats(const lb_model_config *c, int64_t t)
{
    (void)t;
    return 2.0 * c->n_layers * (double)c->hidden_size;
}

static void size(lb_model_config *c, const lb_family_size *s)
{
    c->d_model = 64; /* the embedding */
    c->n_layers = s->layers;
    c->hidden_size = s->width;
    c->forget_bias = 1.0; /* Jozefowicz et al. 2015 */
}

static void describe(const lb_model_config *c, char *text, size_t size)
{
    snprintf(text, size, "%d layer%s, hidden_size %lld%s", c->n_layers, c->n_layers == 1 ? "" : "s",
             (long long)c->hidden_size, c->forget_bias == 1.0 ? ", forget-gate bias 1" : "");
}

static lb_status check(const lb_model_config *c)
{
    if (c->n_layers > LB_LSTM_MAX_LAYERS)
        return lb_error(LB_ERR_VALUE, "model config: n_layers = %d exceeds the LSTM's maximum of %d", c->n_layers,
                        (int)LB_LSTM_MAX_LAYERS);
    return LB_OK;
}

/* Per layer and position the gates' products: 2 · 4H · (in + H), in = D for the first
 * layer, H above it. Every position is computed, whatever the head reads. */
static double flops(const lb_model_config *c, int64_t t, int64_t read, double *attention)
{
    (void)read;
    *attention = 0;
    const double h = (double)c->hidden_size, d = (double)c->d_model;
    return (double)t * 8 * h * ((d + h) + (c->n_layers - 1) * (h + h));
}

/* ---- parameters and forward ---- */

static lb_status build(lb_model *m, lb_rng *r_pos, lb_rng *r_body)
{
    (void)r_pos;
    const lb_model_config *c = &m->cfg;
    if (lb_lstm_init(&m->lstm, &m->params, "lstm", c->d_model, c->hidden_size, c->n_layers, c->dtype, r_body) != LB_OK)
        return lb_last_status();
    if (c->forget_bias != 0)
        lb_lstm_add_forget_bias(&m->lstm, c->forget_bias);
    return LB_OK;
}

static void model_free(lb_model *m) { (void)m; }

static lb_var *forward(lb_graph *g, const lb_model *m, lb_var *x, const lb_model_input *in, const lb_attn_queries *read,
                       int training, lb_rng *rng, lb_var **weights)
{
    (void)in, (void)training, (void)rng, (void)weights;
    lb_var *h = lb_lstm_forward(g, &m->lstm, x, NULL, NULL, NULL, NULL);
    return read ? lb_gather_positions(g, h, read) : h;
}

/* ---- streaming: (h, c) carried per layer ---- */

typedef struct lstm_state {
    lb_tensor *h, *c;           /* [L, B, H] carried state */
    lb_tensor *h_next, *c_next; /* the state after the current step */
    void **w_t;                 /* per layer W_ihᵀ [n_in, 4H] then W_hhᵀ [H, 4H] (2 L entries; NULL where
                                 * the float32 loops do not run) */
} lstm_state;

static int64_t scratch_width(const lb_model_config *c) { return 4 * c->hidden_size; }

static lb_status state_new(lb_model_state *s, const lb_stream_options *o)
{
    (void)o;
    const lb_model_config *c = &s->model->cfg;
    lstm_state *l = calloc(1, sizeof *l);
    if (!l)
        return lb_error(LB_ERR_MEMORY, "model state: out of memory");
    s->body = l;
    int64_t shape[3] = {c->n_layers, s->batch, c->hidden_size};
    if (!(l->h = lb_tensor_zeros(c->dtype, 3, shape)) || !(l->c = lb_tensor_zeros(c->dtype, 3, shape)) ||
        !(l->h_next = lb_tensor_zeros(c->dtype, 3, shape)) || !(l->c_next = lb_tensor_zeros(c->dtype, 3, shape)))
        return lb_last_status();
    return LB_OK;
}

/* W_ihᵀ and W_hhᵀ per layer, copies of the model's parameters made here (the model must
 * not change while the state is used, layers/stream.h). */
static lb_status work_new(lb_model_state *s)
{
    const lb_model *m = s->model;
    const lb_model_config *c = &m->cfg;
    const size_t es = lb_dtype_size(c->dtype);
    const int64_t h = c->hidden_size;
    lstm_state *l = s->body;
    if (!(l->w_t = calloc((size_t)(2 * c->n_layers), sizeof *l->w_t)))
        return lb_error(LB_ERR_MEMORY, "model state: out of memory");
    for (int i = 0; lb_k_lstm_step_uses_copies(c->dtype, 4 * h) && i < c->n_layers; i++) {
        const lb_tensor *w[2] = {m->lstm.weight_ih[i]->value, m->lstm.weight_hh[i]->value}; /* [4H, n] */
        for (int j = 0; j < 2; j++) {
            size_t bytes = (size_t)lb_tensor_numel(w[j]) * es;
            if (!(l->w_t[2 * i + j] = malloc(bytes)))
                return lb_error(LB_ERR_MEMORY, "model state: out of memory for the LSTM's weight copies");
            lb_k_lstm_transpose_weight(c->dtype, 4 * h, w[j]->shape[1], lb_tensor_data(w[j]), l->w_t[2 * i + j]);
            s->work_bytes += bytes;
        }
    }
    return LB_OK;
}

static void state_free(lb_model_state *s)
{
    lstm_state *l = s->body;
    if (!l)
        return;
    for (int i = 0; l->w_t && i < 2 * s->model->cfg.n_layers; i++)
        free(l->w_t[i]);
    free(l->w_t);
    lb_tensor_free(l->h);
    lb_tensor_free(l->c);
    lb_tensor_free(l->h_next);
    lb_tensor_free(l->c_next);
    free(l);
}

static void state_reset(lb_model_state *s, int64_t b)
{
    lstm_state *l = s->body;
    lb_model_zero_stream_rows(l->h, 1, b);
    lb_model_zero_stream_rows(l->c, 1, b);
}

static size_t state_bytes(const lb_model_state *s, int64_t b)
{
    (void)b;
    const lb_model_config *c = &s->model->cfg;
    return 2 * (size_t)c->n_layers * (size_t)c->hidden_size * lb_dtype_size(c->dtype);
}

static size_t state_allocated(const lb_model_state *s)
{
    const lstm_state *l = s->body;
    return lb_model_tensor_bytes(l->h) + lb_model_tensor_bytes(l->c) + lb_model_tensor_bytes(l->h_next) +
           lb_model_tensor_bytes(l->c_next);
}

/* The LSTM over the chunk from the carried (h, c); the state after the chunk goes to
 * h_next, c_next. x [B, C, D] -> [B, C, H]. Streams with fewer valid events than C
 * are run one event at a time so that each keeps the state after its last event. */
static lb_var *chunk(lb_model_state *s, lb_var *x, const lb_decode_chunk *ch, int ragged)
{
    lb_graph *g = s->graph;
    const lb_lstm *net = &s->model->lstm;
    lstm_state *l = s->body;
    lb_var *hn = NULL, *cn = NULL;
    if (!ragged) {
        lb_var *out = lb_lstm_forward(g, net, x, lb_input_copy(g, l->h, 0), lb_input_copy(g, l->c, 0), &hn, &cn);
        if (!out || lb_tensor_copy_into(l->h_next, hn->value) != LB_OK ||
            lb_tensor_copy_into(l->c_next, cn->value) != LB_OK)
            return NULL;
        return out;
    }
    int64_t n = x->value->shape[1];
    lb_var **outs = calloc((size_t)n, sizeof *outs);
    if (!outs || lb_tensor_copy_into(l->h_next, l->h) != LB_OK || lb_tensor_copy_into(l->c_next, l->c) != LB_OK) {
        free(outs);
        lb_error(LB_ERR_MEMORY, "lstm step: out of memory");
        return NULL;
    }
    lb_var *out = NULL;
    int64_t t = 0;
    for (; t < n; t++) {
        outs[t] = lb_lstm_forward(g, net, lb_slice(g, x, 1, t, t + 1, 1), lb_input_copy(g, l->h_next, 0),
                                  lb_input_copy(g, l->c_next, 0), &hn, &cn); /* [B, 1, H] */
        if (!outs[t])
            break;
        for (int64_t b = 0; b < s->batch; b++)
            if (t < ch->valid[b]) {
                lb_model_copy_stream_rows(l->h_next, hn->value, b);
                lb_model_copy_stream_rows(l->c_next, cn->value, b);
            }
    }
    if (t == n)
        out = lb_concat(g, (int)n, outs, 1);
    free(outs);
    return out;
}

/* One event per stream: layer k reads s->x (k = 0) or layer k-1's new h, carries (h, c)
 * into (h_next, c_next); returns the last layer's h [B, H]. */
static const void *event(lb_model_state *s, const lb_decode_chunk *ch)
{
    const lb_model_config *c = &s->model->cfg;
    const lb_lstm *net = &s->model->lstm;
    lstm_state *l = s->body;
    const int64_t b = s->batch, hs = c->hidden_size;
    const size_t layer = (size_t)(b * hs) * lb_dtype_size(c->dtype);
    const char *in = s->x;
    int64_t n_in = c->d_model;
    for (int k = 0; k < c->n_layers; k++) {
        char *h = (char *)lb_tensor_data(l->h_next) + (size_t)k * layer;
        lb_k_lstm_step(c->dtype, b, n_in, hs, in, lb_tensor_data(net->weight_ih[k]->value), l->w_t[2 * k],
                       lb_tensor_data(net->bias_ih[k]->value), lb_tensor_data(net->bias_hh[k]->value),
                       lb_tensor_data(net->weight_hh[k]->value), l->w_t[2 * k + 1],
                       (const char *)lb_tensor_data(l->h) + (size_t)k * layer,
                       (const char *)lb_tensor_data(l->c) + (size_t)k * layer, s->f, h,
                       (char *)lb_tensor_data(l->c_next) + (size_t)k * layer);
        in = h;
        n_in = hs;
    }
    for (int64_t bi = 0; bi < b; bi++)
        if (!ch->valid[bi]) { /* no event: the stream keeps its (h, c) */
            lb_model_copy_stream_rows(l->h_next, l->h, bi);
            lb_model_copy_stream_rows(l->c_next, l->c, bi);
        }
    return (const char *)lb_tensor_data(l->h_next) + (size_t)(c->n_layers - 1) * layer;
}

static void commit(lb_model_state *s, const int64_t *valid)
{
    (void)valid; /* chunk and event kept each stream's state after its last valid event */
    lstm_state *l = s->body;
    lb_tensor *t = l->h;
    l->h = l->h_next;
    l->h_next = t;
    t = l->c;
    l->c = l->c_next;
    l->c_next = t;
}

static const lb_family_ops ops = {check,     build,       NULL, model_free,  forward,     scratch_width,
                                  state_new, work_new,    state_free,  state_reset, state_bytes, state_allocated,
                                  NULL,      chunk,       event,       commit,      NULL};

const lb_family lb_family_lstm = {LB_MODEL_LSTM, "lstm", "a torch.nn.LSTM-compatible stack", 0, NULL,
                                  lb_family_always, lb_family_any_length, lb_family_never,  body_width, layer_floats, state_floats, size,
                                  describe,      &ops,          flops};

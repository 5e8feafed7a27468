/* Streaming inference (layers/stream.h). Named dims: B streams, C chunk events,
 * L layers, D d_model, H hidden_size, R_i = (K - 1) 2^i the conv history of layer i. */
#include "layers/stream.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "layers/model_internal.h"
#include "tensor/kernels_stream.h"

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
};

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
    free(s->events);
    free(s);
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
    if (!(s->events = calloc((size_t)streams, sizeof *s->events)) || !(s->graph = lb_graph_new())) {
        lb_error(LB_ERR_MEMORY, "model state: out of memory for %lld streams", (long long)streams);
        lb_model_state_free(s);
        return NULL;
    }
    lb_graph_set_grad_enabled(s->graph, 0);
    if (state_build(s, &o) != LB_OK) {
        lb_error_context("model state (%s, %lld streams)", lb_model_kind_name(c->kind), (long long)streams);
        lb_model_state_free(s);
        return NULL;
    }
    return s;
}

void lb_model_state_reset(lb_model_state *s, int64_t stream)
{
    LB_CHECK_ARG(s);
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
    return stream >= 0 && stream < s->batch ? s->events[stream] : 0;
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
    if (stream < 0 || stream >= s->batch)
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
                                          "positions (--pos learned) end at max_seq_len = %lld, the length it was "
                                          "trained with (sinusoidal, rotary or no positions have no such limit)",
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

/* The body and head on the chunk; NULL on error with nothing committed. */
static lb_tensor *step_run(lb_model_state *s, const lb_model_input *in, const int64_t *valid, const int32_t *positions,
                           int ragged)
{
    lb_graph *g = s->graph;
    const lb_model *m = s->model;
    const lb_model_config *c = &m->cfg;
    int64_t b = in->batch, n = in->seq_len;
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
    lb_var *y = lb_linear_forward(g, &m->head, h); /* [B, C, classes or 1] */
    if (!y)
        return NULL;
    int64_t shape[3] = {b, n, c->num_classes};
    lb_tensor *view = lb_tensor_reshape(y->value, c->num_classes > 0 ? 3 : 2, shape);
    lb_tensor *out = view ? lb_tensor_copy(view, c->dtype) : NULL;
    lb_tensor_free(view);
    return out;
}

lb_tensor *lb_model_step_chunk(lb_model_state *s, const lb_model_input *in)
{
    if (!s) {
        lb_error(LB_ERR_VALUE, "model step: the state is NULL");
        return NULL;
    }
    int64_t n = in && in->seq_len > 0 ? in->seq_len : 1;
    int64_t *valid = malloc((size_t)s->batch * sizeof *valid);
    int32_t *positions = malloc((size_t)(s->batch * n) * sizeof *positions);
    lb_tensor *out = NULL;
    int ragged = 0;
    if (!valid || !positions)
        lb_error(LB_ERR_MEMORY, "model step: out of memory");
    else if (chunk_check(s, in, valid, positions, &ragged) == LB_OK)
        out = step_run(s, in, valid, positions, ragged);
    if (out)
        commit(s, valid);
    else
        lb_error_context("model step (%s)", lb_model_kind_name(s->model->cfg.kind));
    lb_graph_reset(s->graph);
    free(valid);
    free(positions);
    return out;
}

lb_tensor *lb_model_step(lb_model_state *s, const int32_t *tokens)
{
    if (!s) {
        lb_error(LB_ERR_VALUE, "model step: the state is NULL");
        return NULL;
    }
    lb_model_input in = {s->batch, 1, tokens, NULL, NULL};
    lb_tensor *out = lb_model_step_chunk(s, &in); /* [B, 1, classes] or [B, 1] */
    if (!out)
        return NULL;
    const lb_model_config *c = &s->model->cfg;
    int64_t shape[2] = {s->batch, c->num_classes};
    lb_tensor *flat = lb_tensor_reshape(out, c->num_classes > 0 ? 2 : 1, shape);
    lb_tensor_free(out);
    return flat;
}

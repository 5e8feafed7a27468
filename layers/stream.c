/* Streaming inference (layers/stream.h): what every family shares (the chunk's checks,
 * the embedding, the head, commit and the event counts); each family's state and step
 * are in its file (layers/family_*.c). Named dims: B streams, C chunk events, D d_model. */
#include "layers/stream.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "layers/model_internal.h"

/* ---- helpers the families' streaming code shares (layers/model_internal.h) ---- */

size_t lb_model_tensor_bytes(const lb_tensor *t)
{
    return t ? (size_t)lb_tensor_numel(t) * lb_dtype_size(t->dtype) : 0;
}

void lb_model_copy_stream_rows(lb_tensor *dst, const lb_tensor *src, int64_t b)
{
    int64_t l = dst->shape[0], batch = dst->shape[1];
    size_t row = (size_t)dst->shape[2] * lb_dtype_size(dst->dtype);
    for (int64_t i = 0; i < l; i++)
        memcpy((char *)lb_tensor_data(dst) + (size_t)(i * batch + b) * row,
               (const char *)lb_tensor_data(src) + (size_t)(i * batch + b) * row, row);
}

void lb_model_zero_stream_rows(lb_tensor *t, int batch_dim, int64_t b)
{
    int64_t outer = 1, inner = 1;
    for (int i = 0; i < batch_dim; i++)
        outer *= t->shape[i];
    for (int i = batch_dim + 1; i < t->ndim; i++)
        inner *= t->shape[i];
    size_t row = (size_t)inner * lb_dtype_size(t->dtype);
    for (int64_t o = 0; o < outer; o++)
        memset((char *)lb_tensor_data(t) + (size_t)(o * t->shape[batch_dim] + b) * row, 0, row);
}

/* ---- the state ---- */

void lb_model_state_free(lb_model_state *s)
{
    if (!s)
        return;
    s->model->family->ops->state_free(s);
    lb_graph_free(s->graph);
    free(s->x);
    free(s->a);
    free(s->f);
    free(s->valid1);
    free(s->positions1);
    free(s->events);
    free(s);
}

/* The buffers of the graph-free step (token models of a family with an event step; other
 * steps go through the graph): the rows every family uses, then the family's own. */
static lb_status work_build(lb_model_state *s)
{
    const lb_model *m = s->model;
    const lb_model_config *c = &m->cfg;
    if (!m->embedding || !m->family->ops->event)
        return LB_OK; /* the step goes through the graph */
    const size_t es = lb_dtype_size(c->dtype);
    const int64_t b = s->batch, d = c->d_model, width = m->family->body_width(c);
    const int64_t wide = d > width ? d : width, scratch = m->family->ops->scratch_width(c);
    const int64_t widest = scratch > wide ? scratch : wide;
    if (!(s->x = calloc((size_t)(b * d), es)) || !(s->a = calloc((size_t)(b * wide), es)) ||
        !(s->f = calloc((size_t)(b * widest), es)))
        return lb_error(LB_ERR_MEMORY, "model state: out of memory for the step's buffers");
    s->work_bytes = (size_t)(b * (d + wide + widest)) * es;
    return m->family->ops->work_new ? m->family->ops->work_new(s) : LB_OK;
}

static lb_status state_build(lb_model_state *s, const lb_stream_options *o)
{
    if (s->model->family->ops->state_new(s, o) != LB_OK || work_build(s) != LB_OK)
        return lb_last_status();
    if (o->max_bytes > 0 && lb_model_state_allocated(s) > o->max_bytes)
        return lb_error(LB_ERR_MEMORY, "model state: %zu bytes for %lld streams are over max_bytes = %zu",
                        lb_model_state_allocated(s), (long long)s->batch, o->max_bytes);
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
    if (!m->family->is_causal(c)) {
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
    for (int64_t b = 0; b < s->batch; b++) {
        if (stream >= 0 && b != stream)
            continue;
        s->events[b] = 0;
        s->model->family->ops->state_reset(s, b);
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
    const lb_family_ops *ops = s->model->family->ops;
    return ops->kv_cache ? ops->kv_cache(s, layer) : NULL;
}

size_t lb_model_state_bytes(const lb_model_state *s, int64_t stream)
{
    LB_CHECK_ARG(s, 0);
    if (check_stream(s, stream, 0, "lb_model_state_bytes") != LB_OK)
        return 0;
    return s->model->family->ops->state_bytes(s, stream);
}

size_t lb_model_state_allocated(const lb_model_state *s)
{
    LB_CHECK_ARG(s, 0);
    return s->model->family->ops->state_allocated(s);
}

size_t lb_model_state_work_bytes(const lb_model_state *s)
{
    LB_CHECK_ARG(s, 0);
    return s->work_bytes;
}

/* ---- one step ---- */

/* Checks the chunk and fills valid [B] and positions [B, C]. */
static lb_status chunk_check(const lb_model_state *s, const lb_model_input *in, int64_t *valid, int32_t *positions,
                             int *ragged)
{
    const int64_t max_positions = s->model->family->max_positions(&s->model->cfg);
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
        if (max_positions > 0 && s->events[b] + valid[b] > max_positions)
            return lb_error(LB_ERR_VALUE, "model step: stream %lld would reach %lld events, but the model's learned "
                                          "positions (--pos learned) end at max_seq_len = %lld, the rows of its "
                                          "position table (rows past the training data's length were never "
                                          "trained; sinusoidal, rotary or no positions have no such limit)",
                            (long long)b, (long long)(s->events[b] + valid[b]), (long long)max_positions);
        for (int64_t i = 0; i < n; i++) /* padding rows sit at the stream's last valid position */
            positions[b * n + i] = (int32_t)(s->events[b] + (i < valid[b] ? i : (valid[b] > 0 ? valid[b] - 1 : 0)));
    }
    return LB_OK;
}

/* Makes the step permanent for every stream. */
static void commit(lb_model_state *s, const int64_t *valid)
{
    s->model->family->ops->commit(s, valid);
    for (int64_t b = 0; b < s->batch; b++)
        s->events[b] += valid[b];
}

/* ---- one event per stream without a graph ----
 * The same computation as step_run for C = 1, straight into the state's buffers:
 * embedding (and positions) -> body -> head, one row per stream. Streams with no
 * event in this chunk (valid 0) are computed like the others and then left as they
 * were (their output row is unspecified, as in step_run). */

/* One event per stream (in->seq_len = 1, token model), the head's output into out
 * [B, classes] (regression [B]); an error commits nothing. */
static lb_status step_event(lb_model_state *s, const lb_model_input *in, const int64_t *valid,
                            const int32_t *positions, void *out)
{
    const lb_model *m = s->model;
    const lb_model_config *c = &m->cfg;
    const int64_t b = s->batch, d = c->d_model;
    const size_t row = (size_t)d * lb_dtype_size(c->dtype);
    const lb_family_ops *ops = m->family->ops;
    if (ops->reserve && ops->reserve(s, 1) != LB_OK)
        return lb_last_status();
    const char *emb = lb_tensor_data(m->embedding->value); /* [V, D] */
    for (int64_t bi = 0; bi < b; bi++)
        memcpy((char *)s->x + (size_t)bi * row, emb + (size_t)in->tokens[bi] * row, row);
    lb_decode_chunk chunk = {b, 1, valid, positions};
    const void *h = ops->event(s, &chunk);
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
    const lb_family_ops *ops = m->family->ops;
    if (ops->reserve && ops->reserve(s, n) != LB_OK)
        return NULL;
    lb_var *x = lb_model_embed(g, m, in);
    lb_var *h = x ? ops->chunk(s, x, &chunk, ragged) : NULL;
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

/* Attention layers. Named dims as in attention.h: B, T, Tq, Tk, H, P, d_model,
 * d_k, d_v, d_head. */
#include "layers/attention.h"

#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kernels/attention.h"
#include "kernels/stream.h"
#include "layers/linear.h"
#include "layers/positional.h"
#include "tensor/kernels.h"

/* Rotary base of RoFormer and GPT-NeoX. */
#define ROTARY_BASE 10000.0

/* ---- gathering selected rows ---- x [B, T, D] -> [B, P, D] */

/* Checks positions [B, P] against T; names the first bad one. */
static lb_status check_positions(const char *who, const lb_attn_queries *q, int64_t b, int64_t t)
{
    if (!q->positions || q->count < 1)
        return lb_error(LB_ERR_VALUE, "%s: selected queries need positions [B, P] and a count P >= 1 (got %s, P = %lld)",
                        who, q->positions ? "positions" : "NULL positions", (long long)q->count);
    for (int64_t bi = 0; bi < b; bi++)
        for (int64_t p = 0; p < q->count; p++) {
            int32_t pos = q->positions[bi * q->count + p];
            if (pos < 0 || pos >= t)
                return lb_error(LB_ERR_VALUE, "%s: query position [%lld, %lld] = %d is outside [0, T = %lld)", who,
                                (long long)bi, (long long)p, (int)pos, (long long)t);
        }
    return LB_OK;
}

lb_var *lb_gather_positions(lb_graph *g, lb_var *x, const lb_attn_queries *queries)
{
    LB_CHECK_INPUT(x, NULL);
    if (!x)
        return NULL;
    const lb_tensor *tx = x->value;
    char sx[128];
    if (tx->ndim != 3) {
        lb_error(LB_ERR_SHAPE, "gather_positions: x %s must be [B, T, D]", lb_tensor_describe(tx, sx, sizeof sx));
        return NULL;
    }
    int64_t b = tx->shape[0], t = tx->shape[1];
    if (!queries) {
        lb_error(LB_ERR_VALUE, "gather_positions: queries is NULL for x %s", lb_tensor_describe(tx, sx, sizeof sx));
        return NULL;
    }
    if (check_positions("gather_positions", queries, b, t) != LB_OK)
        return NULL;
    int64_t p = queries->count, shape[3] = {b, p, t};
    lb_tensor *onehot = lb_tensor_zeros(tx->dtype, 3, shape);
    if (!onehot)
        return NULL;
    LB_DISPATCH(tx->dtype, T, {
        T *po = lb_tensor_data(onehot);
        for (int64_t i = 0; i < b * p; i++)
            po[i * t + queries->positions[i]] = (T)1;
    });
    return lb_matmul(g, lb_input(g, onehot, 0), x);
}

/* ---- scaled dot-product attention ---- */

/* The fused op takes q, k, v with equal leading dims; anything else (broadcast batch
 * dims, which lb_matmul allows) goes through the materialized path. */
static int fused_fits(const lb_tensor *q, const lb_tensor *k, const lb_tensor *v)
{
    int nd = q->ndim;
    if (nd < 2 || k->ndim != nd || v->ndim != nd || v->shape[nd - 1] < 1)
        return 0;
    for (int d = 0; d < nd - 2; d++)
        if (k->shape[d] != q->shape[d] || v->shape[d] != q->shape[d])
            return 0;
    return 1;
}

lb_var *lb_attention(lb_graph *g, lb_var *query, lb_var *key, lb_var *value, const lb_attn_mask *mask,
                     const lb_attn_queries *queries, lb_var **weights)
{
    LB_CHECK_INPUT(value, NULL);
    LB_CHECK_INPUT(query, NULL);
    LB_CHECK_INPUT(key, NULL);
    if (weights)
        *weights = NULL;
    if (!query || !key || !value)
        return NULL;
    const lb_tensor *tq = query->value, *tk = key->value;
    char sq[128];
    if (tq->ndim < 2 || tq->shape[tq->ndim - 1] < 1) {
        lb_error(LB_ERR_SHAPE, "attention: query %s must be [B, ..., Tq, d_k] with d_k >= 1",
                 lb_tensor_describe(tq, sq, sizeof sq));
        return NULL;
    }
    double scale = 1.0 / sqrt((double)tq->shape[tq->ndim - 1]);
    lb_attn_mask m = mask ? *mask : (lb_attn_mask){0};
    if (queries) {
        /* The selected queries keep the causal and window limits of their own positions. */
        int nd = tq->ndim;
        if (nd < 3 || queries->count != tq->shape[nd - 2] || tk->ndim < 2) {
            lb_error(LB_ERR_SHAPE, "attention: %lld selected queries do not fit the query %s [B, ..., P, d_k]",
                     (long long)queries->count, lb_tensor_describe(tq, sq, sizeof sq));
            return NULL;
        }
        if (check_positions("attention", queries, tq->shape[0], tk->shape[tk->ndim - 2]) != LB_OK)
            return NULL;
        m.query_positions = queries->positions;
    }
    if (!weights && fused_fits(tq, tk, value->value))
        return lb_attention_fused(g, query, key, value, &m, scale); /* [B, ..., Tq, d_v] */
    /* Materialized: the weights [B, ..., Tq, Tk] are a graph variable. */
    lb_var *scores = lb_matmul_t(g, query, 0, key, 1); /* [B, ..., Tq, Tk] */
    lb_var *w = lb_masked_softmax(g, scores, &m, scale);
    if (weights)
        *weights = w;
    return lb_matmul(g, w, value); /* [B, ..., Tq, d_v] */
}

/* Checks x [B, T, d_model] for layer `kind` named `name`. */
static lb_status check_input(const char *kind, const char *name, const lb_var *x, int64_t d_model)
{
    const lb_tensor *tx = x->value;
    if (tx->ndim == 3 && tx->shape[2] == d_model)
        return LB_OK;
    char sx[128];
    return lb_error(LB_ERR_SHAPE, "%s '%s': x %s must be [B, T, d_model = %lld]", kind, name,
                    lb_tensor_describe(tx, sx, sizeof sx), (long long)d_model);
}

/* ---- single-head self-attention ---- */

lb_status lb_self_attention_init(lb_self_attention *a, lb_params *ps, const char *prefix, int64_t d_model,
                                 int64_t d_k, int64_t d_v, lb_dtype dtype, lb_rng *rng)
{
    LB_CHECK_ARG(a, LB_ERR_VALUE);
    LB_CHECK_ARG(ps, LB_ERR_VALUE);
    memset(a, 0, sizeof *a);
    snprintf(a->name, sizeof a->name, "%s", prefix && prefix[0] ? prefix : "attn");
    if (d_model < 1 || d_k < 1 || d_v < 1)
        return lb_error(LB_ERR_VALUE, "self-attention '%s': d_model = %lld, d_k = %lld and d_v = %lld must be >= 1",
                        a->name, (long long)d_model, (long long)d_k, (long long)d_v);
    a->d_model = d_model;
    a->d_k = d_k;
    a->d_v = d_v;
    int64_t sk[2] = {d_model, d_k}, sv[2] = {d_model, d_v};
    if (!(a->w_q = lb_params_add(ps, prefix, "w_q", dtype, 2, sk)) ||
        !(a->w_k = lb_params_add(ps, prefix, "w_k", dtype, 2, sk)) ||
        !(a->w_v = lb_params_add(ps, prefix, "w_v", dtype, 2, sv)))
        return lb_last_status();
    if (rng) {
        lb_init_xavier_uniform(a->w_q, rng, d_model, d_k);
        lb_init_xavier_uniform(a->w_k, rng, d_model, d_k);
        lb_init_xavier_uniform(a->w_v, rng, d_model, d_v);
    }
    return LB_OK;
}

lb_var *lb_self_attention_forward(lb_graph *g, const lb_self_attention *a, lb_var *x, const lb_attn_mask *mask,
                                  const lb_attn_queries *queries, lb_var **weights)
{
    LB_CHECK_ARG(g, NULL);
    LB_CHECK_ARG(a, NULL);
    LB_CHECK_INPUT(x, NULL);
    if (weights)
        *weights = NULL;
    if (!x)
        return NULL;
    if (check_input("self-attention", a->name, x, a->d_model) != LB_OK)
        return NULL;
    lb_var *xq = queries ? lb_gather_positions(g, x, queries) : x;
    lb_var *q = lb_affine(g, xq, a->w_q, NULL, "self-attention w_q"); /* [B, Tq, d_k] */
    lb_var *k = lb_affine(g, x, a->w_k, NULL, "self-attention w_k");  /* [B, T, d_k] */
    lb_var *v = lb_affine(g, x, a->w_v, NULL, "self-attention w_v");  /* [B, T, d_v] */
    lb_var *out = lb_attention(g, q, k, v, mask, queries, weights);
    if (!out)
        lb_error_context("self-attention '%s'", a->name);
    return out;
}

/* ---- multi-head self-attention ---- */

lb_status lb_mha_init(lb_mha *a, lb_params *ps, const char *prefix, int64_t d_model, int n_heads, int bias, int rotary,
                      lb_dtype dtype, lb_rng *rng)
{
    LB_CHECK_ARG(a, LB_ERR_VALUE);
    LB_CHECK_ARG(ps, LB_ERR_VALUE);
    memset(a, 0, sizeof *a);
    snprintf(a->name, sizeof a->name, "%s", prefix && prefix[0] ? prefix : "attn");
    if (d_model < 1)
        return lb_error(LB_ERR_VALUE, "multi-head attention '%s': d_model = %lld must be >= 1", a->name,
                        (long long)d_model);
    if (n_heads < 1 || d_model % n_heads != 0)
        return lb_error(LB_ERR_VALUE,
                        "multi-head attention '%s': n_heads = %d must be >= 1 and divide d_model = %lld "
                        "(each head is d_model / n_heads wide)",
                        a->name, n_heads, (long long)d_model);
    if (rotary && (d_model / n_heads) % 2 != 0)
        return lb_error(LB_ERR_VALUE,
                        "multi-head attention '%s': rotary positions need an even d_head, but d_model / n_heads = "
                        "%lld / %d = %lld",
                        a->name, (long long)d_model, n_heads, (long long)(d_model / n_heads));
    a->d_model = d_model;
    a->n_heads = n_heads;
    a->d_head = d_model / n_heads;
    a->rotary = rotary;
    int64_t sw[2] = {d_model, d_model}, sb[1] = {d_model};
    lb_var **w[4] = {&a->w_q, &a->w_k, &a->w_v, &a->w_o}, **b[4] = {&a->b_q, &a->b_k, &a->b_v, &a->b_o};
    static const char *wn[4] = {"w_q", "w_k", "w_v", "w_o"}, *bn[4] = {"b_q", "b_k", "b_v", "b_o"};
    for (int i = 0; i < 4; i++)
        if (!(*w[i] = lb_params_add(ps, prefix, wn[i], dtype, 2, sw)))
            return lb_last_status();
    for (int i = 0; bias && i < 4; i++)
        if (!(*b[i] = lb_params_add(ps, prefix, bn[i], dtype, 1, sb)))
            return lb_last_status();
    for (int i = 0; rng && i < 4; i++)
        lb_init_xavier_uniform(*w[i], rng, d_model, d_model);
    return LB_OK;
}

static const char *const length_scale_names[] = {"none", "log-n", "scalable"};

const char *lb_length_scale_name(lb_length_scale kind)
{
    return kind >= LB_LENGTH_SCALE_NONE && kind <= LB_LENGTH_SCALE_SCALABLE ? length_scale_names[kind] : "unknown";
}

lb_status lb_length_scale_parse(const char *name, lb_length_scale *out)
{
    for (int i = 0; name && i < 3; i++)
        if (strcmp(name, length_scale_names[i]) == 0) {
            *out = (lb_length_scale)i;
            return LB_OK;
        }
    return lb_error(LB_ERR_VALUE, "softmax length scaling '%s' is not one of none, log-n, scalable",
                    name ? name : "(null)");
}

lb_status lb_mha_set_length_scale(lb_mha *a, lb_params *ps, const char *prefix, lb_length_scale kind,
                                  int64_t reference_keys, lb_dtype dtype)
{
    LB_CHECK_ARG(a, LB_ERR_VALUE);
    LB_CHECK_ARG(ps, LB_ERR_VALUE);
    if (kind < LB_LENGTH_SCALE_NONE || kind > LB_LENGTH_SCALE_SCALABLE)
        return lb_error(LB_ERR_VALUE, "multi-head attention '%s': length scale %d is not none, log-n or scalable",
                        a->name, (int)kind);
    if (kind == LB_LENGTH_SCALE_NONE)
        return LB_OK;
    if (reference_keys < 2)
        return lb_error(LB_ERR_VALUE, "multi-head attention '%s': the reference length of the %s length scale is %lld; "
                        "it must be >= 2 (ln N normalises the scale)",
                        a->name, lb_length_scale_name(kind), (long long)reference_keys);
    if (a->length_scale != LB_LENGTH_SCALE_NONE)
        return lb_error(LB_ERR_STATE, "multi-head attention '%s': the length scale is already set", a->name);
    a->length_scale = kind;
    a->log_reference = log((double)reference_keys);
    if (kind != LB_LENGTH_SCALE_SCALABLE)
        return LB_OK;
    int64_t s[1] = {a->n_heads};
    if (!(a->softmax_scale = lb_params_add(ps, prefix, "softmax_scale", dtype, 1, s)))
        return lb_last_status();
    lb_tensor_fill(a->softmax_scale->value, 1.0 / a->log_reference);
    return LB_OK;
}

/* ln(n) of query i of item b, n = the keys it may see under the mask's causal, window
 * and key_lengths limits (see lb_length_scale), into logn [B, Tq]. */
static void log_key_counts(int64_t B, int64_t Tq, int64_t Tk, const lb_attn_mask *mask, const lb_attn_queries *queries,
                           double *logn)
{
    for (int64_t b = 0; b < B; b++)
        for (int64_t i = 0; i < Tq; i++) {
            int64_t n = Tk;
            if (mask && (mask->causal || mask->window > 0)) {
                int64_t pos = queries ? queries->positions[b * Tq + i] : i + (Tk - Tq);
                n = pos + 1;
                if (mask->window > 0 && n > mask->window)
                    n = mask->window;
            }
            if (mask && mask->key_lengths && n > mask->key_lengths[b])
                n = mask->key_lengths[b];
            logn[b * Tq + i] = n > 1 ? log((double)n) : 0.0;
        }
}

/* q [B, H, Tq, d_head] times the length scale f of each query: ln(n) / ln(N), or the
 * per-head s times ln(n); logn [B, Tq] holds ln(n). */
static lb_var *apply_length_scale(lb_graph *g, const lb_mha *a, lb_var *q, const double *logn)
{
    const int64_t *s = q->value->shape;
    int64_t shape[4] = {s[0], 1, s[2], 1};
    lb_var *factor = lb_input(g, lb_tensor_from_doubles(q->value->dtype, 4, shape, logn), 0); /* [B, 1, Tq, 1] */
    if (!a->softmax_scale) {
        factor = lb_scale(g, factor, 1.0 / a->log_reference);
    } else {
        int64_t hs[4] = {1, a->n_heads, 1, 1};
        factor = lb_mul(g, factor, lb_reshape(g, a->softmax_scale, 4, hs)); /* [B, H, Tq, 1] */
    }
    return lb_mul(g, q, factor);
}

/* The length-scaled queries of lb_mha_forward (q unchanged without a length scale). */
static lb_var *scale_by_length(lb_graph *g, const lb_mha *a, lb_var *q, int64_t Tk, const lb_attn_mask *mask,
                               const lb_attn_queries *queries)
{
    if (!q || a->length_scale == LB_LENGTH_SCALE_NONE)
        return q;
    const int64_t *s = q->value->shape;
    double *logn = malloc((size_t)(s[0] * s[2]) * sizeof *logn);
    if (!logn) {
        lb_error(LB_ERR_MEMORY, "attention length scale: out of memory");
        return NULL;
    }
    log_key_counts(s[0], s[2], Tk, mask, queries, logn);
    lb_var *out = apply_length_scale(g, a, q, logn);
    free(logn);
    return out;
}

/* [B, T, d_model] -> [B, H, T, d_head] */
static lb_var *split_heads(lb_graph *g, lb_var *x, int64_t h, int64_t dh)
{
    if (!x)
        return NULL;
    static const int perm[4] = {0, 2, 1, 3};
    int64_t s[4] = {x->value->shape[0], x->value->shape[1], h, dh};
    return lb_permute(g, lb_reshape(g, x, 4, s), perm);
}

/* [B, H, T, d_head] -> [B, T, d_model] */
static lb_var *merge_heads(lb_graph *g, lb_var *x)
{
    if (!x)
        return NULL;
    static const int perm[4] = {0, 2, 1, 3};
    const int64_t *s = x->value->shape;
    int64_t m[3] = {s[0], s[2], s[1] * s[3]};
    return lb_reshape(g, lb_permute(g, x, perm), 3, m);
}

lb_var *lb_mha_forward(lb_graph *g, const lb_mha *a, lb_var *x, const lb_attn_mask *mask,
                       const lb_attn_queries *queries, lb_var **weights)
{
    LB_CHECK_ARG(g, NULL);
    LB_CHECK_ARG(a, NULL);
    LB_CHECK_INPUT(x, NULL);
    if (weights)
        *weights = NULL;
    if (!x)
        return NULL;
    if (check_input("multi-head attention", a->name, x, a->d_model) != LB_OK)
        return NULL;
    int64_t h = a->n_heads, dh = a->d_head;
    lb_var *xq = queries ? lb_gather_positions(g, x, queries) : x;
    lb_var *q = split_heads(g, lb_affine(g, xq, a->w_q, a->b_q, "multi-head attention w_q"), h, dh);
    lb_var *k = split_heads(g, lb_affine(g, x, a->w_k, a->b_k, "multi-head attention w_k"), h, dh);
    lb_var *v = split_heads(g, lb_affine(g, x, a->w_v, a->b_v, "multi-head attention w_v"), h, dh);
    if (a->rotary) {
        q = lb_rotary(g, q, queries ? queries->positions : NULL, ROTARY_BASE);
        k = lb_rotary(g, k, NULL, ROTARY_BASE);
    }
    q = scale_by_length(g, a, q, x->value->shape[1], mask, queries);
    lb_var *heads = lb_attention(g, q, k, v, mask, queries, weights); /* [B, H, Tq, d_head] */
    lb_var *out = lb_affine(g, merge_heads(g, heads), a->w_o, a->b_o, "multi-head attention w_o");
    if (!out)
        lb_error_context("multi-head attention '%s'", a->name);
    return out;
}

/* ---- decoding over a key-value cache ---- cache [B, H, capacity, d_head] */

static size_t cache_bytes_for(const lb_kv_cache *c, int64_t capacity)
{
    return 2 * (size_t)c->batch * (size_t)c->n_heads * (size_t)capacity * (size_t)c->d_head * lb_dtype_size(c->dtype);
}

/* New key and value buffers of `capacity` rows holding the current rows. */
static lb_status cache_resize(lb_kv_cache *c, int64_t capacity)
{
    if (capacity > INT32_MAX || (c->max_capacity > 0 && capacity > c->max_capacity)) {
        int64_t limit = c->max_capacity > 0 && c->max_capacity < INT32_MAX ? c->max_capacity : INT32_MAX;
        return lb_error(LB_ERR_MEMORY,
                        "key-value cache: %lld events per stream (%zu bytes for %lld streams) is over the limit of "
                        "%lld events (%zu bytes); bound the context (a max-context option) or allow more memory",
                        (long long)capacity, cache_bytes_for(c, capacity), (long long)c->batch, (long long)limit,
                        cache_bytes_for(c, limit));
    }
    int64_t shape[4] = {c->batch, c->n_heads, capacity, c->d_head};
    lb_tensor *key = lb_tensor_zeros(c->dtype, 4, shape), *value = key ? lb_tensor_zeros(c->dtype, 4, shape) : NULL;
    if (!value) {
        lb_tensor_free(key);
        return lb_error(LB_ERR_MEMORY, "key-value cache: out of memory growing to %lld events per stream (%zu bytes for "
                                       "%lld streams); bound the context (a max-context option) or use fewer streams",
                        (long long)capacity, cache_bytes_for(c, capacity), (long long)c->batch);
    }
    if (c->key) {
        int64_t *zero = calloc((size_t)c->batch, sizeof *zero);
        lb_status st = zero ? LB_OK : lb_error(LB_ERR_MEMORY, "key-value cache: out of memory");
        if (st == LB_OK)
            st = lb_k_copy_rows(key, zero, c->key, zero, c->length);
        if (st == LB_OK)
            st = lb_k_copy_rows(value, zero, c->value, zero, c->length);
        free(zero);
        if (st != LB_OK) {
            lb_tensor_free(key);
            lb_tensor_free(value);
            return st;
        }
    }
    lb_tensor_free(c->key);
    lb_tensor_free(c->value);
    c->key = key;
    c->value = value;
    c->capacity = capacity;
    return LB_OK;
}

lb_status lb_kv_cache_init(lb_kv_cache *c, lb_dtype dtype, int64_t batch, int64_t n_heads, int64_t d_head,
                           int64_t capacity, int64_t window, int64_t max_capacity)
{
    LB_CHECK_ARG(c, LB_ERR_VALUE);
    memset(c, 0, sizeof *c);
    if (batch < 1 || n_heads < 1 || d_head < 1 || capacity < 1 || window < 0 || max_capacity < 0)
        return lb_error(LB_ERR_VALUE,
                        "key-value cache: streams = %lld, n_heads = %lld, d_head = %lld and capacity = %lld must be >= 1, "
                        "window = %lld and max_capacity = %lld >= 0",
                        (long long)batch, (long long)n_heads, (long long)d_head, (long long)capacity, (long long)window,
                        (long long)max_capacity);
    c->dtype = dtype;
    c->batch = batch;
    c->n_heads = n_heads;
    c->d_head = d_head;
    c->window = window;
    c->max_capacity = max_capacity;
    if (window > 0 && capacity < 2 * window)
        capacity = 2 * window;
    if (max_capacity > 0 && capacity > max_capacity)
        capacity = max_capacity;
    if (!(c->length = calloc((size_t)batch, sizeof *c->length)))
        return lb_error(LB_ERR_MEMORY, "key-value cache: out of memory for %lld streams", (long long)batch);
    lb_status st = cache_resize(c, capacity);
    if (st != LB_OK)
        lb_kv_cache_free(c);
    return st;
}

void lb_kv_cache_free(lb_kv_cache *c)
{
    LB_CHECK_ARG(c);
    lb_tensor_free(c->key);
    lb_tensor_free(c->value);
    free(c->length);
    memset(c, 0, sizeof *c);
}

void lb_kv_cache_clear(lb_kv_cache *c, int64_t stream)
{
    LB_CHECK_ARG(c);
    if (stream >= 0 && stream < c->batch)
        c->length[stream] = 0;
}

size_t lb_kv_cache_bytes(const lb_kv_cache *c)
{
    LB_CHECK_ARG(c, 0);
    return c->key ? cache_bytes_for(c, c->capacity) : 0;
}

lb_status lb_kv_cache_reserve(lb_kv_cache *c, int64_t count)
{
    LB_CHECK_ARG(c, LB_ERR_VALUE);
    if (count < 1)
        return lb_error(LB_ERR_VALUE, "key-value cache: a chunk of %lld events (must be >= 1)", (long long)count);
    int64_t need = 0;
    for (int64_t b = 0; b < c->batch; b++) {
        int64_t keep = c->window - 1; /* rows the next query can still see */
        if (c->window > 0 && c->length[b] + count > c->capacity && c->length[b] > keep) {
            /* Shift the last window - 1 rows to the front of stream b. */
            int64_t *zero = calloc((size_t)c->batch, sizeof *zero), *from = calloc((size_t)c->batch, sizeof *from),
                    *rows = calloc((size_t)c->batch, sizeof *rows);
            lb_status st = zero && from && rows ? LB_OK : lb_error(LB_ERR_MEMORY, "key-value cache: out of memory");
            if (st == LB_OK) {
                from[b] = c->length[b] - keep;
                rows[b] = keep;
                st = lb_k_copy_rows(c->key, zero, c->key, from, rows);
                if (st == LB_OK)
                    st = lb_k_copy_rows(c->value, zero, c->value, from, rows);
            }
            free(zero);
            free(from);
            free(rows);
            if (st != LB_OK)
                return st;
            c->length[b] = keep;
        }
        if (c->length[b] + count > need)
            need = c->length[b] + count;
    }
    if (need <= c->capacity)
        return LB_OK;
    int64_t grown = 2 * c->capacity > need ? 2 * c->capacity : need;
    if (c->max_capacity > 0 && grown > c->max_capacity)
        grown = need > c->max_capacity ? need : c->max_capacity; /* need past the limit: the error names it */
    return cache_resize(c, grown);
}

void lb_kv_cache_advance(lb_kv_cache *c, const int64_t *valid)
{
    LB_CHECK_ARG(c);
    for (int64_t b = 0; b < c->batch; b++)
        c->length[b] += valid ? valid[b] : 0;
}

/* Runs the fused kernel: queries [B, H, C, d_head] against the cache with the chunk's
 * rows written at length[b] ..; returns the heads [B, H, C, d_head] (new tensor). */
static lb_tensor *cached_heads(const lb_tensor *q, const lb_kv_cache *c, const lb_decode_chunk *ch)
{
    int64_t b = ch->batch, n = ch->count;
    int64_t so[4] = {b, c->n_heads, n, c->d_head}, sl[3] = {b, c->n_heads, n};
    int32_t *key_lengths = malloc((size_t)b * sizeof *key_lengths);
    int32_t *rows = malloc((size_t)(b * n) * sizeof *rows);
    lb_tensor *out = lb_tensor_zeros(c->dtype, 4, so), *lse = lb_tensor_zeros(c->dtype, 3, sl);
    lb_status st = key_lengths && rows && out && lse ? LB_OK : lb_error(LB_ERR_MEMORY, "cached attention: out of memory");
    if (st == LB_OK) {
        for (int64_t bi = 0; bi < b; bi++) {
            key_lengths[bi] = (int32_t)(c->length[bi] + ch->valid[bi]);
            for (int64_t i = 0; i < n; i++) /* query i sits at cache row length[b] + i */
                rows[bi * n + i] = (int32_t)(c->length[bi] + i);
        }
        lb_attn_kmask mask = {0};
        mask.causal = 1;
        mask.window = c->window;
        mask.key_lengths = key_lengths;
        mask.query_positions = rows;
        st = lb_k_attention_forward(q, c->key, c->value, &mask, 1.0 / sqrt((double)c->d_head), out, lse);
    }
    free(key_lengths);
    free(rows);
    lb_tensor_free(lse);
    if (st != LB_OK) {
        lb_tensor_free(out);
        return NULL;
    }
    return out;
}

lb_var *lb_mha_forward_cached(lb_graph *g, const lb_mha *a, lb_var *x, lb_kv_cache *cache,
                              const lb_decode_chunk *chunk)
{
    LB_CHECK_ARG(g, NULL);
    LB_CHECK_ARG(a, NULL);
    LB_CHECK_INPUT(x, NULL);
    LB_CHECK_ARG(cache, NULL);
    LB_CHECK_ARG(chunk, NULL);
    if (!x)
        return NULL;
    if (check_input("multi-head attention", a->name, x, a->d_model) != LB_OK)
        return NULL;
    const lb_tensor *tx = x->value;
    char sx[128];
    int64_t b = tx->shape[0], n = tx->shape[1], h = a->n_heads, dh = a->d_head;
    if (!cache || !chunk || !chunk->valid || chunk->batch != b || chunk->count != n || cache->batch != b ||
        cache->n_heads != h || cache->d_head != dh || cache->dtype != tx->dtype || (a->rotary && !chunk->positions)) {
        lb_error(LB_ERR_SHAPE, "multi-head attention '%s' (cached): x %s does not fit the chunk (B = %lld, C = %lld) or "
                               "the cache (B = %lld, H = %lld, d_head = %lld)%s",
                 a->name, lb_tensor_describe(tx, sx, sizeof sx), chunk ? (long long)chunk->batch : -1LL,
                 chunk ? (long long)chunk->count : -1LL, cache ? (long long)cache->batch : -1LL,
                 cache ? (long long)cache->n_heads : -1LL, cache ? (long long)cache->d_head : -1LL,
                 a->rotary && chunk && !chunk->positions ? "; rotary needs the chunk's positions" : "");
        return NULL;
    }
    for (int64_t bi = 0; bi < b; bi++)
        if (cache->length[bi] + n > cache->capacity || chunk->valid[bi] < 0 || chunk->valid[bi] > n) {
            lb_error(LB_ERR_STATE, "multi-head attention '%s' (cached): stream %lld holds %lld of %lld rows and the chunk "
                                   "has %lld of %lld valid events (reserve room first)",
                     a->name, (long long)bi, (long long)cache->length[bi], (long long)cache->capacity,
                     (long long)chunk->valid[bi], (long long)n);
            return NULL;
        }
    lb_var *q = split_heads(g, lb_affine(g, x, a->w_q, a->b_q, "multi-head attention w_q"), h, dh); /* [B, H, C, dh] */
    lb_var *k = split_heads(g, lb_affine(g, x, a->w_k, a->b_k, "multi-head attention w_k"), h, dh);
    lb_var *v = split_heads(g, lb_affine(g, x, a->w_v, a->b_v, "multi-head attention w_v"), h, dh);
    if (a->rotary) {
        q = lb_rotary(g, q, chunk->positions, ROTARY_BASE);
        k = lb_rotary(g, k, chunk->positions, ROTARY_BASE);
    }
    if (q && a->length_scale != LB_LENGTH_SCALE_NONE) {
        /* Query i of stream b sees its cached rows and the chunk's rows up to itself, at
         * most the window: the n of the full causal computation. */
        double *logn = malloc((size_t)(b * n) * sizeof *logn);
        for (int64_t bi = 0; logn && bi < b; bi++)
            for (int64_t i = 0; i < n; i++) {
                int64_t keys = cache->length[bi] + i + 1;
                if (cache->window > 0 && keys > cache->window)
                    keys = cache->window;
                logn[bi * n + i] = keys > 1 ? log((double)keys) : 0.0;
            }
        q = logn ? apply_length_scale(g, a, q, logn) : NULL;
        if (!logn)
            lb_error(LB_ERR_MEMORY, "attention length scale: out of memory");
        free(logn);
    }
    lb_var *out = NULL;
    if (q && k && v) {
        int64_t *zero = calloc((size_t)b, sizeof *zero), *all = malloc((size_t)b * sizeof *all);
        lb_status st = zero && all ? LB_OK : lb_error(LB_ERR_MEMORY, "cached attention: out of memory");
        for (int64_t bi = 0; st == LB_OK && bi < b; bi++)
            all[bi] = n;
        if (st == LB_OK) /* the chunk's rows, padding included, go after the cached rows */
            st = lb_k_copy_rows(cache->key, cache->length, k->value, zero, all);
        if (st == LB_OK)
            st = lb_k_copy_rows(cache->value, cache->length, v->value, zero, all);
        free(zero);
        free(all);
        lb_tensor *heads = st == LB_OK ? cached_heads(q->value, cache, chunk) : NULL;
        if (heads)
            out = lb_affine(g, merge_heads(g, lb_input(g, heads, 0)), a->w_o, a->b_o, "multi-head attention w_o");
    }
    if (!out)
        lb_error_context("multi-head attention '%s' (cached)", a->name);
    return out;
}

/* ---- decoding one event per stream without a graph ---- */

lb_status lb_mha_step_work_init(lb_mha_step_work *w, const lb_mha *a, lb_dtype dtype, int64_t batch)
{
    LB_CHECK_ARG(w, LB_ERR_VALUE);
    memset(w, 0, sizeof *w);
    LB_CHECK_ARG(a, LB_ERR_VALUE);
    int64_t sq[4] = {batch, a->n_heads, 1, a->d_head}, sl[3] = {batch, a->n_heads, 1};
    size_t row = (size_t)(batch * a->d_model) * lb_dtype_size(dtype);
    if (!(w->query = lb_tensor_zeros(dtype, 4, sq)) || !(w->heads = lb_tensor_zeros(dtype, 4, sq)) ||
        !(w->lse = lb_tensor_zeros(dtype, 3, sl)) || !(w->key = calloc(1, row)) || !(w->value = calloc(1, row)) ||
        !(w->key_lengths = calloc((size_t)batch, sizeof *w->key_lengths)) ||
        !(w->rows = calloc((size_t)batch, sizeof *w->rows))) {
        lb_mha_step_work_free(w);
        return lb_error(LB_ERR_MEMORY, "multi-head attention '%s' (step): out of memory for %lld streams", a->name,
                        (long long)batch);
    }
    return LB_OK;
}

void lb_mha_step_work_free(lb_mha_step_work *w)
{
    if (!w)
        return;
    lb_tensor_free(w->query);
    lb_tensor_free(w->heads);
    lb_tensor_free(w->lse);
    free(w->key);
    free(w->value);
    free(w->key_lengths);
    free(w->rows);
    memset(w, 0, sizeof *w);
}

size_t lb_mha_step_work_bytes(const lb_mha_step_work *w)
{
    LB_CHECK_ARG(w, 0);
    if (!w->query)
        return 0;
    size_t es = lb_dtype_size(w->query->dtype), n = (size_t)lb_tensor_numel(w->query);
    return (3 * n + (size_t)lb_tensor_numel(w->lse)) * es + n * es /* key, value */ +
           2 * (size_t)w->query->shape[0] * sizeof(int32_t);
}

lb_status lb_mha_step(const lb_mha *a, const void *x, lb_kv_cache *cache, const lb_decode_chunk *chunk,
                      lb_mha_step_work *w, void *out)
{
    LB_CHECK_ARG(a, LB_ERR_VALUE);
    LB_CHECK_ARG(x, LB_ERR_VALUE);
    LB_CHECK_ARG(w, LB_ERR_VALUE);
    LB_CHECK_ARG(out, LB_ERR_VALUE);
    const int64_t b = chunk ? chunk->batch : 0, h = a->n_heads, dh = a->d_head, d = a->d_model;
    const lb_dtype dt = cache ? cache->dtype : LB_FLOAT32;
    if (!cache || !chunk || !w->query || chunk->count != 1 || !chunk->valid || cache->batch != b ||
        cache->n_heads != h || cache->d_head != dh || w->query->shape[0] != b || w->query->dtype != dt ||
        (a->rotary && !chunk->positions))
        return lb_error(LB_ERR_SHAPE, "multi-head attention '%s' (step): the chunk (one event for each of %lld streams), "
                                      "the cache and the work buffers do not fit",
                        a->name, (long long)b);
    for (int64_t bi = 0; bi < b; bi++)
        if (cache->length[bi] + 1 > cache->capacity)
            return lb_error(LB_ERR_STATE, "multi-head attention '%s' (step): stream %lld holds %lld of %lld rows "
                                          "(reserve room first)",
                            a->name, (long long)bi, (long long)cache->length[bi], (long long)cache->capacity);
    void *q = lb_tensor_data(w->query); /* [B, d_model] = [B, H, 1, d_head] */
    const void *bq = a->b_q ? lb_tensor_data(a->b_q->value) : NULL, *bk = a->b_k ? lb_tensor_data(a->b_k->value) : NULL;
    const void *bv = a->b_v ? lb_tensor_data(a->b_v->value) : NULL, *bo = a->b_o ? lb_tensor_data(a->b_o->value) : NULL;
    lb_k_affine_rows(dt, b, d, d, x, lb_tensor_data(a->w_q->value), bq, q);
    lb_k_affine_rows(dt, b, d, d, x, lb_tensor_data(a->w_k->value), bk, w->key);
    lb_k_affine_rows(dt, b, d, d, x, lb_tensor_data(a->w_v->value), bv, w->value);
    if (a->rotary) {
        lb_rotary_rows(dt, b, h, dh, q, chunk->positions, ROTARY_BASE);
        lb_rotary_rows(dt, b, h, dh, w->key, chunk->positions, ROTARY_BASE);
    }
    if (a->length_scale != LB_LENGTH_SCALE_NONE) {
        /* The query sees its cached rows and itself, at most the window (lb_mha_forward_cached). */
        LB_DISPATCH(dt, T, {
            T *pq = q;
            const T *ps = a->softmax_scale ? lb_tensor_data(a->softmax_scale->value) : NULL; /* [H] */
            const T inv = (T)(1.0 / a->log_reference);
            for (int64_t bi = 0; bi < b; bi++) {
                int64_t keys = cache->length[bi] + 1;
                if (cache->window > 0 && keys > cache->window)
                    keys = cache->window;
                const T f = (T)(keys > 1 ? log((double)keys) : 0.0);
                for (int64_t hh = 0; hh < h; hh++) {
                    const T fh = ps ? f * ps[hh] : inv * f;
                    for (int64_t e = 0; e < dh; e++)
                        pq[(bi * h + hh) * dh + e] = pq[(bi * h + hh) * dh + e] * fh;
                }
            }
        });
    }
    /* The event's key and value rows go after each stream's cached rows. */
    const size_t es = lb_dtype_size(dt), row = (size_t)dh * es;
    char *ck = lb_tensor_data(cache->key), *cv = lb_tensor_data(cache->value);
    for (int64_t bi = 0; bi < b; bi++) {
        for (int64_t hh = 0; hh < h; hh++) {
            size_t at = ((size_t)((bi * h + hh) * cache->capacity + cache->length[bi])) * row;
            memcpy(ck + at, (const char *)w->key + (size_t)(bi * h + hh) * row, row);
            memcpy(cv + at, (const char *)w->value + (size_t)(bi * h + hh) * row, row);
        }
        w->key_lengths[bi] = (int32_t)(cache->length[bi] + chunk->valid[bi]);
        w->rows[bi] = (int32_t)cache->length[bi];
    }
    lb_attn_kmask mask = {0};
    mask.causal = 1;
    mask.window = cache->window;
    mask.key_lengths = w->key_lengths;
    mask.query_positions = w->rows;
    lb_status st = lb_k_attention_forward(w->query, cache->key, cache->value, &mask, 1.0 / sqrt((double)dh), w->heads,
                                          w->lse);
    if (st != LB_OK)
        return lb_error_context("multi-head attention '%s' (step)", a->name);
    lb_k_affine_rows(dt, b, d, d, lb_tensor_data(w->heads), lb_tensor_data(a->w_o->value), bo, out);
    return LB_OK;
}

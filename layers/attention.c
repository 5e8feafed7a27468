/* Attention layers. Named dims as in attention.h: B, T, Tq, Tk, H, P, d_model,
 * d_k, d_v, d_head. */
#include "layers/attention.h"
#include "tensor/names.h"
#include "layers/attention_internal.h"

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

/* Query heads per key/value head when k and v have the leading dims of q but for the
 * heads (the dim before Tk), whose count divides q's: grouped-query attention. 1 when
 * every leading dim agrees; 0 when they do not fit that way. */
static int64_t kv_group_of(const lb_tensor *q, const lb_tensor *k, const lb_tensor *v)
{
    int nd = q->ndim;
    if (nd < 2 || k->ndim != nd || v->ndim != nd)
        return 0;
    for (int d = 0; d < nd - 3; d++)
        if (k->shape[d] != q->shape[d] || v->shape[d] != q->shape[d])
            return 0;
    if (nd < 3)
        return 1;
    int64_t hq = q->shape[nd - 3], hk = k->shape[nd - 3];
    if (v->shape[nd - 3] != hk || hk < 1 || hq % hk != 0)
        return hq == hk && v->shape[nd - 3] == hk ? 1 : 0;
    return hq / hk;
}

/* The fused op takes q, k, v with equal leading dims (or grouped key/value heads);
 * anything else (broadcast batch dims, which lb_matmul allows) goes through the
 * materialized path. */
static int fused_fits(const lb_tensor *q, const lb_tensor *k, const lb_tensor *v)
{
    return v->ndim >= 2 && v->shape[v->ndim - 1] >= 1 && kv_group_of(q, k, v) >= 1;
}

/* x [..., Hkv, T, D] -> [..., Hkv * group, T, D], each head repeated `group` times in
 * place (torch's repeat_interleave(group, dim=-3)): the materialized path's grouped
 * keys and values. Differentiable (the gradient sums over each group). */
static lb_var *repeat_kv(lb_graph *g, lb_var *x, int64_t group)
{
    if (!x || group == 1)
        return x;
    const lb_tensor *t = x->value;
    int nd = t->ndim;
    if (nd + 1 > LB_MAX_DIMS) {
        lb_error(LB_ERR_SHAPE, "attention: grouped keys and values of %d dims cannot be repeated (at most %d)", nd,
                 LB_MAX_DIMS - 1);
        return NULL;
    }
    int64_t split[LB_MAX_DIMS], merged[LB_MAX_DIMS];
    for (int d = 0; d < nd - 2; d++)
        split[d] = merged[d] = t->shape[d];
    split[nd - 2] = 1; /* [..., Hkv, 1, T, D] */
    split[nd - 1] = t->shape[nd - 2];
    split[nd] = t->shape[nd - 1];
    merged[nd - 3] *= group;
    merged[nd - 2] = t->shape[nd - 2];
    merged[nd - 1] = t->shape[nd - 1];
    lb_var **copies = malloc((size_t)group * sizeof *copies);
    if (!copies) {
        lb_error(LB_ERR_MEMORY, "attention: out of memory repeating %lld key/value heads", (long long)group);
        return NULL;
    }
    lb_var *one = lb_reshape(g, x, nd + 1, split);
    for (int64_t i = 0; i < group; i++)
        copies[i] = one;
    lb_var *y = one ? lb_concat(g, (int)group, copies, nd - 2) : NULL; /* [..., Hkv, group, T, D] */
    free(copies);
    return lb_reshape(g, y, nd, merged);
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
    /* Materialized: the weights [B, ..., Tq, Tk] are a graph variable; grouped key/value
     * heads are repeated for their query heads. */
    int64_t group = kv_group_of(tq, tk, value->value);
    if (group > 1) {
        key = repeat_kv(g, key, group);
        value = repeat_kv(g, value, group);
    }
    lb_var *scores = lb_matmul_t(g, query, 0, key, 1); /* [B, ..., Tq, Tk] */
    lb_var *w = lb_masked_softmax(g, scores, &m, scale);
    if (weights)
        *weights = w;
    return lb_matmul(g, w, value); /* [B, ..., Tq, d_v] */
}

/* Checks x [B, T, d_model] for layer `kind` named `name`. */
lb_status lb_attn_check_input(const char *kind, const char *name, const lb_var *x, int64_t d_model)
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

/* The start the attention layers' forwards share: *weights (when asked for) cleared, then
 * x checked to be [B, T, d_model] (lb_attn_check_input, `what` and `name` in its message). */
static lb_status forward_begin(const char *what, const char *name, lb_var *x, int64_t d_model, lb_var **weights)
{
    if (weights)
        *weights = NULL;
    return lb_attn_check_input(what, name, x, d_model);
}

lb_var *lb_self_attention_forward(lb_graph *g, const lb_self_attention *a, lb_var *x, const lb_attn_mask *mask,
                                  const lb_attn_queries *queries, lb_var **weights)
{
    LB_CHECK_ARG(g, NULL);
    LB_CHECK_ARG(a, NULL);
    LB_CHECK_INPUT(x, NULL);
    if (forward_begin("self-attention", a->name, x, a->d_model, weights) != LB_OK)
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
    return lb_mha_init_gqa(a, ps, prefix, d_model, n_heads, n_heads, bias, rotary, dtype, rng);
}

lb_status lb_mha_init_gqa(lb_mha *a, lb_params *ps, const char *prefix, int64_t d_model, int n_heads, int n_kv_heads,
                          int bias, int rotary, lb_dtype dtype, lb_rng *rng)
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
    if (n_kv_heads < 1 || n_heads % n_kv_heads != 0)
        return lb_error(LB_ERR_VALUE,
                        "multi-head attention '%s': n_kv_heads = %d must be >= 1 and divide n_heads = %d (each "
                        "key/value head serves an equal group of query heads)",
                        a->name, n_kv_heads, n_heads);
    if (rotary && (d_model / n_heads) % 2 != 0)
        return lb_error(LB_ERR_VALUE,
                        "multi-head attention '%s': rotary positions need an even d_head, but d_model / n_heads = "
                        "%lld / %d = %lld",
                        a->name, (long long)d_model, n_heads, (long long)(d_model / n_heads));
    a->d_model = d_model;
    a->n_heads = n_heads;
    a->d_head = d_model / n_heads;
    a->n_kv_heads = n_kv_heads;
    a->rotary = rotary;
    int64_t d_kv = n_kv_heads * a->d_head, width[4] = {d_model, d_kv, d_kv, d_model}; /* outputs of q, k, v, o */
    lb_var **w[4] = {&a->w_q, &a->w_k, &a->w_v, &a->w_o}, **b[4] = {&a->b_q, &a->b_k, &a->b_v, &a->b_o};
    static const char *wn[4] = {"w_q", "w_k", "w_v", "w_o"}, *bn[4] = {"b_q", "b_k", "b_v", "b_o"};
    for (int i = 0; i < 4; i++) {
        int64_t sw[2] = {d_model, width[i]};
        if (!(*w[i] = lb_params_add(ps, prefix, wn[i], dtype, 2, sw)))
            return lb_last_status();
    }
    for (int i = 0; bias && i < 4; i++)
        if (!(*b[i] = lb_params_add(ps, prefix, bn[i], dtype, 1, &width[i])))
            return lb_last_status();
    for (int i = 0; rng && i < 4; i++)
        lb_init_xavier_uniform(*w[i], rng, d_model, width[i]);
    return LB_OK;
}

static const char *const length_scale_names[] = {"none", "log-n", "scalable"};

const char *lb_length_scale_name(lb_length_scale kind)
{
    return lb_name_of(length_scale_names, LB_COUNT_OF(length_scale_names), (int)kind, "unknown");
}

lb_status lb_length_scale_parse(const char *name, lb_length_scale *out)
{
    LB_CHECK_ARG(out, LB_ERR_VALUE);
    int i = 0;
    lb_status st = lb_name_parse("softmax length scaling", length_scale_names, LB_COUNT_OF(length_scale_names), name, 0, &i);
    if (st == LB_OK)
        *out = (lb_length_scale)i;
    return st;
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
lb_var *lb_mha_apply_length_scale(lb_graph *g, const lb_mha *a, lb_var *q, const double *logn)
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
    lb_var *out = lb_mha_apply_length_scale(g, a, q, logn);
    free(logn);
    return out;
}

/* [B, T, d_model] -> [B, H, T, d_head] */
lb_var *lb_attn_split_heads(lb_graph *g, lb_var *x, int64_t h, int64_t dh)
{
    if (!x)
        return NULL;
    static const int perm[4] = {0, 2, 1, 3};
    int64_t s[4] = {x->value->shape[0], x->value->shape[1], h, dh};
    return lb_permute(g, lb_reshape(g, x, 4, s), perm);
}

/* [B, H, T, d_head] -> [B, T, d_model] */
lb_var *lb_attn_merge_heads(lb_graph *g, lb_var *x)
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
    if (forward_begin("multi-head attention", a->name, x, a->d_model, weights) != LB_OK)
        return NULL;
    int64_t h = a->n_heads, hkv = a->n_kv_heads, dh = a->d_head;
    lb_var *xq = queries ? lb_gather_positions(g, x, queries) : x;
    lb_var *q = lb_attn_split_heads(g, lb_affine(g, xq, a->w_q, a->b_q, "multi-head attention w_q"), h, dh);
    lb_var *k = lb_attn_split_heads(g, lb_affine(g, x, a->w_k, a->b_k, "multi-head attention w_k"), hkv, dh);
    lb_var *v = lb_attn_split_heads(g, lb_affine(g, x, a->w_v, a->b_v, "multi-head attention w_v"), hkv, dh);
    if (a->rotary) {
        q = lb_rotary(g, q, queries ? queries->positions : NULL, LB_ROTARY_BASE);
        k = lb_rotary(g, k, NULL, LB_ROTARY_BASE);
    }
    q = scale_by_length(g, a, q, x->value->shape[1], mask, queries);
    lb_attn_mask with_alibi = mask ? *mask : (lb_attn_mask){0};
    double *slopes = NULL;
    if (a->alibi) {
        if (!(slopes = malloc((size_t)h * sizeof *slopes))) {
            lb_error(LB_ERR_MEMORY, "multi-head attention '%s': out of memory", a->name);
            return NULL;
        }
        lb_alibi_slopes(a->n_heads, slopes);
        with_alibi.alibi_slopes = slopes;
        with_alibi.alibi_heads = h;
        mask = &with_alibi;
    }
    lb_var *heads = lb_attention(g, q, k, v, mask, queries, weights); /* [B, H, Tq, d_head] */
    free(slopes); /* the ops copy what they keep */
    lb_var *out = lb_affine(g, lb_attn_merge_heads(g, heads), a->w_o, a->b_o, "multi-head attention w_o");
    if (!out)
        lb_error_context("multi-head attention '%s'", a->name);
    return out;
}

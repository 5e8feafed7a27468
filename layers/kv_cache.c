/* Attention over a key-value cache (layers/kv_cache.h): the decoding half of
 * multi-head attention. Named dims as in attention.h: B, T, Tq, Tk, H, d_model, d_head;
 * C new events per chunk. */
#include "layers/kv_cache.h"

#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kernels/attention.h"
#include "kernels/stream.h"
#include "layers/attention_internal.h"
#include "layers/linear.h"
#include "layers/positional.h"
#include "tensor/kernels.h"

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

/* The causal mask of queries over the cache: key_lengths [B], the queries' cache rows
 * as query_positions, the cache's window, ALiBi's slopes [n_heads] when the layer has them. */
static lb_attn_kmask cache_mask(const lb_mha *a, const lb_kv_cache *c, const int32_t *key_lengths, const int32_t *rows,
                                const double *slopes)
{
    lb_attn_kmask mask = {0};
    mask.causal = 1;
    mask.window = c->window;
    mask.key_lengths = key_lengths;
    mask.query_positions = rows;
    mask.alibi_slopes = a->alibi ? slopes : NULL; /* relative: the cache rows keep the events' distances */
    return mask;
}

/* Runs the fused kernel: queries [B, H, C, d_head] against the cache [B, Hkv, capacity,
 * d_head] with the chunk's rows written at length[b] ..; returns the heads [B, H, C,
 * d_head] (new tensor). */
static lb_tensor *cached_heads(const lb_mha *a, const lb_tensor *q, const lb_kv_cache *c, const lb_decode_chunk *ch)
{
    int64_t b = ch->batch, n = ch->count;
    int64_t so[4] = {b, a->n_heads, n, c->d_head}, sl[3] = {b, a->n_heads, n};
    int32_t *key_lengths = malloc((size_t)b * sizeof *key_lengths);
    int32_t *rows = malloc((size_t)(b * n) * sizeof *rows);
    double *slopes = malloc((size_t)a->n_heads * sizeof *slopes);
    lb_tensor *out = lb_tensor_zeros(c->dtype, 4, so), *lse = lb_tensor_zeros(c->dtype, 3, sl);
    lb_status st = key_lengths && rows && slopes && out && lse ? LB_OK
                                                               : lb_error(LB_ERR_MEMORY, "cached attention: out of memory");
    if (st == LB_OK) {
        for (int64_t bi = 0; bi < b; bi++) {
            key_lengths[bi] = (int32_t)(c->length[bi] + ch->valid[bi]);
            for (int64_t i = 0; i < n; i++) /* query i sits at cache row length[b] + i */
                rows[bi * n + i] = (int32_t)(c->length[bi] + i);
        }
        lb_alibi_slopes(a->n_heads, slopes);
        lb_attn_kmask mask = cache_mask(a, c, key_lengths, rows, slopes);
        st = lb_k_attention_forward(q, c->key, c->value, &mask, 1.0 / sqrt((double)c->d_head), out, lse);
    }
    free(key_lengths);
    free(rows);
    free(slopes);
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
    if (lb_attn_check_input("multi-head attention", a->name, x, a->d_model) != LB_OK)
        return NULL;
    const lb_tensor *tx = x->value;
    char sx[128];
    int64_t b = tx->shape[0], n = tx->shape[1], h = a->n_heads, hkv = a->n_kv_heads, dh = a->d_head;
    if (!cache || !chunk || !chunk->valid || chunk->batch != b || chunk->count != n || cache->batch != b ||
        cache->n_heads != hkv || cache->d_head != dh || cache->dtype != tx->dtype || (a->rotary && !chunk->positions)) {
        lb_error(LB_ERR_SHAPE, "multi-head attention '%s' (cached): x %s does not fit the chunk (B = %lld, C = %lld) or "
                               "the cache (B = %lld, key/value heads = %lld, d_head = %lld)%s",
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
    lb_var *q = lb_attn_split_heads(g, lb_affine(g, x, a->w_q, a->b_q, "multi-head attention w_q"), h, dh); /* [B, H, C, dh] */
    lb_var *k = lb_attn_split_heads(g, lb_affine(g, x, a->w_k, a->b_k, "multi-head attention w_k"), hkv, dh);
    lb_var *v = lb_attn_split_heads(g, lb_affine(g, x, a->w_v, a->b_v, "multi-head attention w_v"), hkv, dh);
    if (a->rotary) {
        q = lb_rotary(g, q, chunk->positions, LB_ROTARY_BASE);
        k = lb_rotary(g, k, chunk->positions, LB_ROTARY_BASE);
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
        q = logn ? lb_mha_apply_length_scale(g, a, q, logn) : NULL;
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
        lb_tensor *heads = st == LB_OK ? cached_heads(a, q->value, cache, chunk) : NULL;
        if (heads)
            out = lb_affine(g, lb_attn_merge_heads(g, lb_input(g, heads, 0)), a->w_o, a->b_o, "multi-head attention w_o");
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
    size_t row = (size_t)(batch * a->n_kv_heads * a->d_head) * lb_dtype_size(dtype);
    if (!(w->query = lb_tensor_zeros(dtype, 4, sq)) || !(w->heads = lb_tensor_zeros(dtype, 4, sq)) ||
        !(w->lse = lb_tensor_zeros(dtype, 3, sl)) || !(w->key = calloc(1, row)) || !(w->value = calloc(1, row)) ||
        !(w->key_lengths = calloc((size_t)batch, sizeof *w->key_lengths)) ||
        !(w->rows = calloc((size_t)batch, sizeof *w->rows)) ||
        (a->alibi && !(w->alibi_slopes = calloc((size_t)a->n_heads, sizeof *w->alibi_slopes)))) {
        lb_mha_step_work_free(w);
        return lb_error(LB_ERR_MEMORY, "multi-head attention '%s' (step): out of memory for %lld streams", a->name,
                        (long long)batch);
    }
    w->kv_bytes = row;
    if (a->alibi) {
        w->n_alibi = a->n_heads;
        lb_alibi_slopes(a->n_heads, w->alibi_slopes);
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
    free(w->alibi_slopes);
    memset(w, 0, sizeof *w);
}

size_t lb_mha_step_work_bytes(const lb_mha_step_work *w)
{
    LB_CHECK_ARG(w, 0);
    if (!w->query)
        return 0;
    size_t es = lb_dtype_size(w->query->dtype), n = (size_t)lb_tensor_numel(w->query);
    return (2 * n + (size_t)lb_tensor_numel(w->lse)) * es + 2 * w->kv_bytes /* key, value */ +
           2 * (size_t)w->query->shape[0] * sizeof(int32_t) + (size_t)w->n_alibi * sizeof(double);
}

lb_status lb_mha_step(const lb_mha *a, const void *x, lb_kv_cache *cache, const lb_decode_chunk *chunk,
                      lb_mha_step_work *w, void *out)
{
    LB_CHECK_ARG(a, LB_ERR_VALUE);
    LB_CHECK_ARG(x, LB_ERR_VALUE);
    LB_CHECK_ARG(w, LB_ERR_VALUE);
    LB_CHECK_ARG(out, LB_ERR_VALUE);
    const int64_t b = chunk ? chunk->batch : 0, h = a->n_heads, hkv = a->n_kv_heads, dh = a->d_head, d = a->d_model;
    const int64_t d_kv = hkv * dh;
    const lb_dtype dt = cache ? cache->dtype : LB_FLOAT32;
    if (!cache || !chunk || !w->query || chunk->count != 1 || !chunk->valid || cache->batch != b ||
        cache->n_heads != hkv || w->query->shape[1] != h || (a->alibi && w->n_alibi != h) || cache->d_head != dh || w->query->shape[0] != b || w->query->dtype != dt ||
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
    lb_k_affine_rows(dt, b, d, d_kv, x, lb_tensor_data(a->w_k->value), bk, w->key);   /* [B, Hkv, d_head] */
    lb_k_affine_rows(dt, b, d, d_kv, x, lb_tensor_data(a->w_v->value), bv, w->value);
    if (a->rotary) {
        lb_rotary_rows(dt, b, h, dh, q, chunk->positions, LB_ROTARY_BASE);
        lb_rotary_rows(dt, b, hkv, dh, w->key, chunk->positions, LB_ROTARY_BASE);
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
        for (int64_t hh = 0; hh < hkv; hh++) {
            size_t at = ((size_t)((bi * hkv + hh) * cache->capacity + cache->length[bi])) * row;
            memcpy(ck + at, (const char *)w->key + (size_t)(bi * hkv + hh) * row, row);
            memcpy(cv + at, (const char *)w->value + (size_t)(bi * hkv + hh) * row, row);
        }
        w->key_lengths[bi] = (int32_t)(cache->length[bi] + chunk->valid[bi]);
        w->rows[bi] = (int32_t)cache->length[bi];
    }
    lb_attn_kmask mask = cache_mask(a, cache, w->key_lengths, w->rows, w->alibi_slopes);
    lb_status st = lb_k_attention_forward(w->query, cache->key, cache->value, &mask, 1.0 / sqrt((double)dh), w->heads,
                                          w->lse);
    if (st != LB_OK)
        return lb_error_context("multi-head attention '%s' (step)", a->name);
    lb_k_affine_rows(dt, b, d, d, lb_tensor_data(w->heads), lb_tensor_data(a->w_o->value), bo, out);
    return LB_OK;
}

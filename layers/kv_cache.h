/* Decoding: multi-head attention over a key-value cache, for generation and streaming
 * (layers/stream.h uses it for whole models). The computation equals lb_mha_forward's
 * rows for the new positions (tested), without recomputing the keys and values of the
 * events before. */
#ifndef LB_LAYERS_KV_CACHE_H
#define LB_LAYERS_KV_CACHE_H

#include "tensor/api.h"

#include "layers/attention.h"

LB_API_BEGIN

/* ---- decoding: multi-head attention over a key-value cache ----
 * For streaming inference (layers/stream.h) each attention layer keeps the keys and
 * values of the events it has seen, per stream, and a new chunk of C events computes
 * only its own queries, keys and values: O(C · T_cached · d_model) per chunk instead
 * of recomputing the whole sequence.
 *
 * Cache layout: key and value [B, Hkv, capacity, d_head] (Hkv = the layer's n_kv_heads:
 * grouped-query attention caches n_heads / n_kv_heads times fewer bytes); rows 0 .. length[b] - 1 of
 * stream b hold its most recent events in order (oldest first). Without a window every
 * event is kept and the capacity grows by doubling when a chunk does not fit (or is
 * pre-sized). With a window W (local attention, or a bounded full-attention context)
 * each query sees only the last W keys up to itself, so rows older than the last W - 1
 * are dropped (the kept rows shifted to the front) when room is needed: the capacity
 * stays at max(2 W, W - 1 + C), and the shift costs O(d_model) per event amortised.
 * Keys and values are stored after the rotary rotation, at the event's absolute
 * position. ALiBi's bias depends only on the distance between a query's row and a key's
 * row, which the shift keeps, so an ALiBi layer's cache needs no positions. */
typedef struct lb_kv_cache {
    lb_tensor *key, *value; /* [B, H, capacity, d_head], H = the layer's key/value heads */
    int64_t batch, n_heads, d_head, capacity; /* n_heads: the key/value heads it holds */
    int64_t *length;        /* [B] rows held per stream */
    int64_t window;         /* 0 = keep every event; else the keys each query sees */
    int64_t max_capacity;   /* rows per stream the cache may grow to; 0 = no limit */
    lb_dtype dtype;
} lb_kv_cache;

/* An empty cache for `batch` streams of an attention layer with n_heads key/value heads
 * (the layer's n_kv_heads) of width d_head. capacity: rows allocated per stream up front (>= 1; with a window it
 * is raised to 2 window). max_capacity: 0 or the most rows per stream the cache may
 * ever hold (a memory bound; growth past it fails with LB_ERR_MEMORY).
 * Errors: LB_ERR_VALUE for sizes < 1, LB_ERR_MEMORY (message gives the bytes). */
lb_status lb_kv_cache_init(lb_kv_cache *c, lb_dtype dtype, int64_t batch, int64_t n_heads, int64_t d_head,
                           int64_t capacity, int64_t window, int64_t max_capacity);
void lb_kv_cache_free(lb_kv_cache *c);
/* Forgets stream `stream`'s events (its rows are reused); the memory stays. */
void lb_kv_cache_clear(lb_kv_cache *c, int64_t stream);
/* Bytes allocated for keys and values: 2 · B · H · capacity · d_head · sizeof(dtype). */
size_t lb_kv_cache_bytes(const lb_kv_cache *c);
/* Makes room for `count` new rows in every stream (drops rows the window no longer
 * needs, then grows the capacity by doubling if still short). Nothing the queries can
 * see changes, so a failure leaves the cache as it was. Errors: LB_ERR_MEMORY when the
 * growth would pass max_capacity or the allocation fails (the message gives the events
 * and bytes asked for and how to bound them). */
lb_status lb_kv_cache_reserve(lb_kv_cache *c, int64_t count);
/* Commits the rows the last lb_mha_forward_cached wrote: length[b] += valid[b]. */
void lb_kv_cache_advance(lb_kv_cache *c, const int64_t *valid);

/* A chunk of C new events for B streams. */
typedef struct lb_decode_chunk {
    int64_t batch, count;     /* B, C */
    const int64_t *valid;     /* [B] events of each stream in this chunk, in [0, C]; the
                               * rows after them are padding (computed, never cached) */
    const int32_t *positions; /* [B, C] absolute position of each event (rotary angles) */
} lb_decode_chunk;

/* Multi-head attention of a chunk against the cache (lb_mha_forward's computation for
 * the chunk's rows): x [B, C, d_model] -> [B, C, d_model]. The chunk's keys and values
 * are written after each stream's cached rows; query i of stream b sees the cached
 * rows and the chunk's rows up to itself (the causal mask aligned bottom-right:
 * the last query with the last key), and only the last `window` of them when the
 * cache has a window. The cache's lengths are not advanced: call
 * lb_kv_cache_advance(cache, chunk->valid) once the whole step has succeeded.
 * Call lb_kv_cache_reserve(cache, C) first. Results equal lb_mha_forward's rows of
 * the full causal sequence (fused kernel, same tiles for the unshifted cache).
 * Errors (NULL): x not [B, C, d_model], a chunk or cache that does not fit. */
lb_var *lb_mha_forward_cached(lb_graph *g, const lb_mha *a, lb_var *x, lb_kv_cache *cache,
                              const lb_decode_chunk *chunk);

/* ---- decoding one event per stream without a graph ----
 * lb_mha_step is lb_mha_forward_cached for a chunk of one event (C = 1) computed
 * straight into preallocated buffers: no graph, and no allocation of its own (the
 * fused kernel takes its per-call scratch). With one event per
 * stream the rows [B, d_model] are already the heads [B, H, 1, d_head] in memory, so
 * no split or merge copies are needed. The same kernels and arithmetic as the graph
 * path (the projections are one gemm over the B rows instead of per-batch products,
 * which may round differently in float32). */
typedef struct lb_mha_step_work {
    lb_tensor *query, *heads; /* [B, H, 1, d_head]: the event's queries; the attention output */
    lb_tensor *lse;           /* [B, H, 1] */
    void *key, *value;        /* [B, n_kv_heads * d_head] the event's keys and values */
    int32_t *key_lengths;     /* [B] keys each stream's query sees (cached + 1) */
    int32_t *rows;            /* [B] the query's row in the cache */
    double *alibi_slopes;     /* [H] the layer's ALiBi slopes; NULL when it has none */
    int64_t n_alibi;          /* H with ALiBi, else 0 */
    size_t kv_bytes;          /* bytes of key (and of value): B n_kv_heads d_head elements */
} lb_mha_step_work;

/* Buffers for B streams of layer a in dtype. Errors: LB_ERR_MEMORY (nothing held). */
lb_status lb_mha_step_work_init(lb_mha_step_work *w, const lb_mha *a, lb_dtype dtype, int64_t batch);
void lb_mha_step_work_free(lb_mha_step_work *w);
/* Bytes the buffers hold; 0 with an LB_ERR_VALUE error when w is NULL. */
size_t lb_mha_step_work_bytes(const lb_mha_step_work *w);

/* One event per stream: x [B, d_model] (raw, the cache's dtype; the block's normalised
 * input) -> out [B, d_model] (raw: the heads merged and projected by W_O), attending
 * over the cache as lb_mha_forward_cached does with chunk->count = 1 (the event's key
 * and value are written after each stream's cached rows, padding streams included;
 * call lb_kv_cache_reserve(cache, 1) first and lb_kv_cache_advance after the step).
 * Errors: LB_ERR_SHAPE for a chunk, cache or work that does not fit; the kernel's. */
lb_status lb_mha_step(const lb_mha *a, const void *x, lb_kv_cache *cache, const lb_decode_chunk *chunk,
                      lb_mha_step_work *w, void *out);

LB_API_END

#endif

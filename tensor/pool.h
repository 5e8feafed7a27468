/* Buffer pools: per-step memory reused across steps.
 *
 * A training loop allocates the same large tensors every step (activations, saved
 * tensors, gradients) and frees them at the end of the step. Handed back to the C
 * allocator, large blocks return to the system and come back as fresh pages, one
 * page fault (and, with several threads, an interrupt to the other cores) per 4 KiB.
 * A pool keeps them instead: a freed buffer of a pooled storage goes into the
 * pool's cache, and the next allocation of a similar size takes it from there.
 *
 * Each lb_graph owns a pool (autograd/autograd.h): while a graph's ops run, that
 * pool is the calling thread's allocation pool, and lb_graph_reset ends a step with
 * lb_pool_trim. So a loop of forward, backward, optimizer step and reset reuses its
 * memory without any process-wide allocator setting.
 *
 * Rules:
 *  - Only buffers of at least LB_POOL_MIN_BYTES are pooled; smaller ones come from
 *    malloc directly (the C allocator keeps and reuses small blocks by itself).
 *  - A cached buffer is reused for a request of n bytes when its capacity is between
 *    n and n + n/4 (rounded up to 4 KiB); the smallest such buffer is taken.
 *  - lb_pool_trim frees the cached buffers that were not reused since the previous
 *    trim, so the cache holds at most what one step released.
 *  - A buffer outlives its pool safely: after lb_pool_free, buffers still in use are
 *    freed normally when their last tensor goes.
 *  - Thread-safe: buffers may be released on any thread. The allocation pool is per
 *    thread (OpenMP worker threads allocate with plain malloc).
 *
 * The same idea as PyTorch's caching allocators (c10 CPUCachingAllocator), kept
 * to one cache per graph and trimmed every step.
 */
#ifndef LB_POOL_H
#define LB_POOL_H

#include <stddef.h>
#include <stdint.h>

#include "tensor/api.h"

LB_API_BEGIN

enum { LB_POOL_MIN_BYTES = 64 * 1024 };

typedef struct lb_pool lb_pool;

/* A new, empty pool. NULL (LB_ERR_MEMORY) when out of memory. */
lb_pool *lb_pool_new(void);

/* Frees the cached buffers and gives up the pool. Buffers still held by tensors are
 * freed normally when those tensors go. If the pool is the calling thread's
 * allocation pool, the thread goes back to plain malloc. NULL is allowed. */
void lb_pool_free(lb_pool *pool);

/* Makes `pool` the calling thread's allocation pool for new tensor storage (NULL:
 * plain malloc) and returns the previous one. */
lb_pool *lb_pool_use(lb_pool *pool);

/* The calling thread's allocation pool, NULL if none. */
lb_pool *lb_pool_current(void);

/* Ends a step: frees the cached buffers that nobody took since the previous call. */
void lb_pool_trim(lb_pool *pool);

/* Counters of a pool since lb_pool_new, in bytes of buffer capacity. */
typedef struct lb_pool_stats {
    int64_t hits;           /* allocations served from the cache */
    int64_t misses;         /* allocations that went to malloc */
    int64_t cached_buffers; /* buffers in the cache now */
    size_t cached_bytes;    /* their capacity */
    size_t in_use_bytes;    /* capacity of the pool's buffers held by tensors now */
} lb_pool_stats;
void lb_pool_get_stats(lb_pool *pool, lb_pool_stats *stats);

/* The calls behind the tensors' storage, for kernels that want pooled scratch buffers
 * (kernels/attention.c's packed keys and tiles): a buffer of at least nbytes (64-byte
 * aligned when pooled), its first nbytes zero when `zero`, else undefined, from the
 * calling thread's pool when it has one and nbytes >= LB_POOL_MIN_BYTES (else malloc).
 * *owner receives the pool to give it back to (NULL: plain malloc) and *capacity its
 * size. NULL when out of memory (no message), or with an LB_ERR_VALUE error when owner
 * or capacity is NULL. */
void *lb_pool_take(size_t nbytes, int zero, lb_pool **owner, size_t *capacity);
/* Returns a buffer from lb_pool_take (owner and capacity as it gave them); data NULL
 * does nothing. */
void lb_pool_give(lb_pool *owner, void *data, size_t capacity);

LB_API_END

#endif

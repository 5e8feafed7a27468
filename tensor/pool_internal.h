/* Buffer allocation through the calling thread's pool (tensor/pool.h), for tensor.c. */
#ifndef LB_POOL_INTERNAL_H
#define LB_POOL_INTERNAL_H

#include "tensor/pool.h"

/* A buffer of at least nbytes (64-byte aligned when pooled), its first nbytes zero
 * when `zero`, else undefined. *owner receives the pool to give it back to (NULL:
 * plain malloc) and *capacity its size. NULL when out of memory (no message). */
void *lb_pool_take(size_t nbytes, int zero, lb_pool **owner, size_t *capacity);

/* Returns a buffer from lb_pool_take. */
void lb_pool_give(lb_pool *owner, void *data, size_t capacity);

#endif

#include "tensor/pool.h"

#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "tensor/error.h"

typedef struct cached_buffer {
    void *data;
    size_t capacity;
    uint64_t epoch; /* trim count when it entered the cache */
} cached_buffer;

struct lb_pool {
    pthread_mutex_t lock;
    cached_buffer *cache;
    int64_t n_cached, cache_capacity;
    uint64_t epoch;
    int alive;    /* 0 after lb_pool_free: no caching any more */
    int64_t refs; /* the owner (while alive) + buffers held by tensors + threads using it */
    lb_pool_stats stats;
};

static _Thread_local lb_pool *thread_pool = NULL;

static size_t round_up_4k(size_t n) { return (n + 4095) & ~(size_t)4095; }

lb_pool *lb_pool_new(void)
{
    lb_pool *p = calloc(1, sizeof *p);
    if (!p || pthread_mutex_init(&p->lock, NULL) != 0) {
        free(p);
        lb_error(LB_ERR_MEMORY, "lb_pool_new: out of memory");
        return NULL;
    }
    p->alive = 1;
    p->refs = 1;
    return p;
}

/* Called with the lock held; the caller must not touch p after a 1. */
static int drop_ref_locked(lb_pool *p)
{
    if (--p->refs > 0)
        return 0;
    pthread_mutex_unlock(&p->lock);
    pthread_mutex_destroy(&p->lock);
    free(p->cache);
    free(p);
    return 1;
}

static void drop_ref(lb_pool *p)
{
    pthread_mutex_lock(&p->lock);
    if (!drop_ref_locked(p))
        pthread_mutex_unlock(&p->lock);
}

lb_pool *lb_pool_current(void) { return thread_pool; }

lb_pool *lb_pool_use(lb_pool *pool)
{
    lb_pool *old = thread_pool;
    if (old == pool)
        return old;
    if (pool) {
        pthread_mutex_lock(&pool->lock);
        pool->refs++;
        pthread_mutex_unlock(&pool->lock);
    }
    thread_pool = pool;
    if (old)
        drop_ref(old);
    return old;
}

/* Frees the cached buffers that entered the cache before epoch `keep_from`. */
static void free_cached_before(lb_pool *p, uint64_t keep_from)
{
    int64_t kept = 0;
    for (int64_t i = 0; i < p->n_cached; i++) {
        cached_buffer *c = &p->cache[i];
        if (c->epoch >= keep_from) {
            p->cache[kept++] = *c;
            continue;
        }
        p->stats.cached_bytes -= c->capacity;
        free(c->data);
    }
    p->n_cached = kept;
    p->stats.cached_buffers = kept;
}

void lb_pool_free(lb_pool *pool)
{
    if (!pool)
        return;
    if (thread_pool == pool)
        lb_pool_use(NULL);
    pthread_mutex_lock(&pool->lock);
    pool->alive = 0;
    free_cached_before(pool, UINT64_MAX);
    if (!drop_ref_locked(pool))
        pthread_mutex_unlock(&pool->lock);
}

void lb_pool_trim(lb_pool *pool)
{
    if (!pool)
        return;
    pthread_mutex_lock(&pool->lock);
    free_cached_before(pool, pool->epoch);
    pool->epoch++;
    pthread_mutex_unlock(&pool->lock);
}

void lb_pool_get_stats(lb_pool *pool, lb_pool_stats *stats)
{
    LB_CHECK_ARG(pool);
    LB_CHECK_ARG(stats);
    pthread_mutex_lock(&pool->lock);
    *stats = pool->stats;
    pthread_mutex_unlock(&pool->lock);
}

/* The smallest cached buffer with n <= capacity <= n + n/4 (4 KiB rounded), or -1. */
static int64_t best_fit(const lb_pool *p, size_t n)
{
    size_t limit = round_up_4k(n + n / 4);
    int64_t best = -1;
    for (int64_t i = 0; i < p->n_cached; i++) {
        size_t c = p->cache[i].capacity;
        if (c >= n && c <= limit && (best < 0 || c < p->cache[best].capacity))
            best = i;
    }
    return best;
}

/* Plain allocation: calloc gives fresh pages as zeros without writing them. */
static void *plain_alloc(size_t nbytes, int zero) { return zero ? calloc(1, nbytes) : malloc(nbytes); }

void *lb_pool_take(size_t nbytes, int zero, lb_pool **owner, size_t *capacity)
{
    if (!owner || !capacity) {
        lb_error(LB_ERR_VALUE, "lb_pool_take: owner and capacity must not be NULL");
        return NULL;
    }
    lb_pool *p = thread_pool;
    *owner = NULL;
    *capacity = nbytes;
    if (!p || nbytes < LB_POOL_MIN_BYTES)
        return plain_alloc(nbytes, zero);
    pthread_mutex_lock(&p->lock);
    if (!p->alive) {
        pthread_mutex_unlock(&p->lock);
        return plain_alloc(nbytes, zero);
    }
    int64_t i = best_fit(p, nbytes);
    if (i >= 0) {
        cached_buffer c = p->cache[i];
        p->cache[i] = p->cache[--p->n_cached];
        p->stats.cached_buffers = p->n_cached;
        p->stats.cached_bytes -= c.capacity;
        p->stats.in_use_bytes += c.capacity;
        p->stats.hits++;
        p->refs++;
        pthread_mutex_unlock(&p->lock);
        *owner = p;
        *capacity = c.capacity;
        if (zero)
            memset(c.data, 0, nbytes);
        return c.data;
    }
    pthread_mutex_unlock(&p->lock);
    size_t cap = round_up_4k(nbytes);
    void *data = NULL;
    if (posix_memalign(&data, 64, cap) != 0)
        return NULL;
    if (zero)
        memset(data, 0, nbytes);
    pthread_mutex_lock(&p->lock);
    p->stats.misses++;
    p->stats.in_use_bytes += cap;
    p->refs++;
    pthread_mutex_unlock(&p->lock);
    *owner = p;
    *capacity = cap;
    return data;
}

void lb_pool_give(lb_pool *owner, void *data, size_t capacity)
{
    if (!data)
        return;
    if (!owner) {
        free(data);
        return;
    }
    pthread_mutex_lock(&owner->lock);
    owner->stats.in_use_bytes -= capacity;
    if (owner->alive && data) {
        if (owner->n_cached == owner->cache_capacity) {
            int64_t cap = owner->cache_capacity ? owner->cache_capacity * 2 : 64;
            cached_buffer *grown = realloc(owner->cache, (size_t)cap * sizeof *grown);
            if (grown) {
                owner->cache = grown;
                owner->cache_capacity = cap;
            }
        }
        if (owner->n_cached < owner->cache_capacity) {
            owner->cache[owner->n_cached++] = (cached_buffer){data, capacity, owner->epoch};
            owner->stats.cached_buffers = owner->n_cached;
            owner->stats.cached_bytes += capacity;
            data = NULL;
        }
    }
    free(data); /* a pool given up, or no room to remember the buffer */
    if (!drop_ref_locked(owner))
        pthread_mutex_unlock(&owner->lock);
}

/* Buffer pools: step memory reused across steps, trimmed, safe past the pool's end. */
#include <pthread.h>
#include <string.h>

#include "autograd/autograd.h"
#include "autograd/ops.h"
#include "tensor/pool.h"
#include "tensor/tensor.h"
#include "support.h"

static lb_pool_stats stats_of(lb_pool *p)
{
    lb_pool_stats s;
    lb_pool_get_stats(p, &s);
    return s;
}

static lb_tensor *filled(int64_t rows, int64_t cols, double value)
{
    int64_t shape[2] = {rows, cols};
    lb_tensor *t = lb_tensor_empty(LB_FLOAT32, 2, shape);
    if (t)
        lb_tensor_fill(t, value);
    return t;
}

static int all_zero(const lb_tensor *t)
{
    const float *p = lb_tensor_data(t);
    for (int64_t i = 0; i < lb_tensor_numel(t); i++)
        if (p[i] != 0.0f)
            return 0;
    return 1;
}

/* A freed buffer is taken again by the next allocation of a similar size; a reused
 * buffer still gives zeros to lb_tensor_zeros; small tensors bypass the pool. */
static void test_reuse_and_zeros(void)
{
    lb_pool *pool = lb_pool_new();
    CU_ASSERT_PTR_NULL(lb_pool_use(pool));
    CU_ASSERT_PTR_EQUAL(lb_pool_current(), pool);
    lb_tensor *a = filled(300, 1000, 7.0); /* 1.2 MB */
    void *first = lb_tensor_data(a);
    lb_tensor_free(a);
    lb_pool_stats s = stats_of(pool);
    CU_ASSERT_EQUAL(s.misses, 1);
    CU_ASSERT_EQUAL(s.hits, 0);
    CU_ASSERT_EQUAL(s.cached_buffers, 1);
    CU_ASSERT_TRUE(s.cached_bytes >= 1200000);
    CU_ASSERT_EQUAL(s.in_use_bytes, 0);

    int64_t shape[2] = {300, 990}; /* a little smaller: fits the cached buffer */
    lb_tensor *z = lb_tensor_zeros(LB_FLOAT32, 2, shape);
    CU_ASSERT_PTR_EQUAL(lb_tensor_data(z), first);
    CU_ASSERT_TRUE(all_zero(z));
    s = stats_of(pool);
    CU_ASSERT_EQUAL(s.hits, 1);
    CU_ASSERT_EQUAL(s.cached_buffers, 0);
    CU_ASSERT_TRUE(s.in_use_bytes >= 1200000);

    lb_tensor *big = filled(300, 2000, 1.0); /* twice the size: a new buffer */
    CU_ASSERT_PTR_NOT_EQUAL(lb_tensor_data(big), first);
    CU_ASSERT_EQUAL(stats_of(pool).misses, 2);
    lb_tensor *small = filled(10, 10, 1.0); /* below LB_POOL_MIN_BYTES */
    CU_ASSERT_EQUAL(stats_of(pool).misses, 2);
    CU_ASSERT_EQUAL(stats_of(pool).hits, 1);
    lb_tensor_free(small);
    lb_tensor_free(big);
    lb_tensor_free(z);
    CU_ASSERT_EQUAL(stats_of(pool).cached_buffers, 2);
    CU_ASSERT_EQUAL(stats_of(pool).in_use_bytes, 0);
    lb_pool_free(pool);
    CU_ASSERT_PTR_NULL(lb_pool_current());
}

/* The cache keeps what the last step released and drops what no step took since. */
static void test_trim_keeps_one_step(void)
{
    lb_pool *pool = lb_pool_new();
    lb_pool_use(pool);
    lb_tensor_free(filled(256, 1024, 1.0)); /* step 1 releases a 1 MiB buffer */
    lb_pool_trim(pool);
    CU_ASSERT_EQUAL(stats_of(pool).cached_buffers, 1); /* kept for step 2 */
    lb_tensor_free(filled(16, 16384, 2.0));            /* step 2 takes and releases it again */
    CU_ASSERT_EQUAL(stats_of(pool).hits, 1);
    lb_pool_trim(pool);
    CU_ASSERT_EQUAL(stats_of(pool).cached_buffers, 1);
    lb_pool_trim(pool); /* step 3 used nothing */
    CU_ASSERT_EQUAL(stats_of(pool).cached_buffers, 0);
    CU_ASSERT_EQUAL(stats_of(pool).cached_bytes, 0);
    lb_pool_use(NULL);
    lb_pool_free(pool);
}

static void *free_tensor(void *t)
{
    lb_tensor_free(t);
    return NULL;
}

/* Tensors may outlive their pool and may be freed on another thread. */
static void test_buffers_outlive_pool(void)
{
    lb_pool *pool = lb_pool_new();
    lb_pool_use(pool);
    lb_tensor *a = filled(512, 512, 3.0);
    lb_tensor *b = filled(512, 512, 4.0);
    lb_pool_free(pool); /* also leaves the thread on plain malloc */
    CU_ASSERT_PTR_NULL(lb_pool_current());
    CU_ASSERT_DOUBLE_EQUAL(lb_tensor_flat(a, 512 * 512 - 1), 3.0, 0);
    lb_tensor_free(a);
    pthread_t th;
    CU_ASSERT_EQUAL(pthread_create(&th, NULL, free_tensor, b), 0);
    pthread_join(th, NULL);

    lb_pool *live = lb_pool_new();
    lb_pool_use(live);
    lb_tensor *c = filled(512, 512, 5.0);
    CU_ASSERT_EQUAL(pthread_create(&th, NULL, free_tensor, c), 0);
    pthread_join(th, NULL);
    CU_ASSERT_EQUAL(stats_of(live).cached_buffers, 1); /* came back from the other thread */
    lb_pool_free(live);
}

/* One step of y = sum(gelu(x @ w)) with its backward; returns the sum. */
static double one_step(lb_graph *g, lb_var *w, const lb_tensor *x_value, lb_tensor *grad_out)
{
    lb_var *x = lb_input_copy(g, x_value, 0);
    lb_var *y = lb_sum(g, lb_gelu(g, lb_matmul(g, x, w)));
    CU_ASSERT_PTR_NOT_NULL_FATAL(y);
    double loss = lb_tensor_flat(y->value, 0);
    CU_ASSERT_EQUAL(lb_backward(g, y, NULL), LB_OK);
    lb_tensor_copy_into(grad_out, w->grad);
    lb_param_zero_grad(w);
    lb_graph_reset(g);
    return loss;
}

/* A graph's steps after the first take their memory from its pool, and give the same
 * bits as the first (reused buffers are cleared where the ops need zeros). */
static void test_graph_steps_reuse_memory(void)
{
    int64_t xs[2] = {512, 96}, ws[2] = {96, 160};
    lb_tensor *xv = lb_tensor_zeros(LB_FLOAT32, 2, xs);
    lb_tensor *wv = lb_tensor_zeros(LB_FLOAT32, 2, ws);
    float *px = lb_tensor_data(xv), *pw = lb_tensor_data(wv);
    for (int64_t i = 0; i < 512 * 96; i++)
        px[i] = (float)((i * 37 % 101) - 50) / 50.0f;
    for (int64_t i = 0; i < 96 * 160; i++)
        pw[i] = (float)((i * 53 % 89) - 44) / 440.0f;
    lb_var *w = lb_param_new(wv, "w");
    lb_graph *g = lb_graph_new();
    lb_tensor *g1 = lb_tensor_zeros(LB_FLOAT32, 2, ws), *g2 = lb_tensor_zeros(LB_FLOAT32, 2, ws);
    /* The first step's input copy is made before the graph's first op (no pool yet). */
    double l1 = one_step(g, w, xv, g1);
    double l2 = one_step(g, w, xv, g2);
    lb_pool_stats after2 = stats_of(lb_graph_pool(g));
    CU_ASSERT_TRUE(after2.misses >= 3); /* x, x @ w, gelu, their gradients */
    for (int step = 0; step < 3; step++)
        l2 = one_step(g, w, xv, g2);
    lb_pool_stats after5 = stats_of(lb_graph_pool(g));
    CU_ASSERT_EQUAL(after5.misses, after2.misses); /* nothing new after the second step */
    CU_ASSERT_TRUE(after5.hits - after2.hits >= 3 * 3);
    CU_ASSERT_EQUAL(after5.in_use_bytes, 0);
    CU_ASSERT_EQUAL(memcmp(&l1, &l2, sizeof l1), 0);
    CU_ASSERT_EQUAL(memcmp(lb_tensor_data(g1), lb_tensor_data(g2), (size_t)(96 * 160) * sizeof(float)), 0);
    lb_graph_free(g);
    CU_ASSERT_PTR_NULL(lb_pool_current());
    lb_param_free(w);
    lb_tensor_free(g1);
    lb_tensor_free(g2);
    lb_tensor_free(xv);
}

int main(void)
{
    const lb_test_case cases[] = {
        {"a freed buffer is reused and zeroed again", test_reuse_and_zeros},
        {"trim keeps one step's buffers", test_trim_keeps_one_step},
        {"buffers outlive their pool and cross threads", test_buffers_outlive_pool},
        {"a graph's later steps reuse its memory, same bits", test_graph_steps_reuse_memory},
        {NULL, NULL},
    };
    return lb_test_main("pool", cases);
}

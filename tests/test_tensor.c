/* Tensor views, broadcasting rules and the seeded generator. */
#include "tensor/names.h"
#include "tensor/rng.h"
#include "tensor/tensor.h"
#include "support.h"

#include <string.h>

static void test_views_share_storage(void)
{
    int64_t shape[3] = {2, 3, 4};
    double v[24];
    for (int i = 0; i < 24; i++)
        v[i] = i;
    lb_tensor *t = lb_tensor_from_doubles(LB_FLOAT64, 3, shape, v);
    lb_tensor *tr = lb_tensor_transpose(t, 0, 2); /* [4, 3, 2] */
    CU_ASSERT_EQUAL(tr->shape[0], 4);
    CU_ASSERT_FALSE(lb_tensor_is_contiguous(tr));
    int64_t idx[3] = {3, 1, 1}; /* = t[1, 1, 3] = 12 + 4 + 3 */
    CU_ASSERT_DOUBLE_EQUAL(lb_tensor_get(tr, idx), 19.0, 0);
    lb_tensor *sl = lb_tensor_slice(t, 2, 1, 4, 2); /* t[:, :, 1:4:2] -> [2, 3, 2] */
    CU_ASSERT_EQUAL(sl->shape[2], 2);
    double want_sl[12] = {1, 3, 5, 7, 9, 11, 13, 15, 17, 19, 21, 23};
    LB_ASSERT_CLOSE(sl, want_sl, 0, 0);
    lb_tensor *c = lb_tensor_copy(tr, LB_FLOAT32);
    CU_ASSERT_TRUE(lb_tensor_is_contiguous(c));
    CU_ASSERT_DOUBLE_EQUAL(lb_tensor_flat(c, 1), 12.0, 0); /* tr[0,0,1] = t[1,0,0] */
    int64_t bad[2] = {5, 5};
    CU_ASSERT_PTR_NULL(lb_tensor_reshape(t, 2, bad));
    CU_ASSERT_EQUAL(lb_last_status(), LB_ERR_SHAPE);
    int64_t inferred[2] = {-1, 6};
    lb_tensor *r = lb_tensor_reshape(tr, 2, inferred); /* non-contiguous: copied */
    CU_ASSERT_EQUAL(r->shape[0], 4);
    CU_ASSERT_DOUBLE_EQUAL(lb_tensor_flat(r, 1), 12.0, 0);
    lb_tensor_free(r);
    lb_tensor_free(c);
    lb_tensor_free(sl);
    lb_tensor_free(tr);
    lb_tensor_free(t);
}

static void test_broadcast_shapes(void)
{
    int64_t a[3] = {4, 1, 3}, b[2] = {5, 1}, out[LB_MAX_DIMS];
    int n = 0;
    CU_ASSERT_EQUAL(lb_broadcast_shapes("add", 3, a, 2, b, &n, out), LB_OK);
    CU_ASSERT_EQUAL(n, 3);
    CU_ASSERT_EQUAL(out[0], 4);
    CU_ASSERT_EQUAL(out[1], 5);
    CU_ASSERT_EQUAL(out[2], 3);
    int64_t c[1] = {2};
    CU_ASSERT_EQUAL(lb_broadcast_shapes("add", 3, a, 1, c, &n, out), LB_ERR_SHAPE);
    CU_ASSERT_PTR_NOT_NULL(strstr(lb_last_error(), "[4, 1, 3]"));
    CU_ASSERT_PTR_NOT_NULL(strstr(lb_last_error(), "add"));
}

/* A message built from the previous one keeps it (the buffers must not overlap). */
static void test_error_wraps_previous(void)
{
    lb_error(LB_ERR_VALUE, "inner detail %d", 42);
    CU_ASSERT_EQUAL(lb_error(LB_ERR_FORMAT, "outer: %s", lb_last_error()), LB_ERR_FORMAT);
    CU_ASSERT_STRING_EQUAL(lb_last_error(), "outer: inner detail 42");
    CU_ASSERT_EQUAL(lb_last_status(), LB_ERR_FORMAT);
    lb_error_context("file.h5");
    CU_ASSERT_STRING_EQUAL(lb_last_error(), "file.h5: outer: inner detail 42");
    lb_clear_error();
    CU_ASSERT_STRING_EQUAL(lb_last_error(), "");
}

static void test_expand(void)
{
    int64_t shape[2] = {3, 1}, to[3] = {2, 3, 4};
    double v[3] = {1, 2, 3};
    lb_tensor *t = lb_tensor_from_doubles(LB_FLOAT32, 2, shape, v);
    lb_tensor *e = lb_tensor_expand(t, 3, to);
    CU_ASSERT_EQUAL(e->strides[0], 0);
    int64_t idx[3] = {1, 2, 3};
    CU_ASSERT_DOUBLE_EQUAL(lb_tensor_get(e, idx), 3.0, 0);
    lb_tensor_free(e);
    lb_tensor_free(t);
}

static void test_rng_reproducible(void)
{
    lb_rng a, b;
    lb_rng_seed(&a, 42);
    lb_rng_seed(&b, 42);
    for (int i = 0; i < 100; i++)
        CU_ASSERT_EQUAL(lb_rng_next(&a), lb_rng_next(&b));
    /* Reference values of xoshiro256** seeded by splitmix64(0): first output. */
    lb_rng z;
    lb_rng_seed(&z, 0);
    CU_ASSERT_EQUAL(z.s[0], 0xE220A8397B1DCDAFull);
    double sum = 0, sq = 0;
    lb_rng_seed(&a, 7);
    for (int i = 0; i < 20000; i++) {
        double x = lb_rng_normal(&a);
        sum += x;
        sq += x * x;
    }
    CU_ASSERT_DOUBLE_EQUAL(sum / 20000, 0.0, 0.03);
    CU_ASSERT_DOUBLE_EQUAL(sq / 20000, 1.0, 0.04);
    int counts[5] = {0};
    for (int i = 0; i < 5000; i++) {
        int64_t k = lb_rng_int(&a, 3, 7);
        CU_ASSERT_TRUE(k >= 3 && k <= 7);
        counts[k - 3]++;
    }
    for (int i = 0; i < 5; i++)
        CU_ASSERT_TRUE(counts[i] > 900 && counts[i] < 1100);
    int64_t perm[10];
    int seen[10] = {0};
    lb_rng_permutation(&a, 10, perm);
    for (int i = 0; i < 10; i++)
        seen[perm[i]]++;
    for (int i = 0; i < 10; i++)
        CU_ASSERT_EQUAL(seen[i], 1);
}

static void test_names(void)
{
    static const char *const two[] = {"wall", "cpu"}, *const three[] = {"sgd", "adam", "adamw"};
    int i = -1;
    CU_ASSERT_EQUAL(LB_COUNT_OF(three), 3);
    CU_ASSERT_STRING_EQUAL(lb_name_of(three, LB_COUNT_OF(three), 2, "unknown"), "adamw");
    CU_ASSERT_STRING_EQUAL(lb_name_of(three, LB_COUNT_OF(three), 3, "unknown"), "unknown");
    CU_ASSERT_PTR_NULL(lb_name_of(three, LB_COUNT_OF(three), -1, NULL));
    CU_ASSERT_EQUAL(lb_name_parse("optimizer", three, 3, "adam", 0, &i), LB_OK);
    CU_ASSERT_EQUAL(i, 1);
    CU_ASSERT_EQUAL(lb_name_parse("optimizer", three, 3, "AdamW", 1, &i), LB_OK);
    CU_ASSERT_EQUAL(i, 2);
    CU_ASSERT_EQUAL(lb_name_parse("optimizer", three, 3, "AdamW", 0, &i), LB_ERR_VALUE);
    CU_ASSERT_STRING_EQUAL(lb_last_error(), "optimizer 'AdamW': expected one of sgd, adam, adamw");
    CU_ASSERT_EQUAL(lb_name_parse("budget clock", two, 2, NULL, 0, &i), LB_ERR_VALUE);
    CU_ASSERT_STRING_EQUAL(lb_last_error(), "budget clock '(null)': expected wall or cpu");
    CU_ASSERT_EQUAL(lb_name_parse("x", NULL, 2, "wall", 0, &i), LB_ERR_VALUE);
    CU_ASSERT_EQUAL(i, 2); /* untouched on error */
}

int main(void)
{
    const lb_test_case cases[] = {
        {"views share storage and index correctly", test_views_share_storage},
        {"numpy broadcasting of shapes", test_broadcast_shapes},
        {"expand gives stride 0", test_expand},
        {"an error message may wrap the previous one", test_error_wraps_previous},
        {"seeded generator is reproducible and well distributed", test_rng_reproducible},
        {"enum names read both ways from one table", test_names},
        {NULL, NULL},
    };
    return lb_test_main("tensor", cases);
}

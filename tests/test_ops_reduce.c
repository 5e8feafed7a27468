/* Reductions: sum and mean over everything or over axes; forward values, gradients,
 * float32 against float64 (accumulation in double), errors. */
#include <math.h>
#include <string.h>

#include "autograd/gradcheck.h"
#include "autograd/op_table.h"
#include "autograd/ops.h"
#include "tensor/rng.h"
#include "support.h"

static void test_sum_mean_all(void)
{
    lb_graph *g = lb_graph_new();
    int64_t s[2] = {2, 3};
    double v[6] = {1, 2, 3, 4, 5, 6.5};
    for (int dt = 0; dt < 2; dt++) {
        lb_var *x = lb_input(g, lb_tensor_from_doubles(dt ? LB_FLOAT64 : LB_FLOAT32, 2, s, v), 0);
        lb_var *sum = lb_sum(g, x), *mean = lb_mean(g, x);
        lb_test_assert_shape(sum, 0, NULL);
        lb_test_assert_shape(mean, 0, NULL);
        CU_ASSERT_EQUAL(sum->value->dtype, x->value->dtype);
        CU_ASSERT_DOUBLE_EQUAL(lb_tensor_flat(sum->value, 0), 21.5, 1e-6);
        CU_ASSERT_DOUBLE_EQUAL(lb_tensor_flat(mean->value, 0), 21.5 / 6, 1e-6);
    }
    /* A 0-dim input is its own sum and mean. */
    lb_var *c = lb_input(g, lb_tensor_scalar(LB_FLOAT64, -2.25), 0);
    CU_ASSERT_DOUBLE_EQUAL(lb_tensor_flat(lb_sum(g, c)->value, 0), -2.25, 0);
    CU_ASSERT_DOUBLE_EQUAL(lb_tensor_flat(lb_mean(g, c)->value, 0), -2.25, 0);
    lb_graph_free(g);
}

static void test_sum_mean_axes_2d(void)
{
    lb_graph *g = lb_graph_new();
    int64_t s[2] = {2, 3};
    double v[6] = {1, 2, 3, 4, 5, 6};
    lb_var *x = lb_input(g, lb_tensor_from_doubles(LB_FLOAT64, 2, s, v), 0);
    int ax0[1] = {0}, ax1[1] = {1}, axm1[1] = {-1}, both[2] = {1, 0};
    int64_t s3[1] = {3}, s2[1] = {2}, s21[2] = {2, 1}, s13[2] = {1, 3};

    lb_var *y = lb_sum_axes(g, x, 1, ax0, 0);
    lb_test_assert_shape(y, 1, s3);
    double want0[3] = {5, 7, 9};
    LB_ASSERT_CLOSE(y->value, want0, 0, 0);
    y = lb_sum_axes(g, x, 1, ax1, 0);
    lb_test_assert_shape(y, 1, s2);
    double want1[2] = {6, 15};
    LB_ASSERT_CLOSE(y->value, want1, 0, 0);
    y = lb_sum_axes(g, x, 1, axm1, 1);
    lb_test_assert_shape(y, 2, s21);
    LB_ASSERT_CLOSE(y->value, want1, 0, 0);
    y = lb_sum_axes(g, x, 2, both, 0);
    lb_test_assert_shape(y, 0, NULL);
    CU_ASSERT_DOUBLE_EQUAL(lb_tensor_flat(y->value, 0), 21, 0);
    int64_t s11[2] = {1, 1};
    lb_test_assert_shape(lb_sum_axes(g, x, 2, both, 1), 2, s11);
    /* No axes: nothing is reduced (numpy's axis=()), a copy. */
    y = lb_sum_axes(g, x, 0, NULL, 0);
    lb_test_assert_shape(y, 2, s);
    LB_ASSERT_CLOSE(y->value, v, 0, 0);

    y = lb_mean_axes(g, x, 1, ax0, 1);
    lb_test_assert_shape(y, 2, s13);
    double mean0[3] = {2.5, 3.5, 4.5};
    LB_ASSERT_CLOSE(y->value, mean0, 1e-15, 0);
    y = lb_mean_axes(g, x, 1, axm1, 0);
    lb_test_assert_shape(y, 1, s2);
    double mean1[2] = {2, 5};
    LB_ASSERT_CLOSE(y->value, mean1, 1e-15, 0);
    lb_graph_free(g);
}

static void test_sum_mean_axes_3d(void)
{
    lb_graph *g = lb_graph_new();
    int64_t s[3] = {2, 3, 4};
    lb_var *x = lb_input(g, lb_test_iota(LB_FLOAT32, 3, s), 0); /* x[i, j, k] = 12 i + 4 j + k */
    /* Over i and k: sum = 60 + 32 j; the order of the axes does not matter. */
    int outer[2] = {0, 2}, outer_rev[2] = {-1, 0};
    int64_t s3[1] = {3}, s131[3] = {1, 3, 1};
    double want[3] = {60, 92, 124}, want_mean[3] = {7.5, 11.5, 15.5};
    lb_var *y = lb_sum_axes(g, x, 2, outer, 0);
    lb_test_assert_shape(y, 1, s3);
    LB_ASSERT_CLOSE(y->value, want, 0, 0);
    LB_ASSERT_CLOSE(lb_sum_axes(g, x, 2, outer_rev, 0)->value, want, 0, 0);
    y = lb_mean_axes(g, x, 2, outer, 1);
    lb_test_assert_shape(y, 3, s131);
    LB_ASSERT_CLOSE(y->value, want_mean, 1e-6, 0);
    /* Over j (the middle): 36 i + 12 + 3 k. */
    int mid[1] = {1};
    int64_t s24[2] = {2, 4};
    double want_mid[8] = {12, 15, 18, 21, 48, 51, 54, 57};
    y = lb_sum_axes(g, x, 1, mid, 0);
    lb_test_assert_shape(y, 2, s24);
    LB_ASSERT_CLOSE(y->value, want_mid, 0, 0);
    /* Over i (the first): 12 + 8 j + 2 k. */
    int first[1] = {0};
    double want_first[12] = {12, 14, 16, 18, 20, 22, 24, 26, 28, 30, 32, 34};
    LB_ASSERT_CLOSE(lb_sum_axes(g, x, 1, first, 0)->value, want_first, 0, 0);
    lb_graph_free(g);
}

/* Empty tensors: the sum of nothing is 0 and the mean NaN (as torch). */
static void test_empty(void)
{
    lb_graph *g = lb_graph_new();
    int64_t s[2] = {0, 3};
    lb_var *x = lb_input(g, lb_tensor_zeros(LB_FLOAT64, 2, s), 1);
    CU_ASSERT_DOUBLE_EQUAL(lb_tensor_flat(lb_sum(g, x)->value, 0), 0, 0);
    CU_ASSERT_TRUE(isnan(lb_tensor_flat(lb_mean(g, x)->value, 0)));
    int ax0[1] = {0}, ax1[1] = {1};
    lb_var *y = lb_sum_axes(g, x, 1, ax0, 0);
    double zeros[3] = {0, 0, 0};
    LB_ASSERT_CLOSE(y->value, zeros, 0, 0);
    int64_t s0[1] = {0};
    lb_test_assert_shape(lb_mean_axes(g, x, 1, ax1, 0), 1, s0);
    lb_var *m = lb_mean(g, x);
    CU_ASSERT_EQUAL(lb_backward(g, m, NULL), LB_OK);
    CU_ASSERT_EQUAL(lb_tensor_numel(x->grad), 0);
    lb_graph_free(g);
}

/* float32 sums accumulate in double: 1 followed by 49999 values of 1e-8 gives
 * 1.0005, where a float accumulator would stay at exactly 1. Both the inner-run
 * path (last axis reduced) and the scattered path (first axis reduced). */
static void test_float32_accumulates_in_double(void)
{
    enum { N = 50000 };
    lb_graph *g = lb_graph_new();
    int64_t rows[2] = {2, N}, cols[2] = {N, 2};
    lb_tensor *a = lb_tensor_zeros(LB_FLOAT32, 2, rows), *b = lb_tensor_zeros(LB_FLOAT32, 2, cols);
    float *pa = lb_tensor_data(a), *pb = lb_tensor_data(b);
    for (int64_t i = 0; i < 2 * N; i++)
        pa[i] = pb[i] = 1e-8f;
    pa[0] = pa[N] = pb[0] = pb[1] = 1.0f;
    double exact = 1.0 + (N - 1) * (double)1e-8f;
    lb_var *xa = lb_input(g, a, 0), *xb = lb_input(g, b, 0);
    int last[1] = {1}, first[1] = {0};
    lb_var *ya = lb_sum_axes(g, xa, 1, last, 0), *yb = lb_sum_axes(g, xb, 1, first, 0);
    double want[2] = {exact, exact};
    LB_ASSERT_CLOSE(ya->value, want, 0, 1e-7);
    LB_ASSERT_CLOSE(yb->value, want, 0, 1e-7);
    CU_ASSERT_DOUBLE_EQUAL(lb_tensor_flat(lb_sum(g, xa)->value, 0), 2 * exact, 2e-7 * 2 * exact);
    double mean = 2 * exact / (2 * N);
    CU_ASSERT_DOUBLE_EQUAL(lb_tensor_flat(lb_mean(g, xb)->value, 0), mean, 1e-7 * mean);
    lb_graph_free(g);
}

/* ---- gradients ---- */

typedef struct axes_case {
    int mean, n_axes, axes[3], keepdim;
} axes_case;

/* Reduction of permute(tanh(x)): x [2, 3, 4, 5] -> [3, 5, 2, 4] -> reduce. */
static lb_var *axes_fn(lb_graph *g, lb_var *const *p, void *user)
{
    const axes_case *c = user;
    int perm[4] = {1, 3, 0, 2};
    lb_var *x = lb_permute(g, lb_tanh(g, p[0]), perm);
    return c->mean ? lb_mean_axes(g, x, c->n_axes, c->axes, c->keepdim)
                   : lb_sum_axes(g, x, c->n_axes, c->axes, c->keepdim);
}

static void test_axes_gradcheck(void)
{
    int64_t s[4] = {2, 3, 4, 5};
    lb_var *p = lb_test_random_param(4, s, 1, "x");
    axes_case cases[] = {
        {0, 1, {0}, 0},      {1, 1, {-1}, 1},     {0, 2, {1, 3}, 1}, {1, 2, {3, 0}, 0},
        {0, 3, {0, 1, 2}, 0}, {1, 3, {1, 2, 3}, 1}, {1, 1, {2}, 0},    {0, 0, {0}, 0},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        lb_status st = lb_gradcheck(axes_fn, &cases[i], 1, &p, NULL, NULL);
        if (st != LB_OK)
            fprintf(stderr, "\n  case %zu: %s\n", i, lb_last_error());
        CU_ASSERT_EQUAL(st, LB_OK);
    }
    lb_param_free(p);
}

/* sum(reshape(slice(x))) and mean(x * x) as scalars, and a reduction feeding
 * another op: the mean over the last axis subtracted from x (centring). */
static lb_var *all_fn(lb_graph *g, lb_var *const *p, void *user)
{
    int which = *(const int *)user;
    int64_t to[2] = {3, -1}; /* [2, 3, 3] -> [3, 6] */
    int last[1] = {-1};
    switch (which) {
    case 0: return lb_sum(g, lb_reshape(g, lb_slice(g, p[0], 1, 1, 4, 1), 2, to));
    case 1: return lb_mean(g, lb_mul(g, p[0], p[0]));
    default: return lb_sub(g, p[0], lb_mean_axes(g, lb_exp(g, p[0]), 1, last, 1));
    }
}

static void test_all_gradcheck(void)
{
    int64_t s[3] = {2, 4, 3};
    lb_var *p = lb_test_random_param(3, s, 2, "x");
    for (int which = 0; which < 3; which++) {
        lb_gradcheck_leaf r;
        lb_status st = lb_gradcheck(all_fn, &which, 1, &p, NULL, &r);
        if (st != LB_OK)
            fprintf(stderr, "\n  case %d: %s\n", which, lb_last_error());
        CU_ASSERT_EQUAL(st, LB_OK);
        CU_ASSERT_TRUE(r.passed);
    }
    lb_param_free(p);
}

/* Exact gradients by hand. */
static void test_backward_values(void)
{
    int64_t s[2] = {2, 3};
    lb_var *p = lb_param_new(lb_test_iota(LB_FLOAT64, 2, s), "x");
    lb_graph *g = lb_graph_new();
    int ax1[1] = {1}, ax0[1] = {0};
    /* mean over columns: each element gets grad_output[row] / 3. */
    lb_var *m = lb_mean_axes(g, p, 1, ax1, 0);
    int64_t s2[1] = {2};
    double gov[2] = {1, 2};
    lb_tensor *go = lb_tensor_from_doubles(LB_FLOAT64, 1, s2, gov);
    CU_ASSERT_EQUAL(lb_backward(g, m, go), LB_OK);
    double want_m[6] = {1.0 / 3, 1.0 / 3, 1.0 / 3, 2.0 / 3, 2.0 / 3, 2.0 / 3};
    LB_ASSERT_CLOSE(p->grad, want_m, 1e-15, 0);
    lb_tensor_free(go);
    lb_param_zero_grad(p);
    lb_graph_reset(g);
    /* sum over rows, keepdim: each element gets grad_output[0, col]. */
    lb_var *y = lb_sum_axes(g, p, 1, ax0, 1);
    int64_t s13[2] = {1, 3};
    double gov3[3] = {1, -2, 3};
    go = lb_tensor_from_doubles(LB_FLOAT64, 2, s13, gov3);
    CU_ASSERT_EQUAL(lb_backward(g, y, go), LB_OK);
    double want_y[6] = {1, -2, 3, 1, -2, 3};
    LB_ASSERT_CLOSE(p->grad, want_y, 0, 0);
    lb_tensor_free(go);
    lb_graph_free(g);
    lb_param_free(p);
}

/* float32 agrees with float64, values and gradients. */
static lb_var *reduce_pipeline(lb_graph *g, lb_var *x)
{
    int ax02[2] = {0, 2}, ax1[1] = {1};
    lb_var *a = lb_sum_axes(g, x, 2, ax02, 1);        /* [1, 4, 1] */
    lb_var *b = lb_mean_axes(g, x, 1, ax1, 1);        /* [3, 1, 5] */
    lb_var *prod = lb_mul(g, lb_mul(g, x, a), b);     /* [3, 4, 5] */
    return lb_add(g, lb_sum(g, prod), lb_mean(g, lb_mul(g, x, x)));
}

static void test_float32_matches_float64(void)
{
    int64_t s[3] = {3, 4, 5};
    lb_var *x64 = lb_test_random_param(3, s, 3, "x");
    lb_var *x32 = lb_param_new(lb_tensor_copy(x64->value, LB_FLOAT32), "x");
    lb_graph *g = lb_graph_new();
    lb_var *y64 = reduce_pipeline(g, x64), *y32 = reduce_pipeline(g, x32);
    CU_ASSERT_PTR_NOT_NULL_FATAL(y32);
    CU_ASSERT_EQUAL(y32->value->dtype, LB_FLOAT32);
    LB_ASSERT_TENSORS_CLOSE(y32->value, y64->value, 1e-5, 1e-5);
    CU_ASSERT_EQUAL(lb_backward(g, y64, NULL), LB_OK);
    lb_graph_reset(g);
    y32 = reduce_pipeline(g, x32);
    CU_ASSERT_EQUAL(lb_backward(g, y32, NULL), LB_OK);
    LB_ASSERT_TENSORS_CLOSE(x32->grad, x64->grad, 1e-5, 1e-5);
    lb_graph_free(g);
    lb_param_free(x64);
    lb_param_free(x32);
}

/* Two graphs using the same parameter: gradients add. */
static void test_backward_twice_accumulates(void)
{
    int64_t s[2] = {2, 3};
    lb_var *p = lb_param_new(lb_test_iota(LB_FLOAT64, 2, s), "p");
    lb_graph *g1 = lb_graph_new(), *g2 = lb_graph_new();
    CU_ASSERT_EQUAL(lb_backward(g1, lb_mean(g1, p), NULL), LB_OK);
    double once[6] = {1.0 / 6, 1.0 / 6, 1.0 / 6, 1.0 / 6, 1.0 / 6, 1.0 / 6};
    LB_ASSERT_CLOSE(p->grad, once, 1e-15, 0);
    int ax[1] = {0};
    CU_ASSERT_EQUAL(lb_backward(g2, lb_sum(g2, lb_sum_axes(g2, p, 1, ax, 0)), NULL), LB_OK);
    double twice[6];
    for (int i = 0; i < 6; i++)
        twice[i] = 1.0 / 6 + 1;
    LB_ASSERT_CLOSE(p->grad, twice, 1e-15, 0);
    lb_graph_free(g1);
    lb_graph_free(g2);
    lb_param_free(p);
}

/* Test the tester: a wrong mean scale must make gradcheck fail. */
static lb_var *wrong_mean_fn(lb_graph *g, lb_var *const *p, void *user)
{
    int ax[1] = {1};
    lb_var *y = lb_mean_axes(g, p[0], 1, ax, 0);
    if (y && y->requires_grad && *(const int *)user)
        y->attr_f[0] *= 1.01; /* a 1% error in the backward only */
    return y;
}

static void test_gradcheck_catches_wrong_scale(void)
{
    int64_t s[2] = {3, 4};
    lb_var *p = lb_test_random_param(2, s, 4, "x");
    int wrong = 0;
    CU_ASSERT_EQUAL(lb_gradcheck(wrong_mean_fn, &wrong, 1, &p, NULL, NULL), LB_OK);
    wrong = 1;
    CU_ASSERT_EQUAL(lb_gradcheck(wrong_mean_fn, &wrong, 1, &p, NULL, NULL), LB_ERR_NUMERIC);
    lb_param_free(p);
}

/* ---- errors ---- */

static void test_errors(void)
{
    lb_graph *g = lb_graph_new();
    int64_t s[2] = {2, 3};
    lb_var *x = lb_input(g, lb_test_iota(LB_FLOAT64, 2, s), 1);
    int64_t before = lb_graph_size(g);
    int ax2[1] = {2}, axm3[1] = {-3}, dup[2] = {1, -1}, ok[1] = {0};
    CU_ASSERT_PTR_NULL(lb_sum_axes(g, x, 1, ax2, 0));
    LB_ASSERT_ERROR(LB_ERR_SHAPE, "sum", "[2, 3]");
    CU_ASSERT_PTR_NULL(lb_mean_axes(g, x, 1, axm3, 1));
    LB_ASSERT_ERROR(LB_ERR_SHAPE, "mean", "[2, 3]");
    CU_ASSERT_PTR_NULL(lb_sum_axes(g, x, 2, dup, 0));
    LB_ASSERT_ERROR(LB_ERR_VALUE, "sum", "[2, 3]");
    CU_ASSERT_PTR_NULL(lb_mean_axes(g, x, -1, ok, 0));
    LB_ASSERT_ERROR(LB_ERR_VALUE, "mean", "[2, 3]");
    CU_ASSERT_PTR_NULL(lb_sum_axes(g, x, 1, NULL, 0));
    LB_ASSERT_ERROR(LB_ERR_VALUE, "sum", "[2, 3]");
    lb_var *c = lb_input(g, lb_tensor_scalar(LB_FLOAT64, 1), 0);
    CU_ASSERT_PTR_NULL(lb_sum_axes(g, c, 1, ok, 0));
    LB_ASSERT_ERROR(LB_ERR_SHAPE, "sum", "float64[]");
    CU_ASSERT_EQUAL(lb_graph_size(g), before + 1); /* only c was added */
    /* A NULL input keeps the upstream error. */
    CU_ASSERT_PTR_NULL(lb_mean(g, lb_sum_axes(g, x, 1, ax2, 0)));
    LB_ASSERT_ERROR(LB_ERR_SHAPE, "sum", "[2, 3]");
    CU_ASSERT_PTR_NULL(lb_sum(g, NULL));
    LB_ASSERT_ERROR(LB_ERR_SHAPE, "sum", "[2, 3]");
    /* A variable of another graph. */
    lb_graph *other = lb_graph_new();
    CU_ASSERT_PTR_NULL(lb_mean(other, x));
    CU_ASSERT_EQUAL(lb_last_status(), LB_ERR_STATE);
    CU_ASSERT_TRUE(lb_test_error_has("mean"));
    lb_graph_free(other);
    lb_graph_free(g);
}

int main(void)
{
    const lb_test_case cases[] = {
        {"sum and mean of everything give 0-dim values", test_sum_mean_all},
        {"sum and mean over axes of a matrix, keepdim, no axes", test_sum_mean_axes_2d},
        {"sum and mean over first, middle, last and several axes", test_sum_mean_axes_3d},
        {"empty tensors: sum 0, mean NaN", test_empty},
        {"float32 sums accumulate in double", test_float32_accumulates_in_double},
        {"gradcheck sum/mean over axes after permute", test_axes_gradcheck},
        {"gradcheck sum/mean of everything and centring", test_all_gradcheck},
        {"backward values by hand", test_backward_values},
        {"float32 matches float64, values and gradients", test_float32_matches_float64},
        {"backward through two graphs accumulates", test_backward_twice_accumulates},
        {"gradcheck fails on a wrong mean scale", test_gradcheck_catches_wrong_scale},
        {"errors name the op and the shapes", test_errors},
        {NULL, NULL},
    };
    return lb_test_main("ops_reduce", cases);
}

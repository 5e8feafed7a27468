/* The tape, the elementwise ops, matmul and the gradient checker itself. */
#include <math.h>
#include <string.h>

#include "autograd/gradcheck.h"
#include "autograd/op_table.h"
#include "autograd/ops.h"
#include "kernels/gelu.h"
#include "support.h"
#include "tensor/kernels.h"
#include "tensor/rng.h"

static lb_var *param(lb_dtype dtype, int ndim, const int64_t *shape, const double *values, const char *name)
{
    return lb_param_new(lb_tensor_from_doubles(dtype, ndim, shape, values), name);
}

/* ---- forward values ---- */

static void test_binary_broadcast_forward(void)
{
    lb_graph *g = lb_graph_new();
    int64_t sa[2] = {2, 3}, sb[1] = {3};
    double va[6] = {1, 2, 3, 4, 5, 6}, vb[3] = {10, 20, 40};
    lb_var *a = lb_input(g, lb_tensor_from_doubles(LB_FLOAT32, 2, sa, va), 0);
    lb_var *b = lb_input(g, lb_tensor_from_doubles(LB_FLOAT32, 1, sb, vb), 0);
    double add[6] = {11, 22, 43, 14, 25, 46}, sub[6] = {-9, -18, -37, -6, -15, -34};
    double mul[6] = {10, 40, 120, 40, 100, 240}, div[6] = {0.1, 0.1, 0.075, 0.4, 0.25, 0.15};
    LB_ASSERT_CLOSE(lb_add(g, a, b)->value, add, 1e-6, 0);
    LB_ASSERT_CLOSE(lb_sub(g, a, b)->value, sub, 1e-6, 0);
    LB_ASSERT_CLOSE(lb_mul(g, a, b)->value, mul, 1e-6, 0);
    LB_ASSERT_CLOSE(lb_div(g, a, b)->value, div, 1e-6, 0);
    double neg[6] = {-1, -2, -3, -4, -5, -6}, sc[6] = {0.5, 1, 1.5, 2, 2.5, 3};
    LB_ASSERT_CLOSE(lb_neg(g, a)->value, neg, 0, 0);
    LB_ASSERT_CLOSE(lb_scale(g, a, 0.5)->value, sc, 0, 0);
    /* Incompatible shapes: one error naming the op and both shapes. */
    int64_t sc3[1] = {4};
    lb_var *c = lb_input(g, lb_tensor_zeros(LB_FLOAT32, 1, sc3), 0);
    CU_ASSERT_PTR_NULL(lb_add(g, a, c));
    CU_ASSERT_EQUAL(lb_last_status(), LB_ERR_SHAPE);
    CU_ASSERT_PTR_NOT_NULL(strstr(lb_last_error(), "add"));
    CU_ASSERT_PTR_NOT_NULL(strstr(lb_last_error(), "[2, 3]"));
    CU_ASSERT_PTR_NOT_NULL(strstr(lb_last_error(), "[4]"));
    /* Mixed dtypes are an error, not a silent conversion. */
    lb_var *d = lb_input(g, lb_tensor_zeros(LB_FLOAT64, 1, sb), 0);
    CU_ASSERT_PTR_NULL(lb_mul(g, a, d));
    CU_ASSERT_EQUAL(lb_last_status(), LB_ERR_DTYPE);
    /* A NULL input propagates without a crash. */
    CU_ASSERT_PTR_NULL(lb_exp(g, lb_add(g, a, c)));
    lb_graph_free(g);
}

static void test_unary_forward(void)
{
    lb_graph *g = lb_graph_new();
    int64_t s[1] = {4};
    double v[4] = {-2.0, -0.5, 0.25, 3.0};
    lb_var *x = lb_input(g, lb_tensor_from_doubles(LB_FLOAT64, 1, s, v), 0);
    double e[4], th[4], sg[4], re[4] = {0, 0, 0.25, 3.0};
    /* GELU reference values from torch.nn.functional.gelu (exact erf form). */
    double ge[4] = {-0.04550026389635842, -0.15426876936299344, 0.14967658142073093, 2.99595030590511};
    for (int i = 0; i < 4; i++) {
        e[i] = exp(v[i]);
        th[i] = tanh(v[i]);
        sg[i] = 1 / (1 + exp(-v[i]));
    }
    LB_ASSERT_CLOSE(lb_exp(g, x)->value, e, 1e-14, 1e-14);
    LB_ASSERT_CLOSE(lb_tanh(g, x)->value, th, 1e-14, 0);
    LB_ASSERT_CLOSE(lb_sigmoid(g, x)->value, sg, 1e-14, 0);
    LB_ASSERT_CLOSE(lb_relu(g, x)->value, re, 0, 0);
    LB_ASSERT_CLOSE(lb_gelu(g, x)->value, ge, 1e-12, 0);
    double lg[4] = {log(2.0), log(0.5), log(0.25), log(3.0)};
    double av[4] = {2.0, 0.5, 0.25, 3.0};
    lb_var *p = lb_input(g, lb_tensor_from_doubles(LB_FLOAT64, 1, s, av), 0);
    LB_ASSERT_CLOSE(lb_log(g, p)->value, lg, 1e-14, 0);
    /* sigmoid of large negative inputs stays finite and exact */
    double big[4] = {-800, -40, 40, 800};
    lb_var *bx = lb_input(g, lb_tensor_from_doubles(LB_FLOAT64, 1, s, big), 0);
    lb_var *sb = lb_sigmoid(g, bx);
    CU_ASSERT_EQUAL(lb_tensor_flat(sb->value, 0), 0.0);
    CU_ASSERT_DOUBLE_EQUAL(lb_tensor_flat(sb->value, 1), exp(-40) / (1 + exp(-40)), 1e-30);
    CU_ASSERT_EQUAL(lb_tensor_flat(sb->value, 3), 1.0);
    lb_graph_free(g);
}

static void test_matmul_forward(void)
{
    lb_graph *g = lb_graph_new();
    /* a: [2, 2, 3] batched, b: [3, 4] broadcast over the batch */
    int64_t sa[3] = {2, 2, 3}, sb[2] = {3, 4};
    double va[12] = {1, 2, 3, 4, 5, 6, -1, 0, 1, 2, -2, 0.5};
    double vb[12] = {1, 0, 2, -1, 0, 1, 1, 3, 2, -1, 0, 0.5};
    lb_var *a = lb_input(g, lb_tensor_from_doubles(LB_FLOAT32, 3, sa, va), 0);
    lb_var *b = lb_input(g, lb_tensor_from_doubles(LB_FLOAT32, 2, sb, vb), 0);
    lb_var *c = lb_matmul(g, a, b);
    CU_ASSERT_EQUAL(c->value->ndim, 3);
    CU_ASSERT_EQUAL(c->value->shape[2], 4);
    double want[16];
    for (int bi = 0; bi < 2; bi++)
        for (int i = 0; i < 2; i++)
            for (int j = 0; j < 4; j++) {
                double s = 0;
                for (int k = 0; k < 3; k++)
                    s += va[bi * 6 + i * 3 + k] * vb[k * 4 + j];
                want[bi * 8 + i * 4 + j] = s;
            }
    LB_ASSERT_CLOSE(c->value, want, 1e-5, 0);
    /* The transpose flags multiply by stored transposes: a @ (aᵀ)ᵀ... here x xᵀ. */
    lb_var *xxt = lb_matmul_t(g, a, 0, a, 1); /* [2, 2, 2] */
    double gram[8];
    for (int bi = 0; bi < 2; bi++)
        for (int i = 0; i < 2; i++)
            for (int j = 0; j < 2; j++) {
                double s = 0;
                for (int k = 0; k < 3; k++)
                    s += va[bi * 6 + i * 3 + k] * va[bi * 6 + j * 3 + k];
                gram[bi * 4 + i * 2 + j] = s;
            }
    LB_ASSERT_CLOSE(xxt->value, gram, 1e-5, 0);
    int64_t sbad[2] = {4, 4};
    lb_var *bad = lb_input(g, lb_tensor_zeros(LB_FLOAT32, 2, sbad), 0);
    CU_ASSERT_PTR_NULL(lb_matmul(g, a, bad));
    CU_ASSERT_PTR_NOT_NULL(strstr(lb_last_error(), "[2, 2, 3]"));
    CU_ASSERT_PTR_NOT_NULL(strstr(lb_last_error(), "[4, 4]"));
    lb_graph_free(g);
}

/* ---- gradient checks ---- */

typedef struct binary_case {
    int which;
} binary_case;

static lb_var *binary_fn(lb_graph *g, lb_var *const *p, void *user)
{
    int which = ((binary_case *)user)->which;
    lb_var *a = lb_tanh(g, p[0]); /* the op under test sits after another op */
    switch (which) {
    case 0: return lb_add(g, a, p[1]);
    case 1: return lb_sub(g, a, p[1]);
    case 2: return lb_mul(g, a, p[1]);
    default: return lb_div(g, a, p[1]);
    }
}

static void test_binary_gradcheck(void)
{
    int64_t sa[3] = {2, 3, 4}, sb[2] = {3, 1};
    lb_var *p[2] = {lb_test_uniform_param(3, sa, 1, -1, 1, "a"), lb_test_uniform_param(2, sb, 2, 0.5, 2, "b")};
    for (int which = 0; which < 4; which++) {
        binary_case c = {which};
        lb_gradcheck_leaf report[2];
        CU_ASSERT_EQUAL(lb_gradcheck(binary_fn, &c, 2, p, NULL, report), LB_OK);
        CU_ASSERT_TRUE(report[0].passed && report[1].passed);
    }
    lb_param_free(p[0]);
    lb_param_free(p[1]);
}

static lb_var *unary_fn(lb_graph *g, lb_var *const *p, void *user)
{
    int op = *(int *)user;
    lb_var *x = lb_scale(g, p[0], 1.5);
    switch (op) {
    case LB_OP_EXP: return lb_exp(g, x);
    case LB_OP_LOG: return lb_log(g, lb_exp(g, x));
    case LB_OP_TANH: return lb_tanh(g, x);
    case LB_OP_SIGMOID: return lb_sigmoid(g, x);
    case LB_OP_RELU: return lb_relu(g, x);
    case LB_OP_GELU: return lb_gelu(g, x);
    default: return lb_neg(g, x);
    }
}

static void test_unary_gradcheck(void)
{
    int64_t s[2] = {3, 5};
    /* Values away from relu's kink at 0. */
    double v[15] = {-1.3, -0.7, 0.4, 1.1, 2.0, -2.2, 0.9, -0.15, 0.35, 1.7, -0.6, 0.8, -1.9, 0.2, 1.25};
    lb_var *p = param(LB_FLOAT64, 2, s, v, "x");
    int ops[] = {LB_OP_EXP, LB_OP_LOG, LB_OP_TANH, LB_OP_SIGMOID, LB_OP_RELU, LB_OP_GELU, LB_OP_NEG};
    for (size_t i = 0; i < sizeof ops / sizeof ops[0]; i++) {
        lb_gradcheck_leaf r;
        lb_status st = lb_gradcheck(unary_fn, &ops[i], 1, &p, NULL, &r);
        if (st != LB_OK)
            fprintf(stderr, "\n  %s: %s\n", lb_op_name(ops[i]), lb_last_error());
        CU_ASSERT_EQUAL(st, LB_OK);
    }
    lb_param_free(p);
}

typedef struct matmul_case {
    int trans_a, trans_b;
} matmul_case;

static lb_var *matmul_fn(lb_graph *g, lb_var *const *p, void *user)
{
    matmul_case *c = user;
    return lb_matmul_t(g, lb_sigmoid(g, p[0]), c->trans_a, p[1], c->trans_b);
}

static void test_matmul_gradcheck(void)
{
    /* Batch broadcasting: a [2, 1, 3, 4] with b [3, 4, 5] -> [2, 3, 3, 5], every transpose combination. */
    for (int ta = 0; ta < 2; ta++)
        for (int tb = 0; tb < 2; tb++) {
            int64_t sa[4] = {2, 1, ta ? 4 : 3, ta ? 3 : 4}, sb[3] = {3, tb ? 5 : 4, tb ? 4 : 5};
            lb_var *p[2] = {lb_test_uniform_param(4, sa, 10 + ta, -1, 1, "a"), lb_test_uniform_param(3, sb, 20 + tb, -1, 1, "b")};
            matmul_case c = {ta, tb};
            lb_status st = lb_gradcheck(matmul_fn, &c, 2, p, NULL, NULL);
            if (st != LB_OK)
                fprintf(stderr, "\n  ta=%d tb=%d: %s\n", ta, tb, lb_last_error());
            CU_ASSERT_EQUAL(st, LB_OK);
            lb_param_free(p[0]);
            lb_param_free(p[1]);
        }
    /* The folded paths: [B, T, D] @ [D, K] and its weight gradient. */
    int64_t sx[3] = {2, 5, 3}, sw[2] = {3, 4};
    lb_var *p[2] = {lb_test_uniform_param(3, sx, 5, -1, 1, "x"), lb_test_uniform_param(2, sw, 6, -1, 1, "w")};
    matmul_case c = {0, 0};
    CU_ASSERT_EQUAL(lb_gradcheck(matmul_fn, &c, 2, p, NULL, NULL), LB_OK);
    lb_param_free(p[0]);
    lb_param_free(p[1]);
}

/* float32 results agree with float64 on the same inputs. */
static void test_float32_matches_float64(void)
{
    int64_t sa[3] = {2, 3, 4}, sb[2] = {4, 3};
    lb_var *a64 = lb_test_uniform_param(3, sa, 3, -2, 2, "a"), *b64 = lb_test_uniform_param(2, sb, 4, -2, 2, "b");
    lb_var *a32 = lb_param_new(lb_tensor_copy(a64->value, LB_FLOAT32), "a");
    lb_var *b32 = lb_param_new(lb_tensor_copy(b64->value, LB_FLOAT32), "b");
    lb_graph *g = lb_graph_new();
    lb_var *m64 = lb_matmul(g, lb_exp(g, a64), b64);
    lb_var *y64 = lb_gelu(g, lb_div(g, m64, lb_sigmoid(g, m64)));
    lb_var *m32 = lb_matmul(g, lb_exp(g, a32), b32);
    lb_var *y32 = lb_gelu(g, lb_div(g, m32, lb_sigmoid(g, m32)));
    LB_ASSERT_TENSORS_CLOSE(y32->value, y64->value, 1e-4, 1e-4);
    lb_tensor *ones64 = lb_tensor_zeros_like(y64->value), *ones32 = lb_tensor_zeros_like(y32->value);
    lb_tensor_fill(ones64, 1);
    lb_tensor_fill(ones32, 1);
    CU_ASSERT_EQUAL(lb_backward(g, y64, ones64), LB_OK);
    lb_graph_reset(g);
    m32 = lb_matmul(g, lb_exp(g, a32), b32);
    y32 = lb_gelu(g, lb_div(g, m32, lb_sigmoid(g, m32)));
    CU_ASSERT_EQUAL(lb_backward(g, y32, ones32), LB_OK);
    LB_ASSERT_TENSORS_CLOSE(a32->grad, a64->grad, 1e-3, 1e-4);
    LB_ASSERT_TENSORS_CLOSE(b32->grad, b64->grad, 1e-3, 1e-4);
    lb_tensor_free(ones64);
    lb_tensor_free(ones32);
    lb_graph_free(g);
    lb_param_free(a64);
    lb_param_free(b64);
    lb_param_free(a32);
    lb_param_free(b32);
}

/* float32 GELU kernel (vector erfcf/expf where the CPU has them) against the float64
 * formula: within a few float ulps over [-10, 10], including the negative tail where
 * the result is tiny; the same bits for a value wherever it sits (full vector or the
 * padded last one, any n); residual and in-place forms; the backward likewise; errors. */
static void test_gelu_kernel_float32(void)
{
    enum { N = 4003 }; /* not a multiple of 16 or 8 */
    static float x[N], y[N], y2[N], dy[N], dx[N];
    double worst = 0, worst_grad = 0;
    for (int i = 0; i < N; i++) {
        x[i] = (float)(-10.0 + 20.0 * i / (N - 1));
        dy[i] = (float)(0.5 + (i % 7) * 0.25);
        dx[i] = 0.0f;
    }
    CU_ASSERT_EQUAL_FATAL(lb_k_gelu(LB_FLOAT32, N, x, y, 0), LB_OK);
    CU_ASSERT_EQUAL_FATAL(lb_k_gelu_backward(LB_FLOAT32, N, x, dy, dx), LB_OK);
    for (int i = 0; i < N; i++) {
        double v = x[i], want = 0.5 * v * erfc(-v / sqrt(2.0));
        double cdf = 0.5 * erfc(-v / sqrt(2.0)), xpdf = v * exp(-0.5 * v * v) / sqrt(2 * M_PI);
        /* relative error; from x = -5 down (|gelu| < 1.5e-6) erfc's steep tail turns the
         * float rounding of -x / sqrt 2 into up to 1e-5 of the result (as in any float32 GELU) */
        double tail = v < -5 ? 10 : 1, err = fabs(y[i] - want) / fabs(want) / tail;
        /* gelu' = Φ(x) + x φ(x) cancels near x = -0.75: error relative to the terms' size */
        double gerr = fabs(dx[i] - dy[i] * (cdf + xpdf)) / (fabs(dy[i]) * (cdf + fabs(xpdf))) / tail;
        if (err > worst)
            worst = err;
        if (gerr > worst_grad)
            worst_grad = gerr;
    }
    CU_ASSERT_TRUE(worst < 1e-6);      /* about 8 float ulps (1e-5 in the far tail) */
    CU_ASSERT_TRUE(worst_grad < 1e-6);
    /* the backward accumulates: a second call doubles dx exactly */
    memcpy(y2, dx, sizeof dx);
    CU_ASSERT_EQUAL(lb_k_gelu_backward(LB_FLOAT32, N, x, dy, dx), LB_OK);
    int doubled = 1;
    for (int i = 0; i < N; i++)
        doubled &= dx[i] == 2.0f * y2[i];
    CU_ASSERT_TRUE(doubled);
    CU_ASSERT_EQUAL(y[0] < 0 && y[0] > -1e-20f, 1);
    CU_ASSERT_DOUBLE_EQUAL(y[N - 1], 10.0, 1e-6);
    /* each value alone (n = 1: a padded vector) gives the bits it got inside the long run */
    for (int i = 0; i < N; i += 97) {
        float one;
        CU_ASSERT_EQUAL(lb_k_gelu(LB_FLOAT32, 1, &x[i], &one, 0), LB_OK);
        CU_ASSERT_EQUAL(memcmp(&one, &y[i], sizeof one), 0);
    }
    /* a shifted start moves every value to another lane */
    CU_ASSERT_EQUAL(lb_k_gelu(LB_FLOAT32, N - 3, x + 3, y2 + 3, 0), LB_OK);
    CU_ASSERT_EQUAL(memcmp(y2 + 3, y + 3, (N - 3) * sizeof(float)), 0);
    /* residual: y2 = 1 + gelu(x); in place: y2 = gelu(y2) */
    for (int i = 0; i < N; i++)
        y2[i] = 1.0f;
    CU_ASSERT_EQUAL(lb_k_gelu(LB_FLOAT32, N, x, y2, 1), LB_OK);
    CU_ASSERT_DOUBLE_EQUAL(y2[N / 3], 1.0f + y[N / 3], 1e-6);
    memcpy(y2, x, sizeof x);
    CU_ASSERT_EQUAL(lb_k_gelu(LB_FLOAT32, N, y2, y2, 0), LB_OK);
    CU_ASSERT_EQUAL(memcmp(y2, y, sizeof y), 0);
    /* errors */
    CU_ASSERT_EQUAL(lb_k_gelu(LB_FLOAT32, -1, x, y, 0), LB_ERR_VALUE);
    CU_ASSERT_PTR_NOT_NULL(strstr(lb_last_error(), "negative"));
    CU_ASSERT_EQUAL(lb_k_gelu(LB_FLOAT32, 4, NULL, y, 0), LB_ERR_VALUE);
    CU_ASSERT_PTR_NOT_NULL(strstr(lb_last_error(), "x is NULL"));
    CU_ASSERT_EQUAL(lb_k_gelu_backward(LB_FLOAT32, 4, x, dy, NULL), LB_ERR_VALUE);
    CU_ASSERT_EQUAL(lb_k_gelu(LB_FLOAT32, 0, x, y, 0), LB_OK);
}

/* ---- the classic faults of a tape ---- */

/* y = x*x + x*3 uses x on three paths; dy/dx = 2x + 3 must be the sum of them all. */
static void test_diamond_graph(void)
{
    int64_t s[1] = {3};
    double v[3] = {1, -2, 0.5}, three[3] = {3, 3, 3};
    lb_var *x = param(LB_FLOAT64, 1, s, v, "x");
    lb_graph *g = lb_graph_new();
    lb_var *c = lb_input(g, lb_tensor_from_doubles(LB_FLOAT64, 1, s, three), 0);
    lb_var *h = lb_mul(g, x, x);
    lb_var *y = lb_add(g, h, lb_mul(g, x, c));
    lb_tensor *ones = lb_tensor_zeros_like(y->value);
    lb_tensor_fill(ones, 1);
    CU_ASSERT_EQUAL(lb_backward(g, y, ones), LB_OK);
    double want[3] = {5, -1, 4};
    LB_ASSERT_CLOSE(x->grad, want, 1e-12, 0);
    CU_ASSERT_PTR_NULL(c->grad); /* a constant gets no gradient */
    /* A second backward on the same graph is an error, not silent garbage. */
    CU_ASSERT_EQUAL(lb_backward(g, y, ones), LB_ERR_STATE);
    CU_ASSERT_PTR_NOT_NULL(strstr(lb_last_error(), "lb_graph_reset"));
    /* Two passes without zeroing accumulate; after zeroing they do not. */
    lb_graph_reset(g);
    y = lb_add(g, lb_mul(g, x, x), x);
    CU_ASSERT_EQUAL(lb_backward(g, y, ones), LB_OK);
    double twice[3] = {5 + 3, -1 - 3, 4 + 2};
    LB_ASSERT_CLOSE(x->grad, twice, 1e-12, 0);
    lb_param_zero_grad(x);
    lb_graph_reset(g);
    y = lb_add(g, lb_mul(g, x, x), x);
    CU_ASSERT_EQUAL(lb_backward(g, y, ones), LB_OK);
    double once[3] = {3, -3, 2};
    LB_ASSERT_CLOSE(x->grad, once, 1e-12, 0);
    lb_tensor_free(ones);
    lb_graph_free(g);
    lb_param_free(x);
}

/* A bias [D] added to [B, T, D] gets a gradient of shape [D], the sum over B and T. */
static void test_broadcast_gradient_shape(void)
{
    int64_t sx[3] = {2, 3, 4}, sb[1] = {4};
    lb_var *bias = lb_test_uniform_param(1, sb, 9, -1, 1, "bias");
    lb_graph *g = lb_graph_new();
    lb_var *x = lb_input(g, lb_tensor_zeros(LB_FLOAT64, 3, sx), 0);
    lb_var *y = lb_add(g, x, bias);
    lb_tensor *go = lb_tensor_zeros_like(y->value);
    int64_t n = lb_tensor_numel(go);
    for (int64_t i = 0; i < n; i++)
        ((double *)lb_tensor_data(go))[i] = (double)i;
    CU_ASSERT_EQUAL(lb_backward(g, y, go), LB_OK);
    CU_ASSERT_EQUAL(bias->grad->ndim, 1);
    CU_ASSERT_EQUAL(bias->grad->shape[0], 4);
    double want[4];
    for (int d = 0; d < 4; d++) {
        want[d] = 0;
        for (int r = 0; r < 6; r++)
            want[d] += r * 4 + d;
    }
    LB_ASSERT_CLOSE(bias->grad, want, 1e-12, 0);
    lb_tensor_free(go);
    lb_graph_free(g);
    lb_param_free(bias);
}

static void test_no_grad_mode(void)
{
    int64_t s[1] = {2};
    double v[2] = {1, 2};
    lb_var *x = param(LB_FLOAT64, 1, s, v, "x");
    lb_graph *g = lb_graph_new();
    int old = lb_graph_set_grad_enabled(g, 0);
    CU_ASSERT_EQUAL(old, 1);
    lb_var *y = lb_mul(g, x, x);
    CU_ASSERT_FALSE(y->requires_grad);
    CU_ASSERT_EQUAL(y->n_inputs, 0);
    CU_ASSERT_EQUAL(lb_backward(g, y, NULL), LB_ERR_STATE);
    lb_graph_set_grad_enabled(g, 1);
    /* A non-scalar output without grad_output is an error that says so. */
    y = lb_mul(g, x, x);
    CU_ASSERT_EQUAL(lb_backward(g, y, NULL), LB_ERR_SHAPE);
    CU_ASSERT_PTR_NOT_NULL(strstr(lb_last_error(), "grad_output"));
    lb_graph_free(g);
    lb_param_free(x);
}

/* ---- test the tester: a wrong backward must fail gradcheck ---- */

/* A user-defined tanh whose backward is right or deliberately wrong (forgets the square). */
static lb_status tanh_backward(lb_var *node)
{
    int wrong = *(const int *)node->ctx;
    lb_var *x = node->inputs[0];
    lb_tensor *gx = lb_grad_buffer(x);
    int64_t n = lb_tensor_numel(gx);
    const double *y = lb_tensor_data(node->value), *dy = lb_tensor_data(node->grad);
    double *dx = lb_tensor_data(gx);
    for (int64_t i = 0; i < n; i++)
        dx[i] += dy[i] * (wrong ? 1 - y[i] : 1 - y[i] * y[i]);
    return LB_OK;
}

static lb_var *custom_tanh_fn(lb_graph *g, lb_var *const *p, void *user)
{
    lb_var *x = lb_scale(g, p[0], 0.7);
    lb_tensor *y = lb_tensor_copy(x->value, LB_FLOAT64);
    int64_t n = lb_tensor_numel(y);
    for (int64_t i = 0; i < n; i++)
        ((double *)lb_tensor_data(y))[i] = tanh(((double *)lb_tensor_data(y))[i]);
    return lb_custom(g, 1, &x, y, tanh_backward, user, NULL);
}

static void test_gradcheck_catches_wrong_gradient(void)
{
    int64_t s[2] = {2, 3};
    lb_var *p = lb_test_uniform_param(2, s, 77, -1, 1, "w");
    int right = 0, wrong = 1;
    /* The correct backward passes ... */
    CU_ASSERT_EQUAL(lb_gradcheck(custom_tanh_fn, &right, 1, &p, NULL, NULL), LB_OK);
    /* ... and the wrong one fails, naming the leaf and the element. */
    lb_gradcheck_leaf r;
    CU_ASSERT_EQUAL(lb_gradcheck(custom_tanh_fn, &wrong, 1, &p, NULL, &r), LB_ERR_NUMERIC);
    CU_ASSERT_FALSE(r.passed);
    CU_ASSERT_TRUE(r.ratio > 1.0);
    CU_ASSERT_TRUE(r.index >= 0 && r.index < 6);
    CU_ASSERT_PTR_NOT_NULL(strstr(lb_last_error(), "(w)"));
    CU_ASSERT_PTR_NOT_NULL(strstr(lb_last_error(), "analytic"));
    /* A gradient off by less than the tolerance passes; tightening rtol/atol catches it. */
    lb_gradcheck_options strict = lb_gradcheck_defaults();
    strict.atol = 1e-12;
    strict.rtol = 1e-12;
    CU_ASSERT_EQUAL(lb_gradcheck(custom_tanh_fn, &right, 1, &p, &strict, NULL), LB_ERR_NUMERIC);
    /* float32 leaves are refused: finite differences need float64. */
    lb_var *p32 = lb_param_new(lb_tensor_copy(p->value, LB_FLOAT32), "w32");
    CU_ASSERT_EQUAL(lb_gradcheck(custom_tanh_fn, &right, 1, &p32, NULL, NULL), LB_ERR_DTYPE);
    lb_param_free(p32);
    lb_param_free(p);
}

int main(void)
{
    const lb_test_case cases[] = {
        {"add/sub/mul/div broadcast forward, errors name op and shapes", test_binary_broadcast_forward},
        {"unary functions forward values", test_unary_forward},
        {"batched matmul with broadcasting and transposes", test_matmul_forward},
        {"gradcheck add/sub/mul/div with broadcasting", test_binary_gradcheck},
        {"gradcheck exp/log/tanh/sigmoid/relu/gelu/neg/scale", test_unary_gradcheck},
        {"gradcheck matmul, all transposes, broadcast batch", test_matmul_gradcheck},
        {"float32 agrees with float64, forward and backward", test_float32_matches_float64},
        {"float32 GELU kernel: a few ulps of the float64 formula, same bits in any lane, residual, errors",
         test_gelu_kernel_float32},
        {"diamond graph sums paths; backward twice is an error; accumulation", test_diamond_graph},
        {"broadcast operand gradient is reduced to its shape", test_broadcast_gradient_shape},
        {"no-grad mode records nothing", test_no_grad_mode},
        {"gradcheck fails on a deliberately wrong backward", test_gradcheck_catches_wrong_gradient},
        {NULL, NULL},
    };
    return lb_test_main("autograd", cases);
}

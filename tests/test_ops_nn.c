/* layer_norm, embedding, dropout, cross_entropy and mse: values, gradients and
 * the faults each is known for. */
#include <math.h>
#include <string.h>

#include "autograd/gradcheck.h"
#include "autograd/ops.h"
#include "tensor/rng.h"
#include "support.h"

/* ---- helpers ---- */

static int all_zero(const lb_tensor *t)
{
    int64_t n = lb_tensor_numel(t);
    for (int64_t i = 0; i < n; i++)
        if (lb_tensor_flat(t, i) != 0)
            return 0;
    return 1;
}

static lb_status check_gradients(lb_gradcheck_fn fn, void *user, int n, lb_var *const *leaves)
{
    lb_gradcheck_leaf rep[4];
    lb_status st = lb_gradcheck(fn, user, n, leaves, NULL, rep);
    if (st != LB_OK)
        fprintf(stderr, "\n  %s\n", lb_last_error());
    for (int i = 0; i < n && st == LB_OK; i++)
        if (!rep[i].passed || rep[i].index < 0)
            st = LB_ERR_NUMERIC;
    return st;
}

/* ---- layer norm ---- */

static void test_layer_norm_forward(void)
{
    int64_t s[2] = {2, 4}, sd[1] = {4};
    double x[8] = {1, 2, 3, 4, 2, -1, 0.5, 3};
    double w[4] = {1, 0.5, -1, 2}, b[4] = {0.1, 0.2, 0.3, -0.4};
    /* Hand-computed (x - mean) / sqrt(var + 1e-5) * w + b, biased variance. */
    double want_wb[8] = {-1.2416354199689268, -0.023605903328154487, -0.14721180665630901, 2.2832708399378538,
                         0.67734901237681711, -0.50106665788613514, 0.71239215169772652, 2.0743529101863589};
    double want[8] = {-1.3416354199689269, -0.447211806656309, 0.447211806656309, 1.3416354199689269,
                      0.57734901237681713, -1.4021333157722702, -0.41239215169772647, 1.2371764550931794};
    for (int dt = 0; dt < 2; dt++) {
        lb_dtype dtype = dt ? LB_FLOAT32 : LB_FLOAT64;
        double tol = dt ? 2e-6 : 1e-14;
        lb_graph *g = lb_graph_new();
        lb_var *vx = lb_input(g, lb_tensor_from_doubles(dtype, 2, s, x), 0);
        lb_var *vw = lb_input(g, lb_tensor_from_doubles(dtype, 1, sd, w), 0);
        lb_var *vb = lb_input(g, lb_tensor_from_doubles(dtype, 1, sd, b), 0);
        LB_ASSERT_CLOSE(lb_layer_norm(g, vx, vw, vb, 1e-5)->value, want_wb, tol, 0);
        LB_ASSERT_CLOSE(lb_layer_norm(g, vx, NULL, NULL, 1e-5)->value, want, tol, 0);
        double only_b[8], only_w[8];
        for (int i = 0; i < 8; i++) {
            only_b[i] = want[i] + b[i % 4];
            only_w[i] = want[i] * w[i % 4];
        }
        LB_ASSERT_CLOSE(lb_layer_norm(g, vx, NULL, vb, 1e-5)->value, only_b, tol, 0);
        LB_ASSERT_CLOSE(lb_layer_norm(g, vx, vw, NULL, 1e-5)->value, only_w, tol, 0);
        /* A constant row has variance 0: eps keeps it finite, the output is the bias. */
        double flat[8] = {3, 3, 3, 3, 1e6, 1e6 + 1, 1e6 + 2, 1e6 + 3};
        lb_var *vf = lb_input(g, lb_tensor_from_doubles(dtype, 2, s, flat), 0);
        lb_var *y = lb_layer_norm(g, vf, vw, vb, 1e-5);
        for (int j = 0; j < 4; j++)
            CU_ASSERT_DOUBLE_EQUAL(lb_tensor_flat(y->value, j), b[j], dt ? 1e-7 : 1e-15);
        /* Two-pass variance: a large offset does not cancel the spread [0, 1, 2, 3]. */
        for (int j = 0; j < 4; j++)
            CU_ASSERT_DOUBLE_EQUAL(lb_tensor_flat(y->value, 4 + j), want_wb[j], dt ? 2e-6 : 1e-8);
        lb_graph_free(g);
    }
}

static void test_layer_norm_errors(void)
{
    lb_graph *g = lb_graph_new();
    int64_t s[2] = {2, 4}, s3[1] = {3};
    lb_var *x = lb_input(g, lb_tensor_zeros(LB_FLOAT64, 2, s), 0);
    lb_var *w = lb_input(g, lb_tensor_zeros(LB_FLOAT64, 1, s3), 0);
    CU_ASSERT_PTR_NULL(lb_layer_norm(g, x, w, NULL, 1e-5));
    CU_ASSERT_EQUAL(lb_last_status(), LB_ERR_SHAPE);
    CU_ASSERT_PTR_NOT_NULL(strstr(lb_last_error(), "layer_norm"));
    CU_ASSERT_PTR_NOT_NULL(strstr(lb_last_error(), "[3]"));
    CU_ASSERT_PTR_NOT_NULL(strstr(lb_last_error(), "[2, 4]"));
    CU_ASSERT_PTR_NULL(lb_layer_norm(g, x, NULL, w, 1e-5));
    CU_ASSERT_PTR_NOT_NULL(strstr(lb_last_error(), "bias"));
    CU_ASSERT_PTR_NULL(lb_layer_norm(g, x, NULL, NULL, -1.0));
    CU_ASSERT_EQUAL(lb_last_status(), LB_ERR_VALUE);
    lb_error(LB_ERR_SHAPE, "upstream failure");
    CU_ASSERT_PTR_NULL(lb_layer_norm(g, NULL, NULL, NULL, 1e-5));
    CU_ASSERT_STRING_EQUAL(lb_last_error(), "upstream failure");
    lb_graph_free(g);
}

typedef struct ln_case {
    int with_weight, with_bias;
} ln_case;

/* layer_norm(1.7 * x) with x [2, 3, 5]; leaves x, then weight and bias when used */
static lb_var *layer_norm_fn(lb_graph *g, lb_var *const *p, void *user)
{
    ln_case *c = user;
    lb_var *weight = c->with_weight ? p[1] : NULL, *bias = c->with_bias ? p[1 + c->with_weight] : NULL;
    return lb_layer_norm(g, lb_scale(g, p[0], 1.7), weight, bias, 1e-5);
}

/* Only weight and bias are leaves; x is a constant input. */
static lb_var *layer_norm_params_fn(lb_graph *g, lb_var *const *p, void *user)
{
    lb_var *x = lb_input_copy(g, (const lb_tensor *)user, 0);
    return lb_tanh(g, lb_layer_norm(g, x, p[0], p[1], 1e-5));
}

static void test_layer_norm_gradcheck(void)
{
    int64_t sx[3] = {2, 3, 5}, sd[1] = {5};
    lb_var *x = lb_test_uniform_param(3, sx, 201, -2, 2, "x"), *w = lb_test_uniform_param(1, sd, 202, 0.5, 1.5, "weight"),
           *b = lb_test_uniform_param(1, sd, 203, -0.5, 0.5, "bias");
    ln_case cases[4] = {{1, 1}, {1, 0}, {0, 1}, {0, 0}};
    for (int i = 0; i < 4; i++) {
        lb_var *leaves[3] = {x, NULL, NULL};
        int n = 1;
        if (cases[i].with_weight)
            leaves[n++] = w;
        if (cases[i].with_bias)
            leaves[n++] = b;
        CU_ASSERT_EQUAL(check_gradients(layer_norm_fn, &cases[i], n, leaves), LB_OK);
    }
    /* weight and bias alone, with x a constant that needs no gradient */
    lb_var *params[2] = {w, b};
    CU_ASSERT_EQUAL(check_gradients(layer_norm_params_fn, x->value, 2, params), LB_OK);
    lb_param_free(x);
    lb_param_free(w);
    lb_param_free(b);
}

static void test_layer_norm_float32_matches_float64(void)
{
    int64_t sx[3] = {2, 3, 6}, sd[1] = {6};
    lb_tensor *x64 = lb_test_uniform(LB_FLOAT64, 3, sx, 211, -3, 3), *go64 = lb_test_uniform(LB_FLOAT64, 3, sx, 212, -1, 1);
    lb_tensor *w64 = lb_test_uniform(LB_FLOAT64, 1, sd, 213, 0.5, 1.5), *b64 = lb_test_uniform(LB_FLOAT64, 1, sd, 214, -1, 1);
    lb_var *v[2][3];
    lb_var *y[2];
    lb_graph *g[2];
    for (int dt = 0; dt < 2; dt++) {
        lb_dtype dtype = dt ? LB_FLOAT32 : LB_FLOAT64;
        g[dt] = lb_graph_new();
        v[dt][0] = lb_input(g[dt], lb_tensor_copy(x64, dtype), 1);
        v[dt][1] = lb_input(g[dt], lb_tensor_copy(w64, dtype), 1);
        v[dt][2] = lb_input(g[dt], lb_tensor_copy(b64, dtype), 1);
        y[dt] = lb_layer_norm(g[dt], v[dt][0], v[dt][1], v[dt][2], 1e-5);
        lb_tensor *go = lb_tensor_copy(go64, dtype);
        CU_ASSERT_EQUAL(lb_backward(g[dt], y[dt], go), LB_OK);
        lb_tensor_free(go);
    }
    LB_ASSERT_TENSORS_CLOSE(y[1]->value, y[0]->value, 1e-5, 1e-5);
    for (int k = 0; k < 3; k++)
        LB_ASSERT_TENSORS_CLOSE(v[1][k]->grad, v[0][k]->grad, 1e-5, 1e-4);
    for (int dt = 0; dt < 2; dt++)
        lb_graph_free(g[dt]);
    lb_tensor_free(x64);
    lb_tensor_free(go64);
    lb_tensor_free(w64);
    lb_tensor_free(b64);
}

/* ---- embedding ---- */

static void test_embedding_forward_and_repeated_ids(void)
{
    int64_t sw[2] = {5, 3}, sids[2] = {2, 3};
    double w[15] = {0, 1, 2, 10, 11, 12, 20, 21, 22, 30, 31, 32, 40, 41, 42};
    int32_t ids[6] = {4, 0, 4, 1, 1, 2};
    for (int dt = 0; dt < 2; dt++) {
        lb_dtype dtype = dt ? LB_FLOAT32 : LB_FLOAT64;
        lb_var *weight = lb_param_new(lb_tensor_from_doubles(dtype, 2, sw, w), "embedding.weight");
        lb_graph *g = lb_graph_new();
        lb_var *e = lb_embedding(g, weight, ids, 2, sids);
        CU_ASSERT_PTR_NOT_NULL_FATAL(e);
        CU_ASSERT_EQUAL(e->value->ndim, 3);
        CU_ASSERT_EQUAL(e->value->shape[0], 2);
        CU_ASSERT_EQUAL(e->value->shape[1], 3);
        CU_ASSERT_EQUAL(e->value->shape[2], 3);
        double want[18] = {40, 41, 42, 0, 1, 2, 40, 41, 42, 10, 11, 12, 10, 11, 12, 20, 21, 22};
        LB_ASSERT_CLOSE(e->value, want, 0, 0);
        /* grad_output[p, d] = 100 p + d: rows of repeated ids add up */
        lb_tensor *go = lb_tensor_zeros_like(e->value);
        for (int p = 0; p < 6; p++)
            for (int d = 0; d < 3; d++) {
                int64_t idx[3] = {p / 3, p % 3, d};
                lb_tensor_set(go, idx, 100 * p + d);
            }
        CU_ASSERT_EQUAL(lb_backward(g, e, go), LB_OK);
        double dw[15] = {100, 101, 102,                 /* id 0 at position 1 */
                         300 + 400, 301 + 401, 302 + 402, /* id 1 at positions 3 and 4 */
                         500, 501, 502,                 /* id 2 at position 5 */
                         0, 0, 0,                       /* id 3 unused */
                         0 + 200, 1 + 201, 2 + 202};    /* id 4 at positions 0 and 2 */
        LB_ASSERT_CLOSE(weight->grad, dw, 0, 0);
        lb_tensor_free(go);
        lb_graph_free(g);
        lb_param_free(weight);
    }
}

static void test_embedding_errors(void)
{
    int64_t sw[2] = {5, 3}, sids[2] = {2, 2};
    lb_var *weight = lb_param_new(lb_tensor_zeros(LB_FLOAT32, 2, sw), "embedding.weight");
    lb_graph *g = lb_graph_new();
    int32_t ids[4] = {0, 4, 5, 1};
    CU_ASSERT_PTR_NULL(lb_embedding(g, weight, ids, 2, sids));
    CU_ASSERT_EQUAL(lb_last_status(), LB_ERR_VALUE);
    CU_ASSERT_PTR_NOT_NULL(strstr(lb_last_error(), "embedding"));
    CU_ASSERT_PTR_NOT_NULL(strstr(lb_last_error(), "ids[1, 0]")); /* the position ... */
    CU_ASSERT_PTR_NOT_NULL(strstr(lb_last_error(), "= 5"));       /* ... and the value */
    ids[2] = -1;
    CU_ASSERT_PTR_NULL(lb_embedding(g, weight, ids, 2, sids));
    CU_ASSERT_PTR_NOT_NULL(strstr(lb_last_error(), "= -1"));
    int64_t sv[1] = {5};
    lb_var *vec = lb_param_new(lb_tensor_zeros(LB_FLOAT32, 1, sv), "vec");
    int32_t ok[4] = {0, 1, 2, 3};
    CU_ASSERT_PTR_NULL(lb_embedding(g, vec, ok, 2, sids));
    CU_ASSERT_EQUAL(lb_last_status(), LB_ERR_SHAPE);
    lb_param_free(vec);
    lb_graph_free(g);
    lb_param_free(weight);
}

/* embedding(weight) * scale with ids [3, 2] holding a repeat; leaves weight, scale */
static lb_var *embedding_fn(lb_graph *g, lb_var *const *p, void *user)
{
    static const int32_t ids[6] = {2, 0, 3, 2, 2, 1};
    int64_t s[2] = {3, 2};
    return lb_layer_norm(g, lb_mul(g, lb_embedding(g, p[0], ids, 2, s), p[1]), NULL, NULL, 1e-5);
}

static void test_embedding_gradcheck(void)
{
    int64_t sw[2] = {4, 3}, ss[1] = {3};
    lb_var *p[2] = {lb_test_uniform_param(2, sw, 301, -1, 1, "embedding.weight"), lb_test_uniform_param(1, ss, 302, 0.5, 2, "scale")};
    CU_ASSERT_EQUAL(check_gradients(embedding_fn, NULL, 2, p), LB_OK);
    lb_param_free(p[0]);
    lb_param_free(p[1]);
}

/* ---- dropout ---- */

static void test_dropout_determinism_and_scale(void)
{
    int64_t s[2] = {4, 250};
    const double p = 0.25, scale = 1 / (1 - p);
    lb_graph *g = lb_graph_new();
    lb_tensor *ones = lb_tensor_zeros(LB_FLOAT64, 2, s);
    lb_tensor_fill(ones, 1);
    lb_var *x = lb_input_copy(g, ones, 1);
    lb_rng r1, r2, r3;
    lb_rng_seed(&r1, 123);
    lb_rng_seed(&r2, 123);
    lb_rng_seed(&r3, 124);
    lb_var *y1 = lb_dropout(g, x, p, 1, &r1), *y2 = lb_dropout(g, x, p, 1, &r2), *y3 = lb_dropout(g, x, p, 1, &r3);
    LB_ASSERT_TENSORS_CLOSE(y1->value, y2->value, 0, 0); /* same seed, same mask */
    int differ = 0, zeros = 0;
    for (int64_t i = 0; i < 1000; i++) {
        double a = lb_tensor_flat(y1->value, i);
        CU_ASSERT_TRUE(a == 0 || a == scale); /* kept elements are scaled by exactly 1/(1-p) */
        zeros += a == 0;
        differ += a != lb_tensor_flat(y3->value, i);
    }
    CU_ASSERT_TRUE(differ > 100); /* another seed, another mask */
    CU_ASSERT_TRUE(zeros > 205 && zeros < 295); /* ~ p * 1000, within 3.3 standard deviations */
    /* backward: the same mask and scale */
    CU_ASSERT_EQUAL(lb_backward(g, y1, ones), LB_OK);
    LB_ASSERT_TENSORS_CLOSE(x->grad, y1->value, 0, 0);
    lb_graph_reset(g);
    /* The mean is preserved, E[y] = x: 100000 float32 ones, p = 0.3. The sample mean has
     * a standard deviation of sqrt(p / (1 - p) / n) = 0.002; allow 5 of them. */
    int64_t sb[1] = {100000};
    lb_tensor *big = lb_tensor_zeros(LB_FLOAT32, 1, sb);
    lb_tensor_fill(big, 1);
    lb_var *xb = lb_input(g, big, 0);
    lb_var *yb = lb_dropout(g, xb, 0.3, 1, &r1);
    double sum = 0;
    int64_t kept = 0;
    for (int64_t i = 0; i < sb[0]; i++) {
        double v = lb_tensor_flat(yb->value, i);
        sum += v;
        kept += v != 0;
    }
    CU_ASSERT_DOUBLE_EQUAL(sum / (double)sb[0], 1.0, 0.01);
    CU_ASSERT_DOUBLE_EQUAL((double)kept / (double)sb[0], 0.7, 0.01);
    CU_ASSERT_FALSE(yb->requires_grad);
    lb_tensor_free(ones);
    lb_graph_free(g);
}

/* Evaluation and p == 0 are the identity (values and gradients), and draw nothing. */
static void test_dropout_identity(void)
{
    int64_t s[2] = {3, 4};
    lb_tensor *xv = lb_test_uniform(LB_FLOAT64, 2, s, 401, -1, 1), *go = lb_test_uniform(LB_FLOAT64, 2, s, 402, -1, 1);
    for (int mode = 0; mode < 2; mode++) {
        lb_graph *g = lb_graph_new();
        lb_var *x = lb_input_copy(g, xv, 1);
        lb_rng rng, before;
        lb_rng_seed(&rng, 5);
        before = rng;
        lb_var *y = mode ? lb_dropout(g, x, 0.0, 1, &rng) : lb_dropout(g, x, 0.5, 0, &rng);
        CU_ASSERT_PTR_NOT_NULL_FATAL(y);
        CU_ASSERT_NOT_EQUAL(y, x);
        LB_ASSERT_TENSORS_CLOSE(y->value, xv, 0, 0);
        CU_ASSERT_EQUAL(memcmp(&rng, &before, sizeof rng), 0);
        CU_ASSERT_EQUAL(lb_backward(g, y, go), LB_OK);
        LB_ASSERT_TENSORS_CLOSE(x->grad, go, 0, 0);
        lb_graph_free(g);
    }
    /* eval needs no generator */
    lb_graph *g = lb_graph_new();
    lb_var *x = lb_input_copy(g, xv, 0);
    CU_ASSERT_PTR_NOT_NULL(lb_dropout(g, x, 0.5, 0, NULL));
    lb_graph_free(g);
    lb_tensor_free(xv);
    lb_tensor_free(go);
}

static void test_dropout_errors(void)
{
    int64_t s[1] = {4};
    lb_graph *g = lb_graph_new();
    lb_var *x = lb_input(g, lb_tensor_zeros(LB_FLOAT32, 1, s), 0);
    lb_rng rng;
    lb_rng_seed(&rng, 1);
    double bad[4] = {1.0, -0.1, 1.5, NAN};
    for (int i = 0; i < 4; i++) {
        CU_ASSERT_PTR_NULL(lb_dropout(g, x, bad[i], 1, &rng));
        CU_ASSERT_EQUAL(lb_last_status(), LB_ERR_VALUE);
        CU_ASSERT_PTR_NOT_NULL(strstr(lb_last_error(), "dropout"));
        CU_ASSERT_PTR_NOT_NULL(strstr(lb_last_error(), "[0, 1)"));
    }
    CU_ASSERT_PTR_NULL(lb_dropout(g, x, 0.5, 1, NULL));
    CU_ASSERT_PTR_NOT_NULL(strstr(lb_last_error(), "rng"));
    lb_graph_free(g);
}

/* The same seed draws the same mask in float32 and float64. */
static void test_dropout_float32_matches_float64(void)
{
    int64_t s[2] = {5, 40};
    lb_tensor *x64 = lb_test_uniform(LB_FLOAT64, 2, s, 421, -2, 2);
    lb_var *y[2];
    lb_graph *g = lb_graph_new();
    for (int dt = 0; dt < 2; dt++) {
        lb_rng rng;
        lb_rng_seed(&rng, 9);
        lb_var *x = lb_input(g, lb_tensor_copy(x64, dt ? LB_FLOAT32 : LB_FLOAT64), 0);
        y[dt] = lb_dropout(g, x, 0.6, 1, &rng);
    }
    LB_ASSERT_TENSORS_CLOSE(y[1]->value, y[0]->value, 1e-6, 1e-6);
    int zeros = 0;
    for (int i = 0; i < 200; i++) {
        double a = lb_tensor_flat(y[0]->value, i), b = lb_tensor_flat(y[1]->value, i);
        CU_ASSERT_EQUAL(a == 0, b == 0);
        if (a != 0)
            CU_ASSERT_DOUBLE_EQUAL(a, lb_tensor_flat(x64, i) / 0.4, 1e-12);
        zeros += a == 0;
    }
    CU_ASSERT_TRUE(zeros > 90 && zeros < 150); /* ~ 0.6 * 200 */
    lb_graph_free(g);
    lb_tensor_free(x64);
}

/* dropout(tanh(x)) with the generator reseeded on every call, as gradcheck requires. */
static lb_var *dropout_fn(lb_graph *g, lb_var *const *p, void *user)
{
    lb_rng rng;
    lb_rng_seed(&rng, *(uint64_t *)user);
    return lb_dropout(g, lb_tanh(g, p[0]), 0.4, 1, &rng);
}

static void test_dropout_gradcheck(void)
{
    int64_t s[2] = {3, 5};
    lb_var *x = lb_test_uniform_param(2, s, 411, -1, 1, "x");
    uint64_t seed = 77;
    CU_ASSERT_EQUAL(check_gradients(dropout_fn, &seed, 1, &x), LB_OK);
    lb_param_free(x);
}

/* ---- cross-entropy ---- */

static const double CE_LOGITS[24] = {0.5, -1.0, 2.0, 0.1, 1.5,  0.3, -0.2, 0.0, 3.0, 1.0, -1.0, 0.5,
                                     -0.5, 0.25, 0.75, -2.0, 0.0, 0.0, 1.0, -1.0, 2.0, 2.0, 2.0, 2.0};
static const int32_t CE_TARGETS[6] = {0, 3, -100, 2, 1, -100};

static void test_cross_entropy_values_and_ignore(void)
{
    int64_t s[3] = {2, 3, 4};
    /* Hand-computed mean over the 4 counted rows of logsumexp(row) - row[target]. */
    double want = 1.5462663316991607;
    /* (softmax(row) - onehot(target)) / 4 on counted rows, 0 on ignored ones */
    double want_grad[24] = {-0.21078517046354101, 0.0087500111946634714, 0.1757486729287186, 0.026286486340158944,
                            0.14645509289629957,  0.0441114262854293,    0.02675493248576663, -0.2173214516674955,
                            0, 0, 0, 0,
                            0.03660068564612555,  0.077483652120883081, -0.12225105461677097, 0.0081667168497623309,
                            0.049152983310370463, -0.20084701668962954, 0.13361166134713073, 0.018082372032128317,
                            0, 0, 0, 0};
    for (int dt = 0; dt < 2; dt++) {
        lb_dtype dtype = dt ? LB_FLOAT32 : LB_FLOAT64;
        double tol = dt ? 1e-6 : 1e-14;
        lb_graph *g = lb_graph_new();
        lb_var *logits = lb_input(g, lb_tensor_from_doubles(dtype, 3, s, CE_LOGITS), 1);
        lb_var *loss = lb_cross_entropy(g, logits, CE_TARGETS, -100);
        CU_ASSERT_PTR_NOT_NULL_FATAL(loss);
        CU_ASSERT_EQUAL(loss->value->ndim, 0);
        CU_ASSERT_EQUAL(loss->value->dtype, dtype);
        CU_ASSERT_DOUBLE_EQUAL(lb_tensor_flat(loss->value, 0), want, tol);
        CU_ASSERT_EQUAL(lb_backward(g, loss, NULL), LB_OK);
        LB_ASSERT_CLOSE(logits->grad, want_grad, tol, 0);
        lb_graph_free(g);
    }
    /* Another ignore_index: with 0 ignored, rows 0 (target 0) no longer count; -100 becomes an error. */
    lb_graph *g = lb_graph_new();
    lb_var *logits = lb_input(g, lb_tensor_from_doubles(LB_FLOAT64, 3, s, CE_LOGITS), 1);
    int32_t t2[6] = {0, 3, 0, 2, 1, 0};
    lb_var *loss = lb_cross_entropy(g, logits, t2, 0);
    /* rows 1, 3, 4: the three counted terms of `want` without row 0 */
    double row0 = log(exp(0.5) + exp(-1.0) + exp(2.0) + exp(0.1)) - 0.5;
    CU_ASSERT_DOUBLE_EQUAL(lb_tensor_flat(loss->value, 0), (want * 4 - row0) / 3, 1e-12);
    CU_ASSERT_PTR_NULL(lb_cross_entropy(g, logits, CE_TARGETS, 0));
    CU_ASSERT_PTR_NOT_NULL(strstr(lb_last_error(), "targets[2] = -100"));
    lb_graph_free(g);
}

static void test_cross_entropy_all_ignored_and_errors(void)
{
    int64_t s[2] = {3, 4};
    lb_graph *g = lb_graph_new();
    lb_var *logits = lb_input(g, lb_tensor_from_doubles(LB_FLOAT32, 2, s, CE_LOGITS), 1);
    int32_t none[3] = {-100, -100, -100};
    lb_var *loss = lb_cross_entropy(g, logits, none, -100);
    CU_ASSERT_PTR_NOT_NULL_FATAL(loss);
    CU_ASSERT_EQUAL(lb_tensor_flat(loss->value, 0), 0.0);
    CU_ASSERT_EQUAL(lb_backward(g, loss, NULL), LB_OK);
    CU_ASSERT_PTR_NOT_NULL_FATAL(logits->grad);
    CU_ASSERT_TRUE(all_zero(logits->grad));
    lb_graph_reset(g);
    logits = lb_input(g, lb_tensor_from_doubles(LB_FLOAT32, 2, s, CE_LOGITS), 1);
    int32_t bad[3] = {1, 4, 0};
    CU_ASSERT_PTR_NULL(lb_cross_entropy(g, logits, bad, -100));
    CU_ASSERT_EQUAL(lb_last_status(), LB_ERR_VALUE);
    CU_ASSERT_PTR_NOT_NULL(strstr(lb_last_error(), "cross_entropy"));
    CU_ASSERT_PTR_NOT_NULL(strstr(lb_last_error(), "targets[1] = 4"));
    CU_ASSERT_PTR_NOT_NULL(strstr(lb_last_error(), "[3, 4]"));
    bad[1] = -1;
    CU_ASSERT_PTR_NULL(lb_cross_entropy(g, logits, bad, -100));
    CU_ASSERT_PTR_NOT_NULL(strstr(lb_last_error(), "targets[1] = -1"));
    CU_ASSERT_PTR_NULL(lb_cross_entropy(g, logits, NULL, -100));
    lb_graph_free(g);
}

/* Logits of +-1000 stay finite: logsumexp subtracts the row max. */
static void test_cross_entropy_large_logits(void)
{
    int64_t s[2] = {2, 4};
    double v[8] = {1000, -1000, 999, 0, -1000, -1000, -1000, -1001};
    int32_t t[2] = {2, 3};
    for (int dt = 0; dt < 2; dt++) {
        lb_graph *g = lb_graph_new();
        lb_var *logits = lb_input(g, lb_tensor_from_doubles(dt ? LB_FLOAT32 : LB_FLOAT64, 2, s, v), 1);
        lb_var *loss = lb_cross_entropy(g, logits, t, -100);
        /* row 0: log(1 + e^-1) + 1; row 1: log(3 + e^-1) + 1 */
        double want = (log(1 + exp(-1.0)) + 1 + log(3 + exp(-1.0)) + 1) / 2;
        CU_ASSERT_DOUBLE_EQUAL(lb_tensor_flat(loss->value, 0), want, dt ? 1e-5 : 1e-12);
        CU_ASSERT_EQUAL(lb_backward(g, loss, NULL), LB_OK);
        for (int i = 0; i < 8; i++)
            CU_ASSERT_TRUE(isfinite(lb_tensor_flat(logits->grad, i)));
        lb_graph_free(g);
    }
}

/* cross_entropy(h @ W) with h [2, 3, 3], W [3, 4]; targets with ignored entries */
static lb_var *cross_entropy_fn(lb_graph *g, lb_var *const *p, void *user)
{
    return lb_cross_entropy(g, lb_matmul(g, p[0], p[1]), CE_TARGETS, -100);
}

static void test_cross_entropy_gradcheck(void)
{
    int64_t sh[3] = {2, 3, 3}, sw[2] = {3, 4};
    lb_var *p[2] = {lb_test_uniform_param(3, sh, 501, -1, 1, "h"), lb_test_uniform_param(2, sw, 502, -2, 2, "W")};
    CU_ASSERT_EQUAL(check_gradients(cross_entropy_fn, NULL, 2, p), LB_OK);
    lb_param_free(p[0]);
    lb_param_free(p[1]);
}

static void test_cross_entropy_float32_matches_float64(void)
{
    int64_t s[3] = {2, 3, 4};
    lb_tensor *x64 = lb_test_uniform(LB_FLOAT64, 3, s, 511, -5, 5);
    lb_var *v[2], *loss[2];
    lb_graph *g[2];
    for (int dt = 0; dt < 2; dt++) {
        g[dt] = lb_graph_new();
        v[dt] = lb_input(g[dt], lb_tensor_copy(x64, dt ? LB_FLOAT32 : LB_FLOAT64), 1);
        loss[dt] = lb_cross_entropy(g[dt], v[dt], CE_TARGETS, -100);
        CU_ASSERT_EQUAL(lb_backward(g[dt], loss[dt], NULL), LB_OK);
    }
    CU_ASSERT_DOUBLE_EQUAL(lb_tensor_flat(loss[1]->value, 0), lb_tensor_flat(loss[0]->value, 0), 1e-5);
    LB_ASSERT_TENSORS_CLOSE(v[1]->grad, v[0]->grad, 1e-6, 1e-5);
    lb_graph_free(g[0]);
    lb_graph_free(g[1]);
    lb_tensor_free(x64);
}

/* ---- mse ---- */

static void test_mse_values_and_gradients(void)
{
    int64_t s[2] = {2, 3};
    double p[6] = {1, 2, 3, -1, 0.5, 4}, t[6] = {0.5, 2, 5, 1, 0, 3.5};
    /* diffs 0.5, 0, -2, -2, 0.5, 0.5: squares sum to 8.75 over 6 */
    for (int dt = 0; dt < 2; dt++) {
        lb_dtype dtype = dt ? LB_FLOAT32 : LB_FLOAT64;
        lb_graph *g = lb_graph_new();
        lb_var *pred = lb_input(g, lb_tensor_from_doubles(dtype, 2, s, p), 1);
        lb_var *target = lb_input(g, lb_tensor_from_doubles(dtype, 2, s, t), 0);
        lb_var *loss = lb_mse(g, pred, target);
        CU_ASSERT_PTR_NOT_NULL_FATAL(loss);
        CU_ASSERT_EQUAL(loss->value->ndim, 0);
        CU_ASSERT_DOUBLE_EQUAL(lb_tensor_flat(loss->value, 0), 8.75 / 6, 1e-7);
        CU_ASSERT_EQUAL(lb_backward(g, loss, NULL), LB_OK);
        double want[6] = {0.5 / 3, 0, -2.0 / 3, -2.0 / 3, 0.5 / 3, 0.5 / 3}; /* 2 (p - t) / 6 */
        LB_ASSERT_CLOSE(pred->grad, want, 1e-7, 0);
        CU_ASSERT_PTR_NULL(target->grad); /* a constant target gets nothing */
        /* a target that requires grad gets the negative */
        lb_graph_reset(g);
        pred = lb_input(g, lb_tensor_from_doubles(dtype, 2, s, p), 0);
        target = lb_input(g, lb_tensor_from_doubles(dtype, 2, s, t), 1);
        CU_ASSERT_EQUAL(lb_backward(g, lb_mse(g, pred, target), NULL), LB_OK);
        double neg[6];
        for (int i = 0; i < 6; i++)
            neg[i] = -want[i];
        LB_ASSERT_CLOSE(target->grad, neg, 1e-7, 0);
        CU_ASSERT_PTR_NULL(pred->grad);
        lb_graph_free(g);
    }
    lb_graph *g = lb_graph_new();
    int64_t s2[2] = {3, 2};
    lb_var *a = lb_input(g, lb_tensor_zeros(LB_FLOAT64, 2, s), 0), *b = lb_input(g, lb_tensor_zeros(LB_FLOAT64, 2, s2), 0);
    CU_ASSERT_PTR_NULL(lb_mse(g, a, b));
    CU_ASSERT_EQUAL(lb_last_status(), LB_ERR_SHAPE);
    CU_ASSERT_PTR_NOT_NULL(strstr(lb_last_error(), "mse"));
    CU_ASSERT_PTR_NOT_NULL(strstr(lb_last_error(), "[2, 3]"));
    CU_ASSERT_PTR_NOT_NULL(strstr(lb_last_error(), "[3, 2]"));
    lb_graph_free(g);
}

/* mse(tanh(pred), target) with both leaves */
static lb_var *mse_fn(lb_graph *g, lb_var *const *p, void *user)
{
    return lb_mse(g, lb_tanh(g, p[0]), p[1]);
}

static void test_mse_gradcheck(void)
{
    int64_t s[3] = {2, 3, 2};
    lb_var *p[2] = {lb_test_uniform_param(3, s, 601, -1, 1, "pred"), lb_test_uniform_param(3, s, 602, -1, 1, "target")};
    CU_ASSERT_EQUAL(check_gradients(mse_fn, NULL, 2, p), LB_OK);
    lb_param_free(p[0]);
    lb_param_free(p[1]);
}

int main(void)
{
    const lb_test_case cases[] = {
        {"layer_norm forward values, with and without weight/bias", test_layer_norm_forward},
        {"layer_norm argument errors", test_layer_norm_errors},
        {"gradcheck layer_norm w.r.t. x, weight, bias", test_layer_norm_gradcheck},
        {"layer_norm float32 agrees with float64", test_layer_norm_float32_matches_float64},
        {"embedding lookup; repeated ids accumulate", test_embedding_forward_and_repeated_ids},
        {"embedding id out of range names position and value", test_embedding_errors},
        {"gradcheck embedding", test_embedding_gradcheck},
        {"dropout is seeded, scales kept elements, preserves the mean", test_dropout_determinism_and_scale},
        {"dropout in eval and with p = 0 is the identity", test_dropout_identity},
        {"dropout argument errors", test_dropout_errors},
        {"dropout float32 agrees with float64 under one seed", test_dropout_float32_matches_float64},
        {"gradcheck dropout with a reseeded generator", test_dropout_gradcheck},
        {"cross_entropy values and gradients with ignored targets", test_cross_entropy_values_and_ignore},
        {"cross_entropy all ignored gives 0; bad targets are errors", test_cross_entropy_all_ignored_and_errors},
        {"cross_entropy of logits +-1000 is finite", test_cross_entropy_large_logits},
        {"gradcheck cross_entropy after a matmul", test_cross_entropy_gradcheck},
        {"cross_entropy float32 agrees with float64", test_cross_entropy_float32_matches_float64},
        {"mse values and gradients for pred and target", test_mse_values_and_gradients},
        {"gradcheck mse w.r.t. pred and target", test_mse_gradcheck},
        {NULL, NULL},
    };
    return lb_test_main("ops_nn", cases);
}

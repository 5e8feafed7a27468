/* softmax, log_softmax and the masked softmax of attention: values, gradients,
 * and the classic faults (overflow, fully masked rows, masks read the wrong way). */
#include <math.h>
#include <string.h>

#include "autograd/gradcheck.h"
#include "autograd/ops.h"
#include "tensor/rng.h"
#include "support.h"

/* ---- helpers ---- */

static int all_finite(const lb_tensor *t)
{
    int64_t n = lb_tensor_numel(t);
    for (int64_t i = 0; i < n; i++)
        if (!isfinite(lb_tensor_flat(t, i)))
            return 0;
    return 1;
}

/* Checks weights [R, Tk] row by row against the softmax, over the keys marked '1' in
 * pattern[r % n_patterns], of scale * scores + add (add [R, Tk] or NULL); every other
 * entry (and every entry of an all-'0' row) must be exactly 0. */
static int check_pattern(const lb_tensor *w, const lb_tensor *scores, double scale, const double *add,
                         int n_patterns, const char *const *patterns, double tol)
{
    int64_t tk = w->shape[w->ndim - 1], rows = lb_tensor_numel(w) / tk;
    for (int64_t r = 0; r < rows; r++) {
        const char *pat = patterns[r % n_patterns];
        double mx = -INFINITY, sum = 0;
        for (int64_t j = 0; j < tk; j++)
            if (pat[j] == '1') {
                double z = scale * lb_tensor_flat(scores, r * tk + j) + (add ? add[r * tk + j] : 0);
                mx = z > mx ? z : mx;
            }
        for (int64_t j = 0; j < tk; j++)
            if (pat[j] == '1')
                sum += exp(scale * lb_tensor_flat(scores, r * tk + j) + (add ? add[r * tk + j] : 0) - mx);
        for (int64_t j = 0; j < tk; j++) {
            double want = 0;
            if (pat[j] == '1')
                want = exp(scale * lb_tensor_flat(scores, r * tk + j) + (add ? add[r * tk + j] : 0) - mx) / sum;
            double got = lb_tensor_flat(w, r * tk + j);
            if (!(fabs(got - want) <= tol) || (pat[j] != '1' && got != 0)) {
                fprintf(stderr, "\n  row %lld key %lld (pattern %s): got %.10g, expected %.10g\n", (long long)r,
                        (long long)j, pat, got, want);
                return 0;
            }
        }
    }
    return 1;
}

/* A float32 tensor of 0/1 from pattern rows ('1' = may attend), repeated to fill `shape`. */
static lb_tensor *bool_mask(int ndim, const int64_t *shape, int n_patterns, const char *const *patterns)
{
    lb_tensor *t = lb_tensor_zeros(LB_FLOAT32, ndim, shape);
    int64_t tk = shape[ndim - 1], rows = lb_tensor_numel(t) / tk;
    float *p = lb_tensor_data(t);
    for (int64_t r = 0; r < rows; r++)
        for (int64_t j = 0; j < tk; j++)
            p[r * tk + j] = patterns[r % n_patterns][j] == '1' ? 1.0f : 0.0f;
    return t;
}

/* ---- plain softmax ---- */

static void test_softmax_forward(void)
{
    lb_graph *g = lb_graph_new();
    int64_t s[2] = {2, 3};
    double v[6] = {1, 2, 3, -1, 0.5, 4};
    /* Reference: softmax / log_softmax over the last axis, computed in double by hand. */
    double sm[6] = {0.090030573170380462, 0.24472847105479764, 0.66524095577482178,
                    0.0064979433156619401, 0.029121761537478402, 0.96438029514685963};
    double lsm[6] = {-2.4076059644443806, -1.4076059644443804, -0.40760596444438041,
                     -5.0362695651247789, -3.5362695651247793, -0.036269565124779121};
    for (int dt = 0; dt < 2; dt++) {
        lb_dtype dtype = dt ? LB_FLOAT32 : LB_FLOAT64;
        double tol = dt ? 1e-6 : 1e-15;
        lb_var *x = lb_input(g, lb_tensor_from_doubles(dtype, 2, s, v), 0);
        lb_var *y = lb_softmax(g, x), *ly = lb_log_softmax(g, x);
        CU_ASSERT_EQUAL(y->value->dtype, dtype);
        LB_ASSERT_CLOSE(y->value, sm, tol, 0);
        LB_ASSERT_CLOSE(ly->value, lsm, tol, tol);
    }
    /* A NULL input returns NULL and keeps the upstream error. */
    lb_error(LB_ERR_SHAPE, "upstream failure");
    CU_ASSERT_PTR_NULL(lb_softmax(g, NULL));
    CU_ASSERT_PTR_NULL(lb_log_softmax(g, NULL));
    CU_ASSERT_STRING_EQUAL(lb_last_error(), "upstream failure");
    lb_graph_free(g);
}

/* Logits of +-1000: shift invariance, nothing infinite or NaN, forward or backward. */
static void test_softmax_extreme_logits(void)
{
    int64_t s[2] = {3, 4};
    double v[12] = {1000, 1001, 1002, 1003, -1000, -1001, -999, -1000.5, 1000, -1000, 0, 5};
    double sm0[4] = {0.032058603280084988, 0.087144318742032573, 0.23688281808991013, 0.64391425988797235};
    double sm1[4] = {0.21309730428862375, 0.078394117216839712, 0.57925852994137372, 0.12925004855316274};
    for (int dt = 0; dt < 2; dt++) {
        lb_dtype dtype = dt ? LB_FLOAT32 : LB_FLOAT64;
        double tol = dt ? 1e-6 : 1e-12;
        lb_graph *g = lb_graph_new();
        lb_var *x = lb_input(g, lb_tensor_from_doubles(dtype, 2, s, v), 1);
        lb_var *y = lb_softmax(g, x);
        double want[12];
        memcpy(want, sm0, sizeof sm0);
        memcpy(want + 4, sm1, sizeof sm1);
        want[8] = 1, want[9] = 0, want[10] = 0, want[11] = 0; /* e^-995 underflows */
        LB_ASSERT_CLOSE(y->value, want, tol, 0);
        CU_ASSERT_TRUE(all_finite(y->value));
        lb_tensor *go = lb_test_uniform(dtype, 2, s, 3, -1, 1);
        CU_ASSERT_EQUAL(lb_backward(g, y, go), LB_OK);
        CU_ASSERT_TRUE(all_finite(x->grad));
        lb_graph_reset(g);
        x = lb_input(g, lb_tensor_from_doubles(dtype, 2, s, v), 1);
        lb_var *ly = lb_log_softmax(g, x);
        CU_ASSERT_TRUE(all_finite(ly->value));
        CU_ASSERT_DOUBLE_EQUAL(lb_tensor_flat(ly->value, 3), log(sm0[3]), tol * 10);
        CU_ASSERT_DOUBLE_EQUAL(lb_tensor_flat(ly->value, 9), -2000.0, dt ? 1e-3 : 1e-9);
        CU_ASSERT_EQUAL(lb_backward(g, ly, go), LB_OK);
        CU_ASSERT_TRUE(all_finite(x->grad));
        lb_tensor_free(go);
        lb_graph_free(g);
    }
}

static lb_var *softmax_fn(lb_graph *g, lb_var *const *p, void *user)
{
    int log_softmax = *(int *)user;
    lb_var *x = lb_mul(g, p[0], p[1]); /* x [2, 3, 5] * w [5]: the op sits after another */
    return log_softmax ? lb_log_softmax(g, x) : lb_softmax(g, x);
}

static void test_softmax_gradcheck(void)
{
    int64_t sx[3] = {2, 3, 5}, sw[1] = {5};
    lb_var *p[2] = {lb_test_uniform_param(3, sx, 11, -2, 2, "x"), lb_test_uniform_param(1, sw, 12, 0.5, 1.5, "w")};
    for (int log_softmax = 0; log_softmax < 2; log_softmax++) {
        lb_gradcheck_leaf report[2];
        lb_status st = lb_gradcheck(softmax_fn, &log_softmax, 2, p, NULL, report);
        if (st != LB_OK)
            fprintf(stderr, "\n  %s\n", lb_last_error());
        CU_ASSERT_EQUAL(st, LB_OK);
        CU_ASSERT_TRUE(report[0].passed && report[1].passed);
        CU_ASSERT_TRUE(report[0].index >= 0); /* the check really ran over the elements */
    }
    lb_param_free(p[0]);
    lb_param_free(p[1]);
}

/* float32 forward and backward agree with float64 on the same inputs. */
static void test_softmax_float32_matches_float64(void)
{
    int64_t s[2] = {3, 7};
    lb_tensor *x64 = lb_test_uniform(LB_FLOAT64, 2, s, 21, -4, 4), *go64 = lb_test_uniform(LB_FLOAT64, 2, s, 22, -1, 1);
    lb_tensor *x32 = lb_tensor_copy(x64, LB_FLOAT32), *go32 = lb_tensor_copy(go64, LB_FLOAT32);
    for (int log_softmax = 0; log_softmax < 2; log_softmax++) {
        lb_graph *g64 = lb_graph_new(), *g32 = lb_graph_new();
        lb_var *a = lb_input_copy(g64, x64, 1), *b = lb_input_copy(g32, x32, 1);
        lb_var *ya = log_softmax ? lb_log_softmax(g64, a) : lb_softmax(g64, a);
        lb_var *yb = log_softmax ? lb_log_softmax(g32, b) : lb_softmax(g32, b);
        LB_ASSERT_TENSORS_CLOSE(yb->value, ya->value, 1e-6, 1e-6);
        CU_ASSERT_EQUAL(lb_backward(g64, ya, go64), LB_OK);
        CU_ASSERT_EQUAL(lb_backward(g32, yb, go32), LB_OK);
        LB_ASSERT_TENSORS_CLOSE(b->grad, a->grad, 1e-5, 1e-5);
        lb_graph_free(g64);
        lb_graph_free(g32);
    }
    lb_tensor_free(x64);
    lb_tensor_free(go64);
    lb_tensor_free(x32);
    lb_tensor_free(go32);
}

/* ---- masked softmax ---- */

/* Without a mask it is softmax(scale * x). */
static void test_masked_no_mask_is_scaled_softmax(void)
{
    lb_graph *g = lb_graph_new();
    int64_t s[3] = {2, 3, 4};
    lb_var *x = lb_input(g, lb_test_uniform(LB_FLOAT64, 3, s, 31, -3, 3), 0);
    lb_var *a = lb_masked_softmax(g, x, NULL, 0.6);
    lb_attn_mask none = {0};
    lb_var *b = lb_masked_softmax(g, x, &none, 0.6);
    lb_var *c = lb_softmax(g, lb_scale(g, x, 0.6));
    LB_ASSERT_TENSORS_CLOSE(a->value, c->value, 1e-15, 1e-14);
    LB_ASSERT_TENSORS_CLOSE(b->value, c->value, 1e-15, 1e-14);
    lb_graph_free(g);
}

/* Causal with Tq != Tk aligns the LAST query with the LAST key. Read the other way
 * round (top-left, PyTorch's is_causal) query 0 of Tq=2, Tk=4 would see one key, not three. */
static void test_masked_causal_tq_ne_tk(void)
{
    lb_graph *g = lb_graph_new();
    /* scores [B=2, H=3, Tq=2, Tk=4]; the first item/head hand-checked */
    int64_t s[4] = {2, 3, 2, 4};
    double v[48] = {0.3, -1.2, 2.0, 0.7, 1.5, 0.1, -0.4, 2.2};
    for (int i = 8; i < 48; i++)
        v[i] = 2 * sin(1.7 * i + 0.3);
    lb_attn_mask causal = {.causal = 1};
    for (int dt = 0; dt < 2; dt++) {
        lb_dtype dtype = dt ? LB_FLOAT32 : LB_FLOAT64;
        double tol = dt ? 1e-6 : 1e-14;
        lb_var *x = lb_input(g, lb_tensor_from_doubles(dtype, 4, s, v), 0);
        lb_var *w = lb_masked_softmax(g, x, &causal, 0.5);
        /* Hand-computed softmax(0.5 * [0.3, -1.2, 2.0]) and softmax(0.5 * row 1). */
        double q0[4] = {0.2623285633717109, 0.12391523916539789, 0.61375619746289123, 0};
        double q1[4] = {0.30281063906887579, 0.15037131319328856, 0.11710929646640859, 0.42970875127142721};
        double got[8];
        for (int i = 0; i < 8; i++)
            got[i] = lb_tensor_flat(w->value, i);
        for (int j = 0; j < 4; j++) {
            CU_ASSERT_DOUBLE_EQUAL(got[j], q0[j], tol);
            CU_ASSERT_DOUBLE_EQUAL(got[4 + j], q1[j], tol);
        }
        CU_ASSERT_EQUAL(got[3], 0.0);
        const char *pat[2] = {"1110", "1111"};
        CU_ASSERT_TRUE(check_pattern(w->value, x->value, 0.5, NULL, 2, pat, tol));
    }
    /* More queries than keys: queries 0 and 1 see no key at all (zeros, not NaN). */
    int64_t s2[3] = {2, 4, 2};
    lb_var *x = lb_input(g, lb_test_uniform(LB_FLOAT64, 3, s2, 41, -2, 2), 1);
    lb_var *w = lb_masked_softmax(g, x, &causal, 0.8);
    const char *pat2[4] = {"00", "00", "10", "11"};
    CU_ASSERT_TRUE(check_pattern(w->value, x->value, 0.8, NULL, 4, pat2, 1e-14));
    lb_tensor *go = lb_test_uniform(LB_FLOAT64, 3, s2, 42, -1, 1);
    CU_ASSERT_EQUAL(lb_backward(g, w, go), LB_OK);
    CU_ASSERT_TRUE(all_finite(x->grad));
    for (int b = 0; b < 2; b++) {
        for (int j = 0; j < 6; j++) /* rows 0-2: no key, or one key (softmax of one is constant) */
            CU_ASSERT_EQUAL(lb_tensor_flat(x->grad, b * 8 + j), 0.0);
        /* row 3, two keys: d w0 / d x0 = 0.8 w0 w1, so dx0 = 0.8 w0 w1 (go0 - go1) */
        double w0 = lb_tensor_flat(w->value, b * 8 + 6), w1 = lb_tensor_flat(w->value, b * 8 + 7);
        double g0 = lb_tensor_flat(go, b * 8 + 6), g1 = lb_tensor_flat(go, b * 8 + 7);
        CU_ASSERT_DOUBLE_EQUAL(lb_tensor_flat(x->grad, b * 8 + 6), 0.8 * w0 * w1 * (g0 - g1), 1e-14);
        CU_ASSERT_DOUBLE_EQUAL(lb_tensor_flat(x->grad, b * 8 + 7), -0.8 * w0 * w1 * (g0 - g1), 1e-14);
    }
    lb_tensor_free(go);
    lb_graph_free(g);
}

/* A fully masked row: zeros forward, zero gradient backward, no NaN, in both dtypes. */
static void test_masked_fully_masked_row(void)
{
    int64_t s[3] = {2, 3, 4}, sm[2] = {3, 4};
    const char *pat[3] = {"1011", "0000", "1100"}; /* asymmetric, row 1 fully masked */
    lb_tensor *allowed = bool_mask(2, sm, 3, pat);
    lb_attn_mask mask = {.allowed = allowed};
    for (int dt = 0; dt < 2; dt++) {
        lb_dtype dtype = dt ? LB_FLOAT32 : LB_FLOAT64;
        lb_graph *g = lb_graph_new();
        lb_var *x = lb_input(g, lb_test_uniform(dtype, 3, s, 51, -2, 2), 1);
        lb_var *w = lb_masked_softmax(g, x, &mask, 0.7);
        CU_ASSERT_TRUE(check_pattern(w->value, x->value, 0.7, NULL, 3, pat, dt ? 1e-6 : 1e-14));
        lb_tensor *go = lb_test_uniform(dtype, 3, s, 52, -1, 1);
        CU_ASSERT_EQUAL(lb_backward(g, w, go), LB_OK);
        CU_ASSERT_TRUE(all_finite(x->grad));
        for (int b = 0; b < 2; b++)
            for (int j = 0; j < 4; j++) {
                CU_ASSERT_EQUAL(lb_tensor_flat(w->value, b * 12 + 4 + j), 0.0);
                CU_ASSERT_EQUAL(lb_tensor_flat(x->grad, b * 12 + 4 + j), 0.0);
            }
        /* masked keys of the other rows also get exactly 0 */
        CU_ASSERT_EQUAL(lb_tensor_flat(x->grad, 1), 0.0);
        CU_ASSERT_EQUAL(lb_tensor_flat(x->grad, 8 + 3), 0.0);
        lb_tensor_free(go);
        lb_graph_free(g);
    }
    lb_tensor_free(allowed);
}

/* Masked scores that would overflow exp (1e30, inf, NaN, float32's max) never reach it. */
static void test_masked_overflow_does_not_poison(void)
{
    int64_t s[3] = {2, 2, 3}, sm[2] = {2, 3};
    float v[12] = {1e30f, 0.5f, -0.25f, 0.75f, 3e38f, 0.1f, INFINITY, 1.0f, 2.0f, 0.3f, NAN, 0.2f};
    const char *pat[2] = {"011", "101"};
    lb_tensor *allowed = bool_mask(2, sm, 2, pat);
    lb_attn_mask mask = {.allowed = allowed};
    lb_graph *g = lb_graph_new();
    lb_var *x = lb_input(g, lb_tensor_from_data(LB_FLOAT32, 3, s, v), 1);
    lb_var *w = lb_masked_softmax(g, x, &mask, 1e8); /* even scale * 1e30 would overflow float32 */
    CU_ASSERT_TRUE(all_finite(w->value));
    /* row 0: keys 1, 2 with 1e8 * [0.5, -0.25]: all weight on key 1 */
    CU_ASSERT_EQUAL(lb_tensor_flat(w->value, 0), 0.0);
    CU_ASSERT_DOUBLE_EQUAL(lb_tensor_flat(w->value, 1), 1.0, 1e-7);
    lb_graph_reset(g);
    x = lb_input(g, lb_tensor_from_data(LB_FLOAT32, 3, s, v), 1);
    w = lb_masked_softmax(g, x, &mask, 1.0);
    CU_ASSERT_TRUE(check_pattern(w->value, x->value, 1.0, NULL, 2, pat, 1e-6));
    /* row 0 = softmax([0.5, -0.25]) = [0.679178699175393, 0.320821300824607] */
    CU_ASSERT_DOUBLE_EQUAL(lb_tensor_flat(w->value, 1), 0.679178699175393, 1e-6);
    lb_tensor *go = lb_test_uniform(LB_FLOAT32, 3, s, 61, -1, 1);
    CU_ASSERT_EQUAL(lb_backward(g, w, go), LB_OK);
    CU_ASSERT_TRUE(all_finite(x->grad));
    CU_ASSERT_EQUAL(lb_tensor_flat(x->grad, 0), 0.0);
    CU_ASSERT_EQUAL(lb_tensor_flat(x->grad, 4), 0.0);
    lb_tensor_free(go);
    lb_graph_free(g);
    lb_tensor_free(allowed);
}

/* Padding: per batch item key_lengths {5, 2, 0}; item 2 is fully masked. */
static void test_masked_key_lengths(void)
{
    int64_t s[4] = {3, 2, 2, 5}; /* B=3, H=2, Tq=2, Tk=5 */
    int32_t lengths[3] = {5, 2, 0};
    const char *pad[12] = {"11111", "11111", "11111", "11111", "11000", "11000",
                           "11000", "11000", "00000", "00000", "00000", "00000"};
    /* with causal too (query 0 aligned to key 3): */
    const char *both[12] = {"11110", "11111", "11110", "11111", "11000", "11000",
                            "11000", "11000", "00000", "00000", "00000", "00000"};
    lb_graph *g = lb_graph_new();
    lb_var *x = lb_input(g, lb_test_uniform(LB_FLOAT64, 4, s, 71, -2, 2), 1);
    lb_attn_mask mask = {.key_lengths = lengths};
    lb_var *w = lb_masked_softmax(g, x, &mask, 0.9);
    CU_ASSERT_TRUE(check_pattern(w->value, x->value, 0.9, NULL, 12, pad, 1e-14));
    mask.causal = 1;
    lb_var *wc = lb_masked_softmax(g, x, &mask, 0.9);
    CU_ASSERT_TRUE(check_pattern(wc->value, x->value, 0.9, NULL, 12, both, 1e-14));
    lb_tensor *go = lb_test_uniform(LB_FLOAT64, 4, s, 72, -1, 1);
    CU_ASSERT_EQUAL(lb_backward(g, wc, go), LB_OK);
    CU_ASSERT_TRUE(all_finite(x->grad));
    for (int i = 40; i < 60; i++) /* item 2 */
        CU_ASSERT_EQUAL(lb_tensor_flat(x->grad, i), 0.0);
    for (int i = 20; i < 40; i++) /* item 1: keys 2.. are padding */
        if (i % 5 >= 2)
            CU_ASSERT_EQUAL(lb_tensor_flat(x->grad, i), 0.0);
    /* A length beyond Tk, or negative, is an error naming the item. */
    lb_graph_reset(g);
    x = lb_input(g, lb_test_uniform(LB_FLOAT64, 4, s, 71, -2, 2), 1);
    int32_t bad[3] = {5, 6, 1};
    lb_attn_mask badmask = {.key_lengths = bad};
    CU_ASSERT_PTR_NULL(lb_masked_softmax(g, x, &badmask, 1.0));
    CU_ASSERT_EQUAL(lb_last_status(), LB_ERR_VALUE);
    CU_ASSERT_PTR_NOT_NULL(strstr(lb_last_error(), "key_lengths[1] = 6"));
    bad[1] = -1;
    CU_ASSERT_PTR_NULL(lb_masked_softmax(g, x, &badmask, 1.0));
    CU_ASSERT_PTR_NOT_NULL(strstr(lb_last_error(), "key_lengths[1] = -1"));
    lb_tensor_free(go);
    lb_graph_free(g);
}

/* An additive mask with -inf entries: added after scaling, -inf masks (and a row of
 * -inf is fully masked). It broadcasts [Tq, Tk] over the batch; combined here with a
 * boolean mask [B, 1, Tk] broadcast over the queries. */
static void test_masked_additive_neg_inf(void)
{
    int64_t s[3] = {2, 3, 4}, sa[2] = {3, 4}, sb[3] = {2, 1, 4};
    double add[12] = {0.0, -INFINITY, 1.0, -0.5, /* */ -INFINITY, -INFINITY, -INFINITY, -INFINITY,
                      0.25, -1.0, 0.0, -INFINITY};
    double sv[24] = {0.2, 1.0, -0.5, 0.8};
    for (int i = 4; i < 24; i++)
        sv[i] = 1.5 * cos(0.9 * i);
    lb_tensor *additive = lb_tensor_from_doubles(LB_FLOAT64, 2, sa, add);
    const char *keys[2] = {"1111", "1101"}; /* item 1 cannot see key 2 */
    lb_tensor *allowed = bool_mask(3, sb, 2, keys);
    lb_graph *g = lb_graph_new();
    lb_var *x = lb_input(g, lb_tensor_from_doubles(LB_FLOAT64, 3, s, sv), 1);
    lb_attn_mask mask = {.additive = additive};
    lb_var *w = lb_masked_softmax(g, x, &mask, 0.5);
    /* Hand-computed: softmax(0.5 * [0.2, -0.5, 0.8] + [0, 1, -0.5]) on keys 0, 2, 3. */
    CU_ASSERT_DOUBLE_EQUAL(lb_tensor_flat(w->value, 0), 0.26778984281582874, 1e-14);
    CU_ASSERT_EQUAL(lb_tensor_flat(w->value, 1), 0.0);
    CU_ASSERT_DOUBLE_EQUAL(lb_tensor_flat(w->value, 2), 0.51296237750893348, 1e-14);
    CU_ASSERT_DOUBLE_EQUAL(lb_tensor_flat(w->value, 3), 0.21924777967523787, 1e-14);
    double add_rows[24];
    for (int i = 0; i < 24; i++)
        add_rows[i] = isinf(add[i % 12]) ? 0 : add[i % 12];
    const char *pat[3] = {"1011", "0000", "1110"};
    CU_ASSERT_TRUE(check_pattern(w->value, x->value, 0.5, add_rows, 3, pat, 1e-14));
    /* with the boolean mask as well */
    mask.allowed = allowed;
    lb_var *w2 = lb_masked_softmax(g, x, &mask, 0.5);
    const char *pat2[6] = {"1011", "0000", "1110", "1001", "0000", "1100"};
    CU_ASSERT_TRUE(check_pattern(w2->value, x->value, 0.5, add_rows, 6, pat2, 1e-14));
    lb_tensor *go = lb_test_uniform(LB_FLOAT64, 3, s, 81, -1, 1);
    CU_ASSERT_EQUAL(lb_backward(g, w2, go), LB_OK);
    CU_ASSERT_TRUE(all_finite(x->grad));
    for (int j = 0; j < 4; j++)
        CU_ASSERT_EQUAL(lb_tensor_flat(x->grad, 4 + j), 0.0);
    /* A mask that does not broadcast to the scores is an error naming both shapes. */
    int64_t sbad[2] = {3, 3};
    lb_tensor *badt = lb_tensor_zeros(LB_FLOAT64, 2, sbad);
    lb_attn_mask bad = {.additive = badt};
    CU_ASSERT_PTR_NULL(lb_masked_softmax(g, x, &bad, 0.5));
    CU_ASSERT_EQUAL(lb_last_status(), LB_ERR_SHAPE);
    CU_ASSERT_PTR_NOT_NULL(strstr(lb_last_error(), "masked_softmax"));
    CU_ASSERT_PTR_NOT_NULL(strstr(lb_last_error(), "[3, 3]"));
    CU_ASSERT_PTR_NOT_NULL(strstr(lb_last_error(), "[2, 3, 4]"));
    bad = (lb_attn_mask){.allowed = badt};
    CU_ASSERT_PTR_NULL(lb_masked_softmax(g, x, &bad, 0.5));
    CU_ASSERT_PTR_NOT_NULL(strstr(lb_last_error(), "allowed"));
    lb_tensor_free(badt);
    lb_tensor_free(go);
    lb_graph_free(g);
    lb_tensor_free(additive);
    lb_tensor_free(allowed);
}

/* A sliding window gives exactly what the equivalent boolean mask gives, forward and backward. */
static void test_masked_window_equals_boolean(void)
{
    int64_t s[4] = {2, 2, 3, 6}, sm[2] = {3, 6}; /* Tq=3, Tk=6: query i is aligned to key i+3 */
    const char *win2[3] = {"001100", "000110", "000011"};
    const char *win4[3] = {"111100", "011110", "001111"};
    const char *win1[3] = {"000100", "000010", "000001"};
    const char *const *pats[3] = {win1, win2, win4};
    int64_t windows[3] = {1, 2, 4};
    lb_tensor *go = lb_test_uniform(LB_FLOAT64, 4, s, 91, -1, 1);
    for (int k = 0; k < 3; k++) {
        lb_tensor *allowed = bool_mask(2, sm, 3, pats[k]);
        for (int causal = 0; causal < 2; causal++) {
            lb_graph *g = lb_graph_new();
            lb_var *xa = lb_input(g, lb_test_uniform(LB_FLOAT64, 4, s, 92, -2, 2), 1);
            lb_var *xb = lb_input(g, lb_test_uniform(LB_FLOAT64, 4, s, 92, -2, 2), 1);
            lb_attn_mask mw = {.causal = causal, .window = windows[k]};
            lb_attn_mask mb = {.allowed = allowed};
            lb_var *wa = lb_masked_softmax(g, xa, &mw, 0.75), *wb = lb_masked_softmax(g, xb, &mb, 0.75);
            CU_ASSERT_TRUE(check_pattern(wa->value, xa->value, 0.75, NULL, 3, pats[k], 1e-14));
            LB_ASSERT_TENSORS_CLOSE(wa->value, wb->value, 0, 0);
            lb_var *both = lb_add(g, wa, wb);
            CU_ASSERT_EQUAL(lb_backward(g, both, go), LB_OK);
            LB_ASSERT_TENSORS_CLOSE(xa->grad, xb->grad, 0, 0);
            lb_graph_free(g);
        }
        lb_tensor_free(allowed);
    }
    lb_graph *g = lb_graph_new();
    lb_var *x = lb_input(g, lb_test_uniform(LB_FLOAT64, 4, s, 92, -2, 2), 1);
    lb_attn_mask neg = {.window = -1};
    CU_ASSERT_PTR_NULL(lb_masked_softmax(g, x, &neg, 1.0));
    CU_ASSERT_EQUAL(lb_last_status(), LB_ERR_VALUE);
    lb_graph_free(g);
    lb_tensor_free(go);
}

typedef struct masked_case {
    lb_attn_mask mask;
    double scale;
} masked_case;

/* masked_softmax(1.3 * x) */
static lb_var *masked_scale_fn(lb_graph *g, lb_var *const *p, void *user)
{
    masked_case *c = user;
    return lb_masked_softmax(g, lb_scale(g, p[0], 1.3), &c->mask, c->scale);
}

/* attention: masked_softmax(q kᵀ) v */
static lb_var *attention_fn(lb_graph *g, lb_var *const *p, void *user)
{
    masked_case *c = user;
    lb_var *scores = lb_matmul_t(g, p[0], 0, p[1], 1);
    return lb_matmul(g, lb_masked_softmax(g, scores, &c->mask, c->scale), p[2]);
}

static void test_masked_gradcheck(void)
{
    /* Scaled input, scores [2, 2, 3, 5]: causal (Tq != Tk), padding, an additive -inf
     * and a boolean mask with a fully masked row. */
    int64_t s[4] = {2, 2, 3, 5}, sm[2] = {3, 5};
    int32_t lengths[2] = {5, 3};
    double add[15] = {0, 0.5, -INFINITY, 0, -0.3, 0, 0, 0, 1.0, 0, 0.2, 0, 0, 0, 0};
    const char *pat[3] = {"11111", "00000", "10111"};
    lb_tensor *additive = lb_tensor_from_doubles(LB_FLOAT64, 2, sm, add);
    lb_tensor *allowed = bool_mask(2, sm, 3, pat);
    masked_case c = {{.allowed = allowed, .additive = additive, .causal = 1, .key_lengths = lengths}, 0.8};
    lb_var *x = lb_test_uniform_param(4, s, 101, -2, 2, "scores");
    lb_gradcheck_leaf r;
    lb_status st = lb_gradcheck(masked_scale_fn, &c, 1, &x, NULL, &r);
    if (st != LB_OK)
        fprintf(stderr, "\n  %s\n", lb_last_error());
    CU_ASSERT_EQUAL(st, LB_OK);
    CU_ASSERT_TRUE(r.passed);
    lb_param_free(x);
    /* Through attention: q [2, 3, 4], k [2, 5, 4], v [2, 5, 3]; causal, window and padding. */
    int64_t sq[3] = {2, 3, 4}, sk[3] = {2, 5, 4}, sv[3] = {2, 5, 3};
    lb_var *p[3] = {lb_test_uniform_param(3, sq, 102, -1, 1, "query"), lb_test_uniform_param(3, sk, 103, -1, 1, "key"),
                    lb_test_uniform_param(3, sv, 104, -1, 1, "value")};
    int32_t lengths2[2] = {4, 2};
    masked_case a = {{.causal = 1, .window = 3, .key_lengths = lengths2}, 0.5};
    lb_gradcheck_leaf rep[3];
    st = lb_gradcheck(attention_fn, &a, 3, p, NULL, rep);
    if (st != LB_OK)
        fprintf(stderr, "\n  %s\n", lb_last_error());
    CU_ASSERT_EQUAL(st, LB_OK);
    CU_ASSERT_TRUE(rep[0].passed && rep[1].passed && rep[2].passed);
    for (int i = 0; i < 3; i++)
        lb_param_free(p[i]);
    lb_tensor_free(additive);
    lb_tensor_free(allowed);
}

/* float32 agrees with float64 under every kind of mask, forward and backward. */
static void test_masked_float32_matches_float64(void)
{
    int64_t s[4] = {3, 2, 3, 5}, sm[2] = {3, 5};
    int32_t lengths[3] = {5, 3, 0};
    double add[15] = {0, 0.5, -INFINITY, 0, -0.3, 0, 0, 0, 1.0, 0, 0.2, 0, 0, 0, 0};
    lb_tensor *additive = lb_tensor_from_doubles(LB_FLOAT32, 2, sm, add);
    lb_attn_mask mask = {.additive = additive, .causal = 1, .key_lengths = lengths};
    lb_tensor *x64 = lb_test_uniform(LB_FLOAT64, 4, s, 111, -3, 3), *go64 = lb_test_uniform(LB_FLOAT64, 4, s, 112, -1, 1);
    lb_tensor *x32 = lb_tensor_copy(x64, LB_FLOAT32), *go32 = lb_tensor_copy(go64, LB_FLOAT32);
    lb_graph *g64 = lb_graph_new(), *g32 = lb_graph_new();
    lb_var *a = lb_input_copy(g64, x64, 1), *b = lb_input_copy(g32, x32, 1);
    lb_var *wa = lb_masked_softmax(g64, a, &mask, 0.4), *wb = lb_masked_softmax(g32, b, &mask, 0.4);
    LB_ASSERT_TENSORS_CLOSE(wb->value, wa->value, 1e-6, 1e-6);
    CU_ASSERT_EQUAL(lb_backward(g64, wa, go64), LB_OK);
    CU_ASSERT_EQUAL(lb_backward(g32, wb, go32), LB_OK);
    LB_ASSERT_TENSORS_CLOSE(b->grad, a->grad, 1e-6, 1e-5);
    lb_graph_free(g64);
    lb_graph_free(g32);
    lb_tensor_free(x64);
    lb_tensor_free(go64);
    lb_tensor_free(x32);
    lb_tensor_free(go32);
    lb_tensor_free(additive);
}

static void test_masked_errors(void)
{
    lb_graph *g = lb_graph_new();
    int64_t s1[1] = {4}, s2[2] = {3, 4};
    lb_var *row = lb_input(g, lb_tensor_zeros(LB_FLOAT64, 1, s1), 0);
    CU_ASSERT_PTR_NULL(lb_masked_softmax(g, row, NULL, 1.0));
    CU_ASSERT_EQUAL(lb_last_status(), LB_ERR_SHAPE);
    CU_ASSERT_PTR_NOT_NULL(strstr(lb_last_error(), "[4]"));
    lb_var *m = lb_input(g, lb_tensor_zeros(LB_FLOAT64, 2, s2), 0);
    int32_t lengths[3] = {1, 2, 3};
    lb_attn_mask mask = {.key_lengths = lengths}; /* [Tq, Tk] has no batch dim */
    CU_ASSERT_PTR_NULL(lb_masked_softmax(g, m, &mask, 1.0));
    CU_ASSERT_PTR_NOT_NULL(strstr(lb_last_error(), "batch"));
    CU_ASSERT_PTR_NULL(lb_masked_softmax(g, m, NULL, NAN));
    CU_ASSERT_EQUAL(lb_last_status(), LB_ERR_VALUE);
    lb_error(LB_ERR_SHAPE, "upstream failure");
    CU_ASSERT_PTR_NULL(lb_masked_softmax(g, NULL, NULL, 1.0));
    CU_ASSERT_STRING_EQUAL(lb_last_error(), "upstream failure");
    lb_graph_free(g);
}

int main(void)
{
    const lb_test_case cases[] = {
        {"softmax and log_softmax forward values, float32 and float64", test_softmax_forward},
        {"softmax of logits +-1000 is exact and finite, forward and backward", test_softmax_extreme_logits},
        {"gradcheck softmax and log_softmax", test_softmax_gradcheck},
        {"softmax float32 agrees with float64", test_softmax_float32_matches_float64},
        {"masked softmax without a mask is softmax(scale * x)", test_masked_no_mask_is_scaled_softmax},
        {"causal with Tq != Tk aligns the last query with the last key", test_masked_causal_tq_ne_tk},
        {"a fully masked row gives zeros forward and backward", test_masked_fully_masked_row},
        {"masked scores that overflow exp do not poison the row", test_masked_overflow_does_not_poison},
        {"key_lengths pad per batch item", test_masked_key_lengths},
        {"additive mask with -inf, broadcast, with a boolean mask", test_masked_additive_neg_inf},
        {"sliding window equals the equivalent boolean mask", test_masked_window_equals_boolean},
        {"gradcheck masked softmax, alone and inside attention", test_masked_gradcheck},
        {"masked softmax float32 agrees with float64", test_masked_float32_matches_float64},
        {"masked softmax argument errors", test_masked_errors},
        {NULL, NULL},
    };
    return lb_test_main("ops_softmax", cases);
}

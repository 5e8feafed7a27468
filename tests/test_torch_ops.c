/* The functional ops PyTorch users reach for, against PyTorch: the HDF5 fixture
 * tests/fixtures/ops.h5 written by tests/fixtures/make_fixtures.py (torch 1.13,
 * float64). Each case compares lookback's output and the gradient of
 * sum(out * R) with PyTorch's, in float64; semantic edge cases (rows of -inf,
 * ties, untaken infinities, rank-7 losses) are part of the fixtures. PyTorch is not
 * needed to run this test. */
#include <hdf5.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "autograd/gradcheck.h"
#include "autograd/ops.h"
#include "support.h"

static hid_t fixture;

static lb_tensor *fx(const char *group, const char *name)
{
    char path[160];
    snprintf(path, sizeof path, "%s/%s", group, name);
    return lb_test_h5_read((long long)fixture, path, LB_FLOAT64);
}

/* Integer dataset as int32 values (NULL if absent); n receives the count. */
static int32_t *fx_int(const char *group, const char *name, int64_t *n)
{
    lb_tensor *t = fx(group, name);
    if (!t)
        return NULL;
    *n = lb_tensor_numel(t);
    int32_t *v = malloc((size_t)(*n + 1) * sizeof *v);
    for (int64_t i = 0; v && i < *n; i++)
        v[i] = (int32_t)lb_tensor_flat(t, i);
    lb_tensor_free(t);
    return v;
}

/* a agrees with the fixture b: the same infinities, else |a - b| <= 1e-10 + 1e-9 |b|;
 * where b is NaN (torch's gradient of an all -inf logsumexp row), a must be 0. */
static int agrees(const lb_tensor *a, const lb_tensor *b, const char *what)
{
    if (!a || !b || lb_tensor_numel(a) != lb_tensor_numel(b)) {
        fprintf(stderr, "\n  %s: missing or %lld vs %lld elements\n", what, a ? (long long)lb_tensor_numel(a) : -1LL,
                b ? (long long)lb_tensor_numel(b) : -1LL);
        return 0;
    }
    for (int64_t i = 0; i < lb_tensor_numel(a); i++) {
        double x = lb_tensor_flat(a, i), y = lb_tensor_flat(b, i);
        int ok = isnan(y) ? x == 0 : isinf(y) ? x == y : fabs(x - y) <= 1e-10 + 1e-9 * fabs(y);
        if (!ok) {
            fprintf(stderr, "\n  %s: element %lld is %.17g, PyTorch %.17g\n", what, (long long)i, x, y);
            return 0;
        }
    }
    return 1;
}

typedef lb_var *(*case_fn)(lb_graph *g, lb_var *const *x, const char *group);

/* Runs one case: inputs (names[0..n)) as leaves, out and gradients against the fixture. */
static void check_case(const char *group, int n, const char *const *names, case_fn fn)
{
    lb_graph *g = lb_graph_new();
    lb_var *x[4];
    for (int i = 0; i < n; i++)
        x[i] = lb_input(g, fx(group, names[i]), 1);
    lb_var *y = fn(g, x, group);
    CU_ASSERT_PTR_NOT_NULL(y);
    if (!y) {
        fprintf(stderr, "\n  %s: %s\n", group, lb_last_error());
        lb_graph_free(g);
        return;
    }
    char what[96];
    lb_tensor *out = fx(group, "out"), *r = fx(group, "R");
    snprintf(what, sizeof what, "%s output", group);
    CU_ASSERT_TRUE(agrees(y->value, out, what));
    lb_tensor *seed = r ? lb_tensor_reshape(r, y->value->ndim, y->value->shape) : NULL;
    lb_tensor *seed_c = seed ? lb_tensor_copy(seed, LB_FLOAT64) : NULL;
    CU_ASSERT_EQUAL(lb_backward(g, y, seed_c), LB_OK);
    for (int i = 0; i < n; i++) {
        char gname[64];
        snprintf(gname, sizeof gname, "grad/%s", names[i]);
        lb_tensor *expect = fx(group, gname);
        snprintf(what, sizeof what, "%s gradient of %s", group, names[i]);
        CU_ASSERT_TRUE(agrees(x[i]->grad, expect, what));
        lb_tensor_free(expect);
    }
    lb_tensor_free(seed);
    lb_tensor_free(seed_c);
    lb_tensor_free(out);
    lb_tensor_free(r);
    lb_graph_free(g);
}

static const char *const X[] = {"x"};

static lb_var *c_gelu_tanh(lb_graph *g, lb_var *const *x, const char *group)
{
    (void)group;
    return lb_gelu_tanh(g, x[0]);
}
static lb_var *c_logsumexp(lb_graph *g, lb_var *const *x, const char *group)
{
    (void)group;
    return lb_logsumexp(g, x[0], 1, 0);
}
static lb_var *c_amax(lb_graph *g, lb_var *const *x, const char *group)
{
    (void)group;
    return lb_amax(g, x[0], 1, 0);
}
static lb_var *c_amin(lb_graph *g, lb_var *const *x, const char *group)
{
    (void)group;
    return lb_amin(g, x[0], 0, 0);
}
static lb_var *c_max(lb_graph *g, lb_var *const *x, const char *group)
{
    int64_t got[8], n = 0;
    int32_t *expect = fx_int(group, "indices", &n);
    lb_var *y = lb_max(g, x[0], 1, 0, got);
    CU_ASSERT_TRUE(expect && n == 6);
    for (int64_t i = 0; expect && y && i < n; i++)
        CU_ASSERT_EQUAL(got[i], expect[i]);
    free(expect);
    return y;
}
static lb_var *c_where(lb_graph *g, lb_var *const *x, const char *group)
{
    lb_tensor *cond = fx(group, "cond");
    lb_var *y = lb_where(g, cond, x[0], x[1]);
    lb_tensor_free(cond);
    return y;
}
/* cross_entropy / nll_loss with the group's options. */
static lb_var *class_loss(lb_graph *g, lb_var *const *x, const char *group)
{
    int64_t n = 0;
    int32_t *targets = fx_int(group, "targets", &n);
    char path[160];
    snprintf(path, sizeof path, "%s/weight", group);
    lb_tensor *weight = H5Lexists(fixture, path, H5P_DEFAULT) > 0 ? fx(group, "weight") : NULL;
    lb_loss_options o;
    lb_loss_options_default(&o);
    o.weight = weight;
    o.reduction = strstr(group, "_none") || strstr(group, "rank7") ? LB_REDUCTION_NONE
                  : strstr(group, "_sum")                          ? LB_REDUCTION_SUM
                                                                   : LB_REDUCTION_MEAN;
    o.label_smoothing = strstr(group, "smooth_weight_none") ? 0.3
                        : strstr(group, "smooth_weight")    ? 0.2
                        : strstr(group, "smooth") || strstr(group, "rank7") ? 0.1
                                                                            : 0.0;
    lb_var *y = strncmp(group, "nll_", 4) == 0 ? lb_nll_loss(g, x[0], targets, &o)
                                                : lb_cross_entropy_ex(g, x[0], targets, &o);
    free(targets);
    lb_tensor_free(weight);
    return y;
}
static lb_var *c_rotary(lb_graph *g, lb_var *const *x, const char *group)
{
    lb_tensor *c = fx(group, "cos"), *s = fx(group, "sin");
    lb_var *y = lb_rotary_embed(g, x[0], c, s, strstr(group, "interleaved") ? LB_ROTARY_INTERLEAVED : LB_ROTARY_HALVES);
    lb_tensor_free(c);
    lb_tensor_free(s);
    return y;
}
static lb_var *c_dropout_mask(lb_graph *g, lb_var *const *x, const char *group)
{
    lb_tensor *keep = fx(group, "keep");
    lb_var *y = lb_dropout_mask(g, x[0], keep, 0.4);
    lb_tensor_free(keep);
    return y;
}

/* Soft-capped attention with query positions past the last key, both paths. */
static lb_attn_mask softcap_mask(int32_t *qpos, int32_t *lengths)
{
    int64_t n = 0;
    int32_t *a = fx_int("attn_softcap", "qpos", &n), *b = fx_int("attn_softcap", "key_lengths", &n);
    for (int i = 0; a && i < 6; i++)
        qpos[i] = a[i];
    for (int i = 0; b && i < 2; i++)
        lengths[i] = b[i];
    free(a);
    free(b);
    return (lb_attn_mask){.window = 3, .key_lengths = lengths, .query_positions = qpos, .softcap = 30.0};
}
static lb_var *c_attn_fused(lb_graph *g, lb_var *const *x, const char *group)
{
    (void)group;
    static int32_t qpos[6], lengths[2];
    lb_attn_mask m = softcap_mask(qpos, lengths);
    return lb_attention_fused(g, x[0], x[1], x[2], &m, 0.5);
}
static lb_var *c_attn_materialized(lb_graph *g, lb_var *const *x, const char *group)
{
    (void)group;
    static int32_t qpos[6], lengths[2];
    lb_attn_mask m = softcap_mask(qpos, lengths);
    return lb_matmul(g, lb_masked_softmax(g, lb_matmul_t(g, x[0], 0, x[1], 1), &m, 0.5), x[2]);
}

static void test_attention_softcap(void)
{
    static const char *const qkv[] = {"q", "k", "v"};
    check_case("attn_softcap", 3, qkv, c_attn_fused);
    check_case("attn_softcap", 3, qkv, c_attn_materialized);
    /* A negative or non-finite cap is an error naming it. */
    lb_graph *g = lb_graph_new();
    lb_var *q = lb_input(g, lb_tensor_zeros(LB_FLOAT32, 3, (int64_t[]){1, 2, 4}), 1);
    lb_attn_mask m = {.softcap = -1};
    CU_ASSERT_PTR_NULL(lb_attention_fused(g, q, q, q, &m, 0.5));
    LB_ASSERT_ERROR(LB_ERR_VALUE, "attention", "softcap -1");
    CU_ASSERT_PTR_NULL(lb_masked_softmax(g, lb_matmul_t(g, q, 0, q, 1), &m, 0.5));
    LB_ASSERT_ERROR(LB_ERR_VALUE, "masked_softmax", "softcap -1");
    lb_graph_free(g);
}

static void test_gelu_tanh(void) { check_case("gelu_tanh", 1, X, c_gelu_tanh); }

static void test_logsumexp(void)
{
    check_case("logsumexp", 1, X, c_logsumexp);
    /* Every element -inf: -inf and a zero gradient, never NaN; +inf wins a row. */
    lb_graph *g = lb_graph_new();
    lb_var *x = lb_input(g, lb_tensor_from_doubles(LB_FLOAT32, 2, (int64_t[]){2, 3},
                                                   (double[]){-INFINITY, -INFINITY, -INFINITY, 1, INFINITY, 2}),
                         1);
    lb_var *y = lb_logsumexp(g, x, -1, 1);
    CU_ASSERT_TRUE(y && y->value->ndim == 2 && y->value->shape[1] == 1);
    CU_ASSERT_TRUE(y && lb_tensor_flat(y->value, 0) == -INFINITY && lb_tensor_flat(y->value, 1) == INFINITY);
    CU_ASSERT_EQUAL(lb_backward(g, lb_sum(g, y), NULL), LB_OK);
    LB_ASSERT_CLOSE(x->grad, ((double[]){0, 0, 0, 0, 1, 0}), 0, 0);
    lb_graph_free(g);
}

static void test_amax_amin_max(void)
{
    check_case("amax", 1, X, c_amax);
    check_case("amin", 1, X, c_amin);
    check_case("max", 1, X, c_max);
    /* Three tied maxima share the gradient; max gives it all to the first. */
    lb_graph *g = lb_graph_new();
    lb_var *x = lb_input(g, lb_tensor_from_doubles(LB_FLOAT64, 1, (int64_t[]){5}, (double[]){2, 5, 5, 1, 5}), 1);
    CU_ASSERT_EQUAL(lb_backward(g, lb_amax(g, x, 0, 0), NULL), LB_OK);
    double third = 1.0 / 3.0;
    LB_ASSERT_CLOSE(x->grad, ((double[]){0, third, third, 0, third}), 1e-15, 0);
    lb_graph_reset(g);
    x = lb_input(g, lb_tensor_from_doubles(LB_FLOAT64, 1, (int64_t[]){5}, (double[]){2, 5, 5, 1, 5}), 1);
    int64_t index = -1;
    CU_ASSERT_EQUAL(lb_backward(g, lb_max(g, x, -1, 0, &index), NULL), LB_OK);
    CU_ASSERT_EQUAL(index, 1);
    LB_ASSERT_CLOSE(x->grad, ((double[]){0, 1, 0, 0, 0}), 0, 0);
    lb_graph_free(g);
}

static void test_where(void)
{
    static const char *const ab[] = {"a", "b"};
    check_case("where", 2, ab, c_where);
}

static void test_cross_entropy_options(void)
{
    static const char *const logits[] = {"logits"};
    static const char *const cases[] = {"ce_mean", "ce_sum", "ce_none", "ce_weight_mean", "ce_weight_none",
                                        "ce_smooth_mean", "ce_smooth_weight_mean", "ce_smooth_weight_sum",
                                        "ce_smooth_weight_none", "ce_rank7"};
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++)
        check_case(cases[i], 1, logits, class_loss);
}

static void test_nll_loss_options(void)
{
    static const char *const lp[] = {"log_probs"};
    static const char *const cases[] = {"nll_mean", "nll_sum", "nll_none", "nll_weight_mean", "nll_weight_none"};
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++)
        check_case(cases[i], 1, lp, class_loss);
}

/* nll_loss(log_softmax(x)) = cross_entropy(x) for every option, smoothing included. */
static void test_nll_of_log_softmax_is_cross_entropy(void)
{
    static const int32_t targets[6] = {1, 4, -100, 0, 4, 2};
    lb_tensor *w = lb_tensor_from_doubles(LB_FLOAT64, 1, (int64_t[]){5}, (double[]){0.5, 1, 2, 1.5, 0.25});
    for (int red = 0; red < 3; red++) {
        lb_loss_options o;
        lb_loss_options_default(&o);
        o.weight = w;
        o.reduction = (lb_reduction)red;
        o.label_smoothing = 0.25;
        lb_graph *g = lb_graph_new();
        lb_var *x = lb_input(g, lb_test_random_tensor(LB_FLOAT64, 2, (int64_t[]){6, 5}, 11), 1);
        lb_var *a = lb_cross_entropy_ex(g, x, targets, &o), *b = lb_nll_loss(g, lb_log_softmax(g, x), targets, &o);
        LB_ASSERT_TENSORS_CLOSE(a->value, b->value, 1e-14, 1e-14);
        CU_ASSERT_EQUAL(lb_backward(g, lb_sum(g, a), NULL), LB_OK);
        lb_tensor *ga = lb_tensor_copy(x->grad, LB_FLOAT64);
        lb_graph_free(g);
        g = lb_graph_new();
        x = lb_input(g, lb_test_random_tensor(LB_FLOAT64, 2, (int64_t[]){6, 5}, 11), 1);
        CU_ASSERT_EQUAL(lb_backward(g, lb_sum(g, lb_nll_loss(g, lb_log_softmax(g, x), targets, &o)), NULL), LB_OK);
        LB_ASSERT_TENSORS_CLOSE(ga, x->grad, 1e-14, 1e-12);
        lb_tensor_free(ga);
        lb_graph_free(g);
    }
    lb_tensor_free(w);
}

/* Every combination of the loss options passes a float64 gradient check, for both losses
 * (weight or not, reduction mean/sum/none, smoothing 0 or 0.3, one ignored target). */
typedef struct loss_case {
    int nll;
    lb_loss_options o;
} loss_case;
static lb_var *loss_fn(lb_graph *g, lb_var *const *leaves, void *user)
{
    static const int32_t targets[6] = {1, 4, -100, 0, 4, 2};
    const loss_case *c = user;
    return c->nll ? lb_nll_loss(g, lb_log_softmax(g, leaves[0]), targets, &c->o)
                  : lb_cross_entropy_ex(g, leaves[0], targets, &c->o);
}
static void test_loss_options_gradcheck(void)
{
    lb_tensor *w = lb_tensor_from_doubles(LB_FLOAT64, 1, (int64_t[]){5}, (double[]){0.5, 1, 2, 1.5, 0.25});
    int checked = 0;
    for (int nll = 0; nll < 2; nll++)
        for (int red = 0; red < 3; red++)
            for (int weighted = 0; weighted < 2; weighted++)
                for (int smooth = 0; smooth < 2; smooth++) {
                    loss_case c = {nll, {0}};
                    lb_loss_options_default(&c.o);
                    c.o.reduction = (lb_reduction)red;
                    c.o.weight = weighted ? w : NULL;
                    c.o.label_smoothing = smooth ? 0.3 : 0.0;
                    lb_var *x = lb_param_new(lb_test_random_tensor(LB_FLOAT64, 2, (int64_t[]){6, 5}, 90 + checked), "x");
                    lb_status st = lb_gradcheck(loss_fn, &c, 1, &x, NULL, NULL);
                    CU_ASSERT_EQUAL(st, LB_OK);
                    if (st != LB_OK)
                        fprintf(stderr, "\n  %s reduction %d weight %d smoothing %d: %s\n", nll ? "nll" : "ce", red,
                                weighted, smooth, lb_last_error());
                    lb_param_free(x);
                    checked++;
                }
    CU_ASSERT_EQUAL(checked, 24);
    lb_tensor_free(w);
}

static void test_loss_option_errors(void)
{
    lb_graph *g = lb_graph_new();
    lb_var *x = lb_input(g, lb_tensor_zeros(LB_FLOAT64, 2, (int64_t[]){3, 4}), 1);
    static const int32_t targets[3] = {0, 1, 2};
    lb_loss_options o;
    lb_loss_options_default(&o);
    lb_tensor *w = lb_tensor_zeros(LB_FLOAT64, 1, (int64_t[]){5});
    o.weight = w;
    CU_ASSERT_PTR_NULL(lb_cross_entropy_ex(g, x, targets, &o));
    LB_ASSERT_ERROR(LB_ERR_SHAPE, "cross_entropy", "[5]");
    o.weight = NULL;
    o.label_smoothing = 1.5;
    CU_ASSERT_PTR_NULL(lb_nll_loss(g, x, targets, &o));
    LB_ASSERT_ERROR(LB_ERR_VALUE, "nll_loss", "label_smoothing");
    o.label_smoothing = 0;
    o.reduction = (lb_reduction)7;
    CU_ASSERT_PTR_NULL(lb_cross_entropy_ex(g, x, targets, &o));
    LB_ASSERT_ERROR(LB_ERR_VALUE, "cross_entropy", "reduction");
    /* Beyond LB_MAX_DIMS the error names the limit. */
    int64_t nine[9] = {1, 1, 1, 1, 1, 1, 1, 1, 2};
    CU_ASSERT_PTR_NULL(lb_tensor_zeros(LB_FLOAT64, 9, nine));
    LB_ASSERT_ERROR(LB_ERR_SHAPE, "LB_MAX_DIMS", "rank 9");
    lb_tensor_free(w);
    lb_graph_free(g);
}

static void test_rotary_layouts(void)
{
    check_case("rotary_halves", 1, X, c_rotary);
    check_case("rotary_interleaved", 1, X, c_rotary);
}

static void test_dropout_mask(void) { check_case("dropout_mask", 1, X, c_dropout_mask); }

int main(void)
{
    H5Eset_auto2(H5E_DEFAULT, NULL, NULL);
    fixture = H5Fopen(lb_fixture_path("ops.h5"), H5F_ACC_RDONLY, H5P_DEFAULT);
    if (fixture < 0) {
        fprintf(stderr, "cannot open %s: regenerate it with /usr/bin/python3 tests/fixtures/make_fixtures.py\n",
                lb_fixture_path("ops.h5"));
        return 1;
    }
    const lb_test_case cases[] = {
        {"gelu approximate=tanh = F.gelu", test_gelu_tanh},
        {"logsumexp = torch.logsumexp; -inf rows give -inf and zero gradients", test_logsumexp},
        {"amax/amin split ties evenly, max gives the gradient to its index", test_amax_amin_max},
        {"where = torch.where; an untaken inf stays out", test_where},
        {"cross_entropy: weight, reduction, label_smoothing, rank 7 = F.cross_entropy", test_cross_entropy_options},
        {"nll_loss: weight, reduction = F.nll_loss", test_nll_loss_options},
        {"nll_loss(log_softmax(x)) = cross_entropy(x) for every option", test_nll_of_log_softmax_is_cross_entropy},
        {"every loss option passes a float64 gradient check", test_loss_options_gradcheck},
        {"loss options and ranks beyond LB_MAX_DIMS give clear errors", test_loss_option_errors},
        {"rotary: halves (GPT-NeoX) and interleaved (GPT-J), partial, caller tables", test_rotary_layouts},
        {"dropout with the caller's mask = F.dropout's draw", test_dropout_mask},
        {"attention soft-capping, queries past the last key: fused = materialized = reference", test_attention_softcap},
        {NULL, NULL},
    };
    int rc = lb_test_main("torch ops", cases);
    H5Fclose(fixture);
    return rc;
}

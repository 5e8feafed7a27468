/* Agreement with PyTorch: LSTM, causal conv1d and multi-head attention against the
 * HDF5 fixtures written by tests/fixtures/make_fixtures.py (torch 1.13, float64).
 * Weights are loaded by their PyTorch names; outputs, final states, attention
 * weights and gradients are compared tensor by tensor, in float64 (tight) and
 * float32 (float32 tolerance). PyTorch is not needed to run this test. */
#include <hdf5.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "autograd/ops.h"
#include "layers/attention.h"
#include "layers/conv.h"
#include "layers/lstm.h"
#include "layers/positional.h"
#include "support.h"

/* ---- a small fixture reader (HDF5 C API) ---- */

static hid_t fixture_open(const char *name)
{
    H5Eset_auto2(H5E_DEFAULT, NULL, NULL); /* missing datasets are reported by the tests */
    const char *path = lb_fixture_path(name);
    hid_t f = H5Fopen(path, H5F_ACC_RDONLY, H5P_DEFAULT);
    if (f < 0)
        fprintf(stderr, "\n  cannot open %s: regenerate it with /usr/bin/python3 tests/fixtures/make_fixtures.py\n",
                path);
    return f;
}

/* Dataset `name` (a path such as "grad/input") as a new tensor of `dtype`; NULL if absent. */
static lb_tensor *fixture_read(hid_t f, const char *name, lb_dtype dtype) { return lb_test_h5_read((long long)f, name, dtype); }

/* Integer dataset of exactly n elements into out; returns 1 on success. */
static int fixture_read_int32(hid_t f, const char *name, int32_t *out, int64_t n)
{
    hid_t ds = H5Dopen2(f, name, H5P_DEFAULT);
    if (ds < 0)
        return 0;
    hid_t sp = H5Dget_space(ds);
    int ok = H5Sget_simple_extent_npoints(sp) == n &&
             H5Dread(ds, H5T_NATIVE_INT32, H5S_ALL, H5S_ALL, H5P_DEFAULT, out) >= 0;
    H5Sclose(sp);
    H5Dclose(ds);
    return ok;
}

/* Copies dataset `name` into an existing tensor of the same shape. */
static int fixture_load_into(hid_t f, const char *name, lb_tensor *dst)
{
    lb_tensor *t = fixture_read(f, name, dst->dtype);
    int ok = t && lb_tensor_same_shape(t, dst) && lb_tensor_copy_into(dst, t) == LB_OK;
    if (t && !ok) {
        char a[128], b[128];
        fprintf(stderr, "\n  fixture '%s' is %s, the parameter is %s\n", name, lb_tensor_describe(t, a, sizeof a),
                lb_tensor_describe(dst, b, sizeof b));
    }
    lb_tensor_free(t);
    return ok;
}

/* Asserts `got` matches dataset `name`; returns the largest absolute difference. */
static double expect_fixture(hid_t f, const char *name, const lb_tensor *got, double atol, double rtol)
{
    lb_tensor *want = fixture_read(f, name, LB_FLOAT64);
    CU_ASSERT_PTR_NOT_NULL(want);
    CU_ASSERT_PTR_NOT_NULL(got);
    if (!want || !got) {
        lb_tensor_free(want);
        return INFINITY;
    }
    CU_ASSERT_TRUE(lb_check_tensors_close(got, want, atol, rtol, name));
    double worst = lb_tensor_same_shape(got, want) ? 0 : INFINITY;
    for (int64_t i = 0; i < lb_tensor_numel(want) && worst < INFINITY; i++) {
        double d = fabs(lb_tensor_flat(got, i) - lb_tensor_flat(want, i));
        worst = d > worst || d != d ? d : worst;
    }
    lb_tensor_free(want);
    return worst;
}

static double tol_for(lb_dtype dt) { return dt == LB_FLOAT64 ? 1e-12 : 2e-5; }

/* ---- LSTM ---- */

static void check_lstm(lb_dtype dt, int full_loss)
{
    hid_t f = fixture_open("lstm.h5");
    CU_ASSERT_TRUE_FATAL(f >= 0);
    lb_params ps;
    lb_lstm l;
    lb_rng rng;
    lb_rng_seed(&rng, 1);
    lb_params_init(&ps);
    /* no prefix: our parameter names are exactly PyTorch's state_dict keys */
    CU_ASSERT_EQUAL_FATAL(lb_lstm_init(&l, &ps, NULL, 3, 4, 2, dt, &rng), LB_OK);
    for (int i = 0; i < ps.count; i++)
        CU_ASSERT_TRUE(fixture_load_into(f, ps.items[i]->name, ps.items[i]->value));
    lb_graph *g = lb_graph_new();
    lb_var *x = lb_input(g, fixture_read(f, "input", dt), 1);
    lb_var *h0 = lb_input(g, fixture_read(f, "h0", dt), 1);
    lb_var *c0 = lb_input(g, fixture_read(f, "c0", dt), 1);
    lb_tensor *R = fixture_read(f, "R", dt);
    lb_var *hn = NULL, *cn = NULL;
    lb_var *out = lb_lstm_forward(g, &l, x, h0, c0, full_loss ? &hn : NULL, full_loss ? &cn : NULL);
    CU_ASSERT_PTR_NOT_NULL_FATAL(out);
    const double tol = tol_for(dt);
    double worst = expect_fixture(f, "output", out->value, tol, tol);
    const char *gdir = "grad_output_only";
    if (full_loss) {
        double w2 = expect_fixture(f, "h_n", hn->value, tol, tol);
        double w3 = expect_fixture(f, "c_n", cn->value, tol, tol);
        worst = fmax(worst, fmax(w2, w3));
        /* loss = Σ out*R + Σ h_n*R_h + Σ c_n*R_c */
        lb_var *Rv = lb_input(g, lb_tensor_copy(R, dt), 0);
        lb_var *Rh = lb_input(g, fixture_read(f, "R_h", dt), 0), *Rc = lb_input(g, fixture_read(f, "R_c", dt), 0);
        lb_var *loss = lb_add(g, lb_add(g, lb_sum(g, lb_mul(g, out, Rv)), lb_sum(g, lb_mul(g, hn, Rh))),
                              lb_sum(g, lb_mul(g, cn, Rc)));
        CU_ASSERT_EQUAL_FATAL(lb_backward(g, loss, NULL), LB_OK);
        gdir = "grad";
    } else {
        CU_ASSERT_EQUAL_FATAL(lb_backward(g, out, R), LB_OK); /* d Σ out*R / d out = R */
    }
    char name[128];
    const struct {
        const char *name;
        lb_var *v;
    } leaves[] = {{"input", x}, {"h0", h0}, {"c0", c0}};
    for (int i = 0; i < 3; i++) {
        snprintf(name, sizeof name, "%s/%s", gdir, leaves[i].name);
        worst = fmax(worst, expect_fixture(f, name, leaves[i].v->grad, tol, tol));
    }
    for (int i = 0; i < ps.count; i++) {
        snprintf(name, sizeof name, "%s/%s", gdir, ps.items[i]->name);
        worst = fmax(worst, expect_fixture(f, name, ps.items[i]->grad, tol, tol));
    }
    printf("\n    lstm %s (%s): max |lookback - torch| = %.3g", lb_dtype_name(dt),
           full_loss ? "output, h_n, c_n" : "output only", worst);
    lb_tensor_free(R);
    lb_graph_free(g);
    lb_params_free(&ps);
    H5Fclose(f);
}

static void test_lstm_float64(void)
{
    check_lstm(LB_FLOAT64, 1);
    check_lstm(LB_FLOAT64, 0);
}

static void test_lstm_float32(void)
{
    check_lstm(LB_FLOAT32, 1);
    check_lstm(LB_FLOAT32, 0);
}

/* ---- causal conv1d ---- */

static void check_conv(lb_dtype dt, const char *group)
{
    hid_t f = fixture_open("conv.h5");
    CU_ASSERT_TRUE_FATAL(f >= 0);
    char name[128];
    snprintf(name, sizeof name, "%s/weight", group);
    lb_tensor *w = fixture_read(f, name, dt);
    CU_ASSERT_PTR_NOT_NULL_FATAL(w);
    int64_t k = 0, d = 0;
    snprintf(name, sizeof name, "/%s", group);
    hid_t grp = H5Gopen2(f, name, H5P_DEFAULT);
    hid_t ak = H5Aopen(grp, "kernel_size", H5P_DEFAULT), ad = H5Aopen(grp, "dilation", H5P_DEFAULT);
    CU_ASSERT_TRUE(H5Aread(ak, H5T_NATIVE_INT64, &k) >= 0);
    CU_ASSERT_TRUE(H5Aread(ad, H5T_NATIVE_INT64, &d) >= 0);
    H5Aclose(ak);
    H5Aclose(ad);
    H5Gclose(grp);
    CU_ASSERT_EQUAL(k, w->shape[2]);
    lb_params ps;
    lb_conv1d c;
    lb_rng rng;
    lb_rng_seed(&rng, 1);
    lb_params_init(&ps);
    CU_ASSERT_EQUAL_FATAL(lb_conv1d_init(&c, &ps, group, w->shape[1], w->shape[0], k, d, dt, &rng), LB_OK);
    for (int i = 0; i < ps.count; i++) /* "<group>.weight" -> dataset "<group>/weight" */
    {
        snprintf(name, sizeof name, "%s/%s", group, strchr(ps.items[i]->name, '.') + 1);
        CU_ASSERT_TRUE(fixture_load_into(f, name, ps.items[i]->value));
    }
    lb_graph *g = lb_graph_new();
    snprintf(name, sizeof name, "%s/input", group);
    lb_var *x = lb_input(g, fixture_read(f, name, dt), 1);
    snprintf(name, sizeof name, "%s/R", group);
    lb_tensor *R = fixture_read(f, name, dt);
    lb_var *y = lb_conv1d_forward(g, &c, x);
    CU_ASSERT_PTR_NOT_NULL_FATAL(y);
    const double tol = tol_for(dt);
    snprintf(name, sizeof name, "%s/output", group);
    double worst = expect_fixture(f, name, y->value, tol, tol);
    CU_ASSERT_EQUAL_FATAL(lb_backward(g, y, R), LB_OK);
    snprintf(name, sizeof name, "%s/grad/input", group);
    worst = fmax(worst, expect_fixture(f, name, x->grad, tol, tol));
    snprintf(name, sizeof name, "%s/grad/weight", group);
    worst = fmax(worst, expect_fixture(f, name, c.weight->grad, tol, tol));
    snprintf(name, sizeof name, "%s/grad/bias", group);
    worst = fmax(worst, expect_fixture(f, name, c.bias->grad, tol, tol));
    printf("\n    conv1d %s (%s, K %lld, dilation %lld): max |lookback - torch| = %.3g", lb_dtype_name(dt), group,
           (long long)k, (long long)d, worst);
    lb_tensor_free(w);
    lb_tensor_free(R);
    lb_graph_free(g);
    lb_params_free(&ps);
    H5Fclose(f);
}

static void test_conv(void)
{
    check_conv(LB_FLOAT64, "main");
    check_conv(LB_FLOAT64, "long");
    check_conv(LB_FLOAT32, "main");
    check_conv(LB_FLOAT32, "long");
}

/* ---- multi-head attention ---- */

/* dst [D, D] = src[row0 : row0 + D, :]ᵀ (PyTorch computes x Wᵀ, lookback x W). */
static void load_transposed(lb_tensor *dst, const lb_tensor *src, int64_t row0)
{
    const int64_t D = dst->shape[0];
    for (int64_t i = 0; i < D; i++)
        for (int64_t j = 0; j < D; j++) {
            int64_t is[2] = {row0 + j, i}, id[2] = {i, j};
            lb_tensor_set(dst, id, lb_tensor_get(src, is));
        }
}

static void check_mha(lb_dtype dt, int mask_form)
{
    hid_t f = fixture_open("mha.h5");
    CU_ASSERT_TRUE_FATAL(f >= 0);
    lb_tensor *in_proj = fixture_read(f, "in_proj_weight", LB_FLOAT64);
    lb_tensor *out_proj = fixture_read(f, "out_proj.weight", LB_FLOAT64);
    CU_ASSERT_PTR_NOT_NULL_FATAL(in_proj);
    CU_ASSERT_PTR_NOT_NULL_FATAL(out_proj);
    const int64_t D = out_proj->shape[0];
    lb_params ps;
    lb_mha a;
    lb_rng rng;
    lb_rng_seed(&rng, 1);
    lb_params_init(&ps);
    CU_ASSERT_EQUAL_FATAL(lb_mha_init(&a, &ps, "mha", D, 2, 0, 0, dt, &rng), LB_OK);
    load_transposed(a.w_q->value, in_proj, 0);
    load_transposed(a.w_k->value, in_proj, D);
    load_transposed(a.w_v->value, in_proj, 2 * D);
    load_transposed(a.w_o->value, out_proj, 0);
    lb_graph *g = lb_graph_new();
    lb_var *x = lb_input(g, fixture_read(f, "input", dt), 1);
    lb_tensor *R = fixture_read(f, "R", dt);
    const int64_t B = x->value->shape[0], T = x->value->shape[1];
    int32_t key_lengths[8];
    CU_ASSERT_TRUE_FATAL(B <= 8 && fixture_read_int32(f, "key_lengths", key_lengths, B));
    lb_attn_mask mask;
    memset(&mask, 0, sizeof mask);
    lb_tensor *allowed = NULL;
    if (mask_form == 0) { /* causal flag + key lengths */
        mask.causal = 1;
        mask.key_lengths = key_lengths;
    } else { /* the same mask as an explicit boolean [B, 1, T, T] (1 = may attend) */
        lb_tensor *al = fixture_read(f, "allowed", dt);
        int64_t shape[4] = {B, 1, T, T};
        allowed = lb_tensor_reshape(al, 4, shape);
        lb_tensor_free(al);
        mask.allowed = allowed;
    }
    lb_var *weights = NULL;
    lb_var *y = lb_mha_forward(g, &a, x, &mask, NULL, &weights);
    CU_ASSERT_PTR_NOT_NULL_FATAL(y);
    CU_ASSERT_PTR_NOT_NULL_FATAL(weights);
    const double tol = tol_for(dt);
    double worst = expect_fixture(f, "output", y->value, tol, tol);
    worst = fmax(worst, expect_fixture(f, "attn_weights", weights->value, tol, tol));
    CU_ASSERT_EQUAL_FATAL(lb_backward(g, y, R), LB_OK);
    worst = fmax(worst, expect_fixture(f, "grad/input", x->grad, tol, tol));
    /* grad in_proj_weight [3D, D] = [dW_Qᵀ; dW_Kᵀ; dW_Vᵀ], grad out_proj.weight = dW_Oᵀ */
    int64_t s_in[2] = {3 * D, D}, s_out[2] = {D, D};
    lb_tensor *g_in = lb_tensor_zeros(LB_FLOAT64, 2, s_in), *g_out = lb_tensor_zeros(LB_FLOAT64, 2, s_out);
    lb_var *proj[3] = {a.w_q, a.w_k, a.w_v};
    for (int p = 0; p < 3; p++) {
        CU_ASSERT_PTR_NOT_NULL_FATAL(proj[p]->grad);
        for (int64_t i = 0; i < D; i++)
            for (int64_t j = 0; j < D; j++) {
                int64_t is[2] = {i, j}, id[2] = {p * D + j, i};
                lb_tensor_set(g_in, id, lb_tensor_get(proj[p]->grad, is));
            }
    }
    CU_ASSERT_PTR_NOT_NULL_FATAL(a.w_o->grad);
    load_transposed(g_out, a.w_o->grad, 0);
    worst = fmax(worst, expect_fixture(f, "grad/in_proj_weight", g_in, tol, tol));
    worst = fmax(worst, expect_fixture(f, "grad/out_proj.weight", g_out, tol, tol));
    printf("\n    mha %s (%s): max |lookback - torch| = %.3g", lb_dtype_name(dt),
           mask_form ? "allowed [B,1,T,T]" : "causal + key_lengths", worst);
    lb_tensor_free(g_in);
    lb_tensor_free(g_out);
    lb_tensor_free(allowed);
    lb_tensor_free(in_proj);
    lb_tensor_free(out_proj);
    lb_tensor_free(R);
    lb_graph_free(g);
    lb_params_free(&ps);
    H5Fclose(f);
}

static void test_mha(void)
{
    check_mha(LB_FLOAT64, 0);
    check_mha(LB_FLOAT64, 1);
    check_mha(LB_FLOAT32, 0);
    check_mha(LB_FLOAT32, 1);
}

/* ---- grouped-query attention with ALiBi ---- */

/* Dataset "<group>/<name>" of f: read as a tensor of dtype, or compared with `got`. */
static lb_tensor *group_read(hid_t f, const char *group, const char *name, lb_dtype dtype)
{
    char path[128];
    snprintf(path, sizeof path, "%s/%s", group, name);
    return fixture_read(f, path, dtype);
}

static double group_expect(hid_t f, const char *group, const char *name, const lb_tensor *got, double tol)
{
    char path[128];
    snprintf(path, sizeof path, "%s/%s", group, name);
    return expect_fixture(f, path, got, tol, tol);
}

/* lb_mha_init_gqa with ALiBi on group `group` of gqa_alibi.h5 (6 query heads over 2
 * key/value heads, causal or not, key lengths 7, 4, 0): output and the gradients of the
 * input and of the four projections, in dtype dt. */
static void check_gqa_alibi(lb_dtype dt, const char *group)
{
    hid_t f = fixture_open("gqa_alibi.h5");
    CU_ASSERT_TRUE_FATAL(f >= 0);
    lb_params ps;
    lb_mha a;
    lb_params_init(&ps);
    CU_ASSERT_EQUAL_FATAL(lb_mha_init_gqa(&a, &ps, "mha", 12, 6, 2, 0, 0, dt, NULL), LB_OK);
    a.alibi = 1;
    lb_var *w[4] = {a.w_q, a.w_k, a.w_v, a.w_o};
    static const char *wn[4] = {"w_q", "w_k", "w_v", "w_o"}, *gn[4] = {"grad/w_q", "grad/w_k", "grad/w_v", "grad/w_o"};
    for (int i = 0; i < 4; i++) {
        lb_tensor *t = group_read(f, group, wn[i], dt);
        CU_ASSERT_TRUE_FATAL(t && lb_tensor_same_shape(t, w[i]->value) && lb_tensor_copy_into(w[i]->value, t) == LB_OK);
        lb_tensor_free(t);
    }
    lb_graph *g = lb_graph_new();
    lb_var *x = lb_input(g, group_read(f, group, "input", dt), 1);
    lb_tensor *R = group_read(f, group, "R", dt);
    CU_ASSERT_PTR_NOT_NULL_FATAL(x);
    CU_ASSERT_PTR_NOT_NULL_FATAL(R);
    int32_t key_lengths[3];
    char path[128];
    snprintf(path, sizeof path, "%s/key_lengths", group);
    CU_ASSERT_TRUE_FATAL(fixture_read_int32(f, path, key_lengths, 3));
    lb_attn_mask mask = {.causal = strcmp(group, "causal") == 0, .key_lengths = key_lengths};
    lb_var *y = lb_mha_forward(g, &a, x, &mask, NULL, NULL);
    CU_ASSERT_PTR_NOT_NULL_FATAL(y);
    const double tol = tol_for(dt);
    double worst = group_expect(f, group, "output", y->value, tol);
    CU_ASSERT_EQUAL_FATAL(lb_backward(g, y, R), LB_OK);
    worst = fmax(worst, group_expect(f, group, "grad/input", x->grad, tol));
    for (int i = 0; i < 4; i++)
        worst = fmax(worst, group_expect(f, group, gn[i], w[i]->grad, tol));
    printf("\n    grouped-query attention with ALiBi, %s, %s: max |lookback - torch| = %.3g", group, lb_dtype_name(dt),
           worst);
    lb_tensor_free(R);
    lb_graph_free(g);
    lb_params_free(&ps);
    H5Fclose(f);
}

static void test_gqa_alibi(void)
{
    hid_t f = fixture_open("gqa_alibi.h5");
    CU_ASSERT_TRUE_FATAL(f >= 0);
    double slopes[6];
    CU_ASSERT_EQUAL(lb_alibi_slopes(6, slopes), LB_OK); /* = the authors' get_slopes(6) */
    int64_t s[1] = {6};
    lb_tensor *mine = lb_tensor_from_doubles(LB_FLOAT64, 1, s, slopes);
    expect_fixture(f, "slopes", mine, 1e-15, 1e-15);
    lb_tensor_free(mine);
    H5Fclose(f);
    for (int dt = 0; dt < 2; dt++) {
        check_gqa_alibi(dt ? LB_FLOAT32 : LB_FLOAT64, "causal");
        check_gqa_alibi(dt ? LB_FLOAT32 : LB_FLOAT64, "bidirectional");
    }
}

int main(void)
{
    const lb_test_case cases[] = {
        {"torch.nn.LSTM float64: output, h_n, c_n and every gradient", test_lstm_float64},
        {"torch.nn.LSTM float32 (float32 tolerance)", test_lstm_float32},
        {"causal dilated torch.nn.Conv1d, float64 and float32", test_conv},
        {"torch.nn.MultiheadAttention, causal + padding, weights per head", test_mha},
        {"grouped-query attention (6 heads over 2) with ALiBi, causal and not, a fully padded item; slopes = the "
         "authors' get_slopes; float64 and float32",
         test_gqa_alibi},
        {NULL, NULL},
    };
    return lb_test_main("torch_fixtures", cases);
}

/* The blocks of today's small models (RMSNorm, SwiGLU, GeGLU, post-norm) in the library:
 * against PyTorch (tests/fixtures/blocks.h5, written by tests/fixtures/make_fixtures.py)
 * in float64 and float32, values and gradients; the modules' parameters, names and
 * counts; the same bits at 1 and 2 threads for a whole Llama-style model's forward and
 * backward. PyTorch is not needed to run this test. */
#include <hdf5.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "autograd/ops.h"
#include "layers/ffn.h"
#include "layers/model.h"
#include "layers/norm.h"
#include "support.h"
#include "tensor/threads.h"

static hid_t fixture;

static lb_tensor *fx(const char *group, const char *name, lb_dtype dtype)
{
    char path[160];
    snprintf(path, sizeof path, "%s/%s", group, name);
    return lb_test_h5_read((long long)fixture, path, dtype);
}

typedef lb_var *(*case_fn)(lb_graph *g, lb_var *const *x);

/* Runs a case in `dtype`: inputs names[0..n) as leaves; out and the gradients of
 * sum(out * R) against PyTorch's within atol = rtol = tol. */
static void check_case(const char *group, int n, const char *const *names, case_fn fn, lb_dtype dtype, double tol)
{
    lb_graph *g = lb_graph_new();
    lb_var *x[4];
    for (int i = 0; i < n; i++)
        x[i] = lb_input(g, fx(group, names[i], dtype), 1);
    lb_var *y = fn(g, x);
    CU_ASSERT_PTR_NOT_NULL_FATAL(y);
    lb_tensor *out = fx(group, "out", LB_FLOAT64), *r = fx(group, "R", dtype);
    lb_tensor *y64 = lb_tensor_copy(y->value, LB_FLOAT64);
    char what[96];
    snprintf(what, sizeof what, "%s %s output", group, lb_dtype_name(dtype));
    CU_ASSERT_TRUE(lb_check_tensors_close(y64, out, tol, tol, what));
    CU_ASSERT_EQUAL(lb_backward(g, y, r), LB_OK);
    for (int i = 0; i < n; i++) {
        char gname[64];
        snprintf(gname, sizeof gname, "grad/%s", names[i]);
        lb_tensor *expect = fx(group, gname, LB_FLOAT64), *got = lb_tensor_copy(x[i]->grad, LB_FLOAT64);
        snprintf(what, sizeof what, "%s %s gradient of %s", group, lb_dtype_name(dtype), names[i]);
        CU_ASSERT_TRUE(lb_check_tensors_close(got, expect, tol, tol, what));
        lb_tensor_free(expect);
        lb_tensor_free(got);
    }
    lb_tensor_free(y64);
    lb_tensor_free(out);
    lb_tensor_free(r);
    lb_graph_free(g);
}

static lb_var *c_rms_norm(lb_graph *g, lb_var *const *x) { return lb_rms_norm(g, x[0], x[1], 1e-5); }
static lb_var *c_swiglu(lb_graph *g, lb_var *const *x) { return lb_swiglu(g, x[0]); }
static lb_var *c_geglu(lb_graph *g, lb_var *const *x) { return lb_geglu(g, x[0]); }
static lb_var *c_ffn_swiglu(lb_graph *g, lb_var *const *x)
{
    return lb_matmul(g, lb_swiglu(g, lb_matmul(g, x[0], x[1])), x[2]);
}

static void test_against_pytorch(void)
{
    static const char *const xw[] = {"x", "weight"}, *const x1[] = {"x"}, *const ffn[] = {"x", "w1", "w2"};
    for (int dt = LB_FLOAT32; dt <= LB_FLOAT64; dt++) {
        double tol = dt == LB_FLOAT64 ? 1e-10 : 2e-5;
        check_case("rms_norm", 2, xw, c_rms_norm, (lb_dtype)dt, tol);
        check_case("swiglu", 1, x1, c_swiglu, (lb_dtype)dt, tol);
        check_case("geglu", 1, x1, c_geglu, (lb_dtype)dt, tol);
        check_case("ffn_swiglu", 3, ffn, c_ffn_swiglu, (lb_dtype)dt, tol);
    }
}

/* Norm and feed-forward modules: parameter names, shapes and counts per kind. */
static void test_module_parameters(void)
{
    lb_params ps;
    lb_params_init(&ps);
    lb_rng rng;
    lb_rng_seed(&rng, 5);
    lb_norm rms, ln;
    CU_ASSERT_EQUAL(lb_norm_init_kind(&rms, &ps, "rms", 6, LB_NORM_RMSNORM, 1e-5, 1, LB_FLOAT64), LB_OK);
    CU_ASSERT_PTR_NULL(rms.bias); /* RMSNorm has no bias, whatever `bias` says */
    CU_ASSERT_EQUAL(lb_norm_init_kind(&ln, &ps, "ln", 6, LB_NORM_LAYERNORM, 1e-5, 1, LB_FLOAT64), LB_OK);
    CU_ASSERT_PTR_NOT_NULL(ln.bias);
    lb_ffn gated, plain;
    CU_ASSERT_EQUAL(lb_ffn_init_kind(&gated, &ps, "g", 6, 10, LB_FFN_SWIGLU, 0, 0, LB_FLOAT64, &rng), LB_OK);
    CU_ASSERT_EQUAL(lb_ffn_init_kind(&plain, &ps, "p", 6, 10, LB_FFN_GELU, 0, 1, LB_FLOAT64, &rng), LB_OK);
    CU_ASSERT_EQUAL(gated.fc1.weight->value->shape[1], 20);
    CU_ASSERT_EQUAL(gated.fc2.weight->value->shape[0], 10);
    CU_ASSERT_PTR_NULL(gated.fc1.bias);
    /* 6 + 12 (norms) + 3 * 6 * 10 (gated) + 2 * 6 * 10 + 10 + 6 (gelu with biases) */
    CU_ASSERT_EQUAL(lb_params_numel(&ps), 6 + 12 + 180 + 136);
    CU_ASSERT_EQUAL(lb_ffn_init_kind(&plain, &ps, "bad", 6, 10, (lb_ffn_kind)7, 0, 1, LB_FLOAT64, &rng), LB_ERR_VALUE);
    LB_ASSERT_ERROR(LB_ERR_VALUE, "feed-forward 'bad'", "gelu, swiglu or geglu");
    lb_params_free(&ps);
    lb_norm_kind nk;
    lb_ffn_kind fk;
    lb_norm_position np;
    CU_ASSERT_EQUAL(lb_norm_kind_parse("rmsnorm", &nk), LB_OK);
    CU_ASSERT_EQUAL(nk, LB_NORM_RMSNORM);
    CU_ASSERT_EQUAL(lb_ffn_kind_parse("geglu", &fk), LB_OK);
    CU_ASSERT_EQUAL(fk, LB_FFN_GEGLU);
    CU_ASSERT_EQUAL(lb_norm_position_parse("post", &np), LB_OK);
    CU_ASSERT_EQUAL(np, LB_NORM_POST);
    CU_ASSERT_EQUAL(lb_ffn_kind_parse("relu", &fk), LB_ERR_VALUE);
    CU_ASSERT_STRING_EQUAL(lb_norm_kind_name(LB_NORM_LAYERNORM), "layernorm");
    CU_ASSERT_STRING_EQUAL(lb_norm_position_name(LB_NORM_PRE), "pre");
    CU_ASSERT_STRING_EQUAL(lb_ffn_kind_name(LB_FFN_SWIGLU), "swiglu");
}

/* A Llama-style model (rmsnorm, swiglu, rotary, no biases, tied) and a post-norm one:
 * the names of their parameters and their count. */
static lb_model_config lm(lb_dtype dtype)
{
    lb_model_config c;
    lb_model_config_default(LB_MODEL_TRANSFORMER, &c);
    c.dtype = dtype;
    c.vocab_size = c.num_classes = 13;
    c.head = LB_HEAD_EVERY;
    c.d_model = 16;
    c.n_heads = 2;
    c.d_ff = lb_ffn_gated_width(16); /* 48 */
    c.pos = LB_POS_ROTARY;
    c.norm = LB_NORM_RMSNORM;
    c.ffn = LB_FFN_SWIGLU;
    c.bias = 0;
    c.tie_embeddings = 1;
    return c;
}

static void test_model_parameters(void)
{
    lb_model_config c = lm(LB_FLOAT32);
    CU_ASSERT_EQUAL(c.d_ff, 48);
    lb_model *m = lb_model_new(&c);
    CU_ASSERT_PTR_NOT_NULL_FATAL(m);
    lb_params *ps = lb_model_params(m);
    /* embedding 13 x 16; per block 2 norms of 16, attention 4 x 16 x 16, fc1 16 x 96,
     * fc2 48 x 16; ln_f 16; the head is the embedding */
    CU_ASSERT_EQUAL(lb_params_numel(ps), 13 * 16 + 2 * (2 * 16 + 4 * 256 + 16 * 96 + 48 * 16) + 16);
    for (int i = 0; i < ps->count; i++)
        CU_ASSERT_PTR_NULL(strstr(ps->items[i]->name, "bias"));
    lb_model_free(m);
    c.norm_position = LB_NORM_POST;
    c.norm = LB_NORM_LAYERNORM;
    c.bias = 1;
    m = lb_model_new(&c);
    CU_ASSERT_PTR_NOT_NULL_FATAL(m);
    ps = lb_model_params(m);
    int ln_f = 0, ln_bias = 0;
    for (int i = 0; i < ps->count; i++) {
        ln_f += strstr(ps->items[i]->name, "ln_f") != NULL;
        ln_bias += strstr(ps->items[i]->name, "ln1.bias") != NULL;
    }
    CU_ASSERT_EQUAL(ln_f, 0); /* post-norm: no final norm */
    CU_ASSERT_EQUAL(ln_bias, 2);
    lb_model_free(m);
}

/* Forward and backward of a batch; the loss value and every gradient into one buffer. */
static double *loss_and_grads(lb_model *m, int threads, int64_t *count)
{
    lb_set_num_threads(threads);
    enum { B = 3, T = 37 };
    int32_t tokens[B * T], lengths[B] = {T, 20, 31}, targets[B * T];
    for (int i = 0; i < B * T; i++) {
        tokens[i] = (i * 7 + 3) % 13;
        targets[i] = (i * 5 + 1) % 13;
    }
    lb_graph *g = lb_graph_new();
    lb_model_input in = {B, T, tokens, NULL, lengths};
    lb_var *loss = lb_cross_entropy(g, lb_model_forward(g, m, &in, 0, NULL, NULL), targets, -100);
    CU_ASSERT_PTR_NOT_NULL_FATAL(loss);
    lb_params *ps = lb_model_params(m);
    lb_params_zero_grad(ps);
    CU_ASSERT_EQUAL(lb_backward(g, loss, NULL), LB_OK);
    int64_t n = 1 + lb_params_numel(ps), k = 0;
    double *out = malloc((size_t)n * sizeof *out);
    out[k++] = lb_tensor_flat(loss->value, 0);
    for (int i = 0; i < ps->count; i++)
        for (int64_t j = 0; j < lb_tensor_numel(ps->items[i]->value); j++)
            out[k++] = ps->items[i]->grad ? lb_tensor_flat(ps->items[i]->grad, j) : 0;
    lb_graph_free(g);
    *count = n;
    return out;
}

static void test_same_bits_any_threads(void)
{
    for (int variant = 0; variant < 2; variant++)
        for (int dt = LB_FLOAT32; dt <= LB_FLOAT64; dt++) {
            lb_model_config c = lm((lb_dtype)dt);
            c.d_model = 64; /* rows wide enough for the threaded loops to split */
            c.d_ff = lb_ffn_gated_width(64);
            if (variant == 1) {
                c.norm_position = LB_NORM_POST;
                c.ffn = LB_FFN_GEGLU;
            }
            lb_model *m = lb_model_new(&c);
            CU_ASSERT_PTR_NOT_NULL_FATAL(m);
            lb_test_randomize_params(lb_model_params(m), 9, -0.3, 0.3);
            int64_t n1, n2;
            double *a = loss_and_grads(m, 1, &n1), *b = loss_and_grads(m, 2, &n2);
            CU_ASSERT_EQUAL_FATAL(n1, n2);
            CU_ASSERT_EQUAL(memcmp(a, b, (size_t)n1 * sizeof *a), 0);
            double nonzero = 0;
            for (int64_t i = 1; i < n1; i++)
                nonzero += a[i] != 0;
            CU_ASSERT_TRUE(nonzero > 0.9 * (double)(n1 - 1));
            free(a);
            free(b);
            lb_model_free(m);
        }
    lb_set_num_threads(0);
}

int main(void)
{
    H5Eset_auto2(H5E_DEFAULT, NULL, NULL);
    fixture = H5Fopen(lb_fixture_path("blocks.h5"), H5F_ACC_RDONLY, H5P_DEFAULT);
    if (fixture < 0) {
        fprintf(stderr, "cannot open %s: regenerate it with /usr/bin/python3 tests/fixtures/make_fixtures.py\n",
                lb_fixture_path("blocks.h5"));
        return 1;
    }
    const lb_test_case cases[] = {
        {"rms_norm, swiglu, geglu, a SwiGLU layer = PyTorch, float64 and float32", test_against_pytorch},
        {"norm and feed-forward modules: names, shapes, counts, kinds", test_module_parameters},
        {"Llama-style and post-norm models: parameters and their count", test_model_parameters},
        {"forward and backward: the same bits at 1 and 2 threads", test_same_bits_any_threads},
        {NULL, NULL},
    };
    int rc = lb_test_main("blocks", cases);
    H5Fclose(fixture);
    return rc;
}

/* Causal dilated 1-D convolution (layers/conv.h) and the residual conv stack:
 * parameters, values against the direct formula, causality, gradient checks.
 * PyTorch agreement is in test_torch_fixtures.c. */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "autograd/gradcheck.h"
#include "autograd/ops.h"
#include "layers/conv.h"
#include "support.h"

static void make_conv(lb_conv1d *c, lb_params *ps, int64_t ci, int64_t co, int64_t k, int64_t d, lb_dtype dt,
                      uint64_t seed)
{
    lb_rng rng;
    lb_rng_seed(&rng, seed);
    lb_params_init(ps);
    CU_ASSERT_EQUAL_FATAL(lb_conv1d_init(c, ps, "conv", ci, co, k, d, dt, &rng), LB_OK);
}

/* y[b,t,o] = bias[o] + Σ_j Σ_c W[o,c,j] x[b, t - d(K-1-j), c], zeros before t = 0. */
static void direct_conv(const lb_conv1d *c, const lb_tensor *x, double *out)
{
    const int64_t B = x->shape[0], T = x->shape[1], Ci = c->in_channels, Co = c->out_channels;
    const int64_t K = c->kernel_size, d = c->dilation;
    for (int64_t b = 0; b < B; b++)
        for (int64_t t = 0; t < T; t++)
            for (int64_t o = 0; o < Co; o++) {
                double s = lb_tensor_flat(c->bias->value, o);
                for (int64_t j = 0; j < K; j++) {
                    int64_t src = t - d * (K - 1 - j);
                    if (src < 0)
                        continue;
                    for (int64_t ch = 0; ch < Ci; ch++) {
                        int64_t iw[3] = {o, ch, j}, ix[3] = {b, src, ch};
                        s += lb_tensor_get(c->weight->value, iw) * lb_tensor_get(x, ix);
                    }
                }
                out[(b * T + t) * Co + o] = s;
            }
}

static void test_init(void)
{
    lb_params ps;
    lb_conv1d c;
    make_conv(&c, &ps, 3, 5, 4, 2, LB_FLOAT32, 1);
    CU_ASSERT_EQUAL_FATAL(ps.count, 2);
    CU_ASSERT_STRING_EQUAL(ps.items[0]->name, "conv.weight");
    CU_ASSERT_STRING_EQUAL(ps.items[1]->name, "conv.bias");
    CU_ASSERT_EQUAL(c.weight->value->ndim, 3);
    CU_ASSERT_EQUAL(c.weight->value->shape[0], 5); /* [C_out, C_in, K], PyTorch's layout */
    CU_ASSERT_EQUAL(c.weight->value->shape[1], 3);
    CU_ASSERT_EQUAL(c.weight->value->shape[2], 4);
    CU_ASSERT_EQUAL(c.bias->value->shape[0], 5);
    const double bound = 1 / sqrt(12.0); /* 1/sqrt(C_in K) */
    for (int p = 0; p < 2; p++) {
        double lo = 1, hi = -1;
        for (int64_t i = 0; i < lb_tensor_numel(ps.items[p]->value); i++) {
            double v = lb_tensor_flat(ps.items[p]->value, i);
            lo = v < lo ? v : lo;
            hi = v > hi ? v : hi;
        }
        CU_ASSERT_TRUE(lo >= -bound && hi < bound);
        CU_ASSERT_TRUE(hi - lo > 0.5 * bound);
    }
    lb_conv1d c2;
    lb_rng rng;
    lb_rng_seed(&rng, 2);
    CU_ASSERT_EQUAL(lb_conv1d_init(&c2, &ps, "conv", 3, 5, 4, 2, LB_FLOAT32, &rng), LB_ERR_VALUE);
    CU_ASSERT_PTR_NOT_NULL(strstr(lb_last_error(), "conv.weight"));
    CU_ASSERT_EQUAL(lb_conv1d_init(&c2, &ps, "c2", 3, 5, 0, 1, LB_FLOAT32, &rng), LB_ERR_VALUE);
    CU_ASSERT_EQUAL(lb_conv1d_init(&c2, &ps, "c2", 3, 5, 2, 0, LB_FLOAT32, &rng), LB_ERR_VALUE);
    lb_params_free(&ps);
}

static void test_forward_matches_formula(void)
{
    /* kernel 3, dilation 2, C_in 3 != C_out 2, and a receptive field (5) shorter than T;
     * then one longer than T (kernel 3, dilation 4 -> 9 > T = 6); then kernel 1. */
    const int64_t cfg[3][5] = {{3, 2, 3, 2, 9}, {2, 4, 3, 4, 6}, {3, 2, 1, 1, 5}}; /* ci, co, k, d, T */
    for (int ci = 0; ci < 3; ci++)
        for (int dti = 0; dti < 2; dti++) {
            lb_dtype dt = dti ? LB_FLOAT32 : LB_FLOAT64;
            lb_params ps;
            lb_conv1d c;
            make_conv(&c, &ps, cfg[ci][0], cfg[ci][1], cfg[ci][2], cfg[ci][3], dt, 10 + ci);
            int64_t sx[3] = {2, cfg[ci][4], cfg[ci][0]};
            lb_graph *g = lb_graph_new();
            lb_var *x = lb_input(g, lb_test_uniform(dt, 3, sx, 3, -1.0, 1.0), 0);
            lb_var *y = lb_conv1d_forward(g, &c, x);
            CU_ASSERT_PTR_NOT_NULL_FATAL(y);
            CU_ASSERT_EQUAL(y->value->shape[0], 2);
            CU_ASSERT_EQUAL(y->value->shape[1], cfg[ci][4]);
            CU_ASSERT_EQUAL(y->value->shape[2], cfg[ci][1]);
            double want[2 * 9 * 4];
            direct_conv(&c, x->value, want);
            LB_ASSERT_CLOSE(y->value, want, dt == LB_FLOAT64 ? 1e-14 : 1e-6, 0);
            lb_graph_free(g);
            lb_params_free(&ps);
        }
}

/* Output t never depends on a later input; it does depend on the input exactly
 * d*(K-1) steps back (the far edge of the receptive field), and not on one further. */
static void test_causal(void)
{
    lb_params ps;
    lb_conv1d c;
    make_conv(&c, &ps, 2, 3, 3, 2, LB_FLOAT64, 4);
    int64_t sx[3] = {2, 12, 2};
    lb_tensor *xt = lb_test_uniform(LB_FLOAT64, 3, sx, 5, -1, 1);
    lb_graph *g = lb_graph_new();
    lb_var *y1 = lb_conv1d_forward(g, &c, lb_input_copy(g, xt, 0));
    const int64_t t0 = 5;
    int64_t at[3] = {1, t0, 0};
    lb_tensor_set(xt, at, lb_tensor_get(xt, at) + 1.0);
    lb_var *y2 = lb_conv1d_forward(g, &c, lb_input_copy(g, xt, 0));
    for (int64_t b = 0; b < 2; b++)
        for (int64_t t = 0; t < 12; t++) {
            double d = 0;
            for (int64_t o = 0; o < 3; o++) {
                int64_t i[3] = {b, t, o};
                d += fabs(lb_tensor_get(y1->value, i) - lb_tensor_get(y2->value, i));
            }
            /* x[1, 5] reaches y[1, 5], y[1, 7], y[1, 9] only (taps at 0, 2, 4 steps back) */
            int reached = b == 1 && (t == t0 || t == t0 + 2 || t == t0 + 4);
            if (reached) {
                CU_ASSERT_TRUE(d > 1e-6);
            } else {
                CU_ASSERT_EQUAL(d, 0.0);
            }
        }
    lb_tensor_free(xt);
    lb_graph_free(g);
    lb_params_free(&ps);
}

typedef struct conv_case {
    const lb_conv1d *c;
    const lb_conv_stack *s;
} conv_case;

/* leaves: x, weight, bias (or x and the stack's parameters); the conv follows a tanh. */
static lb_var *conv_fn(lb_graph *g, lb_var *const *leaves, void *user)
{
    const conv_case *cc = user;
    lb_var *x = lb_tanh(g, leaves[0]);
    return cc->c ? lb_conv1d_forward(g, cc->c, x) : lb_conv_stack_forward(g, cc->s, x);
}

static void test_gradcheck(void)
{
    /* dilation 2, kernel 3, C_in 2 != C_out 3, T 7, batch 2; and a receptive field past T */
    const int64_t cfg[2][5] = {{2, 3, 3, 2, 7}, {3, 2, 2, 5, 4}};
    for (int k = 0; k < 2; k++) {
        lb_params ps;
        lb_conv1d c;
        make_conv(&c, &ps, cfg[k][0], cfg[k][1], cfg[k][2], cfg[k][3], LB_FLOAT64, 20 + k);
        int64_t sx[3] = {2, cfg[k][4], cfg[k][0]};
        lb_var *leaves[3] = {lb_param_new(lb_test_uniform(LB_FLOAT64, 3, sx, 6, -1.5, 1.5), "x"), c.weight, c.bias};
        conv_case cc = {&c, NULL};
        lb_gradcheck_leaf report[3];
        lb_status st = lb_gradcheck(conv_fn, &cc, 3, leaves, NULL, report);
        CU_ASSERT_EQUAL(st, LB_OK);
        if (st != LB_OK)
            lb_gradcheck_print(stderr, 3, leaves, report);
        for (int i = 0; i < 3; i++)
            CU_ASSERT_TRUE(report[i].passed);
        lb_param_free(leaves[0]);
        lb_params_free(&ps);
    }
}

/* ---- the residual stack used by LB_MODEL_CONV ---- */

static void test_stack(void)
{
    lb_params ps;
    lb_conv_stack s;
    lb_rng rng;
    lb_rng_seed(&rng, 30);
    lb_params_init(&ps);
    CU_ASSERT_EQUAL_FATAL(lb_conv_stack_init(&s, &ps, "conv", 3, 2, 3, LB_FLOAT64, &rng), LB_OK);
    CU_ASSERT_EQUAL_FATAL(ps.count, 6);
    CU_ASSERT_STRING_EQUAL(ps.items[0]->name, "conv.0.weight");
    CU_ASSERT_STRING_EQUAL(ps.items[5]->name, "conv.2.bias");
    CU_ASSERT_EQUAL(s.layers[0].dilation, 1);
    CU_ASSERT_EQUAL(s.layers[1].dilation, 2);
    CU_ASSERT_EQUAL(s.layers[2].dilation, 4);
    CU_ASSERT_EQUAL(lb_conv_stack_receptive_field(&s), 8); /* 1 + (2-1)(1+2+4) */
    /* values: h + GELU(conv(h)) per block (exact erf GELU), against the direct formula */
    int64_t sx[3] = {2, 10, 3};
    lb_tensor *xt = lb_test_uniform(LB_FLOAT64, 3, sx, 8, -1, 1);
    lb_graph *g = lb_graph_new();
    lb_var *y = lb_conv_stack_forward(g, &s, lb_input_copy(g, xt, 0));
    CU_ASSERT_PTR_NOT_NULL_FATAL(y);
    double h[60], tmp[60];
    memcpy(h, lb_tensor_data(xt), sizeof h);
    for (int i = 0; i < 3; i++) {
        lb_tensor *ht = lb_tensor_from_doubles(LB_FLOAT64, 3, sx, h);
        direct_conv(&s.layers[i], ht, tmp);
        for (int j = 0; j < 60; j++)
            h[j] += 0.5 * tmp[j] * (1 + erf(tmp[j] / sqrt(2.0)));
        lb_tensor_free(ht);
    }
    LB_ASSERT_CLOSE(y->value, h, 1e-13, 0);
    /* receptive field: y[:, 9] depends on x[:, 2] (9 - 7) and not on x[:, 1] */
    for (int which = 0; which < 2; which++) {
        lb_tensor *x2 = lb_tensor_copy(xt, LB_FLOAT64);
        int64_t at[3] = {0, which ? 1 : 2, 0};
        lb_tensor_set(x2, at, lb_tensor_get(x2, at) + 2.0);
        lb_var *y2 = lb_conv_stack_forward(g, &s, lb_input(g, x2, 0));
        double d = 0;
        for (int o = 0; o < 3; o++) {
            int64_t i[3] = {0, 9, o};
            d += fabs(lb_tensor_get(y->value, i) - lb_tensor_get(y2->value, i));
        }
        if (which) {
            CU_ASSERT_EQUAL(d, 0.0);
        } else {
            CU_ASSERT_TRUE(d > 0);
        }
    }
    lb_graph_free(g);
    lb_tensor_free(xt);
    /* gradcheck through the whole stack (x and all six parameters) */
    int64_t sg[3] = {2, 6, 3};
    lb_var *leaves[7] = {lb_param_new(lb_test_uniform(LB_FLOAT64, 3, sg, 9, -1.5, 1.5), "x")};
    for (int i = 0; i < 6; i++)
        leaves[1 + i] = ps.items[i];
    conv_case cc = {NULL, &s};
    CU_ASSERT_EQUAL(lb_gradcheck(conv_fn, &cc, 7, leaves, NULL, NULL), LB_OK);
    lb_param_free(leaves[0]);
    lb_conv_stack_free(&s);
    lb_conv_stack_free(&s); /* freeing twice (or a zeroed stack) is allowed */
    CU_ASSERT_EQUAL(lb_conv_stack_receptive_field(&s), 0);
    CU_ASSERT_EQUAL(lb_conv_stack_init(&s, &ps, "conv", 3, 2, 1, LB_FLOAT64, &rng), LB_ERR_VALUE); /* taken */
    CU_ASSERT_EQUAL(lb_conv_stack_init(&s, &ps, "deep", 3, 2, 33, LB_FLOAT64, &rng), LB_ERR_VALUE);
    CU_ASSERT_PTR_NULL(s.layers);
    lb_params_free(&ps);
}

/* float32 forward and backward agree with float64 on the same values. */
static void test_float32_matches_float64(void)
{
    lb_params p64, p32;
    lb_conv1d c64, c32;
    make_conv(&c64, &p64, 4, 3, 3, 3, LB_FLOAT64, 40);
    make_conv(&c32, &p32, 4, 3, 3, 3, LB_FLOAT32, 40);
    for (int i = 0; i < 2; i++)
        lb_tensor_copy_into(p64.items[i]->value, p32.items[i]->value);
    int64_t sx[3] = {3, 50, 4}, sy[3] = {3, 50, 3};
    lb_tensor *x32 = lb_test_uniform(LB_FLOAT32, 3, sx, 1, -1, 1), *gy32 = lb_test_uniform(LB_FLOAT32, 3, sy, 2, -1, 1);
    lb_graph *ga = lb_graph_new(), *gb = lb_graph_new(); /* one backward per graph */
    lb_var *xa = lb_input_copy(ga, x32, 1), *xb = lb_input(gb, lb_tensor_copy(x32, LB_FLOAT64), 1);
    lb_var *ya = lb_conv1d_forward(ga, &c32, xa), *yb = lb_conv1d_forward(gb, &c64, xb);
    LB_ASSERT_TENSORS_CLOSE(ya->value, yb->value, 1e-6, 1e-6);
    lb_tensor *gy64 = lb_tensor_copy(gy32, LB_FLOAT64);
    CU_ASSERT_EQUAL(lb_backward(ga, ya, gy32), LB_OK);
    CU_ASSERT_EQUAL(lb_backward(gb, yb, gy64), LB_OK);
    CU_ASSERT_TRUE(lb_check_tensors_close(xa->grad, xb->grad, 1e-5, 1e-5, "dx"));
    CU_ASSERT_TRUE(lb_check_tensors_close(c32.weight->grad, c64.weight->grad, 1e-5, 1e-5, "dW"));
    CU_ASSERT_TRUE(lb_check_tensors_close(c32.bias->grad, c64.bias->grad, 1e-5, 1e-5, "db"));
    lb_graph_free(ga);
    lb_graph_free(gb);
    lb_tensor_free(x32);
    lb_tensor_free(gy32);
    lb_tensor_free(gy64);
    lb_params_free(&p64);
    lb_params_free(&p32);
}

static void test_errors(void)
{
    lb_params ps;
    lb_conv1d c;
    make_conv(&c, &ps, 3, 2, 2, 1, LB_FLOAT32, 50);
    lb_graph *g = lb_graph_new();
    int64_t bad[3] = {2, 5, 4}, ok[3] = {2, 5, 3}, two[2] = {5, 3};
    CU_ASSERT_PTR_NULL(lb_conv1d_forward(g, &c, lb_input(g, lb_tensor_zeros(LB_FLOAT32, 3, bad), 0)));
    CU_ASSERT_EQUAL(lb_last_status(), LB_ERR_SHAPE);
    CU_ASSERT_PTR_NOT_NULL(strstr(lb_last_error(), "conv1d"));
    CU_ASSERT_PTR_NOT_NULL(strstr(lb_last_error(), "[2, 5, 4]"));
    CU_ASSERT_PTR_NULL(lb_conv1d_forward(g, &c, lb_input(g, lb_tensor_zeros(LB_FLOAT32, 2, two), 0)));
    CU_ASSERT_EQUAL(lb_last_status(), LB_ERR_SHAPE);
    CU_ASSERT_PTR_NULL(lb_conv1d_forward(g, &c, lb_input(g, lb_tensor_zeros(LB_FLOAT64, 3, ok), 0)));
    CU_ASSERT_EQUAL(lb_last_status(), LB_ERR_DTYPE);
    lb_error(LB_ERR_VALUE, "upstream failure");
    CU_ASSERT_PTR_NULL(lb_conv1d_forward(g, &c, NULL));
    CU_ASSERT_PTR_NOT_NULL(strstr(lb_last_error(), "upstream failure"));
    lb_conv1d empty;
    memset(&empty, 0, sizeof empty);
    CU_ASSERT_PTR_NULL(lb_conv1d_forward(g, &empty, lb_input(g, lb_tensor_zeros(LB_FLOAT32, 3, ok), 0)));
    CU_ASSERT_EQUAL(lb_last_status(), LB_ERR_STATE);
    lb_graph_free(g);
    lb_params_free(&ps);
}

int main(void)
{
    const lb_test_case cases[] = {
        {"init: PyTorch names and [C_out, C_in, K] layout, U(-1/sqrt(C_in K), .), errors", test_init},
        {"forward equals the causal formula (dilation, field past T, kernel 1)", test_forward_matches_formula},
        {"causal: an input reaches only its taps' later outputs", test_causal},
        {"gradcheck: dilation 2, kernel 3, C_in != C_out, T 7; field past T", test_gradcheck},
        {"residual stack: names, dilations 1,2,4, values, receptive field, gradcheck", test_stack},
        {"float32 agrees with float64, values and gradients", test_float32_matches_float64},
        {"errors name the op and shapes; NULL propagates", test_errors},
        {NULL, NULL},
    };
    return lb_test_main("layers_conv", cases);
}

/* The LSTM layer (layers/lstm.h): parameters, gradient checks of the fused BPTT
 * ops, agreement with a reference LSTM built from elementary autograd ops, and the
 * memory shape of the graph. PyTorch agreement is in test_torch_fixtures.c. */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "autograd/gradcheck.h"
#include "autograd/ops.h"
#include "kernels/lstm.h"
#include "layers/lstm.h"
#include "support.h"
#include "tensor/kernels.h"

/* ---- helpers ---- */

/* Builds an LSTM whose parameters are drawn from `seed` (same values in either dtype,
 * up to float32 rounding). Biases are widened to U(-1, 1) so no gate sits at 1/2. */
static void make_lstm(lb_lstm *l, lb_params *ps, int64_t input_size, int64_t hidden, int layers, lb_dtype dtype,
                      uint64_t seed)
{
    lb_rng rng;
    lb_rng_seed(&rng, seed);
    lb_params_init(ps);
    CU_ASSERT_EQUAL_FATAL(lb_lstm_init(l, ps, "lstm", input_size, hidden, layers, dtype, &rng), LB_OK);
    lb_lstm_add_forget_bias(l, 0.5);
}

/* Largest |a - b| over two same-shaped tensors (inf if shapes differ or one is NULL). */
static double max_abs_diff(const lb_tensor *a, const lb_tensor *b)
{
    if (!a || !b || !lb_tensor_same_shape(a, b))
        return INFINITY;
    double m = 0;
    for (int64_t i = 0; i < lb_tensor_numel(a); i++) {
        double d = fabs(lb_tensor_flat(a, i) - lb_tensor_flat(b, i));
        if (!(d <= m))
            m = d; /* also catches NaN */
    }
    return m;
}

/* ---- the reference LSTM: elementary ops, one node per gate per step ----
 * Same contract as lb_lstm_forward (h0/c0 may be NULL); used only to check the
 * fused implementation. */
static lb_var *reshape3(lb_graph *g, lb_var *v, int64_t a, int64_t b, int64_t c)
{
    int64_t s[3] = {a, b, c};
    return lb_reshape(g, v, 3, s);
}

static lb_var *reshape2(lb_graph *g, lb_var *v, int64_t a, int64_t b)
{
    int64_t s[2] = {a, b};
    return lb_reshape(g, v, 2, s);
}

static lb_var *reference_lstm(lb_graph *g, const lb_lstm *l, lb_var *x, lb_var *h0, lb_var *c0, lb_var **h_n,
                              lb_var **c_n)
{
    const int64_t B = x->value->shape[0], T = x->value->shape[1], H = l->hidden_size;
    lb_var *in = x, *hs[LB_LSTM_MAX_LAYERS], *cs[LB_LSTM_MAX_LAYERS];
    lb_var *outs[64];
    if (T > 64)
        return NULL;
    for (int k = 0; k < l->n_layers; k++) {
        /* x W_ihᵀ + b_ih + b_hh for all steps: [B, T, 4H] */
        lb_var *p = lb_add(g, lb_add(g, lb_matmul_t(g, in, 0, l->weight_ih[k], 1), l->bias_ih[k]), l->bias_hh[k]);
        lb_var *h = h0 ? reshape2(g, lb_slice(g, h0, 0, k, k + 1, 1), B, H) : NULL;
        lb_var *c = c0 ? reshape2(g, lb_slice(g, c0, 0, k, k + 1, 1), B, H) : NULL;
        for (int64_t t = 0; t < T; t++) {
            lb_var *z = reshape2(g, lb_slice(g, p, 1, t, t + 1, 1), B, 4 * H);
            if (h)
                z = lb_add(g, z, lb_matmul_t(g, h, 0, l->weight_hh[k], 1));
            lb_var *i = lb_sigmoid(g, lb_slice(g, z, 1, 0, H, 1));
            lb_var *f = lb_sigmoid(g, lb_slice(g, z, 1, H, 2 * H, 1));
            lb_var *gg = lb_tanh(g, lb_slice(g, z, 1, 2 * H, 3 * H, 1));
            lb_var *o = lb_sigmoid(g, lb_slice(g, z, 1, 3 * H, 4 * H, 1));
            lb_var *ig = lb_mul(g, i, gg);
            c = c ? lb_add(g, lb_mul(g, f, c), ig) : ig;
            h = lb_mul(g, o, lb_tanh(g, c));
            outs[t] = reshape3(g, h, B, 1, H);
        }
        in = lb_concat(g, (int)T, outs, 1);
        hs[k] = reshape3(g, h, 1, B, H);
        cs[k] = reshape3(g, c, 1, B, H);
    }
    if (h_n)
        *h_n = lb_concat(g, l->n_layers, hs, 0);
    if (c_n)
        *c_n = lb_concat(g, l->n_layers, cs, 0);
    return in;
}

typedef lb_var *(*lstm_fn)(lb_graph *, const lb_lstm *, lb_var *, lb_var *, lb_var *, lb_var **, lb_var **);

/* Everything one run produces: output, h_n, c_n and the gradients of
 * loss = Σ out*R + Σ h_n*Rh + Σ c_n*Rc w.r.t. x, h0, c0 and the parameters. */
typedef struct lstm_run {
    lb_tensor *out, *h_n, *c_n, *dx, *dh0, *dc0;
    lb_tensor *dparam[4 * LB_LSTM_MAX_LAYERS];
    int n_params;
} lstm_run;

static void run_free(lstm_run *r)
{
    lb_tensor_free(r->out);
    lb_tensor_free(r->h_n);
    lb_tensor_free(r->c_n);
    lb_tensor_free(r->dx);
    lb_tensor_free(r->dh0);
    lb_tensor_free(r->dc0);
    for (int i = 0; i < r->n_params; i++)
        lb_tensor_free(r->dparam[i]);
    memset(r, 0, sizeof *r);
}

static lb_tensor *copy_or_null(const lb_tensor *t) { return t ? lb_tensor_copy(t, t->dtype) : NULL; }

static int run_lstm(lstm_fn fn, const lb_lstm *l, lb_params *ps, int64_t B, int64_t T, int with_state, uint64_t seed,
                    lstm_run *r)
{
    memset(r, 0, sizeof *r);
    const lb_dtype dt = l->weight_ih[0]->value->dtype;
    const int64_t H = l->hidden_size, L = l->n_layers;
    int64_t sx[3] = {B, T, l->input_size}, ss[3] = {L, B, H}, so[3] = {B, T, H};
    lb_graph *g = lb_graph_new();
    lb_var *x = lb_input(g, lb_test_uniform(dt, 3, sx, seed, -1.0, 1.0), 1);
    lb_var *h0 = with_state ? lb_input(g, lb_test_uniform(dt, 3, ss, seed + 1, -0.8, 0.8), 1) : NULL;
    lb_var *c0 = with_state ? lb_input(g, lb_test_uniform(dt, 3, ss, seed + 2, -1.5, 1.5), 1) : NULL;
    lb_var *R = lb_input(g, lb_test_uniform(dt, 3, so, seed + 3, -1.0, 1.0), 0);
    lb_var *Rh = lb_input(g, lb_test_uniform(dt, 3, ss, seed + 4, -1.0, 1.0), 0);
    lb_var *Rc = lb_input(g, lb_test_uniform(dt, 3, ss, seed + 5, -1.0, 1.0), 0);
    lb_var *hn = NULL, *cn = NULL;
    lb_var *out = fn(g, l, x, h0, c0, &hn, &cn);
    lb_var *loss = lb_add(g, lb_add(g, lb_sum(g, lb_mul(g, out, R)), lb_sum(g, lb_mul(g, hn, Rh))),
                          lb_sum(g, lb_mul(g, cn, Rc)));
    int ok = loss != NULL;
    if (ok) {
        r->out = copy_or_null(out->value);
        r->h_n = copy_or_null(hn->value);
        r->c_n = copy_or_null(cn->value);
        lb_params_zero_grad(ps);
        ok = lb_backward(g, loss, NULL) == LB_OK;
    }
    if (ok) {
        r->dx = copy_or_null(x->grad);
        r->dh0 = h0 ? copy_or_null(h0->grad) : NULL;
        r->dc0 = c0 ? copy_or_null(c0->grad) : NULL;
        r->n_params = ps->count;
        for (int i = 0; i < ps->count; i++)
            r->dparam[i] = copy_or_null(ps->items[i]->grad);
    } else {
        fprintf(stderr, "\n  run_lstm: %s\n", lb_last_error());
    }
    lb_params_zero_grad(ps);
    lb_graph_free(g);
    return ok;
}

/* Compares two runs tensor by tensor; returns the largest difference seen. */
static double compare_runs(const lstm_run *a, const lstm_run *b, const lb_params *ps, double atol, double rtol)
{
    double worst = 0;
    const struct {
        const char *name;
        const lb_tensor *x, *y;
    } pairs[] = {{"output", a->out, b->out}, {"h_n", a->h_n, b->h_n}, {"c_n", a->c_n, b->c_n},
                 {"d x", a->dx, b->dx},      {"d h0", a->dh0, b->dh0}, {"d c0", a->dc0, b->dc0}};
    for (size_t i = 0; i < sizeof pairs / sizeof pairs[0]; i++) {
        if (!pairs[i].x && !pairs[i].y)
            continue;
        CU_ASSERT_TRUE(lb_check_tensors_close(pairs[i].x, pairs[i].y, atol, rtol, pairs[i].name));
        double d = max_abs_diff(pairs[i].x, pairs[i].y);
        worst = d > worst ? d : worst;
    }
    CU_ASSERT_EQUAL(a->n_params, b->n_params);
    for (int i = 0; i < a->n_params && i < b->n_params; i++) {
        CU_ASSERT_PTR_NOT_NULL(a->dparam[i]);
        CU_ASSERT_TRUE(lb_check_tensors_close(a->dparam[i], b->dparam[i], atol, rtol, ps->items[i]->name));
        double d = max_abs_diff(a->dparam[i], b->dparam[i]);
        worst = d > worst ? d : worst;
    }
    return worst;
}

/* ---- parameters ---- */

static void test_init_names_shapes_bounds(void)
{
    lb_params ps;
    lb_lstm l;
    lb_rng rng;
    lb_rng_seed(&rng, 7);
    lb_params_init(&ps);
    CU_ASSERT_EQUAL_FATAL(lb_lstm_init(&l, &ps, "lstm", 5, 4, 2, LB_FLOAT32, &rng), LB_OK);
    const char *names[] = {"lstm.weight_ih_l0", "lstm.weight_hh_l0", "lstm.bias_ih_l0", "lstm.bias_hh_l0",
                           "lstm.weight_ih_l1", "lstm.weight_hh_l1", "lstm.bias_ih_l1", "lstm.bias_hh_l1"};
    const int64_t rows[8] = {16, 16, 16, 16, 16, 16, 16, 16}, cols[8] = {5, 4, 0, 0, 4, 4, 0, 0};
    CU_ASSERT_EQUAL_FATAL(ps.count, 8);
    for (int i = 0; i < 8; i++) {
        lb_var *p = ps.items[i];
        CU_ASSERT_STRING_EQUAL(p->name, names[i]);
        CU_ASSERT_EQUAL(p->value->shape[0], rows[i]);
        CU_ASSERT_EQUAL(p->value->ndim, cols[i] ? 2 : 1);
        if (cols[i])
            CU_ASSERT_EQUAL(p->value->shape[1], cols[i]);
        CU_ASSERT_EQUAL(p->value->dtype, LB_FLOAT32);
        /* U(-1/sqrt(H), 1/sqrt(H)) = U(-0.5, 0.5), and actually spread out */
        double lo = 1, hi = -1;
        for (int64_t j = 0; j < lb_tensor_numel(p->value); j++) {
            double v = lb_tensor_flat(p->value, j);
            lo = v < lo ? v : lo;
            hi = v > hi ? v : hi;
        }
        CU_ASSERT_TRUE(lo >= -0.5 && hi < 0.5);
        CU_ASSERT_TRUE(hi - lo > 0.5);
    }
    CU_ASSERT_PTR_EQUAL(l.weight_hh[1], ps.items[5]);
    CU_ASSERT_EQUAL(lb_params_numel(&ps), 16 * 5 + 16 * 4 + 32 + 16 * 4 * 2 + 32);
    /* the same names again are refused */
    lb_lstm l2;
    CU_ASSERT_EQUAL(lb_lstm_init(&l2, &ps, "lstm", 5, 4, 1, LB_FLOAT32, &rng), LB_ERR_VALUE);
    CU_ASSERT_PTR_NOT_NULL(strstr(lb_last_error(), "lstm.weight_ih_l0"));
    CU_ASSERT_EQUAL(lb_lstm_init(&l2, &ps, "other", 5, 4, 0, LB_FLOAT32, &rng), LB_ERR_VALUE);
    CU_ASSERT_EQUAL(lb_lstm_init(&l2, &ps, "other", 5, 4, LB_LSTM_MAX_LAYERS + 1, LB_FLOAT32, &rng), LB_ERR_VALUE);
    CU_ASSERT_EQUAL(lb_lstm_init(&l2, &ps, "other", 0, 4, 1, LB_FLOAT32, &rng), LB_ERR_VALUE);
    lb_params_free(&ps);
}

static void test_forget_bias(void)
{
    lb_params ps;
    lb_lstm l;
    lb_rng rng;
    lb_rng_seed(&rng, 3);
    lb_params_init(&ps);
    CU_ASSERT_EQUAL_FATAL(lb_lstm_init(&l, &ps, NULL, 2, 3, 2, LB_FLOAT64, &rng), LB_OK);
    CU_ASSERT_STRING_EQUAL(ps.items[0]->name, "weight_ih_l0"); /* no prefix: PyTorch's bare names */
    lb_tensor *before_ih[2], *before_hh[2];
    for (int k = 0; k < 2; k++) {
        before_ih[k] = lb_tensor_copy(l.bias_ih[k]->value, LB_FLOAT64);
        before_hh[k] = lb_tensor_copy(l.bias_hh[k]->value, LB_FLOAT64);
    }
    lb_lstm_add_forget_bias(&l, 1.25);
    for (int k = 0; k < 2; k++) {
        for (int64_t j = 0; j < 12; j++) {
            double want = lb_tensor_flat(before_ih[k], j) + (j >= 3 && j < 6 ? 1.25 : 0.0);
            CU_ASSERT_DOUBLE_EQUAL(lb_tensor_flat(l.bias_ih[k]->value, j), want, 1e-15);
            CU_ASSERT_EQUAL(lb_tensor_flat(l.bias_hh[k]->value, j), lb_tensor_flat(before_hh[k], j));
        }
        lb_tensor_free(before_ih[k]);
        lb_tensor_free(before_hh[k]);
    }
    lb_params_free(&ps);
}

/* ---- a hand-computed case: one layer, H = 1, checked against the scalar equations ---- */

static double sig(double x) { return 1 / (1 + exp(-x)); }

static void test_scalar_equations(void)
{
    lb_params ps;
    lb_lstm l;
    make_lstm(&l, &ps, 2, 1, 1, LB_FLOAT64, 11);
    /* weight_ih [4, 2], weight_hh [4, 1], biases [4]: set by hand */
    const double wi[8] = {0.5, -0.3, 0.8, 0.1, -0.6, 0.4, 0.2, 0.9}, wh[4] = {0.7, -0.2, 0.3, 0.5};
    const double bi[4] = {0.1, 0.2, -0.1, 0.05}, bh[4] = {-0.05, 0.3, 0.15, -0.2};
    for (int j = 0; j < 8; j++)
        ((double *)lb_tensor_data(l.weight_ih[0]->value))[j] = wi[j];
    for (int j = 0; j < 4; j++) {
        ((double *)lb_tensor_data(l.weight_hh[0]->value))[j] = wh[j];
        ((double *)lb_tensor_data(l.bias_ih[0]->value))[j] = bi[j];
        ((double *)lb_tensor_data(l.bias_hh[0]->value))[j] = bh[j];
    }
    /* B = 2, T = 3, I = 2 */
    const double xv[12] = {1.0, -0.5, 0.3, 0.8, -1.2, 0.4, 0.6, 0.6, -0.2, -0.9, 1.5, 0.1};
    const double h0v[2] = {0.25, -0.4}, c0v[2] = {-0.6, 0.9};
    int64_t sx[3] = {2, 3, 2}, ss[3] = {1, 2, 1};
    lb_graph *g = lb_graph_new();
    lb_var *x = lb_input(g, lb_tensor_from_doubles(LB_FLOAT64, 3, sx, xv), 0);
    lb_var *h0 = lb_input(g, lb_tensor_from_doubles(LB_FLOAT64, 3, ss, h0v), 0);
    lb_var *c0 = lb_input(g, lb_tensor_from_doubles(LB_FLOAT64, 3, ss, c0v), 0);
    lb_var *hn = NULL, *cn = NULL;
    lb_var *y = lb_lstm_forward(g, &l, x, h0, c0, &hn, &cn);
    CU_ASSERT_PTR_NOT_NULL_FATAL(y);
    double want[6], want_h[2], want_c[2];
    for (int b = 0; b < 2; b++) {
        double h = h0v[b], c = c0v[b];
        for (int t = 0; t < 3; t++) {
            const double *xt = xv + (b * 3 + t) * 2;
            double z[4];
            for (int q = 0; q < 4; q++)
                z[q] = wi[q * 2] * xt[0] + wi[q * 2 + 1] * xt[1] + bi[q] + wh[q] * h + bh[q];
            c = sig(z[1]) * c + sig(z[0]) * tanh(z[2]);
            h = sig(z[3]) * tanh(c);
            want[b * 3 + t] = h;
        }
        want_h[b] = h;
        want_c[b] = c;
    }
    LB_ASSERT_CLOSE(y->value, want, 1e-14, 0);
    LB_ASSERT_CLOSE(hn->value, want_h, 1e-14, 0);
    LB_ASSERT_CLOSE(cn->value, want_c, 1e-14, 0);
    CU_ASSERT_EQUAL(y->value->shape[0], 2);
    CU_ASSERT_EQUAL(y->value->shape[1], 3);
    CU_ASSERT_EQUAL(y->value->shape[2], 1);
    lb_graph_free(g);
    lb_params_free(&ps);
}

/* ---- gradient checks (float64, full Jacobian) ---- */

typedef struct gc_case {
    const lb_lstm *l;
    int output;    /* 0: every hidden state, 1: h_n, 2: c_n */
    int use_state; /* leaves[1], leaves[2] are h0 and c0 */
} gc_case;

/* leaves: x, h0, c0, then the parameters (which the layer holds itself). The LSTM
 * sits after a tanh so its input gradient is checked through another op. */
static lb_var *gc_fn(lb_graph *g, lb_var *const *leaves, void *user)
{
    const gc_case *c = user;
    lb_var *hn = NULL, *cn = NULL;
    lb_var *y = lb_lstm_forward(g, c->l, lb_tanh(g, leaves[0]), c->use_state ? leaves[1] : NULL,
                                c->use_state ? leaves[2] : NULL, &hn, &cn);
    return c->output == 0 ? y : c->output == 1 ? hn : cn;
}

static void test_gradcheck_two_layers(void)
{
    lb_params ps;
    lb_lstm l;
    make_lstm(&l, &ps, 4, 3, 2, LB_FLOAT64, 21); /* input 4, hidden 3 */
    int64_t sx[3] = {3, 5, 4}, ss[3] = {2, 3, 3};  /* batch 3, T 5 */
    lb_var *leaves[3 + 8];
    leaves[0] = lb_param_new(lb_test_uniform(LB_FLOAT64, 3, sx, 1, -1.5, 1.5), "x");
    leaves[1] = lb_param_new(lb_test_uniform(LB_FLOAT64, 3, ss, 2, -1.0, 1.0), "h0");
    leaves[2] = lb_param_new(lb_test_uniform(LB_FLOAT64, 3, ss, 3, -1.5, 1.5), "c0");
    CU_ASSERT_EQUAL_FATAL(ps.count, 8);
    for (int i = 0; i < 8; i++)
        leaves[3 + i] = ps.items[i];
    for (int output = 0; output < 3; output++) {
        gc_case c = {&l, output, 1};
        lb_gradcheck_leaf report[11];
        lb_status st = lb_gradcheck(gc_fn, &c, 11, leaves, NULL, report);
        CU_ASSERT_EQUAL(st, LB_OK);
        if (st != LB_OK) {
            fprintf(stderr, "\n  output %d: %s\n", output, lb_last_error());
            lb_gradcheck_print(stderr, 11, leaves, report);
        }
        for (int i = 0; i < 11; i++)
            CU_ASSERT_TRUE(report[i].passed);
    }
    /* zero initial state (h0, c0 omitted): the t = 0 recurrent product is skipped */
    gc_case c = {&l, 0, 0};
    lb_var *no_state[9] = {leaves[0]};
    for (int i = 0; i < 8; i++)
        no_state[1 + i] = ps.items[i];
    CU_ASSERT_EQUAL(lb_gradcheck(gc_fn, &c, 9, no_state, NULL, NULL), LB_OK);
    for (int i = 0; i < 3; i++)
        lb_param_free(leaves[i]);
    lb_params_free(&ps);
}

/* ---- fused ops vs the elementary-op reference ---- */

static void test_fused_matches_reference(void)
{
    for (int dti = 0; dti < 2; dti++) {
        const lb_dtype dt = dti ? LB_FLOAT32 : LB_FLOAT64;
        for (int with_state = 0; with_state < 2; with_state++) {
            lb_params ps;
            lb_lstm l;
            make_lstm(&l, &ps, 3, 5, 3, dt, 31); /* 3 layers, input 3, hidden 5 */
            lstm_run fused, ref;
            CU_ASSERT_TRUE_FATAL(run_lstm(lb_lstm_forward, &l, &ps, 4, 7, with_state, 100, &fused));
            CU_ASSERT_TRUE_FATAL(run_lstm(reference_lstm, &l, &ps, 4, 7, with_state, 100, &ref));
            const double tol = dt == LB_FLOAT64 ? 1e-12 : 2e-5;
            double worst = compare_runs(&fused, &ref, &ps, tol, tol);
            printf("\n    %s, %s initial state: max |fused - reference| = %.3g", lb_dtype_name(dt),
                   with_state ? "given" : "zero", worst);
            CU_ASSERT_TRUE(worst <= (dt == LB_FLOAT64 ? 1e-13 : 1e-5));
            run_free(&fused);
            run_free(&ref);
            lb_params_free(&ps);
        }
    }
}

/* The float32 gate loops (8-lane vectors with their own exp, sigmoid and tanh)
 * against the float64 ones (libm), one step from given c0, at H = 13 (a full vector
 * and a tail of 5) over pre-activations from -100 to 100, the tanh series' switch at
 * |x| = 1/2, tiny values and exact zeros; then the gate gradients; then NaN. */
static void test_float32_gates_match_float64(void)
{
    enum { B = 3, H = 13, G = 4 * H };
    static const double special[] = {0.0, -0.0, 1e-6, -3e-4, 0.49999, 0.5, -0.50001, 1.0, -2.5, 9.0,
                                     -15.0, 30.0, -44.0, 87.5, -100.0, 100.0};
    double p64[B * G], c064[B * H], dy64[B * H], y64[B * H], cells64[B * H], cl64[B * H];
    float p32[B * G], c032[B * H], dy32[B * H], y32[B * H], cells32[B * H], cl32[B * H];
    lb_rng rng;
    lb_rng_seed(&rng, 5);
    for (int i = 0; i < B * G; i++) {
        double v = i % 3 == 0 ? special[(i / 3) % 16] : 12.0 * (lb_rng_uniform(&rng) - 0.5);
        p32[i] = (float)v;
        p64[i] = p32[i];
    }
    for (int i = 0; i < B * H; i++) {
        c032[i] = (float)(4.0 * (lb_rng_uniform(&rng) - 0.5));
        dy32[i] = (float)(lb_rng_uniform(&rng) - 0.5);
        c064[i] = c032[i];
        dy64[i] = dy32[i];
    }
    double w64[G * H] = {0};
    float w32[G * H] = {0}; /* T = 1 without h0: W_hh is not read */
    lb_k_lstm_recurrence(LB_FLOAT64, B, 1, H, p64, w64, NULL, c064, y64, cells64, 1, cl64);
    lb_k_lstm_recurrence(LB_FLOAT32, B, 1, H, p32, w32, NULL, c032, y32, cells32, 1, cl32);
    double worst = 0;
    for (int i = 0; i < B * G; i++) {
        double d = fabs(p32[i] - p64[i]) / (1e-30 + fabs(p64[i]));
        worst = d > worst || d != d ? d : worst;
    }
    for (int i = 0; i < B * H; i++) {
        double dc = fabs(cells32[i] - cells64[i]) / (1e-30 + fabs(cells64[i]));
        double dh = fabs(y32[i] - y64[i]) / (1e-30 + fabs(y64[i]));
        worst = fmax(worst, fmax(dc, dh));
        if (dc != dc || dh != dh)
            worst = INFINITY;
    }
    printf("\n    forward: max relative difference %.3g", worst);
    CU_ASSERT_TRUE(worst <= 1e-6);
    /* the backward from the same (float32) gates and cells on both sides */
    for (int i = 0; i < B * G; i++)
        p64[i] = p32[i];
    for (int i = 0; i < B * H; i++)
        cells64[i] = cells32[i];
    double dh64[B * H] = {0}, dc64[B * H] = {0};
    float dh32[B * H] = {0}, dc32[B * H] = {0};
    lb_k_lstm_recurrence_backward(LB_FLOAT64, B, 1, H, p64, cells64, c064, w64, dy64, dh64, dc64, 0);
    lb_k_lstm_recurrence_backward(LB_FLOAT32, B, 1, H, p32, cells32, c032, w32, dy32, dh32, dc32, 0);
    worst = 0;
    for (int i = 0; i < B * G; i++)
        worst = fmax(worst, fabs(p32[i] - p64[i]) / (1e-6 + fabs(p64[i])));
    for (int i = 0; i < B * H; i++)
        worst = fmax(worst, fabs(dc32[i] - dc64[i]) / (1e-6 + fabs(dc64[i])));
    printf(", backward %.3g", worst);
    CU_ASSERT_TRUE(worst <= 1e-5);
    /* NaN in one gate pre-activation reaches c and h of its element only */
    for (int i = 0; i < G; i++)
        p32[i] = 0.25f;
    p32[H + 9] = NAN; /* f of element 9 */
    lb_k_lstm_recurrence(LB_FLOAT32, 1, 1, H, p32, w32, NULL, c032, y32, cells32, 1, cl32);
    CU_ASSERT_TRUE(isnan(p32[H + 9]) && isnan(cells32[9]) && isnan(y32[9]));
    CU_ASSERT_TRUE(!isnan(y32[8]) && !isnan(y32[10]) && fabsf(p32[2 * H + 9] - tanhf(0.25f)) <= 1e-7f);
}

/* float32 fused against float64 fused with the same (rounded) parameters, at hidden
 * sizes whose recurrent products leave every kind of remainder in the tile
 * micro-kernel's blocks (kernels/lstm.h): H = 6 (partial vectors), 8, 32 and
 * 64 (4H = 32 to 256 columns), 40 steps, 2 layers, given state. */
static void test_float32_matches_float64(void)
{
    static const int64_t hidden[] = {6, 8, 32, 64};
    for (int h = 0; h < 4; h++) {
        lb_params p64, p32;
        lb_lstm l64, l32;
        make_lstm(&l64, &p64, 3, hidden[h], 2, LB_FLOAT64, 41);
        make_lstm(&l32, &p32, 3, hidden[h], 2, LB_FLOAT32, 41);
        for (int i = 0; i < p64.count; i++) /* the float64 copy gets exactly the float32 values */
            lb_tensor_copy_into(p64.items[i]->value, p32.items[i]->value);
        lstm_run a, b;
        CU_ASSERT_TRUE_FATAL(run_lstm(lb_lstm_forward, &l64, &p64, 3, 40, 1, 7, &a));
        CU_ASSERT_TRUE_FATAL(run_lstm(lb_lstm_forward, &l32, &p32, 3, 40, 1, 7, &b));
        /* the inputs differ by float32 rounding too, so compare loosely */
        double worst = compare_runs(&b, &a, &p64, 1e-4, 1e-4);
        printf("\n    float32 vs float64, H = %lld, T = 40: max difference %.3g", (long long)hidden[h], worst);
        run_free(&a);
        run_free(&b);
        lb_params_free(&p64);
        lb_params_free(&p32);
    }
}

/* ---- semantics ---- */

static void test_zero_state_equals_explicit_zeros(void)
{
    lb_params ps;
    lb_lstm l;
    make_lstm(&l, &ps, 3, 4, 2, LB_FLOAT64, 51);
    int64_t sx[3] = {2, 5, 3}, ss[3] = {2, 2, 4};
    lb_graph *g = lb_graph_new();
    lb_var *x = lb_input(g, lb_test_uniform(LB_FLOAT64, 3, sx, 1, -1, 1), 0);
    lb_var *z = lb_input(g, lb_tensor_zeros(LB_FLOAT64, 3, ss), 0);
    lb_var *hn1, *cn1, *hn2, *cn2;
    lb_var *y1 = lb_lstm_forward(g, &l, x, NULL, NULL, &hn1, &cn1);
    lb_var *y2 = lb_lstm_forward(g, &l, x, z, z, &hn2, &cn2);
    LB_ASSERT_TENSORS_CLOSE(y1->value, y2->value, 1e-15, 0);
    LB_ASSERT_TENSORS_CLOSE(hn1->value, hn2->value, 1e-15, 0);
    LB_ASSERT_TENSORS_CLOSE(cn1->value, cn2->value, 1e-15, 0);
    /* h_n of the last layer is the last output; h_n has shape [L, B, H] */
    CU_ASSERT_EQUAL(hn1->value->shape[0], 2);
    CU_ASSERT_EQUAL(hn1->value->shape[1], 2);
    CU_ASSERT_EQUAL(hn1->value->shape[2], 4);
    for (int b = 0; b < 2; b++)
        for (int j = 0; j < 4; j++) {
            int64_t iy[3] = {b, 4, j}, ih[3] = {1, b, j};
            CU_ASSERT_EQUAL(lb_tensor_get(y1->value, iy), lb_tensor_get(hn1->value, ih));
        }
    lb_graph_free(g);
    lb_params_free(&ps);
}

/* Batch items never mix (strided per-step gemms read the right rows), and outputs
 * are causal: changing x[b, t0] leaves every output before t0 and every other item
 * unchanged. */
static void test_batch_independent_and_causal(void)
{
    lb_params ps;
    lb_lstm l;
    make_lstm(&l, &ps, 2, 3, 2, LB_FLOAT64, 61);
    int64_t sx[3] = {3, 6, 2};
    lb_graph *g = lb_graph_new();
    lb_tensor *xt = lb_test_uniform(LB_FLOAT64, 3, sx, 5, -1, 1);
    lb_var *y1 = lb_lstm_forward(g, &l, lb_input_copy(g, xt, 0), NULL, NULL, NULL, NULL);
    int64_t at[3] = {1, 3, 0};
    lb_tensor_set(xt, at, lb_tensor_get(xt, at) + 0.5);
    lb_var *y2 = lb_lstm_forward(g, &l, lb_input_copy(g, xt, 0), NULL, NULL, NULL, NULL);
    for (int64_t b = 0; b < 3; b++)
        for (int64_t t = 0; t < 6; t++)
            for (int64_t j = 0; j < 3; j++) {
                int64_t i[3] = {b, t, j};
                double d = fabs(lb_tensor_get(y1->value, i) - lb_tensor_get(y2->value, i));
                if (b != 1 || t < 3) {
                    CU_ASSERT_EQUAL(d, 0.0);
                } else if (j == 0) {
                    CU_ASSERT_TRUE(d > 1e-6);
                }
            }
    lb_tensor_free(xt);
    lb_graph_free(g);
    lb_params_free(&ps);
}

/* Evaluation mode (no grad) keeps only two cell-state rows yet gives identical values. */
static void test_no_grad_same_values(void)
{
    lb_params ps;
    lb_lstm l;
    make_lstm(&l, &ps, 3, 4, 2, LB_FLOAT32, 71);
    int64_t sx[3] = {2, 9, 3}, ss[3] = {2, 2, 4};
    lb_graph *g = lb_graph_new();
    lb_tensor *xt = lb_test_uniform(LB_FLOAT32, 3, sx, 1, -1, 1), *c0t = lb_test_uniform(LB_FLOAT32, 3, ss, 2, -1, 1);
    lb_var *hn1, *cn1, *hn2, *cn2;
    lb_var *y1 = lb_lstm_forward(g, &l, lb_input_copy(g, xt, 1), NULL, lb_input_copy(g, c0t, 0), &hn1, &cn1);
    CU_ASSERT_TRUE(y1->requires_grad);
    lb_graph_set_grad_enabled(g, 0);
    lb_var *y2 = lb_lstm_forward(g, &l, lb_input_copy(g, xt, 1), NULL, lb_input_copy(g, c0t, 0), &hn2, &cn2);
    CU_ASSERT_FALSE(y2->requires_grad);
    LB_ASSERT_TENSORS_CLOSE(y1->value, y2->value, 0, 0);
    LB_ASSERT_TENSORS_CLOSE(hn1->value, hn2->value, 0, 0);
    LB_ASSERT_TENSORS_CLOSE(cn1->value, cn2->value, 0, 0);
    lb_tensor_free(xt);
    lb_tensor_free(c0t);
    lb_graph_free(g);
    lb_params_free(&ps);
}

/* One layer is a constant number of graph nodes whatever T is (no per-step nodes),
 * and a long float32 sequence trains: finite values and gradients. */
static void test_long_sequence_constant_graph(void)
{
    lb_params ps;
    lb_lstm l;
    make_lstm(&l, &ps, 4, 16, 2, LB_FLOAT32, 81);
    int64_t sizes[2] = {0, 0};
    const int64_t Ts[2] = {8, 2048};
    for (int k = 0; k < 2; k++) {
        int64_t sx[3] = {2, Ts[k], 4}, so[3] = {2, Ts[k], 16};
        lb_graph *g = lb_graph_new();
        lb_var *x = lb_input(g, lb_test_uniform(LB_FLOAT32, 3, sx, 3, -1, 1), 1);
        lb_var *hn, *cn;
        lb_var *y = lb_lstm_forward(g, &l, x, NULL, NULL, &hn, &cn);
        CU_ASSERT_PTR_NOT_NULL_FATAL(y);
        sizes[k] = lb_graph_size(g);
        lb_tensor *gy = lb_test_uniform(LB_FLOAT32, 3, so, 4, -1, 1);
        lb_params_zero_grad(&ps);
        CU_ASSERT_EQUAL(lb_backward(g, y, gy), LB_OK);
        CU_ASSERT_TRUE(lb_k_all_finite(y->value));
        CU_ASSERT_TRUE(lb_k_all_finite(x->grad));
        for (int i = 0; i < ps.count; i++) {
            CU_ASSERT_PTR_NOT_NULL(ps.items[i]->grad);
            CU_ASSERT_TRUE(lb_k_all_finite(ps.items[i]->grad));
        }
        /* the gradient reaches the first step from the last ones */
        double first = 0;
        for (int j = 0; j < 4; j++) {
            int64_t i0[3] = {0, 0, j};
            first += fabs(lb_tensor_get(x->grad, i0));
        }
        CU_ASSERT_TRUE(first > 0);
        lb_tensor_free(gy);
        lb_graph_free(g);
    }
    lb_params_zero_grad(&ps);
    CU_ASSERT_EQUAL(sizes[0], sizes[1]);
    CU_ASSERT_TRUE(sizes[0] <= 1 + 2 * 4); /* input + per layer: projection, recurrence, h_n, c_n */
    lb_params_free(&ps);
}

/* ---- errors ---- */

static void test_errors(void)
{
    lb_params ps;
    lb_lstm l;
    make_lstm(&l, &ps, 3, 4, 2, LB_FLOAT32, 91);
    lb_graph *g = lb_graph_new();
    int64_t bad_width[3] = {2, 5, 4}, two_d[2] = {5, 3}, ok[3] = {2, 5, 3}, bad_state[3] = {1, 2, 4};
    lb_var *x = lb_input(g, lb_tensor_zeros(LB_FLOAT32, 3, bad_width), 0);
    lb_var sentinel;
    lb_var *hn = &sentinel, *cn = &sentinel; /* must be reset to NULL on error */
    CU_ASSERT_PTR_NULL(lb_lstm_forward(g, &l, x, NULL, NULL, &hn, &cn));
    CU_ASSERT_PTR_NULL(hn);
    CU_ASSERT_PTR_NULL(cn);
    CU_ASSERT_EQUAL(lb_last_status(), LB_ERR_SHAPE);
    CU_ASSERT_PTR_NOT_NULL(strstr(lb_last_error(), "lstm"));
    CU_ASSERT_PTR_NOT_NULL(strstr(lb_last_error(), "[2, 5, 4]"));
    CU_ASSERT_PTR_NULL(lb_lstm_forward(g, &l, lb_input(g, lb_tensor_zeros(LB_FLOAT32, 2, two_d), 0), NULL, NULL,
                                       NULL, NULL));
    CU_ASSERT_EQUAL(lb_last_status(), LB_ERR_SHAPE);
    lb_var *x64 = lb_input(g, lb_tensor_zeros(LB_FLOAT64, 3, ok), 0);
    CU_ASSERT_PTR_NULL(lb_lstm_forward(g, &l, x64, NULL, NULL, NULL, NULL));
    CU_ASSERT_EQUAL(lb_last_status(), LB_ERR_DTYPE);
    lb_var *x32 = lb_input(g, lb_tensor_zeros(LB_FLOAT32, 3, ok), 0);
    lb_var *h_bad = lb_input(g, lb_tensor_zeros(LB_FLOAT32, 3, bad_state), 0);
    CU_ASSERT_PTR_NULL(lb_lstm_forward(g, &l, x32, h_bad, NULL, NULL, NULL));
    CU_ASSERT_EQUAL(lb_last_status(), LB_ERR_SHAPE);
    CU_ASSERT_PTR_NOT_NULL(strstr(lb_last_error(), "h0"));
    CU_ASSERT_PTR_NOT_NULL(strstr(lb_last_error(), "[2, 2, 4]"));
    CU_ASSERT_PTR_NULL(lb_lstm_forward(g, &l, x32, NULL, h_bad, NULL, NULL));
    CU_ASSERT_PTR_NOT_NULL(strstr(lb_last_error(), "c0"));
    /* a NULL input keeps the upstream error */
    lb_error(LB_ERR_VALUE, "upstream failure");
    CU_ASSERT_PTR_NULL(lb_lstm_forward(g, &l, NULL, NULL, NULL, NULL, NULL));
    CU_ASSERT_PTR_NOT_NULL(strstr(lb_last_error(), "upstream failure"));
    lb_lstm empty;
    memset(&empty, 0, sizeof empty);
    CU_ASSERT_PTR_NULL(lb_lstm_forward(g, &empty, x32, NULL, NULL, NULL, NULL));
    CU_ASSERT_EQUAL(lb_last_status(), LB_ERR_STATE);
    lb_graph_free(g);
    lb_params_free(&ps);
}

int main(void)
{
    const lb_test_case cases[] = {
        {"init: PyTorch names, order, shapes, U(-1/sqrt(H), 1/sqrt(H)), errors", test_init_names_shapes_bounds},
        {"forget bias goes to bias_ih rows H..2H only", test_forget_bias},
        {"values equal the scalar LSTM equations (given h0, c0)", test_scalar_equations},
        {"gradcheck 2 layers, B3 T5 I4 H3: output, h_n, c_n w.r.t. x, h0, c0, params", test_gradcheck_two_layers},
        {"fused BPTT equals the elementary-op reference, float64 and float32", test_fused_matches_reference},
        {"float32 agrees with float64 over 40 steps, H = 6, 8, 32, 64", test_float32_matches_float64},
        {"float32 gate loops (vectors, tails, |x| up to 100, NaN) match float64", test_float32_gates_match_float64},
        {"NULL initial state equals explicit zeros; h_n[L-1] is the last output", test_zero_state_equals_explicit_zeros},
        {"batch items independent, outputs causal", test_batch_independent_and_causal},
        {"no-grad mode gives identical values", test_no_grad_same_values},
        {"graph size independent of T; T = 2048 float32 backward finite", test_long_sequence_constant_graph},
        {"errors name the op and shapes; NULL propagates", test_errors},
        {NULL, NULL},
    };
    return lb_test_main("layers_lstm", cases);
}

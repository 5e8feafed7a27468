/* Shape ops: reshape, permute/transpose, slice, concat; forward values, gradients,
 * float32 against float64, errors. */
#include <math.h>
#include <string.h>

#include "autograd/gradcheck.h"
#include "autograd/op_table.h"
#include "autograd/ops.h"
#include "tensor/rng.h"
#include "support.h"

static void test_reshape_forward(void)
{
    lb_graph *g = lb_graph_new();
    int64_t s[3] = {2, 3, 4};
    lb_var *x = lb_input(g, lb_test_iota(LB_FLOAT64, 3, s), 0);
    int64_t to[2] = {4, -1}, want_shape[2] = {4, 6};
    lb_var *y = lb_reshape(g, x, 2, to);
    lb_test_assert_shape(y, 2, want_shape);
    double want[24];
    for (int i = 0; i < 24; i++)
        want[i] = i;
    LB_ASSERT_CLOSE(y->value, want, 0, 0);
    /* A new tensor: writing into x does not change y. */
    CU_ASSERT_PTR_NOT_EQUAL(lb_tensor_data(y->value), lb_tensor_data(x->value));
    lb_tensor_fill(x->value, -1);
    LB_ASSERT_CLOSE(y->value, want, 0, 0);
    /* Reshape of a strided result: x[:, :, 1:4:2] is [2, 3, 2] = 1, 3, 5, 7, ... */
    lb_var *x2 = lb_input(g, lb_test_iota(LB_FLOAT32, 3, s), 0);
    int64_t to2[2] = {3, 4};
    lb_var *z = lb_reshape(g, lb_slice(g, x2, 2, 1, 4, 2), 2, to2);
    lb_test_assert_shape(z, 2, to2);
    double want_z[12] = {1, 3, 5, 7, 9, 11, 13, 15, 17, 19, 21, 23};
    LB_ASSERT_CLOSE(z->value, want_z, 0, 0);
    /* To a scalar and back. */
    int64_t one[1] = {1};
    lb_var *s1 = lb_input(g, lb_tensor_scalar(LB_FLOAT64, 2.5), 0);
    lb_var *v1 = lb_reshape(g, s1, 1, one);
    lb_test_assert_shape(v1, 1, one);
    lb_var *v0 = lb_reshape(g, v1, 0, NULL);
    lb_test_assert_shape(v0, 0, NULL);
    CU_ASSERT_DOUBLE_EQUAL(lb_tensor_flat(v0->value, 0), 2.5, 0);
    lb_graph_free(g);
}

static void test_permute_transpose_forward(void)
{
    lb_graph *g = lb_graph_new();
    int64_t s[3] = {2, 3, 4};
    lb_var *x = lb_input(g, lb_test_iota(LB_FLOAT64, 3, s), 0); /* x[i, j, k] = 12 i + 4 j + k */
    int perm[3] = {2, 0, 1};
    int64_t ps[3] = {4, 2, 3};
    lb_var *y = lb_permute(g, x, perm); /* y[k, i, j] = x[i, j, k] */
    lb_test_assert_shape(y, 3, ps);
    for (int64_t k = 0; k < 4; k++)
        for (int64_t i = 0; i < 2; i++)
            for (int64_t j = 0; j < 3; j++) {
                int64_t idx[3] = {k, i, j};
                CU_ASSERT_DOUBLE_EQUAL(lb_tensor_get(y->value, idx), (double)(12 * i + 4 * j + k), 0);
            }
    /* By hand: y[k, i, :] = x[i, :, k]. */
    double want_y[24] = {0, 4, 8, 12, 16, 20, 1, 5, 9, 13, 17, 21, 2, 6, 10, 14, 18, 22, 3, 7, 11, 15, 19, 23};
    LB_ASSERT_CLOSE(y->value, want_y, 0, 0);
    /* transpose(-1, 0): [2, 3, 4] -> [4, 3, 2], t[k, j, i] = x[i, j, k]. */
    lb_var *t = lb_transpose(g, x, -1, 0);
    int64_t ts[3] = {4, 3, 2};
    lb_test_assert_shape(t, 3, ts);
    double want_t[24] = {0, 12, 4, 16, 8, 20, 1, 13, 5, 17, 9, 21, 2, 14, 6, 18, 10, 22, 3, 15, 7, 19, 11, 23};
    LB_ASSERT_CLOSE(t->value, want_t, 0, 0);
    /* Transposing a dim with itself is the identity. */
    lb_var *same = lb_transpose(g, x, 1, -2);
    lb_test_assert_shape(same, 3, s);
    LB_ASSERT_TENSORS_CLOSE(same->value, x->value, 0, 0);
    lb_graph_free(g);
}

static void test_slice_forward(void)
{
    lb_graph *g = lb_graph_new();
    int64_t s[2] = {3, 5};
    lb_var *x = lb_input(g, lb_test_iota(LB_FLOAT64, 2, s), 0);
    lb_var *a = lb_slice(g, x, 1, 1, 5, 2); /* columns 1, 3 */
    int64_t sa[2] = {3, 2};
    lb_test_assert_shape(a, 2, sa);
    double want_a[6] = {1, 3, 6, 8, 11, 13};
    LB_ASSERT_CLOSE(a->value, want_a, 0, 0);
    lb_var *b = lb_slice(g, x, -2, 1, 3, 1); /* rows 1, 2 through a negative dim */
    int64_t sb[2] = {2, 5};
    lb_test_assert_shape(b, 2, sb);
    double want_b[10] = {5, 6, 7, 8, 9, 10, 11, 12, 13, 14};
    LB_ASSERT_CLOSE(b->value, want_b, 0, 0);
    lb_var *c = lb_slice(g, x, 1, 0, 5, 3); /* columns 0, 3: a step that does not divide the range */
    double want_c[6] = {0, 3, 5, 8, 10, 13};
    LB_ASSERT_CLOSE(c->value, want_c, 0, 0);
    lb_var *e = lb_slice(g, x, 0, 2, 2, 1); /* empty */
    int64_t se[2] = {0, 5};
    lb_test_assert_shape(e, 2, se);
    lb_graph_free(g);
}

static void test_concat_forward(void)
{
    lb_graph *g = lb_graph_new();
    int64_t s0[3] = {2, 1, 3}, s1[3] = {2, 2, 3};
    lb_var *a = lb_input(g, lb_test_iota(LB_FLOAT64, 3, s0), 0); /* 0..5 */
    lb_var *b = lb_input(g, lb_test_iota(LB_FLOAT64, 3, s1), 0); /* 0..11 */
    lb_tensor *tb = lb_tensor_zeros(LB_FLOAT64, 3, s1);
    lb_tensor_fill(tb, -1);
    lb_var *c = lb_input(g, tb, 0);
    lb_var *xs[3] = {a, b, c};
    lb_var *y = lb_concat(g, 3, xs, 1);
    int64_t sy[3] = {2, 5, 3};
    lb_test_assert_shape(y, 3, sy);
    double want[30] = {0, 1, 2, 0, 1, 2, 3, 4, 5, -1, -1, -1, -1, -1, -1,
                       3, 4, 5, 6, 7, 8, 9, 10, 11, -1, -1, -1, -1, -1, -1};
    LB_ASSERT_CLOSE(y->value, want, 0, 0);
    /* Along the last dim (negative), inputs of different widths. */
    int64_t sl[2] = {2, 2}, sr[2] = {2, 1};
    lb_var *l = lb_input(g, lb_test_iota(LB_FLOAT32, 2, sl), 0);
    lb_var *r = lb_input(g, lb_test_iota(LB_FLOAT32, 2, sr), 0);
    lb_var *lr[2] = {l, r};
    lb_var *z = lb_concat(g, 2, lr, -1);
    double want_z[6] = {0, 1, 0, 2, 3, 1};
    LB_ASSERT_CLOSE(z->value, want_z, 0, 0);
    /* One input: a copy. */
    lb_var *one = lb_concat(g, 1, &a, 0);
    LB_ASSERT_TENSORS_CLOSE(one->value, a->value, 0, 0);
    /* An empty input contributes nothing. */
    int64_t s_empty[3] = {2, 0, 3};
    lb_var *empty = lb_input(g, lb_tensor_zeros(LB_FLOAT64, 3, s_empty), 0);
    lb_var *ae[2] = {empty, a};
    LB_ASSERT_TENSORS_CLOSE(lb_concat(g, 2, ae, 1)->value, a->value, 0, 0);
    lb_graph_free(g);
}

/* More than LB_MAX_OP_INPUTS inputs are joined in stages; values and gradients
 * come out as one concat would give them. */
static void test_concat_many_inputs(void)
{
    enum { N = 11 };
    lb_graph *g = lb_graph_new();
    lb_var *xs[N];
    int64_t total = 0;
    for (int i = 0; i < N; i++) {
        int64_t s[2] = {2, 1 + i % 3}; /* widths 1, 2, 3, 1, 2, ... */
        lb_tensor *t = lb_tensor_zeros(LB_FLOAT64, 2, s);
        for (int64_t r = 0; r < 2; r++)
            for (int64_t c = 0; c < s[1]; c++) {
                int64_t idx[2] = {r, c};
                lb_tensor_set(t, idx, 100 * i + 10 * r + c);
            }
        xs[i] = lb_input(g, t, 1);
        total += s[1];
    }
    lb_var *y = lb_concat(g, N, xs, 1);
    int64_t sy[2] = {2, total};
    lb_test_assert_shape(y, 2, sy);
    int64_t col = 0;
    for (int i = 0; i < N; i++)
        for (int64_t c = 0; c < xs[i]->value->shape[1]; c++, col++)
            for (int64_t r = 0; r < 2; r++) {
                int64_t idx[2] = {r, col};
                CU_ASSERT_DOUBLE_EQUAL(lb_tensor_get(y->value, idx), 100.0 * i + 10.0 * r + c, 0);
            }
    /* Gradient: each input receives its own window of grad_output. */
    lb_tensor *go = lb_test_iota(LB_FLOAT64, 2, sy);
    CU_ASSERT_EQUAL(lb_backward(g, y, go), LB_OK);
    col = 0;
    for (int i = 0; i < N; i++) {
        CU_ASSERT_PTR_NOT_NULL_FATAL(xs[i]->grad);
        for (int64_t c = 0; c < xs[i]->value->shape[1]; c++, col++)
            for (int64_t r = 0; r < 2; r++) {
                int64_t idx[2] = {r, c};
                CU_ASSERT_DOUBLE_EQUAL(lb_tensor_get(xs[i]->grad, idx), (double)(r * total + col), 0);
            }
    }
    lb_tensor_free(go);
    lb_graph_free(g);
}

/* ---- gradients ---- */

/* reshape after slice, then a tanh so the Jacobian is not a 0/1 matrix. */
static lb_var *reshape_fn(lb_graph *g, lb_var *const *p, void *user)
{
    int64_t to[2] = {-1, 4};
    return lb_tanh(g, lb_reshape(g, lb_slice(g, p[0], 1, 0, 5, 2), 2, to)); /* [2, 3, 4] -> [6, 4] */
}

static void test_reshape_gradcheck(void)
{
    int64_t s[3] = {2, 5, 4};
    lb_var *p = lb_test_random_param(3, s, 1, "x");
    lb_gradcheck_leaf r;
    CU_ASSERT_EQUAL(lb_gradcheck(reshape_fn, NULL, 1, &p, NULL, &r), LB_OK);
    CU_ASSERT_TRUE(r.passed);
    lb_param_free(p);
}

typedef struct perm_case {
    int perm[4];
    int transpose, d0, d1;
} perm_case;

/* permute (or transpose) of a reshape of tanh(x): x [2, 3, 4, 5] read as [2, 3, 5, 4]. */
static lb_var *permute_fn(lb_graph *g, lb_var *const *p, void *user)
{
    const perm_case *c = user;
    int64_t to[4] = {2, 3, 5, 4};
    lb_var *x = lb_reshape(g, lb_tanh(g, p[0]), 4, to);
    return c->transpose ? lb_transpose(g, x, c->d0, c->d1) : lb_permute(g, x, c->perm);
}

static void test_permute_gradcheck(void)
{
    int64_t s[4] = {2, 3, 4, 5};
    lb_var *p = lb_test_random_param(4, s, 2, "x");
    perm_case cases[] = {
        {{3, 1, 0, 2}, 0, 0, 0}, {{1, 2, 3, 0}, 0, 0, 0}, {{0, 1, 2, 3}, 0, 0, 0}, /* cycles and the identity */
        {{0}, 1, -1, 1},         {{0}, 1, 0, 2},                                  /* transposes */
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        lb_status st = lb_gradcheck(permute_fn, &cases[i], 1, &p, NULL, NULL);
        if (st != LB_OK)
            fprintf(stderr, "\n  case %zu: %s\n", i, lb_last_error());
        CU_ASSERT_EQUAL(st, LB_OK);
    }
    lb_param_free(p);
}

typedef struct slice_case {
    int dim;
    int64_t start, stop, step;
} slice_case;

/* slice of transpose(x): x [3, 7, 2] -> [3, 2, 7] -> slice. */
static lb_var *slice_fn(lb_graph *g, lb_var *const *p, void *user)
{
    const slice_case *c = user;
    return lb_slice(g, lb_transpose(g, p[0], 1, 2), c->dim, c->start, c->stop, c->step);
}

static void test_slice_gradcheck(void)
{
    int64_t s[3] = {3, 7, 2};
    lb_var *p = lb_test_random_param(3, s, 3, "x");
    slice_case cases[] = {{2, 1, 7, 3}, {-1, 0, 7, 1}, {0, 1, 3, 1}, {1, 1, 2, 1}, {2, 2, 6, 2}, {2, 3, 3, 1}};
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        lb_status st = lb_gradcheck(slice_fn, &cases[i], 1, &p, NULL, NULL);
        if (st != LB_OK)
            fprintf(stderr, "\n  case %zu: %s\n", i, lb_last_error());
        CU_ASSERT_EQUAL(st, LB_OK);
    }
    lb_param_free(p);
}

/* Exact slice gradient: ones where selected, zeros elsewhere. */
static void test_slice_backward_values(void)
{
    int64_t s[2] = {2, 5};
    lb_var *p = lb_param_new(lb_test_iota(LB_FLOAT64, 2, s), "x");
    lb_graph *g = lb_graph_new();
    lb_var *y = lb_slice(g, p, 1, 1, 5, 3); /* columns 1, 4 */
    lb_tensor *go = lb_tensor_zeros_like(y->value);
    lb_tensor_fill(go, 1);
    CU_ASSERT_EQUAL(lb_backward(g, y, go), LB_OK);
    double want[10] = {0, 1, 0, 0, 1, 0, 1, 0, 0, 1};
    LB_ASSERT_CLOSE(p->grad, want, 0, 0);
    lb_tensor_free(go);
    lb_graph_free(g);
    lb_param_free(p);
}

/* concat of three leaves of different sizes, each after another op, along dim 1 of
 * [B, T_i, D] = [2, T_i, 3]; and a fifth input through the staged path. */
static lb_var *concat_fn(lb_graph *g, lb_var *const *p, void *user)
{
    int staged = *(const int *)user;
    lb_var *a = lb_tanh(g, p[0]);                /* [2, 2, 3] */
    lb_var *b = lb_transpose(g, p[1], 1, 2);     /* [2, 3, 1] -> [2, 1, 3] */
    lb_var *c = lb_slice(g, p[2], 1, 0, 5, 2);   /* [2, 5, 3] -> [2, 3, 3] */
    if (!staged) {
        lb_var *xs[3] = {a, b, c};
        return lb_concat(g, 3, xs, 1);
    }
    lb_var *xs[6] = {c, a, b, a, c, p[0]}; /* repeats: gradients of every use add up */
    return lb_concat(g, 6, xs, -2);
}

static void test_concat_gradcheck(void)
{
    int64_t sa[3] = {2, 2, 3}, sb[3] = {2, 3, 1}, sc[3] = {2, 5, 3};
    lb_var *p[3] = {lb_test_random_param(3, sa, 4, "a"), lb_test_random_param(3, sb, 5, "b"), lb_test_random_param(3, sc, 6, "c")};
    for (int staged = 0; staged < 2; staged++) {
        lb_gradcheck_leaf r[3];
        lb_status st = lb_gradcheck(concat_fn, &staged, 3, p, NULL, r);
        if (st != LB_OK)
            fprintf(stderr, "\n  staged %d: %s\n", staged, lb_last_error());
        CU_ASSERT_EQUAL(st, LB_OK);
        CU_ASSERT_TRUE(r[0].passed && r[1].passed && r[2].passed);
    }
    for (int i = 0; i < 3; i++)
        lb_param_free(p[i]);
}

/* The same pipeline in float32 and float64: equal values (shape ops only copy) and gradients. */
static lb_var *pipeline(lb_graph *g, lb_var *x, lb_var *w)
{
    int perm[3] = {1, 2, 0};
    lb_var *t = lb_permute(g, x, perm);              /* [2, 3, 4] -> [3, 4, 2] */
    lb_var *s = lb_slice(g, t, 1, 1, 4, 2);          /* [3, 2, 2] */
    int64_t to[2] = {3, 4};
    lb_var *r = lb_reshape(g, s, 2, to);             /* [3, 4] */
    lb_var *xs[2] = {r, lb_transpose(g, w, 0, 1)};   /* w [5, 3] -> [3, 5] */
    return lb_mul(g, lb_concat(g, 2, xs, 1), lb_concat(g, 2, xs, 1)); /* [3, 9], squared */
}

static void test_float32_matches_float64(void)
{
    int64_t sx[3] = {2, 3, 4}, sw[2] = {5, 3};
    lb_var *x64 = lb_test_random_param(3, sx, 7, "x"), *w64 = lb_test_random_param(2, sw, 8, "w");
    lb_var *x32 = lb_param_new(lb_tensor_copy(x64->value, LB_FLOAT32), "x");
    lb_var *w32 = lb_param_new(lb_tensor_copy(w64->value, LB_FLOAT32), "w");
    lb_graph *g = lb_graph_new();
    lb_var *y64 = pipeline(g, x64, w64), *y32 = pipeline(g, x32, w32);
    CU_ASSERT_PTR_NOT_NULL_FATAL(y64);
    CU_ASSERT_PTR_NOT_NULL_FATAL(y32);
    CU_ASSERT_EQUAL(y32->value->dtype, LB_FLOAT32);
    LB_ASSERT_TENSORS_CLOSE(y32->value, y64->value, 1e-6, 1e-6);
    lb_tensor *go64 = lb_test_random_tensor(LB_FLOAT64, y64->value->ndim, y64->value->shape, 9);
    lb_tensor *go32 = lb_tensor_copy(go64, LB_FLOAT32);
    CU_ASSERT_EQUAL(lb_backward(g, y64, go64), LB_OK);
    lb_graph_reset(g);
    y32 = pipeline(g, x32, w32);
    CU_ASSERT_EQUAL(lb_backward(g, y32, go32), LB_OK);
    LB_ASSERT_TENSORS_CLOSE(x32->grad, x64->grad, 1e-6, 1e-5);
    LB_ASSERT_TENSORS_CLOSE(w32->grad, w64->grad, 1e-6, 1e-5);
    /* Elements of x that the slice dropped get exactly zero. */
    int64_t dropped[3] = {1, 2, 0}; /* t[j, k, i] = x[i, j, k]; the slice keeps k = 1, 3 only */
    CU_ASSERT_DOUBLE_EQUAL(lb_tensor_get(x64->grad, dropped), 0.0, 0);
    lb_tensor_free(go64);
    lb_tensor_free(go32);
    lb_graph_free(g);
    lb_param_free(x64);
    lb_param_free(w64);
    lb_param_free(x32);
    lb_param_free(w32);
}

/* Two graphs using the same parameter: the second backward adds to the first. */
static void test_backward_twice_accumulates(void)
{
    int64_t s[2] = {2, 3};
    lb_var *p = lb_param_new(lb_test_iota(LB_FLOAT64, 2, s), "p");
    lb_graph *g1 = lb_graph_new(), *g2 = lb_graph_new();
    int64_t to[1] = {6};
    /* y = concat(reshape(transpose(p)), slice(p)[row 1]) : [6 + 3] */
    lb_var *a1 = lb_reshape(g1, lb_transpose(g1, p, 0, 1), 1, to);
    int64_t row[1] = {3};
    lb_var *b1 = lb_reshape(g1, lb_slice(g1, p, 0, 1, 2, 1), 1, row);
    lb_var *xs1[2] = {a1, b1};
    lb_var *y1 = lb_concat(g1, 2, xs1, 0);
    int64_t sy[1] = {9};
    double gov[9] = {1, 2, 3, 4, 5, 6, 7, 8, 9};
    lb_tensor *go = lb_tensor_from_doubles(LB_FLOAT64, 1, sy, gov);
    CU_ASSERT_EQUAL(lb_backward(g1, y1, go), LB_OK);
    /* transpose(p) = [[p00, p10], [p01, p11], [p02, p12]] flattened: p00 p10 p01 p11 p02 p12 get 1..6;
     * row 1 of p gets 7, 8, 9 more. */
    double once[6] = {1, 3, 5, 2 + 7, 4 + 8, 6 + 9};
    LB_ASSERT_CLOSE(p->grad, once, 0, 0);
    lb_var *a2 = lb_reshape(g2, lb_transpose(g2, p, 0, 1), 1, to);
    lb_var *b2 = lb_reshape(g2, lb_slice(g2, p, 0, 1, 2, 1), 1, row);
    lb_var *xs2[2] = {a2, b2};
    CU_ASSERT_EQUAL(lb_backward(g2, lb_concat(g2, 2, xs2, 0), go), LB_OK);
    double twice[6];
    for (int i = 0; i < 6; i++)
        twice[i] = 2 * once[i];
    LB_ASSERT_CLOSE(p->grad, twice, 0, 0);
    lb_tensor_free(go);
    lb_graph_free(g1);
    lb_graph_free(g2);
    lb_param_free(p);
}

/* Constants get no gradient; grad mode off records nothing. */
static void test_constants_and_no_grad(void)
{
    int64_t s[2] = {2, 3};
    lb_var *p = lb_param_new(lb_test_iota(LB_FLOAT64, 2, s), "p");
    lb_graph *g = lb_graph_new();
    lb_var *c = lb_input(g, lb_test_iota(LB_FLOAT64, 2, s), 0);
    lb_var *xs[2] = {c, p};
    lb_var *y = lb_concat(g, 2, xs, 0);
    CU_ASSERT_TRUE(y->requires_grad);
    lb_tensor *go = lb_test_iota(LB_FLOAT64, y->value->ndim, y->value->shape);
    CU_ASSERT_EQUAL(lb_backward(g, y, go), LB_OK);
    CU_ASSERT_PTR_NULL(c->grad);
    double want[6] = {6, 7, 8, 9, 10, 11};
    LB_ASSERT_CLOSE(p->grad, want, 0, 0);
    lb_graph_reset(g);
    lb_graph_set_grad_enabled(g, 0);
    int perm[2] = {1, 0};
    lb_var *t = lb_permute(g, p, perm);
    CU_ASSERT_FALSE(t->requires_grad);
    CU_ASSERT_EQUAL(t->n_inputs, 0);
    lb_tensor_free(go);
    lb_graph_free(g);
    lb_param_free(p);
}

/* ---- errors ---- */

static void test_errors(void)
{
    lb_graph *g = lb_graph_new();
    int64_t s[3] = {2, 3, 4};
    lb_var *x = lb_input(g, lb_test_iota(LB_FLOAT64, 3, s), 1);
    int64_t before = lb_graph_size(g);

    int64_t bad[2] = {5, 5};
    CU_ASSERT_PTR_NULL(lb_reshape(g, x, 2, bad));
    LB_ASSERT_ERROR(LB_ERR_SHAPE, "reshape", "[2, 3, 4]");
    CU_ASSERT_TRUE(lb_test_error_has("[5, 5]"));
    int64_t two_infer[2] = {-1, -1};
    CU_ASSERT_PTR_NULL(lb_reshape(g, x, 2, two_infer));
    LB_ASSERT_ERROR(LB_ERR_SHAPE, "reshape", "[-1, -1]");

    int repeat[3] = {0, 1, 1}, out_of_range[3] = {0, 3, 1};
    CU_ASSERT_PTR_NULL(lb_permute(g, x, repeat));
    LB_ASSERT_ERROR(LB_ERR_SHAPE, "permute", "[2, 3, 4]");
    CU_ASSERT_TRUE(lb_test_error_has("(0, 1, 1)"));
    CU_ASSERT_PTR_NULL(lb_permute(g, x, out_of_range));
    LB_ASSERT_ERROR(LB_ERR_SHAPE, "permute", "[2, 3, 4]");
    CU_ASSERT_PTR_NULL(lb_transpose(g, x, 0, 3));
    LB_ASSERT_ERROR(LB_ERR_SHAPE, "transpose", "[2, 3, 4]");
    CU_ASSERT_PTR_NULL(lb_transpose(g, x, -4, 0));
    LB_ASSERT_ERROR(LB_ERR_SHAPE, "transpose", "[2, 3, 4]");

    CU_ASSERT_PTR_NULL(lb_slice(g, x, 1, 0, 4, 1)); /* stop > size 3 */
    LB_ASSERT_ERROR(LB_ERR_VALUE, "slice", "[2, 3, 4]");
    CU_ASSERT_PTR_NULL(lb_slice(g, x, 2, 3, 1, 1)); /* start > stop */
    LB_ASSERT_ERROR(LB_ERR_VALUE, "slice", "[2, 3, 4]");
    CU_ASSERT_PTR_NULL(lb_slice(g, x, 2, 0, 4, 0)); /* step 0 */
    LB_ASSERT_ERROR(LB_ERR_VALUE, "slice", "[2, 3, 4]");
    CU_ASSERT_PTR_NULL(lb_slice(g, x, 3, 0, 1, 1)); /* no dim 3 */
    LB_ASSERT_ERROR(LB_ERR_SHAPE, "slice", "[2, 3, 4]");

    int64_t s2[3] = {2, 3, 5};
    lb_var *y = lb_input(g, lb_test_iota(LB_FLOAT64, 3, s2), 0);
    before = lb_graph_size(g);
    lb_var *xy[2] = {x, y};
    CU_ASSERT_PTR_NULL(lb_concat(g, 2, xy, 1)); /* dim 2 differs */
    LB_ASSERT_ERROR(LB_ERR_SHAPE, "concat", "[2, 3, 4]");
    CU_ASSERT_TRUE(lb_test_error_has("[2, 3, 5]"));
    CU_ASSERT_PTR_NOT_NULL(lb_concat(g, 2, xy, 2)); /* fine along the dim that differs */
    before = lb_graph_size(g);
    lb_var *many[6] = {x, x, x, x, x, y}; /* staged path: the mismatch is found before any node is made */
    CU_ASSERT_PTR_NULL(lb_concat(g, 6, many, 0));
    LB_ASSERT_ERROR(LB_ERR_SHAPE, "concat", "[2, 3, 5]");
    CU_ASSERT_EQUAL(lb_graph_size(g), before);
    int64_t s3[2] = {2, 3};
    lb_var *flat = lb_input(g, lb_test_iota(LB_FLOAT64, 2, s3), 0);
    lb_var *xf[2] = {x, flat};
    CU_ASSERT_PTR_NULL(lb_concat(g, 2, xf, 0)); /* ranks differ */
    LB_ASSERT_ERROR(LB_ERR_SHAPE, "concat", "[2, 3]");
    CU_ASSERT_PTR_NULL(lb_concat(g, 2, xy, 3));
    LB_ASSERT_ERROR(LB_ERR_SHAPE, "concat", "[2, 3, 4]");
    CU_ASSERT_PTR_NULL(lb_concat(g, 0, xy, 0));
    CU_ASSERT_EQUAL(lb_last_status(), LB_ERR_VALUE);
    CU_ASSERT_TRUE(lb_test_error_has("concat"));
    lb_var *x32 = lb_input(g, lb_test_iota(LB_FLOAT32, 3, s), 0);
    lb_var *mixed[2] = {x, x32};
    CU_ASSERT_PTR_NULL(lb_concat(g, 2, mixed, 0));
    LB_ASSERT_ERROR(LB_ERR_DTYPE, "concat", "float32[2, 3, 4]");
    CU_ASSERT_EQUAL(lb_graph_size(g), before + 2); /* only the two inputs were added */

    /* A NULL input keeps the upstream error through a chain of ops. */
    int64_t to[1] = {24};
    lb_var *chain = lb_reshape(g, lb_permute(g, lb_slice(g, x, 0, 0, 9, 1), repeat), 1, to);
    CU_ASSERT_PTR_NULL(chain);
    LB_ASSERT_ERROR(LB_ERR_VALUE, "slice", "[2, 3, 4]");
    lb_var *with_null[2] = {x, NULL};
    CU_ASSERT_PTR_NULL(lb_concat(g, 2, with_null, 0));
    LB_ASSERT_ERROR(LB_ERR_VALUE, "slice", "[2, 3, 4]");
    CU_ASSERT_PTR_NULL(lb_transpose(g, NULL, 0, 1));
    LB_ASSERT_ERROR(LB_ERR_VALUE, "slice", "[2, 3, 4]");

    /* A variable from another graph. */
    lb_graph *other = lb_graph_new();
    CU_ASSERT_PTR_NULL(lb_reshape(other, x, 1, to));
    CU_ASSERT_EQUAL(lb_last_status(), LB_ERR_STATE);
    CU_ASSERT_TRUE(lb_test_error_has("reshape"));
    lb_graph_free(other);
    lb_graph_free(g);
}

int main(void)
{
    const lb_test_case cases[] = {
        {"reshape forward values, copies, -1, scalars", test_reshape_forward},
        {"permute and transpose forward values", test_permute_transpose_forward},
        {"slice forward values, steps, negative dim, empty", test_slice_forward},
        {"concat forward values, widths, one and empty input", test_concat_forward},
        {"concat of more than 4 inputs, values and gradients", test_concat_many_inputs},
        {"gradcheck reshape after slice", test_reshape_gradcheck},
        {"gradcheck permute and transpose after reshape", test_permute_gradcheck},
        {"gradcheck slice after transpose", test_slice_gradcheck},
        {"slice backward puts zeros where not selected", test_slice_backward_values},
        {"gradcheck concat, mixed inputs and repeats, staged", test_concat_gradcheck},
        {"float32 matches float64, values and gradients", test_float32_matches_float64},
        {"backward through two graphs accumulates", test_backward_twice_accumulates},
        {"constants get no gradient; no-grad mode records nothing", test_constants_and_no_grad},
        {"errors name the op and the shapes", test_errors},
        {NULL, NULL},
    };
    return lb_test_main("ops_shape", cases);
}

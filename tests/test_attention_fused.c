/* The fused attention op (lb_attention_fused, FlashAttention-2 tiles) against the
 * materialized path (lb_matmul_t + lb_masked_softmax + lb_matmul): values and the
 * gradients of q, k and v under every kind of mask, Tq != Tk, fully masked rows and
 * sequence lengths that are not multiples of the tile sizes (forward tiles 128 x 128,
 * backward 64 x 128, so lengths like 130, 200, 300 cut tiles); float64 gradcheck;
 * bit-for-bit reproducibility across runs and thread counts; the layers' default path.
 * The comparisons, gradchecks and reproducibility checks run under every build of the
 * kernels' loops the CPU can run (avx512, avx2, generic: lb_k_attention_set_isa).
 *
 * Named dims: B batch, H heads, Tq queries, Tk keys, D = d_k, Dv = d_v. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "autograd/gradcheck.h"
#include "autograd/op_table.h"
#include "autograd/ops.h"
#include "kernels/attention.h"
#include "layers/attention.h"
#include "layers/positional.h"
#include "support.h"
#include "tensor/pool.h"
#include "tensor/rng.h"
#include "tensor/isa.h"
#include "tensor/threads.h"

/* ---- helpers ---- */

static int all_finite(const lb_tensor *t)
{
    int64_t n = lb_tensor_numel(t);
    for (int64_t i = 0; i < n; i++)
        if (!isfinite(lb_tensor_flat(t, i)))
            return 0;
    return 1;
}

static int same_bits(const lb_tensor *a, const lb_tensor *b)
{
    return a && b && lb_tensor_same_shape(a, b) && a->dtype == b->dtype &&
           memcmp(lb_tensor_data(a), lb_tensor_data(b), (size_t)lb_tensor_numel(a) * lb_dtype_size(a->dtype)) == 0;
}

/* One comparison case: shapes and which masks to build. */
typedef struct fused_case {
    const char *name;
    int64_t b, h, tq, tk, d, dv;
    int causal;
    int64_t window;
    int lengths;   /* key_lengths: item 0 full, item 1 about half, item 2 zero (fully masked) */
    int allowed;   /* 0 none; 1 [Tq, Tk] random with query row 1 fully masked; 2 key mask [B, 1, 1, Tk] */
    int additive;  /* 0 none; 1 [H, Tq, Tk] random in [-1, 1] with -inf entries and a -inf row */
    int positions; /* query_positions [B, Tq], random in [0, Tk) */
} fused_case;

/* The masks of a case, owned here. */
typedef struct case_mask {
    lb_attn_mask mask;
    lb_tensor *allowed, *additive;
    int32_t lengths[8];
    int32_t *positions;
} case_mask;

static void case_mask_make(const fused_case *c, lb_dtype dtype, uint64_t seed, case_mask *m)
{
    memset(m, 0, sizeof *m);
    lb_rng rng;
    lb_rng_seed(&rng, seed);
    m->mask.causal = c->causal;
    m->mask.window = c->window;
    if (c->lengths) {
        for (int64_t b = 0; b < c->b; b++)
            m->lengths[b] = b == 0 ? (int32_t)c->tk : b == 1 ? (int32_t)(c->tk / 2 + 3 < c->tk ? c->tk / 2 + 3 : c->tk) : 0;
        m->mask.key_lengths = m->lengths;
    }
    if (c->allowed == 1) {
        int64_t s[2] = {c->tq, c->tk};
        m->allowed = lb_tensor_zeros(LB_FLOAT32, 2, s);
        float *p = lb_tensor_data(m->allowed);
        for (int64_t i = 0; i < c->tq * c->tk; i++)
            p[i] = lb_rng_uniform(&rng) < 0.7 ? 1.0f : 0.0f;
        if (c->tq > 1)
            for (int64_t j = 0; j < c->tk; j++)
                p[1 * c->tk + j] = 0; /* query row 1 sees nothing */
        m->mask.allowed = m->allowed;
    } else if (c->allowed == 2) {
        int64_t s[4] = {c->b, 1, 1, c->tk};
        m->allowed = lb_tensor_zeros(LB_FLOAT64, 4, s);
        double *p = lb_tensor_data(m->allowed);
        for (int64_t i = 0; i < c->b * c->tk; i++)
            p[i] = lb_rng_uniform(&rng) < 0.8 ? 2.0 : 0.0; /* any nonzero allows */
        m->mask.allowed = m->allowed;
    }
    if (c->additive) {
        int64_t s[3] = {c->h, c->tq, c->tk};
        m->additive = lb_tensor_zeros(dtype, 3, s);
        int64_t n = c->h * c->tq * c->tk;
        for (int64_t i = 0; i < n; i++) {
            double u = lb_rng_uniform(&rng);
            double val = u < 0.1 ? -INFINITY : 2 * lb_rng_uniform(&rng) - 1;
            int64_t row = (i / c->tk) % c->tq;
            if (row == 2 % (c->tq > 0 ? c->tq : 1) && i / (c->tq * c->tk) == 0)
                val = -INFINITY; /* head 0, query row 2: fully masked */
            LB_DISPATCH(dtype, T, { ((T *)lb_tensor_data(m->additive))[i] = (T)val; });
        }
        m->mask.additive = m->additive;
    }
    if (c->positions) {
        m->positions = malloc((size_t)(c->b * c->tq) * sizeof *m->positions);
        for (int64_t i = 0; i < c->b * c->tq; i++)
            m->positions[i] = (int32_t)lb_rng_below(&rng, (uint64_t)c->tk);
        m->mask.query_positions = m->positions;
    }
}

static void case_mask_free(case_mask *m)
{
    lb_tensor_free(m->allowed);
    lb_tensor_free(m->additive);
    free(m->positions);
}

/* Output and gradients of sum(out * R) with respect to q, k, v, as float64 copies. */
typedef struct attn_result {
    lb_tensor *out, *dq, *dk, *dv;
} attn_result;

static void result_free(attn_result *r)
{
    lb_tensor_free(r->out);
    lb_tensor_free(r->dq);
    lb_tensor_free(r->dk);
    lb_tensor_free(r->dv);
    memset(r, 0, sizeof *r);
}

static lb_var *materialized(lb_graph *g, lb_var *q, lb_var *k, lb_var *v, const lb_attn_mask *mask, double scale)
{
    return lb_matmul(g, lb_masked_softmax(g, lb_matmul_t(g, q, 0, k, 1), mask, scale), v);
}

/* x [B, Hkv, T, W] -> [B, Hkv * group, T, W], head h of the result = head h / group of x,
 * by slices and one concatenation (the grouped reference, independent of the layers'). */
static lb_var *repeat_heads(lb_graph *g, lb_var *x, int64_t group)
{
    int64_t hkv = x->value->shape[1];
    lb_var *parts[64];
    for (int64_t h = 0; h < hkv * group; h++)
        parts[h] = lb_slice(g, x, 1, h / group, h / group + 1, 1);
    return lb_concat(g, (int)(hkv * group), parts, 1);
}

/* Runs one path on the case's inputs (same seeds for every call) with kv_heads key/value
 * heads (grouped-query when below c->h; the materialized path repeats them), copies
 * results in their own dtype. */
static int run_case_kv(const fused_case *c, int64_t kv_heads, lb_dtype dtype, int fused, const lb_attn_mask *mask,
                       attn_result *r)
{
    memset(r, 0, sizeof *r);
    int64_t sq[4] = {c->b, c->h, c->tq, c->d}, sk[4] = {c->b, kv_heads, c->tk, c->d}, sv[4] = {c->b, kv_heads, c->tk, c->dv};
    int64_t so[4] = {c->b, c->h, c->tq, c->dv};
    lb_graph *g = lb_graph_new();
    lb_var *q = lb_input(g, lb_test_uniform(dtype, 4, sq, 11, -1.5, 1.5), 1);
    lb_var *k = lb_input(g, lb_test_uniform(dtype, 4, sk, 12, -1.5, 1.5), 1);
    lb_var *v = lb_input(g, lb_test_uniform(dtype, 4, sv, 13, -1, 1), 1);
    double scale = 1.0 / sqrt((double)c->d);
    lb_var *out = fused ? lb_attention_fused(g, q, k, v, mask, scale)
                        : materialized(g, q, repeat_heads(g, k, c->h / kv_heads), repeat_heads(g, v, c->h / kv_heads),
                                       mask, scale);
    if (!out) {
        fprintf(stderr, "\n  %s: %s\n", c->name, lb_last_error());
        lb_graph_free(g);
        return 0;
    }
    if (fused)
        CU_ASSERT_EQUAL(out->op, LB_OP_ATTENTION);
    lb_var *rv = lb_input(g, lb_test_uniform(dtype, 4, so, 14, -1, 1), 0);
    lb_status st = lb_backward(g, lb_sum(g, lb_mul(g, out, rv)), NULL);
    CU_ASSERT_EQUAL(st, LB_OK);
    r->out = lb_tensor_copy(out->value, dtype);
    r->dq = q->grad ? lb_tensor_copy(q->grad, dtype) : lb_tensor_zeros_like(q->value);
    r->dk = k->grad ? lb_tensor_copy(k->grad, dtype) : lb_tensor_zeros_like(k->value);
    r->dv = v->grad ? lb_tensor_copy(v->grad, dtype) : lb_tensor_zeros_like(v->value);
    lb_graph_free(g);
    return st == LB_OK;
}

static int run_case(const fused_case *c, lb_dtype dtype, int fused, const lb_attn_mask *mask, attn_result *r)
{
    return run_case_kv(c, c->h, dtype, fused, mask, r);
}

static int results_close(const attn_result *a, const attn_result *b, double tol, const char *name)
{
    int ok = 1;
    const lb_tensor *ta[4] = {a->out, a->dq, a->dk, a->dv}, *tb[4] = {b->out, b->dq, b->dk, b->dv};
    static const char *what[4] = {"out", "dq", "dk", "dv"};
    for (int i = 0; i < 4; i++)
        if (!lb_check_tensors_close(ta[i], tb[i], tol, tol, what[i])) {
            fprintf(stderr, "  (case: %s)\n", name);
            ok = 0;
        }
    return ok;
}

static int results_same_bits(const attn_result *a, const attn_result *b)
{
    return same_bits(a->out, b->out) && same_bits(a->dq, b->dq) && same_bits(a->dk, b->dk) && same_bits(a->dv, b->dv);
}

/* ---- every build of the kernels' loops the CPU can run ---- */

static const char *const ISAS[] = {"avx512", "avx2", "generic"};
enum { N_ISAS = sizeof ISAS / sizeof ISAS[0] };

/* Runs fn once under every build of the kernels' loops this CPU has (at least
 * "generic"), then returns to the automatic choice. */
static void for_each_isa(void (*fn)(void))
{
    int ran = 0;
    for (int i = 0; i < N_ISAS; i++) {
        if (lb_k_attention_set_isa(ISAS[i]) != LB_OK)
            continue;
        CU_ASSERT_STRING_EQUAL(lb_k_attention_isa(), ISAS[i]);
        fn();
        ran++;
    }
    CU_ASSERT_EQUAL(lb_k_attention_set_isa("auto"), LB_OK);
    CU_ASSERT_TRUE(ran >= 1);
}

/* Every case avoids the shapes that hide bugs: B >= 2 with different padding, H >= 2
 * (or one head where a shape needs it), Tq, Tk, D and Dv all different, lengths that
 * cut tiles, an asymmetric mask and a fully masked row. */
static const fused_case CASES[] = {
    /* name                                             B  H  Tq   Tk   D   Dv  causal win len al add pos */
    {"no mask, T=200 (cuts tiles)",                    2, 2, 200, 200, 16, 8,  0, 0,  0,  1, 0,  0},
    {"causal, T=300, d=32",                            2, 3, 300, 300, 32, 24, 1, 0,  1,  0, 0,  0},
    {"causal, Tq=70 < Tk=333 (last query on last key)", 2, 2, 70,  333, 24, 12, 1, 0,  0,  1, 0,  0},
    {"causal, Tq=300 > Tk=150 (early queries see none)", 2, 2, 300, 150, 12, 20, 1, 0,  0,  0, 0,  0},
    {"window 50 + padding, T=400",                     3, 2, 400, 400, 16, 16, 1, 50, 1,  0, 0,  0},
    {"window 1 (each query sees itself)",              2, 2, 131, 131, 8,  4,  1, 1,  1,  0, 0,  0},
    {"window 200 > tile, not causal flag",             2, 1, 390, 390, 20, 10, 0, 200, 0, 1, 0,  0},
    {"padding only, item 2 empty",                     3, 2, 129, 257, 16, 12, 0, 0,  1,  0, 0,  0},
    {"allowed [Tq, Tk] + causal",                      2, 2, 260, 260, 16, 8,  1, 0,  0,  1, 0,  0},
    {"key mask [B, 1, 1, Tk] + padding",               3, 2, 150, 280, 12, 8,  0, 0,  1,  2, 0,  0},
    {"additive [H, Tq, Tk] with -inf",                 2, 2, 190, 170, 16, 12, 0, 0,  0,  0, 1,  0},
    {"additive + causal + allowed",                    2, 2, 140, 140, 16, 12, 1, 0,  0,  1, 1,  0},
    {"query_positions (readout), causal",              3, 2, 5,   300, 16, 8,  1, 0,  1,  0, 0,  1},
    {"query_positions, window 40, 150 queries",        2, 2, 150, 300, 16, 8,  1, 40, 0,  1, 0,  1},
    {"everything at once",                             3, 2, 140, 270, 16, 12, 1, 90, 1,  1, 1,  1},
    {"d = 64, causal, T=257",                          2, 2, 257, 257, 64, 64, 1, 0,  1,  0, 0,  0},
    {"one query, one key",                             2, 2, 1,   1,   3,  2,  1, 0,  0,  0, 0,  0},
    {"one query, Tk=20000 (decoding vectors, D=16)",    3, 2, 1, 20000, 16, 16, 1, 0,  1,  0, 0,  0},
    {"one query, Tk=17000, window 16500, key mask",    2, 2, 1, 17000, 8,  8,  1, 16500, 0, 2, 0, 0},
    {"one query, D=64, Dv=32, Tk=70 (decoding vectors)", 3, 2, 1, 70,  64, 32, 1, 0,  1,  1, 0,  0},
};
enum { N_CASES = sizeof CASES / sizeof CASES[0] };

static void check_cases(lb_dtype dtype, double tol)
{
    for (int i = 0; i < N_CASES; i++) {
        const fused_case *c = &CASES[i];
        case_mask m;
        case_mask_make(c, dtype, 100 + (uint64_t)i, &m);
        attn_result rf, rm;
        int ok = run_case(c, dtype, 1, &m.mask, &rf) && run_case(c, dtype, 0, &m.mask, &rm);
        CU_ASSERT_TRUE(ok);
        if (ok) {
            CU_ASSERT_TRUE(results_close(&rf, &rm, tol, c->name));
            CU_ASSERT_TRUE(all_finite(rf.out) && all_finite(rf.dq) && all_finite(rf.dk) && all_finite(rf.dv));
        }
        result_free(&rf);
        result_free(&rm);
        case_mask_free(&m);
    }
}

static void check_cases_f64(void) { check_cases(LB_FLOAT64, 1e-12); }
static void check_cases_f32(void) { check_cases(LB_FLOAT32, 1e-5); }
static void test_fused_matches_materialized_f64(void) { for_each_isa(check_cases_f64); }
static void test_fused_matches_materialized_f32(void) { for_each_isa(check_cases_f32); }

/* The float32 tile products' shapes (kernels/tile_micro_internal.h): widths
 * D and Dv from 1 to 80 give every number of vectors per strip (1 to 4 of 16 lanes, 1 to
 * 2 of 8), a second strip past 64 columns, partial last vectors, and row counts that
 * leave rows after the register blocks; Tq = 8 is the smallest problem packed, Tq = 7
 * the largest left to OpenBLAS. Every case keeps an asymmetric mask or padding. */
static const fused_case PRODUCT_CASES[] = {
    /* name                                  B  H  Tq   Tk   D   Dv  causal win len al add pos */
    {"D=1, Dv=17, Tq=8 (packed)",           2, 2, 8,   37,  1,  17, 1, 0,  1,  1, 0,  0},
    {"D=33, Dv=48, Tq=7 (OpenBLAS)",        2, 2, 7,   70,  33, 48, 0, 0,  1,  1, 0,  0},
    {"D=80, Dv=65 (two strips)",            2, 2, 150, 140, 80, 65, 1, 0,  1,  1, 0,  0},
    {"D=48, Dv=32, key mask",               3, 2, 131, 200, 48, 32, 1, 0,  1,  2, 0,  0},
    {"D=16, Dv=16, T=257",                  2, 2, 257, 257, 16, 16, 1, 0,  1,  0, 0,  0},
    {"D=7, Dv=9, window 20, additive",      3, 2, 90,  90,  7,  9,  0, 20, 1,  0, 1,  0},
};
enum { N_PRODUCT_CASES = sizeof PRODUCT_CASES / sizeof PRODUCT_CASES[0] };

static void check_product_cases(void)
{
    for (int i = 0; i < N_PRODUCT_CASES; i++) {
        const fused_case *c = &PRODUCT_CASES[i];
        case_mask m;
        case_mask_make(c, LB_FLOAT32, 300 + (uint64_t)i, &m);
        attn_result rf, rm;
        int ok = run_case(c, LB_FLOAT32, 1, &m.mask, &rf) && run_case(c, LB_FLOAT32, 0, &m.mask, &rm);
        CU_ASSERT_TRUE(ok);
        if (ok)
            CU_ASSERT_TRUE(results_close(&rf, &rm, 1e-5, c->name));
        result_free(&rf);
        result_free(&rm);
        case_mask_free(&m);
    }
}

static void test_fused_tile_product_shapes(void) { for_each_isa(check_product_cases); }

/* Fully masked rows: zeros forward, exactly zero dq backward, no NaN, even when the
 * scores of masked keys overflow. Padding length 0 (item 1), an allowed row of zeros
 * (query 1), queries before the first key (causal, Tq > Tk), an additive -inf row. */
static void test_fused_fully_masked_rows(void)
{
    for (int dt = 0; dt < 2; dt++) {
        lb_dtype dtype = dt ? LB_FLOAT32 : LB_FLOAT64;
        int64_t b = 2, h = 2, tq = 140, tk = 130, d = 5, dv = 3;
        int64_t sq[4] = {b, h, tq, d}, sk[4] = {b, h, tk, d}, sv[4] = {b, h, tk, dv}, sm[2] = {tq, tk};
        int32_t lengths[2] = {97, 0};
        lb_tensor *allowed = lb_tensor_zeros(LB_FLOAT64, 2, sm);
        lb_tensor_fill(allowed, 1);
        for (int64_t j = 0; j < tk; j++)
            ((double *)lb_tensor_data(allowed))[1 * tk + j] = 0;
        lb_attn_mask mask = {.allowed = allowed, .causal = 1, .key_lengths = lengths};
        lb_graph *g = lb_graph_new();
        lb_var *q = lb_input(g, lb_test_uniform(dtype, 4, sq, 1, -3, 3), 1);
        lb_var *k = lb_input(g, lb_test_uniform(dtype, 4, sk, 2, -3, 3), 1);
        lb_var *v = lb_input(g, lb_test_uniform(dtype, 4, sv, 3, -1, 1), 1);
        /* A huge key that only padded positions hold: it must not reach exp. */
        LB_DISPATCH(dtype, T, {
            T *pk = lb_tensor_data(k->value);
            for (int64_t j = 100; j < tk; j++)
                pk[j * d] = (T)1e30;
        });
        lb_var *out = lb_attention_fused(g, q, k, v, &mask, 0.5);
        CU_ASSERT_PTR_NOT_NULL_FATAL(out);
        lb_tensor *go = lb_test_uniform(dtype, 4, out->value->shape, 4, -1, 1);
        CU_ASSERT_EQUAL(lb_backward(g, out, go), LB_OK);
        CU_ASSERT_TRUE(all_finite(out->value) && all_finite(q->grad) && all_finite(k->grad) && all_finite(v->grad));
        /* causal with Tq - Tk = 10: queries 0..9 see no key; query 1 sees none anyway */
        int bad = 0;
        for (int64_t hh = 0; hh < h; hh++)
            for (int64_t i = 0; i < tq; i++) {
                int masked0 = i < 10 || i == 1; /* item 0 */
                for (int64_t c = 0; c < dv; c++) {
                    double o0 = lb_tensor_flat(out->value, ((0 * h + hh) * tq + i) * dv + c);
                    double o1 = lb_tensor_flat(out->value, ((1 * h + hh) * tq + i) * dv + c); /* item 1: length 0 */
                    bad += (masked0 && o0 != 0) || o1 != 0;
                }
                for (int64_t c = 0; c < d; c++) {
                    double g0 = lb_tensor_flat(q->grad, ((0 * h + hh) * tq + i) * d + c);
                    double g1 = lb_tensor_flat(q->grad, ((1 * h + hh) * tq + i) * d + c);
                    bad += (masked0 && g0 != 0) || g1 != 0;
                }
            }
        /* keys of item 1 and padded keys of item 0 get exactly zero gradients */
        for (int64_t hh = 0; hh < h; hh++)
            for (int64_t j = 0; j < tk; j++)
                for (int64_t c = 0; c < d; c++) {
                    bad += lb_tensor_flat(k->grad, ((1 * h + hh) * tk + j) * d + c) != 0;
                    if (j >= 97)
                        bad += lb_tensor_flat(k->grad, ((0 * h + hh) * tk + j) * d + c) != 0;
                }
        CU_ASSERT_EQUAL(bad, 0);
        lb_tensor_free(go);
        lb_tensor_free(allowed);
        lb_graph_free(g);
    }
}

/* Key tiles outside every query's causal/window/padding limits are skipped, not
 * computed and masked: NaN keys and values there would otherwise reach the output
 * through P V (0 * NaN) and dq through dS K (the materialized path gives NaN
 * everywhere). T = 300; forward tiles 128 x 128, backward 64 x 128.
 *  A. causal + padding: item 0 has NaN keys 256..299: rows 0..255 stay finite
 *     (no tile of theirs reaches key 256), rows 256.. see them (NaN: they are real);
 *     item 1 has length 128 and NaN keys 128..: every row finite.
 *  B. causal + window 100, NaN keys 0..127: rows 256..299 (their tiles start at key
 *     157) stay finite; rows 0..127 see the NaN keys.
 *  C. causal + window 16 (band tiles of 16 queries), NaN keys 0..31: rows 0..46 see
 *     them; rows 48.. stay finite (with 128-row tiles rows up to 127 would be NaN). */
static int rows_finite(const lb_var *out, const lb_var *q, int64_t item, int64_t i, int64_t t)
{
    int64_t dv = out->value->shape[3], d = q->value->shape[3];
    int fin = 1;
    for (int64_t c = 0; c < dv; c++)
        fin &= isfinite(lb_tensor_flat(out->value, (item * t + i) * dv + c)) != 0;
    for (int64_t c = 0; c < d; c++)
        fin &= isfinite(lb_tensor_flat(q->grad, (item * t + i) * d + c)) != 0;
    return fin;
}

static void test_fused_skips_tiles(void)
{
    for (int dt = 0; dt < 2; dt++)
        for (int sub = 0; sub < 3; sub++) {
            lb_dtype dtype = dt ? LB_FLOAT32 : LB_FLOAT64;
            int64_t b = 2, t = 300, d = 8, dv = 4;
            int64_t sq[4] = {b, 1, t, d}, sv[4] = {b, 1, t, dv};
            int32_t lengths[2] = {300, 128};
            lb_attn_mask mask = sub == 0   ? (lb_attn_mask){.causal = 1, .key_lengths = lengths}
                                : sub == 1 ? (lb_attn_mask){.causal = 1, .window = 100}
                                           : (lb_attn_mask){.causal = 1, .window = 16};
            lb_graph *g = lb_graph_new();
            lb_var *q = lb_input(g, lb_test_uniform(dtype, 4, sq, 61, -1, 1), 1);
            lb_var *k = lb_input(g, lb_test_uniform(dtype, 4, sq, 62, -1, 1), 1);
            lb_var *v = lb_input(g, lb_test_uniform(dtype, 4, sv, 63, -1, 1), 1);
            LB_DISPATCH(dtype, T, {
                T *pk = lb_tensor_data(k->value), *pv = lb_tensor_data(v->value);
                for (int64_t bb = 0; bb < b; bb++)
                    for (int64_t j = 0; j < t; j++) {
                        int hidden = sub == 2 ? j < 32 : sub == 1 ? j < 128 : bb == 0 ? j >= 256 : j >= 128;
                        for (int64_t c = 0; hidden && c < d; c++)
                            pk[(bb * t + j) * d + c] = (T)NAN;
                        for (int64_t c = 0; hidden && c < dv; c++)
                            pv[(bb * t + j) * dv + c] = (T)NAN;
                    }
            });
            lb_var *out = lb_attention_fused(g, q, k, v, &mask, 0.4);
            CU_ASSERT_PTR_NOT_NULL_FATAL(out);
            lb_tensor *go = lb_test_uniform(dtype, 4, out->value->shape, 64, -1, 1);
            CU_ASSERT_EQUAL(lb_backward(g, out, go), LB_OK);
            int want_finite = 0, finite = 0, want_nan = 0, nan = 0;
            for (int64_t bb = 0; bb < b; bb++)
                for (int64_t i = 0; i < t; i++) {
                    int fin = rows_finite(out, q, bb, i, t);
                    int should_be_finite = sub == 0 ? (bb == 1 || i < 256) : sub == 1 ? i >= 256 : i >= 48;
                    int should_be_nan = sub == 0 ? (bb == 0 && i >= 256) : sub == 1 ? i < 128 : i <= 46;
                    want_finite += should_be_finite;
                    finite += should_be_finite && fin;
                    want_nan += should_be_nan;
                    nan += should_be_nan && !fin;
                }
            CU_ASSERT_EQUAL(finite, want_finite);
            CU_ASSERT_EQUAL(nan, want_nan);
            lb_tensor_free(go);
            lb_graph_free(g);
        }
}

/* ---- gradcheck (float64, lb_gradcheck: central differences, eps 1e-6) ---- */

typedef struct grad_case {
    lb_attn_mask mask;
    double scale;
} grad_case;

static lb_var *fused_fn(lb_graph *g, lb_var *const *p, void *user)
{
    grad_case *c = user;
    return lb_attention_fused(g, p[0], p[1], p[2], &c->mask, c->scale);
}

static void gradcheck_case(int64_t b, int64_t h, int64_t tq, int64_t tk, int64_t d, int64_t dv, grad_case *c,
                           uint64_t seed)
{
    int64_t sq[4] = {b, h, tq, d}, sk[4] = {b, h, tk, d}, sv[4] = {b, h, tk, dv};
    lb_var *p[3] = {lb_test_uniform_param(4, sq, seed, -1, 1, "q"), lb_test_uniform_param(4, sk, seed + 1, -1, 1, "k"),
                    lb_test_uniform_param(4, sv, seed + 2, -1, 1, "v")};
    lb_gradcheck_leaf rep[3];
    lb_status st = lb_gradcheck(fused_fn, c, 3, p, NULL, rep);
    if (st != LB_OK) {
        fprintf(stderr, "\n  %s\n", lb_last_error());
        lb_gradcheck_print(stderr, 3, p, rep);
    }
    CU_ASSERT_EQUAL(st, LB_OK);
    CU_ASSERT_TRUE(rep[0].passed && rep[1].passed && rep[2].passed);
    CU_ASSERT_TRUE(rep[0].index >= 0 && rep[1].index >= 0 && rep[2].index >= 0);
    for (int i = 0; i < 3; i++)
        lb_param_free(p[i]);
}

static void gradcheck_cases(void)
{
    /* Small, every mask: q [2, 2, 5, 3], k [2, 2, 7, 3], v [2, 2, 7, 2]. */
    int64_t sm[2] = {5, 7};
    double add[35];
    for (int i = 0; i < 35; i++)
        add[i] = i % 6 == 4 ? -INFINITY : 0.3 * sin(1.3 * i);
    const double allowed_v[35] = {1, 1, 0, 1, 1, 1, 0, /* */ 0, 0, 0, 0, 0, 0, 0, /* row 1: none */
                                  1, 0, 1, 1, 1, 0, 1, 1, 1, 1, 0, 1, 1, 1, 0, 1, 1, 1, 1, 1, 1};
    lb_tensor *additive = lb_tensor_from_doubles(LB_FLOAT64, 2, sm, add);
    lb_tensor *allowed = lb_tensor_from_doubles(LB_FLOAT64, 2, sm, allowed_v);
    int32_t lengths[2] = {7, 4};
    grad_case c = {{.allowed = allowed, .additive = additive, .causal = 1, .window = 5, .key_lengths = lengths}, 0.7};
    gradcheck_case(2, 2, 5, 7, 3, 2, &c, 201);
    /* query positions (readout-like), Tq > Tk without them */
    int32_t pos[6] = {6, 2, 4, 0, 5, 3};
    grad_case c2 = {{.causal = 1, .window = 3, .key_lengths = lengths, .query_positions = pos}, 0.9};
    gradcheck_case(2, 1, 3, 7, 4, 3, &c2, 211);
    grad_case c3 = {{.causal = 1}, 0.6};
    gradcheck_case(2, 1, 9, 4, 2, 3, &c3, 221);
    /* Across tiles: Tq = Tk = 135 cuts the 128- and 64-row tiles; causal and padding. */
    int32_t lengths2[2] = {135, 70};
    grad_case c4 = {{.causal = 1, .key_lengths = lengths2}, 0.8};
    gradcheck_case(2, 1, 135, 135, 2, 1, &c4, 231);
    lb_tensor_free(additive);
    lb_tensor_free(allowed);
}

static void test_fused_gradcheck(void) { for_each_isa(gradcheck_cases); }

/* A deliberately wrong backward must fail: scale the gradient of k by 1.01 afterwards. */
static lb_status wrong_backward(lb_var *node)
{
    lb_var *x = node->inputs[0];
    lb_tensor *g = lb_tensor_copy(node->grad, node->grad->dtype);
    LB_DISPATCH(g->dtype, T, {
        T *p = lb_tensor_data(g);
        p[0] *= (T)1.01;
    });
    lb_status st = lb_accumulate_grad(x, g);
    lb_tensor_free(g);
    return st;
}

static lb_var *wrong_fn(lb_graph *g, lb_var *const *p, void *user)
{
    lb_var *out = fused_fn(g, p, user);
    lb_tensor *val = lb_tensor_copy(out->value, out->value->dtype);
    lb_var *in[1] = {out};
    return lb_custom(g, 1, in, val, wrong_backward, NULL, NULL);
}

static void test_gradcheck_catches_wrong_gradient(void)
{
    int64_t sq[4] = {2, 1, 3, 2}, sk[4] = {2, 1, 4, 2}, sv[4] = {2, 1, 4, 2};
    lb_var *p[3] = {lb_test_uniform_param(4, sq, 5, -1, 1, "q"), lb_test_uniform_param(4, sk, 6, -1, 1, "k"),
                    lb_test_uniform_param(4, sv, 7, -1, 1, "v")};
    grad_case c = {{.causal = 1}, 0.7};
    CU_ASSERT_EQUAL(lb_gradcheck(wrong_fn, &c, 3, p, NULL, NULL), LB_ERR_NUMERIC);
    for (int i = 0; i < 3; i++)
        lb_param_free(p[i]);
}

/* ---- grouped-query attention and ALiBi ---- */

/* A case with kv_heads key/value heads and, with alibi, ALiBi's slopes of c.h heads. */
typedef struct grouped_case {
    fused_case c;
    int64_t kv_heads;
    int alibi;
} grouped_case;

static const grouped_case GROUPED_CASES[] = {
    /*  name                                          B  H  Tq   Tk    D   Dv  causal win len al add pos  kv alibi */
    {{"GQA 4 / 2, causal, padding, T=300",             2, 4, 300, 300,  16, 12, 1, 0,  1,  0, 0,  0}, 2, 0},
    {{"MQA 6 / 1, allowed with a masked row",         2, 6, 200, 230,  16, 8,  0, 0,  0,  1, 0,  0}, 1, 0},
    {{"ALiBi 4 heads, causal, padding",                3, 4, 260, 260,  16, 12, 1, 0,  1,  0, 0,  0}, 4, 1},
    {{"ALiBi 6 heads (not a power of 2), not causal", 2, 6, 150, 170,  8,  8,  0, 0,  0,  1, 0,  0}, 6, 1},
    {{"ALiBi + GQA 4 / 2, window 40, additive",        3, 4, 190, 190,  16, 16, 1, 40, 1,  0, 1,  0}, 2, 1},
    {{"ALiBi + GQA, query positions (readout)",        3, 4, 5,   300,  16, 8,  1, 0,  1,  0, 0,  1}, 2, 1},
    {{"ALiBi + MQA, one query (decoding), Tk=5000",    3, 4, 1,   5000, 16, 16, 1, 0,  1,  0, 0,  0}, 1, 1},
    {{"ALiBi + GQA, window 20 (band tiles)",           2, 4, 90,  90,   16, 16, 1, 20, 1,  1, 0,  0}, 2, 1},
    {{"ALiBi + GQA 8 / 2, Tq=7 (OpenBLAS), key mask",  3, 8, 7,   70,   16, 8,  1, 0,  1,  2, 0,  0}, 2, 1},
};
enum { N_GROUPED_CASES = sizeof GROUPED_CASES / sizeof GROUPED_CASES[0] };

/* ALiBi's bias written out, -m_h |pos(i) - j| (+ the case's additive mask), as one additive
 * mask [B, H, Tq, Tk]: the reference the slopes are checked against. */
static lb_tensor *alibi_as_additive(const fused_case *c, const case_mask *m, const double *slopes, lb_dtype dtype)
{
    int64_t s[4] = {c->b, c->h, c->tq, c->tk};
    lb_tensor *t = lb_tensor_zeros(dtype, 4, s);
    for (int64_t b = 0; b < c->b; b++)
        for (int64_t h = 0; h < c->h; h++)
            for (int64_t i = 0; i < c->tq; i++)
                for (int64_t j = 0; j < c->tk; j++) {
                    int64_t pos = m->positions ? m->positions[b * c->tq + i] : i + (c->tk - c->tq);
                    double v = -slopes[h] * fabs((double)(pos - j));
                    if (m->additive)
                        v += LB_FLOAT64 == dtype ? ((const double *)lb_tensor_data(m->additive))[(h * c->tq + i) * c->tk + j]
                                                 : ((const float *)lb_tensor_data(m->additive))[(h * c->tq + i) * c->tk + j];
                    LB_DISPATCH(dtype, T, { ((T *)lb_tensor_data(t))[((b * c->h + h) * c->tq + i) * c->tk + j] = (T)v; });
                }
    return t;
}

/* The fused kernels with grouped key/value heads and ALiBi's slopes = the materialized
 * path with the heads repeated and the bias written out as an additive mask (and = the
 * materialized path given the slopes); finite everywhere, fully masked rows included. */
static void check_grouped(lb_dtype dtype, double tol)
{
    for (int i = 0; i < N_GROUPED_CASES; i++) {
        const grouped_case *gc = &GROUPED_CASES[i];
        const fused_case *c = &gc->c;
        case_mask m;
        case_mask_make(c, dtype, 500 + (uint64_t)i, &m);
        double slopes[16];
        CU_ASSERT_EQUAL_FATAL(lb_alibi_slopes((int)c->h, slopes), LB_OK);
        lb_attn_mask with = m.mask, reference = m.mask;
        lb_tensor *bias = NULL;
        if (gc->alibi) {
            with.alibi_slopes = slopes;
            with.alibi_heads = c->h;
            bias = alibi_as_additive(c, &m, slopes, dtype);
            reference.additive = bias;
        }
        attn_result rf, rm, rs;
        int ok = run_case_kv(c, gc->kv_heads, dtype, 1, &with, &rf) &&
                 run_case_kv(c, gc->kv_heads, dtype, 0, &reference, &rm) &&
                 run_case_kv(c, gc->kv_heads, dtype, 0, &with, &rs);
        CU_ASSERT_TRUE(ok);
        if (ok) {
            CU_ASSERT_TRUE(results_close(&rf, &rm, tol, c->name));
            CU_ASSERT_TRUE(results_close(&rs, &rm, tol, c->name));
            CU_ASSERT_TRUE(all_finite(rf.out) && all_finite(rf.dq) && all_finite(rf.dk) && all_finite(rf.dv));
            /* dK and dV hold one gradient per key/value head */
            CU_ASSERT_EQUAL(rf.dk->shape[1], gc->kv_heads);
            CU_ASSERT_EQUAL(rf.dv->shape[1], gc->kv_heads);
        }
        result_free(&rf);
        result_free(&rm);
        result_free(&rs);
        lb_tensor_free(bias);
        case_mask_free(&m);
    }
}

static void check_grouped_f64(void) { check_grouped(LB_FLOAT64, 1e-12); }
static void check_grouped_f32(void) { check_grouped(LB_FLOAT32, 1e-5); }
static void test_fused_grouped_alibi_f64(void) { for_each_isa(check_grouped_f64); }
static void test_fused_grouped_alibi_f32(void) { for_each_isa(check_grouped_f32); }

/* ALiBi's slopes: the paper's geometric sequence for 8 heads, its rule for 6 and 12. */
static void test_alibi_slopes(void)
{
    double s[12];
    CU_ASSERT_EQUAL(lb_alibi_slopes(8, s), LB_OK);
    for (int h = 0; h < 8; h++)
        CU_ASSERT_DOUBLE_EQUAL(s[h], pow(0.5, h + 1), 0);
    CU_ASSERT_EQUAL(lb_alibi_slopes(6, s), LB_OK); /* 4 heads' 2^-2, 2^-4, 2^-6, 2^-8, then 8 heads' 2^-1, 2^-3 */
    const double six[6] = {0.25, 0x1p-4, 0x1p-6, 0x1p-8, 0.5, 0.125};
    for (int h = 0; h < 6; h++)
        CU_ASSERT_DOUBLE_EQUAL(s[h], six[h], 0);
    CU_ASSERT_EQUAL(lb_alibi_slopes(12, s), LB_OK); /* 8 heads' 2^-1 .. 2^-8, then 16 heads' 2^-0.5, 2^-1.5, ... */
    CU_ASSERT_DOUBLE_EQUAL(s[7], 0x1p-8, 0);
    CU_ASSERT_DOUBLE_EQUAL(s[8], pow(2.0, -0.5), 1e-16);
    CU_ASSERT_DOUBLE_EQUAL(s[11], pow(2.0, -3.5), 1e-16);
    CU_ASSERT_EQUAL(lb_alibi_slopes(1, s), LB_OK);
    CU_ASSERT_DOUBLE_EQUAL(s[0], 0x1p-8, 0);
    CU_ASSERT_EQUAL(lb_alibi_slopes(0, s), LB_ERR_VALUE);
}

/* Grouped key/value heads that do not divide the query heads, and slopes that do not
 * match the heads, are refused with the shapes named. */
static void test_fused_grouped_errors(void)
{
    lb_graph *g = lb_graph_new();
    int64_t sq[4] = {2, 4, 5, 8}, sk[4] = {2, 3, 6, 8};
    lb_var *q = lb_input(g, lb_tensor_zeros(LB_FLOAT64, 4, sq), 1);
    lb_var *k = lb_input(g, lb_tensor_zeros(LB_FLOAT64, 4, sk), 1);
    CU_ASSERT_PTR_NULL(lb_attention_fused(g, q, k, k, NULL, 0.5));
    CU_ASSERT_TRUE(lb_test_error_has("[2, 3, 6, 8]"));
    int64_t sk2[4] = {2, 2, 6, 8};
    lb_var *k2 = lb_input(g, lb_tensor_zeros(LB_FLOAT64, 4, sk2), 1);
    double slopes[3] = {0.5, 0.25, 0.125};
    lb_attn_mask mask = {0};
    mask.alibi_slopes = slopes;
    mask.alibi_heads = 3;
    CU_ASSERT_PTR_NULL(lb_attention_fused(g, q, k2, k2, &mask, 0.5));
    CU_ASSERT_TRUE(lb_test_error_has("ALiBi"));
    mask.alibi_heads = 4;
    double four[4] = {0.5, 0.25, -1, 0.125};
    mask.alibi_slopes = four;
    CU_ASSERT_PTR_NULL(lb_attention_fused(g, q, k2, k2, &mask, 0.5));
    CU_ASSERT_TRUE(lb_test_error_has("slope 2"));
    lb_graph_free(g);
}

/* ---- threads and reproducibility ---- */

static const fused_case REPRO = {"repro", 2, 3, 300, 300, 32, 32, 1, 0, 1, 0, 0, 0};

/* The same call twice with 2 threads gives identical bits, and 1 thread gives the same
 * bits as 2 (the kernels' work split does not depend on the thread count). */
static void reproducible_across_threads(void)
{
    int before = lb_get_num_threads();
    for (int dt = 0; dt < 2; dt++) {
        lb_dtype dtype = dt ? LB_FLOAT32 : LB_FLOAT64;
        case_mask m;
        case_mask_make(&REPRO, dtype, 7, &m);
        attn_result a, b, c;
        lb_set_num_threads(2);
        CU_ASSERT_EQUAL(lb_get_num_threads(), 2);
        CU_ASSERT_TRUE(run_case(&REPRO, dtype, 1, &m.mask, &a));
        CU_ASSERT_TRUE(run_case(&REPRO, dtype, 1, &m.mask, &b));
        lb_set_num_threads(1);
        CU_ASSERT_EQUAL(lb_get_num_threads(), 1);
        CU_ASSERT_TRUE(run_case(&REPRO, dtype, 1, &m.mask, &c));
        CU_ASSERT_TRUE(results_same_bits(&a, &b));
        CU_ASSERT_TRUE(results_same_bits(&a, &c));
        result_free(&a);
        result_free(&b);
        result_free(&c);
        case_mask_free(&m);
        /* grouped key/value heads (the backward's items own a key/value head and go
         * through its query heads) with ALiBi */
        const grouped_case *gc = &GROUPED_CASES[4];
        double slopes[4];
        lb_alibi_slopes(4, slopes);
        case_mask_make(&gc->c, dtype, 8, &m);
        m.mask.alibi_slopes = slopes;
        m.mask.alibi_heads = 4;
        lb_set_num_threads(2);
        CU_ASSERT_TRUE(run_case_kv(&gc->c, gc->kv_heads, dtype, 1, &m.mask, &a));
        lb_set_num_threads(1);
        CU_ASSERT_TRUE(run_case_kv(&gc->c, gc->kv_heads, dtype, 1, &m.mask, &c));
        CU_ASSERT_TRUE(results_same_bits(&a, &c));
        result_free(&a);
        result_free(&c);
        case_mask_free(&m);
    }
    lb_set_num_threads(before);
}

static void test_fused_reproducible_across_threads(void) { for_each_isa(reproducible_across_threads); }

/* Every build of the elementwise loops the CPU can run agrees with the automatic
 * choice (LOOKBACK_ISA's build, else the best of them); builds the CPU lacks and
 * unknown builds are refused. */
static const lb_isa_build BUILDS[] = {LB_BUILD_AVX512, LB_BUILD_AVX2, LB_BUILD_GENERIC}; /* as ISAS */

static void test_fused_every_isa(void)
{
    const char *best = lb_k_attention_isa();
    int best_i = -1, runnable = 0;
    for (int i = 0; i < N_ISAS; i++) {
        CU_ASSERT_STRING_EQUAL(lb_isa_name(BUILDS[i]), ISAS[i]);
        if (strcmp(best, ISAS[i]) == 0)
            best_i = i;
        runnable += lb_isa_cpu_runs(BUILDS[i]);
    }
    CU_ASSERT_TRUE(best_i >= 0);
    CU_ASSERT_TRUE(lb_isa_cpu_runs(LB_BUILD_GENERIC));
    const fused_case *c = &CASES[14]; /* everything at once */
    case_mask m;
    case_mask_make(c, LB_FLOAT32, 9, &m);
    attn_result a;
    CU_ASSERT_TRUE(run_case(c, LB_FLOAT32, 1, &m.mask, &a));
    int ran = 0;
    for (int i = 0; i < N_ISAS; i++) {
        lb_status st = lb_k_attention_set_isa(ISAS[i]);
        if (!lb_isa_cpu_runs(BUILDS[i])) { /* this CPU lacks it */
            CU_ASSERT_EQUAL(st, LB_ERR_VALUE);
            CU_ASSERT_PTR_NOT_NULL(strstr(lb_last_error(), ISAS[i]));
            CU_ASSERT_STRING_EQUAL(lb_k_attention_isa(), best);
            continue;
        }
        CU_ASSERT_EQUAL_FATAL(st, LB_OK);
        CU_ASSERT_STRING_EQUAL(lb_k_attention_isa(), ISAS[i]);
        CU_ASSERT_EQUAL(lb_isa(), BUILDS[i]);
        attn_result b;
        CU_ASSERT_TRUE(run_case(c, LB_FLOAT32, 1, &m.mask, &b));
        CU_ASSERT_TRUE(results_close(&a, &b, 1e-6, ISAS[i]));
        if (i == best_i)
            CU_ASSERT_TRUE(results_same_bits(&a, &b));
        result_free(&b);
        ran++;
    }
    CU_ASSERT_EQUAL(ran, runnable);
    CU_ASSERT_EQUAL(lb_k_attention_set_isa("sse9"), LB_ERR_VALUE);
    CU_ASSERT_PTR_NOT_NULL(strstr(lb_last_error(), "sse9"));
    CU_ASSERT_STRING_EQUAL(lb_k_attention_isa(), "generic"); /* unchanged by the refusal */
    CU_ASSERT_EQUAL(lb_k_attention_set_isa(NULL), LB_OK);
    CU_ASSERT_STRING_EQUAL(lb_k_attention_isa(), best);
    result_free(&a);
    case_mask_free(&m);
}

static void test_fused_mask_copied(void)
{
    const fused_case *c = &CASES[14];
    case_mask m;
    case_mask_make(c, LB_FLOAT64, 21, &m);
    attn_result want;
    CU_ASSERT_TRUE_FATAL(run_case(c, LB_FLOAT64, 0, &m.mask, &want));
    int64_t sq[4] = {c->b, c->h, c->tq, c->d}, sk[4] = {c->b, c->h, c->tk, c->d}, sv[4] = {c->b, c->h, c->tk, c->dv};
    int64_t so[4] = {c->b, c->h, c->tq, c->dv};
    lb_graph *g = lb_graph_new();
    lb_var *q = lb_input(g, lb_test_uniform(LB_FLOAT64, 4, sq, 11, -1.5, 1.5), 1);
    lb_var *k = lb_input(g, lb_test_uniform(LB_FLOAT64, 4, sk, 12, -1.5, 1.5), 1);
    lb_var *v = lb_input(g, lb_test_uniform(LB_FLOAT64, 4, sv, 13, -1, 1), 1);
    lb_attn_mask *mask = malloc(sizeof *mask);
    *mask = m.mask;
    lb_var *out = lb_attention_fused(g, q, k, v, mask, 1.0 / sqrt((double)c->d));
    CU_ASSERT_PTR_NOT_NULL_FATAL(out);
    lb_tensor_fill(m.allowed, 1);
    lb_tensor_fill(m.additive, 0);
    memset(m.lengths, 0, sizeof m.lengths);
    memset(m.positions, 0, (size_t)(c->b * c->tq) * sizeof *m.positions);
    case_mask_free(&m);
    free(mask);
    lb_var *rv = lb_input(g, lb_test_uniform(LB_FLOAT64, 4, so, 14, -1, 1), 0);
    CU_ASSERT_EQUAL(lb_backward(g, lb_sum(g, lb_mul(g, out, rv)), NULL), LB_OK);
    LB_ASSERT_TENSORS_CLOSE(out->value, want.out, 1e-12, 1e-12);
    LB_ASSERT_TENSORS_CLOSE(q->grad, want.dq, 1e-12, 1e-12);
    LB_ASSERT_TENSORS_CLOSE(k->grad, want.dk, 1e-12, 1e-12);
    LB_ASSERT_TENSORS_CLOSE(v->grad, want.dv, 1e-12, 1e-12);
    result_free(&want);
    lb_graph_free(g);
}

/* Inside a step (a graph's pool is the thread's pool) the kernels take their tile
 * buffers and packed keys from the pool: the second call allocates nothing new, gives
 * everything back, and computes the same bits. */
static void test_fused_scratch_from_pool(void)
{
    int64_t s[4] = {2, 2, 300, 64}, sl[3] = {2, 2, 300};
    lb_tensor *q = lb_test_uniform(LB_FLOAT32, 4, s, 41, -1, 1), *k = lb_test_uniform(LB_FLOAT32, 4, s, 42, -1, 1);
    lb_tensor *v = lb_test_uniform(LB_FLOAT32, 4, s, 43, -1, 1), *go = lb_test_uniform(LB_FLOAT32, 4, s, 44, -1, 1);
    lb_attn_kmask mask = {.causal = 1};
    lb_tensor *out[2], *dq[2];
    lb_pool *pool = lb_pool_new();
    CU_ASSERT_PTR_NOT_NULL_FATAL(pool);
    lb_pool_stats st[2];
    for (int call = 0; call < 2; call++) {
        out[call] = lb_tensor_zeros(LB_FLOAT32, 4, s); /* outside the pool */
        dq[call] = lb_tensor_zeros(LB_FLOAT32, 4, s);
        lb_tensor *lse = lb_tensor_zeros(LB_FLOAT32, 3, sl), *dk = lb_tensor_zeros(LB_FLOAT32, 4, s);
        lb_tensor *dv = lb_tensor_zeros(LB_FLOAT32, 4, s);
        lb_pool *before = lb_pool_use(pool);
        CU_ASSERT_EQUAL(lb_k_attention_forward(q, k, v, &mask, 0.125, out[call], lse), LB_OK);
        CU_ASSERT_EQUAL(lb_k_attention_backward(q, k, v, out[call], lse, &mask, 0.125, go, dq[call], dk, dv), LB_OK);
        lb_pool_use(before);
        lb_pool_get_stats(pool, &st[call]);
        CU_ASSERT_EQUAL(st[call].in_use_bytes, 0); /* every buffer given back */
        lb_tensor_free(lse);
        lb_tensor_free(dk);
        lb_tensor_free(dv);
    }
    /* first call: the tile buffers and packed Kᵀ (forward), Kᵀ, Vᵀ and dq groups (backward);
     * the baseline build packs nothing (its products go to OpenBLAS) */
    const int packs = strcmp(lb_k_attention_isa(), "generic") != 0;
    CU_ASSERT_TRUE(st[0].misses >= (packs ? 3 : 2));
    CU_ASSERT_EQUAL(st[1].misses, st[0].misses);
    CU_ASSERT_TRUE(st[1].hits - st[0].hits >= (packs ? 3 : 2));
    CU_ASSERT_EQUAL(memcmp(lb_tensor_data(out[0]), lb_tensor_data(out[1]), (size_t)lb_tensor_numel(out[0]) * 4), 0);
    CU_ASSERT_EQUAL(memcmp(lb_tensor_data(dq[0]), lb_tensor_data(dq[1]), (size_t)lb_tensor_numel(dq[0]) * 4), 0);
    lb_pool_free(pool);
    for (int i = 0; i < 2; i++) {
        lb_tensor_free(out[i]);
        lb_tensor_free(dq[i]);
    }
    lb_tensor_free(q);
    lb_tensor_free(k);
    lb_tensor_free(v);
    lb_tensor_free(go);
}

/* q = k = v = one variable: its gradient is the sum of the three. */
static void test_fused_same_input_three_times(void)
{
    int64_t s[4] = {2, 2, 150, 6};
    int32_t lengths[2] = {150, 77};
    lb_attn_mask mask = {.causal = 1, .key_lengths = lengths};
    lb_tensor *grads[2];
    for (int fused = 0; fused < 2; fused++) {
        lb_graph *g = lb_graph_new();
        lb_var *x = lb_input(g, lb_test_uniform(LB_FLOAT64, 4, s, 31, -1, 1), 1);
        lb_var *out = fused ? lb_attention_fused(g, x, x, x, &mask, 0.4) : materialized(g, x, x, x, &mask, 0.4);
        lb_tensor *go = lb_test_uniform(LB_FLOAT64, 4, s, 32, -1, 1);
        CU_ASSERT_EQUAL(lb_backward(g, out, go), LB_OK);
        grads[fused] = lb_tensor_copy(x->grad, LB_FLOAT64);
        lb_tensor_free(go);
        lb_graph_free(g);
    }
    LB_ASSERT_TENSORS_CLOSE(grads[1], grads[0], 1e-12, 1e-12);
    lb_tensor_free(grads[0]);
    lb_tensor_free(grads[1]);
}

/* ---- query_positions in lb_masked_softmax ---- */

/* Scores [B=2, H=1, Tq=3, Tk=6] with positions {5, 1, 3 | 0, 4, 2}: causal + window 2
 * keep exactly the keys pos-1..pos, i.e. the explicit allowed mask below. */
static void test_masked_softmax_query_positions(void)
{
    int64_t s[4] = {2, 1, 3, 6}, sm[4] = {2, 1, 3, 6};
    int32_t pos[6] = {5, 1, 3, 0, 4, 2};
    double al[36] = {0};
    for (int b = 0; b < 2; b++)
        for (int i = 0; i < 3; i++) {
            int p = pos[b * 3 + i];
            for (int j = p - 1; j <= p; j++)
                if (j >= 0)
                    al[(b * 3 + i) * 6 + j] = 1;
        }
    lb_tensor *allowed = lb_tensor_from_doubles(LB_FLOAT64, 4, sm, al);
    lb_graph *g = lb_graph_new();
    lb_var *xa = lb_input(g, lb_test_uniform(LB_FLOAT64, 4, s, 41, -2, 2), 1);
    lb_var *xb = lb_input(g, lb_test_uniform(LB_FLOAT64, 4, s, 41, -2, 2), 1);
    lb_attn_mask mp = {.causal = 1, .window = 2, .query_positions = pos}, ma = {.allowed = allowed};
    lb_var *wa = lb_masked_softmax(g, xa, &mp, 0.8), *wb = lb_masked_softmax(g, xb, &ma, 0.8);
    CU_ASSERT_PTR_NOT_NULL_FATAL(wa);
    LB_ASSERT_TENSORS_CLOSE(wa->value, wb->value, 0, 0);
    CU_ASSERT_EQUAL(lb_tensor_flat(wa->value, 3 * 6 + 0), 1.0); /* item 1, query 0 at key 0: only key 0 */
    lb_tensor *go = lb_test_uniform(LB_FLOAT64, 4, s, 42, -1, 1);
    CU_ASSERT_EQUAL(lb_backward(g, lb_add(g, wa, wb), go), LB_OK);
    LB_ASSERT_TENSORS_CLOSE(xa->grad, xb->grad, 0, 0);
    /* causal alone: j <= pos; without causal or window the positions change nothing */
    lb_graph_reset(g);
    lb_var *x = lb_input(g, lb_test_uniform(LB_FLOAT64, 4, s, 43, -2, 2), 0);
    lb_attn_mask only = {.query_positions = pos};
    lb_var *w0 = lb_masked_softmax(g, x, &only, 1.0), *w1 = lb_masked_softmax(g, x, NULL, 1.0);
    LB_ASSERT_TENSORS_CLOSE(w0->value, w1->value, 0, 0);
    lb_attn_mask causal = {.causal = 1, .query_positions = pos};
    lb_var *wc = lb_masked_softmax(g, x, &causal, 1.0);
    int bad = 0;
    for (int r = 0; r < 6; r++)
        for (int j = 0; j < 6; j++)
            bad += (j > pos[r]) != (lb_tensor_flat(wc->value, r * 6 + j) == 0);
    CU_ASSERT_EQUAL(bad, 0);
    /* past the last key (a cache holding only recent keys): causal allows every key */
    int32_t badpos[6] = {5, 1, 3, 0, 6, 2};
    lb_attn_mask mb = {.causal = 1, .query_positions = badpos};
    lb_var *wf = lb_masked_softmax(g, x, &mb, 1.0);
    CU_ASSERT_PTR_NOT_NULL_FATAL(wf);
    for (int j = 0; j < 6; j++)
        CU_ASSERT_EQUAL(lb_tensor_flat(wf->value, 4 * 6 + j), lb_tensor_flat(w1->value, 4 * 6 + j));
    /* negative: names the entry */
    badpos[4] = -1;
    CU_ASSERT_PTR_NULL(lb_masked_softmax(g, x, &mb, 1.0));
    CU_ASSERT_EQUAL(lb_last_status(), LB_ERR_VALUE);
    CU_ASSERT_PTR_NOT_NULL(strstr(lb_last_error(), "query_positions[1, 1] = -1"));
    int64_t sq[4] = {2, 1, 3, 4}, sk[4] = {2, 1, 6, 4};
    lb_var *qv = lb_input(g, lb_test_uniform(LB_FLOAT64, 4, sq, 44, -1, 1), 0);
    lb_var *kv = lb_input(g, lb_test_uniform(LB_FLOAT64, 4, sk, 45, -1, 1), 0);
    CU_ASSERT_PTR_NULL(lb_attention_fused(g, qv, kv, kv, &mb, 1.0));
    CU_ASSERT_PTR_NOT_NULL(strstr(lb_last_error(), "query_positions[1, 1] = -1"));
    lb_tensor_free(go);
    lb_tensor_free(allowed);
    lb_graph_free(g);
}

/* ---- the layers' default path ---- */

/* Single-head layer: without weights the output is the fused op's; with weights it is
 * the materialized matmul; values and every gradient agree (float64 and float32), in
 * full and readout form. */
static void test_layers_default_to_fused(void)
{
    for (int dt = 0; dt < 2; dt++) {
        lb_dtype dtype = dt ? LB_FLOAT32 : LB_FLOAT64;
        double tol = dt ? 1e-5 : 1e-12;
        lb_params ps;
        lb_params_init(&ps);
        lb_rng rng;
        lb_rng_seed(&rng, 3);
        lb_self_attention sa;
        lb_mha mha;
        CU_ASSERT_EQUAL_FATAL(lb_self_attention_init(&sa, &ps, "sa", 12, 10, 6, dtype, &rng), LB_OK);
        CU_ASSERT_EQUAL_FATAL(lb_mha_init(&mha, &ps, "mha", 12, 3, 1, 1, dtype, &rng), LB_OK);
        int64_t sx[3] = {3, 150, 12};
        int32_t lengths[3] = {150, 90, 0};
        int32_t last[3] = {149, 89, 0};
        lb_attn_queries readout = {last, 1};
        lb_attn_mask mask = {.causal = 1, .window = 70, .key_lengths = lengths};
        for (int layer = 0; layer < 2; layer++)
            for (int ro = 0; ro < 2; ro++) {
                lb_tensor *outs[2], *gx[2], *gw[2];
                for (int want_w = 0; want_w < 2; want_w++) {
                    lb_params_zero_grad(&ps);
                    lb_graph *g = lb_graph_new();
                    lb_var *x = lb_input(g, lb_test_uniform(dtype, 3, sx, 5, -1, 1), 1);
                    lb_var *w = NULL;
                    const lb_attn_queries *q = ro ? &readout : NULL;
                    lb_var *out = layer ? lb_mha_forward(g, &mha, x, &mask, q, want_w ? &w : NULL)
                                        : lb_self_attention_forward(g, &sa, x, &mask, q, want_w ? &w : NULL);
                    CU_ASSERT_PTR_NOT_NULL_FATAL(out);
                    if (layer == 0)
                        CU_ASSERT_EQUAL(out->op, want_w ? LB_OP_MATMUL : LB_OP_ATTENTION);
                    CU_ASSERT_EQUAL(w != NULL, want_w);
                    lb_tensor *go = lb_test_uniform(dtype, out->value->ndim, out->value->shape, 6, -1, 1);
                    CU_ASSERT_EQUAL(lb_backward(g, out, go), LB_OK);
                    outs[want_w] = lb_tensor_copy(out->value, dtype);
                    gx[want_w] = lb_tensor_copy(x->grad, dtype);
                    lb_var *wk = layer ? mha.w_k : sa.w_k;
                    gw[want_w] = lb_tensor_copy(wk->grad, dtype);
                    lb_tensor_free(go);
                    lb_graph_free(g);
                }
                LB_ASSERT_TENSORS_CLOSE(outs[0], outs[1], tol, tol);
                LB_ASSERT_TENSORS_CLOSE(gx[0], gx[1], tol, tol);
                LB_ASSERT_TENSORS_CLOSE(gw[0], gw[1], tol, tol);
                for (int i = 0; i < 2; i++) {
                    lb_tensor_free(outs[i]);
                    lb_tensor_free(gx[i]);
                    lb_tensor_free(gw[i]);
                }
            }
        lb_params_free(&ps);
    }
}

/* ---- errors ---- */

static void test_fused_errors(void)
{
    lb_graph *g = lb_graph_new();
    int64_t sq[4] = {2, 2, 5, 4}, sk[4] = {2, 2, 6, 4}, sk_bad[4] = {2, 2, 6, 3}, sv[4] = {2, 2, 6, 3},
            sb[4] = {2, 1, 6, 4}, sm[2] = {4, 6};
    lb_var *q = lb_input(g, lb_test_uniform(LB_FLOAT64, 4, sq, 1, -1, 1), 1);
    lb_var *k = lb_input(g, lb_test_uniform(LB_FLOAT64, 4, sk, 2, -1, 1), 1);
    lb_var *v = lb_input(g, lb_test_uniform(LB_FLOAT64, 4, sv, 3, -1, 1), 1);
    lb_var *kb = lb_input(g, lb_test_uniform(LB_FLOAT64, 4, sk_bad, 4, -1, 1), 1);
    lb_var *kh = lb_input(g, lb_test_uniform(LB_FLOAT64, 4, sb, 5, -1, 1), 1);
    /* D of k differs from q's: names all three shapes */
    CU_ASSERT_PTR_NULL(lb_attention_fused(g, q, kb, v, NULL, 1.0));
    CU_ASSERT_EQUAL(lb_last_status(), LB_ERR_SHAPE);
    CU_ASSERT_PTR_NOT_NULL(strstr(lb_last_error(), "[2, 2, 5, 4]"));
    CU_ASSERT_PTR_NOT_NULL(strstr(lb_last_error(), "[2, 2, 6, 3]"));
    /* broadcast leading dims are refused */
    CU_ASSERT_PTR_NULL(lb_attention_fused(g, q, kh, v, NULL, 1.0));
    CU_ASSERT_EQUAL(lb_last_status(), LB_ERR_SHAPE);
    /* a mask that does not broadcast to the scores [2, 2, 5, 6] */
    lb_tensor *m = lb_tensor_zeros(LB_FLOAT64, 2, sm);
    lb_attn_mask bad = {.allowed = m};
    CU_ASSERT_PTR_NULL(lb_attention_fused(g, q, k, v, &bad, 1.0));
    CU_ASSERT_EQUAL(lb_last_status(), LB_ERR_SHAPE);
    CU_ASSERT_PTR_NOT_NULL(strstr(lb_last_error(), "[4, 6]"));
    CU_ASSERT_PTR_NOT_NULL(strstr(lb_last_error(), "[2, 2, 5, 6]"));
    int32_t lengths[2] = {6, 7};
    lb_attn_mask badlen = {.key_lengths = lengths};
    CU_ASSERT_PTR_NULL(lb_attention_fused(g, q, k, v, &badlen, 1.0));
    CU_ASSERT_PTR_NOT_NULL(strstr(lb_last_error(), "key_lengths[1] = 7"));
    lb_attn_mask neg = {.window = -2};
    CU_ASSERT_PTR_NULL(lb_attention_fused(g, q, k, v, &neg, 1.0));
    CU_ASSERT_EQUAL(lb_last_status(), LB_ERR_VALUE);
    CU_ASSERT_PTR_NULL(lb_attention_fused(g, q, k, v, NULL, INFINITY));
    CU_ASSERT_EQUAL(lb_last_status(), LB_ERR_VALUE);
    /* dtypes differ */
    lb_var *v32 = lb_input(g, lb_test_uniform(LB_FLOAT32, 4, sv, 3, -1, 1), 1);
    CU_ASSERT_PTR_NULL(lb_attention_fused(g, q, k, v32, NULL, 1.0));
    CU_ASSERT_EQUAL(lb_last_status(), LB_ERR_DTYPE);
    /* a NULL input keeps the upstream error */
    lb_error(LB_ERR_SHAPE, "upstream failure");
    CU_ASSERT_PTR_NULL(lb_attention_fused(g, q, NULL, v, NULL, 1.0));
    CU_ASSERT_STRING_EQUAL(lb_last_error(), "upstream failure");
    /* no gradient wanted: evaluation mode records nothing, the value is the same */
    lb_var *o1 = lb_attention_fused(g, q, k, v, NULL, 0.5);
    lb_graph_set_grad_enabled(g, 0);
    lb_var *o2 = lb_attention_fused(g, q, k, v, NULL, 0.5);
    CU_ASSERT_FALSE(o2->requires_grad);
    CU_ASSERT_TRUE(o1->requires_grad);
    CU_ASSERT_TRUE(same_bits(o1->value, o2->value));
    lb_tensor_free(m);
    lb_graph_free(g);
}

int main(void)
{
    const lb_test_case cases[] = {
        {"fused = materialized, float64 to 1e-12 (values, dq, dk, dv; 20 mask/shape cases; every ISA build)",
         test_fused_matches_materialized_f64},
        {"fused = materialized, float32 to 1e-5 (values, dq, dk, dv; 20 mask/shape cases; every ISA build)",
         test_fused_matches_materialized_f32},
        {"float32 tile products: widths 1..80 (every block, strip and partial vector), Tq at the packing "
         "threshold = materialized to 1e-5; every ISA build",
         test_fused_tile_product_shapes},
        {"fully masked rows give zeros and zero gradients, never NaN", test_fused_fully_masked_rows},
        {"tiles outside causal/window/padding limits are skipped (NaN there never reaches the result)",
         test_fused_skips_tiles},
        {"gradcheck of the fused op w.r.t. q, k, v (float64), masks and tiles; every ISA build", test_fused_gradcheck},
        {"gradcheck fails on a deliberately wrong gradient", test_gradcheck_catches_wrong_gradient},
        {"bit-for-bit reproducible: twice with 2 threads, and 1 thread = 2 threads (also grouped heads with ALiBi); "
         "every ISA build",
         test_fused_reproducible_across_threads},
        {"every build of the loops this CPU has (avx512, avx2, generic) agrees with the automatic one",
         test_fused_every_isa},
        {"the mask is copied: the caller may free it before backward", test_fused_mask_copied},
        {"q = k = v as one variable", test_fused_same_input_three_times},
        {"the kernels' buffers come from the thread's pool: nothing new on the second call, same bits",
         test_fused_scratch_from_pool},
        {"masked_softmax query_positions = explicit mask; past the last key; range errors", test_masked_softmax_query_positions},
        {"layers default to the fused op; weights use the materialized path; they agree",
         test_layers_default_to_fused},
        {"fused op argument errors", test_fused_errors},
        {"grouped key/value heads and ALiBi: fused = materialized with repeated heads and the bias written out, "
         "float64 to 1e-12 (9 cases; every ISA build)",
         test_fused_grouped_alibi_f64},
        {"grouped key/value heads and ALiBi, float32 to 1e-5 (every ISA build)", test_fused_grouped_alibi_f32},
        {"ALiBi slopes: 8 heads 2^-1..2^-8; the paper's rule for 6, 12 and 1 heads", test_alibi_slopes},
        {"grouped heads that do not divide, wrong or negative ALiBi slopes are refused", test_fused_grouped_errors},
        {NULL, NULL},
    };
    return lb_test_main("attention_fused", cases);
}

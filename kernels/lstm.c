/* LSTM kernels (equations and named dims in kernels/lstm.h). */
#include "kernels/lstm.h"

#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "kernels/gemm.h"
#include "kernels/tile_gemm_internal.h"
#include "tensor/isa.h"
#include "tensor/kernels.h"
#include "tensor/threads.h"

#ifdef _OPENMP
#include <omp.h>
#endif

/* ---- gate rows: one (b, t) of the recurrence, forward and backward ----
 * float64 runs the equations in scalars with libm's exp and tanh (the precision
 * gradcheck needs). float32 runs them on 16-lane vectors (GCC/Clang vector
 * extensions: one AVX-512 register, an AVX2 pair or four SSE2 registers), whose sigmoid
 * and tanh come from one exp polynomial below: within a few float32 ulps of the exact
 * values, and much cheaper than libm's scalar calls (docs/log/performance-history.md,
 * "The LSTM step"). Every
 * element, the last H % 16 of a row included (computed in a zero-padded vector), goes
 * through the same sequence of IEEE operations, so the result does not depend on H's
 * alignment. */

#define LSTM_INLINE static inline __attribute__((always_inline))
/* The float32 rows are also compiled for AVX-512 and AVX2 and picked by the
 * instruction-set choice (tensor/isa.h); the builds run the same IEEE operations (no FMA
 * contraction in ISO C mode), so they give the same bits. */
#if (defined(__GNUC__) || defined(__clang__)) && defined(__x86_64__)
#define LSTM_X86 1
#endif

static inline double sigmoid_d(double x)
{
    if (x >= 0)
        return 1.0 / (1.0 + exp(-x));
    double e = exp(x);
    return e / (1.0 + e);
}

#pragma GCC diagnostic ignored "-Wpsabi" /* vectors never cross a call boundary: every helper is inlined */
typedef float vf __attribute__((vector_size(64)));  /* 16 float32 lanes */
typedef int32_t vi __attribute__((vector_size(64))); /* their bits, or a comparison's lane mask (-1 / 0) */
enum { VL = 16 };

/* Lanes j .. j+n-1 of p (n <= VL); the lanes past n are 0. */
LSTM_INLINE vf vload(const float *p, int64_t n)
{
    vf v = {0};
    if (n == VL)
        memcpy(&v, p, sizeof v);
    else
        memcpy(&v, p, (size_t)n * sizeof(float));
    return v;
}

LSTM_INLINE void vstore(float *p, vf v, int64_t n)
{
    if (n == VL)
        memcpy(p, &v, sizeof v);
    else
        memcpy(p, &v, (size_t)n * sizeof(float));
}

/* m ? a : b per lane, m a comparison mask */
LSTM_INLINE vf vselect(vi m, vf a, vf b) { return (vf)((m & (vi)a) | (~m & (vi)b)); }

LSTM_INLINE vf vabs(vf x) { return (vf)((vi)x & 0x7fffffff); }

/* e^x for lanes x <= 0 (the only arguments the gates pass). n = round(x log2 e),
 * r = x - n ln 2 with ln 2 split in two (the first part exact in 9 bits, so n * it is
 * exact), e^r by its Taylor polynomial to degree 7 (|r| <= ln2/2: truncation below
 * 2e-9 relative), times 2^n made in the exponent bits. x < -87 or NaN is taken as -87
 * (e^-87 ~ 1.6e-38, the least normal float is 1.2e-38), so n stays in [-126, 0] and
 * 2^n is a normal float; callers restore NaN themselves. */
LSTM_INLINE vf vexp_neg(vf x)
{
    const vf xc = vselect(x >= -87.0f, x, (vf){0} - 87.0f);
    const vf n = (xc * 1.44269504088896341f + 12582912.0f) - 12582912.0f; /* + 1.5 * 2^23 rounds to an integer */
    const vf r = (xc - n * 0.693359375f) - n * -2.12194440e-4f;
    vf p = (vf){0} + 1.0f / 5040;
    p = p * r + 1.0f / 720;
    p = p * r + 1.0f / 120;
    p = p * r + 1.0f / 24;
    p = p * r + 1.0f / 6;
    p = p * r + 0.5f;
    p = p * r + 1.0f;
    p = p * r + 1.0f;
    const vi e = (__builtin_convertvector(n, vi) + 127) << 23; /* 2^n */
    return p * (vf)e;
}

/* 1 / (1 + e^-x) from e = e^-|x| (no overflow): 1 / (1 + e) for x >= 0, e / (1 + e) below. */
LSTM_INLINE vf vsigmoid(vf x)
{
    const vf e = vexp_neg((vf){0} - vabs(x));
    const vf s = 1.0f / (1.0f + e);
    return vselect(x == x, vselect(x >= 0.0f, s, e * s), x);
}

/* tanh x = sign(x) t(|x|): below |x| = 1/2 the odd Taylor series to x^15 (truncation
 * below 1e-8 relative there, no cancellation), above it (1 - e) / (1 + e) with
 * e = e^-2|x| <= e^-1 (1 - e >= 0.63: no cancellation either). */
LSTM_INLINE vf vtanh(vf x)
{
    const vf a = vabs(x), z = a * a, e = vexp_neg(-2.0f * a);
    vf p = (vf){0} + -929569.0f / 638512875;
    p = p * z + 21844.0f / 6081075;
    p = p * z + -1382.0f / 155925;
    p = p * z + 62.0f / 2835;
    p = p * z + -17.0f / 315;
    p = p * z + 2.0f / 15;
    p = p * z + -1.0f / 3;
    const vf t = vselect(a < 0.5f, a + a * z * p, (1.0f - e) / (1.0f + e));
    const vf signed_t = (vf)((vi)t | ((vi)x & INT32_MIN));
    return vselect(x == x, signed_t, x);
}

/* One (b, t) forward: gr [4H] i, f, g, o pre-activations in, activated gates out;
 * cp [H] c_{t-1} (NULL = zeros); ct [H] c_t out; yt [H] h_t out. */
LSTM_INLINE void gate_row_f_body(int64_t H, float *gr, const float *cp, float *ct, float *yt)
{
    for (int64_t j = 0; j < H; j += VL) {
        const int64_t n = H - j < VL ? H - j : VL;
        const vf ig = vsigmoid(vload(gr + j, n)), fg = vsigmoid(vload(gr + H + j, n));
        const vf gg = vtanh(vload(gr + 2 * H + j, n)), og = vsigmoid(vload(gr + 3 * H + j, n));
        const vf cn = fg * (cp ? vload(cp + j, n) : (vf){0}) + ig * gg;
        vstore(gr + j, ig, n);
        vstore(gr + H + j, fg, n);
        vstore(gr + 2 * H + j, gg, n);
        vstore(gr + 3 * H + j, og, n);
        vstore(ct + j, cn, n);
        vstore(yt + j, og * vtanh(cn), n);
    }
}

static void gate_row_d(int64_t H, double *gr, const double *cp, double *ct, double *yt)
{
    for (int64_t j = 0; j < H; j++) {
        const double ig = sigmoid_d(gr[j]), fg = sigmoid_d(gr[H + j]);
        const double gg = tanh(gr[2 * H + j]), og = sigmoid_d(gr[3 * H + j]);
        const double cn = fg * (cp ? cp[j] : 0.0) + ig * gg;
        gr[j] = ig;
        gr[H + j] = fg;
        gr[2 * H + j] = gg;
        gr[3 * H + j] = og;
        ct[j] = cn;
        yt[j] = og * tanh(cn);
    }
}

/* One (b, t) backward: gr [4H] activated gates in, dP out; ct [H] c_t; cp [H]
 * c_{t-1} (NULL = zeros); dyt [H] dL/dh_t from above; dh [H] dh_rec from step t+1;
 * dc [H] dc_next in, this step's dc f out. */
LSTM_INLINE void gate_grad_row_f_body(int64_t H, float *gr, const float *ct, const float *cp, const float *dyt,
                                      const float *dh, float *dc)
{
    for (int64_t j = 0; j < H; j += VL) {
        const int64_t n = H - j < VL ? H - j : VL;
        const vf ig = vload(gr + j, n), fg = vload(gr + H + j, n);
        const vf gg = vload(gr + 2 * H + j, n), og = vload(gr + 3 * H + j, n);
        const vf tc = vtanh(vload(ct + j, n)), cprev = cp ? vload(cp + j, n) : (vf){0};
        const vf dht = vload(dyt + j, n) + vload(dh + j, n);
        const vf dct = dht * og * ((1.0f - tc) * (1.0f + tc)) + vload(dc + j, n);
        vstore(gr + j, dct * gg * ig * (1.0f - ig), n);
        vstore(gr + H + j, dct * cprev * fg * (1.0f - fg), n);
        vstore(gr + 2 * H + j, dct * ig * ((1.0f - gg) * (1.0f + gg)), n);
        vstore(gr + 3 * H + j, dht * tc * og * (1.0f - og), n);
        vstore(dc + j, dct * fg, n);
    }
}

static void gate_grad_row_d(int64_t H, double *gr, const double *ct, const double *cp, const double *dyt,
                            const double *dh, double *dc)
{
    for (int64_t j = 0; j < H; j++) {
        const double ig = gr[j], fg = gr[H + j], gg = gr[2 * H + j], og = gr[3 * H + j];
        const double tc = tanh(ct[j]), cprev = cp ? cp[j] : 0.0;
        const double dht = dyt[j] + dh[j];
        const double dct = dht * og * ((1.0 - tc) * (1.0 + tc)) + dc[j];
        gr[j] = dct * gg * ig * (1.0 - ig);
        gr[H + j] = dct * cprev * fg * (1.0 - fg);
        gr[2 * H + j] = dct * ig * ((1.0 - gg) * (1.0 + gg));
        gr[3 * H + j] = dht * tc * og * (1.0 - og);
        dc[j] = dct * fg;
    }
}

/* The float32 rows of each build, and the one the choice names. */
#define LSTM_ROW_BUILD(sfx, attr)                                                                                 \
    attr static void gate_row_f_##sfx(int64_t H, float *gr, const float *cp, float *ct, float *yt)              \
    {                                                                                                          \
        gate_row_f_body(H, gr, cp, ct, yt);                                                                    \
    }                                                                                                          \
    attr static void gate_grad_row_f_##sfx(int64_t H, float *gr, const float *ct, const float *cp,            \
                                           const float *dyt, const float *dh, float *dc)                       \
    {                                                                                                          \
        gate_grad_row_f_body(H, gr, ct, cp, dyt, dh, dc);                                                      \
    }
LSTM_ROW_BUILD(generic, )
#ifdef LSTM_X86
LSTM_ROW_BUILD(avx2, __attribute__((target("avx2"))))
LSTM_ROW_BUILD(avx512, __attribute__((target("avx512f"))))
#endif

static void gate_row_f(int64_t H, float *gr, const float *cp, float *ct, float *yt)
{
#ifdef LSTM_X86
    switch (lb_isa()) {
    case LB_BUILD_AVX512:
        gate_row_f_avx512(H, gr, cp, ct, yt);
        return;
    case LB_BUILD_AVX2:
        gate_row_f_avx2(H, gr, cp, ct, yt);
        return;
    default:
        break;
    }
#endif
    gate_row_f_generic(H, gr, cp, ct, yt);
}

static void gate_grad_row_f(int64_t H, float *gr, const float *ct, const float *cp, const float *dyt, const float *dh,
                            float *dc)
{
#ifdef LSTM_X86
    switch (lb_isa()) {
    case LB_BUILD_AVX512:
        gate_grad_row_f_avx512(H, gr, ct, cp, dyt, dh, dc);
        return;
    case LB_BUILD_AVX2:
        gate_grad_row_f_avx2(H, gr, ct, cp, dyt, dh, dc);
        return;
    default:
        break;
    }
#endif
    gate_grad_row_f_generic(H, gr, ct, cp, dyt, dh, dc);
}

#define GATE_ROW(H, gr, ...) _Generic((gr), float *: gate_row_f, default: gate_row_d)(H, gr, __VA_ARGS__)
#define GATE_GRAD_ROW(H, gr, ...) \
    _Generic((gr), float *: gate_grad_row_f, default: gate_grad_row_d)(H, gr, __VA_ARGS__)

/* ---- the recurrent products, float32, on the weights in place ----
 * Every step multiplies a [B, K] block of rows by the same [K, N] matrix (W_hhᵀ in
 * the forward, W_hh in the backward). OpenBLAS packs that matrix again in each call
 * (256 KiB per step at H = 128, as much time as the product), so float32 runs on the
 * library's tile micro-kernel instead (kernels/tile_gemm_internal.h, the AVX2 and
 * AVX-512 builds), reading the matrix k-major as it lies:
 *   c [m, n] (row stride ldc) = beta c + a [m, k] (row stride lda) @ bk [k, n]
 * (bk row-major, row stride ldb; beta 0 or 1). Each sum runs over k in order with
 * fused multiply-adds, so the result depends on the instruction set (as OpenBLAS's
 * does) but not on anything else. float64 and the baseline build go to lb_k_gemm. */
/* Does dtype run on the micro-kernel here? */
static int rec_tiles(lb_dtype dtype) { return dtype == LB_FLOAT32 && lb_k_tile_gemm_ready(); }

/* c [m, n] (row stride ldc) = beta c + a [m, k] (row stride lda) @ op(b): on the
 * micro-kernel from bk (op(b) stored k-major [k, n], float32) when it is not NULL, else
 * lb_k_gemm on b with op(b) = bᵀ when trans_b (b [n, k], row stride ldb) or b ([k, n]).
 * beta is 0 or 1. */
static void rec_product(const float *bk, lb_dtype dtype, int trans_b, int64_t m, int64_t n, int64_t k, const void *a,
                        int64_t lda, const void *b, int64_t ldb, double beta, void *c, int64_t ldc)
{
    if (bk)
        lb_k_tile_gemm_f32(m, n, k, 1.0f, a, lda, 1, bk, n, beta != 0.0, c, ldc);
    else
        lb_k_gemm(dtype, 0, trans_b, m, n, k, 1.0, a, lda, b, ldb, beta, c, ldc);
}

void lb_k_lstm_projection(lb_dtype dtype, int64_t rows, int64_t n_in, int64_t G, const void *x, const void *w_ih,
                          const void *b_ih, const void *b_hh, void *p)
{
    LB_CHECK_ARG(x);
    LB_CHECK_ARG(w_ih);
    LB_CHECK_ARG(b_ih);
    LB_CHECK_ARG(b_hh);
    LB_CHECK_ARG(p);
    LB_DISPATCH(dtype, real, {
        real *pd = p;                                  /* [rows, G] */
        const real *bi = b_ih, *bh = b_hh;             /* [G] */
        for (int64_t r = 0; r < rows; r++)
            for (int64_t j = 0; j < G; j++)
                pd[r * G + j] = bi[j] + bh[j];
    });
    /* p [rows, G] += x [rows, n_in] @ w_ihᵀ [n_in, G] */
    lb_k_gemm(dtype, 0, 1, rows, G, n_in, 1.0, x, n_in, w_ih, n_in, 1.0, p, G);
}

void lb_k_lstm_recurrence(lb_dtype dtype, int64_t B, int64_t T, int64_t H, void *gates, const void *w_hh,
                          const void *h0, const void *c0, void *y, void *cells, int keep_cells, void *c_last)
{
    LB_CHECK_ARG(gates);
    LB_CHECK_ARG(w_hh);
    LB_CHECK_ARG(y);
    LB_CHECK_ARG(cells);
    LB_CHECK_ARG(c_last);
    const int64_t G = 4 * H;
    /* the micro-kernel reads W_hhᵀ k-major: [H, G], transposed once here (without the
     * memory for it, the products go to lb_k_gemm) */
    float *w_t = rec_tiles(dtype) ? malloc((size_t)(G * H) * sizeof *w_t) : NULL;
    if (w_t)
        lb_k_lstm_transpose_weight(dtype, G, H, w_hh, w_t);
    LB_DISPATCH(dtype, real, {
        real *gate = gates;    /* [B, T, G]: pre-activations in, activated gates out */
        real *yd = y;          /* [B, T, H] */
        real *c = cells;       /* [B, T, H], or the ring [2, B, H] */
        const real *h0d = h0;  /* [B, H] or NULL */
        const real *c0d = c0;  /* [B, H] or NULL */
        for (int64_t t = 0; t < T; t++) {
            /* P[:, t] [B, G] (row stride T*G) += h_{t-1} [B, H] (row stride T*H) @ W_hhᵀ [H, G] */
            if (t > 0)
                rec_product(w_t, dtype, 1, B, G, H, yd + (t - 1) * H, T * H, w_hh, H, 1.0, gate + t * G, T * G);
            else if (h0d)
                rec_product(w_t, dtype, 1, B, G, H, h0d, H, w_hh, H, 1.0, gate, T * G);
            for (int64_t b = 0; b < B; b++) {
                real *gr = gate + (b * T + t) * G; /* [G] i, f, g, o of (b, t) */
                real *ct = keep_cells ? c + (b * T + t) * H : c + ((t & 1) * B + b) * H; /* [H] c_t */
                const real *cp = t > 0 ? (keep_cells ? c + (b * T + t - 1) * H : c + (((t - 1) & 1) * B + b) * H)
                                       : (c0d ? c0d + b * H : NULL); /* [H] c_{t-1}, NULL = zeros */
                real *yt = yd + (b * T + t) * H;   /* [H] h_t */
                GATE_ROW(H, gr, cp, ct, yt);
            }
        }
        real *cl = c_last; /* [B, H] */
        for (int64_t b = 0; b < B; b++)
            memcpy(cl + b * H, keep_cells ? c + (b * T + T - 1) * H : c + (((T - 1) & 1) * B + b) * H,
                   (size_t)H * sizeof(real));
    });
    free(w_t);
}

/* lb_k_lstm_step in float32 on the micro-kernel with both weights transposed: the gate
 * columns in blocks of 64 (whole strips of the micro-kernel) split over the threads,
 * then the gate rows over batch rows. With B rows, one thread per LSTM_STEP_GRAIN
 * multiply-adds (a batch of 16 streams at hidden_size 128 gets 2). Each gate is b_ih +
 * b_hh, then + x W_ihᵀ and + h W_hhᵀ, each summed in order: the same bits at any thread
 * count. */
enum { LSTM_STEP_GRAIN = 1 << 20, LSTM_STEP_STRIP = 64 };

static void step_on_threads(int64_t B, int64_t n_in, int64_t H, const float *x, const float *w_ih_t,
                            const float *b_ih, const float *b_hh, const float *w_hh_t, const float *h_prev,
                            const float *c_prev, float *gates, float *h, float *c)
{
    const int64_t G = 4 * H, strips = (G + LSTM_STEP_STRIP - 1) / LSTM_STEP_STRIP;
    int nth = lb_threads_for(B * G * (n_in + H), LSTM_STEP_GRAIN);
    if (nth > strips)
        nth = (int)strips;
#pragma omp parallel num_threads(nth) if (nth > 1)
    {
        int t = 0, nt = 1;
#ifdef _OPENMP
        t = omp_get_thread_num();
        nt = omp_get_num_threads();
#endif
        /* gates [B, j0 .. j1) = b_ih + b_hh + x [B, n_in] @ W_ihᵀ + h_prev [B, H] @ W_hhᵀ */
        int64_t j0 = strips * t / nt * LSTM_STEP_STRIP, j1 = strips * (t + 1) / nt * LSTM_STEP_STRIP;
        if (j1 > G)
            j1 = G;
        if (j1 > j0) {
            for (int64_t j = j0; j < j1; j++) /* row 0, then copies of it */
                gates[j] = b_ih[j] + b_hh[j];
            for (int64_t r = 1; r < B; r++)
                memcpy(gates + r * G + j0, gates + j0, (size_t)(j1 - j0) * sizeof *gates);
            lb_k_tile_gemm_f32(B, j1 - j0, n_in, 1.0f, x, n_in, 1, w_ih_t + j0, G, 1, gates + j0, G);
            lb_k_tile_gemm_f32(B, j1 - j0, H, 1.0f, h_prev, H, 1, w_hh_t + j0, G, 1, gates + j0, G);
        }
#pragma omp barrier
#pragma omp for schedule(static)
        for (int64_t b = 0; b < B; b++)
            gate_row_f(H, gates + b * G, c_prev + b * H, c + b * H, h + b * H);
    }
}

void lb_k_lstm_step(lb_dtype dtype, int64_t B, int64_t n_in, int64_t H, const void *x, const void *w_ih,
                    const void *w_ih_t, const void *b_ih, const void *b_hh, const void *w_hh, const void *w_hh_t,
                    const void *h_prev, const void *c_prev, void *gates, void *h, void *c)
{
    LB_CHECK_ARG(x);
    LB_CHECK_ARG(w_ih);
    LB_CHECK_ARG(b_ih);
    LB_CHECK_ARG(b_hh);
    LB_CHECK_ARG(w_hh);
    LB_CHECK_ARG(h_prev);
    LB_CHECK_ARG(c_prev);
    LB_CHECK_ARG(gates);
    LB_CHECK_ARG(h);
    LB_CHECK_ARG(c);
    const int64_t G = 4 * H;
    const int tiles = rec_tiles(dtype);
    if (tiles && w_ih_t && w_hh_t) {
        step_on_threads(B, n_in, H, x, w_ih_t, b_ih, b_hh, w_hh_t, h_prev, c_prev, gates, h, c);
        return;
    }
    if (tiles && w_ih_t) {
        /* gates [B, G] = b_ih + b_hh, then += x [B, n_in] @ W_ihᵀ [n_in, G] */
        LB_DISPATCH(dtype, real, {
            real *pd = gates;
            const real *bi = b_ih, *bh = b_hh;
            for (int64_t r = 0; r < B; r++)
                for (int64_t j = 0; j < G; j++)
                    pd[r * G + j] = bi[j] + bh[j];
        });
        lb_k_tile_gemm_f32(B, G, n_in, 1.0f, x, n_in, 1, w_ih_t, G, 1, gates, G);
    } else {
        lb_k_lstm_projection(dtype, B, n_in, G, x, w_ih, b_ih, b_hh, gates);
    }
    /* gates += h_prev [B, H] @ W_hhᵀ [H, G] */
    rec_product(tiles ? w_hh_t : NULL, dtype, 1, B, G, H, h_prev, H, w_hh, H, 1.0, gates, G);
    LB_DISPATCH(dtype, real, {
        real *gate = gates;                       /* [B, G] */
        const real *cp = c_prev;                  /* [B, H] */
        real *ht = h, *ct = c;                    /* [B, H] */
        for (int64_t b = 0; b < B; b++)
            GATE_ROW(H, gate + b * G, cp + b * H, ct + b * H, ht + b * H);
    });
}

void lb_k_lstm_transpose_weight(lb_dtype dtype, int64_t G, int64_t n, const void *w, void *w_t)
{
    LB_CHECK_ARG(w);
    LB_CHECK_ARG(w_t);
    LB_DISPATCH(dtype, real, {
        const real *src = w; /* [G, n] */
        real *dst = w_t;     /* [n, G] */
        for (int64_t k = 0; k < n; k++)
            for (int64_t j = 0; j < G; j++)
                dst[k * G + j] = src[j * n + k];
    });
}

int lb_k_lstm_step_uses_copies(lb_dtype dtype, int64_t G) { return G > 0 && rec_tiles(dtype); }

void lb_k_lstm_recurrence_backward(lb_dtype dtype, int64_t B, int64_t T, int64_t H, void *gates,
                                   const void *cells, const void *c0, const void *w_hh, const void *dy, void *dh,
                                   void *dc, int want_dh0)
{
    LB_CHECK_ARG(gates);
    LB_CHECK_ARG(cells);
    LB_CHECK_ARG(w_hh);
    LB_CHECK_ARG(dy);
    LB_CHECK_ARG(dh);
    LB_CHECK_ARG(dc);
    const int64_t G = 4 * H;
    const float *w_k = rec_tiles(dtype) ? w_hh : NULL; /* W_hh [G, H] is k-major for dP W_hh as it lies */
    LB_DISPATCH(dtype, real, {
        real *gate = gates;                    /* [B, T, G]: gates in, dP out */
        const real *c = cells, *dyd = dy;      /* [B, T, H] each */
        const real *c0d = c0;                  /* [B, H] or NULL */
        real *dhr = dh, *dcd = dc;             /* [B, H] each: dh_rec, dc_next */
        for (int64_t t = T - 1; t >= 0; t--) {
            for (int64_t b = 0; b < B; b++) {
                real *gr = gate + (b * T + t) * G;          /* [G] i, f, g, o of (b, t) */
                const real *ct = c + (b * T + t) * H;       /* [H] c_t */
                const real *cp = t > 0 ? c + (b * T + t - 1) * H : (c0d ? c0d + b * H : NULL); /* [H] c_{t-1} */
                const real *dyt = dyd + (b * T + t) * H;    /* [H] dL/dh_t from above */
                real *dhb = dhr + b * H, *dcb = dcd + b * H; /* [H] from step t+1 */
                GATE_GRAD_ROW(H, gr, ct, cp, dyt, dhb, dcb);
            }
            /* dh_rec [B, H] = dP[:, t] [B, G] (row stride T*G) @ W_hh [G, H] */
            if (t > 0 || want_dh0)
                rec_product(w_k, dtype, 0, B, H, G, gate + t * G, T * G, w_hh, H, 0.0, dhr, H);
        }
    });
}

void lb_k_lstm_weight_hh_grad(lb_dtype dtype, int64_t B, int64_t T, int64_t H, const void *dgates, const void *y,
                              const void *h0, void *dw_hh)
{
    LB_CHECK_ARG(dgates);
    LB_CHECK_ARG(dw_hh);
    const int64_t G = 4 * H;
    const size_t es = lb_dtype_size(dtype);
    const char *gd = dgates, *yd = y;
    /* dW_hh [G, H] += dP[b, 1:T]ᵀ [G, T-1] @ y[b, 0:T-1] [T-1, H] for each batch row b */
    for (int64_t b = 0; b < B && T > 1; b++)
        lb_k_gemm(dtype, 1, 0, G, H, T - 1, 1.0, gd + (size_t)((b * T + 1) * G) * es, G, yd + (size_t)(b * T * H) * es,
                  H, 1.0, dw_hh, H);
    /* ... + dP[:, 0]ᵀ [G, B] (row stride T*G) @ h0 [B, H] */
    if (h0)
        lb_k_gemm(dtype, 1, 0, G, H, B, 1.0, gd, T * G, h0, H, 1.0, dw_hh, H);
}

/* LSTM kernels (equations and named dims in kernels_lstm.h). */
#include "tensor/kernels_lstm.h"

#include <math.h>
#include <string.h>

#include "tensor/kernels.h"

/* Gate nonlinearities in the precision of their argument. The transcendentals
 * dominate the fused gate loop, and glibc's tanhf (through expm1f) is slow, so
 * float32 computes tanh as 1 - 2/(e^{2x} + 1) with double exp: within float32
 * rounding (absolute error ~1e-16 before rounding) and about 3x faster. float64
 * uses libm's tanh. Both sigmoids avoid overflow for large |x|. */
static inline double sigmoid_d(double x)
{
    if (x >= 0)
        return 1.0 / (1.0 + exp(-x));
    double e = exp(x);
    return e / (1.0 + e);
}

static inline float sigmoid_f(float x)
{
    if (x >= 0)
        return 1.0f / (1.0f + expf(-x));
    float e = expf(x);
    return e / (1.0f + e);
}

static inline float tanh_f(float x)
{
    return (float)(1.0 - 2.0 / (exp(2.0 * (double)x) + 1.0)); /* exp overflow -> inf -> exactly 1 */
}

#define SIGMOID(x) _Generic((x), float: sigmoid_f, default: sigmoid_d)(x)
#define TANH(x) _Generic((x), float: tanh_f, default: tanh)(x)

void lb_k_lstm_projection(lb_dtype dtype, int64_t rows, int64_t n_in, int64_t G, const void *x, const void *w_ih,
                          const void *b_ih, const void *b_hh, void *p)
{
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
    const int64_t G = 4 * H;
    LB_DISPATCH(dtype, real, {
        real *gate = gates;    /* [B, T, G]: pre-activations in, activated gates out */
        real *yd = y;          /* [B, T, H] */
        real *c = cells;       /* [B, T, H], or the ring [2, B, H] */
        const real *h0d = h0;  /* [B, H] or NULL */
        const real *c0d = c0;  /* [B, H] or NULL */
        for (int64_t t = 0; t < T; t++) {
            /* P[:, t] [B, G] (row stride T*G) += h_{t-1} [B, H] (row stride T*H) @ W_hhᵀ [H, G] */
            if (t > 0)
                lb_k_gemm(dtype, 0, 1, B, G, H, 1.0, yd + (t - 1) * H, T * H, w_hh, H, 1.0, gate + t * G, T * G);
            else if (h0d)
                lb_k_gemm(dtype, 0, 1, B, G, H, 1.0, h0d, H, w_hh, H, 1.0, gate, T * G);
            for (int64_t b = 0; b < B; b++) {
                real *gr = gate + (b * T + t) * G; /* [G] i, f, g, o of (b, t) */
                real *ct = keep_cells ? c + (b * T + t) * H : c + ((t & 1) * B + b) * H; /* [H] c_t */
                const real *cp = t > 0 ? (keep_cells ? c + (b * T + t - 1) * H : c + (((t - 1) & 1) * B + b) * H)
                                       : (c0d ? c0d + b * H : NULL); /* [H] c_{t-1}, NULL = zeros */
                real *yt = yd + (b * T + t) * H;   /* [H] h_t */
                for (int64_t j = 0; j < H; j++) {
                    const real ig = SIGMOID(gr[j]), fg = SIGMOID(gr[H + j]);
                    const real gg = TANH(gr[2 * H + j]), og = SIGMOID(gr[3 * H + j]);
                    const real cn = fg * (cp ? cp[j] : (real)0) + ig * gg;
                    gr[j] = ig;
                    gr[H + j] = fg;
                    gr[2 * H + j] = gg;
                    gr[3 * H + j] = og;
                    ct[j] = cn;
                    yt[j] = og * TANH(cn);
                }
            }
        }
        real *cl = c_last; /* [B, H] */
        for (int64_t b = 0; b < B; b++)
            memcpy(cl + b * H, keep_cells ? c + (b * T + T - 1) * H : c + (((T - 1) & 1) * B + b) * H,
                   (size_t)H * sizeof(real));
    });
}

void lb_k_lstm_recurrence_backward(lb_dtype dtype, int64_t B, int64_t T, int64_t H, void *gates,
                                   const void *cells, const void *c0, const void *w_hh, const void *dy, void *dh,
                                   void *dc, int want_dh0)
{
    const int64_t G = 4 * H;
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
                for (int64_t j = 0; j < H; j++) {
                    const double ig = gr[j], fg = gr[H + j], gg = gr[2 * H + j], og = gr[3 * H + j];
                    const double tc = TANH(ct[j]);
                    const double cprev = cp ? (double)cp[j] : 0.0;
                    const double dht = (double)dyt[j] + (double)dhb[j];
                    const double dct = dht * og * (1.0 - tc * tc) + (double)dcb[j];
                    gr[j] = (real)(dct * gg * ig * (1.0 - ig));
                    gr[H + j] = (real)(dct * cprev * fg * (1.0 - fg));
                    gr[2 * H + j] = (real)(dct * ig * (1.0 - gg * gg));
                    gr[3 * H + j] = (real)(dht * tc * og * (1.0 - og));
                    dcb[j] = (real)(dct * fg);
                }
            }
            /* dh_rec [B, H] = dP[:, t] [B, G] (row stride T*G) @ W_hh [G, H] */
            if (t > 0 || want_dh0)
                lb_k_gemm(dtype, 0, 0, B, H, G, 1.0, gate + t * G, T * G, w_hh, H, 0.0, dhr, H);
        }
    });
}

void lb_k_lstm_weight_hh_grad(lb_dtype dtype, int64_t B, int64_t T, int64_t H, const void *dgates, const void *y,
                              const void *h0, void *dw_hh)
{
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

/* Causal dilated 1-D convolution kernels (named dims and formulas in kernels/conv.h). */
#include "kernels/conv.h"

#include "kernels/gemm.h"
#include "tensor/kernels.h"

void lb_k_conv1d_pack_taps(lb_dtype dtype, int64_t Co, int64_t Ci, int64_t K, const void *weight, void *taps)
{
    LB_CHECK_ARG(weight);
    LB_CHECK_ARG(taps);
    LB_DISPATCH(dtype, real, {
        const real *src = weight; /* [Co, Ci, K] */
        real *dst = taps;         /* [K, Ci, Co] */
        for (int64_t o = 0; o < Co; o++)
            for (int64_t c = 0; c < Ci; c++)
                for (int64_t j = 0; j < K; j++)
                    dst[(j * Ci + c) * Co + o] = src[(o * Ci + c) * K + j];
    });
}

void lb_k_conv1d_unpack_taps_add(lb_dtype dtype, int64_t Co, int64_t Ci, int64_t K, const void *taps, void *weight)
{
    LB_CHECK_ARG(taps);
    LB_CHECK_ARG(weight);
    LB_DISPATCH(dtype, real, {
        const real *src = taps; /* [K, Ci, Co] */
        real *dst = weight;     /* [Co, Ci, K] */
        for (int64_t o = 0; o < Co; o++)
            for (int64_t c = 0; c < Ci; c++)
                for (int64_t j = 0; j < K; j++)
                    dst[(o * Ci + c) * K + j] += src[(j * Ci + c) * Co + o];
    });
}

void lb_k_conv1d_forward(lb_dtype dtype, int64_t B, int64_t T, int64_t Ci, int64_t Co, int64_t K, int64_t d,
                         const void *x, const void *taps, const void *bias, void *y)
{
    LB_CHECK_ARG(x);
    LB_CHECK_ARG(taps);
    LB_CHECK_ARG(bias);
    LB_CHECK_ARG(y);
    const size_t es = lb_dtype_size(dtype);
    const char *xd = x, *wd = taps;
    char *yd = y;
    LB_DISPATCH(dtype, real, {
        const real *bd = bias; /* [Co] */
        real *out = y;         /* [B*T, Co] */
        for (int64_t r = 0; r < B * T; r++)
            for (int64_t o = 0; o < Co; o++)
                out[r * Co + o] = bd[o];
    });
    for (int64_t j = 0; j < K; j++) {
        const int64_t s = d * (K - 1 - j);
        if (s >= T)
            continue;
        /* y[b, s:T] [T-s, Co] += x[b, 0:T-s] [T-s, Ci] @ Wj [Ci, Co] */
        for (int64_t b = 0; b < B; b++)
            lb_k_gemm(dtype, 0, 0, T - s, Co, Ci, 1.0, xd + (size_t)(b * T * Ci) * es, Ci,
                      wd + (size_t)(j * Ci * Co) * es, Co, 1.0, yd + (size_t)((b * T + s) * Co) * es, Co);
    }
}

void lb_k_conv1d_backward_input(lb_dtype dtype, int64_t B, int64_t T, int64_t Ci, int64_t Co, int64_t K, int64_t d,
                                const void *dy, const void *taps, void *dx)
{
    LB_CHECK_ARG(dy);
    LB_CHECK_ARG(taps);
    LB_CHECK_ARG(dx);
    const size_t es = lb_dtype_size(dtype);
    const char *dyd = dy, *wd = taps;
    char *dxd = dx;
    for (int64_t j = 0; j < K; j++) {
        const int64_t s = d * (K - 1 - j);
        if (s >= T)
            continue;
        /* dx[b, 0:T-s] [T-s, Ci] += dy[b, s:T] [T-s, Co] @ Wjᵀ [Co, Ci] */
        for (int64_t b = 0; b < B; b++)
            lb_k_gemm(dtype, 0, 1, T - s, Ci, Co, 1.0, dyd + (size_t)((b * T + s) * Co) * es, Co,
                      wd + (size_t)(j * Ci * Co) * es, Co, 1.0, dxd + (size_t)(b * T * Ci) * es, Ci);
    }
}

void lb_k_conv1d_backward_taps(lb_dtype dtype, int64_t B, int64_t T, int64_t Ci, int64_t Co, int64_t K, int64_t d,
                               const void *x, const void *dy, void *dtaps)
{
    LB_CHECK_ARG(x);
    LB_CHECK_ARG(dy);
    LB_CHECK_ARG(dtaps);
    const size_t es = lb_dtype_size(dtype);
    const char *xd = x, *dyd = dy;
    char *gd = dtaps;
    for (int64_t j = 0; j < K; j++) {
        const int64_t s = d * (K - 1 - j);
        if (s >= T)
            continue;
        /* dWj [Ci, Co] += x[b, 0:T-s]ᵀ [Ci, T-s] @ dy[b, s:T] [T-s, Co] */
        for (int64_t b = 0; b < B; b++)
            lb_k_gemm(dtype, 1, 0, Ci, Co, T - s, 1.0, xd + (size_t)(b * T * Ci) * es, Ci,
                      dyd + (size_t)((b * T + s) * Co) * es, Co, 1.0, gd + (size_t)(j * Ci * Co) * es, Co);
    }
}

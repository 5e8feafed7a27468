/* Causal dilated 1-D convolution kernels on raw row-major buffers, float32 or
 * float64 (`dtype`); the formula and its PyTorch equivalent are in layers/conv.h.
 *
 * Named dimensions: B batch, T time steps, Ci input channels, Co output channels,
 * K kernel taps, d dilation; tap j reads the input shifted by s_j = d*(K-1-j) steps
 * into the past. x[b] is a [T, Ci] matrix and its rows s..T-1 a [T-s, Ci] matrix,
 * so each tap is a plain gemm on shifted row ranges (no im2col copy):
 *
 *   forward   y[b, s_j:T]     += x[b, 0:T-s_j] [T-s_j, Ci] @ Wj [Ci, Co]
 *   backward  dx[b, 0:T-s_j]  += dy[b, s_j:T] [T-s_j, Co] @ Wjᵀ [Co, Ci]
 *             dWj             += x[b, 0:T-s_j]ᵀ [Ci, T-s_j] @ dy[b, s_j:T] [T-s_j, Co]
 *
 * where Wj[c, o] = weight[o, c, j] in the tap-major layout taps [K, Ci, Co]
 * (PyTorch's weight [Co, Ci, K] has no unit stride along c for a fixed tap). Taps
 * with s_j >= T read only zeros and are skipped. Bias gradients use
 * lb_k_add_row_sums (tensor/kernels.h).
 */
#ifndef LB_KERNELS_CONV_H
#define LB_KERNELS_CONV_H

#include "tensor/api.h"

#include "tensor/tensor.h"

LB_API_BEGIN

/* taps [K, Ci, Co] = weight [Co, Ci, K] rearranged (taps[j, c, o] = weight[o, c, j]). */
void lb_k_conv1d_pack_taps(lb_dtype dtype, int64_t Co, int64_t Ci, int64_t K, const void *weight, void *taps);

/* weight [Co, Ci, K] += taps [K, Ci, Co] rearranged back (the inverse layout change). */
void lb_k_conv1d_unpack_taps_add(lb_dtype dtype, int64_t Co, int64_t Ci, int64_t K, const void *taps,
                                 void *weight);

/* y [B, T, Co] = bias [Co] + Σ_j x shifted by s_j [B, T, Ci] @ Wj [Ci, Co]; taps [K, Ci, Co]. */
void lb_k_conv1d_forward(lb_dtype dtype, int64_t B, int64_t T, int64_t Ci, int64_t Co, int64_t K, int64_t d,
                         const void *x, const void *taps, const void *bias, void *y);

/* dx [B, T, Ci] += Σ_j dy shifted back by s_j [B, T, Co] @ Wjᵀ [Co, Ci]. */
void lb_k_conv1d_backward_input(lb_dtype dtype, int64_t B, int64_t T, int64_t Ci, int64_t Co, int64_t K, int64_t d,
                                const void *dy, const void *taps, void *dx);

/* dtaps [K, Ci, Co] += per tap j: Σ_b x[b, 0:T-s_j]ᵀ @ dy[b, s_j:T]. */
void lb_k_conv1d_backward_taps(lb_dtype dtype, int64_t B, int64_t T, int64_t Ci, int64_t Co, int64_t K, int64_t d,
                               const void *x, const void *dy, void *dtaps);

LB_API_END

#endif

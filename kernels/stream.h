/* Data movement for streaming state: the rows of per-stream buffers (key-value
 * caches, convolution input histories) are appended, shifted and copied into larger
 * buffers by one small kernel.
 *
 * Named dims: B streams, M the product of any middle dims (heads for a key-value
 * cache [B, H, R, D]; 1 for a convolution history [B, R, D]), R rows (time steps)
 * per stream, D row width.
 *
 * The per-event kernels below compute one event of every stream (one row per stream)
 * on raw row-major buffers of `dtype` (float32 or float64) that the caller allocated
 * once: the graph-free decoding step of layers/stream.c. They allocate nothing and
 * run the same operations as the training-time ops they stand for (named with each),
 * so a step gives the bits of the graph's computation where the products have the
 * same shapes. Named dims there: N rows (B streams), n_in / n_out widths, D d_model,
 * K kernel taps, d dilation, R = d (K - 1) history rows.
 */
#ifndef LB_KERNELS_STREAM_H
#define LB_KERNELS_STREAM_H

#include "tensor/api.h"
#include "tensor/tensor.h"

LB_API_BEGIN

/* Copies, for every stream b < B and middle index m < M, the rows
 *   dst[b, m, dst_row[b] + i, :] = src[b, m, src_row[b] + i, :]   for i < count[b].
 *   dst: contiguous [B, ..., Rd, D]; src: contiguous [B, ..., Rs, D] with the same
 *   leading dims and D, the same dtype. dst and src may be the same tensor (the rows
 *   may overlap: the copy behaves as memmove), never partly overlapping other storage.
 * dst_row, src_row, count: int64 [B], count[b] >= 0; rows must stay inside R.
 * Errors: LB_ERR_SHAPE / LB_ERR_DTYPE naming both tensors, LB_ERR_VALUE naming the
 * stream whose rows fall outside (nothing is copied then). */
lb_status lb_k_copy_rows(lb_tensor *dst, const int64_t *dst_row, const lb_tensor *src, const int64_t *src_row,
                         const int64_t *count);

/* y [N, n_out] = x [N, n_in] @ w [n_in, n_out] + bias [n_out] (bias NULL: none): the
 * product by lb_k_gemm, then the bias added to each row (lb_affine's order). */
void lb_k_affine_rows(lb_dtype dtype, int64_t N, int64_t n_in, int64_t n_out, const void *x, const void *w,
                      const void *bias, void *y);

/* y [N, n_out] = x [N, n_in] @ w^T + bias [n_out], w stored [n_out, n_in] (a tied
 * embedding table read as an output layer; bias NULL: none): lb_k_gemm with w
 * transposed, then the bias (the graph's lb_matmul_t then lb_add). */
void lb_k_affine_rows_t(lb_dtype dtype, int64_t N, int64_t n_in, int64_t n_out, const void *x, const void *w,
                        const void *bias, void *y);

/* y [N, D] = LayerNorm of each row of x [N, D] (weight, bias [D], either may be NULL):
 * (x - mean) / sqrt(var + eps) * weight + bias, mean and biased variance in double in
 * two passes (lb_layer_norm's arithmetic; torch.nn.functional.layer_norm). y may be x. */
void lb_k_layer_norm_rows(lb_dtype dtype, int64_t N, int64_t D, const void *x, const void *weight, const void *bias,
                          double eps, void *y);

/* y [N, D] = RMSNorm of each row of x [N, D] (Zhang & Sennrich 2019; torch.nn.RMSNorm):
 *   y = x / sqrt(mean(x^2) + eps) * weight,   weight [D] or NULL (no mean subtraction, no bias)
 * mean(x^2) in double; y computed in double and rounded once. rstd [N] (float64, or NULL)
 * receives 1 / sqrt(mean(x^2) + eps) of each row (what the backward needs). y may be x.
 * The op lb_rms_norm computes its rows with this function, so a streamed step and the
 * graph give the same bits. */
void lb_k_rms_norm_rows(lb_dtype dtype, int64_t N, int64_t D, const void *x, const void *weight, double eps, void *y,
                        double *rstd);

/* One event of a causal dilated convolution (kernels/conv.h's formula) for N
 * streams, reading the past inputs from each stream's history:
 *   x    [N, Ci]      the input at the new event
 *   hist [N, R, Ci]   the last R = d (K - 1) inputs before it, oldest first (rows of
 *                     events before the stream's start hold zeros); NULL when R = 0
 *   taps [K, Ci, Co]  lb_k_conv1d_pack_taps of the weight;  bias [Co]
 *   y    [N, Co]      out: bias + Σ_j x(t - s_j) @ taps[j], s_j = d (K - 1 - j)
 * One gemm per tap over the N streams (rows R - s_j of the histories, row stride R Ci). */
void lb_k_conv1d_step(lb_dtype dtype, int64_t N, int64_t Ci, int64_t Co, int64_t K, int64_t d, const void *x,
                      const void *hist, const void *taps, const void *bias, void *y);

/* The histories after the event: for each stream b,
 *   dst[b] = [src[b, 1:R], x[b]] when push[b] != 0, else src[b] unchanged
 *   src, dst [N, R, D] (distinct buffers), x [N, D], push int64 [N]. R = 0 does nothing. */
void lb_k_history_push(lb_dtype dtype, int64_t N, int64_t R, int64_t D, const void *src, const void *x,
                       const int64_t *push, void *dst);

LB_API_END

#endif

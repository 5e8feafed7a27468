/* Causal linear attention kernels (Katharopoulos et al. 2020, "Transformers are RNNs",
 * eq. 4–6 with the feature map φ(x) = elu(x) + 1 of their section 3.2.1), with an
 * optional fixed decay per head (RetNet, Sun et al. 2023, eq. 1: S_t = γ S_{t-1} + ...),
 * on raw row-major buffers, float32 or float64 (`dtype`); arithmetic in double.
 *
 * Named dims: B batch, H heads, T positions, Dk key width, Dv value width.
 *
 *   S_i = γ_h S_{i-1} + φ(k_i) v_iᵀ          [Dk, Dv]   (S_{-1} = 0, or the given state)
 *   z_i = γ_h z_{i-1} + φ(k_i)               [Dk]
 *   y_i = φ(q_i)ᵀ S_i / (φ(q_i)ᵀ z_i + eps)  [Dv]
 *
 * The state is kept as one [Dk, Dv + 1] matrix per (b, h): S with z as its last column
 * (the value row augmented with a 1), so numerator and denominator share every sum.
 * eps = LB_LINEAR_ATTENTION_EPS (1e-6, the reference implementation's).
 *
 * The training forward runs in the chunked parallel form: inside a chunk of C positions
 * the causal products (φ(Q) φ(K)ᵀ ⊙ decay) V', across chunks the carried state; the
 * recurrent form above (C = 1) is used when a state is carried in or out (streaming).
 * Both compute the same sums (tested to rounding). The backward is exact and linear in
 * T: a forward sweep recomputing S for dφ(q), a reverse sweep for dφ(k) and dv; nothing
 * of size [T, Dk, Dv] is stored. (b, h) pairs are split over threads, each computed in a
 * fixed order, so results do not depend on the thread count.
 */
#ifndef LB_KERNELS_LINEAR_ATTENTION_H
#define LB_KERNELS_LINEAR_ATTENTION_H

#include "tensor/api.h"

#include "tensor/tensor.h"

LB_API_BEGIN

#define LB_LINEAR_ATTENTION_EPS 1e-6
enum { LB_LINEAR_ATTENTION_CHUNK = 64 };

/* y [B, H, T, Dv] and den [B, H, T] (φ(q_i)ᵀ z_i + eps, for the backward) from
 * q, k [B, H, T, Dk], v [B, H, T, Dv], gamma [H] (1 = no decay).
 * state [B, H, Dk, Dv + 1] (model dtype), or NULL: when given, it is the state before
 * position 0 and receives the state after valid[b] positions of sequence b (valid NULL:
 * after T); positions past valid[b] are still computed.
 * Errors: LB_ERR_VALUE for a NULL buffer or a size below 1, LB_ERR_MEMORY. */
lb_status lb_k_linear_attention_forward(lb_dtype dtype, int64_t B, int64_t H, int64_t T, int64_t Dk, int64_t Dv,
                                   const double *gamma, const void *q, const void *k, const void *v, void *y,
                                   void *den, void *state, const int64_t *valid);

/* dq, dk [B, H, T, Dk] and dv [B, H, T, Dv] += the gradients of the forward above (from
 * a zero state) given dy [B, H, T, Dv] and the forward's y and den. dq, dk or dv may
 * be NULL (not wanted). Errors: LB_ERR_VALUE for a NULL input or a size below 1,
 * LB_ERR_MEMORY (then the gradients are partly added). */
lb_status lb_k_linear_attention_backward(lb_dtype dtype, int64_t B, int64_t H, int64_t T, int64_t Dk, int64_t Dv,
                                    const double *gamma, const void *q, const void *k, const void *v, const void *y,
                                    const void *den, const void *dy, void *dq, void *dk, void *dv);

LB_API_END

#endif

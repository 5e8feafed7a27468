/* The selective scan of Mamba (Gu & Dao 2023, Algorithm 2; the semantics of
 * `selective_scan_ref` in the authors' code with delta_softplus=True, without its D and z
 * terms, which the model applies around it), forward and backward, float32 or float64
 * (`dtype`), on raw row-major buffers.
 *
 * Named dimensions: B batch, T time steps, D channels (Mamba's d_inner), N state size.
 *
 *   Δ[b,t,d]    = softplus(delta[b,t,d])          (torch.nn.functional.softplus: x above 20
 *                                                   is returned as is)
 *   h[b,t,d,n]  = exp(Δ[b,t,d] A[d,n]) h[b,t-1,d,n] + Δ[b,t,d] Bm[b,t,n] u[b,t,d],  h[b,-1] = h0[b]
 *   y[b,t,d]    = Σ_n Cm[b,t,n] h[b,t,d,n]
 *
 * Shapes: u, delta, y [B, T, D]; A [D, N]; Bm, Cm [B, T, N]; the states h0, h_last [B, D, N].
 * Each stream b is one thread's work (the loops over channels d are innermost and
 * contiguous); the results do not depend on the thread count. The backward keeps no
 * state of the forward: it recomputes the states h, storing one state every S steps
 * (S = ceil(sqrt(T))) and the S states of the chunk it is in, 2 sqrt(T) N D values per
 * stream instead of T N D.
 */
#ifndef LB_KERNELS_SELECTIVE_SCAN_H
#define LB_KERNELS_SELECTIVE_SCAN_H

#include "tensor/api.h"

#include "tensor/tensor.h"

LB_API_BEGIN

/* y [B, T, D] = the scan above. h0 [B, D, N] is the state before t = 0 (NULL: zeros).
 * h_last [B, D, N], when non-NULL, receives each stream's state after its last valid
 * step: after valid[b] steps (valid [B] in [0, T]; valid NULL: T), so a stream with
 * valid[b] = 0 keeps h0[b]. Errors: LB_ERR_MEMORY (nothing written to h_last),
 * LB_ERR_VALUE for another dtype, sizes below 0 or a NULL u, delta, A, Bm, Cm or y. */
lb_status lb_k_selective_scan(lb_dtype dtype, int64_t B, int64_t T, int64_t D, int64_t N, const void *u,
                              const void *delta, const void *A, const void *Bm, const void *Cm, const void *h0,
                              const int64_t *valid, void *h_last, void *y);

/* The scan's backward from zero initial state: given dy [B, T, D], adds
 *   du, ddelta [B, T, D], dA [D, N], dB, dC [B, T, N]
 * (each may be NULL when not wanted). Errors: LB_ERR_MEMORY (nothing added),
 * LB_ERR_VALUE for another dtype, sizes below 0 or a NULL u, delta, A, Bm, Cm or dy. */
lb_status lb_k_selective_scan_backward(lb_dtype dtype, int64_t B, int64_t T, int64_t D, int64_t N, const void *u,
                                       const void *delta, const void *A, const void *Bm, const void *Cm,
                                       const void *dy, void *du, void *ddelta, void *dA, void *dB, void *dC);

LB_API_END

#endif

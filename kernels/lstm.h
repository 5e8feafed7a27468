/* LSTM kernels: the equations of torch.nn.LSTM (gate order i, f, g, o) on raw
 * row-major buffers, float32 or float64 (`dtype`), for one layer over a whole
 * sequence (Hochreiter and Schmidhuber 1997; forget gate of Gers et al. 2000).
 *
 * Named dimensions: B batch, T time steps, n_in input width, H hidden_size, G = 4H
 * gate pre-activations in the order i, f, g, o. A [B, T, X] buffer is also read as a
 * [B*T, X] matrix, and its time step t as a [B, X] matrix with row stride T*X.
 *
 *   P = x W_ihᵀ + b_ih + b_hh                             (projection, all steps at once)
 *   [i; f; g; o] = P[:, t] + h_{t-1} W_hhᵀ
 *   i, f, o = sigmoid(.), g = tanh(.)
 *   c_t = f c_{t-1} + i g,   h_t = o tanh(c_t)            (h_{-1} = h0, c_{-1} = c0)
 *
 * Kernels are pure (they write only their outputs) and allocate nothing except where
 * stated. float64 runs the gate equations with libm (what gradcheck needs). float32
 * runs them on 8-lane vectors (AVX2 when the CPU has it) with their own exp, sigmoid
 * and tanh, within a few float32 ulps of the exact values, forward and backward; the
 * recurrent products of float32 run on the library's tile micro-kernel (AVX2 or
 * AVX-512, the build lb_k_attention_isa() names), which reads W_hh in place (OpenBLAS
 * would pack it again at every step); every other product, and every product in the
 * baseline build, goes to lb_k_gemm. float32 results
 * therefore depend on the CPU's instruction set, never on the thread count. Bias
 * gradients use lb_k_add_row_sums.
 */
#ifndef LB_KERNELS_LSTM_H
#define LB_KERNELS_LSTM_H

#include "tensor/api.h"

#include "tensor/tensor.h"

LB_API_BEGIN

/* p [B*T, G] = x [B*T, n_in] @ w_ihᵀ [n_in, G] + b_ih [G] + b_hh [G]  (rows = B*T) */
void lb_k_lstm_projection(lb_dtype dtype, int64_t rows, int64_t n_in, int64_t G, const void *x, const void *w_ih,
                          const void *b_ih, const void *b_hh, void *p);

/* The recurrence of one layer, forward, t = 0 .. T-1:
 *   gates  [B, T, G]  in: the projections P; out: the activated gates i, f, g, o
 *   w_hh   [G, H]
 *   h0, c0 [B, H], or NULL for zeros
 *   y      [B, T, H]  out: h_t
 *   cells  out: c_t, [B, T, H] when keep_cells (what the backward needs), else a
 *          ring [2, B, H] holding the last two steps
 *   c_last [B, H]     out: c_{T-1}
 * Allocates one [H, G] copy of W_hhᵀ for the float32 loops (without memory, the
 * products go to lb_k_gemm). */
void lb_k_lstm_recurrence(lb_dtype dtype, int64_t B, int64_t T, int64_t H, void *gates, const void *w_hh,
                          const void *h0, const void *c0, void *y, void *cells, int keep_cells, void *c_last);

/* One event of one layer for B streams (streaming inference, layers/stream.h): the
 * projection and one step of the recurrence, allocating nothing.
 *   x      [B, n_in]  the layer's input at the event
 *   w_ih [G, n_in], b_ih [G], b_hh [G], w_hh [G, H]: the layer's parameters
 *   w_ih_t [n_in, G], w_hh_t [H, G]  W_ihᵀ and W_hhᵀ (lb_k_lstm_transpose_weight), read
 *                     in place by the float32 AVX2 / AVX-512 tile micro-kernel;
 *                     NULL: that product goes to lb_k_gemm
 *   h_prev, c_prev [B, H]  the carried state (row stride H)
 *   gates  [B, G]     scratch: the activated gates i, f, g, o on return
 *   h, c   [B, H]     out: the new state; must not overlap h_prev, c_prev
 * gates = (b_ih + b_hh) + x W_ihᵀ, then + h_prev W_hhᵀ, then the gate rows: the order
 * of lb_k_lstm_projection followed by lb_k_lstm_recurrence with T = 1 and h0, c0
 * given (the same bits when w_ih_t is NULL; with it, the input product runs in the
 * recurrent product's loops, without OpenBLAS's per-call packing, and may round
 * differently). Threads: with both copies, a step of at least 2^20 multiply-adds
 * (B G (n_in + H)) splits the gate columns, then the rows, over lb_get_num_threads()
 * threads; every gate is summed in the same order, so the bits do not depend on it. */
void lb_k_lstm_step(lb_dtype dtype, int64_t B, int64_t n_in, int64_t H, const void *x, const void *w_ih,
                    const void *w_ih_t, const void *b_ih, const void *b_hh, const void *w_hh, const void *w_hh_t,
                    const void *h_prev, const void *c_prev, void *gates, void *h, void *c);

/* w_t [n, G] = w [G, n] transposed (the k-major layout lb_k_lstm_step's loops read). */
void lb_k_lstm_transpose_weight(lb_dtype dtype, int64_t G, int64_t n, const void *w, void *w_t);

/* 1 when lb_k_lstm_step's float32 loops run for G gate rows on this CPU (so the
 * transposed copies are worth making), else 0. */
int lb_k_lstm_step_uses_copies(lb_dtype dtype, int64_t G);

/* Backpropagation through time of lb_k_lstm_recurrence, t = T-1 .. 0, with
 * dh = dy[:, t] + dh_rec and tc = tanh(c_t):
 *   dc = dh o (1 - tc²) + dc_next
 *   di = dc g i(1-i),  df = dc c_{t-1} f(1-f),  dg = dc i (1-g²),  do = dh tc o(1-o)
 *   dc_next = dc f,    dh_rec = dP[:, t] W_hh       ([B, G] @ [G, H])
 *   gates  [B, T, G]  in: the activated gates; out: dP, the gradient of the projections
 *   cells  [B, T, H]  c_t (keep_cells in the forward);  c0 [B, H] or NULL
 *   w_hh   [G, H];  dy [B, T, H]
 *   dh     [B, H]     in: zeros; out: dL/dh0 when want_dh0 (else unspecified)
 *   dc     [B, H]     in: the gradient arriving at c_{T-1} (zeros if none); out: dL/dc0 */
void lb_k_lstm_recurrence_backward(lb_dtype dtype, int64_t B, int64_t T, int64_t H, void *gates,
                                   const void *cells, const void *c0, const void *w_hh, const void *dy, void *dh,
                                   void *dc, int want_dh0);

/* dw_hh [G, H] += Σ_t dP[:, t]ᵀ [G, B] @ h_{t-1} [B, H], with h_{t-1} = y[:, t-1] and
 * h_{-1} = h0 ([B, H], NULL for zeros): one gemm per batch row over its T-1 steps,
 * plus one for h0.  dgates [B, T, G], y [B, T, H]. */
void lb_k_lstm_weight_hh_grad(lb_dtype dtype, int64_t B, int64_t T, int64_t H, const void *dgates, const void *y,
                              const void *h0, void *dw_hh);

LB_API_END

#endif

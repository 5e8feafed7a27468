/* Long short-term memory, compatible with torch.nn.LSTM(batch_first=True).
 *
 * Shapes use named dimensions: B batch, T time steps (seq_len), I input_size,
 * H hidden_size, L n_layers. Layer k reads x_k ([B, T, I] for k = 0, the hidden
 * states of layer k-1 [B, T, H] otherwise) and computes, for t = 0 .. T-1,
 *
 *   [i; f; g; o] = x_k[:, t] W_ihᵀ + b_ih + h_{t-1} W_hhᵀ + b_hh     (gate order i, f, g, o)
 *   i = sigmoid(i), f = sigmoid(f), g = tanh(g), o = sigmoid(o)
 *   c_t = f * c_{t-1} + i * g
 *   h_t = o * tanh(c_t)
 *
 * (Hochreiter and Schmidhuber 1997, with the forget gate of Gers, Schmidhuber and
 * Cummins 2000; exactly the equations and parameter layout of torch.nn.LSTM).
 * Parameters are named as in PyTorch's state_dict, "<prefix>.weight_ih_l0",
 * "<prefix>.weight_hh_l0", "<prefix>.bias_ih_l0", "<prefix>.bias_hh_l0", ..., so
 * PyTorch weights load by name and give the same outputs.
 *
 * Each layer is one lb_lstm_layer op (autograd/ops.h), recorded as two nodes with
 * hand-written backward passes (backpropagation through time over the whole
 * sequence): the input projection of every time step as one gemm, then the
 * recurrence with one gemm per step and the gate nonlinearities fused in one loop.
 * The graph holds O(L) nodes whatever T is; the activations kept for backward are
 * one [B, T, 4H] gate buffer (reused for the gate gradients) and the cell states
 * [B, T, H] per layer.
 */
#ifndef LB_LSTM_H
#define LB_LSTM_H

#include "tensor/api.h"

#include "autograd/ops.h"
#include "layers/params.h"

LB_API_BEGIN

enum { LB_LSTM_MAX_LAYERS = 8 };

typedef struct lb_lstm {
    int n_layers;
    int64_t input_size, hidden_size;
    /* Layer k: weight_ih [4H, I or H], weight_hh [4H, H], bias_ih [4H], bias_hh [4H];
     * rows in gate order i, f, g, o (PyTorch's layout). Owned by the lb_params list. */
    lb_var *weight_ih[LB_LSTM_MAX_LAYERS], *weight_hh[LB_LSTM_MAX_LAYERS];
    lb_var *bias_ih[LB_LSTM_MAX_LAYERS], *bias_hh[LB_LSTM_MAX_LAYERS];
} lb_lstm;

/* Creates the parameters of an n_layers-deep LSTM in `ps` (in the order of PyTorch's
 * state_dict: weight_ih_l0, weight_hh_l0, bias_ih_l0, bias_hh_l0, weight_ih_l1, ...)
 * and initialises all four tensors of every layer from U(-1/sqrt(H), 1/sqrt(H)),
 * PyTorch's default (drawn from rng in that order).
 *   dtype: LB_FLOAT32 or LB_FLOAT64.
 * Errors (LB_ERR_VALUE): input_size or hidden_size < 1, n_layers outside
 * [1, LB_LSTM_MAX_LAYERS], a parameter name already taken in ps, rng NULL. */
lb_status lb_lstm_init(lb_lstm *l, lb_params *ps, const char *prefix, int64_t input_size, int64_t hidden_size,
                       int n_layers, lb_dtype dtype, lb_rng *rng);

/* Adds `value` to the forget-gate entries (rows H .. 2H-1) of bias_ih of every layer;
 * bias_hh is left alone. A forget bias of about 1 makes the cell remember by default
 * early in training (Gers et al. 2000; Jozefowicz et al. 2015). The model config's
 * forget_bias is applied through this at init. */
void lb_lstm_add_forget_bias(lb_lstm *l, double value);

/* Runs the LSTM over a whole sequence (torch.nn.LSTM(batch_first=True) forward):
 *   x:  [B, T, I], the model dtype;
 *   h0: [L, B, H] initial hidden states, or NULL for zeros;
 *   c0: [L, B, H] initial cell states, or NULL for zeros;
 * returns the hidden states of the last layer at every step, [B, T, H]; when
 * non-NULL, *h_n and *c_n receive the final hidden and cell states of every layer,
 * [L, B, H] (h_n[L-1] equals output[:, T-1]). Gradients flow to x, h0, c0 and all
 * parameters, including through h_n and c_n.
 * Errors (NULL, message names the shapes): x not 3-D or its last dim not I, B or
 * T < 1, h0 or c0 not [L, B, H], dtypes that differ from the parameters'. */
lb_var *lb_lstm_forward(lb_graph *g, const lb_lstm *l, lb_var *x, lb_var *h0, lb_var *c0, lb_var **h_n,
                        lb_var **c_n);

LB_API_END

#endif

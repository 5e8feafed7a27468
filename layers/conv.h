/* Causal dilated 1-D convolution over time, the building block of temporal
 * convolutional networks (van den Oord et al. 2016, WaveNet; Bai, Kolter and Koltun
 * 2018, TCN).
 *
 * Shapes use named dimensions: B batch, T time steps, C_in / C_out channels, K
 * kernel_size, d dilation. Time is the middle axis (batch first, channels last,
 * the layout of every other lookback layer), so
 *
 *   y[b, t, o] = bias[o] + Σ_{j<K} Σ_{c<C_in} weight[o, c, j] * x[b, t - d*(K-1-j), c],
 *
 * with x[b, t', c] = 0 for t' < 0: output t sees inputs t - d*(K-1) .. t and never a
 * later one. This equals torch.nn.Conv1d(C_in, C_out, K, dilation=d,
 * padding=d*(K-1)) applied to x.transpose(1, 2) and truncated to its first T outputs
 * (equivalently, F.pad of d*(K-1) zeros on the left then an unpadded conv). The
 * weight uses PyTorch's Conv1d layout [C_out, C_in, K] and the names
 * "<prefix>.weight" / "<prefix>.bias", so PyTorch weights load by name.
 */
#ifndef LB_CONV_H
#define LB_CONV_H

#include "tensor/api.h"

#include "autograd/ops.h"
#include "layers/params.h"

LB_API_BEGIN

typedef struct lb_conv1d {
    int64_t in_channels, out_channels, kernel_size, dilation;
    lb_var *weight; /* [C_out, C_in, K]; owned by the lb_params list */
    lb_var *bias;   /* [C_out] */
} lb_conv1d;

/* Creates "<prefix>.weight" [C_out, C_in, K] and "<prefix>.bias" [C_out] in `ps` and
 * initialises both from U(-1/sqrt(C_in*K), 1/sqrt(C_in*K)), PyTorch's Conv1d default
 * (kaiming_uniform_ with a = sqrt(5)), drawing weight then bias from rng.
 *   dtype: LB_FLOAT32 or LB_FLOAT64.
 * Errors (LB_ERR_VALUE): a channel count, kernel_size or dilation < 1, a name
 * already taken in ps, rng NULL. */
lb_status lb_conv1d_init(lb_conv1d *c, lb_params *ps, const char *prefix, int64_t in_channels,
                         int64_t out_channels, int64_t kernel_size, int64_t dilation, lb_dtype dtype, lb_rng *rng);

/* Layers n of a causal stack with kernel K and dilations 1, 2, 4, ..., 2^(n-1) whose
 * receptive field 1 + (K - 1)(2^n - 1) covers seq_len positions: the smallest such n,
 * so that the last output sees the first input (a TCN sized to the sequence, Bai,
 * Kolter and Koltun 2018, §3.2). At least 1; -1 when K = 1 (the field never grows)
 * or seq_len < 1. */
int lb_conv_layers_for(int64_t seq_len, int64_t kernel_size);

/* Causal convolution (formula above), the lb_causal_conv1d op (autograd/ops.h) computed as K
 * gemms of time-shifted views per batch item (no im2col copy):
 *   x: [B, T, C_in] -> [B, T, C_out], the parameters' dtype.
 * Gradients flow to x, weight and bias. Taps reaching before t = 0 read zeros, so a
 * receptive field d*(K-1)+1 longer than T is allowed.
 * Errors (NULL, message names the shapes): x not 3-D, its last dim not C_in, a
 * dtype that differs from the parameters'. */
lb_var *lb_conv1d_forward(lb_graph *g, const lb_conv1d *c, lb_var *x);

/* ---- the convolutional model body (LB_MODEL_CONV) ----
 * n_layers residual blocks of width D = channels, dilation doubling per layer
 * (1, 2, 4, ...; WaveNet's schedule), each
 *
 *   h_{i+1} = h_i + GELU(conv_i(h_i)),   conv_i: D -> D, kernel_size K, dilation 2^i,
 *
 * with the exact (erf) GELU, a residual stack in the manner of the TCN of Bai et al.
 * 2018 (one convolution per block, no weight normalisation, no dropout). Every output position sees the
 * receptive_field = 1 + (K-1)(2^n_layers - 1) most recent inputs and no later one.
 * Parameters "<prefix>.<i>.weight" [D, D, K] and "<prefix>.<i>.bias" [D]. */
typedef struct lb_conv_stack {
    int n_layers;
    int64_t channels, kernel_size;
    lb_conv1d *layers; /* n_layers entries, owned by the stack (their parameters by ps) */
} lb_conv_stack;

/* Creates and initialises the n_layers convolutions (lb_conv1d_init, drawing layer by
 * layer from rng). Errors (LB_ERR_VALUE): channels or kernel_size < 1, n_layers
 * outside [1, 32], a name already taken; the stack is then left empty. */
lb_status lb_conv_stack_init(lb_conv_stack *s, lb_params *ps, const char *prefix, int64_t channels,
                             int64_t kernel_size, int n_layers, lb_dtype dtype, lb_rng *rng);
/* Frees the layer array (the parameters belong to ps). A zeroed stack is allowed. */
void lb_conv_stack_free(lb_conv_stack *s);
/* Input positions each output sees: 1 + (K-1)(2^n_layers - 1); 0 for an empty stack. */
int64_t lb_conv_stack_receptive_field(const lb_conv_stack *s);
/* x: [B, T, D] -> [B, T, D] through every block. Errors: as lb_conv1d_forward. */
lb_var *lb_conv_stack_forward(lb_graph *g, const lb_conv_stack *s, lb_var *x);

LB_API_END

#endif

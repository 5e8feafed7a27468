/* Position-wise feed-forward block of a transformer, x [..., d_model] -> [..., d_model],
 * hidden width d_ff (H below), one of (the model field `ffn`):
 *   gelu   (Vaswani et al. 2017, §3.3, with GELU instead of ReLU as in GPT/BERT):
 *            FFN(x) = dropout(GELU(x W1 + b1) W2 + b2)
 *   swiglu (Shazeer 2020, eq. 6; Llama):  FFN(x) = dropout((silu(x W_gate) ⊙ x W_up) W2)
 *   geglu  (Shazeer 2020, eq. 5):         FFN(x) = dropout((GELU(x W_gate) ⊙ x W_up) W2)
 * A gated layer keeps W_gate and W_up side by side in one matrix W1 = [W_gate | W_up]
 * [d_model, 2 H] (one product, then lb_swiglu / lb_geglu), with bias b1 [2 H] when
 * biases are on. Its weights: 3 d_model H (+ 2 H + d_model biases), against the GELU
 * layer's 2 d_model H: lb_ffn_gated_width gives the H of Llama's rule.
 *
 * Parameter names: "<prefix>.fc1.weight" [d_model, H] (gated: [d_model, 2 H], columns
 * :H the gate, H: the value), "<prefix>.fc1.bias" [H] (gated [2 H]),
 * "<prefix>.fc2.weight" [H, d_model], "<prefix>.fc2.bias" [d_model] (see
 * layers/linear.h: weights are stored [in, out], PyTorch's transposed; Llama's
 * w1 = fc1.weight[:, :H]ᵀ, w3 = fc1.weight[:, H:]ᵀ, w2 = fc2.weightᵀ).
 * PyTorch equivalent: the linear1 / activation / linear2 / dropout2 path of
 * torch.nn.TransformerEncoderLayer(activation="gelu") — the dropout sits on the
 * block's output, like PyTorch's dropout2 (PyTorch also drops inside, after the
 * activation; we do not).
 */
#ifndef LB_LAYERS_FFN_H
#define LB_LAYERS_FFN_H

#include "tensor/api.h"

#include "layers/linear.h"

LB_API_BEGIN

/* The feed-forward kind (the model field `ffn`). */
typedef enum lb_ffn_kind { LB_FFN_GELU = 0, LB_FFN_SWIGLU, LB_FFN_GEGLU } lb_ffn_kind;
/* "gelu" / "swiglu" / "geglu" <-> kind; parse errors (LB_ERR_VALUE) name the word. */
lb_status lb_ffn_kind_parse(const char *name, lb_ffn_kind *out);
const char *lb_ffn_kind_name(lb_ffn_kind kind);

/* The hidden width of a gated layer by Llama's rule (Touvron et al. 2023; its
 * FeedForward with multiple_of = LB_FFN_WIDTH_MULTIPLE): two thirds of 4 d_model, rounded
 * up to a multiple of LB_FFN_WIDTH_MULTIPLE, H = 8 ceil(floor(8 d_model / 3) / 8), so its
 * 3 d_model H weights about equal a GELU layer's of width 4 d_model (64 -> 176, 128 -> 344).
 * 0 for d_model < 1. */
#define LB_FFN_WIDTH_MULTIPLE 8
int64_t lb_ffn_gated_width(int64_t d_model);

typedef struct lb_ffn {
    lb_ffn_kind kind;
    lb_linear fc1, fc2;
    double dropout; /* probability of zeroing an output element while training */
} lb_ffn;

/* Registers fc1 and fc2 (with biases when `bias`) under `prefix` and initialises them
 * from rng (Xavier uniform weights, zero biases). Errors: LB_ERR_VALUE for d_model or
 * d_ff < 1 or dropout outside [0, 1). */
lb_status lb_ffn_init(lb_ffn *f, lb_params *ps, const char *prefix, int64_t d_model, int64_t d_ff, double dropout,
                      int bias, lb_dtype dtype, lb_rng *rng);

/* The same for any kind: fc1 of width 2 d_ff for the gated kinds.
 * Errors: as lb_ffn_init, and LB_ERR_VALUE for an unknown kind. */
lb_status lb_ffn_init_kind(lb_ffn *f, lb_params *ps, const char *prefix, int64_t d_model, int64_t d_ff,
                           lb_ffn_kind kind, double dropout, int bias, lb_dtype dtype, lb_rng *rng);

/* x [..., d_model] -> [..., d_model]. `training` enables dropout, drawn from rng
 * (which may be NULL when dropout is 0 or training is 0). */
lb_var *lb_ffn_forward(lb_graph *g, const lb_ffn *f, lb_var *x, int training, lb_rng *rng);

/* The layer on raw rows without a graph (evaluation: no dropout), the bits of
 * lb_ffn_forward: x [N, d_model] -> y [N, d_model] of `dtype`; hidden is the caller's
 * scratch of N H entries (gelu) or 3 N H (gated: fc1's [N, 2 H], then the product). */
void lb_ffn_rows(const lb_ffn *f, lb_dtype dtype, int64_t N, const void *x, void *hidden, void *y);

LB_API_END

#endif

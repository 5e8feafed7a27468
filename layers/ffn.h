/* Position-wise feed-forward block of a transformer (Vaswani et al. 2017, §3.3,
 * with GELU instead of ReLU as in GPT/BERT):
 *   FFN(x) = dropout(GELU(x W1 + b1) W2 + b2)
 * x [..., d_model] -> [..., d_model], hidden width d_ff.
 *
 * Parameter names: "<prefix>.fc1.weight" [d_model, d_ff], "<prefix>.fc1.bias" [d_ff],
 * "<prefix>.fc2.weight" [d_ff, d_model], "<prefix>.fc2.bias" [d_model] (see
 * layers/linear.h: weights are stored [in, out], PyTorch's transposed).
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

typedef struct lb_ffn {
    lb_linear fc1, fc2;
    double dropout; /* probability of zeroing an output element while training */
} lb_ffn;

/* Registers fc1 and fc2 (with biases when `bias`) under `prefix` and initialises them
 * from rng (Xavier uniform weights, zero biases). Errors: LB_ERR_VALUE for d_model or
 * d_ff < 1 or dropout outside [0, 1). */
lb_status lb_ffn_init(lb_ffn *f, lb_params *ps, const char *prefix, int64_t d_model, int64_t d_ff, double dropout,
                      int bias, lb_dtype dtype, lb_rng *rng);

/* x [..., d_model] -> [..., d_model]. `training` enables dropout, drawn from rng
 * (which may be NULL when dropout is 0 or training is 0). */
lb_var *lb_ffn_forward(lb_graph *g, const lb_ffn *f, lb_var *x, int training, lb_rng *rng);

LB_API_END

#endif

/* LayerNorm module (Ba, Kiros and Hinton 2016; torch.nn.LayerNorm(d, eps=1e-5)).
 *
 * Normalises over the last dim: x [..., D] -> y [..., D],
 *   y = (x - mean) / sqrt(var + eps) * weight + bias, var biased (divides by D).
 * Parameter names: "<prefix>.weight" [D] (init 1) and "<prefix>.bias" [D] (init 0),
 * the same names and shapes as PyTorch's state_dict, so weights load unchanged.
 */
#ifndef LB_LAYERS_NORM_H
#define LB_LAYERS_NORM_H

#include "tensor/api.h"

#include "autograd/ops.h"
#include "layers/params.h"

LB_API_BEGIN

typedef struct lb_norm {
    lb_var *weight; /* [D], "gamma" */
    lb_var *bias;   /* [D], "beta", or NULL (no bias) */
    int64_t d;
    double eps;
} lb_norm;

/* PyTorch's default epsilon. */
#define LB_NORM_EPS 1e-5

/* Registers "<prefix>.weight" = 1 and, when `bias`, "<prefix>.bias" = 0, both [d], in
 * `ps` (bias 0: torch.nn.LayerNorm(d, bias=False), nanoGPT's bias=False; n->bias NULL).
 * Errors: LB_ERR_VALUE for d < 1, eps < 0 or a taken name. */
lb_status lb_norm_init(lb_norm *n, lb_params *ps, const char *prefix, int64_t d, double eps, int bias, lb_dtype dtype);

/* x [..., D] -> [..., D] (lb_layer_norm with the module's weight, bias and eps).
 * Errors (NULL): x's last dim is not D. */
lb_var *lb_norm_forward(lb_graph *g, const lb_norm *n, lb_var *x);

LB_API_END

#endif

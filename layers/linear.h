/* Linear (affine) layer: y = x W + b.
 *
 * Shapes: x [..., in_features], weight W [in_features, out_features], bias b
 * [out_features] (optional) -> y [..., out_features]; any number of leading dims
 * (at least one: x may be [N, in] or [B, T, in]).
 *
 * Storage: W is kept [in, out] so that the forward pass is x @ W with no
 * transpose. PyTorch's torch.nn.Linear stores its weight as [out, in] and computes
 * x @ weight.T + bias: loading PyTorch weights means W = weight.T (transpose),
 * b = bias unchanged.
 *
 * Parameter names: "<prefix>.weight" [in, out] and "<prefix>.bias" [out].
 * Initialisation: W Xavier/Glorot uniform, U(-a, a) with a = sqrt(6 / (in + out))
 * (torch.nn.init.xavier_uniform_), b zeros. (torch.nn.Linear itself draws both
 * from U(-1/sqrt(in), 1/sqrt(in)); we use Xavier for every projection.)
 */
#ifndef LB_LAYERS_LINEAR_H
#define LB_LAYERS_LINEAR_H

#include "tensor/api.h"

#include "autograd/ops.h"
#include "layers/params.h"

LB_API_BEGIN

typedef struct lb_linear {
    lb_var *weight; /* [in_features, out_features] (owned by the lb_params list) */
    lb_var *bias;   /* [out_features], or NULL for a layer without bias */
    int64_t in_features, out_features;
    char name[96];  /* the prefix, for error messages */
} lb_linear;

/* Registers "<prefix>.weight" (and "<prefix>.bias" when `bias`) in `ps` and
 * initialises them from `rng` (Xavier uniform weight, zero bias); rng NULL leaves
 * the weight at zero. Errors: LB_ERR_VALUE for in/out < 1 or a taken name;
 * LB_ERR_MEMORY. */
lb_status lb_linear_init(lb_linear *l, lb_params *ps, const char *prefix, int64_t in_features, int64_t out_features,
                         int bias, lb_dtype dtype, lb_rng *rng);

/* y = x @ weight + bias:  x [..., in] -> [..., out]  (torch.nn.functional.linear with
 * weight transposed). Errors (NULL): x's last dim is not in_features (the message
 * names the layer and both shapes), dtype mismatch. */
lb_var *lb_linear_forward(lb_graph *g, const lb_linear *l, lb_var *x);

/* The affine map shared by every projection in layers/: x [..., K] @ w [K, N]
 * (+ b [N] when b is not NULL) -> [..., N]. `who` names the caller in errors.
 * A 1-dim x [K] is accepted and gives [N]. */
lb_var *lb_affine(lb_graph *g, lb_var *x, lb_var *w, lb_var *b, const char *who);

LB_API_END

#endif

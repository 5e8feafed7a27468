/* Normalisation modules over the last dim, x [..., D] -> y [..., D]:
 *
 *   LayerNorm (Ba, Kiros and Hinton 2016; torch.nn.LayerNorm(d, eps=1e-5)):
 *     y = (x - mean) / sqrt(var + eps) * weight + bias, var biased (divides by D);
 *   RMSNorm (Zhang & Sennrich 2019; torch.nn.RMSNorm(d, eps=1e-5)):
 *     y = x / sqrt(mean(x^2) + eps) * weight: no mean subtraction and never a bias.
 *
 * Parameter names: "<prefix>.weight" [D] (init 1) and, for LayerNorm with a bias,
 * "<prefix>.bias" [D] (init 0): the names and shapes of PyTorch's state_dict.
 */
#ifndef LB_LAYERS_NORM_H
#define LB_LAYERS_NORM_H

#include "tensor/api.h"

#include "autograd/ops.h"
#include "layers/params.h"

LB_API_BEGIN

/* Which normalisation (the model field `norm`). */
typedef enum lb_norm_kind { LB_NORM_LAYERNORM = 0, LB_NORM_RMSNORM } lb_norm_kind;
/* "layernorm" / "rmsnorm" <-> kind; parse errors (LB_ERR_VALUE) name the word. */
lb_status lb_norm_kind_parse(const char *name, lb_norm_kind *out);
const char *lb_norm_kind_name(lb_norm_kind kind);

/* Where a transformer block normalises (the model field `norm_position`):
 * LB_NORM_PRE normalises each sublayer's input, x + f(norm(x)) (GPT-2; Xiong et al. 2020);
 * LB_NORM_POST normalises after the residual add, norm(x + f(x)) (Vaswani et al. 2017). */
typedef enum lb_norm_position { LB_NORM_PRE = 0, LB_NORM_POST } lb_norm_position;
/* "pre" / "post" <-> position; parse errors (LB_ERR_VALUE) name the word. */
lb_status lb_norm_position_parse(const char *name, lb_norm_position *out);
const char *lb_norm_position_name(lb_norm_position position);

typedef struct lb_norm {
    lb_norm_kind kind;
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

/* Registers a norm of `kind`: as lb_norm_init for LB_NORM_LAYERNORM; for
 * LB_NORM_RMSNORM only "<prefix>.weight" = 1 (`bias` is ignored: RMSNorm has none).
 * Errors: as lb_norm_init, and LB_ERR_VALUE for an unknown kind. */
lb_status lb_norm_init_kind(lb_norm *n, lb_params *ps, const char *prefix, int64_t d, lb_norm_kind kind, double eps,
                            int bias, lb_dtype dtype);

/* x [..., D] -> [..., D] (lb_layer_norm or lb_rms_norm with the module's parameters
 * and eps). Errors (NULL): x's last dim is not D. */
lb_var *lb_norm_forward(lb_graph *g, const lb_norm *n, lb_var *x);

/* The same on raw rows, without a graph: x [N, D] -> y [N, D] of `dtype` (the module's),
 * y may be x; the bits of lb_norm_forward (kernels/stream.h's row kernels). */
void lb_norm_rows(const lb_norm *n, lb_dtype dtype, int64_t N, const void *x, void *y);

LB_API_END

#endif

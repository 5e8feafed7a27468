#include "layers/norm.h"

#include <math.h>
#include <string.h>

#include "kernels/stream.h"
#include "tensor/names.h"

static const char *const kind_names[] = {"layernorm", "rmsnorm"};
static const char *const position_names[] = {"pre", "post"};

const char *lb_norm_kind_name(lb_norm_kind kind)
{
    return lb_name_of(kind_names, LB_COUNT_OF(kind_names), (int)kind, "unknown");
}

lb_status lb_norm_kind_parse(const char *name, lb_norm_kind *out)
{
    LB_CHECK_ARG(out, LB_ERR_VALUE);
    int i = 0;
    lb_status st = lb_name_parse("normalisation", kind_names, LB_COUNT_OF(kind_names), name, 0, &i);
    if (st == LB_OK)
        *out = (lb_norm_kind)i;
    return st;
}

const char *lb_norm_position_name(lb_norm_position position)
{
    return lb_name_of(position_names, LB_COUNT_OF(position_names), (int)position, "unknown");
}

lb_status lb_norm_position_parse(const char *name, lb_norm_position *out)
{
    LB_CHECK_ARG(out, LB_ERR_VALUE);
    int i = 0;
    lb_status st = lb_name_parse("norm position", position_names, LB_COUNT_OF(position_names), name, 0, &i);
    if (st == LB_OK)
        *out = (lb_norm_position)i;
    return st;
}

lb_status lb_norm_init(lb_norm *n, lb_params *ps, const char *prefix, int64_t d, double eps, int bias, lb_dtype dtype)
{
    return lb_norm_init_kind(n, ps, prefix, d, LB_NORM_LAYERNORM, eps, bias, dtype);
}

lb_status lb_norm_init_kind(lb_norm *n, lb_params *ps, const char *prefix, int64_t d, lb_norm_kind kind, double eps,
                            int bias, lb_dtype dtype)
{
    LB_CHECK_ARG(n, LB_ERR_VALUE);
    LB_CHECK_ARG(ps, LB_ERR_VALUE);
    memset(n, 0, sizeof *n);
    if (d < 1 || !(eps >= 0) || !isfinite(eps))
        return lb_error(LB_ERR_VALUE, "layer norm '%s': d = %lld must be >= 1 and eps = %g finite and >= 0",
                        prefix ? prefix : "", (long long)d, eps);
    int64_t s[1] = {d};
    if (kind != LB_NORM_LAYERNORM && kind != LB_NORM_RMSNORM)
        return lb_error(LB_ERR_VALUE, "norm '%s': kind = %d is neither layernorm nor rmsnorm", prefix ? prefix : "",
                        (int)kind);
    n->kind = kind;
    n->d = d;
    n->eps = eps;
    if (kind == LB_NORM_RMSNORM)
        bias = 0;
    if (!(n->weight = lb_params_add(ps, prefix, "weight", dtype, 1, s)))
        return lb_last_status();
    if (bias && !(n->bias = lb_params_add(ps, prefix, "bias", dtype, 1, s)))
        return lb_last_status();
    lb_init_constant(n->weight, 1.0);
    return LB_OK;
}

lb_var *lb_norm_forward(lb_graph *g, const lb_norm *n, lb_var *x)
{
    LB_CHECK_ARG(g, NULL);
    LB_CHECK_ARG(n, NULL);
    LB_CHECK_INPUT(x, NULL);
    if (n->kind == LB_NORM_RMSNORM)
        return lb_rms_norm(g, x, n->weight, n->eps);
    return lb_layer_norm(g, x, n->weight, n->bias, n->eps);
}

void lb_norm_rows(const lb_norm *n, lb_dtype dtype, int64_t N, const void *x, void *y)
{
    LB_CHECK_ARG(n);
    const void *w = n->weight ? lb_tensor_data(n->weight->value) : NULL;
    if (n->kind == LB_NORM_RMSNORM)
        lb_k_rms_norm_rows(dtype, N, n->d, x, w, n->eps, y, NULL);
    else
        lb_k_layer_norm_rows(dtype, N, n->d, x, w, n->bias ? lb_tensor_data(n->bias->value) : NULL, n->eps, y);
}

#include "layers/norm.h"

#include <math.h>
#include <string.h>

lb_status lb_norm_init(lb_norm *n, lb_params *ps, const char *prefix, int64_t d, double eps, int bias, lb_dtype dtype)
{
    LB_CHECK_ARG(n, LB_ERR_VALUE);
    LB_CHECK_ARG(ps, LB_ERR_VALUE);
    memset(n, 0, sizeof *n);
    if (d < 1 || !(eps >= 0) || !isfinite(eps))
        return lb_error(LB_ERR_VALUE, "layer norm '%s': d = %lld must be >= 1 and eps = %g finite and >= 0",
                        prefix ? prefix : "", (long long)d, eps);
    int64_t s[1] = {d};
    n->d = d;
    n->eps = eps;
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
    return lb_layer_norm(g, x, n->weight, n->bias, n->eps);
}

#include "layers/linear.h"

#include <stdio.h>
#include <string.h>

lb_status lb_linear_init(lb_linear *l, lb_params *ps, const char *prefix, int64_t in_features, int64_t out_features,
                         int bias, lb_dtype dtype, lb_rng *rng)
{
    LB_CHECK_ARG(l, LB_ERR_VALUE);
    LB_CHECK_ARG(ps, LB_ERR_VALUE);
    memset(l, 0, sizeof *l);
    snprintf(l->name, sizeof l->name, "%s", prefix && prefix[0] ? prefix : "linear");
    if (in_features < 1 || out_features < 1)
        return lb_error(LB_ERR_VALUE, "linear '%s': in_features = %lld and out_features = %lld must both be >= 1",
                        l->name, (long long)in_features, (long long)out_features);
    int64_t ws[2] = {in_features, out_features}, bs[1] = {out_features};
    l->in_features = in_features;
    l->out_features = out_features;
    l->weight = lb_params_add(ps, prefix, "weight", dtype, 2, ws);
    if (!l->weight)
        return lb_last_status();
    if (bias && !(l->bias = lb_params_add(ps, prefix, "bias", dtype, 1, bs)))
        return lb_last_status();
    if (rng)
        lb_init_xavier_uniform(l->weight, rng, in_features, out_features);
    return LB_OK;
}

lb_var *lb_affine(lb_graph *g, lb_var *x, lb_var *w, lb_var *b, const char *who)
{
    LB_CHECK_INPUT(x, NULL);
    LB_CHECK_INPUT(w, NULL);
    if (!x || !w)
        return NULL;
    const lb_tensor *tx = x->value, *tw = w->value;
    if (tx->ndim < 1 || tw->ndim != 2 || tx->shape[tx->ndim - 1] != tw->shape[0]) {
        char sx[128], sw[128];
        lb_error(LB_ERR_SHAPE, "%s: input %s does not fit the weight %s [in, out] (the input's last dim must be in = %lld)",
                 who, lb_tensor_describe(tx, sx, sizeof sx), lb_tensor_describe(tw, sw, sizeof sw),
                 tw->ndim == 2 ? (long long)tw->shape[0] : -1LL);
        return NULL;
    }
    lb_var *y;
    if (tx->ndim == 1) {
        int64_t row[2] = {1, tx->shape[0]}, out[1] = {tw->shape[1]};
        y = lb_reshape(g, lb_matmul(g, lb_reshape(g, x, 2, row), w), 1, out);
    } else {
        y = lb_matmul(g, x, w);
    }
    if (b)
        y = lb_add(g, y, b);
    return y;
}

lb_var *lb_linear_forward(lb_graph *g, const lb_linear *l, lb_var *x)
{
    LB_CHECK_ARG(g, NULL);
    LB_CHECK_ARG(l, NULL);
    LB_CHECK_INPUT(x, NULL);
    char who[128];
    snprintf(who, sizeof who, "linear '%s'", l->name);
    return lb_affine(g, x, l->weight, l->bias, who);
}

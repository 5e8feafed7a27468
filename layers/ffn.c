#include "layers/ffn.h"

#include <stdio.h>
#include <string.h>

lb_status lb_ffn_init(lb_ffn *f, lb_params *ps, const char *prefix, int64_t d_model, int64_t d_ff, double dropout,
                      int bias, lb_dtype dtype, lb_rng *rng)
{
    LB_CHECK_ARG(f, LB_ERR_VALUE);
    LB_CHECK_ARG(ps, LB_ERR_VALUE);
    memset(f, 0, sizeof *f);
    if (d_model < 1 || d_ff < 1 || !(dropout >= 0 && dropout < 1))
        return lb_error(LB_ERR_VALUE, "feed-forward '%s': d_model = %lld and d_ff = %lld must be >= 1, dropout = %g in [0, 1)",
                        prefix ? prefix : "", (long long)d_model, (long long)d_ff, dropout);
    char name[160];
    f->dropout = dropout;
    if (lb_linear_init(&f->fc1, ps, lb_param_name(name, sizeof name, prefix, "fc1"), d_model, d_ff, bias, dtype, rng) != LB_OK)
        return lb_last_status();
    return lb_linear_init(&f->fc2, ps, lb_param_name(name, sizeof name, prefix, "fc2"), d_ff, d_model, bias, dtype, rng);
}

lb_var *lb_ffn_forward(lb_graph *g, const lb_ffn *f, lb_var *x, int training, lb_rng *rng)
{
    LB_CHECK_ARG(g, NULL);
    LB_CHECK_ARG(f, NULL);
    LB_CHECK_INPUT(x, NULL);
    lb_var *y = lb_linear_forward(g, &f->fc2, lb_gelu(g, lb_linear_forward(g, &f->fc1, x)));
    if (training && f->dropout > 0)
        y = lb_dropout(g, y, f->dropout, training, rng);
    return y;
}

#include "layers/ffn.h"

#include <stdio.h>
#include <string.h>

#include "kernels/gelu.h"
#include "kernels/stream.h"
#include "tensor/names.h"

static const char *const kind_names[] = {"gelu", "swiglu", "geglu"};

const char *lb_ffn_kind_name(lb_ffn_kind kind) { return lb_name_of(kind_names, LB_COUNT_OF(kind_names), (int)kind, "unknown"); }

lb_status lb_ffn_kind_parse(const char *name, lb_ffn_kind *out)
{
    LB_CHECK_ARG(out, LB_ERR_VALUE);
    int i = 0;
    lb_status st = lb_name_parse("feed-forward kind", kind_names, LB_COUNT_OF(kind_names), name, 0, &i);
    if (st == LB_OK)
        *out = (lb_ffn_kind)i;
    return st;
}

int64_t lb_ffn_gated_width(int64_t d_model)
{
    if (d_model < 1)
        return 0;
    int64_t h = 8 * d_model / 3;
    return LB_FFN_WIDTH_MULTIPLE * ((h + LB_FFN_WIDTH_MULTIPLE - 1) / LB_FFN_WIDTH_MULTIPLE);
}

lb_status lb_ffn_init(lb_ffn *f, lb_params *ps, const char *prefix, int64_t d_model, int64_t d_ff, double dropout,
                      int bias, lb_dtype dtype, lb_rng *rng)
{
    return lb_ffn_init_kind(f, ps, prefix, d_model, d_ff, LB_FFN_GELU, dropout, bias, dtype, rng);
}

lb_status lb_ffn_init_kind(lb_ffn *f, lb_params *ps, const char *prefix, int64_t d_model, int64_t d_ff,
                           lb_ffn_kind kind, double dropout, int bias, lb_dtype dtype, lb_rng *rng)
{
    LB_CHECK_ARG(f, LB_ERR_VALUE);
    LB_CHECK_ARG(ps, LB_ERR_VALUE);
    memset(f, 0, sizeof *f);
    if (d_model < 1 || d_ff < 1 || !(dropout >= 0 && dropout < 1))
        return lb_error(LB_ERR_VALUE, "feed-forward '%s': d_model = %lld and d_ff = %lld must be >= 1, dropout = %g in [0, 1)",
                        prefix ? prefix : "", (long long)d_model, (long long)d_ff, dropout);
    if (kind != LB_FFN_GELU && kind != LB_FFN_SWIGLU && kind != LB_FFN_GEGLU)
        return lb_error(LB_ERR_VALUE, "feed-forward '%s': kind = %d is not gelu, swiglu or geglu", prefix ? prefix : "",
                        (int)kind);
    char name[160];
    f->kind = kind;
    f->dropout = dropout;
    int64_t width = kind == LB_FFN_GELU ? d_ff : 2 * d_ff;
    if (lb_linear_init(&f->fc1, ps, lb_param_name(name, sizeof name, prefix, "fc1"), d_model, width, bias, dtype, rng) != LB_OK)
        return lb_last_status();
    return lb_linear_init(&f->fc2, ps, lb_param_name(name, sizeof name, prefix, "fc2"), d_ff, d_model, bias, dtype, rng);
}

lb_var *lb_ffn_forward(lb_graph *g, const lb_ffn *f, lb_var *x, int training, lb_rng *rng)
{
    LB_CHECK_ARG(g, NULL);
    LB_CHECK_ARG(f, NULL);
    LB_CHECK_INPUT(x, NULL);
    lb_var *h = lb_linear_forward(g, &f->fc1, x);
    h = f->kind == LB_FFN_SWIGLU ? lb_swiglu(g, h) : f->kind == LB_FFN_GEGLU ? lb_geglu(g, h) : lb_gelu(g, h);
    lb_var *y = lb_linear_forward(g, &f->fc2, h);
    if (training && f->dropout > 0)
        y = lb_dropout(g, y, f->dropout, training, rng);
    return y;
}

static const void *bias_data(const lb_linear *l) { return l->bias ? lb_tensor_data(l->bias->value) : NULL; }

void lb_ffn_rows(const lb_ffn *f, lb_dtype dtype, int64_t N, const void *x, void *hidden, void *y)
{
    LB_CHECK_ARG(f);
    int64_t d_ff = f->fc2.in_features;
    lb_k_affine_rows(dtype, N, f->fc1.in_features, f->fc1.out_features, x, lb_tensor_data(f->fc1.weight->value),
                     bias_data(&f->fc1), hidden);
    void *product = hidden; /* [N, H] */
    if (f->kind == LB_FFN_GELU) { /* in place, as the kernel allows */
        lb_k_gelu(dtype, N * d_ff, hidden, hidden, 0);
    } else { /* [N, 2 H] -> [N, H] after them */
        product = (char *)hidden + (size_t)(N * 2 * d_ff) * lb_dtype_size(dtype);
        lb_k_glu(dtype, f->kind == LB_FFN_SWIGLU ? LB_GLU_SILU : LB_GLU_GELU, N, d_ff, hidden, product);
    }
    lb_k_affine_rows(dtype, N, d_ff, f->fc2.out_features, product, lb_tensor_data(f->fc2.weight->value),
                     bias_data(&f->fc2), y);
}

/* The selective scan as one op; the numerics are the kernels of kernels/selective_scan.h
 * (named dims B, T, D, N as there). */
#include "autograd/op_table.h"
#include "autograd/ops.h"
#include "kernels/selective_scan.h"

/* inputs: u, delta [B, T, D], A [D, N], Bm, Cm [B, T, N]; node->grad dy [B, T, D]. */
lb_status lb_selective_scan_backward(lb_var *node)
{
    lb_var *const *in = node->inputs;
    const lb_tensor *dy = node->grad;
    const int64_t B = dy->shape[0], T = dy->shape[1], D = dy->shape[2], N = in[2]->value->shape[1];
    lb_tensor *grads[5] = {0};
    for (int i = 0; i < 5; i++)
        if (in[i]->requires_grad && !(grads[i] = lb_grad_buffer(in[i])))
            return lb_last_status();
    void *g[5];
    for (int i = 0; i < 5; i++)
        g[i] = grads[i] ? lb_tensor_data(grads[i]) : NULL;
    return lb_k_selective_scan_backward(dy->dtype, B, T, D, N, lb_tensor_data(in[0]->value),
                                        lb_tensor_data(in[1]->value), lb_tensor_data(in[2]->value),
                                        lb_tensor_data(in[3]->value), lb_tensor_data(in[4]->value),
                                        lb_tensor_data(dy), g[0], g[1], g[2], g[3], g[4]);
}

lb_var *lb_selective_scan(lb_graph *g, lb_var *u, lb_var *delta, lb_var *A, lb_var *Bm, lb_var *Cm)
{
    lb_var *in[5] = {u, delta, A, Bm, Cm};
    if (lb_check_inputs("selective_scan", g, 5, in) != LB_OK)
        return NULL;
    const lb_tensor *uv = u->value, *dv = delta->value, *av = A->value, *bv = Bm->value, *cv = Cm->value;
    int fits = uv->ndim == 3 && dv->ndim == 3 && av->ndim == 2 && bv->ndim == 3 && cv->ndim == 3;
    for (int i = 0; fits && i < 3; i++)
        fits = dv->shape[i] == uv->shape[i] && (i == 2 || (bv->shape[i] == uv->shape[i] && cv->shape[i] == uv->shape[i]));
    fits = fits && av->shape[0] == uv->shape[2] && bv->shape[2] == av->shape[1] && cv->shape[2] == av->shape[1];
    if (!fits) {
        char s[5][128];
        for (int i = 0; i < 5; i++)
            lb_tensor_describe(in[i]->value, s[i], sizeof s[i]);
        lb_error(LB_ERR_SHAPE,
                 "selective_scan: shapes do not fit: u %s, delta %s, A %s, B %s, C %s (expected u and delta [B, T, D], "
                 "A [D, N], B and C [B, T, N])",
                 s[0], s[1], s[2], s[3], s[4]);
        return NULL;
    }
    const int64_t B = uv->shape[0], T = uv->shape[1], D = uv->shape[2], N = av->shape[1];
    lb_tensor *y = lb_tensor_zeros(uv->dtype, 3, uv->shape);
    if (!y || lb_k_selective_scan(uv->dtype, B, T, D, N, lb_tensor_data(uv), lb_tensor_data(dv), lb_tensor_data(av),
                                  lb_tensor_data(bv), lb_tensor_data(cv), NULL, NULL, NULL, lb_tensor_data(y)) != LB_OK) {
        lb_tensor_free(y);
        return NULL;
    }
    return lb_graph_record(g, LB_OP_SELECTIVE_SCAN, y, 5, in);
}

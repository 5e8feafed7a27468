/* Causal linear attention as one op; the numerics are the kernels of
 * kernels/linear_attention.h (named dims B, H, T, Dk, Dv as there). */
#include "autograd/op_table.h"
#include "autograd/ops.h"
#include "kernels/linear_attention.h"

/* inputs q, k, v; saved[0] den [B, H, T], saved[1] gamma [H] (float64) or NULL;
 * node->grad dy [B, H, T, Dv]. */
lb_status lb_linear_attention_backward(lb_var *node)
{
    lb_var *q = node->inputs[0], *k = node->inputs[1], *v = node->inputs[2];
    const lb_tensor *qv = q->value, *vv = v->value;
    const int64_t B = qv->shape[0], H = qv->shape[1], T = qv->shape[2], Dk = qv->shape[3], Dv = vv->shape[3];
    lb_tensor *gq = NULL, *gk = NULL, *gv = NULL;
    if (q->requires_grad && !(gq = lb_grad_buffer(q)))
        return lb_last_status();
    if (k->requires_grad && !(gk = lb_grad_buffer(k)))
        return lb_last_status();
    if (v->requires_grad && !(gv = lb_grad_buffer(v)))
        return lb_last_status();
    const lb_tensor *gamma = node->saved[1];
    return lb_k_linear_attention_backward(qv->dtype, B, H, T, Dk, Dv, gamma ? lb_tensor_data(gamma) : NULL,
                                   lb_tensor_data(qv), lb_tensor_data(k->value), lb_tensor_data(vv),
                                   lb_tensor_data(node->value), lb_tensor_data(node->saved[0]),
                                   lb_tensor_data(node->grad), gq ? lb_tensor_data(gq) : NULL,
                                   gk ? lb_tensor_data(gk) : NULL, gv ? lb_tensor_data(gv) : NULL);
}

lb_var *lb_linear_attention(lb_graph *g, lb_var *q, lb_var *k, lb_var *v, const double *gamma, lb_tensor *state,
                            const int64_t *valid)
{
    lb_var *in[3] = {q, k, v};
    if (lb_check_inputs("linear_attention", g, 3, in) != LB_OK)
        return NULL;
    const lb_tensor *qv = q->value, *kv = k->value, *vv = v->value;
    char sq[128], sk[128], sv[128];
    if (qv->ndim != 4 || kv->ndim != 4 || vv->ndim != 4 || qv->shape[3] != kv->shape[3] ||
        vv->shape[3] < 1 || qv->shape[3] < 1) {
        lb_error(LB_ERR_SHAPE, "linear_attention: q %s, k %s, v %s must be [B, H, T, d_k], [B, H, T, d_k], [B, H, T, d_v]",
                 lb_tensor_describe(qv, sq, sizeof sq), lb_tensor_describe(kv, sk, sizeof sk),
                 lb_tensor_describe(vv, sv, sizeof sv));
        return NULL;
    }
    for (int d = 0; d < 3; d++)
        if (kv->shape[d] != qv->shape[d] || vv->shape[d] != qv->shape[d]) {
            lb_error(LB_ERR_SHAPE, "linear_attention: q %s, k %s, v %s differ in B, H or T (causal self-attention: "
                                   "every query has its key and value)",
                     lb_tensor_describe(qv, sq, sizeof sq), lb_tensor_describe(kv, sk, sizeof sk),
                     lb_tensor_describe(vv, sv, sizeof sv));
            return NULL;
        }
    const int64_t B = qv->shape[0], H = qv->shape[1], T = qv->shape[2], Dk = qv->shape[3], Dv = vv->shape[3];
    if (state && (state->dtype != qv->dtype || state->ndim != 4 || state->shape[0] != B || state->shape[1] != H ||
                  state->shape[2] != Dk || state->shape[3] != Dv + 1)) {
        lb_error(LB_ERR_SHAPE, "linear_attention: the state %s must be [B, H, d_k, d_v + 1] = [%lld, %lld, %lld, %lld] "
                               "of the inputs' dtype",
                 lb_tensor_describe(state, sq, sizeof sq), (long long)B, (long long)H, (long long)Dk, (long long)(Dv + 1));
        return NULL;
    }
    for (int64_t h = 0; gamma && h < H; h++)
        if (!(gamma[h] > 0 && gamma[h] <= 1)) {
            lb_error(LB_ERR_VALUE, "linear_attention: decay gamma[%lld] = %g is outside (0, 1]", (long long)h, gamma[h]);
            return NULL;
        }
    int64_t shape[4] = {B, H, T, Dv}, dshape[3] = {B, H, T}, hshape[1] = {H};
    lb_tensor *y = lb_tensor_empty(qv->dtype, 4, shape), *den = lb_tensor_empty(qv->dtype, 3, dshape);
    lb_tensor *gt = gamma ? lb_tensor_empty(LB_FLOAT64, 1, hshape) : NULL;
    if (!y || !den || (gamma && !gt)) {
        lb_tensor_free(y);
        lb_tensor_free(den);
        lb_tensor_free(gt);
        return NULL;
    }
    if (gt)
        for (int64_t h = 0; h < H; h++)
            ((double *)lb_tensor_data(gt))[h] = gamma[h];
    if (lb_k_linear_attention_forward(qv->dtype, B, H, T, Dk, Dv, gamma, lb_tensor_data(qv), lb_tensor_data(kv),
                                      lb_tensor_data(vv), lb_tensor_data(y), lb_tensor_data(den),
                                      state ? lb_tensor_data(state) : NULL, valid) != LB_OK) {
        lb_tensor_free(y);
        lb_tensor_free(den);
        lb_tensor_free(gt);
        return NULL;
    }
    lb_var *out = lb_graph_record(g, LB_OP_LINEAR_ATTENTION, y, 3, in);
    if (!out || !out->requires_grad) {
        lb_tensor_free(den);
        lb_tensor_free(gt);
        return out;
    }
    out->saved[0] = den;
    out->saved[1] = gt;
    return out;
}

/* Causal dilated 1-D convolution as one op; the numerics are the kernels of
 * kernels/conv.h (named dims B, T, Ci, Co, K, d as there). */
#include "autograd/op_table.h"
#include "autograd/ops.h"
#include "kernels/conv.h"
#include "tensor/kernels.h"

/* weight [Co, Ci, K] -> a new tap-major [K, Ci, Co] tensor (NULL when out of memory). */
static lb_tensor *packed_taps(const lb_tensor *w)
{
    const int64_t Co = w->shape[0], Ci = w->shape[1], K = w->shape[2];
    int64_t shape[3] = {K, Ci, Co};
    lb_tensor *taps = lb_tensor_zeros(w->dtype, 3, shape);
    if (taps)
        lb_k_conv1d_pack_taps(w->dtype, Co, Ci, K, lb_tensor_data(w), lb_tensor_data(taps));
    return taps;
}

/* inputs: x [B,T,Ci], weight [Co,Ci,K], bias [Co]; attr_i[0] = d; node->grad dy [B,T,Co]. */
lb_status lb_conv1d_backward(lb_var *node)
{
    lb_var *x = node->inputs[0], *w = node->inputs[1], *bias = node->inputs[2];
    const lb_tensor *dy = node->grad;
    const lb_dtype dt = dy->dtype;
    const int64_t B = dy->shape[0], T = dy->shape[1], Co = dy->shape[2];
    const int64_t Ci = w->value->shape[1], K = w->value->shape[2], d = node->attr_i[0];
    if (bias->requires_grad) { /* dbias [Co] += Σ_{b,t} dy[b,t] */
        LB_GRAD_BUFFER_OR_RETURN(gb, bias);
        lb_status st = lb_k_add_row_sums(dt, B * T, Co, lb_tensor_data(dy), lb_tensor_data(gb));
        if (st != LB_OK)
            return st;
    }
    if (x->requires_grad) { /* dx [B,T,Ci] += Σ_j shifted dy @ Wjᵀ */
        LB_GRAD_BUFFER_OR_RETURN(gx, x);
        lb_tensor *taps = packed_taps(w->value);
        if (!taps)
            return lb_last_status();
        lb_k_conv1d_backward_input(dt, B, T, Ci, Co, K, d, lb_tensor_data(dy), lb_tensor_data(taps),
                                   lb_tensor_data(gx));
        lb_tensor_free(taps);
    }
    if (w->requires_grad) { /* dW in tap-major [K,Ci,Co], then added to PyTorch's [Co,Ci,K] */
        LB_GRAD_BUFFER_OR_RETURN(gw, w);
        int64_t shape[3] = {K, Ci, Co};
        lb_tensor *dtaps = lb_tensor_zeros(dt, 3, shape);
        if (!dtaps)
            return lb_last_status();
        lb_k_conv1d_backward_taps(dt, B, T, Ci, Co, K, d, lb_tensor_data(x->value), lb_tensor_data(dy),
                                  lb_tensor_data(dtaps));
        lb_k_conv1d_unpack_taps_add(dt, Co, Ci, K, lb_tensor_data(dtaps), lb_tensor_data(gw));
        lb_tensor_free(dtaps);
    }
    return LB_OK;
}

lb_var *lb_causal_conv1d(lb_graph *g, lb_var *x, lb_var *weight, lb_var *bias, int64_t dilation)
{
    lb_var *in[3] = {x, weight, bias};
    if (lb_check_inputs("conv1d", g, 3, in) != LB_OK)
        return NULL;
    const lb_tensor *xv = x->value, *wv = weight->value, *bv = bias->value;
    if (xv->ndim != 3 || wv->ndim != 3 || bv->ndim != 1 || xv->shape[2] != wv->shape[1] ||
        bv->shape[0] != wv->shape[0] || wv->shape[2] < 1) {
        char sx[128], sw[128], sb[128];
        lb_error(LB_ERR_SHAPE,
                 "conv1d: shapes do not fit: x %s, weight %s, bias %s (expected x [B, T, C_in], weight [C_out, C_in, "
                 "K] with K >= 1, bias [C_out])",
                 lb_tensor_describe(xv, sx, sizeof sx), lb_tensor_describe(wv, sw, sizeof sw),
                 lb_tensor_describe(bv, sb, sizeof sb));
        return NULL;
    }
    if (dilation < 1) {
        char sx[128];
        lb_error(LB_ERR_VALUE, "conv1d: dilation %lld for x %s must be >= 1", (long long)dilation,
                 lb_tensor_describe(xv, sx, sizeof sx));
        return NULL;
    }
    const int64_t B = xv->shape[0], T = xv->shape[1], Ci = wv->shape[1], Co = wv->shape[0], K = wv->shape[2];
    int64_t shape[3] = {B, T, Co};
    lb_tensor *y = lb_tensor_zeros(xv->dtype, 3, shape);
    lb_tensor *taps = y ? packed_taps(wv) : NULL;
    if (!taps) {
        lb_tensor_free(y);
        return NULL;
    }
    lb_k_conv1d_forward(xv->dtype, B, T, Ci, Co, K, dilation, lb_tensor_data(xv), lb_tensor_data(taps),
                        lb_tensor_data(bv), lb_tensor_data(y));
    lb_tensor_free(taps);
    lb_var *v = lb_graph_record(g, LB_OP_CONV1D, y, 3, in);
    if (v)
        v->attr_i[0] = dilation;
    return v;
}

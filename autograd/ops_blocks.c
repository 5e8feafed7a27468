/* Ops of today's small transformer blocks: RMS normalisation (Zhang & Sennrich 2019)
 * and the gated product of a gated linear unit (Shazeer 2020).
 *
 * Named dims: R rows (every leading dim flattened), D features, H the hidden width of
 * a gated unit (its input holds 2 H: the gate, then the value).
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "autograd/op_table.h"
#include "autograd/ops.h"
#include "kernels/gelu.h"
#include "kernels/stream.h"
#include "tensor/kernels.h"
#include "tensor/threads.h"

/* ---- RMS norm ----
 * x: [R, D], weight: [D] or NULL -> y: [R, D]
 * saved: rstd [R] (float64), rstd = 1 / sqrt(mean(x^2) + eps).
 * inputs: x, then weight if present (attr_i[0] says which). */

lb_var *lb_rms_norm(lb_graph *g, lb_var *x, lb_var *weight, double eps)
{
    char sx[128], sp[128];
    lb_var *in[2] = {x, weight};
    int n_in = weight ? 2 : 1;
    if (lb_check_inputs("rms_norm", g, n_in, in) != LB_OK)
        return NULL;
    const lb_tensor *tx = x->value;
    if (tx->ndim < 1 || tx->shape[tx->ndim - 1] == 0) {
        lb_error(LB_ERR_SHAPE, "rms_norm: x %s needs a non-empty last (feature) dim [..., D]",
                 lb_tensor_describe(tx, sx, sizeof sx));
        return NULL;
    }
    int64_t d = tx->shape[tx->ndim - 1], rows = lb_tensor_numel(tx) / d;
    if (weight && (weight->value->ndim != 1 || weight->value->shape[0] != d)) {
        lb_error(LB_ERR_SHAPE, "rms_norm: weight %s must be [D] = [%lld] to match x %s (one entry per feature)",
                 lb_tensor_describe(weight->value, sp, sizeof sp), (long long)d, lb_tensor_describe(tx, sx, sizeof sx));
        return NULL;
    }
    if (!(eps >= 0) || !isfinite(eps)) {
        lb_error(LB_ERR_VALUE, "rms_norm: eps %g for x %s must be finite and >= 0 (lookback uses 1e-5)", eps,
                 lb_tensor_describe(tx, sx, sizeof sx));
        return NULL;
    }
    lb_tensor *out = lb_tensor_empty_like(tx); /* every element written below */
    lb_tensor *rstd = lb_tensor_empty(LB_FLOAT64, tx->ndim - 1, tx->shape);
    if (!out || !rstd) {
        lb_tensor_free(out);
        lb_tensor_free(rstd);
        return NULL;
    }
    const size_t es = lb_dtype_size(tx->dtype);
    const char *px = lb_tensor_data(tx);
    const void *pw = weight ? lb_tensor_data(weight->value) : NULL;
    char *py = lb_tensor_data(out);
    double *pr = lb_tensor_data(rstd);
    int nt = lb_threads_for(rows * d, LB_GRAIN_ELEMENTS); /* rows are independent */
    _Pragma("omp parallel for schedule(static) num_threads(nt) if (nt > 1)")
    for (int64_t r = 0; r < rows; r++)
        lb_k_rms_norm_rows(tx->dtype, 1, d, px + (size_t)(r * d) * es, pw, eps, py + (size_t)(r * d) * es, pr + r);
    lb_var *v = lb_graph_record(g, LB_OP_RMS_NORM, out, n_in, in);
    if (v && v->requires_grad) {
        v->saved[0] = rstd;
        v->attr_i[0] = weight != NULL;
        v->attr_f[0] = eps;
    } else {
        lb_tensor_free(rstd);
    }
    return v;
}

/* Rows per partial sum of dweight. */
enum { RMS_ROW_BLOCK = 256 };

/* With xhat = x * rstd and gxhat = dy * weight (dy without a weight):
 *   dx_j      += rstd * (gxhat_j - xhat_j * mean_k(gxhat_k * xhat_k))
 *   dweight_j += sum_r dy_rj * xhat_rj
 * x, dy, dx: [R, D]; weight and its grad: [D]; sums in double, dweight per block of
 * RMS_ROW_BLOCK rows and then the blocks in order (the same bits at any thread count). */
lb_status lb_rms_norm_backward(lb_var *node)
{
    lb_var *x = node->inputs[0];
    lb_var *weight = node->attr_i[0] ? node->inputs[1] : NULL;
    const lb_tensor *tx = x->value;
    int64_t d = tx->shape[tx->ndim - 1], rows = lb_tensor_numel(tx) / d;
    const double *pr = lb_tensor_data(node->saved[0]);
    lb_tensor *gx = x->requires_grad ? lb_grad_buffer(x) : NULL;
    lb_tensor *gw = weight && weight->requires_grad ? lb_grad_buffer(weight) : NULL;
    if ((x->requires_grad && !gx) || (weight && weight->requires_grad && !gw))
        return lb_last_status();
    int64_t n_blocks = (rows + RMS_ROW_BLOCK - 1) / RMS_ROW_BLOCK;
    double *acc = gw ? calloc((size_t)(n_blocks * d), sizeof *acc) : NULL;
    if (gw && !acc)
        return lb_error(LB_ERR_MEMORY, "rms_norm backward: out of memory for %lld x %lld partial sums",
                        (long long)n_blocks, (long long)d);
    int nt = lb_threads_for(rows * d, LB_GRAIN_ELEMENTS / 2);
    LB_DISPATCH(tx->dtype, T, {
        const T *px = lb_tensor_data(tx), *pdy = lb_tensor_data(node->grad);
        const T *pw = weight ? lb_tensor_data(weight->value) : NULL;
        T *pdx = gx ? lb_tensor_data(gx) : NULL;
        _Pragma("omp parallel for schedule(static) num_threads(nt) if (nt > 1)")
        for (int64_t blk = 0; blk < n_blocks; blk++) {
            double *acc_w = acc ? acc + blk * d : NULL;
            int64_t r_end = (blk + 1) * RMS_ROW_BLOCK < rows ? (blk + 1) * RMS_ROW_BLOCK : rows;
            for (int64_t r = blk * RMS_ROW_BLOCK; r < r_end; r++) {
                const T *xr = px + r * d, *gr = pdy + r * d;
                double rs = pr[r];
                if (pdx) {
                    double sum_gx = 0;
                    for (int64_t j = 0; j < d; j++)
                        sum_gx += (double)gr[j] * (pw ? (double)pw[j] : 1.0) * (double)xr[j] * rs;
                    double mean_gx = sum_gx / (double)d;
                    T *xg = pdx + r * d;
                    for (int64_t j = 0; j < d; j++) {
                        double gh = (double)gr[j] * (pw ? (double)pw[j] : 1.0);
                        xg[j] += (T)(rs * (gh - (double)xr[j] * rs * mean_gx));
                    }
                }
                for (int64_t j = 0; acc_w && j < d; j++)
                    acc_w[j] += (double)gr[j] * (double)xr[j] * rs;
            }
        }
        for (int64_t j = 0; gw && j < d; j++) {
            double sw = 0;
            for (int64_t blk = 0; blk < n_blocks; blk++)
                sw += acc[blk * d + j];
            ((T *)lb_tensor_data(gw))[j] += (T)sw;
        }
    });
    free(acc);
    return LB_OK;
}

/* ---- gated product ----
 * x: [R, 2 H] (gate, then value) -> y: [R, H], y = act(gate) * value
 * (kernels/gelu.h's lb_k_glu); attr_i[0] = the lb_glu_act. */

static lb_var *glu(lb_graph *g, lb_op_kind op, const char *name, lb_glu_act act, lb_var *x)
{
    char sx[128];
    if (lb_check_inputs(name, g, 1, &x) != LB_OK)
        return NULL;
    const lb_tensor *tx = x->value;
    if (tx->ndim < 1 || tx->shape[tx->ndim - 1] % 2 != 0 || tx->shape[tx->ndim - 1] == 0) {
        lb_error(LB_ERR_SHAPE, "%s: x %s needs an even, non-empty last dim [..., 2 H] (the gate, then the value)", name,
                 lb_tensor_describe(tx, sx, sizeof sx));
        return NULL;
    }
    int64_t h = tx->shape[tx->ndim - 1] / 2, rows = lb_tensor_numel(tx) / (2 * h);
    int64_t shape[LB_MAX_DIMS];
    memcpy(shape, tx->shape, (size_t)tx->ndim * sizeof *shape);
    shape[tx->ndim - 1] = h;
    lb_tensor *out = lb_tensor_empty(tx->dtype, tx->ndim, shape);
    if (!out)
        return NULL;
    if (lb_k_glu(tx->dtype, act, rows, h, lb_tensor_data(tx), lb_tensor_data(out)) != LB_OK) {
        lb_tensor_free(out);
        return NULL;
    }
    lb_var *v = lb_graph_record(g, op, out, 1, &x);
    if (v)
        v->attr_i[0] = (int)act;
    return v;
}

lb_var *lb_swiglu(lb_graph *g, lb_var *x) { return glu(g, LB_OP_SWIGLU, "swiglu", LB_GLU_SILU, x); }
lb_var *lb_geglu(lb_graph *g, lb_var *x) { return glu(g, LB_OP_GEGLU, "geglu", LB_GLU_GELU, x); }

lb_status lb_glu_backward(lb_var *node)
{
    lb_var *x = node->inputs[0];
    if (!x->requires_grad)
        return LB_OK;
    lb_tensor *gx = lb_grad_buffer(x);
    if (!gx)
        return lb_last_status();
    const lb_tensor *tx = x->value;
    int64_t h = tx->shape[tx->ndim - 1] / 2, rows = lb_tensor_numel(tx) / (2 * h);
    return lb_k_glu_backward(tx->dtype, (lb_glu_act)node->attr_i[0], rows, h, lb_tensor_data(tx),
                             lb_tensor_data(node->grad), lb_tensor_data(gx));
}

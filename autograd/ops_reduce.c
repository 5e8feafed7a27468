/* Reductions: sum and mean over all elements or over listed axes (torch.sum,
 * torch.mean), accumulated in double for both dtypes.
 *
 * Both ops share one node layout and one backward (lb_sum_backward):
 *   attr_i[0]  bitmask of x's reduced dims (bit d set: dim d was reduced)
 *   attr_i[1]  keepdim (informational; the backward does not need it)
 *   attr_f[0]  scale of the gradient: 1 for sum, 1/count for mean
 * An empty axis list reduces nothing (numpy's axis=(); PyTorch's dim=[] would
 * reduce everything instead): the result is a copy of x. */
#include <math.h>
#include <stdlib.h>

#include "autograd/op_table.h"
#include "autograd/ops.h"
#include "tensor/kernels.h"

/* Turns a list of possibly negative axes of x into a bitmask of dims. */
static lb_status axes_mask(const char *op, const lb_tensor *x, int n_axes, const int *axes, int64_t *mask)
{
    char sx[128];
    *mask = 0;
    if (n_axes < 0 || (n_axes > 0 && !axes))
        return lb_error(LB_ERR_VALUE, "%s: invalid axis list for %s (n_axes %d, axes %s)", op,
                        lb_tensor_describe(x, sx, sizeof sx), n_axes, axes ? "given" : "NULL");
    /* each axis at most once: more entries than axes cannot be valid (and are not read) */
    if (n_axes > (x->ndim > 0 ? x->ndim : 1)) /* a scalar: its one entry is read to name it */
        return lb_error(LB_ERR_VALUE, "%s: n_axes %d is more than the %d axes of %s", op, n_axes, x->ndim,
                        lb_tensor_describe(x, sx, sizeof sx));
    for (int i = 0; i < n_axes; i++) {
        int d = lb_normalize_dim(axes[i], x->ndim);
        if (d < 0 && x->ndim == 0)
            return lb_error(LB_ERR_SHAPE, "%s: axis %d (entry %d) given for %s, which has no axes (use n_axes 0)", op,
                            axes[i], i, lb_tensor_describe(x, sx, sizeof sx));
        if (d < 0)
            return lb_error(LB_ERR_SHAPE, "%s: axis %d (entry %d) is out of range for %s (valid: -%d..%d)", op, axes[i], i,
                            lb_tensor_describe(x, sx, sizeof sx), x->ndim, x->ndim - 1);
        if (*mask & ((int64_t)1 << d))
            return lb_error(LB_ERR_VALUE, "%s: axis %d (entry %d) of %s is listed twice", op, axes[i], i,
                            lb_tensor_describe(x, sx, sizeof sx));
        *mask |= (int64_t)1 << d;
    }
    return LB_OK;
}

static int reduced(int64_t mask, int d) { return (int)((mask >> d) & 1); }

/* out = (sum of x over the masked dims) / divisor, accumulated in double.
 *   x:   [*S] contiguous
 *   out: contiguous with numel = product of S's kept dims (the keepdim shape
 *        [*S, reduced dims set to 1], or that shape without them)
 * divisor 0 (the mean of nothing) gives NaN, as torch.mean does. One pass over x in
 * memory order; each element is added into a double accumulator of out's size. */
static lb_status sum_kernel(const char *op, const lb_tensor *x, int64_t mask, double divisor, lb_tensor *out)
{
    int nd = x->ndim;
    int64_t n_out = lb_tensor_numel(out);
    double *acc = calloc((size_t)n_out + 1, sizeof *acc);
    if (!acc)
        return lb_error(LB_ERR_MEMORY, "%s: out of memory for %lld accumulators", op, (long long)n_out);
    /* Strides of the keepdim-shaped accumulator seen from x's dims, 0 on reduced dims. */
    int64_t ostride[LB_MAX_DIMS], s = 1;
    for (int d = nd - 1; d >= 0; d--) {
        ostride[d] = reduced(mask, d) ? 0 : s;
        s *= reduced(mask, d) ? 1 : x->shape[d];
    }
    int64_t last = nd ? x->shape[nd - 1] : 1, lo = nd ? ostride[nd - 1] : 0;
    int64_t runs = last ? lb_tensor_numel(x) / last : 0;
    LB_DISPATCH(x->dtype, T, {
        const T *px = lb_tensor_data(x);
        int64_t idx[LB_MAX_DIMS] = {0}, o = 0;
        for (int64_t r = 0; r < runs; r++) {
            const T *row = px + r * last;
            if (lo == 0) { /* the last dim is reduced: sum the run into one accumulator */
                double run = 0;
                for (int64_t i = 0; i < last; i++)
                    run += row[i];
                acc[o] += run;
            } else {
                for (int64_t i = 0; i < last; i++)
                    acc[o + i] += row[i];
            }
            for (int d = nd - 2; d >= 0; d--) { /* odometer over the leading dims */
                idx[d]++;
                o += ostride[d];
                if (idx[d] < x->shape[d])
                    break;
                o -= idx[d] * ostride[d];
                idx[d] = 0;
            }
        }
        T *py = lb_tensor_data(out);
        for (int64_t i = 0; i < n_out; i++)
            py[i] = divisor != 0 ? (T)(acc[i] / divisor) : (T)NAN;
    });
    free(acc);
    return LB_OK;
}

/* x: [*S] -> [*S without the masked dims] (keepdim: [*S with them set to 1]). */
static lb_var *reduce(lb_graph *g, lb_op_kind op, lb_var *x, int64_t mask, int keepdim)
{
    const char *name = lb_op_name(op);
    const lb_tensor *t = x->value;
    int64_t shape[LB_MAX_DIMS], count = 1;
    int ndim = 0;
    for (int d = 0; d < t->ndim; d++) {
        if (reduced(mask, d))
            count *= t->shape[d];
        if (!reduced(mask, d))
            shape[ndim++] = t->shape[d];
        else if (keepdim)
            shape[ndim++] = 1;
    }
    lb_tensor *out = lb_tensor_zeros(t->dtype, ndim, shape);
    if (!out)
        return NULL;
    if (sum_kernel(name, t, mask, op == LB_OP_MEAN ? (double)count : 1.0, out) != LB_OK) {
        lb_tensor_free(out);
        return NULL;
    }
    lb_var *v = lb_graph_record(g, op, out, 1, &x);
    if (v && v->requires_grad) {
        v->attr_i[0] = mask;
        v->attr_i[1] = keepdim ? 1 : 0;
        v->attr_f[0] = (op == LB_OP_MEAN && count > 0) ? 1.0 / (double)count : 1.0;
    }
    return v;
}

static lb_var *reduce_axes(lb_graph *g, lb_op_kind op, lb_var *x, int n_axes, const int *axes, int keepdim)
{
    int64_t mask;
    if (lb_check_inputs(lb_op_name(op), g, 1, &x) != LB_OK ||
        axes_mask(lb_op_name(op), x->value, n_axes, axes, &mask) != LB_OK)
        return NULL;
    return reduce(g, op, x, mask, keepdim);
}

static lb_var *reduce_all(lb_graph *g, lb_op_kind op, lb_var *x)
{
    if (lb_check_inputs(lb_op_name(op), g, 1, &x) != LB_OK)
        return NULL;
    return reduce(g, op, x, ((int64_t)1 << x->value->ndim) - 1, 0);
}

lb_var *lb_sum(lb_graph *g, lb_var *x) { return reduce_all(g, LB_OP_SUM, x); }
lb_var *lb_mean(lb_graph *g, lb_var *x) { return reduce_all(g, LB_OP_MEAN, x); }

lb_var *lb_sum_axes(lb_graph *g, lb_var *x, int n_axes, const int *axes, int keepdim)
{
    return reduce_axes(g, LB_OP_SUM, x, n_axes, axes, keepdim);
}

lb_var *lb_mean_axes(lb_graph *g, lb_var *x, int n_axes, const int *axes, int keepdim)
{
    return reduce_axes(g, LB_OP_MEAN, x, n_axes, axes, keepdim);
}

/* dx [*S] += scale * dy, with dy [*kept dims] read as the keepdim shape [*S, reduced
 * dims 1] and broadcast back over the reduced dims (a stride-0 view, no copy). */
lb_status lb_sum_backward(lb_var *node)
{
    lb_var *x = node->inputs[0];
    if (!x->requires_grad)
        return LB_OK;
    const lb_tensor *t = x->value;
    int64_t keep[LB_MAX_DIMS];
    for (int d = 0; d < t->ndim; d++)
        keep[d] = reduced(node->attr_i[0], d) ? 1 : t->shape[d];
    lb_tensor *gx = lb_grad_buffer(x);
    lb_tensor *gy = gx ? lb_tensor_reshape(node->grad, t->ndim, keep) : NULL;
    lb_tensor *spread = gy ? lb_tensor_expand(gy, t->ndim, t->shape) : NULL;
    lb_status st = spread ? lb_k_accumulate(gx, spread, node->attr_f[0]) : lb_last_status();
    lb_tensor_free(spread);
    lb_tensor_free(gy);
    return st;
}

/* Reductions over one axis that select or soft-select (torch.logsumexp, torch.amax,
 * torch.amin, torch.max(dim)), and torch.where.
 *
 * One axis of x [*S] is viewed as [outer, N, inner] (outer = product of the dims
 * before it, inner = product of those after it); the result has [outer, inner]
 * elements, shaped as S with the axis removed (or kept as 1 with keepdim). */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "autograd/op_table.h"
#include "autograd/ops.h"
#include "tensor/kernels.h"

/* Checks x and dim, fills outer, n and inner, and returns the zeroed result (NULL
 * with an error naming op, x and the valid dims). */
static lb_tensor *axis_result(const char *op, const lb_tensor *x, int dim, int keepdim, int64_t *outer, int64_t *n,
                              int64_t *inner)
{
    char sx[128];
    int d = lb_normalize_dim(dim, x->ndim), nd = 0;
    if (x->ndim == 0 || d < 0) {
        lb_error(LB_ERR_SHAPE, "%s: dim %d is out of range for x %s (valid: -%d..%d)", op, dim,
                 lb_tensor_describe(x, sx, sizeof sx), x->ndim, x->ndim - 1);
        return NULL;
    }
    int64_t shape[LB_MAX_DIMS];
    *outer = *inner = 1;
    for (int i = 0; i < d; i++)
        *outer *= x->shape[i];
    for (int i = d + 1; i < x->ndim; i++)
        *inner *= x->shape[i];
    *n = x->shape[d];
    for (int i = 0; i < x->ndim; i++)
        if (i != d || keepdim)
            shape[nd++] = i == d ? 1 : x->shape[i];
    return lb_tensor_zeros(x->dtype, nd, shape);
}

/* ---- logsumexp ----
 * y[o, i] = log(sum_j exp(x[o, j, i])), computed as m + log(sum_j exp(x - m)) with
 * m = max_j x. A row of -inf gives -inf (and a zero gradient), a row holding +inf
 * gives +inf, an empty row -inf (torch.logsumexp).
 * backward: dx[o, j, i] += dy[o, i] exp(x[o, j, i] - y[o, i]) (softmax), 0 on -inf rows;
 * on a row holding +inf, dy is shared by its +inf elements (the softmax's limit). Never NaN
 * unless x holds NaN.
 * attr_i: 0 outer, 1 n, 2 inner. */

lb_var *lb_logsumexp(lb_graph *g, lb_var *x, int dim, int keepdim)
{
    if (lb_check_inputs("logsumexp", g, 1, &x) != LB_OK)
        return NULL;
    int64_t outer, n, inner;
    lb_tensor *out = axis_result("logsumexp", x->value, dim, keepdim, &outer, &n, &inner);
    if (!out)
        return NULL;
    LB_DISPATCH(out->dtype, T, {
        const T *px = lb_tensor_data(x->value);
        T *py = lb_tensor_data(out);
        for (int64_t o = 0; o < outer; o++)
            for (int64_t i = 0; i < inner; i++) {
                const T *row = px + o * n * inner + i;
                double m = -INFINITY, sum = 0;
                for (int64_t j = 0; j < n; j++)
                    m = (double)row[j * inner] > m ? (double)row[j * inner] : m;
                if (isinf(m)) { /* -inf rows stay -inf; +inf wins */
                    py[o * inner + i] = (T)m;
                    continue;
                }
                for (int64_t j = 0; j < n; j++)
                    sum += exp((double)row[j * inner] - m);
                py[o * inner + i] = (T)(m + log(sum));
            }
    });
    lb_var *v = lb_graph_record(g, LB_OP_LOGSUMEXP, out, 1, &x);
    if (v) {
        v->attr_i[0] = outer;
        v->attr_i[1] = n;
        v->attr_i[2] = inner;
    }
    return v;
}

lb_status lb_logsumexp_backward(lb_var *node)
{
    lb_var *x = node->inputs[0];
    LB_GRAD_BUFFER_OR_RETURN(gx, x);
    int64_t outer = node->attr_i[0], n = node->attr_i[1], inner = node->attr_i[2];
    LB_DISPATCH(gx->dtype, T, {
        const T *px = lb_tensor_data(x->value), *py = lb_tensor_data(node->value), *dy = lb_tensor_data(node->grad);
        T *dx = lb_tensor_data(gx);
        for (int64_t o = 0; o < outer; o++)
            for (int64_t i = 0; i < inner; i++) {
                double y = (double)py[o * inner + i], d = (double)dy[o * inner + i];
                if (y == -INFINITY)
                    continue;
                if (y == INFINITY) { /* the softmax's limit: dy shared by the +inf elements */
                    int64_t infs = 0;
                    for (int64_t j = 0; j < n; j++)
                        infs += (double)px[(o * n + j) * inner + i] == INFINITY;
                    for (int64_t j = 0; j < n; j++)
                        if ((double)px[(o * n + j) * inner + i] == INFINITY)
                            dx[(o * n + j) * inner + i] += (T)(d / (double)infs);
                    continue;
                }
                for (int64_t j = 0; j < n; j++) {
                    int64_t k = (o * n + j) * inner + i;
                    dx[k] += (T)(d * exp((double)px[k] - y));
                }
            }
    });
    return LB_OK;
}

/* ---- amax, amin, max with indices ----
 * y[o, i] = max_j x[o, j, i] (amin: min). A NaN in a row makes its result NaN.
 * amax/amin backward (torch.amax): the gradient is split evenly between the
 * elements equal to the result: dx += dy / count where x == y.
 * max backward (torch.max(dim)): all of dy goes to the returned index (the first
 * maximum, or the first NaN). ctx: int64 indices [outer * inner] (max only).
 * attr_i: 0 outer, 1 n, 2 inner, 3 is_min. */

/* The index of the row's extreme (first NaN, else first max/min); -1 for an empty row. */
#define ROW_EXTREME(row, n, inner, is_min, best)                                                        \
    do {                                                                                                   \
        best = -1;                                                                                         \
        for (int64_t j_ = 0; j_ < (n); j_++) {                                                             \
            double v_ = (double)(row)[j_ * (inner)];                                                       \
            if (isnan(v_)) {                                                                               \
                best = j_;                                                                                 \
                break;                                                                                     \
            }                                                                                              \
            double b_ = best < 0 ? 0 : (double)(row)[best * (inner)];                                      \
            if (best < 0 || ((is_min) ? v_ < b_ : v_ > b_))                                                \
                best = j_;                                                                                 \
        }                                                                                                  \
    } while (0)

static lb_var *extreme(lb_graph *g, lb_op_kind op, lb_var *x, int dim, int keepdim, int is_min, int64_t *indices)
{
    const char *name = op == LB_OP_MAX ? "max" : is_min ? "amin" : "amax";
    char sx[128];
    if (lb_check_inputs(name, g, 1, &x) != LB_OK)
        return NULL;
    int64_t outer, n, inner;
    lb_tensor *out = axis_result(name, x->value, dim, keepdim, &outer, &n, &inner);
    if (!out)
        return NULL;
    if (n == 0) {
        lb_tensor_free(out);
        lb_error(LB_ERR_SHAPE, "%s: dim %d of x %s is empty: a maximum of nothing is undefined", name, dim,
                 lb_tensor_describe(x->value, sx, sizeof sx));
        return NULL;
    }
    int64_t *idx = malloc((size_t)(outer * inner + 1) * sizeof *idx);
    if (!idx) {
        lb_tensor_free(out);
        free(idx);
        lb_error(LB_ERR_MEMORY, "%s: out of memory", name);
        return NULL;
    }
    LB_DISPATCH(out->dtype, T, {
        const T *px = lb_tensor_data(x->value);
        T *py = lb_tensor_data(out);
        for (int64_t o = 0; o < outer; o++)
            for (int64_t i = 0; i < inner; i++) {
                const T *row = px + o * n * inner + i;
                int64_t best;
                ROW_EXTREME(row, n, inner, is_min, best);
                idx[o * inner + i] = best;
                py[o * inner + i] = row[best * inner];
            }
    });
    if (indices)
        memcpy(indices, idx, (size_t)(outer * inner) * sizeof *idx);
    lb_var *v = lb_graph_record(g, op, out, 1, &x);
    if (v && v->requires_grad && op == LB_OP_MAX) {
        v->ctx = idx;
        v->ctx_free = free;
    } else {
        free(idx);
    }
    if (v) {
        v->attr_i[0] = outer;
        v->attr_i[1] = n;
        v->attr_i[2] = inner;
        v->attr_i[3] = is_min;
    }
    return v;
}

lb_var *lb_amax(lb_graph *g, lb_var *x, int dim, int keepdim)
{
    return extreme(g, LB_OP_AMAX, x, dim, keepdim, 0, NULL);
}
lb_var *lb_amin(lb_graph *g, lb_var *x, int dim, int keepdim)
{
    return extreme(g, LB_OP_AMIN, x, dim, keepdim, 1, NULL);
}
lb_var *lb_max(lb_graph *g, lb_var *x, int dim, int keepdim, int64_t *indices)
{
    return extreme(g, LB_OP_MAX, x, dim, keepdim, 0, indices);
}

lb_status lb_extreme_backward(lb_var *node)
{
    lb_var *x = node->inputs[0];
    LB_GRAD_BUFFER_OR_RETURN(gx, x);
    int64_t outer = node->attr_i[0], n = node->attr_i[1], inner = node->attr_i[2];
    const int64_t *idx = node->op == LB_OP_MAX ? node->ctx : NULL;
    LB_DISPATCH(gx->dtype, T, {
        const T *px = lb_tensor_data(x->value), *py = lb_tensor_data(node->value), *dy = lb_tensor_data(node->grad);
        T *dx = lb_tensor_data(gx);
        for (int64_t o = 0; o < outer; o++)
            for (int64_t i = 0; i < inner; i++) {
                int64_t r = o * inner + i, base = o * n * inner + i;
                if (idx) {
                    dx[base + idx[r] * inner] += dy[r];
                    continue;
                }
                int64_t ties = 0;
                for (int64_t j = 0; j < n; j++)
                    ties += px[base + j * inner] == py[r];
                for (int64_t j = 0; ties && j < n; j++)
                    if (px[base + j * inner] == py[r])
                        dx[base + j * inner] += (T)((double)dy[r] / (double)ties);
            }
    });
    return LB_OK;
}

/* ---- where ----
 * cond [*C] (nonzero = take a), a [*A], b [*B] -> out [*broadcast(C, A, B)],
 * out = cond ? a : b (torch.where). The branch not taken never reaches the result,
 * so inf or NaN there is harmless, forward and backward.
 * backward: da += dy where cond, db += dy where not, each summed to its shape.
 * saved[0]: cond expanded to the output's shape (the output's dtype, 0 or 1). */

lb_var *lb_where(lb_graph *g, const lb_tensor *cond, lb_var *a, lb_var *b)
{
    lb_var *in[2] = {a, b};
    if (lb_check_inputs("where", g, 2, in) != LB_OK)
        return NULL;
    char sc[128];
    if (!cond) {
        lb_error(LB_ERR_VALUE, "where: cond is NULL (a tensor broadcastable with a and b, nonzero = take a)");
        return NULL;
    }
    int nab, nd;
    int64_t sab[LB_MAX_DIMS], shape[LB_MAX_DIMS];
    if (lb_broadcast_shapes("where", a->value->ndim, a->value->shape, b->value->ndim, b->value->shape, &nab, sab) !=
            LB_OK ||
        lb_broadcast_shapes("where", cond->ndim, cond->shape, nab, sab, &nd, shape) != LB_OK) {
        lb_error_context("where (cond %s)", lb_tensor_describe(cond, sc, sizeof sc));
        return NULL;
    }
    lb_dtype dt = a->value->dtype;
    lb_tensor *vc = lb_tensor_expand(cond, nd, shape), *va = lb_tensor_expand(a->value, nd, shape);
    lb_tensor *vb = lb_tensor_expand(b->value, nd, shape);
    lb_tensor *c = vc ? lb_tensor_copy(vc, dt) : NULL, *ea = va ? lb_tensor_copy(va, dt) : NULL;
    lb_tensor *eb = vb ? lb_tensor_copy(vb, dt) : NULL;
    lb_tensor_free(vc);
    lb_tensor_free(va);
    lb_tensor_free(vb);
    lb_var *v = NULL;
    if (c && ea && eb) {
        int64_t n = lb_tensor_numel(ea);
        LB_DISPATCH(dt, T, {
            T *pc = lb_tensor_data(c), *pa = lb_tensor_data(ea);
            const T *pb = lb_tensor_data(eb);
            for (int64_t i = 0; i < n; i++) {
                pc[i] = pc[i] != 0 ? (T)1 : (T)0; /* NaN counts as nonzero, as in torch */
                pa[i] = pc[i] != 0 ? pa[i] : pb[i];
            }
        });
        v = lb_graph_record(g, LB_OP_WHERE, ea, 2, in);
        ea = NULL;
        if (v && v->requires_grad) {
            v->saved[0] = c;
            c = NULL;
        }
    }
    lb_tensor_free(c);
    lb_tensor_free(ea);
    lb_tensor_free(eb);
    return v;
}

lb_status lb_where_backward(lb_var *node)
{
    const lb_tensor *c = node->saved[0];
    int64_t n = lb_tensor_numel(c);
    for (int k = 0; k < 2; k++) {
        lb_var *x = node->inputs[k];
        if (!x->requires_grad)
            continue;
        lb_tensor *part = lb_tensor_zeros_like(node->grad), *gx = lb_grad_buffer(x);
        lb_status st = part && gx ? LB_OK : lb_last_status();
        if (st == LB_OK) {
            LB_DISPATCH(part->dtype, T, {
                const T *pc = lb_tensor_data(c), *dy = lb_tensor_data(node->grad);
                T *pp = lb_tensor_data(part);
                for (int64_t i = 0; i < n; i++)
                    pp[i] = (pc[i] != 0) == (k == 0) ? dy[i] : (T)0;
            });
            st = lb_k_accumulate(gx, part, 1.0);
        }
        lb_tensor_free(part);
        if (st != LB_OK)
            return st;
    }
    return LB_OK;
}

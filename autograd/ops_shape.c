/* Shape ops: reshape, permute/transpose, slice and concat.
 *
 * Every result is a new contiguous tensor, made by copying a strided view of the
 * input (lb_tensor_reshape/permute/slice + lb_tensor_copy). Their backwards move
 * the gradient back through the inverse view; none of them saves a tensor. */
#include <stdio.h>
#include <string.h>

#include "autograd/op_table.h"
#include "autograd/ops.h"
#include "tensor/kernels.h"

/* A contiguous copy of `view`, which is freed; NULL (view freed) on error. */
static lb_tensor *materialize(lb_tensor *view)
{
    if (!view)
        return NULL;
    lb_tensor *out = lb_tensor_copy(view, view->dtype);
    lb_tensor_free(view);
    return out;
}

/* Formats the first n entries of an int array as "(1, 0, 2)" into buf. */
static char *ints_str(int n, const int *v, char *buf, size_t size)
{
    size_t len = (size_t)snprintf(buf, size, "(");
    for (int i = 0; i < n && len < size; i++)
        len += (size_t)snprintf(buf + len, size - len, "%s%d", i ? ", " : "", v[i]);
    if (len < size)
        snprintf(buf + len, size - len, ")");
    return buf;
}

/* ---- reshape ---- x: [*S] -> [*shape], numel(S) == numel(shape) */

lb_var *lb_reshape(lb_graph *g, lb_var *x, int ndim, const int64_t *shape)
{
    if (lb_check_inputs("reshape", g, 1, &x) != LB_OK)
        return NULL;
    if (!shape && ndim > 0) {
        char sx[128];
        lb_error(LB_ERR_VALUE, "reshape: the target shape of %s is NULL with ndim %d",
                 lb_tensor_describe(x->value, sx, sizeof sx), ndim);
        return NULL;
    }
    /* x->value is contiguous, so this is a view; its errors name "reshape" and both shapes. */
    lb_tensor *out = materialize(lb_tensor_reshape(x->value, ndim, shape));
    if (!out)
        return NULL;
    return lb_graph_record(g, LB_OP_RESHAPE, out, 1, &x);
}

/* dx [*S] += dy [*shape] read as [*S] (both contiguous, same element order). */
lb_status lb_reshape_backward(lb_var *node)
{
    lb_var *x = node->inputs[0];
    if (!x->requires_grad)
        return LB_OK;
    lb_tensor *gy = lb_tensor_reshape(node->grad, x->value->ndim, x->value->shape);
    if (!gy)
        return lb_last_status();
    lb_status st = lb_accumulate_grad(x, gy);
    lb_tensor_free(gy);
    return st;
}

/* ---- permute / transpose ---- x: [d_0, ..., d_{n-1}] -> y: [d_perm[0], ..., d_perm[n-1]] */

lb_var *lb_permute(lb_graph *g, lb_var *x, const int *perm)
{
    if (lb_check_inputs("permute", g, 1, &x) != LB_OK)
        return NULL;
    const lb_tensor *t = x->value;
    char sx[128], sp[128];
    if (!perm && t->ndim > 0) {
        lb_error(LB_ERR_VALUE, "permute: the order for %s is NULL (pass %d dims)", lb_tensor_describe(t, sx, sizeof sx),
                 t->ndim);
        return NULL;
    }
    int seen[LB_MAX_DIMS] = {0};
    for (int i = 0; i < t->ndim; i++) {
        if (perm[i] < 0 || perm[i] >= t->ndim || seen[perm[i]]++) {
            lb_error(LB_ERR_SHAPE, "permute: %s is not a permutation of the %d dims of %s (entry %d; "
                                   "each of 0..%d must appear once)",
                     ints_str(t->ndim, perm, sp, sizeof sp), t->ndim, lb_tensor_describe(t, sx, sizeof sx), i,
                     t->ndim - 1);
            return NULL;
        }
    }
    lb_tensor *out = materialize(lb_tensor_permute(t, perm));
    if (!out)
        return NULL;
    lb_var *v = lb_graph_record(g, LB_OP_PERMUTE, out, 1, &x);
    if (v && v->requires_grad)
        for (int i = 0; i < t->ndim; i++)
            v->attr_i[i] = perm[i];
    return v;
}

lb_var *lb_transpose(lb_graph *g, lb_var *x, int d0, int d1)
{
    if (lb_check_inputs("transpose", g, 1, &x) != LB_OK)
        return NULL;
    int n = x->value->ndim;
    int a = lb_normalize_dim(d0, n), b = lb_normalize_dim(d1, n);
    if (a < 0 || b < 0) {
        char sx[128];
        lb_error(LB_ERR_SHAPE, "transpose: dims (%d, %d) are out of range for %s (valid: -%d..%d)", d0, d1,
                 lb_tensor_describe(x->value, sx, sizeof sx), n, n - 1);
        return NULL;
    }
    int perm[LB_MAX_DIMS];
    for (int i = 0; i < n; i++)
        perm[i] = i;
    perm[a] = b;
    perm[b] = a;
    return lb_permute(g, x, perm);
}

/* y = x.permute(perm) means y[..i..] = x[..i permuted..]; so dx = dy.permute(inverse),
 * with inverse[perm[i]] = i. dy: [d_perm[0], ...] -> view [d_0, ..., d_{n-1}]. */
lb_status lb_permute_backward(lb_var *node)
{
    lb_var *x = node->inputs[0];
    if (!x->requires_grad)
        return LB_OK;
    int n = x->value->ndim, inverse[LB_MAX_DIMS];
    for (int i = 0; i < n; i++)
        inverse[node->attr_i[i]] = i;
    lb_tensor *gy = lb_tensor_permute(node->grad, inverse);
    if (!gy)
        return lb_last_status();
    lb_status st = lb_accumulate_grad(x, gy);
    lb_tensor_free(gy);
    return st;
}

/* ---- slice ---- x: [..., N, ...] -> y: [..., ceil((stop - start) / step), ...] along dim */

lb_var *lb_slice(lb_graph *g, lb_var *x, int dim, int64_t start, int64_t stop, int64_t step)
{
    if (lb_check_inputs("slice", g, 1, &x) != LB_OK)
        return NULL;
    /* The view validates dim and range with a message naming "slice" and x's shape. */
    lb_tensor *out = materialize(lb_tensor_slice(x->value, dim, start, stop, step));
    if (!out)
        return NULL;
    lb_var *v = lb_graph_record(g, LB_OP_SLICE, out, 1, &x);
    if (v && v->requires_grad) {
        v->attr_i[0] = lb_normalize_dim(dim, x->value->ndim);
        v->attr_i[1] = start;
        v->attr_i[2] = stop;
        v->attr_i[3] = step;
    }
    return v;
}

/* dx[..., start:stop:step, ...] += dy: accumulated straight into a strided view of
 * x's gradient buffer (the other positions receive nothing). */
lb_status lb_slice_backward(lb_var *node)
{
    lb_var *x = node->inputs[0];
    LB_GRAD_BUFFER_OR_RETURN(gx, x);
    lb_tensor *window = lb_tensor_slice(gx, (int)node->attr_i[0], node->attr_i[1], node->attr_i[2], node->attr_i[3]);
    if (!window)
        return lb_last_status();
    lb_status st = lb_k_accumulate(window, node->grad, 1.0);
    lb_tensor_free(window);
    return st;
}

/* ---- concat ---- xs[i]: [..., N_i, ...] -> y: [..., sum_i N_i, ...] along dim */

/* Checks that xs[0..n) can be joined along dim (already normalised) and writes the
 * result shape into shape. */
static lb_status concat_shape(int n, lb_var *const *xs, int dim, int64_t *shape)
{
    const lb_tensor *t0 = xs[0]->value;
    memcpy(shape, t0->shape, (size_t)t0->ndim * sizeof *shape);
    shape[dim] = 0;
    for (int i = 0; i < n; i++) {
        const lb_tensor *t = xs[i]->value;
        int ok = t->ndim == t0->ndim;
        for (int d = 0; ok && d < t0->ndim; d++)
            ok = d == dim || t->shape[d] == t0->shape[d];
        if (!ok) {
            char s0[128], si[128];
            return lb_error(LB_ERR_SHAPE, "concat: input %d %s does not fit input 0 %s along dim %d "
                                          "(every dim but %d must be equal)",
                            i, lb_tensor_describe(t, si, sizeof si), lb_tensor_describe(t0, s0, sizeof s0), dim, dim);
        }
        shape[dim] += t->shape[dim];
    }
    return LB_OK;
}

/* One recorded concat node of 1..LB_MAX_OP_INPUTS inputs. */
static lb_var *concat_node(lb_graph *g, int n, lb_var *const *xs, int dim)
{
    int64_t shape[LB_MAX_DIMS];
    if (concat_shape(n, xs, dim, shape) != LB_OK)
        return NULL;
    lb_tensor *out = lb_tensor_zeros(xs[0]->value->dtype, xs[0]->value->ndim, shape);
    if (!out)
        return NULL;
    int64_t at = 0;
    for (int i = 0; i < n; i++) {
        int64_t len = xs[i]->value->shape[dim];
        lb_tensor *part = lb_tensor_slice(out, dim, at, at + len, 1);
        lb_status st = part ? lb_tensor_copy_into(part, xs[i]->value) : lb_last_status();
        lb_tensor_free(part);
        if (st != LB_OK) {
            lb_tensor_free(out);
            return NULL;
        }
        at += len;
    }
    lb_var *v = lb_graph_record(g, LB_OP_CONCAT, out, n, xs);
    if (v && v->requires_grad)
        v->attr_i[0] = dim;
    return v;
}

/* More inputs than a node holds: split them into at most LB_MAX_OP_INPUTS groups,
 * join each group (recursively), then join the group results. Every element is
 * copied about log4(n) times, and gradients flow back through the intermediate nodes. */
static lb_var *concat_tree(lb_graph *g, int n, lb_var *const *xs, int dim)
{
    if (n <= LB_MAX_OP_INPUTS)
        return concat_node(g, n, xs, dim);
    lb_var *parts[LB_MAX_OP_INPUTS];
    int per = (n + LB_MAX_OP_INPUTS - 1) / LB_MAX_OP_INPUTS, n_parts = 0;
    for (int at = 0; at < n; at += per) {
        int len = n - at < per ? n - at : per;
        parts[n_parts] = len == 1 ? xs[at] : concat_tree(g, len, xs + at, dim);
        if (!parts[n_parts])
            return NULL;
        n_parts++;
    }
    return concat_node(g, n_parts, parts, dim);
}

lb_var *lb_concat(lb_graph *g, int n, lb_var *const *xs, int dim)
{
    if (n < 1 || !xs) {
        lb_error(LB_ERR_VALUE, "concat: needs at least one input, got %d%s", n, xs ? "" : " (xs is NULL)");
        return NULL;
    }
    if (lb_check_inputs("concat", g, n, xs) != LB_OK)
        return NULL;
    const lb_tensor *t0 = xs[0]->value;
    int d = lb_normalize_dim(dim, t0->ndim);
    if (d < 0) {
        char s0[128];
        lb_error(LB_ERR_SHAPE, "concat: dim %d is out of range for input 0 %s%s", dim,
                 lb_tensor_describe(t0, s0, sizeof s0), t0->ndim == 0 ? " (a 0-dim tensor cannot be joined; reshape it to [1])" : "");
        return NULL;
    }
    /* Check every shape first so that a mismatch records no partial nodes. */
    int64_t shape[LB_MAX_DIMS];
    if (concat_shape(n, xs, d, shape) != LB_OK)
        return NULL;
    return concat_tree(g, n, xs, d);
}

/* dxs[i] += dy[..., at_i : at_i + N_i, ...] with at_i = N_0 + ... + N_{i-1}. */
lb_status lb_concat_backward(lb_var *node)
{
    int dim = (int)node->attr_i[0];
    int64_t at = 0;
    for (int i = 0; i < node->n_inputs; i++) {
        lb_var *x = node->inputs[i];
        int64_t len = x->value->shape[dim];
        if (x->requires_grad) {
            lb_tensor *part = lb_tensor_slice(node->grad, dim, at, at + len, 1);
            lb_status st = part ? lb_accumulate_grad(x, part) : lb_last_status();
            lb_tensor_free(part);
            if (st != LB_OK)
                return st;
        }
        at += len;
    }
    return LB_OK;
}

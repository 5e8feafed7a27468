/* Matrix products through BLAS, with batch broadcasting and transposes passed to gemm. */
#include "autograd/op_table.h"
#include "autograd/ops.h"
#include "kernels/gemm.h"
#include "tensor/kernels.h"

/* a: [*Ba, M, K] (or [*Ba, K, M] when trans_a), b: [*Bb, K, N] (or [*Bb, N, K] when trans_b)
 * -> c: [*broadcast(Ba, Bb), M, N] */
lb_var *lb_matmul_t(lb_graph *g, lb_var *a, int trans_a, lb_var *b, int trans_b)
{
    lb_var *in[2] = {a, b};
    char sa[128], sb[128];
    if (lb_check_inputs("matmul", g, 2, in) != LB_OK)
        return NULL;
    const lb_tensor *ta = a->value, *tb = b->value;
    if (ta->ndim < 2 || tb->ndim < 2) {
        lb_error(LB_ERR_SHAPE, "matmul: operands need at least 2 dims, got %s @ %s (reshape a vector to [1, N] or [N, 1])",
                 lb_tensor_describe(ta, sa, sizeof sa), lb_tensor_describe(tb, sb, sizeof sb));
        return NULL;
    }
    int64_t m = ta->shape[ta->ndim - (trans_a ? 1 : 2)], k = ta->shape[ta->ndim - (trans_a ? 2 : 1)];
    int64_t kb = tb->shape[tb->ndim - (trans_b ? 1 : 2)], n = tb->shape[tb->ndim - (trans_b ? 2 : 1)];
    if (k != kb) {
        lb_error(LB_ERR_SHAPE, "matmul: inner sizes differ: %s%s @ %s%s (%lld vs %lld)",
                 lb_tensor_describe(ta, sa, sizeof sa), trans_a ? "^T" : "", lb_tensor_describe(tb, sb, sizeof sb),
                 trans_b ? "^T" : "", (long long)k, (long long)kb);
        return NULL;
    }
    int nb;
    int64_t shape[LB_MAX_DIMS];
    if (lb_broadcast_shapes("matmul (batch dims)", ta->ndim - 2, ta->shape, tb->ndim - 2, tb->shape, &nb, shape) != LB_OK)
        return NULL;
    shape[nb] = m;
    shape[nb + 1] = n;
    /* beta = 0 writes every element when k > 0 (BLAS never reads c then) */
    lb_tensor *out = k > 0 ? lb_tensor_empty(ta->dtype, nb + 2, shape) : lb_tensor_zeros(ta->dtype, nb + 2, shape);
    if (!out)
        return NULL;
    if (lb_k_matmul(ta, trans_a, tb, trans_b, out, 1.0, 0.0) != LB_OK) {
        lb_tensor_free(out);
        return NULL;
    }
    lb_var *v = lb_graph_record(g, LB_OP_MATMUL, out, 2, in);
    if (v) {
        v->attr_i[0] = trans_a ? 1 : 0;
        v->attr_i[1] = trans_b ? 1 : 0;
    }
    return v;
}

lb_var *lb_matmul(lb_graph *g, lb_var *a, lb_var *b) { return lb_matmul_t(g, a, 0, b, 0); }

/* With C = op(A) op(B) and G = dL/dC:
 *   dA = G op(B)ᵀ   (stored as op(B) G ᵀ... transposed back when A was transposed)
 *   dB = op(A)ᵀ G
 * Each product is written straight into the operand's gradient buffer (beta = 1);
 * the kernel sums over batch entries where the operand was broadcast. */
/* v's gradient buffer for a product written into it with inner size k: the existing
 * buffer and *beta = 1 (add to it), or, when v has none yet and k > 0, a new buffer
 * left unset and *beta = 0 (the product writes every element; no zeros first). */
static lb_tensor *product_grad_buffer(lb_var *v, int64_t k, double *beta)
{
    *beta = 1.0;
    if (v->grad || k == 0)
        return lb_grad_buffer(v);
    *beta = 0.0;
    return v->grad = lb_tensor_empty_like(v->value);
}

lb_status lb_matmul_backward(lb_var *node)
{
    lb_var *a = node->inputs[0], *b = node->inputs[1];
    int ta = (int)node->attr_i[0], tb = (int)node->attr_i[1];
    const lb_tensor *gc = node->grad;
    int64_t m = gc->shape[gc->ndim - 2], n = gc->shape[gc->ndim - 1];
    double beta;
    if (a->requires_grad) {
        lb_tensor *ga = product_grad_buffer(a, n, &beta);
        if (!ga)
            return lb_last_status();
        lb_status st = ta ? lb_k_matmul(b->value, tb, gc, 1, ga, 1.0, beta)   /* dAᵀ = op(B) Gᵀ */
                          : lb_k_matmul(gc, 0, b->value, !tb, ga, 1.0, beta); /* dA = G op(B)ᵀ */
        if (st != LB_OK)
            return st;
    }
    if (b->requires_grad) {
        lb_tensor *gb = product_grad_buffer(b, m, &beta);
        if (!gb)
            return lb_last_status();
        lb_status st = tb ? lb_k_matmul(gc, 1, a->value, ta, gb, 1.0, beta)   /* dBᵀ = Gᵀ op(A) */
                          : lb_k_matmul(a->value, !ta, gc, 0, gb, 1.0, beta); /* dB = op(A)ᵀ G */
        if (st != LB_OK)
            return st;
    }
    return LB_OK;
}

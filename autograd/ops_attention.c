/* Fused exact attention as one autograd op (LB_OP_ATTENTION); the tile kernels are in
 * kernels/attention.c.
 *
 * Named dims: L the leading dims (B first, then heads or others), Tq queries, Tk keys,
 * D = d_k, Dv = d_v; the scores would be [*L, Tq, Tk] but are never stored.
 *   inputs: q [*L, Tq, D], k [*Lkv, Tk, D], v [*Lkv, Tk, Dv] (Lkv: L with the last
 *           dim, the heads, a divisor of L's: grouped-query attention)
 *   value:  out [*L, Tq, Dv]
 *   saved:  saved[0] = lse [*L, Tq] (log-sum-exp of each row's scaled, masked scores)
 *   ctx:    the mask, copied (the caller's mask memory need not outlive the graph)
 *   attr_f[0] = scale
 * Backward (FlashAttention-2): dq, dk, dv from out, lse and grad, scores recomputed.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "autograd/op_table.h"
#include "autograd/ops.h"
#include "kernels/attention.h"

typedef struct attn_ctx {
    lb_attn_kmask kmask;        /* points into the copies below */
    int32_t *key_lengths;       /* [B] */
    int32_t *query_positions;   /* [B, Tq] */
    double *alibi_slopes;       /* [H] */
    unsigned char *allowed;     /* the allowed mask, contiguous in its own shape, 0/1 */
    lb_tensor *additive;        /* the additive mask, contiguous in its own shape, operands' dtype */
} attn_ctx;

static void ctx_free(void *p)
{
    attn_ctx *c = p;
    if (!c)
        return;
    free(c->key_lengths);
    free(c->query_positions);
    free(c->alibi_slopes);
    free(c->allowed);
    lb_tensor_free(c->additive);
    free(c);
}

static int32_t *copy_ints(const int32_t *src, int64_t n)
{
    int32_t *dst = malloc((size_t)(n > 0 ? n : 1) * sizeof *dst);
    if (dst && n > 0)
        memcpy(dst, src, (size_t)n * sizeof *dst);
    return dst;
}

/* Copies the mask for scores [*L, Tq, Tk] (ndim dims, already checked) into a new ctx;
 * NULL with an error when out of memory. */
static attn_ctx *make_ctx(const lb_attn_mask *mask, lb_dtype dtype, int ndim, const int64_t *shape)
{
    attn_ctx *c = calloc(1, sizeof *c);
    if (!c)
        goto oom;
    if (!mask)
        return c;
    int64_t nb = ndim >= 3 ? shape[0] : 1, tq = shape[ndim - 2];
    lb_attn_kmask *km = &c->kmask;
    km->causal = mask->causal;
    km->window = mask->window;
    km->softcap = mask->softcap;
    if (mask->key_lengths && !(km->key_lengths = c->key_lengths = copy_ints(mask->key_lengths, nb)))
        goto oom;
    if (mask->query_positions &&
        !(km->query_positions = c->query_positions = copy_ints(mask->query_positions, nb * tq)))
        goto oom;
    if (mask->alibi_slopes) {
        int64_t h = mask->alibi_heads;
        if (!(c->alibi_slopes = malloc((size_t)(h > 0 ? h : 1) * sizeof *c->alibi_slopes)))
            goto oom;
        memcpy(c->alibi_slopes, mask->alibi_slopes, (size_t)h * sizeof *c->alibi_slopes);
        km->alibi_slopes = c->alibi_slopes;
    }
    if (mask->allowed) {
        lb_tensor *a = lb_tensor_copy(mask->allowed, LB_FLOAT64); /* contiguous, same shape */
        if (!a)
            goto fail;
        int64_t n = lb_tensor_numel(a);
        c->allowed = malloc((size_t)(n > 0 ? n : 1));
        if (!c->allowed) {
            lb_tensor_free(a);
            goto oom;
        }
        const double *pa = lb_tensor_data(a);
        for (int64_t i = 0; i < n; i++)
            c->allowed[i] = pa[i] != 0;
        int64_t unused[LB_MAX_DIMS];
        lb_status st = lb_attn_mask_check("attention", ndim, shape, &(lb_attn_mask){.allowed = a},
                                          km->allowed_strides, unused);
        lb_tensor_free(a);
        if (st != LB_OK)
            goto fail;
        km->allowed = c->allowed;
    }
    if (mask->additive) {
        if (!(c->additive = lb_tensor_copy(mask->additive, dtype)))
            goto fail;
        int64_t unused[LB_MAX_DIMS];
        if (lb_attn_mask_check("attention", ndim, shape, &(lb_attn_mask){.additive = c->additive}, unused,
                               km->additive_strides) != LB_OK)
            goto fail;
        km->additive = lb_tensor_data(c->additive);
    }
    return c;
oom:
    lb_error(LB_ERR_MEMORY, "attention: out of memory copying the mask");
fail:
    ctx_free(c);
    return NULL;
}

lb_var *lb_attention_fused(lb_graph *g, lb_var *q, lb_var *k, lb_var *v, const lb_attn_mask *mask, double scale)
{
    lb_var *in[3] = {q, k, v};
    if (lb_check_inputs("attention", g, 3, in) != LB_OK)
        return NULL;
    const lb_tensor *tq = q->value, *tk = k->value, *tv = v->value;
    char sq[128], sk[128], sv[128];
    int nd = tq->ndim;
    int fits = nd >= 2 && tk->ndim == nd && tv->ndim == nd;
    for (int d = 0; fits && d < nd - 2; d++) /* the heads dim of k and v may divide q's */
        fits = tv->shape[d] == tk->shape[d] &&
               (tk->shape[d] == tq->shape[d] || (d == nd - 3 && tk->shape[d] >= 1 && tq->shape[d] % tk->shape[d] == 0));
    if (fits)
        fits = tk->shape[nd - 1] == tq->shape[nd - 1] && tv->shape[nd - 2] == tk->shape[nd - 2] &&
               tq->shape[nd - 1] >= 1 && tv->shape[nd - 1] >= 1;
    if (!fits) {
        lb_error(LB_ERR_SHAPE,
                 "attention: q %s, k %s, v %s must be [B, ..., Tq, D], [B, ..., Tk, D], [B, ..., Tk, Dv] with "
                 "equal leading dims (but k and v may have a divisor of q's heads, the dim before Tk) and "
                 "D, Dv >= 1 (the fused op does not broadcast; use lb_matmul_t, lb_masked_softmax and lb_matmul "
                 "for that)",
                 lb_tensor_describe(tq, sq, sizeof sq), lb_tensor_describe(tk, sk, sizeof sk),
                 lb_tensor_describe(tv, sv, sizeof sv));
        return NULL;
    }
    if (!isfinite(scale)) {
        lb_error(LB_ERR_VALUE, "attention: scale %g is not finite for q %s (attention uses 1/sqrt(d_k))", scale,
                 lb_tensor_describe(tq, sq, sizeof sq));
        return NULL;
    }
    /* The scores' shape [*L, Tq, Tk], for the mask checks. */
    int64_t shape[LB_MAX_DIMS];
    memcpy(shape, tq->shape, sizeof shape);
    shape[nd - 1] = tk->shape[nd - 2];
    int64_t unused_a[LB_MAX_DIMS], unused_b[LB_MAX_DIMS];
    if (lb_attn_mask_check("attention", nd, shape, mask, unused_a, unused_b) != LB_OK)
        return NULL;
    attn_ctx *ctx = make_ctx(mask, tq->dtype, nd, shape);
    if (!ctx)
        return NULL;
    int64_t oshape[LB_MAX_DIMS];
    memcpy(oshape, tq->shape, sizeof oshape);
    oshape[nd - 1] = tv->shape[nd - 1];
    lb_tensor *out = lb_tensor_zeros(tq->dtype, nd, oshape);
    lb_tensor *lse = lb_tensor_zeros(tq->dtype, nd - 1, tq->shape);
    if (!out || !lse || lb_k_attention_forward(tq, tk, tv, &ctx->kmask, scale, out, lse) != LB_OK) {
        lb_tensor_free(out);
        lb_tensor_free(lse);
        ctx_free(ctx);
        return NULL;
    }
    lb_var *node = lb_graph_record(g, LB_OP_ATTENTION, out, 3, in);
    if (!node || !node->requires_grad) {
        lb_tensor_free(lse);
        ctx_free(ctx);
        return node;
    }
    node->saved[0] = lse;
    node->ctx = ctx;
    node->ctx_free = ctx_free;
    node->attr_f[0] = scale;
    return node;
}

lb_status lb_attention_backward(lb_var *node)
{
    lb_var *q = node->inputs[0], *k = node->inputs[1], *v = node->inputs[2];
    const attn_ctx *ctx = node->ctx;
    lb_var *vars[3] = {q, k, v};
    /* The kernel accumulates straight into distinct gradient buffers; when an input is
     * passed twice (self-attention on one tensor) it gets private buffers instead. */
    int alias = q == k || q == v || k == v;
    lb_tensor *grads[3] = {NULL, NULL, NULL};
    for (int i = 0; i < 3; i++) {
        if (!vars[i]->requires_grad)
            continue;
        int fresh = alias || !vars[i]->grad;
        grads[i] = alias ? lb_tensor_zeros_like(vars[i]->value) : lb_grad_buffer(vars[i]);
        if (!grads[i])
            goto fail;
        /* A fresh buffer comes from calloc: its pages may still be unmapped, and the
         * kernel's first access to each one (a gemm with beta = 1: read, then write)
         * would map the shared zero page and then copy it, a fault that needs a TLB
         * shootdown across the worker threads. Writing the zeros first costs one pass. */
        if (fresh)
            memset(lb_tensor_data(grads[i]), 0, (size_t)lb_tensor_numel(grads[i]) * lb_dtype_size(grads[i]->dtype));
    }
    lb_status st = lb_k_attention_backward(q->value, k->value, v->value, node->value, node->saved[0], &ctx->kmask,
                                           node->attr_f[0], node->grad, grads[0], grads[1], grads[2]);
    if (st != LB_OK)
        goto fail;
    for (int i = 0; alias && i < 3; i++) {
        if (grads[i] && (st = lb_accumulate_grad(vars[i], grads[i])) != LB_OK)
            goto fail;
        lb_tensor_free(grads[i]);
        grads[i] = NULL;
    }
    return LB_OK;
fail:
    for (int i = 0; alias && i < 3; i++)
        lb_tensor_free(grads[i]);
    return lb_last_status();
}

/* LSTM ops: one layer as two recorded nodes (the projection of every step, then the
 * recurrence), and the final-state stacks. The numerics are the kernels of
 * kernels/lstm.h; named dims B, T, n_in, H, G = 4H as there.
 *
 *   projection node  (x [B,T,n_in], w_ih [G,n_in], b_ih [G], b_hh [G]) -> P [B,T,G]
 *   recurrence node  (P, w_hh [G,H], h0 [L,B,H]?, c0 [L,B,H]?) -> y [B,T,H]
 *                    The activated gates overwrite P's value in place (P is made by
 *                    lb_lstm_layer and read by nothing else), so the forward keeps one
 *                    [B,T,G] buffer; the backward overwrites it again with dP and
 *                    hands it to P as its gradient without a copy.
 *   state node       (y, prev [k,B,H]?) -> [k+1,B,H]: h_T or c_T stacked under prev
 *                    (an op has at most LB_MAX_OP_INPUTS inputs, so a stack over L
 *                    layers is built one layer at a time). */
#include <stdlib.h>
#include <string.h>

#include "autograd/op_table.h"
#include "autograd/ops.h"
#include "kernels/gemm.h"
#include "kernels/lstm.h"
#include "tensor/kernels.h"

/* ---- projection: P [B,T,G] = x [B,T,n_in] w_ihᵀ + b_ih + b_hh ---- */

/* inputs: x, w_ih, b_ih, b_hh; node->grad dP [B,T,G]. */
lb_status lb_lstm_projection_backward(lb_var *node)
{
    lb_var *x = node->inputs[0], *w = node->inputs[1];
    const lb_tensor *dp = node->grad;
    const lb_dtype dt = dp->dtype;
    const int64_t G = dp->shape[2], BT = dp->shape[0] * dp->shape[1], n_in = x->value->shape[2];
    const void *dpd = lb_tensor_data(dp);
    if (x->requires_grad) { /* dx [BT,n_in] += dP [BT,G] @ w_ih [G,n_in] */
        LB_GRAD_BUFFER_OR_RETURN(gx, x);
        lb_k_gemm(dt, 0, 0, BT, n_in, G, 1.0, dpd, G, lb_tensor_data(w->value), n_in, 1.0, lb_tensor_data(gx), n_in);
    }
    if (w->requires_grad) { /* dw_ih [G,n_in] += dPᵀ [G,BT] @ x [BT,n_in] */
        LB_GRAD_BUFFER_OR_RETURN(gw, w);
        lb_k_gemm(dt, 1, 0, G, n_in, BT, 1.0, dpd, G, lb_tensor_data(x->value), n_in, 1.0, lb_tensor_data(gw), n_in);
    }
    /* db_ih, db_hh [G] += Σ_rows dP: the sums are made once (one pass over dP) and
     * added to each bias that needs them. */
    lb_var *b_ih = node->inputs[2], *b_hh = node->inputs[3];
    if (!b_ih->requires_grad && !b_hh->requires_grad)
        return LB_OK;
    int64_t sg[1] = {G};
    lb_tensor *sums = lb_tensor_zeros(dt, 1, sg);
    if (!sums)
        return lb_last_status();
    lb_status st = lb_k_add_row_sums(dt, BT, G, dpd, lb_tensor_data(sums));
    for (int i = 2; i < 4 && st == LB_OK; i++)
        if (node->inputs[i]->requires_grad)
            st = lb_accumulate_grad(node->inputs[i], sums);
    lb_tensor_free(sums);
    return st;
}

static lb_var *lstm_projection(lb_graph *g, lb_var *x, lb_var *w_ih, lb_var *b_ih, lb_var *b_hh)
{
    const lb_tensor *xv = x->value;
    const int64_t B = xv->shape[0], T = xv->shape[1], n_in = xv->shape[2], G = w_ih->value->shape[0];
    int64_t shape[3] = {B, T, G};
    lb_tensor *p = lb_tensor_zeros(xv->dtype, 3, shape);
    if (!p)
        return NULL;
    lb_k_lstm_projection(xv->dtype, B * T, n_in, G, lb_tensor_data(xv), lb_tensor_data(w_ih->value),
                         lb_tensor_data(b_ih->value), lb_tensor_data(b_hh->value), lb_tensor_data(p));
    lb_var *in[4] = {x, w_ih, b_ih, b_hh};
    return lb_graph_record(g, LB_OP_LSTM_PROJECTION, p, 4, in);
}

/* ---- recurrence ---- */

typedef struct lstm_rec_ctx {
    int layer;          /* which [B,H] entry of h0/c0 ([L,B,H]) this layer reads */
    int h0_input;       /* index of h0 among the node's inputs, -1 when zeros */
    int c0_input;       /* index of c0 among the node's inputs, -1 when zeros */
    lb_tensor *c_last;  /* [B,H] c_{T-1}, read by the state node */
    lb_tensor *dc_last; /* [B,H] gradient arriving at c_{T-1} from a state node; NULL until one does */
} lstm_rec_ctx;

static void lstm_rec_ctx_free(void *p)
{
    lstm_rec_ctx *ctx = p;
    if (!ctx)
        return;
    lb_tensor_free(ctx->c_last);
    lb_tensor_free(ctx->dc_last);
    free(ctx);
}

/* v's gradient, elements offset .. offset+n-1, += src's first n elements (v may be
 * NULL or need no gradient: nothing to do). */
static lb_status add_to_grad(lb_var *v, int64_t offset, const lb_tensor *src, int64_t n)
{
    if (!v)
        return LB_OK;
    LB_GRAD_BUFFER_OR_RETURN(gv, v);
    LB_DISPATCH(src->dtype, real, {
        real *d = (real *)lb_tensor_data(gv) + offset;
        const real *s = lb_tensor_data(src);
        for (int64_t i = 0; i < n; i++)
            d[i] += s[i];
    });
    return LB_OK;
}

/* node->value y [B,T,H]; saved[0] activated gates [B,T,G] (P's storage);
 * saved[1] cell states [B,T,H]; node->grad dy [B,T,H]. */
lb_status lb_lstm_recurrence_backward(lb_var *node)
{
    lstm_rec_ctx *ctx = node->ctx;
    lb_var *pvar = node->inputs[0], *whh = node->inputs[1];
    lb_var *h0 = ctx->h0_input >= 0 ? node->inputs[ctx->h0_input] : NULL;
    lb_var *c0 = ctx->c0_input >= 0 ? node->inputs[ctx->c0_input] : NULL;
    lb_tensor *gates = node->saved[0], *cells = node->saved[1];
    const lb_tensor *yv = node->value;
    const lb_dtype dt = yv->dtype;
    const int64_t B = yv->shape[0], T = yv->shape[1], H = yv->shape[2];
    if (!gates || !cells)
        return lb_error(LB_ERR_STATE, "lstm backward: the saved gates are gone (backward ran twice?)");
    int64_t bh[2] = {B, H};
    lb_tensor *dh = lb_tensor_zeros(dt, 2, bh), *dc = lb_tensor_zeros(dt, 2, bh);
    if (!dh || !dc) {
        lb_tensor_free(dh);
        lb_tensor_free(dc);
        return lb_last_status();
    }
    if (ctx->dc_last)
        lb_tensor_copy_into(dc, ctx->dc_last);
    const int64_t off0 = (int64_t)ctx->layer * B * H; /* this layer's entry of h0/c0 */
    const size_t es = lb_dtype_size(dt);
    const char *c0d = c0 ? (const char *)lb_tensor_data(c0->value) + (size_t)off0 * es : NULL;
    lb_k_lstm_recurrence_backward(dt, B, T, H, lb_tensor_data(gates), lb_tensor_data(cells), c0d,
                                  lb_tensor_data(whh->value), lb_tensor_data(node->grad), lb_tensor_data(dh),
                                  lb_tensor_data(dc), h0 && h0->requires_grad);
    lb_status st = add_to_grad(h0, off0, dh, B * H); /* dh0[layer] += dh */
    if (st == LB_OK)
        st = add_to_grad(c0, off0, dc, B * H); /* dc0[layer] += dc */
    lb_tensor_free(dh);
    lb_tensor_free(dc);
    lb_tensor_free(ctx->dc_last); /* spent, like the saved tensors */
    ctx->dc_last = NULL;
    if (st != LB_OK)
        return st;
    if (whh->requires_grad) { /* dw_hh [G,H] += Σ_t dP[:,t]ᵀ h_{t-1} */
        LB_GRAD_BUFFER_OR_RETURN(gw, whh);
        const char *h0d = h0 ? (const char *)lb_tensor_data(h0->value) + (size_t)off0 * es : NULL;
        lb_k_lstm_weight_hh_grad(dt, B, T, H, lb_tensor_data(gates), lb_tensor_data(yv), h0d, lb_tensor_data(gw));
    }
    /* The gate buffer now holds dP: it becomes P's gradient without a copy. */
    if (pvar->requires_grad) {
        if (pvar->grad)
            return lb_accumulate_grad(pvar, gates);
        pvar->grad = gates;
        node->saved[0] = NULL;
    }
    return LB_OK;
}

/* Records layer `layer`'s recurrence over P (p [B,T,G] from lstm_projection, whh
 * [G,H], h0/c0 [L,B,H] or NULL) -> y [B,T,H]. P's value becomes the activated gates. */
static lb_var *lstm_recurrence(lb_graph *g, lb_var *p, lb_var *whh, lb_var *h0, lb_var *c0, int layer)
{
    const lb_tensor *pv = p->value;
    const lb_dtype dt = pv->dtype;
    const int64_t B = pv->shape[0], T = pv->shape[1], H = pv->shape[2] / 4;
    lb_var *in[4];
    int n = 0;
    in[n++] = p;
    in[n++] = whh;
    lstm_rec_ctx *ctx = calloc(1, sizeof *ctx);
    if (!ctx) {
        lb_error(LB_ERR_MEMORY, "lstm: out of memory");
        return NULL;
    }
    ctx->layer = layer;
    ctx->h0_input = h0 ? n : -1;
    if (h0)
        in[n++] = h0;
    ctx->c0_input = c0 ? n : -1;
    if (c0)
        in[n++] = c0;
    int needs = 0;
    for (int i = 0; i < n; i++)
        needs |= in[i]->requires_grad;
    /* Keep every step's cell state only when backward will need it; otherwise two
     * [B,H] rows (c_{t-1}, c_t) suffice. */
    const int keep = lb_graph_grad_enabled(g) && needs;
    int64_t s_y[3] = {B, T, H}, s_ring[3] = {2, B, H}, s_bh[2] = {B, H};
    lb_tensor *y = lb_tensor_zeros(dt, 3, s_y);
    lb_tensor *cells = lb_tensor_zeros(dt, 3, keep ? s_y : s_ring);
    ctx->c_last = lb_tensor_zeros(dt, 2, s_bh);
    lb_tensor *gates = keep ? lb_tensor_view(pv) : NULL;
    if (!y || !cells || !ctx->c_last || (keep && !gates)) {
        lb_tensor_free(y);
        lb_tensor_free(cells);
        lb_tensor_free(gates);
        lstm_rec_ctx_free(ctx);
        return NULL;
    }
    const size_t off0 = (size_t)((int64_t)layer * B * H) * lb_dtype_size(dt);
    lb_k_lstm_recurrence(dt, B, T, H, lb_tensor_data(pv), lb_tensor_data(whh->value),
                         h0 ? (const char *)lb_tensor_data(h0->value) + off0 : NULL,
                         c0 ? (const char *)lb_tensor_data(c0->value) + off0 : NULL, lb_tensor_data(y),
                         lb_tensor_data(cells), keep, lb_tensor_data(ctx->c_last));
    lb_var *node = lb_graph_record(g, LB_OP_LSTM_RECURRENCE, y, n, in);
    if (!node) {
        lb_tensor_free(gates);
        lb_tensor_free(cells);
        lstm_rec_ctx_free(ctx);
        return NULL;
    }
    node->ctx = ctx;
    node->ctx_free = lstm_rec_ctx_free;
    if (node->requires_grad) {
        node->saved[0] = gates;
        node->saved[1] = cells;
    } else {
        lb_tensor_free(gates);
        lb_tensor_free(cells);
    }
    return node;
}

static int fits(const lb_var *v, int ndim, const int64_t *shape)
{
    if (v->value->ndim != ndim)
        return 0;
    for (int d = 0; d < ndim; d++)
        if (v->value->shape[d] != shape[d])
            return 0;
    return 1;
}

lb_var *lb_lstm_layer(lb_graph *g, lb_var *x, lb_var *w_ih, lb_var *w_hh, lb_var *b_ih, lb_var *b_hh, lb_var *h0,
                      lb_var *c0, int layer)
{
    lb_var *in[7] = {x, w_ih, w_hh, b_ih, b_hh};
    int n = 5;
    if (h0)
        in[n++] = h0;
    if (c0)
        in[n++] = c0;
    if (lb_check_inputs("lstm", g, n, in) != LB_OK)
        return NULL;
    const lb_tensor *xv = x->value;
    const int64_t G = w_ih->value->ndim == 2 ? w_ih->value->shape[0] : 0, H = G / 4;
    const int64_t B = xv->ndim == 3 ? xv->shape[0] : 0, T = xv->ndim == 3 ? xv->shape[1] : 0;
    const int64_t L = h0 ? h0->value->shape[0] : c0 ? c0->value->shape[0] : 1;
    int64_t s_ih[2] = {G, xv->ndim == 3 ? xv->shape[2] : -1}, s_hh[2] = {G, H}, s_b[1] = {G}, s_0[3] = {L, B, H};
    if (B < 1 || T < 1 || H < 1 || G != 4 * H || !fits(w_ih, 2, s_ih) || !fits(w_hh, 2, s_hh) || !fits(b_ih, 1, s_b) ||
        !fits(b_hh, 1, s_b) || (h0 && !fits(h0, 3, s_0)) || (c0 && !fits(c0, 3, s_0))) {
        char sx[96], si[96], sh[96], sb[96], sc[96], s0[96], s1[96];
        lb_error(LB_ERR_SHAPE,
                 "lstm: shapes do not fit: x %s, w_ih %s, w_hh %s, b_ih %s, b_hh %s, h0 %s, c0 %s (expected x [B, T, "
                 "n_in] with B, T >= 1, w_ih [4H, n_in], w_hh [4H, H], b_ih and b_hh [4H], h0 and c0 [L, B, H] or "
                 "none)",
                 lb_tensor_describe(xv, sx, sizeof sx), lb_tensor_describe(w_ih->value, si, sizeof si),
                 lb_tensor_describe(w_hh->value, sh, sizeof sh), lb_tensor_describe(b_ih->value, sb, sizeof sb),
                 lb_tensor_describe(b_hh->value, sc, sizeof sc),
                 h0 ? lb_tensor_describe(h0->value, s0, sizeof s0) : "none",
                 c0 ? lb_tensor_describe(c0->value, s1, sizeof s1) : "none");
        return NULL;
    }
    if ((h0 || c0) && (layer < 0 || layer >= L)) {
        lb_error(LB_ERR_VALUE, "lstm: layer %d is outside the %lld entries of h0/c0 [L, B, H]", layer, (long long)L);
        return NULL;
    }
    lb_var *p = lstm_projection(g, x, w_ih, b_ih, b_hh);
    return p ? lstm_recurrence(g, p, w_hh, h0, c0, layer) : NULL;
}

/* ---- final states: [k+1,B,H] = [prev [k,B,H]; state of the layer [1,B,H]] ---- */

/* inputs: y (a recurrence node) and optionally prev; attr_i[0]: 0 for h, 1 for c. */
lb_status lb_lstm_state_backward(lb_var *node)
{
    lb_var *y = node->inputs[0], *prev = node->n_inputs > 1 ? node->inputs[1] : NULL;
    const lb_tensor *gs = node->grad; /* [K,B,H] */
    const lb_dtype dt = gs->dtype;
    const int64_t K = gs->shape[0], B = gs->shape[1], H = gs->shape[2], T = y->value->shape[1];
    lb_status st = add_to_grad(prev, 0, gs, (K - 1) * B * H); /* dprev [K-1,B,H] += ds[0:K-1] */
    if (st != LB_OK)
        return st;
    /* A gradient buffer on y (zeros if nothing else reaches it) makes its backward run. */
    LB_GRAD_BUFFER_OR_RETURN(gy, y);
    lstm_rec_ctx *ctx = y->ctx;
    lb_tensor *dst = NULL;
    if (node->attr_i[0]) {
        if (!ctx->dc_last && !(ctx->dc_last = lb_tensor_zeros_like(ctx->c_last)))
            return lb_last_status();
        dst = ctx->dc_last;
    }
    LB_DISPATCH(dt, real, {
        const real *s = (const real *)lb_tensor_data(gs) + (K - 1) * B * H; /* [B,H] ds of this layer */
        for (int64_t b = 0; b < B; b++) {
            /* h: dy[b, T-1, :] += ds[b];  c: dc_last[b, :] += ds[b] */
            real *d = dst ? (real *)lb_tensor_data(dst) + b * H : (real *)lb_tensor_data(gy) + (b * T + T - 1) * H;
            for (int64_t j = 0; j < H; j++)
                d[j] += s[b * H + j];
        }
    });
    return LB_OK;
}

lb_var *lb_lstm_final_state(lb_graph *g, lb_var *y, lb_var *prev, int cell)
{
    lb_var *in[2] = {y, prev};
    if (lb_check_inputs("lstm state", g, prev ? 2 : 1, in) != LB_OK)
        return NULL;
    char sy[128], sp[128];
    const lb_tensor *yv = y->value;
    if (y->op != LB_OP_LSTM_RECURRENCE || !y->ctx) {
        lb_error(LB_ERR_VALUE, "lstm state: y %s was not made by lb_lstm_layer (it comes from %s)",
                 lb_tensor_describe(yv, sy, sizeof sy), lb_op_name(y->op));
        return NULL;
    }
    const lstm_rec_ctx *ctx = y->ctx;
    const int64_t B = yv->shape[0], T = yv->shape[1], H = yv->shape[2];
    const lb_tensor *pv = prev ? prev->value : NULL;
    if (pv && (pv->ndim != 3 || pv->shape[1] != B || pv->shape[2] != H)) {
        lb_error(LB_ERR_SHAPE, "lstm state: prev %s does not stack with the state [1, %lld, %lld] of y %s",
                 lb_tensor_describe(pv, sp, sizeof sp), (long long)B, (long long)H,
                 lb_tensor_describe(yv, sy, sizeof sy));
        return NULL;
    }
    const int64_t K = pv ? pv->shape[0] + 1 : 1;
    int64_t shape[3] = {K, B, H};
    lb_tensor *s = lb_tensor_zeros(yv->dtype, 3, shape);
    if (!s)
        return NULL;
    const size_t es = lb_dtype_size(yv->dtype);
    char *sd = lb_tensor_data(s);
    if (pv)
        memcpy(sd, lb_tensor_data(pv), (size_t)((K - 1) * B * H) * es);
    for (int64_t b = 0; b < B; b++) { /* s[K-1, b] = h_T[b] = y[b, T-1], or c_T[b] */
        const char *src = cell ? (const char *)lb_tensor_data(ctx->c_last) + (size_t)(b * H) * es
                               : (const char *)lb_tensor_data(yv) + (size_t)((b * T + T - 1) * H) * es;
        memcpy(sd + (size_t)(((K - 1) * B + b) * H) * es, src, (size_t)H * es);
    }
    lb_var *v = lb_graph_record(g, LB_OP_LSTM_STATE, s, prev ? 2 : 1, in);
    if (v)
        v->attr_i[0] = cell ? 1 : 0;
    return v;
}

/* LSTM layers as two fused custom ops per layer (see lstm.h for the equations).
 *
 * Named dimensions, used in every shape comment below:
 *   B batch, T time steps, n_in input width of the layer (input_size, or H above layer 0),
 *   H hidden_size, G = 4H gate pre-activations in the order i, f, g, o.
 * Every tensor is row-major and contiguous; a [B, T, X] tensor is also read as a
 * [B*T, X] matrix, and its time step t as a [B, X] matrix with leading dimension T*X.
 *
 * Per layer:
 *   projection op   (x [B,T,n_in], W_ih [G,n_in], b_ih [G], b_hh [G]) -> P [B,T,G]
 *                   P = x W_ihᵀ + b_ih + b_hh: one gemm over all B*T rows.
 *   recurrence op   (P, W_hh [G,H], h0 [L,B,H]?, c0 [L,B,H]?) -> Y [B,T,H]
 *                   per step one gemm P[:,t] += h_{t-1} W_hhᵀ, then the gate
 *                   nonlinearities and the cell update fused in one loop. The
 *                   activated gates overwrite P in place (P is internal to the layer
 *                   and nothing reads its pre-activation values afterwards), so the
 *                   forward pass keeps one [B,T,G] buffer; backward overwrites it
 *                   again with the gate gradients dP and hands it to P as its
 *                   gradient, so backward allocates no second [B,T,G] buffer.
 *   state ops       h_n and c_n: [k+1, B, H] stacks built one layer at a time
 *                   (an op has at most LB_MAX_OP_INPUTS inputs).
 *
 * Backward through time (reverse over t), with dh = dY[:,t] + dh_rec and tc = tanh(c_t):
 *   dc  = dh * o * (1 - tc²) + dc_next
 *   di~ = dc * g * i(1-i)     df~ = dc * c_{t-1} * f(1-f)
 *   dg~ = dc * i * (1-g²)     do~ = dh * tc * o(1-o)
 *   dc_next = dc * f,         dh_rec = dP[:,t] W_hh     ([B,G] @ [G,H], one gemm per step)
 * and after the loop
 *   dW_hh += Σ_t dP[:,t]ᵀ h_{t-1}   (one gemm per batch row over its T-1 steps, + h0's)
 *   dW_ih += dPᵀ x,  dx += dP W_ih,  db_ih += Σ dP,  db_hh += Σ dP   (one gemm each).
 */
#include "layers/lstm.h"


#include <cblas.h> /* after it, I is complex.h's imaginary unit: widths are called n_in */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- small helpers ---- */

/* c = alpha * op(a) @ op(b) + beta * c on raw row-major matrices of `dtype`:
 *   op(a): [m, k], op(b): [k, n], c: [m, n]; lda/ldb/ldc are row strides in elements. */
static void gemm(lb_dtype dtype, int trans_a, int trans_b, int64_t m, int64_t n, int64_t k, double alpha,
                 const void *a, int64_t lda, const void *b, int64_t ldb, double beta, void *c, int64_t ldc)
{
    if (m <= 0 || n <= 0 || k <= 0) /* callers only pass k = 0 with beta = 1: nothing to do */
        return;
    CBLAS_TRANSPOSE ta = trans_a ? CblasTrans : CblasNoTrans, tb = trans_b ? CblasTrans : CblasNoTrans;
    if (dtype == LB_FLOAT32)
        cblas_sgemm(CblasRowMajor, ta, tb, (int)m, (int)n, (int)k, (float)alpha, a, (int)lda, b, (int)ldb,
                    (float)beta, c, (int)ldc);
    else
        cblas_dgemm(CblasRowMajor, ta, tb, (int)m, (int)n, (int)k, alpha, a, (int)lda, b, (int)ldb, beta, c,
                    (int)ldc);
}

/* Gate nonlinearities in the precision of their argument. The transcendentals
 * dominate the fused gate loop, and glibc's tanhf (through expm1f) is slow, so
 * float32 computes tanh as 1 - 2/(e^{2x} + 1) with double exp: within float32
 * rounding (absolute error ~1e-16 before rounding) and about 3x faster. float64
 * uses libm's tanh. Both sigmoids avoid overflow for large |x|. */
static inline double sigmoid_d(double x)
{
    if (x >= 0)
        return 1.0 / (1.0 + exp(-x));
    double e = exp(x);
    return e / (1.0 + e);
}

static inline float sigmoid_f(float x)
{
    if (x >= 0)
        return 1.0f / (1.0f + expf(-x));
    float e = expf(x);
    return e / (1.0f + e);
}

static inline float tanh_f(float x)
{
    return (float)(1.0 - 2.0 / (exp(2.0 * (double)x) + 1.0)); /* exp overflow -> inf -> exactly 1 */
}

#define SIGMOID(x) _Generic((x), float: sigmoid_f, default: sigmoid_d)(x)
#define TANH(x) _Generic((x), float: tanh_f, default: tanh)(x)

/* ---- parameters ---- */

lb_status lb_lstm_init(lb_lstm *l, lb_params *ps, const char *prefix, int64_t input_size, int64_t hidden_size,
                       int n_layers, lb_dtype dtype, lb_rng *rng)
{
    if (!l || !ps || !rng)
        return lb_error(LB_ERR_VALUE, "lstm init: %s is NULL", !l ? "the layer" : !ps ? "the parameter list" : "rng");
    memset(l, 0, sizeof *l);
    if (input_size < 1 || hidden_size < 1)
        return lb_error(LB_ERR_VALUE, "lstm init: input_size (%lld) and hidden_size (%lld) must be >= 1",
                        (long long)input_size, (long long)hidden_size);
    if (n_layers < 1 || n_layers > LB_LSTM_MAX_LAYERS)
        return lb_error(LB_ERR_VALUE, "lstm init: n_layers is %d; it must be in [1, %d]", n_layers,
                        LB_LSTM_MAX_LAYERS);
    if (dtype != LB_FLOAT32 && dtype != LB_FLOAT64)
        return lb_error(LB_ERR_DTYPE, "lstm init: dtype %d is neither float32 nor float64", (int)dtype);
    const int64_t H = hidden_size;
    const double bound = 1.0 / sqrt((double)H); /* torch.nn.LSTM.reset_parameters */
    for (int k = 0; k < n_layers; k++) {
        int64_t s_ih[2] = {4 * H, k == 0 ? input_size : H}, s_hh[2] = {4 * H, H}, s_b[1] = {4 * H};
        const struct {
            const char *name;
            int ndim;
            const int64_t *shape;
            lb_var **slot;
        } specs[4] = {{"weight_ih", 2, s_ih, &l->weight_ih[k]},
                      {"weight_hh", 2, s_hh, &l->weight_hh[k]},
                      {"bias_ih", 1, s_b, &l->bias_ih[k]},
                      {"bias_hh", 1, s_b, &l->bias_hh[k]}};
        for (int i = 0; i < 4; i++) {
            char name[64];
            snprintf(name, sizeof name, "%s_l%d", specs[i].name, k);
            if (!(*specs[i].slot = lb_params_add(ps, prefix, name, dtype, specs[i].ndim, specs[i].shape)))
                return lb_error_context("lstm init (prefix '%s', layer %d)", prefix ? prefix : "", k);
        }
        lb_init_uniform(l->weight_ih[k], rng, bound);
        lb_init_uniform(l->weight_hh[k], rng, bound);
        lb_init_uniform(l->bias_ih[k], rng, bound);
        lb_init_uniform(l->bias_hh[k], rng, bound);
    }
    l->n_layers = n_layers; /* set last: a failed init leaves a layer lb_lstm_forward refuses */
    l->input_size = input_size;
    l->hidden_size = hidden_size;
    return LB_OK;
}

void lb_lstm_add_forget_bias(lb_lstm *l, double value)
{
    if (!l)
        return;
    const int64_t H = l->hidden_size;
    for (int k = 0; k < l->n_layers; k++) {
        lb_tensor *b = l->bias_ih[k] ? l->bias_ih[k]->value : NULL;
        if (!b)
            continue;
        for (int64_t j = H; j < 2 * H; j++) {
            int64_t idx[1] = {j};
            lb_tensor_set(b, idx, lb_tensor_get(b, idx) + value);
        }
    }
}

/* ---- projection op: P [B,T,G] = x [B,T,n_in] W_ih[G,n_in]ᵀ + b_ih[G] + b_hh[G] ---- */

/* inputs: x, W_ih, b_ih, b_hh; node->grad = dP [B,T,G]. */
static lb_status lstm_projection_backward(lb_var *node)
{
    lb_var *x = node->inputs[0], *w = node->inputs[1], *b_ih = node->inputs[2], *b_hh = node->inputs[3];
    const lb_tensor *dp = node->grad;
    const lb_dtype dt = dp->dtype;
    const int64_t G = dp->shape[2], BT = dp->shape[0] * dp->shape[1], n_in = x->value->shape[2];
    const void *dpd = lb_tensor_data(dp);
    if (x->requires_grad) { /* dx [BT,n_in] += dP [BT,G] @ W_ih [G,n_in] */
        lb_tensor *gx = lb_grad_buffer(x);
        if (!gx)
            return lb_last_status();
        gemm(dt, 0, 0, BT, n_in, G, 1.0, dpd, G, lb_tensor_data(w->value), n_in, 1.0, lb_tensor_data(gx), n_in);
    }
    if (w->requires_grad) { /* dW_ih [G,n_in] += dPᵀ [G,BT] @ x [BT,n_in] */
        lb_tensor *gw = lb_grad_buffer(w);
        if (!gw)
            return lb_last_status();
        gemm(dt, 1, 0, G, n_in, BT, 1.0, dpd, G, lb_tensor_data(x->value), n_in, 1.0, lb_tensor_data(gw), n_in);
    }
    if (b_ih->requires_grad || b_hh->requires_grad) { /* db [G] += Σ_rows dP, summed in double */
        double *acc = calloc((size_t)G, sizeof *acc);
        if (!acc)
            return lb_error(LB_ERR_MEMORY, "lstm projection backward: out of memory");
        LB_DISPATCH(dt, real, {
            const real *d = dpd;
            for (int64_t r = 0; r < BT; r++)
                for (int64_t j = 0; j < G; j++)
                    acc[j] += (double)d[r * G + j];
        });
        lb_var *bs[2] = {b_ih, b_hh};
        for (int i = 0; i < 2; i++) {
            if (!bs[i]->requires_grad)
                continue;
            lb_tensor *gb = lb_grad_buffer(bs[i]);
            if (!gb) {
                free(acc);
                return lb_last_status();
            }
            LB_DISPATCH(dt, real, {
                real *d = lb_tensor_data(gb);
                for (int64_t j = 0; j < G; j++)
                    d[j] += (real)acc[j];
            });
        }
        free(acc);
    }
    return LB_OK;
}

static lb_var *lstm_projection(lb_graph *g, lb_var *x, lb_var *w_ih, lb_var *b_ih, lb_var *b_hh)
{
    const lb_tensor *xv = x->value;
    const lb_dtype dt = xv->dtype;
    const int64_t B = xv->shape[0], T = xv->shape[1], n_in = xv->shape[2], G = w_ih->value->shape[0];
    int64_t shape[3] = {B, T, G};
    lb_tensor *p = lb_tensor_zeros(dt, 3, shape);
    if (!p)
        return NULL;
    LB_DISPATCH(dt, real, {
        real *pd = lb_tensor_data(p);
        const real *bi = lb_tensor_data(b_ih->value), *bh = lb_tensor_data(b_hh->value);
        for (int64_t r = 0; r < B * T; r++)
            for (int64_t j = 0; j < G; j++)
                pd[r * G + j] = bi[j] + bh[j];
    });
    /* P [BT,G] += x [BT,n_in] @ W_ihᵀ */
    gemm(dt, 0, 1, B * T, G, n_in, 1.0, lb_tensor_data(xv), n_in, lb_tensor_data(w_ih->value), n_in, 1.0,
         lb_tensor_data(p), G);
    lb_var *in[4] = {x, w_ih, b_ih, b_hh};
    return lb_custom(g, 4, in, p, lstm_projection_backward, NULL, NULL);
}

/* ---- recurrence op ---- */

typedef struct lstm_rec_ctx {
    int layer;           /* which [B,H] slice of h0/c0 ([L,B,H]) this layer reads */
    int h0_input;        /* index of h0 among the node's inputs, -1 when zeros */
    int c0_input;        /* index of c0 among the node's inputs, -1 when zeros */
    lb_tensor *c_last;   /* [B,H] c_{T-1}, read by the c_n state op */
    lb_tensor *dc_last;  /* [B,H] gradient arriving at c_{T-1} from c_n; NULL until one does */
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

/* node->value Y [B,T,H]; saved[0] activated gates [B,T,G] (P's storage);
 * saved[1] cell states C [B,T,H]; node->grad dY [B,T,H]. */
static lb_status lstm_recurrence_backward(lb_var *node)
{
    lstm_rec_ctx *ctx = node->ctx;
    lb_var *pvar = node->inputs[0], *whh = node->inputs[1];
    lb_var *h0 = ctx->h0_input >= 0 ? node->inputs[ctx->h0_input] : NULL;
    lb_var *c0 = ctx->c0_input >= 0 ? node->inputs[ctx->c0_input] : NULL;
    lb_tensor *gates = node->saved[0], *cells = node->saved[1];
    const lb_tensor *yv = node->value, *dy = node->grad;
    const lb_dtype dt = yv->dtype;
    const int64_t B = yv->shape[0], T = yv->shape[1], H = yv->shape[2], G = 4 * H;
    if (!gates || !cells)
        return lb_error(LB_ERR_STATE, "lstm backward: the saved gates are gone (backward ran twice?)");
    int64_t bh[2] = {B, H};
    lb_tensor *dh_rec = lb_tensor_zeros(dt, 2, bh), *dc = lb_tensor_zeros(dt, 2, bh);
    if (!dh_rec || !dc) {
        lb_tensor_free(dh_rec);
        lb_tensor_free(dc);
        return lb_last_status();
    }
    if (ctx->dc_last)
        lb_tensor_copy_into(dc, ctx->dc_last);
    const int64_t off0 = (int64_t)ctx->layer * B * H; /* this layer's slice of h0/c0 */
    const int need_dh0 = h0 && h0->requires_grad;
    const void *whd = lb_tensor_data(whh->value);
    void *gd = lb_tensor_data(gates);
    LB_DISPATCH(dt, real, {
        real *gate = gd;
        const real *c = lb_tensor_data(cells), *dyd = lb_tensor_data(dy);
        const real *c0d = c0 ? (const real *)lb_tensor_data(c0->value) + off0 : NULL;
        real *dhr = lb_tensor_data(dh_rec), *dcd = lb_tensor_data(dc);
        for (int64_t t = T - 1; t >= 0; t--) {
            for (int64_t b = 0; b < B; b++) {
                real *gr = gate + (b * T + t) * G;          /* [G] i, f, g, o of (b, t) */
                const real *ct = c + (b * T + t) * H;       /* [H] c_t */
                const real *cp = t > 0 ? c + (b * T + t - 1) * H : (c0d ? c0d + b * H : NULL);
                const real *dyt = dyd + (b * T + t) * H;    /* [H] */
                real *dhb = dhr + b * H, *dcb = dcd + b * H;
                for (int64_t j = 0; j < H; j++) {
                    const double ig = gr[j], fg = gr[H + j], gg = gr[2 * H + j], og = gr[3 * H + j];
                    const double tc = TANH(ct[j]);
                    const double cprev = cp ? (double)cp[j] : 0.0;
                    const double dh = (double)dyt[j] + (double)dhb[j];
                    const double dct = dh * og * (1.0 - tc * tc) + (double)dcb[j];
                    gr[j] = (real)(dct * gg * ig * (1.0 - ig));
                    gr[H + j] = (real)(dct * cprev * fg * (1.0 - fg));
                    gr[2 * H + j] = (real)(dct * ig * (1.0 - gg * gg));
                    gr[3 * H + j] = (real)(dh * tc * og * (1.0 - og));
                    dcb[j] = (real)(dct * fg);
                }
            }
            /* dh_rec [B,H] = dP[:,t] [B,G] (row stride T*G) @ W_hh [G,H] */
            if (t > 0 || need_dh0)
                gemm(dt, 0, 0, B, H, G, 1.0, gate + t * G, T * G, whd, H, 0.0, dhr, H);
        }
    });
    lb_status st = LB_OK;
    if (need_dh0) { /* dh0[layer] += dh_rec */
        lb_tensor *g0 = lb_grad_buffer(h0);
        if (!g0)
            st = lb_last_status();
        else
            LB_DISPATCH(dt, real, {
                real *d = (real *)lb_tensor_data(g0) + off0;
                const real *s = lb_tensor_data(dh_rec);
                for (int64_t i = 0; i < B * H; i++)
                    d[i] += s[i];
            });
    }
    if (st == LB_OK && c0 && c0->requires_grad) { /* dc0[layer] += dc */
        lb_tensor *g0 = lb_grad_buffer(c0);
        if (!g0)
            st = lb_last_status();
        else
            LB_DISPATCH(dt, real, {
                real *d = (real *)lb_tensor_data(g0) + off0;
                const real *s = lb_tensor_data(dc);
                for (int64_t i = 0; i < B * H; i++)
                    d[i] += s[i];
            });
    }
    lb_tensor_free(dh_rec);
    lb_tensor_free(dc);
    lb_tensor_free(ctx->dc_last); /* spent, like the saved tensors */
    ctx->dc_last = NULL;
    if (st != LB_OK)
        return st;
    if (whh->requires_grad) {
        lb_tensor *gw = lb_grad_buffer(whh);
        if (!gw)
            return lb_last_status();
        void *gwd = lb_tensor_data(gw);
        const char *yd = lb_tensor_data(yv);
        const size_t es = lb_dtype_size(dt);
        /* dW_hh [G,H] += dP[b,1:T]ᵀ [G,T-1] @ Y[b,0:T-1] [T-1,H] for each batch row b */
        for (int64_t b = 0; b < B && T > 1; b++)
            gemm(dt, 1, 0, G, H, T - 1, 1.0, (const char *)gd + (size_t)((b * T + 1) * G) * es, G,
                 yd + (size_t)(b * T * H) * es, H, 1.0, gwd, H);
        /* ... + dP[:,0]ᵀ [G,B] (row stride T*G) @ h0[layer] [B,H] */
        if (h0)
            gemm(dt, 1, 0, G, H, B, 1.0, gd, T * G, (const char *)lb_tensor_data(h0->value) + (size_t)off0 * es, H,
                 1.0, gwd, H);
    }
    /* The gate buffer now holds dP: it becomes P's gradient without a copy. */
    if (pvar->requires_grad) {
        if (!pvar->grad) {
            pvar->grad = gates;
            node->saved[0] = NULL;
        } else {
            return lb_accumulate_grad(pvar, gates);
        }
    }
    return LB_OK;
}

/* Records layer `layer`'s recurrence over P (inputs: p [B,T,G], whh [G,H], h0/c0 [L,B,H]
 * or NULL) -> Y [B,T,H]. P's value is overwritten with the activated gates. */
static lb_var *lstm_recurrence(lb_graph *g, lb_var *p, lb_var *whh, lb_var *h0, lb_var *c0, int layer)
{
    const lb_tensor *pv = p->value;
    const lb_dtype dt = pv->dtype;
    const int64_t B = pv->shape[0], T = pv->shape[1], G = pv->shape[2], H = G / 4;
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
    const int save = lb_graph_grad_enabled(g) && needs;
    int64_t s_y[3] = {B, T, H}, s_ring[3] = {2, B, H}, s_bh[2] = {B, H};
    lb_tensor *y = lb_tensor_zeros(dt, 3, s_y);
    lb_tensor *cells = lb_tensor_zeros(dt, 3, save ? s_y : s_ring);
    ctx->c_last = lb_tensor_zeros(dt, 2, s_bh);
    lb_tensor *gates = save ? lb_tensor_view(pv) : NULL;
    if (!y || !cells || !ctx->c_last || (save && !gates)) {
        lb_tensor_free(y);
        lb_tensor_free(cells);
        lb_tensor_free(gates);
        lstm_rec_ctx_free(ctx);
        return NULL;
    }
    const int64_t off0 = (int64_t)layer * B * H;
    const void *whd = lb_tensor_data(whh->value);
    LB_DISPATCH(dt, real, {
        real *gate = lb_tensor_data(pv);       /* [B,T,G]: pre-activations in, activated gates out */
        real *yd = lb_tensor_data(y);          /* [B,T,H] */
        real *c = lb_tensor_data(cells);       /* [B,T,H] or ring [2,B,H] */
        const real *h0d = h0 ? (const real *)lb_tensor_data(h0->value) + off0 : NULL; /* [B,H] */
        const real *c0d = c0 ? (const real *)lb_tensor_data(c0->value) + off0 : NULL; /* [B,H] */
        for (int64_t t = 0; t < T; t++) {
            /* P[:,t] [B,G] (row stride T*G) += h_{t-1} [B,H] @ W_hhᵀ [H,G] */
            if (t > 0)
                gemm(dt, 0, 1, B, G, H, 1.0, yd + (t - 1) * H, T * H, whd, H, 1.0, gate + t * G, T * G);
            else if (h0d)
                gemm(dt, 0, 1, B, G, H, 1.0, h0d, H, whd, H, 1.0, gate, T * G);
            for (int64_t b = 0; b < B; b++) {
                real *gr = gate + (b * T + t) * G;
                real *ct = save ? c + (b * T + t) * H : c + ((t & 1) * B + b) * H;
                const real *cp = t > 0 ? (save ? c + (b * T + t - 1) * H : c + (((t - 1) & 1) * B + b) * H)
                                       : (c0d ? c0d + b * H : NULL);
                real *yt = yd + (b * T + t) * H;
                for (int64_t j = 0; j < H; j++) {
                    const real ig = SIGMOID(gr[j]), fg = SIGMOID(gr[H + j]);
                    const real gg = TANH(gr[2 * H + j]), og = SIGMOID(gr[3 * H + j]);
                    const real cn = fg * (cp ? cp[j] : (real)0) + ig * gg;
                    gr[j] = ig;
                    gr[H + j] = fg;
                    gr[2 * H + j] = gg;
                    gr[3 * H + j] = og;
                    ct[j] = cn;
                    yt[j] = og * TANH(cn);
                }
            }
        }
        real *cl = lb_tensor_data(ctx->c_last);
        for (int64_t b = 0; b < B; b++)
            memcpy(cl + b * H, save ? c + (b * T + T - 1) * H : c + (((T - 1) & 1) * B + b) * H,
                   (size_t)H * sizeof(real));
    });
    lb_var *node = lb_custom(g, n, in, y, lstm_recurrence_backward, ctx, lstm_rec_ctx_free);
    if (node && node->requires_grad) {
        node->saved[0] = gates;
        node->saved[1] = cells;
    } else {
        lb_tensor_free(gates);
        lb_tensor_free(cells);
    }
    return node;
}

/* ---- final states: stack [k+1,B,H] = [prev [k,B,H]; state of layer k [1,B,H]] ---- */

enum { LSTM_STATE_H = 0, LSTM_STATE_C = 1 };

/* inputs: y (a recurrence node) and optionally prev; attr_i[0]: LSTM_STATE_H or _C. */
static lb_status lstm_state_backward(lb_var *node)
{
    lb_var *y = node->inputs[0], *prev = node->n_inputs > 1 ? node->inputs[1] : NULL;
    const lb_tensor *gs = node->grad; /* [K,B,H] */
    const lb_dtype dt = gs->dtype;
    const int64_t K = gs->shape[0], B = gs->shape[1], H = gs->shape[2], T = y->value->shape[1];
    if (prev && prev->requires_grad) {
        lb_tensor *gp = lb_grad_buffer(prev);
        if (!gp)
            return lb_last_status();
        LB_DISPATCH(dt, real, {
            real *d = lb_tensor_data(gp);
            const real *s = lb_tensor_data(gs);
            for (int64_t i = 0; i < (K - 1) * B * H; i++)
                d[i] += s[i];
        });
    }
    if (!y->requires_grad)
        return LB_OK;
    /* A gradient buffer on y (zeros if nothing else reaches it) makes its backward run. */
    lb_tensor *gy = lb_grad_buffer(y);
    if (!gy)
        return lb_last_status();
    lstm_rec_ctx *ctx = y->ctx;
    lb_tensor *dst = NULL;
    if (node->attr_i[0] == LSTM_STATE_C) {
        if (!ctx->dc_last && !(ctx->dc_last = lb_tensor_zeros_like(ctx->c_last)))
            return lb_last_status();
        dst = ctx->dc_last;
    }
    LB_DISPATCH(dt, real, {
        const real *s = (const real *)lb_tensor_data(gs) + (K - 1) * B * H;
        for (int64_t b = 0; b < B; b++) {
            /* h: dY[b, T-1, :] += ds[b];  c: dc_last[b, :] += ds[b] */
            real *d = dst ? (real *)lb_tensor_data(dst) + b * H : (real *)lb_tensor_data(gy) + (b * T + T - 1) * H;
            for (int64_t j = 0; j < H; j++)
                d[j] += s[b * H + j];
        }
    });
    return LB_OK;
}

static lb_var *lstm_state(lb_graph *g, lb_var *y, lb_var *prev, int which)
{
    const lb_tensor *yv = y->value;
    const lstm_rec_ctx *ctx = y->ctx;
    const int64_t B = yv->shape[0], T = yv->shape[1], H = yv->shape[2];
    const int64_t K = prev ? prev->value->shape[0] + 1 : 1;
    int64_t shape[3] = {K, B, H};
    lb_tensor *s = lb_tensor_zeros(yv->dtype, 3, shape);
    if (!s)
        return NULL;
    const size_t es = lb_dtype_size(yv->dtype);
    char *sd = lb_tensor_data(s);
    if (prev)
        memcpy(sd, lb_tensor_data(prev->value), (size_t)((K - 1) * B * H) * es);
    for (int64_t b = 0; b < B; b++) {
        const char *src = which == LSTM_STATE_C ? (const char *)lb_tensor_data(ctx->c_last) + (size_t)(b * H) * es
                                                : (const char *)lb_tensor_data(yv) + (size_t)((b * T + T - 1) * H) * es;
        memcpy(sd + (size_t)(((K - 1) * B + b) * H) * es, src, (size_t)H * es);
    }
    lb_var *in[2] = {y, prev};
    lb_var *v = lb_custom(g, prev ? 2 : 1, in, s, lstm_state_backward, NULL, NULL);
    if (v)
        v->attr_i[0] = which;
    return v;
}

/* ---- the layer stack ---- */

static lb_status check_state(const char *what, const lb_var *s, const lb_lstm *l, int64_t B, lb_dtype dt)
{
    char a[128];
    const lb_tensor *v = s->value;
    if (v->ndim != 3 || v->shape[0] != l->n_layers || v->shape[1] != B || v->shape[2] != l->hidden_size)
        return lb_error(LB_ERR_SHAPE, "lstm: %s is %s; expected [L, B, H] = [%d, %lld, %lld]", what,
                        lb_tensor_describe(v, a, sizeof a), l->n_layers, (long long)B, (long long)l->hidden_size);
    if (v->dtype != dt)
        return lb_error(LB_ERR_DTYPE, "lstm: %s is %s but the parameters are %s", what,
                        lb_tensor_describe(v, a, sizeof a), lb_dtype_name(dt));
    return LB_OK;
}

lb_var *lb_lstm_forward(lb_graph *g, const lb_lstm *l, lb_var *x, lb_var *h0, lb_var *c0, lb_var **h_n,
                        lb_var **c_n)
{
    char a[128];
    if (h_n)
        *h_n = NULL;
    if (c_n)
        *c_n = NULL;
    if (!g) {
        lb_error(LB_ERR_STATE, "lstm: the graph is NULL (create one with lb_graph_new)");
        return NULL;
    }
    if (!l || l->n_layers < 1 || l->n_layers > LB_LSTM_MAX_LAYERS || !l->weight_ih[0]) {
        lb_error(LB_ERR_STATE, "lstm: the layer is not initialised (call lb_lstm_init first)");
        return NULL;
    }
    if (!x) {
        if (lb_last_status() == LB_OK)
            lb_error(LB_ERR_VALUE, "lstm: the input x is NULL");
        return NULL;
    }
    const lb_tensor *xv = x->value;
    const lb_dtype dt = l->weight_ih[0]->value->dtype;
    if (xv->ndim != 3 || xv->shape[2] != l->input_size || xv->shape[0] < 1 || xv->shape[1] < 1) {
        lb_error(LB_ERR_SHAPE, "lstm: x is %s; expected [B, T, input_size] = [B, T, %lld] with B, T >= 1 "
                               "(batch first, like torch.nn.LSTM(batch_first=True))",
                 lb_tensor_describe(xv, a, sizeof a), (long long)l->input_size);
        return NULL;
    }
    if (xv->dtype != dt) {
        lb_error(LB_ERR_DTYPE, "lstm: x is %s but the parameters are %s", lb_tensor_describe(xv, a, sizeof a),
                 lb_dtype_name(dt));
        return NULL;
    }
    const int64_t B = xv->shape[0];
    if ((h0 && check_state("h0", h0, l, B, dt) != LB_OK) || (c0 && check_state("c0", c0, l, B, dt) != LB_OK))
        return NULL;
    lb_var *cur = x, *hs = NULL, *cs = NULL;
    for (int k = 0; k < l->n_layers; k++) {
        lb_var *p = lstm_projection(g, cur, l->weight_ih[k], l->bias_ih[k], l->bias_hh[k]);
        lb_var *y = p ? lstm_recurrence(g, p, l->weight_hh[k], h0, c0, k) : NULL;
        if (!y)
            return NULL;
        if (h_n && !(hs = lstm_state(g, y, hs, LSTM_STATE_H)))
            return NULL;
        if (c_n && !(cs = lstm_state(g, y, cs, LSTM_STATE_C)))
            return NULL;
        cur = y;
    }
    if (h_n)
        *h_n = hs;
    if (c_n)
        *c_n = cs;
    return cur;
}

/* The softmax family over the last axis: softmax, log-softmax, and the scaled
 * masked softmax at the heart of attention.
 *
 * Named dims: R rows (every leading dim flattened), N entries per row; for the
 * masked softmax, scores [B, ..., Tq, Tk] with R = B * ... * Tq rows of Tk keys.
 *
 * Backwards are O(N) per row and need only the op's output, which the node keeps
 * as its value, so nothing is saved:
 *   softmax:      dx = y * (dy - sum(dy * y))
 *   log-softmax:  dx = dy - softmax(x) * sum(dy),  softmax(x) = exp(y)
 *   masked:       dscores = scale * w * (dw - sum(dw * w))  (masked w are 0, so they get 0)
 */
#include <math.h>
#include <stdlib.h>

#include "autograd/op_table.h"
#include "autograd/ops.h"
#include "tensor/kernels.h"

/* ---- softmax and log-softmax ---- x: [..., N] -> y: [..., N] */

static lb_var *softmax_op(lb_graph *g, lb_op_kind op, lb_var *x)
{
    if (lb_check_inputs(lb_op_name(op), g, 1, &x) != LB_OK)
        return NULL;
    lb_tensor *out = lb_tensor_zeros_like(x->value);
    if (!out)
        return NULL;
    lb_k_softmax(x->value, out, op == LB_OP_LOG_SOFTMAX);
    return lb_graph_record(g, op, out, 1, &x);
}

lb_var *lb_softmax(lb_graph *g, lb_var *x) { return softmax_op(g, LB_OP_SOFTMAX, x); }
lb_var *lb_log_softmax(lb_graph *g, lb_var *x) { return softmax_op(g, LB_OP_LOG_SOFTMAX, x); }

/* Rows R and row length N of a [..., N] tensor (a 0-dim tensor is one row of one). */
static void rows_of(const lb_tensor *t, int64_t *rows, int64_t *cols)
{
    *cols = t->ndim ? t->shape[t->ndim - 1] : 1;
    *rows = *cols ? lb_tensor_numel(t) / *cols : 0;
}

/* dx += scale * y * (dy - sum(dy * y)) row by row; the sum accumulates in double.
 *   y, dy, dx: [R, N] contiguous */
static void softmax_backward_rows(const lb_tensor *y, const lb_tensor *dy, lb_tensor *dx, double scale)
{
    int64_t rows, n;
    rows_of(y, &rows, &n);
    LB_DISPATCH(y->dtype, T, {
        const T *py = lb_tensor_data(y), *pdy = lb_tensor_data(dy);
        T *pdx = lb_tensor_data(dx);
        for (int64_t r = 0; r < rows; r++) {
            const T *yr = py + r * n, *gr = pdy + r * n;
            T *xr = pdx + r * n;
            double dot = 0;
            for (int64_t j = 0; j < n; j++)
                dot += (double)gr[j] * (double)yr[j];
            for (int64_t j = 0; j < n; j++)
                xr[j] += (T)(scale * (double)yr[j] * ((double)gr[j] - dot));
        }
    });
}

lb_status lb_softmax_backward(lb_var *node)
{
    lb_var *x = node->inputs[0];
    LB_GRAD_BUFFER_OR_RETURN(gx, x);
    softmax_backward_rows(node->value, node->grad, gx, 1.0);
    return LB_OK;
}

/* y = log softmax(x), so softmax(x) = exp(y):
 *   dx_j += dy_j - exp(y_j) * sum_k dy_k   y, dy, dx: [R, N] */
lb_status lb_log_softmax_backward(lb_var *node)
{
    lb_var *x = node->inputs[0];
    LB_GRAD_BUFFER_OR_RETURN(gx, x);
    int64_t rows, n;
    rows_of(node->value, &rows, &n);
    LB_DISPATCH(gx->dtype, T, {
        const T *py = lb_tensor_data(node->value), *pdy = lb_tensor_data(node->grad);
        T *pdx = lb_tensor_data(gx);
        for (int64_t r = 0; r < rows; r++) {
            const T *yr = py + r * n, *gr = pdy + r * n;
            T *xr = pdx + r * n;
            double total = 0;
            for (int64_t j = 0; j < n; j++)
                total += (double)gr[j];
            for (int64_t j = 0; j < n; j++)
                xr[j] += (T)((double)gr[j] - exp((double)yr[j]) * total);
        }
    });
    return LB_OK;
}

/* ---- masked softmax ----
 * scores: [B, ..., Tq, Tk] -> weights: [B, ..., Tq, Tk], over R = B * ... * Tq rows.
 * allowed, additive: broadcastable to the scores; key_lengths: [B]; query_positions: [B, Tq]. */

/* Everything needed to decide, row by row, which keys a query may attend to. */
typedef struct mask_plan {
    int ndim;
    const int64_t *shape; /* the scores' shape */
    int64_t tq, tk;
    int64_t align;        /* Tk - Tq: query i lines up with key i + align */
    int causal;
    int64_t window;
    const int32_t *key_lengths;
    const int32_t *query_positions; /* [B, Tq]: query i of item b lines up with key [b * Tq + i] */
    double softcap;                 /* 0 = off */
    const double *alibi_slopes;     /* [H], H = shape[ndim - 3], or NULL */
    const lb_tensor *allowed, *additive;
    int64_t allowed_strides[LB_MAX_DIMS];  /* in the scores' dims; 0 where broadcast */
    int64_t additive_strides[LB_MAX_DIMS];
} mask_plan;

/* Strides of `mask` seen in the scores' dims; error unless the mask broadcasts to the
 * scores (aligned from the right, every mask dim 1 or equal to the scores' dim). */
static lb_status mask_strides(const char *op, const char *which, const lb_tensor *mask, int ndim,
                              const int64_t *shape, int64_t *strides)
{
    int lead = ndim - mask->ndim;
    int fits = lead >= 0;
    for (int d = 0; fits && d < ndim; d++) {
        int m = d - lead;
        if (m < 0) {
            strides[d] = 0;
        } else if (mask->shape[m] == shape[d]) {
            strides[d] = mask->shape[m] == 1 ? 0 : mask->strides[m];
        } else if (mask->shape[m] == 1) {
            strides[d] = 0;
        } else {
            fits = 0;
        }
    }
    if (fits)
        return LB_OK;
    char sm[128], ss[128];
    return lb_error(LB_ERR_SHAPE,
                    "%s: the %s mask %s does not broadcast to the scores %s [B, ..., Tq, Tk] (aligned "
                    "from the right, each mask dim must be 1 or equal the scores' dim; e.g. [Tq, Tk] or [B, 1, 1, Tk])",
                    op, which, lb_tensor_describe(mask, sm, sizeof sm), lb_shape_str(ndim, shape, ss, sizeof ss));
}

lb_status lb_attn_mask_check(const char *op, int ndim, const int64_t *shape, const lb_attn_mask *mask,
                             int64_t *allowed_strides, int64_t *additive_strides)
{
    char ss[128];
    if (!mask)
        return LB_OK;
    int64_t tq = shape[ndim - 2], tk = shape[ndim - 1], nb = ndim >= 3 ? shape[0] : 1;
    if (mask->window < 0)
        return lb_error(LB_ERR_VALUE, "%s: window %lld is negative for scores %s (0 turns it off)", op,
                        (long long)mask->window, lb_shape_str(ndim, shape, ss, sizeof ss));
    if (mask->allowed && mask_strides(op, "allowed", mask->allowed, ndim, shape, allowed_strides) != LB_OK)
        return lb_last_status();
    if (mask->additive && mask_strides(op, "additive", mask->additive, ndim, shape, additive_strides) != LB_OK)
        return lb_last_status();
    if (mask->key_lengths) {
        if (ndim < 3)
            return lb_error(LB_ERR_SHAPE,
                            "%s: key_lengths need a batch dim, but the scores %s have no dim before "
                            "[Tq, Tk] (reshape them to [B, ..., Tq, Tk])",
                            op, lb_shape_str(ndim, shape, ss, sizeof ss));
        for (int64_t b = 0; b < nb; b++)
            if (mask->key_lengths[b] < 0 || mask->key_lengths[b] > tk)
                return lb_error(LB_ERR_VALUE,
                                "%s: key_lengths[%lld] = %d is outside [0, Tk = %lld] for scores %s "
                                "(a length counts the real, unpadded keys of batch item %lld)",
                                op, (long long)b, (int)mask->key_lengths[b], (long long)tk,
                                lb_shape_str(ndim, shape, ss, sizeof ss), (long long)b);
    }
    if (mask->alibi_slopes) {
        if (ndim < 3 || mask->alibi_heads != shape[ndim - 3])
            return lb_error(LB_ERR_SHAPE,
                            "%s: %lld ALiBi slopes for scores %s: one slope per head, the dim before [Tq, Tk] "
                            "([B, H, Tq, Tk])",
                            op, (long long)mask->alibi_heads, lb_shape_str(ndim, shape, ss, sizeof ss));
        for (int64_t h = 0; h < mask->alibi_heads; h++)
            if (!(mask->alibi_slopes[h] >= 0) || !isfinite(mask->alibi_slopes[h]))
                return lb_error(LB_ERR_VALUE, "%s: ALiBi slope %lld = %g must be a finite value >= 0 for scores %s", op,
                                (long long)h, mask->alibi_slopes[h], lb_shape_str(ndim, shape, ss, sizeof ss));
    }
    if (!(mask->softcap >= 0) || !isfinite(mask->softcap))
        return lb_error(LB_ERR_VALUE, "%s: softcap %g must be a finite value >= 0 for scores %s (0 turns it off)", op,
                        mask->softcap, lb_shape_str(ndim, shape, ss, sizeof ss));
    if (mask->query_positions)
        for (int64_t b = 0; b < nb; b++)
            for (int64_t i = 0; i < tq; i++) {
                int32_t pos = mask->query_positions[b * tq + i];
                if (pos < 0)
                    return lb_error(LB_ERR_VALUE,
                                    "%s: query_positions[%lld, %lld] = %d is negative for scores %s "
                                    "(a position is the key index the query aligns with, [B, Tq] row-major)",
                                    op, (long long)b, (long long)i, (int)pos, lb_shape_str(ndim, shape, ss, sizeof ss));
            }
    return LB_OK;
}

/* Element of a float32 or float64 tensor at `offset` elements from its first element. */
static double read_at(const lb_tensor *t, int64_t offset)
{
    const void *p = lb_tensor_data(t);
    return t->dtype == LB_FLOAT32 ? (double)((const float *)p)[offset] : ((const double *)p)[offset];
}

/* For row r of the scores: keep[j] = 1 when the query may attend key j, and add[j] its
 * additive mask value (0 without one). Keys masked by the structure (causal, window,
 * padding), by `allowed`, or by an additive -inf are not kept. */
static void plan_row(const mask_plan *p, int64_t r, unsigned char *keep, double *add)
{
    int64_t idx[LB_MAX_DIMS] = {0}, rem = r;
    for (int d = p->ndim - 2; d >= 0; d--) {
        idx[d] = rem % p->shape[d];
        rem /= p->shape[d];
    }
    int64_t i = idx[p->ndim - 2], lo = 0, hi = p->tk - 1; /* kept keys lie in [lo, hi] */
    int64_t b = p->ndim >= 3 ? idx[0] : 0;
    int64_t pos = p->query_positions ? (int64_t)p->query_positions[b * p->tq + i] : i + p->align;
    if (p->causal || p->window > 0)
        hi = pos < hi ? pos : hi;
    if (p->window > 0 && pos >= p->window)
        lo = pos - p->window + 1;
    if (p->key_lengths && (int64_t)p->key_lengths[b] - 1 < hi)
        hi = (int64_t)p->key_lengths[b] - 1;
    int64_t off_allowed = 0, off_additive = 0;
    for (int d = 0; d < p->ndim - 1; d++) {
        off_allowed += idx[d] * p->allowed_strides[d];
        off_additive += idx[d] * p->additive_strides[d];
    }
    int64_t last = p->ndim - 1;
    double slope = p->alibi_slopes ? p->alibi_slopes[idx[p->ndim - 3]] : 0.0;
    for (int64_t j = 0; j < p->tk; j++) {
        keep[j] = j >= lo && j <= hi;
        add[j] = p->alibi_slopes ? -slope * (double)(pos >= j ? pos - j : j - pos) : 0.0;
        if (keep[j] && p->allowed)
            keep[j] = read_at(p->allowed, off_allowed + j * p->allowed_strides[last]) != 0;
        if (keep[j] && p->additive) {
            add[j] += read_at(p->additive, off_additive + j * p->additive_strides[last]);
            keep[j] = !(isinf(add[j]) && add[j] < 0);
        }
    }
}

/* Checks the mask against the scores and fills the plan. */
static lb_status make_plan(const lb_tensor *scores, const lb_attn_mask *mask, mask_plan *p)
{
    *p = (mask_plan){0};
    p->ndim = scores->ndim;
    p->shape = scores->shape;
    p->tq = scores->shape[scores->ndim - 2];
    p->tk = scores->shape[scores->ndim - 1];
    p->align = p->tk - p->tq;
    if (!mask)
        return LB_OK;
    if (lb_attn_mask_check("masked_softmax", scores->ndim, scores->shape, mask, p->allowed_strides,
                           p->additive_strides) != LB_OK)
        return lb_last_status();
    p->causal = mask->causal;
    p->window = mask->window;
    p->key_lengths = mask->key_lengths;
    p->query_positions = mask->query_positions;
    p->softcap = mask->softcap;
    p->alibi_slopes = mask->alibi_slopes;
    p->allowed = mask->allowed;
    p->additive = mask->additive;
    return LB_OK;
}

/* weights[r, j] = exp(z_j - max z) / sum exp(z - max z) over kept keys j, 0 elsewhere,
 * with z_j = scale * scores[r, j] + add_j (softcap: c tanh(scale * scores[r, j] / c)
 * + add_j); a row with no kept key stays all zeros.
 *   scores, weights: [R, Tk] contiguous; weights arrives zeroed */
static lb_status masked_softmax_rows(const lb_tensor *scores, lb_tensor *weights, const mask_plan *p, double scale)
{
    int64_t tk = p->tk, rows = tk ? lb_tensor_numel(scores) / tk : 0;
    double *z = malloc((size_t)(tk + 1) * sizeof *z), *add = malloc((size_t)(tk + 1) * sizeof *add);
    unsigned char *keep = malloc((size_t)tk + 1);
    if (!z || !add || !keep) {
        free(z);
        free(add);
        free(keep);
        return lb_error(LB_ERR_MEMORY, "masked_softmax: out of memory for a row of %lld keys", (long long)tk);
    }
    LB_DISPATCH(scores->dtype, T, {
        const T *ps = lb_tensor_data(scores);
        T *pw = lb_tensor_data(weights);
        for (int64_t r = 0; r < rows; r++) {
            const T *sr = ps + r * tk;
            T *wr = pw + r * tk;
            plan_row(p, r, keep, add);
            double mx = -INFINITY;
            int64_t kept = 0;
            for (int64_t j = 0; j < tk; j++) {
                if (!keep[j])
                    continue; /* a masked score is never read: it may be anything, even inf */
                z[j] = scale * (double)sr[j];
                if (p->softcap > 0)
                    z[j] = p->softcap * tanh(z[j] / p->softcap);
                z[j] += add[j];
                if (z[j] == -INFINITY) { /* exp gives 0 anyway; dropping it keeps all -inf rows at 0 */
                    keep[j] = 0;
                    continue;
                }
                if (kept++ == 0 || z[j] > mx)
                    mx = z[j];
            }
            if (kept == 0)
                continue;
            double sum = 0;
            for (int64_t j = 0; j < tk; j++)
                if (keep[j])
                    sum += (z[j] = exp(z[j] - mx));
            double inv = 1.0 / sum;
            for (int64_t j = 0; j < tk; j++)
                if (keep[j])
                    wr[j] = (T)(z[j] * inv);
        }
    });
    free(z);
    free(add);
    free(keep);
    return LB_OK;
}

lb_var *lb_masked_softmax(lb_graph *g, lb_var *scores, const lb_attn_mask *mask, double scale)
{
    char ss[128];
    if (lb_check_inputs("masked_softmax", g, 1, &scores) != LB_OK)
        return NULL;
    const lb_tensor *s = scores->value;
    if (s->ndim < 2) {
        lb_error(LB_ERR_SHAPE, "masked_softmax: scores %s need at least 2 dims [..., Tq, Tk] (reshape a row to [1, Tk])",
                 lb_tensor_describe(s, ss, sizeof ss));
        return NULL;
    }
    if (!isfinite(scale)) {
        lb_error(LB_ERR_VALUE, "masked_softmax: scale %g is not finite for scores %s (attention uses 1/sqrt(d_k))",
                 scale, lb_tensor_describe(s, ss, sizeof ss));
        return NULL;
    }
    mask_plan plan;
    if (make_plan(s, mask, &plan) != LB_OK)
        return NULL;
    lb_tensor *out = lb_tensor_zeros_like(s);
    if (!out)
        return NULL;
    if (masked_softmax_rows(s, out, &plan, scale) != LB_OK) {
        lb_tensor_free(out);
        return NULL;
    }
    lb_var *v = lb_graph_record(g, LB_OP_MASKED_SOFTMAX, out, 1, &scores);
    if (v) {
        v->attr_f[0] = scale;
        v->attr_f[1] = plan.softcap;
    }
    return v;
}

/* dscores = scale * w * (dw - sum(dw * w)) with w the node's value; masked and
 * fully-masked entries have w = 0 and so receive 0. With a softcap c the chain rule
 * adds the factor 1 - tanh(scale * scores / c)^2. */
lb_status lb_masked_softmax_backward(lb_var *node)
{
    lb_var *scores = node->inputs[0];
    LB_GRAD_BUFFER_OR_RETURN(gs, scores);
    double scale = node->attr_f[0], cap = node->attr_f[1];
    if (cap == 0) {
        softmax_backward_rows(node->value, node->grad, gs, scale);
        return LB_OK;
    }
    lb_tensor *dz = lb_tensor_zeros_like(gs);
    if (!dz)
        return lb_last_status();
    softmax_backward_rows(node->value, node->grad, dz, 1.0);
    int64_t n = lb_tensor_numel(dz);
    LB_DISPATCH(dz->dtype, T, {
        const T *ps = lb_tensor_data(scores->value), *pz = lb_tensor_data(dz);
        T *pg = lb_tensor_data(gs);
        for (int64_t i = 0; i < n; i++) {
            double t = tanh(scale * (double)ps[i] / cap);
            if (pz[i] != 0)
                pg[i] += (T)((double)pz[i] * scale * (1.0 - t * t));
        }
    });
    lb_tensor_free(dz);
    return LB_OK;
}

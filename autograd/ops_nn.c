/* Neural-network ops: layer norm, embedding lookup, dropout, and the losses
 * (cross-entropy from logits, mean squared error).
 *
 * Named dims: R rows (every leading dim flattened), D features, V vocabulary,
 * C classes, S the shape of an id or target array.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "autograd/op_table.h"
#include "autograd/ops.h"
#include "tensor/kernels.h"
#include "tensor/threads.h"

/* Product of the first n entries of shape (1 for n == 0). */
static int64_t shape_numel(int n, const int64_t *shape)
{
    int64_t p = 1;
    for (int i = 0; i < n; i++)
        p *= shape[i];
    return p;
}

/* A new 0-dim tensor (a scalar) holding value. */
static lb_tensor *scalar_of(lb_dtype dtype, double value)
{
    int64_t none[1] = {0};
    lb_tensor *t = lb_tensor_zeros(dtype, 0, none);
    if (t)
        LB_DISPATCH(dtype, T, { *(T *)lb_tensor_data(t) = (T)value; });
    return t;
}

/* ---- layer norm ----
 * x: [R, D] (any leading dims), weight: [D] or NULL, bias: [D] or NULL -> y: [R, D]
 * saved: mean [R], rstd [R] (float64), rstd = 1 / sqrt(var + eps), var biased.
 * inputs: x, then weight if present, then bias if present (attr_i[0], attr_i[1] say which). */

lb_var *lb_layer_norm(lb_graph *g, lb_var *x, lb_var *weight, lb_var *bias, double eps)
{
    char sx[128], sp[128];
    lb_var *in[3] = {x, NULL, NULL};
    int n_in = 1;
    if (weight)
        in[n_in++] = weight;
    if (bias)
        in[n_in++] = bias;
    if (lb_check_inputs("layer_norm", g, n_in, in) != LB_OK)
        return NULL;
    const lb_tensor *tx = x->value;
    if (tx->ndim < 1 || tx->shape[tx->ndim - 1] == 0) {
        lb_error(LB_ERR_SHAPE, "layer_norm: x %s needs a non-empty last (feature) dim [..., D]",
                 lb_tensor_describe(tx, sx, sizeof sx));
        return NULL;
    }
    int64_t d = tx->shape[tx->ndim - 1], rows = lb_tensor_numel(tx) / d;
    for (int k = 1; k < n_in; k++) {
        const lb_tensor *tp = in[k]->value;
        if (tp->ndim != 1 || tp->shape[0] != d) {
            lb_error(LB_ERR_SHAPE, "layer_norm: %s %s must be [D] = [%lld] to match x %s (one entry per feature)",
                     in[k] == weight ? "weight" : "bias", lb_tensor_describe(tp, sp, sizeof sp), (long long)d,
                     lb_tensor_describe(tx, sx, sizeof sx));
            return NULL;
        }
    }
    if (!(eps >= 0) || !isfinite(eps)) {
        lb_error(LB_ERR_VALUE, "layer_norm: eps %g for x %s must be finite and >= 0 (PyTorch uses 1e-5)", eps,
                 lb_tensor_describe(tx, sx, sizeof sx));
        return NULL;
    }
    lb_tensor *out = lb_tensor_empty_like(tx); /* every element written below */
    lb_tensor *mean = lb_tensor_empty(LB_FLOAT64, tx->ndim - 1, tx->shape);
    lb_tensor *rstd = lb_tensor_empty(LB_FLOAT64, tx->ndim - 1, tx->shape);
    if (!out || !mean || !rstd) {
        lb_tensor_free(out);
        lb_tensor_free(mean);
        lb_tensor_free(rstd);
        return NULL;
    }
    double *pm = lb_tensor_data(mean), *pr = lb_tensor_data(rstd);
    LB_DISPATCH(tx->dtype, T, {
        const T *px = lb_tensor_data(tx);
        const T *pw = weight ? lb_tensor_data(weight->value) : NULL;
        const T *pb = bias ? lb_tensor_data(bias->value) : NULL;
        T *py = lb_tensor_data(out);
        int nt = lb_threads_for(rows * d, LB_GRAIN_ELEMENTS); /* rows are independent */
        _Pragma("omp parallel for schedule(static) num_threads(nt) if (nt > 1)")
        for (int64_t r = 0; r < rows; r++) {
            const T *xr = px + r * d;
            T *yr = py + r * d;
            double mu = 0, var = 0;
            for (int64_t j = 0; j < d; j++)
                mu += (double)xr[j];
            mu /= (double)d;
            for (int64_t j = 0; j < d; j++)
                var += ((double)xr[j] - mu) * ((double)xr[j] - mu);
            var /= (double)d;
            double rs = 1.0 / sqrt(var + eps);
            for (int64_t j = 0; j < d; j++) {
                double y = ((double)xr[j] - mu) * rs;
                if (pw)
                    y *= (double)pw[j];
                if (pb)
                    y += (double)pb[j];
                yr[j] = (T)y;
            }
            pm[r] = mu;
            pr[r] = rs;
        }
    });
    lb_var *v = lb_graph_record(g, LB_OP_LAYER_NORM, out, n_in, in);
    if (v && v->requires_grad) {
        v->saved[0] = mean;
        v->saved[1] = rstd;
        v->attr_i[0] = weight != NULL;
        v->attr_i[1] = bias != NULL;
        v->attr_f[0] = eps;
    } else {
        lb_tensor_free(mean);
        lb_tensor_free(rstd);
    }
    return v;
}

/* Rows per partial sum of dweight and dbias. */
enum { LN_ROW_BLOCK = 256 };

/* With xhat = (x - mean) * rstd and gxhat = dy * weight (dy without a weight):
 *   dx_j     += rstd * (gxhat_j - mean_k(gxhat_k) - xhat_j * mean_k(gxhat_k * xhat_k))
 *   dweight_j += sum_r dy_rj * xhat_rj,   dbias_j += sum_r dy_rj
 *   x, dy, dx: [R, D]; weight, bias and their grads: [D]; row sums in double. */
lb_status lb_layer_norm_backward(lb_var *node)
{
    lb_var *x = node->inputs[0];
    lb_var *weight = node->attr_i[0] ? node->inputs[1] : NULL;
    lb_var *bias = node->attr_i[1] ? node->inputs[1 + (node->attr_i[0] ? 1 : 0)] : NULL;
    const lb_tensor *tx = x->value;
    int64_t d = tx->shape[tx->ndim - 1], rows = lb_tensor_numel(tx) / d;
    const double *pm = lb_tensor_data(node->saved[0]), *pr = lb_tensor_data(node->saved[1]);
    lb_tensor *gx = x->requires_grad ? lb_grad_buffer(x) : NULL;
    lb_tensor *gw = weight && weight->requires_grad ? lb_grad_buffer(weight) : NULL;
    lb_tensor *gb = bias && bias->requires_grad ? lb_grad_buffer(bias) : NULL;
    if ((x->requires_grad && !gx) || (weight && weight->requires_grad && !gw) || (bias && bias->requires_grad && !gb))
        return lb_last_status();
    /* dweight and dbias sum over rows: per block of LN_ROW_BLOCK rows in double, then the
     * blocks in order, so the sums do not depend on the thread count. */
    int64_t n_blocks = (rows + LN_ROW_BLOCK - 1) / LN_ROW_BLOCK;
    int param_grads = gw || gb;
    double *acc = param_grads ? calloc((size_t)(n_blocks * 2 * d), sizeof *acc) : NULL;
    if (param_grads && !acc)
        return lb_error(LB_ERR_MEMORY, "layer_norm backward: out of memory for %lld x %lld partial sums",
                        (long long)n_blocks, (long long)d);
    int nt = lb_threads_for(rows * d, LB_GRAIN_ELEMENTS / 2);
    LB_DISPATCH(tx->dtype, T, {
        const T *px = lb_tensor_data(tx), *pdy = lb_tensor_data(node->grad);
        const T *pw = weight ? lb_tensor_data(weight->value) : NULL;
        T *pdx = gx ? lb_tensor_data(gx) : NULL;
        _Pragma("omp parallel for schedule(static) num_threads(nt) if (nt > 1)")
        for (int64_t blk = 0; blk < n_blocks; blk++) {
            double *acc_w = param_grads ? acc + blk * 2 * d : NULL, *acc_b = param_grads ? acc_w + d : NULL;
            int64_t r_end = (blk + 1) * LN_ROW_BLOCK < rows ? (blk + 1) * LN_ROW_BLOCK : rows;
            for (int64_t r = blk * LN_ROW_BLOCK; r < r_end; r++) {
                const T *xr = px + r * d, *gr = pdy + r * d;
                double mu = pm[r], rs = pr[r];
                if (pdx) {
                    double sum_g = 0, sum_gx = 0;
                    for (int64_t j = 0; j < d; j++) {
                        double gh = (double)gr[j] * (pw ? (double)pw[j] : 1.0);
                        sum_g += gh;
                        sum_gx += gh * ((double)xr[j] - mu) * rs;
                    }
                    double mean_g = sum_g / (double)d, mean_gx = sum_gx / (double)d;
                    T *xg = pdx + r * d;
                    for (int64_t j = 0; j < d; j++) {
                        double gh = (double)gr[j] * (pw ? (double)pw[j] : 1.0);
                        double xhat = ((double)xr[j] - mu) * rs;
                        xg[j] += (T)(rs * (gh - mean_g - xhat * mean_gx));
                    }
                }
                for (int64_t j = 0; j < d && param_grads; j++) {
                    acc_w[j] += (double)gr[j] * ((double)xr[j] - mu) * rs;
                    acc_b[j] += (double)gr[j];
                }
            }
        }
        for (int64_t j = 0; j < d && param_grads; j++) {
            double sw = 0, sb = 0;
            for (int64_t blk = 0; blk < n_blocks; blk++) {
                sw += acc[blk * 2 * d + j];
                sb += acc[blk * 2 * d + d + j];
            }
            if (gw)
                ((T *)lb_tensor_data(gw))[j] += (T)sw;
            if (gb)
                ((T *)lb_tensor_data(gb))[j] += (T)sb;
        }
    });
    free(acc);
    return LB_OK;
}

/* ---- embedding ----
 * weight: [V, D], ids: int32 [*S] -> out: [*S, D], out[s] = weight[ids[s]]
 * ctx: a copy of the ids (int32, numel(S) entries). */

lb_var *lb_embedding(lb_graph *g, lb_var *weight, const int32_t *ids, int ndim, const int64_t *shape)
{
    char sw[128], ss[128];
    if (lb_check_inputs("embedding", g, 1, &weight) != LB_OK)
        return NULL;
    const lb_tensor *tw = weight->value;
    if (tw->ndim != 2) {
        lb_error(LB_ERR_SHAPE, "embedding: weight %s must be [V, D] (one row of D features per id)",
                 lb_tensor_describe(tw, sw, sizeof sw));
        return NULL;
    }
    if (ndim < 0 || ndim > LB_MAX_DIMS - 1 || (ndim > 0 && !shape)) {
        lb_error(LB_ERR_SHAPE, "embedding: ids need 0 to %d dims (the output adds D), got %d%s", LB_MAX_DIMS - 1, ndim,
                 ndim > 0 && !shape ? " with a NULL shape" : "");
        return NULL;
    }
    for (int k = 0; k < ndim; k++)
        if (shape[k] < 0) {
            lb_error(LB_ERR_SHAPE, "embedding: ids shape %s has a negative size", lb_shape_str(ndim, shape, ss, sizeof ss));
            return NULL;
        }
    int64_t n = shape_numel(ndim, shape), vocab = tw->shape[0], d = tw->shape[1];
    if (n > 0 && !ids) {
        lb_error(LB_ERR_VALUE, "embedding: ids is NULL but its shape %s has %lld entries",
                 lb_shape_str(ndim, shape, ss, sizeof ss), (long long)n);
        return NULL;
    }
    for (int64_t p = 0; p < n; p++) {
        if (ids[p] >= 0 && ids[p] < vocab)
            continue;
        int64_t idx[LB_MAX_DIMS] = {0}, rem = p;
        for (int k = ndim - 1; k >= 0; k--) {
            idx[k] = rem % shape[k];
            rem /= shape[k];
        }
        char si[128];
        lb_error(LB_ERR_VALUE,
                 "embedding: ids%s (flat position %lld of ids %s) = %d is outside [0, V = %lld) for weight %s (ids "
                 "must be below the vocabulary size; check the tokenizer against the embedding table)",
                 lb_shape_str(ndim, idx, si, sizeof si), (long long)p, lb_shape_str(ndim, shape, ss, sizeof ss),
                 (int)ids[p], (long long)vocab, lb_tensor_describe(tw, sw, sizeof sw));
        return NULL;
    }
    int64_t out_shape[LB_MAX_DIMS];
    for (int k = 0; k < ndim; k++)
        out_shape[k] = shape[k];
    out_shape[ndim] = d;
    lb_tensor *out = lb_tensor_zeros(tw->dtype, ndim + 1, out_shape);
    if (!out)
        return NULL;
    size_t row_bytes = (size_t)d * lb_dtype_size(tw->dtype);
    const char *pw = lb_tensor_data(tw);
    char *po = lb_tensor_data(out);
    for (int64_t p = 0; p < n; p++)
        memcpy(po + (size_t)p * row_bytes, pw + (size_t)ids[p] * row_bytes, row_bytes);
    lb_var *v = lb_graph_record(g, LB_OP_EMBEDDING, out, 1, &weight);
    if (v && v->requires_grad && n > 0) {
        int32_t *copy = malloc((size_t)n * sizeof *copy);
        if (!copy) {
            lb_error(LB_ERR_MEMORY, "embedding: out of memory saving %lld ids", (long long)n);
            return NULL;
        }
        memcpy(copy, ids, (size_t)n * sizeof *copy);
        v->ctx = copy;
        v->ctx_free = free;
    }
    if (v)
        v->attr_i[0] = n;
    return v;
}

/* dweight[ids[s]] += dout[s] for every position s: repeated ids accumulate.
 *   dout: [N, D], dweight: [V, D] */
lb_status lb_embedding_backward(lb_var *node)
{
    lb_var *weight = node->inputs[0];
    if (!weight->requires_grad)
        return LB_OK;
    lb_tensor *gw = lb_grad_buffer(weight);
    if (!gw)
        return lb_last_status();
    const int32_t *ids = node->ctx;
    int64_t n = node->attr_i[0], d = weight->value->shape[1];
    LB_DISPATCH(gw->dtype, T, {
        const T *pdy = lb_tensor_data(node->grad);
        T *pdw = lb_tensor_data(gw);
        for (int64_t p = 0; p < n; p++) {
            T *row = pdw + (int64_t)ids[p] * d;
            const T *gr = pdy + p * d;
            for (int64_t j = 0; j < d; j++)
                row[j] += gr[j];
        }
    });
    return LB_OK;
}

/* ---- dropout ----
 * x: [*] -> y: [*], y = keep * x / (1 - p) with keep ~ Bernoulli(1 - p), one uniform
 * draw per element in row-major order (keep when u >= p).
 * ctx: the keep mask (uint8, numel entries), NULL for the identity; attr_f[0] = 1/(1-p). */

lb_var *lb_dropout(lb_graph *g, lb_var *x, double p, int training, lb_rng *rng)
{
    char sx[128];
    if (lb_check_inputs("dropout", g, 1, &x) != LB_OK)
        return NULL;
    if (!(p >= 0 && p < 1)) {
        lb_error(LB_ERR_VALUE, "dropout: p = %g for x %s must be in [0, 1) (the probability of zeroing an element)", p,
                 lb_tensor_describe(x->value, sx, sizeof sx));
        return NULL;
    }
    if (!training || p == 0) {
        lb_var *v = lb_graph_record(g, LB_OP_DROPOUT, lb_tensor_copy(x->value, x->value->dtype), 1, &x);
        if (v)
            v->attr_f[0] = 1.0;
        return v;
    }
    if (!rng) {
        lb_error(LB_ERR_VALUE, "dropout: training with p = %g on x %s needs a random generator, but rng is NULL "
                               "(pass the trainer's lb_rng, seeded with lb_rng_seed)",
                 p, lb_tensor_describe(x->value, sx, sizeof sx));
        return NULL;
    }
    int64_t n = lb_tensor_numel(x->value);
    lb_tensor *out = lb_tensor_zeros_like(x->value);
    unsigned char *keep = malloc((size_t)n + 1);
    if (!out || !keep) {
        lb_tensor_free(out);
        free(keep);
        if (out)
            lb_error(LB_ERR_MEMORY, "dropout: out of memory for a mask of %lld elements", (long long)n);
        return NULL;
    }
    double scale = 1.0 / (1.0 - p);
    for (int64_t i = 0; i < n; i++)
        keep[i] = lb_rng_uniform(rng) >= p;
    LB_DISPATCH(out->dtype, T, {
        const T *px = lb_tensor_data(x->value);
        T *py = lb_tensor_data(out);
        for (int64_t i = 0; i < n; i++)
            py[i] = keep[i] ? (T)((double)px[i] * scale) : (T)0;
    });
    lb_var *v = lb_graph_record(g, LB_OP_DROPOUT, out, 1, &x);
    if (v && v->requires_grad) {
        v->ctx = keep;
        v->ctx_free = free;
    } else {
        free(keep);
    }
    if (v)
        v->attr_f[0] = scale;
    return v;
}

/* dx += dy * keep / (1 - p), or dx += dy for the identity.  dy, dx: [*] */
lb_status lb_dropout_backward(lb_var *node)
{
    lb_var *x = node->inputs[0];
    if (!x->requires_grad)
        return LB_OK;
    const unsigned char *keep = node->ctx;
    if (!keep)
        return lb_accumulate_grad(x, node->grad);
    lb_tensor *gx = lb_grad_buffer(x);
    if (!gx)
        return lb_last_status();
    int64_t n = lb_tensor_numel(gx);
    double scale = node->attr_f[0];
    LB_DISPATCH(gx->dtype, T, {
        const T *pdy = lb_tensor_data(node->grad);
        T *pdx = lb_tensor_data(gx);
        for (int64_t i = 0; i < n; i++)
            if (keep[i])
                pdx[i] += (T)((double)pdy[i] * scale);
    });
    return LB_OK;
}

/* ---- cross-entropy from logits ----
 * logits: [R, C] (any leading dims), targets: int32 [R] -> loss: []
 * loss = (1 / M) sum over the M rows with targets[r] != ignore_index of
 *        logsumexp(logits[r]) - logits[r, targets[r]],  0 when M == 0.
 * saved: lse [R] (float64; 0 on ignored rows); ctx: a copy of the targets;
 * attr_f[0] = M, attr_i[0] = ignore_index. */

lb_var *lb_cross_entropy(lb_graph *g, lb_var *logits, const int32_t *targets, int64_t ignore_index)
{
    char sl[128];
    if (lb_check_inputs("cross_entropy", g, 1, &logits) != LB_OK)
        return NULL;
    const lb_tensor *tl = logits->value;
    if (tl->ndim < 1 || tl->shape[tl->ndim - 1] == 0) {
        lb_error(LB_ERR_SHAPE, "cross_entropy: logits %s need a non-empty last (class) dim [..., C]",
                 lb_tensor_describe(tl, sl, sizeof sl));
        return NULL;
    }
    int64_t c = tl->shape[tl->ndim - 1], rows = lb_tensor_numel(tl) / c;
    if (rows > 0 && !targets) {
        lb_error(LB_ERR_VALUE, "cross_entropy: targets is NULL but logits %s need %lld of them",
                 lb_tensor_describe(tl, sl, sizeof sl), (long long)rows);
        return NULL;
    }
    int64_t counted = 0;
    for (int64_t r = 0; r < rows; r++) {
        if ((int64_t)targets[r] == ignore_index)
            continue;
        if (targets[r] < 0 || targets[r] >= c) {
            lb_error(LB_ERR_VALUE,
                     "cross_entropy: targets[%lld] = %d is outside [0, C = %lld) for logits %s and is not the "
                     "ignore_index %lld (a target is a class index; mark padding with ignore_index)",
                     (long long)r, (int)targets[r], (long long)c, lb_tensor_describe(tl, sl, sizeof sl),
                     (long long)ignore_index);
            return NULL;
        }
        counted++;
    }
    int64_t lse_shape[1] = {rows};
    lb_tensor *lse = lb_tensor_zeros(LB_FLOAT64, 1, lse_shape);
    if (!lse)
        return NULL;
    double *pl = lb_tensor_data(lse), total = 0;
    LB_DISPATCH(tl->dtype, T, {
        const T *px = lb_tensor_data(tl);
        for (int64_t r = 0; r < rows; r++) {
            if ((int64_t)targets[r] == ignore_index)
                continue;
            const T *xr = px + r * c;
            double mx = (double)xr[0], sum = 0;
            for (int64_t j = 1; j < c; j++)
                mx = (double)xr[j] > mx ? (double)xr[j] : mx;
            for (int64_t j = 0; j < c; j++)
                sum += exp((double)xr[j] - mx);
            pl[r] = mx + log(sum);
            total += pl[r] - (double)xr[targets[r]];
        }
    });
    lb_var *v = lb_graph_record(g, LB_OP_CROSS_ENTROPY, scalar_of(tl->dtype, counted ? total / (double)counted : 0.0),
                                1, &logits);
    if (v && v->requires_grad && counted > 0) {
        int32_t *copy = malloc((size_t)rows * sizeof *copy);
        if (!copy) {
            lb_tensor_free(lse);
            lb_error(LB_ERR_MEMORY, "cross_entropy: out of memory saving %lld targets", (long long)rows);
            return NULL;
        }
        memcpy(copy, targets, (size_t)rows * sizeof *copy);
        v->ctx = copy;
        v->ctx_free = free;
        v->saved[0] = lse;
    } else {
        lb_tensor_free(lse);
    }
    if (v) {
        v->attr_f[0] = (double)counted;
        v->attr_i[0] = ignore_index;
    }
    return v;
}

/* On each counted row: dlogits_j += dloss / M * (softmax(logits)_j - [j == target]),
 * softmax_j = exp(logits_j - lse); ignored rows (and M == 0) get 0.  logits: [R, C] */
lb_status lb_cross_entropy_backward(lb_var *node)
{
    lb_var *logits = node->inputs[0];
    if (!logits->requires_grad)
        return LB_OK;
    lb_tensor *gl = lb_grad_buffer(logits);
    if (!gl)
        return lb_last_status();
    double counted = node->attr_f[0];
    if (counted == 0)
        return LB_OK; /* every target ignored: the loss is the constant 0 */
    const lb_tensor *tl = logits->value;
    const int32_t *targets = node->ctx;
    const double *pl = lb_tensor_data(node->saved[0]);
    int64_t c = tl->shape[tl->ndim - 1], rows = lb_tensor_numel(tl) / c, ignore_index = node->attr_i[0];
    double coef = lb_tensor_flat(node->grad, 0) / counted;
    LB_DISPATCH(tl->dtype, T, {
        const T *px = lb_tensor_data(tl);
        T *pdx = lb_tensor_data(gl);
        for (int64_t r = 0; r < rows; r++) {
            if ((int64_t)targets[r] == ignore_index)
                continue;
            const T *xr = px + r * c;
            T *gr = pdx + r * c;
            for (int64_t j = 0; j < c; j++)
                gr[j] += (T)(coef * (exp((double)xr[j] - pl[r]) - (j == targets[r] ? 1.0 : 0.0)));
        }
    });
    return LB_OK;
}

/* ---- mean squared error ----
 * pred: [*], target: [*] (same shape) -> loss: [], loss = mean((pred - target)^2) */

lb_var *lb_mse(lb_graph *g, lb_var *pred, lb_var *target)
{
    char sp[128], st[128];
    lb_var *in[2] = {pred, target};
    if (lb_check_inputs("mse", g, 2, in) != LB_OK)
        return NULL;
    if (!lb_tensor_same_shape(pred->value, target->value)) {
        lb_error(LB_ERR_SHAPE, "mse: pred %s and target %s must have the same shape (reshape one; mse does not "
                               "broadcast)",
                 lb_tensor_describe(pred->value, sp, sizeof sp), lb_tensor_describe(target->value, st, sizeof st));
        return NULL;
    }
    int64_t n = lb_tensor_numel(pred->value);
    if (n == 0) {
        lb_error(LB_ERR_SHAPE, "mse: pred %s is empty: the mean of no elements is undefined",
                 lb_tensor_describe(pred->value, sp, sizeof sp));
        return NULL;
    }
    double total = 0;
    LB_DISPATCH(pred->value->dtype, T, {
        const T *pp = lb_tensor_data(pred->value), *pt = lb_tensor_data(target->value);
        for (int64_t i = 0; i < n; i++) {
            double diff = (double)pp[i] - (double)pt[i];
            total += diff * diff;
        }
    });
    return lb_graph_record(g, LB_OP_MSE, scalar_of(pred->value->dtype, total / (double)n), 2, in);
}

/* dpred += 2 dloss (pred - target) / n; dtarget -= the same.  pred, target: [*] */
lb_status lb_mse_backward(lb_var *node)
{
    lb_var *pred = node->inputs[0], *target = node->inputs[1];
    int64_t n = lb_tensor_numel(pred->value);
    double coef = 2.0 * lb_tensor_flat(node->grad, 0) / (double)n;
    lb_var *vars[2] = {pred, target};
    double sign[2] = {1.0, -1.0};
    for (int k = 0; k < 2; k++) {
        if (!vars[k]->requires_grad)
            continue;
        lb_tensor *gv = lb_grad_buffer(vars[k]);
        if (!gv)
            return lb_last_status();
        LB_DISPATCH(gv->dtype, T, {
            const T *pp = lb_tensor_data(pred->value), *pt = lb_tensor_data(target->value);
            T *pg = lb_tensor_data(gv);
            for (int64_t i = 0; i < n; i++)
                pg[i] += (T)(sign[k] * coef * ((double)pp[i] - (double)pt[i]));
        });
    }
    return LB_OK;
}

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
    LB_GRAD_BUFFER_OR_RETURN(gw, weight);
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

/* The same with the caller's keep mask (nonzero = keep), e.g. another framework's
 * draw: y = keep * x / (1 - p). keep: [*], x's shape. */
lb_var *lb_dropout_mask(lb_graph *g, lb_var *x, const lb_tensor *keep, double p)
{
    char sx[128], sk[128];
    if (lb_check_inputs("dropout_mask", g, 1, &x) != LB_OK)
        return NULL;
    if (!(p >= 0 && p < 1)) {
        lb_error(LB_ERR_VALUE, "dropout_mask: p = %g for x %s must be in [0, 1) (the probability of zeroing an element)",
                 p, lb_tensor_describe(x->value, sx, sizeof sx));
        return NULL;
    }
    if (!keep || !lb_tensor_same_shape(keep, x->value)) {
        lb_error(LB_ERR_SHAPE, "dropout_mask: the keep mask %s must have x's shape %s (nonzero = keep)",
                 keep ? lb_tensor_describe(keep, sk, sizeof sk) : "NULL", lb_tensor_describe(x->value, sx, sizeof sx));
        return NULL;
    }
    int64_t n = lb_tensor_numel(x->value);
    lb_tensor *out = lb_tensor_zeros_like(x->value);
    unsigned char *k = malloc((size_t)n + 1);
    if (!out || !k) {
        lb_tensor_free(out);
        free(k);
        lb_error(LB_ERR_MEMORY, "dropout_mask: out of memory for a mask of %lld elements", (long long)n);
        return NULL;
    }
    double scale = 1.0 / (1.0 - p);
    for (int64_t i = 0; i < n; i++)
        k[i] = lb_tensor_flat(keep, i) != 0;
    LB_DISPATCH(out->dtype, T, {
        const T *px = lb_tensor_data(x->value);
        T *py = lb_tensor_data(out);
        for (int64_t i = 0; i < n; i++)
            py[i] = k[i] ? (T)((double)px[i] * scale) : (T)0;
    });
    lb_var *v = lb_graph_record(g, LB_OP_DROPOUT_MASK, out, 1, &x);
    if (v && v->requires_grad) {
        v->ctx = k;
        v->ctx_free = free;
    } else {
        free(k);
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
    LB_GRAD_BUFFER_OR_RETURN(gx, x);
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

/* ---- cross-entropy from logits, and the negative log-likelihood ----
 * input: [R, C] (any leading dims; logits for cross_entropy, log-probabilities for
 * nll_loss), targets: int32 [R]. With w the class weights (1 without), eps the label
 * smoothing and a_j = lse - input_j (cross_entropy; lse = logsumexp of the row) or
 * a_j = -input_j (nll_loss), a row with target t != ignore_index has
 *   loss_r = (1 - eps) w_t a_t + (eps / C) sum_j w_j a_j,
 * an ignored row 0. reduction none: [R] (the leading dims); sum: sum_r loss_r; mean:
 * sum_r loss_r / sum_{counted r} w_{t_r} (0 when nothing is counted).
 * saved: [0] lse [R] (float64; cross_entropy), [1] the weights [C] (float64) or NULL;
 * ctx: a copy of the targets; attr_f: 0 denominator of the mean (1 otherwise),
 * 1 eps; attr_i: 0 ignore_index, 1 reduction. */

void lb_loss_options_default(lb_loss_options *opt)
{
    LB_CHECK_ARG(opt);
    memset(opt, 0, sizeof *opt);
    opt->ignore_index = -100; /* PyTorch's default */
    opt->reduction = LB_REDUCTION_MEAN;
}

static lb_var *class_loss(lb_graph *g, lb_op_kind op, lb_var *input, const int32_t *targets,
                          const lb_loss_options *options)
{
    const char *name = lb_op_name(op);
    char sl[128], sw[128];
    lb_loss_options o;
    if (options)
        o = *options;
    else
        lb_loss_options_default(&o);
    if (lb_check_inputs(name, g, 1, &input) != LB_OK)
        return NULL;
    const lb_tensor *tl = input->value;
    if (tl->ndim < 1 || tl->shape[tl->ndim - 1] == 0) {
        lb_error(LB_ERR_SHAPE, "%s: input %s needs a non-empty last (class) dim [..., C]", name,
                 lb_tensor_describe(tl, sl, sizeof sl));
        return NULL;
    }
    int64_t c = tl->shape[tl->ndim - 1], rows = lb_tensor_numel(tl) / c;
    if (o.reduction != LB_REDUCTION_MEAN && o.reduction != LB_REDUCTION_SUM && o.reduction != LB_REDUCTION_NONE) {
        lb_error(LB_ERR_VALUE, "%s: reduction = %d is not LB_REDUCTION_MEAN, _SUM or _NONE", name, (int)o.reduction);
        return NULL;
    }
    if (!(o.label_smoothing >= 0 && o.label_smoothing <= 1)) {
        lb_error(LB_ERR_VALUE, "%s: label_smoothing = %g must be in [0, 1]", name, o.label_smoothing);
        return NULL;
    }
    if (o.weight && (o.weight->ndim != 1 || o.weight->shape[0] != c)) {
        lb_error(LB_ERR_SHAPE, "%s: weight %s must be [C] = [%lld] for input %s (one weight per class)", name,
                 lb_tensor_describe(o.weight, sw, sizeof sw), (long long)c, lb_tensor_describe(tl, sl, sizeof sl));
        return NULL;
    }
    if (rows > 0 && !targets) {
        lb_error(LB_ERR_VALUE, "%s: targets is NULL but input %s needs %lld of them", name,
                 lb_tensor_describe(tl, sl, sizeof sl), (long long)rows);
        return NULL;
    }
    for (int64_t r = 0; r < rows; r++)
        if ((int64_t)targets[r] != o.ignore_index && (targets[r] < 0 || targets[r] >= c)) {
            lb_error(LB_ERR_VALUE,
                     "%s: targets[%lld] = %d is outside [0, C = %lld) for input %s and is not the "
                     "ignore_index %lld (a target is a class index; mark padding with ignore_index)",
                     name, (long long)r, (int)targets[r], (long long)c, lb_tensor_describe(tl, sl, sizeof sl),
                     (long long)o.ignore_index);
            return NULL;
        }
    int64_t cshape[1] = {c}, rshape[1] = {rows};
    lb_tensor *w = lb_tensor_zeros(LB_FLOAT64, 1, cshape), *lse = lb_tensor_zeros(LB_FLOAT64, 1, rshape);
    lb_tensor *per_row = lb_tensor_zeros(LB_FLOAT64, 1, rshape);
    lb_tensor *out = NULL;
    if (w && o.weight)
        lb_tensor_copy_into(w, o.weight);
    else if (w)
        lb_tensor_fill(w, 1.0);
    if (!w || !lse || !per_row) {
        lb_tensor_free(w);
        lb_tensor_free(lse);
        lb_tensor_free(per_row);
        return NULL;
    }
    const double *pw = lb_tensor_data(w), eps = o.label_smoothing;
    double *pl = lb_tensor_data(lse), *pr = lb_tensor_data(per_row), total = 0, denom = 0;
    LB_DISPATCH(tl->dtype, T, {
        const T *px = lb_tensor_data(tl);
        for (int64_t r = 0; r < rows; r++) {
            int32_t t = targets[r];
            if ((int64_t)t == o.ignore_index)
                continue;
            const T *xr = px + r * c;
            double m = (double)xr[0], sum = 0, smooth = 0;
            if (op == LB_OP_CROSS_ENTROPY) {
                for (int64_t j = 1; j < c; j++)
                    m = (double)xr[j] > m ? (double)xr[j] : m;
                for (int64_t j = 0; j < c; j++)
                    sum += exp((double)xr[j] - m);
                pl[r] = m + log(sum);
            }
            if (eps > 0)
                for (int64_t j = 0; j < c; j++)
                    smooth += pw[j] * (pl[r] - (double)xr[j]);
            pr[r] = (1 - eps) * pw[t] * (pl[r] - (double)xr[t]) + eps / (double)c * smooth;
            total += pr[r];
            denom += pw[t];
        }
    });
    if (o.reduction == LB_REDUCTION_NONE) {
        out = lb_tensor_copy(per_row, tl->dtype);
        lb_tensor *shaped = out ? lb_tensor_reshape(out, tl->ndim - 1, tl->shape) : NULL;
        lb_tensor_free(out);
        out = shaped ? lb_tensor_copy(shaped, tl->dtype) : NULL;
        lb_tensor_free(shaped);
    } else {
        double value = o.reduction == LB_REDUCTION_SUM ? total : denom != 0 ? total / denom : 0.0;
        out = lb_tensor_scalar(tl->dtype, value);
    }
    lb_tensor_free(per_row);
    lb_var *v = out ? lb_graph_record(g, op, out, 1, &input) : NULL;
    int32_t *copy = v && v->requires_grad && rows > 0 ? malloc((size_t)rows * sizeof *copy) : NULL;
    if (copy) {
        memcpy(copy, targets, (size_t)rows * sizeof *copy);
        v->ctx = copy;
        v->ctx_free = free;
        v->saved[0] = lse;
        v->saved[1] = w;
        lse = w = NULL;
    } else if (v && v->requires_grad && rows > 0) {
        lb_error(LB_ERR_MEMORY, "%s: out of memory saving %lld targets", name, (long long)rows);
        v = NULL;
    }
    lb_tensor_free(lse);
    lb_tensor_free(w);
    if (v) {
        v->attr_f[0] = o.reduction == LB_REDUCTION_MEAN ? denom : 1.0;
        v->attr_f[1] = eps;
        v->attr_i[0] = o.ignore_index;
        v->attr_i[1] = o.reduction;
    }
    return v;
}

lb_var *lb_cross_entropy(lb_graph *g, lb_var *logits, const int32_t *targets, int64_t ignore_index)
{
    lb_loss_options o;
    lb_loss_options_default(&o);
    o.ignore_index = ignore_index;
    return class_loss(g, LB_OP_CROSS_ENTROPY, logits, targets, &o);
}

lb_var *lb_cross_entropy_ex(lb_graph *g, lb_var *logits, const int32_t *targets, const lb_loss_options *options)
{
    return class_loss(g, LB_OP_CROSS_ENTROPY, logits, targets, options);
}

lb_var *lb_nll_loss(lb_graph *g, lb_var *log_probs, const int32_t *targets, const lb_loss_options *options)
{
    return class_loss(g, LB_OP_NLL_LOSS, log_probs, targets, options);
}

/* On each counted row r with coefficient k_r (dy_r, or dy / denominator):
 *   d input_j += k_r [ (1 - eps) w_t (p_j - [j == t]) + (eps / C) (W p_j - w_j) ]
 * with p = softmax(input) and W = sum_j w_j for cross_entropy, and p = 0 for
 * nll_loss (input_j enters a_j with slope -1 there). Ignored rows get 0. */
lb_status lb_class_loss_backward(lb_var *node)
{
    lb_var *input = node->inputs[0];
    LB_GRAD_BUFFER_OR_RETURN(gl, input);
    const lb_tensor *tl = input->value;
    int64_t c = tl->shape[tl->ndim - 1], rows = lb_tensor_numel(tl) / c, ignore_index = node->attr_i[0];
    double denom = node->attr_f[0], eps = node->attr_f[1];
    if (rows == 0 || denom == 0)
        return LB_OK; /* nothing counted: the loss is the constant 0 */
    const int32_t *targets = node->ctx;
    const double *pl = lb_tensor_data(node->saved[0]), *pw = lb_tensor_data(node->saved[1]);
    int softmax = node->op == LB_OP_CROSS_ENTROPY, per_row = node->attr_i[1] == LB_REDUCTION_NONE;
    double w_all = 0;
    for (int64_t j = 0; j < c; j++)
        w_all += pw[j];
    LB_DISPATCH(tl->dtype, T, {
        const T *px = lb_tensor_data(tl), *dy = lb_tensor_data(node->grad);
        T *pdx = lb_tensor_data(gl);
        for (int64_t r = 0; r < rows; r++) {
            int32_t t = targets[r];
            if ((int64_t)t == ignore_index)
                continue;
            double k = (per_row ? (double)dy[r] : (double)dy[0]) / denom;
            double on_p = softmax ? (1 - eps) * pw[t] + eps / (double)c * w_all : 0;
            const T *xr = px + r * c;
            T *gr = pdx + r * c;
            for (int64_t j = 0; j < c; j++) {
                double p = softmax ? exp((double)xr[j] - pl[r]) : 0;
                gr[j] += (T)(k * (on_p * p - (j == t ? (1 - eps) * pw[t] : 0) - eps / (double)c * pw[j]));
            }
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
        LB_GRAD_BUFFER_OR_RETURN(gv, vars[k]);
        LB_DISPATCH(gv->dtype, T, {
            const T *pp = lb_tensor_data(pred->value), *pt = lb_tensor_data(target->value);
            T *pg = lb_tensor_data(gv);
            for (int64_t i = 0; i < n; i++)
                pg[i] += (T)(sign[k] * coef * ((double)pp[i] - (double)pt[i]));
        });
    }
    return LB_OK;
}

/* ---- rotary position embedding ----
 * x: [..., P, d], cos and sin: broadcastable to [..., P, h] (h = r / 2, r <= d the
 * rotated width). Pair k of a row is (a, b) = (k, k + h) (halves) or (2k, 2k + 1)
 * (interleaved); y_a = x_a cos_k - x_b sin_k, y_b = x_b cos_k + x_a sin_k; features
 * r .. d-1 pass unchanged. saved: [0] cos, [1] sin expanded to [..., P, h];
 * attr_i[0] h, attr_i[1] layout. */

static void rotary_pair(int64_t k, int64_t h, int layout, int64_t *a, int64_t *b)
{
    *a = layout == LB_ROTARY_INTERLEAVED ? 2 * k : k;
    *b = layout == LB_ROTARY_INTERLEAVED ? 2 * k + 1 : k + h;
}

lb_var *lb_rotary_embed(lb_graph *g, lb_var *x, const lb_tensor *cos, const lb_tensor *sin, lb_rotary_layout layout)
{
    char sx[128], sc[128], ss[128];
    if (lb_check_inputs("rotary", g, 1, &x) != LB_OK)
        return NULL;
    const lb_tensor *tx = x->value;
    int nd = tx->ndim;
    if (layout != LB_ROTARY_HALVES && layout != LB_ROTARY_INTERLEAVED) {
        lb_error(LB_ERR_VALUE, "rotary: layout %d is neither LB_ROTARY_HALVES nor LB_ROTARY_INTERLEAVED", (int)layout);
        return NULL;
    }
    if (nd < 2 || !cos || !sin || cos->ndim < 1 || !lb_tensor_same_shape(cos, sin) ||
        2 * cos->shape[cos->ndim - 1] > tx->shape[nd - 1] || cos->shape[cos->ndim - 1] < 1) {
        lb_error(LB_ERR_SHAPE, "rotary: x %s must be [..., P, d] and cos %s, sin %s the same [..., P, h] with "
                               "1 <= h and 2h <= d (2h features are rotated)",
                 lb_tensor_describe(tx, sx, sizeof sx), cos ? lb_tensor_describe(cos, sc, sizeof sc) : "NULL",
                 sin ? lb_tensor_describe(sin, ss, sizeof ss) : "NULL");
        return NULL;
    }
    int64_t d = tx->shape[nd - 1], h = cos->shape[cos->ndim - 1], shape[LB_MAX_DIMS];
    memcpy(shape, tx->shape, (size_t)nd * sizeof *shape);
    shape[nd - 1] = h;
    lb_tensor *vc = lb_tensor_expand(cos, nd, shape), *vs = vc ? lb_tensor_expand(sin, nd, shape) : NULL;
    if (!vc || !vs) {
        lb_tensor_free(vc);
        lb_error(LB_ERR_SHAPE, "rotary: cos and sin %s do not broadcast to [..., P, h] = %s of x %s",
                 lb_tensor_describe(cos, sc, sizeof sc), lb_shape_str(nd, shape, ss, sizeof ss),
                 lb_tensor_describe(tx, sx, sizeof sx));
        return NULL;
    }
    lb_tensor *ec = lb_tensor_copy(vc, tx->dtype), *es = lb_tensor_copy(vs, tx->dtype);
    lb_tensor *out = lb_tensor_copy(tx, tx->dtype);
    lb_tensor_free(vc);
    lb_tensor_free(vs);
    if (!ec || !es || !out) {
        lb_tensor_free(ec);
        lb_tensor_free(es);
        lb_tensor_free(out);
        return NULL;
    }
    int64_t rows = lb_tensor_numel(tx) / d;
    LB_DISPATCH(tx->dtype, T, {
        const T *px = lb_tensor_data(tx), *pc = lb_tensor_data(ec), *ps = lb_tensor_data(es);
        T *py = lb_tensor_data(out);
        for (int64_t r = 0; r < rows; r++)
            for (int64_t k = 0; k < h; k++) {
                int64_t a, b;
                rotary_pair(k, h, layout, &a, &b);
                T xa = px[r * d + a], xb = px[r * d + b], c = pc[r * h + k], s = ps[r * h + k];
                py[r * d + a] = xa * c - xb * s;
                py[r * d + b] = xb * c + xa * s;
            }
    });
    lb_var *v = lb_graph_record(g, LB_OP_ROTARY, out, 1, &x);
    if (v && v->requires_grad) {
        v->saved[0] = ec;
        v->saved[1] = es;
        ec = es = NULL;
    }
    lb_tensor_free(ec);
    lb_tensor_free(es);
    if (v) {
        v->attr_i[0] = h;
        v->attr_i[1] = layout;
    }
    return v;
}

/* The transposed rotation: dx_a += dy_a cos + dy_b sin, dx_b += dy_b cos - dy_a sin;
 * unrotated features: dx += dy. */
lb_status lb_rotary_backward(lb_var *node)
{
    lb_var *x = node->inputs[0];
    LB_GRAD_BUFFER_OR_RETURN(gx, x);
    int64_t d = gx->shape[gx->ndim - 1], h = node->attr_i[0], rows = lb_tensor_numel(gx) / d;
    int layout = (int)node->attr_i[1];
    LB_DISPATCH(gx->dtype, T, {
        const T *dy = lb_tensor_data(node->grad), *pc = lb_tensor_data(node->saved[0]);
        const T *ps = lb_tensor_data(node->saved[1]);
        T *dx = lb_tensor_data(gx);
        for (int64_t r = 0; r < rows; r++) {
            for (int64_t j = 2 * h; j < d; j++)
                dx[r * d + j] += dy[r * d + j];
            for (int64_t k = 0; k < h; k++) {
                int64_t a, b;
                rotary_pair(k, h, layout, &a, &b);
                T ga = dy[r * d + a], gb = dy[r * d + b], c = pc[r * h + k], s = ps[r * h + k];
                dx[r * d + a] += ga * c + gb * s;
                dx[r * d + b] += gb * c - ga * s;
            }
        }
    });
    return LB_OK;
}

/* A model's outputs for the examples of a split (train/predict.h). */
#include "train/predict.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "autograd/autograd.h"
#include "layers/stream.h"

/* Copies a model output for examples [start, start + B): y [B, P, W], row of example i
 * at position t; per-position rows at t >= lengths[i] become NaN. */
static void store_rows(lb_predictions *pr, int64_t start, int64_t b, const lb_tensor *y, const int32_t *lengths)
{
    int64_t p = pr->positions, w = pr->width;
    for (int64_t i = 0; i < b; i++)
        for (int64_t t = 0; t < p; t++)
            for (int64_t k = 0; k < w; k++) {
                int past = p > 1 && lengths && t >= lengths[i];
                pr->output[((start + i) * p + t) * w + k] = past ? NAN : lb_tensor_flat(y, (i * p + t) * w + k);
            }
}

/* Events [t0, t0 + n) of every stream of `in`: the tokens into `tokens` [B, n], the
 * events each stream still has into counts [B], the features (a copy) into *feat. */
static lb_status chunk_input(const lb_model_input *in, int64_t t0, int64_t n, int32_t *tokens, int32_t *counts,
                             lb_tensor **feat)
{
    int64_t t = in->seq_len;
    *feat = NULL;
    for (int64_t i = 0; i < in->batch; i++) {
        int64_t left = (in->lengths ? in->lengths[i] : t) - t0;
        counts[i] = (int32_t)(left < 0 ? 0 : left > n ? n : left);
        if (in->tokens)
            memcpy(tokens + i * n, in->tokens + i * t + t0, (size_t)n * sizeof *tokens);
    }
    if (!in->features)
        return LB_OK;
    lb_tensor *v = lb_tensor_slice(in->features, 1, t0, t0 + n, 1);
    *feat = v ? lb_tensor_copy(v, v->dtype) : NULL;
    lb_tensor_free(v);
    return *feat ? LB_OK : lb_last_status();
}

/* Keeps a chunk's outputs y [B, n, W] of events [t0, t0 + n): every event's (per
 * position), or the output at each example's last event (per sequence). */
static void keep_chunk(lb_predictions *pr, int64_t start, const lb_model_input *in, int64_t t0, int64_t n,
                       const int32_t *counts, const lb_tensor *y)
{
    int64_t w = pr->width;
    for (int64_t i = 0; i < in->batch; i++)
        for (int64_t j = 0; j < counts[i]; j++) {
            int64_t pos = t0 + j, last = (in->lengths ? in->lengths[i] : in->seq_len) - 1;
            if (pr->positions == 1 && pos != last)
                continue;
            int64_t row = pr->positions == 1 ? 0 : pos;
            for (int64_t k = 0; k < w; k++)
                pr->output[((start + i) * pr->positions + row) * w + k] = lb_tensor_flat(y, (i * n + j) * w + k);
        }
}

/* The streaming path for one batch: every example is a stream, fed `chunk` events
 * at a time. */
static lb_status predict_incremental(lb_model *model, const lb_model_input *in, int64_t chunk,
                                     const lb_stream_options *opt, lb_predictions *pr, int64_t start)
{
    int64_t b = in->batch, t = in->seq_len;
    lb_model_state *s = lb_model_state_new(model, b, opt);
    int32_t *tokens = malloc((size_t)(b * chunk) * sizeof *tokens), *counts = malloc((size_t)b * sizeof *counts);
    lb_status st = s && tokens && counts ? LB_OK : lb_last_status();
    if (st == LB_OK && (!tokens || !counts))
        st = lb_error(LB_ERR_MEMORY, "predict: out of memory");
    for (int64_t t0 = 0; st == LB_OK && t0 < t; t0 += chunk) {
        int64_t n = t - t0 < chunk ? t - t0 : chunk;
        lb_tensor *feat;
        if ((st = chunk_input(in, t0, n, tokens, counts, &feat)) != LB_OK)
            break;
        lb_model_input ci = {b, n, in->tokens ? tokens : NULL, feat, counts};
        lb_tensor *y = lb_model_step_chunk(s, &ci); /* [B, n, W] or [B, n] */
        lb_tensor_free(feat);
        if (!y) {
            st = lb_last_status();
            break;
        }
        keep_chunk(pr, start, in, t0, n, counts, y);
        lb_tensor_free(y);
    }
    free(tokens);
    free(counts);
    lb_model_state_free(s);
    return st;
}

/* Examples [start, start + count) through the path `opt` names. */
static lb_status predict_batch(lb_model *model, lb_graph *g, const lb_dataset *data, const char *split, int64_t start,
                               int64_t count, const lb_predict_options *opt, lb_predictions *pr)
{
    const lb_model_config *mc = lb_model_get_config(model);
    lb_batch b;
    lb_status st = lb_dataset_slice(data, split, start, count, &b);
    if (st != LB_OK)
        return st;
    lb_tensor *feat = b.features ? lb_tensor_copy(b.features, mc->dtype) : NULL;
    lb_model_input in = {count, lb_dataset_seq_len(data), b.tokens, feat, b.lengths};
    lb_stream_options so = {0, opt->max_context, 0};
    if (b.features && !feat) {
        st = lb_last_status();
    } else if (opt->incremental) {
        st = predict_incremental(model, &in, opt->chunk, &so, pr, start);
    } else {
        lb_var *y = lb_model_forward(g, model, &in, 0, NULL, NULL);
        if (!y)
            st = lb_last_status();
        else
            store_rows(pr, start, count, y->value, b.lengths);
        lb_graph_reset(g);
    }
    lb_tensor_free(feat);
    lb_batch_free(&b);
    return st;
}

lb_status lb_predict(lb_model *model, const lb_dataset *data, const char *split, int64_t n,
                     const lb_predict_options *opt, lb_predictions *out)
{
    LB_CHECK_ARG(model && data && split && opt && out, LB_ERR_VALUE);
    memset(out, 0, sizeof *out);
    int64_t size = lb_dataset_split_size(data, split);
    if (size < 0)
        return lb_last_status();
    if (n < 1 || n > size || opt->batch < 1 || (opt->incremental && opt->chunk < 1) || opt->max_context < 0)
        return lb_error(LB_ERR_VALUE, "lb_predict: %lld examples of a split of %lld, batch %lld, chunk %lld, "
                        "max_context %lld: examples in [1, split], batch and chunk >= 1, max_context >= 0",
                        (long long)n, (long long)size, (long long)opt->batch, (long long)opt->chunk,
                        (long long)opt->max_context);
    const lb_model_config *mc = lb_model_get_config(model);
    int64_t t = lb_dataset_seq_len(data);
    lb_predictions pr = {n, mc->head == LB_HEAD_EVERY ? t : 1, mc->num_classes > 0 ? mc->num_classes : 1,
                         mc->num_classes == 0, NULL};
    size_t count = (size_t)(pr.n * pr.positions * pr.width);
    if (!(pr.output = malloc(count * sizeof *pr.output)))
        return lb_error(LB_ERR_MEMORY, "predict: out of memory for %lld examples", (long long)n);
    for (size_t i = 0; i < count; i++)
        pr.output[i] = NAN; /* what no event reaches stays NaN */
    lb_graph *g = lb_graph_new();
    lb_status st = g ? LB_OK : lb_last_status();
    if (g)
        lb_graph_set_grad_enabled(g, 0);
    for (int64_t start = 0; start < n && st == LB_OK; start += opt->batch)
        st = predict_batch(model, g, data, split, start, n - start < opt->batch ? n - start : opt->batch, opt, &pr);
    lb_graph_free(g);
    if (st != LB_OK)
        lb_predictions_free(&pr);
    *out = pr;
    return st;
}

double lb_predictions_score(const lb_predictions *pr, const int32_t *targets, const float *values, int64_t *scored)
{
    if (!pr || !pr->output || !scored || (!targets && !values)) {
        lb_error(LB_ERR_VALUE, "lb_predictions_score: the predictions, their targets (or values) and `scored` must "
                 "not be NULL");
        return NAN;
    }
    double sum = 0;
    *scored = 0;
    for (int64_t i = 0; i < pr->n * pr->positions; i++) {
        const double *row = pr->output + i * pr->width;
        if (values) {
            sum += (row[0] - values[i]) * (row[0] - values[i]);
            ++*scored;
            continue;
        }
        if (targets[i] < 0 || isnan(row[0]))
            continue;
        int best = 0;
        for (int64_t k = 1; k < pr->width; k++)
            if (row[k] > row[best])
                best = (int)k;
        sum += best == targets[i];
        ++*scored;
    }
    return *scored ? sum / (double)*scored : NAN;
}

/* Penalties, temperature, top-k, top-p and min-p sampling (layers/sample.h). Named dims:
 * V vocab_size, N recent tokens. */
#include "layers/sample.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

/* One entry of the sort by decreasing z: (z_i, i). */
typedef struct ranked {
    double value;
    int64_t id;
} ranked;

lb_sampling lb_sampling_defaults(void) { return (lb_sampling){1.0, 0, 1.0, 0, 0, 0.0, 1.0, 0.0, 64, NULL, 0}; }

lb_status lb_sampling_check(const lb_sampling *o)
{
    LB_CHECK_ARG(o, LB_ERR_VALUE);
    double t = o->temperature;
    if (!(t == 0 || (t >= LB_SAMPLING_MIN_TEMPERATURE && t <= LB_SAMPLING_MAX_TEMPERATURE)))
        return lb_error(LB_ERR_VALUE, "sampling: temperature = %g must be 0 (greedy) or in [%g, %g]", t,
                        LB_SAMPLING_MIN_TEMPERATURE, LB_SAMPLING_MAX_TEMPERATURE);
    if (o->top_k < 0)
        return lb_error(LB_ERR_VALUE, "sampling: top_k = %lld must be >= 0 (0 = every token)", (long long)o->top_k);
    if (!(o->top_p >= 0 && o->top_p <= 1))
        return lb_error(LB_ERR_VALUE, "sampling: top_p = %g must be in [0, 1] (1 = every token)", o->top_p);
    if (!(o->min_p >= 0 && o->min_p <= 1))
        return lb_error(LB_ERR_VALUE, "sampling: min_p = %g must be in [0, 1] (0 = off)", o->min_p);
    double r = o->repeat_penalty;
    if (!(r == 0 || (r >= LB_SAMPLING_MIN_PENALTY && r <= LB_SAMPLING_MAX_PENALTY)))
        return lb_error(LB_ERR_VALUE, "sampling: repeat_penalty = %g must be in [%g, %g] (1 = off)", r,
                        LB_SAMPLING_MIN_PENALTY, LB_SAMPLING_MAX_PENALTY);
    if (!(fabs(o->presence_penalty) <= LB_SAMPLING_MAX_PENALTY))
        return lb_error(LB_ERR_VALUE, "sampling: presence_penalty = %g must be in [%g, %g] (0 = off)",
                        o->presence_penalty, -LB_SAMPLING_MAX_PENALTY, LB_SAMPLING_MAX_PENALTY);
    if (o->repeat_last_n < -1)
        return lb_error(LB_ERR_VALUE, "sampling: repeat_last_n = %lld must be >= -1 (-1 = every token so far, 0 = none)",
                        (long long)o->repeat_last_n);
    if (o->n_recent < 0 || (o->n_recent > 0 && !o->recent))
        return lb_error(LB_ERR_VALUE, "sampling: n_recent = %lld must be >= 0, with recent holding that many tokens",
                        (long long)o->n_recent);
    if (o->mask_unk && o->unk_id < 0)
        return lb_error(LB_ERR_VALUE, "sampling: unk_id = %lld must be a token id (>= 0) when mask_unk is set",
                        (long long)o->unk_id);
    return LB_OK;
}

size_t lb_sample_work_bytes(int64_t vocab_size)
{
    if (vocab_size < 1 || vocab_size > INT32_MAX) {
        lb_error(LB_ERR_VALUE, "sampling: vocab_size = %lld must be in [1, %d]", (long long)vocab_size, INT32_MAX);
        return 0;
    }
    return (size_t)vocab_size * (sizeof(double) + sizeof(ranked));
}

/* Decreasing value; equal values: the lower id first (a total order, so qsort's
 * instability cannot show). */
static int ranked_cmp(const void *pa, const void *pb)
{
    const ranked *a = pa, *b = pb;
    if (a->value != b->value)
        return a->value > b->value ? -1 : 1;
    return (a->id > b->id) - (a->id < b->id);
}

/* The id step 0 masks (<unk>), or -1. */
static int64_t masked_id(const lb_sampling *o) { return o->mask_unk ? o->unk_id : -1; }

/* The recent tokens the penalties read: [*first, n_recent) of o->recent. */
static int64_t penalised_from(const lb_sampling *o)
{
    int penalties = (o->repeat_penalty != 0 && o->repeat_penalty != 1) || o->presence_penalty != 0;
    if (!penalties || !o->recent || o->repeat_last_n == 0)
        return o->n_recent;
    return o->repeat_last_n < 0 || o->repeat_last_n >= o->n_recent ? 0 : o->n_recent - o->repeat_last_n;
}

/* logits [V]: no NaN, no +inf, not every one -inf (the masked <unk> aside); the arg-max
 * of the tokens that may be drawn (lowest id on ties) into *best; the recent tokens the
 * penalties read are ids in [0, V). */
static lb_status check_logits(const float *logits, int64_t v, const lb_sampling *o, int64_t masked, int64_t *best)
{
    for (int64_t j = penalised_from(o); j < o->n_recent; j++)
        if (o->recent[j] < 0 || o->recent[j] >= v)
            return lb_error(LB_ERR_VALUE, "sampling: recent token %lld is %d, outside the vocabulary [0, %lld)",
                            (long long)j, (int)o->recent[j], (long long)v);
    int64_t arg = -1;
    if (masked >= v)
        return lb_error(LB_ERR_VALUE, "sampling: unk_id = %lld is outside the vocabulary [0, %lld)", (long long)masked,
                        (long long)v);
    for (int64_t i = 0; i < v; i++) {
        float x = logits[i];
        if (isnan(x) || x == INFINITY)
            return lb_error(LB_ERR_NUMERIC, "sampling: logit %lld (token id %lld) is %s; logits must be finite or "
                                            "-inf (a masked token)",
                            (long long)i, (long long)i, isnan(x) ? "NaN" : "+inf");
        if (i != masked && x != -INFINITY && (arg < 0 || x > logits[arg]))
            arg = i;
    }
    if (arg < 0)
        return lb_error(LB_ERR_NUMERIC, "sampling: every one of the %lld logits is -inf%s: no token can be drawn",
                        (long long)v, masked >= 0 ? " but <unk>'s, which is never drawn" : "");
    *best = arg;
    return LB_OK;
}

/* Step 0 of layers/sample.h on x [V]: each distinct recent token once. pairs [V] is
 * scratch (its ids mark the tokens already penalised). */
static void penalise(const lb_sampling *o, int64_t v, double *x, ranked *pairs)
{
    int64_t first = penalised_from(o);
    if (first >= o->n_recent)
        return;
    for (int64_t i = 0; i < v; i++)
        pairs[i].id = 0;
    double r = o->repeat_penalty == 0 ? 1 : o->repeat_penalty;
    for (int64_t j = first; j < o->n_recent; j++) {
        int64_t id = o->recent[j];
        if (pairs[id].id)
            continue;
        pairs[id].id = 1;
        if (x[id] == -INFINITY)
            continue;
        x[id] = x[id] > 0 ? x[id] / r : x[id] * r;
        x[id] -= o->presence_penalty;
    }
}

/* Steps 0-4 of layers/sample.h into z [V]; pairs [V] is the sort's scratch. *best
 * receives the arg-max of the penalised logits (the lowest id on ties). */
static void filter_rows(const float *logits, int64_t v, const lb_sampling *o, int64_t *best, double *z, ranked *pairs)
{
    for (int64_t i = 0; i < v; i++)
        z[i] = (double)logits[i];
    penalise(o, v, z, pairs);
    if (masked_id(o) >= 0) /* <unk> is never drawn */
        z[masked_id(o)] = -INFINITY;
    int64_t arg = -1; /* the penalties keep finite values finite: check_logits's best is one */
    for (int64_t i = 0; i < v; i++)
        if (z[i] != -INFINITY && (arg < 0 || z[i] > z[arg]))
            arg = i;
    *best = arg;
    if (o->temperature == 0) { /* greedy: one-hot on the arg-max */
        double keep = z[arg];
        for (int64_t i = 0; i < v; i++)
            z[i] = -INFINITY;
        z[arg] = keep;
        return;
    }
    for (int64_t i = 0; i < v; i++)
        z[i] /= o->temperature;
    int top_k = o->top_k > 0 && o->top_k < v, top_p = o->top_p < 1, min_p = o->min_p > 0;
    if (!top_k && !top_p && !min_p)
        return;
    for (int64_t i = 0; i < v; i++)
        pairs[i] = (ranked){z[i], i};
    qsort(pairs, (size_t)v, sizeof *pairs, ranked_cmp);
    int64_t kept = v; /* pairs[0, kept) are the tokens still in */
    while (kept > 0 && pairs[kept - 1].value == -INFINITY)
        kept--;
    if (top_k && o->top_k < kept) {
        double kth = pairs[o->top_k - 1].value; /* every z below the k-th largest goes */
        int64_t k = o->top_k;
        while (k < kept && pairs[k].value >= kth)
            k++;
        kept = k;
    }
    if (top_p) {
        /* q = softmax over the kept tokens, in decreasing order: the smallest prefix with
         * cumulative probability >= p (at least one token) */
        double top = pairs[0].value, sum = 0, cum = 0;
        for (int64_t i = 0; i < kept; i++)
            sum += exp(pairs[i].value - top);
        int64_t n = 0;
        while (n < kept) {
            cum += exp(pairs[n].value - top);
            n++;
            if (cum >= o->top_p * sum)
                break;
        }
        kept = n;
    }
    if (min_p) { /* q_i >= m · max q, i.e. z_i - max z >= ln m; the first always stays */
        double floor = log(o->min_p);
        int64_t n = 1;
        while (n < kept && pairs[n].value - pairs[0].value >= floor)
            n++;
        kept = n;
    }
    for (int64_t i = kept; i < v; i++)
        z[pairs[i].id] = -INFINITY;
}

/* The shared entry: checks, scratch, filtered logits into z (the caller's buffer or the
 * scratch's first V doubles). *scratch receives what to free. */
static lb_status filter(const float *logits, int64_t v, const lb_sampling *o, void *work, double *out, double **z,
                        void **scratch, int64_t *best)
{
    *scratch = NULL;
    if (lb_sampling_check(o) != LB_OK)
        return lb_last_status();
    size_t bytes = lb_sample_work_bytes(v);
    if (bytes == 0)
        return lb_last_status();
    if (check_logits(logits, v, o, masked_id(o), best) != LB_OK)
        return lb_last_status();
    if (!work && !(work = *scratch = malloc(bytes)))
        return lb_error(LB_ERR_MEMORY, "sampling: out of memory for %zu bytes of scratch (V = %lld)", bytes,
                        (long long)v);
    double *zz = out ? out : work;
    ranked *pairs = (ranked *)((double *)work + v);
    filter_rows(logits, v, o, best, zz, pairs);
    *z = zz;
    return LB_OK;
}

lb_status lb_sample_filter(const float *logits, int64_t vocab_size, const lb_sampling *o, void *work,
                           double *filtered)
{
    LB_CHECK_ARG(logits, LB_ERR_VALUE);
    LB_CHECK_ARG(o, LB_ERR_VALUE);
    LB_CHECK_ARG(filtered, LB_ERR_VALUE);
    double *z;
    void *scratch;
    int64_t best;
    lb_status st = filter(logits, vocab_size, o, work, filtered, &z, &scratch, &best);
    free(scratch);
    return st;
}

/* softmax(z) over [V] in double; z holds at least one finite value. */
static void softmax_rows(const double *z, int64_t v, double *probs)
{
    double top = -INFINITY, sum = 0;
    for (int64_t i = 0; i < v; i++)
        if (z[i] > top)
            top = z[i];
    for (int64_t i = 0; i < v; i++)
        sum += probs[i] = exp(z[i] - top);
    for (int64_t i = 0; i < v; i++)
        probs[i] /= sum;
}

lb_status lb_sample_probs(const float *logits, int64_t vocab_size, const lb_sampling *o, void *work, double *probs)
{
    LB_CHECK_ARG(logits, LB_ERR_VALUE);
    LB_CHECK_ARG(o, LB_ERR_VALUE);
    LB_CHECK_ARG(probs, LB_ERR_VALUE);
    double *z;
    void *scratch;
    int64_t best;
    lb_status st = filter(logits, vocab_size, o, work, probs, &z, &scratch, &best);
    if (st == LB_OK)
        softmax_rows(z, vocab_size, probs);
    free(scratch);
    return st;
}

lb_status lb_sample_token(const float *logits, int64_t vocab_size, const lb_sampling *o, lb_rng *rng, void *work,
                          int32_t *token)
{
    LB_CHECK_ARG(logits, LB_ERR_VALUE);
    LB_CHECK_ARG(o, LB_ERR_VALUE);
    LB_CHECK_ARG(rng, LB_ERR_VALUE);
    LB_CHECK_ARG(token, LB_ERR_VALUE);
    double *z;
    void *scratch;
    int64_t best;
    lb_status st = filter(logits, vocab_size, o, work, NULL, &z, &scratch, &best);
    if (st != LB_OK) {
        free(scratch);
        return st;
    }
    if (o->temperature == 0) {
        *token = (int32_t)best;
        free(scratch);
        return LB_OK;
    }
    /* one uniform draw; the first id whose cumulative exp(z - max) exceeds u · sum. The
     * cumulative sum adds the same terms in the same order as the total, so it reaches
     * the total at the last kept token and the walk always ends on a kept token. */
    double top = -INFINITY, sum = 0;
    for (int64_t i = 0; i < vocab_size; i++)
        if (z[i] > top)
            top = z[i];
    for (int64_t i = 0; i < vocab_size; i++)
        sum += exp(z[i] - top);
    double target = lb_rng_uniform(rng) * sum, cum = 0;
    int64_t pick = best;
    for (int64_t i = 0; i < vocab_size; i++) {
        double e = exp(z[i] - top);
        if (e == 0)
            continue;
        cum += e;
        pick = i;
        if (cum > target)
            break;
    }
    *token = (int32_t)pick;
    free(scratch);
    return LB_OK;
}

/* A dataset from arrays in memory (data/arrays.h): the arrays checked and copied into
 * the rows every dataset holds (data/rows.h). */
#include "data/arrays.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

#include "data/dataset_internal.h"

/* Checks one split's arrays: present when N > 0, every value in range. */
static lb_status check_split(const lb_array_data *d, const lb_array_split *s, const char *split, const char *name)
{
    if (s->n < 0 || s->n > INT64_MAX / d->seq_len / (d->num_features > 0 ? d->num_features : 1))
        return lb_error(LB_ERR_VALUE, "%s: %s split: N = %lld examples of T = %lld does not fit", name, split,
                        (long long)s->n, (long long)d->seq_len);
    if (s->n == 0)
        return LB_OK;
    int64_t t_per = d->per_position ? d->seq_len : 1, inputs = s->n * d->seq_len;
    if (d->num_features > 0 ? !s->features : !s->tokens)
        return lb_error(LB_ERR_VALUE, "%s: %s split: no %s array", name, split, d->num_features > 0 ? "features" : "tokens");
    if (!s->targets)
        return lb_error(LB_ERR_VALUE, "%s: %s split: no targets array", name, split);
    for (int64_t i = 0; d->num_features > 0 && i < inputs * d->num_features; i++)
        if (!isfinite(s->features[i]))
            return lb_error(LB_ERR_VALUE, "%s: %s split: features [%lld, %lld, %lld] is %g, not finite", name, split,
                            (long long)(i / d->num_features / d->seq_len), (long long)(i / d->num_features % d->seq_len),
                            (long long)(i % d->num_features), (double)s->features[i]);
    for (int64_t i = 0; d->num_features == 0 && i < inputs; i++)
        if (s->tokens[i] < 0 || s->tokens[i] >= d->vocab_size)
            return lb_error(LB_ERR_VALUE, "%s: %s split: tokens [%lld, %lld] is %d, outside [0, %lld)", name, split,
                            (long long)(i / d->seq_len), (long long)(i % d->seq_len), s->tokens[i],
                            (long long)d->vocab_size);
    for (int64_t i = 0; i < s->n * t_per; i++) {
        if ((s->targets[i] >= 0 && s->targets[i] < d->num_classes) || s->targets[i] == LB_IGNORE_INDEX)
            continue;
        char at[64];
        if (d->per_position)
            snprintf(at, sizeof at, "[%lld, %lld]", (long long)(i / t_per), (long long)(i % t_per));
        else
            snprintf(at, sizeof at, "[%lld]", (long long)i);
        return lb_error(LB_ERR_VALUE, "%s: %s split: targets %s is %d, outside [0, %lld) and not -100", name, split, at,
                        s->targets[i], (long long)d->num_classes);
    }
    return LB_OK;
}

/* Checks the sizes: T, V or F, C. */
static lb_status check_sizes(const lb_array_data *d, const char *name)
{
    if (d->seq_len < 1 || d->seq_len > (1 << 24))
        return lb_error(LB_ERR_VALUE, "%s: seq_len %lld is outside [1, 2^24]", name, (long long)d->seq_len);
    if (d->num_features < 0 || d->num_features > (1 << 16) || (d->num_features > 0) == (d->vocab_size > 0) ||
        d->vocab_size < 0 || d->vocab_size > INT32_MAX)
        return lb_error(LB_ERR_VALUE, "%s: vocab_size %lld, num_features %lld: give one of them (tokens: vocab_size "
                        "in [1, 2^31); real-valued inputs: num_features in [1, 2^16]), the other 0", name,
                        (long long)d->vocab_size, (long long)d->num_features);
    if (d->num_classes < 2 || d->num_classes > INT32_MAX)
        return lb_error(LB_ERR_VALUE, "%s: num_classes %lld is outside [2, 2^31)", name, (long long)d->num_classes);
    if (d->train.n < 1)
        return lb_error(LB_ERR_VALUE, "%s: the train split is empty (train.n = %lld)", name, (long long)d->train.n);
    return LB_OK;
}

lb_dataset *lb_dataset_from_arrays(const lb_array_data *arrays, const char *name)
{
    LB_CHECK_ARG(arrays, NULL);
    name = name ? name : "arrays";
    const lb_array_split *splits[LB_SPLIT_COUNT] = {&arrays->train, &arrays->val, &arrays->test};
    lb_status st = check_sizes(arrays, name);
    for (int s = 0; s < LB_SPLIT_COUNT && st == LB_OK; s++)
        st = check_split(arrays, splits[s], lb_split_name(s), name);
    if (st != LB_OK)
        return NULL;
    lb_layout layout = {.seq_len = arrays->seq_len, .features = arrays->num_features,
                        .per_position = arrays->per_position};
    lb_rows rows[LB_SPLIT_COUNT] = {{0}};
    for (int s = 0; s < LB_SPLIT_COUNT && st == LB_OK; s++) {
        const lb_array_split *a = splits[s];
        if ((st = lb_rows_alloc(&layout, a->n, NULL, name, &rows[s])) != LB_OK || a->n == 0)
            continue;
        memcpy(rows[s].data[LB_FIELD_INPUTS], arrays->num_features > 0 ? (const void *)a->features : a->tokens,
               (size_t)(a->n * lb_layout_row_elems(&layout, LB_FIELD_INPUTS)) * 4);
        memcpy(rows[s].data[LB_FIELD_TARGETS], a->targets,
               (size_t)(a->n * lb_layout_row_elems(&layout, LB_FIELD_TARGETS)) * 4);
    }
    if (st != LB_OK) {
        for (int s = 0; s < LB_SPLIT_COUNT; s++)
            lb_rows_free(&rows[s]);
        return NULL;
    }
    return lb_dataset_adopt_rows(name, &layout, arrays->vocab_size, arrays->num_classes, rows);
}

/* Batch buffers shared by the loader and lb_dataset_slice. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "data/dataset_internal.h"
#include "data/text_internal.h"

lb_status lb_batch_store_init(lb_batch_store *store, const lb_layout *layout, int64_t capacity, const char *file)
{
    memset(store, 0, sizeof *store);
    store->layout = *layout;
    store->capacity = capacity;
    if (layout->features > 0) {
        int64_t shape[3] = {capacity, layout->seq_len, layout->features};
        store->features = lb_tensor_zeros(LB_FLOAT32, 3, shape);
        if (!store->features)
            return lb_error_context("%s", file);
    }
    lb_status st = lb_rows_alloc(layout, capacity, store->features ? lb_tensor_data(store->features) : NULL, file,
                                 &store->rows);
    store->indices = st == LB_OK ? calloc((size_t)(capacity > 0 ? capacity : 1), sizeof *store->indices) : NULL;
    if (st == LB_OK && !store->indices)
        st = lb_error(LB_ERR_MEMORY, "%s: out of memory for %lld indices", file, (long long)capacity);
    if (st != LB_OK)
        lb_batch_store_free(store);
    return st;
}

void lb_batch_store_free(lb_batch_store *store)
{
    lb_rows_free(&store->rows);
    lb_tensor_free(store->short_view);
    lb_tensor_free(store->features);
    free(store->indices);
    memset(store, 0, sizeof *store);
}

/* The features tensor for a batch of n: the whole buffer, or a [n, T, F] view. */
static lb_tensor *features_for(lb_batch_store *store, int64_t n)
{
    if (!store->features)
        return NULL;
    if (n == store->capacity)
        return store->features;
    if (store->short_view && store->short_view->shape[0] == n)
        return store->short_view;
    lb_tensor_free(store->short_view);
    store->short_view = lb_tensor_slice(store->features, 0, 0, n, 1);
    return store->short_view;
}

lb_status lb_batch_store_fill(lb_batch_store *store, const lb_rows *src, const int64_t *indices, int64_t start,
                              int64_t n, lb_batch *out)
{
    const lb_layout *l = &store->layout;
    for (int64_t i = 0; i < n; i++) {
        store->indices[i] = indices ? indices[i] : start + i;
        lb_rows_copy(l, &store->rows, i, src, store->indices[i], 1);
    }
    memset(out, 0, sizeof *out);
    out->batch_size = n;
    out->seq_len = l->seq_len;
    out->num_features = l->features;
    out->features = features_for(store, n);
    if (l->features > 0 && !out->features)
        return lb_error_context("reading a batch of %lld example%s", (long long)n, n == 1 ? "" : "s");
    out->tokens = l->features ? NULL : store->rows.data[LB_FIELD_INPUTS];
    out->targets = l->regression ? NULL : store->rows.data[LB_FIELD_TARGETS];
    out->target_values = l->regression ? store->rows.data[LB_FIELD_TARGETS] : NULL;
    out->per_position = l->per_position;
    out->distance = store->rows.data[LB_FIELD_DISTANCE];
    out->lengths = store->rows.data[LB_FIELD_LENGTHS];
    out->indices = store->indices;
    return LB_OK;
}

/* Windows [start, start + count) of a text split (data/dataset.h: window i starts at i T). */
static lb_status text_slice(const lb_dataset *ds, const char *split, int64_t start, int64_t count, lb_batch *out)
{
    const char *file = lb_dataset_path(ds);
    int64_t n_windows = lb_dataset_split_size(ds, split), n = 0, T = lb_dataset_seq_len(ds);
    const int32_t *tok = lb_dataset_tokens(ds, split, &n);
    if (start < 0 || count < 0 || start > n_windows || count > n_windows - start)
        return lb_error(LB_ERR_VALUE, "%s: %lld windows from %lld are outside split %s of %lld windows", file,
                        (long long)count, (long long)start, split, (long long)n_windows);
    lb_batch_store *store = malloc(sizeof *store);
    if (!store)
        return lb_error(LB_ERR_MEMORY, "%s: out of memory", file);
    lb_status st = lb_batch_store_init(store, lb_dataset_layout(ds), count, file);
    if (st == LB_OK)
        st = lb_text_batch_fill(store, tok, n, NULL, start, count, T, out);
    if (st != LB_OK) {
        lb_batch_store_free(store);
        free(store);
        return st;
    }
    out->owner = store;
    return LB_OK;
}

lb_status lb_dataset_slice(const lb_dataset *ds, const char *split, int64_t start, int64_t count, lb_batch *out)
{
    LB_CHECK_ARG(ds, LB_ERR_VALUE);
    LB_CHECK_ARG(out, LB_ERR_VALUE);
    const char *file = lb_dataset_path(ds);
    int s = lb_split_index(split, file);
    if (s < 0)
        return LB_ERR_VALUE;
    if (lb_dataset_is_text(ds))
        return text_slice(ds, split, start, count, out);
    const lb_rows *rows = lb_dataset_rows(ds, s);
    if (start < 0 || count < 0 || start > rows->n || count > rows->n - start)
        return lb_error(LB_ERR_VALUE, "%s: %lld examples from %lld are outside split %s of %lld examples", file,
                        (long long)count, (long long)start, split, (long long)rows->n);
    lb_batch_store *store = malloc(sizeof *store);
    if (!store)
        return lb_error(LB_ERR_MEMORY, "%s: out of memory", file);
    lb_status st = lb_batch_store_init(store, lb_dataset_layout(ds), count, file);
    if (st == LB_OK)
        st = lb_batch_store_fill(store, rows, NULL, start, count, out);
    if (st != LB_OK) {
        lb_batch_store_free(store);
        free(store);
        return st;
    }
    out->owner = store;
    return LB_OK;
}

lb_status lb_text_batch_fill(lb_batch_store *store, const int32_t *tok, int64_t n, const int64_t *offsets,
                             int64_t first, int64_t count, int64_t T, lb_batch *out)
{
    if (count > store->capacity || T != store->layout.seq_len)
        return lb_error(LB_ERR_STATE, "batch of %lld windows of %lld does not fit its buffers (%lld of %lld)",
                        (long long)count, (long long)T, (long long)store->capacity, (long long)store->layout.seq_len);
    int32_t *inputs = store->rows.data[LB_FIELD_INPUTS], *targets = store->rows.data[LB_FIELD_TARGETS];
    for (int64_t i = 0; i < count; i++) {
        int64_t offset = offsets ? offsets[i] : (first + i) * T;
        lb_text_fill_window(tok, n, offset, T, inputs + i * T, targets + i * T);
        store->indices[i] = offsets ? offsets[i] : first + i;
    }
    memset(out, 0, sizeof *out);
    out->batch_size = count;
    out->seq_len = T;
    out->tokens = inputs;
    out->targets = targets;
    out->per_position = 1;
    out->indices = store->indices;
    return LB_OK;
}

void lb_batch_free(lb_batch *batch)
{
    if (!batch || !batch->owner)
        return;
    lb_batch_store_free(batch->owner);
    free(batch->owner);
    memset(batch, 0, sizeof *batch);
}

double lb_dataset_mean_predictor_mse(const lb_dataset *data, const char *split, int64_t n)
{
    lb_batch b;
    double sum = 0, sq = 0;
    if (n < 1 || lb_dataset_slice(data, split, 0, n, &b) != LB_OK)
        return NAN;
    if (!b.target_values) {
        lb_batch_free(&b);
        return NAN;
    }
    for (int64_t i = 0; i < n; i++)
        sum += b.target_values[i];
    double mean = sum / (double)n;
    for (int64_t i = 0; i < n; i++)
        sq += (b.target_values[i] - mean) * (b.target_values[i] - mean);
    lb_batch_free(&b);
    return sq / (double)n;
}

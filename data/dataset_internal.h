/* Internal to data/: what the loader needs of an open dataset, and the batch buffers
 * shared by the loader and lb_dataset_slice. */
#ifndef LB_DATA_DATASET_INTERNAL_H
#define LB_DATA_DATASET_INTERNAL_H

#include "data/dataset.h"
#include "data/rows.h"

enum { LB_SPLIT_COUNT = 3 };

/* Index of split `name` (0 train, 1 val, 2 test), or -1 with LB_ERR_VALUE
 * "FILE: unknown split 'x' (expected train, val or test)". */
int lb_split_index(const char *name, const char *file);
const char *lb_split_name(int split);

const lb_layout *lb_dataset_layout(const lb_dataset *ds);

/* A dataset of rows already in memory and checked (lb_dataset_from_arrays): it takes
 * over rows [LB_SPLIT_COUNT] (freed on error too); `name` is its path in messages and
 * its task name "arrays". NULL with LB_ERR_MEMORY. */
lb_dataset *lb_dataset_adopt_rows(const char *name, const lb_layout *layout, int64_t vocab_size, int64_t num_classes,
                                  lb_rows *rows);
const lb_rows *lb_dataset_rows(const lb_dataset *ds, int split);

/* Buffers for up to `capacity` examples gathered from a split; messages name `file`. */
typedef struct lb_batch_store {
    lb_layout layout;
    int64_t capacity;
    lb_rows rows;        /* capacity examples; inputs live in `features` when F > 0 */
    lb_tensor *features; /* float32 [capacity, T, F] or NULL */
    lb_tensor *short_view; /* [n, T, F] view of `features` for a short batch, or NULL */
    int64_t *indices;    /* [capacity] */
} lb_batch_store;

lb_status lb_batch_store_init(lb_batch_store *store, const lb_layout *layout, int64_t capacity, const char *file);
void lb_batch_store_free(lb_batch_store *store);
/* Copies examples indices[0..n) of `src` (or start, start+1, ... when indices is
 * NULL) into the store and points *out at them. n <= capacity. */
lb_status lb_batch_store_fill(lb_batch_store *store, const lb_rows *src, const int64_t *indices, int64_t start,
                              int64_t n, lb_batch *out);

/* Fills the store with `count` windows of length T of the token stream tok[0..n): at
 * offsets[i] (random windows), or at (first + i) * T when offsets is NULL (the
 * non-overlapping windows of evaluation); indices receive the offsets or the window
 * numbers. count <= the store's capacity and T its layout's seq_len. */
lb_status lb_text_batch_fill(lb_batch_store *store, const int32_t *tok, int64_t n, const int64_t *offsets,
                             int64_t first, int64_t count, int64_t T, lb_batch *out);

#endif

/* A dataset made from arrays in memory: examples a program already holds (its own
 * task, data read by its own code) trained on and evaluated without a data file.
 *
 * The dataset behaves as one opened from a file (data/dataset.h): the loader, the
 * trainer, lb_evaluate and lb_dataset_slice take it as they take a file's. Its
 * lb_dataset_path is the `name` given, its lb_dataset_task_name "arrays" and its
 * lb_dataset_task LB_TASK_COUNT (no generator task); it has no distances or lengths.
 *
 * Dimensions: N examples of a split, T = seq_len, F input features.
 */
#ifndef LB_DATA_ARRAYS_H
#define LB_DATA_ARRAYS_H

#include "tensor/api.h"

#include <stdint.h>

#include "data/dataset.h"

LB_API_BEGIN

/* One split's examples, row-major with N leading. Inputs: `tokens` int32 [N, T] (ids
 * in [0, vocab_size)) when num_features is 0, else `features` float32 [N, T, F]
 * (finite). Targets: int32 [N] (a class per sequence) or [N, T] (per_position), in
 * [0, num_classes) or -100 (LB_IGNORE_INDEX: not scored). N = 0 leaves the split empty
 * (its pointers may be NULL). */
typedef struct lb_array_split {
    int64_t n;
    const int32_t *tokens;
    const float *features;
    const int32_t *targets;
} lb_array_split;

typedef struct lb_array_data {
    int64_t seq_len;      /* T >= 1 */
    int64_t vocab_size;   /* token inputs: V >= 1 (0 with features) */
    int64_t num_features; /* F >= 1 for real-valued inputs, else 0 */
    int64_t num_classes;  /* C >= 2 */
    int per_position;     /* targets [N, T] instead of [N] */
    lb_array_split train, val, test;
} lb_array_data;

/* A dataset holding copies of the arrays (the caller's may be freed afterwards), every
 * value checked as lb_dataset_open checks a file's; `name` (NULL: "arrays") stands for
 * the data in messages. Free with lb_dataset_close. NULL on error: LB_ERR_VALUE naming
 * the split, the array, the position and the value (a token or class out of range, a
 * feature not finite, a missing array, an empty train split, sizes that do not fit),
 * or LB_ERR_MEMORY. */
lb_dataset *lb_dataset_from_arrays(const lb_array_data *arrays, const char *name);

LB_API_END

#endif

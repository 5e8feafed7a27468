/* HDF5 files of a model's outputs: the predictions of every example of a split
 * (`lookback predict`) and the attention weights of the first examples (`lookback eval
 * --attention-out`). Both are written as every file lookback makes from scratch
 * (lb_h5_write_new in data/h5io.h): libhdf5 in a child process, a temporary PATH.tmp
 * renamed into place, PATH locked meanwhile (docs/training.md shows the commands). */
#ifndef LB_DATA_RESULTS_H
#define LB_DATA_RESULTS_H

#include "tensor/api.h"

#include <stdint.h>

#include "data/dataset.h"
#include "tensor/error.h"
#include "tensor/tensor.h"

LB_API_BEGIN

/* A model's outputs for N examples: output [N, P, W] float64, with P positions (T when
 * the model has a target per position, 1 when it has one per sequence) and W values per
 * position (the classes' logits, or 1 regression output); NaN at the positions past an
 * example's length. */
typedef struct lb_predictions {
    int64_t n;         /* N examples */
    int64_t positions; /* P: T or 1 */
    int64_t width;     /* W: classes, or 1 for regression */
    int regression;    /* 1: a regression output, no predicted class */
    double *output;    /* [N, P, W] float64; owned by whoever filled it */
} lb_predictions;

/* Frees pr->output (when it is not NULL) and sets it to NULL; pr may be NULL. */
void lb_predictions_free(lb_predictions *pr);

/* What a predictions file records of where its numbers came from, as string attributes
 * of its root group: the checkpoint and data file (paths as given), the split, the model
 * family's name and the path that computed them ("full" or "incremental"). */
typedef struct lb_predictions_source {
    const char *checkpoint, *data, *split, *model, *path;
} lb_predictions_source;

/* Writes the predictions file `path`: "logits" float64 [N, W] (one target per sequence)
 * or [N, T, W] (per position), or "output" float64 [N] / [N, T] for regression; for
 * classes "predicted" int32 [N] / [N, T] (the argmax of the logits, the first of equal
 * ones; -1 where the logits are NaN); from `examples` (the N examples' batch, data/
 * dataset.h) "target" (int32 classes or float32 regression values), "distance" int32
 * [N] and "length" int32 [N] when it holds them; the attributes of `source` and
 * "examples" (N). `replace` as lb_h5_write_new (the caller checked `path` with
 * lb_output_check and took it from lb_output_present). Errors: LB_ERR_VALUE (a NULL
 * argument, no output, N or P or W < 1), LB_ERR_MEMORY, LB_ERR_IO naming the file and
 * the dataset or attribute that could not be written, and lb_h5_write_new's. */
lb_status lb_predictions_write(const char *path, const lb_predictions *pr, const lb_batch *examples,
                               const lb_predictions_source *source, int replace);

/* Writes the attention file `path`: "weights" float32 [E, H, Tq, Tk] (the weights of one
 * attention layer for E examples, any float dtype converted to float32 with rounding to
 * nearest), with the first E examples of `split` of `data`: "tokens" int32 [E, T] (token
 * inputs only) and "distance" int32 [E] (when the task has one). An existing regular file
 * at `path` is replaced (lb_output_check refuses anything else). Errors: LB_ERR_VALUE (a
 * NULL argument, weights not of rank 4), lb_dataset_slice's (E beyond the split),
 * LB_ERR_MEMORY, LB_ERR_IO naming the file and the dataset, and lb_h5_write_new's. */
lb_status lb_attention_write(const char *path, const lb_tensor *weights, const lb_dataset *data, const char *split);

/* Writes every chosen layer's attention weights to `path` in bertviz's layout (one
 * [B, H, T, T] array per layer, here stacked): "attention" float32 [L, B, H, T, T] (row q
 * of [l, b, h] the weights of query q over the keys), "layers" int32 [L] (the model's
 * layer index of each), "tokens" int32 [B, T] (token inputs only), the attributes
 * "example" (the first example's index in its split), "distance" (when the task has one)
 * and "source" (e.g. the checkpoint). Errors: LB_ERR_VALUE (a NULL argument, weights not
 * float32 [L, B, H, T, T] with B the examples' count), LB_ERR_IO naming the file, and
 * lb_h5_write_new's. */
lb_status lb_attention_layers_write(const char *path, const lb_tensor *weights, const int32_t *layers,
                                    const lb_batch *examples, const char *source);

LB_API_END

#endif

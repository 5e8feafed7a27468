/* Opening and validating a lookback data file (HDF5, format of docs/data.md), and
 * batches of its examples.
 *
 * lb_dataset_open reads every split into memory (the file's uncompressed size:
 * 100,000 x 1,024 int32 tokens is 400 MB) and checks all of it before any training
 * starts: root attributes present and sane, format_version known, each split's
 * datasets present with the expected dtype class, rank and shape and the same N,
 * token ids in [0, vocab_size), class targets in [0, num_classes) or -100, real
 * values finite, distance in [0, T), lengths in [1, T]. A bad file gives NULL and
 * one message (lb_last_error) naming the file, the dataset or attribute, and what
 * was expected versus found; nothing crashes, exits or prints HDF5's error stack.
 *
 * Dimensions: N examples in a split, B in a batch, T = seq_len, F input features.
 * Splits are named "train", "val" and "test".
 */
#ifndef LB_DATA_DATASET_H
#define LB_DATA_DATASET_H

#include "tensor/api.h"

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "data/tasks.h"
#include "data/text.h"
#include "tensor/error.h"
#include "tensor/tensor.h"

LB_API_BEGIN

typedef struct lb_dataset lb_dataset;

/* A batch of B examples. Pointers are read-only views, valid until the next call on
 * the loader that produced the batch (or until lb_batch_free for lb_dataset_slice). */
typedef struct lb_batch {
    int64_t batch_size;         /* B (the last batch of an epoch may be short) */
    int64_t seq_len;            /* T */
    int64_t num_features;       /* F; 0 for token inputs */
    const int32_t *tokens;      /* [B, T] token ids in [0, vocab_size), 0 = PAD; NULL if F > 0 */
    lb_tensor *features;        /* float32 [B, T, F]; NULL for token inputs. Owned by the batch's source */
    const int32_t *targets;     /* [B] or [B, T] (per_position; -100 = ignored) classes; NULL for regression */
    const float *target_values; /* [B] regression targets; NULL for class targets */
    int per_position;           /* targets are [B, T] */
    const int32_t *distance;    /* [B] clue-to-query distance, or NULL when the task has none */
    const int32_t *lengths;     /* [B] real lengths (positions >= length are PAD), or NULL */
    const int64_t *indices;     /* [B] index of each example within its split */
    void *owner;                /* internal: storage released by lb_batch_free */
} lb_batch;

/* Opens and validates the file at `path` (see the top of this header). HDF5 runs in a
 * child process with a time limit (lb_h5_read_timeout; LOOKBACK_HDF5_TIMEOUT), which
 * sends the checked arrays back: a file that crashes or hangs libhdf5 gives
 * LB_ERR_FORMAT "damaged or hostile HDF5 file". NULL on error with LB_ERR_IO (missing
 * or unreadable file, not a regular file, locked by a process writing it),
 * LB_ERR_FORMAT (not HDF5, truncated, corrupted, wrong attribute, dtype, shape or
 * value, unknown format_version), LB_ERR_VALUE (empty path) or LB_ERR_MEMORY. */
lb_dataset *lb_dataset_open(const char *path);
/* The same, with only the split named `split` ("train", "val" or "test") read into
 * memory and checked value by value: memory in proportion to that split, not to the
 * file (eval of a small test split beside a large train split). The other splits are
 * checked for presence, dtype and shape only and appear empty (0 examples). Errors as
 * lb_dataset_open, and LB_ERR_VALUE for a NULL argument or an unknown split name. */
lb_dataset *lb_dataset_open_split(const char *path, const char *split);
/* Frees everything; NULL is allowed. Batches from lb_dataset_slice stay valid. */
void lb_dataset_close(lb_dataset *ds);

const char *lb_dataset_path(const lb_dataset *ds);
/* The file's task name: a generator task ("spike", ...), "events" for a file imported
 * from a CSV event log (lookback data csv, data/events.h) or "text" for a text corpus
 * (lookback data text, data/text.h); NULL when ds is NULL. */
const char *lb_dataset_task_name(const lb_dataset *ds);
/* The events schema of an "events" file (columns, scaling, token maps: data/events.h),
 * NULL for generated files; owned by the dataset. */
struct lb_event_schema;
const struct lb_event_schema *lb_dataset_events(const lb_dataset *ds);
/* The same as the JSON text stored in the file (/events/schema); *len (may be NULL)
 * receives its length. NULL for generated files. */
const char *lb_dataset_events_json(const lb_dataset *ds, size_t *len);
/* The file's task; LB_TASK_COUNT (no generator task) for an "events" file and when ds
 * is NULL. */
lb_task_kind lb_dataset_task(const lb_dataset *ds);
/* The generator options stored as root attributes (task defaults for those absent). */
const lb_task_options *lb_dataset_options(const lb_dataset *ds);
int64_t lb_dataset_seq_len(const lb_dataset *ds);      /* T */
int64_t lb_dataset_vocab_size(const lb_dataset *ds);   /* 0 for real-valued inputs */
int64_t lb_dataset_num_classes(const lb_dataset *ds);  /* 0 for regression */
int64_t lb_dataset_num_features(const lb_dataset *ds); /* F; 0 for token inputs */
int lb_dataset_is_regression(const lb_dataset *ds);
/* The MSE of always predicting the mean target over the first n examples of a split
 * (per-sequence regression targets): the baseline a regression must beat (1/6 for the
 * adding task, the variance of the sum of two U(0, 1)). NAN when the split has no
 * regression targets or n < 1. */
double lb_dataset_mean_predictor_mse(const lb_dataset *data, const char *split, int64_t n);
int lb_dataset_per_position(const lb_dataset *ds);
int lb_dataset_has_distance(const lb_dataset *ds);
int lb_dataset_has_lengths(const lb_dataset *ds);

/* N of a split; -1 and LB_ERR_VALUE for an unknown split name. For a text corpus, the
 * number of non-overlapping windows of T = seq_len positions that cover every target of
 * the split's token stream: ceil((N_tokens - 1) / T) (0 for fewer than 2 tokens). */
int64_t lb_dataset_split_size(const lb_dataset *ds, const char *split);

/* ---- text corpora (data/text.h) ----
 * A file written by lb_text_import opens as a dataset too: token inputs and one class
 * per token (vocab_size = num_classes = V), a target at every position (per_position),
 * no distances or lengths, lb_dataset_task LB_TASK_COUNT and lb_dataset_task_name
 * "text". Its splits are token streams; seq_len is the WINDOW length T, chosen by
 * lb_dataset_set_seq_len (LB_TEXT_DEFAULT_SEQ_LEN, or the training stream's length - 1
 * when shorter, until then). Example i of a split (lb_dataset_slice, evaluation) is the
 * window of inputs tokens[iT .. iT + T) with targets tokens[iT + 1 .. iT + T + 1): the
 * windows do not overlap and together score every token but the first exactly once; the
 * last window's positions past the stream are padding (input id 0, target -100). The
 * training loader draws windows at uniformly random offsets instead (data/loader.h). */
/* 1 for a text corpus, 0 for a task file. */
int lb_dataset_is_text(const lb_dataset *ds);
/* The corpus's vocabulary (owned by the dataset), NULL for a task file. */
const lb_vocab *lb_dataset_vocab(const lb_dataset *ds);
/* The token stream of a split (int32 [*n], ids in [0, V)), owned by the dataset; NULL
 * with *n = 0 for a split not read (lb_dataset_open_split). LB_ERR_STATE (NULL) for a task
 * file, LB_ERR_VALUE for an unknown split. */
const int32_t *lb_dataset_tokens(const lb_dataset *ds, const char *split, int64_t *n);
/* Sets the window length T of a text corpus (1 .. 2^24): seq_len, the split sizes and
 * every later slice follow it. LB_ERR_STATE for a task file (its sequences have their
 * own length), LB_ERR_VALUE out of range. A loader made before keeps its own T. */
lb_status lb_dataset_set_seq_len(lb_dataset *ds, int64_t seq_len);

/* Counts of each class over the split's (non-ignored) targets into counts
 * [num_classes]; *ignored (may be NULL) receives the number of -100 targets.
 * LB_ERR_STATE for a regression dataset, LB_ERR_VALUE for an unknown split. */
lb_status lb_dataset_label_histogram(const lb_dataset *ds, const char *split, int64_t *counts, int64_t *ignored);

/* Smallest and largest distance over the split. LB_ERR_STATE when the task has no
 * distance or the split is empty, LB_ERR_VALUE for an unknown split. */
lb_status lb_dataset_distance_range(const lb_dataset *ds, const char *split, int32_t *min, int32_t *max);

/* Prints what `lookback data info` shows: file, task, options (those the file does
 * not record as "name=not recorded", not with the defaults the reader assumes), vocabulary and
 * classes with chance level, dataset shapes, split sizes, distance ranges, length
 * ranges and the train label histogram (regression: target mean and variance, i.e.
 * the MSE of predicting the mean). LB_ERR_IO if writing fails. */
lb_status lb_dataset_print_info(const lb_dataset *ds, FILE *out);

/* Examples [start, start + count) of a split in file order, as a batch owning copies
 * of them (free with lb_batch_free); for evaluation in order. count may be 0.
 * LB_ERR_VALUE for an unknown split or a range outside [0, N]; LB_ERR_MEMORY. */
lb_status lb_dataset_slice(const lb_dataset *ds, const char *split, int64_t start, int64_t count, lb_batch *out);

/* Releases a batch from lb_dataset_slice and zeroes it. A loader's batch is left
 * untouched (its loader owns it). NULL is allowed. */
void lb_batch_free(lb_batch *batch);

LB_API_END

#endif

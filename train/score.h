/* Scoring the rows of an event log with a trained detector: each row of a CSV file of
 * the training layout (data/events.h: the stored scaling and token maps applied) goes
 * through the model's streaming state (layers/stream.h), one state per source (one
 * stream per value of the sequence key), so every row is scored with everything its
 * source has seen before it.
 *
 * The score of a row: the model's output at that row (what LB_HEAD_LAST gives for the
 * source's sequence ending there; a model trained per event gives its per-position
 * output, which is the same). Its anomaly score is the softmax probability of class 1
 * for a binary label, 1 - p(class 0) with more classes (class 0 is "normal"); the
 * predicted class is the arg-max of the logits (the lowest index on a tie).
 *
 * Context: the model was trained on windows of seq_len rows, while a stream carries all
 * of its source's rows; max_context N (attention models) keeps the last N rows only, the
 * window a model trained on N rows saw (local attention keeps its window, the LSTM and
 * the convolution their states).
 *
 * lb_event_scorer_row (a live log, row by row, `lookback stream --csv`) and
 * lb_event_score_file (a whole file, each source fed as one chunk, `lookback predict
 * --csv`) give the same scores up to floating-point rounding (layers/stream.h: chunked
 * prefill equals event-by-event steps).
 */
#ifndef LB_TRAIN_SCORE_H
#define LB_TRAIN_SCORE_H

#include "tensor/api.h"

#include <stdint.h>
#include <stdio.h>

#include "data/events.h"
#include "layers/model.h"

LB_API_BEGIN

typedef struct lb_event_score {
    int64_t source;     /* the row's source, in order of first appearance */
    const char *key;    /* its key text (values joined by ','); valid during the call */
    int64_t row, line;  /* where the row is in the CSV (data/csv.h) */
    int64_t position;   /* rows its source had before it (0 = the source's first row) */
    int32_t label;      /* its label, -1 when the file has no label column */
    int32_t predicted;  /* arg-max class */
    double probability; /* softmax probability of the predicted class */
    double score;       /* anomaly score (see the top) */
    int64_t unseen;     /* token values of the row unseen in training */
} lb_event_score;

/* The detector of a checkpoint and the events schema of the file it was trained on (*schema,
 * caller frees; NULL on error); missing >= 0 (an lb_missing_policy) replaces the policy the
 * training file was imported with, which the schema records. Errors (NULL): LB_ERR_VALUE
 * "CK: the model was not trained on an imported CSV event log (no events schema), so --csv
 * does not apply: use --data or --input"; those of lb_checkpoint_read_events and
 * lb_checkpoint_load_model. */
lb_model *lb_event_model_load(const char *checkpoint, int missing, lb_event_schema **schema);

typedef struct lb_event_scorer lb_event_scorer;

/* A scorer for `model` (a classifier of real-valued inputs of schema->input_features
 * values per row, trained on the file the schema describes; both must outlive the
 * scorer). max_context as lb_stream_options (0 = all rows). Errors (NULL): LB_ERR_VALUE
 * when the model does not read the schema's rows (features, classes) or does not stream
 * (a non-causal attention model), LB_ERR_MEMORY. */
lb_event_scorer *lb_event_scorer_new(lb_model *model, const lb_event_schema *schema, int64_t max_context);
void lb_event_scorer_free(lb_event_scorer *s);
/* Scores one row (from lb_event_reader_next with the same schema), advancing its
 * source's state. Errors: the model's (memory); the states are then unchanged. */
lb_status lb_event_scorer_row(lb_event_scorer *s, const lb_event_row *row, lb_event_score *out);
/* Sources with a state, and the bytes their states hold (lb_model_state_bytes). */
int64_t lb_event_scorer_sources(const lb_event_scorer *s);
size_t lb_event_scorer_bytes(const lb_event_scorer *s);

/* Scores every row of the CSV file `path` with `schema`: the rows are read, grouped by
 * source, each source's rows fed through a fresh state in chunks of `chunk` rows (0 = all
 * of them at once), then fn(score, user) is called for every row in file order (a
 * non-zero return stops). *rows (may be NULL) receives the rows scored. Memory: the
 * rows' inputs (R x F floats) and one output per row. Errors: the reader's (one line
 * naming file, row and column), the model's, LB_ERR_MEMORY. */
typedef int (*lb_event_score_fn)(const lb_event_score *score, void *user);
lb_status lb_event_score_file(lb_model *model, const lb_event_schema *schema, const char *path, int64_t chunk,
                              int64_t max_context, lb_event_score_fn fn, void *user, int64_t *rows);

/* The scores CSV: its header line (without the newline), "row,line,source,position,label,
 * predicted,probability,score", and one scored row as a line of it written to out (the
 * source key quoted as RFC 4180 asks; probability and score with 9 significant digits).
 * _print_csv returns 0, or 1 when a write failed or an argument is NULL (then with
 * LB_ERR_VALUE). */
const char *lb_event_score_csv_header(void);
int lb_event_score_print_csv(FILE *out, const lb_event_score *s);

/* Scores every row of the CSV file `csv` as lb_event_score_file does and writes the scores
 * CSV `out`: to OUT.tmp, flushed to disk (fsync), then renamed into place; OUT is locked
 * meanwhile (lb_output_lock) and left as it was on failure. The caller checked `out`
 * (lb_output_check). *rows and *flagged (rows whose predicted class is not 0) may be
 * NULL. Errors: LB_ERR_VALUE (a NULL argument, a path too long), LB_ERR_IO naming OUT
 * (cannot write; the write failed: nothing was written), the lock's, the rename's, and
 * lb_event_score_file's. */
lb_status lb_event_score_write(lb_model *model, const lb_event_schema *schema, const char *csv, const char *out,
                               int64_t chunk, int64_t max_context, int64_t *rows, int64_t *flagged);

LB_API_END

#endif

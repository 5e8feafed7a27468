/* Your own event log: a CSV file of rows (events) from one or more sources, turned into
 * a lookback data file of windows (`lookback data csv`), and the same rows read again
 * for scoring (`lookback predict --csv`, `lookback stream --csv`). Format and options
 * in docs/events.md.
 *
 * Named dims: R rows of the CSV, S sources (distinct values of the sequence key),
 * T = seq_len (rows per window), F input features per row: the numeric feature
 * columns, then for each token column its values seen in training plus one slot for
 * an unseen value (one-hot), so F = n_numeric + sum over token columns (k_c + 1).
 *
 * The import:
 *   1. every row is read (data/csv.h), checked and grouped by its sequence key (rows
 *      of one source form one sequence; no key: the whole file is one source), sources
 *      in order of first appearance;
 *   2. each source's rows are sorted by the order key (a stable sort: ties keep file
 *      order; numbers compare as numbers when every value of the column is a number,
 *      otherwise as text in byte order, which orders ISO 8601 timestamps);
 *   3. splits (no leakage, windows never straddle two splits):
 *      time     each source's first (1 - val - test) of its rows train, the next val
 *               fraction val, the last test fraction test (row counts rounded down);
 *      sequence whole sources, in an order shuffled by `seed` (Fisher-Yates,
 *               tensor/rng.h), the first of them train, then val, then test;
 *   4. numeric features are standardised with the train split's rows only:
 *      x' = (x - mean) / std, std the population standard deviation (ddof 0, as
 *      sklearn's StandardScaler; a constant column gets std 1); token columns map each
 *      value seen in the train rows to ids 1..k in order of first appearance, and id 0
 *      is "unseen": a value not seen in training (in val, test, or new data) gets id 0;
 *   5. each split's rows of a source are cut into windows of T rows starting every
 *      `stride` rows; when the last window does not end at the segment's last row one
 *      more window ends there. A segment shorter than T gives no window: it is counted
 *      as skipped (or refused, with short_policy LB_SHORT_REFUSE).
 *   Targets: label_per event: every position's target is its row's label, except that a
 *   row already scored by an earlier window of the same segment gets -100 there (each
 *   row is scored exactly once); label_per sequence: the window's target is the label of
 *   its last row (what a detector that has read the events up to now says about now).
 *
 * The schema (columns, scaling, token maps, label, windows and where the file came
 * from) is stored in the data file as JSON text (/events/schema, uint8 [bytes]) and
 * carried into checkpoints (/data_events), so every later reader applies the same
 * scaling and maps.
 */
#ifndef LB_DATA_EVENTS_H
#define LB_DATA_EVENTS_H

#include "tensor/api.h"

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "tensor/error.h"

LB_API_BEGIN

typedef enum lb_label_per { LB_LABEL_PER_EVENT = 0, LB_LABEL_PER_SEQUENCE } lb_label_per;
typedef enum lb_split_by { LB_SPLIT_BY_TIME = 0, LB_SPLIT_BY_SEQUENCE } lb_split_by;
/* What a missing value (an empty field) in a feature, token, label, key or order column does:
 * LB_MISSING_REFUSE  the import stops, naming the row and column (the default);
 * LB_MISSING_SKIP    the row is left out (counted and reported);
 * LB_MISSING_PREVIOUS a feature or token takes the previous row's value of the same source
 *                    (in file order); a first row with a missing value, or a missing key,
 *                    order or label, is refused. */
typedef enum lb_missing_policy { LB_MISSING_REFUSE = 0, LB_MISSING_SKIP, LB_MISSING_PREVIOUS } lb_missing_policy;
/* How the order key's values compare: LB_ORDER_AUTO as numbers when every value is a
 * number, as text (byte order, which orders ISO 8601 timestamps) when none is, and a
 * column of both kinds is refused, naming the first value of the rarer kind (one 'n/a'
 * among numbers would otherwise sort 10 < 100 < 2); LB_ORDER_NUMBER every value must be
 * a number; LB_ORDER_TEXT every value compares as text. */
typedef enum lb_order_as { LB_ORDER_AUTO = 0, LB_ORDER_NUMBER, LB_ORDER_TEXT } lb_order_as;
/* A source (or a split's part of it) with fewer rows than one window. */
typedef enum lb_short_policy { LB_SHORT_SKIP = 0, LB_SHORT_REFUSE } lb_short_policy;

/* Options of the import; column lists are comma-separated header names. */
typedef struct lb_csv_options {
    const char *sequence_key; /* columns whose values name a source, or NULL: one source */
    const char *order_key;    /* column to sort each source's rows by, or NULL: file order */
    lb_order_as order_as;     /* how its values compare (default LB_ORDER_AUTO) */
    const char *features;     /* numeric columns, or NULL */
    const char *tokens;       /* categorical columns, or NULL (features or tokens required) */
    const char *label;        /* integer class column (0, 1, ...), required */
    int64_t num_classes;      /* the classes 0..num_classes-1 (a label outside is refused by row);
                                 0: the largest label + 1, refused when most of those classes
                                 would have no row (a stray value such as one 1000 among 0/1) */
    lb_label_per label_per;
    int64_t seq_len;          /* T >= 1 */
    int64_t stride;           /* >= 1; 0 = seq_len */
    lb_split_by split_by;
    double val_fraction, test_fraction; /* each in [0, 1), sum < 1; default 0.15 each */
    uint64_t seed;            /* split_by sequence */
    lb_missing_policy missing;
    lb_short_policy short_policy;
} lb_csv_options;

/* Defaults: label_per event, seq_len 64, stride 0 (= seq_len), split by time, val and
 * test 0.15, seed 1, missing refuse, short skip. */
void lb_csv_options_default(lb_csv_options *opt);

/* "event"/"sequence", "time"/"sequence", "refuse"/"skip"/"previous", "skip"/"refuse",
 * "auto"/"number"/"text" parsers: LB_ERR_VALUE naming the word and the choices. */
lb_status lb_label_per_parse(const char *text, lb_label_per *out);
lb_status lb_split_by_parse(const char *text, lb_split_by *out);
lb_status lb_missing_parse(const char *text, lb_missing_policy *out);
lb_status lb_short_parse(const char *text, lb_short_policy *out);
lb_status lb_order_as_parse(const char *text, lb_order_as *out);

/* One numeric feature: its column and the train split's statistics (raw units). */
typedef struct lb_event_feature {
    char *name;
    double mean, std; /* the scaling: x' = (x - mean) / std */
    double min, max;  /* over every imported row */
} lb_event_feature;

/* One token column: value i (0-based) has id i + 1; id 0 = a value unseen in training. */
typedef struct lb_event_tokens {
    char *name;
    int64_t n_values;
    char **values;
} lb_event_tokens;

/* Everything a reader of new rows needs, and where the windows came from. */
typedef struct lb_event_schema {
    int64_t n_keys;
    char **sequence_key;      /* [n_keys] column names (n_keys 0: one source) */
    char *order_key;          /* NULL: file order */
    lb_order_as order_as;     /* how the import compared its values: number or text (auto: a
                                 schema written before the choice was stored) */
    int64_t n_features;
    lb_event_feature *features;
    int64_t n_tokens;
    lb_event_tokens *tokens;
    char *label;
    lb_label_per label_per;
    int64_t num_classes;      /* the import's num_classes, else the largest label + 1 (at least 2) */
    int64_t seq_len, stride;
    int64_t input_features;   /* F (see the top) */
    /* provenance */
    char *source_file;
    lb_split_by split_by;
    double val_fraction, test_fraction;
    uint64_t seed;
    lb_missing_policy missing;
    lb_short_policy short_policy;
    int64_t rows, rows_skipped;        /* rows imported, rows left out (missing skip) */
    int64_t sources;                   /* S */
    int64_t sources_split[3];          /* sources with at least one window in train, val, test */
    int64_t segments_short;            /* split segments shorter than T (no window) */
    int64_t windows[3];                /* windows of train, val, test */
    int64_t n_named[3];                /* the first (at most 32) sources with windows in each split: */
    char **named[3];                   /* their keys, in source order (split_by sequence shows where
                                          each source went) */
    int64_t *train_labels;             /* [num_classes] scored targets of each class in the train
                                          windows of the import (the majority baseline's class);
                                          with --like, those of the model's training file */
} lb_event_schema;

void lb_event_schema_free(lb_event_schema *s);
/* The schema as JSON text (caller frees) / back from JSON text (`file` names it in
 * messages). Parsing checks every member's type and range (F consistent with the
 * columns, std > 0 and finite, classes >= 2, ...): LB_ERR_FORMAT "FILE: events schema:
 * ..." otherwise. */
char *lb_event_schema_to_json(const lb_event_schema *s);
lb_event_schema *lb_event_schema_from_json(const char *json, size_t len, const char *file);
/* 1 when two schemas read rows identically (same columns, scaling bit for bit, token
 * maps, label, classes, label_per), 0 otherwise; `why` (size bytes, may be NULL)
 * receives the first difference. */
int lb_event_schema_same_reading(const lb_event_schema *a, const lb_event_schema *b, char *why, size_t size);

/* Imports `csv_path` with `opt` into the data file `out_path` (format version 1, task
 * "events", real-valued inputs float32 [N, T, F], targets int32 [N, T] or [N]; written
 * through a temporary file and the checks of data/output.h, so nothing is written on
 * any error). *schema_out (may be NULL) receives the schema (caller frees).
 * Errors, each one line naming the file, row, line and column: LB_ERR_VALUE for bad
 * options (a column named twice, no features or tokens, fractions out of range);
 * LB_ERR_FORMAT for the file: empty, no data row, a named column missing from the
 * header or present twice, a ragged row (not as many fields as the header), a missing
 * value (policy refuse), a feature that is not a finite number, a label that is not a
 * whole number in [0, 2^20) (or outside [0, num_classes) when given), a single class, a
 * sparse label set (num_classes 0 and the largest label + 1 more than twice the distinct
 * values: the values and the row of the largest are named), a source shorter than a window (policy
 * refuse), no window in the train split; LB_ERR_IO, LB_ERR_MEMORY. */
lb_status lb_csv_import(const char *csv_path, const lb_csv_options *opt, const char *out_path,
                        lb_event_schema **schema_out);

/* Imports new rows with the schema of a trained model or of its training file: the same
 * columns (a label column is used when present), scaling and token maps, the schema's
 * seq_len and stride, every window in the test split (train and val empty). Errors as
 * lb_csv_import. */
lb_status lb_csv_import_like(const char *csv_path, const lb_event_schema *like, const char *out_path,
                             lb_event_schema **schema_out);

/* ---- reading new rows one at a time (predict, stream) ---- */

typedef struct lb_event_reader lb_event_reader;

/* One row, converted. */
typedef struct lb_event_row {
    int64_t source;      /* index of its source, in order of first appearance */
    const char *key;     /* the source's key text (values joined by ','), "" without key */
    const float *features; /* [F] scaled features and one-hot tokens */
    int32_t label;       /* its label, or -1 when the file has no label column */
    int64_t row, line;   /* where it is in the file (data/csv.h) */
    int64_t unseen;      /* token values of this row unseen in training (id 0) */
} lb_event_row;

/* Opens `path` ("-" = standard input) for reading rows with `schema`: the header must
 * name every feature, token and key column of the schema (the label and order columns
 * are optional; other columns are ignored). Rows are returned in file order (a live
 * log is read as it arrives). Errors (NULL): as lb_csv_open, and LB_ERR_FORMAT for a
 * missing or duplicated column. */
lb_event_reader *lb_event_reader_open(const char *path, const lb_event_schema *schema);
void lb_event_reader_close(lb_event_reader *r);
/* The next row: 1, 0 at the end, -1 on error (one line naming file, row, line and
 * column: a ragged row, a missing or non-numeric value, a bad label). Missing values
 * follow the schema's policy (skip: the row is passed over and counted). */
int lb_event_reader_next(lb_event_reader *r, lb_event_row *row);
/* Sources seen so far, rows skipped for missing values. */
int64_t lb_event_reader_sources(const lb_event_reader *r);
int64_t lb_event_reader_skipped(const lb_event_reader *r);

/* Prints the schema part of `lookback data info`: sources, windows per split, the
 * features' statistics, token columns. */
void lb_event_schema_print(const lb_event_schema *s, FILE *out);

LB_API_END

#endif

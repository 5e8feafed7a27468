/* What `lookback eval` prints of an evaluation (lb_evaluate, train/trainer.h): a table
 * for people or one JSON object, by the kind of data: a text corpus (loss in nats per
 * token, bits per byte and per character of the text, perplexity, the split's own
 * unigram entropy),
 * regression (MSE beside the mean predictor's, per distance bin) or classes (accuracy
 * beside chance or, for an imported event log, the majority-class baseline; per distance
 * bin; per output index of the copy task; per class precision, recall, F1, the
 * confusion matrix and for a binary label the PR-AUC, docs/events.md). */
#ifndef LB_LAB_EVAL_REPORT_H
#define LB_LAB_EVAL_REPORT_H

#include <stdio.h>

#include "data/dataset.h"
#include "data/events.h"
#include "tensor/api.h"
#include "train/trainer.h"

LB_API_BEGIN

typedef struct lb_eval_report {
    const char *checkpoint, *data_path, *split; /* as given, for the header */
    const lb_dataset *data;                     /* the evaluated file (open) */
    const lb_event_schema *trained;             /* the checkpoint's event schema, or NULL */
    const lb_eval_result *result;
} lb_eval_report;

/* Prints the table, or one JSON object on one line (keys: checkpoint, data, split,
 * examples, loss; bits_per_byte, bits_per_char, perplexity, tokens, seq_len for text;
 * mse, baseline_mse and distance_bins for regression; accuracy, chance, distance_bins,
 * accuracy_per_output and classes otherwise). Nothing when an argument is NULL. */
void lb_eval_print_table(FILE *out, const lb_eval_report *rep);
void lb_eval_print_json(FILE *out, const lb_eval_report *rep);

LB_API_END

#endif

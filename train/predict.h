/* A model's outputs for the first examples of a split (`lookback predict`), through the
 * full forward or through the streaming state (layers/stream.h), which gives the same
 * numbers within float rounding (chunked prefill equals event-by-event steps). The
 * outputs are what data/results.h writes. */
#ifndef LB_TRAIN_PREDICT_H
#define LB_TRAIN_PREDICT_H

#include "tensor/api.h"

#include <stdint.h>

#include "data/dataset.h"
#include "data/results.h"
#include "layers/model.h"
#include "tensor/error.h"

LB_API_BEGIN

typedef struct lb_predict_options {
    int64_t batch;       /* examples per forward pass, or streams fed at once (>= 1) */
    int incremental;     /* 1: through the streaming state, `chunk` events per step */
    int64_t chunk;       /* events per streaming step (>= 1; incremental only) */
    int64_t max_context; /* incremental: an attention model's key-value cache keeps the last
                            max_context events only (0 = all; lb_stream_options) */
} lb_predict_options;

/* The outputs of `model` for examples [0, n) of `split` of `data` into *out: P = T (the
 * model's head gives a target per position, LB_HEAD_EVERY) or 1, W = the model's classes
 * or 1 for regression; positions past an example's length are NaN. The full path runs
 * lb_model_forward without gradients on `batch` examples at a time; the incremental path
 * makes each example a stream (lb_model_state_new) and feeds it `chunk` events per
 * lb_model_step_chunk, keeping the output at every event (per position) or at each
 * example's last event (per sequence). Features are converted to the model's dtype.
 * out->output is allocated here (free with lb_predictions_free); it is NULL after a
 * failure. The caller checked that the model fits the data (lb_model_data_check).
 * Errors: LB_ERR_VALUE (a NULL argument, n < 1 or beyond the split, batch or chunk < 1,
 * max_context < 0), LB_ERR_MEMORY, and the forward's or the streaming state's. */
lb_status lb_predict(lb_model *model, const lb_dataset *data, const char *split, int64_t n,
                     const lb_predict_options *opt, lb_predictions *out);

/* The summary of predictions against their targets: with `values` (regression, [N])
 * the mean squared error of output[i] - values[i]; else with `targets` ([N * P] classes,
 * < 0 ignored) the accuracy of the argmax of the logits (the first of equal ones) over
 * the targets that are not ignored and whose logits are not NaN (one of targets and
 * values may be NULL). *scored counts the terms of the mean. NaN when none is scored;
 * NaN with LB_ERR_VALUE when pr, its output or scored is NULL, or both targets and
 * values are. */
double lb_predictions_score(const lb_predictions *pr, const int32_t *targets, const float *values, int64_t *scored);

LB_API_END

#endif

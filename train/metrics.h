/* Classification measures for rare events, next to the accuracy of lb_evaluate: the
 * confusion matrix, per-class precision, recall and F1, macro-F1, the area under the
 * precision-recall curve of a binary label (average precision), the majority-class
 * baseline, and balanced class weights. Pure functions on counts and scores; the
 * trainer and `lookback eval` fill them from a model's predictions.
 *
 * Definitions (scikit-learn's, named where they are used):
 *   confusion[t * C + p]  the targets of class t predicted as p (rows: true class);
 *   precision_c = TP_c / (TP_c + FP_c), recall_c = TP_c / (TP_c + FN_c),
 *   F1_c = 2 P R / (P + R); a 0/0 is 0 (sklearn's zero_division=0: a class never
 *   predicted has precision 0, a class without targets recall 0, and F1 0 then);
 *   macro-F1 = mean of F1_c over the classes that occur among the targets or the
 *   predictions (sklearn's f1_score(average="macro") with its default labels);
 *   average precision (sklearn.metrics.average_precision_score):
 *   AP = sum_k (R_k - R_{k-1}) P_k over the distinct scores in decreasing order, P_k and
 *   R_k the precision and recall of predicting positive every score >= the k-th (tied
 *   scores enter together, R_0 = 0); a constant score gives the positive rate;
 *   balanced weights (sklearn.utils.class_weight.compute_class_weight("balanced")):
 *   w_c = n_samples / (n_classes * count_c).
 */
#ifndef LB_TRAIN_METRICS_H
#define LB_TRAIN_METRICS_H

#include "tensor/api.h"

#include <stdint.h>

#include "tensor/error.h"

LB_API_BEGIN

enum { LB_METRICS_MAX_CLASSES = 16 }; /* confusion matrices up to 16 x 16 */

typedef struct lb_class_report {
    int64_t num_classes;   /* C; 0 = not computed (regression, or C > LB_METRICS_MAX_CLASSES) */
    int64_t confusion[LB_METRICS_MAX_CLASSES * LB_METRICS_MAX_CLASSES]; /* [C, C] row-major */
    /* filled by lb_class_report_finish: */
    int64_t total;                              /* scored targets */
    int64_t support[LB_METRICS_MAX_CLASSES];    /* targets of each class */
    int64_t predicted[LB_METRICS_MAX_CLASSES];  /* predictions of each class */
    double precision[LB_METRICS_MAX_CLASSES], recall[LB_METRICS_MAX_CLASSES], f1[LB_METRICS_MAX_CLASSES];
    double macro_f1;       /* NAN when total is 0 */
    double accuracy;       /* trace / total */
} lb_class_report;

/* Clears the report for C classes (C > LB_METRICS_MAX_CLASSES or C < 1: num_classes 0,
 * nothing is counted). */
void lb_class_report_init(lb_class_report *r, int64_t num_classes);
/* Counts one target t predicted as p (both in [0, C); others are ignored). */
void lb_class_report_add(lb_class_report *r, int32_t target, int32_t predicted);
/* Adds b's counts into a (the same C). */
void lb_class_report_merge(lb_class_report *a, const lb_class_report *b);
/* Computes total, support, predicted, precision, recall, F1, macro-F1 and accuracy from
 * the confusion matrix (the definitions at the top). */
void lb_class_report_finish(lb_class_report *r);
/* The F1 a detector is judged by: class 1's for a binary label (the rare event), the
 * macro-F1 otherwise; NAN when not computed. */
double lb_class_report_detector_f1(const lb_class_report *r);

/* Average precision of scores [n] for binary labels positive [n] (1 = positive, 0 =
 * negative, anything else is skipped), as sklearn's average_precision_score (top). NAN
 * with LB_ERR_VALUE when no positive label is given (undefined; sklearn warns and gives
 * 0) or an argument is NULL with n > 0; NAN scores are refused (LB_ERR_VALUE). O(n log n),
 * allocates n indices (LB_ERR_MEMORY). */
double lb_average_precision(int64_t n, const int32_t *positive, const float *score);

/* The majority-class baseline on a split whose targets have `support` [C] counts: the
 * class most frequent in the TRAINING targets `train_counts` [C] (the lowest index on a
 * tie) predicted for every target. *accuracy = support[m] / total, *macro_f1 as
 * lb_class_report would give it (F1_m = 2 s / (s + total) with s = support[m], others 0,
 * averaged over the classes present), *average_precision = the positive rate of a
 * binary label (a constant score's AP), NAN otherwise. Returns m, or -1 with
 * LB_ERR_VALUE for NULL arguments, C < 1 or no training target. */
int64_t lb_majority_baseline(const int64_t *train_counts, const int64_t *support, int64_t num_classes,
                             double *accuracy, double *macro_f1, double *average_precision);

/* Balanced class weights from the training targets' counts [C] (sklearn's "balanced":
 * w_c = n / (C * count_c), n = sum of counts) into weights [C]; a class without
 * training targets gets weight 0 (it has nothing to weigh; sklearn refuses it).
 * LB_ERR_VALUE for NULL arguments, C < 1, a negative count or no target at all. */
lb_status lb_balanced_class_weights(const int64_t *counts, int64_t num_classes, double *weights);

LB_API_END

#endif

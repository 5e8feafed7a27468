/* Confusion matrix, precision / recall / F1, average precision, the majority baseline
 * and balanced class weights (definitions in train/metrics.h). */
#include "train/metrics.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

void lb_class_report_init(lb_class_report *r, int64_t num_classes)
{
    LB_CHECK_ARG(r);
    memset(r, 0, sizeof *r);
    r->num_classes = num_classes >= 1 && num_classes <= LB_METRICS_MAX_CLASSES ? num_classes : 0;
    r->macro_f1 = r->accuracy = NAN;
}

void lb_class_report_add(lb_class_report *r, int32_t target, int32_t predicted)
{
    LB_CHECK_ARG(r);
    if (target < 0 || predicted < 0 || target >= r->num_classes || predicted >= r->num_classes)
        return;
    r->confusion[target * r->num_classes + predicted]++;
}

void lb_class_report_merge(lb_class_report *a, const lb_class_report *b)
{
    LB_CHECK_ARG(a);
    LB_CHECK_ARG(b);
    if (a->num_classes != b->num_classes)
        return;
    for (int64_t i = 0; i < a->num_classes * a->num_classes; i++)
        a->confusion[i] += b->confusion[i];
}

static double ratio(int64_t a, int64_t b) { return b > 0 ? (double)a / (double)b : 0.0; }

void lb_class_report_finish(lb_class_report *r)
{
    LB_CHECK_ARG(r);
    int64_t C = r->num_classes, trace = 0;
    r->total = 0;
    for (int64_t c = 0; c < C; c++) {
        r->support[c] = r->predicted[c] = 0;
        for (int64_t k = 0; k < C; k++) {
            r->support[c] += r->confusion[c * C + k];
            r->predicted[c] += r->confusion[k * C + c];
        }
        r->total += r->support[c];
        trace += r->confusion[c * C + c];
    }
    double f1_sum = 0;
    int64_t present = 0;
    for (int64_t c = 0; c < C; c++) {
        int64_t tp = r->confusion[c * C + c];
        r->precision[c] = ratio(tp, r->predicted[c]); /* never predicted: 0 (zero_division=0) */
        r->recall[c] = ratio(tp, r->support[c]);
        double p = r->precision[c], q = r->recall[c];
        r->f1[c] = p + q > 0 ? 2 * p * q / (p + q) : 0.0;
        if (r->support[c] > 0 || r->predicted[c] > 0) {
            f1_sum += r->f1[c];
            present++;
        }
    }
    r->macro_f1 = present > 0 ? f1_sum / (double)present : NAN;
    r->accuracy = r->total > 0 ? (double)trace / (double)r->total : NAN;
}

double lb_class_report_detector_f1(const lb_class_report *r)
{
    LB_CHECK_ARG(r, NAN);
    if (r->num_classes == 0 || r->total == 0)
        return NAN;
    return r->num_classes == 2 ? r->f1[1] : r->macro_f1;
}

/* ---- average precision ---- */

typedef struct scored {
    float score;
    int32_t positive;
} scored;

static int by_score_desc(const void *a, const void *b)
{
    float x = ((const scored *)a)->score, y = ((const scored *)b)->score;
    return x < y ? 1 : x > y ? -1 : 0;
}

double lb_average_precision(int64_t n, const int32_t *positive, const float *score)
{
    if (n < 0 || (n > 0 && (!positive || !score))) {
        lb_error(LB_ERR_VALUE, "lb_average_precision: labels and scores must not be NULL (n = %lld)", (long long)n);
        return NAN;
    }
    scored *v = malloc((size_t)(n > 0 ? n : 1) * sizeof *v);
    if (!v) {
        lb_error(LB_ERR_MEMORY, "average precision: out of memory for %lld scores", (long long)n);
        return NAN;
    }
    int64_t m = 0, positives = 0;
    for (int64_t i = 0; i < n; i++) {
        if (positive[i] != 0 && positive[i] != 1)
            continue;
        if (isnan(score[i])) {
            free(v);
            lb_error(LB_ERR_VALUE, "average precision: score %lld is NaN", (long long)i);
            return NAN;
        }
        v[m].score = score[i];
        v[m++].positive = positive[i];
        positives += positive[i];
    }
    if (positives == 0) {
        free(v);
        lb_error(LB_ERR_VALUE, "average precision: no positive target (it is undefined without one)");
        return NAN;
    }
    qsort(v, (size_t)m, sizeof *v, by_score_desc);
    double ap = 0, recall_before = 0;
    int64_t tp = 0, fp = 0;
    for (int64_t i = 0; i < m;) {
        int64_t j = i; /* the scores tied with v[i] enter together */
        for (; j < m && v[j].score == v[i].score; j++) {
            tp += v[j].positive;
            fp += !v[j].positive;
        }
        double recall = (double)tp / (double)positives, precision = (double)tp / (double)(tp + fp);
        ap += (recall - recall_before) * precision;
        recall_before = recall;
        i = j;
    }
    free(v);
    return ap;
}

/* ---- the majority baseline and balanced weights ---- */

int64_t lb_majority_baseline(const int64_t *train_counts, const int64_t *support, int64_t num_classes,
                             double *accuracy, double *macro_f1, double *average_precision)
{
    if (!train_counts || !support || !accuracy || !macro_f1 || !average_precision || num_classes < 1) {
        lb_error(LB_ERR_VALUE, "lb_majority_baseline: NULL argument or no class");
        return -1;
    }
    int64_t m = 0, train_total = 0, total = 0, present = 0;
    for (int64_t c = 0; c < num_classes; c++) {
        m = train_counts[c] > train_counts[m] ? c : m;
        train_total += train_counts[c];
        total += support[c];
    }
    if (train_total <= 0) {
        lb_error(LB_ERR_VALUE, "majority baseline: the training split has no scored target");
        return -1;
    }
    for (int64_t c = 0; c < num_classes; c++)
        present += support[c] > 0 || c == m;
    double s = (double)support[m];
    *accuracy = total > 0 ? s / (double)total : NAN;
    double f1_m = s + (double)total > 0 ? 2 * s / (s + (double)total) : 0.0; /* precision s/total, recall 1 */
    *macro_f1 = total > 0 ? f1_m / (double)present : NAN;
    *average_precision = num_classes == 2 && support[1] > 0 ? (double)support[1] / (double)total : NAN;
    return m;
}

lb_status lb_balanced_class_weights(const int64_t *counts, int64_t num_classes, double *weights)
{
    if (!counts || !weights || num_classes < 1)
        return lb_error(LB_ERR_VALUE, "lb_balanced_class_weights: NULL argument or no class");
    int64_t n = 0;
    for (int64_t c = 0; c < num_classes; c++) {
        if (counts[c] < 0)
            return lb_error(LB_ERR_VALUE, "balanced class weights: count %lld of class %lld is negative",
                            (long long)counts[c], (long long)c);
        n += counts[c];
    }
    if (n == 0)
        return lb_error(LB_ERR_VALUE, "balanced class weights: the training split has no scored target");
    for (int64_t c = 0; c < num_classes; c++)
        weights[c] = counts[c] > 0 ? (double)n / ((double)num_classes * (double)counts[c]) : 0.0;
    return LB_OK;
}

/* The measures for rare events (train/metrics.h) against hand-computed values: the
 * confusion matrix, precision, recall, F1, macro-F1 (a class never predicted has
 * precision 0), average precision with tied scores, the majority baseline, balanced
 * class weights; and through the trainer: the class report of lb_evaluate, the balanced
 * weights of a training file, --select f1. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "data/events.h"
#include "support.h"
#include "train/metrics.h"
#include "train/trainer.h"

static char dir[256];

static void test_binary_report(void)
{
    static const int32_t target[10] = {1, 0, 1, 1, 0, 0, 0, 1, 0, 0};
    static const int32_t pred[10] = {1, 0, 0, 1, 1, 0, 0, 0, 0, 0};
    lb_class_report r;
    lb_class_report_init(&r, 2);
    for (int i = 0; i < 10; i++)
        lb_class_report_add(&r, target[i], pred[i]);
    lb_class_report_add(&r, -100, 0); /* ignored targets are not counted */
    lb_class_report_finish(&r);
    /* TP 2, FN 2, FP 1, TN 5 */
    CU_ASSERT_EQUAL(r.confusion[0], 5);
    CU_ASSERT_EQUAL(r.confusion[1], 1);
    CU_ASSERT_EQUAL(r.confusion[2], 2);
    CU_ASSERT_EQUAL(r.confusion[3], 2);
    CU_ASSERT_EQUAL(r.total, 10);
    CU_ASSERT_DOUBLE_EQUAL(r.precision[1], 2.0 / 3.0, 1e-12);
    CU_ASSERT_DOUBLE_EQUAL(r.recall[1], 0.5, 1e-12);
    CU_ASSERT_DOUBLE_EQUAL(r.f1[1], 4.0 / 7.0, 1e-12);
    CU_ASSERT_DOUBLE_EQUAL(r.precision[0], 5.0 / 7.0, 1e-12);
    CU_ASSERT_DOUBLE_EQUAL(r.recall[0], 5.0 / 6.0, 1e-12);
    CU_ASSERT_DOUBLE_EQUAL(r.f1[0], 10.0 / 13.0, 1e-12);
    CU_ASSERT_DOUBLE_EQUAL(r.macro_f1, 61.0 / 91.0, 1e-12);
    CU_ASSERT_DOUBLE_EQUAL(r.accuracy, 0.7, 1e-12);
    CU_ASSERT_DOUBLE_EQUAL(lb_class_report_detector_f1(&r), 4.0 / 7.0, 1e-12);
    /* merging two halves gives the whole */
    lb_class_report a, b;
    lb_class_report_init(&a, 2);
    lb_class_report_init(&b, 2);
    for (int i = 0; i < 10; i++)
        lb_class_report_add(i < 4 ? &a : &b, target[i], pred[i]);
    lb_class_report_merge(&a, &b);
    lb_class_report_finish(&a);
    CU_ASSERT_EQUAL(memcmp(a.confusion, r.confusion, sizeof r.confusion), 0);
    CU_ASSERT_DOUBLE_EQUAL(a.macro_f1, r.macro_f1, 0);
}

static void test_class_never_predicted(void)
{
    static const int32_t target[4] = {0, 1, 2, 2}, pred[4] = {0, 1, 1, 0};
    for (int C = 3; C <= 4; C++) { /* a 4th class absent from targets and predictions is not averaged */
        lb_class_report r;
        lb_class_report_init(&r, C);
        for (int i = 0; i < 4; i++)
            lb_class_report_add(&r, target[i], pred[i]);
        lb_class_report_finish(&r);
        CU_ASSERT_EQUAL(r.predicted[2], 0);
        CU_ASSERT_DOUBLE_EQUAL(r.precision[2], 0.0, 0); /* never predicted: precision 0 (zero_division=0) */
        CU_ASSERT_DOUBLE_EQUAL(r.recall[2], 0.0, 0);
        CU_ASSERT_DOUBLE_EQUAL(r.f1[2], 0.0, 0);
        CU_ASSERT_DOUBLE_EQUAL(r.f1[0], 2.0 / 3.0, 1e-12);
        CU_ASSERT_DOUBLE_EQUAL(r.f1[1], 2.0 / 3.0, 1e-12);
        CU_ASSERT_DOUBLE_EQUAL(r.macro_f1, 4.0 / 9.0, 1e-12);
        CU_ASSERT_DOUBLE_EQUAL(lb_class_report_detector_f1(&r), 4.0 / 9.0, 1e-12);
        CU_ASSERT_DOUBLE_EQUAL(r.accuracy, 0.5, 1e-12);
    }
    lb_class_report big;
    lb_class_report_init(&big, LB_METRICS_MAX_CLASSES + 1);
    CU_ASSERT_EQUAL(big.num_classes, 0);
    CU_ASSERT_TRUE(isnan(lb_class_report_detector_f1(&big)));
}

static void test_average_precision(void)
{
    /* descending: 0.9 (+), 0.8 tie (- and +), 0.3 (-), 0.1 (+):
     * AP = 1/3 * 1 + 1/3 * 2/3 + 0 + 1/3 * 3/5 = 34/45 */
    static const int32_t y[5] = {1, 0, 1, 0, 1};
    static const float s[5] = {0.9f, 0.8f, 0.8f, 0.3f, 0.1f};
    CU_ASSERT_DOUBLE_EQUAL(lb_average_precision(5, y, s), 34.0 / 45.0, 1e-12);
    /* the order of tied samples does not matter */
    static const int32_t y2[5] = {1, 1, 0, 0, 1};
    static const float s2[5] = {0.9f, 0.8f, 0.8f, 0.3f, 0.1f};
    CU_ASSERT_DOUBLE_EQUAL(lb_average_precision(5, y2, s2), 34.0 / 45.0, 1e-12);
    /* a perfect ranking gives 1, a constant score the positive rate */
    static const int32_t y3[4] = {0, 1, 0, 0};
    static const float s3[4] = {0.1f, 0.7f, 0.2f, 0.3f}, c3[4] = {0.5f, 0.5f, 0.5f, 0.5f};
    CU_ASSERT_DOUBLE_EQUAL(lb_average_precision(4, y3, s3), 1.0, 1e-12);
    CU_ASSERT_DOUBLE_EQUAL(lb_average_precision(4, y3, c3), 0.25, 1e-12);
    /* the worst ranking: the positive last of 4 -> precision 1/4 at recall 1 */
    static const float w3[4] = {0.9f, 0.1f, 0.8f, 0.7f};
    CU_ASSERT_DOUBLE_EQUAL(lb_average_precision(4, y3, w3), 0.25, 1e-12);
    /* labels other than 0/1 (ignored targets) are skipped */
    static const int32_t y4[3] = {1, -100, 0};
    static const float s4[3] = {0.2f, 0.9f, 0.1f};
    CU_ASSERT_DOUBLE_EQUAL(lb_average_precision(3, y4, s4), 1.0, 1e-12);
    /* undefined without a positive; NaN scores and NULL refused */
    static const int32_t none[2] = {0, 0};
    CU_ASSERT_TRUE(isnan(lb_average_precision(2, none, s4)));
    CU_ASSERT_TRUE(lb_test_error_has("no positive"));
    static const float bad[2] = {NAN, 0.5f};
    CU_ASSERT_TRUE(isnan(lb_average_precision(2, y4, bad)));
    CU_ASSERT_TRUE(lb_test_error_has("NaN"));
    CU_ASSERT_TRUE(isnan(lb_average_precision(2, NULL, s4)));
}

static void test_baseline_and_balanced_weights(void)
{
    static const int64_t train[2] = {90, 10}, support[2] = {8, 2};
    double acc, f1, ap;
    CU_ASSERT_EQUAL(lb_majority_baseline(train, support, 2, &acc, &f1, &ap), 0);
    CU_ASSERT_DOUBLE_EQUAL(acc, 0.8, 1e-12);
    CU_ASSERT_DOUBLE_EQUAL(f1, (16.0 / 18.0) / 2.0, 1e-12); /* F1_0 = 2*8/(8+10), class 1 F1 0 */
    CU_ASSERT_DOUBLE_EQUAL(ap, 0.2, 1e-12);
    /* the baseline's macro-F1 is what the report gives for the constant prediction */
    lb_class_report r;
    lb_class_report_init(&r, 2);
    for (int i = 0; i < 10; i++)
        lb_class_report_add(&r, i < 8 ? 0 : 1, 0);
    lb_class_report_finish(&r);
    CU_ASSERT_DOUBLE_EQUAL(r.macro_f1, f1, 1e-12);
    CU_ASSERT_DOUBLE_EQUAL(r.accuracy, acc, 1e-12);
    static const int64_t empty[2] = {0, 0};
    CU_ASSERT_EQUAL(lb_majority_baseline(empty, support, 2, &acc, &f1, &ap), -1);

    double w[3];
    CU_ASSERT_EQUAL(lb_balanced_class_weights(train, 2, w), LB_OK);
    CU_ASSERT_DOUBLE_EQUAL(w[0], 100.0 / 180.0, 1e-12);
    CU_ASSERT_DOUBLE_EQUAL(w[1], 5.0, 1e-12);
    static const int64_t three[3] = {3, 0, 1};
    CU_ASSERT_EQUAL(lb_balanced_class_weights(three, 3, w), LB_OK);
    CU_ASSERT_DOUBLE_EQUAL(w[0], 4.0 / 9.0, 1e-12);
    CU_ASSERT_DOUBLE_EQUAL(w[1], 0.0, 0); /* no training target: nothing to weigh */
    CU_ASSERT_DOUBLE_EQUAL(w[2], 4.0 / 3.0, 1e-12);
    CU_ASSERT_EQUAL(lb_balanced_class_weights(empty, 2, w), LB_ERR_VALUE);
    static const int64_t negative[2] = {3, -1};
    CU_ASSERT_EQUAL(lb_balanced_class_weights(negative, 2, w), LB_ERR_VALUE);
}

/* A small imported event log: 2 sources, a rare label that follows a feature spike. */
static const char *events_file(void)
{
    static char path[512];
    char csv[512];
    snprintf(csv, sizeof csv, "%s/log.csv", dir);
    snprintf(path, sizeof path, "%s/log.h5", dir);
    FILE *f = fopen(csv, "w");
    fprintf(f, "src,t,x,label\n");
    for (int t = 0; t < 400; t++)
        for (int s = 0; s < 2; s++)
            fprintf(f, "s%d,%d,%d,%d\n", s, t, (t * 7 + s) % 13 == 0 ? 50 : (t * 3 + s) % 5, (t * 7 + s) % 13 == 0);
    fclose(f);
    lb_csv_options o;
    lb_csv_options_default(&o);
    o.sequence_key = "src";
    o.order_key = "t";
    o.features = "x";
    o.label = "label";
    o.seq_len = 16;
    if (lb_csv_import(csv, &o, path, NULL) != LB_OK)
        fprintf(stderr, "\n  import: %s\n", lb_last_error());
    return path;
}

static void test_trainer_measures(void)
{
    lb_dataset *ds = lb_dataset_open(events_file());
    CU_ASSERT_PTR_NOT_NULL_FATAL(ds);
    lb_model_config mc;
    lb_model_config_default(LB_MODEL_LSTM, &mc);
    mc.n_layers = 1;
    mc.hidden_size = 8;
    mc.d_model = 8;
    CU_ASSERT_EQUAL(lb_model_config_fit_data(&mc, ds), LB_OK);
    lb_model *m = lb_model_new(&mc);
    CU_ASSERT_PTR_NOT_NULL_FATAL(m);
    lb_eval_result r;
    CU_ASSERT_EQUAL_FATAL(lb_evaluate(m, ds, "test", 0, 8, 0, &r, NULL), LB_OK);
    CU_ASSERT_EQUAL(r.classes.num_classes, 2);
    CU_ASSERT_EQUAL(r.classes.total, r.scored);
    CU_ASSERT_DOUBLE_EQUAL(r.classes.accuracy, r.accuracy, 1e-12);
    int64_t counts[2], support[2];
    CU_ASSERT_EQUAL(lb_dataset_label_histogram(ds, "test", support, NULL), LB_OK);
    CU_ASSERT_EQUAL(r.classes.support[0], support[0]);
    CU_ASSERT_EQUAL(r.classes.support[1], support[1]);
    CU_ASSERT_TRUE(support[1] > 0);
    CU_ASSERT_TRUE(r.average_precision > 0 && r.average_precision <= 1);
    int higher = 0;
    CU_ASSERT_DOUBLE_EQUAL(lb_val_score(&r, LB_SELECT_F1, &higher), r.classes.f1[1], 0);
    CU_ASSERT_TRUE(higher);
    CU_ASSERT_DOUBLE_EQUAL(lb_val_score(&r, LB_SELECT_PR_AUC, &higher), r.average_precision, 0);
    CU_ASSERT_DOUBLE_EQUAL(lb_val_score(&r, LB_SELECT_MACRO_F1, &higher), r.classes.macro_f1, 0);
    lb_val_select sel;
    CU_ASSERT_EQUAL(lb_val_select_parse("macro-f1", &sel), LB_OK);
    CU_ASSERT_EQUAL(sel, LB_SELECT_MACRO_F1);
    CU_ASSERT_EQUAL(lb_val_select_parse("f2", &sel), LB_ERR_VALUE);

    /* balanced weights from the train split's targets */
    lb_train_config tc;
    lb_train_config_default(&tc);
    tc.steps = 4;
    tc.batch_size = 8;
    tc.eval_every = 2;
    tc.class_weight = 1;
    tc.select = LB_SELECT_F1;
    lb_trainer *t = lb_trainer_new(m, ds, &tc);
    CU_ASSERT_PTR_NOT_NULL_FATAL(t);
    CU_ASSERT_EQUAL(lb_dataset_label_histogram(ds, "train", counts, NULL), LB_OK);
    int64_t n = 0;
    double w[LB_METRICS_MAX_CLASSES];
    CU_ASSERT_EQUAL(lb_trainer_class_weights(t, &n, w), LB_OK);
    CU_ASSERT_EQUAL(n, 2);
    double total = (double)(counts[0] + counts[1]);
    CU_ASSERT_DOUBLE_EQUAL(w[0], total / (2.0 * (double)counts[0]), 1e-12);
    CU_ASSERT_DOUBLE_EQUAL(w[1], total / (2.0 * (double)counts[1]), 1e-12);
    char metrics[600];
    snprintf(metrics, sizeof metrics, "%s/metrics.csv", dir);
    FILE *mf = fopen(metrics, "w");
    fprintf(mf, "%s\n", lb_metrics_header());
    CU_ASSERT_EQUAL(lb_trainer_run(t, NULL, mf, NULL, NULL), LB_OK);
    fclose(mf);
    double best = NAN;
    int64_t best_step = lb_trainer_best(t, &best);
    CU_ASSERT_TRUE(best_step == 2 || best_step == 4);
    CU_ASSERT_TRUE(best >= 0 && best <= 1); /* an F1, not an accuracy or a loss */
    /* the val rows carry f1, macro_f1 and pr_auc */
    FILE *in = fopen(metrics, "r");
    char line[512];
    int val_rows = 0;
    CU_ASSERT_PTR_NOT_NULL_FATAL(fgets(line, sizeof line, in));
    CU_ASSERT_PTR_NOT_NULL(strstr(line, ",f1,macro_f1,pr_auc,precision,recall,confusion"));
    while (fgets(line, sizeof line, in))
        if (strstr(line, ",val,")) {
            int commas = 0;
            for (char *p = line; *p; p++)
                commas += *p == ',';
            CU_ASSERT_EQUAL(commas, 16);
            CU_ASSERT_PTR_NULL(strstr(line, ",nan,nan,nan"));
            /* the confusion matrix, row-major: its 4 counts sum to the scored validation targets
             * (the column before mfu and peak_memory_mib) */
            long long cm[4] = {-1, -1, -1, -1};
            *strrchr(line, ',') = '\0';
            *strrchr(line, ',') = '\0';
            const char *last = strrchr(line, ',');
            CU_ASSERT_EQUAL(sscanf(last + 1, "%lld %lld %lld %lld", &cm[0], &cm[1], &cm[2], &cm[3]), 4);
            int64_t vs[2];
            lb_dataset_label_histogram(ds, "val", vs, NULL);
            CU_ASSERT_EQUAL(cm[0] + cm[1], vs[0]);
            CU_ASSERT_EQUAL(cm[2] + cm[3], vs[1]);
            val_rows++;
        }
    fclose(in);
    CU_ASSERT_EQUAL(val_rows, 2);
    lb_trainer_free(t);
    /* given weights must match the classes */
    tc.class_weight = 2;
    tc.n_class_weights = 3;
    tc.class_weights[0] = tc.class_weights[1] = tc.class_weights[2] = 1;
    CU_ASSERT_PTR_NULL(lb_trainer_new(m, ds, &tc));
    CU_ASSERT_TRUE(lb_test_error_has("2 classes but 3 class weights"));
    lb_model_free(m);
    lb_dataset_close(ds);
}

int main(void)
{
    snprintf(dir, sizeof dir, "/tmp/lookback_test_metrics_%d", (int)getpid());
    mkdir(dir, 0777);
    const lb_test_case cases[] = {
        {"binary: confusion, precision, recall, F1, macro-F1 by hand; merge", test_binary_report},
        {"a class never predicted: precision 0, F1 0; macro over present classes", test_class_never_predicted},
        {"average precision with tied scores, perfect, constant and worst rankings", test_average_precision},
        {"majority baseline and balanced class weights by hand", test_baseline_and_balanced_weights},
        {"trainer: class report of lb_evaluate, balanced weights, --select f1, metrics columns",
         test_trainer_measures},
        {NULL, NULL},
    };
    int rc = lb_test_main("metrics", cases);
    char cmd[512];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
    if (system(cmd) != 0)
        rc = 1;
    return rc;
}

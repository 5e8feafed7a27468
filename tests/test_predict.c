/* lb_predict (train/predict.h) called from C on a small spike file: the streaming path
 * gives the full forward's outputs in chunks of 1, 3 and the whole sequence, the summary
 * counts what it should, bad arguments are refused, and the predictions file
 * (data/results.h) holds the logits and their arg-max. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "support.h"
#include "data/results.h"
#include "data/tasks.h"
#include "lab/files.h"
#include "train/predict.h"

static char tmp_dir[256], data_path[512];

static lb_model *small_model(const lb_dataset *ds)
{
    lb_model_config mc;
    lb_model_config_default(LB_MODEL_TRANSFORMER, &mc);
    mc.vocab_size = lb_dataset_vocab_size(ds);
    mc.num_classes = lb_dataset_num_classes(ds);
    mc.max_seq_len = lb_dataset_seq_len(ds);
    mc.n_layers = 2;
    mc.d_model = 8;
    mc.n_heads = 2;
    mc.d_ff = 16;
    mc.dtype = LB_FLOAT64;
    return lb_model_new(&mc);
}

static void test_streaming_equals_full(void)
{
    lb_dataset *ds = lb_dataset_open(data_path);
    CU_ASSERT_PTR_NOT_NULL_FATAL(ds);
    lb_model *m = small_model(ds);
    CU_ASSERT_PTR_NOT_NULL_FATAL(m);
    lb_predict_options full = {3, 0, 1, 0};
    lb_predictions ref;
    CU_ASSERT_EQUAL_FATAL(lb_predict(m, ds, "test", 7, &full, &ref), LB_OK);
    CU_ASSERT_EQUAL(ref.n, 7);
    CU_ASSERT_EQUAL(ref.positions, 1);
    CU_ASSERT_EQUAL(ref.width, lb_dataset_num_classes(ds));
    CU_ASSERT_FALSE(ref.regression);
    for (int64_t i = 0; i < ref.n * ref.width; i++)
        CU_ASSERT_FALSE(isnan(ref.output[i]));
    static const int64_t chunks[] = {1, 3, 12};
    for (size_t c = 0; c < sizeof chunks / sizeof chunks[0]; c++) {
        lb_predict_options inc = {2, 1, chunks[c], 0};
        lb_predictions got;
        CU_ASSERT_EQUAL_FATAL(lb_predict(m, ds, "test", 7, &inc, &got), LB_OK);
        double worst = 0;
        for (int64_t i = 0; i < ref.n * ref.width; i++)
            worst = fmax(worst, fabs(got.output[i] - ref.output[i]));
        CU_ASSERT(worst < 1e-9);
        if (worst >= 1e-9)
            fprintf(stderr, "\n  chunk %lld: streaming differs from the full forward by %g\n", (long long)chunks[c],
                    worst);
        lb_predictions_free(&got);
        CU_ASSERT_PTR_NULL(got.output);
    }
    /* The summary: the accuracy of the arg-max over the targets, counted by hand. */
    lb_batch b;
    CU_ASSERT_EQUAL_FATAL(lb_dataset_slice(ds, "test", 0, 7, &b), LB_OK);
    int64_t scored = -1, right = 0, counted = 0;
    double acc = lb_predictions_score(&ref, b.targets, NULL, &scored);
    for (int64_t i = 0; i < 7; i++) {
        if (b.targets[i] < 0)
            continue;
        int best = 0;
        for (int64_t k = 1; k < ref.width; k++)
            if (ref.output[i * ref.width + k] > ref.output[i * ref.width + best])
                best = (int)k;
        right += best == b.targets[i];
        counted++;
    }
    CU_ASSERT_EQUAL(scored, counted);
    CU_ASSERT_DOUBLE_EQUAL(acc, (double)right / (double)counted, 1e-12);
    /* The file: the logits as computed, the predicted class their arg-max. */
    char out[600];
    snprintf(out, sizeof out, "%s/predictions.h5", tmp_dir);
    lb_predictions_source src = {"ck.h5", data_path, "test", "transformer", "full"};
    CU_ASSERT_EQUAL_FATAL(lb_predictions_write(out, &ref, &b, &src, 0), LB_OK);
    lb_tensor *logits = lb_test_h5_read_path(out, "logits", LB_FLOAT64);
    lb_tensor *predicted = lb_test_h5_read_path(out, "predicted", LB_FLOAT64);
    CU_ASSERT_PTR_NOT_NULL_FATAL(logits);
    CU_ASSERT_PTR_NOT_NULL_FATAL(predicted);
    CU_ASSERT_EQUAL(logits->ndim, 2);
    CU_ASSERT_EQUAL(logits->shape[0], 7);
    CU_ASSERT_EQUAL(logits->shape[1], ref.width);
    for (int64_t i = 0; i < 7; i++) {
        int best = 0;
        for (int64_t k = 0; k < ref.width; k++) {
            CU_ASSERT_DOUBLE_EQUAL(lb_tensor_flat(logits, i * ref.width + k), ref.output[i * ref.width + k], 0);
            if (ref.output[i * ref.width + k] > ref.output[i * ref.width + best])
                best = (int)k;
        }
        CU_ASSERT_DOUBLE_EQUAL(lb_tensor_flat(predicted, i), best, 0);
    }
    /* A second writer of the same path without `replace` gets the file that is there now. */
    CU_ASSERT_NOT_EQUAL(lb_predictions_write(out, &ref, &b, &src, 0), LB_OK);
    lb_tensor_free(logits);
    lb_tensor_free(predicted);
    lb_batch_free(&b);
    lb_predictions_free(&ref);
    lb_model_free(m);
    lb_dataset_close(ds);
}

static void test_bad_arguments(void)
{
    lb_dataset *ds = lb_dataset_open(data_path);
    CU_ASSERT_PTR_NOT_NULL_FATAL(ds);
    lb_model *m = small_model(ds);
    CU_ASSERT_PTR_NOT_NULL_FATAL(m);
    lb_predictions pr;
    lb_predict_options ok = {4, 1, 1, 0}, no_batch = {0, 0, 1, 0}, no_chunk = {4, 1, 0, 0};
    CU_ASSERT_EQUAL(lb_predict(m, ds, "test", 0, &ok, &pr), LB_ERR_VALUE);
    CU_ASSERT_EQUAL(lb_predict(m, ds, "test", 9, &ok, &pr), LB_ERR_VALUE); /* the split holds 8 */
    CU_ASSERT_EQUAL(lb_predict(m, ds, "test", 4, &no_batch, &pr), LB_ERR_VALUE);
    CU_ASSERT_EQUAL(lb_predict(m, ds, "test", 4, &no_chunk, &pr), LB_ERR_VALUE);
    CU_ASSERT_PTR_NULL(pr.output);
    int64_t scored = 0;
    CU_ASSERT(isnan(lb_predictions_score(&pr, NULL, NULL, &scored)));
    CU_ASSERT_EQUAL(lb_last_status(), LB_ERR_VALUE);
    int64_t shape[3] = {2, 3, 4};
    lb_tensor *w = lb_tensor_zeros(LB_FLOAT32, 3, shape);
    char out[600];
    snprintf(out, sizeof out, "%s/attention.h5", tmp_dir);
    CU_ASSERT_EQUAL(lb_attention_write(out, w, ds, "test"), LB_ERR_VALUE); /* not [E, H, Tq, Tk] */
    CU_ASSERT_FALSE(lb_files_exists(out));
    lb_tensor_free(w);
    lb_model_free(m);
    lb_dataset_close(ds);
}

int main(void)
{
    snprintf(tmp_dir, sizeof tmp_dir, "/tmp/lb_test_predict_XXXXXX");
    if (!mkdtemp(tmp_dir))
        return 1;
    snprintf(data_path, sizeof data_path, "%s/spike.h5", tmp_dir);
    lb_task_options o;
    lb_task_options_default(LB_TASK_SPIKE, &o);
    o.seq_len = 12;
    o.min_distance = 1;
    o.max_distance = 8;
    o.readings = 2;
    o.n_train = 16;
    o.n_val = 8;
    o.n_test = 8;
    o.seed = 3;
    if (lb_task_options_resolve(&o) != LB_OK || lb_task_generate(&o, data_path, NULL, NULL) != LB_OK) {
        fprintf(stderr, "test_predict: %s\n", lb_last_error());
        return 1;
    }
    static const lb_test_case cases[] = {
        {"the streaming path gives the full forward's outputs; the file holds them", test_streaming_equals_full},
        {"bad arguments", test_bad_arguments},
        {NULL, NULL},
    };
    int rc = lb_test_main("predict", cases);
    lb_files_remove_tree(tmp_dir);
    return rc;
}

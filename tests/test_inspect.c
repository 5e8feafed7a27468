/* Looking inside a model (lab/inspect.h, layers/model.h lb_model_attention_weights): every
 * layer's attention weights equal what the full forward computes, each row sums to one and
 * masked keys are exactly zero, for each attention family; `lb_inspect_attention` writes
 * them in bertviz's layout with heatmaps and top keys; the inputs it refuses. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "data/tasks.h"
#include "lab/files.h"
#include "lab/inspect.h"
#include "layers/family.h"
#include "support.h"
#include "train/trainer.h"

/* LeakSanitizer: PLplot's drivers leak what they allocate through fontconfig, cairo and
 * libltdl (every allocation in those reports is made inside those libraries, none in
 * lookback), as test_cli.c says; HDF5 1.10 keeps a few KB. */
const char *__lsan_default_suppressions(void);
const char *__lsan_default_suppressions(void)
{
    return "leak:libhdf5\nleak:libfontconfig\nleak:libcairo\nleak:libltdl\nleak:libplplot\nleak:libQt5\n";
}

enum { T = 24 };

static char dir[256], data_path[512];

static void make_data(void)
{
    snprintf(dir, sizeof dir, "/tmp/lookback_test_inspect_%d", (int)getpid());
    mkdir(dir, 0777);
    snprintf(data_path, sizeof data_path, "%s/spike.h5", dir);
    lb_task_options o;
    lb_task_options_default(LB_TASK_SPIKE, &o);
    o.seq_len = T, o.min_distance = 1, o.max_distance = 20, o.readings = 4;
    o.n_train = 32, o.n_val = 8, o.n_test = 6, o.seed = 3;
    if (lb_task_generate(&o, data_path, NULL, NULL) != LB_OK)
        fprintf(stderr, "generate: %s\n", lb_last_error());
}

/* A model of `kind` fitted to the data, 2 layers of 3 heads. */
static lb_model *small_model(lb_model_kind kind, const lb_dataset *ds, lb_model_config *mc)
{
    lb_model_config_default(kind, mc);
    lb_model_config_fit_data(mc, ds);
    mc->n_layers = 2, mc->d_model = 12, mc->n_heads = 3, mc->d_ff = 16, mc->hidden_size = 8;
    if (kind == LB_MODEL_LOCAL)
        mc->window = 5;
    mc->seed = 7;
    return lb_model_new(mc);
}

/* Weights of one example: the last layer's equal lb_model_forward's (the query the head
 * reads, position T - 1); every row sums to one; keys after the query (and, with a
 * window, before it) are exactly 0. */
static void test_weights_are_the_forwards(void)
{
    lb_dataset *ds = lb_dataset_open(data_path);
    CU_ASSERT_PTR_NOT_NULL_FATAL(ds);
    lb_model_kind kinds[] = {LB_MODEL_TRANSFORMER, LB_MODEL_LOCAL};
    for (int c = 0; c < 2; c++) {
        lb_model_config mc;
        lb_model *m = small_model(kinds[c], ds, &mc);
        CU_ASSERT_PTR_NOT_NULL_FATAL(m);
        lb_batch b;
        CU_ASSERT_EQUAL_FATAL(lb_dataset_slice(ds, "test", 2, 2, &b), LB_OK);
        lb_model_input in = {2, b.seq_len, b.tokens, b.features, b.lengths};
        lb_tensor *w[2] = {NULL, NULL}, *last = NULL;
        CU_ASSERT_EQUAL_FATAL(lb_model_attention_weights(m, &in, w), LB_OK);
        lb_graph *g = lb_graph_new();
        CU_ASSERT_PTR_NOT_NULL(lb_model_forward(g, m, &in, 0, NULL, &last));
        CU_ASSERT_PTR_NOT_NULL_FATAL(last);
        CU_ASSERT_EQUAL(last->shape[2], 1); /* the last-position head reads one query */
        for (int l = 0; l < 2; l++) {
            CU_ASSERT_EQUAL_FATAL(w[l]->ndim, 4);
            CU_ASSERT_TRUE(w[l]->shape[0] == 2 && w[l]->shape[1] == 3 && w[l]->shape[2] == T && w[l]->shape[3] == T);
        }
        const float *a = lb_tensor_data(w[1]), *f = lb_tensor_data(last);
        double worst = 0;
        for (int e = 0; e < 2; e++)
            for (int h = 0; h < 3; h++)
                for (int k = 0; k < T; k++)
                    worst = fmax(worst, fabs(a[((e * 3 + h) * T + T - 1) * T + k] - f[(e * 3 + h) * T + k]));
        CU_ASSERT_TRUE(worst < 1e-6);
        int bad_sum = 0, bad_mask = 0;
        for (int l = 0; l < 2; l++) {
            const float *p = lb_tensor_data(w[l]);
            for (int r = 0; r < 2 * 3 * T; r++) {
                int q = r % T;
                double sum = 0;
                for (int k = 0; k < T; k++) {
                    float v = p[r * T + k];
                    sum += v;
                    int masked = k > q || (kinds[c] == LB_MODEL_LOCAL && k <= q - 5);
                    bad_mask += masked && v != 0.0f;
                    bad_mask += !masked && !(v > 0);
                }
                bad_sum += fabs(sum - 1) > 1e-5;
            }
        }
        CU_ASSERT_EQUAL(bad_sum, 0);
        CU_ASSERT_EQUAL(bad_mask, 0);
        /* the layers differ: layer 0 is not a copy of layer 1 */
        CU_ASSERT_NOT_EQUAL(memcmp(lb_tensor_data(w[0]), lb_tensor_data(w[1]), (size_t)(2 * 3 * T * T) * 4), 0);
        lb_graph_free(g);
        lb_tensor_free(last);
        lb_tensor_free(w[0]);
        lb_tensor_free(w[1]);
        lb_batch_free(&b);
        lb_model_free(m);
    }
    /* a family without attention: refused, naming those with it */
    lb_model_config mc;
    lb_model *m = small_model(LB_MODEL_LSTM, ds, &mc);
    lb_batch b;
    CU_ASSERT_EQUAL_FATAL(lb_dataset_slice(ds, "test", 0, 1, &b), LB_OK);
    lb_model_input in = {1, b.seq_len, b.tokens, b.features, b.lengths};
    lb_tensor *w[2] = {NULL, NULL};
    CU_ASSERT_EQUAL(lb_model_attention_weights(m, &in, w), LB_ERR_VALUE);
    CU_ASSERT_TRUE(lb_test_error_has("a lstm model has no attention weights"));
    CU_ASSERT_TRUE(lb_test_error_has("transformer, local"));
    CU_ASSERT_PTR_NULL(w[0]);
    lb_batch_free(&b);
    lb_model_free(m);
    lb_dataset_close(ds);
}

/* A checkpoint of a model of `kind` after one step. */
static void save_checkpoint(lb_model_kind kind, const char *path)
{
    lb_dataset *ds = lb_dataset_open(data_path);
    lb_model_config mc;
    lb_model *m = small_model(kind, ds, &mc);
    lb_train_config tc;
    lb_train_config_default(&tc);
    tc.steps = 1, tc.batch_size = 4, tc.threads = 1;
    lb_trainer *t = lb_trainer_new(m, ds, &tc);
    lb_step_stats s;
    CU_ASSERT_EQUAL(lb_trainer_step(t, &s), LB_OK);
    CU_ASSERT_EQUAL(lb_trainer_save(t, path), LB_OK);
    lb_trainer_free(t);
    lb_model_free(m);
    lb_dataset_close(ds);
}

static int file_size(const char *dir_path, const char *name)
{
    char path[1024];
    snprintf(path, sizeof path, "%s/%s", dir_path, name);
    struct stat st;
    return stat(path, &st) == 0 ? (int)st.st_size : -1;
}

static void test_inspect_writes_the_folder(void)
{
    char ckpt[600], out[600];
    snprintf(ckpt, sizeof ckpt, "%s/local.h5", dir);
    snprintf(out, sizeof out, "%s/view", dir);
    save_checkpoint(LB_MODEL_LOCAL, ckpt);
    lb_inspect_options o;
    memset(&o, 0, sizeof o);
    o.checkpoint = ckpt, o.data = data_path, o.split = "test", o.example = 3, o.out_dir = out;
    o.n_layers = 1, o.layers[0] = 1;
    o.n_heads = 2, o.heads[0] = 2, o.heads[1] = 0;
    o.top_k = 3;
    lb_inspect_result r;
    CU_ASSERT_EQUAL_FATAL(lb_inspect_attention(&o, &r), LB_OK);
    CU_ASSERT_EQUAL(r.layers, 1);
    CU_ASSERT_EQUAL(r.heads, 2);
    CU_ASSERT_EQUAL(r.seq_len, T);
    CU_ASSERT_EQUAL(r.queries, T);
    CU_ASSERT_STRING_EQUAL(r.model, "local");
    CU_ASSERT_TRUE(r.plots >= 2);
    CU_ASSERT_TRUE(file_size(out, "layer1_head2.png") > 0 || file_size(out, "layer1_head2.svg") > 0);
    CU_ASSERT_TRUE(file_size(out, "layer1_head0.svg") > 0);
    CU_ASSERT_EQUAL(file_size(out, "layer0_head0.svg"), -1);
    /* attention.h5: all heads of the chosen layer, equal to the model's own weights */
    char h5[700];
    snprintf(h5, sizeof h5, "%s/attention.h5", out);
    lb_tensor *stored = lb_test_h5_read_path(h5, "attention", LB_FLOAT32);
    lb_tensor *layers = lb_test_h5_read_path(h5, "layers", LB_FLOAT64);
    CU_ASSERT_PTR_NOT_NULL_FATAL(stored);
    CU_ASSERT_PTR_NOT_NULL_FATAL(layers);
    CU_ASSERT_EQUAL(stored->ndim, 5);
    CU_ASSERT_TRUE(stored->shape[0] == 1 && stored->shape[1] == 1 && stored->shape[2] == 3 && stored->shape[3] == T &&
                   stored->shape[4] == T);
    CU_ASSERT_EQUAL(((double *)lb_tensor_data(layers))[0], 1.0);
    lb_model *m = lb_checkpoint_load_model(ckpt);
    lb_dataset *ds = lb_dataset_open(data_path);
    lb_batch b;
    CU_ASSERT_EQUAL_FATAL(lb_dataset_slice(ds, "test", 3, 1, &b), LB_OK);
    lb_model_input in = {1, b.seq_len, b.tokens, b.features, b.lengths};
    lb_tensor *w[2] = {NULL, NULL};
    CU_ASSERT_EQUAL_FATAL(lb_model_attention_weights(m, &in, w), LB_OK);
    CU_ASSERT_EQUAL(memcmp(lb_tensor_data(stored), lb_tensor_data(w[1]), (size_t)(3 * T * T) * sizeof(float)), 0);
    /* top_keys.txt: a line per head and query, the first key the row's largest weight */
    char path[700], line[512];
    snprintf(path, sizeof path, "%s/top_keys.txt", out);
    FILE *f = fopen(path, "r");
    CU_ASSERT_PTR_NOT_NULL_FATAL(f);
    int lines = 0, first_ok = 0;
    while (fgets(line, sizeof line, f)) {
        int layer, head;
        long long q, key, back;
        float weight;
        if (sscanf(line, "layer %d head %d query %lld:  key %lld (%lld back) %f", &layer, &head, &q, &key, &back,
                   &weight) == 6) {
            const float *row = (const float *)lb_tensor_data(w[1]) + ((size_t)head * T + (size_t)q) * T;
            float best = 0;
            for (int k = 0; k < T; k++)
                best = fmaxf(best, row[k]);
            first_ok += layer == 1 && back == q - key && fabsf(weight - best) < 1e-4f && fabsf(row[key] - best) < 1e-6f;
        }
        lines++;
    }
    fclose(f);
    CU_ASSERT_EQUAL(lines, 2 * T);
    CU_ASSERT_EQUAL(first_ok, 2 * T);
    lb_tensor_free(w[0]);
    lb_tensor_free(w[1]);
    lb_tensor_free(stored);
    lb_tensor_free(layers);
    lb_batch_free(&b);
    lb_dataset_close(ds);
    lb_model_free(m);
    /* refused: the folder exists, a layer, head, query or example out of range */
    CU_ASSERT_EQUAL(lb_inspect_attention(&o, &r), LB_ERR_VALUE);
    CU_ASSERT_TRUE(lb_test_error_has("already exists"));
    snprintf(out, sizeof out, "%s/view2", dir);
    o.out_dir = out;
    o.layers[0] = 2;
    CU_ASSERT_EQUAL(lb_inspect_attention(&o, &r), LB_ERR_VALUE);
    CU_ASSERT_TRUE(lb_test_error_has("--layers 2: the model has 2 layers (0..1)"));
    o.layers[0] = 0;
    o.heads[1] = 3;
    CU_ASSERT_EQUAL(lb_inspect_attention(&o, &r), LB_ERR_VALUE);
    CU_ASSERT_TRUE(lb_test_error_has("--heads 3: the model has 3 heads"));
    o.heads[1] = 1;
    o.example = 6;
    CU_ASSERT_EQUAL(lb_inspect_attention(&o, &r), LB_ERR_VALUE);
    CU_ASSERT_TRUE(lb_test_error_has("--example 6 is past the test split"));
    o.example = 0;
    o.n_queries = 1, o.queries[0] = T;
    CU_ASSERT_EQUAL(lb_inspect_attention(&o, &r), LB_ERR_VALUE);
    CU_ASSERT_TRUE(lb_test_error_has("--queries 24"));
    CU_ASSERT_FALSE(lb_files_exists(out)); /* nothing left behind */
    snprintf(ckpt, sizeof ckpt, "%s/lstm.h5", dir);
    save_checkpoint(LB_MODEL_LSTM, ckpt);
    o.checkpoint = ckpt;
    o.n_queries = 0;
    CU_ASSERT_EQUAL(lb_inspect_attention(&o, &r), LB_ERR_VALUE);
    CU_ASSERT_TRUE(lb_test_error_has("holds a lstm model, which has no attention to show"));
    CU_ASSERT_TRUE(lb_test_error_has("transformer, local"));
    CU_ASSERT_FALSE(lb_files_exists(out));
}

static void cleanup(void)
{
    lb_files_remove_tree(dir);
}

int main(void)
{
    make_data();
    static const lb_test_case cases[] = {
        {"every layer's weights are the forward's; rows sum to one; masked keys zero", test_weights_are_the_forwards},
        {"the folder: bertviz layout, heatmaps, top keys; refused inputs", test_inspect_writes_the_folder},
        {NULL, NULL},
    };
    int rc = lb_test_main("inspect", cases);
    cleanup();
    return rc;
}

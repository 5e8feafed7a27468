/* The training loop, evaluation and checkpoints, on small generated data. */
#include <math.h>
#include <sched.h>
#include <time.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <hdf5.h>

#include "data/h5io.h"
#include "data/tasks.h"
#include "support.h"
#include "tensor/pool.h"
#include "train/trainer.h"

static char data_path[512], dir[256];

static void make_data(void)
{
    snprintf(dir, sizeof dir, "/tmp/lookback_test_trainer_%d", (int)getpid());
    mkdir(dir, 0777);
    snprintf(data_path, sizeof data_path, "%s/spike.h5", dir);
    lb_task_options o;
    lb_task_options_default(LB_TASK_SPIKE, &o);
    o.seq_len = 24;
    o.min_distance = 1;
    o.max_distance = 20;
    o.readings = 4;
    o.n_train = 512;
    o.n_val = 64;
    o.n_test = 64;
    o.seed = 3;
    if (lb_task_generate(&o, data_path, NULL, NULL) != LB_OK)
        fprintf(stderr, "generate: %s\n", lb_last_error());
}

static void small_model_config(lb_model_config *mc, const lb_dataset *ds)
{
    lb_model_config_default(LB_MODEL_TRANSFORMER, mc);
    mc->vocab_size = lb_dataset_vocab_size(ds);
    mc->num_classes = lb_dataset_num_classes(ds);
    mc->max_seq_len = lb_dataset_seq_len(ds);
    mc->n_layers = 1;
    mc->d_model = 16;
    mc->n_heads = 2;
    mc->d_ff = 32;
    mc->dropout = 0.1; /* exercises the dropout generator across resumes */
    mc->seed = 5;
}

static void small_train_config(lb_train_config *tc, int64_t steps)
{
    lb_train_config_default(tc);
    tc->steps = steps;
    tc->batch_size = 16;
    tc->optim.lr = 3e-3;
    tc->schedule = lb_schedule_cosine(3e-3, 5, steps, 0.1);
    tc->eval_every = 0;
    tc->eval_examples = 64;
    tc->seed = 9;
    tc->threads = 1;
}

/* The bytes of every parameter of m (float32), in order; *nbytes receives their count. */
static unsigned char *param_bytes(lb_model *m, size_t *nbytes)
{
    lb_params *ps = lb_model_params(m);
    size_t total = 0;
    for (int i = 0; i < ps->count; i++)
        total += (size_t)lb_tensor_numel(ps->items[i]->value) * sizeof(float);
    unsigned char *bytes = malloc(total), *p = bytes;
    for (int i = 0; i < ps->count && bytes; i++) {
        size_t n = (size_t)lb_tensor_numel(ps->items[i]->value) * sizeof(float);
        memcpy(p, lb_tensor_data(ps->items[i]->value), n);
        p += n;
    }
    *nbytes = total;
    return bytes;
}

/* Runs a `steps`-step training (resuming from `resume_from` when given), stopping after
 * stop_at steps (0 = at the end) and saving to save_to; returns the parameters' bytes. */
static unsigned char *train_params(int64_t steps, int64_t stop_at, const char *resume_from, const char *save_to,
                                   size_t *nbytes)
{
    lb_dataset *ds = lb_dataset_open(data_path);
    lb_model_config mc;
    small_model_config(&mc, ds);
    lb_model *m = lb_model_new(&mc);
    lb_train_config tc;
    small_train_config(&tc, steps);
    lb_trainer *t = lb_trainer_new(m, ds, &tc);
    CU_ASSERT_PTR_NOT_NULL_FATAL(t);
    if (resume_from)
        CU_ASSERT_EQUAL(lb_trainer_load(t, resume_from), LB_OK);
    if (stop_at > 0) {
        lb_step_stats stats;
        while (lb_trainer_steps_done(t) < stop_at)
            CU_ASSERT_EQUAL_FATAL(lb_trainer_step(t, &stats), LB_OK);
        CU_ASSERT_EQUAL(lb_trainer_save(t, save_to), LB_OK);
    } else {
        CU_ASSERT_EQUAL(lb_trainer_run(t, save_to, NULL, NULL, NULL), LB_OK);
    }
    unsigned char *bytes = param_bytes(m, nbytes);
    lb_trainer_free(t);
    lb_model_free(m);
    lb_dataset_close(ds);
    return bytes;
}

static void test_training_learns(void)
{
    lb_dataset *ds = lb_dataset_open(data_path);
    CU_ASSERT_PTR_NOT_NULL_FATAL(ds);
    lb_model_config mc;
    small_model_config(&mc, ds);
    mc.dropout = 0;
    lb_model *m = lb_model_new(&mc);
    lb_eval_result before, after;
    CU_ASSERT_EQUAL(lb_evaluate(m, ds, "val", 0, 16, 4, &before, NULL), LB_OK);
    lb_train_config tc;
    small_train_config(&tc, 300);
    lb_trainer *t = lb_trainer_new(m, ds, &tc);
    CU_ASSERT_EQUAL(lb_trainer_run(t, NULL, NULL, NULL, NULL), LB_OK);
    CU_ASSERT_EQUAL(lb_trainer_steps_done(t), 300);
    CU_ASSERT_EQUAL(lb_evaluate(m, ds, "val", 0, 16, 4, &after, NULL), LB_OK);
    fprintf(stderr, "\n  val loss %.3f -> %.3f, accuracy %.3f -> %.3f\n", before.loss, after.loss, before.accuracy,
            after.accuracy);
    CU_ASSERT_TRUE(after.loss < before.loss * 0.5);
    CU_ASSERT_TRUE(after.accuracy > 0.9);
    CU_ASSERT_EQUAL(after.examples, 64);
    /* Distance bins cover the range and add up to the total. */
    CU_ASSERT_EQUAL(after.n_bins, 4);
    int64_t total = 0;
    for (int k = 0; k < after.n_bins; k++)
        total += after.bin_total[k];
    CU_ASSERT_EQUAL(total, 64);
    CU_ASSERT_TRUE(after.bin_lo[0] >= 1 && after.bin_hi[3] <= 20);
    lb_trainer_free(t);
    lb_model_free(m);
    lb_dataset_close(ds);
}

/* The trainer's evaluations share one graph: after the first, they take every buffer
 * from its pool (none from the system), also with a smaller last batch (64 = 48 + 16),
 * and give what lb_evaluate gives. */
static void test_trainer_evaluate_reuses_memory(void)
{
    lb_dataset *ds = lb_dataset_open(data_path);
    CU_ASSERT_PTR_NOT_NULL_FATAL(ds);
    lb_model_config mc;
    small_model_config(&mc, ds);
    mc.d_model = 64; /* [48, 24, 64] activations: large enough for the pool */
    mc.d_ff = 128;
    lb_model *m = lb_model_new(&mc);
    lb_train_config tc;
    small_train_config(&tc, 10);
    tc.batch_size = 48;
    lb_trainer *t = lb_trainer_new(m, ds, &tc);
    CU_ASSERT_PTR_NOT_NULL_FATAL(t);
    CU_ASSERT_PTR_NULL(lb_trainer_eval_pool(t));
    lb_eval_result ref, r[3];
    CU_ASSERT_EQUAL(lb_evaluate(m, ds, "val", 0, 48, 0, &ref, NULL), LB_OK);
    lb_pool_stats s[3];
    for (int i = 0; i < 3; i++) {
        CU_ASSERT_EQUAL_FATAL(lb_trainer_evaluate(t, "val", 0, &r[i]), LB_OK);
        CU_ASSERT_EQUAL(r[i].examples, 64);
        CU_ASSERT_EQUAL(r[i].loss, ref.loss);
        CU_ASSERT_EQUAL(r[i].accuracy, ref.accuracy);
        lb_pool_get_stats(lb_trainer_eval_pool(t), &s[i]);
        CU_ASSERT_EQUAL(s[i].in_use_bytes, 0);
    }
    CU_ASSERT_TRUE(s[0].misses > 0);
    CU_ASSERT_EQUAL(s[1].misses, s[0].misses);
    CU_ASSERT_EQUAL(s[2].misses, s[0].misses);
    CU_ASSERT_TRUE(s[2].hits - s[1].hits >= s[0].misses);
    CU_ASSERT_EQUAL(s[2].cached_bytes, s[1].cached_bytes);
    /* A training step in between leaves the evaluation's buffers alone. */
    lb_step_stats st;
    CU_ASSERT_EQUAL(lb_trainer_step(t, &st), LB_OK);
    lb_eval_result after;
    lb_pool_stats s_after;
    CU_ASSERT_EQUAL(lb_trainer_evaluate(t, "val", 0, &after), LB_OK);
    CU_ASSERT_EQUAL(after.examples, 64);
    CU_ASSERT_NOT_EQUAL(after.loss, ref.loss); /* the step changed the model */
    lb_pool_get_stats(lb_trainer_eval_pool(t), &s_after);
    CU_ASSERT_EQUAL(s_after.misses, s[0].misses);
    lb_trainer_free(t);
    lb_model_free(m);
    lb_dataset_close(ds);
}

static void test_resume_is_bit_exact(void)
{
    char ck[300];
    snprintf(ck, sizeof ck, "%s/resume.h5", dir);
    size_t na, nb;
    unsigned char *straight = train_params(24, 0, NULL, NULL, &na);
    free(train_params(24, 10, NULL, ck, &nb));
    unsigned char *resumed = train_params(24, 0, ck, NULL, &nb);
    CU_ASSERT_EQUAL(na, nb);
    CU_ASSERT_EQUAL(memcmp(straight, resumed, na), 0);
    free(straight);
    free(resumed);
}

/* A stop requested while a step runs ends it at its next op (the graph reads the flag):
 * the step fails with "interrupted", is discarded (step count, data order and dropout
 * stream as before it), and the run then goes on to the same parameters as one never
 * interrupted, bit for bit. */
static void test_stop_mid_step_discards_the_step(void)
{
    size_t na;
    unsigned char *straight = train_params(12, 0, NULL, NULL, &na);
    lb_dataset *ds = lb_dataset_open(data_path);
    lb_model_config mc;
    small_model_config(&mc, ds);
    lb_model *m = lb_model_new(&mc);
    lb_train_config tc;
    small_train_config(&tc, 12);
    lb_trainer *t = lb_trainer_new(m, ds, &tc);
    CU_ASSERT_PTR_NOT_NULL_FATAL(t);
    lb_step_stats stats;
    for (int i = 0; i < 5; i++)
        CU_ASSERT_EQUAL_FATAL(lb_trainer_step(t, &stats), LB_OK);
    lb_trainer_request_stop(t);
    for (int i = 0; i < 2; i++) { /* twice: the first discarded step left nothing behind */
        CU_ASSERT_EQUAL(lb_trainer_step(t, &stats), LB_ERR_STATE);
        CU_ASSERT_PTR_NOT_NULL(strstr(lb_last_error(), "interrupted (a stop was requested) during the forward pass"));
        CU_ASSERT_EQUAL(lb_trainer_steps_done(t), 5);
    }
    CU_ASSERT_EQUAL(lb_trainer_run(t, NULL, NULL, NULL, NULL), LB_OK); /* the run clears the request */
    CU_ASSERT_EQUAL(lb_trainer_steps_done(t), 12);
    size_t nb;
    unsigned char *after = param_bytes(m, &nb);
    CU_ASSERT_TRUE(after && na == nb && memcmp(straight, after, na) == 0);
    free(after);
    free(straight);
    lb_trainer_free(t);
    lb_model_free(m);
    lb_dataset_close(ds);
}

/* Options that judge the validation split or per-class measures are refused where they
 * cannot apply: --patience without a val split, --select pr-auc on more than 2 classes. */
static void test_options_that_cannot_apply(void)
{
    char path[600];
    snprintf(path, sizeof path, "%s/no-val.h5", dir);
    lb_task_options o;
    lb_task_options_default(LB_TASK_SPIKE, &o);
    o.seq_len = 24;
    o.readings = 4;
    o.n_train = 64;
    o.n_val = 0;
    o.n_test = 8;
    CU_ASSERT_EQUAL_FATAL(lb_task_generate(&o, path, NULL, NULL), LB_OK);
    lb_dataset *ds = lb_dataset_open(path);
    CU_ASSERT_PTR_NOT_NULL_FATAL(ds);
    lb_model_config mc;
    small_model_config(&mc, ds);
    lb_model *m = lb_model_new(&mc);
    lb_train_config tc;
    small_train_config(&tc, 4);
    tc.patience = 2;
    CU_ASSERT_PTR_NULL(lb_trainer_new(m, ds, &tc));
    CU_ASSERT_PTR_NOT_NULL(strstr(lb_last_error(), "--patience 2 judges the validation split, which is empty"));
    tc.patience = 0;
    tc.select = LB_SELECT_PR_AUC; /* 4 readings: 4 classes */
    CU_ASSERT_PTR_NULL(lb_trainer_new(m, ds, &tc));
    CU_ASSERT_PTR_NOT_NULL(strstr(lb_last_error(), "--select pr-auc needs a binary label (2 classes), but this data file has 4 classes"));
    tc.select = LB_SELECT_MACRO_F1; /* applies */
    lb_trainer *t = lb_trainer_new(m, ds, &tc);
    CU_ASSERT_PTR_NOT_NULL(t);
    lb_trainer_free(t);
    lb_model_free(m);
    lb_dataset_close(ds);
}

/* A run killed at an arbitrary moment (possibly mid-checkpoint) leaves a loadable
 * checkpoint, and resuming from it reproduces the uninterrupted run exactly. */
static void test_kill_and_resume(void)
{
    char ck[300];
    snprintf(ck, sizeof ck, "%s/killed.h5", dir);
    size_t na, nb;
    unsigned char *straight = train_params(200, 0, NULL, NULL, &na);
    for (int attempt = 0; attempt < 3; attempt++) {
        unlink(ck);
        pid_t pid = fork();
        if (pid == 0) {
            lb_dataset *ds = lb_dataset_open(data_path);
            lb_model_config mc;
            small_model_config(&mc, ds);
            lb_model *m = lb_model_new(&mc);
            lb_train_config tc;
            small_train_config(&tc, 200);
            tc.checkpoint_every = 1;
            lb_trainer *t = lb_trainer_new(m, ds, &tc);
            lb_trainer_run(t, ck, NULL, NULL, NULL);
            _exit(0);
        }
        /* Wait for the first checkpoint, then kill at a moment that varies per attempt. */
        double limit = lb_test_limit(10);
        for (double waited = 0; waited < limit && access(ck, F_OK) != 0; waited += 0.001)
            usleep(1000);
        usleep(5000 + 20000 * attempt);
        kill(pid, SIGKILL);
        int status;
        waitpid(pid, &status, 0);
        CU_ASSERT_TRUE(WIFSIGNALED(status)); /* it really was killed mid-run */
        CU_ASSERT_EQUAL_FATAL(access(ck, F_OK), 0);
        unsigned char *resumed = train_params(200, 0, ck, NULL, &nb);
        CU_ASSERT_EQUAL(na, nb);
        CU_ASSERT_EQUAL(memcmp(straight, resumed, na), 0);
        free(resumed);
    }
    free(straight);
}

static void test_checkpoint_mismatch_errors(void)
{
    char ck[300];
    snprintf(ck, sizeof ck, "%s/mismatch.h5", dir);
    size_t n;
    free(train_params(2, 0, NULL, ck, &n));
    lb_dataset *ds = lb_dataset_open(data_path);
    lb_model_config mc;
    small_model_config(&mc, ds);
    mc.d_model = 24;
    lb_model *m = lb_model_new(&mc);
    /* Loading parameters into a different model names the differing field; nothing changes. */
    lb_tensor *before = lb_tensor_copy(lb_model_params(m)->items[0]->value, LB_FLOAT32);
    CU_ASSERT_EQUAL(lb_checkpoint_load_params(ck, m), LB_ERR_VALUE);
    CU_ASSERT_PTR_NOT_NULL(strstr(lb_last_error(), "d_model"));
    LB_ASSERT_TENSORS_CLOSE(lb_model_params(m)->items[0]->value, before, 0, 0);
    lb_model_config read;
    CU_ASSERT_EQUAL(lb_checkpoint_read_model_config(ck, &read), LB_OK);
    CU_ASSERT_EQUAL(read.d_model, 16);
    CU_ASSERT_EQUAL(read.kind, LB_MODEL_TRANSFORMER);
    /* Not a checkpoint / missing file. */
    CU_ASSERT_EQUAL(lb_checkpoint_load_params(data_path, m), LB_ERR_FORMAT);
    CU_ASSERT_PTR_NOT_NULL(strstr(lb_last_error(), "not a lookback checkpoint"));
    CU_ASSERT_EQUAL(lb_checkpoint_read_model_config("/nonexistent/ck.h5", &read), LB_ERR_IO);
    lb_tensor_free(before);
    lb_model_free(m);
    lb_dataset_close(ds);
}

static void test_nonfinite_loss_stops_and_keeps_checkpoint(void)
{
    char ck[300];
    snprintf(ck, sizeof ck, "%s/nan.h5", dir);
    lb_dataset *ds = lb_dataset_open(data_path);
    lb_model_config mc;
    small_model_config(&mc, ds);
    lb_model *m = lb_model_new(&mc);
    lb_train_config tc;
    small_train_config(&tc, 4);
    tc.checkpoint_every = 1;
    lb_trainer *t = lb_trainer_new(m, ds, &tc);
    CU_ASSERT_EQUAL(lb_trainer_run(t, ck, NULL, NULL, NULL), LB_OK);
    struct stat before;
    stat(ck, &before);
    /* Poison one weight: the next loss is NaN; the run stops, the checkpoint stays. */
    lb_params *ps = lb_model_params(m);
    lb_var *head = lb_params_find(ps, "head.weight");
    CU_ASSERT_PTR_NOT_NULL_FATAL(head);
    ((float *)lb_tensor_data(head->value))[0] = NAN;
    lb_tensor *emb = lb_tensor_copy(ps->items[0]->value, LB_FLOAT32);
    lb_train_config more = tc;
    more.steps = 8;
    lb_trainer *t2 = lb_trainer_new(m, ds, &more);
    CU_ASSERT_EQUAL(lb_trainer_load(t2, ck), LB_OK);
    ((float *)lb_tensor_data(head->value))[0] = NAN; /* the load restored it; poison again */
    CU_ASSERT_EQUAL(lb_trainer_run(t2, ck, NULL, NULL, NULL), LB_ERR_NUMERIC);
    CU_ASSERT_PTR_NOT_NULL(strstr(lb_last_error(), "loss"));
    CU_ASSERT_EQUAL(lb_trainer_steps_done(t2), 4);
    LB_ASSERT_TENSORS_CLOSE(ps->items[0]->value, emb, 0, 0); /* parameters untouched */
    struct stat after;
    stat(ck, &after);
    CU_ASSERT_EQUAL(before.st_ino, after.st_ino);
    CU_ASSERT_EQUAL(before.st_size, after.st_size);
    lb_tensor_free(emb);
    lb_trainer_free(t2);
    lb_trainer_free(t);
    lb_model_free(m);
    lb_dataset_close(ds);
}

static void test_gradient_accumulation(void)
{
    /* One step on a batch of 16 equals one step on 2 micro-batches of 8 (float32 rounding). */
    lb_dataset *ds = lb_dataset_open(data_path);
    lb_model_config mc;
    small_model_config(&mc, ds);
    mc.dropout = 0;
    lb_model *a = lb_model_new(&mc), *b = lb_model_new(&mc);
    lb_train_config tc;
    small_train_config(&tc, 1);
    tc.optim = lb_optim_defaults(LB_OPTIM_SGD);
    tc.optim.lr = 0.5;
    tc.schedule = lb_schedule_constant(0.5);
    tc.clip = 0;
    lb_trainer *ta = lb_trainer_new(a, ds, &tc);
    tc.micro_batches = 2;
    lb_trainer *tb = lb_trainer_new(b, ds, &tc);
    lb_step_stats sa, sb;
    CU_ASSERT_EQUAL(lb_trainer_step(ta, &sa), LB_OK);
    CU_ASSERT_EQUAL(lb_trainer_step(tb, &sb), LB_OK);
    CU_ASSERT_DOUBLE_EQUAL(sa.loss, sb.loss, 1e-5);
    CU_ASSERT_DOUBLE_EQUAL(sa.grad_norm, sb.grad_norm, 1e-4 * sa.grad_norm);
    lb_params *pa = lb_model_params(a), *pb = lb_model_params(b);
    for (int i = 0; i < pa->count; i++)
        LB_ASSERT_TENSORS_CLOSE(pb->items[i]->value, pa->items[i]->value, 1e-5, 1e-4);
    /* Bad configurations are refused with the field named. */
    tc.micro_batches = 17;
    CU_ASSERT_PTR_NULL(lb_trainer_new(a, ds, &tc));
    CU_ASSERT_PTR_NOT_NULL(strstr(lb_last_error(), "micro-batches"));
    lb_trainer_free(ta);
    lb_trainer_free(tb);
    lb_model_free(a);
    lb_model_free(b);
    lb_dataset_close(ds);
}

static void test_data_model_mismatch(void)
{
    lb_dataset *ds = lb_dataset_open(data_path);
    lb_model_config mc;
    small_model_config(&mc, ds);
    mc.num_classes = 7;
    lb_model *m = lb_model_new(&mc);
    lb_train_config tc;
    small_train_config(&tc, 1);
    CU_ASSERT_PTR_NULL(lb_trainer_new(m, ds, &tc));
    CU_ASSERT_PTR_NOT_NULL(strstr(lb_last_error(), "classes"));
    lb_model_free(m);
    lb_dataset_close(ds);
}

/* Checkpoints written by lookback 0.1.0 before the field list existed (a transformer
 * and an LSTM, d_model 8, trained 2 steps on `lookback data --task spike --seq-len 64`)
 * load with every field as written. */
static void test_checkpoints_written_before_load(void)
{
    lb_model_config mc;
    CU_ASSERT_EQUAL_FATAL(lb_checkpoint_read_model_config(lb_fixture_path("checkpoint_v1_transformer.h5"), &mc), LB_OK);
    CU_ASSERT_EQUAL(mc.kind, LB_MODEL_TRANSFORMER);
    CU_ASSERT_EQUAL(mc.d_model, 8);
    CU_ASSERT_EQUAL(mc.n_heads, 2);
    CU_ASSERT_EQUAL(mc.d_ff, 16);
    CU_ASSERT_EQUAL(mc.n_layers, 1);
    CU_ASSERT_EQUAL(mc.max_seq_len, 1024);
    CU_ASSERT_EQUAL(mc.vocab_size, 26);
    CU_ASSERT_EQUAL(mc.num_classes, 8);
    CU_ASSERT_EQUAL(mc.pos, LB_POS_NONE);
    lb_model *m = lb_model_new(&mc);
    CU_ASSERT_PTR_NOT_NULL_FATAL(m);
    CU_ASSERT_EQUAL(lb_checkpoint_load_params(lb_fixture_path("checkpoint_v1_transformer.h5"), m), LB_OK);
    lb_model_free(m);
    CU_ASSERT_EQUAL_FATAL(lb_checkpoint_read_model_config(lb_fixture_path("checkpoint_v1_lstm.h5"), &mc), LB_OK);
    CU_ASSERT_EQUAL(mc.kind, LB_MODEL_LSTM);
    CU_ASSERT_EQUAL(mc.hidden_size, 8);
    CU_ASSERT_EQUAL(mc.n_layers, 1);
    m = lb_model_new(&mc);
    CU_ASSERT_PTR_NOT_NULL_FATAL(m);
    CU_ASSERT_EQUAL(lb_checkpoint_load_params(lb_fixture_path("checkpoint_v1_lstm.h5"), m), LB_OK);
    CU_ASSERT_EQUAL(lb_params_numel(lb_model_params(m)), 26 * 8 + 2 * (4 * 8 * 8 + 4 * 8) + 8 * 8 + 8);
    lb_model_free(m);
}

/* A checkpoint without an attribute for some field (one written before the field
 * existed) reads that field's default. */
static void test_checkpoint_missing_field_reads_default(void)
{
    char ck[300];
    snprintf(ck, sizeof ck, "%s/older.h5", dir);
    size_t n;
    free(train_params(1, 0, NULL, ck, &n));
    hid_t file = H5Fopen(ck, H5F_ACC_RDWR, H5P_DEFAULT);
    CU_ASSERT_TRUE_FATAL(file >= 0);
    CU_ASSERT_TRUE(H5Adelete(file, "model.dropout") >= 0); /* written as 0.1 */
    H5Fclose(file);
    lb_model_config mc;
    /* With the config's checksum the missing attribute is damage, named. */
    CU_ASSERT_EQUAL(lb_checkpoint_read_model_config(ck, &mc), LB_ERR_FORMAT);
    CU_ASSERT_TRUE(lb_test_error_has("'model.dropout' is missing"));
    /* An older checkpoint (no checksum): the default. */
    file = H5Fopen(ck, H5F_ACC_RDWR, H5P_DEFAULT);
    CU_ASSERT_TRUE_FATAL(file >= 0);
    CU_ASSERT_TRUE(H5Adelete(file, "model_crc32") >= 0);
    CU_ASSERT_TRUE(H5Adelete(file, "model_fields") >= 0);
    H5Fclose(file);
    CU_ASSERT_EQUAL(lb_checkpoint_read_model_config(ck, &mc), LB_OK);
    CU_ASSERT_DOUBLE_EQUAL(mc.dropout, 0.0, 0);
    CU_ASSERT_EQUAL(mc.d_model, 16);
    CU_ASSERT_EQUAL(mc.seed, 5);
}

/* A changed model.* attribute does not match the config's checksum: reported in one
 * message, for reading the config and for loading the checkpoint. */
static void test_checkpoint_config_checksum(void)
{
    char ck[300];
    snprintf(ck, sizeof ck, "%s/changed.h5", dir);
    size_t n;
    free(train_params(1, 0, NULL, ck, &n));
    lb_model_config mc;
    CU_ASSERT_EQUAL_FATAL(lb_checkpoint_read_model_config(ck, &mc), LB_OK);
    int64_t heads = mc.n_heads;
    hid_t file = H5Fopen(ck, H5F_ACC_RDWR, H5P_DEFAULT);
    CU_ASSERT_TRUE_FATAL(file >= 0);
    CU_ASSERT_TRUE(H5Adelete(file, "model.n_heads") >= 0);
    H5Fclose(file);
    CU_ASSERT_EQUAL(lb_checkpoint_read_model_config(ck, &mc), LB_ERR_FORMAT);
    CU_ASSERT_TRUE(lb_test_error_has("'model.n_heads' is missing"));
    file = H5Fopen(ck, H5F_ACC_RDWR, H5P_DEFAULT);
    CU_ASSERT_TRUE_FATAL(file >= 0);
    CU_ASSERT_EQUAL(lb_h5_write_attr_int(file, "model.n_heads", heads == 1 ? 2 : 1, ck), LB_OK);
    H5Fclose(file);
    CU_ASSERT_EQUAL(lb_checkpoint_read_model_config(ck, &mc), LB_ERR_FORMAT);
    CU_ASSERT_TRUE(lb_test_error_has("do not match their checksum"));
    /* The value written back as it was: good again. */
    file = H5Fopen(ck, H5F_ACC_RDWR, H5P_DEFAULT);
    CU_ASSERT_TRUE_FATAL(file >= 0);
    CU_ASSERT_TRUE(H5Adelete(file, "model.n_heads") >= 0);
    CU_ASSERT_EQUAL(lb_h5_write_attr_int(file, "model.n_heads", heads, ck), LB_OK);
    H5Fclose(file);
    CU_ASSERT_EQUAL(lb_checkpoint_read_model_config(ck, &mc), LB_OK);
    CU_ASSERT_EQUAL(mc.n_heads, heads);
}

/* Length is a limit only for learned positions: a checkpoint of a model without them
 * loads into the same model built for longer sequences. */
static void test_checkpoint_length_only_for_learned_positions(void)
{
    char ck[300];
    snprintf(ck, sizeof ck, "%s/short.h5", dir);
    size_t n;
    free(train_params(1, 0, NULL, ck, &n));
    lb_dataset *ds = lb_dataset_open(data_path);
    lb_model_config mc;
    small_model_config(&mc, ds);
    mc.max_seq_len = 8192;
    lb_model *m = lb_model_new(&mc);
    CU_ASSERT_EQUAL(lb_checkpoint_load_params(ck, m), LB_OK);
    lb_model_free(m);
    /* With learned positions the table's rows are part of the model. */
    small_model_config(&mc, ds);
    mc.pos = LB_POS_LEARNED;
    lb_model *learned = lb_model_new(&mc);
    lb_train_config tc;
    small_train_config(&tc, 1);
    lb_trainer *t = lb_trainer_new(learned, ds, &tc);
    snprintf(ck, sizeof ck, "%s/learned.h5", dir);
    CU_ASSERT_EQUAL(lb_trainer_save(t, ck), LB_OK);
    /* A failed save says whether an earlier checkpoint is still there. */
    char nowhere[600];
    snprintf(nowhere, sizeof nowhere, "%s/no-such-folder/checkpoint.h5", dir);
    CU_ASSERT_NOT_EQUAL(lb_trainer_save(t, nowhere), LB_OK);
    CU_ASSERT_TRUE(lb_test_error_has("no checkpoint was written to"));
    CU_ASSERT_FALSE(lb_test_error_has("previous checkpoint"));
    lb_trainer_free(t);
    mc.max_seq_len = 8192;
    m = lb_model_new(&mc);
    CU_ASSERT_EQUAL(lb_checkpoint_load_params(ck, m), LB_ERR_VALUE);
    CU_ASSERT_TRUE(lb_test_error_has("max_seq_len = 24"));
    lb_model_free(m);
    lb_model_free(learned);
    lb_dataset_close(ds);
}

/* Steps skipped for a non-finite gradient are counted; 10 in a row stop the run with
 * LB_ERR_NUMERIC naming them, and a run whose every step was skipped never succeeds. */
static void test_skipped_steps_stop_the_run(void)
{
    lb_dataset *ds = lb_dataset_open(data_path);
    lb_model_config mc;
    small_model_config(&mc, ds);
    mc.dropout = 0;
    lb_model *m = lb_model_new(&mc);
    lb_train_config tc;
    small_train_config(&tc, 200);
    tc.optim = lb_optim_defaults(LB_OPTIM_SGD);
    tc.optim.lr = 1000;
    tc.schedule = lb_schedule_constant(1000);
    tc.clip = 0;
    lb_trainer *t = lb_trainer_new(m, ds, &tc);
    CU_ASSERT_PTR_NOT_NULL_FATAL(t);
    CU_ASSERT_EQUAL(lb_trainer_run(t, NULL, NULL, NULL, NULL), LB_ERR_NUMERIC);
    CU_ASSERT_TRUE(lb_test_error_has("10 steps in a row"));
    CU_ASSERT_TRUE(lb_test_error_has("were skipped because the gradient was not finite"));
    CU_ASSERT_TRUE(lb_trainer_run_skipped(t) >= 10);
    CU_ASSERT_TRUE(lb_trainer_steps_done(t) < 200);
    /* Continuing from the same broken parameters: a call whose every step is skipped is
     * never a success, and one that took a step is not refused for that. */
    tc.max_skipped = 0;
    tc.steps = 3;
    lb_trainer *u = lb_trainer_new(m, ds, &tc);
    lb_status su = lb_trainer_run(u, NULL, NULL, NULL, NULL);
    CU_ASSERT_TRUE(lb_trainer_run_skipped(u) >= 1);
    CU_ASSERT_EQUAL(su == LB_ERR_NUMERIC, lb_trainer_run_skipped(u) == lb_trainer_run_steps(u));
    if (su == LB_ERR_NUMERIC)
        CU_ASSERT_TRUE(lb_test_error_has("all 3 steps of this run were skipped"));
    lb_trainer_free(u);
    lb_trainer_free(t);
    lb_model_free(m);
    lb_dataset_close(ds);
}

typedef struct loss_log {
    double loss[64];
    int n;
} loss_log;

static void log_losses(lb_loop_event e, const lb_step_stats *s, const lb_eval_result *r, void *user)
{
    (void)r;
    loss_log *log = user;
    if (e == LB_EVENT_STEP && log->n < 64)
        log->loss[log->n++] = s->loss;
}

/* The train row of metrics.csv is the mean over its interval, and counts skipped steps. */
static void test_train_row_is_interval_mean(void)
{
    char path[300];
    snprintf(path, sizeof path, "%s/metrics-mean.csv", dir);
    FILE *f = fopen(path, "w");
    lb_dataset *ds = lb_dataset_open(data_path);
    lb_model_config mc;
    small_model_config(&mc, ds);
    lb_model *m = lb_model_new(&mc);
    lb_train_config tc;
    small_train_config(&tc, 10);
    tc.eval_every = 5;
    tc.eval_examples = 16;
    lb_trainer *t = lb_trainer_new(m, ds, &tc);
    loss_log log = {{0}, 0};
    CU_ASSERT_EQUAL(lb_trainer_run(t, NULL, f, log_losses, &log), LB_OK);
    fclose(f);
    CU_ASSERT_EQUAL_FATAL(log.n, 10);
    f = fopen(path, "r");
    char line[512];
    int rows = 0;
    while (fgets(line, sizeof line, f)) {
        long long step, skipped = -1;
        char split[16];
        double loss, acc, lr, norm, tps, wall;
        CU_ASSERT_EQUAL_FATAL(sscanf(line, "%lld,%15[^,],%lf,%lf,%lf,%lf,%lf,%lf,%lld", &step, split, &loss, &acc, &lr,
                                     &norm, &tps, &wall, &skipped), 9);
        if (strcmp(split, "train") != 0)
            continue;
        double mean = 0;
        for (int i = (int)step - 5; i < step; i++)
            mean += log.loss[i] / 5;
        CU_ASSERT_DOUBLE_EQUAL(loss, mean, 1e-6 * fabs(mean));
        CU_ASSERT_TRUE(fabs(loss - log.loss[step - 1]) > 1e-7); /* not the last batch's */
        CU_ASSERT_EQUAL(skipped, 0);
        rows++;
    }
    CU_ASSERT_EQUAL(rows, 2);
    fclose(f);
    lb_trainer_free(t);
    lb_model_free(m);
    lb_dataset_close(ds);
}

/* best.h5 keeps the best validation beside the latest checkpoint; --patience stops a
 * run that no longer improves; the best survives a resume. With lr 0 nothing changes,
 * so the first evaluation stays the best. */
static void test_best_checkpoint_and_patience(void)
{
    char sub[300], ck[400], best[400];
    snprintf(sub, sizeof sub, "%s/best-run", dir);
    mkdir(sub, 0777);
    snprintf(ck, sizeof ck, "%s/checkpoint.h5", sub);
    snprintf(best, sizeof best, "%s/best.h5", sub);
    lb_dataset *ds = lb_dataset_open(data_path);
    lb_model_config mc;
    small_model_config(&mc, ds);
    lb_model *m = lb_model_new(&mc);
    lb_train_config tc;
    small_train_config(&tc, 100);
    tc.optim.lr = 0;
    tc.schedule = lb_schedule_constant(0);
    tc.eval_every = 2;
    tc.patience = 2;
    lb_trainer *t = lb_trainer_new(m, ds, &tc);
    CU_ASSERT_EQUAL(lb_trainer_run(t, ck, NULL, NULL, NULL), LB_OK);
    CU_ASSERT_TRUE(lb_trainer_stopped_early(t));
    CU_ASSERT_EQUAL(lb_trainer_steps_done(t), 6); /* evaluations at 2 (best), 4, 6 */
    double metric;
    CU_ASSERT_EQUAL(lb_trainer_best(t, &metric), 2);
    CU_ASSERT_TRUE(metric > 0 && metric <= 1);
    hid_t f = H5Fopen(best, H5F_ACC_RDONLY, H5P_DEFAULT);
    CU_ASSERT_TRUE_FATAL(f >= 0);
    hid_t a = H5Aopen(f, "step", H5P_DEFAULT);
    long long step = 0;
    H5Aread(a, H5T_NATIVE_LLONG, &step);
    H5Aclose(a);
    H5Fclose(f);
    CU_ASSERT_EQUAL(step, 2);
    /* Resumed, the best and the count since it carry on: one more evaluation stops it. */
    lb_trainer *u = lb_trainer_new(m, ds, &tc);
    CU_ASSERT_EQUAL(lb_trainer_load(u, ck), LB_OK);
    CU_ASSERT_EQUAL(lb_trainer_best(u, NULL), 2);
    CU_ASSERT_EQUAL(lb_trainer_run(u, ck, NULL, NULL, NULL), LB_OK);
    CU_ASSERT_EQUAL(lb_trainer_steps_done(u), 8);
    lb_trainer_free(u);
    lb_trainer_free(t);
    lb_model_free(m);
    lb_dataset_close(ds);
}

/* The validations of a run: step, accuracy and loss of each. */
typedef struct val_log {
    int n;
    int64_t step[64];
    double acc[64], loss[64];
} val_log;

static void log_validations(lb_loop_event e, const lb_step_stats *s, const lb_eval_result *r, void *user)
{
    val_log *log = user;
    if (e == LB_EVENT_EVAL && log->n < 64) {
        log->step[log->n] = s->step;
        log->acc[log->n] = r->accuracy;
        log->loss[log->n] = r->loss;
        log->n++;
    }
}

/* Runs 60 steps (validation every 5) with cfg's select and stop_at into sub/checkpoint.h5;
 * returns the trainer (the caller frees it) and logs the validations. */
static lb_trainer *run_to_solve(lb_model *m, lb_dataset *ds, lb_val_select select, double stop_at, const char *ck,
                                val_log *log)
{
    lb_train_config tc;
    small_train_config(&tc, 60);
    tc.schedule = lb_schedule_constant(3e-3);
    tc.eval_every = 5;
    tc.select = select;
    tc.stop_at = stop_at;
    lb_trainer *t = lb_trainer_new(m, ds, &tc);
    CU_ASSERT_PTR_NOT_NULL_FATAL(t);
    memset(log, 0, sizeof *log);
    CU_ASSERT_EQUAL(lb_trainer_run(t, ck, NULL, log_validations, log), LB_OK);
    return t;
}

static long long checkpoint_step(const char *path)
{
    long long step = -1;
    hid_t f = H5Fopen(path, H5F_ACC_RDONLY, H5P_DEFAULT);
    if (f < 0)
        return -1;
    hid_t a = H5Aopen(f, "step", H5P_DEFAULT);
    H5Aread(a, H5T_NATIVE_LLONG, &step);
    H5Aclose(a);
    H5Fclose(f);
    return step;
}

/* Train to solve: with stop_at the run ends at the first validation whose score reaches
 * it (accuracy >= X, or loss <= X with select loss), saves its checkpoint there and
 * records the step; select loss makes best.h5 follow the lowest validation loss. The
 * thresholds are taken from a full run of the same (deterministic) training. */
static void test_stop_at_criterion(void)
{
    char sub[300], ck[400], best[400];
    snprintf(sub, sizeof sub, "%s/solve-run", dir);
    mkdir(sub, 0777);
    snprintf(ck, sizeof ck, "%s/checkpoint.h5", sub);
    snprintf(best, sizeof best, "%s/best.h5", sub);
    lb_dataset *ds = lb_dataset_open(data_path);
    lb_model_config mc;
    small_model_config(&mc, ds);

    /* The full run: its validations, never solved. */
    val_log full, log;
    lb_model *m = lb_model_new(&mc);
    lb_trainer *t = run_to_solve(m, ds, LB_SELECT_LOSS, 0, ck, &full);
    CU_ASSERT_EQUAL_FATAL(full.n, 12);
    CU_ASSERT_EQUAL(lb_trainer_solved_step(t, NULL), 0);
    int lowest = 0, target = -1;
    for (int i = 1; i < full.n; i++)
        if (full.loss[i] < full.loss[lowest])
            lowest = i;
    /* best.h5 under select loss: the validation with the lowest loss. */
    double metric;
    CU_ASSERT_EQUAL(lb_trainer_best(t, &metric), full.step[lowest]);
    CU_ASSERT_DOUBLE_EQUAL(metric, full.loss[lowest], 1e-12);
    CU_ASSERT_EQUAL(checkpoint_step(best), full.step[lowest]);
    lb_trainer_free(t);
    lb_model_free(m);

    /* A loss threshold first reached at a middle validation: the run stops there. */
    for (int i = 1; i < full.n - 1 && target < 0; i++) {
        int first = 1;
        for (int k = 0; k < i; k++)
            first &= full.loss[k] > full.loss[i];
        if (first && full.loss[i] < full.loss[0])
            target = i;
    }
    CU_ASSERT_TRUE_FATAL(target > 0);
    m = lb_model_new(&mc);
    t = run_to_solve(m, ds, LB_SELECT_LOSS, full.loss[target], ck, &log);
    double score;
    CU_ASSERT_EQUAL(lb_trainer_solved_step(t, &score), full.step[target]);
    CU_ASSERT_DOUBLE_EQUAL(score, full.loss[target], 1e-12);
    CU_ASSERT_EQUAL(lb_trainer_steps_done(t), full.step[target]);
    CU_ASSERT_EQUAL(log.n, target + 1);
    CU_ASSERT_EQUAL(checkpoint_step(ck), full.step[target]); /* saved where it stopped */
    CU_ASSERT_EQUAL(checkpoint_step(best), full.step[target]);
    lb_trainer_free(t);
    lb_model_free(m);

    /* An accuracy threshold: the first validation at or above it. */
    int acc_target = -1;
    double best_acc = full.acc[0];
    for (int i = 1; i < full.n && acc_target < 0; i++)
        if (full.acc[i] > best_acc)
            acc_target = i;
    CU_ASSERT_TRUE_FATAL(acc_target > 0);
    m = lb_model_new(&mc);
    t = run_to_solve(m, ds, LB_SELECT_ACCURACY, full.acc[acc_target], ck, &log);
    CU_ASSERT_EQUAL(lb_trainer_solved_step(t, &score), full.step[acc_target]);
    CU_ASSERT_DOUBLE_EQUAL(score, full.acc[acc_target], 1e-12);
    CU_ASSERT_EQUAL(lb_trainer_steps_done(t), full.step[acc_target]);
    lb_trainer_free(t);
    lb_model_free(m);

    /* Bad values are refused, naming the field. */
    lb_train_config tc;
    small_train_config(&tc, 10);
    tc.stop_at = 1.5;
    CU_ASSERT_EQUAL(lb_train_config_check(&tc), LB_ERR_VALUE);
    CU_ASSERT_PTR_NOT_NULL(strstr(lb_last_error(), "stop-at"));
    tc.select = LB_SELECT_LOSS; /* a loss may be above 1 */
    CU_ASSERT_EQUAL(lb_train_config_check(&tc), LB_OK);
    tc.stop_at = -1;
    CU_ASSERT_EQUAL(lb_train_config_check(&tc), LB_ERR_VALUE);
    tc.stop_at = 0;
    tc.select = (lb_val_select)5;
    CU_ASSERT_EQUAL(lb_train_config_check(&tc), LB_ERR_VALUE);
    CU_ASSERT_PTR_NOT_NULL(strstr(lb_last_error(), "select"));
    lb_val_select sel;
    CU_ASSERT_EQUAL(lb_val_select_parse("loss", &sel), LB_OK);
    CU_ASSERT_EQUAL(sel, LB_SELECT_LOSS);
    CU_ASSERT_EQUAL(lb_val_select_parse("f2", &sel), LB_ERR_VALUE);
    CU_ASSERT_PTR_NOT_NULL(strstr(lb_last_error(), "'f2'"));
    CU_ASSERT_STRING_EQUAL(lb_val_select_name(LB_SELECT_ACCURACY), "accuracy");
    CU_ASSERT_TRUE(isnan(lb_val_score(NULL, LB_SELECT_LOSS, NULL)));
    lb_dataset_close(ds);
}

static double process_cpu_seconds(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

/* A time budget on the CPU clock counts the process's CPU seconds (per thread), not
 * the wall time: with two busy processes per CPU, the run takes well over its budget
 * in wall time and trains for its whole budget of CPU time.
 * The clock's spent seconds survive a checkpoint; a bad clock value is refused. */
static void test_cpu_budget_clock(void)
{
    char ck[300];
    snprintf(ck, sizeof ck, "%s/cpu-clock.h5", dir);
    lb_dataset *ds = lb_dataset_open(data_path);
    lb_model_config mc;
    small_model_config(&mc, ds);
    lb_model *m = lb_model_new(&mc);
    lb_train_config tc;
    small_train_config(&tc, 1000000);
    tc.batch_size = 256; /* steps of several scheduler slices */
    tc.time_budget = 0.4;
    tc.budget_clock = (lb_budget_clock)7;
    CU_ASSERT_PTR_NULL(lb_trainer_new(m, ds, &tc));
    CU_ASSERT_PTR_NOT_NULL(strstr(lb_last_error(), "budget clock"));
    tc.budget_clock = LB_BUDGET_CPU;
    lb_budget_clock parsed;
    CU_ASSERT_EQUAL(lb_budget_clock_parse("cpu", &parsed), LB_OK);
    CU_ASSERT_EQUAL(parsed, LB_BUDGET_CPU);
    CU_ASSERT_EQUAL(lb_budget_clock_parse("gpu", &parsed), LB_ERR_VALUE);
    CU_ASSERT_PTR_NOT_NULL(strstr(lb_last_error(), "'gpu'"));
    CU_ASSERT_STRING_EQUAL(lb_budget_clock_name(LB_BUDGET_WALL), "wall");

    /* Two busy processes per CPU this process may use: it gets a fraction of a CPU. */
    cpu_set_t cpus;
    int n_busy = sched_getaffinity(0, sizeof cpus, &cpus) == 0 ? 2 * CPU_COUNT(&cpus) : 4;
    if (n_busy > 16)
        n_busy = 16;
    pid_t busy[16];
    int started = 0;
    for (int i = 0; i < n_busy; i++) {
        pid_t pid = fork();
        if (pid == 0)
            for (volatile unsigned long x = 0;; x++)
                ;
        if (pid > 0)
            busy[started++] = pid;
    }
    lb_trainer *t = lb_trainer_new(m, ds, &tc);
    CU_ASSERT_PTR_NOT_NULL_FATAL(t);
    double cpu0 = process_cpu_seconds();
    CU_ASSERT_EQUAL(lb_trainer_run(t, ck, NULL, NULL, NULL), LB_OK);
    double cpu = process_cpu_seconds() - cpu0;
    for (int i = 0; i < started; i++) {
        kill(busy[i], SIGKILL);
        waitpid(busy[i], NULL, 0);
    }
    double spent = lb_trainer_budget_spent(t), wall = lb_trainer_elapsed(t);
    CU_ASSERT_TRUE(lb_trainer_steps_done(t) >= 1);
    CU_ASSERT_TRUE(spent >= tc.time_budget);
    CU_ASSERT_TRUE(spent <= cpu + 1e-3); /* one thread: CPU seconds of the steps */
    if (started == n_busy) /* the steps had well under a whole CPU */
        CU_ASSERT_TRUE(spent < 0.8 * wall);
    lb_trainer *u = lb_trainer_new(m, ds, &tc);
    CU_ASSERT_EQUAL(lb_trainer_load(u, ck), LB_OK);
    CU_ASSERT_DOUBLE_EQUAL(lb_trainer_budget_spent(u), spent, 1e-12);
    CU_ASSERT_DOUBLE_EQUAL(lb_trainer_elapsed(u), wall, 1e-12);
    lb_trainer_free(u);

    /* The wall clock: the budget is the steps' wall time. */
    tc.budget_clock = LB_BUDGET_WALL;
    tc.time_budget = 0.2;
    lb_trainer *w = lb_trainer_new(m, ds, &tc);
    CU_ASSERT_EQUAL(lb_trainer_run(w, NULL, NULL, NULL, NULL), LB_OK);
    CU_ASSERT_DOUBLE_EQUAL(lb_trainer_budget_spent(w), lb_trainer_elapsed(w), 1e-12);
    CU_ASSERT_TRUE(lb_trainer_budget_spent(w) >= 0.2);
    lb_trainer_free(w);
    lb_trainer_free(t);
    lb_model_free(m);
    lb_dataset_close(ds);
}

/* A model configuration fitted to a data file: the data's fields set, the rest kept. */
static void test_model_config_fit_data(void)
{
    lb_dataset *ds = lb_dataset_open(data_path);
    CU_ASSERT_PTR_NOT_NULL_FATAL(ds);
    lb_model_config mc;
    lb_model_config_default(LB_MODEL_LSTM, &mc);
    mc.hidden_size = 37;
    mc.max_seq_len = 4;
    CU_ASSERT_EQUAL(lb_model_config_fit_data(&mc, ds), LB_OK);
    CU_ASSERT_EQUAL(mc.vocab_size, lb_dataset_vocab_size(ds));
    CU_ASSERT_TRUE(mc.vocab_size > 0);
    CU_ASSERT_EQUAL(mc.input_features, 0);
    CU_ASSERT_EQUAL(mc.num_classes, lb_dataset_num_classes(ds));
    CU_ASSERT_EQUAL(mc.head, lb_dataset_per_position(ds) ? LB_HEAD_EVERY : LB_HEAD_LAST);
    CU_ASSERT_EQUAL(mc.max_seq_len, 24);
    CU_ASSERT_EQUAL(mc.hidden_size, 37);
    CU_ASSERT_EQUAL(mc.kind, LB_MODEL_LSTM);
    mc.max_seq_len = 1000; /* a longer one is kept */
    CU_ASSERT_EQUAL(lb_model_config_fit_data(&mc, ds), LB_OK);
    CU_ASSERT_EQUAL(mc.max_seq_len, 1000);
    CU_ASSERT_EQUAL(lb_model_config_fit_data(NULL, ds), LB_ERR_VALUE);
    CU_ASSERT_EQUAL(lb_model_config_fit_data(&mc, NULL), LB_ERR_VALUE);
    lb_dataset_close(ds);
}

int main(void)
{
    make_data();
    const lb_test_case cases[] = {
        {"training reduces loss and reaches high accuracy; distance bins", test_training_learns},
        {"a model configuration fitted to a data file", test_model_config_fit_data},
        {"the trainer's evaluations reuse one graph's memory", test_trainer_evaluate_reuses_memory},
        {"a CPU-clock time budget counts CPU seconds and survives a checkpoint", test_cpu_budget_clock},
        {"resume from a checkpoint equals an uninterrupted run bit for bit", test_resume_is_bit_exact},
        {"--patience without a val split and --select pr-auc on 4 classes are refused", test_options_that_cannot_apply},
        {"a stop requested mid-step discards the step; the run then equals an uninterrupted one", test_stop_mid_step_discards_the_step},
        {"a killed run resumes exactly from an intact checkpoint", test_kill_and_resume},
        {"checkpoint of a different model: clear error, nothing changed", test_checkpoint_mismatch_errors},
        {"non-finite loss stops training and keeps the last checkpoint", test_nonfinite_loss_stops_and_keeps_checkpoint},
        {"gradient accumulation equals one large batch", test_gradient_accumulation},
        {"data that does not fit the model is refused", test_data_model_mismatch},
        {"checkpoints written by 0.1.0 still load", test_checkpoints_written_before_load},
        {"a checkpoint without a field's attribute reads its default", test_checkpoint_missing_field_reads_default},
        {"a deleted or changed model.* attribute fails the config's checksum", test_checkpoint_config_checksum},
        {"sequence length is compared only for learned positions", test_checkpoint_length_only_for_learned_positions},
        {"skipped steps are counted and stop a run that keeps skipping", test_skipped_steps_stop_the_run},
        {"the train row of the metrics is the mean over its interval", test_train_row_is_interval_mean},
        {"best.h5 and --patience; the best survives a resume", test_best_checkpoint_and_patience},
        {"train to solve: --stop-at ends the run at the criterion; --select loss", test_stop_at_criterion},
        {NULL, NULL},
    };
    int rc = lb_test_main("trainer", cases);
    char cmd[512];
    snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
    if (system(cmd) != 0)
        fprintf(stderr, "could not remove %s\n", dir);
    return rc;
}

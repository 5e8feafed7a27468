/* Data-parallel training over MPI ranks, run by ctest under `mpirun -np 2`: N ranks with
 * global batch B give what one process gives with batch B (parameters and metrics rows),
 * resume across rank counts, divergence and option checks, whole-run gathering.
 * Without MPI (or when not started by mpirun) it reports that it was skipped (exit 77). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "data/tasks.h"
#include "support.h"
#include "train/distributed.h"
#include "train/trainer.h"

enum { B = 16, STEPS = 10 };

typedef struct shared_paths {
    char dir[256];
} shared_paths;
static shared_paths paths;
static char data_path[320];

/* Rank 0 names the folder and writes the data; every rank then reads it. */
static int make_data(void)
{
    if (lb_dist_owns(0))
        snprintf(paths.dir, sizeof paths.dir, "/tmp/lookback_test_distributed_%d", (int)getpid());
    if (lb_dist_gather(&paths, sizeof paths, 1) != LB_OK)
        return 0;
    snprintf(data_path, sizeof data_path, "%s/recall.h5", paths.dir);
    if (lb_dist_rank() == 0) {
        mkdir(paths.dir, 0777);
        lb_task_options o;
        lb_task_options_default(LB_TASK_RECALL, &o);
        o.seq_len = 24;
        o.pairs = 4;
        o.queries = 3;
        o.key_vocab = 16;
        o.value_vocab = 16;
        o.noise_types = 4;
        o.n_train = 256;
        o.n_val = 40; /* not a multiple of the batch: the last validation batch is short */
        o.n_test = 16;
        o.seed = 11;
        if (lb_task_generate(&o, data_path, NULL, NULL) != LB_OK)
            fprintf(stderr, "generate: %s\n", lb_last_error());
    }
    return lb_dist_barrier() == LB_OK;
}

typedef struct replica {
    lb_dataset *data;
    lb_model *model;
    lb_trainer *trainer;
} replica;

/* A model and trainer with batch `batch` and data seed `seed`; distributed over the
 * ranks when `distributed` (then each rank initialises differently: rank 0's parameters
 * are broadcast). */
static int replica_with(replica *r, int64_t micro_batches, int distributed, int64_t check_every, int64_t batch,
                        uint64_t seed)
{
    memset(r, 0, sizeof *r);
    r->data = lb_dataset_open(data_path);
    if (!r->data) {
        fprintf(stderr, "\n  rank %d: %s\n", lb_dist_rank(), lb_last_error());
        return 0;
    }
    lb_model_config mc;
    lb_model_config_default(LB_MODEL_TRANSFORMER, &mc);
    mc.vocab_size = lb_dataset_vocab_size(r->data);
    mc.num_classes = lb_dataset_num_classes(r->data);
    mc.max_seq_len = lb_dataset_seq_len(r->data);
    mc.head = LB_HEAD_EVERY;
    mc.n_layers = 1;
    mc.d_model = 16;
    mc.n_heads = 2;
    mc.d_ff = 24;
    mc.dropout = 0;
    mc.seed = distributed ? 5 + (uint64_t)lb_dist_rank() : 5;
    r->model = lb_model_new(&mc);
    lb_train_config tc;
    lb_train_config_default(&tc);
    tc.steps = STEPS;
    tc.batch_size = batch;
    tc.micro_batches = micro_batches;
    tc.optim.lr = 3e-3;
    tc.schedule = lb_schedule_cosine(3e-3, 3, STEPS, 0.1);
    tc.clip = 0.5; /* small enough to clip: the global norm decides */
    tc.eval_every = 5;
    tc.eval_examples = 0;
    tc.seed = seed;
    tc.threads = 1;
    r->trainer = r->model ? lb_trainer_new(r->model, r->data, &tc) : NULL;
    if (!r->trainer) {
        fprintf(stderr, "\n  rank %d: %s\n", lb_dist_rank(), lb_last_error());
        return 0;
    }
    if (!distributed)
        return 1;
    lb_dist_config dc;
    lb_dist_config_default(&dc);
    dc.check_every = check_every;
    dc.bucket_bytes = 2048; /* several buckets */
    return lb_trainer_distribute(r->trainer, &dc) == LB_OK;
}

static int replica_new(replica *r, int64_t micro_batches, int distributed, int64_t check_every)
{
    return replica_with(r, micro_batches, distributed, check_every, B, 9);
}

static void replica_free(replica *r)
{
    lb_trainer_free(r->trainer);
    lb_model_free(r->model);
    lb_dataset_close(r->data);
}

/* Largest |a - b| over every parameter. */
static double max_param_diff(lb_model *a, lb_model *b)
{
    lb_params *pa = lb_model_params(a), *pb = lb_model_params(b);
    double worst = 0;
    for (int i = 0; i < pa->count; i++)
        for (int64_t k = 0; k < lb_tensor_numel(pa->items[i]->value); k++) {
            double d = fabs(lb_tensor_flat(pa->items[i]->value, k) - lb_tensor_flat(pb->items[i]->value, k));
            if (!(d <= worst))
                worst = d;
        }
    return worst;
}

static const char *rank_file(const char *name)
{
    static char buf[4][400];
    static int slot;
    slot = (slot + 1) % 4;
    snprintf(buf[slot], sizeof buf[slot], "%s/%s.%d", paths.dir, name, lb_dist_rank());
    return buf[slot];
}

/* One process with batch B (micro-batches 1, and N x M), against N ranks with M each. */
static void check_equivalence(int64_t micro_per_rank)
{
    replica one, many;
    CU_ASSERT_TRUE_FATAL(replica_new(&one, 1, 0, 0));
    CU_ASSERT_TRUE_FATAL(replica_new(&many, micro_per_rank, 1, 1));
    FILE *m1 = fopen(rank_file("metrics_one"), "w"), *mn = fopen(rank_file("metrics_many"), "w");
    CU_ASSERT_EQUAL(lb_trainer_run(one.trainer, NULL, m1, NULL, NULL), LB_OK);
    CU_ASSERT_EQUAL(lb_trainer_run(many.trainer, NULL, mn, NULL, NULL), LB_OK);
    fclose(m1);
    fclose(mn);
    CU_ASSERT_EQUAL(lb_trainer_steps_done(many.trainer), STEPS);
    double diff = max_param_diff(one.model, many.model);
    fprintf(stderr, "\n  rank %d: %d ranks x %lld micro-batches vs one process, batch %d, %d steps: max |diff| %.3g\n",
            lb_dist_rank(), lb_dist_size(), (long long)micro_per_rank, B, STEPS, diff);
    CU_ASSERT_TRUE(diff <= 1e-6);
    /* train and val rows at steps 5 and 10 */
    CU_ASSERT_TRUE(lb_test_metrics_match(rank_file("metrics_one"), rank_file("metrics_many"), 4, 1e-6));
    /* The ranks hold the same parameters. */
    uint64_t sum = lb_params_checksum(lb_model_params(many.model)), sums[2] = {sum, sum};
    lb_dist_gather(sums, sizeof sum, 2);
    CU_ASSERT_EQUAL(sums[0], sums[1]);
    lb_dist_stats ds;
    lb_trainer_dist_stats(many.trainer, &ds);
    CU_ASSERT_EQUAL(ds.steps, STEPS);
    CU_ASSERT_EQUAL(ds.bytes_per_step, lb_params_numel(lb_model_params(many.model)) * 4);
    CU_ASSERT_TRUE(ds.buckets > 1);
    CU_ASSERT_TRUE(ds.allreduce_seconds > 0);
    replica_free(&one);
    replica_free(&many);
}

static void test_equivalence(void) { check_equivalence(1); }
static void test_equivalence_micro_batches(void) { check_equivalence(2); }

/* Trains 5 steps (distributed or not), saves on rank 0, continues to STEPS in a new
 * trainer (distributed or not) and returns the largest difference from a run straight
 * to STEPS (distributed when ref_distributed). */
static double stop_and_resume(int first_distributed, int second_distributed, int ref_distributed)
{
    char ckpt[400];
    snprintf(ckpt, sizeof ckpt, "%s/half.h5", paths.dir);
    replica ref, first, second;
    lb_step_stats s;
    double diff = INFINITY;
    if (!replica_new(&ref, 1, ref_distributed, 0) || lb_trainer_run(ref.trainer, NULL, NULL, NULL, NULL) != LB_OK ||
        !replica_new(&first, 1, first_distributed, 0))
        return diff;
    for (int i = 0; i < 5; i++)
        CU_ASSERT_EQUAL(lb_trainer_step(first.trainer, &s), LB_OK);
    if (lb_dist_rank() == 0)
        CU_ASSERT_EQUAL(lb_trainer_save(first.trainer, ckpt), LB_OK);
    lb_dist_barrier();
    if (replica_new(&second, 1, 0, 0)) {
        CU_ASSERT_EQUAL(lb_trainer_load(second.trainer, ckpt), LB_OK);
        if (second_distributed)
            CU_ASSERT_EQUAL(lb_trainer_distribute(second.trainer, NULL), LB_OK);
        CU_ASSERT_EQUAL(lb_trainer_run(second.trainer, NULL, NULL, NULL, NULL), LB_OK);
        CU_ASSERT_EQUAL(lb_trainer_steps_done(second.trainer), STEPS);
        diff = max_param_diff(ref.model, second.model);
    }
    replica_free(&ref);
    replica_free(&first);
    replica_free(&second);
    lb_dist_barrier(); /* rank 0 writes the next checkpoint only when every rank has read this one */
    return diff;
}

/* Stopping at step 5 with one rank count and continuing with another gives the run
 * of one process; continuing with the same ranks gives their uninterrupted run exactly. */
static void test_resume_with_other_rank_count(void)
{
    CU_ASSERT_TRUE(stop_and_resume(1, 0, 0) <= 1e-6);
    CU_ASSERT_TRUE(stop_and_resume(0, 1, 0) <= 1e-6);
    /* with the same number of ranks, bit for bit */
    CU_ASSERT_EQUAL(stop_and_resume(1, 1, 1), 0.0);
}

/* A rank whose parameters drift is caught at the next check, naming the step and rank. */
static void test_divergence_is_caught(void)
{
    replica r;
    lb_step_stats s;
    CU_ASSERT_TRUE_FATAL(replica_new(&r, 1, 1, 2));
    CU_ASSERT_EQUAL(lb_trainer_step(r.trainer, &s), LB_OK);
    if (lb_dist_rank() == 1) {
        float *w = lb_tensor_data(lb_model_params(r.model)->items[0]->value);
        w[0] += 1e-3f;
    }
    CU_ASSERT_EQUAL(lb_trainer_step(r.trainer, &s), LB_ERR_STATE);
    CU_ASSERT_TRUE(lb_test_error_has("diverged after step 2"));
    CU_ASSERT_TRUE(lb_test_error_has("rank 1 has"));
    CU_ASSERT_TRUE(lb_test_error_has("ranks differing from rank 0: 1"));
    replica_free(&r);
}

/* Bad set-ups are refused with the reason, on every rank. */
static void test_bad_setups(void)
{
    replica r;
    /* An odd batch does not split over two ranks. */
    CU_ASSERT_FALSE(replica_with(&r, 1, 1, 0, B - 1, 9));
    CU_ASSERT_EQUAL(lb_last_status(), LB_ERR_VALUE);
    CU_ASSERT_TRUE(lb_test_error_has("not divisible by 2 ranks x --micro-batches 1"));
    replica_free(&r);
    /* Ranks started with different options. */
    CU_ASSERT_FALSE(replica_with(&r, 1, 1, 0, B, 100 + (uint64_t)lb_dist_rank()));
    CU_ASSERT_EQUAL(lb_last_status(), LB_ERR_STATE);
    CU_ASSERT_TRUE(lb_test_error_has("the ranks disagree on the training options"));
    replica_free(&r);
    /* Rank 1 reads another file: the same task and seq_len, 48 validation examples, not 40. */
    char mine[320], other[320];
    snprintf(mine, sizeof mine, "%s", data_path);
    snprintf(other, sizeof other, "%s/recall-val48.h5", paths.dir);
    if (lb_dist_rank() == 0) {
        lb_task_options o;
        lb_task_options_default(LB_TASK_RECALL, &o);
        o.seq_len = 24;
        o.pairs = 4;
        o.queries = 3;
        o.key_vocab = 16;
        o.value_vocab = 16;
        o.noise_types = 4;
        o.n_train = 256;
        o.n_val = 48;
        o.n_test = 16;
        o.seed = 11;
        CU_ASSERT_EQUAL(lb_task_generate(&o, other, NULL, NULL), LB_OK);
    }
    CU_ASSERT_EQUAL(lb_dist_barrier(), LB_OK);
    if (lb_dist_rank() == 1)
        snprintf(data_path, sizeof data_path, "%s", other);
    CU_ASSERT_FALSE(replica_with(&r, 1, 1, 0, B, 9));
    CU_ASSERT_EQUAL(lb_last_status(), LB_ERR_STATE);
    CU_ASSERT_TRUE(lb_test_error_has("the ranks disagree on the data file's val examples"));
    CU_ASSERT_TRUE(lb_test_error_has("rank 0 has 40, rank 1 has 48"));
    replica_free(&r);
    snprintf(data_path, sizeof data_path, "%s", mine);
    /* Any value, by lb_dist_check_same. */
    CU_ASSERT_EQUAL(lb_dist_check_same(7, "seven"), LB_OK);
    CU_ASSERT_EQUAL(lb_dist_check_same(7 + lb_dist_rank(), "a count"), LB_ERR_STATE);
    CU_ASSERT_TRUE(lb_test_error_has("the ranks disagree on a count: rank 0 has 7, rank 1 has 8"));
}

/* Whole items spread over ranks come back to every rank. */
static void test_gather_items(void)
{
    int64_t items[7];
    for (int i = 0; i < 7; i++)
        items[i] = lb_dist_owns(i) ? 1000 * i + lb_dist_rank() : -1;
    CU_ASSERT_EQUAL(lb_dist_gather(items, sizeof items[0], 7), LB_OK);
    for (int i = 0; i < 7; i++)
        CU_ASSERT_EQUAL(items[i], 1000 * i + i % lb_dist_size());
}

int main(void)
{
    if (!lb_dist_compiled() || !lb_dist_launched()) {
        printf("skipped: %s\n", lb_dist_compiled() ? "not started by mpirun (ctest runs it with mpirun -np 2)"
                                                   : "lookback was built without MPI (install libopenmpi-dev)");
        return 77;
    }
    if (lb_dist_init() != LB_OK) {
        fprintf(stderr, "%s\n", lb_last_error());
        return 1;
    }
    if (lb_dist_size() != 2 || !make_data()) {
        fprintf(stderr, "needs exactly 2 ranks and a data file (got %d ranks)\n", lb_dist_size());
        lb_dist_finalize();
        return 1;
    }
    static const lb_test_case cases[] = {
        {"2 ranks equal 1 process (parameters, metrics)", test_equivalence},
        {"2 ranks x 2 micro-batches equal 1 process", test_equivalence_micro_batches},
        {"resume with the same or another number of ranks", test_resume_with_other_rank_count},
        {"divergence caught, naming step and rank", test_divergence_is_caught},
        {"batch not divisible, options or data differ", test_bad_setups},
        {"whole items gathered from their ranks", test_gather_items},
        {NULL, NULL},
    };
    int rc = lb_test_main("distributed", cases);
    lb_dist_barrier();
    if (lb_dist_rank() == 0) {
        char cmd[400];
        snprintf(cmd, sizeof cmd, "rm -rf %s", paths.dir);
        if (system(cmd) != 0)
            rc = 1;
    }
    lb_dist_finalize();
    return rc;
}

/* Under LeakSanitizer: what Open MPI and its components keep until exit (ctest sets
 * fast_unwind_on_malloc=0 so that their stacks reach a frame of libmpi to match). */
const char *__lsan_default_suppressions(void);
const char *__lsan_default_suppressions(void)
{
    return "leak:libhdf5\nleak:libmpi\nleak:libopen-pal\nleak:libopen-rte\nleak:libpmix\nleak:libhwloc\n"
           "leak:libevent\nleak:mca_\nleak:libucs\nleak:libucp\nleak:libfabric\n";
}

/* The product path: one training step of each study recipe, through the trainer's
 * step (lb_trainer_step: batch from the HDF5 file, forward, loss, backward, clipping,
 * AdamW), the code `lookback train` runs.
 *
 *   bench_product RECIPE|all|list --dir DIR [--threads N] [--warmup N] [--reps N] [--quick] [--budget S]
 *
 * For each recipe it writes, in DIR, the task's training file (made once, 512 training
 * and 64 validation sequences) and the model's initial checkpoint <recipe>.h5, which
 * bench/torch_product.py builds the same model from (python/lookback_torch.py) and
 * `lookback train --init-from` starts from (bench/run times the whole command against
 * this step). Prints one JSON line per recipe (impl "lookback", workload "PRODUCT").
 * --threads N is lb_set_num_threads(N), what `lookback train --threads N` does; nothing
 * else is set (no environment variable: the library chooses OpenBLAS's kernels and
 * keeps it single-threaded).
 *
 * The recipes are the study's own table (lab/recipes.c, compiled in here: the
 * models, batch sizes, weight decay and default learning rates of lookback study's
 * default scale): every task with transformer, local attention, LSTM and conv, and
 * spike16's length-robustness variants; AdamW, clip 1 as the study trains them. */
#define _POSIX_C_SOURCE 200809L
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <sys/stat.h>

#include "data/dataset.h"
#include "data/tasks.h"
#include "lab/recipes.h"
#include "harness.h"
#include "cli/preinit.h"
#include "layers/conv.h"
#include "layers/model.h"
#include "optim/schedule.h"
#include "tensor/blas.h"
#include "tensor/threads.h"
#include "train/trainer.h"

/* The recipes, in the table's order: lb_recipes[r]; named "<task>.<method>". */
static void recipe_name(int r, char *buf, size_t size)
{
    snprintf(buf, size, "%s.%s", lb_recipe_task_names[lb_recipes[r].task], lb_recipe_method_names[lb_recipes[r].method]);
}

/* The study's training file of a task (lab/recipes.c), small splits; `mixed`:
 * spike16 at lengths 64..256. */
static lb_task_options task_options(lb_recipe_task t, int mixed, char *file, size_t size)
{
    lb_task_options o;
    lb_recipe_task_data(t, 0, 0, &o);
    if (mixed)
        lb_recipe_mixed_lengths(&o);
    snprintf(file, size, "%s%s.h5", lb_recipe_task_names[t], mixed ? "-mixed" : "");
    o.n_train = 512;
    o.n_val = 64;
    o.n_test = 0;
    o.seed = 100 + (uint64_t)t;
    return o;
}

/* The study's model of a recipe row (lb_recipe_model), fitted to the data as lookback
 * train fits it. */
static void model_config(const lb_recipe *row, const lb_dataset *data, int64_t seq_len, lb_model_config *mc)
{
    char text[512];
    lb_recipe_model(row, seq_len, mc, text, sizeof text);
    lb_model_config_fit_data(mc, data);
}

static int step_once(void *ctx)
{
    lb_step_stats st;
    if (lb_trainer_step(ctx, &st) != LB_OK) {
        fprintf(stderr, "bench_product: step failed: %s\n", lb_last_error());
        return 1;
    }
    return 0;
}

static int run_recipe(int r, const char *dir, const bench_opts *o)
{
    const lb_recipe *row = &lb_recipes[r];
    char file[64], name[64];
    recipe_name(r, name, sizeof name);
    lb_task_options to = task_options(row->task, row->mixed, file, sizeof file);
    char data_path[4096], ck_path[4096];
    snprintf(data_path, sizeof data_path, "%s/%s", dir, file);
    snprintf(ck_path, sizeof ck_path, "%s/%s.h5", dir, name);
    struct stat sb;
    if (stat(data_path, &sb) != 0 && lb_task_generate(&to, data_path, NULL, NULL) != LB_OK) {
        fprintf(stderr, "bench_product: %s: %s\n", data_path, lb_last_error());
        return 1;
    }
    lb_dataset *data = lb_dataset_open(data_path);
    if (!data) {
        fprintf(stderr, "bench_product: %s\n", lb_last_error());
        return 1;
    }
    lb_model_config mc;
    model_config(row, data, to.seq_len, &mc);
    lb_train_config tc;
    lb_train_config_default(&tc);
    tc.steps = 100000000;
    tc.batch_size = row->batch;
    tc.optim.weight_decay = row->weight_decay;
    tc.optim.lr = row->lrs[0];
    tc.schedule = lb_schedule_constant(tc.optim.lr);
    tc.schedule.warmup_steps = 50;
    tc.eval_every = 0;
    tc.threads = o->threads;
    lb_model *model = lb_model_new(&mc);
    lb_trainer *tr = model ? lb_trainer_new(model, data, &tc) : NULL;
    int rc = 1;
    if (!tr) {
        fprintf(stderr, "bench_product: %s: %s\n", name, lb_last_error());
    } else if (lb_trainer_save(tr, ck_path) != LB_OK) {
        fprintf(stderr, "bench_product: %s: %s\n", ck_path, lb_last_error());
    } else {
        double base = bench_current_rss_mib();
        bench_result res;
        if (bench_time(step_once, tr, bench_warmup(o, 2), bench_reps(o, 10), o->budget_s, &res) == 0) {
            char extra[9000];
            snprintf(extra, sizeof extra,
                     "\"recipe\":\"%s\",\"shape\":\"%s B=%d T=%lld\",\"data\":\"%s\",\"checkpoint\":\"%s\","
                     "\"seq_len\":%lld,\"batch\":%d,\"lr\":%g,\"weight_decay\":%g",
                     name, lb_model_kind_name(mc.kind), row->batch, (long long)to.seq_len, data_path, ck_path,
                     (long long)to.seq_len, row->batch, row->lrs[0], row->weight_decay);
            bench_print_json("lookback", "PRODUCT", o->threads, &res, base, extra);
            rc = 0;
        }
    }
    lb_trainer_free(tr);
    lb_model_free(model);
    lb_dataset_close(data);
    return rc;
}

int main(int argc, char **argv)
{
    lb_cli_restore_environment(); /* OpenBLAS loaded as the lookback command loads it (cli/preinit.h) */
    if (lb_omp_wait_defaults()) /* the lookback command's libgomp spin setting (tensor/threads.h) */
        execv("/proc/self/exe", argv);
    const char *dir = NULL;
    /* --dir DIR is ours; the rest is the harness's (bench_parse) */
    char *rest[64];
    int n = 0;
    for (int i = 0; i < argc && n < 63; i++) {
        if (strcmp(argv[i], "--dir") == 0 && i + 1 < argc) {
            dir = argv[++i];
            continue;
        }
        rest[n++] = argv[i];
    }
    rest[n] = NULL;
    bench_opts o;
    if (bench_parse(n, rest, &o) != 0 || (!dir && strcmp(o.workload, "list") != 0)) {
        fprintf(stderr, "usage: bench_product RECIPE|all|list --dir DIR [--threads N] [--warmup N] [--reps N] "
                        "[--quick] [--budget SECONDS]\n");
        return 2;
    }
    if (strcmp(o.workload, "list") == 0) {
        for (int r = 0; r < lb_recipes_count; r++) {
            char name[64];
            recipe_name(r, name, sizeof name);
            printf("%s\n", name);
        }
        return 0;
    }
    lb_set_num_threads(o.threads);
    int failed = 0, found = 0;
    for (int r = 0; r < lb_recipes_count; r++) {
        char name[64];
        recipe_name(r, name, sizeof name);
        if (strcmp(o.workload, "all") == 0 || strcmp(o.workload, name) == 0) {
            found = 1;
            failed |= run_recipe(r, dir, &o);
        }
    }
    if (!found) {
        fprintf(stderr, "bench_product: unknown recipe '%s' (bench_product list prints them)\n", o.workload);
        return 2;
    }
    return failed;
}

/* The demo's data cache and learning-rate search (lab/demo.h). */
#include "lab/demo.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/file.h>
#include <unistd.h>

#include "data/dataset.h"
#include "lab/files.h"

/* The generator options of a demo file. */
static lb_task_options demo_options(const lb_demo_file *f, uint64_t seed)
{
    lb_task_options o;
    lb_task_options_default(LB_TASK_SPIKE, &o);
    o.seq_len = f->seq_len;
    o.min_distance = f->min_distance;
    o.max_distance = f->max_distance;
    o.n_train = f->n_train;
    o.n_val = f->n_val;
    o.n_test = f->n_test;
    o.seed = seed;
    return o;
}

/* "" when a cached file was made with options `want` (read from the file's own
 * attributes), else what differs, e.g. "seq_len 64, not 256". */
static void cache_mismatch(const lb_dataset *ds, const lb_task_options *want, char *why, size_t size)
{
    const lb_task_options *got = lb_dataset_options(ds);
    why[0] = '\0';
    if (lb_dataset_task(ds) != want->task)
        snprintf(why, size, "task %s, not %s", lb_dataset_task_name(ds), lb_task_name(want->task));
#define SAME(field)                                                                                              \
    else if (got->field != want->field) snprintf(why, size, #field " %lld, not %lld", (long long)got->field,      \
                                                 (long long)want->field)
    SAME(seq_len);
    SAME(min_distance);
    SAME(max_distance);
    SAME(n_train);
    SAME(n_val);
    SAME(n_test);
    SAME(seed);
    SAME(readings);
    SAME(noise_types);
    SAME(sensors);
#undef SAME
}

/* Generates the file unless a valid one made with the same options is cached. */
lb_status lb_demo_ensure_file(const char *dir, const lb_demo_file *f, uint64_t seed, char *path, size_t size, int quiet)
{
    if (snprintf(path, size, "%s/%s.h5", dir, f->name) >= (int)size)
        return lb_error(LB_ERR_VALUE, "data folder path too long: %s", dir);
    lb_task_options o = demo_options(f, seed);
    if (lb_files_exists(path)) {
        lb_dataset *ds = lb_dataset_open(path);
        char why[160] = "";
        if (ds)
            cache_mismatch(ds, &o, why, sizeof why);
        lb_dataset_close(ds);
        if (ds && !why[0])
            return LB_OK;
        /* Said even with --quiet: a file the user may have put there is replaced. */
        fprintf(stderr, "regenerating %s: %s\n", path, ds ? why : lb_last_error());
    }
    if (!quiet)
        fprintf(stderr, "generating %s (spike, seq_len %lld, clue %lld..%lld events back)\n", path,
                (long long)f->seq_len, (long long)f->min_distance, (long long)f->max_distance);
    return lb_task_generate(&o, path, NULL, NULL);
}

/* An exclusive lock on the data cache (DIR/.lock) while the demo checks and makes its
 * files: a second demo on the same cache waits, saying so, and then finds them made.
 * Returns the descriptor (kept until the process ends) or -1 with an error. */
int lb_demo_lock_cache(const char *dir, int quiet)
{
    char path[4200];
    snprintf(path, sizeof path, "%s/.lock", dir);
    int fd = open(path, O_RDWR | O_CREAT | O_CLOEXEC, 0644);
    if (fd < 0) {
        lb_error(LB_ERR_IO, "%s: cannot create the lock file: %s", path, lb_system_error(errno));
        return -1;
    }
    if (flock(fd, LOCK_EX | LOCK_NB) != 0) {
        if (!quiet)
            fprintf(stderr, "waiting for another lookback demo that is preparing the data in %s\n", dir);
        if (flock(fd, LOCK_EX) != 0) {
            close(fd);
            lb_error(LB_ERR_IO, "%s: cannot lock: %s", path, lb_system_error(errno));
            return -1;
        }
    }
    return fd;
}

/* Picks spec's learning rate from {3e-3, 1e-3, 3e-4} by validation accuracy after
 * `budget` seconds of training each (runs kept in out_dir/<name>-lr-search/). */
lb_status lb_demo_choose_lr(lb_compare_model *spec, const char *out_dir, double budget, int quiet)
{
    const double lrs[] = {3e-3, 1e-3, 3e-4};
    double best_acc = -1, best_lr = lrs[0];
    for (size_t i = 0; i < sizeof lrs / sizeof lrs[0]; i++) {
        lb_compare_model probe = *spec;
        char dir[4200];
        snprintf(dir, sizeof dir, "%s/%s-lr-search/lr-%g", out_dir, spec->name, lrs[i]);
        probe.rc.train.optim.lr = lrs[i];
        probe.rc.train.schedule.base_lr = lrs[i];
        probe.rc.train.time_budget = budget;
        lb_run_result run;
        if (lb_run_train(&probe.rc, dir, 0, quiet, &run, NULL) != LB_OK)
            return lb_last_status();
        if (!quiet)
            fprintf(stderr, "%s lr %g: val accuracy %.4f after %lld steps\n", spec->name, lrs[i],
                    run.last_val.accuracy, (long long)run.steps);
        if (run.last_val.accuracy > best_acc) {
            best_acc = run.last_val.accuracy;
            best_lr = lrs[i];
        }
    }
    spec->rc.train.optim.lr = best_lr;
    snprintf(spec->note, sizeof spec->note, "lr %g chosen from {3e-3, 1e-3, 3e-4} on the validation split (%.3f after %.0f s)",
             best_lr, best_acc, budget);
    return LB_OK;
}


lb_status lb_demo_make_data(const char *data_dir, int quick, int quiet, char paths[LB_DEMO_FILES][4096])
{
    LB_CHECK_ARG(data_dir && paths, LB_ERR_VALUE);
    const int64_t n_eval = quick ? 64 : 200;
    const lb_demo_file files[LB_DEMO_FILES] = {
        {"train", 256, 1, 250, quick ? 4000 : 20000, quick ? 256 : 1000, 0},
        {"short", 64, 4, 60, quick ? 4000 : 20000, quick ? 256 : 1000, n_eval},
        {"near-100", 160, 90, 110, 0, 0, n_eval},
        {"far-1000", 1100, 950, 1050, 0, 0, n_eval},
        {"far-7000", 7200, 6900, 7100, 0, 0, n_eval},
    };
    for (int i = 0; i < LB_DEMO_FILES; i++)
        if (lb_demo_ensure_file(data_dir, &files[i], 1000 + (uint64_t)i, paths[i], 4096, quiet) != LB_OK)
            return lb_last_status();
    return LB_OK;
}

void lb_demo_models(char paths[LB_DEMO_FILES][4096], int quick, double budget, lb_budget_clock clock, int threads,
                    lb_compare_model specs[LB_DEMO_MODELS])
{
    if (!paths || !specs)
        return;
    memset(specs, 0, LB_DEMO_MODELS * sizeof *specs);
    /* Attention: one pre-norm block, no positional encoding, so the alarm finds the spike by
     * content at any distance; the last block reads only the alarm's position. */
    lb_compare_model *att = &specs[0];
    snprintf(att->name, sizeof att->name, "attention");
    lb_run_config_default(&att->rc, LB_MODEL_TRANSFORMER);
    snprintf(att->rc.data, sizeof att->rc.data, "%s", paths[0]);
    att->rc.model.n_layers = 1;
    att->rc.model.d_model = 64;
    att->rc.model.n_heads = 4;
    att->rc.model.d_ff = 128;
    att->rc.model.pos = LB_POS_NONE;
    att->rc.train.optim.lr = 3e-3;
    /* The LSTM: forget-gate bias 1 (Gers et al. 2000; Jozefowicz et al. 2015). */
    lb_compare_model *lstm = &specs[1];
    snprintf(lstm->name, sizeof lstm->name, "lstm");
    lb_run_config_default(&lstm->rc, LB_MODEL_LSTM);
    snprintf(lstm->rc.data, sizeof lstm->rc.data, "%s", paths[0]);
    lstm->rc.model.hidden_size = 128;
    lstm->rc.model.n_layers = 1;
    lstm->rc.model.forget_bias = 1.0;
    /* The same LSTM on short sequences: the baseline works when the clue is near. */
    lb_compare_model *lstm_short = &specs[2];
    *lstm_short = *lstm;
    snprintf(lstm_short->name, sizeof lstm_short->name, "lstm-short");
    snprintf(lstm_short->rc.data, sizeof lstm_short->rc.data, "%s", paths[1]);
    for (int m = 0; m < LB_DEMO_MODELS; m++) {
        specs[m].rc.train.time_budget = budget;
        specs[m].rc.train.budget_clock = clock;
        specs[m].rc.train.steps = 1000000;
        specs[m].rc.train.schedule = lb_schedule_constant(specs[m].rc.train.optim.lr); /* base_lr follows lr */
        specs[m].rc.train.schedule.warmup_steps = 50;
        specs[m].rc.train.eval_every = quick ? 25 : 100;
        specs[m].rc.train.eval_examples = 256;
        specs[m].rc.train.threads = threads;
    }
}

void lb_demo_evals(char paths[LB_DEMO_FILES][4096], lb_compare_eval evals[LB_DEMO_EVALS])
{
    if (!paths || !evals)
        return;
    memset(evals, 0, LB_DEMO_EVALS * sizeof *evals);
    const char *labels[LB_DEMO_EVALS] = {"short 4-60", "~100", "~1000", "~7000"};
    for (int e = 0; e < LB_DEMO_EVALS; e++) {
        snprintf(evals[e].path, sizeof evals[e].path, "%s", paths[e + 1]);
        snprintf(evals[e].label, sizeof evals[e].label, "%s", labels[e]);
    }
}

/* One training run into a run folder, shared by train, compare and demo. */
#include <errno.h>
#include <fcntl.h>
#include <json-c/json.h>
#include <limits.h>
#include <math.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include "lab/run.h"

#include "data/dataset.h"
#include "lab/files.h"
#include "lab/progress.h"
#include "tensor/blas.h"
#include "tensor/clock.h"
#include "tensor/threads.h"
#include "train/cost.h"
#include "train/distributed.h"
#include "lookback_commit.h"
#include "data/output.h"

typedef struct progress_state {
    lb_progress bar;
    int quiet;
    lb_eval_result last_val;
    const lb_dataset *text; /* a text corpus (bits per byte and per character), NULL otherwise */
    double tokens, seconds; /* positions and wall seconds of this run's steps */
} progress_state;

/* " 12.3k tok/s, MFU 4.1%" of one step (no MFU without a rate). */
static void step_costs(const lb_step_stats *s, char *text, size_t size)
{
    double tps = s->seconds > 0 ? (double)s->tokens / s->seconds : 0;
    int n = snprintf(text, size, tps >= 1e4 ? " %.1fk tok/s" : " %.0f tok/s", tps >= 1e4 ? tps / 1e3 : tps);
    if (!isnan(s->mfu) && n > 0 && (size_t)n < size)
        snprintf(text + n, size - (size_t)n, ", MFU %.1f%%", 100 * s->mfu);
}

static void on_event(lb_loop_event event, const lb_step_stats *s, const lb_eval_result *r, void *user)
{
    progress_state *p = user;
    if (event == LB_EVENT_EVAL)
        p->last_val = *r;
    if (event == LB_EVENT_STEP) {
        p->tokens += (double)s->tokens;
        p->seconds += s->seconds;
    }
    if (p->quiet)
        return;
    if (event == LB_EVENT_STEP) {
        char costs[64];
        step_costs(s, costs, sizeof costs);
        if (isnan(s->accuracy))
            lb_progress_update(&p->bar, s->step, "loss %.4f lr %.2e%s%s", s->loss, s->lr, costs,
                               s->skipped ? " (skipped)" : "");
        else
            lb_progress_update(&p->bar, s->step, "loss %.4f acc %.3f lr %.2e%s%s", s->loss, s->accuracy, s->lr, costs,
                               s->skipped ? " (skipped: non-finite gradient)" : "");
    } else if (event == LB_EVENT_EVAL) {
        if (p->bar.tty)
            fputc('\n', stderr);
        double bpb = NAN, bpc = NAN;
        if (p->text)
            lb_text_bits(p->text, "val", r->loss, &bpb, &bpc);
        if (p->text)
            fprintf(stderr, "%s step %lld: val loss %.4f nats/token, %.4f bits per byte, %.4f bits per char, perplexity "
                    "%.3f (accuracy %.4f)\n", p->bar.label, (long long)s->step, r->loss, bpb, bpc, exp(r->loss),
                    r->accuracy);
        else if (isnan(r->accuracy))
            fprintf(stderr, "%s step %lld: val mse %.5f\n", p->bar.label, (long long)s->step, r->mse);
        else
            fprintf(stderr, "%s step %lld: val loss %.4f accuracy %.4f\n", p->bar.label, (long long)s->step, r->loss,
                    r->accuracy);
    }
}

/* Ctrl-C (SIGINT) or SIGTERM asks the running trainer to stop after its step and save;
 * a second one ends the process at once. */
static lb_trainer *volatile active_trainer;
static volatile sig_atomic_t caught_signal;

static void on_signal(int sig)
{
    signal(sig, SIG_DFL);
    caught_signal = sig;
    if (active_trainer)
        lb_trainer_request_stop(active_trainer);
}

int lb_run_caught_signal(void)
{
    return (int)caught_signal;
}



/* Keeps the header and the rows of steps <= step (drops what a resumed run repeats).
 * Written to PATH.tmp and renamed: when a write fails, the old file stays whole. */
static lb_status truncate_metrics(const char *path, int64_t step, const char *header)
{
    lb_status st = lb_output_check(path, "metrics");
    if (st != LB_OK)
        return st;
    FILE *in = fopen(path, "r");
    if (!in)
        return LB_OK;
    char tmp[4200], line[1024];
    FILE *out = snprintf(tmp, sizeof tmp, "%s.tmp", path) < (int)sizeof tmp ? fopen(tmp, "w") : NULL;
    if (!out) {
        fclose(in);
        return lb_error(LB_ERR_IO, "%s: cannot write: %s", tmp, lb_system_error(errno));
    }
    int first = 1, bad = 0;
    while (fgets(line, sizeof line, in)) {
        char *end;
        long long row_step = strtoll(line, &end, 10);
        if (first && end == line) /* the header, as this version writes it */
            bad |= fprintf(out, "%s\n", header) < 0;
        else if (end != line && *end == ',' && row_step <= step)
            bad |= fputs(line, out) < 0;
        first = 0;
    }
    if (first) /* empty file: a run killed before writing anything */
        bad |= fprintf(out, "%s\n", header) < 0;
    bad |= ferror(in) != 0;
    fclose(in);
    bad |= fflush(out) != 0 || fsync(fileno(out)) != 0;
    int saved = errno;
    bad |= fclose(out) != 0;
    if (bad) {
        unlink(tmp);
        return lb_error(LB_ERR_IO, "%s: cannot rewrite the metrics (%s); the file is unchanged", path,
                        lb_system_error(saved ? saved : errno));
    }
    return lb_output_commit(tmp, path, "metrics");
}

/* One attempt of lb_run_lock_dir: the descriptor, -1 with the error set, or -2 when the
 * file locked is no longer the one at `path`. */
static int lock_file(const char *path, const char *dir)
{
    int fd = open(path, O_RDWR | O_CREAT | O_CLOEXEC, 0644);
    if (fd < 0) {
        lb_error(LB_ERR_IO, "%s: cannot create the lock file: %s", path, lb_system_error(errno));
        return -1;
    }
    if (flock(fd, LOCK_EX | LOCK_NB) != 0) {
        char pid[32] = "";
        ssize_t n = pread(fd, pid, sizeof pid - 1, 0);
        pid[n > 0 ? n : 0] = '\0';
        pid[strcspn(pid, "\n")] = '\0';
        close(fd);
        lb_error(LB_ERR_STATE, "%s is in use by a running lookback process%s%s%s (wait for it, or stop it first)", dir,
                 pid[0] ? " (pid " : "", pid, pid[0] ? ")" : "");
        return -1;
    }
    struct stat held, now;
    if (fstat(fd, &held) != 0 || stat(path, &now) != 0 || held.st_dev != now.st_dev || held.st_ino != now.st_ino) {
        close(fd);
        return -2;
    }
    char pid[32];
    int len = snprintf(pid, sizeof pid, "%ld\n", (long)getpid());
    if (ftruncate(fd, 0) != 0 || pwrite(fd, pid, (size_t)len, 0) != len) {
        /* The lock holds without the id; only a refusal message would lack it. */
    }
    return fd;
}

int lb_run_lock_dir(const char *dir)
{
    char path[4200];
    lb_files_join(path, sizeof path, dir, ".lock");
    for (int attempt = 0; attempt < 100; attempt++) {
        int fd = lock_file(path, dir);
        if (fd == -2)
            continue; /* the file was removed by its previous holder meanwhile: take the new one */
        return fd;
    }
    lb_error(LB_ERR_STATE, "%s is in use by a running lookback process (its lock file keeps changing)", dir);
    return -1;
}

void lb_run_unlock_dir(const char *dir, int fd)
{
    if (fd < 0)
        return;
    char path[4200];
    unlink(lb_files_join(path, sizeof path, dir, ".lock"));
    close(fd);
}


/* Under mpirun: one model trained by every rank (train), or whole runs per rank (compare). */
static int data_parallel;
void lb_run_set_data_parallel(int on) { data_parallel = on; }

static int accept_data_change;
void lb_run_set_accept_data_change(int on) { accept_data_change = on; }

/* On resume: the data file must be the one the run started on (size and CRC-32 recorded
 * in config.json), or validation scores and best.h5 would compare different sets. A
 * config.json without the record (older runs) is not checked. */
static lb_status check_same_data(const char *config_path, const char *data, const lb_run_record *now)
{
    json_object *root = json_object_from_file(config_path), *run = NULL, *crc = NULL, *bytes = NULL;
    lb_status st = LB_OK;
    if (root && json_object_object_get_ex(root, LB_CONFIG_RECORD_KEY, &run) &&
        json_object_object_get_ex(run, "data_crc32", &crc) && json_object_object_get_ex(run, "data_bytes", &bytes) &&
        json_object_is_type(crc, json_type_string) && json_object_is_type(bytes, json_type_int)) {
        char *end = NULL;
        unsigned long was_crc = strtoul(json_object_get_string(crc), &end, 16);
        int64_t was_bytes = json_object_get_int64(bytes);
        if (end && !*end && (was_crc != now->data_crc32 || was_bytes != now->data_bytes) && !accept_data_change) {
            char what[160];
            if (was_bytes != now->data_bytes)
                snprintf(what, sizeof what, "its size is %lld bytes, was %lld", (long long)now->data_bytes,
                         (long long)was_bytes);
            else
                snprintf(what, sizeof what, "same size, but its CRC-32 is %08x, was %08lx", (unsigned)now->data_crc32,
                         was_crc);
            st = lb_error(LB_ERR_STATE, "%s changed since the run started (%s): its validation scores and best.h5 "
                          "would compare different data; restore the file, or continue on the new one with "
                          "--accept-data-change", data, what);
        }
    }
    json_object_put(root);
    return st;
}

/* Removes what a new run wrote before failing, so the same --out can be used again. */
static void clean_failed_run(const char *dir, int created_dir)
{
    const char *names[] = {"config.json", "config.json.tmp", "metrics.csv", "metrics.csv.tmp", ".lock"};
    char path[4200];
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++) {
        struct stat sb; /* only regular files: a FIFO or device someone put there stays */
        if (lstat(lb_files_join(path, sizeof path, dir, names[i]), &sb) == 0 && S_ISREG(sb.st_mode) &&
            !lb_output_is_input(path))
            unlink(path);
    }
    if (created_dir)
        rmdir(dir);
}

/* One training run into a folder, as lb_run_train goes through it. */
typedef struct run_state {
    lb_run_config *rc;
    const char *dir;
    char config_path[4200], ckpt_path[4200], metrics_path[4200];
    int resume, quiet;
    lb_run_result *out;
    lb_dataset *data;
    lb_model *model;
    lb_trainer *trainer;
    FILE *metrics;
    int lock, created_dir;
    int threads, ranks, writer; /* writer: this process writes the run folder (rank 0) */
    lb_run_record record;
} run_state;

/* The data file opened and checked before any work: something to learn from, a
 * validation that scores, no file of the run folder in place of an input; a text
 * corpus's context chosen. The data path is made absolute, so a run resumes from any folder. */
static lb_status open_run_data(run_state *r)
{
    lb_run_config *rc = r->rc;
    char absolute[PATH_MAX];
    if (!r->resume && realpath(rc->data, absolute) && strlen(absolute) < sizeof rc->data)
        strcpy(rc->data, absolute);
    if (!(r->data = lb_dataset_open(rc->data)))
        return lb_last_status();
    /* Nothing to learn from, or a validation that would score nothing: refused before any
     * work; and no file of the run folder may replace the data file or the starting checkpoint. */
    if (lb_run_check_scored(r->data, "train") != LB_OK || lb_run_check_scored(r->data, "val") != LB_OK ||
        lb_output_protect(rc->data, "the --data file") != LB_OK ||
        (!r->resume && rc->init_from[0] && lb_output_protect(rc->init_from, "the --init-from checkpoint") != LB_OK))
        return lb_last_status();
    /* Every file the run writes is checked before any work (an input, a device, a link at
     * one of them refuses the run now, not at its first checkpoint with files left behind). */
    static const char *const run_files[][2] = {{"config.json", "run's options"}, {"metrics.csv", "metrics"},
                                               {"checkpoint.h5", "checkpoint"}, {"best.h5", "checkpoint"}};
    for (size_t i = 0; i < sizeof run_files / sizeof run_files[0]; i++) {
        char path[4200];
        if (lb_output_check(lb_files_join(path, sizeof path, r->dir, run_files[i][0]), run_files[i][1]) != LB_OK)
            return lb_last_status();
    }
    /* A text corpus: the context chosen now, and validation over the whole split unless
     * --eval-examples says otherwise; --seq-len means nothing to a task file. */
    if (lb_dataset_is_text(r->data)) {
        int64_t n_train = 0;
        lb_dataset_tokens(r->data, "train", &n_train);
        if (rc->train.seq_len == 0)
            rc->train.seq_len = n_train - 1 < LB_TEXT_DEFAULT_SEQ_LEN ? (n_train > 2 ? n_train - 1 : 1)
                                                                       : LB_TEXT_DEFAULT_SEQ_LEN;
        if (!rc->eval_examples_given)
            rc->train.eval_examples = 0;
        if (!rc->select_given) /* a language model is judged by its loss, not its argmax */
            rc->train.select = LB_SELECT_LOSS;
        if (lb_dataset_set_seq_len(r->data, rc->train.seq_len) != LB_OK) {
            r->out->usage = 1;
            return lb_last_status();
        }
    } else if (rc->train.seq_len > 0) {
        r->out->usage = 1;
        return lb_error(LB_ERR_VALUE, "--seq-len %lld: %s holds the %s task, whose sequences have their own length; "
                        "--seq-len chooses the context of a text corpus only (drop it)", (long long)rc->train.seq_len,
                        rc->data, lb_dataset_task_name(r->data));
    }
    return LB_OK;
}

/* The run folder made and locked (by the writer), and what is in it: a run killed
 * before its first checkpoint leaves config.json (and a header-only metrics.csv)
 * without checkpoint.h5, and starts again from step 0. */
static lb_status claim_run_folder(run_state *r)
{
    lb_status st = LB_OK;
    if (r->writer && (st = lb_files_mkdir(r->dir)) == LB_OK && (r->lock = lb_run_lock_dir(r->dir)) < 0)
        st = lb_last_status();
    if (st != LB_OK)
        return st;
    int has_ckpt = lb_files_exists(r->ckpt_path), has_config = lb_files_exists(r->config_path);
    if (r->writer && !r->resume && has_ckpt) {
        lb_run_unlock_dir(r->dir, r->lock); /* another run got here first: leave its files alone */
        r->lock = -1;
        return lb_error(LB_ERR_STATE, "%s already holds a run; continue it with --resume %s or choose another --out",
                        r->dir, r->dir);
    }
    if (!has_ckpt && has_config) {
        if (r->writer) {
            fprintf(stderr, "%s holds a run stopped before its first checkpoint (config.json only): %s\n", r->dir,
                    r->resume ? "starting it from step 0" : "a new run takes the folder over");
            st = truncate_metrics(r->metrics_path, 0, lb_metrics_header_for(r->data));
        }
        r->resume = 0;
        return st;
    }
    if (r->resume && !has_ckpt)
        return lb_error(LB_ERR_STATE, "%s holds no run to resume (no checkpoint.h5)", r->dir);
    return LB_OK;
}

/* The starting weights (--init-from) of a new run, or the checkpoint of a resumed one,
 * whose step and budget must leave something to train. */
static lb_status load_start(run_state *r)
{
    lb_run_config *rc = r->rc;
    lb_status st = LB_OK;
    if (!r->resume && rc->init_from[0] && (st = lb_checkpoint_load_params(rc->init_from, r->model)) != LB_OK)
        lb_error_context("--init-from");
    if (st != LB_OK || !r->resume || (st = lb_trainer_load(r->trainer, r->ckpt_path)) != LB_OK)
        return st;
    double spent = lb_trainer_budget_spent(r->trainer);
    if (lb_trainer_steps_done(r->trainer) > rc->train.steps) {
        r->out->usage = 1;
        return lb_error(LB_ERR_VALUE, "--steps %lld is below the checkpoint's step %lld (--steps is the total)",
                        (long long)rc->train.steps, (long long)lb_trainer_steps_done(r->trainer));
    }
    if (rc->train.time_budget > 0 && spent >= rc->train.time_budget) {
        r->out->usage = 1;
        return lb_error(LB_ERR_VALUE, "the run has already trained %.1f s, its whole --time-budget of %g s; give a "
                        "larger --time-budget to continue", spent, rc->train.time_budget);
    }
    return r->writer ? truncate_metrics(r->metrics_path, lb_trainer_steps_done(r->trainer),
                                        lb_metrics_header_for(r->data))
                     : LB_OK;
}

/* What the run resolved (threads, version, the data file's size and CRC-32), checked
 * against a resumed run's config.json and across the ranks, which must all read the
 * same data, byte for byte (config.json records rank 0's checksum). */
static lb_status record_data(run_state *r)
{
    lb_run_config *rc = r->rc;
    r->record = (lb_run_record){r->threads, LOOKBACK_VERSION, LOOKBACK_COMMIT, lb_dataset_task_name(r->data), 0, 0};
    lb_status st = LB_OK;
    if (r->writer || r->ranks > 1 || r->resume)
        st = lb_files_crc32(rc->data, &r->record.data_crc32, &r->record.data_bytes);
    if (st == LB_OK && r->resume)
        st = check_same_data(r->config_path, rc->data, &r->record);
    if (st == LB_OK && r->ranks > 1)
        st = lb_dist_check_same(r->record.data_bytes, "the data file's size in bytes (every rank must read the same "
                                                      "data file)");
    if (st == LB_OK && r->ranks > 1)
        st = lb_dist_check_same(r->record.data_crc32, "the data file's CRC-32 (every rank must read the same data "
                                                      "file)");
    return st;
}

/* The notes before training (a warm-up as long as the run, no validation), the batch
 * split over the ranks, then config.json and metrics.csv (its header when new) by the
 * writer. */
static lb_status prepare_outputs(run_state *r)
{
    lb_run_config *rc = r->rc;
    lb_status st = LB_OK;
    if (!r->quiet && rc->train.schedule.warmup_steps >= rc->train.steps)
        fprintf(stderr, "lookback: note: --warmup %lld is not shorter than --steps %lld, so the learning rate never "
                "reaches --lr %g\n", (long long)rc->train.schedule.warmup_steps, (long long)rc->train.steps,
                rc->train.optim.lr);
    if (!r->quiet && lb_dataset_split_size(r->data, "val") == 0)
        fprintf(stderr, "lookback: note: %s has no validation examples (its val split is empty): the run will not "
                "validate and writes no best.h5\n", rc->data);
    if (r->ranks > 1 && (st = lb_trainer_distribute(r->trainer, NULL)) == LB_ERR_VALUE)
        r->out->usage = 1; /* the batch does not split over the ranks: the same on every rank */
    if (st == LB_OK && r->writer)
        st = lb_run_config_save_json(rc, r->config_path, &r->record);
    if (st != LB_OK || !r->writer || (st = lb_output_check(r->metrics_path, "metrics")) != LB_OK)
        return st;
    int new_metrics = !lb_files_exists(r->metrics_path);
    if (!(r->metrics = fopen(r->metrics_path, "a")))
        return lb_error(LB_ERR_IO, "%s: cannot open for writing: %s", r->metrics_path, lb_system_error(errno));
    if (new_metrics && (fprintf(r->metrics, "%s\n", lb_metrics_header_for(r->data)) < 0 || fflush(r->metrics) != 0))
        return lb_error(LB_ERR_IO, "%s: cannot write: %s", r->metrics_path, lb_system_error(errno));
    return LB_OK;
}

/* The first lines a run prints: the model, its size, the steps and the threads. */
static void print_start(const run_state *r)
{
    const lb_run_config *rc = r->rc;
    if (r->quiet)
        return;
    fprintf(stderr, "training %s (%lld parameters%s%s) on %s: steps %lld..%lld%s, %d thread%s%s\n",
            lb_model_kind_name(rc->model.kind), (long long)r->out->parameters,
            !r->resume && rc->init_from[0] ? " from " : "", !r->resume ? rc->init_from : "", rc->data,
            (long long)lb_trainer_steps_done(r->trainer), (long long)rc->train.steps,
            rc->train.time_budget > 0 ? " or the time budget" : "", r->threads, r->threads == 1 ? "" : "s",
            r->ranks > 1 ? " per process" : "");
    const lb_run_result *out = r->out;
    if (!isnan(out->flops.forward)) {
        char fwd[32], att[32], trn[32];
        fprintf(stderr, "cost: %s FLOPs per position forward (attention's n² term %s), %s training, at seq_len %lld; "
                "sgemm %.1f GFLOP/s on %d thread%s\n", lb_flops_text(out->flops.forward, fwd, sizeof fwd),
                lb_flops_text(out->flops.attention, att, sizeof att), lb_flops_text(out->flops.training, trn, sizeof trn),
                (long long)out->flops.seq_len, out->sgemm_rate / 1e9, r->threads, r->threads == 1 ? "" : "s");
    }
    if (r->ranks > 1)
        fprintf(stderr, "data parallel over %d processes: %lld examples of each batch of %lld per process\n",
                r->ranks, (long long)(rc->train.batch_size / r->ranks), (long long)rc->train.batch_size);
}

/* The training loop with its progress bar, SIGINT and SIGTERM asking it to stop; the
 * outcome in r->out. *ps keeps the bar's state for print_done. */
static lb_status train_steps(run_state *r, progress_state *ps)
{
    *ps = (progress_state){.quiet = r->quiet};
    if (lb_dataset_is_text(r->data))
        ps->text = r->data;
    const char *slash = strrchr(r->dir, '/');
    lb_progress_begin(&ps->bar, slash && slash[1] ? slash + 1 : r->dir, r->rc->train.steps);
    ps->bar.budget = r->rc->train.time_budget;
    ps->bar.first = lb_trainer_steps_done(r->trainer);
    ps->bar.budget_spent = lb_trainer_budget_spent(r->trainer);
    active_trainer = r->trainer;
    caught_signal = 0;
    void (*old_int)(int) = signal(SIGINT, on_signal);
    void (*old_term)(int) = signal(SIGTERM, on_signal);
    lb_status st = lb_trainer_run(r->trainer, r->writer ? r->ckpt_path : NULL, r->metrics, on_event, ps);
    signal(SIGINT, old_int);
    signal(SIGTERM, old_term);
    active_trainer = NULL;
    if (!r->quiet)
        lb_progress_end(&ps->bar);
    lb_run_result *out = r->out;
    out->steps = lb_trainer_steps_done(r->trainer);
    out->seconds = lb_trainer_elapsed(r->trainer);
    out->budget_seconds = lb_trainer_budget_spent(r->trainer);
    out->last_val = ps->last_val;
    out->tokens_per_second = ps->seconds > 0 ? ps->tokens / ps->seconds : NAN;
    out->mfu = lb_mfu(out->flops.training, out->tokens_per_second, out->sgemm_rate);
    out->peak_memory_mib = lb_peak_memory_mib();
    out->interrupted = lb_trainer_stopped(r->trainer);
    out->signal = out->interrupted ? (int)caught_signal : 0;
    if ((st == LB_ERR_NUMERIC || st == LB_ERR_IO) && lb_files_exists(r->ckpt_path)) {
        char cause[1024]; /* the cause first, then what is on disk */
        snprintf(cause, sizeof cause, "%s", lb_last_error());
        if (!strstr(cause, r->ckpt_path))
            lb_error(st, "%s; the last good checkpoint is kept in %s", cause, r->ckpt_path);
    } else if (st == LB_OK && out->interrupted) {
        st = lb_error(LB_ERR_STATE, "interrupted at step %lld; %s; continue with lookback train --resume %s",
                      (long long)out->steps, r->writer ? "the checkpoint is saved" : "rank 0 saved the checkpoint",
                      r->dir);
    }
    out->skipped = lb_trainer_run_skipped(r->trainer);
    out->best_step = lb_trainer_best(r->trainer, &out->best_metric);
    out->solved_step = lb_trainer_solved_step(r->trainer, NULL);
    return st;
}

/* The lines a finished run prints: solved or stopped early, then "done:" with the steps,
 * time, checkpoint, best and last validation (rare-event measures, bits per character). */
static void print_done(const run_state *r, const progress_state *ps)
{
    const lb_run_config *rc = r->rc;
    const lb_run_result *out = r->out;
    char skipped[64] = "", best[4400] = "";
    if (out->skipped > 0)
        snprintf(skipped, sizeof skipped, " (%lld skipped: non-finite gradient)", (long long)out->skipped);
    const char *score_name = rc->train.select == LB_SELECT_ACCURACY
                                 ? (isnan(out->last_val.accuracy) ? "mse" : "accuracy")
                                 : lb_val_select_name(rc->train.select);
    if (out->best_step > 0)
        snprintf(best, sizeof best, "; best validation %s %.4f at step %lld in %s/best.h5", score_name,
                 out->best_metric, (long long)out->best_step, r->dir);
    /* the rare-event measures of the last validation, next to its accuracy */
    const lb_class_report *cr = &out->last_val.classes;
    if (cr->num_classes > 0 && cr->total > 0) {
        size_t used = strlen(best);
        snprintf(best + used, sizeof best - used, "; last validation accuracy %.4f, macro-F1 %.4f%s",
                 out->last_val.accuracy, cr->macro_f1, cr->num_classes == 2 ? ", F1 (class 1) " : "");
        used = strlen(best);
        if (cr->num_classes == 2)
            snprintf(best + used, sizeof best - used, "%.4f, PR-AUC %.4f", cr->f1[1], out->last_val.average_precision);
    }
    double solved_score;
    if (lb_trainer_solved_step(r->trainer, &solved_score) == out->steps && out->steps > 0)
        fprintf(stderr, "solved: validation %s %.4g reached --stop-at %g at step %lld\n", score_name, solved_score,
                rc->train.stop_at, (long long)out->steps);
    if (lb_trainer_stopped_early(r->trainer))
        fprintf(stderr, "stopped early: %lld evaluations without a better validation (--patience %lld)\n",
                (long long)rc->train.patience, (long long)rc->train.patience);
    char text[256] = "";
    double bpb = NAN, bpc = NAN;
    if (ps->text)
        lb_text_bits(r->data, "val", out->last_val.loss, &bpb, &bpc);
    if (ps->text && out->last_val.examples > 0)
        snprintf(text, sizeof text, "; validation %.4f bits per byte, %.4f bits per char (loss %.4f nats/token, "
                 "perplexity %.3f) over %lld windows of %lld", bpb, bpc, out->last_val.loss, exp(out->last_val.loss),
                 (long long)out->last_val.examples, (long long)lb_dataset_seq_len(r->data));
    fprintf(stderr, "done: %lld steps in %.1f s%s; checkpoint %s%s%s\n", (long long)out->steps, out->seconds, skipped,
            r->ckpt_path, best, text);
    if (out->tokens_per_second > 0)
        fprintf(stderr, "cost: %.0f positions/s, MFU %.1f%% of the measured sgemm rate, peak memory %.0f MiB\n",
                out->tokens_per_second, 100 * out->mfu, out->peak_memory_mib);
}

/* metrics.csv closed; a start that failed leaves nothing (a run that took steps keeps
 * its metrics rows); the lock released (no .lock is left behind); the model handed
 * over on success. */
static lb_status finish_run(run_state *r, lb_status st, lb_model **model_out)
{
    if (r->metrics && fclose(r->metrics) != 0 && st == LB_OK)
        st = lb_error(LB_ERR_IO, "%s: cannot finish writing: %s", r->metrics_path, lb_system_error(errno));
    if (st != LB_OK && !r->resume && r->lock >= 0 && !lb_files_exists(r->ckpt_path) &&
        (!r->trainer || lb_trainer_steps_done(r->trainer) == 0))
        clean_failed_run(r->dir, r->created_dir);
    lb_run_unlock_dir(r->dir, r->lock);
    lb_trainer_free(r->trainer);
    if (st == LB_OK && model_out)
        *model_out = r->model;
    else
        lb_model_free(r->model);
    lb_dataset_close(r->data);
    return st;
}

lb_status lb_run_train(lb_run_config *rc, const char *dir, int resume, int quiet, lb_run_result *out,
                              lb_model **model_out)
{
    run_state r = {.rc = rc, .dir = dir, .resume = resume, .quiet = quiet, .out = out, .lock = -1};
    lb_files_join(r.config_path, sizeof r.config_path, dir, "config.json");
    lb_files_join(r.ckpt_path, sizeof r.ckpt_path, dir, "checkpoint.h5");
    lb_files_join(r.metrics_path, sizeof r.metrics_path, dir, "metrics.csv");
    memset(out, 0, sizeof *out);
    if (model_out)
        *model_out = NULL;
    lb_status st = open_run_data(&r);
    if (st != LB_OK) {
        lb_dataset_close(r.data);
        return st;
    }
    lb_model_config_fit_data(&rc->model, r.data);
    if ((r.threads = lb_run_set_threads(rc->train.threads)) < 0) {
        lb_dataset_close(r.data);
        return lb_last_status();
    }
    if (rc->train.threads > r.threads) /* fewer threads fit in the address space left */
        rc->train.threads = r.threads;
    /* With data parallelism, rank 0 alone writes the run folder; every rank reads a resumed checkpoint. */
    r.ranks = data_parallel ? lb_dist_size() : 1;
    r.writer = r.ranks == 1 || lb_dist_rank() == 0;
    r.quiet = quiet || !r.writer;
    /* Options that contradict each other are usage errors (exit 2). */
    st = lb_train_config_check(&rc->train);
    r.model = st == LB_OK ? lb_model_new(&rc->model) : NULL;
    out->usage = !r.model && lb_last_status() == LB_ERR_VALUE;
    r.trainer = r.model ? lb_trainer_new(r.model, r.data, &rc->train) : NULL;
    r.created_dir = !lb_files_exists(dir);
    st = r.trainer ? claim_run_folder(&r) : lb_last_status();
    if (st == LB_OK)
        st = load_start(&r);
    if (st == LB_OK)
        st = record_data(&r);
    if (st == LB_OK)
        st = prepare_outputs(&r);
    if (st == LB_OK) {
        out->parameters = lb_params_numel(lb_model_params(r.model));
        lb_trainer_set_sgemm_rate(r.trainer, lb_sgemm_rate());
        lb_trainer_costs(r.trainer, &out->flops, &out->sgemm_rate);
        print_start(&r);
        progress_state ps;
        st = train_steps(&r, &ps);
        if (st == LB_OK && !r.quiet)
            print_done(&r, &ps);
    }
    return finish_run(&r, st, model_out);
}

int lb_run_set_threads(int n)
{
    if (n <= 0) {
        const char *env = getenv("OMP_NUM_THREADS");
        /* under mpirun the processors are shared by the ranks on this host */
        n = env && atoi(env) > 0 ? atoi(env) : (int)sysconf(_SC_NPROCESSORS_ONLN) / lb_dist_local_size();
        if (n < 1)
            n = 1;
    }
    int got = lb_blas_reserve_buffers(n);
    if (got > 0 && got < n)
        fprintf(stderr, "lookback: %d thread%s instead of %d: the address space left (ulimit -v) holds the "
                "linear-algebra buffers of %d\n", got, got == 1 ? "" : "s", n, got);
    return got;
}

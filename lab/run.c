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
#include "train/distributed.h"
#include "lookback_commit.h"
#include "data/output.h"

typedef struct progress_state {
    lb_progress bar;
    int quiet;
    lb_eval_result last_val;
    const lb_dataset *text; /* a text corpus (bits per byte and per character), NULL otherwise */
} progress_state;

static void on_event(lb_loop_event event, const lb_step_stats *s, const lb_eval_result *r, void *user)
{
    progress_state *p = user;
    if (event == LB_EVENT_EVAL)
        p->last_val = *r;
    if (p->quiet)
        return;
    if (event == LB_EVENT_STEP) {
        if (isnan(s->accuracy))
            lb_progress_update(&p->bar, s->step, "loss %.4f lr %.2e%s", s->loss, s->lr, s->skipped ? " (skipped)" : "");
        else
            lb_progress_update(&p->bar, s->step, "loss %.4f acc %.3f lr %.2e%s", s->loss, s->accuracy, s->lr,
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

lb_status lb_run_train(lb_run_config *rc, const char *dir, int resume, int quiet, lb_run_result *out,
                              lb_model **model_out)
{
    char config_path[4200], ckpt_path[4200], metrics_path[4200];
    lb_files_join(config_path, sizeof config_path, dir, "config.json");
    lb_files_join(ckpt_path, sizeof ckpt_path, dir, "checkpoint.h5");
    lb_files_join(metrics_path, sizeof metrics_path, dir, "metrics.csv");
    memset(out, 0, sizeof *out);
    if (model_out)
        *model_out = NULL;
    /* The data path is stored absolute, so a run resumes from any folder. */
    char absolute[PATH_MAX];
    if (!resume && realpath(rc->data, absolute) && strlen(absolute) < sizeof rc->data)
        strcpy(rc->data, absolute);
    lb_dataset *data = lb_dataset_open(rc->data);
    if (!data)
        return lb_last_status();
    /* Nothing to learn from, or a validation that would score nothing: refused before any
     * work; and no file of the run folder may replace the data file or the starting checkpoint. */
    if (lb_run_check_scored(data, "train") != LB_OK || lb_run_check_scored(data, "val") != LB_OK ||
        lb_output_protect(rc->data, "the --data file") != LB_OK ||
        (!resume && rc->init_from[0] && lb_output_protect(rc->init_from, "the --init-from checkpoint") != LB_OK)) {
        lb_dataset_close(data);
        return lb_last_status();
    }
    /* Every file the run writes is checked before any work (an input, a device, a link at
     * one of them refuses the run now, not at its first checkpoint with files left behind). */
    static const char *const run_files[][2] = {{"config.json", "run's options"}, {"metrics.csv", "metrics"},
                                               {"checkpoint.h5", "checkpoint"}, {"best.h5", "checkpoint"}};
    for (size_t i = 0; i < sizeof run_files / sizeof run_files[0]; i++) {
        char path[4200];
        if (lb_output_check(lb_files_join(path, sizeof path, dir, run_files[i][0]), run_files[i][1]) != LB_OK) {
            lb_dataset_close(data);
            return lb_last_status();
        }
    }
    /* A text corpus: the context chosen now, and validation over the whole split unless
     * --eval-examples says otherwise; --seq-len means nothing to a task file. */
    if (lb_dataset_is_text(data)) {
        int64_t n_train = 0;
        lb_dataset_tokens(data, "train", &n_train);
        if (rc->train.seq_len == 0)
            rc->train.seq_len = n_train - 1 < LB_TEXT_DEFAULT_SEQ_LEN ? (n_train > 2 ? n_train - 1 : 1)
                                                                       : LB_TEXT_DEFAULT_SEQ_LEN;
        if (!rc->eval_examples_given)
            rc->train.eval_examples = 0;
        if (!rc->select_given) /* a language model is judged by its loss, not its argmax */
            rc->train.select = LB_SELECT_LOSS;
        if (lb_dataset_set_seq_len(data, rc->train.seq_len) != LB_OK) {
            out->usage = 1;
            lb_dataset_close(data);
            return lb_last_status();
        }
    } else if (rc->train.seq_len > 0) {
        lb_error(LB_ERR_VALUE, "--seq-len %lld: %s holds the %s task, whose sequences have their own length; --seq-len "
                 "chooses the context of a text corpus only (drop it)", (long long)rc->train.seq_len, rc->data,
                 lb_dataset_task_name(data));
        out->usage = 1;
        lb_dataset_close(data);
        return lb_last_status();
    }
    lb_model_config_fit_data(&rc->model, data);
    int threads = lb_run_set_threads(rc->train.threads);
    if (threads < 0) {
        lb_dataset_close(data);
        return lb_last_status();
    }
    if (rc->train.threads > threads) /* fewer threads fit in the address space left */
        rc->train.threads = threads;
    /* With data parallelism, rank 0 alone writes the run folder; every rank reads a resumed checkpoint. */
    int ranks = data_parallel ? lb_dist_size() : 1, writer = ranks == 1 || lb_dist_rank() == 0;
    if (!writer)
        quiet = 1;
    /* Options that contradict each other are usage errors (exit 2). */
    lb_status st = lb_train_config_check(&rc->train);
    lb_model *model = st == LB_OK ? lb_model_new(&rc->model) : NULL;
    out->usage = !model && lb_last_status() == LB_ERR_VALUE;
    lb_trainer *trainer = model ? lb_trainer_new(model, data, &rc->train) : NULL;
    FILE *metrics = NULL;
    int lock = -1, created_dir = !lb_files_exists(dir);
    st = trainer ? LB_OK : lb_last_status();
    if (st == LB_OK && writer && (st = lb_files_mkdir(dir)) == LB_OK && (lock = lb_run_lock_dir(dir)) < 0)
        st = lb_last_status();
    /* The folder is ours now; what is in it? A run killed before its first checkpoint
     * leaves config.json (and a header-only metrics.csv) without checkpoint.h5. */
    int has_ckpt = st == LB_OK && lb_files_exists(ckpt_path), has_config = st == LB_OK && lb_files_exists(config_path);
    if (st == LB_OK && writer && !resume && has_ckpt) {
        lb_run_unlock_dir(dir, lock); /* another run got here first: leave its files alone */
        lock = -1;
        st = lb_error(LB_ERR_STATE, "%s already holds a run; continue it with --resume %s or choose another --out",
                      dir, dir);
    } else if (st == LB_OK && !has_ckpt && has_config) {
        if (writer) {
            fprintf(stderr, "%s holds a run stopped before its first checkpoint (config.json only): %s\n", dir,
                    resume ? "starting it from step 0" : "a new run takes the folder over");
            st = truncate_metrics(metrics_path, 0, lb_metrics_header_for(data));
        }
        resume = 0;
    } else if (st == LB_OK && resume && !has_ckpt) {
        st = lb_error(LB_ERR_STATE, "%s holds no run to resume (no checkpoint.h5)", dir);
    }
    if (st == LB_OK && !resume && rc->init_from[0] && (st = lb_checkpoint_load_params(rc->init_from, model)) != LB_OK)
        lb_error_context("--init-from");
    if (st == LB_OK && resume && (st = lb_trainer_load(trainer, ckpt_path)) == LB_OK) {
        double spent = lb_trainer_budget_spent(trainer);
        if (lb_trainer_steps_done(trainer) > rc->train.steps) {
            st = lb_error(LB_ERR_VALUE, "--steps %lld is below the checkpoint's step %lld (--steps is the total)",
                          (long long)rc->train.steps, (long long)lb_trainer_steps_done(trainer));
            out->usage = 1;
        } else if (rc->train.time_budget > 0 && spent >= rc->train.time_budget) {
            st = lb_error(LB_ERR_VALUE, "the run has already trained %.1f s, its whole --time-budget of %g s; give a "
                          "larger --time-budget to continue", spent, rc->train.time_budget);
            out->usage = 1;
        } else if (writer) {
            st = truncate_metrics(metrics_path, lb_trainer_steps_done(trainer), lb_metrics_header_for(data));
        }
    }
    /* What the run resolved, recorded beside the options. */
    lb_run_record record = {threads, LOOKBACK_VERSION, LOOKBACK_COMMIT, lb_dataset_task_name(data), 0, 0};
    if (st == LB_OK && (writer || ranks > 1 || resume))
        st = lb_files_crc32(rc->data, &record.data_crc32, &record.data_bytes);
    if (st == LB_OK && resume)
        st = check_same_data(config_path, rc->data, &record);
    /* Every rank reads the same data, byte for byte (config.json records rank 0's checksum). */
    if (st == LB_OK && ranks > 1)
        st = lb_dist_check_same(record.data_bytes, "the data file's size in bytes (every rank must read the same "
                                                   "data file)");
    if (st == LB_OK && ranks > 1)
        st = lb_dist_check_same(record.data_crc32, "the data file's CRC-32 (every rank must read the same data file)");
    if (st == LB_OK && !quiet && rc->train.schedule.warmup_steps >= rc->train.steps)
        fprintf(stderr, "lookback: note: --warmup %lld is not shorter than --steps %lld, so the learning rate never "
                "reaches --lr %g\n", (long long)rc->train.schedule.warmup_steps, (long long)rc->train.steps,
                rc->train.optim.lr);
    if (st == LB_OK && !quiet && lb_dataset_split_size(data, "val") == 0)
        fprintf(stderr, "lookback: note: %s has no validation examples (its val split is empty): the run will not "
                "validate and writes no best.h5\n", rc->data);
    if (st == LB_OK && ranks > 1 && (st = lb_trainer_distribute(trainer, NULL)) == LB_ERR_VALUE)
        out->usage = 1; /* the batch does not split over the ranks: the same on every rank */
    if (st == LB_OK && writer)
        st = lb_run_config_save_json(rc, config_path, &record);
    if (st == LB_OK && writer && (st = lb_output_check(metrics_path, "metrics")) == LB_OK) {
        int new_metrics = !lb_files_exists(metrics_path);
        if (!(metrics = fopen(metrics_path, "a")))
            st = lb_error(LB_ERR_IO, "%s: cannot open for writing: %s", metrics_path, lb_system_error(errno));
        else if (new_metrics && (fprintf(metrics, "%s\n", lb_metrics_header_for(data)) < 0 || fflush(metrics) != 0))
            st = lb_error(LB_ERR_IO, "%s: cannot write: %s", metrics_path, lb_system_error(errno));
    }
    if (st == LB_OK) {
        out->parameters = lb_params_numel(lb_model_params(model));
        if (!quiet)
            fprintf(stderr, "training %s (%lld parameters%s%s) on %s: steps %lld..%lld%s, %d thread%s%s\n",
                    lb_model_kind_name(rc->model.kind), (long long)out->parameters,
                    !resume && rc->init_from[0] ? " from " : "", !resume ? rc->init_from : "", rc->data,
                    (long long)lb_trainer_steps_done(trainer), (long long)rc->train.steps,
                    rc->train.time_budget > 0 ? " or the time budget" : "", threads, threads == 1 ? "" : "s",
                    ranks > 1 ? " per process" : "");
        if (!quiet && ranks > 1)
            fprintf(stderr, "data parallel over %d processes: %lld examples of each batch of %lld per process\n",
                    ranks, (long long)(rc->train.batch_size / ranks), (long long)rc->train.batch_size);
        progress_state ps = {.quiet = quiet};
        if (lb_dataset_is_text(data))
            ps.text = data;
        const char *slash = strrchr(dir, '/');
        lb_progress_begin(&ps.bar, slash && slash[1] ? slash + 1 : dir, rc->train.steps);
        ps.bar.budget = rc->train.time_budget;
        ps.bar.first = lb_trainer_steps_done(trainer);
        ps.bar.budget_spent = lb_trainer_budget_spent(trainer);
        active_trainer = trainer;
        caught_signal = 0;
        void (*old_int)(int) = signal(SIGINT, on_signal);
        void (*old_term)(int) = signal(SIGTERM, on_signal);
        st = lb_trainer_run(trainer, writer ? ckpt_path : NULL, metrics, on_event, &ps);
        signal(SIGINT, old_int);
        signal(SIGTERM, old_term);
        active_trainer = NULL;
        if (!quiet)
            lb_progress_end(&ps.bar);
        out->steps = lb_trainer_steps_done(trainer);
        out->seconds = lb_trainer_elapsed(trainer);
        out->budget_seconds = lb_trainer_budget_spent(trainer);
        out->last_val = ps.last_val;
        out->interrupted = lb_trainer_stopped(trainer);
        out->signal = out->interrupted ? (int)caught_signal : 0;
        if ((st == LB_ERR_NUMERIC || st == LB_ERR_IO) && lb_files_exists(ckpt_path)) {
            char cause[1024]; /* the cause first, then what is on disk */
            snprintf(cause, sizeof cause, "%s", lb_last_error());
            if (!strstr(cause, ckpt_path))
                lb_error(st, "%s; the last good checkpoint is kept in %s", cause, ckpt_path);
        }
        else if (st == LB_OK && out->interrupted)
            st = lb_error(LB_ERR_STATE, "interrupted at step %lld; %s; continue with "
                          "lookback train --resume %s", (long long)out->steps,
                          writer ? "the checkpoint is saved" : "rank 0 saved the checkpoint", dir);
        out->skipped = lb_trainer_run_skipped(trainer);
        out->best_step = lb_trainer_best(trainer, &out->best_metric);
        out->solved_step = lb_trainer_solved_step(trainer, NULL);
        if (st == LB_OK && !quiet) {
            char skipped[64] = "", best[4400] = "";
            if (out->skipped > 0)
                snprintf(skipped, sizeof skipped, " (%lld skipped: non-finite gradient)", (long long)out->skipped);
            const char *score_name = rc->train.select == LB_SELECT_ACCURACY
                                         ? (isnan(out->last_val.accuracy) ? "mse" : "accuracy")
                                         : lb_val_select_name(rc->train.select);
            if (out->best_step > 0)
                snprintf(best, sizeof best, "; best validation %s %.4f at step %lld in %s/best.h5", score_name,
                         out->best_metric, (long long)out->best_step, dir);
            /* the rare-event measures of the last validation, next to its accuracy */
            const lb_class_report *cr = &out->last_val.classes;
            if (cr->num_classes > 0 && cr->total > 0) {
                size_t used = strlen(best);
                snprintf(best + used, sizeof best - used, "; last validation accuracy %.4f, macro-F1 %.4f%s",
                         out->last_val.accuracy, cr->macro_f1, cr->num_classes == 2 ? ", F1 (class 1) " : "");
                used = strlen(best);
                if (cr->num_classes == 2)
                    snprintf(best + used, sizeof best - used, "%.4f, PR-AUC %.4f", cr->f1[1],
                             out->last_val.average_precision);
            }
            double solved_score;
            if (lb_trainer_solved_step(trainer, &solved_score) == out->steps && out->steps > 0)
                fprintf(stderr, "solved: validation %s %.4g reached --stop-at %g at step %lld\n", score_name,
                        solved_score, rc->train.stop_at, (long long)out->steps);
            if (lb_trainer_stopped_early(trainer))
                fprintf(stderr, "stopped early: %lld evaluations without a better validation (--patience %lld)\n",
                        (long long)rc->train.patience, (long long)rc->train.patience);
            char text[256] = "";
            double bpb = NAN, bpc = NAN;
            if (ps.text)
                lb_text_bits(data, "val", out->last_val.loss, &bpb, &bpc);
            if (ps.text && out->last_val.examples > 0)
                snprintf(text, sizeof text, "; validation %.4f bits per byte, %.4f bits per char (loss %.4f nats/token, "
                         "perplexity %.3f) over %lld windows of %lld", bpb, bpc, out->last_val.loss,
                         exp(out->last_val.loss), (long long)out->last_val.examples, (long long)lb_dataset_seq_len(data));
            fprintf(stderr, "done: %lld steps in %.1f s%s; checkpoint %s%s%s\n", (long long)out->steps, out->seconds,
                    skipped, ckpt_path, best, text);
        }
    }
    if (metrics && fclose(metrics) != 0 && st == LB_OK)
        st = lb_error(LB_ERR_IO, "%s: cannot finish writing: %s", metrics_path, lb_system_error(errno));
    /* A start that failed leaves nothing; a run that took steps keeps its metrics rows. */
    if (st != LB_OK && !resume && lock >= 0 && !lb_files_exists(ckpt_path) && (!trainer || lb_trainer_steps_done(trainer) == 0))
        clean_failed_run(dir, created_dir);
    lb_run_unlock_dir(dir, lock); /* no .lock is left behind */
    lb_trainer_free(trainer);
    if (st == LB_OK && model_out)
        *model_out = model;
    else
        lb_model_free(model);
    lb_dataset_close(data);
    return st;
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

/* The lookback command line: one function per subcommand (cli/<name>.c) and
 * the helpers they share (cli/common.c). Each returns the process exit code:
 * 0 success, 1 a failure at run time (bad data, a failed check), 2 bad usage. Errors
 * are printed as one line on stderr: "lookback <command>: <message>". */
#ifndef LB_CLI_H
#define LB_CLI_H

#include <stdint.h>
#include <stdio.h>

#include "data/dataset.h"
#include "tensor/error.h"

int lb_cli_data(int argc, char **argv);
int lb_cli_train(int argc, char **argv);
int lb_cli_eval(int argc, char **argv);
int lb_cli_demo(int argc, char **argv);
int lb_cli_compare(int argc, char **argv);
int lb_cli_gradcheck(int argc, char **argv);
int lb_cli_study(int argc, char **argv);
int lb_cli_predict(int argc, char **argv);
int lb_cli_stream(int argc, char **argv);

/* Prints "lookback <command>: <lb_last_error()>" on stderr and returns 1. */
int lb_cli_fail(const char *command);
/* When the last error is LB_ERR_MEMORY, rewrites `message` (size bytes) into the one form
 * every command uses for it: "out of memory (while <the outermost context>): <the
 * innermost detail>" ("while training", "while evaluating", ... after the command when
 * there is no context). A
 * message already in an "out of memory" form, or another status, is left as it is. */
void lb_cli_memory_message(const char *command, char *message, size_t size);
/* Prints "lookback <command>: <formatted message>" on stderr and returns `code`. */
int lb_cli_error(const char *command, int code, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
/* message as one printable line into out (size bytes): control bytes (newlines included),
 * DEL and bytes that are not UTF-8 become \xHH, so a name typed with escape sequences or
 * binary bytes never reaches the terminal raw. Every error line goes through it. */
void lb_cli_printable(const char *message, char *out, size_t size);
/* The usage error for getopt_long's return c after an option it could not take (':' a
 * missing value, anything else an unknown option; argv[optind - 1] is the option), naming
 * `lookback <command> --help`. Returns 2. */
int lb_cli_bad_option(const char *command, int c, char *const *argv);

/* Strict number parsing for option values: the whole text must be a number in
 * [min, max]. LB_ERR_VALUE naming the option (e.g. "--steps") otherwise. */
lb_status lb_cli_int(const char *option, const char *text, int64_t min, int64_t max, int64_t *out);
lb_status lb_cli_real(const char *option, const char *text, double min, double max, double *out);
/* A split name for `option` (e.g. "--split"): train, val or test, checked while the
 * options are read so that a wrong name is a usage error before any file is opened.
 * *out is set to `text`; LB_ERR_VALUE naming the option and the three names otherwise. */
lb_status lb_cli_split(const char *option, const char *text, const char **out);

/* Creates directory `path` (and parents) if missing; LB_ERR_IO naming it otherwise. */
lb_status lb_cli_mkdir(const char *path);
/* 1 if `path` exists (file or directory), 0 if not. */
int lb_cli_exists(const char *path);
/* Joins dir and name into buf; returns buf. */
char *lb_cli_path(char *buf, size_t size, const char *dir, const char *name);

/* Writes JSON object `root` (its reference is dropped) to `path` through PATH.tmp:
 * the path is checked first (lb_output_check: never a device, FIFO or folder), every
 * write is checked, and the finished file is renamed into place. LB_ERR_IO naming
 * the file (`what` says what it is) on failure; a previous file stays untouched. */
struct json_object;
lb_status lb_cli_write_json(struct json_object *root, const char *path, const char *what);

/* Sets the thread count for BLAS and OpenMP: n > 0, or OMP_NUM_THREADS when n == 0
 * and it is set, else the number of processors (shared by the MPI ranks on this host).
 * No BLAS worker runs before this call (cli/main.c). Each thread's OpenBLAS buffer
 * (129 MB of address space) is reserved here: under an address-space limit (ulimit -v)
 * the count is lowered until the buffers fit (one line on stderr says so), and when
 * not even one fits it returns -1 with LB_ERR_MEMORY "out of memory (while reserving
 * ...)" (OpenBLAS would otherwise retry its allocation forever). Returns the count in use. */
int lb_cli_set_threads(int n);
/* 1 when `bytes` more of address space can be mapped now (the limit of ulimit -v,
 * RLIMIT_AS), 0 if not: a check before work whose libraries cannot report a failed
 * allocation (OpenBLAS retries forever, GLib aborts). */
int lb_cli_address_space_free(size_t bytes);

/* Progress display on stderr: a live bar (step rate, ETA, loss, accuracy) when
 * stderr is a terminal, plain periodic lines otherwise. */
typedef struct lb_progress {
    const char *label;
    int64_t total;
    int64_t first;       /* steps already done when this process started (a resumed run):
                            the rate and ETA count only this process's steps and time */
    double budget;       /* seconds; > 0: the bar and ETA follow the time budget instead of `total` */
    double budget_spent; /* seconds of the budget spent before this process (a resumed run) */
    int tty;
    double start, last_print;
} lb_progress;
void lb_progress_begin(lb_progress *p, const char *label, int64_t total);
void lb_progress_update(lb_progress *p, int64_t done, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
void lb_progress_end(lb_progress *p);

/* The MSE of always predicting the mean target over the first n examples of a split
 * (per-sequence regression targets): the baseline a regression must beat (1/6 for the
 * adding task, the variance of the sum of two U(0, 1)). NAN when the split has no
 * regression targets or n < 1. */
double lb_cli_mean_predictor_mse(const lb_dataset *data, const char *split, int64_t n);
/* Under mpirun (train, compare): joins the MPI job before `run` and leaves it after.
 * Returns run's exit code. A rank that fails ends every rank (MPI_Abort) with that code,
 * except a usage error (2) that every rank reached: the job then ends normally with
 * exit code 2 and rank 0's one line. Started by mpirun in a build without MPI, it says
 * so and returns 1. */
int lb_cli_distributed(const char *command, int (*run)(int, char **), int argc, char **argv);
/* Runs a subcommand: lb_cli_distributed for the distributed ones (train, compare,
 * study); under mpirun, the others (data, eval, predict, stream, gradcheck, demo) run on
 * rank 0 only and the other ranks return 0 at once without output. Returns the exit code. */
int lb_cli_run_command(const char *command, int (*run)(int, char **), int distributed, int argc, char **argv);
/* Makes lb_cli_run_training train one model on all ranks (train) rather than whole
 * runs per rank (compare). */
void lb_cli_run_set_data_parallel(int on);
/* Lets a resumed run continue on a data file whose size or CRC-32 differs from what its
 * config.json recorded (train --accept-data-change); off: such a resume is refused. */
void lb_cli_run_set_accept_data_change(int on);

/* The model of a checkpoint with its parameters loaded (max_seq_len limits learned
 * positions only; the other models read any length). NULL with the library's
 * message on error. */
typedef struct lb_model lb_model;
lb_model *lb_cli_load_model(const char *checkpoint);
/* 1 when the model has attention layers (transformer, local attention), 0 otherwise. */
struct lb_model_config;
int lb_cli_has_attention(const struct lb_model_config *mc);
/* --max-context N (N > 0) bounds the key-value cache of an attention model's streaming
 * state; a checkpoint of another family (LSTM, conv) has no such cache, so the option is
 * refused rather than ignored: LB_ERR_VALUE naming the checkpoint and its model kind. */
lb_status lb_cli_check_max_context(const char *checkpoint, const struct lb_model_config *mc, int64_t max_context);

/* Monotonic seconds. */
double lb_cli_now(void);
/* CPU seconds of the process (every thread) divided by the thread count in use
 * (lb_get_num_threads): the time a measurement took on its own cores, whatever else
 * the machine runs (the clock of --budget-clock cpu). */
double lb_cli_cpu_now(void);

#endif

/* The lookback command line: one function per subcommand (cli/<name>.c) and
 * the helpers they share (cli/common.c: errors, option values, exit codes); the
 * engine they call is the library (lab/ for runs, compare, the study and plots). Each returns the process exit code:
 * 0 success, 1 a failure at run time (bad data, a failed check), 2 bad usage. Errors
 * are printed as one line on stderr: "lookback <command>: <message>". */
#ifndef LB_CLI_H
#define LB_CLI_H

#include <stdint.h>
#include <stdio.h>

#include "data/dataset.h"
#include "lab/files.h"
#include "lab/progress.h"
#include "lab/run.h"
#include "tensor/clock.h"
#include "tensor/error.h"

int lb_cli_data(int argc, char **argv);
/* `lookback data csv` (cli/data_csv.c); argv[0] is "csv". */
int lb_cli_data_csv(int argc, char **argv);
/* `predict --csv` and `stream --csv` (cli/score_csv.c): a detector trained on an imported
 * event log scores the rows of a CSV of the same layout (train/score.h). missing: an
 * lb_missing_policy (--missing), or -1 for the one the training file was imported with. */
int lb_cli_predict_csv(const char *checkpoint, const char *csv, const char *out, int force, int64_t chunk,
                       int64_t max_context, int missing);
int lb_cli_stream_csv(const char *checkpoint, const char *csv, int64_t every, int json, int64_t max_context,
                      int missing);
int lb_cli_train(int argc, char **argv);
int lb_cli_eval(int argc, char **argv);
int lb_cli_demo(int argc, char **argv);
int lb_cli_compare(int argc, char **argv);
int lb_cli_gradcheck(int argc, char **argv);
int lb_cli_study(int argc, char **argv);
int lb_cli_predict(int argc, char **argv);
int lb_cli_stream(int argc, char **argv);
int lb_cli_generate(int argc, char **argv);
/* `lookback attention` (cli/attention.c). */
int lb_cli_attention(int argc, char **argv);
/* `lookback tokenizer export` (cli/tokenizer.c). */
int lb_cli_tokenizer(int argc, char **argv);

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

/* A split name for `option` (e.g. "--split"): train, val or test, checked while the
 * options are read so that a wrong name is a usage error before any file is opened.
 * *out is set to `text`; LB_ERR_VALUE naming the option and the three names otherwise. */
lb_status lb_cli_split(const char *option, const char *text, const char **out);

/* Under mpirun (train, compare): joins the MPI job before `run` and leaves it after.
 * Returns run's exit code. A rank that fails ends every rank (MPI_Abort) with that code,
 * except a usage error (2) that every rank reached: the job then ends normally with
 * exit code 2 and rank 0's one line. Started by mpirun in a build without MPI, it says
 * so and returns 1. */
int lb_cli_distributed(const char *command, int (*run)(int, char **), int argc, char **argv);
/* Runs a subcommand: lb_cli_distributed for the distributed ones (train, compare,
 * study); under mpirun, the others (data, eval, predict, stream, generate, gradcheck, demo) run on
 * rank 0 only and the other ranks return 0 at once without output. Returns the exit code. */
int lb_cli_run_command(const char *command, int (*run)(int, char **), int distributed, int argc, char **argv);
/* 1 when the model has attention layers (transformer, local attention), 0 otherwise. */
struct lb_model_config;
int lb_cli_has_attention(const struct lb_model_config *mc);
/* --max-context N (N > 0) bounds the key-value cache of an attention model's streaming
 * state; a checkpoint of another family (LSTM, conv) has no such cache, so the option is
 * refused rather than ignored: LB_ERR_VALUE naming the checkpoint and its model kind. */
lb_status lb_cli_check_max_context(const char *checkpoint, const struct lb_model_config *mc, int64_t max_context);

/* --seq-len T of eval and predict (the window of a text corpus), in [1, 2^24]. */
lb_status lb_cli_seq_len(const char *text, int64_t *seq_len);
/* eval and predict on a data file: a text corpus is scored in windows of --seq-len, or of
 * the context the model was trained with, and must hold the checkpoint's vocabulary
 * (lb_checkpoint_fit_corpus: exit 1 with its one line); --seq-len on a task file is a
 * usage error (exit 2). Returns 0 to go on, else the exit code (the error printed). */
int lb_cli_fit_data(const char *command, const char *checkpoint, lb_dataset *data, int64_t seq_len);

/* 1 when a command-line option (spelled "--out", "-o") takes a path: its empty value
 * is then said to name no file; other options are said to need a value. */
int lb_cli_option_takes_path(const char *option);

/* Refuses an option given twice on a command line (argv[1..argc-1] of `command`, e.g.
 * "eval"), whatever its spelling: "--split val --split test", "--out=a --out b", "-o a
 * --out b", an option and its alias ("data --train 2 --n-train 3"; hyphens and
 * underscores alike). Arguments after "--" and values such as "-5" are not options.
 * Errors: LB_ERR_VALUE naming the option ("--split is given twice; give it once"). */
lb_status lb_cli_check_repeats(const char *command, int argc, char *const *argv);

/* After lb_run_train failed: prints the error on stderr and returns the exit
 * status: 128 + N when signal N stopped the run (130 Ctrl-C, 143 SIGTERM), 2 when the
 * options were at fault, 1 otherwise. */
int lb_cli_run_failed(const char *command, const lb_run_result *run);

#endif

/* Options shared by `train`, `compare`, `demo` and the run folder's config.json:
 * one table maps every option name ("d-model", "lr", ...) to a field of the run
 * configuration, so the command line, a --config JSON file and the resolved
 * config.json written into a run folder all use the same names. */
#ifndef LB_CLI_OPTIONS_H
#define LB_CLI_OPTIONS_H

#include <getopt.h>
#include <stdio.h>

#include "train/trainer.h"

typedef struct lb_run_config {
    char data[4096];         /* training data file */
    lb_model_config model;
    lb_train_config train;
    char init_from[4096];    /* train --init-from: a checkpoint whose parameters start a new
                                run ("" = the model's own initialisation); not an option of
                                the table, not written to config.json */
} lb_run_config;

/* Model and training defaults for `kind` (data-derived fields stay 0). */
void lb_run_config_default(lb_run_config *rc, lb_model_kind kind);

/* Sets option `name` (without leading dashes) from text. The model options are the
 * model configuration's field list (layers/model_fields.def); the training options
 * are listed in cli/options.c. Changing "model" resets the model fields to that
 * family's defaults (keeping --model-seed), so give it first.
 * Errors: LB_ERR_VALUE naming the option (unknown name, bad value). */
lb_status lb_run_config_set(lb_run_config *rc, const char *name, const char *value);

/* Applies a JSON object file of {"option": value} pairs (the format of config.json).
 * Errors name the file and the key. */
lb_status lb_run_config_load_json(lb_run_config *rc, const char *path);
/* Writes every option that rc's model and training use, with its value, as a JSON
 * object (written to a temporary file and renamed). */
lb_status lb_run_config_save_json(const lb_run_config *rc, const char *path);

/* Fills the data-derived model fields (vocabulary, classes, features, head, max
 * length) from an opened data file. */
void lb_run_config_fit_data(lb_run_config *rc, const lb_dataset *data);

/* getopt_long options for every table entry (plus `extra`, n_extra entries), in a
 * static array terminated by a zero entry; each table option has val = 1000 + index. */
const struct option *lb_run_options(const struct option *extra, int n_extra);
/* Name of table option `val` (as given by getopt_long), or NULL. */
const char *lb_run_option_name(int val);
/* Prints the options with their help, the families that use each model option and
 * the defaults (per family where they differ). single_run: also --data and --model
 * (train); compare and demo choose those themselves. */
void lb_run_options_help(FILE *out, int single_run);
/* 1 when option `name` is used by rc's model, optimizer and schedule (e.g. --window only
 * with local attention, --momentum only with sgd), 0 otherwise or when unknown. */
int lb_run_option_applies(const lb_run_config *rc, const char *name);

/* 1 when option `name` may change on --resume (steps, threads, time-budget,
 * eval-every, checkpoint-every), 0 otherwise. */
int lb_run_option_resumable(const char *name);

/* What one training run produced. */
typedef struct lb_cli_run {
    int64_t steps;          /* steps completed */
    double seconds;         /* training seconds (without evaluations) */
    int64_t parameters;     /* scalar parameters of the model */
    lb_eval_result last_val; /* the last validation (examples 0 when none ran) */
    int interrupted;        /* stopped by SIGINT/SIGTERM after saving a checkpoint */
} lb_cli_run;

/* Trains rc's model on rc->data into folder `dir` (config.json, metrics.csv,
 * checkpoint.h5), resuming from dir's checkpoint when `resume`. A new run with
 * rc->init_from set starts from that checkpoint's parameters (its model config must
 * equal rc->model apart from the seed) with a fresh optimizer, step 0. Progress goes to
 * stderr unless quiet. On success *model_out (may be NULL) receives the trained
 * model (caller frees). The data file is opened and closed here; a new run stores
 * its absolute path. The folder is locked for the run's life. SIGINT or SIGTERM stops
 * the run after the current step with a checkpoint (out->interrupted, LB_ERR_STATE).
 * A new run that fails before its first checkpoint removes what it wrote.
 * Errors as lb_trainer_new / lb_trainer_run; LB_ERR_IO for the folder; LB_ERR_STATE
 * when another process holds the folder; LB_ERR_VALUE when a resumed run's --steps
 * is below its checkpoint's step. */
lb_status lb_cli_run_training(lb_run_config *rc, const char *dir, int resume, int quiet, lb_cli_run *out,
                              lb_model **model_out);

#endif

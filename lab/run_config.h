/* Options shared by `train`, `compare`, `demo` and the run folder's config.json:
 * one table maps every option name ("d-model", "lr", ...) to a field of the run
 * configuration, so the command line, a --config JSON file and the resolved
 * config.json written into a run folder all use the same names. */
#ifndef LB_LAB_RUN_CONFIG_H
#define LB_LAB_RUN_CONFIG_H

#include <getopt.h>
#include <stdio.h>

#include "tensor/api.h"
#include "train/trainer.h"

LB_API_BEGIN

typedef struct lb_run_config {
    char data[4096];         /* training data file */
    lb_model_config model;
    lb_train_config train;
    char init_from[4096];    /* train --init-from: a checkpoint whose parameters start a new
                                run ("" = the model's own initialisation); not an option of
                                the table, not written to config.json */
    int eval_examples_given; /* 1 once --eval-examples was set (command line, --config, a run's
                                config.json): otherwise a text corpus is validated whole */
    int select_given;        /* 1 once --select was set: otherwise a text corpus selects best.h5
                                by the validation loss (bits per character) */
    char preset[16];         /* --preset: the block preset whose options were set ("" = none) */
} lb_run_config;

/* Model and training defaults for `kind` (data-derived fields stay 0). */
void lb_run_config_default(lb_run_config *rc, lb_model_kind kind);

/* Sets option `name` (without leading dashes) from text. The model options are the
 * model configuration's field list (layers/model_fields.def); the training options
 * are the training configuration's (train/train_fields.def). "preset" (gpt2 | llama,
 * lb_run_presets_text) sets the model options its row names, at once. Changing "model" resets the model fields to that
 * family's defaults (keeping --model-seed), so give it first.
 * Errors: LB_ERR_VALUE naming the option (unknown name, bad value). */
lb_status lb_run_config_set(lb_run_config *rc, const char *name, const char *value);

/* Options as given, in order: from the command line (source NULL) or a JSON file
 * (source = its path). */
enum { LB_MAX_OPTION_ITEMS = 256 };
typedef struct lb_option_item {
    char name[48];      /* without dashes */
    char *value;        /* as text */
    const char *source; /* NULL: the command line; else the file's path (not copied) */
} lb_option_item;
typedef struct lb_option_list {
    int n;
    lb_option_item items[LB_MAX_OPTION_ITEMS];
} lb_option_list;
/* Appends an option. Errors: LB_ERR_VALUE for an unknown name, or a name given twice
 * by the same source ("lr is given twice ('1e-3', then '3e-3'); give it once"). */
lb_status lb_option_list_add(lb_option_list *list, const char *name, const char *value, const char *source);
/* Appends the {"option": value} pairs of a JSON object file (the format of config.json;
 * its LB_CONFIG_RECORD_KEY object is skipped). Errors name the file and the key:
 * not strict JSON, an unknown key, a string where a number belongs or the reverse. */
lb_status lb_option_list_read_json(lb_option_list *list, const char *path);
void lb_option_list_free(lb_option_list *list);
/* Sets every option of the list on rc: the last "model" first (it resets the model
 * fields), then the last "preset" (it sets the block options it names, so that the
 * list's own options override it), then the others in order. Then, when the list (or
 * its preset) chose a gated --ffn (swiglu, geglu) and gave no --d-ff, d_ff becomes
 * lb_ffn_gated_width(d_model) (Llama's rule, layers/ffn.h). Errors as
 * lb_run_config_set, naming the file. */
lb_status lb_run_config_apply(lb_run_config *rc, const lb_option_list *list);
/* LB_ERR_VALUE when an option of the list is not used by rc's model, optimizer or
 * schedule ("--window does not apply to --model transformer (only --model local uses
 * it); drop it"). A file's option that holds the default changes nothing and passes. */
lb_status lb_run_config_check_used(const lb_run_config *rc, const lb_option_list *list);
/* The presets and what each sets, as text for --help and docs:
 * "gpt2 (norm layernorm, ...) | llama (...)". */
const char *lb_run_presets_text(void);
/* Applies a JSON config file (lb_option_list_read_json + lb_run_config_apply). */
lb_status lb_run_config_load_json(lb_run_config *rc, const char *path);
/* The key of config.json that records what a run resolved (threads, version, data
 * checksum, ...): not an option, skipped when the file is read back. */
#define LB_CONFIG_RECORD_KEY "run"
/* What a run resolved, recorded in config.json under LB_CONFIG_RECORD_KEY. */
typedef struct lb_run_record {
    int threads;           /* the thread count in use (--threads 0 resolved) */
    const char *version;   /* lookback's version */
    const char *commit;    /* the git commit it was built from ("unknown" outside git) */
    const char *data_task; /* the data file's task */
    uint32_t data_crc32;   /* CRC-32 (zlib) of the data file's bytes */
    int64_t data_bytes;    /* its size */
} lb_run_record;

/* Refuses a split with examples but no scored target (every class target is -100,
 * the ignore index): a loss and an accuracy over nothing would read as 0 and success.
 * LB_ERR_VALUE naming the file, the split and the ignored count, before any work;
 * LB_OK for regression data and for an empty split (callers say what an empty split
 * means for them). */
lb_status lb_run_check_scored(const lb_dataset *data, const char *split);

/* Writes every option that rc's model and training use, with its value, as a JSON
 * object, plus the record (may be NULL) under LB_CONFIG_RECORD_KEY; written to a
 * temporary file and renamed. */
lb_status lb_run_config_save_json(const lb_run_config *rc, const char *path, const lb_run_record *record);

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

/* 1 when option `name` sets a field of the model configuration ("heads", "model",
 * "model-seed"), 0 for a training option, "data", an unknown name or NULL. */
int lb_run_option_is_model(const char *name);

/* 1 when option `name` may change on --resume (the training fields flagged
 * LB_TRAIN_RESUMABLE in train/train_fields.def: steps, threads, time-budget, eval-every,
 * eval-examples, checkpoint-every, patience, max-skipped), 0 otherwise. */
int lb_run_option_resumable(const char *name);

/* Where `lookback train` takes a run's options from, lowest first: the defaults, the run
 * folder's config.json (resume), the options of a --config file (`file`), the model of an
 * --init-from checkpoint, the command line (`given`). */
typedef struct lb_run_sources {
    const char *dir;             /* the run folder: DIR/config.json and DIR/checkpoint.h5 */
    int resume;                  /* 1: continue the run in dir */
    const char *init_from;       /* a checkpoint whose model starts a new run, or NULL */
    const lb_option_list *file;  /* --config's options (may be empty, not NULL) */
    const lb_option_list *given; /* the command line's options (may be empty, not NULL) */
} lb_run_sources;

/* Resolves a run's options into rc from `src`, with the rules of a run folder:
 * - resume: DIR/config.json is loaded, and the model's dtype and max_seq_len (which no
 *   option sets) come from DIR/checkpoint.h5 when it exists; an option of `file` or
 *   `given` that may not change on resume (lb_run_option_resumable) is refused;
 * - init_from: the model options come from that checkpoint; a --model naming another
 *   family, or any other model option but --model-seed, is refused;
 * - every option given must apply to the chosen model, optimizer and schedule
 *   (lb_run_config_check_used), and --data is required;
 * - a new run (not resume) refuses a folder that already holds checkpoint.h5.
 * Errors: LB_ERR_VALUE for what the options are at fault for (no config.json to resume,
 * an option that cannot change, a bad or unused value, a --model that differs, no
 * --data; the message names the option); LB_ERR_STATE for a folder that already holds a
 * run; LB_ERR_FORMAT for a config.json or checkpoint that cannot be read (its reader's
 * message); LB_ERR_MEMORY. */
lb_status lb_run_config_resolve(lb_run_config *rc, const lb_run_sources *src);

/* Rewrites the library's field names in a message as the options a user types:
 * "d_model = 6 is not divisible by n_heads = 4" -> "--d-model 6 is not divisible by
 * --heads 4" (each model field "<member> = " with an option becomes "--<option> "). */
void lb_run_config_name_options(char *message, size_t size);

/* Strict number parsing for option values: the whole text must be a number in
 * [min, max]. LB_ERR_VALUE naming the option (e.g. "--steps") otherwise. */
lb_status lb_option_int(const char *option, const char *text, int64_t min, int64_t max, int64_t *out);
lb_status lb_option_real(const char *option, const char *text, double min, double max, double *out);

LB_API_END

#endif

/* Compare: train several models on one data file, each to the same budget, evaluate
 * each on the test split of several files, and write a report folder: summary.json,
 * one run folder per model (lab/run.h) and the plots that apply (learning curves,
 * accuracy against clue distance, the first attention model's weights). The engine of
 * `lookback compare` and of `lookback demo` (the demo is a comparison with its data
 * and models chosen: attention versus the LSTM on clues about 100, 1,000 and 7,000
 * events back).
 *
 * Under mpirun each rank trains whole models (model m on rank m mod N) and rank 0
 * gathers the results and writes the report. */
#ifndef LB_LAB_COMPARE_H
#define LB_LAB_COMPARE_H

#include <stdint.h>
#include <stdio.h>

#include "lab/run.h"
#include "tensor/api.h"

LB_API_BEGIN

enum { LB_COMPARE_MAX_MODELS = 8, LB_COMPARE_MAX_EVALS = 8 };

/* One model of a comparison: its name (a folder name, lb_compare_check_name), the run
 * configuration it trains with (rc.data is the training file) and a note for the report
 * (e.g. how its learning rate was chosen; "" for none). */
typedef struct lb_compare_model {
    char name[48];
    lb_run_config rc;
    char note[256];
} lb_compare_model;

/* One evaluation file: the caller sets path, label ("" = the file name without its
 * extension) and examples (0 = the whole test split); lb_compare_run fills the rest. */
typedef struct lb_compare_eval {
    char path[4096];
    char label[48];
    int32_t dmin, dmax; /* clue distances of the test split (0, 0 without distances) */
    double dmean;       /* their midpoint; NAN without distances */
    int64_t examples;   /* 0 = the whole test split */
    int regression;     /* scored by MSE instead of accuracy */
    double baseline;    /* regression: the MSE of predicting the mean target (NAN otherwise) */
    int rare;           /* a binary label (an imported event log, or any 2-class file): the
                           F1 of class 1 and the PR-AUC are reported beside the accuracy */
    /* the majority-class baseline on the test split (train/metrics.h: the most frequent
     * class of the training targets an imported log records, else of this split) */
    double base_accuracy, base_f1, base_macro_f1, base_pr_auc;
    int text;           /* a text corpus (data/text.h): scored in bits per symbol */
    char per[8];        /* then "char" or "byte" */
    double target_bits; /* text, first file: the validation bits per symbol whose training time
                           to reach is reported (0 = the worst model's last validation) */
} lb_compare_eval;

/* What one model gave. */
typedef struct lb_compare_result {
    lb_run_result run;
    double accuracy[LB_COMPARE_MAX_EVALS]; /* accuracy in [0, 1], or MSE for a regression file */
    double f1[LB_COMPARE_MAX_EVALS];       /* F1 of class 1 (binary), else macro-F1; NAN for regression */
    double macro_f1[LB_COMPARE_MAX_EVALS];
    double pr_auc[LB_COMPARE_MAX_EVALS];   /* average precision of a binary label (NAN otherwise) */
    double eval_seconds[LB_COMPARE_MAX_EVALS]; /* wall seconds of each evaluation */
    double seconds_per_step;               /* training seconds per optimizer step */
    double bits[LB_COMPARE_MAX_EVALS];     /* text files: test loss in bits per character (char corpora) or
                                            * per byte (byte, bpe, unigram) of the text (data/text.h lb_text_bits) */
    double bits_per_byte[LB_COMPARE_MAX_EVALS], bits_per_char[LB_COMPARE_MAX_EVALS]; /* text files: both */
    double nats_per_token[LB_COMPARE_MAX_EVALS]; /* text files: the test loss itself */
    double seconds_to_target;              /* text: training seconds to the first validation at or
                                              below the target (NAN: never reached) */
    char sample[256];                      /* text: a greedy continuation of the prompt, escaped */
} lb_compare_result;

/* What a comparison gave. */
typedef struct lb_compare_report {
    lb_compare_result results[LB_COMPARE_MAX_MODELS];
    double chance;     /* 1 / num_classes of the first classification file (0 = none) */
    int report_rank;   /* 1 on the process that wrote the report (rank 0; the only one without MPI) */
    int failed_model;  /* the model whose training failed (-1 = none): its results[].run says
                          whether a signal stopped it or the options were at fault */
    char written[512]; /* ", learning_curves.png, ...": the plot files written */
    double target_bits;  /* text: the target of seconds_to_target */
    char prompt[128];    /* text: the prompt of the samples (the test split's first tokens), escaped */
} lb_compare_report;

/* Model names become folder names: letters, digits, '-', '_' and '.', not starting with
 * '.' and not empty. LB_ERR_VALUE naming the name otherwise. */
lb_status lb_compare_check_name(const char *name);
/* A report folder must be new or hold no earlier report (summary.json): LB_ERR_STATE
 * when it holds one, LB_ERR_IO when out_dir exists and is not a folder. */
lb_status lb_compare_check_out_dir(const char *out_dir);

/* Runs the comparison: checks every evaluation file against every model before anything
 * is trained (lb_model_data_check; no output replaces an input), then trains each model
 * into out_dir/<name> (lb_run_train, progress on stderr unless quiet), evaluates it on
 * every file and, on the report rank, writes out_dir/summary.json and the plots (a plot
 * that cannot be drawn is noted on stderr and skipped). rep (zeroed here) receives the
 * results.
 * Resumable: SIGINT or SIGTERM stops the model in training after its step, with its
 * checkpoint, and keeps every model folder (LB_ERR_STATE "interrupted while training
 * <name> ...: run the same lookback compare command again"; rep->failed_model names it and
 * its run.signal the signal). Called again with the same models and out_dir, a model
 * whose folder holds a run continues it (one that had finished trains no further) and
 * the rest train anew. When training or evaluating fails otherwise, the folders this call
 * began are removed, so the same out_dir works again.
 * Errors: LB_ERR_VALUE (counts out of range, a file that does not fit a model),
 * LB_ERR_STATE (a model folder that holds something else than a run; interrupted),
 * LB_ERR_IO, and the errors of training (rep->failed_model names the model). */
lb_status lb_compare_run(lb_compare_model *models, int n_models, lb_compare_eval *evals, int n_evals,
                         const char *out_dir, int quiet, lb_compare_report *rep);

/* The recipe of `lookback compare` for family rc->model.kind on a text corpus: the
 * options the field's known configurations use (one row per family in lab/compare.c:
 * nanoGPT's shakespeare_char CPU recipe for the transformer and local attention,
 * char-rnn's for the LSTM, the transformer's optimiser on a dilated stack for conv),
 * set on rc through lb_run_config_set before the user's options.
 * Errors: as lb_run_config_set. */
lb_status lb_compare_text_recipe(lb_run_config *rc);
/* Where the recipe comes from ("nanoGPT shakespeare_char (CPU)"; "" for none). */
const char *lb_compare_text_recipe_name(lb_model_kind kind);
/* The recipe's options as text ("--layers 4 --heads 4 ...") into buf; returns buf. */
char *lb_compare_text_recipe_text(lb_model_kind kind, char *buf, size_t size);

/* The models of a comparison from `list`, "M1,M2,..." with each item a family name
 * ("lstm") or name=family ("big=transformer"; names checked by lb_compare_check_name,
 * each once): a model of that family's defaults trained on `train` with time_budget
 * `budget`; on a text corpus (`text`) from its family's recipe (lb_compare_text_recipe)
 * with a CPU budget clock and validation every 100 steps on 256 windows; then the
 * options `given` applied, every one of which must apply to one model at least
 * (lb_run_option_applies). Fills models[0..*n_models). Errors: LB_ERR_VALUE naming the
 * item or option (more than LB_COMPARE_MAX_MODELS, a bad or repeated name, an unknown
 * family, an option no model uses, a bad value). */
lb_status lb_compare_models_from_list(const char *list, const char *train, int text, double budget,
                                      const lb_option_list *given, lb_compare_model *models, int *n_models);
/* The evaluation files of a comparison from `list`, "F1,F2,...": each file once however
 * its path is spelled (the same device and inode), each scored on at most `examples`
 * test examples (0 = all) with `target_bits` (see lb_compare_eval). Fills
 * evals[0..*n_evals). Errors: LB_ERR_VALUE (an empty name, more than
 * LB_COMPARE_MAX_EVALS files, a file named twice). */
lb_status lb_compare_evals_from_list(const char *list, double target_bits, int64_t examples, lb_compare_eval *evals,
                                     int *n_evals);

/* Prints the comparison's table to `out`: per model its parameters, training time, time
 * per step and score on every file, with chance (or the mean predictor's MSE for
 * regression), then the files' clue distances and the models' notes. */
void lb_compare_print_table(FILE *out, const lb_compare_model *models, int n_models, const lb_compare_eval *evals,
                            int n_evals, const lb_compare_report *rep);

LB_API_END

#endif

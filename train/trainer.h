/* The training loop: batch -> model forward -> loss -> backward -> clip -> optimizer
 * step, with evaluation, gradient accumulation, checkpoints and metrics.
 *
 * The loop is model-agnostic: it drives any lb_model on any lookback data file. The
 * loss is cross-entropy from logits for classification (per sequence or per
 * position, -100 ignored) and mean squared error for regression. It prints nothing:
 * the command line shows progress through the callback.
 *
 * Reproducibility: for a given thread count a run is a pure function of its
 * configuration, model seed and data file. A checkpoint holds everything the next
 * step depends on (parameters, optimizer state, step, dropout generator, data
 * position), so a resumed run equals an uninterrupted one bit for bit.
 */
#ifndef LB_TRAINER_H
#define LB_TRAINER_H

#include "tensor/api.h"

#include <stdio.h>

#include "data/dataset.h"
#include "data/loader.h"
#include "layers/family.h"
#include "layers/model.h"
#include "optim/optim.h"
#include "optim/schedule.h"
#include "train/metrics.h"

LB_API_BEGIN

/* What a time budget counts.
 * LB_BUDGET_WALL: wall-clock seconds of the training steps (CLOCK_MONOTONIC).
 * LB_BUDGET_CPU: CPU seconds of the whole process during the training steps
 *   (CLOCK_PROCESS_CPUTIME_ID, every thread), divided by the thread count in use
 *   (lb_get_num_threads). On an idle machine with every thread busy this is the wall
 *   time; on a shared machine a run gets the same amount of computation however long
 *   it waits for a core, so budgeted comparisons stay fair (slower, not worse). */
typedef enum lb_budget_clock { LB_BUDGET_WALL = 0, LB_BUDGET_CPU = 1 } lb_budget_clock;

/* The validation score that selects best.h5 and that --patience and --stop-at judge.
 * LB_SELECT_ACCURACY: accuracy over the scored targets (higher is better); for
 *   regression the MSE (lower is better).
 * LB_SELECT_LOSS: the mean validation loss over the scored targets (lower is better).
 *   For a task whose scored targets are mostly trivial (copy memory with its blanks
 *   scored, where accuracy is 99 % while the model still guesses every symbol to copy)
 *   the loss is the task's own score: it is compared with the memoryless baseline. */
/* LB_SELECT_F1: the detector's F1 on the validation targets (class 1's F1 for a binary
 *   label, the rare event; macro-F1 with more classes: lb_class_report_detector_f1),
 *   higher is better. For classification with at most LB_METRICS_MAX_CLASSES classes.
 * LB_SELECT_MACRO_F1: the macro-F1 (train/metrics.h), higher is better.
 * LB_SELECT_PR_AUC: the average precision of a binary label (area under the
 *   precision-recall curve, as sklearn's average_precision_score), higher is better;
 *   NAN (never an improvement) when the validation targets hold no positive. Not
 *   available under data-parallel training (the scores stay on their ranks). */
typedef enum lb_val_select {
    LB_SELECT_ACCURACY = 0,
    LB_SELECT_LOSS = 1,
    LB_SELECT_F1 = 2,
    LB_SELECT_MACRO_F1 = 3,
    LB_SELECT_PR_AUC = 4
} lb_val_select;

/* "accuracy" / "loss" / "f1" / "macro-f1" / "pr-auc"; NULL for a value out of range. */
const char *lb_val_select_name(lb_val_select s);
/* Parses those names; LB_ERR_VALUE naming the value otherwise. */
lb_status lb_val_select_parse(const char *name, lb_val_select *out);

/* "wall" / "cpu"; NULL for a value out of range. */
const char *lb_budget_clock_name(lb_budget_clock c);
/* Parses "wall" or "cpu"; LB_ERR_VALUE naming the value otherwise. */
lb_status lb_budget_clock_parse(const char *name, lb_budget_clock *out);

/* Which parameters the weight decay applies to (torch.optim parameter groups: the others
 * are in a group with weight_decay 0).
 * LB_DECAY_ALL: every parameter (one group, torch.optim.AdamW(model.parameters())).
 * LB_DECAY_MATRICES: every parameter of 2 or more dimensions: weight matrices,
 *   convolution kernels, LSTM weights, the token embedding and the position table;
 *   biases, LayerNorm weights and softmax scales are exempt. nanoGPT's
 *   GPT.configure_optimizers ("any parameter that is 2D will be weight decayed").
 * LB_DECAY_LINEAR: the weights of the linear maps only (2+ dims, not a lookup table):
 *   biases, norms, the token embedding (also when tied to the head) and the position
 *   table are exempt; minGPT's configure_optimizers (Linear weights decay, LayerNorm and
 *   Embedding weights do not). */
typedef enum lb_decay_params { LB_DECAY_ALL = 0, LB_DECAY_MATRICES = 1, LB_DECAY_LINEAR = 2 } lb_decay_params;

/* "all" / "matrices" / "linear"; NULL for a value out of range. */
const char *lb_decay_params_name(lb_decay_params d);
/* Parses "all", "matrices" or "linear"; LB_ERR_VALUE naming the value otherwise. */
lb_status lb_decay_params_parse(const char *name, lb_decay_params *out);
/* 1 when the rule decays parameter p of model m, 0 when it is exempt; 0 with an
 * LB_ERR_VALUE error for NULL arguments or an unknown rule. */
int lb_decay_params_applies(lb_decay_params rule, const lb_model *m, const lb_var *p);

typedef struct lb_train_config {
    int64_t steps;           /* total optimizer steps (a resumed run continues to this total) */
    int64_t batch_size;      /* examples per optimizer step (text corpora: windows) */
    int64_t seq_len;         /* text corpora: the window (context) length T of every batch and
                                evaluation, set on the dataset with lb_dataset_set_seq_len before
                                the trainer is made (0 = the dataset's; lb_trainer_new checks it) */
    int64_t micro_batches;   /* gradient accumulation: the batch is split into this many parts */
    lb_optim_config optim;   /* optimizer and its base learning rate */
    lb_decay_params decay_params; /* the parameters optim.weight_decay applies to (default all) */
    lb_schedule schedule;    /* learning rate per step (optim/schedule.h); its base_lr is taken
                                from optim.lr and a cosine's total_steps from steps */
    double clip;             /* max global gradient norm (0 = no clipping) */
    int64_t eval_every;      /* steps between evaluations on the validation split (0 = at the end only) */
    int64_t eval_examples;   /* validation examples per evaluation (0 = the whole split) */
    int64_t checkpoint_every;/* steps between checkpoints (0 = at evaluations and the end) */
    double time_budget;      /* seconds of training after which the run stops (0 = none),
                                counted on budget_clock */
    lb_budget_clock budget_clock; /* what time_budget counts (default LB_BUDGET_WALL) */
    uint64_t seed;           /* data order and dropout */
    int threads;             /* BLAS / OpenMP threads (0 = leave as is) */
    int64_t patience;        /* stop after this many evaluations without a better validation
                                metric (0 = never stop early) */
    int64_t max_skipped;     /* stop when this many steps in a row were skipped for a
                                non-finite gradient (0 = never) */
    lb_val_select select;    /* the validation score of best.h5, patience and stop_at
                                (default LB_SELECT_ACCURACY) */
    int class_weight;        /* class weights of the training loss (weighted cross-entropy,
                                lb_cross_entropy_ex; PyTorch's weighted mean): 0 none, 1 balanced
                                (lb_balanced_class_weights from the train split's targets),
                                2 the values of class_weights */
    int64_t n_class_weights; /* with class_weight 2: one value per class */
    double class_weights[LB_METRICS_MAX_CLASSES];
    double stop_at;          /* train to solve: stop at the first validation whose score reaches
                                this value (score >= stop_at when higher is better, <= when
                                lower is better; 0 = never). The run saves its checkpoint and
                                ends (lb_trainer_solved_step) */
} lb_train_config;

/* The training options as data: one row per field of train/train_fields.def. */
typedef enum lb_train_field_type {
    LB_TRAIN_INT64, LB_TRAIN_INT, LB_TRAIN_REAL, LB_TRAIN_U64,
    LB_TRAIN_OPTIM, LB_TRAIN_SCHEDULE, LB_TRAIN_CLOCK, LB_TRAIN_SELECT, LB_TRAIN_DECAY,
    LB_TRAIN_WEIGHTS /* the class weights: class_weight, n_class_weights, class_weights */
} lb_train_field_type;
/* Which configurations use a field: every one, or only those with that optimizer
 * (LB_TRAIN_ADAM: Adam and AdamW) or schedule. */
typedef enum lb_train_field_when {
    LB_TRAIN_ALWAYS, LB_TRAIN_SGD, LB_TRAIN_ADAM, LB_TRAIN_COSINE, LB_TRAIN_STEP
} lb_train_field_when;
enum { LB_TRAIN_RESUMABLE = 1 }; /* flags: may change when a run is resumed */
typedef struct lb_train_field {
    const char *member;        /* "optim.lr" */
    const char *option;        /* "lr" */
    lb_train_field_type type;
    lb_train_field_when when;
    double default_value;      /* NAN: lb_optim_defaults' value for the default optimizer */
    double min, max;           /* accepted range of a number (U64: unchecked) */
    unsigned flags;            /* LB_TRAIN_RESUMABLE */
    const char *help;
    size_t offset;             /* of the member in lb_train_config */
} lb_train_field;

/* The field list in order; *count (may be NULL) receives its length. */
const lb_train_field *lb_train_fields(int *count);
/* The field with this option name ("min-lr-ratio"); NULL when there is none. */
const lb_train_field *lb_train_field_find(const char *option);
/* 1 when cfg uses the field (always, or cfg's optimizer or schedule is the field's). */
int lb_train_field_applies(const lb_train_field *f, const lb_train_config *cfg);
/* The field's value as a double (enums as their index), for range checks, JSON and help. */
double lb_train_field_number(const lb_train_config *cfg, const lb_train_field *f);

/* Class weights from text, as `--class-weight` takes them: "none", "balanced" or one
 * finite weight >= 0 per class separated by commas ("1,20"), into cfg->class_weight,
 * n_class_weights and class_weights. LB_ERR_VALUE naming the text otherwise (nothing is
 * changed). _format writes the same text back (weights with 17 significant digits). */
lb_status lb_class_weight_parse(const char *text, lb_train_config *cfg);
char *lb_class_weight_format(const lb_train_config *cfg, char *buf, size_t size);

/* Defaults: every field's default of train/train_fields.def (1000 steps, batch 32,
 * AdamW lr 1e-3 with torch.optim.AdamW's betas and weight decay 0.01, warm-up 100 steps
 * then cosine decay to 10%, clip 1.0, evaluation every 100 steps on 512 validation
 * examples, seed 1, no early stopping, stop after 10 skipped steps in a row). */
void lb_train_config_default(lb_train_config *cfg);
/* Checks a configuration: every field of train/train_fields.def that it uses inside its
 * range (and enums valid), micro-batches <= batch, a stop-at accuracy <= 1, and the
 * optimizer's and the schedule's own checks. LB_ERR_VALUE naming the option. */
lb_status lb_train_config_check(const lb_train_config *cfg);

/* Accuracy and loss of a model on (part of) a split. */
enum { LB_EVAL_MAX_BINS = 16, LB_EVAL_MAX_OUTPUTS = 64 };
typedef struct lb_eval_result {
    int64_t examples;        /* sequences evaluated */
    int64_t scored;          /* targets scored (non-ignored positions, or sequences) */
    double loss;             /* mean cross-entropy (classification) or MSE (regression) */
    double accuracy;         /* fraction of scored targets predicted exactly; NAN for regression */
    double mse;              /* regression only; NAN otherwise */
    int n_bins;              /* distance bins (0 when the data has no distances) */
    int64_t bin_lo[LB_EVAL_MAX_BINS], bin_hi[LB_EVAL_MAX_BINS]; /* inclusive distance range */
    int64_t bin_correct[LB_EVAL_MAX_BINS], bin_total[LB_EVAL_MAX_BINS];
    double bin_sq_error[LB_EVAL_MAX_BINS]; /* regression: summed squared error per bin */
    /* Per-position targets only: accuracy per output index over the last n_outputs =
     * min(T, LB_EVAL_MAX_OUTPUTS) positions of each sequence. Output index j is position
     * L - n_outputs + j (L = the sequence's length), so for copy memory j = n_outputs - C + i
     * is the i-th copied symbol. Ignored (-100) targets are not counted. */
    int n_outputs;
    int64_t output_correct[LB_EVAL_MAX_OUTPUTS], output_total[LB_EVAL_MAX_OUTPUTS];
    /* Classification with at most LB_METRICS_MAX_CLASSES classes: the confusion matrix and
     * what follows from it (train/metrics.h; classes.num_classes 0 otherwise), and the
     * average precision of a binary label's class-1 probability (NAN without a positive
     * target, with more classes, or under data-parallel evaluation). */
    lb_class_report classes;
    double average_precision;
} lb_eval_result;

/* The score of a validation result under `select` (see lb_val_select) and whether higher
 * is better (*higher_better, may be NULL). NAN with an LB_ERR_VALUE error for a NULL result. */
double lb_val_score(const lb_eval_result *r, lb_val_select select, int *higher_better);

/* Evaluates `model` (no gradients, no dropout) on the first max_examples (0 = all)
 * examples of `split`, in file order, batch_size at a time. With distances, the
 * accuracy is also split into n_bins (1..LB_EVAL_MAX_BINS) equal-width bins over
 * the examples' distance range. attention_out (may be NULL) receives the last
 * attention layer's weights for the first batch (see lb_model_forward). For
 * regression the bins hold squared errors (bin_sq_error / bin_total is the bin's MSE).
 * Errors: data that does not fit the model (names both), an unknown or empty split. */
lb_status lb_evaluate(lb_model *model, const lb_dataset *data, const char *split, int64_t max_examples,
                      int64_t batch_size, int n_bins, lb_eval_result *out, lb_tensor **attention_out);

/* Statistics of one optimizer step. */
typedef struct lb_step_stats {
    int64_t step;        /* steps completed after this one */
    double loss;         /* mean training loss over the step's micro-batches */
    double accuracy;     /* training accuracy of the step's batch (NAN for regression) */
    double grad_norm;    /* global gradient norm before clipping */
    double lr;           /* learning rate used */
    int skipped;         /* 1 when a non-finite gradient made the step skip the update */
    double seconds;      /* wall time of the step */
    int64_t tokens;      /* positions processed (B * T) */
    double mfu;          /* model FLOPs utilisation of the step (train/cost.h): training FLOPs per
                          * position × tokens / seconds / the rate lb_trainer_set_sgemm_rate gave;
                          * NAN without a rate */
} lb_step_stats;

typedef struct lb_trainer lb_trainer;

/* The class weights the trainer's loss uses (cfg->class_weight): *n receives C (0 when the
 * loss is unweighted) and weights (LB_METRICS_MAX_CLASSES entries, may be NULL) the
 * values. LB_ERR_VALUE for NULL t or n. */
lb_status lb_trainer_class_weights(const lb_trainer *t, int64_t *n, double *weights);

/* Fits a model configuration to a data file, as lb_trainer_new will check it: vocab_size
 * (0 for feature inputs, then input_features), num_classes and the head (every position
 * or the last) from the file, and max_seq_len raised to the file's seq_len when shorter
 * (for a text corpus set to its window length T: a learned position table of exactly the
 * context, as nanoGPT's block_size). The other fields are kept. Errors: LB_ERR_VALUE for
 * NULL arguments. */
lb_status lb_model_config_fit_data(lb_model_config *cfg, const lb_dataset *data);

/* A trainer for `model` on the "train" split of `data` (both must outlive it).
 * Checks that the data fits the model (vocabulary, classes, features, head kind), and
 * that one step can fit the memory left (lb_model_step_bytes against
 * lb_memory_free_bytes, for a micro-batch of ceil(batch / micro_batches) sequences).
 * Errors: LB_ERR_VALUE for a bad config or a mismatch, naming both sides; LB_ERR_MEMORY
 * "out of memory (before the first step) ..." naming the figures and the options. */
lb_trainer *lb_trainer_new(lb_model *model, const lb_dataset *data, const lb_train_config *cfg);
void lb_trainer_free(lb_trainer *t);

/* Asks a running lb_trainer_run to stop and save its checkpoint. In one process the
 * current step is abandoned at its next op (lb_graph_set_stop) and discarded, data order
 * and dropout stream restored, so the checkpoint is that of the step before and a
 * resumed run equals an uninterrupted one; under data parallelism the ranks stop after
 * the step they agree on. A validation under way finishes first. Async-signal-safe: it
 * only sets a flag, so a SIGINT handler may call it. */
void lb_trainer_request_stop(lb_trainer *t);
/* 1 when the last lb_trainer_run ended because of lb_trainer_request_stop. */
int lb_trainer_stopped(const lb_trainer *t);

/* Runs one optimizer step. A non-finite loss returns LB_ERR_NUMERIC (parameters
 * untouched); a non-finite gradient skips the update (stats->skipped = 1). */
lb_status lb_trainer_step(lb_trainer *t, lb_step_stats *stats);
int64_t lb_trainer_steps_done(const lb_trainer *t);
/* lb_evaluate of the trainer's model on `split` of its data, in batches of the
 * training batch size (under data-parallel training, split over the ranks and
 * reduced as lb_trainer_run's validations are). The trainer keeps one evaluation
 * graph for all its evaluations: the first maps the memory, later ones reuse its
 * buffers (tensor/pool.h), so validating during training faults in no new pages.
 * Errors: as lb_evaluate. */
lb_status lb_trainer_evaluate(lb_trainer *t, const char *split, int64_t max_examples, lb_eval_result *out);
/* The buffer pool of the trainer's evaluation graph (NULL before the first
 * lb_trainer_evaluate), e.g. for lb_pool_get_stats. */
lb_pool *lb_trainer_eval_pool(lb_trainer *t);
/* Seconds of training accumulated (across resumes). */
double lb_trainer_elapsed(const lb_trainer *t);
/* Seconds of the time budget spent so far, across resumes, on the configuration's
 * budget_clock (LB_BUDGET_WALL: the same as lb_trainer_elapsed). */
double lb_trainer_budget_spent(const lb_trainer *t);
/* The FLOP/s rate the trainer's MFU figures divide by (lb_sgemm_rate, train/cost.h);
 * 0 = none: MFU is NAN. Negative or NAN rates count as 0. Does nothing for a NULL t. */
void lb_trainer_set_sgemm_rate(lb_trainer *t, double flops_per_second);
/* The model's FLOPs per position (layers/family.h, lb_model_flops_count) at the training
 * data's seq_len into *flops, and the rate set by lb_trainer_set_sgemm_rate (0 = none)
 * into *rate. LB_ERR_VALUE for a NULL argument. */
lb_status lb_trainer_costs(const lb_trainer *t, lb_model_flops *flops, double *rate);
lb_optim *lb_trainer_optim(lb_trainer *t);
const lb_train_config *lb_trainer_config(const lb_trainer *t);

/* Saves everything the next step depends on to an HDF5 checkpoint (format in
 * docs/training.md), every dataset with its CRC-32. Written to "<path>.tmp" by a
 * child process (libhdf5 may crash after a failed write; then only the child goes),
 * flushed, then renamed over `path`, so a process killed mid-write or a full disk
 * leaves the previous checkpoint intact. Errors: LB_ERR_VALUE for an empty path,
 * LB_ERR_IO naming the file when `path` is not a regular file (a device, FIFO,
 * socket or folder is never replaced) or a write fails. */
lb_status lb_trainer_save(const lb_trainer *t, const char *path);
/* Restores a checkpoint written by lb_trainer_save for the same model config and
 * optimizer. The file is read first in a child process with a time limit (a file
 * that crashes or hangs libhdf5 gives LB_ERR_FORMAT "damaged or hostile HDF5 file"),
 * then here. Every dataset and attribute must have the type lookback writes (a
 * generator state stored as float64 or int64 instead of uint64 is refused, naming
 * the dataset) and match its CRC-32 when it has one.
 * Errors: LB_ERR_IO for a missing file or one locked by a writing process,
 * LB_ERR_FORMAT for a bad or damaged file,
 * LB_ERR_VALUE when the checkpoint's model config or a parameter's shape differs
 * (names the field or parameter, checkpoint vs model). Nothing is changed on error. */
lb_status lb_trainer_load(lb_trainer *t, const char *path);

/* The one check of whether a model can train on, or be evaluated on, a data file (every
 * command uses it, before any work): the task (when trained_task is not NULL or "",
 * the name of the task it was trained on), token inputs vs real-valued features, the
 * vocabulary (the file's must fit the embedding), the input features, regression vs
 * classification, the classes, per-position vs per-sequence targets, and the length:
 * sequences longer than max_seq_len only for a model with learned positions (a table
 * indexed by position); models with no, sinusoidal or rotary positions, the LSTM and the
 * conv stack read any length. A text corpus also needs causal attention (each target is
 * the next input). Errors: LB_ERR_VALUE naming the file and both sides. */
lb_status lb_model_data_check(const lb_model_config *mc, const char *trained_task, const lb_dataset *data);

/* For a model trained on an imported event log (`trained`: its checkpoint's schema,
 * lb_checkpoint_read_events; NULL for a generated task, then nothing is checked): an
 * events data file must read rows as the training file did (lb_event_schema_same_reading:
 * the same columns, scaling and token maps, label and classes). LB_ERR_VALUE naming the
 * file, the first difference and the fix (lookback data csv NEW.csv --like CHECKPOINT). */
struct lb_event_schema;
lb_status lb_model_events_check(const struct lb_event_schema *trained, const char *checkpoint, const lb_dataset *data);

/* The task a checkpoint's model was trained on ("spike", ...) into task (size bytes);
 * "" for checkpoints written before it was recorded. Errors as reading the config. */
lb_status lb_checkpoint_read_task(const char *path, char *task, size_t size);

/* The events schema (data/events.h: columns, scaling, token maps) of the data file a
 * checkpoint's model was trained on, when that file was imported from a CSV event log:
 * *out receives a new schema (free with lb_event_schema_free), or NULL for a model
 * trained on a generated task. Errors as reading the config, and LB_ERR_FORMAT for a
 * damaged schema (its CRC-32 or JSON). */
struct lb_event_schema;
lb_status lb_checkpoint_read_events(const char *path, struct lb_event_schema **out);

/* Reads the model config stored in a checkpoint (to build the model before loading). */
lb_status lb_checkpoint_read_model_config(const char *path, lb_model_config *cfg);
/* Loads only the parameters of a checkpoint into a model built from its config. */
lb_status lb_checkpoint_load_params(const char *path, lb_model *model);
/* The model of a checkpoint, built from its stored config, with its parameters loaded
 * (caller frees with lb_model_free). NULL with the library's message on error (the
 * errors of lb_checkpoint_read_model_config, lb_model_new, lb_checkpoint_load_params). */
lb_model *lb_checkpoint_load_model(const char *path);

/* What the loop reports. */
typedef enum lb_loop_event { LB_EVENT_STEP, LB_EVENT_EVAL, LB_EVENT_CHECKPOINT } lb_loop_event;
typedef void (*lb_loop_callback)(lb_loop_event event, const lb_step_stats *step, const lb_eval_result *eval,
                                 void *user);

/* Trains until cfg->steps or the time budget, evaluating every eval_every steps,
 * appending rows to `metrics` (CSV, may be NULL) and saving `checkpoint_path` (may be
 * NULL) at checkpoints.
 *
 * Metrics: at every evaluation a "train" row with the MEAN loss and accuracy over the
 * steps since the previous row (not the last batch's), and a "val" row; the last
 * column counts the steps of the interval skipped for a non-finite gradient.
 * Best checkpoint: the validation metric (accuracy for classification, MSE for
 * regression) is judged at the evaluations where a checkpoint is written (every
 * evaluation unless cfg->checkpoint_every is set); with checkpoint_path the best so far
 * is also saved as "best.h5" in the same folder.
 * The validation metric is cfg->select's score (lb_val_score).
 * Early stopping: with cfg->patience > 0 the run stops after that many judged
 * evaluations in a row without improvement, saving its checkpoint
 * (lb_trainer_stopped_early).
 * Train to solve: with cfg->stop_at > 0 the run stops at the first validation whose
 * score reaches it (that validation is judged for best.h5 and the checkpoint is saved;
 * lb_trainer_solved_step).
 * Errors: LB_ERR_NUMERIC when the loss is not finite (the last good checkpoint is left
 * untouched), when cfg->max_skipped steps in a row were skipped, or when every step of
 * this call was skipped; the message names the steps and what to try. LB_ERR_IO when a
 * metrics row or a checkpoint cannot be written (a full disk); the rows written before
 * and the last good checkpoint stay as they were. */
lb_status lb_trainer_run(lb_trainer *t, const char *checkpoint_path, FILE *metrics, lb_loop_callback cb, void *user);

/* Of the last lb_trainer_run: the steps it ran and how many of them were skipped. */
int64_t lb_trainer_run_steps(const lb_trainer *t);
int64_t lb_trainer_run_skipped(const lb_trainer *t);
/* 1 when the last lb_trainer_run ended by cfg->patience. */
int lb_trainer_stopped_early(const lb_trainer *t);
/* The step of the first validation of this trainer whose score reached cfg->stop_at
 * (the run ended there), 0 when none did; *score (may be NULL) receives that score. Not
 * kept in checkpoints: a resumed run that is already solved trains to its next
 * validation and stops there. -1 (score NAN) with an LB_ERR_VALUE error when t is NULL. */
int64_t lb_trainer_solved_step(const lb_trainer *t, double *score);
/* The best validation so far (also across resumes): its step (0 = no evaluation yet)
 * and metric (cfg->select's score: accuracy, MSE for regression, or loss). */
int64_t lb_trainer_best(const lb_trainer *t, double *metric);

/* The CSV header line written before the first metrics row. */
const char *lb_metrics_header(void);
/* The header of a run on `data`: lb_metrics_header, and for a text corpus three more
 * columns, bits_per_byte and bits_per_char of the split's text (data/text.h lb_text_bits:
 * the total nats over the split divided by its UTF-8 bytes or characters and ln 2, one
 * scale for char, byte, bpe and unigram corpora) and perplexity = exp(loss) per token, the
 * loss being the mean cross-entropy in nats per token.
 * NULL data: lb_metrics_header, with an LB_ERR_VALUE error. */
const char *lb_metrics_header_for(const lb_dataset *data);

/* The window length a checkpoint's model was trained with on a text corpus (its
 * train.seq_len attribute) into *seq_len; 0 for a checkpoint of a task file or one
 * written before it was recorded. Errors as reading the config. */
lb_status lb_checkpoint_read_seq_len(const char *path, int64_t *seq_len);

/* Prepares a text corpus for scoring with a checkpoint's model (eval and predict on a
 * corpus share it): the window is seq_len when > 0, else the context the model was
 * trained with (train.seq_len; the corpus's default window for a checkpoint without
 * one), set with lb_dataset_set_seq_len (its range check: [1, 2^24]); and the corpus
 * must hold the checkpoint's vocabulary (lb_dataset_check_vocab: one message naming the
 * `lookback data text ... --like CHECKPOINT` import that fixes it). A checkpoint without
 * a stored vocabulary is left to lb_model_data_check's size comparison. Errors:
 * LB_ERR_VALUE (not a text corpus, a window out of range, another vocabulary), the
 * checkpoint's read errors. */
lb_status lb_checkpoint_fit_corpus(const char *checkpoint, lb_dataset *corpus, int64_t seq_len);

/* One row of metrics.csv (docs/training.md): a "train" row holds the means over the
 * steps since the previous row, a "val" row one evaluation. Columns a file does not
 * have read as NAN (numbers) or 0 (step, skipped). */
typedef struct lb_metrics_row {
    int64_t step;
    char split[8];            /* "train" or "val" */
    double loss, accuracy;    /* accuracy NAN for regression */
    double lr, grad_norm, tokens_per_second;
    double wall_seconds;      /* training seconds since the run began (evaluations excluded) */
    int64_t skipped;          /* steps skipped for a non-finite gradient */
} lb_metrics_row;
/* Called for each row read; a non-zero return stops the reading. */
typedef int (*lb_metrics_row_fn)(const lb_metrics_row *row, void *user);
/* Reads a metrics.csv written by lb_trainer_run, row by row in file order, and calls
 * fn(row, user) for each (only the rows of `split` when it is not NULL). Columns are
 * found by the header's names, so files with more columns read too; a row that does not
 * parse (a line cut by a full disk) is skipped. Returns the rows passed to fn in *n_rows
 * (may be NULL). Errors: LB_ERR_IO naming the file (missing, unreadable), LB_ERR_VALUE
 * when its first line is not a metrics header (no step, split and loss columns). */
lb_status lb_metrics_read(const char *path, const char *split, lb_metrics_row_fn fn, void *user, int64_t *n_rows);

LB_API_END

#endif

/* Internal to train/: the trainer's state, shared by the loop and the checkpoints. */
#ifndef LB_TRAINER_INTERNAL_H
#define LB_TRAINER_INTERNAL_H

#include <signal.h>

#include "layers/family.h"
#include "train/trainer.h"

typedef struct lb_dist_state lb_dist_state; /* train/distributed.c */

struct lb_trainer {
    lb_model *model;
    const lb_dataset *data;
    lb_train_config cfg;
    lb_optim *optim;
    lb_loader *loader;
    lb_graph *graph;    /* per-step memory, reset after every micro-batch */
    lb_graph *eval_graph; /* evaluations' memory, kept from one evaluation to the next (NULL until the first) */
    lb_rng dropout_rng; /* dropout masks, saved in checkpoints */
    int64_t step;       /* optimizer steps completed */
    double elapsed;     /* training seconds, across resumes */
    double budget_spent; /* seconds of the time budget spent (cfg.budget_clock), across resumes */
    volatile sig_atomic_t stop_requested; /* set by lb_trainer_request_stop */
    int step_interrupted;                 /* the last step was discarded because of it */
    int stopped;        /* the last run ended on request */
    /* The best validation so far (saved in checkpoints): best_step 0 = none yet. */
    int64_t best_step;
    double best_metric;    /* accuracy (classification, higher is better) or MSE (lower) */
    int64_t evals_since_best;
    int stopped_early;     /* the last run ended by --patience */
    int64_t solved_step;   /* the validation that reached cfg.stop_at (0 = none yet) */
    double solved_score;
    int64_t run_steps, run_skipped, skipped_in_row; /* of the last lb_trainer_run */
    /* The metrics' train row: sums over the steps since the last row (saved in
     * checkpoints, so a resumed run writes the same rows as an uninterrupted one). */
    double interval_loss, interval_acc;
    int64_t interval_steps, interval_acc_steps, interval_skipped;
    lb_dist_state *dist; /* data-parallel replicas (NULL: one process) */
    lb_tensor *class_weight; /* float64 [C] weights of the training loss, or NULL (cfg.class_weight) */
    lb_model_flops flops;    /* the model's FLOPs per position at the data's seq_len (NAN: not counted) */
    double sgemm_rate;       /* FLOP/s the MFU is measured against (0: none given) */
};

/* lb_evaluate over part `part` of `parts` of the evaluation batches (contiguous blocks
 * of whole batches, so every batch is the one a single process evaluates). Leaves
 * out->loss and out->accuracy to lb_eval_finish; their sums go to *loss_sum (loss
 * times scored targets) and *correct. `graph` (NULL: a graph of its own, freed at the
 * end) is cleared after each batch and reset once at the end, its grad mode restored,
 * so a graph kept across evaluations reuses its buffers. */
lb_status lb_evaluate_part(lb_model *model, const lb_dataset *data, const char *split, int64_t max_examples,
                           int64_t batch_size, int n_bins, int part, int parts, lb_graph *graph,
                           lb_eval_result *out, double *loss_sum, int64_t *correct, lb_tensor **attention_out);
/* The trainer's evaluation graph, made at the first call (NULL when out of memory). */
lb_graph *lb_trainer_eval_graph(lb_trainer *t);
/* Sets out->loss, accuracy and mse from the sums of lb_evaluate_part. */
void lb_eval_finish(lb_eval_result *out, double loss_sum, int64_t correct, int regression);

/* The loop's hooks for data-parallel replicas (train/distributed.c), called only when
 * t->dist is set. Each returns the same status on every rank. */
/* Sums the global batch's scored targets over ranks. */
lb_status lb_dist_total_scored(lb_trainer *t, int64_t *scored);
/* After the local backward passes: agrees on failure (`local` is this rank's status)
 * and on a stop request, sums the step's statistics and the gradients over ranks. */
lb_status lb_dist_reduce_step(lb_trainer *t, lb_status local, double *loss_sum, int64_t *correct,
                              int64_t *counted);
/* After the optimizer step: the step's time is the slowest rank's; every check_every
 * steps the parameters' checksums are compared. */
lb_status lb_dist_end_step(lb_trainer *t, double *seconds, double *budget_seconds);
/* A stop request seen by the ranks together at the last step. */
int lb_dist_stop_agreed(const lb_trainer *t);
/* lb_evaluate with the batches split over the ranks and the sums reduced. */
lb_status lb_dist_evaluate(lb_trainer *t, const char *split, int64_t max_examples, int64_t batch_size,
                           lb_eval_result *out);
void lb_dist_state_free(lb_dist_state *d);

#endif

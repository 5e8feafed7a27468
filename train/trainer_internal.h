/* Internal to train/: the trainer's state, shared by the loop and the checkpoints. */
#ifndef LB_TRAINER_INTERNAL_H
#define LB_TRAINER_INTERNAL_H

#include <signal.h>

#include "train/trainer.h"

struct lb_trainer {
    lb_model *model;
    const lb_dataset *data;
    lb_train_config cfg;
    lb_optim *optim;
    lb_loader *loader;
    lb_graph *graph;    /* per-step memory, reset after every micro-batch */
    lb_rng dropout_rng; /* dropout masks, saved in checkpoints */
    int64_t step;       /* optimizer steps completed */
    double elapsed;     /* training seconds, across resumes */
    volatile sig_atomic_t stop_requested; /* set by lb_trainer_request_stop */
    int stopped;        /* the last run ended on request */
    /* The best validation so far (saved in checkpoints): best_step 0 = none yet. */
    int64_t best_step;
    double best_metric;    /* accuracy (classification, higher is better) or MSE (lower) */
    int64_t evals_since_best;
    int stopped_early;     /* the last run ended by --patience */
    int64_t run_steps, run_skipped, skipped_in_row; /* of the last lb_trainer_run */
};

#endif

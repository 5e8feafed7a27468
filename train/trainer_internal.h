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
};

#endif

/* One training run in a run folder, shared by `lookback train`, compare, the demo and
 * the study: the folder (config.json, metrics.csv, checkpoint.h5, best.h5), its lock,
 * resume, and the thread set-up every run starts with.
 *
 * Folder layout and file formats: docs/training.md. */
#ifndef LB_LAB_RUN_H
#define LB_LAB_RUN_H

#include "lab/run_config.h"
#include "layers/family.h"
#include "tensor/api.h"

LB_API_BEGIN

/* Sets the thread count for BLAS and OpenMP: n > 0, or OMP_NUM_THREADS when n == 0
 * and it is set, else the number of processors (shared by the MPI ranks on this host),
 * and reserves each thread's OpenBLAS buffer (lb_blas_reserve_buffers): under an
 * address-space limit (ulimit -v) the count is lowered until the buffers fit (one line
 * on stderr says so), and when not even one fits it returns -1 with LB_ERR_MEMORY.
 * Returns the count in use. */
int lb_run_set_threads(int n);

/* Makes lb_run_train train one model on all MPI ranks (train) rather than whole
 * runs per rank (compare). */
void lb_run_set_data_parallel(int on);
/* Lets a resumed run continue on a data file whose size or CRC-32 differs from what its
 * config.json recorded (train --accept-data-change); off: such a resume is refused. */
void lb_run_set_accept_data_change(int on);

/* What one training run produced. */
typedef struct lb_run_result {
    int64_t steps;          /* steps completed */
    double seconds;         /* training seconds (without evaluations) */
    double budget_seconds;  /* of them, on the run's budget clock (lb_trainer_budget_spent) */
    int64_t parameters;     /* scalar parameters of the model */
    lb_eval_result last_val; /* the last validation (examples 0 when none ran) */
    int interrupted;        /* stopped by SIGINT/SIGTERM after saving a checkpoint */
    int signal;             /* the signal that stopped it (SIGINT, SIGTERM), 0 otherwise */
    int usage;              /* it failed because of the options given (exit status 2) */
    int64_t skipped;        /* steps of this run skipped for a non-finite gradient */
    int64_t best_step;      /* step of the best validation so far (0 = none), in best.h5 */
    double best_metric;     /* its score (--select: accuracy, MSE for regression, or loss) */
    int64_t solved_step;    /* the validation that reached --stop-at (the run ended there), 0 = none */
    /* What the run cost (train/cost.h, docs/inspect.md): */
    lb_model_flops flops;   /* the model's FLOPs per position at the data's seq_len */
    double tokens_per_second; /* positions trained per wall second over this run's steps */
    double sgemm_rate;      /* the FLOP/s measured at the start (lb_sgemm_rate) */
    double mfu;             /* flops.training × tokens_per_second / sgemm_rate (NAN: unknown) */
    double peak_memory_mib; /* the process's peak resident memory at the end */
} lb_run_result;

/* The signal (SIGINT or SIGTERM) that stopped the last lb_run_train of this process,
 * or 0 when none did. */
int lb_run_caught_signal(void);
/* An exclusive lock on DIR/.lock (DIR must exist) held while the returned descriptor is
 * open, by this process and its children (released when they end); the file holds the
 * owner's process id. -1 with the error set (LB_ERR_STATE naming that process when another
 * one holds it, LB_ERR_IO when the file cannot be made). */
int lb_run_lock_dir(const char *dir);
/* Ends what lb_run_lock_dir began: removes DIR/.lock and closes `fd` (nothing when fd < 0).
 * A lock file left by a process that was killed holds a dead id and no lock: the next
 * lb_run_lock_dir takes it. */
void lb_run_unlock_dir(const char *dir, int fd);

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
lb_status lb_run_train(lb_run_config *rc, const char *dir, int resume, int quiet, lb_run_result *out,
                              lb_model **model_out);

LB_API_END

#endif

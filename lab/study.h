/* The method study behind `lookback study`: the source document's table of
 * alternatives (full self-attention, RNN/LSTM, 1-D convolution, local attention)
 * measured on tasks chosen so that each method's best fit is tested.
 *
 * The work is a list of independent jobs in three phases, each phase needing only
 * the results of the phases before it:
 *   LB_STUDY_DATA  one job per task: generate its data files (train, mixed-length
 *                  train for the spike task, one test file per test length);
 *   LB_STUDY_LR    one job per (task, method, candidate learning rate) of the recipes
 *                  that list several (none with quick): a short run trained to solve,
 *                  scored on the validation split;
 *   LB_STUDY_CELL  one job per (task, method, seed): train with its recipe (one table in
 *                  lab/recipes.c) and the learning rate chosen, until solved on the
 *                  validation split or out of the task's CPU budget (the same for every
 *                  method of the task), record when it learnt and the learning curve,
 *                  then evaluate at every test length and measure the costs.
 * Every job stores its result in DIR/jobs/<name>.json (written to a temporary file
 * and renamed) and is skipped when that file exists, so a killed study continues
 * where it stopped, and jobs of one phase may run in any order, in separate
 * processes or on separate MPI ranks (a driver runs phase by phase with a barrier
 * in between). lb_study_report reads whatever results exist.
 */
#ifndef LB_LAB_STUDY_H
#define LB_LAB_STUDY_H

#include <stdint.h>

#include "lab/jobs.h"
#include "tensor/error.h"
#include "tensor/api.h"

LB_API_BEGIN

/* The most seeds a study runs per (task, method). */
enum { LB_STUDY_MAX_SEEDS = 16 };

typedef enum lb_study_phase { LB_STUDY_DATA = 0, LB_STUDY_LR, LB_STUDY_CELL, LB_STUDY_PHASES } lb_study_phase;

typedef struct lb_study_options {
    const char *out;      /* the study folder (created) */
    int quick;            /* 1 seed default, short budgets, smaller data */
    int seeds;            /* seeds per (task, method); 0 = 1 with quick, else 3 */
    const char *tasks;    /* comma-separated task names, NULL = all */
    const char *methods;  /* comma-separated method names, NULL = all */
    int threads;          /* threads per job (0 = OMP_NUM_THREADS or all processors) */
    int jobs;             /* jobs the driver runs at once (recorded in the report; 0 = 1) */
    int zoology;          /* recall at the scale of Arora et al. 2023 (vocabulary 8,192, T 512, 64 pairs) */
    double budget;        /* CPU seconds per cell for every task (0 = each task's own budget, sized
                             from the measured time to learn of its fastest learner) */
    int64_t steps;        /* optimizer steps per cell at most (probes: a quarter, at least 1), the
                             same on every machine; without `budget`, no CPU-second budget
                             (0 = no step limit) */
    int64_t eval_examples;/* test sequences per test length (0 = 100 with quick, else 200) */
    const char *command;  /* the command line as run, for the report's header (NULL: "lookback study") */
} lb_study_options;

typedef struct lb_study lb_study;

/* Plans the study: checks the recipe table, the task and method lists (a list that makes
 * no cell is LB_ERR_VALUE, before any folder is made), creates the folder and records
 * the options that decide the results (quick, zoology, budget, steps, eval_examples) in
 * DIR/study-options.json; a folder holding a study made with other such options is
 * refused (seeds, tasks, methods and threads may change between runs: finished jobs
 * are reused). NULL with LB_ERR_VALUE (a bad list or value; the message names it),
 * LB_ERR_STATE (another study in DIR) or LB_ERR_IO. */
lb_study *lb_study_new(const lb_study_options *opt);
void lb_study_free(lb_study *s);

/* Jobs of a phase; the name of job i ("spike16.lstm.seed-1") and whether its result
 * is stored; the CPU seconds per thread it is budgeted for at most (training time,
 * without data loading and evaluation; a job that solves its task stops earlier; 0
 * when its budget is in steps only, --steps without --budget). */
int lb_study_jobs(const lb_study *s, lb_study_phase phase);
const char *lb_study_job_name(const lb_study *s, lb_study_phase phase, int index);
int lb_study_job_done(const lb_study *s, lb_study_phase phase, int index);
double lb_study_job_budget(const lb_study *s, lb_study_phase phase, int index);

/* Runs job i of `phase` in this process (it uses OpenMP and BLAS threads) and stores
 * its result; LB_OK at once when it is already stored. A cell needs its task's data
 * and its learning-rate probes (LB_ERR_STATE naming what is missing otherwise).
 * Errors from data generation, training and evaluation, with the job's name. */
lb_status lb_study_run_job(lb_study *s, lb_study_phase phase, int index);

/* One line about a finished job's result (e.g. "accuracy 0.931 / 0.902 at 256 / 1024,
 * 412 steps"), into buf. */
void lb_study_job_summary(const lb_study *s, lb_study_phase phase, int index, char *buf, size_t size);

/* Writes DIR/study.json, DIR/study.md and the PNG plots from the stored results
 * (cells not yet run are reported as missing). `seconds` (the wall time of the run
 * that ran jobs) is recorded; a negative value (a run that ran none, only rewriting
 * the report) keeps the wall time the previous study.json recorded. Errors: LB_ERR_IO.
 * Plots that cannot be drawn are noted on stderr and skipped. */
lb_status lb_study_report(lb_study *s, double seconds);

/* Shares the processors of this host (OMP_NUM_THREADS when set; under mpirun divided by
 * the processes started on it) between the jobs run at once and their threads, so that
 * jobs x threads fill them: o->jobs = `jobs` (0 = processors / o->threads, or all the
 * processors when o->threads is 0 too), in [1, 64]; o->threads, when 0, = processors /
 * jobs (at least 1). */
void lb_study_share_processors(lb_study_options *o, int jobs);

/* Runs the jobs not yet stored, phase by phase, opt->jobs at a time, each in a child
 * process (lb_jobs_run, lab/jobs.h; under mpirun job i of a phase on rank i mod N), with
 * progress lines on stderr unless `quiet` ("study in DIR: 20 cells (4 already stored),
 * 31 jobs to run", then one line per job). A SIGINT or SIGTERM stops the jobs running
 * (each saves its checkpoint) and starts no other: out->signal says so. Errors: those
 * of lb_jobs_run. */
lb_status lb_study_run(lb_study *s, int quiet, lb_jobs_result *out);

LB_API_END

#endif

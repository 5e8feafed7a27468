/* Running a list of independent jobs, phase by phase, each job in a child process
 * (the scheduler of the method study, lab/study.h): at most `parallel` children at once,
 * so a job's peak memory is its own and a crash ends that job only; a phase starts when
 * every job of the one before it has ended (on every MPI rank: the next phase reads the
 * results of the one before from a shared folder). Under mpirun job i of each phase runs
 * on rank i mod N (lb_dist_owns).
 *
 * Stopping: SIGINT or SIGTERM to this process is passed on, once, to the running jobs
 * (each in its own process group, so Ctrl-C at a terminal reaches the scheduler only),
 * which save what they can and end (a training run writes its checkpoint); no job
 * starts after it, and a stop on one rank stops every rank at the end of the phase. */
#ifndef LB_LAB_JOBS_H
#define LB_LAB_JOBS_H

#include <stddef.h>

#include "tensor/api.h"
#include "tensor/error.h"

LB_API_BEGIN

/* The jobs: `phases` phases of count(ctx, phase) jobs each, known through callbacks
 * that get `ctx`. run() runs in the child process; the others in this one. */
typedef struct lb_job_list {
    void *ctx;
    const char *what;                 /* what the jobs make together, for messages ("study") */
    int phases;                       /* P >= 1 */
    const char *const *phase_names;   /* P names for the progress lines ("data", "cell") */
    int counted_phase;                /* the phase whose jobs the progress lines count ("[cell 3/20]") */
    int (*count)(void *ctx, int phase);
    const char *(*name)(void *ctx, int phase, int index);
    int (*done)(void *ctx, int phase, int index);      /* 1: its result is stored; skipped */
    double (*budget)(void *ctx, int phase, int index); /* seconds it may take at most (ETA); 0 unknown */
    lb_status (*run)(void *ctx, int phase, int index); /* the job, in its child */
    /* One line about a finished job (e.g. its accuracy) into buf; may be NULL. */
    void (*summary)(void *ctx, int phase, int index, char *buf, size_t size);
    /* Before the first job unless quiet: the counted phase's jobs, how many of them are
     * stored, and the jobs of every phase left to run; may be NULL. */
    void (*begin)(void *ctx, int counted, int counted_done, int left);
} lb_job_list;

/* What a run of the jobs did, summed over the MPI ranks. */
typedef struct lb_jobs_result {
    int ran;          /* jobs whose child ended (well or not) */
    int failed;       /* jobs that failed: a status other than LB_OK, a signal, or no child */
    int counted;      /* jobs of the counted phase */
    int counted_done; /* of them, stored at the end */
    int signal;       /* SIGINT or SIGTERM when a stop ended the run early, else 0 */
    double seconds;   /* wall time of the run */
} lb_jobs_result;

/* Runs every job not yet done, `parallel` (1..64) at a time in child processes.
 * A child ends with exit status 0 when run() returned LB_OK; otherwise it prints
 * "<label>: <the error>" on stderr and ends with 1, or with 128 + N after a training run
 * stopped by signal N (lb_run_caught_signal; then it prints nothing: the caller reports
 * the stop). Unless `quiet`, a line on stderr before each job ("[cell 3/20] data
 * spike16 (12 s elapsed, ETA 4 min)", the ETA from the budgets left and the overhead
 * measured per job) and one after each that succeeded (its summary and time). A job
 * that fails is reported ("<label>: job NAME failed; the <what> goes on ...") and the
 * others go on.
 * SIGINT and SIGTERM are caught while it runs (without SA_RESTART) and restored after;
 * one run at a time per process. Returns LB_OK with *out filled, also after a stop;
 * LB_ERR_VALUE for a NULL argument or callback (summary and begin may be NULL), parallel outside
 * 1..64; the MPI reduction's error. */
lb_status lb_jobs_run(const lb_job_list *jobs, int parallel, int quiet, const char *label, lb_jobs_result *out);

/* A duration for progress lines: "0.25 s", "3.5 s" (decimals below 10 s, so that a short
 * time never reads 0), "42 s", "12 min" (from 90 s). */
void lb_format_duration(double seconds, char *buf, size_t size);

LB_API_END

#endif

/* The job scheduler of lab/jobs.h: a pool of child processes per phase, a stop passed
 * on to them, a barrier between phases across MPI ranks. */
#include "lab/jobs.h"

#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "lab/run.h"
#include "tensor/clock.h"
#include "train/distributed.h"

enum { MAX_RUNNING = 64 };

/* The signal (SIGINT or SIGTERM) that asked the jobs to stop, 0 while none did. */
static volatile sig_atomic_t stop_requested;
static void on_stop(int sig)
{
    stop_requested = sig;
}

/* Catches SIGINT and SIGTERM without restarting waitpid, so a stop is seen at once. */
static void catch_stop(struct sigaction old[2])
{
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_stop;
    sigemptyset(&sa.sa_mask);
    sigaction(SIGINT, &sa, &old[0]);
    sigaction(SIGTERM, &sa, &old[1]);
}

/* What one run of the jobs keeps while it goes. */
typedef struct pool {
    const lb_job_list *jobs;
    int parallel, quiet;
    const char *label;
    struct {
        pid_t pid;
        int index;
        double t0;
    } running[MAX_RUNNING];
    int n_running, stop_passed;
    /* Per phase: jobs left, their budgets, and the overhead per job measured so far
     * (data loading, evaluation, start-up; 3 s until a job of the phase has run). */
    int left_in[64], ran_in[64];
    double budget_left[64], overhead_sum[64];
    double start;
    lb_jobs_result r;
} pool;

/* The child of job i: runs it and ends with its exit status (lb_jobs_run). */
static void run_child(const pool *pl, int phase, int i)
{
    const lb_job_list *j = pl->jobs;
    lb_status st = j->run(j->ctx, phase, i);
    int sig = lb_run_caught_signal();
    if (st != LB_OK && sig) { /* the caller reports the stop and how to go on */
        fflush(NULL);
        _exit(128 + sig);
    }
    if (st != LB_OK)
        fprintf(stderr, "%s: %s\n", pl->label, lb_last_error());
    fflush(NULL);
    _exit(st == LB_OK ? 0 : 1);
}

/* Starts job i of a phase in a child process. The child's pid, or -1 when fork failed. */
static pid_t start_child(const pool *pl, int phase, int i)
{
    const lb_job_list *j = pl->jobs;
    fflush(NULL);
    /* SIGINT and SIGTERM stay blocked until the child has its own dispositions: a stop
     * passed on at once to a child that has not yet run would otherwise meet the
     * scheduler's handler (inherited) and be lost, and the job would run to its end. */
    sigset_t stops, before;
    sigemptyset(&stops);
    sigaddset(&stops, SIGINT);
    sigaddset(&stops, SIGTERM);
    sigprocmask(SIG_BLOCK, &stops, &before);
    pid_t pid = fork();
    if (pid < 0) {
        sigprocmask(SIG_SETMASK, &before, NULL);
        fprintf(stderr, "%s: job %s: fork failed: %s\n", pl->label, j->name(j->ctx, phase, i), lb_system_error(errno));
        return -1;
    }
    if (pid == 0) {
        /* Its own process group: Ctrl-C reaches the scheduler only, which passes the stop
         * on once (a second signal would end the job without its checkpoint). */
        setpgid(0, 0);
        signal(SIGINT, SIG_DFL);
        signal(SIGTERM, SIG_DFL);
        sigprocmask(SIG_SETMASK, &before, NULL);
        run_child(pl, phase, i);
    }
    sigprocmask(SIG_SETMASK, &before, NULL);
    setpgid(pid, pid);
    return pid;
}

/* 0 when the child that ran job i ended well (its wait status), -1 otherwise. */
static int child_result(const pool *pl, int phase, int i, int status)
{
    const lb_job_list *j = pl->jobs;
    if (WIFEXITED(status) && WEXITSTATUS(status) == 0)
        return 0;
    if (WIFSIGNALED(status) && !(stop_requested && (WTERMSIG(status) == SIGINT || WTERMSIG(status) == SIGTERM)))
        fprintf(stderr, "%s: job %s ended by signal %d\n", pl->label, j->name(j->ctx, phase, i), WTERMSIG(status));
    return -1;
}

/* The line before job i starts: how many counted jobs are done, the time so far, the ETA. */
static void print_start(const pool *pl, int phase, int i)
{
    const lb_job_list *j = pl->jobs;
    char eta[32], elapsed[32];
    double rest = 0;
    for (int q = 0; q < j->phases; q++)
        rest += pl->budget_left[q] + pl->left_in[q] * (pl->ran_in[q] ? pl->overhead_sum[q] / pl->ran_in[q] : 3.0);
    lb_format_duration(rest / pl->parallel, eta, sizeof eta);
    lb_format_duration(lb_clock_wall() - pl->start, elapsed, sizeof elapsed);
    fprintf(stderr, "[%s %d/%d] %s %s (%s elapsed, ETA %s)\n", j->phase_names[j->counted_phase], pl->r.counted_done,
            pl->r.counted, j->phase_names[phase], j->name(j->ctx, phase, i), elapsed, eta);
}

/* Job i of the phase no longer counts in what is left. */
static void drop_job(pool *pl, int phase, int i)
{
    pl->budget_left[phase] -= pl->jobs->budget(pl->jobs->ctx, phase, i);
    pl->left_in[phase]--;
}

/* Starts the jobs of a phase from *next while there are free slots. */
static void fill_slots(pool *pl, int phase, int n, int *next)
{
    const lb_job_list *j = pl->jobs;
    while (!stop_requested && *next < n && pl->n_running < pl->parallel) {
        int i = (*next)++;
        if (j->done(j->ctx, phase, i))
            continue;
        if (!lb_dist_owns(i)) { /* under mpirun: job i of each phase runs on rank i mod N */
            drop_job(pl, phase, i);
            continue;
        }
        if (!pl->quiet)
            print_start(pl, phase, i);
        pid_t pid = start_child(pl, phase, i);
        if (pid < 0) {
            pl->r.failed++;
            drop_job(pl, phase, i);
            continue;
        }
        pl->running[pl->n_running].pid = pid;
        pl->running[pl->n_running].index = i;
        pl->running[pl->n_running].t0 = lb_clock_wall();
        pl->n_running++;
    }
}

/* Records the end of the child `k` of the running ones, with its wait status. */
static void job_ended(pool *pl, int phase, int k, int status)
{
    const lb_job_list *j = pl->jobs;
    int i = pl->running[k].index;
    double took = lb_clock_wall() - pl->running[k].t0, budget = j->budget(j->ctx, phase, i);
    pl->running[k] = pl->running[--pl->n_running];
    int bad = child_result(pl, phase, i, status);
    drop_job(pl, phase, i);
    pl->ran_in[phase]++;
    pl->r.ran++;
    pl->overhead_sum[phase] += took - budget > 0 ? took - budget : 0;
    if (bad) {
        pl->r.failed++;
        if (!stop_requested)
            fprintf(stderr, "%s: job %s failed; the %s goes on (run the same command again to retry it)\n", pl->label,
                    j->name(j->ctx, phase, i), j->what);
        return;
    }
    if (phase == j->counted_phase)
        pl->r.counted_done++;
    if (!pl->quiet && j->summary) {
        char line[512] = "";
        j->summary(j->ctx, phase, i, line, sizeof line);
        if (line[0])
            fprintf(stderr, "    %s: %s (%.1f s)\n", j->name(j->ctx, phase, i), line, took);
    }
}

/* Runs the jobs of one phase to their end (or until a stop has ended the running ones). */
static void run_phase(pool *pl, int phase)
{
    int n = pl->jobs->count(pl->jobs->ctx, phase), next = 0;
    pl->n_running = 0;
    while (next < n || pl->n_running > 0) {
        fill_slots(pl, phase, n, &next);
        if (pl->n_running == 0) {
            if (stop_requested)
                break;
            continue;
        }
        if (stop_requested && !pl->stop_passed) { /* each job saves its checkpoint and ends */
            for (int k = 0; k < pl->n_running; k++)
                kill(pl->running[k].pid, stop_requested);
            pl->stop_passed = 1;
        }
        int status = 0; /* wait for one of them */
        pid_t pid = waitpid(-1, &status, 0);
        if (pid < 0) {
            if (errno == EINTR)
                continue;
            break; /* no children left (cannot happen while n_running > 0) */
        }
        int k = 0;
        while (k < pl->n_running && pl->running[k].pid != pid)
            k++;
        if (k < pl->n_running) /* else not a job's process */
            job_ended(pl, phase, k, status);
    }
}

/* Counts the jobs of every phase that are left, and the counted phase's. */
static void count_jobs(pool *pl)
{
    const lb_job_list *j = pl->jobs;
    int left = 0;
    pl->r.counted = j->count(j->ctx, j->counted_phase);
    for (int p = 0; p < j->phases; p++)
        for (int i = 0; i < j->count(j->ctx, p); i++)
            if (!j->done(j->ctx, p, i)) {
                pl->budget_left[p] += j->budget(j->ctx, p, i);
                pl->left_in[p]++;
                left++;
            } else if (p == j->counted_phase) {
                pl->r.counted_done++;
            }
    if (!pl->quiet && j->begin)
        j->begin(j->ctx, pl->r.counted, pl->r.counted_done, left);
}

/* Under mpirun: every rank's counts summed, the counted jobs stored counted again from
 * the shared folder. */
static lb_status sum_ranks(pool *pl)
{
    const lb_job_list *j = pl->jobs;
    if (lb_dist_size() <= 1)
        return LB_OK;
    int64_t counts[2] = {pl->r.failed, pl->r.ran};
    if (lb_dist_sum(counts, 2) != LB_OK)
        return lb_last_status();
    pl->r.failed = (int)counts[0];
    pl->r.ran = (int)counts[1];
    pl->r.counted_done = 0;
    for (int i = 0; i < pl->r.counted; i++)
        pl->r.counted_done += j->done(j->ctx, j->counted_phase, i);
    return LB_OK;
}

lb_status lb_jobs_run(const lb_job_list *jobs, int parallel, int quiet, const char *label, lb_jobs_result *out)
{
    LB_CHECK_ARG(jobs && label && out && jobs->what && jobs->phase_names && jobs->count && jobs->name && jobs->done &&
                     jobs->budget && jobs->run,
                 LB_ERR_VALUE);
    if (parallel < 1 || parallel > MAX_RUNNING || jobs->phases < 1 || jobs->phases > 64 || jobs->counted_phase < 0 ||
        jobs->counted_phase >= jobs->phases)
        return lb_error(LB_ERR_VALUE, "lb_jobs_run: %d jobs at once in %d phases (counted %d): at most %d at once, "
                        "1..64 phases", parallel, jobs->phases, jobs->counted_phase, MAX_RUNNING);
    static pool pl; /* one run at a time: the signal handler's flag is one too */
    memset(&pl, 0, sizeof pl);
    pl.jobs = jobs;
    pl.parallel = parallel;
    pl.quiet = quiet;
    pl.label = label;
    count_jobs(&pl);
    memset(out, 0, sizeof *out);
    stop_requested = 0;
    struct sigaction old_actions[2];
    catch_stop(old_actions);
    pl.start = lb_clock_wall();
    lb_status st = LB_OK;
    for (int p = 0; p < jobs->phases && !stop_requested && st == LB_OK; p++) {
        run_phase(&pl, p);
        /* The next phase reads this one's results (from the shared folder): every rank
         * finishes the phase first, and a stop on any rank stops them all. */
        int64_t stop = stop_requested;
        if ((st = lb_dist_sum(&stop, 1)) == LB_OK && stop && !stop_requested)
            stop_requested = SIGINT;
    }
    sigaction(SIGINT, &old_actions[0], NULL);
    sigaction(SIGTERM, &old_actions[1], NULL);
    pl.r.seconds = lb_clock_wall() - pl.start;
    if (st == LB_OK)
        st = sum_ranks(&pl);
    pl.r.signal = stop_requested;
    *out = pl.r;
    return st;
}

/* Decimals that keep a short time from reading 0. */
static int time_decimals(double seconds)
{
    return seconds >= 10 || seconds < 0.001 ? 0 : seconds >= 1 ? 1 : seconds >= 0.1 ? 2 : 3;
}

void lb_format_duration(double seconds, char *buf, size_t size)
{
    if (!buf || size == 0)
        return;
    if (seconds < 10) /* a short budget: decimals, so that a nonzero time never reads "0 s" */
        snprintf(buf, size, "%.*f s", time_decimals(seconds), seconds);
    else if (seconds < 90)
        snprintf(buf, size, "%.0f s", seconds);
    else
        snprintf(buf, size, "%.0f min", seconds / 60);
}

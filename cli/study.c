/* lookback study: the command that drives the method study of lab/study.h: runs its
 * jobs phase by phase in child processes (or MPI ranks), stops on SIGINT/SIGTERM and
 * writes the report. */
#include <errno.h>
#include <getopt.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include "cli/cli.h"
#include "lab/study.h"
#include "train/distributed.h"

/* ---- the command ---- */

/* The signal (SIGINT or SIGTERM) that asked the study to stop, 0 while none did. */
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

/* Starts job i of a phase in a child process, so each cell's peak memory is its own
 * and a crash ends one job only. The child's pid, or -1 when fork failed. */
static pid_t start_child(lb_study *s, lb_study_phase phase, int i)
{
    fflush(NULL);
    /* SIGINT and SIGTERM stay blocked until the child has its own dispositions: a stop
     * passed on at once to a child that has not yet run would otherwise meet the
     * study's handler (inherited) and be lost, and the job would run to its end. */
    sigset_t stops, before;
    sigemptyset(&stops);
    sigaddset(&stops, SIGINT);
    sigaddset(&stops, SIGTERM);
    sigprocmask(SIG_BLOCK, &stops, &before);
    pid_t pid = fork();
    if (pid < 0) {
        sigprocmask(SIG_SETMASK, &before, NULL);
        fprintf(stderr, "lookback study: job %s: fork failed: %s\n", lb_study_job_name(s, phase, i), lb_system_error(errno));
        return -1;
    }
    if (pid == 0) {
        /* Its own process group: Ctrl-C reaches the study only, which passes the stop on
         * once (a second signal would end the job without its checkpoint). */
        setpgid(0, 0);
        signal(SIGINT, SIG_DFL);
        signal(SIGTERM, SIG_DFL);
        sigprocmask(SIG_SETMASK, &before, NULL);
        lb_status st = lb_study_run_job(s, phase, i);
        int sig = lb_run_caught_signal();
        if (st != LB_OK && sig) { /* the study itself reports the stop and how to go on */
            fflush(NULL);
            _exit(128 + sig);
        }
        if (st != LB_OK)
            fprintf(stderr, "lookback study: %s\n", lb_last_error());
        fflush(NULL);
        _exit(st == LB_OK ? 0 : 1);
    }
    sigprocmask(SIG_SETMASK, &before, NULL);
    setpgid(pid, pid);
    return pid;
}

/* 0 when the child that ran job i ended well (its wait status), -1 otherwise. */
static int child_result(const lb_study *s, lb_study_phase phase, int i, int status)
{
    if (WIFEXITED(status) && WEXITSTATUS(status) == 0)
        return 0;
    if (WIFSIGNALED(status) && !(stop_requested && (WTERMSIG(status) == SIGINT || WTERMSIG(status) == SIGTERM)))
        fprintf(stderr, "lookback study: job %s ended by signal %d\n", lb_study_job_name(s, phase, i), WTERMSIG(status));
    return -1;
}

/* Decimals that keep a short time from reading 0. */
static int time_decimals(double seconds)
{
    return seconds >= 10 || seconds < 0.001 ? 0 : seconds >= 1 ? 1 : seconds >= 0.1 ? 2 : 3;
}

static void format_duration(double seconds, char *buf, size_t size)
{
    if (seconds < 10) /* a short budget: decimals, so that a nonzero time never reads "0 s" */
        snprintf(buf, size, "%.*f s", time_decimals(seconds), seconds);
    else if (seconds < 90)
        snprintf(buf, size, "%.0f s", seconds);
    else
        snprintf(buf, size, "%.0f min", seconds / 60);
}

static void study_usage(FILE *out)
{
    fputs("usage: lookback study [--quick] [--seeds N] [--tasks LIST] [--methods LIST] [--jobs N] [--threads N]\n"
          "                      --out DIR\n"
          "\n"
          "The source's table of alternatives, measured: full attention (transformer), local attention,\n"
          "the LSTM and a dilated causal convolution (plus three length-robust attention variants on\n"
          "spike16) are trained on tasks chosen to test each method's best fit, each with its recipe\n"
          "(one table in lab/recipes.c, from the papers and measured runs; docs/study.md). Every cell\n"
          "trains until it is solved on the validation split (99 % accuracy; modsum 100 %; copy: a\n"
          "loss at most 5 % of the memoryless loss) or its task's budget runs out (CPU seconds per\n"
          "thread: the same work however busy the machine is), records when it learnt, then is\n"
          "evaluated at the training length and at longer test lengths. Writes DIR/study.json,\n"
          "DIR/study.md and PNG plots. Every finished job is stored: the same command run again\n"
          "continues a killed study.\n"
          "\n"
          "  --out DIR           the study folder (required)\n"
          "  --quick             1 seed, shorter budgets, the recipes' default learning rates, copy at\n"
          "                      T = 200: at most about 15 minutes on 2 idle cores\n"
          "  --seeds N           seeds per (task, method) (default 3; --quick 1)\n"
          "  --tasks LIST        spike16,recall,local,parity,copy,modsum (default all)\n"
          "  --methods LIST      transformer,local,lstm,conv,ssmax,mixed,logn,linear,mamba (default\n"
          "                      all; ssmax, mixed and logn apply to spike16 only)\n"
          "  --budget SECONDS    CPU seconds per cell for every task (default: each task's own budget,\n"
          "                      sized from the measured time to learn of its fastest learner)\n"
          "  --steps N           optimizer steps per cell at most (learning-rate probes: a quarter),\n"
          "                      the same work on any machine; without --budget, no CPU budget\n"
          "  --eval-examples N   test sequences per test length (default 200; --quick 100)\n"
          "  --recall-scale S    default (T 128, 8 pairs) or zoology (vocabulary 8,192, T 512, 64 pairs)\n"
          "  --jobs N            jobs run at once, each in its own process (default: processors /\n"
          "                      --threads)\n"
          "  --threads N         threads per job (default: processors / --jobs; 1 when neither is given)\n"
          "  --quiet             no progress lines\n"
          "Under mpirun -np N the jobs of each phase are spread over the N processes (job i on\n"
          "process i mod N; the study folder must be shared by the hosts); process 0 writes the report.\n",
          out);
}

int lb_cli_study(int argc, char **argv)
{
    const char *cmd = "study";
    lb_study_options o;
    memset(&o, 0, sizeof o);
    int quiet = 0, c, jobs = 0;
    int64_t iv;
    static const struct option opts[] = {
        {"jobs", required_argument, NULL, 'j'},
        {"out", required_argument, NULL, 'o'},           {"quick", no_argument, NULL, 'Q'},
        {"seeds", required_argument, NULL, 's'},         {"tasks", required_argument, NULL, 'T'},
        {"methods", required_argument, NULL, 'm'},       {"threads", required_argument, NULL, 't'},
        {"budget", required_argument, NULL, 'b'},        {"eval-examples", required_argument, NULL, 'e'},
        {"steps", required_argument, NULL, 'S'},
        {"recall-scale", required_argument, NULL, 'r'},  {"quiet", no_argument, NULL, 'q'},
        {"help", no_argument, NULL, 'h'},                {NULL, 0, NULL, 0},
    };
    optind = 1;
    opterr = 0;
    while ((c = getopt_long(argc, argv, ":h", opts, NULL)) != -1) {
        lb_status st = LB_OK;
        switch (c) {
        case 'o': o.out = optarg; break;
        case 'Q': o.quick = 1; break;
        case 'j':
            if ((st = lb_option_int("--jobs", optarg, 1, 64, &iv)) == LB_OK)
                jobs = (int)iv;
            break;
        case 's':
            if ((st = lb_option_int("--seeds", optarg, 1, LB_STUDY_MAX_SEEDS, &iv)) == LB_OK)
                o.seeds = (int)iv;
            break;
        case 'T': o.tasks = optarg; break;
        case 'm': o.methods = optarg; break;
        case 't':
            if ((st = lb_option_int("--threads", optarg, 0, 1024, &iv)) == LB_OK)
                o.threads = (int)iv;
            break;
        case 'b': st = lb_option_real("--budget", optarg, 0.1, 1e6, &o.budget); break;
        case 'e': st = lb_option_int("--eval-examples", optarg, 1, 1 << 20, &o.eval_examples); break;
        case 'S': st = lb_option_int("--steps", optarg, 1, (int64_t)1 << 40, &o.steps); break;
        case 'r':
            if (strcmp(optarg, "zoology") == 0)
                o.zoology = 1;
            else if (strcmp(optarg, "default") != 0)
                st = lb_error(LB_ERR_VALUE, "--recall-scale: '%s' is not default or zoology", optarg);
            break;
        case 'q': quiet = 1; break;
        case 'h': study_usage(stdout); return 0;
        default: return lb_cli_bad_option(cmd, c, argv);
        }
        if (st != LB_OK)
            return lb_cli_error(cmd, 2, "%s", lb_last_error());
    }
    if (optind < argc)
        return lb_cli_error(cmd, 2, "unexpected argument '%s'", argv[optind]);
    if (!o.out)
        return lb_cli_error(cmd, 2, "--out DIR is required (see lookback study --help)");
    /* The processors of this host (OMP_NUM_THREADS when set), shared by the processes
     * mpirun started on it: jobs x threads fill them. */
    long avail = sysconf(_SC_NPROCESSORS_ONLN);
    const char *omp = getenv("OMP_NUM_THREADS");
    if (omp && atoi(omp) > 0)
        avail = atoi(omp);
    avail /= lb_dist_local_size();
    if (avail < 1)
        avail = 1;
    if (!jobs)
        jobs = o.threads > 0 ? (int)(avail / o.threads) : (int)avail;
    if (jobs < 1)
        jobs = 1;
    if (jobs > 64)
        jobs = 64;
    if (!o.threads)
        o.threads = avail / jobs > 1 ? (int)(avail / jobs) : 1;
    o.jobs = jobs;
    /* The command as run, for the report's header (arguments with spaces or quotes quoted). */
    char command[1024] = "lookback";
    for (int i = 0; i < argc; i++) {
        size_t used = strlen(command);
        int plain = argv[i][0] && strpbrk(argv[i], " \t'\"$\\") == NULL;
        snprintf(command + used, sizeof command - used, plain ? " %s" : " '%s'", argv[i]);
    }
    o.command = command;
    /* Under mpirun rank 0 makes the folder and its options file before the others read them. */
    lb_study *s = lb_dist_rank() == 0 ? lb_study_new(&o) : NULL;
    int64_t refused = 0; /* rank 0's exit code when it refuses; every rank leaves with it */
    if (lb_dist_rank() == 0 && !s)
        refused = lb_cli_error(cmd, lb_last_status() == LB_ERR_VALUE ? 2 : 1, "%s", lb_last_error());
    /* One study command per folder: two would run the same jobs into the same run folders. */
    if (s && lb_run_lock_dir(o.out) < 0) {
        lb_study_free(s);
        s = NULL;
        refused = lb_cli_error(cmd, 1, "%s", lb_last_error());
    }
    if (lb_dist_sum(&refused, 1) != LB_OK) {
        lb_study_free(s);
        return lb_cli_fail(cmd);
    }
    if (refused) /* rank 0 said why; under mpirun the others wait for it here, then leave too */
        return (int)refused;
    if (lb_dist_rank() != 0 && !(s = lb_study_new(&o)))
        return lb_cli_error(cmd, 1, "%s", lb_last_error());

    /* Per phase: jobs left, their budgets, and the overhead per job measured so far
     * (data loading, evaluation, start-up; 3 s until a job of the phase has run). */
    int total_cells = lb_study_jobs(s, LB_STUDY_CELL), done_cells = 0, failed = 0, ran = 0, left = 0;
    int left_in[LB_STUDY_PHASES] = {0}, ran_in[LB_STUDY_PHASES] = {0};
    double budget_left[LB_STUDY_PHASES] = {0}, overhead_sum[LB_STUDY_PHASES] = {0};
    for (int p = 0; p < LB_STUDY_PHASES; p++)
        for (int i = 0; i < lb_study_jobs(s, p); i++)
            if (!lb_study_job_done(s, p, i)) {
                budget_left[p] += lb_study_job_budget(s, p, i);
                left_in[p]++;
                left++;
            } else if (p == LB_STUDY_CELL) {
                done_cells++;
            }
    if (!quiet)
        fprintf(stderr, "study in %s: %d cells (%d already stored), %d jobs to run\n", o.out, total_cells, done_cells,
                left);
    stop_requested = 0;
    struct sigaction old_actions[2];
    catch_stop(old_actions);
    int stop_passed = 0; /* the running jobs were asked to stop */
    double start = lb_clock_wall();
    static const char *const phase_names[] = {"data", "lr probe", "cell"};
    enum { MAX_RUNNING = 64 };
    struct {
        pid_t pid;
        int index;
        double t0;
    } running[MAX_RUNNING];
    for (int p = 0; p < LB_STUDY_PHASES && !stop_requested; p++) {
        int n = lb_study_jobs(s, p), next = 0, n_running = 0;
        while (next < n || n_running > 0) {
            /* Start jobs while there are free slots. */
            while (!stop_requested && next < n && n_running < jobs) {
                int i = next++;
                if (lb_study_job_done(s, p, i))
                    continue;
                if (!lb_dist_owns(i)) { /* under mpirun: job i of each phase runs on rank i mod N */
                    budget_left[p] -= lb_study_job_budget(s, p, i);
                    left_in[p]--;
                    continue;
                }
                if (!quiet) {
                    char eta[32], elapsed[32];
                    double rest = 0;
                    for (int q = 0; q < LB_STUDY_PHASES; q++)
                        rest += budget_left[q] + left_in[q] * (ran_in[q] ? overhead_sum[q] / ran_in[q] : 3.0);
                    format_duration(rest / jobs, eta, sizeof eta);
                    format_duration(lb_clock_wall() - start, elapsed, sizeof elapsed);
                    fprintf(stderr, "[cell %d/%d] %s %s (%s elapsed, ETA %s)\n", done_cells, total_cells,
                            phase_names[p], lb_study_job_name(s, p, i), elapsed, eta);
                }
                pid_t pid = start_child(s, p, i);
                if (pid < 0) {
                    failed++;
                    budget_left[p] -= lb_study_job_budget(s, p, i);
                    left_in[p]--;
                    continue;
                }
                running[n_running].pid = pid;
                running[n_running].index = i;
                running[n_running].t0 = lb_clock_wall();
                n_running++;
            }
            if (n_running == 0) {
                if (stop_requested)
                    break;
                continue;
            }
            if (stop_requested && !stop_passed) { /* each job saves its checkpoint and ends */
                for (int k = 0; k < n_running; k++)
                    kill(running[k].pid, stop_requested);
                stop_passed = 1;
            }
            /* Wait for one of them. */
            int status = 0;
            pid_t pid = waitpid(-1, &status, 0);
            if (pid < 0) {
                if (errno == EINTR)
                    continue;
                break; /* no children left (cannot happen while n_running > 0) */
            }
            int k = 0;
            while (k < n_running && running[k].pid != pid)
                k++;
            if (k == n_running)
                continue; /* not a job's process */
            int i = running[k].index;
            double took = lb_clock_wall() - running[k].t0, budget = lb_study_job_budget(s, p, i);
            running[k] = running[--n_running];
            int bad = child_result(s, p, i, status);
            budget_left[p] -= budget;
            left_in[p]--;
            ran_in[p]++;
            ran++;
            overhead_sum[p] += took - budget > 0 ? took - budget : 0;
            if (bad) {
                failed++;
                if (!stop_requested)
                    fprintf(stderr, "lookback study: job %s failed; the study goes on (run the same command again to "
                                    "retry it)\n",
                            lb_study_job_name(s, p, i));
                continue;
            }
            if (p == LB_STUDY_CELL)
                done_cells++;
            if (!quiet) {
                char line[512];
                lb_study_job_summary(s, p, i, line, sizeof line);
                if (line[0])
                    fprintf(stderr, "    %s: %s (%.1f s)\n", lb_study_job_name(s, p, i), line, took);
            }
        }
        /* The next phase reads this one's results (from the shared study folder): every
         * rank finishes the phase first, and a stop on any rank stops them all. */
        int64_t stop = stop_requested;
        if (lb_dist_sum(&stop, 1) != LB_OK)
            return lb_cli_fail(cmd);
        if (stop && !stop_requested)
            stop_requested = SIGINT;
    }
    sigaction(SIGINT, &old_actions[0], NULL);
    sigaction(SIGTERM, &old_actions[1], NULL);
    double seconds = lb_clock_wall() - start;
    if (lb_dist_size() > 1) { /* rank 0 reports for all */
        int64_t counts[2] = {failed, ran};
        if (lb_dist_sum(counts, 2) != LB_OK)
            return lb_cli_fail(cmd);
        failed = (int)counts[0];
        ran = (int)counts[1];
        done_cells = 0;
        for (int i = 0; i < total_cells; i++)
            done_cells += lb_study_job_done(s, LB_STUDY_CELL, i);
        if (lb_dist_rank() != 0) {
            lb_study_free(s);
            return stop_requested ? 128 + stop_requested : failed ? 1 : 0;
        }
    }
    if (stop_requested) {
        fprintf(stderr, "lookback study: interrupted; %d of %d cells are stored in %s: run the same command again to "
                        "continue\n",
                done_cells, total_cells, o.out);
        lb_study_report(s, -1);
        lb_study_free(s);
        return 128 + stop_requested; /* as a shell reports the signal: 130 Ctrl-C, 143 SIGTERM */
    }
    lb_status st = lb_study_report(s, ran ? seconds : -1);
    if (st != LB_OK) {
        lb_study_free(s);
        return lb_cli_fail(cmd);
    }
    if (!quiet) {
        char took[32];
        format_duration(seconds, took, sizeof took);
        fprintf(stderr, "study done in %s: %d of %d cells; %s/study.md, study.json and the plots written\n", took,
                done_cells, total_cells, o.out);
    }
    lb_study_free(s);
    if (failed)
        return lb_cli_error(cmd, 1, "%d job%s failed (see above); run the same command again to retry", failed,
                            failed == 1 ? "" : "s");
    return 0;
}

/* Common timing harness of the lookback benchmarks (bench/).
 *
 * A benchmark is a function run `warmup` times untimed and then `reps` times
 * timed, each repetition on CLOCK_MONOTONIC; the result is the median, the
 * minimum and the maximum of the timed repetitions. Peak memory is the process's
 * resident high-water mark (getrusage ru_maxrss), so each workload runs in a
 * fresh process (bench/run starts one per workload and thread count).
 *
 * Every program prints one JSON line per measurement on stdout:
 *   {"impl":"lookback","workload":"W2","threads":1,"median_s":...,"min_s":...,
 *    "max_s":...,"reps":5,"peak_rss_mib":...,"base_rss_mib":..., <extra fields>}
 * base_rss_mib is the resident size after setup (inputs and parameters built),
 * before the first run, so peak - base is what the workload itself added;
 * cpu_util is CPU time / wall time over the timed runs (about N for N busy threads:
 * much less means the threads waited, e.g. for cores other processes held);
 * others_cpu is the number of CPUs other processes kept busy meanwhile (machine-wide
 * busy time from /proc/stat minus this process's CPU time, over the wall time:
 * about 0 on a quiet machine, 1 when someone else holds a whole core), and load1
 * the 1-minute load average when the measurement ended; sys_s_per_rep and
 * minflt_per_rep are the process's kernel CPU time (ru_stime) and minor page faults
 * (ru_minflt) per timed repetition: memory mapped and faulted in every step shows
 * there.
 * Anything else (progress, errors) goes to stderr.
 */
#ifndef LB_BENCH_HARNESS_H
#define LB_BENCH_HARNESS_H

#include <stdio.h>

typedef struct bench_opts {
    const char *workload; /* first positional argument */
    int threads;          /* --threads N (default 1) */
    int warmup;           /* --warmup N (default: the workload's own) */
    int reps;             /* --reps N (default: the workload's own) */
    int quick;            /* --quick: fewer repetitions */
    double budget_s;      /* --budget S (default 40): see bench_time */
} bench_opts;

typedef struct bench_result {
    double median_s, min_s, max_s;
    int reps;        /* timed repetitions actually run */
    double cpu_util; /* process CPU time / wall time over the timed repetitions */
    double others;   /* CPUs kept busy by other processes meanwhile (/proc/stat), or -1 */
    double sys_per_rep;    /* kernel CPU seconds of the process per timed repetition */
    double faults_per_rep; /* minor page faults of the process per timed repetition */
    double cpu_per_rep;    /* CPU seconds of the process (user + kernel) per timed repetition */
} bench_result;

/* One repetition of a workload; returns 0 on success, nonzero on failure (the
 * function prints its own error). */
typedef int (*bench_fn)(void *ctx);

/* Seconds on CLOCK_MONOTONIC. */
double bench_now(void);
/* Peak resident set size of this process so far, MiB (ru_maxrss). */
double bench_peak_rss_mib(void);
/* Current resident set size, MiB (/proc/self/statm); 0 when unavailable. */
double bench_current_rss_mib(void);

/* Parses "WORKLOAD [--threads N] [--warmup N] [--reps N] [--quick] [--budget S]".
 * warmup and reps are -1 when not given. Returns 0, or -1 after printing usage to stderr. */
int bench_parse(int argc, char **argv, bench_opts *o);
/* The repetition counts to use: the option when given, else the default (quick
 * halves reps, at least 1, and keeps one warm-up). */
int bench_reps(const bench_opts *o, int default_reps);
int bench_warmup(const bench_opts *o, int default_warmup);

/* Sets the thread count of every pool the process uses: OpenBLAS
 * (openblas_set_num_threads) and lookback's own (lb_set_num_threads, when
 * tensor/threads.h exists); OMP_NUM_THREADS should also be set by the caller
 * before the process starts (bench/run does). */
void bench_set_threads(int n);

/* Runs fn `warmup` times, then `reps` times timed. When the last warm-up run says
 * the timed runs would take longer than budget_s seconds (a slow or contended
 * machine), reps drops to max(3, budget_s / warm-up time), never above the request.
 * Returns 0, or the first nonzero value fn returned. */
int bench_time(bench_fn fn, void *ctx, int warmup, int reps, double budget_s, bench_result *out);

/* Prints the JSON line (see above). extra: further fields without braces or a
 * leading comma, e.g. "\"gflops\":12.5", or NULL. */
void bench_print_json(const char *impl, const char *workload, int threads, const bench_result *r,
                      double base_rss_mib, const char *extra);

#endif

/* Common timing harness of the lookback benchmarks: see harness.h. */
#define _POSIX_C_SOURCE 200809L
#include "harness.h"

#include <cblas.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>
#include <unistd.h>

#if defined(__has_include)
#if __has_include("tensor/threads.h")
#include "tensor/threads.h"
#define BENCH_HAVE_LB_THREADS 1
#endif
#endif

double bench_now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

double bench_peak_rss_mib(void)
{
    struct rusage ru;
    if (getrusage(RUSAGE_SELF, &ru) != 0)
        return 0;
    return (double)ru.ru_maxrss / 1024.0; /* Linux: KiB */
}

double bench_current_rss_mib(void)
{
    FILE *f = fopen("/proc/self/statm", "r");
    long size = 0, resident = 0;
    if (!f)
        return 0;
    int n = fscanf(f, "%ld %ld", &size, &resident);
    fclose(f);
    if (n != 2)
        return 0;
    return (double)resident * (double)sysconf(_SC_PAGESIZE) / (1024.0 * 1024.0);
}

static int parse_int(const char *flag, const char *s, int *out)
{
    char *end = NULL;
    long v = s ? strtol(s, &end, 10) : 0;
    if (!s || *end != '\0' || v < 0 || v > 1000000) {
        fprintf(stderr, "bench: %s needs a non-negative integer, got '%s'\n", flag, s ? s : "(nothing)");
        return -1;
    }
    *out = (int)v;
    return 0;
}

int bench_parse(int argc, char **argv, bench_opts *o)
{
    memset(o, 0, sizeof *o);
    o->threads = 1;
    o->warmup = -1;
    o->reps = -1;
    o->budget_s = 40.0;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (strcmp(a, "--threads") == 0) {
            if (parse_int(a, i + 1 < argc ? argv[++i] : NULL, &o->threads) != 0 || o->threads < 1)
                return -1;
        } else if (strcmp(a, "--warmup") == 0) {
            if (parse_int(a, i + 1 < argc ? argv[++i] : NULL, &o->warmup) != 0)
                return -1;
        } else if (strcmp(a, "--reps") == 0) {
            if (parse_int(a, i + 1 < argc ? argv[++i] : NULL, &o->reps) != 0 || o->reps < 1)
                return -1;
        } else if (strcmp(a, "--budget") == 0) {
            int b = 0;
            if (parse_int(a, i + 1 < argc ? argv[++i] : NULL, &b) != 0 || b < 1)
                return -1;
            o->budget_s = b;
        } else if (strcmp(a, "--quick") == 0) {
            o->quick = 1;
        } else if (a[0] == '-') {
            fprintf(stderr, "bench: unknown option '%s'\n", a);
            return -1;
        } else if (!o->workload) {
            o->workload = a;
        } else {
            fprintf(stderr, "bench: more than one workload ('%s' and '%s')\n", o->workload, a);
            return -1;
        }
    }
    if (!o->workload) {
        fprintf(stderr, "bench: no workload given\n");
        return -1;
    }
    return 0;
}

int bench_reps(const bench_opts *o, int default_reps)
{
    if (o->reps > 0)
        return o->reps;
    if (o->quick)
        return default_reps / 2 > 0 ? default_reps / 2 : 1;
    return default_reps;
}

int bench_warmup(const bench_opts *o, int default_warmup)
{
    if (o->warmup >= 0)
        return o->warmup;
    if (o->quick)
        return default_warmup > 1 ? 1 : default_warmup;
    return default_warmup;
}

void bench_set_threads(int n)
{
    openblas_set_num_threads(n);
#ifdef BENCH_HAVE_LB_THREADS
    lb_set_num_threads(n);
#endif
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

/* Kernel CPU seconds and minor page faults of the process so far. */
static void sys_and_faults(double *sys, double *faults)
{
    struct rusage ru;
    *sys = *faults = 0;
    if (getrusage(RUSAGE_SELF, &ru) != 0)
        return;
    *sys = (double)ru.ru_stime.tv_sec + 1e-6 * (double)ru.ru_stime.tv_usec;
    *faults = (double)ru.ru_minflt;
}

static double cpu_seconds(void)
{
    struct rusage ru;
    if (getrusage(RUSAGE_SELF, &ru) != 0)
        return 0;
    return (double)ru.ru_utime.tv_sec + 1e-6 * (double)ru.ru_utime.tv_usec + (double)ru.ru_stime.tv_sec +
           1e-6 * (double)ru.ru_stime.tv_usec;
}

/* Machine-wide busy CPU seconds so far (all CPUs: user, nice, system, irq, softirq,
 * steal; /proc/stat counts in USER_HZ ticks), or -1. */
static double machine_busy_seconds(void)
{
    FILE *f = fopen("/proc/stat", "r");
    unsigned long long v[8] = {0};
    int n = f ? fscanf(f, "cpu %llu %llu %llu %llu %llu %llu %llu %llu", &v[0], &v[1], &v[2], &v[3], &v[4], &v[5],
                       &v[6], &v[7])
              : 0;
    if (f)
        fclose(f);
    if (n < 8)
        return -1;
    long hz = sysconf(_SC_CLK_TCK);
    return (double)(v[0] + v[1] + v[2] + v[5] + v[6] + v[7]) / (double)(hz > 0 ? hz : 100);
}

int bench_time(bench_fn fn, void *ctx, int warmup, int reps, double budget_s, bench_result *out)
{
    memset(out, 0, sizeof *out);
    double last = 0;
    for (int i = 0; i < warmup; i++) {
        double t0 = bench_now();
        int rc = fn(ctx);
        last = bench_now() - t0;
        if (rc != 0)
            return rc;
    }
    if (last > 0 && budget_s > 0 && last * reps > budget_s) {
        int fit = (int)(budget_s / last);
        int cut = fit > 3 ? fit : 3;
        if (cut < reps) {
            fprintf(stderr, "bench: %.2f s per run, %d repetitions instead of %d (budget %.0f s)\n", last, cut, reps,
                    budget_s);
            reps = cut;
        }
    }
    double *t = malloc((size_t)(reps > 0 ? reps : 1) * sizeof *t);
    if (!t) {
        fprintf(stderr, "bench: out of memory for %d timings\n", reps);
        return -1;
    }
    double sys0, faults0, sys1, faults1;
    sys_and_faults(&sys0, &faults0);
    double wall = 0, cpu0 = cpu_seconds(), busy0 = machine_busy_seconds();
    for (int i = 0; i < reps; i++) {
        double t0 = bench_now();
        int rc = fn(ctx);
        t[i] = bench_now() - t0;
        wall += t[i];
        if (rc != 0) {
            free(t);
            return rc;
        }
    }
    double cpu = cpu_seconds() - cpu0, busy1 = machine_busy_seconds();
    sys_and_faults(&sys1, &faults1);
    out->sys_per_rep = reps > 0 ? (sys1 - sys0) / reps : 0;
    out->faults_per_rep = reps > 0 ? (faults1 - faults0) / reps : 0;
    out->cpu_util = wall > 0 ? cpu / wall : 0;
    out->cpu_per_rep = reps > 0 ? cpu / reps : 0;
    out->others = wall > 0 && busy0 >= 0 && busy1 >= 0 ? (busy1 - busy0 - cpu) / wall : -1;
    if (out->others < 0 && out->others > -0.2) /* tick rounding */
        out->others = 0;
    qsort(t, (size_t)reps, sizeof *t, cmp_double);
    out->reps = reps;
    out->min_s = t[0];
    out->max_s = t[reps - 1];
    out->median_s = reps % 2 ? t[reps / 2] : 0.5 * (t[reps / 2 - 1] + t[reps / 2]);
    free(t);
    return 0;
}

static double load1(void)
{
    double l = -1;
    FILE *f = fopen("/proc/loadavg", "r");
    if (f) {
        if (fscanf(f, "%lf", &l) != 1)
            l = -1;
        fclose(f);
    }
    return l;
}

void bench_print_json(const char *impl, const char *workload, int threads, const bench_result *r,
                      double base_rss_mib, const char *extra)
{
    printf("{\"impl\":\"%s\",\"workload\":\"%s\",\"threads\":%d,\"median_s\":%.6g,\"min_s\":%.6g,\"max_s\":%.6g,"
           "\"reps\":%d,\"peak_rss_mib\":%.1f,\"base_rss_mib\":%.1f,\"cpu_util\":%.2f,\"others_cpu\":%.2f,"
           "\"load1\":%.2f,\"sys_s_per_rep\":%.4f,\"minflt_per_rep\":%.0f,\"cpu_s_per_rep\":%.6g%s%s}\n",
           impl, workload, threads, r->median_s, r->min_s, r->max_s, r->reps, bench_peak_rss_mib(), base_rss_mib,
           r->cpu_util, r->others, load1(), r->sys_per_rep, r->faults_per_rep, r->cpu_per_rep, extra && extra[0] ? "," : "", extra ? extra : "");
    fflush(stdout);
}

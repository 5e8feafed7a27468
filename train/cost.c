/* Costs of training (train/cost.h). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/resource.h>

#include "train/cost.h"

#include "kernels/gemm.h"
#include "tensor/clock.h"
#include "tensor/error.h"
#include "tensor/threads.h"

enum { RATE_N = 512, RATE_REPS = 5, RATE_MAX_THREADS = 256 };

double lb_sgemm_rate(void)
{
    static double measured[RATE_MAX_THREADS + 1]; /* by thread count; 0 = not yet */
    int threads = lb_get_num_threads();
    int slot = threads > 0 && threads <= RATE_MAX_THREADS ? threads : 0;
    if (slot && measured[slot] > 0)
        return measured[slot];
    const size_t n = RATE_N;
    float *a = malloc(n * n * sizeof *a), *b = malloc(n * n * sizeof *b), *c = malloc(n * n * sizeof *c);
    if (!a || !b || !c) {
        free(a), free(b), free(c);
        lb_error(LB_ERR_MEMORY, "sgemm rate: out of memory for three %zu x %zu matrices", n, n);
        return 0;
    }
    for (size_t i = 0; i < n * n; i++) {
        a[i] = (float)((i * 7 % 13) - 6) / 8.0f;
        b[i] = (float)((i * 5 % 11) - 5) / 8.0f;
    }
    double best = INFINITY;
    for (int r = 0; r <= RATE_REPS; r++) {
        double t0 = lb_clock_wall();
        lb_k_gemm(LB_FLOAT32, 0, 0, RATE_N, RATE_N, RATE_N, 1.0, a, RATE_N, b, RATE_N, 0.0, c, RATE_N);
        double dt = lb_clock_wall() - t0;
        if (r > 0 && dt > 0 && dt < best) /* r == 0 warms the caches and the threads */
            best = dt;
    }
    free(a), free(b), free(c);
    double rate = isfinite(best) ? 2.0 * (double)n * (double)n * (double)n / best : 0;
    if (slot)
        measured[slot] = rate;
    return rate;
}

double lb_mfu(double flops_per_position, double positions_per_second, double rate)
{
    if (!(rate > 0) || !(positions_per_second > 0) || !isfinite(flops_per_position))
        return NAN;
    return flops_per_position * positions_per_second / rate;
}

double lb_peak_memory_mib(void)
{
    struct rusage ru;
    if (getrusage(RUSAGE_SELF, &ru) != 0)
        return NAN;
    return (double)ru.ru_maxrss / 1024.0; /* KiB on Linux */
}

char *lb_flops_text(double flops, char *buf, size_t size)
{
    LB_CHECK_ARG(buf, NULL);
    static const char prefix[] = " kMGTP";
    int k = 0;
    double v = flops;
    while (isfinite(v) && fabs(v) >= 1000 && k < 5) {
        v /= 1000;
        k++;
    }
    if (buf && size > 0)
        snprintf(buf, size, k ? "%.3g%c" : "%.3g", v, prefix[k]);
    return buf;
}

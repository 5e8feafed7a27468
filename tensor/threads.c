#include "tensor/threads.h"

#include <cblas.h>
#include <pthread.h>
#include <stdlib.h>

#include "tensor/blas.h"
#ifdef _OPENMP
#include <omp.h>
#endif

/* 0 = not set: follow OpenMP's own default. */
static int lb_threads = 0;
static int omp_default = 0;
/* Set in a child process after fork(): GNU libgomp's thread pool does not survive
 * fork, and a parallel region with more than one thread would hang there. */
static volatile int forked_child = 0;
static pthread_once_t fork_once = PTHREAD_ONCE_INIT;

static void on_fork_child(void) { forked_child = 1; }
static void register_fork_handler(void) { pthread_atfork(NULL, NULL, on_fork_child); }

void lb_set_num_threads(int n)
{
    pthread_once(&fork_once, register_fork_handler);
#ifdef _OPENMP
    if (omp_default == 0)
        omp_default = omp_get_max_threads();
    int use = n >= 1 ? n : omp_default;
    omp_set_num_threads(use);
#else
    int use = n >= 1 ? n : 1;
#endif
    (void)use;
    lb_threads = n >= 1 ? n : 0;
    /* lookback's OpenMP threads own the cores: OpenBLAS stays single-threaded and
     * lb_k_gemm splits large products over those threads (tensor/blas.h). */
    lb_blas_init();
    openblas_set_num_threads(1);
}

int lb_get_num_threads(void)
{
    pthread_once(&fork_once, register_fork_handler);
    if (forked_child)
        return 1;
#ifdef _OPENMP
    int n = lb_threads > 0 ? lb_threads : omp_get_max_threads();
    return n >= 1 ? n : 1;
#else
    return 1;
#endif
}

int lb_threads_for(int64_t n, int64_t grain)
{
    int max = lb_get_num_threads();
    int64_t want = grain > 0 ? n / grain : n;
    if (want < 1)
        return 1;
    return want < max ? (int)want : max;
}

int lb_blas_parallel_kind(void) { return openblas_get_parallel(); }

int lb_blas_serial_begin(void)
{
    /* Only the pthreads build spawns threads regardless of OpenMP; an OpenMP build
     * of OpenBLAS checks omp_in_parallel() itself. */
    if (openblas_get_parallel() != 1)
        return 0;
    int previous = openblas_get_num_threads();
    if (previous != 1)
        openblas_set_num_threads(1);
    return previous;
}

void lb_blas_serial_end(int previous)
{
    if (previous > 1)
        openblas_set_num_threads(previous);
}

int lb_omp_wait_defaults(void)
{
    if (getenv("OMP_WAIT_POLICY") || getenv("GOMP_SPINCOUNT"))
        return 0;
    return setenv("GOMP_SPINCOUNT", LB_GOMP_SPINCOUNT, 0) == 0;
}

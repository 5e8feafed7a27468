/* Threads: one owner.
 *
 * lookback parallelises its own loops (elementwise kernels, the fused attention
 * kernels) and its large matrix products with OpenMP. OpenBLAS stays single-threaded
 * (tensor/blas.h): two pools on the same cores, OpenMP workers spinning while
 * OpenBLAS's own pthread workers run, cost a fifth of the CPU at 2 threads. So:
 *
 *  - lb_set_num_threads(n) is the one knob: OpenMP regions of the library, the
 *    products lb_k_gemm splits (tensor/kernels.h) included, use n threads;
 *  - OpenBLAS runs one thread (openblas_set_num_threads(1)); lb_blas_serial_begin /
 *    lb_blas_serial_end, kept for kernels that call BLAS inside an OpenMP region,
 *    are then no-ops, and still make a pthreads OpenBLAS single-threaded for the
 *    region if a program raised its count.
 *
 * Without a call to lb_set_num_threads, the count is OpenMP's default
 * (OMP_NUM_THREADS, else the number of processors).
 *
 * After fork(), the child process runs the library's OpenMP regions with one thread
 * (lb_get_num_threads() returns 1 there): GNU libgomp's thread pool does not survive
 * fork, and a region with more threads would hang in the child. The fused attention
 * kernels give the same bits with any thread count, so a forked child computes what
 * its parent would.
 *
 * The BLAS thread count is process-wide state of OpenBLAS; lookback keeps it at 1.
 */
#ifndef LB_THREADS_H
#define LB_THREADS_H

#include <stdint.h>

#include "tensor/api.h"

LB_API_BEGIN

/* Sets the number of threads of the library's OpenMP regions (omp_set_num_threads),
 * large matrix products included, and remembers it; OpenBLAS is set to one thread
 * (lb_blas_init). n < 1 restores the default (the value OpenMP had at the first call). */
void lb_set_num_threads(int n);

/* The thread count the library's OpenMP regions use: the last lb_set_num_threads
 * value, else omp_get_max_threads(). Always >= 1 (1 when built without OpenMP, and
 * in a child process after fork()). */
int lb_get_num_threads(void);

/* Makes BLAS single-threaded for an OpenMP region that calls it and returns the
 * thread count to restore; pass that to lb_blas_serial_end after the region. Nested
 * pairs are fine. With an OpenMP or sequential OpenBLAS (openblas_get_parallel() != 1)
 * nothing needs changing and both are no-ops apart from the query. */
int lb_blas_serial_begin(void);
void lb_blas_serial_end(int previous);

/* Threads for an OpenMP loop over `n` independent work units, `grain` of which are
 * worth one thread: min(lb_get_num_threads(), n / grain), at least 1. Elementwise
 * kernels (tensor/kernels.h, the unary ops, LayerNorm) split their loops with it; each
 * element is computed by one thread in a fixed order, so their results do not depend
 * on the thread count. */
int lb_threads_for(int64_t n, int64_t grain);

/* Elements of a memory-bound loop (a few operations each) worth one thread. */
enum { LB_GRAIN_ELEMENTS = 32768 };

/* How long an idle OpenMP thread spins before it sleeps. GNU libgomp's default,
 * 300,000 spins (OMP_WAIT_POLICY and GOMP_SPINCOUNT unset), keeps the worker of a
 * 2-thread run busy through every serial stretch between the library's parallel
 * regions: measured on W2 (bench/run) at 2 threads on a shared 2-CPU machine, 1.12 CPU
 * seconds per step against 0.74 with 10,000 spins and 0.70 with OMP_WAIT_POLICY=passive
 * (1 thread: 0.70), and the step took 1.5x as long. 10,000 spins still cover the short
 * gaps between back-to-back regions. */
#define LB_GOMP_SPINCOUNT "10000"

/* Sets GOMP_SPINCOUNT=LB_GOMP_SPINCOUNT in the environment when neither
 * OMP_WAIT_POLICY nor GOMP_SPINCOUNT is set (a user's choice is kept); returns 1 when
 * it set it. libgomp reads the variables once, when it is loaded, before any code of
 * the program runs (an executable's .preinit_array is too early: glibc resets the
 * environment after it), so a program that wants the setting re-executes itself when
 * this returns 1: the lookback command and the benchmarks start with
 *     if (lb_omp_wait_defaults()) execv("/proc/self/exe", argv);
 * (on failure they go on with libgomp's default). In any other process it only
 * changes the environment of child processes. */
int lb_omp_wait_defaults(void);

/* OpenBLAS's threading model: 0 sequential, 1 pthreads, 2 OpenMP. */
int lb_blas_parallel_kind(void);

LB_API_END

#endif

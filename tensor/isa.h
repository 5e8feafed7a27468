/* The instruction-set build of the library's vector kernels (kernels/: the fused
 * attention loops and tile micro-kernel, the narrow products, the LSTM gate rows,
 * GELU's float32 lanes).
 *
 * Each of those kernels is compiled three times: "avx512" (AVX-512F with FMA, 16 float
 * lanes), "avx2" (AVX2 with FMA, 8 lanes) and "generic" (the baseline x86-64 build, or
 * any other CPU). One process-wide choice says which build runs:
 *
 *  - lb_isa_set(name), when a program called it;
 *  - else the environment variable LOOKBACK_ISA=avx512|avx2|generic|auto, read once, at
 *    the first kernel that asks (so an AVX-512 machine can measure and test the AVX2
 *    path: `LOOKBACK_ISA=avx2 bench/run`, `LOOKBACK_ISA=avx2 ctest`);
 *  - else the best build this CPU runs (__builtin_cpu_supports, which includes the OS's
 *    support for the vector state).
 *
 * A LOOKBACK_ISA naming a build this CPU cannot run, or no build at all, is not used
 * (the automatic choice runs) and lb_isa_env_check() reports it: the lookback command
 * and the benchmarks call it first and refuse to start with its message.
 *
 * The builds give results within float32 rounding of each other (not the same bits:
 * FMA contraction and the lane count change the order of operations); a given build
 * gives the same bits for any thread count.
 */
#ifndef LB_ISA_H
#define LB_ISA_H

#include "tensor/api.h"
#include "tensor/error.h"

LB_API_BEGIN

/* The builds, lowest first. */
typedef enum lb_isa_build { LB_BUILD_GENERIC = 0, LB_BUILD_AVX2 = 1, LB_BUILD_AVX512 = 2 } lb_isa_build;
enum { LB_N_BUILDS = 3 };

/* The build the kernels run now (see above). Thread-safe. */
lb_isa_build lb_isa(void);

/* A build's name: "generic", "avx2" or "avx512" ("unknown" for another value). */
const char *lb_isa_name(lb_isa_build build);

/* 1 when this CPU (and OS) can run `build`, else 0. "generic" always runs. */
int lb_isa_cpu_runs(lb_isa_build build);

/* Chooses the build: "avx512", "avx2", "generic", or "auto" / NULL to return to the
 * choice without a program's call (LOOKBACK_ISA, else the best). Errors: LB_ERR_VALUE
 * (choice unchanged) for an unknown name or a build this CPU cannot run, naming it.
 * For tests and benchmarks; not thread-safe against running kernels. */
lb_status lb_isa_set(const char *name);

/* Checks LOOKBACK_ISA: LB_OK when it is unset, empty or names a build this CPU runs;
 * otherwise LB_ERR_VALUE with a message naming the value and what this CPU runs. */
lb_status lb_isa_env_check(void);

LB_API_END

#endif

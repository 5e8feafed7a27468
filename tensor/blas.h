/* The BLAS under lookback: which kernels it runs, and one owner for the threads.
 *
 * Kernels. OpenBLAS built with DYNAMIC_ARCH (Debian's) picks its kernels at load by
 * recognising the CPU. A CPU newer than the OpenBLAS release can fall through to an
 * old SSE3 core (OpenBLAS 0.3.21 takes Prescott for Intel family 6 models it does not
 * know, an upstream fall-through fixed in 0.3.25), which runs sgemm 3-4 times slower
 * than the AVX-512 kernels the CPU could run. The library corrects that once, before
 * its first product: when the core OpenBLAS chose belongs to an older instruction-set
 * class than the CPU supports (__builtin_cpu_supports: AVX-512 F/CD/BW/DQ/VL, else AVX2
 * with FMA, else AVX), it re-initialises OpenBLAS's kernel table for the matching core
 * ("SkylakeX", "Haswell" or "Sandybridge") through OpenBLAS's own
 * OPENBLAS_CORETYPE path (gotoblas_dynamic_quit, then gotoblas_dynamic_init with the
 * variable set for that call; the variable is removed again afterwards, so child
 * processes start as this one did). The correction runs from a load-time constructor
 * of the library (the command, a program linking liblookback, the tests alike) and
 * again, as a no-op, at the first product. It is never made when the user set
 * OPENBLAS_CORETYPE (that choice is kept, whatever it is), when OpenBLAS does not
 * export those functions (another build; looked up with dlsym, so any OpenBLAS links),
 * or for a core name it does not know. With LOOKBACK_ISA=avx2 (tensor/isa.h) on a CPU with
 * AVX-512, the core is "Haswell" instead, so that the whole process runs as on an AVX2
 * machine.
 *
 * Threads. lookback keeps OpenBLAS single-threaded (openblas_set_num_threads(1) at the
 * first product and in lb_set_num_threads) and splits large products over its own
 * OpenMP threads itself (lb_k_gemm, tensor/kernels.h): one pool owns the cores, so no
 * OpenBLAS worker spins beside an OpenMP one. A program that calls OpenBLAS directly
 * gets one thread too; it may set its own count for its own calls (lb_k_gemm sets 1
 * again before it multiplies).
 */
#ifndef LB_BLAS_H
#define LB_BLAS_H

#include <stdint.h>
#include <stddef.h>

#include "tensor/api.h"

LB_API_BEGIN

/* Who chose the kernels in use. */
typedef enum lb_blas_core_choice {
    LB_BLAS_CORE_DETECTED = 0, /* OpenBLAS's own detection, kept (it matched the CPU) */
    LB_BLAS_CORE_USER = 1,     /* the user's OPENBLAS_CORETYPE, kept */
    LB_BLAS_CORE_CORRECTED = 2, /* lookback replaced an older core OpenBLAS fell back to */
    LB_BLAS_CORE_ISA = 3        /* LOOKBACK_ISA=avx2 on a newer CPU: OpenBLAS's AVX2 core (Haswell) */
} lb_blas_core_choice;

/* What a performance report needs to say about the BLAS and the kernels. */
typedef struct lb_blas_report {
    char library[192];       /* openblas_get_config(): "OpenBLAS 0.3.21 NO_LAPACKE DYNAMIC_ARCH ..." */
    char version[32];        /* its version, "0.3.21" ("unknown" when the string has none) */
    char core[32];           /* the kernels in use, openblas_get_corename(): "SkylakeX" */
    char core_detected[32];  /* what OpenBLAS chose by itself at load: "Prescott" */
    lb_blas_core_choice core_choice;
    const char *core_choice_name; /* "detected", "OPENBLAS_CORETYPE", "corrected" or "LOOKBACK_ISA" */
    const char *cpu_isa;     /* the CPU's vector class: "avx512", "avx2", "avx", "sse" or "unknown" */
    const char *threading;   /* OpenBLAS's build: "pthreads", "openmp" or "sequential" */
    int blas_threads;        /* openblas_get_num_threads(): 1 under lookback */
    int threads;             /* lb_get_num_threads(): the threads of lookback's loops and products */
    const char *attention_isa; /* the fused kernels' build, lb_k_attention_isa(): "avx512", "avx2", "generic" */
} lb_blas_report;

/* Makes the BLAS ready for the library: the kernel correction described above (once
 * per process) and OpenBLAS single-threaded. Called by the library before its first
 * product; a program may call it earlier. Never fails: what it could not change is
 * visible in lb_blas_info. Thread-safe. */
void lb_blas_init(void);

/* Fills `out` with the BLAS library, its version, the core in use and who chose it,
 * the CPU's class, threads and the fused attention kernels' build. Calls
 * lb_blas_init first. out == NULL does nothing. */
void lb_blas_info(lb_blas_report *out);

/* One line for a person, e.g.
 *   "OpenBLAS 0.3.21 (pthreads), core SkylakeX (corrected from Prescott; CPU avx512),
 *    1 BLAS thread, 2 threads, fused attention avx512"
 * written into buf (size bytes, always terminated). Returns the length it needed
 * (snprintf's convention); -1 with an LB_ERR_VALUE error when buf is NULL and size > 0;
 * r NULL writes "BLAS: unknown" with an LB_ERR_VALUE error. */
int lb_blas_describe(const lb_blas_report *r, char *buf, size_t size);

/* 1 when `bytes` more of address space can be mapped now (the limit of ulimit -v,
 * RLIMIT_AS), 0 if not: a check before work whose libraries cannot report a failed
 * allocation (OpenBLAS retries forever, GLib aborts). */
int lb_address_space_free(size_t bytes);

/* The memory this process can still use, in bytes: the smallest of the physical memory
 * free (MemAvailable plus SwapFree of /proc/meminfo), what the control group allows
 * (cgroup v2 memory.max minus memory.current, or v1 memory.limit_in_bytes minus
 * memory.usage_in_bytes) and the address space left under ulimit -v (RLIMIT_AS minus
 * VmSize). `why` (may be NULL) receives which of them it is, e.g. "free memory
 * (MemAvailable + SwapFree)". -1 when none can be read (not Linux). */
int64_t lb_memory_free_bytes(char *why, size_t why_size);

/* OpenBLAS gives each thread that runs a matrix product (the calling one and every
 * worker) a buffer of LB_BLAS_BUFFER_BYTES of address space (BUFFER_SIZE of its x86-64
 * builds, 128 MiB, plus guard pages), allocated the first time the thread runs; when that
 * allocation fails it retries forever. lb_blas_reserve_buffers(n) sets n threads
 * (lb_set_num_threads) and runs one product large enough for every thread, so each
 * allocates its buffer now, where a shortage can still be said: the count is lowered
 * until the buffers (and 32 MiB of headroom) fit the address space left. Returns the
 * count in use (<= n; a second call with a count already reserved costs nothing), or -1
 * with LB_ERR_MEMORY ("out of memory (while reserving ... OpenBLAS)", naming the
 * ulimit -v value) when not even one fits. n < 1 is taken as 1. */
enum { LB_BLAS_BUFFER_BYTES = (128 << 20) + (1 << 20) };
int lb_blas_reserve_buffers(int n);

LB_API_END

#endif

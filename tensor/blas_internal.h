/* The pieces of the kernel correction (tensor/blas.h), for the library and its tests. */
#ifndef LB_BLAS_INTERNAL_H
#define LB_BLAS_INTERNAL_H

/* Instruction-set classes, lowest first. */
enum { LB_ISA_UNKNOWN = -1, LB_ISA_SSE = 0, LB_ISA_AVX = 1, LB_ISA_AVX2 = 2, LB_ISA_AVX512 = 3 };

/* The class of an OpenBLAS x86-64 core name ("Prescott" -> LB_ISA_SSE, "Haswell" ->
 * LB_ISA_AVX2, "SkylakeX" -> LB_ISA_AVX512; case ignored), LB_ISA_UNKNOWN for a name
 * not in the table (another architecture, a newer core). */
int lb_blas_core_class(const char *core);

/* The class this CPU and OS can run (__builtin_cpu_supports), LB_ISA_UNKNOWN off x86-64. */
int lb_blas_cpu_class(void);

/* The core to ask OpenBLAS for when it runs `core` on a CPU of class cpu_class: NULL
 * when nothing is to change (core at least as new as the CPU's class, or unknown). */
const char *lb_blas_core_to_force(const char *core, int cpu_class);

/* Re-initialises OpenBLAS's kernel table for the core `name` (gotoblas_dynamic_quit,
 * then gotoblas_dynamic_init with OPENBLAS_CORETYPE=name set for the call; the
 * variable's previous value is restored). Not thread-safe: no product may run
 * meanwhile. Returns 0 on success, -1 when OpenBLAS does not export the functions. */
int lb_blas_switch_core(const char *name);

/* The correction itself, run now (lb_blas_init runs it once): returns the core it
 * switched to, or NULL when it changed nothing. */
const char *lb_blas_correct_core(void);

#endif

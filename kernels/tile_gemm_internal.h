/* The float32 tile product (kernels/tile_gemm.c, its micro-kernel in
 * kernels/tile_micro_internal.h) for the library's kernels: the fused attention kernels
 * run their tile products on it, lb_k_gemm the products of narrow layers, the LSTM
 * kernels their recurrent products. Not installed. */
#ifndef LB_TILE_GEMM_INTERNAL_H
#define LB_TILE_GEMM_INTERNAL_H

#include <stdint.h>

/* C [m, n] = alpha * A [m, k] B [k, n]        (accumulate = 0)
 * C [m, n] = C + alpha * A [m, k] B [k, n]    (accumulate = 1)
 * A's element (i, l) at a[i * a_rs + l * a_cs]; B and C row-major with row strides ldb
 * and ldc; float32. Every element of C is one sum over l in order, whatever m, n and
 * the thread. */
typedef void (*lb_tile_gemm_fn)(int64_t m, int64_t n, int64_t k, float alpha, const float *a, int64_t a_rs,
                                int64_t a_cs, const float *b, int64_t ldb, int accumulate, float *c, int64_t ldc);

#if defined(__GNUC__) && defined(__x86_64__)
/* The product's instruction-set builds (tensor/isa.h): AVX2 with FMA (8 lanes) and
 * AVX-512F with FMA (16 lanes). Only for a CPU that runs the build. */
void lb_k_tile_gemm_avx2(int64_t m, int64_t n, int64_t k, float alpha, const float *a, int64_t a_rs, int64_t a_cs,
                         const float *b, int64_t ldb, int accumulate, float *c, int64_t ldc);
void lb_k_tile_gemm_avx512(int64_t m, int64_t n, int64_t k, float alpha, const float *a, int64_t a_rs, int64_t a_cs,
                           const float *b, int64_t ldb, int accumulate, float *c, int64_t ldc);
#endif

/* The product above on the build lb_isa() names; returns 1. Returns 0 and does nothing
 * in the baseline build ("generic"), which has no micro-kernel (8-lane vectors on SSE2
 * registers spill its accumulators). */
int lb_k_tile_gemm_f32(int64_t m, int64_t n, int64_t k, float alpha, const float *a, int64_t a_rs, int64_t a_cs,
                       const float *b, int64_t ldb, int accumulate, float *c, int64_t ldc);

/* 1 when lb_k_tile_gemm_f32 runs (an AVX2 or AVX-512 build is chosen), else 0. */
int lb_k_tile_gemm_ready(void);

#endif

/* The fused attention kernels' float32 tile product (kernels/attention.c, its
 * micro-kernel in kernels/attention_gemm_internal.h), for the library's other kernels:
 * lb_k_gemm runs the products of narrow layers on it, the LSTM kernels their recurrent
 * products. Not installed. */
#ifndef LB_TILE_GEMM_INTERNAL_H
#define LB_TILE_GEMM_INTERNAL_H

#include <stdint.h>

/* C [m, n] = alpha * A [m, k] B [k, n]        (accumulate = 0)
 * C [m, n] = C + alpha * A [m, k] B [k, n]    (accumulate = 1)
 * A's element (i, l) at a[i * a_rs + l * a_cs]; B and C row-major with row strides ldb
 * and ldc; float32. Every element of C is one sum over l in order, whatever m, n and
 * the thread. Runs on the instruction-set build lb_k_attention_isa() names and returns
 * 1; returns 0 and does nothing in the baseline build ("generic"), which has no
 * micro-kernel. */
int lb_k_tile_gemm_f32(int64_t m, int64_t n, int64_t k, float alpha, const float *a, int64_t a_rs, int64_t a_cs,
                       const float *b, int64_t ldb, int accumulate, float *c, int64_t ldc);

/* 1 when lb_k_tile_gemm_f32 runs (an AVX2 or AVX-512 build is chosen), else 0. */
int lb_k_tile_gemm_ready(void);

#endif

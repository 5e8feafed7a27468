/* The plain numerical loops on tensors: broadcasting elementwise arithmetic,
 * accumulation with reduction, row sums, softmax over the last axis, sums, and the
 * matrix product by its definition (a triple loop). The fast matrix products are in
 * kernels/gemm.h and are tested against the plain one (tests/test_blas.c); GELU is in kernels/gelu.h.
 *
 * Kernels are pure: they read their inputs and write their outputs, allocate
 * nothing persistent, and report shape or dtype errors through lb_error. Outputs
 * are contiguous tensors allocated by the caller with the documented shape.
 * float32 sums over long rows accumulate in double.
 */
#ifndef LB_KERNELS_H
#define LB_KERNELS_H

#include "tensor/api.h"

#include "tensor/tensor.h"

LB_API_BEGIN

typedef enum lb_binary_op { LB_BIN_ADD, LB_BIN_SUB, LB_BIN_MUL, LB_BIN_DIV } lb_binary_op;

/* out = a (op) b with numpy broadcasting.
 *   a: [*shape_a], b: [*shape_b], out: contiguous [*broadcast(shape_a, shape_b)]
 * a and b may be any strided views; all three share one dtype. */
lb_status lb_k_binary(lb_binary_op op, const lb_tensor *a, const lb_tensor *b, lb_tensor *out);

/* dst += alpha * src, summing src over the dimensions where dst is broadcast
 * (dst's shape must broadcast to src's shape: the reduction of a broadcast).
 *   dst: [*shape_d] (any strides), src: [*shape_s] with broadcast(shape_d, shape_s) == shape_s */
lb_status lb_k_accumulate(lb_tensor *dst, const lb_tensor *src, double alpha);

/* dst [cols] += Σ_r src[r, :] over the rows of a row-major src [rows, cols], summed
 * in double (the gradient of a bias added to every row). Errors: LB_ERR_MEMORY. */
lb_status lb_k_add_row_sums(lb_dtype dtype, int64_t rows, int64_t cols, const void *src, void *dst);

/* Softmax (or log-softmax when `log`) over the last axis of contiguous x:
 *   x: [..., N] -> out: [..., N]; the row max is subtracted before exp. */
void lb_k_softmax(const lb_tensor *x, lb_tensor *out, int log);

/* Sum of all elements of a contiguous tensor, accumulated in double. */
double lb_k_sum_all(const lb_tensor *x);

/* The matrix product by its definition, one triple loop: what lb_k_gemm (kernels/gemm.h,
 * OpenBLAS or the tile micro-kernel) computes fast, here to read and to test it against.
 *   c [m, n] = alpha * op(a) [m, k] @ op(b) [k, n] + beta * c
 * op(a) = a (stored [m, k]) or, with trans_a, aᵀ (a stored [k, m]); likewise b. lda,
 * ldb, ldc are the row strides as stored, in elements; float32 or float64 (`dtype`).
 * Each element's sum runs over l = 0 .. k-1 in order, accumulated in double. beta = 0
 * overwrites c whatever it held (NaN included), as BLAS ?gemm does; m or n <= 0 does
 * nothing. A NULL a, b or c does nothing but set LB_ERR_VALUE naming it. */
void lb_k_gemm_plain(lb_dtype dtype, int trans_a, int trans_b, int64_t m, int64_t n, int64_t k, double alpha,
                     const void *a, int64_t lda, const void *b, int64_t ldb, double beta, void *c, int64_t ldc);

/* 1 when every element of x is finite (no NaN, no infinity), 0 otherwise. */
int lb_k_all_finite(const lb_tensor *x);

LB_API_END

#endif

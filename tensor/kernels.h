/* The plain numerical loops on tensors: broadcasting elementwise arithmetic,
 * accumulation with reduction, row sums, softmax over the last axis, sums. The matrix
 * products are in kernels/gemm.h, GELU in kernels/gelu.h.
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

/* 1 when every element of x is finite (no NaN, no infinity), 0 otherwise. */
int lb_k_all_finite(const lb_tensor *x);

LB_API_END

#endif

/* Numerical kernels on tensors: BLAS matmul, broadcasting elementwise arithmetic,
 * accumulation with reduction, and softmax over the last axis.
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

/* The one cblas ?gemm call of the library, on raw row-major matrices of `dtype`:
 *   c [m, n] = alpha * op(a) [m, k] @ op(b) [k, n] + beta * c
 * op(a) = a (stored [m, k]) or, with trans_a, aᵀ (a stored [k, m]); likewise b.
 * lda, ldb, ldc are the row strides of a, b and c as stored, in elements, so a
 * matrix can be a block of rows and columns inside a larger one. m or n <= 0 does
 * nothing; k <= 0 scales c by beta (an empty sum).
 * Threads: a large product is cut into parts by lb_k_gemm_split (blocks of c's rows,
 * else of its columns; never the k sum) and the parts run on lb_get_num_threads()
 * OpenMP threads, each one single-threaded OpenBLAS call; inside an OpenMP region it
 * is one call. The parts depend on m, n and k only, so every element comes from the
 * same call and the same bits with any thread count.
 * The exception to OpenBLAS: the products of narrow layers in float32 with beta 0 or 1
 * and b not transposed run on the fused attention kernels' tile micro-kernel in the
 * build lb_k_attention_isa() names, where OpenBLAS would spend about as long packing the
 * operands as multiplying: a forward, a b with n and k <= 128 (any m), and a weight
 * gradient, aᵀ b with m and n <= 128 and k >= 512 (summed over k in chunks of 1024).
 * Each element is then one sum in order, the same bits for any m and thread count; the
 * "generic" build keeps OpenBLAS. */
void lb_k_gemm(lb_dtype dtype, int trans_a, int trans_b, int64_t m, int64_t n, int64_t k, double alpha,
               const void *a, int64_t lda, const void *b, int64_t ldb, double beta, void *c, int64_t ldc);

/* How lb_k_gemm cuts c [m, n] into parts: `parts` blocks of `size` rows (by_rows) or
 * columns (the last one shorter). One part when the product is below 2 ×
 * LB_GEMM_PART_WORK multiply-adds or c has fewer than 2 × LB_GEMM_PART_EXTENT rows and
 * columns; otherwise at most LB_GEMM_MAX_PARTS parts of at least LB_GEMM_PART_EXTENT
 * rows (columns when c has too few rows) and LB_GEMM_PART_WORK multiply-adds each,
 * sizes rounded up to a multiple of 16. */
typedef struct lb_gemm_split {
    int parts;
    int by_rows;
    int64_t size;
} lb_gemm_split;
enum { LB_GEMM_PART_WORK = 1 << 20, LB_GEMM_PART_EXTENT = 128, LB_GEMM_MAX_PARTS = 8 };
void lb_k_gemm_split(int64_t m, int64_t n, int64_t k, lb_gemm_split *out);

/* The matrix-vector product for one row, where gemm's packing would cost more than
 * the product itself (a decoding step's single query against a key tile):
 *   y [n] = alpha * op(a) x + beta * y,  op(a) [n, k] = a (stored [n, k]) or, with
 *   trans_a, aᵀ (a stored [k, n]); lda the row stride of a; x [k] and y [n] contiguous.
 * beta = 0 overwrites y whatever it held. n <= 0 does nothing. (cblas ?gemv.) */
void lb_k_gemv(lb_dtype dtype, int trans_a, int64_t n, int64_t k, double alpha, const void *a, int64_t lda,
               const void *x, double beta, void *y);

/* dst [cols] += Σ_r src[r, :] over the rows of a row-major src [rows, cols], summed
 * in double (the gradient of a bias added to every row). Errors: LB_ERR_MEMORY. */
lb_status lb_k_add_row_sums(lb_dtype dtype, int64_t rows, int64_t cols, const void *src, void *dst);

/* Batched matrix product through cblas ?gemm, transposes passed to BLAS:
 *   op(a): [*batch_a, M, K]  (a stored [*batch_a, K, M] when trans_a)
 *   op(b): [*batch_b, K, N]  (b stored [*batch_b, N, K] when trans_b)
 *   c:     [*batch_c, M, N]  c = alpha * op(a) @ op(b) + beta * c
 * Batch dims broadcast (numpy). batch_c may be smaller than broadcast(batch_a,
 * batch_b) (it must broadcast to it): products over the missing batch entries are
 * summed into c, which is what gradients of broadcast operands need. a, b and c must
 * be contiguous and share one dtype. A 1-D operand is not accepted (reshape it). */
lb_status lb_k_matmul(const lb_tensor *a, int trans_a, const lb_tensor *b, int trans_b, lb_tensor *c,
                      double alpha, double beta);

/* Softmax (or log-softmax when `log`) over the last axis of contiguous x:
 *   x: [..., N] -> out: [..., N]; the row max is subtracted before exp. */
void lb_k_softmax(const lb_tensor *x, lb_tensor *out, int log);

/* GELU, exact form (torch.nn.functional.gelu with approximate="none"; Hendrycks and
 * Gimpel 2016): gelu(x) = x Φ(x) = 0.5 x erfc(-x / sqrt 2), elementwise.
 *   x, y: [n] contiguous, of `dtype`; y = gelu(x), or y += gelu(x) when `residual`
 *   (a residual branch); y may be x when not residual.
 * float64: 0.5 x erfc(-x / sqrt 2) in double with libm's erfc. float32: on x86-64
 * with AVX-512 or AVX2, glibc's vector erfcf (libmvec) on 16 or 8 lanes, every element
 * (the last partial vector too) through the same vector function, so a value's result
 * does not depend on n, its position or the thread count; elsewhere the float64
 * formula rounded to float. The erfc form keeps the relative precision of the small
 * results at negative x (where 1 + erf(x / sqrt 2) cancels to 0 from x = -8.3 in double).
 * Errors: LB_ERR_VALUE for NULL x or y, n < 0, or a dtype other than float32/float64. */
lb_status lb_k_gelu(lb_dtype dtype, int64_t n, const void *x, void *y, int residual);

/* GELU's backward: dx += dy * gelu'(x), gelu'(x) = Φ(x) + x φ(x)
 * = 0.5 erfc(-x / sqrt 2) + x exp(-x² / 2) / sqrt(2 π).
 *   x, dy, dx: [n] contiguous, of `dtype`. Precision and lanes as lb_k_gelu (vector
 *   erfcf and expf for float32).
 * Errors: LB_ERR_VALUE for a NULL pointer, n < 0 or another dtype. */
lb_status lb_k_gelu_backward(lb_dtype dtype, int64_t n, const void *x, const void *dy, void *dx);

/* Sum of all elements of a contiguous tensor, accumulated in double. */
double lb_k_sum_all(const lb_tensor *x);

/* Largest |x| and whether every element is finite (1) or not (0). */
int lb_k_all_finite(const lb_tensor *x);

LB_API_END

#endif

/* Matrix products: the library's one cblas ?gemm wrapper (with the narrow products on
 * the tile micro-kernel), the matrix-vector product of a decoding step, and the batched
 * matmul of tensors.
 *
 * Kernels are pure: they read their inputs and write their outputs, allocate nothing
 * persistent, and report shape or dtype errors through lb_error. */
#ifndef LB_KERNELS_GEMM_H
#define LB_KERNELS_GEMM_H

#include "tensor/api.h"

#include "tensor/tensor.h"

LB_API_BEGIN

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
 * and b not transposed run on the tile micro-kernel (kernels/tile_gemm.c, which the fused
 * attention kernels also use) in the build tensor/isa.h chose, where OpenBLAS would
 * spend about as long packing the operands as multiplying: a forward, a b with n and k <= 64 (any m), and a weight
 * gradient, aᵀ b with m and n <= 64 and k >= 512 (summed over k in chunks of 1024).
 * Each element is then one sum in order, the same bits for any m and thread count; the
 * "generic" build keeps OpenBLAS. The definition it is tested against: lb_k_gemm_plain
 * (tensor/kernels.h), a triple loop. */
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

LB_API_END

#endif

#include "kernels/gemm.h"

#include <cblas.h>
#include <string.h>

#include "kernels/tile_gemm_internal.h"
#include "tensor/blas.h"
#include "tensor/threads.h"
#ifdef _OPENMP
#include <omp.h>
#endif

static int64_t prod(const int64_t *v, int n)
{
    int64_t p = 1;
    for (int i = 0; i < n; i++)
        p *= v[i];
    return p;
}

static void scale_inplace(lb_tensor *c, double beta)
{
    int64_t n = lb_tensor_numel(c);
    LB_DISPATCH(c->dtype, T, {
        T *p = lb_tensor_data(c);
        for (int64_t i = 0; i < n; i++)
            p[i] = beta == 0 ? (T)0 : (T)(p[i] * beta);
    });
}

void lb_k_gemv(lb_dtype dtype, int trans_a, int64_t n, int64_t k, double alpha, const void *a, int64_t lda,
               const void *x, double beta, void *y)
{
    LB_CHECK_ARG(a);
    LB_CHECK_ARG(x);
    LB_CHECK_ARG(y);
    if (n <= 0)
        return;
    if (beta == 0.0) /* BLAS may compute 0 * y: clear whatever y held (it may be -inf) */
        memset(y, 0, (size_t)n * lb_dtype_size(dtype));
    if (k <= 0)
        return;
    /* row-major a [n, k]: NoTrans; a stored [k, n]: Trans */
    int rows = trans_a ? (int)k : (int)n, cols = trans_a ? (int)n : (int)k;
    enum CBLAS_TRANSPOSE ta = trans_a ? CblasTrans : CblasNoTrans;
    if (dtype == LB_FLOAT32)
        cblas_sgemv(CblasRowMajor, ta, rows, cols, (float)alpha, a, (int)lda, x, 1, (float)beta, y, 1);
    else
        cblas_dgemv(CblasRowMajor, ta, rows, cols, alpha, a, (int)lda, x, 1, beta, y, 1);
}

/* The products of narrow layers on the tile micro-kernel
 * (kernels/tile_gemm_internal.h), float32, beta 0 or 1, b not transposed, where OpenBLAS
 * would spend about as long packing the operands as multiplying them:
 *   a layer's forward, c [m, n] = alpha a b (+ c), a [m, k]: n and k <= 64, any m;
 *   a weight gradient, c [m, n] = alpha aᵀ b (+ c), a [k, m], k a long sum over
 *   positions: m and n <= 64, k >= 512, in chunks of LB_TILE_GEMM_CHUNK positions (a
 *   chunk of both operands stays in the cache while every block of c reads it).
 * Returns 0 when it does not apply (or the build has no micro-kernel). */
enum { LB_TILE_GEMM_NARROW = 64, LB_TILE_GEMM_LONG = 512, LB_TILE_GEMM_CHUNK = 1024 };

static int gemm_on_tiles(lb_dtype dtype, int trans_a, int trans_b, int64_t m, int64_t n, int64_t k, double alpha,
                         const void *a, int64_t lda, const void *b, int64_t ldb, double beta, void *c, int64_t ldc)
{
    if (dtype != LB_FLOAT32 || trans_b || (beta != 0 && beta != 1) || n > LB_TILE_GEMM_NARROW)
        return 0;
    if (!trans_a)
        return k <= LB_TILE_GEMM_NARROW &&
               lb_k_tile_gemm_f32(m, n, k, (float)alpha, a, lda, 1, b, ldb, beta == 1, c, ldc);
    if (m > LB_TILE_GEMM_NARROW || k < LB_TILE_GEMM_LONG)
        return 0;
    for (int64_t l0 = 0; l0 < k; l0 += LB_TILE_GEMM_CHUNK) {
        int64_t kc = k - l0 < LB_TILE_GEMM_CHUNK ? k - l0 : LB_TILE_GEMM_CHUNK;
        if (!lb_k_tile_gemm_f32(m, n, kc, (float)alpha, (const float *)a + l0 * lda, 1, lda,
                                (const float *)b + l0 * ldb, ldb, beta == 1 || l0 > 0, c, ldc))
            return 0; /* only at l0 = 0: the build is the same for every chunk */
    }
    return 1;
}

static void gemm_blas(lb_dtype dtype, int trans_a, int trans_b, int64_t m, int64_t n, int64_t k, double alpha,
                      const void *a, int64_t lda, const void *b, int64_t ldb, double beta, void *c, int64_t ldc)
{
    enum CBLAS_TRANSPOSE ta = trans_a ? CblasTrans : CblasNoTrans, tb = trans_b ? CblasTrans : CblasNoTrans;
    if (gemm_on_tiles(dtype, trans_a, trans_b, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc))
        return;
    if (dtype == LB_FLOAT32)
        cblas_sgemm(CblasRowMajor, ta, tb, (int)m, (int)n, (int)k, (float)alpha, a, (int)lda, b, (int)ldb,
                    (float)beta, c, (int)ldc);
    else
        cblas_dgemm(CblasRowMajor, ta, tb, (int)m, (int)n, (int)k, alpha, a, (int)lda, b, (int)ldb, beta, c,
                    (int)ldc);
}

static int omp_in_parallel_safe(void)
{
#ifdef _OPENMP
    return omp_in_parallel();
#else
    return 0;
#endif
}

void lb_k_gemm_split(int64_t m, int64_t n, int64_t k, lb_gemm_split *out)
{
    LB_CHECK_ARG(out);
    out->parts = 1;
    out->by_rows = 1;
    out->size = m;
    const double work = (double)m * (double)n * (double)k;
    if (m <= 0 || n <= 0 || k <= 0 || work < LB_GEMM_PART_WORK * 2.0)
        return;
    /* Rows of c first: each part re-packs b ([k, n]) only. Columns when c has too few
     * rows: each part re-packs a. Parts stay at least LB_GEMM_PART_EXTENT wide, so the
     * extra packing stays small next to a part's products. */
    int by_rows = m >= 2 * LB_GEMM_PART_EXTENT;
    int64_t extent = by_rows ? m : n;
    if (!by_rows && n < 2 * LB_GEMM_PART_EXTENT)
        return;
    int64_t parts = extent / LB_GEMM_PART_EXTENT;
    double by_work = work / LB_GEMM_PART_WORK;
    if (by_work < (double)parts)
        parts = (int64_t)by_work;
    if (parts > LB_GEMM_MAX_PARTS)
        parts = LB_GEMM_MAX_PARTS;
    if (parts < 2)
        return;
    /* equal parts, rounded up to a multiple of 16 rows (or columns): whole register tiles */
    int64_t size = (extent + parts - 1) / parts;
    size = (size + 15) / 16 * 16;
    out->by_rows = by_rows;
    out->size = size;
    out->parts = (int)((extent + size - 1) / size);
}

void lb_k_gemm(lb_dtype dtype, int trans_a, int trans_b, int64_t m, int64_t n, int64_t k, double alpha,
               const void *a, int64_t lda, const void *b, int64_t ldb, double beta, void *c, int64_t ldc)
{
    LB_CHECK_ARG(a);
    LB_CHECK_ARG(b);
    LB_CHECK_ARG(c);
    if (m <= 0 || n <= 0)
        return;
    if (k <= 0) { /* an empty sum: c = beta * c (BLAS would reject lda = 0) */
        if (beta == 1.0)
            return;
        LB_DISPATCH(dtype, T, {
            for (int64_t i = 0; i < m; i++) {
                T *row = (T *)c + i * ldc;
                for (int64_t j = 0; j < n; j++)
                    row[j] = beta == 0 ? (T)0 : (T)(row[j] * beta);
            }
        });
        return;
    }
    if (!omp_in_parallel_safe()) {
        lb_blas_init();
        if (openblas_get_num_threads() != 1) /* a program raised it: lookback's threads own the cores */
            openblas_set_num_threads(1);
    }
    lb_gemm_split sp;
    lb_k_gemm_split(m, n, k, &sp);
    const int nt = sp.parts > 1 && !omp_in_parallel_safe() ? (sp.parts < lb_get_num_threads() ? sp.parts
                                                                                             : lb_get_num_threads())
                                                          : 1;
    const size_t es = lb_dtype_size(dtype);
    /* Each part is one BLAS call on a fixed block of c's rows (or columns), whatever
     * the thread count: an element is always computed by the same call, so its bits
     * do not depend on how many threads share the parts. */
    _Pragma("omp parallel for schedule(static) num_threads(nt) if (nt > 1)")
    for (int part = 0; part < sp.parts; part++) {
        int64_t r0 = 0, rows = m, c0 = 0, cols = n;
        if (sp.by_rows) {
            r0 = (int64_t)part * sp.size;
            rows = r0 + sp.size < m ? sp.size : m - r0;
        } else {
            c0 = (int64_t)part * sp.size;
            cols = c0 + sp.size < n ? sp.size : n - c0;
        }
        /* rows r0.. of op(a): a's rows, or a's columns when transposed; likewise b's */
        const char *pa = (const char *)a + (size_t)(trans_a ? r0 : r0 * lda) * es;
        const char *pb = (const char *)b + (size_t)(trans_b ? c0 * ldb : c0) * es;
        char *pc = (char *)c + (size_t)(r0 * ldc + c0) * es;
        gemm_blas(dtype, trans_a, trans_b, rows, cols, k, alpha, pa, lda, pb, ldb, beta, pc, ldc);
    }
}

lb_status lb_k_matmul(const lb_tensor *a, int trans_a, const lb_tensor *b, int trans_b, lb_tensor *c,
                      double alpha, double beta)
{
    LB_CHECK_ARG(a, LB_ERR_VALUE);
    LB_CHECK_ARG(b, LB_ERR_VALUE);
    LB_CHECK_ARG(c, LB_ERR_VALUE);
    char s1[128], s2[128], s3[128];
    if (lb_tensor_check_same_dtype("matmul", a, b) != LB_OK || lb_tensor_check_same_dtype("matmul", a, c) != LB_OK)
        return lb_last_status();
    if (a->ndim < 2 || b->ndim < 2 || c->ndim < 2)
        return lb_error(LB_ERR_SHAPE, "matmul: operands need at least 2 dims, got %s @ %s -> %s",
                        lb_tensor_describe(a, s1, sizeof s1), lb_tensor_describe(b, s2, sizeof s2),
                        lb_tensor_describe(c, s3, sizeof s3));
    if (!lb_tensor_is_contiguous(a) || !lb_tensor_is_contiguous(b) || !lb_tensor_is_contiguous(c))
        return lb_error(LB_ERR_SHAPE, "matmul: operands must be contiguous");
    int64_t m = a->shape[a->ndim - (trans_a ? 1 : 2)], k = a->shape[a->ndim - (trans_a ? 2 : 1)];
    int64_t kb = b->shape[b->ndim - (trans_b ? 1 : 2)], n = b->shape[b->ndim - (trans_b ? 2 : 1)];
    int nba = a->ndim - 2, nbb = b->ndim - 2, nbc = c->ndim - 2;
    int nb;
    int64_t batch[LB_MAX_DIMS];
    if (k != kb || c->shape[c->ndim - 2] != m || c->shape[c->ndim - 1] != n ||
        lb_broadcast_shapes("matmul", nba, a->shape, nbb, b->shape, &nb, batch) != LB_OK ||
        lb_broadcast_shapes("matmul", nb, batch, nbc, c->shape, &nb, batch) != LB_OK)
        return lb_error(LB_ERR_SHAPE, "matmul: %s%s @ %s%s does not fit output %s (inner sizes %lld and %lld)",
                        lb_tensor_describe(a, s1, sizeof s1), trans_a ? "^T" : "", lb_tensor_describe(b, s2, sizeof s2),
                        trans_b ? "^T" : "", lb_tensor_describe(c, s3, sizeof s3), (long long)k, (long long)kb);
    int64_t nbatch = prod(batch, nb);
    int c_full = nbc == nb && prod(c->shape, nbc) == nbatch;
    const char *pa = lb_tensor_data(a), *pb = lb_tensor_data(b);
    char *pc = lb_tensor_data(c);
    size_t es = lb_dtype_size(a->dtype);
    if (nbatch == 0 || m == 0 || n == 0)
        return LB_OK;
    /* Fold 1: [*batch, M, K] @ [K, N] is one gemm with M' = batch * M. */
    if (nbb == 0 && !trans_a && c_full && prod(a->shape, nba) == nbatch) {
        lb_k_gemm(a->dtype, 0, trans_b, nbatch * m, n, k, alpha, pa, k, pb, trans_b ? k : n, beta, pc, n);
        return LB_OK;
    }
    /* Fold 2: sum over batch of a_i^T b_i with [M, N] output is one gemm with K' = batch * K. */
    if (nbc == 0 && trans_a && !trans_b && prod(a->shape, nba) == nbatch && prod(b->shape, nbb) == nbatch &&
        nba == nbb && memcmp(a->shape, b->shape, (size_t)nba * sizeof *a->shape) == 0) {
        lb_k_gemm(a->dtype, 1, 0, m, n, nbatch * k, alpha, pa, m, pb, n, beta, pc, n);
        return LB_OK;
    }
    if (!c_full && beta != 1.0) {
        scale_inplace(c, beta);
        beta = 1.0;
    }
    /* Batch strides in matrices for each operand, 0 where broadcast. */
    int64_t st_a[LB_MAX_DIMS], st_b[LB_MAX_DIMS], st_c[LB_MAX_DIMS];
    const lb_tensor *ops[3] = {a, b, c};
    int64_t *sts[3] = {st_a, st_b, st_c};
    for (int o = 0; o < 3; o++) {
        int nbo = ops[o]->ndim - 2, lead = nb - nbo;
        int64_t s = 1;
        for (int i = nb - 1; i >= 0; i--) {
            int src = i - lead;
            int64_t size = src >= 0 ? ops[o]->shape[src] : 1;
            sts[o][i] = (size == 1) ? 0 : s;
            s *= size;
        }
    }
    int64_t ma = m * k, mb = k * n, mc = m * n;
    for (int64_t bi = 0; bi < nbatch; bi++) {
        int64_t rem = bi, oa = 0, ob = 0, oc = 0;
        for (int d = nb - 1; d >= 0; d--) {
            int64_t id = rem % batch[d];
            rem /= batch[d];
            oa += id * st_a[d];
            ob += id * st_b[d];
            oc += id * st_c[d];
        }
        lb_k_gemm(a->dtype, trans_a, trans_b, m, n, k, alpha, pa + (size_t)(oa * ma) * es, trans_a ? m : k,
                  pb + (size_t)(ob * mb) * es, trans_b ? k : n, beta, pc + (size_t)(oc * mc) * es, n);
    }
    return LB_OK;
}

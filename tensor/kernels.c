#include "tensor/kernels.h"

#include <cblas.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "tensor/blas.h"
#include "tensor/strided_internal.h"
#include "tensor/tile_gemm_internal.h"
#include "tensor/threads.h"
#ifdef _OPENMP
#include <omp.h>
#endif

static lb_status same_dtype(const char *op, const lb_tensor *a, const lb_tensor *b)
{
    if (a->dtype == b->dtype)
        return LB_OK;
    char sa[128], sb[128];
    return lb_error(LB_ERR_DTYPE, "%s: dtypes differ: %s and %s (convert one with lb_tensor_copy)", op,
                    lb_tensor_describe(a, sa, sizeof sa), lb_tensor_describe(b, sb, sizeof sb));
}

/* Strides of `t` seen as broadcast to `shape` (ndim >= t->ndim): 0 where stretched. */
static void broadcast_strides(const lb_tensor *t, int ndim, const int64_t *shape, int64_t *strides)
{
    int lead = ndim - t->ndim;
    for (int i = 0; i < ndim; i++) {
        int s = i - lead;
        strides[i] = (s < 0 || (t->shape[s] == 1 && shape[i] != 1)) ? 0 : t->strides[s];
    }
}

lb_status lb_k_binary(lb_binary_op op, const lb_tensor *a, const lb_tensor *b, lb_tensor *out)
{
    LB_CHECK_ARG(a, LB_ERR_VALUE);
    LB_CHECK_ARG(b, LB_ERR_VALUE);
    LB_CHECK_ARG(out, LB_ERR_VALUE);
    static const char *names[] = {"add", "sub", "mul", "div"};
    int ndim;
    int64_t shape[LB_MAX_DIMS];
    if (same_dtype(names[op], a, b) != LB_OK || same_dtype(names[op], a, out) != LB_OK)
        return lb_last_status();
    if (lb_broadcast_shapes(names[op], a->ndim, a->shape, b->ndim, b->shape, &ndim, shape) != LB_OK)
        return lb_last_status();
    if (out->ndim != ndim || memcmp(out->shape, shape, (size_t)ndim * sizeof *shape) != 0 ||
        !lb_tensor_is_contiguous(out)) {
        char so[128], sb[128];
        return lb_error(LB_ERR_SHAPE, "%s: output %s must be contiguous with the broadcast shape %s", names[op],
                        lb_tensor_describe(out, so, sizeof so), lb_shape_str(ndim, shape, sb, sizeof sb));
    }
    int64_t sa[LB_MAX_DIMS], sb[LB_MAX_DIMS];
    broadcast_strides(a, ndim, shape, sa);
    broadcast_strides(b, ndim, shape, sb);
    LB_DISPATCH(a->dtype, T, {
        const T *pa = (const T *)lb_tensor_data(a) - a->offset;
        const T *pb = (const T *)lb_tensor_data(b) - b->offset;
        T *pc = lb_tensor_data(out);
        LB_STRIDED_LOOP3(1, ndim, shape, sa, sb, out->strides, a->offset, b->offset, 0, {
            const T *x = pa + oa, *y = pb + ob;
            T *z = pc + oc;
            switch (op) {
            case LB_BIN_ADD: for (int64_t i = 0; i < n; i++) z[i] = x[i * la] + y[i * lb]; break;
            case LB_BIN_SUB: for (int64_t i = 0; i < n; i++) z[i] = x[i * la] - y[i * lb]; break;
            case LB_BIN_MUL: for (int64_t i = 0; i < n; i++) z[i] = x[i * la] * y[i * lb]; break;
            case LB_BIN_DIV: for (int64_t i = 0; i < n; i++) z[i] = x[i * la] / y[i * lb]; break;
            }
        });
    });
    return LB_OK;
}

lb_status lb_k_accumulate(lb_tensor *dst, const lb_tensor *src, double alpha)
{
    LB_CHECK_ARG(dst, LB_ERR_VALUE);
    LB_CHECK_ARG(src, LB_ERR_VALUE);
    int ndim;
    int64_t shape[LB_MAX_DIMS];
    if (same_dtype("accumulate", dst, src) != LB_OK)
        return lb_last_status();
    if (lb_broadcast_shapes("accumulate", dst->ndim, dst->shape, src->ndim, src->shape, &ndim, shape) != LB_OK)
        return lb_last_status();
    if (ndim != src->ndim || memcmp(shape, src->shape, (size_t)ndim * sizeof *shape) != 0) {
        char sd[128], ss[128];
        return lb_error(LB_ERR_SHAPE, "accumulate: %s cannot be summed into %s", lb_tensor_describe(src, ss, sizeof ss),
                        lb_tensor_describe(dst, sd, sizeof sd));
    }
    int64_t sd[LB_MAX_DIMS];
    broadcast_strides(dst, ndim, shape, sd);
    LB_DISPATCH(dst->dtype, T, {
        T *pd = (T *)lb_tensor_data(dst) - dst->offset;
        const T *ps = (const T *)lb_tensor_data(src) - src->offset;
        T al = (T)alpha;
        /* Runs write distinct elements of dst unless dst is broadcast on an outer dim. */
        int distinct = 1;
        for (int i = 0; i + 1 < ndim; i++)
            if (sd[i] == 0 && shape[i] > 1)
                distinct = 0;
        LB_STRIDED_LOOP3(distinct, ndim, shape, sd, src->strides, src->strides, dst->offset, src->offset, src->offset, {
            T *d = pd + oa;
            const T *s = ps + ob;
            if (la == 0) { /* reduce the whole run into one element */
                double acc = 0;
                for (int64_t i = 0; i < n; i++)
                    acc += s[i * lb];
                d[0] += (T)(alpha * acc);
            } else {
                for (int64_t i = 0; i < n; i++)
                    d[i * la] += al * s[i * lb];
            }
        });
    });
    return LB_OK;
}

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

/* The products of narrow layers on the attention kernels' tile micro-kernel
 * (tensor/tile_gemm_internal.h), float32, beta 0 or 1, b not transposed, where OpenBLAS
 * would spend about as long packing the operands as multiplying them:
 *   a layer's forward, c [m, n] = alpha a b (+ c), a [m, k]: n and k <= 128, any m;
 *   a weight gradient, c [m, n] = alpha aᵀ b (+ c), a [k, m], k a long sum over
 *   positions: m and n <= 128, k >= 512, in chunks of LB_TILE_GEMM_CHUNK positions (a
 *   chunk of both operands stays in the cache while every block of c reads it).
 * Returns 0 when it does not apply (or the build has no micro-kernel). */
enum { LB_TILE_GEMM_NARROW = 128, LB_TILE_GEMM_LONG = 512, LB_TILE_GEMM_CHUNK = 1024 };

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

lb_status lb_k_add_row_sums(lb_dtype dtype, int64_t rows, int64_t cols, const void *src, void *dst)
{
    LB_CHECK_ARG(src, LB_ERR_VALUE);
    LB_CHECK_ARG(dst, LB_ERR_VALUE);
    double *acc = calloc((size_t)(cols > 0 ? cols : 1), sizeof *acc);
    if (!acc)
        return lb_error(LB_ERR_MEMORY, "row sums: out of memory for %lld columns", (long long)cols);
    /* Each thread sums one block of columns over every row, in row order: the same
     * bits for any thread count. Blocks are whole cache lines of acc. */
    const int nt = lb_threads_for(cols >= 16 ? rows * cols : 0, LB_GRAIN_ELEMENTS);
    const int64_t width = ((cols + nt - 1) / nt + 7) / 8 * 8;
    LB_DISPATCH(dtype, T, {
        const T *s = src; /* [rows, cols] */
        T *d = dst;       /* [cols] */
        _Pragma("omp parallel for schedule(static) num_threads(nt) if (nt > 1)")
        for (int part = 0; part < nt; part++) {
            const int64_t j0 = part * width, j1 = j0 + width < cols ? j0 + width : cols;
            for (int64_t r = 0; r < rows; r++) {
                const T *sr = s + r * cols;
                _Pragma("omp simd")
                for (int64_t j = j0; j < j1; j++)
                    acc[j] += (double)sr[j];
            }
        }
        for (int64_t j = 0; j < cols; j++)
            d[j] += (T)acc[j];
    });
    free(acc);
    return LB_OK;
}

lb_status lb_k_matmul(const lb_tensor *a, int trans_a, const lb_tensor *b, int trans_b, lb_tensor *c,
                      double alpha, double beta)
{
    LB_CHECK_ARG(a, LB_ERR_VALUE);
    LB_CHECK_ARG(b, LB_ERR_VALUE);
    LB_CHECK_ARG(c, LB_ERR_VALUE);
    char s1[128], s2[128], s3[128];
    if (same_dtype("matmul", a, b) != LB_OK || same_dtype("matmul", a, c) != LB_OK)
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

void lb_k_softmax(const lb_tensor *x, lb_tensor *out, int log_softmax)
{
    LB_CHECK_ARG(x);
    LB_CHECK_ARG(out);
    int64_t cols = x->ndim ? x->shape[x->ndim - 1] : 1;
    int64_t rows = cols ? lb_tensor_numel(x) / cols : 0;
    LB_DISPATCH(x->dtype, T, {
        const T *px = lb_tensor_data(x);
        T *po = lb_tensor_data(out);
        for (int64_t r = 0; r < rows; r++) {
            const T *xr = px + r * cols;
            T *yr = po + r * cols;
            T mx = xr[0];
            for (int64_t j = 1; j < cols; j++)
                mx = xr[j] > mx ? xr[j] : mx;
            double sum = 0;
            for (int64_t j = 0; j < cols; j++)
                sum += exp((double)(xr[j] - mx));
            if (log_softmax) {
                T lse = (T)log(sum);
                for (int64_t j = 0; j < cols; j++)
                    yr[j] = xr[j] - mx - lse;
            } else {
                double inv = 1.0 / sum;
                for (int64_t j = 0; j < cols; j++)
                    yr[j] = (T)(exp((double)(xr[j] - mx)) * inv);
            }
        }
    });
}

double lb_k_sum_all(const lb_tensor *x)
{
    LB_CHECK_ARG(x, NAN);
    int64_t n = lb_tensor_numel(x);
    double acc = 0;
    LB_DISPATCH(x->dtype, T, {
        const T *p = lb_tensor_data(x);
        for (int64_t i = 0; i < n; i++)
            acc += p[i];
    });
    return acc;
}

int lb_k_all_finite(const lb_tensor *x)
{
    LB_CHECK_ARG(x, -1);
    int64_t n = lb_tensor_numel(x);
    int ok = 1;
    LB_DISPATCH(x->dtype, T, {
        const T *p = lb_tensor_data(x);
        for (int64_t i = 0; i < n; i++)
            ok &= isfinite(p[i]) ? 1 : 0;
    });
    return ok;
}

/* ---- GELU ---- */

#define LB_SQRT1_2 0.70710678118654752440
#define LB_INV_SQRT_2PI 0.39894228040143267794

/* In double: 0.5 x erfc(-x / sqrt 2), which keeps the relative precision of the tiny
 * results at negative x where 1 + erf(x / sqrt 2) cancels to 0. */
static double gelu_d(double x) { return 0.5 * x * erfc(-x * LB_SQRT1_2); }

static double gelu_grad_d(double x) { return 0.5 * erfc(-x * LB_SQRT1_2) + x * exp(-0.5 * x * x) * LB_INV_SQRT_2PI; }

#if defined(LB_HAVE_MVEC) && defined(__x86_64__)
/* glibc's libmvec under the x86-64 vector function ABI: 'e' = AVX-512 (16 floats in a
 * zmm register), 'd' = AVX2 (8 floats in a ymm register). */
typedef float lb_mv16 __attribute__((vector_size(64)));
typedef float lb_mv8 __attribute__((vector_size(32)));
lb_mv16 _ZGVeN16v_erfcf(lb_mv16);
lb_mv16 _ZGVeN16v_expf(lb_mv16);
lb_mv8 _ZGVdN8v_erfcf(lb_mv8);
lb_mv8 _ZGVdN8v_expf(lb_mv8);

/* x [n] -> y [n] (backward: dx [n] += dy [n] * gelu'(x)) on VF vectors of L lanes; the
 * last partial vector is padded with zeros, so every element goes through the vector
 * functions. */
/* Copies m floats (a whole vector when m == L: a constant size, inlined). */
#define LB_GELU_COPY(dst, src, m, L) memcpy(dst, src, ((m) == (L) ? (size_t)(L) : (size_t)(m)) * sizeof(float))
#define LB_GELU_LANES(name, target, VF, L, ERFC, EXP)                                                              \
    target static void name(int64_t n, const float *x, float *y, int residual, const float *dy, float *dx)        \
    {                                                                                                          \
        for (int64_t i = 0; i < n; i += L) {                                                                   \
            int m = n - i < L ? (int)(n - i) : L;                                                              \
            VF v = {0}, e, r;                                                                                  \
            LB_GELU_COPY(&v, x + i, m, L);                                                                     \
            e = ERFC(v * -(float)LB_SQRT1_2); /* erfc(-x / sqrt 2) = 2 Φ(x) */                                  \
            if (!dy) {                                                                                         \
                r = 0.5f * v * e;                                                                              \
                if (residual) {                                                                                \
                    VF old = {0};                                                                              \
                    LB_GELU_COPY(&old, y + i, m, L);                                                           \
                    r = old + r;                                                                               \
                }                                                                                              \
                LB_GELU_COPY(y + i, &r, m, L);                                                                 \
            } else {                                                                                           \
                VF g = {0}, acc = {0};                                                                         \
                LB_GELU_COPY(&g, dy + i, m, L);                                                                \
                LB_GELU_COPY(&acc, dx + i, m, L);                                                              \
                VF phi = EXP(-0.5f * v * v) * (float)LB_INV_SQRT_2PI;                                          \
                r = acc + g * (0.5f * e + v * phi);                                                            \
                LB_GELU_COPY(dx + i, &r, m, L);                                                                \
            }                                                                                                  \
        }                                                                                                      \
    }
LB_GELU_LANES(gelu_f16, __attribute__((target("avx512f"))), lb_mv16, 16, _ZGVeN16v_erfcf, _ZGVeN16v_expf)
LB_GELU_LANES(gelu_f8, __attribute__((target("avx2,fma"))), lb_mv8, 8, _ZGVdN8v_erfcf, _ZGVdN8v_expf)
#undef LB_GELU_LANES
#undef LB_GELU_COPY

typedef void (*gelu_lanes_fn)(int64_t, const float *, float *, int, const float *, float *);

/* The widest vector build this CPU runs, or NULL (the scalar double formula). */
static gelu_lanes_fn gelu_lanes(void)
{
    if (__builtin_cpu_supports("avx512f"))
        return gelu_f16;
    if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma"))
        return gelu_f8;
    return NULL;
}
#else
typedef void (*gelu_lanes_fn)(int64_t, const float *, float *, int, const float *, float *);
static gelu_lanes_fn gelu_lanes(void) { return NULL; }
#endif

/* Both directions: dy == NULL computes y (+)= gelu(x), else dx += dy * gelu'(x). Work in
 * blocks of 4,096 elements (a multiple of every vector width) over the threads. */
static lb_status gelu_run(const char *op, lb_dtype dtype, int64_t n, const void *x, void *y, int residual,
                          const void *dy, void *dx)
{
    if (n < 0)
        return lb_error(LB_ERR_VALUE, "%s: n = %lld is negative", op, (long long)n);
    if (dtype != LB_FLOAT32 && dtype != LB_FLOAT64)
        return lb_error(LB_ERR_VALUE, "%s: dtype must be float32 or float64", op);
    enum { BLOCK = 4096 };
    const int64_t blocks = (n + BLOCK - 1) / BLOCK;
    gelu_lanes_fn lanes = dtype == LB_FLOAT32 ? gelu_lanes() : NULL;
    int nt = lb_threads_for(n, BLOCK);
#pragma omp parallel for schedule(static) num_threads(nt) if (nt > 1)
    for (int64_t b = 0; b < blocks; b++) {
        int64_t lo = b * BLOCK, len = n - lo < BLOCK ? n - lo : BLOCK;
        if (lanes) {
            lanes(len, (const float *)x + lo, y ? (float *)y + lo : NULL, residual, dy ? (const float *)dy + lo : NULL,
                  dx ? (float *)dx + lo : NULL);
            continue;
        }
        LB_DISPATCH(dtype, T, {
            const T *px = (const T *)x + lo;
            if (!dy) {
                T *py = (T *)y + lo;
                for (int64_t i = 0; i < len; i++)
                    py[i] = residual ? py[i] + (T)gelu_d((double)px[i]) : (T)gelu_d((double)px[i]);
            } else {
                const T *pg = (const T *)dy + lo;
                T *pd = (T *)dx + lo;
                for (int64_t i = 0; i < len; i++)
                    pd[i] += pg[i] * (T)gelu_grad_d((double)px[i]);
            }
        });
    }
    return LB_OK;
}

lb_status lb_k_gelu(lb_dtype dtype, int64_t n, const void *x, void *y, int residual)
{
    LB_CHECK_ARG(x, LB_ERR_VALUE);
    LB_CHECK_ARG(y, LB_ERR_VALUE);
    return gelu_run(__func__, dtype, n, x, y, residual, NULL, NULL);
}

lb_status lb_k_gelu_backward(lb_dtype dtype, int64_t n, const void *x, const void *dy, void *dx)
{
    LB_CHECK_ARG(x, LB_ERR_VALUE);
    LB_CHECK_ARG(dy, LB_ERR_VALUE);
    LB_CHECK_ARG(dx, LB_ERR_VALUE);
    return gelu_run(__func__, dtype, n, x, NULL, 0, dy, dx);
}

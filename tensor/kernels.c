#include "tensor/kernels.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "tensor/strided_internal.h"
#include "tensor/threads.h"
#ifdef _OPENMP
#include <omp.h>
#endif

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
    if (lb_tensor_check_same_dtype(names[op], a, b) != LB_OK || lb_tensor_check_same_dtype(names[op], a, out) != LB_OK)
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
    if (lb_tensor_check_same_dtype("accumulate", dst, src) != LB_OK)
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

void lb_k_gemm_plain(lb_dtype dtype, int trans_a, int trans_b, int64_t m, int64_t n, int64_t k, double alpha,
                     const void *a, int64_t lda, const void *b, int64_t ldb, double beta, void *c, int64_t ldc)
{
    LB_CHECK_ARG(a);
    LB_CHECK_ARG(b);
    LB_CHECK_ARG(c);
    LB_DISPATCH(dtype, T, {
        const T *A = a, *B = b;
        T *C = c;
        for (int64_t i = 0; i < m; i++)
            for (int64_t j = 0; j < n; j++) {
                double sum = 0;
                for (int64_t l = 0; l < k; l++) {
                    double a_il = A[trans_a ? l * lda + i : i * lda + l]; /* op(a) [i, l] */
                    double b_lj = B[trans_b ? j * ldb + l : l * ldb + j]; /* op(b) [l, j] */
                    sum += a_il * b_lj;
                }
                double kept = beta == 0 ? 0 : beta * (double)C[i * ldc + j];
                C[i * ldc + j] = (T)(alpha * sum + kept);
            }
    });
}

/* Row movement for streaming state (kernels/stream.h). Named dims B, M, R, D. */
#include "kernels/stream.h"

#include <math.h>
#include <string.h>

#include "kernels/gemm.h"
#include "tensor/kernels.h"

lb_status lb_k_copy_rows(lb_tensor *dst, const int64_t *dst_row, const lb_tensor *src, const int64_t *src_row,
                         const int64_t *count)
{
    char sd[128], ss[128];
    int nd = dst ? dst->ndim : 0;
    int fits = dst && src && nd >= 3 && src->ndim == nd && dst->dtype == src->dtype && lb_tensor_is_contiguous(dst) &&
               lb_tensor_is_contiguous(src) && dst->shape[nd - 1] == src->shape[nd - 1];
    for (int d = 0; fits && d < nd - 2; d++)
        fits = dst->shape[d] == src->shape[d];
    if (!fits)
        return lb_error(LB_ERR_SHAPE, "copy_rows: dst %s and src %s must be contiguous [B, ..., R, D] of one dtype with "
                                      "the same B, middle dims and D",
                        dst ? lb_tensor_describe(dst, sd, sizeof sd) : "NULL",
                        src ? lb_tensor_describe(src, ss, sizeof ss) : "NULL");
    int64_t b = dst->shape[0], m = 1, rd = dst->shape[nd - 2], rs = src->shape[nd - 2], d = dst->shape[nd - 1];
    for (int i = 1; i < nd - 2; i++)
        m *= dst->shape[i];
    for (int64_t bi = 0; bi < b; bi++)
        if (count[bi] < 0 || dst_row[bi] < 0 || src_row[bi] < 0 || dst_row[bi] + count[bi] > rd ||
            src_row[bi] + count[bi] > rs)
            return lb_error(LB_ERR_VALUE, "copy_rows: stream %lld copies %lld rows from row %lld of src %s to row %lld of "
                                          "dst %s, outside their rows",
                            (long long)bi, (long long)count[bi], (long long)src_row[bi],
                            lb_tensor_describe(src, ss, sizeof ss), (long long)dst_row[bi],
                            lb_tensor_describe(dst, sd, sizeof sd));
    size_t es = lb_dtype_size(dst->dtype), row = (size_t)d * es;
    char *pd = lb_tensor_data(dst);
    const char *ps = lb_tensor_data(src);
    for (int64_t bi = 0; bi < b; bi++) {
        if (count[bi] == 0)
            continue;
        for (int64_t mi = 0; mi < m; mi++) {
            char *to = pd + ((size_t)((bi * m + mi) * rd + dst_row[bi])) * row;
            const char *from = ps + ((size_t)((bi * m + mi) * rs + src_row[bi])) * row;
            memmove(to, from, (size_t)count[bi] * row); /* [count, D] */
        }
    }
    return LB_OK;
}

/* ---- per-event kernels ---- */

void lb_k_affine_rows(lb_dtype dtype, int64_t N, int64_t n_in, int64_t n_out, const void *x, const void *w,
                      const void *bias, void *y)
{
    LB_CHECK_ARG(x);
    LB_CHECK_ARG(w);
    LB_CHECK_ARG(y);
    lb_k_gemm(dtype, 0, 0, N, n_out, n_in, 1.0, x, n_in, w, n_out, 0.0, y, n_out); /* [N, n_in] @ [n_in, n_out] */
    if (!bias)
        return;
    LB_DISPATCH(dtype, real, {
        const real *b = bias; /* [n_out] */
        real *py = y;         /* [N, n_out] */
        for (int64_t r = 0; r < N; r++)
            for (int64_t o = 0; o < n_out; o++)
                py[r * n_out + o] = py[r * n_out + o] + b[o];
    });
}

void lb_k_affine_rows_t(lb_dtype dtype, int64_t N, int64_t n_in, int64_t n_out, const void *x, const void *w,
                        const void *bias, void *y)
{
    LB_CHECK_ARG(x);
    LB_CHECK_ARG(w);
    LB_CHECK_ARG(y);
    lb_k_gemm(dtype, 0, 1, N, n_out, n_in, 1.0, x, n_in, w, n_in, 0.0, y, n_out); /* [N, n_in] @ [n_out, n_in]^T */
    if (!bias)
        return;
    LB_DISPATCH(dtype, real, {
        const real *b = bias; /* [n_out] */
        real *py = y;         /* [N, n_out] */
        for (int64_t r = 0; r < N; r++)
            for (int64_t o = 0; o < n_out; o++)
                py[r * n_out + o] = py[r * n_out + o] + b[o];
    });
}

void lb_k_layer_norm_rows(lb_dtype dtype, int64_t N, int64_t D, const void *x, const void *weight, const void *bias,
                          double eps, void *y)
{
    LB_CHECK_ARG(x);
    LB_CHECK_ARG(y);
    LB_DISPATCH(dtype, real, {
        const real *px = x, *pw = weight, *pb = bias; /* [N, D], [D], [D] */
        real *py = y;                                 /* [N, D] */
        for (int64_t r = 0; r < N; r++) {
            const real *xr = px + r * D;
            real *yr = py + r * D;
            double mu = 0, var = 0;
            for (int64_t j = 0; j < D; j++)
                mu += (double)xr[j];
            mu /= (double)D;
            for (int64_t j = 0; j < D; j++)
                var += ((double)xr[j] - mu) * ((double)xr[j] - mu);
            var /= (double)D;
            double rs = 1.0 / sqrt(var + eps);
            for (int64_t j = 0; j < D; j++) {
                double v = ((double)xr[j] - mu) * rs;
                if (pw)
                    v *= (double)pw[j];
                if (pb)
                    v += (double)pb[j];
                yr[j] = (real)v;
            }
        }
    });
}

void lb_k_rms_norm_rows(lb_dtype dtype, int64_t N, int64_t D, const void *x, const void *weight, double eps, void *y,
                        double *rstd)
{
    LB_CHECK_ARG(x);
    LB_CHECK_ARG(y);
    LB_DISPATCH(dtype, real, {
        const real *px = x, *pw = weight; /* [N, D], [D] */
        real *py = y;                     /* [N, D] */
        for (int64_t r = 0; r < N; r++) {
            const real *xr = px + r * D;
            real *yr = py + r * D;
            double ms = 0;
            for (int64_t j = 0; j < D; j++)
                ms += (double)xr[j] * (double)xr[j];
            double rs = 1.0 / sqrt(ms / (double)D + eps);
            for (int64_t j = 0; j < D; j++)
                yr[j] = (real)(pw ? (double)xr[j] * rs * (double)pw[j] : (double)xr[j] * rs);
            if (rstd)
                rstd[r] = rs;
        }
    });
}

void lb_k_conv1d_step(lb_dtype dtype, int64_t N, int64_t Ci, int64_t Co, int64_t K, int64_t d, const void *x,
                      const void *hist, const void *taps, const void *bias, void *y)
{
    LB_CHECK_ARG(x);
    LB_CHECK_ARG(taps);
    LB_CHECK_ARG(bias);
    LB_CHECK_ARG(y);
    LB_CHECK_ARG(hist || d * (K - 1) == 0);
    const size_t es = lb_dtype_size(dtype);
    const int64_t R = d * (K - 1);
    LB_DISPATCH(dtype, real, {
        const real *b = bias; /* [Co] */
        real *py = y;         /* [N, Co] */
        for (int64_t r = 0; r < N; r++)
            for (int64_t o = 0; o < Co; o++)
                py[r * Co + o] = b[o];
    });
    for (int64_t j = 0; j < K; j++) {
        const int64_t s = d * (K - 1 - j);
        const void *w = (const char *)taps + (size_t)(j * Ci * Co) * es; /* [Ci, Co] */
        if (s == 0) /* y [N, Co] += x [N, Ci] @ Wj */
            lb_k_gemm(dtype, 0, 0, N, Co, Ci, 1.0, x, Ci, w, Co, 1.0, y, Co);
        else /* y [N, Co] += hist[:, R - s] [N, Ci] (row stride R Ci) @ Wj */
            lb_k_gemm(dtype, 0, 0, N, Co, Ci, 1.0, (const char *)hist + (size_t)((R - s) * Ci) * es, R * Ci, w, Co,
                      1.0, y, Co);
    }
}

void lb_k_history_push(lb_dtype dtype, int64_t N, int64_t R, int64_t D, const void *src, const void *x,
                       const int64_t *push, void *dst)
{
    LB_CHECK_ARG(src || R <= 0);
    LB_CHECK_ARG(x || R <= 0);
    LB_CHECK_ARG(push || R <= 0);
    LB_CHECK_ARG(dst || R <= 0);
    if (R <= 0)
        return;
    const size_t row = (size_t)D * lb_dtype_size(dtype), per = (size_t)R * row;
    const char *ps = src, *px = x;
    char *pd = dst;
    for (int64_t b = 0; b < N; b++) {
        if (!push[b]) {
            memcpy(pd + (size_t)b * per, ps + (size_t)b * per, per);
            continue;
        }
        memcpy(pd + (size_t)b * per, ps + (size_t)b * per + row, per - row); /* rows 1 .. R-1 to 0 .. R-2 */
        memcpy(pd + (size_t)b * per + per - row, px + (size_t)b * row, row);  /* x to row R-1 */
    }
}

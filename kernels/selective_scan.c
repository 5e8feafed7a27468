/* The selective scan (kernels/selective_scan.h). Inside a stream the state is kept
 * transposed, hT [N, D], so that every inner loop runs over the D contiguous channels. */
#include "kernels/selective_scan.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "tensor/threads.h"

#ifdef _OPENMP
#include <omp.h>
#endif

/* torch.nn.functional.softplus (beta 1, threshold 20) and its derivative. */
static double softplus_d(double x) { return x > 20 ? x : log1p(exp(x)); }
static double softplus_grad_d(double x) { return x > 20 ? 1 : 1 / (1 + exp(-x)); }
static float softplus_f(float x) { return x > 20 ? x : log1pf(expf(x)); }
static float softplus_grad_f(float x) { return x > 20 ? 1 : 1 / (1 + expf(-x)); }

/* The chunk length of the backward's recomputation: ceil(sqrt(T)), at least 1. */
static int64_t chunk_steps(int64_t T)
{
    int64_t s = (int64_t)ceil(sqrt((double)T));
    return s < 1 ? 1 : s;
}

/* Defines, for element type R (suffix F, exp EXP, softplus SP, its derivative SPG):
 *   scan_F:   the forward of one stream b;
 *   scanbw_F: the backward of one stream b.
 * AT [N, D] is Aᵀ; work is the stream's scratch. */
#define LB_SCAN_DEFINE(R, F, EXP, SP, SPG)                                                                             \
    /* One step t of stream b: hT [N, D] advanced in place; y_t [D] written when y is non-NULL. */                 \
    static void step_##F(int64_t D, int64_t N, const R *u, const R *delta, const R *AT, const R *Bt, const R *Ct,     \
                         R *hT, R *dl, R *du, R *y)                                                                 \
    {                                                                                                              \
        for (int64_t d = 0; d < D; d++) {                                                                          \
            dl[d] = SP(delta[d]);                                                                                  \
            du[d] = dl[d] * u[d];                                                                                  \
            if (y)                                                                                                 \
                y[d] = 0;                                                                                          \
        }                                                                                                          \
        for (int64_t n = 0; n < N; n++) {                                                                          \
            R *h = hT + n * D;                                                                                     \
            const R *a = AT + n * D, bn = Bt[n], cn = Ct[n];                                                       \
            for (int64_t d = 0; d < D; d++)                                                                        \
                h[d] = EXP(dl[d] * a[d]) * h[d] + du[d] * bn;                                                      \
            if (y)                                                                                                 \
                for (int64_t d = 0; d < D; d++)                                                                    \
                    y[d] += cn * h[d];                                                                             \
        }                                                                                                          \
    }                                                                                                              \
    static void scan_##F(int64_t b, int64_t T, int64_t D, int64_t N, const R *u, const R *delta, const R *AT,       \
                         const R *Bm, const R *Cm, const R *h0, int64_t valid, R *h_last, R *y, R *work)           \
    {                                                                                                              \
        R *hT = work, *dl = hT + N * D, *du = dl + D;                                                              \
        for (int64_t d = 0; d < D; d++)                                                                            \
            for (int64_t n = 0; n < N; n++)                                                                        \
                hT[n * D + d] = h0 ? h0[(b * D + d) * N + n] : 0;                                                  \
        for (int64_t t = 0; t <= T; t++) {                                                                         \
            if (t == valid && h_last)                                                                              \
                for (int64_t d = 0; d < D; d++)                                                                    \
                    for (int64_t n = 0; n < N; n++)                                                                \
                        h_last[(b * D + d) * N + n] = hT[n * D + d];                                               \
            if (t == T)                                                                                            \
                break;                                                                                             \
            const int64_t r = b * T + t;                                                                           \
            step_##F(D, N, u + r * D, delta + r * D, AT, Bm + r * N, Cm + r * N, hT, dl, du, y + r * D);           \
        }                                                                                                          \
    }                                                                                                              \
    /* Scratch (elements): checkpoints (T / S + 1) N D, the chunk's states S N D, the carried gradient N D, four   \
     * rows of D. dAT [N, D] is this stream's own partial of dAᵀ. */                                               \
    static void scanbw_##F(int64_t b, int64_t T, int64_t D, int64_t N, const R *u, const R *delta, const R *AT,     \
                           const R *Bm, const R *Cm, const R *dy, R *du_out, R *ddelta, R *dAT, R *dB, R *dC,       \
                           R *work)                                                                                \
    {                                                                                                              \
        const int64_t S = chunk_steps(T), n_chunks = (T + S - 1) / S, ND = N * D;                                  \
        R *ckpt = work, *states = ckpt + (n_chunks + 1) * ND, *carry = states + S * ND;                            \
        R *dl = carry + ND, *dut = dl + D, *ddl = dut + D, *ubuf = ddl + D;                                        \
        /* pass 1: the state at the start of each chunk */                                                         \
        memset(ckpt, 0, (size_t)ND * sizeof(R));                                                                   \
        for (int64_t k = 1; k < n_chunks; k++) {                                                                   \
            memcpy(ckpt + k * ND, ckpt + (k - 1) * ND, (size_t)ND * sizeof(R));                                    \
            for (int64_t t = (k - 1) * S; t < k * S; t++) {                                                        \
                const int64_t r = b * T + t;                                                                       \
                step_##F(D, N, u + r * D, delta + r * D, AT, Bm + r * N, Cm + r * N, ckpt + k * ND, dl, ubuf,      \
                         NULL);                                                                                    \
            }                                                                                                      \
        }                                                                                                          \
        memset(carry, 0, (size_t)ND * sizeof(R));                                                                  \
        for (int64_t k = n_chunks - 1; k >= 0; k--) {                                                              \
            const int64_t t0 = k * S, t1 = t0 + S < T ? t0 + S : T;                                                \
            /* pass 2: the chunk's states, states[i] after step t0 + i */                                          \
            for (int64_t t = t0; t < t1; t++) {                                                                    \
                const int64_t r = b * T + t;                                                                       \
                R *h = states + (t - t0) * ND;                                                                     \
                memcpy(h, t == t0 ? ckpt + k * ND : h - ND, (size_t)ND * sizeof(R));                               \
                step_##F(D, N, u + r * D, delta + r * D, AT, Bm + r * N, Cm + r * N, h, dl, ubuf, NULL);           \
            }                                                                                                      \
            for (int64_t t = t1 - 1; t >= t0; t--) {                                                               \
                const int64_t r = b * T + t;                                                                       \
                const R *ut = u + r * D, *xt = delta + r * D, *g = dy + r * D, *Bt = Bm + r * N, *Ct = Cm + r * N; \
                const R *h = states + (t - t0) * ND, *hp = t == t0 ? ckpt + k * ND : h - ND;                       \
                for (int64_t d = 0; d < D; d++) {                                                                  \
                    dl[d] = SP(xt[d]);                                                                             \
                    dut[d] = 0;                                                                                    \
                    ddl[d] = 0;                                                                                    \
                }                                                                                                  \
                for (int64_t n = 0; n < N; n++) {                                                                  \
                    const R *a = AT + n * D, *hn = h + n * D, *hpn = hp + n * D, bn = Bt[n], cn = Ct[n];           \
                    R *c = carry + n * D, *da_n = dAT + n * D, sc = 0, sb = 0;                                     \
                    for (int64_t d = 0; d < D; d++) {                                                              \
                        sc += g[d] * hn[d];                               /* dC: y = Σ_n C h */                    \
                        const R dh = c[d] + g[d] * cn, e = EXP(dl[d] * a[d]), de = dh * hpn[d] * e;                \
                        ddl[d] += de * a[d] + dh * bn * ut[d];            /* h = e(Δ A) h' + Δ B u */              \
                        da_n[d] += de * dl[d];                                                                     \
                        sb += dh * dl[d] * ut[d];                                                                  \
                        dut[d] += dh * dl[d] * bn;                                                                 \
                        c[d] = dh * e;                                    /* to h' */                              \
                    }                                                                                              \
                    if (dC)                                                                                        \
                        dC[r * N + n] += sc;                                                                       \
                    if (dB)                                                                                        \
                        dB[r * N + n] += sb;                                                                       \
                }                                                                                                  \
                for (int64_t d = 0; d < D; d++) {                                                                  \
                    if (du_out)                                                                                    \
                        du_out[r * D + d] += dut[d];                                                               \
                    if (ddelta)                                                                                    \
                        ddelta[r * D + d] += ddl[d] * SPG(xt[d]);                                                  \
                }                                                                                                  \
            }                                                                                                      \
        }                                                                                                          \
    }
LB_SCAN_DEFINE(float, f, expf, softplus_f, softplus_grad_f)
LB_SCAN_DEFINE(double, d, exp, softplus_d, softplus_grad_d)
#undef LB_SCAN_DEFINE

static lb_status check(const char *what, lb_dtype dtype, int64_t B, int64_t T, int64_t D, int64_t N, int inputs_given)
{
    if (!inputs_given)
        return lb_error(LB_ERR_VALUE, "%s: an input (u, delta, A, Bm, Cm, y or dy) is NULL", what);
    if (dtype != LB_FLOAT32 && dtype != LB_FLOAT64)
        return lb_error(LB_ERR_VALUE, "%s: dtype %s is not float32 or float64", what, lb_dtype_name(dtype));
    if (B < 0 || T < 0 || D < 0 || N < 0)
        return lb_error(LB_ERR_VALUE, "%s: sizes B %lld, T %lld, D %lld, N %lld must be >= 0", what, (long long)B,
                        (long long)T, (long long)D, (long long)N);
    return LB_OK;
}

/* AT [N, D] = A [D, N] transposed, in a new buffer of `es`-byte elements (NULL when out of memory). */
static void *transposed(lb_dtype dtype, int64_t D, int64_t N, const void *A)
{
    const size_t es = lb_dtype_size(dtype);
    char *at = malloc((size_t)(N * D) * es + 1);
    if (at)
        for (int64_t d = 0; d < D; d++)
            for (int64_t n = 0; n < N; n++)
                memcpy(at + (size_t)(n * D + d) * es, (const char *)A + (size_t)(d * N + n) * es, es);
    return at;
}

lb_status lb_k_selective_scan(lb_dtype dtype, int64_t B, int64_t T, int64_t D, int64_t N, const void *u,
                              const void *delta, const void *A, const void *Bm, const void *Cm, const void *h0,
                              const int64_t *valid, void *h_last, void *y)
{
    if (check("selective scan", dtype, B, T, D, N, u && delta && A && Bm && Cm && y) != LB_OK)
        return lb_last_status();
    const size_t es = lb_dtype_size(dtype);
    const int64_t per = N * D + 2 * D;
    const int nth = lb_threads_for(B, 1);
    void *at = transposed(dtype, D, N, A);
    char *work = malloc((size_t)(nth * per) * es + 1);
    if (!at || !work) {
        free(at);
        free(work);
        return lb_error(LB_ERR_MEMORY, "selective scan: out of memory for [%lld, %lld] states", (long long)N,
                        (long long)D);
    }
#pragma omp parallel for num_threads(nth) schedule(static) if (nth > 1)
    for (int64_t b = 0; b < B; b++) {
        int th = 0;
#ifdef _OPENMP
        th = omp_get_thread_num();
#endif
        const int64_t v = valid ? valid[b] : T;
        if (dtype == LB_FLOAT32)
            scan_f(b, T, D, N, u, delta, at, Bm, Cm, h0, v, h_last, y, (float *)work + th * per);
        else
            scan_d(b, T, D, N, u, delta, at, Bm, Cm, h0, v, h_last, y, (double *)work + th * per);
    }
    free(at);
    free(work);
    return LB_OK;
}

lb_status lb_k_selective_scan_backward(lb_dtype dtype, int64_t B, int64_t T, int64_t D, int64_t N, const void *u,
                                       const void *delta, const void *A, const void *Bm, const void *Cm,
                                       const void *dy, void *du, void *ddelta, void *dA, void *dB, void *dC)
{
    if (check("selective scan backward", dtype, B, T, D, N, u && delta && A && Bm && Cm && dy) != LB_OK)
        return lb_last_status();
    const size_t es = lb_dtype_size(dtype);
    const int64_t S = chunk_steps(T), ND = N * D, per = ((T + S - 1) / S + 1 + S + 1) * ND + 4 * D;
    const int nth = lb_threads_for(B, 1);
    void *at = transposed(dtype, D, N, A);
    char *work = malloc((size_t)(nth * per) * es + 1);
    char *dat = calloc((size_t)(B * ND) + 1, es); /* [B, N, D]: each stream's dAᵀ, summed in order after */
    if (!at || !work || !dat) {
        free(at);
        free(work);
        free(dat);
        return lb_error(LB_ERR_MEMORY, "selective scan backward: out of memory for the recomputed [%lld, %lld] states",
                        (long long)N, (long long)D);
    }
#pragma omp parallel for num_threads(nth) schedule(static) if (nth > 1)
    for (int64_t b = 0; b < B; b++) {
        int th = 0;
#ifdef _OPENMP
        th = omp_get_thread_num();
#endif
        if (dtype == LB_FLOAT32)
            scanbw_f(b, T, D, N, u, delta, at, Bm, Cm, dy, du, ddelta, (float *)dat + b * ND, dB, dC,
                     (float *)work + th * per);
        else
            scanbw_d(b, T, D, N, u, delta, at, Bm, Cm, dy, du, ddelta, (double *)dat + b * ND, dB, dC,
                     (double *)work + th * per);
    }
    for (int64_t b = 0; dA && b < B; b++)
        for (int64_t d = 0; d < D; d++)
            for (int64_t n = 0; n < N; n++) {
                const int64_t i = b * ND + n * D + d, o = d * N + n;
                if (dtype == LB_FLOAT32)
                    ((float *)dA)[o] += ((float *)dat)[i];
                else
                    ((double *)dA)[o] += ((double *)dat)[i];
            }
    free(at);
    free(work);
    free(dat);
    return LB_OK;
}

/* Causal linear attention (kernels/linear_attention.h). Named dims as there; E = Dv + 1
 * the augmented value width (the last column carries the denominator). */
#include "kernels/linear_attention.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#ifdef _OPENMP
#include <omp.h>
#endif

#include "tensor/threads.h"

/* φ(x) = elu(x) + 1 and its derivative. */
static double phi(double x) { return x > 0 ? x + 1.0 : exp(x); }
static double dphi(double x) { return x > 0 ? 1.0 : exp(x); }

/* Rows [n, w] of a float32 or float64 buffer at row offset r0 into double dst, through f
 * (NULL: copied). */
static void load_rows(lb_dtype dt, const void *src, int64_t r0, int64_t n, int64_t w, double (*f)(double), double *dst)
{
    LB_DISPATCH(dt, T, {
        const T *p = (const T *)src + r0 * w;
        for (int64_t i = 0; i < n * w; i++)
            dst[i] = f ? f((double)p[i]) : (double)p[i];
    });
}

/* v rows [n, Dv] into augmented rows [n, E] with a last column of 1. */
static void load_values(lb_dtype dt, const void *v, int64_t r0, int64_t n, int64_t Dv, double *dst)
{
    const int64_t E = Dv + 1;
    LB_DISPATCH(dt, T, {
        const T *p = (const T *)v + r0 * Dv;
        for (int64_t i = 0; i < n; i++) {
            for (int64_t j = 0; j < Dv; j++)
                dst[i * E + j] = (double)p[i * Dv + j];
            dst[i * E + Dv] = 1.0;
        }
    });
}

/* y [n] += a x [n]. */
static void axpy(int64_t n, double a, const double *x, double *y)
{
    for (int64_t j = 0; j < n; j++)
        y[j] += a * x[j];
}

static double dot(int64_t n, const double *a, const double *b)
{
    double s = 0;
    for (int64_t j = 0; j < n; j++)
        s += a[j] * b[j];
    return s;
}

/* S [Dk, E] = g S + φk [Dk] ⊗ v' [E]. */
static void state_update(int64_t Dk, int64_t E, double g, const double *fk, const double *vrow, double *S)
{
    for (int64_t a = 0; a < Dk; a++) {
        double *row = S + a * E;
        if (g != 1.0)
            for (int64_t j = 0; j < E; j++)
                row[j] *= g;
        axpy(E, fk[a], vrow, row);
    }
}

/* out [E] = φq [Dk]ᵀ S [Dk, E] (scaled by s), added. */
static void state_read(int64_t Dk, int64_t E, double s, const double *fq, const double *S, double *out)
{
    for (int64_t a = 0; a < Dk; a++)
        axpy(E, s * fq[a], S + a * E, out);
}

/* y row [Dv] and den from an augmented output row [E]. */
static void store_output(lb_dtype dt, const double *o, int64_t Dv, void *y, int64_t row, void *den)
{
    double d = o[Dv] + LB_LINEAR_ATTENTION_EPS;
    LB_DISPATCH(dt, T, {
        T *py = (T *)y + row * Dv;
        for (int64_t j = 0; j < Dv; j++)
            py[j] = (T)(o[j] / d);
        ((T *)den)[row] = (T)d;
    });
}

/* Work buffers of one (b, h) pair, in doubles. */
typedef struct la_work {
    double *fq, *fk, *vv, *out, *S, *pow;
} la_work;

static int work_alloc(la_work *w, int64_t rows, int64_t Dk, int64_t E, int64_t C)
{
    w->fq = malloc((size_t)(rows * Dk) * sizeof(double));
    w->fk = malloc((size_t)(rows * Dk) * sizeof(double));
    w->vv = malloc((size_t)(rows * E) * sizeof(double));
    w->out = malloc((size_t)E * sizeof(double));
    w->S = malloc((size_t)(Dk * E) * sizeof(double));
    w->pow = malloc((size_t)(C + 1) * sizeof(double));
    return w->fq && w->fk && w->vv && w->out && w->S && w->pow;
}

static void work_free(la_work *w)
{
    free(w->fq);
    free(w->fk);
    free(w->vv);
    free(w->out);
    free(w->S);
    free(w->pow);
}

/* One (b, h) sequence from a zero state, chunk by chunk: rows r0 .. r0 + T of q, k, v. */
static void forward_chunked(lb_dtype dt, int64_t T, int64_t Dk, int64_t Dv, double g, const void *q, const void *k,
                            const void *v, int64_t r0, void *y, void *den, la_work *w)
{
    const int64_t E = Dv + 1, C = LB_LINEAR_ATTENTION_CHUNK;
    memset(w->S, 0, (size_t)(Dk * E) * sizeof(double));
    w->pow[0] = 1.0;
    for (int64_t i = 1; i <= C; i++)
        w->pow[i] = w->pow[i - 1] * g;
    for (int64_t c0 = 0; c0 < T; c0 += C) {
        const int64_t n = T - c0 < C ? T - c0 : C;
        load_rows(dt, q, r0 + c0, n, Dk, phi, w->fq);
        load_rows(dt, k, r0 + c0, n, Dk, phi, w->fk);
        load_values(dt, v, r0 + c0, n, Dv, w->vv);
        for (int64_t i = 0; i < n; i++) {
            const double *fq = w->fq + i * Dk;
            memset(w->out, 0, (size_t)E * sizeof(double));
            state_read(Dk, E, w->pow[i + 1], fq, w->S, w->out); /* the chunks before */
            for (int64_t j = 0; j <= i; j++)                    /* this chunk, causal */
                axpy(E, w->pow[i - j] * dot(Dk, fq, w->fk + j * Dk), w->vv + j * E, w->out);
            store_output(dt, w->out, Dv, y, r0 + c0 + i, den);
        }
        for (int64_t j = 0; j < n; j++) /* S = γ^n S + Σ_j γ^(n-1-j) φk_j v'_jᵀ, row by row */
            state_update(Dk, E, g, w->fk + j * Dk, w->vv + j * E, w->S);
    }
}

/* One (b, h) sequence from a carried state [Dk, E] (model dtype), position by position;
 * the state after `keep` positions is written back. */
static void forward_recurrent(lb_dtype dt, int64_t T, int64_t Dk, int64_t Dv, double g, const void *q, const void *k,
                              const void *v, int64_t r0, void *y, void *den, void *state, int64_t keep, la_work *w)
{
    const int64_t E = Dv + 1;
    load_rows(dt, state, 0, Dk, E, NULL, w->S);
    for (int64_t i = 0; i < T; i++) {
        load_rows(dt, q, r0 + i, 1, Dk, phi, w->fq);
        load_rows(dt, k, r0 + i, 1, Dk, phi, w->fk);
        load_values(dt, v, r0 + i, 1, Dv, w->vv);
        state_update(Dk, E, g, w->fk, w->vv, w->S);
        memset(w->out, 0, (size_t)E * sizeof(double));
        state_read(Dk, E, 1.0, w->fq, w->S, w->out);
        store_output(dt, w->out, Dv, y, r0 + i, den);
        if (i + 1 == keep)
            LB_DISPATCH(dt, TT, {
                TT *ps = state;
                for (int64_t j = 0; j < Dk * E; j++)
                    ps[j] = (TT)w->S[j];
            });
    }
}

/* LB_OK when the sizes are at least 1 and the buffers are given. */
static lb_status check_args(const char *fn, int64_t B, int64_t H, int64_t T, int64_t Dk, int64_t Dv, const void *q,
                            const void *k, const void *v, const void *y, const void *den)
{
    if (!q || !k || !v || !y || !den)
        return lb_error(LB_ERR_VALUE, "%s: a buffer (q, k, v, y or den) is NULL", fn);
    if (B < 1 || H < 1 || T < 1 || Dk < 1 || Dv < 1)
        return lb_error(LB_ERR_VALUE, "%s: B %lld, H %lld, T %lld, d_k %lld and d_v %lld must be at least 1", fn,
                        (long long)B, (long long)H, (long long)T, (long long)Dk, (long long)Dv);
    return LB_OK;
}

lb_status lb_k_linear_attention_forward(lb_dtype dtype, int64_t B, int64_t H, int64_t T, int64_t Dk, int64_t Dv,
                                        const double *gamma, const void *q, const void *k, const void *v, void *y,
                                        void *den, void *state, const int64_t *valid)
{
    if (check_args("lb_k_linear_attention_forward", B, H, T, Dk, Dv, q, k, v, y, den) != LB_OK)
        return lb_last_status();
    const int64_t E = Dv + 1, pairs = B * H, es = (int64_t)lb_dtype_size(dtype);
    int failed = 0;
    int nth = lb_threads_for(pairs * T * Dk * E, LB_GRAIN_ELEMENTS);
    if (nth > pairs)
        nth = (int)pairs;
#pragma omp parallel num_threads(nth) if (nth > 1)
    {
        la_work w;
        int ok = work_alloc(&w, state ? 1 : LB_LINEAR_ATTENTION_CHUNK, Dk, E, LB_LINEAR_ATTENTION_CHUNK);
        if (!ok) {
#pragma omp atomic write
            failed = 1;
        }
#pragma omp for schedule(static)
        for (int64_t p = 0; p < pairs; p++) {
            if (!ok)
                continue;
            const double g = gamma ? gamma[p % H] : 1.0;
            if (state) {
                int64_t keep = valid ? valid[p / H] : T;
                forward_recurrent(dtype, T, Dk, Dv, g, q, k, v, p * T, y, den, (char *)state + p * Dk * E * es, keep,
                                  &w);
            } else {
                forward_chunked(dtype, T, Dk, Dv, g, q, k, v, p * T, y, den, &w);
            }
        }
        work_free(&w);
    }
    return failed ? lb_error(LB_ERR_MEMORY, "linear attention: out of memory for the work rows") : LB_OK;
}

lb_status lb_k_linear_attention_backward(lb_dtype dtype, int64_t B, int64_t H, int64_t T, int64_t Dk, int64_t Dv,
                                         const double *gamma, const void *q, const void *k, const void *v,
                                         const void *y, const void *den, const void *dy, void *dq, void *dk, void *dv)
{
    if (check_args("lb_k_linear_attention_backward", B, H, T, Dk, Dv, q, k, v, y, den) != LB_OK)
        return lb_last_status();
    if (!dy)
        return lb_error(LB_ERR_VALUE, "lb_k_linear_attention_backward: dy is NULL");
    const int64_t E = Dv + 1, pairs = B * H;
    int failed = 0;
    int nth = lb_threads_for(pairs * T * Dk * E, LB_GRAIN_ELEMENTS);
    if (nth > pairs)
        nth = (int)pairs;
#pragma omp parallel num_threads(nth) if (nth > 1)
    {
        /* per pair: φq, φk [T, Dk], v' [T, E], g' [T, E] (dy / den, -(dy·y) / den), a state */
        double *fq = malloc((size_t)(T * Dk) * sizeof(double)), *fk = malloc((size_t)(T * Dk) * sizeof(double));
        double *vv = malloc((size_t)(T * E) * sizeof(double)), *gg = malloc((size_t)(T * E) * sizeof(double));
        double *S = malloc((size_t)(Dk * E) * sizeof(double)), *row = malloc((size_t)(Dk > E ? Dk : E) * sizeof(double));
        double *yy = malloc((size_t)Dv * sizeof(double));
        int ok = fq && fk && vv && gg && S && row && yy;
        if (!ok) {
#pragma omp atomic write
            failed = 1;
        }
#pragma omp for schedule(static)
        for (int64_t p = 0; p < pairs; p++) {
            if (!ok)
                continue;
            const double g = gamma ? gamma[p % H] : 1.0;
            const int64_t r0 = p * T;
            load_rows(dtype, q, r0, T, Dk, phi, fq);
            load_rows(dtype, k, r0, T, Dk, phi, fk);
            load_values(dtype, v, r0, T, Dv, vv);
            for (int64_t i = 0; i < T; i++) { /* g'_i = [dy_i / den_i, -(dy_i · y_i) / den_i] */
                double d = 0;
                load_rows(dtype, den, r0 + i, 1, 1, NULL, &d);
                load_rows(dtype, dy, r0 + i, 1, Dv, NULL, gg + i * E);
                load_rows(dtype, y, r0 + i, 1, Dv, NULL, yy);
                gg[i * E + Dv] = -dot(Dv, gg + i * E, yy) / d;
                for (int64_t j = 0; j < Dv; j++)
                    gg[i * E + j] /= d;
            }
            /* forward sweep: S_i = γ S_{i-1} + φk_i v'_iᵀ;  dφq_i = S_i g'_i */
            memset(S, 0, (size_t)(Dk * E) * sizeof(double));
            for (int64_t i = 0; dq && i < T; i++) {
                state_update(Dk, E, g, fk + i * Dk, vv + i * E, S);
                LB_DISPATCH(dtype, TT, {
                    TT *out = (TT *)dq + (r0 + i) * Dk;
                    const TT *qi = (const TT *)q + (r0 + i) * Dk;
                    for (int64_t a = 0; a < Dk; a++)
                        out[a] += (TT)(dot(E, S + a * E, gg + i * E) * dphi((double)qi[a]));
                });
            }
            /* reverse sweep: R_j = γ R_{j+1} + φq_j g'_jᵀ;  dφk_j = R_j v'_j;  dv_j = (R_jᵀ φk_j)[:Dv] */
            memset(S, 0, (size_t)(Dk * E) * sizeof(double));
            for (int64_t j = T - 1; j >= 0; j--) {
                state_update(Dk, E, g, fq + j * Dk, gg + j * E, S);
                LB_DISPATCH(dtype, TT, {
                    if (dk) {
                        TT *out = (TT *)dk + (r0 + j) * Dk;
                        const TT *kj = (const TT *)k + (r0 + j) * Dk;
                        for (int64_t a = 0; a < Dk; a++)
                            out[a] += (TT)(dot(E, S + a * E, vv + j * E) * dphi((double)kj[a]));
                    }
                    if (dv) {
                        memset(row, 0, (size_t)E * sizeof(double));
                        state_read(Dk, E, 1.0, fk + j * Dk, S, row);
                        TT *out = (TT *)dv + (r0 + j) * Dv;
                        for (int64_t c = 0; c < Dv; c++)
                            out[c] += (TT)row[c];
                    }
                });
            }
        }
        free(fq);
        free(fk);
        free(vv);
        free(gg);
        free(S);
        free(row);
        free(yy);
    }
    return failed ? lb_error(LB_ERR_MEMORY, "linear attention backward: out of memory for the work rows") : LB_OK;
}

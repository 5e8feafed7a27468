#include "kernels/gelu.h"

#include <math.h>
#include <string.h>

#include "tensor/isa.h"
#include "tensor/threads.h"

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
/* Copies m floats: a whole vector when m == L, a constant size that compiles to one
 * vector move (a size chosen by ?: inside memcpy's argument is not constant, and would
 * call the library's memmove for every vector). */
#define LB_GELU_COPY(dst, src, m, L)                                                                             \
    do {                                                                                                       \
        if ((m) == (L))                                                                                        \
            memcpy(dst, src, (size_t)(L) * sizeof(float));                                                     \
        else                                                                                                   \
            memcpy(dst, src, (size_t)(m) * sizeof(float));                                                     \
    } while (0)
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

/* The chosen build's vectors (tensor/isa.h), or NULL (the scalar double formula). */
static gelu_lanes_fn gelu_lanes(void)
{
    switch (lb_isa()) {
    case LB_BUILD_AVX512:
        return gelu_f16;
    case LB_BUILD_AVX2:
        return gelu_f8;
    default:
        return NULL;
    }
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

/* sigmoid without overflow at either end */
static double sigmoid_d(double a) { return a >= 0 ? 1.0 / (1.0 + exp(-a)) : exp(a) / (1.0 + exp(a)); }

/* act(a) and, when grad is not NULL, act'(a) into *grad. */
static double glu_act(lb_glu_act act, double a, double *grad)
{
    if (act == LB_GLU_GELU) {
        if (grad)
            *grad = gelu_grad_d(a);
        return gelu_d(a);
    }
    double s = sigmoid_d(a);
    if (grad)
        *grad = s + a * s * (1.0 - s);
    return a * s;
}

/* Both directions: dy == NULL computes y = act(a) b, else dx += [dy b act'(a), dy act(a)]. */
static lb_status glu_run(const char *op, lb_dtype dtype, lb_glu_act act, int64_t N, int64_t H, const void *x,
                         void *y, const void *dy, void *dx)
{
    if (N < 0 || H < 0)
        return lb_error(LB_ERR_VALUE, "%s: N = %lld and H = %lld must be >= 0", op, (long long)N, (long long)H);
    if (dtype != LB_FLOAT32 && dtype != LB_FLOAT64)
        return lb_error(LB_ERR_VALUE, "%s: dtype must be float32 or float64", op);
    if (act != LB_GLU_SILU && act != LB_GLU_GELU)
        return lb_error(LB_ERR_VALUE, "%s: act = %d is neither silu nor gelu", op, (int)act);
    int nt = lb_threads_for(N * H, 4096);
    LB_DISPATCH(dtype, T, {
        _Pragma("omp parallel for schedule(static) num_threads(nt) if (nt > 1)")
        for (int64_t r = 0; r < N; r++) {
            const T *a = (const T *)x + r * 2 * H, *b = a + H;
            if (!dy) {
                T *yr = (T *)y + r * H;
                for (int64_t j = 0; j < H; j++)
                    yr[j] = (T)(glu_act(act, (double)a[j], NULL) * (double)b[j]);
            } else {
                const T *g = (const T *)dy + r * H;
                T *da = (T *)dx + r * 2 * H, *db = da + H;
                for (int64_t j = 0; j < H; j++) {
                    double grad, v = glu_act(act, (double)a[j], &grad);
                    da[j] += (T)((double)g[j] * (double)b[j] * grad);
                    db[j] += (T)((double)g[j] * v);
                }
            }
        }
    });
    return LB_OK;
}

lb_status lb_k_glu(lb_dtype dtype, lb_glu_act act, int64_t N, int64_t H, const void *x, void *y)
{
    LB_CHECK_ARG(x, LB_ERR_VALUE);
    LB_CHECK_ARG(y, LB_ERR_VALUE);
    return glu_run(__func__, dtype, act, N, H, x, y, NULL, NULL);
}

lb_status lb_k_glu_backward(lb_dtype dtype, lb_glu_act act, int64_t N, int64_t H, const void *x, const void *dy,
                            void *dx)
{
    LB_CHECK_ARG(x, LB_ERR_VALUE);
    LB_CHECK_ARG(dy, LB_ERR_VALUE);
    LB_CHECK_ARG(dx, LB_ERR_VALUE);
    return glu_run(__func__, dtype, act, N, H, x, NULL, dy, dx);
}

/* Fused exact attention (FlashAttention-2 scheme). Named dims and the algorithm are
 * described in kernels/attention.h: L leading dims, N = prod(L) heads, Tq, Tk, D, Dv;
 * BQ x BK tiles; r a row of a tile (query i0 + r), c a column (key j0 + c). */
#include "kernels/attention.h"

#include <cblas.h>
#include <limits.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#ifdef _OPENMP
#include <omp.h>
#endif

#include "kernels/gemm.h"
#include "kernels/tile_gemm_internal.h"
#include "tensor/isa.h"
#include "tensor/kernels.h"
#include "tensor/pool.h"
#include "tensor/threads.h"

/* A kernel's temporary buffer, taken from the calling thread's buffer pool when it has
 * one (tensor/pool.h): inside a training step the packed keys and the tile buffers then
 * reuse the previous step's memory instead of faulting in fresh pages every call. */
typedef struct scratch {
    void *data;
    lb_pool *owner;
    size_t capacity;
} scratch;

/* nbytes of scratch (none for 0); 0 on success, -1 when out of memory. */
static int scratch_take(scratch *s, size_t nbytes)
{
    *s = (scratch){0};
    if (nbytes == 0)
        return 0;
    s->data = lb_pool_take(nbytes, 0, &s->owner, &s->capacity);
    return s->data ? 0 : -1;
}

static void scratch_give(scratch *s)
{
    if (s->data)
        lb_pool_give(s->owner, s->data, s->capacity);
    *s = (scratch){0};
}

/* Tile sizes (rows = queries, columns = keys). */
#ifndef LB_ATTN_FWD_BQ
#define LB_ATTN_FWD_BQ 128
#endif
#ifndef LB_ATTN_FWD_BK
#define LB_ATTN_FWD_BK 128
#endif
#ifndef LB_ATTN_BWD_BQ
#define LB_ATTN_BWD_BQ 64
#endif
#ifndef LB_ATTN_BWD_BK
#define LB_ATTN_BWD_BK 128
#endif
/* Band tiles (a sliding window narrower than LB_ATTN_BAND_MAX keys): square tiles of
 * the window rounded up to a multiple of LB_ATTN_BAND_MIN (see choose_tiles). */
#ifndef LB_ATTN_BAND_MIN
#define LB_ATTN_BAND_MIN 16
#endif
#define LB_ATTN_BAND_MAX 64
/* float32 problems with at least this many queries run their tile products on the
 * micro-kernel over packed Kᵀ (and Vᵀ); fewer queries (a decoding step) would not repay
 * packing every key, and keep OpenBLAS's gemv/gemm on K and V as stored. */
#ifndef LB_ATTN_PACK_MIN_TQ
#define LB_ATTN_PACK_MIN_TQ 8
#endif
/* The backward makes at least this many work items when the shapes allow (see G). */
#define LB_ATTN_BWD_ITEMS 8

#if defined(__GNUC__) && defined(__x86_64__)
#define LB_ATTN_X86 1
#define LB_INLINE static inline __attribute__((always_inline))
#else
#define LB_INLINE static inline
#endif

/* ---- the problem and one head of it ---- */

typedef struct attn_problem {
    lb_dtype dtype;
    size_t es;                   /* bytes per element */
    int n_lead;                  /* number of leading dims L */
    int64_t lead[LB_MAX_DIMS];   /* L */
    int64_t heads;               /* N = prod(L) */
    int64_t kv_group;            /* query heads per key/value head (H / Hkv; 1 without grouping) */
    int64_t kv_heads;            /* Nkv = N / kv_group */
    int64_t tq, tk, d, dv;
    double scale;
    const char *q, *k, *v;       /* [N, Tq, D], [Nkv, Tk, D], [Nkv, Tk, Dv] */
    lb_attn_kmask mask;          /* zeroed when none */
    int64_t fbq, fbk, bbq, bbk;  /* tiles, queries x keys: forward, backward (choose_tiles) */
    /* uses_micro_kernel (float32, Tq >= LB_ATTN_PACK_MIN_TQ, an AVX-512 or AVX2 build):
     * the tile products run on the micro-kernel (kernels/attention_gemm_internal.h) and
     * read each head's keys (and, in the backward, values) transposed, packed once per
     * call; NULL otherwise (OpenBLAS per tile). */
    const float *kt, *vt;        /* [Nkv, D, ldt], [Nkv, Dv, ldt]: kt[(n * D + c) * ldt + j] = k[n, j, c] */
    int64_t ldt;                 /* row stride of the packed rows, >= Tk (see pack_transposed) */
} attn_problem;

/* The default tiles, or band tiles for a narrow sliding window: a query tile of bq
 * rows sees bq + window - 1 keys, so with 128-row tiles a 16-key window would use one
 * score in 9 (and a window straddling two 128-key tiles one in 16). Band tiles of
 * about the window's width keep about half the computed scores inside the band.
 * The forward's key tiles stay wide: one gemm covers a band tile's whole key range. */
static void choose_tiles(attn_problem *p)
{
    p->fbq = LB_ATTN_FWD_BQ;
    p->fbk = LB_ATTN_FWD_BK;
    p->bbq = LB_ATTN_BWD_BQ;
    p->bbk = LB_ATTN_BWD_BK;
    int64_t w = p->mask.window;
    if (w > 0 && w < LB_ATTN_BAND_MAX) {
        int64_t band = (w + LB_ATTN_BAND_MIN - 1) / LB_ATTN_BAND_MIN * LB_ATTN_BAND_MIN; /* <= 64 */
        p->fbq = p->bbq = p->bbk = band;
    }
}

typedef struct attn_head {
    int64_t kv_len;              /* keys >= kv_len are padding */
    int64_t align;               /* pos(i) = i + align without query positions */
    int structural;              /* causal or window: keys after pos(i) are masked */
    const int32_t *qpos;         /* [Tq] or NULL */
    const unsigned char *allowed; /* at [i, j]: allowed[i * al_q + j * al_k] */
    int64_t al_q, al_k;
    const char *additive;        /* at [i, j]: additive[(i * ad_q + j * ad_k) * es] */
    int64_t ad_q, ad_k;
    int alibi;                   /* ALiBi on: S[i, j] += -slope |pos(i) - j| */
    double slope;                /* the head's ALiBi slope m_h */
    int64_t kv;                  /* the key/value head this query head reads */
} attn_head;

static void head_of(const attn_problem *p, int64_t n, attn_head *h)
{
    const lb_attn_kmask *m = &p->mask;
    int64_t idx[LB_MAX_DIMS], rem = n;
    for (int d = p->n_lead - 1; d >= 0; d--) {
        idx[d] = rem % p->lead[d];
        rem /= p->lead[d];
    }
    int64_t b = p->n_lead ? idx[0] : 0;
    h->kv_len = m->key_lengths ? m->key_lengths[b] : p->tk;
    h->align = p->tk - p->tq;
    h->structural = m->causal || m->window > 0;
    h->qpos = m->query_positions ? m->query_positions + b * p->tq : NULL;
    int64_t oa = 0, od = 0;
    for (int d = 0; d < p->n_lead; d++) {
        oa += idx[d] * m->allowed_strides[d];
        od += idx[d] * m->additive_strides[d];
    }
    int nq = p->n_lead, nk = p->n_lead + 1;
    h->allowed = m->allowed ? m->allowed + oa : NULL;
    h->al_q = m->allowed_strides[nq];
    h->al_k = m->allowed_strides[nk];
    h->additive = m->additive ? (const char *)m->additive + (size_t)od * p->es : NULL;
    h->ad_q = m->additive_strides[nq];
    h->ad_k = m->additive_strides[nk];
    h->alibi = m->alibi_slopes != NULL;
    h->slope = h->alibi ? m->alibi_slopes[p->n_lead ? idx[p->n_lead - 1] : 0] : 0.0;
    h->kv = n / p->kv_group;
}

/* Keys [*lo, *hi] that query i may see by the structural limits (causal, window,
 * padding); *lo > *hi when none. */
LB_INLINE void key_range(const attn_problem *p, const attn_head *h, int64_t i, int64_t *lo, int64_t *hi)
{
    int64_t l = 0, u = h->kv_len - 1;
    if (h->structural) {
        int64_t pos = h->qpos ? (int64_t)h->qpos[i] : i + h->align;
        if (pos < u)
            u = pos;
        if (p->mask.window > 0 && pos - p->mask.window + 1 > l)
            l = pos - p->mask.window + 1;
    }
    *lo = l;
    *hi = u;
}

/* Over the queries [i0, i0 + bq): the union [lo, hi] of their key ranges (lo > hi
 * when every row is empty) and the intersection [full_lo, full_hi] (keys every row may
 * see by structure; empty when any row is empty). */
typedef struct tile_range {
    int64_t lo, hi, full_lo, full_hi;
} tile_range;

static tile_range query_tile_range(const attn_problem *p, const attn_head *h, int64_t i0, int64_t bq)
{
    tile_range t = {INT64_MAX, -1, 0, INT64_MAX};
    for (int64_t r = 0; r < bq; r++) {
        int64_t lo, hi;
        key_range(p, h, i0 + r, &lo, &hi);
        if (lo > t.full_lo)
            t.full_lo = lo;
        if (hi < t.full_hi)
            t.full_hi = hi;
        if (lo > hi)
            continue;
        if (lo < t.lo)
            t.lo = lo;
        if (hi > t.hi)
            t.hi = hi;
    }
    return t;
}

/* The micro-kernel products on a tile that the structural limits cut (a causal diagonal
 * tile) run in row groups of this many queries, each over the key columns some of its
 * rows may see, and the backward's dV and dK in groups of this many keys, each over the
 * query rows that may see one of them. */
#define LB_ATTN_ROW_GROUP 16

/* Columns [0, n) of the key tile [j0, j0 + bk) hold every key that some query of
 * [i, i + m) may see by the structural limits; columns n .. bk-1 are masked for all of
 * them (mask_tile sets them to -inf). */
static int64_t tile_cols_seen(const attn_problem *p, const attn_head *h, int64_t i, int64_t m, int64_t j0, int64_t bk)
{
    int64_t n = 0;
    for (int64_t r = 0; r < m; r++) {
        int64_t lo, hi;
        key_range(p, h, i + r, &lo, &hi);
        if (lo <= hi && hi - j0 + 1 > n)
            n = hi - j0 + 1;
    }
    return n < bk ? n : bk;
}

/* Does the key tile [j0, j0 + bk) need the per-element mask for this query tile? */
static int tile_needs_mask(const attn_head *h, const tile_range *t, int64_t j0, int64_t bk)
{
    return h->allowed || h->additive || j0 < t->full_lo || j0 + bk - 1 > t->full_hi;
}

/* ---- row groups of a cut tile (micro-kernel only) ----
 * A tile that the structural limits cut (a causal diagonal tile) goes in groups of
 * LB_ATTN_ROW_GROUP query rows, each over only the key columns [0, cols[g]) some row of the
 * group may see: the products whose rows are queries skip the rest, where P and dS are 0,
 * so the sums are the same. */
typedef struct row_groups {
    int64_t n, rows;                                       /* groups, rows per group */
    int64_t cols[(LB_ATTN_FWD_BQ > LB_ATTN_BWD_BQ ? LB_ATTN_FWD_BQ : LB_ATTN_BWD_BQ) / LB_ATTN_ROW_GROUP + 1];
    /* cols[g]: the columns group g may see */
} row_groups;

/* The groups of queries [i0, i0 + bq) against keys [j0, j0 + bk): one group over every
 * column unless the tile is cut (with the soft-cap on, cap_tile reads every score). */
static void tile_row_groups(const attn_problem *p, const attn_head *h, const tile_range *tr, int packed, int64_t i0,
                            int64_t bq, int64_t j0, int64_t bk, row_groups *rg)
{
    rg->n = 1;
    rg->rows = bq;
    rg->cols[0] = bk;
    if (!packed || !h->structural || p->mask.softcap != 0 || !tile_needs_mask(h, tr, j0, bk))
        return;
    rg->rows = LB_ATTN_ROW_GROUP;
    rg->n = (bq + rg->rows - 1) / rg->rows;
    for (int64_t g = 0; g < rg->n; g++)
        rg->cols[g] = tile_cols_seen(p, h, i0 + g * rg->rows, bq - g * rg->rows < rg->rows ? bq - g * rg->rows : rg->rows,
                                     j0, bk);
}

/* The columns [0, row_limit) of row r of a tile that the row loops compute: the columns
 * r's group may see, rounded up to whole vectors of 16 (so a row's sums go in the same
 * order as over the whole tile); mask_tile sets the masked ones among them to -inf. */
static int64_t row_limit(const row_groups *rg, int64_t r, int64_t bk)
{
    int64_t c = (rg->cols[r / rg->rows] + 15) / 16 * 16;
    return c < bk ? c : bk;
}

/* ---- float32 row loops on vectors ----
 * GCC/Clang vector extensions: the loops are written on vectors of 8 and of 16 floats
 * from one text (kernels/attention_rows_internal.h, included once per width). The
 * items call the 16-lane loops in their avx512 build (one AVX-512 register per vector)
 * and the 8-lane loops in the avx2 build (one AVX2 register) and the baseline build
 * (pairs of SSE2 registers). The compiler will not vectorise these loops by itself
 * without -ffast-math (the clamps and the masks' infinities are floating-point selects
 * it may not if-convert), so they are written on vectors. The file is compiled with
 * -ffp-contract=fast: the builds with FMA fuse a * b + c into one rounding (the baseline
 * build cannot), so the builds' results differ in the last bits. */

/* The helpers below are always inlined, so no vector crosses a call boundary. */
#pragma GCC diagnostic ignored "-Wpsabi"

/* exp(x) in float32 (Cephes expf, Moshier 1984): n = round(x / ln 2), r = x - n ln 2
 * with ln 2 split in two constants, exp(r) by a degree-5 polynomial, times 2^n built
 * in the exponent bits. Relative error <= 2 ulp on [-87.3, 88]; x < -87.3 (including
 * -inf) gives exactly 0, so masked scores vanish; NaN stays NaN; x > 88 gives exp(88)
 * (the kernels only take exp of x <= about 0). The clamps send NaN to LO, so the
 * conversion to an integer always sees n in [-126, 127]. */
#define LB_EXPF_LO -87.3365447504f
#define LB_EXPF_HI 88.0f
#define LB_EXPF_POLY(x, xc, n, r, y)                                                                             \
    do {                                                                                                       \
        n = (xc * 1.44269504088896341f + 12582912.0f) - 12582912.0f; /* round to nearest: 1.5 * 2^23 */       \
        r = xc - n * 0.693359375f;                                                                             \
        r = r - n * -2.12194440e-4f;                                                                           \
        y = 1.9875691500e-4f + r * 0.0f;                                                                       \
        y = y * r + 1.3981999507e-3f;                                                                          \
        y = y * r + 8.3334519073e-3f;                                                                          \
        y = y * r + 4.1665795894e-2f;                                                                          \
        y = y * r + 1.6666665459e-1f;                                                                          \
        y = y * r + 5.0000001201e-1f;                                                                          \
        y = y * (r * r) + r + 1.0f;                                                                            \
    } while (0)

LB_INLINE float expf_poly(float x)
{
    float xc = x >= LB_EXPF_LO ? x : LB_EXPF_LO, n, r, y;
    xc = xc <= LB_EXPF_HI ? xc : LB_EXPF_HI;
    LB_EXPF_POLY(x, xc, n, r, y);
    uint32_t bits = (uint32_t)((int32_t)n + 127) << 23;
    float two_n;
    memcpy(&two_n, &bits, sizeof two_n);
    y = y * two_n;
    y = x < LB_EXPF_LO ? 0.0f : y;
    return x != x ? x : y;
}

/* Folds l [n] (n = 16 or 8) onto its first 4 lanes by adding (or taking the larger of)
 * the upper half onto the lower half on 8- and 4-lane vectors, then the last 4 in a
 * fixed order: the horizontal sum and max of a vector in few instructions. */
typedef float lb_f8 __attribute__((vector_size(32)));
typedef float lb_f4 __attribute__((vector_size(16)));
typedef int32_t lb_i8 __attribute__((vector_size(32)));
typedef int32_t lb_i4 __attribute__((vector_size(16)));

#define LB_FOLD(l, n, F, I, op)                                                                                   \
    do {                                                                                                       \
        F lo_, hi_;                                                                                            \
        memcpy(&lo_, l, sizeof lo_);                                                                           \
        memcpy(&hi_, l + (n), sizeof hi_);                                                                     \
        if (op) {                                                                                              \
            I bigger_ = hi_ > lo_;                                                                             \
            lo_ = (F)((bigger_ & (I)hi_) | (~bigger_ & (I)lo_));                                               \
        } else {                                                                                               \
            lo_ += hi_;                                                                                        \
        }                                                                                                      \
        memcpy(l, &lo_, sizeof lo_);                                                                           \
    } while (0)

LB_INLINE float lb_fold_sum(float *l, int n)
{
    if (n == 16)
        LB_FOLD(l, 8, lb_f8, lb_i8, 0);
    LB_FOLD(l, 4, lb_f4, lb_i4, 0);
    return (l[0] + l[2]) + (l[1] + l[3]);
}

LB_INLINE float lb_fold_max(float *l, int n)
{
    if (n == 16)
        LB_FOLD(l, 8, lb_f8, lb_i8, 1);
    LB_FOLD(l, 4, lb_f4, lb_i4, 1);
    float a = l[1] > l[0] ? l[1] : l[0], b = l[3] > l[2] ? l[3] : l[2];
    return b > a ? b : a;
}

#define LB_VL 8
#include "kernels/vector_internal.h"
#include "kernels/attention_rows_internal.h"
#undef LB_VL
#define LB_VL 16
#include "kernels/vector_internal.h"
#include "kernels/attention_rows_internal.h"
#undef LB_VL

/* The items call the float32 tile product of their build (kernels/tile_gemm.c) through
 * this pointer:  C [m, n] (+)= alpha * A [m, k] B [k, n], A (i, l) at a[i * a_rs + l * a_cs]. */
typedef lb_tile_gemm_fn tile_gemm_fn;

/* The row loops of the items' width: wide = the 16-lane loops (a constant in every
 * build of the items, so the branch folds away). */
LB_INLINE float row_max_f(int wide, const float *s, int64_t n)
{
    return wide ? row_max_f16(s, n) : row_max_f8(s, n);
}

LB_INLINE float row_exp_f(int wide, float *s, int64_t n, float shift)
{
    return wide ? row_exp_f16(s, n, shift) : row_exp_f8(s, n, shift);
}

LB_INLINE void row_ds_f(int wide, float *s, const float *p, int64_t n, float dsum)
{
    if (wide)
        row_ds_f16(s, p, n, dsum);
    else
        row_ds_f8(s, p, n, dsum);
}

LB_INLINE void row_scale_f(int wide, float *o, int64_t n, float a)
{
    if (wide)
        row_scale_f16(o, n, a);
    else
        row_scale_f8(o, n, a);
}

/* ---- float64 row loops (libm exp; the float64 path serves checks, not speed) ----
 * They take the float32 loops' width argument (unused) so that one call serves both. */

LB_INLINE double row_max_d(int wide, const double *s, int64_t n)
{
    double mx = -INFINITY;
    for (int64_t c = 0; c < n; c++)
        mx = s[c] > mx ? s[c] : mx;
    return mx;
}

LB_INLINE double row_exp_d(int wide, double *s, int64_t n, double shift)
{
    double sum = 0;
    for (int64_t c = 0; c < n; c++) {
        double e = exp(s[c] - shift);
        s[c] = e;
        sum += e;
    }
    return sum;
}

LB_INLINE void row_ds_d(int wide, double *s, const double *p, int64_t n, double dsum)
{
    for (int64_t c = 0; c < n; c++)
        s[c] = p[c] * (s[c] - dsum);
}

LB_INLINE void row_scale_d(int wide, double *o, int64_t n, double a)
{
    for (int64_t c = 0; c < n; c++)
        o[c] *= a;
}

/* The per-element mask on a score tile.
 *   s [bq, bk] (row stride bk), rows = queries i0 .., columns = keys j0 ..
 * Entries query i0 + r may not attend become -inf; the additive mask and ALiBi's bias
 * are added. Only the columns [0, row_limit) of each row: the row loops read no further. */
LB_INLINE void mask_tile(const attn_problem *p, const attn_head *h, int64_t i0, int64_t bq, int64_t j0, int64_t bk,
                         const row_groups *rg, void *s)
{
    for (int64_t r = 0; r < bq; r++) {
        int64_t lim = row_limit(rg, r, bk); /* columns [lim, bk) are not read */
        int64_t i = i0 + r, lo, hi;
        key_range(p, h, i, &lo, &hi);
        int64_t c_lo = lo - j0, c_hi = hi - j0; /* kept columns [c_lo, c_hi] */
        if (c_lo < 0)
            c_lo = 0;
        if (c_hi > bk - 1)
            c_hi = bk - 1;
        if (c_lo > c_hi) {
            c_lo = bk;
            c_hi = bk - 1;
        }
        const unsigned char *al = h->allowed ? h->allowed + i * h->al_q + j0 * h->al_k : NULL;
        LB_DISPATCH(p->dtype, T, {
            T *sr = (T *)s + r * bk;
            for (int64_t c = 0; c < c_lo && c < lim; c++)
                sr[c] = -INFINITY;
            for (int64_t c = c_hi + 1; c < lim; c++)
                sr[c] = -INFINITY;
            if (al)
                for (int64_t c = c_lo; c <= c_hi; c++)
                    if (!al[c * h->al_k])
                        sr[c] = -INFINITY;
            if (h->additive) {
                const T *ad = (const T *)h->additive + i * h->ad_q + j0 * h->ad_k;
                for (int64_t c = c_lo; c <= c_hi; c++)
                    sr[c] += ad[c * h->ad_k];
            }
            if (h->alibi) { /* -m_h |pos(i) - j| */
                int64_t pos = h->qpos ? (int64_t)h->qpos[i] : i + h->align;
                for (int64_t c = c_lo; c <= c_hi && c < lim; c++) {
                    int64_t dist = pos - (j0 + c);
                    sr[c] += (T)(-h->slope * (double)(dist < 0 ? -dist : dist));
                }
            }
        });
    }
}

/* Logit soft-capping of a score tile: s [bq, bk] <- c tanh(s / c); dcap (may be NULL)
 * receives the derivative 1 - tanh(s / c)^2 for the backward. */
static void cap_tile(const attn_problem *p, int64_t bq, int64_t bk, void *s, void *dcap)
{
    double c = p->mask.softcap;
    LB_DISPATCH(p->dtype, T, {
        T *ps = s, *pd = dcap;
        for (int64_t e = 0; e < bq * bk; e++) {
            double t = tanh((double)ps[e] / c);
            ps[e] = (T)(c * t);
            if (pd)
                pd[e] = (T)(1.0 - t * t);
        }
    });
}

/* ---- forward: one (head, query tile) item ---- */

/* ---- one query against a key cache (a decoding step), AVX-512 float32 ----
 * For widths d, dv that are multiples of 16 up to 64 (a head of 16 to 64). OpenBLAS's
 * gemv on rows of 16 floats spends about one instruction per cached float (callgrind:
 * 4.6 M of a 6.2 M-instruction event at 16 streams and 1,024 events); these read each
 * row as whole vectors. */
#ifdef LB_ATTN_X86
typedef float lb_v16f __attribute__((vector_size(64)));
typedef int32_t lb_v16i __attribute__((vector_size(64)));

/* s [n] = alpha * K [n, d] q [d], K row-major, d = 16 nv. Each key row's products are summed
 * lanewise over its nv vectors; then 16 rows' vectors are folded into one vector of their
 * 16 sums by a transposition tree (4 levels, each two shuffles and an add per pair), the
 * rows read in order (the hardware prefetcher streams them) and the lanes put back in row
 * order by one last permutation (the tree leaves row bitrev(l) in lane l). A row's sum is the same
 * sequence of operations wherever it sits (a last partial block is padded with zero rows).
 * nv is a constant where it is called (key_dots_avx512), so the vectors stay in registers. */
__attribute__((target("avx512f,fma"))) LB_INLINE void key_dots_nv(int nv, int64_t n, float alpha, const float *k,
                                                                   const float *q, float *s)
{
    const lb_v16i bitrev = {0, 8, 4, 12, 2, 10, 6, 14, 1, 9, 5, 13, 3, 11, 7, 15};
    const lb_v16i m1 = {0, 1, 2, 3, 4, 5, 6, 7, 16, 17, 18, 19, 20, 21, 22, 23};      /* halves of a, b */
    const lb_v16i m2 = {0, 1, 2, 3, 16, 17, 18, 19, 8, 9, 10, 11, 24, 25, 26, 27};    /* quarters */
    const lb_v16i m3 = {0, 1, 16, 17, 4, 5, 20, 21, 8, 9, 24, 25, 12, 13, 28, 29};    /* pairs */
    const lb_v16i m4 = {0, 16, 2, 18, 4, 20, 6, 22, 8, 24, 10, 26, 12, 28, 14, 30}; /* single lanes */
    const int64_t d = 16 * nv;
    lb_v16f qv[4];
#pragma GCC unroll 4
    for (int v = 0; v < nv; v++)
        memcpy(&qv[v], q + 16 * v, sizeof qv[v]);
    for (int64_t j = 0; j < n; j += 16) {
        const int rows = n - j < 16 ? (int)(n - j) : 16;
        lb_v16f x[16];
#pragma GCC unroll 16
        for (int r = 0; r < 16; r++) {
            lb_v16f acc = {0};
            if (r < rows)
#pragma GCC unroll 4
                for (int v = 0; v < nv; v++) {
                    lb_v16f kv;
                    memcpy(&kv, k + (j + r) * d + 16 * v, sizeof kv);
                    acc += kv * qv[v];
                }
            x[r] = acc;
        }
#pragma GCC unroll 8
        for (int i = 0; i < 8; i++) /* lanes 0-7: 8 partial sums of x[2i]; 8-15: of x[2i+1] */
            x[i] = __builtin_shuffle(x[2 * i], x[2 * i + 1], m1) + __builtin_shuffle(x[2 * i], x[2 * i + 1], m1 + 8);
#pragma GCC unroll 4
        for (int i = 0; i < 4; i++)
            x[i] = __builtin_shuffle(x[2 * i], x[2 * i + 1], m2) + __builtin_shuffle(x[2 * i], x[2 * i + 1], m2 + 4);
#pragma GCC unroll 2
        for (int i = 0; i < 2; i++)
            x[i] = __builtin_shuffle(x[2 * i], x[2 * i + 1], m3) + __builtin_shuffle(x[2 * i], x[2 * i + 1], m3 + 2);
        lb_v16f out = (__builtin_shuffle(x[0], x[1], m4) + __builtin_shuffle(x[0], x[1], m4 + 1)) * alpha;
        out = __builtin_shuffle(out, bitrev); /* lane l held row bitrev(l) */
        if (rows == 16)
            memcpy(s + j, &out, sizeof out);
        else
            memcpy(s + j, &out, (size_t)rows * sizeof(float));
    }
}

__attribute__((target("avx512f,fma"))) static void key_dots_avx512(int64_t n, int64_t d, float alpha, const float *k,
                                                                   const float *q, float *s)
{
    switch (d / 16) {
    case 1: key_dots_nv(1, n, alpha, k, q, s); break;
    case 2: key_dots_nv(2, n, alpha, k, q, s); break;
    case 3: key_dots_nv(3, n, alpha, k, q, s); break;
    default: key_dots_nv(4, n, alpha, k, q, s); break;
    }
}

/* o [dv] += sum over j of p [j] V [j, :], V [n, dv] row-major, dv = 16 nv, in the order of j
 * (nv a constant where it is called: the sums stay in registers). */
__attribute__((target("avx512f,fma"))) LB_INLINE void value_sum_nv(int nv, int64_t n, const float *p, const float *v,
                                                                    float *o)
{
    const int64_t dv = 16 * nv;
    lb_v16f acc[4];
#pragma GCC unroll 4
    for (int c = 0; c < nv; c++)
        memcpy(&acc[c], o + 16 * c, sizeof acc[c]);
    for (int64_t j = 0; j < n; j++) {
        const float pj = p[j];
#pragma GCC unroll 4
        for (int c = 0; c < nv; c++) {
            lb_v16f vv;
            memcpy(&vv, v + j * dv + 16 * c, sizeof vv);
            acc[c] += pj * vv;
        }
    }
#pragma GCC unroll 4
    for (int c = 0; c < nv; c++)
        memcpy(o + 16 * c, &acc[c], sizeof acc[c]);
}

__attribute__((target("avx512f,fma"))) static void value_sum_avx512(int64_t n, int64_t dv, const float *p,
                                                                    const float *v, float *o)
{
    switch (dv / 16) {
    case 1: value_sum_nv(1, n, p, v, o); break;
    case 2: value_sum_nv(2, n, p, v, o); break;
    case 3: value_sum_nv(3, n, p, v, o); break;
    default: value_sum_nv(4, n, p, v, o); break;
    }
}
#endif

/* Does a one-query tile of this problem run on key_dots / value_sum (AVX-512 build)? */
LB_INLINE int decode_vectors(const attn_problem *p, int wide)
{
    return wide && p->dtype == LB_FLOAT32 && p->d % 16 == 0 && p->d <= 64 && p->dv % 16 == 0 && p->dv <= 64;
}

/* Per group: C_g [m, cols[g]] = alpha A_g [m, k] B [k, cols[g]] (the columns a group sees;
 * A row-major [bq, k] with row stride lda, C row stride ldc). */
LB_INLINE void grouped_cols(tile_gemm_fn mk, const row_groups *rg, int64_t bq, int64_t k, float alpha,
                            const float *a, int64_t lda, const float *b, int64_t ldb, float *c, int64_t ldc)
{
    for (int64_t g = 0; g < rg->n; g++) {
        int64_t r0 = g * rg->rows, m = bq - r0 < rg->rows ? bq - r0 : rg->rows;
        if (rg->cols[g] > 0)
            mk(m, rg->cols[g], k, alpha, a + r0 * lda, lda, 1, b, ldb, 0, c + r0 * ldc, ldc);
    }
}

/* Per group: C_g [m, n] += alpha A_g [m, cols[g]] B [cols[g], n] (the sum over the columns
 * a group sees; A row-major with row stride lda). */
LB_INLINE void grouped_sum(tile_gemm_fn mk, const row_groups *rg, int64_t bq, int64_t n, float alpha,
                           const float *a, int64_t lda, const float *b, int64_t ldb, float *c, int64_t ldc)
{
    for (int64_t g = 0; g < rg->n; g++) {
        int64_t r0 = g * rg->rows, m = bq - r0 < rg->rows ? bq - r0 : rg->rows;
        if (rg->cols[g] > 0)
            mk(m, n, rg->cols[g], alpha, a + r0 * lda, lda, 1, b, ldb, 1, c + r0 * ldc, ldc);
    }
}

/* ---- key groups of a cut tile (micro-kernel only) ----
 * The same for the backward's products whose rows are keys (dV += Pᵀ dO, dK += dSᵀ Q):
 * on a cut tile the keys go in groups of LB_ATTN_ROW_GROUP, each summed over only the
 * query rows [first[g], first[g] + count[g]) of the tile that may see some key of the
 * group. P and dS are 0 in the other rows, so the sums are the same. */
typedef struct key_groups {
    int64_t n, rows;                                               /* groups, keys per group */
    int64_t first[LB_ATTN_BWD_BK / LB_ATTN_ROW_GROUP + 1];         /* first query row group g sums */
    int64_t count[LB_ATTN_BWD_BK / LB_ATTN_ROW_GROUP + 1];         /* query rows group g sums (0: none) */
} key_groups;

/* The groups of keys [j0, j0 + bk) against queries [i0, i0 + bq): one group over every
 * query row unless the tile is cut. */
static void tile_key_groups(const attn_problem *p, const attn_head *h, const tile_range *tr, int packed, int64_t i0,
                            int64_t bq, int64_t j0, int64_t bk, key_groups *kg)
{
    kg->n = 1;
    kg->rows = bk;
    kg->first[0] = 0;
    kg->count[0] = bq;
    if (!packed || !h->structural || !tile_needs_mask(h, tr, j0, bk))
        return;
    kg->rows = LB_ATTN_ROW_GROUP;
    kg->n = (bk + kg->rows - 1) / kg->rows;
    int64_t last[LB_ATTN_BWD_BK / LB_ATTN_ROW_GROUP + 1];
    for (int64_t g = 0; g < kg->n; g++) {
        kg->first[g] = -1;
        last[g] = -2;
    }
    for (int64_t r = 0; r < bq; r++) { /* the groups row r's keys [lo, hi] meet */
        int64_t lo, hi;
        key_range(p, h, i0 + r, &lo, &hi);
        if (lo > hi || hi < j0 || lo > j0 + bk - 1)
            continue;
        int64_t g0 = lo > j0 ? (lo - j0) / kg->rows : 0, g1 = hi < j0 + bk - 1 ? (hi - j0) / kg->rows : kg->n - 1;
        for (int64_t g = g0; g <= g1; g++) {
            if (kg->first[g] < 0)
                kg->first[g] = r;
            last[g] = r;
        }
    }
    for (int64_t g = 0; g < kg->n; g++) {
        kg->count[g] = last[g] - kg->first[g] + 1;
        if (kg->first[g] < 0)
            kg->first[g] = 0;
    }
}

/* Per key group: C_g [m, n] += alpha A_gᵀ B_g, where A [bq, bk] is row-major (row stride
 * lda) and A_g its rows [first[g], first[g] + count[g]) and columns of group g, B_g the
 * same rows of B [bq, n] (row stride ldb), C_g the group's rows of C [bk, n]. */
LB_INLINE void grouped_keys(tile_gemm_fn mk, const key_groups *kg, int64_t bk, int64_t n, float alpha, const float *a,
                            int64_t lda, const float *b, int64_t ldb, float *c, int64_t ldc)
{
    for (int64_t g = 0; g < kg->n; g++) {
        int64_t r0 = g * kg->rows, m = bk - r0 < kg->rows ? bk - r0 : kg->rows, f = kg->first[g];
        if (kg->count[g] > 0)
            mk(m, n, kg->count[g], alpha, a + f * lda + r0, 1, lda, b + f * ldb, ldb, 1, c + r0 * ldc, ldc);
    }
}

typedef struct fwd_scratch {
    void *s;    /* [BQ, BK] scores, then probabilities */
    void *m;    /* [BQ] running max, the dtype */
    double *l;  /* [BQ] running sum */
} fwd_scratch;

/* Queries [i0, i0 + bq) of head n:
 *   q_t [bq, D] (rows of q), k [Tk, D], v [Tk, Dv] of head n
 *   -> out_t [bq, Dv], lse_t [bq] */
LB_INLINE void forward_item(const attn_problem *p, int64_t n, int64_t i0, fwd_scratch *w, char *out, char *lse,
                             int wide, tile_gemm_fn mk)
{
    attn_head h;
    head_of(p, n, &h);
    const int64_t bq = p->tq - i0 < p->fbq ? p->tq - i0 : p->fbq;
    const int64_t d = p->d, dv = p->dv;
    const size_t es = p->es;
    const char *qt = p->q + (size_t)((n * p->tq + i0) * d) * es; /* [bq, D] */
    const char *kh = p->k + (size_t)(h.kv * p->tk * d) * es;      /* [Tk, D] of its key/value head */
    const char *vh = p->v + (size_t)(h.kv * p->tk * dv) * es;     /* [Tk, Dv] */
    const float *kth = p->kt ? p->kt + h.kv * d * p->ldt : NULL;    /* [D, ldt] packed Kᵀ */
    char *ot = out + (size_t)((n * p->tq + i0) * dv) * es;         /* [bq, Dv] */
    char *lt = lse + (size_t)(n * p->tq + i0) * es;                /* [bq] */
    memset(ot, 0, (size_t)(bq * dv) * es);
    tile_range tr = query_tile_range(p, &h, i0, bq);
    LB_DISPATCH(p->dtype, T, {
        T *m = w->m; /* [bq] */
        for (int64_t r = 0; r < bq; r++) {
            m[r] = -INFINITY;
            w->l[r] = 0;
        }
    });
    if (tr.lo <= tr.hi) {
        /* key tiles from the first key any row sees (the window's start) to the last */
        for (int64_t j0 = tr.lo; j0 <= tr.hi; j0 += p->fbk) {
            int64_t bk = tr.hi + 1 - j0 < p->fbk ? tr.hi + 1 - j0 : p->fbk;
            /* S [bq, bk] = scale * Q_t K_tᵀ (a cut tile in row groups: tile_row_groups) */
            row_groups rg;
            tile_row_groups(p, &h, &tr, kth != NULL, i0, bq, j0, bk, &rg);
            if (kth)
                grouped_cols(mk, &rg, bq, d, (float)p->scale, (const float *)qt, d, kth + j0, p->ldt, (float *)w->s, bk);
#ifdef LB_ATTN_X86
            else if (bq == 1 && decode_vectors(p, wide)) /* one query (a decoding step), S [bk] = scale * K_t q */
                key_dots_avx512(bk, d, (float)p->scale, (const float *)kh + j0 * d, (const float *)qt, (float *)w->s);
#endif
            else if (bq == 1) /* one query (a decoding step): S [bk] = scale * K_t q, no packing */
                lb_k_gemv(p->dtype, 0, bk, d, p->scale, kh + (size_t)(j0 * d) * es, d, qt, 0.0, w->s);
            else
                lb_k_gemm(p->dtype, 0, 1, bq, bk, d, p->scale, qt, d, kh + (size_t)(j0 * d) * es, d, 0.0, w->s, bk);
            if (p->mask.softcap > 0)
                cap_tile(p, bq, bk, w->s, NULL);
            if (h.alibi || tile_needs_mask(&h, &tr, j0, bk))
                mask_tile(p, &h, i0, bq, j0, bk, &rg, w->s);
            /* online softmax, row by row */
            LB_DISPATCH(p->dtype, T, {
                T *m = w->m, *s = w->s, *o = (T *)ot; /* [bq], [bq, bk], [bq, Dv] */
                for (int64_t r = 0; r < bq; r++) {
                    T *sr = s + r * bk; /* [lim] scores of query i0 + r, then its P row */
                    int64_t lim = row_limit(&rg, r, bk); /* P V reads no further */
                    T mo = m[r];
                    T mx = _Generic((T)0, float: row_max_f, double: row_max_d)(wide, sr, lim);
                    T mn = mx > mo ? mx : mo;
                    if (mn == -INFINITY) { /* nothing allowed yet: P row = 0 */
                        memset(sr, 0, (size_t)lim * sizeof(T));
                        continue;
                    }
                    double rs = _Generic((T)0, float: row_exp_f, double: row_exp_d)(wide, sr, lim, mn);
                    if (mn != mo) {
                        double corr = exp((double)mo - (double)mn); /* 0 when mo = -inf */
                        if (w->l[r] > 0) /* O row [Dv] *= e^(m - m') */
                            _Generic((T)0, float: row_scale_f, double: row_scale_d)(wide, o + r * dv, dv, (T)corr);
                        w->l[r] = w->l[r] * corr + rs;
                        m[r] = mn;
                    } else {
                        w->l[r] += rs;
                    }
                }
            });
            /* O_t [bq, Dv] += P [bq, bk] V_t [bk, Dv] (P is 0 past a row group's columns) */
            if (kth)
                grouped_sum(mk, &rg, bq, dv, 1.0f, (const float *)w->s, bk, (const float *)vh + j0 * dv, dv, (float *)ot,
                            dv);
#ifdef LB_ATTN_X86
            else if (bq == 1 && decode_vectors(p, wide)) /* O [Dv] += V_tᵀ p */
                value_sum_avx512(bk, dv, (const float *)w->s, (const float *)vh + j0 * dv, (float *)ot);
#endif
            else if (bq == 1) /* O [Dv] += V_tᵀ p */
                lb_k_gemv(p->dtype, 1, dv, bk, 1.0, vh + (size_t)(j0 * dv) * es, dv, w->s, 1.0, ot);
            else
                lb_k_gemm(p->dtype, 0, 0, bq, dv, bk, 1.0, w->s, bk, vh + (size_t)(j0 * dv) * es, dv, 1.0, ot, dv);
        }
    }
    LB_DISPATCH(p->dtype, T, {
        T *m = w->m, *o = (T *)ot, *ls = (T *)lt; /* [bq], [bq, Dv], [bq] */
        for (int64_t r = 0; r < bq; r++) {
            if (w->l[r] > 0) {
                _Generic((T)0, float: row_scale_f, double: row_scale_d)(wide, o + r * dv, dv, (T)(1.0 / w->l[r]));
                ls[r] = (T)((double)m[r] + log(w->l[r]));
            } else { /* no allowed key: zeros, and +inf so that P recomputes to 0 */
                memset(o + r * dv, 0, (size_t)dv * sizeof(T));
                ls[r] = (T)INFINITY;
            }
        }
    });
}

/* ---- backward: one (head, key-tile group) item ---- */

typedef struct bwd_scratch {
    void *p;             /* [BQ, BK] probabilities */
    void *ds;            /* [BQ, BK] dP, then dS */
    void *dcap;          /* [BQ, BK] derivative of the soft-cap (softcap > 0 only) */
    tile_range *ranges;  /* [number of query tiles] */
} bwd_scratch;

typedef struct bwd_args {
    const char *out, *lse, *dout, *dsum; /* [N, Tq, Dv], [N, Tq], [N, Tq, Dv], [N, Tq] */
    char *dq;                             /* G buffers [G][N, Tq, D], or NULL */
    char *dk, *dv;                        /* [N, Tk, D], [N, Tk, Dv], or NULL */
    int64_t groups;                       /* G */
} bwd_args;

/* Key tiles g, g + G, ... of query head n (against its key/value head):
 *   for each query tile [i0, i0 + bq) that may see key tile [j0, j0 + bk):
 *   q_t [bq, D], do_t [bq, Dv], lse_t [bq], dsum_t [bq]; k_t [bk, D], v_t [bk, Dv]
 *   -> dv_t [bk, Dv] +=, dk_t [bk, D] +=, dq_g [bq, D] += */
LB_INLINE void backward_head(const attn_problem *p, const bwd_args *a, int64_t n, int64_t g, bwd_scratch *w,
                              int wide, tile_gemm_fn mk)
{
    attn_head h;
    head_of(p, n, &h);
    const int64_t d = p->d, dv = p->dv, tq = p->tq, tk = p->tk;
    const size_t es = p->es;
    const int64_t BQ = p->bbq, BK = p->bbk, n_qt = (tq + BQ - 1) / BQ, n_kt = (tk + BK - 1) / BK;
    for (int64_t qt = 0; qt < n_qt; qt++) {
        int64_t i0 = qt * BQ, bq = tq - i0 < BQ ? tq - i0 : BQ;
        w->ranges[qt] = query_tile_range(p, &h, i0, bq);
    }
    const int64_t m = h.kv; /* its key/value head */
    const char *kh = p->k + (size_t)(m * tk * d) * es, *vh = p->v + (size_t)(m * tk * dv) * es; /* [Tk, D], [Tk, Dv] */
    char *dq = a->dq ? a->dq + (size_t)((g * p->heads + n) * tq * d) * es : NULL; /* [Tq, D] of group g */
    const float *kth = p->kt ? p->kt + m * d * p->ldt : NULL;   /* [D, ldt] packed Kᵀ */
    const float *vth = p->vt ? p->vt + m * dv * p->ldt : NULL;  /* [Dv, ldt] packed Vᵀ */
    int want_ds = a->dq || a->dk;
    for (int64_t kt = g; kt < n_kt; kt += a->groups) {
        int64_t j0 = kt * BK, bk = tk - j0 < BK ? tk - j0 : BK;
        const char *kt_ = kh + (size_t)(j0 * d) * es, *vt = vh + (size_t)(j0 * dv) * es; /* [bk, D], [bk, Dv] */
        char *dkt = a->dk ? a->dk + (size_t)((m * tk + j0) * d) * es : NULL;             /* [bk, D] */
        char *dvt = a->dv ? a->dv + (size_t)((m * tk + j0) * dv) * es : NULL;            /* [bk, Dv] */
        for (int64_t qt = 0; qt < n_qt; qt++) {
            const tile_range *tr = &w->ranges[qt];
            if (tr->lo > tr->hi || tr->hi < j0 || tr->lo > j0 + bk - 1)
                continue; /* no query of this tile sees these keys */
            int64_t i0 = qt * BQ, bq = tq - i0 < BQ ? tq - i0 : BQ;
            int64_t row0 = n * tq + i0;
            const char *qtile = p->q + (size_t)(row0 * d) * es;     /* [bq, D] */
            const char *dot = a->dout + (size_t)(row0 * dv) * es;    /* [bq, Dv] */
            /* A cut tile in row groups (tile_row_groups) for the products whose rows are
             * queries: S, dP and dQ. */
            row_groups rg;
            tile_row_groups(p, &h, tr, kth != NULL, i0, bq, j0, bk, &rg);
            /* P [bq, bk] = exp(scale * Q_t K_tᵀ (masked) - lse) */
            if (kth)
                grouped_cols(mk, &rg, bq, d, (float)p->scale, (const float *)qtile, d, kth + j0, p->ldt, (float *)w->p,
                             bk);
            else
                lb_k_gemm(p->dtype, 0, 1, bq, bk, d, p->scale, qtile, d, kt_, d, 0.0, w->p, bk);
            if (p->mask.softcap > 0)
                cap_tile(p, bq, bk, w->p, w->dcap);
            if (h.alibi || tile_needs_mask(&h, tr, j0, bk))
                mask_tile(p, &h, i0, bq, j0, bk, &rg, w->p);
            LB_DISPATCH(p->dtype, T, {
                T *pp = w->p;                           /* [bq, bk] */
                const T *ls = (const T *)a->lse + row0; /* [bq] */
                for (int64_t r = 0; r < bq; r++) {      /* 0 past the row's limit (read by dV's key groups) */
                    int64_t lim = row_limit(&rg, r, bk);
                    _Generic((T)0, float: row_exp_f, double: row_exp_d)(wide, pp + r * bk, lim, ls[r]);
                    memset(pp + r * bk + lim, 0, (size_t)(bk - lim) * sizeof(T));
                }
            });
            /* dV_t [bk, Dv] += Pᵀ dO_t (a cut tile in key groups: tile_key_groups) */
            key_groups kg;
            tile_key_groups(p, &h, tr, kth != NULL, i0, bq, j0, bk, &kg);
            if (dvt && kth)
                grouped_keys(mk, &kg, bk, dv, 1.0f, w->p, bk, (const float *)dot, dv, (float *)dvt, dv);
            else if (dvt)
                lb_k_gemm(p->dtype, 1, 0, bk, dv, bq, 1.0, w->p, bk, dot, dv, 1.0, dvt, dv);
            if (!want_ds)
                continue;
            /* dP [bq, bk] = dO_t V_tᵀ; dS = P * (dP - D) (0 past a row group's columns) */
            if (vth)
                grouped_cols(mk, &rg, bq, dv, 1.0f, (const float *)dot, dv, vth + j0, p->ldt, (float *)w->ds, bk);
            else
                lb_k_gemm(p->dtype, 0, 1, bq, bk, dv, 1.0, dot, dv, vt, dv, 0.0, w->ds, bk);
            LB_DISPATCH(p->dtype, T, {
                T *ds = w->ds;                                          /* [bq, bk] dP in, dS out */
                const T *pp = w->p, *dsum = (const T *)a->dsum + row0; /* [bq, bk], [bq] */
                for (int64_t r = 0; r < bq; r++) {
                    int64_t seen = rg.cols[r / rg.rows];
                    _Generic((T)0, float: row_ds_f, double: row_ds_d)(wide, ds + r * bk, pp + r * bk, seen, dsum[r]);
                    memset(ds + r * bk + seen, 0, (size_t)(bk - seen) * sizeof(T));
                }
                if (p->mask.softcap > 0) { /* dS of the raw scores: times 1 - tanh^2 */
                    const T *dc = w->dcap;
                    for (int64_t e = 0; e < bq * bk; e++)
                        ds[e] *= dc[e];
                }
            });
            /* dK_t [bk, D] += scale dSᵀ Q_t;  dQ_g [bq, D] += scale dS K_t */
            if (dkt && kth)
                grouped_keys(mk, &kg, bk, d, (float)p->scale, w->ds, bk, (const float *)qtile, d, (float *)dkt, d);
            else if (dkt)
                lb_k_gemm(p->dtype, 1, 0, bk, d, bq, p->scale, w->ds, bk, qtile, d, 1.0, dkt, d);
            if (dq && kth)
                grouped_sum(mk, &rg, bq, d, (float)p->scale, (const float *)w->ds, bk, (const float *)kt_, d,
                            (float *)dq + i0 * d, d);
            else if (dq)
                lb_k_gemm(p->dtype, 0, 0, bq, d, bk, p->scale, w->ds, bk, kt_, d, 1.0, dq + (size_t)(i0 * d) * es,
                          d);
        }
    }
}

/* Key tiles g, g + G, ... of key/value head m, for each query head of its group in order
 * (the group's dK and dV sums go head by head, whatever the thread count). */
LB_INLINE void backward_item(const attn_problem *p, const bwd_args *a, int64_t m, int64_t g, bwd_scratch *w,
                              int wide, tile_gemm_fn mk)
{
    for (int64_t n = m * p->kv_group; n < (m + 1) * p->kv_group; n++)
        backward_head(p, a, n, g, w, wide, mk);
}

/* ---- instruction-set builds of the items ----
 * The same items compiled once per instruction set: the always-inlined items and row
 * loops take on the target of the function they are inlined into. */

typedef void (*forward_item_fn)(const attn_problem *, int64_t, int64_t, fwd_scratch *, char *, char *);
typedef void (*backward_item_fn)(const attn_problem *, const bwd_args *, int64_t, int64_t, bwd_scratch *);

/* mk: the build's tile product, or NULL (products through OpenBLAS). */
#define LB_ATTN_ITEMS(isa, attr, wide, mk)                                                                        \
    attr static void forward_item_##isa(const attn_problem *p, int64_t n, int64_t i0, fwd_scratch *w, char *out, \
                                        char *lse)                                                               \
    {                                                                                                            \
        forward_item(p, n, i0, w, out, lse, wide, mk);                                                           \
    }                                                                                                            \
    attr static void backward_item_##isa(const attn_problem *p, const bwd_args *a, int64_t n, int64_t g,          \
                                         bwd_scratch *w)                                                         \
    {                                                                                                            \
        backward_item(p, a, n, g, w, wide, mk);                                                                  \
    }

LB_ATTN_ITEMS(generic, , 0, NULL)
#ifdef LB_ATTN_X86
LB_ATTN_ITEMS(avx2, __attribute__((target("avx2,fma"))), 0, lb_k_tile_gemm_avx2)
LB_ATTN_ITEMS(avx512, __attribute__((target("avx512f,fma"))), 1, lb_k_tile_gemm_avx512)
#endif

/* Best first; the baseline build last. */
static const struct attn_isa {
    lb_isa_build build;
    forward_item_fn forward;
    backward_item_fn backward;
    /* float32 tile products on the micro-kernel (packed Kᵀ, Vᵀ)? Not in the baseline
     * build: 8-lane vectors on SSE2 registers (or any other CPU's) spill the micro-kernel's
     * accumulators, and OpenBLAS picks kernels for that CPU itself. */
    int micro_kernel;
} ISAS[] = {
#ifdef LB_ATTN_X86
    {LB_BUILD_AVX512, forward_item_avx512, backward_item_avx512, 1},
    {LB_BUILD_AVX2, forward_item_avx2, backward_item_avx2, 1},
#endif
    {LB_BUILD_GENERIC, forward_item_generic, backward_item_generic, 0},
};
enum { N_ISAS = sizeof ISAS / sizeof ISAS[0] };

/* The build tensor/isa.h chose (off x86-64 only the baseline exists, and is chosen). */
static const struct attn_isa *chosen_isa(void)
{
    lb_isa_build b = lb_isa();
    for (int i = 0; i < N_ISAS; i++)
        if (ISAS[i].build == b)
            return &ISAS[i];
    return &ISAS[N_ISAS - 1];
}

const char *lb_k_attention_isa(void) { return lb_isa_name(chosen_isa()->build); }

lb_status lb_k_attention_set_isa(const char *name)
{
    if (lb_isa_set(name) != LB_OK)
        return lb_error_context("lb_k_attention_set_isa");
    return LB_OK;
}

static int thread_id(void)
{
#ifdef _OPENMP
    return omp_get_thread_num();
#else
    return 0;
#endif
}

static int threads_for(int64_t items)
{
    int n = lb_get_num_threads();
    return items < n ? (int)(items > 0 ? items : 1) : n;
}

/* ---- packing: each head's keys (values) transposed once per call ---- */

/* Row stride (floats) of the packed transposes: Tk rounded up to 16, plus 16 when that
 * is a multiple of 64. A stride of a multiple of 256 bytes would put the rows of a tile
 * that the micro-kernel reads one after another (Kᵀ rows c = 0 .. D-1 at the same key
 * columns) in the same few L1 sets (4 KiB aliasing at Tk = 1024, 4096, ...). */
static int64_t packed_stride(int64_t tk)
{
    int64_t ld = (tk + 15) / 16 * 16;
    return ld % 64 == 0 ? ld + 16 : ld;
}

/* dst [N, W, ldt] <- src [N, Tk, W] transposed per head: dst[(n * W + c) * ldt + j] =
 * src[(n * Tk + j) * W + c]. Columns [Tk, ldt) are not written (never read). Work items
 * are (head, block of 256 keys), so one head still uses every thread; each block is
 * one OpenBLAS out-of-place transpose (cblas_somatcopy with alpha 1: an exact copy,
 * about 5 times faster than a scalar loop over [512, 64]). */
static void pack_transposed(const float *src, int64_t heads, int64_t tk, int64_t w, int64_t ldt, float *dst)
{
    const int64_t JB = 256, nb = (tk + JB - 1) / JB, items = heads * nb;
    int nth = threads_for(items);
#pragma omp parallel for schedule(static) num_threads(nth)
    for (int64_t it = 0; it < items; it++) {
        int64_t n = it / nb, j0 = it % nb * JB, j1 = j0 + JB < tk ? j0 + JB : tk;
        const float *s = src + n * tk * w; /* [Tk, W] */
        float *o = dst + n * w * ldt;      /* [W, ldt] */
        /* rows [j0, j1) of s, [j1 - j0, W], into columns [j0, j1) of o */
        cblas_somatcopy(CblasRowMajor, CblasTrans, (blasint)(j1 - j0), (blasint)w, 1.0f, s + j0 * w, (blasint)w,
                        o + j0, (blasint)ldt);
    }
}

/* Do this problem's tile products run on the micro-kernel (over packed Kᵀ, Vᵀ)? */
static int uses_micro_kernel(const attn_problem *p)
{
    int64_t w = p->d > p->dv ? p->d : p->dv; /* a packed head [W, ldt] is indexed in int by OpenBLAS */
    return p->dtype == LB_FLOAT32 && p->tq >= LB_ATTN_PACK_MIN_TQ && chosen_isa()->micro_kernel &&
           w <= INT_MAX / (p->tk + 96);
}

/* ---- checks ---- */

static lb_status check_operands(const char *op, const lb_tensor *q, const lb_tensor *k, const lb_tensor *v,
                                attn_problem *p)
{
    char sq[128], sk[128], sv[128];
    const lb_tensor *ts[3] = {q, k, v};
    int nd = q->ndim;
    int fits = nd >= 2 && k->ndim == nd && v->ndim == nd;
    for (int i = 0; fits && i < 3; i++)
        fits = lb_tensor_is_contiguous(ts[i]) && ts[i]->dtype == q->dtype;
    /* the leading dims agree, but for the last one of k and v, which may divide q's (grouped-query) */
    for (int d = 0; fits && d < nd - 2; d++) {
        int heads_dim = d == nd - 3;
        fits = v->shape[d] == k->shape[d] &&
               (k->shape[d] == q->shape[d] || (heads_dim && k->shape[d] >= 1 && q->shape[d] % k->shape[d] == 0));
    }
    if (fits)
        fits = k->shape[nd - 1] == q->shape[nd - 1] && v->shape[nd - 2] == k->shape[nd - 2] &&
               q->shape[nd - 1] >= 1 && v->shape[nd - 1] >= 1;
    if (!fits)
        return lb_error(q->dtype == k->dtype && q->dtype == v->dtype ? LB_ERR_SHAPE : LB_ERR_DTYPE,
                        "%s: q %s, k %s, v %s must be contiguous [*L, Tq, D], [*Lkv, Tk, D], [*Lkv, Tk, Dv] of one "
                        "dtype with the same leading dims L (but for the last, the heads, whose count in k and v "
                        "must divide q's) and D, Dv >= 1",
                        op, lb_tensor_describe(q, sq, sizeof sq), lb_tensor_describe(k, sk, sizeof sk),
                        lb_tensor_describe(v, sv, sizeof sv));
    memset(p, 0, sizeof *p);
    p->dtype = q->dtype;
    p->es = lb_dtype_size(q->dtype);
    p->n_lead = nd - 2;
    p->heads = 1;
    for (int d = 0; d < nd - 2; d++) {
        p->lead[d] = q->shape[d];
        p->heads *= q->shape[d];
    }
    p->kv_group = nd >= 3 && k->shape[nd - 3] > 0 ? q->shape[nd - 3] / k->shape[nd - 3] : 1;
    p->kv_heads = p->kv_group > 0 ? p->heads / p->kv_group : 0;
    p->tq = q->shape[nd - 2];
    p->tk = k->shape[nd - 2];
    p->d = q->shape[nd - 1];
    p->dv = v->shape[nd - 1];
    p->q = lb_tensor_data(q);
    p->k = lb_tensor_data(k);
    p->v = lb_tensor_data(v);
    return LB_OK;
}

/* t must be contiguous, of the operands' dtype, with shape [*L, rows, cols]
 * (cols < 0: [*L, rows]; kv: [*Lkv, rows, cols], the key/value heads). */
static lb_status check_result_of(const char *op, const char *name, const lb_tensor *t, const attn_problem *p,
                                 int64_t rows, int64_t cols, int kv)
{
    int64_t lead[LB_MAX_DIMS];
    memcpy(lead, p->lead, sizeof lead);
    if (kv && p->n_lead > 0)
        lead[p->n_lead - 1] /= p->kv_group;
    int nd = p->n_lead + (cols >= 0 ? 2 : 1);
    int fits = t && t->ndim == nd && t->dtype == p->dtype && lb_tensor_is_contiguous(t);
    for (int d = 0; fits && d < p->n_lead; d++)
        fits = t->shape[d] == lead[d];
    if (fits)
        fits = t->shape[p->n_lead] == rows && (cols < 0 || t->shape[p->n_lead + 1] == cols);
    if (fits)
        return LB_OK;
    char st[128], want[128];
    int64_t shape[LB_MAX_DIMS];
    memcpy(shape, lead, sizeof shape);
    shape[p->n_lead] = rows;
    if (cols >= 0)
        shape[p->n_lead + 1] = cols;
    return lb_error(t && t->dtype != p->dtype ? LB_ERR_DTYPE : LB_ERR_SHAPE,
                    "%s: %s %s must be a contiguous %s tensor of shape %s", op, name,
                    t ? lb_tensor_describe(t, st, sizeof st) : "NULL", lb_dtype_name(p->dtype),
                    lb_shape_str(nd, shape, want, sizeof want));
}

static lb_status check_result(const char *op, const char *name, const lb_tensor *t, const attn_problem *p,
                              int64_t rows, int64_t cols)
{
    return check_result_of(op, name, t, p, rows, cols, 0);
}

/* ---- entry points ---- */

lb_status lb_k_attention_forward(const lb_tensor *q, const lb_tensor *k, const lb_tensor *v, const lb_attn_kmask *mask,
                                 double scale, lb_tensor *out, lb_tensor *lse)
{
    LB_CHECK_ARG(q, LB_ERR_VALUE);
    LB_CHECK_ARG(k, LB_ERR_VALUE);
    LB_CHECK_ARG(v, LB_ERR_VALUE);
    static const char *op = "attention_forward";
    attn_problem p;
    if (check_operands(op, q, k, v, &p) != LB_OK || check_result(op, "out", out, &p, p.tq, p.dv) != LB_OK ||
        check_result(op, "lse", lse, &p, p.tq, -1) != LB_OK)
        return lb_last_status();
    p.scale = scale;
    if (mask)
        p.mask = *mask;
    choose_tiles(&p);
    int64_t n_qt = (p.tq + p.fbq - 1) / p.fbq, items = p.heads * n_qt;
    if (items == 0)
        return LB_OK;
    if (p.tk == 0) { /* no keys: every row is fully masked */
        memset(lb_tensor_data(out), 0, (size_t)lb_tensor_numel(out) * p.es);
        LB_DISPATCH(p.dtype, T, {
            T *ls = lb_tensor_data(lse);
            for (int64_t i = 0; i < p.heads * p.tq; i++)
                ls[i] = (T)INFINITY;
        });
        return LB_OK;
    }
    int nth = threads_for(items);
    size_t per = (size_t)(LB_ATTN_FWD_BQ * LB_ATTN_FWD_BK + LB_ATTN_FWD_BQ) * p.es + LB_ATTN_FWD_BQ * sizeof(double);
    per = (per + 63) / 64 * 64; /* each thread's buffers on their own cache lines */
    int packed = uses_micro_kernel(&p);
    if (packed)
        p.ldt = packed_stride(p.tk);
    scratch s_slab, s_kt = {0};
    if (scratch_take(&s_slab, per * (size_t)nth) != 0 ||
        scratch_take(&s_kt, packed ? (size_t)(p.kv_heads * p.d * p.ldt) * sizeof(float) : 0) != 0) {
        scratch_give(&s_slab);
        return lb_error(LB_ERR_MEMORY, "%s: out of memory for %d tile buffers and the packed keys", op, nth);
    }
    char *slab = s_slab.data;
    float *kt = s_kt.data;
    if (packed) {
        pack_transposed((const float *)p.k, p.kv_heads, p.tk, p.d, p.ldt, kt);
        p.kt = kt;
    }
    forward_item_fn fn = chosen_isa()->forward;
    char *po = lb_tensor_data(out), *pl = lb_tensor_data(lse);
    int blas = lb_blas_serial_begin();
#pragma omp parallel num_threads(nth)
    {
        char *mine = slab + per * (size_t)thread_id();
        fwd_scratch w = {mine, mine + (size_t)(LB_ATTN_FWD_BQ * LB_ATTN_FWD_BK) * p.es,
                         (double *)(mine + (size_t)(LB_ATTN_FWD_BQ * LB_ATTN_FWD_BK + LB_ATTN_FWD_BQ) * p.es)};
        /* The last query tiles see the most keys under a causal mask: start them first. */
#pragma omp for schedule(dynamic, 1)
        for (int64_t it = items - 1; it >= 0; it--) {
            int64_t n = it % p.heads, qt = it / p.heads;
            fn(&p, n, qt * p.fbq, &w, po, pl);
        }
    }
    lb_blas_serial_end(blas);
    scratch_give(&s_slab);
    scratch_give(&s_kt);
    return LB_OK;
}

lb_status lb_k_attention_backward(const lb_tensor *q, const lb_tensor *k, const lb_tensor *v, const lb_tensor *out,
                                  const lb_tensor *lse, const lb_attn_kmask *mask, double scale,
                                  const lb_tensor *grad_out, lb_tensor *grad_q, lb_tensor *grad_k,
                                  lb_tensor *grad_v)
{
    LB_CHECK_ARG(q, LB_ERR_VALUE);
    LB_CHECK_ARG(k, LB_ERR_VALUE);
    LB_CHECK_ARG(v, LB_ERR_VALUE);
    static const char *op = "attention_backward";
    attn_problem p;
    if (check_operands(op, q, k, v, &p) != LB_OK || check_result(op, "out", out, &p, p.tq, p.dv) != LB_OK ||
        check_result(op, "lse", lse, &p, p.tq, -1) != LB_OK ||
        check_result(op, "grad_out", grad_out, &p, p.tq, p.dv) != LB_OK ||
        (grad_q && check_result(op, "grad_q", grad_q, &p, p.tq, p.d) != LB_OK) ||
        (grad_k && check_result_of(op, "grad_k", grad_k, &p, p.tk, p.d, 1) != LB_OK) ||
        (grad_v && check_result_of(op, "grad_v", grad_v, &p, p.tk, p.dv, 1) != LB_OK))
        return lb_last_status();
    p.scale = scale;
    if (mask)
        p.mask = *mask;
    choose_tiles(&p);
    int64_t n_kt = (p.tk + p.bbk - 1) / p.bbk, n_qt = (p.tq + p.bbq - 1) / p.bbq;
    if (p.heads == 0 || n_kt == 0 || n_qt == 0 || (!grad_q && !grad_k && !grad_v))
        return LB_OK;
    /* G groups of key tiles per key/value head: enough items for LB_ATTN_BWD_ITEMS threads. */
    int64_t groups = (LB_ATTN_BWD_ITEMS + p.kv_heads - 1) / p.kv_heads;
    if (groups > n_kt)
        groups = n_kt;
    if (groups < 1)
        groups = 1;
    int64_t items = p.kv_heads * groups, rows = p.heads * p.tq;
    int nth = threads_for(items);
    size_t tiles = p.mask.softcap > 0 ? 3 : 2; /* P, dS (and the soft-cap's derivative) */
    size_t per = (size_t)(tiles * LB_ATTN_BWD_BQ * LB_ATTN_BWD_BK) * p.es + (size_t)n_qt * sizeof(tile_range);
    per = (per + 63) / 64 * 64; /* each thread's buffers on their own cache lines */
    size_t dq_size = grad_q && groups > 1 ? (size_t)(groups * rows * p.d) * p.es : 0;
    int packed = uses_micro_kernel(&p);
    if (packed)
        p.ldt = packed_stride(p.tk);
    size_t kt_size = packed ? (size_t)(p.kv_heads * p.d * p.ldt) * sizeof(float) : 0;
    size_t vt_size = packed ? (size_t)(p.kv_heads * p.dv * p.ldt) * sizeof(float) : 0;
    /* slab, dsum, dq (zeroed by writing: see below), packed Kᵀ and Vᵀ */
    scratch s[5] = {{0}};
    size_t sizes[5] = {per * (size_t)nth, (size_t)rows * p.es, dq_size, kt_size, vt_size};
    for (int i = 0; i < 5; i++)
        if (scratch_take(&s[i], sizes[i]) != 0) {
            for (int j = 0; j < i; j++)
                scratch_give(&s[j]);
            return lb_error(LB_ERR_MEMORY,
                            "%s: out of memory for the backward's buffers (%lld groups of dq, packed keys and values)",
                            op, (long long)groups);
        }
    char *slab = s[0].data, *dsum = s[1].data, *dq = s[2].data;
    float *kt = s[3].data, *vt = s[4].data;
    bwd_args a = {lb_tensor_data(out), lb_tensor_data(lse), lb_tensor_data(grad_out), dsum,
                  grad_q ? (dq ? dq : lb_tensor_data(grad_q)) : NULL,
                  grad_k ? lb_tensor_data(grad_k) : NULL, grad_v ? lb_tensor_data(grad_v) : NULL, groups};
    if (packed) {
        pack_transposed((const float *)p.k, p.kv_heads, p.tk, p.d, p.ldt, kt);
        pack_transposed((const float *)p.v, p.kv_heads, p.tk, p.dv, p.ldt, vt);
        p.kt = kt;
        p.vt = vt;
    }
    backward_item_fn fn = chosen_isa()->backward;
    /* Zero the dQ group buffers by writing (not calloc): first touching fresh pages
     * with a write maps them directly, while a gemm's read-then-write would map the
     * zero page and copy it, a fault that needs a TLB shootdown across the threads. */
    if (dq)
        memset(dq, 0, dq_size);
    int blas = lb_blas_serial_begin();
    int nth_rows = threads_for(rows / 256 + 1);
    /* D [N, Tq] = rowsum(dO * O), accumulated in double: 8 running sums (lane c % 8), then
     * summed in a fixed order (the same bits at any thread count) */
#pragma omp parallel for schedule(static) num_threads(nth_rows)
    for (int64_t i = 0; i < rows; i++) {
        LB_DISPATCH(p.dtype, T, {
            const T *o = (const T *)a.out + i * p.dv, *go = (const T *)a.dout + i * p.dv;
            double acc[8] = {0};
            int64_t c = 0;
            for (; c + 8 <= p.dv; c += 8)
                for (int j = 0; j < 8; j++)
                    acc[j] += (double)o[c + j] * (double)go[c + j];
            for (; c < p.dv; c++)
                acc[c % 8] += (double)o[c] * (double)go[c];
            ((T *)dsum)[i] = (T)(((acc[0] + acc[4]) + (acc[2] + acc[6])) + ((acc[1] + acc[5]) + (acc[3] + acc[7])));
        });
    }
#pragma omp parallel num_threads(nth)
    {
        char *mine = slab + per * (size_t)thread_id();
        size_t tile = (size_t)(LB_ATTN_BWD_BQ * LB_ATTN_BWD_BK) * p.es;
        bwd_scratch w = {mine, mine + tile, tiles > 2 ? mine + 2 * tile : NULL,
                         (tile_range *)(mine + tiles * tile)};
#pragma omp for schedule(dynamic, 1)
        for (int64_t it = 0; it < items; it++)
            fn(&p, &a, it / groups, it % groups, &w);
    }
    /* grad_q += sum over groups, in group order */
    if (dq) {
        int64_t total = rows * p.d;
        int nth_q = threads_for(total / 65536 + 1);
#pragma omp parallel for schedule(static) num_threads(nth_q)
        for (int64_t e = 0; e < total; e++) {
            LB_DISPATCH(p.dtype, T, {
                const T *b = (const T *)dq;
                T acc = b[e];
                for (int64_t g = 1; g < groups; g++)
                    acc += b[g * total + e];
                ((T *)lb_tensor_data(grad_q))[e] += acc;
            });
        }
    }
    lb_blas_serial_end(blas);
    for (int i = 0; i < 5; i++)
        scratch_give(&s[i]);
    return LB_OK;
}

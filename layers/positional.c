#include "layers/positional.h"
#include "tensor/names.h"

#include <math.h>
#include <stdint.h>
#include <string.h>

static const char *const pos_names[] = {"none", "sinusoidal", "learned", "rotary", "alibi"};

const char *lb_pos_kind_name(lb_pos_kind pos)
{
    return lb_name_of(pos_names, LB_COUNT_OF(pos_names), (int)pos, "unknown");
}

lb_status lb_pos_kind_parse(const char *name, lb_pos_kind *pos)
{
    LB_CHECK_ARG(pos, LB_ERR_VALUE);
    int i = 0;
    lb_status st = lb_name_parse("positional encoding", pos_names, LB_COUNT_OF(pos_names), name, 0, &i);
    if (st == LB_OK)
        *pos = (lb_pos_kind)i;
    return st;
}

lb_status lb_positional_init(lb_positional *p, lb_params *ps, const char *prefix, lb_pos_kind kind,
                             int64_t max_seq_len, int64_t d_model, lb_dtype dtype, lb_rng *rng)
{
    LB_CHECK_ARG(p, LB_ERR_VALUE);
    LB_CHECK_ARG(ps, LB_ERR_VALUE);
    memset(p, 0, sizeof *p);
    if (kind < LB_POS_NONE || kind > LB_POS_ALIBI)
        return lb_error(LB_ERR_VALUE, "positional: unknown kind %d (none, sinusoidal, learned, rotary or alibi)",
                        (int)kind);
    if (d_model < 1)
        return lb_error(LB_ERR_VALUE, "positional: d_model = %lld must be >= 1", (long long)d_model);
    p->kind = kind;
    p->d_model = d_model;
    p->max_seq_len = max_seq_len;
    if (kind != LB_POS_LEARNED)
        return LB_OK;
    if (max_seq_len < 1)
        return lb_error(LB_ERR_VALUE, "positional: learned positions need max_seq_len >= 1 (got %lld): it is the number "
                                      "of rows of pos_embedding, the longest sequence the model accepts",
                        (long long)max_seq_len);
    int64_t s[2] = {max_seq_len, d_model};
    if (!(p->embedding = lb_params_add(ps, prefix, "pos_embedding", dtype, 2, s)))
        return lb_last_status();
    if (rng)
        lb_init_normal(p->embedding, rng, 1.0);
    return LB_OK;
}

lb_status lb_alibi_slopes(int n_heads, double *slopes)
{
    LB_CHECK_ARG(slopes, LB_ERR_VALUE);
    if (n_heads < 1)
        return lb_error(LB_ERR_VALUE, "ALiBi slopes: n_heads = %d must be >= 1", n_heads);
    int n = 1; /* the largest power of two <= n_heads */
    while (2 * n <= n_heads)
        n *= 2;
    for (int h = 1; h <= n; h++)
        slopes[h - 1] = pow(2.0, -8.0 * h / n);
    for (int e = 0; e < n_heads - n; e++) /* slopes 1, 3, 5, ... of 2n heads */
        slopes[n + e] = pow(2.0, -8.0 * (2 * e + 1) / (2 * n));
    return LB_OK;
}

/* PE[pos, c] of the sinusoidal table. */
static double sinusoid(int64_t pos, int64_t c, int64_t d_model)
{
    double angle = (double)pos / pow(10000.0, (double)(c - c % 2) / (double)d_model);
    return c % 2 == 0 ? sin(angle) : cos(angle);
}

lb_tensor *lb_sinusoidal_table(lb_dtype dtype, int64_t seq_len, int64_t d_model)
{
    int64_t s[2] = {seq_len, d_model};
    lb_tensor *t = lb_tensor_zeros(dtype, 2, s);
    if (!t)
        return NULL;
    LB_DISPATCH(dtype, T, {
        T *pt = lb_tensor_data(t);
        for (int64_t pos = 0; pos < seq_len; pos++)
            for (int64_t c = 0; c < d_model; c++)
                pt[pos * d_model + c] = (T)sinusoid(pos, c, d_model);
    });
    return t;
}

lb_var *lb_positional_add(lb_graph *g, const lb_positional *p, lb_var *x)
{
    LB_CHECK_ARG(g, NULL);
    LB_CHECK_ARG(p, NULL);
    LB_CHECK_INPUT(x, NULL);
    if (!x)
        return NULL;
    const lb_tensor *tx = x->value;
    char sx[128];
    if (tx->ndim != 3 || tx->shape[2] != p->d_model) {
        lb_error(LB_ERR_SHAPE, "positional (%s): x %s must be [B, T, d_model = %lld]", lb_pos_kind_name(p->kind),
                 lb_tensor_describe(tx, sx, sizeof sx), (long long)p->d_model);
        return NULL;
    }
    int64_t t = tx->shape[1];
    switch (p->kind) {
    case LB_POS_SINUSOIDAL:
        return lb_add(g, x, lb_input(g, lb_sinusoidal_table(tx->dtype, t, p->d_model), 0));
    case LB_POS_LEARNED:
        if (t > p->max_seq_len) {
            lb_error(LB_ERR_VALUE, "positional (learned): sequence length T = %lld of x %s exceeds max_seq_len = %lld "
                                   "(rows of pos_embedding); raise max_seq_len or use sinusoidal, rotary or no positions",
                     (long long)t, lb_tensor_describe(tx, sx, sizeof sx), (long long)p->max_seq_len);
            return NULL;
        }
        return lb_add(g, x, lb_slice(g, p->embedding, 0, 0, t, 1));
    default:
        return x;
    }
}

lb_var *lb_positional_add_at(lb_graph *g, const lb_positional *p, lb_var *x, const int32_t *positions)
{
    LB_CHECK_ARG(g, NULL);
    LB_CHECK_ARG(p, NULL);
    LB_CHECK_INPUT(x, NULL);
    if (!x)
        return NULL;
    const lb_tensor *tx = x->value;
    char sx[128];
    if (tx->ndim != 3 || tx->shape[2] != p->d_model || !positions) {
        lb_error(LB_ERR_SHAPE, "positional (%s): x %s must be [B, C, d_model = %lld] with positions [B, C]%s",
                 lb_pos_kind_name(p->kind), lb_tensor_describe(tx, sx, sizeof sx), (long long)p->d_model,
                 positions ? "" : " (positions is NULL)");
        return NULL;
    }
    int64_t b = tx->shape[0], n = tx->shape[1], d = p->d_model;
    for (int64_t i = 0; i < b * n; i++)
        if (positions[i] < 0 || (p->kind == LB_POS_LEARNED && positions[i] >= p->max_seq_len)) {
            lb_error(LB_ERR_VALUE, "positional (%s): event %lld of stream %lld is at position %d, outside [0, %lld)%s",
                     lb_pos_kind_name(p->kind), (long long)(i % n), (long long)(i / n), (int)positions[i],
                     (long long)(p->kind == LB_POS_LEARNED ? p->max_seq_len : INT32_MAX),
                     p->kind == LB_POS_LEARNED ? ": learned positions (--pos learned) end at max_seq_len, the rows "
                                                 "of the position table"
                                               : "");
            return NULL;
        }
    if (p->kind == LB_POS_LEARNED) {
        int64_t s[2] = {b, n};
        return lb_add(g, x, lb_embedding(g, p->embedding, positions, 2, s));
    }
    if (p->kind != LB_POS_SINUSOIDAL)
        return x;
    int64_t s[3] = {b, n, d};
    lb_tensor *pe = lb_tensor_zeros(tx->dtype, 3, s);
    if (!pe)
        return NULL;
    LB_DISPATCH(tx->dtype, T, {
        T *pt = lb_tensor_data(pe);
        for (int64_t i = 0; i < b * n; i++)
            for (int64_t c = 0; c < d; c++)
                pt[i * d + c] = (T)sinusoid(positions[i], c, d);
    });
    return lb_add(g, x, lb_input(g, pe, 0));
}

/* The angle of rotary pair i at position pos (RoFormer's theta_i = base^(-2i/d)). */
static double rotary_angle(double pos, int64_t i, double base, int64_t rotary_dim)
{
    return pos * pow(base, -2.0 * (double)i / (double)rotary_dim);
}

lb_status lb_rotary_tables(lb_dtype dtype, int ndim, const int64_t *x_shape, const int32_t *positions, double base,
                           int64_t rotary_dim, lb_tensor **cos_out, lb_tensor **sin_out)
{
    LB_CHECK_ARG(sin_out, LB_ERR_VALUE);
    LB_CHECK_ARG(cos_out, LB_ERR_VALUE);
    *cos_out = *sin_out = NULL;
    int nd = ndim;
    if (nd < 2 || nd > LB_MAX_DIMS || (positions && nd < 3))
        return lb_error(LB_ERR_SHAPE, "rotary tables: x needs [B, ..., P, d] (%d dims given)%s", nd,
                        positions ? " with a batch dim (positions are [B, P])" : "");
    if (rotary_dim < 2 || rotary_dim % 2 != 0 || rotary_dim > x_shape[nd - 1])
        return lb_error(LB_ERR_VALUE, "rotary: rotary_dim = %lld must be even and in [2, d = %lld]",
                        (long long)rotary_dim, (long long)x_shape[nd - 1]);
    int64_t p = x_shape[nd - 2], h = rotary_dim / 2, b = positions ? x_shape[0] : 1;
    int64_t shape[LB_MAX_DIMS];
    for (int i = 0; i < nd; i++)
        shape[i] = 1;
    shape[0] = b;
    shape[nd - 2] = p;
    shape[nd - 1] = h;
    *cos_out = lb_tensor_zeros(dtype, nd, shape);
    *sin_out = lb_tensor_zeros(dtype, nd, shape);
    if (!*cos_out || !*sin_out) {
        lb_tensor_free(*cos_out);
        lb_tensor_free(*sin_out);
        *cos_out = *sin_out = NULL;
        return lb_last_status();
    }
    LB_DISPATCH(dtype, T, {
        T *pc = lb_tensor_data(*cos_out), *ps = lb_tensor_data(*sin_out);
        for (int64_t bi = 0; bi < b; bi++)
            for (int64_t r = 0; r < p; r++) {
                double pos = positions ? (double)positions[bi * p + r] : (double)r;
                for (int64_t i = 0; i < h; i++) {
                    double angle = rotary_angle(pos, i, base, rotary_dim);
                    pc[(bi * p + r) * h + i] = (T)cos(angle);
                    ps[(bi * p + r) * h + i] = (T)sin(angle);
                }
            }
    });
    return LB_OK;
}

lb_var *lb_rotary_ex(lb_graph *g, lb_var *x, const int32_t *positions, double base, int64_t rotary_dim,
                     lb_rotary_layout layout)
{
    LB_CHECK_INPUT(x, NULL);
    if (!x)
        return NULL;
    const lb_tensor *tx = x->value;
    char sx[128];
    lb_tensor *ct = NULL, *st = NULL;
    if (lb_rotary_tables(tx->dtype, tx->ndim, tx->shape, positions, base, rotary_dim, &ct, &st) != LB_OK) {
        lb_error_context("rotary: x %s", lb_tensor_describe(tx, sx, sizeof sx));
        return NULL;
    }
    lb_var *y = lb_rotary_embed(g, x, ct, st, layout);
    lb_tensor_free(ct);
    lb_tensor_free(st);
    return y;
}

lb_var *lb_rotary(lb_graph *g, lb_var *x, const int32_t *positions, double base)
{
    LB_CHECK_INPUT(x, NULL);
    if (!x)
        return NULL;
    const lb_tensor *tx = x->value;
    char sx[128];
    if (tx->ndim < 2 || tx->shape[tx->ndim - 1] % 2 != 0 || (positions && tx->ndim < 3)) {
        lb_error(LB_ERR_SHAPE, "rotary: x %s must be [B, ..., P, d] with d even%s", lb_tensor_describe(tx, sx, sizeof sx),
                 positions ? " and a batch dim (positions are [B, P])" : "");
        return NULL;
    }
    return lb_rotary_ex(g, x, positions, base, tx->shape[tx->ndim - 1], LB_ROTARY_HALVES);
}

void lb_positional_add_rows(const lb_positional *p, lb_dtype dtype, int64_t N, void *x, const int32_t *positions)
{
    LB_CHECK_ARG(p);
    LB_CHECK_ARG(x);
    LB_CHECK_ARG(positions);
    const int64_t d = p->d_model;
    if (p->kind == LB_POS_LEARNED) {
        const lb_tensor *e = p->embedding->value; /* [max_seq_len, d] */
        LB_DISPATCH(dtype, T, {
            const T *pe = lb_tensor_data(e);
            T *px = x; /* [N, d] */
            for (int64_t n = 0; n < N; n++)
                for (int64_t c = 0; c < d; c++)
                    px[n * d + c] = px[n * d + c] + pe[(int64_t)positions[n] * d + c];
        });
    } else if (p->kind == LB_POS_SINUSOIDAL) {
        LB_DISPATCH(dtype, T, {
            T *px = x; /* [N, d] */
            for (int64_t n = 0; n < N; n++)
                for (int64_t c = 0; c < d; c++)
                    px[n * d + c] = px[n * d + c] + (T)sinusoid(positions[n], c, d);
        });
    }
}

void lb_rotary_rows(lb_dtype dtype, int64_t N, int64_t H, int64_t d, void *x, const int32_t *positions, double base)
{
    const int64_t h = d / 2;
    LB_DISPATCH(dtype, T, {
        T *px = x; /* [N, H, d] */
        for (int64_t n = 0; n < N; n++)
            for (int64_t k = 0; k < h; k++) {
                double angle = rotary_angle((double)positions[n], k, base, d);
                T c = (T)cos(angle), s = (T)sin(angle);
                for (int64_t hh = 0; hh < H; hh++) {
                    T *r = px + (n * H + hh) * d;
                    T xa = r[k], xb = r[k + h];
                    r[k] = xa * c - xb * s;
                    r[k + h] = xb * c + xa * s;
                }
            }
    });
}

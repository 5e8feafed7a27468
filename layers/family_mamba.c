/* The "mamba" family (layers/family.h): residual blocks of the selective state-space
 * model of Gu & Dao 2023 ("Mamba: Linear-Time Sequence Modeling with Selective State
 * Spaces", section 3 and Algorithm 2; the block of the authors' mamba_simple.Mamba with
 * the reference scan selective_scan_ref), stacked as the paper does: each block
 * x + Mamba(RMSNorm(x)), a final RMSNorm, then the head.
 *
 * One block on h [B, T, D] (E = expand, Di = E D, N d_state, K d_conv, R dt_rank):
 *   [x, z]  = h in_proj                              [B, T, 2 Di] (no bias)
 *   x       = silu(depthwise causal conv1d(x) + conv_bias)   (kernel K, zeros before t = 0)
 *   [δ, B, C] = x x_proj                             [B, T, R + 2N] (no bias)
 *   Δ       = softplus(δ dt_proj.weight + dt_proj.bias)      [B, T, Di]
 *   A       = -exp(A_log)                            [Di, N]
 *   y       = selective_scan(x, Δ, A, B, C) + D ⊙ x  (autograd lb_selective_scan)
 *   out     = (y ⊙ silu(z)) out_proj                 [B, T, D] (no bias)
 * RMSNorm (Zhang & Sennrich 2019): x / sqrt(mean(x²) + 1e-5) ⊙ weight, as a composition of
 * ops (torch.nn.RMSNorm(D, eps=1e-5)).
 *
 * Named dims: B batch (streams), T seq_len, C chunk events, L n_layers, D d_model,
 * Di d_inner, N d_state, K d_conv, R dt_rank.
 *
 * Parameters (after the input's), per block i: "layers.<i>.norm.weight" [D],
 * "layers.<i>.in_proj.weight" [D, 2 Di], "layers.<i>.conv1d.weight" [Di, 1, K],
 * "layers.<i>.conv1d.bias" [Di], "layers.<i>.x_proj.weight" [Di, R + 2N],
 * "layers.<i>.dt_proj.weight" [R, Di], "layers.<i>.dt_proj.bias" [Di],
 * "layers.<i>.A_log" [Di, N], "layers.<i>.D" [Di], "layers.<i>.out_proj.weight" [Di, D];
 * then "norm_f.weight" [D]. Linear weights are stored [in, out] (layers/linear.h;
 * PyTorch's are their transposes; the conv weight has PyTorch's layout, groups = Di). Initialisation as the authors' code where it is specific to Mamba:
 * A_log[d, n] = log(n + 1) (S4D-real), D = 1, dt_proj.bias = softplus⁻¹(dt) with dt
 * log-uniform in [0.001, 0.1], dt_proj.weight U(±R^-1/2), the conv PyTorch's Conv1d
 * default U(±1/sqrt(K)); the other projections Xavier uniform (lookback's linear layers),
 * norms 1.
 *
 * Streaming state per stream: per block the last K - 1 inputs of the convolution and
 * the scan's state h [Di, N], L (Di N + (K - 1) Di) values, whatever the length.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kernels/selective_scan.h"
#include "kernels/stream.h"
#include "layers/model_internal.h"

#define RMS_EPS 1e-5

typedef struct mamba_block {
    lb_var *norm;               /* [D] */
    lb_linear in_proj;          /* [D, 2 Di] */
    lb_var *conv_w, *conv_b;    /* [Di, 1, K], [Di] */
    lb_linear x_proj;           /* [Di, R + 2N] */
    lb_linear dt_proj;          /* [R, Di] + [Di] */
    lb_var *A_log, *D;          /* [Di, N], [Di] */
    lb_linear out_proj;         /* [Di, D] */
} mamba_block;

typedef struct mamba_body {
    mamba_block *blocks; /* [L] */
    lb_var *norm_f;      /* [D] */
} mamba_body;

/* ---- configuration ---- */

static int64_t d_inner(const lb_model_config *c) { return c->expand * c->d_model; }
static int64_t dt_rank(const lb_model_config *c) { return c->dt_rank > 0 ? c->dt_rank : (c->d_model + 15) / 16; }

static int64_t body_width(const lb_model_config *c) { return c->d_model; }
static double layer_floats(const lb_model_config *c) { return (double)c->d_model + 2.0 * (double)d_inner(c); }
static double state_floats(const lb_model_config *c, int64_t t)
{
    (void)t;
    return (double)c->n_layers * (double)d_inner(c) * (double)(c->d_state + c->d_conv - 1);
}

static void size(lb_model_config *c, const lb_family_size *s)
{
    c->d_model = s->width;
    c->n_layers = s->layers;
}

static void describe(const lb_model_config *c, char *text, size_t size)
{
    snprintf(text, size, "%d block%s, d_model %lld, d_inner %lld, d_state %lld, d_conv %lld, dt_rank %lld", c->n_layers,
             c->n_layers == 1 ? "" : "s", (long long)c->d_model, (long long)d_inner(c), (long long)c->d_state,
             (long long)c->d_conv, (long long)dt_rank(c));
}

/* Per position and block: in_proj 2 D 2Di, x_proj 2 Di (R + 2N), dt_proj 2 R Di, out_proj
 * 2 Di D, and the scan's two contractions per channel and state (Δ B u into h, C against
 * h), 4 Di N; the depthwise convolution 2 K Di. No attention term. */
static double flops(const lb_model_config *c, int64_t t, int64_t read, double *attention)
{
    (void)read;
    *attention = 0;
    const double d = (double)c->d_model, di = (double)d_inner(c), n = (double)c->d_state, r = (double)dt_rank(c);
    const double per = 4 * d * di + 2 * di * (r + 2 * n) + 2 * r * di + 2 * di * d + 4 * di * n +
                       2 * (double)c->d_conv * di;
    return (double)t * c->n_layers * per;
}

static lb_status check(const lb_model_config *c)
{
    if (c->expand * c->d_model > 1 << 20)
        return lb_error(LB_ERR_VALUE, "model config: d_inner = expand %lld x d_model %lld is more than 2^20 channels",
                        (long long)c->expand, (long long)c->d_model);
    return LB_OK;
}

/* ---- parameters ---- */

static lb_var *param(lb_model *m, const char *prefix, const char *name, int ndim, const int64_t *shape)
{
    return lb_params_add(&m->params, prefix, name, m->cfg.dtype, ndim, shape);
}

static lb_status build_block(lb_model *m, mamba_block *k, const char *prefix, lb_rng *r)
{
    const lb_model_config *c = &m->cfg;
    const int64_t d = c->d_model, di = d_inner(c), n = c->d_state, kc = c->d_conv, rank = dt_rank(c);
    char name[96];
    if (!(k->norm = param(m, prefix, "norm.weight", 1, (int64_t[]){d})))
        return lb_last_status();
    lb_init_constant(k->norm, 1);
    snprintf(name, sizeof name, "%s.in_proj", prefix);
    if (lb_linear_init(&k->in_proj, &m->params, name, d, 2 * di, 0, c->dtype, r) != LB_OK)
        return lb_last_status();
    if (!(k->conv_w = param(m, prefix, "conv1d.weight", 3, (int64_t[]){di, 1, kc})) ||
        !(k->conv_b = param(m, prefix, "conv1d.bias", 1, (int64_t[]){di})))
        return lb_last_status();
    lb_init_uniform(k->conv_w, r, 1 / sqrt((double)kc));
    lb_init_uniform(k->conv_b, r, 1 / sqrt((double)kc));
    snprintf(name, sizeof name, "%s.x_proj", prefix);
    if (lb_linear_init(&k->x_proj, &m->params, name, di, rank + 2 * n, 0, c->dtype, r) != LB_OK)
        return lb_last_status();
    snprintf(name, sizeof name, "%s.dt_proj", prefix);
    if (lb_linear_init(&k->dt_proj, &m->params, name, rank, di, 1, c->dtype, r) != LB_OK)
        return lb_last_status();
    lb_init_uniform(k->dt_proj.weight, r, 1 / sqrt((double)rank));
    /* dt log-uniform in [dt_min, dt_max], floored at 1e-4; bias = softplus⁻¹(dt) = dt + log(-expm1(-dt)) */
    for (int64_t i = 0; i < di; i++) {
        double dt = exp(lb_rng_uniform(r) * (log(0.1) - log(0.001)) + log(0.001));
        dt = dt < 1e-4 ? 1e-4 : dt;
        lb_tensor_set(k->dt_proj.bias->value, (int64_t[]){i}, dt + log(-expm1(-dt)));
    }
    if (!(k->A_log = param(m, prefix, "A_log", 2, (int64_t[]){di, n})) ||
        !(k->D = param(m, prefix, "D", 1, (int64_t[]){di})))
        return lb_last_status();
    for (int64_t i = 0; i < di; i++)
        for (int64_t j = 0; j < n; j++)
            lb_tensor_set(k->A_log->value, (int64_t[]){i, j}, log((double)(j + 1)));
    lb_init_constant(k->D, 1);
    snprintf(name, sizeof name, "%s.out_proj", prefix);
    if (lb_linear_init(&k->out_proj, &m->params, name, di, d, 0, c->dtype, r) != LB_OK)
        return lb_last_status();
    return LB_OK;
}

static lb_status build(lb_model *m, lb_rng *r_pos, lb_rng *r_body)
{
    (void)r_pos;
    const lb_model_config *c = &m->cfg;
    mamba_body *body = calloc(1, sizeof *body);
    if (!body || !(body->blocks = calloc((size_t)c->n_layers, sizeof *body->blocks))) {
        free(body);
        return lb_error(LB_ERR_MEMORY, "model: out of memory for %d Mamba blocks", c->n_layers);
    }
    m->family_body = body;
    char prefix[64];
    for (int i = 0; i < c->n_layers; i++) {
        snprintf(prefix, sizeof prefix, "layers.%d", i);
        if (build_block(m, &body->blocks[i], prefix, r_body) != LB_OK)
            return lb_last_status();
    }
    if (!(body->norm_f = param(m, "norm_f", "weight", 1, (int64_t[]){c->d_model})))
        return lb_last_status();
    lb_init_constant(body->norm_f, 1);
    return LB_OK;
}

static void model_free(lb_model *m)
{
    mamba_body *body = m->family_body;
    if (body)
        free(body->blocks);
    free(body);
    m->family_body = NULL;
}

/* ---- forward ---- */

static lb_var *silu(lb_graph *g, lb_var *x) { return lb_mul(g, x, lb_sigmoid(g, x)); }

/* x [..., D] / sqrt(mean(x²) + eps) ⊙ weight [D] */
static lb_var *rms_norm(lb_graph *g, lb_var *x, lb_var *weight)
{
    if (!x)
        return NULL;
    lb_var *ms = lb_mean_axes(g, lb_mul(g, x, x), 1, (int[]){-1}, 1);
    lb_var *eps = lb_input(g, lb_tensor_scalar(x->value->dtype, RMS_EPS), 0);
    lb_var *inv = lb_exp(g, lb_scale(g, lb_log(g, lb_add(g, ms, eps)), -0.5));
    return lb_mul(g, lb_mul(g, x, inv), weight);
}

/* The depthwise causal convolution: x [B, T, Di], weight [Di, 1, K], bias [Di] ->
 * y[b, t, d] = bias[d] + Σ_j weight[d, j] x[b, t - (K - 1 - j), d], zeros before t = 0
 * (torch.nn.Conv1d(Di, Di, K, groups=Di, padding=K - 1) truncated to its first T outputs). */
static lb_var *depthwise_conv(lb_graph *g, lb_var *x, lb_var *weight, lb_var *bias)
{
    if (!x)
        return NULL;
    const int64_t b = x->value->shape[0], t = x->value->shape[1], di = x->value->shape[2], k = weight->value->shape[2];
    lb_var *y = bias;
    for (int64_t j = 0; y && j < k; j++) {
        const int64_t shift = k - 1 - j;
        if (shift >= t)
            continue;
        lb_var *shifted = x;
        if (shift > 0) {
            lb_var *parts[2] = {lb_input(g, lb_tensor_zeros(x->value->dtype, 3, (int64_t[]){b, shift, di}), 0),
                                lb_slice(g, x, 1, 0, t - shift, 1)};
            shifted = lb_concat(g, 2, parts, 1);
        }
        lb_var *tap = lb_reshape(g, lb_slice(g, weight, 2, j, j + 1, 1), 1, (int64_t[]){di});
        y = lb_add(g, y, lb_mul(g, shifted, tap));
    }
    return y;
}

/* What the scan reads, from the convolution's output xc [B, T, Di]. */
typedef struct scan_inputs {
    lb_var *delta, *A, *Bm, *Cm; /* [B, T, Di] before softplus; [Di, N]; [B, T, N] twice */
} scan_inputs;

static scan_inputs scan_inputs_of(lb_graph *g, const lb_model_config *c, const mamba_block *k, lb_var *xc)
{
    const int64_t rank = dt_rank(c), n = c->d_state;
    lb_var *x_dbl = lb_linear_forward(g, &k->x_proj, xc); /* [B, T, R + 2N] */
    scan_inputs s;
    s.delta = lb_linear_forward(g, &k->dt_proj, lb_slice(g, x_dbl, 2, 0, rank, 1));
    s.Bm = lb_slice(g, x_dbl, 2, rank, rank + n, 1);
    s.Cm = lb_slice(g, x_dbl, 2, rank + n, rank + 2 * n, 1);
    s.A = lb_neg(g, lb_exp(g, k->A_log));
    return s;
}

/* The block's end: (y + D ⊙ xc) ⊙ silu(z), out_proj, added to the residual h. */
static lb_var *block_out(lb_graph *g, const mamba_block *k, lb_var *h, lb_var *y, lb_var *xc, lb_var *z)
{
    lb_var *gated = lb_mul(g, lb_add(g, y, lb_mul(g, xc, k->D)), silu(g, z));
    return lb_add(g, h, lb_linear_forward(g, &k->out_proj, gated));
}

static lb_var *forward(lb_graph *g, const lb_model *m, lb_var *x, const lb_model_input *in, const lb_attn_queries *read,
                       int training, lb_rng *rng, lb_var **weights)
{
    (void)in, (void)training, (void)rng, (void)weights;
    const lb_model_config *c = &m->cfg;
    const mamba_body *body = m->family_body;
    const int64_t di = d_inner(c);
    for (int i = 0; x && i < c->n_layers; i++) {
        const mamba_block *k = &body->blocks[i];
        lb_var *xz = lb_linear_forward(g, &k->in_proj, rms_norm(g, x, k->norm));
        lb_var *xc = silu(g, depthwise_conv(g, lb_slice(g, xz, 2, 0, di, 1), k->conv_w, k->conv_b));
        scan_inputs s = scan_inputs_of(g, c, k, xc);
        lb_var *y = lb_selective_scan(g, xc, s.delta, s.A, s.Bm, s.Cm);
        x = block_out(g, k, x, y, xc, lb_slice(g, xz, 2, di, 2 * di, 1));
    }
    x = rms_norm(g, x, body->norm_f);
    return read && x ? lb_gather_positions(g, x, read) : x;
}

/* ---- streaming: per block the convolution's last K - 1 inputs and the scan state ---- */

typedef struct mamba_state {
    lb_tensor **hist, **hist_next; /* L histories [B, K - 1, Di] (NULL when K = 1) */
    lb_tensor **h, **h_next;       /* L scan states [B, Di, N] */
} mamba_state;

static lb_status state_new(lb_model_state *s, const lb_stream_options *o)
{
    (void)o;
    const lb_model_config *c = &s->model->cfg;
    const int64_t di = d_inner(c);
    mamba_state *v = calloc(1, sizeof *v);
    if (!v)
        return lb_error(LB_ERR_MEMORY, "model state: out of memory");
    s->body = v;
    const size_t l = (size_t)c->n_layers;
    if (!(v->hist = calloc(l, sizeof *v->hist)) || !(v->hist_next = calloc(l, sizeof *v->hist)) ||
        !(v->h = calloc(l, sizeof *v->h)) || !(v->h_next = calloc(l, sizeof *v->h)))
        return lb_error(LB_ERR_MEMORY, "model state: out of memory");
    for (int i = 0; i < c->n_layers; i++) {
        int64_t hs[3] = {s->batch, c->d_conv - 1, di}, ss[3] = {s->batch, di, c->d_state};
        if ((hs[1] > 0 && (!(v->hist[i] = lb_tensor_zeros(c->dtype, 3, hs)) ||
                           !(v->hist_next[i] = lb_tensor_zeros(c->dtype, 3, hs)))) ||
            !(v->h[i] = lb_tensor_zeros(c->dtype, 3, ss)) || !(v->h_next[i] = lb_tensor_zeros(c->dtype, 3, ss)))
            return lb_last_status();
    }
    return LB_OK;
}

static void state_free(lb_model_state *s)
{
    mamba_state *v = s->body;
    if (!v)
        return;
    for (int i = 0; i < s->model->cfg.n_layers; i++) {
        if (v->hist && v->hist_next) {
            lb_tensor_free(v->hist[i]);
            lb_tensor_free(v->hist_next[i]);
        }
        if (v->h && v->h_next) {
            lb_tensor_free(v->h[i]);
            lb_tensor_free(v->h_next[i]);
        }
    }
    free(v->hist);
    free(v->hist_next);
    free(v->h);
    free(v->h_next);
    free(v);
}

static void state_reset(lb_model_state *s, int64_t b)
{
    mamba_state *v = s->body;
    for (int i = 0; i < s->model->cfg.n_layers; i++) {
        if (v->hist[i])
            lb_model_zero_stream_rows(v->hist[i], 0, b);
        lb_model_zero_stream_rows(v->h[i], 0, b);
    }
}

static size_t state_bytes(const lb_model_state *s, int64_t b)
{
    (void)b;
    const lb_model_config *c = &s->model->cfg;
    return (size_t)state_floats(c, 0) * lb_dtype_size(c->dtype);
}

static size_t state_allocated(const lb_model_state *s)
{
    const mamba_state *v = s->body;
    size_t total = 0;
    for (int i = 0; i < s->model->cfg.n_layers; i++)
        total += lb_model_tensor_bytes(v->hist[i]) + lb_model_tensor_bytes(v->hist_next[i]) +
                 lb_model_tensor_bytes(v->h[i]) + lb_model_tensor_bytes(v->h_next[i]);
    return total;
}

/* The blocks over the chunk x [B, C, D] -> [B, C, D] from the carried state: each block's
 * convolution reads [history, chunk] and keeps the last K - 1 inputs up to each stream's
 * last valid event in hist_next; the scan starts from h and leaves the state after each
 * stream's last valid event in h_next. */
static lb_var *chunk(lb_model_state *s, lb_var *x, const lb_decode_chunk *ch, int ragged)
{
    (void)ragged;
    lb_graph *g = s->graph;
    const lb_model *m = s->model;
    const lb_model_config *c = &m->cfg;
    const mamba_body *body = m->family_body;
    mamba_state *v = s->body;
    const int64_t n = x->value->shape[1], di = d_inner(c), r = c->d_conv - 1;
    int64_t *zero = calloc((size_t)s->batch, sizeof *zero), *rows = calloc((size_t)s->batch, sizeof *rows);
    if (!zero || !rows) {
        free(zero);
        free(rows);
        lb_error(LB_ERR_MEMORY, "mamba step: out of memory");
        return NULL;
    }
    for (int64_t b = 0; b < s->batch; b++)
        rows[b] = r;
    for (int i = 0; x && i < c->n_layers; i++) {
        const mamba_block *k = &body->blocks[i];
        lb_var *xz = lb_linear_forward(g, &k->in_proj, rms_norm(g, x, k->norm));
        lb_var *xi = lb_slice(g, xz, 2, 0, di, 1), *xc = NULL;
        if (r == 0) {
            xc = silu(g, depthwise_conv(g, xi, k->conv_w, k->conv_b));
        } else if (xi) {
            lb_var *parts[2] = {lb_input_copy(g, v->hist[i], 0), xi};
            lb_var *ext = lb_concat(g, 2, parts, 1); /* [B, K - 1 + C, Di] */
            if (ext && lb_k_copy_rows(v->hist_next[i], zero, ext->value, ch->valid, rows) == LB_OK)
                xc = silu(g, lb_slice(g, depthwise_conv(g, ext, k->conv_w, k->conv_b), 1, r, r + n, 1));
        }
        if (!xc) {
            x = NULL;
            break;
        }
        scan_inputs in = scan_inputs_of(g, c, k, xc);
        lb_tensor *y = in.Cm ? lb_tensor_zeros(c->dtype, 3, xc->value->shape) : NULL;
        if (!y || lb_k_selective_scan(c->dtype, s->batch, n, di, c->d_state, lb_tensor_data(xc->value),
                                      lb_tensor_data(in.delta->value), lb_tensor_data(in.A->value),
                                      lb_tensor_data(in.Bm->value), lb_tensor_data(in.Cm->value),
                                      lb_tensor_data(v->h[i]), ch->valid, lb_tensor_data(v->h_next[i]),
                                      lb_tensor_data(y)) != LB_OK) {
            lb_tensor_free(y);
            x = NULL;
            break;
        }
        x = block_out(g, k, x, lb_input(g, y, 0), xc, lb_slice(g, xz, 2, di, 2 * di, 1));
    }
    free(zero);
    free(rows);
    return rms_norm(g, x, body->norm_f);
}

static void commit(lb_model_state *s, const int64_t *valid)
{
    (void)valid; /* chunk kept each stream's state after its last valid event */
    mamba_state *v = s->body;
    for (int i = 0; i < s->model->cfg.n_layers; i++) {
        lb_tensor *t = v->hist[i];
        v->hist[i] = v->hist_next[i];
        v->hist_next[i] = t;
        t = v->h[i];
        v->h[i] = v->h_next[i];
        v->h_next[i] = t;
    }
}

static const lb_family_ops ops = {check,     build, NULL,       model_free,  forward,     lb_family_no_scratch,
                                  state_new, NULL,  state_free, state_reset, state_bytes, state_allocated,
                                  NULL,      chunk, NULL,       commit,      NULL};

const lb_family lb_family_mamba = {LB_MODEL_MAMBA, "mamba",
                                   "selective state-space blocks with RMSNorm residuals (Mamba, Gu & Dao 2023)", 0,
                                   NULL, lb_family_always, lb_family_any_length, lb_family_never, body_width,
                                   layer_floats, state_floats, size, describe, &ops, flops};

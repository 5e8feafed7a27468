/* The attention families (layers/family.h): "transformer", pre-norm transformer blocks
 * with full causal attention, and "local", the same blocks with sliding-window attention
 * of `window` keys (Beltagy et al. 2020's sliding window, causal).
 *
 * Named dims: B batch (streams), T seq_len, C chunk events, L n_layers, D d_model,
 * F d_ff, W window, P read positions.
 *
 * Parameters (after the input's): "pos_embedding" [max_seq_len, D] (learned positions
 * only), then "blocks.<i>.*" and "ln_f.*" (pre-norm only; layers/transformer.h). The
 * blocks follow the fields norm, norm_position and ffn (layers/norm.h, layers/ffn.h).
 * Streaming state per stream: per layer a key-value cache, 2 L T D values (transformer;
 * max_context N keeps the last N) or 2 L min(T, W) D (local).
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "layers/model_internal.h"

enum { DEFAULT_CAPACITY = 256 };

/* ---- configuration ---- */

static int is_local(const lb_model_config *c) { return c->kind == LB_MODEL_LOCAL; }

static void local_defaults(lb_model_config *c) { c->window = 16; }

static int is_causal(const lb_model_config *c) { return c->causal != 0; }

static int64_t max_positions(const lb_model_config *c) { return c->pos == LB_POS_LEARNED ? c->max_seq_len : 0; }

/* Full attention was trained on windows of the training length; local attention with
 * relative positions (rotary, alibi or none) computes the same at any length from its
 * window, and ALiBi is built to run past its training length (Press et al. 2022). */
static int crops_context(const lb_model_config *c)
{
    int relative = c->pos == LB_POS_NONE || c->pos == LB_POS_ROTARY || c->pos == LB_POS_ALIBI;
    return !(is_local(c) && relative) && c->pos != LB_POS_ALIBI;
}

static int64_t body_width(const lb_model_config *c) { return c->d_model; }

/* The feed-forward hidden values per position: d_ff, or a gated layer's 2 d_ff and d_ff. */
static double ffn_floats(const lb_model_config *c) { return c->ffn == LB_FFN_GELU ? (double)c->d_ff : 3.0 * (double)c->d_ff; }

static double layer_floats(const lb_model_config *c) { return (double)c->d_model + ffn_floats(c); }

static double state_floats(const lb_model_config *c, int64_t t)
{
    int64_t held = is_local(c) && c->window < t ? c->window : t;
    double d_kv = (double)(c->d_model / c->n_heads) * lb_model_kv_heads(c); /* the cached key/value heads' width */
    return 2.0 * c->n_layers * (double)held * d_kv;
}

static void size(lb_model_config *c, const lb_family_size *s)
{
    c->n_heads = 4;
    c->d_model = s->width;
    c->d_ff = 2 * s->width;
    c->n_layers = s->layers;
    if (is_local(c))
        c->window = s->window;
}

static void describe(const lb_model_config *c, char *text, size_t size)
{
    char window[32] = "";
    if (is_local(c))
        snprintf(window, sizeof window, ", window %lld", (long long)c->window);
    snprintf(text, size, "%d block%s, d_model %lld, %d heads, %s positions%s", c->n_layers, c->n_layers == 1 ? "" : "s",
             (long long)c->d_model, c->n_heads, lb_pos_kind_name(c->pos), window);
}

static lb_status check(const lb_model_config *c)
{
#define BAD(...) lb_error(LB_ERR_VALUE, "model config: " __VA_ARGS__)
    if (c->pos < LB_POS_NONE || c->pos > LB_POS_ALIBI)
        return BAD("pos = %d is not none, sinusoidal, learned, rotary or alibi", (int)c->pos);
    if (c->length_scale < LB_LENGTH_SCALE_NONE || c->length_scale > LB_LENGTH_SCALE_SCALABLE)
        return BAD("length_scale = %d is not none, log-n or scalable", (int)c->length_scale);
    if (c->norm < LB_NORM_LAYERNORM || c->norm > LB_NORM_RMSNORM)
        return BAD("norm = %d is neither layernorm nor rmsnorm", (int)c->norm);
    if (c->norm_position < LB_NORM_PRE || c->norm_position > LB_NORM_POST)
        return BAD("norm_position = %d is neither pre nor post", (int)c->norm_position);
    if (c->ffn < LB_FFN_GELU || c->ffn > LB_FFN_GEGLU)
        return BAD("ffn = %d is not gelu, swiglu or geglu", (int)c->ffn);
    if (c->d_model % c->n_heads != 0)
        return BAD("d_model = %lld is not divisible by n_heads = %d (every head gets an equal share of the width)",
                   (long long)c->d_model, c->n_heads);
    if (c->n_kv_heads > 0 && c->n_heads % c->n_kv_heads != 0)
        return BAD("--kv-heads %d does not divide --heads %d (n_kv_heads must divide n_heads: each key/value head "
                   "serves an equal group of query heads)",
                   c->n_kv_heads, c->n_heads);
    if (c->pos == LB_POS_ROTARY && (c->d_model / c->n_heads) % 2 != 0)
        return BAD("rotary positions need an even head width, but d_model / n_heads = %lld",
                   (long long)(c->d_model / c->n_heads));
    if (is_local(c) && c->window < 1)
        return BAD("window = %lld must be >= 1 for local attention (keys each query sees, itself included)",
                   (long long)c->window);
    return LB_OK;
#undef BAD
}

/* Keys query position i (0-based) of t reads: the mask's causal and window limits. */
static double keys_read(const lb_model_config *c, int64_t i, int64_t t)
{
    int64_t n = c->causal ? i + 1 : t;
    return is_local(c) && c->causal && c->window < n ? (double)c->window : (double)n;
}

/* Per block: Q, K, V and output projections 8 D² and the feed-forward layer 4 D F per
 * position, 4 D per key read (Q Kᵀ and weights · V). The last block computes the read
 * queries only, but K and V of every position. */
static double flops(const lb_model_config *c, int64_t t, int64_t read, double *attention)
{
    const double d = (double)c->d_model, f = (double)c->d_ff;
    double keys_all = 0, keys_last = 0;
    for (int64_t i = 0; i < t; i++) {
        double k = keys_read(c, i, t);
        keys_all += k;
        if (i >= t - read)
            keys_last += k;
    }
    const double per_query = 4 * d * d + 4 * d * f; /* Q, output projection, feed-forward */
    double dense = (c->n_layers - 1) * (double)t * (8 * d * d + 4 * d * f) + (double)t * 4 * d * d +
                   (double)read * per_query;
    *attention = 4 * d * ((c->n_layers - 1) * keys_all + keys_last);
    return dense + *attention;
}

/* ---- parameters ---- */

static lb_status build(lb_model *m, lb_rng *r_pos, lb_rng *r_body)
{
    const lb_model_config *c = &m->cfg;
    if (lb_positional_init(&m->pos, &m->params, NULL, c->pos, c->max_seq_len, c->d_model, c->dtype, r_pos) != LB_OK)
        return lb_last_status();
    lb_transformer_config tc = {c->d_model,  c->n_heads,      c->d_ff,        c->dropout, c->pos == LB_POS_ROTARY,
                                c->n_layers, c->length_scale, c->max_seq_len, !c->bias,
                                lb_model_kv_heads(c),  c->pos == LB_POS_ALIBI, c->norm,   c->norm_position,
                                c->ffn};
    return lb_transformer_init(&m->transformer, &m->params, NULL, &tc, c->dtype, r_body);
}

/* GPT-2's initialisation (lb_init_scheme), drawn from one stream of `rng` in parameter
 * order: every parameter of 2 or more dims N(0, 0.02^2), the residual output
 * projections N(0, (0.02 / sqrt(2 n_layers))^2), every 1-dim parameter kept (biases 0,
 * LayerNorm weights 1, softmax scales as initialised). */
static void finish(lb_model *m, lb_rng *rng)
{
    if (m->cfg.init != LB_INIT_GPT2)
        return;
    lb_rng r = lb_rng_split(rng);
    const double std = 0.02, residual_std = 0.02 / sqrt(2.0 * m->cfg.n_layers);
    for (int i = 0; i < m->params.count; i++) {
        lb_var *p = m->params.items[i];
        if (p->value->ndim < 2)
            continue;
        int residual = 0;
        for (int k = 0; k < m->transformer.n_layers; k++)
            residual |= p == m->transformer.blocks[k].attn.w_o || p == m->transformer.blocks[k].ffn.fc2.weight;
        lb_init_normal(p, &r, residual ? residual_std : std);
    }
}

static void model_free(lb_model *m) { lb_transformer_free(&m->transformer); }

/* ---- forward ---- */

static lb_var *forward(lb_graph *g, const lb_model *m, lb_var *x, const lb_model_input *in, const lb_attn_queries *read,
                       int training, lb_rng *rng, lb_var **weights)
{
    const lb_model_config *c = &m->cfg;
    x = lb_positional_add(g, &m->pos, x);
    if (training && c->dropout > 0)
        x = lb_dropout(g, x, c->dropout, training, rng);
    lb_attn_mask mask = {0};
    mask.causal = c->causal;
    mask.window = is_local(c) ? c->window : 0;
    mask.key_lengths = in->lengths;
    /* With read positions the last block computes only those. */
    return lb_transformer_forward(g, &m->transformer, x, &mask, read, training, rng, weights);
}

/* ---- streaming ---- */

typedef struct attention_state {
    lb_kv_cache *caches;   /* L caches */
    int64_t window;        /* keys each query sees (0 = all) */
    lb_mha_step_work work; /* the event step's per-layer buffers (shared by the layers) */
} attention_state;

/* lb_ffn_rows' scratch: d_ff, or a gated layer's 3 d_ff. */
static int64_t scratch_width(const lb_model_config *c) { return (int64_t)ffn_floats(c); }

static lb_status state_new(lb_model_state *s, const lb_stream_options *o)
{
    const lb_model_config *c = &s->model->cfg;
    const int64_t b = s->batch, d = c->d_model;
    const size_t es = lb_dtype_size(c->dtype);
    attention_state *a = calloc(1, sizeof *a);
    if (!a)
        return lb_error(LB_ERR_MEMORY, "model state: out of memory");
    s->body = a;
    a->window = is_local(c) ? c->window : 0;
    if (o->max_context > 0 && (a->window == 0 || o->max_context < a->window))
        a->window = o->max_context;
    /* max_bytes shared by the L caches, 2 B D_kv values per cached event each (D_kv = the
     * key/value heads' width, d_model / (n_heads / n_kv_heads)). */
    const int n_kv = lb_model_kv_heads(c);
    const int64_t d_head = d / c->n_heads;
    int64_t max_rows = 0;
    size_t per_row = (size_t)c->n_layers * 2 * (size_t)b * (size_t)(d_head * n_kv) * es;
    if (o->max_bytes > 0) {
        max_rows = (int64_t)(o->max_bytes / per_row);
        if (max_rows < 1 || (a->window > 0 && max_rows < a->window))
            return lb_error(LB_ERR_MEMORY, "model state: max_bytes = %zu cannot hold %lld cached events for %lld "
                                           "streams (%zu bytes each)",
                            o->max_bytes, (long long)(a->window > 0 ? a->window : 1), (long long)b, per_row);
    }
    int64_t capacity = o->capacity > 0 ? o->capacity : DEFAULT_CAPACITY;
    if (a->window > 0 && o->capacity <= 0)
        capacity = 2 * a->window;
    if (!(a->caches = calloc((size_t)c->n_layers, sizeof *a->caches)))
        return lb_error(LB_ERR_MEMORY, "model state: out of memory");
    for (int i = 0; i < c->n_layers; i++)
        if (lb_kv_cache_init(&a->caches[i], c->dtype, b, n_kv, d_head, capacity, a->window, max_rows) != LB_OK)
            return lb_last_status();
    return LB_OK;
}

static lb_status work_new(lb_model_state *s)
{
    attention_state *a = s->body;
    if (lb_mha_step_work_init(&a->work, &s->model->transformer.blocks[0].attn, s->model->cfg.dtype, s->batch) != LB_OK)
        return lb_last_status();
    s->work_bytes += lb_mha_step_work_bytes(&a->work);
    return LB_OK;
}

static void state_free(lb_model_state *s)
{
    attention_state *a = s->body;
    if (!a)
        return;
    for (int i = 0; a->caches && i < s->model->cfg.n_layers; i++)
        lb_kv_cache_free(&a->caches[i]);
    free(a->caches);
    lb_mha_step_work_free(&a->work);
    free(a);
}

static void state_reset(lb_model_state *s, int64_t b)
{
    attention_state *a = s->body;
    for (int i = 0; i < s->model->cfg.n_layers; i++)
        lb_kv_cache_clear(&a->caches[i], b);
}

static size_t state_bytes(const lb_model_state *s, int64_t b)
{
    const attention_state *a = s->body;
    const lb_model_config *c = &s->model->cfg;
    int64_t held = a->caches[0].length[b];
    if (a->window > 0 && held > a->window)
        held = a->window;
    size_t d_kv = (size_t)(a->caches[0].n_heads * a->caches[0].d_head); /* the cached key/value heads' width */
    return 2 * (size_t)c->n_layers * (size_t)held * d_kv * lb_dtype_size(c->dtype);
}

static size_t state_allocated(const lb_model_state *s)
{
    const attention_state *a = s->body;
    size_t total = 0;
    for (int i = 0; i < s->model->cfg.n_layers; i++)
        total += lb_kv_cache_bytes(&a->caches[i]);
    return total;
}

static lb_status reserve(lb_model_state *s, int64_t n)
{
    attention_state *a = s->body;
    for (int i = 0; i < s->model->cfg.n_layers; i++)
        if (lb_kv_cache_reserve(&a->caches[i], n) != LB_OK)
            return lb_last_status();
    return LB_OK;
}

static lb_var *chunk(lb_model_state *s, lb_var *x, const lb_decode_chunk *ch, int ragged)
{
    (void)ragged; /* the caches keep each stream's valid events */
    const lb_model *m = s->model;
    attention_state *a = s->body;
    return lb_transformer_forward_cached(s->graph, &m->transformer, lb_positional_add_at(s->graph, &m->pos, x, ch->positions),
                                         a->caches, ch);
}

/* x[i] += y[i] for n values. */
static void add_rows(lb_dtype dt, int64_t n, void *x, const void *y)
{
    LB_DISPATCH(dt, T, {
        T *px = x;
        const T *py = y;
        for (int64_t j = 0; j < n; j++)
            px[j] = px[j] + py[j];
    });
}

/* The transformer stack on one event per stream: s->x [B, D] with positions added here;
 * pre-norm blocks then ln_f, or post-norm blocks (layers/transformer.h). Returns [B, D]
 * (s->a, or s->x after post-norm blocks). */
static const void *event(lb_model_state *s, const lb_decode_chunk *ch)
{
    const lb_model *m = s->model;
    const lb_transformer *tr = &m->transformer;
    const lb_model_config *c = &m->cfg;
    attention_state *a = s->body;
    const lb_dtype dt = c->dtype;
    const int64_t b = s->batch, d = c->d_model;
    lb_positional_add_rows(&m->pos, dt, b, s->x, ch->positions);
    for (int i = 0; i < tr->n_layers; i++) {
        const lb_transformer_block *blk = &tr->blocks[i];
        if (blk->norm_position == LB_NORM_POST) { /* x = LN1(x + MHA(x)); x = LN2(x + FFN(x)) */
            if (lb_mha_step(&blk->attn, s->x, &a->caches[i], ch, &a->work, s->f) != LB_OK)
                return NULL;
            add_rows(dt, b * d, s->x, s->f);
            lb_norm_rows(&blk->ln1, dt, b, s->x, s->x);
            lb_ffn_rows(&blk->ffn, dt, b, s->x, s->f, s->a);
            add_rows(dt, b * d, s->x, s->a);
            lb_norm_rows(&blk->ln2, dt, b, s->x, s->x);
            continue;
        }
        /* x = x + MHA(LN1(x)); x = x + FFN(LN2(x)) */
        lb_norm_rows(&blk->ln1, dt, b, s->x, s->a);
        if (lb_mha_step(&blk->attn, s->a, &a->caches[i], ch, &a->work, s->f) != LB_OK)
            return NULL;
        add_rows(dt, b * d, s->x, s->f);
        lb_norm_rows(&blk->ln2, dt, b, s->x, s->a);
        lb_ffn_rows(&blk->ffn, dt, b, s->a, s->f, s->a);
        add_rows(dt, b * d, s->x, s->a);
    }
    if (!tr->ln_f.weight)
        return s->x;
    lb_norm_rows(&tr->ln_f, dt, b, s->x, s->a);
    return s->a;
}

static void commit(lb_model_state *s, const int64_t *valid)
{
    attention_state *a = s->body;
    for (int i = 0; i < s->model->cfg.n_layers; i++)
        lb_kv_cache_advance(&a->caches[i], valid);
}

static lb_kv_cache *kv_cache(lb_model_state *s, int layer)
{
    attention_state *a = s->body;
    return layer >= 0 && layer < s->model->cfg.n_layers ? &a->caches[layer] : NULL;
}

/* ---- the rows ---- */

static const lb_family_ops ops = {check,         build,     finish,     model_free,  forward,     scratch_width,
                                  state_new,     work_new,  state_free, state_reset, state_bytes, state_allocated,
                                  reserve,       chunk,     event,      commit,      kv_cache};

const lb_family lb_family_transformer = {
    LB_MODEL_TRANSFORMER, "transformer", "pre-norm transformer blocks with full (causal) attention", 1,
    NULL, is_causal, max_positions, crops_context, body_width, layer_floats, state_floats, size, describe, &ops, flops};

const lb_family lb_family_local = {
    LB_MODEL_LOCAL, "local", "the transformer with sliding-window attention over the last --window keys", 1,
    local_defaults, is_causal, max_positions, crops_context, body_width, layer_floats, state_floats, size, describe,
    &ops, flops};

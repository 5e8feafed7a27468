/* The "linear" family (layers/family.h): pre-norm transformer blocks whose attention is
 * causal linear attention (Katharopoulos et al. 2020, "Transformers are RNNs", eq. 4–6,
 * feature map φ(x) = elu(x) + 1), multi-head, optionally with RetNet's fixed decay per
 * head (Sun et al. 2023: γ_h = 1 − 2^(−5−h), h = 0 .. H−1; `--decay 1`). No positions:
 * the order enters through causality (and the decay).
 *
 *   x = x + W_o LinAttn(LN1(x) W_q, LN1(x) W_k, LN1(x) W_v)
 *   x = x + FFN(LN2(x))            (lb_transformer_block_finish)
 *
 * Named dims: B batch (streams), T seq_len, C chunk events, L n_layers, D d_model,
 * H n_heads, d = D / H the head width.
 *
 * Parameters (after the input's): the transformer's names (layers/transformer.h):
 * "blocks.<i>.ln1.*", "blocks.<i>.attn.w_q|w_k|w_v|w_o" [D, D], "blocks.<i>.ln2.*",
 * "blocks.<i>.ffn.*", "ln_f.*".
 * Streaming state per stream: per layer and head the matrix S [d, d] and the normaliser z
 * [d], L · H · d · (d + 1) values, whatever the length.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "layers/attention_internal.h"
#include "layers/model_internal.h"

enum { MAX_HEADS = 1024 };

/* ---- configuration ---- */

static int64_t head_width(const lb_model_config *c) { return c->d_model / c->n_heads; }
static int64_t body_width(const lb_model_config *c) { return c->d_model; }
static double layer_floats(const lb_model_config *c) { return (double)c->d_model + (double)c->d_ff; }
static double state_floats(const lb_model_config *c, int64_t t)
{
    (void)t;
    const double d = (double)head_width(c);
    return (double)c->n_layers * c->n_heads * d * (d + 1);
}

static void size(lb_model_config *c, const lb_family_size *s)
{
    c->n_heads = 4;
    c->d_model = s->width;
    c->d_ff = 2 * s->width;
    c->n_layers = s->layers;
}

static void describe(const lb_model_config *c, char *text, size_t size)
{
    snprintf(text, size, "%d block%s, d_model %lld, %d heads, linear attention (elu + 1)%s", c->n_layers,
             c->n_layers == 1 ? "" : "s", (long long)c->d_model, c->n_heads,
             c->decay ? ", RetNet's decay per head" : "");
}

static lb_status check(const lb_model_config *c)
{
    if (c->d_model % c->n_heads != 0)
        return lb_error(LB_ERR_VALUE, "model config: d_model = %lld is not divisible by n_heads = %d (every head gets "
                                      "an equal share of the width)",
                        (long long)c->d_model, c->n_heads);
    if (c->n_heads > MAX_HEADS)
        return lb_error(LB_ERR_VALUE, "model config: n_heads = %d is more than %d", c->n_heads, (int)MAX_HEADS);
    return LB_OK;
}

/* γ [H]: 1 - 2^(-5-h) with decay, else NULL (no decay). */
static const double *decays(const lb_model_config *c, double *gamma)
{
    if (!c->decay)
        return NULL;
    for (int h = 0; h < c->n_heads; h++)
        gamma[h] = 1.0 - pow(2.0, -5.0 - h);
    return gamma;
}

/* Per block and position: the projections 8 D² and the feed-forward layer 4 D F, and per
 * head the state's update φ(k) vᵀ and read φ(q)ᵀ S with their normaliser, 4 d (d + 1):
 * 4 D (d + 1) in all. No n² term: *attention 0. */
static double flops(const lb_model_config *c, int64_t t, int64_t read, double *attention)
{
    (void)read;
    *attention = 0;
    const double d = (double)c->d_model, f = (double)c->d_ff, dh = (double)head_width(c);
    return (double)t * c->n_layers * (8 * d * d + 4 * d * f + 4 * d * (dh + 1));
}

/* ---- parameters and forward ---- */

static lb_status build(lb_model *m, lb_rng *r_pos, lb_rng *r_body)
{
    (void)r_pos;
    const lb_model_config *c = &m->cfg;
    lb_transformer_config tc = {.d_model = c->d_model, .n_heads = c->n_heads, .d_ff = c->d_ff,
                                .n_layers = c->n_layers, .length_scale = LB_LENGTH_SCALE_NONE,
                                .reference_keys = c->max_seq_len, .no_bias = !c->bias};
    return lb_transformer_init(&m->transformer, &m->params, NULL, &tc, c->dtype, r_body);
}

static void model_free(lb_model *m) { lb_transformer_free(&m->transformer); }

/* Multi-head linear attention of one block on x [B, T, D] -> [B, T, D]; state and valid
 * as lb_linear_attention's (streaming), NULL for training. */
static lb_var *mixer(lb_graph *g, const lb_mha *a, lb_var *x, const double *gamma, lb_tensor *state,
                     const int64_t *valid)
{
    const int64_t h = a->n_heads, dh = a->d_head;
    lb_var *q = lb_attn_split_heads(g, lb_affine(g, x, a->w_q, a->b_q, "linear attention w_q"), h, dh);
    lb_var *k = lb_attn_split_heads(g, lb_affine(g, x, a->w_k, a->b_k, "linear attention w_k"), h, dh);
    lb_var *v = lb_attn_split_heads(g, lb_affine(g, x, a->w_v, a->b_v, "linear attention w_v"), h, dh);
    lb_var *y = q && k && v ? lb_linear_attention(g, q, k, v, gamma, state, valid) : NULL; /* [B, H, T, d] */
    lb_var *out = lb_affine(g, lb_attn_merge_heads(g, y), a->w_o, a->b_o, "linear attention w_o");
    if (!out)
        lb_error_context("linear attention '%s'", a->name);
    return out;
}

/* The stack on x [B, T, D]; states[i] (streaming) or NULL. */
static lb_var *stack(lb_graph *g, const lb_model *m, lb_var *x, lb_tensor **states, const int64_t *valid,
                     int training, lb_rng *rng)
{
    const lb_transformer *tr = &m->transformer;
    double gamma_buf[MAX_HEADS];
    const double *gamma = decays(&m->cfg, gamma_buf);
    for (int i = 0; x && i < tr->n_layers; i++) {
        const lb_transformer_block *blk = &tr->blocks[i];
        lb_var *a = mixer(g, &blk->attn, lb_norm_forward(g, &blk->ln1, x), gamma, states ? states[i] : NULL, valid);
        x = lb_transformer_block_finish(g, blk, x, a, training, rng);
    }
    return lb_norm_forward(g, &tr->ln_f, x);
}

static lb_var *forward(lb_graph *g, const lb_model *m, lb_var *x, const lb_model_input *in, const lb_attn_queries *read,
                       int training, lb_rng *rng, lb_var **weights)
{
    (void)in, (void)weights;
    lb_var *h = stack(g, m, x, NULL, NULL, training, rng);
    return read ? lb_gather_positions(g, h, read) : h;
}

/* ---- streaming: S and z per layer and head ---- */

typedef struct linear_state {
    lb_tensor **now, **next; /* L states [B, H, d, d + 1] (S with z as its last column); next: after the step */
} linear_state;

static int64_t scratch_width(const lb_model_config *c)
{
    (void)c;
    return 0;
}

static lb_status state_new(lb_model_state *s, const lb_stream_options *o)
{
    (void)o;
    const lb_model_config *c = &s->model->cfg;
    linear_state *l = calloc(1, sizeof *l);
    if (!l)
        return lb_error(LB_ERR_MEMORY, "model state: out of memory");
    s->body = l;
    if (!(l->now = calloc((size_t)c->n_layers, sizeof *l->now)) ||
        !(l->next = calloc((size_t)c->n_layers, sizeof *l->next)))
        return lb_error(LB_ERR_MEMORY, "model state: out of memory");
    int64_t shape[4] = {s->batch, c->n_heads, head_width(c), head_width(c) + 1};
    for (int i = 0; i < c->n_layers; i++)
        if (!(l->now[i] = lb_tensor_zeros(c->dtype, 4, shape)) || !(l->next[i] = lb_tensor_zeros(c->dtype, 4, shape)))
            return lb_last_status();
    return LB_OK;
}

static void state_free(lb_model_state *s)
{
    linear_state *l = s->body;
    if (!l)
        return;
    for (int i = 0; i < s->model->cfg.n_layers; i++) {
        if (l->now)
            lb_tensor_free(l->now[i]);
        if (l->next)
            lb_tensor_free(l->next[i]);
    }
    free(l->now);
    free(l->next);
    free(l);
}

static void state_reset(lb_model_state *s, int64_t b)
{
    linear_state *l = s->body;
    for (int i = 0; i < s->model->cfg.n_layers; i++)
        lb_model_zero_stream_rows(l->now[i], 0, b);
}

static size_t state_bytes(const lb_model_state *s, int64_t b)
{
    (void)b;
    const lb_model_config *c = &s->model->cfg;
    return (size_t)state_floats(c, 0) * lb_dtype_size(c->dtype);
}

static size_t state_allocated(const lb_model_state *s)
{
    const linear_state *l = s->body;
    size_t total = 0;
    for (int i = 0; i < s->model->cfg.n_layers; i++)
        total += lb_model_tensor_bytes(l->now[i]) + lb_model_tensor_bytes(l->next[i]);
    return total;
}

/* The stack over the chunk from the carried states (copied into `next`, which the op
 * advances to each stream's last valid event). */
static lb_var *chunk(lb_model_state *s, lb_var *x, const lb_decode_chunk *ch, int ragged)
{
    (void)ragged;
    linear_state *l = s->body;
    for (int i = 0; i < s->model->cfg.n_layers; i++)
        if (lb_tensor_copy_into(l->next[i], l->now[i]) != LB_OK)
            return NULL;
    return stack(s->graph, s->model, x, l->next, ch->valid, 0, NULL);
}

static void commit(lb_model_state *s, const int64_t *valid)
{
    (void)valid;
    linear_state *l = s->body;
    for (int i = 0; i < s->model->cfg.n_layers; i++) {
        lb_tensor *t = l->now[i];
        l->now[i] = l->next[i];
        l->next[i] = t;
    }
}

/* No graph-free event step: one event goes through chunk (lb_family_ops.event NULL). */
static const lb_family_ops ops = {check,     build, NULL,       model_free,  forward,     scratch_width,
                                  state_new, NULL,  state_free, state_reset, state_bytes, state_allocated,
                                  NULL,      chunk, NULL,       commit,      NULL};

const lb_family lb_family_linear = {LB_MODEL_LINEAR,
                                    "linear",
                                    "pre-norm blocks with causal linear attention (elu + 1 features; --decay: RetNet's)",
                                    0,
                                    NULL,
                                    lb_family_always,
                                    lb_family_any_length,
                                    lb_family_never,
                                    body_width,
                                    layer_floats,
                                    state_floats,
                                    size,
                                    describe,
                                    &ops,
                                    flops};

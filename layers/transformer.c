#include "layers/transformer.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

lb_status lb_transformer_block_init(lb_transformer_block *blk, lb_params *ps, const char *prefix,
                                    const lb_transformer_config *cfg, lb_dtype dtype, lb_rng *rng)
{
    LB_CHECK_ARG(blk, LB_ERR_VALUE);
    LB_CHECK_ARG(ps, LB_ERR_VALUE);
    LB_CHECK_ARG(cfg, LB_ERR_VALUE);
    memset(blk, 0, sizeof *blk);
    snprintf(blk->name, sizeof blk->name, "%s", prefix && prefix[0] ? prefix : "block");
    if (!(cfg->dropout >= 0 && cfg->dropout < 1))
        return lb_error(LB_ERR_VALUE, "transformer block '%s': dropout = %g must be in [0, 1)", blk->name, cfg->dropout);
    blk->dropout = cfg->dropout;
    blk->norm_position = cfg->norm_position;
    char name[160];
    if (lb_norm_init_kind(&blk->ln1, ps, lb_param_name(name, sizeof name, prefix, "ln1"), cfg->d_model, cfg->norm,
                          LB_NORM_EPS, !cfg->no_bias, dtype) != LB_OK ||
        lb_mha_init_gqa(&blk->attn, ps, lb_param_name(name, sizeof name, prefix, "attn"), cfg->d_model, cfg->n_heads,
                        cfg->n_kv_heads > 0 ? cfg->n_kv_heads : cfg->n_heads, 0, cfg->rotary, dtype, rng) != LB_OK ||
        lb_mha_set_length_scale(&blk->attn, ps, name, cfg->length_scale, cfg->reference_keys, dtype) != LB_OK ||
        lb_norm_init_kind(&blk->ln2, ps, lb_param_name(name, sizeof name, prefix, "ln2"), cfg->d_model, cfg->norm,
                          LB_NORM_EPS, !cfg->no_bias, dtype) != LB_OK ||
        lb_ffn_init_kind(&blk->ffn, ps, lb_param_name(name, sizeof name, prefix, "ffn"), cfg->d_model, cfg->d_ff,
                         cfg->ffn, cfg->dropout, !cfg->no_bias, dtype, rng) != LB_OK)
        return lb_last_status();
    blk->attn.alibi = cfg->alibi;
    return LB_OK;
}

/* The block after its attention a: y = residual + dropout(a); y + FFN(LN2(y))
 * (pre-norm), or y = LN1(residual + dropout(a)); LN2(y + FFN(y)) (post-norm). */
lb_var *lb_transformer_block_finish(lb_graph *g, const lb_transformer_block *blk, lb_var *residual, lb_var *a,
                                    int training, lb_rng *rng)
{
    LB_CHECK_ARG(g, NULL);
    LB_CHECK_ARG(blk, NULL);
    LB_CHECK_INPUT(residual, NULL);
    LB_CHECK_INPUT(a, NULL);
    if (!residual || !a)
        return NULL;
    if (training && blk->dropout > 0)
        a = lb_dropout(g, a, blk->dropout, training, rng);
    lb_var *y = lb_add(g, residual, a), *out;
    if (blk->norm_position == LB_NORM_POST) {
        y = lb_norm_forward(g, &blk->ln1, y);
        out = lb_norm_forward(g, &blk->ln2, lb_add(g, y, lb_ffn_forward(g, &blk->ffn, y, training, rng)));
    } else {
        out = lb_add(g, y, lb_ffn_forward(g, &blk->ffn, lb_norm_forward(g, &blk->ln2, y), training, rng));
    }
    if (!out)
        lb_error_context("transformer block '%s'", blk->name);
    return out;
}

lb_var *lb_transformer_block_forward(lb_graph *g, const lb_transformer_block *blk, lb_var *x,
                                     const lb_attn_mask *mask, const lb_attn_queries *queries, int training,
                                     lb_rng *rng, lb_var **weights)
{
    LB_CHECK_ARG(g, NULL);
    LB_CHECK_ARG(blk, NULL);
    LB_CHECK_INPUT(x, NULL);
    if (weights)
        *weights = NULL;
    if (!x)
        return NULL;
    lb_var *in = blk->norm_position == LB_NORM_POST ? x : lb_norm_forward(g, &blk->ln1, x);
    lb_var *a = lb_mha_forward(g, &blk->attn, in, mask, queries, weights);
    /* Readout: the residual stream continues only at the selected positions. */
    lb_var *residual = queries ? lb_gather_positions(g, x, queries) : x;
    return lb_transformer_block_finish(g, blk, residual, a, training, rng);
}

lb_var *lb_transformer_block_forward_cached(lb_graph *g, const lb_transformer_block *blk, lb_var *x,
                                            lb_kv_cache *cache, const lb_decode_chunk *chunk)
{
    LB_CHECK_ARG(g, NULL);
    LB_CHECK_ARG(blk, NULL);
    LB_CHECK_INPUT(x, NULL);
    LB_CHECK_ARG(cache, NULL);
    LB_CHECK_ARG(chunk, NULL);
    if (!x)
        return NULL;
    lb_var *in = blk->norm_position == LB_NORM_POST ? x : lb_norm_forward(g, &blk->ln1, x);
    lb_var *a = lb_mha_forward_cached(g, &blk->attn, in, cache, chunk);
    return lb_transformer_block_finish(g, blk, x, a, 0, NULL);
}

lb_status lb_transformer_init(lb_transformer *tr, lb_params *ps, const char *prefix, const lb_transformer_config *cfg,
                              lb_dtype dtype, lb_rng *rng)
{
    LB_CHECK_ARG(tr, LB_ERR_VALUE);
    LB_CHECK_ARG(ps, LB_ERR_VALUE);
    LB_CHECK_ARG(cfg, LB_ERR_VALUE);
    memset(tr, 0, sizeof *tr);
    if (cfg->n_layers < 1)
        return lb_error(LB_ERR_VALUE, "transformer: n_layers = %d must be >= 1", cfg->n_layers);
    tr->blocks = calloc((size_t)cfg->n_layers, sizeof *tr->blocks);
    if (!tr->blocks)
        return lb_error(LB_ERR_MEMORY, "transformer: out of memory for %d blocks", cfg->n_layers);
    tr->n_layers = cfg->n_layers;
    char name[160], block[64];
    for (int i = 0; i < cfg->n_layers; i++) {
        snprintf(block, sizeof block, "blocks.%d", i);
        if (lb_transformer_block_init(&tr->blocks[i], ps, lb_param_name(name, sizeof name, prefix, block), cfg, dtype,
                                      rng) != LB_OK)
            return lb_last_status();
    }
    if (cfg->norm_position == LB_NORM_POST) /* the last block normalised its output */
        return LB_OK;
    return lb_norm_init_kind(&tr->ln_f, ps, lb_param_name(name, sizeof name, prefix, "ln_f"), cfg->d_model, cfg->norm,
                             LB_NORM_EPS, !cfg->no_bias, dtype);
}

void lb_transformer_free(lb_transformer *tr)
{
    LB_CHECK_ARG(tr);
    free(tr->blocks);
    memset(tr, 0, sizeof *tr);
}

/* ln_f(x) of a pre-norm stack; x itself after post-norm blocks. */
static lb_var *final_norm(lb_graph *g, const lb_transformer *tr, lb_var *x)
{
    return tr->ln_f.weight ? lb_norm_forward(g, &tr->ln_f, x) : x;
}

lb_var *lb_transformer_forward(lb_graph *g, const lb_transformer *tr, lb_var *x, const lb_attn_mask *mask,
                               const lb_attn_queries *queries, int training, lb_rng *rng, lb_var **weights)
{
    LB_CHECK_ARG(g, NULL);
    LB_CHECK_ARG(tr, NULL);
    LB_CHECK_INPUT(x, NULL);
    if (weights)
        *weights = NULL;
    for (int i = 0; x && i < tr->n_layers; i++) {
        int last = i == tr->n_layers - 1;
        lb_var *w = NULL;
        x = lb_transformer_block_forward(g, &tr->blocks[i], x, mask, last ? queries : NULL, training, rng,
                                         (last && weights) || tr->layer_weights ? &w : NULL);
        if (last && weights)
            *weights = w;
        if (tr->layer_weights)
            tr->layer_weights[i] = w;
    }
    return final_norm(g, tr, x);
}

lb_var *lb_transformer_forward_cached(lb_graph *g, const lb_transformer *tr, lb_var *x, lb_kv_cache *caches,
                                      const lb_decode_chunk *chunk)
{
    LB_CHECK_ARG(g, NULL);
    LB_CHECK_ARG(tr, NULL);
    LB_CHECK_ARG(caches, NULL);
    LB_CHECK_ARG(chunk, NULL);
    LB_CHECK_INPUT(x, NULL);
    for (int i = 0; x && i < tr->n_layers; i++)
        x = lb_transformer_block_forward_cached(g, &tr->blocks[i], x, &caches[i], chunk);
    return final_norm(g, tr, x);
}

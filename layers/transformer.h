/* Transformer blocks and stacks. Pre-norm (the default; the GPT-2 / "pre-LN"
 * arrangement, Xiong et al. 2020; torch.nn.TransformerEncoderLayer(norm_first=True,
 * activation="gelu", batch_first=True) without attention biases):
 *
 *   x = x + dropout(MHA(LN1(x)))
 *   x = x + FFN(LN2(x))            (the FFN ends with its own dropout)
 *
 * and a stack of n_layers blocks followed by a final norm ("ln_f") before the model's
 * head. Post-norm (norm_position LB_NORM_POST; Vaswani et al. 2017, §3.1;
 * torch.nn.TransformerEncoderLayer(norm_first=False)):
 *
 *   x = LN1(x + dropout(MHA(x)))
 *   x = LN2(x + FFN(x))
 *
 * with no final norm (the last block's output is normalised already). LN is LayerNorm
 * or RMSNorm (`norm`, layers/norm.h), the FFN of kind `ffn` (layers/ffn.h).
 * Shapes: x [B, T, d_model] -> [B, T, d_model], or [B, P, d_model] with selected
 * queries (readout).
 *
 * Parameter names, with the block prefix "<prefix>.blocks.<i>" (or "blocks.<i>"):
 *   ln1.weight, ln1.bias [d_model]; attn.w_q, attn.w_o [d_model, d_model], attn.w_k,
 *   attn.w_v [d_model, n_kv_heads * d_head]; attn.softmax_scale [n_heads] (scalable softmax only); ln2.weight, ln2.bias [d_model]; ffn.fc1.weight [d_model, d_ff],
 *   ffn.fc1.bias [d_ff], ffn.fc2.weight [d_ff, d_model], ffn.fc2.bias [d_model];
 * then "<prefix>.ln_f.weight", "<prefix>.ln_f.bias" (or "ln_f.*"; pre-norm only). With
 * no_bias, and for RMSNorm always, the ln*.bias parameters do not exist; with no_bias
 * the ffn.fc*.bias do not either. A gated FFN's fc1 is [d_model, 2 d_ff] (layers/ffn.h).
 *
 * Readout: given lb_attn_queries, only the LAST block runs its queries, residual and
 * FFN on the selected positions (the earlier blocks compute every position, since
 * the last block's keys and values need them). The result equals the full stack's
 * output at those positions.
 */
#ifndef LB_LAYERS_TRANSFORMER_H
#define LB_LAYERS_TRANSFORMER_H

#include "tensor/api.h"

#include "layers/attention.h"
#include "layers/kv_cache.h"
#include "layers/ffn.h"
#include "layers/norm.h"

LB_API_BEGIN

typedef struct lb_transformer_config {
    int64_t d_model;
    int n_heads;    /* d_model % n_heads == 0 */
    int64_t d_ff;   /* feed-forward hidden width */
    double dropout; /* on the attention output, the FFN output (both before the residual add) */
    int rotary;     /* rotary positions inside attention (d_model / n_heads even) */
    int n_layers;   /* blocks in a stack (>= 1) */
    lb_length_scale length_scale; /* logit scaling by the number of keys (layers/attention.h) */
    int64_t reference_keys;       /* its reference length N (the longest training sequence) */
    int no_bias;    /* 1: the LayerNorms and the FFN have no biases (nanoGPT's bias=False) */
    int n_kv_heads; /* key/value heads (lb_mha_init_gqa); 0 = n_heads */
    int alibi;      /* ALiBi biases inside attention (lb_mha's alibi) */
    lb_norm_kind norm;               /* LayerNorm (0, the default) or RMSNorm */
    lb_norm_position norm_position;  /* pre-norm (0, the default) or post-norm blocks */
    lb_ffn_kind ffn;                 /* the feed-forward kind (layers/ffn.h; 0 = gelu) */
} lb_transformer_config;

typedef struct lb_transformer_block {
    lb_norm ln1, ln2;
    lb_mha attn;
    lb_ffn ffn;
    double dropout;
    lb_norm_position norm_position;
    char name[96];
} lb_transformer_block;

/* Registers and initialises one block under `prefix` (see the names above).
 * Errors: LB_ERR_VALUE naming the field for an invalid config. */
lb_status lb_transformer_block_init(lb_transformer_block *blk, lb_params *ps, const char *prefix,
                                    const lb_transformer_config *cfg, lb_dtype dtype, lb_rng *rng);

/* x [B, T, d_model] -> [B, T, d_model], or [B, P, d_model] with `queries`.
 * mask: as for lb_mha_forward (causal, window, key_lengths, ...). training enables
 * dropout drawn from rng. weights (optional): the block's attention weights
 * [B, H, Tq, T]. Errors (NULL) carry the block's name as context. */
lb_var *lb_transformer_block_forward(lb_graph *g, const lb_transformer_block *blk, lb_var *x,
                                     const lb_attn_mask *mask, const lb_attn_queries *queries, int training,
                                     lb_rng *rng, lb_var **weights);

/* The block after its token mixer: given the mixer's output a (attention, or another
 * mixer over LN1(x): [B, T', d_model]) and the residual stream x [B, T', d_model],
 * returns x + dropout(a) followed by the FFN half, x + FFN(LN2(x)). The families that
 * swap attention for another mixer (layers/family_linear.c) share the rest of the block
 * through it. training enables dropout from rng. */
lb_var *lb_transformer_block_finish(lb_graph *g, const lb_transformer_block *blk, lb_var *residual, lb_var *a,
                                    int training, lb_rng *rng);

/* One block on a chunk of new events, attending over the block's key-value cache
 * (lb_mha_forward_cached; evaluation mode, no dropout): x [B, C, d_model] ->
 * [B, C, d_model], equal to the full causal forward's rows for those events. */
lb_var *lb_transformer_block_forward_cached(lb_graph *g, const lb_transformer_block *blk, lb_var *x,
                                            lb_kv_cache *cache, const lb_decode_chunk *chunk);

typedef struct lb_transformer {
    lb_transformer_block *blocks; /* n_layers blocks, owned */
    int n_layers;
    lb_norm ln_f; /* pre-norm stacks only (post-norm: weight NULL) */
    lb_var **layer_weights;       /* NULL, or [n_layers]: where lb_transformer_forward puts every block's
                                   * attention weights (set only around one forward pass) */
} lb_transformer;

/* Registers n_layers blocks "<prefix>.blocks.<i>" and "<prefix>.ln_f". Free the
 * stack with lb_transformer_free (its parameters belong to `ps`).
 * Errors: LB_ERR_VALUE (n_layers < 1, or a block's error), LB_ERR_MEMORY. */
lb_status lb_transformer_init(lb_transformer *tr, lb_params *ps, const char *prefix, const lb_transformer_config *cfg,
                              lb_dtype dtype, lb_rng *rng);
void lb_transformer_free(lb_transformer *tr);

/* x [B, T, d_model] -> ln_f(blocks(x)) [B, T, d_model], or [B, P, d_model] when
 * `queries` selects positions (applied in the last block only). weights (optional):
 * the last block's attention weights [B, H, Tq, T]; with tr->layer_weights set (an
 * array of n_layers entries), block i's weights [B, H, Tq_i, T] also go to
 * tr->layer_weights[i] (lb_model_attention_weights). */
lb_var *lb_transformer_forward(lb_graph *g, const lb_transformer *tr, lb_var *x, const lb_attn_mask *mask,
                               const lb_attn_queries *queries, int training, lb_rng *rng, lb_var **weights);

/* The stack on a chunk of new events: caches[i] belongs to block i (n_layers
 * entries). x [B, C, d_model] -> ln_f(blocks(x)) [B, C, d_model]. */
lb_var *lb_transformer_forward_cached(lb_graph *g, const lb_transformer *tr, lb_var *x, lb_kv_cache *caches,
                                      const lb_decode_chunk *chunk);

LB_API_END

#endif

/* What the training half (attention.c) and the decoding half (kv_cache.c) of
 * multi-head attention share. Internal to layers/. */
#ifndef LB_LAYERS_ATTENTION_INTERNAL_H
#define LB_LAYERS_ATTENTION_INTERNAL_H

#include "layers/attention.h"

/* Rotary base of RoFormer and GPT-NeoX. */
#define LB_ROTARY_BASE 10000.0

/* LB_ERR_SHAPE naming the layer (kind, name) unless x is [B, T, d_model]. */
lb_status lb_attn_check_input(const char *kind, const char *name, const lb_var *x, int64_t d_model);
/* q [B, H, Tq, d_head] x factor, factor = ln(keys seen) / log_reference (log-n), or
 * x ln(keys seen) x s_h with a learned s per head (scalable softmax); logn [B x Tq]
 * holds ln of each query's key count. */
lb_var *lb_mha_apply_length_scale(lb_graph *g, const lb_mha *a, lb_var *q, const double *logn);
/* [B, T, H * d_head] -> [B, H, T, d_head] and back. */
lb_var *lb_attn_split_heads(lb_graph *g, lb_var *x, int64_t h, int64_t dh);
lb_var *lb_attn_merge_heads(lb_graph *g, lb_var *x);

#endif

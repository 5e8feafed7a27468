/* Attention layers: scaled dot-product attention, the source document's single-head
 * self-attention, and multi-head self-attention (full or local).
 *
 * Named dims: B batch, T sequence positions, Tq queries, Tk keys (Tk = T for
 * self-attention), H heads, d_model model width, d_k query/key width, d_v value
 * width, d_head = d_model / H per-head width, P selected query positions.
 *
 * Masks (lb_attn_mask, autograd/ops.h) follow torch.nn.functional.
 * scaled_dot_product_attention: boolean `allowed` with nonzero = may attend, a float
 * `additive` mask added to the scaled scores, `causal`, a sliding `window`
 * (local attention: each query sees only the last `window` keys up to itself) and
 * per-batch-item `key_lengths` (padding: keys >= key_lengths[b] are masked). A query
 * with no allowed key gets all-zero weights and a zero output (never NaN), forward
 * and backward. With Tq != Tk, causal alignment puts the LAST query on the LAST key
 * (a key-value cache's convention; PyTorch's is_causal aligns top-left instead).
 *
 * Readout (lb_attn_queries): a layer can compute only P selected query positions
 * against all T keys, e.g. only the last valid position of each sequence (P = 1)
 * for a classifier head: O(P T d) work and [B, ..., P, T] weights instead of
 * O(T^2 d). The selected queries see exactly the keys they would see in the full
 * computation: causal and window limits are measured from each query's own
 * position, so the result equals computing every position and keeping the
 * selected rows (values and gradients).
 */
#ifndef LB_LAYERS_ATTENTION_H
#define LB_LAYERS_ATTENTION_H

#include "tensor/api.h"

#include "autograd/ops.h"
#include "layers/params.h"

LB_API_BEGIN

/* Selected query positions for the readout path. */
typedef struct lb_attn_queries {
    const int32_t *positions; /* int32 [B, count]: sequence position (key index) of each query */
    int64_t count;            /* P >= 1 queries per batch item */
} lb_attn_queries;

/* Rows of x at the given positions: x [B, T, D] -> [B, P, D], y[b, p] = x[b, positions[b, p]].
 * Differentiable (implemented as a one-hot [B, P, T] matrix times x, O(B P T D), exact
 * in float32 and float64; the gradient scatters back to the selected rows).
 * Errors (NULL): x not 3-dim, a position outside [0, T) (names b and p). */
lb_var *lb_gather_positions(lb_graph *g, lb_var *x, const lb_attn_queries *queries);

/* Scaled dot-product attention (Vaswani et al. 2017, eq. 1):
 *   query [B, ..., Tq, d_k], key [B, ..., Tk, d_k], value [B, ..., Tk, d_v]
 *   -> output [B, ..., Tq, d_v] = softmax(query keyᵀ / sqrt(d_k) + mask) value,
 * softmax over the key axis.
 * Two paths, equal in value and gradients (float64 to ~1e-15, float32 to ~1e-6):
 *  - by default the fused op lb_attention_fused (FlashAttention-2 tiles): the
 *    [B, ..., Tq, Tk] scores are never stored, memory is O(Tq d), and key tiles the
 *    causal/window/padding limits exclude are skipped;
 *  - when `weights` is requested (or the leading dims of query, key and value differ
 *    and must broadcast), the materialized path lb_matmul_t, lb_masked_softmax,
 *    lb_matmul, which keeps the weights as a graph variable.
 * mask: may be NULL. queries: NULL, or the positions of the Tq = count query rows
 * (passed as the mask's query_positions, replacing any the caller set: causal/window
 * are measured from those positions, not aligned to the last key; a user
 * `allowed`/`additive` mask must then broadcast to [B, ..., P, Tk]).
 * weights: when non-NULL receives the attention weights [B, ..., Tq, Tk] (a graph
 * variable). Matches torch.nn.functional.scaled_dot_product_attention for a boolean
 * or float attn_mask (with the causal alignment noted above).
 * Errors (NULL): shapes that do not fit, masks that do not broadcast, positions out
 * of range. */
lb_var *lb_attention(lb_graph *g, lb_var *query, lb_var *key, lb_var *value, const lb_attn_mask *mask,
                     const lb_attn_queries *queries, lb_var **weights);

/* ---- single-head self-attention, exactly as the source article defines it ----
 * X [B, T, d_model]; Q = X W_Q [B, T, d_k], K = X W_K [B, T, d_k], V = X W_V [B, T, d_v];
 * output = softmax(Q Kᵀ / sqrt(d_k) + mask) V [B, T, d_v]; weights [B, T, T].
 * No output projection, no bias. Parameters "<prefix>.w_q" [d_model, d_k],
 * "<prefix>.w_k" [d_model, d_k], "<prefix>.w_v" [d_model, d_v], Xavier uniform. */
typedef struct lb_self_attention {
    lb_var *w_q, *w_k, *w_v;
    int64_t d_model, d_k, d_v;
    char name[96];
} lb_self_attention;

/* Registers and initialises w_q, w_k, w_v (rng NULL leaves zeros).
 * Errors: LB_ERR_VALUE for a size < 1 or a taken name. */
lb_status lb_self_attention_init(lb_self_attention *a, lb_params *ps, const char *prefix, int64_t d_model,
                                 int64_t d_k, int64_t d_v, lb_dtype dtype, lb_rng *rng);

/* x [B, T, d_model] -> [B, Tq, d_v] with Tq = T, or P with `queries` (readout: only
 * Q is projected for the selected rows). weights (optional): [B, Tq, T].
 * Errors (NULL): x not [B, T, d_model]; see lb_attention. */
lb_var *lb_self_attention_forward(lb_graph *g, const lb_self_attention *a, lb_var *x, const lb_attn_mask *mask,
                                  const lb_attn_queries *queries, lb_var **weights);

/* ---- multi-head self-attention (Vaswani et al. 2017, §3.2.2) ----
 * Q = X W_Q (+ b_q), K = X W_K (+ b_k), V = X W_V (+ b_v), each [B, T, d_model],
 * split into H heads by reshape [B, T, H, d_head] and permute to [B, H, T, d_head];
 * per head softmax(Q_h K_hᵀ / sqrt(d_head) + mask) V_h; heads merged back to
 * [B, T, d_model] (head h occupies columns h*d_head .. (h+1)*d_head - 1) and
 * projected: output = merged W_O (+ b_o).
 * Parameters: "<prefix>.w_q", "w_k", "w_v", "w_o" [d_model, d_model] (Xavier uniform),
 * with bias also "<prefix>.b_q", "b_k", "b_v", "b_o" [d_model] (zeros). The model
 * builds them without biases.
 * Rotary (optional): queries and keys are rotated per head by lb_rotary (d_head even).
 * ALiBi (optional, the `alibi` member): head h adds -m_h |i - j| to its scores
 * (lb_attn_mask's alibi_slopes, m_h from lb_alibi_slopes(n_heads), layers/positional.h).
 * Grouped-query attention: see lb_mha_init_gqa.
 *
 * Loading torch.nn.MultiheadAttention(d_model, H, batch_first=True) weights
 * (PyTorch computes x @ W.T):
 *   in_proj_weight [3 d_model, d_model] = [W_Qᵀ; W_Kᵀ; W_Vᵀ]  so
 *     w_q = in_proj_weight[0:d].T, w_k = in_proj_weight[d:2d].T, w_v = in_proj_weight[2d:3d].T;
 *   in_proj_bias [3 d_model] = [b_q; b_k; b_v];
 *   out_proj.weight = W_Oᵀ so w_o = out_proj.weight.T; out_proj.bias = b_o.
 * PyTorch's head h uses the same columns h*d_head .. (h+1)*d_head - 1. Its
 * attn_mask uses True = masked (the opposite of `allowed`), its key_padding_mask
 * True = padding, and it averages weights over heads unless average_attn_weights=False. */
/* Length scaling of the attention logits, for attention that stays sharp as the
 * number of keys grows: scores = f * Q Kᵀ / sqrt(d_head) with, for a query that may
 * see n keys and a reference length N (the longest training sequence the model is
 * built for, its max_seq_len):
 *   LB_LENGTH_SCALE_NONE      f = 1, the standard softmax;
 *   LB_LENGTH_SCALE_LOG_N     f = ln(n) / ln(N), fixed: logit scaling by log n (Chiang &
 *                             Cholak 2022, "Overcoming a Theoretical Limitation of
 *                             Self-Attention"), normalised to 1 at n = N;
 *   LB_LENGTH_SCALE_SCALABLE  f = s_h ln(n), s_h learned per head: scalable softmax, SSMax
 *                             (Nakanishi 2025, "Scalable-Softmax Is Superior for
 *                             Attention", softmax(s ln(n) z)); parameter
 *                             "<prefix>.softmax_scale" [H] initialised to 1 / ln(N), so
 *                             training starts from the LOG_N scaling.
 * n counts the keys left by the mask's causal, window and key_lengths limits (a
 * user's allowed/additive mask is not counted): causal: min(pos + 1, window, length);
 * not causal: the key length. A query seeing one key gets f = 0, i.e. weight 1 on
 * that key, which is what softmax gives anyway. */
typedef enum lb_length_scale {
    LB_LENGTH_SCALE_NONE = 0,
    LB_LENGTH_SCALE_LOG_N,
    LB_LENGTH_SCALE_SCALABLE
} lb_length_scale;

/* "none", "log-n", "scalable" <-> kind. LB_ERR_VALUE naming the word. */
lb_status lb_length_scale_parse(const char *name, lb_length_scale *out);
const char *lb_length_scale_name(lb_length_scale kind);

typedef struct lb_mha {
    lb_var *w_q, *w_o;             /* [d_model, d_model] */
    lb_var *w_k, *w_v;             /* [d_model, d_kv], d_kv = n_kv_heads * d_head */
    lb_var *b_q, *b_o;             /* [d_model] or NULL */
    lb_var *b_k, *b_v;             /* [d_kv] or NULL */
    lb_var *softmax_scale;         /* [H] with LB_LENGTH_SCALE_SCALABLE, else NULL */
    lb_length_scale length_scale;
    double log_reference;          /* ln N of lb_mha_set_length_scale */
    int64_t d_model, d_head;
    int n_heads;
    int n_kv_heads;                /* key/value heads (n_heads: multi-head; fewer: grouped-query) */
    int rotary;
    int alibi;                     /* 1: ALiBi biases (lb_alibi_slopes of n_heads), set after init */
    char name[96];
} lb_mha;

/* Registers and initialises the projections. bias: add b_q, b_k, b_v, b_o.
 * rotary: rotate queries and keys by position (needs d_head even).
 * Errors: LB_ERR_VALUE naming the field for n_heads < 1, d_model not divisible by
 * n_heads, odd d_head with rotary, a taken name. */
lb_status lb_mha_init(lb_mha *a, lb_params *ps, const char *prefix, int64_t d_model, int n_heads, int bias, int rotary,
                      lb_dtype dtype, lb_rng *rng);

/* lb_mha_init with n_kv_heads key/value heads: grouped-query attention (Ainslie et al.
 * 2023, "GQA"; n_kv_heads = 1 is multi-query attention, Shazeer 2019). K = X W_K and
 * V = X W_V are [B, T, n_kv_heads * d_head] (w_k, w_v [d_model, n_kv_heads * d_head],
 * Xavier uniform over those sizes; b_k, b_v [n_kv_heads * d_head]), split into
 * n_kv_heads heads; query head h reads key/value head h / (n_heads / n_kv_heads), what
 * torch's scaled_dot_product_attention(enable_gqa=True) computes (repeat_interleave of
 * the key/value heads). n_kv_heads = n_heads is lb_mha_init (same parameters, same
 * draws). The fused kernels read each key/value head in place for its group.
 * Errors: those of lb_mha_init, and LB_ERR_VALUE when n_kv_heads < 1 or does not divide
 * n_heads. */
lb_status lb_mha_init_gqa(lb_mha *a, lb_params *ps, const char *prefix, int64_t d_model, int n_heads, int n_kv_heads,
                          int bias, int rotary, lb_dtype dtype, lb_rng *rng);

/* Switches an initialised layer to length-scaled logits (see lb_length_scale) with
 * reference length N = reference_keys (>= 2); with LB_LENGTH_SCALE_SCALABLE registers
 * "<prefix>.softmax_scale" [H] (1 / ln N) in `ps`. Call once, right after lb_mha_init;
 * LB_LENGTH_SCALE_NONE changes nothing. Errors: LB_ERR_VALUE for an unknown kind or
 * reference_keys < 2, LB_ERR_STATE for a second call, a taken name. */
lb_status lb_mha_set_length_scale(lb_mha *a, lb_params *ps, const char *prefix, lb_length_scale kind,
                                  int64_t reference_keys, lb_dtype dtype);

/* x [B, T, d_model] -> [B, Tq, d_model] (Tq = T, or P with `queries`: only those
 * query rows are projected and attended; keys and values use all T rows).
 * mask: key_lengths index B; an `allowed`/`additive` mask broadcasts to the scores
 * [B, H, Tq, T] (e.g. [Tq, T] or [B, 1, Tq, T]). weights (optional): [B, H, Tq, T].
 * Errors (NULL): x not [B, T, d_model]; see lb_attention. */
lb_var *lb_mha_forward(lb_graph *g, const lb_mha *a, lb_var *x, const lb_attn_mask *mask,
                       const lb_attn_queries *queries, lb_var **weights);

LB_API_END

#endif

/* Positional information for attention models, selectable (lb_pos_kind; the model
 * configuration's `pos`, layers/model.h):
 *
 *  LB_POS_NONE        nothing is added. Attention is then permutation-equivariant
 *                     apart from the causal mask, and content-based retrieval ("find
 *                     the key that matches") works at any sequence length, including
 *                     lengths never seen in training.
 *  LB_POS_SINUSOIDAL  fixed table added to the input (Vaswani et al. 2017, §3.5):
 *                     PE[t, 2i] = sin(t / 10000^(2i/D)), PE[t, 2i+1] = cos(t / 10000^(2i/D)).
 *                     No parameters; any length.
 *  LB_POS_LEARNED     a learned table "<prefix>.pos_embedding" [max_seq_len, D] whose
 *                     first T rows are added to the input (GPT-2's wpe); T <= max_seq_len.
 *                     Init N(0, 1), like torch.nn.Embedding.
 *  LB_POS_ROTARY      nothing is added to the input; instead the attention layers rotate
 *                     queries and keys by their position (RoFormer, Su et al. 2021), so
 *                     scores depend on relative offsets only. See lb_rotary.
 *  LB_POS_ALIBI       nothing is added to the input; instead each attention head adds
 *                     -m_h |i - j| to the score of query i and key j (ALiBi, Press et al.
 *                     2022, "Train Short, Test Long", eq. in §3), slopes m_h from
 *                     lb_alibi_slopes. No parameters; any length (the bias only grows
 *                     with distance, so a model trained short can run longer).
 *
 * Shapes: x [B, T, D] with D = d_model.
 */
#ifndef LB_LAYERS_POSITIONAL_H
#define LB_LAYERS_POSITIONAL_H

#include "tensor/api.h"

#include "autograd/ops.h"
#include "layers/params.h"

LB_API_BEGIN

typedef enum lb_pos_kind { LB_POS_NONE = 0, LB_POS_SINUSOIDAL, LB_POS_LEARNED, LB_POS_ROTARY, LB_POS_ALIBI } lb_pos_kind;

/* "none", "sinusoidal", "learned", "rotary", "alibi" <-> kind. Parse errors (LB_ERR_VALUE) name
 * the word; an unknown kind's name is "unknown". */
lb_status lb_pos_kind_parse(const char *name, lb_pos_kind *pos);
const char *lb_pos_kind_name(lb_pos_kind pos);

typedef struct lb_positional {
    lb_pos_kind kind;
    int64_t d_model, max_seq_len;
    lb_var *embedding; /* LB_POS_LEARNED only: [max_seq_len, d_model] */
} lb_positional;

/* Sets up the positional scheme; for LB_POS_LEARNED registers "<prefix>.pos_embedding"
 * (or "pos_embedding" without prefix) [max_seq_len, d_model], drawn N(0, 1) from rng
 * (rng NULL leaves zeros). Errors: LB_ERR_VALUE for an unknown kind, d_model < 1,
 * learned positions with max_seq_len < 1. */
lb_status lb_positional_init(lb_positional *p, lb_params *ps, const char *prefix, lb_pos_kind kind,
                             int64_t max_seq_len, int64_t d_model, lb_dtype dtype, lb_rng *rng);

/* x [B, T, D] -> x + PE[0:T] [B, T, D] for sinusoidal and learned positions; x itself
 * (no new node) for none, rotary and alibi. Errors (NULL): x not [B, T, D] with D = d_model;
 * learned positions with T > max_seq_len (the message says to raise max_seq_len). */
lb_var *lb_positional_add(lb_graph *g, const lb_positional *p, lb_var *x);

/* The same at given positions, for decoding: x [B, C, D] -> x + PE[positions[b, i]]
 * (row of the sinusoidal table or of pos_embedding) for sinusoidal and learned
 * positions; x itself for none, rotary and alibi. positions: int32 [B, C], >= 0.
 * Errors (NULL): x not [B, C, D]; a learned position >= max_seq_len (the message
 * names the stream, the event and --pos learned). */
lb_var *lb_positional_add_at(lb_graph *g, const lb_positional *p, lb_var *x, const int32_t *positions);

/* ALiBi's head slopes (Press et al. 2022, §3 and the authors' get_slopes): for H = n_heads
 * a power of two, m_h = 2^(-8h/H) for heads h = 1..H (1/2, 1/4, ..., 1/256 for 8 heads);
 * otherwise, with n the largest power of two below H, the n slopes of n heads followed by
 * the first H - n of the odd-numbered slopes (h = 1, 3, 5, ...) of 2n heads. Into
 * slopes [n_heads], float64, computed as pow(2, -8h/n) (what the authors' Python gives).
 * Errors: LB_ERR_VALUE for n_heads < 1. */
lb_status lb_alibi_slopes(int n_heads, double *slopes);

/* The sinusoidal table (Vaswani et al. 2017, eq. in §3.5) as a new [seq_len, d_model]
 * tensor of `dtype` (caller frees); an odd d_model ends with a sin column. */
lb_tensor *lb_sinusoidal_table(lb_dtype dtype, int64_t seq_len, int64_t d_model);

/* Rotary position embedding (Su et al. 2021, RoFormer eq. 34), in the half-split
 * layout of GPT-NeoX / Hugging Face's rotate_half: with h = d/2,
 * theta_i = base^(-2i/d) and angle a = position * theta_i, for i < h
 *   y[..., i]     = x[..., i] cos a - x[..., i+h] sin a
 *   y[..., i + h] = x[..., i+h] cos a + x[..., i] sin a.
 * x: [B, ..., P, d] with d even. positions: NULL = row p is at position p; otherwise
 * int32 [B, P], the position of each row of each batch item (any middle dims share
 * them). base is 10000 in the paper. Rotating queries and keys this way makes
 * q_m · k_n depend on m - n only. Errors (NULL): odd d, fewer than 2 dims,
 * positions without a batch dim. */
lb_var *lb_rotary(lb_graph *g, lb_var *x, const int32_t *positions, double base);

/* lb_rotary with the choices other models make: only the first rotary_dim features
 * rotated (partial rotary; rotary_dim even, 2 <= rotary_dim <= d; the angles use
 * theta_i = base^(-2i/rotary_dim), as GPT-NeoX), pairs in either layout
 * (autograd/ops.h, lb_rotary_embed). lb_rotary(g, x, p, b) is
 * lb_rotary_ex(g, x, p, b, d, LB_ROTARY_HALVES). Errors as lb_rotary, and a
 * rotary_dim that is odd or outside [2, d]. */
lb_var *lb_rotary_ex(lb_graph *g, lb_var *x, const int32_t *positions, double base, int64_t rotary_dim,
                     lb_rotary_layout layout);

/* The cos and sin tables of lb_rotary_ex for x [B, ..., P, d]: two new tensors of
 * x's rank, [1, ..., 1, P, rotary_dim/2] without positions and [B, 1, ..., P,
 * rotary_dim/2] with them, in `dtype` (the caller frees both). For lb_rotary_embed. */
lb_status lb_rotary_tables(lb_dtype dtype, int ndim, const int64_t *x_shape, const int32_t *positions, double base,
                           int64_t rotary_dim, lb_tensor **cos_out, lb_tensor **sin_out);

/* Graph-free forms for streaming inference (layers/stream.c), the same arithmetic as
 * lb_positional_add_at and lb_rotary:
 * x [N, d_model] (raw, the model's dtype) += the positional rows at positions [N] (sinusoidal:
 * the table's row, learned: the embedding's row; none, rotary and alibi: nothing). Positions
 * must be checked by the caller (learned: < max_seq_len). */
void lb_positional_add_rows(const lb_positional *p, lb_dtype dtype, int64_t N, void *x, const int32_t *positions);
/* x [N, H, d] (raw, dtype) rotated in place, row n at positions[n] (d even, halves
 * layout, every feature rotated: what lb_rotary gives for [N, H, 1, d] and [N, 1]
 * positions). */
void lb_rotary_rows(lb_dtype dtype, int64_t N, int64_t H, int64_t d, void *x, const int32_t *positions, double base);

LB_API_END

#endif

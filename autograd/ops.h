/* Differentiable operations, forward and backward, float32 and float64.
 *
 * Each op computes its result immediately and returns a new variable owned by the
 * graph `g`; when grad mode is on and an input requires gradients, it is recorded
 * for lb_backward. On error an op returns NULL and lb_last_error() names the op and
 * the shapes involved. A NULL input is accepted and returns NULL (the error of the
 * op that produced it stays), so a chain of ops can be checked once at its end.
 * All operands of one op share one dtype.
 *
 * Shapes use named dimensions: B batch, T (Tq, Tk) sequence positions (query, key),
 * C classes, D features, V vocabulary, and "..." for any leading dimensions.
 */
#ifndef LB_OPS_H
#define LB_OPS_H

#include "tensor/api.h"

#include "autograd/autograd.h"
#include "tensor/rng.h"

LB_API_BEGIN

/* ---- elementwise arithmetic with numpy broadcasting (torch.add/sub/mul/div) ----
 * a: [*A], b: [*B] -> [*broadcast(A, B)]. Gradients are summed back to each
 * operand's shape. div's gradient for b is -grad * a / b^2. */
lb_var *lb_add(lb_graph *g, lb_var *a, lb_var *b);
lb_var *lb_sub(lb_graph *g, lb_var *a, lb_var *b);
lb_var *lb_mul(lb_graph *g, lb_var *a, lb_var *b);
lb_var *lb_div(lb_graph *g, lb_var *a, lb_var *b);
/* -x, and c * x for a constant c: [*] -> [*]. */
lb_var *lb_neg(lb_graph *g, lb_var *x);
lb_var *lb_scale(lb_graph *g, lb_var *x, double c);

/* ---- unary functions, [*] -> [*] ----
 * exp; log (natural; log of x <= 0 gives -inf/NaN as in torch.log); tanh;
 * sigmoid 1/(1+e^-x); relu max(x, 0) (gradient 0 at 0, as PyTorch);
 * gelu exact x * Phi(x) with the Gaussian CDF via erf (torch.nn.functional.gelu,
 * approximate='none'; Hendrycks and Gimpel 2016); gelu_tanh its tanh approximation
 * 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3))) (approximate='tanh', GPT-2's GELU). */
lb_var *lb_exp(lb_graph *g, lb_var *x);
lb_var *lb_log(lb_graph *g, lb_var *x);
lb_var *lb_tanh(lb_graph *g, lb_var *x);
lb_var *lb_sigmoid(lb_graph *g, lb_var *x);
lb_var *lb_relu(lb_graph *g, lb_var *x);
lb_var *lb_gelu(lb_graph *g, lb_var *x);
lb_var *lb_gelu_tanh(lb_graph *g, lb_var *x);

/* ---- matrix products (torch.matmul), through cblas gemm ----
 * a: [*Ba, M, K], b: [*Bb, K, N] -> [*broadcast(Ba, Bb), M, N]. Both operands need
 * at least 2 dims. lb_matmul_t multiplies by the transposes of a and/or b
 * (a stored [*Ba, K, M] when trans_a; b stored [*Bb, N, K] when trans_b) without
 * copying them: Q Kᵀ is lb_matmul_t(g, q, 0, k, 1). */
lb_var *lb_matmul(lb_graph *g, lb_var *a, lb_var *b);
lb_var *lb_matmul_t(lb_graph *g, lb_var *a, int trans_a, lb_var *b, int trans_b);

/* ---- shape ops (results are contiguous copies; gradients flow back exactly) ---- */
/* [*] -> shape (one entry may be -1); element counts must match (torch.reshape). */
lb_var *lb_reshape(lb_graph *g, lb_var *x, int ndim, const int64_t *shape);
/* Result dim i is x's dim perm[i] (torch.permute). */
lb_var *lb_permute(lb_graph *g, lb_var *x, const int *perm);
/* Swaps two dims (negative dims count from the end) (torch.transpose). */
lb_var *lb_transpose(lb_graph *g, lb_var *x, int d0, int d1);
/* x[..., start:stop:step, ...] along dim (python slicing, 0 <= start <= stop <= size). */
lb_var *lb_slice(lb_graph *g, lb_var *x, int dim, int64_t start, int64_t stop, int64_t step);
/* Joins n >= 1 variables along dim; all other dims equal (torch.cat). More than
 * LB_MAX_OP_INPUTS inputs are joined in stages (same values and gradients). */
lb_var *lb_concat(lb_graph *g, int n, lb_var *const *xs, int dim);

/* ---- reductions (torch.sum / torch.mean), accumulated in double ----
 * lb_sum, lb_mean: all elements -> [] (a 0-dim scalar).
 * lb_sum_axes, lb_mean_axes: over the n_axes listed dims (negative allowed);
 * keepdim keeps them as size 1. n_axes == 0 reduces nothing (a copy, numpy's axis=()). */
lb_var *lb_sum(lb_graph *g, lb_var *x);
lb_var *lb_mean(lb_graph *g, lb_var *x);
lb_var *lb_sum_axes(lb_graph *g, lb_var *x, int n_axes, const int *axes, int keepdim);
lb_var *lb_mean_axes(lb_graph *g, lb_var *x, int n_axes, const int *axes, int keepdim);

/* ---- selecting reductions over one axis, and where ----
 * x: [*S]; dim may be negative; the result is S without dim (or with dim kept as 1
 * when keepdim). All are exact (no accumulation error beyond logsumexp's).
 *
 * lb_logsumexp (torch.logsumexp): log(sum_j exp(x_j)), computed as
 *   m + log(sum_j exp(x_j - m)), m = max_j x_j, so logits of +-1000 are exact. A row
 *   of -inf gives -inf with a zero gradient (never NaN; torch 1.13 gives NaN there); a
 *   row holding +inf gives +inf, its gradient shared by the +inf elements.
 *   Gradient: softmax(x) along dim.
 * lb_amax / lb_amin (torch.amax / torch.amin): the max / min; NaN if the row holds
 *   one. Gradient: split evenly between the elements equal to the result (two tied
 *   maxima get dy / 2 each), as torch.amax.
 * lb_max (torch.max(x, dim)): the max with its index: indices (may be NULL) receives
 *   numel(result) int64 positions along dim, the first maximum (or the first NaN).
 *   Gradient: all of dy to that index, as torch.max.
 * Errors: dim out of range (names x and the valid range); an empty dim for amax,
 * amin and max (the max of nothing). */
lb_var *lb_logsumexp(lb_graph *g, lb_var *x, int dim, int keepdim);
lb_var *lb_amax(lb_graph *g, lb_var *x, int dim, int keepdim);
lb_var *lb_amin(lb_graph *g, lb_var *x, int dim, int keepdim);
lb_var *lb_max(lb_graph *g, lb_var *x, int dim, int keepdim, int64_t *indices);
/* torch.where(cond, a, b): cond [*C] (any dtype; nonzero, NaN included, = take a),
 * a [*A], b [*B] -> [*broadcast(C, A, B)]. The branch not taken never reaches the
 * result or the gradient (inf or NaN there is harmless). Gradients: dy where cond
 * to a, where not to b, each summed back to its shape.
 * Errors: cond NULL; shapes that do not broadcast (names all three). */
lb_var *lb_where(lb_graph *g, const lb_tensor *cond, lb_var *a, lb_var *b);

/* ---- softmax family, over the last axis ----
 * x: [..., N] -> [..., N]; the row max is subtracted before exp, so logits of
 * +-1000 are exact (torch.softmax / torch.log_softmax with dim=-1). */
lb_var *lb_softmax(lb_graph *g, lb_var *x);
lb_var *lb_log_softmax(lb_graph *g, lb_var *x);

/* What a query may attend to, for lb_masked_softmax and the attention layers.
 * Every field is optional; a zeroed struct masks nothing. Conventions match
 * torch.nn.functional.scaled_dot_product_attention unless stated. */
typedef struct lb_attn_mask {
    /* Boolean mask broadcastable to the scores [..., Tq, Tk]: nonzero = may attend. */
    const lb_tensor *allowed;
    /* Float mask broadcastable to the scores, added after scaling; -inf entries
     * count as masked. */
    const lb_tensor *additive;
    /* Causal: query i may attend key j iff j <= pos(i), where pos(i), the key index
     * query i aligns with, is i + (Tk - Tq) unless query_positions says otherwise.
     * When Tq != Tk the LAST query aligns with the LAST key (what a key-value cache
     * needs); PyTorch's is_causal aligns the first query with the first key instead. */
    int causal;
    /* Sliding window (0 = off): pos(i) - window < j <= pos(i) (a window implies the
     * causal bound), so each query sees at most the last `window` keys up to its
     * aligned position. */
    int64_t window;
    /* Padding: per item of the scores' first dim (B), keys j >= key_lengths[b] are
     * masked; each length in [0, Tk]; the scores need >= 3 dims. NULL = no padding. */
    const int32_t *key_lengths;
    /* [B, Tq] or NULL: the key index each query aligns with (causal: j <= pos,
     * window: pos - window < j <= pos); NULL = i + (Tk - Tq). Read as
     * query_positions[b * Tq + i] with b the index in the scores' first dim (b = 0 for
     * 2-dim scores [Tq, Tk]); each >= 0. A position may lie past the last key (>= Tk:
     * cached decoding whose cache keeps only a window of keys): causal then allows
     * every key, and a window may leave a query none (zeros). Only causal and window
     * use it. This is
     * how a subset of queries (the readout of lb_attn_queries, layers/attention.h)
     * keeps the limits it has in the full computation. */
    const int32_t *query_positions;
    /* Logit soft-capping (Gemma 2; 0 = off): each scaled score s becomes
     * softcap * tanh(s / softcap) before the additive mask, bounding it to
     * (-softcap, softcap). Not a mask, but read by every path that takes one. */
    double softcap;
    /* ALiBi (Press et al. 2022, "Train Short, Test Long"; NULL = off): per-head slopes
     * [alibi_heads], alibi_heads the size of the scores' dim just before Tq (the heads H
     * of [B, H, Tq, Tk]; the scores need >= 3 dims). The score of query i and key j
     * gets -m_h |pos(i) - j| added after scaling and the soft-cap (pos(i) as for
     * causal), h the query's index in that dim: -m_h (pos(i) - j) for the keys a causal
     * query sees, the symmetric distance without a causal mask (x-transformers'
     * AlibiPositionalBias). Slopes as layers/positional.h's lb_alibi_slopes. Not a
     * mask: masked keys stay masked. */
    const double *alibi_slopes;
    int64_t alibi_heads;
} lb_attn_mask;

/* Scaled masked softmax over the key axis:
 *   scores: [B, ..., Tq, Tk] -> weights [B, ..., Tq, Tk],
 *   weights = softmax(scale * scores + additive (+ ALiBi's bias), masked entries removed).
 * Masked entries never reach exp (their scores are never read, so inf or NaN there
 * is harmless); a score of -inf after scaling and the additive mask counts as
 * masked; a row with no allowed key gives all zeros and a zero gradient (never NaN). Attention uses scale = 1/sqrt(d_k) (Vaswani et al.
 * 2017, eq. 1). Errors: mask shapes that do not broadcast to the scores. */
lb_var *lb_masked_softmax(lb_graph *g, lb_var *scores, const lb_attn_mask *mask, double scale);

/* Fused exact scaled dot-product attention (FlashAttention-2, Dao 2023):
 *   q [B, ..., Tq, D], k [B, ..., Tk, D], v [B, ..., Tk, Dv] -> [B, ..., Tq, Dv],
 *   out = softmax(scale * q kᵀ + mask) v, softmax over the keys,
 * the same value as lb_matmul(lb_masked_softmax(lb_matmul_t(q, 0, k, 1), mask, scale), v)
 * (the materialized path, which stays the reference and the way to get the weights)
 * but without ever holding the [B, ..., Tq, Tk] scores: queries and keys are taken in
 * tiles with an online softmax, and only the per-row log-sum-exp [B, ..., Tq] is kept
 * for the backward, which recomputes the scores tile by tile. Memory is O(B Tq D)
 * instead of O(B Tq Tk); key tiles that causal, window and padding limits exclude
 * are skipped (causal attention costs half of full attention).
 * The mask (see lb_attn_mask, "the scores" being [B, ..., Tq, Tk]) is copied: the
 * caller's mask and arrays may be freed right after the call. A row with no allowed
 * key gives zeros and zero gradients (never NaN). Gradients flow to q, k and v.
 * Leading dims (B, ...) must be equal in q, k and v (no broadcasting), but for the
 * last (the heads H of [B, H, T, D]): k and v may have Hkv heads, a divisor of H, for
 * grouped-query attention (Ainslie et al. 2023; Hkv = 1 is multi-query): query head h
 * reads key/value head h / (H / Hkv), as torch's scaled_dot_product_attention with
 * enable_gqa=True; the key/value heads are read in place (never copied per query head)
 * and their gradients sum over the group. D, Dv >= 1.
 * float32 computes in float32 (agrees with the materialized path to about 1e-6);
 * float64 to about 1e-15. Attention uses scale = 1/sqrt(D) (Vaswani et al. 2017, eq. 1).
 * Threads: lb_set_num_threads (tensor/threads.h); results are bit-for-bit the same for
 * any thread count (kernels/attention.h).
 * Errors: shapes that do not fit (names all three), masks that do not broadcast to the
 * scores, key_lengths or query_positions out of range, a non-finite scale. */
lb_var *lb_attention_fused(lb_graph *g, lb_var *q, lb_var *k, lb_var *v, const lb_attn_mask *mask, double scale);

/* ---- neural-network ops ---- */
/* Layer normalisation over the last axis (Ba et al. 2016; torch.nn.functional.layer_norm):
 *   x: [..., D], weight: [D] or NULL, bias: [D] or NULL -> [..., D],
 *   y = (x - mean) / sqrt(var + eps) * weight + bias, var biased (divides by D),
 *   computed in two passes. */
lb_var *lb_layer_norm(lb_graph *g, lb_var *x, lb_var *weight, lb_var *bias, double eps);
/* RMS normalisation over the last axis (Zhang & Sennrich 2019, eq. 4; torch.nn.RMSNorm):
 *   x: [..., D], weight: [D] or NULL -> [..., D],
 *   y = x / sqrt(mean(x^2) + eps) * weight: no mean subtraction, no bias; mean(x^2) in
 *   double, one pass (kernels/stream.h's lb_k_rms_norm_rows). Gradients flow to x and
 *   weight. Errors: LB_ERR_SHAPE for an empty last dim or a weight that is not [D],
 *   LB_ERR_VALUE for eps negative or not finite. */
lb_var *lb_rms_norm(lb_graph *g, lb_var *x, lb_var *weight, double eps);
/* The gated product of a gated linear unit (Shazeer 2020, eqs. 5-6):
 *   x: [..., 2 H] holding the gate a = x[..., :H], then the value b = x[..., H:] -> [..., H],
 *   lb_swiglu: silu(a) * b = a sigmoid(a) b   (F.silu(a) * b)
 *   lb_geglu:  gelu(a) * b, exact GELU          (F.gelu(a) * b)
 * one pass (kernels/gelu.h's lb_k_glu), each element in double. A feed-forward layer
 * computes x W1 = [x W_gate, x W_up] with one product, then this op.
 * Errors: LB_ERR_SHAPE for an odd or empty last dim. */
lb_var *lb_swiglu(lb_graph *g, lb_var *x);
lb_var *lb_geglu(lb_graph *g, lb_var *x);
/* Embedding lookup (torch.nn.functional.embedding):
 *   weight: [V, D], ids: int32 [*S] (ndim, shape) -> [*S, D]. Repeated ids
 *   accumulate their gradients. Errors: an id outside [0, V) (names the position). */
lb_var *lb_embedding(lb_graph *g, lb_var *weight, const int32_t *ids, int ndim, const int64_t *shape);
/* Inverted dropout (torch.nn.functional.dropout): when training and p > 0, each
 * element is zeroed with probability p (drawn from rng) and the rest scaled by
 * 1/(1-p) (one uniform draw per element, row-major); otherwise the identity, and
 * rng may then be NULL. Errors: p outside [0, 1), training with p > 0 and no rng. */
lb_var *lb_dropout(lb_graph *g, lb_var *x, double p, int training, lb_rng *rng);
/* Dropout with the caller's mask, to reproduce another framework's draw exactly:
 *   x: [*], keep: [*] (x's shape, any dtype, nonzero = keep) -> keep * x / (1 - p),
 * the value torch.nn.functional.dropout gives when its Bernoulli draw is `keep`.
 * Errors: p outside [0, 1), a mask that is NULL or not x's shape. */
lb_var *lb_dropout_mask(lb_graph *g, lb_var *x, const lb_tensor *keep, double p);
/* Rotary position embedding from caller-given tables (RoFormer, Su et al. 2021):
 *   x: [..., P, d]; cos, sin: the same shape [..., P, h], broadcastable to x's
 *   [..., P, h] (e.g. [P, h] for every batch and head, or [B, 1, P, h] per item);
 *   the first r = 2h <= d features are rotated in pairs (a, b):
 *     y_a = x_a cos - x_b sin,  y_b = x_b cos + x_a sin,
 *   and features r .. d-1 pass unchanged (partial rotary, GPT-NeoX's rotary_pct).
 *   layout HALVES pairs (k, k + h) (GPT-NeoX, Hugging Face rotate_half);
 *   INTERLEAVED pairs (2k, 2k + 1) (the original RoFormer, GPT-J, Meta's LLaMA code).
 * With angles pos * base^(-2k/r), cos = cos(angle), sin = sin(angle) this is
 * layers/positional.h's lb_rotary. Gradient: the transposed rotation.
 * Errors: x with fewer than 2 dims, tables of different shapes, 2h > d, tables that
 * do not broadcast, an unknown layout. */
typedef enum lb_rotary_layout { LB_ROTARY_HALVES = 0, LB_ROTARY_INTERLEAVED } lb_rotary_layout;
lb_var *lb_rotary_embed(lb_graph *g, lb_var *x, const lb_tensor *cos, const lb_tensor *sin, lb_rotary_layout layout);
/* Cross-entropy from logits (torch.nn.functional.cross_entropy, reduction='mean'):
 *   logits: [..., C], targets: int32 [...] (numel(logits) / C entries)
 *   -> [] mean over targets != ignore_index of logsumexp(row) - row[target].
 * All targets ignored gives 0 with zero gradients. Errors: a target outside [0, C)
 * that is not ignore_index (names its position). PyTorch's default ignore_index is -100. */
lb_var *lb_cross_entropy(lb_graph *g, lb_var *logits, const int32_t *targets, int64_t ignore_index);
/* Options of the class losses, as torch.nn.functional.cross_entropy / nll_loss.
 * Start from lb_loss_options_default (ignore_index -100, reduction mean, no weight,
 * no smoothing); a NULL options pointer means those defaults. */
typedef enum lb_reduction { LB_REDUCTION_MEAN = 0, LB_REDUCTION_SUM, LB_REDUCTION_NONE } lb_reduction;
typedef struct lb_loss_options {
    int64_t ignore_index;     /* targets equal to it are skipped (loss 0, gradient 0) */
    const lb_tensor *weight;  /* [C] class weights (any dtype; read as double), or NULL = all 1 */
    lb_reduction reduction;   /* mean (weighted: / sum of the counted targets' weights), sum, none */
    double label_smoothing;   /* eps in [0, 1]: the target is (1 - eps) one-hot + eps / C uniform */
} lb_loss_options;
void lb_loss_options_default(lb_loss_options *opt);
/* Cross-entropy from logits with every option of torch.nn.functional.cross_entropy
 * (class-index targets):
 *   logits: [..., C], targets: int32 [...] (numel(logits) / C entries)
 *   a row with target t != ignore_index: loss = (1 - eps) w_t (lse - x_t)
 *                                              + (eps / C) sum_j w_j (lse - x_j),
 *   lse = logsumexp of the row, w the class weights, eps the label smoothing;
 *   an ignored row: 0.
 *   reduction none -> [...] (one loss per target: what per-position evaluation
 *   needs); sum -> []; mean -> [] sum / (sum of w_t over the counted targets),
 *   PyTorch's weighted mean. With nothing counted the mean is 0 with zero gradients
 *   (PyTorch gives NaN there).
 * The classes are the LAST dim (PyTorch puts them at dim 1 for inputs of more than 2
 * dims: move them last with lb_permute). Errors: a target outside [0, C) that is not
 * ignore_index (names its position), a weight that is not [C], label_smoothing
 * outside [0, 1], an unknown reduction. */
lb_var *lb_cross_entropy_ex(lb_graph *g, lb_var *logits, const int32_t *targets, const lb_loss_options *options);
/* Negative log-likelihood (torch.nn.functional.nll_loss) on log-probabilities
 * [..., C] (e.g. from lb_log_softmax), with the same options and shapes:
 *   loss = -(1 - eps) w_t x_t - (eps / C) sum_j w_j x_j for a counted row, so that
 *   lb_nll_loss(lb_log_softmax(x)) equals lb_cross_entropy_ex(x) for every option.
 * (torch's nll_loss has no label_smoothing; with eps = 0 it is exactly torch's.) */
lb_var *lb_nll_loss(lb_graph *g, lb_var *log_probs, const int32_t *targets, const lb_loss_options *options);
/* Mean squared error (torch.nn.functional.mse_loss, reduction='mean'):
 *   pred: [*], target: [*] (same shape, non-empty) -> [] mean of (pred - target)^2. */
lb_var *lb_mse(lb_graph *g, lb_var *pred, lb_var *target);

/* ---- recurrent and convolutional ops (used by layers/lstm.h and layers/conv.h) ---- */
/* One LSTM layer over a whole sequence, torch.nn.LSTM's equations with gate order
 * i, f, g, o (kernels/lstm.h; Hochreiter and Schmidhuber 1997, forget gate of
 * Gers et al. 2000):
 *   x [B, T, n_in], w_ih [4H, n_in], w_hh [4H, H], b_ih [4H], b_hh [4H],
 *   h0, c0 [L, B, H] or NULL (zeros), of which the layer reads entry `layer`
 *   -> y [B, T, H], the hidden state h_t of every step.
 * Recorded as two nodes: the input projection of every step (one gemm over B*T rows),
 * then the recurrence (one gemm per step, the gate nonlinearities fused). The
 * activations kept for backward are one [B, T, 4H] gate buffer and the cell states
 * [B, T, H]. Gradients flow to every input. Errors: shapes that do not fit (the
 * message lists them all), B or T < 1, layer outside [0, L) when h0 or c0 is given. */
lb_var *lb_lstm_layer(lb_graph *g, lb_var *x, lb_var *w_ih, lb_var *w_hh, lb_var *b_ih, lb_var *b_hh, lb_var *h0,
                      lb_var *c0, int layer);
/* The final hidden state h_T (cell = 0) or cell state c_T (cell = 1) of an LSTM
 * layer, stacked under prev:
 *   y [B, T, H] from lb_lstm_layer, prev [k, B, H] or NULL -> [k+1, B, H]
 * (the last entry is y[:, T-1] for h, the layer's last cell state for c). Gradients
 * flow to prev and, through y, into the layer. Errors: y not made by lb_lstm_layer
 * (LB_ERR_VALUE), prev not [k, B, H]. */
lb_var *lb_lstm_final_state(lb_graph *g, lb_var *y, lb_var *prev, int cell);
/* Causal dilated 1-D convolution, time before channels (kernels/conv.h):
 *   x [B, T, C_in], weight [C_out, C_in, K], bias [C_out] -> [B, T, C_out],
 *   y[b, t, o] = bias[o] + Σ_{j<K} Σ_c weight[o, c, j] x[b, t - d(K-1-j), c],
 * inputs before t = 0 reading zeros: torch.nn.Conv1d(C_in, C_out, K, dilation=d,
 * padding=d(K-1)) on x.transpose(1, 2), truncated to its first T outputs. Gradients
 * flow to all three. Errors: shapes that do not fit, dilation < 1. */
lb_var *lb_causal_conv1d(lb_graph *g, lb_var *x, lb_var *weight, lb_var *bias, int64_t dilation);
/* Causal linear attention (Katharopoulos et al. 2020, eq. 4–6, feature map
 * φ(x) = elu(x) + 1) with an optional fixed decay per head (RetNet, Sun et al. 2023):
 *   q, k [B, H, T, d_k], v [B, H, T, d_v] -> y [B, H, T, d_v],
 *   y_i = Σ_{j<=i} γ_h^(i-j) (φ(q_i)·φ(k_j)) v_j / (Σ_{j<=i} γ_h^(i-j) φ(q_i)·φ(k_j) + 1e-6)
 * (kernels/linear_attention.h: chunked parallel form, exact backward linear in T).
 * gamma [H] in (0, 1], or NULL for no decay (γ = 1). state [B, H, d_k, d_v + 1] or
 * NULL: when given (streaming; no gradients flow to it), the recurrent state before
 * position 0, replaced by the state after valid[b] positions (valid NULL: T).
 * Gradients flow to q, k and v. Errors: shapes that do not fit (LB_ERR_SHAPE), a decay
 * outside (0, 1] (LB_ERR_VALUE). */
lb_var *lb_linear_attention(lb_graph *g, lb_var *q, lb_var *k, lb_var *v, const double *gamma, lb_tensor *state,
                            const int64_t *valid);
/* The selective scan of Mamba (Gu & Dao 2023, Algorithm 2; kernels/selective_scan.h):
 *   u, delta [B, T, D], A [D, N], Bm, Cm [B, T, N] -> y [B, T, D],
 *   Δ = softplus(delta), h_t = exp(Δ_t A) h_{t-1} + Δ_t Bm_t u_t (h_{-1} = 0), y_t = Σ_n Cm_t h_t,
 * per channel d with its state h [N]: what the authors' `selective_scan_ref(u, delta, A, B, C,
 * delta_softplus=True)` computes (u, delta transposed to [B, D, T]), without its D and z terms.
 * The backward recomputes the states (none is kept). Gradients flow to all five inputs.
 * Errors: shapes that do not fit (the message lists them), a dtype other than float32/64. */
lb_var *lb_selective_scan(lb_graph *g, lb_var *u, lb_var *delta, lb_var *A, lb_var *Bm, lb_var *Cm);

LB_API_END

#endif

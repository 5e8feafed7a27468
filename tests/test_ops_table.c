/* Every op of the op list (autograd/ops.def), checked from one recipe row each:
 *   - float64 gradcheck of the op placed after another op (each input goes through
 *     an elementwise product with a constant first, so gradients arrive at the op's
 *     inputs as non-leaf nodes and are passed on);
 *   - float32 against float64: the same values (float32 inputs widened exactly) give
 *     outputs and input gradients that agree within the recipe's tolerance;
 *   - a misuse: the call must return NULL with the recipe's status and a message
 *     naming the op and the offending shape or value.
 *   - for a fused op (an LB_FUSED row of ops.def): values and input gradients equal, in
 *     float64, those of the composition of simpler ops that the row names.
 * An op kind without a recipe row fails test_every_op_has_a_recipe. */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "autograd/gradcheck.h"
#include "autograd/op_table.h"
#include "autograd/ops.h"
#include "support.h"
#include "tensor/rng.h"

enum { MAX_IN = 7 };

typedef struct op_input {
    int ndim;
    int64_t shape[4];
    double low, high; /* values drawn uniformly from [low, high] */
} op_input;

typedef lb_var *(*op_build_fn)(lb_graph *g, lb_var *const *x);

typedef struct op_recipe {
    lb_op_kind op;
    int n_inputs;
    op_input in[MAX_IN];
    op_build_fn build;  /* applies the op once to its inputs (either dtype) */
    op_build_fn misuse; /* a wrong call on the same (float64) inputs */
    lb_status misuse_status;
    const char *misuse_text; /* what the message must say: fragments split by '|' (the op, a shape) */
    double tol;              /* float32 vs float64, atol = rtol; 0 means 1e-5 */
} op_recipe;

/* A variable on a graph of its own: passing it to an op on another graph is misuse. */
static lb_graph *foreign_graph;
static lb_var *foreign(lb_var *x) { return lb_input_copy(foreign_graph, x->value, 0); }

/* ---- builders: one op each ---- */

static lb_var *b_add(lb_graph *g, lb_var *const *x) { return lb_add(g, x[0], x[1]); }
static lb_var *b_sub(lb_graph *g, lb_var *const *x) { return lb_sub(g, x[0], x[1]); }
static lb_var *b_mul(lb_graph *g, lb_var *const *x) { return lb_mul(g, x[0], x[1]); }
static lb_var *b_div(lb_graph *g, lb_var *const *x) { return lb_div(g, x[0], x[1]); }
static lb_var *b_neg(lb_graph *g, lb_var *const *x) { return lb_neg(g, x[0]); }
static lb_var *b_scale(lb_graph *g, lb_var *const *x) { return lb_scale(g, x[0], -1.75); }
static lb_var *b_exp(lb_graph *g, lb_var *const *x) { return lb_exp(g, x[0]); }
static lb_var *b_log(lb_graph *g, lb_var *const *x) { return lb_log(g, x[0]); }
static lb_var *b_tanh(lb_graph *g, lb_var *const *x) { return lb_tanh(g, x[0]); }
static lb_var *b_sigmoid(lb_graph *g, lb_var *const *x) { return lb_sigmoid(g, x[0]); }
static lb_var *b_relu(lb_graph *g, lb_var *const *x) { return lb_relu(g, x[0]); }
static lb_var *b_gelu(lb_graph *g, lb_var *const *x) { return lb_gelu(g, x[0]); }
/* a [2, 3, 4] @ bᵀ with b stored [5, 4] (broadcast over the batch) -> [2, 3, 5] */
static lb_var *b_matmul(lb_graph *g, lb_var *const *x) { return lb_matmul_t(g, x[0], 0, x[1], 1); }
static lb_var *b_reshape(lb_graph *g, lb_var *const *x) { return lb_reshape(g, x[0], 3, (int64_t[]){3, -1, 2}); }
static lb_var *b_permute(lb_graph *g, lb_var *const *x) { return lb_permute(g, x[0], (int[]){2, 0, 1}); }
static lb_var *b_slice(lb_graph *g, lb_var *const *x) { return lb_slice(g, x[0], 1, 1, 5, 2); }
static lb_var *b_concat(lb_graph *g, lb_var *const *x) { return lb_concat(g, 3, x, 1); }
static lb_var *b_sum(lb_graph *g, lb_var *const *x) { return lb_sum_axes(g, x[0], 2, (int[]){0, -1}, 0); }
static lb_var *b_mean(lb_graph *g, lb_var *const *x) { return lb_mean_axes(g, x[0], 1, (int[]){1}, 1); }
static lb_var *b_softmax(lb_graph *g, lb_var *const *x) { return lb_softmax(g, x[0]); }
static lb_var *b_log_softmax(lb_graph *g, lb_var *const *x) { return lb_log_softmax(g, x[0]); }

/* scores [2, 3, 4]: causal (last query aligned with the last key), item 1 padded to
 * 2 keys, and an allowed mask that removes every key of query 0 in item 0 (a fully
 * masked row); scores soft-capped at 0.5. */
static lb_var *b_masked_softmax(lb_graph *g, lb_var *const *x)
{
    static const int32_t lengths[2] = {4, 2};
    int64_t ms[3] = {2, 3, 4};
    double allowed[24];
    for (int i = 0; i < 24; i++)
        allowed[i] = (i < 4) ? 0 : 1;
    lb_tensor *a = lb_tensor_from_doubles(LB_FLOAT32, 3, ms, allowed);
    lb_attn_mask m = {.allowed = a, .causal = 1, .key_lengths = lengths, .softcap = 0.5}; /* capped hard */
    lb_var *y = lb_masked_softmax(g, x[0], &m, 0.7);
    lb_tensor_free(a);
    return y;
}
/* q [2, 3, 4], k [2, 5, 4], v [2, 5, 3], causal, item 0 padded to 4 keys, scores
 * soft-capped at 0.6 -> [2, 3, 3] */
static lb_var *b_attention(lb_graph *g, lb_var *const *x)
{
    static const int32_t lengths[2] = {4, 5};
    lb_attn_mask m = {.causal = 1, .key_lengths = lengths, .softcap = 0.6};
    return lb_attention_fused(g, x[0], x[1], x[2], &m, 0.5);
}
static lb_var *b_layer_norm(lb_graph *g, lb_var *const *x) { return lb_layer_norm(g, x[0], x[1], x[2], 1e-5); }
static lb_var *b_embedding(lb_graph *g, lb_var *const *x)
{
    static const int32_t ids[6] = {4, 0, 2, 2, 1, 4}; /* repeated ids accumulate */
    int64_t s[2] = {2, 3};
    return lb_embedding(g, x[0], ids, 2, s);
}
static lb_var *b_dropout(lb_graph *g, lb_var *const *x)
{
    lb_rng rng;
    lb_rng_seed(&rng, 31); /* reseeded per call: gradcheck needs a fixed mask */
    return lb_dropout(g, x[0], 0.4, 1, &rng);
}
/* class weights, label smoothing 0.1, one ignored row, weighted mean */
static lb_var *b_cross_entropy(lb_graph *g, lb_var *const *x)
{
    static const int32_t targets[4] = {2, -100, 0, 4};
    lb_tensor *w = lb_tensor_from_doubles(LB_FLOAT64, 1, (int64_t[]){5}, (double[]){1.5, 1, 0.5, 2, 0.75});
    lb_loss_options o;
    lb_loss_options_default(&o);
    o.weight = w;
    o.label_smoothing = 0.1;
    lb_var *y = lb_cross_entropy_ex(g, x[0], targets, &o);
    lb_tensor_free(w);
    return y;
}
static lb_var *b_mse(lb_graph *g, lb_var *const *x) { return lb_mse(g, x[0], x[1]); }
static lb_var *b_gelu_tanh(lb_graph *g, lb_var *const *x) { return lb_gelu_tanh(g, x[0]); }
static lb_var *b_logsumexp(lb_graph *g, lb_var *const *x) { return lb_logsumexp(g, x[0], 1, 0); }
static lb_var *b_amax(lb_graph *g, lb_var *const *x) { return lb_amax(g, x[0], -1, 1); }
static lb_var *b_amin(lb_graph *g, lb_var *const *x) { return lb_amin(g, x[0], 0, 0); }
static lb_var *b_max(lb_graph *g, lb_var *const *x)
{
    int64_t indices[8];
    return lb_max(g, x[0], 1, 0, indices);
}
/* cond [2, 1] broadcast against a [2, 3] and b [3] */
static lb_var *b_where(lb_graph *g, lb_var *const *x)
{
    lb_tensor *c = lb_tensor_from_doubles(LB_FLOAT32, 2, (int64_t[]){2, 1}, (double[]){1, 0});
    lb_var *y = lb_where(g, c, x[0], x[1]);
    lb_tensor_free(c);
    return y;
}
/* weights, label smoothing 0.2, one ignored target, summed */
static lb_var *b_nll_loss(lb_graph *g, lb_var *const *x)
{
    static const int32_t targets[4] = {2, -100, 0, 4};
    lb_tensor *w = lb_tensor_from_doubles(LB_FLOAT64, 1, (int64_t[]){5}, (double[]){0.5, 1, 2, 1.5, 0.25});
    lb_loss_options o;
    lb_loss_options_default(&o);
    o.weight = w;
    o.label_smoothing = 0.2;
    o.reduction = LB_REDUCTION_SUM;
    lb_var *y = lb_nll_loss(g, x[0], targets, &o);
    lb_tensor_free(w);
    return y;
}
static lb_var *b_dropout_mask(lb_graph *g, lb_var *const *x)
{
    double keep[24];
    for (int i = 0; i < 24; i++)
        keep[i] = (i * 7) % 3 != 0;
    lb_tensor *k = lb_tensor_from_doubles(LB_FLOAT32, 2, (int64_t[]){4, 6}, keep);
    lb_var *y = lb_dropout_mask(g, x[0], k, 0.3);
    lb_tensor_free(k);
    return y;
}
/* x [2, 3, 6]: the first 4 features rotated in interleaved pairs, tables [3, 2] */
/* x [4, 6] with weight [6]; the same rows without a weight in the misuse */
static lb_var *b_rms_norm(lb_graph *g, lb_var *const *x) { return lb_rms_norm(g, x[0], x[1], 1e-5); }
/* x [2, 3, 4]: H = 2 */
static lb_var *b_swiglu(lb_graph *g, lb_var *const *x) { return lb_swiglu(g, x[0]); }
static lb_var *b_geglu(lb_graph *g, lb_var *const *x) { return lb_geglu(g, x[0]); }
static lb_var *b_rotary(lb_graph *g, lb_var *const *x)
{
    double c[6], sn[6];
    for (int i = 0; i < 6; i++) {
        c[i] = cos(0.3 + 0.7 * i);
        sn[i] = sin(0.3 + 0.7 * i);
    }
    lb_tensor *ct = lb_tensor_from_doubles(LB_FLOAT64, 2, (int64_t[]){3, 2}, c);
    lb_tensor *st = lb_tensor_from_doubles(LB_FLOAT64, 2, (int64_t[]){3, 2}, sn);
    lb_var *y = lb_rotary_embed(g, x[0], ct, st, LB_ROTARY_INTERLEAVED);
    lb_tensor_free(ct);
    lb_tensor_free(st);
    return y;
}

/* A user op through lb_custom: y = x^3, dy/dx = 3 x^2. */
static lb_status cube_backward(lb_var *node)
{
    lb_var *x = node->inputs[0];
    lb_tensor *gx = lb_grad_buffer(x);
    if (!gx)
        return lb_last_status();
    int64_t n = lb_tensor_numel(gx);
    LB_DISPATCH(gx->dtype, T, {
        const T *px = lb_tensor_data(x->value), *dy = lb_tensor_data(node->grad);
        T *dx = lb_tensor_data(gx);
        for (int64_t i = 0; i < n; i++)
            dx[i] += 3 * px[i] * px[i] * dy[i];
    });
    return LB_OK;
}
static lb_var *b_custom(lb_graph *g, lb_var *const *x)
{
    lb_tensor *y = lb_tensor_copy(x[0]->value, x[0]->value->dtype);
    int64_t n = lb_tensor_numel(y);
    LB_DISPATCH(y->dtype, T, {
        T *p = lb_tensor_data(y);
        for (int64_t i = 0; i < n; i++)
            p[i] = p[i] * p[i] * p[i];
    });
    return lb_custom(g, 1, x, y, cube_backward, NULL, NULL);
}

/* One layer with initial states: x [2, 3, 3], w_ih [8, 3], w_hh [8, 2], b_ih, b_hh [8],
 * h0, c0 [2, 2, 2] (entry 1 read) -> [2, 3, 2]. */
static lb_var *b_lstm(lb_graph *g, lb_var *const *x)
{
    return lb_lstm_layer(g, x[0], x[1], x[2], x[3], x[4], x[5], x[6], 1);
}
/* h_T stacked under c_T of a layer without initial states -> [2, 2, 2] */
static lb_var *b_lstm_state(lb_graph *g, lb_var *const *x)
{
    lb_var *y = lb_lstm_layer(g, x[0], x[1], x[2], x[3], x[4], NULL, NULL, 0);
    return lb_lstm_final_state(g, y, lb_lstm_final_state(g, y, NULL, 0), 1);
}
/* q, k [2, 2, 5, 3], v [2, 2, 5, 4]; head 0 without decay, head 1 with γ = 0.8 */
static const double linear_gamma[2] = {1.0, 0.8};
static lb_var *b_linear_attention(lb_graph *g, lb_var *const *x)
{
    return lb_linear_attention(g, x[0], x[1], x[2], linear_gamma, NULL, NULL);
}
/* x [2, 7, 3], weight [4, 3, 3], bias [4], dilation 2 (taps reach 4 steps back) */
static lb_var *b_conv1d(lb_graph *g, lb_var *const *x) { return lb_causal_conv1d(g, x[0], x[1], x[2], 2); }
static lb_var *b_selective_scan(lb_graph *g, lb_var *const *x) { return lb_selective_scan(g, x[0], x[1], x[2], x[3], x[4]); }

/* ---- misuses ---- */

/* [2, 3] with [4]: shapes that do not broadcast. */
static lb_var *m_binary(lb_graph *g, lb_var *const *x, lb_var *(*op)(lb_graph *, lb_var *, lb_var *))
{
    int64_t s[1] = {4};
    return op(g, x[0], lb_input(g, lb_tensor_zeros(LB_FLOAT64, 1, s), 0));
}
static lb_var *m_add(lb_graph *g, lb_var *const *x) { return m_binary(g, x, lb_add); }
static lb_var *m_sub(lb_graph *g, lb_var *const *x) { return m_binary(g, x, lb_sub); }
static lb_var *m_mul(lb_graph *g, lb_var *const *x) { return m_binary(g, x, lb_mul); }
static lb_var *m_div(lb_graph *g, lb_var *const *x) { return m_binary(g, x, lb_div); }
/* Unary ops accept any shape: their misuse is an input recorded on another graph. */
static lb_var *m_neg(lb_graph *g, lb_var *const *x) { return lb_neg(g, foreign(x[0])); }
static lb_var *m_scale(lb_graph *g, lb_var *const *x) { return lb_scale(g, foreign(x[0]), 2.0); }
static lb_var *m_exp(lb_graph *g, lb_var *const *x) { return lb_exp(g, foreign(x[0])); }
static lb_var *m_log(lb_graph *g, lb_var *const *x) { return lb_log(g, foreign(x[0])); }
static lb_var *m_tanh(lb_graph *g, lb_var *const *x) { return lb_tanh(g, foreign(x[0])); }
static lb_var *m_sigmoid(lb_graph *g, lb_var *const *x) { return lb_sigmoid(g, foreign(x[0])); }
static lb_var *m_relu(lb_graph *g, lb_var *const *x) { return lb_relu(g, foreign(x[0])); }
static lb_var *m_gelu(lb_graph *g, lb_var *const *x) { return lb_gelu(g, foreign(x[0])); }
/* Inner sizes 4 vs 5 (b not transposed). */
static lb_var *m_matmul(lb_graph *g, lb_var *const *x) { return lb_matmul(g, x[0], x[1]); }
static lb_var *m_reshape(lb_graph *g, lb_var *const *x) { return lb_reshape(g, x[0], 2, (int64_t[]){5, 5}); }
static lb_var *m_permute(lb_graph *g, lb_var *const *x) { return lb_permute(g, x[0], (int[]){0, 2, 2}); }
static lb_var *m_slice(lb_graph *g, lb_var *const *x) { return lb_slice(g, x[0], 1, 2, 9, 1); }
static lb_var *m_concat(lb_graph *g, lb_var *const *x) { return lb_concat(g, 3, x, 0); }
static lb_var *m_sum(lb_graph *g, lb_var *const *x) { return lb_sum_axes(g, x[0], 1, (int[]){3}, 0); }
static lb_var *m_mean(lb_graph *g, lb_var *const *x) { return lb_mean_axes(g, x[0], 2, (int[]){1, -2}, 0); }
static lb_var *m_softmax(lb_graph *g, lb_var *const *x) { return lb_softmax(g, foreign(x[0])); }
static lb_var *m_log_softmax(lb_graph *g, lb_var *const *x) { return lb_log_softmax(g, foreign(x[0])); }
/* An allowed mask [5] that does not broadcast to the scores [2, 3, 4]. */
static lb_var *m_masked_softmax(lb_graph *g, lb_var *const *x)
{
    int64_t s[1] = {5};
    lb_tensor *a = lb_tensor_zeros(LB_FLOAT32, 1, s);
    lb_attn_mask m = {.allowed = a};
    lb_var *y = lb_masked_softmax(g, x[0], &m, 1.0);
    lb_tensor_free(a);
    return y;
}
/* k and v given in the wrong order: v [2, 5, 3] has width 3, not q's 4. */
static lb_var *m_attention(lb_graph *g, lb_var *const *x)
{
    return lb_attention_fused(g, x[0], x[2], x[1], NULL, 0.5);
}
/* weight [5] for x [..., 6] */
static lb_var *m_layer_norm(lb_graph *g, lb_var *const *x)
{
    lb_var *weight = lb_input(g, lb_tensor_zeros(LB_FLOAT64, 1, (int64_t[]){5}), 0);
    return lb_layer_norm(g, x[0], weight, NULL, 1e-5);
}
static lb_var *m_embedding(lb_graph *g, lb_var *const *x)
{
    static const int32_t ids[3] = {0, 5, 1}; /* V is 5 */
    int64_t s[1] = {3};
    return lb_embedding(g, x[0], ids, 1, s);
}
static lb_var *m_dropout(lb_graph *g, lb_var *const *x) { return lb_dropout(g, x[0], 1.0, 1, NULL); }
static lb_var *m_cross_entropy(lb_graph *g, lb_var *const *x)
{
    static const int32_t targets[4] = {2, 5, 0, 4}; /* C is 5 */
    return lb_cross_entropy(g, x[0], targets, -100);
}
/* pred [2, 3] against a target flattened to [6] */
static lb_var *m_mse(lb_graph *g, lb_var *const *x) { return lb_mse(g, x[0], lb_reshape(g, x[1], 1, (int64_t[]){-1})); }
/* w_ih and w_hh swapped: [8, 2] does not take n_in = 3 */
static lb_var *m_lstm(lb_graph *g, lb_var *const *x)
{
    return lb_lstm_layer(g, x[0], x[2], x[1], x[3], x[4], x[5], x[6], 1);
}
/* The state of a value that no LSTM layer made */
static lb_var *m_lstm_state(lb_graph *g, lb_var *const *x) { return lb_lstm_final_state(g, x[0], NULL, 1); }
/* keys of width 4 for queries of width 3 */
static lb_var *m_linear_attention(lb_graph *g, lb_var *const *x)
{
    return lb_linear_attention(g, x[0], x[2], x[2], NULL, NULL, NULL);
}
/* C read as [2, 5, 3]: its state size does not match A's 4 */
static lb_var *m_selective_scan(lb_graph *g, lb_var *const *x)
{
    return lb_selective_scan(g, x[0], x[1], x[2], x[3], x[0]);
}
/* weight [4, 3, 3] for x with 7 channels (time and channels swapped) */
static lb_var *m_conv1d(lb_graph *g, lb_var *const *x)
{
    return lb_causal_conv1d(g, lb_transpose(g, x[0], 1, 2), x[1], x[2], 2);
}
static lb_var *m_gelu_tanh(lb_graph *g, lb_var *const *x) { return lb_gelu_tanh(g, foreign(x[0])); }
static lb_var *m_logsumexp(lb_graph *g, lb_var *const *x) { return lb_logsumexp(g, x[0], 3, 0); }
static lb_var *m_amax(lb_graph *g, lb_var *const *x) { return lb_amax(g, x[0], -4, 0); }
static lb_var *m_amin(lb_graph *g, lb_var *const *x) { return lb_amin(g, x[0], 5, 1); }
static lb_var *m_max(lb_graph *g, lb_var *const *x) { return lb_max(g, x[0], 3, 0, NULL); }
static lb_var *m_where(lb_graph *g, lb_var *const *x)
{
    lb_tensor *c = lb_tensor_zeros(LB_FLOAT32, 1, (int64_t[]){4});
    lb_var *y = lb_where(g, c, x[0], x[1]);
    lb_tensor_free(c);
    return y;
}
static lb_var *m_nll_loss(lb_graph *g, lb_var *const *x)
{
    static const int32_t targets[4] = {2, 5, 0, 4}; /* C is 5 */
    return lb_nll_loss(g, x[0], targets, NULL);
}
static lb_var *m_dropout_mask(lb_graph *g, lb_var *const *x)
{
    lb_tensor *k = lb_tensor_zeros(LB_FLOAT32, 1, (int64_t[]){4});
    lb_var *y = lb_dropout_mask(g, x[0], k, 0.3);
    lb_tensor_free(k);
    return y;
}
/* tables [3, 4]: 8 rotated features, but x has 6 */
/* weight [5] for x [..., 6] */
static lb_var *m_rms_norm(lb_graph *g, lb_var *const *x)
{
    lb_var *weight = lb_input(g, lb_tensor_zeros(LB_FLOAT64, 1, (int64_t[]){5}), 0);
    return lb_rms_norm(g, x[0], weight, 1e-5);
}
/* an odd last dim: [2, 3, 3] has no halves */
static lb_var *m_swiglu(lb_graph *g, lb_var *const *x) { return lb_swiglu(g, lb_slice(g, x[0], 2, 0, 3, 1)); }
static lb_var *m_geglu(lb_graph *g, lb_var *const *x) { return lb_geglu(g, lb_slice(g, x[0], 2, 0, 3, 1)); }
static lb_var *m_rotary(lb_graph *g, lb_var *const *x)
{
    lb_tensor *t = lb_tensor_zeros(LB_FLOAT64, 2, (int64_t[]){3, 4});
    lb_var *y = lb_rotary_embed(g, x[0], t, t, LB_ROTARY_HALVES);
    lb_tensor_free(t);
    return y;
}
static lb_var *m_custom(lb_graph *g, lb_var *const *x)
{
    return lb_custom(g, 1, x, lb_tensor_copy(x[0]->value, x[0]->value->dtype), NULL, NULL, NULL);
}

#define T23 {2, {2, 3}, -1, 1}
#define T3 {1, {3}, -1, 1}
#define T234 {3, {2, 3, 4}, -1, 1}
#define T46 {2, {4, 6}, -2, 2}
#define POS23 {2, {2, 3}, 0.5, 2}
#define S222 {3, {2, 2, 2}, -1, 1}
/* x [2, 3, 3], w_ih [8, 3], w_hh [8, 2], b_ih, b_hh [8] */
#define LSTM_IN {3, {2, 3, 3}, -1, 1}, {2, {8, 3}, -1, 1}, {2, {8, 2}, -1, 1}, {1, {8}, -0.5, 0.5}, {1, {8}, -0.5, 0.5}

/* One row per op kind. */
static const op_recipe recipes[] = {
    {LB_OP_ADD, 2, {T23, T3}, b_add, m_add, LB_ERR_SHAPE, "add|[4]", 0},
    {LB_OP_SUB, 2, {T23, T3}, b_sub, m_sub, LB_ERR_SHAPE, "sub|[4]", 0},
    {LB_OP_MUL, 2, {T23, T3}, b_mul, m_mul, LB_ERR_SHAPE, "mul|[4]", 0},
    {LB_OP_DIV, 2, {T23, POS23}, b_div, m_div, LB_ERR_SHAPE, "div|[4]", 0},
    {LB_OP_NEG, 1, {T23}, b_neg, m_neg, LB_ERR_STATE, "neg|another graph", 0},
    {LB_OP_SCALE, 1, {T23}, b_scale, m_scale, LB_ERR_STATE, "scale|another graph", 0},
    {LB_OP_EXP, 1, {T23}, b_exp, m_exp, LB_ERR_STATE, "exp|another graph", 0},
    {LB_OP_LOG, 1, {POS23}, b_log, m_log, LB_ERR_STATE, "log|another graph", 0},
    {LB_OP_TANH, 1, {T23}, b_tanh, m_tanh, LB_ERR_STATE, "tanh|another graph", 0},
    {LB_OP_SIGMOID, 1, {T23}, b_sigmoid, m_sigmoid, LB_ERR_STATE, "sigmoid|another graph", 0},
    {LB_OP_RELU, 1, {T23}, b_relu, m_relu, LB_ERR_STATE, "relu|another graph", 0},
    {LB_OP_GELU, 1, {T23}, b_gelu, m_gelu, LB_ERR_STATE, "gelu|another graph", 0},
    {LB_OP_MATMUL, 2, {T234, {2, {5, 4}, -1, 1}}, b_matmul, m_matmul, LB_ERR_SHAPE, "matmul|4 vs 5", 0},
    {LB_OP_RESHAPE, 1, {T46}, b_reshape, m_reshape, LB_ERR_SHAPE, "reshape|[4, 6]", 0},
    {LB_OP_PERMUTE, 1, {T234}, b_permute, m_permute, LB_ERR_SHAPE, "permute|[2, 3, 4]", 0},
    {LB_OP_SLICE, 1, {T46}, b_slice, m_slice, LB_ERR_VALUE, "slice|[4, 6]", 0},
    {LB_OP_CONCAT, 3, {{2, {2, 1}, -1, 1}, T23, {2, {2, 2}, -1, 1}}, b_concat, m_concat, LB_ERR_SHAPE, "concat|[2, 3]",
     0},
    {LB_OP_SUM, 1, {T234}, b_sum, m_sum, LB_ERR_SHAPE, "sum|[2, 3, 4]", 0},
    {LB_OP_MEAN, 1, {T234}, b_mean, m_mean, LB_ERR_VALUE, "mean|twice", 0},
    {LB_OP_SOFTMAX, 1, {T46}, b_softmax, m_softmax, LB_ERR_STATE, "softmax|another graph", 0},
    {LB_OP_LOG_SOFTMAX, 1, {T46}, b_log_softmax, m_log_softmax, LB_ERR_STATE, "log_softmax|another graph", 0},
    {LB_OP_MASKED_SOFTMAX, 1, {T234}, b_masked_softmax, m_masked_softmax, LB_ERR_SHAPE, "masked_softmax|[2, 3, 4]", 0},
    {LB_OP_ATTENTION, 3, {T234, {3, {2, 5, 4}, -1, 1}, {3, {2, 5, 3}, -1, 1}}, b_attention, m_attention,
     LB_ERR_SHAPE, "attention|[2, 5, 3]", 0},
    {LB_OP_LAYER_NORM, 3, {T46, {1, {6}, 0.5, 1.5}, {1, {6}, -1, 1}}, b_layer_norm, m_layer_norm, LB_ERR_SHAPE,
     "layer_norm|[5]", 1e-4},
    {LB_OP_EMBEDDING, 1, {{2, {5, 3}, -1, 1}}, b_embedding, m_embedding, LB_ERR_VALUE, "embedding|5", 0},
    {LB_OP_DROPOUT, 1, {T46}, b_dropout, m_dropout, LB_ERR_VALUE, "dropout|[0, 1)", 0},
    {LB_OP_CROSS_ENTROPY, 1, {{2, {4, 5}, -2, 2}}, b_cross_entropy, m_cross_entropy, LB_ERR_VALUE,
     "cross_entropy|[4, 5]", 0},
    {LB_OP_MSE, 2, {T23, T23}, b_mse, m_mse, LB_ERR_SHAPE, "mse|[6]", 0},
    {LB_OP_LSTM_PROJECTION, 7, {LSTM_IN, S222, S222}, b_lstm, m_lstm,
     LB_ERR_SHAPE, "lstm|[8, 2]", 1e-4},
    {LB_OP_LSTM_RECURRENCE, 7, {LSTM_IN, S222, S222}, b_lstm, m_lstm,
     LB_ERR_SHAPE, "lstm|[8, 2]", 1e-4},
    {LB_OP_LSTM_STATE, 5, {LSTM_IN}, b_lstm_state, m_lstm_state,
     LB_ERR_VALUE, "lstm state|[2, 3, 3]", 1e-4},
    {LB_OP_CONV1D, 3, {{3, {2, 7, 3}, -1, 1}, {3, {4, 3, 3}, -1, 1}, {1, {4}, -1, 1}}, b_conv1d, m_conv1d,
     LB_ERR_SHAPE, "conv1d|[2, 3, 7]", 0},
    {LB_OP_LINEAR_ATTENTION, 3, {{4, {2, 2, 5, 3}, -1, 1}, {4, {2, 2, 5, 3}, -1, 1}, {4, {2, 2, 5, 4}, -1, 1}},
     b_linear_attention, m_linear_attention, LB_ERR_SHAPE, "linear_attention|[2, 2, 5, 4]", 0},
    {LB_OP_SELECTIVE_SCAN, 5, {{3, {2, 5, 3}, -1, 1}, {3, {2, 5, 3}, -2, 1.5}, {2, {3, 4}, -1.5, -0.2},
     {3, {2, 5, 4}, -1, 1}, {3, {2, 5, 4}, -1, 1}}, b_selective_scan, m_selective_scan, LB_ERR_SHAPE,
     "selective_scan|[2, 5, 3]|[3, 4]", 0},
    {LB_OP_CUSTOM, 1, {T23}, b_custom, m_custom, LB_ERR_VALUE, "custom|backward", 0},
    {LB_OP_GELU_TANH, 1, {T23}, b_gelu_tanh, m_gelu_tanh, LB_ERR_STATE, "gelu_tanh|another graph", 0},
    {LB_OP_LOGSUMEXP, 1, {T234}, b_logsumexp, m_logsumexp, LB_ERR_SHAPE, "logsumexp|[2, 3, 4]", 0},
    {LB_OP_AMAX, 1, {T234}, b_amax, m_amax, LB_ERR_SHAPE, "amax|[2, 3, 4]", 0},
    {LB_OP_AMIN, 1, {T234}, b_amin, m_amin, LB_ERR_SHAPE, "amin|[2, 3, 4]", 0},
    {LB_OP_MAX, 1, {T234}, b_max, m_max, LB_ERR_SHAPE, "max|[2, 3, 4]", 0},
    {LB_OP_WHERE, 2, {T23, T3}, b_where, m_where, LB_ERR_SHAPE, "where|[4]", 0},
    {LB_OP_NLL_LOSS, 1, {{2, {4, 5}, -2, 0}}, b_nll_loss, m_nll_loss, LB_ERR_VALUE, "nll_loss|[4, 5]", 0},
    {LB_OP_DROPOUT_MASK, 1, {T46}, b_dropout_mask, m_dropout_mask, LB_ERR_SHAPE, "dropout|[4]", 0},
    {LB_OP_ROTARY, 1, {{3, {2, 3, 6}, -1, 1}}, b_rotary, m_rotary, LB_ERR_SHAPE, "rotary|[3, 4]", 0},
    {LB_OP_RMS_NORM, 2, {T46, {1, {6}, 0.5, 1.5}}, b_rms_norm, m_rms_norm, LB_ERR_SHAPE, "rms_norm|[5]", 1e-4},
    {LB_OP_SWIGLU, 1, {{3, {2, 3, 4}, -3, 3}}, b_swiglu, m_swiglu, LB_ERR_SHAPE, "swiglu|[2, 3, 3]", 0},
    {LB_OP_GEGLU, 1, {{3, {2, 3, 4}, -3, 3}}, b_geglu, m_geglu, LB_ERR_SHAPE, "geglu|[2, 3, 3]", 0},
};
enum { N_RECIPES = sizeof recipes / sizeof recipes[0] };

static const op_recipe *recipe_of(int op)
{
    for (int i = 0; i < N_RECIPES; i++)
        if ((int)recipes[i].op == op)
            return &recipes[i];
    return NULL;
}

/* ---- the harness ---- */

/* A float32 tensor's values (exact in either dtype) as `dtype`; t is freed. */
static lb_tensor *in_dtype(lb_tensor *t, lb_dtype dtype)
{
    lb_tensor *c = t ? lb_tensor_copy(t, dtype) : NULL;
    lb_tensor_free(t);
    return c;
}

/* The recipe's inputs with seeded values, rounded to float32 so that both dtypes see
 * exactly the same numbers. */
static lb_tensor *input_value(const op_recipe *r, int i, lb_dtype dtype)
{
    return in_dtype(lb_test_uniform(LB_FLOAT32, r->in[i].ndim, r->in[i].shape,
                                    1000u * (uint64_t)r->op + (uint64_t)i, r->in[i].low, r->in[i].high),
                    dtype);
}

/* A new graph holding the recipe's inputs in x, requiring gradients. */
static lb_graph *graph_with_inputs(const op_recipe *r, lb_dtype dtype, lb_var **x)
{
    lb_graph *g = lb_graph_new();
    for (int i = 0; i < r->n_inputs; i++)
        x[i] = lb_input(g, input_value(r, i, dtype), 1);
    return g;
}

/* The constant each input is multiplied by before the op: values in [0.75, 1.25]
 * (positive, so inputs keep their sign and their domain). */
static lb_tensor *pre_factor(const lb_tensor *like, int i)
{
    return in_dtype(lb_test_uniform(LB_FLOAT32, like->ndim, like->shape, 77u + (uint64_t)i, 0.75, 1.25), like->dtype);
}

/* The op placed after another: x_i * c_i, then the recipe's op. */
static lb_var *after_product(lb_graph *g, const op_recipe *r, lb_var *const *leaves)
{
    lb_var *x[MAX_IN];
    for (int i = 0; i < r->n_inputs; i++)
        x[i] = lb_mul(g, leaves[i], lb_input(g, pre_factor(leaves[i]->value, i), 0));
    return r->build(g, x);
}

static lb_var *gradcheck_fn(lb_graph *g, lb_var *const *leaves, void *user) { return after_product(g, user, leaves); }

static void test_every_op_has_a_recipe(void)
{
    for (int op = 1; op < LB_OP_COUNT; op++) {
        const lb_op_info *info = lb_op_info_of(op);
        CU_ASSERT_PTR_NOT_NULL(info->name);
        CU_ASSERT_PTR_NOT_NULL(info->backward);
        if (!recipe_of(op)) {
            CU_FAIL("an op of autograd/ops.def has no recipe row");
            fprintf(stderr, "\n  op \"%s\" has no recipe row in tests/test_ops_table.c\n", lb_op_name(op));
        }
    }
    CU_ASSERT_STRING_EQUAL(lb_op_name(LB_OP_LEAF), "leaf");
    CU_ASSERT_STRING_EQUAL(lb_op_name(LB_OP_MATMUL), "matmul");
    CU_ASSERT_STRING_EQUAL(lb_op_name(LB_OP_COUNT), "unknown");
}

/* Whether v or a node it was computed from has kind op (inputs are kept on nodes
 * that require gradients, as every recipe's do). */
static int records(const lb_var *v, lb_op_kind op)
{
    if ((int)v->op == (int)op)
        return 1;
    for (int i = 0; i < v->n_inputs; i++)
        if (records(v->inputs[i], op))
            return 1;
    return 0;
}

/* Every recipe records its own op kind (so the rows test what they say). */
static void test_recipes_record_their_op(void)
{
    for (int k = 0; k < N_RECIPES; k++) {
        const op_recipe *r = &recipes[k];
        lb_var *x[MAX_IN];
        lb_graph *g = graph_with_inputs(r, LB_FLOAT64, x);
        lb_var *y = r->build(g, x);
        CU_ASSERT_PTR_NOT_NULL(y);
        int found = y && records(y, r->op);
        CU_ASSERT_TRUE(found);
        if (!found)
            fprintf(stderr, "\n  recipe for %s: %s\n", lb_op_name(r->op), y ? lb_op_name(y->op) : lb_last_error());
        lb_graph_free(g);
    }
}

static void test_gradcheck_after_another_op(void)
{
    for (int k = 0; k < N_RECIPES; k++) {
        const op_recipe *r = &recipes[k];
        lb_var *leaves[MAX_IN];
        for (int i = 0; i < r->n_inputs; i++)
            leaves[i] = lb_param_new(input_value(r, i, LB_FLOAT64), "x");
        lb_gradcheck_leaf report[MAX_IN];
        lb_status st = lb_gradcheck(gradcheck_fn, (void *)r, r->n_inputs, leaves, NULL, report);
        CU_ASSERT_EQUAL(st, LB_OK);
        if (st != LB_OK)
            fprintf(stderr, "\n  gradcheck of %s: %s\n", lb_op_name(r->op), lb_last_error());
        for (int i = 0; i < r->n_inputs; i++)
            lb_param_free(leaves[i]);
    }
}

/* Output and input gradients (for one fixed random grad_output) in `dtype`. */
static lb_tensor *run_dtype(const op_recipe *r, lb_dtype dtype, lb_tensor **grads)
{
    lb_var *x[MAX_IN];
    lb_graph *g = graph_with_inputs(r, dtype, x);
    lb_var *y = after_product(g, r, x);
    lb_tensor *out = NULL;
    if (y) {
        lb_tensor *seed = in_dtype(lb_test_random_tensor(LB_FLOAT32, y->value->ndim, y->value->shape, 5), dtype);
        CU_ASSERT_EQUAL(lb_backward(g, y, seed), LB_OK);
        out = lb_tensor_copy(y->value, LB_FLOAT64);
        lb_tensor_free(seed);
        for (int i = 0; i < r->n_inputs; i++)
            grads[i] = x[i]->grad ? lb_tensor_copy(x[i]->grad, LB_FLOAT64) : NULL;
    }
    lb_graph_free(g);
    return out;
}

static void test_float32_agrees_with_float64(void)
{
    for (int k = 0; k < N_RECIPES; k++) {
        const op_recipe *r = &recipes[k];
        double tol = r->tol > 0 ? r->tol : 1e-5;
        lb_tensor *g32[MAX_IN] = {0}, *g64[MAX_IN] = {0};
        lb_tensor *y32 = run_dtype(r, LB_FLOAT32, g32), *y64 = run_dtype(r, LB_FLOAT64, g64);
        char what[96];
        snprintf(what, sizeof what, "%s output", lb_op_name(r->op));
        CU_ASSERT_TRUE(lb_check_tensors_close(y32, y64, tol, tol, what));
        for (int i = 0; i < r->n_inputs; i++) {
            snprintf(what, sizeof what, "%s gradient of input %d", lb_op_name(r->op), i);
            CU_ASSERT_TRUE(lb_check_tensors_close(g32[i], g64[i], tol, tol, what));
            lb_tensor_free(g32[i]);
            lb_tensor_free(g64[i]);
        }
        lb_tensor_free(y32);
        lb_tensor_free(y64);
    }
}

/* ---- compositions: each fused op (the LB_FUSED rows of autograd/ops.def) built from
 * simpler ops, with its recipe's options; checked in float64 ---- */

/* A constant [ndim, shape] of `values` in x's dtype on x's graph. */
static lb_var *constant_like(lb_graph *g, const lb_var *x, int ndim, const int64_t *shape, const double *values)
{
    return lb_input(g, lb_tensor_from_doubles(x->value->dtype, ndim, shape, values), 0);
}

static lb_var *c_softmax(lb_graph *g, lb_var *const *x) { return lb_exp(g, lb_sub(g, x[0], lb_logsumexp(g, x[0], -1, 1))); }
static lb_var *c_log_softmax(lb_graph *g, lb_var *const *x) { return lb_sub(g, x[0], lb_logsumexp(g, x[0], -1, 1)); }
/* logsumexp over dim 1 of [2, 3, 4] */
static lb_var *c_logsumexp(lb_graph *g, lb_var *const *x)
{
    lb_var *m = lb_amax(g, x[0], 1, 1); /* [2, 1, 4] */
    lb_var *s = lb_log(g, lb_sum_axes(g, lb_exp(g, lb_sub(g, x[0], m)), 1, (int[]){1}, 0));
    return lb_add(g, s, lb_reshape(g, m, 2, (int64_t[]){2, 4}));
}
static lb_var *c_gelu_tanh(lb_graph *g, lb_var *const *x)
{
    double ones[6] = {1, 1, 1, 1, 1, 1};
    lb_var *cube = lb_mul(g, lb_mul(g, x[0], x[0]), x[0]);
    lb_var *u = lb_scale(g, lb_add(g, x[0], lb_scale(g, cube, 0.044715)), sqrt(2.0 / M_PI));
    lb_var *one = constant_like(g, x[0], 2, (int64_t[]){2, 3}, ones);
    return lb_scale(g, lb_mul(g, x[0], lb_add(g, one, lb_tanh(g, u))), 0.5);
}
/* b_masked_softmax's mask as what each key contributes: keep [2, 3, 4] (1 = may attend)
 * from the allowed mask, the causal bound (query i sees keys j <= i + 1) and the key
 * lengths {4, 2}. */
static void masked_softmax_keep(double *keep)
{
    static const int lengths[2] = {4, 2};
    for (int b = 0; b < 2; b++)
        for (int i = 0; i < 3; i++)
            for (int j = 0; j < 4; j++) {
                int at = (b * 3 + i) * 4 + j;
                keep[at] = at >= 4 && j <= i + 1 && j < lengths[b];
            }
}
/* softmax(0.5 tanh(0.7 x / 0.5) + additive), the additive mask -1e300 where a key is
 * masked; a row with no key gives zeros (the product with `has_key`). */
static lb_var *c_masked_softmax(lb_graph *g, lb_var *const *x)
{
    double keep[24], additive[24], has_key[6];
    masked_softmax_keep(keep);
    for (int r = 0; r < 6; r++) {
        has_key[r] = 0;
        for (int j = 0; j < 4; j++)
            has_key[r] = has_key[r] || keep[r * 4 + j];
    }
    for (int i = 0; i < 24; i++)
        additive[i] = keep[i] ? 0 : -1e300;
    int64_t s[3] = {2, 3, 4}, rows[3] = {2, 3, 1};
    lb_var *capped = lb_scale(g, lb_tanh(g, lb_scale(g, x[0], 0.7 / 0.5)), 0.5);
    lb_var *p = lb_softmax(g, lb_add(g, capped, constant_like(g, x[0], 3, s, additive)));
    return lb_mul(g, p, constant_like(g, x[0], 3, rows, has_key));
}
/* b_attention: causal (query i sees keys j <= i + 2), key lengths {4, 5}, softcap 0.6, scale 0.5 */
static lb_var *c_attention(lb_graph *g, lb_var *const *x)
{
    static const int32_t lengths[2] = {4, 5};
    lb_attn_mask m = {.causal = 1, .key_lengths = lengths, .softcap = 0.6};
    lb_var *p = lb_masked_softmax(g, lb_matmul_t(g, x[0], 0, x[1], 1), &m, 0.5);
    return lb_matmul(g, p, x[2]);
}
static lb_var *c_layer_norm(lb_graph *g, lb_var *const *x)
{
    double eps[1] = {1e-5};
    lb_var *centred = lb_sub(g, x[0], lb_mean_axes(g, x[0], 1, (int[]){-1}, 1));
    lb_var *var = lb_mean_axes(g, lb_mul(g, centred, centred), 1, (int[]){-1}, 1);
    lb_var *sd = lb_exp(g, lb_scale(g, lb_log(g, lb_add(g, var, constant_like(g, x[0], 1, (int64_t[]){1}, eps))), 0.5));
    return lb_add(g, lb_mul(g, lb_div(g, centred, sd), x[1]), x[2]);
}
static lb_var *c_rms_norm(lb_graph *g, lb_var *const *x)
{
    double eps[1] = {1e-5};
    lb_var *ms = lb_add(g, lb_mean_axes(g, lb_mul(g, x[0], x[0]), 1, (int[]){-1}, 1),
                        constant_like(g, x[0], 1, (int64_t[]){1}, eps));
    lb_var *rms = lb_exp(g, lb_scale(g, lb_log(g, ms), 0.5));
    return lb_mul(g, lb_div(g, x[0], rms), x[1]);
}
/* [2, 3, 4]: gate x[..., :2], value x[..., 2:] */
static lb_var *c_swiglu(lb_graph *g, lb_var *const *x)
{
    lb_var *a = lb_slice(g, x[0], 2, 0, 2, 1), *b = lb_slice(g, x[0], 2, 2, 4, 1);
    return lb_mul(g, lb_mul(g, a, lb_sigmoid(g, a)), b);
}
static lb_var *c_geglu(lb_graph *g, lb_var *const *x)
{
    return lb_mul(g, lb_gelu(g, lb_slice(g, x[0], 2, 0, 2, 1)), lb_slice(g, x[0], 2, 2, 4, 1));
}
/* b_embedding's ids {4, 0, 2, 2, 1, 4} as one-hot rows [2, 3, 5] times weight [5, 3] */
static lb_var *c_embedding(lb_graph *g, lb_var *const *x)
{
    static const int ids[6] = {4, 0, 2, 2, 1, 4};
    double one_hot[30] = {0};
    for (int i = 0; i < 6; i++)
        one_hot[i * 5 + ids[i]] = 1;
    return lb_matmul(g, constant_like(g, x[0], 3, (int64_t[]){2, 3, 5}, one_hot), x[0]);
}
/* -sum(x A) / d for log-probabilities x [4, 5] and targets {2, -100, 0, 4}:
 * A = (1 - eps) w_t one_hot(t) + eps w / C on scored rows; d = sum of w_t, or 1 summed. */
static lb_var *nll_composition(lb_graph *g, lb_var *log_probs, const double *w, double eps, int mean)
{
    static const int targets[4] = {2, -100, 0, 4};
    double a[20] = {0}, d = 0;
    for (int i = 0; i < 4; i++) {
        if (targets[i] < 0)
            continue;
        for (int c = 0; c < 5; c++)
            a[i * 5 + c] = eps * w[c] / 5 + (c == targets[i] ? (1 - eps) * w[c] : 0);
        d += w[targets[i]];
    }
    lb_var *total = lb_sum_axes(g, lb_mul(g, log_probs, constant_like(g, log_probs, 2, (int64_t[]){4, 5}, a)), 2,
                                (int[]){0, 1}, 0);
    return lb_scale(g, total, -1.0 / (mean ? d : 1));
}
static lb_var *c_cross_entropy(lb_graph *g, lb_var *const *x)
{
    static const double w[5] = {1.5, 1, 0.5, 2, 0.75};
    return nll_composition(g, lb_log_softmax(g, x[0]), w, 0.1, 1);
}
static lb_var *c_nll_loss(lb_graph *g, lb_var *const *x)
{
    static const double w[5] = {0.5, 1, 2, 1.5, 0.25};
    return nll_composition(g, x[0], w, 0.2, 0);
}
static lb_var *c_mse(lb_graph *g, lb_var *const *x)
{
    lb_var *d = lb_sub(g, x[0], x[1]);
    return lb_mean_axes(g, lb_mul(g, d, d), 2, (int[]){0, 1}, 0);
}
static lb_var *c_dropout_mask(lb_graph *g, lb_var *const *x)
{
    double keep[24];
    for (int i = 0; i < 24; i++)
        keep[i] = (i * 7) % 3 != 0;
    return lb_scale(g, lb_mul(g, x[0], constant_like(g, x[0], 2, (int64_t[]){4, 6}, keep)), 1 / (1 - 0.3));
}
/* x [2, 7, 3], weight [4, 3, 3], bias [4], dilation 2: tap j reads x shifted by 2 (2 - j) */
static lb_var *c_conv1d(lb_graph *g, lb_var *const *x)
{
    const int64_t B = 2, T = 7, C = 3, O = 4, K = 3, dilation = 2;
    lb_var *y = x[2]; /* the bias, broadcast over [B, T, O] */
    for (int64_t j = 0; j < K; j++) {
        int64_t shift = dilation * (K - 1 - j);
        lb_var *shifted = x[0];
        if (shift > 0) {
            double zeros[2 * 4 * 3] = {0};
            lb_var *parts[2] = {constant_like(g, x[0], 3, (int64_t[]){B, shift, C}, zeros),
                                lb_slice(g, x[0], 1, 0, T - shift, 1)};
            shifted = lb_concat(g, 2, parts, 1);
        }
        lb_var *tap = lb_reshape(g, lb_slice(g, x[1], 2, j, j + 1, 1), 2, (int64_t[]){O, C});
        y = lb_add(g, y, lb_matmul_t(g, shifted, 0, tap, 1));
    }
    return y;
}

/* φ(x) = elu(x) + 1 = relu(x) + exp(-relu(-x)); A = tril(γ^(i-j)) ⊙ φ(q) φ(k)ᵀ [2, 2, 5, 5];
 * y = (A v) / (A 1 + 1e-6) */
static lb_var *c_linear_attention(lb_graph *g, lb_var *const *x)
{
    lb_var *fq = lb_add(g, lb_relu(g, x[0]), lb_exp(g, lb_neg(g, lb_relu(g, lb_neg(g, x[0])))));
    lb_var *fk = lb_add(g, lb_relu(g, x[1]), lb_exp(g, lb_neg(g, lb_relu(g, lb_neg(g, x[1])))));
    double decay[2 * 25] = {0}, eps[1] = {1e-6};
    for (int h = 0; h < 2; h++)
        for (int i = 0; i < 5; i++)
            for (int j = 0; j <= i; j++)
                decay[h * 25 + i * 5 + j] = pow(linear_gamma[h], i - j);
    lb_var *a = lb_mul(g, lb_matmul_t(g, fq, 0, fk, 1), constant_like(g, x[0], 3, (int64_t[]){2, 5, 5}, decay));
    lb_var *den = lb_add(g, lb_sum_axes(g, a, 1, (int[]){-1}, 1), constant_like(g, x[0], 1, (int64_t[]){1}, eps));
    return lb_div(g, lb_matmul(g, a, x[2]), den);
}
/* u, delta [2, 5, 3], A [3, 4], B, C [2, 5, 4]: the recurrence one step at a time, the
 * state h [2, 3, 4] (batch, channel, state). */
static lb_var *c_selective_scan(lb_graph *g, lb_var *const *x)
{
    const double one[1] = {1};
    lb_var *dl = lb_log(g, lb_add(g, lb_exp(g, x[1]), constant_like(g, x[1], 1, (int64_t[]){1}, one)));
    lb_var *h = NULL, *ys[5];
    for (int64_t t = 0; t < 5; t++) {
        lb_var *dl_t = lb_reshape(g, lb_slice(g, dl, 1, t, t + 1, 1), 3, (int64_t[]){2, 3, 1});
        lb_var *u_t = lb_reshape(g, lb_slice(g, x[0], 1, t, t + 1, 1), 3, (int64_t[]){2, 3, 1});
        lb_var *in = lb_mul(g, lb_mul(g, dl_t, u_t), lb_slice(g, x[3], 1, t, t + 1, 1)); /* [2, 3, 4] */
        h = h ? lb_add(g, lb_mul(g, lb_exp(g, lb_mul(g, dl_t, x[2])), h), in) : in;
        lb_var *y = lb_sum_axes(g, lb_mul(g, h, lb_slice(g, x[4], 1, t, t + 1, 1)), 1, (int[]){2}, 0);
        ys[t] = lb_reshape(g, y, 3, (int64_t[]){2, 1, 3});
    }
    return lb_concat(g, 5, ys, 1);
}

static const struct {
    lb_op_kind op;
    op_build_fn composite;
} compositions[] = {
    {LB_OP_SOFTMAX, c_softmax},           {LB_OP_LOG_SOFTMAX, c_log_softmax}, {LB_OP_LOGSUMEXP, c_logsumexp},
    {LB_OP_GELU_TANH, c_gelu_tanh},       {LB_OP_MASKED_SOFTMAX, c_masked_softmax}, {LB_OP_ATTENTION, c_attention},
    {LB_OP_LAYER_NORM, c_layer_norm},     {LB_OP_EMBEDDING, c_embedding},     {LB_OP_CROSS_ENTROPY, c_cross_entropy},
    {LB_OP_NLL_LOSS, c_nll_loss},         {LB_OP_MSE, c_mse},                 {LB_OP_DROPOUT_MASK, c_dropout_mask},
    {LB_OP_CONV1D, c_conv1d},           {LB_OP_LINEAR_ATTENTION, c_linear_attention},
    {LB_OP_SELECTIVE_SCAN, c_selective_scan},
    {LB_OP_RMS_NORM, c_rms_norm},         {LB_OP_SWIGLU, c_swiglu},           {LB_OP_GEGLU, c_geglu},
};

/* The fused ops that autograd/ops.def lists, with their compositions. */
static const struct {
    lb_op_kind op;
    const char *composition;
} fused_ops[] = {
#define LB_OP(kind, ...)
#define LB_FUSED(kind, composition) {LB_OP_##kind, composition},
#include "autograd/ops.def"
#undef LB_FUSED
#undef LB_OP
};

static op_build_fn composite_of(lb_op_kind op)
{
    for (size_t i = 0; i < sizeof compositions / sizeof compositions[0]; i++)
        if (compositions[i].op == op)
            return compositions[i].composite;
    return NULL;
}

/* Value and input gradients of `build` on the recipe's float64 inputs (seeded output gradient). */
static lb_tensor *run_built(const op_recipe *r, op_build_fn build, lb_tensor **grads)
{
    lb_var *x[MAX_IN];
    lb_graph *g = graph_with_inputs(r, LB_FLOAT64, x);
    lb_var *y = build(g, x);
    lb_tensor *out = NULL;
    if (y) {
        lb_tensor *seed = in_dtype(lb_test_random_tensor(LB_FLOAT32, y->value->ndim, y->value->shape, 9), LB_FLOAT64);
        CU_ASSERT_EQUAL(lb_backward(g, y, seed), LB_OK);
        out = lb_tensor_copy(y->value, LB_FLOAT64);
        lb_tensor_free(seed);
        for (int i = 0; i < r->n_inputs; i++)
            grads[i] = x[i]->grad ? lb_tensor_copy(x[i]->grad, LB_FLOAT64) : NULL;
    } else {
        fprintf(stderr, "\n  %s: %s\n", lb_op_name(r->op), lb_last_error());
    }
    lb_graph_free(g);
    return out;
}

static void test_fused_ops_equal_their_composition(void)
{
    size_t n = sizeof fused_ops / sizeof fused_ops[0];
    CU_ASSERT(n >= 12);
    for (size_t k = 0; k < n; k++) {
        const op_recipe *r = recipe_of(fused_ops[k].op);
        op_build_fn composite = composite_of(fused_ops[k].op);
        CU_ASSERT_PTR_NOT_NULL(composite);
        CU_ASSERT_PTR_NOT_NULL(fused_ops[k].composition);
        if (!r || !composite) {
            fprintf(stderr, "\n  fused op \"%s\" (= %s) has no composition in tests/test_ops_table.c\n",
                    lb_op_name(fused_ops[k].op), fused_ops[k].composition);
            continue;
        }
        lb_tensor *gf[MAX_IN] = {0}, *gc[MAX_IN] = {0};
        lb_tensor *yf = run_built(r, r->build, gf), *yc = run_built(r, composite, gc);
        char what[160];
        snprintf(what, sizeof what, "%s against its composition", lb_op_name(r->op));
        CU_ASSERT_TRUE(yf && yc && lb_check_tensors_close(yf, yc, 1e-12, 1e-10, what));
        for (int i = 0; i < r->n_inputs; i++) {
            snprintf(what, sizeof what, "%s gradient of input %d against its composition", lb_op_name(r->op), i);
            CU_ASSERT_TRUE((!gf[i] && !gc[i]) || (gf[i] && gc[i] && lb_check_tensors_close(gf[i], gc[i], 1e-12, 1e-10, what)));
            lb_tensor_free(gf[i]);
            lb_tensor_free(gc[i]);
        }
        lb_tensor_free(yf);
        lb_tensor_free(yc);
    }
}

/* Whether the last error message contains every '|'-separated fragment of `what`. */
static int error_says(const char *what)
{
    char buf[256];
    snprintf(buf, sizeof buf, "%s", what);
    for (char *save = NULL, *f = strtok_r(buf, "|", &save); f; f = strtok_r(NULL, "|", &save))
        if (!lb_test_error_has(f))
            return 0;
    return 1;
}

static void test_misuse_is_one_clear_error(void)
{
    foreign_graph = lb_graph_new();
    for (int k = 0; k < N_RECIPES; k++) {
        const op_recipe *r = &recipes[k];
        lb_var *x[MAX_IN];
        lb_graph *g = graph_with_inputs(r, LB_FLOAT64, x);
        lb_clear_error();
        lb_var *y = r->misuse(g, x);
        CU_ASSERT_PTR_NULL(y);
        int ok = !y && lb_last_status() == r->misuse_status && error_says(r->misuse_text);
        CU_ASSERT_TRUE(ok);
        if (!ok)
            fprintf(stderr, "\n  misuse of %s: status %d, message \"%s\"\n", lb_op_name(r->op),
                    (int)lb_last_status(), lb_last_error());
        lb_graph_free(g);
    }
    lb_graph_free(foreign_graph);
    lb_clear_error();
}

int main(void)
{
    static const lb_test_case cases[] = {
        {"every op of the op list has a recipe row", test_every_op_has_a_recipe},
        {"each recipe records its op", test_recipes_record_their_op},
        {"float64 gradcheck, op after another op", test_gradcheck_after_another_op},
        {"float32 agrees with float64 (values, gradients)", test_float32_agrees_with_float64},
        {"misuse gives one error naming op and shape", test_misuse_is_one_clear_error},
        {"every fused op equals its composition (float64)", test_fused_ops_equal_their_composition},
        {NULL, NULL},
    };
    return lb_test_main("ops table", cases);
}

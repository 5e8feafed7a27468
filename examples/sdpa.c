/* The source article's PyTorch function, scaled_dot_product_attention(x, w_q, w_k, w_v,
 * causal), written with lookback's ops, checked as the article checks it, then
 * trained: backpropagation through the lookup learns W_Q, W_K and W_V.
 *
 *   ./sdpa
 *
 * PyTorch                                   lookback
 *   q = x @ w_q                               lb_matmul(g, x, w_q)
 *   scores = q @ k.transpose(-2, -1)          lb_matmul_t(g, q, 0, k, 1)
 *   scores = scores / math.sqrt(q.size(-1))   lb_scale(g, scores, 1 / sqrt(d_k))
 *   scores.masked_fill(future, -inf)          lb_where(g, future, minus_inf, scores)
 *   torch.softmax(scores, dim=-1)             lb_softmax(g, scores)
 *   weights @ v                               lb_matmul(g, weights, v)                 */
#include <math.h>

#include "example.h"

/* x [batch, tokens, model_width], w_q and w_k [model_width, d_k], w_v [model_width, d_v]
 * -> output [batch, tokens, d_v]; *weights receives [batch, tokens, tokens]. */
static lb_var *scaled_dot_product_attention(lb_graph *g, lb_var *x, lb_var *w_q, lb_var *w_k, lb_var *w_v,
                                            int causal, lb_var **weights)
{
    lb_var *q = lb_matmul(g, x, w_q); /* [batch, tokens, d_k] */
    lb_var *k = lb_matmul(g, x, w_k); /* [batch, tokens, d_k] */
    lb_var *v = lb_matmul(g, x, w_v); /* [batch, tokens, d_v] */
    if (!q || !k || !v)
        return NULL;

    lb_var *scores = lb_matmul_t(g, q, 0, k, 1); /* every query against every key */
    scores = lb_scale(g, scores, 1.0 / sqrt((double)q->value->shape[2]));

    if (causal) {
        /* future[i][j] = 1 where key j comes after query i; it broadcasts over the batch. */
        int64_t tokens = x->value->shape[1];
        const int64_t shape[2] = {tokens, tokens};
        lb_tensor *future = lb_tensor_zeros(x->value->dtype, 2, shape);
        for (int64_t i = 0; i < tokens; i++)
            for (int64_t j = i + 1; j < tokens; j++)
                lb_tensor_set(future, (int64_t[2]){i, j}, 1);
        lb_var *minus_inf = lb_input(g, lb_tensor_scalar(x->value->dtype, -INFINITY), 0);
        scores = lb_where(g, future, minus_inf, scores);
        lb_tensor_free(future);
    }
    *weights = lb_softmax(g, scores); /* over the keys: each row sums to one */
    return lb_matmul(g, *weights, v);
}

static lb_var *randn_param(lb_rng *rng, const char *name, int64_t rows, int64_t cols, double std)
{
    const int64_t shape[2] = {rows, cols};
    lb_tensor *t = lb_tensor_zeros(LB_FLOAT32, 2, shape);
    if (t)
        lb_rng_fill_normal(rng, t, 0, std);
    return lb_param_new(t, name);
}

static double norm(const lb_tensor *t)
{
    double s = 0;
    for (int64_t i = 0; i < lb_tensor_numel(t); i++)
        s += lb_tensor_flat(t, i) * lb_tensor_flat(t, i);
    return sqrt(s);
}

enum { BATCH = 2, TOKENS = 3, MODEL_WIDTH = 8, D_K = 4, D_V = 4 };

/* Trains student weights w[3] to reproduce the outputs of the teacher's weights on
 * fresh random inputs (mean squared error, Adam); the first n_trained of w are
 * updated, the others stay at their initial values. Returns the final loss. */
static double train(lb_var *const *teacher, lb_var *const *w, int n_trained, int steps, int print)
{
    lb_rng rng;
    lb_rng_seed(&rng, 5);
    lb_optim_config cfg = lb_optim_defaults(LB_OPTIM_ADAM);
    cfg.lr = 0.02;
    lb_optim *opt = lb_optim_new(&cfg, w, n_trained);
    lb_graph *g = lb_graph_new();
    double loss_value = NAN;
    for (int step = 0; opt && g && step <= steps; step++) {
        const int64_t xs[3] = {32, 6, MODEL_WIDTH};
        lb_tensor *xt = lb_tensor_zeros(LB_FLOAT32, 3, xs);
        lb_rng_fill_normal(&rng, xt, 0, 1);
        lb_var *x = lb_input(g, xt, 0), *weights;
        lb_graph_set_grad_enabled(g, 0);
        lb_var *target = scaled_dot_product_attention(g, x, teacher[0], teacher[1], teacher[2], 1, &weights);
        lb_graph_set_grad_enabled(g, 1);
        lb_var *out = scaled_dot_product_attention(g, x, w[0], w[1], w[2], 1, &weights);
        lb_var *loss = lb_mse(g, out, target);
        if (!loss)
            break;
        loss_value = lb_tensor_flat(loss->value, 0);
        if (step == steps)
            break; /* the loss after `steps` updates */
        lb_optim_zero_grad(opt);
        if (lb_backward(g, loss, NULL) != LB_OK)
            break;
        if (print && step == 0)
            printf("first step: |dL/dW_Q| = %.3f, |dL/dW_K| = %.3f, |dL/dW_V| = %.3f (every projection gets a gradient)\n",
                   norm(w[0]->grad), norm(w[1]->grad), norm(w[2]->grad));
        if (print && step % 100 == 0)
            printf("step %4d: loss %.4f\n", step, loss_value);
        lb_optim_step(opt);
        lb_graph_reset(g);
    }
    lb_graph_free(g);
    lb_optim_free(opt);
    return loss_value;
}

int main(void)
{
    /* The article's shapes: batch 2, 3 tokens, model width 8, d_k = d_v = 4. */
    lb_rng rng;
    lb_rng_seed(&rng, 0);
    const int64_t xs[3] = {BATCH, TOKENS, MODEL_WIDTH};
    lb_graph *g = lb_graph_new();
    lb_tensor *xt = lb_tensor_zeros(LB_FLOAT32, 3, xs);
    REQUIRE(g && xt, "setup");
    lb_rng_fill_normal(&rng, xt, 0, 1);
    lb_var *x = lb_input(g, xt, 0);
    lb_var *w[3] = {randn_param(&rng, "w_q", MODEL_WIDTH, D_K, 1), randn_param(&rng, "w_k", MODEL_WIDTH, D_K, 1),
                    randn_param(&rng, "w_v", MODEL_WIDTH, D_V, 1)};
    REQUIRE(x && w[0] && w[1] && w[2], "inputs");

    lb_var *weights;
    lb_var *output = scaled_dot_product_attention(g, x, w[0], w[1], w[2], 1, &weights);
    REQUIRE(output, "scaled_dot_product_attention");
    char a[64], b[64];
    printf("output %s, weights %s\n", lb_tensor_describe(output->value, a, sizeof a),
           lb_tensor_describe(weights->value, b, sizeof b));
    /* Like torch.randn, the weights have unit variance, so the scores are large (see
     * ./scaling) and most rows are nearly one-hot. */
    print_matrix("weights[0]", weights->value);
    /* assert output.shape == (batch_size, tokens, d_v) */
    CHECK(output->value->ndim == 3 && output->value->shape[0] == BATCH && output->value->shape[1] == TOKENS &&
              output->value->shape[2] == D_V, "output shape");
    CHECK(weights->value->ndim == 3 && weights->value->shape[0] == BATCH && weights->value->shape[1] == TOKENS &&
              weights->value->shape[2] == TOKENS, "weights shape");
    /* assert torch.allclose(weights.sum(dim=-1), torch.ones(batch_size, tokens)), and
     * the causal zeros above the diagonal. */
    for (int64_t r = 0; r < BATCH * TOKENS; r++) {
        double sum = 0;
        for (int64_t j = 0; j < TOKENS; j++) {
            double wij = lb_tensor_flat(weights->value, r * TOKENS + j);
            sum += wij;
            CHECK(j <= r % TOKENS || wij == 0, "future key %lld of row %lld has weight %g", (long long)j, (long long)r, wij);
        }
        CHECK(fabs(sum - 1) < 1e-6, "row %lld sums to %g", (long long)r, sum);
    }

    /* The library's own attention (the fused kernel, which never stores the scores)
     * gives the same output. */
    lb_attn_mask causal = {.causal = 1};
    lb_var *fused = lb_attention_fused(g, lb_matmul(g, x, w[0]), lb_matmul(g, x, w[1]), lb_matmul(g, x, w[2]),
                                       &causal, 1.0 / sqrt(D_K));
    REQUIRE(fused, "lb_attention_fused");
    double diff = 0;
    for (int64_t i = 0; i < lb_tensor_numel(output->value); i++)
        diff = fmax(diff, fabs(lb_tensor_flat(output->value, i) - lb_tensor_flat(fused->value, i)));
    printf("largest difference from lb_attention_fused: %.1e\n", diff);
    CHECK(diff < 1e-5, "the article's function and the fused kernel agree (%g)", diff);
    lb_graph_free(g);

    /* Learning: a teacher attention (random W_Q, W_K, W_V) produces targets; a student
     * starting from other random weights is trained to match them. Gradients flow
     * through the softmax into W_Q and W_K (what matches) and into W_V (what is
     * carried). For comparison, the same student with W_Q and W_K frozen at their
     * initial values can only change what it carries, not where it looks. */
    lb_var *teacher[3] = {randn_param(&rng, "t_q", MODEL_WIDTH, D_K, 1), randn_param(&rng, "t_k", MODEL_WIDTH, D_K, 1),
                          randn_param(&rng, "t_v", MODEL_WIDTH, D_V, 1)};
    lb_var *frozen[3] = {randn_param(&rng, "s_q", MODEL_WIDTH, D_K, 1), randn_param(&rng, "s_k", MODEL_WIDTH, D_K, 1),
                         randn_param(&rng, "s_v", MODEL_WIDTH, D_V, 1)};
    REQUIRE(teacher[0] && teacher[1] && teacher[2] && frozen[0] && frozen[1] && frozen[2], "weights");
    double w_q_start[MODEL_WIDTH * D_K];
    for (int i = 0; i < MODEL_WIDTH * D_K; i++)
        w_q_start[i] = lb_tensor_flat(w[0]->value, i);
    /* Same initial values for the frozen run's student. */
    for (int i = 0; i < 3; i++)
        lb_tensor_copy_into(frozen[i]->value, w[i]->value);
    lb_var *frozen_order[3] = {frozen[2], frozen[0], frozen[1]}; /* only W_V is handed to the optimizer */

    printf("\ntraining W_Q, W_K and W_V to match a teacher's attention (Adam, lr 0.02, batches of 32):\n");
    double initial = train(teacher, w, 3, 0, 0);
    double learned = train(teacher, w, 3, 500, 1);
    printf("step  500: loss %.4f\n", learned);
    double moved = 0;
    for (int i = 0; i < MODEL_WIDTH * D_K; i++)
        moved += fabs(lb_tensor_flat(w[0]->value, i) - w_q_start[i]);
    double v_only = train(teacher, frozen_order, 1, 500, 0);
    printf("\nloss at the start %.4f; after 500 steps: %.4f training all three, %.4f with W_Q and W_K frozen\n",
           initial, learned, v_only);
    printf("W_Q moved by %.2f in total over its %d entries\n", moved, MODEL_WIDTH * D_K);
    CHECK(learned < 0.1 * initial, "training reduces the loss tenfold (%g -> %g)", initial, learned);
    CHECK(learned < 0.5 * v_only, "learning where to look (W_Q, W_K) matters: %g vs %g", learned, v_only);
    CHECK(moved > 1, "W_Q was learned");

    for (int i = 0; i < 3; i++) {
        lb_param_free(w[i]);
        lb_param_free(teacher[i]);
        lb_param_free(frozen[i]);
    }
    return example_status();
}

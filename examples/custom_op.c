/* Extending lookback with your own differentiable op, outside the library.
 *
 *   ./custom_op
 *
 * The op is logit soft-capping, y = c · tanh(x / c) (Gemma 2 applies it to attention
 * scores so that none can run away): nearly the identity for small scores, bounded
 * by ±c for large ones. Its derivative is dy/dx = 1 - tanh²(x / c) = 1 - (y / c)².
 *
 * The workflow: write the forward (compute the value, record it with lb_custom) and
 * the backward (read the output's gradient, add the input's), use the op inside an
 * attention computation, and let lb_gradcheck compare the backward with finite
 * differences. A backward that forgets the chain rule's factor must fail the check:
 * that is what makes a passing check worth something. */
#include <math.h>
#include <stdlib.h>

#include "example.h"

/* dL/dx += dL/dy · (1 - (y / c)²). The output y is node->value; c is node->ctx. */
static lb_status softcap_backward(lb_var *node)
{
    lb_var *x = node->inputs[0];
    LB_GRAD_BUFFER_OR_RETURN(dx, x); /* x's gradient buffer, or return if x needs none */
    double c = *(const double *)node->ctx;
    for (int64_t i = 0; i < lb_tensor_numel(node->value); i++) {
        double y = lb_tensor_flat(node->value, i) / c;
        double add = lb_tensor_flat(node->grad, i) * (1 - y * y);
        if (dx->dtype == LB_FLOAT64)
            ((double *)lb_tensor_data(dx))[i] += add;
        else
            ((float *)lb_tensor_data(dx))[i] += (float)add;
    }
    return LB_OK;
}

/* A wrong backward: passes the gradient straight through, as if y were x. */
static lb_status softcap_backward_wrong(lb_var *node)
{
    return lb_accumulate_grad(node->inputs[0], node->grad);
}

/* y = c · tanh(x / c), same shape and dtype as x. */
static lb_var *softcap(lb_graph *g, lb_var *x, double c, lb_status (*backward)(lb_var *))
{
    if (!x)
        return NULL;
    lb_tensor *y = lb_tensor_empty_like(x->value);
    double *ctx = malloc(sizeof *ctx);
    if (!y || !ctx) {
        lb_tensor_free(y);
        free(ctx);
        return NULL;
    }
    for (int64_t i = 0; i < lb_tensor_numel(y); i++) {
        double v = c * tanh(lb_tensor_flat(x->value, i) / c);
        if (y->dtype == LB_FLOAT64)
            ((double *)lb_tensor_data(y))[i] = v;
        else
            ((float *)lb_tensor_data(y))[i] = (float)v;
    }
    *ctx = c;
    /* Records y as computed from x; lb_backward will call `backward` for it. */
    return lb_custom(g, 1, &x, y, backward, ctx, free);
}

typedef struct attention_case {
    double cap;
    lb_status (*backward)(lb_var *);
} attention_case;

/* Causal attention with soft-capped scores, reduced to a number with fixed weights
 * (so every output element's gradient is checked):
 *   y = Σ softmax(softcap(Q Kᵀ / sqrt(d_k))) V ⊙ R. */
static lb_var *capped_attention(lb_graph *g, lb_var *const *leaves, void *user)
{
    const attention_case *ac = user;
    lb_attn_mask causal = {.causal = 1};
    double scale = 1.0 / sqrt((double)leaves[0]->value->shape[2]);
    lb_var *scores = lb_scale(g, lb_matmul_t(g, leaves[0], 0, leaves[1], 1), scale);
    lb_var *weights = lb_masked_softmax(g, softcap(g, scores, ac->cap, ac->backward), &causal, 1.0);
    return lb_sum(g, lb_mul(g, lb_matmul(g, weights, leaves[2]), leaves[3]));
}

int main(void)
{
    lb_rng rng;
    lb_rng_seed(&rng, 11);
    /* [batch 2, tokens 5, d_k 3]: queries and keys large enough that the cap matters. */
    const int64_t qs[3] = {2, 5, 3}, vs[3] = {2, 5, 4};
    lb_var *leaves[4] = {lb_param_new(lb_tensor_zeros(LB_FLOAT64, 3, qs), "query"),
                         lb_param_new(lb_tensor_zeros(LB_FLOAT64, 3, qs), "key"),
                         lb_param_new(lb_tensor_zeros(LB_FLOAT64, 3, vs), "value"),
                         lb_param_new(lb_tensor_zeros(LB_FLOAT64, 3, vs), "readout")};
    REQUIRE(leaves[0] && leaves[1] && leaves[2] && leaves[3], "lb_param_new");
    lb_rng_fill_normal(&rng, leaves[0]->value, 0, 2);
    lb_rng_fill_normal(&rng, leaves[1]->value, 0, 2);
    lb_rng_fill_normal(&rng, leaves[2]->value, 0, 1);
    lb_rng_fill_normal(&rng, leaves[3]->value, 0, 1);
    const double cap = 2.0;

    /* 1. The forward: the user's op against the library's built-in soft-capping
     * (lb_attn_mask.softcap), on the same scores. */
    lb_graph *g = lb_graph_new();
    REQUIRE(g, "lb_graph_new");
    lb_var *scores = lb_scale(g, lb_matmul_t(g, leaves[0], 0, leaves[1], 1), 1.0 / sqrt(3.0));
    lb_attn_mask causal = {.causal = 1}, capped = {.causal = 1, .softcap = cap};
    lb_var *mine = lb_masked_softmax(g, softcap(g, scores, cap, softcap_backward), &causal, 1.0);
    lb_var *builtin = lb_masked_softmax(g, scores, &capped, 1.0);
    REQUIRE(mine && builtin, "forward");
    double diff = 0, largest = 0;
    for (int64_t i = 0; i < lb_tensor_numel(mine->value); i++) {
        diff = fmax(diff, fabs(lb_tensor_flat(mine->value, i) - lb_tensor_flat(builtin->value, i)));
        largest = fmax(largest, fabs(lb_tensor_flat(scores->value, i)));
    }
    printf("largest score %.2f, capped to %.2f; weights with the custom op vs the built-in softcap: max difference %.1e\n",
           largest, cap * tanh(largest / cap), diff);
    CHECK(largest > 1.5 * cap, "some scores exceed the cap, so the cap matters");
    CHECK(diff < 1e-12, "custom op and built-in soft-capping agree");
    lb_graph_free(g);

    /* 2. The backward, checked numerically through the whole attention computation:
     * every element of Q, K, V and the readout is nudged by ±1e-6. */
    printf("\ngradient check of softmax(softcap(Q Kᵀ / sqrt(d_k))) V with the correct backward:\n");
    attention_case right = {cap, softcap_backward}, wrong = {cap, softcap_backward_wrong};
    lb_gradcheck_leaf report[4];
    lb_status st = lb_gradcheck(capped_attention, &right, 4, leaves, NULL, report);
    lb_gradcheck_print(stdout, 4, leaves, report);
    CHECK(st == LB_OK, "the correct backward passes: %s", lb_last_error());

    /* 3. The same check with the wrong backward: it must fail, on the leaves upstream
     * of the op (Q and K), and not on V and the readout, whose gradients do not pass
     * through it. */
    printf("\nthe same check with a backward that forgets the factor 1 - (y/c)^2:\n");
    st = lb_gradcheck(capped_attention, &wrong, 4, leaves, NULL, report);
    lb_gradcheck_print(stdout, 4, leaves, report);
    CHECK(st == LB_ERR_NUMERIC, "the wrong backward fails the check");
    printf("lb_gradcheck: %s\n", lb_last_error());
    CHECK(!report[0].passed && !report[1].passed, "Q and K fail");
    CHECK(report[2].passed && report[3].passed, "V and the readout pass");

    for (int i = 0; i < 4; i++)
        lb_param_free(leaves[i]);
    return example_status();
}

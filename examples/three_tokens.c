/* The three-token lookup of the source article, computed with lookback's ops.
 *
 *   ./three_tokens
 *
 * Three positions (voltage, spike, alarm) whose queries, keys and values are already
 * projected, d_k = d_v = 2. Each query is compared with every key (a dot product),
 * the scores are divided by sqrt(d_k), softmax turns each row into weights that sum
 * to one, and the output is the weighted mix of the value rows. Then the same with a
 * causal mask, and finally the gradient of one output number with respect to Q, K
 * and V: the lookup is differentiable, which is what lets training shape it. */
#include <math.h>

#include "example.h"

/* weights = softmax(Q Kᵀ / sqrt(d_k) + mask) and output = weights V (both [3, ...]). */
static lb_var *attend(lb_graph *g, lb_var *q, lb_var *k, lb_var *v, const lb_attn_mask *mask, lb_var **weights)
{
    double d_k = (double)q->value->shape[1];
    lb_var *scores = lb_matmul_t(g, q, 0, k, 1); /* [3, 3]: row i = query i against every key */
    *weights = lb_masked_softmax(g, scores, mask, 1.0 / sqrt(d_k));
    return lb_matmul(g, *weights, v);
}

/* For lb_gradcheck: output[0][0] as a function of the leaves (Q, K, V). */
static lb_var *first_output(lb_graph *g, lb_var *const *leaves, void *user)
{
    lb_var *weights;
    lb_var *out = attend(g, leaves[0], leaves[1], leaves[2], user, &weights);
    return lb_slice(g, lb_slice(g, out, 0, 0, 1, 1), 1, 0, 1, 1); /* [1, 1] */
}

static int near(double a, double b) { return fabs(a - b) < 5e-4; } /* the article's 3 decimals */

int main(void)
{
    const int64_t shape[2] = {3, 2};
    const double Q[6] = {1, 0, /* voltage */ 0, 1, /* spike */ 1, 1 /* alarm */};
    const double K[6] = {1, 0, 0, 1, 1, 1};
    const double V[6] = {10, 0, 0, 10, 5, 5};

    /* float64 leaves, so that the numerical gradient check at the end is exact enough. */
    lb_var *leaves[3] = {lb_param_new(lb_tensor_from_doubles(LB_FLOAT64, 2, shape, Q), "Q"),
                         lb_param_new(lb_tensor_from_doubles(LB_FLOAT64, 2, shape, K), "K"),
                         lb_param_new(lb_tensor_from_doubles(LB_FLOAT64, 2, shape, V), "V")};
    REQUIRE(leaves[0] && leaves[1] && leaves[2], "lb_param_new");
    lb_graph *g = lb_graph_new();
    REQUIRE(g, "lb_graph_new");

    print_matrix("Q", leaves[0]->value);
    print_matrix("K", leaves[1]->value);
    print_matrix("V", leaves[2]->value);

    /* 1. Every query against every key. */
    lb_var *raw = lb_matmul_t(g, leaves[0], 0, leaves[1], 1);
    lb_var *scaled = lb_scale(g, raw, 1.0 / sqrt(2.0));
    REQUIRE(scaled, "scores");
    printf("\nraw scores Q Kᵀ, then divided by sqrt(d_k) = sqrt(2):\n");
    print_matrix("QK^T", raw->value);
    print_matrix("/sqrt(2)", scaled->value);
    const double raw0[3] = {1, 0, 1}, scaled0[3] = {0.707, 0, 0.707};
    for (int j = 0; j < 3; j++) {
        CHECK(lb_tensor_flat(raw->value, j) == raw0[j], "raw score of key %d", j);
        CHECK(near(lb_tensor_flat(scaled->value, j), scaled0[j]), "scaled score of key %d", j);
    }

    /* 2. Softmax per row, then the weighted mix of the value rows. */
    lb_var *weights;
    lb_var *out = attend(g, leaves[0], leaves[1], leaves[2], NULL, &weights);
    REQUIRE(out, "attention");
    printf("\nsoftmax of each row (the attention weights), and the output = weights V:\n");
    print_matrix("weights", weights->value);
    print_matrix("output", out->value);
    const double w0[3] = {0.401, 0.198, 0.401};
    for (int j = 0; j < 3; j++)
        CHECK(near(lb_tensor_flat(weights->value, j), w0[j]), "weight of key %d", j);
    CHECK(near(lb_tensor_flat(out->value, 0), 6.017) && near(lb_tensor_flat(out->value, 1), 3.983),
          "first output [6.017, 3.983]");
    for (int i = 0; i < 3; i++) {
        double sum = 0;
        for (int j = 0; j < 3; j++)
            sum += lb_tensor_flat(weights->value, i * 3 + j);
        CHECK(fabs(sum - 1) < 1e-12, "row %d of the weights sums to %g", i, sum);
    }
    printf("first output = 0.401 [10, 0] + 0.198 [0, 10] + 0.401 [5, 5] = [%.3f, %.3f]: a mix, not a copied row\n",
           lb_tensor_flat(out->value, 0), lb_tensor_flat(out->value, 1));

    /* 3. The causal mask: position i may only read positions <= i. Forbidden scores
     * never enter the softmax, so they get weight exactly 0. */
    lb_attn_mask causal = {.causal = 1};
    lb_var *cweights;
    lb_var *cout = attend(g, leaves[0], leaves[1], leaves[2], &causal, &cweights);
    REQUIRE(cout, "causal attention");
    printf("\nwith the causal mask:\n");
    print_matrix("weights", cweights->value);
    print_matrix("output", cout->value);
    const double c0[3] = {1, 0, 0}, c1[3] = {0.330, 0.670, 0};
    for (int j = 0; j < 3; j++) {
        CHECK(lb_tensor_flat(cweights->value, j) == c0[j], "causal row 1, key %d", j);
        CHECK(near(lb_tensor_flat(cweights->value, 3 + j), c1[j]), "causal row 2, key %d", j);
    }
    CHECK(lb_tensor_flat(cweights->value, 5) == 0, "position 2 reads nothing of position 3");
    /* The last position sees everything, so its row is the unmasked one. */
    for (int j = 0; j < 3; j++)
        CHECK(lb_tensor_flat(cweights->value, 6 + j) == lb_tensor_flat(weights->value, 6 + j), "row 3 unchanged");

    /* 4. Gradients of output[0][0] (the first position's first number). Its gradient
     * with respect to V is the first row of weights in V's first column: each value
     * row contributes in proportion to how much it was attended to. Only the first
     * query influences it; every key does (it competes in the first row's softmax). */
    double first_row[3]; /* the weights of the first query, kept past the reset */
    for (int j = 0; j < 3; j++)
        first_row[j] = lb_tensor_flat(weights->value, j);
    lb_graph_reset(g); /* frees every variable of the forward passes above */
    lb_var *y = first_output(g, leaves, NULL);
    REQUIRE(y && lb_backward(g, y, NULL) == LB_OK, "backward");
    printf("\ngradients of output[0][0] with respect to Q, K and V (backpropagation):\n");
    print_matrix("dQ", leaves[0]->grad);
    print_matrix("dK", leaves[1]->grad);
    print_matrix("dV", leaves[2]->grad);
    for (int j = 0; j < 3; j++) {
        CHECK(fabs(lb_tensor_flat(leaves[2]->grad, 2 * j) - first_row[j]) < 1e-12,
              "dV[%d][0] is the weight of key %d", j, j);
        CHECK(lb_tensor_flat(leaves[2]->grad, 2 * j + 1) == 0, "dV[%d][1] is 0", j);
    }
    for (int i = 1; i < 3; i++)
        CHECK(lb_tensor_flat(leaves[0]->grad, 2 * i) == 0 && lb_tensor_flat(leaves[0]->grad, 2 * i + 1) == 0,
              "query %d does not influence the first output", i);
    for (int i = 0; i < 3; i++)
        lb_param_zero_grad(leaves[i]);

    /* ... and the same gradients by finite differences: nudge each of the 18 inputs by
     * ±1e-6, recompute the output, and compare (lb_gradcheck, as torch.autograd.gradcheck). */
    lb_gradcheck_leaf report[3];
    lb_status st = lb_gradcheck(first_output, NULL, 3, leaves, NULL, report);
    printf("\nnumerical check of those gradients (central differences, eps 1e-6):\n");
    lb_gradcheck_print(stdout, 3, leaves, report);
    CHECK(st == LB_OK, "gradcheck: %s", lb_last_error());
    /* The same check through the causal mask. */
    st = lb_gradcheck(first_output, &causal, 3, leaves, NULL, report);
    CHECK(st == LB_OK, "causal gradcheck: %s", lb_last_error());
    printf("with the causal mask: %s\n", st == LB_OK ? "PASS" : "FAIL");

    lb_graph_free(g);
    for (int i = 0; i < 3; i++)
        lb_param_free(leaves[i]);
    return example_status();
}

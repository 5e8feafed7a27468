/* The worked example of the source article ("Attention from scratch", a
 * three-token calculation): Q = K = [[1,0],[0,1],[1,1]], V = [[10,0],[0,10],[5,5]],
 * d_k = 2, attention = softmax(Q Kᵀ / sqrt(d_k)) V, without and with a causal mask.
 * The article's figures are given to 3 decimals; so are the assertions. */
#include <math.h>
#include <string.h>

#include "autograd/gradcheck.h"
#include "autograd/ops.h"
#include "support.h"

static const double Q[6] = {1, 0, 0, 1, 1, 1};
static const double V[6] = {10, 0, 0, 10, 5, 5};

/* weights = masked_softmax(q kᵀ, mask, 1/sqrt(d_k)), output = weights v. */
static lb_var *attend(lb_graph *g, lb_var *q, lb_var *k, lb_var *v, const lb_attn_mask *mask, lb_var **weights)
{
    lb_var *scores = lb_matmul_t(g, q, 0, k, 1);
    *weights = lb_masked_softmax(g, scores, mask, 1.0 / sqrt(2.0));
    return lb_matmul(g, *weights, v);
}

static void test_article_example(void)
{
    int64_t s[2] = {3, 2};
    for (int dt = 0; dt < 2; dt++) {
        lb_dtype dtype = dt ? LB_FLOAT32 : LB_FLOAT64;
        lb_graph *g = lb_graph_new();
        lb_var *q = lb_input(g, lb_tensor_from_doubles(dtype, 2, s, Q), 1);
        lb_var *k = lb_input(g, lb_tensor_from_doubles(dtype, 2, s, Q), 1);
        lb_var *v = lb_input(g, lb_tensor_from_doubles(dtype, 2, s, V), 1);
        lb_var *w;
        lb_var *out = attend(g, q, k, v, NULL, &w);
        CU_ASSERT_PTR_NOT_NULL_FATAL(out);
        /* "For the first query, the raw dot products with the three keys are [1, 0, 1]" */
        lb_var *scores = lb_matmul_t(g, q, 0, k, 1);
        double raw[3] = {1, 0, 1};
        for (int j = 0; j < 3; j++)
            CU_ASSERT_DOUBLE_EQUAL(lb_tensor_flat(scores->value, j), raw[j], 0);
        /* "Softmax gives approximately: [0.401, 0.198, 0.401]" */
        double w0[3] = {0.401, 0.198, 0.401};
        for (int j = 0; j < 3; j++)
            CU_ASSERT_DOUBLE_EQUAL(lb_tensor_flat(w->value, j), w0[j], 5e-4);
        /* "≈ [6.017, 3.983]" */
        CU_ASSERT_DOUBLE_EQUAL(lb_tensor_flat(out->value, 0), 6.017, 5e-4);
        CU_ASSERT_DOUBLE_EQUAL(lb_tensor_flat(out->value, 1), 3.983, 5e-4);
        /* "Softmax runs across each row, so each query's weights sum to one." */
        for (int i = 0; i < 3; i++) {
            double sum = 0;
            for (int j = 0; j < 3; j++)
                sum += lb_tensor_flat(w->value, i * 3 + j);
            CU_ASSERT_DOUBLE_EQUAL(sum, 1.0, 1e-6);
        }

        /* Causal: "the first row keeps only its first score, so its weights become
         * [1, 0, 0]. The second row ... giving weights approximately [0.330, 0.670, 0]." */
        lb_attn_mask causal = {.causal = 1};
        lb_var *wc;
        lb_var *outc = attend(g, q, k, v, &causal, &wc);
        CU_ASSERT_PTR_NOT_NULL_FATAL(outc);
        double c0[3] = {1, 0, 0}, c1[3] = {0.330, 0.670, 0};
        for (int j = 0; j < 3; j++) {
            CU_ASSERT_DOUBLE_EQUAL(lb_tensor_flat(wc->value, j), c0[j], 5e-4);
            CU_ASSERT_DOUBLE_EQUAL(lb_tensor_flat(wc->value, 3 + j), c1[j], 5e-4);
        }
        CU_ASSERT_EQUAL(lb_tensor_flat(wc->value, 1), 0.0); /* blocked exactly, not approximately */
        CU_ASSERT_EQUAL(lb_tensor_flat(wc->value, 2), 0.0);
        CU_ASSERT_EQUAL(lb_tensor_flat(wc->value, 5), 0.0);
        /* The first query can only read the first value row: output [10, 0]. */
        CU_ASSERT_DOUBLE_EQUAL(lb_tensor_flat(outc->value, 0), 10.0, 1e-5);
        CU_ASSERT_DOUBLE_EQUAL(lb_tensor_flat(outc->value, 1), 0.0, 1e-5);
        /* Second query: 0.330 [10, 0] + 0.670 [0, 10] */
        CU_ASSERT_DOUBLE_EQUAL(lb_tensor_flat(outc->value, 2), 3.302, 5e-4);
        CU_ASSERT_DOUBLE_EQUAL(lb_tensor_flat(outc->value, 3), 6.698, 5e-4);
        /* The last query sees everything: the same row as without the mask. */
        for (int j = 0; j < 2; j++)
            CU_ASSERT_DOUBLE_EQUAL(lb_tensor_flat(outc->value, 4 + j), lb_tensor_flat(out->value, 4 + j), 1e-6);
        /* Backward through the causal example: the future value row (row 2) only
         * receives gradient from the last query, value row 0 from all three. */
        lb_tensor *ones = lb_tensor_zeros_like(outc->value);
        lb_tensor_fill(ones, 1);
        CU_ASSERT_EQUAL(lb_backward(g, outc, ones), LB_OK);
        double dv[6];
        for (int i = 0; i < 3; i++) /* dV[j] = sum_i w[i, j] */
            dv[2 * i] = dv[2 * i + 1] = lb_tensor_flat(wc->value, i) + lb_tensor_flat(wc->value, 3 + i) +
                                        lb_tensor_flat(wc->value, 6 + i);
        LB_ASSERT_CLOSE(v->grad, dv, 1e-5, 1e-5);
        CU_ASSERT_DOUBLE_EQUAL(lb_tensor_flat(v->grad, 4), lb_tensor_flat(wc->value, 8), 1e-6);
        lb_tensor_free(ones);
        lb_graph_free(g);
    }
}

/* The example as item 0 of a batch [B=2, T=3, 2] whose item 1 is all padding
 * (key_lengths {3, 0}): item 0 is unchanged, item 1 is zeros without NaN. */
static void test_article_example_batched_with_padding(void)
{
    int64_t s[3] = {2, 3, 2};
    double q2[12], v2[12];
    for (int i = 0; i < 6; i++) {
        q2[i] = Q[i];
        q2[6 + i] = Q[5 - i];
        v2[i] = V[i];
        v2[6 + i] = -V[i];
    }
    int32_t lengths[2] = {3, 0};
    lb_attn_mask mask = {.causal = 1, .key_lengths = lengths};
    lb_graph *g = lb_graph_new();
    lb_var *q = lb_input(g, lb_tensor_from_doubles(LB_FLOAT64, 3, s, q2), 1);
    lb_var *v = lb_input(g, lb_tensor_from_doubles(LB_FLOAT64, 3, s, v2), 1);
    lb_var *w;
    lb_var *out = attend(g, q, q, v, &mask, &w);
    CU_ASSERT_PTR_NOT_NULL_FATAL(out);
    /* the last query [1, 1] scores [1, 1, 2] / sqrt(2) */
    double w_item0[9] = {1, 0, 0, 0.330, 0.670, 0, 0.248, 0.248, 0.503};
    for (int i = 0; i < 9; i++) {
        CU_ASSERT_DOUBLE_EQUAL(lb_tensor_flat(w->value, i), w_item0[i], 5e-4);
        CU_ASSERT_EQUAL(lb_tensor_flat(w->value, 9 + i), 0.0);
    }
    double out_item0[6] = {10, 0, 3.302, 6.698, 5.0, 5.0};
    for (int i = 0; i < 6; i++)
        CU_ASSERT_DOUBLE_EQUAL(lb_tensor_flat(out->value, i), out_item0[i], 5e-4);
    for (int i = 6; i < 12; i++)
        CU_ASSERT_EQUAL(lb_tensor_flat(out->value, i), 0.0);
    lb_tensor *ones = lb_tensor_zeros_like(out->value);
    lb_tensor_fill(ones, 1);
    CU_ASSERT_EQUAL(lb_backward(g, out, ones), LB_OK);
    for (int i = 6; i < 12; i++) {
        CU_ASSERT_EQUAL(lb_tensor_flat(q->grad, i), 0.0);
        CU_ASSERT_EQUAL(lb_tensor_flat(v->grad, i), 0.0);
    }
    lb_tensor_free(ones);
    lb_graph_free(g);
}

static lb_var *example_fn(lb_graph *g, lb_var *const *p, void *user)
{
    lb_var *w;
    return attend(g, p[0], p[1], p[2], user, &w);
}

/* The gradients of the whole example w.r.t. Q, K and V match finite differences. */
static void test_article_example_gradcheck(void)
{
    int64_t s[2] = {3, 2};
    lb_var *p[3] = {lb_param_new(lb_tensor_from_doubles(LB_FLOAT64, 2, s, Q), "Q"),
                    lb_param_new(lb_tensor_from_doubles(LB_FLOAT64, 2, s, Q), "K"),
                    lb_param_new(lb_tensor_from_doubles(LB_FLOAT64, 2, s, V), "V")};
    lb_attn_mask none = {0}, causal = {.causal = 1};
    const lb_attn_mask *masks[2] = {&none, &causal};
    for (int m = 0; m < 2; m++) {
        lb_gradcheck_leaf rep[3];
        lb_status st = lb_gradcheck(example_fn, (void *)masks[m], 3, p, NULL, rep);
        if (st != LB_OK)
            fprintf(stderr, "\n  %s\n", lb_last_error());
        CU_ASSERT_EQUAL(st, LB_OK);
        CU_ASSERT_TRUE(rep[0].passed && rep[1].passed && rep[2].passed);
    }
    for (int i = 0; i < 3; i++)
        lb_param_free(p[i]);
}

int main(void)
{
    const lb_test_case cases[] = {
        {"the article's three-token example, with and without causal mask", test_article_example},
        {"the example batched with an all-padding item", test_article_example_batched_with_padding},
        {"gradcheck of the example w.r.t. Q, K and V", test_article_example_gradcheck},
        {NULL, NULL},
    };
    return lb_test_main("attention_example", cases);
}

/* Why attention divides the scores by sqrt(d_k): the source article's variance
 * argument, measured.
 *
 *   ./scaling
 *
 * Queries and keys with independent, zero-mean, unit-variance components: a score
 * q · k is a sum of d_k such products, so its variance is about d_k. For each d_k from
 * 4 to 256 the program draws 256 sequences of 16 positions (4,096 queries, each
 * compared with the 16 keys of its sequence) and measures, with and without the
 * 1/sqrt(d_k) scale:
 *   - the standard deviation of the scores fed to softmax (≈ sqrt(d_k) unscaled, ≈ 1 scaled);
 *   - the largest softmax weight of a row, averaged over the rows (1 = one-hot), and the
 *     share of rows where it exceeds 0.99 (saturated);
 *   - the size of the gradient that reaches a row of scores (its Euclidean norm, averaged
 *     over the rows) from a random upstream gradient on the weights: softmax's
 *     derivative w_j (δ_ij - w_i) vanishes when the weights go to 0 and 1, so the signal
 *     that could adjust the matches fades. */
#include <math.h>

#include "example.h"

enum { B = 256, T = 16 }; /* sequences, positions per sequence */

typedef struct measure {
    double score_std, max_weight, saturated, grad_norm;
} measure;

/* Softmax over the last axis of `logits` [B, T, T] and the statistics above; `upstream`
 * [B, T, T] is the gradient of the loss with respect to the weights. */
static int measure_softmax(lb_graph *g, lb_tensor *logits, const lb_tensor *upstream, measure *m)
{
    lb_var *s = lb_input(g, logits, 1);
    lb_var *w = lb_softmax(g, s);
    lb_var *loss = lb_sum(g, lb_mul(g, w, lb_input_copy(g, upstream, 0))); /* d loss / d w = upstream */
    if (!loss || lb_backward(g, loss, NULL) != LB_OK)
        return 0;
    const double *x = lb_tensor_data(s->value), *d = lb_tensor_data(s->grad), *p = lb_tensor_data(w->value);
    double sum = 0, sum_sq = 0, max_sum = 0, saturated = 0, grad_sum = 0;
    for (int64_t row = 0; row < B * T; row++) {
        double row_max = 0, row_grad_sq = 0;
        for (int64_t j = row * T; j < (row + 1) * T; j++) {
            sum += x[j];
            sum_sq += x[j] * x[j];
            row_grad_sq += d[j] * d[j];
            row_max = fmax(row_max, p[j]);
        }
        max_sum += row_max;
        saturated += row_max > 0.99;
        grad_sum += sqrt(row_grad_sq);
    }
    double n = (double)B * T * T, mean = sum / n;
    m->score_std = sqrt(sum_sq / n - mean * mean);
    m->max_weight = max_sum / (B * T);
    m->saturated = saturated / (B * T);
    m->grad_norm = grad_sum / (B * T);
    lb_graph_reset(g);
    return 1;
}

int main(void)
{
    lb_rng rng;
    lb_rng_seed(&rng, 2017);
    lb_graph *g = lb_graph_new();
    REQUIRE(g, "lb_graph_new");
    const int64_t ws[3] = {B, T, T};
    lb_tensor *upstream = lb_tensor_zeros(LB_FLOAT64, 3, ws);
    REQUIRE(upstream, "lb_tensor_zeros");
    lb_rng_fill_normal(&rng, upstream, 0, 1);

    printf("%5s | %17s | %17s | %17s | %17s\n", "", "std of the scores", "largest weight", "rows saturated",
           "gradient at scores");
    printf("%5s | %8s %8s | %8s %8s | %8s %8s | %8s %8s\n", "d_k", "unscaled", "scaled", "unscaled", "scaled",
           "unscaled", "scaled", "unscaled", "scaled");
    measure first[2] = {{0}}, last[2] = {{0}};
    for (int64_t d_k = 4; d_k <= 256; d_k *= 2) {
        const int64_t qs[3] = {B, T, d_k};
        lb_tensor *q = lb_tensor_zeros(LB_FLOAT64, 3, qs), *k = lb_tensor_zeros(LB_FLOAT64, 3, qs);
        REQUIRE(q && k, "lb_tensor_zeros");
        lb_rng_fill_normal(&rng, q, 0, 1);
        lb_rng_fill_normal(&rng, k, 0, 1);
        lb_var *scores = lb_matmul_t(g, lb_input(g, q, 0), 0, lb_input(g, k, 0), 1); /* [B, T, T] = Q Kᵀ */
        REQUIRE(scores, "Q Kᵀ");
        lb_tensor *raw = lb_tensor_copy(scores->value, LB_FLOAT64);
        lb_tensor *scaled = lb_tensor_copy(scores->value, LB_FLOAT64);
        REQUIRE(raw && scaled, "lb_tensor_copy");
        double *sp = lb_tensor_data(scaled);
        for (int64_t i = 0; i < lb_tensor_numel(scaled); i++)
            sp[i] /= sqrt((double)d_k);
        lb_graph_reset(g);
        measure m[2];
        REQUIRE(measure_softmax(g, raw, upstream, &m[0]) && measure_softmax(g, scaled, upstream, &m[1]), "softmax");
        printf("%5lld | %8.3f %8.3f | %8.3f %8.3f | %7.1f%% %7.1f%% | %8.4f %8.4f\n", (long long)d_k,
               m[0].score_std, m[1].score_std, m[0].max_weight, m[1].max_weight, 100 * m[0].saturated,
               100 * m[1].saturated, m[0].grad_norm, m[1].grad_norm);

        /* The variance argument: std ≈ sqrt(d_k) unscaled and ≈ 1 scaled (65,536
         * samples each: within 10 %). */
        CHECK(fabs(m[0].score_std / sqrt((double)d_k) - 1) < 0.1, "unscaled std %g vs sqrt(%lld)", m[0].score_std,
              (long long)d_k);
        CHECK(fabs(m[1].score_std - 1) < 0.1, "scaled std %g vs 1", m[1].score_std);
        /* Scaled, softmax stays spread out at every width. */
        CHECK(m[1].max_weight < 0.5 && m[1].saturated < 0.01, "scaled softmax at d_k = %lld stays soft",
              (long long)d_k);
        if (d_k == 4)
            first[0] = m[0], first[1] = m[1];
        last[0] = m[0], last[1] = m[1];
    }
    printf("\nunscaled, from d_k = 4 to 256 the largest weight goes from %.2f to %.2f, %.0f%% of the rows are\n"
           "saturated, and the gradient reaching the scores shrinks %.1fx; scaled, it changes by a factor %.2f.\n",
           first[0].max_weight, last[0].max_weight, 100 * last[0].saturated, first[0].grad_norm / last[0].grad_norm,
           last[1].grad_norm / first[1].grad_norm);
    CHECK(last[0].max_weight > 0.9, "unscaled softmax saturates at d_k = 256 (largest weight %g)", last[0].max_weight);
    CHECK(first[0].grad_norm > 3 * last[0].grad_norm, "unscaled gradient fades with d_k");
    CHECK(last[1].grad_norm > 0.8 * first[1].grad_norm && last[1].grad_norm < 1.25 * first[1].grad_norm,
          "scaled gradient keeps its size");
    lb_tensor_free(upstream);
    lb_graph_free(g);
    return example_status();
}

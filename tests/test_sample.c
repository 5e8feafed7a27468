/* Sampling (layers/sample.h): greedy decoding, temperature against the analytic
 * softmax, top-k, top-p and min-p supports (-inf masking, ties, at least one token),
 * llama.cpp's repeat and presence penalties against logits penalised by hand, the
 * combined order, counts over many seeded draws against the documented distribution
 * (a chi-square bound), one rng draw per token, and the errors. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "layers/sample.h"
#include "support.h"

enum { V = 8, DRAWS = 200000 };

/* Hand-picked logits with distinct values, not sorted by id. */
static const float logits8[V] = {0.3f, 2.0f, -1.0f, 1.2f, 0.9f, -0.4f, 1.7f, 0.0f};

static lb_sampling opts(double t, int64_t k, double p)
{
    lb_sampling o = lb_sampling_defaults();
    o.temperature = t, o.top_k = k, o.top_p = p;
    return o;
}

/* softmax(x / t) over the tokens with keep[i], 0 elsewhere. */
static void reference_probs(const float *x, int64_t n, double t, const int *keep, double *out)
{
    double top = -INFINITY, sum = 0;
    for (int64_t i = 0; i < n; i++)
        if (keep[i] && x[i] / t > top)
            top = x[i] / t;
    for (int64_t i = 0; i < n; i++)
        sum += out[i] = keep[i] ? exp(x[i] / t - top) : 0;
    for (int64_t i = 0; i < n; i++)
        out[i] /= sum;
}

/* Pearson's statistic of `draws` seeded draws against probs, over the tokens with
 * probs > 0; the count of draws of a token with probs == 0 goes to *impossible. */
static double chi_square(const float *x, int64_t n, const lb_sampling *o, uint64_t seed, int64_t draws,
                         const double *probs, int64_t *impossible, int *dof)
{
    lb_rng r;
    lb_rng_seed(&r, seed);
    int64_t *counts = calloc((size_t)n, sizeof *counts);
    void *work = malloc(lb_sample_work_bytes(n));
    for (int64_t d = 0; d < draws; d++) {
        int32_t tok = -1;
        CU_ASSERT_EQUAL_FATAL(lb_sample_token(x, n, o, &r, work, &tok), LB_OK);
        CU_ASSERT_TRUE_FATAL(tok >= 0 && tok < n);
        counts[tok]++;
    }
    double stat = 0;
    *impossible = 0;
    *dof = -1;
    for (int64_t i = 0; i < n; i++) {
        if (probs[i] == 0) {
            *impossible += counts[i];
            continue;
        }
        double e = probs[i] * (double)draws;
        stat += (counts[i] - e) * (counts[i] - e) / e;
        (*dof)++;
    }
    free(counts);
    free(work);
    return stat;
}

/* The draws follow probs: chi-square below the 1e-6 tail of its distribution for up to
 * 7 degrees of freedom (about 40), and no draw of a token of probability 0. */
static void check_draws(const float *x, int64_t n, const lb_sampling *o, const double *probs, uint64_t seed)
{
    int64_t impossible;
    int dof;
    double stat = chi_square(x, n, o, seed, DRAWS, probs, &impossible, &dof);
    CU_ASSERT_EQUAL(impossible, 0);
    CU_ASSERT_TRUE(dof <= 7);
    CU_ASSERT_TRUE(stat < 40.0);
    if (!(stat < 40.0) || impossible)
        fprintf(stderr, "\n  chi-square %.2f on %d dof, %lld impossible draws\n", stat, dof, (long long)impossible);
}

static void test_greedy(void)
{
    lb_sampling o = opts(0, 3, 0.5);
    lb_rng r, before;
    lb_rng_seed(&r, 9);
    before = r;
    int32_t tok = -1;
    CU_ASSERT_EQUAL(lb_sample_token(logits8, V, &o, &r, NULL, &tok), LB_OK);
    CU_ASSERT_EQUAL(tok, 1);
    CU_ASSERT_EQUAL(memcmp(&r, &before, sizeof r), 0); /* no draw */
    /* ties: the lowest id; -inf entries are never the arg-max */
    float tied[6] = {-INFINITY, 0.5f, 3.0f, -2.0f, 3.0f, 3.0f};
    CU_ASSERT_EQUAL(lb_sample_token(tied, 6, &o, &r, NULL, &tok), LB_OK);
    CU_ASSERT_EQUAL(tok, 2);
    float neg[3] = {-INFINITY, -1e30f, -INFINITY};
    CU_ASSERT_EQUAL(lb_sample_token(neg, 3, &o, &r, NULL, &tok), LB_OK);
    CU_ASSERT_EQUAL(tok, 1);
    /* the distribution is one-hot, the filtered logits -inf but the arg-max */
    double p[6], z[6];
    CU_ASSERT_EQUAL(lb_sample_probs(tied, 6, &o, NULL, p), LB_OK);
    CU_ASSERT_EQUAL(lb_sample_filter(tied, 6, &o, NULL, z), LB_OK);
    for (int i = 0; i < 6; i++) {
        CU_ASSERT_EQUAL(p[i], i == 2 ? 1.0 : 0.0);
        CU_ASSERT_TRUE(i == 2 ? z[i] == 3.0 : (isinf(z[i]) && z[i] < 0));
    }
}

static void test_temperature(void)
{
    const double temps[] = {0.25, 0.7, 1.0, 2.5};
    int all[V] = {1, 1, 1, 1, 1, 1, 1, 1};
    for (int t = 0; t < 4; t++) {
        lb_sampling o = opts(temps[t], 0, 1);
        double p[V], e[V], z[V];
        CU_ASSERT_EQUAL_FATAL(lb_sample_probs(logits8, V, &o, NULL, p), LB_OK);
        CU_ASSERT_EQUAL_FATAL(lb_sample_filter(logits8, V, &o, NULL, z), LB_OK);
        reference_probs(logits8, V, temps[t], all, e);
        for (int i = 0; i < V; i++) {
            CU_ASSERT_DOUBLE_EQUAL(p[i], e[i], 1e-12);
            CU_ASSERT_DOUBLE_EQUAL(z[i], (double)logits8[i] / temps[t], 1e-12);
        }
        check_draws(logits8, V, &o, e, 100 + (uint64_t)t);
    }
    /* a lower temperature sharpens: the top token's probability grows as T falls */
    double p1[V], p2[V];
    lb_sampling cold = opts(0.5, 0, 1), hot = opts(2, 0, 1);
    lb_sample_probs(logits8, V, &cold, NULL, p1);
    lb_sample_probs(logits8, V, &hot, NULL, p2);
    CU_ASSERT_TRUE(p1[1] > 0.5 && p2[1] < 0.3 && p2[2] > p1[2]);
    /* the documented draw: one uniform u, the first id whose cumulative probability
     * exceeds u (checked against the same rng draws) */
    lb_sampling o = opts(0.7, 0, 1);
    double e[V];
    reference_probs(logits8, V, 0.7, all, e);
    lb_rng a, b;
    lb_rng_seed(&a, 4);
    lb_rng_seed(&b, 4);
    int agree = 0;
    for (int d = 0; d < 1000; d++) {
        int32_t tok;
        lb_sample_token(logits8, V, &o, &a, NULL, &tok);
        double u = lb_rng_uniform(&b), cum = 0;
        int expect = V - 1;
        for (int i = 0; i < V; i++) {
            cum += e[i];
            if (cum > u) {
                expect = i;
                break;
            }
        }
        agree += tok == expect;
    }
    CU_ASSERT_EQUAL(agree, 1000); /* and exactly one draw per token: the streams stayed in step */
    CU_ASSERT_EQUAL(memcmp(&a, &b, sizeof a), 0);
}

static void test_top_k(void)
{
    /* sorted: id 1 (2.0), 6 (1.7), 3 (1.2), 4 (0.9), 0 (0.3), 7 (0.0), 5 (-0.4), 2 (-1.0) */
    static const int order[V] = {1, 6, 3, 4, 0, 7, 5, 2};
    const int64_t ks[] = {1, 2, 3, 5, 7};
    for (int j = 0; j < 5; j++) {
        int keep[V] = {0};
        for (int64_t i = 0; i < ks[j]; i++)
            keep[order[i]] = 1;
        lb_sampling o = opts(0.8, ks[j], 1);
        double z[V], p[V], e[V];
        CU_ASSERT_EQUAL_FATAL(lb_sample_filter(logits8, V, &o, NULL, z), LB_OK);
        CU_ASSERT_EQUAL_FATAL(lb_sample_probs(logits8, V, &o, NULL, p), LB_OK);
        reference_probs(logits8, V, 0.8, keep, e);
        for (int i = 0; i < V; i++) {
            if (keep[i]) {
                CU_ASSERT_DOUBLE_EQUAL(z[i], logits8[i] / 0.8, 1e-12);
            } else {
                CU_ASSERT_TRUE(isinf(z[i]) && z[i] < 0); /* -inf, not a large negative number */
            }
            CU_ASSERT_DOUBLE_EQUAL(p[i], e[i], 1e-12);
            CU_ASSERT_TRUE(keep[i] || p[i] == 0.0);
        }
        check_draws(logits8, V, &o, e, 200 + (uint64_t)j);
    }
    /* k = 0 and k >= V keep every token */
    for (int64_t k = 0; k <= 9; k += 8) {
        lb_sampling o = opts(1, k, 1);
        double p[V];
        lb_sample_probs(logits8, V, &o, NULL, p);
        for (int i = 0; i < V; i++)
            CU_ASSERT_TRUE(p[i] > 0);
    }
    /* ties with the k-th largest value are kept (nanoGPT's logits < v[-1] rule): k = 2 keeps 3 */
    float tied[5] = {1.0f, 3.0f, 2.0f, 2.0f, 0.5f};
    lb_sampling o = opts(1, 2, 1);
    double p[5];
    lb_sample_probs(tied, 5, &o, NULL, p);
    CU_ASSERT_TRUE(p[1] > 0 && p[2] > 0 && p[3] > 0);
    CU_ASSERT_EQUAL(p[0], 0.0);
    CU_ASSERT_EQUAL(p[4], 0.0);
    CU_ASSERT_DOUBLE_EQUAL(p[2], p[3], 1e-15);
    /* logits already -inf stay out and do not count towards k */
    float masked[5] = {-INFINITY, 1.0f, -INFINITY, 0.0f, -INFINITY};
    lb_sampling o3 = opts(1, 3, 1);
    lb_sample_probs(masked, 5, &o3, NULL, p);
    CU_ASSERT_EQUAL(p[0] + p[2] + p[4], 0.0);
    CU_ASSERT_DOUBLE_EQUAL(p[1], 1 / (1 + exp(-1.0)), 1e-12);
}

/* The top-p rule as transformers states it, independently of the library's loop: sort
 * ascending, drop the tokens whose cumulative probability is <= 1 - p, keep at least
 * the most probable one. q is softmax(x / t) over every token; ties do not occur here. */
static void reference_top_p(const float *x, int n, double t, double p, int *keep)
{
    int all[64];
    double q[64];
    for (int i = 0; i < n; i++)
        all[i] = 1;
    reference_probs(x, n, t, all, q);
    for (int i = 0; i < n; i++) {
        double below = 0; /* probability of the tokens less likely than i, and i itself */
        for (int j = 0; j < n; j++)
            if (q[j] < q[i] || j == i)
                below += q[j];
        keep[i] = !(below <= 1 - p);
    }
    int best = 0;
    for (int i = 1; i < n; i++)
        if (q[i] > q[best])
            best = i;
    keep[best] = 1;
}

static void test_top_p(void)
{
    /* probabilities 0.5, 0.3, 0.15, 0.05 at ids 2, 0, 3, 1 */
    float x[4] = {logf(0.3f), logf(0.05f), logf(0.5f), logf(0.15f)};
    const struct {
        double p;
        int keep[4];
    } cases[] = {
        {0.0, {0, 0, 1, 0}},  {0.4, {0, 0, 1, 0}},  {0.6, {1, 0, 1, 0}},
        {0.85, {1, 0, 1, 1}}, {0.97, {1, 1, 1, 1}}, {1.0, {1, 1, 1, 1}},
    };
    for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
        lb_sampling o = opts(1, 0, cases[c].p);
        double z[4], pr[4], e[4];
        CU_ASSERT_EQUAL_FATAL(lb_sample_filter(x, 4, &o, NULL, z), LB_OK);
        CU_ASSERT_EQUAL_FATAL(lb_sample_probs(x, 4, &o, NULL, pr), LB_OK);
        reference_probs(x, 4, 1, cases[c].keep, e);
        for (int i = 0; i < 4; i++) {
            CU_ASSERT_EQUAL(!isinf(z[i]), cases[c].keep[i]);
            CU_ASSERT_DOUBLE_EQUAL(pr[i], e[i], 1e-12);
        }
        check_draws(x, 4, &o, e, 300 + c);
    }
    /* equal probabilities: the lower ids come first */
    float flat[4] = {0, 0, 0, 0};
    lb_sampling o = opts(1, 0, 0.3);
    double pr[4];
    lb_sample_probs(flat, 4, &o, NULL, pr);
    CU_ASSERT_DOUBLE_EQUAL(pr[0], 0.5, 1e-15);
    CU_ASSERT_DOUBLE_EQUAL(pr[1], 0.5, 1e-15);
    CU_ASSERT_EQUAL(pr[2] + pr[3], 0.0);
    /* random logits, many p and temperatures: the support is transformers' rule */
    lb_rng r;
    lb_rng_seed(&r, 77);
    int mismatches = 0;
    for (int trial = 0; trial < 300; trial++) {
        float y[33];
        for (int i = 0; i < 33; i++)
            y[i] = (float)(3 * lb_rng_normal(&r));
        double p = lb_rng_uniform(&r), t = 0.3 + 2 * lb_rng_uniform(&r);
        lb_sampling oo = opts(t, 0, p);
        double z[33];
        int keep[33];
        lb_sample_filter(y, 33, &oo, NULL, z);
        reference_top_p(y, 33, t, p, keep);
        for (int i = 0; i < 33; i++)
            mismatches += keep[i] != !isinf(z[i]);
    }
    CU_ASSERT_EQUAL(mismatches, 0);
}

/* temperature, then top-k, then top-p on the renormalised top-k distribution */
static void test_combined(void)
{
    /* T = 0.5, k = 4 keeps ids 1, 6, 3, 4; their softmax at T = 0.5 is about 0.537,
     * 0.295, 0.108, 0.060: p = 0.82 keeps ids 1 and 6 (cumulative 0.832) */
    int keep4[V] = {0, 1, 0, 1, 1, 0, 1, 0};
    double q[V];
    reference_probs(logits8, V, 0.5, keep4, q);
    CU_ASSERT_TRUE(q[1] < 0.82 && q[1] + q[6] > 0.82);
    int keep2[V] = {0, 1, 0, 0, 0, 0, 1, 0};
    double e[V], p[V];
    reference_probs(logits8, V, 0.5, keep2, e);
    lb_sampling o = opts(0.5, 4, 0.82);
    CU_ASSERT_EQUAL_FATAL(lb_sample_probs(logits8, V, &o, NULL, p), LB_OK);
    for (int i = 0; i < V; i++)
        CU_ASSERT_DOUBLE_EQUAL(p[i], e[i], 1e-12);
    check_draws(logits8, V, &o, e, 400);
    /* top-p over the whole vocabulary (no top-k) keeps a third token at the same p:
     * the order matters, and the library applies top-k first */
    int all[V] = {1, 1, 1, 1, 1, 1, 1, 1};
    reference_probs(logits8, V, 0.5, all, q);
    CU_ASSERT_TRUE(q[1] + q[6] < 0.82);
    lb_sampling only_p = opts(0.5, 0, 0.82);
    CU_ASSERT_EQUAL_FATAL(lb_sample_probs(logits8, V, &only_p, NULL, p), LB_OK);
    CU_ASSERT_TRUE(p[1] > 0 && p[6] > 0 && p[3] > 0 && p[4] == 0);
}

static void test_masked_input_never_drawn(void)
{
    float x[6] = {1.0f, -INFINITY, 0.5f, -INFINITY, -INFINITY, 0.2f};
    int keep[6] = {1, 0, 1, 0, 0, 1};
    double e[6];
    reference_probs(x, 6, 1.3, keep, e);
    lb_sampling o = opts(1.3, 0, 1);
    check_draws(x, 6, &o, e, 500);
}

static void test_same_seed_same_tokens(void)
{
    lb_sampling o = opts(0.9, 5, 0.9);
    lb_rng a, b;
    lb_rng_seed(&a, 1337);
    lb_rng_seed(&b, 1337);
    void *work = malloc(lb_sample_work_bytes(V));
    int same = 0;
    for (int d = 0; d < 500; d++) {
        int32_t ta, tb;
        lb_sample_token(logits8, V, &o, &a, work, &ta); /* caller's scratch */
        lb_sample_token(logits8, V, &o, &b, NULL, &tb); /* its own */
        same += ta == tb;
    }
    free(work);
    CU_ASSERT_EQUAL(same, 500);
}

static void test_errors(void)
{
    lb_rng r, before;
    lb_rng_seed(&r, 3);
    before = r;
    int32_t tok = -7;
    lb_sampling ok = opts(1, 0, 1);
    float bad[3] = {0.0f, NAN, 1.0f};
    CU_ASSERT_EQUAL(lb_sample_token(bad, 3, &ok, &r, NULL, &tok), LB_ERR_NUMERIC);
    CU_ASSERT_TRUE(lb_test_error_has("logit 1") && lb_test_error_has("NaN"));
    bad[1] = INFINITY;
    CU_ASSERT_EQUAL(lb_sample_token(bad, 3, &ok, &r, NULL, &tok), LB_ERR_NUMERIC);
    CU_ASSERT_TRUE(lb_test_error_has("+inf"));
    float none[2] = {-INFINITY, -INFINITY};
    CU_ASSERT_EQUAL(lb_sample_token(none, 2, &ok, &r, NULL, &tok), LB_ERR_NUMERIC);
    CU_ASSERT_TRUE(lb_test_error_has("every one of the 2 logits is -inf"));
    const struct {
        lb_sampling o;
        const char *name;
    } wrong[] = {
        {{-0.5, 0, 1, 0, 0, 0, 0, 0, 0, NULL, 0}, "temperature = -0.5"}, {{1e-9, 0, 1, 0, 0, 0, 0, 0, 0, NULL, 0}, "temperature = 1e-09"},
        {{NAN, 0, 1, 0, 0, 0, 0, 0, 0, NULL, 0}, "temperature = nan"},   {{1, -1, 1, 0, 0, 0, 0, 0, 0, NULL, 0}, "top_k = -1"},
        {{1, 0, 1.5, 0, 0, 0, 0, 0, 0, NULL, 0}, "top_p = 1.5"},         {{1, 0, NAN, 0, 0, 0, 0, 0, 0, NULL, 0}, "top_p = nan"},
    };
    for (size_t i = 0; i < sizeof wrong / sizeof wrong[0]; i++) {
        CU_ASSERT_EQUAL(lb_sampling_check(&wrong[i].o), LB_ERR_VALUE);
        CU_ASSERT_EQUAL(lb_sample_token(logits8, V, &wrong[i].o, &r, NULL, &tok), LB_ERR_VALUE);
        CU_ASSERT_TRUE(lb_test_error_has(wrong[i].name));
    }
    CU_ASSERT_EQUAL(lb_sample_token(logits8, 0, &ok, &r, NULL, &tok), LB_ERR_VALUE);
    CU_ASSERT_TRUE(lb_test_error_has("vocab_size = 0"));
    CU_ASSERT_EQUAL(lb_sample_work_bytes(0), 0);
    CU_ASSERT_EQUAL(lb_sample_work_bytes(10), 240);
    CU_ASSERT_EQUAL(lb_sample_token(NULL, V, &ok, &r, NULL, &tok), LB_ERR_VALUE);
    CU_ASSERT_EQUAL(lb_sample_token(logits8, V, NULL, &r, NULL, &tok), LB_ERR_VALUE);
    CU_ASSERT_EQUAL(lb_sample_token(logits8, V, &ok, NULL, NULL, &tok), LB_ERR_VALUE);
    CU_ASSERT_EQUAL(lb_sample_token(logits8, V, &ok, &r, NULL, NULL), LB_ERR_VALUE);
    CU_ASSERT_TRUE(lb_test_error_has("token is NULL"));
    CU_ASSERT_EQUAL(tok, -7); /* untouched, */
    CU_ASSERT_EQUAL(memcmp(&r, &before, sizeof r), 0); /* and no draw was spent */
    lb_sampling d = lb_sampling_defaults();
    CU_ASSERT_EQUAL(d.temperature, 1.0);
    CU_ASSERT_EQUAL(d.top_k, 0);
    CU_ASSERT_EQUAL(d.top_p, 1.0);
    CU_ASSERT_EQUAL(lb_sampling_check(&d), LB_OK);
}

/* <unk> (mask_unk): a dominating unk logit is never drawn in any mode: greedy takes the
 * next arg-max, top-k 1 the next, and 200,000 draws at temperature 1e6 (where every
 * other token is almost equally likely and unk would get 1/8 of the draws) follow the
 * uniform distribution over the 7 other tokens, with no draw of unk. */
static void test_unk_never_drawn(void)
{
    float x[V];
    memcpy(x, logits8, sizeof x);
    x[5] = 50.0f; /* <unk> dominates: without the mask every mode below picks it */
    lb_sampling plain = opts(0, 0, 1), o = plain;
    o.unk_id = 5;
    o.mask_unk = 1;
    lb_rng r;
    lb_rng_seed(&r, 11);
    int32_t tok = -1;
    CU_ASSERT_EQUAL(lb_sample_token(x, V, &plain, &r, NULL, &tok), LB_OK);
    CU_ASSERT_EQUAL(tok, 5); /* the test's premise */
    CU_ASSERT_EQUAL(lb_sample_token(x, V, &o, &r, NULL, &tok), LB_OK);
    CU_ASSERT_EQUAL(tok, 1); /* greedy: the largest of the others (2.0) */
    double probs[V], want[V];
    CU_ASSERT_EQUAL(lb_sample_probs(x, V, &o, NULL, probs), LB_OK);
    CU_ASSERT_EQUAL(probs[5], 0.0);
    CU_ASSERT_EQUAL(probs[1], 1.0);
    o.temperature = 1;
    o.top_k = 1;
    CU_ASSERT_EQUAL(lb_sample_token(x, V, &o, &r, NULL, &tok), LB_OK);
    CU_ASSERT_EQUAL(tok, 1);
    o.top_k = 0;
    o.top_p = 0.5;
    CU_ASSERT_EQUAL(lb_sample_probs(x, V, &o, NULL, probs), LB_OK);
    CU_ASSERT_EQUAL(probs[5], 0.0);
    o.top_p = 1;
    o.temperature = 1e6;
    int keep[V] = {1, 1, 1, 1, 1, 0, 1, 1};
    reference_probs(x, V, 1e6, keep, want);
    CU_ASSERT_EQUAL(lb_sample_probs(x, V, &o, NULL, probs), LB_OK);
    for (int i = 0; i < V; i++)
        CU_ASSERT_DOUBLE_EQUAL(probs[i], want[i], 1e-12);
    CU_ASSERT_DOUBLE_EQUAL(probs[0], 1.0 / 7.0, 1e-5);
    check_draws(x, V, &o, want, 77); /* no draw of unk, the rest uniform */
    plain.temperature = 1e6;
    lb_rng_seed(&r, 5);
    int64_t unk = 0;
    for (int d = 0; d < 20000; d++) {
        CU_ASSERT_EQUAL_FATAL(lb_sample_token(x, V, &plain, &r, NULL, &tok), LB_OK);
        unk += tok == 5;
    }
    CU_ASSERT_TRUE(unk > 1000); /* about 20000 * (1/8 + a little): unk is drawn without the mask */
    /* errors: an unk id outside [0, V), nothing but unk left */
    o.unk_id = V;
    CU_ASSERT_EQUAL(lb_sample_token(x, V, &o, &r, NULL, &tok), LB_ERR_VALUE);
    CU_ASSERT_TRUE(lb_test_error_has("unk_id = 8 is outside the vocabulary [0, 8)"));
    o.unk_id = -1;
    CU_ASSERT_EQUAL(lb_sampling_check(&o), LB_ERR_VALUE);
    CU_ASSERT_TRUE(lb_test_error_has("unk_id = -1"));
    float only_unk[3] = {-INFINITY, 3.0f, -INFINITY};
    o.unk_id = 1;
    CU_ASSERT_EQUAL(lb_sample_token(only_unk, 3, &o, &r, NULL, &tok), LB_ERR_NUMERIC);
    CU_ASSERT_TRUE(lb_test_error_has("but <unk>'s"));
    lb_sampling d = lb_sampling_defaults();
    CU_ASSERT_EQUAL(d.mask_unk, 0);
}

/* softmax(x / t) over [n] doubles, tokens with keep[i] only. */
static void reference_probs_d(const double *x, int64_t n, double t, const int *keep, double *out)
{
    double top = -INFINITY, sum = 0;
    for (int64_t i = 0; i < n; i++)
        if (keep[i] && x[i] / t > top)
            top = x[i] / t;
    for (int64_t i = 0; i < n; i++)
        sum += out[i] = keep[i] ? exp(x[i] / t - top) : 0;
    for (int64_t i = 0; i < n; i++)
        out[i] /= sum;
}

static void check_probs(const float *x, int64_t n, const lb_sampling *o, const double *want)
{
    double p[V];
    CU_ASSERT_EQUAL_FATAL(lb_sample_probs(x, n, o, NULL, p), LB_OK);
    for (int64_t i = 0; i < n; i++) {
        CU_ASSERT_DOUBLE_EQUAL(p[i], want[i], 1e-12);
        if (fabs(p[i] - want[i]) > 1e-12)
            fprintf(stderr, "\n  token %lld: %.17g, expected %.17g\n", (long long)i, p[i], want[i]);
    }
}

/* min-p: at T = 0.8 the probabilities of logits8 relative to the top token (id 1) are
 * exp((x_i - 2) / 0.8): id 6 0.687, 3 0.368, 4 0.197, 0 0.120, 7 0.082, 5 0.050, 2 0.023.
 * min_p 0.3 keeps {1, 6, 3}, 0.1 adds {4, 0}, 1 keeps the top only, 0 everything; after
 * top-k 4 (which drops 0), min_p 0.1 keeps {1, 6, 3, 4}. */
static void test_min_p(void)
{
    static const struct {
        double m;
        int64_t k;
        int keep[V];
    } cases[] = {
        {0.3, 0, {0, 1, 0, 1, 0, 0, 1, 0}},
        {0.1, 0, {1, 1, 0, 1, 1, 0, 1, 0}},
        {1.0, 0, {0, 1, 0, 0, 0, 0, 0, 0}},
        {0.0, 0, {1, 1, 1, 1, 1, 1, 1, 1}},
        {0.1, 4, {0, 1, 0, 1, 1, 0, 1, 0}},
        {0.06, 0, {1, 1, 0, 1, 1, 0, 1, 1}},
    };
    for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
        lb_sampling o = opts(0.8, cases[c].k, 1);
        o.min_p = cases[c].m;
        double e[V];
        reference_probs(logits8, V, 0.8, cases[c].keep, e);
        check_probs(logits8, V, &o, e);
        if (c < 2)
            check_draws(logits8, V, &o, e, 300 + (uint64_t)c);
    }
    /* min-p follows the temperature: at T = 4 min_p 0.3 keeps every token within 4 ln(1/0.3)
     * = 4.8 of the top, i.e. all of logits8 (range 3) */
    lb_sampling o = opts(4, 0, 1);
    o.min_p = 0.3;
    int all[V] = {1, 1, 1, 1, 1, 1, 1, 1};
    double e[V];
    reference_probs(logits8, V, 4, all, e);
    check_probs(logits8, V, &o, e);
    o.min_p = 1.5;
    CU_ASSERT_EQUAL(lb_sampling_check(&o), LB_ERR_VALUE);
    CU_ASSERT_TRUE(lb_test_error_has("min_p = 1.5"));
}

/* The tokens so far: id 1 three times, 5 once, 3 once (3 is only in the oldest part). */
static const int32_t recent[] = {3, 1, 5, 1, 1};

/* llama.cpp's penalties by hand: each distinct token of the last `last` of recent once:
 * x / r when x > 0, x · r otherwise, then x - a. */
static void penalised_by_hand(double r, double a, int64_t last, double *x)
{
    int seen[V] = {0};
    for (int i = 0; i < V; i++)
        x[i] = logits8[i];
    int64_t n = (int64_t)(sizeof recent / sizeof recent[0]), first = last < 0 || last >= n ? 0 : n - last;
    for (int64_t j = first; j < n; j++) {
        int id = recent[j];
        if (seen[id]++)
            continue;
        x[id] = x[id] > 0 ? x[id] / r : x[id] * r;
        x[id] -= a;
    }
}

static lb_sampling with_penalties(double t, double r, double a, int64_t last)
{
    lb_sampling o = opts(t, 0, 1);
    o.repeat_penalty = r;
    o.presence_penalty = a;
    o.repeat_last_n = last;
    o.recent = recent;
    o.n_recent = (int64_t)(sizeof recent / sizeof recent[0]);
    return o;
}

static void test_repeat_penalty(void)
{
    int all[V] = {1, 1, 1, 1, 1, 1, 1, 1};
    const double rs[] = {1.3, 2.0, 0.7};
    const int64_t lasts[] = {-1, 3, 64};
    for (int c = 0; c < 3; c++) {
        lb_sampling o = with_penalties(0.9, rs[c], 0, lasts[c]);
        double x[V], e[V];
        penalised_by_hand(rs[c], 0, lasts[c], x);
        reference_probs_d(x, V, 0.9, all, e);
        check_probs(logits8, V, &o, e);
        check_draws(logits8, V, &o, e, 400 + (uint64_t)c);
    }
    /* the values themselves: id 1 (2.0 > 0) divided, id 5 (-0.4) multiplied, id 3 (1.2)
     * only when the window reaches back to it; the count (three 1s) does not matter */
    lb_sampling o = with_penalties(1, 2.0, 0, 3);
    double z[V];
    CU_ASSERT_EQUAL(lb_sample_filter(logits8, V, &o, NULL, z), LB_OK);
    CU_ASSERT_DOUBLE_EQUAL(z[1], 1.0, 1e-12);
    CU_ASSERT_DOUBLE_EQUAL(z[5], (double)-0.4f * 2, 1e-12);
    CU_ASSERT_DOUBLE_EQUAL(z[3], (double)1.2f, 1e-12);
    o.repeat_last_n = -1;
    CU_ASSERT_EQUAL(lb_sample_filter(logits8, V, &o, NULL, z), LB_OK);
    CU_ASSERT_DOUBLE_EQUAL(z[3], (double)1.2f / 2, 1e-12);
    /* greedy reads the penalised logits: 2.0 / 2 = 1 falls below id 6's 1.7 */
    o.temperature = 0;
    lb_rng r;
    lb_rng_seed(&r, 1);
    int32_t tok = -1;
    CU_ASSERT_EQUAL(lb_sample_token(logits8, V, &o, &r, NULL, &tok), LB_OK);
    CU_ASSERT_EQUAL(tok, 6);
    /* off: 1, 0 (an initialiser's), or no window */
    double plain[V], p[V];
    lb_sampling off = opts(1, 0, 1);
    CU_ASSERT_EQUAL(lb_sample_probs(logits8, V, &off, NULL, plain), LB_OK);
    const double offs[] = {1.0, 0.0};
    for (int c = 0; c < 2; c++) {
        o = with_penalties(1, offs[c], 0, -1);
        CU_ASSERT_EQUAL(lb_sample_probs(logits8, V, &o, NULL, p), LB_OK);
        CU_ASSERT_EQUAL(memcmp(p, plain, sizeof p), 0);
    }
    o = with_penalties(1, 2.0, 0, 0);
    CU_ASSERT_EQUAL(lb_sample_probs(logits8, V, &o, NULL, p), LB_OK);
    CU_ASSERT_EQUAL(memcmp(p, plain, sizeof p), 0);
    /* errors: out of range, a recent id outside the vocabulary, a count without tokens */
    o = with_penalties(1, 1e4, 0, -1);
    CU_ASSERT_EQUAL(lb_sampling_check(&o), LB_ERR_VALUE);
    CU_ASSERT_TRUE(lb_test_error_has("repeat_penalty = 10000"));
    o = with_penalties(1, 1.1, 0, -2);
    CU_ASSERT_EQUAL(lb_sampling_check(&o), LB_ERR_VALUE);
    CU_ASSERT_TRUE(lb_test_error_has("repeat_last_n = -2"));
    o = with_penalties(1, 1.1, 0, -1);
    o.recent = NULL;
    CU_ASSERT_EQUAL(lb_sampling_check(&o), LB_ERR_VALUE);
    CU_ASSERT_TRUE(lb_test_error_has("n_recent = 5"));
    const int32_t bad[] = {2, 8};
    o = with_penalties(1, 1.1, 0, -1);
    o.recent = bad;
    o.n_recent = 2;
    CU_ASSERT_EQUAL(lb_sample_token(logits8, V, &o, &r, NULL, &tok), LB_ERR_VALUE);
    CU_ASSERT_TRUE(lb_test_error_has("recent token 1 is 8"));
}

static void test_presence_penalty(void)
{
    int all[V] = {1, 1, 1, 1, 1, 1, 1, 1};
    const double as[] = {0.5, 1.5, -0.8};
    for (int c = 0; c < 3; c++) {
        lb_sampling o = with_penalties(1.2, 0, as[c], 64);
        double x[V], e[V];
        penalised_by_hand(1, as[c], 64, x);
        reference_probs_d(x, V, 1.2, all, e);
        check_probs(logits8, V, &o, e);
        check_draws(logits8, V, &o, e, 500 + (uint64_t)c);
    }
    /* after the repeat penalty, as llama.cpp: id 1 = 2.0 / 1.25 - 0.5 = 1.1, id 5 =
     * -0.4 · 1.25 - 0.5 = -1.0, id 3 = 1.2 / 1.25 - 0.5 = 0.46; the rest unchanged */
    lb_sampling o = with_penalties(1, 1.25, 0.5, -1);
    double z[V], x[V], e[V];
    CU_ASSERT_EQUAL(lb_sample_filter(logits8, V, &o, NULL, z), LB_OK);
    CU_ASSERT_DOUBLE_EQUAL(z[1], 1.1, 1e-7);
    CU_ASSERT_DOUBLE_EQUAL(z[5], -1.0, 1e-7);
    CU_ASSERT_DOUBLE_EQUAL(z[3], 0.46, 1e-7);
    CU_ASSERT_DOUBLE_EQUAL(z[6], (double)1.7f, 0);
    penalised_by_hand(1.25, 0.5, -1, x);
    reference_probs_d(x, V, 1, all, e);
    check_probs(logits8, V, &o, e);
    /* top-k 2 after the penalties: 6 (1.7) and 1 (1.1) */
    o.top_k = 2;
    int keep2[V] = {0, 1, 0, 0, 0, 0, 1, 0};
    reference_probs_d(x, V, 1, keep2, e);
    check_probs(logits8, V, &o, e);
    o = with_penalties(1, 0, NAN, -1);
    CU_ASSERT_EQUAL(lb_sampling_check(&o), LB_ERR_VALUE);
    CU_ASSERT_TRUE(lb_test_error_has("presence_penalty = nan"));
    /* a masked token stays masked */
    float x2[V];
    memcpy(x2, logits8, sizeof x2);
    x2[1] = -INFINITY;
    o = with_penalties(1, 2, -3, -1);
    double p[V];
    CU_ASSERT_EQUAL(lb_sample_probs(x2, V, &o, NULL, p), LB_OK);
    CU_ASSERT_EQUAL(p[1], 0.0);
    lb_sampling d = lb_sampling_defaults();
    CU_ASSERT_TRUE(d.repeat_penalty == 1 && d.presence_penalty == 0 && d.min_p == 0 && d.repeat_last_n == 64);
}

int main(void)
{
    static const lb_test_case cases[] = {
        {"greedy", test_greedy},
        {"temperature", test_temperature},
        {"top_k", test_top_k},
        {"top_p", test_top_p},
        {"combined", test_combined},
        {"masked_input_never_drawn", test_masked_input_never_drawn},
        {"same_seed_same_tokens", test_same_seed_same_tokens},
        {"errors", test_errors},
        {"unk_never_drawn", test_unk_never_drawn},
        {"min_p", test_min_p},
        {"repeat_penalty", test_repeat_penalty},
        {"presence_penalty", test_presence_penalty},
        {NULL, NULL},
    };
    return lb_test_main("sample", cases);
}

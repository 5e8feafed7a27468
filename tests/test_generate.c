/* Generation (layers/generate.h): for every family, the tokens and logits of the cached
 * loop equal a full forward (lb_model_forward) re-run on the whole context window at
 * every token (nanoGPT's options too: no biases, tied embeddings), greedy and sampled,
 * for prompts of 1 token, a few tokens and more than
 * the window; the sliding-window policy (prefill counts, the window each prediction
 * reads); the same seed gives the same tokens at 1 and 2 threads; the callback can stop
 * the loop and may be NULL; errors. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "layers/generate.h"
#include "layers/model.h"
#include "tensor/threads.h"
#include "support.h"

enum { VOCAB = 11, MAX_TOKENS = 256 };

static lb_model_config lm_config(lb_model_kind kind, lb_pos_kind pos, lb_dtype dtype)
{
    return lb_test_small_model(kind, pos, dtype, VOCAB, VOCAB, 5, 12, 3 + (uint64_t)kind * 10 + (uint64_t)pos);
}

/* A random model whose logits differ clearly between tokens (weights U(-0.6, 0.6)). */
static lb_model *random_model(const lb_model_config *c)
{
    lb_model *m = lb_model_new(c);
    CU_ASSERT_PTR_NOT_NULL_FATAL(m);
    lb_test_randomize_params(lb_model_params(m), c->seed + 100, -0.6, 0.6);
    return m;
}

/* What the callback saw: every token and its logits. */
typedef struct seen {
    int64_t count, stop_at;
    int32_t tokens[MAX_TOKENS];
    float logits[MAX_TOKENS][VOCAB];
} seen;

static int record(void *user, int64_t index, int32_t token, const float *logits)
{
    seen *s = user;
    CU_ASSERT_EQUAL(index, s->count);
    if (s->count < MAX_TOKENS) {
        s->tokens[s->count] = token;
        memcpy(s->logits[s->count], logits, sizeof s->logits[0]);
    }
    s->count++;
    return s->stop_at > 0 && s->count == s->stop_at;
}

/* The full forward on ids [n] (a fresh graph): the logits at the last position. */
static void forward_last(lb_model *m, const int32_t *ids, int64_t n, double *logits)
{
    lb_graph *g = lb_graph_new();
    lb_graph_set_grad_enabled(g, 0);
    lb_model_input in = {1, n, ids, NULL, NULL};
    lb_var *y = lb_model_forward(g, m, &in, 0, NULL, NULL); /* [1, n, V] */
    if (!y)
        fprintf(stderr, "\n  forward failed: %s\n", lb_last_error());
    CU_ASSERT_PTR_NOT_NULL_FATAL(y);
    for (int64_t k = 0; k < VOCAB; k++)
        logits[k] = lb_tensor_flat(y->value, (n - 1) * VOCAB + k);
    lb_graph_free(g);
}

static int argmax_float(const double *x)
{
    int best = 0;
    for (int k = 1; k < VOCAB; k++)
        if ((float)x[k] > (float)x[best])
            best = k;
    return best;
}

/* Generates n tokens after prompt [p] and checks each against the full forward re-run
 * on the window the policy reads (the last W tokens, W = window or all): the logits
 * within tol, and for greedy decoding the token is the arg-max of the re-run's logits.
 * Returns how far the logits move over the tokens (the largest change of a logit from
 * the first token's): a random model's greedy output soon repeats one token, and the
 * logits must still follow the growing context. */
static double check_against_reforward(lb_model *m, const int32_t *prompt, int64_t p, int64_t n, int64_t context,
                                      int64_t keep, lb_sampling sampling, double tol, lb_generate_result *res)
{
    lb_generate_options o = lb_generate_defaults();
    o.max_new_tokens = n;
    o.sampling = sampling;
    o.context = context;
    o.slide_keep = keep;
    o.on_token = record;
    seen *s = calloc(1, sizeof *s);
    o.user = s;
    o.on_token = record;
    lb_rng rng;
    lb_rng_seed(&rng, 42);
    int32_t out[MAX_TOKENS];
    lb_status st = lb_generate(m, prompt, p, &o, &rng, out, res);
    if (st != LB_OK)
        fprintf(stderr, "\n  generate failed: %s\n", lb_last_error());
    CU_ASSERT_EQUAL_FATAL(st, LB_OK);
    CU_ASSERT_EQUAL(res->generated, n);
    CU_ASSERT_EQUAL(s->count, n);
    /* the window the policy reads: the last W tokens; a slide re-reads the last K */
    int64_t w = lb_generate_context(m, context), kept = keep > 0 ? keep : w;
    int32_t ctx[2 * MAX_TOKENS];
    memcpy(ctx, prompt, (size_t)p * sizeof *ctx);
    int64_t len = p, token_bad = 0, logit_bad = 0, start = w > 0 && p > w ? p - w : 0, events = p - start;
    double worst = 0, moved = 0;
    for (int64_t i = 0; i < n; i++) {
        double ref[VOCAB];
        forward_last(m, ctx + start, len - start, ref);
        for (int k = 0; k < VOCAB; k++) {
            double d = fabs((double)s->logits[i][k] - ref[k]);
            if (d > worst)
                worst = d;
            logit_bad += !(d <= tol * (1 + fabs(ref[k])));
        }
        if (sampling.temperature == 0)
            token_bad += out[i] != argmax_float(ref);
        CU_ASSERT_EQUAL(out[i], s->tokens[i]);
        for (int k = 0; k < VOCAB; k++)
            if (fabs(s->logits[i][k] - s->logits[0][k]) > moved)
                moved = fabs(s->logits[i][k] - s->logits[0][k]);
        ctx[len++] = out[i];
        if (w > 0 && events + 1 > w) { /* out[i] is fed: a slide, or one more event */
            start = len - kept;
            events = kept;
        } else {
            events++;
        }
    }
    if (token_bad || logit_bad)
        fprintf(stderr, "\n  %s pos %s, prompt %lld, window %lld: %lld tokens and %lld logits differ (worst %.3g)\n",
                lb_model_kind_name(lb_model_get_config(m)->kind), lb_pos_kind_name(lb_model_get_config(m)->pos),
                (long long)p, (long long)w, (long long)token_bad, (long long)logit_bad, worst);
    CU_ASSERT_EQUAL(token_bad, 0);
    CU_ASSERT_EQUAL(logit_bad, 0);
    free(s);
    return moved;
}

static const struct {
    lb_model_kind kind;
    lb_pos_kind pos;
    int nanogpt; /* nanoGPT's model options: no biases, tied embeddings, GPT-2 initialisation */
    int block;   /* 1: Llama's block (rmsnorm, swiglu, no biases, tied); 2: post-norm rmsnorm, geglu */
} families[] = {
    {LB_MODEL_TRANSFORMER, LB_POS_LEARNED, 0, 0}, {LB_MODEL_TRANSFORMER, LB_POS_LEARNED, 1, 0},
    {LB_MODEL_TRANSFORMER, LB_POS_ROTARY, 0, 0},  {LB_MODEL_TRANSFORMER, LB_POS_SINUSOIDAL, 0, 0},
    {LB_MODEL_LOCAL, LB_POS_LEARNED, 0, 0},       {LB_MODEL_LOCAL, LB_POS_NONE, 0, 0},
    {LB_MODEL_LSTM, LB_POS_NONE, 0, 0},           {LB_MODEL_CONV, LB_POS_NONE, 0, 0},
    {LB_MODEL_LINEAR, LB_POS_NONE, 0, 0},
    {LB_MODEL_TRANSFORMER, LB_POS_ROTARY, 0, 1},  {LB_MODEL_LOCAL, LB_POS_ROTARY, 0, 2},
    {LB_MODEL_TRANSFORMER, LB_POS_LEARNED, 0, 2},
};
enum { N_FAMILIES = sizeof families / sizeof families[0] };

static lb_model_config family_config(int f, lb_dtype dtype)
{
    lb_model_config c = lm_config(families[f].kind, families[f].pos, dtype);
    if (families[f].nanogpt) {
        c.bias = 0;
        c.tie_embeddings = 1;
        c.init = LB_INIT_GPT2;
    }
    if (families[f].block == 1) {
        c.norm = LB_NORM_RMSNORM;
        c.ffn = LB_FFN_SWIGLU;
        c.bias = 0;
        c.tie_embeddings = 1;
    } else if (families[f].block == 2) {
        c.norm = LB_NORM_RMSNORM;
        c.norm_position = LB_NORM_POST;
        c.ffn = LB_FFN_GEGLU;
    }
    return c;
}

static int32_t prompt_tokens[20] = {3, 1, 4, 1, 5, 9, 2, 6, 5, 3, 5, 8, 9, 7, 9, 3, 2, 3, 8, 4};

/* Greedy, float64: every token is the re-run's arg-max, the logits agree to the float32 they are handed over in;
 * prompts of 1, 5 and 15 tokens (15 > max_seq_len = 12 of the learned positions), 30
 * new tokens (the learned-position models slide their window); the non-learned models
 * also with a window of 6 (context = 6). */
static void test_greedy_equals_reforward(void)
{
    const int64_t prompts[] = {1, 5, 15};
    lb_sampling greedy = {0, 0, 1, 0, 0};
    for (int f = 0; f < N_FAMILIES; f++) {
        lb_model_config c = family_config(f, LB_FLOAT64);
        lb_model *m = random_model(&c);
        for (int j = 0; j < 3; j++) {
            lb_generate_result res;
            double moved = check_against_reforward(m, prompt_tokens, prompts[j], 30, 0, 0, greedy, 1e-6, &res);
            /* attention without positions on one repeated token sees the same at every step */
            int same_input = prompts[j] == 1 && c.kind == LB_MODEL_LOCAL && c.pos == LB_POS_NONE;
            CU_ASSERT_TRUE(same_input ? moved == 0 : moved > 1e-2);
            if (c.pos != LB_POS_LEARNED) { /* no window: one prefill, then one event per token */
                CU_ASSERT_EQUAL(res.context, 0);
                CU_ASSERT_EQUAL(res.prefills, 1);
                CU_ASSERT_EQUAL(res.prefill_events, prompts[j]);
                CU_ASSERT_EQUAL(res.steps, 29);
            } else {
                CU_ASSERT_EQUAL(res.context, 12);
            }
            if (c.pos != LB_POS_LEARNED) {
                moved = check_against_reforward(m, prompt_tokens, prompts[j], 30, 6, 0, greedy, 1e-6, &res);
                CU_ASSERT_TRUE(same_input ? moved == 0 : moved > 1e-2);
                CU_ASSERT_EQUAL(res.context, 6);
            }
            /* a window that jumps: slides re-read 5 tokens (of 12, or of 6 without learned positions) */
            moved = check_against_reforward(m, prompt_tokens, prompts[j], 30, c.pos == LB_POS_LEARNED ? 0 : 6, 5,
                                            greedy, 1e-6, &res);
            CU_ASSERT_TRUE(same_input ? moved == 0 : moved > 1e-2);
        }
        lb_model_free(m);
    }
}

/* Sampled (temperature, top-k, top-p), float64: the logits each token is drawn from
 * equal the re-run's on the same context (to float32 rounding). */
static void test_sampled_logits_equal_reforward(void)
{
    lb_sampling s = {0.9, 6, 0.95, 0, 0};
    for (int f = 0; f < N_FAMILIES; f++) {
        lb_model_config c = family_config(f, LB_FLOAT64);
        lb_model *m = random_model(&c);
        lb_generate_result res;
        double moved = check_against_reforward(m, prompt_tokens, 4, 40, 0, 0, s, 1e-6, &res);
        CU_ASSERT_TRUE(moved > 1e-1);
        lb_model_free(m);
    }
}

/* float32: the logits agree to 1e-4 (the event step's products have other shapes than
 * the forward's, so the last bits may differ); the greedy tokens agree too. */
static void test_float32_equals_reforward(void)
{
    lb_sampling greedy = {0, 0, 1, 0, 0};
    for (int f = 0; f < N_FAMILIES; f++) {
        lb_model_config c = family_config(f, LB_FLOAT32);
        lb_model *m = random_model(&c);
        lb_generate_result res;
        check_against_reforward(m, prompt_tokens, 7, 25, 0, 0, greedy, 1e-4, &res);
        lb_model_free(m);
    }
}

/* The window policy: with W = 12 learned positions and a prompt of P <= W tokens, the
 * first W - P tokens are fed one event each; every later one resets the state and
 * prefills the last W tokens. A prompt longer than W is read from its last W tokens. */
static void test_window_slides(void)
{
    lb_model_config c = lm_config(LB_MODEL_TRANSFORMER, LB_POS_LEARNED, LB_FLOAT64);
    lb_model *m = random_model(&c);
    lb_generate_options o = lb_generate_defaults();
    o.max_new_tokens = 30;
    o.sampling.temperature = 0;
    lb_rng rng;
    lb_rng_seed(&rng, 1);
    lb_generate_result r;
    CU_ASSERT_EQUAL_FATAL(lb_generate(m, prompt_tokens, 5, &o, &rng, NULL, &r), LB_OK);
    CU_ASSERT_EQUAL(r.generated, 30);
    CU_ASSERT_EQUAL(r.context, 12);
    CU_ASSERT_EQUAL(r.steps, 7);                      /* events 6 .. 12 */
    CU_ASSERT_EQUAL(r.prefills, 1 + 22);              /* the other 29 - 7 tokens slide */
    CU_ASSERT_EQUAL(r.prefill_events, 5 + 22 * 12);
    /* a prompt of 15 > W: its last 12 tokens are prefilled; every token fed slides */
    CU_ASSERT_EQUAL_FATAL(lb_generate(m, prompt_tokens, 15, &o, &rng, NULL, &r), LB_OK);
    CU_ASSERT_EQUAL(r.steps, 0);
    CU_ASSERT_EQUAL(r.prefills, 30);
    CU_ASSERT_EQUAL(r.prefill_events, 30 * 12);
    /* the last 12 tokens of a 15-token prompt give what those 12 alone give */
    int32_t a[30], b[30];
    CU_ASSERT_EQUAL_FATAL(lb_generate(m, prompt_tokens, 15, &o, &rng, a, NULL), LB_OK);
    CU_ASSERT_EQUAL_FATAL(lb_generate(m, prompt_tokens + 3, 12, &o, &rng, b, NULL), LB_OK);
    CU_ASSERT_EQUAL(memcmp(a, b, sizeof a), 0);
    /* a window below max_seq_len is the caller's; above it, max_seq_len */
    CU_ASSERT_EQUAL(lb_generate_context(m, 5), 5);
    CU_ASSERT_EQUAL(lb_generate_context(m, 0), 12);
    CU_ASSERT_EQUAL(lb_generate_context(m, 100), 12);
    o.context = 4;
    CU_ASSERT_EQUAL_FATAL(lb_generate(m, prompt_tokens, 2, &o, &rng, NULL, &r), LB_OK);
    CU_ASSERT_EQUAL(r.context, 4);
    CU_ASSERT_EQUAL(r.steps, 2);
    CU_ASSERT_EQUAL(r.prefills, 1 + 27);
    /* slide_keep 6 of W = 12, prompt 5: 7 events, then cycles of a 6-token prefill and 6
     * events (7 tokens fed each): 22 more feeds = 3 cycles and one more slide */
    o.context = 0;
    o.slide_keep = 6;
    CU_ASSERT_EQUAL_FATAL(lb_generate(m, prompt_tokens, 5, &o, &rng, NULL, &r), LB_OK);
    CU_ASSERT_EQUAL(r.steps, 7 + 3 * 6);
    CU_ASSERT_EQUAL(r.prefills, 1 + 4);
    CU_ASSERT_EQUAL(r.prefill_events, 5 + 4 * 6);
    o.slide_keep = 13;
    CU_ASSERT_EQUAL(lb_generate(m, prompt_tokens, 5, &o, &rng, NULL, &r), LB_ERR_VALUE);
    CU_ASSERT_TRUE(lb_test_error_has("slide_keep = 13 must be in [0, W = 12]"));
    o.slide_keep = 0;
    lb_model_free(m);
    /* the LSTM has no limit of its own */
    lb_model_config cl = lm_config(LB_MODEL_LSTM, LB_POS_NONE, LB_FLOAT64);
    lb_model *ml = random_model(&cl);
    CU_ASSERT_EQUAL(lb_generate_context(ml, 0), 0);
    CU_ASSERT_EQUAL(lb_generate_context(ml, 7), 7);
    lb_model_free(ml);
}

/* The same seed gives the same tokens and the same logits (bit for bit) at 1 and 2
 * threads, for a float32 transformer wide enough for the products to be split, and for
 * the LSTM; different seeds give different text. */
static void run_threads(lb_model *m, int threads, uint64_t seed, seen *s)
{
    lb_set_num_threads(threads);
    lb_generate_options o = lb_generate_defaults();
    o.max_new_tokens = 120;
    o.sampling = (lb_sampling){1.0, 0, 1.0, 0, 0};
    o.on_token = record;
    memset(s, 0, sizeof *s);
    o.user = s;
    lb_rng rng;
    lb_rng_seed(&rng, seed);
    int32_t prompt[64];
    for (int i = 0; i < 64; i++)
        prompt[i] = prompt_tokens[i % 20];
    CU_ASSERT_EQUAL(lb_generate(m, prompt, 64, &o, &rng, NULL, NULL), LB_OK);
    CU_ASSERT_EQUAL(s->count, 120);
    lb_set_num_threads(0);
}

static void test_same_seed_any_threads(void)
{
    for (int f = 0; f < 2; f++) {
        lb_model_config c = lm_config(f ? LB_MODEL_LSTM : LB_MODEL_TRANSFORMER, f ? LB_POS_NONE : LB_POS_ROTARY,
                                      LB_FLOAT32);
        c.d_model = 128;
        c.n_heads = 4;
        c.d_ff = 512;
        c.hidden_size = 128;
        lb_model *m = lb_model_new(&c);
        CU_ASSERT_PTR_NOT_NULL_FATAL(m);
        seen *one = malloc(sizeof *one), *two = malloc(sizeof *two), *other = malloc(sizeof *other);
        run_threads(m, 1, 1337, one);
        run_threads(m, 2, 1337, two);
        run_threads(m, 2, 1338, other);
        CU_ASSERT_EQUAL(memcmp(one->tokens, two->tokens, sizeof one->tokens), 0);
        CU_ASSERT_EQUAL(memcmp(one->logits, two->logits, 120 * sizeof one->logits[0]), 0);
        CU_ASSERT_NOT_EQUAL(memcmp(one->tokens, other->tokens, 120 * sizeof one->tokens[0]), 0);
        free(one);
        free(two);
        free(other);
        lb_model_free(m);
    }
}

/* The callback ends the loop when it returns non-zero; without a callback (timing) the
 * tokens are the same. */
static void test_callback(void)
{
    lb_model_config c = lm_config(LB_MODEL_CONV, LB_POS_NONE, LB_FLOAT32);
    lb_model *m = random_model(&c);
    lb_generate_options o = lb_generate_defaults();
    o.max_new_tokens = 20;
    o.sampling = (lb_sampling){0.8, 0, 1, 0, 0};
    seen *s = calloc(1, sizeof *s);
    s->stop_at = 4;
    o.on_token = record;
    o.user = s;
    lb_rng rng;
    lb_rng_seed(&rng, 5);
    int32_t out[20] = {0}, quiet[20];
    lb_generate_result r;
    CU_ASSERT_EQUAL(lb_generate(m, prompt_tokens, 3, &o, &rng, out, &r), LB_OK);
    CU_ASSERT_EQUAL(r.generated, 4);
    CU_ASSERT_EQUAL(r.stopped, 1);
    CU_ASSERT_EQUAL(s->count, 4);
    CU_ASSERT_EQUAL(r.steps, 3); /* the 4th token is not fed */
    o.on_token = NULL;
    lb_rng_seed(&rng, 5);
    CU_ASSERT_EQUAL(lb_generate(m, prompt_tokens, 3, &o, &rng, quiet, &r), LB_OK);
    CU_ASSERT_EQUAL(r.generated, 20);
    CU_ASSERT_EQUAL(r.stopped, 0);
    CU_ASSERT_EQUAL(memcmp(out, quiet, 4 * sizeof *out), 0);
    CU_ASSERT_EQUAL(memcmp(s->tokens, quiet, 4 * sizeof *out), 0);
    /* one uniform draw per sampled token: the rng moved 20 draws */
    lb_rng expect;
    lb_rng_seed(&expect, 5);
    for (int i = 0; i < 20; i++)
        lb_rng_uniform(&expect);
    CU_ASSERT_EQUAL(memcmp(&expect, &rng, sizeof rng), 0);
    /* 0 tokens: nothing to do */
    o.max_new_tokens = 0;
    CU_ASSERT_EQUAL(lb_generate(m, prompt_tokens, 3, &o, &rng, NULL, &r), LB_OK);
    CU_ASSERT_EQUAL(r.generated, 0);
    CU_ASSERT_EQUAL(r.prefills, 0);
    free(s);
    lb_model_free(m);
}

static void test_errors(void)
{
    lb_model_config c = lm_config(LB_MODEL_LSTM, LB_POS_NONE, LB_FLOAT32);
    lb_model *m = random_model(&c);
    lb_generate_options o = lb_generate_defaults();
    o.max_new_tokens = 5;
    lb_rng rng;
    lb_rng_seed(&rng, 1);
    int32_t out[5] = {-1, -1, -1, -1, -1};
    lb_generate_result r;
    CU_ASSERT_EQUAL(lb_generate(NULL, prompt_tokens, 3, &o, &rng, out, &r), LB_ERR_VALUE);
    CU_ASSERT_TRUE(lb_test_error_has("m is NULL"));
    CU_ASSERT_EQUAL(lb_generate(m, NULL, 3, &o, &rng, out, &r), LB_ERR_VALUE);
    CU_ASSERT_EQUAL(lb_generate(m, prompt_tokens, 3, NULL, &rng, out, &r), LB_ERR_VALUE);
    CU_ASSERT_EQUAL(lb_generate(m, prompt_tokens, 3, &o, NULL, out, &r), LB_ERR_VALUE);
    CU_ASSERT_TRUE(lb_test_error_has("rng is NULL"));
    CU_ASSERT_EQUAL(lb_generate(m, prompt_tokens, 0, &o, &rng, out, &r), LB_ERR_VALUE);
    CU_ASSERT_TRUE(lb_test_error_has("the prompt has 0 tokens"));
    int32_t bad[4] = {1, 2, VOCAB, 0};
    CU_ASSERT_EQUAL(lb_generate(m, bad, 4, &o, &rng, out, &r), LB_ERR_VALUE);
    CU_ASSERT_TRUE(lb_test_error_has("prompt token 11 at position 2 is outside [0, vocab_size = 11)"));
    bad[2] = -3;
    CU_ASSERT_EQUAL(lb_generate(m, bad, 4, &o, &rng, out, &r), LB_ERR_VALUE);
    CU_ASSERT_TRUE(lb_test_error_has("prompt token -3 at position 2"));
    o.max_new_tokens = -1;
    CU_ASSERT_EQUAL(lb_generate(m, prompt_tokens, 3, &o, &rng, out, &r), LB_ERR_VALUE);
    CU_ASSERT_TRUE(lb_test_error_has("max_new_tokens = -1"));
    o.max_new_tokens = 5;
    o.context = -2;
    CU_ASSERT_EQUAL(lb_generate(m, prompt_tokens, 3, &o, &rng, out, &r), LB_ERR_VALUE);
    CU_ASSERT_TRUE(lb_test_error_has("context = -2"));
    o.context = 0;
    o.sampling.top_p = 2;
    CU_ASSERT_EQUAL(lb_generate(m, prompt_tokens, 3, &o, &rng, out, &r), LB_ERR_VALUE);
    CU_ASSERT_TRUE(lb_test_error_has("top_p = 2"));
    CU_ASSERT_EQUAL(r.generated, 0);
    for (int i = 0; i < 5; i++)
        CU_ASSERT_EQUAL(out[i], -1);
    lb_model_free(m);
    /* models that are not token language models */
    lb_model_config k = lm_config(LB_MODEL_TRANSFORMER, LB_POS_NONE, LB_FLOAT32);
    k.num_classes = 3;
    lb_model *mk = lb_model_new(&k);
    o.sampling = lb_sampling_defaults();
    CU_ASSERT_EQUAL(lb_generate(mk, prompt_tokens, 3, &o, &rng, out, &r), LB_ERR_VALUE);
    CU_ASSERT_TRUE(lb_test_error_has("not a token language model") && lb_test_error_has("num_classes = 3"));
    lb_model_free(mk);
    k.num_classes = VOCAB;
    k.head = LB_HEAD_LAST;
    mk = lb_model_new(&k);
    CU_ASSERT_EQUAL(lb_generate_check_model(mk), LB_ERR_VALUE);
    CU_ASSERT_TRUE(lb_test_error_has("last position only"));
    lb_model_free(mk);
    k.head = LB_HEAD_EVERY;
    k.vocab_size = 0;
    k.input_features = 3;
    mk = lb_model_new(&k);
    CU_ASSERT_EQUAL(lb_generate_check_model(mk), LB_ERR_VALUE);
    CU_ASSERT_TRUE(lb_test_error_has("real-valued features"));
    lb_model_free(mk);
    CU_ASSERT_EQUAL(lb_generate_check_model(NULL), LB_ERR_VALUE);
    CU_ASSERT_EQUAL(lb_generate_context(NULL, 0), -1);
}

int main(void)
{
    static const lb_test_case cases[] = {
        {"greedy_equals_reforward", test_greedy_equals_reforward},
        {"sampled_logits_equal_reforward", test_sampled_logits_equal_reforward},
        {"float32_equals_reforward", test_float32_equals_reforward},
        {"window_slides", test_window_slides},
        {"same_seed_any_threads", test_same_seed_any_threads},
        {"callback", test_callback},
        {"errors", test_errors},
        {NULL, NULL},
    };
    return lb_test_main("generate", cases);
}

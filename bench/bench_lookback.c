/* lookback's side of the benchmark suite: one workload per process.
 *
 *   bench_lookback WORKLOAD [--threads N] [--warmup N] [--reps N] [--quick] [--budget S]
 *
 * --threads sets lb_set_num_threads (OpenBLAS stays single-threaded under lookback,
 * tensor/blas.h; the SGEMM reference runs OpenBLAS's own N threads); --budget caps the timed repetitions of
 * a slow workload (see bench_time in harness.h). Like the lookback command, the
 * program leaves the C allocator at its defaults: each graph's buffer pool keeps the
 * step's memory (tensor/pool.h). bench/torch_reference.py gives PyTorch glibc
 * settings that keep freed memory (unless --default-malloc).
 *
 * Workloads (bench/torch_reference.py runs the same ones in PyTorch; bench/run runs
 * both and prints the table). Named dims: B batch, T seq_len, H heads, d head width.
 *
 *   W1a   single-head causal self-attention (the source article's layer,
 *         lb_self_attention: X W_Q, X W_K, X W_V, softmax(Q Kᵀ/sqrt(d_k) + causal) V),
 *         forward + backward to w_q, w_k, w_v from a random grad_output,
 *         B=8, T=512, d_model = d_k = d_v = 64
 *   W1b   the same at B=4, T=2048
 *   W2    one training step (forward, cross-entropy, backward, AdamW step) of the
 *         model API's 2-layer pre-norm causal transformer: vocab 32, d_model 64,
 *         4 heads, d_ff 256, GELU, final LayerNorm, linear head on every position
 *         (32 classes), no positional encoding; B=16, T=1024
 *   W3    one training step of a 1-layer LSTM (input 64, hidden 128), MSE loss on
 *         every hidden state, AdamW; B=16, T=1024
 *   W4    one training step of W1's layer at B=1, T=16384, d=64 (MSE loss, AdamW):
 *         what matters is the peak resident memory of the process
 *   W6    the same training step at B=1, T=131072, d=64: peak memory (target
 *         <= 1 GiB) and GFLOP/s of the attention (7·T²·d, K1's count, plus the
 *         projections' 3 · 3 · 2·T·d²), one timed run without warm-up
 *   EVAL  per family (transformer, local, lstm, conv; lb_model_config_default sizes,
 *         16 token ids, 2 classes, head on the last position): evaluation (forward
 *         with gradients off) of B=8 sequences of T=7000 events, in sequences/s and
 *         tokens/s, next to the training step's tokens/s (forward, cross-entropy,
 *         backward, AdamW) at B=32, T=256, the shape the demo trains on; one JSON
 *         line per family
 *   LOCAL one training step (cross-entropy, AdamW) of the study's spike16 recipe at
 *         B=32, T=256 (d_model 64, 4 heads, d_ff 128, no positions, head on the
 *         last position): local attention, 2 blocks, window 16, against full causal
 *         attention with 2 blocks and with 1 block, in steps/s; largest thread
 *         count only
 *   LIN   causal linear attention (lb_linear_attention) forward + backward on q, k, v
 *         [B=1, H=4, T=4096, d=64], against the chunked form in PyTorch
 *   K1    causal attention kernel forward + backward on q, k, v [B=1, H=4, T=4096,
 *         d=64]: lb_attention_fused when autograd/ops.h has it, lb_attention
 *         otherwise; next to OpenBLAS sgemm 1024³ measured in the same process just
 *         before and just after (best of 15 each, the better of the two).
 *         FLOPs per (B, H): forward 2·T²·d (the causal half of Q Kᵀ, T²·d, plus the
 *         causal half of P V, T²·d), backward 2.5× forward, so 7·T²·d per step (the
 *         same count whatever the implementation computes).
 *   W2's FLOPs (printed as "gflop", with "gflops" = gflop / median): matrix products
 *         2·m·n·k, forward + backward = 3× forward; per layer 8·N·d² (q, k, v, output
 *         projections) + 4·N·d·d_ff (FFN), head 2·N·d·V, N = B·T tokens; attention
 *         7·B·T²·d per layer (K1's causal count, all heads). Elementwise work,
 *         LayerNorm, softmax/exp and AdamW are not counted. = 24.9 GFLOP per step.
 *   SGEMM OpenBLAS cblas_sgemm 1024×1024×1024 (row-major, no transposes): GFLOP/s
 *         = 2·n³ / time, best (min) and median of the repetitions.
 *   INFO  the machine and library configuration, one JSON line.
 */
#define _POSIX_C_SOURCE 200809L
#include <cblas.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "autograd/autograd.h"
#include "autograd/ops.h"
#include "cli/preinit.h"
#include "harness.h"
#include "layers/attention.h"
#include "layers/lstm.h"
#include "layers/family.h"
#include "layers/model.h"
#include "layers/params.h"
#include "layers/stream.h"
#include "optim/clip.h"
#include "optim/optim.h"
#include "tensor/blas.h"
#include "tensor/pool.h"
#include "tensor/rng.h"
#include "tensor/tensor.h"
#include "tensor/threads.h"
#include "train/trainer.h"
#if defined(__has_include) && __has_include("kernels/attention.h")
#include "kernels/attention.h"
#define LB_BENCH_ATTENTION_ISA() lb_k_attention_isa()
#else
#define LB_BENCH_ATTENTION_ISA() "unknown"
#endif

#if defined(__has_include) && __has_include("tensor/isa.h")
#include "tensor/isa.h"
#define LB_BENCH_ISA_CHECK() lb_isa_env_check()
#else
#define LB_BENCH_ISA_CHECK() LB_OK
#endif

#define FAIL(what)                                                                                                 \
    do {                                                                                                           \
        fprintf(stderr, "bench_lookback: %s failed: %s\n", what, lb_last_error());                                 \
        return 1;                                                                                                  \
    } while (0)

static lb_tensor *normal_tensor(lb_rng *rng, int ndim, const int64_t *shape, double std)
{
    lb_tensor *t = lb_tensor_zeros(LB_FLOAT32, ndim, shape);
    if (t)
        lb_rng_fill_normal(rng, t, 0.0, std);
    return t;
}

/* A graph leaf sharing x's storage (no copy per step). */
static lb_var *leaf(lb_graph *g, const lb_tensor *x, int requires_grad)
{
    return lb_input(g, lb_tensor_view(x), requires_grad);
}

static lb_optim *adamw_over(lb_params *ps)
{
    lb_optim_config oc = lb_optim_defaults(LB_OPTIM_ADAMW); /* lr 1e-3, wd 1e-2, as torch.optim.AdamW */
    return lb_optim_new(&oc, ps->items, ps->count);
}

/* ---------------------------------------------------------------- W1, W4 ---- */

typedef struct attn_ctx {
    lb_graph *g;
    lb_params ps;
    lb_self_attention layer;
    lb_tensor *x, *grad_out, *target; /* target: W4's MSE target; grad_out: W1's */
    lb_optim *opt;                    /* W4 only */
} attn_ctx;

static int attn_setup(attn_ctx *c, int64_t b, int64_t t, int64_t d, int training_step)
{
    memset(c, 0, sizeof *c);
    lb_rng rng;
    lb_rng_seed(&rng, 1234);
    lb_params_init(&c->ps);
    if (lb_self_attention_init(&c->layer, &c->ps, "attn", d, d, d, LB_FLOAT32, &rng) != LB_OK)
        FAIL("self-attention init");
    int64_t s[3] = {b, t, d};
    c->x = normal_tensor(&rng, 3, s, 1.0);
    if (training_step) {
        c->target = normal_tensor(&rng, 3, s, 1.0);
        c->opt = adamw_over(&c->ps);
    } else {
        c->grad_out = normal_tensor(&rng, 3, s, 1.0);
    }
    c->g = lb_graph_new();
    if (!c->x || !c->g || (training_step ? !c->target || !c->opt : !c->grad_out))
        FAIL("W1/W4 setup");
    return 0;
}

/* W1: forward + backward (gradients of w_q, w_k, w_v). */
static int attn_fwd_bwd(void *ctx)
{
    attn_ctx *c = ctx;
    lb_attn_mask mask = {0};
    mask.causal = 1;
    lb_var *out = lb_self_attention_forward(c->g, &c->layer, leaf(c->g, c->x, 0), &mask, NULL, NULL);
    if (!out)
        FAIL("W1 forward");
    if (lb_backward(c->g, out, c->grad_out) != LB_OK)
        FAIL("W1 backward");
    lb_params_zero_grad(&c->ps);
    lb_graph_reset(c->g);
    return 0;
}

/* W4: a training step (MSE to a random target, AdamW). */
static int attn_train_step(void *ctx)
{
    attn_ctx *c = ctx;
    lb_attn_mask mask = {0};
    mask.causal = 1;
    lb_var *out = lb_self_attention_forward(c->g, &c->layer, leaf(c->g, c->x, 0), &mask, NULL, NULL);
    lb_var *loss = lb_mse(c->g, out, leaf(c->g, c->target, 0));
    if (!loss)
        FAIL("W4 forward");
    if (lb_backward(c->g, loss, NULL) != LB_OK)
        FAIL("W4 backward");
    if (lb_optim_step(c->opt) != LB_OK)
        FAIL("W4 AdamW step");
    lb_optim_zero_grad(c->opt);
    lb_graph_reset(c->g);
    return 0;
}

static void attn_free(attn_ctx *c)
{
    lb_graph_free(c->g);
    lb_optim_free(c->opt);
    lb_params_free(&c->ps);
    lb_tensor_free(c->x);
    lb_tensor_free(c->grad_out);
    lb_tensor_free(c->target);
}

/* ---------------------------------------------------------------------- W2 ---- */

typedef struct model_ctx {
    lb_graph *g;
    lb_model *model;
    lb_optim *opt;
    lb_model_input in;
    int32_t *tokens, *targets;
} model_ctx;

static int transformer_step(void *ctx)
{
    model_ctx *c = ctx;
    lb_var *logits = lb_model_forward(c->g, c->model, &c->in, 1, NULL, NULL); /* [B, T, C] */
    lb_var *loss = lb_cross_entropy(c->g, logits, c->targets, -100);
    if (!loss)
        FAIL("W2 forward");
    if (lb_backward(c->g, loss, NULL) != LB_OK)
        FAIL("W2 backward");
    if (lb_optim_step(c->opt) != LB_OK)
        FAIL("W2 AdamW step");
    lb_optim_zero_grad(c->opt);
    lb_graph_reset(c->g);
    return 0;
}

/* FLOPs of one W2 training step (see the top of the file). */
static double w2_flop(int64_t b, int64_t t, int layers, int64_t d, int64_t d_ff, int64_t v)
{
    double n = (double)(b * t), dd = (double)d;
    double gemm_fwd = layers * (8.0 * n * dd * dd + 4.0 * n * dd * (double)d_ff) + 2.0 * n * dd * (double)v;
    double attention = layers * 7.0 * (double)b * (double)t * (double)t * dd;
    return 3.0 * gemm_fwd + attention;
}

static int run_w2(const bench_opts *o)
{
    const int64_t B = 16, T = 1024, V = 32;
    model_ctx c = {0};
    lb_model_config cfg;
    lb_model_config_default(LB_MODEL_TRANSFORMER, &cfg);
    cfg.vocab_size = V;
    cfg.num_classes = V;
    cfg.head = LB_HEAD_EVERY;
    cfg.max_seq_len = T;
    cfg.n_layers = 2;
    cfg.d_model = 64;
    cfg.n_heads = 4;
    cfg.d_ff = 256;
    cfg.pos = LB_POS_NONE;
    cfg.causal = 1;
    cfg.dropout = 0.0;
    if (!(c.model = lb_model_new(&cfg)))
        FAIL("W2 model");
    c.tokens = malloc((size_t)(B * T) * sizeof *c.tokens);
    c.targets = malloc((size_t)(B * T) * sizeof *c.targets);
    if (!c.tokens || !c.targets)
        FAIL("W2 token buffers");
    lb_rng rng;
    lb_rng_seed(&rng, 99);
    for (int64_t i = 0; i < B * T; i++) {
        c.tokens[i] = (int32_t)lb_rng_below(&rng, (uint64_t)V);
        c.targets[i] = (int32_t)lb_rng_below(&rng, (uint64_t)V);
    }
    c.in = (lb_model_input){B, T, c.tokens, NULL, NULL};
    c.opt = adamw_over(lb_model_params(c.model));
    c.g = lb_graph_new();
    if (!c.opt || !c.g)
        FAIL("W2 setup");
    double base = bench_current_rss_mib();
    bench_result r;
    if (bench_time(transformer_step, &c, bench_warmup(o, 1), bench_reps(o, 5), o->budget_s, &r) != 0)
        return 1;
    char extra[256];
    double gflop = w2_flop(B, T, cfg.n_layers, cfg.d_model, cfg.d_ff, V) / 1e9;
    snprintf(extra, sizeof extra,
             "\"shape\":\"B=16 T=1024 L=2 d_model=64 H=4 d_ff=256\",\"params\":%lld,\"gflop\":%.4g,\"gflops\":%.4g",
             (long long)lb_params_numel(lb_model_params(c.model)), gflop, gflop / r.median_s);
    bench_print_json("lookback", "W2", o->threads, &r, base, extra);
    lb_graph_free(c.g);
    lb_optim_free(c.opt);
    lb_model_free(c.model);
    free(c.tokens);
    free(c.targets);
    return 0;
}

/* ---------------------------------------------------------------------- LM ---- */

/* nanoGPT's CPU recipe (its README's "shakespeare_char" on a CPU: n_layer 4, n_head 4,
 * n_embd 128, block_size 64, batch_size 12, dropout 0, bias False) on lookback's
 * transformer: learned positions, pre-LN blocks with exact GELU and d_ff = 4 d_model, final
 * LayerNorm, no biases (--bias 0), the head tied to the token embedding
 * (--tie-embeddings 1), GPT-2 initialisation (--init gpt2), a head on every position,
 * vocabulary 65. The step is the trainer's (train/trainer.c): forward, cross-entropy over
 * the B·T targets, backward, clipping to norm 1, AdamW (lr 1e-3, betas (0.9, 0.99), weight
 * decay 0.1 on the matrices only: nanoGPT's configure_optimizers, --decay-params
 * matrices), zero grads, graph reset. Batches as nanoGPT's get_batch: B windows of T+1
 * tokens at uniformly drawn offsets of a fixed token stream (random tokens here: the
 * timing does not depend on their values). */
enum { LM_B = 12, LM_T = 64, LM_V = 65, LM_LAYERS = 4, LM_D = 128, LM_FF = 512, LM_STREAM = 1 << 20 };

typedef struct lm_ctx {
    model_ctx m;
    lb_var **params;
    int n_params;
    int32_t *stream;
    lb_rng rng;
} lm_ctx;

static void lm_batch(lm_ctx *c)
{
    for (int64_t b = 0; b < LM_B; b++) {
        int64_t off = (int64_t)lb_rng_below(&c->rng, (uint64_t)(LM_STREAM - LM_T - 1));
        memcpy(c->m.tokens + b * LM_T, c->stream + off, LM_T * sizeof(int32_t));
        memcpy(c->m.targets + b * LM_T, c->stream + off + 1, LM_T * sizeof(int32_t));
    }
}

static int lm_step(void *ctx)
{
    lm_ctx *c = ctx;
    lm_batch(c);
    lb_var *logits = lb_model_forward(c->m.g, c->m.model, &c->m.in, 1, NULL, NULL); /* [B, T, V] */
    lb_var *loss = lb_cross_entropy(c->m.g, logits, c->m.targets, -100);
    if (!loss)
        FAIL("LM forward");
    if (lb_backward(c->m.g, loss, NULL) != LB_OK)
        FAIL("LM backward");
    double norm = 0;
    if (lb_clip_grad_norm(c->params, c->n_params, 1.0, &norm) != LB_OK)
        FAIL("LM clipping");
    if (lb_optim_step(c->m.opt) != LB_OK)
        FAIL("LM AdamW step");
    lb_optim_zero_grad(c->m.opt);
    lb_graph_reset(c->m.g);
    return 0;
}

/* FLOPs of one LM step: the matrix products 2·m·n·k, forward + backward = 3× forward
 * (per layer 8·N·d² for q, k, v, output, 4·N·d·d_ff for the FFN; the head 2·N·d·V;
 * N = B·T), attention 7·B·T²·d per layer (K1's causal count). Elementwise work, LayerNorm,
 * softmax, the embedding and AdamW are not counted. = 3.84 GFLOP. */
static double lm_flop(void) { return w2_flop(LM_B, LM_T, LM_LAYERS, LM_D, LM_FF, LM_V); }

static double measure_sgemm(int n, int warmup, int reps, bench_result *r);

static int run_lm(const bench_opts *o)
{
    lm_ctx c;
    memset(&c, 0, sizeof c);
    lb_model_config cfg;
    lb_model_config_default(LB_MODEL_TRANSFORMER, &cfg);
    cfg.vocab_size = LM_V;
    cfg.num_classes = LM_V;
    cfg.head = LB_HEAD_EVERY;
    cfg.max_seq_len = LM_T;
    cfg.n_layers = LM_LAYERS;
    cfg.d_model = LM_D;
    cfg.n_heads = 4;
    cfg.d_ff = LM_FF;
    cfg.pos = LB_POS_LEARNED;
    cfg.causal = 1;
    cfg.dropout = 0.0;
    cfg.bias = 0;
    cfg.tie_embeddings = 1;
    cfg.init = LB_INIT_GPT2;
    if (!(c.m.model = lb_model_new(&cfg)))
        FAIL("LM model");
    c.m.tokens = malloc((size_t)(LM_B * LM_T) * sizeof *c.m.tokens);
    c.m.targets = malloc((size_t)(LM_B * LM_T) * sizeof *c.m.targets);
    c.stream = malloc((size_t)LM_STREAM * sizeof *c.stream);
    if (!c.m.tokens || !c.m.targets || !c.stream)
        FAIL("LM token buffers");
    lb_rng_seed(&c.rng, 1337);
    for (int64_t i = 0; i < LM_STREAM; i++)
        c.stream[i] = (int32_t)lb_rng_below(&c.rng, (uint64_t)LM_V);
    c.m.in = (lb_model_input){LM_B, LM_T, c.m.tokens, NULL, NULL};
    lb_params *ps = lb_model_params(c.m.model);
    c.params = ps->items;
    c.n_params = ps->count;
    lb_optim_config oc = lb_optim_defaults(LB_OPTIM_ADAMW);
    oc.lr = 1e-3;
    oc.beta2 = 0.99;
    oc.weight_decay = 0.1;
    c.m.opt = lb_optim_new(&oc, ps->items, ps->count);
    for (int i = 0; c.m.opt && i < ps->count; i++)
        lb_optim_set_decay(c.m.opt, i, lb_decay_params_applies(LB_DECAY_MATRICES, c.m.model, ps->items[i]));
    c.m.g = lb_graph_new();
    if (!c.m.opt || !c.m.g)
        FAIL("LM setup");
    double base = bench_current_rss_mib();
    bench_result r;
    if (bench_time(lm_step, &c, bench_warmup(o, 3), bench_reps(o, 30), o->budget_s, &r) != 0)
        return 1;
    lb_pool_stats ps_stats;
    lb_pool_get_stats(lb_graph_pool(c.m.g), &ps_stats);
    /* the reference in the same process, per CPU-second as the step: OpenBLAS sgemm 1024³
     * on the run's threads (a rate that other processes on the machine do not change) */
    bench_result sr;
    double sg = measure_sgemm(1024, 2, 10, &sr), gflop = lm_flop() / 1e9;
    double sg_cpu = sr.cpu_per_rep > 0 ? 2.147483648 / sr.cpu_per_rep : 0;
    double lm_cpu = r.cpu_per_rep > 0 ? gflop / r.cpu_per_rep : 0;
    char extra[640];
    snprintf(extra, sizeof extra,
             "\"shape\":\"B=12 T=64 L=4 d_model=128 H=4 d_ff=512 V=65 learned positions, no biases, tied head\",\"params\":%lld,"
             "\"gflop\":%.4g,\"gflops\":%.4g,\"gflops_per_cpu_s\":%.4g,\"sgemm_gflops\":%.4g,"
             "\"sgemm_gflops_per_cpu_s\":%.4g,\"pct_of_sgemm_per_cpu_s\":%.1f,\"step_pool_mib\":%.2f,"
             "\"pool_misses\":%lld,\"pool_hits\":%lld",
             (long long)lb_params_numel(ps), gflop, gflop / r.median_s, lm_cpu, sg, sg_cpu,
             sg_cpu > 0 ? 100.0 * lm_cpu / sg_cpu : 0.0, (double)ps_stats.cached_bytes / (1 << 20),
             (long long)ps_stats.misses, (long long)ps_stats.hits);
    bench_print_json("lookback", "LM", o->threads, &r, base, extra);
    lb_graph_free(c.m.g);
    lb_optim_free(c.m.opt);
    lb_model_free(c.m.model);
    free(c.m.tokens);
    free(c.m.targets);
    free(c.stream);
    return 0;
}

/* --------------------------------------------------------------------- GEN ---- */

/* Generation on the LM model (nanoGPT's recipe, untrained: speed does not depend on the
 * weights): one stream, an empty context, then T tokens one event at a time through the
 * decoding state (lb_model_step_into: the key-value caches, no graph), each next token the
 * argmax of the logits (greedy). GEN: T = 64 (the recipe's context); GEN1K: the same model
 * with max_seq_len 1024, T = 1024. Reported: tokens/s over the T tokens, the time of the
 * last token, and what that token reads: the parameters (4 bytes each) and the keys and
 * values of the T - 1 cached positions (2 · L · (T - 1) · d_model floats), next to the
 * memory bandwidth of this process (memcpy of 256 MiB, read + write bytes per second). */
static double memcpy_gbs_here(void)
{
    const size_t n = (size_t)256 << 20;
    char *a = malloc(n), *b = malloc(n);
    if (!a || !b) {
        free(a);
        free(b);
        return 0;
    }
    memset(a, 1, n);
    memset(b, 2, n);
    double best = 1e30;
    for (int r = 0; r < 3; r++) { /* CPU time: the rate while it runs, on a shared machine too */
        struct timespec t0, t1;
        clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &t0);
        memcpy(b, a, n);
        clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &t1);
        double dt = (double)(t1.tv_sec - t0.tv_sec) + 1e-9 * (double)(t1.tv_nsec - t0.tv_nsec);
        best = dt < best ? dt : best;
    }
    volatile char sink = b[n / 2];
    (void)sink;
    free(a);
    free(b);
    return 2.0 * (double)n / best / 1e9;
}

/* In a child process, so that its 512 MiB are not this process's peak memory. */
static double memcpy_gbs(void)
{
    int fd[2];
    if (pipe(fd) != 0)
        return 0;
    pid_t pid = fork();
    if (pid == 0) {
        double g = memcpy_gbs_here();
        ssize_t w = write(fd[1], &g, sizeof g);
        _exit(w == (ssize_t)sizeof g ? 0 : 1);
    }
    close(fd[1]);
    double g = 0;
    if (pid < 0 || read(fd[0], &g, sizeof g) != (ssize_t)sizeof g)
        g = 0;
    close(fd[0]);
    if (pid > 0)
        waitpid(pid, NULL, 0);
    return g;
}

typedef struct gen_ctx {
    lb_model *model;
    lb_model_state *state;
    lb_tensor *logits; /* [1, V] */
    int64_t t;
    double last_s; /* time of the last token of the latest run */
} gen_ctx;

static int gen_run(void *ctx)
{
    gen_ctx *c = ctx;
    lb_model_state_reset(c->state, -1);
    int32_t tok = 0;
    const float *l = lb_tensor_data(c->logits);
    for (int64_t i = 0; i < c->t; i++) {
        double t0 = i == c->t - 1 ? bench_now() : 0;
        if (lb_model_step_into(c->state, &tok, c->logits) != LB_OK)
            FAIL("GEN step");
        if (i == c->t - 1)
            c->last_s = bench_now() - t0;
        int best = 0;
        for (int v = 1; v < LM_V; v++)
            best = l[v] > l[best] ? v : best;
        tok = best;
    }
    return 0;
}

static int run_gen(const bench_opts *o, const char *name, int64_t t)
{
    gen_ctx c = {0};
    lb_model_config cfg;
    lb_model_config_default(LB_MODEL_TRANSFORMER, &cfg);
    cfg.vocab_size = LM_V;
    cfg.num_classes = LM_V;
    cfg.head = LB_HEAD_EVERY;
    cfg.max_seq_len = t;
    cfg.n_layers = LM_LAYERS;
    cfg.d_model = LM_D;
    cfg.n_heads = 4;
    cfg.d_ff = LM_FF;
    cfg.pos = LB_POS_LEARNED;
    cfg.causal = 1;
    cfg.bias = 0;
    cfg.tie_embeddings = 1;
    cfg.init = LB_INIT_GPT2;
    int64_t ls[2] = {1, LM_V};
    c.t = t;
    if (!(c.model = lb_model_new(&cfg)) || !(c.state = lb_model_state_new(c.model, 1, NULL)) ||
        !(c.logits = lb_tensor_zeros(LB_FLOAT32, 2, ls)))
        FAIL("GEN setup");
    double base = bench_current_rss_mib();
    bench_result r;
    if (bench_time(gen_run, &c, bench_warmup(o, 2), bench_reps(o, t > 256 ? 5 : 20), o->budget_s, &r) != 0)
        return 1;
    int64_t params = lb_params_numel(lb_model_params(c.model));
    double bytes = 4.0 * (double)params + 4.0 * 2.0 * LM_LAYERS * (double)(t - 1) * LM_D;
    double bw = memcpy_gbs();
    char extra[512];
    snprintf(extra, sizeof extra,
             "\"shape\":\"LM model, context %lld, 1 stream, greedy\",\"tokens\":%lld,\"tokens_per_s\":%.1f,"
             "\"last_token_s\":%.4g,\"last_token_bytes\":%.0f,\"last_token_gbs\":%.3g,\"memcpy_gbs\":%.3g,"
             "\"state_bytes\":%zu",
             (long long)t, (long long)t, (double)t / r.median_s, c.last_s, bytes, bytes / c.last_s / 1e9, bw,
             lb_model_state_bytes(c.state, 0));
    bench_print_json("lookback", name, o->threads, &r, base, extra);
    lb_tensor_free(c.logits);
    lb_model_state_free(c.state);
    lb_model_free(c.model);
    return 0;
}

/* ---------------------------------------------------------------------- W3 ---- */

typedef struct lstm_ctx {
    lb_graph *g;
    lb_params ps;
    lb_lstm lstm;
    lb_optim *opt;
    lb_tensor *x, *target;
} lstm_ctx;

static int lstm_step(void *ctx)
{
    lstm_ctx *c = ctx;
    lb_var *h = lb_lstm_forward(c->g, &c->lstm, leaf(c->g, c->x, 0), NULL, NULL, NULL, NULL); /* [B, T, H] */
    lb_var *loss = lb_mse(c->g, h, leaf(c->g, c->target, 0));
    if (!loss)
        FAIL("W3 forward");
    if (lb_backward(c->g, loss, NULL) != LB_OK)
        FAIL("W3 backward");
    if (lb_optim_step(c->opt) != LB_OK)
        FAIL("W3 AdamW step");
    lb_optim_zero_grad(c->opt);
    lb_graph_reset(c->g);
    return 0;
}

static int run_w3(const bench_opts *o)
{
    const int64_t B = 16, T = 1024, n_in = 64, hidden = 128; /* cblas.h makes I complex.h's unit */
    lstm_ctx c = {0};
    lb_rng rng;
    lb_rng_seed(&rng, 7);
    lb_params_init(&c.ps);
    if (lb_lstm_init(&c.lstm, &c.ps, "lstm", n_in, hidden, 1, LB_FLOAT32, &rng) != LB_OK)
        FAIL("W3 LSTM init");
    int64_t sx[3] = {B, T, n_in}, sh[3] = {B, T, hidden};
    c.x = normal_tensor(&rng, 3, sx, 1.0);
    c.target = normal_tensor(&rng, 3, sh, 0.5);
    c.opt = adamw_over(&c.ps);
    c.g = lb_graph_new();
    if (!c.x || !c.target || !c.opt || !c.g)
        FAIL("W3 setup");
    double base = bench_current_rss_mib();
    bench_result r;
    if (bench_time(lstm_step, &c, bench_warmup(o, 1), bench_reps(o, 5), o->budget_s, &r) != 0)
        return 1;
    bench_print_json("lookback", "W3", o->threads, &r, base, "\"shape\":\"B=16 T=1024 input=64 hidden=128\"");
    lb_graph_free(c.g);
    lb_optim_free(c.opt);
    lb_params_free(&c.ps);
    lb_tensor_free(c.x);
    lb_tensor_free(c.target);
    return 0;
}

/* -------------------------------------------------------------------- EVAL ---- */

typedef struct eval_ctx {
    lb_graph *g;
    lb_model *model;
    lb_optim *opt;
    lb_model_input in;
    int32_t *targets;
    int train;
} eval_ctx;

/* Evaluation of one batch (gradients off), or a training step. */
static int eval_or_train_step(void *ctx)
{
    eval_ctx *c = ctx;
    lb_var *logits = lb_model_forward(c->g, c->model, &c->in, c->train, NULL, NULL); /* [B, C] */
    if (!logits)
        FAIL("EVAL forward");
    if (c->train) {
        lb_var *loss = lb_cross_entropy(c->g, logits, c->targets, -100);
        if (!loss || lb_backward(c->g, loss, NULL) != LB_OK || lb_optim_step(c->opt) != LB_OK)
            FAIL("EVAL training step");
        lb_optim_zero_grad(c->opt);
    }
    lb_graph_reset(c->g);
    return 0;
}

/* Median seconds of eval (train = 0, B sequences of T) or training steps of model m. */
static int time_model(const bench_opts *o, lb_model *m, int train, int64_t b, int64_t t, bench_result *r)
{
    eval_ctx c = {0};
    c.model = m;
    c.train = train;
    int32_t *tokens = malloc((size_t)(b * t) * sizeof *tokens);
    c.targets = malloc((size_t)b * sizeof *c.targets);
    c.g = lb_graph_new();
    c.opt = train ? adamw_over(lb_model_params(m)) : NULL;
    if (!tokens || !c.targets || !c.g || (train && !c.opt))
        FAIL("EVAL setup");
    lb_rng rng;
    lb_rng_seed(&rng, 17);
    for (int64_t i = 0; i < b * t; i++)
        tokens[i] = (int32_t)lb_rng_below(&rng, 16);
    for (int64_t i = 0; i < b; i++)
        c.targets[i] = (int32_t)lb_rng_below(&rng, 2);
    c.in = (lb_model_input){b, t, tokens, NULL, NULL};
    lb_graph_set_grad_enabled(c.g, train);
    int rc = bench_time(eval_or_train_step, &c, bench_warmup(o, 1), bench_reps(o, 5), o->budget_s / 4, r);
    lb_graph_free(c.g);
    lb_optim_free(c.opt);
    free(tokens);
    free(c.targets);
    return rc;
}

static int run_eval(const bench_opts *o)
{
    const int64_t b_eval = 8, t_eval = 7000, b_train = 32, t_train = 256;
    for (int k = 0; k < LB_MODEL_KIND_COUNT; k++) {
        const lb_model_kind kind = lb_family_at(k)->kind;
        lb_model_config cfg;
        lb_model_config_default(kind, &cfg);
        cfg.vocab_size = 16;
        cfg.num_classes = 2;
        cfg.max_seq_len = t_eval;
        lb_model *m = lb_model_new(&cfg);
        if (!m)
            FAIL("EVAL model");
        double base = bench_current_rss_mib();
        bench_result ev, tr;
        if (time_model(o, m, 0, b_eval, t_eval, &ev) != 0 || time_model(o, m, 1, b_train, t_train, &tr) != 0)
            return 1;
        double eval_tok = (double)(b_eval * t_eval) / ev.median_s, train_tok = (double)(b_train * t_train) / tr.median_s;
        char extra[384];
        snprintf(extra, sizeof extra,
                 "\"family\":\"%s\",\"shape\":\"eval B=%lld T=%lld; train B=%lld T=%lld\",\"eval_seq_per_s\":%.4g,"
                 "\"eval_tokens_per_s\":%.4g,\"train_step_s\":%.4g,\"train_tokens_per_s\":%.4g,\"params\":%lld",
                 lb_model_kind_name(kind), (long long)b_eval, (long long)t_eval, (long long)b_train,
                 (long long)t_train, (double)b_eval / ev.median_s, eval_tok, tr.median_s, train_tok,
                 (long long)lb_params_numel(lb_model_params(m)));
        bench_print_json("lookback", "EVAL", o->threads, &ev, base, extra);
        lb_model_free(m);
    }
    return 0;
}

/* ------------------------------------------------------------------- LOCAL ---- */

/* The study's spike16 recipe (d_model 64, 4 heads, d_ff 128, no positions, 16 token
 * ids, 2 classes, head on the last position), one training step at B=32, T=256:
 * local attention (2 blocks, window 16) against full causal attention with 2 blocks
 * (the same work outside the attention) and with 1 block (the study's transformer). */
static int run_local(const bench_opts *o)
{
    const int64_t b = 32, t = 256;
    struct {
        lb_model_kind kind;
        int layers;
        int64_t window; /* local attention's (unused by the transformer) */
        const char *name;
    } models[3] = {{LB_MODEL_LOCAL, 2, 16, "local"}, {LB_MODEL_TRANSFORMER, 2, 0, "transformer2"},
                   {LB_MODEL_TRANSFORMER, 1, 0, "transformer1"}};
    bench_result r[3];
    double base = bench_current_rss_mib();
    for (int i = 0; i < 3; i++) {
        lb_model_config cfg;
        lb_model_config_default(models[i].kind, &cfg);
        cfg.vocab_size = 16;
        cfg.num_classes = 2;
        cfg.max_seq_len = t;
        cfg.d_model = 64;
        cfg.n_heads = 4;
        cfg.d_ff = 128;
        cfg.pos = LB_POS_NONE;
        cfg.n_layers = models[i].layers;
        cfg.window = models[i].window;
        lb_model *m = lb_model_new(&cfg);
        if (!m)
            FAIL("LOCAL model");
        int rc = time_model(o, m, 1, b, t, &r[i]);
        lb_model_free(m);
        if (rc != 0)
            return 1;
    }
    char extra[384];
    snprintf(extra, sizeof extra,
             "\"shape\":\"spike16 recipe, B=%lld T=%lld d_model=64 H=4 d_ff=128 window=16\",\"local_steps_per_s\":%.4g,"
             "\"transformer2_steps_per_s\":%.4g,\"transformer1_steps_per_s\":%.4g,\"local_over_transformer2\":%.4g",
             (long long)b, (long long)t, 1 / r[0].median_s, 1 / r[1].median_s, 1 / r[2].median_s,
             r[0].median_s / r[1].median_s);
    bench_print_json("lookback", "LOCAL", o->threads, &r[0], base, extra);
    return 0;
}

/* ------------------------------------------------------------------- SGEMM ---- */

typedef struct sgemm_ctx {
    int n;
    float *a, *b, *c;
} sgemm_ctx;

static int sgemm_once(void *ctx)
{
    sgemm_ctx *s = ctx;
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, s->n, s->n, s->n, 1.0f, s->a, s->n, s->b, s->n, 0.0f, s->c,
                s->n);
    return 0;
}

/* OpenBLAS's threads for the sgemm reference: the --threads of the run. */
static int sgemm_threads = 1;

/* OpenBLAS sgemm n x n x n, `reps` timed runs after `warmup`: r receives the times;
 * returns the best GFLOP/s (2 n^3 / min time), or 0 when out of memory. */
static double measure_sgemm(int n, int warmup, int reps, bench_result *r)
{
    sgemm_ctx s = {n, NULL, NULL, NULL};
    size_t nn = (size_t)n * (size_t)n;
    s.a = malloc(nn * sizeof(float));
    s.b = malloc(nn * sizeof(float));
    s.c = malloc(nn * sizeof(float));
    double gflops = 0;
    if (s.a && s.b && s.c) {
        lb_rng rng;
        lb_rng_seed(&rng, 3);
        for (size_t i = 0; i < nn; i++) {
            s.a[i] = (float)lb_rng_uniform_range(&rng, -1, 1);
            s.b[i] = (float)lb_rng_uniform_range(&rng, -1, 1);
        }
        /* the reference is OpenBLAS's own threads (lookback keeps it at one thread) */
        openblas_set_num_threads(sgemm_threads);
        bench_time(sgemm_once, &s, warmup, reps, 0, r);
        openblas_set_num_threads(1);
        gflops = 2.0 * (double)n * (double)n * (double)n / r->min_s / 1e9;
    } else {
        fprintf(stderr, "bench_lookback: out of memory for sgemm %d\n", n);
    }
    free(s.a);
    free(s.b);
    free(s.c);
    return gflops;
}

static int run_sgemm(const bench_opts *o)
{
    double base = bench_current_rss_mib();
    bench_result r;
    double gflops = measure_sgemm(1024, bench_warmup(o, 3), bench_reps(o, 15), &r);
    if (gflops <= 0)
        return 1;
    char extra[160];
    snprintf(extra, sizeof extra, "\"shape\":\"1024x1024x1024\",\"gflop\":%.4g,\"gflops\":%.4g,\"gflops_median\":%.4g",
             2.147483648, gflops, 2.147483648 / r.median_s);
    bench_print_json("openblas", "SGEMM", o->threads, &r, base, extra);
    return 0;
}

/* --------------------------------------------------------------------- LIN ---- */

/* Causal linear attention (lb_linear_attention, elu + 1 features, no decay) forward +
 * backward on q, k, v [B=1, H=4, T=4096, d=64], K1's shape. */
typedef struct linear_ctx {
    lb_graph *g;
    lb_tensor *q, *k, *v, *grad_out;
} linear_ctx;

static int linear_step(void *ctx)
{
    linear_ctx *c = ctx;
    lb_var *q = leaf(c->g, c->q, 1), *k = leaf(c->g, c->k, 1), *v = leaf(c->g, c->v, 1);
    lb_var *out = lb_linear_attention(c->g, q, k, v, NULL, NULL, NULL);
    if (!out || lb_backward(c->g, out, c->grad_out) != LB_OK)
        FAIL("LIN linear attention");
    lb_graph_reset(c->g);
    return 0;
}

static int run_linear(const bench_opts *o)
{
    const int64_t B = 1, H = 4, T = 4096, d = 64;
    linear_ctx c = {0};
    lb_rng rng;
    lb_rng_seed(&rng, 5);
    int64_t s[4] = {B, H, T, d};
    c.q = normal_tensor(&rng, 4, s, 1.0);
    c.k = normal_tensor(&rng, 4, s, 1.0);
    c.v = normal_tensor(&rng, 4, s, 1.0);
    c.grad_out = normal_tensor(&rng, 4, s, 1.0);
    c.g = lb_graph_new();
    if (!c.q || !c.k || !c.v || !c.grad_out || !c.g)
        FAIL("LIN setup");
    double base = bench_current_rss_mib();
    bench_result r;
    if (bench_time(linear_step, &c, bench_warmup(o, 1), bench_reps(o, 5), o->budget_s, &r) != 0)
        return 1;
    bench_print_json("lookback", "LIN", o->threads, &r, base,
                     "\"shape\":\"B=1 H=4 T=4096 d=64 causal linear attention\",\"op\":\"lb_linear_attention\"");
    lb_graph_free(c.g);
    lb_tensor_free(c.q);
    lb_tensor_free(c.k);
    lb_tensor_free(c.v);
    lb_tensor_free(c.grad_out);
    return 0;
}

/* ---------------------------------------------------------------------- K1 ---- */

typedef struct kernel_ctx {
    lb_graph *g;
    lb_tensor *q, *k, *v, *grad_out;
    double scale;
    int backward;
} kernel_ctx;

static int kernel_step(void *ctx)
{
    kernel_ctx *c = ctx;
    lb_attn_mask mask = {0};
    mask.causal = 1;
    lb_var *q = leaf(c->g, c->q, 1), *k = leaf(c->g, c->k, 1), *v = leaf(c->g, c->v, 1);
    lb_var *out = lb_attention_fused(c->g, q, k, v, &mask, c->scale);
    if (!out)
        FAIL("K1 attention forward");
    if (c->backward && lb_backward(c->g, out, c->grad_out) != LB_OK)
        FAIL("K1 attention backward");
    lb_graph_reset(c->g);
    return 0;
}

static int run_k1(const bench_opts *o)
{
    const int64_t B = 1, H = 4, T = 4096, d = 64;
    kernel_ctx c = {0};
    lb_rng rng;
    lb_rng_seed(&rng, 5);
    int64_t s[4] = {B, H, T, d};
    c.q = normal_tensor(&rng, 4, s, 1.0);
    c.k = normal_tensor(&rng, 4, s, 1.0);
    c.v = normal_tensor(&rng, 4, s, 1.0);
    c.grad_out = normal_tensor(&rng, 4, s, 1.0);
    c.scale = 1.0 / sqrt((double)d);
    c.g = lb_graph_new();
    if (!c.q || !c.k || !c.v || !c.grad_out || !c.g)
        FAIL("K1 setup");
    double base = bench_current_rss_mib();
    const double fwd_flop = 2.0 * (double)T * (double)T * (double)d * (double)(B * H);
    const double step_flop = 3.5 * fwd_flop; /* forward + 2.5x forward */
    /* The OpenBLAS reference in the same process, right before and right after the
     * kernel (on a shared machine the cores' availability drifts): the best of both. */
    bench_result sg;
    double sgemm_before = measure_sgemm(1024, bench_warmup(o, 3), bench_reps(o, 15), &sg);
    bench_result fwd, r;
    c.backward = 0;
    if (bench_time(kernel_step, &c, bench_warmup(o, 1), bench_reps(o, 3), o->budget_s, &fwd) != 0)
        return 1;
    c.backward = 1;
    if (bench_time(kernel_step, &c, bench_warmup(o, 1), bench_reps(o, 5), o->budget_s, &r) != 0)
        return 1;
    double sgemm_after = measure_sgemm(1024, bench_warmup(o, 3), bench_reps(o, 15), &sg);
    double sgemm = sgemm_before > sgemm_after ? sgemm_before : sgemm_after;
    char extra[640];
    snprintf(extra, sizeof extra,
             "\"shape\":\"B=1 H=4 T=4096 d=64 causal\",\"op\":\"%s\",\"gflop\":%.4g,\"gflops\":%.4g,"
             "\"sgemm_gflops\":%.4g,\"sgemm_gflops_before\":%.4g,\"sgemm_gflops_after\":%.4g,\"pct_of_sgemm\":%.1f,"
             "\"fwd_median_s\":%.6g,\"fwd_gflops\":%.4g,\"bwd_gflops\":%.4g",
             "lb_attention_fused", step_flop / 1e9,
             step_flop / r.median_s / 1e9, sgemm, sgemm_before, sgemm_after,
             sgemm > 0 ? 100.0 * step_flop / r.median_s / 1e9 / sgemm : 0.0, fwd.median_s, fwd_flop / fwd.median_s / 1e9,
             r.median_s > fwd.median_s ? 2.5 * fwd_flop / (r.median_s - fwd.median_s) / 1e9 : 0.0);
    bench_print_json("lookback", "K1", o->threads, &r, base, extra);
    lb_graph_free(c.g);
    lb_tensor_free(c.q);
    lb_tensor_free(c.k);
    lb_tensor_free(c.v);
    lb_tensor_free(c.grad_out);
    return 0;
}

/* -------------------------------------------------------------------- INFO ---- */

static void json_string(const char *s)
{
    putchar('"');
    for (; s && *s; s++) {
        if (*s == '"' || *s == '\\')
            putchar('\\');
        if ((unsigned char)*s >= 0x20)
            putchar(*s);
    }
    putchar('"');
}

static int run_info(void)
{
    char model[256] = "unknown";
    FILE *f = fopen("/proc/cpuinfo", "r");
    char line[512];
    while (f && fgets(line, sizeof line, f)) {
        if (strncmp(line, "model name", 10) == 0) {
            char *p = strchr(line, ':');
            if (p) {
                p++;
                while (*p == ' ' || *p == '\t')
                    p++;
                snprintf(model, sizeof model, "%s", p);
                model[strcspn(model, "\n")] = '\0';
            }
            break;
        }
    }
    if (f)
        fclose(f);
    printf("{\"impl\":\"info\",\"nproc\":%ld,\"cpu_model\":", sysconf(_SC_NPROCESSORS_ONLN));
    json_string(model);
    printf(",\"openblas_config\":");
    json_string(openblas_get_config());
    printf(",\"openblas_core\":");
    json_string(openblas_get_corename());
    /* lb_blas_info: the core OpenBLAS chose by itself, who chose the one in use, threads */
    lb_blas_report blas;
    lb_blas_info(&blas);
    printf(",\"openblas_version\":");
    json_string(blas.version);
    printf(",\"openblas_core_detected\":");
    json_string(blas.core_detected);
    printf(",\"openblas_core_choice\":");
    json_string(blas.core_choice_name);
    printf(",\"cpu_isa\":");
    json_string(blas.cpu_isa);
    printf(",\"openblas_threading\":");
    json_string(blas.threading);
    printf(",\"openblas_threads\":%d", blas.blas_threads);
    printf(",\"attention_isa\":");
    json_string(LB_BENCH_ATTENTION_ISA());
    printf(",\"fused_attention_op\":%s,\"lb_set_num_threads\":%s}\n", "true",
#if defined(__has_include) && __has_include("tensor/threads.h")
           "true"
#else
           "false"
#endif
    );
    return 0;
}

/* -------------------------------------------------------------------- main ---- */

static int run_attention(const bench_opts *o, const char *name, int64_t b, int64_t t, int training_step, int warmup,
                         int reps)
{
    attn_ctx c;
    if (attn_setup(&c, b, t, 64, training_step) != 0)
        return 1;
    double base = bench_current_rss_mib();
    bench_result r;
    if (bench_time(training_step ? attn_train_step : attn_fwd_bwd, &c, bench_warmup(o, warmup), bench_reps(o, reps),
                   o->budget_s, &r) != 0)
        return 1;
    char extra[256];
    /* attention 7·T²·d per sequence (K1's count) + q, k, v projections 3 · 2·T·d², times 3 for the backward */
    double gflop = (double)b * (7.0 * (double)t * (double)t * 64 + 3.0 * 3.0 * 2.0 * (double)t * 64 * 64) / 1e9;
    snprintf(extra, sizeof extra,
             "\"shape\":\"B=%lld T=%lld d_model=d_k=d_v=64 causal%s\",\"fused_op_present\":%s,\"gflop\":%.4g,"
             "\"gflops\":%.4g",
             (long long)b, (long long)t, training_step ? " (training step)" : "", "true",
             gflop, gflop / r.median_s);
    bench_print_json("lookback", name, o->threads, &r, base, extra);
    attn_free(&c);
    return 0;
}

int main(int argc, char **argv)
{
    lb_cli_restore_environment(); /* OpenBLAS loaded as the lookback command loads it (cli/preinit.h) */
    if (lb_omp_wait_defaults()) /* the lookback command's libgomp spin setting (tensor/threads.h) */
        execv("/proc/self/exe", argv);
    bench_opts o;
    if (bench_parse(argc, argv, &o) != 0) {
        fprintf(stderr, "usage: bench_lookback W1a|W1b|W2|W3|LM|GEN|GEN1K|W4|W6|EVAL|LOCAL|LIN|K1|SGEMM|INFO [--threads N] [--warmup N] "
                        "[--reps N] [--quick] [--budget SECONDS]\n");
        return 2;
    }
    if (LB_BENCH_ISA_CHECK() != LB_OK) { /* LOOKBACK_ISA names a build this CPU cannot run */
        fprintf(stderr, "bench_lookback: %s\n", lb_last_error());
        return 2;
    }
    bench_set_threads(o.threads);
    sgemm_threads = o.threads;
    const char *w = o.workload;
    if (strcmp(w, "W1a") == 0)
        return run_attention(&o, "W1a", 8, 512, 0, 2, 15);
    if (strcmp(w, "W1b") == 0)
        return run_attention(&o, "W1b", 4, 2048, 0, 1, 7);
    if (strcmp(w, "W2") == 0)
        return run_w2(&o);
    if (strcmp(w, "W3") == 0)
        return run_w3(&o);
    if (strcmp(w, "LM") == 0)
        return run_lm(&o);
    if (strcmp(w, "GEN") == 0)
        return run_gen(&o, "GEN", LM_T);
    if (strcmp(w, "GEN1K") == 0)
        return run_gen(&o, "GEN1K", 1024);
    if (strcmp(w, "W4") == 0)
        return run_attention(&o, "W4", 1, 16384, 1, 1, 1);
    if (strcmp(w, "W6") == 0)
        return run_attention(&o, "W6", 1, 131072, 1, 0, 1);
    if (strcmp(w, "EVAL") == 0)
        return run_eval(&o);
    if (strcmp(w, "K1") == 0)
        return run_k1(&o);
    if (strcmp(w, "LOCAL") == 0)
        return run_local(&o);
    if (strcmp(w, "LIN") == 0)
        return run_linear(&o);
    if (strcmp(w, "SGEMM") == 0)
        return run_sgemm(&o);
    if (strcmp(w, "INFO") == 0)
        return run_info();
    fprintf(stderr, "bench_lookback: unknown workload '%s' (W1a, W1b, W2, W3, LM, GEN, GEN1K, W4, W6, EVAL, LOCAL, LIN, K1, SGEMM, INFO)\n", w);
    return 2;
}

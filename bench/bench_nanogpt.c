/* The nanoGPT anchor: nanoGPT's CPU recipe trained on a real text, lookback's side.
 *
 *   bench_nanogpt TEXT [--steps N] [--seed S] [--threads N] [--eval-batches N] [--model transformer|lstm]
 *
 * The recipe (nanoGPT's README, "shakespeare_char" on a CPU): characters as tokens
 * (vocabulary: the sorted distinct code points of the whole UTF-8 text, nanoGPT's
 * data/shakespeare_char/prepare.py), train = the first 90 %, val = the last 10 %;
 * batches as its get_batch (B = 12 windows of T + 1 = 65 tokens at uniformly drawn
 * offsets); 4 layers, 4 heads, d_model 128, d_ff 512, learned positions, no biases, the
 * head tied to the token embedding, GPT-2 initialisation, dropout 0; AdamW lr 1e-3,
 * betas (0.9, 0.99), weight decay 0.1 on the matrices; gradient clipping 1.0; nanoGPT's
 * get_lr: linear warm-up over 100 steps ((it + 1) / 101 of lr), then cosine from 1e-3 to
 * 1e-4 at step N (lr_decay_iters = max_iters = N, default 2,000). After training: the
 * mean cross-entropy of --eval-batches (default 200) batches drawn the same way from
 * val and from train (nanoGPT's estimate_loss). --model lstm: an LSTM language model on
 * the same data (one layer, hidden_size 256, embedding 128, head on every position) with
 * the same optimiser and schedule (the LSTM row). bench/torch_nanogpt.py is the same in
 * PyTorch. Prints one JSON line: losses, the step's median wall and CPU seconds, the
 * train time.
 */
#define _POSIX_C_SOURCE 200809L
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "autograd/autograd.h"
#include "autograd/ops.h"
#include "cli/preinit.h"
#include "harness.h"
#include "layers/model.h"
#include "layers/params.h"
#include "optim/clip.h"
#include "optim/optim.h"
#include "tensor/rng.h"
#include "tensor/threads.h"
#include "train/trainer.h"

enum { B = 12, T = 64 };

/* Code points of UTF-8 text (invalid bytes taken as Latin-1); returns the count. */
static int64_t decode_utf8(const unsigned char *s, size_t n, int32_t *out)
{
    int64_t k = 0;
    for (size_t i = 0; i < n;) {
        unsigned c = s[i];
        int len = c < 0x80 ? 1 : (c >> 5) == 6 ? 2 : (c >> 4) == 14 ? 3 : (c >> 3) == 30 ? 4 : 1;
        if (i + (size_t)len > n)
            len = 1;
        uint32_t cp = len == 1 ? c : len == 2 ? c & 0x1f : len == 3 ? c & 0x0f : c & 0x07;
        for (int j = 1; j < len; j++)
            cp = (cp << 6) | (s[i + (size_t)j] & 0x3f);
        out[k++] = (int32_t)cp;
        i += (size_t)len;
    }
    return k;
}

static int cmp_i32(const void *a, const void *b)
{
    int32_t x = *(const int32_t *)a, y = *(const int32_t *)b;
    return (x > y) - (x < y);
}

static double now_cpu(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

/* nanoGPT's get_lr */
static double get_lr(int64_t it, int64_t steps)
{
    const double lr = 1e-3, min_lr = 1e-4;
    const int64_t warmup = 100;
    if (it < warmup)
        return lr * (double)(it + 1) / (double)(warmup + 1);
    if (it > steps)
        return min_lr;
    double ratio = (double)(it - warmup) / (double)(steps - warmup);
    return min_lr + 0.5 * (1.0 + cos(M_PI * ratio)) * (lr - min_lr);
}

static void get_batch(lb_rng *rng, const int32_t *data, int64_t n, int32_t *x, int32_t *y)
{
    for (int b = 0; b < B; b++) {
        int64_t off = (int64_t)lb_rng_below(rng, (uint64_t)(n - T));
        memcpy(x + b * T, data + off, T * sizeof *x);
        memcpy(y + b * T, data + off + 1, T * sizeof *y);
    }
}

static double loss_of(lb_graph *g, lb_model *m, const int32_t *x, const int32_t *y, int training)
{
    lb_model_input in = {B, T, x, NULL, NULL};
    lb_var *logits = lb_model_forward(g, m, &in, training, NULL, NULL);
    lb_var *loss = logits ? lb_cross_entropy(g, logits, y, -100) : NULL;
    return loss ? (double)*(const float *)lb_tensor_data(loss->value) : NAN;
}

static double estimate(lb_model *m, lb_rng *rng, const int32_t *data, int64_t n, int batches, int32_t *x, int32_t *y)
{
    lb_graph *g = lb_graph_new();
    lb_graph_set_grad_enabled(g, 0);
    double sum = 0;
    for (int i = 0; i < batches; i++) {
        get_batch(rng, data, n, x, y);
        sum += loss_of(g, m, x, y, 0);
        lb_graph_reset(g);
    }
    lb_graph_free(g);
    return sum / batches;
}

int main(int argc, char **argv)
{
    lb_cli_restore_environment();
    if (lb_omp_wait_defaults())
        execv("/proc/self/exe", argv);
    const char *path = NULL, *model_kind = "transformer";
    int64_t steps = 2000;
    uint64_t seed = 1337;
    int threads = 1, eval_batches = 200;
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--steps") == 0 && i + 1 < argc)
            steps = atoll(argv[++i]);
        else if (strcmp(argv[i], "--seed") == 0 && i + 1 < argc)
            seed = strtoull(argv[++i], NULL, 10);
        else if (strcmp(argv[i], "--threads") == 0 && i + 1 < argc)
            threads = atoi(argv[++i]);
        else if (strcmp(argv[i], "--eval-batches") == 0 && i + 1 < argc)
            eval_batches = atoi(argv[++i]);
        else if (strcmp(argv[i], "--model") == 0 && i + 1 < argc)
            model_kind = argv[++i];
        else if (!path && argv[i][0] != '-')
            path = argv[i];
        else {
            fprintf(stderr, "usage: bench_nanogpt TEXT [--steps N] [--seed S] [--threads N] [--eval-batches N] "
                            "[--model transformer|lstm]\n");
            return 2;
        }
    }
    if (!path || steps <= 100 || eval_batches < 1) {
        fprintf(stderr, "bench_nanogpt: needs a text file, --steps > 100 and --eval-batches >= 1\n");
        return 2;
    }
    FILE *f = fopen(path, "rb");
    if (!f) {
        fprintf(stderr, "bench_nanogpt: %s: cannot open\n", path);
        return 1;
    }
    fseek(f, 0, SEEK_END);
    long size = ftell(f);
    fseek(f, 0, SEEK_SET);
    unsigned char *bytes = malloc((size_t)size + 1);
    int32_t *cps = malloc(((size_t)size + 1) * sizeof *cps), *sorted = malloc(((size_t)size + 1) * sizeof *sorted);
    if (!bytes || !cps || !sorted || fread(bytes, 1, (size_t)size, f) != (size_t)size) {
        fprintf(stderr, "bench_nanogpt: %s: cannot read\n", path);
        return 1;
    }
    fclose(f);
    int64_t n = decode_utf8(bytes, (size_t)size, cps);
    memcpy(sorted, cps, (size_t)n * sizeof *cps);
    qsort(sorted, (size_t)n, sizeof *sorted, cmp_i32);
    int64_t vocab = 0;
    for (int64_t i = 0; i < n; i++)
        if (i == 0 || sorted[i] != sorted[i - 1])
            sorted[vocab++] = sorted[i];
    for (int64_t i = 0; i < n; i++) { /* code point -> its rank among the distinct ones */
        int64_t lo = 0, hi = vocab - 1;
        while (lo < hi) {
            int64_t mid = (lo + hi) / 2;
            if (sorted[mid] < cps[i])
                lo = mid + 1;
            else
                hi = mid;
        }
        cps[i] = (int32_t)lo;
    }
    int64_t n_train = (int64_t)(0.9 * (double)n), n_val = n - n_train;
    const int32_t *train = cps, *val = cps + n_train;

    lb_set_num_threads(threads);
    lb_model_config cfg;
    int lstm = strcmp(model_kind, "lstm") == 0;
    lb_model_config_default(lstm ? LB_MODEL_LSTM : LB_MODEL_TRANSFORMER, &cfg);
    cfg.vocab_size = vocab;
    cfg.num_classes = vocab;
    cfg.head = LB_HEAD_EVERY;
    cfg.seed = seed;
    if (lstm) {
        cfg.n_layers = 1;
        cfg.d_model = 128;
        cfg.hidden_size = 256;
    } else {
        cfg.max_seq_len = T;
        cfg.n_layers = 4;
        cfg.d_model = 128;
        cfg.n_heads = 4;
        cfg.d_ff = 512;
        cfg.pos = LB_POS_LEARNED;
        cfg.causal = 1;
        cfg.dropout = 0.0;
        cfg.bias = 0;
        cfg.tie_embeddings = 1;
        cfg.init = LB_INIT_GPT2;
    }
    lb_model *m = lb_model_new(&cfg);
    if (!m) {
        fprintf(stderr, "bench_nanogpt: model: %s\n", lb_last_error());
        return 1;
    }
    lb_params *ps = lb_model_params(m);
    lb_optim_config oc = lb_optim_defaults(LB_OPTIM_ADAMW);
    oc.lr = 1e-3;
    oc.beta2 = 0.99;
    oc.weight_decay = 0.1;
    lb_optim *opt = lb_optim_new(&oc, ps->items, ps->count);
    for (int i = 0; opt && i < ps->count; i++)
        lb_optim_set_decay(opt, i, lb_decay_params_applies(LB_DECAY_MATRICES, m, ps->items[i]));
    lb_graph *g = lb_graph_new();
    int32_t x[B * T], y[B * T];
    lb_rng rng;
    lb_rng_seed(&rng, seed);
    double *step_wall = malloc((size_t)steps * sizeof *step_wall), *step_cpu = malloc((size_t)steps * sizeof *step_cpu);
    double t_start = bench_now(), c_start = now_cpu(), last_loss = NAN;
    for (int64_t it = 0; it < steps; it++) {
        double w0 = bench_now(), c0 = now_cpu();
        lb_optim_set_lr(opt, get_lr(it, steps));
        get_batch(&rng, train, n_train, x, y);
        lb_model_input in = {B, T, x, NULL, NULL};
        lb_var *logits = lb_model_forward(g, m, &in, 1, NULL, NULL);
        lb_var *loss = logits ? lb_cross_entropy(g, logits, y, -100) : NULL;
        double norm;
        if (!loss || lb_backward(g, loss, NULL) != LB_OK || lb_clip_grad_norm(ps->items, ps->count, 1.0, &norm) != LB_OK ||
            lb_optim_step(opt) != LB_OK) {
            fprintf(stderr, "bench_nanogpt: step %lld: %s\n", (long long)it, lb_last_error());
            return 1;
        }
        last_loss = *(const float *)lb_tensor_data(loss->value);
        lb_optim_zero_grad(opt);
        lb_graph_reset(g);
        step_wall[it] = bench_now() - w0;
        step_cpu[it] = now_cpu() - c0;
    }
    double train_wall = bench_now() - t_start, train_cpu = now_cpu() - c_start;
    lb_rng er;
    lb_rng_seed(&er, seed + 1000);
    double val_loss = estimate(m, &er, val, n_val, eval_batches, x, y);
    double train_loss = estimate(m, &er, train, n_train, eval_batches, x, y);
    /* medians over the steps after the first 10 */
    int64_t k = steps - 10;
    double *w = step_wall + 10, *c = step_cpu + 10;
    for (int64_t i = 1; i < k; i++) /* insertion sorts: a few thousand values */
        for (int64_t j = i; j > 0 && w[j] < w[j - 1]; j--) {
            double t = w[j]; w[j] = w[j - 1]; w[j - 1] = t;
        }
    for (int64_t i = 1; i < k; i++)
        for (int64_t j = i; j > 0 && c[j] < c[j - 1]; j--) {
            double t = c[j]; c[j] = c[j - 1]; c[j - 1] = t;
        }
    printf("{\"impl\":\"lookback\",\"workload\":\"NANOGPT\",\"model\":\"%s\",\"threads\":%d,\"seed\":%llu,"
           "\"steps\":%lld,\"vocab\":%lld,\"n_train\":%lld,\"n_val\":%lld,\"params\":%lld,\"val_loss\":%.4f,"
           "\"train_loss\":%.4f,\"last_batch_loss\":%.4f,\"step_median_s\":%.5f,\"step_cpu_median_s\":%.5f,"
           "\"train_wall_s\":%.1f,\"train_cpu_s\":%.1f}\n",
           model_kind, threads, (unsigned long long)seed, (long long)steps, (long long)vocab, (long long)n_train,
           (long long)n_val, (long long)lb_params_numel(ps), val_loss, train_loss, last_loss, w[k / 2], c[k / 2],
           train_wall, train_cpu);
    lb_graph_free(g);
    lb_optim_free(opt);
    lb_model_free(m);
    free(bytes);
    free(cps);
    free(sorted);
    free(step_wall);
    free(step_cpu);
    return 0;
}

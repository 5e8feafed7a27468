/* Streaming inference benchmark: what one event costs each model family as the
 * context grows (layers/stream.h). bench/run runs it next to bench/torch_stream.py.
 *
 *   bench_stream FAMILY [--threads N] [--quick] [--reps N] [--warmup N] [--budget S]
 *   FAMILY: transformer | local | lstm | conv | BW
 *
 * Models (the same in torch_stream.py): token inputs (vocab 32), d_model 64, a
 * last-position head with 8 classes, float32;
 *   transformer  2 pre-norm blocks, 4 heads, d_ff 128, no positions (full causal attention)
 *   local        the same with a window of 128 keys
 *   lstm         2 layers, hidden_size 128
 *   conv         4 causal conv layers, kernel 3, dilations 1, 2, 4, 8
 * For B = 1 and 16 streams and contexts T = 1k, 4k, 16k, 64k: the state is brought to
 * T events, then one event per stream (lb_model_step) is timed (median of the
 * repetitions). The bounded families are fed their T events for real (chunks of
 * 1024); the transformer's caches are filled with random keys and values (the cost of
 * a step depends on the cache's size, not its contents; feeding 64k events would cost
 * O(T²)). JSON fields beyond harness.h's: batch, context, state_bytes (per stream,
 * lb_model_state_bytes), allocated_bytes (the whole state), read_bytes (the cache a
 * step reads: 2 L T d_model · 4 · B for the transformer).
 * BW: the machine's read bandwidth, OpenBLAS sdot over two 256 MiB vectors (GB/s),
 * the reference for the transformer's slope.
 */
#define _POSIX_C_SOURCE 200809L
#include <cblas.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli/preinit.h"
#include "harness.h"
#include "kernels/stream.h"
#include "layers/family.h"
#include "layers/model.h"
#include "layers/stream.h"
#include "tensor/rng.h"

static const int64_t contexts[4] = {1024, 4096, 16384, 65536};
static const int64_t batches[2] = {1, 16};

typedef struct step_ctx {
    lb_model_state *state;
    int32_t tokens[16];
} step_ctx;

static int one_event(void *ctx)
{
    step_ctx *c = ctx;
    lb_tensor *y = lb_model_step(c->state, c->tokens);
    if (!y) {
        fprintf(stderr, "bench_stream: step failed: %s\n", lb_last_error());
        return 1;
    }
    lb_tensor_free(y);
    return 0;
}

/* Brings every stream of a bounded family to `target` events, feeding real events. */
static int feed(lb_model_state *s, int64_t b, int64_t target, lb_rng *rng)
{
    enum { CHUNK = 1024 };
    static int32_t tokens[16 * CHUNK];
    while (lb_model_state_events(s, 0) < target) {
        int64_t n = target - lb_model_state_events(s, 0);
        if (n > CHUNK)
            n = CHUNK;
        for (int64_t i = 0; i < b * n; i++)
            tokens[i] = (int32_t)(lb_rng_next(rng) % 32);
        lb_model_input in = {b, n, tokens, NULL, NULL};
        lb_tensor *y = lb_model_step_chunk(s, &in);
        if (!y) {
            fprintf(stderr, "bench_stream: feeding failed: %s\n", lb_last_error());
            return 1;
        }
        lb_tensor_free(y);
    }
    return 0;
}

/* Fills every layer's cache with random rows up to `target` cached events. */
static int fill_caches(lb_model_state *s, int layers, int64_t target, const lb_tensor *noise)
{
    int64_t b = noise->shape[0], rows = noise->shape[2];
    for (int l = 0; l < layers; l++) {
        lb_kv_cache *c = lb_model_state_kv_cache(s, l);
        while (c->length[0] < target) {
            int64_t n = target - c->length[0] < rows ? target - c->length[0] : rows, zero[16] = {0}, cnt[16];
            for (int64_t i = 0; i < b; i++)
                cnt[i] = n;
            if (lb_kv_cache_reserve(c, n) != LB_OK || lb_k_copy_rows(c->key, c->length, noise, zero, cnt) != LB_OK ||
                lb_k_copy_rows(c->value, c->length, noise, zero, cnt) != LB_OK) {
                fprintf(stderr, "bench_stream: filling the cache failed: %s\n", lb_last_error());
                return 1;
            }
            lb_kv_cache_advance(c, cnt);
        }
    }
    return 0;
}

static int run_family(const bench_opts *o, lb_model_kind kind)
{
    lb_model_config cfg;
    lb_model_config_default(kind, &cfg);
    cfg.vocab_size = 32;
    cfg.num_classes = 8;
    cfg.d_model = 64;
    cfg.window = 128; /* local attention's (unused by the other families) */
    /* The family whose state grows with the context (full attention's key-value cache)
     * has its caches filled directly; the others are fed events. */
    const lb_family *fam = lb_family_of(kind);
    const int grows = fam->state_floats(&cfg, 4096) < fam->state_floats(&cfg, 8192);
    lb_model *m = lb_model_new(&cfg);
    if (!m) {
        fprintf(stderr, "bench_stream: %s\n", lb_last_error());
        return 1;
    }
    lb_rng rng;
    lb_rng_seed(&rng, 11);
    int rc = 0;
    for (int bi = 0; bi < 2 && rc == 0; bi++) {
        int64_t b = batches[bi];
        int64_t reps = bench_reps(o, 40), warmup = bench_warmup(o, 3);
        lb_stream_options opt = {0};
        if (grows)
            opt.capacity = contexts[3] + warmup + reps + 64; /* pre-sized: no growth while timed */
        step_ctx c = {lb_model_state_new(m, b, &opt), {0}};
        int64_t heads_shape[4] = {b, cfg.n_heads, 4096, cfg.d_model / cfg.n_heads};
        lb_tensor *noise = grows ? lb_tensor_zeros(LB_FLOAT32, 4, heads_shape) : NULL;
        if (!c.state || (grows && !noise)) {
            fprintf(stderr, "bench_stream: %s\n", lb_last_error());
            rc = 1;
            break;
        }
        float *pn = noise ? lb_tensor_data(noise) : NULL;
        for (int64_t i = 0; pn && i < lb_tensor_numel(noise); i++)
            pn[i] = (float)(lb_rng_uniform(&rng) * 2 - 1);
        for (int64_t i = 0; i < b; i++)
            c.tokens[i] = (int32_t)(i % 32);
        for (int ci = 0; ci < 4 && rc == 0; ci++) {
            int64_t t = contexts[ci];
            fprintf(stderr, "bench_stream: %s B=%lld T=%lld\n", lb_model_kind_name(kind), (long long)b, (long long)t);
            rc = grows ? fill_caches(c.state, cfg.n_layers, t, noise) : feed(c.state, b, t, &rng);
            if (rc)
                break;
            double base = bench_current_rss_mib();
            bench_result r;
            if ((rc = bench_time(one_event, &c, (int)warmup, (int)reps, o->budget_s, &r)) != 0)
                break;
            char extra[512];
            double read = grows ? 2.0 * cfg.n_layers * (double)t * (double)cfg.d_model * 4.0 * (double)b
                                                       : 0.0;
            snprintf(extra, sizeof extra,
                     "\"family\":\"%s\",\"batch\":%lld,\"context\":%lld,\"state_bytes\":%zu,\"allocated_bytes\":%zu,"
                     "\"read_bytes\":%.0f,\"shape\":\"d_model 64, %d layers, B=%lld, T=%lld\"",
                     lb_model_kind_name(kind), (long long)b, (long long)t, lb_model_state_bytes(c.state, 0),
                     lb_model_state_allocated(c.state), read, cfg.n_layers, (long long)b, (long long)t);
            char workload[64];
            snprintf(workload, sizeof workload, "S-%s", lb_model_kind_name(kind));
            bench_print_json("lookback", workload, o->threads, &r, base, extra);
            fflush(stdout);
        }
        lb_tensor_free(noise);
        lb_model_state_free(c.state);
    }
    lb_model_free(m);
    return rc;
}

typedef struct bw_ctx {
    float *a, *b;
    size_t n;
    double sink;
} bw_ctx;

static int bw_once(void *ctx)
{
    bw_ctx *c = ctx;
    c->sink += cblas_sdot((int)c->n, c->a, 1, c->b, 1);
    return 0;
}

static int run_bw(const bench_opts *o)
{
    bw_ctx c = {NULL, NULL, (size_t)64 << 20, 0}; /* 64 Mi floats = 256 MiB each */
    c.a = malloc(c.n * sizeof *c.a);
    c.b = malloc(c.n * sizeof *c.b);
    if (!c.a || !c.b) {
        fprintf(stderr, "bench_stream: out of memory for the bandwidth test\n");
        return 1;
    }
    for (size_t i = 0; i < c.n; i++)
        c.a[i] = c.b[i] = (float)(i % 7) * 0.25f;
    bench_result r;
    if (bench_time(bw_once, &c, 1, bench_reps(o, 7), o->budget_s, &r) != 0)
        return 1;
    char extra[128];
    snprintf(extra, sizeof extra, "\"read_gbps\":%.2f,\"bytes\":%zu", 2.0 * (double)c.n * 4 / r.median_s / 1e9,
             2 * c.n * sizeof(float));
    bench_print_json("openblas", "BW", o->threads, &r, 0, extra);
    free(c.a);
    free(c.b);
    return c.sink == -1.0;
}

int main(int argc, char **argv)
{
    lb_cli_restore_environment(); /* OpenBLAS loaded as the lookback command loads it (cli/preinit.h) */
    bench_opts o;
    if (bench_parse(argc, argv, &o) != 0) {
        fprintf(stderr, "usage: bench_stream transformer|local|lstm|conv|BW [--threads N] [--quick] [--reps N]\n");
        return 2;
    }
    lb_keep_freed_memory();
    bench_set_threads(o.threads);
    if (strcmp(o.workload, "BW") == 0)
        return run_bw(&o);
    lb_model_kind kind;
    if (lb_model_kind_parse(o.workload, &kind) != LB_OK) {
        fprintf(stderr, "bench_stream: %s\n", lb_last_error());
        return 2;
    }
    return run_family(&o, kind);
}

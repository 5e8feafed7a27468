/* What attention costs: every pair of positions is a real pair.
 *
 *   ./cost            n = 256 ... 2,048 and contexts up to 4,096 (a short run)
 *   ./cost --full     n = 256 ... 16,384 and contexts up to 16,384 (the materialized
 *                     path then needs about 4 GiB)
 *
 * Part 1: one forward and backward pass of single-head attention (batch 1, d_k = d_v =
 * 64, float32, no mask) over n positions, two ways with the same result:
 *   - materialized: scores = Q Kᵀ, weights = softmax(scores / 8), output = weights V:
 *     the n × n scores and weights (and their gradients) are held in memory: O(n²);
 *   - fused (lb_attention_fused, FlashAttention-2's tiling): the same arithmetic, tile
 *     by tile, keeping a few numbers per query besides its output row: memory O(n d).
 * Both do O(n² d) work: doubling n quadruples the time of either. The fused kernel
 * changes the memory, not the pairwise work.
 *
 * Part 2: streaming, one event at a time (layers/stream.h). A transformer keeps every
 * past event's keys and values (the KV cache) and compares each new query with all of
 * them, so its state and its time per event grow with the context; an LSTM carries
 * (h, c), the same few numbers and the same work per event at any context.
 *
 * Peak memory is the process's peak resident set size (VmHWM, reset through
 * /proc/self/clear_refs) above what it held before the pass; times are wall-clock,
 * and vary with the machine's load. */
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#ifdef __GLIBC__
#include <malloc.h>
#endif

#include "example.h"

enum { D = 64 };

static double now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

/* A field of /proc/self/status in KiB ("VmRSS", "VmHWM"), or -1. */
static long status_kib(const char *field)
{
    FILE *f = fopen("/proc/self/status", "r");
    char line[256];
    long kib = -1;
    size_t len = strlen(field);
    while (f && fgets(line, sizeof line, f))
        if (strncmp(line, field, len) == 0 && line[len] == ':')
            kib = strtol(line + len + 1, NULL, 10);
    if (f)
        fclose(f);
    return kib;
}

/* Returns freed memory to the system and starts a new peak; returns the resident
 * size in KiB, or -1 where the peak cannot be reset (then no memory is reported). */
static long peak_start(void)
{
#ifdef __GLIBC__
    malloc_trim(0);
#endif
    FILE *f = fopen("/proc/self/clear_refs", "w");
    if (!f || fputs("5", f) < 0 || fclose(f) != 0)
        return -1;
    return status_kib("VmRSS");
}

/* MiB of peak resident memory above `start`, or NAN. */
static double peak_mib(long start)
{
    long hwm = status_kib("VmHWM");
    return start < 0 || hwm < 0 ? NAN : (double)(hwm - start) / 1024.0;
}

typedef struct pass {
    double seconds, mib;
    lb_tensor *output, *dq; /* copies, for the comparison of the two paths */
} pass;

/* One forward + backward pass over q, k, v [1, n, D]. */
static int attention_pass(const lb_tensor *const *qkv, int fused, pass *p)
{
    long start = peak_start();
    double t0 = now();
    lb_graph *g = lb_graph_new();
    if (!g)
        return 0;
    lb_var *q = lb_input_copy(g, qkv[0], 1), *k = lb_input_copy(g, qkv[1], 1), *v = lb_input_copy(g, qkv[2], 1);
    lb_var *out;
    if (fused) {
        out = lb_attention_fused(g, q, k, v, NULL, 1.0 / sqrt(D));
    } else {
        lb_var *scores = lb_matmul_t(g, q, 0, k, 1); /* [1, n, n] */
        out = lb_matmul(g, lb_masked_softmax(g, scores, NULL, 1.0 / sqrt(D)), v);
    }
    int ok = out && lb_backward(g, lb_sum(g, out), NULL) == LB_OK;
    if (ok) {
        p->output = lb_tensor_copy(out->value, LB_FLOAT32);
        p->dq = lb_tensor_copy(q->grad, LB_FLOAT32);
    }
    lb_graph_free(g);
    p->seconds = now() - t0;
    p->mib = peak_mib(start);
    return ok && p->output && p->dq;
}

static double max_abs_diff(const lb_tensor *a, const lb_tensor *b, double *scale)
{
    double d = 0;
    *scale = 0;
    for (int64_t i = 0; i < lb_tensor_numel(a); i++) {
        d = fmax(d, fabs(lb_tensor_flat(a, i) - lb_tensor_flat(b, i)));
        *scale = fmax(*scale, fabs(lb_tensor_flat(b, i)));
    }
    return d;
}

static int compare_doubles(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

/* Part 2: per-event time and state size of `kind` at each context in contexts[]. */
static int stream_costs(lb_model_kind kind, int n_contexts, const int64_t *contexts, double *us, size_t *bytes)
{
    lb_model_config cfg;
    lb_model_config_default(kind, &cfg);
    cfg.vocab_size = 16;
    cfg.num_classes = 4;
    cfg.d_model = D;
    cfg.hidden_size = D; /* the LSTM: two layers of (h, c) of 64 numbers */
    lb_model *m = lb_model_new(&cfg);
    lb_model_state *s = m ? lb_model_state_new(m, 1, NULL) : NULL;
    if (!s) {
        lb_model_free(m);
        return 0;
    }
    enum { CHUNK = 256, TIMED = 101 };
    int32_t tokens[CHUNK];
    for (int i = 0; i < CHUNK; i++)
        tokens[i] = (int32_t)((i * 7) % 16);
    int ok = 1;
    for (int c = 0; ok && c < n_contexts; c++) {
        /* Fill the context up to contexts[c] events, CHUNK events per call (chunked prefill). */
        int64_t seen;
        while (ok && (seen = lb_model_state_events(s, 0)) < contexts[c]) {
            lb_model_input in = {1, contexts[c] - seen < CHUNK ? contexts[c] - seen : CHUNK, tokens, NULL, NULL};
            lb_tensor *out = lb_model_step_chunk(s, &in);
            ok = out != NULL;
            lb_tensor_free(out);
        }
        bytes[c] = lb_model_state_bytes(s, 0);
        /* Then single events, each timed; the median is robust to the moments a busy
         * machine takes the core away. */
        double t[TIMED];
        for (int e = 0; ok && e < TIMED; e++) {
            double t0 = now();
            lb_tensor *out = lb_model_step(s, &tokens[e % CHUNK]);
            t[e] = now() - t0;
            ok = out != NULL;
            lb_tensor_free(out);
        }
        qsort(t, TIMED, sizeof t[0], compare_doubles);
        us[c] = 1e6 * t[TIMED / 2];
    }
    lb_model_state_free(s);
    lb_model_free(m);
    return ok;
}

int main(int argc, char **argv)
{
    int full = argc > 1 && strcmp(argv[1], "--full") == 0;
    if (argc > 2 || (argc == 2 && !full)) {
        fprintf(stderr, "usage: %s [--full]\n", argv[0]);
        return 2;
    }
    int64_t n_max = full ? 16384 : 2048;
    const char *threads = getenv("OMP_NUM_THREADS"); /* the library's thread count when set */
    printf("part 1: one forward + backward pass of attention, batch 1, d_k = d_v = %d, float32, OMP_NUM_THREADS=%s\n",
           D, threads ? threads : "unset");
    printf("%6s | %12s %12s | %12s %12s | %10s\n", "n", "materialized", "fused", "materialized", "fused",
           "same result");
    printf("%6s | %12s %12s | %12s %12s | %10s\n", "", "ms", "ms", "peak MiB", "peak MiB", "max diff");
    lb_rng rng;
    lb_rng_seed(&rng, 4096);
    pass warm;
    memset(&warm, 0, sizeof warm);
    double prev_mat = NAN, prev_fused = NAN;
    for (int64_t n = 256; n <= n_max; n *= 2) {
        const int64_t shape[3] = {1, n, D};
        lb_tensor *qkv[3];
        for (int i = 0; i < 3; i++) {
            qkv[i] = lb_tensor_zeros(LB_FLOAT32, 3, shape);
            REQUIRE(qkv[i], "inputs");
            lb_rng_fill_normal(&rng, qkv[i], 0, 1);
        }
        if (n == 256) { /* a first pass maps what every later pass reuses (thread pools, BLAS buffers) */
            REQUIRE(attention_pass((const lb_tensor *const *)qkv, 1, &warm), "warm-up");
            lb_tensor_free(warm.output);
            lb_tensor_free(warm.dq);
        }
        /* The fastest of 3 passes up to n = 2,048 (one beyond): the time least
         * disturbed by other work on the machine; memory from the first. */
        pass mat, fused;
        REQUIRE(attention_pass((const lb_tensor *const *)qkv, 0, &mat), "materialized attention");
        REQUIRE(attention_pass((const lb_tensor *const *)qkv, 1, &fused), "fused attention");
        for (int r = 1; r < (n <= 2048 ? 3 : 1); r++) {
            pass again[2];
            REQUIRE(attention_pass((const lb_tensor *const *)qkv, 0, &again[0]), "materialized attention");
            REQUIRE(attention_pass((const lb_tensor *const *)qkv, 1, &again[1]), "fused attention");
            mat.seconds = fmin(mat.seconds, again[0].seconds);
            fused.seconds = fmin(fused.seconds, again[1].seconds);
            for (int i = 0; i < 2; i++)
                lb_tensor_free(again[i].output), lb_tensor_free(again[i].dq);
        }
        double scale_out, scale_dq;
        double diff_out = max_abs_diff(fused.output, mat.output, &scale_out);
        double diff_dq = max_abs_diff(fused.dq, mat.dq, &scale_dq);
        printf("%6lld | %12.1f %12.1f | %12.1f %12.1f | %10.1e\n", (long long)n, 1e3 * mat.seconds,
               1e3 * fused.seconds, mat.mib, fused.mib, fmax(diff_out, diff_dq));

        /* Same result: outputs and query gradients agree to float32 rounding. */
        CHECK(diff_out <= 1e-5 * fmax(1, scale_out) && diff_dq <= 1e-4 * fmax(1, scale_dq),
              "n = %lld: fused and materialized differ by %g (output), %g (dq)", (long long)n, diff_out, diff_dq);
        CHECK(mat.seconds > 0 && fused.seconds > 0 && mat.seconds < 600 && fused.seconds < 600, "times are sane");
        double score_mib = (double)n * n * 4 / (1 << 20); /* one n × n float32 matrix */
        if (!isnan(mat.mib) && n >= 1024) {
            /* The materialized pass holds at least the scores and the weights; the fused
             * one never holds even one n × n matrix. */
            CHECK(mat.mib >= 2 * score_mib, "n = %lld: materialized peak %.1f MiB below 2 score matrices (%.1f)",
                  (long long)n, mat.mib, 2 * score_mib);
            CHECK(mat.mib > (n >= 2048 ? 4 : 2) * fused.mib, "n = %lld: memory ratio %.1f", (long long)n,
                  mat.mib / fused.mib);
            if (n >= 2048)
                CHECK(fused.mib < score_mib, "n = %lld: fused peak %.1f MiB not below one score matrix (%.1f)",
                      (long long)n, fused.mib, score_mib);
        }
        if (n == n_max && !isnan(prev_mat))
            printf("from n = %lld to %lld: materialized memory x%.1f (quadratic: x4), fused memory x%.1f (linear: x2)\n",
                   (long long)n / 2, (long long)n, mat.mib / prev_mat, fused.mib / prev_fused);
        if (n == n_max && !isnan(prev_mat) && n >= 2048)
            CHECK(mat.mib / prev_mat > 3 && fused.mib / prev_fused < 3, "memory grows as n² materialized, n fused");
        prev_mat = mat.mib;
        prev_fused = fused.mib;
        for (int i = 0; i < 3; i++)
            lb_tensor_free(qkv[i]);
        lb_tensor_free(mat.output), lb_tensor_free(mat.dq), lb_tensor_free(fused.output), lb_tensor_free(fused.dq);
    }
    if (isnan(prev_mat))
        printf("(peak memory not measured: /proc/self/clear_refs cannot be written here)\n");

    /* Part 2. */
    int64_t contexts[8];
    int n_contexts = 0;
    for (int64_t c = 256; c <= (full ? 16384 : 4096); c *= 4)
        contexts[n_contexts++] = c;
    double us_att[8], us_lstm[8];
    size_t bytes_att[8], bytes_lstm[8];
    REQUIRE(stream_costs(LB_MODEL_TRANSFORMER, n_contexts, contexts, us_att, bytes_att), "transformer stream");
    REQUIRE(stream_costs(LB_MODEL_LSTM, n_contexts, contexts, us_lstm, bytes_lstm), "LSTM stream");
    printf("\npart 2: streaming one event at a time, 2 layers of width %d (transformer: 4 heads; LSTM: hidden %d)\n", D,
           D);
    printf("%8s | %13s %13s | %13s %13s\n", "context", "transformer", "LSTM", "transformer", "LSTM");
    printf("%8s | %13s %13s | %13s %13s\n", "events", "us per event", "us per event", "state bytes", "state bytes");
    for (int c = 0; c < n_contexts; c++) {
        printf("%8lld | %13.1f %13.1f | %13zu %13zu\n", (long long)contexts[c], us_att[c], us_lstm[c], bytes_att[c],
               bytes_lstm[c]);
        /* The KV cache: keys and values of every event seen, 2 layers × 2 × 64 floats
         * each. The LSTM: (h, c) of 2 layers, 64 floats each. */
        CHECK(bytes_att[c] == (size_t)contexts[c] * 2 * 2 * D * sizeof(float), "KV cache of %lld events: %zu bytes",
              (long long)contexts[c], bytes_att[c]);
        CHECK(bytes_lstm[c] == 2 * 2 * D * sizeof(float), "LSTM state: %zu bytes", bytes_lstm[c]);
        CHECK(us_att[c] > 0 && us_lstm[c] > 0 && us_att[c] < 1e6 && us_lstm[c] < 1e6, "times are sane");
    }
    printf("the transformer's time per event grew %.1fx over %lldx more context; the LSTM's changed %.1fx\n",
           us_att[n_contexts - 1] / us_att[0], (long long)(contexts[n_contexts - 1] / contexts[0]),
           us_lstm[n_contexts - 1] / us_lstm[0]);
    return example_status();
}

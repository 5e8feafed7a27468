/* Thread-count independence of a whole training step: the elementwise kernels,
 * LayerNorm, copies, gradient accumulation, the fused attention and the matrix
 * products (lb_k_gemm's parts, each a single-threaded OpenBLAS call) split their work
 * so that 1 and 2 threads give the same bits. (OpenBLAS's own threaded sgemm does not
 * promise this: it rounds some of the step's products differently.) */
#include <cblas.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "autograd/autograd.h"
#include "autograd/ops.h"
#include "kernels/attention.h"
#include "kernels/gemm.h"
#include "kernels/lstm.h"
#include "layers/model.h"
#include "optim/optim.h"
#include "support.h"
#include "tensor/kernels.h"
#include "tensor/threads.h"

enum { B = 4, T = 192, V = 11 };

/* Two AdamW steps of a 2-layer transformer (LayerNorm, GELU, residuals, 4 heads, a
 * head on every position) from the same seed; returns the parameters, concatenated. */
static float *train_two_steps(int threads, int64_t *n_out)
{
    lb_set_num_threads(threads);
    /* a program that raised OpenBLAS's own count: lb_k_gemm sets it back to 1 */
    openblas_set_num_threads(threads);
    lb_model_config cfg;
    lb_model_config_default(LB_MODEL_TRANSFORMER, &cfg);
    cfg.vocab_size = V;
    cfg.num_classes = V;
    cfg.head = LB_HEAD_EVERY;
    cfg.max_seq_len = T;
    cfg.n_layers = 2;
    cfg.d_model = 96; /* B*T*d_model elements: above the size where loops split */
    cfg.n_heads = 4;
    cfg.d_ff = 192;
    cfg.causal = 1;
    cfg.dropout = 0.0;
    cfg.seed = 5;
    lb_model *m = lb_model_new(&cfg);
    CU_ASSERT_PTR_NOT_NULL_FATAL(m);
    int32_t tokens[B * T], targets[B * T];
    for (int i = 0; i < B * T; i++) {
        tokens[i] = (int32_t)((i * 7 + i / 13) % V);
        targets[i] = (int32_t)((i * 5 + 3) % V);
    }
    lb_model_input in = {B, T, tokens, NULL, NULL};
    lb_params *ps = lb_model_params(m);
    lb_optim_config oc = lb_optim_defaults(LB_OPTIM_ADAMW);
    lb_optim *opt = lb_optim_new(&oc, ps->items, ps->count);
    lb_graph *g = lb_graph_new();
    for (int step = 0; step < 2; step++) {
        lb_var *logits = lb_model_forward(g, m, &in, 1, NULL, NULL);
        lb_var *loss = lb_cross_entropy(g, logits, targets, -100);
        CU_ASSERT_PTR_NOT_NULL_FATAL(loss);
        CU_ASSERT_EQUAL(lb_backward(g, loss, NULL), LB_OK);
        CU_ASSERT_EQUAL(lb_optim_step(opt), LB_OK);
        lb_optim_zero_grad(opt);
        lb_graph_reset(g);
    }
    int64_t n = lb_params_numel(ps), at = 0;
    float *all = malloc((size_t)n * sizeof *all);
    for (int i = 0; i < ps->count; i++) {
        const lb_tensor *v = ps->items[i]->value;
        int64_t k = lb_tensor_numel(v);
        memcpy(all + at, lb_tensor_data(v), (size_t)k * sizeof *all);
        at += k;
    }
    *n_out = n;
    lb_graph_free(g);
    lb_optim_free(opt);
    lb_model_free(m);
    return all;
}

static void test_transformer_step_same_bits(void)
{
    int before = lb_get_num_threads();
    int64_t n1 = 0, n2 = 0, n2b = 0;
    float *two = train_two_steps(2, &n2);
    float *two_again = train_two_steps(2, &n2b);
    float *one = train_two_steps(1, &n1);
    CU_ASSERT_EQUAL_FATAL(n1, n2);
    CU_ASSERT_EQUAL_FATAL(n2, n2b);
    CU_ASSERT_TRUE(n1 > 100000);
    CU_ASSERT_EQUAL(memcmp(one, two, (size_t)n1 * sizeof *one), 0);
    CU_ASSERT_EQUAL(memcmp(two, two_again, (size_t)n1 * sizeof *one), 0);
    free(one);
    free(two);
    free(two_again);
    lb_set_num_threads(before);
}

/* c [m, n] (row stride ldc) = op(a) op(b) through lb_k_gemm with `threads` threads,
 * c starting from ones (beta = 0.5). a, b hold values exact in float. */
static float *gemm_with(int threads, int ta, int tb, int64_t m, int64_t n, int64_t k, int64_t ldc, const float *a,
                        const float *b)
{
    lb_set_num_threads(threads);
    openblas_set_num_threads(threads);
    float *c = malloc(sizeof(float) * (size_t)(m * ldc));
    for (int64_t i = 0; i < m * ldc; i++)
        c[i] = 1.0f;
    lb_k_gemm(LB_FLOAT32, ta, tb, m, n, k, 1.5, a, ta ? m : k, b, tb ? k : n, 0.5, c, ldc);
    CU_ASSERT_EQUAL(openblas_get_num_threads(), 1);
    return c;
}

/* Large products are cut into parts over c's rows (or columns when c has few rows);
 * the parts depend on the shape alone, and 1 and 2 threads give the same bits, which
 * also match a double-precision reference. */
static void test_gemm_parts_same_bits(void)
{
    int before = lb_get_num_threads();
    lb_gemm_split sp;
    lb_k_gemm_split(16384, 256, 64, &sp); /* W2's FFN product */
    CU_ASSERT_EQUAL(sp.parts, 8);
    CU_ASSERT_EQUAL(sp.by_rows, 1);
    CU_ASSERT_EQUAL(sp.size, 2048);
    lb_k_gemm_split(64, 256, 16384, &sp); /* a weight gradient: the k sum is never cut */
    CU_ASSERT_EQUAL(sp.parts, 2);
    CU_ASSERT_EQUAL(sp.by_rows, 0);
    CU_ASSERT_EQUAL(sp.size, 128);
    lb_k_gemm_split(1000, 70, 40, &sp); /* 2.8 M multiply-adds: two parts of 512 and 488 rows */
    CU_ASSERT_EQUAL(sp.parts, 2);
    CU_ASSERT_EQUAL(sp.size, 512);
    lb_k_gemm_split(200, 200, 200, &sp); /* too few rows and columns for two 128-wide parts */
    CU_ASSERT_EQUAL(sp.parts, 1);
    lb_k_gemm_split(4096, 64, 2, &sp); /* too little work */
    CU_ASSERT_EQUAL(sp.parts, 1);

    static const struct {
        int ta, tb;
        int64_t m, n, k;
    } shapes[] = {
        {0, 0, 1000, 70, 40},  /* rows, two parts, the last one shorter */
        {1, 0, 72, 600, 1500}, /* columns (a weight gradient's layout), four parts */
        {0, 1, 900, 130, 33},  /* b transposed */
        {1, 1, 530, 290, 60},
    };
    for (size_t s = 0; s < sizeof shapes / sizeof shapes[0]; s++) {
        const int ta = shapes[s].ta, tb = shapes[s].tb;
        const int64_t m = shapes[s].m, n = shapes[s].n, k = shapes[s].k, ldc = n + 3;
        lb_k_gemm_split(m, n, k, &sp);
        CU_ASSERT_TRUE(sp.parts >= 2);
        float *a = malloc(sizeof(float) * (size_t)(m * k)), *b = malloc(sizeof(float) * (size_t)(k * n));
        for (int64_t i = 0; i < m * k; i++)
            a[i] = (float)((i * 7919 % 211) - 105) / 128.0f;
        for (int64_t i = 0; i < k * n; i++)
            b[i] = (float)((i * 104729 % 199) - 99) / 64.0f;
        float *one = gemm_with(1, ta, tb, m, n, k, ldc, a, b);
        float *two = gemm_with(2, ta, tb, m, n, k, ldc, a, b);
        CU_ASSERT_EQUAL(memcmp(one, two, sizeof(float) * (size_t)(m * ldc)), 0);
        double worst = 0;
        for (int64_t i = 0; i < m; i += 7)
            for (int64_t j = 0; j < n; j++) {
                double sum = 0;
                for (int64_t p = 0; p < k; p++)
                    sum += (double)(ta ? a[p * m + i] : a[i * k + p]) * (tb ? b[j * k + p] : b[p * n + j]);
                double want = 1.5 * sum + 0.5;
                double err = fabs(want - two[i * ldc + j]) / (1.0 + fabs(want));
                worst = err > worst ? err : worst;
            }
        CU_ASSERT_TRUE(worst < 1e-5);
        for (int64_t i = 0; i < m; i++) /* the gap between rows is left alone */
            for (int64_t j = n; j < ldc; j++)
                CU_ASSERT_EQUAL(two[i * ldc + j], 1.0f);
        free(one);
        free(two);
        free(a);
        free(b);
    }
    lb_set_num_threads(before);
}

/* libgomp's spin default: set when the user chose nothing, a user's choice kept. */
static void test_omp_wait_defaults(void)
{
    char *policy = getenv("OMP_WAIT_POLICY") ? strdup(getenv("OMP_WAIT_POLICY")) : NULL;
    char *spin = getenv("GOMP_SPINCOUNT") ? strdup(getenv("GOMP_SPINCOUNT")) : NULL;
    unsetenv("OMP_WAIT_POLICY");
    unsetenv("GOMP_SPINCOUNT");
    CU_ASSERT_EQUAL(lb_omp_wait_defaults(), 1);
    CU_ASSERT_STRING_EQUAL(getenv("GOMP_SPINCOUNT"), LB_GOMP_SPINCOUNT);
    CU_ASSERT_EQUAL(lb_omp_wait_defaults(), 0); /* set now: a re-executed program goes on */
    unsetenv("GOMP_SPINCOUNT");
    setenv("OMP_WAIT_POLICY", "active", 1);
    CU_ASSERT_EQUAL(lb_omp_wait_defaults(), 0);
    CU_ASSERT_PTR_NULL(getenv("GOMP_SPINCOUNT"));
    unsetenv("OMP_WAIT_POLICY");
    setenv("GOMP_SPINCOUNT", "77", 1);
    CU_ASSERT_EQUAL(lb_omp_wait_defaults(), 0);
    CU_ASSERT_STRING_EQUAL(getenv("GOMP_SPINCOUNT"), "77");
    unsetenv("GOMP_SPINCOUNT");
    if (policy)
        setenv("OMP_WAIT_POLICY", policy, 1);
    if (spin)
        setenv("GOMP_SPINCOUNT", spin, 1);
    free(policy);
    free(spin);
}

/* lb_k_gemm's exception (kernels/gemm.h): float32 products of narrow layers run on the
 * attention kernels' tile micro-kernel, c [m, n] = alpha op(a) b + beta c (beta 0 and 1):
 *   forward, a [m, k]: n and k <= 64, m = 1,000 (cut into parts);
 *   weight gradient, a [k, m] read transposed: m, n <= 64, k >= 512 in chunks of 1,024
 *   (one, two and three chunks, the last one short).
 * Shapes leave rows and lanes after the register blocks; every operand lies inside a
 * wider matrix. The same bits at 1 and 2 threads and, for the forward, row by row (a
 * streaming step's single row); c's columns past n untouched; within float32 rounding
 * of a double reference and of OpenBLAS (the "generic" build). */
static void test_gemm_on_tiles(void)
{
    int before = lb_get_num_threads();
    static const struct {
        int trans_a;
        int64_t m, n, k;
    } cases[] = {{0, 1000, 64, 64}, {0, 1000, 37, 3}, {0, 1000, 61, 64}, {0, 1000, 1, 50},
                 {1, 64, 64, 4096},  {1, 37, 100, 1500}, {1, 64, 61, 513},  {1, 5, 3, 2049}};
    for (size_t s = 0; s < sizeof cases / sizeof cases[0]; s++)
        for (int beta = 0; beta <= 1; beta++) {
            const int ta = cases[s].trans_a;
            const int64_t m = cases[s].m, n = cases[s].n, k = cases[s].k;
            const int64_t a_rows = ta ? k : m, lda = (ta ? m : k) + 3, ldb = n + 1, ldc = n + 2;
            float *a = malloc(sizeof(float) * (size_t)(a_rows * lda)), *b = malloc(sizeof(float) * (size_t)(k * ldb));
            float *c0 = malloc(sizeof(float) * (size_t)(m * ldc)), *c[4];
            for (int64_t i = 0; i < a_rows * lda; i++)
                a[i] = (float)((i * 7919 % 211) - 105) / 128.0f;
            for (int64_t i = 0; i < k * ldb; i++)
                b[i] = (float)((i * 104729 % 199) - 99) / 64.0f;
            for (int64_t i = 0; i < m * ldc; i++)
                c0[i] = (float)(i % 5) * 0.25f;
            for (int r = 0; r < 4; r++) { /* 1 thread, 2 threads, OpenBLAS, row by row */
                c[r] = malloc(sizeof(float) * (size_t)(m * ldc));
                memcpy(c[r], c0, sizeof(float) * (size_t)(m * ldc));
                lb_set_num_threads(r == 1 ? 2 : 1);
                if (r == 2)
                    CU_ASSERT_EQUAL(lb_k_attention_set_isa("generic"), LB_OK);
                if (r < 3)
                    lb_k_gemm(LB_FLOAT32, ta, 0, m, n, k, 0.75, a, lda, b, ldb, beta, c[r], ldc);
                else if (!ta)
                    for (int64_t i = 0; i < m; i++)
                        lb_k_gemm(LB_FLOAT32, 0, 0, 1, n, k, 0.75, a + i * lda, lda, b, ldb, beta, c[r] + i * ldc, ldc);
                CU_ASSERT_EQUAL(lb_k_attention_set_isa("auto"), LB_OK);
            }
            CU_ASSERT_EQUAL(memcmp(c[0], c[1], sizeof(float) * (size_t)(m * ldc)), 0);
            if (!ta)
                CU_ASSERT_EQUAL(memcmp(c[0], c[3], sizeof(float) * (size_t)(m * ldc)), 0);
            double worst = 0, worst_blas = 0;
            int untouched = 1;
            for (int64_t i = 0; i < m; i++) {
                for (int64_t j = 0; j < n; j++) {
                    double sum = 0, mag = 0;
                    for (int64_t l = 0; l < k; l++) {
                        double t = (double)a[ta ? l * lda + i : i * lda + l] * (double)b[l * ldb + j];
                        sum += t;
                        mag += fabs(t);
                    }
                    double want = 0.75 * sum + beta * (double)c0[i * ldc + j];
                    double e = fabs(c[0][i * ldc + j] - want) / (mag + 1.0);
                    double eb = fabs(c[0][i * ldc + j] - c[2][i * ldc + j]) / (mag + 1.0);
                    worst = e > worst ? e : worst;
                    worst_blas = eb > worst_blas ? eb : worst_blas;
                }
                for (int64_t j = n; j < ldc; j++)
                    untouched &= c[0][i * ldc + j] == c0[i * ldc + j];
            }
            CU_ASSERT_TRUE(worst < 1e-6);
            CU_ASSERT_TRUE(worst_blas < 1e-6);
            CU_ASSERT_TRUE(untouched);
            for (int r = 0; r < 4; r++)
                free(c[r]);
            free(a);
            free(b);
            free(c0);
        }
    lb_set_num_threads(before);
}

/* One LSTM event for B streams (lb_k_lstm_step, its float32 loops with both weights
 * transposed): the gate columns split over 2 threads give the same bits as 1 thread,
 * and match the step on OpenBLAS (no copies) within float32 rounding. B = 16 at
 * hidden_size 128 (the streaming benchmark's batch), and hidden_size 40 (160 gate
 * columns: a last block of 32) at B = 128. */
static void test_lstm_step_same_bits(void)
{
    int before = lb_get_num_threads();
    static const struct {
        int64_t batch, n_in, H;
    } shapes[] = {{16, 64, 128}, {128, 24, 40}};
    for (size_t s = 0; s < sizeof shapes / sizeof shapes[0]; s++) {
        const int64_t batch = shapes[s].batch, n_in = shapes[s].n_in, H = shapes[s].H, G = 4 * H;
        if (!lb_k_lstm_step_uses_copies(LB_FLOAT32, G))
            continue; /* no float32 loops on this CPU: the step is lb_k_gemm's */
        size_t ns = (size_t)(batch * H);
        float *w_ih = malloc(sizeof(float) * (size_t)(G * n_in)), *w_hh = malloc(sizeof(float) * (size_t)(G * H));
        float *w_ih_t = malloc(sizeof(float) * (size_t)(G * n_in)), *w_hh_t = malloc(sizeof(float) * (size_t)(G * H));
        float *b_ih = malloc(sizeof(float) * (size_t)G), *b_hh = malloc(sizeof(float) * (size_t)G);
        float *x = malloc(sizeof(float) * (size_t)(batch * n_in)), *hp = malloc(sizeof(float) * ns);
        float *cp = malloc(sizeof(float) * ns), *gates[3], *h[3], *c[3];
        for (size_t i = 0; i < (size_t)(G * n_in); i++)
            w_ih[i] = (float)((int64_t)(i * 7919 % 211) - 105) / 1024.0f;
        for (size_t i = 0; i < (size_t)(G * H); i++)
            w_hh[i] = (float)((int64_t)(i * 104729 % 199) - 99) / 1024.0f;
        for (int64_t j = 0; j < G; j++) {
            b_ih[j] = (float)(j % 7) / 8.0f - 0.375f;
            b_hh[j] = (float)(j % 5) / 16.0f;
        }
        for (int64_t i = 0; i < batch * n_in; i++)
            x[i] = (float)((i * 31 % 17) - 8) / 8.0f;
        for (size_t i = 0; i < ns; i++) {
            hp[i] = (float)((int64_t)(i * 13 % 11) - 5) / 6.0f;
            cp[i] = (float)((int64_t)(i * 3 % 7) - 3) / 2.0f;
        }
        lb_k_lstm_transpose_weight(LB_FLOAT32, G, n_in, w_ih, w_ih_t);
        lb_k_lstm_transpose_weight(LB_FLOAT32, G, H, w_hh, w_hh_t);
        for (int r = 0; r < 3; r++) { /* 1 thread, 2 threads, OpenBLAS */
            gates[r] = malloc(sizeof(float) * (size_t)(batch * G));
            h[r] = malloc(sizeof(float) * ns);
            c[r] = malloc(sizeof(float) * ns);
            lb_set_num_threads(r == 1 ? 2 : 1);
            lb_k_lstm_step(LB_FLOAT32, batch, n_in, H, x, w_ih, r < 2 ? w_ih_t : NULL, b_ih, b_hh, w_hh,
                           r < 2 ? w_hh_t : NULL, hp, cp, gates[r], h[r], c[r]);
        }
        CU_ASSERT_EQUAL(memcmp(h[0], h[1], sizeof(float) * ns), 0);
        CU_ASSERT_EQUAL(memcmp(c[0], c[1], sizeof(float) * ns), 0);
        CU_ASSERT_EQUAL(memcmp(gates[0], gates[1], sizeof(float) * (size_t)(batch * G)), 0);
        double worst = 0;
        int changed = 0;
        for (size_t i = 0; i < ns; i++) {
            double d = fabs((double)h[0][i] - h[2][i]) + fabs((double)c[0][i] - c[2][i]);
            worst = d > worst ? d : worst;
            changed |= h[0][i] != 0.0f;
        }
        CU_ASSERT_TRUE(worst < 1e-5);
        CU_ASSERT_TRUE(changed);
        for (int r = 0; r < 3; r++) {
            free(gates[r]);
            free(h[r]);
            free(c[r]);
        }
        free(w_ih), free(w_hh), free(w_ih_t), free(w_hh_t), free(b_ih), free(b_hh), free(x), free(hp), free(cp);
    }
    lb_set_num_threads(before);
}

/* Loops split only when there is enough work for each thread. */
static void test_threads_for(void)
{
    int before = lb_get_num_threads();
    lb_set_num_threads(2);
    CU_ASSERT_EQUAL(lb_threads_for(10, 100), 1);
    CU_ASSERT_EQUAL(lb_threads_for(150, 100), 1);
    CU_ASSERT_EQUAL(lb_threads_for(200, 100), 2);
    CU_ASSERT_EQUAL(lb_threads_for(1 << 30, 100), 2);
    lb_set_num_threads(1);
    CU_ASSERT_EQUAL(lb_threads_for(1 << 30, 100), 1);
    lb_set_num_threads(before);
}

int main(void)
{
    const lb_test_case cases[] = {
        {"lb_threads_for splits only large loops", test_threads_for},
        {"lb_k_gemm's parts: 1 and 2 threads, same bits", test_gemm_parts_same_bits},
        {"lb_k_gemm's narrow products on the tile micro-kernel", test_gemm_on_tiles},
        {"an LSTM event for 16 streams: 1 and 2 threads, same bits", test_lstm_step_same_bits},
        {"libgomp's spin default, a user's choice kept", test_omp_wait_defaults},
        {"a transformer training step: 1 and 2 threads, same bits", test_transformer_step_same_bits},
        {NULL, NULL},
    };
    return lb_test_main("threads", cases);
}

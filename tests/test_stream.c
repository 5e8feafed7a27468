/* Streaming inference (layers/stream.h): for every family and position kind, fed
 * event by event or in chunks of 7, 128 or the whole sequence, with several layers
 * and streams of different lengths, the outputs equal the full forward's at every
 * position (1e-5 in float32, 1e-12 in float64); max_context equals local attention;
 * state sizes; errors leave the state as it was. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kernels/lstm.h"
#include "layers/model.h"
#include "layers/stream.h"
#include "support.h"

enum { NB = 3, NT = 160, VOCAB = 11, CLASSES = 3 };
static const int32_t lengths[NB] = {NT, 131, 77};

static lb_model_config config(lb_model_kind kind, lb_pos_kind pos, lb_dtype dtype)
{
    return lb_test_small_model(kind, pos, dtype, VOCAB, CLASSES, 9, 200, 7 + (uint64_t)kind * 10 + (uint64_t)pos);
}

static void random_tokens(int32_t *tokens, int64_t n, uint64_t seed)
{
    lb_rng r;
    lb_rng_seed(&r, seed);
    for (int64_t i = 0; i < n; i++)
        tokens[i] = (int32_t)(lb_rng_uniform(&r) * VOCAB) % VOCAB;
}

/* The full forward's outputs [B, T, classes] (regression: [B, T]). */
static lb_tensor *full_forward(lb_model *m, const lb_model_input *in)
{
    lb_graph *g = lb_graph_new();
    lb_graph_set_grad_enabled(g, 0);
    lb_var *y = lb_model_forward(g, m, in, 0, NULL, NULL);
    CU_ASSERT_PTR_NOT_NULL_FATAL(y);
    lb_tensor *out = lb_tensor_copy(y->value, y->value->dtype);
    lb_graph_free(g);
    return out;
}

/* Streams `in` through a fresh state in chunks of `chunk` events and returns the
 * largest |streamed - full| over every valid position of every stream. */
static double stream_max_diff(lb_model *m, const lb_model_input *in, const lb_tensor *full, int64_t chunk,
                              const lb_stream_options *opt)
{
    int64_t b = in->batch, t = in->seq_len, width = lb_model_get_config(m)->num_classes;
    int64_t w = width > 0 ? width : 1;
    int64_t fdim = in->features ? in->features->shape[2] : 0;
    lb_model_state *s = lb_model_state_new(m, b, opt);
    CU_ASSERT_PTR_NOT_NULL_FATAL(s);
    double worst = 0;
    int32_t *tok = malloc((size_t)(b * chunk) * sizeof *tok);
    for (int64_t t0 = 0; t0 < t; t0 += chunk) {
        int64_t n = t - t0 < chunk ? t - t0 : chunk;
        int32_t counts[NB + 1];
        lb_tensor *feat = NULL;
        for (int64_t bi = 0; bi < b; bi++) {
            int64_t len = in->lengths ? in->lengths[bi] : t, c = len - t0;
            counts[bi] = (int32_t)(c < 0 ? 0 : c > n ? n : c);
            if (in->tokens)
                memcpy(tok + bi * n, in->tokens + bi * t + t0, (size_t)n * sizeof *tok);
        }
        if (in->features) {
            lb_tensor *v = lb_tensor_slice(in->features, 1, t0, t0 + n, 1);
            feat = lb_tensor_copy(v, v->dtype);
            lb_tensor_free(v);
        }
        lb_model_input ci = {b, n, in->tokens ? tok : NULL, feat, counts};
        lb_tensor *out = lb_model_step_chunk(s, &ci);
        if (!out)
            fprintf(stderr, "\n  step failed: %s\n", lb_last_error());
        CU_ASSERT_PTR_NOT_NULL_FATAL(out);
        for (int64_t bi = 0; bi < b; bi++)
            for (int64_t i = 0; i < counts[bi]; i++)
                for (int64_t k = 0; k < w; k++) {
                    double a = lb_tensor_flat(out, (bi * n + i) * w + k);
                    double e = lb_tensor_flat(full, (bi * t + t0 + i) * w + k);
                    if (!(fabs(a - e) <= worst))
                        worst = fabs(a - e);
                }
        lb_tensor_free(out);
        lb_tensor_free(feat);
    }
    for (int64_t bi = 0; bi < b; bi++)
        CU_ASSERT_EQUAL(lb_model_state_events(s, bi), in->lengths ? in->lengths[bi] : t);
    (void)fdim;
    free(tok);
    lb_model_state_free(s);
    return worst;
}

/* Streamed outputs of model c equal the full forward's, for chunks 1, 7, 128, whole. */
static void check_config(const lb_model_config *c, lb_model *m);

static void check_family(lb_model_kind kind, lb_pos_kind pos, lb_dtype dtype)
{
    lb_model_config c = config(kind, pos, dtype);
    lb_model *m = lb_model_new(&c);
    CU_ASSERT_PTR_NOT_NULL_FATAL(m);
    check_config(&c, m);
    lb_model_free(m);
}

static void check_config(const lb_model_config *c, lb_model *m)
{
    lb_model_kind kind = c->kind;
    lb_pos_kind pos = c->pos;
    lb_dtype dtype = c->dtype;
    int32_t tokens[NB * NT];
    random_tokens(tokens, NB * NT, 100 + (uint64_t)kind);
    lb_model_input in = {NB, NT, tokens, NULL, lengths};
    lb_tensor *full = full_forward(m, &in);
    double tol = dtype == LB_FLOAT32 ? 1e-5 : 1e-12;
    const int64_t chunks[4] = {1, 7, 128, NT};
    for (int i = 0; i < 4; i++) {
        double d = stream_max_diff(m, &in, full, chunks[i], NULL);
        if (!(d <= tol))
            fprintf(stderr, "\n  %s pos %s %s chunk %lld: max |streamed - full| = %.3g\n", lb_model_kind_name(kind),
                    lb_pos_kind_name(pos), lb_dtype_name(dtype), (long long)chunks[i], d);
        CU_ASSERT_TRUE(d <= tol);
    }
    lb_tensor_free(full);
}

/* Length-scaled logits (log n, scalable softmax with a different s per head) stream
 * exactly: each streamed query counts the keys it sees as the full forward does. */
static void test_length_scale(void)
{
    for (int kind = LB_MODEL_TRANSFORMER; kind <= LB_MODEL_LOCAL; kind++)
        for (int scale = LB_LENGTH_SCALE_LOG_N; scale <= LB_LENGTH_SCALE_SCALABLE; scale++) {
            lb_model_config c = config((lb_model_kind)kind, LB_POS_ROTARY, LB_FLOAT64);
            c.length_scale = (lb_length_scale)scale;
            lb_model *m = lb_model_new(&c);
            CU_ASSERT_PTR_NOT_NULL_FATAL(m);
            lb_params *ps = lb_model_params(m);
            for (int i = 0; i < ps->count; i++)
                if (strstr(ps->items[i]->name, "softmax_scale"))
                    for (int64_t h = 0; h < ps->items[i]->value->shape[0]; h++)
                        lb_tensor_set(ps->items[i]->value, &h, 0.15 + 0.2 * (double)h + 0.05 * i);
            check_config(&c, m);
            lb_model_free(m);
        }
}

/* The block options (norm, norm position, feed-forward kind, biases) stream exactly, in
 * float32 and float64, full and local attention. */
static void test_block_options(void)
{
    static const struct {
        lb_norm_kind norm;
        lb_norm_position position;
        lb_ffn_kind ffn;
        int bias;
    } blocks[] = {
        {LB_NORM_RMSNORM, LB_NORM_PRE, LB_FFN_SWIGLU, 0}, {LB_NORM_RMSNORM, LB_NORM_POST, LB_FFN_GELU, 1},
        {LB_NORM_LAYERNORM, LB_NORM_POST, LB_FFN_GEGLU, 1}, {LB_NORM_LAYERNORM, LB_NORM_PRE, LB_FFN_SWIGLU, 1},
    };
    for (size_t i = 0; i < sizeof blocks / sizeof blocks[0]; i++)
        for (int kind = LB_MODEL_TRANSFORMER; kind <= LB_MODEL_LOCAL; kind++)
            for (int dt = LB_FLOAT32; dt <= LB_FLOAT64; dt++) {
                lb_model_config c = config((lb_model_kind)kind, LB_POS_ROTARY, (lb_dtype)dt);
                c.norm = blocks[i].norm;
                c.norm_position = blocks[i].position;
                c.ffn = blocks[i].ffn;
                c.bias = blocks[i].bias;
                lb_model *m = lb_model_new(&c);
                CU_ASSERT_PTR_NOT_NULL_FATAL(m);
                check_config(&c, m);
                lb_model_free(m);
            }
}

static void test_transformer(void)
{
    for (int p = LB_POS_NONE; p <= LB_POS_ALIBI; p++) {
        check_family(LB_MODEL_TRANSFORMER, (lb_pos_kind)p, LB_FLOAT32);
        check_family(LB_MODEL_TRANSFORMER, (lb_pos_kind)p, LB_FLOAT64);
    }
}

static void test_local(void)
{
    for (int p = LB_POS_NONE; p <= LB_POS_ALIBI; p++) {
        check_family(LB_MODEL_LOCAL, (lb_pos_kind)p, LB_FLOAT32);
        check_family(LB_MODEL_LOCAL, (lb_pos_kind)p, LB_FLOAT64);
    }
}

static void test_lstm(void)
{
    check_family(LB_MODEL_LSTM, LB_POS_NONE, LB_FLOAT32);
    check_family(LB_MODEL_LSTM, LB_POS_NONE, LB_FLOAT64);
    /* 4H = 64: the event step's float32 AVX2 / AVX-512 loops on the transposed weights */
    lb_model_config c = config(LB_MODEL_LSTM, LB_POS_NONE, LB_FLOAT32);
    c.hidden_size = 16;
    lb_model *m = lb_model_new(&c);
    CU_ASSERT_PTR_NOT_NULL_FATAL(m);
    check_config(&c, m);
    lb_model_free(m);
}

static void test_conv(void)
{
    check_family(LB_MODEL_CONV, LB_POS_NONE, LB_FLOAT32);
    check_family(LB_MODEL_CONV, LB_POS_NONE, LB_FLOAT64);
}

/* Linear attention's carried (S, z) per layer and head, without and with decay. */
static void test_linear(void)
{
    check_family(LB_MODEL_LINEAR, LB_POS_NONE, LB_FLOAT32);
    check_family(LB_MODEL_LINEAR, LB_POS_NONE, LB_FLOAT64);
    for (int dt = 0; dt < 2; dt++) {
        lb_model_config c = config(LB_MODEL_LINEAR, LB_POS_NONE, dt ? LB_FLOAT64 : LB_FLOAT32);
        c.decay = 1;
        lb_model *m = lb_model_new(&c);
        CU_ASSERT_PTR_NOT_NULL_FATAL(m);
        check_config(&c, m);
        lb_model_free(m);
    }
}

/* Mamba's convolution histories and scan states; a kernel of one tap keeps no history. */
static void test_mamba(void)
{
    check_family(LB_MODEL_MAMBA, LB_POS_NONE, LB_FLOAT32);
    check_family(LB_MODEL_MAMBA, LB_POS_NONE, LB_FLOAT64);
    lb_model_config c = config(LB_MODEL_MAMBA, LB_POS_NONE, LB_FLOAT64);
    c.d_conv = 1;
    c.d_state = 5;
    lb_model *m = lb_model_new(&c);
    CU_ASSERT_PTR_NOT_NULL_FATAL(m);
    check_config(&c, m);
    lb_model_free(m);
}

/* Real-valued inputs and a regression head, every family, float64. */
static void test_features_regression(void)
{
    for (int k = LB_MODEL_TRANSFORMER; k < LB_MODEL_KIND_COUNT; k++) {
        lb_model_config c = config((lb_model_kind)k, k == LB_MODEL_TRANSFORMER ? LB_POS_ROTARY : LB_POS_SINUSOIDAL,
                                   LB_FLOAT64);
        c.vocab_size = 0;
        c.input_features = 2;
        c.num_classes = 0;
        lb_model *m = lb_model_new(&c);
        CU_ASSERT_PTR_NOT_NULL_FATAL(m);
        int64_t shape[3] = {NB, 40, 2};
        lb_tensor *f = lb_test_random_tensor(LB_FLOAT64, 3, shape, 3);
        int32_t lens[NB] = {40, 23, 1};
        lb_model_input in = {NB, 40, NULL, f, lens};
        lb_tensor *full = full_forward(m, &in);
        CU_ASSERT_EQUAL(full->ndim, 2);
        for (int64_t chunk = 1; chunk <= 40; chunk += 13) {
            double d = stream_max_diff(m, &in, full, chunk, NULL);
            CU_ASSERT_TRUE(d <= 1e-12);
        }
        lb_tensor_free(full);
        lb_tensor_free(f);
        lb_model_free(m);
    }
}

/* lb_model_step: one event per stream, [B, classes]; equal to the chunked path. */
static void test_single_step(void)
{
    lb_model_config c = config(LB_MODEL_TRANSFORMER, LB_POS_LEARNED, LB_FLOAT64);
    c.head = LB_HEAD_LAST;
    lb_model *m = lb_model_new(&c);
    int32_t tokens[2 * 20];
    random_tokens(tokens, 40, 9);
    lb_model_state *s = lb_model_state_new(m, 2, NULL);
    CU_ASSERT_PTR_NOT_NULL_FATAL(s);
    lb_tensor *out = NULL;
    for (int t = 0; t < 20; t++) {
        int32_t step[2] = {tokens[t], tokens[20 + t]};
        lb_tensor_free(out);
        out = lb_model_step(s, step);
        CU_ASSERT_PTR_NOT_NULL_FATAL(out);
    }
    CU_ASSERT_EQUAL(out->ndim, 2);
    CU_ASSERT_EQUAL(out->shape[0], 2);
    CU_ASSERT_EQUAL(out->shape[1], CLASSES);
    /* The last step equals the classifier (head = last) on the 20 events. */
    lb_model_input in = {2, 20, tokens, NULL, NULL};
    lb_tensor *full = full_forward(m, &in);
    LB_ASSERT_TENSORS_CLOSE(out, full, 1e-12, 0);
    /* A reset stream starts again at position 0: its first output is the full
     * forward's on one event. */
    lb_model_state_reset(s, 1);
    CU_ASSERT_EQUAL(lb_model_state_events(s, 1), 0);
    CU_ASSERT_EQUAL(lb_model_state_events(s, 0), 20);
    lb_model_input one = {1, 1, tokens + 20, NULL, NULL};
    lb_tensor *first = full_forward(m, &one);
    int32_t step[2] = {0, tokens[20]};
    lb_tensor *again = lb_model_step(s, step);
    CU_ASSERT_PTR_NOT_NULL_FATAL(again);
    for (int k = 0; k < CLASSES; k++)
        CU_ASSERT_DOUBLE_EQUAL(lb_tensor_flat(again, CLASSES + k), lb_tensor_flat(first, k), 1e-12);
    lb_tensor_free(again);
    lb_tensor_free(first);
    lb_tensor_free(full);
    lb_tensor_free(out);
    lb_model_state_free(s);
    lb_model_free(m);
}

/* max_context N on full attention gives what the same weights give with a local
 * window of N (the kinds share their parameters), while the cache stays bounded. */
static void test_max_context(void)
{
    for (int p = LB_POS_NONE; p <= LB_POS_ROTARY; p += 3) {
        lb_model_config c = config(LB_MODEL_TRANSFORMER, (lb_pos_kind)p, LB_FLOAT64);
        lb_model_config lc = c;
        lc.kind = LB_MODEL_LOCAL;
        lc.window = 12;
        lb_model *m = lb_model_new(&c), *local = lb_model_new(&lc);
        CU_ASSERT_PTR_NOT_NULL_FATAL(local);
        int32_t tokens[NB * NT];
        random_tokens(tokens, NB * NT, 5);
        lb_model_input in = {NB, NT, tokens, NULL, lengths};
        lb_tensor *windowed = full_forward(local, &in);
        lb_stream_options o = {0, 12, 0};
        CU_ASSERT_TRUE(stream_max_diff(m, &in, windowed, 1, &o) <= 1e-12);
        CU_ASSERT_TRUE(stream_max_diff(m, &in, windowed, 50, &o) <= 1e-12);
        lb_model_state *s = lb_model_state_new(m, 1, &o);
        for (int t = 0; t < 100; t++) {
            lb_tensor_free(lb_model_step(s, &tokens[t]));
        }
        /* 2 L window D doubles held; the cache never grew past 2 window rows. */
        CU_ASSERT_EQUAL(lb_model_state_bytes(s, 0), (size_t)(2 * 2 * 12 * 16 * 8));
        CU_ASSERT_EQUAL(lb_model_state_allocated(s), (size_t)(2 * 2 * (2 * 12) * 16 * 8));
        lb_model_state_free(s);
        lb_tensor_free(windowed);
        lb_model_free(m);
        lb_model_free(local);
    }
}

/* Grouped-query attention (4 query heads over 2 or 1 key/value heads), with rotary
 * positions and with ALiBi, full and local: streamed outputs equal the full forward's at
 * every position (chunks 1, 7, 128, whole); the caches hold n_kv_heads heads, so the
 * state's bytes are those of the multi-head model divided by n_heads / n_kv_heads. */
static void test_grouped_heads(void)
{
    int32_t tokens[2 * 90];
    random_tokens(tokens, 2 * 90, 3);
    for (int kind = LB_MODEL_TRANSFORMER; kind <= LB_MODEL_LOCAL; kind++) {
        size_t multi_head = 0; /* cache bytes of layer 0 with 4 key/value heads */
        for (int kv = 4; kv >= 1; kv /= 2) {
            lb_model_config c = config((lb_model_kind)kind, kv == 2 ? LB_POS_ROTARY : LB_POS_ALIBI, LB_FLOAT64);
            c.n_heads = 4;
            c.n_kv_heads = kv;
            for (int dt = 0; dt < 2; dt++) {
                c.dtype = dt ? LB_FLOAT32 : LB_FLOAT64;
                lb_model *m = lb_model_new(&c);
                CU_ASSERT_PTR_NOT_NULL_FATAL(m);
                check_config(&c, m);
                lb_model_free(m);
            }
            lb_model *m = lb_model_new(&c);
            CU_ASSERT_PTR_NOT_NULL_FATAL(m);
            lb_model_state *s = lb_model_state_new(m, 2, NULL);
            CU_ASSERT_PTR_NOT_NULL_FATAL(s);
            int32_t lens[2] = {90, 61};
            lb_model_input in = {2, 90, tokens, NULL, lens};
            lb_tensor_free(lb_model_step_chunk(s, &in));
            for (int b = 0; b < 2; b++) { /* 2 L T D_kv values, D_kv = 16 / 4 * kv, float32 */
                int64_t held = kind == LB_MODEL_LOCAL && lens[b] > 9 ? 9 : lens[b];
                CU_ASSERT_EQUAL(lb_model_state_bytes(s, b), (size_t)(2 * 2 * held * (16 / 4 * kv) * 4));
            }
            size_t bytes = lb_kv_cache_bytes(lb_model_state_kv_cache(s, 0));
            if (kv == 4)
                multi_head = bytes;
            CU_ASSERT_TRUE(bytes > 0);
            CU_ASSERT_EQUAL(bytes * (size_t)(4 / kv), multi_head);
            CU_ASSERT_EQUAL(lb_model_state_kv_cache(s, 1)->n_heads, kv);
            lb_model_state_free(s);
            lb_model_free(m);
        }
    }
}

/* The bytes each family's state holds, by the formulas of layers/stream.h. */
static void test_state_bytes(void)
{
    int32_t tokens[300];
    random_tokens(tokens, 300, 1);
    for (int k = LB_MODEL_TRANSFORMER; k < LB_MODEL_KIND_COUNT; k++) {
        lb_model_config c = config((lb_model_kind)k, LB_POS_NONE, LB_FLOAT32);
        lb_model *m = lb_model_new(&c);
        lb_stream_options o = {64, 0, 0};
        lb_model_state *s = lb_model_state_new(m, 2, &o);
        CU_ASSERT_PTR_NOT_NULL_FATAL(s);
        int32_t lens[2] = {150, 100};
        lb_model_input in = {2, 150, tokens, NULL, lens};
        lb_tensor_free(lb_model_step_chunk(s, &in));
        size_t want[2];
        for (int b = 0; b < 2; b++) {
            int64_t t = lens[b];
            switch (k) {
            case LB_MODEL_TRANSFORMER: want[b] = (size_t)(2 * 2 * t * 16 * 4); break;
            case LB_MODEL_LOCAL: want[b] = (size_t)(2 * 2 * 9 * 16 * 4); break;
            case LB_MODEL_LSTM: want[b] = (size_t)(2 * 2 * 12 * 4); break;
            case LB_MODEL_LINEAR: want[b] = (size_t)(2 * 2 * 8 * 9 * 4); break; /* L H d (d + 1) */
            case LB_MODEL_MAMBA: want[b] = (size_t)(2 * 32 * (16 + 3) * 4); break; /* L Di (N + K - 1) */
            default: want[b] = (size_t)((2 + 4 + 8) * 16 * 4); break; /* (K-1) * (1 + 2 + 4) * D */
            }
            CU_ASSERT_EQUAL(lb_model_state_bytes(s, b), want[b]);
        }
        if (k == LB_MODEL_TRANSFORMER) /* 64 rows grown to the 150 the chunk needs (more than 2 x 64) */
            CU_ASSERT_EQUAL(lb_model_state_allocated(s), (size_t)(2 * 2 * 2 * 150 * 16 * 4));
        if (k == LB_MODEL_TRANSFORMER) { /* then doubled to 300 */
            lb_model_input one = {2, 1, tokens, NULL, NULL};
            lb_tensor_free(lb_model_step_chunk(s, &one));
            CU_ASSERT_EQUAL(lb_model_state_allocated(s), (size_t)(2 * 2 * 2 * 300 * 16 * 4));
        }
        if (k == LB_MODEL_LSTM) /* (h, c) and the next (h, c) */
            CU_ASSERT_EQUAL(lb_model_state_allocated(s), (size_t)(4 * 2 * 2 * 12 * 4));
        lb_model_state_free(s);
        lb_model_free(m);
    }
}

/* Token models with a regression head, every family: single events (the graph-free
 * step) give the full forward's [B, T] outputs. */
static void test_token_regression(void)
{
    for (int k = LB_MODEL_TRANSFORMER; k < LB_MODEL_KIND_COUNT; k++)
        for (int dt = 0; dt < 2; dt++) {
            lb_dtype dtype = dt ? LB_FLOAT64 : LB_FLOAT32;
            lb_model_config c = config((lb_model_kind)k, LB_POS_SINUSOIDAL, dtype);
            c.num_classes = 0;
            lb_model *m = lb_model_new(&c);
            CU_ASSERT_PTR_NOT_NULL_FATAL(m);
            int32_t tokens[NB * 40], lens[NB] = {40, 17, 1};
            random_tokens(tokens, NB * 40, 11 + (uint64_t)k);
            lb_model_input in = {NB, 40, tokens, NULL, lens};
            lb_tensor *full = full_forward(m, &in);
            CU_ASSERT_EQUAL(full->ndim, 2);
            double d = stream_max_diff(m, &in, full, 1, NULL);
            if (!(d <= (dt ? 1e-12 : 1e-5)))
                fprintf(stderr, "\n  %s %s regression: max |streamed - full| = %.3g\n", lb_model_kind_name(c.kind),
                        lb_dtype_name(dtype), d);
            CU_ASSERT_TRUE(d <= (dt ? 1e-12 : 1e-5));
            lb_tensor_free(full);
            lb_model_free(m);
        }
}

/* The event step's buffers, allocated once at creation, by the formula of
 * layers/stream.h; none for a feature model. */
static void test_work_bytes(void)
{
    const size_t b = 2, d = 16, h = 12, f = 24, k = 3, es = 4;
    for (int kind = LB_MODEL_TRANSFORMER; kind < LB_MODEL_KIND_COUNT; kind++) {
        lb_model_config c = config((lb_model_kind)kind, LB_POS_NONE, LB_FLOAT32);
        lb_model *m = lb_model_new(&c);
        lb_model_state *s = lb_model_state_new(m, (int64_t)b, NULL);
        CU_ASSERT_PTR_NOT_NULL_FATAL(s);
        size_t want;
        switch (kind) {
        case LB_MODEL_LSTM: /* the rows, and W_ihᵀ, W_hhᵀ of 2 layers where the float32 loops run */
            want = b * (d + d + 4 * h) * es +
                   (lb_k_lstm_step_uses_copies(LB_FLOAT32, 4 * (int64_t)h) ? (4 * h * (d + h) + 8 * h * h) * es : 0);
            break;
        case LB_MODEL_CONV: want = b * 3 * d * es + 3 * k * d * d * es; break;
        case LB_MODEL_LINEAR: want = 0; break; /* its events go through the graph */
        case LB_MODEL_MAMBA: want = 0; break;
        default: want = b * (d + d + f) * es + (4 * b * d + b * 2) * es + 2 * b * 4; break;
        }
        CU_ASSERT_EQUAL(lb_model_state_work_bytes(s), want);
        size_t before = lb_model_state_work_bytes(s);
        int32_t tokens[2] = {1, 2};
        for (int t = 0; t < 5; t++)
            lb_tensor_free(lb_model_step(s, tokens));
        CU_ASSERT_EQUAL(lb_model_state_work_bytes(s), before);
        lb_model_state_free(s);
        c.vocab_size = 0;
        c.input_features = 3;
        lb_model_free(m);
        m = lb_model_new(&c);
        s = lb_model_state_new(m, (int64_t)b, NULL);
        CU_ASSERT_PTR_NOT_NULL_FATAL(s);
        CU_ASSERT_EQUAL(lb_model_state_work_bytes(s), 0);
        lb_model_state_free(s);
        lb_model_free(m);
    }
    /* An LSTM with 4H = 64 keeps W_ihᵀ and W_hhᵀ of both layers where the loops run. */
    lb_model_config c = config(LB_MODEL_LSTM, LB_POS_NONE, LB_FLOAT32);
    c.hidden_size = 16;
    lb_model *m = lb_model_new(&c);
    lb_model_state *s = lb_model_state_new(m, (int64_t)b, NULL);
    CU_ASSERT_PTR_NOT_NULL_FATAL(s);
    size_t copies = lb_k_lstm_step_uses_copies(LB_FLOAT32, 64) ? (64 * 16 + 64 * 16 + 64 * 16 + 64 * 16) * es : 0;
    CU_ASSERT_EQUAL(lb_model_state_work_bytes(s), b * (d + d + 64) * es + copies);
    lb_model_state_free(s);
    lb_model_free(m);
}

/* lb_model_step_into writes what lb_model_step returns into the caller's tensor, every
 * family; a tensor of the wrong shape or dtype is refused and the state is unchanged. */
static void test_step_into(void)
{
    for (int k = LB_MODEL_TRANSFORMER; k < LB_MODEL_KIND_COUNT; k++) {
        lb_model_config c = config((lb_model_kind)k, LB_POS_ROTARY, LB_FLOAT32);
        lb_model *m = lb_model_new(&c);
        lb_model_state *a = lb_model_state_new(m, 2, NULL), *b = lb_model_state_new(m, 2, NULL);
        CU_ASSERT_PTR_NOT_NULL_FATAL(b);
        int64_t shape[2] = {2, CLASSES}, wrong[2] = {2, CLASSES + 1};
        lb_tensor *out = lb_tensor_zeros(LB_FLOAT32, 2, shape), *bad = lb_tensor_zeros(LB_FLOAT32, 2, wrong);
        lb_tensor *bad_dtype = lb_tensor_zeros(LB_FLOAT64, 2, shape);
        int32_t tokens[2 * 30];
        random_tokens(tokens, 60, 21);
        for (int t = 0; t < 30; t++) {
            int32_t ev[2] = {tokens[t], tokens[30 + t]};
            lb_tensor *y = lb_model_step(a, ev);
            CU_ASSERT_PTR_NOT_NULL_FATAL(y);
            CU_ASSERT_EQUAL(lb_model_step_into(b, ev, out), LB_OK);
            CU_ASSERT_EQUAL(memcmp(lb_tensor_data(y), lb_tensor_data(out), 2 * CLASSES * sizeof(float)), 0);
            lb_tensor_free(y);
        }
        int32_t ev[2] = {1, 2};
        CU_ASSERT_EQUAL(lb_model_step_into(b, ev, bad), LB_ERR_SHAPE);
        CU_ASSERT_TRUE(lb_test_error_has("num_classes"));
        CU_ASSERT_EQUAL(lb_model_step_into(b, ev, bad_dtype), LB_ERR_SHAPE);
        CU_ASSERT_EQUAL(lb_model_step_into(b, ev, NULL), LB_ERR_SHAPE);
        CU_ASSERT_EQUAL(lb_model_state_events(b, 0), 30);
        lb_tensor_free(out);
        lb_tensor_free(bad);
        lb_tensor_free(bad_dtype);
        lb_model_state_free(a);
        lb_model_state_free(b);
        lb_model_free(m);
    }
}

/* Growth past max_bytes, a bad id, a learned position past its table: a clear error,
 * and the state is as it was (the next step gives the right output). */
static void test_errors_leave_state(void)
{
    lb_model_config c = config(LB_MODEL_TRANSFORMER, LB_POS_LEARNED, LB_FLOAT64);
    c.max_seq_len = 40;
    lb_model *m = lb_model_new(&c);
    int32_t tokens[60];
    random_tokens(tokens, 60, 2);
    /* 2 layers x 2 (key, value) x 16 doubles = 512 bytes per event: room for 30 events. */
    lb_stream_options o = {8, 0, 30 * 512};
    lb_model_state *s = lb_model_state_new(m, 1, &o);
    CU_ASSERT_PTR_NOT_NULL_FATAL(s);
    lb_model_input in = {1, 25, tokens, NULL, NULL};
    lb_tensor *a = lb_model_step_chunk(s, &in);
    CU_ASSERT_PTR_NOT_NULL_FATAL(a);
    lb_model_input more = {1, 10, tokens + 25, NULL, NULL};
    CU_ASSERT_PTR_NULL(lb_model_step_chunk(s, &more));
    CU_ASSERT_EQUAL(lb_last_status(), LB_ERR_MEMORY);
    CU_ASSERT_TRUE(lb_test_error_has("key-value cache"));
    CU_ASSERT_TRUE(lb_test_error_has("35 events"));
    CU_ASSERT_TRUE(lb_test_error_has("max-context"));
    CU_ASSERT_EQUAL(lb_model_state_events(s, 0), 25);
    int32_t bad = VOCAB;
    CU_ASSERT_PTR_NULL(lb_model_step(s, &bad));
    CU_ASSERT_TRUE(lb_test_error_has("token id 11"));
    CU_ASSERT_EQUAL(lb_model_state_events(s, 0), 25);
    lb_model_input five = {1, 5, tokens + 25, NULL, NULL};
    lb_tensor *b = lb_model_step_chunk(s, &five);
    CU_ASSERT_PTR_NOT_NULL_FATAL(b);
    lb_model_input whole = {1, 30, tokens, NULL, NULL};
    lb_tensor *full = full_forward(m, &whole);
    for (int k = 0; k < CLASSES; k++)
        CU_ASSERT_DOUBLE_EQUAL(lb_tensor_flat(b, 4 * CLASSES + k), lb_tensor_flat(full, 29 * CLASSES + k), 1e-12);
    lb_tensor_free(full);
    lb_tensor_free(b);
    lb_tensor_free(a);
    lb_model_state_free(s);
    /* Learned positions end at max_seq_len = 40. */
    s = lb_model_state_new(m, 1, NULL);
    lb_model_input forty = {1, 40, tokens, NULL, NULL};
    lb_tensor_free(lb_model_step_chunk(s, &forty));
    CU_ASSERT_PTR_NULL(lb_model_step(s, tokens));
    CU_ASSERT_TRUE(lb_test_error_has("max_seq_len = 40"));
    CU_ASSERT_TRUE(lb_test_error_has("--pos learned"));
    CU_ASSERT_EQUAL(lb_model_state_events(s, 0), 40);
    lb_model_state_free(s);
    /* A budget too small for one event. */
    lb_stream_options tiny = {0, 0, 100};
    CU_ASSERT_PTR_NULL(lb_model_state_new(m, 1, &tiny));
    CU_ASSERT_EQUAL(lb_last_status(), LB_ERR_MEMORY);
    lb_model_free(m);
}

static void test_refusals(void)
{
    lb_model_config c = config(LB_MODEL_TRANSFORMER, LB_POS_NONE, LB_FLOAT32);
    c.causal = 0;
    lb_model *m = lb_model_new(&c);
    CU_ASSERT_PTR_NULL(lb_model_state_new(m, 1, NULL));
    CU_ASSERT_TRUE(lb_test_error_has("not causal"));
    lb_model_free(m);
    c.causal = 1;
    m = lb_model_new(&c);
    CU_ASSERT_PTR_NULL(lb_model_state_new(m, 0, NULL));
    CU_ASSERT_TRUE(lb_test_error_has("streams = 0"));
    lb_model_state *s = lb_model_state_new(m, 2, NULL);
    int32_t tokens[4] = {1, 2, 3, 4};
    lb_model_input in = {3, 1, tokens, NULL, NULL};
    CU_ASSERT_PTR_NULL(lb_model_step_chunk(s, &in));
    CU_ASSERT_TRUE(lb_test_error_has("3 streams"));
    int32_t lens[2] = {1, 3};
    lb_model_input ragged = {2, 2, tokens, NULL, lens};
    CU_ASSERT_PTR_NULL(lb_model_step_chunk(s, &ragged));
    CU_ASSERT_TRUE(lb_test_error_has("lengths[1] = 3"));
    CU_ASSERT_EQUAL(lb_model_state_events(s, 1), 0);
    lb_model_state_free(s);
    lb_model_free(m);
}

/* lb_window_stream: learned positions (max_seq_len 12), windows 12 and 5, 40 events one at a
 * time: every output equals the full forward on the last min(t + 1, W) events at its last
 * position (1e-5 in float32, 1e-12 in float64), and the window slid 40 - W times. Past the
 * table, a plain state refuses the event the window stream takes. */
static void test_window_stream(void)
{
    enum { EVENTS = 40 };
    for (int d = 0; d < 2; d++) {
        lb_dtype dtype = d ? LB_FLOAT64 : LB_FLOAT32;
        double tol = d ? 1e-12 : 1e-5;
        lb_model_config c = config(LB_MODEL_TRANSFORMER, LB_POS_LEARNED, dtype);
        c.max_seq_len = 12;
        lb_model *m = lb_model_new(&c);
        CU_ASSERT_PTR_NOT_NULL_FATAL(m);
        int32_t tokens[EVENTS];
        random_tokens(tokens, EVENTS, 99);
        const int64_t windows[2] = {12, 5};
        for (int k = 0; k < 2; k++) {
            int64_t w = windows[k];
            lb_window_stream *ws = lb_window_stream_new(m, w, NULL);
            CU_ASSERT_PTR_NOT_NULL_FATAL(ws);
            int64_t shape[2] = {1, CLASSES};
            lb_tensor *out = lb_tensor_empty(dtype, 2, shape);
            double worst = 0;
            for (int64_t t = 0; t < EVENTS; t++) {
                CU_ASSERT_EQUAL_FATAL(lb_window_stream_step(ws, tokens[t], out), LB_OK);
                int64_t n = t + 1 < w ? t + 1 : w;
                lb_model_input in = {1, n, tokens + t + 1 - n, NULL, NULL};
                lb_tensor *full = full_forward(m, &in); /* [1, n, CLASSES] */
                for (int64_t j = 0; j < CLASSES; j++)
                    worst = fmax(worst, fabs(lb_tensor_flat(out, j) - lb_tensor_flat(full, (n - 1) * CLASSES + j)));
                lb_tensor_free(full);
            }
            CU_ASSERT_TRUE(worst < tol);
            if (!(worst < tol))
                fprintf(stderr, "\n  window %lld: %g from the full forward\n", (long long)w, worst);
            CU_ASSERT_EQUAL(lb_window_stream_slides(ws), EVENTS - w);
            CU_ASSERT_EQUAL(lb_model_state_events(lb_window_stream_state(ws), 0), w);
            CU_ASSERT_EQUAL(lb_window_stream_step(ws, VOCAB, out), LB_ERR_VALUE); /* a bad id changes nothing */
            CU_ASSERT_EQUAL(lb_window_stream_slides(ws), EVENTS - w);
            lb_tensor_free(out);
            lb_window_stream_free(ws);
        }
        /* the premise: a plain state stops at max_seq_len */
        lb_model_state *st = lb_model_state_new(m, 1, NULL);
        lb_model_input in = {1, 12, tokens, NULL, NULL};
        lb_tensor *y = lb_model_step_chunk(st, &in);
        CU_ASSERT_PTR_NOT_NULL(y);
        lb_tensor_free(y);
        CU_ASSERT_PTR_NULL(lb_model_step(st, tokens));
        CU_ASSERT_TRUE(lb_test_error_has("max_seq_len = 12"));
        lb_model_state_free(st);
        /* refusals: a window past the table, max_context with a window */
        CU_ASSERT_PTR_NULL(lb_window_stream_new(m, 13, NULL));
        CU_ASSERT_TRUE(lb_test_error_has("window = 13 must be in [1, 12]"));
        CU_ASSERT_PTR_NULL(lb_window_stream_new(m, 0, NULL));
        lb_stream_options o = {0, 4, 0};
        CU_ASSERT_PTR_NULL(lb_window_stream_new(m, 8, &o));
        CU_ASSERT_TRUE(lb_test_error_has("max_context"));
        lb_model_free(m);
    }
}

int main(void)
{
    const lb_test_case cases[] = {
        {"transformer, every position kind, chunks 1/7/128/whole, float32 and float64", test_transformer},
        {"grouped-query attention (4 heads over 2 and 1 key/value heads; rotary, ALiBi; full and local) streams "
         "exactly; its caches hold n_heads / n_kv_heads times fewer bytes",
         test_grouped_heads},
        {"local attention, every position kind, chunks 1/7/128/whole", test_local},
        {"length-scaled logits (log n, scalable softmax) stream exactly", test_length_scale},
        {"rmsnorm, post-norm, swiglu and geglu blocks stream exactly, chunks 1/7/128/whole", test_block_options},
        {"lstm carried (h, c), chunks 1/7/128/whole", test_lstm},
        {"conv histories, chunks 1/7/128/whole", test_conv},
        {"linear attention's (S, z), with and without decay, chunks 1/7/128/whole", test_linear},
        {"mamba convolution histories and scan states, chunks 1/7/128/whole", test_mamba},
        {"feature inputs and regression heads, every family", test_features_regression},
        {"single steps, head = last, reset of one stream", test_single_step},
        {"max_context equals local attention, bounded cache", test_max_context},
        {"state bytes per family", test_state_bytes},
        {"token models with a regression head, event by event, every family", test_token_regression},
        {"the event step's buffers", test_work_bytes},
        {"lb_model_step_into equals lb_model_step, refuses a wrong tensor", test_step_into},
        {"errors leave the state as it was", test_errors_leave_state},
        {"non-causal models and bad chunks are refused", test_refusals},
        {"window stream: learned positions slide, each output the full forward on the last W events",
         test_window_stream},
        {NULL, NULL},
    };
    return lb_test_main("stream", cases);
}

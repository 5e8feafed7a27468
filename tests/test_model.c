/* Models built from a config (layers/model.h): defaults and names, validation,
 * parameter names and counts per family, input errors, deterministic init, output
 * shapes, the readout of the last valid position, padding invariance, and whole-model
 * gradient checks for every family. */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "autograd/gradcheck.h"
#include "layers/model.h"
#include "support.h"

/* A tiny float64 config of a family. */
static lb_model_config tiny(lb_model_kind kind)
{
    lb_model_config c;
    lb_model_config_default(kind, &c);
    c.dtype = LB_FLOAT64;
    c.vocab_size = 5;
    c.num_classes = 3;
    c.d_model = 4;
    c.n_heads = 2;
    c.d_ff = 6;
    c.n_layers = 2;
    c.hidden_size = 3;
    c.kernel_size = 2;
    c.window = 2;
    c.max_seq_len = 8;
    c.seed = 5;
    return c;
}

static void test_config_names(void)
{
    lb_model_config c;
    lb_model_config_default(LB_MODEL_TRANSFORMER, &c);
    CU_ASSERT_EQUAL(c.d_model, 64);
    CU_ASSERT_EQUAL(c.n_heads, 4);
    CU_ASSERT_EQUAL(c.d_ff, 128);
    CU_ASSERT_EQUAL(c.n_layers, 2);
    CU_ASSERT_EQUAL(c.hidden_size, 128);
    CU_ASSERT_EQUAL(c.kernel_size, 3);
    CU_ASSERT_EQUAL(c.causal, 1);
    CU_ASSERT_EQUAL(c.pos, LB_POS_NONE);
    CU_ASSERT_EQUAL(c.dtype, LB_FLOAT32);
    CU_ASSERT_EQUAL(c.head, LB_HEAD_LAST);
    lb_model_config_default(LB_MODEL_LOCAL, &c);
    CU_ASSERT_TRUE(c.window >= 1);
    CU_ASSERT_EQUAL(c.kind, LB_MODEL_LOCAL);
    const char *kinds[4] = {"transformer", "local", "lstm", "conv"};
    for (int i = 0; i < 4; i++) {
        lb_model_kind k;
        CU_ASSERT_EQUAL(lb_model_kind_parse(kinds[i], &k), LB_OK);
        CU_ASSERT_EQUAL(k, (lb_model_kind)i);
        CU_ASSERT_STRING_EQUAL(lb_model_kind_name(k), kinds[i]);
    }
    const char *pos[5] = {"none", "sinusoidal", "learned", "rotary", "alibi"};
    for (int i = 0; i < 5; i++) {
        lb_pos_kind p;
        CU_ASSERT_EQUAL(lb_pos_kind_parse(pos[i], &p), LB_OK);
        CU_ASSERT_EQUAL(p, (lb_pos_kind)i);
        CU_ASSERT_STRING_EQUAL(lb_pos_kind_name(p), pos[i]);
    }
    lb_model_kind k;
    lb_pos_kind p;
    CU_ASSERT_EQUAL(lb_model_kind_parse("gru", &k), LB_ERR_VALUE);
    CU_ASSERT_PTR_NOT_NULL(strstr(lb_last_error(), "'gru'"));
    CU_ASSERT_EQUAL(lb_pos_kind_parse("xpos", &p), LB_ERR_VALUE);
    CU_ASSERT_PTR_NOT_NULL(strstr(lb_last_error(), "'xpos'"));
    CU_ASSERT_EQUAL(lb_model_kind_parse(NULL, &k), LB_ERR_VALUE);
}

/* ---- parameter names and counts, computed by hand ---- */

static void assert_names(lb_model *m, int n, const char *const *names)
{
    lb_params *ps = lb_model_params(m);
    CU_ASSERT_EQUAL_FATAL(ps->count, n);
    for (int i = 0; i < n; i++)
        if (strcmp(ps->items[i]->name, names[i]) != 0) {
            fprintf(stderr, "\n  parameter %d is '%s', expected '%s'\n", i, ps->items[i]->name, names[i]);
            CU_FAIL("parameter name");
        }
}

static void test_param_names_counts(void)
{
    /* transformer, tokens V 7, d 8, 2 heads, d_ff 12, 2 layers, C 3, learned positions (10 rows) */
    lb_model_config c = tiny(LB_MODEL_TRANSFORMER);
    c.vocab_size = 7;
    c.d_model = 8;
    c.d_ff = 12;
    c.pos = LB_POS_LEARNED;
    c.max_seq_len = 10;
    lb_model *m = lb_model_new(&c);
    CU_ASSERT_PTR_NOT_NULL_FATAL(m);
    const char *block[12] = {"ln1.weight", "ln1.bias", "attn.w_q", "attn.w_k", "attn.w_v", "attn.w_o",
                             "ln2.weight", "ln2.bias", "ffn.fc1.weight", "ffn.fc1.bias", "ffn.fc2.weight", "ffn.fc2.bias"};
    char names_buf[30][64];
    const char *names[30];
    int n = 0;
    snprintf(names_buf[n++], 64, "embedding.weight");
    snprintf(names_buf[n++], 64, "pos_embedding");
    for (int l = 0; l < 2; l++)
        for (int i = 0; i < 12; i++)
            snprintf(names_buf[n++], 64, "blocks.%d.%s", l, block[i]);
    snprintf(names_buf[n++], 64, "ln_f.weight");
    snprintf(names_buf[n++], 64, "ln_f.bias");
    snprintf(names_buf[n++], 64, "head.weight");
    snprintf(names_buf[n++], 64, "head.bias");
    for (int i = 0; i < n; i++)
        names[i] = names_buf[i];
    assert_names(m, n, names);
    /* 56 embedding + 80 positions + 2 * (16 + 4*64 + 16 + 8*12 + 12 + 12*8 + 8) + 16 + (8*3 + 3) */
    CU_ASSERT_EQUAL(lb_params_numel(lb_model_params(m)), 56 + 80 + 2 * 500 + 16 + 27);
    lb_var *hw = lb_params_find(lb_model_params(m), "head.weight");
    CU_ASSERT_EQUAL(hw->value->shape[0], 8);
    CU_ASSERT_EQUAL(hw->value->shape[1], 3);
    CU_ASSERT_EQUAL(lb_params_find(lb_model_params(m), "embedding.weight")->value->shape[0], 7);
    lb_model_free(m);

    /* local, 3 real features, regression, no positions: input.weight [3, 8] + input.bias */
    c.kind = LB_MODEL_LOCAL;
    c.vocab_size = 0;
    c.input_features = 3;
    c.num_classes = 0;
    c.pos = LB_POS_NONE;
    m = lb_model_new(&c);
    CU_ASSERT_PTR_NOT_NULL_FATAL(m);
    CU_ASSERT_EQUAL(lb_model_params(m)->count, 2 + 24 + 2 + 2);
    CU_ASSERT_STRING_EQUAL(lb_model_params(m)->items[0]->name, "input.weight");
    CU_ASSERT_STRING_EQUAL(lb_model_params(m)->items[1]->name, "input.bias");
    CU_ASSERT_STRING_EQUAL(lb_model_params(m)->items[2]->name, "blocks.0.ln1.weight");
    CU_ASSERT_EQUAL(lb_params_numel(lb_model_params(m)), 32 + 2 * 500 + 16 + 9);
    lb_model_free(m);

    /* lstm, tokens V 7, d 8, hidden 5, 2 layers, C 3 */
    c = tiny(LB_MODEL_LSTM);
    c.vocab_size = 7;
    c.d_model = 8;
    c.hidden_size = 5;
    m = lb_model_new(&c);
    CU_ASSERT_PTR_NOT_NULL_FATAL(m);
    const char *lstm_names[11] = {"embedding.weight", "lstm.weight_ih_l0", "lstm.weight_hh_l0", "lstm.bias_ih_l0",
                                  "lstm.bias_hh_l0", "lstm.weight_ih_l1", "lstm.weight_hh_l1", "lstm.bias_ih_l1",
                                  "lstm.bias_hh_l1", "head.weight", "head.bias"};
    assert_names(m, 11, lstm_names);
    /* 56 + (20*8 + 20*5 + 20 + 20) + (20*5 + 20*5 + 20 + 20) + (5*3 + 3) */
    CU_ASSERT_EQUAL(lb_params_numel(lb_model_params(m)), 56 + 300 + 240 + 18);
    lb_model_free(m);

    /* conv, tokens V 7, d 8, kernel 3, 3 layers, C 3 */
    c = tiny(LB_MODEL_CONV);
    c.vocab_size = 7;
    c.d_model = 8;
    c.kernel_size = 3;
    c.n_layers = 3;
    m = lb_model_new(&c);
    CU_ASSERT_PTR_NOT_NULL_FATAL(m);
    const char *conv_names[9] = {"embedding.weight", "conv.0.weight", "conv.0.bias", "conv.1.weight", "conv.1.bias",
                                 "conv.2.weight", "conv.2.bias", "head.weight", "head.bias"};
    assert_names(m, 9, conv_names);
    CU_ASSERT_EQUAL(lb_params_find(lb_model_params(m), "conv.1.weight")->value->shape[2], 3);
    CU_ASSERT_EQUAL(lb_params_numel(lb_model_params(m)), 56 + 3 * (8 * 8 * 3 + 8) + 27);
    lb_model_free(m);
}

/* ---- validation ---- */

static void expect_bad_config(const lb_model_config *c, const char *field)
{
    lb_model *m = lb_model_new(c);
    CU_ASSERT_PTR_NULL(m);
    lb_model_free(m);
    CU_ASSERT_EQUAL(lb_last_status(), LB_ERR_VALUE);
    if (!strstr(lb_last_error(), field)) {
        fprintf(stderr, "\n  expected the field '%s' in: %s\n", field, lb_last_error());
        CU_FAIL("error names the field");
    }
}

static void test_bad_configs(void)
{
    lb_model_config c = tiny(LB_MODEL_TRANSFORMER);
    c.n_heads = 3;
    expect_bad_config(&c, "n_heads");
    c = tiny(LB_MODEL_LOCAL);
    c.window = 0;
    expect_bad_config(&c, "window");
    c = tiny(LB_MODEL_TRANSFORMER);
    c.input_features = 2; /* both inputs */
    expect_bad_config(&c, "input_features");
    c.vocab_size = 0;
    c.input_features = 0; /* neither */
    expect_bad_config(&c, "vocab_size");
    c = tiny(LB_MODEL_TRANSFORMER);
    c.n_layers = 0;
    expect_bad_config(&c, "n_layers");
    c = tiny(LB_MODEL_TRANSFORMER);
    c.dropout = 1.0;
    expect_bad_config(&c, "dropout");
    c = tiny(LB_MODEL_TRANSFORMER);
    c.pos = LB_POS_LEARNED;
    c.max_seq_len = 0;
    expect_bad_config(&c, "max_seq_len");
    c = tiny(LB_MODEL_TRANSFORMER);
    c.pos = LB_POS_ROTARY;
    c.d_model = 6; /* d_head 3 */
    expect_bad_config(&c, "rotary");
    c = tiny(LB_MODEL_TRANSFORMER);
    c.d_ff = 0;
    expect_bad_config(&c, "d_ff");
    c = tiny(LB_MODEL_TRANSFORMER);
    c.num_classes = -1;
    expect_bad_config(&c, "num_classes");
    c = tiny(LB_MODEL_TRANSFORMER);
    c.d_model = 0;
    expect_bad_config(&c, "d_model");
    c = tiny(LB_MODEL_LSTM);
    c.hidden_size = 0;
    expect_bad_config(&c, "hidden_size");
    c = tiny(LB_MODEL_CONV);
    c.kernel_size = 0;
    expect_bad_config(&c, "kernel_size");
    c = tiny(LB_MODEL_TRANSFORMER);
    c.kind = (lb_model_kind)9;
    expect_bad_config(&c, "kind");
    CU_ASSERT_PTR_NULL(lb_model_new(NULL));
    /* Fields of other families are ignored: an LSTM does not care about n_heads. */
    c = tiny(LB_MODEL_LSTM);
    c.n_heads = 3;
    lb_model *m = lb_model_new(&c);
    CU_ASSERT_PTR_NOT_NULL(m);
    lb_model_free(m);
}

/* ---- inputs ---- */

static void test_bad_inputs(void)
{
    lb_model_config c = tiny(LB_MODEL_TRANSFORMER);
    c.pos = LB_POS_LEARNED;
    c.max_seq_len = 4;
    c.dropout = 0.1;
    lb_model *m = lb_model_new(&c);
    CU_ASSERT_PTR_NOT_NULL_FATAL(m);
    lb_graph *g = lb_graph_new();
    int32_t tokens[8] = {0, 1, 2, 3, 4, 0, 9, 1};
    lb_model_input in = {2, 4, tokens, NULL, NULL};
    CU_ASSERT_PTR_NULL(lb_model_forward(g, m, &in, 0, NULL, NULL));
    CU_ASSERT_PTR_NOT_NULL(strstr(lb_last_error(), "token id 9 at [1, 2]"));
    tokens[6] = -1;
    CU_ASSERT_PTR_NULL(lb_model_forward(g, m, &in, 0, NULL, NULL));
    CU_ASSERT_PTR_NOT_NULL(strstr(lb_last_error(), "vocab_size = 5"));
    tokens[6] = 2;
    in.tokens = NULL;
    CU_ASSERT_PTR_NULL(lb_model_forward(g, m, &in, 0, NULL, NULL));
    CU_ASSERT_PTR_NOT_NULL(strstr(lb_last_error(), "tokens is NULL"));
    in.tokens = tokens;
    int32_t lengths[2] = {4, 0};
    in.lengths = lengths;
    CU_ASSERT_PTR_NULL(lb_model_forward(g, m, &in, 0, NULL, NULL));
    CU_ASSERT_PTR_NOT_NULL(strstr(lb_last_error(), "lengths[1] = 0"));
    lengths[1] = 5;
    CU_ASSERT_PTR_NULL(lb_model_forward(g, m, &in, 0, NULL, NULL));
    in.lengths = NULL;
    /* dropout while training needs a generator */
    CU_ASSERT_PTR_NULL(lb_model_forward(g, m, &in, 1, NULL, NULL));
    CU_ASSERT_PTR_NOT_NULL(strstr(lb_last_error(), "rng"));
    /* T > max_seq_len with learned positions */
    int32_t long_tokens[5] = {0, 1, 2, 3, 4};
    lb_model_input lin = {1, 5, long_tokens, NULL, NULL};
    CU_ASSERT_PTR_NULL(lb_model_forward(g, m, &lin, 0, NULL, NULL));
    CU_ASSERT_PTR_NOT_NULL(strstr(lb_last_error(), "max_seq_len = 4"));
    in.batch = 0;
    CU_ASSERT_PTR_NULL(lb_model_forward(g, m, &in, 0, NULL, NULL));
    in.batch = 2;
    CU_ASSERT_PTR_NOT_NULL(lb_model_forward(g, m, &in, 0, NULL, NULL)); /* and a good input works */
    lb_model_free(m);

    /* feature models: missing or misshapen features */
    c = tiny(LB_MODEL_LSTM);
    c.vocab_size = 0;
    c.input_features = 3;
    m = lb_model_new(&c);
    CU_ASSERT_PTR_NOT_NULL_FATAL(m);
    lb_model_input fin = {2, 4, NULL, NULL, NULL};
    CU_ASSERT_PTR_NULL(lb_model_forward(g, m, &fin, 0, NULL, NULL));
    CU_ASSERT_PTR_NOT_NULL(strstr(lb_last_error(), "features is NULL"));
    int64_t sf[3] = {2, 4, 2};
    lb_tensor *f = lb_tensor_zeros(LB_FLOAT64, 3, sf);
    fin.features = f;
    CU_ASSERT_PTR_NULL(lb_model_forward(g, m, &fin, 0, NULL, NULL));
    CU_ASSERT_EQUAL(lb_last_status(), LB_ERR_SHAPE);
    CU_ASSERT_PTR_NOT_NULL(strstr(lb_last_error(), "[2, 4, 2]"));
    CU_ASSERT_PTR_NOT_NULL(strstr(lb_last_error(), "[2, 4, 3]"));
    lb_tensor_free(f);
    lb_model_free(m);
    lb_graph_free(g);
}

/* ---- init ---- */

static int params_equal(lb_model *a, lb_model *b)
{
    lb_params *pa = lb_model_params(a), *pb = lb_model_params(b);
    if (pa->count != pb->count)
        return 0;
    for (int i = 0; i < pa->count; i++) {
        int64_t n = lb_tensor_numel(pa->items[i]->value);
        for (int64_t j = 0; j < n; j++)
            if (lb_tensor_flat(pa->items[i]->value, j) != lb_tensor_flat(pb->items[i]->value, j))
                return 0;
    }
    return 1;
}

static void test_deterministic_init(void)
{
    for (int kind = 0; kind < 4; kind++) {
        lb_model_config c = tiny((lb_model_kind)kind);
        lb_model *a = lb_model_new(&c), *b = lb_model_new(&c);
        c.seed = 6;
        lb_model *d = lb_model_new(&c);
        c.seed = 5;
        c.head = LB_HEAD_EVERY;
        lb_model *e = lb_model_new(&c);
        CU_ASSERT_TRUE_FATAL(a && b && d && e);
        CU_ASSERT_TRUE(params_equal(a, b));
        CU_ASSERT_FALSE(params_equal(a, d));
        CU_ASSERT_TRUE(params_equal(a, e)); /* the head kind does not change the weights */
        lb_model_free(a);
        lb_model_free(b);
        lb_model_free(d);
        lb_model_free(e);
    }
    /* Documented initial values: layer norms 1/0, embedding roughly N(0, 1), Xavier bounds. */
    lb_model_config c = tiny(LB_MODEL_TRANSFORMER);
    c.vocab_size = 50;
    c.d_model = 16;
    lb_model *m = lb_model_new(&c);
    lb_params *ps = lb_model_params(m);
    CU_ASSERT_EQUAL(lb_tensor_flat(lb_params_find(ps, "blocks.1.ln2.weight")->value, 3), 1.0);
    CU_ASSERT_EQUAL(lb_tensor_flat(lb_params_find(ps, "ln_f.bias")->value, 3), 0.0);
    CU_ASSERT_EQUAL(lb_tensor_flat(lb_params_find(ps, "head.bias")->value, 0), 0.0);
    const lb_tensor *emb = lb_params_find(ps, "embedding.weight")->value;
    double s = 0, s2 = 0;
    for (int i = 0; i < 800; i++) {
        s += lb_tensor_flat(emb, i);
        s2 += lb_tensor_flat(emb, i) * lb_tensor_flat(emb, i);
    }
    CU_ASSERT_DOUBLE_EQUAL(s / 800, 0.0, 0.15);
    CU_ASSERT_DOUBLE_EQUAL(s2 / 800, 1.0, 0.2);
    const lb_tensor *wq = lb_params_find(ps, "blocks.0.attn.w_q")->value;
    double bound = sqrt(6.0 / 32), mx = 0;
    for (int i = 0; i < 256; i++)
        mx = fmax(mx, fabs(lb_tensor_flat(wq, i)));
    CU_ASSERT_TRUE(mx <= bound && mx > 0.8 * bound);
    lb_model_free(m);
}

/* ---- forward shapes ---- */

static void test_output_shapes(void)
{
    int32_t tokens[10] = {0, 1, 2, 3, 4, 4, 3, 2, 1, 0};
    int32_t lengths[2] = {5, 2};
    lb_model_input in = {2, 5, tokens, NULL, lengths};
    lb_graph *g = lb_graph_new();
    for (int kind = 0; kind < 4; kind++)
        for (int head = 0; head < 2; head++)
            for (int classes = 0; classes <= 3; classes += 3) {
                lb_model_config c = tiny((lb_model_kind)kind);
                c.head = (lb_head_kind)head;
                c.num_classes = classes;
                lb_model *m = lb_model_new(&c);
                CU_ASSERT_PTR_NOT_NULL_FATAL(m);
                lb_tensor *att = NULL;
                lb_var *y = lb_model_forward(g, m, &in, 0, NULL, &att);
                CU_ASSERT_PTR_NOT_NULL_FATAL(y);
                int64_t want[3] = {2, head == LB_HEAD_EVERY ? 5 : classes, classes};
                int nd = 1 + (head == LB_HEAD_EVERY) + (classes > 0);
                CU_ASSERT_EQUAL(y->value->ndim, nd);
                for (int d = 0; d < nd; d++)
                    CU_ASSERT_EQUAL(y->value->shape[d], want[d]);
                for (int64_t i = 0; i < lb_tensor_numel(y->value); i++)
                    CU_ASSERT_TRUE(isfinite(lb_tensor_flat(y->value, i)));
                if (kind <= LB_MODEL_LOCAL) {
                    CU_ASSERT_PTR_NOT_NULL_FATAL(att);
                    /* [B, n_heads, Tq, T], Tq = 1 when only the last position is read */
                    CU_ASSERT_EQUAL(att->ndim, 4);
                    CU_ASSERT_EQUAL(att->shape[1], 2);
                    CU_ASSERT_EQUAL(att->shape[2], head == LB_HEAD_EVERY ? 5 : 1);
                    CU_ASSERT_EQUAL(att->shape[3], 5);
                    /* item 1 reads position 1: its weights cover keys 0..1 only */
                    int64_t row = head == LB_HEAD_EVERY ? 1 : 0;
                    double sum = 0;
                    for (int j = 0; j < 5; j++) {
                        int64_t idx[4] = {1, 1, row, j};
                        double w = lb_tensor_get(att, idx);
                        sum += w;
                        if (j >= 2)
                            CU_ASSERT_EQUAL(w, 0.0);
                    }
                    CU_ASSERT_DOUBLE_EQUAL(sum, 1.0, 1e-12);
                } else {
                    CU_ASSERT_PTR_NULL(att);
                }
                lb_tensor_free(att);
                lb_graph_reset(g);
                lb_model_free(m);
            }
    lb_graph_free(g);
}

/* ---- readout and padding ---- */

/* Runs the model, returns its output and the gradients of sum(output * R). */
static lb_tensor *forward_grads(lb_model *m, const lb_model_input *in, int select_last, lb_tensor **grads)
{
    lb_params *ps = lb_model_params(m);
    lb_params_zero_grad(ps);
    lb_graph *g = lb_graph_new();
    lb_var *y = lb_model_forward(g, m, in, 0, NULL, NULL);
    CU_ASSERT_PTR_NOT_NULL_FATAL(y);
    if (select_last) { /* [B, T, C] -> [B, C] at lengths - 1 */
        lb_var *rows[8];
        for (int64_t b = 0; b < in->batch; b++) {
            int64_t p = in->lengths ? in->lengths[b] - 1 : in->seq_len - 1;
            int64_t s[2] = {1, y->value->shape[2]};
            rows[b] = lb_reshape(g, lb_slice(g, lb_slice(g, y, 0, b, b + 1, 1), 1, p, p + 1, 1), 2, s);
        }
        y = lb_concat(g, (int)in->batch, rows, 0);
    }
    lb_tensor *r = lb_tensor_zeros_like(y->value);
    lb_rng rng;
    lb_rng_seed(&rng, 99);
    lb_rng_fill_uniform(&rng, r, -1, 1);
    CU_ASSERT_EQUAL(lb_backward(g, lb_sum(g, lb_mul(g, y, lb_input(g, r, 0))), NULL), LB_OK);
    for (int i = 0; i < ps->count; i++)
        grads[i] = ps->items[i]->grad ? lb_tensor_copy(ps->items[i]->grad, LB_FLOAT64) : lb_tensor_zeros_like(ps->items[i]->value);
    lb_tensor *out = lb_tensor_copy(y->value, LB_FLOAT64);
    lb_graph_free(g);
    return out;
}

static void test_head_last_equals_every(void)
{
    int32_t tokens[15] = {1, 2, 3, 4, 0, 4, 4, 1, 2, 3, 2, 0, 3, 3, 1};
    int32_t lengths[3] = {5, 3, 1};
    lb_model_input in = {3, 5, tokens, NULL, lengths};
    for (int kind = 0; kind < 4; kind++)
        for (int variant = 0; variant < 2; variant++) {
            lb_model_config c = tiny((lb_model_kind)kind);
            if (variant) { /* bidirectional + rotary for attention; lengths NULL for the others */
                c.causal = 0;
                c.pos = LB_POS_ROTARY;
            } else {
                c.pos = LB_POS_SINUSOIDAL;
            }
            lb_model_input use = in;
            if (variant && kind >= LB_MODEL_LSTM)
                use.lengths = NULL;
            lb_model *last = lb_model_new(&c);
            c.head = LB_HEAD_EVERY;
            lb_model *every = lb_model_new(&c);
            CU_ASSERT_TRUE_FATAL(last && every);
            lb_tensor *ga[64], *gb[64];
            int n = lb_model_params(last)->count;
            lb_tensor *ya = forward_grads(last, &use, 0, ga), *yb = forward_grads(every, &use, 1, gb);
            LB_ASSERT_TENSORS_CLOSE(ya, yb, 1e-12, 1e-12);
            for (int i = 0; i < n; i++) {
                if (!lb_check_tensors_close(ga[i], gb[i], 1e-12, 1e-10, lb_model_params(last)->items[i]->name))
                    CU_FAIL("gradient of the readout path");
                lb_tensor_free(ga[i]);
                lb_tensor_free(gb[i]);
            }
            lb_tensor_free(ya);
            lb_tensor_free(yb);
            lb_model_free(last);
            lb_model_free(every);
        }
}

/* Tokens after each sequence's length do not change what the head reads. */
static void test_padding_invariance(void)
{
    int32_t a[10] = {1, 2, 3, 4, 0, 4, 4, 1, 2, 3}, b[10] = {1, 2, 3, 4, 0, 4, 4, 0, 0, 0};
    int32_t lengths[2] = {5, 2};
    for (int kind = 0; kind < 4; kind++)
        for (int causal = 0; causal < 2; causal++) {
            lb_model_config c = tiny((lb_model_kind)kind);
            c.causal = causal;
            lb_model *m = lb_model_new(&c);
            lb_graph *g = lb_graph_new();
            lb_model_input ia = {2, 5, a, NULL, lengths}, ib = {2, 5, b, NULL, lengths};
            lb_var *ya = lb_model_forward(g, m, &ia, 0, NULL, NULL), *yb = lb_model_forward(g, m, &ib, 0, NULL, NULL);
            CU_ASSERT_TRUE_FATAL(ya && yb);
            LB_ASSERT_TENSORS_CLOSE(ya->value, yb->value, 0, 0);
            /* ... while a change inside the valid part (and inside local's window) does change it */
            b[3] = 0;
            lb_var *yc = lb_model_forward(g, m, &ib, 0, NULL, NULL);
            b[3] = 4;
            CU_ASSERT_TRUE(fabs(lb_tensor_flat(yc->value, 0) - lb_tensor_flat(ya->value, 0)) > 1e-9);
            lb_graph_free(g);
            lb_model_free(m);
        }
}

/* float32 models give float64's results to float32 precision; dropout is reproducible. */
static void test_float32_and_dropout(void)
{
    int32_t tokens[10] = {1, 2, 3, 4, 0, 4, 4, 1, 2, 3};
    int32_t lengths[2] = {5, 4};
    lb_model_input in = {2, 5, tokens, NULL, lengths};
    for (int kind = 0; kind < 4; kind++) {
        lb_model_config c = tiny((lb_model_kind)kind);
        lb_model *m64 = lb_model_new(&c);
        c.dtype = LB_FLOAT32;
        lb_model *m32 = lb_model_new(&c);
        lb_graph *g = lb_graph_new();
        lb_var *y64 = lb_model_forward(g, m64, &in, 0, NULL, NULL), *y32 = lb_model_forward(g, m32, &in, 0, NULL, NULL);
        CU_ASSERT_TRUE_FATAL(y64 && y32);
        CU_ASSERT_EQUAL(y32->value->dtype, LB_FLOAT32);
        LB_ASSERT_TENSORS_CLOSE(y32->value, y64->value, 1e-4, 1e-4);
        lb_graph_free(g);
        lb_model_free(m64);
        lb_model_free(m32);
    }
    lb_model_config c = tiny(LB_MODEL_TRANSFORMER);
    c.dropout = 0.3;
    lb_model *m = lb_model_new(&c);
    lb_graph *g = lb_graph_new();
    lb_rng r1, r2;
    lb_rng_seed(&r1, 4);
    lb_rng_seed(&r2, 4);
    lb_var *eval = lb_model_forward(g, m, &in, 0, NULL, NULL);
    lb_var *t1 = lb_model_forward(g, m, &in, 1, &r1, NULL), *t2 = lb_model_forward(g, m, &in, 1, &r2, NULL);
    CU_ASSERT_TRUE_FATAL(eval && t1 && t2);
    LB_ASSERT_TENSORS_CLOSE(t1->value, t2->value, 0, 0);
    CU_ASSERT_TRUE(fabs(lb_tensor_flat(t1->value, 0) - lb_tensor_flat(eval->value, 0)) > 1e-9);
    lb_graph_free(g);
    lb_model_free(m);
}

/* ---- whole-model gradient checks ---- */

typedef struct model_case {
    lb_model *m;
    lb_model_input in;
} model_case;

static lb_var *model_fn(lb_graph *g, lb_var *const *leaves, void *user)
{
    model_case *c = user;
    return lb_model_forward(g, c->m, &c->in, 0, NULL, NULL);
}

static void gradcheck_model(const lb_model_config *c, const lb_model_input *in, const char *what)
{
    lb_model *m = lb_model_new(c);
    CU_ASSERT_PTR_NOT_NULL_FATAL(m);
    lb_params *ps = lb_model_params(m);
    /* Non-trivial norm weights and biases. */
    lb_rng rng;
    lb_rng_seed(&rng, 17);
    for (int i = 0; i < ps->count; i++)
        if (strstr(ps->items[i]->name, "bias") || strstr(ps->items[i]->name, "ln"))
            lb_rng_fill_uniform(&rng, ps->items[i]->value, -0.5, 1.0);
    model_case mc = {m, *in};
    lb_gradcheck_leaf report[64];
    lb_status st = lb_gradcheck(model_fn, &mc, ps->count, ps->items, NULL, report);
    if (st != LB_OK) {
        fprintf(stderr, "\n  %s: %s\n", what, lb_last_error());
        lb_gradcheck_print(stderr, ps->count, ps->items, report);
    }
    CU_ASSERT_EQUAL(st, LB_OK);
    lb_model_free(m);
}

static void test_model_gradcheck(void)
{
    int32_t tokens[8] = {1, 2, 3, 4, 0, 4, 2, 1};
    int32_t lengths[2] = {4, 2};
    int64_t sf[3] = {2, 4, 3};
    lb_tensor *f = lb_tensor_zeros(LB_FLOAT64, 3, sf);
    lb_rng rng;
    lb_rng_seed(&rng, 3);
    lb_rng_fill_uniform(&rng, f, -1, 1);
    lb_model_input tok = {2, 4, tokens, NULL, lengths}, feat = {2, 4, NULL, f, lengths};
    for (int kind = 0; kind < 4; kind++)
        for (int head = 0; head < 2; head++) {
            lb_model_config c = tiny((lb_model_kind)kind);
            c.head = (lb_head_kind)head;
            c.pos = kind == LB_MODEL_TRANSFORMER ? LB_POS_LEARNED : LB_POS_ROTARY;
            char what[64];
            snprintf(what, sizeof what, "%s head %d tokens", lb_model_kind_name(c.kind), head);
            gradcheck_model(&c, &tok, what);
            /* real-valued inputs, regression */
            c.vocab_size = 0;
            c.input_features = 3;
            c.num_classes = 0;
            snprintf(what, sizeof what, "%s head %d features", lb_model_kind_name(c.kind), head);
            gradcheck_model(&c, &feat, what);
        }
    lb_tensor_free(f);
}

/* ---- length-scaled attention logits (log n, scalable softmax) ---- */

static lb_var *param_named(lb_model *m, const char *suffix, int *from)
{
    lb_params *ps = lb_model_params(m);
    for (int i = *from; i < ps->count; i++)
        if (strstr(ps->items[i]->name, suffix)) {
            *from = i + 1;
            return ps->items[i];
        }
    return NULL;
}

static lb_tensor *forward_copy(lb_model *m, const lb_model_input *in)
{
    lb_graph *g = lb_graph_new();
    lb_var *y = lb_model_forward(g, m, in, 0, NULL, NULL);
    lb_tensor *out = y ? lb_tensor_copy(y->value, LB_FLOAT64) : NULL;
    lb_graph_free(g);
    return out;
}

static void test_length_scale(void)
{
    int32_t tokens[16] = {1, 2, 3, 4, 0, 4, 2, 1, 3, 3, 1, 2, 4, 4, 0, 1};
    int32_t lengths[2] = {8, 5};
    lb_model_input full = {2, 8, tokens, NULL, NULL}, padded = {2, 8, tokens, NULL, lengths};
    const double log_n = log(8.0); /* N = max_seq_len = 8 */
    for (int kind = 0; kind < 2; kind++) {
        lb_model_config c = tiny((lb_model_kind)kind);
        c.head = LB_HEAD_EVERY;
        c.causal = 0;
        c.window = kind == LB_MODEL_LOCAL ? 3 : 0;
        lb_model *none = lb_model_new(&c);
        c.length_scale = LB_LENGTH_SCALE_LOG_N;
        lb_model *logn = lb_model_new(&c);
        c.length_scale = LB_LENGTH_SCALE_SCALABLE;
        lb_model *ssmax = lb_model_new(&c);
        CU_ASSERT_TRUE_FATAL(none && logn && ssmax);
        CU_ASSERT_EQUAL(lb_model_params(ssmax)->count, lb_model_params(none)->count + 2); /* one [H] per block */
        int at = 0;
        lb_var *s0 = param_named(ssmax, "attn.softmax_scale", &at);
        CU_ASSERT_PTR_NOT_NULL_FATAL(s0);
        CU_ASSERT_EQUAL(s0->value->shape[0], 2);
        CU_ASSERT_DOUBLE_EQUAL(lb_tensor_flat(s0->value, 1), 1.0 / log_n, 1e-15);
        /* At init the learned scale is ln(n) / ln(N), the same as log-n, with padding too. */
        lb_tensor *a = forward_copy(logn, &padded), *b = forward_copy(ssmax, &padded), *z = forward_copy(none, &full);
        LB_ASSERT_TENSORS_CLOSE(a, b, 1e-12, 1e-12);
        lb_tensor_free(a);
        lb_tensor_free(b);
        /* Full attention without padding: every query sees n = N keys, so log-n is the
         * standard softmax; local attention sees min(window, N) keys and is not. */
        a = forward_copy(logn, &full);
        if (kind == LB_MODEL_TRANSFORMER) {
            LB_ASSERT_TENSORS_CLOSE(a, z, 1e-12, 1e-12);
        } else {
            CU_ASSERT_TRUE(fabs(lb_tensor_flat(a, 3) - lb_tensor_flat(z, 3)) > 1e-9);
        }
        lb_tensor_free(a);
        /* s = 2 / ln N doubles the logits: the same as doubling W_Q in the standard model. */
        at = 0;
        for (lb_var *sc; (sc = param_named(ssmax, "attn.softmax_scale", &at));)
            lb_tensor_fill(sc->value, 2.0 / log_n);
        at = 0;
        for (lb_var *wq; (wq = param_named(none, "attn.w_q", &at));)
            for (int64_t i = 0; i < lb_tensor_numel(wq->value); i++) {
                int64_t idx[2] = {i / wq->value->shape[1], i % wq->value->shape[1]};
                lb_tensor_set(wq->value, idx, 2.0 * lb_tensor_get(wq->value, idx));
            }
        a = forward_copy(ssmax, &full);
        b = forward_copy(none, &full);
        if (kind == LB_MODEL_TRANSFORMER) {
            LB_ASSERT_TENSORS_CLOSE(a, b, 1e-12, 1e-12);
        }
        lb_tensor_free(a);
        lb_tensor_free(b);
        lb_tensor_free(z);
        lb_model_free(none);
        lb_model_free(logn);
        lb_model_free(ssmax);
        /* Gradients, the learned scale included: causal, padding; the readout head for
         * full attention, every position for local attention. */
        {
            lb_model_config g = tiny((lb_model_kind)kind);
            int head = kind == LB_MODEL_TRANSFORMER ? LB_HEAD_LAST : LB_HEAD_EVERY;
            g.length_scale = LB_LENGTH_SCALE_SCALABLE;
            g.head = (lb_head_kind)head;
            g.pos = LB_POS_ROTARY;
            char what[64];
            snprintf(what, sizeof what, "%s scalable softmax head %d", lb_model_kind_name(g.kind), head);
            gradcheck_model(&g, &padded, what);
        }
    }
    lb_model_config c = tiny(LB_MODEL_TRANSFORMER);
    c.length_scale = (lb_length_scale)7;
    CU_ASSERT_PTR_NULL(lb_model_new(&c));
    CU_ASSERT_TRUE(strstr(lb_last_error(), "length_scale") != NULL);
    c.length_scale = LB_LENGTH_SCALE_LOG_N;
    c.max_seq_len = 1;
    CU_ASSERT_PTR_NULL(lb_model_new(&c));
    CU_ASSERT_TRUE(strstr(lb_last_error(), "reference length") != NULL);
    lb_length_scale k;
    CU_ASSERT_EQUAL(lb_length_scale_parse("scalable", &k), LB_OK);
    CU_ASSERT_EQUAL(k, LB_LENGTH_SCALE_SCALABLE);
    CU_ASSERT_EQUAL(lb_length_scale_parse("ssmax", &k), LB_ERR_VALUE);
    CU_ASSERT_STRING_EQUAL(lb_length_scale_name(LB_LENGTH_SCALE_LOG_N), "log-n");
}

int main(void)
{
    const lb_test_case cases[] = {
        {"config defaults; kind and pos names parse and print", test_config_names},
        {"parameter names and counts of every family", test_param_names_counts},
        {"invalid configs are refused, naming the field", test_bad_configs},
        {"invalid inputs are refused with a clear message", test_bad_inputs},
        {"initialisation is deterministic from the seed", test_deterministic_init},
        {"output and attention shapes for every family, head and task", test_output_shapes},
        {"head=last equals head=every at lengths-1 (values and gradients)", test_head_last_equals_every},
        {"padding after the length does not change the output", test_padding_invariance},
        {"float32 matches float64; dropout is reproducible", test_float32_and_dropout},
        {"gradcheck of whole models, every family, tokens and features", test_model_gradcheck},
        {"length-scaled logits: log-n, scalable softmax, gradients", test_length_scale},
        {NULL, NULL},
    };
    return lb_test_main("model", cases);
}

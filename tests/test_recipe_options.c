/* The options of nanoGPT's recipe: models without biases (--bias 0), tied input and
 * output embeddings (--tie-embeddings 1), GPT-2's initialisation (--init gpt2) and the
 * weight decay on some parameters only (--decay-params, torch.optim parameter groups). */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "layers/model.h"
#include "layers/stream.h"
#include "optim/optim.h"
#include "support.h"
#include "train/trainer.h"

enum { V = 7, D = 8, B = 2, T = 5 };

static const int32_t TOKENS[B * T] = {1, 4, 0, 6, 2, 3, 3, 5, 1, 0};
static const int32_t TARGETS[B * T] = {4, 0, 6, 2, 5, 3, 5, 1, 0, 2};

static lb_model_config tiny_config(lb_model_kind kind, int tie, int bias)
{
    lb_model_config c;
    lb_model_config_default(kind, &c);
    c.dtype = LB_FLOAT64;
    c.vocab_size = V;
    c.num_classes = V;
    c.head = LB_HEAD_EVERY;
    c.d_model = D;
    c.n_heads = 2;
    c.d_ff = 12;
    c.n_layers = 2;
    c.hidden_size = D;
    c.pos = LB_POS_LEARNED;
    c.max_seq_len = T;
    c.tie_embeddings = tie;
    c.bias = bias;
    c.seed = 5;
    return c;
}

static int has_param(lb_model *m, const char *name) { return lb_params_find(lb_model_params(m), name) != NULL; }

/* --bias 0 removes every LayerNorm, feed-forward and head bias; tying removes head.weight. */
static void test_parameter_names(void)
{
    lb_model_config c = tiny_config(LB_MODEL_TRANSFORMER, 1, 0);
    lb_model *m = lb_model_new(&c);
    CU_ASSERT_PTR_NOT_NULL_FATAL(m);
    lb_params *ps = lb_model_params(m);
    for (int i = 0; i < ps->count; i++) {
        const char *name = ps->items[i]->name;
        CU_ASSERT_PTR_NULL(strstr(name, "bias"));
        CU_ASSERT_PTR_NULL(strstr(name, "head"));
    }
    CU_ASSERT_TRUE(has_param(m, "embedding.weight"));
    CU_ASSERT_TRUE(has_param(m, "blocks.1.ln2.weight"));
    CU_ASSERT_TRUE(has_param(m, "ln_f.weight"));
    /* embedding V*D, pos T*D, per block 2 LN (D each), 4 D*D, fc1 D*12, fc2 12*D; ln_f D */
    int64_t want = V * D + T * D + 2 * (2 * D + 4 * D * D + 2 * D * 12) + D;
    CU_ASSERT_EQUAL(lb_params_numel(ps), want);
    lb_model_free(m);

    c = tiny_config(LB_MODEL_TRANSFORMER, 0, 1);
    m = lb_model_new(&c);
    CU_ASSERT_PTR_NOT_NULL_FATAL(m);
    CU_ASSERT_TRUE(has_param(m, "head.weight"));
    CU_ASSERT_TRUE(has_param(m, "head.bias"));
    CU_ASSERT_TRUE(has_param(m, "blocks.0.ln1.bias"));
    CU_ASSERT_TRUE(has_param(m, "blocks.0.ffn.fc2.bias"));
    lb_model_free(m);
}

/* Forward and loss of tokens -> targets; the graph keeps the gradients. */
static double forward_backward(lb_graph *g, lb_model *m, lb_tensor **logits)
{
    lb_model_input in = {B, T, TOKENS, NULL, NULL};
    lb_var *y = lb_model_forward(g, m, &in, 0, NULL, NULL);
    CU_ASSERT_PTR_NOT_NULL_FATAL(y);
    lb_var *loss = lb_cross_entropy(g, y, TARGETS, -100);
    CU_ASSERT_PTR_NOT_NULL_FATAL(loss);
    CU_ASSERT_EQUAL(lb_backward(g, loss, NULL), LB_OK);
    *logits = lb_tensor_copy(y->value, LB_FLOAT64);
    return lb_tensor_flat(loss->value, 0);
}

/* A tied model is one parameter used twice: it equals an untied model whose head weight
 * is the embedding transposed, and its gradient is the sum of the two uses' gradients. */
static void test_tied_gradient_is_the_sum(void)
{
    for (int kind = LB_MODEL_TRANSFORMER; kind < LB_MODEL_KIND_COUNT; kind++) {
        lb_model_config ct = tiny_config((lb_model_kind)kind, 1, 1), cu = tiny_config((lb_model_kind)kind, 0, 1);
        lb_model *tied = lb_model_new(&ct), *untied = lb_model_new(&cu);
        CU_ASSERT_PTR_NOT_NULL_FATAL(tied);
        CU_ASSERT_PTR_NOT_NULL_FATAL(untied);
        lb_params *pt = lb_model_params(tied), *pu = lb_model_params(untied);
        CU_ASSERT_EQUAL(pt->count + 1, pu->count);
        lb_test_randomize_params(pt, 11, -0.5, 0.5);
        for (int i = 0; i < pt->count; i++) {
            lb_var *u = lb_params_find(pu, pt->items[i]->name);
            CU_ASSERT_PTR_NOT_NULL_FATAL(u);
            lb_tensor_copy_into(u->value, pt->items[i]->value);
        }
        lb_var *emb = lb_params_find(pt, "embedding.weight"), *head = lb_params_find(pu, "head.weight");
        CU_ASSERT_PTR_NOT_NULL_FATAL(head);
        for (int64_t v = 0; v < V; v++) /* head.weight [D, V] = embedding [V, D] transposed */
            for (int64_t d = 0; d < D; d++) {
                int64_t iw[2] = {d, v}, ie[2] = {v, d};
                lb_tensor_set(head->value, iw, lb_tensor_get(emb->value, ie));
            }
        lb_graph *g1 = lb_graph_new(), *g2 = lb_graph_new();
        lb_tensor *y1, *y2;
        double l1 = forward_backward(g1, tied, &y1), l2 = forward_backward(g2, untied, &y2);
        CU_ASSERT_DOUBLE_EQUAL(l1, l2, 1e-12);
        LB_ASSERT_TENSORS_CLOSE(y1, y2, 1e-12, 1e-12);
        lb_var *eu = lb_params_find(pu, "embedding.weight");
        double worst = 0;
        for (int64_t v = 0; v < V; v++)
            for (int64_t d = 0; d < D; d++) {
                int64_t iw[2] = {d, v}, ie[2] = {v, d};
                double sum = lb_tensor_get(eu->grad, ie) + lb_tensor_get(head->grad, iw);
                double diff = fabs(lb_tensor_get(emb->grad, ie) - sum);
                worst = diff > worst ? diff : worst;
            }
        CU_ASSERT_TRUE(worst < 1e-12);
        CU_ASSERT_TRUE(lb_tensor_get(emb->grad, (int64_t[]){6, 3}) != 0); /* token 6 is read and predicted */
        lb_tensor_free(y1);
        lb_tensor_free(y2);
        lb_graph_free(g1);
        lb_graph_free(g2);
        lb_model_free(tied);
        lb_model_free(untied);
    }
}

/* Streaming through a tied model without biases equals the full forward at every position. */
static void test_stream_tied_no_bias(void)
{
    lb_model_config c = tiny_config(LB_MODEL_TRANSFORMER, 1, 0);
    lb_model *m = lb_model_new(&c);
    CU_ASSERT_PTR_NOT_NULL_FATAL(m);
    lb_test_randomize_params(lb_model_params(m), 3, -0.5, 0.5);
    lb_graph *g = lb_graph_new();
    lb_model_input in = {B, T, TOKENS, NULL, NULL};
    lb_var *y = lb_model_forward(g, m, &in, 0, NULL, NULL); /* [B, T, V] */
    CU_ASSERT_PTR_NOT_NULL_FATAL(y);
    lb_model_state *s = lb_model_state_new(m, B, NULL);
    CU_ASSERT_PTR_NOT_NULL_FATAL(s);
    double worst = 0;
    for (int64_t t = 0; t < T; t++) {
        int32_t step[B] = {TOKENS[t], TOKENS[T + t]};
        lb_tensor *out = lb_model_step(s, step); /* [B, V] */
        CU_ASSERT_PTR_NOT_NULL_FATAL(out);
        for (int64_t b = 0; b < B; b++)
            for (int64_t v = 0; v < V; v++) {
                double diff = fabs(lb_tensor_get(out, (int64_t[]){b, v}) - lb_tensor_get(y->value, (int64_t[]){b, t, v}));
                worst = diff > worst ? diff : worst;
            }
        lb_tensor_free(out);
    }
    CU_ASSERT_TRUE(worst < 1e-12);
    lb_model_state_free(s);
    lb_graph_free(g);
    lb_model_free(m);
}

/* Tying needs token inputs predicting tokens through a body of width d_model. */
static void test_tie_errors(void)
{
    lb_model_config c = tiny_config(LB_MODEL_TRANSFORMER, 1, 1);
    c.num_classes = 3;
    CU_ASSERT_PTR_NULL(lb_model_new(&c));
    CU_ASSERT_TRUE(lb_test_error_has("the data has 3 classes and"));
    c = tiny_config(LB_MODEL_LSTM, 1, 1);
    c.hidden_size = 2 * D;
    CU_ASSERT_PTR_NULL(lb_model_new(&c));
    CU_ASSERT_TRUE(lb_test_error_has("hidden_size = 16 equal to d_model = 8"));
    c = tiny_config(LB_MODEL_CONV, 1, 1);
    c.vocab_size = 0;
    c.input_features = 3;
    CU_ASSERT_PTR_NULL(lb_model_new(&c));
    CU_ASSERT_TRUE(lb_test_error_has("token inputs"));
}

/* Mean and standard deviation of a parameter's values. */
static void moments(const lb_var *p, double *mean, double *std)
{
    int64_t n = lb_tensor_numel(p->value);
    double s = 0, s2 = 0;
    for (int64_t i = 0; i < n; i++)
        s += lb_tensor_flat(p->value, i);
    *mean = s / (double)n;
    for (int64_t i = 0; i < n; i++) {
        double d = lb_tensor_flat(p->value, i) - *mean;
        s2 += d * d;
    }
    *std = sqrt(s2 / (double)n);
}

/* GPT-2's initialisation: N(0, 0.02^2) weights and tables, residual projections
 * N(0, (0.02 / sqrt(2 L))^2), zero biases, LayerNorm weights 1. */
static void test_gpt2_init_statistics(void)
{
    lb_model_config c = tiny_config(LB_MODEL_TRANSFORMER, 0, 1);
    c.d_model = 128;
    c.n_heads = 4;
    c.d_ff = 512;
    c.n_layers = 4;
    c.vocab_size = c.num_classes = 65;
    c.max_seq_len = 64;
    c.init = LB_INIT_GPT2;
    lb_model *m = lb_model_new(&c);
    CU_ASSERT_PTR_NOT_NULL_FATAL(m);
    lb_params *ps = lb_model_params(m);
    const double residual = 0.02 / sqrt(8.0);
    int checked = 0;
    for (int i = 0; i < ps->count; i++) {
        const lb_var *p = ps->items[i];
        double mean, std;
        moments(p, &mean, &std);
        int64_t n = lb_tensor_numel(p->value);
        if (p->value->ndim >= 2) {
            int is_residual = strstr(p->name, "attn.w_o") || strstr(p->name, "ffn.fc2.weight");
            double want = is_residual ? residual : 0.02;
            /* the sample std of n normal draws is within 5 standard errors (want / sqrt(2n)) */
            CU_ASSERT_TRUE(fabs(std - want) < 5 * want / sqrt(2.0 * (double)n));
            CU_ASSERT_TRUE(fabs(mean) < 5 * want / sqrt((double)n));
            if (fabs(std - want) >= 5 * want / sqrt(2.0 * (double)n))
                fprintf(stderr, "\n  %s: std %g, expected %g\n", p->name, std, want);
            checked++;
        } else if (strstr(p->name, "bias")) {
            CU_ASSERT_DOUBLE_EQUAL(std, 0, 0);
            CU_ASSERT_DOUBLE_EQUAL(mean, 0, 0);
        } else { /* LayerNorm weights */
            CU_ASSERT_DOUBLE_EQUAL(std, 0, 0);
            CU_ASSERT_DOUBLE_EQUAL(mean, 1, 0);
        }
    }
    CU_ASSERT_EQUAL(checked, 2 + 4 * 6 + 1); /* embedding, positions, 4 x (q, k, v, o, fc1, fc2), head */
    /* the default init differs: N(0, 1) embedding */
    c.init = LB_INIT_DEFAULT;
    lb_model *d = lb_model_new(&c);
    double mean, std;
    moments(lb_params_find(lb_model_params(d), "embedding.weight"), &mean, &std);
    CU_ASSERT_TRUE(fabs(std - 1.0) < 0.05);
    lb_model_free(d);
    lb_model_free(m);
}

/* The three rules of --decay-params on nanoGPT's model (tied, no biases, learned
 * positions). */
static void test_decay_rules(void)
{
    lb_model_config c = tiny_config(LB_MODEL_TRANSFORMER, 1, 1);
    lb_model *m = lb_model_new(&c);
    CU_ASSERT_PTR_NOT_NULL_FATAL(m);
    lb_params *ps = lb_model_params(m);
    for (int i = 0; i < ps->count; i++) {
        const lb_var *p = ps->items[i];
        int table = strcmp(p->name, "embedding.weight") == 0 || strcmp(p->name, "pos_embedding") == 0;
        int matrix = p->value->ndim >= 2;
        CU_ASSERT_EQUAL(lb_model_param_is_table(m, p), table);
        CU_ASSERT_EQUAL(lb_decay_params_applies(LB_DECAY_ALL, m, p), 1);
        CU_ASSERT_EQUAL(lb_decay_params_applies(LB_DECAY_MATRICES, m, p), matrix);
        CU_ASSERT_EQUAL(lb_decay_params_applies(LB_DECAY_LINEAR, m, p), matrix && !table);
        if (strstr(p->name, "bias") || strstr(p->name, "ln"))
            CU_ASSERT_EQUAL(lb_decay_params_applies(LB_DECAY_MATRICES, m, p), 0);
    }
    lb_decay_params d;
    CU_ASSERT_EQUAL(lb_decay_params_parse("linear", &d), LB_OK);
    CU_ASSERT_EQUAL(d, LB_DECAY_LINEAR);
    CU_ASSERT_EQUAL(lb_decay_params_parse("2d", &d), LB_ERR_VALUE);
    CU_ASSERT_TRUE(lb_test_error_has("'2d'"));
    CU_ASSERT_STRING_EQUAL(lb_decay_params_name(LB_DECAY_MATRICES), "matrices");
    lb_model_free(m);
}

/* AdamW with two groups, as torch.optim.AdamW([{"params": [p], "weight_decay": wd},
 * {"params": [q], "weight_decay": 0.0}], lr): after one step (m_hat = g, v_hat = g^2)
 * p = p (1 - lr wd) - lr g / (|g| + eps) and q = q - lr g / (|g| + eps). */
static void test_optim_exempt_group(void)
{
    int64_t shape[1] = {3};
    lb_var *p = lb_test_random_param(1, shape, 1, "p"), *q = lb_test_random_param(1, shape, 2, "q");
    lb_var *params[2] = {p, q};
    lb_optim_config cfg = lb_optim_defaults(LB_OPTIM_ADAMW);
    cfg.lr = 0.1;
    cfg.weight_decay = 0.5;
    lb_optim *opt = lb_optim_new(&cfg, params, 2);
    CU_ASSERT_PTR_NOT_NULL_FATAL(opt);
    CU_ASSERT_EQUAL(lb_optim_decays(opt, 1), 1);
    CU_ASSERT_EQUAL(lb_optim_set_decay(opt, 1, 0), LB_OK);
    CU_ASSERT_EQUAL(lb_optim_decays(opt, 0), 1);
    CU_ASSERT_EQUAL(lb_optim_decays(opt, 1), 0);
    CU_ASSERT_EQUAL(lb_optim_set_decay(opt, 2, 0), LB_ERR_VALUE);
    double p0[3], q0[3], g[3] = {0.3, -2.0, 0.05};
    for (int64_t i = 0; i < 3; i++) {
        p0[i] = lb_tensor_flat(p->value, i);
        q0[i] = lb_tensor_flat(q->value, i);
    }
    p->grad = lb_tensor_from_doubles(LB_FLOAT64, 1, shape, g);
    q->grad = lb_tensor_from_doubles(LB_FLOAT64, 1, shape, g);
    CU_ASSERT_EQUAL(lb_optim_step(opt), LB_OK);
    double wp[3], wq[3];
    for (int i = 0; i < 3; i++) {
        double update = 0.1 * g[i] / (fabs(g[i]) + 1e-8);
        wp[i] = p0[i] * (1 - 0.1 * 0.5) - update;
        wq[i] = q0[i] - update;
    }
    LB_ASSERT_CLOSE(p->value, wp, 1e-15, 1e-14);
    LB_ASSERT_CLOSE(q->value, wq, 1e-15, 1e-14);
    lb_optim_free(opt);
    lb_param_free(p);
    lb_param_free(q);
}

int main(void)
{
    static const lb_test_case cases[] = {
        {"--bias 0 and tied embeddings: the parameters", test_parameter_names},
        {"tied embeddings: one parameter, gradient = the sum of both uses (every family)", test_tied_gradient_is_the_sum},
        {"streaming a tied model without biases = the full forward", test_stream_tied_no_bias},
        {"tied embeddings: refused where they cannot apply", test_tie_errors},
        {"--init gpt2: the statistics of every parameter", test_gpt2_init_statistics},
        {"--decay-params all / matrices / linear", test_decay_rules},
        {"weight decay exempt group = torch.optim.AdamW param groups", test_optim_exempt_group},
        {NULL, NULL},
    };
    return lb_test_main("recipe_options", cases);
}

/* Sequence models (layers/model.h): input -> body -> head.
 *
 * Named dims: B batch, T seq_len, V vocab_size, F input_features, D d_model,
 * H hidden_size (lstm), C num_classes (1 for regression), P read positions.
 *
 * Parameter layout (names in this order):
 *   input:  "embedding.weight" [V, D]                      tokens, init N(0, 1)
 *           or "input.weight" [F, D], "input.bias" [D]      features, Xavier uniform / 0
 *   pos:    "pos_embedding" [max_seq_len, D]               learned positions only, N(0, 1)
 *   body:   the family's (its file, layers/family_*.c, lists them)
 *   head:   "head.weight" [D or H, C], "head.bias" [C]     Xavier uniform / 0
 *           with tie_embeddings only "head.bias" (the weight is embedding.weight,
 *           read transposed); with bias 0 (attention families) no "head.bias"
 *   init gpt2 (attention families): every weight of 2+ dims redrawn afterwards from a
 *           fifth stream (the family's `finish`)
 *
 * Initialisation draws from one lb_rng seeded with cfg->seed, split into one
 * independent stream per part (input, positions, body, head), so e.g. changing
 * the head does not change the body's initial weights.
 */
#include "layers/model.h"
#include "tensor/names.h"
#include "layers/model_internal.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kernels/stream.h"

/* ---- names ---- */

static const char *const init_names[] = {"default", "gpt2"};

const char *lb_init_scheme_name(lb_init_scheme s)
{
    return lb_name_of(init_names, LB_COUNT_OF(init_names), (int)s, "unknown");
}

lb_status lb_init_scheme_parse(const char *name, lb_init_scheme *out)
{
    LB_CHECK_ARG(out, LB_ERR_VALUE);
    int i = 0;
    lb_status st = lb_name_parse("initialisation", init_names, LB_COUNT_OF(init_names), name, 0, &i);
    if (st == LB_OK)
        *out = (lb_init_scheme)i;
    return st;
}

/* ---- validation ---- */

static lb_status check_config(const lb_model_config *c)
{
#define BAD(...) lb_error(LB_ERR_VALUE, "model config: " __VA_ARGS__)
    const lb_family *fam = lb_family_at((int)c->kind);
    if (!fam)
    {
        char names[160] = "";
        for (int k = 0; k < LB_MODEL_KIND_COUNT; k++)
            snprintf(names + strlen(names), sizeof names - strlen(names), "%s%s", k == 0 ? "" : k + 1 < LB_MODEL_KIND_COUNT ? ", " : " or ",
                     lb_family_at(k)->name);
        return BAD("kind = %d is not a model family (%s)", (int)c->kind, names);
    }
    if (c->dtype != LB_FLOAT32 && c->dtype != LB_FLOAT64)
        return BAD("dtype = %d is neither float32 nor float64", (int)c->dtype);
    if ((c->vocab_size > 0) == (c->input_features > 0))
        return BAD("set exactly one of vocab_size (token inputs) and input_features (real-valued inputs); "
                   "got vocab_size = %lld, input_features = %lld",
                   (long long)c->vocab_size, (long long)c->input_features);
    if (c->head != LB_HEAD_LAST && c->head != LB_HEAD_EVERY)
        return BAD("head = %d is neither last nor every", (int)c->head);
    /* Every field's own range (layers/model_fields.def), for the fields this family uses,
     * then the family's own rules. */
    if (lb_model_config_check_ranges(c) != LB_OK || fam->ops->check(c) != LB_OK)
        return lb_last_status();
    if (c->tie_embeddings) {
        int64_t width = fam->body_width(c);
        if (c->vocab_size == 0)
            return BAD("tie_embeddings = 1 needs token inputs (the head's weight is the token embedding), but the data has "
                       "real-valued features");
        if (c->num_classes != c->vocab_size)
            return BAD("tie_embeddings = 1 needs a head that predicts the input tokens (its weight is the token "
                       "embedding), but the data has %lld classes and %lld token ids",
                       (long long)c->num_classes, (long long)c->vocab_size);
        if (width != c->d_model)
            return BAD("tie_embeddings = 1 needs hidden_size = %lld equal to d_model = %lld (the head reads the body's width)",
                       (long long)width, (long long)c->d_model);
    }
    return LB_OK;
#undef BAD
}

/* ---- construction ---- */

int lb_model_param_is_table(const lb_model *m, const lb_var *p)
{
    LB_CHECK_ARG(m, 0);
    LB_CHECK_ARG(p, 0);
    return p == m->embedding || (m->pos.embedding && p == m->pos.embedding);
}

lb_var *lb_model_head(lb_graph *g, const lb_model *m, lb_var *h)
{
    if (!m->cfg.tie_embeddings)
        return lb_linear_forward(g, &m->head, h);
    if (!h)
        return NULL;
    /* h [..., D] @ embedding[V, D]^T -> [..., V] (+ bias) */
    int64_t d = m->cfg.d_model, rows = lb_tensor_numel(h->value) / d;
    int64_t flat[2] = {rows, d};
    lb_var *y = lb_matmul_t(g, lb_reshape(g, h, 2, flat), 0, m->embedding, 1);
    if (y && m->head.bias)
        y = lb_add(g, y, m->head.bias);
    if (!y)
        return NULL;
    int64_t shape[8];
    int nd = h->value->ndim;
    for (int i = 0; i < nd - 1; i++)
        shape[i] = h->value->shape[i];
    shape[nd - 1] = m->cfg.vocab_size;
    return lb_reshape(g, y, nd, shape);
}

void lb_model_head_rows(const lb_model *m, int64_t n, const void *h, void *out)
{
    const lb_model_config *c = &m->cfg;
    int64_t classes = c->num_classes > 0 ? c->num_classes : 1, width = m->head.in_features;
    if (c->tie_embeddings) /* [n, D] @ embedding[V, D]^T */
        lb_k_affine_rows_t(c->dtype, n, width, classes, h, lb_tensor_data(m->embedding->value),
                           m->head.bias ? lb_tensor_data(m->head.bias->value) : NULL, out);
    else
        lb_k_affine_rows(c->dtype, n, width, classes, h, lb_tensor_data(m->head.weight->value),
                         m->head.bias ? lb_tensor_data(m->head.bias->value) : NULL, out);
}

static lb_status build(lb_model *m)
{
    const lb_model_config *c = &m->cfg;
    lb_params *ps = &m->params;
    lb_rng master;
    lb_rng_seed(&master, c->seed);
    lb_rng r_input = lb_rng_split(&master), r_pos = lb_rng_split(&master);
    lb_rng r_body = lb_rng_split(&master), r_head = lb_rng_split(&master);

    if (c->vocab_size > 0) {
        int64_t s[2] = {c->vocab_size, c->d_model};
        if (!(m->embedding = lb_params_add(ps, "embedding", "weight", c->dtype, 2, s)))
            return lb_last_status();
        lb_init_normal(m->embedding, &r_input, 1.0);
    } else if (lb_linear_init(&m->input, ps, "input", c->input_features, c->d_model, 1, c->dtype, &r_input) != LB_OK) {
        return lb_last_status();
    }

    if (m->family->ops->build(m, &r_pos, &r_body) != LB_OK)
        return lb_last_status();
    int64_t width = m->family->body_width(c);
    int64_t outputs = c->num_classes > 0 ? c->num_classes : 1;
    /* The head has a bias unless the family has a bias option and it is 0. */
    int head_bias = !lb_model_field_applies(lb_model_field_find("bias"), c) || c->bias;
    if (c->tie_embeddings) { /* the head reads h @ embedding^T: only its bias is its own */
        memset(&m->head, 0, sizeof m->head);
        snprintf(m->head.name, sizeof m->head.name, "head");
        m->head.in_features = width;
        m->head.out_features = outputs;
        int64_t sb[1] = {outputs};
        if (head_bias && !(m->head.bias = lb_params_add(ps, "head", "bias", c->dtype, 1, sb)))
            return lb_last_status();
    } else if (lb_linear_init(&m->head, ps, "head", width, outputs, head_bias, c->dtype, &r_head) != LB_OK) {
        return lb_last_status();
    }
    if (m->family->ops->finish)
        m->family->ops->finish(m, &master);
    return LB_OK;
}

lb_model *lb_model_new(const lb_model_config *cfg)
{
    if (!cfg) {
        lb_error(LB_ERR_VALUE, "model: the config is NULL (start from lb_model_config_default)");
        return NULL;
    }
    if (check_config(cfg) != LB_OK)
        return NULL;
    lb_model *m = calloc(1, sizeof *m);
    if (!m) {
        lb_error(LB_ERR_MEMORY, "model: out of memory");
        return NULL;
    }
    m->cfg = *cfg;
    m->family = lb_family_at((int)cfg->kind);
    lb_params_init(&m->params);
    if (build(m) != LB_OK) {
        lb_error_context("building a model with kind = %s", lb_model_kind_name(cfg->kind));
        lb_model_free(m);
        return NULL;
    }
    return m;
}

void lb_model_free(lb_model *m)
{
    if (!m)
        return;
    if (m->family)
        m->family->ops->free(m);
    lb_params_free(&m->params);
    free(m);
}

int64_t lb_model_step_bytes(const lb_model_config *cfg, int64_t batch, int64_t seq_len)
{
    LB_CHECK_ARG(cfg, -1);
    if (batch < 1 || seq_len < 1) {
        lb_error(LB_ERR_VALUE, "lb_model_step_bytes: batch %lld and seq_len %lld must be at least 1", (long long)batch,
                 (long long)seq_len);
        return -1;
    }
    double positions = (double)batch * (double)seq_len;
    double classes = cfg->num_classes > 0 ? (double)cfg->num_classes : 1.0;
    double logits = (cfg->head == LB_HEAD_EVERY ? positions : (double)batch) * classes;
    const lb_family *fam = lb_family_of(cfg->kind);
    if (!fam)
        return -1;
    double per_layer = cfg->n_layers > 0 ? fam->layer_floats(cfg) : 0;
    double elements = 2.0 * (logits + positions * per_layer * (double)cfg->n_layers); /* values and gradients */
    double bytes = elements * (double)lb_dtype_size(cfg->dtype);
    return bytes >= 9.2e18 ? INT64_MAX : (int64_t)bytes;
}

const lb_model_config *lb_model_get_config(const lb_model *m)
{
    LB_CHECK_ARG(m, NULL);
    return &m->cfg;
}
lb_params *lb_model_params(lb_model *m)
{
    LB_CHECK_ARG(m, NULL);
    return &m->params;
}

/* ---- forward ---- */

lb_status lb_model_check_input(const lb_model *m, const lb_model_input *in)
{
    const lb_model_config *c = &m->cfg;
    if (!in)
        return lb_error(LB_ERR_VALUE, "model input: the input is NULL");
    int64_t b = in->batch, t = in->seq_len;
    if (b < 1 || t < 1)
        return lb_error(LB_ERR_VALUE, "model input: batch = %lld and seq_len = %lld must both be >= 1", (long long)b,
                        (long long)t);
    if (b > (INT64_MAX / 4) / t) /* batch x seq_len positions, and their bytes, in int64 */
        return lb_error(LB_ERR_VALUE, "model input: batch = %lld x seq_len = %lld positions overflow", (long long)b,
                        (long long)t);
    if (c->vocab_size > 0) {
        if (!in->tokens)
            return lb_error(LB_ERR_VALUE, "model input: the model reads token ids (vocab_size = %lld) but tokens is NULL",
                            (long long)c->vocab_size);
        if (in->features)
            return lb_error(LB_ERR_VALUE, "model input: the model reads token ids (vocab_size = %lld), not features: "
                                          "features must be NULL",
                            (long long)c->vocab_size);
        for (int64_t i = 0; i < b * t; i++)
            if (in->tokens[i] < 0 || in->tokens[i] >= c->vocab_size)
                return lb_error(LB_ERR_VALUE, "model input: token id %d at [%lld, %lld] is outside [0, vocab_size = %lld)",
                                (int)in->tokens[i], (long long)(i / t), (long long)(i % t), (long long)c->vocab_size);
    } else {
        const lb_tensor *f = in->features;
        char sf[128];
        if (!f)
            return lb_error(LB_ERR_VALUE, "model input: the model reads real-valued features (input_features = %lld) but "
                                          "features is NULL",
                            (long long)c->input_features);
        if (in->tokens)
            return lb_error(LB_ERR_VALUE, "model input: the model reads real-valued features (input_features = %lld), "
                                          "not token ids: tokens must be NULL",
                            (long long)c->input_features);
        if (f->ndim != 3 || f->shape[0] != b || f->shape[1] != t || f->shape[2] != c->input_features)
            return lb_error(LB_ERR_SHAPE, "model input: features %s must be [B, T, F] = [%lld, %lld, %lld]",
                            lb_tensor_describe(f, sf, sizeof sf), (long long)b, (long long)t,
                            (long long)c->input_features);
    }
    if (in->lengths)
        for (int64_t i = 0; i < b; i++)
            if (in->lengths[i] < 1 || in->lengths[i] > t)
                return lb_error(LB_ERR_VALUE, "model input: lengths[%lld] = %d is outside [1, seq_len = %lld]", (long long)i,
                                (int)in->lengths[i], (long long)t);
    if (m->family->max_positions(c) > 0 && t > m->family->max_positions(c))
        return lb_error(LB_ERR_VALUE, "model input: seq_len = %lld exceeds max_seq_len = %lld of the learned positions "
                                      "(raise max_seq_len, or use sinusoidal, rotary or no positions)",
                        (long long)t, (long long)c->max_seq_len);
    return LB_OK;
}

/* The embedded input [B, T, D]. */
lb_var *lb_model_embed(lb_graph *g, const lb_model *m, const lb_model_input *in)
{
    if (m->embedding) {
        int64_t s[2] = {in->batch, in->seq_len};
        return lb_embedding(g, m->embedding, in->tokens, 2, s);
    }
    return lb_linear_forward(g, &m->input, lb_input(g, lb_tensor_copy(in->features, m->cfg.dtype), 0));
}

lb_var *lb_model_forward(lb_graph *g, lb_model *m, const lb_model_input *in, int training, lb_rng *rng,
                         lb_tensor **attention_out)
{
    if (attention_out)
        *attention_out = NULL;
    if (!g || !m) {
        lb_error(LB_ERR_VALUE, "model forward: %s is NULL", !g ? "the graph" : "the model");
        return NULL;
    }
    if (lb_model_check_input(m, in) != LB_OK)
        return NULL;
    const lb_model_config *c = &m->cfg;
    if (training && lb_model_field_applies(lb_model_field_find("dropout"), c) && c->dropout > 0 && !rng) {
        lb_error(LB_ERR_VALUE, "model forward: training with dropout = %g needs a random generator, but rng is NULL",
                 c->dropout);
        return NULL;
    }
    int64_t b = in->batch, t = in->seq_len;

    /* HEAD_LAST reads one position per sequence: lengths[b] - 1, or T - 1. */
    int32_t *last = NULL;
    lb_attn_queries queries = {NULL, 1};
    if (c->head == LB_HEAD_LAST) {
        last = malloc((size_t)b * sizeof *last);
        if (!last) {
            lb_error(LB_ERR_MEMORY, "model forward: out of memory");
            return NULL;
        }
        for (int64_t i = 0; i < b; i++)
            last[i] = in->lengths ? in->lengths[i] - 1 : (int32_t)(t - 1);
        queries.positions = last;
    }
    const lb_attn_queries *read = last ? &queries : NULL;

    lb_var *x = lb_model_embed(g, m, in), *h = NULL, *weights = NULL;
    if (x)
        h = m->family->ops->forward(g, m, x, in, read, training, rng, attention_out ? &weights : NULL);
    lb_var *y = lb_model_head(g, m, h); /* [B, P, C or 1] */
    free(last);
    if (y) {
        int64_t shape[3] = {b, c->head == LB_HEAD_LAST ? 1 : t, c->num_classes};
        int nd = 3;
        if (c->head == LB_HEAD_LAST) { /* [B, C] or [B] */
            shape[1] = c->num_classes;
            nd = c->num_classes > 0 ? 2 : 1;
        } else if (c->num_classes == 0) { /* [B, T] */
            nd = 2;
        }
        y = lb_reshape(g, y, nd, shape);
    }
    if (!y) {
        lb_error_context("the forward pass of a model with kind = %s", lb_model_kind_name(c->kind));
        return NULL;
    }
    if (attention_out && weights) {
        *attention_out = lb_tensor_copy(weights->value, weights->value->dtype);
        if (!*attention_out)
            return NULL;
    }
    return y;
}

lb_status lb_model_attention_weights(lb_model *m, const lb_model_input *in, lb_tensor **weights)
{
    LB_CHECK_ARG(m && in && weights, LB_ERR_VALUE);
    const lb_model_config *c = &m->cfg;
    const int layers = c->n_layers;
    for (int l = 0; l < layers; l++)
        weights[l] = NULL;
    if (!m->family->attention) {
        char names[256] = "";
        for (int k = 0; k < LB_MODEL_KIND_COUNT; k++) {
            const lb_family *f = lb_family_at(k);
            if (f && f->attention)
                snprintf(names + strlen(names), sizeof names - strlen(names), "%s%s", names[0] ? ", " : "", f->name);
        }
        return lb_error(LB_ERR_VALUE, "a %s model has no attention weights (the families with attention: %s)",
                        lb_model_kind_name(c->kind), names);
    }
    if (lb_model_check_input(m, in) != LB_OK)
        return lb_last_status();
    lb_var **vars = calloc((size_t)layers, sizeof *vars);
    lb_graph *g = vars ? lb_graph_new() : NULL;
    if (!g) {
        free(vars);
        return lb_error(LB_ERR_MEMORY, "attention weights: out of memory");
    }
    lb_graph_set_grad_enabled(g, 0);
    m->transformer.layer_weights = vars;
    lb_var *x = lb_model_embed(g, m, in);
    lb_var *h = x ? m->family->ops->forward(g, m, x, in, NULL, 0, NULL, NULL) : NULL;
    m->transformer.layer_weights = NULL;
    lb_status st = h ? LB_OK : lb_last_status();
    for (int l = 0; st == LB_OK && l < layers; l++) {
        if (!vars[l])
            st = lb_error(LB_ERR_VALUE, "a %s model does not give its layer %d's attention weights",
                          lb_model_kind_name(c->kind), l);
        else if (!(weights[l] = lb_tensor_copy(vars[l]->value, vars[l]->value->dtype)))
            st = lb_last_status();
    }
    if (st != LB_OK)
        for (int l = 0; l < layers; l++) {
            lb_tensor_free(weights[l]);
            weights[l] = NULL;
        }
    lb_graph_free(g);
    free(vars);
    return st;
}

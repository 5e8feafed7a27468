/* The model configuration's field list (layers/model_fields.def): every member is
 * described once, and defaults, parsing, formatting, applicability per family and
 * range checks all follow from that one description. */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "layers/model.h"
#include "support.h"

/* Every member of lb_model_config has exactly one row, in member order. */
static void test_every_member_has_one_row(void)
{
    int n;
    const lb_model_field *f = lb_model_fields(&n);
    CU_ASSERT_EQUAL(n, 32);
    CU_ASSERT_EQUAL(f[0].offset, 0);
    CU_ASSERT_STRING_EQUAL(f[0].member, "kind");
    CU_ASSERT_STRING_EQUAL(f[n - 1].member, "seed");
    CU_ASSERT_EQUAL(f[n - 1].offset, offsetof(lb_model_config, seed));
    for (int i = 1; i < n; i++) {
        CU_ASSERT_TRUE(f[i].offset > f[i - 1].offset);
        for (int j = 0; j < i; j++) {
            CU_ASSERT_STRING_NOT_EQUAL(f[i].member, f[j].member);
            if (f[i].option && f[j].option)
                CU_ASSERT_STRING_NOT_EQUAL(f[i].option, f[j].option);
        }
        CU_ASSERT_TRUE(f[i].help && strlen(f[i].help) > 10);
        CU_ASSERT_TRUE((f[i].families & LB_FAMILY_ALL) != 0);
    }
    CU_ASSERT_EQUAL(lb_model_field_find("d-model")->offset, offsetof(lb_model_config, d_model));
    CU_ASSERT_EQUAL(lb_model_field_find("d_model")->offset, offsetof(lb_model_config, d_model));
    CU_ASSERT_EQUAL(lb_model_field_find("hidden")->offset, offsetof(lb_model_config, hidden_size));
    CU_ASSERT_PTR_NULL(lb_model_field_find("nonsense"));
    CU_ASSERT_PTR_NULL(lb_model_field_find("max_seq_len")->option); /* set from the data, not an option */
}

/* The defaults of each family, as the field list gives them. */
static void test_defaults_per_family(void)
{
    lb_model_config t, l, r, c;
    lb_model_config_default(LB_MODEL_TRANSFORMER, &t);
    lb_model_config_default(LB_MODEL_LOCAL, &l);
    lb_model_config_default(LB_MODEL_LSTM, &r);
    lb_model_config_default(LB_MODEL_CONV, &c);
    CU_ASSERT_EQUAL(t.kind, LB_MODEL_TRANSFORMER);
    CU_ASSERT_EQUAL(c.kind, LB_MODEL_CONV);
    CU_ASSERT_EQUAL(t.dtype, LB_FLOAT32);
    CU_ASSERT_EQUAL(t.n_layers, 2);
    CU_ASSERT_EQUAL(c.n_layers, 4);
    CU_ASSERT_EQUAL(t.window, 0);
    CU_ASSERT_EQUAL(l.window, 16);
    CU_ASSERT_EQUAL(t.d_model, 64);
    CU_ASSERT_EQUAL(t.n_heads, 4);
    CU_ASSERT_EQUAL(t.n_kv_heads, 0); /* = n_heads: multi-head */
    CU_ASSERT_EQUAL(lb_model_kv_heads(&t), 4);
    CU_ASSERT_EQUAL(t.d_ff, 128);
    CU_ASSERT_EQUAL(t.max_seq_len, 1024);
    CU_ASSERT_EQUAL(t.causal, 1);
    CU_ASSERT_EQUAL(r.hidden_size, 128);
    CU_ASSERT_EQUAL(c.kernel_size, 3);
    CU_ASSERT_EQUAL(t.d_state, 16); /* Mamba's, for every family */
    CU_ASSERT_EQUAL(t.d_conv, 4);
    CU_ASSERT_EQUAL(t.expand, 2);
    CU_ASSERT_EQUAL(t.dt_rank, 0);
    CU_ASSERT_EQUAL(t.seed, 1);
    CU_ASSERT_EQUAL(t.pos, LB_POS_NONE);
    CU_ASSERT_EQUAL(t.head, LB_HEAD_LAST);
    CU_ASSERT_DOUBLE_EQUAL(r.forget_bias, 0.0, 0);
    CU_ASSERT_EQUAL(t.bias, 1);
    CU_ASSERT_EQUAL(t.tie_embeddings, 0);
    CU_ASSERT_EQUAL(t.init, LB_INIT_DEFAULT);
    CU_ASSERT_EQUAL(t.norm, LB_NORM_LAYERNORM);
    CU_ASSERT_EQUAL(t.norm_position, LB_NORM_PRE);
    CU_ASSERT_EQUAL(t.ffn, LB_FFN_GELU);
}

/* Text -> field -> text gives the same text for every field, and a second config set
 * from those texts equals the first field by field. */
static void test_set_and_format_round_trip(void)
{
    static const struct {
        const char *name, *text;
    } values[] = {
        {"kind", "lstm"},        {"dtype", "float64"},      {"vocab_size", "17"}, {"input_features", "0"},
        {"num_classes", "5"},    {"head", "every"},         {"max_seq_len", "333"}, {"layers", "3"},
        {"d-model", "24"},       {"heads", "6"},            {"kv-heads", "2"},    {"d-ff", "48"},
        {"pos", "rotary"},
        {"window", "9"},         {"causal", "0"},           {"length-scale", "log-n"}, {"dropout", "0.15"},
        {"bias", "0"},           {"norm", "rmsnorm"},       {"norm-position", "post"}, {"ffn", "geglu"},
        {"tie-embeddings", "1"}, {"init", "gpt2"},
        {"hidden", "12"},
        {"forget-bias", "-1.5"}, {"kernel", "5"},           {"decay", "1"},       {"d-state", "8"},
        {"d-conv", "3"},         {"expand", "3"},           {"dt-rank", "5"},     {"model-seed", "18446744073"},
    };
    lb_model_config a;
    lb_model_config_default(LB_MODEL_TRANSFORMER, &a);
    int n;
    const lb_model_field *f = lb_model_fields(&n);
    CU_ASSERT_EQUAL_FATAL(n, (int)(sizeof values / sizeof values[0]));
    for (int i = 0; i < n; i++) {
        const lb_model_field *g = lb_model_field_find(values[i].name);
        CU_ASSERT_PTR_EQUAL(g, &f[i]);
        CU_ASSERT_EQUAL(lb_model_field_set(&a, g, values[i].text), LB_OK);
        char text[64];
        CU_ASSERT_STRING_EQUAL(lb_model_field_format(&a, g, text, sizeof text), values[i].text);
    }
    CU_ASSERT_EQUAL(a.kind, LB_MODEL_LSTM);
    CU_ASSERT_EQUAL(a.dtype, LB_FLOAT64);
    CU_ASSERT_EQUAL(a.head, LB_HEAD_EVERY);
    CU_ASSERT_EQUAL(a.pos, LB_POS_ROTARY);
    CU_ASSERT_EQUAL(a.length_scale, LB_LENGTH_SCALE_LOG_N);
    CU_ASSERT_EQUAL(a.hidden_size, 12);
    CU_ASSERT_EQUAL(a.n_kv_heads, 2);
    CU_ASSERT_EQUAL(a.bias, 0);
    CU_ASSERT_EQUAL(a.tie_embeddings, 1);
    CU_ASSERT_EQUAL(a.init, LB_INIT_GPT2);
    CU_ASSERT_EQUAL(a.norm, LB_NORM_RMSNORM);
    CU_ASSERT_EQUAL(a.norm_position, LB_NORM_POST);
    CU_ASSERT_EQUAL(a.ffn, LB_FFN_GEGLU);
    CU_ASSERT_DOUBLE_EQUAL(a.dropout, 0.15, 0);
    CU_ASSERT_DOUBLE_EQUAL(a.forget_bias, -1.5, 0);
    CU_ASSERT_EQUAL(a.seed, 18446744073ull);
    CU_ASSERT_EQUAL(a.decay, 1);
    CU_ASSERT_EQUAL(a.d_state, 8);
    CU_ASSERT_EQUAL(a.d_conv, 3);
    CU_ASSERT_EQUAL(a.expand, 3);
    CU_ASSERT_EQUAL(a.dt_rank, 5);
    CU_ASSERT_DOUBLE_EQUAL(lb_model_field_number(&a, lb_model_field_find("d-model")), 24.0, 0);
}

/* Errors name the option as typed and the accepted range; nothing changes. */
static void test_set_errors(void)
{
    lb_model_config c;
    lb_model_config_default(LB_MODEL_TRANSFORMER, &c);
    CU_ASSERT_EQUAL(lb_model_field_set(&c, lb_model_field_find("d-model"), "0"), LB_ERR_VALUE);
    CU_ASSERT_STRING_EQUAL(lb_last_error(), "--d-model must be in [1, 65536], got 0");
    CU_ASSERT_EQUAL(lb_model_field_set(&c, lb_model_field_find("heads"), "2.5"), LB_ERR_VALUE);
    CU_ASSERT_STRING_EQUAL(lb_last_error(), "--heads expects a whole number, got '2.5'");
    CU_ASSERT_EQUAL(lb_model_field_set(&c, lb_model_field_find("dropout"), "1"), LB_ERR_VALUE);
    CU_ASSERT_STRING_EQUAL(lb_last_error(), "--dropout must be in [0, 0.99], got 1");
    CU_ASSERT_EQUAL(lb_model_field_set(&c, lb_model_field_find("dropout"), "nan"), LB_ERR_VALUE);
    CU_ASSERT_EQUAL(lb_model_field_set(&c, lb_model_field_find("layers"), " 2"), LB_ERR_VALUE);
    CU_ASSERT_EQUAL(lb_model_field_set(&c, lb_model_field_find("pos"), "xpos"), LB_ERR_VALUE);
    CU_ASSERT_TRUE(lb_test_error_has("--pos"));
    CU_ASSERT_TRUE(lb_test_error_has("xpos"));
    CU_ASSERT_TRUE(lb_test_error_has("alibi")); /* the accepted names are listed */
    CU_ASSERT_EQUAL(lb_model_field_set(&c, lb_model_field_find("head"), "first"), LB_ERR_VALUE);
    CU_ASSERT_STRING_EQUAL(lb_last_error(), "head: 'first' is not one of last, every");
    CU_ASSERT_EQUAL(lb_model_field_set(&c, lb_model_field_find("model"), "gru"), LB_ERR_VALUE);
    CU_ASSERT_TRUE(lb_test_error_has("--model"));
    lb_model_config d;
    lb_model_config_default(LB_MODEL_TRANSFORMER, &d);
    CU_ASSERT_EQUAL(memcmp(&c, &d, sizeof c), 0);
}

/* Which fields a model uses: its family's, and max_seq_len only with learned positions. */
static void test_applies_per_family(void)
{
    lb_model_config t, l, r, c;
    lb_model_config_default(LB_MODEL_TRANSFORMER, &t);
    lb_model_config_default(LB_MODEL_LOCAL, &l);
    lb_model_config_default(LB_MODEL_LSTM, &r);
    lb_model_config_default(LB_MODEL_CONV, &c);
    const lb_model_field *window = lb_model_field_find("window"), *hidden = lb_model_field_find("hidden");
    const lb_model_field *heads = lb_model_field_find("heads"), *kernel = lb_model_field_find("kernel");
    const lb_model_field *msl = lb_model_field_find("max_seq_len"), *layers = lb_model_field_find("layers");
    CU_ASSERT_FALSE(lb_model_field_applies(window, &t));
    CU_ASSERT_TRUE(lb_model_field_applies(window, &l));
    CU_ASSERT_TRUE(lb_model_field_applies(heads, &l));
    CU_ASSERT_FALSE(lb_model_field_applies(heads, &r));
    CU_ASSERT_TRUE(lb_model_field_applies(hidden, &r));
    CU_ASSERT_FALSE(lb_model_field_applies(hidden, &c));
    CU_ASSERT_TRUE(lb_model_field_applies(kernel, &c));
    CU_ASSERT_FALSE(lb_model_field_applies(kernel, &t));
    for (int k = 0; k < 4; k++)
        CU_ASSERT_TRUE(lb_model_field_in_family(layers, (lb_model_kind)k));
    /* A table indexed by position exists only with learned positions. */
    CU_ASSERT_FALSE(lb_model_field_applies(msl, &t));
    CU_ASSERT_FALSE(lb_model_field_applies(msl, &r));
    t.pos = LB_POS_LEARNED;
    r.pos = LB_POS_LEARNED; /* not a field of the LSTM: still no table */
    CU_ASSERT_TRUE(lb_model_field_applies(msl, &t));
    CU_ASSERT_FALSE(lb_model_field_applies(msl, &r));
    t.pos = LB_POS_ROTARY;
    CU_ASSERT_FALSE(lb_model_field_applies(msl, &t));
    /* log-n length scaling divides by ln(max_seq_len): the field is part of the model. */
    t.length_scale = LB_LENGTH_SCALE_LOG_N;
    CU_ASSERT_TRUE(lb_model_field_applies(msl, &t));
    t.length_scale = LB_LENGTH_SCALE_SCALABLE;
    CU_ASSERT_FALSE(lb_model_field_applies(msl, &t));
}

/* lb_model_new checks each used field's range from the list, and ignores the fields
 * its family does not use. */
static void test_model_new_checks_ranges(void)
{
    lb_model_config c;
    lb_model_config_default(LB_MODEL_TRANSFORMER, &c);
    c.vocab_size = 5;
    c.num_classes = 3;
    c.d_model = 8;
    c.n_heads = 2;
    c.d_ff = 8;
    c.n_layers = 65;
    CU_ASSERT_PTR_NULL(lb_model_new(&c));
    CU_ASSERT_STRING_EQUAL(lb_last_error(), "model config: n_layers = 65 must be in [1, 64] for a transformer model");
    c.n_layers = 1;
    c.causal = 2;
    CU_ASSERT_PTR_NULL(lb_model_new(&c));
    CU_ASSERT_TRUE(lb_test_error_has("causal = 2"));
    c.causal = 1;
    c.hidden_size = -4; /* an LSTM field: a transformer does not read it */
    c.kernel_size = 0;
    c.max_seq_len = 0;  /* no learned positions: no table */
    lb_model *m = lb_model_new(&c);
    CU_ASSERT_PTR_NOT_NULL(m);
    lb_model_free(m);
    c.pos = LB_POS_LEARNED;
    CU_ASSERT_PTR_NULL(lb_model_new(&c));
    CU_ASSERT_TRUE(lb_test_error_has("max_seq_len = 0"));
}

int main(void)
{
    const lb_test_case cases[] = {
        {"every member of the model config has one row, in order", test_every_member_has_one_row},
        {"defaults per family come from the list", test_defaults_per_family},
        {"every field round-trips through text", test_set_and_format_round_trip},
        {"parse errors name the option and the range; nothing changes", test_set_errors},
        {"which fields a model uses (family, learned positions)", test_applies_per_family},
        {"lb_model_new checks the ranges of the fields it uses", test_model_new_checks_ranges},
        {NULL, NULL},
    };
    return lb_test_main("model_fields", cases);
}

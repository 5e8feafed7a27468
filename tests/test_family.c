/* The family table (layers/family.h): every family has one row, named and found both
 * ways, and the numbers a row states of its family hold for a real model of it: the
 * streaming state's size after t events, causality, the longest sequence it reads. */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "layers/family.h"
#include "layers/model.h"
#include "layers/stream.h"
#include "support.h"

/* Each row sits at its kind, and its name parses back to it. */
static void test_rows_and_names(void)
{
    for (int k = 0; k < LB_MODEL_KIND_COUNT; k++) {
        const lb_family *f = lb_family_at(k);
        CU_ASSERT_PTR_NOT_NULL_FATAL(f);
        CU_ASSERT_EQUAL(f->kind, k);
        CU_ASSERT_PTR_EQUAL(lb_family_of(f->kind), f);
        CU_ASSERT_PTR_EQUAL(lb_family_find(f->name), f);
        CU_ASSERT_STRING_EQUAL(lb_model_kind_name(f->kind), f->name);
        lb_model_kind parsed = LB_MODEL_KIND_COUNT;
        CU_ASSERT_EQUAL(lb_model_kind_parse(f->name, &parsed), LB_OK);
        CU_ASSERT_EQUAL(parsed, f->kind);
        CU_ASSERT_TRUE(f->summary && strlen(f->summary) > 10);
        CU_ASSERT_PTR_NOT_NULL(f->ops);
    }
    CU_ASSERT_STRING_EQUAL(lb_family_at(0)->name, "transformer");
    CU_ASSERT_STRING_EQUAL(lb_family_at(2)->name, "lstm");
    CU_ASSERT_PTR_NULL(lb_family_at(LB_MODEL_KIND_COUNT));
    CU_ASSERT_PTR_NULL(lb_family_at(-1));
    CU_ASSERT_PTR_NULL(lb_family_of((lb_model_kind)LB_MODEL_KIND_COUNT));
    CU_ASSERT_TRUE(lb_test_error_has("is not a model family"));
    CU_ASSERT_PTR_NULL(lb_family_find("gru"));
    lb_model_kind k = LB_MODEL_LSTM;
    CU_ASSERT_NOT_EQUAL(lb_model_kind_parse("gru", &k), LB_OK);
    CU_ASSERT_TRUE(lb_test_error_has("gru"));
    CU_ASSERT_TRUE(lb_test_error_has("conv"));
    CU_ASSERT_EQUAL(k, LB_MODEL_LSTM);
    /* a config of no family is refused by name */
    lb_model_config c;
    lb_model_config_default(LB_MODEL_TRANSFORMER, &c);
    c.vocab_size = 4;
    c.num_classes = 4;
    c.kind = (lb_model_kind)LB_MODEL_KIND_COUNT;
    CU_ASSERT_PTR_NULL(lb_model_new(&c));
    CU_ASSERT_TRUE(lb_test_error_has("transformer, local, lstm, conv, linear or mamba"));
}

/* Which families a field belongs to, as text. */
static void test_field_families_text(void)
{
    char buf[96];
    CU_ASSERT_STRING_EQUAL(lb_model_field_families(lb_model_field_find("heads"), ", ", buf, sizeof buf),
                           "transformer, local, linear");
    CU_ASSERT_STRING_EQUAL(lb_model_field_families(lb_model_field_find("hidden"), ", ", buf, sizeof buf), "lstm");
    CU_ASSERT_STRING_EQUAL(lb_model_field_families(lb_model_field_find("d-state"), ", ", buf, sizeof buf), "mamba");
    CU_ASSERT_STRING_EQUAL(lb_model_field_families(lb_model_field_find("d-model"), ", ", buf, sizeof buf), "");
    CU_ASSERT_PTR_NULL(lb_model_field_families(NULL, ", ", buf, sizeof buf));
}

/* A small float64 token model of family kind: 2 layers, d_model 8, every position read. */
static void small_config(lb_model_kind kind, lb_model_config *c)
{
    lb_model_config_default(kind, c);
    c->dtype = LB_FLOAT64;
    c->vocab_size = 7;
    c->num_classes = 7;
    c->head = LB_HEAD_EVERY;
    c->n_layers = 2;
    c->d_model = 8;
    c->n_heads = 2;
    c->d_ff = 12;
    c->hidden_size = 6;
    c->window = 3;
    c->kernel_size = 3;
}

/* The row's state_floats is what a stream of the family really carries after t events:
 * lb_model_state_bytes / sizeof(double), at t = 1, 2, 5 (past the local window of 3). */
static void test_state_floats_match_the_state(void)
{
    for (int k = 0; k < LB_MODEL_KIND_COUNT; k++) {
        const lb_family *f = lb_family_at(k);
        lb_model_config c;
        small_config(f->kind, &c);
        lb_model *m = lb_model_new(&c);
        CU_ASSERT_PTR_NOT_NULL_FATAL(m);
        lb_model_state *s = lb_model_state_new(m, 1, NULL);
        CU_ASSERT_PTR_NOT_NULL_FATAL(s);
        int seen = 0;
        for (int t = 1; t <= 5; t++) {
            int32_t token = t % 7;
            lb_tensor *y = lb_model_step(s, &token);
            CU_ASSERT_PTR_NOT_NULL(y);
            lb_tensor_free(y);
            seen++;
            if (t == 1 || t == 2 || t == 5) {
                double floats = (double)lb_model_state_bytes(s, 0) / sizeof(double);
                if (fabs(floats - f->state_floats(&c, seen)) > 0.5)
                    fprintf(stderr, "%s after %d events: the state holds %g floats, the row says %g\n", f->name, seen,
                            floats, f->state_floats(&c, seen));
                CU_ASSERT_DOUBLE_EQUAL(floats, f->state_floats(&c, seen), 0.5);
            }
        }
        /* width the head reads */
        CU_ASSERT_EQUAL(f->body_width(&c), f->kind == LB_MODEL_LSTM ? 6 : 8);
        lb_model_state_free(s);
        lb_model_free(m);
    }
}

/* Causality and the longest sequence read, per family, and through the wrappers. */
static void test_causal_and_positions(void)
{
    lb_model_config c;
    small_config(LB_MODEL_TRANSFORMER, &c);
    CU_ASSERT_EQUAL(lb_model_is_causal(&c), 1);
    c.causal = 0;
    CU_ASSERT_EQUAL(lb_model_is_causal(&c), 0);
    CU_ASSERT_EQUAL(lb_model_max_positions(&c), 0); /* no positions: any length */
    c.pos = LB_POS_LEARNED;
    c.max_seq_len = 40;
    CU_ASSERT_EQUAL(lb_model_max_positions(&c), 40);
    small_config(LB_MODEL_LSTM, &c);
    c.causal = 0; /* not an LSTM field: the LSTM is causal anyway */
    c.pos = LB_POS_LEARNED;
    CU_ASSERT_EQUAL(lb_model_is_causal(&c), 1);
    CU_ASSERT_EQUAL(lb_model_max_positions(&c), 0);
    CU_ASSERT_EQUAL(lb_model_is_causal(NULL), 0);
    CU_ASSERT_TRUE(lb_test_error_has("NULL") || lb_test_error_has("null"));
    /* generation crops the context of full attention, not of the LSTM or of local
     * attention with relative positions */
    small_config(LB_MODEL_TRANSFORMER, &c);
    CU_ASSERT_EQUAL(lb_family_of(c.kind)->crops_context(&c), 1);
    small_config(LB_MODEL_LOCAL, &c);
    c.pos = LB_POS_ROTARY;
    CU_ASSERT_EQUAL(lb_family_of(c.kind)->crops_context(&c), 0);
    c.pos = LB_POS_LEARNED;
    CU_ASSERT_EQUAL(lb_family_of(c.kind)->crops_context(&c), 1);
    small_config(LB_MODEL_CONV, &c);
    CU_ASSERT_EQUAL(lb_family_of(c.kind)->crops_context(&c), 0);
}

/* A recipe's numbers size a model of each family the way its row says, and the model
 * builds. */
static void test_size_and_describe(void)
{
    lb_family_size sz = {2, 32, 8, 3, 100};
    for (int k = 0; k < LB_MODEL_KIND_COUNT; k++) {
        const lb_family *f = lb_family_at(k);
        lb_model_config c;
        lb_model_config_default(f->kind, &c);
        f->size(&c, &sz);
        c.vocab_size = 5;
        c.num_classes = 2;
        lb_model *m = lb_model_new(&c);
        CU_ASSERT_PTR_NOT_NULL(m);
        lb_model_free(m);
        char text[256];
        f->describe(&c, text, sizeof text);
        CU_ASSERT_TRUE(strlen(text) > 10);
        CU_ASSERT_EQUAL(c.n_layers, 2);
    }
    lb_model_config c;
    lb_model_config_default(LB_MODEL_CONV, &c);
    sz.layers = 0; /* enough for T = 100 with kernel 3: 1 + 2 (2^L - 1) >= 100 -> L = 6 */
    lb_family_of(LB_MODEL_CONV)->size(&c, &sz);
    CU_ASSERT_EQUAL(c.n_layers, 6);
    lb_model_config_default(LB_MODEL_LOCAL, &c);
    lb_family_of(LB_MODEL_LOCAL)->size(&c, &sz);
    CU_ASSERT_EQUAL(c.window, 8);
    CU_ASSERT_EQUAL(c.d_ff, 64);
}

int main(void)
{
    const lb_test_case cases[] = {
        {"one row per family, named both ways", test_rows_and_names},
        {"the families of a field as text", test_field_families_text},
        {"state_floats equals the streaming state's size", test_state_floats_match_the_state},
        {"causality, positions and context cropping per family", test_causal_and_positions},
        {"a recipe's numbers size every family", test_size_and_describe},
        {NULL, NULL},
    };
    return lb_test_main("family", cases);
}

/* The study's recipe table (lab/recipes.c, shared by lookback study and the
 * product-path benchmark): one row per (task, method) for the source table's four
 * methods on every task, the length-robustness variants on spike16 only, complete rows,
 * the anchors' recipes where the docs cite them, and models that build. */
#include <string.h>

#include "lab/recipes.h"
#include "data/tasks.h"
#include "layers/model.h"
#include "support.h"

static void test_one_row_per_task_and_method(void)
{
    int count[LB_RECIPE_T_COUNT][LB_RECIPE_M_COUNT] = {{0}};
    for (int i = 0; i < lb_recipes_count; i++) {
        const lb_recipe *r = &lb_recipes[i];
        CU_ASSERT_TRUE_FATAL(r->task >= 0 && r->task < LB_RECIPE_T_COUNT && r->method >= 0 && r->method < LB_RECIPE_M_COUNT);
        count[r->task][r->method]++;
        CU_ASSERT_TRUE(r->width > 0);
        CU_ASSERT_TRUE(r->batch > 0);
        CU_ASSERT_TRUE(r->lrs[0] > 0);
        CU_ASSERT_TRUE(r->weight_decay >= 0);
        CU_ASSERT_TRUE(r->source && strlen(r->source) > 10);
        CU_ASSERT_PTR_EQUAL(lb_recipe_of(r->task, r->method), r);
    }
    for (int t = 0; t < LB_RECIPE_T_COUNT; t++)
        for (int m = 0; m < LB_RECIPE_M_COUNT; m++) {
            /* ssmax, mixed, logn: spike16 only; linear and mamba on every task */
            int expected = m <= LB_RECIPE_M_CONV || m == LB_RECIPE_M_LINEAR || m == LB_RECIPE_M_MAMBA ||
                           t == LB_RECIPE_T_SPIKE16;
            CU_ASSERT_EQUAL(count[t][m], expected);
            if (!expected)
                CU_ASSERT_PTR_NULL(lb_recipe_of((lb_recipe_task)t, (lb_recipe_method)m));
        }
    CU_ASSERT_EQUAL(lb_recipes_count, 6 * 6 + 3);
    CU_ASSERT_STRING_EQUAL(lb_recipe_task_names[LB_RECIPE_T_COPY], "copy");
    CU_ASSERT_STRING_EQUAL(lb_recipe_method_names[LB_RECIPE_M_LOGN], "logn");
    CU_ASSERT_STRING_EQUAL(lb_recipe_method_names[LB_RECIPE_M_MAMBA], "mamba");
    /* Mamba's recipe builds the paper's block: d_state 16, expand 2, 2 blocks of d_model 64 */
    lb_model_config mc;
    char text[256];
    lb_recipe_model(lb_recipe_of(LB_RECIPE_T_RECALL, LB_RECIPE_M_MAMBA), 128, &mc, text, sizeof text);
    CU_ASSERT_EQUAL(mc.kind, LB_MODEL_MAMBA);
    CU_ASSERT_EQUAL(mc.n_layers, 2);
    CU_ASSERT_EQUAL(mc.d_model, 64);
    CU_ASSERT_EQUAL(mc.d_state, 16);
    CU_ASSERT_STRING_EQUAL(text, "2 blocks, d_model 64, d_inner 128, d_state 16, d_conv 4, dt_rank 4");
}

/* The anchors the docs cite: Zoology's recall recipe, Bai's TCN on copy, Deletang's
 * training lengths for parity and modsum. */
static void test_anchor_recipes(void)
{
    const lb_recipe *zoology = lb_recipe_of(LB_RECIPE_T_RECALL, LB_RECIPE_M_TRANSFORMER);
    CU_ASSERT_EQUAL(zoology->layers, 2);
    CU_ASSERT_EQUAL(zoology->width, 64);
    CU_ASSERT_DOUBLE_EQUAL(zoology->weight_decay, 0.1, 1e-12);
    int n_lrs = 0;
    for (int i = 0; i < LB_RECIPE_MAX_LRS && zoology->lrs[i] > 0; i++, n_lrs++)
        CU_ASSERT_TRUE(zoology->lrs[i] >= 1e-4 * 0.999 && zoology->lrs[i] <= 1e-2 * 1.001);
    CU_ASSERT_EQUAL(n_lrs, 4);

    lb_model_config mc;
    char text[512];
    lb_task_options o;
    lb_recipe_task_data(LB_RECIPE_T_COPY, 0, 0, &o);
    CU_ASSERT_EQUAL(o.seq_len, 1020);
    CU_ASSERT_TRUE(o.blank_targets);
    lb_recipe_model(lb_recipe_of(LB_RECIPE_T_COPY, LB_RECIPE_M_CONV), o.seq_len, &mc, text, sizeof text);
    CU_ASSERT_EQUAL(mc.kind, LB_MODEL_CONV);
    CU_ASSERT_EQUAL(mc.kernel_size, 8);
    CU_ASSERT_EQUAL(mc.n_layers, 8); /* receptive field 1 + 7 (2^8 - 1) = 1,786 >= 1,020 */
    CU_ASSERT_PTR_NOT_NULL(strstr(text, "kernel 8"));
    lb_recipe_task_data(LB_RECIPE_T_COPY, 1, 0, &o);
    CU_ASSERT_EQUAL(o.seq_len, 220);

    lb_recipe_task_data(LB_RECIPE_T_PARITY, 0, 0, &o);
    CU_ASSERT_TRUE(o.variable_length);
    CU_ASSERT_EQUAL(o.min_length, 2);
    CU_ASSERT_EQUAL(o.seq_len, 40);
    lb_recipe_task_data(LB_RECIPE_T_MODSUM, 0, 0, &o);
    CU_ASSERT_TRUE(o.variable_length);
    CU_ASSERT_EQUAL(o.seq_len, 16);
    lb_recipe_task_data(LB_RECIPE_T_RECALL, 0, 1, &o);
    CU_ASSERT_EQUAL(o.seq_len, 512);
    CU_ASSERT_EQUAL(o.pairs, 64);
    lb_recipe_task_data(LB_RECIPE_T_SPIKE16, 0, 0, &o);
    lb_recipe_mixed_lengths(&o);
    CU_ASSERT_TRUE(o.variable_length);
    CU_ASSERT_EQUAL(o.min_length, 64);

    lb_recipe_model(lb_recipe_of(LB_RECIPE_T_MODSUM, LB_RECIPE_M_LSTM), 16, &mc, text, sizeof text);
    CU_ASSERT_EQUAL(mc.kind, LB_MODEL_LSTM);
    CU_ASSERT_EQUAL(mc.hidden_size, 64);
    lb_recipe_model(lb_recipe_of(LB_RECIPE_T_SPIKE16, LB_RECIPE_M_LOGN), 256, &mc, text, sizeof text);
    CU_ASSERT_EQUAL(mc.length_scale, LB_LENGTH_SCALE_LOG_N);
    CU_ASSERT_EQUAL(mc.n_layers, 1);
}

/* Every row's model builds once the data fields are filled (tokens in, a class out). */
static void test_every_recipe_builds(void)
{
    for (int i = 0; i < lb_recipes_count; i++) {
        const lb_recipe *r = &lb_recipes[i];
        lb_task_options o;
        lb_recipe_task_data(r->task, 1, 0, &o);
        lb_model_config mc;
        char text[512];
        lb_recipe_model(r, o.seq_len, &mc, text, sizeof text);
        mc.vocab_size = 16;
        mc.num_classes = 8;
        if (mc.max_seq_len < o.seq_len)
            mc.max_seq_len = o.seq_len;
        lb_model *model = lb_model_new(&mc);
        CU_ASSERT_PTR_NOT_NULL(model);
        if (!model)
            fprintf(stderr, "%s.%s: %s\n", lb_recipe_task_names[r->task], lb_recipe_method_names[r->method], lb_last_error());
        lb_model_free(model);
        CU_ASSERT_TRUE(strlen(text) > 10);
    }
}

int main(void)
{
    const lb_test_case cases[] = {
        {"one recipe per (task, method); variants on spike16 only; complete rows", test_one_row_per_task_and_method},
        {"the anchors' recipes: Zoology, Bai's TCN, Deletang's lengths", test_anchor_recipes},
        {"every recipe's model builds", test_every_recipe_builds},
        {NULL, NULL},
    };
    return lb_test_main("study recipes", cases);
}

/* The study's recipe table and task data (lab/recipes.h). */
#include "lab/recipes.h"

#include <stdio.h>
#include <string.h>

#include "layers/family.h"

const char *const lb_recipe_task_names[LB_RECIPE_T_COUNT] = {"spike16", "recall", "local", "parity", "copy", "modsum"};
const char *const lb_recipe_method_names[LB_RECIPE_M_COUNT] = {"transformer", "local", "lstm", "conv", "ssmax", "mixed", "logn", "linear", "mamba"};

#define LR3 {3e-3, 1e-3, 3e-4, 0}
#define ZOOLOGY_LRS {2.15e-3, 1e-4, 4.64e-4, 1e-2} /* np.logspace(-4, -2, 4), the default first */
#define NONE LB_POS_NONE
#define ROT LB_POS_ROTARY
#define LEARNED LB_POS_LEARNED
#define PLAIN LB_LENGTH_SCALE_NONE
const lb_recipe lb_recipes[] = {
    /* task      method         layers width win kern pos    scale                     mixed batch wd    lrs */
    {LB_RECIPE_T_SPIKE16, LB_RECIPE_M_TRANSFORMER, 1, 64, 0, 0, NONE, PLAIN, 0, 32, 0.01, LR3, "retrieval by content: 1 block, no positions (docs/study.md)"},
    {LB_RECIPE_T_SPIKE16, LB_RECIPE_M_LOCAL, 2, 64, 16, 0, NONE, PLAIN, 0, 32, 0.01, LR3, "the study's local attention"},
    {LB_RECIPE_T_SPIKE16, LB_RECIPE_M_LSTM, 1, 128, 0, 0, NONE, PLAIN, 0, 32, 0.01, LR3, "the study's LSTM"},
    {LB_RECIPE_T_SPIKE16, LB_RECIPE_M_CONV, 0, 64, 0, 3, NONE, PLAIN, 0, 32, 0.01, LR3, "a TCN sized to T (kernel 3)"},
    {LB_RECIPE_T_SPIKE16, LB_RECIPE_M_MAMBA, 2, 64, 0, 0, NONE, PLAIN, 0, 32, 0.01, LR3, "Gu & Dao 2023's synthetic-task model: 2 blocks, d_model 64, d_state 16, expand 2; the study's lrs"},
    {LB_RECIPE_T_SPIKE16, LB_RECIPE_M_SSMAX, 1, 64, 0, 0, NONE, LB_LENGTH_SCALE_SCALABLE, 0, 32, 0.01, LR3, "scalable softmax (Nakanishi 2025)"},
    {LB_RECIPE_T_SPIKE16, LB_RECIPE_M_MIXED, 1, 64, 0, 0, NONE, PLAIN, 1, 32, 0.01, LR3, "mixed training lengths"},
    {LB_RECIPE_T_SPIKE16, LB_RECIPE_M_LOGN, 1, 64, 0, 0, NONE, LB_LENGTH_SCALE_LOG_N, 1, 32, 0.01, LR3, "log-n logits (Chiang & Cholak 2022), mixed lengths"},
    {LB_RECIPE_T_SPIKE16, LB_RECIPE_M_LINEAR, 2, 64, 0, 0, NONE, PLAIN, 0, 32, 0.01, LR3, "linear attention (Katharopoulos et al. 2020) in the transformer's recipe, 2 blocks"},

    {LB_RECIPE_T_RECALL, LB_RECIPE_M_TRANSFORMER, 2, 64, 0, 0, ROT, PLAIN, 0, 64, 0.1, ZOOLOGY_LRS, "Zoology (Arora et al. 2023): 2 layers, d_model 64, AdamW wd 0.1, 4 log-spaced lrs; rotary positions (calibrated: docs/study.md)"},
    {LB_RECIPE_T_RECALL, LB_RECIPE_M_LOCAL, 2, 64, 16, 0, ROT, PLAIN, 0, 64, 0.1, ZOOLOGY_LRS, "Zoology's recipe with a window of 16"},
    {LB_RECIPE_T_RECALL, LB_RECIPE_M_LSTM, 1, 128, 0, 0, NONE, PLAIN, 0, 32, 0.01, {3e-3, 0}, "the study's LSTM (probe choice of the previous study)"},
    {LB_RECIPE_T_RECALL, LB_RECIPE_M_CONV, 0, 64, 0, 3, NONE, PLAIN, 0, 32, 0.01, {3e-3, 0}, "a TCN sized to T (probe choice of the previous study)"},
    {LB_RECIPE_T_RECALL, LB_RECIPE_M_LINEAR, 2, 64, 0, 0, NONE, PLAIN, 0, 64, 0.1, ZOOLOGY_LRS, "Zoology's recipe (Arora et al. 2023 train linear attention the same way)"},
    {LB_RECIPE_T_RECALL, LB_RECIPE_M_MAMBA, 2, 64, 0, 0, NONE, PLAIN, 0, 64, 0.1, ZOOLOGY_LRS, "Zoology (Arora et al. 2023)'s Mamba: 2 layers, d_model 64, AdamW wd 0.1, 4 log-spaced lrs"},

    {LB_RECIPE_T_LOCAL, LB_RECIPE_M_TRANSFORMER, 2, 64, 0, 0, ROT, PLAIN, 0, 32, 0.01, {1e-3, 0}, "full attention on a local pattern (calibrated: docs/study.md)"},
    {LB_RECIPE_T_LOCAL, LB_RECIPE_M_LOCAL, 2, 64, 4, 0, ROT, PLAIN, 0, 32, 0.01, {3e-3, 0}, "window 4, the pattern's reach (calibrated: docs/study.md)"},
    {LB_RECIPE_T_LOCAL, LB_RECIPE_M_LSTM, 1, 128, 0, 0, NONE, PLAIN, 0, 32, 0.01, {1e-3, 0}, "probe choice of the previous study"},
    {LB_RECIPE_T_LOCAL, LB_RECIPE_M_CONV, 0, 64, 0, 3, NONE, PLAIN, 0, 32, 0.01, {3e-3, 0}, "kernel 3 = the pattern's width (calibrated: docs/study.md)"},
    {LB_RECIPE_T_LOCAL, LB_RECIPE_M_LINEAR, 2, 64, 0, 0, NONE, PLAIN, 0, 32, 0.01, LR3, "the transformer's recipe with linear attention"},
    {LB_RECIPE_T_LOCAL, LB_RECIPE_M_MAMBA, 2, 64, 0, 0, NONE, PLAIN, 0, 32, 0.01, {1e-3, 0}, "Gu & Dao 2023's synthetic-task model (2 blocks, d_model 64), Adam lr 1e-3"},

    {LB_RECIPE_T_PARITY, LB_RECIPE_M_TRANSFORMER, 2, 64, 0, 0, ROT, PLAIN, 0, 32, 0.01, {1e-3, 0}, "Deletang et al. 2023: transformers stay near 50 %; calibration at 1e-3"},
    {LB_RECIPE_T_PARITY, LB_RECIPE_M_LOCAL, 2, 64, 16, 0, ROT, PLAIN, 0, 32, 0.01, {1e-3, 0}, "as the transformer, window 16"},
    {LB_RECIPE_T_PARITY, LB_RECIPE_M_LSTM, 1, 128, 0, 0, NONE, PLAIN, 0, 32, 0.01, {3e-3, 0}, "Deletang et al. 2023 (lengths up to 40); lr 3e-3 (calibrated: docs/study.md)"},
    {LB_RECIPE_T_PARITY, LB_RECIPE_M_CONV, 0, 64, 0, 3, NONE, PLAIN, 0, 32, 0.01, {1e-3, 0}, "a TCN sized to T"},
    {LB_RECIPE_T_PARITY, LB_RECIPE_M_LINEAR, 2, 64, 0, 0, NONE, PLAIN, 0, 32, 0.01, LR3, "the transformer's recipe with linear attention"},
    {LB_RECIPE_T_PARITY, LB_RECIPE_M_MAMBA, 2, 64, 0, 0, NONE, PLAIN, 0, 32, 0.01, {1e-3, 0}, "Gu & Dao 2023's synthetic-task model (2 blocks, d_model 64), Adam lr 1e-3"},

    {LB_RECIPE_T_COPY, LB_RECIPE_M_TRANSFORMER, 2, 64, 0, 0, LEARNED, PLAIN, 0, 32, 0.01, {3e-3, 0}, "learned positions (copy is addressed by position); probe choice of the previous study"},
    {LB_RECIPE_T_COPY, LB_RECIPE_M_LOCAL, 2, 64, 16, 0, LEARNED, PLAIN, 0, 32, 0.01, {3e-3, 0}, "as the transformer, window 16"},
    {LB_RECIPE_T_COPY, LB_RECIPE_M_LSTM, 1, 128, 0, 0, NONE, PLAIN, 0, 32, 0.01, {3e-3, 0}, "Bai et al. 2018: LSTMs reach only the memoryless loss"},
    {LB_RECIPE_T_COPY, LB_RECIPE_M_CONV, 0, 16, 0, 8, NONE, PLAIN, 0, 32, 0.01, {1e-3, 0}, "Bai et al. 2018's TCN: kernel 8, 8 levels at T = 1,000, width 16; AdamW 1e-3 (the paper: RMSprop 5e-4; calibrated: docs/study.md)"},
    {LB_RECIPE_T_COPY, LB_RECIPE_M_LINEAR, 2, 64, 0, 0, NONE, PLAIN, 0, 32, 0.01, LR3, "the transformer's recipe with linear attention (no positions: order from causality)"},
    {LB_RECIPE_T_COPY, LB_RECIPE_M_MAMBA, 2, 64, 0, 0, NONE, PLAIN, 0, 32, 0.01, {1e-3, 0}, "Gu & Dao 2023's selective-copying model: 2 blocks, d_model 64, lr 1e-3"},

    {LB_RECIPE_T_MODSUM, LB_RECIPE_M_TRANSFORMER, 2, 64, 0, 0, ROT, PLAIN, 0, 32, 0.01, {1e-3, 0}, "probe choice of the previous study"},
    {LB_RECIPE_T_MODSUM, LB_RECIPE_M_LOCAL, 2, 64, 16, 0, ROT, PLAIN, 0, 32, 0.01, {3e-4, 0}, "probe choice of the previous study"},
    {LB_RECIPE_T_MODSUM, LB_RECIPE_M_LSTM, 1, 64, 0, 0, NONE, PLAIN, 0, 64, 0.01, {1e-2, 0}, "Deletang et al. 2023's LSTM; hidden 64, batch 64, lr 1e-2 (calibrated: docs/study.md)"},
    {LB_RECIPE_T_MODSUM, LB_RECIPE_M_CONV, 0, 64, 0, 3, NONE, PLAIN, 0, 32, 0.01, {3e-3, 0}, "probe choice of the previous study"},
    {LB_RECIPE_T_MODSUM, LB_RECIPE_M_LINEAR, 2, 64, 0, 0, NONE, PLAIN, 0, 32, 0.01, LR3, "the transformer's recipe with linear attention"},
    {LB_RECIPE_T_MODSUM, LB_RECIPE_M_MAMBA, 2, 64, 0, 0, NONE, PLAIN, 0, 32, 0.01, {1e-3, 0}, "Gu & Dao 2023's synthetic-task model (2 blocks, d_model 64), Adam lr 1e-3"},
};
#undef NONE
#undef ROT
#undef LEARNED
#undef PLAIN
const int lb_recipes_count = (int)(sizeof lb_recipes / sizeof lb_recipes[0]);

const lb_recipe *lb_recipe_of(lb_recipe_task t, lb_recipe_method m)
{
    for (int i = 0; i < lb_recipes_count; i++)
        if (lb_recipes[i].task == t && lb_recipes[i].method == m)
            return &lb_recipes[i];
    return NULL;
}


void lb_recipe_task_data(lb_recipe_task t, int quick, int zoology, lb_task_options *o)
{
    switch (t) {
    case LB_RECIPE_T_SPIKE16:
        lb_task_options_default(LB_TASK_SPIKE, o);
        o->sensors = 16;
        o->seq_len = 256;
        break;
    case LB_RECIPE_T_RECALL:
        lb_task_options_default(LB_TASK_RECALL, o);
        o->seq_len = 128;
        if (zoology) { /* Zoology's scale: vocabulary ~8,192, T 512, 64 pairs */
            o->seq_len = 512;
            o->pairs = 64;
            o->key_vocab = 4096;
            o->value_vocab = 4096;
        }
        break;
    case LB_RECIPE_T_LOCAL: lb_task_options_default(LB_TASK_LOCAL, o); break;
    case LB_RECIPE_T_PARITY:
        lb_task_options_default(LB_TASK_PARITY, o);
        o->seq_len = 40;
        o->variable_length = 1;
        o->min_length = 2;
        break;
    case LB_RECIPE_T_COPY:
        lb_task_options_default(LB_TASK_COPY, o);
        o->seq_len = (quick ? 200 : 1000) + 20;
        o->blank_targets = 1;
        break;
    default:
        lb_task_options_default(LB_TASK_MODSUM, o);
        o->seq_len = 16;
        o->variable_length = 1;
        o->min_length = 2;
        break;
    }
}

void lb_recipe_mixed_lengths(lb_task_options *o)
{
    o->variable_length = 1;
    o->min_length = 64;
    o->max_distance = LB_OPTION_AUTO;
}

/* The family each method trains, and what sets the method apart beyond its recipe rows'
 * numbers (for the model's line of text). */
static const struct {
    const char *family;
    const char *note;
} methods[LB_RECIPE_M_COUNT] = {
    [LB_RECIPE_M_TRANSFORMER] = {"transformer", ""},
    [LB_RECIPE_M_LOCAL] = {"local", ""},
    [LB_RECIPE_M_LSTM] = {"lstm", ""},
    [LB_RECIPE_M_CONV] = {"conv", ""},
    [LB_RECIPE_M_SSMAX] = {"transformer", ", scalable softmax (s per head)"},
    [LB_RECIPE_M_MIXED] = {"transformer", ""},
    [LB_RECIPE_M_LOGN] = {"transformer", ", logits x ln(n) / ln(256), n keys seen"},
    [LB_RECIPE_M_LINEAR] = {"linear", ""},
    [LB_RECIPE_M_MAMBA] = {"mamba", ""},
};

lb_model_kind lb_recipe_method_kind(lb_recipe_method m)
{
    const lb_family *f = m >= 0 && m < LB_RECIPE_M_COUNT ? lb_family_find(methods[m].family) : NULL;
    if (f)
        return f->kind;
    lb_error(LB_ERR_VALUE, "recipe method %d is not one of the study's methods", (int)m);
    return LB_MODEL_KIND_COUNT; /* no family: lb_model_new refuses it */
}

/* Sets field `option` of mc to value when mc's family uses it. */
static void set_if_used(lb_model_config *mc, const char *option, const char *value)
{
    const lb_model_field *f = lb_model_field_find(option);
    if (lb_model_field_in_family(f, mc->kind))
        lb_model_field_set(mc, f, value);
}

void lb_recipe_model(const lb_recipe *row, int64_t train_len, lb_model_config *mc, char *text, size_t size)
{
    const lb_family *fam = lb_family_of(lb_recipe_method_kind(row->method));
    lb_model_config_default(lb_recipe_method_kind(row->method), mc);
    if (!fam) {
        snprintf(text, size, "(no model: %s)", lb_last_error());
        return;
    }
    lb_family_size sz = {row->layers, row->width, row->window, row->kernel, train_len};
    fam->size(mc, &sz);
    set_if_used(mc, "pos", lb_pos_kind_name(row->pos));
    set_if_used(mc, "length-scale", lb_length_scale_name(row->scale));
    fam->describe(mc, text, size);
    size_t used = strlen(text);
    snprintf(text + used, size - used, "%s%s", methods[row->method].note,
             row->mixed ? ", trained on lengths 64..256" : "");
    if (lb_model_field_in_family(lb_model_field_find("kernel"), mc->kind)) { /* a receptive field to cover */
        used = strlen(text);
        snprintf(text + used, size - used, " >= T = %lld", (long long)train_len);
    }
}

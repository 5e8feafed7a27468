#include "train/trainer.h"
#include "tensor/names.h"

#include <errno.h>
#include <stddef.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "data/events.h"
#include "data/text.h"
#include "layers/family.h"
#include "optim/clip.h"
#include "tensor/blas.h"
#include "tensor/clock.h"
#include "tensor/threads.h"
#include "train/cost.h"
#include "train/trainer_internal.h"

#define LB_TRAIN_KEEP NAN
static const lb_train_field train_fields[] = {
#define LB_TRAIN_FIELD(member, option, type, when, def, min, max, flags, help)                                       \
    {#member, option, LB_TRAIN_##type, LB_TRAIN_##when, (double)(def), (double)(min), (double)(max), flags, help,    \
     offsetof(lb_train_config, member)},
#include "train/train_fields.def"
#undef LB_TRAIN_FIELD
};
#undef LB_TRAIN_KEEP
enum { N_TRAIN_FIELDS = sizeof train_fields / sizeof train_fields[0] };

const lb_train_field *lb_train_fields(int *count)
{
    if (count)
        *count = N_TRAIN_FIELDS;
    return train_fields;
}

const lb_train_field *lb_train_field_find(const char *option)
{
    LB_CHECK_ARG(option, NULL);
    for (int i = 0; i < N_TRAIN_FIELDS; i++)
        if (strcmp(train_fields[i].option, option) == 0)
            return &train_fields[i];
    return NULL;
}

int lb_train_field_applies(const lb_train_field *f, const lb_train_config *cfg)
{
    LB_CHECK_ARG(f && cfg, 0);
    switch (f->when) {
    case LB_TRAIN_ALWAYS: return 1;
    case LB_TRAIN_SGD: return cfg->optim.kind == LB_OPTIM_SGD;
    case LB_TRAIN_ADAM: return cfg->optim.kind == LB_OPTIM_ADAM || cfg->optim.kind == LB_OPTIM_ADAMW;
    case LB_TRAIN_COSINE: return cfg->schedule.kind == LB_SCHEDULE_COSINE;
    case LB_TRAIN_STEP: return cfg->schedule.kind == LB_SCHEDULE_STEP;
    }
    return 0;
}

double lb_train_field_number(const lb_train_config *cfg, const lb_train_field *f)
{
    LB_CHECK_ARG(cfg && f, NAN);
    const char *p = (const char *)cfg + f->offset;
    switch (f->type) {
    case LB_TRAIN_INT64: return (double)*(const int64_t *)p;
    case LB_TRAIN_INT: return (double)*(const int *)p;
    case LB_TRAIN_REAL: return *(const double *)p;
    case LB_TRAIN_U64: return (double)*(const uint64_t *)p;
    case LB_TRAIN_OPTIM: return (double)*(const lb_optim_kind *)p;
    case LB_TRAIN_SCHEDULE: return (double)*(const lb_schedule_kind *)p;
    case LB_TRAIN_CLOCK: return (double)*(const lb_budget_clock *)p;
    case LB_TRAIN_SELECT: return (double)*(const lb_val_select *)p;
    case LB_TRAIN_DECAY: return (double)*(const lb_decay_params *)p;
    case LB_TRAIN_WEIGHTS: return (double)*(const int *)p; /* class_weight: 0 none, 1 balanced, 2 given */
    }
    return NAN;
}

static void set_number(lb_train_config *cfg, const lb_train_field *f, double v)
{
    char *p = (char *)cfg + f->offset;
    switch (f->type) {
    case LB_TRAIN_INT64: *(int64_t *)p = (int64_t)v; break;
    case LB_TRAIN_INT: *(int *)p = (int)v; break;
    case LB_TRAIN_REAL: *(double *)p = v; break;
    case LB_TRAIN_U64: *(uint64_t *)p = (uint64_t)v; break;
    case LB_TRAIN_OPTIM: *(lb_optim_kind *)p = (lb_optim_kind)(int)v; break;
    case LB_TRAIN_SCHEDULE: *(lb_schedule_kind *)p = (lb_schedule_kind)(int)v; break;
    case LB_TRAIN_CLOCK: *(lb_budget_clock *)p = (lb_budget_clock)(int)v; break;
    case LB_TRAIN_SELECT: *(lb_val_select *)p = (lb_val_select)(int)v; break;
    case LB_TRAIN_DECAY: *(lb_decay_params *)p = (lb_decay_params)(int)v; break;
    case LB_TRAIN_WEIGHTS: *(int *)p = (int)v; break;
    }
}

void lb_train_config_default(lb_train_config *cfg)
{
    LB_CHECK_ARG(cfg);
    memset(cfg, 0, sizeof *cfg);
    const lb_train_field *kind = lb_train_field_find("optim");
    cfg->optim = lb_optim_defaults((lb_optim_kind)(int)kind->default_value);
    cfg->schedule = lb_schedule_constant(0);
    for (int i = 0; i < N_TRAIN_FIELDS; i++)
        if (!isnan(train_fields[i].default_value))
            set_number(cfg, &train_fields[i], train_fields[i].default_value);
}

/* The name of an enum field's value, NULL when it is out of range. */
static const char *enum_name(const lb_train_config *cfg, const lb_train_field *f)
{
    int v = (int)lb_train_field_number(cfg, f);
    switch (f->type) {
    case LB_TRAIN_OPTIM: return lb_optim_kind_name((lb_optim_kind)v);
    case LB_TRAIN_SCHEDULE: return v >= LB_SCHEDULE_CONSTANT && v <= LB_SCHEDULE_STEP ? "schedule" : NULL;
    case LB_TRAIN_CLOCK: return lb_budget_clock_name((lb_budget_clock)v);
    case LB_TRAIN_SELECT: return lb_val_select_name((lb_val_select)v);
    case LB_TRAIN_DECAY: return lb_decay_params_name((lb_decay_params)v);
    case LB_TRAIN_WEIGHTS: return v == 0 ? "none" : v == 1 ? "balanced" : v == 2 ? "given" : NULL;
    default: return "";
    }
}

static lb_schedule effective_schedule(const lb_train_config *cfg)
{
    lb_schedule s = cfg->schedule;
    s.base_lr = cfg->optim.lr;
    if (s.kind == LB_SCHEDULE_COSINE)
        s.total_steps = cfg->steps > s.warmup_steps ? cfg->steps : s.warmup_steps + 1;
    return s;
}

/* "budget clock" for budget_clock, "warmup steps" for schedule.warmup_steps. */
static void member_words(const lb_train_field *f, char *buf, size_t size)
{
    const char *dot = strrchr(f->member, '.');
    snprintf(buf, size, "%s", dot ? dot + 1 : f->member);
    for (char *p = buf; *p; p++)
        if (*p == '_')
            *p = ' ';
}

lb_status lb_train_config_check(const lb_train_config *cfg)
{
    LB_CHECK_ARG(cfg, LB_ERR_VALUE);
    for (int i = 0; i < N_TRAIN_FIELDS; i++) {
        const lb_train_field *f = &train_fields[i];
        if (!lb_train_field_applies(f, cfg))
            continue;
        double v = lb_train_field_number(cfg, f);
        char words[64];
        member_words(f, words, sizeof words);
        if (f->type == LB_TRAIN_INT64 || f->type == LB_TRAIN_INT || f->type == LB_TRAIN_REAL) {
            if (!(v >= f->min && v <= f->max) || !isfinite(v))
                return lb_error(LB_ERR_VALUE, "train config: %s (--%s) must be in [%g, %g] (got %g)", words, f->option,
                                f->min, f->max, v);
        } else if (f->type != LB_TRAIN_U64 && !enum_name(cfg, f)) {
            return lb_error(LB_ERR_VALUE, "train config: %s (--%s) has no value %d (see --help)", words, f->option,
                            (int)v);
        }
    }
    if (cfg->micro_batches > cfg->batch_size)
        return lb_error(LB_ERR_VALUE, "train config: --micro-batches %lld must be in [1, --batch = %lld]",
                        (long long)cfg->micro_batches, (long long)cfg->batch_size);
    if (cfg->class_weight == 2 && (cfg->n_class_weights < 1 || cfg->n_class_weights > LB_METRICS_MAX_CLASSES))
        return lb_error(LB_ERR_VALUE, "train config: %lld class weights (1 to %d)", (long long)cfg->n_class_weights,
                        LB_METRICS_MAX_CLASSES);
    for (int64_t c = 0; cfg->class_weight == 2 && c < cfg->n_class_weights; c++)
        if (!(cfg->class_weights[c] >= 0) || !isfinite(cfg->class_weights[c]))
            return lb_error(LB_ERR_VALUE, "train config: class weight %lld is %g (a finite value >= 0)", (long long)c,
                            cfg->class_weights[c]);
    if (cfg->select != LB_SELECT_LOSS && cfg->stop_at > 1)
        return lb_error(LB_ERR_VALUE, "train config: stop-at %g is a score above 1 (with select %s it is a "
                        "fraction in (0, 1]; a regression's MSE is compared as is)", cfg->stop_at,
                        lb_val_select_name(cfg->select));
    if (lb_optim_config_check(&cfg->optim) != LB_OK)
        return lb_last_status();
    lb_schedule s = effective_schedule(cfg);
    return lb_schedule_check(&s);
}

static const char *const select_names[] = {"accuracy", "loss", "f1", "macro-f1", "pr-auc"};

const char *lb_val_select_name(lb_val_select s)
{
    return lb_name_of(select_names, LB_COUNT_OF(select_names), (int)s, NULL);
}

lb_status lb_val_select_parse(const char *name, lb_val_select *out)
{
    LB_CHECK_ARG(out, LB_ERR_VALUE);
    int i = 0;
    lb_status st = lb_name_parse("validation score", select_names, LB_COUNT_OF(select_names), name, 0, &i);
    if (st == LB_OK)
        *out = (lb_val_select)i;
    return st;
}

double lb_val_score(const lb_eval_result *r, lb_val_select select, int *higher_better)
{
    LB_CHECK_ARG(r, NAN);
    int regression = isnan(r->accuracy) && r->classes.num_classes == 0;
    int higher = select != LB_SELECT_LOSS && !regression;
    if (higher_better)
        *higher_better = higher;
    switch (select) {
    case LB_SELECT_LOSS: return r->loss;
    case LB_SELECT_F1: return lb_class_report_detector_f1(&r->classes);
    case LB_SELECT_MACRO_F1: return r->classes.num_classes ? r->classes.macro_f1 : NAN;
    case LB_SELECT_PR_AUC: return r->average_precision;
    default: return regression ? r->mse : r->accuracy;
    }
}

lb_status lb_class_weight_parse(const char *text, lb_train_config *cfg)
{
    LB_CHECK_ARG(text, LB_ERR_VALUE);
    LB_CHECK_ARG(cfg, LB_ERR_VALUE);
    if (strcmp(text, "none") == 0 || strcmp(text, "balanced") == 0) {
        cfg->class_weight = text[0] == 'b';
        cfg->n_class_weights = 0;
        return LB_OK;
    }
    double w[LB_METRICS_MAX_CLASSES];
    int64_t n = 0;
    for (const char *p = text;; n++) {
        char *end = NULL;
        errno = 0;
        double v = n < LB_METRICS_MAX_CLASSES ? strtod(p, &end) : NAN;
        if (end == p || errno == ERANGE || !(v >= 0) || !isfinite(v) || (*end && *end != ','))
            return lb_error(LB_ERR_VALUE, "--class-weight '%s': expected none, balanced, or one weight >= 0 per class "
                            "separated by commas (at most %d)", text, LB_METRICS_MAX_CLASSES);
        w[n] = v;
        if (!*end) {
            n++;
            break;
        }
        p = end + 1;
    }
    cfg->class_weight = 2;
    cfg->n_class_weights = n;
    memcpy(cfg->class_weights, w, (size_t)n * sizeof *w);
    return LB_OK;
}

char *lb_class_weight_format(const lb_train_config *cfg, char *buf, size_t size)
{
    LB_CHECK_ARG(cfg, NULL);
    LB_CHECK_ARG(buf, NULL);
    if (size == 0)
        return buf;
    snprintf(buf, size, "%s", cfg->class_weight == 1 ? "balanced" : "none");
    if (cfg->class_weight == 2) {
        size_t used = 0;
        buf[0] = '\0';
        for (int64_t c = 0; c < cfg->n_class_weights && used < size; c++) {
            int n = snprintf(buf + used, size - used, "%s%.17g", c ? "," : "", cfg->class_weights[c]);
            used += n > 0 ? (size_t)n : 0;
        }
    }
    return buf;
}

static const char *const decay_names[] = {"all", "matrices", "linear"};

const char *lb_decay_params_name(lb_decay_params d)
{
    return lb_name_of(decay_names, LB_COUNT_OF(decay_names), (int)d, NULL);
}

lb_status lb_decay_params_parse(const char *name, lb_decay_params *out)
{
    LB_CHECK_ARG(out, LB_ERR_VALUE);
    int i = 0;
    lb_status st = lb_name_parse("decayed parameters", decay_names, LB_COUNT_OF(decay_names), name, 0, &i);
    if (st == LB_OK)
        *out = (lb_decay_params)i;
    return st;
}

int lb_decay_params_applies(lb_decay_params rule, const lb_model *m, const lb_var *p)
{
    LB_CHECK_ARG(m, 0);
    LB_CHECK_ARG(p, 0);
    switch (rule) {
    case LB_DECAY_ALL: return 1;
    case LB_DECAY_MATRICES: return p->value->ndim >= 2;
    case LB_DECAY_LINEAR: return p->value->ndim >= 2 && !lb_model_param_is_table(m, p);
    }
    lb_error(LB_ERR_VALUE, "decayed parameters: unknown rule %d", (int)rule);
    return 0;
}

static const char *const clock_names[] = {"wall", "cpu"};

const char *lb_budget_clock_name(lb_budget_clock c)
{
    return lb_name_of(clock_names, LB_COUNT_OF(clock_names), (int)c, NULL);
}

lb_status lb_budget_clock_parse(const char *name, lb_budget_clock *out)
{
    LB_CHECK_ARG(out, LB_ERR_VALUE);
    int i = 0;
    lb_status st = lb_name_parse("budget clock", clock_names, LB_COUNT_OF(clock_names), name, 0, &i);
    if (st == LB_OK)
        *out = (lb_budget_clock)i;
    return st;
}

/* ---- the task's loss and accuracy ---- */

lb_status lb_model_data_check(const lb_model_config *mc, const char *trained_task, const lb_dataset *data)
{
    LB_CHECK_ARG(data, LB_ERR_VALUE);
    const char *path = lb_dataset_path(data), *task = lb_dataset_task_name(data);
    int64_t vocab = lb_dataset_vocab_size(data), classes = lb_dataset_num_classes(data);
    int64_t features = lb_dataset_num_features(data), seq_len = lb_dataset_seq_len(data);
    if (trained_task && trained_task[0] && strcmp(trained_task, task) != 0)
        return lb_error(LB_ERR_VALUE, "%s holds the %s task but the model was trained on the %s task", path, task,
                        trained_task);
    if (vocab > 0 && mc->vocab_size == 0)
        return lb_error(LB_ERR_VALUE, "%s: the data has token inputs but the model reads %lld real-valued features",
                        path, (long long)mc->input_features);
    if (vocab == 0 && mc->vocab_size > 0)
        return lb_error(LB_ERR_VALUE, "%s: the data has %lld real-valued features but the model reads tokens", path,
                        (long long)features);
    if (vocab > 0 && mc->vocab_size < vocab)
        return lb_error(LB_ERR_VALUE, "%s: the data has a vocabulary of %lld but the model's embedding has %lld rows",
                        path, (long long)vocab, (long long)mc->vocab_size);
    if (vocab == 0 && mc->input_features != features)
        return lb_error(LB_ERR_VALUE, "%s: the data has %lld input features but the model expects %lld", path,
                        (long long)features, (long long)mc->input_features);
    if ((classes == 0) != (mc->num_classes == 0))
        return lb_error(LB_ERR_VALUE, "%s: the data is %s but the model does %s", path,
                        classes == 0 ? "regression" : "classification",
                        mc->num_classes == 0 ? "regression" : "classification");
    if (classes != mc->num_classes)
        return lb_error(LB_ERR_VALUE, "%s: the data has %lld classes but the model's head has %lld", path,
                        (long long)classes, (long long)mc->num_classes);
    if (lb_dataset_is_text(data) && !lb_model_is_causal(mc))
        return lb_error(LB_ERR_VALUE, "%s is a text corpus, whose target at each position is the next token: attention "
                        "that is not causal (--causal 0) would see it (use --causal 1)", path);
    int every = lb_dataset_per_position(data);
    if (every != (mc->head == LB_HEAD_EVERY))
        return lb_error(LB_ERR_VALUE, "%s: the data has %s targets but the model's head reads %s", path,
                        every ? "per-position" : "per-sequence", mc->head == LB_HEAD_EVERY ? "every position" : "the last position");
    /* Length is a limit only for a table indexed by position. */
    if (lb_model_max_positions(mc) > 0 && seq_len > mc->max_seq_len && lb_dataset_is_text(data))
        return lb_error(LB_ERR_VALUE, "%s: windows of %lld tokens are longer than the model's --pos learned table of %lld "
                        "positions (its context): use --seq-len %lld or less", path, (long long)seq_len,
                        (long long)mc->max_seq_len, (long long)mc->max_seq_len);
    if (lb_model_max_positions(mc) > 0 && seq_len > mc->max_seq_len)
        return lb_error(LB_ERR_VALUE, "%s: sequences of %lld positions are longer than the model's --pos learned table "
                        "of %lld positions (use files of at most %lld positions, or train with --pos none, sinusoidal "
                        "or rotary, which read any length)",
                        path, (long long)seq_len, (long long)mc->max_seq_len, (long long)mc->max_seq_len);
    return LB_OK;
}

lb_status lb_model_events_check(const lb_event_schema *trained, const char *checkpoint, const lb_dataset *data)
{
    LB_CHECK_ARG(data, LB_ERR_VALUE);
    if (!trained)
        return LB_OK;
    const lb_event_schema *have = lb_dataset_events(data);
    lb_clear_error();
    char why[512];
    if (have && lb_event_schema_same_reading(trained, have, why, sizeof why))
        return LB_OK;
    if (!have)
        snprintf(why, sizeof why, "it is not an imported event log");
    return lb_error(LB_ERR_VALUE, "%s does not read rows as the training file of %s did (%s): import it with "
                    "`lookback data csv NEW.csv --like %s -o NEW.h5`",
                    lb_dataset_path(data), checkpoint ? checkpoint : "the model", why,
                    checkpoint ? checkpoint : "CHECKPOINT");
}

/* A view of examples [start, start + count) of a batch. */
static lb_batch batch_part(const lb_batch *b, int64_t start, int64_t count, lb_tensor **features_view)
{
    lb_batch p = *b;
    int64_t T = b->seq_len;
    p.batch_size = count;
    if (b->tokens)
        p.tokens = b->tokens + start * T;
    if (b->targets)
        p.targets = b->targets + start * (b->per_position ? T : 1);
    if (b->target_values)
        p.target_values = b->target_values + start;
    if (b->distance)
        p.distance = b->distance + start;
    if (b->lengths)
        p.lengths = b->lengths + start;
    if (b->indices)
        p.indices = b->indices + start;
    *features_view = NULL;
    if (b->features) {
        *features_view = lb_tensor_slice(b->features, 0, start, start + count, 1);
        p.features = *features_view;
    }
    return p;
}

/* Model input from a batch; features converted to the model's dtype into *converted. */
static lb_status batch_input(const lb_model *model, const lb_batch *b, lb_model_input *in, lb_tensor **converted)
{
    memset(in, 0, sizeof *in);
    *converted = NULL;
    in->batch = b->batch_size;
    in->seq_len = b->seq_len;
    in->tokens = b->tokens;
    in->lengths = b->lengths;
    if (b->features) {
        lb_dtype dt = lb_model_get_config(model)->dtype;
        if (b->features->dtype != dt || !lb_tensor_is_contiguous(b->features)) {
            *converted = lb_tensor_copy(b->features, dt);
            if (!*converted)
                return lb_last_status();
            in->features = *converted;
        } else {
            in->features = b->features;
        }
    }
    return LB_OK;
}

/* Loss of the model output against the batch's targets.
 *   classification: output [B, C] or [B, T, C] logits, targets [B] or [B, T] (-100 ignored)
 *   regression:     output [B], targets [B] */
static lb_var *task_loss(lb_graph *g, lb_var *output, const lb_batch *b, const lb_tensor *class_weight)
{
    if (!output)
        return NULL;
    if (b->targets && class_weight) { /* the weighted mean of PyTorch's cross_entropy(weight=...) */
        lb_loss_options lo;
        lb_loss_options_default(&lo);
        lo.weight = class_weight;
        return lb_cross_entropy_ex(g, output, b->targets, &lo);
    }
    if (b->targets)
        return lb_cross_entropy(g, output, b->targets, LB_IGNORE_INDEX);
    int64_t shape[1] = {b->batch_size};
    lb_tensor *t = lb_tensor_zeros(output->value->dtype, 1, shape);
    if (!t)
        return NULL;
    for (int64_t i = 0; i < b->batch_size; i++)
        lb_tensor_set(t, &i, b->target_values[i]);
    return lb_mse(g, output, lb_input(g, t, 0));
}

/* Counts correct predictions: argmax of each scored row of logits [R, C].
 * seq_correct/seq_scored (may be NULL) receive, per sequence, correct / scored counts;
 * out (may be NULL) accumulates the per-output-index counts of lb_eval_result. */
/* The scores of the evaluated targets (for the average precision). */
typedef struct score_list {
    int64_t n, cap;
    int32_t *positive; /* target == 1 */
    float *score;      /* softmax probability of class 1 (C > 2: 1 - that of class 0) */
    int failed;        /* out of memory: no average precision */
} score_list;

static void score_add(score_list *l, int32_t target, const lb_tensor *logits, int64_t r, int64_t C)
{
    if (!l || l->failed)
        return;
    if (l->n == l->cap) {
        int64_t cap = l->cap ? 2 * l->cap : 4096;
        int32_t *p = realloc(l->positive, (size_t)cap * sizeof *p);
        if (p)
            l->positive = p;
        float *s = p ? realloc(l->score, (size_t)cap * sizeof *s) : NULL;
        if (!s) {
            l->failed = 1;
            return;
        }
        l->score = s;
        l->cap = cap;
    }
    double top = -INFINITY, sum = 0;
    for (int64_t c = 0; c < C; c++)
        top = fmax(top, lb_tensor_flat(logits, r * C + c));
    for (int64_t c = 0; c < C; c++)
        sum += exp(lb_tensor_flat(logits, r * C + c) - top);
    double p1 = exp(lb_tensor_flat(logits, r * C + (C == 2 ? 1 : 0)) - top) / sum;
    l->score[l->n] = (float)(C == 2 ? p1 : 1.0 - p1);
    l->positive[l->n++] = C == 2 ? target == 1 : target != 0;
}

static void count_correct(const lb_tensor *logits, const lb_batch *b, int64_t *correct, int64_t *scored,
                          int64_t *seq_correct, int64_t *seq_scored, lb_eval_result *out, score_list *scores)
{
    int64_t C = logits->shape[logits->ndim - 1];
    int64_t per_seq = b->per_position ? b->seq_len : 1;
    for (int64_t i = 0; i < b->batch_size; i++) {
        int64_t ok = 0, n = 0;
        for (int64_t p = 0; p < per_seq; p++) {
            int64_t r = i * per_seq + p;
            int32_t target = b->targets[r];
            if (target == LB_IGNORE_INDEX)
                continue;
            int64_t best = 0;
            double best_v = -INFINITY;
            for (int64_t c = 0; c < C; c++) {
                double v = lb_tensor_flat(logits, r * C + c);
                if (v > best_v) {
                    best_v = v;
                    best = c;
                }
            }
            ok += best == target;
            n++;
            if (out)
                lb_class_report_add(&out->classes, target, (int32_t)best);
            score_add(scores, target, logits, r, C);
            int64_t from_end = (b->lengths ? b->lengths[i] : b->seq_len) - 1 - p; /* 0 = last position */
            if (out && from_end < out->n_outputs) {
                out->output_correct[out->n_outputs - 1 - from_end] += best == target;
                out->output_total[out->n_outputs - 1 - from_end]++;
            }
        }
        *correct += ok;
        *scored += n;
        if (seq_correct) {
            seq_correct[i] = ok;
            seq_scored[i] = n;
        }
    }
}

/* ---- evaluation ---- */

lb_status lb_evaluate(lb_model *model, const lb_dataset *data, const char *split, int64_t max_examples,
                      int64_t batch_size, int n_bins, lb_eval_result *out, lb_tensor **attention_out)
{
    LB_CHECK_ARG(model, LB_ERR_VALUE);
    LB_CHECK_ARG(data, LB_ERR_VALUE);
    LB_CHECK_ARG(out, LB_ERR_VALUE);
    double loss_sum = 0;
    int64_t correct = 0;
    lb_status st = lb_evaluate_part(model, data, split, max_examples, batch_size, n_bins, 0, 1, NULL, out,
                                    &loss_sum, &correct, attention_out);
    if (st == LB_OK)
        lb_eval_finish(out, loss_sum, correct, lb_dataset_is_regression(data));
    return st;
}

void lb_eval_finish(lb_eval_result *out, double loss_sum, int64_t correct, int regression)
{
    out->loss = out->scored > 0 ? loss_sum / (double)out->scored : 0.0;
    if (regression)
        out->mse = out->loss;
    else
        out->accuracy = out->scored > 0 ? (double)correct / (double)out->scored : 0.0;
    lb_class_report_finish(&out->classes);
}

lb_status lb_evaluate_part(lb_model *model, const lb_dataset *data, const char *split, int64_t max_examples,
                           int64_t batch_size, int n_bins, int part, int parts, lb_graph *graph,
                           lb_eval_result *out, double *loss_sum_out, int64_t *correct_out,
                           lb_tensor **attention_out)
{
    memset(out, 0, sizeof *out);
    out->accuracy = out->mse = out->average_precision = NAN;
    lb_class_report_init(&out->classes, lb_dataset_is_regression(data) ? 0 : lb_dataset_num_classes(data));
    score_list scores = {0};
    if (attention_out)
        *attention_out = NULL;
    if (lb_model_data_check(lb_model_get_config(model), NULL, data) != LB_OK)
        return lb_last_status();
    int64_t n = lb_dataset_split_size(data, split);
    if (n < 0)
        return lb_last_status();
    if (n == 0)
        return lb_error(LB_ERR_VALUE, "%s: the %s split is empty: nothing to evaluate", lb_dataset_path(data), split);
    if (max_examples > 0 && max_examples < n)
        n = max_examples;
    if (batch_size < 1)
        return lb_error(LB_ERR_VALUE, "evaluate: batch size must be >= 1 (got %lld)", (long long)batch_size);
    int regression = lb_dataset_is_regression(data);
    int32_t dmin = 0, dmax = 0;
    if (n_bins > LB_EVAL_MAX_BINS)
        n_bins = LB_EVAL_MAX_BINS;
    if (n_bins > 0 && n > 0 && lb_dataset_has_distance(data) &&
        lb_dataset_distance_range(data, split, &dmin, &dmax) == LB_OK) {
        out->n_bins = (int64_t)n_bins > (int64_t)(dmax - dmin + 1) ? (int)(dmax - dmin + 1) : n_bins;
        for (int k = 0; k < out->n_bins; k++) {
            out->bin_lo[k] = dmin + (int64_t)(dmax - dmin + 1) * k / out->n_bins;
            out->bin_hi[k] = dmin + (int64_t)(dmax - dmin + 1) * (k + 1) / out->n_bins - 1;
        }
    }
    if (!regression && lb_dataset_per_position(data))
        out->n_outputs = (int)(lb_dataset_seq_len(data) < LB_EVAL_MAX_OUTPUTS ? lb_dataset_seq_len(data)
                                                                              : LB_EVAL_MAX_OUTPUTS);
    lb_graph *g = graph ? graph : lb_graph_new();
    int64_t *seq_correct = malloc((size_t)batch_size * sizeof *seq_correct);
    int64_t *seq_scored = malloc((size_t)batch_size * sizeof *seq_scored);
    if (!g || !seq_correct || !seq_scored) {
        if (g != graph)
            lb_graph_free(g);
        free(seq_correct);
        free(seq_scored);
        return lb_error(LB_ERR_MEMORY, "evaluate: out of memory");
    }
    int grad_was = lb_graph_set_grad_enabled(g, 0);
    lb_status st = LB_OK;
    double loss_sum = 0;
    int64_t correct = 0;
    int64_t n_batches = (n + batch_size - 1) / batch_size;
    int64_t first = n_batches * part / parts * batch_size, end = n_batches * (part + 1) / parts * batch_size;
    if (end > n)
        end = n;
    for (int64_t start = first; start < end && st == LB_OK; start += batch_size) {
        int64_t count = end - start < batch_size ? end - start : batch_size;
        lb_batch b;
        lb_model_input in;
        lb_tensor *converted = NULL;
        if ((st = lb_dataset_slice(data, split, start, count, &b)) != LB_OK)
            break;
        st = batch_input(model, &b, &in, &converted);
        lb_var *y = st == LB_OK ? lb_model_forward(g, model, &in, 0, NULL,
                                                   (attention_out && start == first) ? attention_out : NULL)
                                : NULL;
        lb_var *loss = task_loss(g, y, &b, NULL);
        if (!loss) {
            st = lb_last_status();
        } else {
            int64_t scored = 0;
            if (regression) {
                scored = count;
                for (int64_t i = 0; i < count && out->n_bins > 0 && b.distance; i++) {
                    double err = lb_tensor_flat(y->value, i) - (double)b.target_values[i];
                    for (int k = 0; k < out->n_bins; k++)
                        if (b.distance[i] >= out->bin_lo[k] && b.distance[i] <= out->bin_hi[k]) {
                            out->bin_sq_error[k] += err * err;
                            out->bin_total[k]++;
                        }
                }
            } else {
                count_correct(y->value, &b, &correct, &scored, seq_correct, seq_scored, out, &scores);
                for (int64_t i = 0; i < count && out->n_bins > 0 && b.distance; i++)
                    for (int k = 0; k < out->n_bins; k++)
                        if (b.distance[i] >= out->bin_lo[k] && b.distance[i] <= out->bin_hi[k]) {
                            out->bin_correct[k] += seq_correct[i];
                            out->bin_total[k] += seq_scored[i];
                        }
            }
            loss_sum += lb_tensor_flat(loss->value, 0) * (double)scored;
            out->scored += scored;
        }
        out->examples += count;
        lb_tensor_free(converted);
        lb_batch_free(&b);
        lb_graph_clear(g); /* one pool step for the whole evaluation: see lb_graph_clear */
    }
    if (g == graph) {
        lb_graph_reset(g);
        lb_graph_set_grad_enabled(g, grad_was);
    } else {
        lb_graph_free(g);
    }
    free(seq_correct);
    free(seq_scored);
    /* The average precision needs every score: one process only (parts == 1). */
    if (st == LB_OK && parts == 1 && !scores.failed && lb_dataset_num_classes(data) == 2 && scores.n > 0) {
        int any = 0;
        for (int64_t i = 0; i < scores.n && !any; i++)
            any = scores.positive[i];
        out->average_precision = any ? lb_average_precision(scores.n, scores.positive, scores.score) : NAN;
    }
    free(scores.positive);
    free(scores.score);
    *loss_sum_out = loss_sum;
    *correct_out = correct;
    return st;
}

/* ---- the trainer ---- */

lb_graph *lb_trainer_eval_graph(lb_trainer *t)
{
    if (!t->eval_graph)
        t->eval_graph = lb_graph_new();
    return t->eval_graph;
}

lb_status lb_trainer_evaluate(lb_trainer *t, const char *split, int64_t max_examples, lb_eval_result *out)
{
    LB_CHECK_ARG(t, LB_ERR_VALUE);
    LB_CHECK_ARG(out, LB_ERR_VALUE);
    if (t->dist)
        return lb_dist_evaluate(t, split, max_examples, t->cfg.batch_size, out);
    lb_graph *g = lb_trainer_eval_graph(t);
    if (!g)
        return lb_last_status();
    double loss_sum = 0;
    int64_t correct = 0;
    lb_status st = lb_evaluate_part(t->model, t->data, split, max_examples, t->cfg.batch_size, 0, 0, 1, g, out,
                                    &loss_sum, &correct, NULL);
    if (st == LB_OK)
        lb_eval_finish(out, loss_sum, correct, lb_dataset_is_regression(t->data));
    return st;
}

lb_pool *lb_trainer_eval_pool(lb_trainer *t)
{
    LB_CHECK_ARG(t, NULL);
    return lb_graph_pool(t->eval_graph);
}

lb_status lb_model_config_fit_data(lb_model_config *cfg, const lb_dataset *data)
{
    LB_CHECK_ARG(cfg, LB_ERR_VALUE);
    LB_CHECK_ARG(data, LB_ERR_VALUE);
    cfg->vocab_size = lb_dataset_vocab_size(data);
    cfg->input_features = cfg->vocab_size > 0 ? 0 : lb_dataset_num_features(data);
    cfg->num_classes = lb_dataset_num_classes(data);
    cfg->head = lb_dataset_per_position(data) ? LB_HEAD_EVERY : LB_HEAD_LAST;
    if (cfg->max_seq_len < lb_dataset_seq_len(data) || lb_dataset_is_text(data))
        cfg->max_seq_len = lb_dataset_seq_len(data);
    return LB_OK;
}

/* The loss's class weights: given, or balanced from the train split's targets. */
static lb_status make_class_weight(lb_trainer *t)
{
    int64_t C = lb_dataset_num_classes(t->data);
    const char *path = lb_dataset_path(t->data);
    if (lb_dataset_is_regression(t->data))
        return lb_error(LB_ERR_VALUE, "%s: class weights need classes, but the data is regression", path);
    if (C > LB_METRICS_MAX_CLASSES)
        return lb_error(LB_ERR_VALUE, "%s: class weights for %lld classes: at most %d", path, (long long)C,
                        LB_METRICS_MAX_CLASSES);
    double w[LB_METRICS_MAX_CLASSES];
    if (t->cfg.class_weight == 1) {
        int64_t counts[LB_METRICS_MAX_CLASSES];
        lb_status st = lb_dataset_label_histogram(t->data, "train", counts, NULL);
        if (st == LB_OK)
            st = lb_balanced_class_weights(counts, C, w);
        if (st != LB_OK)
            return st;
    } else {
        if (t->cfg.n_class_weights != C)
            return lb_error(LB_ERR_VALUE, "%s has %lld classes but %lld class weights were given", path, (long long)C,
                            (long long)t->cfg.n_class_weights);
        memcpy(w, t->cfg.class_weights, (size_t)C * sizeof *w);
    }
    int64_t shape[1] = {C};
    t->class_weight = lb_tensor_zeros(LB_FLOAT64, 1, shape);
    if (!t->class_weight)
        return lb_last_status();
    for (int64_t c = 0; c < C; c++)
        lb_tensor_set(t->class_weight, &c, w[c]);
    return LB_OK;
}

lb_status lb_trainer_class_weights(const lb_trainer *t, int64_t *n, double *weights)
{
    LB_CHECK_ARG(t, LB_ERR_VALUE);
    LB_CHECK_ARG(n, LB_ERR_VALUE);
    *n = t->class_weight ? t->class_weight->shape[0] : 0;
    for (int64_t c = 0; weights && c < *n; c++)
        weights[c] = lb_tensor_flat(t->class_weight, c);
    return LB_OK;
}

/* Before the first step: a step whose activations cannot fit the memory left is refused
 * now, not after minutes of work (lb_model_step_bytes is a lower bound, so nothing that
 * fits is refused). Each micro-batch's graph is freed before the next one's. */
static lb_status check_step_memory(const lb_model_config *mc, const lb_dataset *data, const lb_train_config *cfg)
{
    int64_t part = (cfg->batch_size + cfg->micro_batches - 1) / cfg->micro_batches;
    int64_t seq_len = lb_dataset_seq_len(data);
    int64_t need = lb_model_step_bytes(mc, part, seq_len > 0 ? seq_len : 1);
    char why[96];
    int64_t free_bytes = lb_memory_free_bytes(why, sizeof why);
    if (need < 0 || free_bytes < 0 || need <= free_bytes)
        return LB_OK;
    int64_t logits = lb_model_step_bytes(&(lb_model_config){.kind = mc->kind, .dtype = mc->dtype, /* no layers: the logits */
                                                            .num_classes = mc->num_classes, .head = mc->head},
                                         part, seq_len > 0 ? seq_len : 1);
    return lb_error(LB_ERR_MEMORY,
                    "out of memory (before the first step): one training step of %lld sequences of %lld positions "
                    "needs at least %.0f MB (the logits over %lld classes and their gradient alone %.0f MB), but %s "
                    "is %.0f MB; lower --batch%s, or raise --micro-batches",
                    (long long)part, (long long)seq_len, (double)need / 1e6, (long long)mc->num_classes,
                    (double)logits / 1e6, why, (double)free_bytes / 1e6, lb_dataset_is_text(data) ? " or --seq-len" : "");
}

lb_trainer *lb_trainer_new(lb_model *model, const lb_dataset *data, const lb_train_config *cfg)
{
    LB_CHECK_ARG(model, NULL);
    LB_CHECK_ARG(data, NULL);
    LB_CHECK_ARG(cfg, NULL);
    if (lb_train_config_check(cfg) != LB_OK || lb_model_data_check(lb_model_get_config(model), NULL, data) != LB_OK)
        return NULL;
    int64_t n_train = lb_dataset_split_size(data, "train");
    if (n_train < 1) {
        lb_error(LB_ERR_VALUE, "%s: the train split is empty", lb_dataset_path(data));
        return NULL;
    }
    if (lb_dataset_is_text(data) && cfg->seq_len > 0 && cfg->seq_len != lb_dataset_seq_len(data)) {
        lb_error(LB_ERR_VALUE, "%s: the train config's seq_len %lld is not the corpus's window %lld (set it with "
                 "lb_dataset_set_seq_len first)", lb_dataset_path(data), (long long)cfg->seq_len,
                 (long long)lb_dataset_seq_len(data));
        return NULL;
    }
    if (!lb_dataset_is_text(data) && cfg->seq_len > 0) {
        lb_error(LB_ERR_VALUE, "%s holds the %s task, whose sequences have their own length: --seq-len applies to text "
                 "corpora only (drop it)", lb_dataset_path(data), lb_dataset_task_name(data));
        return NULL;
    }
    if (cfg->batch_size > n_train && !lb_dataset_is_text(data)) { /* a corpus draws windows at random */
        lb_error(LB_ERR_VALUE, "%s: batch %lld is larger than the train split (%lld examples); lower --batch",
                 lb_dataset_path(data), (long long)cfg->batch_size, (long long)n_train);
        return NULL;
    }
    int64_t classes = lb_dataset_num_classes(data);
    int class_measure = cfg->select == LB_SELECT_F1 || cfg->select == LB_SELECT_MACRO_F1 || cfg->select == LB_SELECT_PR_AUC;
    if (class_measure && (lb_dataset_is_text(data) || classes < 2 || classes > LB_METRICS_MAX_CLASSES ||
                          (cfg->select == LB_SELECT_PR_AUC && classes != 2))) {
        char need[64];
        if (cfg->select == LB_SELECT_PR_AUC)
            snprintf(need, sizeof need, "a binary label (2 classes)");
        else
            snprintf(need, sizeof need, "a label of 2 to %d classes", LB_METRICS_MAX_CLASSES);
        lb_error(LB_ERR_VALUE, "%s: --select %s needs %s, but this %s %lld %s; choose --select loss or accuracy",
                 lb_dataset_path(data), lb_val_select_name(cfg->select), need,
                 lb_dataset_is_text(data) ? "text corpus (next-symbol prediction, no F1) has" : "data file has",
                 (long long)classes, lb_dataset_is_text(data) ? "symbols" : "classes");
        return NULL;
    }
    if (cfg->patience > 0 && lb_dataset_split_size(data, "val") < 1) {
        lb_error(LB_ERR_VALUE, "%s: --patience %lld judges the validation split, which is empty here (import the "
                 "data with a val split, or drop --patience)", lb_dataset_path(data), (long long)cfg->patience);
        return NULL;
    }
    if (check_step_memory(lb_model_get_config(model), data, cfg) != LB_OK)
        return NULL;
    lb_trainer *t = calloc(1, sizeof *t);
    if (!t) {
        lb_error(LB_ERR_MEMORY, "trainer: out of memory");
        return NULL;
    }
    t->model = model;
    t->data = data;
    t->cfg = *cfg;
    t->cfg.schedule = effective_schedule(cfg);
    if (cfg->threads > 0)
        lb_set_num_threads(cfg->threads);
    lb_params *ps = lb_model_params(model);
    t->optim = lb_optim_new(&cfg->optim, ps->items, ps->count);
    for (int i = 0; t->optim && i < ps->count; i++) /* the exempt group of the weight decay */
        lb_optim_set_decay(t->optim, i, lb_decay_params_applies(cfg->decay_params, model, ps->items[i]));
    t->loader = t->optim ? lb_loader_new(data, "train", cfg->batch_size, 1, 1, cfg->seed) : NULL;
    t->graph = t->loader ? lb_graph_new() : NULL;
    if (!t->graph) {
        lb_trainer_free(t);
        return NULL;
    }
    if (lb_model_flops_count(lb_model_get_config(model), lb_dataset_seq_len(data), &t->flops) != LB_OK) {
        lb_trainer_free(t);
        return NULL;
    }
    lb_rng seeder;
    lb_rng_seed(&seeder, cfg->seed ^ 0xD2B74407B1CE6E93ull);
    t->dropout_rng = lb_rng_split(&seeder);
    if (cfg->class_weight && make_class_weight(t) != LB_OK) {
        lb_trainer_free(t);
        return NULL;
    }
    return t;
}

void lb_trainer_free(lb_trainer *t)
{
    if (!t)
        return;
    lb_optim_free(t->optim);
    lb_loader_free(t->loader);
    lb_graph_free(t->graph);
    lb_graph_free(t->eval_graph);
    lb_dist_state_free(t->dist);
    lb_tensor_free(t->class_weight);
    free(t);
}

int64_t lb_trainer_steps_done(const lb_trainer *t)
{
    LB_CHECK_ARG(t, -1);
    return t->step;
}
void lb_trainer_request_stop(lb_trainer *t)
{
    LB_CHECK_ARG(t);
    t->stop_requested = 1;
}
int lb_trainer_stopped(const lb_trainer *t)
{
    LB_CHECK_ARG(t, -1);
    return t->stopped;
}
double lb_trainer_elapsed(const lb_trainer *t)
{
    LB_CHECK_ARG(t, NAN);
    return t->elapsed;
}
double lb_trainer_budget_spent(const lb_trainer *t)
{
    LB_CHECK_ARG(t, NAN);
    return t->budget_spent;
}
lb_optim *lb_trainer_optim(lb_trainer *t)
{
    LB_CHECK_ARG(t, NULL);
    return t->optim;
}
const lb_train_config *lb_trainer_config(const lb_trainer *t)
{
    LB_CHECK_ARG(t, NULL);
    return &t->cfg;
}

static lb_status next_batch(lb_trainer *t, lb_batch *b)
{
    for (int tries = 0; tries < 2; tries++) {
        int r = lb_loader_next(t->loader, b);
        if (r == 1)
            return LB_OK;
        if (r < 0)
            return lb_last_status();
    }
    return lb_error(LB_ERR_VALUE, "%s: the train split has fewer examples than one batch (%lld); lower --batch",
                    lb_dataset_path(t->data), (long long)t->cfg.batch_size);
}

/* The summed class weights of a batch's scored targets (the weighted mean's divisor). */
static double weighted_targets(const lb_batch *b, const lb_tensor *w)
{
    int64_t total = b->batch_size * (b->per_position ? b->seq_len : 1);
    double sum = 0;
    for (int64_t i = 0; i < total; i++)
        if (b->targets[i] != LB_IGNORE_INDEX)
            sum += lb_tensor_flat(w, b->targets[i]);
    return sum;
}

/* Number of targets a batch scores (non-ignored positions, or sequences). */
static int64_t scored_targets(const lb_batch *b)
{
    if (!b->targets || !b->per_position)
        return b->batch_size;
    int64_t n = 0, total = b->batch_size * b->seq_len;
    for (int64_t i = 0; i < total; i++)
        n += b->targets[i] != LB_IGNORE_INDEX;
    return n;
}

/* Where a step started: the loader's place in the data order, the dropout stream, the
 * clocks. */
typedef struct step_start {
    lb_loader_state loader;
    lb_rng dropout;
    double wall, cpu;
} step_start;

static lb_status step_begin(lb_trainer *t, step_start *s)
{
    s->wall = lb_clock_wall();
    s->cpu = t->cfg.budget_clock == LB_BUDGET_CPU ? lb_clock_process_cpu() : 0;
    s->dropout = t->dropout_rng;
    t->step_interrupted = 0;
    if (lb_loader_get_state(t->loader, &s->loader) != LB_OK)
        return lb_last_status();
    return LB_OK;
}

/* A step that failed: its gradients cleared. A stop requested mid-step (one process)
 * discards the step: the data order and the dropout stream go back to where they were,
 * so the checkpoint and a resumed run equal an uninterrupted one. Returns st. */
static lb_status step_abandon(lb_trainer *t, const step_start *s, lb_status st)
{
    lb_optim_zero_grad(t->optim);
    if (!t->dist && t->stop_requested && lb_loader_set_state(t->loader, &s->loader) == LB_OK) {
        t->dropout_rng = s->dropout;
        t->step_interrupted = 1;
    }
    return st;
}

/* The divisors of the micro-batches' shares of the batch: the targets the whole batch
 * scores (over every process) and, with class weights, their summed weights. */
typedef struct batch_shares {
    int64_t scored;
    double weight;
} batch_shares;

static lb_status batch_shares_of(lb_trainer *t, const lb_batch *b, batch_shares *out)
{
    out->scored = scored_targets(b);
    out->weight = 0;
    if (t->dist && t->class_weight)
        return lb_error(LB_ERR_VALUE, "class weights are not available under data-parallel training (each process "
                        "would need the weights of the whole batch): train in one process");
    lb_status st = t->dist ? lb_dist_total_scored(t, &out->scored) : LB_OK;
    if (st != LB_OK)
        return st;
    out->weight = t->class_weight && b->targets ? weighted_targets(b, t->class_weight) : 0;
    return LB_OK;
}

/* What a step's micro-batches add up: the batch's loss (each micro-batch's mean weighted
 * by its share of the batch's targets) and the predictions counted and correct. */
typedef struct step_sums {
    double loss;
    int64_t correct, counted;
} step_sums;

/* One micro-batch: forward, loss, and the backward of the loss times its share (the
 * gradients accumulate over the micro-batches); adds to sums. */
static lb_status micro_batch(lb_trainer *t, const lb_batch *part, const batch_shares *shares, step_sums *sums)
{
    lb_tensor *converted = NULL;
    lb_model_input in;
    lb_status st = batch_input(t->model, part, &in, &converted);
    lb_var *y = st == LB_OK ? lb_model_forward(t->graph, t->model, &in, 1, &t->dropout_rng, NULL) : NULL;
    lb_var *loss = task_loss(t->graph, y, part, t->class_weight);
    if (!loss) {
        st = lb_last_status();
    } else {
        double value = lb_tensor_flat(loss->value, 0);
        int64_t scored = scored_targets(part);
        if (!isfinite(value)) {
            st = lb_error(LB_ERR_NUMERIC, "training loss is %g at step %lld; the parameters were not updated "
                          "(try a lower --lr or --clip)", value, (long long)t->step + 1);
        } else {
            double w = shares->scored > 0 ? (double)scored / (double)shares->scored : 0.0;
            if (t->class_weight && part->targets) /* weighted: the share of the batch's weight */
                w = shares->weight > 0 ? weighted_targets(part, t->class_weight) / shares->weight : 0.0;
            sums->loss += value * w;
            lb_var *weighted = w == 1.0 ? loss : lb_scale(t->graph, loss, w);
            st = scored > 0 ? lb_backward(t->graph, weighted, NULL) : LB_OK;
            if (part->targets)
                count_correct(y->value, part, &sums->correct, &sums->counted, NULL, NULL, NULL, NULL);
        }
    }
    lb_tensor_free(converted);
    return st;
}

/* The batch in cfg.micro_batches parts, each through micro_batch on a fresh tape; stops
 * at the first error. */
static lb_status forward_loss_backward(lb_trainer *t, const lb_batch *b, const batch_shares *shares, step_sums *sums)
{
    lb_status st = LB_OK;
    int64_t micro = t->cfg.micro_batches;
    if (!t->dist) /* ranks agree on a stop between steps (lb_dist_stop_agreed) */
        lb_graph_set_stop(t->graph, &t->stop_requested);
    for (int64_t m = 0; m < micro && st == LB_OK; m++) {
        int64_t start = b->batch_size * m / micro, stop = b->batch_size * (m + 1) / micro;
        lb_tensor *fview = NULL;
        lb_batch part = batch_part(b, start, stop - start, &fview);
        st = micro_batch(t, &part, shares, sums);
        lb_tensor_free(fview);
        lb_graph_reset(t->graph);
    }
    lb_graph_set_stop(t->graph, NULL);
    return st;
}

/* The global gradient norm (clipped to cfg.clip when > 0), then the optimizer's update;
 * a norm that is not finite skips the update (*skipped = 1). Gradients are cleared. */
static lb_status clip_and_update(lb_trainer *t, double *norm, int *skipped)
{
    lb_params *ps = lb_model_params(t->model);
    lb_status st = LB_OK;
    lb_status cst = t->cfg.clip > 0 ? lb_clip_grad_norm(ps->items, ps->count, t->cfg.clip, norm)
                                    : lb_grad_norm(ps->items, ps->count, norm);
    *skipped = cst != LB_OK;
    if (cst == LB_OK)
        st = lb_optim_step(t->optim);
    lb_optim_zero_grad(t->optim);
    lb_clear_error();
    return st;
}

/* The step's figures in stats; its time added to the trainer's clocks (under MPI, the
 * slowest rank's). */
static lb_status step_account(lb_trainer *t, const step_start *s, const lb_batch *b, const step_sums *sums, double lr,
                              double norm, lb_step_stats *stats)
{
    stats->step = t->step;
    stats->loss = sums->loss;
    stats->accuracy = sums->counted > 0 ? (double)sums->correct / (double)sums->counted : NAN;
    stats->grad_norm = norm;
    stats->lr = lr;
    stats->tokens = t->cfg.batch_size * b->seq_len; /* the global batch, also when each rank holds a part */
    stats->seconds = lb_clock_wall() - s->wall;
    double budget = t->cfg.budget_clock == LB_BUDGET_CPU ? (lb_clock_process_cpu() - s->cpu) / lb_get_num_threads()
                                                         : stats->seconds;
    lb_status st = t->dist ? lb_dist_end_step(t, &stats->seconds, &budget) : LB_OK;
    if (st != LB_OK)
        return st;
    t->elapsed += stats->seconds;
    t->budget_spent += budget;
    stats->mfu = lb_mfu(t->flops.training, stats->seconds > 0 ? (double)stats->tokens / stats->seconds : 0,
                        t->sgemm_rate);
    return LB_OK;
}

void lb_trainer_set_sgemm_rate(lb_trainer *t, double flops_per_second)
{
    if (t)
        t->sgemm_rate = flops_per_second > 0 ? flops_per_second : 0;
}

lb_status lb_trainer_costs(const lb_trainer *t, lb_model_flops *flops, double *rate)
{
    LB_CHECK_ARG(t && flops && rate, LB_ERR_VALUE);
    *flops = t->flops;
    *rate = t->sgemm_rate;
    return LB_OK;
}

/* batch -> forward -> loss -> backward -> clip -> optimizer step */
lb_status lb_trainer_step(lb_trainer *t, lb_step_stats *stats)
{
    LB_CHECK_ARG(t, LB_ERR_VALUE);
    LB_CHECK_ARG(stats, LB_ERR_VALUE);
    memset(stats, 0, sizeof *stats);
    step_start start;
    lb_batch b;
    batch_shares shares;
    lb_status st = step_begin(t, &start);
    if (st == LB_OK)
        st = next_batch(t, &b);
    if (st != LB_OK)
        return st;
    double lr = lb_schedule_lr(&t->cfg.schedule, t->step);
    lb_optim_set_lr(t->optim, lr);
    lb_optim_zero_grad(t->optim);
    if ((st = batch_shares_of(t, &b, &shares)) != LB_OK)
        return st;
    step_sums sums = {0};
    st = forward_loss_backward(t, &b, &shares, &sums);
    if (t->dist) /* every rank's gradients and sums added up */
        st = lb_dist_reduce_step(t, st, &sums.loss, &sums.correct, &sums.counted);
    if (st != LB_OK)
        return step_abandon(t, &start, st);
    double norm = 0;
    if ((st = clip_and_update(t, &norm, &stats->skipped)) != LB_OK)
        return st;
    t->step++;
    return step_account(t, &start, &b, &sums, lr, norm, stats);
}

const char *lb_metrics_header(void)
{
    return "step,split,loss,accuracy,lr,grad_norm,tokens_per_second,wall_seconds,skipped,f1,macro_f1,pr_auc,"
           "precision,recall,confusion,mfu,peak_memory_mib";
}

const char *lb_metrics_header_for(const lb_dataset *data)
{
    LB_CHECK_ARG(data, lb_metrics_header());
    if (!lb_dataset_is_text(data))
        return lb_metrics_header();
    return "step,split,loss,accuracy,lr,grad_norm,tokens_per_second,wall_seconds,skipped,bits_per_byte,bits_per_char,"
           "perplexity,mfu,peak_memory_mib";
}

enum { METRICS_COLUMNS = 9 };

lb_status lb_metrics_read(const char *path, const char *split, lb_metrics_row_fn fn, void *user, int64_t *n_rows)
{
    static const char *const names[METRICS_COLUMNS] = {"step",      "split",     "loss",
                                                       "accuracy",  "lr",        "grad_norm",
                                                       "tokens_per_second", "wall_seconds", "skipped"};
    if (n_rows)
        *n_rows = 0;
    LB_CHECK_ARG(path && fn, LB_ERR_VALUE);
    FILE *f = fopen(path, "r");
    if (!f)
        return lb_error(LB_ERR_IO, "%s: cannot read the metrics: %s", path, lb_system_error(errno));
    char line[1024];
    int column_of[METRICS_COLUMNS]; /* names[k] is column column_of[k] (-1: absent) */
    int n_columns = 0;
    for (int k = 0; k < METRICS_COLUMNS; k++)
        column_of[k] = -1;
    if (fgets(line, sizeof line, f)) {
        line[strcspn(line, "\r\n")] = '\0';
        for (char *save = NULL, *tok = strtok_r(line, ",", &save); tok; tok = strtok_r(NULL, ",", &save), n_columns++)
            for (int k = 0; k < METRICS_COLUMNS; k++)
                if (strcmp(tok, names[k]) == 0 && column_of[k] < 0)
                    column_of[k] = n_columns;
    }
    if (column_of[0] < 0 || column_of[1] < 0 || column_of[2] < 0) {
        fclose(f);
        return lb_error(LB_ERR_VALUE, "%s: not a metrics file (its first line is not '%s')", path, lb_metrics_header());
    }
    int64_t passed = 0;
    while (fgets(line, sizeof line, f)) {
        size_t len = strcspn(line, "\r\n");
        if (line[len] == '\0' && !feof(f))
            continue; /* longer than any row lookback writes */
        line[len] = '\0';
        lb_metrics_row row = {.loss = NAN, .accuracy = NAN, .lr = NAN, .grad_norm = NAN, .tokens_per_second = NAN,
                              .wall_seconds = NAN};
        int got = 0, col = 0;
        for (char *p = line, *next; p; p = next, col++) {
            next = strchr(p, ',');
            if (next)
                *next++ = '\0';
            for (int k = 0; k < METRICS_COLUMNS; k++) {
                if (column_of[k] != col)
                    continue;
                char *end = NULL;
                if (k == 1) {
                    if (strlen(p) < sizeof row.split) {
                        memcpy(row.split, p, strlen(p) + 1);
                        got |= 1 << k;
                    }
                } else if (k == 0 || k == 8) {
                    long long v = strtoll(p, &end, 10);
                    if (*p && !*end) {
                        *(k == 0 ? &row.step : &row.skipped) = v;
                        got |= 1 << k;
                    }
                } else {
                    double v = strtod(p, &end);
                    double *field[] = {NULL, NULL, &row.loss, &row.accuracy, &row.lr, &row.grad_norm,
                                       &row.tokens_per_second, &row.wall_seconds};
                    if (*p && !*end) {
                        *field[k] = v;
                        got |= 1 << k;
                    }
                }
            }
        }
        if ((got & 7) != 7 || (split && strcmp(row.split, split) != 0))
            continue;
        passed++;
        if (fn(&row, user))
            break;
    }
    fclose(f);
    if (n_rows)
        *n_rows = passed;
    return LB_OK;
}

enum { METRICS_CONFUSION_MAX = 4 };

/* One row of metrics.csv, written whole with write(2) or not at all: when the write
 * fails (a full disk) the file is cut back to its previous end, so the rows before
 * stay whole, and LB_ERR_IO is returned. */
static lb_status write_metrics(FILE *f, const lb_dataset *text, int64_t step, const char *split, double loss, double acc, double lr,
                               double norm, double tps, double wall, int64_t skipped, const lb_eval_result *val,
                               double mfu)
{
    if (!f)
        return LB_OK;
    char line[1024];
    int len = snprintf(line, sizeof line, "%lld,%s,%.9g,%.9g,%.9g,%.9g,%.9g,%.6f,%lld", (long long)step, split, loss,
                       acc, lr, norm, tps, wall, (long long)skipped);
    if (text) { /* bits per byte and per character of the split's text, perplexity per token */
        double bpb = NAN, bpc = NAN;
        lb_text_bits(text, split, loss, &bpb, &bpc);
        len += snprintf(line + len, sizeof line - (size_t)len, ",%.9g,%.9g,%.9g", bpb, bpc, exp(loss));
    } else { /* the rare-event measures of a validation (train rows: nan) */
        const lb_class_report *c = val && val->classes.num_classes && val->classes.total ? &val->classes : NULL;
        double f1 = c ? lb_class_report_detector_f1(c) : NAN, macro = c ? c->macro_f1 : NAN;
        /* precision and recall of class 1 for a binary label (the rare event), else their macro averages */
        double precision = NAN, recall = NAN;
        if (c && c->num_classes == 2) {
            precision = c->precision[1];
            recall = c->recall[1];
        } else if (c) {
            precision = recall = 0;
            for (int64_t k = 0; k < c->num_classes; k++) {
                precision += c->precision[k] / (double)c->num_classes;
                recall += c->recall[k] / (double)c->num_classes;
            }
        }
        /* the confusion matrix up to 4 classes (a row stays short; eval prints any size) */
        char confusion[METRICS_CONFUSION_MAX * METRICS_CONFUSION_MAX * 21] = "";
        for (int64_t k = 0, used = 0; c && c->num_classes <= METRICS_CONFUSION_MAX && k < c->num_classes * c->num_classes;
             k++)
            used += snprintf(confusion + used, sizeof confusion - (size_t)used, "%s%lld", k ? " " : "",
                             (long long)c->confusion[k]);
        len += snprintf(line + len, sizeof line - (size_t)len, ",%.9g,%.9g,%.9g,%.9g,%.9g,%s", f1, macro,
                        val ? val->average_precision : NAN, precision, recall, confusion);
    }
    len += snprintf(line + len, sizeof line - (size_t)len, ",%.6g,%.1f\n", mfu, lb_peak_memory_mib());
    int fd = fileno(f);
    off_t before = (fflush(f) == 0 && fd >= 0) ? lseek(fd, 0, SEEK_END) : (off_t)-1;
    int err = before < 0 ? (errno ? errno : EIO) : 0;
    for (int done = 0; !err && done < len;) {
        ssize_t n = write(fd, line + done, (size_t)(len - done));
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0)
            err = n < 0 ? errno : ENOSPC;
        else
            done += (int)n;
    }
    if (!err)
        return LB_OK;
    if (before >= 0 && ftruncate(fd, before) != 0) { /* keep the error of the write */
    }
    char link[64], path[1024];
    snprintf(link, sizeof link, "/proc/self/fd/%d", fd);
    ssize_t n = fd >= 0 ? readlink(link, path, sizeof path - 1) : -1;
    snprintf(path + (n > 0 ? n : 0), sizeof path - (size_t)(n > 0 ? n : 0), "%s", n > 0 ? "" : "metrics");
    return lb_error(LB_ERR_IO, "%s: cannot write the %s metrics row of step %lld (%s); the rows before it are kept",
                    path, split, (long long)step, lb_system_error(err));
}

int64_t lb_trainer_run_steps(const lb_trainer *t)
{
    LB_CHECK_ARG(t, -1);
    return t->run_steps;
}
int64_t lb_trainer_run_skipped(const lb_trainer *t)
{
    LB_CHECK_ARG(t, -1);
    return t->run_skipped;
}
int lb_trainer_stopped_early(const lb_trainer *t)
{
    LB_CHECK_ARG(t, -1);
    return t->stopped_early;
}

int64_t lb_trainer_solved_step(const lb_trainer *t, double *score)
{
    if (score)
        *score = NAN;
    LB_CHECK_ARG(t, -1);
    if (score)
        *score = t->solved_step ? t->solved_score : NAN;
    return t->solved_step;
}

int64_t lb_trainer_best(const lb_trainer *t, double *metric)
{
    LB_CHECK_ARG(t, -1);
    if (metric)
        *metric = t->best_metric;
    return t->best_step;
}

/* "DIR/best.h5" for checkpoint "DIR/NAME". */
static void best_path(const char *checkpoint_path, char *buf, size_t size)
{
    const char *slash = strrchr(checkpoint_path, '/');
    if (slash)
        snprintf(buf, size, "%.*s/best.h5", (int)(slash - checkpoint_path), checkpoint_path);
    else
        snprintf(buf, size, "best.h5");
}

/* Records an evaluation; 1 when it is the best so far. */
static int note_validation(lb_trainer *t, const lb_eval_result *r)
{
    int higher;
    double metric = lb_val_score(r, t->cfg.select, &higher);
    int better = t->best_step == 0 || (higher ? metric > t->best_metric : metric < t->best_metric);
    if (better) {
        t->best_step = t->step;
        t->best_metric = metric;
        t->evals_since_best = 0;
    } else {
        t->evals_since_best++;
    }
    return better;
}

lb_status lb_trainer_run(lb_trainer *t, const char *checkpoint_path, FILE *metrics, lb_loop_callback cb, void *user)
{
    LB_CHECK_ARG(t, LB_ERR_VALUE);
    const lb_train_config *c = &t->cfg;
    double lr = 0, norm = 0, tokens = 0, seconds = 0;
    t->stopped = t->stopped_early = 0;
    t->stop_requested = 0;
    t->run_steps = t->run_skipped = t->skipped_in_row = 0;
    while (t->step < c->steps) {
        if (c->time_budget > 0 && t->budget_spent >= c->time_budget)
            break;
        if (t->dist ? lb_dist_stop_agreed(t) : t->stop_requested) {
            t->stopped = 1;
            return checkpoint_path ? lb_trainer_save(t, checkpoint_path) : LB_OK;
        }
        lb_step_stats s;
        lb_status st = lb_trainer_step(t, &s);
        if (st != LB_OK && t->step_interrupted) { /* discarded: saved as of the step before */
            lb_clear_error();
            t->stopped = 1;
            return checkpoint_path ? lb_trainer_save(t, checkpoint_path) : LB_OK;
        }
        if (st != LB_OK)
            return st;
        t->run_steps++;
        if (s.skipped) {
            t->run_skipped++;
            t->interval_skipped++;
            if (c->max_skipped > 0 && ++t->skipped_in_row >= c->max_skipped)
                return lb_error(LB_ERR_NUMERIC, "%lld steps in a row (steps %lld..%lld) were skipped because the "
                                "gradient was not finite, so the run stops (try a lower --lr, or --clip 1)",
                                (long long)t->skipped_in_row, (long long)(t->step - t->skipped_in_row + 1),
                                (long long)t->step);
        } else {
            t->skipped_in_row = 0;
        }
        lr = s.lr;
        norm = s.grad_norm;
        tokens += (double)s.tokens;
        seconds += s.seconds;
        /* The train row of the metrics: means over the steps since the last row. */
        t->interval_loss += s.loss;
        t->interval_steps++;
        if (!isnan(s.accuracy)) {
            t->interval_acc += s.accuracy;
            t->interval_acc_steps++;
        }
        if (cb)
            cb(LB_EVENT_STEP, &s, NULL, user);
        int last = t->step == c->steps || (c->time_budget > 0 && t->budget_spent >= c->time_budget);
        int eval_now = last || (c->eval_every > 0 && t->step % c->eval_every == 0);
        int ckpt_due = last || (c->checkpoint_every > 0 ? t->step % c->checkpoint_every == 0 : eval_now);
        int improved = 0, judged = 0, solved = 0;
        if (eval_now) {
            lb_eval_result r;
            st = write_metrics(metrics, lb_dataset_is_text(t->data) ? t->data : NULL, t->step, "train", t->interval_loss / (double)t->interval_steps,
                               t->interval_acc_steps > 0 ? t->interval_acc / (double)t->interval_acc_steps : NAN, lr,
                               norm, seconds > 0 ? tokens / seconds : 0, t->elapsed, t->interval_skipped, NULL,
                               lb_mfu(t->flops.training, seconds > 0 ? tokens / seconds : 0, t->sgemm_rate));
            if (st != LB_OK)
                return st;
            tokens = seconds = t->interval_loss = t->interval_acc = 0;
            t->interval_steps = t->interval_acc_steps = t->interval_skipped = 0;
            if (lb_dataset_split_size(t->data, "val") > 0) {
                if ((st = lb_trainer_evaluate(t, "val", c->eval_examples, &r)) != LB_OK)
                    return st;
                /* The best and --patience are judged where a checkpoint is written
                 * (and at the validation that solves the task: the run ends there). */
                if (c->stop_at > 0) {
                    int higher;
                    double score = lb_val_score(&r, c->select, &higher);
                    solved = higher ? score >= c->stop_at : score <= c->stop_at;
                    if (solved && t->solved_step == 0) {
                        t->solved_step = t->step;
                        t->solved_score = score;
                    }
                }
                judged = ckpt_due || solved;
                improved = judged && note_validation(t, &r);
                if ((st = write_metrics(metrics, lb_dataset_is_text(t->data) ? t->data : NULL, t->step, "val", r.loss, r.accuracy, lr, norm, 0,
                                        t->elapsed, 0, &r, NAN)) != LB_OK)
                    return st;
                if (cb)
                    cb(LB_EVENT_EVAL, &s, &r, user);
            }
        }
        if (improved && checkpoint_path) {
            char best[4200];
            best_path(checkpoint_path, best, sizeof best);
            if ((st = lb_trainer_save(t, best)) != LB_OK)
                return st;
        }
        int early = judged && c->patience > 0 && t->evals_since_best >= c->patience;
        int ckpt_now = ckpt_due || early || solved;
        if (ckpt_now && checkpoint_path) {
            if ((st = lb_trainer_save(t, checkpoint_path)) != LB_OK)
                return st;
            if (cb)
                cb(LB_EVENT_CHECKPOINT, &s, NULL, user);
        }
        if (early)
            t->stopped_early = 1;
        if (early || solved)
            break;
    }
    if (t->run_steps > 0 && t->run_skipped == t->run_steps)
        return lb_error(LB_ERR_NUMERIC, "all %lld steps of this run were skipped because the gradient was not finite: "
                        "nothing was learned (try a lower --lr, or --clip 1)", (long long)t->run_steps);
    return LB_OK;
}

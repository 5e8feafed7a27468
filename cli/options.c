#include "cli/options.h"

#include <json-c/json.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cli/cli.h"

typedef enum opt_type {
    T_INT64, T_INT, T_REAL, T_U64, T_MODEL, T_POS, T_SCALE, T_OPTIM, T_SCHEDULE, T_STRING
} opt_type;

typedef struct run_option {
    const char *name;
    opt_type type;
    size_t offset; /* into lb_run_config */
    double min, max;
    const char *help;
} run_option;

#define M(f) offsetof(lb_run_config, model.f)
#define TR(f) offsetof(lb_run_config, train.f)
static const run_option options[] = {
    {"data", T_STRING, offsetof(lb_run_config, data), 0, 0, "training data file (HDF5, from `lookback data`)"},
    {"model", T_MODEL, M(kind), 0, 0, "transformer | local | lstm | conv"},
    {"layers", T_INT, M(n_layers), 1, 64, "transformer blocks, LSTM layers or conv layers"},
    {"d-model", T_INT64, M(d_model), 1, 65536, "model width (embedding width for every family)"},
    {"heads", T_INT, M(n_heads), 1, 1024, "attention heads (d-model must divide by it)"},
    {"d-ff", T_INT64, M(d_ff), 1, 1 << 20, "feed-forward width"},
    {"pos", T_POS, M(pos), 0, 0, "positions: none | sinusoidal | learned | rotary"},
    {"window", T_INT64, M(window), 0, 1 << 30, "local attention: keys each query sees"},
    {"causal", T_INT, M(causal), 0, 1, "attention masks future positions (1) or not (0)"},
    {"length-scale", T_SCALE, M(length_scale), 0, 0,
     "attention logits x ln(keys seen): none | log-n | scalable (x s learned per head, SSMax)"},
    {"dropout", T_REAL, M(dropout), 0, 0.99, "dropout probability"},
    {"hidden", T_INT64, M(hidden_size), 1, 65536, "LSTM hidden_size"},
    {"forget-bias", T_REAL, M(forget_bias), -100, 100, "LSTM forget-gate bias added at init"},
    {"kernel", T_INT64, M(kernel_size), 1, 1024, "conv kernel size (dilation doubles per layer)"},
    {"model-seed", T_U64, M(seed), 0, 0, "parameter initialisation seed"},
    {"optim", T_OPTIM, TR(optim.kind), 0, 0, "sgd | adam | adamw"},
    {"lr", T_REAL, TR(optim.lr), 0, 1e3, "peak learning rate"},
    {"weight-decay", T_REAL, TR(optim.weight_decay), 0, 1e3, "weight decay (decoupled for adamw)"},
    {"momentum", T_REAL, TR(optim.momentum), 0, 1, "SGD momentum"},
    {"beta1", T_REAL, TR(optim.beta1), 0, 0.999999, "Adam beta1"},
    {"beta2", T_REAL, TR(optim.beta2), 0, 0.999999999, "Adam beta2"},
    {"clip", T_REAL, TR(clip), 0, 1e12, "max global gradient norm (0 = off)"},
    {"schedule", T_SCHEDULE, TR(schedule.kind), 0, 0, "constant | cosine | step"},
    {"warmup", T_INT64, TR(schedule.warmup_steps), 0, 1e12, "linear warm-up steps"},
    {"min-lr-ratio", T_REAL, TR(schedule.min_lr_ratio), 0, 1, "cosine: final lr / peak lr"},
    {"step-size", T_INT64, TR(schedule.step_size), 1, 1e12, "step schedule: steps between decays"},
    {"gamma", T_REAL, TR(schedule.gamma), 0, 1, "step schedule: decay factor"},
    {"steps", T_INT64, TR(steps), 1, 1e12, "total optimizer steps (also after --resume)"},
    {"batch", T_INT64, TR(batch_size), 1, 1 << 20, "examples per step"},
    {"micro-batches", T_INT64, TR(micro_batches), 1, 1 << 20, "gradient accumulation: parts per batch"},
    {"eval-every", T_INT64, TR(eval_every), 0, 1e12, "steps between validations (0 = at the end)"},
    {"eval-examples", T_INT64, TR(eval_examples), 0, 1e12, "validation examples per evaluation (0 = all)"},
    {"checkpoint-every", T_INT64, TR(checkpoint_every), 0, 1e12, "steps between checkpoints (0 = at validations)"},
    {"time-budget", T_REAL, TR(time_budget), 0, 1e9, "stop after this many seconds of training (0 = none)"},
    {"seed", T_U64, TR(seed), 0, 0, "data order and dropout seed"},
    {"threads", T_INT, TR(threads), 0, 1024, "threads (0 = OMP_NUM_THREADS or all processors)"},
};
#undef M
#undef TR
enum { N_OPTIONS = sizeof options / sizeof options[0], OPTION_BASE = 1000 };

void lb_run_config_default(lb_run_config *rc, lb_model_kind kind)
{
    char data[sizeof rc->data];
    memcpy(data, rc->data, sizeof data);
    memset(rc, 0, sizeof *rc);
    memcpy(rc->data, data, sizeof data);
    lb_model_config_default(kind, &rc->model);
    lb_train_config_default(&rc->train);
}

static const run_option *find_option(const char *name)
{
    for (int i = 0; i < N_OPTIONS; i++)
        if (strcmp(options[i].name, name) == 0)
            return &options[i];
    return NULL;
}

lb_status lb_run_config_set(lb_run_config *rc, const char *name, const char *value)
{
    const run_option *o = find_option(name);
    char flag[96];
    snprintf(flag, sizeof flag, "--%s", name);
    if (!o)
        return lb_error(LB_ERR_VALUE, "unknown option '%s' (see --help)", name);
    char *p = (char *)rc + o->offset;
    int64_t iv;
    double rv;
    lb_status st = LB_OK;
    switch (o->type) {
    case T_INT64:
        if ((st = lb_cli_int(flag, value, (int64_t)o->min, (int64_t)o->max, &iv)) == LB_OK)
            *(int64_t *)p = iv;
        break;
    case T_INT:
        if ((st = lb_cli_int(flag, value, (int64_t)o->min, (int64_t)o->max, &iv)) == LB_OK)
            *(int *)p = (int)iv;
        break;
    case T_U64:
        if ((st = lb_cli_int(flag, value, 0, INT64_MAX, &iv)) == LB_OK)
            *(uint64_t *)p = (uint64_t)iv;
        break;
    case T_REAL:
        if ((st = lb_cli_real(flag, value, o->min, o->max, &rv)) == LB_OK)
            *(double *)p = rv;
        break;
    case T_MODEL: {
        lb_model_kind kind;
        if ((st = lb_model_kind_parse(value, &kind)) == LB_OK) {
            lb_model_config keep = rc->model;
            lb_model_config_default(kind, &rc->model);
            rc->model.seed = keep.seed;
        }
        break;
    }
    case T_POS: st = lb_pos_kind_parse(value, (lb_pos_kind *)p); break;
    case T_SCALE: st = lb_length_scale_parse(value, (lb_length_scale *)p); break;
    case T_OPTIM: {
        lb_optim_kind kind;
        if ((st = lb_optim_kind_parse(value, &kind)) == LB_OK && kind != rc->train.optim.kind) {
            double lr = rc->train.optim.lr;
            rc->train.optim = lb_optim_defaults(kind);
            rc->train.optim.lr = lr;
        }
        break;
    }
    case T_SCHEDULE: st = lb_schedule_kind_parse(value, (lb_schedule_kind *)p); break;
    case T_STRING:
        if (strlen(value) >= sizeof rc->data)
            return lb_error(LB_ERR_VALUE, "%s: path too long", flag);
        strcpy(p, value);
        break;
    }
    if (st != LB_OK && strstr(lb_last_error(), flag) == NULL)
        lb_error_context("%s", flag);
    return st;
}

/* A double as the shortest text that reads back to the same value (0.9, not 0.90000000000000002). */
static json_object *json_double(double v)
{
    char text[32];
    for (int precision = 6; precision <= 17; precision++) {
        snprintf(text, sizeof text, "%.*g", precision, v);
        if (strtod(text, NULL) == v)
            break;
    }
    return json_object_new_double_s(v, text);
}

static json_object *option_json(const lb_run_config *rc, const run_option *o)
{
    const char *p = (const char *)rc + o->offset;
    switch (o->type) {
    case T_INT64: return json_object_new_int64(*(const int64_t *)p);
    case T_INT: return json_object_new_int64(*(const int *)p);
    case T_U64: return json_object_new_uint64(*(const uint64_t *)p);
    case T_REAL: return json_double(*(const double *)p);
    case T_MODEL: return json_object_new_string(lb_model_kind_name(*(const lb_model_kind *)p));
    case T_POS: return json_object_new_string(lb_pos_kind_name(*(const lb_pos_kind *)p));
    case T_SCALE: return json_object_new_string(lb_length_scale_name(*(const lb_length_scale *)p));
    case T_OPTIM: return json_object_new_string(lb_optim_kind_name(*(const lb_optim_kind *)p));
    case T_SCHEDULE: return json_object_new_string(lb_schedule_kind_name(*(const lb_schedule_kind *)p));
    case T_STRING: return json_object_new_string(p);
    }
    return NULL;
}

lb_status lb_run_config_save_json(const lb_run_config *rc, const char *path)
{
    json_object *root = json_object_new_object();
    for (int i = 0; i < N_OPTIONS; i++)
        json_object_object_add(root, options[i].name, option_json(rc, &options[i]));
    return lb_cli_write_json(root, path, "configuration");
}

/* Reads a whole JSON document strictly: no trailing text, no comments. */
static json_object *read_json_strict(const char *path)
{
    FILE *f = fopen(path, "r");
    if (!f) {
        lb_error(LB_ERR_IO, "%s: no such file (or not readable)", path);
        return NULL;
    }
    char *text = NULL;
    size_t size = 0, used = 0;
    for (;;) {
        if (used + 4096 > size) {
            char *grown = realloc(text, size = size * 2 + 8192);
            if (!grown) {
                free(text);
                fclose(f);
                lb_error(LB_ERR_MEMORY, "%s: out of memory", path);
                return NULL;
            }
            text = grown;
        }
        size_t n = fread(text + used, 1, size - used - 1, f);
        used += n;
        if (n == 0)
            break;
    }
    fclose(f);
    text[used] = '\0';
    json_tokener *tok = json_tokener_new();
    json_tokener_set_flags(tok, JSON_TOKENER_STRICT);
    json_object *root = json_tokener_parse_ex(tok, text, (int)used);
    enum json_tokener_error err = json_tokener_get_error(tok);
    size_t end = json_tokener_get_parse_end(tok);
    while (root && end < used && (text[end] == ' ' || text[end] == '\n' || text[end] == '\t' || text[end] == '\r'))
        end++;
    if (!root || err != json_tokener_success || end != used) {
        lb_error(LB_ERR_FORMAT, "%s: not a valid JSON document (%s at byte %zu)", path,
                 root ? "text after the object" : json_tokener_error_desc(err), end);
        json_object_put(root);
        root = NULL;
    }
    json_tokener_free(tok);
    free(text);
    return root;
}

lb_status lb_run_config_load_json(lb_run_config *rc, const char *path)
{
    json_object *root = read_json_strict(path);
    if (!root)
        return lb_last_status();
    if (!json_object_is_type(root, json_type_object)) {
        json_object_put(root);
        return lb_error(LB_ERR_FORMAT, "%s: expected a JSON object of {\"option\": value}", path);
    }
    lb_status st = LB_OK;
    /* "model" first: it resets the model fields to that family's defaults. */
    json_object *kind = NULL;
    if (json_object_object_get_ex(root, "model", &kind)) {
        if (!json_object_is_type(kind, json_type_string))
            st = lb_error(LB_ERR_VALUE, "%s: key 'model' needs a string (transformer, local, lstm or conv)", path);
        else if ((st = lb_run_config_set(rc, "model", json_object_get_string(kind))) != LB_OK)
            lb_error_context("%s", path);
    }
    json_object_object_foreach(root, key, val)
    {
        if (st != LB_OK)
            break;
        if (strcmp(key, "model") == 0)
            continue;
        if (!find_option(key)) {
            st = lb_error(LB_ERR_VALUE, "%s: unknown key '%s'", path, key);
            break;
        }
        const run_option *o = find_option(key);
        int wants_string = o->type != T_INT64 && o->type != T_INT && o->type != T_U64 && o->type != T_REAL;
        int is_number = json_object_is_type(val, json_type_int) || json_object_is_type(val, json_type_double);
        if (wants_string ? !json_object_is_type(val, json_type_string) : !is_number) {
            st = lb_error(LB_ERR_VALUE, "%s: key '%s' needs a %s", path, key, wants_string ? "string" : "number");
            break;
        }
        char text[4200];
        if (json_object_is_type(val, json_type_double))
            snprintf(text, sizeof text, "%.17g", json_object_get_double(val));
        else
            snprintf(text, sizeof text, "%s", json_object_get_string(val));
        if ((st = lb_run_config_set(rc, key, text)) != LB_OK)
            lb_error_context("%s", path);
    }
    json_object_put(root);
    return st;
}

void lb_run_config_fit_data(lb_run_config *rc, const lb_dataset *data)
{
    lb_model_config *m = &rc->model;
    m->vocab_size = lb_dataset_vocab_size(data);
    m->input_features = m->vocab_size > 0 ? 0 : lb_dataset_num_features(data);
    m->num_classes = lb_dataset_num_classes(data);
    m->head = lb_dataset_per_position(data) ? LB_HEAD_EVERY : LB_HEAD_LAST;
    if (m->max_seq_len < lb_dataset_seq_len(data))
        m->max_seq_len = lb_dataset_seq_len(data);
}

const struct option *lb_run_options(const struct option *extra, int n_extra)
{
    static struct option all[N_OPTIONS + 64];
    int n = 0;
    for (int i = 0; i < n_extra && n < 63; i++)
        all[n++] = extra[i];
    for (int i = 0; i < N_OPTIONS; i++)
        all[n++] = (struct option){options[i].name, required_argument, NULL, OPTION_BASE + i};
    all[n] = (struct option){NULL, 0, NULL, 0};
    return all;
}

const char *lb_run_option_name(int val)
{
    return val >= OPTION_BASE && val < OPTION_BASE + N_OPTIONS ? options[val - OPTION_BASE].name : NULL;
}

void lb_run_options_help(FILE *out, lb_model_kind kind)
{
    lb_run_config rc;
    memset(&rc, 0, sizeof rc);
    lb_run_config_default(&rc, kind);
    for (int i = 1; i < N_OPTIONS; i++) {
        json_object *v = option_json(&rc, &options[i]);
        fprintf(out, "  --%-18s %-52s (default %s)\n", options[i].name, options[i].help, json_object_get_string(v));
        json_object_put(v);
    }
    fputs("Defaults shown are the transformer's; local attention uses --window 16, conv --layers 4.\n", out);
}

int lb_run_option_resumable(const char *name)
{
    static const char *ok[] = {"steps", "threads", "time-budget", "eval-every", "eval-examples", "checkpoint-every"};
    for (size_t i = 0; i < sizeof ok / sizeof ok[0]; i++)
        if (strcmp(name, ok[i]) == 0)
            return 1;
    return 0;
}

#include "lab/run_config.h"

#include <ctype.h>
#include <errno.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <json-c/json.h>
#include <zlib.h>
#include <stddef.h>
#include <stdlib.h>
#include <math.h>
#include <string.h>
#include <unistd.h>

#include "lab/files.h"
#include "layers/family.h"
#include "tensor/blas.h"

/* The run's options: "data", "preset", every model field that has an option (the field list of
 * layers/model_fields.def, in its order), then the training fields of
 * train/train_fields.def, in theirs. */
enum { OPTION_BASE = 1000, MAX_OPTIONS = 128 };

/* One option: a model field or a training option. */
typedef struct run_option {
    const char *name;
    const lb_model_field *field; /* NULL for a training option, "data" and "preset" */
    const lb_train_field *train; /* NULL for a model field, "data" and "preset" */
} run_option;

/* "data": the training file, the one option that is neither a model nor a training field. */
static const char *const data_help = "training data file (HDF5, from `lookback data`)";

/* "preset": a named set of block options (attention families), applied before the
 * options given beside it so that they override it. One row per preset. */
typedef struct run_preset {
    const char *name;
    const char *settings[6][2]; /* option, value; ends at a NULL option */
} run_preset;
static const run_preset presets[] = {
    /* GPT-2 (Radford et al. 2019): LayerNorm before each sublayer, a GELU MLP, learned
     * positions, biases */
    {"gpt2", {{"norm", "layernorm"}, {"norm-position", "pre"}, {"ffn", "gelu"}, {"pos", "learned"}, {"bias", "1"}}},
    /* Llama (Touvron et al. 2023): RMSNorm before each sublayer, SwiGLU, rotary positions,
     * no biases */
    {"llama", {{"norm", "rmsnorm"}, {"norm-position", "pre"}, {"ffn", "swiglu"}, {"pos", "rotary"}, {"bias", "0"}}},
};
enum { N_PRESETS = sizeof presets / sizeof presets[0] };

const char *lb_run_presets_text(void)
{
    static char text[512];
    if (!text[0])
        for (int p = 0; p < N_PRESETS; p++) {
            snprintf(text + strlen(text), sizeof text - strlen(text), "%s%s (", p ? " | " : "", presets[p].name);
            for (int i = 0; i < 6 && presets[p].settings[i][0]; i++)
                snprintf(text + strlen(text), sizeof text - strlen(text), "%s%s %s", i ? ", " : "",
                         presets[p].settings[i][0], presets[p].settings[i][1]);
            snprintf(text + strlen(text), sizeof text - strlen(text), ")");
        }
    return text;
}

static const run_preset *find_preset(const char *name)
{
    for (int p = 0; p < N_PRESETS; p++)
        if (strcmp(presets[p].name, name) == 0)
            return &presets[p];
    return NULL;
}

/* 1 for the "preset" option (neither a model field nor a training option). */
static int is_preset(const struct run_option *o);

/* "data", the model fields with options, the training options. */
static const run_option *all_options(int *count)
{
    static run_option list[MAX_OPTIONS];
    static int n = 0;
    if (n == 0) {
        int n_fields;
        const lb_model_field *fields = lb_model_fields(&n_fields);
        int n_train;
        const lb_train_field *train = lb_train_fields(&n_train);
        list[n++] = (run_option){"data", NULL, NULL};
        list[n++] = (run_option){"preset", NULL, NULL};
        for (int i = 0; i < n_fields && n < MAX_OPTIONS; i++)
            if (fields[i].option)
                list[n++] = (run_option){fields[i].option, &fields[i], NULL};
        for (int i = 0; i < n_train && n < MAX_OPTIONS; i++)
            list[n++] = (run_option){train[i].option, NULL, &train[i]};
    }
    *count = n;
    return list;
}

void lb_run_config_default(lb_run_config *rc, lb_model_kind kind)
{
    char data[sizeof rc->data];
    memcpy(data, rc->data, sizeof data);
    memset(rc, 0, sizeof *rc);
    memcpy(rc->data, data, sizeof data);
    lb_model_config_default(kind, &rc->model);
    lb_train_config_default(&rc->train);
}

static int is_preset(const run_option *o) { return o->field == NULL && o->train == NULL && strcmp(o->name, "preset") == 0; }

static const run_option *find_option(const char *name)
{
    int n;
    const run_option *list = all_options(&n);
    for (int i = 0; i < n; i++)
        if (strcmp(list[i].name, name) == 0)
            return &list[i];
    return NULL;
}

static lb_status set_model_field(lb_run_config *rc, const lb_model_field *f, const char *value)
{
    if (f->type != LB_FIELD_KIND)
        return lb_model_field_set(&rc->model, f, value);
    /* A new family starts from its own defaults (the seed is kept); the same family
     * keeps what was set. */
    lb_model_config next = rc->model;
    lb_status st = lb_model_field_set(&next, f, value);
    if (st == LB_OK && next.kind != rc->model.kind) {
        uint64_t seed = rc->model.seed;
        lb_model_config_default(next.kind, &rc->model);
        rc->model.seed = seed;
    }
    return st;
}

lb_status lb_run_config_set(lb_run_config *rc, const char *name, const char *value)
{
    const run_option *ro = find_option(name);
    if (!ro)
        return lb_error(LB_ERR_VALUE, "unknown option '--%s' (see --help)", name);
    if (ro->field)
        return set_model_field(rc, ro->field, value);
    char flag[96];
    snprintf(flag, sizeof flag, "--%s", name);
    if (is_preset(ro)) {
        const run_preset *p = find_preset(value);
        if (!p)
            return lb_error(LB_ERR_VALUE, "--preset: '%s' is not one of gpt2, llama", value);
        for (int i = 0; i < 6 && p->settings[i][0]; i++)
            if (set_model_field(rc, find_option(p->settings[i][0])->field, p->settings[i][1]) != LB_OK)
                return lb_error_context("--preset %s", p->name);
        snprintf(rc->preset, sizeof rc->preset, "%s", p->name);
        return LB_OK;
    }
    if (!ro->train) { /* data */
        if (strlen(value) >= sizeof rc->data)
            return lb_error(LB_ERR_VALUE, "%s: path too long", flag);
        strcpy(rc->data, value);
        return LB_OK;
    }
    const lb_train_field *o = ro->train;
    if (strcmp(name, "eval-examples") == 0)
        rc->eval_examples_given = 1;
    if (strcmp(name, "select") == 0)
        rc->select_given = 1;
    char *p = (char *)&rc->train + o->offset;
    int64_t iv;
    double rv;
    lb_status st = LB_OK;
    switch (o->type) {
    case LB_TRAIN_INT64:
        if ((st = lb_option_int(flag, value, (int64_t)o->min, (int64_t)o->max, &iv)) == LB_OK)
            *(int64_t *)p = iv;
        break;
    case LB_TRAIN_INT:
        if ((st = lb_option_int(flag, value, (int64_t)o->min, (int64_t)o->max, &iv)) == LB_OK)
            *(int *)p = (int)iv;
        break;
    case LB_TRAIN_U64:
        if ((st = lb_option_int(flag, value, 0, INT64_MAX, &iv)) == LB_OK)
            *(uint64_t *)p = (uint64_t)iv;
        break;
    case LB_TRAIN_REAL:
        if ((st = lb_option_real(flag, value, o->min, o->max, &rv)) == LB_OK)
            *(double *)p = rv;
        break;
    case LB_TRAIN_OPTIM: {
        lb_optim_kind kind;
        if ((st = lb_optim_kind_parse(value, &kind)) == LB_OK && kind != rc->train.optim.kind) {
            double lr = rc->train.optim.lr;
            rc->train.optim = lb_optim_defaults(kind);
            rc->train.optim.lr = lr;
        }
        break;
    }
    case LB_TRAIN_SCHEDULE: st = lb_schedule_kind_parse(value, (lb_schedule_kind *)p); break;
    case LB_TRAIN_CLOCK: st = lb_budget_clock_parse(value, (lb_budget_clock *)p); break;
    case LB_TRAIN_SELECT: st = lb_val_select_parse(value, (lb_val_select *)p); break;
    case LB_TRAIN_DECAY: st = lb_decay_params_parse(value, (lb_decay_params *)p); break;
    case LB_TRAIN_WEIGHTS: st = lb_class_weight_parse(value, &rc->train); break;
    }
    if (st != LB_OK && strstr(lb_last_error(), flag) == NULL)
        lb_error_context("%s", flag);
    return st;
}

static int option_applies(const run_option *o, const lb_run_config *rc)
{
    if (is_preset(o))
        return rc->preset[0] && lb_model_field_in_family(lb_model_field_find("norm"), rc->model.kind); /* its families */
    if (o->field)
        return lb_model_field_applies(o->field, &rc->model);
    return !o->train || lb_train_field_applies(o->train, &rc->train);
}

int lb_run_option_applies(const lb_run_config *rc, const char *name)
{
    const run_option *o = find_option(name);
    return o && option_applies(o, rc);
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

static json_object *option_json(const lb_run_config *rc, const run_option *ro)
{
    if (ro->field) {
        const lb_model_field *f = ro->field;
        const char *p = (const char *)&rc->model + f->offset;
        char text[64];
        switch (f->type) {
        case LB_FIELD_INT64: return json_object_new_int64(*(const int64_t *)p);
        case LB_FIELD_INT: return json_object_new_int64(*(const int *)p);
        case LB_FIELD_U64: return json_object_new_uint64(*(const uint64_t *)p);
        case LB_FIELD_REAL: return json_double(*(const double *)p);
        default: return json_object_new_string(lb_model_field_format(&rc->model, f, text, sizeof text));
        }
    }
    if (is_preset(ro))
        return json_object_new_string(rc->preset);
    if (!ro->train)
        return json_object_new_string(rc->data);
    const lb_train_field *o = ro->train;
    const char *p = (const char *)&rc->train + o->offset;
    switch (o->type) {
    case LB_TRAIN_INT64: return json_object_new_int64(*(const int64_t *)p);
    case LB_TRAIN_INT: return json_object_new_int64(*(const int *)p);
    case LB_TRAIN_U64: return json_object_new_uint64(*(const uint64_t *)p);
    case LB_TRAIN_REAL: return json_double(*(const double *)p);
    case LB_TRAIN_OPTIM: return json_object_new_string(lb_optim_kind_name(*(const lb_optim_kind *)p));
    case LB_TRAIN_SCHEDULE: return json_object_new_string(lb_schedule_kind_name(*(const lb_schedule_kind *)p));
    case LB_TRAIN_CLOCK: return json_object_new_string(lb_budget_clock_name(*(const lb_budget_clock *)p));
    case LB_TRAIN_SELECT: return json_object_new_string(lb_val_select_name(*(const lb_val_select *)p));
    case LB_TRAIN_DECAY: return json_object_new_string(lb_decay_params_name(*(const lb_decay_params *)p));
    case LB_TRAIN_WEIGHTS: {
        char text[LB_METRICS_MAX_CLASSES * 26];
        return json_object_new_string(lb_class_weight_format(&rc->train, text, sizeof text));
    }
    }
    return NULL;
}

static int option_is_number(const run_option *o)
{
    if (o->field)
        return o->field->type == LB_FIELD_INT64 || o->field->type == LB_FIELD_INT || o->field->type == LB_FIELD_U64 ||
               o->field->type == LB_FIELD_REAL;
    return o->train && (o->train->type == LB_TRAIN_INT64 || o->train->type == LB_TRAIN_INT ||
                        o->train->type == LB_TRAIN_U64 || o->train->type == LB_TRAIN_REAL);
}

lb_status lb_run_check_scored(const lb_dataset *data, const char *split)
{
    int64_t n = lb_dataset_split_size(data, split);
    if (n < 0)
        return lb_last_status();
    int64_t classes = lb_dataset_num_classes(data);
    if (n == 0 || lb_dataset_is_regression(data) || classes <= 0)
        return LB_OK;
    int64_t *counts = calloc((size_t)classes, sizeof *counts), ignored = 0, scored = 0;
    if (!counts)
        return lb_error(LB_ERR_MEMORY, "%s: out of memory counting the %s split's targets", lb_dataset_path(data), split);
    lb_status st = lb_dataset_label_histogram(data, split, counts, &ignored);
    for (int64_t c = 0; c < classes; c++)
        scored += counts[c];
    free(counts);
    if (st == LB_OK && scored == 0)
        st = lb_error(LB_ERR_VALUE, "%s: the %s split has no scored target (all %lld targets of its %lld examples are "
                      "-100, the ignore index): there is nothing to %s", lb_dataset_path(data), split,
                      (long long)ignored, (long long)n, strcmp(split, "train") == 0 ? "train on" : "score");
    return st;
}



lb_status lb_run_config_save_json(const lb_run_config *rc, const char *path, const lb_run_record *record)
{
    int n;
    const run_option *list = all_options(&n);
    json_object *root = json_object_new_object();
    for (int i = 0; i < n; i++)
        if (option_applies(&list[i], rc))
            json_object_object_add(root, list[i].name, option_json(rc, &list[i]));
    if (record) {
        json_object *r = json_object_new_object();
        char crc[16];
        snprintf(crc, sizeof crc, "%08x", (unsigned)record->data_crc32);
        json_object_object_add(r, "threads", json_object_new_int(record->threads));
        json_object_object_add(r, "version", json_object_new_string(record->version ? record->version : ""));
        json_object_object_add(r, "commit", json_object_new_string(record->commit ? record->commit : "unknown"));
        json_object_object_add(r, "data_task", json_object_new_string(record->data_task ? record->data_task : ""));
        json_object_object_add(r, "data_crc32", json_object_new_string(crc));
        json_object_object_add(r, "data_bytes", json_object_new_int64(record->data_bytes));
        /* the BLAS and kernels the run computed with (tensor/blas.h) */
        lb_blas_report blas;
        lb_blas_info(&blas);
        json_object *b = json_object_new_object();
        json_object_object_add(b, "library", json_object_new_string(blas.library));
        json_object_object_add(b, "version", json_object_new_string(blas.version));
        json_object_object_add(b, "core", json_object_new_string(blas.core));
        json_object_object_add(b, "core_detected", json_object_new_string(blas.core_detected));
        json_object_object_add(b, "core_choice", json_object_new_string(blas.core_choice_name));
        json_object_object_add(b, "cpu_isa", json_object_new_string(blas.cpu_isa));
        json_object_object_add(b, "threading", json_object_new_string(blas.threading));
        json_object_object_add(b, "blas_threads", json_object_new_int(blas.blas_threads));
        json_object_object_add(b, "attention_isa", json_object_new_string(blas.attention_isa));
        json_object_object_add(r, "blas", b);
        json_object_object_add(root, LB_CONFIG_RECORD_KEY, r);
    }
    return lb_files_write_json(root, path, "configuration");
}

/* The JSON string whose opening quote is at p, decoded by json-c (escapes such as \u0065
 * resolved) into buf; *has_nul is set when the decoded text holds a NUL character (json-c
 * would cut such an object key there). Returns the byte after its closing quote. */
static const char *json_string_text(const char *p, const char *end, char *buf, size_t size, int *has_nul)
{
    const char *q = p + 1;
    while (q < end && *q != '"')
        q += *q == '\\' && q + 1 < end ? 2 : 1;
    const char *after = q < end ? q + 1 : q;
    buf[0] = '\0';
    *has_nul = 0;
    json_tokener *tok = json_tokener_new();
    json_object *str = tok ? json_tokener_parse_ex(tok, p, (int)(after - p)) : NULL;
    json_tokener_free(tok);
    if (str && json_object_is_type(str, json_type_string)) {
        const char *text = json_object_get_string(str);
        size_t len = (size_t)json_object_get_string_len(str);
        *has_nul = strlen(text) != len;
        snprintf(buf, size, "%s", text);
    }
    json_object_put(str);
    return after;
}

/* 1 when an object of a valid JSON document holds one key twice (its decoded text copied
 * into `key`), 2 when a key holds a NUL character: the keys of every object are compared,
 * each object with its own. */
static int repeated_key(const char *text, size_t len, char *key, size_t size)
{
    enum { MAX_DEPTH = 32, MAX_KEYS = 512, KEY_BYTES = 256 };
    static char keys[MAX_KEYS][KEY_BYTES];
    int depth_start[MAX_DEPTH + 1], n_keys = 0, depth = 0, in_object[MAX_DEPTH + 1];
    const char *p = text, *end = text + len;
    int expect_key = 0;
    while (p < end) {
        char c = *p;
        if (c == '{' || c == '[') {
            if (depth < MAX_DEPTH) {
                depth++;
                in_object[depth] = c == '{';
                depth_start[depth] = n_keys;
            }
            expect_key = c == '{';
            p++;
        } else if (c == '}' || c == ']') {
            if (depth > 0)
                n_keys = depth_start[depth--];
            expect_key = 0;
            p++;
        } else if (c == ',') {
            expect_key = depth > 0 && in_object[depth];
            p++;
        } else if (c == '"') {
            char word[KEY_BYTES];
            int has_nul = 0;
            p = json_string_text(p, end, word, sizeof word, &has_nul);
            if (expect_key) {
                if (has_nul) {
                    snprintf(key, size, "%s", word);
                    return 2;
                }
                for (int k = depth_start[depth]; k < n_keys; k++)
                    if (strcmp(keys[k], word) == 0) {
                        snprintf(key, size, "%s", word);
                        return 1;
                    }
                if (n_keys < MAX_KEYS)
                    snprintf(keys[n_keys++], KEY_BYTES, "%s", word);
            }
            expect_key = 0;
        } else {
            p++;
        }
    }
    return 0;
}

/* Reads a whole JSON document strictly: no trailing text, no comments, no key twice in
 * one object. */
static json_object *read_json_strict(const char *path)
{
    /* Opened without waiting (a FIFO would block until a writer comes) and refused unless
     * a regular file: a device or FIFO named by mistake is one error line, not a hang. */
    int fd = open(path, O_RDONLY | O_NONBLOCK | O_CLOEXEC);
    struct stat sb;
    if (fd < 0) {
        lb_error(LB_ERR_IO, "%s: cannot open: %s", path, lb_system_error(errno));
        return NULL;
    }
    if (fstat(fd, &sb) != 0 || !S_ISREG(sb.st_mode)) {
        lb_error(LB_ERR_IO, "%s: not a regular file%s", path, S_ISDIR(sb.st_mode) ? " (a folder)" : "");
        close(fd);
        return NULL;
    }
    FILE *f = fdopen(fd, "r");
    if (!f) {
        lb_error(LB_ERR_IO, "%s: cannot read: %s", path, lb_system_error(errno));
        close(fd);
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
    char repeated[256];
    int key_fault = 0;
    if (!root || err != json_tokener_success || end != used) {
        lb_error(LB_ERR_FORMAT, "%s: not a valid JSON document (%s at byte %zu)", path,
                 root ? "text after the object" : json_tokener_error_desc(err), end);
        json_object_put(root);
        root = NULL;
    } else if ((key_fault = repeated_key(text, used, repeated, sizeof repeated)) != 0) {
        /* json-c keeps the last of two equal keys, and cuts a key at a NUL: either would
         * change an option without a word */
        if (key_fault == 1)
            lb_error(LB_ERR_VALUE, "%s: key '%s' is given twice; give it once", path, repeated);
        else
            lb_error(LB_ERR_VALUE, "%s: a key holds a NUL character (\\u0000 after '%s'); no option has one", path,
                     repeated);
        json_object_put(root);
        root = NULL;
    }
    json_tokener_free(tok);
    free(text);
    return root;
}

void lb_option_list_free(lb_option_list *list)
{
    for (int i = 0; i < list->n; i++)
        free(list->items[i].value);
    memset(list, 0, sizeof *list);
}

/* "--lr" for the command line, "'lr' in FILE" for a config file. */
static const char *item_label(const lb_option_item *it, char *buf, size_t size)
{
    if (it->source)
        snprintf(buf, size, "'%s' in %s", it->name, it->source);
    else
        snprintf(buf, size, "--%s", it->name);
    return buf;
}

lb_status lb_option_list_add(lb_option_list *list, const char *name, const char *value, const char *source)
{
    if (!find_option(name))
        return source ? lb_error(LB_ERR_VALUE, "%s: unknown key '%s'", source, name)
                      : lb_error(LB_ERR_VALUE, "unknown option '--%s'", name);
    for (int i = 0; i < list->n; i++)
        if (strcmp(list->items[i].name, name) == 0 && list->items[i].source == source)
            return source ? lb_error(LB_ERR_VALUE, "%s: key '%s' is given twice", source, name)
                          : lb_error(LB_ERR_VALUE, "--%s is given twice ('%s', then '%s'); give it once", name,
                                     list->items[i].value, value);
    if (list->n == LB_MAX_OPTION_ITEMS)
        return lb_error(LB_ERR_VALUE, "more than %d options", LB_MAX_OPTION_ITEMS);
    lb_option_item *it = &list->items[list->n];
    snprintf(it->name, sizeof it->name, "%s", name);
    it->source = source;
    if (!(it->value = strdup(value)))
        return lb_error(LB_ERR_MEMORY, "out of memory");
    list->n++;
    return LB_OK;
}

lb_status lb_option_list_read_json(lb_option_list *list, const char *path)
{
    json_object *root = read_json_strict(path);
    if (!root)
        return lb_last_status();
    if (!json_object_is_type(root, json_type_object)) {
        json_object_put(root);
        return lb_error(LB_ERR_FORMAT, "%s: expected a JSON object of {\"option\": value}", path);
    }
    lb_status st = LB_OK;
    json_object_object_foreach(root, key, val)
    {
        if (st != LB_OK)
            break;
        if (strcmp(key, LB_CONFIG_RECORD_KEY) == 0 && json_object_is_type(val, json_type_object))
            continue; /* what the run recorded about itself, not an option */
        const run_option *o = find_option(key);
        if (!o) {
            st = lb_error(LB_ERR_VALUE, "%s: unknown key '%s'", path, key);
            break;
        }
        int wants_string = !option_is_number(o);
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
        st = lb_option_list_add(list, key, text, path);
    }
    json_object_put(root);
    return st;
}

lb_status lb_run_config_apply(lb_run_config *rc, const lb_option_list *list)
{
    /* "model" first: it resets the model fields to that family's defaults. The last one given wins. */
    const lb_option_item *model = NULL;
    for (int i = 0; i < list->n; i++)
        if (strcmp(list->items[i].name, "model") == 0)
            model = &list->items[i];
    char label[4200];
    if (model && lb_run_config_set(rc, "model", model->value) != LB_OK)
        return model->source ? lb_error_context("%s", model->source) : lb_last_status();
    /* then the preset, which the list's own options override */
    const lb_option_item *preset = NULL;
    int d_ff_given = 0, ffn_given = 0;
    for (int i = 0; i < list->n; i++) {
        preset = strcmp(list->items[i].name, "preset") == 0 ? &list->items[i] : preset;
        d_ff_given |= strcmp(list->items[i].name, "d-ff") == 0;
        ffn_given |= strcmp(list->items[i].name, "ffn") == 0;
    }
    if (preset && lb_run_config_set(rc, "preset", preset->value) != LB_OK)
        return preset->source ? lb_error_context("%s", item_label(preset, label, sizeof label)) : lb_last_status();
    for (int i = 0; i < list->n; i++) {
        const lb_option_item *it = &list->items[i];
        if (strcmp(it->name, "model") != 0 && strcmp(it->name, "preset") != 0 &&
            lb_run_config_set(rc, it->name, it->value) != LB_OK)
            return it->source ? lb_error_context("%s", item_label(it, label, sizeof label)) : lb_last_status();
    }
    /* a gated feed-forward chosen here without its width: Llama's rule (layers/ffn.h) */
    if ((ffn_given || preset) && !d_ff_given && rc->model.ffn != LB_FFN_GELU)
        rc->model.d_ff = lb_ffn_gated_width(rc->model.d_model);
    return LB_OK;
}

/* Who uses an option, for messages: "local", "sgd", "the cosine schedule". */
static void users_of(const run_option *o, char *buf, size_t size)
{
    buf[0] = '\0';
    if (is_preset(o)) {
        snprintf(buf, size, "--model transformer and --model local");
        return;
    }
    if (o->field) {
        int n = 0, seen = 0;
        for (int k = 0; k < LB_MODEL_KIND_COUNT; k++)
            n += lb_model_field_in_family(o->field, lb_family_at(k)->kind);
        for (int k = 0; k < LB_MODEL_KIND_COUNT; k++)
            if (lb_model_field_in_family(o->field, lb_family_at(k)->kind)) {
                seen++;
                snprintf(buf + strlen(buf), size - strlen(buf), "%s--model %s",
                         seen == 1 ? "" : seen == n ? " and " : ", ", lb_family_at(k)->name);
            }
        return;
    }
    static const char *const names[] = {"every run", "--optim sgd", "--optim adam and adamw", "--schedule cosine",
                                        "--schedule step"};
    snprintf(buf, size, "%s", o->train ? names[o->train->when] : names[0]);
}

/* What in rc makes an option unused: "--model transformer", "--optim adamw". */
static void chosen(const run_option *o, const lb_run_config *rc, char *buf, size_t size)
{
    if (o->field || is_preset(o))
        snprintf(buf, size, "--model %s", lb_model_kind_name(rc->model.kind));
    else if (o->train && (o->train->when == LB_TRAIN_SGD || o->train->when == LB_TRAIN_ADAM))
        snprintf(buf, size, "--optim %s", lb_optim_kind_name(rc->train.optim.kind));
    else
        snprintf(buf, size, "--schedule %s", lb_schedule_kind_name(rc->train.schedule.kind));
}

/* 1 when rc holds the default of option o for rc's family, optimizer and schedule. */
static int holds_default(const run_option *o, const lb_run_config *rc)
{
    lb_run_config d;
    memset(&d, 0, sizeof d);
    lb_run_config_default(&d, rc->model.kind);
    if (rc->train.optim.kind != d.train.optim.kind)
        lb_run_config_set(&d, "optim", lb_optim_kind_name(rc->train.optim.kind));
    json_object *a = option_json(rc, o), *b = option_json(&d, o);
    int same = strcmp(json_object_get_string(a), json_object_get_string(b)) == 0;
    json_object_put(a);
    json_object_put(b);
    return same;
}

lb_status lb_run_config_check_used(const lb_run_config *rc, const lb_option_list *list)
{
    for (int i = 0; i < list->n; i++) {
        const lb_option_item *it = &list->items[i];
        const run_option *o = find_option(it->name);
        if (!o || option_applies(o, rc))
            continue;
        /* A config file may carry another family's field at its default: it changes nothing. */
        if (it->source && holds_default(o, rc))
            continue;
        char label[4200], users[128], why[96];
        users_of(o, users, sizeof users);
        chosen(o, rc, why, sizeof why);
        return lb_error(LB_ERR_VALUE, "%s does not apply to %s (only %s %s it); drop it",
                        item_label(it, label, sizeof label), why, users, strstr(users, " and ") ? "use" : "uses");
    }
    return LB_OK;
}

lb_status lb_run_config_load_json(lb_run_config *rc, const char *path)
{
    lb_option_list list;
    memset(&list, 0, sizeof list);
    lb_status st = lb_option_list_read_json(&list, path);
    if (st == LB_OK)
        st = lb_run_config_apply(rc, &list);
    lb_option_list_free(&list);
    return st;
}


const struct option *lb_run_options(const struct option *extra, int n_extra)
{
    static struct option all[MAX_OPTIONS + 64];
    int n_options;
    const run_option *list = all_options(&n_options);
    int n = 0;
    for (int i = 0; i < n_extra && n < 63; i++)
        all[n++] = extra[i];
    for (int i = 0; i < n_options; i++)
        all[n++] = (struct option){list[i].name, required_argument, NULL, OPTION_BASE + i};
    all[n] = (struct option){NULL, 0, NULL, 0};
    return all;
}

const char *lb_run_option_name(int val)
{
    int n;
    const run_option *list = all_options(&n);
    return val >= OPTION_BASE && val < OPTION_BASE + n ? list[val - OPTION_BASE].name : NULL;
}

/* The default as text; for a model field "2; conv 4" when a family's default differs. */
static void default_text(const run_option *o, char *buf, size_t size)
{
    lb_run_config rc;
    memset(&rc, 0, sizeof rc);
    lb_run_config_default(&rc, LB_MODEL_TRANSFORMER);
    json_object *v = option_json(&rc, o);
    snprintf(buf, size, "%s", json_object_get_string(v));
    json_object_put(v);
    if (!o->field || o->field->type == LB_FIELD_KIND)
        return;
    int first = 1;
    for (int k = 0; k < LB_MODEL_KIND_COUNT; k++) {
        const lb_family *fam = lb_family_at(k);
        if (!lb_model_field_in_family(o->field, fam->kind))
            continue;
        lb_run_config_default(&rc, fam->kind);
        char text[64];
        json_object *kv = option_json(&rc, o);
        snprintf(text, sizeof text, "%s", json_object_get_string(kv));
        json_object_put(kv);
        if (first) {
            snprintf(buf, size, "%s", text); /* the first family that uses it */
            first = 0;
        } else if (strncmp(buf, text, strlen(text)) != 0 || (buf[strlen(text)] && buf[strlen(text)] != ';')) {
            snprintf(buf + strlen(buf), size - strlen(buf), "; %s %s", fam->name, text);
        }
    }
}

void lb_run_options_help(FILE *out, int single_run)
{
    int n;
    const run_option *list = all_options(&n);
    for (int pass = 0; pass < 2; pass++) {
        fputs(pass == 0 ? "Model options ([families] that use them; others refuse them):\n" : "Training options:\n", out);
        for (int i = 0; i < n; i++) {
            const run_option *o = &list[i];
            int is_run_choice = strcmp(o->name, "data") == 0 || (o->field && o->field->type == LB_FIELD_KIND);
            if ((o->field != NULL || is_preset(o)) != (pass == 0) || (is_run_choice && !single_run))
                continue;
            if (is_preset(o)) {
                fprintf(out, "  --%-18s %s, set before the options beside it, which override it [transformer, local] "
                             "(default none)\n", o->name, lb_run_presets_text());
                continue;
            }
            char families[96] = "", def[96], help[160];
            if (o->field)
                lb_model_field_families(o->field, ", ", families, sizeof families);
            default_text(o, def, sizeof def);
            snprintf(help, sizeof help, "%s%s%s%s", o->field ? o->field->help : o->train ? o->train->help : data_help,
                     families[0] ? " [" : "", families, families[0] ? "]" : "");
            fprintf(out, "  --%-18s %s (default %s)\n", o->name, help, def);
        }
    }
}

int lb_run_option_is_model(const char *name)
{
    const run_option *o = name ? find_option(name) : NULL;
    return o && (o->field != NULL || is_preset(o));
}

int lb_run_option_resumable(const char *name)
{
    const lb_train_field *f = lb_train_field_find(name);
    return f && (f->flags & LB_TRAIN_RESUMABLE);
}

/* A reader's failure (config.json, a checkpoint) as LB_ERR_FORMAT, so that it is never
 * taken for a fault of the options; out of memory stays what it is. */
static lb_status read_failed(void)
{
    lb_status st = lb_last_status();
    return st == LB_ERR_VALUE ? lb_error(LB_ERR_FORMAT, "%s", lb_last_error()) : st;
}

/* --resume: DIR/config.json, the checkpoint's dtype and max_seq_len, and no option given
 * that may not change. */
static lb_status resume_rules(lb_run_config *rc, const lb_run_sources *src, const char *config_path,
                              const char *ckpt_path)
{
    if (!lb_files_exists(config_path))
        return lb_error(LB_ERR_VALUE, "%s holds no run to resume (no config.json)", src->dir);
    if (lb_run_config_load_json(rc, config_path) != LB_OK)
        return read_failed();
    /* No option sets these; a run started with --init-from may have any. */
    lb_model_config saved;
    if (lb_files_exists(ckpt_path)) {
        if (lb_checkpoint_read_model_config(ckpt_path, &saved) != LB_OK)
            return read_failed();
        rc->model.dtype = saved.dtype;
        rc->model.max_seq_len = saved.max_seq_len;
    }
    /* The same rule for the command line and a --config file. */
    const lb_option_list *lists[] = {src->file, src->given};
    for (int l = 0; l < 2; l++)
        for (int i = 0; i < lists[l]->n; i++) {
            const lb_option_item *it = &lists[l]->items[i];
            if (!lb_run_option_resumable(it->name))
                return lb_error(LB_ERR_VALUE, "%s%s%s cannot change when resuming (only --steps, --threads, "
                                "--time-budget, --eval-every, --eval-examples, --checkpoint-every, --patience, --max-skipped)",
                                it->source ? it->source : "--", it->source ? ": key " : "", it->name);
        }
    return LB_OK;
}

/* --init-from: the model options come from the checkpoint (its parameters are loaded
 * when the run starts); a --model naming another family is an error. */
static lb_status init_model_from(lb_run_config *rc, const lb_option_list *given, const char *path)
{
    lb_model_config saved;
    if (lb_checkpoint_read_model_config(path, &saved) != LB_OK)
        return lb_error(LB_ERR_FORMAT, "--init-from: %s", lb_last_error());
    for (int i = 0; i < given->n; i++)
        if (strcmp(given->items[i].name, "model") == 0 &&
            strcmp(given->items[i].value, lb_model_kind_name(saved.kind)) != 0)
            return lb_error(LB_ERR_VALUE, "--model %s differs from the %s model of --init-from %s (the model comes from the "
                            "checkpoint; drop --model)", given->items[i].value, lb_model_kind_name(saved.kind), path);
    if (strlen(path) >= sizeof rc->init_from)
        return lb_error(LB_ERR_VALUE, "--init-from: path too long");
    rc->model = saved;
    strcpy(rc->init_from, path);
    /* The model comes from the checkpoint: an option that would change it is a usage
     * error here, not a mismatch found when the parameters are loaded. */
    for (int i = 0; i < given->n; i++) {
        const char *name = given->items[i].name;
        if (lb_run_option_is_model(name) && strcmp(name, "model") != 0 && strcmp(name, "model-seed") != 0)
            return lb_error(LB_ERR_VALUE, "--%s cannot be given with --init-from: the model comes from the checkpoint "
                            "%s (drop --%s)", name, path, name);
    }
    return LB_OK;
}

lb_status lb_run_config_resolve(lb_run_config *rc, const lb_run_sources *src)
{
    LB_CHECK_ARG(rc && src && src->dir && src->file && src->given, LB_ERR_VALUE);
    char config_path[4200], ckpt_path[4200];
    lb_files_join(config_path, sizeof config_path, src->dir, "config.json");
    lb_files_join(ckpt_path, sizeof ckpt_path, src->dir, "checkpoint.h5");
    /* Defaults, then the run's config.json (resume), then --config, then the command line. */
    memset(rc, 0, sizeof *rc);
    lb_run_config_default(rc, LB_MODEL_TRANSFORMER);
    lb_status st = src->resume ? resume_rules(rc, src, config_path, ckpt_path) : LB_OK;
    if (st == LB_OK && lb_run_config_apply(rc, src->file) != LB_OK)
        st = lb_error(LB_ERR_VALUE, "%s", lb_last_error());
    if (st == LB_OK && src->init_from)
        st = init_model_from(rc, src->given, src->init_from);
    if (st == LB_OK && lb_run_config_apply(rc, src->given) != LB_OK)
        st = lb_error(LB_ERR_VALUE, "%s", lb_last_error());
    if (st == LB_OK && (lb_run_config_check_used(rc, src->file) != LB_OK || lb_run_config_check_used(rc, src->given) != LB_OK))
        st = lb_error(LB_ERR_VALUE, "%s", lb_last_error());
    if (st == LB_OK && !rc->data[0])
        st = lb_error(LB_ERR_VALUE, "--data FILE.h5 is required");
    /* a folder already holding a run, once the options are known to be valid (a usage
     * error is exit 2 whatever --out holds) */
    if (st == LB_OK && !src->resume && lb_files_exists(ckpt_path))
        st = lb_error(LB_ERR_STATE, "%s already holds a run; continue it with --resume %s or choose another --out",
                      src->dir, src->dir);
    return st;
}

void lb_run_config_name_options(char *message, size_t size)
{
    int n;
    const lb_model_field *fields = lb_model_fields(&n);
    char out[2048];
    size_t used = 0;
    const char *p = message;
    while (*p && used + 1 < sizeof out) {
        const lb_model_field *hit = NULL;
        int word_start = p == message || !(isalnum((unsigned char)p[-1]) || p[-1] == '_' || p[-1] == '-');
        for (int i = 0; word_start && !hit && i < n; i++) {
            size_t len = strlen(fields[i].member);
            if (fields[i].option && strncmp(p, fields[i].member, len) == 0 && strncmp(p + len, " = ", 3) == 0)
                hit = &fields[i];
        }
        if (hit) {
            int w = snprintf(out + used, sizeof out - used, "--%s ", hit->option);
            used += w > 0 && (size_t)w < sizeof out - used ? (size_t)w : 0;
            p += strlen(hit->member) + 3;
        } else {
            out[used++] = *p++;
        }
    }
    out[used] = '\0';
    snprintf(message, size, "%s", out);
}





lb_status lb_option_int(const char *option, const char *text, int64_t min, int64_t max, int64_t *out)
{
    char *end = NULL;
    errno = 0;
    long long v = text ? strtoll(text, &end, 10) : 0;
    if (!text || !*text || isspace((unsigned char)*text) || *end || errno == ERANGE)
        return lb_error(LB_ERR_VALUE, "%s expects a whole number, got '%s'", option, text ? text : "");
    if (v < min || v > max)
        return lb_error(LB_ERR_VALUE, "%s must be in [%lld, %lld], got %lld", option, (long long)min, (long long)max, v);
    *out = v;
    return LB_OK;
}

lb_status lb_option_real(const char *option, const char *text, double min, double max, double *out)
{
    char *end = NULL;
    errno = 0;
    double v = text ? strtod(text, &end) : 0;
    /* decimal only: strtod also reads hexadecimal ("0x10" = 16) */
    if (!text || !*text || isspace((unsigned char)*text) || *end || errno == ERANGE || !isfinite(v) ||
        strpbrk(text, "xX"))
        return lb_error(LB_ERR_VALUE, "%s expects a decimal number, got '%s'", option, text ? text : "");
    if (v < min || v > max)
        return lb_error(LB_ERR_VALUE, "%s must be in [%g, %g], got %g", option, min, max, v);
    *out = v;
    return LB_OK;
}

/* The events schema: options, JSON text (stored in data files and checkpoints), checks,
 * and its part of `data info`. The import and the row reader are in events.c. */
#include "data/events.h"
#include "data/tasks.h"
#include "tensor/names.h"

#include <json-c/json.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum { MAX_CLASSES = 1 << 20, MAX_COLUMNS = 1 << 16, MAX_INPUT_FEATURES = 1 << 20 };

void lb_csv_options_default(lb_csv_options *opt)
{
    LB_CHECK_ARG(opt);
    memset(opt, 0, sizeof *opt);
    opt->label_per = LB_LABEL_PER_EVENT;
    opt->seq_len = 64;
    opt->stride = 0;
    opt->split_by = LB_SPLIT_BY_TIME;
    opt->val_fraction = 0.15;
    opt->test_fraction = 0.15;
    opt->seed = 1;
    opt->missing = LB_MISSING_REFUSE;
    opt->short_policy = LB_SHORT_SKIP;
}

static const char *const label_per_names[] = {"event", "sequence"};
static const char *const split_by_names[] = {"time", "sequence"};
static const char *const missing_names[] = {"refuse", "skip", "previous"};
static const char *const short_names[] = {"skip", "refuse"};
static const char *const order_as_names[] = {"auto", "number", "text"};

lb_status lb_label_per_parse(const char *text, lb_label_per *out)
{
    LB_CHECK_ARG(out, LB_ERR_VALUE);
    int i = 0;
    lb_status st = lb_name_parse("--label-per", label_per_names, LB_COUNT_OF(label_per_names), text, 0, &i);
    if (st == LB_OK)
        *out = (lb_label_per)i;
    return st;
}
lb_status lb_split_by_parse(const char *text, lb_split_by *out)
{
    LB_CHECK_ARG(out, LB_ERR_VALUE);
    int i = 0;
    lb_status st = lb_name_parse("--split-by", split_by_names, LB_COUNT_OF(split_by_names), text, 0, &i);
    if (st == LB_OK)
        *out = (lb_split_by)i;
    return st;
}
lb_status lb_missing_parse(const char *text, lb_missing_policy *out)
{
    LB_CHECK_ARG(out, LB_ERR_VALUE);
    int i = 0;
    lb_status st = lb_name_parse("--missing", missing_names, LB_COUNT_OF(missing_names), text, 0, &i);
    if (st == LB_OK)
        *out = (lb_missing_policy)i;
    return st;
}
lb_status lb_short_parse(const char *text, lb_short_policy *out)
{
    LB_CHECK_ARG(out, LB_ERR_VALUE);
    int i = 0;
    lb_status st = lb_name_parse("--short", short_names, LB_COUNT_OF(short_names), text, 0, &i);
    if (st == LB_OK)
        *out = (lb_short_policy)i;
    return st;
}
lb_status lb_order_as_parse(const char *text, lb_order_as *out)
{
    LB_CHECK_ARG(out, LB_ERR_VALUE);
    int i = 0;
    lb_status st = lb_name_parse("--order-as", order_as_names, LB_COUNT_OF(order_as_names), text, 0, &i);
    if (st == LB_OK)
        *out = (lb_order_as)i;
    return st;
}

void lb_event_schema_free(lb_event_schema *s)
{
    if (!s)
        return;
    for (int64_t i = 0; i < s->n_keys; i++)
        free(s->sequence_key[i]);
    free(s->sequence_key);
    free(s->order_key);
    for (int64_t i = 0; i < s->n_features; i++)
        free(s->features[i].name);
    free(s->features);
    for (int64_t i = 0; i < s->n_tokens; i++) {
        for (int64_t v = 0; v < s->tokens[i].n_values; v++)
            free(s->tokens[i].values[v]);
        free(s->tokens[i].values);
        free(s->tokens[i].name);
    }
    free(s->tokens);
    free(s->label);
    free(s->source_file);
    free(s->train_labels);
    for (int k = 0; k < 3; k++) {
        for (int64_t i = 0; i < s->n_named[k]; i++)
            free(s->named[k][i]);
        free(s->named[k]);
    }
    free(s);
}

/* ---- to JSON ---- */

static json_object *str_or_null(const char *s) { return s ? json_object_new_string(s) : NULL; }

/* Doubles are written with 17 significant digits, so they read back bit for bit. */
static json_object *real(double v)
{
    char text[40];
    snprintf(text, sizeof text, "%.17g", v);
    return json_object_new_double_s(v, text);
}

static json_object *int_array(const int64_t *v, int n)
{
    json_object *a = json_object_new_array();
    for (int i = 0; i < n; i++)
        json_object_array_add(a, json_object_new_int64(v[i]));
    return a;
}

char *lb_event_schema_to_json(const lb_event_schema *s)
{
    LB_CHECK_ARG(s, NULL);
    json_object *o = json_object_new_object(), *keys = json_object_new_array();
    json_object_object_add(o, "format", json_object_new_string("lookback-events"));
    json_object_object_add(o, "version", json_object_new_int(1));
    for (int64_t i = 0; i < s->n_keys; i++)
        json_object_array_add(keys, json_object_new_string(s->sequence_key[i]));
    json_object_object_add(o, "sequence_key", keys);
    json_object_object_add(o, "order_key", str_or_null(s->order_key));
    json_object_object_add(o, "order_as", json_object_new_string(order_as_names[s->order_as]));
    json_object *feats = json_object_new_array();
    for (int64_t i = 0; i < s->n_features; i++) {
        const lb_event_feature *f = &s->features[i];
        json_object *fo = json_object_new_object();
        json_object_object_add(fo, "name", json_object_new_string(f->name));
        json_object_object_add(fo, "mean", real(f->mean));
        json_object_object_add(fo, "std", real(f->std));
        json_object_object_add(fo, "min", real(f->min));
        json_object_object_add(fo, "max", real(f->max));
        json_object_array_add(feats, fo);
    }
    json_object_object_add(o, "features", feats);
    json_object *toks = json_object_new_array();
    for (int64_t i = 0; i < s->n_tokens; i++) {
        json_object *to = json_object_new_object(), *vals = json_object_new_array();
        json_object_object_add(to, "name", json_object_new_string(s->tokens[i].name));
        for (int64_t v = 0; v < s->tokens[i].n_values; v++)
            json_object_array_add(vals, json_object_new_string(s->tokens[i].values[v]));
        json_object_object_add(to, "values", vals);
        json_object_array_add(toks, to);
    }
    json_object_object_add(o, "tokens", toks);
    json_object_object_add(o, "label", str_or_null(s->label));
    json_object_object_add(o, "label_per", json_object_new_string(label_per_names[s->label_per]));
    json_object_object_add(o, "num_classes", json_object_new_int64(s->num_classes));
    json_object_object_add(o, "seq_len", json_object_new_int64(s->seq_len));
    json_object_object_add(o, "stride", json_object_new_int64(s->stride));
    json_object_object_add(o, "input_features", json_object_new_int64(s->input_features));
    json_object_object_add(o, "source_file", str_or_null(s->source_file));
    json_object_object_add(o, "split_by", json_object_new_string(split_by_names[s->split_by]));
    json_object_object_add(o, "val_fraction", real(s->val_fraction));
    json_object_object_add(o, "test_fraction", real(s->test_fraction));
    json_object_object_add(o, "seed", json_object_new_uint64(s->seed));
    json_object_object_add(o, "missing", json_object_new_string(missing_names[s->missing]));
    json_object_object_add(o, "short", json_object_new_string(short_names[s->short_policy]));
    json_object_object_add(o, "rows", json_object_new_int64(s->rows));
    json_object_object_add(o, "rows_skipped", json_object_new_int64(s->rows_skipped));
    json_object_object_add(o, "sources", json_object_new_int64(s->sources));
    json_object_object_add(o, "sources_split", int_array(s->sources_split, 3));
    json_object_object_add(o, "segments_short", json_object_new_int64(s->segments_short));
    json_object_object_add(o, "windows", int_array(s->windows, 3));
    json_object_object_add(o, "train_labels", int_array(s->train_labels, (int)s->num_classes));
    json_object *named = json_object_new_array();
    for (int k = 0; k < 3; k++) {
        json_object *a = json_object_new_array();
        for (int64_t i = 0; i < s->n_named[k]; i++)
            json_object_array_add(a, json_object_new_string(s->named[k][i]));
        json_object_array_add(named, a);
    }
    json_object_object_add(o, "sources_named", named);
    const char *text = json_object_to_json_string_ext(o, JSON_C_TO_STRING_PLAIN);
    char *copy = text ? strdup(text) : NULL;
    json_object_put(o);
    if (!copy)
        lb_error(LB_ERR_MEMORY, "events schema: out of memory");
    return copy;
}

/* ---- from JSON, checked ---- */

typedef struct jreader {
    const char *file;
    lb_status st;
} jreader;

static json_object *member(jreader *j, json_object *o, const char *name, json_type type, int nullable)
{
    if (j->st != LB_OK)
        return NULL;
    json_object *m = NULL;
    if (!json_object_object_get_ex(o, name, &m)) {
        j->st = lb_error(LB_ERR_FORMAT, "%s: events schema: member '%s' is missing", j->file, name);
        return NULL;
    }
    if (!m && nullable)
        return NULL;
    int ok = m && (json_object_is_type(m, type) ||
                   (type == json_type_double && json_object_is_type(m, json_type_int)));
    if (!ok)
        j->st = lb_error(LB_ERR_FORMAT, "%s: events schema: member '%s' is not a%s %s", j->file, name,
                         type == json_type_array || type == json_type_object || type == json_type_int ? "n" : "",
                         json_type_to_name(type));
    return ok ? m : NULL;
}

static char *member_str(jreader *j, json_object *o, const char *name, int nullable)
{
    json_object *m = member(j, o, name, json_type_string, nullable);
    if (!m)
        return NULL;
    char *s = strdup(json_object_get_string(m));
    if (!s && j->st == LB_OK)
        j->st = lb_error(LB_ERR_MEMORY, "%s: out of memory", j->file);
    return s;
}

static int64_t member_int(jreader *j, json_object *o, const char *name, int64_t lo, int64_t hi)
{
    json_object *m = member(j, o, name, json_type_int, 0);
    if (!m)
        return 0;
    int64_t v = json_object_get_int64(m);
    if (v < lo || v > hi) {
        j->st = lb_error(LB_ERR_FORMAT, "%s: events schema: %s = %lld is outside [%lld, %lld]", j->file, name,
                         (long long)v, (long long)lo, (long long)hi);
        return 0;
    }
    return v;
}

static double member_real(jreader *j, json_object *o, const char *name)
{
    json_object *m = member(j, o, name, json_type_double, 0);
    double v = m ? json_object_get_double(m) : 0;
    if (m && !isfinite(v))
        j->st = lb_error(LB_ERR_FORMAT, "%s: events schema: %s is not finite", j->file, name);
    return v;
}

static int member_word(jreader *j, json_object *o, const char *name, const char *const *names, int n)
{
    json_object *m = member(j, o, name, json_type_string, 0);
    if (!m)
        return 0;
    int i = 0;
    if (lb_name_parse(name, names, n, json_object_get_string(m), 0, &i) != LB_OK) {
        j->st = lb_error(LB_ERR_FORMAT, "%s: events schema: %s '%s' is not one of the known values", j->file, name,
                         json_object_get_string(m));
        return 0;
    }
    return i;
}

static void member_ints(jreader *j, json_object *o, const char *name, int64_t *v, int n)
{
    json_object *m = member(j, o, name, json_type_array, 0);
    if (m && (int)json_object_array_length(m) != n)
        j->st = lb_error(LB_ERR_FORMAT, "%s: events schema: %s must hold %d numbers", j->file, name, n);
    for (int i = 0; j->st == LB_OK && m && i < n; i++) {
        json_object *e = json_object_array_get_idx(m, (size_t)i);
        if (!json_object_is_type(e, json_type_int) || json_object_get_int64(e) < 0)
            j->st = lb_error(LB_ERR_FORMAT, "%s: events schema: %s[%d] is not a whole number >= 0", j->file, name, i);
        else
            v[i] = json_object_get_int64(e);
    }
}

static char **string_array(jreader *j, json_object *a, const char *name, int64_t *count)
{
    *count = 0;
    if (!a || j->st != LB_OK)
        return NULL;
    size_t n = json_object_array_length(a);
    if (n > (size_t)(1 << 24)) {
        j->st = lb_error(LB_ERR_FORMAT, "%s: events schema: %s holds too many entries", j->file, name);
        return NULL;
    }
    char **v = calloc(n ? n : 1, sizeof *v);
    if (!v) {
        j->st = lb_error(LB_ERR_MEMORY, "%s: out of memory", j->file);
        return NULL;
    }
    for (size_t i = 0; i < n && j->st == LB_OK; i++) {
        json_object *e = json_object_array_get_idx(a, i);
        if (!json_object_is_type(e, json_type_string))
            j->st = lb_error(LB_ERR_FORMAT, "%s: events schema: %s[%zu] is not a string", j->file, name, i);
        else if (!(v[i] = strdup(json_object_get_string(e))))
            j->st = lb_error(LB_ERR_MEMORY, "%s: out of memory", j->file);
        *count = (int64_t)i + 1;
    }
    return v;
}

lb_event_schema *lb_event_schema_from_json(const char *json, size_t len, const char *file)
{
    if (!file)
        file = "events schema";
    if (!json) {
        lb_error(LB_ERR_VALUE, "lb_event_schema_from_json: json is NULL");
        return NULL;
    }
    json_tokener *tok = json_tokener_new();
    json_object *o = tok ? json_tokener_parse_ex(tok, json, (int)(len > (size_t)INT32_MAX ? INT32_MAX : len)) : NULL;
    int complete = tok && json_tokener_get_error(tok) == json_tokener_success &&
                   (size_t)json_tokener_get_parse_end(tok) == len;
    if (tok)
        json_tokener_free(tok);
    if (!o || !complete || !json_object_is_type(o, json_type_object)) {
        json_object_put(o);
        lb_error(LB_ERR_FORMAT, "%s: events schema: not a JSON object", file);
        return NULL;
    }
    lb_event_schema *s = calloc(1, sizeof *s);
    jreader j = {file, s ? LB_OK : lb_error(LB_ERR_MEMORY, "%s: out of memory", file)};
    char *format = s ? member_str(&j, o, "format", 0) : NULL;
    if (j.st == LB_OK && strcmp(format, "lookback-events") != 0)
        j.st = lb_error(LB_ERR_FORMAT, "%s: events schema: format '%s' is not lookback-events", file, format);
    free(format);
    member_int(&j, o, "version", 1, 1);
    if (j.st == LB_OK) {
        s->sequence_key = string_array(&j, member(&j, o, "sequence_key", json_type_array, 0), "sequence_key", &s->n_keys);
        s->order_key = member_str(&j, o, "order_key", 1);
        if (json_object_object_get_ex(o, "order_as", NULL)) /* absent in schemas written before it */
            s->order_as = (lb_order_as)member_word(&j, o, "order_as", order_as_names, 3);
    }
    json_object *feats = member(&j, o, "features", json_type_array, 0);
    size_t nf = feats ? json_object_array_length(feats) : 0;
    if (j.st == LB_OK && nf > MAX_COLUMNS)
        j.st = lb_error(LB_ERR_FORMAT, "%s: events schema: more than %d features", file, MAX_COLUMNS);
    if (j.st == LB_OK && nf && !(s->features = calloc(nf, sizeof *s->features)))
        j.st = lb_error(LB_ERR_MEMORY, "%s: out of memory", file);
    for (size_t i = 0; j.st == LB_OK && i < nf; i++) {
        json_object *fo = json_object_array_get_idx(feats, i);
        lb_event_feature *f = &s->features[i];
        s->n_features = (int64_t)i + 1;
        if (!json_object_is_type(fo, json_type_object)) {
            j.st = lb_error(LB_ERR_FORMAT, "%s: events schema: features[%zu] is not an object", file, i);
            break;
        }
        f->name = member_str(&j, fo, "name", 0);
        f->mean = member_real(&j, fo, "mean");
        f->std = member_real(&j, fo, "std");
        f->min = member_real(&j, fo, "min");
        f->max = member_real(&j, fo, "max");
        if (j.st == LB_OK && !(f->std > 0))
            j.st = lb_error(LB_ERR_FORMAT, "%s: events schema: feature '%s' has std %g (must be > 0)", file, f->name,
                            f->std);
    }
    json_object *toks = member(&j, o, "tokens", json_type_array, 0);
    size_t nt = toks ? json_object_array_length(toks) : 0;
    if (j.st == LB_OK && nt > MAX_COLUMNS)
        j.st = lb_error(LB_ERR_FORMAT, "%s: events schema: more than %d token columns", file, MAX_COLUMNS);
    if (j.st == LB_OK && nt && !(s->tokens = calloc(nt, sizeof *s->tokens)))
        j.st = lb_error(LB_ERR_MEMORY, "%s: out of memory", file);
    int64_t width = s ? s->n_features : 0;
    for (size_t i = 0; j.st == LB_OK && i < nt; i++) {
        json_object *to = json_object_array_get_idx(toks, i);
        s->n_tokens = (int64_t)i + 1;
        if (!json_object_is_type(to, json_type_object)) {
            j.st = lb_error(LB_ERR_FORMAT, "%s: events schema: tokens[%zu] is not an object", file, i);
            break;
        }
        s->tokens[i].name = member_str(&j, to, "name", 0);
        s->tokens[i].values = string_array(&j, member(&j, to, "values", json_type_array, 0), "values",
                                           &s->tokens[i].n_values);
        width += s->tokens[i].n_values + 1;
    }
    if (j.st == LB_OK) {
        s->label = member_str(&j, o, "label", 1);
        s->label_per = (lb_label_per)member_word(&j, o, "label_per", label_per_names, 2);
        s->num_classes = member_int(&j, o, "num_classes", 2, MAX_CLASSES);
        s->seq_len = member_int(&j, o, "seq_len", 1, LB_DATA_MAX_SEQ_LEN);
        s->stride = member_int(&j, o, "stride", 1, LB_DATA_MAX_SEQ_LEN);
        s->input_features = member_int(&j, o, "input_features", 1, MAX_INPUT_FEATURES);
        s->source_file = member_str(&j, o, "source_file", 1);
        s->split_by = (lb_split_by)member_word(&j, o, "split_by", split_by_names, 2);
        s->val_fraction = member_real(&j, o, "val_fraction");
        s->test_fraction = member_real(&j, o, "test_fraction");
        json_object *seed = member(&j, o, "seed", json_type_int, 0);
        s->seed = seed ? json_object_get_uint64(seed) : 0;
        s->missing = (lb_missing_policy)member_word(&j, o, "missing", missing_names, 3);
        s->short_policy = (lb_short_policy)member_word(&j, o, "short", short_names, 2);
        s->rows = member_int(&j, o, "rows", 0, INT64_MAX);
        s->rows_skipped = member_int(&j, o, "rows_skipped", 0, INT64_MAX);
        s->sources = member_int(&j, o, "sources", 0, INT64_MAX);
        member_ints(&j, o, "sources_split", s->sources_split, 3);
        s->segments_short = member_int(&j, o, "segments_short", 0, INT64_MAX);
        member_ints(&j, o, "windows", s->windows, 3);
        if (j.st == LB_OK && !(s->train_labels = calloc((size_t)s->num_classes, sizeof *s->train_labels)))
            j.st = lb_error(LB_ERR_MEMORY, "%s: out of memory", file);
        member_ints(&j, o, "train_labels", s->train_labels, (int)s->num_classes);
        json_object *named = member(&j, o, "sources_named", json_type_array, 0);
        if (j.st == LB_OK && json_object_array_length(named) != 3)
            j.st = lb_error(LB_ERR_FORMAT, "%s: events schema: sources_named must hold 3 lists", file);
        for (int k = 0; j.st == LB_OK && k < 3; k++) {
            json_object *a = json_object_array_get_idx(named, (size_t)k);
            if (!json_object_is_type(a, json_type_array))
                j.st = lb_error(LB_ERR_FORMAT, "%s: events schema: sources_named[%d] is not an array", file, k);
            else
                s->named[k] = string_array(&j, a, "sources_named", &s->n_named[k]);
        }
    }
    if (j.st == LB_OK && s->n_features + s->n_tokens == 0)
        j.st = lb_error(LB_ERR_FORMAT, "%s: events schema: no feature and no token column", file);
    if (j.st == LB_OK && width != s->input_features)
        j.st = lb_error(LB_ERR_FORMAT,
                        "%s: events schema: input_features %lld does not match its columns (%lld features + the "
                        "token slots = %lld)",
                        file, (long long)s->input_features, (long long)s->n_features, (long long)width);
    json_object_put(o);
    if (j.st != LB_OK) {
        lb_event_schema_free(s);
        return NULL;
    }
    return s;
}

static int same_str(const char *a, const char *b) { return (!a && !b) || (a && b && strcmp(a, b) == 0); }

int lb_event_schema_same_reading(const lb_event_schema *a, const lb_event_schema *b, char *why, size_t size)
{
    char local[8];
    if (!why) {
        why = local;
        size = sizeof local;
    }
    why[0] = '\0';
    if (!a || !b) {
        snprintf(why, size, "one of them is not an events file");
        lb_error(LB_ERR_VALUE, "lb_event_schema_same_reading: a schema is NULL");
        return 0;
    }
#define DIFF(...)                                                                                                     \
    do {                                                                                                              \
        snprintf(why, size, __VA_ARGS__);                                                                             \
        return 0;                                                                                                     \
    } while (0)
    if (a->n_keys != b->n_keys)
        DIFF("the sequence key has %lld columns, not %lld", (long long)b->n_keys, (long long)a->n_keys);
    for (int64_t i = 0; i < a->n_keys; i++)
        if (!same_str(a->sequence_key[i], b->sequence_key[i]))
            DIFF("sequence key column '%s', not '%s'", b->sequence_key[i], a->sequence_key[i]);
    if (a->n_features != b->n_features)
        DIFF("%lld numeric features, not %lld", (long long)b->n_features, (long long)a->n_features);
    for (int64_t i = 0; i < a->n_features; i++) {
        const lb_event_feature *x = &a->features[i], *y = &b->features[i];
        if (!same_str(x->name, y->name))
            DIFF("feature %lld is '%s', not '%s'", (long long)i + 1, y->name, x->name);
        if (memcmp(&x->mean, &y->mean, sizeof x->mean) != 0 || memcmp(&x->std, &y->std, sizeof x->std) != 0)
            DIFF("feature '%s' is scaled with mean %.17g, std %.17g, not mean %.17g, std %.17g", x->name, y->mean,
                 y->std, x->mean, x->std);
    }
    if (a->n_tokens != b->n_tokens)
        DIFF("%lld token columns, not %lld", (long long)b->n_tokens, (long long)a->n_tokens);
    for (int64_t i = 0; i < a->n_tokens; i++) {
        const lb_event_tokens *x = &a->tokens[i], *y = &b->tokens[i];
        if (!same_str(x->name, y->name) || x->n_values != y->n_values)
            DIFF("token column %lld ('%s', %lld values) differs from '%s' (%lld values)", (long long)i + 1, y->name,
                 (long long)y->n_values, x->name, (long long)x->n_values);
        for (int64_t v = 0; v < x->n_values; v++)
            if (!same_str(x->values[v], y->values[v]))
                DIFF("token column '%s' maps '%s' to id %lld, not '%s'", x->name, y->values[v], (long long)v + 1,
                     x->values[v]);
    }
    if (a->label_per != b->label_per)
        DIFF("labels per %s, not per %s", label_per_names[b->label_per], label_per_names[a->label_per]);
    if (a->num_classes != b->num_classes)
        DIFF("%lld classes, not %lld", (long long)b->num_classes, (long long)a->num_classes);
#undef DIFF
    return 1;
}

/* ---- data info ---- */

void lb_event_schema_print(const lb_event_schema *s, FILE *out)
{
    LB_CHECK_ARG(s);
    LB_CHECK_ARG(out);
    fprintf(out, "events    from %s: %lld rows imported", s->source_file ? s->source_file : "(unknown)",
            (long long)s->rows);
    if (s->rows_skipped)
        fprintf(out, ", %lld rows with missing values left out", (long long)s->rows_skipped);
    fputc('\n', out);
    fputs("          sequence key ", out);
    if (s->n_keys == 0)
        fputs("(none: one source)", out);
    for (int64_t i = 0; i < s->n_keys; i++)
        fprintf(out, "%s%s", i ? "," : "", s->sequence_key[i]);
    fprintf(out, ", order key %s%s%s, label %s per %s (%lld classes)\n", s->order_key ? s->order_key : "(file order)",
            s->order_key && s->order_as != LB_ORDER_AUTO ? " as " : "",
            s->order_key && s->order_as != LB_ORDER_AUTO ? order_as_names[s->order_as] : "", s->label ? s->label : "(none)", label_per_names[s->label_per], (long long)s->num_classes);
    fprintf(out, "          windows of seq_len %lld every %lld rows; split by %s (val %g, test %g", (long long)s->seq_len,
            (long long)s->stride, split_by_names[s->split_by], s->val_fraction, s->test_fraction);
    if (s->split_by == LB_SPLIT_BY_SEQUENCE)
        fprintf(out, ", seed %llu", (unsigned long long)s->seed);
    fprintf(out, "); missing values: %s; short segments: %s\n", missing_names[s->missing], short_names[s->short_policy]);
    fprintf(out, "sources   %lld; with windows in train %lld, val %lld, test %lld; %lld split segments shorter than "
                 "a window (no window)\n",
            (long long)s->sources, (long long)s->sources_split[0], (long long)s->sources_split[1],
            (long long)s->sources_split[2], (long long)s->segments_short);
    static const char *const split_label[3] = {"train", "val", "test"};
    for (int k = 0; k < 3; k++) {
        if (s->n_named[k] == 0)
            continue;
        fprintf(out, "  %-5s", split_label[k]);
        for (int64_t i = 0; i < s->n_named[k]; i++)
            fprintf(out, "%s%s", i ? ", " : " ", s->named[k][i]);
        fputs(s->n_named[k] < s->sources_split[k] ? ", ...\n" : "\n", out);
    }
    fprintf(out, "windows   train %lld, val %lld, test %lld\n", (long long)s->windows[0], (long long)s->windows[1],
            (long long)s->windows[2]);
    fprintf(out, "inputs    %lld per row: %lld numeric features, then one-hot token slots (slot 0 of each = a value "
                 "unseen in training)\n",
            (long long)s->input_features, (long long)s->n_features);
    for (int64_t i = 0; i < s->n_tokens; i++) {
        fprintf(out, "  token %-12s %lld values seen in training:", s->tokens[i].name, (long long)s->tokens[i].n_values);
        for (int64_t v = 0; v < s->tokens[i].n_values && v < 8; v++)
            fprintf(out, " %s=%lld", s->tokens[i].values[v], (long long)v + 1);
        fputs(s->tokens[i].n_values > 8 ? " ...\n" : "\n", out);
    }
}

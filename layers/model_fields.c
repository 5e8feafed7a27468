/* The model configuration's field list (layers/model_fields.def) as data, and the
 * operations every reader of a configuration shares: defaults, parsing from text,
 * formatting, applicability per family and range checks. */
#include <ctype.h>
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "layers/model.h"
#include "layers/family.h"

static const lb_model_field fields[] = {
#define LB_MODEL_FIELD(member, option, type, families, when, def, min, max, flags, help)                        \
    {#member, option, LB_FIELD_##type, (unsigned)(families), (double)(min), (double)(max), (unsigned)(flags), help, \
     offsetof(lb_model_config, member)},
#include "layers/model_fields.def"
#undef LB_MODEL_FIELD
};
enum { N_FIELDS = sizeof fields / sizeof fields[0] };

const lb_model_field *lb_model_fields(int *count)
{
    if (count)
        *count = N_FIELDS;
    return fields;
}

void lb_model_config_default(lb_model_kind kind, lb_model_config *cfg)
{
    LB_CHECK_ARG(cfg);
    memset(cfg, 0, sizeof *cfg);
#define LB_MODEL_FIELD(member, option, type, families, when, def, min, max, flags, help) \
    cfg->member = (LB_FIELD_CTYPE_##type)(def);
#include "layers/model_fields.def"
#undef LB_MODEL_FIELD
    const lb_family *f = lb_family_at((int)kind);
    if (f && f->defaults)
        f->defaults(cfg);
}

int lb_model_kv_heads(const lb_model_config *cfg)
{
    LB_CHECK_ARG(cfg, 0);
    return cfg->n_kv_heads > 0 ? cfg->n_kv_heads : cfg->n_heads;
}

const lb_model_field *lb_model_field_find(const char *name)
{
    LB_CHECK_ARG(name, NULL);
    for (int i = 0; name && i < N_FIELDS; i++)
        if (fields[i].option && strcmp(fields[i].option, name) == 0)
            return &fields[i];
    for (int i = 0; name && i < N_FIELDS; i++)
        if (strcmp(fields[i].member, name) == 0)
            return &fields[i];
    return NULL;
}

int lb_model_field_in_family(const lb_model_field *f, lb_model_kind kind)
{
    LB_CHECK_ARG(f, -1);
    return kind >= 0 && kind < LB_MODEL_KIND_COUNT && (f->families & (1u << kind)) != 0;
}

/* The `when` column: the condition under which a field of the family is used. */
static int field_condition(const lb_model_field *f, const lb_model_config *c)
{
    (void)c;
#define LB_MODEL_FIELD(member, option, type, families, when, def, min, max, flags, help) \
    if (f->offset == offsetof(lb_model_config, member))                                   \
        return (when) != 0;
#include "layers/model_fields.def"
#undef LB_MODEL_FIELD
    return 1;
}

int lb_model_field_applies(const lb_model_field *f, const lb_model_config *cfg)
{
    LB_CHECK_ARG(f, 0);
    LB_CHECK_ARG(cfg, 0);
    return lb_model_field_in_family(f, cfg->kind) && field_condition(f, cfg);
}

/* "--d-model" for options, "max_seq_len" for fields the program sets. */
static const char *field_label(const lb_model_field *f, char *buf, size_t size)
{
    if (f->option)
        snprintf(buf, size, "--%s", f->option);
    else
        snprintf(buf, size, "%s", f->member);
    return buf;
}

static const char *const head_names[] = {"last", "every"};
static const char *const dtype_names[] = {"float32", "float64"};


static lb_status parse_name(const char *label, const char *text, const char *const *names, int n, int *out)
{
    for (int i = 0; i < n; i++)
        if (strcmp(text, names[i]) == 0) {
            *out = i;
            return LB_OK;
        }
    char list[128] = "";
    for (int i = 0; i < n; i++)
        snprintf(list + strlen(list), sizeof list - strlen(list), "%s%s", i ? ", " : "", names[i]);
    return lb_error(LB_ERR_VALUE, "%s: '%s' is not one of %s", label, text, list);
}

/* A range bound as text: whole numbers in full for the integer fields (a bound of
 * INT64_MAX is stored as the double 2^63, one past it, and printed as INT64_MAX), the
 * shortest form for real fields. */
static const char *bound_text(const lb_model_field *f, double bound, char *buf, size_t size)
{
    if (f->type == LB_FIELD_REAL)
        snprintf(buf, size, "%g", bound);
    else if (bound >= 0x1p63)
        snprintf(buf, size, "%lld", (long long)INT64_MAX);
    else if (bound <= -0x1p63)
        snprintf(buf, size, "%lld", (long long)INT64_MIN);
    else
        snprintf(buf, size, "%lld", (long long)bound);
    return buf;
}

lb_status lb_model_field_set(lb_model_config *cfg, const lb_model_field *f, const char *text)
{
    LB_CHECK_ARG(cfg, LB_ERR_VALUE);
    LB_CHECK_ARG(f, LB_ERR_VALUE);
    LB_CHECK_ARG(text, LB_ERR_VALUE);
    char lo[32], hi[32];
    char label[64];
    field_label(f, label, sizeof label);
    if (!cfg || !f || !text)
        return lb_error(LB_ERR_VALUE, "%s: no value", label);
    char *p = (char *)cfg + f->offset, *end = NULL;
    int index = 0;
    lb_status st = LB_OK;
    errno = 0;
    switch (f->type) {
    case LB_FIELD_INT64:
    case LB_FIELD_INT:
    case LB_FIELD_U64: {
        long long v = strtoll(text, &end, 10);
        if (!*text || isspace((unsigned char)*text) || *end || errno == ERANGE)
            return lb_error(LB_ERR_VALUE, "%s expects a whole number, got '%s'", label, text);
        if ((double)v < f->min || (double)v > f->max)
            return lb_error(LB_ERR_VALUE, "%s must be in [%s, %s], got %lld", label, bound_text(f, f->min, lo, sizeof lo),
                            bound_text(f, f->max, hi, sizeof hi), v);
        if (f->type == LB_FIELD_INT64)
            *(int64_t *)p = v;
        else if (f->type == LB_FIELD_INT)
            *(int *)p = (int)v;
        else
            *(uint64_t *)p = (uint64_t)v;
        return LB_OK;
    }
    case LB_FIELD_REAL: {
        double v = strtod(text, &end);
        /* decimal only: strtod also reads hexadecimal ("0x10" = 16) */
        if (!*text || isspace((unsigned char)*text) || *end || errno == ERANGE || !isfinite(v) || strpbrk(text, "xX"))
            return lb_error(LB_ERR_VALUE, "%s expects a decimal number, got '%s'", label, text);
        if (v < f->min || v > f->max)
            return lb_error(LB_ERR_VALUE, "%s must be in [%s, %s], got %g", label, bound_text(f, f->min, lo, sizeof lo),
                            bound_text(f, f->max, hi, sizeof hi), v);
        *(double *)p = v;
        return LB_OK;
    }
    case LB_FIELD_KIND: {
        lb_model_kind kind;
        if ((st = lb_model_kind_parse(text, &kind)) == LB_OK)
            *(lb_model_kind *)p = kind;
        else
            lb_error_context("%s", label);
        return st;
    }
    case LB_FIELD_POS: {
        lb_pos_kind pos;
        if ((st = lb_pos_kind_parse(text, &pos)) == LB_OK)
            *(lb_pos_kind *)p = pos;
        else
            lb_error_context("%s", label);
        return st;
    }
    case LB_FIELD_SCALE: {
        lb_length_scale scale;
        if ((st = lb_length_scale_parse(text, &scale)) == LB_OK)
            *(lb_length_scale *)p = scale;
        else
            lb_error_context("%s", label);
        return st;
    }
    case LB_FIELD_INITIALIZER: {
        lb_init_scheme scheme;
        if ((st = lb_init_scheme_parse(text, &scheme)) == LB_OK)
            *(lb_init_scheme *)p = scheme;
        else
            lb_error_context("%s", label);
        return st;
    }
    case LB_FIELD_NORM: {
        lb_norm_kind norm;
        if ((st = lb_norm_kind_parse(text, &norm)) == LB_OK)
            *(lb_norm_kind *)p = norm;
        else
            lb_error_context("%s", label);
        return st;
    }
    case LB_FIELD_NORM_POSITION: {
        lb_norm_position position;
        if ((st = lb_norm_position_parse(text, &position)) == LB_OK)
            *(lb_norm_position *)p = position;
        else
            lb_error_context("%s", label);
        return st;
    }
    case LB_FIELD_FFN: {
        lb_ffn_kind ffn;
        if ((st = lb_ffn_kind_parse(text, &ffn)) == LB_OK)
            *(lb_ffn_kind *)p = ffn;
        else
            lb_error_context("%s", label);
        return st;
    }
    case LB_FIELD_HEAD:
        if ((st = parse_name(label, text, head_names, 2, &index)) == LB_OK)
            *(lb_head_kind *)p = (lb_head_kind)index;
        return st;
    case LB_FIELD_DTYPE:
        if ((st = parse_name(label, text, dtype_names, 2, &index)) == LB_OK)
            *(lb_dtype *)p = (lb_dtype)index;
        return st;
    }
    return lb_error(LB_ERR_VALUE, "%s: unknown field type", label);
}

char *lb_model_field_format(const lb_model_config *cfg, const lb_model_field *f, char *buf, size_t size)
{
    LB_CHECK_ARG(cfg, NULL);
    LB_CHECK_ARG(f, NULL);
    LB_CHECK_ARG(buf, NULL);
    const char *p = (const char *)cfg + f->offset;
    switch (f->type) {
    case LB_FIELD_INT64: snprintf(buf, size, "%lld", (long long)*(const int64_t *)p); break;
    case LB_FIELD_INT: snprintf(buf, size, "%d", *(const int *)p); break;
    case LB_FIELD_U64: snprintf(buf, size, "%llu", (unsigned long long)*(const uint64_t *)p); break;
    case LB_FIELD_REAL: {
        double v = *(const double *)p;
        for (int precision = 6; precision <= 17; precision++) {
            snprintf(buf, size, "%.*g", precision, v);
            if (strtod(buf, NULL) == v)
                break;
        }
        break;
    }
    case LB_FIELD_KIND: snprintf(buf, size, "%s", lb_model_kind_name(*(const lb_model_kind *)p)); break;
    case LB_FIELD_POS: snprintf(buf, size, "%s", lb_pos_kind_name(*(const lb_pos_kind *)p)); break;
    case LB_FIELD_HEAD: {
        lb_head_kind h = *(const lb_head_kind *)p;
        snprintf(buf, size, "%s", h == LB_HEAD_LAST || h == LB_HEAD_EVERY ? head_names[h] : "unknown");
        break;
    }
    case LB_FIELD_DTYPE: snprintf(buf, size, "%s", lb_dtype_name(*(const lb_dtype *)p)); break;
    case LB_FIELD_SCALE: snprintf(buf, size, "%s", lb_length_scale_name(*(const lb_length_scale *)p)); break;
    case LB_FIELD_INITIALIZER: snprintf(buf, size, "%s", lb_init_scheme_name(*(const lb_init_scheme *)p)); break;
    case LB_FIELD_NORM: snprintf(buf, size, "%s", lb_norm_kind_name(*(const lb_norm_kind *)p)); break;
    case LB_FIELD_NORM_POSITION: snprintf(buf, size, "%s", lb_norm_position_name(*(const lb_norm_position *)p)); break;
    case LB_FIELD_FFN: snprintf(buf, size, "%s", lb_ffn_kind_name(*(const lb_ffn_kind *)p)); break;
    }
    return buf;
}

double lb_model_field_number(const lb_model_config *cfg, const lb_model_field *f)
{
    LB_CHECK_ARG(cfg, NAN);
    LB_CHECK_ARG(f, NAN);
    const char *p = (const char *)cfg + f->offset;
    switch (f->type) {
    case LB_FIELD_INT64: return (double)*(const int64_t *)p;
    case LB_FIELD_INT: return (double)*(const int *)p;
    case LB_FIELD_U64: return (double)*(const uint64_t *)p;
    case LB_FIELD_REAL: return *(const double *)p;
    case LB_FIELD_KIND: return (double)*(const lb_model_kind *)p;
    case LB_FIELD_POS: return (double)*(const lb_pos_kind *)p;
    case LB_FIELD_HEAD: return (double)*(const lb_head_kind *)p;
    case LB_FIELD_DTYPE: return (double)*(const lb_dtype *)p;
    case LB_FIELD_SCALE: return (double)*(const lb_length_scale *)p;
    case LB_FIELD_INITIALIZER: return (double)*(const lb_init_scheme *)p;
    case LB_FIELD_NORM: return (double)*(const lb_norm_kind *)p;
    case LB_FIELD_NORM_POSITION: return (double)*(const lb_norm_position *)p;
    case LB_FIELD_FFN: return (double)*(const lb_ffn_kind *)p;
    }
    return NAN;
}

lb_status lb_model_config_check_ranges(const lb_model_config *cfg)
{
    LB_CHECK_ARG(cfg, LB_ERR_VALUE);
    for (int i = 0; i < N_FIELDS; i++) {
        const lb_model_field *f = &fields[i];
        int numeric = f->type == LB_FIELD_INT64 || f->type == LB_FIELD_INT || f->type == LB_FIELD_REAL;
        if (!numeric || !lb_model_field_applies(f, cfg))
            continue;
        double v = lb_model_field_number(cfg, f);
        if (!(v >= f->min && v <= f->max)) {
            char value[64], lo[32], hi[32];
            lb_model_field_format(cfg, f, value, sizeof value);
            return lb_error(LB_ERR_VALUE, "model config: %s = %s must be in [%s, %s] for a %s model", f->member, value,
                            bound_text(f, f->min, lo, sizeof lo), bound_text(f, f->max, hi, sizeof hi),
                            lb_model_kind_name(cfg->kind));
        }
    }
    return LB_OK;
}

/* The family table (layers/family.h): one row per model family, in lb_model_kind order.
 * Each row lives in its family's file. */
#include "layers/family.h"
#include "layers/model_internal.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

#include "tensor/names.h"

extern const lb_family lb_family_transformer, lb_family_local; /* layers/family_attention.c */
extern const lb_family lb_family_lstm;                        /* layers/family_lstm.c */
extern const lb_family lb_family_conv;                        /* layers/family_conv.c */
extern const lb_family lb_family_linear;                      /* layers/family_linear.c */
extern const lb_family lb_family_mamba;                       /* layers/family_mamba.c */

static const lb_family *const table[LB_MODEL_KIND_COUNT] = {
    [LB_MODEL_TRANSFORMER] = &lb_family_transformer,
    [LB_MODEL_LOCAL] = &lb_family_local,
    [LB_MODEL_LSTM] = &lb_family_lstm,
    [LB_MODEL_CONV] = &lb_family_conv,
    [LB_MODEL_LINEAR] = &lb_family_linear,
    [LB_MODEL_MAMBA] = &lb_family_mamba,
};

const lb_family *lb_family_at(int i) { return i >= 0 && i < LB_MODEL_KIND_COUNT ? table[i] : NULL; }

const lb_family *lb_family_of(lb_model_kind kind)
{
    const lb_family *f = lb_family_at((int)kind);
    if (!f)
        lb_error(LB_ERR_VALUE, "model kind %d is not a model family (0 to %d)", (int)kind, LB_MODEL_KIND_COUNT - 1);
    return f;
}

const lb_family *lb_family_find(const char *name)
{
    LB_CHECK_ARG(name, NULL);
    for (int i = 0; name && i < LB_MODEL_KIND_COUNT; i++)
        if (strcmp(table[i]->name, name) == 0)
            return table[i];
    return NULL;
}

const char *lb_model_kind_name(lb_model_kind kind)
{
    const lb_family *f = lb_family_at((int)kind);
    return f ? f->name : "unknown";
}

lb_status lb_model_kind_parse(const char *name, lb_model_kind *kind)
{
    LB_CHECK_ARG(kind, LB_ERR_VALUE);
    const char *names[LB_MODEL_KIND_COUNT];
    for (int i = 0; i < LB_MODEL_KIND_COUNT; i++)
        names[i] = table[i]->name;
    int i = 0;
    lb_status st = lb_name_parse("model kind", names, LB_MODEL_KIND_COUNT, name, 0, &i);
    if (st == LB_OK)
        *kind = table[i]->kind;
    return st;
}

char *lb_model_field_families(const lb_model_field *f, const char *sep, char *buf, size_t size)
{
    LB_CHECK_ARG(buf, NULL);
    LB_CHECK_ARG(f && sep, NULL);
    if (size == 0)
        return buf;
    buf[0] = '\0';
    if ((f->families & LB_FAMILY_ALL) == LB_FAMILY_ALL)
        return buf;
    for (int k = 0; k < LB_MODEL_KIND_COUNT; k++)
        if (lb_model_field_in_family(f, table[k]->kind))
            snprintf(buf + strlen(buf), size - strlen(buf), "%s%s", buf[0] ? sep : "", table[k]->name);
    return buf;
}

int lb_family_always(const lb_model_config *c)
{
    (void)c;
    return 1;
}

int lb_family_never(const lb_model_config *c)
{
    (void)c;
    return 0;
}

int64_t lb_family_any_length(const lb_model_config *c)
{
    (void)c;
    return 0;
}

int64_t lb_family_no_scratch(const lb_model_config *c)
{
    (void)c;
    return 0;
}

int lb_model_is_causal(const lb_model_config *c)
{
    LB_CHECK_ARG(c, 0);
    const lb_family *f = lb_family_at((int)c->kind);
    return f ? f->is_causal(c) : 0;
}

int64_t lb_model_max_positions(const lb_model_config *c)
{
    LB_CHECK_ARG(c, 0);
    const lb_family *f = lb_family_at((int)c->kind);
    return f ? f->max_positions(c) : 0;
}

lb_status lb_model_flops_count(const lb_model_config *c, int64_t seq_len, lb_model_flops *out)
{
    LB_CHECK_ARG(c && out, LB_ERR_VALUE);
    memset(out, 0, sizeof *out);
    if (seq_len < 1)
        return lb_error(LB_ERR_VALUE, "model FLOPs: seq_len = %lld must be >= 1", (long long)seq_len);
    const lb_family *f = lb_family_of(c->kind);
    if (!f)
        return lb_last_status();
    out->seq_len = seq_len;
    if (!f->flops) {
        out->forward = out->attention = out->training = NAN;
        return LB_OK;
    }
    const double t = (double)seq_len;
    const int64_t read = c->head == LB_HEAD_LAST ? 1 : seq_len;
    double attention = 0, total = f->flops(c, seq_len, read, &attention);
    if (c->vocab_size == 0 && c->input_features > 0) /* the input layer; an embedding is a lookup */
        total += 2.0 * t * (double)c->input_features * (double)c->d_model;
    double classes = c->num_classes > 0 ? (double)c->num_classes : 1.0;
    total += 2.0 * (double)read * (double)f->body_width(c) * classes;
    out->forward = total / t;
    out->attention = attention / t;
    out->training = 3.0 * out->forward;
    return LB_OK;
}

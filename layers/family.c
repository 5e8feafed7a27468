/* The family table (layers/family.h): one row per model family, in lb_model_kind order.
 * Each row lives in its family's file. */
#include "layers/family.h"
#include "layers/model_internal.h"

#include <stdio.h>
#include <string.h>

#include "tensor/names.h"

extern const lb_family lb_family_transformer, lb_family_local; /* layers/family_attention.c */
extern const lb_family lb_family_lstm;                        /* layers/family_lstm.c */
extern const lb_family lb_family_conv;                        /* layers/family_conv.c */
extern const lb_family lb_family_linear;                      /* layers/family_linear.c */

static const lb_family *const table[LB_MODEL_KIND_COUNT] = {
    [LB_MODEL_TRANSFORMER] = &lb_family_transformer,
    [LB_MODEL_LOCAL] = &lb_family_local,
    [LB_MODEL_LSTM] = &lb_family_lstm,
    [LB_MODEL_CONV] = &lb_family_conv,
    [LB_MODEL_LINEAR] = &lb_family_linear,
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

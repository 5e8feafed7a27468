/* Numerical gradient checking of a whole model, the engine of `lookback gradcheck`: the
 * model is built in float64 at the setup's size on real-valued input features (so the
 * input projection and everything after it is checked), with a classification head and
 * sequences of different lengths in the batch (T, T-2, T-4, ...: padding masks and the
 * read position are exercised). The checked function is
 *   loss = cross_entropy(model(features, lengths), targets)   (mean over the scored targets)
 * on features N(0, 1) and random targets, and every parameter is compared with central
 * differences by lb_gradcheck (autograd/gradcheck.h: torch.autograd.gradcheck's rule). */
#include "lab/gradcheck.h"

#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "lab/run_config.h"
#include "tensor/rng.h"

int lb_model_gradcheck_skips(const lb_model_field *f)
{
    LB_CHECK_ARG(f, 1);
    return !f->option || f->type == LB_FIELD_KIND || strcmp(f->member, "dropout") == 0 ||
           strcmp(f->member, "seed") == 0;
}

/* The data and model one check runs on. */
typedef struct gc_case {
    lb_model *model;
    lb_model_input in;
    lb_tensor *features; /* float64 [B, T, F] */
    int32_t *lengths;    /* [B] */
    int32_t *targets;    /* [B] (head last) or [B, T] (head every; -100 past each length) */
    int break_gradient;
} gc_case;


/* ---- a deliberately wrong backward: y = x forward, dy/dx claimed 1.01 ---- */

static lb_status wrong_backward(lb_var *node)
{
    lb_tensor *g = lb_tensor_copy(node->grad, node->grad->dtype);
    if (!g)
        return lb_last_status();
    int64_t n = lb_tensor_numel(g);
    LB_DISPATCH(g->dtype, T, {
        T *d = lb_tensor_data(g);
        for (int64_t i = 0; i < n; i++)
            d[i] *= (T)1.01;
    });
    lb_status st = lb_accumulate_grad(node->inputs[0], g);
    lb_tensor_free(g);
    return st;
}

static lb_var *loss_fn(lb_graph *g, lb_var *const *leaves, void *user)
{
    (void)leaves; /* the leaves are the model's own parameters */
    gc_case *c = user;
    lb_var *logits = lb_model_forward(g, c->model, &c->in, 0, NULL, NULL);
    if (!logits)
        return NULL;
    lb_var *loss = lb_cross_entropy(g, logits, c->targets, -100);
    if (loss && c->break_gradient) {
        lb_tensor *value = lb_tensor_copy(loss->value, loss->value->dtype);
        if (!value)
            return NULL;
        loss = lb_custom(g, 1, &loss, value, wrong_backward, NULL, NULL);
    }
    return loss;
}


/* ---- one model ---- */

static void free_case(gc_case *c)
{
    lb_model_free(c->model);
    lb_tensor_free(c->features);
    free(c->lengths);
    free(c->targets);
    memset(c, 0, sizeof *c);
}

/* Builds the model and its random batch. Errors: lb_model_new's, LB_ERR_MEMORY. */
static lb_status build_case(const lb_model_gradcheck_setup *s, lb_model_kind kind, gc_case *c)
{
    memset(c, 0, sizeof *c);
    lb_model_config cfg = s->model;
    cfg.kind = kind;
    cfg.dtype = LB_FLOAT64;
    cfg.vocab_size = 0;
    cfg.input_features = s->features;
    cfg.num_classes = s->classes;
    cfg.head = s->head;
    cfg.max_seq_len = s->seq_len;
    cfg.dropout = 0;
    cfg.seed = (uint64_t)s->seed;
    c->model = lb_model_new(&cfg);
    if (!c->model)
        return lb_last_status();

    int64_t b = s->batch, t = s->seq_len, f = s->features;
    int64_t shape[3] = {b, t, f};
    int64_t n_targets = s->head == LB_HEAD_LAST ? b : b * t;
    c->features = lb_tensor_zeros(LB_FLOAT64, 3, shape);
    c->lengths = malloc((size_t)b * sizeof *c->lengths);
    c->targets = malloc((size_t)n_targets * sizeof *c->targets);
    if (!c->features || !c->lengths || !c->targets) {
        free_case(c);
        return lb_error(LB_ERR_MEMORY, "gradcheck: out of memory for a batch of %lld x %lld", (long long)b,
                        (long long)t);
    }
    lb_rng rng;
    lb_rng_seed(&rng, (uint64_t)s->seed ^ 0x67726164636865ull); /* data stream apart from the model's */
    lb_rng_fill_normal(&rng, c->features, 0.0, 1.0);
    for (int64_t i = 0; i < b; i++)
        c->lengths[i] = (int32_t)(t - (2 * i) % t); /* T, T-2, T-4, ... in [1, T] */
    for (int64_t i = 0; i < n_targets; i++) {
        int64_t row = s->head == LB_HEAD_LAST ? i : i / t, pos = s->head == LB_HEAD_LAST ? 0 : i % t;
        c->targets[i] = pos < c->lengths[row] ? (int32_t)lb_rng_below(&rng, (uint64_t)s->classes) : -100;
    }
    c->in.batch = b;
    c->in.seq_len = t;
    c->in.features = c->features;
    c->in.lengths = c->lengths;
    c->break_gradient = s->break_gradient;
    return LB_OK;
}

static void print_header(FILE *out, const lb_model_gradcheck_setup *s, lb_model_kind kind)
{
    fprintf(out, "gradcheck %s: ", lb_model_kind_name(kind));
    lb_model_config cfg = s->model;
    cfg.kind = kind;
    int n, first = 1;
    const lb_model_field *fields = lb_model_fields(&n);
    for (int i = 0; i < n; i++) {
        char value[64];
        if (lb_model_gradcheck_skips(&fields[i]) || !lb_model_field_applies(&fields[i], &cfg))
            continue;
        fprintf(out, "%s%s %s", first ? "" : ", ", fields[i].option, lb_model_field_format(&cfg, &fields[i], value, sizeof value));
        first = 0;
    }
    fprintf(out, "; float64, batch %lld, seq_len %lld, lengths [", (long long)s->batch, (long long)s->seq_len);
    for (int64_t i = 0; i < s->batch && i < 8; i++)
        fprintf(out, "%s%lld", i ? ", " : "", (long long)(s->seq_len - (2 * i) % s->seq_len));
    fprintf(out, "%s], features %lld, classes %lld, head %s; eps %g, atol %g, rtol %g\n", s->batch > 8 ? ", ..." : "",
           (long long)s->features, (long long)s->classes, s->head == LB_HEAD_LAST ? "last" : "every", s->tol.eps,
           s->tol.atol, s->tol.rtol);
}

lb_status lb_model_gradcheck(const lb_model_gradcheck_setup *s, lb_model_kind kind, FILE *out, int *n_params,
                             int *n_failed)
{
    LB_CHECK_ARG(s && n_params && n_failed, LB_ERR_VALUE);
    *n_params = *n_failed = 0;
    gc_case c;
    lb_status st = build_case(s, kind, &c);
    if (st != LB_OK)
        return st;
    if (out)
        print_header(out, s, kind);
    lb_params *ps = lb_model_params(c.model);
    lb_gradcheck_leaf *report = calloc((size_t)ps->count + 1, sizeof *report);
    if (!report) {
        free_case(&c);
        return lb_error(LB_ERR_MEMORY, "gradcheck: out of memory for the report");
    }
    for (int l = 0; l < ps->count; l++)
        report[l].index = -1;
    st = lb_gradcheck(loss_fn, &c, ps->count, ps->items, &s->tol, report);
    if (st == LB_OK || st == LB_ERR_NUMERIC) {
        if (out)
            lb_gradcheck_print(out, ps->count, ps->items, report);
        for (int l = 0; l < ps->count; l++)
            *n_failed += !report[l].passed;
        *n_params = ps->count;
    }
    free(report);
    free_case(&c);
    return st;
}

/* gradcheck's sizes: small, so that the check runs in about a second per family. */
static const struct {
    const char *option, *value;
} small_model[] = {{"layers", "2"}, {"d-model", "8"}, {"heads", "2"}, {"d-ff", "16"}, {"hidden", "6"},
                   {"kernel", "3"}, {"window", "3"}, {"pos", "learned"}};

void lb_model_gradcheck_defaults(lb_model_gradcheck_setup *s)
{
    if (!s)
        return;
    memset(s, 0, sizeof *s);
    lb_model_config_default(LB_MODEL_TRANSFORMER, &s->model);
    for (size_t i = 0; i < sizeof small_model / sizeof small_model[0]; i++)
        lb_model_field_set(&s->model, lb_model_field_find(small_model[i].option), small_model[i].value);
    s->seq_len = 7;
    s->batch = 2;
    s->features = 3;
    s->classes = 4;
    s->head = LB_HEAD_LAST;
    s->seed = 1;
    s->tol = lb_gradcheck_defaults();
}

int lb_model_gradcheck_option(lb_model_gradcheck_setup *s, const char *option, const char *value,
                              const char **model_option)
{
    LB_CHECK_ARG(s && option && value, -1);
    static const struct {
        const char *name;
        size_t offset;
        int64_t min, max;
    } ints[] = {
        {"--seq-len", offsetof(lb_model_gradcheck_setup, seq_len), 1, 4096},
        {"--batch", offsetof(lb_model_gradcheck_setup, batch), 1, 256},
        {"--features", offsetof(lb_model_gradcheck_setup, features), 1, 256},
        {"--classes", offsetof(lb_model_gradcheck_setup, classes), 2, 256},
        {"--seed", offsetof(lb_model_gradcheck_setup, seed), 0, INT64_MAX},
    };
    static const struct {
        const char *name;
        size_t offset;
        double min, max;
    } reals[] = {
        {"--eps", offsetof(lb_model_gradcheck_setup, tol.eps), 1e-12, 1e-1},
        {"--atol", offsetof(lb_model_gradcheck_setup, tol.atol), 0, 1e3},
        {"--rtol", offsetof(lb_model_gradcheck_setup, tol.rtol), 0, 1e3},
    };
    if (model_option)
        *model_option = NULL;
    for (size_t i = 0; i < sizeof ints / sizeof ints[0]; i++)
        if (strcmp(option, ints[i].name) == 0)
            return lb_option_int(option, value, ints[i].min, ints[i].max, (int64_t *)((char *)s + ints[i].offset)) ==
                           LB_OK ? 1 : -1;
    for (size_t i = 0; i < sizeof reals / sizeof reals[0]; i++)
        if (strcmp(option, reals[i].name) == 0)
            return lb_option_real(option, value, reals[i].min, reals[i].max, (double *)((char *)s + reals[i].offset)) ==
                           LB_OK ? 1 : -1;
    const lb_model_field *f = strncmp(option, "--", 2) == 0 ? lb_model_field_find(option + 2) : NULL;
    if (f && !lb_model_gradcheck_skips(f)) {
        if (lb_model_field_set(&s->model, f, value) != LB_OK)
            return -1;
        if (model_option)
            *model_option = f->option;
        return 1;
    }
    if (strcmp(option, "--head") != 0)
        return 0;
    if (strcmp(value, "last") != 0 && strcmp(value, "every") != 0) {
        lb_error(LB_ERR_VALUE, "--head: '%s' is neither last nor every", value);
        return -1;
    }
    s->head = strcmp(value, "last") == 0 ? LB_HEAD_LAST : LB_HEAD_EVERY;
    return 1;
}

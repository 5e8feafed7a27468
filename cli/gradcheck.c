/* `lookback gradcheck`: checks a whole model's gradients numerically, for users who
 * change a model and want to verify its backward pass.
 *
 * The model is built in float64 at a small size, on real-valued input features (so
 * the input projection and everything after it is checked), with a classification
 * head and sequences of different lengths in the batch (so padding masks and the
 * read position are exercised). The checked function is the scalar loss
 *   loss = cross_entropy(model(features, lengths), targets)     (mean over the batch)
 * on random features N(0, 1) and random targets, and every parameter is compared
 * with central differences by lb_gradcheck (autograd/gradcheck.h, the semantics of
 * torch.autograd.gradcheck). Exit 0 when every parameter passes, 1 when one fails.
 */
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "autograd/gradcheck.h"
#include "layers/model.h"
#include "tensor/rng.h"
#include "cli/cli.h"

enum { GC_IGNORE_INDEX = -100 };

typedef struct gc_settings {
    int all;                 /* --model all */
    lb_model_config model;   /* the model options (field list), gradcheck's small defaults */
    int have_kind;
    int64_t seq_len, batch, features, classes;
    lb_head_kind head;
    int64_t seed;
    lb_gradcheck_options tol;
    int break_gradient;      /* testing aid: a deliberately wrong backward on the loss */
    const char *given[64];   /* model options given, to check they apply */
    int n_given;
} gc_settings;

/* gradcheck's sizes: small, so that the check runs in about a second per family. */
static const struct {
    const char *option, *value;
} small_model[] = {{"layers", "2"}, {"d-model", "8"}, {"heads", "2"}, {"d-ff", "16"}, {"hidden", "6"},
                   {"kernel", "3"}, {"window", "3"}, {"pos", "learned"}};

/* Model options gradcheck does not take: dropout is off in the checked forward pass,
 * and --seed seeds both the model and the data. */
static int gc_skips(const lb_model_field *f)
{
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

/* The model fields at gradcheck's small sizes. */
static void settings_model_default(lb_model_config *m)
{
    lb_model_config_default(LB_MODEL_TRANSFORMER, m);
    for (size_t i = 0; i < sizeof small_model / sizeof small_model[0]; i++)
        lb_model_field_set(m, lb_model_field_find(small_model[i].option), small_model[i].value);
}

static void gc_usage(FILE *out)
{
    fputs("usage: lookback gradcheck --model transformer|local|lstm|conv|all [options]\n"
          "\n"
          "Builds the model in float64 at a small size and compares the gradient of every parameter\n"
          "with central differences, (f(x + eps) - f(x - eps)) / (2 eps), as torch.autograd.gradcheck\n"
          "does: an element passes when |analytic - numeric| <= atol + rtol * |numeric|. The loss is\n"
          "the cross-entropy of the logits against random targets, on random real-valued features and\n"
          "a batch whose sequences have different lengths. One line per parameter (name, shape,\n"
          "worst error); exit 0 when all pass, 1 when one fails.\n"
          "\n"
          "  --model NAME     transformer, local (sliding-window attention), lstm, conv, or all\n"
          "  --features F     input features (default 3)\n"
          "  --classes C      classes (default 4)\n"
          "  --seq-len T      positions per sequence (default 7)\n"
          "  --batch B        sequences (default 2; lengths T, T-2, T-4, ...)\n"
          "  --seed S         model initialisation and data (default 1)\n"
          "  --eps E          perturbation (default 1e-6)\n"
          "  --atol A         absolute tolerance (default 1e-5)\n"
          "  --rtol R         relative tolerance (default 1e-3)\n"
          "  --break-gradient (testing) scale the loss's backward by 1.01, which must FAIL\n"
          "  -h, --help       this help\n"
          "\n"
          "Model options ([families] that use them; with one --model, others are refused):\n",
          out);
    lb_model_config small;
    settings_model_default(&small);
    int n;
    const lb_model_field *fields = lb_model_fields(&n);
    for (int i = 0; i < n; i++) {
        if (gc_skips(&fields[i]))
            continue;
        char families[96] = "", value[64];
        for (int k = LB_MODEL_TRANSFORMER; k <= LB_MODEL_CONV && (fields[i].families & LB_FAMILY_ALL) != LB_FAMILY_ALL; k++)
            if (lb_model_field_in_family(&fields[i], (lb_model_kind)k))
                snprintf(families + strlen(families), sizeof families - strlen(families), "%s%s",
                         families[0] ? ", " : " [", lb_model_kind_name((lb_model_kind)k));
        fprintf(out, "  --%-14s %s%s%s (default %s)\n", fields[i].option, fields[i].help, families,
                families[0] ? "]" : "", lb_model_field_format(&small, &fields[i], value, sizeof value));
    }
}

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
    lb_var *loss = lb_cross_entropy(g, logits, c->targets, GC_IGNORE_INDEX);
    if (loss && c->break_gradient) {
        lb_tensor *value = lb_tensor_copy(loss->value, loss->value->dtype);
        if (!value)
            return NULL;
        loss = lb_custom(g, 1, &loss, value, wrong_backward, NULL, NULL);
    }
    return loss;
}

/* ---- option parsing ---- */

static void settings_default(gc_settings *s)
{
    memset(s, 0, sizeof *s);
    settings_model_default(&s->model);
    s->seq_len = 7;
    s->batch = 2;
    s->features = 3;
    s->classes = 4;
    s->head = LB_HEAD_LAST;
    s->seed = 1;
    s->tol = lb_gradcheck_defaults();
}

/* Applies one option; returns 0 or the exit code of a usage error (already printed). */
static int apply_option(gc_settings *s, const char *key, const char *value)
{
    static const struct {
        const char *name;
        size_t offset;
        int64_t min, max;
    } ints[] = {
        {"--seq-len", offsetof(gc_settings, seq_len), 1, 4096},
        {"--batch", offsetof(gc_settings, batch), 1, 256},
        {"--features", offsetof(gc_settings, features), 1, 256},
        {"--classes", offsetof(gc_settings, classes), 2, 256},
        {"--seed", offsetof(gc_settings, seed), 0, INT64_MAX},
    };
    static const struct {
        const char *name;
        size_t offset;
        double min, max;
    } reals[] = {
        {"--eps", offsetof(gc_settings, tol.eps), 1e-12, 1e-1},
        {"--atol", offsetof(gc_settings, tol.atol), 0, 1e3},
        {"--rtol", offsetof(gc_settings, tol.rtol), 0, 1e3},
    };
    for (size_t i = 0; i < sizeof ints / sizeof ints[0]; i++)
        if (strcmp(key, ints[i].name) == 0)
            return lb_option_int(key, value, ints[i].min, ints[i].max, (int64_t *)((char *)s + ints[i].offset)) == LB_OK
                       ? 0
                       : lb_cli_error("gradcheck", 2, "%s", lb_last_error());
    for (size_t i = 0; i < sizeof reals / sizeof reals[0]; i++)
        if (strcmp(key, reals[i].name) == 0)
            return lb_option_real(key, value, reals[i].min, reals[i].max, (double *)((char *)s + reals[i].offset)) == LB_OK
                       ? 0
                       : lb_cli_error("gradcheck", 2, "%s", lb_last_error());
    if (strcmp(key, "--model") == 0) {
        s->have_kind = 1;
        s->all = strcmp(value, "all") == 0;
        if (!s->all && lb_model_kind_parse(value, &s->model.kind) != LB_OK)
            return lb_cli_error("gradcheck", 2, "--model: unknown model '%s' (expected transformer, local, lstm, conv "
                                                "or all)", value);
        return 0;
    }
    const lb_model_field *f = lb_model_field_find(key + 2);
    if (f && !gc_skips(f)) {
        if (lb_model_field_set(&s->model, f, value) != LB_OK)
            return lb_cli_error("gradcheck", 2, "%s", lb_last_error());
        if (s->n_given < 64)
            s->given[s->n_given++] = f->option;
        return 0;
    }
    if (strcmp(key, "--head") == 0) {
        if (strcmp(value, "last") == 0)
            s->head = LB_HEAD_LAST;
        else if (strcmp(value, "every") == 0)
            s->head = LB_HEAD_EVERY;
        else
            return lb_cli_error("gradcheck", 2, "--head: '%s' is neither last nor every", value);
        return 0;
    }
    return lb_cli_error("gradcheck", 2, "unknown option '%s' (see `lookback gradcheck --help`)", key);
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

/* Builds the model and its random batch. Returns 0, or the exit code (printed). */
static int build_case(const gc_settings *s, lb_model_kind kind, gc_case *c)
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
    if (!c->model) /* a bad shape is a usage error; out of memory says so (lb_cli_fail) */
        return lb_last_status() == LB_ERR_VALUE ? lb_cli_error("gradcheck", 2, "%s", lb_last_error())
                                                : lb_cli_fail("gradcheck");

    int64_t b = s->batch, t = s->seq_len, f = s->features;
    int64_t shape[3] = {b, t, f};
    int64_t n_targets = s->head == LB_HEAD_LAST ? b : b * t;
    c->features = lb_tensor_zeros(LB_FLOAT64, 3, shape);
    c->lengths = malloc((size_t)b * sizeof *c->lengths);
    c->targets = malloc((size_t)n_targets * sizeof *c->targets);
    if (!c->features || !c->lengths || !c->targets) {
        free_case(c);
        return lb_cli_error("gradcheck", 1, "out of memory for a batch of %lld x %lld", (long long)b, (long long)t);
    }
    lb_rng rng;
    lb_rng_seed(&rng, (uint64_t)s->seed ^ 0x67726164636865ull); /* data stream apart from the model's */
    lb_rng_fill_normal(&rng, c->features, 0.0, 1.0);
    for (int64_t i = 0; i < b; i++)
        c->lengths[i] = (int32_t)(t - (2 * i) % t); /* T, T-2, T-4, ... in [1, T] */
    for (int64_t i = 0; i < n_targets; i++) {
        int64_t row = s->head == LB_HEAD_LAST ? i : i / t, pos = s->head == LB_HEAD_LAST ? 0 : i % t;
        c->targets[i] = pos < c->lengths[row] ? (int32_t)lb_rng_below(&rng, (uint64_t)s->classes) : GC_IGNORE_INDEX;
    }
    c->in.batch = b;
    c->in.seq_len = t;
    c->in.features = c->features;
    c->in.lengths = c->lengths;
    c->break_gradient = s->break_gradient;
    return 0;
}

static void print_header(const gc_settings *s, lb_model_kind kind)
{
    printf("gradcheck %s: ", lb_model_kind_name(kind));
    lb_model_config cfg = s->model;
    cfg.kind = kind;
    int n, first = 1;
    const lb_model_field *fields = lb_model_fields(&n);
    for (int i = 0; i < n; i++) {
        char value[64];
        if (gc_skips(&fields[i]) || !lb_model_field_applies(&fields[i], &cfg))
            continue;
        printf("%s%s %s", first ? "" : ", ", fields[i].option, lb_model_field_format(&cfg, &fields[i], value, sizeof value));
        first = 0;
    }
    printf("; float64, batch %lld, seq_len %lld, lengths [", (long long)s->batch, (long long)s->seq_len);
    for (int64_t i = 0; i < s->batch && i < 8; i++)
        printf("%s%lld", i ? ", " : "", (long long)(s->seq_len - (2 * i) % s->seq_len));
    printf("%s], features %lld, classes %lld, head %s; eps %g, atol %g, rtol %g\n", s->batch > 8 ? ", ..." : "",
           (long long)s->features, (long long)s->classes, s->head == LB_HEAD_LAST ? "last" : "every", s->tol.eps,
           s->tol.atol, s->tol.rtol);
}

/* Checks one family. Returns 0 (all passed), 1 (a failure or error, printed) or 2. */
static int check_model(const gc_settings *s, lb_model_kind kind, int *n_params, int *n_failed)
{
    gc_case c;
    int code = build_case(s, kind, &c);
    if (code)
        return code;
    print_header(s, kind);
    lb_params *ps = lb_model_params(c.model);
    lb_gradcheck_leaf *report = calloc((size_t)ps->count + 1, sizeof *report);
    if (!report) {
        free_case(&c);
        return lb_cli_error("gradcheck", 1, "out of memory");
    }
    for (int l = 0; l < ps->count; l++)
        report[l].index = -1;
    lb_status st = lb_gradcheck(loss_fn, &c, ps->count, ps->items, &s->tol, report);
    if (st == LB_OK || st == LB_ERR_NUMERIC) {
        lb_gradcheck_print(stdout, ps->count, ps->items, report);
        for (int l = 0; l < ps->count; l++)
            *n_failed += !report[l].passed;
        *n_params += ps->count;
    }
    fflush(stdout);
    if (st != LB_OK) {
        const char *message = lb_last_error();
        if (strncmp(message, "gradcheck: ", 11) == 0)
            message += 11;
        code = lb_cli_error("gradcheck", 1, "%s: %s", lb_model_kind_name(kind), message);
    }
    free(report);
    free_case(&c);
    return code;
}

int lb_cli_gradcheck(int argc, char **argv)
{
    gc_settings s;
    settings_default(&s);
    for (int i = 1; i < argc; i++) {
        const char *arg = argv[i];
        if (strcmp(arg, "--help") == 0 || strcmp(arg, "-h") == 0) {
            gc_usage(stdout);
            return 0;
        }
        if (strcmp(arg, "--break-gradient") == 0) {
            s.break_gradient = 1;
            continue;
        }
        if (strncmp(arg, "--", 2) != 0)
            return lb_cli_error("gradcheck", 2, "unexpected argument '%s' (options are --name value)", arg);
        const char *eq = strchr(arg, '=');
        char key[64];
        const char *value;
        if (eq) {
            snprintf(key, sizeof key, "%.*s", (int)(eq - arg), arg);
            value = eq + 1;
        } else {
            snprintf(key, sizeof key, "%s", arg);
            if (i + 1 >= argc)
                return lb_cli_error("gradcheck", 2, "option %s needs a value", arg);
            value = argv[++i];
        }
        int code = apply_option(&s, key, value);
        if (code)
            return code;
    }
    if (!s.have_kind)
        return lb_cli_error("gradcheck", 2, "missing --model (transformer, local, lstm, conv or all)");
    for (int i = 0; i < s.n_given && !s.all; i++)
        if (!lb_model_field_in_family(lb_model_field_find(s.given[i]), s.model.kind))
            return lb_cli_error("gradcheck", 2, "--%s does not apply to --model %s (see lookback gradcheck --help)",
                                s.given[i], lb_model_kind_name(s.model.kind));
    /* one thread: its matrix-product buffer is reserved before any work (lb_run_set_threads) */
    if (lb_run_set_threads(1) < 0)
        return lb_cli_fail("gradcheck");

    static const lb_model_kind every[] = {LB_MODEL_TRANSFORMER, LB_MODEL_LOCAL, LB_MODEL_LSTM, LB_MODEL_CONV};
    int n_params = 0, n_failed = 0, code = 0;
    for (size_t k = 0; k < sizeof every / sizeof every[0]; k++) {
        if (!s.all && every[k] != s.model.kind)
            continue;
        int c = check_model(&s, every[k], &n_params, &n_failed);
        if (c > code)
            code = c;
        if (code == 2)
            return code;
    }
    if (code != 0 && n_params == 0) /* nothing was checked: the error said why */
        return code;
    if (n_failed > 0 || code != 0) {
        printf("gradcheck: FAILED (%d of %d parameters)\n", n_failed, n_params);
        return code ? code : 1;
    }
    printf("gradcheck: %d parameters passed\n", n_params);
    return 0;
}

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
#include "layers/family.h"
#include "layers/model.h"
#include "tensor/rng.h"
#include "cli/cli.h"
#include "lab/gradcheck.h"

typedef struct gc_settings {
    int all;                 /* --model all */
    int have_kind;
    lb_model_gradcheck_setup check; /* the model options (gradcheck's small defaults) and the batch */
    const char *given[64];   /* model options given, to check they apply */
    int n_given;
} gc_settings;

static void gc_usage(FILE *out)
{
    fputs("usage: lookback gradcheck --model transformer|local|lstm|conv|mamba|all [options]\n"
          "\n"
          "Builds the model in float64 at a small size and compares the gradient of every parameter\n"
          "with central differences, (f(x + eps) - f(x - eps)) / (2 eps), as torch.autograd.gradcheck\n"
          "does: an element passes when |analytic - numeric| <= atol + rtol * |numeric|. The loss is\n"
          "the cross-entropy of the logits against random targets, on random real-valued features and\n"
          "a batch whose sequences have different lengths. One line per parameter (name, shape,\n"
          "worst error); exit 0 when all pass, 1 when one fails.\n"
          "\n"
          "  --model NAME     transformer, local (sliding-window attention), lstm, conv, mamba, or all\n"
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
    lb_model_gradcheck_setup small;
    lb_model_gradcheck_defaults(&small);
    int n;
    const lb_model_field *fields = lb_model_fields(&n);
    for (int i = 0; i < n; i++) {
        if (lb_model_gradcheck_skips(&fields[i]))
            continue;
        char families[96] = "", value[64];
        lb_model_field_families(&fields[i], ", ", families, sizeof families);
        fprintf(out, "  --%-14s %s%s%s%s (default %s)\n", fields[i].option, fields[i].help, families[0] ? " [" : "",
                families, families[0] ? "]" : "", lb_model_field_format(&small.model, &fields[i], value, sizeof value));
    }
}

/* Applies one option; returns 0 or the exit code of a usage error (already printed). */
static int apply_option(gc_settings *s, const char *key, const char *value)
{
    if (strcmp(key, "--model") == 0) {
        s->have_kind = 1;
        s->all = strcmp(value, "all") == 0;
        if (!s->all && lb_model_kind_parse(value, &s->check.model.kind) != LB_OK)
            return lb_cli_error("gradcheck", 2, "--model: unknown model '%s' (expected transformer, local, lstm, conv, mamba "
                                                "or all)", value);
        return 0;
    }
    const char *model_option = NULL;
    int set = lb_model_gradcheck_option(&s->check, key, value, &model_option);
    if (set < 0)
        return lb_cli_error("gradcheck", 2, "%s", lb_last_error());
    if (set == 0)
        return lb_cli_error("gradcheck", 2, "unknown option '%s' (see `lookback gradcheck --help`)", key);
    if (model_option && s->n_given < 64)
        s->given[s->n_given++] = model_option;
    return 0;
}

/* Checks one family, printing its table. Returns 0 (all passed), 1 (a failure or
 * error, printed) or 2 (options that do not make a model). */
static int check_model(const lb_model_gradcheck_setup *s, lb_model_kind kind, int *n_params, int *n_failed)
{
    int params = 0, failed = 0;
    lb_status st = lb_model_gradcheck(s, kind, stdout, &params, &failed);
    *n_params += params;
    *n_failed += failed;
    fflush(stdout);
    if (st == LB_OK)
        return 0;
    if (params == 0 && st == LB_ERR_VALUE) /* a bad shape is a usage error */
        return lb_cli_error("gradcheck", 2, "%s", lb_last_error());
    if (params == 0)
        return lb_cli_fail("gradcheck"); /* out of memory says so */
    const char *message = lb_last_error();
    if (strncmp(message, "gradcheck: ", 11) == 0)
        message += 11;
    return lb_cli_error("gradcheck", 1, "%s: %s", lb_model_kind_name(kind), message);
}

int lb_cli_gradcheck(int argc, char **argv)
{
    gc_settings s;
    memset(&s, 0, sizeof s);
    lb_model_gradcheck_defaults(&s.check);
    for (int i = 1; i < argc; i++) {
        const char *arg = argv[i];
        if (strcmp(arg, "--help") == 0 || strcmp(arg, "-h") == 0) {
            gc_usage(stdout);
            return 0;
        }
        if (strcmp(arg, "--break-gradient") == 0) {
            s.check.break_gradient = 1;
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
        return lb_cli_error("gradcheck", 2, "missing --model (transformer, local, lstm, conv, mamba or all)");
    for (int i = 0; i < s.n_given && !s.all; i++)
        if (!lb_model_field_in_family(lb_model_field_find(s.given[i]), s.check.model.kind))
            return lb_cli_error("gradcheck", 2, "--%s does not apply to --model %s (see lookback gradcheck --help)",
                                s.given[i], lb_model_kind_name(s.check.model.kind));
    /* one thread: its matrix-product buffer is reserved before any work (lb_run_set_threads) */
    if (lb_run_set_threads(1) < 0)
        return lb_cli_fail("gradcheck");

    int n_params = 0, n_failed = 0, code = 0;
    for (int k = 0; k < LB_MODEL_KIND_COUNT; k++) {
        lb_model_kind kind = lb_family_at(k)->kind;
        if (!s.all && kind != s.check.model.kind)
            continue;
        int c = check_model(&s.check, kind, &n_params, &n_failed);
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

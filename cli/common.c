#include <ctype.h>
#include <stdarg.h>
#include <string.h>

#include "layers/family.h"
#include "layers/model.h"
#include "train/distributed.h"
#include "cli/cli.h"
#include "lab/run_config.h"
#include "train/trainer.h"

/* Library messages may start with the C function that raised them ("lb_dataset_open: ");
 * the command line shows users the rest. */
static const char *user_message(const char *m)
{
    while (strncmp(m, "lb_", 3) == 0) {
        const char *p = m;
        while (*p && (isalnum((unsigned char)*p) || *p == '_'))
            p++;
        if (p[0] != ':' || p[1] != ' ')
            break;
        m = p + 2;
    }
    return m;
}

/* Length of the valid UTF-8 sequence at p (1 to 4 bytes), 0 when it is not one. */
static size_t utf8_sequence(const unsigned char *p)
{
    size_t n = p[0] >= 0xf0 && p[0] <= 0xf4 ? 4 : p[0] >= 0xe0 ? 3 : p[0] >= 0xc2 && p[0] < 0xe0 ? 2 : 0;
    for (size_t i = 1; i < n; i++)
        if ((p[i] & 0xc0) != 0x80)
            return 0;
    return n;
}

void lb_cli_printable(const char *message, char *out, size_t size)
{
    const unsigned char *p = (const unsigned char *)message;
    size_t used = 0;
    while (*p && used + 5 < size) {
        size_t n = *p >= 0x80 ? utf8_sequence(p) : 1;
        if (n > 1 && used + n < size) {
            memcpy(out + used, p, n);
            used += n;
            p += n;
        } else if (*p < 0x20 || *p == 0x7f || *p >= 0x80) {
            used += (size_t)snprintf(out + used, size - used, "\\x%02x", *p++);
        } else {
            out[used++] = (char)*p++;
        }
    }
    out[used] = '\0';
}

/* One error line; under mpirun it names the rank, and usage errors (the same on every
 * rank) are printed by rank 0 only, also before the job is joined. */
static void print_error(const char *command, int code, const char *raw)
{
    char message[4096];
    lb_cli_printable(raw, message, sizeof message);
    if (code == 2 && (lb_dist_size() > 1 ? lb_dist_rank() : lb_dist_launch_rank()) != 0)
        return;
    if (lb_dist_size() > 1 && code != 2)
        fprintf(stderr, "lookback %s: rank %d: %s\n", command, lb_dist_rank(), message);
    else
        fprintf(stderr, "lookback %s: %s\n", command, message);
}

int lb_cli_fail(const char *command)
{
    char message[2048];
    snprintf(message, sizeof message, "%s", lb_last_error()[0] ? user_message(lb_last_error()) : "failed");
    lb_run_config_name_options(message, sizeof message);
    lb_cli_memory_message(command, message, sizeof message);
    print_error(command, 1, message);
    return 1;
}

int lb_cli_error(const char *command, int code, const char *fmt, ...)
{
    va_list ap;
    char message[2048];
    va_start(ap, fmt);
    vsnprintf(message, sizeof message, fmt, ap);
    va_end(ap);
    char named[2048];
    snprintf(named, sizeof named, "%s", user_message(message));
    lb_run_config_name_options(named, sizeof named);
    print_error(command, code, named);
    return code;
}

int lb_cli_bad_option(const char *command, int c, char *const *argv)
{
    if (c == ':')
        return lb_cli_error(command, 2, "option %s needs a value", argv[optind - 1]);
    return lb_cli_error(command, 2, "unknown option '%s' (see lookback %s --help)", argv[optind - 1], command);
}

lb_status lb_cli_split(const char *option, const char *text, const char **out)
{
    static const char *const names[] = {"train", "val", "test"};
    for (size_t k = 0; text && k < sizeof names / sizeof names[0]; k++) {
        if (strcmp(text, names[k]) == 0) {
            *out = text;
            return LB_OK;
        }
    }
    return lb_error(LB_ERR_VALUE, "%s: unknown split '%s' (expected train, val or test)", option, text ? text : "");
}

int lb_cli_has_attention(const struct lb_model_config *mc)
{
    const lb_family *f = lb_family_of(mc->kind);
    return f && f->attention;
}

lb_status lb_cli_check_max_context(const char *checkpoint, const struct lb_model_config *mc, int64_t max_context)
{
    if (max_context > 0 && !lb_cli_has_attention(mc))
        return lb_error(LB_ERR_VALUE,
                        "--max-context: %s holds a %s model, which keeps no attention cache to bound (drop the option)",
                        checkpoint, lb_model_kind_name(mc->kind));
    return LB_OK;
}

lb_status lb_cli_seq_len(const char *text, int64_t *seq_len)
{
    return lb_option_int("--seq-len", text, 1, 1 << 24, seq_len);
}

int lb_cli_fit_data(const char *command, const char *checkpoint, lb_dataset *data, int64_t seq_len)
{
    if (lb_dataset_is_text(data))
        return lb_checkpoint_fit_corpus(checkpoint, data, seq_len) == LB_OK ? 0 : lb_cli_fail(command);
    if (seq_len > 0)
        return lb_cli_error(command, 2, "--seq-len: %s holds the %s task, whose sequences have their own length; "
                            "--seq-len applies to text corpora only (drop it)", lb_dataset_path(data),
                            lb_dataset_task_name(data));
    return 0;
}

void lb_cli_memory_message(const char *command, char *message, size_t size)
{
    if (!command || !message || size == 0 || lb_last_status() != LB_ERR_MEMORY || strstr(message, "out of memory"))
        return;
    /* "doing: inner context: ...: detail" (lb_error_context prepends "context: "). */
    const char *first_end = strstr(message, ": "), *last = message;
    for (const char *p = message; (p = strstr(p, ": ")); p += 2)
        last = p + 2;
    char doing[1024], detail[1024];
    if (first_end && (size_t)(first_end - message) < sizeof doing)
        snprintf(doing, sizeof doing, "%.*s", (int)(first_end - message), message);
    else {
        static const char *const activity[][2] = {
            {"train", "training"},         {"eval", "evaluating"},           {"predict", "predicting"},
            {"data", "generating data"},   {"compare", "comparing models"}, {"demo", "running the demo"},
            {"study", "running the study"}, {"stream", "streaming"},         {"gradcheck", "checking gradients"},
        };
        snprintf(doing, sizeof doing, "running lookback %s", command);
        for (size_t i = 0; i < sizeof activity / sizeof activity[0]; i++)
            if (strcmp(command, activity[i][0]) == 0)
                snprintf(doing, sizeof doing, "%s", activity[i][1]);
    }
    snprintf(detail, sizeof detail, "%s", last);
    snprintf(message, size, "out of memory (while %s): %s", doing, detail);
}

int lb_cli_run_failed(const char *command, const lb_run_result *run)
{
    if (run->signal > 0) {
        lb_cli_fail(command);
        return 128 + run->signal;
    }
    /* A usage error found after start-up (--batch not divisible by the ranks, --steps below
     * the checkpoint's): every rank finds it, rank 0 alone prints it, exit 2. */
    if (run->usage)
        return lb_cli_error(command, 2, "%s", lb_last_error());
    return lb_cli_fail(command);
}

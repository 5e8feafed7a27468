/* Task names, option defaults, the option table, command-line parsing of options
 * and the checks that tie options together. The recipes are in generate.c. */
#include "data/tasks.h"

#include <ctype.h>
#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/statvfs.h>

#include "data/options.h"

#define TASK_BIT(k) (1u << (k))
#define ALL_TASKS ((1u << LB_TASK_COUNT) - 1u)
#define OPT(field) offsetof(lb_task_options, field)

enum { MAX_SEQ_LEN = LB_DATA_MAX_SEQ_LEN, MAX_SPLIT = 1 << 30 };

static const char *const task_names[LB_TASK_COUNT] = {"spike", "recall", "copy",  "adding",
                                                      "local", "parity", "modsum"};

static const lb_option_spec option_table[] = {
    {"seq_len", NULL, LB_OPT_INT, OPT(seq_len), 2, MAX_SEQ_LEN, 0, ALL_TASKS,
     "positions per sequence T (padding included)"},
    {"variable_length", NULL, LB_OPT_FLAG, OPT(variable_length), 0, 1, 0, ALL_TASKS,
     "draw each length from [--min-length, T] and pad with PAD (0) after it"},
    {"min_length", NULL, LB_OPT_INT, OPT(min_length), 2, MAX_SEQ_LEN, 1, ALL_TASKS,
     "shortest sequence with --variable-length (auto: T, or max(ceil(T/2), task minimum))"},
    {"min_distance", NULL, LB_OPT_INT, OPT(min_distance), 1, MAX_SEQ_LEN, 1,
     TASK_BIT(LB_TASK_SPIKE) | TASK_BIT(LB_TASK_ADDING),
     "smallest clue-to-query distance (auto: spike 1, adding floor(min length / 2))"},
    {"max_distance", NULL, LB_OPT_INT, OPT(max_distance), 1, MAX_SEQ_LEN, 1,
     TASK_BIT(LB_TASK_SPIKE) | TASK_BIT(LB_TASK_ADDING), "largest clue-to-query distance (auto: min length - 1)"},
    {"noise_types", NULL, LB_OPT_INT, OPT(noise_types), 1, 1 << 20, 0, TASK_BIT(LB_TASK_SPIKE) | TASK_BIT(LB_TASK_RECALL),
     "distinct ordinary (noise) event tokens"},
    {"sensors", NULL, LB_OPT_INT, OPT(sensors), 1, 4096, 0, TASK_BIT(LB_TASK_SPIKE),
     "sensors S, each spiking once per sequence"},
    {"readings", NULL, LB_OPT_INT, OPT(readings), 2, 4096, 0, TASK_BIT(LB_TASK_SPIKE),
     "possible readings K of a spike (= num_classes)"},
    {"pairs", NULL, LB_OPT_INT, OPT(pairs), 1, 1 << 16, 0, TASK_BIT(LB_TASK_RECALL), "key-value pairs per sequence"},
    {"queries", NULL, LB_OPT_INT, OPT(queries), 1, 1 << 16, 1, TASK_BIT(LB_TASK_RECALL),
     "keys queried per sequence, each once (auto: --pairs)"},
    {"key_vocab", NULL, LB_OPT_INT, OPT(key_vocab), 1, 1 << 20, 0, TASK_BIT(LB_TASK_RECALL),
     "distinct key tokens (>= --pairs)"},
    {"value_vocab", NULL, LB_OPT_INT, OPT(value_vocab), 2, 1 << 20, 0, TASK_BIT(LB_TASK_RECALL),
     "distinct value tokens (= num_classes)"},
    {"power_a", NULL, LB_OPT_REAL, OPT(power_a), 1e-6, 16, 0, TASK_BIT(LB_TASK_RECALL),
     "query gap g >= 1 has density proportional to g^(a - 1)"},
    {"copy_symbols", NULL, LB_OPT_INT, OPT(copy_symbols), 1, 1 << 16, 0, TASK_BIT(LB_TASK_COPY), "symbols to copy"},
    {"alphabet", NULL, LB_OPT_INT, OPT(alphabet), 2, 1 << 20, 0,
     TASK_BIT(LB_TASK_COPY) | TASK_BIT(LB_TASK_LOCAL) | TASK_BIT(LB_TASK_PARITY),
     "symbol alphabet size (copy: = num_classes; parity: symbol 1 is the counted one)"},
    {"selective", NULL, LB_OPT_FLAG, OPT(selective), 0, 1, 0, TASK_BIT(LB_TASK_COPY),
     "scatter the symbols at random positions among the blanks"},
    {"blank_targets", NULL, LB_OPT_FLAG, OPT(blank_targets), 0, 1, 0, TASK_BIT(LB_TASK_COPY),
     "score every position: the targets before the outputs are the blank class (= --alphabet), as Bai et al. 2018"},
    {"window", NULL, LB_OPT_INT, OPT(window), 1, 1 << 16, 0, TASK_BIT(LB_TASK_LOCAL),
     "target sums the last --window symbols"},
    {"classes", NULL, LB_OPT_INT, OPT(classes), 2, 1 << 20, 0, TASK_BIT(LB_TASK_LOCAL), "target modulus (= num_classes)"},
    {"modulus", NULL, LB_OPT_INT, OPT(modulus), 2, 1 << 16, 0, TASK_BIT(LB_TASK_MODSUM),
     "K: symbols 0..K-1, the target is their sum mod K (= num_classes)"},
    {"n_train", "train", LB_OPT_INT, OPT(n_train), 0, MAX_SPLIT, 0, ALL_TASKS, "sequences in the train split"},
    {"n_val", "val", LB_OPT_INT, OPT(n_val), 0, MAX_SPLIT, 0, ALL_TASKS, "sequences in the val split"},
    {"n_test", "test", LB_OPT_INT, OPT(n_test), 0, MAX_SPLIT, 0, ALL_TASKS, "sequences in the test split"},
    {"seed", NULL, LB_OPT_SEED, OPT(seed), 0, 0, 0, ALL_TASKS, "seed of every random draw (unsigned 64-bit)"},
};

enum { OPTION_COUNT = (int)(sizeof option_table / sizeof option_table[0]) };
/* A data file's recorded options are a bit mask over this table's rows. */
_Static_assert(OPTION_COUNT <= 64, "lb_task_print_recorded_options: more than 64 options");

/* ---- table access ---- */

const lb_option_spec *lb_option_table(int *count)
{
    *count = OPTION_COUNT;
    return option_table;
}

/* Compares a key spelled "--seq-len", "seq-len" or "seq_len" with a table name. */
static int key_matches(const char *key, const char *name)
{
    if (key[0] == '-' && key[1] == '-')
        key += 2;
    for (; *key && *name; key++, name++) {
        char k = *key == '-' ? '_' : *key;
        if (k != *name)
            return 0;
    }
    return *key == '\0' && *name == '\0';
}

const lb_option_spec *lb_option_find(const char *key)
{
    for (int i = 0; key && i < OPTION_COUNT; i++)
        if (key_matches(key, option_table[i].name) || (option_table[i].alias && key_matches(key, option_table[i].alias)))
            return &option_table[i];
    return NULL;
}

char *lb_option_flag(const char *key, char *buf, size_t size)
{
    size_t n = 0;
    if (key[0] == '-' && key[1] == '-')
        key += 2;
    if (size < 3) {
        if (size)
            buf[0] = '\0';
        return buf;
    }
    buf[n++] = '-';
    buf[n++] = '-';
    for (; *key && n + 1 < size; key++)
        buf[n++] = *key == '_' ? '-' : *key;
    buf[n] = '\0';
    return buf;
}

char *lb_option_real_str(double value, char *buf, size_t size)
{
    for (int digits = 6; digits <= 17; digits++) {
        snprintf(buf, size, "%.*g", digits, value);
        if (strtod(buf, NULL) == value || !isfinite(value))
            break;
    }
    return buf;
}

int lb_option_applies(const lb_option_spec *spec, lb_task_kind task) { return (spec->tasks >> task) & 1u; }

int64_t lb_option_get_int(const lb_task_options *opt, const lb_option_spec *spec)
{
    return *(const int64_t *)((const char *)opt + spec->offset);
}

void lb_option_set_int(lb_task_options *opt, const lb_option_spec *spec, int64_t value)
{
    *(int64_t *)((char *)opt + spec->offset) = value;
}

uint64_t lb_option_get_seed(const lb_task_options *opt, const lb_option_spec *spec)
{
    return *(const uint64_t *)((const char *)opt + spec->offset);
}

void lb_option_set_seed(lb_task_options *opt, const lb_option_spec *spec, uint64_t value)
{
    *(uint64_t *)((char *)opt + spec->offset) = value;
}

double lb_option_get_real(const lb_task_options *opt, const lb_option_spec *spec)
{
    return *(const double *)((const char *)opt + spec->offset);
}

void lb_option_set_real(lb_task_options *opt, const lb_option_spec *spec, double value)
{
    *(double *)((char *)opt + spec->offset) = value;
}

/* "[2, 1048576]", "[1e-06, 16]", with " (or auto)" where allowed. */
static char *range_str(const lb_option_spec *spec, char *buf, size_t size)
{
    char lo[32], hi[32];
    if (spec->type == LB_OPT_REAL)
        snprintf(buf, size, "[%s, %s]", lb_option_real_str(spec->min, lo, sizeof lo),
                 lb_option_real_str(spec->max, hi, sizeof hi));
    else
        snprintf(buf, size, "[%lld, %lld]%s", (long long)spec->min, (long long)spec->max,
                 spec->auto_ok ? " (or auto)" : "");
    return buf;
}

/* The error for `value` (text) outside the range, as an option or a file attribute. */
static lb_status out_of_range(const lb_option_spec *spec, const char *value, const char *file)
{
    char range[96], flag[64];
    if (file)
        return lb_error(LB_ERR_FORMAT, "%s: attribute '%s' = %s is outside %s", file, spec->name, value,
                        range_str(spec, range, sizeof range));
    return lb_error(LB_ERR_VALUE, "option %s: %s is outside %s", lb_option_flag(spec->name, flag, sizeof flag), value,
                    range_str(spec, range, sizeof range));
}

lb_status lb_option_check_int(const lb_option_spec *spec, int64_t value, const char *file)
{
    if (spec->type == LB_OPT_SEED || (spec->auto_ok && value == LB_OPTION_AUTO))
        return LB_OK;
    if (value >= (int64_t)spec->min && value <= (int64_t)spec->max)
        return LB_OK;
    char text[32];
    snprintf(text, sizeof text, "%lld", (long long)value);
    return out_of_range(spec, text, file);
}

lb_status lb_option_check_real(const lb_option_spec *spec, double value, const char *file)
{
    if (value >= spec->min && value <= spec->max)
        return LB_OK;
    char text[32];
    return out_of_range(spec, lb_option_real_str(value, text, sizeof text), file);
}

int lb_task_option_applies(lb_task_kind task, const char *key)
{
    LB_CHECK_ARG(key, 0);
    const lb_option_spec *spec = lb_option_find(key);
    return spec && task >= 0 && task < LB_TASK_COUNT && lb_option_applies(spec, task);
}

/* ---- names and defaults ---- */

const char *lb_task_name(lb_task_kind task) { return (task >= 0 && task < LB_TASK_COUNT) ? task_names[task] : NULL; }

char *lb_task_names_text(char *buf, size_t size)
{
    LB_CHECK_ARG(buf, NULL);
    size_t used = 0;
    if (!buf || size == 0)
        return buf;
    buf[0] = '\0';
    for (int k = 0; k < LB_TASK_COUNT && used < size; k++) {
        const char *sep = k == 0 ? "" : k == LB_TASK_COUNT - 1 ? " or " : ", ";
        int n = snprintf(buf + used, size - used, "%s%s", sep, task_names[k]);
        if (n < 0)
            break;
        used += (size_t)n;
    }
    return buf;
}

lb_status lb_task_parse_name(const char *name, lb_task_kind *out)
{
    LB_CHECK_ARG(out, LB_ERR_VALUE);
    for (int k = 0; name && k < LB_TASK_COUNT; k++) {
        if (strcmp(name, task_names[k]) == 0) {
            *out = (lb_task_kind)k;
            return LB_OK;
        }
    }
    char names[256];
    return lb_error(LB_ERR_VALUE, "unknown task '%s' (expected %s)", name ? name : "(null)",
                    lb_task_names_text(names, sizeof names));
}

void lb_task_options_default(lb_task_kind task, lb_task_options *opt)
{
    LB_CHECK_ARG(opt);
    static const int64_t default_seq_len[LB_TASK_COUNT] = {1024, 256, 120, 200, 64, 64, 64};
    if (task < 0 || task >= LB_TASK_COUNT)
        task = LB_TASK_SPIKE;
    memset(opt, 0, sizeof *opt);
    opt->task = task;
    opt->seq_len = default_seq_len[task];
    opt->variable_length = 0;
    opt->min_length = LB_OPTION_AUTO;
    opt->min_distance = LB_OPTION_AUTO;
    opt->max_distance = LB_OPTION_AUTO;
    opt->noise_types = 16;
    opt->sensors = 1;
    opt->readings = 8;
    opt->pairs = 8;
    opt->queries = LB_OPTION_AUTO;
    opt->key_vocab = 64;
    opt->value_vocab = 64;
    opt->power_a = 0.01;
    opt->copy_symbols = 10;
    opt->alphabet = 8;
    opt->selective = 0;
    opt->window = 3;
    opt->classes = 8;
    opt->modulus = 5; /* as Deletang et al. 2023's modular arithmetic */
    if (task == LB_TASK_PARITY)
        opt->alphabet = 2; /* binary strings, as Deletang et al. 2023 */
    opt->n_train = 10000;
    opt->n_val = 1000;
    opt->n_test = 1000;
    opt->seed = 1;
}

/* ---- parsing one option from text ---- */

/* Parsers of one value; `flag` is the option as the user typed it ("--seq-len"). */

static lb_status parse_flag(const char *flag, const char *value, int64_t *out)
{
    static const char *const yes[] = {"1", "true", "yes", "on"}, *const no[] = {"0", "false", "no", "off"};
    for (int i = 0; i < 4; i++) {
        if (strcmp(value, yes[i]) == 0) {
            *out = 1;
            return LB_OK;
        }
        if (strcmp(value, no[i]) == 0) {
            *out = 0;
            return LB_OK;
        }
    }
    return lb_error(LB_ERR_VALUE, "option %s: '%s' is not a flag value (use 0/1, true/false, yes/no or on/off)", flag,
                    value);
}

static lb_status parse_int(const lb_option_spec *spec, const char *flag, const char *value, int64_t *out)
{
    char range[96];
    if (spec->auto_ok && strcmp(value, "auto") == 0) {
        *out = LB_OPTION_AUTO;
        return LB_OK;
    }
    char *end = NULL;
    errno = 0;
    long long v = strtoll(value, &end, 10);
    if (end == value || *end != '\0' || isspace((unsigned char)value[0]))
        return lb_error(LB_ERR_VALUE, "option %s: '%s' is not a whole number%s", flag, value,
                        spec->auto_ok ? " or auto" : "");
    if (errno == ERANGE || v < (long long)spec->min || v > (long long)spec->max)
        return lb_error(LB_ERR_VALUE, "option %s: %s is outside %s", flag, value, range_str(spec, range, sizeof range));
    *out = (int64_t)v;
    return LB_OK;
}

static lb_status parse_seed(const char *flag, const char *value, uint64_t *out)
{
    char *end = NULL;
    errno = 0;
    if (!isdigit((unsigned char)value[0]))
        return lb_error(LB_ERR_VALUE, "option %s: '%s' is not an unsigned whole number", flag, value);
    unsigned long long v = strtoull(value, &end, 10);
    if (*end != '\0')
        return lb_error(LB_ERR_VALUE, "option %s: '%s' is not an unsigned whole number", flag, value);
    if (errno == ERANGE)
        return lb_error(LB_ERR_VALUE, "option %s: %s is outside [0, %llu]", flag, value, (unsigned long long)UINT64_MAX);
    *out = (uint64_t)v;
    return LB_OK;
}

static lb_status parse_real(const lb_option_spec *spec, const char *flag, const char *value, double *out)
{
    char range[96];
    char *end = NULL;
    errno = 0;
    double v = strtod(value, &end);
    if (end == value || *end != '\0' || isspace((unsigned char)value[0]))
        return lb_error(LB_ERR_VALUE, "option %s: '%s' is not a number", flag, value);
    if (errno == ERANGE || !isfinite(v))
        return lb_error(LB_ERR_VALUE, "option %s: '%s' is not a finite number: it must be in %s", flag, value,
                        range_str(spec, range, sizeof range));
    if (v < spec->min || v > spec->max)
        return lb_error(LB_ERR_VALUE, "option %s: %s is outside %s", flag, value, range_str(spec, range, sizeof range));
    *out = v;
    return LB_OK;
}

static lb_status unknown_key(const lb_task_options *opt, const char *key, const lb_option_spec *spec)
{
    char flag[64];
    if (key && (strcmp(key, "task") == 0 || strcmp(key, "--task") == 0))
        return lb_error(LB_ERR_VALUE, "option --task is chosen before the task's options, not among them");
    if (!spec)
        return lb_error(LB_ERR_VALUE, "unknown data option '%s' (see `lookback data --help`)", key ? key : "(null)");
    char tasks[256] = "";
    size_t used = 0;
    for (int k = 0; k < LB_TASK_COUNT && used < sizeof tasks; k++) {
        if (lb_option_applies(spec, (lb_task_kind)k)) {
            int n = snprintf(tasks + used, sizeof tasks - used, "%s%s", used ? ", " : "", task_names[k]);
            used += n > 0 ? (size_t)n : 0;
        }
    }
    return lb_error(LB_ERR_VALUE, "option %s does not apply to task %s (only to %s)",
                    lb_option_flag(key, flag, sizeof flag), lb_task_name(opt->task), tasks);
}

lb_status lb_task_set_option(lb_task_options *opt, const char *key, const char *value)
{
    LB_CHECK_ARG(opt, LB_ERR_VALUE);
    const lb_option_spec *spec = lb_option_find(key);
    if (!spec || !lb_option_applies(spec, opt->task))
        return unknown_key(opt, key, spec);
    char flag[64]; /* as typed: "--train" stays "--train", "--seq_len" becomes "--seq-len" */
    lb_option_flag(key, flag, sizeof flag);
    if (!value)
        return lb_error(LB_ERR_VALUE, "option %s needs a value", flag);
    lb_status st = LB_OK;
    int64_t i = 0;
    uint64_t u = 0;
    double d = 0;
    switch (spec->type) {
    case LB_OPT_FLAG:
        if ((st = parse_flag(flag, value, &i)) == LB_OK)
            lb_option_set_int(opt, spec, i);
        break;
    case LB_OPT_INT:
        if ((st = parse_int(spec, flag, value, &i)) == LB_OK)
            lb_option_set_int(opt, spec, i);
        break;
    case LB_OPT_SEED:
        if ((st = parse_seed(flag, value, &u)) == LB_OK)
            lb_option_set_seed(opt, spec, u);
        break;
    case LB_OPT_REAL:
        if ((st = parse_real(spec, flag, value, &d)) == LB_OK)
            lb_option_set_real(opt, spec, d);
        break;
    }
    return st;
}

/* ---- resolving auto values and checking combinations ---- */

/* How messages name options: "--max-distance" for the command line (file NULL), or
 * "max_distance" for the attributes of `file`. */
typedef struct namer {
    const char *file;
    char buf[6][48];
    int next;
} namer;

static const char *nm(namer *n, const char *name)
{
    if (n->file)
        return name;
    n->next = (n->next + 1) % 6;
    return lb_option_flag(name, n->buf[n->next], sizeof n->buf[n->next]);
}

/* An inconsistent combination: LB_ERR_VALUE, or for a file LB_ERR_FORMAT with the
 * file's name first. */
static lb_status combination_error(const namer *n, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static lb_status combination_error(const namer *n, const char *fmt, ...)
{
    char message[768];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(message, sizeof message, fmt, ap);
    va_end(ap);
    if (n->file)
        return lb_error(LB_ERR_FORMAT, "%s: the option attributes are inconsistent: %s", n->file, message);
    return lb_error(LB_ERR_VALUE, "%s", message);
}

static int64_t max64(int64_t a, int64_t b) { return a > b ? a : b; }

/* Shortest sequence the task's recipe can fill; `why` receives the formula. */
static int64_t task_min_length(const lb_task_options *o, namer *n, char *why, size_t size)
{
    int64_t queries = o->queries == LB_OPTION_AUTO ? o->pairs : o->queries;
    switch (o->task) {
    case LB_TASK_SPIKE: /* other spikes fill at most half the free slots */
        snprintf(why, size, "2 * (%s - 1) + 1", nm(n, "sensors"));
        return max64(2, 2 * (o->sensors - 1) + 1);
    case LB_TASK_RECALL:
        snprintf(why, size, "2 * %s + %s", nm(n, "pairs"), nm(n, "queries"));
        return 2 * o->pairs + queries;
    case LB_TASK_COPY: /* symbols, delimiter, outputs */
        snprintf(why, size, "2 * %s + 1", nm(n, "copy_symbols"));
        return 2 * o->copy_symbols + 1;
    case LB_TASK_LOCAL:
        snprintf(why, size, "%s", nm(n, "window"));
        return max64(2, o->window);
    default: snprintf(why, size, "2"); return 2;
    }
}

static lb_status check_ranges(const lb_task_options *o, const char *file)
{
    int count = 0;
    const lb_option_spec *t = lb_option_table(&count);
    for (int i = 0; i < count; i++) {
        if (!lb_option_applies(&t[i], o->task) || t[i].type == LB_OPT_SEED)
            continue;
        lb_status st = t[i].type == LB_OPT_REAL ? lb_option_check_real(&t[i], lb_option_get_real(o, &t[i]), file)
                                                : lb_option_check_int(&t[i], lb_option_get_int(o, &t[i]), file);
        if (st != LB_OK)
            return st;
    }
    return LB_OK;
}

static lb_status resolve_min_length(lb_task_options *o, namer *n)
{
    char why[160];
    int64_t need = task_min_length(o, n, why, sizeof why);
    if (!o->variable_length && o->min_length != LB_OPTION_AUTO && o->min_length != o->seq_len)
        return combination_error(n, "%s %lld applies to variable-length sequences only: add %s 1 (every sequence "
                                    "is %s %lld long otherwise)",
                                 nm(n, "min_length"), (long long)o->min_length, nm(n, "variable_length"),
                                 nm(n, "seq_len"), (long long)o->seq_len);
    if (!o->variable_length) {
        o->min_length = o->seq_len;
    } else if (o->min_length == LB_OPTION_AUTO) {
        o->min_length = max64((o->seq_len + 1) / 2, need);
        if (lb_task_option_applies(o->task, "max_distance") && o->max_distance != LB_OPTION_AUTO)
            o->min_length = max64(o->min_length, o->max_distance + 1);
        o->min_length = o->min_length < o->seq_len ? o->min_length : o->seq_len;
    }
    if (o->min_length > o->seq_len)
        return combination_error(n, "%s %lld exceeds %s %lld", nm(n, "min_length"), (long long)o->min_length,
                                 nm(n, "seq_len"), (long long)o->seq_len);
    if (o->min_length < need) {
        char hint[96] = "";
        if (!n->file)
            snprintf(hint, sizeof hint, " (raise %s%s)", nm(n, "seq_len"), o->variable_length ? " or --min-length" : "");
        return combination_error(n, "sequences of length %lld are too short for task %s, which needs %s = %lld%s",
                                 (long long)o->min_length, lb_task_name(o->task), why, (long long)need, hint);
    }
    return LB_OK;
}

static lb_status resolve_distance(lb_task_options *o, namer *n)
{
    if (!lb_task_option_applies(o->task, "min_distance"))
        return LB_OK;
    int64_t longest = o->min_length - 1;
    if (o->min_distance == LB_OPTION_AUTO)
        o->min_distance = o->task == LB_TASK_ADDING ? max64(1, o->min_length / 2) : 1;
    if (o->max_distance == LB_OPTION_AUTO)
        o->max_distance = longest;
    if (o->min_distance > o->max_distance)
        return combination_error(n, "%s %lld exceeds %s %lld", nm(n, "min_distance"), (long long)o->min_distance,
                                 nm(n, "max_distance"), (long long)o->max_distance);
    if (o->max_distance > longest)
        return combination_error(n, "%s %lld exceeds %s - 1 = %lld", nm(n, "max_distance"), (long long)o->max_distance,
                                 nm(n, o->variable_length ? "min_length" : "seq_len"), (long long)longest);
    return LB_OK;
}

static lb_status check_task_specific(lb_task_options *o, namer *n)
{
    if (o->task == LB_TASK_RECALL) {
        if (o->queries == LB_OPTION_AUTO)
            o->queries = o->pairs;
        if (o->queries > o->pairs)
            return combination_error(n, "%s %lld exceeds %s %lld (each key is queried once)", nm(n, "queries"),
                                     (long long)o->queries, nm(n, "pairs"), (long long)o->pairs);
        if (o->pairs > o->key_vocab)
            return combination_error(n, "%s %lld exceeds %s %lld (keys are distinct)", nm(n, "pairs"),
                                     (long long)o->pairs, nm(n, "key_vocab"), (long long)o->key_vocab);
    }
    if (lb_task_vocab_size(o) > INT32_MAX)
        return combination_error(n, "task %s: a vocabulary of %lld tokens does not fit int32", lb_task_name(o->task),
                                 (long long)lb_task_vocab_size(o));
    return LB_OK;
}

lb_status lb_task_options_check(lb_task_options *opt, const char *file)
{
    if (opt->task < 0 || opt->task >= LB_TASK_COUNT)
        return lb_error(LB_ERR_VALUE, "lb_task_options_resolve: invalid task kind %d", (int)opt->task);
    namer n = {.file = file};
    lb_task_options o = *opt;
    lb_status st = check_ranges(&o, file);
    if (st == LB_OK)
        st = resolve_min_length(&o, &n);
    if (st == LB_OK)
        st = resolve_distance(&o, &n);
    if (st == LB_OK)
        st = check_task_specific(&o, &n);
    if (st == LB_OK)
        *opt = o;
    return st;
}

lb_status lb_task_options_resolve(lb_task_options *opt)
{
    LB_CHECK_ARG(opt, LB_ERR_VALUE);
    return lb_task_options_check(opt, NULL);
}

/* ---- derived sizes ---- */

int64_t lb_task_vocab_size(const lb_task_options *o)
{
    LB_CHECK_ARG(o, -1);
    switch (o->task) {
    case LB_TASK_SPIKE: return 1 + o->noise_types + o->sensors * o->readings + o->sensors;
    case LB_TASK_RECALL: return 1 + o->noise_types + o->key_vocab + o->value_vocab;
    case LB_TASK_COPY: return o->alphabet + 3;
    case LB_TASK_LOCAL: return o->alphabet + 1;
    case LB_TASK_PARITY: return o->alphabet + 1;
    case LB_TASK_MODSUM: return o->modulus + 2; /* PAD, K symbols, the query */
    default: return 0;
    }
}

int64_t lb_task_num_classes(const lb_task_options *o)
{
    LB_CHECK_ARG(o, -1);
    switch (o->task) {
    case LB_TASK_SPIKE: return o->readings;
    case LB_TASK_RECALL: return o->value_vocab;
    case LB_TASK_COPY: return o->alphabet + (o->blank_targets ? 1 : 0);
    case LB_TASK_LOCAL: return o->classes;
    case LB_TASK_PARITY: return 2;
    case LB_TASK_MODSUM: return o->modulus;
    default: return 0;
    }
}

int64_t lb_task_num_features(const lb_task_options *o)
{
    LB_CHECK_ARG(o, -1);
    return o->task == LB_TASK_ADDING ? 2 : 0;
}

/* ---- printing ---- */

static void print_value(const lb_task_options *o, const lb_option_spec *spec, FILE *out)
{
    if (spec->type == LB_OPT_SEED)
        fprintf(out, "%llu", (unsigned long long)lb_option_get_seed(o, spec));
    else if (spec->type == LB_OPT_REAL)
        fprintf(out, "%g", lb_option_get_real(o, spec));
    else if (spec->auto_ok && lb_option_get_int(o, spec) == LB_OPTION_AUTO)
        fputs("auto", out);
    else
        fprintf(out, "%lld", (long long)lb_option_get_int(o, spec));
}

void lb_task_print_options(const lb_task_options *opt, const char *sep, FILE *out)
{
    LB_CHECK_ARG(opt);
    LB_CHECK_ARG(sep);
    LB_CHECK_ARG(out);
    int count = 0, first = 1;
    const lb_option_spec *t = lb_option_table(&count);
    for (int i = 0; i < count; i++) {
        if (!lb_option_applies(&t[i], opt->task))
            continue;
        fprintf(out, "%s%s=", first ? "" : sep, t[i].name);
        print_value(opt, &t[i], out);
        first = 0;
    }
}

void lb_task_print_recorded_options(const lb_task_options *opt, uint64_t recorded, const char *sep, FILE *out)
{
    LB_CHECK_ARG(opt);
    LB_CHECK_ARG(out);
    if (!sep)
        sep = " ";
    int count = 0, first = 1;
    const lb_option_spec *t = lb_option_table(&count);
    for (int i = 0; i < count; i++) {
        if (!lb_option_applies(&t[i], opt->task))
            continue;
        fprintf(out, "%s%s=", first ? "" : sep, t[i].name);
        if (i < 64 && (recorded >> i & 1u))
            print_value(opt, &t[i], out);
        else
            fputs("not recorded", out);
        first = 0;
    }
}

static void print_defaults(const lb_option_spec *spec, FILE *out)
{
    fputs("      default:", out);
    for (int k = 0; k < LB_TASK_COUNT; k++) {
        if (!lb_option_applies(spec, (lb_task_kind)k))
            continue;
        lb_task_options o;
        lb_task_options_default((lb_task_kind)k, &o);
        fprintf(out, " %s ", task_names[k]);
        print_value(&o, spec, out);
    }
    fputc('\n', out);
}

void lb_task_print_help(FILE *out)
{
    LB_CHECK_ARG(out);
    fputs("Tasks (docs/data.md gives each recipe and chance level):\n"
          "  spike   the last event (an alarm) names a sensor; answer its spike's reading (default)\n"
          "  recall  multi-query associative recall (MQAR): answer the value bound to each queried key\n"
          "  copy    copy memory: emit the symbols seen at the start (--selective: scattered) in order\n"
          "  adding  adding problem: sum the two marked values (regression, real-valued inputs)\n"
          "  local   control task: (sum of the last --window symbols) mod --classes\n"
          "  parity  state tracking: is the count of symbol 1 in the whole sequence odd?\n"
          "  modsum  state tracking: the sum of every symbol mod --modulus, asked at the end\n"
          "Options (--name value; 'auto' where shown):\n",
          out);
    int count = 0;
    const lb_option_spec *t = lb_option_table(&count);
    for (int i = 0; i < count; i++) {
        char flag[64], names[96], lo[32], hi[32];
        lb_option_flag(t[i].name, flag, sizeof flag);
        if (t[i].alias) {
            char alias[32];
            snprintf(names, sizeof names, "%s, %s", lb_option_flag(t[i].alias, alias, sizeof alias), flag);
        } else {
            snprintf(names, sizeof names, "%s", flag);
        }
        fprintf(out, "  %-18s %s", names, t[i].help);
        if (t[i].type == LB_OPT_INT)
            fprintf(out, " [%lld..%lld%s]", (long long)t[i].min, (long long)t[i].max, t[i].auto_ok ? " | auto" : "");
        else if (t[i].type == LB_OPT_REAL)
            fprintf(out, " [%s..%s]", lb_option_real_str(t[i].min, lo, sizeof lo),
                    lb_option_real_str(t[i].max, hi, sizeof hi));
        else if (t[i].type == LB_OPT_FLAG)
            fputs(" [0|1]", out);
        fputc('\n', out);
        print_defaults(&t[i], out);
    }
}

/* Above this many bytes of data before compression, generation needs --allow-large. */
static const int64_t large_bytes = (int64_t)16 << 30;

/* "3.8 TiB", "512.0 MiB". */
static char *bytes_str(double bytes, char *buf, size_t size)
{
    static const char *const units[] = {"bytes", "KiB", "MiB", "GiB", "TiB", "PiB", "EiB"};
    int u = 0;
    for (; bytes >= 1024 && u < 6; u++)
        bytes /= 1024;
    snprintf(buf, size, u && bytes != (double)(int64_t)bytes ? "%.1f %s" : "%.0f %s", bytes, units[u]);
    return buf;
}

lb_status lb_task_check_size(const lb_task_options *opt, const char *output, int allow_large, int quiet)
{
    LB_CHECK_ARG(opt && output, LB_ERR_VALUE);
    int64_t raw = lb_task_raw_bytes(opt);
    char size[32], limit[32], free_text[32];
    if (raw > large_bytes && !allow_large)
        return lb_error(LB_ERR_VALUE,
                        "%lld sequences of %lld positions hold %s before compression, over the %s limit (reading "
                        "the file back needs as much memory): lower --train/--val/--test or --seq-len, or add "
                        "--allow-large",
                        (long long)(opt->n_train + opt->n_val + opt->n_test), (long long)opt->seq_len,
                        bytes_str((double)raw, size, sizeof size), bytes_str((double)large_bytes, limit, sizeof limit));
    char folder[4096];
    const char *slash = strrchr(output, '/');
    if (slash == output)
        snprintf(folder, sizeof folder, "/");
    else if (slash)
        snprintf(folder, sizeof folder, "%.*s", (int)(slash - output), output);
    else
        snprintf(folder, sizeof folder, ".");
    struct statvfs vfs;
    if (!quiet && statvfs(folder, &vfs) == 0 && (double)vfs.f_bavail * (double)vfs.f_frsize < (double)raw)
        fprintf(stderr,
                "lookback data: note: %s has %s free and the data is %s before compression; if the disk fills, "
                "generation stops and removes its partial file\n",
                folder, bytes_str((double)vfs.f_bavail * (double)vfs.f_frsize, free_text, sizeof free_text),
                bytes_str((double)raw, size, sizeof size));
    return LB_OK;
}

/* `lookback data`: generate a synthetic long-range task into an HDF5 file, and
 * `lookback data info FILE`: validate a data file and describe it.
 *
 * Every generator option of data/tasks.h is accepted as `--name value` (or
 * `--name=value`; hyphens or underscores), forwarded to lb_task_set_option, which
 * checks the name against the chosen task and the value against the option's range,
 * and names the option when either is wrong. `--train/--val/--test N` are short for
 * `--n-train/--n-val/--n-test N`. A flag option given without a value means 1.
 */
#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "data/dataset.h"
#include "data/tasks.h"
#include "train/cli.h"

static void data_usage(FILE *out)
{
    fputs("usage: lookback data [--task TASK] [--seq-len T] [task options] [--train N --val N --test N]\n"
          "                     [--seed S] -o FILE.h5 [--force] [--quiet]\n"
          "       lookback data info FILE.h5\n"
          "\n"
          "Generates the train, val and test splits of a synthetic task into FILE.h5 (format in\n"
          "docs/data.md); the file is a pure function of the options, seed included. 'data info'\n"
          "validates a file completely and describes it (exit 1 on a bad file).\n"
          "\n"
          "  --task TASK        spike (default), recall, copy, adding or local\n"
          "  -o, --output FILE  the file to write (required)\n"
          "  --force            overwrite FILE if it exists (it is replaced only once complete)\n"
          "  --quiet            no progress display\n"
          "  --train/--val/--test N   the same as --n-train/--n-val/--n-test N\n"
          "  -h, --help         this help\n"
          "\n",
          out);
    lb_task_print_help(out);
}

/* The table name behind a command-line alias, or the key itself. */
static const char *alias(const char *key)
{
    static const struct {
        const char *from, *to;
    } aliases[] = {{"--train", "n_train"}, {"--val", "n_val"}, {"--test", "n_test"}};
    for (size_t i = 0; i < sizeof aliases / sizeof aliases[0]; i++)
        if (strcmp(key, aliases[i].from) == 0)
            return aliases[i].to;
    return key;
}

/* An option name rather than a value: "-x" or "--x", but not "-5" or "-". */
static int is_option(const char *arg)
{
    return arg[0] == '-' && arg[1] != '\0' && !isdigit((unsigned char)arg[1]) && arg[1] != '.';
}

/* Generation progress: silent for a file written within a second, then a live bar
 * (a terminal) or a line every 10 seconds. */
typedef struct data_progress {
    lb_progress bar;
    int enabled, shown;
} data_progress;

static void on_progress(int64_t done, int64_t total, void *user)
{
    data_progress *p = user;
    if (!p->enabled)
        return;
    if (!p->shown) {
        if (lb_cli_now() - p->bar.start < 1.0)
            return;
        p->shown = 1;
        p->bar.total = total;
    }
    lb_progress_update(&p->bar, done, NULL);
}

static int data_info(int argc, char **argv)
{
    const char *path = NULL;
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--help") == 0 || strcmp(argv[i], "-h") == 0) {
            fputs("usage: lookback data info FILE.h5\n"
                  "Validates every dataset and attribute of FILE.h5 and prints the task, options,\n"
                  "vocabulary and chance level, shapes, split sizes, distances and label histogram.\n",
                  stdout);
            return 0;
        }
        if (argv[i][0] == '-' && argv[i][1] != '\0')
            return lb_cli_error("data info", 2, "unknown option '%s' (usage: lookback data info FILE.h5)", argv[i]);
        if (path)
            return lb_cli_error("data info", 2, "one file at a time: got '%s' and '%s'", path, argv[i]);
        path = argv[i];
    }
    if (!path)
        return lb_cli_error("data info", 2, "missing the file to describe (usage: lookback data info FILE.h5)");
    lb_dataset *ds = lb_dataset_open(path);
    if (!ds)
        return lb_cli_fail("data info");
    lb_status st = lb_dataset_print_info(ds, stdout);
    lb_dataset_close(ds);
    if (st == LB_OK && fflush(stdout) != 0)
        st = lb_error(LB_ERR_IO, "writing to standard output failed");
    return st == LB_OK ? 0 : lb_cli_fail("data info");
}

int lb_cli_data(int argc, char **argv)
{
    if (argc >= 2 && strcmp(argv[1], "info") == 0)
        return data_info(argc - 1, argv + 1);

    const char *task_name = "spike", *output = NULL;
    int force = 0, quiet = 0, n_pairs = 0;
    /* (key, value) pairs for the task's options, applied once the task is known. */
    const char **keys = calloc((size_t)argc + 1, sizeof *keys);
    const char **values = calloc((size_t)argc + 1, sizeof *values);
    char **owned = calloc((size_t)argc + 1, sizeof *owned); /* keys split from "--key=value" */
    int n_owned = 0, code = 0;
    if (!keys || !values || !owned) {
        code = lb_cli_error("data", 1, "out of memory");
        goto done;
    }
    for (int i = 1; i < argc; i++) {
        const char *arg = argv[i];
        if (strcmp(arg, "--help") == 0 || strcmp(arg, "-h") == 0) {
            data_usage(stdout);
            goto done;
        }
        if (strcmp(arg, "--force") == 0) {
            force = 1;
            continue;
        }
        if (strcmp(arg, "--quiet") == 0 || strcmp(arg, "-q") == 0) {
            quiet = 1;
            continue;
        }
        if (arg[0] != '-' || arg[1] == '\0') {
            code = lb_cli_error("data", 2, "unexpected argument '%s' (options are --name value; the output file "
                                           "goes after -o)", arg);
            goto done;
        }
        /* Split "--key=value"; otherwise the value is the next argument unless that is
         * another option (then it is absent, which a flag accepts). */
        const char *eq = strchr(arg, '=');
        const char *key = arg, *value = NULL;
        if (eq && arg[1] == '-') {
            char *k = strndup(arg, (size_t)(eq - arg));
            if (!k) {
                code = lb_cli_error("data", 1, "out of memory");
                goto done;
            }
            owned[n_owned++] = k;
            key = k;
            value = eq + 1;
        } else if (i + 1 < argc && !is_option(argv[i + 1])) {
            value = argv[++i];
        }
        if (strcmp(key, "-o") == 0 || strcmp(key, "--output") == 0) {
            if (!value || !*value) {
                code = lb_cli_error("data", 2, "%s needs a file name", key);
                goto done;
            }
            output = value;
        } else if (strcmp(key, "--task") == 0) {
            if (!value) {
                code = lb_cli_error("data", 2, "--task needs a value (spike, recall, copy, adding or local)");
                goto done;
            }
            task_name = value;
        } else if (key[1] != '-') {
            code = lb_cli_error("data", 2, "unknown option '%s' (see `lookback data --help`)", key);
            goto done;
        } else {
            keys[n_pairs] = key;
            values[n_pairs++] = value;
        }
    }

    lb_task_kind task;
    if (lb_task_parse_name(task_name, &task) != LB_OK) {
        code = lb_cli_error("data", 2, "--task: %s", lb_last_error());
        goto done;
    }
    lb_task_options opt;
    lb_task_options_default(task, &opt);
    for (int p = 0; p < n_pairs; p++) {
        const char *name = alias(keys[p]);
        if (!values[p]) {
            /* No value: only a flag may stand alone, meaning "on". */
            lb_task_options probe = opt;
            if (lb_task_set_option(&probe, name, "true") == LB_OK) {
                opt = probe;
                continue;
            }
            if (lb_task_option_applies(task, name)) /* else the message names the unknown option */
                lb_error(LB_ERR_VALUE, "option %s needs a value", keys[p]);
            code = lb_cli_error("data", 2, "%s", lb_last_error());
            goto done;
        }
        if (lb_task_set_option(&opt, name, values[p]) != LB_OK) {
            code = lb_cli_error("data", 2, "%s", lb_last_error());
            goto done;
        }
    }
    if (lb_task_options_resolve(&opt) != LB_OK) {
        code = lb_cli_error("data", 2, "%s", lb_last_error());
        goto done;
    }
    if (!output) {
        code = lb_cli_error("data", 2, "missing the output file: add -o FILE.h5");
        goto done;
    }
    if (lb_cli_exists(output) && !force) {
        code = lb_cli_error("data", 1, "%s already exists; use --force to overwrite it", output);
        goto done;
    }

    data_progress progress = {.enabled = !quiet};
    lb_progress_begin(&progress.bar, "generate", opt.n_train + opt.n_val + opt.n_test);
    double start = lb_cli_now();
    lb_status st = lb_task_generate(&opt, output, on_progress, &progress);
    if (progress.shown)
        lb_progress_end(&progress.bar);
    if (st != LB_OK) {
        code = lb_cli_fail("data");
        goto done;
    }
    struct stat sb;
    double megabytes = stat(output, &sb) == 0 ? (double)sb.st_size / 1e6 : 0;
    printf("wrote %s: task %s, seq_len %lld, train %lld, val %lld, test %lld (%.2f MB in %.1f s)\n", output,
           lb_task_name(task), (long long)opt.seq_len, (long long)opt.n_train, (long long)opt.n_val,
           (long long)opt.n_test, megabytes, lb_cli_now() - start);
    fputs("options: ", stdout);
    lb_task_print_options(&opt, " ", stdout);
    fputc('\n', stdout);

done:
    for (int k = 0; owned && k < n_owned; k++)
        free(owned[k]);
    free(owned);
    free(keys);
    free(values);
    return code;
}

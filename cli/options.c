/* Command-line spellings: which options take paths, and one option given twice in any
 * spelling. The options themselves are the run configuration's table (lab/run_config.h). */
#include <ctype.h>
#include <stdio.h>
#include <string.h>

#include "cli/cli.h"

int lb_cli_option_takes_path(const char *option)
{
    static const char *const paths[] = {"-o", "--out", "--output", "--data", "--checkpoint", "--input", "--init-from",
                                        "--resume", "--config", "--attention-out", "--data-dir", "--train", "--eval",
                                        "--prompt-file"};
    for (size_t i = 0; option && i < sizeof paths / sizeof paths[0]; i++)
        if (strcmp(option, paths[i]) == 0)
            return 1;
    return 0;
}

/* An option name rather than a value: "-x" or "--x", but not "-5", "-.5" or "-". */
static int looks_like_option(const char *arg)
{
    if (arg[0] != '-' || arg[1] == '\0')
        return 0;
    const char *p = arg + (arg[1] == '-' ? 2 : 1);
    return *p && !isdigit((unsigned char)*p) && *p != '.';
}

/* The option an argument names, as one canonical spelling: "--n_train=3" -> "n-train",
 * "-o" -> "o", then the command's aliases ("-o" and "--output" of data are one option). */
static void canonical_option(const char *command, const char *arg, char *buf, size_t size)
{
    static const struct {
        const char *command, *alias, *name;
    } aliases[] = {
        {NULL, "h", "help"},          {"data", "o", "output"},      {"data", "q", "quiet"},
        {"data", "train", "n-train"}, {"data", "val", "n-val"},     {"data", "test", "n-test"},
        {"predict", "o", "out"},      {"generate", "n", "max-new-tokens"},
    };
    const char *p = arg + (arg[1] == '-' ? 2 : 1);
    size_t n = arg[1] == '-' ? strcspn(p, "=") : 1; /* "-ofile": the option is 'o' */
    if (n >= size)
        n = size - 1;
    for (size_t i = 0; i < n; i++)
        buf[i] = p[i] == '_' ? '-' : p[i];
    buf[n] = '\0';
    for (size_t i = 0; i < sizeof aliases / sizeof aliases[0]; i++)
        if ((!aliases[i].command || strcmp(aliases[i].command, command) == 0) && strcmp(buf, aliases[i].alias) == 0) {
            snprintf(buf, size, "%s", aliases[i].name);
            return;
        }
}

/* The value an option argument carries ("--lr=3" or "--lr 3"), or NULL when it has none
 * (a flag, or an option followed by another option). */
static const char *option_value(int argc, char *const *argv, int i)
{
    const char *eq = argv[i][1] == '-' ? strchr(argv[i], '=') : NULL;
    if (eq)
        return eq + 1;
    if (argv[i][1] != '-' && argv[i][2] != '\0')
        return argv[i] + 2; /* "-ofile" */
    return i + 1 < argc && argv[i + 1] && !looks_like_option(argv[i + 1]) ? argv[i + 1] : NULL;
}

lb_status lb_cli_check_repeats(const char *command, int argc, char *const *argv)
{
    LB_CHECK_ARG(command, LB_ERR_VALUE);
    LB_CHECK_ARG(argv, LB_ERR_VALUE);
    enum { MAX_SEEN = 256 };
    char names[MAX_SEEN][64];
    int first[MAX_SEEN], n = 0;
    for (int i = 1; i < argc && argv[i]; i++) {
        if (strcmp(argv[i], "--") == 0)
            break; /* the rest are arguments, not options */
        if (!looks_like_option(argv[i]))
            continue;
        char name[64];
        canonical_option(command, argv[i], name, sizeof name);
        for (int k = 0; k < n; k++) {
            if (strcmp(names[k], name) != 0)
                continue;
            const char *was = argv[first[k]];
            size_t was_len = strcspn(was, "="), now_len = strcspn(argv[i], "=");
            const char *v1 = option_value(argc, argv, first[k]), *v2 = option_value(argc, argv, i);
            char values[600] = "";
            if (v1 && v2)
                snprintf(values, sizeof values, " ('%.256s', then '%.256s')", v1, v2);
            if (was_len == now_len && strncmp(was, argv[i], was_len) == 0)
                return lb_error(LB_ERR_VALUE, "%.*s is given twice%s; give it once", (int)now_len, argv[i], values);
            return lb_error(LB_ERR_VALUE, "%.*s and %.*s are the same option, given twice%s; give it once",
                            (int)was_len, was, (int)now_len, argv[i], values);
        }
        if (n < MAX_SEEN) {
            snprintf(names[n], sizeof names[n], "%s", name);
            first[n++] = i;
        }
    }
    return LB_OK;
}

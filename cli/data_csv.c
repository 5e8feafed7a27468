/* `lookback data csv FILE.csv -o events.h5`: a CSV event log into a data file of
 * windows (data/events.h: lb_csv_import), or with --like, new rows read with the schema
 * of a trained model or of its training file (lb_csv_import_like). */
#include <errno.h>
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli/cli.h"
#include "lab/files.h"
#include "lab/run_config.h"
#include "data/events.h"
#include "data/output.h"
#include "train/trainer.h"

static void csv_usage(FILE *out)
{
    fputs("usage: lookback data csv FILE.csv -o FILE.h5 --label COL (--features COLS | --tokens COLS)\n"
          "                         [--sequence-key COLS] [--order-key COL [--order-as text|number]]\n"
          "                         [--classes K] [--label-per event|sequence]\n"
          "                         [--seq-len T] [--stride S] [--split-by time|sequence] [--val F] [--test F]\n"
          "                         [--seed N] [--missing refuse|skip|previous] [--short skip|refuse] [--force]\n"
          "       lookback data csv NEW.csv -o NEW.h5 --like CHECKPOINT.h5|TRAIN.h5 [--force]\n"
          "\n"
          "Reads a CSV event log (RFC 4180: a header row naming the columns; quoted fields may hold\n"
          "commas, quotes and line breaks; LF or CRLF) and writes its rows as windows of a lookback\n"
          "data file (docs/events.md). COLS are comma-separated column names.\n"
          "\n"
          "  --sequence-key COLS  rows with the same values here form one source's sequence\n"
          "                       (default: the whole file is one source)\n"
          "  --order-key COL      sort each source's rows by COL; ties keep file order (default: file\n"
          "                       order). Values compare as numbers when all are numbers, as text\n"
          "                       (byte order: ISO 8601 times sort right) when none is; a column of\n"
          "                       both is refused, naming the first value of the rarer kind\n"
          "  --order-as KIND      text: compare every order value as text; number: every value must\n"
          "                       be a decimal number (default: decided by the values, as above)\n"
          "  --features COLS      numeric columns, standardised with the train split's mean and std\n"
          "  --tokens COLS        categorical columns, one-hot; a value unseen in training has its own\n"
          "                       slot (id 0)\n"
          "  --label COL          integer classes 0, 1, ... (required); the classes are 0 to the\n"
          "                       largest label, refused when more than half of them have no row\n"
          "                       (a stray value: the values and its row are named)\n"
          "  --classes K          the classes are 0..K-1: a label outside is refused by row\n"
          "  --label-per WHAT     event: every row is scored (default); sequence: each window is\n"
          "                       scored by its last row's label\n"
          "  --seq-len T          rows per window (default 64)\n"
          "  --stride S           a window starts every S rows (default T); a last window ends at\n"
          "                       each segment's last row; each row's label is scored once\n"
          "  --split-by HOW       time: each source's first rows train, later rows val then test\n"
          "                       (default); sequence: whole sources per split, shuffled by --seed\n"
          "  --val F, --test F    fractions of each source's rows (time) or of the sources\n"
          "                       (sequence), default 0.15 each\n"
          "  --seed N             the shuffle of --split-by sequence (default 1)\n"
          "  --missing POLICY     an empty value: refuse (default: one error naming the row and\n"
          "                       column), skip (leave the row out, counted), previous (a feature or\n"
          "                       token takes the source's previous value)\n"
          "  --short POLICY       a source with fewer rows in a split than one window: skip (counted,\n"
          "                       default) or refuse\n"
          "  --like FILE          read with the schema of a checkpoint or of an imported data file:\n"
          "                       its columns, scaling, token maps, seq_len and stride; every window\n"
          "                       goes to the test split (for eval on new data)\n"
          "  -o, --output FILE    the data file to write (required); --force replaces it\n"
          "\n"
          "Every bad input stops with one line naming the file, row, line and column, exit 1, and\n"
          "writes nothing.\n",
          out);
}

/* The schema of --like: a checkpoint's (lb_checkpoint_read_events), else a data file's. */
static lb_event_schema *like_schema(const char *path)
{
    lb_event_schema *s = NULL;
    if (lb_checkpoint_read_events(path, &s) == LB_OK) {
        if (!s)
            lb_error(LB_ERR_VALUE, "%s: the model of this checkpoint was not trained on an imported CSV file (no events "
                     "schema)", path);
        return s;
    }
    lb_clear_error();
    lb_dataset *ds = lb_dataset_open(path);
    if (!ds)
        return NULL;
    size_t len = 0;
    const char *json = lb_dataset_events_json(ds, &len);
    if (!json)
        lb_error(LB_ERR_VALUE, "%s: not an imported CSV file (task %s): --like needs a checkpoint or a file made by "
                 "lookback data csv", path, lb_dataset_task_name(ds));
    else
        s = lb_event_schema_from_json(json, len, path);
    lb_dataset_close(ds);
    return s;
}

/* The command line of data csv. */
typedef struct csv_args {
    const char *output, *like;
    lb_csv_options opt;
    int force, given; /* given: an import option was set (not allowed with --like) */
} csv_args;

/* Reads the options into a; -1 to go on, else the exit code (printed). */
static int csv_parse(int argc, char **argv, csv_args *a)
{
    const char *cmd = "data csv";
    static const struct option opts[] = {
        {"sequence-key", required_argument, NULL, 'k'}, {"order-key", required_argument, NULL, 'r'},
        {"order-as", required_argument, NULL, 'a'},     {"classes", required_argument, NULL, 'K'},
        {"features", required_argument, NULL, 'f'},     {"tokens", required_argument, NULL, 'n'},
        {"label", required_argument, NULL, 'l'},        {"label-per", required_argument, NULL, 'p'},
        {"seq-len", required_argument, NULL, 'T'},      {"stride", required_argument, NULL, 'S'},
        {"split-by", required_argument, NULL, 'b'},     {"val", required_argument, NULL, 'v'},
        {"test", required_argument, NULL, 'x'},         {"seed", required_argument, NULL, 's'},
        {"missing", required_argument, NULL, 'm'},      {"short", required_argument, NULL, 'q'},
        {"like", required_argument, NULL, 'L'},         {"output", required_argument, NULL, 'o'},
        {"force", no_argument, NULL, 'F'},              {"help", no_argument, NULL, 'h'},
        {NULL, 0, NULL, 0},
    };
    optind = 1;
    opterr = 0;
    int c;
    lb_status st = LB_OK;
    int64_t number = 0;
    while ((c = getopt_long(argc, argv, ":ho:", opts, NULL)) != -1 && st == LB_OK) {
        a->given += c != 'o' && c != 'F' && c != 'L' && c != 'h';
        switch (c) {
        case 'k': a->opt.sequence_key = optarg; break;
        case 'r': a->opt.order_key = optarg; break;
        case 'a': st = lb_order_as_parse(optarg, &a->opt.order_as); break;
        case 'K':
            st = lb_option_int("--classes", optarg, 2, 1 << 20, &number);
            a->opt.num_classes = number;
            break;
        case 'f': a->opt.features = optarg; break;
        case 'n': a->opt.tokens = optarg; break;
        case 'l': a->opt.label = optarg; break;
        case 'p': st = lb_label_per_parse(optarg, &a->opt.label_per); break;
        case 'T':
            st = lb_option_int("--seq-len", optarg, 1, 1 << 20, &number);
            a->opt.seq_len = number;
            break;
        case 'S':
            st = lb_option_int("--stride", optarg, 1, 1 << 20, &number);
            a->opt.stride = number;
            break;
        case 'b': st = lb_split_by_parse(optarg, &a->opt.split_by); break;
        case 'v': st = lb_option_real("--val", optarg, 0, 0.99, &a->opt.val_fraction); break;
        case 'x': st = lb_option_real("--test", optarg, 0, 0.99, &a->opt.test_fraction); break;
        case 's':
            st = lb_option_int("--seed", optarg, 0, INT64_MAX, &number);
            a->opt.seed = (uint64_t)number;
            break;
        case 'm': st = lb_missing_parse(optarg, &a->opt.missing); break;
        case 'q': st = lb_short_parse(optarg, &a->opt.short_policy); break;
        case 'L': a->like = optarg; break;
        case 'o': a->output = optarg; break;
        case 'F': a->force = 1; break;
        case 'h': csv_usage(stdout); return 0;
        default: return lb_cli_bad_option(cmd, c, argv);
        }
    }
    if (st != LB_OK)
        return lb_cli_error(cmd, 2, "%s", lb_last_error());
    return -1;
}

/* What the import wrote. */
static void print_import(const char *output, const lb_event_schema *s)
{
    printf("wrote %s: %lld rows of %lld sources; windows of %lld rows: train %lld, val %lld, test %lld; %lld inputs per "
           "row, %lld classes",
           output, (long long)s->rows, (long long)s->sources, (long long)s->seq_len, (long long)s->windows[0],
           (long long)s->windows[1], (long long)s->windows[2], (long long)s->input_features, (long long)s->num_classes);
    if (s->rows_skipped)
        printf("; %lld rows with missing values left out", (long long)s->rows_skipped);
    if (s->segments_short)
        printf("; %lld split segments shorter than a window skipped", (long long)s->segments_short);
    fputc('\n', stdout);
}

int lb_cli_data_csv(int argc, char **argv)
{
    const char *cmd = "data csv";
    csv_args a = {0};
    lb_csv_options_default(&a.opt);
    int code = csv_parse(argc, argv, &a);
    if (code >= 0)
        return code;
    const char *output = a.output, *like = a.like;
    lb_csv_options opt = a.opt;
    int force = a.force, given = a.given;
    lb_status st;
    if (optind >= argc)
        return lb_cli_error(cmd, 2, "missing the CSV file (usage: lookback data csv FILE.csv -o FILE.h5 ...)");
    if (optind + 1 < argc)
        return lb_cli_error(cmd, 2, "one CSV file at a time: got '%s' and '%s'", argv[optind], argv[optind + 1]);
    const char *csv = argv[optind];
    if (!output || !*output)
        return lb_cli_error(cmd, 2, "missing the output file: add -o FILE.h5");
    if (like && given)
        return lb_cli_error(cmd, 2, "--like takes every setting from its file: give no other import option with it");
    if (!like && !opt.label)
        return lb_cli_error(cmd, 2, "--label is required: the column of integer classes (0, 1, ...) to learn");
    if (opt.order_as != LB_ORDER_AUTO && !opt.order_key)
        return lb_cli_error(cmd, 2, "--order-as needs --order-key (the column whose values it compares)");
    if (!like && !opt.features && !opt.tokens)
        return lb_cli_error(cmd, 2, "give --features (numeric columns) or --tokens (categorical columns), or both");
    if (strcmp(csv, "-") != 0 && lb_output_protect(csv, "the CSV file") != LB_OK)
        return lb_cli_fail(cmd);
    if (like && lb_output_protect(like, "the --like file") != LB_OK)
        return lb_cli_fail(cmd);
    if (lb_output_check(output, "data file") != LB_OK)
        return lb_cli_fail(cmd);
    if (lb_files_exists(output) && !force)
        return lb_cli_error(cmd, 1, "%s already exists; use --force to overwrite it", output);
    lb_event_schema *like_s = NULL, *s = NULL;
    if (like && !(like_s = like_schema(like)))
        return lb_cli_fail(cmd);
    st = like_s ? lb_csv_import_like(csv, like_s, output, &s) : lb_csv_import(csv, &opt, output, &s);
    lb_event_schema_free(like_s);
    if (st != LB_OK)
        return lb_cli_fail(cmd);
    print_import(output, s);
    lb_event_schema_free(s);
    if (fflush(stdout) != 0)
        return lb_cli_error(cmd, 1, "cannot write to standard output: %s", lb_system_error(errno));
    return 0;
}

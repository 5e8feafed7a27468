/* lookback demo and lookback compare: train several models, evaluate each on several
 * files, print one table and write a report folder (summary.json, checkpoints,
 * metrics, plots). The demo is compare with its data and models chosen: attention
 * versus the LSTM on a clue from about 100, 1,000 and 7,000 events back. */
#include <getopt.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cli/cli.h"
#include "lab/compare.h"
#include "lab/demo.h"
#include "lab/run_config.h"

/* Trains every model, evaluates it on every file, prints the table (lab/compare.h). */
static int run_comparison(const char *cmd, lb_compare_model *specs, int n_models, lb_compare_eval *evals, int n_evals,
                          const char *out_dir, int quiet)
{
    static lb_compare_report rep;
    lb_status st = lb_compare_run(specs, n_models, evals, n_evals, out_dir, quiet, &rep);
    if (st != LB_OK && rep.failed_model >= 0)
        return lb_cli_run_failed(cmd, &rep.results[rep.failed_model].run);
    if (rep.report_rank)
        lb_compare_print_table(stdout, specs, n_models, evals, n_evals, &rep);
    if (st != LB_OK)
        return lb_cli_fail(cmd);
    if (rep.report_rank)
        printf("report: %s (summary.json%s, one folder per model)\n", out_dir, rep.written);
    return 0;
}

/* ---- lookback compare ---- */

static void compare_usage(FILE *out)
{
    fputs("usage: lookback compare --train FILE.h5 --models M1,M2,... --eval F1.h5,F2.h5,... --out DIR [options]\n"
          "\n"
          "Trains each model (transformer, local, lstm, conv, mamba; a name may repeat as name=kind, e.g.\n"
          "big=transformer) on the train file with the same options and time budget, evaluates each\n"
          "on the test split of every evaluation file (each file once), prints one table and writes\n"
          "DIR/summary.json, one run folder per model and the plots. Under mpirun -np N the models\n"
          "are shared out over the N processes (model i on process i mod N) and process 0 writes\n"
          "the report. For a binary label (an imported event log, docs/events.md) a second table gives\n"
          "each model's accuracy, F1 of class 1, macro-F1 and PR-AUC beside its costs, and the\n"
          "majority-class baseline's.\n"
          "\n"
          "  --budget SECONDS   training time per model (default 60; 0 = until --steps); the same as\n"
          "                     --time-budget, so give one of them\n"
          "  --eval-limit N     evaluate at most N test examples per file (default all)\n"
          "On a text corpus (lookback data text) --eval may be left out (the corpus's own test split\n"
          "is scored), each family starts from its recipe for text (docs/text.md: nanoGPT's for the\n"
          "transformer, char-rnn's for the LSTM), the budget counts CPU time (--budget-clock cpu),\n"
          "and the table gives test bits per character, steps, time per step, the training time to\n"
          "a validation loss and a greedy sample of each model:\n"
          "  --target-bpc B     the validation bits per character whose time to reach is reported\n"
          "                     (default: the worst model's last validation)\n"
          "  --quiet            no progress display\n"
          "Options given apply to every model that uses them (--hidden to the LSTMs, --window to\n"
          "local attention); an option that none of the models uses is refused.\n"
          "Exit status: 0 done, 1 failed at run time, 2 bad usage, 128+N stopped by signal N.\n\n",
          out);
    lb_run_options_help(out, 0);
}

/* The command line of compare. */
typedef struct compare_args {
    const char *models, *eval_list, *train, *out_dir;
    double budget, target_bpc;
    int64_t eval_limit;
    int quiet, budget_given;
    lb_option_list given; /* the run options, for every model */
} compare_args;

/* compare's own option c (not a run option); -1 to go on, else the exit code (printed). */
static int compare_option(int c, compare_args *a, char **argv)
{
    const char *cmd = "compare";
    switch (c) {
    case 'T': a->train = optarg; break;
    case 'm': a->models = optarg; break;
    case 'e': a->eval_list = optarg; break;
    case 'o': a->out_dir = optarg; break;
    case 'b':
        for (int i = 0; i < a->given.n; i++)
            if (strcmp(a->given.items[i].name, "time-budget") == 0)
                return lb_cli_error(cmd, 2, "--budget and --time-budget set the same thing; give only --budget");
        if (a->budget_given++)
            return lb_cli_error(cmd, 2, "--budget is given twice; give it once");
        if (lb_option_real("--budget", optarg, 0, 1e9, &a->budget) != LB_OK)
            return lb_cli_error(cmd, 2, "%s", lb_last_error());
        break;
    case 'l':
        if (lb_option_int("--eval-limit", optarg, 0, INT64_MAX, &a->eval_limit) != LB_OK)
            return lb_cli_error(cmd, 2, "%s", lb_last_error());
        break;
    case 'q': a->quiet = 1; break;
    case 'B':
        if (lb_option_real("--target-bpc", optarg, 1e-6, 64, &a->target_bpc) != LB_OK)
            return lb_cli_error(cmd, 2, "%s", lb_last_error());
        break;
    case 'h': compare_usage(stdout); return 0;
    case ':':
    case '?': return lb_cli_bad_option(cmd, c, argv);
    default:
        if (strcmp(lb_run_option_name(c), "model") == 0 || strcmp(lb_run_option_name(c), "data") == 0)
            return lb_cli_error(cmd, 2, "use --models and --train with compare");
        if (strcmp(lb_run_option_name(c), "time-budget") == 0 && a->budget_given)
            return lb_cli_error(cmd, 2, "--budget and --time-budget set the same thing; give only --budget");
        if (lb_option_list_add(&a->given, lb_run_option_name(c), optarg, NULL) != LB_OK)
            return lb_cli_error(cmd, 2, "%s", lb_last_error());
    }
    return -1;
}

/* Reads the options into a; -1 to go on, else the exit code (printed). */
static int compare_parse(int argc, char **argv, compare_args *a)
{
    static const struct option extra[] = {
        {"train", required_argument, NULL, 'T'}, {"models", required_argument, NULL, 'm'},
        {"eval", required_argument, NULL, 'e'},  {"out", required_argument, NULL, 'o'},
        {"budget", required_argument, NULL, 'b'}, {"eval-limit", required_argument, NULL, 'l'},
        {"quiet", no_argument, NULL, 'q'},       {"help", no_argument, NULL, 'h'},
        {"target-bpc", required_argument, NULL, 'B'},
    };
    const struct option *longopts = lb_run_options(extra, 9);
    optind = 1;
    opterr = 0;
    int c, code;
    while ((c = getopt_long(argc, argv, ":h", longopts, NULL)) != -1)
        if ((code = compare_option(c, a, argv)) >= 0)
            return code;
    if (optind < argc)
        return lb_cli_error("compare", 2, "unexpected argument '%s'", argv[optind]);
    if (!a->train || !a->models || !a->out_dir)
        return lb_cli_error("compare", 2, "--train, --models, --eval and --out are required (see lookback compare --help)");
    return -1;
}

/* Whether the train file is a text corpus (*text): then --eval may be left out, and
 * --target-bpc applies. -1 to go on, else the exit code (printed). */
static int compare_text(const compare_args *a, int *text)
{
    const char *cmd = "compare";
    lb_dataset *probe = lb_dataset_open_split(a->train, "test");
    int opened = probe != NULL;
    *text = probe && lb_dataset_is_text(probe);
    lb_dataset_close(probe);
    if (a->eval_list && a->target_bpc <= 0) {
        lb_clear_error(); /* a bad file is said when the comparison checks it */
        return -1;
    }
    if (!opened)
        return lb_cli_fail(cmd);
    if (!*text && !a->eval_list)
        return lb_cli_error(cmd, 2, "--train, --models, --eval and --out are required (see lookback compare --help)");
    if (!*text)
        return lb_cli_error(cmd, 2, "--target-bpc applies to a text corpus only (%s is not one)", a->train);
    return -1;
}

int lb_cli_compare(int argc, char **argv)
{
    const char *cmd = "compare";
    static compare_args a; /* one compare per process */
    lb_option_list_free(&a.given);
    memset(&a, 0, sizeof a);
    a.budget = 60;
    int text = 0, code = compare_parse(argc, argv, &a);
    if (code < 0)
        code = compare_text(&a, &text);
    if (code >= 0)
        return code;
    /* A text corpus: the families' recipes for text, a CPU budget, its own test split. */
    static lb_compare_model specs[LB_COMPARE_MAX_MODELS];
    static lb_compare_eval evals[LB_COMPARE_MAX_EVALS];
    int n_models = 0, n_evals = 0;
    if (lb_compare_models_from_list(a.models, a.train, text, a.budget, &a.given, specs, &n_models) != LB_OK ||
        lb_compare_evals_from_list(a.eval_list ? a.eval_list : a.train, a.target_bpc, a.eval_limit, evals, &n_evals) !=
            LB_OK)
        return lb_cli_error(cmd, 2, "%s", lb_last_error());
    if (lb_compare_check_out_dir(a.out_dir) != LB_OK)
        return lb_cli_fail(cmd);
    return run_comparison(cmd, specs, n_models, evals, n_evals, a.out_dir, a.quiet);
}

/* ---- lookback demo ---- */

static void demo_usage(FILE *out)
{
    fputs("usage: lookback demo [--quick] [--out DIR] [--budget SECONDS] [--budget-clock cpu|wall]\n"
          "                     [--threads N] [--data-dir DIR]\n"
          "\n"
          "The main job: a voltage spike (the clue) binds a sensor to its reading; thousands of\n"
          "ordinary events later an alarm names the sensor, and the model must answer the reading.\n"
          "Trains an attention model (1 block, no positional encoding: retrieval by content) and the\n"
          "LSTM baseline (forget-gate bias 1, learning rate chosen on the validation split) on\n"
          "sequences of 256 events with the same time budget, then tests both with the clue about\n"
          "100, 1,000 and 7,000 events back. A second LSTM trained on short sequences shows the\n"
          "baseline works when the clue is near.\n"
          "\n"
          "  --out DIR         report folder (default lookback-demo, or lookback-demo-quick with\n"
          "                    --quick; must not hold a report)\n"
          "  --budget SECONDS  training time per model (default 45; --quick 8); each LSTM's\n                    learning-rate search takes 3/4 of it again\n"
          "  --budget-clock C  what --budget counts: cpu (default; the process's CPU seconds\n"
          "                    divided by the threads, so a busy machine trains each model as\n"
          "                    far as an idle one) or wall (wall-clock seconds)\n"
          "  --quick           a smaller version for smoke tests (under a minute)\n"
          "  --data-dir DIR    where the generated data is cached (default ~/.cache/lookback/demo,\n"
          "                    demo-quick for --quick); a cached file made with other options is\n"
          "                    regenerated, and a second demo on the same cache waits for the first\n"
          "  --threads N       threads (default OMP_NUM_THREADS or all processors)\n"
          "  --quiet           no progress display\n",
          out);
}

/* The command line of demo. */
typedef struct demo_args {
    const char *out_dir, *data_dir;
    double budget;
    int64_t threads;
    int quick, quiet;
    lb_budget_clock budget_clock;
} demo_args;

/* Reads the options into a; -1 to go on, else the exit code (printed). */
static int demo_parse(int argc, char **argv, demo_args *a)
{
    const char *cmd = "demo";
    static const struct option opts[] = {
        {"out", required_argument, NULL, 'o'},     {"budget", required_argument, NULL, 'b'},
        {"quick", no_argument, NULL, 'Q'},         {"data-dir", required_argument, NULL, 'd'},
        {"threads", required_argument, NULL, 't'}, {"quiet", no_argument, NULL, 'q'},
        {"help", no_argument, NULL, 'h'},          {"budget-clock", required_argument, NULL, 'k'},
        {NULL, 0, NULL, 0},
    };
    optind = 1;
    opterr = 0;
    int c;
    while ((c = getopt_long(argc, argv, ":h", opts, NULL)) != -1) {
        lb_status st = LB_OK;
        switch (c) {
        case 'o': a->out_dir = optarg; break;
        case 'b': st = lb_option_real("--budget", optarg, 1, 1e6, &a->budget); break;
        case 'k': st = lb_budget_clock_parse(optarg, &a->budget_clock); break;
        case 'Q': a->quick = 1; break;
        case 'd': a->data_dir = optarg; break;
        case 't': st = lb_option_int("--threads", optarg, 0, 1024, &a->threads); break;
        case 'q': a->quiet = 1; break;
        case 'h': demo_usage(stdout); return 0;
        default: return lb_cli_bad_option(cmd, c, argv);
        }
        if (st != LB_OK)
            return lb_cli_error(cmd, 2, "%s", lb_last_error());
    }
    if (optind < argc)
        return lb_cli_error(cmd, 2, "unexpected argument '%s'", argv[optind]);
    if (a->budget < 0)
        a->budget = a->quick ? 8 : 45;
    if (!a->out_dir) /* --quick and the full demo keep their reports apart */
        a->out_dir = a->quick ? "lookback-demo-quick" : "lookback-demo";
    return -1;
}

/* The data: cached across runs (--data-dir, else the user's cache folder), generated
 * from fixed seeds; the cache stays locked while this process runs. 0 or the exit code. */
static int demo_data(const demo_args *a, char paths[LB_DEMO_FILES][4096])
{
    char data_dir[3900];
    const char *home = getenv("HOME"), *xdg = getenv("XDG_CACHE_HOME");
    if (a->data_dir)
        snprintf(data_dir, sizeof data_dir, "%s", a->data_dir);
    else if (xdg && *xdg)
        snprintf(data_dir, sizeof data_dir, "%s/lookback/demo%s", xdg, a->quick ? "-quick" : "");
    else
        snprintf(data_dir, sizeof data_dir, "%s/.cache/lookback/demo%s", home && *home ? home : ".",
                 a->quick ? "-quick" : "");
    if (lb_files_mkdir(data_dir) != LB_OK || lb_demo_lock_cache(data_dir, a->quiet) < 0 ||
        lb_demo_make_data(data_dir, a->quick, a->quiet, paths) != LB_OK)
        return lb_cli_fail("demo");
    return 0;
}

/* Each LSTM's learning rate: short runs on its own train file, best validation accuracy
 * wins (skipped by --quick, which keeps 3e-3). 0 or the exit code. */
static int demo_learning_rates(const demo_args *a, lb_compare_model *specs)
{
    int code = 0;
    for (int m = 1; m < 3 && !a->quick && code == 0; m++)
        if (lb_demo_choose_lr(&specs[m], a->out_dir, a->budget / 4, a->quiet) != LB_OK) {
            lb_error_context("choosing the learning rate of %s", specs[m].name);
            code = lb_cli_fail("demo");
        }
    if (a->quick)
        for (int m = 1; m < 3; m++) {
            specs[m].rc.train.optim.lr = 3e-3;
            snprintf(specs[m].note, sizeof specs[m].note, "lr 3e-3 (--quick skips the learning-rate search)");
        }
    lb_compare_model *lstm_short = &specs[2];
    snprintf(lstm_short->note + strlen(lstm_short->note), sizeof lstm_short->note - strlen(lstm_short->note),
             "; trained on short sequences (clue 4..60 events back)");
    return code;
}

int lb_cli_demo(int argc, char **argv)
{
    const char *cmd = "demo";
    /* CPU time by default: the same work per model however busy the machine is. */
    demo_args a = {.budget = -1, .budget_clock = LB_BUDGET_CPU};
    int code = demo_parse(argc, argv, &a);
    if (code >= 0)
        return code;
    if (lb_compare_check_out_dir(a.out_dir) != LB_OK)
        return lb_cli_fail(cmd);
    static char paths[LB_DEMO_FILES][4096];
    if ((code = demo_data(&a, paths)) != 0)
        return code;
    lb_compare_model specs[LB_DEMO_MODELS];
    lb_demo_models(paths, a.quick, a.budget, a.budget_clock, (int)a.threads, specs);
    char search_dirs[3][4200];
    int search_new[3] = {0, 0, 0}, out_new = !lb_files_exists(a.out_dir);
    for (int m = 1; m < 3; m++) {
        snprintf(search_dirs[m], sizeof search_dirs[m], "%s/%s-lr-search", a.out_dir, specs[m].name);
        search_new[m] = !lb_files_exists(search_dirs[m]);
    }
    code = demo_learning_rates(&a, specs);
    lb_compare_eval evals[LB_DEMO_EVALS];
    lb_demo_evals(paths, evals);
    int64_t threads = a.threads;
    if (code == 0 && threads == 0 && (threads = lb_run_set_threads(0)) < 0)
        code = lb_cli_fail(cmd);
    if (code == 0 && !a.quiet)
        fprintf(stderr, "training each model for %.0f s of %s time on %lld thread%s\n", a.budget,
                a.budget_clock == LB_BUDGET_CPU ? "CPU (per thread)" : "wall-clock", (long long)threads,
                threads == 1 ? "" : "s");
    if (code == 0)
        code = run_comparison(cmd, specs, LB_DEMO_MODELS, evals, LB_DEMO_EVALS, a.out_dir, a.quiet);
    /* A demo that failed leaves no half-made report: what it created goes, so the same
     * --out works again. */
    if (code != 0) {
        for (int m = 1; m < 3; m++)
            if (search_new[m])
                lb_files_remove_tree(search_dirs[m]);
        if (out_new)
            rmdir(a.out_dir); /* only when empty */
    }
    return code;
}

/* lookback demo and lookback compare: train several models, evaluate each on several
 * files, print one table and write a report folder (summary.json, checkpoints,
 * metrics, plots). The demo is compare with its data and models chosen: attention
 * versus the LSTM on a clue from about 100, 1,000 and 7,000 events back. */
#include <ctype.h>
#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <getopt.h>
#include <json-c/json.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include "data/tasks.h"
#include "cli/cli.h"
#include "data/output.h"
#include "lab/run_config.h"
#include "train/distributed.h"
#include "lab/compare.h"
#include "lab/demo.h"
#include "lab/plot.h"

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

int lb_cli_compare(int argc, char **argv)
{
    const char *cmd = "compare";
    static const struct option extra[] = {
        {"train", required_argument, NULL, 'T'}, {"models", required_argument, NULL, 'm'},
        {"eval", required_argument, NULL, 'e'},  {"out", required_argument, NULL, 'o'},
        {"budget", required_argument, NULL, 'b'}, {"eval-limit", required_argument, NULL, 'l'},
        {"quiet", no_argument, NULL, 'q'},       {"help", no_argument, NULL, 'h'},
        {"target-bpc", required_argument, NULL, 'B'},
    };
    const struct option *longopts = lb_run_options(extra, 9);
    char *models = NULL, *eval_list = NULL;
    const char *train = NULL, *out_dir = NULL;
    double budget = 60, target_bpc = 0;
    int64_t eval_limit = 0;
    int quiet = 0, c, budget_given = 0;
    static lb_option_list given; /* one compare per process */
    lb_option_list_free(&given);
    optind = 1;
    opterr = 0;
    while ((c = getopt_long(argc, argv, ":h", longopts, NULL)) != -1) {
        switch (c) {
        case 'T': train = optarg; break;
        case 'm': models = optarg; break;
        case 'e': eval_list = optarg; break;
        case 'o': out_dir = optarg; break;
        case 'b':
            for (int i = 0; i < given.n; i++)
                if (strcmp(given.items[i].name, "time-budget") == 0)
                    return lb_cli_error(cmd, 2, "--budget and --time-budget set the same thing; give only --budget");
            if (budget_given++)
                return lb_cli_error(cmd, 2, "--budget is given twice; give it once");
            if (lb_option_real("--budget", optarg, 0, 1e9, &budget) != LB_OK)
                return lb_cli_error(cmd, 2, "%s", lb_last_error());
            break;
        case 'l':
            if (lb_option_int("--eval-limit", optarg, 0, INT64_MAX, &eval_limit) != LB_OK)
                return lb_cli_error(cmd, 2, "%s", lb_last_error());
            break;
        case 'q': quiet = 1; break;
        case 'B':
            if (lb_option_real("--target-bpc", optarg, 1e-6, 64, &target_bpc) != LB_OK)
                return lb_cli_error(cmd, 2, "%s", lb_last_error());
            break;
        case 'h': compare_usage(stdout); return 0;
        case ':':
        case '?': return lb_cli_bad_option(cmd, c, argv);
        default:
            if (strcmp(lb_run_option_name(c), "model") == 0 || strcmp(lb_run_option_name(c), "data") == 0)
                return lb_cli_error(cmd, 2, "use --models and --train with compare");
            if (strcmp(lb_run_option_name(c), "time-budget") == 0 && budget_given)
                return lb_cli_error(cmd, 2, "--budget and --time-budget set the same thing; give only --budget");
            if (lb_option_list_add(&given, lb_run_option_name(c), optarg, NULL) != LB_OK)
                return lb_cli_error(cmd, 2, "%s", lb_last_error());
        }
    }
    if (optind < argc)
        return lb_cli_error(cmd, 2, "unexpected argument '%s'", argv[optind]);
    if (!train || !models || !out_dir)
        return lb_cli_error(cmd, 2, "--train, --models, --eval and --out are required (see lookback compare --help)");
    /* A text corpus: the families' recipes for text, a CPU budget, its own test split. */
    int text = 0;
    if (!eval_list || target_bpc > 0) {
        lb_dataset *probe = lb_dataset_open_split(train, "test");
        if (!probe)
            return lb_cli_fail(cmd);
        text = lb_dataset_is_text(probe);
        lb_dataset_close(probe);
        if (!text && !eval_list)
            return lb_cli_error(cmd, 2, "--train, --models, --eval and --out are required (see lookback compare --help)");
        if (!text)
            return lb_cli_error(cmd, 2, "--target-bpc applies to a text corpus only (%s is not one)", train);
    } else {
        lb_dataset *probe = lb_dataset_open_split(train, "test");
        text = probe && lb_dataset_is_text(probe);
        lb_dataset_close(probe);
        lb_clear_error(); /* a bad file is said when the comparison checks it */
    }
    char own_eval[4096];
    if (!eval_list) {
        snprintf(own_eval, sizeof own_eval, "%s", train);
        eval_list = own_eval;
    }
    lb_compare_model specs[LB_COMPARE_MAX_MODELS];
    lb_compare_eval evals[LB_COMPARE_MAX_EVALS];
    int n_models = 0, n_evals = 0;
    memset(specs, 0, sizeof specs);
    memset(evals, 0, sizeof evals);
    for (char *tok = models, *next; tok; tok = next) {
        next = strchr(tok, ',');
        if (next)
            *next++ = '\0';
        if (n_models == LB_COMPARE_MAX_MODELS)
            return lb_cli_error(cmd, 2, "at most %d models", LB_COMPARE_MAX_MODELS);
        lb_compare_model *s = &specs[n_models++];
        char *eq = strchr(tok, '=');
        const char *kind = eq ? eq + 1 : tok;
        if (eq)
            *eq = '\0';
        if (lb_compare_check_name(tok) != LB_OK)
            return lb_cli_error(cmd, 2, "%s", lb_last_error());
        snprintf(s->name, sizeof s->name, "%s", tok);
        for (int j = 0; j < n_models - 1; j++)
            if (strcmp(specs[j].name, s->name) == 0)
                return lb_cli_error(cmd, 2, "model name '%s' appears twice; name them, e.g. a=%s,b=%s", s->name, kind, kind);
        lb_run_config_default(&s->rc, LB_MODEL_TRANSFORMER);
        snprintf(s->rc.data, sizeof s->rc.data, "%s", train);
        if (lb_run_config_set(&s->rc, "model", kind) != LB_OK)
            return lb_cli_error(cmd, 2, "%s", lb_last_error());
        /* validation during a comparison: every 100 steps on the first 256 windows (the curve
         * and the time to the target); the table's column is the whole test split */
        if (text && (lb_compare_text_recipe(&s->rc) != LB_OK || lb_run_config_set(&s->rc, "budget-clock", "cpu") != LB_OK ||
                     lb_run_config_set(&s->rc, "eval-every", "100") != LB_OK ||
                     lb_run_config_set(&s->rc, "eval-examples", "256") != LB_OK))
            return lb_cli_error(cmd, 2, "%s", lb_last_error());
        if (text)
            snprintf(s->note, sizeof s->note, "recipe: %s (docs/text.md)", lb_compare_text_recipe_name(s->rc.model.kind));
        s->rc.train.time_budget = budget;
        if (lb_run_config_apply(&s->rc, &given) != LB_OK)
            return lb_cli_error(cmd, 2, "%s", lb_last_error());
    }
    /* Each option must be used by one of the models at least (--hidden by the LSTMs, ...). */
    for (int i = 0; i < given.n; i++) {
        int used = 0;
        for (int m = 0; m < n_models; m++)
            used |= lb_run_option_applies(&specs[m].rc, given.items[i].name);
        if (!used) {
            lb_option_list one = {.n = 1, .items = {given.items[i]}};
            lb_run_config_check_used(&specs[0].rc, &one);
            return lb_cli_error(cmd, 2, "%s", lb_last_error());
        }
    }
    for (char *tok = eval_list, *next; tok; tok = next) {
        next = strchr(tok, ',');
        if (next)
            *next++ = '\0';
        if (!tok[0])
            return lb_cli_error(cmd, 2, "--eval has an empty file name (two commas, or a trailing comma?)");
        if (n_evals == LB_COMPARE_MAX_EVALS)
            return lb_cli_error(cmd, 2, "at most %d evaluation files", LB_COMPARE_MAX_EVALS);
        /* one file once, however spelled: two columns of it would tell nothing apart */
        struct stat a, b;
        for (int e = 0; e < n_evals; e++)
            if (strcmp(evals[e].path, tok) == 0 ||
                (stat(evals[e].path, &a) == 0 && stat(tok, &b) == 0 && a.st_dev == b.st_dev && a.st_ino == b.st_ino))
                return lb_cli_error(cmd, 2, "--eval names the file %s twice ('%s' and '%s'); give each file once", tok,
                                    evals[e].path, tok);
        snprintf(evals[n_evals].path, sizeof evals[n_evals].path, "%s", tok);
        evals[n_evals].target_bits = target_bpc;
        evals[n_evals++].examples = eval_limit;
    }
    if (lb_compare_check_out_dir(out_dir) != LB_OK)
        return lb_cli_fail(cmd);
    return run_comparison(cmd, specs, n_models, evals, n_evals, out_dir, quiet);
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

int lb_cli_demo(int argc, char **argv)
{
    const char *cmd = "demo", *out_dir = NULL, *data_dir_opt = NULL;
    double budget = -1;
    int64_t threads = 0;
    int quick = 0, quiet = 0, c;
    static const struct option opts[] = {
        {"out", required_argument, NULL, 'o'},     {"budget", required_argument, NULL, 'b'},
        {"quick", no_argument, NULL, 'Q'},         {"data-dir", required_argument, NULL, 'd'},
        {"threads", required_argument, NULL, 't'}, {"quiet", no_argument, NULL, 'q'},
        {"help", no_argument, NULL, 'h'},          {"budget-clock", required_argument, NULL, 'k'},
        {NULL, 0, NULL, 0},
    };
    /* CPU time by default: the same work per model however busy the machine is. */
    lb_budget_clock budget_clock = LB_BUDGET_CPU;
    optind = 1;
    opterr = 0;
    while ((c = getopt_long(argc, argv, ":h", opts, NULL)) != -1) {
        lb_status st = LB_OK;
        switch (c) {
        case 'o': out_dir = optarg; break;
        case 'b': st = lb_option_real("--budget", optarg, 1, 1e6, &budget); break;
        case 'k': st = lb_budget_clock_parse(optarg, &budget_clock); break;
        case 'Q': quick = 1; break;
        case 'd': data_dir_opt = optarg; break;
        case 't': st = lb_option_int("--threads", optarg, 0, 1024, &threads); break;
        case 'q': quiet = 1; break;
        case 'h': demo_usage(stdout); return 0;
        default: return lb_cli_bad_option(cmd, c, argv);
        }
        if (st != LB_OK)
            return lb_cli_error(cmd, 2, "%s", lb_last_error());
    }
    if (optind < argc)
        return lb_cli_error(cmd, 2, "unexpected argument '%s'", argv[optind]);
    if (budget < 0)
        budget = quick ? 8 : 45;
    if (!out_dir) /* --quick and the full demo keep their reports apart */
        out_dir = quick ? "lookback-demo-quick" : "lookback-demo";
    if (lb_compare_check_out_dir(out_dir) != LB_OK)
        return lb_cli_fail(cmd);

    /* Data: cached across runs, generated from fixed seeds. */
    char data_dir[3900];
    const char *home = getenv("HOME"), *xdg = getenv("XDG_CACHE_HOME");
    if (data_dir_opt)
        snprintf(data_dir, sizeof data_dir, "%s", data_dir_opt);
    else if (xdg && *xdg)
        snprintf(data_dir, sizeof data_dir, "%s/lookback/demo%s", xdg, quick ? "-quick" : "");
    else
        snprintf(data_dir, sizeof data_dir, "%s/.cache/lookback/demo%s", home && *home ? home : ".", quick ? "-quick" : "");
    if (lb_files_mkdir(data_dir) != LB_OK)
        return lb_cli_fail(cmd);
    int cache_lock = lb_demo_lock_cache(data_dir, quiet);
    if (cache_lock < 0)
        return lb_cli_fail(cmd);
    const int64_t n_eval = quick ? 64 : 200;
    const lb_demo_file files[] = {
        {"train", 256, 1, 250, quick ? 4000 : 20000, quick ? 256 : 1000, 0},
        {"short", 64, 4, 60, quick ? 4000 : 20000, quick ? 256 : 1000, n_eval},
        {"near-100", 160, 90, 110, 0, 0, n_eval},
        {"far-1000", 1100, 950, 1050, 0, 0, n_eval},
        {"far-7000", 7200, 6900, 7100, 0, 0, n_eval},
    };
    enum { N_FILES = sizeof files / sizeof files[0] };
    char paths[N_FILES][4096];
    for (int i = 0; i < N_FILES; i++)
        if (lb_demo_ensure_file(data_dir, &files[i], 1000 + (uint64_t)i, paths[i], sizeof paths[i], quiet) != LB_OK)
            return lb_cli_fail(cmd);

    lb_compare_model specs[3];
    memset(specs, 0, sizeof specs);
    /* Attention: one pre-norm block, no positional encoding, so the alarm finds the spike by
     * content at any distance; the last block reads only the alarm's position. */
    lb_compare_model *att = &specs[0];
    snprintf(att->name, sizeof att->name, "attention");
    lb_run_config_default(&att->rc, LB_MODEL_TRANSFORMER);
    snprintf(att->rc.data, sizeof att->rc.data, "%s", paths[0]);
    att->rc.model.n_layers = 1;
    att->rc.model.d_model = 64;
    att->rc.model.n_heads = 4;
    att->rc.model.d_ff = 128;
    att->rc.model.pos = LB_POS_NONE;
    att->rc.train.optim.lr = 3e-3;
    /* The LSTM: forget-gate bias 1 (Gers et al. 2000; Jozefowicz et al. 2015). */
    lb_compare_model *lstm = &specs[1];
    snprintf(lstm->name, sizeof lstm->name, "lstm");
    lb_run_config_default(&lstm->rc, LB_MODEL_LSTM);
    snprintf(lstm->rc.data, sizeof lstm->rc.data, "%s", paths[0]);
    lstm->rc.model.hidden_size = 128;
    lstm->rc.model.n_layers = 1;
    lstm->rc.model.forget_bias = 1.0;
    /* The same LSTM on short sequences: the baseline works when the clue is near. */
    lb_compare_model *lstm_short = &specs[2];
    *lstm_short = *lstm;
    snprintf(lstm_short->name, sizeof lstm_short->name, "lstm-short");
    snprintf(lstm_short->rc.data, sizeof lstm_short->rc.data, "%s", paths[1]);
    for (int m = 0; m < 3; m++) {
        specs[m].rc.train.time_budget = budget;
        specs[m].rc.train.budget_clock = budget_clock;
        specs[m].rc.train.steps = 1000000;
        specs[m].rc.train.schedule = lb_schedule_constant(specs[m].rc.train.optim.lr); /* base_lr follows lr */
        specs[m].rc.train.schedule.warmup_steps = 50;
        specs[m].rc.train.eval_every = quick ? 25 : 100;
        specs[m].rc.train.eval_examples = 256;
        specs[m].rc.train.threads = (int)threads;
    }

    /* Each LSTM's learning rate: short runs on its own train file, best validation accuracy
     * wins (skipped by --quick, which keeps 3e-3). */
    char search_dirs[3][4200];
    int search_new[3] = {0, 0, 0}, out_new = !lb_files_exists(out_dir);
    for (int m = 1; m < 3; m++) {
        snprintf(search_dirs[m], sizeof search_dirs[m], "%s/%s-lr-search", out_dir, specs[m].name);
        search_new[m] = !lb_files_exists(search_dirs[m]);
    }
    int code = 0;
    for (int m = 1; m < 3 && !quick && code == 0; m++)
        if (lb_demo_choose_lr(&specs[m], out_dir, budget / 4, quiet) != LB_OK) {
            lb_error_context("choosing the learning rate of %s", specs[m].name);
            code = lb_cli_fail(cmd);
        }
    if (quick)
        for (int m = 1; m < 3; m++) {
            specs[m].rc.train.optim.lr = 3e-3;
            snprintf(specs[m].note, sizeof specs[m].note, "lr 3e-3 (--quick skips the learning-rate search)");
        }
    snprintf(lstm_short->note + strlen(lstm_short->note), sizeof lstm_short->note - strlen(lstm_short->note),
             "; trained on short sequences (clue 4..60 events back)");

    lb_compare_eval evals[4];
    memset(evals, 0, sizeof evals);
    const char *labels[4] = {"short 4-60", "~100", "~1000", "~7000"};
    for (int e = 0; e < 4; e++) {
        snprintf(evals[e].path, sizeof evals[e].path, "%s", paths[e + 1]);
        snprintf(evals[e].label, sizeof evals[e].label, "%s", labels[e]);
    }
    if (code == 0 && threads == 0 && (threads = lb_run_set_threads(0)) < 0)
        code = lb_cli_fail(cmd);
    if (code == 0 && !quiet)
        fprintf(stderr, "training each model for %.0f s of %s time on %lld thread%s\n", budget,
                budget_clock == LB_BUDGET_CPU ? "CPU (per thread)" : "wall-clock", (long long)threads,
                threads == 1 ? "" : "s");
    if (code == 0)
        code = run_comparison(cmd, specs, 3, evals, 4, out_dir, quiet);
    /* A demo that failed leaves no half-made report: what it created goes, so the same
     * --out works again. */
    if (code != 0) {
        for (int m = 1; m < 3; m++)
            if (search_new[m])
                lb_files_remove_tree(search_dirs[m]);
        if (out_new)
            rmdir(out_dir); /* only when empty */
    }
    return code;
}

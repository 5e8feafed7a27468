/* lookback train: train one model on a data file into a run folder. */
#include <stdlib.h>
#include <string.h>

#include "train/distributed.h"
#include "cli/cli.h"
#include "lab/run_config.h"

static void train_usage(FILE *out)
{
    fputs("usage: lookback train --data FILE.h5 --model transformer|local|lstm|conv|mamba [options] --out RUN_DIR\n"
          "       lookback train --resume RUN_DIR [--steps N] [--threads N] [--time-budget S] ...\n"
          "       lookback train --data FILE.h5 --init-from CK.h5 [options] --out RUN_DIR\n"
          "\n"
          "Trains on the file's train split, validates on its val split, and writes into RUN_DIR:\n"
          "config.json (the resolved options), metrics.csv (a train row with the means over the\n"
          "interval and a val row per evaluation), checkpoint.h5 (the latest) and best.h5 (the best\n"
          "validation so far). --steps is the total, also after --resume. A run stops with exit 1\n"
          "when --max-skipped steps in a row (default 10) or all its steps were skipped for a\n"
          "non-finite gradient.\n"
          "Under mpirun -np N, N processes train one model on parts of each batch (data\n"
          "parallel; --batch divisible by N x --micro-batches; --threads per process).\n"
          "\n"
          "  --out DIR            run folder (created; must not already hold a run)\n"
          "  --resume DIR         continue the run in DIR from its checkpoint; only --steps, --threads,\n"
          "                       --time-budget, --eval-every, --eval-examples, --checkpoint-every,\n"
          "                       --patience and --max-skipped may change (command line or --config)\n"
          "  --init-from CK.h5    start from the parameters of a checkpoint (of lookback, or written by\n"
          "                       python/lookback_torch.py): its model options (a model option given\n"
          "                       with it is a usage error; --model-seed is free), a new optimizer, step 0\n"
          "  --config FILE.json   options as a JSON object {\"option\": value}, each key once (a regular\n"
          "                       file); the command line wins\n"
          "  --accept-data-change with --resume: continue although the data file's size or CRC-32\n"
          "                       differs from the one config.json recorded (refused otherwise)\n"
          "  --quiet              no progress display\n"
          "\n"
          "An option that the chosen model, optimizer or schedule does not use is refused, and so is\n"
          "an option given twice. Exit status: 0 done, 1 failed at run time, 2 bad usage,\n"
          "128+N stopped by signal N (130 Ctrl-C, 143 SIGTERM) after saving a checkpoint.\n"
          "\n",
          out);
    lb_run_options_help(out, 1);
}

/* Parsed command line: the run options in the order given, plus the command's own. */
typedef struct train_args {
    const char *out, *resume, *config, *init_from;
    int quiet, accept_data_change;
    lb_option_list given;
} train_args;

static int parse_args(int argc, char **argv, train_args *a)
{
    static const struct option extra[] = {
        {"out", required_argument, NULL, 'o'}, {"resume", required_argument, NULL, 'r'},
        {"config", required_argument, NULL, 'c'}, {"quiet", no_argument, NULL, 'q'},
        {"help", no_argument, NULL, 'h'}, {"init-from", required_argument, NULL, 'i'},
        {"accept-data-change", no_argument, NULL, 'A'},
    };
    const struct option *longopts = lb_run_options(extra, 7);
    optind = 1;
    opterr = 0;
    int c;
    const char **own[] = {&a->out, &a->resume, &a->config, &a->init_from};
    const char *own_names[] = {"--out", "--resume", "--config", "--init-from"};
    while ((c = getopt_long(argc, argv, ":h", longopts, NULL)) != -1) {
        int k = c == 'o' ? 0 : c == 'r' ? 1 : c == 'c' ? 2 : c == 'i' ? 3 : -1;
        if (k >= 0) {
            if (*own[k])
                return lb_cli_error(argv[0], 2, "%s is given twice ('%s', then '%s'); give it once", own_names[k],
                                    *own[k], optarg);
            *own[k] = optarg;
            continue;
        }
        switch (c) {
        case 'q': a->quiet = 1; break;
        case 'A': a->accept_data_change = 1; break;
        case 'h': train_usage(stdout); return 0;
        case ':':
        case '?': return lb_cli_bad_option(argv[0], c, argv);
        default:
            if (lb_option_list_add(&a->given, lb_run_option_name(c), optarg, NULL) != LB_OK)
                return lb_cli_error(argv[0], 2, "%s", lb_last_error());
        }
    }
    if (optind < argc)
        return lb_cli_error(argv[0], 2, "unexpected argument '%s'", argv[optind]);
    return -1;
}

/* Resolves the run's options (lab/run_config.h); returns -1 when fine, else the exit
 * code (printed): 2 when the options are at fault. */
static int resolve_options(const char *cmd, const train_args *a, const char *dir, lb_run_config *rc)
{
    lb_option_list file;
    memset(&file, 0, sizeof file);
    if (a->config && lb_option_list_read_json(&file, a->config) != LB_OK) {
        lb_option_list_free(&file);
        return lb_cli_error(cmd, 2, "%s", lb_last_error());
    }
    lb_run_sources src = {dir, a->resume != NULL, a->init_from, &file, &a->given};
    int code = -1;
    if (lb_run_config_resolve(rc, &src) != LB_OK)
        code = lb_last_status() == LB_ERR_VALUE ? lb_cli_error(cmd, 2, "%s", lb_last_error()) : lb_cli_fail(cmd);
    lb_option_list_free(&file);
    return code;
}

int lb_cli_train(int argc, char **argv)
{
    const char *cmd = "train";
    train_args *a = calloc(1, sizeof *a);
    if (!a)
        return lb_cli_error(cmd, 1, "out of memory");
    int code = parse_args(argc, argv, a);
    if (code < 0 && !a->resume && !a->out)
        code = lb_cli_error(cmd, 2, "--out RUN_DIR is required (or --resume RUN_DIR)");
    if (code < 0 && a->resume && a->out && strcmp(a->resume, a->out) != 0)
        code = lb_cli_error(cmd, 2, "--resume continues a run in its own folder; drop --out");
    if (code < 0 && a->accept_data_change && !a->resume)
        code = lb_cli_error(cmd, 2, "--accept-data-change applies to --resume only");
    if (code < 0 && a->resume && a->init_from)
        code = lb_cli_error(cmd, 2, "--init-from starts a new run; --resume continues one: give only one of them");
    const char *dir = a->resume ? a->resume : a->out;
    lb_run_config rc;
    if (code < 0)
        code = resolve_options(cmd, a, dir, &rc);
    if (code < 0) {
        lb_run_result run;
        lb_run_set_data_parallel(1);
        lb_run_set_accept_data_change(a->accept_data_change);
        if (lb_run_train(&rc, dir, a->resume != NULL, a->quiet, &run, NULL) == LB_OK)
            code = 0;
        else if (run.interrupted && lb_dist_rank() != 0)
            code = 128 + (run.signal > 0 ? run.signal : 2); /* rank 0 reports it */
        else
            code = lb_cli_run_failed(cmd, &run);
    }
    lb_option_list_free(&a->given);
    free(a);
    return code;
}

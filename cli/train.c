/* lookback train: train one model on a data file into a run folder. */
#include <stdlib.h>
#include <string.h>

#include "train/distributed.h"
#include "cli/cli.h"
#include "cli/options.h"

static void train_usage(FILE *out)
{
    fputs("usage: lookback train --data FILE.h5 --model transformer|local|lstm|conv [options] --out RUN_DIR\n"
          "       lookback train --resume RUN_DIR [--steps N] [--threads N] [--time-budget S]\n"
          "       lookback train --data FILE.h5 --init-from CK.h5 [options] --out RUN_DIR\n"
          "\n"
          "Trains on the file's train split, validates on its val split, and writes into RUN_DIR:\n"
          "config.json (the resolved options), metrics.csv (one row per evaluation) and\n"
          "checkpoint.h5. --steps is the total, also after --resume.\n"
          "Under mpirun -np N, N processes train one model on parts of each batch (data\n"
          "parallel; --batch divisible by N x --micro-batches; --threads per process).\n"
          "\n"
          "  --out DIR            run folder (created; must not already hold a run)\n"
          "  --resume DIR         continue the run in DIR from its checkpoint\n"
          "  --init-from CK.h5    start from the parameters of a checkpoint (of lookback, or written by\n"
          "                       python/lookback_torch.py): its model options, a new optimizer, step 0\n"
          "  --config FILE.json   options as a JSON object {\"option\": value}; the command line wins\n"
          "  --quiet              no progress display\n",
          out);
    lb_run_options_help(out, LB_MODEL_TRANSFORMER);
}

/* Parsed command line: table options in the order given, plus the command's own. */
typedef struct train_args {
    const char *out, *resume, *config, *init_from;
    int quiet;
    int n;
    const char *names[256];
    const char *values[256];
} train_args;

static int parse_args(int argc, char **argv, train_args *a)
{
    static const struct option extra[] = {
        {"out", required_argument, NULL, 'o'}, {"resume", required_argument, NULL, 'r'},
        {"config", required_argument, NULL, 'c'}, {"quiet", no_argument, NULL, 'q'},
        {"help", no_argument, NULL, 'h'}, {"init-from", required_argument, NULL, 'i'},
    };
    const struct option *longopts = lb_run_options(extra, 6);
    memset(a, 0, sizeof *a);
    optind = 1;
    opterr = 0;
    int c;
    while ((c = getopt_long(argc, argv, ":h", longopts, NULL)) != -1) {
        switch (c) {
        case 'o': a->out = optarg; break;
        case 'r': a->resume = optarg; break;
        case 'c': a->config = optarg; break;
        case 'i': a->init_from = optarg; break;
        case 'q': a->quiet = 1; break;
        case 'h': train_usage(stdout); return 0;
        case ':': return lb_cli_error(argv[0], 2, "option %s needs a value", argv[optind - 1]);
        case '?': return lb_cli_error(argv[0], 2, "unknown option '%s' (see lookback %s --help)", argv[optind - 1], argv[0]);
        default:
            if (a->n < 256) {
                a->names[a->n] = lb_run_option_name(c);
                a->values[a->n++] = optarg;
            }
        }
    }
    if (optind < argc)
        return lb_cli_error(argv[0], 2, "unexpected argument '%s'", argv[optind]);
    return -1;
}

/* --init-from: the model options come from the checkpoint (its parameters are loaded
 * when the run starts); a --model naming another family is an error. 0 on success. */
static int init_model_from(lb_run_config *rc, const train_args *a, const char *path)
{
    lb_model_config saved;
    if (lb_checkpoint_read_model_config(path, &saved) != LB_OK) {
        lb_error(LB_ERR_FORMAT, "--init-from: %s", lb_last_error());
        return 1;
    }
    for (int i = 0; i < a->n; i++)
        if (strcmp(a->names[i], "model") == 0 && strcmp(a->values[i], lb_model_kind_name(saved.kind)) != 0) {
            lb_error(LB_ERR_VALUE, "--model %s differs from the %s model of --init-from %s (the model comes from the "
                     "checkpoint; drop --model)", a->values[i], lb_model_kind_name(saved.kind), path);
            return 1;
        }
    if (strlen(path) >= sizeof rc->init_from) {
        lb_error(LB_ERR_VALUE, "--init-from: path too long");
        return 1;
    }
    rc->model = saved;
    strcpy(rc->init_from, path);
    return 0;
}

int lb_cli_train(int argc, char **argv)
{
    const char *cmd = "train";
    train_args a;
    int rc_code = parse_args(argc, argv, &a);
    if (rc_code >= 0)
        return rc_code;
    if (!a.resume && !a.out)
        return lb_cli_error(cmd, 2, "--out RUN_DIR is required (or --resume RUN_DIR)");
    if (a.resume && a.out && strcmp(a.resume, a.out) != 0)
        return lb_cli_error(cmd, 2, "--resume continues a run in its own folder; drop --out");
    if (a.resume && a.init_from)
        return lb_cli_error(cmd, 2, "--init-from starts a new run; --resume continues one: give only one of them");
    const char *dir = a.resume ? a.resume : a.out;
    char config_path[4200], ckpt_path[4200], metrics_path[4200];
    lb_cli_path(config_path, sizeof config_path, dir, "config.json");
    lb_cli_path(ckpt_path, sizeof ckpt_path, dir, "checkpoint.h5");
    lb_cli_path(metrics_path, sizeof metrics_path, dir, "metrics.csv");

    /* Options: defaults, then the run's config.json (resume) or --config, then --model, then the rest. */
    lb_run_config rc;
    memset(&rc, 0, sizeof rc);
    lb_run_config_default(&rc, LB_MODEL_TRANSFORMER);
    if (a.resume) {
        if (!lb_cli_exists(ckpt_path) || !lb_cli_exists(config_path))
            return lb_cli_error(cmd, 1, "%s holds no run to resume (config.json and checkpoint.h5 are needed)", dir);
        if (lb_run_config_load_json(&rc, config_path) != LB_OK)
            return lb_cli_fail(cmd);
        /* No option sets these; a run started with --init-from may have any. */
        lb_model_config saved;
        if (lb_checkpoint_read_model_config(ckpt_path, &saved) != LB_OK)
            return lb_cli_fail(cmd);
        rc.model.dtype = saved.dtype;
        rc.model.max_seq_len = saved.max_seq_len;
        for (int i = 0; i < a.n; i++)
            if (!lb_run_option_resumable(a.names[i]))
                return lb_cli_error(cmd, 2, "--%s cannot change when resuming (only --steps, --threads, --time-budget, "
                                            "--eval-every, --eval-examples, --checkpoint-every)", a.names[i]);
    } else {
        if (lb_cli_exists(config_path) || lb_cli_exists(ckpt_path))
            return lb_cli_error(cmd, 1, "%s already holds a run; continue it with --resume %s or choose another --out",
                                dir, dir);
        if (a.config && lb_run_config_load_json(&rc, a.config) != LB_OK)
            return lb_cli_fail(cmd);
    }
    if (a.init_from && init_model_from(&rc, &a, a.init_from) != 0)
        return lb_cli_error(cmd, lb_last_status() == LB_ERR_VALUE ? 2 : 1, "%s", lb_last_error());
    for (int i = 0; i < a.n; i++)
        if (strcmp(a.names[i], "model") == 0 && !a.init_from && lb_run_config_set(&rc, "model", a.values[i]) != LB_OK)
            return lb_cli_error(cmd, 2, "%s", lb_last_error());
    for (int i = 0; i < a.n; i++)
        if (strcmp(a.names[i], "model") != 0 && lb_run_config_set(&rc, a.names[i], a.values[i]) != LB_OK)
            return lb_cli_error(cmd, 2, "%s", lb_last_error());
    if (!rc.data[0])
        return lb_cli_error(cmd, 2, "--data FILE.h5 is required");

    lb_cli_run run;
    lb_cli_run_set_data_parallel(1);
    if (lb_cli_run_training(&rc, dir, a.resume != NULL, a.quiet, &run, NULL) == LB_OK)
        return 0;
    if (run.interrupted && lb_dist_rank() != 0)
        return 130; /* rank 0 reports it */
    lb_cli_fail(cmd);
    return run.interrupted ? 130 : 1;
}

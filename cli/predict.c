/* lookback predict: a checkpoint's outputs for every example of a split, as HDF5
 * datasets; --incremental computes them through the streaming path (layers/stream.h). */
#include <getopt.h>
#include <string.h>
#include <sys/stat.h>

#include "cli/cli.h"
#include "data/events.h"
#include "data/results.h"
#include "data/output.h"
#include "train/predict.h"
#include "train/trainer.h"

static void predict_usage(FILE *out)
{
    fputs("usage: lookback predict --checkpoint CK.h5 --data FILE.h5 -o OUT.h5 [options]\n"
          "       lookback predict --checkpoint CK.h5 --csv LOG.csv -o SCORES.csv [--chunk N] [--max-context N]\n"
          "                        [--missing refuse|skip|previous]\n"
          "\n"
          "Writes, for each example of a split, the model's logits (or regression output), the\n"
          "predicted class, the target and the clue distance as HDF5 datasets, with attributes\n"
          "naming the checkpoint and the data file. Positions past an example's length hold NaN\n"
          "(predicted class -1).\n"
          "\n"
          "  -o, --out OUT.h5        the file to write (an existing file is refused without --force)\n"
          "  --split NAME            train | val | test (default test)\n"
          "  --examples N            the first N examples only (default all; a split with fewer\n"
          "                          gives all it has)\n"
          "  --batch N               examples per forward pass, or streams at once (default 16)\n"
          "  --seq-len T             text corpora: the window length (default: the one the model was\n"
          "                          trained with, as eval); the split is cut into non-overlapping\n"
          "                          windows of T tokens, each an example with T next-token targets\n"
          "  --incremental           feed each example through the streaming path, --chunk events\n"
          "                          at a time (the same numbers as the full forward, within 1e-4)\n"
          "  --chunk N               events per streaming step with --incremental (default 1)\n"
          "  --max-context N         with --incremental: full attention keeps the last N events only\n"
          "                          (an approximation; default all)\n"
          "  --force                 replace OUT.h5 if it is a regular file (never the --data file or\n"
          "                          the checkpoint, however the path is spelled)\n"
          "  --csv LOG.csv           (a model trained on an imported event log) score every row of a CSV\n"
          "                          of the training layout, its stored scaling and token maps applied,\n"
          "                          one stream per source; writes SCORES.csv: row, line, source,\n"
          "                          position, label, predicted, probability, score (the anomaly score:\n"
          "                          p(class 1), or 1 - p(class 0) with more classes); --chunk N feeds N\n"
          "                          rows at a time (default: each source at once); docs/events.md\n"
          "  --missing POLICY        with --csv, an empty value: refuse, skip the row or previous (its\n"
          "                          source's previous value), as data csv --missing (default: the policy\n"
          "                          the training file was imported with, stored in the checkpoint)\n"
          "  --threads N             threads (default OMP_NUM_THREADS or all processors)\n",
          out);
}

/* The command line of predict. */
typedef struct predict_args {
    const char *ck, *data_path, *split, *out, *csv;
    int64_t examples, threads, seq_len;
    lb_predict_options po;
    int force, missing, chunk_set, context_set, other_set;
} predict_args;

/* Reads the options into a; -1 to go on, else the exit code (printed). */
static int parse_args(int argc, char **argv, predict_args *a)
{
    const char *cmd = "predict";
    lb_missing_policy policy;
    static const struct option opts[] = {
        {"checkpoint", required_argument, NULL, 'c'}, {"data", required_argument, NULL, 'd'},
        {"split", required_argument, NULL, 's'},      {"examples", required_argument, NULL, 'n'},
        {"batch", required_argument, NULL, 'b'},      {"out", required_argument, NULL, 'o'},
        {"incremental", no_argument, NULL, 'i'},      {"chunk", required_argument, NULL, 'C'},
        {"max-context", required_argument, NULL, 'm'}, {"force", no_argument, NULL, 'f'},
        {"threads", required_argument, NULL, 't'},    {"help", no_argument, NULL, 'h'},
        {"csv", required_argument, NULL, 'V'},        {"missing", required_argument, NULL, 'M'},
        {"seq-len", required_argument, NULL, 'T'},    {NULL, 0, NULL, 0},
    };
    optind = 1;
    opterr = 0;
    int c;
    lb_status st = LB_OK;
    while ((c = getopt_long(argc, argv, ":ho:", opts, NULL)) != -1 && st == LB_OK) {
        switch (c) {
        case 'c': a->ck = optarg; break;
        case 'd': a->data_path = optarg; break;
        case 's': st = lb_cli_split("--split", optarg, &a->split); a->other_set = 1; break;
        case 'n': st = lb_option_int("--examples", optarg, 0, INT64_MAX, &a->examples); a->other_set = 1; break;
        case 'b': st = lb_option_int("--batch", optarg, 1, 1 << 16, &a->po.batch); a->other_set = 1; break;
        case 'o': a->out = optarg; break;
        case 'V': a->csv = optarg; break;
        case 'T': st = lb_cli_seq_len(optarg, &a->seq_len); a->other_set = 1; break;
        case 'M':
            if ((st = lb_missing_parse(optarg, &policy)) == LB_OK)
                a->missing = (int)policy;
            break;
        case 'i': a->po.incremental = 1; a->other_set = 1; break;
        case 'C': st = lb_option_int("--chunk", optarg, 1, 1 << 20, &a->po.chunk); a->chunk_set = 1; break;
        case 'm': st = lb_option_int("--max-context", optarg, 1, INT32_MAX, &a->po.max_context); a->context_set = 1; break;
        case 'f': a->force = 1; break;
        case 't': st = lb_option_int("--threads", optarg, 0, 1024, &a->threads); break;
        case 'h': predict_usage(stdout); return 0;
        default: return lb_cli_bad_option(cmd, c, argv);
        }
    }
    if (st != LB_OK)
        return lb_cli_error(cmd, 2, "%s", lb_last_error());
    if (optind < argc)
        return lb_cli_error(cmd, 2, "unexpected argument '%s'", argv[optind]);
    return -1;
}

/* predict --csv: an event log of the training layout, row by row. */
static int predict_csv(const predict_args *a)
{
    const char *cmd = "predict";
    if (a->data_path || a->other_set)
        return lb_cli_error(cmd, 2, "--csv reads rows, not a data file: drop --data, --split, --examples, --batch, "
                            "--seq-len and --incremental");
    if (!a->ck || !a->out || !a->out[0] || !a->csv[0])
        return lb_cli_error(cmd, 2, "--checkpoint, --csv and -o are required");
    if (lb_run_set_threads((int)a->threads) < 0)
        return lb_cli_fail(cmd);
    return lb_cli_predict_csv(a->ck, a->csv, a->out, a->force, a->chunk_set ? a->po.chunk : 0, a->po.max_context,
                              a->missing);
}

/* The usage rules of predict on a data file, and -o's checks; -1 to go on, else the
 * exit code (printed). */
static int check_args(const predict_args *a)
{
    const char *cmd = "predict", *out = a->out;
    if (a->missing >= 0)
        return lb_cli_error(cmd, 2, "--missing applies to CSV rows (--csv) only: a data file has no empty values; drop it");
    if (!a->ck || !a->data_path || !out)
        return lb_cli_error(cmd, 2, "--checkpoint, --data and -o are required");
    if (!out[0])
        return lb_cli_error(cmd, 2, "-o is empty: name the file to write");
    if ((a->chunk_set || a->context_set) && !a->po.incremental)
        return lb_cli_error(cmd, 2, "%s applies to the streaming path only: add --incremental",
                            a->chunk_set ? "--chunk" : "--max-context");
    /* whatever the spelling of -o, it is never the data file or the checkpoint (even with --force) */
    if (lb_output_protect(a->data_path, "the --data file") != LB_OK ||
        lb_output_protect(a->ck, "the --checkpoint file") != LB_OK || lb_output_check(out, "predictions file") != LB_OK)
        return lb_cli_fail(cmd);
    struct stat sb;
    if (stat(out, &sb) == 0 && !a->force)
        return lb_cli_error(cmd, 1, "%s already exists; choose another -o or add --force", out);
    return -1;
}

/* The checkpoint's model on the examples of the data file: computed, written, summed up. */
static int run_predict(const predict_args *a, lb_model *model, lb_dataset *data, int64_t n, int replace)
{
    const char *cmd = "predict";
    const lb_model_config *mc = lb_model_get_config(model);
    lb_batch all;
    memset(&all, 0, sizeof all);
    lb_predictions pr;
    memset(&pr, 0, sizeof pr);
    lb_predictions_source source = {a->ck, a->data_path, a->split, lb_model_kind_name(mc->kind),
                                    a->po.incremental ? "incremental" : "full"};
    lb_status st = lb_dataset_slice(data, a->split, 0, n, &all);
    double t_start = lb_clock_wall();
    if (st == LB_OK)
        st = lb_predict(model, data, a->split, n, &a->po, &pr);
    double seconds = lb_clock_wall() - t_start;
    if (st == LB_OK)
        st = lb_predictions_write(a->out, &pr, &all, &source, replace);
    int code = 0;
    if (st != LB_OK) {
        code = lb_cli_fail(cmd);
    } else {
        int64_t scored;
        double metric = lb_predictions_score(&pr, all.targets, all.target_values, &scored);
        printf("%s: %lld examples of the %s split through the %s path in %.2f s; %s %.4f over %lld %s\n", a->out,
               (long long)n, a->split, a->po.incremental ? "streaming" : "full-sequence", seconds,
               all.target_values ? "mse" : "accuracy", metric, (long long)scored,
               pr.positions > 1 ? "positions" : "examples");
    }
    lb_batch_free(&all);
    lb_predictions_free(&pr);
    return code;
}

int lb_cli_predict(int argc, char **argv)
{
    const char *cmd = "predict";
    predict_args a = {.split = "test", .po = {16, 0, 1, 0}, .missing = -1};
    int code = parse_args(argc, argv, &a);
    if (code >= 0)
        return code;
    if (a.csv)
        return predict_csv(&a);
    if ((code = check_args(&a)) >= 0)
        return code;
    int replace = lb_output_present(a.out); /* with --force: what was there now, nothing that appears later */
    if (lb_run_set_threads((int)a.threads) < 0)
        return lb_cli_fail(cmd);
    lb_dataset *data = lb_dataset_open(a.data_path);
    if (!data)
        return lb_cli_fail(cmd);
    /* a text corpus: windows of the model's context (or --seq-len), the model's vocabulary */
    if ((code = lb_cli_fit_data(cmd, a.ck, data, a.seq_len)) != 0) {
        lb_dataset_close(data);
        return code;
    }
    lb_model *model = lb_checkpoint_load_model(a.ck);
    int64_t n = lb_dataset_split_size(data, a.split);
    char task[64] = "";
    if (!model || lb_checkpoint_read_task(a.ck, task, sizeof task) != LB_OK ||
        lb_model_data_check(lb_model_get_config(model), task, data) != LB_OK || n < 0)
        code = lb_cli_fail(cmd);
    else if (lb_cli_check_max_context(a.ck, lb_model_get_config(model), a.po.max_context) != LB_OK)
        code = lb_cli_error(cmd, 2, "%s", lb_last_error()); /* an option that does not apply: usage */
    else if ((n = a.examples > 0 && a.examples < n ? a.examples : n) == 0)
        code = lb_cli_error(cmd, 1, "%s: the %s split is empty", a.data_path, a.split);
    else
        code = run_predict(&a, model, data, n, replace);
    lb_model_free(model);
    lb_dataset_close(data);
    return code;
}

/* lookback eval: a checkpoint's loss and accuracy on a data file. */
#include <getopt.h>
#include <stdlib.h>
#include <string.h>

#include "data/events.h"
#include "data/results.h"
#include "cli/cli.h"
#include "lab/eval_report.h"
#include "lab/run_config.h"
#include "train/trainer.h"

static void eval_usage(FILE *out)
{
    fputs("usage: lookback eval --checkpoint CK.h5 --data FILE.h5 [options]\n"
          "\n"
          "Prints the loss and accuracy (MSE for regression) of the checkpoint's model on a split,\n"
          "and the accuracy per distance bin when the file has distances. For classification (up\n"
          "to 16 classes): precision, recall and F1 per class, macro-F1, the confusion matrix, the\n"
          "area under the precision-recall curve of a binary label (average precision, as\n"
          "sklearn's average_precision_score) and the majority-class baseline (docs/events.md).\n"
          "\n"
          "  --split NAME            train | val | test (default test)\n"
          "  --examples N            evaluate the first N examples only (default 0: all; a split\n"
          "                          with fewer gives all it has, and the count is printed)\n"
          "  --batch N               examples per forward pass (default 16)\n"
          "  --bins N                distance bins (default 8, at most 16)\n"
          "  --seq-len T             text corpora: the window length (default: the one the model\n"
          "                          was trained with); the split is scored whole in non-overlapping\n"
          "                          windows, and the loss is also given in bits per character (byte)\n"
          "  --json                  print one JSON object instead of the table\n"
          "  --attention-out F.h5    write the last attention layer's weights of the first examples\n"
          "  --attention-examples N  how many examples --attention-out writes (default 4; only with\n"
          "                          --attention-out)\n"
          "  --threads N             threads (default OMP_NUM_THREADS or all processors)\n",
          out);
}

/* The command line of eval. */
typedef struct eval_args {
    const char *ck, *data_path, *split, *attention_out;
    int64_t examples, batch, bins, attention_examples, threads, seq_len;
    int json, attention_examples_set;
} eval_args;

/* Reads the options into a; -1 to go on, else the exit code (printed). */
static int parse_args(int argc, char **argv, eval_args *a)
{
    const char *cmd = "eval";
    static const struct option opts[] = {
        {"checkpoint", required_argument, NULL, 'c'}, {"data", required_argument, NULL, 'd'},
        {"split", required_argument, NULL, 's'},      {"examples", required_argument, NULL, 'n'},
        {"batch", required_argument, NULL, 'b'},      {"bins", required_argument, NULL, 'B'},
        {"json", no_argument, NULL, 'j'},             {"attention-out", required_argument, NULL, 'a'},
        {"attention-examples", required_argument, NULL, 'A'}, {"threads", required_argument, NULL, 't'},
        {"seq-len", required_argument, NULL, 'T'},
        {"help", no_argument, NULL, 'h'},             {NULL, 0, NULL, 0},
    };
    optind = 1;
    opterr = 0;
    int c;
    lb_status st = LB_OK;
    while ((c = getopt_long(argc, argv, ":h", opts, NULL)) != -1 && st == LB_OK) {
        switch (c) {
        case 'c': a->ck = optarg; break;
        case 'd': a->data_path = optarg; break;
        case 's': st = lb_cli_split("--split", optarg, &a->split); break;
        case 'n': st = lb_option_int("--examples", optarg, 0, INT64_MAX, &a->examples); break;
        case 'b': st = lb_option_int("--batch", optarg, 1, 1 << 20, &a->batch); break;
        case 'B': st = lb_option_int("--bins", optarg, 0, LB_EVAL_MAX_BINS, &a->bins); break;
        case 'j': a->json = 1; break;
        case 'a': a->attention_out = optarg; break;
        case 'A':
            st = lb_option_int("--attention-examples", optarg, 1, 1024, &a->attention_examples);
            a->attention_examples_set = 1;
            break;
        case 't': st = lb_option_int("--threads", optarg, 0, 1024, &a->threads); break;
        case 'T': st = lb_cli_seq_len(optarg, &a->seq_len); break;
        case 'h': eval_usage(stdout); return 0;
        default: return lb_cli_bad_option(cmd, c, argv);
        }
    }
    if (st != LB_OK)
        return lb_cli_error(cmd, 2, "%s", lb_last_error());
    if (optind < argc)
        return lb_cli_error(cmd, 2, "unexpected argument '%s'", argv[optind]);
    if (!a->ck || !a->data_path)
        return lb_cli_error(cmd, 2, "--checkpoint and --data are required");
    /* An option that does not apply is refused, as the run options are ("drop it"). */
    if (a->attention_examples_set && !a->attention_out)
        return lb_cli_error(cmd, 2, "--attention-examples does not apply without --attention-out (it sets how many "
                                    "examples' attention weights that file gets); drop it, or add --attention-out FILE");
    if (a->attention_out && lb_files_exists(a->attention_out))
        return lb_cli_error(cmd, 1, "%s already exists; choose another --attention-out", a->attention_out);
    return -1;
}

/* The checkpoint's model on the data: evaluated, the attention file written, printed. */
static int run_eval(const eval_args *a, const lb_model_config *mc, lb_dataset *data, const lb_event_schema *trained)
{
    const char *cmd = "eval";
    lb_model *model = lb_model_new(mc);
    int code = 0;
    lb_eval_result r;
    lb_tensor *weights = NULL;
    if (!model || lb_checkpoint_load_params(a->ck, model) != LB_OK) {
        code = lb_cli_fail(cmd);
    } else if (lb_evaluate(model, data, a->split, a->examples, a->attention_out ? a->attention_examples : a->batch,
                           (int)a->bins, &r, a->attention_out ? &weights : NULL) != LB_OK) {
        code = lb_cli_fail(cmd);
    } else if (!lb_dataset_is_regression(data) && r.scored == 0) {
        code = lb_cli_error(cmd, 1, "%s: the %lld examples evaluated (%s split) have no scored target (every target is "
                            "-100, the ignore index): there is nothing to score; evaluate more --examples",
                            a->data_path, (long long)r.examples, a->split);
    } else if (a->attention_out && !weights) {
        code = lb_cli_error(cmd, 1, "--attention-out: a %s model has no attention weights", lb_model_kind_name(mc->kind));
    } else if (a->attention_out && lb_attention_write(a->attention_out, weights, data, a->split) != LB_OK) {
        code = lb_cli_fail(cmd);
    } else {
        lb_eval_report rep = {a->ck, a->data_path, a->split, data, trained, &r};
        (a->json ? lb_eval_print_json : lb_eval_print_table)(stdout, &rep);
        if (a->attention_out && !a->json)
            printf("attention weights of %lld examples written to %s\n", (long long)weights->shape[0], a->attention_out);
    }
    lb_tensor_free(weights);
    lb_model_free(model);
    return code;
}

int lb_cli_eval(int argc, char **argv)
{
    const char *cmd = "eval";
    eval_args a = {.split = "test", .batch = 16, .bins = 8, .attention_examples = 4};
    int code = parse_args(argc, argv, &a);
    if (code >= 0)
        return code;
    if (lb_run_set_threads((int)a.threads) < 0)
        return lb_cli_fail(cmd);
    lb_model_config mc;
    if (lb_checkpoint_read_model_config(a.ck, &mc) != LB_OK)
        return lb_cli_fail(cmd);
    if (a.attention_out && !lb_cli_has_attention(&mc))
        return lb_cli_error(cmd, 2, "--attention-out: %s holds a %s model, which has no attention weights", a.ck,
                            lb_model_kind_name(mc.kind));
    char task[64];
    if (lb_checkpoint_read_task(a.ck, task, sizeof task) != LB_OK)
        return lb_cli_fail(cmd);
    lb_dataset *data = lb_dataset_open_split(a.data_path, a.split); /* memory for that split only */
    if (!data)
        return lb_cli_fail(cmd);
    /* A text corpus is scored in windows of the model's context (or --seq-len), with the
     * vocabulary the model was trained on. */
    if ((code = lb_cli_fit_data(cmd, a.ck, data, a.seq_len)) != 0) {
        lb_dataset_close(data);
        return code;
    }
    /* The checkpoint's model and the file must fit: checked before any work; an imported
     * event log must be scaled and mapped as the model's training file was. */
    lb_event_schema *trained = NULL;
    if (lb_model_data_check(&mc, task, data) != LB_OK || lb_run_check_scored(data, a.split) != LB_OK ||
        lb_checkpoint_read_events(a.ck, &trained) != LB_OK || lb_model_events_check(trained, a.ck, data) != LB_OK)
        code = lb_cli_fail(cmd);
    else
        code = run_eval(&a, &mc, data, trained);
    lb_event_schema_free(trained);
    lb_dataset_close(data);
    return code;
}

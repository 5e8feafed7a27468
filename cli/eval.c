/* lookback eval: a checkpoint's loss and accuracy on a data file. */
#include <getopt.h>
#include <json-c/json.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "data/events.h"
#include "data/results.h"
#include "cli/cli.h"
#include "lab/run_config.h"
#include "train/trainer.h"

/* "char", "byte" or "token" (bpe, unigram): what a text corpus's symbols are. */
static const char *text_unit(const lb_dataset *data)
{
    lb_vocab_kind k = lb_vocab_get_kind(lb_dataset_vocab(data));
    return k == LB_VOCAB_BYTE ? "byte" : lb_vocab_kind_is_subword(k) ? "token" : "char";
}

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

/* How many trailing output indices to report: copy memory's copied symbols (the
 * last copy_symbols positions), 0 for other tasks. */
static int shown_outputs(const lb_dataset *data, const lb_eval_result *r)
{
    const lb_task_options *o = lb_dataset_options(data);
    if (o->task != LB_TASK_COPY || r->n_outputs == 0)
        return 0;
    return o->copy_symbols < r->n_outputs ? (int)o->copy_symbols : r->n_outputs;
}

/* The majority-class baseline: the most frequent class of the model's training targets
 * (an imported log's schema records them), else of the evaluated split itself. */
typedef struct baseline {
    int64_t cls;
    double accuracy, macro_f1, average_precision;
    int from_training;
} baseline;

static baseline majority(const lb_eval_result *r, const lb_event_schema *trained)
{
    baseline b = {-1, NAN, NAN, NAN, 0};
    const lb_class_report *c = &r->classes;
    if (c->num_classes == 0)
        return b;
    b.from_training = trained && trained->num_classes == c->num_classes;
    b.cls = lb_majority_baseline(b.from_training ? trained->train_labels : c->support, c->support, c->num_classes,
                                 &b.accuracy, &b.macro_f1, &b.average_precision);
    return b;
}

static json_object *json_num(double v) { return isnan(v) ? NULL : json_object_new_double(v); }

static json_object *classes_json(const lb_eval_result *r, const baseline *b)
{
    const lb_class_report *c = &r->classes;
    json_object *o = json_object_new_object(), *per = json_object_new_array(), *conf = json_object_new_array();
    for (int64_t k = 0; k < c->num_classes; k++) {
        json_object *e = json_object_new_object(), *row = json_object_new_array();
        json_object_object_add(e, "class", json_object_new_int64(k));
        json_object_object_add(e, "precision", json_object_new_double(c->precision[k]));
        json_object_object_add(e, "recall", json_object_new_double(c->recall[k]));
        json_object_object_add(e, "f1", json_object_new_double(c->f1[k]));
        json_object_object_add(e, "support", json_object_new_int64(c->support[k]));
        json_object_object_add(e, "predicted", json_object_new_int64(c->predicted[k]));
        json_object_array_add(per, e);
        for (int64_t p = 0; p < c->num_classes; p++)
            json_object_array_add(row, json_object_new_int64(c->confusion[k * c->num_classes + p]));
        json_object_array_add(conf, row);
    }
    json_object_object_add(o, "per_class", per);
    json_object_object_add(o, "confusion", conf);
    json_object_object_add(o, "macro_f1", json_num(c->macro_f1));
    json_object_object_add(o, "f1", json_num(lb_class_report_detector_f1(c)));
    json_object_object_add(o, "pr_auc", json_num(r->average_precision));
    json_object *base = json_object_new_object();
    json_object_object_add(base, "class", json_object_new_int64(b->cls));
    json_object_object_add(base, "of", json_object_new_string(b->from_training ? "training targets" : "this split"));
    json_object_object_add(base, "accuracy", json_num(b->accuracy));
    json_object_object_add(base, "macro_f1", json_num(b->macro_f1));
    json_object_object_add(base, "f1", json_num(c->num_classes == 2 ? (b->cls == 1 ? NAN : 0.0) : b->macro_f1));
    json_object_object_add(base, "pr_auc", json_num(b->average_precision));
    json_object_object_add(o, "majority_baseline", base);
    return o;
}

static void print_classes(const lb_eval_result *r, const baseline *b)
{
    const lb_class_report *c = &r->classes;
    if (c->num_classes == 0)
        return;
    printf("%-8s %10s %10s %10s %10s %10s\n", "class", "precision", "recall", "f1", "support", "predicted");
    for (int64_t k = 0; k < c->num_classes; k++)
        printf("%-8lld %10.4f %10.4f %10.4f %10lld %10lld\n", (long long)k, c->precision[k], c->recall[k], c->f1[k],
               (long long)c->support[k], (long long)c->predicted[k]);
    printf("macro-F1 %.4f", c->macro_f1);
    if (c->num_classes == 2)
        printf("  F1 (class 1) %.4f  PR-AUC %.4f (average precision of p(class 1), as sklearn's "
               "average_precision_score%s)",
               c->f1[1], r->average_precision, isnan(r->average_precision) ? "; undefined: no target of class 1" : "");
    printf("\nmajority baseline: class %lld (the most frequent of %s) for every target: accuracy %.4f  macro-F1 %.4f",
           (long long)b->cls, b->from_training ? "the training targets" : "this split's targets", b->accuracy,
           b->macro_f1);
    if (c->num_classes == 2)
        printf("  F1 (class 1) %.4f  PR-AUC %.4f", b->cls == 1 ? NAN : 0.0, b->average_precision);
    printf("\nconfusion (rows: true class, columns: predicted)\n%8s", "");
    for (int64_t p = 0; p < c->num_classes; p++)
        printf(" %9lld", (long long)p);
    fputc('\n', stdout);
    for (int64_t k = 0; k < c->num_classes; k++) {
        printf("%-8lld", (long long)k);
        for (int64_t p = 0; p < c->num_classes; p++)
            printf(" %9lld", (long long)c->confusion[k * c->num_classes + p]);
        fputc('\n', stdout);
    }
}

static void print_json(const lb_eval_result *r, const lb_dataset *ds, const char *ck, const char *data,
                       const char *split, const baseline *b)
{
    json_object *o = json_object_new_object();
    json_object_object_add(o, "checkpoint", json_object_new_string(ck));
    json_object_object_add(o, "data", json_object_new_string(data));
    json_object_object_add(o, "split", json_object_new_string(split));
    json_object_object_add(o, "examples", json_object_new_int64(r->examples));
    json_object_object_add(o, "loss", json_object_new_double(r->loss));
    if (lb_dataset_is_text(ds)) {
        double bpb = NAN, bpc = NAN;
        lb_text_bits(ds, split, r->loss, &bpb, &bpc);
        json_object_object_add(o, "bits_per_byte", json_object_new_double(bpb));
        json_object_object_add(o, "bits_per_char", json_object_new_double(bpc));
        json_object_object_add(o, "perplexity", json_object_new_double(exp(r->loss)));
        json_object_object_add(o, "tokens", json_object_new_int64(r->scored));
        json_object_object_add(o, "seq_len", json_object_new_int64(lb_dataset_seq_len(ds)));
    }
    if (isnan(r->accuracy)) {
        json_object_object_add(o, "mse", json_object_new_double(r->mse));
        /* The baseline the text output prints beside the MSE. */
        json_object_object_add(o, "baseline_mse", json_object_new_double(lb_dataset_mean_predictor_mse(ds, split, r->examples)));
        json_object *bins = json_object_new_array();
        for (int k = 0; k < r->n_bins; k++) {
            json_object *bin = json_object_new_object();
            json_object_object_add(bin, "distance_min", json_object_new_int64(r->bin_lo[k]));
            json_object_object_add(bin, "distance_max", json_object_new_int64(r->bin_hi[k]));
            json_object_object_add(bin, "examples", json_object_new_int64(r->bin_total[k]));
            json_object_object_add(bin, "mse", r->bin_total[k] ? json_object_new_double(r->bin_sq_error[k] /
                                                                                    (double)r->bin_total[k])
                                                               : NULL);
            json_object_array_add(bins, bin);
        }
        json_object_object_add(o, "distance_bins", bins);
    } else {
        json_object_object_add(o, "accuracy", json_object_new_double(r->accuracy));
        json_object_object_add(o, "chance", lb_dataset_num_classes(ds) > 0
                                                ? json_object_new_double(1.0 / (double)lb_dataset_num_classes(ds))
                                                : NULL);
        json_object *bins = json_object_new_array();
        for (int k = 0; k < r->n_bins; k++) {
            json_object *bin = json_object_new_object();
            json_object_object_add(bin, "distance_min", json_object_new_int64(r->bin_lo[k]));
            json_object_object_add(bin, "distance_max", json_object_new_int64(r->bin_hi[k]));
            json_object_object_add(bin, "scored", json_object_new_int64(r->bin_total[k]));
            json_object_object_add(bin, "accuracy", r->bin_total[k] ? json_object_new_double((double)r->bin_correct[k] /
                                                                                         (double)r->bin_total[k])
                                                                    : NULL);
            json_object_array_add(bins, bin);
        }
        json_object_object_add(o, "distance_bins", bins);
        int shown = shown_outputs(ds, r);
        if (shown > 0) {
            json_object *outputs = json_object_new_array();
            for (int j = r->n_outputs - shown; j < r->n_outputs; j++)
                json_object_array_add(outputs, r->output_total[j] ? json_object_new_double((double)r->output_correct[j] /
                                                                                         (double)r->output_total[j])
                                                                  : NULL);
            json_object_object_add(o, "accuracy_per_output", outputs);
        }
        if (r->classes.num_classes > 0)
            json_object_object_add(o, "classes", classes_json(r, b));
    }
    printf("%s\n", json_object_to_json_string_ext(o, JSON_C_TO_STRING_PLAIN | JSON_C_TO_STRING_NOSLASHESCAPE));
    json_object_put(o);
}

int lb_cli_eval(int argc, char **argv)
{
    const char *cmd = "eval", *ck = NULL, *data_path = NULL, *split = "test", *attention_out = NULL;
    int64_t examples = 0, batch = 16, bins = 8, attention_examples = 4, threads = 0, seq_len = 0;
    int json = 0, attention_examples_set = 0;
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
        case 'c': ck = optarg; break;
        case 'd': data_path = optarg; break;
        case 's': st = lb_cli_split("--split", optarg, &split); break;
        case 'n': st = lb_option_int("--examples", optarg, 0, INT64_MAX, &examples); break;
        case 'b': st = lb_option_int("--batch", optarg, 1, 1 << 20, &batch); break;
        case 'B': st = lb_option_int("--bins", optarg, 0, LB_EVAL_MAX_BINS, &bins); break;
        case 'j': json = 1; break;
        case 'a': attention_out = optarg; break;
        case 'A':
            st = lb_option_int("--attention-examples", optarg, 1, 1024, &attention_examples);
            attention_examples_set = 1;
            break;
        case 't': st = lb_option_int("--threads", optarg, 0, 1024, &threads); break;
        case 'T': st = lb_cli_seq_len(optarg, &seq_len); break;
        case 'h': eval_usage(stdout); return 0;
        default: return lb_cli_bad_option(cmd, c, argv);
        }
    }
    if (st != LB_OK)
        return lb_cli_error(cmd, 2, "%s", lb_last_error());
    if (optind < argc)
        return lb_cli_error(cmd, 2, "unexpected argument '%s'", argv[optind]);
    if (!ck || !data_path)
        return lb_cli_error(cmd, 2, "--checkpoint and --data are required");
    /* An option that does not apply is refused, as the run options are ("drop it"). */
    if (attention_examples_set && !attention_out)
        return lb_cli_error(cmd, 2, "--attention-examples does not apply without --attention-out (it sets how many "
                                    "examples' attention weights that file gets); drop it, or add --attention-out FILE");
    if (attention_out && lb_files_exists(attention_out))
        return lb_cli_error(cmd, 1, "%s already exists; choose another --attention-out", attention_out);
    if (lb_run_set_threads((int)threads) < 0)
        return lb_cli_fail(cmd);
    lb_model_config mc;
    if (lb_checkpoint_read_model_config(ck, &mc) != LB_OK)
        return lb_cli_fail(cmd);
    if (attention_out && !lb_cli_has_attention(&mc))
        return lb_cli_error(cmd, 2, "--attention-out: %s holds a %s model, which has no attention weights", ck,
                            lb_model_kind_name(mc.kind));
    char task[64];
    if (lb_checkpoint_read_task(ck, task, sizeof task) != LB_OK)
        return lb_cli_fail(cmd);
    lb_dataset *data = lb_dataset_open_split(data_path, split); /* memory for that split only */
    if (!data)
        return lb_cli_fail(cmd);
    /* A text corpus is scored in windows of the model's context (or --seq-len), with the
     * vocabulary the model was trained on. */
    int fit = lb_cli_fit_data(cmd, ck, data, seq_len);
    if (fit != 0) {
        lb_dataset_close(data);
        return fit;
    }
    /* The checkpoint's model and the file must fit: checked before any work; an imported
     * event log must be scaled and mapped as the model's training file was. */
    lb_event_schema *trained = NULL;
    if (lb_model_data_check(&mc, task, data) != LB_OK || lb_run_check_scored(data, split) != LB_OK ||
        lb_checkpoint_read_events(ck, &trained) != LB_OK || lb_model_events_check(trained, ck, data) != LB_OK) {
        lb_event_schema_free(trained);
        lb_dataset_close(data);
        return lb_cli_fail(cmd);
    }
    lb_model *model = lb_model_new(&mc);
    int code = 0;
    lb_eval_result r;
    lb_tensor *weights = NULL;
    if (!model || lb_checkpoint_load_params(ck, model) != LB_OK) {
        code = lb_cli_fail(cmd);
    } else if (lb_evaluate(model, data, split, examples, attention_out ? attention_examples : batch, (int)bins, &r,
                           attention_out ? &weights : NULL) != LB_OK) {
        code = lb_cli_fail(cmd);
    } else if (!lb_dataset_is_regression(data) && r.scored == 0) {
        code = lb_cli_error(cmd, 1, "%s: the %lld examples evaluated (%s split) have no scored target (every target is "
                            "-100, the ignore index): there is nothing to score; evaluate more --examples",
                            data_path, (long long)r.examples, split);
    } else if (attention_out && !weights) {
        code = lb_cli_error(cmd, 1, "--attention-out: a %s model has no attention weights", lb_model_kind_name(mc.kind));
    } else if (attention_out && lb_attention_write(attention_out, weights, data, split) != LB_OK) {
        code = lb_cli_fail(cmd);
    } else if (json) {
        baseline b = majority(&r, trained);
        print_json(&r, data, ck, data_path, split, &b);
    } else {
        if (lb_dataset_is_text(data))
            printf("%s on %s (%s split: %lld tokens scored in %lld windows of %lld)\n", ck, data_path, split,
                   (long long)r.scored, (long long)r.examples, (long long)lb_dataset_seq_len(data));
        else
            printf("%s on %s (%s split, %lld examples)\n", ck, data_path, split, (long long)r.examples);
        double entropy = NAN;
        if (lb_dataset_is_text(data)) {
            if (lb_text_unigram_bits(data, split, &entropy, NULL) != LB_OK)
                lb_clear_error();
            double bpb = NAN, bpc = NAN;
            lb_text_bits(data, split, r.loss, &bpb, &bpc);
            printf("loss %.4f nats/token  %.4f bits per byte  %.4f bits per char  perplexity %.3f  accuracy %.4f\n",
                   r.loss, bpb, bpc, exp(r.loss), r.accuracy);
            if (!isnan(entropy))
                printf("(the %s split's own unigram entropy: %.4f bits per %s)\n", split, entropy, text_unit(data));
        } else if (isnan(r.accuracy)) {
            printf("mse %.6f  (predicting the mean of these targets: %.6f)\n", r.mse, lb_dataset_mean_predictor_mse(data, split, r.examples));
            if (r.n_bins > 0)
                printf("%-20s %10s %8s\n", "distance", "mse", "examples");
            for (int k = 0; k < r.n_bins; k++) {
                char range[64];
                snprintf(range, sizeof range, "%lld..%lld", (long long)r.bin_lo[k], (long long)r.bin_hi[k]);
                if (r.bin_total[k])
                    printf("%-20s %10.6f %8lld\n", range, r.bin_sq_error[k] / (double)r.bin_total[k], (long long)r.bin_total[k]);
                else
                    printf("%-20s %10s %8d\n", range, "-", 0);
            }
        } else {
            baseline b = majority(&r, trained);
            /* An event log's classes are far from uniform: its reference is the majority
             * baseline (below), not 1 / num_classes. */
            if (trained && !isnan(b.accuracy))
                printf("loss %.4f  accuracy %.4f  (majority baseline %.4f)\n", r.loss, r.accuracy, b.accuracy);
            else
                printf("loss %.4f  accuracy %.4f  (chance %.4f)\n", r.loss, r.accuracy,
                       lb_dataset_num_classes(data) > 0 ? 1.0 / (double)lb_dataset_num_classes(data) : 0.0);
            if (r.n_bins > 0)
                printf("%-20s %10s %8s\n", "distance", "accuracy", "scored");
            for (int k = 0; k < r.n_bins; k++) {
                char range[64];
                snprintf(range, sizeof range, "%lld..%lld", (long long)r.bin_lo[k], (long long)r.bin_hi[k]);
                if (r.bin_total[k])
                    printf("%-20s %10.4f %8lld\n", range, (double)r.bin_correct[k] / (double)r.bin_total[k],
                           (long long)r.bin_total[k]);
                else
                    printf("%-20s %10s %8d\n", range, "-", 0);
            }
            int shown = shown_outputs(data, &r);
            if (shown > 0)
                printf("%-20s %10s %8s\n", "output index", "accuracy", "scored");
            for (int j = r.n_outputs - shown; j < r.n_outputs; j++)
                if (r.output_total[j])
                    printf("%-20d %10.4f %8lld\n", j - (r.n_outputs - shown),
                           (double)r.output_correct[j] / (double)r.output_total[j], (long long)r.output_total[j]);
            print_classes(&r, &b);
        }
        if (attention_out)
            printf("attention weights of %lld examples written to %s\n", (long long)weights->shape[0], attention_out);
    }
    lb_tensor_free(weights);
    lb_model_free(model);
    lb_dataset_close(data);
    lb_event_schema_free(trained);
    return code;
}

/* What `lookback eval` prints of an evaluation (lab/eval_report.h). */
#include "lab/eval_report.h"

#include <json-c/json.h>
#include <math.h>
#include <stdio.h>

#include "data/events.h"
#include "data/text.h"

/* "char", "byte" or "token" (bpe, unigram): what a text corpus's symbols are. */
static const char *text_unit(const lb_dataset *data)
{
    lb_vocab_kind k = lb_vocab_get_kind(lb_dataset_vocab(data));
    return k == LB_VOCAB_BYTE ? "byte" : lb_vocab_kind_is_subword(k) ? "token" : "char";
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

static void print_classes(FILE *out, const lb_eval_result *r, const baseline *b)
{
    const lb_class_report *c = &r->classes;
    if (c->num_classes == 0)
        return;
    fprintf(out, "%-8s %10s %10s %10s %10s %10s\n", "class", "precision", "recall", "f1", "support", "predicted");
    for (int64_t k = 0; k < c->num_classes; k++)
        fprintf(out, "%-8lld %10.4f %10.4f %10.4f %10lld %10lld\n", (long long)k, c->precision[k], c->recall[k], c->f1[k],
               (long long)c->support[k], (long long)c->predicted[k]);
    fprintf(out, "macro-F1 %.4f", c->macro_f1);
    if (c->num_classes == 2)
        fprintf(out, "  F1 (class 1) %.4f  PR-AUC %.4f (average precision of p(class 1), as sklearn's "
               "average_precision_score%s)",
               c->f1[1], r->average_precision, isnan(r->average_precision) ? "; undefined: no target of class 1" : "");
    fprintf(out, "\nmajority baseline: class %lld (the most frequent of %s) for every target: accuracy %.4f  macro-F1 %.4f",
           (long long)b->cls, b->from_training ? "the training targets" : "this split's targets", b->accuracy,
           b->macro_f1);
    if (c->num_classes == 2)
        fprintf(out, "  F1 (class 1) %.4f  PR-AUC %.4f", b->cls == 1 ? NAN : 0.0, b->average_precision);
    fprintf(out, "\nconfusion (rows: true class, columns: predicted)\n%8s", "");
    for (int64_t p = 0; p < c->num_classes; p++)
        fprintf(out, " %9lld", (long long)p);
    fputc('\n', out);
    for (int64_t k = 0; k < c->num_classes; k++) {
        fprintf(out, "%-8lld", (long long)k);
        for (int64_t p = 0; p < c->num_classes; p++)
            fprintf(out, " %9lld", (long long)c->confusion[k * c->num_classes + p]);
        fputc('\n', out);
    }
}

void lb_eval_print_json(FILE *out, const lb_eval_report *rep)
{
    if (!out || !rep || !rep->result || !rep->data)
        return;
    const lb_eval_result *r = rep->result;
    const lb_dataset *ds = rep->data;
    const char *split = rep->split ? rep->split : "";
    baseline base = majority(r, rep->trained), *b = &base;
    json_object *o = json_object_new_object();
    json_object_object_add(o, "checkpoint", json_object_new_string(rep->checkpoint ? rep->checkpoint : ""));
    json_object_object_add(o, "data", json_object_new_string(rep->data_path ? rep->data_path : ""));
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
    fprintf(out, "%s\n", json_object_to_json_string_ext(o, JSON_C_TO_STRING_PLAIN | JSON_C_TO_STRING_NOSLASHESCAPE));
    json_object_put(o);
}

/* Per distance bin: accuracy and targets scored, or MSE and examples for regression. */
static void print_bins(FILE *out, const lb_eval_result *r, int regression)
{
    if (r->n_bins > 0)
        fprintf(out, "%-20s %10s %8s\n", "distance", regression ? "mse" : "accuracy", regression ? "examples" : "scored");
    for (int k = 0; k < r->n_bins; k++) {
        char range[64];
        snprintf(range, sizeof range, "%lld..%lld", (long long)r->bin_lo[k], (long long)r->bin_hi[k]);
        if (!r->bin_total[k])
            fprintf(out, "%-20s %10s %8d\n", range, "-", 0);
        else if (regression)
            fprintf(out, "%-20s %10.6f %8lld\n", range, r->bin_sq_error[k] / (double)r->bin_total[k], (long long)r->bin_total[k]);
        else
            fprintf(out, "%-20s %10.4f %8lld\n", range, (double)r->bin_correct[k] / (double)r->bin_total[k],
                   (long long)r->bin_total[k]);
    }
}

/* The classification table: loss and accuracy beside its reference, the bins, copy's
 * output indices, the classes. */
static void print_classification(FILE *out, const lb_eval_result *r, const lb_dataset *data, const lb_event_schema *trained)
{
    baseline b = majority(r, trained);
    /* An event log's classes are far from uniform: its reference is the majority
     * baseline (below), not 1 / num_classes. */
    if (trained && !isnan(b.accuracy))
        fprintf(out, "loss %.4f  accuracy %.4f  (majority baseline %.4f)\n", r->loss, r->accuracy, b.accuracy);
    else
        fprintf(out, "loss %.4f  accuracy %.4f  (chance %.4f)\n", r->loss, r->accuracy,
               lb_dataset_num_classes(data) > 0 ? 1.0 / (double)lb_dataset_num_classes(data) : 0.0);
    print_bins(out, r, 0);
    int shown = shown_outputs(data, r);
    if (shown > 0)
        fprintf(out, "%-20s %10s %8s\n", "output index", "accuracy", "scored");
    for (int j = r->n_outputs - shown; j < r->n_outputs; j++)
        if (r->output_total[j])
            fprintf(out, "%-20d %10.4f %8lld\n", j - (r->n_outputs - shown),
                   (double)r->output_correct[j] / (double)r->output_total[j], (long long)r->output_total[j]);
    print_classes(out, r, &b);
}

/* The table of eval: what was scored, then the measures of the task's kind. */
void lb_eval_print_table(FILE *out, const lb_eval_report *rep)
{
    if (!out || !rep || !rep->result || !rep->data)
        return;
    const lb_eval_result *r = rep->result;
    const lb_dataset *data = rep->data;
    const lb_eval_report *a = rep; /* checkpoint, data_path, split */
    if (lb_dataset_is_text(data))
        fprintf(out, "%s on %s (%s split: %lld tokens scored in %lld windows of %lld)\n", a->checkpoint, a->data_path, a->split,
               (long long)r->scored, (long long)r->examples, (long long)lb_dataset_seq_len(data));
    else
        fprintf(out, "%s on %s (%s split, %lld examples)\n", a->checkpoint, a->data_path, a->split, (long long)r->examples);
    double entropy = NAN;
    if (lb_dataset_is_text(data)) {
        if (lb_text_unigram_bits(data, a->split, &entropy, NULL) != LB_OK)
            lb_clear_error();
        double bpb = NAN, bpc = NAN;
        lb_text_bits(data, a->split, r->loss, &bpb, &bpc);
        fprintf(out, "loss %.4f nats/token  %.4f bits per byte  %.4f bits per char  perplexity %.3f  accuracy %.4f\n",
                r->loss, bpb, bpc, exp(r->loss), r->accuracy);
        if (!isnan(entropy))
            fprintf(out, "(the %s split's own unigram entropy: %.4f bits per %s)\n", a->split, entropy, text_unit(data));
    } else if (isnan(r->accuracy)) {
        fprintf(out, "mse %.6f  (predicting the mean of these targets: %.6f)\n", r->mse,
               lb_dataset_mean_predictor_mse(data, a->split, r->examples));
        print_bins(out, r, 1);
    } else {
        print_classification(out, r, data, rep->trained);
    }
}

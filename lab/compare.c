/* The comparison engine of lookback compare and the demo (lab/compare.h). */
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

#include "lab/compare.h"
#include "train/cost.h"
#include "layers/family.h"

#include "data/dataset.h"
#include "data/events.h"
#include "data/output.h"
#include "data/text.h"
#include "data/tasks.h"
#include "data/text.h"
#include "lab/files.h"
#include "layers/generate.h"
#include "lab/plot.h"
#include "tensor/clock.h"
#include "train/distributed.h"

/* ---- evaluation files ---- */

static lb_status describe_eval_file(lb_compare_eval *e, const lb_compare_model *specs, int n_models)
{
    lb_dataset *ds = lb_dataset_open(e->path);
    if (!ds)
        return lb_last_status();
    lb_status st = LB_OK;
    if (lb_dataset_split_size(ds, "test") < 1)
        st = lb_error(LB_ERR_VALUE, "%s: the test split is empty (evaluation files are scored on their test split)",
                      e->path);
    if (st == LB_OK)
        st = lb_run_check_scored(ds, "test");
    /* Each model as it will be built from its train file, checked against this file
     * before anything is trained (the check every command uses). */
    for (int m = 0; m < n_models && st == LB_OK; m++) {
        lb_dataset *train = lb_dataset_open(specs[m].rc.data);
        lb_run_config rc = specs[m].rc;
        if (train && lb_dataset_is_text(train) && rc.train.seq_len > 0) /* windows of the model's context */
            lb_dataset_set_seq_len(train, rc.train.seq_len);
        if (lb_dataset_is_text(ds) && lb_dataset_set_seq_len(ds, train ? lb_dataset_seq_len(train) : 1) != LB_OK)
            lb_clear_error();
        if (train)
            lb_model_config_fit_data(&rc.model, train);
        st = train ? LB_OK : lb_last_status();
        if (st == LB_OK && lb_dataset_is_text(train) && lb_dataset_is_text(ds)) /* the model's ids, the file's */
            st = lb_dataset_check_vocab(ds, lb_dataset_vocab(train), specs[m].rc.data);
        if (st == LB_OK)
            st = lb_model_data_check(&rc.model, lb_dataset_task_name(train), ds);
        if (st == LB_OK) { /* an event log: read as the training file was */
            const lb_event_schema *schema = lb_dataset_events(train);
            lb_clear_error();
            if (schema)
                st = lb_model_events_check(schema, specs[m].rc.data, ds);
        }
        if (st == LB_OK && (lb_run_check_scored(train, "train") != LB_OK || lb_run_check_scored(train, "val") != LB_OK))
            st = lb_last_status(); /* nothing to train on: said before any model is trained */
        if (st != LB_OK && n_models > 1)
            lb_error_context("model %s", specs[m].name);
        lb_dataset_close(train);
    }
    e->dmin = e->dmax = 0;
    e->dmean = NAN;
    e->regression = lb_dataset_is_regression(ds);
    e->baseline = NAN;
    e->base_accuracy = e->base_f1 = e->base_macro_f1 = e->base_pr_auc = NAN;
    int64_t C = lb_dataset_num_classes(ds);
    e->rare = !e->regression && C == 2;
    if (st == LB_OK && !e->regression && C <= LB_METRICS_MAX_CLASSES) {
        int64_t support[LB_METRICS_MAX_CLASSES];
        const lb_event_schema *schema = lb_dataset_events(ds);
        lb_clear_error();
        if (lb_dataset_label_histogram(ds, "test", support, NULL) == LB_OK) {
            int64_t m = lb_majority_baseline(schema ? schema->train_labels : support, support, C, &e->base_accuracy,
                                             &e->base_macro_f1, &e->base_pr_auc);
            e->base_f1 = C == 2 ? (m == 1 ? 2.0 * (double)support[1] / (double)(support[1] + support[0] + support[1])
                                          : 0.0)
                                : e->base_macro_f1;
        }
        lb_clear_error();
    }
    e->text = lb_dataset_is_text(ds);
    /* char: bits per character; byte, bpe, unigram: bits per byte of the text */
    snprintf(e->per, sizeof e->per, "%s",
             e->text && lb_vocab_get_kind(lb_dataset_vocab(ds)) != LB_VOCAB_CHAR ? "byte" : "char");
    if (st == LB_OK && lb_dataset_has_distance(ds)) {
        if (lb_dataset_distance_range(ds, "test", &e->dmin, &e->dmax) == LB_OK)
            e->dmean = 0.5 * (e->dmin + e->dmax);
        lb_clear_error();
    }
    if (!e->label[0]) {
        const char *base = strrchr(e->path, '/');
        const char *name = base ? base + 1 : e->path;
        size_t n = strlen(name) < sizeof e->label - 1 ? strlen(name) : sizeof e->label - 1;
        memcpy(e->label, name, n);
        e->label[n] = '\0';
        char *dot = strrchr(e->label, '.');
        if (dot)
            *dot = '\0';
    }
    lb_dataset_close(ds);
    return st;
}

/* ---- the report ---- */

/* The legend of the two clocks every table shows, in seconds: "train wall" is the
 * wall-clock time of training (evaluations excluded), "budget used" the time on the clock
 * --budget counts (lb_trainer_budget_spent: CPU seconds divided by the threads, or
 * wall-clock seconds). */
static void print_clocks_legend(FILE *out, const lb_compare_model *specs, int n_models)
{
    const lb_train_config *t = &specs[0].rc.train;
    int same = 1;
    for (int m = 1; m < n_models; m++)
        same &= specs[m].rc.train.budget_clock == t->budget_clock && specs[m].rc.train.time_budget == t->time_budget;
    fprintf(out, "  train wall: wall-clock seconds of training, evaluations excluded; time/step: train wall / steps; "
                 "budget used: seconds on the clock --budget counts, ");
    if (t->budget_clock == LB_BUDGET_CPU)
        fprintf(out, "CPU seconds per thread (the process's CPU time / its threads)");
    else
        fprintf(out, "wall-clock seconds");
    if (same && t->time_budget > 0)
        fprintf(out, ", of a --budget of %g s per model\n", t->time_budget);
    else
        fprintf(out, "\n");
    fprintf(out, "  FLOP/pos: training FLOPs per position (forward and backward, matrix products; docs/inspect.md); "
                 "tok/s: positions trained per wall second; MFU: FLOP/pos x tok/s / the sgemm rate measured at the "
                 "start; peak MiB: the process's peak resident memory\n");
}

/* The cost columns of a model's row: FLOPs per position, tokens per second, MFU, peak memory. */
static const char cost_head[] = " %9s %9s %6s %8s";
static void print_costs_head(FILE *out) { fprintf(out, cost_head, "FLOP/pos", "tok/s", "MFU", "peak MiB"); }
static void print_costs(FILE *out, const lb_run_result *r)
{
    char flops[32];
    fprintf(out, " %9s %9.0f %5.1f%% %8.0f", lb_flops_text(r->flops.training, flops, sizeof flops),
            r->tokens_per_second, 100 * r->mfu, r->peak_memory_mib);
}

/* The table of a comparison on text: bits per symbol, speed, time to the target, a sample. */
static void print_text_table(FILE *out, const lb_compare_model *specs, int n_models, const lb_compare_eval *evals,
                             int n_evals, const lb_compare_report *rep)
{
    fprintf(out, "\n%-12s %10s %7s %11s %11s %10s", "model", "parameters", "steps", "train wall", "budget used",
            "time/step");
    for (int e = 0; e < n_evals; e++) {
        char head[64];
        snprintf(head, sizeof head, "%.20s bp%c", evals[e].label, evals[e].per[0]);
        fprintf(out, " %12s", head);
    }
    print_costs_head(out);
    fprintf(out, " %12s  %s\n", "to target", "greedy sample");
    for (int m = 0; m < n_models; m++) {
        const lb_compare_result *r = &rep->results[m];
        fprintf(out, "%-12s %10lld %7lld %10.1fs %10.1fs %8.1fms", specs[m].name, (long long)r->run.parameters,
                (long long)r->run.steps, r->run.seconds, r->run.budget_seconds, 1e3 * r->seconds_per_step);
        print_costs(out, &r->run);
        for (int e = 0; e < n_evals; e++)
            fprintf(out, " %12.4f", r->bits[e]);
        if (isnan(r->seconds_to_target))
            fprintf(out, " %12s", "not reached");
        else
            fprintf(out, " %11.1fs", r->seconds_to_target);
        fprintf(out, "  %s\n", r->sample);
    }
    fprintf(out, "\nbp%c: test loss in bits per %s (the whole test split in non-overlapping windows of each model's "
                 "context); to target: training seconds to the first validation at or below %.4f bits per %s; samples: "
                 "greedy (temperature 0) after the prompt \"%s\"\n",
            evals[0].per[0], evals[0].per, rep->target_bits, evals[0].per, rep->prompt);
    print_clocks_legend(out, specs, n_models);
    for (int m = 0; m < n_models; m++)
        if (specs[m].note[0])
            fprintf(out, "  %s: %s\n", specs[m].name, specs[m].note);
}

void lb_compare_print_table(FILE *out, const lb_compare_model *specs, int n_models, const lb_compare_eval *evals, int n_evals,
                            const lb_compare_report *rep)
{
    if (n_evals > 0 && evals[0].text) {
        print_text_table(out, specs, n_models, evals, n_evals, rep);
        return;
    }
    fprintf(out, "\n%-14s %10s %11s %11s %10s", "model", "parameters", "train wall", "budget used", "time/step");
    print_costs_head(out);
    for (int e = 0; e < n_evals; e++)
        fprintf(out, " %12s", evals[e].label);
    fprintf(out, " %8s\n", "chance");
    for (int m = 0; m < n_models; m++) {
        fprintf(out, "%-14s %10lld %10.1fs %10.1fs %8.1fms", specs[m].name, (long long)rep->results[m].run.parameters,
                rep->results[m].run.seconds, rep->results[m].run.budget_seconds, 1e3 * rep->results[m].seconds_per_step);
        print_costs(out, &rep->results[m].run);
        for (int e = 0; e < n_evals; e++)
            if (evals[e].regression)
                fprintf(out, " %8.4f mse", rep->results[m].accuracy[e]);
            else
                fprintf(out, " %11.1f%%", 100 * rep->results[m].accuracy[e]);
        if (rep->chance > 0)
            fprintf(out, " %7.1f%%\n", 100 * rep->chance);
        else
            fprintf(out, " %8s\n", "-");
    }
    int any_regression = 0;
    for (int e = 0; e < n_evals; e++)
        any_regression |= evals[e].regression;
    if (any_regression) { /* where chance would be: the baseline a regression must beat */
        fprintf(out, "%-14s %10s %11s %11s %10s", "predict mean", "-", "-", "-", "-");
        fprintf(out, cost_head, "-", "-", "-", "-");
        for (int e = 0; e < n_evals; e++)
            if (evals[e].regression)
                fprintf(out, " %8.4f mse", evals[e].baseline);
            else
                fprintf(out, " %12s", "-");
        fprintf(out, " %8s\n", "-");
    }
    int any_rare = 0;
    for (int e = 0; e < n_evals; e++)
        any_rare |= evals[e].rare;
    if (any_rare) { /* rare events: accuracy says little; F1 and PR-AUC beside it, and the costs */
        fprintf(out, "\n%-14s %-12s %9s %9s %9s %9s %11s %10s %9s\n", "model", "file", "accuracy", "F1(1)", "macro-F1",
                "PR-AUC", "parameters", "train wall", "eval");
        for (int e = 0; e < n_evals; e++) {
            if (!evals[e].rare)
                continue;
            for (int m = 0; m < n_models; m++) {
                const lb_compare_result *r = &rep->results[m];
                fprintf(out, "%-14s %-12s %9.4f %9.4f %9.4f %9.4f %11lld %9.1fs %8.2fs\n", specs[m].name, evals[e].label,
                        r->accuracy[e], r->f1[e], r->macro_f1[e], r->pr_auc[e], (long long)r->run.parameters,
                        r->run.seconds, r->eval_seconds[e]);
            }
            fprintf(out, "%-14s %-12s %9.4f %9.4f %9.4f %9.4f %11s %10s %9s\n", "majority", evals[e].label,
                    evals[e].base_accuracy, evals[e].base_f1, evals[e].base_macro_f1, evals[e].base_pr_auc, "0", "-",
                    "-");
        }
        fprintf(out, "  F1(1): F1 of class 1; PR-AUC: average precision of p(class 1) (sklearn's "
                     "average_precision_score); majority: the most frequent training class for every target; eval: "
                     "wall-clock seconds of evaluating that file\n");
    }
    fprintf(out, "\n");
    print_clocks_legend(out, specs, n_models);
    for (int e = 0; e < n_evals; e++)
        if (!isnan(evals[e].dmean))
            fprintf(out, "  %s: %s, clue %d..%d events before the query\n", evals[e].label, evals[e].path, evals[e].dmin,
                   evals[e].dmax);
    for (int m = 0; m < n_models; m++)
        if (specs[m].note[0])
            fprintf(out, "  %s: %s\n", specs[m].name, specs[m].note);
}

/* A number, or null when it is not finite. */
static json_object *json_number(double v) { return isfinite(v) ? json_object_new_double(v) : NULL; }

/* summary.json's costs of one model (docs/inspect.md). */
static void add_costs(json_object *o, const lb_run_result *r)
{
    json_object *f = json_object_new_object();
    json_object_object_add(f, "seq_len", json_object_new_int64(r->flops.seq_len));
    json_object_object_add(f, "forward", json_number(r->flops.forward));
    json_object_object_add(f, "attention", json_number(r->flops.attention));
    json_object_object_add(f, "training", json_number(r->flops.training));
    json_object_object_add(o, "flops_per_position", f);
    json_object_object_add(o, "tokens_per_second", json_number(r->tokens_per_second));
    json_object_object_add(o, "sgemm_flops_per_second", json_number(r->sgemm_rate));
    json_object_object_add(o, "mfu", json_number(r->mfu));
    json_object_object_add(o, "peak_memory_mib", json_number(r->peak_memory_mib));
}

static lb_status write_summary(const char *path, const lb_compare_model *specs, const lb_compare_result *res, int n_models,
                               const lb_compare_eval *evals, int n_evals, double chance)
{
    json_object *root = json_object_new_object();
    json_object_object_add(root, "chance", chance > 0 ? json_object_new_double(chance) : NULL);
    json_object *models = json_object_new_array();
    for (int m = 0; m < n_models; m++) {
        json_object *o = json_object_new_object();
        json_object_object_add(o, "name", json_object_new_string(specs[m].name));
        json_object_object_add(o, "kind", json_object_new_string(lb_model_kind_name(specs[m].rc.model.kind)));
        json_object_object_add(o, "train_file", json_object_new_string(specs[m].rc.data));
        json_object_object_add(o, "parameters", json_object_new_int64(res[m].run.parameters));
        json_object_object_add(o, "steps", json_object_new_int64(res[m].run.steps));
        json_object_object_add(o, "train_seconds", json_object_new_double(res[m].run.seconds));
        json_object_object_add(o, "budget_seconds", json_object_new_double(res[m].run.budget_seconds));
        json_object_object_add(o, "budget_clock",
                               json_object_new_string(lb_budget_clock_name(specs[m].rc.train.budget_clock)));
        json_object_object_add(o, "seconds_per_step", json_object_new_double(res[m].seconds_per_step));
        json_object_object_add(o, "lr", json_object_new_double(specs[m].rc.train.optim.lr));
        add_costs(o, &res[m].run);
        if (specs[m].note[0])
            json_object_object_add(o, "note", json_object_new_string(specs[m].note));
        json_object *list = json_object_new_array();
        for (int e = 0; e < n_evals; e++) {
            json_object *r = json_object_new_object();
            json_object_object_add(r, "file", json_object_new_string(evals[e].path));
            json_object_object_add(r, "label", json_object_new_string(evals[e].label));
            json_object_object_add(r, "distance", isnan(evals[e].dmean) ? NULL : json_object_new_double(evals[e].dmean));
            json_object_object_add(r, "distance_min", json_object_new_int64(evals[e].dmin));
            json_object_object_add(r, "distance_max", json_object_new_int64(evals[e].dmax));
            json_object_object_add(r, evals[e].regression ? "mse" : "accuracy", json_object_new_double(res[m].accuracy[e]));
            if (evals[e].text) {
                json_object_object_add(r, "bits_per_byte", json_object_new_double(res[m].bits_per_byte[e]));
                json_object_object_add(r, "bits_per_char", json_object_new_double(res[m].bits_per_char[e]));
                json_object_object_add(r, "nats_per_token", json_object_new_double(res[m].nats_per_token[e]));
            }
            if (evals[e].regression)
                json_object_object_add(r, "baseline_mse", json_object_new_double(evals[e].baseline));
            if (!evals[e].regression && !isnan(res[m].macro_f1[e])) {
                json_object_object_add(r, "f1", json_object_new_double(res[m].f1[e]));
                json_object_object_add(r, "macro_f1", json_object_new_double(res[m].macro_f1[e]));
                json_object_object_add(r, "pr_auc", isnan(res[m].pr_auc[e]) ? NULL : json_object_new_double(res[m].pr_auc[e]));
                json_object *base = json_object_new_object();
                json_object_object_add(base, "accuracy", json_object_new_double(evals[e].base_accuracy));
                json_object_object_add(base, "f1", json_object_new_double(evals[e].base_f1));
                json_object_object_add(base, "macro_f1", json_object_new_double(evals[e].base_macro_f1));
                json_object_object_add(base, "pr_auc",
                                       isnan(evals[e].base_pr_auc) ? NULL : json_object_new_double(evals[e].base_pr_auc));
                json_object_object_add(r, "majority_baseline", base);
            }
            json_object_object_add(r, "eval_seconds", json_object_new_double(res[m].eval_seconds[e]));
            json_object_array_add(list, r);
        }
        json_object_object_add(o, "evaluations", list);
        if (n_evals > 0 && evals[0].text) {
            json_object_object_add(o, "seq_len", json_object_new_int64(specs[m].rc.train.seq_len));
            json_object_object_add(o, "seconds_to_target", isnan(res[m].seconds_to_target)
                                                               ? NULL
                                                               : json_object_new_double(res[m].seconds_to_target));
            json_object_object_add(o, "greedy_sample", json_object_new_string(res[m].sample));
        }
        json_object_array_add(models, o);
    }
    json_object_object_add(root, "models", models);
    return lb_files_write_json(root, path, "summary");
}

/* Validation accuracy (in percent) against training seconds, read back from a run's metrics.csv. */
typedef struct curve_points {
    double *x, *y;
    int n, max;
} curve_points;

static int add_curve_point(const lb_metrics_row *row, void *user)
{
    curve_points *c = user;
    c->x[c->n] = row->wall_seconds;
    c->y[c->n] = 100 * row->accuracy; /* percent */
    return ++c->n == c->max;
}

static int read_curve(const char *metrics_path, double *x, double *y, int max)
{
    curve_points c = {x, y, 0, max};
    if (max < 1 || lb_metrics_read(metrics_path, "val", add_curve_point, &c, NULL) != LB_OK)
        lb_clear_error();
    return c.n;
}

/* Draws the plots that apply; appends the names of the files written to `written`. */
static void write_plots(const char *out_dir, const lb_compare_model *specs, const lb_compare_result *res, int n_models,
                        const lb_compare_eval *evals, int n_evals, double chance, const lb_tensor *attention,
                        int64_t spike_position, const char *attention_label, char *written, size_t written_size)
{
    char path[4200];
    enum { MAX_POINTS = 4096 };
    static double cx[LB_COMPARE_MAX_MODELS][MAX_POINTS], cy[LB_COMPARE_MAX_MODELS][MAX_POINTS];
    const char *names[LB_COMPARE_MAX_MODELS];
    const double *xs[LB_COMPARE_MAX_MODELS], *ys[LB_COMPARE_MAX_MODELS];
    int counts[LB_COMPARE_MAX_MODELS];
    for (int m = 0; m < n_models; m++) {
        char metrics[4200];
        snprintf(metrics, sizeof metrics, "%s/%s/metrics.csv", out_dir, specs[m].name);
        counts[m] = read_curve(metrics, cx[m], cy[m], MAX_POINTS);
        names[m] = specs[m].name;
        xs[m] = cx[m];
        ys[m] = cy[m];
    }
#define NOTE_WRITTEN()                                                                                         \
    do {                                                                                                       \
        const char *f = strrchr(lb_plot_last_path(), '/');                                                     \
        size_t used = strlen(written);                                                                         \
        snprintf(written + used, written_size - used, ", %s", f ? f + 1 : lb_plot_last_path());                \
    } while (0)
    int regression = n_evals > 0 && evals[0].regression;
    if (regression)
        ; /* the curves plot validation accuracy, which regression does not have */
    else if (lb_plot_curves_range(lb_files_join(path, sizeof path, out_dir, "learning_curves.png"),
                                  "Validation accuracy while training", "training time (s)", "accuracy (%)", n_models,
                                  names, counts, xs, ys, 0, 105) != LB_OK)
        fprintf(stderr, "lookback: learning-curve plot skipped: %s\n", lb_last_error());
    else
        NOTE_WRITTEN();
    double dist[LB_COMPARE_MAX_EVALS];
    double acc[LB_COMPARE_MAX_MODELS][LB_COMPARE_MAX_EVALS];
    const double *accs[LB_COMPARE_MAX_MODELS];
    int n_points = 0;
    for (int e = 0; e < n_evals; e++)
        if (!isnan(evals[e].dmean)) {
            for (int m = 0; m < n_models; m++)
                acc[m][n_points] = res[m].accuracy[e];
            dist[n_points++] = evals[e].dmean;
        }
    for (int m = 0; m < n_models; m++)
        accs[m] = acc[m];
    if (n_points > 0 && !regression) {
        if (lb_plot_accuracy_by_distance(lb_files_join(path, sizeof path, out_dir, "accuracy_by_distance.png"), n_models,
                                         names, n_points, dist, accs, chance) != LB_OK)
            fprintf(stderr, "lookback: accuracy plot skipped: %s\n", lb_last_error());
        else
            NOTE_WRITTEN();
    }
    if (attention) {
        /* weights [E, H, Tq, Tk]: the first example's last query, averaged over heads. */
        int64_t H = attention->shape[1], Tq = attention->shape[2], Tk = attention->shape[3];
        float *w = calloc((size_t)Tk, sizeof *w);
        for (int64_t h = 0; w && h < H; h++)
            for (int64_t k = 0; k < Tk; k++)
                w[k] += (float)(lb_tensor_flat(attention, (h * Tq + Tq - 1) * Tk + k) / (double)H);
        char title[256];
        snprintf(title, sizeof title, "Where the alarm looked (%s, averaged over %lld heads)", attention_label,
                 (long long)H);
        if (w && lb_plot_attention_marked(lb_files_join(path, sizeof path, out_dir, "attention.png"), title, w, Tk,
                                          spike_position, "clue position") != LB_OK)
            fprintf(stderr, "lookback: attention plot skipped: %s\n", lb_last_error());
        else if (w)
            NOTE_WRITTEN();
        free(w);
    }
#undef NOTE_WRITTEN
}

/* bytes as one printable line: newlines and tabs as \\n, \\t, other control bytes as \\xHH. */
static void escape_text(const char *in, size_t n, char *out, size_t size)
{
    size_t used = 0;
    for (size_t i = 0; i < n && used + 5 < size; i++) {
        unsigned char c = (unsigned char)in[i];
        if (c == '\n' || c == '\t')
            used += (size_t)snprintf(out + used, size - used, "\\%c", c == '\n' ? 'n' : 't');
        else if (c < 0x20 || c == 0x7f)
            used += (size_t)snprintf(out + used, size - used, "\\x%02x", c);
        else
            out[used++] = (char)c;
    }
    out[used] = '\0';
}

enum { SAMPLE_PROMPT = 16, SAMPLE_TOKENS = 64 };

/* A greedy continuation (temperature 0) of the test split's first tokens, decoded. */
static lb_status greedy_sample(lb_model *model, const lb_dataset *ds, char *sample, size_t size, char *prompt_text,
                               size_t prompt_size)
{
    int64_t n = 0;
    const int32_t *tok = lb_dataset_tokens(ds, "test", &n);
    if (!tok || n < 1)
        return lb_error(LB_ERR_VALUE, "%s: no test tokens to prompt a sample with", lb_dataset_path(ds));
    int64_t p = n < SAMPLE_PROMPT ? n : SAMPLE_PROMPT;
    lb_generate_options o = lb_generate_defaults();
    o.max_new_tokens = SAMPLE_TOKENS;
    o.sampling.temperature = 0;
    o.sampling.unk_id = lb_vocab_unk_id(lb_dataset_vocab(ds)); /* never <unk> */
    o.sampling.mask_unk = o.sampling.unk_id >= 0;
    int32_t out[SAMPLE_TOKENS];
    lb_rng rng;
    lb_rng_seed(&rng, 1);
    lb_status st = lb_generate(model, tok, p, &o, &rng, out, NULL);
    char raw[SAMPLE_TOKENS * 4 + 1], praw[SAMPLE_PROMPT * 4 + 1];
    size_t len = 0, plen = 0;
    if (st == LB_OK)
        st = lb_vocab_decode(lb_dataset_vocab(ds), out, SAMPLE_TOKENS, raw, sizeof raw, &len);
    if (st == LB_OK)
        st = lb_vocab_decode(lb_dataset_vocab(ds), tok, p, praw, sizeof praw, &plen);
    if (st == LB_OK) {
        escape_text(raw, strlen(raw), sample, size);
        escape_text(praw, strlen(praw), prompt_text, prompt_size);
    }
    return st;
}

/* The first validation of a run's metrics.csv at or below `bits` (loss / ln 2 x per_unit:
 * bits per character or per byte of the text, as the table's column). */
typedef struct target_search {
    double bits, seconds, per_unit;
} target_search;

static int reach_target(const lb_metrics_row *row, void *user)
{
    target_search *t = user;
    if (row->loss / log(2.0) * t->per_unit <= t->bits) {
        t->seconds = row->wall_seconds;
        return 1;
    }
    return 0;
}

/* Fills seconds_to_target of every model: the given target, or the worst model's last
 * validation (every model reaches it, so the column compares speeds). */
static void time_to_target(const char *out_dir, const lb_compare_model *specs, int n_models, double target,
                           const char *per, lb_compare_report *rep)
{
    /* tokens per unit of the validation text: bits per token -> bits per character or byte */
    double per_unit = 1, bpb = NAN, bpc = NAN;
    lb_dataset *val = lb_dataset_open_split(specs[0].rc.data, "val");
    if (val && lb_dataset_is_text(val))
        lb_text_bits(val, "val", log(2.0), &bpb, &bpc);
    if (val)
        lb_dataset_close(val);
    lb_clear_error();
    if ((per[0] == 'b' ? bpb : bpc) > 0)
        per_unit = per[0] == 'b' ? bpb : bpc;
    if (!(target > 0)) {
        target = 0;
        for (int m = 0; m < n_models; m++) {
            double b = rep->results[m].run.last_val.loss / log(2.0) * per_unit;
            if (rep->results[m].run.last_val.examples > 0 && b > target)
                target = b;
        }
        target = ceil(target * 1e4) / 1e4; /* as printed */
    }
    rep->target_bits = target;
    for (int m = 0; m < n_models; m++) {
        char metrics[4200];
        snprintf(metrics, sizeof metrics, "%s/%s/metrics.csv", out_dir, specs[m].name);
        target_search t = {target, NAN, per_unit};
        if (lb_metrics_read(metrics, "val", reach_target, &t, NULL) != LB_OK)
            lb_clear_error();
        rep->results[m].seconds_to_target = t.seconds;
    }
}

/* One row per family (by its name, layers/family.h): the options of its recipe on a text
 * corpus (lab/compare.h). */
static const struct {
    const char *family;
    const char *name; /* where it comes from, for the report */
    const char *options[24][2];
} text_recipes[] = {
    /* nanoGPT, config/train_shakespeare_char.py with its README's CPU settings */
    {"transformer", "nanoGPT shakespeare_char (CPU)",
     {{"layers", "4"}, {"heads", "4"}, {"d-model", "128"}, {"d-ff", "512"}, {"seq-len", "64"}, {"batch", "12"},
      {"pos", "learned"}, {"dropout", "0"}, {"bias", "0"}, {"tie-embeddings", "1"}, {"init", "gpt2"},
      {"optim", "adamw"}, {"lr", "1e-3"}, {"beta2", "0.99"}, {"weight-decay", "0.1"}, {"decay-params", "matrices"},
      {"warmup", "100"}, {"schedule", "cosine"}, {"min-lr-ratio", "0.1"}, {"steps", "2000"}, {"clip", "1"},
      {"eval-every", "250"}, {"select", "loss"}}},
    /* the same with sliding-window attention over the last 32 characters */
    {"local", "nanoGPT shakespeare_char (CPU) with a window of 32",
     {{"layers", "4"}, {"heads", "4"}, {"d-model", "128"}, {"d-ff", "512"}, {"seq-len", "64"}, {"batch", "12"},
      {"window", "32"}, {"pos", "learned"}, {"dropout", "0"}, {"bias", "0"}, {"tie-embeddings", "1"},
      {"init", "gpt2"}, {"optim", "adamw"}, {"lr", "1e-3"}, {"beta2", "0.99"}, {"weight-decay", "0.1"},
      {"decay-params", "matrices"}, {"warmup", "100"}, {"schedule", "cosine"}, {"min-lr-ratio", "0.1"},
      {"steps", "2000"}, {"clip", "1"}, {"eval-every", "250"}, {"select", "loss"}}},
    /* char-rnn (Karpathy 2015): 2 x 128 LSTM, seq_length 50, batch 50, lr 2e-3, grad_clip 5
     * (Adam here, where char-rnn uses RMSprop) */
    {"lstm", "char-rnn (2 x 128 LSTM, Adam)",
     {{"layers", "2"}, {"hidden", "128"}, {"d-model", "128"}, {"seq-len", "50"}, {"batch", "50"},
      {"optim", "adam"}, {"lr", "2e-3"}, {"weight-decay", "0"}, {"schedule", "constant"}, {"warmup", "0"},
      {"clip", "5"}, {"steps", "2000"}, {"eval-every", "250"}, {"select", "loss"}}},
    /* a causal dilated stack (receptive field 1 + 2 (2^6 - 1) = 127 >= the context) with the
     * transformer's optimiser */
    {"conv", "6 dilated causal convolutions, nanoGPT's optimiser",
     {{"layers", "6"}, {"d-model", "128"}, {"kernel", "3"}, {"seq-len", "64"}, {"batch", "12"},
      {"optim", "adamw"}, {"lr", "1e-3"}, {"beta2", "0.99"}, {"weight-decay", "0.1"}, {"decay-params", "matrices"},
      {"warmup", "100"}, {"schedule", "cosine"}, {"min-lr-ratio", "0.1"}, {"steps", "2000"}, {"clip", "1"},
      {"eval-every", "250"}, {"select", "loss"}}},
    /* nanoGPT's sizes and optimiser with linear attention in place of softmax attention
     * (Katharopoulos et al. 2020 train their linear transformers as the softmax ones) */
    {"linear", "nanoGPT shakespeare_char (CPU) with linear attention",
     {{"layers", "4"}, {"heads", "4"}, {"d-model", "128"}, {"d-ff", "512"}, {"seq-len", "64"}, {"batch", "12"},
      {"bias", "0"}, {"tie-embeddings", "1"}, {"optim", "adamw"}, {"lr", "1e-3"}, {"beta2", "0.99"},
      {"weight-decay", "0.1"}, {"decay-params", "matrices"}, {"warmup", "100"}, {"schedule", "cosine"},
      {"min-lr-ratio", "0.1"}, {"steps", "2000"}, {"clip", "1"}, {"eval-every", "250"}, {"select", "loss"}}},
    /* Mamba (Gu & Dao 2023) at the transformer's width and context, d_state 16, expand 2,
     * with the transformer's optimiser (the paper trains its language models with AdamW,
     * weight decay 0.1, a cosine schedule after a warm-up, clipping at 1) */
    {"mamba", "4 Mamba blocks, d_model 128, nanoGPT's optimiser",
     {{"layers", "4"}, {"d-model", "128"}, {"d-state", "16"}, {"d-conv", "4"}, {"expand", "2"}, {"seq-len", "64"},
      {"batch", "12"}, {"optim", "adamw"}, {"lr", "1e-3"}, {"beta2", "0.99"}, {"weight-decay", "0.1"},
      {"decay-params", "matrices"}, {"warmup", "100"}, {"schedule", "cosine"}, {"min-lr-ratio", "0.1"},
      {"steps", "2000"}, {"clip", "1"}, {"eval-every", "250"}, {"select", "loss"}}},
};

lb_status lb_compare_text_recipe(lb_run_config *rc)
{
    LB_CHECK_ARG(rc, LB_ERR_VALUE);
    for (size_t r = 0; r < sizeof text_recipes / sizeof text_recipes[0]; r++) {
        if (strcmp(text_recipes[r].family, lb_model_kind_name(rc->model.kind)) != 0)
            continue;
        for (int i = 0; i < 24 && text_recipes[r].options[i][0]; i++)
            if (lb_run_config_set(rc, text_recipes[r].options[i][0], text_recipes[r].options[i][1]) != LB_OK)
                return lb_error_context("the %s recipe for text", lb_model_kind_name(rc->model.kind));
        return LB_OK;
    }
    return lb_error(LB_ERR_VALUE, "no text recipe for the %s family", lb_model_kind_name(rc->model.kind));
}

const char *lb_compare_text_recipe_name(lb_model_kind kind)
{
    for (size_t r = 0; r < sizeof text_recipes / sizeof text_recipes[0]; r++)
        if (strcmp(text_recipes[r].family, lb_model_kind_name(kind)) == 0)
            return text_recipes[r].name;
    return "";
}

char *lb_compare_text_recipe_text(lb_model_kind kind, char *buf, size_t size)
{
    LB_CHECK_ARG(buf, NULL);
    buf[0] = '\0';
    for (size_t r = 0; r < sizeof text_recipes / sizeof text_recipes[0]; r++)
        for (int i = 0; strcmp(text_recipes[r].family, lb_model_kind_name(kind)) == 0 && i < 24 && text_recipes[r].options[i][0]; i++)
            snprintf(buf + strlen(buf), size - strlen(buf), "%s--%s %s", i ? " " : "", text_recipes[r].options[i][0],
                     text_recipes[r].options[i][1]);
    return buf;
}

lb_status lb_compare_run(lb_compare_model *specs, int n_models, lb_compare_eval *evals, int n_evals, const char *out_dir,
                         int quiet, lb_compare_report *rep)
{
    LB_CHECK_ARG(specs && evals && out_dir && rep, LB_ERR_VALUE);
    if (n_models < 1 || n_models > LB_COMPARE_MAX_MODELS || n_evals < 1 || n_evals > LB_COMPARE_MAX_EVALS)
        return lb_error(LB_ERR_VALUE, "lb_compare_run: %d models and %d evaluation files (1 to %d of each)", n_models,
                        n_evals, LB_COMPARE_MAX_MODELS);
    memset(rep, 0, sizeof *rep);
    rep->failed_model = -1;
    if (lb_compare_check_out_dir(out_dir) != LB_OK)
        return lb_last_status();
    lb_compare_result *res = rep->results;
    double chance = 0;
    /* Everything is checked before anything is trained or written; no output replaces an input. */
    for (int e = 0; e < n_evals; e++)
        if (lb_output_protect(evals[e].path, "an evaluation file") != LB_OK ||
            describe_eval_file(&evals[e], specs, n_models) != LB_OK)
            return lb_last_status();
    /* A model folder that holds a run (config.json, checkpoint.h5) was left by an interrupted
     * comparison: it is resumed. Anything else there is not ours. */
    int resume[LB_COMPARE_MAX_MODELS] = {0};
    for (int m = 0; m < n_models; m++) {
        char dir[4200], config[4300], ckpt[4300];
        if (!lb_files_exists(lb_files_join(dir, sizeof dir, out_dir, specs[m].name)))
            continue;
        snprintf(config, sizeof config, "%s/config.json", dir);
        snprintf(ckpt, sizeof ckpt, "%s/checkpoint.h5", dir);
        if (!lb_files_exists(config))
            return lb_error(LB_ERR_STATE, "%s already exists and holds no run of a comparison; choose another --out "
                            "(nothing was changed)", dir);
        resume[m] = lb_files_exists(ckpt);
    }
    /* Under mpirun each rank trains whole models (model m on rank m mod N) once every
     * rank has checked; rank 0 gathers the results and writes the report. */
    if (lb_dist_barrier() != LB_OK || lb_files_mkdir(out_dir) != LB_OK)
        return lb_last_status();
    lb_status code = LB_OK;
    lb_tensor *attention = NULL;
    int64_t spike_position = -1;
    char attention_label[160] = "";
    int attention_model = -1; /* the first attention model's weights are plotted */
    for (int m = 0; m < n_models && attention_model < 0; m++)
        if (lb_family_of(specs[m].rc.model.kind)->attention)
            attention_model = m;
    for (int m = 0; m < n_models; m++) {
        char dir[4200];
        lb_model *model = NULL;
        if (!lb_dist_owns(m))
            continue;
        lb_files_join(dir, sizeof dir, out_dir, specs[m].name);
        if (resume[m] && !quiet)
            fprintf(stderr, "%s: continuing the run in %s\n", specs[m].name, dir);
        if (lb_run_train(&specs[m].rc, dir, resume[m], quiet, &res[m].run, &model) != LB_OK) {
            lb_tensor_free(attention);
            rep->failed_model = m;
            if (res[m].run.interrupted) {
                /* Every model folder stays: run the same comparison again to go on. */
                return lb_error(LB_ERR_STATE, "interrupted while training %s at step %lld; its checkpoint is saved in "
                                "%s: run the same lookback compare command again to continue the comparison",
                                specs[m].name, (long long)res[m].run.steps, dir);
            }
            lb_error_context("training %s", specs[m].name);
            code = lb_last_status();
            goto failed;
        }
        res[m].seconds_per_step = res[m].run.steps ? res[m].run.seconds / (double)res[m].run.steps : 0;
        for (int e = 0; e < n_evals; e++) {
            lb_dataset *ds = lb_dataset_open(evals[e].path);
            if (ds && lb_dataset_is_text(ds) && lb_dataset_set_seq_len(ds, specs[m].rc.train.seq_len) != LB_OK) {
                lb_dataset_close(ds);
                ds = NULL;
            }
            lb_eval_result r;
            int want_attention = m == attention_model && e == n_evals - 1 && !evals[e].text;
            lb_tensor *w = NULL;
            double t0 = lb_clock_wall();
            if (!ds || lb_evaluate(model, ds, "test", evals[e].examples, 8, 0, &r, want_attention ? &w : NULL) != LB_OK) {
                lb_error_context("evaluating %s on %s", specs[m].name, evals[e].label);
                lb_dataset_close(ds);
                lb_model_free(model);
                lb_tensor_free(attention);
                code = lb_last_status();
                goto failed;
            }
            if (chance == 0 && lb_dataset_num_classes(ds) > 0)
                chance = 1.0 / (double)lb_dataset_num_classes(ds);
            if (evals[e].regression && m == 0)
                evals[e].baseline = lb_dataset_mean_predictor_mse(ds, "test", r.examples);
            res[m].accuracy[e] = evals[e].regression ? r.mse : r.accuracy;
            res[m].f1[e] = lb_class_report_detector_f1(&r.classes);
            res[m].macro_f1[e] = r.classes.num_classes ? r.classes.macro_f1 : NAN;
            res[m].pr_auc[e] = r.average_precision;
            res[m].eval_seconds[e] = lb_clock_wall() - t0;
            res[m].bits_per_byte[e] = res[m].bits_per_char[e] = NAN;
            res[m].nats_per_token[e] = evals[e].text ? r.loss : NAN;
            if (evals[e].text)
                lb_text_bits(ds, "test", r.loss, &res[m].bits_per_byte[e], &res[m].bits_per_char[e]);
            res[m].bits[e] = !evals[e].text ? NAN : evals[e].per[0] == 'b' ? res[m].bits_per_byte[e] : res[m].bits_per_char[e];
            if (evals[e].text && e == 0 && greedy_sample(model, ds, res[m].sample, sizeof res[m].sample, rep->prompt,
                                                         sizeof rep->prompt) != LB_OK) {
                lb_error_context("sampling %s", specs[m].name);
                lb_dataset_close(ds);
                lb_model_free(model);
                code = lb_last_status();
                goto failed;
            }
            if (!quiet && evals[e].rare)
                fprintf(stderr, "%s on %s: accuracy %.4f, F1 (class 1) %.4f, PR-AUC %.4f (%lld examples, %.1f s)\n",
                        specs[m].name, evals[e].label, res[m].accuracy[e], res[m].f1[e], res[m].pr_auc[e],
                        (long long)r.examples, res[m].eval_seconds[e]);
            else if (!quiet && evals[e].text)
                fprintf(stderr, "%s on %s: %.4f bits per %s (loss %.4f nats/token, %lld tokens, %.1f s)\n", specs[m].name,
                        evals[e].label, res[m].bits[e], evals[e].per, r.loss, (long long)r.scored, lb_clock_wall() - t0);
            else if (!quiet)
                fprintf(stderr, "%s on %s: %s %.4f (%lld examples, %.1f s)\n", specs[m].name, evals[e].label,
                        evals[e].regression ? "mse" : "accuracy", res[m].accuracy[e], (long long)r.examples,
                        res[m].eval_seconds[e]);
            if (w) {
                lb_batch b;
                attention = w;
                snprintf(attention_label, sizeof attention_label, "%s on %s", specs[m].name, evals[e].label);
                if (lb_dataset_slice(ds, "test", 0, 1, &b) == LB_OK && b.distance) {
                    int64_t last = b.lengths ? b.lengths[0] - 1 : b.seq_len - 1;
                    spike_position = last - b.distance[0];
                }
                lb_batch_free(&b);
            }
            lb_dataset_close(ds);
        }
        lb_model_free(model);
    }
    if (lb_dist_size() > 1) {
        struct {
            double chance;
            int64_t spike_position;
            char label[160];
        } plot = {chance, spike_position, ""};
        snprintf(plot.label, sizeof plot.label, "%s", attention_label);
        /* results, and the specs as trained (data paths made absolute, sizes from the data) */
        lb_status st = lb_dist_gather(res, sizeof res[0], n_models);
        if (st == LB_OK)
            st = lb_dist_gather(specs, sizeof specs[0], n_models);
        if (st == LB_OK && attention_model >= 0 && (st = lb_dist_share(&plot, sizeof plot, attention_model)) == LB_OK)
            st = lb_dist_share_tensor(&attention, attention_model);
        if (st == LB_OK && lb_dist_share(&plot.chance, sizeof plot.chance, 0) != LB_OK)
            st = lb_last_status();
        if (st != LB_OK) {
            lb_tensor_free(attention);
            return lb_last_status();
        }
        chance = plot.chance;
        spike_position = plot.spike_position;
        snprintf(attention_label, sizeof attention_label, "%s", plot.label);
        if (lb_dist_rank() != 0) {
            lb_tensor_free(attention);
            return LB_OK;
        }
    }
    rep->report_rank = 1;
    rep->chance = chance;
    if (evals[0].text)
        time_to_target(out_dir, specs, n_models, evals[0].target_bits, evals[0].per, rep);
    char path[4200];
    lb_status st = write_summary(lb_files_join(path, sizeof path, out_dir, "summary.json"), specs, res, n_models, evals,
                                 n_evals, chance);
    write_plots(out_dir, specs, res, n_models, evals, n_evals, chance, attention, spike_position, attention_label,
                rep->written, sizeof rep->written);
    lb_tensor_free(attention);
    return st;
failed:
    /* The model folders this call began (none was there, or one without a checkpoint) go:
     * the same --out works again. Runs that an earlier, interrupted call left stay. */
    for (int m = 0; m < n_models; m++) {
        char dir[4200];
        if (lb_dist_owns(m) && !resume[m])
            lb_files_remove_tree(lb_files_join(dir, sizeof dir, out_dir, specs[m].name));
    }
    return code;
}

/* A report folder must be new or hold no earlier report: nothing is overwritten.
 * (It is created only once everything has been checked.) */
lb_status lb_compare_check_out_dir(const char *out_dir)
{
    char path[4200];
    LB_CHECK_ARG(out_dir, LB_ERR_VALUE);
    if (lb_files_exists(lb_files_join(path, sizeof path, out_dir, "summary.json")))
        return lb_error(LB_ERR_STATE, "%s already holds a report (summary.json); choose another --out or remove it",
                        out_dir);
    if (lb_files_exists(out_dir) && !lb_files_exists(lb_files_join(path, sizeof path, out_dir, ".")))
        return lb_error(LB_ERR_IO, "%s exists and is not a folder", out_dir);
    return LB_OK;
}

/* Model names become folder names: letters, digits, '-', '_' and '.', not starting with '.'. */
lb_status lb_compare_check_name(const char *name)
{
    LB_CHECK_ARG(name, LB_ERR_VALUE);
    if (!name[0])
        return lb_error(LB_ERR_VALUE, "--models has an empty name (two commas, or a trailing comma?)");
    if (name[0] == '.')
        return lb_error(LB_ERR_VALUE, "model name '%s' may not start with '.'", name);
    for (const char *p = name; *p; p++)
        if (!isalnum((unsigned char)*p) && *p != '-' && *p != '_' && *p != '.')
            return lb_error(LB_ERR_VALUE, "model name '%s' may hold only letters, digits, '-', '_' and '.'", name);
    return LB_OK;
}


/* ---- the models and files of a comparison from the command line's lists ---- */

/* One model of the list: item "kind" or "name=kind" into m. */
static lb_status model_from_item(char *item, const char *train, int text, double budget, const lb_option_list *given,
                                 const lb_compare_model *before, int n_before, lb_compare_model *s)
{
    char *eq = strchr(item, '=');
    const char *kind = eq ? eq + 1 : item;
    if (eq)
        *eq = '\0';
    if (lb_compare_check_name(item) != LB_OK)
        return lb_last_status();
    snprintf(s->name, sizeof s->name, "%.*s", (int)sizeof s->name - 1, item);
    for (int j = 0; j < n_before; j++)
        if (strcmp(before[j].name, s->name) == 0)
            return lb_error(LB_ERR_VALUE, "model name '%s' appears twice; name them, e.g. a=%s,b=%s", s->name, kind,
                            kind);
    lb_run_config_default(&s->rc, LB_MODEL_TRANSFORMER);
    snprintf(s->rc.data, sizeof s->rc.data, "%s", train);
    if (lb_run_config_set(&s->rc, "model", kind) != LB_OK)
        return lb_last_status();
    /* validation during a comparison: every 100 steps on the first 256 windows (the curve
     * and the time to the target); the table's column is the whole test split */
    if (text && (lb_compare_text_recipe(&s->rc) != LB_OK || lb_run_config_set(&s->rc, "budget-clock", "cpu") != LB_OK ||
                 lb_run_config_set(&s->rc, "eval-every", "100") != LB_OK ||
                 lb_run_config_set(&s->rc, "eval-examples", "256") != LB_OK))
        return lb_last_status();
    if (text)
        snprintf(s->note, sizeof s->note, "recipe: %s (docs/text.md)", lb_compare_text_recipe_name(s->rc.model.kind));
    s->rc.train.time_budget = budget;
    return lb_run_config_apply(&s->rc, given);
}

lb_status lb_compare_models_from_list(const char *list, const char *train, int text, double budget,
                                      const lb_option_list *given, lb_compare_model *models, int *n_models)
{
    LB_CHECK_ARG(list && train && given && models && n_models, LB_ERR_VALUE);
    char buf[4096];
    snprintf(buf, sizeof buf, "%s", list);
    int n = 0;
    lb_status st = LB_OK;
    for (char *tok = buf, *next; tok && st == LB_OK; tok = next) {
        next = strchr(tok, ',');
        if (next)
            *next++ = '\0';
        if (n == LB_COMPARE_MAX_MODELS)
            return lb_error(LB_ERR_VALUE, "at most %d models", LB_COMPARE_MAX_MODELS);
        memset(&models[n], 0, sizeof models[n]);
        st = model_from_item(tok, train, text, budget, given, models, n, &models[n]);
        n++;
    }
    *n_models = n;
    /* Each option must be used by one of the models at least (--hidden by the LSTMs, ...). */
    for (int i = 0; i < given->n && st == LB_OK; i++) {
        int used = 0;
        for (int m = 0; m < n; m++)
            used |= lb_run_option_applies(&models[m].rc, given->items[i].name);
        if (!used) {
            lb_option_list one = {.n = 1, .items = {given->items[i]}};
            st = lb_run_config_check_used(&models[0].rc, &one);
        }
    }
    return st == LB_OK ? LB_OK : lb_error(LB_ERR_VALUE, "%s", lb_last_error());
}

lb_status lb_compare_evals_from_list(const char *list, double target_bits, int64_t examples, lb_compare_eval *evals,
                                     int *n_evals)
{
    LB_CHECK_ARG(list && evals && n_evals, LB_ERR_VALUE);
    char buf[4096];
    snprintf(buf, sizeof buf, "%s", list);
    int n = 0;
    for (char *tok = buf, *next; tok; tok = next) {
        next = strchr(tok, ',');
        if (next)
            *next++ = '\0';
        if (!tok[0])
            return lb_error(LB_ERR_VALUE, "--eval has an empty file name (two commas, or a trailing comma?)");
        if (n == LB_COMPARE_MAX_EVALS)
            return lb_error(LB_ERR_VALUE, "at most %d evaluation files", LB_COMPARE_MAX_EVALS);
        /* one file once, however spelled: two columns of it would tell nothing apart */
        struct stat a, b;
        for (int e = 0; e < n; e++)
            if (strcmp(evals[e].path, tok) == 0 ||
                (stat(evals[e].path, &a) == 0 && stat(tok, &b) == 0 && a.st_dev == b.st_dev && a.st_ino == b.st_ino))
                return lb_error(LB_ERR_VALUE, "--eval names the file %s twice ('%s' and '%s'); give each file once", tok,
                                evals[e].path, tok);
        memset(&evals[n], 0, sizeof evals[n]);
        snprintf(evals[n].path, sizeof evals[n].path, "%s", tok);
        evals[n].target_bits = target_bits;
        evals[n++].examples = examples;
    }
    *n_evals = n;
    return LB_OK;
}

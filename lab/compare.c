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

#include "data/dataset.h"
#include "data/events.h"
#include "data/output.h"
#include "data/tasks.h"
#include "lab/files.h"
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
        if (train)
            lb_model_config_fit_data(&rc.model, train);
        st = train ? lb_model_data_check(&rc.model, lb_dataset_task_name(train), ds) : lb_last_status();
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

void lb_compare_print_table(FILE *out, const lb_compare_model *specs, int n_models, const lb_compare_eval *evals, int n_evals,
                            const lb_compare_report *rep)
{
    fprintf(out, "\n%-14s %10s %11s %10s", "model", "parameters", "train time", "time/step");
    for (int e = 0; e < n_evals; e++)
        fprintf(out, " %12s", evals[e].label);
    fprintf(out, " %8s\n", "chance");
    for (int m = 0; m < n_models; m++) {
        fprintf(out, "%-14s %10lld %10.1fs %8.1fms", specs[m].name, (long long)rep->results[m].run.parameters, rep->results[m].run.seconds,
               1e3 * rep->results[m].seconds_per_step);
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
        fprintf(out, "%-14s %10s %11s %10s", "predict mean", "-", "-", "-");
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
                "PR-AUC", "parameters", "train time", "eval");
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
                     "average_precision_score); majority: the most frequent training class for every target\n");
    }
    fprintf(out, "\n");
    for (int e = 0; e < n_evals; e++)
        if (!isnan(evals[e].dmean))
            fprintf(out, "  %s: %s, clue %d..%d events before the query\n", evals[e].label, evals[e].path, evals[e].dmin,
                   evals[e].dmax);
    for (int m = 0; m < n_models; m++)
        if (specs[m].note[0])
            fprintf(out, "  %s: %s\n", specs[m].name, specs[m].note);
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
        json_object_object_add(o, "seconds_per_step", json_object_new_double(res[m].seconds_per_step));
        json_object_object_add(o, "lr", json_object_new_double(specs[m].rc.train.optim.lr));
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

lb_status lb_compare_run(lb_compare_model *specs, int n_models, lb_compare_eval *evals, int n_evals, const char *out_dir,
                         int quiet, lb_compare_report *rep)
{
    LB_CHECK_ARG(specs && evals && out_dir && rep, LB_ERR_VALUE);
    if (n_models < 1 || n_models > LB_COMPARE_MAX_MODELS || n_evals < 1 || n_evals > LB_COMPARE_MAX_EVALS)
        return lb_error(LB_ERR_VALUE, "lb_compare_run: %d models and %d evaluation files (1 to %d of each)", n_models,
                        n_evals, LB_COMPARE_MAX_MODELS);
    memset(rep, 0, sizeof *rep);
    rep->failed_model = -1;
    lb_compare_result *res = rep->results;
    double chance = 0;
    /* Everything is checked before anything is trained or written; no output replaces an input. */
    for (int e = 0; e < n_evals; e++)
        if (lb_output_protect(evals[e].path, "an evaluation file") != LB_OK ||
            describe_eval_file(&evals[e], specs, n_models) != LB_OK)
            return lb_last_status();
    for (int m = 0; m < n_models; m++) {
        char dir[4200];
        if (lb_files_exists(lb_files_join(dir, sizeof dir, out_dir, specs[m].name)))
            return lb_error(LB_ERR_STATE, "%s already exists; choose another --out (nothing was changed)", dir);
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
        if (specs[m].rc.model.kind == LB_MODEL_TRANSFORMER || specs[m].rc.model.kind == LB_MODEL_LOCAL)
            attention_model = m;
    for (int m = 0; m < n_models; m++) {
        char dir[4200];
        lb_model *model = NULL;
        if (!lb_dist_owns(m))
            continue;
        lb_files_join(dir, sizeof dir, out_dir, specs[m].name);
        if (lb_run_train(&specs[m].rc, dir, 0, quiet, &res[m].run, &model) != LB_OK) {
            lb_error_context("training %s", specs[m].name);
            lb_tensor_free(attention);
            code = lb_last_status();
            rep->failed_model = m;
            goto failed;
        }
        res[m].seconds_per_step = res[m].run.steps ? res[m].run.seconds / (double)res[m].run.steps : 0;
        for (int e = 0; e < n_evals; e++) {
            lb_dataset *ds = lb_dataset_open(evals[e].path);
            lb_eval_result r;
            int want_attention = m == attention_model && e == n_evals - 1;
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
            if (!quiet && evals[e].rare)
                fprintf(stderr, "%s on %s: accuracy %.4f, F1 (class 1) %.4f, PR-AUC %.4f (%lld examples, %.1f s)\n",
                        specs[m].name, evals[e].label, res[m].accuracy[e], res[m].f1[e], res[m].pr_auc[e],
                        (long long)r.examples, res[m].eval_seconds[e]);
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
    char path[4200];
    lb_status st = write_summary(lb_files_join(path, sizeof path, out_dir, "summary.json"), specs, res, n_models, evals,
                                 n_evals, chance);
    write_plots(out_dir, specs, res, n_models, evals, n_evals, chance, attention, spike_position, attention_label,
                rep->written, sizeof rep->written);
    lb_tensor_free(attention);
    return st;
failed:
    /* The model folders of this run (checked absent above) go: the same --out works again. */
    for (int m = 0; m < n_models; m++) {
        char dir[4200];
        if (lb_dist_owns(m))
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


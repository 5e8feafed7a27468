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
#include "cli/options.h"
#include "train/distributed.h"
#include "cli/plot.h"

enum { MAX_MODELS = 8, MAX_EVALS = 8 };

typedef struct model_spec {
    char name[48];
    lb_run_config rc;
    char note[256]; /* e.g. how the learning rate was chosen */
} model_spec;

typedef struct eval_file {
    char path[4096];
    char label[48];
    int32_t dmin, dmax;
    double dmean;
    int64_t examples; /* 0 = the whole test split */
    int regression;   /* scored by MSE instead of accuracy */
    double baseline;  /* regression: the MSE of predicting the mean target (NAN otherwise) */
} eval_file;

typedef struct model_result {
    lb_cli_run run;
    double accuracy[MAX_EVALS]; /* accuracy, or MSE for a regression file */
    double seconds_per_step;
} model_result;

/* ---- evaluation files ---- */

static lb_status describe_eval_file(eval_file *e, const model_spec *specs, int n_models)
{
    lb_dataset *ds = lb_dataset_open(e->path);
    if (!ds)
        return lb_last_status();
    lb_status st = LB_OK;
    if (lb_dataset_split_size(ds, "test") < 1)
        st = lb_error(LB_ERR_VALUE, "%s: the test split is empty (evaluation files are scored on their test split)",
                      e->path);
    if (st == LB_OK)
        st = lb_cli_check_scored(ds, "test");
    /* Each model as it will be built from its train file, checked against this file
     * before anything is trained (the check every command uses). */
    for (int m = 0; m < n_models && st == LB_OK; m++) {
        lb_dataset *train = lb_dataset_open(specs[m].rc.data);
        lb_run_config rc = specs[m].rc;
        if (train)
            lb_model_config_fit_data(&rc.model, train);
        st = train ? lb_model_data_check(&rc.model, lb_task_name(lb_dataset_task(train)), ds) : lb_last_status();
        if (st == LB_OK && (lb_cli_check_scored(train, "train") != LB_OK || lb_cli_check_scored(train, "val") != LB_OK))
            st = lb_last_status(); /* nothing to train on: said before any model is trained */
        if (st != LB_OK && n_models > 1)
            lb_error_context("model %s", specs[m].name);
        lb_dataset_close(train);
    }
    e->dmin = e->dmax = 0;
    e->dmean = NAN;
    e->regression = lb_dataset_is_regression(ds);
    e->baseline = NAN;
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

static void print_table(const model_spec *specs, const model_result *res, int n_models, const eval_file *evals,
                        int n_evals, double chance)
{
    printf("\n%-14s %10s %11s %10s", "model", "parameters", "train time", "time/step");
    for (int e = 0; e < n_evals; e++)
        printf(" %12s", evals[e].label);
    printf(" %8s\n", "chance");
    for (int m = 0; m < n_models; m++) {
        printf("%-14s %10lld %10.1fs %8.1fms", specs[m].name, (long long)res[m].run.parameters, res[m].run.seconds,
               1e3 * res[m].seconds_per_step);
        for (int e = 0; e < n_evals; e++)
            if (evals[e].regression)
                printf(" %8.4f mse", res[m].accuracy[e]);
            else
                printf(" %11.1f%%", 100 * res[m].accuracy[e]);
        if (chance > 0)
            printf(" %7.1f%%\n", 100 * chance);
        else
            printf(" %8s\n", "-");
    }
    int any_regression = 0;
    for (int e = 0; e < n_evals; e++)
        any_regression |= evals[e].regression;
    if (any_regression) { /* where chance would be: the baseline a regression must beat */
        printf("%-14s %10s %11s %10s", "predict mean", "-", "-", "-");
        for (int e = 0; e < n_evals; e++)
            if (evals[e].regression)
                printf(" %8.4f mse", evals[e].baseline);
            else
                printf(" %12s", "-");
        printf(" %8s\n", "-");
    }
    printf("\n");
    for (int e = 0; e < n_evals; e++)
        if (!isnan(evals[e].dmean))
            printf("  %s: %s, clue %d..%d events before the query\n", evals[e].label, evals[e].path, evals[e].dmin,
                   evals[e].dmax);
    for (int m = 0; m < n_models; m++)
        if (specs[m].note[0])
            printf("  %s: %s\n", specs[m].name, specs[m].note);
}

static lb_status write_summary(const char *path, const model_spec *specs, const model_result *res, int n_models,
                               const eval_file *evals, int n_evals, double chance)
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
            json_object_array_add(list, r);
        }
        json_object_object_add(o, "evaluations", list);
        json_object_array_add(models, o);
    }
    json_object_object_add(root, "models", models);
    return lb_cli_write_json(root, path, "summary");
}

/* Validation accuracy (in percent) against training seconds, read back from a run's metrics.csv. */
static int read_curve(const char *metrics_path, double *x, double *y, int max)
{
    FILE *f = fopen(metrics_path, "r");
    if (!f)
        return 0;
    char line[512];
    int n = 0;
    while (fgets(line, sizeof line, f) && n < max) {
        long long step;
        char split[16];
        double loss, acc, lr, norm, tps, wall;
        if (sscanf(line, "%lld,%15[^,],%lf,%lf,%lf,%lf,%lf,%lf", &step, split, &loss, &acc, &lr, &norm, &tps, &wall) ==
                8 &&
            strcmp(split, "val") == 0) {
            x[n] = wall;
            y[n] = 100 * acc; /* percent */
            n++;
        }
    }
    fclose(f);
    return n;
}

/* Draws the plots that apply; appends the names of the files written to `written`. */
static void write_plots(const char *out_dir, const model_spec *specs, const model_result *res, int n_models,
                        const eval_file *evals, int n_evals, double chance, const lb_tensor *attention,
                        int64_t spike_position, const char *attention_label, char *written, size_t written_size)
{
    char path[4200];
    enum { MAX_POINTS = 4096 };
    static double cx[MAX_MODELS][MAX_POINTS], cy[MAX_MODELS][MAX_POINTS];
    const char *names[MAX_MODELS];
    const double *xs[MAX_MODELS], *ys[MAX_MODELS];
    int counts[MAX_MODELS];
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
    else if (lb_plot_curves_range(lb_cli_path(path, sizeof path, out_dir, "learning_curves.png"),
                                  "Validation accuracy while training", "training time (s)", "accuracy (%)", n_models,
                                  names, counts, xs, ys, 0, 105) != LB_OK)
        fprintf(stderr, "lookback: learning-curve plot skipped: %s\n", lb_last_error());
    else
        NOTE_WRITTEN();
    double dist[MAX_EVALS];
    double acc[MAX_MODELS][MAX_EVALS];
    const double *accs[MAX_MODELS];
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
        if (lb_plot_accuracy_by_distance(lb_cli_path(path, sizeof path, out_dir, "accuracy_by_distance.png"), n_models,
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
        if (w && lb_plot_attention_marked(lb_cli_path(path, sizeof path, out_dir, "attention.png"), title, w, Tk,
                                          spike_position, "clue position") != LB_OK)
            fprintf(stderr, "lookback: attention plot skipped: %s\n", lb_last_error());
        else if (w)
            NOTE_WRITTEN();
        free(w);
    }
#undef NOTE_WRITTEN
}

static int remove_entry(const char *path, const struct stat *sb, int flag, struct FTW *ftw)
{
    (void)sb;
    (void)ftw;
    if (flag == FTW_DP)
        rmdir(path);
    else if (flag == FTW_F || flag == FTW_SL || flag == FTW_SLN)
        unlink(path);
    return 0;
}

/* Removes a folder that this command created and everything in it (links are removed,
 * never followed; other file systems are not entered). */
static void remove_created_tree(const char *dir)
{
    struct stat sb;
    if (lstat(dir, &sb) == 0 && S_ISDIR(sb.st_mode))
        nftw(dir, remove_entry, 16, FTW_DEPTH | FTW_PHYS | FTW_MOUNT);
}

/* Trains every model, evaluates it on every file, prints the table, writes the report. */
static int run_comparison(const char *cmd, model_spec *specs, int n_models, eval_file *evals, int n_evals,
                          const char *out_dir, int quiet)
{
    model_result res[MAX_MODELS];
    memset(res, 0, sizeof res);
    double chance = 0;
    /* Everything is checked before anything is trained or written; no output replaces an input. */
    for (int e = 0; e < n_evals; e++)
        if (lb_output_protect(evals[e].path, "an evaluation file") != LB_OK ||
            describe_eval_file(&evals[e], specs, n_models) != LB_OK)
            return lb_cli_fail(cmd);
    for (int m = 0; m < n_models; m++) {
        char dir[4200];
        if (lb_cli_exists(lb_cli_path(dir, sizeof dir, out_dir, specs[m].name)))
            return lb_cli_error(cmd, 1, "%s already exists; choose another --out (nothing was changed)", dir);
    }
    /* Under mpirun each rank trains whole models (model m on rank m mod N) once every
     * rank has checked; rank 0 gathers the results and writes the report. */
    if (lb_dist_barrier() != LB_OK || lb_cli_mkdir(out_dir) != LB_OK)
        return lb_cli_fail(cmd);
    int code = 0;
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
        lb_cli_path(dir, sizeof dir, out_dir, specs[m].name);
        if (lb_cli_run_training(&specs[m].rc, dir, 0, quiet, &res[m].run, &model) != LB_OK) {
            lb_error_context("training %s", specs[m].name);
            lb_tensor_free(attention);
            code = lb_cli_run_failed(cmd, &res[m].run);
            goto failed;
        }
        res[m].seconds_per_step = res[m].run.steps ? res[m].run.seconds / (double)res[m].run.steps : 0;
        for (int e = 0; e < n_evals; e++) {
            lb_dataset *ds = lb_dataset_open(evals[e].path);
            lb_eval_result r;
            int want_attention = m == attention_model && e == n_evals - 1;
            lb_tensor *w = NULL;
            double t0 = lb_cli_now();
            if (!ds || lb_evaluate(model, ds, "test", evals[e].examples, 8, 0, &r, want_attention ? &w : NULL) != LB_OK) {
                lb_error_context("evaluating %s on %s", specs[m].name, evals[e].label);
                lb_dataset_close(ds);
                lb_model_free(model);
                lb_tensor_free(attention);
                code = lb_cli_fail(cmd);
                goto failed;
            }
            if (chance == 0 && lb_dataset_num_classes(ds) > 0)
                chance = 1.0 / (double)lb_dataset_num_classes(ds);
            if (evals[e].regression && m == 0)
                evals[e].baseline = lb_cli_mean_predictor_mse(ds, "test", r.examples);
            res[m].accuracy[e] = evals[e].regression ? r.mse : r.accuracy;
            if (!quiet)
                fprintf(stderr, "%s on %s: %s %.4f (%lld examples, %.1f s)\n", specs[m].name, evals[e].label,
                        evals[e].regression ? "mse" : "accuracy", res[m].accuracy[e], (long long)r.examples,
                        lb_cli_now() - t0);
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
            return lb_cli_fail(cmd);
        }
        chance = plot.chance;
        spike_position = plot.spike_position;
        snprintf(attention_label, sizeof attention_label, "%s", plot.label);
        if (lb_dist_rank() != 0) {
            lb_tensor_free(attention);
            return 0;
        }
    }
    print_table(specs, res, n_models, evals, n_evals, chance);
    char path[4200];
    lb_status st = write_summary(lb_cli_path(path, sizeof path, out_dir, "summary.json"), specs, res, n_models, evals,
                                 n_evals, chance);
    char written[512] = "";
    write_plots(out_dir, specs, res, n_models, evals, n_evals, chance, attention, spike_position, attention_label,
                written, sizeof written);
    lb_tensor_free(attention);
    if (st != LB_OK)
        return lb_cli_fail(cmd);
    printf("report: %s (summary.json%s, one folder per model)\n", out_dir, written);
    return 0;
failed:
    /* The model folders of this run (checked absent above) go: the same --out works again. */
    for (int m = 0; m < n_models; m++) {
        char dir[4200];
        if (lb_dist_owns(m))
            remove_created_tree(lb_cli_path(dir, sizeof dir, out_dir, specs[m].name));
    }
    return code;
}

/* A report folder must be new or hold no earlier report: nothing is overwritten.
 * (It is created only once everything has been checked.) */
static int check_out_dir(const char *cmd, const char *out_dir)
{
    char path[4200];
    if (lb_cli_exists(lb_cli_path(path, sizeof path, out_dir, "summary.json")))
        return lb_cli_error(cmd, 1, "%s already holds a report (summary.json); choose another --out or remove it",
                            out_dir);
    if (lb_cli_exists(out_dir) && !lb_cli_exists(lb_cli_path(path, sizeof path, out_dir, ".")))
        return lb_cli_error(cmd, 1, "%s exists and is not a folder", out_dir);
    return -1;
}

/* Model names become folder names: letters, digits, '-', '_' and '.', not starting with '.'. */
static lb_status check_model_name(const char *name)
{
    if (!name[0])
        return lb_error(LB_ERR_VALUE, "--models has an empty name (two commas, or a trailing comma?)");
    if (name[0] == '.')
        return lb_error(LB_ERR_VALUE, "model name '%s' may not start with '.'", name);
    for (const char *p = name; *p; p++)
        if (!isalnum((unsigned char)*p) && *p != '-' && *p != '_' && *p != '.')
            return lb_error(LB_ERR_VALUE, "model name '%s' may hold only letters, digits, '-', '_' and '.'", name);
    return LB_OK;
}

/* ---- lookback compare ---- */

static void compare_usage(FILE *out)
{
    fputs("usage: lookback compare --train FILE.h5 --models M1,M2,... --eval F1.h5,F2.h5,... --out DIR [options]\n"
          "\n"
          "Trains each model (transformer, local, lstm, conv; a name may repeat as name=kind, e.g.\n"
          "big=transformer) on the train file with the same options and time budget, evaluates each\n"
          "on the test split of every evaluation file (each file once), prints one table and writes\n"
          "DIR/summary.json, one run folder per model and the plots. Under mpirun -np N the models\n"
          "are shared out over the N processes (model i on process i mod N) and process 0 writes\n"
          "the report.\n"
          "\n"
          "  --budget SECONDS   training time per model (default 60; 0 = until --steps); the same as\n"
          "                     --time-budget, so give one of them\n"
          "  --eval-limit N     evaluate at most N test examples per file (default all)\n"
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
    };
    const struct option *longopts = lb_run_options(extra, 8);
    char *models = NULL, *eval_list = NULL;
    const char *train = NULL, *out_dir = NULL;
    double budget = 60;
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
            if (lb_cli_real("--budget", optarg, 0, 1e9, &budget) != LB_OK)
                return lb_cli_error(cmd, 2, "%s", lb_last_error());
            break;
        case 'l':
            if (lb_cli_int("--eval-limit", optarg, 0, INT64_MAX, &eval_limit) != LB_OK)
                return lb_cli_error(cmd, 2, "%s", lb_last_error());
            break;
        case 'q': quiet = 1; break;
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
    if (!train || !models || !eval_list || !out_dir)
        return lb_cli_error(cmd, 2, "--train, --models, --eval and --out are required (see lookback compare --help)");
    model_spec specs[MAX_MODELS];
    eval_file evals[MAX_EVALS];
    int n_models = 0, n_evals = 0;
    memset(specs, 0, sizeof specs);
    memset(evals, 0, sizeof evals);
    for (char *tok = models, *next; tok; tok = next) {
        next = strchr(tok, ',');
        if (next)
            *next++ = '\0';
        if (n_models == MAX_MODELS)
            return lb_cli_error(cmd, 2, "at most %d models", MAX_MODELS);
        model_spec *s = &specs[n_models++];
        char *eq = strchr(tok, '=');
        const char *kind = eq ? eq + 1 : tok;
        if (eq)
            *eq = '\0';
        if (check_model_name(tok) != LB_OK)
            return lb_cli_error(cmd, 2, "%s", lb_last_error());
        snprintf(s->name, sizeof s->name, "%s", tok);
        for (int j = 0; j < n_models - 1; j++)
            if (strcmp(specs[j].name, s->name) == 0)
                return lb_cli_error(cmd, 2, "model name '%s' appears twice; name them, e.g. a=%s,b=%s", s->name, kind, kind);
        lb_run_config_default(&s->rc, LB_MODEL_TRANSFORMER);
        snprintf(s->rc.data, sizeof s->rc.data, "%s", train);
        if (lb_run_config_set(&s->rc, "model", kind) != LB_OK)
            return lb_cli_error(cmd, 2, "%s", lb_last_error());
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
        if (n_evals == MAX_EVALS)
            return lb_cli_error(cmd, 2, "at most %d evaluation files", MAX_EVALS);
        /* one file once, however spelled: two columns of it would tell nothing apart */
        struct stat a, b;
        for (int e = 0; e < n_evals; e++)
            if (strcmp(evals[e].path, tok) == 0 ||
                (stat(evals[e].path, &a) == 0 && stat(tok, &b) == 0 && a.st_dev == b.st_dev && a.st_ino == b.st_ino))
                return lb_cli_error(cmd, 2, "--eval names the file %s twice ('%s' and '%s'); give each file once", tok,
                                    evals[e].path, tok);
        snprintf(evals[n_evals].path, sizeof evals[n_evals].path, "%s", tok);
        evals[n_evals++].examples = eval_limit;
    }
    int code = check_out_dir(cmd, out_dir);
    if (code >= 0)
        return code;
    return run_comparison(cmd, specs, n_models, evals, n_evals, out_dir, quiet);
}

/* ---- lookback demo ---- */

typedef struct demo_file {
    const char *name;
    int64_t seq_len, min_distance, max_distance, n_train, n_val, n_test;
} demo_file;

/* Generates the file unless a valid one with the same name is cached. */
/* The generator options of a demo file. */
static lb_task_options demo_options(const demo_file *f, uint64_t seed)
{
    lb_task_options o;
    lb_task_options_default(LB_TASK_SPIKE, &o);
    o.seq_len = f->seq_len;
    o.min_distance = f->min_distance;
    o.max_distance = f->max_distance;
    o.n_train = f->n_train;
    o.n_val = f->n_val;
    o.n_test = f->n_test;
    o.seed = seed;
    return o;
}

/* "" when a cached file was made with options `want` (read from the file's own
 * attributes), else what differs, e.g. "seq_len 64, not 256". */
static void cache_mismatch(const lb_dataset *ds, const lb_task_options *want, char *why, size_t size)
{
    const lb_task_options *got = lb_dataset_options(ds);
    why[0] = '\0';
    if (lb_dataset_task(ds) != want->task)
        snprintf(why, size, "task %s, not %s", lb_task_name(lb_dataset_task(ds)), lb_task_name(want->task));
#define SAME(field)                                                                                              \
    else if (got->field != want->field) snprintf(why, size, #field " %lld, not %lld", (long long)got->field,      \
                                                 (long long)want->field)
    SAME(seq_len);
    SAME(min_distance);
    SAME(max_distance);
    SAME(n_train);
    SAME(n_val);
    SAME(n_test);
    SAME(seed);
    SAME(readings);
    SAME(noise_types);
    SAME(sensors);
#undef SAME
}

/* Generates the file unless a valid one made with the same options is cached. */
static lb_status ensure_demo_file(const char *dir, const demo_file *f, uint64_t seed, char *path, size_t size, int quiet)
{
    if (snprintf(path, size, "%s/%s.h5", dir, f->name) >= (int)size)
        return lb_error(LB_ERR_VALUE, "data folder path too long: %s", dir);
    lb_task_options o = demo_options(f, seed);
    if (lb_cli_exists(path)) {
        lb_dataset *ds = lb_dataset_open(path);
        char why[160] = "";
        if (ds)
            cache_mismatch(ds, &o, why, sizeof why);
        lb_dataset_close(ds);
        if (ds && !why[0])
            return LB_OK;
        /* Said even with --quiet: a file the user may have put there is replaced. */
        fprintf(stderr, "regenerating %s: %s\n", path, ds ? why : lb_last_error());
    }
    if (!quiet)
        fprintf(stderr, "generating %s (spike, seq_len %lld, clue %lld..%lld events back)\n", path,
                (long long)f->seq_len, (long long)f->min_distance, (long long)f->max_distance);
    return lb_task_generate(&o, path, NULL, NULL);
}

/* An exclusive lock on the data cache (DIR/.lock) while the demo checks and makes its
 * files: a second demo on the same cache waits, saying so, and then finds them made.
 * Returns the descriptor (kept until the process ends) or -1 with an error. */
static int lock_cache(const char *dir, int quiet)
{
    char path[4200];
    snprintf(path, sizeof path, "%s/.lock", dir);
    int fd = open(path, O_RDWR | O_CREAT | O_CLOEXEC, 0644);
    if (fd < 0) {
        lb_error(LB_ERR_IO, "%s: cannot create the lock file: %s", path, strerror(errno));
        return -1;
    }
    if (flock(fd, LOCK_EX | LOCK_NB) != 0) {
        if (!quiet)
            fprintf(stderr, "waiting for another lookback demo that is preparing the data in %s\n", dir);
        if (flock(fd, LOCK_EX) != 0) {
            close(fd);
            lb_error(LB_ERR_IO, "%s: cannot lock: %s", path, strerror(errno));
            return -1;
        }
    }
    return fd;
}

/* Picks spec's learning rate from {3e-3, 1e-3, 3e-4} by validation accuracy after
 * `budget` seconds of training each (runs kept in out_dir/<name>-lr-search/). */
static lb_status choose_lr(model_spec *spec, const char *out_dir, double budget, int quiet)
{
    const double lrs[] = {3e-3, 1e-3, 3e-4};
    double best_acc = -1, best_lr = lrs[0];
    for (size_t i = 0; i < sizeof lrs / sizeof lrs[0]; i++) {
        model_spec probe = *spec;
        char dir[4200];
        snprintf(dir, sizeof dir, "%s/%s-lr-search/lr-%g", out_dir, spec->name, lrs[i]);
        probe.rc.train.optim.lr = lrs[i];
        probe.rc.train.schedule.base_lr = lrs[i];
        probe.rc.train.time_budget = budget;
        lb_cli_run run;
        if (lb_cli_run_training(&probe.rc, dir, 0, quiet, &run, NULL) != LB_OK)
            return lb_last_status();
        if (!quiet)
            fprintf(stderr, "%s lr %g: val accuracy %.4f after %lld steps\n", spec->name, lrs[i],
                    run.last_val.accuracy, (long long)run.steps);
        if (run.last_val.accuracy > best_acc) {
            best_acc = run.last_val.accuracy;
            best_lr = lrs[i];
        }
    }
    spec->rc.train.optim.lr = best_lr;
    snprintf(spec->note, sizeof spec->note, "lr %g chosen from {3e-3, 1e-3, 3e-4} on the validation split (%.3f after %.0f s)",
             best_lr, best_acc, budget);
    return LB_OK;
}

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
        case 'b': st = lb_cli_real("--budget", optarg, 1, 1e6, &budget); break;
        case 'k': st = lb_budget_clock_parse(optarg, &budget_clock); break;
        case 'Q': quick = 1; break;
        case 'd': data_dir_opt = optarg; break;
        case 't': st = lb_cli_int("--threads", optarg, 0, 1024, &threads); break;
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
    int code = check_out_dir(cmd, out_dir);
    if (code >= 0)
        return code;

    /* Data: cached across runs, generated from fixed seeds. */
    char data_dir[3900];
    const char *home = getenv("HOME"), *xdg = getenv("XDG_CACHE_HOME");
    if (data_dir_opt)
        snprintf(data_dir, sizeof data_dir, "%s", data_dir_opt);
    else if (xdg && *xdg)
        snprintf(data_dir, sizeof data_dir, "%s/lookback/demo%s", xdg, quick ? "-quick" : "");
    else
        snprintf(data_dir, sizeof data_dir, "%s/.cache/lookback/demo%s", home && *home ? home : ".", quick ? "-quick" : "");
    if (lb_cli_mkdir(data_dir) != LB_OK)
        return lb_cli_fail(cmd);
    int cache_lock = lock_cache(data_dir, quiet);
    if (cache_lock < 0)
        return lb_cli_fail(cmd);
    const int64_t n_eval = quick ? 64 : 200;
    const demo_file files[] = {
        {"train", 256, 1, 250, quick ? 4000 : 20000, quick ? 256 : 1000, 0},
        {"short", 64, 4, 60, quick ? 4000 : 20000, quick ? 256 : 1000, n_eval},
        {"near-100", 160, 90, 110, 0, 0, n_eval},
        {"far-1000", 1100, 950, 1050, 0, 0, n_eval},
        {"far-7000", 7200, 6900, 7100, 0, 0, n_eval},
    };
    enum { N_FILES = sizeof files / sizeof files[0] };
    char paths[N_FILES][4096];
    for (int i = 0; i < N_FILES; i++)
        if (ensure_demo_file(data_dir, &files[i], 1000 + (uint64_t)i, paths[i], sizeof paths[i], quiet) != LB_OK)
            return lb_cli_fail(cmd);

    model_spec specs[3];
    memset(specs, 0, sizeof specs);
    /* Attention: one pre-norm block, no positional encoding, so the alarm finds the spike by
     * content at any distance; the last block reads only the alarm's position. */
    model_spec *att = &specs[0];
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
    model_spec *lstm = &specs[1];
    snprintf(lstm->name, sizeof lstm->name, "lstm");
    lb_run_config_default(&lstm->rc, LB_MODEL_LSTM);
    snprintf(lstm->rc.data, sizeof lstm->rc.data, "%s", paths[0]);
    lstm->rc.model.hidden_size = 128;
    lstm->rc.model.n_layers = 1;
    lstm->rc.model.forget_bias = 1.0;
    /* The same LSTM on short sequences: the baseline works when the clue is near. */
    model_spec *lstm_short = &specs[2];
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
    int search_new[3] = {0, 0, 0}, out_new = !lb_cli_exists(out_dir);
    for (int m = 1; m < 3; m++) {
        snprintf(search_dirs[m], sizeof search_dirs[m], "%s/%s-lr-search", out_dir, specs[m].name);
        search_new[m] = !lb_cli_exists(search_dirs[m]);
    }
    code = 0;
    for (int m = 1; m < 3 && !quick && code == 0; m++)
        if (choose_lr(&specs[m], out_dir, budget / 4, quiet) != LB_OK) {
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

    eval_file evals[4];
    memset(evals, 0, sizeof evals);
    const char *labels[4] = {"short 4-60", "~100", "~1000", "~7000"};
    for (int e = 0; e < 4; e++) {
        snprintf(evals[e].path, sizeof evals[e].path, "%s", paths[e + 1]);
        snprintf(evals[e].label, sizeof evals[e].label, "%s", labels[e]);
    }
    if (code == 0 && threads == 0 && (threads = lb_cli_set_threads(0)) < 0)
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
                remove_created_tree(search_dirs[m]);
        if (out_new)
            rmdir(out_dir); /* only when empty */
    }
    return code;
}

/* The experiment engine called as a library (lab/): files and folders, the metrics
 * reader beside its writer, option values, and a whole comparison of two small models
 * run from C, without the command. */
#include <json-c/json.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "support.h"
#include "data/tasks.h"
#include "lab/compare.h"
#include "lab/files.h"
#include "lab/gradcheck.h"
#include "lab/run.h"
#include "train/trainer.h"

static char tmp_dir[256];

static const char *tmp_path(const char *name)
{
    static char buf[4][512];
    static int k = 0;
    k = (k + 1) % 4;
    snprintf(buf[k], sizeof buf[k], "%s/%s", tmp_dir, name);
    return buf[k];
}

static void write_text(const char *path, const char *text)
{
    FILE *f = fopen(path, "w");
    CU_ASSERT_PTR_NOT_NULL_FATAL(f);
    fputs(text, f);
    fclose(f);
}

static void test_files(void)
{
    char buf[64];
    CU_ASSERT_STRING_EQUAL(lb_files_join(buf, sizeof buf, "a/b", "c.json"), "a/b/c.json");
    CU_ASSERT_EQUAL(lb_files_mkdir(tmp_path("x/y/z")), LB_OK);
    CU_ASSERT_TRUE(lb_files_exists(tmp_path("x/y/z")));
    write_text(tmp_path("x/file"), "not a folder");
    CU_ASSERT_EQUAL(lb_files_mkdir(tmp_path("x/file")), LB_ERR_IO);
    CU_ASSERT_TRUE(lb_test_error_has("is not a folder"));
    CU_ASSERT_EQUAL(lb_files_mkdir(tmp_path("x/file/below")), LB_ERR_IO);

    uint32_t crc = 0;
    int64_t bytes = 0;
    write_text(tmp_path("crc"), "123456789");
    CU_ASSERT_EQUAL(lb_files_crc32(tmp_path("crc"), &crc, &bytes), LB_OK);
    CU_ASSERT_EQUAL(crc, 0xCBF43926u); /* the CRC-32 check value */
    CU_ASSERT_EQUAL(bytes, 9);
    CU_ASSERT_EQUAL(lb_files_crc32(tmp_path("missing"), &crc, &bytes), LB_ERR_IO);

    json_object *o = json_object_new_object();
    json_object_object_add(o, "answer", json_object_new_int(42));
    CU_ASSERT_EQUAL(lb_files_write_json(o, tmp_path("x/a.json"), "test file"), LB_OK);
    json_object *back = json_object_from_file(tmp_path("x/a.json"));
    json_object *v = NULL;
    CU_ASSERT_TRUE(back && json_object_object_get_ex(back, "answer", &v) && json_object_get_int(v) == 42);
    json_object_put(back);
    CU_ASSERT_FALSE(lb_files_exists(tmp_path("x/a.json.tmp")));
}

/* The remover deletes links, never what they point to. */
static void test_remove_tree(void)
{
    CU_ASSERT_EQUAL(lb_files_mkdir(tmp_path("keep")), LB_OK);
    write_text(tmp_path("keep/precious"), "kept");
    CU_ASSERT_EQUAL(lb_files_mkdir(tmp_path("gone/inner")), LB_OK);
    write_text(tmp_path("gone/inner/f"), "x");
    CU_ASSERT_EQUAL(symlink(tmp_path("keep"), tmp_path("gone/link")), 0);
    CU_ASSERT_EQUAL(symlink(tmp_path("keep/precious"), tmp_path("gone/inner/filelink")), 0);
    lb_files_remove_tree(tmp_path("gone"));
    CU_ASSERT_FALSE(lb_files_exists(tmp_path("gone")));
    CU_ASSERT_TRUE(lb_files_exists(tmp_path("keep/precious")));
    /* a link to a folder given as the folder itself is left alone */
    CU_ASSERT_EQUAL(symlink(tmp_path("keep"), tmp_path("keep-link")), 0);
    lb_files_remove_tree(tmp_path("keep-link"));
    CU_ASSERT_TRUE(lb_files_exists(tmp_path("keep/precious")));
    lb_files_remove_tree(NULL); /* nothing */
}

typedef struct seen_rows {
    int n;
    int64_t step[8];
    double loss[8], accuracy[8], wall[8];
} seen_rows;

static int collect(const lb_metrics_row *row, void *user)
{
    seen_rows *s = user;
    s->step[s->n] = row->step;
    s->loss[s->n] = row->loss;
    s->accuracy[s->n] = row->accuracy;
    s->wall[s->n] = row->wall_seconds;
    return ++s->n == 8;
}

static void test_metrics_reader(void)
{
    char text[1024];
    snprintf(text, sizeof text,
             "%s\n"
             "10,train,1.5,0.25,0.001,2,100,1.5,0\n"
             "10,val,1.25,0.5,0.001,nan,nan,1.5,0\n"
             "20,train,1.0,nan,0.001,1,100,3,1\n"
             "20,val,0.75,0.875,0.001,nan,nan,3.25,0\n"
             "30,val,0.5", /* a row cut short by a full disk */
             lb_metrics_header());
    write_text(tmp_path("metrics.csv"), text);
    seen_rows s = {0};
    int64_t n = -1;
    CU_ASSERT_EQUAL(lb_metrics_read(tmp_path("metrics.csv"), "val", collect, &s, &n), LB_OK);
    CU_ASSERT_EQUAL(n, 3);
    CU_ASSERT_EQUAL(s.n, 3);
    CU_ASSERT_EQUAL(s.step[0], 10);
    CU_ASSERT_EQUAL(s.step[1], 20);
    CU_ASSERT_DOUBLE_EQUAL(s.loss[1], 0.75, 0);
    CU_ASSERT_DOUBLE_EQUAL(s.accuracy[1], 0.875, 0);
    CU_ASSERT_DOUBLE_EQUAL(s.wall[1], 3.25, 0);
    /* the cut row has its step, split and loss: the columns it lacks read as NAN */
    CU_ASSERT_EQUAL(s.step[2], 30);
    CU_ASSERT_TRUE(isnan(s.accuracy[2]));
    seen_rows all = {0};
    CU_ASSERT_EQUAL(lb_metrics_read(tmp_path("metrics.csv"), NULL, collect, &all, &n), LB_OK);
    CU_ASSERT_EQUAL(n, 5);
    CU_ASSERT_TRUE(isnan(all.accuracy[2])); /* "nan" reads as NAN */

    /* columns found by name: an extra column and another order read the same */
    write_text(tmp_path("wide.csv"), "split,step,extra,loss,accuracy\nval,7,x,0.5,0.25\ntrain,8,y,1,0\n");
    seen_rows w = {0};
    CU_ASSERT_EQUAL(lb_metrics_read(tmp_path("wide.csv"), "val", collect, &w, &n), LB_OK);
    CU_ASSERT_EQUAL(n, 1);
    CU_ASSERT_EQUAL(w.step[0], 7);
    CU_ASSERT_DOUBLE_EQUAL(w.accuracy[0], 0.25, 0);
    CU_ASSERT_TRUE(isnan(w.wall[0]));

    write_text(tmp_path("notmetrics.csv"), "a,b,c\n1,2,3\n");
    CU_ASSERT_EQUAL(lb_metrics_read(tmp_path("notmetrics.csv"), NULL, collect, &w, &n), LB_ERR_VALUE);
    CU_ASSERT_TRUE(lb_test_error_has("not a metrics file"));
    CU_ASSERT_EQUAL(lb_metrics_read(tmp_path("absent.csv"), NULL, collect, &w, &n), LB_ERR_IO);
    CU_ASSERT_EQUAL(n, 0);
    CU_ASSERT_EQUAL(lb_metrics_read(NULL, NULL, collect, &w, NULL), LB_ERR_VALUE);
}

static void test_option_values(void)
{
    int64_t i = 0;
    double r = 0;
    CU_ASSERT_EQUAL(lb_option_int("--steps", "12", 1, 100, &i), LB_OK);
    CU_ASSERT_EQUAL(i, 12);
    CU_ASSERT_EQUAL(lb_option_int("--steps", "12x", 1, 100, &i), LB_ERR_VALUE);
    CU_ASSERT_TRUE(lb_test_error_has("--steps expects a whole number"));
    CU_ASSERT_EQUAL(lb_option_int("--steps", "101", 1, 100, &i), LB_ERR_VALUE);
    CU_ASSERT_EQUAL(lb_option_real("--lr", "3e-3", 0, 1, &r), LB_OK);
    CU_ASSERT_DOUBLE_EQUAL(r, 3e-3, 0);
    CU_ASSERT_EQUAL(lb_option_real("--lr", "0x10", 0, 100, &r), LB_ERR_VALUE);
    CU_ASSERT_EQUAL(lb_option_real("--lr", NULL, 0, 100, &r), LB_ERR_VALUE);
}

static void test_compare_checks(void)
{
    CU_ASSERT_EQUAL(lb_compare_check_name("att-1.b_2"), LB_OK);
    CU_ASSERT_EQUAL(lb_compare_check_name(""), LB_ERR_VALUE);
    CU_ASSERT_EQUAL(lb_compare_check_name(".hidden"), LB_ERR_VALUE);
    CU_ASSERT_EQUAL(lb_compare_check_name("a/b"), LB_ERR_VALUE);
    CU_ASSERT_EQUAL(lb_compare_check_name(NULL), LB_ERR_VALUE);
    CU_ASSERT_EQUAL(lb_compare_check_out_dir(tmp_path("new-report")), LB_OK);
    CU_ASSERT_EQUAL(lb_files_mkdir(tmp_path("old-report")), LB_OK);
    write_text(tmp_path("old-report/summary.json"), "{}");
    CU_ASSERT_EQUAL(lb_compare_check_out_dir(tmp_path("old-report")), LB_ERR_STATE);
    CU_ASSERT_EQUAL(lb_compare_check_out_dir(tmp_path("crc")), LB_ERR_IO);
}

/* A whole comparison from C: two small models, a few steps each, one evaluation file. */
static void test_compare_run(void)
{
    lb_task_options o;
    lb_task_options_default(LB_TASK_SPIKE, &o);
    o.seq_len = 32;
    o.min_distance = 4;
    o.max_distance = 20;
    o.n_train = 64;
    o.n_val = 16;
    o.n_test = 24;
    CU_ASSERT_EQUAL_FATAL(lb_task_generate(&o, tmp_path("spike.h5"), NULL, NULL), LB_OK);
    static lb_compare_model models[2];
    static lb_compare_eval evals[1];
    static lb_compare_report rep;
    memset(models, 0, sizeof models);
    memset(evals, 0, sizeof evals);
    const char *kinds[2] = {"transformer", "lstm"};
    for (int m = 0; m < 2; m++) {
        snprintf(models[m].name, sizeof models[m].name, "%s", kinds[m]);
        lb_run_config_default(&models[m].rc, LB_MODEL_TRANSFORMER);
        snprintf(models[m].rc.data, sizeof models[m].rc.data, "%s", tmp_path("spike.h5"));
        CU_ASSERT_EQUAL(lb_run_config_set(&models[m].rc, "model", kinds[m]), LB_OK);
        CU_ASSERT_EQUAL(lb_run_config_set(&models[m].rc, "steps", "3"), LB_OK);
        CU_ASSERT_EQUAL(lb_run_config_set(&models[m].rc, "batch", "8"), LB_OK);
        CU_ASSERT_EQUAL(lb_run_config_set(&models[m].rc, "threads", "1"), LB_OK);
        CU_ASSERT_EQUAL(lb_run_config_set(&models[m].rc, "eval-every", "3"), LB_OK);
    }
    CU_ASSERT_EQUAL(lb_run_config_set(&models[0].rc, "d-model", "16"), LB_OK);
    CU_ASSERT_EQUAL(lb_run_config_set(&models[1].rc, "hidden", "16"), LB_OK);
    snprintf(evals[0].path, sizeof evals[0].path, "%s", tmp_path("spike.h5"));
    CU_ASSERT_EQUAL_FATAL(lb_compare_run(models, 2, evals, 1, tmp_path("report"), 1, &rep), LB_OK);
    CU_ASSERT_EQUAL(rep.report_rank, 1);
    CU_ASSERT_EQUAL(rep.failed_model, -1);
    for (int m = 0; m < 2; m++) {
        CU_ASSERT_EQUAL(rep.results[m].run.steps, 3);
        CU_ASSERT_TRUE(rep.results[m].run.parameters > 0);
        CU_ASSERT_TRUE(rep.results[m].accuracy[0] >= 0 && rep.results[m].accuracy[0] <= 1);
        CU_ASSERT_TRUE(rep.results[m].seconds_per_step > 0);
    }
    CU_ASSERT_DOUBLE_EQUAL(rep.chance, 1.0 / (double)o.readings, 1e-12);
    CU_ASSERT_STRING_EQUAL(evals[0].label, "spike");
    CU_ASSERT_EQUAL(evals[0].dmin, 4);
    CU_ASSERT_EQUAL(evals[0].dmax, 20);
    /* the report as written: summary.json holds what rep holds */
    json_object *root = json_object_from_file(tmp_path("report/summary.json")), *list = NULL;
    CU_ASSERT_PTR_NOT_NULL_FATAL(root);
    CU_ASSERT_TRUE(json_object_object_get_ex(root, "models", &list) && json_object_array_length(list) == 2);
    json_object *first = json_object_array_get_idx(list, 0), *params = NULL;
    CU_ASSERT_TRUE(json_object_object_get_ex(first, "parameters", &params) &&
                   json_object_get_int64(params) == rep.results[0].run.parameters);
    json_object_put(root);
    CU_ASSERT_TRUE(lb_files_exists(tmp_path("report/lstm/metrics.csv")));
    /* the same folder again: it holds a report, nothing is trained or changed */
    CU_ASSERT_EQUAL(lb_compare_run(models, 2, evals, 1, tmp_path("report"), 1, &rep), LB_ERR_STATE);
    CU_ASSERT_TRUE(lb_test_error_has("already holds a report"));
    /* without its report (an interrupted comparison's folder): each run is continued, and
     * a finished one trains no further */
    CU_ASSERT_EQUAL(unlink(tmp_path("report/summary.json")), 0);
    CU_ASSERT_EQUAL_FATAL(lb_compare_run(models, 2, evals, 1, tmp_path("report"), 1, &rep), LB_OK);
    CU_ASSERT_EQUAL(rep.results[0].run.steps, 3);
    CU_ASSERT_EQUAL(rep.results[1].run.steps, 3);
    CU_ASSERT_TRUE(lb_files_exists(tmp_path("report/summary.json")));
    /* a model folder that holds no run is not ours */
    CU_ASSERT_EQUAL(lb_files_mkdir(tmp_path("report2/lstm")), LB_OK);
    CU_ASSERT_EQUAL(lb_compare_run(models, 2, evals, 1, tmp_path("report2"), 1, &rep), LB_ERR_STATE);
    CU_ASSERT_TRUE(lb_test_error_has("holds no run"));
    CU_ASSERT_FALSE(lb_files_exists(tmp_path("report2/transformer")));
    /* a table for a person names both models */
    FILE *out = tmpfile();
    CU_ASSERT_PTR_NOT_NULL_FATAL(out);
    rep.results[0].run.parameters = 1234;
    lb_compare_print_table(out, models, 2, evals, 1, &rep);
    rewind(out);
    char table[4096];
    size_t got = fread(table, 1, sizeof table - 1, out);
    table[got] = '\0';
    fclose(out);
    CU_ASSERT_PTR_NOT_NULL(strstr(table, "transformer"));
    CU_ASSERT_PTR_NOT_NULL(strstr(table, "1234"));
    CU_ASSERT_EQUAL(lb_compare_run(models, 0, evals, 1, tmp_path("r2"), 1, &rep), LB_ERR_VALUE);
    CU_ASSERT_EQUAL(lb_compare_run(NULL, 2, evals, 1, tmp_path("r2"), 1, &rep), LB_ERR_VALUE);
}

/* lb_model_gradcheck from C: every family passes; a wrong backward fails and says so. */
static void test_model_gradcheck(void)
{
    lb_model_gradcheck_setup s;
    memset(&s, 0, sizeof s);
    lb_model_config_default(LB_MODEL_TRANSFORMER, &s.model);
    CU_ASSERT_EQUAL(lb_model_field_set(&s.model, lb_model_field_find("d-model"), "8"), LB_OK);
    CU_ASSERT_EQUAL(lb_model_field_set(&s.model, lb_model_field_find("heads"), "2"), LB_OK);
    CU_ASSERT_EQUAL(lb_model_field_set(&s.model, lb_model_field_find("d-ff"), "8"), LB_OK);
    CU_ASSERT_EQUAL(lb_model_field_set(&s.model, lb_model_field_find("hidden"), "5"), LB_OK);
    CU_ASSERT_EQUAL(lb_model_field_set(&s.model, lb_model_field_find("layers"), "1"), LB_OK);
    CU_ASSERT_EQUAL(lb_model_field_set(&s.model, lb_model_field_find("window"), "3"), LB_OK);
    CU_ASSERT_EQUAL(lb_model_field_set(&s.model, lb_model_field_find("kernel"), "2"), LB_OK);
    s.seq_len = 5;
    s.batch = 2;
    s.features = 3;
    s.classes = 3;
    s.head = LB_HEAD_LAST;
    s.seed = 3;
    s.tol = lb_gradcheck_defaults();
    const lb_model_kind kinds[] = {LB_MODEL_TRANSFORMER, LB_MODEL_LOCAL, LB_MODEL_LSTM, LB_MODEL_CONV, LB_MODEL_LINEAR};
    for (int k = 0; k < 5; k++) {
        int params = -1, failed = -1;
        lb_status st = lb_model_gradcheck(&s, kinds[k], NULL, &params, &failed);
        CU_ASSERT_EQUAL(st, LB_OK);
        if (st != LB_OK)
            fprintf(stderr, "\n  %s: %s\n", lb_model_kind_name(kinds[k]), lb_last_error());
        CU_ASSERT_TRUE(params > 0);
        CU_ASSERT_EQUAL(failed, 0);
    }
    s.break_gradient = 1;
    int params = 0, failed = 0;
    CU_ASSERT_EQUAL(lb_model_gradcheck(&s, LB_MODEL_LSTM, NULL, &params, &failed), LB_ERR_NUMERIC);
    CU_ASSERT_TRUE(failed > 0 && failed <= params);
    CU_ASSERT_TRUE(lb_test_error_has("analytic"));
    /* options that make no model: no parameter checked */
    s.break_gradient = 0;
    CU_ASSERT_EQUAL(lb_model_field_set(&s.model, lb_model_field_find("d-model"), "7"), LB_OK);
    CU_ASSERT_EQUAL(lb_model_gradcheck(&s, LB_MODEL_TRANSFORMER, NULL, &params, &failed), LB_ERR_VALUE);
    CU_ASSERT_EQUAL(params, 0);
    CU_ASSERT_EQUAL(lb_model_gradcheck(NULL, LB_MODEL_TRANSFORMER, NULL, &params, &failed), LB_ERR_VALUE);
}

int main(void)
{
    snprintf(tmp_dir, sizeof tmp_dir, "/tmp/lb_test_lab_XXXXXX");
    if (!mkdtemp(tmp_dir))
        return 1;
    /* PLplot's built-in SVG device: the cairo one keeps fontconfig's caches until exit */
    setenv("LOOKBACK_PLOT_DEVICE", "svg", 1);
    lb_run_set_threads(1);
    static const lb_test_case cases[] = {
        {"files and folders", test_files},
        {"the tree remover never follows links", test_remove_tree},
        {"metrics.csv read back by column name", test_metrics_reader},
        {"option values", test_option_values},
        {"compare: names and report folders", test_compare_checks},
        {"compare run from C", test_compare_run},
        {"a whole model's gradients checked from C", test_model_gradcheck},
        {NULL, NULL},
    };
    int rc = lb_test_main("lab", cases);
    lb_files_remove_tree(tmp_dir);
    return rc;
}

/* `lookback study` as a user runs it, with budgets of a few dozen steps: the
 * outputs' structure and values (study.json cells, study.md's table and best-fit
 * line, plots), resumption that skips finished cells and reruns a missing one, and
 * the refusal of a folder made with other options. */
#include <fcntl.h>
#include <ftw.h>
#include <json-c/json.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <signal.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cli_support.h"

static int exists(const char *path) { return access(path, F_OK) == 0; }

static const char *study_dir(void)
{
    static char dir[512];
    if (!dir[0])
        snprintf(dir, sizeof dir, "%s", path_in("study"));
    return dir;
}

static run_result run_study(const char *steps)
{
    const char *args[] = {"study", "--quick", "--tasks", "local", "--methods", "lstm,conv", "--steps", steps,
                          "--eval-examples", "16", "--threads", "1", "--out", study_dir(), NULL};
    return run(args);
}

/* The same study, one job at a time. */
static run_result run_study_serial(const char *steps)
{
    const char *args[] = {"study", "--quick", "--tasks", "local", "--methods", "lstm,conv", "--steps", steps,
                          "--eval-examples", "16", "--jobs", "1", "--out", study_dir(), NULL};
    return run(args);
}

static json_object *get(json_object *o, const char *key)
{
    json_object *v = NULL;
    return json_object_object_get_ex(o, key, &v) ? v : NULL;
}

static void check_cell(json_object *cell)
{
    const char *method = json_object_get_string(get(cell, "method"));
    CU_ASSERT_STRING_EQUAL(json_object_get_string(get(cell, "task")), "local");
    CU_ASSERT_EQUAL(json_object_get_int(get(cell, "seed")), 1);
    CU_ASSERT_EQUAL(json_object_get_int64(get(cell, "steps")), 40); /* --steps 40: the whole budget */
    /* --quick: the recipe's default learning rate, no probe */
    double lr = json_object_get_double(get(cell, "lr"));
    CU_ASSERT_DOUBLE_EQUAL(lr, strcmp(method, "lstm") == 0 ? 1e-3 : 3e-3, 1e-12);
    CU_ASSERT_PTR_NOT_NULL(get(cell, "source"));
    /* 40 steps solve nothing (the local task needs thousands): the curve has the last validation, no time to learn. */
    CU_ASSERT_FALSE(json_object_get_boolean(get(cell, "solved")));
    CU_ASSERT_PTR_NULL(get(cell, "time_to_learn"));
    json_object *curve = get(cell, "curve");
    CU_ASSERT_TRUE_FATAL(curve && json_object_array_length(curve) >= 1);
    json_object *end = json_object_array_get_idx(curve, json_object_array_length(curve) - 1);
    CU_ASSERT_EQUAL(json_object_get_int64(get(end, "step")), json_object_get_int64(get(cell, "steps")));
    CU_ASSERT_DOUBLE_EQUAL(json_object_get_double(get(end, "cpu_seconds")),
                           json_object_get_double(get(cell, "train_seconds")), 1e-9);
    CU_ASSERT_TRUE(json_object_get_double(get(cell, "seconds_per_step")) > 0);
    CU_ASSERT_TRUE(json_object_get_double(get(cell, "peak_rss_mb")) > 1);
    CU_ASSERT_TRUE(json_object_get_double(get(cell, "job_seconds")) >= json_object_get_double(get(cell, "train_seconds")));
    CU_ASSERT_TRUE(json_object_get_int64(get(cell, "parameters")) > 1000);
    json_object *tests = get(cell, "tests");
    CU_ASSERT_EQUAL_FATAL(json_object_array_length(tests), 3);
    static const int64_t lens[3] = {64, 256, 1024};
    for (size_t i = 0; i < 3; i++) {
        json_object *t = json_object_array_get_idx(tests, i);
        CU_ASSERT_EQUAL(json_object_get_int64(get(t, "seq_len")), lens[i]);
        CU_ASSERT_EQUAL(json_object_get_int64(get(t, "examples")), 16);
        double acc = json_object_get_double(get(t, "accuracy"));
        CU_ASSERT_TRUE(acc >= 0 && acc <= 1);
        CU_ASSERT_TRUE(json_object_get_double(get(t, "us_per_event")) > 0);
        /* LSTM: (h, c) of 128 each at any length; conv: 6 layers, kernel 3 -> 2 * 63 past inputs of 64 */
        double state = json_object_get_double(get(t, "state_floats"));
        CU_ASSERT_DOUBLE_EQUAL(state, strcmp(method, "lstm") == 0 ? 256.0 : 2.0 * 63 * 64, 1e-9);
    }
}

/* Sets every test length's accuracy of a stored cell (as if it had measured it). */
static void set_cell_accuracy(const char *cell, double accuracy)
{
    char path[600];
    snprintf(path, sizeof path, "%s/jobs/%s.json", study_dir(), cell);
    json_object *root = json_object_from_file(path);
    CU_ASSERT_PTR_NOT_NULL_FATAL(root);
    json_object *tests = get(root, "tests");
    for (size_t i = 0; i < json_object_array_length(tests); i++)
        json_object_object_add(json_object_array_get_idx(tests, i), "accuracy", json_object_new_double(accuracy));
    CU_ASSERT_EQUAL(json_object_to_file(path, root), 0);
    json_object_put(root);
}

static void test_study_outputs_and_resume(void)
{
    run_result r = run_study("40");
    EXPECT(r.code == 0, r);
    EXPECT(contains(r.err, "[cell 0/2]") && contains(r.err, "ETA"), r);
    /* short times keep their decimals: a study of seconds is not "0.0 min", an ETA not "0 s" */
    EXPECT(contains(r.err, "study done in ") && !contains(r.err, "done in 0.0 min") && !contains(r.err, "done in 0 s") &&
               !contains(r.err, "ETA 0 s"),
           r);
    run_free(&r);

    char path[600];
    snprintf(path, sizeof path, "%s/study.json", study_dir());
    json_object *root = json_object_from_file(path);
    CU_ASSERT_PTR_NOT_NULL_FATAL(root);
    json_object *cells = get(root, "cells"), *tasks = get(root, "tasks"), *lr = get(root, "lr_search");
    CU_ASSERT_EQUAL_FATAL(json_object_array_length(cells), 2);
    CU_ASSERT_EQUAL(json_object_array_length(lr), 0); /* --quick: the recipes' learning rates, no probe */
    /* The recipe table: every task has exactly one row for each method of the source's
     * table, spike16 also one for each length-robust variant; each row has its learning
     * rates, its budget and its source. */
    json_object *recipes = get(root, "recipes");
    static const char *const task_names[] = {"spike16", "recall", "local", "parity", "copy", "modsum"};
    static const char *const method_names[] = {"transformer", "local", "lstm", "conv", "ssmax", "mixed", "logn"};
    CU_ASSERT_EQUAL(json_object_array_length(recipes), 6 * 6 + 3); /* and linear and mamba on every task */
    for (int t = 0; t < 6; t++)
        for (int m = 0; m < 7; m++) {
            int rows = 0;
            for (size_t i = 0; i < json_object_array_length(recipes); i++) {
                json_object *row = json_object_array_get_idx(recipes, i);
                if (strcmp(json_object_get_string(get(row, "task")), task_names[t]) != 0 ||
                    strcmp(json_object_get_string(get(row, "method")), method_names[m]) != 0)
                    continue;
                rows++;
                CU_ASSERT_TRUE(json_object_array_length(get(row, "lrs")) >= 1);
                CU_ASSERT_TRUE(json_object_get_double(get(row, "budget_seconds")) > 0);
                CU_ASSERT_TRUE(json_object_get_double(get(row, "stop_at")) > 0);
                CU_ASSERT_TRUE(strlen(json_object_get_string(get(row, "source"))) > 5);
                if (strcmp(task_names[t], "recall") == 0 && m < 2) /* Zoology's sweep: 4 log-spaced rates */
                    CU_ASSERT_EQUAL(json_object_array_length(get(row, "lrs")), 4);
                if (strcmp(task_names[t], "copy") == 0 && m == 3) { /* Bai's TCN: kernel 8, selected on loss */
                    CU_ASSERT_PTR_NOT_NULL(strstr(json_object_get_string(get(row, "model")), "kernel 8"));
                    CU_ASSERT_STRING_EQUAL(json_object_get_string(get(row, "select")), "loss");
                }
            }
            CU_ASSERT_EQUAL(rows, m < 4 || t == 0 ? 1 : 0);
        }
    /* ctest sets OMP_NUM_THREADS=2: with --threads 1, two jobs run at once */
    json_object *options = get(root, "options");
    CU_ASSERT_EQUAL(json_object_get_int(get(options, "jobs")), 2);
    CU_ASSERT_EQUAL(json_object_get_int(get(options, "threads")), 1);
    double wall = json_object_get_double(get(root, "wall_seconds"));
    CU_ASSERT_TRUE(wall > 0 && 2 * wall >= json_object_get_double(get(root, "job_seconds")));
    for (size_t i = 0; i < 2; i++)
        check_cell(json_object_array_get_idx(cells, i));
    CU_ASSERT_EQUAL_FATAL(json_object_array_length(tasks), 1);
    json_object *task = json_object_array_get_idx(tasks, 0);
    CU_ASSERT_DOUBLE_EQUAL(json_object_get_double(get(task, "chance")), 0.125, 1e-12);
    CU_ASSERT_STRING_EQUAL(json_object_get_string(get(task, "text_pick")), "1D convolution");
    CU_ASSERT_PTR_NOT_NULL(get(task, "best_fit_measured"));
    json_object_put(root);

    snprintf(path, sizeof path, "%s/study.md", study_dir());
    char *md = read_all(path, NULL);
    CU_ASSERT_PTR_NOT_NULL_FATAL(md);
    char png[600], svg[600];
    CU_ASSERT_TRUE(contains(md, "**Best fit, measured:**"));
    CU_ASSERT_TRUE(contains(md, "| lstm | 1 |"));
    CU_ASSERT_TRUE(contains(md, "| conv | 1 |"));
    CU_ASSERT_TRUE(contains(md, "receptive field 127 >= T = 64"));
    CU_ASSERT_TRUE(contains(md, "| solved | time to learn (CPU s) |"));
    CU_ASSERT_FALSE(contains(md, "scalable softmax |")); /* no row for a method that runs on no task here */
    CU_ASSERT_TRUE(contains(md, "| 0/1 | not within 40 steps |"));
    CU_ASSERT_TRUE(contains(md, "Budget per cell 40 steps (--steps)"));
    CU_ASSERT_TRUE(contains(md, "![local: validation score against CPU seconds](learning-local.png)"));
    /* The header shows the command as it was run. */
    CU_ASSERT_TRUE(contains(md, "`lookback study --quick --tasks local --methods lstm,conv --steps 40 --eval-examples 16 "
                                "--threads 1 --out "));
    free(md);
    snprintf(png, sizeof png, "%s/learning-local.png", study_dir());
    snprintf(svg, sizeof svg, "%s/learning-local.svg", study_dir());
    CU_ASSERT_TRUE(exists(png) || exists(svg));
    snprintf(png, sizeof png, "%s/accuracy-local.png", study_dir());
    snprintf(svg, sizeof svg, "%s/accuracy-local.svg", study_dir());
    CU_ASSERT_TRUE(exists(png) || exists(svg));

    /* Run again: every job is stored, nothing is retrained. */
    char cell[600];
    snprintf(cell, sizeof cell, "%s/jobs/local.lstm.seed-1.json", study_dir());
    char *before = read_all(cell, NULL);
    r = run_study("40");
    EXPECT(r.code == 0 && contains(r.err, "2 cells (2 already stored), 0 jobs to run"), r);
    run_free(&r);
    char *after = read_all(cell, NULL);
    CU_ASSERT_TRUE(before && after && strcmp(before, after) == 0);
    free(after);
    /* The rewritten report keeps the wall time of the run that ran the jobs. */
    snprintf(path, sizeof path, "%s/study.json", study_dir());
    root = json_object_from_file(path);
    CU_ASSERT_PTR_NOT_NULL_FATAL(root);
    CU_ASSERT_DOUBLE_EQUAL(json_object_get_double(get(root, "wall_seconds")), wall, 1e-9);
    json_object_put(root);

    /* A missing cell (as after a kill) is the only job run again (here one job at a
     * time, with every thread: the options file does not hold --jobs or --threads). */
    snprintf(path, sizeof path, "%s/jobs/local.conv.seed-1.json", study_dir());
    CU_ASSERT_EQUAL(unlink(path), 0);
    r = run_study_serial("40");
    EXPECT(r.code == 0 && contains(r.err, "(1 already stored), 1 jobs to run") && contains(r.err, "local.conv.seed-1"),
           r);
    EXPECT(!contains(r.err, "lr probe"), r);
    run_free(&r);
    /* The report's header is the command of this run, not of the first one. */
    snprintf(path, sizeof path, "%s/study.md", study_dir());
    md = read_all(path, NULL);
    CU_ASSERT_PTR_NOT_NULL_FATAL(md);
    CU_ASSERT_TRUE(contains(md, "--eval-examples 16 --jobs 1 --out "));
    CU_ASSERT_FALSE(contains(md, "--threads 1 --out "));
    free(md);
    CU_ASSERT_TRUE(exists(path));
    after = read_all(cell, NULL);
    CU_ASSERT_TRUE(before && after && strcmp(before, after) == 0);
    free(before);
    free(after);

    /* The report is decided by the stored numbers: with the LSTM's cell at 30 % and the
     * conv's at chance, the LSTM leads but has not learnt the task (chance 12.5 %: half-way
     * is 56.25 %); at 95 % it is the best fit, which disagrees with the source's table. */
    set_cell_accuracy("local.conv.seed-1", 0.125);
    set_cell_accuracy("local.lstm.seed-1", 0.30);
    r = run_study("40");
    EXPECT(r.code == 0 && contains(r.err, "0 jobs to run"), r);
    run_free(&r);
    snprintf(path, sizeof path, "%s/study.md", study_dir());
    md = read_all(path, NULL);
    CU_ASSERT_PTR_NOT_NULL_FATAL(md);
    CU_ASSERT_TRUE(contains(md, "**Best fit, measured:** lstm (LSTM), 30.0% at 1024. No method has learnt the task"));
    CU_ASSERT_TRUE(contains(md, "| local (leads, not learnt) |"));
    CU_ASSERT_TRUE(contains(md, "**Decided: 0 of the 1 tasks with results** (a task is decided"));
    CU_ASSERT_FALSE(contains(md, "disagrees"));
    free(md);
    set_cell_accuracy("local.lstm.seed-1", 0.95);
    r = run_study("40");
    EXPECT(r.code == 0, r);
    run_free(&r);
    md = read_all(path, NULL);
    CU_ASSERT_PTR_NOT_NULL_FATAL(md);
    CU_ASSERT_TRUE(contains(md, "**Best fit, measured:** lstm (LSTM), 95.0% at 1024. **This disagrees with the "
                                "source's table**, which names \"1D convolution\""));
    CU_ASSERT_TRUE(contains(md, "| local |"));
    CU_ASSERT_TRUE(contains(md, "**Decided: 1 of the 1 tasks with results** (local)"));
    free(md);
    snprintf(path, sizeof path, "%s/study.json", study_dir());
    root = json_object_from_file(path);
    CU_ASSERT_PTR_NOT_NULL_FATAL(root);
    task = json_object_array_get_idx(get(root, "tasks"), 0);
    CU_ASSERT_STRING_EQUAL(json_object_get_string(get(task, "best_fit_measured")), "lstm");
    CU_ASSERT_TRUE(json_object_get_boolean(get(task, "best_fit_learnt")));
    json_object_put(root);

    /* Other budgets would mix results: refused, nothing changed. */
    r = run_study("41");
    EXPECT(r.code == 1 && one_error_line(&r, "study") && contains(r.err, "other options"), r);
    run_free(&r);
}

static void test_study_usage_errors(void)
{
    const char *bad_task[] = {"study", "--tasks", "local,nope", "--out", path_in("never"), NULL};
    run_result r = run(bad_task);
    EXPECT(r.code == 2 && one_error_line(&r, "study") && contains(r.err, "'nope'"), r);
    run_free(&r);
    CU_ASSERT_FALSE(exists(path_in("never")));
    const char *twice[] = {"study", "--tasks", "local,modsum,local", "--out", path_in("never"), NULL};
    r = run(twice);
    EXPECT(r.code == 2 && one_error_line(&r, "study") && contains(r.err, "--tasks: 'local' is listed twice"), r);
    run_free(&r);
    CU_ASSERT_FALSE(exists(path_in("never")));
    const char *no_out[] = {"study", "--quick", NULL};
    r = run(no_out);
    EXPECT(r.code == 2 && contains(r.err, "--out"), r);
    run_free(&r);
    const char *bad_seeds[] = {"study", "--seeds", "0", "--out", path_in("never"), NULL};
    r = run(bad_seeds);
    EXPECT(r.code == 2 && contains(r.err, "--seeds"), r);
    run_free(&r);
    const char *bad_jobs[] = {"study", "--jobs", "0", "--out", path_in("never"), NULL};
    r = run(bad_jobs);
    EXPECT(r.code == 2 && one_error_line(&r, "study") && contains(r.err, "--jobs"), r);
    run_free(&r);
    CU_ASSERT_FALSE(exists(path_in("never")));
    /* A study with no cell (ssmax runs on spike16 only) is a usage error, before any folder. */
    const char *empty[] = {"study", "--tasks", "modsum", "--methods", "ssmax", "--out", path_in("never"), NULL};
    r = run(empty);
    EXPECT(r.code == 2 && one_error_line(&r, "study") && contains(r.err, "no cell") && contains(r.err, "spike16"), r);
    run_free(&r);
    CU_ASSERT_FALSE(exists(path_in("never")));
}

/* The val rows of a run's metrics.csv: steps and accuracies (at most `max`); their count. */
static int val_rows(const char *metrics, int64_t *step, double *accuracy, int max)
{
    char *text = read_all(metrics, NULL);
    int n = 0;
    for (char *line = text ? strtok(text, "\n") : NULL; line && n < max; line = strtok(NULL, "\n")) {
        long long st;
        double loss, acc;
        if (sscanf(line, "%lld,val,%lf,%lf,", &st, &loss, &acc) == 3) {
            step[n] = st;
            accuracy[n++] = acc;
        }
    }
    free(text);
    return n;
}

/* Train to solve: the LSTM on modsum reaches the task's criterion (exact on the validation
 * split) within a few hundred steps, so its cell stops there, long before its budget of
 * 3000 steps (a budget in steps: the same on any machine, however slow the build), and
 * records when: the time to learn is the first validation of the run's own metrics.csv
 * that meets the criterion, at a multiple of the task's validation interval, and the
 * curve is the run's validations. */
static void test_study_cell_stops_when_solved(void)
{
    char dir[512];
    snprintf(dir, sizeof dir, "%s", path_in("study-solve"));
    const char *args[] = {"study", "--quick", "--tasks", "modsum", "--methods", "lstm", "--steps", "3000",
                          "--eval-examples", "16", "--threads", "1", "--out", dir, NULL};
    run_result r = run(args);
    EXPECT(r.code == 0, r);
    run_free(&r);
    char path[600];
    snprintf(path, sizeof path, "%s/jobs/modsum.lstm.seed-1.json", dir);
    json_object *cell = json_object_from_file(path);
    CU_ASSERT_PTR_NOT_NULL_FATAL(cell);
    CU_ASSERT_TRUE(json_object_get_boolean(get(cell, "solved")));
    CU_ASSERT_STRING_EQUAL(json_object_get_string(get(cell, "criterion")), "validation accuracy >= 100 %");
    int64_t steps = json_object_get_int64(get(cell, "steps"));
    double spent = json_object_get_double(get(cell, "train_seconds"));
    CU_ASSERT_TRUE(steps > 0 && steps % 100 == 0);
    CU_ASSERT_TRUE(steps < 3000); /* stopped at the criterion, not by the budget */
    CU_ASSERT_DOUBLE_EQUAL(json_object_get_double(get(cell, "val_accuracy")), 1.0, 1e-12);
    /* The run's own validations: the last one meets the criterion, none before it does. */
    int64_t val_step[64];
    double val_acc[64];
    snprintf(path, sizeof path, "%s/runs/modsum.lstm.seed-1/metrics.csv", dir);
    int n_val = val_rows(path, val_step, val_acc, 64);
    CU_ASSERT_TRUE_FATAL(n_val >= 1 && n_val < 64);
    CU_ASSERT_EQUAL(val_step[n_val - 1], steps);
    CU_ASSERT_DOUBLE_EQUAL(val_acc[n_val - 1], 1.0, 1e-12);
    for (int i = 0; i + 1 < n_val; i++)
        CU_ASSERT_TRUE(val_acc[i] < 1.0);
    json_object *when = get(cell, "time_to_learn");
    CU_ASSERT_PTR_NOT_NULL_FATAL(when);
    CU_ASSERT_EQUAL(json_object_get_int64(get(when, "step")), steps);
    CU_ASSERT_EQUAL(json_object_get_int64(get(when, "examples")), steps * 64); /* batch 64 */
    CU_ASSERT_DOUBLE_EQUAL(json_object_get_double(get(when, "cpu_seconds")), spent, 1e-9);
    /* 50 % and 90 % of the way from chance (20 %) come no later. */
    json_object *half = get(cell, "time_to_50"), *ninety = get(cell, "time_to_90");
    CU_ASSERT_TRUE_FATAL(half && ninety);
    CU_ASSERT_TRUE(json_object_get_int64(get(half, "step")) <= json_object_get_int64(get(ninety, "step")));
    CU_ASSERT_TRUE(json_object_get_int64(get(ninety, "step")) <= steps);
    /* the first validation at least 90 % of the way to perfect (0.2 + 0.9 x 0.8 = 0.92) */
    int first90 = 0;
    while (first90 < n_val && val_acc[first90] < 0.92 - 1e-9)
        first90++;
    CU_ASSERT_TRUE(first90 < n_val && json_object_get_int64(get(ninety, "step")) == val_step[first90]);
    json_object *curve = get(cell, "curve");
    CU_ASSERT_EQUAL_FATAL(json_object_array_length(curve), (size_t)n_val);
    for (size_t i = 0; i < json_object_array_length(curve); i++) {
        json_object *pt = json_object_array_get_idx(curve, i);
        CU_ASSERT_EQUAL(json_object_get_int64(get(pt, "step")), (int64_t)(100 * (i + 1)));
        CU_ASSERT_EQUAL(json_object_get_int64(get(pt, "step")), val_step[i]);
        CU_ASSERT_DOUBLE_EQUAL(json_object_get_double(get(pt, "score")), val_acc[i], 1e-6);
    }
    json_object_put(cell);
    snprintf(path, sizeof path, "%s/study.md", dir);
    char *md = read_all(path, NULL);
    CU_ASSERT_PTR_NOT_NULL_FATAL(md);
    CU_ASSERT_TRUE(contains(md, "| 1/1 |"));
    CU_ASSERT_TRUE(contains(md, "| score |")); /* the paper's score beside the per-length accuracies */
    free(md);
}

/* SIGTERM to the study alone (not its process group) stops its running jobs at once
 * (a job that is training saves its checkpoint), exits 143 and leaves no job running. A second study command on a folder in use is refused. */
static void test_study_sigterm_and_lock(void)
{
    char dir[512];
    snprintf(dir, sizeof dir, "%s", path_in("study-term"));
    const char *args[] = {LB_LOOKBACK_BIN, "study", "--quick", "--tasks", "local", "--methods", "lstm,conv",
                          "--budget", "60", "--eval-examples", "8", "--jobs", "2", "--threads", "1", "--out", dir,
                          NULL};
    pid_t pid = start_program(args);
    CU_ASSERT_TRUE_FATAL(pid > 0);
    /* The study announces each cell it starts (on stderr): the cells of 60 CPU-s are running,
     * far from their end. */
    int running = wait_for_text(path_in("stderr.txt"), "[cell 0/2] cell local.", 60);
    if (!running)
        kill(pid, SIGKILL);
    CU_ASSERT_TRUE_FATAL(running);
    kill(pid, SIGTERM);
    run_result r = finish_program(pid, 60);
    EXPECT(r.code == 143 && contains(r.err, "interrupted") && contains(r.err, "run the same command again"), r);
    run_free(&r);
    CU_ASSERT_EQUAL(kill(-pid, 0), -1); /* no job of it is left running */
    /* Held by another process: refused, naming the folder. */
    char lock[600];
    snprintf(lock, sizeof lock, "%s/.lock", dir);
    int fd = open(lock, O_RDWR | O_CREAT, 0644);
    CU_ASSERT_TRUE_FATAL(fd >= 0 && flock(fd, LOCK_EX) == 0);
    r = run(args + 1);
    EXPECT(r.code == 1 && one_error_line(&r, "study") && contains(r.err, "in use by a running lookback process"), r);
    run_free(&r);
    close(fd);
}

static int remove_entry(const char *path, const struct stat *sb, int flag, struct FTW *ftw)
{
    (void)sb;
    (void)flag;
    (void)ftw;
    return remove(path);
}

int main(void)
{
    snprintf(work_dir, sizeof work_dir, "/tmp/lookback_test_cli_study_%d", (int)getpid());
    mkdir(work_dir, 0777);
    const lb_test_case cases[] = {
        {"study: outputs, values, resumption, options check", test_study_outputs_and_resume},
        {"study: usage errors name the option", test_study_usage_errors},
        {"study: a cell stops when solved and records when", test_study_cell_stops_when_solved},
        {"study: SIGTERM stops the jobs (143); a folder in use is refused",
         test_study_sigterm_and_lock},
        {NULL, NULL},
    };
    int rc = lb_test_main("cli_study", cases);
    nftw(work_dir, remove_entry, 16, FTW_DEPTH | FTW_PHYS);
    return rc;
}

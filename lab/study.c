/* lookback study: the source document's table of alternatives, measured (lab/study.h).
 *
 * Layout of the study folder DIR:
 *   study-options.json          the options that decide the results
 *   data/<task>-train.h5, data/<task>-train-mixed.h5 (spike16), data/<task>-test-<T>.h5
 *   jobs/<job>.json             one result per finished job (the resumable state)
 *   runs/<job>/                 each job's run folder (config.json, metrics.csv, checkpoint.h5)
 *   study.json, study.md, accuracy-<task>.png, cost-<task>.png
 */
#include "lab/study.h"
#include "layers/family.h"

#include <errno.h>
#include <ftw.h>
#include <json-c/json.h>
#include <math.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <unistd.h>

#include "data/output.h"
#include "data/tasks.h"
#include "lab/files.h"
#include "lab/plot.h"
#include "lab/recipes.h"
#include "lab/run.h"
#include "layers/conv.h"
#include "layers/stream.h"
#include "tensor/clock.h"
#include "train/distributed.h"

enum { MAX_TESTS = 4, MAX_CURVE = 512 };

/* ---- tasks ---- */

typedef struct study_task {
    const char *name;
    const char *what;      /* one line: what the task tests */
    const char *text_pick; /* the row of the source's table whose "best fit" names this kind of task */
    lb_task_options train; /* the training file (n_test 0) */
    int n_tests;
    int64_t test_len[MAX_TESTS];
    int copy;              /* copy memory: scored by the loss against the memoryless baseline */
    int score_from;        /* variable-length tasks: the first test length beyond training (the
                              paper's score is the mean accuracy from there on); 0 = none */
    /* Train to solve: a cell stops at the first validation reaching the criterion (accuracy
     * >= SOLVED_ACCURACY; copy: loss <= SOLVED_COPY x the memoryless loss) or at its budget. */
    /* CPU seconds per cell (default study, --quick): docs/study.md's budget table gives
     * the measured times to learn they are sized from. */
    double budget, quick_budget;
    int64_t eval_every;          /* steps between validations (the learning curve) */
    int64_t val_examples;        /* validation sequences per validation */
    double solved_accuracy;      /* the accuracy criterion when not SOLVED_ACCURACY (0) */
} study_task;

/* Solved: >= 99 % validation accuracy (Zoology's early stop), or for copy memory a
 * validation loss at most 5 % of the memoryless loss (95 % of the way from the memoryless
 * baseline to a perfect copy). */
#define SOLVED_ACCURACY 0.99
#define SOLVED_COPY 0.05

static double solved_accuracy(const study_task *t) { return t->solved_accuracy > 0 ? t->solved_accuracy : SOLVED_ACCURACY; }

/* ---- methods ---- */

static const char *const method_rows[LB_RECIPE_M_COUNT] = {
    "full self-attention", "local attention", "LSTM", "dilated causal conv (TCN)",
    "full attention + scalable softmax", "full attention + mixed training lengths",
    "full attention + log-n logits, mixed lengths", "linear attention",
    "selective state space (Mamba)"};
/* The row of the source's table each method belongs to. */
static const char *const method_text_row[LB_RECIPE_M_COUNT] = {
    "Full self-attention", "Local or sparse attention", "RNN or LSTM", "1D convolution", "Full self-attention",
    "Full self-attention", "Full self-attention", "RNN or LSTM"};

/* Whether method m runs on task t: when the recipe table has a row for them (ssmax, mixed
 * and logn, length-robustness variants of the transformer, have rows on spike16 only). */
static int method_applies(lb_recipe_method m, lb_recipe_task t);

typedef struct job {
    lb_study_phase phase;
    lb_recipe_task task;
    lb_recipe_method method;
    int lr_index; /* LB_STUDY_LR */
    int seed;     /* LB_STUDY_CELL */
    char name[96];
} job;

struct lb_study {
    char out[3800];
    int quick, seeds, zoology, threads, parallel;
    double budget; /* --budget: every cell's budget when > 0, else the task's own */
    int64_t steps; /* --steps: every cell's steps at most when > 0 (alone: no CPU budget) */
    int64_t eval_examples;
    int task_on[LB_RECIPE_T_COUNT], method_on[LB_RECIPE_M_COUNT];
    study_task tasks[LB_RECIPE_T_COUNT];
    char command[1024]; /* the command line that made this run (the report's header) */
    job *jobs[LB_STUDY_PHASES];
    int n_jobs[LB_STUDY_PHASES];
};

/* ---- small helpers ---- */

static char *study_path(const lb_study *s, char *buf, size_t size, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
static char *study_path(const lb_study *s, char *buf, size_t size, const char *fmt, ...)
{
    char rel[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(rel, sizeof rel, fmt, ap);
    va_end(ap);
    return lb_files_join(buf, size, s->out, rel);
}

/* When the running job started (lb_study_run_job), for its "job_seconds". */
static double job_start;

/* Writes root (the caller keeps its reference) through lb_files_write_json. */
static lb_status write_json(json_object *root, const char *path)
{
    return lb_files_write_json(json_object_get(root), path, "study file");
}

static double json_num(json_object *o, const char *key)
{
    json_object *v;
    return o && json_object_object_get_ex(o, key, &v) && v ? json_object_get_double(v) : NAN;
}

static json_object *json_real(double v) { return isfinite(v) ? json_object_new_double(v) : NULL; }

/* ---- the plan ---- */

static void define_tasks(lb_study *s)
{
    const int64_t n_train = 20000, n_val = s->quick ? 256 : 500;
    study_task *t = s->tasks;

    t[LB_RECIPE_T_SPIKE16] = (study_task){"spike16", "16 sensors' readings held at once; the alarm asks for one (capacity, "
                                           "unpredictable long-range lookup), tested at 4x and 16x the training length",
                                "Full self-attention", {0}, 3, {256, 1024, 4096}, 0, 0, 120, 60,
                                200, 256, 0};

    t[LB_RECIPE_T_RECALL] = (study_task){"recall", "multi-query associative recall (MQAR, Arora et al. 2023): 8 key-value pairs, "
                                         "every key queried",
                               "Full self-attention", {0}, 2, {128, 512}, 0, 0, 150, 90,
                               50, 256, 0};
    if (s->zoology) { /* Zoology's scale: vocabulary ~8,192, T 512, 64 pairs */
        t[LB_RECIPE_T_RECALL].what = "multi-query associative recall at Zoology's scale (Arora et al. 2023): vocabulary 8,192, "
                           "T 512, 64 pairs";
        t[LB_RECIPE_T_RECALL].n_tests = 1;
        t[LB_RECIPE_T_RECALL].test_len[0] = 512;
    }

    t[LB_RECIPE_T_LOCAL] = (study_task){"local", "the answer is the sum of the last 3 symbols mod 8 (a local pattern)",
                              "1D convolution", {0}, 3, {64, 256, 1024}, 0, 0, 60, 30,
                              100, 256, 0};

    t[LB_RECIPE_T_PARITY] = (study_task){"parity", "is the count of symbol 1 odd? (sequential state, Deletang et al. 2023); "
                                         "trained on lengths 2..40, tested at 64 to 1,024",
                               "RNN or LSTM", {0}, 3, {64, 256, 1024}, 0, 1, 60, 40,
                               100, 256, 0};
    t[LB_RECIPE_T_PARITY].score_from = 0; /* every test length is beyond 40 */

    int64_t blank = s->quick ? 200 : 1000;
    t[LB_RECIPE_T_COPY] = (study_task){"copy", NULL, "Full self-attention", {0}, 1, {blank + 20}, 1, 0, 300, 60,
                             50, 64, 0};
    t[LB_RECIPE_T_COPY].what = s->quick ? "copy memory as Bai et al. 2018, T = 200 (every position scored; 10 symbols to copy)"
                              : "copy memory as Bai et al. 2018, T = 1,000 (every position scored; 10 symbols to copy)";

    t[LB_RECIPE_T_MODSUM] = (study_task){"modsum", "the sum of every symbol mod 5, asked at the end (sequential state with 5 "
                                         "values, Deletang et al. 2023); trained on lengths 2..16, tested up to 16x longer",
                               "RNN or LSTM", {0}, 3, {16, 64, 256}, 0, 1, 30, 15,
                               100, 256, 0};
    /* Exact on the validation split: the LSTM generalises beyond 16 once it is exact at the
     * training lengths, not when stopped at 99 % (docs/study.md, the recipes' calibration). */
    t[LB_RECIPE_T_MODSUM].solved_accuracy = 1.0;

    for (int k = 0; k < LB_RECIPE_T_COUNT; k++) {
        lb_recipe_task_data((lb_recipe_task)k, s->quick, s->zoology, &t[k].train);
        t[k].train.n_train = n_train;
        t[k].train.n_val = n_val;
        t[k].train.n_test = 0;
        t[k].train.seed = 100 + (uint64_t)k;
    }
}

/* ---- the recipes: lab/recipes.c ---- */

static int method_applies(lb_recipe_method m, lb_recipe_task t) { return lb_recipe_of(t, m) != NULL; }

/* The table's own check: at most one row per (task, method), and every task has a row for
 * each of the four methods of the source's table; every row has a width, a batch, a first
 * learning rate and a source. LB_ERR_STATE naming the row otherwise. */
static lb_status check_recipes(void)
{
    int count[LB_RECIPE_T_COUNT][LB_RECIPE_M_COUNT] = {{0}};
    for (int i = 0; i < lb_recipes_count; i++) {
        const lb_recipe *r = &lb_recipes[i];
        if (++count[r->task][r->method] > 1)
            return lb_error(LB_ERR_STATE, "study: two recipes for %s on task %d", lb_recipe_method_names[r->method], (int)r->task);
        if (r->width < 1 || r->batch < 1 || !(r->lrs[0] > 0) || !r->source || !r->source[0] ||
            (r->method == LB_RECIPE_M_CONV && r->kernel < 2) || (r->method == LB_RECIPE_M_LOCAL && r->window < 1))
            return lb_error(LB_ERR_STATE, "study: the recipe of %s on task %d is incomplete", lb_recipe_method_names[r->method],
                            (int)r->task);
    }
    for (int t = 0; t < LB_RECIPE_T_COUNT; t++)
        for (int m = LB_RECIPE_M_TRANSFORMER; m <= LB_RECIPE_M_CONV; m++)
            if (count[t][m] != 1)
                return lb_error(LB_ERR_STATE, "study: no recipe for %s on task %d", lb_recipe_method_names[m], t);
    return LB_OK;
}

/* Learning-rate candidates of a row under this study (--quick: the default alone). */
static int recipe_lrs(const lb_study *s, const lb_recipe *r)
{
    int n = 0;
    while (n < LB_RECIPE_MAX_LRS && r->lrs[n] > 0)
        n++;
    return s->quick && n > 1 ? 1 : n;
}

static lb_status parse_list(const char *list, const char *const *names, int count, int *on, const char *what)
{
    if (!list) {
        for (int i = 0; i < count; i++)
            on[i] = 1;
        return LB_OK;
    }
    char buf[512];
    snprintf(buf, sizeof buf, "%s", list);
    for (char *tok = buf, *next; tok; tok = next) {
        next = strchr(tok, ',');
        if (next)
            *next++ = '\0';
        int found = -1;
        for (int i = 0; i < count; i++)
            if (strcmp(tok, names[i]) == 0)
                found = i;
        if (found < 0) {
            char known[256] = "";
            for (int i = 0; i < count; i++)
                snprintf(known + strlen(known), sizeof known - strlen(known), "%s%s", i ? ", " : "", names[i]);
            return lb_error(LB_ERR_VALUE, "--%s: unknown %s '%s' (known: %s)", what,
                            strcmp(what, "tasks") == 0 ? "task" : "method", tok, known);
        }
        if (on[found])
            return lb_error(LB_ERR_VALUE, "--%s: '%s' is listed twice (each %s runs once; list it once)", what, tok,
                            strcmp(what, "tasks") == 0 ? "task" : "method");
        on[found] = 1;
    }
    return LB_OK;
}

static void lr_text(double lr, char *buf, size_t size) { snprintf(buf, size, "%g", lr); }

static lb_status add_job(lb_study *s, job j)
{
    int *n = &s->n_jobs[j.phase];
    job *grown = realloc(s->jobs[j.phase], (size_t)(*n + 1) * sizeof *grown);
    if (!grown)
        return lb_error(LB_ERR_MEMORY, "study: out of memory");
    s->jobs[j.phase] = grown;
    char lr[32];
    if (j.phase == LB_STUDY_DATA)
        snprintf(j.name, sizeof j.name, "%s.data", s->tasks[j.task].name);
    else if (j.phase == LB_STUDY_LR) {
        lr_text(lb_recipe_of(j.task, j.method)->lrs[j.lr_index], lr, sizeof lr);
        snprintf(j.name, sizeof j.name, "%s.%s.lr-%s", s->tasks[j.task].name, lb_recipe_method_names[j.method], lr);
    } else
        snprintf(j.name, sizeof j.name, "%s.%s.seed-%d", s->tasks[j.task].name, lb_recipe_method_names[j.method], j.seed);
    grown[(*n)++] = j;
    return LB_OK;
}

static lb_status plan_jobs(lb_study *s)
{
    lb_status st = LB_OK;
    for (int t = 0; t < LB_RECIPE_T_COUNT && st == LB_OK; t++) {
        if (!s->task_on[t])
            continue;
        int cells = 0;
        for (int m = 0; m < LB_RECIPE_M_COUNT; m++)
            cells += s->method_on[m] && method_applies((lb_recipe_method)m, (lb_recipe_task)t);
        if (!cells)
            continue;
        st = add_job(s, (job){LB_STUDY_DATA, (lb_recipe_task)t, 0, 0, 0, ""});
        for (int m = 0; m < LB_RECIPE_M_COUNT && st == LB_OK; m++) {
            if (!s->method_on[m] || !method_applies((lb_recipe_method)m, (lb_recipe_task)t))
                continue;
            const lb_recipe *row = lb_recipe_of((lb_recipe_task)t, (lb_recipe_method)m);
            if (!row)
                return lb_error(LB_ERR_STATE, "study: no recipe for %s on %s", lb_recipe_method_names[m], s->tasks[t].name);
            int n_lrs = recipe_lrs(s, row);
            for (int i = 0; n_lrs > 1 && i < n_lrs && st == LB_OK; i++) /* one candidate: no probe */
                st = add_job(s, (job){LB_STUDY_LR, (lb_recipe_task)t, (lb_recipe_method)m, i, 0, ""});
            for (int seed = 1; seed <= s->seeds && st == LB_OK; seed++)
                st = add_job(s, (job){LB_STUDY_CELL, (lb_recipe_task)t, (lb_recipe_method)m, 0, seed, ""});
        }
    }
    return st;
}

/* The options that decide the results; a folder made with others is refused. */
static lb_status check_options_file(const lb_study *s)
{
    json_object *o = json_object_new_object();
    json_object_object_add(o, "quick", json_object_new_boolean(s->quick));
    json_object_object_add(o, "zoology", json_object_new_boolean(s->zoology));
    json_object_object_add(o, "budget_seconds", json_object_new_double(s->budget));
    json_object_object_add(o, "eval_examples", json_object_new_int64(s->eval_examples));
    if (s->steps > 0) /* only when given: folders made before the option stay valid */
        json_object_object_add(o, "steps", json_object_new_int64(s->steps));
    char path[4200];
    study_path(s, path, sizeof path, "study-options.json");
    lb_status st = LB_OK;
    if (lb_files_exists(path)) {
        json_object *old = json_object_from_file(path);
        if (!old || !json_object_equal(old, o))
            st = lb_error(LB_ERR_STATE,
                          "%s holds a study made with other options (%s); use another --out, or the same --quick, "
                          "--budget, --steps, --eval-examples and --recall-scale",
                          s->out, old ? json_object_to_json_string_ext(old, JSON_C_TO_STRING_PLAIN) : "unreadable");
        json_object_put(old);
    } else {
        st = write_json(o, path);
    }
    json_object_put(o);
    return st;
}

lb_study *lb_study_new(const lb_study_options *opt)
{
    if (!opt || !opt->out || !opt->out[0]) {
        lb_error(LB_ERR_VALUE, "study: --out DIR is required");
        return NULL;
    }
    lb_study *s = calloc(1, sizeof *s);
    if (!s) {
        lb_error(LB_ERR_MEMORY, "study: out of memory");
        return NULL;
    }
    if (strlen(opt->out) >= sizeof s->out - 200) {
        lb_error(LB_ERR_VALUE, "--out: the path is too long");
        free(s);
        return NULL;
    }
    snprintf(s->out, sizeof s->out, "%s", opt->out);
    s->quick = opt->quick;
    s->zoology = opt->zoology;
    s->threads = opt->threads;
    s->parallel = opt->jobs > 0 ? opt->jobs : 1;
    s->seeds = opt->seeds > 0 ? opt->seeds : (opt->quick ? 1 : 3);
    s->budget = opt->budget > 0 ? opt->budget : 0;
    s->steps = opt->steps > 0 ? opt->steps : 0;
    s->eval_examples = opt->eval_examples > 0 ? opt->eval_examples : (opt->quick ? 100 : 200);
    snprintf(s->command, sizeof s->command, "%s", opt->command && opt->command[0] ? opt->command : "lookback study");
    define_tasks(s);
    lb_status st = check_recipes();
    if (st == LB_OK && s->seeds > LB_STUDY_MAX_SEEDS)
        st = lb_error(LB_ERR_VALUE, "--seeds %d: at most %d", s->seeds, LB_STUDY_MAX_SEEDS);
    if (st == LB_OK)
        st = parse_list(opt->tasks, lb_recipe_task_names, LB_RECIPE_T_COUNT, s->task_on, "tasks");
    if (st == LB_OK)
        st = parse_list(opt->methods, lb_recipe_method_names, LB_RECIPE_M_COUNT, s->method_on, "methods");
    if (st == LB_OK)
        st = plan_jobs(s);
    if (st == LB_OK && s->n_jobs[LB_STUDY_CELL] == 0)
        st = lb_error(LB_ERR_VALUE, "--tasks %s with --methods %s make no cell: %s", opt->tasks ? opt->tasks : "(all)",
                      opt->methods ? opt->methods : "(all)",
                      "ssmax, mixed and logn run on spike16 only; add spike16 to --tasks or another method");
    char path[4200];
    if (st == LB_OK)
        st = lb_files_mkdir(s->out);
    if (st == LB_OK)
        st = lb_files_mkdir(study_path(s, path, sizeof path, "jobs"));
    if (st == LB_OK)
        st = lb_files_mkdir(study_path(s, path, sizeof path, "data"));
    if (st == LB_OK)
        st = check_options_file(s);
    if (st != LB_OK) {
        lb_study_free(s);
        return NULL;
    }
    return s;
}

void lb_study_free(lb_study *s)
{
    if (!s)
        return;
    for (int p = 0; p < LB_STUDY_PHASES; p++)
        free(s->jobs[p]);
    free(s);
}

int lb_study_jobs(const lb_study *s, lb_study_phase phase) { return s->n_jobs[phase]; }
const char *lb_study_job_name(const lb_study *s, lb_study_phase phase, int index) { return s->jobs[phase][index].name; }

static char *job_result_path(const lb_study *s, const job *j, char *buf, size_t size)
{
    return study_path(s, buf, size, "jobs/%s.json", j->name);
}

static char *data_path(const lb_study *s, lb_recipe_task t, const char *kind, int64_t len, char *buf, size_t size)
{
    if (len > 0)
        return study_path(s, buf, size, "data/%s-%s-%lld.h5", s->tasks[t].name, kind, (long long)len);
    return study_path(s, buf, size, "data/%s-%s.h5", s->tasks[t].name, kind);
}

int lb_study_job_done(const lb_study *s, lb_study_phase phase, int index)
{
    char path[4200];
    return lb_files_exists(job_result_path(s, &s->jobs[phase][index], path, sizeof path));
}

/* Training seconds of a probe (LB_STUDY_LR: a quarter of the cell's) or a cell of task t:
 * --budget when given, else the task's own (sized from its fastest learner). */
static double task_budget(const lb_study *s, lb_recipe_task t, lb_study_phase phase)
{
    double cell = s->budget > 0 ? s->budget : s->quick ? s->tasks[t].quick_budget : s->tasks[t].budget;
    return phase == LB_STUDY_DATA ? 0 : phase == LB_STUDY_LR ? cell / 4 : cell;
}

/* Optimizer steps of a probe (a quarter of the cell's, at least 1) or a cell at most:
 * --steps, 0 without it. */
static int64_t task_steps(const lb_study *s, lb_study_phase phase)
{
    if (s->steps <= 0 || phase == LB_STUDY_DATA)
        return 0;
    return phase == LB_STUDY_LR ? (s->steps / 4 > 0 ? s->steps / 4 : 1) : s->steps;
}

/* --steps without --budget: a cell's budget is its steps only. */
static int steps_only(const lb_study *s) { return s->steps > 0 && !(s->budget > 0); }

/* A cell's or probe's budget in words: "60 CPU-s", "3000 steps" or "60 CPU-s or 3000 steps". */
static void budget_text(const lb_study *s, lb_recipe_task t, lb_study_phase phase, char *buf, size_t size)
{
    if (steps_only(s))
        snprintf(buf, size, "%lld steps", (long long)task_steps(s, phase));
    else if (s->steps > 0)
        snprintf(buf, size, "%.3g CPU-s or %lld steps", task_budget(s, t, phase), (long long)task_steps(s, phase));
    else
        snprintf(buf, size, "%.3g CPU-s", task_budget(s, t, phase));
}

double lb_study_job_budget(const lb_study *s, lb_study_phase phase, int index)
{
    return steps_only(s) ? 0 : task_budget(s, s->jobs[phase][index].task, phase);
}

/* ---- data ---- */

/* Test file i of task t: the training options at another length, test split only. */
static lb_task_options test_options(const study_task *task, int i)
{
    lb_task_options o = task->train;
    o.seq_len = task->test_len[i];
    o.variable_length = 0;
    o.min_length = LB_OPTION_AUTO;
    if (lb_task_option_applies(o.task, "max_distance")) {
        o.min_distance = LB_OPTION_AUTO;
        o.max_distance = LB_OPTION_AUTO;
    }
    o.n_train = o.n_val = 0;
    o.seed = task->train.seed * 100 + 1 + (uint64_t)i;
    return o;
}

/* The spike16 training file with lengths drawn from [64, 256] (the clue within the
 * shortest length), for the "mixed" method. */
static lb_task_options mixed_options(const study_task *task)
{
    lb_task_options o = task->train;
    lb_recipe_mixed_lengths(&o);
    o.seed = task->train.seed + 1000;
    return o;
}

static lb_status ensure_file(const lb_task_options *o, const char *path)
{
    if (lb_files_exists(path))
        return LB_OK;
    return lb_task_generate(o, path, NULL, NULL);
}

static lb_status run_data_job(lb_study *s, const job *j)
{
    const study_task *task = &s->tasks[j->task];
    char path[4200];
    lb_status st = ensure_file(&task->train, data_path(s, j->task, "train", 0, path, sizeof path));
    if (st == LB_OK && j->task == LB_RECIPE_T_SPIKE16) {
        lb_task_options mixed = mixed_options(task);
        st = ensure_file(&mixed, data_path(s, j->task, "train-mixed", 0, path, sizeof path));
    }
    for (int i = 0; st == LB_OK && i < task->n_tests; i++) {
        lb_task_options o = test_options(task, i);
        o.n_test = s->eval_examples;
        st = ensure_file(&o, data_path(s, j->task, "test", task->test_len[i], path, sizeof path));
    }
    if (st != LB_OK)
        return st;
    json_object *r = json_object_new_object();
    json_object_object_add(r, "task", json_object_new_string(task->name));
    json_object_object_add(r, "job_seconds", json_object_new_double(lb_clock_wall() - job_start));
    st = write_json(r, job_result_path(s, j, path, sizeof path));
    json_object_put(r);
    return st;
}

/* ---- recipes ---- */

/* The model and training configuration of (task, method) from its recipe row, and one
 * line saying what it is. */
static void recipe(const lb_study *s, lb_recipe_task t, lb_recipe_method m, lb_run_config *rc, char *text, size_t size)
{
    const study_task *task = &s->tasks[t];
    const lb_recipe *row = lb_recipe_of(t, m);
    lb_run_config_default(rc, lb_recipe_method_kind(m));
    data_path(s, t, row->mixed ? "train-mixed" : "train", 0, rc->data, sizeof rc->data);
    lb_recipe_model(row, task->train.seq_len, &rc->model, text, size);
    size_t used = strlen(text);
    snprintf(text + used, size - used, "; batch %d, weight decay %g", row->batch, row->weight_decay);
    lb_train_config *tc = &rc->train;
    tc->steps = 100000000;
    tc->batch_size = row->batch;
    tc->optim.weight_decay = row->weight_decay;
    tc->optim.lr = row->lrs[0];
    tc->schedule = lb_schedule_constant(tc->optim.lr);
    tc->schedule.warmup_steps = 50;
    tc->budget_clock = LB_BUDGET_CPU; /* the same work per cell however busy the machine is */
    tc->threads = s->threads;
    /* Train to solve: validate every eval_every steps, stop at the criterion. */
    tc->eval_every = task->eval_every;
    tc->eval_examples = task->val_examples;
    tc->select = task->copy ? LB_SELECT_LOSS : LB_SELECT_ACCURACY;
    lb_task_options o = task->train;
    lb_task_options_resolve(&o);
    tc->stop_at = task->copy ? SOLVED_COPY * (double)o.copy_symbols * log((double)o.alphabet) / (double)o.seq_len
                             : solved_accuracy(task);
}

/* Floats of decoding state a streaming model keeps per sequence after `len` events,
 * from the configuration (its family's row, layers/family.h). */
static double state_floats(const lb_run_config *rc, int64_t len)
{
    const lb_family *f = lb_family_of(rc->model.kind);
    return f ? f->state_floats(&rc->model, len) : NAN;
}

/* ---- learning-rate probes and cells ---- */

static lb_status train_job(lb_study *s, const job *j, lb_run_config *rc, lb_study_phase phase, lb_run_result *run,
                           lb_model **model)
{
    double budget = steps_only(s) ? 0 : task_budget(s, j->task, phase); /* 0: no time budget */
    if (task_steps(s, phase) > 0)
        rc->train.steps = task_steps(s, phase);
    char dir[4200];
    study_path(s, dir, sizeof dir, "runs/%s", j->name);
    lb_files_remove_tree(dir); /* what a killed attempt left */
    char parent[4200];
    study_path(s, parent, sizeof parent, "runs");
    lb_status st = lb_files_mkdir(parent);
    rc->train.time_budget = budget;
    if (st == LB_OK)
        st = lb_run_train(rc, dir, 0, 1, run, model);
    return st;
}

/* Memoryless loss of copy memory: C ln A / T (blanks predicted, outputs guessed). */
static double copy_baseline(const study_task *t)
{
    return (double)t->train.copy_symbols * log((double)t->train.alphabet) / (double)t->train.seq_len;
}

static double task_chance(const study_task *t);

/* The criterion in words ("validation accuracy >= 99 %"). */
static void solved_text(const study_task *task, char *buf, size_t size)
{
    if (task->copy)
        snprintf(buf, size, "validation loss <= %g %% of the memoryless loss", 100 * SOLVED_COPY);
    else
        snprintf(buf, size, "validation accuracy >= %g %%", 100 * solved_accuracy(task));
}

/* How far a validation score is from chance (0) to perfect (1): accuracy from chance to
 * 100 %; copy: loss from the memoryless loss to 0. */
static double progress(const study_task *task, double score)
{
    if (task->copy)
        return 1 - score / copy_baseline(task);
    double chance = task_chance(task);
    return (score - chance) / (1 - chance);
}

/* The validations of a run (metrics.csv's "val" rows): step, accuracy, loss. */
typedef struct val_curve {
    int n;
    int64_t step[MAX_CURVE];
    double acc[MAX_CURVE], loss[MAX_CURVE];
} val_curve;

static int add_curve_point(const lb_metrics_row *row, void *user)
{
    val_curve *c = user;
    if (c->n == MAX_CURVE) { /* keep every other point: the curve's shape over the whole run */
        for (int i = 0; i < MAX_CURVE / 2; i++) {
            c->step[i] = c->step[2 * i + 1];
            c->acc[i] = c->acc[2 * i + 1];
            c->loss[i] = c->loss[2 * i + 1];
        }
        c->n = MAX_CURVE / 2;
    }
    c->step[c->n] = row->step;
    c->acc[c->n] = row->accuracy;
    c->loss[c->n] = row->loss;
    c->n++;
    return 0;
}

static void read_curve(const char *metrics_path, val_curve *c)
{
    c->n = 0;
    if (lb_metrics_read(metrics_path, "val", add_curve_point, c, NULL) != LB_OK)
        lb_clear_error();
}

/* The first validation at which the run got `fraction` of the way from chance to perfect
 * (solved: the task's criterion), as {step, examples, cpu_seconds}; NULL when it never did.
 * CPU seconds are the step times the run's mean CPU seconds per step (validations are not
 * counted, as in the budget). */
static json_object *time_to(const study_task *task, const val_curve *c, double fraction, int solved, int64_t batch,
                            double seconds_per_step)
{
    for (int i = 0; i < c->n; i++) {
        double score = task->copy ? c->loss[i] : c->acc[i];
        int reached = solved ? (task->copy ? score <= SOLVED_COPY * copy_baseline(task) : score >= solved_accuracy(task))
                             : progress(task, score) >= fraction;
        if (!reached)
            continue;
        json_object *o = json_object_new_object();
        json_object_object_add(o, "step", json_object_new_int64(c->step[i]));
        json_object_object_add(o, "examples", json_object_new_int64(c->step[i] * batch));
        json_object_object_add(o, "cpu_seconds", json_real((double)c->step[i] * seconds_per_step));
        return o;
    }
    return NULL;
}

static lb_status run_lr_job(lb_study *s, const job *j)
{
    lb_run_config rc;
    char text[512], path[4200];
    memset(&rc, 0, sizeof rc);
    recipe(s, j->task, j->method, &rc, text, sizeof text);
    rc.train.optim.lr = lb_recipe_of(j->task, j->method)->lrs[j->lr_index];
    rc.train.schedule.base_lr = rc.train.optim.lr;
    lb_run_result run;
    lb_status st = train_job(s, j, &rc, LB_STUDY_LR, &run, NULL);
    if (st != LB_OK)
        return st;
    json_object *r = json_object_new_object();
    json_object_object_add(r, "task", json_object_new_string(s->tasks[j->task].name));
    json_object_object_add(r, "method", json_object_new_string(lb_recipe_method_names[j->method]));
    json_object_object_add(r, "lr", json_object_new_double(rc.train.optim.lr));
    json_object_object_add(r, "steps", json_object_new_int64(run.steps));
    json_object_object_add(r, "solved", json_object_new_boolean(run.solved_step > 0));
    json_object_object_add(r, "val_accuracy", json_real(run.last_val.accuracy));
    json_object_object_add(r, "val_loss", json_real(run.last_val.loss));
    json_object_object_add(r, "job_seconds", json_object_new_double(lb_clock_wall() - job_start));
    st = write_json(r, job_result_path(s, j, path, sizeof path));
    json_object_put(r);
    return st;
}

/* Decimals that show a time in seconds without rounding a nonzero one to 0: 12, 2.5,
 * 0.25, 0.025. */
static int time_decimals(double seconds)
{
    return seconds >= 10 || seconds < 0.001 ? 0 : seconds >= 1 ? 1 : seconds >= 0.1 ? 2 : 3;
}

/* The learning rate of (task, method): the row's only candidate; else from its probes
 * (each trained to solve for a quarter of the cell's budget): the solved probe with the
 * fewest steps; else the best validation score (accuracy; copy: loss) when it is clearly
 * better than chance and than the runner-up (by two standard errors of an accuracy on
 * the validation examples; copy: 2 % of the loss); else the row's default (the first
 * candidate): probes on a plateau cannot rank, and picking among them would pick noise.
 * LB_ERR_STATE when a probe is missing. */
static lb_status chosen_lr(const lb_study *s, lb_recipe_task t, lb_recipe_method m, double *lr, char *why, size_t size)
{
    const study_task *task = &s->tasks[t];
    const lb_recipe *row = lb_recipe_of(t, m);
    int n = recipe_lrs(s, row);
    *lr = row->lrs[0];
    if (n == 1) {
        snprintf(why, size, "lr %g (the recipe's)", *lr);
        return LB_OK;
    }
    double score[LB_RECIPE_MAX_LRS];
    int64_t steps[LB_RECIPE_MAX_LRS];
    int solved[LB_RECIPE_MAX_LRS], probes = 0;
    char list[128] = "";
    for (int i = 0; i < s->n_jobs[LB_STUDY_LR]; i++) {
        const job *p = &s->jobs[LB_STUDY_LR][i];
        if (p->task != t || p->method != m)
            continue;
        char path[4200];
        json_object *r = json_object_from_file(job_result_path(s, p, path, sizeof path)), *v;
        if (!r)
            return lb_error(LB_ERR_STATE, "study: the learning-rate probe %s has not run (%s missing)", p->name, path);
        int k = p->lr_index;
        score[k] = json_num(r, task->copy ? "val_loss" : "val_accuracy");
        if (isnan(score[k]))
            score[k] = task->copy ? INFINITY : -1;
        steps[k] = (int64_t)json_num(r, "steps");
        solved[k] = json_object_object_get_ex(r, "solved", &v) && json_object_get_boolean(v);
        json_object_put(r);
        probes++;
        snprintf(list + strlen(list), sizeof list - strlen(list), "%s%g", list[0] ? ", " : "", row->lrs[k]);
    }
    if (probes < n)
        return lb_error(LB_ERR_STATE, "study: %d of the %d learning-rate probes of %s/%s are missing", n - probes, n,
                        task->name, lb_recipe_method_names[m]);
    int fastest = -1, best = 0, second = -1;
    for (int k = 0; k < n; k++)
        if (solved[k] && (fastest < 0 || steps[k] < steps[fastest]))
            fastest = k;
    char budget[64];
    if (steps_only(s))
        snprintf(budget, sizeof budget, "%lld-step", (long long)task_steps(s, LB_STUDY_LR));
    else
        snprintf(budget, sizeof budget, "%.*f-s", time_decimals(task_budget(s, t, LB_STUDY_LR)),
                 task_budget(s, t, LB_STUDY_LR));
    if (fastest >= 0) {
        *lr = row->lrs[fastest];
        snprintf(why, size, "lr %g of {%s}: solved in the fewest steps (%lld) of the %s probes", *lr, list,
                 (long long)steps[fastest], budget);
        return LB_OK;
    }
    for (int k = 1; k < n; k++)
        if (task->copy ? score[k] < score[best] : score[k] > score[best])
            best = k;
    for (int k = 0; k < n; k++)
        if (k != best && (second < 0 || (task->copy ? score[k] < score[second] : score[k] > score[second])))
            second = k;
    int ranks;
    if (task->copy) {
        ranks = score[best] < 0.98 * copy_baseline(task) && score[best] < 0.98 * score[second];
    } else {
        double p = task_chance(task), n_val = (double)task->val_examples;
        double chance_bar = p + fmax(0.02, 2 * sqrt(p * (1 - p) / n_val));
        double q = fmin(fmax(score[best], p), 1 - 1.0 / n_val);
        ranks = score[best] > chance_bar && score[best] - score[second] > fmax(0.02, 2 * sqrt(2 * q * (1 - q) / n_val));
    }
    if (ranks) {
        *lr = row->lrs[best];
        snprintf(why, size, "lr %g of {%s}: best validation %s (%.4g against %.4g) after the %s probes", *lr, list,
                 task->copy ? "loss" : "accuracy", score[best], score[second], budget);
    } else {
        snprintf(why, size, "lr %g, the recipe's default: the %s probes of {%s} could not rank them (best %s %.4g, "
                 "within noise of chance or of the runner-up)", *lr, budget, list, task->copy ? "loss" : "accuracy",
                 score[best]);
    }
    return LB_OK;
}

/* Accuracy over the copied symbols (the last copy_symbols output indices). */
static double copied_accuracy(const lb_eval_result *r, int64_t symbols, json_object *per_output)
{
    int64_t ok = 0, n = 0;
    for (int j = r->n_outputs - (int)symbols; j < r->n_outputs; j++) {
        if (j < 0)
            continue;
        ok += r->output_correct[j];
        n += r->output_total[j];
        if (per_output)
            json_object_array_add(per_output, r->output_total[j] ? json_object_new_double((double)r->output_correct[j] /
                                                                                        (double)r->output_total[j])
                                                                 : NULL);
    }
    return n ? (double)ok / (double)n : NAN;
}

/* Streaming inference over the first test sequence of ds (len events, one stream,
 * layers/stream.h): the first len - STREAM_TIMED events go in as one chunk (prefill),
 * then the last STREAM_TIMED one event per call, timed: microseconds per event with
 * about len events of context, and the bytes of decoding state after the last event,
 * into t. A model that cannot stream gets "stream_error". */
enum { STREAM_TIMED = 64 };
static void measure_streaming(lb_model *model, const lb_dataset *ds, int64_t len, json_object *t)
{
    lb_batch b;
    lb_model_state *state = NULL;
    int64_t timed = len < STREAM_TIMED ? len : STREAM_TIMED, prefill = len - timed;
    lb_status st = lb_dataset_slice(ds, "test", 0, 1, &b);
    if (st == LB_OK && !(state = lb_model_state_new(model, 1, NULL)))
        st = lb_last_status();
    if (st == LB_OK && prefill > 0) {
        lb_model_input in = {1, prefill, b.tokens, NULL, NULL};
        lb_tensor *out = lb_model_step_chunk(state, &in);
        st = out ? LB_OK : lb_last_status();
        lb_tensor_free(out);
    }
    double t0 = lb_clock_cpu();
    for (int64_t i = prefill; st == LB_OK && i < len; i++) {
        lb_tensor *out = lb_model_step(state, b.tokens + i);
        if (!out)
            st = lb_last_status();
        lb_tensor_free(out);
    }
    double seconds = lb_clock_cpu() - t0;
    if (st == LB_OK) {
        json_object_object_add(t, "stream_us_per_event", json_object_new_double(1e6 * seconds / (double)timed));
        json_object_object_add(t, "stream_state_bytes", json_object_new_int64((int64_t)lb_model_state_bytes(state, 0)));
    } else {
        json_object_object_add(t, "stream_error", json_object_new_string(lb_last_error()));
        lb_clear_error();
    }
    lb_model_state_free(state);
    if (b.tokens || b.features)
        lb_batch_free(&b);
}

static lb_status evaluate_tests(lb_study *s, const job *j, lb_model *model, const lb_run_config *rc,
                                json_object *tests)
{
    const study_task *task = &s->tasks[j->task];
    for (int i = 0; i < task->n_tests; i++) {
        char path[4200];
        int64_t len = task->test_len[i];
        lb_dataset *ds = lb_dataset_open(data_path(s, j->task, "test", len, path, sizeof path));
        if (!ds)
            return lb_last_status();
        json_object *t = json_object_new_object();
        json_object_object_add(t, "seq_len", json_object_new_int64(len));
        lb_eval_result r;
        double t0 = lb_clock_cpu();
        lb_status st = lb_evaluate(model, ds, "test", 0, 8, 0, &r, NULL);
        double seconds = lb_clock_cpu() - t0;
        if (st == LB_OK) {
            json_object *per_output = task->copy ? json_object_new_array() : NULL;
            double acc = task->copy ? copied_accuracy(&r, task->train.copy_symbols, per_output) : r.accuracy;
            json_object_object_add(t, "accuracy", json_real(acc));
            json_object_object_add(t, "loss", json_real(r.loss));
            if (per_output)
                json_object_object_add(t, "accuracy_per_output", per_output);
            json_object_object_add(t, "examples", json_object_new_int64(r.examples));
            json_object_object_add(t, "eval_seconds", json_object_new_double(seconds));
            json_object_object_add(t, "us_per_event", json_object_new_double(1e6 * seconds / (double)(r.examples * len)));
        } else {
            /* e.g. learned positions cannot read past their table: a measured limit, not a failure */
            json_object_object_add(t, "error", json_object_new_string(lb_last_error()));
            lb_clear_error();
        }
        json_object_object_add(t, "state_floats", json_real(state_floats(rc, len)));
        if (i == task->n_tests - 1)
            measure_streaming(model, ds, len, t);
        json_object_array_add(tests, t);
        lb_dataset_close(ds);
    }
    return LB_OK;
}

static lb_status run_cell_job(lb_study *s, const job *j)
{
    lb_run_config rc;
    char text[512], why[512], path[4200];
    memset(&rc, 0, sizeof rc);
    recipe(s, j->task, j->method, &rc, text, sizeof text);
    double lr;
    lb_status st = chosen_lr(s, j->task, j->method, &lr, why, sizeof why);
    if (st != LB_OK)
        return st;
    rc.train.optim.lr = lr;
    rc.train.schedule.base_lr = lr;
    rc.train.seed = (uint64_t)j->seed;
    rc.model.seed = (uint64_t)j->seed;
    lb_run_result run;
    lb_model *model = NULL;
    if ((st = train_job(s, j, &rc, LB_STUDY_CELL, &run, &model)) != LB_OK)
        return st;
    json_object *r = json_object_new_object();
    json_object_object_add(r, "task", json_object_new_string(s->tasks[j->task].name));
    json_object_object_add(r, "method", json_object_new_string(lb_recipe_method_names[j->method]));
    json_object_object_add(r, "seed", json_object_new_int(j->seed));
    json_object_object_add(r, "recipe", json_object_new_string(text));
    json_object_object_add(r, "source", json_object_new_string(lb_recipe_of(j->task, j->method)->source));
    json_object_object_add(r, "lr", json_object_new_double(lr));
    json_object_object_add(r, "lr_choice", json_object_new_string(why));
    json_object_object_add(r, "steps", json_object_new_int64(run.steps));
    json_object_object_add(r, "train_seconds", json_object_new_double(run.budget_seconds));
    json_object_object_add(r, "seconds_per_step", json_real(run.steps ? run.budget_seconds / (double)run.steps : NAN));
    json_object_object_add(r, "wall_seconds", json_object_new_double(run.seconds));
    json_object_object_add(r, "parameters", json_object_new_int64(run.parameters));
    json_object_object_add(r, "val_accuracy", json_real(run.last_val.accuracy));
    json_object_object_add(r, "val_loss", json_real(run.last_val.loss));
    /* Train to solve: whether it was, when, and the learning curve. */
    const study_task *task = &s->tasks[j->task];
    double per_step = run.steps ? run.budget_seconds / (double)run.steps : NAN;
    static val_curve curve;
    char metrics[4200];
    read_curve(study_path(s, metrics, sizeof metrics, "runs/%s/metrics.csv", j->name), &curve);
    json_object_object_add(r, "solved", json_object_new_boolean(run.solved_step > 0));
    char criterion[96];
    solved_text(task, criterion, sizeof criterion);
    json_object_object_add(r, "criterion", json_object_new_string(criterion));
    json_object_object_add(r, "time_to_learn", time_to(task, &curve, 1, 1, rc.train.batch_size, per_step));
    json_object_object_add(r, "time_to_50", time_to(task, &curve, 0.5, 0, rc.train.batch_size, per_step));
    json_object_object_add(r, "time_to_90", time_to(task, &curve, 0.9, 0, rc.train.batch_size, per_step));
    json_object *points = json_object_new_array();
    for (int i = 0; i < curve.n; i++) {
        json_object *pt = json_object_new_object();
        json_object_object_add(pt, "step", json_object_new_int64(curve.step[i]));
        json_object_object_add(pt, "cpu_seconds", json_real((double)curve.step[i] * per_step));
        json_object_object_add(pt, "score", json_real(task->copy ? curve.loss[i] : curve.acc[i]));
        json_object_array_add(points, pt);
    }
    json_object_object_add(r, "curve", points);
    json_object *tests = json_object_new_array();
    json_object_object_add(r, "tests", tests);
    st = evaluate_tests(s, j, model, &rc, tests);
    lb_model_free(model);
    struct rusage ru;
    getrusage(RUSAGE_SELF, &ru);
    json_object_object_add(r, "peak_rss_mb", json_object_new_double((double)ru.ru_maxrss / 1024.0));
    json_object_object_add(r, "job_seconds", json_object_new_double(lb_clock_wall() - job_start));
    if (st == LB_OK)
        st = write_json(r, job_result_path(s, j, path, sizeof path));
    json_object_put(r);
    return st;
}

lb_status lb_study_run_job(lb_study *s, lb_study_phase phase, int index)
{
    if (phase < 0 || phase >= LB_STUDY_PHASES || index < 0 || index >= s->n_jobs[phase])
        return lb_error(LB_ERR_VALUE, "study: no job %d in phase %d", index, (int)phase);
    if (lb_study_job_done(s, phase, index))
        return LB_OK;
    const job *j = &s->jobs[phase][index];
    job_start = lb_clock_wall();
    lb_status st = phase == LB_STUDY_DATA ? run_data_job(s, j)
                   : phase == LB_STUDY_LR ? run_lr_job(s, j)
                                          : run_cell_job(s, j);
    if (st != LB_OK)
        lb_error_context("study job %s", j->name);
    return st;
}

void lb_study_job_summary(const lb_study *s, lb_study_phase phase, int index, char *buf, size_t size)
{
    const job *j = &s->jobs[phase][index];
    char path[4200];
    buf[0] = '\0';
    json_object *r = json_object_from_file(job_result_path(s, j, path, sizeof path));
    if (!r)
        return;
    if (phase == LB_STUDY_LR) {
        snprintf(buf, size, "val accuracy %.3f, loss %.4f after %lld steps", json_num(r, "val_accuracy"),
                 json_num(r, "val_loss"), (long long)json_num(r, "steps"));
    } else if (phase == LB_STUDY_CELL) {
        json_object *tests;
        size_t used = 0;
        json_object *when = NULL;
        json_object_object_get_ex(r, "time_to_learn", &when);
        if (when)
            used += (size_t)snprintf(buf, size, "solved at step %lld (%.1f CPU-s), lr %g;", (long long)json_num(when, "step"),
                                     json_num(when, "cpu_seconds"), json_num(r, "lr"));
        else
            used += (size_t)snprintf(buf, size, "%lld steps, not solved, lr %g;", (long long)json_num(r, "steps"),
                                     json_num(r, "lr"));
        if (json_object_object_get_ex(r, "tests", &tests))
            for (size_t i = 0; i < json_object_array_length(tests) && used < size; i++) {
                json_object *t = json_object_array_get_idx(tests, i);
                if (s->tasks[j->task].copy)
                    used += (size_t)snprintf(buf + used, size - used, " loss %.4f, symbols %.3f at %lld",
                                             json_num(t, "loss"), json_num(t, "accuracy"),
                                             (long long)json_num(t, "seq_len"));
                else
                    used += (size_t)snprintf(buf + used, size - used, " %.3f at %lld", json_num(t, "accuracy"),
                                             (long long)json_num(t, "seq_len"));
            }
    }
    json_object_put(r);
}

/* ---- the report ---- */

typedef struct cell_stats {
    int n;                      /* seeds with a result */
    double mean[MAX_TESTS], lo[MAX_TESTS], hi[MAX_TESTS]; /* accuracy per test length (copy: symbols) */
    double loss[MAX_TESTS];     /* mean test loss */
    double us_per_event[MAX_TESTS];
    double ms_per_step, peak_mb, params, state[MAX_TESTS], steps;
    double stream_us, stream_bytes; /* streaming at the longest length (NAN: not measured) */
    double lr;
    char recipe[512], lr_choice[512], source[400];
    int solved;                 /* seeds that reached the criterion */
    double learn_s, learn_steps; /* mean CPU seconds and steps to the criterion over the seeds that did */
    double length_score;        /* mean over seeds of the mean accuracy beyond the training lengths (NAN: none) */
    /* The learning curve, mean and range over seeds, on a grid of CPU seconds. */
    int n_grid;
    double grid[64], curve_mean[64], curve_lo[64], curve_hi[64];
} cell_stats;

static void stats_of(const lb_study *s, lb_recipe_task t, lb_recipe_method m, cell_stats *c, json_object *cells)
{
    static double seed_t[LB_STUDY_MAX_SEEDS][MAX_CURVE], seed_y[LB_STUDY_MAX_SEEDS][MAX_CURVE];
    int seed_points[LB_STUDY_MAX_SEEDS] = {0};
    double t_max = 0;
    memset(c, 0, sizeof *c);
    c->stream_bytes = NAN;
    const study_task *task = &s->tasks[t];
    for (int i = 0; i < MAX_TESTS; i++) {
        c->lo[i] = INFINITY;
        c->hi[i] = -INFINITY;
    }
    for (int k = 0; k < s->n_jobs[LB_STUDY_CELL]; k++) {
        const job *j = &s->jobs[LB_STUDY_CELL][k];
        if (j->task != t || j->method != m)
            continue;
        char path[4200];
        json_object *r = json_object_from_file(job_result_path(s, j, path, sizeof path)), *tests;
        if (!r)
            continue;
        c->n++;
        c->ms_per_step += 1e3 * json_num(r, "seconds_per_step");
        c->peak_mb += json_num(r, "peak_rss_mb");
        c->params = json_num(r, "parameters");
        c->steps += json_num(r, "steps");
        c->lr = json_num(r, "lr");
        json_object *v;
        if (json_object_object_get_ex(r, "recipe", &v))
            snprintf(c->recipe, sizeof c->recipe, "%s", json_object_get_string(v));
        if (json_object_object_get_ex(r, "lr_choice", &v))
            snprintf(c->lr_choice, sizeof c->lr_choice, "%s", json_object_get_string(v));
        if (json_object_object_get_ex(r, "source", &v))
            snprintf(c->source, sizeof c->source, "%s", json_object_get_string(v));
        if (json_object_object_get_ex(r, "solved", &v) && json_object_get_boolean(v)) {
            json_object *when = NULL;
            json_object_object_get_ex(r, "time_to_learn", &when);
            if (when && isfinite(json_num(when, "cpu_seconds"))) {
                c->solved++;
                c->learn_s += json_num(when, "cpu_seconds");
                c->learn_steps += json_num(when, "step");
            }
        }
        json_object *curve = NULL;
        if (json_object_object_get_ex(r, "curve", &curve) && curve && c->n <= LB_STUDY_MAX_SEEDS) {
            int np = (int)json_object_array_length(curve);
            seed_points[c->n - 1] = np < MAX_CURVE ? np : MAX_CURVE;
            for (int i = 0; i < seed_points[c->n - 1]; i++) {
                json_object *pt = json_object_array_get_idx(curve, (size_t)i);
                seed_t[c->n - 1][i] = json_num(pt, "cpu_seconds");
                seed_y[c->n - 1][i] = json_num(pt, "score");
                if (isfinite(seed_t[c->n - 1][i]))
                    t_max = fmax(t_max, seed_t[c->n - 1][i]);
            }
        }
        double beyond = 0;
        int n_beyond = 0;
        if (json_object_object_get_ex(r, "tests", &tests))
            for (int i = 0; i < task->n_tests && i < (int)json_object_array_length(tests); i++) {
                json_object *x = json_object_array_get_idx(tests, (size_t)i);
                double acc = json_num(x, "accuracy");
                if (i >= task->score_from) {
                    beyond += acc;
                    n_beyond++;
                }
                c->mean[i] += acc;
                c->lo[i] = fmin(c->lo[i], acc);
                c->hi[i] = fmax(c->hi[i], acc);
                c->loss[i] += json_num(x, "loss");
                c->us_per_event[i] += json_num(x, "us_per_event");
                c->state[i] = json_num(x, "state_floats");
                if (i == task->n_tests - 1) {
                    c->stream_us += json_num(x, "stream_us_per_event");
                    c->stream_bytes = json_num(x, "stream_state_bytes");
                }
            }
        c->length_score += n_beyond ? beyond / n_beyond : NAN;
        if (cells)
            json_object_array_add(cells, r);
        else
            json_object_put(r);
    }
    if (c->n == 0)
        return;
    c->length_score /= c->n;
    if (c->solved) {
        c->learn_s /= c->solved;
        c->learn_steps /= c->solved;
    }
    /* The curves on one grid of CPU seconds: each seed's latest validation at or before
     * each time (a solved seed keeps its last score), mean and range over the seeds. */
    if (t_max > 0) {
        c->n_grid = 64;
        for (int g = 0; g < c->n_grid; g++) {
            double at = t_max * g / (c->n_grid - 1), sum = 0, lo = INFINITY, hi = -INFINITY;
            int have = 0;
            for (int k = 0; k < c->n && k < LB_STUDY_MAX_SEEDS; k++) {
                double y = NAN;
                for (int i = 0; i < seed_points[k] && seed_t[k][i] <= at + 1e-9; i++)
                    y = seed_y[k][i];
                if (!isfinite(y))
                    continue;
                sum += y;
                lo = fmin(lo, y);
                hi = fmax(hi, y);
                have++;
            }
            c->grid[g] = at;
            c->curve_mean[g] = have ? sum / have : NAN;
            c->curve_lo[g] = have ? lo : NAN;
            c->curve_hi[g] = have ? hi : NAN;
        }
    }
    c->ms_per_step /= c->n;
    c->stream_us /= c->n;
    c->peak_mb /= c->n;
    c->steps /= c->n;
    for (int i = 0; i < task->n_tests; i++) {
        c->mean[i] /= c->n;
        c->loss[i] /= c->n;
        c->us_per_event[i] /= c->n;
    }
}

static double task_chance(const study_task *t)
{
    lb_task_options o = t->train;
    lb_task_options_resolve(&o);
    if (t->copy)
        return 1.0 / (double)o.alphabet; /* per copied symbol */
    return 1.0 / (double)lb_task_num_classes(&o);
}

/* Whether the best-fit method has learnt the task: at least 90 % of the way from chance to
 * perfect at the training length (the first test length; copy: a test loss at most 10 %
 * of the memoryless loss). A leader short of that is the ranking after its budget, not
 * a verdict on the methods. */
static int pick_learnt(const study_task *task, const cell_stats *c, int last)
{
    (void)last;
    return progress(task, task->copy ? c->loss[0] : c->mean[0]) >= 0.9;
}

/* Whether a method clearly learnt the task: at the training length (the first test
 * length) and at the longest, accuracy above chance by two standard errors of a
 * chance-level score on the test examples (and at least 2 points); copy: loss 2% below
 * the memoryless one. */
static int above_chance(const lb_study *s, lb_recipe_task t, const cell_stats *c)
{
    const study_task *task = &s->tasks[t];
    int last = task->n_tests - 1;
    if (task->copy)
        return c->loss[last] < 0.98 * copy_baseline(task);
    double p = task_chance(task), n = (double)s->eval_examples * (c->n > 0 ? c->n : 1);
    double bar = p + fmax(0.02, 2 * sqrt(p * (1 - p) / n));
    return c->mean[0] > bar && c->mean[last] > bar;
}

/* The method the numbers pick for task t: the best mean accuracy at the longest test
 * length (copy: the lowest loss); methods within 1 point (copy: 2%) of the best count
 * as tied and the cheapest per training step among them wins. -1 when nothing ran,
 * -2 when no method is clearly above chance (above_chance). */
static int best_fit(const lb_study *s, lb_recipe_task t, const cell_stats *st)
{
    const study_task *task = &s->tasks[t];
    int last = task->n_tests - 1, best = -1;
    double best_score = -INFINITY;
    for (int m = 0; m < LB_RECIPE_M_COUNT; m++) {
        if (!st[m].n)
            continue;
        double score = task->copy ? -st[m].loss[last] : st[m].mean[last];
        if (isfinite(score) && score > best_score) {
            best_score = score;
            best = m;
        }
    }
    if (best < 0)
        return -1;
    if (!above_chance(s, t, &st[best]))
        return -2;
    int pick = best;
    for (int m = 0; m < LB_RECIPE_M_COUNT; m++) {
        if (!st[m].n || m == best)
            continue;
        double score = task->copy ? -st[m].loss[last] : st[m].mean[last];
        double tol = task->copy ? 0.02 * fabs(best_score) : 0.01;
        if (isfinite(score) && score >= best_score - tol && st[m].ms_per_step < st[pick].ms_per_step)
            pick = m;
    }
    return pick;
}

static void fmt_acc(char *buf, size_t size, const cell_stats *c, int i, int seeds)
{
    if (!c->n || !isfinite(c->mean[i]))
        snprintf(buf, size, "-");
    else if (seeds > 1 && c->n > 1)
        snprintf(buf, size, "%.1f%% (%.1f-%.1f)", 100 * c->mean[i], 100 * c->lo[i], 100 * c->hi[i]);
    else
        snprintf(buf, size, "%.1f%%", 100 * c->mean[i]);
}

static void write_task_section(const lb_study *s, lb_recipe_task t, const cell_stats *st, FILE *f)
{
    const study_task *task = &s->tasks[t];
    int last = task->n_tests - 1, scored = task->train.variable_length != 0;
    char criterion[96];
    solved_text(task, criterion, sizeof criterion);
    char cell_budget[96], probe_budget[96];
    budget_text(s, t, LB_STUDY_CELL, cell_budget, sizeof cell_budget);
    budget_text(s, t, LB_STUDY_LR, probe_budget, sizeof probe_budget);
    fprintf(f, "\n### %s\n\n%s. Budget per cell %s (%s), per learning-rate probe %s; each cell stops "
               "when solved (%s, checked every %lld steps). ",
            task->name, task->what, cell_budget,
            s->budget > 0 || s->steps > 0 ? (s->steps > 0 ? (s->budget > 0 ? "--budget, --steps" : "--steps") : "--budget")
                                          : "the task's own, docs/study.md",
            probe_budget, criterion, (long long)task->eval_every);
    if (task->copy)
        fprintf(f, "Memoryless baseline loss %.4f (10 ln 8 / %lld); chance per copied symbol %.1f%%.\n\n",
                copy_baseline(task), (long long)task->train.seq_len, 100 * task_chance(task));
    else
        fprintf(f, "Chance %.1f%%.\n\n", 100 * task_chance(task));
    if (scored)
        fprintf(f, "Score: the accuracy averaged over the test lengths beyond the training lengths (Deletang et al. "
                   "2023's score; solved there means >= 90 %%).\n\n");
    fprintf(f, "| method | seeds |");
    for (int i = 0; i < task->n_tests; i++)
        fprintf(f, " %s @ %lld |", task->copy ? "symbols" : "accuracy", (long long)task->test_len[i]);
    if (task->copy)
        fprintf(f, " loss |");
    if (scored)
        fprintf(f, " score |");
    fprintf(f, " solved | time to learn (CPU s) | steps | ms / step | eval us / event @ %lld | stream us / event @ %lld "
               "| state KB @ %lld | peak MB | parameters | lr |\n",
            (long long)task->test_len[last], (long long)task->test_len[last], (long long)task->test_len[last]);
    fprintf(f, "|---|---|");
    for (int i = 0; i < task->n_tests + (task->copy ? 1 : 0) + scored; i++)
        fprintf(f, "---|");
    fprintf(f, "---|---|---|---|---|---|---|---|---|---|\n");
    for (int m = 0; m < LB_RECIPE_M_COUNT; m++) {
        if (!s->method_on[m] || !method_applies((lb_recipe_method)m, t))
            continue;
        const cell_stats *c = &st[m];
        fprintf(f, "| %s | %d |", lb_recipe_method_names[m], c->n);
        for (int i = 0; i < task->n_tests; i++) {
            char a[64];
            fmt_acc(a, sizeof a, c, i, s->seeds);
            fprintf(f, " %s |", a);
        }
        if (!c->n) {
            fprintf(f, "%s%s - | - | - | - | - | - | - | - | - | - |\n", task->copy ? " - |" : "", scored ? " - |" : "");
            continue;
        }
        if (task->copy)
            fprintf(f, " %.4f |", c->loss[last]);
        if (scored)
            fprintf(f, " %.1f%% |", 100 * c->length_score);
        char learn[64];
        if (c->solved)
            snprintf(learn, sizeof learn, "%.1f (%.0f steps)", c->learn_s, c->learn_steps);
        else if (steps_only(s))
            snprintf(learn, sizeof learn, "not within %lld steps", (long long)task_steps(s, LB_STUDY_CELL));
        else
            snprintf(learn, sizeof learn, "not within %.3g", task_budget(s, t, LB_STUDY_CELL));
        fprintf(f, " %d/%d | %s |", c->solved, c->n, learn);
        char stream[32], state[32];
        if (isfinite(c->stream_us))
            snprintf(stream, sizeof stream, "%.1f", c->stream_us);
        else
            snprintf(stream, sizeof stream, "-");
        /* measured through the streaming API when it ran, else from the configuration */
        double bytes = isfinite(c->stream_bytes) ? c->stream_bytes : 4 * c->state[last];
        snprintf(state, sizeof state, "%.1f%s", bytes / 1024, isfinite(c->stream_bytes) ? "" : " (computed)");
        fprintf(f, " %.0f | %.1f | %.2f | %s | %s | %.0f | %.0f | %g |\n", c->steps, c->ms_per_step,
                c->us_per_event[last], stream, state, c->peak_mb, c->params, c->lr);
    }
    int pick = best_fit(s, t, st);
    fprintf(f, "\n**Best fit, measured:** ");
    if (pick == -1) {
        fprintf(f, "no cell has finished.\n");
        return;
    }
    if (pick == -2)
        fprintf(f, "none: no method is clearly above %s at %s%lld (the budget is too short for this task, or every "
                   "method fails it).\n",
                task->copy ? "the memoryless baseline" : "chance", task->copy || last == 0 ? "" : "the training length and at ",
                (long long)task->test_len[last]);
    else if (task->copy)
        fprintf(f, "%s (%s), loss %.4f against the memoryless %.4f, %.1f%% of the copied symbols.", lb_recipe_method_names[pick],
                method_rows[pick], st[pick].loss[last], copy_baseline(task), 100 * st[pick].mean[last]);
    else
        fprintf(f, "%s (%s), %.1f%% at %lld.", lb_recipe_method_names[pick], method_rows[pick], 100 * st[pick].mean[last],
                (long long)task->test_len[last]);
    int learnt = pick >= 0 && pick_learnt(task, &st[pick], last);
    if (pick >= 0 && !learnt)
        fprintf(f, " No method has learnt the task within the budget (the leader is below 90 %% of the way from "
                   "chance to perfect at the training length), so this is the ranking after its budget, not a verdict "
                   "on the methods; the source's table names \"%s\" for this kind of task.\n",
                task->text_pick);
    else if (pick >= 0 && strcmp(method_text_row[pick], task->text_pick) == 0)
        fprintf(f, " This agrees with the source's table (\"%s\" for this kind of task).\n", task->text_pick);
    else if (pick >= 0)
        fprintf(f, " **This disagrees with the source's table**, which names \"%s\" for this kind of task.\n",
                task->text_pick);
    fprintf(f, "\nRecipes:\n\n");
    for (int m = 0; m < LB_RECIPE_M_COUNT; m++)
        if (st[m].n)
            fprintf(f, "- %s: %s; %s. Source: %s.\n", lb_recipe_method_names[m], st[m].recipe, st[m].lr_choice, st[m].source);
    fprintf(f, "\n![%s: validation score against CPU seconds](learning-%s.png)\n", task->name, task->name);
}

/* Seconds the stored jobs took, summed (across the runs that made them). */
static double stored_job_seconds(const lb_study *s)
{
    double total = 0;
    int timed = 0;
    for (int p = 0; p < LB_STUDY_PHASES; p++)
        for (int i = 0; i < s->n_jobs[p]; i++) {
            char path[4200];
            json_object *r = json_object_from_file(job_result_path(s, &s->jobs[p][i], path, sizeof path));
            double v = json_num(r, "job_seconds");
            if (isfinite(v)) {
                total += v;
                timed++;
            }
            json_object_put(r);
        }
    return timed ? total : NAN; /* NAN: no stored job has its time */
}

/* " (k/n solved)" when some seed did not reach the criterion within its budget, else "". */
static const char *solved_note(const cell_stats *c, char *buf, size_t size)
{
    if (c->solved == c->n)
        return "";
    snprintf(buf, size, " (%d/%d solved)", c->solved, c->n);
    return buf;
}

static void write_markdown(const lb_study *s, cell_stats st[LB_RECIPE_T_COUNT][LB_RECIPE_M_COUNT], double seconds, FILE *f)
{
    fprintf(f, "# The method study, measured\n\n");
    char limit[96];
    if (steps_only(s))
        snprintf(limit, sizeof limit, "its budget of %lld optimizer steps is spent", (long long)s->steps);
    else
        snprintf(limit, sizeof limit, "its task's budget of CPU seconds per thread runs out%s",
                 s->steps > 0 ? " (or --steps is reached)" : "");
    fprintf(f, "`%s` — each cell trains until it is solved on the validation split or %s (the same for every "
               "method of a task; --quick: %s), with its recipe's "
               "learning rate (probed on the validation split where the recipe lists several); %d seed%s, %d job%s "
               "at once, %d thread%s each; accuracy as the mean over seeds (range in brackets when there are "
               "several). Times per step and per event are CPU seconds per thread.",
            s->command, limit, s->quick ? "yes" : "no", s->seeds, s->seeds == 1 ? "" : "s", s->parallel,
            s->parallel == 1 ? "" : "s", s->threads, s->threads == 1 ? "" : "s");
    if (seconds >= 0)
        fprintf(f, " Wall time of this run: %.1f min.", seconds / 60);
    double job_seconds = stored_job_seconds(s);
    if (isfinite(job_seconds))
        fprintf(f, " The stored jobs took %.1f min in all.", job_seconds / 60);
    fprintf(f, "\n\n## The source's table with measured columns\n\n");
    fprintf(f, "Each method's accuracy at the longest test length of each task (copy: loss, lower is better; "
               "memoryless %.4f); \"(k/n solved)\" when only k of the n seeds reached the criterion on the "
               "validation split within the budget.\n\n| method | the source's best fit |",
            copy_baseline(&s->tasks[LB_RECIPE_T_COPY]));
    for (int t = 0; t < LB_RECIPE_T_COUNT; t++)
        if (s->task_on[t])
            fprintf(f, " %s @ %lld |", s->tasks[t].name, (long long)s->tasks[t].test_len[s->tasks[t].n_tests - 1]);
    fprintf(f, " best fit, measured |\n|---|---|");
    for (int t = 0; t < LB_RECIPE_T_COUNT; t++)
        if (s->task_on[t])
            fprintf(f, "---|");
    fprintf(f, "---|\n");
    static const char *const text_fit[LB_RECIPE_M_COUNT] = {
        "short or medium sequences with unpredictable long-range dependencies",
        "long sequences with structured dependencies", "streaming input or naturally sequential control",
        "local patterns and high-throughput signals", "(length-robust variant of full attention)",
        "(length-robust variant of full attention)", "(length-robust variant of full attention)",
        "(a fixed-size state, d_k x d_v per head, read like attention)",
        "(a fixed-state recurrent model: streaming with constant memory)"};
    for (int m = 0; m < LB_RECIPE_M_COUNT; m++) {
        int runs = 0; /* a method with no task of this study (ssmax without spike16) has no row */
        for (int t = 0; t < LB_RECIPE_T_COUNT; t++)
            runs += s->task_on[t] && method_applies((lb_recipe_method)m, (lb_recipe_task)t);
        if (!s->method_on[m] || !runs)
            continue;
        fprintf(f, "| %s | %s |", method_rows[m], text_fit[m]);
        char won[160] = "";
        for (int t = 0; t < LB_RECIPE_T_COUNT; t++) {
            if (!s->task_on[t])
                continue;
            const cell_stats *c = &st[t][m];
            int last = s->tasks[t].n_tests - 1;
            char note[48];
            if (!method_applies((lb_recipe_method)m, (lb_recipe_task)t) || !c->n)
                fprintf(f, " - |");
            else if (s->tasks[t].copy)
                fprintf(f, " %.4f%s |", c->loss[last], solved_note(c, note, sizeof note));
            else
                fprintf(f, " %.1f%%%s |", 100 * c->mean[last], solved_note(c, note, sizeof note));
            if (best_fit(s, (lb_recipe_task)t, st[t]) == m)
                snprintf(won + strlen(won), sizeof won - strlen(won), "%s%s%s", won[0] ? ", " : "", s->tasks[t].name,
                         pick_learnt(&s->tasks[t], c, last) ? "" : " (leads, not learnt)");
        }
        fprintf(f, " %s |\n", won[0] ? won : "-");
    }
    fprintf(f, "\nCosts per cell are in each task's table: training time per step; evaluation time per event "
               "(a full forward pass over the test sequence, divided by its events); streaming inference time per "
               "event (the last 64 events of one test sequence of the longest length fed one at a time through the "
               "streaming API, after the rest as one chunk) and the decoding state it holds after that sequence (key-value cache, (h, c), or each conv layer's past "
               "inputs); peak resident memory of the cell's process (data included); parameters.\n");
    int decided = 0, ran = 0;
    char names[128] = "";
    for (int t = 0; t < LB_RECIPE_T_COUNT; t++) {
        if (!s->task_on[t])
            continue;
        int pick = best_fit(s, (lb_recipe_task)t, st[t]);
        ran += pick != -1;
        if (pick >= 0 && pick_learnt(&s->tasks[t], &st[t][pick], s->tasks[t].n_tests - 1)) {
            decided++;
            snprintf(names + strlen(names), sizeof names - strlen(names), "%s%s", names[0] ? ", " : "",
                     s->tasks[t].name);
        }
    }
    fprintf(f, "\n**Decided: %d of the %d tasks with results**%s%s%s (a task is decided when its measured best fit "
               "has learnt it: at least 90 %% of the way from chance to perfect at the training length).\n",
            decided, ran, decided ? " (" : "", names, decided ? ")" : "");
    fprintf(f, "\n## Per task\n");
    for (int t = 0; t < LB_RECIPE_T_COUNT; t++)
        if (s->task_on[t])
            write_task_section(s, (lb_recipe_task)t, st[t], f);
}

static void write_plots(const lb_study *s, cell_stats st[LB_RECIPE_T_COUNT][LB_RECIPE_M_COUNT])
{
    for (int t = 0; t < LB_RECIPE_T_COUNT; t++) {
        if (!s->task_on[t])
            continue;
        const study_task *task = &s->tasks[t];
        const char *names[LB_RECIPE_M_COUNT];
        double acc[LB_RECIPE_M_COUNT][MAX_TESTS], cost[LB_RECIPE_M_COUNT][MAX_TESTS], x[MAX_TESTS];
        const double *accs[LB_RECIPE_M_COUNT], *costs[LB_RECIPE_M_COUNT];
        int n = 0;
        for (int i = 0; i < task->n_tests; i++)
            x[i] = (double)task->test_len[i];
        for (int m = 0; m < LB_RECIPE_M_COUNT; m++) {
            if (!st[t][m].n)
                continue;
            names[n] = lb_recipe_method_names[m];
            for (int i = 0; i < task->n_tests; i++) {
                acc[n][i] = 100 * st[t][m].mean[i];
                cost[n][i] = st[t][m].us_per_event[i];
            }
            accs[n] = acc[n];
            costs[n] = cost[n];
            n++;
        }
        if (n == 0)
            continue;
        char path[4200], title[128], chance[64];
        snprintf(title, sizeof title, "%s: %s by test length", task->name, task->copy ? "copied symbols" : "accuracy");
        snprintf(chance, sizeof chance, "chance (%.1f%%)", 100 * task_chance(task));
        if (lb_plot_log_x(study_path(s, path, sizeof path, "accuracy-%s.png", task->name), title,
                          "test sequence length (events, log scale)", "accuracy (%)", n, names, task->n_tests, x, accs,
                          0, 105, 100 * task_chance(task), chance) != LB_OK)
            fprintf(stderr, "lookback study: plot %s skipped: %s\n", path, lb_last_error());
        /* The learning curves: validation score against CPU seconds, mean and range over seeds. */
        const char *curve_names[LB_RECIPE_M_COUNT];
        const double *gx[LB_RECIPE_M_COUNT], *gy[LB_RECIPE_M_COUNT], *glo[LB_RECIPE_M_COUNT], *ghi[LB_RECIPE_M_COUNT];
        static double ys[LB_RECIPE_M_COUNT][64], los[LB_RECIPE_M_COUNT][64], his[LB_RECIPE_M_COUNT][64];
        int gn[LB_RECIPE_M_COUNT], nc = 0;
        for (int m = 0; m < LB_RECIPE_M_COUNT; m++) {
            const cell_stats *c = &st[t][m];
            if (!c->n || c->n_grid < 1)
                continue;
            double unit = task->copy ? 1 : 100;
            for (int g = 0; g < c->n_grid; g++) {
                ys[nc][g] = unit * c->curve_mean[g];
                los[nc][g] = unit * c->curve_lo[g];
                his[nc][g] = unit * c->curve_hi[g];
            }
            curve_names[nc] = lb_recipe_method_names[m];
            gx[nc] = c->grid;
            gy[nc] = ys[nc];
            glo[nc] = los[nc];
            ghi[nc] = his[nc];
            gn[nc] = c->n_grid;
            nc++;
        }
        if (nc > 0) {
            char ref[64];
            if (task->copy)
                snprintf(ref, sizeof ref, "memoryless (%.4f)", copy_baseline(task));
            snprintf(title, sizeof title, "%s: time to learn (mean and range over seeds)", task->name);
            if (lb_plot_curves_band(study_path(s, path, sizeof path, "learning-%s.png", task->name), title,
                                    "CPU seconds of training (per thread)",
                                    task->copy ? "validation loss" : "validation accuracy (%)", nc, curve_names, gn, gx,
                                    gy, glo, ghi, task->copy ? NAN : 0, task->copy ? NAN : 105,
                                    task->copy ? copy_baseline(task) : 100 * task_chance(task),
                                    task->copy ? ref : chance) != LB_OK)
                fprintf(stderr, "lookback study: plot %s skipped: %s\n", path, lb_last_error());
        }
        snprintf(title, sizeof title, "%s: evaluation cost by test length", task->name);
        if (lb_plot_log_x(study_path(s, path, sizeof path, "cost-%s.png", task->name), title,
                          "test sequence length (events, log scale)", "microseconds per event (full forward)", n, names,
                          task->n_tests, x, costs, NAN, NAN, NAN, NULL) != LB_OK)
            fprintf(stderr, "lookback study: plot %s skipped: %s\n", path, lb_last_error());
    }
}

lb_status lb_study_report(lb_study *s, double seconds)
{
    static cell_stats st[LB_RECIPE_T_COUNT][LB_RECIPE_M_COUNT];
    if (seconds < 0) { /* only the report is rewritten: keep the last measured wall time */
        char path[4200];
        json_object *old = json_object_from_file(study_path(s, path, sizeof path, "study.json"));
        double kept = json_num(old, "wall_seconds");
        if (isfinite(kept))
            seconds = kept;
        json_object_put(old);
    }
    json_object *root = json_object_new_object(), *cells = json_object_new_array(), *tasks = json_object_new_array();
    json_object *lr = json_object_new_array(), *opts = json_object_new_object();
    json_object_object_add(opts, "quick", json_object_new_boolean(s->quick));
    json_object_object_add(opts, "seeds", json_object_new_int(s->seeds));
    json_object_object_add(opts, "budget_seconds", json_object_new_double(s->budget));
    json_object_object_add(opts, "steps", json_object_new_int64(s->steps));
    json_object_object_add(opts, "command", json_object_new_string(s->command));
    json_object_object_add(opts, "eval_examples", json_object_new_int64(s->eval_examples));
    json_object_object_add(opts, "recall_scale", json_object_new_string(s->zoology ? "zoology" : "default"));
    json_object_object_add(opts, "threads", json_object_new_int(s->threads));
    json_object_object_add(opts, "jobs", json_object_new_int(s->parallel));
    json_object_object_add(root, "options", opts);
    json_object_object_add(root, "wall_seconds", seconds >= 0 ? json_object_new_double(seconds) : NULL);
    json_object_object_add(root, "job_seconds", json_real(stored_job_seconds(s)));
    for (int t = 0; t < LB_RECIPE_T_COUNT; t++) {
        if (!s->task_on[t])
            continue;
        for (int m = 0; m < LB_RECIPE_M_COUNT; m++)
            if (s->method_on[m] && method_applies((lb_recipe_method)m, (lb_recipe_task)t))
                stats_of(s, (lb_recipe_task)t, (lb_recipe_method)m, &st[t][m], cells);
            else
                memset(&st[t][m], 0, sizeof st[t][m]);
        const study_task *task = &s->tasks[t];
        json_object *o = json_object_new_object(), *lens = json_object_new_array();
        json_object_object_add(o, "name", json_object_new_string(task->name));
        json_object_object_add(o, "what", json_object_new_string(task->what));
        json_object_object_add(o, "data_task", json_object_new_string(lb_task_name(task->train.task)));
        json_object_object_add(o, "train_seq_len", json_object_new_int64(task->train.seq_len));
        for (int i = 0; i < task->n_tests; i++)
            json_object_array_add(lens, json_object_new_int64(task->test_len[i]));
        json_object_object_add(o, "test_lengths", lens);
        json_object_object_add(o, "chance", json_object_new_double(task_chance(task)));
        json_object_object_add(o, "cell_budget_seconds",
                               json_object_new_double(steps_only(s) ? 0 : task_budget(s, (lb_recipe_task)t, LB_STUDY_CELL)));
        json_object_object_add(o, "cell_budget_steps", json_object_new_int64(task_steps(s, LB_STUDY_CELL)));
        if (task->copy)
            json_object_object_add(o, "memoryless_loss", json_object_new_double(copy_baseline(task)));
        json_object_object_add(o, "text_pick", json_object_new_string(task->text_pick));
        int pick = best_fit(s, (lb_recipe_task)t, st[t]);
        json_object_object_add(o, "best_fit_measured", pick >= 0    ? json_object_new_string(lb_recipe_method_names[pick])
                                                       : pick == -2 ? json_object_new_string("none above chance")
                                                                    : NULL);
        if (pick >= 0)
            json_object_object_add(o, "best_fit_learnt",
                                   json_object_new_boolean(pick_learnt(task, &st[t][pick], task->n_tests - 1)));
        json_object_array_add(tasks, o);
    }
    for (int k = 0; k < s->n_jobs[LB_STUDY_LR]; k++) {
        char path[4200];
        json_object *r = json_object_from_file(job_result_path(s, &s->jobs[LB_STUDY_LR][k], path, sizeof path));
        if (r)
            json_object_array_add(lr, r);
    }
    json_object *rows = json_object_new_array();
    for (int i = 0; i < lb_recipes_count; i++) {
        const lb_recipe *row = &lb_recipes[i];
        json_object *o = json_object_new_object(), *lrs = json_object_new_array();
        lb_run_config rc;
        char text[512];
        recipe(s, row->task, row->method, &rc, text, sizeof text);
        json_object_object_add(o, "task", json_object_new_string(s->tasks[row->task].name));
        json_object_object_add(o, "method", json_object_new_string(lb_recipe_method_names[row->method]));
        json_object_object_add(o, "model", json_object_new_string(text));
        for (int k = 0; k < LB_RECIPE_MAX_LRS && row->lrs[k] > 0; k++)
            json_object_array_add(lrs, json_object_new_double(row->lrs[k]));
        json_object_object_add(o, "lrs", lrs);
        json_object_object_add(o, "budget_seconds", json_object_new_double(task_budget(s, row->task, LB_STUDY_CELL)));
        json_object_object_add(o, "stop_at", json_object_new_double(rc.train.stop_at));
        json_object_object_add(o, "select", json_object_new_string(lb_val_select_name(rc.train.select)));
        json_object_object_add(o, "source", json_object_new_string(row->source));
        json_object_array_add(rows, o);
    }
    json_object_object_add(root, "recipes", rows);
    json_object_object_add(root, "tasks", tasks);
    json_object_object_add(root, "lr_search", lr);
    json_object_object_add(root, "cells", cells);
    char path[4200];
    lb_status st_json = write_json(root, study_path(s, path, sizeof path, "study.json"));
    json_object_put(root);
    if (st_json != LB_OK)
        return st_json;
    char tmp[4300];
    study_path(s, path, sizeof path, "study.md");
    snprintf(tmp, sizeof tmp, "%s.tmp", path);
    lb_status checked = lb_output_check(path, "study report");
    if (checked != LB_OK)
        return checked;
    int replace = lb_output_present(path);
    FILE *f = fopen(tmp, "w");
    if (!f)
        return lb_error(LB_ERR_IO, "%s: cannot write (%s)", tmp, lb_system_error(errno));
    write_markdown(s, st, seconds, f);
    int bad = ferror(f) != 0 || fflush(f) != 0;
    bad |= fclose(f) != 0;
    if (bad) {
        lb_error(LB_ERR_IO, "%s: cannot write (%s)", path, lb_system_error(errno));
        unlink(tmp);
        return LB_ERR_IO;
    }
    if ((checked = lb_output_finish(tmp, path, "study report", replace)) != LB_OK)
        return checked;
    write_plots(s, st);
    return LB_OK;
}

/* ---- running the jobs (lab/jobs.h) ---- */

void lb_study_share_processors(lb_study_options *o, int jobs)
{
    if (!o)
        return;
    long avail = sysconf(_SC_NPROCESSORS_ONLN);
    const char *omp = getenv("OMP_NUM_THREADS");
    if (omp && atoi(omp) > 0)
        avail = atoi(omp);
    avail /= lb_dist_local_size();
    if (avail < 1)
        avail = 1;
    if (!jobs)
        jobs = o->threads > 0 ? (int)(avail / o->threads) : (int)avail;
    if (jobs < 1)
        jobs = 1;
    if (jobs > 64)
        jobs = 64;
    if (!o->threads)
        o->threads = avail / jobs > 1 ? (int)(avail / jobs) : 1;
    o->jobs = jobs;
}

static int study_count(void *ctx, int phase) { return lb_study_jobs(ctx, (lb_study_phase)phase); }
static const char *study_name(void *ctx, int phase, int i) { return lb_study_job_name(ctx, (lb_study_phase)phase, i); }
static int study_done(void *ctx, int phase, int i) { return lb_study_job_done(ctx, (lb_study_phase)phase, i); }
static double study_budget(void *ctx, int phase, int i) { return lb_study_job_budget(ctx, (lb_study_phase)phase, i); }
static lb_status study_run(void *ctx, int phase, int i) { return lb_study_run_job(ctx, (lb_study_phase)phase, i); }

static void study_summary(void *ctx, int phase, int i, char *buf, size_t size)
{
    lb_study_job_summary(ctx, (lb_study_phase)phase, i, buf, size);
}

static void study_begin(void *ctx, int cells, int stored, int left)
{
    const lb_study *s = ctx;
    fprintf(stderr, "study in %s: %d cells (%d already stored), %d jobs to run\n", s->out, cells, stored, left);
}

lb_status lb_study_run(lb_study *s, int quiet, lb_jobs_result *out)
{
    LB_CHECK_ARG(s && out, LB_ERR_VALUE);
    static const char *const phase_names[LB_STUDY_PHASES] = {"data", "lr probe", "cell"};
    lb_job_list jobs = {s,         "study",      LB_STUDY_PHASES, phase_names,  LB_STUDY_CELL, study_count,
                        study_name, study_done, study_budget,    study_run,    study_summary, study_begin};
    return lb_jobs_run(&jobs, s->parallel, quiet, "lookback study", out);
}

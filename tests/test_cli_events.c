/* A detector on a CSV event log from end to end, as a user runs it: import, train (class
 * weights, --select f1), eval with the rare-event measures; the stored scaling applied
 * identically by eval (a file made with --like), predict --csv and stream --csv (the same
 * scores, row by row, as the full forward on the windows); a file scaled differently is
 * refused; hostile rows while streaming; usage errors. */
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cli_support.h"
#include "data/dataset.h"
#include "train/trainer.h"

static char csv[512], newcsv[512], h5[512], like[512];

/* Two sources; x spikes before a rare label; a token column with a value unseen later. */
static void write_log(const char *path, int rows, int offset, int with_unseen)
{
    FILE *f = fopen(path, "w");
    CU_ASSERT_PTR_NOT_NULL_FATAL(f);
    fprintf(f, "time,machine,x,y,mode,alarm\n");
    for (int t = 0; t < rows; t++)
        for (int m = 0; m < 2; m++) {
            int tt = t + offset, spike = (tt * 5 + m * 3) % 17 == 0;
            const char *mode = with_unseen && t % 9 == 4 ? "maintenance" : tt % 3 ? "run" : "idle";
            fprintf(f, "%d,\"m,%d\",%d.%d,%d,%s,%d\n", tt, m, spike ? 40 : tt % 7, m, (tt * 13) % 11, mode, spike);
        }
    fclose(f);
}

static void setup(void)
{
    snprintf(csv, sizeof csv, "%s", path_in("log.csv"));
    snprintf(newcsv, sizeof newcsv, "%s", path_in("new.csv"));
    snprintf(h5, sizeof h5, "%s", path_in("log.h5"));
    snprintf(like, sizeof like, "%s", path_in("new.h5"));
    write_log(csv, 300, 0, 0);
    write_log(newcsv, 40, 1000, 1);
    const char *args[] = {"data", "csv", csv, "-o", h5, "--sequence-key", "machine", "--order-key", "time",
                          "--features", "x,y", "--tokens", "mode", "--label", "alarm", "--seq-len", "16", NULL};
    run_result r = run(args);
    EXPECT(r.code == 0, r);
    run_free(&r);
}

static const char *train_model(const char *name, const char *model)
{
    static char dir[4][512];
    static int next;
    char *d = dir[next++ % 4];
    snprintf(d, 512, "%s", path_in(name));
    const char *args[40] = {"train", "--data", h5, "--model", model, "--layers", "1", "--steps", "30", "--batch", "8",
                            "--lr", "0.01", "--eval-every", "10", "--class-weight", "balanced", "--select", "f1",
                            "--threads", "1", "--out", d, "--quiet", "--d-model", "16"};
    int n = 26;
    if (strcmp(model, "lstm") == 0) {
        args[n++] = "--hidden";
        args[n++] = "16";
    } else if (strcmp(model, "transformer") == 0) {
        args[n++] = "--heads";
        args[n++] = "2";
        args[n++] = "--d-ff";
        args[n++] = "16";
    }
    args[n] = NULL;
    run_result r = run(args);
    EXPECT(r.code == 0, r);
    run_free(&r);
    static char ck[4][600];
    snprintf(ck[next % 4], 600, "%s/checkpoint.h5", d);
    return ck[next % 4];
}

static void test_eval_measures_and_select(void)
{
    const char *ck = train_model("lstm", "lstm");
    const char *args[] = {"eval", "--checkpoint", ck, "--data", h5, "--threads", "1", NULL};
    run_result r = run(args);
    EXPECT(r.code == 0 && contains(r.out, "precision") && contains(r.out, "macro-F1") && contains(r.out, "PR-AUC") &&
               contains(r.out, "majority baseline: class 0 (the most frequent of the training targets)") &&
               contains(r.out, "confusion (rows: true class, columns: predicted)"),
           r);
    /* The reference beside the accuracy is the majority baseline printed below it, not 1 / C. */
    const char *ref = strstr(r.out, "(majority baseline "), *base = strstr(r.out, "for every target: accuracy ");
    double ref_acc = -1, base_acc = -2;
    if (ref && base) {
        sscanf(ref + strlen("(majority baseline "), "%lf", &ref_acc);
        sscanf(base + strlen("for every target: accuracy "), "%lf", &base_acc);
    }
    EXPECT(ref_acc == base_acc && ref_acc > 0.5 && !contains(r.out, "(chance"), r);
    run_free(&r);
    const char *json[] = {"eval", "--checkpoint", ck, "--data", h5, "--json", "--threads", "1", NULL};
    r = run(json);
    EXPECT(r.code == 0 && contains(r.out, "\"confusion\":[[") && contains(r.out, "\"majority_baseline\"") &&
               contains(r.out, "\"pr_auc\""),
           r);
    run_free(&r);
    /* metrics.csv holds the measures, config.json the choices */
    char path[600];
    snprintf(path, sizeof path, "%s/metrics.csv", path_in("lstm"));
    char *text = read_all(path, NULL);
    CU_ASSERT_TRUE(text && contains(text, ",f1,macro_f1,pr_auc,precision,recall,confusion,mfu,peak_memory_mib\n"));
    free(text);
    snprintf(path, sizeof path, "%s/config.json", path_in("lstm"));
    text = read_all(path, NULL);
    CU_ASSERT_TRUE(text && contains(text, "\"class-weight\": \"balanced\"") && contains(text, "\"select\": \"f1\""));
    free(text);
    /* a bad --class-weight is a usage error */
    const char *bad[] = {"train", "--data", h5, "--class-weight", "1,-2", "--out", path_in("bad"), NULL};
    r = run(bad);
    EXPECT(r.code == 2 && one_error_line(&r, "train") && contains(r.err, "--class-weight"), r);
    run_free(&r);
}

/* "row,line,source,position,label,predicted,probability,score" lines: the scores. */
static int parse_scores(const char *text, double *score, int *predicted, int *position, int max)
{
    int n = 0;
    const char *p = strchr(text, '\n');
    while (p && *++p && n < max) {
        long long row, line, pos;
        int label, pred;
        double prob, s;
        const char *q = strchr(p, '"'); /* the quoted source key "m,0" */
        const char *after = q ? strchr(q + 1, '"') : NULL;
        if (!after || sscanf(p, "%lld,%lld,", &row, &line) != 2 ||
            sscanf(after + 1, ",%lld,%d,%d,%lf,%lf", &pos, &label, &pred, &prob, &s) != 5)
            break;
        score[n] = s;
        predicted[n] = pred;
        position[n] = (int)pos;
        n++;
        p = strchr(p, '\n');
    }
    return n;
}

static void test_scores_agree(void)
{
    static const char *const families[] = {"lstm", "transformer", "conv"};
    for (int f = 0; f < 3; f++) {
        char name[32];
        snprintf(name, sizeof name, "scores_%s", families[f]);
        const char *ck = train_model(name, families[f]);
        char out[600];
        snprintf(out, sizeof out, "%s/scores.csv", path_in(name));
        const char *predict[] = {"predict", "--checkpoint", ck, "--csv", newcsv, "-o", out, "--threads", "1", NULL};
        run_result r = run(predict);
        EXPECT(r.code == 0 && contains(r.out, "80 rows"), r);
        run_free(&r);
        const char *stream[] = {"stream", "--checkpoint", ck, "--csv", newcsv, NULL};
        r = run(stream);
        EXPECT(r.code == 0 && contains(r.err, "80 rows of 2 sources") && contains(r.err, "token values unseen"), r);
        char *pred_text = read_all(out, NULL);
        CU_ASSERT_PTR_NOT_NULL_FATAL(pred_text);
        double a[100], b[100];
        int pa[100], pb[100], qa[100], qb[100];
        int na = parse_scores(pred_text, a, pa, qa, 100), nb = parse_scores(r.out, b, pb, qb, 100);
        CU_ASSERT_EQUAL(na, 80);
        CU_ASSERT_EQUAL(nb, 80);
        double worst = 0;
        for (int i = 0; i < na && i < nb; i++) {
            worst = fmax(worst, fabs(a[i] - b[i]));
            CU_ASSERT_EQUAL(qa[i], i / 2); /* rows alternate between the two machines */
            CU_ASSERT_EQUAL(qa[i], qb[i]);
            if (fabs(a[i] - b[i]) < 1e-4)
                CU_ASSERT_EQUAL(pa[i], pb[i]);
        }
        CU_ASSERT_TRUE(worst < 1e-5); /* chunked prefill vs row by row */
        if (worst >= 1e-5)
            fprintf(stderr, "\n  %s: predict and stream differ by %g\n", families[f], worst);
        run_free(&r);

        /* the same rows imported with the stored schema: the full forward on the first window of
         * each source gives the scores of its first 16 rows */
        const char *mk[] = {"data", "csv", newcsv, "-o", like, "--like", ck, "--force", NULL};
        r = run(mk);
        EXPECT(r.code == 0, r);
        run_free(&r);
        lb_dataset *ds = lb_dataset_open(like);
        lb_model *m = lb_checkpoint_load_model(ck);
        CU_ASSERT_PTR_NOT_NULL_FATAL(ds);
        CU_ASSERT_PTR_NOT_NULL_FATAL(m);
        lb_batch batch;
        CU_ASSERT_EQUAL_FATAL(lb_dataset_slice(ds, "test", 0, lb_dataset_split_size(ds, "test"), &batch), LB_OK);
        lb_graph *g = lb_graph_new();
        lb_model_input in = {batch.batch_size, batch.seq_len, NULL, batch.features, NULL};
        lb_var *y = lb_model_forward(g, m, &in, 0, NULL, NULL); /* [N, 16, 2] */
        CU_ASSERT_PTR_NOT_NULL_FATAL(y);
        /* windows: machine 0 (rows 0..15, 16..31, 24..39), then machine 1; file rows alternate */
        double full_worst = 0;
        int windows_per_source = (int)batch.batch_size / 2;
        for (int src = 0; src < 2; src++)
            for (int t = 0; t < 16; t++) {
                int w = src * windows_per_source;
                double l0 = lb_tensor_flat(y->value, (w * 16 + t) * 2), l1 = lb_tensor_flat(y->value, (w * 16 + t) * 2 + 1);
                double p1 = 1.0 / (1.0 + exp(l0 - l1));
                full_worst = fmax(full_worst, fabs(p1 - a[t * 2 + src]));
            }
        CU_ASSERT_TRUE(full_worst < 1e-5);
        if (full_worst >= 1e-5)
            fprintf(stderr, "\n  %s: the full forward and predict --csv differ by %g\n", families[f], full_worst);
        lb_graph_free(g);
        lb_batch_free(&batch);
        lb_model_free(m);
        lb_dataset_close(ds);
        free(pred_text);
        /* eval on the --like file works; on a file with its own scaling it is refused */
        const char *ev[] = {"eval", "--checkpoint", ck, "--data", like, "--threads", "1", NULL};
        r = run(ev);
        EXPECT(r.code == 0 && contains(r.out, "macro-F1"), r);
        run_free(&r);
    }
    char own[512], owncsv[512];
    snprintf(own, sizeof own, "%s", path_in("own.h5"));
    snprintf(owncsv, sizeof owncsv, "%s", path_in("own.csv"));
    write_log(owncsv, 40, 1000, 0); /* the same columns and token values, its own scaling */
    const char *mk[] = {"data", "csv", owncsv, "-o", own, "--sequence-key", "machine", "--order-key", "time",
                        "--features", "x,y", "--tokens", "mode", "--label", "alarm", "--seq-len", "16", NULL};
    run_result r = run(mk);
    EXPECT(r.code == 0, r);
    run_free(&r);
    char ck[600];
    snprintf(ck, sizeof ck, "%s/checkpoint.h5", path_in("lstm"));
    const char *ev[] = {"eval", "--checkpoint", ck, "--data", own, "--threads", "1", NULL};
    r = run(ev);
    EXPECT(r.code == 1 && one_error_line(&r, "eval") && contains(r.err, "does not read rows as the training file") &&
               contains(r.err, "--like"),
           r);
    run_free(&r);
}

static void test_hostile_rows_and_usage(void)
{
    char ck[600], bad[512], out[600];
    snprintf(ck, sizeof ck, "%s/checkpoint.h5", path_in("lstm"));
    snprintf(bad, sizeof bad, "%s", path_in("bad.csv"));
    snprintf(out, sizeof out, "%s", path_in("bad_scores.csv"));
    const char *text = "time,machine,x,y,mode,alarm\n1,a,1,2,run,0\n2,a,hot,2,run,0\n3,a,1,2,run,0\n";
    CU_ASSERT_TRUE_FATAL(write_all(bad, text, strlen(text)));
    const char *stream[] = {"stream", "--checkpoint", ck, "--csv", bad, NULL};
    run_result r = run(stream);
    EXPECT(r.code == 1 && one_error_line(&r, "stream") && contains(r.err, "row 3 (line 3), column 'x'") &&
               contains(r.err, "'hot'") && count_lines(r.out) == 2, /* the header and the first row's score */
           r);
    run_free(&r);
    const char *predict[] = {"predict", "--checkpoint", ck, "--csv", bad, "-o", out, NULL};
    r = run(predict);
    EXPECT(r.code == 1 && one_error_line(&r, "predict") && contains(r.err, "row 3 (line 3), column 'x'"), r);
    CU_ASSERT_NOT_EQUAL(access(out, F_OK), 0);
    run_free(&r);
    const char *missing = "time,machine,x,mode,alarm\n1,a,1,run,0\n";
    CU_ASSERT_TRUE_FATAL(write_all(bad, missing, strlen(missing)));
    r = run(stream);
    EXPECT(r.code == 1 && one_error_line(&r, "stream") && contains(r.err, "no column 'y'"), r);
    run_free(&r);
    /* usage */
    const char *both[] = {"predict", "--checkpoint", ck, "--csv", newcsv, "--data", h5, "-o", out, NULL};
    r = run(both);
    EXPECT(r.code == 2 && one_error_line(&r, "predict"), r);
    run_free(&r);
    const char *self[] = {"predict", "--checkpoint", ck, "--csv", newcsv, "-o", newcsv, "--force", NULL};
    r = run(self);
    EXPECT(r.code == 1 && contains(r.err, "an input of this command"), r);
    run_free(&r);
    const char *strict[] = {"stream", "--checkpoint", ck, "--csv", newcsv, "--strict", NULL};
    r = run(strict);
    EXPECT(r.code == 2 && one_error_line(&r, "stream"), r);
    run_free(&r);
    /* a checkpoint of a generated task has no schema: --csv does not apply */
    const char *small[] = {"train", "--data", small_data(), "--model", "lstm", "--layers", "1", "--hidden", "8",
                           "--steps", "2", "--out", path_in("tok"), "--quiet", NULL};
    r = run(small);
    EXPECT(r.code == 0, r);
    run_free(&r);
    snprintf(ck, sizeof ck, "%s/checkpoint.h5", path_in("tok"));
    const char *tok[] = {"stream", "--checkpoint", ck, "--csv", newcsv, NULL};
    r = run(tok);
    EXPECT(r.code == 1 && one_error_line(&r, "stream") && contains(r.err, "no events schema"), r);
    run_free(&r);
}

/* compare on the event log: the second table (accuracy, F1 of class 1, macro-F1, PR-AUC,
 * costs) with the majority row, and the same figures in summary.json. */
static void test_compare_table(void)
{
    char out[512];
    snprintf(out, sizeof out, "%s", path_in("cmp"));
    const char *args[] = {"compare", "--train", h5, "--models", "lstm,conv", "--eval", h5, "--out", out, "--budget",
                          "0", "--steps", "4", "--batch", "8", "--layers", "1", "--d-model", "8", "--hidden", "8",
                          "--threads", "1", "--quiet", NULL};
    run_result r = run(args);
    EXPECT(r.code == 0 && contains(r.out, "F1(1)") && contains(r.out, "PR-AUC") && contains(r.out, "majority") &&
               contains(r.out, "average_precision_score"),
           r);
    run_free(&r);
    char path[600];
    snprintf(path, sizeof path, "%s/summary.json", out);
    char *text = read_all(path, NULL);
    CU_ASSERT_TRUE(text && contains(text, "\"f1\"") && contains(text, "\"macro_f1\"") &&
                   contains(text, "\"pr_auc\"") && contains(text, "\"majority_baseline\"") &&
                   contains(text, "\"eval_seconds\""));
    free(text);
    /* an evaluation file scaled otherwise is refused before anything is trained */
    char own[512], owncsv[512];
    snprintf(own, sizeof own, "%s", path_in("own2.h5"));
    snprintf(owncsv, sizeof owncsv, "%s", path_in("own2.csv"));
    write_log(owncsv, 200, 500, 0); /* 30 test rows per machine: a test window each */
    const char *mk[] = {"data", "csv", owncsv, "-o", own, "--sequence-key", "machine", "--order-key", "time",
                        "--features", "x,y", "--tokens", "mode", "--label", "alarm", "--seq-len", "16", NULL};
    r = run(mk);
    EXPECT(r.code == 0, r);
    run_free(&r);
    char out2[512];
    snprintf(out2, sizeof out2, "%s", path_in("cmp2"));
    const char *bad[] = {"compare", "--train", h5, "--models", "lstm", "--eval", own, "--out", out2, "--budget", "0",
                         "--steps", "2", "--quiet", NULL};
    r = run(bad);
    EXPECT(r.code == 1 && one_error_line(&r, "compare") && contains(r.err, "does not read rows as the training file"),
           r);
    run_free(&r);
}

/* --missing on stream --csv and predict --csv: the default is the training file's policy
 * (refuse, whose advice names --missing); skip leaves the row out (counted); previous
 * scores the row as if it held its source's previous value (the same scores as a file
 * where that value is filled in). stream --every N prints every N-th row and the last. */
static void test_missing_and_every(void)
{
    char ck[600], holed[512], filled[512], out[600];
    snprintf(ck, sizeof ck, "%s/checkpoint.h5", path_in("lstm"));
    snprintf(holed, sizeof holed, "%s", path_in("holed.csv"));
    snprintf(filled, sizeof filled, "%s", path_in("filled.csv"));
    snprintf(out, sizeof out, "%s", path_in("holed_scores.csv"));
    /* machine a: rows 1..4, x of row 3 (line 4) missing; its previous value is 5.5 */
    const char *h = "time,machine,x,y,mode,alarm\n1,a,1,2,run,0\n2,a,5.5,3,run,0\n3,a,,4,idle,0\n4,a,2,2,run,0\n";
    const char *f = "time,machine,x,y,mode,alarm\n1,a,1,2,run,0\n2,a,5.5,3,run,0\n3,a,5.5,4,idle,0\n4,a,2,2,run,0\n";
    CU_ASSERT_TRUE_FATAL(write_all(holed, h, strlen(h)));
    CU_ASSERT_TRUE_FATAL(write_all(filled, f, strlen(f)));
    const char *refuse[] = {"stream", "--checkpoint", ck, "--csv", holed, NULL};
    run_result r = run(refuse);
    EXPECT(r.code == 1 && one_error_line(&r, "stream") && contains(r.err, "row 4 (line 4), column 'x'") &&
               contains(r.err, "--missing skip or previous") && count_lines(r.out) == 3, /* header, rows 2 and 3 */
           r);
    run_free(&r);
    const char *prev[] = {"stream", "--checkpoint", ck, "--csv", holed, "--missing", "previous", NULL};
    r = run(prev);
    const char *ref_args[] = {"stream", "--checkpoint", ck, "--csv", filled, NULL};
    run_result ref = run(ref_args);
    EXPECT(r.code == 0 && count_lines(r.out) == 5, r);
    EXPECT(ref.code == 0 && r.out && ref.out && strcmp(r.out, ref.out) == 0, ref); /* the same lines, byte for byte */
    run_free(&r);
    run_free(&ref);
    const char *skip[] = {"stream", "--checkpoint", ck, "--csv", holed, "--missing", "skip", NULL};
    r = run(skip);
    EXPECT(r.code == 0 && count_lines(r.out) == 4 && contains(r.err, "3 rows of 1 sources") &&
               contains(r.err, "1 rows with missing values skipped") && !contains(r.out, "\n4,4,"),
           r);
    run_free(&r);
    const char *pskip[] = {"predict", "--checkpoint", ck, "--csv", holed, "--missing", "skip", "-o", out, NULL};
    r = run(pskip);
    EXPECT(r.code == 0 && contains(r.out, "3 rows"), r);
    run_free(&r);
    char *text = read_all(out, NULL);
    int as_expected = text && count_lines(text) == 4 && contains(text, "\n5,5,\"a\",2,") && !contains(text, "\n4,4,");
    CU_ASSERT_TRUE(as_expected);
    if (!as_expected)
        fprintf(stderr, "\n  scores: %s\n", text ? text : "(none)");
    free(text);
    const char *pdefault[] = {"predict", "--checkpoint", ck, "--csv", holed, "-o", out, "--force", NULL};
    r = run(pdefault);
    EXPECT(r.code == 1 && one_error_line(&r, "predict") && contains(r.err, "column 'x'"), r);
    run_free(&r);
    /* usage: a bad policy, --missing without --csv */
    const char *badp[] = {"stream", "--checkpoint", ck, "--csv", holed, "--missing", "zero", NULL};
    r = run(badp);
    EXPECT(r.code == 2 && one_error_line(&r, "stream") && contains(r.err, "--missing"), r);
    run_free(&r);
    const char *notcsv[] = {"stream", "--checkpoint", ck, "--missing", "skip", NULL};
    r = run(notcsv);
    EXPECT(r.code == 2 && one_error_line(&r, "stream") && contains(r.err, "--missing applies to CSV rows"), r);
    run_free(&r);
    const char *pnot[] = {"predict", "--checkpoint", ck, "--data", h5, "-o", out, "--force", "--missing", "skip", NULL};
    r = run(pnot);
    EXPECT(r.code == 2 && one_error_line(&r, "predict") && contains(r.err, "--missing applies to CSV rows"), r);
    run_free(&r);
    /* --every 3 on 80 rows: rows 3, 6, ..., 78 and the last (80): 27 lines after the header */
    const char *all[] = {"stream", "--checkpoint", ck, "--csv", newcsv, NULL};
    const char *every[] = {"stream", "--checkpoint", ck, "--csv", newcsv, "--every", "3", NULL};
    run_result full = run(all);
    r = run(every);
    EXPECT(full.code == 0 && r.code == 0 && count_lines(full.out) == 81 && count_lines(r.out) == 28, r);
    const char *last_full = full.out ? strrchr(full.out, '\n') : NULL, *last_every = r.out ? strrchr(r.out, '\n') : NULL;
    while (last_full && last_full > full.out && last_full[-1] != '\n')
        last_full--;
    while (last_every && last_every > r.out && last_every[-1] != '\n')
        last_every--;
    CU_ASSERT_TRUE(last_full && last_every && strcmp(last_full, last_every) == 0); /* the last row, the same line */
    const char *third = full.out ? full.out : "";
    for (int i = 0; i < 3 && third; i++)
        third = strchr(third, '\n') ? strchr(third, '\n') + 1 : NULL;
    const char *first_every = r.out && strchr(r.out, '\n') ? strchr(r.out, '\n') + 1 : NULL;
    CU_ASSERT_TRUE(third && first_every && strncmp(third, first_every, (size_t)(strchr(third, '\n') - third)) == 0);
    run_free(&full);
    run_free(&r);
    const char *every80[] = {"stream", "--checkpoint", ck, "--csv", newcsv, "--every", "40", "--json", NULL};
    r = run(every80); /* 80 is a multiple of 40: rows 40 and 80, printed once each */
    EXPECT(r.code == 0 && count_lines(r.out) == 2, r);
    run_free(&r);
}

int main(void)
{
    snprintf(work_dir, sizeof work_dir, "/tmp/lookback_test_cli_events_%d", (int)getpid());
    mkdir(work_dir, 0777);
    const lb_test_case cases[] = {
        {"the event log imported", setup},
        {"eval, metrics.csv and config.json: the rare-event measures, --class-weight, --select f1",
         test_eval_measures_and_select},
        {"predict --csv, stream --csv and the full forward on --like windows give the same scores (3 families); "
         "a file scaled differently is refused",
         test_scores_agree},
        {"hostile rows while streaming and predicting; usage errors", test_hostile_rows_and_usage},
        {"--missing on stream --csv and predict --csv; stream --csv --every prints the last row", test_missing_and_every},
        {"compare: F1, PR-AUC and costs beside the majority baseline; a file scaled otherwise refused",
         test_compare_table},
        {NULL, NULL},
    };
    int rc = lb_test_main("cli_events", cases);
    remove_tree(work_dir);
    return rc;
}

/* `lookback predict` (full and --incremental) and `lookback stream` as a user runs
 * them: the HDF5 datasets and attributes predict writes, the streaming path agreeing
 * with the full forward within 1e-4 for every family, stream's lines, --every,
 * --json, bad ids named by line and column, --strict, and usage errors. */
#include <hdf5.h>
#include <json-c/json.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cli_support.h"
#include "data/dataset.h"

const char *__lsan_default_suppressions(void);
const char *__lsan_default_suppressions(void) { return "leak:libhdf5\n"; }

/* A small spike file: T = 40, clue 1..30 back, 64 / 16 / 16 sequences. */
static const char *spike_file(void)
{
    static char path[512];
    if (!path[0]) {
        snprintf(path, sizeof path, "%s", path_in("spike.h5"));
        const char *args[] = {"data", "--task", "spike", "--seq-len", "40", "--max-distance", "30", "--train", "64",
                              "--val", "16", "--test", "16", "-o", path, NULL};
        run_result r = run(args);
        EXPECT(r.code == 0, r);
        run_free(&r);
    }
    return path;
}

/* A checkpoint of `model` trained for a few steps (2 layers, small widths). */
static const char *checkpoint(const char *model, const char *pos)
{
    static char paths[8][600];
    static int used;
    char dir[512];
    snprintf(dir, sizeof dir, "%s", path_in(model));
    strcat(dir, "-");
    strcat(dir, pos);
    char *ck = paths[used++ % 8];
    snprintf(ck, sizeof paths[0], "%s/checkpoint.h5", dir);
    if (access(ck, F_OK) == 0)
        return ck;
    int attention = strcmp(model, "transformer") == 0 || strcmp(model, "local") == 0;
    const char *args[32] = {"train", "--data", spike_file(), "--model", model, "--layers", "2", "--d-model", "16",
                            "--steps", "4", "--batch", "8", "--eval-every", "0", "--quiet", "--out", dir};
    int n = 18;
    if (attention) { /* options that apply to attention only */
        const char *more[] = {"--pos", pos, "--heads", "2", "--d-ff", "16"};
        for (int i = 0; i < 6; i++)
            args[n++] = more[i];
    }
    if (strcmp(model, "local") == 0) {
        args[n++] = "--window";
        args[n++] = "5";
    }
    if (strcmp(model, "lstm") == 0) {
        args[n++] = "--hidden";
        args[n++] = "16";
    }
    args[n] = NULL;
    run_result r = run(args);
    EXPECT(r.code == 0, r);
    run_free(&r);
    return ck;
}

/* Reads dataset `name` of an HDF5 file as doubles; *n receives the element count. */
static double *read_set(const char *path, const char *name, int64_t *n)
{
    hid_t f = H5Fopen(path, H5F_ACC_RDONLY, H5P_DEFAULT);
    if (f < 0)
        return NULL;
    hid_t d = H5Dopen2(f, name, H5P_DEFAULT);
    double *buf = NULL;
    if (d >= 0) {
        hid_t s = H5Dget_space(d);
        *n = H5Sget_simple_extent_npoints(s);
        buf = malloc((size_t)*n * sizeof *buf);
        if (H5Dread(d, H5T_NATIVE_DOUBLE, H5S_ALL, H5S_ALL, H5P_DEFAULT, buf) < 0) {
            free(buf);
            buf = NULL;
        }
        H5Sclose(s);
        H5Dclose(d);
    }
    H5Fclose(f);
    return buf;
}

static int attr_is(const char *path, const char *name, const char *want)
{
    hid_t f = H5Fopen(path, H5F_ACC_RDONLY, H5P_DEFAULT);
    hid_t a = H5Aopen(f, name, H5P_DEFAULT);
    hid_t t = H5Aget_type(a);
    char buf[1024] = {0};
    int ok = 0;
    if (a >= 0 && !H5Tis_variable_str(t) && H5Tget_size(t) < sizeof buf) {
        hid_t m = H5Tcopy(t);
        ok = H5Aread(a, m, buf) >= 0 && strcmp(buf, want) == 0;
        H5Tclose(m);
    } else if (a >= 0) {
        char *s = NULL;
        hid_t m = H5Tcopy(t);
        ok = H5Aread(a, m, &s) >= 0 && s && strcmp(s, want) == 0;
        H5free_memory(s);
        H5Tclose(m);
    }
    H5Tclose(t);
    H5Aclose(a);
    H5Fclose(f);
    return ok;
}

static run_result predict(const char *ck, const char *out, const char *extra1, const char *extra2)
{
    const char *args[] = {"predict", "--checkpoint", ck, "--data", spike_file(), "--threads", "1", "-o", out,
                          extra1, extra2, NULL};
    return run(args);
}

/* predict and predict --incremental agree within 1e-4, for every family. */
static void test_predict_every_family(void)
{
    const char *models[5][2] = {{"transformer", "rotary"}, {"transformer", "learned"}, {"local", "sinusoidal"},
                                {"lstm", "none"},          {"conv", "none"}};
    for (int i = 0; i < 5; i++) {
        const char *ck = checkpoint(models[i][0], models[i][1]);
        char full[512], inc[512], inc7[512];
        snprintf(full, sizeof full, "%s", path_in("full.h5"));
        snprintf(inc, sizeof inc, "%s", path_in("inc.h5"));
        snprintf(inc7, sizeof inc7, "%s", path_in("inc7.h5"));
        remove(full);
        remove(inc);
        remove(inc7);
        run_result r = predict(ck, full, NULL, NULL);
        EXPECT(r.code == 0 && contains(r.out, "16 examples of the test split") && contains(r.out, "accuracy"), r);
        run_free(&r);
        r = predict(ck, inc, "--incremental", NULL);
        EXPECT(r.code == 0 && contains(r.out, "streaming path"), r);
        run_free(&r);
        r = predict(ck, inc7, "--incremental", "--chunk=7");
        EXPECT(r.code == 0, r);
        run_free(&r);
        int64_t n = 0, m = 0, k = 0;
        double *a = read_set(full, "logits", &n), *b = read_set(inc, "logits", &m), *c = read_set(inc7, "logits", &k);
        CU_ASSERT_PTR_NOT_NULL_FATAL(a);
        CU_ASSERT_PTR_NOT_NULL_FATAL(b);
        CU_ASSERT_PTR_NOT_NULL_FATAL(c);
        CU_ASSERT_EQUAL(n, 16 * 8); /* 16 examples, 8 sensor readings as classes */
        CU_ASSERT_EQUAL(m, n);
        CU_ASSERT_EQUAL(k, n);
        double worst = 0;
        for (int64_t j = 0; j < n && j < m && j < k; j++) {
            worst = fmax(worst, fabs(a[j] - b[j]));
            worst = fmax(worst, fabs(a[j] - c[j]));
        }
        if (!(worst <= 1e-4))
            fprintf(stderr, "\n  %s: predict vs --incremental differ by %.3g\n", models[i][0], worst);
        CU_ASSERT_TRUE(worst <= 1e-4);
        CU_ASSERT_TRUE(attr_is(full, "checkpoint", ck));
        CU_ASSERT_TRUE(attr_is(full, "data", spike_file()));
        CU_ASSERT_TRUE(attr_is(full, "path", "full"));
        CU_ASSERT_TRUE(attr_is(inc, "path", "incremental"));
        CU_ASSERT_TRUE(attr_is(full, "model", models[i][0]));
        /* predicted is the arg-max of the logits; target and distance as in the file. */
        int64_t np = 0, nt = 0, nd = 0;
        double *pred = read_set(full, "predicted", &np), *target = read_set(full, "target", &nt);
        double *dist = read_set(full, "distance", &nd);
        CU_ASSERT_EQUAL(np, 16);
        CU_ASSERT_EQUAL(nt, 16);
        CU_ASSERT_EQUAL(nd, 16);
        lb_dataset *ds = lb_dataset_open(spike_file());
        lb_batch bt;
        CU_ASSERT_EQUAL_FATAL(lb_dataset_slice(ds, "test", 0, 16, &bt), LB_OK);
        for (int64_t e = 0; pred && target && dist && e < 16; e++) {
            int best = 0;
            for (int j = 1; j < 8; j++)
                if (a[e * 8 + j] > a[e * 8 + best])
                    best = j;
            CU_ASSERT_EQUAL((int)pred[e], best);
            CU_ASSERT_EQUAL((int)target[e], bt.targets[e]);
            CU_ASSERT_EQUAL((int)dist[e], bt.distance[e]);
        }
        lb_batch_free(&bt);
        lb_dataset_close(ds);
        free(pred);
        free(target);
        free(dist);
        free(a);
        free(b);
        free(c);
    }
}

static void test_predict_usage(void)
{
    const char *ck = checkpoint("lstm", "none");
    char out[512];
    snprintf(out, sizeof out, "%s", path_in("usage.h5"));
    remove(out);
    const char *no_out[] = {"predict", "--checkpoint", ck, "--data", spike_file(), NULL};
    run_result r = run(no_out);
    EXPECT(r.code == 2 && one_error_line(&r, "predict") && contains(r.err, "-o"), r);
    run_free(&r);
    r = predict(ck, out, "--chunk", "4");
    EXPECT(r.code == 2 && contains(r.err, "--incremental"), r);
    run_free(&r);
    r = predict(ck, out, NULL, NULL);
    EXPECT(r.code == 0, r);
    run_free(&r);
    r = predict(ck, out, NULL, NULL); /* exists */
    EXPECT(r.code == 1 && contains(r.err, "already exists") && contains(r.err, "--force"), r);
    run_free(&r);
    r = predict(ck, out, "--force", NULL);
    EXPECT(r.code == 0, r);
    run_free(&r);
    char fifo[512];
    snprintf(fifo, sizeof fifo, "%s", path_in("fifo.h5"));
    CU_ASSERT_EQUAL(mkfifo(fifo, 0600), 0);
    r = predict(ck, fifo, "--force", NULL); /* never replaced, even with --force */
    struct stat sb;
    EXPECT(r.code == 1 && contains(r.err, "not a regular file") && stat(fifo, &sb) == 0 && S_ISFIFO(sb.st_mode), r);
    run_free(&r);
}

/* The first test example's tokens as text, `per_line` ids per line. */
static void write_tokens(const char *path, int per_line, const char *extra)
{
    lb_dataset *ds = lb_dataset_open(spike_file());
    lb_batch b;
    CU_ASSERT_EQUAL_FATAL(lb_dataset_slice(ds, "test", 0, 1, &b), LB_OK);
    FILE *f = fopen(path, "w");
    for (int64_t t = 0; t < b.seq_len; t++)
        fprintf(f, "%d%s", b.tokens[t], (t + 1) % per_line == 0 ? "\n" : "  ");
    if (extra)
        fputs(extra, f);
    fclose(f);
    lb_batch_free(&b);
    lb_dataset_close(ds);
}

/* stream prints one line per event; the last equals predict's answer for the example. */
static void test_stream_matches_predict(void)
{
    const char *models[3][2] = {{"transformer", "sinusoidal"}, {"lstm", "none"}, {"conv", "none"}};
    for (int i = 0; i < 3; i++) {
        const char *ck = checkpoint(models[i][0], models[i][1]);
        char tokens[512], out[512];
        snprintf(tokens, sizeof tokens, "%s", path_in("tokens.txt"));
        snprintf(out, sizeof out, "%s", path_in("stream_ref.h5"));
        write_tokens(tokens, 7, NULL);
        remove(out);
        run_result p = predict(ck, out, "--examples", "1");
        EXPECT(p.code == 0, p);
        run_free(&p);
        int64_t n = 0;
        double *logits = read_set(out, "logits", &n);
        CU_ASSERT_PTR_NOT_NULL_FATAL(logits);
        const char *args[] = {"stream", "--checkpoint", ck, "--input", tokens, "--json", NULL};
        run_result r = run(args);
        EXPECT(r.code == 0 && count_lines(r.out) == 40 && contains(r.err, "40 events"), r);
        /* The last line: {"event":40,"token":..,"class":c,"probability":p,"state_bytes":..} */
        const char *last = r.out;
        for (const char *q = r.out; *q; q++)
            if (q[0] == '\n' && q[1])
                last = q + 1;
        json_object *o = json_tokener_parse(last);
        CU_ASSERT_PTR_NOT_NULL_FATAL(o);
        json_object *v;
        int best = 0;
        for (int j = 1; j < 8; j++)
            if (logits[j] > logits[best])
                best = j;
        double sum = 0;
        for (int j = 0; j < 8; j++)
            sum += exp(logits[j] - logits[best]);
        CU_ASSERT_TRUE(json_object_object_get_ex(o, "event", &v) && json_object_get_int(v) == 40);
        CU_ASSERT_TRUE(json_object_object_get_ex(o, "class", &v) && json_object_get_int(v) == best);
        CU_ASSERT_TRUE(json_object_object_get_ex(o, "probability", &v) &&
                       fabs(json_object_get_double(v) - 1.0 / sum) < 1e-4);
        CU_ASSERT_TRUE(json_object_object_get_ex(o, "state_bytes", &v) && json_object_get_int64(v) > 0);
        json_object_put(o);
        run_free(&r);
        free(logits);
    }
}

static void test_stream_options_and_bad_input(void)
{
    const char *ck = checkpoint("transformer", "rotary");
    char tokens[512];
    snprintf(tokens, sizeof tokens, "%s", path_in("tokens_bad.txt"));
    /* 40 good ids on lines 1-4 (10 per line), then line 5: "3 x7 99999 4". */
    write_tokens(tokens, 10, "3 x7 99999 4\n");
    const char *every[] = {"stream", "--checkpoint", ck, "--input", tokens, "--every", "5", NULL};
    run_result r = run(every);
    /* every 5th event, then the last (42) although 42 is not a multiple of 5 */
    EXPECT(r.code == 0 && count_lines(r.out) == 9 && contains(r.out, "event 40: class ") && contains(r.out, "(p = ") &&
               contains(r.out, "\nevent 42: class ") && !contains(r.out, "event 41") &&
               contains(r.err, "line 5, column 3: 'x7' is not a token id") && contains(r.err, "line 5, column 6: '99999'") &&
               contains(r.err, "42 events, 2 bad ids skipped"),
           r);
    run_free(&r);
    const char *strict[] = {"stream", "--checkpoint", ck, "--input", tokens, "--strict", NULL};
    r = run(strict);
    EXPECT(r.code == 1 && count_lines(r.out) == 41 && one_error_line(&r, "stream") &&
               contains(r.err, "line 5, column 3") && !contains(r.err, "column 6") && !contains(r.err, "skipped"),
           r);
    run_free(&r);
    const char *missing[] = {"stream", "--checkpoint", ck, "--input", path_in("nope.txt"), NULL};
    r = run(missing);
    EXPECT(r.code == 1 && one_error_line(&r, "stream") && contains(r.err, "nope.txt"), r);
    run_free(&r);
    const char *bad_every[] = {"stream", "--checkpoint", ck, "--every", "0", NULL};
    r = run(bad_every);
    EXPECT(r.code == 2 && contains(r.err, "--every"), r);
    run_free(&r);
    const char *no_ck[] = {"stream", NULL};
    r = run(no_ck);
    EXPECT(r.code == 2 && contains(r.err, "--checkpoint"), r);
    run_free(&r);
    /* Standard input is /dev/null here: no events, no lines, exit 0. */
    const char *empty[] = {"stream", "--checkpoint", ck, NULL};
    r = run(empty);
    EXPECT(r.code == 0 && count_lines(r.out) == 0 && contains(r.err, "0 events"), r);
    run_free(&r);
}

/* Every byte of the input is accounted for: a NUL byte inside a line is a bad token
 * named by its column (skipped, or the end with --strict), and the ids after it on the
 * same line are still read. */
static void test_stream_nul_bytes(void)
{
    const char *ck = checkpoint("transformer", "rotary");
    char tokens[512];
    snprintf(tokens, sizeof tokens, "%s", path_in("tokens_nul.txt"));
    static const char text[] = "1 2\0" "3 4\n5\n"; /* 5 ids and a NUL at line 1, column 4 */
    CU_ASSERT_TRUE(write_all(tokens, text, sizeof text - 1));
    const char *args[] = {"stream", "--checkpoint", ck, "--input", tokens, NULL};
    run_result r = run(args);
    EXPECT(r.code == 0 && count_lines(r.out) == 5 && contains(r.out, "event 5: class ") &&
               contains(r.err, "line 1, column 4: a NUL byte is not a token id; skipped") &&
               contains(r.err, "5 events, 1 bad ids skipped"),
           r);
    run_free(&r);
    const char *strict[] = {"stream", "--checkpoint", ck, "--input", tokens, "--strict", NULL};
    r = run(strict);
    EXPECT(r.code == 1 && count_lines(r.out) == 2 && one_error_line(&r, "stream") &&
               contains(r.err, "line 1, column 4: a NUL byte") && !contains(r.err, "skipped"),
           r);
    run_free(&r);
}

/* A model with learned positions streams past its position table's rows (1024 here, the
 * default, though it was trained on 40 events): the window of the last 1024 events slides
 * once at event 1025, and that event is printed (--every 1025). */
static void test_stream_learned_positions_limit(void)
{
    const char *ck = checkpoint("transformer", "learned");
    char tokens[512];
    snprintf(tokens, sizeof tokens, "%s", path_in("tokens_long.txt"));
    FILE *f = fopen(tokens, "w");
    CU_ASSERT_PTR_NOT_NULL_FATAL(f);
    for (int i = 0; i < 1025; i++)
        fprintf(f, "%d\n", 1 + i % 8);
    fclose(f);
    const char *args[] = {"stream", "--checkpoint", ck, "--input", tokens, "--every", "1025", NULL};
    run_result r = run(args);
    EXPECT(r.code == 0 && count_lines(r.out) == 1 && contains(r.out, "event 1025:") &&
               contains(r.err, "window of 1024 events (learned positions), slid 1 times"),
           r);
    run_free(&r);
}

/* Sets every target of every split of an HDF5 data file to -100 (the ignore index). */
static void ignore_every_target(const char *path)
{
    hid_t f = H5Fopen(path, H5F_ACC_RDWR, H5P_DEFAULT);
    CU_ASSERT_FATAL(f >= 0);
    const char *sets[] = {"/train/targets", "/val/targets", "/test/targets"};
    for (int i = 0; i < 3; i++) {
        hid_t d = H5Dopen2(f, sets[i], H5P_DEFAULT);
        CU_ASSERT_FATAL(d >= 0);
        hid_t sp = H5Dget_space(d);
        hssize_t n = H5Sget_simple_extent_npoints(sp);
        int32_t *v = malloc((size_t)n * sizeof *v);
        for (hssize_t k = 0; k < n; k++)
            v[k] = -100;
        CU_ASSERT(H5Dwrite(d, H5T_NATIVE_INT32, H5S_ALL, H5S_ALL, H5P_DEFAULT, v) >= 0);
        free(v);
        H5Sclose(sp);
        H5Dclose(d);
    }
    H5Fclose(f);
}

/* A file with no scored target (every target -100) is an error before any work: train
 * creates no run folder, eval prints no table (before: "done", exit 0, loss 0.0000),
 * compare trains nothing and creates no report folder. */
static void test_no_scored_target(void)
{
    const char *ck = checkpoint("transformer", "rotary");
    char ignored[512], cmd[1200];
    snprintf(ignored, sizeof ignored, "%s", path_in("ignored.h5"));
    snprintf(cmd, sizeof cmd, "cp '%s' '%s'", spike_file(), ignored);
    CU_ASSERT_EQUAL_FATAL(system(cmd), 0);
    ignore_every_target(ignored);
    char dir[512];
    snprintf(dir, sizeof dir, "%s", path_in("ignored-run"));
    const char *train[] = {"train", "--data", ignored, "--d-model", "8", "--steps", "2", "--batch", "8",
                           "--out", dir, NULL};
    run_result r = run(train);
    EXPECT(r.code == 1 && one_error_line(&r, "train") &&
               contains(r.err, "the train split has no scored target (all 64 targets of its 64 examples are -100") &&
               !contains(r.err, "done"),
           r);
    run_free(&r);
    CU_ASSERT_NOT_EQUAL(access(dir, F_OK), 0);
    const char *eval[] = {"eval", "--checkpoint", ck, "--data", ignored, NULL};
    r = run(eval);
    EXPECT(r.code == 1 && one_error_line(&r, "eval") && r.out[0] == '\0' &&
               contains(r.err, "the test split has no scored target"),
           r);
    run_free(&r);
    const char *json[] = {"eval", "--checkpoint", ck, "--data", ignored, "--split", "val", "--json", NULL};
    r = run(json);
    EXPECT(r.code == 1 && r.out[0] == '\0' && contains(r.err, "the val split has no scored target"), r);
    run_free(&r);
    /* compare: as its training file or as an evaluation file, refused before any model is trained. */
    for (int k = 0; k < 2; k++) {
        char out[512];
        snprintf(out, sizeof out, "%s-%d", path_in("ignored-compare"), k);
        const char *compare[] = {"compare", "--train", k == 0 ? ignored : spike_file(), "--models", "a=lstm", "--eval",
                                 k == 0 ? spike_file() : ignored, "--budget", "0", "--steps", "1", "--d-model", "8",
                                 "--quiet", "--out", out, NULL};
        r = run(compare);
        EXPECT(r.code == 1 && one_error_line(&r, "compare") &&
                   contains(r.err, k == 0 ? "the train split has no scored target" : "the test split has no scored target"),
               r);
        run_free(&r);
        CU_ASSERT_NOT_EQUAL(access(out, F_OK), 0);
    }
}

/* An input that is a folder is named as such; --max-context is refused (not ignored, a
 * usage error: exit 2) for
 * a model without an attention cache, by stream and by predict --incremental, which
 * then writes nothing. */
static void test_stream_inputs_and_options_that_do_not_apply(void)
{
    const char *ck = checkpoint("transformer", "rotary");
    const char *folder[] = {"stream", "--checkpoint", ck, "--input", work_dir, NULL};
    run_result r = run(folder);
    EXPECT(r.code == 1 && one_error_line(&r, "stream") && contains(r.err, work_dir) && contains(r.err, "folder"), r);
    run_free(&r);
    const char *families[2] = {"lstm", "conv"};
    for (int f = 0; f < 2; f++) {
        const char *other = checkpoint(families[f], "none");
        const char *stream[] = {"stream", "--checkpoint", other, "--max-context", "4", NULL};
        r = run(stream);
        EXPECT(r.code == 2 && one_error_line(&r, "stream") && contains(r.err, "--max-context") &&
                   contains(r.err, other) && contains(r.err, families[f]),
               r);
        run_free(&r);
        const char *out = path_in("max-context.h5");
        const char *predict[] = {"predict", "--checkpoint", other, "--data", spike_file(), "-o", out,
                                 "--incremental", "--max-context", "4", NULL};
        r = run(predict);
        EXPECT(r.code == 2 && one_error_line(&r, "predict") && contains(r.err, "--max-context") &&
                   contains(r.err, families[f]),
               r);
        CU_ASSERT_FALSE(access(out, F_OK) == 0);
        run_free(&r);
    }
}

/* Bounded reading: /dev/zero with --strict stops at its first byte (a NUL is a bad id);
 * a token longer than any id is one bad id, read in bounded memory (under ulimit -v,
 * where keeping it whole fails) and named by its start and length; non-printable bytes
 * of a bad token are shown escaped. */
static void test_stream_bounded_tokens(void)
{
    const char *ck = checkpoint("transformer", "rotary");
    const char *zero[] = {LB_LOOKBACK_BIN, "stream", "--checkpoint", ck, "--input", "/dev/zero", "--strict", NULL};
    run_result r = finish_program(start_program(zero), 20);
    EXPECT(r.code == 1 && one_error_line(&r, "stream") && contains(r.err, "line 1, column 1: a NUL byte") &&
               !r.out[0],
           r);
    run_free(&r);
    char script[2048];
#if defined(__SANITIZE_ADDRESS__)
    const char *limit = ""; /* AddressSanitizer's shadow memory does not fit under ulimit -v */
#else
    const char *limit = "ulimit -v 400000; ";
#endif
    snprintf(script, sizeof script,
             "%s{ yes 1 | tr -d '\\n' | head -c 200000000; printf ' 3\\n'; } | '%s' stream "
             "--checkpoint '%s'",
             limit, LB_LOOKBACK_BIN, ck);
    const char *sh[] = {"-c", script, NULL};
    r = run_program("sh", sh);
    EXPECT(r.code == 0 && count_lines(r.out) == 1 && contains(r.out, "event 1: class ") &&
               contains(r.err, "line 1, column 1: '111111111111111111111111...' (200000000 bytes) is not a token id") &&
               contains(r.err, "1 events, 1 bad ids skipped"),
           r);
    run_free(&r);
    char tokens[512];
    snprintf(tokens, sizeof tokens, "%s", path_in("tokens_binary.txt"));
    static const char text[] = "1 \xff\xfe\x01" "ab\\' 2\n";
    CU_ASSERT_TRUE(write_all(tokens, text, sizeof text - 1));
    const char *args[] = {"stream", "--checkpoint", ck, "--input", tokens, NULL};
    r = run(args);
    EXPECT(r.code == 0 && count_lines(r.out) == 2 &&
               contains(r.err, "line 1, column 3: '\\xff\\xfe\\x01ab\\\\\\'' is not a token id") &&
               !strchr(r.err, '\xff'),
           r);
    run_free(&r);
}

/* A write to standard output that fails (/dev/full) ends the command at once: one line,
 * exit 1, no summary, the rest of the input unread. */
static void test_stream_stops_at_failed_write(void)
{
    const char *ck = checkpoint("transformer", "rotary");
    char tokens[512];
    snprintf(tokens, sizeof tokens, "%s", path_in("tokens_many.txt"));
    FILE *f = fopen(tokens, "w");
    CU_ASSERT_PTR_NOT_NULL_FATAL(f);
    for (int i = 0; i < 3000; i++)
        fprintf(f, "%d\n", 1 + i % 8);
    fclose(f);
    char script[2048];
    snprintf(script, sizeof script, "'%s' stream --checkpoint '%s' --input '%s' > /dev/full", LB_LOOKBACK_BIN, ck,
             tokens);
    const char *sh[] = {"-c", script, NULL};
    run_result r = run_program("sh", sh);
    EXPECT(r.code == 1 && one_error_line(&r, "stream") && contains(r.err, "cannot write to standard output") &&
               !contains(r.err, "events,"),
           r);
    run_free(&r);
}

int main(void)
{
    snprintf(work_dir, sizeof work_dir, "/tmp/lookback_test_cli_stream_%d", (int)getpid());
    mkdir(work_dir, 0777);
    const lb_test_case cases[] = {
        {"predict and predict --incremental agree (1e-4), every family; datasets and attributes",
         test_predict_every_family},
        {"predict usage errors, no overwrite without --force", test_predict_usage},
        {"stream's last line equals predict's answer (--json)", test_stream_matches_predict},
        {"stream --every, bad ids by line and column, --strict", test_stream_options_and_bad_input},
        {"stream: a NUL byte is a bad token, the rest of its line is read", test_stream_nul_bytes},
        {"stream: learned positions past the table slide a window", test_stream_learned_positions_limit},
        {"no scored target: train and eval refuse before any work", test_no_scored_target},
        {"stream: token length bounded, --strict stops at a NUL, bad bytes escaped", test_stream_bounded_tokens},
        {"stream: the first failed write to standard output ends it, one line", test_stream_stops_at_failed_write},
        {"stream: a folder as input; --max-context needs an attention model (stream, predict)",
         test_stream_inputs_and_options_that_do_not_apply},
        {NULL, NULL},
    };
    int rc = lb_test_main("cli_stream", cases);
    remove_tree(work_dir);
    return rc;
}

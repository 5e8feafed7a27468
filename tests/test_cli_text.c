/* `lookback data text`, `data info`, `train` and `eval` on text, through the built
 * command as a user runs it: every bad input gives one line, exit 1 (usage errors 2) and
 * writes nothing; every family trains a few steps on a real text file; the reports give
 * bits per character. */
#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "cli_support.h"
#include "data/dataset.h"
#include "data/text.h"



/* A real text file: the GPL (Debian's base-files), or generated English-like text. */
static const char *real_text(void)
{
    static char path[512];
    if (path[0])
        return path;
    if (access("/usr/share/common-licenses/GPL-3", R_OK) == 0) {
        snprintf(path, sizeof path, "/usr/share/common-licenses/GPL-3");
        return path;
    }
    snprintf(path, sizeof path, "%s", path_in("generated.txt"));
    FILE *f = fopen(path, "w");
    static const char *const words[] = {"the", "state", "of", "union", "is", "strong", "and", "we", "will", "work"};
    for (int i = 0; f && i < 20000; i++)
        fprintf(f, "%s%s", words[(i * 7 + i / 3) % 10], i % 13 == 12 ? ".\n" : " ");
    if (f)
        fclose(f);
    return path;
}

static int exists(const char *path)
{
    struct stat sb;
    return lstat(path, &sb) == 0;
}

/* Nothing was written: neither the output, its temporary file nor its lock. */
static int nothing_written(const char *out)
{
    char tmp[600], lock[600];
    snprintf(tmp, sizeof tmp, "%s.tmp", out);
    snprintf(lock, sizeof lock, "%s.lock", out);
    return !exists(out) && !exists(tmp) && !exists(lock);
}

static void expect_refused(const char *const *args, const char *out, const char *message)
{
    run_result r = run(args);
    EXPECT(r.code == 1 && one_error_line(&r, "data text") && contains(r.err, message) && nothing_written(out), r);
    run_free(&r);
}

static void test_bad_inputs(void)
{
    char out[600];
    snprintf(out, sizeof out, "%s", path_in("bad.h5"));
    /* invalid UTF-8: its byte offset */
    char bad[600];
    snprintf(bad, sizeof bad, "%s", path_in("bad.txt"));
    char text[2000];
    memset(text, 'a', sizeof text);
    text[1500] = (char)0xFF;
    CU_ASSERT_TRUE(write_all(bad, text, sizeof text));
    const char *a1[] = {"data", "text", bad, "-o", out, NULL};
    expect_refused(a1, out, "invalid UTF-8 at byte offset 1500");
    /* empty, too short */
    char empty[600];
    snprintf(empty, sizeof empty, "%s", path_in("empty.txt"));
    CU_ASSERT_TRUE(write_all(empty, "", 0));
    const char *a2[] = {"data", "text", empty, "-o", out, NULL};
    expect_refused(a2, out, "is empty");
    char shorter[600];
    snprintf(shorter, sizeof shorter, "%s", path_in("short.txt"));
    CU_ASSERT_TRUE(write_all(shorter, "a short text\n", 13));
    const char *a3[] = {"data", "text", shorter, "-o", out, NULL};
    expect_refused(a3, out, "fewer than the 1024 needed");
    /* a folder, a device, a missing file, standard input with nothing on it */
    const char *a4[] = {"data", "text", work_dir, "-o", out, NULL};
    expect_refused(a4, out, "is a folder");
    const char *a5[] = {"data", "text", "/dev/zero", "-o", out, NULL};
    expect_refused(a5, out, "/dev/zero: is a device");
    const char *a6[] = {"data", "text", path_in("missing.txt"), "-o", out, NULL};
    expect_refused(a6, out, "No such file or directory");
    const char *a7[] = {"data", "text", "-", "-o", out, NULL};
    expect_refused(a7, out, "standard input: is empty");
    /* more distinct characters than the limit: --vocab byte is suggested */
    const char *a8[] = {"data", "text", real_text(), "--max-vocab", "20", "-o", out, NULL};
    expect_refused(a8, out, "--vocab byte");
    /* the output may not be an input, a device or a link */
    char copy[600];
    snprintf(copy, sizeof copy, "%s", path_in("copy.txt"));
    size_t size = 0;
    char *bytes = read_all(real_text(), &size);
    CU_ASSERT_TRUE(bytes && write_all(copy, bytes, size));
    const char *a9[] = {"data", "text", copy, "-o", copy, "--force", NULL};
    run_result r = run(a9);
    size_t after = 0;
    char *still = read_all(copy, &after);
    EXPECT(r.code == 1 && one_error_line(&r, "data text") && contains(r.err, "never writes over its inputs") &&
               still && after == size && memcmp(still, bytes, size) == 0,
           r);
    run_free(&r);
    free(still);
    free(bytes);
    const char *a10[] = {"data", "text", copy, "-o", "/dev/null", NULL};
    r = run(a10);
    EXPECT(r.code == 1 && one_error_line(&r, "data text") && contains(r.err, "is a device"), r);
    run_free(&r);
}

/* An unreadable file, as a user who may not read it (root reads everything). */
static void test_unreadable(void)
{
    char locked[600];
    snprintf(locked, sizeof locked, "%s", path_in("locked.txt"));
    size_t size = 0;
    char *bytes = read_all(real_text(), &size);
    CU_ASSERT_FATAL(bytes && write_all(locked, bytes, size));
    free(bytes);
    chmod(work_dir, 0777);
    CU_ASSERT_EQUAL(chmod(locked, 0), 0);
    char out[600], err[600];
    snprintf(out, sizeof out, "%s", path_in("perm.h5"));
    snprintf(err, sizeof err, "%s", path_in("perm.err"));
    fflush(NULL);
    pid_t pid = fork();
    if (pid == 0) {
        int fd = open(err, O_WRONLY | O_CREAT | O_TRUNC, 0666);
        int devnull = open("/dev/null", O_RDWR);
        if (fd < 0 || devnull < 0)
            _exit(126);
        fchmod(fd, 0666);
        dup2(devnull, 0);
        dup2(devnull, 1);
        dup2(fd, 2);
        if (getuid() == 0 && (setgroups(0, NULL) != 0 || setgid(65534) != 0 || setuid(65534) != 0))
            _exit(125);
        execl(LB_LOOKBACK_BIN, LB_LOOKBACK_BIN, "data", "text", locked, "-o", out, (char *)NULL);
        _exit(127);
    }
    int status = 0;
    waitpid(pid, &status, 0);
    char *msg = read_all(err, NULL);
    CU_ASSERT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 1);
    CU_ASSERT_TRUE(msg && contains(msg, "Permission denied") && count_lines(msg) == 1);
    CU_ASSERT_TRUE(nothing_written(out));
    if (msg && !contains(msg, "Permission denied"))
        fprintf(stderr, "\n  stderr: %s\n", msg);
    free(msg);
    chmod(locked, 0644);
}

static void test_usage_errors(void)
{
    char out[600];
    snprintf(out, sizeof out, "%s", path_in("usage.h5"));
    const char *a1[] = {"data", "text", "-o", out, NULL};
    const char *a2[] = {"data", "text", real_text(), NULL};
    const char *a3[] = {"data", "text", real_text(), "--vocab", "word", "-o", out, NULL};
    const char *a4[] = {"data", "text", real_text(), "--val-fraction", "0.9", "-o", out, NULL};
    const char *a5[] = {"data", "text", real_text(), "--unk", "drop", "-o", out, NULL};
    const char *a6[] = {"data", "text", real_text(), "--vocab", "byte", "--vocab", "char", "-o", out, NULL};
    const char *const *cases[] = {a1, a2, a3, a4, a5, a6};
    const char *says[] = {"missing the text", "missing the output", "--vocab", "--val-fraction", "--unk",
                          "given twice"};
    for (int i = 0; i < 6; i++) {
        run_result r = run(cases[i]);
        EXPECT(r.code == 2 && count_lines(r.err) == 1 && contains(r.err, says[i]) && nothing_written(out), r);
        run_free(&r);
    }
}

/* Import (also from standard input), describe, train every family a few steps, evaluate. */
static void test_import_train_eval(void)
{
    char corpus[600], stdin_corpus[600];
    snprintf(corpus, sizeof corpus, "%s", path_in("gpl.h5")); /* path_in's buffers rotate */
    snprintf(stdin_corpus, sizeof stdin_corpus, "%s", path_in("stdin.h5"));
    const char *imp[] = {"data", "text", real_text(), "-o", corpus, NULL};
    run_result r = run(imp);
    EXPECT(r.code == 0 && contains(r.out, "wrote") && contains(r.out, "char vocabulary"), r);
    run_free(&r);
    /* the same text through standard input gives the same tokens */
    char cmd[1200];
    snprintf(cmd, sizeof cmd, "cat '%s' | '%s' data text - -o '%s' --quiet", real_text(), LB_LOOKBACK_BIN,
             stdin_corpus);
    const char *sh[] = {"-c", cmd, NULL};
    r = run_program("sh", sh);
    EXPECT(r.code == 0 && r.out[0] == '\0', r);
    run_free(&r);
    const char *info[] = {"data", "info", corpus, NULL};
    r = run(info);
    EXPECT(r.code == 0 && contains(r.out, "task      text") && contains(r.out, "unigram entropy (train)") &&
               contains(r.out, "bits per character") && contains(r.out, "most frequent"),
           r);
    run_free(&r);
    const char *info2[] = {"data", "info", stdin_corpus, NULL};
    run_result r2 = run(info2);
    r = run(info);
    EXPECT(r.code == 0 && r2.code == 0 && strcmp(strchr(r.out, '\n'), strchr(r2.out, '\n')) == 0, r2);
    run_free(&r);
    run_free(&r2);
    /* the event-detector measures do not apply to next-symbol prediction: refused, nothing made */
    static const char *const measures[] = {"f1", "macro-f1", "pr-auc"};
    for (int k = 0; k < 3; k++) {
        char dir[600];
        snprintf(dir, sizeof dir, "%s", path_in("select-f1"));
        const char *sel[] = {"train", "--data", corpus, "--select", measures[k], "--steps", "2", "--out", dir,
                             "--quiet", NULL};
        r = run(sel);
        EXPECT(r.code == 1 && one_error_line(&r, "train") && contains(r.err, "text corpus") &&
                   contains(r.err, "choose --select loss or accuracy"),
               r);
        CU_ASSERT_FALSE(access(dir, F_OK) == 0);
        run_free(&r);
    }
    static const char *const kinds[] = {"transformer", "local", "lstm", "conv"};
    for (int k = 0; k < 4; k++) {
        char dir[600];
        snprintf(dir, sizeof dir, "%s/run_%s", work_dir, kinds[k]);
        const char *train[] = {"train",  "--data", corpus, "--model", kinds[k], "--steps", "4",   "--batch", "4",
                               "--seq-len", "16", "--eval-every", "2", "--d-model", "16", "--layers", "1", "--threads",
                               "1",      "--out",  dir,    NULL};
        r = run(train);
        EXPECT(r.code == 0 && contains(r.err, "bits per char") && contains(r.err, "nats/token") &&
                   contains(r.err, "perplexity") && contains(r.err, "best validation loss"),
               r);
        run_free(&r);
        char path[700];
        snprintf(path, sizeof path, "%s/metrics.csv", dir);
        char *metrics = read_all(path, NULL);
        CU_ASSERT_TRUE(metrics && contains(metrics, "skipped,bits_per_byte,bits_per_char,perplexity") && count_lines(metrics) == 5);
        free(metrics);
        snprintf(path, sizeof path, "%s/checkpoint.h5", dir);
        const char *eval[] = {"eval", "--checkpoint", path, "--data", corpus, "--json", NULL};
        r = run(eval);
        EXPECT(r.code == 0 && contains(r.out, "\"bits_per_char\":") && contains(r.out, "\"perplexity\":") &&
                   contains(r.out, "\"seq_len\":16"),
               r);
        run_free(&r);
    }
    /* --seq-len is for text: refused on a task file, as is a corpus with another vocabulary */
    const char *task[] = {"train", "--data", small_data(), "--seq-len", "8", "--steps", "1", "--out",
                          path_in("run_task"), NULL};
    r = run(task);
    EXPECT(r.code == 2 && one_error_line(&r, "train") && contains(r.err, "--seq-len"), r);
    run_free(&r);
    char bytes_corpus[600];
    snprintf(bytes_corpus, sizeof bytes_corpus, "%s", path_in("bytes.h5"));
    const char *imp2[] = {"data", "text", real_text(), "--vocab", "byte", "-o", bytes_corpus, "--quiet", NULL};
    r = run(imp2);
    EXPECT(r.code == 0, r);
    run_free(&r);
    char ck[700];
    snprintf(ck, sizeof ck, "%s/run_lstm/checkpoint.h5", work_dir);
    const char *other[] = {"eval", "--checkpoint", ck, "--data", bytes_corpus, NULL};
    r = run(other);
    EXPECT(r.code == 1 && one_error_line(&r, "eval") &&
               contains(r.err, "does not hold the vocabulary the model was trained with"),
           r);
    run_free(&r);
}

/* compare on a text corpus: its own test split, the families' recipes, bits per character,
 * time to the target and a greedy sample per model. */
static void test_compare_text(void)
{
    char corpus[600], out[600];
    snprintf(corpus, sizeof corpus, "%s", path_in("cmp.h5"));
    snprintf(out, sizeof out, "%s", path_in("cmp"));
    const char *imp[] = {"data", "text", real_text(), "-o", corpus, "--quiet", NULL};
    run_result r = run(imp);
    EXPECT(r.code == 0, r);
    run_free(&r);
    const char *cmp[] = {"compare", "--train", corpus, "--models", "transformer,lstm", "--steps", "3", "--budget", "0",
                         "--d-model", "16", "--layers", "1", "--threads", "1", "--quiet", "--out", out, NULL};
    r = run(cmp);
    EXPECT(r.code == 0 && contains(r.out, "cmp bpc") && contains(r.out, "greedy sample") &&
               contains(r.out, "nanoGPT shakespeare_char") && contains(r.out, "char-rnn") &&
               contains(r.out, "to target"),
           r);
    run_free(&r);
    char path[700];
    snprintf(path, sizeof path, "%s/summary.json", out);
    char *summary = read_all(path, NULL);
    CU_ASSERT_TRUE(summary && contains(summary, "\"bits_per_char\"") && contains(summary, "\"greedy_sample\"") &&
                   contains(summary, "\"seconds_to_target\""));
    free(summary);
    snprintf(path, sizeof path, "%s/lstm/config.json", out);
    char *config = read_all(path, NULL); /* the LSTM trained on char-rnn's recipe, with the options given */
    CU_ASSERT_TRUE(config && contains(config, "\"seq-len\": 50") && contains(config, "\"hidden\": 128") &&
                   contains(config, "\"d-model\": 16"));
    if (config && !contains(config, "\"seq-len\": 50"))
        fprintf(stderr, "\n  config: %s\n", config);
    free(config);
    const char *bad[] = {"compare", "--train", small_data(), "--models", "lstm", "--out", path_in("cmp2"), NULL};
    r = run(bad);
    EXPECT(r.code == 2 && contains(r.err, "--eval"), r);
    run_free(&r);
}

/* Words of a generated text; `extra` (UTF-8) is appended to every 50th line. */
static void write_words(const char *path, int n, const char *extra, const char *tail)
{
    FILE *f = fopen(path, "w");
    CU_ASSERT_PTR_NOT_NULL_FATAL(f);
    static const char *const words[] = {"the", "state", "of", "union", "is", "strong", "and", "we", "will", "work"};
    for (int i = 0; i < n; i++)
        fprintf(f, "%s%s%s", words[(i * 7 + i / 3) % 10], i % 13 == 12 ? ".\n" : " ",
                extra && i % 650 == 649 ? extra : "");
    fputs(tail, f);
    fclose(f);
}

static int64_t json_int(const char *text, const char *key)
{
    const char *p = text ? strstr(text, key) : NULL;
    return p ? strtoll(p + strlen(key), NULL, 10) : -1;
}

/* A model evaluated on another text: `data text --like` imports it with the model's
 * vocabulary (same ids; characters outside it <unk> or refused), and the one message of
 * eval, predict and compare for another vocabulary gives that command. predict on a corpus
 * reads windows of the model's context by default and takes --seq-len as eval does. */
static void test_like_and_context(void)
{
    char a_txt[600], b_txt[600], a_h5[600], b_h5[600], b_like[600], c_txt[600], c_h5[600], out[600], dir[600],
        lstm_dir[600], ck[700], lstm_ck[700];
    snprintf(a_txt, sizeof a_txt, "%s", path_in("a.txt"));
    snprintf(b_txt, sizeof b_txt, "%s", path_in("b.txt"));
    snprintf(a_h5, sizeof a_h5, "%s", path_in("a.h5"));
    snprintf(b_h5, sizeof b_h5, "%s", path_in("b.h5"));
    snprintf(b_like, sizeof b_like, "%s", path_in("b-like.h5"));
    snprintf(c_txt, sizeof c_txt, "%s", path_in("c.txt"));
    snprintf(c_h5, sizeof c_h5, "%s", path_in("c.h5"));
    snprintf(out, sizeof out, "%s", path_in("pred_text.h5"));
    snprintf(dir, sizeof dir, "%s", path_in("run_learned"));
    snprintf(lstm_dir, sizeof lstm_dir, "%s", path_in("run_lstm16"));
    snprintf(ck, sizeof ck, "%s/checkpoint.h5", dir);
    snprintf(lstm_ck, sizeof lstm_ck, "%s/checkpoint.h5", lstm_dir);
    write_words(a_txt, 6000, NULL, "#@#@"); /* '#' and '@' only at the end (test): <unk> */
    write_words(b_txt, 3000, "\xc3\xbc", ""); /* 'ü' (U+00FC) in every split: not in a's vocabulary */
    const char *ia[] = {"data", "text", a_txt, "-o", a_h5, "--quiet", NULL};
    const char *ib[] = {"data", "text", b_txt, "-o", b_h5, "--quiet", NULL};
    run_result r = run(ia);
    EXPECT(r.code == 0 && contains(r.err, "<unk>"), r);
    run_free(&r);
    r = run(ib);
    EXPECT(r.code == 0, r);
    run_free(&r);
    const char *tr[] = {"train", "--data", a_h5, "--model", "transformer", "--pos", "learned", "--seq-len", "16",
                        "--steps", "3", "--batch", "4", "--d-model", "16", "--heads", "2", "--d-ff", "16", "--layers",
                        "1", "--threads", "1", "--quiet", "--out", dir, NULL};
    r = run(tr);
    EXPECT(r.code == 0, r);
    run_free(&r);
    const char *tl[] = {"train", "--data", a_h5, "--model", "lstm", "--seq-len", "16", "--steps", "3", "--batch", "4",
                        "--d-model", "16", "--hidden", "16", "--layers", "1", "--threads", "1", "--quiet", "--out",
                        lstm_dir, NULL};
    r = run(tl);
    EXPECT(r.code == 0, r);
    run_free(&r);

    /* the one message: eval, predict and compare on b.h5, with advice that works */
    char advice[1600];
    snprintf(advice, sizeof advice, "lookback data text %s --like %s -o b-like.h5", b_txt, ck);
    const char *ev[] = {"eval", "--checkpoint", ck, "--data", b_h5, NULL};
    r = run(ev);
    EXPECT(r.code == 1 && one_error_line(&r, "eval") &&
               contains(r.err, "does not hold the vocabulary the model was trained with") && contains(r.err, advice),
           r);
    char *eval_message = r.err ? strdup(strstr(r.err, ": ") + 2) : NULL;
    run_free(&r);
    const char *pr[] = {"predict", "--checkpoint", ck, "--data", b_h5, "-o", out, NULL};
    r = run(pr);
    EXPECT(r.code == 1 && one_error_line(&r, "predict") && eval_message && contains(r.err, eval_message), r);
    run_free(&r);
    free(eval_message);
    const char *cmp[] = {"compare", "--train", a_h5, "--eval", b_h5, "--models", "lstm", "--steps", "1", "--out",
                         path_in("cmp_like"), "--quiet", NULL};
    r = run(cmp);
    snprintf(advice, sizeof advice, "lookback data text %s --like %s -o b-like.h5", b_txt, a_h5);
    EXPECT(r.code == 1 && one_error_line(&r, "compare") &&
               contains(r.err, "does not hold the vocabulary the model was trained with") && contains(r.err, advice),
           r);
    run_free(&r);

    /* data text --like: a's vocabulary exactly; 'ü' becomes <unk> */
    const char *like[] = {"data", "text", b_txt, "--like", ck, "-o", b_like, NULL};
    r = run(like);
    EXPECT(r.code == 0 && contains(r.out, "that of") && contains(r.err, "not in the vocabulary of") &&
               contains(r.err, "U+00FC"),
           r);
    run_free(&r);
    lb_vocab *va = lb_vocab_read(ck), *vb = lb_vocab_read(b_like);
    CU_ASSERT_PTR_NOT_NULL_FATAL(va);
    CU_ASSERT_PTR_NOT_NULL_FATAL(vb);
    CU_ASSERT_EQUAL(lb_vocab_check_same(va, vb, "a", "b"), LB_OK);
    CU_ASSERT_TRUE(lb_vocab_unk_id(va) >= 0);
    lb_dataset *ds = lb_dataset_open(b_like);
    CU_ASSERT_PTR_NOT_NULL_FATAL(ds);
    int64_t n = 0, unk = 0;
    const int32_t *tok = lb_dataset_tokens(ds, "train", &n);
    CU_ASSERT_TRUE_FATAL(tok && n > 649 * 4);
    char *b_text = read_all(b_txt, NULL);
    CU_ASSERT_EQUAL(tok[0], lb_vocab_lookup(va, (unsigned char)b_text[0])); /* 't': a's id */
    CU_ASSERT_EQUAL(tok[1], lb_vocab_lookup(va, (unsigned char)b_text[1]));
    for (int64_t i = 0; i < n; i++)
        unk += tok[i] == lb_vocab_unk_id(va);
    CU_ASSERT_TRUE(unk >= 3); /* the ü of the train split */
    free(b_text);
    lb_dataset_close(ds);
    lb_vocab_free(va);
    lb_vocab_free(vb);
    const char *ev2[] = {"eval", "--checkpoint", ck, "--data", b_like, NULL};
    r = run(ev2);
    EXPECT(r.code == 0 && contains(r.out, "bits per char") && contains(r.out, "windows of 16"), r);
    run_free(&r);
    const char *err[] = {"data", "text", b_txt, "--like", ck, "--unk", "error", "-o", path_in("b-err.h5"), NULL};
    r = run(err);
    EXPECT(r.code == 1 && one_error_line(&r, "data text") && contains(r.err, "U+00FC") &&
               contains(r.err, "of the train split is not in the vocabulary of") && nothing_written(path_in("b-err.h5")),
           r);
    run_free(&r);
    write_words(c_txt, 3000, NULL, ""); /* every character in its training split: no <unk> */
    const char *ic[] = {"data", "text", c_txt, "-o", c_h5, "--quiet", NULL};
    r = run(ic);
    EXPECT(r.code == 0 && !contains(r.err, "<unk>"), r);
    run_free(&r);
    const char *nounk[] = {"data", "text", b_txt, "--like", c_h5, "-o", path_in("b-c.h5"), NULL};
    r = run(nounk);
    EXPECT(r.code == 1 && one_error_line(&r, "data text") && contains(r.err, "which has no <unk> symbol") &&
               nothing_written(path_in("b-c.h5")),
           r);
    run_free(&r);
    const char *both[] = {"data", "text", b_txt, "--like", c_h5, "--vocab", "byte", "-o", path_in("b-c.h5"), NULL};
    r = run(both);
    EXPECT(r.code == 2 && one_error_line(&r, "data text") && contains(r.err, "--vocab does not apply with --like"), r);
    run_free(&r);
    const char *nofile[] = {"data", "text", b_txt, "--like", path_in("absent.h5"), "-o", path_in("b-c.h5"), NULL};
    r = run(nofile);
    EXPECT(r.code == 1 && one_error_line(&r, "data text") && nothing_written(path_in("b-c.h5")), r);
    run_free(&r);
    const char *self[] = {"data", "text", b_txt, "--like", c_h5, "-o", c_h5, "--force", NULL};
    r = run(self);
    EXPECT(r.code == 1 && one_error_line(&r, "data text") && contains(r.err, "an input of this command"), r);
    run_free(&r);

    /* predict on a corpus: the model's context (16), as eval; the same accuracy */
    const char *models[2] = {ck, lstm_ck};
    for (int m = 0; m < 2; m++) {
        const char *evj[] = {"eval", "--checkpoint", models[m], "--data", a_h5, "--json", NULL};
        r = run(evj);
        EXPECT(r.code == 0 && json_int(r.out, "\"seq_len\":") == 16, r);
        int64_t windows = json_int(r.out, "\"examples\":");
        const char *acc = r.out ? strstr(r.out, "\"accuracy\":") : NULL;
        double eval_acc = acc ? strtod(acc + 11, NULL) : -1;
        run_free(&r);
        const char *pd[] = {"predict", "--checkpoint", models[m], "--data", a_h5, "-o", out, "--force", NULL};
        r = run(pd);
        char want[64];
        snprintf(want, sizeof want, ": %lld examples of the test split", (long long)windows);
        EXPECT(r.code == 0 && windows > 1 && contains(r.out, want), r);
        const char *pacc = r.out ? strstr(r.out, "accuracy ") : NULL;
        CU_ASSERT_TRUE(pacc && fabs(strtod(pacc + 9, NULL) - eval_acc) < 1e-4);
        run_free(&r);
        const char *p8[] = {"predict", "--checkpoint", models[m], "--data", a_h5, "-o", out, "--force", "--seq-len",
                            "8", NULL};
        r = run(p8);
        int64_t n_test = 0;
        lb_dataset *a = lb_dataset_open(a_h5);
        CU_ASSERT_PTR_NOT_NULL_FATAL(a);
        lb_dataset_tokens(a, "test", &n_test);
        lb_dataset_close(a);
        snprintf(want, sizeof want, ": %lld examples of the test split", (long long)((n_test - 1 + 7) / 8));
        EXPECT(r.code == 0 && contains(r.out, want), r);
        run_free(&r);
    }
    /* --seq-len: the learned table's limit, the range and task files, as eval says them */
    const char *p32[] = {"predict", "--checkpoint", ck, "--data", a_h5, "-o", out, "--force", "--seq-len", "32", NULL};
    r = run(p32);
    EXPECT(r.code == 1 && one_error_line(&r, "predict") && contains(r.err, "use --seq-len 16 or less") &&
               !contains(r.err, "files of at most"),
           r);
    run_free(&r);
    const char *p0[] = {"predict", "--checkpoint", ck, "--data", a_h5, "-o", out, "--force", "--seq-len", "0", NULL};
    const char *e0[] = {"eval", "--checkpoint", ck, "--data", a_h5, "--seq-len", "0", NULL};
    r = run(p0);
    run_result re = run(e0);
    EXPECT(r.code == 2 && re.code == 2 && one_error_line(&r, "predict") && r.err && re.err &&
               strcmp(strstr(r.err, ": ") + 2, strstr(re.err, ": ") + 2) == 0,
           r);
    run_free(&r);
    run_free(&re);
    const char *ptask[] = {"predict", "--checkpoint", ck, "--data", small_data(), "-o", out, "--force", "--seq-len",
                           "8", NULL};
    r = run(ptask);
    EXPECT(r.code == 2 && one_error_line(&r, "predict") && contains(r.err, "applies to text corpora only"), r);
    run_free(&r);
}

int main(void)
{
    snprintf(work_dir, sizeof work_dir, "/tmp/lookback_test_cli_text_%d", (int)getpid());
    mkdir(work_dir, 0777);
    const lb_test_case cases[] = {
        {"data text: bad inputs give one line, exit 1, nothing written", test_bad_inputs},
        {"data text: an unreadable file says Permission denied", test_unreadable},
        {"data text: usage errors exit 2", test_usage_errors},
        {"import, info, every family trains, eval in bits per character", test_import_train_eval},
        {"compare on text: recipes, bits per character, samples", test_compare_text},
        {"data text --like; one message for another vocabulary; predict on a corpus in the model's context",
         test_like_and_context},
        {NULL, NULL},
    };
    int rc = lb_test_main("cli_text", cases);
    remove_tree(work_dir);
    return rc;
}

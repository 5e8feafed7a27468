/* `lookback generate` as a user runs it, on checkpoints trained for a few steps on a
 * small text corpus (lookback data text, lookback train): the prompt and then the tokens
 * on standard output, the rate line on standard error; greedy output equal to the
 * library's lb_generate on the same checkpoint; the same seed the same text at 1 and 2
 * threads; the window slides past the training context (learned positions) and not for
 * the LSTM or local attention with rotary positions unless --ctx-size is given; --num-samples; the default prompt; a byte
 * vocabulary; and every error: a checkpoint that is not a language model, prompt
 * characters outside the vocabulary, bad prompt files, options out of range, options
 * given twice, a standard output that cannot be written, an address-space limit. */
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cli_support.h"
#include "data/text.h"
#include "layers/generate.h"
#include "train/trainer.h"

const char *__lsan_default_suppressions(void);
const char *__lsan_default_suppressions(void) { return "leak:libhdf5\n"; }

enum { CONTEXT = 16 };

/* A small corpus: sentences drawn from a few words with a fixed seed (about 20 kB,
 * lower-case ASCII, spaces, full stops and newlines). */
static const char *corpus_text(void)
{
    static char path[512];
    if (path[0])
        return path;
    snprintf(path, sizeof path, "%s", path_in("corpus.txt"));
    static const char *const words[] = {"the", "cat", "sat", "on", "a", "mat", "and", "dog", "ran", "to",
                                        "its", "home", "by", "sea", "when", "sun", "rose", "over", "hill", "we"};
    lb_rng r;
    lb_rng_seed(&r, 11);
    size_t cap = 24000, n = 0;
    char *text = malloc(cap);
    while (n + 64 < cap) {
        int len = 3 + (int)lb_rng_below(&r, 6);
        for (int w = 0; w < len; w++) {
            const char *word = words[lb_rng_below(&r, 20)];
            n += (size_t)snprintf(text + n, cap - n, "%s%s", w ? " " : "", word);
        }
        n += (size_t)snprintf(text + n, cap - n, lb_rng_below(&r, 3) ? ". " : ".\n");
    }
    CU_ASSERT_TRUE(write_all(path, text, n));
    free(text);
    return path;
}

/* The corpus as a data file (vocab char or byte). */
static const char *corpus(const char *vocab)
{
    static char paths[2][512];
    char *path = paths[strcmp(vocab, "byte") == 0];
    if (path[0])
        return path;
    snprintf(path, 512, "%s", path_in(strcmp(vocab, "byte") == 0 ? "corpus-byte.h5" : "corpus.h5"));
    const char *args[] = {"data", "text", corpus_text(), "--vocab", vocab, "-o", path, NULL};
    run_result r = run(args);
    EXPECT(r.code == 0, r);
    run_free(&r);
    return path;
}

/* A checkpoint of `model` trained for a few steps on the corpus, context CONTEXT. */
static const char *checkpoint(const char *model, const char *vocab)
{
    static char paths[8][600];
    static int used;
    char dir[512];
    snprintf(dir, sizeof dir, "%s-%s", path_in(model), vocab);
    char *ck = paths[used++ % 8];
    snprintf(ck, sizeof paths[0], "%s/checkpoint.h5", dir);
    if (access(ck, F_OK) == 0)
        return ck;
    char context[16];
    snprintf(context, sizeof context, "%d", CONTEXT);
    const char *args[40] = {"train", "--data", corpus(vocab), "--model", model, "--seq-len", context, "--layers", "2",
                            "--d-model", "32", "--steps", "30", "--batch", "8", "--eval-every", "0", "--quiet",
                            "--out", dir};
    int n = 20;
    if (strcmp(model, "transformer") == 0 || strcmp(model, "local") == 0) {
        const char *more[] = {"--pos", strcmp(model, "local") == 0 ? "rotary" : "learned", "--heads", "2", "--d-ff",
                              "64"};
        for (int i = 0; i < 6; i++)
            args[n++] = more[i];
    }
    if (strcmp(model, "local") == 0) {
        args[n++] = "--window";
        args[n++] = "6";
    }
    if (strcmp(model, "lstm") == 0) {
        args[n++] = "--hidden";
        args[n++] = "32";
    }
    args[n] = NULL;
    run_result r = run(args);
    EXPECT(r.code == 0, r);
    run_free(&r);
    return ck;
}

/* Code points of UTF-8 text. */
static int64_t code_points(const char *s)
{
    int64_t n = 0;
    for (; *s; s++)
        n += ((unsigned char)*s & 0xc0) != 0x80;
    return n;
}

static int64_t count_of(const char *text, const char *what)
{
    int64_t n = 0;
    for (const char *p = text; (p = strstr(p, what)); p += strlen(what))
        n++;
    return n;
}

/* The number before `what` in text ("27 window slides" -> 27), -1 when absent. */
static long long number_before(const char *text, const char *what)
{
    const char *p = text ? strstr(text, what) : NULL;
    if (!p)
        return -1;
    while (p > text && p[-1] == ' ')
        p--;
    const char *q = p;
    while (q > text && q[-1] >= '0' && q[-1] <= '9')
        q--;
    return q < p ? atoll(q) : -1;
}

static void test_prints_prompt_then_tokens(void)
{
    const char *ck = checkpoint("transformer", "char");
    const char *args[] = {"generate", "--checkpoint", ck, "--prompt", "the cat ", "-n", "40", NULL};
    run_result r = run(args);
    EXPECT(r.code == 0, r);
    EXPECT(strncmp(r.out, "the cat ", 8) == 0, r);
    EXPECT(code_points(r.out) == 8 + 40 + 1, r); /* the prompt, 40 characters, a newline */
    EXPECT(count_lines(r.err) == 1 && contains(r.err, "40 tokens in") && contains(r.err, "tokens/s"), r);
    EXPECT(contains(r.err, "prompt of 8 tokens"), r);
    run_free(&r);
    /* without a prompt: from a newline (the corpus has newlines) */
    const char *noprompt[] = {"generate", "--checkpoint", ck, "-n", "10", "--seed", "3", NULL};
    r = run(noprompt);
    EXPECT(r.code == 0 && r.out[0] == '\n' && code_points(r.out) == 1 + 10 + 1, r);
    EXPECT(contains(r.err, "prompt of 1 tokens"), r);
    run_free(&r);
}

/* The command's greedy text is the library's lb_generate on the same checkpoint,
 * decoded with the checkpoint's vocabulary. */
static void test_greedy_equals_library(void)
{
    const char *models[] = {"transformer", "lstm"};
    for (int k = 0; k < 2; k++) {
        const char *ck = checkpoint(models[k], "char");
        const char *args[] = {"generate", "--checkpoint", ck, "--prompt", "the dog", "-n", "60", "--temperature", "0",
                              NULL};
        run_result r = run(args);
        EXPECT(r.code == 0, r);
        lb_model_config mc;
        CU_ASSERT_EQUAL_FATAL(lb_checkpoint_read_model_config(ck, &mc), LB_OK);
        lb_model *m = lb_model_new(&mc);
        CU_ASSERT_PTR_NOT_NULL_FATAL(m);
        CU_ASSERT_EQUAL_FATAL(lb_checkpoint_load_params(ck, m), LB_OK);
        lb_vocab *v = lb_vocab_read(ck);
        CU_ASSERT_PTR_NOT_NULL_FATAL(v);
        int32_t prompt[16], out[60];
        int64_t n = 0;
        CU_ASSERT_EQUAL_FATAL(lb_vocab_encode(v, "the dog", 7, 0, prompt, 16, &n), LB_OK);
        CU_ASSERT_EQUAL(n, 7);
        lb_generate_options o = lb_generate_defaults();
        o.max_new_tokens = 60;
        o.sampling.temperature = 0;
        o.context = strcmp(models[k], "transformer") == 0 ? CONTEXT : 0; /* the command's default window */
        lb_rng rng;
        lb_rng_seed(&rng, 1337);
        CU_ASSERT_EQUAL_FATAL(lb_generate(m, prompt, n, &o, &rng, out, NULL), LB_OK);
        char text[1024];
        size_t len = 0;
        CU_ASSERT_EQUAL_FATAL(lb_vocab_decode(v, out, 60, text, sizeof text, &len), LB_OK);
        EXPECT(strncmp(r.out, "the dog", 7) == 0 && strncmp(r.out + 7, text, len) == 0 && r.out[7 + len] == '\n', r);
        lb_vocab_free(v);
        lb_model_free(m);
        run_free(&r);
    }
}

static void test_same_seed_any_threads(void)
{
    const char *ck = checkpoint("transformer", "char");
    run_result r[3];
    const char *seeds[3] = {"5", "5", "6"}, *threads[3] = {"1", "2", "2"};
    for (int i = 0; i < 3; i++) {
        const char *args[] = {"generate", "--checkpoint", ck, "--prompt", "a", "-n", "200", "--temperature", "1.0",
                              "--top-k", "0", "--seed", seeds[i], "--threads", threads[i], NULL};
        r[i] = run(args);
        EXPECT(r[i].code == 0, r[i]);
    }
    CU_ASSERT_STRING_EQUAL(r[0].out, r[1].out);
    CU_ASSERT_STRING_NOT_EQUAL(r[0].out, r[2].out);
    for (int i = 0; i < 3; i++)
        run_free(&r[i]);
}

/* Learned positions, trained with a context of 16: a prompt of 4 tokens is read, 12
 * tokens go one event each, and each of the other 40 - 1 - 12 tokens fed slides the
 * window. The LSTM reads every token, unless --ctx-size sets a window. */
static void test_window(void)
{
    const char *att[] = {"generate", "--checkpoint", checkpoint("transformer", "char"), "--prompt", "the ", "-n", "40",
                         NULL};
    run_result r = run(att);
    EXPECT(r.code == 0 && number_before(r.err, "window slides") == 40 - 1 - (CONTEXT - 4), r);
    run_free(&r);
    const char *lstm[] = {"generate", "--checkpoint", checkpoint("lstm", "char"), "--prompt", "the ", "-n", "40", NULL};
    r = run(lstm);
    EXPECT(r.code == 0 && number_before(r.err, "window slides") == 0, r);
    run_free(&r);
    const char *lstm8[] = {"generate", "--checkpoint", checkpoint("lstm", "char"), "--prompt", "the ", "-n", "40",
                           "--ctx-size", "8", NULL};
    r = run(lstm8);
    EXPECT(r.code == 0 && number_before(r.err, "window slides") == 40 - 1 - (8 - 4), r);
    run_free(&r);
    /* local attention with rotary positions streams from its bounded cache: no slides */
    const char *local[] = {"generate", "--checkpoint", checkpoint("local", "char"), "--prompt", "the ", "-n", "40", NULL};
    r = run(local);
    EXPECT(r.code == 0 && number_before(r.err, "window slides") == 0 && code_points(r.out) == 4 + 40 + 1, r);
    run_free(&r);
}

static void test_num_samples(void)
{
    const char *args[] = {"generate", "--checkpoint", checkpoint("lstm", "char"), "--prompt", "we ", "-n", "20",
                          "--num-samples", "3", "--top-p", "0.9", "--top-k", "10", NULL};
    run_result r = run(args);
    EXPECT(r.code == 0, r);
    EXPECT(count_of(r.out, "\n---------------\n") == 3 && count_of(r.out, "we ") >= 3, r);
    EXPECT(count_of(r.err, "sample ") == 3 && contains(r.err, "3 samples, 60 tokens"), r);
    run_free(&r);
}

static void test_byte_vocabulary(void)
{
    const char *ck = checkpoint("lstm", "byte");
    /* any bytes are in a byte vocabulary, even ones the corpus never had */
    const char *args[] = {"generate", "--checkpoint", ck, "--prompt", "Zebra \xc3\xa9", "-n", "30", NULL};
    run_result r = run(args);
    EXPECT(r.code == 0 && strncmp(r.out, "Zebra \xc3\xa9", 8) == 0, r);
    run_free(&r);
}

static void test_prompt_errors(void)
{
    const char *ck = checkpoint("transformer", "char");
    /* 'Z' is not in the corpus: named with its code point and byte offset, exit 1 */
    const char *bad[] = {"generate", "--checkpoint", ck, "--prompt", "the Zoo", NULL};
    run_result r = run(bad);
    EXPECT(r.code == 1 && one_error_line(&r, "generate") && contains(r.err, "U+005A") &&
               contains(r.err, "byte offset 4") && r.out[0] == '\0',
           r);
    run_free(&r);
    const char *file = path_in("prompt.txt");
    CU_ASSERT_TRUE(write_all(file, "the sun\n", 8));
    const char *from_file[] = {"generate", "--checkpoint", ck, "--prompt-file", file, "-n", "5", NULL};
    r = run(from_file);
    EXPECT(r.code == 0 && strncmp(r.out, "the sun\n", 8) == 0 && code_points(r.out) == 8 + 5 + 1, r);
    run_free(&r);
    const struct {
        const char *content; /* NULL: the file is a folder; "missing": no file */
        const char *message;
    } files[] = {
        {"", "is empty"},
        {"the \xff sun", "UTF-8"},
        {"the Sun", "U+0053"},
        {NULL, "is a folder"},
        {"missing", "cannot open"},
    };
    for (size_t i = 0; i < sizeof files / sizeof files[0]; i++) {
        char name[32];
        snprintf(name, sizeof name, "prompt%zu.txt", i);
        const char *p = path_in(name);
        if (!files[i].content)
            mkdir(p, 0777);
        else if (strcmp(files[i].content, "missing") != 0)
            CU_ASSERT_TRUE(write_all(p, files[i].content, strlen(files[i].content)));
        const char *args[] = {"generate", "--checkpoint", ck, "--prompt-file", p, NULL};
        r = run(args);
        EXPECT(r.code == 1 && one_error_line(&r, "generate") && contains(r.err, files[i].message) &&
                   contains(r.err, "--prompt-file") && r.out[0] == '\0',
               r);
        run_free(&r);
    }
}

static void test_option_errors(void)
{
    const char *ck = checkpoint("lstm", "char");
    const struct {
        const char *option, *value, *message;
    } bad[] = {
        {"--temperature", "-1", "--temperature"}, {"--temperature", "1e-9", "0 (greedy)"},
        {"--temperature", "x", "decimal number"}, {"--top-p", "1.5", "--top-p"},
        {"--top-k", "-1", "--top-k"},             {"-n", "-1", "--max-new-tokens"},
        {"--num-samples", "0", "--num-samples"},  {"--seed", "abc", "--seed"},
        {"--ctx-size", "-4", "--ctx-size"},       {"--threads", "5000", "--threads"},
        {"--bogus", "1", "--bogus"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        const char *args[] = {"generate", "--checkpoint", ck, bad[i].option, bad[i].value, NULL};
        run_result r = run(args);
        EXPECT(r.code == 2 && one_error_line(&r, "generate") && contains(r.err, bad[i].message) && r.out[0] == '\0',
               r);
        run_free(&r);
    }
    const char *const usage[][9] = {
        {"generate", "--checkpoint", ck, "--prompt", "a", "--prompt-file", "x.txt", NULL},
        {"generate", "--checkpoint", ck, "-n", "5", "--max-new-tokens", "6", NULL},
        {"generate", "--checkpoint", ck, "--seed", "1", "--seed", "2", NULL},
        {"generate", "--prompt", "a", NULL},
        {"generate", "--checkpoint", ck, "extra", NULL},
    };
    const char *messages[] = {"give one", "same option", "given twice", "--checkpoint is required", "unexpected"};
    for (size_t i = 0; i < sizeof usage / sizeof usage[0]; i++) {
        run_result r = run(usage[i]);
        EXPECT(r.code == 2 && one_error_line(&r, "generate") && contains(r.err, messages[i]), r);
        run_free(&r);
    }
    /* a window beyond the learned positions' table */
    const char *wide[] = {"generate", "--checkpoint", checkpoint("transformer", "char"), "--ctx-size", "5000", NULL};
    run_result w = run(wide);
    EXPECT(w.code == 2 && one_error_line(&w, "generate") && contains(w.err, "max_seq_len"), w);
    run_free(&w);
    const char *help[] = {"generate", "--help", NULL};
    run_result r = run(help);
    EXPECT(r.code == 0 && contains(r.out, "--max-new-tokens") && contains(r.out, "--top-p") &&
               contains(r.out, "--ctx-size"),
           r);
    run_free(&r);
}

/* A checkpoint of a classification task is not a language model; a missing one. */
static void test_not_a_language_model(void)
{
    char dir[512];
    snprintf(dir, sizeof dir, "%s", path_in("spike-run"));
    const char *train[] = {"train", "--data", small_data(), "--model", "lstm", "--hidden", "8", "--steps", "1",
                           "--eval-every", "0", "--quiet", "--out", dir, NULL};
    run_result r = run(train);
    EXPECT(r.code == 0, r);
    run_free(&r);
    char ck[600];
    snprintf(ck, sizeof ck, "%s/checkpoint.h5", dir);
    const char *args[] = {"generate", "--checkpoint", ck, "--prompt", "1", NULL};
    r = run(args);
    EXPECT(r.code == 1 && one_error_line(&r, "generate") && contains(r.err, "not a token language model"), r);
    run_free(&r);
    const char *missing[] = {"generate", "--checkpoint", path_in("none.h5"), NULL};
    r = run(missing);
    EXPECT(r.code == 1 && one_error_line(&r, "generate") && contains(r.err, "none.h5"), r);
    run_free(&r);
}

/* A standard output that cannot be written (/dev/full): one line, exit 1. */
static void test_failed_write(void)
{
    char line[2048];
    snprintf(line, sizeof line, "'%s' generate --checkpoint '%s' -n 50 > /dev/full", LB_LOOKBACK_BIN,
             checkpoint("lstm", "char"));
    const char *args[] = {"-c", line, NULL};
    run_result r = run_program("sh", args);
    EXPECT(r.code == 1 && one_error_line(&r, "generate") && contains(r.err, "cannot write to standard output"), r);
    run_free(&r);
}

/* Under 150 and 400 MB of address space (ulimit -v): an answer, never a crash or a hang:
 * the text, or one line naming the memory and exit 1; 400 MB hold this small model. */
static void test_memory_limit(void)
{
#if defined(__SANITIZE_ADDRESS__)
    fprintf(stderr, "\n  skipped: AddressSanitizer reserves terabytes of address space");
#else
    static const long limits[] = {150, 400};
    for (size_t l = 0; l < sizeof limits / sizeof limits[0]; l++) {
        char line[2048];
        snprintf(line, sizeof line, "ulimit -v %ld && exec '%s' generate --checkpoint '%s' -n 50 --prompt 'the '",
                 limits[l] * 1024, LB_LOOKBACK_BIN, checkpoint("transformer", "char"));
        const char *args[] = {"-c", line, NULL};
        run_result r = run_program("sh", args);
        int answered = r.code == 0 || (r.code == 1 && one_error_line(&r, "generate") && contains(r.err, "out of memory"));
        EXPECT(answered, r);
        if (limits[l] >= 400)
            EXPECT(r.code == 0 && strncmp(r.out, "the ", 4) == 0 && code_points(r.out) == 4 + 50 + 1, r);
        run_free(&r);
    }
#endif
}

/* stream of a text model with learned positions (a table of CONTEXT rows) past its table:
 * the window of the last --max-context events (default the table) slides, and every
 * event's probability equals the full forward on that window (--json, 1e-6). */
static void test_stream_learned_window(void)
{
    const char *ck = checkpoint("transformer", "char");
    enum { EVENTS = 3 * CONTEXT + 5 };
    int32_t ids[EVENTS];
    char text[EVENTS * 4 + 1], path[600];
    size_t used = 0;
    for (int i = 0; i < EVENTS; i++) {
        ids[i] = (int32_t)((i * 7 + i / 5) % 20);
        used += (size_t)snprintf(text + used, sizeof text - used, "%d\n", ids[i]);
    }
    snprintf(path, sizeof path, "%s", path_in("stream_ids.txt"));
    CU_ASSERT_TRUE_FATAL(write_all(path, text, used));
    lb_model *m = lb_checkpoint_load_model(ck);
    CU_ASSERT_PTR_NOT_NULL_FATAL(m);
    CU_ASSERT_EQUAL(lb_model_get_config(m)->max_seq_len, CONTEXT);
    const int64_t windows[2] = {CONTEXT, 5};
    for (int k = 0; k < 2; k++) {
        char mc[16];
        snprintf(mc, sizeof mc, "%lld", (long long)windows[k]);
        const char *args[] = {"stream", "--checkpoint", ck, "--input", path, "--json", k ? "--max-context" : NULL, mc,
                              NULL};
        run_result r = run(args);
        char slid[64];
        snprintf(slid, sizeof slid, "slid %lld times", (long long)(EVENTS - windows[k]));
        EXPECT(r.code == 0 && count_lines(r.out) == EVENTS && contains(r.err, slid), r);
        const char *line = r.out;
        double worst = 0;
        for (int t = 0; t < EVENTS && line; t++) {
            const char *p = strstr(line, "\"probability\":");
            double prob = p ? strtod(p + 14, NULL) : -1;
            int64_t n = t + 1 < windows[k] ? t + 1 : windows[k];
            lb_graph *g = lb_graph_new();
            lb_graph_set_grad_enabled(g, 0);
            lb_model_input in = {1, n, ids + t + 1 - n, NULL, NULL};
            lb_var *y = lb_model_forward(g, m, &in, 0, NULL, NULL); /* [1, n, V] */
            CU_ASSERT_PTR_NOT_NULL_FATAL(y);
            int64_t v = lb_model_get_config(m)->num_classes;
            double top = -INFINITY, sum = 0;
            for (int64_t j = 0; j < v; j++)
                top = fmax(top, lb_tensor_flat(y->value, (n - 1) * v + j));
            for (int64_t j = 0; j < v; j++)
                sum += exp(lb_tensor_flat(y->value, (n - 1) * v + j) - top);
            worst = fmax(worst, fabs(prob - 1.0 / sum));
            lb_graph_free(g);
            line = strchr(line, '\n');
            line = line ? line + 1 : NULL;
        }
        CU_ASSERT_TRUE(worst < 1e-6);
        if (!(worst < 1e-6))
            fprintf(stderr, "\n  window %lld: %g from the full forward\n", (long long)windows[k], worst);
        run_free(&r);
    }
    lb_model_free(m);
    char big[16];
    snprintf(big, sizeof big, "%d", CONTEXT + 1);
    const char *over[] = {"stream", "--checkpoint", ck, "--input", path, "--max-context", big, NULL};
    run_result r = run(over);
    EXPECT(r.code == 2 && one_error_line(&r, "stream") && contains(r.err, "max_seq_len = 16"), r);
    run_free(&r);
}

int main(void)
{
    snprintf(work_dir, sizeof work_dir, "/tmp/lookback_test_cli_generate_%d", (int)getpid());
    mkdir(work_dir, 0777);
    const lb_test_case cases[] = {
        {"the prompt, then the tokens; the rate on stderr; the default prompt", test_prints_prompt_then_tokens},
        {"greedy text equals the library's lb_generate (transformer, LSTM)", test_greedy_equals_library},
        {"the same seed gives the same text at 1 and 2 threads", test_same_seed_any_threads},
        {"the window slides past the training context; the LSTM and local rotary only with --ctx-size", test_window},
        {"--num-samples: separators and one rate line per sample", test_num_samples},
        {"stream past the learned positions: a sliding window equal to the full forward", test_stream_learned_window},
        {"a byte vocabulary takes any bytes", test_byte_vocabulary},
        {"prompt characters outside the vocabulary, bad prompt files", test_prompt_errors},
        {"options out of range or given twice: exit 2", test_option_errors},
        {"a checkpoint that is not a language model, a missing one", test_not_a_language_model},
        {"a standard output that cannot be written", test_failed_write},
        {"under an address-space limit: the text or one line, exit 1", test_memory_limit},
        {NULL, NULL},
    };
    int rc = lb_test_main("cli_generate", cases);
    remove_tree(work_dir);
    return rc;
}

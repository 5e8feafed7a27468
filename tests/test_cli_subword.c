/* Subword corpora (data text --vocab bpe|unigram, --tokenizer; tokenizer export): the
 * ids equal those of SentencePiece's own spm_encode (and of Python's sentencepiece where
 * installed) for the same model; decoding restores the text byte for byte, every split
 * of the corpus included; the model travels into checkpoints under its checksum; every
 * bad input gives one line and writes nothing. */
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cli_support.h"
#include "data/dataset.h"
#include "data/text.h"

static int exists(const char *path)
{
    struct stat sb;
    return lstat(path, &sb) == 0;
}

/* Lines of words (some with accents, CJK and an emoji), double spaces, a tab, blank
 * lines: about 40,000 characters. The emoji appears only in the last line (the test
 * split): byte fallback encodes it. */
static const char *subword_text(size_t *len_out)
{
    static char path[512];
    static size_t len;
    if (path[0]) {
        *len_out = len;
        return path;
    }
    static const char *const words[] = {"the", "state", "of", "union", "is", "strong", "and", "we", "will", "work",
                                        "naïve", "café", "économie", "日本", "together", "people", "Congress", "1960"};
    static const char *const syllables[] = {"ka", "lo", "men", "tri", "su", "ver", "an", "dis", "po", "ré",
                                            "gu", "ston", "e", "lia", "mo", "ther"};
    snprintf(path, sizeof path, "%s", path_in("subword.txt"));
    FILE *f = fopen(path, "w");
    CU_ASSERT_PTR_NOT_NULL_FATAL(f);
    uint64_t x = 7;
    for (int i = 0; i < 7000; i++) {
        x = x * 6364136223846793005ull + 1442695040888963407ull;
        int w = (int)((x >> 33) % 30);
        if (w < 18)
            fputs(words[w], f);
        else /* a made-up word of two or three syllables */
            for (int k = 0; k < 2 + (int)((x >> 20) % 2); k++)
                fputs(syllables[(x >> (40 + 4 * k)) % 16], f);
        fprintf(f, "%s", i % 17 == 16 ? ".\n" : i % 101 == 50 ? "  " : i % 211 == 7 ? "\t" : " ");
        if (i % 400 == 399)
            fputc('\n', f);
    }
    fputs("the end \xF0\x9F\x99\x82 of it\n", f); /* U+1F642 */
    fclose(f);
    char *all = read_all(path, &len);
    free(all);
    *len_out = len;
    return path;
}

/* `data text TEXT -o OUT --vocab KIND --vocab-size N` (exit 0 expected). */
static void import_subword(const char *text, const char *out, const char *kind, const char *size)
{
    const char *args[] = {"data", "text", text, "-o", out, "--vocab", kind, "--vocab-size", size, "--force", NULL};
    run_result r = run(args);
    EXPECT(r.code == 0 && contains(r.out, "bytes per token"), r);
    run_free(&r);
}

/* A one-layer transformer trained for `steps` steps on corpus into run_dir (exit 0 expected). */
static void train_tiny(const char *corpus, const char *run_dir, const char *steps)
{
    const char *tr[] = {"train", "--data", corpus, "--model", "transformer", "--layers", "1", "--d-model", "16",
                        "--heads", "2", "--d-ff", "32", "--seq-len", "32", "--batch", "4", "--steps", steps,
                        "--eval-every", steps, "--out", run_dir, "--quiet", NULL};
    run_result r = run(tr);
    EXPECT(r.code == 0, r);
    run_free(&r);
}

/* The ids of spm_encode --output_format=id for every line of `text` with `model`,
 * compared with lb_vocab_encode of the same line. Returns the lines compared. */
static int compare_with_spm_encode(const lb_vocab *v, const char *model, const char *text)
{
    char model_arg[600];
    snprintf(model_arg, sizeof model_arg, "--model=%s", model);
    char *input = read_all(text, NULL);
    CU_ASSERT_PTR_NOT_NULL_FATAL(input);
    const char *args[] = {model_arg, "--output_format=id", "--input", text, NULL};
    run_result r = run_program("spm_encode", args);
    EXPECT(r.code == 0, r);
    int lines = 0, mismatches = 0;
    char *line = input, *ids_line = r.out;
    while (r.code == 0 && *line && ids_line && *ids_line) {
        char *end = strchr(line, '\n'), *ids_end = strchr(ids_line, '\n');
        size_t len = end ? (size_t)(end - line) : strlen(line);
        int32_t mine[4096];
        int64_t n = 0;
        CU_ASSERT_EQUAL_FATAL(lb_vocab_encode(v, line, len, 0, mine, 4096, &n), LB_OK);
        int64_t k = 0;
        for (char *p = ids_line; p < (ids_end ? ids_end : ids_line + strlen(ids_line));) {
            char *next;
            long id = strtol(p, &next, 10);
            if (next == p)
                break;
            if (k >= n || mine[k] != id)
                mismatches++;
            k++;
            p = next;
        }
        if (k != n)
            mismatches++;
        lines++;
        if (!end || !ids_end)
            break;
        line = end + 1;
        ids_line = ids_end + 1;
    }
    CU_ASSERT_EQUAL(mismatches, 0);
    run_free(&r);
    free(input);
    return lines;
}

/* Debian's python3-sentencepiece (the system Python) encodes the whole text, newlines
 * included, into the ids lookback gives; 1 when it ran. */
static int compare_with_python(const lb_vocab *v, const char *model, const char *text)
{
    if (access("/usr/bin/python3", X_OK) != 0)
        return 0;
    const char *probe[] = {"-c", "import sentencepiece", NULL};
    run_result r = run_program("/usr/bin/python3", probe);
    int have = r.code == 0;
    run_free(&r);
    if (!have)
        return 0;
    char script[2048];
    snprintf(script, sizeof script,
             "import sentencepiece as s\n"
             "p = s.SentencePieceProcessor(model_file='%s')\n"
             "t = open('%s', encoding='utf-8').read()\n"
             "ids = p.encode(t)\n"
             "assert p.decode(ids) == t\n"
             "print(' '.join(map(str, ids)))\n",
             model, text);
    const char *args[] = {"-c", script, NULL};
    r = run_program("/usr/bin/python3", args);
    EXPECT(r.code == 0, r);
    size_t len = 0;
    char *input = read_all(text, &len);
    int64_t n = 0;
    CU_ASSERT_EQUAL_FATAL(lb_vocab_encode(v, input, len, 0, NULL, 0, &n), LB_OK);
    int32_t *mine = malloc((size_t)n * sizeof *mine);
    CU_ASSERT_EQUAL_FATAL(lb_vocab_encode(v, input, len, 0, mine, n, &n), LB_OK);
    int64_t k = 0, mismatches = 0;
    for (char *p = r.out; r.code == 0;) {
        char *next;
        long id = strtol(p, &next, 10);
        if (next == p)
            break;
        mismatches += k >= n || mine[k] != id;
        k++;
        p = next;
    }
    CU_ASSERT_EQUAL(k, n);
    CU_ASSERT_EQUAL(mismatches, 0);
    free(mine);
    free(input);
    run_free(&r);
    return 1;
}

static void test_same_ids_as_sentencepiece(void)
{
    size_t len = 0;
    const char *text = subword_text(&len);
    static const char *const kinds[] = {"bpe", "unigram"};
    for (int k = 0; k < 2; k++) {
        char corpus[600], model[600];
        snprintf(corpus, sizeof corpus, "%s/%s.h5", work_dir, kinds[k]);
        snprintf(model, sizeof model, "%s/%s.model", work_dir, kinds[k]);
        import_subword(text, corpus, kinds[k], "400");
        const char *ex[] = {"tokenizer", "export", "--corpus", corpus, "-o", model, "--force", NULL};
        run_result r = run(ex);
        EXPECT(r.code == 0 && exists(model), r);
        run_free(&r);
        lb_vocab *v = lb_vocab_read(corpus);
        CU_ASSERT_PTR_NOT_NULL_FATAL(v);
        CU_ASSERT_EQUAL(lb_vocab_size(v), 400);
        CU_ASSERT_EQUAL(lb_vocab_get_kind(v), k == 0 ? LB_VOCAB_BPE : LB_VOCAB_UNIGRAM);
        /* the exported file is the stored model, byte for byte */
        size_t stored_n = 0, file_n = 0;
        const unsigned char *stored = lb_vocab_bytes(v, &stored_n);
        char *file = read_all(model, &file_n);
        CU_ASSERT_TRUE(file && file_n == stored_n && memcmp(file, stored, file_n) == 0);
        free(file);
        CU_ASSERT_TRUE(compare_with_spm_encode(v, model, text) > 10);
        compare_with_python(v, model, text);
        lb_vocab_free(v);
    }
}

static void test_decode_restores_every_byte(void)
{
    size_t len = 0;
    const char *text = subword_text(&len);
    char corpus[600];
    snprintf(corpus, sizeof corpus, "%s", path_in("bpe_round.h5"));
    import_subword(text, corpus, "bpe", "512");
    char *original = read_all(text, NULL);
    lb_dataset *ds = lb_dataset_open(corpus);
    CU_ASSERT_PTR_NOT_NULL_FATAL(ds);
    const lb_vocab *v = lb_dataset_vocab(ds);
    /* the three splits decode back to the file, in order, byte for byte */
    size_t at = 0;
    static const char *const splits[] = {"train", "val", "test"};
    for (int s = 0; s < 3; s++) {
        int64_t n = 0;
        const int32_t *tok = lb_dataset_tokens(ds, splits[s], &n);
        CU_ASSERT_TRUE_FATAL(tok != NULL && n > 0);
        size_t got = 0;
        CU_ASSERT_EQUAL(lb_vocab_decode(v, tok, n, NULL, 0, &got), LB_OK);
        char *buf = malloc(got + 1);
        CU_ASSERT_EQUAL(lb_vocab_decode(v, tok, n, buf, got + 1, &got), LB_OK);
        CU_ASSERT_TRUE(at + got <= len && memcmp(original + at, buf, got) == 0);
        at += got;
        free(buf);
    }
    CU_ASSERT_EQUAL(at, len);
    /* a text with characters the training text never had: bytes, then back */
    const char *other = "\xF0\x9F\x98\x80 Zebra\t\xCE\xA9mega\n\n  two spaces";
    int32_t ids[256];
    int64_t n = 0;
    CU_ASSERT_EQUAL(lb_vocab_encode(v, other, strlen(other), 0, ids, 256, &n), LB_OK);
    for (int64_t i = 0; i < n; i++)
        CU_ASSERT_NOT_EQUAL(ids[i], lb_vocab_unk_id(v));
    char back[256];
    CU_ASSERT_EQUAL(lb_vocab_decode(v, ids, n, back, sizeof back, NULL), LB_OK);
    CU_ASSERT_STRING_EQUAL(back, other);
    /* invalid UTF-8 is refused with its offset */
    CU_ASSERT_EQUAL(lb_vocab_encode(v, "ab\xFF", 3, 0, ids, 256, &n), LB_ERR_VALUE);
    lb_dataset_close(ds);
    free(original);
}

/* One error line, exit `code`, the message, and no output file (nor its .tmp or .lock). */
static void expect_refused(const char *const *args, const char *command, int code, const char *out, const char *message)
{
    char tmp[700], lock[700];
    snprintf(tmp, sizeof tmp, "%s.tmp", out);
    snprintf(lock, sizeof lock, "%s.lock", out);
    run_result r = run(args);
    EXPECT(r.code == code && one_error_line(&r, command) && contains(r.err, message) && !exists(out) && !exists(tmp) &&
               !exists(lock),
           r);
    run_free(&r);
}

static void test_bad_inputs(void)
{
    size_t len = 0;
    const char *text = subword_text(&len);
    char out[600];
    snprintf(out, sizeof out, "%s", path_in("refused.h5"));
    /* a size SentencePiece cannot reach: the size it can, each way */
    const char *big[] = {"data", "text", text, "-o", out, "--vocab", "unigram", "--vocab-size", "100000", NULL};
    expect_refused(big, "data text", 1, out, "SentencePiece can make at most");
    const char *small[] = {"data", "text", text, "-o", out, "--vocab", "bpe", "--vocab-size", "270", NULL};
    expect_refused(small, "data text", 1, out, "needs at least");
    /* a .model file that is not one */
    char fake[600];
    snprintf(fake, sizeof fake, "%s", path_in("fake.model"));
    CU_ASSERT_TRUE(write_all(fake, "not a model at all\n", 19));
    const char *bad_model[] = {"data", "text", text, "-o", out, "--tokenizer", fake, NULL};
    expect_refused(bad_model, "data text", 1, out, "fake.model is not a SentencePiece model");
    /* a text too small to train a tokenizer of any size */
    char tiny[600];
    snprintf(tiny, sizeof tiny, "%s", path_in("tiny.txt"));
    char few[1400];
    for (int i = 0; i < (int)sizeof few; i++)
        few[i] = "ab ab\n"[i % 6];
    CU_ASSERT_TRUE(write_all(tiny, few, sizeof few));
    const char *too_small[] = {"data", "text", tiny, "-o", out, "--vocab", "bpe", "--vocab-size", "300", NULL};
    expect_refused(too_small, "data text", 1, out, "too small to train a bpe tokenizer");
    /* usage: --tokenizer with --vocab char, tokenizer options with char, with --like */
    const char *with_char[] = {"data", "text", text, "-o", out, "--tokenizer", fake, "--vocab", "char", NULL};
    expect_refused(with_char, "data text", 2, out, "--vocab does not apply with --tokenizer");
    const char *size_char[] = {"data", "text", text, "-o", out, "--vocab-size", "500", NULL};
    expect_refused(size_char, "data text", 2, out, "--vocab-size applies to --vocab bpe or unigram");
    /* export: a char corpus has no tokenizer; a missing source */
    char chars[600], model[600];
    snprintf(chars, sizeof chars, "%s", path_in("chars.h5"));
    snprintf(model, sizeof model, "%s", path_in("chars.model"));
    const char *imp[] = {"data", "text", text, "-o", chars, "--quiet", NULL};
    run_result r = run(imp);
    EXPECT(r.code == 0, r);
    run_free(&r);
    const char *ex[] = {"tokenizer", "export", "--corpus", chars, "-o", model, NULL};
    expect_refused(ex, "tokenizer export", 1, model, "not a SentencePiece tokenizer");
    const char *ex2[] = {"tokenizer", "export", "-o", model, NULL};
    expect_refused(ex2, "tokenizer export", 2, model, "--checkpoint CK.h5 or --corpus CORPUS.h5");
}

/* Finds `needle` in data[0..n). */
static char *find_bytes(char *data, size_t n, const char *needle, size_t k)
{
    for (size_t i = 0; i + k <= n; i++)
        if (memcmp(data + i, needle, k) == 0)
            return data + i;
    return NULL;
}

static void test_checkpoint_and_import(void)
{
    size_t len = 0;
    const char *text = subword_text(&len);
    char corpus[600], run_dir[600], ck[700], model[600], again[600];
    snprintf(corpus, sizeof corpus, "%s", path_in("ck_bpe.h5"));
    snprintf(run_dir, sizeof run_dir, "%s", path_in("run_bpe"));
    snprintf(ck, sizeof ck, "%s/checkpoint.h5", run_dir);
    snprintf(model, sizeof model, "%s", path_in("ck.model"));
    snprintf(again, sizeof again, "%s", path_in("again.h5"));
    import_subword(text, corpus, "bpe", "400");
    train_tiny(corpus, run_dir, "3");
    run_result r;
    /* the checkpoint's tokenizer is the corpus's */
    const char *ex[] = {"tokenizer", "export", "--checkpoint", ck, "-o", model, NULL};
    r = run(ex);
    EXPECT(r.code == 0, r);
    run_free(&r);
    lb_vocab *a = lb_vocab_read(corpus), *b = lb_vocab_read(ck);
    CU_ASSERT_TRUE_FATAL(a && b);
    CU_ASSERT_EQUAL(lb_vocab_check_same(a, b, "corpus", "checkpoint"), LB_OK);
    /* --tokenizer with the exported model gives the same ids as the corpus */
    const char *imp[] = {"data", "text", text, "-o", again, "--tokenizer", model, "--quiet", NULL};
    r = run(imp);
    EXPECT(r.code == 0, r);
    run_free(&r);
    lb_dataset *d1 = lb_dataset_open(corpus), *d2 = lb_dataset_open(again);
    CU_ASSERT_TRUE_FATAL(d1 && d2);
    int64_t n1 = 0, n2 = 0;
    const int32_t *t1 = lb_dataset_tokens(d1, "train", &n1), *t2 = lb_dataset_tokens(d2, "train", &n2);
    CU_ASSERT_TRUE(n1 == n2 && n1 > 0 && memcmp(t1, t2, (size_t)n1 * sizeof *t1) == 0);
    lb_dataset_close(d1);
    lb_dataset_close(d2);
    /* eval needs nothing but the checkpoint and the corpus */
    const char *ev[] = {"eval", "--checkpoint", ck, "--data", corpus, NULL};
    r = run(ev);
    EXPECT(r.code == 0, r);
    run_free(&r);
    /* one byte of the stored model changed: refused by its checksum */
    size_t n = 0;
    char *bytes = read_all(ck, &n);
    char *piece = bytes ? find_bytes(bytes, n, "<0x0A>", 6) : NULL;
    CU_ASSERT_PTR_NOT_NULL_FATAL(piece);
    piece[4] = 'B';
    char damaged[600];
    snprintf(damaged, sizeof damaged, "%s", path_in("damaged.h5"));
    CU_ASSERT_TRUE(write_all(damaged, bytes, n));
    free(bytes);
    lb_vocab *c = lb_vocab_read(damaged);
    CU_ASSERT_PTR_NULL(c);
    CU_ASSERT_TRUE(lb_test_error_has("checksum"));
    lb_vocab_free(c);
    lb_vocab_free(a);
    lb_vocab_free(b);
}

/* The number after `key` in text (a JSON field or a "NUMBER unit" phrase), NAN if absent. */
static double number_after(const char *text, const char *key)
{
    const char *p = text ? strstr(text, key) : NULL;
    return p ? strtod(p + strlen(key), NULL) : NAN;
}

/* Bits per byte and per character in eval, metrics.csv and compare: the same text as a
 * char and a bpe corpus, each measure = the total nats over the split / its bytes or
 * characters and ln 2. */
static void test_bits_per_byte(void)
{
    size_t len = 0;
    const char *text = subword_text(&len);
    static const char *const kinds[] = {"char", "bpe"};
    for (int k = 0; k < 2; k++) {
        char corpus[600], run_dir[600], ck[700], metrics[700];
        snprintf(corpus, sizeof corpus, "%s/bits_%s.h5", work_dir, kinds[k]);
        snprintf(run_dir, sizeof run_dir, "%s/bits_run_%s", work_dir, kinds[k]);
        snprintf(ck, sizeof ck, "%s/checkpoint.h5", run_dir);
        snprintf(metrics, sizeof metrics, "%s/metrics.csv", run_dir);
        if (k == 0) {
            const char *imp[] = {"data", "text", text, "-o", corpus, "--quiet", NULL};
            run_result r = run(imp);
            EXPECT(r.code == 0, r);
            run_free(&r);
        } else {
            import_subword(text, corpus, "bpe", "400");
        }
        train_tiny(corpus, run_dir, "4");
        run_result r;
        char *m = read_all(metrics, NULL);
        CU_ASSERT_TRUE(m && contains(m, "skipped,bits_per_byte,bits_per_char,perplexity"));
        free(m);
        const char *ev[] = {"eval", "--checkpoint", ck, "--data", corpus, "--json", NULL};
        r = run(ev);
        EXPECT(r.code == 0, r);
        double loss = number_after(r.out, "\"loss\":"), bpb = number_after(r.out, "\"bits_per_byte\":"),
               bpc = number_after(r.out, "\"bits_per_char\":");
        run_free(&r);
        lb_dataset *ds = lb_dataset_open(corpus);
        CU_ASSERT_PTR_NOT_NULL_FATAL(ds);
        int64_t tokens = 0, bytes = 0, chars = 0;
        CU_ASSERT_EQUAL(lb_text_split_size(ds, "test", &tokens, &bytes, &chars), LB_OK);
        CU_ASSERT_TRUE(bytes > chars && chars >= tokens && tokens > 0);
        CU_ASSERT_TRUE(loss > 0);
        CU_ASSERT_DOUBLE_EQUAL(bpb, loss * (double)tokens / ((double)bytes * log(2.0)), 1e-4 * bpb);
        CU_ASSERT_DOUBLE_EQUAL(bpc, loss * (double)tokens / ((double)chars * log(2.0)), 1e-4 * bpc);
        if (k == 0) /* char: one token per character */
            CU_ASSERT_DOUBLE_EQUAL(bpc, loss / log(2.0), 1e-4 * bpc);
        lb_dataset_close(ds);
    }
}

/* Pieces in, whole characters out; generate prints only valid UTF-8. */
static void test_whole_characters(void)
{
    lb_utf8_pending p = {{0}, 0};
    char out[64];
    const char *e_acute = "\xC3\xA9", *euro = "\xE2\x82\xAC";
    CU_ASSERT_EQUAL(lb_utf8_whole(&p, e_acute, 1, out), 0);
    CU_ASSERT_EQUAL(lb_utf8_whole(&p, e_acute + 1, 1, out), 2);
    CU_ASSERT_EQUAL(memcmp(out, e_acute, 2), 0);
    CU_ASSERT_EQUAL(lb_utf8_whole(&p, "a", 1, out), 1);
    CU_ASSERT_EQUAL(out[0], 'a');
    CU_ASSERT_EQUAL(lb_utf8_whole(&p, euro, 2, out), 0);
    CU_ASSERT_EQUAL(lb_utf8_whole(&p, euro + 2, 1, out), 3);
    CU_ASSERT_EQUAL(memcmp(out, euro, 3), 0);
    /* a lead byte followed by no continuation: U+FFFD, then the next character */
    CU_ASSERT_EQUAL(lb_utf8_whole(&p, "\xC3" "b", 2, out), 4);
    CU_ASSERT_EQUAL(memcmp(out, "\xEF\xBF\xBD" "b", 4), 0);
    /* an overlong form and a stray continuation byte */
    CU_ASSERT_EQUAL(lb_utf8_whole(&p, "\xC0\x80", 2, out), 6);
    CU_ASSERT_EQUAL(lb_utf8_whole(&p, "\x80", 1, out), 3);
    CU_ASSERT_EQUAL(p.n, 0);
    /* a bpe model samples; its output is valid UTF-8 and starts with the prompt */
    size_t len = 0;
    const char *text = subword_text(&len);
    char corpus[600], run_dir[600], ck[700];
    snprintf(corpus, sizeof corpus, "%s", path_in("gen_bpe.h5"));
    snprintf(run_dir, sizeof run_dir, "%s", path_in("gen_run"));
    snprintf(ck, sizeof ck, "%s/checkpoint.h5", run_dir);
    import_subword(text, corpus, "bpe", "300");
    train_tiny(corpus, run_dir, "2");
    run_result r;
    /* high temperature: byte pieces (parts of 'é', '日') come out often */
    const char *gen[] = {"generate", "--checkpoint", ck, "--prompt", "café 日本", "-n", "300", "--temperature",
                         "3", "--top-k", "0", NULL};
    r = run(gen);
    EXPECT(r.code == 0 && strncmp(r.out, "café 日本", strlen("café 日本")) == 0, r);
    /* valid UTF-8: a subword vocabulary's encode refuses anything else */
    lb_vocab *v = lb_vocab_read(corpus);
    CU_ASSERT_PTR_NOT_NULL_FATAL(v);
    int64_t n = 0;
    CU_ASSERT_EQUAL(lb_vocab_encode(v, r.out, strlen(r.out), 1, NULL, 0, &n), LB_OK);
    CU_ASSERT_TRUE(n > 5);
    lb_vocab_free(v);
    run_free(&r);
}

/* A file of `n` one-line documents "name-K word word" (K = 0 .. n-1), every 10th
 * `long_every` characters long when long_every > 0. */
static const char *documents_file(const char *name, int n, int long_every)
{
    static char path[600];
    snprintf(path, sizeof path, "%s", path_in(name));
    FILE *f = fopen(path, "w");
    CU_ASSERT_PTR_NOT_NULL_FATAL(f);
    for (int i = 0; i < n; i++) {
        fprintf(f, "name-%d %s", i, i % 3 ? "ada lovelace" : "grace hopper");
        for (int k = 0; long_every > 0 && i % 10 == 9 && k < long_every; k++)
            fputc('x', f);
        fputs(i % 7 == 3 ? "\r\n\n" : "\n", f); /* a CRLF line, a blank line: neither is a document */
    }
    fclose(f);
    return path;
}

/* The documents of one split's stream: SEP doc SEP doc ... SEP, decoded, in *docs (n). */
static int split_documents(const lb_dataset *ds, const char *split, char docs[][64], int max)
{
    int64_t n = 0;
    const int32_t *tok = lb_dataset_tokens(ds, split, &n);
    const lb_vocab *v = lb_dataset_vocab(ds);
    int64_t sep = lb_vocab_separator_id(v);
    CU_ASSERT_TRUE_FATAL(tok && n >= 2 && sep >= 0);
    CU_ASSERT_EQUAL(tok[0], sep); /* begins and ends with the separator */
    CU_ASSERT_EQUAL(tok[n - 1], sep);
    int count = 0;
    for (int64_t i = 1, begin = 1; i < n; i++) {
        if (tok[i] != sep)
            continue;
        CU_ASSERT_TRUE(i > begin); /* never two separators in a row: no empty document */
        if (count < max) {
            size_t len = 0;
            CU_ASSERT_EQUAL(lb_vocab_decode(v, tok + begin, i - begin, docs[count], 64, &len), LB_OK);
        }
        count++;
        begin = i + 1;
    }
    return count;
}

static int doc_rank(const void *a, const void *b) { return strcmp((const char *)a, (const char *)b); }

static void test_documents(void)
{
    const char *text = documents_file("docs.txt", 200, 0);
    static const char *const kinds[] = {"char", "bpe"};
    for (int k = 0; k < 2; k++) {
        char corpus[600];
        snprintf(corpus, sizeof corpus, "%s/docs_%s.h5", work_dir, kinds[k]);
        const char *args[] = {"data", "text", text, "-o", corpus, "--documents", "lines", "--val-fraction", "0.1",
                              "--test-fraction", "0.1", "--seed", "5", "--vocab", kinds[k],
                              k ? "--vocab-size" : NULL, "300", NULL};
        run_result r = run(args);
        EXPECT(r.code == 0 && contains(r.out, "documents: train 160, val 20, test 20"), r);
        run_free(&r);
        lb_dataset *ds = lb_dataset_open(corpus);
        CU_ASSERT_PTR_NOT_NULL_FATAL(ds);
        if (k == 1)
            CU_ASSERT_EQUAL(lb_vocab_separator_id(lb_dataset_vocab(ds)), 2); /* </s> */
        /* every line once, in one split; val and test drawn from the whole file */
        static char docs[200][64];
        int n_train = split_documents(ds, "train", docs, 200);
        int n_val = split_documents(ds, "val", docs + n_train, 200 - n_train);
        int n_test = split_documents(ds, "test", docs + n_train + n_val, 200 - n_train - n_val);
        CU_ASSERT_TRUE(n_train == 160 && n_val == 20 && n_test == 20);
        int late_val = 0;
        for (int i = n_train; i < n_train + n_val; i++)
            late_val += atoi(docs[i] + 5) < 150;
        CU_ASSERT_TRUE(late_val > 5); /* not the end of the file */
        qsort(docs, 200, sizeof docs[0], doc_rank);
        int distinct = 1;
        for (int i = 1; i < 200; i++)
            distinct += strcmp(docs[i], docs[i - 1]) != 0;
        CU_ASSERT_EQUAL(distinct, 200);
        CU_ASSERT_PTR_NOT_NULL(strstr(docs[0], "name-0 grace hopper"));
        /* the training documents as a set */
        lb_doc_set *set = lb_doc_set_new(ds, "train");
        CU_ASSERT_PTR_NOT_NULL_FATAL(set);
        CU_ASSERT_EQUAL(lb_doc_set_size(set), 160);
        int64_t n = 0;
        const int32_t *tok = lb_dataset_tokens(ds, "train", &n);
        int64_t end = 1;
        while (tok[end] != tok[0])
            end++;
        CU_ASSERT_TRUE(lb_doc_set_has(set, tok + 1, end - 1));
        CU_ASSERT_FALSE(lb_doc_set_has(set, tok + 1, end - 2));
        lb_doc_set_free(set);
        lb_dataset_close(ds);
    }
    /* generate: one line per document, each marked */
    char corpus[600], run_dir[600], ck[700];
    snprintf(corpus, sizeof corpus, "%s/docs_char.h5", work_dir);
    snprintf(run_dir, sizeof run_dir, "%s", path_in("docs_run"));
    snprintf(ck, sizeof ck, "%s/checkpoint.h5", run_dir);
    train_tiny(corpus, run_dir, "2");
    run_result r;
    const char *gen[] = {"generate", "--checkpoint", ck, "--documents", "--data", corpus, "--num-samples", "5",
                         "-n", "40", NULL};
    r = run(gen);
    EXPECT(r.code == 0 && count_lines(r.out) == 5 && contains(r.err, "of 5 documents are in the training split"), r);
    int marked = 0;
    for (const char *p = r.out; (p = strchr(p, '\t')); p++)
        marked += strncmp(p, "\tnew\n", 5) == 0 || strncmp(p, "\tin train\n", 10) == 0;
    CU_ASSERT_EQUAL(marked, 5);
    run_free(&r);
}

static void test_documents_refused_and_long(void)
{
    char out[600];
    snprintf(out, sizeof out, "%s", path_in("docs_refused.h5"));
    const char *longer = documents_file("long_docs.txt", 200, 40);
    /* longer than the context: refused, dropped, truncated */
    const char *refuse[] = {"data", "text", longer, "-o", out, "--documents", "lines", "--context", "30", "--short",
                            "refuse", NULL};
    expect_refused(refuse, "data text", 1, out, "more than --context 30");
    const char *drop[] = {"data", "text", longer, "-o", out, "--documents", "lines", "--context", "30", NULL};
    run_result r = run(drop);
    EXPECT(r.code == 0 && contains(r.out, "20 dropped"), r);
    run_free(&r);
    const char *cut[] = {"data", "text", longer, "-o", out, "--documents", "lines", "--context", "30", "--short",
                         "truncate", "--force", NULL};
    r = run(cut);
    EXPECT(r.code == 0 && contains(r.out, "20 truncated") && contains(r.out, "documents: train 170"), r);
    run_free(&r);
    lb_dataset *ds = lb_dataset_open(out);
    CU_ASSERT_PTR_NOT_NULL_FATAL(ds);
    int64_t n = 0, longest = 0;
    const int32_t *tok = lb_dataset_tokens(ds, "train", &n);
    for (int64_t i = 1, begin = 0; i < n; i++)
        if (tok[i] == tok[0]) {
            longest = i - begin + 1 > longest ? i - begin + 1 : longest;
            begin = i;
        }
    CU_ASSERT_EQUAL(longest, 30); /* with both separators */
    lb_dataset_close(ds);
    unlink(out);
    /* paragraphs */
    char para[600];
    snprintf(para, sizeof para, "%s", path_in("paragraphs.txt"));
    FILE *f = fopen(para, "w");
    for (int i = 0; f && i < 100; i++)
        fprintf(f, "paragraph %d first line\nand its second line\n%s", i, i % 2 ? "\n" : "  \n\n");
    if (f)
        fclose(f);
    const char *blank[] = {"data", "text", para, "-o", out, "--documents", "blank-lines", NULL};
    r = run(blank);
    EXPECT(r.code == 0 && contains(r.out, "documents: train 85, val 10, test 5"), r);
    run_free(&r);
    unlink(out);
    /* the separator byte in the text; the options without --documents */
    char bad[600];
    snprintf(bad, sizeof bad, "%s", path_in("sep.txt"));
    char text[3000];
    for (int i = 0; i < (int)sizeof text; i++)
        text[i] = i % 30 == 29 ? '\n' : 'a' + i % 26;
    text[2000] = 0x03;
    CU_ASSERT_TRUE(write_all(bad, text, sizeof text));
    const char *sep[] = {"data", "text", bad, "-o", out, "--documents", "lines", NULL};
    expect_refused(sep, "data text", 1, out, "byte offset 2000: the text holds the byte 0x03");
    const char *no_docs[] = {"data", "text", bad, "-o", out, "--context", "30", NULL};
    expect_refused(no_docs, "data text", 2, out, "--context applies with --documents");
}

int main(void)
{
    snprintf(work_dir, sizeof work_dir, "/tmp/lookback_test_cli_subword_%d", (int)getpid());
    mkdir(work_dir, 0777);
    const lb_test_case cases[] = {
        {"bpe and unigram: the ids of spm_encode and Python's sentencepiece", test_same_ids_as_sentencepiece},
        {"decoding restores the text byte for byte, every split", test_decode_restores_every_byte},
        {"bad sizes, models, texts and options: one line, nothing written", test_bad_inputs},
        {"the tokenizer travels into checkpoints under its checksum; --tokenizer", test_checkpoint_and_import},
        {"bits per byte and per character in eval and metrics.csv, char and bpe", test_bits_per_byte},
        {"whole UTF-8 characters from pieces; generate prints valid UTF-8", test_whole_characters},
        {"documents: one per line, split by document, separators; generate --documents marks copies", test_documents},
        {"documents: longer than the context, paragraphs, the separator byte refused", test_documents_refused_and_long},
        {NULL, NULL},
    };
    int rc = lb_test_main("cli_subword", cases);
    remove_tree(work_dir);
    return rc;
}

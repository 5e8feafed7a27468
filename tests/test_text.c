/* Text corpora (data/text.h): the vocabulary's encode/decode, the import (splits,
 * fractions, byte vocabulary, unknown characters, limits), windows of an open corpus,
 * the random-offset loader (deterministic, resumable), the exact validation loss over
 * non-overlapping windows, bits per character, checkpoints carrying the vocabulary and
 * every family training on a corpus. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "data/dataset.h"
#include "data/loader.h"
#include "data/text.h"
#include "layers/model.h"
#include "support.h"
#include "train/trainer.h"

static char dir[256];

static const char *path_of(const char *name)
{
    static char buf[8][512];
    static int next;
    char *p = buf[next++ % 8];
    snprintf(p, 512, "%s/%s", dir, name);
    return p;
}

static void write_text(const char *path, const char *text, size_t len)
{
    FILE *f = fopen(path, "wb");
    CU_ASSERT_PTR_NOT_NULL_FATAL(f);
    CU_ASSERT_EQUAL(fwrite(text, 1, len, f), len);
    fclose(f);
}

static int exists(const char *path)
{
    struct stat sb;
    return stat(path, &sb) == 0;
}

/* A deterministic text of n characters over "ab cd\n" plus 'é' (2 bytes) every 37th;
 * its last 80 characters hold a '€' (3 bytes), absent before: the test split's unknown. */
static char *make_text(int64_t n, size_t *len)
{
    char *t = malloc((size_t)n * 3 + 1);
    size_t used = 0;
    uint64_t x = 12345;
    for (int64_t i = 0; i < n; i++) {
        x = x * 6364136223846793005ull + 1442695040888963407ull;
        if (i == n - 40) {
            memcpy(t + used, "\xe2\x82\xac", 3); /* U+20AC */
            used += 3;
        } else if (i % 37 == 5) {
            memcpy(t + used, "\xc3\xa9", 2); /* U+00E9 */
            used += 2;
        } else {
            t[used++] = "ab cd\n"[(x >> 33) % 6];
        }
    }
    t[used] = '\0';
    *len = used;
    return t;
}

/* ---- the vocabulary ---- */

static void test_vocab_encode_decode(void)
{
    const int32_t cps[] = {'\n', ' ', 'a', 0xE9, 0x20AC};
    lb_vocab *v = lb_vocab_new_chars(cps, 5, 1);
    CU_ASSERT_PTR_NOT_NULL_FATAL(v);
    CU_ASSERT_EQUAL(lb_vocab_size(v), 6);
    CU_ASSERT_EQUAL(lb_vocab_unk_id(v), 5);
    CU_ASSERT_EQUAL(lb_vocab_lookup(v, 0xE9), 3);
    CU_ASSERT_EQUAL(lb_vocab_lookup(v, 'z'), -1);
    CU_ASSERT_EQUAL(lb_vocab_code_point(v, 5), 0xFFFD);
    const char *text = "a\xc3\xa9 \xe2\x82\xac\n";
    int32_t ids[16];
    int64_t n = 0;
    CU_ASSERT_EQUAL(lb_vocab_encode(v, text, strlen(text), 0, ids, 16, &n), LB_OK);
    CU_ASSERT_EQUAL(n, 5);
    const int32_t want[] = {2, 3, 1, 4, 0};
    for (int i = 0; i < 5; i++)
        CU_ASSERT_EQUAL(ids[i], want[i]);
    char back[32];
    size_t len = 0;
    CU_ASSERT_EQUAL(lb_vocab_decode(v, ids, n, back, sizeof back, &len), LB_OK);
    CU_ASSERT_STRING_EQUAL(back, text);
    CU_ASSERT_EQUAL(len, strlen(text));
    /* counting only, then a character outside the vocabulary */
    CU_ASSERT_EQUAL(lb_vocab_encode(v, "aaz", 3, 1, NULL, 0, &n), LB_OK);
    CU_ASSERT_EQUAL(n, 3);
    CU_ASSERT_EQUAL(lb_vocab_encode(v, "aaz", 3, 1, ids, 16, &n), LB_OK);
    CU_ASSERT_EQUAL(ids[2], 5); /* <unk> */
    CU_ASSERT_EQUAL(lb_vocab_encode(v, "aaz", 3, 0, ids, 16, &n), LB_ERR_VALUE);
    CU_ASSERT_TRUE(lb_test_error_has("'z' (U+007A) at byte offset 2"));
    CU_ASSERT_EQUAL(lb_vocab_encode(v, "a\xff", 2, 1, ids, 16, &n), LB_ERR_VALUE);
    CU_ASSERT_TRUE(lb_test_error_has("byte offset 1"));
    CU_ASSERT_EQUAL(lb_vocab_encode(v, "aaa", 3, 0, ids, 2, &n), LB_ERR_VALUE); /* capacity */
    const int32_t bad[] = {1, 9};
    CU_ASSERT_EQUAL(lb_vocab_decode(v, bad, 2, back, sizeof back, &len), LB_ERR_VALUE);
    CU_ASSERT_TRUE(lb_test_error_has("position 1"));
    /* truncation keeps whole symbols */
    CU_ASSERT_EQUAL(lb_vocab_decode(v, ids, 2, back, 2, &len), LB_OK);
    CU_ASSERT_STRING_EQUAL(back, "a");
    CU_ASSERT_EQUAL(len, 2);
    char what[48];
    CU_ASSERT_STRING_EQUAL(lb_vocab_describe(v, 0, what, sizeof what), "'\\n'");
    CU_ASSERT_STRING_EQUAL(lb_vocab_describe(v, 5, what, sizeof what), "<unk>");
    lb_vocab_free(v);
    /* code points must be valid and increase */
    const int32_t unsorted[] = {'b', 'a'}, surrogate[] = {0xD800};
    CU_ASSERT_PTR_NULL(lb_vocab_new_chars(unsorted, 2, 0));
    CU_ASSERT_PTR_NULL(lb_vocab_new_chars(surrogate, 1, 0));
    lb_vocab *b = lb_vocab_new_bytes();
    CU_ASSERT_EQUAL(lb_vocab_size(b), 256);
    CU_ASSERT_EQUAL(lb_vocab_encode(b, "a\xff", 2, 0, ids, 16, &n), LB_OK);
    CU_ASSERT_EQUAL(ids[1], 255);
    lb_vocab_free(b);
}

/* ---- import ---- */

/* Every token of the three splits decoded, in order. */
static char *decode_all(const lb_dataset *ds, size_t *len)
{
    size_t total = 0, cap = 1;
    int64_t n[3];
    const char *splits[3] = {"train", "val", "test"};
    for (int s = 0; s < 3; s++) {
        lb_dataset_tokens(ds, splits[s], &n[s]);
        cap += (size_t)n[s] * 4;
    }
    char *out = malloc(cap);
    for (int s = 0; s < 3; s++) {
        const int32_t *tok = lb_dataset_tokens(ds, splits[s], &n[s]);
        size_t l = 0;
        CU_ASSERT_EQUAL(lb_vocab_decode(lb_dataset_vocab(ds), tok, n[s], out + total, cap - total, &l), LB_OK);
        total += l;
    }
    *len = total;
    return out;
}

static void test_import_round_trip(void)
{
    size_t len;
    char *text = make_text(3000, &len);
    const char *in = path_of("round.txt"), *out = path_of("round.h5");
    write_text(in, text, len);
    lb_text_options o;
    lb_text_options_default(&o);
    lb_text_summary sum;
    const char *paths[] = {in};
    CU_ASSERT_EQUAL_FATAL(lb_text_import(&o, paths, 1, out, &sum), LB_OK);
    /* 3000 characters: val floor(300), test floor(150), train the rest */
    CU_ASSERT_EQUAL(sum.tokens[0], 2550);
    CU_ASSERT_EQUAL(sum.tokens[1], 300);
    CU_ASSERT_EQUAL(sum.tokens[2], 150);
    CU_ASSERT_EQUAL(sum.source_bytes, (int64_t)len);
    CU_ASSERT_EQUAL(sum.unknown, 1); /* the euro sign, in test only */
    CU_ASSERT_EQUAL(sum.first_unknown, 0x20AC);
    CU_ASSERT_FALSE(exists(path_of("round.h5.tmp")));
    lb_dataset *ds = lb_dataset_open(out);
    CU_ASSERT_PTR_NOT_NULL_FATAL(ds);
    CU_ASSERT_TRUE(lb_dataset_is_text(ds));
    CU_ASSERT_STRING_EQUAL(lb_dataset_task_name(ds), "text");
    const lb_vocab *v = lb_dataset_vocab(ds);
    CU_ASSERT_EQUAL(lb_vocab_size(v), 8); /* \n, space, a, b, c, d, é, <unk> */
    CU_ASSERT_EQUAL(lb_vocab_unk_id(v), 7);
    CU_ASSERT_EQUAL(lb_vocab_code_point(v, 0), '\n');
    CU_ASSERT_EQUAL(lb_vocab_code_point(v, 6), 0xE9);
    CU_ASSERT_EQUAL(lb_dataset_vocab_size(ds), 8);
    CU_ASSERT_EQUAL(lb_dataset_num_classes(ds), 8);
    CU_ASSERT_TRUE(lb_dataset_per_position(ds));
    /* decoding every split gives the text back, the unknown as U+FFFD */
    size_t dlen;
    char *back = decode_all(ds, &dlen);
    CU_ASSERT_EQUAL(dlen, len);
    char *euro = strstr(text, "\xe2\x82\xac");
    CU_ASSERT_PTR_NOT_NULL_FATAL(euro);
    memcpy(euro, "\xef\xbf\xbd", 3); /* U+FFFD */
    CU_ASSERT_TRUE(dlen == len && memcmp(back, text, len) == 0);
    /* the vocabulary read from the file alone */
    lb_vocab *fv = lb_vocab_read(out);
    CU_ASSERT_PTR_NOT_NULL_FATAL(fv);
    CU_ASSERT_EQUAL(lb_vocab_check_same(fv, v, "a", "b"), LB_OK);
    lb_vocab_free(fv);
    free(back);
    lb_dataset_close(ds);
    /* the same with --unk error: refused, naming the character and its offset; nothing written */
    o.unk = LB_UNK_ERROR;
    CU_ASSERT_EQUAL(lb_text_import(&o, paths, 1, path_of("refused.h5"), &sum), LB_ERR_VALUE);
    CU_ASSERT_TRUE(lb_test_error_has("U+20AC"));
    CU_ASSERT_TRUE(lb_test_error_has("test split"));
    char offset[64];
    snprintf(offset, sizeof offset, "byte offset %lld", (long long)(euro - text));
    CU_ASSERT_TRUE(lb_test_error_has(offset));
    CU_ASSERT_FALSE(exists(path_of("refused.h5")));
    free(text);
}

static void test_import_fractions_and_files(void)
{
    size_t len;
    char *text = make_text(2000, &len);
    const char *a = path_of("part_a.txt"), *b = path_of("part_b.txt");
    size_t cut = 1000; /* an ASCII position? step to a character boundary */
    while ((text[cut] & 0xC0) == 0x80)
        cut++;
    write_text(a, text, cut);
    write_text(b, text + cut, len - cut);
    lb_text_options o;
    lb_text_options_default(&o);
    o.val_fraction = 0.25;
    o.test_fraction = 0.1;
    lb_text_summary sum;
    const char *paths[] = {a, b};
    CU_ASSERT_EQUAL_FATAL(lb_text_import(&o, paths, 2, path_of("two.h5"), &sum), LB_OK);
    CU_ASSERT_EQUAL(sum.tokens[1], 500);
    CU_ASSERT_EQUAL(sum.tokens[2], 200);
    CU_ASSERT_EQUAL(sum.tokens[0], 1300);
    lb_dataset *ds = lb_dataset_open(path_of("two.h5"));
    CU_ASSERT_PTR_NOT_NULL_FATAL(ds);
    size_t dlen;
    char *back = decode_all(ds, &dlen); /* the euro sign is in test and not in train: <unk> */
    CU_ASSERT_EQUAL(dlen, len);
    CU_ASSERT_TRUE(memcmp(back, text, 1500) == 0); /* train and val: as written */
    free(back);
    lb_dataset_close(ds);
    /* no val, no test: everything trains */
    o.val_fraction = o.test_fraction = 0;
    CU_ASSERT_EQUAL(lb_text_import(&o, paths, 2, path_of("all.h5"), &sum), LB_OK);
    CU_ASSERT_EQUAL(sum.tokens[0], 2000);
    CU_ASSERT_EQUAL(sum.tokens[1] + sum.tokens[2], 0);
    CU_ASSERT_EQUAL(sum.unknown, 0);
    /* invalid UTF-8 in the second file: that file and the offset within it */
    char *broken = malloc(len + 1);
    memcpy(broken, text + cut, len - cut);
    broken[10] = (char)0xC3; /* a lead byte followed by ASCII */
    broken[11] = 'a';
    write_text(b, broken, len - cut);
    CU_ASSERT_EQUAL(lb_text_import(&o, paths, 2, path_of("bad.h5"), &sum), LB_ERR_VALUE);
    CU_ASSERT_TRUE(lb_test_error_has("part_b.txt: invalid UTF-8 at byte offset 10"));
    CU_ASSERT_TRUE(lb_test_error_has("--vocab byte"));
    CU_ASSERT_FALSE(exists(path_of("bad.h5")));
    /* the same bytes import as bytes */
    o.vocab = LB_VOCAB_BYTE;
    CU_ASSERT_EQUAL(lb_text_import(&o, paths, 2, path_of("bytes.h5"), &sum), LB_OK);
    CU_ASSERT_EQUAL(sum.tokens[0], (int64_t)len);
    CU_ASSERT_EQUAL(sum.vocab_size, 256);
    ds = lb_dataset_open(path_of("bytes.h5"));
    CU_ASSERT_PTR_NOT_NULL_FATAL(ds);
    int64_t n;
    const int32_t *tok = lb_dataset_tokens(ds, "train", &n);
    CU_ASSERT_EQUAL(n, (int64_t)len);
    CU_ASSERT_EQUAL(tok[cut + 10], 0xC3);
    CU_ASSERT_EQUAL(tok[0], (unsigned char)text[0]);
    CU_ASSERT_EQUAL(lb_vocab_get_kind(lb_dataset_vocab(ds)), LB_VOCAB_BYTE);
    lb_dataset_close(ds);
    free(broken);
    free(text);
}

static void test_import_limits(void)
{
    lb_text_options o;
    lb_text_options_default(&o);
    lb_text_summary sum;
    const char *p[] = {path_of("short.txt")};
    write_text(p[0], "too short\n", 10);
    CU_ASSERT_EQUAL(lb_text_import(&o, p, 1, path_of("x.h5"), &sum), LB_ERR_VALUE);
    CU_ASSERT_TRUE(lb_test_error_has("10 characters, fewer than the 1024"));
    write_text(p[0], "", 0);
    CU_ASSERT_EQUAL(lb_text_import(&o, p, 1, path_of("x.h5"), &sum), LB_ERR_VALUE);
    CU_ASSERT_TRUE(lb_test_error_has("is empty"));
    /* 1200 distinct characters, more than --max-vocab 100 */
    char *many = malloc(1200 * 3);
    size_t used = 0;
    for (int i = 0; i < 1200; i++) {
        int cp = 0x4E00 + i; /* 3 bytes each */
        many[used++] = (char)(0xE0 | (cp >> 12));
        many[used++] = (char)(0x80 | ((cp >> 6) & 0x3F));
        many[used++] = (char)(0x80 | (cp & 0x3F));
    }
    write_text(p[0], many, used);
    o.max_vocab = 100;
    o.val_fraction = o.test_fraction = 0;
    CU_ASSERT_EQUAL(lb_text_import(&o, p, 1, path_of("x.h5"), &sum), LB_ERR_VALUE);
    CU_ASSERT_TRUE(lb_test_error_has("1200 distinct characters, more than the limit of 100"));
    CU_ASSERT_TRUE(lb_test_error_has("--vocab byte"));
    o.max_vocab = 2000;
    CU_ASSERT_EQUAL(lb_text_import(&o, p, 1, path_of("x.h5"), &sum), LB_OK);
    CU_ASSERT_EQUAL(sum.vocab_size, 1200);
    /* a split too small to score, a folder, the output as an input */
    o.test_fraction = 0.001;
    CU_ASSERT_EQUAL(lb_text_import(&o, p, 1, path_of("y.h5"), &sum), LB_ERR_VALUE);
    CU_ASSERT_TRUE(lb_test_error_has("test split would hold 1 characters"));
    o.test_fraction = 0;
    const char *folder[] = {dir};
    CU_ASSERT_EQUAL(lb_text_import(&o, folder, 1, path_of("y.h5"), &sum), LB_ERR_IO);
    CU_ASSERT_TRUE(lb_test_error_has("is a folder"));
    CU_ASSERT_EQUAL(lb_text_import(&o, p, 1, p[0], &sum), LB_ERR_IO);
    CU_ASSERT_TRUE(lb_test_error_has("never writes over its inputs"));
    CU_ASSERT_FALSE(exists(path_of("y.h5")));
    CU_ASSERT_EQUAL(o.val_fraction = 0.7, 0.7);
    CU_ASSERT_EQUAL(lb_text_import(&o, p, 1, path_of("y.h5"), &sum), LB_ERR_VALUE);
    CU_ASSERT_TRUE(lb_test_error_has("--val-fraction"));
    free(many);
}

/* ---- windows, the loader ---- */

static lb_dataset *corpus(const char *name, int64_t chars)
{
    size_t len;
    char *text = make_text(chars, &len);
    char in[512];
    snprintf(in, sizeof in, "%s.txt", path_of(name));
    write_text(in, text, len);
    free(text);
    lb_text_options o;
    lb_text_options_default(&o);
    const char *paths[] = {in};
    CU_ASSERT_EQUAL(lb_text_import(&o, paths, 1, path_of(name), NULL), LB_OK);
    return lb_dataset_open(path_of(name));
}

static void test_windows(void)
{
    lb_dataset *ds = corpus("windows.h5", 2000); /* val 200 tokens */
    CU_ASSERT_PTR_NOT_NULL_FATAL(ds);
    CU_ASSERT_EQUAL(lb_dataset_set_seq_len(ds, 7), LB_OK);
    CU_ASSERT_EQUAL(lb_dataset_seq_len(ds), 7);
    int64_t n;
    const int32_t *tok = lb_dataset_tokens(ds, "val", &n);
    CU_ASSERT_EQUAL(n, 200);
    CU_ASSERT_EQUAL(lb_dataset_split_size(ds, "val"), 29); /* ceil(199 / 7) */
    lb_batch b;
    CU_ASSERT_EQUAL_FATAL(lb_dataset_slice(ds, "val", 27, 2, &b), LB_OK);
    CU_ASSERT_EQUAL(b.batch_size, 2);
    CU_ASSERT_EQUAL(b.seq_len, 7);
    CU_ASSERT_TRUE(b.per_position);
    for (int64_t i = 0; i < 2; i++)
        for (int64_t t = 0; t < 7; t++) {
            int64_t at = (27 + i) * 7 + t;
            CU_ASSERT_EQUAL(b.tokens[i * 7 + t], at < n ? tok[at] : 0);
            CU_ASSERT_EQUAL(b.targets[i * 7 + t], at + 1 < n ? tok[at + 1] : -100);
        }
    CU_ASSERT_EQUAL(b.targets[13], -100); /* the last window: 199 - 28*7 = 3 targets, then padding */
    CU_ASSERT_EQUAL(b.targets[7 + 2], tok[199]);
    lb_batch_free(&b);
    CU_ASSERT_EQUAL(lb_dataset_slice(ds, "val", 28, 2, &b), LB_ERR_VALUE);
    int64_t counts[8], ignored = 1;
    CU_ASSERT_EQUAL(lb_dataset_label_histogram(ds, "val", counts, &ignored), LB_OK);
    int64_t total = 0;
    for (int i = 0; i < 8; i++)
        total += counts[i];
    CU_ASSERT_EQUAL(total, 199);
    CU_ASSERT_EQUAL(ignored, 0);
    double h = 0, x = 0;
    CU_ASSERT_EQUAL(lb_text_unigram_bits(ds, "train", &h, &x), LB_OK);
    CU_ASSERT_TRUE(h > 2.0 && h < 3.0); /* about log2(6) for 6 near-uniform symbols */
    CU_ASSERT_TRUE(x >= h - 1e-9);      /* the smoothed cross-entropy is at least the entropy */
    lb_dataset_close(ds);
}

/* The loader's batches: offsets drawn by lb_rng_below(N - T) from the seed, in order;
 * x = tok[i .. i+T), y = tok[i+1 .. i+T+1); resumed from a saved state, the same. */
static void test_loader_random_windows(void)
{
    lb_dataset *ds = corpus("loader.h5", 3000);
    CU_ASSERT_PTR_NOT_NULL_FATAL(ds);
    const int64_t T = 9, B = 5;
    CU_ASSERT_EQUAL(lb_dataset_set_seq_len(ds, T), LB_OK);
    int64_t n;
    const int32_t *tok = lb_dataset_tokens(ds, "train", &n);
    lb_loader *ld = lb_loader_new(ds, "train", B, 1, 1, 77);
    CU_ASSERT_PTR_NOT_NULL_FATAL(ld);
    lb_rng rng;
    lb_rng_seed(&rng, 77);
    int32_t seen[4][5 * 9];
    lb_loader_state saved;
    for (int k = 0; k < 4; k++) {
        if (k == 2)
            CU_ASSERT_EQUAL(lb_loader_get_state(ld, &saved), LB_OK);
        lb_batch b;
        CU_ASSERT_EQUAL_FATAL(lb_loader_next(ld, &b), 1);
        CU_ASSERT_EQUAL(b.batch_size, B);
        for (int64_t i = 0; i < B; i++) {
            int64_t off = (int64_t)lb_rng_below(&rng, (uint64_t)(n - T));
            CU_ASSERT_EQUAL(b.indices[i], off);
            for (int64_t t = 0; t < T; t++) {
                CU_ASSERT_EQUAL(b.tokens[i * T + t], tok[off + t]);
                CU_ASSERT_EQUAL(b.targets[i * T + t], tok[off + t + 1]);
            }
        }
        memcpy(seen[k], b.tokens, sizeof seen[k]);
    }
    lb_loader *again = lb_loader_new(ds, "train", B, 1, 1, 1);
    CU_ASSERT_EQUAL(lb_loader_set_state(again, &saved), LB_OK);
    for (int k = 2; k < 4; k++) {
        lb_batch b;
        CU_ASSERT_EQUAL_FATAL(lb_loader_next(again, &b), 1);
        CU_ASSERT_EQUAL(memcmp(b.tokens, seen[k], sizeof seen[k]), 0);
    }
    /* two shards of each batch together give the whole batch */
    lb_loader *s0 = lb_loader_new(ds, "train", B, 1, 1, 77), *s1 = lb_loader_new(ds, "train", B, 1, 1, 77);
    CU_ASSERT_EQUAL(lb_loader_set_shard(s0, 0, 2), LB_OK);
    CU_ASSERT_EQUAL(lb_loader_set_shard(s1, 1, 2), LB_OK);
    lb_batch p0, p1;
    CU_ASSERT_EQUAL(lb_loader_next(s0, &p0), 1);
    CU_ASSERT_EQUAL(lb_loader_next(s1, &p1), 1);
    CU_ASSERT_EQUAL(p0.batch_size + p1.batch_size, B);
    CU_ASSERT_EQUAL(memcmp(p0.tokens, seen[0], (size_t)(p0.batch_size * T) * 4), 0);
    CU_ASSERT_EQUAL(memcmp(p1.tokens, seen[0] + p0.batch_size * T, (size_t)(p1.batch_size * T) * 4), 0);
    lb_loader_free(s0);
    lb_loader_free(s1);
    lb_loader_free(again);
    lb_loader_free(ld);
    /* a window longer than the training stream */
    CU_ASSERT_EQUAL(lb_dataset_set_seq_len(ds, n), LB_OK);
    CU_ASSERT_PTR_NULL(lb_loader_new(ds, "train", B, 1, 1, 77));
    CU_ASSERT_TRUE(lb_test_error_has("lower --seq-len"));
    lb_dataset_close(ds);
}

/* ---- training and evaluation ---- */

static lb_model *text_model(const lb_dataset *ds, lb_model_kind kind, lb_dtype dtype)
{
    lb_model_config c;
    lb_model_config_default(kind, &c);
    c.dtype = dtype;
    c.d_model = 8;
    c.n_heads = 2;
    c.d_ff = 16;
    c.n_layers = 2;
    c.hidden_size = 8;
    c.pos = LB_POS_LEARNED;
    c.tie_embeddings = 1;
    c.seed = 3;
    lb_model_config_fit_data(&c, ds);
    return lb_model_new(&c);
}

/* The validation loss over the whole split equals the mean, over every token but the
 * first, of -log softmax(logits)[target] computed here window by window, one at a time. */
static void test_exact_validation_loss(void)
{
    lb_dataset *ds = corpus("exact.h5", 1500); /* val 150 tokens */
    CU_ASSERT_PTR_NOT_NULL_FATAL(ds);
    const int64_t T = 16;
    CU_ASSERT_EQUAL(lb_dataset_set_seq_len(ds, T), LB_OK);
    lb_model *m = text_model(ds, LB_MODEL_TRANSFORMER, LB_FLOAT64);
    CU_ASSERT_PTR_NOT_NULL_FATAL(m);
    CU_ASSERT_EQUAL(lb_model_get_config(m)->max_seq_len, T);
    lb_test_randomize_params(lb_model_params(m), 9, -0.6, 0.6);
    lb_eval_result r;
    CU_ASSERT_EQUAL_FATAL(lb_evaluate(m, ds, "val", 0, 3, 0, &r, NULL), LB_OK);
    int64_t n;
    const int32_t *tok = lb_dataset_tokens(ds, "val", &n);
    CU_ASSERT_EQUAL(r.scored, n - 1);
    CU_ASSERT_EQUAL(r.examples, (n - 1 + T - 1) / T);
    double sum = 0;
    int64_t scored = 0, V = lb_dataset_vocab_size(ds);
    for (int64_t start = 0; start < n - 1; start += T) {
        int64_t len = n - 1 - start < T ? n - 1 - start : T; /* a shorter last window: the same context */
        lb_graph *g = lb_graph_new();
        lb_model_input in = {1, len, tok + start, NULL, NULL};
        lb_var *y = lb_model_forward(g, m, &in, 0, NULL, NULL); /* [1, len, V] */
        CU_ASSERT_PTR_NOT_NULL_FATAL(y);
        for (int64_t t = 0; t < len; t++) {
            double mx = -INFINITY, z = 0;
            for (int64_t v = 0; v < V; v++)
                mx = fmax(mx, lb_tensor_flat(y->value, t * V + v));
            for (int64_t v = 0; v < V; v++)
                z += exp(lb_tensor_flat(y->value, t * V + v) - mx);
            sum += -(lb_tensor_flat(y->value, t * V + tok[start + t + 1]) - mx - log(z));
            scored++;
        }
        lb_graph_free(g);
    }
    CU_ASSERT_EQUAL(scored, n - 1);
    CU_ASSERT_DOUBLE_EQUAL(r.loss, sum / (double)scored, 1e-12);
    lb_model_free(m);
    lb_dataset_close(ds);
}

/* Reads the last line of a metrics file into its columns. */
static int last_row(const char *path, char *header, size_t hsize, double *cols, int max)
{
    FILE *f = fopen(path, "r");
    if (!f)
        return 0;
    char line[1024], last[1024] = "";
    if (!fgets(header, (int)hsize, f)) {
        fclose(f);
        return 0;
    }
    while (fgets(line, sizeof line, f))
        snprintf(last, sizeof last, "%s", line);
    fclose(f);
    int n = 0;
    for (char *save = NULL, *t = strtok_r(last, ",", &save); t && n < max; t = strtok_r(NULL, ",", &save))
        cols[n++] = strtod(t, NULL);
    return n;
}

/* Each family trains on a corpus; a resumed run ends bit for bit where an uninterrupted
 * one does; the metrics give bits per character = loss / ln 2 and the perplexity; the
 * checkpoint carries the vocabulary and the context. */
static void test_train_resume_metrics(void)
{
    lb_dataset *ds = corpus("train.h5", 4000);
    CU_ASSERT_PTR_NOT_NULL_FATAL(ds);
    const int64_t T = 12;
    CU_ASSERT_EQUAL(lb_dataset_set_seq_len(ds, T), LB_OK);
    for (int kind = LB_MODEL_TRANSFORMER; kind <= LB_MODEL_CONV; kind++) {
        lb_train_config tc;
        lb_train_config_default(&tc);
        tc.steps = 6;
        tc.batch_size = 4;
        tc.seq_len = T;
        tc.eval_every = 3;
        tc.eval_examples = 0;
        tc.schedule.warmup_steps = 2;
        tc.threads = 1;
        tc.seed = 11;
        lb_model *a = text_model(ds, (lb_model_kind)kind, LB_FLOAT32), *b = text_model(ds, (lb_model_kind)kind, LB_FLOAT32);
        CU_ASSERT_PTR_NOT_NULL_FATAL(a);
        lb_trainer *ta = lb_trainer_new(a, ds, &tc);
        CU_ASSERT_PTR_NOT_NULL_FATAL(ta);
        const char *metrics_path = path_of("metrics.csv");
        FILE *mf = fopen(metrics_path, "w");
        fprintf(mf, "%s\n", lb_metrics_header_for(ds));
        CU_ASSERT_EQUAL(lb_trainer_run(ta, path_of("full.h5"), mf, NULL, NULL), LB_OK);
        fclose(mf);
        CU_ASSERT_EQUAL(lb_trainer_steps_done(ta), 6);
        /* half, saved, loaded into a new trainer, the other half */
        lb_train_config half = tc;
        half.steps = 3;
        lb_trainer *tb = lb_trainer_new(b, ds, &half);
        CU_ASSERT_EQUAL(lb_trainer_run(tb, path_of("half.h5"), NULL, NULL, NULL), LB_OK);
        lb_trainer_free(tb);
        lb_model *c = text_model(ds, (lb_model_kind)kind, LB_FLOAT32);
        lb_trainer *tcn = lb_trainer_new(c, ds, &tc);
        CU_ASSERT_EQUAL_FATAL(lb_trainer_load(tcn, path_of("half.h5")), LB_OK);
        CU_ASSERT_EQUAL(lb_trainer_run(tcn, NULL, NULL, NULL, NULL), LB_OK);
        lb_params *pa = lb_model_params(a), *pc = lb_model_params(c);
        int same = pa->count == pc->count;
        for (int i = 0; same && i < pa->count; i++)
            same = memcmp(lb_tensor_data(pa->items[i]->value), lb_tensor_data(pc->items[i]->value),
                          (size_t)lb_tensor_numel(pa->items[i]->value) * 4) == 0;
        CU_ASSERT_TRUE(same);
        if (!same)
            fprintf(stderr, "\n  %s: the resumed run differs\n", lb_model_kind_name((lb_model_kind)kind));
        /* metrics: bits per character and perplexity of the val row's loss */
        char header[512];
        double cols[16];
        int nc = last_row(metrics_path, header, sizeof header, cols, 16);
        CU_ASSERT_EQUAL(nc, 14);
        CU_ASSERT_PTR_NOT_NULL(strstr(header, "skipped,bits_per_byte,bits_per_char,perplexity,mfu,peak_memory_mib"));
        CU_ASSERT_TRUE(isfinite(cols[2]) && cols[2] > 0);
        /* bits per byte: the split's total nats over its UTF-8 bytes ('é' is 2 bytes) */
        int64_t tokens = 0, bytes = 0, chars = 0;
        CU_ASSERT_EQUAL(lb_text_split_size(ds, "val", &tokens, &bytes, &chars), LB_OK);
        CU_ASSERT_TRUE(chars == tokens && bytes > chars);
        CU_ASSERT_DOUBLE_EQUAL(cols[9], cols[2] * (double)tokens / ((double)bytes * log(2.0)), 1e-6 * cols[9]);
        CU_ASSERT_DOUBLE_EQUAL(cols[10], cols[2] / log(2.0), 1e-6 * cols[10]);
        CU_ASSERT_DOUBLE_EQUAL(cols[11], exp(cols[2]), 1e-6 * cols[11]);
        /* the val row is the whole split, as lb_evaluate scores it */
        lb_eval_result r;
        CU_ASSERT_EQUAL(lb_trainer_evaluate(ta, "val", 0, &r), LB_OK);
        CU_ASSERT_DOUBLE_EQUAL(cols[2], r.loss, 1e-7 * r.loss);
        /* the checkpoint: vocabulary and context */
        lb_vocab *v = lb_vocab_read(path_of("full.h5"));
        CU_ASSERT_PTR_NOT_NULL_FATAL(v);
        CU_ASSERT_EQUAL(lb_vocab_check_same(v, lb_dataset_vocab(ds), "checkpoint", "corpus"), LB_OK);
        lb_vocab_free(v);
        int64_t ctx = 0;
        CU_ASSERT_EQUAL(lb_checkpoint_read_seq_len(path_of("full.h5"), &ctx), LB_OK);
        CU_ASSERT_EQUAL(ctx, T);
        char task[32];
        CU_ASSERT_EQUAL(lb_checkpoint_read_task(path_of("full.h5"), task, sizeof task), LB_OK);
        CU_ASSERT_STRING_EQUAL(task, "text");
        lb_trainer_free(ta);
        lb_trainer_free(tcn);
        lb_model_free(a);
        lb_model_free(b);
        lb_model_free(c);
    }
    /* non-causal attention would see its targets: refused */
    lb_model_config nc;
    lb_model_config_default(LB_MODEL_TRANSFORMER, &nc);
    lb_model_config_fit_data(&nc, ds);
    nc.causal = 0;
    CU_ASSERT_EQUAL(lb_model_data_check(&nc, NULL, ds), LB_ERR_VALUE);
    CU_ASSERT_TRUE(lb_test_error_has("--causal 1"));
    lb_dataset_close(ds);
}

int main(void)
{
    snprintf(dir, sizeof dir, "/tmp/lookback_test_text_%d", (int)getpid());
    mkdir(dir, 0777);
    static const lb_test_case cases[] = {
        {"vocabulary: encode, decode, <unk>, errors", test_vocab_encode_decode},
        {"import: round trip, splits, <unk> map and error", test_import_round_trip},
        {"import: fractions, several files, invalid UTF-8, bytes", test_import_fractions_and_files},
        {"import: too short, empty, too many characters, folders, inputs", test_import_limits},
        {"windows of an open corpus, label counts, unigram bits", test_windows},
        {"loader: random offsets from the seed, resumable, sharded", test_loader_random_windows},
        {"validation loss over non-overlapping windows = a hand computation", test_exact_validation_loss},
        {"every family trains; resume bit for bit; bits per char; checkpoint vocabulary", test_train_resume_metrics},
        {NULL, NULL},
    };
    int rc = lb_test_main("text", cases);
    char cmd[300];
    snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
    if (system(cmd) != 0)
        fprintf(stderr, "could not remove %s\n", dir);
    return rc;
}

/* Task options and recipes: every generated example is checked against its recipe
 * (docs/data.md), plus determinism, distance coverage and label balance. */
#include "data/dataset.h"
#include "data/tasks.h"
#include "support.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#ifdef _OPENMP
#include <omp.h>
#endif

/* A per-process temporary file name (static buffer per slot). */
static const char *tmp_path(const char *name)
{
    static char buf[4][256];
    static int slot;
    const char *dir = getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp";
    slot = (slot + 1) % 4;
    snprintf(buf[slot], sizeof buf[slot], "%s/lb_test_data_tasks_%d_%s.h5", dir, (int)getpid(), name);
    return buf[slot];
}

/* Options of `task` with the given "key", "value" pairs (NULL-terminated). */
static lb_task_options options_of(lb_task_kind task, const char *const *kv)
{
    lb_task_options o;
    lb_task_options_default(task, &o);
    for (; kv && kv[0]; kv += 2) {
        lb_status st = lb_task_set_option(&o, kv[0], kv[1]);
        CU_ASSERT_EQUAL(st, LB_OK);
        if (st != LB_OK)
            fprintf(stderr, "\n  option %s: %s\n", kv[0], lb_last_error());
    }
    CU_ASSERT_EQUAL(lb_task_options_resolve(&o), LB_OK);
    return o;
}

/* Generates `o` to a temp file named `name` and opens it. */
static lb_dataset *generate_open(const lb_task_options *o, const char *name)
{
    const char *path = tmp_path(name);
    lb_status st = lb_task_generate(o, path, NULL, NULL);
    CU_ASSERT_EQUAL_FATAL(st, LB_OK);
    lb_dataset *ds = lb_dataset_open(path);
    if (!ds)
        fprintf(stderr, "\n  open: %s\n", lb_last_error());
    CU_ASSERT_PTR_NOT_NULL_FATAL(ds);
    remove(path);
    return ds;
}

/* The whole split as one batch. */
static lb_batch whole(const lb_dataset *ds, const char *split)
{
    lb_batch b;
    CU_ASSERT_EQUAL_FATAL(lb_dataset_slice(ds, split, 0, lb_dataset_split_size(ds, split), &b), LB_OK);
    return b;
}

static int64_t length_of(const lb_batch *b, int64_t i) { return b->lengths ? b->lengths[i] : b->seq_len; }

/* Positions >= length are PAD (and ignored when targets are per position). */
static int padding_ok(const lb_batch *b, int64_t i)
{
    for (int64_t t = length_of(b, i); t < b->seq_len; t++) {
        if (b->tokens && b->tokens[i * b->seq_len + t] != LB_PAD_ID)
            return 0;
        if (b->per_position && b->targets[i * b->seq_len + t] != LB_IGNORE_INDEX)
            return 0;
    }
    return 1;
}

/* ---- options ---- */

static void expect_option_error(lb_task_kind task, const char *key, const char *value, const char *needle)
{
    lb_task_options o, before;
    lb_task_options_default(task, &o);
    before = o;
    CU_ASSERT_EQUAL(lb_task_set_option(&o, key, value), LB_ERR_VALUE);
    CU_ASSERT_EQUAL(memcmp(&o, &before, sizeof o), 0);
    if (!strstr(lb_last_error(), needle)) {
        fprintf(stderr, "\n  %s=%s: message '%s' lacks '%s'\n", key, value ? value : "NULL", lb_last_error(), needle);
        CU_FAIL("error message does not name the problem");
    }
}

/* lb_task_set_option(task, key, value) fails with exactly `message`. */
static void expect_message(lb_task_kind task, const char *key, const char *value, const char *message)
{
    lb_task_options o;
    lb_task_options_default(task, &o);
    CU_ASSERT_EQUAL(lb_task_set_option(&o, key, value), LB_ERR_VALUE);
    if (strcmp(lb_last_error(), message) != 0) {
        fprintf(stderr, "\n  %s %s: got      '%s'\n  expected '%s'\n", key, value ? value : "NULL", lb_last_error(),
                message);
        CU_FAIL("unexpected message");
    }
}

static void test_option_parsing(void)
{
    lb_task_options o;
    lb_task_options_default(LB_TASK_SPIKE, &o);
    CU_ASSERT_EQUAL(lb_task_set_option(&o, "--seq-len", "4096"), LB_OK);
    CU_ASSERT_EQUAL(o.seq_len, 4096);
    CU_ASSERT_EQUAL(lb_task_set_option(&o, "seq_len", "16384"), LB_OK);
    CU_ASSERT_EQUAL(o.seq_len, 16384);
    CU_ASSERT_EQUAL(lb_task_set_option(&o, "max-distance", "7000"), LB_OK);
    CU_ASSERT_EQUAL(o.max_distance, 7000);
    CU_ASSERT_EQUAL(lb_task_set_option(&o, "--max-distance", "auto"), LB_OK);
    CU_ASSERT_EQUAL(o.max_distance, LB_OPTION_AUTO);
    CU_ASSERT_EQUAL(lb_task_set_option(&o, "--variable-length", "yes"), LB_OK);
    CU_ASSERT_EQUAL(o.variable_length, 1);
    CU_ASSERT_EQUAL(lb_task_set_option(&o, "--seed", "18446744073709551615"), LB_OK);
    CU_ASSERT_EQUAL(o.seed, UINT64_MAX);
    lb_task_options_default(LB_TASK_RECALL, &o);
    CU_ASSERT_EQUAL(lb_task_set_option(&o, "--power-a", "0.5"), LB_OK);
    CU_ASSERT_DOUBLE_EQUAL(o.power_a, 0.5, 0);

    expect_option_error(LB_TASK_SPIKE, "--seq-len", "12x", "--seq-len");
    expect_option_error(LB_TASK_SPIKE, "--seq-len", "", "not a whole number");
    expect_option_error(LB_TASK_SPIKE, "--seq-len", " 12", "not a whole number");
    expect_option_error(LB_TASK_SPIKE, "--seq-len", "-5", "outside");
    expect_option_error(LB_TASK_SPIKE, "--seq-len", "99999999999999999999", "outside [2, 1048576]");
    expect_option_error(LB_TASK_SPIKE, "--seq-len", "auto", "not a whole number");
    expect_option_error(LB_TASK_SPIKE, "--n-train", "-1", "--n-train");
    expect_option_error(LB_TASK_SPIKE, "--seed", "-1", "--seed");
    expect_option_error(LB_TASK_SPIKE, "--seed", "18446744073709551616", "outside [0, 18446744073709551615]");
    expect_option_error(LB_TASK_SPIKE, "--variable-length", "maybe", "flag");
    expect_option_error(LB_TASK_SPIKE, "--readings", "1", "--readings");
    expect_option_error(LB_TASK_SPIKE, "--readings", NULL, "needs a value");
    expect_option_error(LB_TASK_RECALL, "--power-a", "nan", "--power-a");
    expect_option_error(LB_TASK_RECALL, "--power-a", "1e400", "--power-a");
    expect_option_error(LB_TASK_SPIKE, "--colour", "red", "unknown data option");
    expect_option_error(LB_TASK_SPIKE, "--pairs", "4", "only to recall");
    expect_option_error(LB_TASK_SPIKE, "--task", "recall", "--task");
}

static void test_option_resolve(void)
{
    static const int64_t vocab[LB_TASK_COUNT] = {1 + 16 + 8 + 1, 1 + 16 + 64 + 64, 8 + 3, 0, 8 + 1, 2 + 1, 5 + 2};
    static const int64_t classes[LB_TASK_COUNT] = {8, 64, 8, 0, 8, 2, 5};
    for (int k = 0; k < LB_TASK_COUNT; k++) {
        lb_task_options o;
        lb_task_options_default((lb_task_kind)k, &o);
        CU_ASSERT_EQUAL(lb_task_options_resolve(&o), LB_OK);
        CU_ASSERT_EQUAL(lb_task_vocab_size(&o), vocab[k]);
        CU_ASSERT_EQUAL(lb_task_num_classes(&o), classes[k]);
        CU_ASSERT_EQUAL(lb_task_num_features(&o), k == LB_TASK_ADDING ? 2 : 0);
        CU_ASSERT_EQUAL(o.min_length, o.seq_len);
        lb_task_kind parsed;
        CU_ASSERT_EQUAL(lb_task_parse_name(lb_task_name((lb_task_kind)k), &parsed), LB_OK);
        CU_ASSERT_EQUAL((int)parsed, k);
    }
    lb_task_kind parsed;
    CU_ASSERT_EQUAL(lb_task_parse_name("spikes", &parsed), LB_ERR_VALUE);

    const char *var[] = {"seq_len", "101", "variable_length", "1", NULL};
    lb_task_options o = options_of(LB_TASK_SPIKE, var);
    CU_ASSERT_EQUAL(o.min_length, 51);
    CU_ASSERT_EQUAL(o.min_distance, 1);
    CU_ASSERT_EQUAL(o.max_distance, 50);
    o = options_of(LB_TASK_ADDING, var);
    CU_ASSERT_EQUAL(o.min_distance, 25);
    CU_ASSERT_EQUAL(o.max_distance, 50);
    const char *recall[] = {"pairs", "5", NULL};
    o = options_of(LB_TASK_RECALL, recall);
    CU_ASSERT_EQUAL(o.queries, 5);

    lb_task_options_default(LB_TASK_SPIKE, &o);
    o.seq_len = 100;
    o.max_distance = 100;
    CU_ASSERT_EQUAL(lb_task_options_resolve(&o), LB_ERR_VALUE);
    CU_ASSERT_PTR_NOT_NULL(strstr(lb_last_error(), "100"));
    o.max_distance = 10;
    o.min_distance = 11;
    CU_ASSERT_EQUAL(lb_task_options_resolve(&o), LB_ERR_VALUE);
    CU_ASSERT_PTR_NOT_NULL(strstr(lb_last_error(), "--min-distance"));
    lb_task_options_default(LB_TASK_RECALL, &o);
    o.queries = 9;
    CU_ASSERT_EQUAL(lb_task_options_resolve(&o), LB_ERR_VALUE);
    CU_ASSERT_PTR_NOT_NULL(strstr(lb_last_error(), "--queries"));
    lb_task_options_default(LB_TASK_RECALL, &o);
    o.key_vocab = 4;
    CU_ASSERT_EQUAL(lb_task_options_resolve(&o), LB_ERR_VALUE);
    CU_ASSERT_PTR_NOT_NULL(strstr(lb_last_error(), "--key-vocab"));
    lb_task_options_default(LB_TASK_COPY, &o);
    o.seq_len = 20; /* needs 2 * 10 + 1 */
    CU_ASSERT_EQUAL(lb_task_options_resolve(&o), LB_ERR_VALUE);
    lb_task_options_default(LB_TASK_SPIKE, &o);
    o.sensors = 0;
    CU_ASSERT_EQUAL(lb_task_options_resolve(&o), LB_ERR_VALUE);
    CU_ASSERT_PTR_NOT_NULL(strstr(lb_last_error(), "sensors"));
}

/* lb_task_print_options of `task`'s defaults, separated by commas, is `expected`. */
static void expect_default_options(lb_task_kind task, const char *expected)
{
    char *text = NULL;
    size_t size = 0;
    lb_task_options o;
    lb_task_options_default(task, &o);
    FILE *f = open_memstream(&text, &size);
    lb_task_print_options(&o, ",", f);
    fclose(f);
    CU_ASSERT_STRING_EQUAL(text, expected);
    free(text);
}

static void test_help_and_options_text(void)
{
    char *text = NULL;
    size_t size = 0;
    FILE *f = open_memstream(&text, &size);
    lb_task_print_help(f);
    fclose(f);
    const char *must[] = {"--seq-len", "--max-distance", "--noise-types", "--sensors", "--readings", "--pairs",
                          "--copy-symbols", "--selective", "--window", "--modulus", "--seed", "auto", "spike 1024",
                          "modsum 64", "modsum 5", "  modsum  ", NULL};
    for (int i = 0; must[i]; i++)
        CU_ASSERT_PTR_NOT_NULL(strstr(text, must[i]));
    free(text);
    expect_default_options(LB_TASK_LOCAL, "seq_len=64,variable_length=0,min_length=auto,alphabet=8,window=3,"
                                          "classes=8,n_train=10000,n_val=1000,n_test=1000,seed=1");
    expect_default_options(LB_TASK_MODSUM, "seq_len=64,variable_length=0,min_length=auto,modulus=5,"
                                           "n_train=10000,n_val=1000,n_test=1000,seed=1");
    CU_ASSERT_TRUE(lb_task_option_applies(LB_TASK_SPIKE, "--sensors"));
    CU_ASSERT_FALSE(lb_task_option_applies(LB_TASK_COPY, "sensors"));
}

/* ---- recipes ---- */

/* spike: every sensor spikes exactly once with one binding token; the alarm names a
 * sensor; the target is its reading; distance is alarm index - spike index. */
static void check_spike_example(const lb_task_options *o, const lb_batch *b, int64_t i, int64_t *asked_count)
{
    const int64_t V = o->noise_types, S = o->sensors, K = o->readings, L = length_of(b, i);
    const int32_t *tok = b->tokens + i * b->seq_len;
    const int64_t spike_offset = 1 + V, alarm_offset = spike_offset + S * K;
    int64_t seen[64] = {0}, asked = tok[L - 1] - alarm_offset, ok = 1;
    CU_ASSERT_TRUE_FATAL(asked >= 0 && asked < S);
    asked_count[asked]++;
    for (int64_t t = 0; t < L - 1; t++) {
        int32_t x = tok[t];
        if (x >= 1 && x <= V)
            continue; /* noise: never a spike or alarm id */
        ok &= x >= spike_offset && x < alarm_offset;
        int64_t sensor = (x - spike_offset) / K, reading = (x - spike_offset) % K;
        seen[sensor]++;
        if (sensor == asked) {
            ok &= reading == b->targets[i];
            ok &= L - 1 - t == b->distance[i];
        }
    }
    for (int64_t s = 0; s < S; s++)
        ok &= seen[s] == 1;
    ok &= b->distance[i] >= o->min_distance && b->distance[i] <= o->max_distance;
    ok &= padding_ok(b, i);
    CU_ASSERT_TRUE(ok);
}

static void test_spike_recipe(void)
{
    const char *kv[] = {"seq_len", "64", "variable_length", "1", "min_length", "45", "sensors", "5", "readings",
                        "6", "noise_types", "7", "min_distance", "3", "max_distance", "40", "n_train", "400",
                        "n_val", "10", "n_test", "0", NULL};
    lb_task_options o = options_of(LB_TASK_SPIKE, kv);
    lb_dataset *ds = generate_open(&o, "spike");
    CU_ASSERT_EQUAL(lb_dataset_vocab_size(ds), 1 + 7 + 5 * 6 + 5);
    CU_ASSERT_EQUAL(lb_dataset_num_classes(ds), 6);
    CU_ASSERT_TRUE(lb_dataset_has_lengths(ds));
    CU_ASSERT_EQUAL(lb_dataset_split_size(ds, "test"), 0);
    lb_batch b = whole(ds, "train");
    int64_t asked[64] = {0}, min_len = 64, max_len = 0;
    for (int64_t i = 0; i < b.batch_size; i++) {
        check_spike_example(&o, &b, i, asked);
        min_len = length_of(&b, i) < min_len ? length_of(&b, i) : min_len;
        max_len = length_of(&b, i) > max_len ? length_of(&b, i) : max_len;
    }
    for (int s = 0; s < 5; s++) /* the asked sensor is uniform: 80 expected each */
        CU_ASSERT_TRUE(asked[s] > 50 && asked[s] < 110);
    CU_ASSERT_EQUAL(min_len, 45);
    CU_ASSERT_EQUAL(max_len, 64);
    lb_batch_free(&b);
    lb_dataset_close(ds);
}

/* The 3 a.m. story: T = 16384, the clue 7,000 events before the alarm, 16 sensors. */
static void test_spike_long_sequences(void)
{
    const char *kv[] = {"seq_len", "16384", "sensors", "16", "min_distance", "7000", "max_distance", "7000",
                        "n_train", "12", "n_val", "2", "n_test", "2", NULL};
    lb_task_options o = options_of(LB_TASK_SPIKE, kv);
    lb_dataset *ds = generate_open(&o, "long");
    CU_ASSERT_EQUAL(lb_dataset_seq_len(ds), 16384);
    lb_batch b = whole(ds, "train");
    int64_t asked[64] = {0};
    for (int64_t i = 0; i < b.batch_size; i++) {
        check_spike_example(&o, &b, i, asked);
        CU_ASSERT_EQUAL(b.distance[i], 7000);
    }
    lb_batch_free(&b);
    lb_dataset_close(ds);
}

/* recall: distinct keys with values in the first 2P positions; each query repeats a
 * key, its target is that key's value index; elsewhere -100. */
static void check_recall_example(const lb_task_options *o, const lb_batch *b, int64_t i)
{
    const int64_t P = o->pairs, V = o->noise_types, T = b->seq_len, L = length_of(b, i);
    const int64_t key_offset = 1 + V, value_offset = key_offset + o->key_vocab;
    const int32_t *tok = b->tokens + i * T, *y = b->targets + i * T;
    int ok = 1, queries = 0, longest = 0, queried[64] = {0};
    for (int64_t j = 0; j < P; j++) {
        ok &= tok[2 * j] >= key_offset && tok[2 * j] < value_offset;
        ok &= tok[2 * j + 1] >= value_offset && tok[2 * j + 1] < value_offset + o->value_vocab;
        ok &= y[2 * j] == LB_IGNORE_INDEX && y[2 * j + 1] == LB_IGNORE_INDEX;
        for (int64_t k = 0; k < j; k++)
            ok &= tok[2 * k] != tok[2 * j];
    }
    for (int64_t t = 2 * P; t < L; t++) {
        if (tok[t] >= 1 && tok[t] <= V) {
            ok &= y[t] == LB_IGNORE_INDEX;
            continue;
        }
        int64_t pair = -1;
        for (int64_t j = 0; j < P; j++)
            pair = tok[2 * j] == tok[t] ? j : pair;
        ok &= pair >= 0 && y[t] == tok[2 * pair + 1] - value_offset;
        if (pair < 0)
            break;
        ok &= !queried[pair]++;
        queries++;
        longest = t - 2 * pair > longest ? (int)(t - 2 * pair) : longest;
    }
    ok &= queries == o->queries && longest == b->distance[i] && padding_ok(b, i);
    CU_ASSERT_TRUE(ok);
}

static void test_recall_recipe(void)
{
    const char *kv[] = {"seq_len", "80", "pairs", "6", "queries", "4", "key_vocab", "10", "value_vocab", "5",
                        "noise_types", "3", "variable_length", "1", "n_train", "300", "n_val", "0", "n_test", "0",
                        NULL};
    lb_task_options o = options_of(LB_TASK_RECALL, kv);
    lb_dataset *ds = generate_open(&o, "recall");
    CU_ASSERT_TRUE(lb_dataset_per_position(ds));
    lb_batch b = whole(ds, "train");
    int64_t near = 0, total = 0;
    for (int64_t i = 0; i < b.batch_size; i++) {
        check_recall_example(&o, &b, i);
        for (int64_t t = 12; t < length_of(&b, i); t++) /* power law: queries crowd right after the context */
            if (b.targets[i * 80 + t] != LB_IGNORE_INDEX) {
                near += t < 12 + 8;
                total++;
            }
    }
    CU_ASSERT_EQUAL(total, 300 * 4);
    CU_ASSERT_TRUE(near > total / 3); /* uniform gaps would put ~8/50 of them there */
    lb_batch_free(&b);
    lb_dataset_close(ds);
}

/* copy: symbols in order before the delimiter at L-C-1, blanks elsewhere; the last C
 * positions' targets are the symbols. */
static void check_copy_example(const lb_task_options *o, const lb_batch *b, int64_t i)
{
    const int64_t A = o->alphabet, C = o->copy_symbols, T = b->seq_len, L = length_of(b, i);
    const int32_t *tok = b->tokens + i * T, *y = b->targets + i * T;
    int ok = tok[L - C - 1] == A + 2;
    int64_t k = 0, longest = 0;
    for (int64_t t = 0; t < L - C - 1; t++) {
        if (tok[t] == A + 1)
            continue;
        ok &= k < C && tok[t] >= 1 && tok[t] <= A && y[L - C + k] == tok[t] - 1;
        if (!o->selective)
            ok &= t == k;
        longest = L - C + k - t > longest ? L - C + k - t : longest;
        k++;
    }
    ok &= k == C && longest == b->distance[i];
    for (int64_t t = 0; t < L; t++) {
        ok &= (t >= L - C) == (y[t] != LB_IGNORE_INDEX);
        if (t >= L - C)
            ok &= tok[t] == A + 1;
    }
    ok &= padding_ok(b, i);
    CU_ASSERT_TRUE(ok);
}

static void test_copy_recipe(void)
{
    for (int selective = 0; selective < 2; selective++) {
        const char *kv[] = {"seq_len", "40", "copy_symbols", "5", "alphabet", "4", "selective", selective ? "1" : "0",
                            "variable_length", "1", "n_train", "200", "n_val", "0", "n_test", "0", NULL};
        lb_task_options o = options_of(LB_TASK_COPY, kv);
        lb_dataset *ds = generate_open(&o, "copy");
        lb_batch b = whole(ds, "train");
        int64_t scattered = 0;
        for (int64_t i = 0; i < b.batch_size; i++) {
            check_copy_example(&o, &b, i);
            scattered += b.tokens[i * 40] == 4 + 1; /* a blank first: symbols are not packed */
        }
        CU_ASSERT_TRUE(selective ? scattered > 50 : scattered == 0);
        lb_batch_free(&b);
        lb_dataset_close(ds);
    }
}

/* copy with blank targets (Bai et al. 2018): every position before the outputs is
 * scored as the blank class A, the outputs as the symbols, padding stays ignored. */
static void test_copy_blank_targets(void)
{
    const char *kv[] = {"seq_len", "30", "copy_symbols", "4", "alphabet", "5", "blank_targets", "1",
                        "variable_length", "1", "n_train", "100", "n_val", "0", "n_test", "0", NULL};
    lb_task_options o = options_of(LB_TASK_COPY, kv);
    CU_ASSERT_EQUAL(lb_task_num_classes(&o), 6); /* 5 symbols + blank */
    CU_ASSERT_EQUAL(lb_task_vocab_size(&o), 8);
    lb_dataset *ds = generate_open(&o, "copy_blank");
    CU_ASSERT_EQUAL(lb_dataset_num_classes(ds), 6);
    lb_batch b = whole(ds, "train");
    for (int64_t i = 0; i < b.batch_size; i++) {
        int64_t L = length_of(&b, i);
        const int32_t *tok = b.tokens + i * 30, *y = b.targets + i * 30;
        int ok = padding_ok(&b, i);
        for (int64_t t = 0; t < L - 4; t++)
            ok &= y[t] == 5;
        for (int64_t k = 0; k < 4; k++) /* plain copy: symbol k at position k, output at L - 4 + k */
            ok &= y[L - 4 + k] == tok[k] - 1 && tok[k] >= 1 && tok[k] <= 5;
        CU_ASSERT_TRUE(ok);
    }
    lb_batch_free(&b);
    lb_dataset_close(ds);
    /* The flag is copy's only; the same seed without it gives the same tokens. */
    lb_task_options plain = o;
    plain.blank_targets = 0;
    lb_dataset *d2 = generate_open(&plain, "copy_plain");
    lb_batch a, c;
    lb_dataset *d1 = generate_open(&o, "copy_blank2");
    CU_ASSERT_EQUAL(lb_dataset_slice(d1, "train", 0, 100, &a), LB_OK);
    CU_ASSERT_EQUAL(lb_dataset_slice(d2, "train", 0, 100, &c), LB_OK);
    CU_ASSERT_EQUAL(memcmp(a.tokens, c.tokens, 100 * 30 * sizeof(int32_t)), 0);
    lb_batch_free(&a);
    lb_batch_free(&c);
    lb_dataset_close(d1);
    lb_dataset_close(d2);
    expect_option_error(LB_TASK_LOCAL, "--blank-targets", "1", "only to copy");
}

/* parity: symbols 1..A, target = (count of symbol 1 within the length) mod 2; no
 * distance; padding after variable lengths. */
static void test_parity_recipe(void)
{
    for (int alphabet = 2; alphabet <= 3; alphabet++) {
        char a[16];
        snprintf(a, sizeof a, "%d", alphabet);
        const char *kv[] = {"seq_len", "20", "alphabet", a, "variable_length", "1", "min_length", "2",
                            "n_train", "400", "n_val", "0", "n_test", "0", NULL};
        lb_task_options o = options_of(LB_TASK_PARITY, kv);
        lb_dataset *ds = generate_open(&o, "parity");
        CU_ASSERT_FALSE(lb_dataset_has_distance(ds));
        CU_ASSERT_EQUAL(lb_dataset_num_classes(ds), 2);
        CU_ASSERT_EQUAL(lb_dataset_vocab_size(ds), alphabet + 1);
        lb_batch b = whole(ds, "train");
        int64_t shortest = 20, odd = 0;
        for (int64_t i = 0; i < b.batch_size; i++) {
            int64_t L = length_of(&b, i), ones = 0;
            const int32_t *tok = b.tokens + i * 20;
            int ok = padding_ok(&b, i);
            for (int64_t t = 0; t < L; t++) {
                ok &= tok[t] >= 1 && tok[t] <= alphabet;
                ones += tok[t] == 1;
            }
            ok &= b.targets[i] == ones % 2;
            odd += b.targets[i];
            shortest = L < shortest ? L : shortest;
            CU_ASSERT_TRUE(ok);
        }
        CU_ASSERT_TRUE(shortest <= 4); /* lengths reach down to --min-length 2 */
        CU_ASSERT_TRUE(odd > 150 && odd < 250);
        lb_batch_free(&b);
        lb_dataset_close(ds);
    }
    lb_task_options o;
    lb_task_options_default(LB_TASK_PARITY, &o);
    CU_ASSERT_EQUAL(o.alphabet, 2);
    CU_ASSERT_EQUAL(o.seq_len, 64);
    expect_option_error(LB_TASK_PARITY, "--window", "3", "only to local");
    expect_option_error(LB_TASK_PARITY, "--alphabet", "1", "outside");
}

/* modsum: symbols 1..K before the query token K+1 at L-1; the target is the sum of
 * the symbols' values (token - 1) mod K, recomputed here from the stored tokens; no
 * distance; padding after variable lengths; classes uniform (chance 1/K). */
static void test_modsum_recipe(void)
{
    static const int moduli[] = {2, 5, 7};
    for (int m = 0; m < 3; m++) {
        const int64_t K = moduli[m], T = 24;
        char k[8];
        snprintf(k, sizeof k, "%d", moduli[m]);
        const char *kv[] = {"seq_len", "24", "modulus", k, "variable_length", "1", "min_length", "2",
                            "n_train", "700", "n_val", "0", "n_test", "0", NULL};
        lb_task_options o = options_of(LB_TASK_MODSUM, kv);
        CU_ASSERT_EQUAL(o.min_length, 2);
        lb_dataset *ds = generate_open(&o, "modsum");
        CU_ASSERT_EQUAL(lb_dataset_task(ds), LB_TASK_MODSUM);
        CU_ASSERT_FALSE(lb_dataset_has_distance(ds));
        CU_ASSERT_FALSE(lb_dataset_per_position(ds));
        CU_ASSERT_TRUE(lb_dataset_has_lengths(ds));
        CU_ASSERT_EQUAL(lb_dataset_num_classes(ds), K);
        CU_ASSERT_EQUAL(lb_dataset_vocab_size(ds), K + 2);
        lb_batch b = whole(ds, "train");
        CU_ASSERT_PTR_NULL(b.distance);
        int64_t shortest = T, longest = 0, counts[7] = {0}, all_ok = 1;
        for (int64_t i = 0; i < b.batch_size; i++) {
            int64_t L = length_of(&b, i), sum = 0;
            const int32_t *tok = b.tokens + i * T;
            int ok = padding_ok(&b, i) && tok[L - 1] == K + 1;
            for (int64_t t = 0; t < L - 1; t++) {
                ok &= tok[t] >= 1 && tok[t] <= K;
                sum += tok[t] - 1;
            }
            ok &= b.targets[i] == sum % K;
            all_ok &= ok;
            if (b.targets[i] >= 0 && b.targets[i] < K)
                counts[b.targets[i]]++;
            shortest = L < shortest ? L : shortest;
            longest = L > longest ? L : longest;
        }
        CU_ASSERT_TRUE(all_ok);
        CU_ASSERT_TRUE(shortest <= 3); /* lengths reach down to --min-length 2 (one symbol) */
        CU_ASSERT_EQUAL(longest, T);
        for (int64_t c = 0; c < K; c++) /* 700 / K expected in each class */
            CU_ASSERT_TRUE(counts[c] > 0.75 * 700 / K && counts[c] < 1.25 * 700 / K);
        lb_batch_free(&b);
        lb_dataset_close(ds);
    }
    /* Fixed length: every sequence has T - 1 symbols and the query at T - 1. */
    const char *fixed[] = {"seq_len", "9", "n_train", "50", "n_val", "5", "n_test", "5", NULL};
    lb_task_options o = options_of(LB_TASK_MODSUM, fixed);
    CU_ASSERT_EQUAL(o.modulus, 5);
    lb_dataset *ds = generate_open(&o, "modsum_fixed");
    CU_ASSERT_FALSE(lb_dataset_has_lengths(ds));
    lb_batch b = whole(ds, "val");
    for (int64_t i = 0; i < b.batch_size; i++) {
        int64_t sum = 0;
        for (int64_t t = 0; t < 8; t++)
            sum += b.tokens[i * 9 + t] - 1;
        CU_ASSERT_EQUAL(b.tokens[i * 9 + 8], 6);
        CU_ASSERT_EQUAL(b.targets[i], sum % 5);
    }
    lb_batch_free(&b);
    lb_dataset_close(ds);
    lb_task_options_default(LB_TASK_MODSUM, &o);
    CU_ASSERT_EQUAL(o.seq_len, 64);
    CU_ASSERT_EQUAL(o.modulus, 5);
}

/* Which options modsum takes (its own --modulus and the shared ones), with one clear
 * error for every other and for bad values. */
static void test_modsum_options(void)
{
    lb_task_options o;
    lb_task_options_default(LB_TASK_MODSUM, &o);
    CU_ASSERT_EQUAL(lb_task_set_option(&o, "--modulus", "65536"), LB_OK);
    CU_ASSERT_EQUAL(lb_task_set_option(&o, "--modulus", "2"), LB_OK);
    CU_ASSERT_EQUAL(o.modulus, 2);
    CU_ASSERT_TRUE(lb_task_option_applies(LB_TASK_MODSUM, "modulus"));
    CU_ASSERT_TRUE(lb_task_option_applies(LB_TASK_MODSUM, "--variable-length"));
    const char *const others[] = {"alphabet", "window", "classes", "readings", "min_distance", "pairs", NULL};
    for (int i = 0; others[i]; i++)
        CU_ASSERT_FALSE(lb_task_option_applies(LB_TASK_MODSUM, others[i]));
    for (int k = 0; k < LB_TASK_COUNT; k++)
        CU_ASSERT_EQUAL(lb_task_option_applies((lb_task_kind)k, "modulus"), k == LB_TASK_MODSUM);

    expect_message(LB_TASK_MODSUM, "--modulus", "1", "option --modulus: 1 is outside [2, 65536]");
    expect_message(LB_TASK_MODSUM, "--modulus", "65537", "option --modulus: 65537 is outside [2, 65536]");
    expect_message(LB_TASK_MODSUM, "--modulus", "5x", "option --modulus: '5x' is not a whole number");
    expect_message(LB_TASK_MODSUM, "--modulus", "auto", "option --modulus: 'auto' is not a whole number");
    expect_message(LB_TASK_MODSUM, "--modulus", NULL, "option --modulus needs a value");
    expect_message(LB_TASK_MODSUM, "--alphabet", "5",
                   "option --alphabet does not apply to task modsum (only to copy, local, parity)");
    expect_message(LB_TASK_MODSUM, "--classes", "5", "option --classes does not apply to task modsum (only to local)");
    expect_message(LB_TASK_MODSUM, "--max-distance", "5",
                   "option --max-distance does not apply to task modsum (only to spike, adding)");
    expect_message(LB_TASK_LOCAL, "--modulus", "5", "option --modulus does not apply to task local (only to modsum)");
    expect_message(LB_TASK_PARITY, "--modulus", "5", "option --modulus does not apply to task parity (only to modsum)");

    /* a resolved modulus out of range (as a C caller may set it) is refused too */
    lb_task_options_default(LB_TASK_MODSUM, &o);
    o.modulus = 1;
    CU_ASSERT_EQUAL(lb_task_options_resolve(&o), LB_ERR_VALUE);
    CU_ASSERT_STRING_EQUAL(lb_last_error(), "option --modulus: 1 is outside [2, 65536]");
    lb_task_options_default(LB_TASK_MODSUM, &o);
    o.variable_length = 1;
    o.seq_len = 10;
    o.min_length = 11;
    CU_ASSERT_EQUAL(lb_task_options_resolve(&o), LB_ERR_VALUE);
    CU_ASSERT_STRING_EQUAL(lb_last_error(), "--min-length 11 exceeds --seq-len 10");
    const char *path = tmp_path("modsum_bad");
    CU_ASSERT_EQUAL(lb_task_generate(&o, path, NULL, NULL), LB_ERR_VALUE);
    CU_ASSERT_NOT_EQUAL(access(path, F_OK), 0);
    /* the shortest sequence is one symbol and the query */
    lb_task_options_default(LB_TASK_MODSUM, &o);
    o.seq_len = 2;
    CU_ASSERT_EQUAL(lb_task_options_resolve(&o), LB_OK);
    CU_ASSERT_EQUAL(lb_task_raw_bytes(&o), 12000 * (2 + 1) * 4); /* tokens, target; no distance */
}

/* adding: values in [0, 1), exactly two markers, target = their sum. */
static void test_adding_recipe(void)
{
    const char *kv[] = {"seq_len", "50", "min_distance", "10", "max_distance", "30", "variable_length", "1",
                        "min_length", "40", "n_train", "300", "n_val", "0", "n_test", "0", NULL};
    lb_task_options o = options_of(LB_TASK_ADDING, kv);
    lb_dataset *ds = generate_open(&o, "adding");
    CU_ASSERT_TRUE(lb_dataset_is_regression(ds));
    CU_ASSERT_EQUAL(lb_dataset_vocab_size(ds), 0);
    CU_ASSERT_EQUAL(lb_dataset_num_features(ds), 2);
    lb_batch b = whole(ds, "train");
    CU_ASSERT_PTR_NULL(b.tokens);
    CU_ASSERT_EQUAL_FATAL(b.features->shape[0], 300);
    CU_ASSERT_EQUAL(b.features->shape[2], 2);
    const float *x = lb_tensor_data(b.features);
    double sum_y = 0, sum_y2 = 0;
    for (int64_t i = 0; i < 300; i++) {
        const float *row = x + i * 50 * 2;
        int64_t L = length_of(&b, i), markers = 0, first = -1;
        double expect = 0;
        int ok = 1;
        for (int64_t t = 0; t < 50; t++) {
            ok &= t < L ? (row[2 * t] >= 0 && row[2 * t] < 1) : (row[2 * t] == 0 && row[2 * t + 1] == 0);
            if (row[2 * t + 1] == 1.0f) {
                markers++;
                first = first < 0 ? t : first;
                expect += row[2 * t];
            }
        }
        ok &= markers == 2 && b.target_values[i] == (float)expect && b.distance[i] == L - 1 - first;
        ok &= b.distance[i] >= 10 && b.distance[i] <= 30;
        CU_ASSERT_TRUE(ok);
        sum_y += b.target_values[i];
        sum_y2 += (double)b.target_values[i] * b.target_values[i];
    }
    double mean = sum_y / 300, var = sum_y2 / 300 - mean * mean;
    CU_ASSERT_DOUBLE_EQUAL(mean, 1.0, 0.08);
    CU_ASSERT_DOUBLE_EQUAL(var, 1.0 / 6.0, 0.04); /* the MSE of always predicting the mean */
    lb_batch_free(&b);
    lb_dataset_close(ds);
}

static void test_local_recipe(void)
{
    const char *kv[] = {"seq_len", "12", "window", "3", "alphabet", "6", "classes", "5", "n_train", "300", "n_val",
                        "0", "n_test", "0", NULL};
    lb_task_options o = options_of(LB_TASK_LOCAL, kv);
    lb_dataset *ds = generate_open(&o, "local");
    CU_ASSERT_FALSE(lb_dataset_has_distance(ds));
    lb_batch b = whole(ds, "train");
    CU_ASSERT_PTR_NULL(b.distance);
    for (int64_t i = 0; i < b.batch_size; i++) {
        const int32_t *tok = b.tokens + i * 12;
        int ok = 1;
        for (int t = 0; t < 12; t++)
            ok &= tok[t] >= 1 && tok[t] <= 6;
        ok &= b.targets[i] == ((tok[9] - 1) + (tok[10] - 1) + (tok[11] - 1)) % 5;
        CU_ASSERT_TRUE(ok);
    }
    lb_batch_free(&b);
    lb_dataset_close(ds);
}

/* ---- determinism ---- */

static int files_equal(const char *a, const char *b)
{
    FILE *fa = fopen(a, "rb"), *fb = fopen(b, "rb");
    int same = fa && fb;
    while (same) {
        int ca = fgetc(fa), cb = fgetc(fb);
        same = ca == cb;
        if (ca == EOF || cb == EOF)
            break;
    }
    if (fa)
        fclose(fa);
    if (fb)
        fclose(fb);
    return same;
}

static void set_threads(int n)
{
#ifdef _OPENMP
    omp_set_num_threads(n);
#else
    (void)n;
#endif
}

static void test_same_seed_same_bytes(void)
{
    const char *kv[] = {"seq_len", "200", "sensors", "3", "n_train", "500", "n_val", "50", "n_test", "50", NULL};
    lb_task_options o = options_of(LB_TASK_SPIKE, kv);
    const char *a = tmp_path("det_a"), *b = tmp_path("det_b"), *c = tmp_path("det_c");
    set_threads(1);
    CU_ASSERT_EQUAL(lb_task_generate(&o, a, NULL, NULL), LB_OK);
    set_threads(2);
    CU_ASSERT_EQUAL(lb_task_generate(&o, b, NULL, NULL), LB_OK);
    CU_ASSERT_TRUE(files_equal(a, b)); /* same options, any thread count: same bytes */
    const char *pk[] = {"seq_len", "50", "variable_length", "1", "n_train", "300", "n_val", "20", "n_test", "20", NULL};
    lb_task_options p = options_of(LB_TASK_PARITY, pk);
    set_threads(1);
    CU_ASSERT_EQUAL(lb_task_generate(&p, c, NULL, NULL), LB_OK);
    set_threads(2);
    CU_ASSERT_EQUAL(lb_task_generate(&p, b, NULL, NULL), LB_OK);
    CU_ASSERT_TRUE(files_equal(c, b));
    const char *mk[] = {"seq_len", "40", "modulus", "7", "variable_length", "1", "min_length", "2", "n_train", "300",
                        "n_val", "20", "n_test", "20", NULL};
    lb_task_options m = options_of(LB_TASK_MODSUM, mk);
    set_threads(1);
    CU_ASSERT_EQUAL(lb_task_generate(&m, c, NULL, NULL), LB_OK);
    set_threads(2);
    CU_ASSERT_EQUAL(lb_task_generate(&m, b, NULL, NULL), LB_OK);
    CU_ASSERT_TRUE(files_equal(c, b));
    m.seed = 2;
    CU_ASSERT_EQUAL(lb_task_generate(&m, b, NULL, NULL), LB_OK);
    CU_ASSERT_FALSE(files_equal(c, b)); /* another seed, other bytes */
    o.seed = 2;
    CU_ASSERT_EQUAL(lb_task_generate(&o, c, NULL, NULL), LB_OK);
    CU_ASSERT_FALSE(files_equal(a, c));
    remove(a);
    remove(b);
    remove(c);
}

/* Changing one split's size changes no other split. */
static void test_splits_independent(void)
{
    const char *kv[] = {"seq_len", "32", "n_train", "40", "n_val", "30", "n_test", "20", NULL};
    lb_task_options o = options_of(LB_TASK_RECALL, kv), o2 = o;
    o2.n_train = 55;
    o2.n_val = 7;
    lb_dataset *d1 = generate_open(&o, "split1"), *d2 = generate_open(&o2, "split2");
    lb_batch a, b;
    CU_ASSERT_EQUAL(lb_dataset_slice(d1, "test", 0, 20, &a), LB_OK);
    CU_ASSERT_EQUAL(lb_dataset_slice(d2, "test", 0, 20, &b), LB_OK);
    CU_ASSERT_EQUAL(memcmp(a.tokens, b.tokens, 20 * 32 * sizeof(int32_t)), 0);
    lb_batch_free(&a);
    lb_batch_free(&b);
    CU_ASSERT_EQUAL(lb_dataset_slice(d1, "train", 0, 40, &a), LB_OK);
    CU_ASSERT_EQUAL(lb_dataset_slice(d2, "train", 0, 40, &b), LB_OK); /* a prefix of the larger split */
    CU_ASSERT_EQUAL(memcmp(a.tokens, b.tokens, 40 * 32 * sizeof(int32_t)), 0);
    CU_ASSERT_EQUAL(memcmp(a.targets, b.targets, 40 * 32 * sizeof(int32_t)), 0);
    lb_batch_free(&a);
    CU_ASSERT_EQUAL(lb_dataset_slice(d1, "val", 0, 7, &a), LB_OK);
    CU_ASSERT_NOT_EQUAL(memcmp(a.tokens, b.tokens, 7 * 32 * sizeof(int32_t)), 0); /* val is not train */
    lb_batch_free(&a);
    lb_batch_free(&b);
    lb_dataset_close(d1);
    lb_dataset_close(d2);
}

/* ---- distributions ---- */

static void test_distance_coverage(void)
{
    const char *kv[] = {"seq_len", "30", "min_distance", "5", "max_distance", "12", "n_train", "800", "n_val", "0",
                        "n_test", "0", NULL};
    const lb_task_kind tasks[2] = {LB_TASK_SPIKE, LB_TASK_ADDING};
    for (int k = 0; k < 2; k++) {
        lb_task_options o = options_of(tasks[k], kv);
        lb_dataset *ds = generate_open(&o, "coverage");
        int32_t lo = 0, hi = 0;
        CU_ASSERT_EQUAL(lb_dataset_distance_range(ds, "train", &lo, &hi), LB_OK);
        CU_ASSERT_EQUAL(lo, 5);
        CU_ASSERT_EQUAL(hi, 12);
        lb_batch b = whole(ds, "train");
        int64_t counts[13] = {0};
        for (int64_t i = 0; i < 800; i++)
            counts[b.distance[i]]++;
        for (int d = 5; d <= 12; d++) /* uniform: 100 expected each */
            CU_ASSERT_TRUE(counts[d] > 65 && counts[d] < 135);
        lb_batch_free(&b);
        lb_dataset_close(ds);
    }
}

/* Chi-square of a histogram against uniform, as a z-score-like check:
 * returns 1 when every bin is within 25% of the mean count. */
static int roughly_uniform(const int64_t *counts, int64_t bins)
{
    int64_t total = 0;
    for (int64_t c = 0; c < bins; c++)
        total += counts[c];
    double mean = (double)total / (double)bins;
    for (int64_t c = 0; c < bins; c++)
        if (counts[c] < 0.75 * mean || counts[c] > 1.25 * mean) {
            fprintf(stderr, "\n  class %lld has %lld, mean %.1f\n", (long long)c, (long long)counts[c], mean);
            return 0;
        }
    return 1;
}

static void test_label_balance(void)
{
    const char *spike[] = {"seq_len", "32", "sensors", "3", "n_train", "4000", "n_val", "0", "n_test", "0", NULL};
    const char *recall[] = {"seq_len", "64", "value_vocab", "8", "n_train", "1000", "n_val", "0", "n_test", "0", NULL};
    const char *copy[] = {"seq_len", "30", "n_train", "600", "n_val", "0", "n_test", "0", NULL};
    const char *local[] = {"seq_len", "16", "n_train", "4000", "n_val", "0", "n_test", "0", NULL};
    const char *const *kv[4] = {spike, recall, copy, local};
    const lb_task_kind tasks[4] = {LB_TASK_SPIKE, LB_TASK_RECALL, LB_TASK_COPY, LB_TASK_LOCAL};
    for (int k = 0; k < 4; k++) {
        lb_task_options o = options_of(tasks[k], kv[k]);
        lb_dataset *ds = generate_open(&o, "balance");
        int64_t counts[8] = {0}, ignored = -1;
        CU_ASSERT_EQUAL(lb_dataset_num_classes(ds), 8);
        CU_ASSERT_EQUAL(lb_dataset_label_histogram(ds, "train", counts, &ignored), LB_OK);
        CU_ASSERT_TRUE(roughly_uniform(counts, 8));
        if (tasks[k] == LB_TASK_RECALL)
            CU_ASSERT_EQUAL(ignored, 1000 * (64 - 8));
        if (tasks[k] == LB_TASK_SPIKE)
            CU_ASSERT_EQUAL(ignored, 0);
        lb_dataset_close(ds);
    }
}

/* ---- generation errors ---- */

static void count_progress(int64_t done, int64_t total, void *user)
{
    int64_t *seen = user;
    CU_ASSERT_TRUE(done > seen[0] && done <= total);
    seen[0] = done;
    seen[1] = total;
}

static void test_generate_errors_and_progress(void)
{
    lb_task_options o;
    lb_task_options_default(LB_TASK_SPIKE, &o);
    o.seq_len = 16;
    o.n_train = 30;
    o.n_val = 0;
    o.n_test = 5;
    CU_ASSERT_EQUAL(lb_task_generate(&o, "/nonexistent_dir_lb/x.h5", NULL, NULL), LB_ERR_IO);
    CU_ASSERT_PTR_NOT_NULL(strstr(lb_last_error(), "the folder /nonexistent_dir_lb does not exist"));

    const char *path = tmp_path("keep");
    FILE *f = fopen(path, "w");
    fputs("precious", f);
    fclose(f);
    lb_task_options bad = o;
    bad.max_distance = 99; /* > seq_len - 1 */
    CU_ASSERT_EQUAL(lb_task_generate(&bad, path, NULL, NULL), LB_ERR_VALUE);
    CU_ASSERT_PTR_NOT_NULL(strstr(lb_last_error(), "--max-distance"));
    char text[16] = "";
    f = fopen(path, "r");
    CU_ASSERT_PTR_NOT_NULL(fgets(text, sizeof text, f));
    fclose(f);
    CU_ASSERT_STRING_EQUAL(text, "precious"); /* untouched */

    int64_t seen[2] = {0, 0};
    CU_ASSERT_EQUAL(lb_task_generate(&o, path, count_progress, seen), LB_OK);
    CU_ASSERT_EQUAL(seen[0], 35);
    CU_ASSERT_EQUAL(seen[1], 35);
    char tmp[300];
    snprintf(tmp, sizeof tmp, "%s.tmp", path);
    CU_ASSERT_NOT_EQUAL(access(tmp, F_OK), 0); /* renamed away */
    lb_dataset *ds = lb_dataset_open(path);
    CU_ASSERT_PTR_NOT_NULL(ds);
    CU_ASSERT_EQUAL(lb_dataset_split_size(ds, "val"), 0);
    CU_ASSERT_EQUAL(lb_dataset_split_size(ds, "nope"), -1);
    lb_dataset_close(ds);
    remove(path);
}

/* ---- messages for command-line users ---- */

/* Messages start with the option as typed (dashed), never a C function name; reals
 * are printed with %g; a non-finite real is called that. */
static void test_option_messages_for_users(void)
{
    expect_message(LB_TASK_SPIKE, "--seq-len", "abc", "option --seq-len: 'abc' is not a whole number");
    expect_message(LB_TASK_SPIKE, "--seq_len", "abc", "option --seq-len: 'abc' is not a whole number");
    expect_message(LB_TASK_SPIKE, "seq_len", "1", "option --seq-len: 1 is outside [2, 1048576]");
    expect_message(LB_TASK_SPIKE, "--min-length", "x", "option --min-length: 'x' is not a whole number or auto");
    expect_message(LB_TASK_SPIKE, "--min-length", "1", "option --min-length: 1 is outside [2, 1048576] (or auto)");
    expect_message(LB_TASK_SPIKE, "--train", "x", "option --train: 'x' is not a whole number");
    expect_message(LB_TASK_SPIKE, "--readings", NULL, "option --readings needs a value");
    expect_message(LB_TASK_RECALL, "--power-a", "nan",
                   "option --power-a: 'nan' is not a finite number: it must be in [1e-06, 16]");
    expect_message(LB_TASK_RECALL, "--power-a", "-inf",
                   "option --power-a: '-inf' is not a finite number: it must be in [1e-06, 16]");
    expect_message(LB_TASK_RECALL, "--power-a", "1e400",
                   "option --power-a: '1e400' is not a finite number: it must be in [1e-06, 16]");
    expect_message(LB_TASK_RECALL, "--power-a", "16.5", "option --power-a: 16.5 is outside [1e-06, 16]");
    expect_message(LB_TASK_SPIKE, "--key_vocab", "4", "option --key-vocab does not apply to task spike (only to recall)");

    /* --train, --val, --test are the same options as --n-train, --n-val, --n-test */
    lb_task_options o;
    lb_task_options_default(LB_TASK_LOCAL, &o);
    CU_ASSERT_EQUAL(lb_task_set_option(&o, "--train", "12"), LB_OK);
    CU_ASSERT_EQUAL(lb_task_set_option(&o, "val", "3"), LB_OK);
    CU_ASSERT_EQUAL(lb_task_set_option(&o, "--test", "0"), LB_OK);
    CU_ASSERT_EQUAL(o.n_train, 12);
    CU_ASSERT_EQUAL(o.n_val, 3);
    CU_ASSERT_EQUAL(o.n_test, 0);

    /* combinations name the options as typed */
    lb_task_options_default(LB_TASK_SPIKE, &o);
    o.seq_len = 100;
    o.max_distance = 100;
    CU_ASSERT_EQUAL(lb_task_options_resolve(&o), LB_ERR_VALUE);
    CU_ASSERT_STRING_EQUAL(lb_last_error(), "--max-distance 100 exceeds --seq-len - 1 = 99");
    lb_task_options_default(LB_TASK_COPY, &o);
    o.seq_len = 20;
    CU_ASSERT_EQUAL(lb_task_options_resolve(&o), LB_ERR_VALUE);
    CU_ASSERT_STRING_EQUAL(lb_last_error(), "sequences of length 20 are too short for task copy, which needs "
                                            "2 * --copy-symbols + 1 = 21 (raise --seq-len)");
    lb_task_options_default(LB_TASK_SPIKE, &o);
    o.readings = 1;
    CU_ASSERT_EQUAL(lb_task_options_resolve(&o), LB_ERR_VALUE);
    CU_ASSERT_STRING_EQUAL(lb_last_error(), "option --readings: 1 is outside [2, 4096]");

    /* generation errors start with the file */
    lb_task_options_default(LB_TASK_SPIKE, &o);
    o.seq_len = 16;
    CU_ASSERT_EQUAL(lb_task_generate(&o, "/nonexistent_dir_lb/x.h5", NULL, NULL), LB_ERR_IO);
    CU_ASSERT_EQUAL(strncmp(lb_last_error(), "/nonexistent_dir_lb/x.h5: ", 26), 0);

    /* help: dashed spellings only, reals with %g */
    char *text = NULL;
    size_t size = 0;
    FILE *f = open_memstream(&text, &size);
    lb_task_print_help(f);
    fclose(f);
    CU_ASSERT_PTR_NOT_NULL(strstr(text, "--power-a          query gap"));
    CU_ASSERT_PTR_NOT_NULL(strstr(text, "[1e-06..16]"));
    CU_ASSERT_PTR_NOT_NULL(strstr(text, "--train, --n-train"));
    CU_ASSERT_PTR_NULL(strstr(text, "e-07"));
    for (const char *p = strstr(text, "--"); p; p = strstr(p + 2, "--")) {
        size_t n = strspn(p + 2, "abcdefghijklmnopqrstuvwxyz_-");
        if (memchr(p + 2, '_', n)) {
            fprintf(stderr, "\n  help spells '%.*s'\n", (int)n + 2, p);
            CU_FAIL("an option in the help has an underscore");
        }
    }
    const char *underscored[] = {"min_length", "max_distance", "power_a", "copy_symbols", "key_vocab", NULL};
    for (int i = 0; underscored[i]; i++)
        CU_ASSERT_PTR_NULL(strstr(text, underscored[i]));
    free(text);
}

/* lb_task_raw_bytes: N * (inputs + targets + distance + lengths) * 4 over the splits. */
static void test_raw_bytes_and_temp_path(void)
{
    lb_task_options o;
    lb_task_options_default(LB_TASK_SPIKE, &o);
    o.seq_len = 16;
    o.n_train = 30;
    o.n_val = 0;
    o.n_test = 5;
    CU_ASSERT_EQUAL(lb_task_options_resolve(&o), LB_OK);
    CU_ASSERT_EQUAL(lb_task_raw_bytes(&o), 35 * (16 + 1 + 1) * 4); /* tokens, target, distance */
    o.variable_length = 1;
    o.min_length = LB_OPTION_AUTO;
    o.max_distance = LB_OPTION_AUTO;
    CU_ASSERT_EQUAL(lb_task_options_resolve(&o), LB_OK);
    CU_ASSERT_EQUAL(lb_task_raw_bytes(&o), 35 * (16 + 1 + 1 + 1) * 4); /* + lengths */
    lb_task_options_default(LB_TASK_RECALL, &o);
    o.n_train = 7;
    o.n_val = 2;
    o.n_test = 1;
    CU_ASSERT_EQUAL(lb_task_options_resolve(&o), LB_OK);
    CU_ASSERT_EQUAL(lb_task_raw_bytes(&o), 10 * (256 + 256 + 1) * 4); /* per-position targets */
    lb_task_options_default(LB_TASK_ADDING, &o);
    CU_ASSERT_EQUAL(lb_task_options_resolve(&o), LB_OK);
    CU_ASSERT_EQUAL(lb_task_raw_bytes(&o), 12000 * (200 * 2 + 1 + 1) * 4); /* F = 2 */
    lb_task_options_default(LB_TASK_LOCAL, &o);
    o.n_train = o.n_val = o.n_test = 0;
    CU_ASSERT_EQUAL(lb_task_options_resolve(&o), LB_OK);
    CU_ASSERT_EQUAL(lb_task_raw_bytes(&o), 0);
    /* the QA case: 1,048,576 positions x 1,000,000 sequences is about 3.8 TiB */
    lb_task_options_default(LB_TASK_SPIKE, &o);
    o.seq_len = 1 << 20;
    o.n_train = 1000000;
    CU_ASSERT_EQUAL(lb_task_options_resolve(&o), LB_OK);
    CU_ASSERT_EQUAL(lb_task_raw_bytes(&o), (int64_t)1002000 * ((1 << 20) + 2) * 4);
    o.n_train = INT64_MAX; /* not resolved: saturates instead of overflowing */
    CU_ASSERT_EQUAL(lb_task_raw_bytes(&o), INT64_MAX);

    char buf[16];
    CU_ASSERT_EQUAL(lb_task_temp_path("a/b.h5", buf, sizeof buf), 0);
    CU_ASSERT_STRING_EQUAL(buf, "a/b.h5.tmp");
    CU_ASSERT_EQUAL(lb_task_temp_path("a/very_long_name.h5", buf, sizeof buf), -1);
}

int main(void)
{
    const lb_test_case cases[] = {
        {"options parse from text with full validation", test_option_parsing},
        {"options resolve auto values and reject bad combinations", test_option_resolve},
        {"help lists every option with its defaults", test_help_and_options_text},
        {"spike: target is the reading bound to the alarm's sensor", test_spike_recipe},
        {"spike at seq_len 16384 with the clue 7000 events back", test_spike_long_sequences},
        {"recall: each query's target is its key's value", test_recall_recipe},
        {"copy and selective copy emit the symbols in order", test_copy_recipe},
        {"adding: target is the sum of the two marked values", test_adding_recipe},
        {"local: target is the sum of the last window symbols mod K", test_local_recipe},
        {"copy with blank targets scores every position", test_copy_blank_targets},
        {"parity: target is the count of symbol 1 mod 2", test_parity_recipe},
        {"modsum: target is the sum of the stored symbols mod K", test_modsum_recipe},
        {"modsum: its options, and one clear error for the others", test_modsum_options},
        {"same seed gives the same bytes with any thread count", test_same_seed_same_bytes},
        {"splits do not depend on each other's sizes", test_splits_independent},
        {"distances cover their whole range uniformly", test_distance_coverage},
        {"labels are balanced", test_label_balance},
        {"generation errors leave no file; progress is reported", test_generate_errors_and_progress},
        {"option messages start with the dashed option, reals with %g", test_option_messages_for_users},
        {"raw size estimate and temporary file name", test_raw_bytes_and_temp_path},
        {NULL, NULL},
    };
    return lb_test_main("data tasks", cases);
}

/* The task recipes and the HDF5 writer (format: docs/data.md).
 *
 * Dimensions: N sequences in a split, T = seq_len, L = length of one sequence
 * (L == T unless variable_length), F features (adding: 2).
 *
 * Streams: base_train, base_val, base_test are the first three draws of lb_rng seeded
 * with `seed`; sequence i of a split is generated from lb_rng seeded with base + i.
 * So each sequence is a pure function of (options, split, i): splits do not depend on
 * each other's sizes, and the OpenMP loop over sequences gives the same bytes with any
 * number of threads.
 */
#include "data/tasks.h"

#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "data/h5io_internal.h"
#include "data/output.h"
#include "data/options.h"
#include "data/rows.h"
#include "tensor/rng.h"

enum { SPLIT_COUNT = 3, BLOCK_BYTES = 16 << 20 };

static const char *const split_names[SPLIT_COUNT] = {"train", "val", "test"};

/* One sequence being generated. Buffers arrive filled with PAD (tokens), 0 (features)
 * and -100 (per-position targets); a recipe writes positions [0, L) only. */
typedef struct example {
    int32_t *tokens;      /* [T] or NULL */
    float *features;      /* [T, F] or NULL */
    int32_t *targets;     /* [T] per position or [1] */
    float *target_value;  /* [1] regression or NULL */
    int32_t *distance;    /* [1] or NULL */
    int64_t *scratch;     /* per-thread scratch, recipe_scratch(opt) entries */
} example;

typedef void (*recipe_fn)(const lb_task_options *o, lb_rng *rng, int64_t L, example *ex);

/* ---- recipes ---- */

static int32_t draw_noise(lb_rng *rng, int64_t noise_types) { return (int32_t)(1 + lb_rng_below(rng, (uint64_t)noise_types)); }

/* spike: tokens 1..V noise; spike_offset + s*K + r binds sensor s to reading r;
 * alarm_offset + s names sensor s. */
static void recipe_spike(const lb_task_options *o, lb_rng *rng, int64_t L, example *ex)
{
    const int64_t K = o->readings, S = o->sensors;
    const int32_t spike_offset = (int32_t)(1 + o->noise_types);
    const int32_t alarm_offset = (int32_t)(spike_offset + S * K);
    int32_t *tok = ex->tokens;
    for (int64_t t = 0; t < L - 1; t++)
        tok[t] = draw_noise(rng, o->noise_types);
    int64_t asked = (int64_t)lb_rng_below(rng, (uint64_t)S);
    int64_t d = lb_rng_int(rng, o->min_distance, o->max_distance);
    int32_t reading = (int32_t)lb_rng_below(rng, (uint64_t)K);
    tok[L - 1 - d] = (int32_t)(spike_offset + asked * K + reading);
    for (int64_t s = 0; s < S; s++) {
        if (s == asked)
            continue;
        int64_t pos;
        do /* a free slot: not yet a spike (at most half the slots are taken) */
            pos = (int64_t)lb_rng_below(rng, (uint64_t)(L - 1));
        while (tok[pos] >= spike_offset);
        tok[pos] = (int32_t)(spike_offset + s * K + (int64_t)lb_rng_below(rng, (uint64_t)K));
    }
    tok[L - 1] = (int32_t)(alarm_offset + asked);
    ex->targets[0] = reading;
    ex->distance[0] = (int32_t)d;
}

/* Gap g in [1, G] with density proportional to g^(a-1): inverse CDF of the
 * continuous law on [1, G+1), floored. */
static int64_t power_law_gap(lb_rng *rng, double a, int64_t G)
{
    double top = pow((double)G + 1.0, a) - 1.0;
    double x = pow(1.0 + lb_rng_uniform(rng) * top, 1.0 / a);
    int64_t g = (int64_t)x;
    return g < 1 ? 1 : g > G ? G : g;
}

/* recall (MQAR): [k_1 v_1 ... k_P v_P | noise with queries]. Keys are distinct. */
static void recall_context(const lb_task_options *o, lb_rng *rng, int64_t *keys, int32_t *tok)
{
    const int64_t P = o->pairs, KV = o->key_vocab;
    const int32_t key_offset = (int32_t)(1 + o->noise_types), value_offset = (int32_t)(key_offset + KV);
    /* Floyd's sampling of P distinct keys out of KV, then a shuffle of their order. */
    for (int64_t j = KV - P, n = 0; j < KV; j++, n++) {
        int64_t t = (int64_t)lb_rng_below(rng, (uint64_t)j + 1);
        for (int64_t i = 0; i < n; i++)
            if (keys[i] == t) {
                t = j;
                break;
            }
        keys[n] = t;
    }
    for (int64_t i = P - 1; i > 0; i--) {
        int64_t j = (int64_t)lb_rng_below(rng, (uint64_t)i + 1), tmp = keys[i];
        keys[i] = keys[j];
        keys[j] = tmp;
    }
    for (int64_t i = 0; i < P; i++) {
        tok[2 * i] = (int32_t)(key_offset + keys[i]);
        tok[2 * i + 1] = (int32_t)(value_offset + (int64_t)lb_rng_below(rng, (uint64_t)o->value_vocab));
    }
}

static void recipe_recall(const lb_task_options *o, lb_rng *rng, int64_t L, example *ex)
{
    const int64_t P = o->pairs, G = L - 2 * P;
    const int32_t key_offset = (int32_t)(1 + o->noise_types), value_offset = (int32_t)(key_offset + o->key_vocab);
    int32_t *tok = ex->tokens;
    int64_t *order = ex->scratch; /* [P]: pair index of query q = order[q] */
    recall_context(o, rng, order, tok);
    for (int64_t t = 2 * P; t < L; t++)
        tok[t] = draw_noise(rng, o->noise_types);
    for (int64_t i = 0; i < P; i++)
        order[i] = i;
    int64_t longest = 0;
    for (int64_t q = 0; q < o->queries; q++) {
        int64_t j = q + (int64_t)lb_rng_below(rng, (uint64_t)(P - q)), pair = order[j];
        order[j] = order[q];
        order[q] = pair;
        int64_t pos = 2 * P - 1 + power_law_gap(rng, o->power_a, G);
        while (tok[pos] >= key_offset) /* taken by an earlier query: next free slot, cyclically */
            pos = pos + 1 < L ? pos + 1 : 2 * P;
        tok[pos] = tok[2 * pair];
        ex->targets[pos] = tok[2 * pair + 1] - value_offset;
        if (pos - 2 * pair > longest)
            longest = pos - 2 * pair;
    }
    ex->distance[0] = (int32_t)longest;
}

/* copy: symbols 1..A, blank A+1, delimiter A+2. Layout of a sequence of length L:
 * symbols in [0, L-C-1) (the first C positions, or C random ones if selective), the
 * delimiter at L-C-1, and the C outputs at [L-C, L), whose targets are the symbols. */
static void recipe_copy(const lb_task_options *o, lb_rng *rng, int64_t L, example *ex)
{
    const int64_t A = o->alphabet, C = o->copy_symbols, M = L - C - 1;
    const int32_t blank = (int32_t)(A + 1), delimiter = (int32_t)(A + 2);
    int32_t *tok = ex->tokens;
    for (int64_t t = 0; t < L; t++)
        tok[t] = blank;
    for (int64_t t = 0; o->blank_targets && t < L - C; t++)
        ex->targets[t] = (int32_t)A; /* the blank class */
    for (int64_t i = 0; i < C; i++)
        ex->targets[L - C + i] = (int32_t)lb_rng_below(rng, (uint64_t)A);
    if (o->selective) { /* Floyd's sampling of C positions out of M, marked with the delimiter */
        for (int64_t j = M - C; j < M; j++) {
            int64_t t = (int64_t)lb_rng_below(rng, (uint64_t)j + 1);
            tok[tok[t] == delimiter ? j : t] = delimiter;
        }
    } else {
        for (int64_t i = 0; i < C; i++)
            tok[i] = delimiter;
    }
    int64_t longest = 0;
    for (int64_t t = 0, i = 0; t < M; t++) { /* marked positions in order receive the symbols */
        if (tok[t] != delimiter)
            continue;
        tok[t] = 1 + ex->targets[L - C + i];
        if (L - C + i - t > longest)
            longest = L - C + i - t;
        i++;
    }
    tok[M] = delimiter;
    ex->distance[0] = (int32_t)longest;
}

/* adding: features [t, 0] = value ~ U[0, 1), [t, 1] = marker. The first marker sits
 * d ~ U{min_distance..max_distance} before the last position, the second uniformly
 * after it; target = sum of the two marked values. */
static void recipe_adding(const lb_task_options *o, lb_rng *rng, int64_t L, example *ex)
{
    float *x = ex->features; /* [T, 2] */
    for (int64_t t = 0; t < L; t++)
        x[2 * t] = (float)lb_rng_uniform(rng);
    int64_t d = lb_rng_int(rng, o->min_distance, o->max_distance);
    int64_t first = L - 1 - d, second = lb_rng_int(rng, first + 1, L - 1);
    x[2 * first + 1] = 1.0f;
    x[2 * second + 1] = 1.0f;
    ex->target_value[0] = (float)((double)x[2 * first] + (double)x[2 * second]);
    ex->distance[0] = (int32_t)d;
}

/* tok[t] = 1 + U{0..A-1} for t in [0, n), drawn in order: the symbols of local,
 * parity and modsum (value = token - 1). */
static void draw_symbols(lb_rng *rng, int64_t A, int64_t n, int32_t *tok)
{
    for (int64_t t = 0; t < n; t++)
        tok[t] = (int32_t)(1 + lb_rng_below(rng, (uint64_t)A));
}

/* local: symbols 1..A (value = token - 1); target = (sum of the last `window`
 * values) mod classes. */
static void recipe_local(const lb_task_options *o, lb_rng *rng, int64_t L, example *ex)
{
    int64_t sum = 0;
    draw_symbols(rng, o->alphabet, L, ex->tokens);
    for (int64_t t = L - o->window; t < L; t++)
        sum += ex->tokens[t] - 1;
    ex->targets[0] = (int32_t)(sum % o->classes);
}

/* parity: symbols 1..A; target = (number of positions holding symbol 1) mod 2. */
static void recipe_parity(const lb_task_options *o, lb_rng *rng, int64_t L, example *ex)
{
    int32_t odd = 0;
    draw_symbols(rng, o->alphabet, L, ex->tokens);
    for (int64_t t = 0; t < L; t++)
        odd ^= ex->tokens[t] == 1;
    ex->targets[0] = odd;
}

/* modsum: symbols 1..K (value = token - 1) at [0, L-1), the query token K+1 at L-1;
 * target = (sum of the L-1 values) mod K. */
static void recipe_modsum(const lb_task_options *o, lb_rng *rng, int64_t L, example *ex)
{
    const int64_t K = o->modulus;
    int64_t sum = 0;
    draw_symbols(rng, K, L - 1, ex->tokens);
    for (int64_t t = 0; t < L - 1; t++)
        sum = (sum + ex->tokens[t] - 1) % K;
    ex->tokens[L - 1] = (int32_t)(K + 1);
    ex->targets[0] = (int32_t)sum;
}

static const recipe_fn recipes[LB_TASK_COUNT] = {recipe_spike, recipe_recall, recipe_copy,  recipe_adding,
                                                 recipe_local, recipe_parity, recipe_modsum};

static int64_t recipe_scratch(const lb_task_options *o) { return o->task == LB_TASK_RECALL ? o->pairs : 1; }

/* ---- layout and generation of a block ---- */

static lb_layout task_layout(const lb_task_options *o)
{
    lb_layout l = {0};
    l.seq_len = o->seq_len;
    l.features = lb_task_num_features(o);
    l.per_position = o->task == LB_TASK_RECALL || o->task == LB_TASK_COPY;
    l.regression = o->task == LB_TASK_ADDING;
    l.has_distance = o->task != LB_TASK_LOCAL && o->task != LB_TASK_PARITY && o->task != LB_TASK_MODSUM;
    l.has_lengths = o->variable_length != 0;
    return l;
}

/* Example `row` of block `rows`, buffers reset to PAD / 0 / -100. */
static example example_at(const lb_layout *l, lb_rows *rows, int64_t row, int64_t *scratch)
{
    example ex = {0};
    ex.scratch = scratch;
    ex.tokens = l->features ? NULL : lb_rows_at(l, rows, LB_FIELD_INPUTS, row);
    ex.features = l->features ? lb_rows_at(l, rows, LB_FIELD_INPUTS, row) : NULL;
    ex.targets = l->regression ? NULL : lb_rows_at(l, rows, LB_FIELD_TARGETS, row);
    ex.target_value = l->regression ? lb_rows_at(l, rows, LB_FIELD_TARGETS, row) : NULL;
    ex.distance = lb_rows_at(l, rows, LB_FIELD_DISTANCE, row);
    memset(lb_rows_at(l, rows, LB_FIELD_INPUTS, row), 0, (size_t)lb_layout_row_elems(l, LB_FIELD_INPUTS) * 4);
    for (int64_t t = 0; l->per_position && t < l->seq_len; t++)
        ex.targets[t] = LB_IGNORE_INDEX;
    return ex;
}

/* Fills rows[0, n) with sequences first, first+1, ... of the split whose base is `base`. */
static lb_status generate_block(const lb_task_options *o, const lb_layout *l, uint64_t base, int64_t first,
                                lb_rows *rows, const char *file)
{
    int failed = 0;
    int64_t scratch_len = recipe_scratch(o);
#pragma omp parallel
    {
        int64_t *scratch = malloc((size_t)scratch_len * sizeof *scratch);
        if (!scratch) {
#pragma omp atomic write
            failed = 1;
        }
#pragma omp for schedule(static)
        for (int64_t i = 0; i < rows->n; i++) {
            if (!scratch)
                continue;
            lb_rng rng;
            lb_rng_seed(&rng, base + (uint64_t)(first + i));
            example ex = example_at(l, rows, i, scratch);
            int64_t L = o->variable_length ? lb_rng_int(&rng, o->min_length, o->seq_len) : o->seq_len;
            if (l->has_lengths)
                *(int32_t *)lb_rows_at(l, rows, LB_FIELD_LENGTHS, i) = (int32_t)L;
            recipes[o->task](o, &rng, L, &ex);
        }
        free(scratch);
    }
    return failed ? lb_error(LB_ERR_MEMORY, "%s: out of memory for %lld words of scratch per thread", file,
                             (long long)scratch_len)
                  : LB_OK;
}

/* ---- the file ----
 *
 * Two processes: this one generates the blocks of sequences (OpenMP threads) and
 * sends them over a socket to a child process, which alone calls HDF5 to write them
 * (lb_h5_isolated). When the disk fills, HDF5's cleanup after the failed write can
 * crash; then only the child goes, and this process reports the error. */

typedef struct writer {
    const lb_task_options *opt;
    lb_layout layout;
    const char *file; /* the final path, for messages */
    const char *tmp;  /* the temporary file written */
    lb_progress_fn progress;
    void *user;
    int64_t done, total;
    uint64_t base[SPLIT_COUNT];
    int sock[2]; /* [0] the generating process's end, [1] the writing child's */
} writer;

static lb_status write_root_attrs(hid_t fid, const lb_task_options *o, const char *file)
{
    lb_status st = lb_h5_write_attr_string(fid, "task", lb_task_name(o->task), file);
    if (st == LB_OK)
        st = lb_h5_write_attr_int(fid, "format_version", LB_DATA_FORMAT_VERSION, file);
    if (st == LB_OK)
        st = lb_h5_write_attr_int(fid, "vocab_size", lb_task_vocab_size(o), file);
    if (st == LB_OK)
        st = lb_h5_write_attr_int(fid, "num_classes", lb_task_num_classes(o), file);
    int count = 0;
    const lb_option_spec *t = lb_option_table(&count);
    for (int i = 0; st == LB_OK && i < count; i++) {
        if (!lb_option_applies(&t[i], o->task))
            continue;
        if (t[i].type == LB_OPT_SEED)
            st = lb_h5_write_attr_uint(fid, t[i].name, lb_option_get_seed(o, &t[i]), file);
        else if (t[i].type == LB_OPT_REAL)
            st = lb_h5_write_attr_real(fid, t[i].name, lb_option_get_real(o, &t[i]), file);
        else
            st = lb_h5_write_attr_int(fid, t[i].name, lb_option_get_int(o, &t[i]), file);
    }
    return st;
}

/* Sequences per block: whole input chunks' worth, about BLOCK_BYTES of inputs. */
static int64_t block_rows(const lb_layout *l, int64_t n)
{
    int64_t row_bytes = lb_layout_row_elems(l, LB_FIELD_INPUTS) * 4;
    int64_t rows = BLOCK_BYTES / row_bytes;
    rows = rows < 1 ? 1 : rows;
    return rows < n ? rows : (n > 0 ? n : 1);
}

/* The child: receives the blocks of one split and writes them into its datasets. */
static lb_status write_split(writer *w, hid_t fid, int split, int64_t n)
{
    hid_t dsets[LB_FIELD_COUNT] = {-1, -1, -1, -1};
    hid_t group = lb_h5_create_group(fid, split_names[split]);
    lb_status st = group < 0 ? lb_error(LB_ERR_IO, "%s: cannot create group /%s", w->file, split_names[split]) : LB_OK;
    for (int f = 0; st == LB_OK && f < LB_FIELD_COUNT; f++)
        if (lb_layout_has(&w->layout, (lb_field)f))
            st = lb_h5_create_field(group, split_names[split], &w->layout, (lb_field)f, n, &dsets[f], w->file);
    int64_t block = block_rows(&w->layout, n);
    lb_rows rows = {0};
    if (st == LB_OK)
        st = lb_rows_alloc(&w->layout, block, NULL, w->file, &rows);
    for (int64_t start = 0; st == LB_OK && start < n; start += block) {
        rows.n = n - start < block ? n - start : block;
        if (lb_rows_transfer(w->sock[1], &w->layout, &rows, 0) != 0)
            st = lb_error(LB_ERR_IO, "%s: the generated sequences stopped arriving", w->file);
        if (st == LB_OK)
            st = lb_h5_write_rows(dsets, &w->layout, &rows, start, w->file);
    }
    lb_rows_free(&rows);
    for (int f = 0; f < LB_FIELD_COUNT; f++)
        lb_h5_close(dsets[f]);
    lb_h5_close(group);
    return st;
}

/* The child process's job: the whole HDF5 file, each handle closed exactly once. */
static lb_status write_file(void *ctx)
{
    writer *w = ctx;
    const lb_task_options *o = w->opt;
    const int64_t sizes[SPLIT_COUNT] = {o->n_train, o->n_val, o->n_test};
    close(w->sock[0]);
    hid_t fid = H5Fcreate(w->tmp, H5F_ACC_TRUNC, H5P_DEFAULT, H5P_DEFAULT);
    if (fid < 0)
        return lb_error(LB_ERR_IO, "%s: cannot create the temporary file %s: %s",
                        w->file, w->tmp, lb_h5_cause());
    lb_status st = write_root_attrs(fid, o, w->file);
    for (int s = 0; st == LB_OK && s < SPLIT_COUNT; s++)
        st = write_split(w, fid, s, sizes[s]);
    return lb_h5_finish_temporary(fid, w->tmp, w->file, st);
}

/* This process: generates every block in order and sends it to the child.
 * LB_ERR_STATE when the child stopped reading (its own message tells why). */
static lb_status generate_all(void *ctx)
{
    writer *w = ctx;
    const lb_task_options *o = w->opt;
    const int64_t sizes[SPLIT_COUNT] = {o->n_train, o->n_val, o->n_test};
    close(w->sock[1]);
    w->sock[1] = -1;
    lb_status st = LB_OK;
    for (int s = 0; st == LB_OK && s < SPLIT_COUNT; s++) {
        int64_t n = sizes[s], block = block_rows(&w->layout, n);
        lb_rows rows;
        st = lb_rows_alloc(&w->layout, block, NULL, w->file, &rows);
        for (int64_t start = 0; st == LB_OK && start < n; start += block) {
            rows.n = n - start < block ? n - start : block;
            st = generate_block(w->opt, &w->layout, w->base[s], start, &rows, w->file);
            if (st == LB_OK && lb_rows_transfer(w->sock[0], &w->layout, &rows, 1) != 0)
                st = lb_error(LB_ERR_STATE, "%s: the HDF5 writer stopped", w->file);
            w->done += rows.n;
            if (st == LB_OK && w->progress)
                w->progress(w->done, w->total, w->user);
        }
        lb_rows_free(&rows);
    }
    close(w->sock[0]);
    w->sock[0] = -1;
    return st;
}

int64_t lb_task_raw_bytes(const lb_task_options *opt)
{
    LB_CHECK_ARG(opt, -1);
    lb_layout l = task_layout(opt);
    const int64_t sizes[SPLIT_COUNT] = {opt->n_train, opt->n_val, opt->n_test};
    int64_t per_example = 0, total = 0;
    if (l.seq_len < 0 || l.seq_len > (INT64_MAX / 64) / (l.features > 0 ? l.features : 1))
        return INT64_MAX;
    for (int f = 0; f < LB_FIELD_COUNT; f++)
        if (lb_layout_has(&l, (lb_field)f))
            per_example += lb_layout_row_elems(&l, (lb_field)f) * 4;
    for (int s = 0; s < SPLIT_COUNT; s++) {
        if (sizes[s] < 0 || (sizes[s] > 0 && per_example > (INT64_MAX - total) / sizes[s]))
            return INT64_MAX;
        total += sizes[s] * per_example;
    }
    return total;
}

int lb_task_temp_path(const char *path, char *buf, size_t size)
{
    LB_CHECK_ARG(path, -1);
    LB_CHECK_ARG(buf, -1);
    int n = snprintf(buf, size, "%s.tmp", path);
    return (n < 0 || (size_t)n >= size) ? -1 : 0;
}

lb_status lb_task_generate(const lb_task_options *opt, const char *path, lb_progress_fn progress, void *user)
{
    if (!opt || !path)
        return lb_error(LB_ERR_VALUE, "lb_task_generate: options and path must not be NULL");
    lb_task_options o = *opt;
    lb_status st = lb_task_options_resolve(&o);
    if (st != LB_OK)
        return st;
    writer w = {.opt = &o, .layout = task_layout(&o), .file = path, .progress = progress, .user = user};
    w.total = o.n_train + o.n_val + o.n_test;
    lb_rng root;
    lb_rng_seed(&root, o.seed);
    for (int s = 0; s < SPLIT_COUNT; s++)
        w.base[s] = lb_rng_next(&root);
    if ((st = lb_output_check(path, "data file")) != LB_OK)
        return st;
    int replace = lb_output_present(path); /* what the user saw there (--force); nothing else is replaced */
    if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, w.sock) != 0)
        return lb_error(LB_ERR_IO, "%s: cannot create a socket pair for the writer: %s", path, lb_system_error(errno));
    st = lb_h5_write_new(path, "data file", replace, write_file, generate_all, &w, &w.tmp);
    for (int k = 0; k < 2; k++) /* still open when the writer never started */
        if (w.sock[k] >= 0)
            close(w.sock[k]);
    return st;
}

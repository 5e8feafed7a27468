/* Scoring event-log rows through one streaming state per source (train/score.h). */
#include "train/score.h"

#include <csv.h>
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "data/output.h"
#include "layers/stream.h"
#include "train/trainer.h"

/* Element i of a new (contiguous) float32 or float64 tensor. */
static void set_flat(lb_tensor *t, int64_t i, double v)
{
    if (t->dtype == LB_FLOAT32)
        ((float *)lb_tensor_data(t))[i] = (float)v;
    else
        ((double *)lb_tensor_data(t))[i] = v;
}

struct lb_event_scorer {
    lb_model *model;
    const lb_event_schema *schema;
    lb_stream_options opt;
    int64_t n, cap;
    lb_model_state **state; /* [n] per source, NULL until its first row */
    int64_t *seen;          /* [n] rows fed */
    lb_tensor *input;       /* [1, 1, F] */
};

static lb_status check_model(lb_model *model, const lb_event_schema *schema)
{
    const lb_model_config *mc = lb_model_get_config(model);
    if (mc->vocab_size > 0 || mc->input_features != schema->input_features)
        return lb_error(LB_ERR_VALUE, "the model reads %s, but the event log's rows have %lld inputs each",
                        mc->vocab_size > 0 ? "token ids" : "another number of features",
                        (long long)schema->input_features);
    if (mc->num_classes != schema->num_classes)
        return lb_error(LB_ERR_VALUE, "the model has %lld classes, but the event log's label has %lld",
                        (long long)mc->num_classes, (long long)schema->num_classes);
    return LB_OK;
}

lb_event_scorer *lb_event_scorer_new(lb_model *model, const lb_event_schema *schema, int64_t max_context)
{
    LB_CHECK_ARG(model, NULL);
    LB_CHECK_ARG(schema, NULL);
    if (check_model(model, schema) != LB_OK)
        return NULL;
    if (max_context < 0) {
        lb_error(LB_ERR_VALUE, "max_context %lld must be >= 0", (long long)max_context);
        return NULL;
    }
    lb_event_scorer *s = calloc(1, sizeof *s);
    int64_t shape[3] = {1, 1, schema->input_features};
    if (s)
        s->input = lb_tensor_zeros(lb_model_get_config(model)->dtype, 3, shape);
    if (!s || !s->input) {
        free(s);
        lb_error(LB_ERR_MEMORY, "event scorer: out of memory");
        return NULL;
    }
    s->model = model;
    s->schema = schema;
    s->opt.max_context = max_context;
    /* a model that cannot stream is refused now, not at the first row */
    lb_model_state *probe = lb_model_state_new(model, 1, &s->opt);
    if (!probe) {
        lb_event_scorer_free(s);
        return NULL;
    }
    lb_model_state_free(probe);
    return s;
}

void lb_event_scorer_free(lb_event_scorer *s)
{
    if (!s)
        return;
    for (int64_t i = 0; i < s->n; i++)
        lb_model_state_free(s->state[i]);
    free(s->state);
    free(s->seen);
    lb_tensor_free(s->input);
    free(s);
}

/* Class, its probability and the anomaly score of logits [C] at row r of y. */
static void read_output(const lb_tensor *y, int64_t r, int64_t C, lb_event_score *out)
{
    int64_t best = 0;
    double top = lb_tensor_flat(y, r * C);
    for (int64_t c = 1; c < C; c++)
        if (lb_tensor_flat(y, r * C + c) > top) {
            top = lb_tensor_flat(y, r * C + c);
            best = c;
        }
    double sum = 0;
    for (int64_t c = 0; c < C; c++)
        sum += exp(lb_tensor_flat(y, r * C + c) - top);
    out->predicted = (int32_t)best;
    out->probability = 1.0 / sum;
    double p_ref = exp(lb_tensor_flat(y, r * C + (C == 2 ? 1 : 0)) - top) / sum;
    out->score = C == 2 ? p_ref : 1.0 - p_ref;
}

static void fill_row(lb_event_score *out, const lb_event_row *row, int64_t position)
{
    out->source = row->source;
    out->key = row->key;
    out->row = row->row;
    out->line = row->line;
    out->position = position;
    out->label = row->label;
    out->unseen = row->unseen;
}

lb_status lb_event_scorer_row(lb_event_scorer *s, const lb_event_row *row, lb_event_score *out)
{
    LB_CHECK_ARG(s, LB_ERR_VALUE);
    LB_CHECK_ARG(row, LB_ERR_VALUE);
    LB_CHECK_ARG(out, LB_ERR_VALUE);
    if (row->source < 0)
        return lb_error(LB_ERR_VALUE, "event scorer: source %lld", (long long)row->source);
    if (row->source >= s->cap) {
        int64_t cap = s->cap ? 2 * s->cap : 16;
        while (cap <= row->source)
            cap *= 2;
        lb_model_state **st = realloc(s->state, (size_t)cap * sizeof *st);
        if (st)
            s->state = st;
        int64_t *seen = st ? realloc(s->seen, (size_t)cap * sizeof *seen) : NULL;
        if (!seen)
            return lb_error(LB_ERR_MEMORY, "event scorer: out of memory for %lld sources", (long long)cap);
        s->seen = seen;
        for (int64_t i = s->cap; i < cap; i++) {
            s->state[i] = NULL;
            s->seen[i] = 0;
        }
        s->cap = cap;
    }
    if (row->source >= s->n)
        s->n = row->source + 1;
    if (!s->state[row->source] && !(s->state[row->source] = lb_model_state_new(s->model, 1, &s->opt)))
        return lb_last_status();
    int64_t F = s->schema->input_features;
    for (int64_t k = 0; k < F; k++)
        set_flat(s->input, k, row->features[k]);
    lb_model_input in = {.batch = 1, .seq_len = 1, .features = s->input};
    lb_tensor *y = lb_model_step_chunk(s->state[row->source], &in); /* [1, 1, C] */
    if (!y)
        return lb_last_status();
    fill_row(out, row, s->seen[row->source]++);
    read_output(y, 0, s->schema->num_classes, out);
    lb_tensor_free(y);
    return LB_OK;
}

int64_t lb_event_scorer_sources(const lb_event_scorer *s)
{
    LB_CHECK_ARG(s, -1);
    int64_t n = 0;
    for (int64_t i = 0; i < s->n; i++)
        n += s->state[i] != NULL;
    return n;
}

size_t lb_event_scorer_bytes(const lb_event_scorer *s)
{
    LB_CHECK_ARG(s, 0);
    size_t bytes = 0;
    for (int64_t i = 0; i < s->n; i++)
        if (s->state[i])
            bytes += lb_model_state_bytes(s->state[i], 0);
    return bytes;
}

/* ---- a whole file ---- */

typedef struct file_rows {
    int64_t n, cap, F;
    float *x;         /* [n, F] */
    lb_event_score *meta; /* [n]: everything but the outputs (key filled at the end) */
    char **keys;      /* [sources] copies of the key texts */
    int64_t n_keys;
} file_rows;

static void file_rows_free(file_rows *f)
{
    free(f->x);
    free(f->meta);
    for (int64_t i = 0; i < f->n_keys; i++)
        free(f->keys[i]);
    free(f->keys);
}

static lb_status file_rows_add(file_rows *f, const lb_event_row *row)
{
    if (f->n == f->cap) {
        int64_t cap = f->cap ? 2 * f->cap : 1024;
        float *x = realloc(f->x, (size_t)(cap * f->F) * sizeof *x);
        if (x)
            f->x = x;
        lb_event_score *m = x ? realloc(f->meta, (size_t)cap * sizeof *m) : NULL;
        if (!m)
            return lb_error(LB_ERR_MEMORY, "out of memory (while reading the rows to score)");
        f->meta = m;
        f->cap = cap;
    }
    if (row->source >= f->n_keys) {
        char **k = realloc(f->keys, (size_t)(row->source + 1) * sizeof *k);
        if (!k)
            return lb_error(LB_ERR_MEMORY, "out of memory (while reading the rows to score)");
        f->keys = k;
        for (int64_t i = f->n_keys; i <= row->source; i++)
            f->keys[i] = NULL;
        f->n_keys = row->source + 1;
        if (!(f->keys[row->source] = strdup(row->key)))
            return lb_error(LB_ERR_MEMORY, "out of memory (while reading the rows to score)");
    }
    memcpy(f->x + f->n * f->F, row->features, (size_t)f->F * sizeof *f->x);
    fill_row(&f->meta[f->n], row, 0);
    f->n++;
    return LB_OK;
}

/* Feeds source `src`'s rows (indices idx[0..m)) through a fresh state in chunks. */
static lb_status score_source(lb_model *model, const lb_event_schema *schema, const lb_stream_options *opt,
                              file_rows *f, const int64_t *idx, int64_t m, int64_t chunk)
{
    int64_t F = f->F, C = schema->num_classes;
    lb_model_state *state = lb_model_state_new(model, 1, opt);
    if (!state)
        return lb_last_status();
    lb_status st = LB_OK;
    for (int64_t start = 0; start < m && st == LB_OK; start += chunk) {
        int64_t len = m - start < chunk ? m - start : chunk;
        int64_t shape[3] = {1, len, F};
        lb_tensor *x = lb_tensor_zeros(lb_model_get_config(model)->dtype, 3, shape);
        if (!x) {
            st = lb_last_status();
            break;
        }
        for (int64_t t = 0; t < len; t++)
            for (int64_t k = 0; k < F; k++)
                set_flat(x, t * F + k, f->x[idx[start + t] * F + k]);
        lb_model_input in = {.batch = 1, .seq_len = len, .features = x};
        lb_tensor *y = lb_model_step_chunk(state, &in); /* [1, len, C] */
        lb_tensor_free(x);
        if (!y) {
            st = lb_last_status();
            break;
        }
        for (int64_t t = 0; t < len; t++) {
            lb_event_score *out = &f->meta[idx[start + t]];
            out->position = start + t;
            read_output(y, t, C, out);
        }
        lb_tensor_free(y);
    }
    lb_model_state_free(state);
    return st;
}

lb_status lb_event_score_file(lb_model *model, const lb_event_schema *schema, const char *path, int64_t chunk,
                              int64_t max_context, lb_event_score_fn fn, void *user, int64_t *rows)
{
    if (rows)
        *rows = 0;
    LB_CHECK_ARG(model, LB_ERR_VALUE);
    LB_CHECK_ARG(schema, LB_ERR_VALUE);
    LB_CHECK_ARG(path, LB_ERR_VALUE);
    LB_CHECK_ARG(fn, LB_ERR_VALUE);
    if (chunk < 0 || max_context < 0)
        return lb_error(LB_ERR_VALUE, "event scores: chunk %lld and max_context %lld must be >= 0", (long long)chunk,
                        (long long)max_context);
    lb_status st = check_model(model, schema);
    if (st != LB_OK)
        return st;
    lb_event_reader *r = lb_event_reader_open(path, schema);
    if (!r)
        return lb_last_status();
    file_rows f = {.F = schema->input_features};
    lb_event_row row;
    int got;
    while (st == LB_OK && (got = lb_event_reader_next(r, &row)) == 1)
        st = file_rows_add(&f, &row);
    if (st == LB_OK && got < 0)
        st = lb_last_status();
    lb_event_reader_close(r);
    /* the rows of each source in file order, then each source through its own state */
    int64_t *first = st == LB_OK ? calloc((size_t)f.n_keys + 1, sizeof *first) : NULL;
    int64_t *idx = first ? malloc((size_t)(f.n ? f.n : 1) * sizeof *idx) : NULL;
    if (st == LB_OK && !idx)
        st = lb_error(LB_ERR_MEMORY, "out of memory (while grouping the rows to score)");
    if (st == LB_OK) {
        for (int64_t i = 0; i < f.n; i++)
            first[f.meta[i].source + 1]++;
        for (int64_t s = 0; s < f.n_keys; s++)
            first[s + 1] += first[s];
        int64_t *fill = calloc((size_t)f.n_keys + 1, sizeof *fill);
        if (!fill)
            st = lb_error(LB_ERR_MEMORY, "out of memory (while grouping the rows to score)");
        for (int64_t i = 0; st == LB_OK && i < f.n; i++)
            idx[first[f.meta[i].source] + fill[f.meta[i].source]++] = i;
        free(fill);
    }
    lb_stream_options opt = {0, max_context, 0};
    for (int64_t s = 0; st == LB_OK && s < f.n_keys; s++) {
        int64_t m = first[s + 1] - first[s];
        st = score_source(model, schema, &opt, &f, idx + first[s], m, chunk > 0 ? chunk : (m > 0 ? m : 1));
    }
    for (int64_t i = 0; st == LB_OK && i < f.n; i++) {
        f.meta[i].key = f.keys[f.meta[i].source];
        if (rows)
            *rows = i + 1;
        if (fn(&f.meta[i], user))
            break;
    }
    free(first);
    free(idx);
    file_rows_free(&f);
    return st;
}

lb_model *lb_event_model_load(const char *ck, int missing, lb_event_schema **schema)
{
    LB_CHECK_ARG(ck && schema, NULL);
    *schema = NULL;
    if (lb_checkpoint_read_events(ck, schema) != LB_OK)
        return NULL;
    if (!*schema) {
        lb_error(LB_ERR_VALUE, "%s: the model was not trained on an imported CSV event log (no events schema), so "
                 "--csv does not apply: use --data or --input", ck);
        return NULL;
    }
    if (missing >= 0)
        (*schema)->missing = (lb_missing_policy)missing;
    lb_model *m = lb_checkpoint_load_model(ck);
    if (!m) {
        lb_event_schema_free(*schema);
        *schema = NULL;
    }
    return m;
}

/* ---- the scores CSV ---- */

const char *lb_event_score_csv_header(void)
{
    return "row,line,source,position,label,predicted,probability,score";
}

int lb_event_score_print_csv(FILE *out, const lb_event_score *s)
{
    LB_CHECK_ARG(out && s && s->key, 1);
    int bad = fprintf(out, "%lld,%lld,", (long long)s->row, (long long)s->line) < 0;
    bad |= csv_fwrite(out, s->key, strlen(s->key)) != 0;
    bad |= fprintf(out, ",%lld,%d,%d,%.9g,%.9g\n", (long long)s->position, s->label, s->predicted, s->probability,
                   s->score) < 0;
    return bad;
}

typedef struct csv_out {
    FILE *f;
    int bad;
    int64_t rows, flagged;
} csv_out;

static int write_score(const lb_event_score *s, void *user)
{
    csv_out *o = user;
    o->bad |= lb_event_score_print_csv(o->f, s);
    o->rows++;
    o->flagged += s->predicted != 0;
    return o->bad;
}

/* Scores into the open temporary file; its flush to disk and close included. */
static lb_status score_into(lb_model *model, const lb_event_schema *schema, const char *csv, const char *out,
                            const char *tmp, int64_t chunk, int64_t max_context, csv_out *o)
{
    lb_status st = o->f ? LB_OK : lb_error(LB_ERR_IO, "%s: cannot write: %s", tmp, lb_system_error(errno));
    if (st == LB_OK)
        o->bad |= fprintf(o->f, "%s\n", lb_event_score_csv_header()) < 0;
    int64_t rows = 0;
    if (st == LB_OK)
        st = lb_event_score_file(model, schema, csv, chunk, max_context, write_score, o, &rows);
    if (o->f) {
        o->bad |= fflush(o->f) != 0 || fsync(fileno(o->f)) != 0;
        int err = errno;
        o->bad |= fclose(o->f) != 0;
        if (st == LB_OK && o->bad)
            st = lb_error(LB_ERR_IO, "%s: writing the scores failed (%s); nothing was written", out,
                          lb_system_error(err ? err : EIO));
    }
    return st;
}

lb_status lb_event_score_write(lb_model *model, const lb_event_schema *schema, const char *csv, const char *out,
                               int64_t chunk, int64_t max_context, int64_t *rows, int64_t *flagged)
{
    LB_CHECK_ARG(model && schema && csv && out, LB_ERR_VALUE);
    char tmp[4200];
    int lock = -1;
    if (snprintf(tmp, sizeof tmp, "%s.tmp", out) >= (int)sizeof tmp)
        return lb_error(LB_ERR_VALUE, "-o: path too long");
    if (lb_output_lock(out, "scores file", &lock) != LB_OK)
        return lb_last_status();
    csv_out o = {fopen(tmp, "w"), 0, 0, 0};
    lb_status st = score_into(model, schema, csv, out, tmp, chunk, max_context, &o);
    if (st == LB_OK)
        st = lb_output_commit(tmp, out, "scores file");
    else
        unlink(tmp);
    lb_output_unlock(out, lock);
    if (rows)
        *rows = o.rows;
    if (flagged)
        *flagged = o.flagged;
    return st;
}

/* Importing a CSV event log into a data file (lb_csv_import), and reading new rows with
 * a stored schema (lb_event_reader). The steps are described in data/events.h. */
#include "data/events.h"

#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "data/csv.h"
#include "data/h5io_internal.h"
#include "data/output.h"
#include "data/rows.h"
#include "data/tasks.h"
#include "tensor/rng.h"

enum { SPLITS = 3, MAX_LABEL = 1 << 20, MAX_SEQ_LEN = LB_DATA_MAX_SEQ_LEN, MAX_NAMES = 1 << 16 };

static const char *const split_names[SPLITS] = {"train", "val", "test"};

/* ---- strings: a growable set with ids in order of insertion ---- */

typedef struct strset {
    int64_t n, cap;
    char **s;
    size_t *len;
    int64_t *slot; /* open addressing: id + 1, 0 = empty */
    int64_t n_slots;
} strset;

static uint64_t hash_bytes(const char *s, size_t n)
{
    uint64_t h = 1469598103934665603ull; /* FNV-1a */
    for (size_t i = 0; i < n; i++)
        h = (h ^ (unsigned char)s[i]) * 1099511628211ull;
    return h;
}

static void strset_free(strset *t)
{
    for (int64_t i = 0; i < t->n; i++)
        free(t->s[i]);
    free(t->s);
    free(t->len);
    free(t->slot);
    memset(t, 0, sizeof *t);
}

/* Id of s (inserted when new, *added = 1); -1 when out of memory. */
static int64_t strset_id(strset *t, const char *s, size_t n, int insert, int *added)
{
    if (added)
        *added = 0;
    if (t->n_slots > 0) {
        uint64_t mask = (uint64_t)t->n_slots - 1;
        for (uint64_t h = hash_bytes(s, n) & mask;; h = (h + 1) & mask) {
            int64_t id = t->slot[h] - 1;
            if (id < 0)
                break;
            if (t->len[id] == n && memcmp(t->s[id], s, n) == 0)
                return id;
        }
    }
    if (!insert)
        return -2;
    if (2 * (t->n + 1) > t->n_slots) { /* grow the table (load <= 1/2) */
        int64_t ns = t->n_slots ? 2 * t->n_slots : 64;
        int64_t *slot = calloc((size_t)ns, sizeof *slot);
        if (!slot)
            return -1;
        for (int64_t id = 0; id < t->n; id++)
            for (uint64_t h = hash_bytes(t->s[id], t->len[id]) & (uint64_t)(ns - 1);; h = (h + 1) & (uint64_t)(ns - 1))
                if (!slot[h]) {
                    slot[h] = id + 1;
                    break;
                }
        free(t->slot);
        t->slot = slot;
        t->n_slots = ns;
    }
    if (t->n == t->cap) {
        int64_t cap = t->cap ? 2 * t->cap : 16;
        char **ns = realloc(t->s, (size_t)cap * sizeof *ns);
        if (!ns)
            return -1;
        t->s = ns;
        size_t *nl = realloc(t->len, (size_t)cap * sizeof *nl);
        if (!nl)
            return -1;
        t->len = nl;
        t->cap = cap;
    }
    char *copy = malloc(n + 1);
    if (!copy)
        return -1;
    memcpy(copy, s, n);
    copy[n] = '\0';
    int64_t id = t->n++;
    t->s[id] = copy;
    t->len[id] = n;
    for (uint64_t h = hash_bytes(s, n) & (uint64_t)(t->n_slots - 1);; h = (h + 1) & (uint64_t)(t->n_slots - 1))
        if (!t->slot[h]) {
            t->slot[h] = id + 1;
            break;
        }
    if (added)
        *added = 1;
    return id;
}

/* ---- column lists and the header ---- */

typedef struct names {
    int64_t n;
    char **v;
} names;

static void names_free(names *n)
{
    for (int64_t i = 0; i < n->n; i++)
        free(n->v[i]);
    free(n->v);
    memset(n, 0, sizeof *n);
}

/* A column list into names: the option's text is read as one CSV row (data/csv.h), so
 * a name that holds a comma or a quote is written quoted ("motor, id"). An empty name,
 * or a name given twice, is an error naming `option`. */
static lb_status split_names_list(const char *text, const char *option, names *out)
{
    memset(out, 0, sizeof *out);
    if (!text)
        return LB_OK;
    if (!*text)
        return lb_error(LB_ERR_VALUE, "%s is empty: give one or more column names separated by commas", option);
    FILE *in = fmemopen((void *)text, strlen(text), "r");
    lb_csv_reader *r = in ? lb_csv_open_stream(in, option) : NULL;
    lb_csv_record rec;
    int got = r ? lb_csv_next(r, &rec) : -1;
    lb_status st = LB_OK;
    if (!in)
        st = lb_error(LB_ERR_MEMORY, "%s: out of memory", option);
    else if (got < 0)
        st = lb_error(LB_ERR_VALUE, "%s '%s': not a list of column names (quote a name that holds a comma, and double "
                      "the quotes inside it)", option, text);
    else if (got == 0 || rec.n_fields > MAX_NAMES)
        st = lb_error(LB_ERR_VALUE, "%s '%s': give 1 to %d column names", option, text, MAX_NAMES);
    if (st == LB_OK && !(out->v = calloc((size_t)rec.n_fields, sizeof *out->v)))
        st = lb_error(LB_ERR_MEMORY, "%s: out of memory", option);
    for (int64_t i = 0; st == LB_OK && i < rec.n_fields; i++) {
        if (rec.len[i] == 0) {
            st = lb_error(LB_ERR_VALUE, "%s '%s': an empty column name (two commas in a row, or one at an end)", option,
                          text);
            break;
        }
        for (int64_t j = 0; j < out->n; j++)
            if (strcmp(out->v[j], rec.field[i]) == 0) {
                st = lb_error(LB_ERR_VALUE, "%s names the column '%s' twice", option, rec.field[i]);
                break;
            }
        if (st == LB_OK && !(out->v[out->n++] = strdup(rec.field[i])))
            st = lb_error(LB_ERR_MEMORY, "%s: out of memory", option);
    }
    if (st == LB_OK && r && lb_csv_next(r, &rec) != 0)
        st = lb_error(LB_ERR_VALUE, "%s '%s': one line of column names, please", option, text);
    lb_csv_close(r);
    if (in)
        fclose(in);
    if (st != LB_OK)
        names_free(out);
    return st;
}

/* Where each column the schema reads is in the CSV (0-based), -1 when absent. */
typedef struct plan {
    int64_t n_header;
    char **header;    /* copies of the header's names */
    int64_t n_keys, *key_col;
    int64_t order_col;
    int64_t n_features, *feature_col;
    int64_t n_tokens, *token_col;
    int64_t label_col;
} plan;

static void plan_free(plan *p)
{
    for (int64_t i = 0; i < p->n_header; i++)
        free(p->header[i]);
    free(p->header);
    free(p->key_col);
    free(p->feature_col);
    free(p->token_col);
    memset(p, 0, sizeof *p);
}

/* The header's columns as a short list for messages. */
static void header_list(const plan *p, char *buf, size_t size)
{
    size_t used = 0;
    buf[0] = '\0';
    for (int64_t i = 0; i < p->n_header && used + 8 < size; i++) {
        int n = snprintf(buf + used, size - used, "%s%s", i ? ", " : "", p->header[i]);
        used += n > 0 ? (size_t)n : 0;
    }
    if (used >= size - 8)
        snprintf(buf + size - 8, 8, "...");
}

/* Column index of `name`; -1 when absent and optional. Errors: absent and required,
 * or present twice in the header. */
static lb_status find_column(const plan *p, const char *file, const char *name, const char *option, int required,
                             int64_t *out)
{
    int64_t found = -1;
    for (int64_t i = 0; i < p->n_header; i++) {
        if (strcmp(p->header[i], name) != 0)
            continue;
        if (found >= 0)
            return lb_error(LB_ERR_FORMAT, "%s: row 1 (the header): the column '%s' (%s) appears twice, as columns %lld "
                            "and %lld: rename one",
                            file, name, option, (long long)found + 1, (long long)i + 1);
        found = i;
    }
    if (found < 0 && required) {
        char cols[512];
        header_list(p, cols, sizeof cols);
        return lb_error(LB_ERR_FORMAT, "%s: row 1 (the header): no column '%s' (%s); the header has: %s", file, name,
                        option, cols);
    }
    *out = found;
    return LB_OK;
}

static lb_status resolve_list(const plan *p, const char *file, const names *n, const char *option, int required,
                              int64_t **cols)
{
    *cols = calloc((size_t)(n->n ? n->n : 1), sizeof **cols);
    if (!*cols)
        return lb_error(LB_ERR_MEMORY, "%s: out of memory", file);
    for (int64_t i = 0; i < n->n; i++) {
        lb_status st = find_column(p, file, n->v[i], option, required, &(*cols)[i]);
        if (st != LB_OK)
            return st;
    }
    return LB_OK;
}

/* Reads the header record (row 1). An empty file, or a header without names, is an error. */
static lb_status read_header(lb_csv_reader *r, plan *p)
{
    lb_csv_record rec;
    int got = lb_csv_next(r, &rec);
    if (got < 0)
        return lb_last_status();
    if (got == 0)
        return lb_error(LB_ERR_FORMAT, "%s: the file is empty (expected a header row naming the columns, then data rows)",
                        lb_csv_name(r));
    p->header = calloc((size_t)rec.n_fields, sizeof *p->header);
    if (!p->header)
        return lb_error(LB_ERR_MEMORY, "%s: out of memory", lb_csv_name(r));
    for (int64_t i = 0; i < rec.n_fields; i++) {
        if (!(p->header[i] = strdup(rec.field[i])))
            return lb_error(LB_ERR_MEMORY, "%s: out of memory", lb_csv_name(r));
        p->n_header = i + 1;
    }
    return LB_OK;
}

/* ---- values ---- */

static int is_blank(char c) { return c == ' ' || c == '\t'; }

/* A field as a finite decimal number (blanks around it allowed): 0 ok, -1 not a number
 * (hexadecimal such as 0x1A included: strtod would read it as 26), -2 not finite. */
static int parse_number(const char *s, double *out)
{
    while (is_blank(*s))
        s++;
    if (!*s)
        return -1;
    const char *digits = s + (*s == '+' || *s == '-');
    if (digits[0] == '0' && (digits[1] == 'x' || digits[1] == 'X'))
        return -1;
    char *end = NULL;
    errno = 0;
    double v = strtod(s, &end);
    if (end == s)
        return -1;
    while (is_blank(*end))
        end++;
    if (*end)
        return -1;
    if (!isfinite(v))
        return -2;
    *out = v;
    return 0;
}

/* Whether a field is missing: empty, or blanks only. */
static int is_missing(const char *s)
{
    while (is_blank(*s))
        s++;
    return *s == '\0';
}

/* A field shown in a message: at most 40 bytes, control bytes as \xHH. */
static void shown(const char *s, char *buf, size_t size)
{
    size_t used = 0, i = 0;
    for (; s[i] && i < 40 && used + 5 < size; i++) {
        unsigned char c = (unsigned char)s[i];
        if (c < 0x20 || c == 0x7f)
            used += (size_t)snprintf(buf + used, size - used, "\\x%02x", c);
        else
            buf[used++] = (char)c;
    }
    buf[used] = '\0';
    if (s[i] && used + 4 < size)
        snprintf(buf + used, size - used, "...");
}

static lb_status cell_error(const char *file, const lb_csv_record *rec, const plan *p, int64_t col, const char *what,
                            const char *value)
{
    char v[200];
    shown(value ? value : "", v, sizeof v);
    return lb_error(LB_ERR_FORMAT, "%s: row %lld (line %lld), column '%s' (%lld): %s%s%s%s", file, (long long)rec->row,
                    (long long)rec->line, p->header[col], (long long)col + 1, value ? "'" : "", value ? v : "",
                    value ? "' " : "", what);
}

static lb_status parse_label(const char *file, const lb_csv_record *rec, const plan *p, int64_t col, int32_t *out)
{
    const char *s = rec->field[col];
    while (is_blank(*s))
        s++;
    char *end = NULL;
    errno = 0;
    long long v = strtoll(s, &end, 10);
    while (end && is_blank(*end))
        end++;
    if (end == s || *end || errno == ERANGE)
        return cell_error(file, rec, p, col, "is not a whole number (a label is a class 0, 1, 2, ...)", rec->field[col]);
    if (v < 0 || v >= MAX_LABEL) {
        char what[96];
        snprintf(what, sizeof what, "is outside [0, %d) (a label is a class 0, 1, 2, ...)", MAX_LABEL);
        return cell_error(file, rec, p, col, what, rec->field[col]);
    }
    *out = (int32_t)v;
    return LB_OK;
}

/* ---- the rows of the file ---- */

typedef struct table {
    int64_t n, cap;
    int64_t nf, nt;
    int64_t *source, *row, *line;
    char **order_text;  /* [n] or NULL without an order key */
    double *order_num;
    int order_numeric;  /* the order values compare as numbers */
    int64_t order_n_number, order_n_text;      /* order values that are / are not numbers */
    int64_t order_first_number, order_first_text; /* the first of each kind (index), -1 none */
    double *feat;       /* [n, nf] raw values */
    int64_t *tok;       /* [n, nt] ids in tok_values[c] */
    int32_t *label;     /* [n]; -1 without a label column */
    strset *tok_values; /* [nt]: every value of each token column */
    strset keys;        /* sources: key identity */
    char **key_text;    /* [S] the key shown: values joined by ',' */
    /* per source, for --missing previous: the last row's values */
    double *last_feat;
    int64_t *last_tok;
    unsigned char *has_last;
    int64_t skipped;    /* rows left out (missing skip) */
} table;

static void table_free(table *t)
{
    free(t->source);
    free(t->row);
    free(t->line);
    for (int64_t i = 0; t->order_text && i < t->n; i++)
        free(t->order_text[i]);
    free(t->order_text);
    free(t->order_num);
    free(t->feat);
    free(t->tok);
    free(t->label);
    for (int64_t c = 0; t->tok_values && c < t->nt; c++)
        strset_free(&t->tok_values[c]);
    free(t->tok_values);
    for (int64_t s = 0; t->key_text && s < t->keys.n; s++)
        free(t->key_text[s]);
    free(t->key_text);
    strset_free(&t->keys);
    free(t->last_feat);
    free(t->last_tok);
    free(t->has_last);
    memset(t, 0, sizeof *t);
}

#define GROW(ptr, count)                                                                                              \
    do {                                                                                                              \
        void *grown_ = realloc((ptr), (size_t)(count) * sizeof *(ptr));                                               \
        if (!grown_)                                                                                                  \
            return lb_error(LB_ERR_MEMORY, "out of memory (while reading the rows)");                                 \
        (ptr) = grown_;                                                                                               \
    } while (0)

static lb_status table_reserve(table *t, int with_order)
{
    if (t->n < t->cap)
        return LB_OK;
    int64_t cap = t->cap ? 2 * t->cap : 1024;
    GROW(t->source, cap);
    GROW(t->row, cap);
    GROW(t->line, cap);
    GROW(t->order_num, cap);
    if (with_order)
        GROW(t->order_text, cap);
    GROW(t->feat, cap * (t->nf ? t->nf : 1));
    GROW(t->tok, cap * (t->nt ? t->nt : 1));
    GROW(t->label, cap);
    t->cap = cap;
    return LB_OK;
}

/* The source of a record: its key's id (a new source gets the next id). */
static lb_status source_of(table *t, const plan *p, const lb_csv_record *rec, int64_t *out)
{
    size_t bytes = 0;
    for (int64_t k = 0; k < p->n_keys; k++)
        bytes += rec->len[p->key_col[k]] + 21;
    char *id = malloc(bytes + 1), *text = malloc(bytes + 1);
    if (!id || !text) {
        free(id);
        free(text);
        return lb_error(LB_ERR_MEMORY, "out of memory (while reading the rows)");
    }
    size_t n = 0, m = 0;
    for (int64_t k = 0; k < p->n_keys; k++) { /* identity: length-prefixed values */
        size_t len = rec->len[p->key_col[k]];
        n += (size_t)snprintf(id + n, 22, "%zu:", len);
        memcpy(id + n, rec->field[p->key_col[k]], len);
        n += len;
        if (k)
            text[m++] = ',';
        memcpy(text + m, rec->field[p->key_col[k]], len);
        m += len;
    }
    text[m] = '\0';
    int added = 0;
    int64_t s = strset_id(&t->keys, id, n, 1, &added);
    free(id);
    if (s < 0) {
        free(text);
        return lb_error(LB_ERR_MEMORY, "out of memory (while reading the rows)");
    }
    if (added) {
        int64_t S = t->keys.n;
        char **kt = realloc(t->key_text, (size_t)S * sizeof *kt);
        if (!kt) {
            free(text);
            return lb_error(LB_ERR_MEMORY, "out of memory (while reading the rows)");
        }
        t->key_text = kt;
        kt[s] = text;
        text = NULL;
        GROW(t->last_feat, S * (t->nf ? t->nf : 1));
        GROW(t->last_tok, S * (t->nt ? t->nt : 1));
        GROW(t->has_last, S);
        t->has_last[s] = 0;
    }
    free(text);
    *out = s;
    return LB_OK;
}

/* Checks and converts one value of a feature (is_token 0) or token column into the row's
 * slot; returns 1 in *skip when the row is to be left out. */
static lb_status take_value(table *t, const plan *p, const char *file, const lb_csv_record *rec, lb_missing_policy missing,
                            int64_t source, int is_token, int64_t c, double *feat, int64_t *tok, int *skip)
{
    int64_t col = is_token ? p->token_col[c] : p->feature_col[c];
    const char *s = rec->field[col];
    if (is_missing(s)) {
        if (missing == LB_MISSING_SKIP) {
            *skip = 1;
            return LB_OK;
        }
        if (missing == LB_MISSING_PREVIOUS && t->has_last[source]) {
            if (is_token)
                *tok = t->last_tok[source * t->nt + c];
            else
                *feat = t->last_feat[source * t->nf + c];
            return LB_OK;
        }
        return cell_error(file, rec, p, col,
                          missing == LB_MISSING_PREVIOUS
                              ? "is missing (empty) on the first row of its source: no previous value to carry"
                              : "is missing (empty): give a value, or choose --missing skip or previous",
                          NULL);
    }
    if (is_token) {
        int64_t id = strset_id(&t->tok_values[c], s, rec->len[col], 1, NULL);
        if (id < 0)
            return lb_error(LB_ERR_MEMORY, "out of memory (while reading the rows)");
        *tok = id;
        return LB_OK;
    }
    int r = parse_number(s, feat);
    if (r == -1)
        return cell_error(file, rec, p, col, "is not a number (a --features column holds numbers)", s);
    if (r == -2)
        return cell_error(file, rec, p, col, "is not a finite number", s);
    return LB_OK;
}

/* One data record into the table (or skipped). */
static lb_status take_row(table *t, const plan *p, const char *file, const lb_csv_record *rec, lb_missing_policy missing,
                          int has_label)
{
    if (rec->n_fields != p->n_header)
        return lb_error(LB_ERR_FORMAT, "%s: row %lld (line %lld): %lld fields, but the header has %lld columns (a ragged "
                        "row: quote a field that holds a comma)",
                        file, (long long)rec->row, (long long)rec->line, (long long)rec->n_fields, (long long)p->n_header);
    for (int64_t k = 0; k < p->n_keys; k++)
        if (is_missing(rec->field[p->key_col[k]])) {
            if (missing == LB_MISSING_SKIP) {
                t->skipped++;
                return LB_OK;
            }
            return cell_error(file, rec, p, p->key_col[k], "is missing (empty): every row needs its sequence key", NULL);
        }
    if (p->order_col >= 0 && is_missing(rec->field[p->order_col])) {
        if (missing == LB_MISSING_SKIP) {
            t->skipped++;
            return LB_OK;
        }
        return cell_error(file, rec, p, p->order_col, "is missing (empty): every row needs its order key", NULL);
    }
    int32_t label = -1;
    if (has_label) {
        if (is_missing(rec->field[p->label_col])) {
            if (missing == LB_MISSING_SKIP) {
                t->skipped++;
                return LB_OK;
            }
            return cell_error(file, rec, p, p->label_col, "is missing (empty): every row needs its label", NULL);
        }
        lb_status st = parse_label(file, rec, p, p->label_col, &label);
        if (st != LB_OK)
            return st;
    }
    lb_status st = table_reserve(t, p->order_col >= 0);
    int64_t source = 0;
    if (st == LB_OK)
        st = source_of(t, p, rec, &source);
    if (st != LB_OK)
        return st;
    int64_t i = t->n;
    double *feat = t->feat + i * t->nf;
    int64_t *tok = t->tok + i * t->nt;
    int skip = 0;
    for (int64_t c = 0; c < t->nf && st == LB_OK && !skip; c++)
        st = take_value(t, p, file, rec, missing, source, 0, c, &feat[c], NULL, &skip);
    for (int64_t c = 0; c < t->nt && st == LB_OK && !skip; c++)
        st = take_value(t, p, file, rec, missing, source, 1, c, NULL, &tok[c], &skip);
    if (st != LB_OK)
        return st;
    if (skip) {
        t->skipped++;
        return LB_OK;
    }
    if (p->order_col >= 0) {
        const char *o = rec->field[p->order_col];
        if (!(t->order_text[i] = strdup(o)))
            return lb_error(LB_ERR_MEMORY, "out of memory (while reading the rows)");
        if (parse_number(o, &t->order_num[i]) == 0) {
            if (!t->order_n_number++)
                t->order_first_number = i;
        } else if (!t->order_n_text++) {
            t->order_first_text = i;
        }
    } else {
        t->order_num[i] = (double)i;
    }
    memcpy(t->last_feat + source * t->nf, feat, (size_t)t->nf * sizeof *feat);
    memcpy(t->last_tok + source * t->nt, tok, (size_t)t->nt * sizeof *tok);
    t->has_last[source] = 1;
    t->source[i] = source;
    t->row[i] = rec->row;
    t->line[i] = rec->line;
    t->label[i] = label;
    t->n++;
    return LB_OK;
}

/* ---- order within a source: a stable merge sort of row indices ---- */

static int row_before(const table *t, int64_t a, int64_t b)
{
    if (t->order_text && !t->order_numeric) {
        int c = strcmp(t->order_text[a], t->order_text[b]);
        return c != 0 ? c < 0 : a < b;
    }
    double x = t->order_num[a], y = t->order_num[b];
    return x != y ? x < y : a < b;
}

static void merge_sort(const table *t, int64_t *v, int64_t *tmp, int64_t n)
{
    if (n < 2)
        return;
    int64_t h = n / 2;
    merge_sort(t, v, tmp, h);
    merge_sort(t, v + h, tmp, n - h);
    int64_t i = 0, j = h, k = 0;
    while (i < h && j < n)
        tmp[k++] = row_before(t, v[j], v[i]) ? v[j++] : v[i++];
    while (i < h)
        tmp[k++] = v[i++];
    while (j < n)
        tmp[k++] = v[j++];
    memcpy(v, tmp, (size_t)n * sizeof *v);
}

/* ---- the import ---- */

typedef struct import {
    const char *file;        /* the CSV's name in messages */
    const char *out;
    lb_csv_options opt;
    const lb_event_schema *like;
    names keys, feats, toks;
    plan p;
    table t;
    lb_event_schema *schema;
    /* grouping */
    int64_t S, *first, *order; /* order[first[s] .. first[s+1]) = source s's rows, sorted */
    unsigned char *split_of;   /* [n] split of each row */
    int64_t *seg_lo;           /* [S, 3, 2] each split's segment of a source, in positions of `order` */
    int64_t **tok_map;         /* [nt][values] id in the schema (0 unseen) */
    lb_layout layout;
    lb_rows rows[SPLITS];
    char *schema_json;
    lb_order_as order_as; /* how the order values compared (number or text) */
} import;

static void import_free(import *im)
{
    names_free(&im->keys);
    names_free(&im->feats);
    names_free(&im->toks);
    plan_free(&im->p);
    for (int64_t c = 0; im->tok_map && c < im->t.nt; c++)
        free(im->tok_map[c]);
    free(im->tok_map);
    table_free(&im->t);
    free(im->first);
    free(im->order);
    free(im->split_of);
    free(im->seg_lo);
    for (int s = 0; s < SPLITS; s++)
        lb_rows_free(&im->rows[s]);
    free(im->schema_json);
    lb_event_schema_free(im->schema);
}

static lb_status check_options(import *im)
{
    lb_csv_options *o = &im->opt;
    if (!o->label)
        return lb_error(LB_ERR_VALUE, "--label is required: the column of integer classes (0, 1, ...) to learn");
    if (!o->features && !o->tokens)
        return lb_error(LB_ERR_VALUE, "give --features (numeric columns) or --tokens (categorical columns), or both");
    if (o->seq_len < 1 || o->seq_len > MAX_SEQ_LEN)
        return lb_error(LB_ERR_VALUE, "--seq-len %lld is outside [1, %d]", (long long)o->seq_len, MAX_SEQ_LEN);
    if (o->stride == 0)
        o->stride = o->seq_len;
    if (o->stride < 1 || o->stride > MAX_SEQ_LEN)
        return lb_error(LB_ERR_VALUE, "--stride %lld is outside [1, %d]", (long long)o->stride, MAX_SEQ_LEN);
    if (!(o->val_fraction >= 0 && o->val_fraction < 1) || !(o->test_fraction >= 0 && o->test_fraction < 1) ||
        !(o->val_fraction + o->test_fraction < 1))
        return lb_error(LB_ERR_VALUE, "--val %g and --test %g: each must be in [0, 1) and their sum below 1 (the rest "
                        "is the train split)",
                        o->val_fraction, o->test_fraction);
    if (o->order_key && !*o->order_key)
        return lb_error(LB_ERR_VALUE, "--order-key is empty: name a column");
    if (o->num_classes != 0 && (o->num_classes < 2 || o->num_classes > MAX_LABEL))
        return lb_error(LB_ERR_VALUE, "--classes %lld is outside [2, %d]", (long long)o->num_classes, MAX_LABEL);
    if (!*o->label)
        return lb_error(LB_ERR_VALUE, "--label is empty: name a column");
    lb_status st = split_names_list(o->sequence_key, "--sequence-key", &im->keys);
    if (st == LB_OK)
        st = split_names_list(o->features, "--features", &im->feats);
    if (st == LB_OK)
        st = split_names_list(o->tokens, "--tokens", &im->toks);
    if (st != LB_OK)
        return st;
    for (int64_t i = 0; i < im->feats.n; i++) {
        for (int64_t j = 0; j < im->toks.n; j++)
            if (strcmp(im->feats.v[i], im->toks.v[j]) == 0)
                return lb_error(LB_ERR_VALUE, "the column '%s' is named by both --features and --tokens", im->feats.v[i]);
        if (strcmp(im->feats.v[i], o->label) == 0)
            return lb_error(LB_ERR_VALUE, "the label column '%s' is also a --features column (the model would read "
                            "the answer)", o->label);
    }
    for (int64_t j = 0; j < im->toks.n; j++)
        if (strcmp(im->toks.v[j], o->label) == 0)
            return lb_error(LB_ERR_VALUE, "the label column '%s' is also a --tokens column (the model would read the "
                            "answer)", o->label);
    for (int64_t k = 0; k < im->keys.n; k++)
        if (strcmp(im->keys.v[k], o->label) == 0)
            return lb_error(LB_ERR_VALUE, "the label column '%s' is also a --sequence-key column", o->label);
    return LB_OK;
}

/* Names of the columns from a schema (lb_csv_import_like). */
static lb_status names_from_schema(import *im)
{
    const lb_event_schema *s = im->like;
    names *lists[3] = {&im->keys, &im->feats, &im->toks};
    int64_t counts[3] = {s->n_keys, s->n_features, s->n_tokens};
    for (int l = 0; l < 3; l++) {
        lists[l]->v = calloc((size_t)(counts[l] ? counts[l] : 1), sizeof(char *));
        if (!lists[l]->v)
            return lb_error(LB_ERR_MEMORY, "out of memory");
        for (int64_t i = 0; i < counts[l]; i++) {
            const char *name = l == 0 ? s->sequence_key[i] : l == 1 ? s->features[i].name : s->tokens[i].name;
            if (!(lists[l]->v[i] = strdup(name)))
                return lb_error(LB_ERR_MEMORY, "out of memory");
            lists[l]->n = i + 1;
        }
    }
    return LB_OK;
}

static lb_status resolve_plan(plan *p, const char *file, const names *keys, const names *feats, const names *toks,
                              const char *order_key, int order_required, const char *label, int label_required)
{
    p->n_keys = keys->n;
    p->n_features = feats->n;
    p->n_tokens = toks->n;
    p->order_col = p->label_col = -1;
    lb_status st = resolve_list(p, file, keys, "--sequence-key", 1, &p->key_col);
    if (st == LB_OK)
        st = resolve_list(p, file, feats, "--features", 1, &p->feature_col);
    if (st == LB_OK)
        st = resolve_list(p, file, toks, "--tokens", 1, &p->token_col);
    if (st == LB_OK && order_key)
        st = find_column(p, file, order_key, "--order-key", order_required, &p->order_col);
    if (st == LB_OK && label)
        st = find_column(p, file, label, "--label", label_required, &p->label_col);
    return st;
}

/* How the order values compare (lb_order_as): a column of numbers and text is refused
 * unless the choice was made; the choice made goes into the schema. */
static lb_status order_kind(import *im)
{
    table *t = &im->t;
    lb_order_as as = im->like ? im->like->order_as : im->opt.order_as;
    int64_t col = im->p.order_col;
    if (as == LB_ORDER_TEXT || (as == LB_ORDER_AUTO && !t->order_n_number)) {
        t->order_numeric = 0;
        im->order_as = LB_ORDER_TEXT;
        return LB_OK;
    }
    im->order_as = LB_ORDER_NUMBER;
    if (!t->order_n_text)
        return LB_OK;
    /* name the first value of the rarer kind (the likely typo) */
    int text_rarer = as == LB_ORDER_NUMBER || t->order_n_text <= t->order_n_number;
    int64_t i = text_rarer ? t->order_first_text : t->order_first_number;
    char v[200];
    shown(t->order_text[i], v, sizeof v);
    if (as == LB_ORDER_NUMBER)
        return lb_error(LB_ERR_FORMAT, "%s: row %lld (line %lld), column '%s' (%lld): '%s' is not a number (the order "
                        "key compares as numbers%s)",
                        im->file, (long long)t->row[i], (long long)t->line[i], im->p.header[col], (long long)col + 1, v,
                        im->like ? " in the schema of the --like file" : ": --order-as number");
    return lb_error(LB_ERR_FORMAT, "%s: row %lld (line %lld), column '%s' (%lld): '%s' is %s, but %lld other values of "
                    "the order key are %s (a mixed column would sort 10 < 100 < 2): correct the value, or give "
                    "--order-as text to compare every value as text",
                    im->file, (long long)t->row[i], (long long)t->line[i], im->p.header[col], (long long)col + 1, v,
                    text_rarer ? "not a number" : "a number", (long long)(text_rarer ? t->order_n_number : t->order_n_text),
                    text_rarer ? "numbers" : "text");
}

static lb_status read_rows(import *im, lb_csv_reader *r)
{
    table *t = &im->t;
    t->nf = im->feats.n;
    t->nt = im->toks.n;
    t->order_numeric = 1;
    t->order_first_number = t->order_first_text = -1;
    t->tok_values = calloc((size_t)(t->nt ? t->nt : 1), sizeof *t->tok_values);
    if (!t->tok_values)
        return lb_error(LB_ERR_MEMORY, "out of memory");
    lb_missing_policy missing = im->like ? im->like->missing : im->opt.missing;
    int has_label = im->p.label_col >= 0;
    lb_csv_record rec;
    int got;
    while ((got = lb_csv_next(r, &rec)) == 1) {
        lb_status st = take_row(t, &im->p, im->file, &rec, missing, has_label);
        if (st != LB_OK)
            return st;
    }
    if (got < 0)
        return lb_last_status();
    if (t->n == 0)
        return lb_error(LB_ERR_FORMAT, "%s: no data rows after the header%s", im->file,
                        t->skipped ? " (every row had a missing value and --missing skip left it out)" : "");
    return im->p.order_col >= 0 ? order_kind(im) : LB_OK;
}

static lb_status group_and_sort(import *im)
{
    table *t = &im->t;
    int64_t S = im->S = t->keys.n, n = t->n;
    im->first = calloc((size_t)S + 1, sizeof *im->first);
    im->order = malloc((size_t)n * sizeof *im->order);
    int64_t *tmp = malloc((size_t)n * sizeof *tmp), *fill = calloc((size_t)S + 1, sizeof *fill);
    if (!im->first || !im->order || !tmp || !fill) {
        free(tmp);
        free(fill);
        return lb_error(LB_ERR_MEMORY, "out of memory (while grouping the rows)");
    }
    for (int64_t i = 0; i < n; i++)
        im->first[t->source[i] + 1]++;
    for (int64_t s = 0; s < S; s++)
        im->first[s + 1] += im->first[s];
    for (int64_t i = 0; i < n; i++) /* file order within each source */
        im->order[im->first[t->source[i]] + fill[t->source[i]]++] = i;
    if (im->p.order_col >= 0)
        for (int64_t s = 0; s < S; s++)
            merge_sort(t, im->order + im->first[s], tmp, im->first[s + 1] - im->first[s]);
    free(tmp);
    free(fill);
    return LB_OK;
}

/* The segment of each split of each source, as positions in `order`. */
static lb_status assign_splits(import *im)
{
    int64_t S = im->S;
    im->seg_lo = calloc((size_t)S * SPLITS * 2, sizeof *im->seg_lo);
    im->split_of = calloc((size_t)im->t.n, 1);
    if (!im->seg_lo || !im->split_of)
        return lb_error(LB_ERR_MEMORY, "out of memory (while splitting)");
    double vf = im->like ? 0 : im->opt.val_fraction, tf = im->like ? 1 : im->opt.test_fraction;
    int by_sequence = !im->like && im->opt.split_by == LB_SPLIT_BY_SEQUENCE;
    int64_t *where = NULL; /* by sequence: split of each source */
    if (by_sequence) {
        int64_t *perm = malloc((size_t)S * sizeof *perm);
        where = malloc((size_t)S * sizeof *where);
        if (!perm || !where) {
            free(perm);
            free(where);
            return lb_error(LB_ERR_MEMORY, "out of memory (while splitting)");
        }
        lb_rng rng;
        lb_rng_seed(&rng, im->opt.seed);
        lb_rng_permutation(&rng, S, perm);
        int64_t n_test = llround((double)S * tf), n_val = llround((double)S * vf);
        if (n_test > S - 1)
            n_test = S - 1 > 0 ? S - 1 : 0;
        if (n_val > S - 1 - n_test)
            n_val = S - 1 - n_test > 0 ? S - 1 - n_test : 0;
        for (int64_t i = 0; i < S; i++)
            where[perm[i]] = i < S - n_val - n_test ? 0 : i < S - n_test ? 1 : 2;
        free(perm);
    }
    for (int64_t s = 0; s < S; s++) {
        int64_t lo = im->first[s], n = im->first[s + 1] - lo, cut[SPLITS + 1];
        if (by_sequence) {
            for (int k = 0; k <= SPLITS; k++)
                cut[k] = k <= where[s] ? 0 : n;
        } else {
            int64_t n_test = llround((double)n * tf), n_val = llround((double)n * vf);
            if (n_val + n_test > n)
                n_val = n - n_test;
            cut[0] = 0;
            cut[1] = n - n_val - n_test;
            cut[2] = n - n_test;
            cut[3] = n;
        }
        for (int k = 0; k < SPLITS; k++) {
            im->seg_lo[(s * SPLITS + k) * 2] = lo + cut[k];
            im->seg_lo[(s * SPLITS + k) * 2 + 1] = lo + cut[k + 1];
            for (int64_t j = lo + cut[k]; j < lo + cut[k + 1]; j++)
                im->split_of[im->order[j]] = (unsigned char)k;
        }
    }
    free(where);
    return LB_OK;
}

/* --classes K: every label in [0, K). */
static lb_status labels_within(const import *im, int64_t K)
{
    const table *t = &im->t;
    for (int64_t i = 0; i < t->n; i++)
        if (t->label[i] >= K)
            return lb_error(LB_ERR_FORMAT, "%s: row %lld (line %lld), column '%s': label %d is not one of the %lld "
                            "classes of --classes (0..%lld)",
                            im->file, (long long)t->row[i], (long long)t->line[i], im->opt.label, t->label[i],
                            (long long)K, (long long)K - 1);
    return LB_OK;
}

/* Without --classes the classes are 0..top: refused when more than half of them would
 * have no row, naming the values and the row of the largest (a stray value). */
static lb_status labels_dense(const import *im, int32_t top)
{
    const table *t = &im->t;
    unsigned char *seen = calloc((size_t)top + 1, 1);
    if (!seen)
        return lb_error(LB_ERR_MEMORY, "out of memory (while counting the labels)");
    int64_t distinct = 0, first_top = -1;
    for (int64_t i = 0; i < t->n; i++) {
        distinct += !seen[t->label[i]];
        seen[t->label[i]] = 1;
        if (first_top < 0 && t->label[i] == top)
            first_top = i;
    }
    lb_status st = LB_OK;
    if ((int64_t)top + 1 > 2 * distinct) {
        char values[160];
        size_t used = 0;
        int64_t listed = 0;
        for (int32_t v = 0; v <= top && used + 24 < sizeof values; v++)
            if (seen[v])
                used += (size_t)snprintf(values + used, sizeof values - used, "%s%d", listed++ ? ", " : "", v);
        if (listed < distinct)
            snprintf(values + used, sizeof values - used, ", ...");
        st = lb_error(LB_ERR_FORMAT, "%s: column '%s': the labels take %lld values (%s), so the classes 0..%d would "
                      "be %lld, %lld of them without a row; the largest, %d, is at row %lld (line %lld): correct a "
                      "stray value, or give --classes %lld to keep that many classes",
                      im->file, im->opt.label, (long long)distinct, values, top, (long long)top + 1,
                      (long long)top + 1 - distinct, top, (long long)t->row[first_top], (long long)t->line[first_top],
                      (long long)top + 1);
    }
    free(seen);
    return st;
}

/* The schema: columns, scaling from the train rows, token maps from the train rows. */
static lb_status build_schema(import *im)
{
    table *t = &im->t;
    lb_event_schema *s = im->schema = calloc(1, sizeof *s);
    if (!s)
        return lb_error(LB_ERR_MEMORY, "out of memory");
    const lb_csv_options *o = &im->opt;
    const lb_event_schema *like = im->like;
#define DUP(dst, src)                                                                                                 \
    do {                                                                                                              \
        if ((src) && !((dst) = strdup(src)))                                                                          \
            return lb_error(LB_ERR_MEMORY, "out of memory");                                                          \
    } while (0)
    s->n_keys = im->keys.n;
    s->sequence_key = calloc((size_t)(s->n_keys ? s->n_keys : 1), sizeof *s->sequence_key);
    s->features = calloc((size_t)(t->nf ? t->nf : 1), sizeof *s->features);
    s->tokens = calloc((size_t)(t->nt ? t->nt : 1), sizeof *s->tokens);
    im->tok_map = calloc((size_t)(t->nt ? t->nt : 1), sizeof *im->tok_map);
    if (!s->sequence_key || !s->features || !s->tokens || !im->tok_map)
        return lb_error(LB_ERR_MEMORY, "out of memory");
    for (int64_t k = 0; k < s->n_keys; k++)
        DUP(s->sequence_key[k], im->keys.v[k]);
    DUP(s->order_key, like ? like->order_key : o->order_key);
    s->order_as = s->order_key ? im->order_as : LB_ORDER_AUTO;
    DUP(s->label, like ? like->label : o->label);
    DUP(s->source_file, im->file);
    s->label_per = like ? like->label_per : o->label_per;
    s->seq_len = like ? like->seq_len : o->seq_len;
    s->stride = like ? like->stride : o->stride;
    s->split_by = like ? like->split_by : o->split_by;
    s->val_fraction = like ? 0 : o->val_fraction;
    s->test_fraction = like ? 1 : o->test_fraction;
    s->seed = like ? like->seed : o->seed;
    s->missing = like ? like->missing : o->missing;
    s->short_policy = like ? like->short_policy : o->short_policy;
    s->n_features = t->nf;
    for (int64_t c = 0; c < t->nf; c++) {
        lb_event_feature *f = &s->features[c];
        DUP(f->name, im->feats.v[c]);
        double mean = 0, m2 = 0, lo = INFINITY, hi = -INFINITY;
        int64_t count = 0;
        for (int64_t i = 0; i < t->n; i++) {
            double x = t->feat[i * t->nf + c];
            lo = x < lo ? x : lo;
            hi = x > hi ? x : hi;
            if (im->split_of[i] != 0)
                continue;
            double d = x - mean; /* Welford */
            mean += d / (double)++count;
            m2 += d * (x - mean);
        }
        f->min = lo;
        f->max = hi;
        if (like) {
            f->mean = like->features[c].mean;
            f->std = like->features[c].std;
        } else {
            double sd = count > 0 ? sqrt(m2 / (double)count) : 0;
            f->mean = mean;
            f->std = sd > 0 && isfinite(sd) ? sd : 1.0; /* a constant column: scale 1, as StandardScaler */
        }
    }
    s->n_tokens = t->nt;
    s->input_features = t->nf;
    for (int64_t c = 0; c < t->nt; c++) {
        lb_event_tokens *tk = &s->tokens[c];
        const strset *all = &t->tok_values[c];
        DUP(tk->name, im->toks.v[c]);
        im->tok_map[c] = calloc((size_t)(all->n ? all->n : 1), sizeof **im->tok_map);
        if (!im->tok_map[c])
            return lb_error(LB_ERR_MEMORY, "out of memory");
        if (like) { /* the stored map: a value it does not hold is unseen (0) */
            const lb_event_tokens *lt = &like->tokens[c];
            strset known = {0};
            for (int64_t v = 0; v < lt->n_values; v++)
                if (strset_id(&known, lt->values[v], strlen(lt->values[v]), 1, NULL) < 0) {
                    strset_free(&known);
                    return lb_error(LB_ERR_MEMORY, "out of memory");
                }
            for (int64_t id = 0; id < all->n; id++) {
                int64_t k = strset_id(&known, all->s[id], all->len[id], 0, NULL);
                im->tok_map[c][id] = k >= 0 ? k + 1 : 0;
            }
            strset_free(&known);
            tk->n_values = lt->n_values;
            tk->values = calloc((size_t)(lt->n_values ? lt->n_values : 1), sizeof *tk->values);
            if (!tk->values)
                return lb_error(LB_ERR_MEMORY, "out of memory");
            for (int64_t v = 0; v < lt->n_values; v++)
                DUP(tk->values[v], lt->values[v]);
        } else { /* ids 1..k in order of first appearance among the train rows, file order */
            tk->values = calloc((size_t)(all->n ? all->n : 1), sizeof *tk->values);
            if (!tk->values)
                return lb_error(LB_ERR_MEMORY, "out of memory");
            for (int64_t i = 0; i < t->n; i++) {
                int64_t id = t->tok[i * t->nt + c];
                if (im->split_of[i] != 0 || im->tok_map[c][id] != 0)
                    continue;
                DUP(tk->values[tk->n_values], all->s[id]);
                im->tok_map[c][id] = ++tk->n_values;
            }
        }
        s->input_features += tk->n_values + 1;
    }
#undef DUP
    if (s->input_features > (1 << 20))
        return lb_error(LB_ERR_VALUE, "%s: the inputs would have %lld values per row (token columns with too many "
                        "distinct values?): at most %d",
                        im->file, (long long)s->input_features, 1 << 20);
    int32_t top = -1;
    for (int64_t i = 0; i < t->n; i++)
        top = t->label[i] > top ? t->label[i] : top;
    if (like) {
        s->num_classes = like->num_classes;
        for (int64_t i = 0; i < t->n; i++)
            if (t->label[i] >= s->num_classes)
                return lb_error(LB_ERR_FORMAT, "%s: row %lld (line %lld), column '%s': label %d is not a class of the "
                                "trained model (0..%lld)",
                                im->file, (long long)t->row[i], (long long)t->line[i], s->label, t->label[i],
                                (long long)s->num_classes - 1);
    } else {
        if (top < 1)
            return lb_error(LB_ERR_FORMAT, "%s: column '%s': every label is %d, a single class: there is nothing to "
                            "learn (labels are classes 0, 1, ...)",
                            im->file, s->label, top);
        lb_status st = o->num_classes > 0 ? labels_within(im, o->num_classes) : labels_dense(im, top);
        if (st != LB_OK)
            return st;
        s->num_classes = o->num_classes > 0 ? o->num_classes : (int64_t)top + 1;
    }
    s->rows = t->n;
    s->rows_skipped = t->skipped;
    s->sources = im->S;
    return LB_OK;
}

/* Window starts of a segment of n rows: 0, stride, ... and one ending at n. */
static int64_t window_count(int64_t n, int64_t T, int64_t stride)
{
    if (n < T)
        return 0;
    int64_t k = (n - T) / stride + 1;
    return (k - 1) * stride + T < n ? k + 1 : k;
}

static int64_t window_start(int64_t n, int64_t T, int64_t stride, int64_t w)
{
    int64_t s = w * stride;
    return s + T > n ? n - T : s;
}

static lb_status make_windows(import *im)
{
    lb_event_schema *s = im->schema;
    table *t = &im->t;
    int64_t T = s->seq_len, F = s->input_features, stride = s->stride;
    int per_event = s->label_per == LB_LABEL_PER_EVENT;
    im->layout = (lb_layout){.seq_len = T, .features = F, .per_position = per_event};
    for (int k = 0; k < SPLITS; k++) {
        int64_t n_windows = 0, with = 0;
        for (int64_t src = 0; src < im->S; src++) {
            int64_t lo = im->seg_lo[(src * SPLITS + k) * 2], hi = im->seg_lo[(src * SPLITS + k) * 2 + 1];
            if (hi == lo)
                continue;
            int64_t w = window_count(hi - lo, T, stride);
            if (w == 0) {
                s->segments_short++;
                if (s->short_policy == LB_SHORT_REFUSE)
                    return lb_error(LB_ERR_FORMAT, "%s: source '%s' has %lld rows in the %s split, fewer than one window "
                                    "(--seq-len %lld); lower --seq-len, or use --short skip to leave such sources out",
                                    im->file, t->key_text[src], (long long)(hi - lo), split_names[k], (long long)T);
            }
            n_windows += w;
            with += w > 0;
            if (w > 0 && s->n_named[k] < 32) {
                char **v = realloc(s->named[k], (size_t)(s->n_named[k] + 1) * sizeof *v);
                if (!v || !(v[s->n_named[k]] = strdup(t->key_text[src]))) {
                    if (v)
                        s->named[k] = v;
                    return lb_error(LB_ERR_MEMORY, "out of memory");
                }
                s->named[k] = v;
                s->n_named[k]++;
            }
        }
        s->windows[k] = n_windows;
        s->sources_split[k] = with;
        lb_status st = lb_rows_alloc(&im->layout, n_windows, NULL, im->file, &im->rows[k]);
        if (st != LB_OK)
            return st;
        float *x = im->rows[k].data[LB_FIELD_INPUTS];
        int32_t *y = im->rows[k].data[LB_FIELD_TARGETS];
        int64_t w_out = 0;
        for (int64_t src = 0; src < im->S; src++) {
            int64_t lo = im->seg_lo[(src * SPLITS + k) * 2], hi = im->seg_lo[(src * SPLITS + k) * 2 + 1];
            int64_t nw = window_count(hi - lo, T, stride), scored_to = 0; /* rows [0, scored_to) already scored */
            for (int64_t w = 0; w < nw; w++, w_out++) {
                int64_t start = window_start(hi - lo, T, stride, w);
                for (int64_t p = 0; p < T; p++) {
                    int64_t i = im->order[lo + start + p];
                    float *row = x + (w_out * T + p) * F;
                    for (int64_t c = 0; c < t->nf; c++)
                        row[c] = (float)((t->feat[i * t->nf + c] - s->features[c].mean) / s->features[c].std);
                    int64_t off = t->nf;
                    for (int64_t c = 0; c < t->nt; c++) {
                        row[off + im->tok_map[c][t->tok[i * t->nt + c]]] = 1.0f;
                        off += s->tokens[c].n_values + 1;
                    }
                    if (per_event)
                        y[w_out * T + p] = (start + p < scored_to || t->label[i] < 0) ? LB_IGNORE_INDEX : t->label[i];
                }
                if (!per_event) {
                    int32_t last = t->label[im->order[lo + start + T - 1]];
                    y[w_out] = last < 0 ? LB_IGNORE_INDEX : last;
                }
                scored_to = start + T;
            }
        }
    }
    s->train_labels = calloc((size_t)s->num_classes, sizeof *s->train_labels);
    if (!s->train_labels)
        return lb_error(LB_ERR_MEMORY, "out of memory");
    if (im->like) {
        memcpy(s->train_labels, im->like->train_labels, (size_t)s->num_classes * sizeof *s->train_labels);
    } else {
        const int32_t *y = im->rows[0].data[LB_FIELD_TARGETS];
        for (int64_t i = 0; i < im->rows[0].n * (per_event ? T : 1); i++)
            if (y[i] >= 0)
                s->train_labels[y[i]]++;
    }
    if (!im->like && s->windows[0] == 0)
        return lb_error(LB_ERR_FORMAT, "%s: the train split has no window: no source has %lld rows in its train part "
                        "(%lld sources, %lld rows; lower --seq-len or the --val/--test fractions)",
                        im->file, (long long)T, (long long)im->S, (long long)t->n);
    if (im->like && s->windows[2] == 0)
        return lb_error(LB_ERR_FORMAT, "%s: no source has %lld rows (one window of the model's --seq-len): nothing to "
                        "write", im->file, (long long)T);
    return LB_OK;
}

/* ---- writing (in a child process, as every data file) ---- */

typedef struct write_job {
    import *im;
    const char *tmp;
} write_job;

static lb_status write_file(void *ctx)
{
    write_job *job = ctx;
    import *im = job->im;
    const lb_event_schema *s = im->schema;
    hid_t fid = H5Fcreate(job->tmp, H5F_ACC_TRUNC, H5P_DEFAULT, H5P_DEFAULT);
    if (fid < 0)
        return lb_error(LB_ERR_IO, "%s: cannot create the temporary file %s: %s",
                        im->out, job->tmp, lb_h5_cause());
    const char *f = im->out;
    lb_status st = lb_h5_write_attr_string(fid, "task", "events", f);
    if (st == LB_OK)
        st = lb_h5_write_attr_int(fid, "format_version", LB_DATA_FORMAT_VERSION, f);
    if (st == LB_OK)
        st = lb_h5_write_attr_int(fid, "vocab_size", 0, f);
    if (st == LB_OK)
        st = lb_h5_write_attr_int(fid, "num_classes", s->num_classes, f);
    if (st == LB_OK)
        st = lb_h5_write_attr_int(fid, "seq_len", s->seq_len, f);
    if (st == LB_OK)
        st = lb_h5_write_attr_uint(fid, "seed", s->seed, f);
    static const char *const counts[SPLITS] = {"n_train", "n_val", "n_test"};
    for (int k = 0; k < SPLITS && st == LB_OK; k++)
        st = lb_h5_write_attr_int(fid, counts[k], im->rows[k].n, f);
    for (int k = 0; k < SPLITS && st == LB_OK; k++) {
        hid_t dsets[LB_FIELD_COUNT] = {-1, -1, -1, -1};
        hid_t group = lb_h5_create_group(fid, split_names[k]);
        if (group < 0)
            st = lb_error(LB_ERR_IO, "%s: cannot create group /%s", f, split_names[k]);
        for (int fl = 0; st == LB_OK && fl < LB_FIELD_COUNT; fl++)
            if (lb_layout_has(&im->layout, (lb_field)fl))
                st = lb_h5_create_field(group, split_names[k], &im->layout, (lb_field)fl, im->rows[k].n, &dsets[fl], f);
        if (st == LB_OK)
            st = lb_h5_write_rows(dsets, &im->layout, &im->rows[k], 0, f);
        for (int fl = 0; fl < LB_FIELD_COUNT; fl++)
            lb_h5_close(dsets[fl]);
        lb_h5_close(group);
    }
    hid_t events = st == LB_OK ? lb_h5_create_group(fid, "events") : -1;
    if (st == LB_OK && events < 0)
        st = lb_error(LB_ERR_IO, "%s: cannot create group /events", f);
    if (st == LB_OK)
        st = lb_h5_write_bytes(events, "schema", im->schema_json, strlen(im->schema_json), f);
    lb_h5_close(events);
    if (H5Fclose(fid) < 0 && st == LB_OK)
        st = lb_error(LB_ERR_IO, "%s: writing the temporary file %s failed at its end: %s", f, job->tmp, lb_h5_cause());
    if (st == LB_OK) {
        int fd = open(job->tmp, O_RDONLY);
        if (fd < 0 || fsync(fd) != 0)
            st = lb_error(LB_ERR_IO, "%s: cannot flush %s to disk: %s", f, job->tmp, lb_system_error(errno));
        if (fd >= 0)
            close(fd);
    }
    return st;
}

static lb_status write_output(import *im)
{
    const char *path = im->out;
    lb_status st = lb_output_check(path, "data file");
    if (st != LB_OK)
        return st;
    int replace = lb_output_present(path); /* what the user saw there (--force); nothing else is replaced */
    if (!(im->schema_json = lb_event_schema_to_json(im->schema)))
        return lb_last_status();
    write_job job = {im, NULL};
    return lb_h5_write_new(path, "data file", replace, write_file, NULL, &job, &job.tmp);
}

static lb_status import_run(const char *csv_path, const lb_csv_options *opt, const lb_event_schema *like,
                            const char *out_path, lb_event_schema **schema_out)
{
    if (schema_out)
        *schema_out = NULL;
    if (!csv_path || !out_path || (!opt && !like))
        return lb_error(LB_ERR_VALUE, "lb_csv_import: the CSV path, the options and the output path must not be NULL");
    import im;
    memset(&im, 0, sizeof im);
    im.out = out_path;
    im.like = like;
    if (opt)
        im.opt = *opt;
    lb_status st = like ? names_from_schema(&im) : check_options(&im);
    if (st != LB_OK) {
        import_free(&im);
        return st;
    }
    lb_csv_reader *r = lb_csv_open(csv_path, NULL);
    if (!r) {
        import_free(&im);
        return lb_last_status();
    }
    im.file = lb_csv_name(r);
    st = read_header(r, &im.p);
    if (st == LB_OK)
        st = resolve_plan(&im.p, im.file, &im.keys, &im.feats, &im.toks, like ? like->order_key : im.opt.order_key,
                          !like, like ? like->label : im.opt.label, !like);
    if (st == LB_OK)
        st = read_rows(&im, r);
    if (st == LB_OK)
        st = group_and_sort(&im);
    if (st == LB_OK)
        st = assign_splits(&im);
    if (st == LB_OK)
        st = build_schema(&im);
    if (st == LB_OK)
        st = make_windows(&im);
    if (st == LB_OK)
        st = write_output(&im);
    /* the CSV's name lives in the reader: copy what outlives it first */
    if (st == LB_OK && schema_out) {
        *schema_out = im.schema;
        im.schema = NULL;
    }
    if (st != LB_OK) {
        char msg[1024];
        snprintf(msg, sizeof msg, "%s", lb_last_error());
        import_free(&im);
        lb_csv_close(r);
        return lb_error(st, "%s", msg);
    }
    import_free(&im);
    lb_csv_close(r);
    return LB_OK;
}

lb_status lb_csv_import(const char *csv_path, const lb_csv_options *opt, const char *out_path,
                        lb_event_schema **schema_out)
{
    LB_CHECK_ARG(opt, LB_ERR_VALUE);
    return import_run(csv_path, opt, NULL, out_path, schema_out);
}

lb_status lb_csv_import_like(const char *csv_path, const lb_event_schema *like, const char *out_path,
                             lb_event_schema **schema_out)
{
    LB_CHECK_ARG(like, LB_ERR_VALUE);
    return import_run(csv_path, NULL, like, out_path, schema_out);
}

/* ---- reading new rows one at a time ---- */

struct lb_event_reader {
    lb_csv_reader *csv;
    const lb_event_schema *schema;
    names keys, feats, toks;
    plan p;
    table t;         /* one row at a time: its sources and per-source last values */
    strset *known;   /* [nt] the schema's token values */
    float *out;      /* [F] */
    int64_t skipped;
};

void lb_event_reader_close(lb_event_reader *r)
{
    if (!r)
        return;
    lb_csv_close(r->csv);
    names_free(&r->keys);
    names_free(&r->feats);
    names_free(&r->toks);
    plan_free(&r->p);
    for (int64_t c = 0; r->known && c < r->t.nt; c++)
        strset_free(&r->known[c]);
    free(r->known);
    table_free(&r->t);
    free(r->out);
    free(r);
}

lb_event_reader *lb_event_reader_open(const char *path, const lb_event_schema *schema)
{
    if (!path || !schema) {
        lb_error(LB_ERR_VALUE, "lb_event_reader_open: path and schema must not be NULL");
        return NULL;
    }
    lb_event_reader *r = calloc(1, sizeof *r);
    if (!r) {
        lb_error(LB_ERR_MEMORY, "out of memory");
        return NULL;
    }
    r->schema = schema;
    import im;
    memset(&im, 0, sizeof im);
    im.like = schema;
    lb_status st = names_from_schema(&im);
    r->keys = im.keys;
    r->feats = im.feats;
    r->toks = im.toks;
    r->csv = st == LB_OK ? lb_csv_open(path, NULL) : NULL;
    if (st == LB_OK && !r->csv)
        st = lb_last_status();
    if (st == LB_OK)
        st = read_header(r->csv, &r->p);
    if (st == LB_OK)
        st = resolve_plan(&r->p, lb_csv_name(r->csv), &r->keys, &r->feats, &r->toks, NULL, 0, schema->label, 0);
    r->t.nf = schema->n_features;
    r->t.nt = schema->n_tokens;
    r->t.order_numeric = 1;
    r->t.tok_values = st == LB_OK ? calloc((size_t)(r->t.nt ? r->t.nt : 1), sizeof *r->t.tok_values) : NULL;
    r->known = r->t.tok_values ? calloc((size_t)(r->t.nt ? r->t.nt : 1), sizeof *r->known) : NULL;
    r->out = r->known ? calloc((size_t)schema->input_features, sizeof *r->out) : NULL;
    if (st == LB_OK && !r->out)
        st = lb_error(LB_ERR_MEMORY, "out of memory");
    for (int64_t c = 0; st == LB_OK && c < r->t.nt; c++)
        for (int64_t v = 0; v < schema->tokens[c].n_values && st == LB_OK; v++)
            if (strset_id(&r->known[c], schema->tokens[c].values[v], strlen(schema->tokens[c].values[v]), 1, NULL) != v)
                st = lb_error(LB_ERR_MEMORY, "out of memory");
    if (st != LB_OK) {
        lb_event_reader_close(r);
        return NULL;
    }
    return r;
}

int lb_event_reader_next(lb_event_reader *r, lb_event_row *row)
{
    if (!r || !row) {
        lb_error(LB_ERR_VALUE, "lb_event_reader_next: reader and row must not be NULL");
        return -1;
    }
    const lb_event_schema *s = r->schema;
    table *t = &r->t;
    for (;;) {
        lb_csv_record rec;
        int got = lb_csv_next(r->csv, &rec);
        if (got <= 0)
            return got;
        /* One row at a time: the table holds only this one (its sources stay). */
        t->n = 0;
        int64_t before = t->skipped;
        lb_status st = take_row(t, &r->p, lb_csv_name(r->csv), &rec, s->missing, r->p.label_col >= 0);
        if (st != LB_OK)
            return -1;
        if (t->skipped > before) {
            r->skipped++;
            continue;
        }
        float *out = r->out;
        memset(out, 0, (size_t)s->input_features * sizeof *out);
        for (int64_t c = 0; c < t->nf; c++)
            out[c] = (float)((t->feat[c] - s->features[c].mean) / s->features[c].std);
        int64_t off = t->nf, unseen = 0;
        for (int64_t c = 0; c < t->nt; c++) {
            const strset *vals = &t->tok_values[c];
            int64_t id = t->tok[c];
            /* the value's text: this row's own, or the carried one (missing previous) */
            int64_t k = id < vals->n ? strset_id(&r->known[c], vals->s[id], vals->len[id], 0, NULL) : -2;
            out[off + (k >= 0 ? k + 1 : 0)] = 1.0f;
            unseen += k < 0;
            off += s->tokens[c].n_values + 1;
        }
        if (t->label[0] >= s->num_classes) {
            lb_error(LB_ERR_FORMAT, "%s: row %lld (line %lld), column '%s': label %d is not a class of the model (0..%lld)",
                     lb_csv_name(r->csv), (long long)rec.row, (long long)rec.line, s->label, t->label[0],
                     (long long)s->num_classes - 1);
            return -1;
        }
        row->source = t->source[0];
        row->key = t->key_text[t->source[0]];
        row->features = out;
        row->label = t->label[0];
        row->row = rec.row;
        row->line = rec.line;
        row->unseen = unseen;
        return 1;
    }
}

int64_t lb_event_reader_sources(const lb_event_reader *r)
{
    LB_CHECK_ARG(r, -1);
    return r->t.keys.n;
}
int64_t lb_event_reader_skipped(const lb_event_reader *r)
{
    LB_CHECK_ARG(r, -1);
    return r->skipped;
}

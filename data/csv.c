/* CSV records on libcsv (RFC 4180), fed one line at a time so that every record knows
 * the line it starts on, and a pipe is read as its lines arrive. */
#include "data/csv.h"

#include <csv.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

enum {
    FIELD_MAX = 1 << 24,   /* bytes of one field */
    FIELDS_MAX = 1 << 20,  /* fields of one record */
    RECORD_MAX = 1 << 26,  /* bytes of one record's fields */
    CHUNK = 1 << 16,       /* bytes fed at once: a line, or a part of a long line */
    ROW_NOT_BEGUN = 0      /* libcsv's parser state between records (csv_parser.pstate) */
};

/* A record being built or waiting to be returned. */
typedef struct pending {
    int64_t n, cap;
    char **field;
    size_t *len;
    int64_t row, line, offset;
    size_t bytes; /* of its fields so far */
} pending;

struct lb_csv_reader {
    FILE *in;
    int own; /* close `in` at the end */
    char *name;
    struct csv_parser parser;
    char *line;       /* [CHUNK] the bytes being fed */
    int mid_line;     /* the last chunk ended inside a line (a line longer than CHUNK) */
    int64_t line_no;  /* lines fed so far */
    int64_t offset;   /* bytes fed so far */
    int64_t rows;     /* records completed */
    int64_t start_line, start_offset; /* where the record being parsed starts */
    pending building;
    pending *queue;   /* completed records not yet returned */
    int64_t queued, queue_cap, queue_head;
    pending current;  /* the record last returned (owned until the next call) */
    int eof, failed;
    char error[512];  /* the first error met in a callback */
};

static void pending_clear(pending *p)
{
    for (int64_t i = 0; i < p->n; i++)
        free(p->field[i]);
    p->n = 0;
}

static void pending_free(pending *p)
{
    pending_clear(p);
    free(p->field);
    free(p->len);
    memset(p, 0, sizeof *p);
}

static void fail(lb_csv_reader *r, const char *fmt, int64_t a)
{
    if (!r->failed) {
        r->failed = 1;
        snprintf(r->error, sizeof r->error, fmt, (long long)a);
    }
}

static void on_field(void *s, size_t len, void *data)
{
    lb_csv_reader *r = data;
    if (r->failed)
        return;
    pending *p = &r->building;
    if (p->n == 0) {
        p->line = r->start_line;
        p->offset = r->start_offset;
    }
    if (s && memchr(s, '\0', len)) {
        fail(r, "field %lld holds a NUL byte (not text)", p->n + 1);
        return;
    }
    p->bytes += len;
    if (p->bytes > RECORD_MAX) {
        fail(r, "a row longer than %lld bytes", RECORD_MAX);
        return;
    }
    if (p->n >= FIELDS_MAX) {
        fail(r, "more than %lld fields in one row", FIELDS_MAX);
        return;
    }
    if (p->n == p->cap) {
        int64_t cap = p->cap ? 2 * p->cap : 16;
        char **f = realloc(p->field, (size_t)cap * sizeof *f);
        if (f)
            p->field = f;
        size_t *l = f ? realloc(p->len, (size_t)cap * sizeof *l) : NULL;
        if (!l) {
            fail(r, "out of memory at field %lld", p->n + 1);
            return;
        }
        p->len = l;
        p->cap = cap;
    }
    char *copy = malloc(len + 1);
    if (!copy) {
        fail(r, "out of memory at field %lld", p->n + 1);
        return;
    }
    if (len)
        memcpy(copy, s, len);
    copy[len] = '\0';
    p->field[p->n] = copy;
    p->len[p->n] = len;
    p->n++;
}

static void on_record(int c, void *data)
{
    lb_csv_reader *r = data;
    (void)c;
    if (r->failed)
        return;
    pending *p = &r->building;
    if (p->n == 0) /* libcsv reports no empty record, but be sure */
        return;
    if (r->queued + r->queue_head == r->queue_cap) {
        if (r->queue_head > 0) {
            memmove(r->queue, r->queue + r->queue_head, (size_t)r->queued * sizeof *r->queue);
            r->queue_head = 0;
        } else {
            int64_t cap = r->queue_cap ? 2 * r->queue_cap : 4;
            pending *q = realloc(r->queue, (size_t)cap * sizeof *q);
            if (!q) {
                fail(r, "out of memory at row %lld", r->rows + 1);
                return;
            }
            r->queue = q;
            r->queue_cap = cap;
        }
    }
    p->row = ++r->rows;
    r->queue[r->queue_head + r->queued++] = *p;
    memset(p, 0, sizeof *p);
    /* A next record on the same line (a bare CR ends a record) starts here too. */
    p->line = r->start_line;
}

static lb_csv_reader *reader_new(FILE *in, int own, const char *name)
{
    lb_csv_reader *r = calloc(1, sizeof *r);
    if (!r || !(r->name = strdup(name))) {
        free(r);
        lb_error(LB_ERR_MEMORY, "%s: out of memory", name);
        return NULL;
    }
    r->in = in;
    r->own = own;
    if (!(r->line = malloc(CHUNK))) {
        free(r->name);
        free(r);
        lb_error(LB_ERR_MEMORY, "%s: out of memory", name);
        return NULL;
    }
    if (csv_init(&r->parser, CSV_STRICT | CSV_STRICT_FINI | CSV_APPEND_NULL) != 0) {
        free(r->line);
        free(r->name);
        free(r);
        lb_error(LB_ERR_MEMORY, "%s: out of memory", name);
        return NULL;
    }
    /* libcsv grows a field's buffer by this many bytes at a time (128 by default): a long
     * field then costs one realloc per 128 bytes, copying the whole buffer each time when
     * realloc cannot grow in place. */
    csv_set_blk_size(&r->parser, CHUNK);
    return r;
}

lb_csv_reader *lb_csv_open(const char *path, const char *name)
{
    if (!path) {
        lb_error(LB_ERR_VALUE, "lb_csv_open: path is NULL");
        return NULL;
    }
    if (strcmp(path, "-") == 0)
        return reader_new(stdin, 0, name ? name : "standard input");
    if (!name)
        name = path;
    struct stat sb;
    if (stat(path, &sb) != 0) {
        lb_error(LB_ERR_IO, "%s: cannot open: %s", name, lb_system_error(errno));
        return NULL;
    }
    if (S_ISDIR(sb.st_mode)) {
        lb_error(LB_ERR_IO, "%s: is a folder, not a CSV file", name);
        return NULL;
    }
    FILE *in = fopen(path, "rb");
    if (!in) {
        lb_error(LB_ERR_IO, "%s: cannot open: %s", name, lb_system_error(errno));
        return NULL;
    }
    lb_csv_reader *r = reader_new(in, 1, name);
    if (!r)
        fclose(in);
    return r;
}

lb_csv_reader *lb_csv_open_stream(FILE *in, const char *name)
{
    if (!in || !name) {
        lb_error(LB_ERR_VALUE, "lb_csv_open_stream: in and name must not be NULL");
        return NULL;
    }
    return reader_new(in, 0, name);
}

void lb_csv_close(lb_csv_reader *r)
{
    if (!r)
        return;
    csv_free(&r->parser);
    if (r->own && r->in)
        fclose(r->in);
    pending_free(&r->building);
    pending_free(&r->current);
    for (int64_t i = 0; i < r->queued; i++)
        pending_free(&r->queue[r->queue_head + i]);
    free(r->queue);
    free(r->line);
    free(r->name);
    free(r);
}

const char *lb_csv_name(const lb_csv_reader *r)
{
    LB_CHECK_ARG(r, "(null)");
    return r->name;
}

static int report(lb_csv_reader *r)
{
    lb_error(LB_ERR_FORMAT, "%s: row %lld (line %lld): %s", r->name, (long long)r->rows + 1,
             (long long)(r->building.n ? r->building.line : r->start_line), r->error);
    return -1;
}

/* Reads up to CHUNK bytes, through the next line break: memory stays bounded whatever a
 * line holds (NUL bytes included). -1 at the end of the input before any byte. */
static ssize_t read_chunk(lb_csv_reader *r)
{
    ssize_t n = 0;
    int c = 0;
    while (n < CHUNK && (c = getc(r->in)) != EOF) {
        r->line[n++] = (char)c;
        if (c == '\n')
            break;
    }
    return n > 0 ? n : -1;
}

/* Feeds the next line (or part of a long line); 0 at the end of the input, -1 on error. */
static int feed_line(lb_csv_reader *r)
{
    errno = 0;
    ssize_t got = read_chunk(r);
    if (got < 0) {
        if (ferror(r->in)) {
            lb_error(LB_ERR_IO, "%s: read error after line %lld: %s", r->name, (long long)r->line_no,
                     errno ? lb_system_error(errno) : "unknown error");
            return -1;
        }
        r->eof = 1;
        if (csv_fini(&r->parser, on_field, on_record, r) != 0 && !r->failed)
            fail(r, "a quoted field is still open at the end of the file (a missing closing quote)", 0);
        return r->failed ? report(r) : 0;
    }
    const char *s = r->line;
    size_t len = (size_t)got;
    if (r->offset == 0 && len >= 3 && memcmp(s, "\xEF\xBB\xBF", 3) == 0) { /* UTF-8 byte-order mark */
        s += 3;
        len -= 3;
    }
    if (!r->mid_line) { /* a new line of the file begins */
        r->line_no++;
        if (r->parser.pstate == ROW_NOT_BEGUN && r->building.n == 0) {
            r->start_line = r->line_no;
            r->start_offset = r->offset;
        }
    }
    r->mid_line = len > 0 && s[len - 1] != '\n';
    size_t done = csv_parse(&r->parser, s, len, on_field, on_record, r);
    r->offset += got;
    if (!r->failed && done != len)
        fail(r, csv_error(&r->parser) == CSV_EPARSE
                    ? "malformed CSV: a quote inside an unquoted field, or text after a closing quote (RFC 4180: "
                      "quote the whole field and double the quotes inside it)"
                    : "out of memory while parsing",
             0);
    if (!r->failed && r->parser.entry_pos > FIELD_MAX)
        fail(r, "a field longer than %lld bytes", FIELD_MAX);
    return r->failed ? report(r) : 1;
}

int lb_csv_next(lb_csv_reader *r, lb_csv_record *rec)
{
    if (!r || !rec) {
        lb_error(LB_ERR_VALUE, "lb_csv_next: reader and record must not be NULL");
        return -1;
    }
    pending_free(&r->current);
    while (r->queued == 0) {
        if (r->eof || r->failed) {
            if (r->failed)
                return report(r);
            return 0;
        }
        int f = feed_line(r);
        if (f < 0)
            return -1;
        if (f == 0 && r->queued == 0)
            return 0;
    }
    r->current = r->queue[r->queue_head++];
    r->queued--;
    if (r->queued == 0)
        r->queue_head = 0;
    rec->n_fields = r->current.n;
    rec->field = r->current.field;
    rec->len = r->current.len;
    rec->row = r->current.row;
    rec->line = r->current.line;
    rec->offset = r->current.offset;
    return 1;
}

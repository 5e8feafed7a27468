/* Reading CSV files (RFC 4180) record by record, on Debian's libcsv.
 *
 * A record is one row of the file: fields separated by commas, a field may be quoted
 * with double quotes (a quoted field holds commas, line breaks and doubled quotes ""),
 * rows end with LF or CRLF (a last row without a line break is a row too). Blank lines
 * are skipped. A UTF-8 byte-order mark at the start of the file is skipped. The parser
 * is strict: a quote inside an unquoted field, text after a closing quote or a quoted
 * field still open at the end of the file is an error naming the row and line. A NUL
 * byte in a field is refused (no text value holds one).
 *
 * Positions: `row` counts records from 1 (the header is row 1, the first data row
 * row 2, as a spreadsheet numbers them); `line` is the line of the file where the
 * record starts (they differ after a field with an embedded line break, or blank
 * lines); `offset` the byte offset of that line's start.
 *
 * Memory: one record at a time plus libcsv's field buffer, fed in chunks of at most
 * 64 KiB (a line, or a part of a longer one); a file is never held whole, so standard
 * input and pipes (a live log) are read as they arrive. A field longer than 16 MiB, a row
 * whose fields hold more than 64 MiB, or more than 2^20 fields in a row is an error naming
 * the row (LB_ERR_FORMAT), before more memory is taken. A bare CR ends a row too (libcsv).
 */
#ifndef LB_DATA_CSV_H
#define LB_DATA_CSV_H

#include "tensor/api.h"

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "tensor/error.h"

LB_API_BEGIN

typedef struct lb_csv_reader lb_csv_reader;

/* One record: n_fields NUL-terminated fields (field[i] has length len[i]), valid until
 * the next call on the reader. */
typedef struct lb_csv_record {
    int64_t n_fields;
    char **field;
    size_t *len;
    int64_t row;    /* record number from 1 (header = row 1) */
    int64_t line;   /* line where the record starts, from 1 */
    int64_t offset; /* byte offset of that line */
} lb_csv_record;

/* Opens `path` ("-" = standard input) for reading; `name` is how messages call the
 * file (NULL: the path, or "standard input"). Errors (NULL): LB_ERR_IO naming the
 * file (missing, unreadable, a folder), LB_ERR_MEMORY. */
lb_csv_reader *lb_csv_open(const char *path, const char *name);
/* A reader over an open stream (not closed by lb_csv_close). */
lb_csv_reader *lb_csv_open_stream(FILE *in, const char *name);
void lb_csv_close(lb_csv_reader *r);
/* The name messages use for the file. */
const char *lb_csv_name(const lb_csv_reader *r);

/* The next record into *rec: 1 with a record, 0 at the end of the file, -1 on error
 * (LB_ERR_FORMAT "FILE: row R (line L): ..." for malformed CSV or a NUL byte,
 * LB_ERR_IO for a read error, LB_ERR_MEMORY). */
int lb_csv_next(lb_csv_reader *r, lb_csv_record *rec);

LB_API_END

#endif

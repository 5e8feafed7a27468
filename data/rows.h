/* Internal to data/: the layout of one example and blocks of examples in memory.
 *
 * The generator, the reader and the loader share one description of what an example
 * holds, so there is one writer, one reader and one gather for every dataset:
 *
 *   field     present            dtype    shape of one example
 *   inputs    always             int32    [T]      (token tasks, F == 0)
 *                                float32  [T, F]   (real-valued tasks)
 *   targets   always             int32    []       (one label per sequence)
 *                                int32    [T]      (per position, -100 ignored)
 *                                float32  []       (regression)
 *   distance  has_distance       int32    []
 *   lengths   has_lengths        int32    []
 *
 * Every element is 4 bytes. A block of N examples stores each field row-major with N
 * as its leading dimension.
 */
#ifndef LB_DATA_ROWS_H
#define LB_DATA_ROWS_H

#include <stdint.h>

#include "tensor/error.h"

typedef enum lb_field {
    LB_FIELD_INPUTS = 0,
    LB_FIELD_TARGETS,
    LB_FIELD_DISTANCE,
    LB_FIELD_LENGTHS,
    LB_FIELD_COUNT
} lb_field;

typedef struct lb_layout {
    int64_t seq_len;  /* T */
    int64_t features; /* F; 0 for token inputs */
    int per_position; /* targets [T] per example */
    int regression;   /* targets float32 */
    int has_distance;
    int has_lengths;
} lb_layout;

/* Dataset name of a field within a split group: "inputs", "targets", ... */
const char *lb_field_name(lb_field field);
/* 1 if the layout stores `field`. */
int lb_layout_has(const lb_layout *layout, lb_field field);
/* 1 if the field is float32, 0 if int32. */
int lb_layout_is_float(const lb_layout *layout, lb_field field);
/* Dimensions of `field` for n examples into dims (3 entries); returns the rank. */
int lb_layout_dims(const lb_layout *layout, lb_field field, int64_t n, int64_t *dims);
/* Elements of `field` per example (T, T*F or 1). */
int64_t lb_layout_row_elems(const lb_layout *layout, lb_field field);

/* A block of n examples; data[f] is NULL for absent fields. */
typedef struct lb_rows {
    int64_t n;
    void *data[LB_FIELD_COUNT];
    unsigned owned; /* bit f set: data[f] is freed by lb_rows_free */
} lb_rows;

/* Allocates every present field for n examples (zeroed). When `inputs` is not NULL
 * it is used (not owned) as the inputs buffer. LB_ERR_MEMORY (naming `what`) when
 * the size overflows or allocation fails. */
lb_status lb_rows_alloc(const lb_layout *layout, int64_t n, void *inputs, const char *what, lb_rows *out);
void lb_rows_free(lb_rows *rows);
/* Copies `count` examples src[src_row ...] into dst[dst_row ...], every field. */
void lb_rows_copy(const lb_layout *layout, lb_rows *dst, int64_t dst_row, const lb_rows *src, int64_t src_row,
                  int64_t count);
/* Pointer to example `row` of `field` (as int32/float, 4-byte elements). */
void *lb_rows_at(const lb_layout *layout, const lb_rows *rows, lb_field field, int64_t row);

/* Sends (send 1) or receives (0) all `size` bytes at buf over stream socket fd
 * (MSG_NOSIGNAL: a closed peer gives an error, not SIGPIPE). 0 on success, -1 when
 * the peer went away or on a timeout (SO_RCVTIMEO). */
int lb_transfer_bytes(int fd, void *buf, size_t size, int send_side);
/* lb_transfer_bytes of every present field of rows->n examples. */
int lb_rows_transfer(int fd, const lb_layout *layout, lb_rows *rows, int send_side);

#endif

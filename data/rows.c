#include "data/rows.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>

enum { ELEM_BYTES = 4 }; /* int32 and float32 alike */

const char *lb_field_name(lb_field field)
{
    static const char *const names[LB_FIELD_COUNT] = {"inputs", "targets", "distance", "lengths"};
    return (field >= 0 && field < LB_FIELD_COUNT) ? names[field] : "?";
}

int lb_layout_has(const lb_layout *layout, lb_field field)
{
    switch (field) {
    case LB_FIELD_INPUTS:
    case LB_FIELD_TARGETS: return 1;
    case LB_FIELD_DISTANCE: return layout->has_distance;
    case LB_FIELD_LENGTHS: return layout->has_lengths;
    default: return 0;
    }
}

int lb_layout_is_float(const lb_layout *layout, lb_field field)
{
    if (field == LB_FIELD_INPUTS)
        return layout->features > 0;
    if (field == LB_FIELD_TARGETS)
        return layout->regression;
    return 0;
}

int lb_layout_dims(const lb_layout *layout, lb_field field, int64_t n, int64_t *dims)
{
    dims[0] = n;
    if (field == LB_FIELD_INPUTS) {
        dims[1] = layout->seq_len;
        dims[2] = layout->features;
        return layout->features > 0 ? 3 : 2;
    }
    if (field == LB_FIELD_TARGETS && layout->per_position) {
        dims[1] = layout->seq_len;
        return 2;
    }
    return 1;
}

int64_t lb_layout_row_elems(const lb_layout *layout, lb_field field)
{
    int64_t dims[3];
    int rank = lb_layout_dims(layout, field, 1, dims);
    int64_t n = 1;
    for (int i = 1; i < rank; i++)
        n *= dims[i];
    return n;
}

lb_status lb_rows_alloc(const lb_layout *layout, int64_t n, void *inputs, const char *what, lb_rows *out)
{
    memset(out, 0, sizeof *out);
    out->n = n;
    for (int f = 0; f < LB_FIELD_COUNT; f++) {
        if (!lb_layout_has(layout, (lb_field)f))
            continue;
        if (f == LB_FIELD_INPUTS && inputs) {
            out->data[f] = inputs;
            continue;
        }
        int64_t per_row = lb_layout_row_elems(layout, (lb_field)f);
        size_t count = (size_t)(n > 0 ? n : 1);
        if (per_row > 0 && count > SIZE_MAX / ELEM_BYTES / (size_t)per_row) {
            lb_rows_free(out);
            return lb_error(LB_ERR_MEMORY, "%s: %s of %lld examples is too large for memory", what,
                            lb_field_name((lb_field)f), (long long)n);
        }
        out->data[f] = calloc(count * (size_t)per_row + 1, ELEM_BYTES);
        if (!out->data[f]) {
            lb_rows_free(out);
            return lb_error(LB_ERR_MEMORY, "%s: out of memory for %s of %lld examples (%lld bytes)", what,
                            lb_field_name((lb_field)f), (long long)n, (long long)(n * per_row * ELEM_BYTES));
        }
        out->owned |= 1u << f;
    }
    return LB_OK;
}

void lb_rows_free(lb_rows *rows)
{
    for (int f = 0; f < LB_FIELD_COUNT; f++)
        if (rows->owned & (1u << f))
            free(rows->data[f]);
    memset(rows, 0, sizeof *rows);
}

void *lb_rows_at(const lb_layout *layout, const lb_rows *rows, lb_field field, int64_t row)
{
    char *base = rows->data[field];
    return base ? base + (size_t)row * (size_t)lb_layout_row_elems(layout, field) * ELEM_BYTES : NULL;
}

void lb_rows_copy(const lb_layout *layout, lb_rows *dst, int64_t dst_row, const lb_rows *src, int64_t src_row,
                  int64_t count)
{
    for (int f = 0; f < LB_FIELD_COUNT; f++) {
        if (!lb_layout_has(layout, (lb_field)f))
            continue;
        size_t bytes = (size_t)count * (size_t)lb_layout_row_elems(layout, (lb_field)f) * ELEM_BYTES;
        memcpy(lb_rows_at(layout, dst, (lb_field)f, dst_row), lb_rows_at(layout, src, (lb_field)f, src_row), bytes);
    }
}

int lb_transfer_bytes(int fd, void *buf, size_t size, int send_side)
{
    char *p = buf;
    while (size > 0) {
        ssize_t n = send_side ? send(fd, p, size, MSG_NOSIGNAL) : recv(fd, p, size, MSG_WAITALL);
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0)
            return -1;
        p += n;
        size -= (size_t)n;
    }
    return 0;
}

int lb_rows_transfer(int fd, const lb_layout *layout, lb_rows *rows, int send_side)
{
    for (int f = 0; f < LB_FIELD_COUNT; f++) {
        if (!lb_layout_has(layout, (lb_field)f))
            continue;
        size_t bytes = (size_t)(rows->n * lb_layout_row_elems(layout, (lb_field)f)) * 4;
        if (lb_transfer_bytes(fd, rows->data[f], bytes, send_side) != 0)
            return -1;
    }
    return 0;
}

/* Internal to data/: checked HDF5 calls. Each returns LB_OK or an lb_error whose
 * message names the file, the object and what was expected versus found. All calls
 * are meant to run between lb_h5_quiet_begin and lb_h5_quiet_end, which silence the
 * printing of HDF5's own error stack. */
#ifndef LB_DATA_H5IO_H
#define LB_DATA_H5IO_H

#include <hdf5.h>
#include <stddef.h>
#include <stdint.h>

#include "data/rows.h"
#include "tensor/error.h"

typedef struct lb_h5_quiet {
    H5E_auto2_t func;
    void *data;
} lb_h5_quiet;

/* Saves the current HDF5 error printer and disables it; _end restores it. */
void lb_h5_quiet_begin(lb_h5_quiet *saved);
void lb_h5_quiet_end(const lb_h5_quiet *saved);

/* Closes any HDF5 identifier if valid (>= 0). */
void lb_h5_close(hid_t id);

/* ---- writing ---- */
lb_status lb_h5_write_attr_int(hid_t loc, const char *name, int64_t value, const char *file);
lb_status lb_h5_write_attr_uint(hid_t loc, const char *name, uint64_t value, const char *file);
lb_status lb_h5_write_attr_real(hid_t loc, const char *name, double value, const char *file);
lb_status lb_h5_write_attr_string(hid_t loc, const char *name, const char *value, const char *file);

/* Creates group `name` without timestamps; < 0 on failure. */
hid_t lb_h5_create_group(hid_t loc, const char *name);
/* Creates dataset `field` of n examples in `group` (chunked by whole examples,
 * shuffle + deflate). *out receives the dataset id. */
lb_status lb_h5_create_field(hid_t group, const char *group_name, const lb_layout *layout, lb_field field, int64_t n,
                             hid_t *out, const char *file);
/* Writes rows (rows->n examples) at example offset `start` into every dataset of
 * dsets[LB_FIELD_COUNT] (absent fields have dsets[f] < 0). */
lb_status lb_h5_write_rows(const hid_t *dsets, const lb_layout *layout, const lb_rows *rows, int64_t start,
                           const char *file);

/* ---- reading ---- */
/* Reads a scalar integer attribute; LB_ERR_FORMAT when missing or not an integer. */
lb_status lb_h5_read_attr_int(hid_t loc, const char *name, int64_t *out, const char *file);
lb_status lb_h5_read_attr_uint(hid_t loc, const char *name, uint64_t *out, const char *file);
/* Reads a scalar integer or float attribute as double. */
lb_status lb_h5_read_attr_real(hid_t loc, const char *name, double *out, const char *file);
/* Reads a scalar string attribute (fixed or variable length) into buf. */
lb_status lb_h5_read_attr_string(hid_t loc, const char *name, char *buf, size_t size, const char *file);
/* 1 if attribute / link `name` exists under loc, 0 if not. */
int lb_h5_has_attr(hid_t loc, const char *name);
int lb_h5_has_link(hid_t loc, const char *name);

/* What a dataset holds: class (H5T_INTEGER, H5T_FLOAT, ...), element size, rank and
 * dims. "int32", "float64", "string" ... into `name`. */
typedef struct lb_h5_info {
    H5T_class_t type_class;
    size_t type_size;
    int is_signed;
    int rank;
    int64_t dims[H5S_MAX_RANK];
    char type_name[32];
} lb_h5_info;
lb_status lb_h5_dataset_info(hid_t dset, const char *where, lb_h5_info *out, const char *file);
/* Formats "float32 [4, 16]" from an info into buf; returns buf. */
char *lb_h5_info_str(const lb_h5_info *info, char *buf, size_t size);
/* Reads the whole dataset converted to int32 (is_float 0) or float32 (1). */
lb_status lb_h5_read_all(hid_t dset, int is_float, void *buf, const char *where, const char *file);
/* Reads rows [start, start + count) along the first dimension (all of the others)
 * converted to memory type `mtype` (e.g. H5T_NATIVE_INT64, H5T_NATIVE_DOUBLE). */
lb_status lb_h5_read_rows(hid_t dset, hid_t mtype, int64_t start, int64_t count, void *buf, const char *where,
                          const char *file);

#endif

/* Internal to data/: writing example rows (data/rows.h) into the datasets of a data
 * file, with the checked calls of data/h5io.h, and finishing the temporary file a data
 * file is written to. */
#ifndef LB_DATA_H5IO_INTERNAL_H
#define LB_DATA_H5IO_INTERNAL_H

#include "data/h5io.h"
#include "data/rows.h"

/* Creates dataset `field` of n examples in `group` (chunked by whole examples,
 * shuffle + deflate). *out receives the dataset id. */
lb_status lb_h5_create_field(hid_t group, const char *group_name, const lb_layout *layout, lb_field field, int64_t n,
                             hid_t *out, const char *file);
/* Writes rows (rows->n examples) at example offset `start` into every dataset of
 * dsets[LB_FIELD_COUNT] (absent fields have dsets[f] < 0). */
lb_status lb_h5_write_rows(const hid_t *dsets, const lb_layout *layout, const lb_rows *rows, int64_t start,
                           const char *file);

/* The end of writing data file `file` into its temporary file `tmp` (renamed over `file`
 * afterwards): closes fid and flushes tmp to disk. Returns st when it is not LB_OK (fid
 * is still closed); else LB_ERR_IO naming both files and the cause when the close or
 * the flush fails, or LB_OK. */
lb_status lb_h5_finish_temporary(hid_t fid, const char *tmp, const char *file, lb_status st);

#endif

/* Output paths: what every writer of lookback (data files, checkpoints, metrics.csv,
 * config.json, reports, plots, evaluation outputs) checks before it creates a file.
 *
 * A writer only ever creates or replaces regular files. Whatever else is at the path
 * (a device such as /dev/null, a FIFO, a socket, a folder) is refused with a message
 * and left alone, also at the moment a finished temporary file is renamed into place.
 */
#ifndef LB_DATA_OUTPUT_H
#define LB_DATA_OUTPUT_H

#include "tensor/api.h"

#include "tensor/error.h"

LB_API_BEGIN

/* Checks that `path` may be written: not NULL or empty (LB_ERR_VALUE), and either
 * absent or a regular file (a symbolic link is judged by what it points to);
 * otherwise LB_ERR_IO "PATH: is a device / FIFO / socket / folder, not a regular
 * file; lookback writes only regular files". The same for its temporary sibling
 * PATH.tmp, which writers create first. `what` names the file in messages
 * ("checkpoint", "data file", ...). */
lb_status lb_output_check(const char *path, const char *what);

/* Renames the finished temporary file `tmp` onto `path` after checking `path` again
 * (lb_output_check); on any failure removes `tmp` and returns LB_ERR_IO naming both
 * (or the check's error). */
lb_status lb_output_commit(const char *tmp, const char *path, const char *what);

LB_API_END

#endif

/* Status codes and error messages shared by every lookback module.
 *
 * Library functions never exit or abort on bad input: they return an lb_status
 * (or NULL) and leave one message, naming the operation, the shapes involved and
 * a hint, in a thread-local buffer read with lb_last_error(). An optional handler
 * (lb_set_error_handler) sees every message as it is raised, in the manner of
 * Torch7's THSetErrorHandler.
 */
#ifndef LB_ERROR_H
#define LB_ERROR_H

#include "tensor/api.h"

#include <stddef.h>
#include <stdint.h>

LB_API_BEGIN

typedef enum lb_status {
    LB_OK = 0,
    LB_ERR_SHAPE,   /* shapes do not fit the operation */
    LB_ERR_DTYPE,   /* dtypes differ or are not supported */
    LB_ERR_VALUE,   /* an argument is out of its valid range */
    LB_ERR_MEMORY,  /* an allocation failed */
    LB_ERR_STATE,   /* the call is not valid in the current state (e.g. backward twice) */
    LB_ERR_IO,      /* a file could not be opened, read or written */
    LB_ERR_FORMAT,  /* a file was read but its contents are invalid */
    LB_ERR_NUMERIC  /* a non-finite value where a finite one is required */
} lb_status;

/* Short name of a status, e.g. "shape error". Never NULL. */
const char *lb_status_name(lb_status status);

/* Records `status` and a printf-style message as the current thread's last error
 * and returns `status`, so callers can write `return lb_error(LB_ERR_SHAPE, ...)`. */
lb_status lb_error(lb_status status, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));

/* Prepends "context: " to the current message (used to add where an error arose,
 * e.g. the layer name) and returns the current status. */
lb_status lb_error_context(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

/* The last error message of this thread ("" if none) and its status. */
const char *lb_last_error(void);
lb_status lb_last_status(void);
void lb_clear_error(void);

/* Called with every error as it is raised (NULL restores the default: no call). */
typedef void (*lb_error_handler)(lb_status status, const char *message, void *user);
void lb_set_error_handler(lb_error_handler handler, void *user);

/* Formats a shape as "[2, 3, 4]" into buf (always NUL-terminated); returns buf. */
char *lb_shape_str(int ndim, const int64_t *shape, char *buf, size_t size);

LB_API_END

#endif

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

/* The operating system's words for errno value `err` (strerror), with what it means for
 * a writer where that is not plain: ENOSPC "No space left on device (the disk is full)",
 * EFBIG "File too large (over the file-size limit of this process, ulimit -f)", EDQUOT
 * "... (over the disk quota)". Never NULL; the text is in a buffer of the calling thread,
 * valid until its next call. */
const char *lb_system_error(int err);

/* The last error message of this thread ("" if none) and its status. */
const char *lb_last_error(void);
lb_status lb_last_status(void);
void lb_clear_error(void);

/* Called with every error as it is raised (NULL restores the default: no call). */
typedef void (*lb_error_handler)(lb_status status, const char *message, void *user);
void lb_set_error_handler(lb_error_handler handler, void *user);

/* Entry checks of the public functions. A pointer argument that is not documented as
 * "may be NULL" is checked first thing: given NULL, the function records LB_ERR_VALUE
 * "<function>: <argument> is NULL" and returns its error value, which its declaration
 * states; by kind of result, unless the declaration says otherwise: NULL for a pointer,
 * LB_ERR_VALUE for an lb_status, -1 for a count, size, index or mode (int, int64_t),
 * 0 for a yes/no answer (lb_tensor_is_contiguous, ...), NaN for a double, 0 for an
 * unsigned count; a function returning void does nothing. LB_CHECK_INPUT is the check of
 * an op's input that may be the NULL result of an earlier failed call: it keeps that
 * call's message (so a chain of calls can be checked once at its end) and records its
 * own only when no error is pending. */
#define LB_CHECK_ARG(arg, ...)                                                  \
    do {                                                                        \
        if (!(arg)) {                                                           \
            lb_error(LB_ERR_VALUE, "%s: %s is NULL", __func__, #arg);           \
            return __VA_ARGS__;                                                 \
        }                                                                       \
    } while (0)
#define LB_CHECK_INPUT(arg, ...)                                                \
    do {                                                                        \
        if (!(arg)) {                                                           \
            if (lb_last_status() == LB_OK || !lb_last_error()[0])               \
                lb_error(LB_ERR_VALUE, "%s: %s is NULL", __func__, #arg);       \
            return __VA_ARGS__;                                                 \
        }                                                                       \
    } while (0)

/* The check of a shape argument: NULL is allowed for ndim 0 (a scalar has no sizes). */
#define LB_CHECK_SHAPE(ndim, shape, ...)                                        \
    do {                                                                        \
        if (!(shape) && (ndim) > 0) {                                           \
            lb_error(LB_ERR_VALUE, "%s: %s is NULL for %d dims", __func__, #shape, (int)(ndim)); \
            return __VA_ARGS__;                                                 \
        }                                                                       \
    } while (0)

/* Formats a shape as "[2, 3, 4]" into buf (always NUL-terminated); returns buf. A NULL
 * shape is written "(NULL shape)" and recorded as LB_ERR_VALUE; a NULL buf returns NULL. */
char *lb_shape_str(int ndim, const int64_t *shape, char *buf, size_t size);

LB_API_END

#endif

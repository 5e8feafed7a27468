#include "tensor/error.h"
#include "tensor/tensor.h" /* LB_MAX_DIMS */

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

enum { LB_ERROR_MAX = 1024 };

static _Thread_local char error_message[LB_ERROR_MAX];
static _Thread_local lb_status error_status = LB_OK;
static lb_error_handler error_handler = NULL;
static void *error_handler_user = NULL;

const char *lb_system_error(int err)
{
    static _Thread_local char text[256];
    const char *hint = err == ENOSPC   ? " (the disk is full)"
                       : err == EFBIG  ? " (over the file-size limit of this process, ulimit -f)"
                       : err == EDQUOT ? " (over the disk quota)"
                                       : "";
    char sys[160];
    const char *words = strerror_r(err, sys, sizeof sys); /* the GNU strerror_r (_GNU_SOURCE) */
    snprintf(text, sizeof text, "%s%s", words, hint);
    return text;
}

const char *lb_status_name(lb_status status)
{
    switch (status) {
    case LB_OK: return "ok";
    case LB_ERR_SHAPE: return "shape error";
    case LB_ERR_DTYPE: return "dtype error";
    case LB_ERR_VALUE: return "value error";
    case LB_ERR_MEMORY: return "out of memory";
    case LB_ERR_STATE: return "state error";
    case LB_ERR_IO: return "I/O error";
    case LB_ERR_FORMAT: return "format error";
    case LB_ERR_NUMERIC: return "numeric error";
    }
    return "unknown error";
}

lb_status lb_error(lb_status status, const char *fmt, ...)
{
    LB_CHECK_ARG(fmt, LB_ERR_VALUE);
    /* Format into a scratch buffer first: the arguments may include lb_last_error(). */
    char message[LB_ERROR_MAX];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(message, sizeof message, fmt, ap);
    va_end(ap);
    memcpy(error_message, message, sizeof message);
    error_status = status;
    if (error_handler)
        error_handler(status, error_message, error_handler_user);
    return status;
}

lb_status lb_error_context(const char *fmt, ...)
{
    LB_CHECK_ARG(fmt, LB_ERR_VALUE);
    char prefix[256];
    char old[LB_ERROR_MAX];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(prefix, sizeof prefix, fmt, ap);
    va_end(ap);
    memcpy(old, error_message, sizeof old);
    size_t n = strlen(prefix);
    if (n > LB_ERROR_MAX - 3)
        n = LB_ERROR_MAX - 3;
    memcpy(error_message, prefix, n);
    memcpy(error_message + n, ": ", 2);
    size_t rest = strnlen(old, LB_ERROR_MAX - n - 3);
    memcpy(error_message + n + 2, old, rest);
    error_message[n + 2 + rest] = '\0';
    return error_status;
}

const char *lb_last_error(void) { return error_message; }
lb_status lb_last_status(void) { return error_status; }

void lb_clear_error(void)
{
    error_message[0] = '\0';
    error_status = LB_OK;
}

void lb_set_error_handler(lb_error_handler handler, void *user)
{
    error_handler = handler;
    error_handler_user = user;
}

char *lb_shape_str(int ndim, const int64_t *shape, char *buf, size_t size)
{
    LB_CHECK_ARG(shape, NULL);
    LB_CHECK_ARG(buf, NULL);
    size_t used = 0;
    if (size == 0)
        return buf;
    if (ndim < 0 || ndim > LB_MAX_DIMS) { /* a rank no tensor has: not read */
        snprintf(buf, size, "(rank %d)", ndim);
        lb_error(LB_ERR_VALUE, "lb_shape_str: rank %d is outside 0..%d (LB_MAX_DIMS)", ndim, LB_MAX_DIMS);
        return buf;
    }
    if (!shape && ndim > 0) { /* still a printable string: it is mostly called to build messages */
        snprintf(buf, size, "(NULL shape)");
        lb_error(LB_ERR_VALUE, "lb_shape_str: shape is NULL");
        return buf;
    }
    buf[0] = '\0';
    used += (size_t)snprintf(buf + used, size - used, "[");
    for (int i = 0; i < ndim && used < size; i++)
        used += (size_t)snprintf(buf + used, size - used, i ? ", %lld" : "%lld", (long long)shape[i]);
    if (used < size)
        snprintf(buf + used, size - used, "]");
    return buf;
}

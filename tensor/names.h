/* Names of enum values: one table of names per enum, read both ways, so a name and
 * its value are written once and the count comes from the table.
 *
 *   static const char *const kind_names[] = {"sgd", "adam", "adamw"};
 *   lb_name_of(kind_names, LB_COUNT_OF(kind_names), kind, "unknown")
 *   lb_name_parse("optimizer", kind_names, LB_COUNT_OF(kind_names), text, 1, &index)
 */
#ifndef LB_NAMES_H
#define LB_NAMES_H

#include "tensor/api.h"
#include "tensor/error.h"

LB_API_BEGIN

/* The number of entries of a static array. */
#define LB_COUNT_OF(a) ((int)(sizeof(a) / sizeof((a)[0])))

/* names[value] for 0 <= value < count, else `fallback` (which may be NULL); names NULL
 * gives fallback with an LB_ERR_VALUE error. */
const char *lb_name_of(const char *const *names, int count, int value, const char *fallback);

/* The index of `text` among names[0..count-1] into *out (compared ignoring ASCII case
 * when any_case). Errors: LB_ERR_VALUE "<what> '<text>': expected a or b" (two names) or
 * "...: expected one of a, b, c" (text NULL
 * reads as "(null)"), and for a NULL names or out. */
lb_status lb_name_parse(const char *what, const char *const *names, int count, const char *text, int any_case,
                        int *out);

LB_API_END

#endif

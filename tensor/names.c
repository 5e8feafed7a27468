#include "tensor/names.h"

#include <stdio.h>
#include <string.h>
#include <strings.h>

const char *lb_name_of(const char *const *names, int count, int value, const char *fallback)
{
    LB_CHECK_ARG(names, fallback);
    return value >= 0 && value < count ? names[value] : fallback;
}

lb_status lb_name_parse(const char *what, const char *const *names, int count, const char *text, int any_case,
                        int *out)
{
    LB_CHECK_ARG(names, LB_ERR_VALUE);
    LB_CHECK_ARG(out, LB_ERR_VALUE);
    for (int i = 0; text && i < count; i++)
        if ((any_case ? strcasecmp(text, names[i]) : strcmp(text, names[i])) == 0) {
            *out = i;
            return LB_OK;
        }
    /* "a or b"; "one of a, b, c" */
    char expected[512] = "";
    size_t used = count > 2 ? (size_t)snprintf(expected, sizeof expected, "one of ") : 0;
    for (int i = 0; i < count && used < sizeof expected; i++) {
        int w = snprintf(expected + used, sizeof expected - used, "%s%s", i == 0 ? "" : count == 2 ? " or " : ", ",
                         names[i]);
        used += w > 0 ? (size_t)w : 0;
    }
    return lb_error(LB_ERR_VALUE, "%s '%s': expected %s", what ? what : "value", text ? text : "(null)", expected);
}

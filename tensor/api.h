/* What the shared library exports. lookback is compiled with hidden visibility, and
 * every public (installed) header puts its declarations between LB_API_BEGIN and
 * LB_API_END, which gives them default visibility: liblookback.so exports exactly
 * the functions declared in the installed headers. Internal headers (op_table.h,
 * *_internal.h, data/rows.h, data/options.h) do not use the markers, so
 * their functions link inside the library, the static library's users (the
 * `lookback` command, the tests) included, but are not exported. LB_API marks one
 * declaration outside such a block. */
#ifndef LB_API_H
#define LB_API_H

#if defined(__GNUC__) || defined(__clang__)
#define LB_API __attribute__((visibility("default")))
#define LB_API_BEGIN _Pragma("GCC visibility push(default)")
#define LB_API_END _Pragma("GCC visibility pop")
#else
#define LB_API
#define LB_API_BEGIN
#define LB_API_END
#endif

#endif

/* Token ids as text, the input of `lookback stream`: whole numbers separated by white
 * space, read byte by byte in bounded memory whatever the input holds (no line or token
 * is kept whole, so a huge line or a binary file costs no memory). */
#ifndef LB_DATA_TOKEN_IDS_H
#define LB_DATA_TOKEN_IDS_H

#include "tensor/api.h"

#include <stdint.h>
#include <stdio.h>

#include "tensor/error.h"

LB_API_BEGIN

/* A valid id and where its first byte is (line and column from 1); a non-zero return
 * stops the reading. */
typedef int (*lb_token_id_fn)(int32_t id, int64_t line, int64_t column, void *user);
/* A token that is not an id, or a NUL byte, with the message that names it: "NAME, line L,
 * column C: '12x' is not a token id (a whole number in [0, V), the model's vocabulary)"
 * (bytes that are not printable ASCII shown as \xHH, a token over 40 bytes cut, with its
 * length) or "NAME, line L, column C: a NUL byte is not a token id"; a non-zero return
 * stops the reading. */
typedef int (*lb_token_bad_fn)(const char *message, void *user);

/* Reads `in` to its end (or until a callback stops it), calling on_id for every whole
 * number in [0, vocab_size) and on_bad for anything else; `name` names the input in the
 * messages ("standard input", a path). Returns LB_OK, or LB_ERR_IO "NAME: read error at
 * line L: <why>" when reading failed; LB_ERR_VALUE for a NULL argument or vocab_size < 1. */
lb_status lb_token_ids_read(FILE *in, const char *name, int64_t vocab_size, lb_token_id_fn on_id,
                            lb_token_bad_fn on_bad, void *user);

LB_API_END

#endif

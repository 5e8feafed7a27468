/* Token ids as text (data/token_ids.h). */
#include "data/token_ids.h"

#include <ctype.h>
#include <errno.h>
#include <stdlib.h>

/* The longest token kept: an id of the vocabulary (int32) has at most 10 digits, so a
 * longer token is a bad id whatever it holds; it is read to its end in bounded memory. */
enum { TOKEN_MAX = 24, SHOWN_MAX = 40 };

/* A token as a message shows it: printable ASCII as is, other bytes as \xHH, a quote or
 * backslash escaped, at most SHOWN_MAX bytes, then "..." and its length when longer. */
static void show_token(const unsigned char *tok, size_t kept, uint64_t length, char *buf, size_t size)
{
    size_t used = 0;
    for (size_t i = 0; i < kept && i < SHOWN_MAX && used + 5 < size; i++) {
        unsigned char ch = tok[i];
        if (ch == '\'' || ch == '\\')
            used += (size_t)snprintf(buf + used, size - used, "\\%c", ch);
        else if (ch >= 0x20 && ch < 0x7f)
            buf[used++] = (char)ch;
        else
            used += (size_t)snprintf(buf + used, size - used, "\\x%02x", ch);
    }
    buf[used] = '\0';
    if (length > SHOWN_MAX || length > kept)
        snprintf(buf + used, size - used, "...' (%llu bytes", (unsigned long long)length);
}

/* The reading so far: the current token (its first TOKEN_MAX bytes) and where it began. */
typedef struct token_reader {
    const char *name;
    int64_t vocab, line, column, tok_line, tok_column;
    unsigned char tok[TOKEN_MAX + 1];
    size_t kept;
    uint64_t length; /* the current token's bytes (kept or not) */
} token_reader;

/* The token that just ended: an id for on_id, or a message for on_bad. Non-zero: stop. */
static int token_ended(token_reader *r, lb_token_id_fn on_id, lb_token_bad_fn on_bad, void *user)
{
    r->tok[r->kept] = '\0';
    char *end = NULL;
    errno = 0;
    long long id = r->length <= TOKEN_MAX ? strtoll((char *)r->tok, &end, 10) : -1;
    int stop;
    if (r->length > TOKEN_MAX || *end || errno == ERANGE || id < 0 || id >= r->vocab) {
        char shown[SHOWN_MAX * 4 + 64], message[SHOWN_MAX * 4 + 4400];
        show_token(r->tok, r->kept, r->length, shown, sizeof shown);
        snprintf(message, sizeof message,
                 "%s, line %lld, column %lld: '%s%s is not a token id (a whole number in [0, %lld), the model's "
                 "vocabulary)",
                 r->name, (long long)r->tok_line, (long long)r->tok_column, shown,
                 r->length > SHOWN_MAX || r->length > r->kept ? ")" : "'", (long long)r->vocab);
        stop = on_bad(message, user);
    } else {
        stop = on_id((int32_t)id, r->tok_line, r->tok_column, user);
    }
    r->kept = 0;
    r->length = 0;
    return stop;
}

lb_status lb_token_ids_read(FILE *in, const char *name, int64_t vocab_size, lb_token_id_fn on_id,
                            lb_token_bad_fn on_bad, void *user)
{
    LB_CHECK_ARG(in && name && on_id && on_bad && vocab_size >= 1, LB_ERR_VALUE);
    token_reader r = {.name = name, .vocab = vocab_size, .line = 1};
    for (;;) {
        int ch = getc(in);
        if (ch != EOF)
            r.column++;
        if (ch != EOF && ch != '\0' && !isspace(ch)) {
            if (r.length == 0) {
                r.tok_line = r.line;
                r.tok_column = r.column;
            }
            if (r.kept < TOKEN_MAX)
                r.tok[r.kept++] = (unsigned char)ch;
            r.length++;
            continue;
        }
        if (r.length > 0 && token_ended(&r, on_id, on_bad, user))
            return LB_OK;
        if (ch == EOF)
            break;
        if (ch == '\0') {
            char message[4300];
            snprintf(message, sizeof message, "%s, line %lld, column %lld: a NUL byte is not a token id", name,
                     (long long)r.line, (long long)r.column);
            if (on_bad(message, user))
                return LB_OK;
        } else if (ch == '\n') {
            r.line++;
            r.column = 0;
        }
    }
    if (ferror(in))
        return lb_error(LB_ERR_IO, "%s: read error at line %lld: %s", name, (long long)r.line,
                        errno ? lb_system_error(errno) : "unknown error");
    return LB_OK;
}

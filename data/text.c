/* Text corpora (data/text.h): the vocabulary, the import of text files and the HDF5
 * layout of a corpus. UTF-8 is decoded and validated by utf8proc (utf8proc_iterate,
 * which refuses overlong forms, surrogates, code points above U+10FFFF and truncated
 * sequences) and encoded by utf8proc_encode_char.
 *
 * Dimensions: N symbols of a text or a split, V = vocab_size. */
#include "data/text.h"

#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <utf8proc.h>
#include <zlib.h>

#include "data/h5io_internal.h"
#include "data/output.h"
#include "data/rows.h"
#include "data/spm_internal.h"
#include "data/tasks.h"
#include "data/text_internal.h"
#include "tensor/clock.h"
#include "tensor/rng.h"

enum {
    MAX_CODE_POINT = 0x10FFFF,
    CODE_POINTS = MAX_CODE_POINT + 1,
    UNK_CODE_POINT = 0xFFFD, /* REPLACEMENT CHARACTER: what <unk> decodes to */
    CHUNK_TOKENS = 1 << 20,  /* tokens per HDF5 chunk (4 MiB) */
    MAX_EXPANSION = 1100     /* deflate shrinks at most ~1032:1: more claimed data is corruption */
};

static const char *const split_names[3] = {"train", "val", "test"};

static int lb_split_index_of(const char *name)
{
    for (int s = 0; name && s < 3; s++)
        if (strcmp(name, split_names[s]) == 0)
            return s;
    return -1;
}

/* ---- names ---- */

static const char *const vocab_names[] = {"char", "byte", "bpe", "unigram"};
static const char *const unk_names[] = {"map", "error"};
static const char *const documents_names[] = {"none", "lines", "blank-lines"};

const char *lb_vocab_kind_name(lb_vocab_kind k) { return k >= LB_VOCAB_CHAR && k <= LB_VOCAB_UNIGRAM ? vocab_names[k] : NULL; }
int lb_vocab_kind_is_subword(lb_vocab_kind k) { return k == LB_VOCAB_BPE || k == LB_VOCAB_UNIGRAM; }
const char *lb_unk_policy_name(lb_unk_policy p) { return p == LB_UNK_MAP || p == LB_UNK_ERROR ? unk_names[p] : NULL; }

lb_status lb_vocab_kind_parse(const char *name, lb_vocab_kind *out)
{
    LB_CHECK_ARG(out, LB_ERR_VALUE);
    for (int i = 0; name && i < 4; i++)
        if (strcmp(name, vocab_names[i]) == 0) {
            *out = (lb_vocab_kind)i;
            return LB_OK;
        }
    return lb_error(LB_ERR_VALUE, "vocabulary '%s': expected char, byte, bpe or unigram", name ? name : "(null)");
}

lb_status lb_unk_policy_parse(const char *name, lb_unk_policy *out)
{
    LB_CHECK_ARG(out, LB_ERR_VALUE);
    for (int i = 0; name && i < 2; i++)
        if (strcmp(name, unk_names[i]) == 0) {
            *out = (lb_unk_policy)i;
            return LB_OK;
        }
    return lb_error(LB_ERR_VALUE, "unknown-character policy '%s': expected map or error", name ? name : "(null)");
}

/* ---- the vocabulary ---- */

struct lb_vocab {
    lb_vocab_kind kind;
    int64_t size;            /* V */
    int64_t unk_id;          /* -1 = none */
    int32_t *code_points;    /* [V] (char: the code points, U+FFFD for <unk>; byte: 0..255) */
    int64_t *offsets;        /* [V + 1] into bytes */
    unsigned char *bytes;    /* the encodings concatenated in id order (bpe, unigram: each piece's text) */
    lb_spm *spm;             /* bpe, unigram: the SentencePiece processor of model */
    unsigned char *model;    /* bpe, unigram: the serialized SentencePiece model [model_bytes] */
    size_t model_bytes;
};

void lb_vocab_free(lb_vocab *v)
{
    if (!v)
        return;
    free(v->code_points);
    free(v->offsets);
    free(v->bytes);
    lb_spm_free(v->spm);
    free(v->model);
    free(v);
}

/* A vocabulary of n symbols whose code points (or bytes) are cps; encodings filled in. */
static lb_vocab *vocab_make(lb_vocab_kind kind, const int32_t *cps, int64_t n, int64_t unk_id)
{
    lb_vocab *v = calloc(1, sizeof *v);
    if (v) {
        v->kind = kind;
        v->size = n;
        v->unk_id = unk_id;
        v->code_points = malloc((size_t)(n > 0 ? n : 1) * sizeof *v->code_points);
        v->offsets = malloc((size_t)(n + 1) * sizeof *v->offsets);
        v->bytes = malloc((size_t)(n > 0 ? n : 1) * 4);
    }
    if (!v || !v->code_points || !v->offsets || !v->bytes) {
        lb_vocab_free(v);
        lb_error(LB_ERR_MEMORY, "vocabulary: out of memory for %lld symbols", (long long)n);
        return NULL;
    }
    int64_t used = 0;
    for (int64_t i = 0; i < n; i++) {
        v->code_points[i] = cps[i];
        v->offsets[i] = used;
        if (kind == LB_VOCAB_BYTE)
            v->bytes[used++] = (unsigned char)cps[i];
        else
            used += utf8proc_encode_char(cps[i], v->bytes + used);
    }
    v->offsets[n] = used;
    return v;
}

/* ---- subword vocabularies (SentencePiece, data/spm_internal.h) ---- */

static lb_status read_all(int fd, const char *name, unsigned char **buf, int64_t *len, int64_t *cap, int64_t hint);

/* The text piece `id` stands for, appended at out (room for its length + 3 bytes): a
 * normal piece with U+2581 (the meta symbol for a space) as ' ', a byte piece <0xNN> as
 * that byte, <unk> as U+FFFD, control pieces as nothing. Returns the bytes written. */
static size_t piece_text(const lb_spm *spm, int64_t id, unsigned char *out)
{
    size_t len = 0, k = 0;
    const char *p = lb_spm_piece(spm, id, &len);
    switch (lb_spm_piece_kind(spm, id)) {
    case LB_SPM_BYTE: {
        unsigned value = 0;
        if (sscanf(p, "<0x%2X>", &value) == 1)
            out[k++] = (unsigned char)value;
        return k;
    }
    case LB_SPM_UNKNOWN: return (size_t)utf8proc_encode_char(UNK_CODE_POINT, out);
    case LB_SPM_CONTROL:
    case LB_SPM_UNUSED: return 0;
    default: break;
    }
    for (size_t i = 0; i < len;) {
        if (i + 3 <= len && memcmp(p + i, "\xE2\x96\x81", 3) == 0) {
            out[k++] = ' ';
            i += 3;
        } else {
            out[k++] = (unsigned char)p[i++];
        }
    }
    return k;
}

lb_vocab *lb_vocab_new_sentencepiece(const void *model, size_t n_bytes, const char *name)
{
    name = name ? name : "the tokenizer";
    if (!model || n_bytes == 0) {
        lb_error(LB_ERR_FORMAT, "%s is not a SentencePiece model (it is empty)", name);
        return NULL;
    }
    char why[256] = "";
    lb_spm *spm = lb_spm_load(model, n_bytes, why, sizeof why);
    if (!spm) {
        lb_error(LB_ERR_FORMAT, "%s is not a SentencePiece model (%s)", name, why[0] ? why : "its bytes do not parse as one");
        return NULL;
    }
    int type = lb_spm_model_type(spm);
    if (type != LB_SPM_BPE && type != LB_SPM_UNIGRAM) {
        lb_spm_free(spm);
        lb_error(LB_ERR_VALUE, "%s is a SentencePiece %s model; lookback takes bpe and unigram models", name,
                 type == LB_SPM_WORD ? "word" : type == LB_SPM_CHAR ? "char" : "unknown-type");
        return NULL;
    }
    int64_t V = lb_spm_size(spm);
    size_t room = 0;
    for (int64_t i = 0; i < V; i++) {
        size_t len;
        lb_spm_piece(spm, i, &len);
        room += len + 3;
    }
    lb_vocab *v = calloc(1, sizeof *v);
    if (v) {
        v->kind = type == LB_SPM_BPE ? LB_VOCAB_BPE : LB_VOCAB_UNIGRAM;
        v->size = V;
        v->unk_id = lb_spm_unk_id(spm);
        v->spm = spm;
        v->code_points = malloc((size_t)(V > 0 ? V : 1) * sizeof *v->code_points);
        v->offsets = malloc((size_t)(V + 1) * sizeof *v->offsets);
        v->bytes = malloc(room > 0 ? room : 1);
        v->model = malloc(n_bytes);
    } else {
        lb_spm_free(spm);
    }
    if (!v || !v->code_points || !v->offsets || !v->bytes || !v->model) {
        lb_vocab_free(v);
        lb_error(LB_ERR_MEMORY, "%s: out of memory for a vocabulary of %lld pieces", name, (long long)V);
        return NULL;
    }
    memcpy(v->model, model, n_bytes);
    v->model_bytes = n_bytes;
    int64_t used = 0;
    for (int64_t i = 0; i < V; i++) {
        v->code_points[i] = -1;
        v->offsets[i] = used;
        used += (int64_t)piece_text(spm, i, v->bytes + used);
    }
    v->offsets[V] = used;
    return v;
}

int64_t lb_vocab_eos_id(const lb_vocab *v)
{
    LB_CHECK_ARG(v, -1);
    return v->spm ? lb_spm_eos_id(v->spm) : -1;
}

/* SentencePiece's encoding of valid UTF-8 text[0..len) into ids (capacity as in
 * lb_vocab_encode); <unk> refused unless map_unk. */
static lb_status subword_encode(const lb_vocab *v, const char *text, size_t len, int map_unk, int32_t *ids,
                                int64_t capacity, int64_t *n)
{
    const unsigned char *p = (const unsigned char *)text;
    for (size_t pos = 0; pos < len;) {
        int32_t cp;
        utf8proc_ssize_t k = p[pos] < 0x80 ? 1 : utf8proc_iterate(p + pos, (utf8proc_ssize_t)(len - pos), &cp);
        if (k < 0)
            return lb_error(LB_ERR_VALUE, "invalid UTF-8 at byte offset %zu (byte 0x%02x)", pos, (unsigned)p[pos]);
        pos += (size_t)k;
    }
    char why[256];
    int32_t *out = NULL;
    int64_t count = 0;
    if (lb_spm_encode(v->spm, text, len, &out, &count, why, sizeof why) != 0)
        return lb_error(LB_ERR_MEMORY, "SentencePiece encoding failed: %s", why);
    lb_status st = LB_OK;
    for (int64_t i = 0; i < count && !map_unk; i++)
        if (out[i] == v->unk_id)
            st = lb_error(LB_ERR_VALUE, "token %lld of the text is <unk>: the tokenizer has no piece or byte for it",
                          (long long)i);
    if (st == LB_OK && ids && count > capacity)
        st = lb_error(LB_ERR_VALUE, "lb_vocab_encode: the text has more than %lld symbols (capacity)", (long long)capacity);
    if (st == LB_OK && ids && count > 0)
        memcpy(ids, out, (size_t)count * sizeof *ids);
    free(out);
    if (st == LB_OK)
        *n = count;
    return st;
}

/* SentencePiece's decoding of ids[0..n) (checked in range) into buf as lb_vocab_decode,
 * truncated at a whole UTF-8 character. */
static lb_status subword_decode(const lb_vocab *v, const int32_t *ids, int64_t n, char *buf, size_t size, size_t *len)
{
    char why[256], *text = NULL;
    size_t got = 0;
    if (lb_spm_decode(v->spm, ids, n, &text, &got, why, sizeof why) != 0)
        return lb_error(LB_ERR_MEMORY, "SentencePiece decoding failed: %s", why);
    if (buf && size > 0) {
        size_t k = got < size ? got : size - 1;
        while (k < got && k > 0 && ((unsigned char)text[k] & 0xC0) == 0x80)
            k--;
        memcpy(buf, text, k);
        buf[k] = '\0';
    }
    if (len)
        *len = got;
    free(text);
    return LB_OK;
}

/* The id of the one piece that encodes code point cp alone, or -1. */
static int64_t subword_lookup(const lb_vocab *v, int32_t cp)
{
    unsigned char enc[4];
    if (cp < 0 || cp > MAX_CODE_POINT || (cp >= 0xD800 && cp <= 0xDFFF))
        return -1;
    utf8proc_ssize_t k = utf8proc_encode_char(cp, enc);
    int32_t *ids = NULL;
    int64_t n = 0;
    char why[256];
    if (lb_spm_encode(v->spm, (const char *)enc, (size_t)k, &ids, &n, why, sizeof why) != 0)
        lb_clear_error();
    int64_t id = n == 1 && ids[0] != v->unk_id ? ids[0] : -1;
    free(ids);
    return id;
}

/* 1 when two subword vocabularies differ, the first difference in detail. */
static int subword_difference(const lb_vocab *a, const lb_vocab *b, char *detail, size_t size)
{
    for (int64_t i = 0; i < a->size; i++) {
        size_t la, lb;
        const char *pa = lb_spm_piece(a->spm, i, &la), *pb = lb_spm_piece(b->spm, i, &lb);
        if (la != lb || memcmp(pa, pb, la) != 0) {
            snprintf(detail, size, "id %lld is the piece '%.*s' in one and '%.*s' in the other", (long long)i,
                     (int)(la < 40 ? la : 40), pa, (int)(lb < 40 ? lb : 40), pb);
            return 1;
        }
    }
    if (a->model_bytes != b->model_bytes || memcmp(a->model, b->model, a->model_bytes) != 0) {
        snprintf(detail, size, "the same pieces in two different SentencePiece models (scores or settings)");
        return 1;
    }
    return 0;
}

lb_vocab *lb_vocab_read_sentencepiece(const char *path)
{
    if (!path) {
        lb_error(LB_ERR_VALUE, "lb_vocab_read_sentencepiece: path is NULL");
        return NULL;
    }
    enum { MAX_MODEL_BYTES = 256 << 20 };
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) {
        lb_error(LB_ERR_IO, "%s: cannot read: %s", path, lb_system_error(errno));
        return NULL;
    }
    struct stat sb;
    lb_status st = fstat(fd, &sb) == 0 ? LB_OK : lb_error(LB_ERR_IO, "%s: cannot stat: %s", path, lb_system_error(errno));
    if (st == LB_OK && !S_ISREG(sb.st_mode))
        st = lb_error(LB_ERR_IO, "%s: not a regular file%s", path, S_ISDIR(sb.st_mode) ? " (a folder)" : "");
    if (st == LB_OK && sb.st_size > MAX_MODEL_BYTES)
        st = lb_error(LB_ERR_FORMAT, "%s is not a SentencePiece model (%lld bytes, more than any tokenizer's)", path,
                      (long long)sb.st_size);
    unsigned char *bytes = NULL;
    int64_t len = 0, cap = 0;
    if (st == LB_OK)
        st = read_all(fd, path, &bytes, &len, &cap, (int64_t)sb.st_size);
    close(fd);
    lb_vocab *v = st == LB_OK ? lb_vocab_new_sentencepiece(bytes, (size_t)len, path) : NULL;
    free(bytes);
    return v;
}

lb_status lb_vocab_write_sentencepiece(const lb_vocab *v, const char *from, const char *path)
{
    LB_CHECK_ARG(v, LB_ERR_VALUE);
    LB_CHECK_ARG(path, LB_ERR_VALUE);
    from = from ? from : "the vocabulary";
    if (!v->spm)
        return lb_error(LB_ERR_VALUE, "%s holds a %s vocabulary, not a SentencePiece tokenizer (only bpe and unigram "
                        "corpora, and the models trained on them, carry one)", from, lb_vocab_kind_name(v->kind));
    lb_status st = lb_output_check(path, "tokenizer model");
    if (st != LB_OK)
        return st;
    int replace = lb_output_present(path);
    char tmp[4096];
    if (snprintf(tmp, sizeof tmp, "%s.tmp", path) >= (int)sizeof tmp)
        return lb_error(LB_ERR_VALUE, "%s: the path is too long", path);
    int fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    if (fd < 0)
        return lb_error(LB_ERR_IO, "%s: cannot create %s: %s", path, tmp, lb_system_error(errno));
    size_t done = 0;
    while (st == LB_OK && done < v->model_bytes) {
        ssize_t k = write(fd, v->model + done, v->model_bytes - done);
        if (k < 0 && errno == EINTR)
            continue;
        if (k <= 0)
            st = lb_error(LB_ERR_IO, "%s: cannot write %s: %s", path, tmp, lb_system_error(errno));
        else
            done += (size_t)k;
    }
    if (st == LB_OK && fsync(fd) != 0)
        st = lb_error(LB_ERR_IO, "%s: cannot flush %s to disk: %s", path, tmp, lb_system_error(errno));
    close(fd);
    if (st != LB_OK) {
        unlink(tmp);
        return st;
    }
    return lb_output_finish(tmp, path, "tokenizer model", replace);
}

lb_vocab *lb_vocab_new_bytes(void)
{
    int32_t b[256];
    for (int i = 0; i < 256; i++)
        b[i] = i;
    return vocab_make(LB_VOCAB_BYTE, b, 256, -1);
}

static int valid_scalar(int32_t cp) { return cp >= 0 && cp <= MAX_CODE_POINT && !(cp >= 0xD800 && cp <= 0xDFFF); }

lb_vocab *lb_vocab_new_chars(const int32_t *cps, int64_t n, int with_unk)
{
    if (!cps && n > 0) {
        lb_error(LB_ERR_VALUE, "lb_vocab_new_chars: code points are NULL");
        return NULL;
    }
    if (n < 0 || n > CODE_POINTS) {
        lb_error(LB_ERR_VALUE, "lb_vocab_new_chars: %lld code points is outside [0, %d]", (long long)n, CODE_POINTS);
        return NULL;
    }
    for (int64_t i = 0; i < n; i++)
        if (!valid_scalar(cps[i]) || (i > 0 && cps[i] <= cps[i - 1])) {
            lb_error(LB_ERR_VALUE, "vocabulary: code point %lld (U+%04X) is %s", (long long)i, (unsigned)cps[i],
                     valid_scalar(cps[i]) ? "not above the one before it (they must increase)" : "not a Unicode scalar value");
            return NULL;
        }
    int32_t *all = malloc((size_t)(n + 1) * sizeof *all);
    if (!all) {
        lb_error(LB_ERR_MEMORY, "vocabulary: out of memory");
        return NULL;
    }
    memcpy(all, cps, (size_t)n * sizeof *all);
    all[n] = UNK_CODE_POINT;
    lb_vocab *v = vocab_make(LB_VOCAB_CHAR, all, n + (with_unk != 0), with_unk ? n : -1);
    free(all);
    return v;
}

lb_vocab *lb_vocab_copy(const lb_vocab *v)
{
    LB_CHECK_ARG(v, NULL);
    if (v->spm)
        return lb_vocab_new_sentencepiece(v->model, v->model_bytes, "the vocabulary");
    return vocab_make(v->kind, v->code_points, v->size, v->unk_id);
}

lb_vocab_kind lb_vocab_get_kind(const lb_vocab *v)
{
    LB_CHECK_ARG(v, LB_VOCAB_CHAR);
    return v->kind;
}
int64_t lb_vocab_size(const lb_vocab *v)
{
    LB_CHECK_ARG(v, -1);
    return v->size;
}
int64_t lb_vocab_unk_id(const lb_vocab *v)
{
    LB_CHECK_ARG(v, -1);
    return v->unk_id;
}

int32_t lb_vocab_code_point(const lb_vocab *v, int64_t id)
{
    LB_CHECK_ARG(v, -1);
    if (id < 0 || id >= v->size) {
        lb_error(LB_ERR_VALUE, "vocabulary: id %lld is outside [0, %lld)", (long long)id, (long long)v->size);
        return -1;
    }
    return v->code_points[id];
}

const char *lb_vocab_symbol(const lb_vocab *v, int64_t id, size_t *len)
{
    LB_CHECK_ARG(v, NULL);
    LB_CHECK_ARG(len, NULL);
    if (id < 0 || id >= v->size) {
        lb_error(LB_ERR_VALUE, "vocabulary: id %lld is outside [0, %lld)", (long long)id, (long long)v->size);
        return NULL;
    }
    *len = (size_t)(v->offsets[id + 1] - v->offsets[id]);
    return (const char *)v->bytes + v->offsets[id];
}

const unsigned char *lb_vocab_bytes(const lb_vocab *v, size_t *n_bytes)
{
    LB_CHECK_ARG(v, NULL);
    LB_CHECK_ARG(n_bytes, NULL);
    if (v->spm) {
        *n_bytes = v->model_bytes;
        return v->model;
    }
    *n_bytes = (size_t)v->offsets[v->size];
    return v->bytes;
}

int64_t lb_vocab_lookup(const lb_vocab *v, int32_t cp)
{
    LB_CHECK_ARG(v, -1);
    if (v->kind == LB_VOCAB_BYTE)
        return cp >= 0 && cp < 256 ? cp : -1;
    if (v->spm)
        return subword_lookup(v, cp);
    int64_t lo = 0, hi = v->size - (v->unk_id >= 0); /* the code points before <unk> increase */
    while (lo < hi) {
        int64_t mid = lo + (hi - lo) / 2;
        if (v->code_points[mid] < cp)
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo < v->size - (v->unk_id >= 0) && v->code_points[lo] == cp ? lo : -1;
}

char *lb_vocab_describe(const lb_vocab *v, int64_t id, char *buf, size_t size)
{
    LB_CHECK_ARG(v, NULL);
    LB_CHECK_ARG(buf, NULL);
    if (id < 0 || id >= v->size) {
        snprintf(buf, size, "(id %lld)", (long long)id);
        return buf;
    }
    int32_t cp = v->code_points[id];
    size_t piece_len = 0;
    const char *piece = v->spm ? lb_spm_piece(v->spm, id, &piece_len) : NULL;
    if (id == v->unk_id)
        snprintf(buf, size, "<unk>");
    else if (piece)
        snprintf(buf, size, "'%.*s'", (int)(piece_len < 64 ? piece_len : 64), piece);
    else if (v->kind == LB_VOCAB_BYTE && cp >= 0x80)
        snprintf(buf, size, "byte 0x%02x", (unsigned)cp);
    else if (cp == '\n')
        snprintf(buf, size, "'\\n'");
    else if (cp == '\t')
        snprintf(buf, size, "'\\t'");
    else if (cp == '\r')
        snprintf(buf, size, "'\\r'");
    else if (cp < 0x20 || cp == 0x7F)
        snprintf(buf, size, "U+%04X", (unsigned)cp);
    else if (cp < 0x80)
        snprintf(buf, size, "'%c'", (char)cp);
    else
        snprintf(buf, size, "U+%04X '%.*s'", (unsigned)cp, (int)(v->offsets[id + 1] - v->offsets[id]),
                 (const char *)v->bytes + v->offsets[id]);
    return buf;
}

/* "'x' (U+0078)" for a code point in messages. */
static char *describe_cp(int32_t cp, char *buf, size_t size)
{
    unsigned char enc[4];
    if (cp >= 0x20 && cp != 0x7F && valid_scalar(cp)) {
        utf8proc_ssize_t k = utf8proc_encode_char(cp, enc);
        snprintf(buf, size, "'%.*s' (U+%04X)", (int)k, (const char *)enc, (unsigned)cp);
    } else {
        snprintf(buf, size, "U+%04X", (unsigned)cp);
    }
    return buf;
}

size_t lb_text_bom_length(const void *text, size_t len)
{
    LB_CHECK_ARG(text, 0);
    const unsigned char *p = text;
    return p && len >= 3 && p[0] == 0xef && p[1] == 0xbb && p[2] == 0xbf ? 3 : 0;
}

const char *lb_text_utf8_problem(const unsigned char *text, size_t avail, char *buf, size_t size)
{
    LB_CHECK_ARG(text, "");
    LB_CHECK_ARG(buf, "");
    if (size == 0)
        return "";
    unsigned char c = text && avail ? text[0] : 0;
    if (!text || !avail) {
        snprintf(buf, size, "no byte");
        return buf;
    }
    if (c >= 0x80 && c <= 0xbf) {
        snprintf(buf, size, "a continuation byte with no lead byte before it");
        return buf;
    }
    if (c == 0xc0 || c == 0xc1 || c >= 0xf5) {
        snprintf(buf, size, "a byte that never occurs in UTF-8");
        return buf;
    }
    size_t need = c >= 0xf0 ? 4 : c >= 0xe0 ? 3 : 2;
    for (size_t i = 1; i < need; i++) {
        if (i >= avail) {
            snprintf(buf, size, "the lead byte of a %zu-byte character, but the file ends after %zu of its bytes", need, i);
            return buf;
        }
        if ((text[i] & 0xc0) != 0x80) {
            snprintf(buf, size, "the lead byte of a %zu-byte character, followed by byte 0x%02x, which does not "
                     "continue it", need, (unsigned)text[i]);
            return buf;
        }
    }
    snprintf(buf, size, "the start of an overlong form, a surrogate (U+D800..U+DFFF) or a code point above "
             "U+10FFFF, which UTF-8 does not allow");
    return buf;
}

lb_status lb_vocab_encode(const lb_vocab *v, const char *text, size_t len, int map_unk, int32_t *ids,
                          int64_t capacity, int64_t *n)
{
    LB_CHECK_ARG(v, LB_ERR_VALUE);
    LB_CHECK_ARG(n, LB_ERR_VALUE);
    if (!text && len > 0)
        return lb_error(LB_ERR_VALUE, "lb_vocab_encode: text is NULL");
    if (v->spm)
        return subword_encode(v, text, len, map_unk, ids, capacity, n);
    const unsigned char *p = (const unsigned char *)text;
    int64_t count = 0;
    for (size_t pos = 0; pos < len;) {
        int32_t cp;
        size_t step = 1;
        if (v->kind == LB_VOCAB_BYTE) {
            cp = p[pos];
        } else {
            utf8proc_ssize_t k = utf8proc_iterate(p + pos, (utf8proc_ssize_t)(len - pos), &cp);
            if (k < 0) {
                char why[160];
                return lb_error(LB_ERR_VALUE, "invalid UTF-8 at byte offset %zu (byte 0x%02x: %s)", pos,
                                (unsigned)p[pos], lb_text_utf8_problem(p + pos, len - pos, why, sizeof why));
            }
            step = (size_t)k;
        }
        int64_t id = lb_vocab_lookup(v, cp);
        if (id < 0 && map_unk && v->unk_id >= 0)
            id = v->unk_id;
        if (id < 0) {
            char what[48];
            return lb_error(LB_ERR_VALUE, "character %s at byte offset %zu is not in the vocabulary%s",
                            describe_cp(cp, what, sizeof what), pos,
                            v->unk_id >= 0 ? "" : " (which has no <unk> symbol)");
        }
        if (ids) {
            if (count >= capacity)
                return lb_error(LB_ERR_VALUE, "lb_vocab_encode: the text has more than %lld symbols (capacity)",
                                (long long)capacity);
            ids[count] = (int32_t)id;
        }
        count++;
        pos += step;
    }
    *n = count;
    return LB_OK;
}

lb_status lb_vocab_decode(const lb_vocab *v, const int32_t *ids, int64_t n, char *buf, size_t size, size_t *len)
{
    LB_CHECK_ARG(v, LB_ERR_VALUE);
    if (!ids && n > 0)
        return lb_error(LB_ERR_VALUE, "lb_vocab_decode: ids are NULL");
    size_t used = 0;
    for (int64_t i = 0; i < n; i++) {
        if (ids[i] < 0 || ids[i] >= v->size)
            return lb_error(LB_ERR_VALUE, "decode: id %d at position %lld is outside the vocabulary [0, %lld)", ids[i],
                            (long long)i, (long long)v->size);
        if (v->spm)
            continue;
        size_t k = (size_t)(v->offsets[ids[i] + 1] - v->offsets[ids[i]]);
        if (buf && used + k < size)
            memcpy(buf + used, v->bytes + v->offsets[ids[i]], k);
        else if (buf && used < size) /* truncated: stop at a whole symbol */
            size = used + 1;
        used += k;
    }
    if (v->spm)
        return subword_decode(v, ids, n, buf, size, len);
    if (buf && size > 0)
        buf[used < size ? used : size - 1] = '\0';
    if (len)
        *len = used;
    return LB_OK;
}

int lb_vocab_difference(const lb_vocab *a, const lb_vocab *b, char *detail, size_t size)
{
    detail[0] = '\0';
    if (a->kind != b->kind || a->size != b->size || a->unk_id != b->unk_id) {
        snprintf(detail, size, "%s, %lld symbols%s vs %s, %lld symbols%s", lb_vocab_kind_name(a->kind),
                 (long long)a->size, a->unk_id >= 0 ? " with <unk>" : "", lb_vocab_kind_name(b->kind), (long long)b->size,
                 b->unk_id >= 0 ? " with <unk>" : "");
    } else if (a->spm && b->spm) {
        subword_difference(a, b, detail, size);
    } else {
        for (int64_t i = 0; i < a->size && !detail[0]; i++)
            if (a->code_points[i] != b->code_points[i]) {
                char x[48], y[48];
                snprintf(detail, size, "id %lld is %s in one and %s in the other", (long long)i,
                         lb_vocab_describe(a, i, x, sizeof x), lb_vocab_describe(b, i, y, sizeof y));
            }
    }
    return detail[0] != '\0';
}

lb_status lb_vocab_check_same(const lb_vocab *a, const lb_vocab *b, const char *name_a, const char *name_b)
{
    LB_CHECK_ARG(a, LB_ERR_VALUE);
    LB_CHECK_ARG(b, LB_ERR_VALUE);
    name_a = name_a ? name_a : "the first";
    name_b = name_b ? name_b : "the second";
    char detail[160];
    if (!lb_vocab_difference(a, b, detail, sizeof detail))
        return LB_OK;
    return lb_error(LB_ERR_VALUE, "%s and %s have different vocabularies (%s): the ids of one would mean other "
                    "characters in the other; import the text of %s with the vocabulary of %s: `lookback data text "
                    "TEXT --like %s -o NEW.h5`",
                    name_a, name_b, detail, name_b, name_a, name_a);
}

/* ---- the /vocab dataset ---- */

static uint64_t crc_of(const void *data, size_t n)
{
    uLong c = crc32(0L, Z_NULL, 0);
    const unsigned char *p = data;
    while (n > 0) {
        uInt part = n > (1u << 30) ? (1u << 30) : (uInt)n;
        c = crc32(c, p, part);
        p += part;
        n -= part;
    }
    return (uint64_t)c;
}

lb_status lb_vocab_h5_write(hid_t loc, const lb_vocab *v, const char *file)
{
    LB_CHECK_ARG(v, LB_ERR_VALUE);
    size_t n_bytes = 0;
    const unsigned char *data = lb_vocab_bytes(v, &n_bytes);
    hsize_t dims[1] = {(hsize_t)n_bytes};
    hid_t space = H5Screate_simple(1, dims, NULL);
    hid_t plist = H5Pcreate(H5P_DATASET_CREATE);
    if (plist >= 0)
        H5Pset_obj_track_times(plist, 0);
    hid_t dset = space < 0 || plist < 0 ? -1 : H5Dcreate2(loc, "vocab", H5T_STD_U8LE, space, H5P_DEFAULT, plist, H5P_DEFAULT);
    lb_status st = dset < 0 ? lb_error(LB_ERR_IO, "%s: cannot create dataset /vocab: %s", file, lb_h5_cause()) : LB_OK;
    if (st == LB_OK && dims[0] > 0 && H5Dwrite(dset, H5T_NATIVE_UCHAR, H5S_ALL, H5S_ALL, H5P_DEFAULT, data) < 0)
        st = lb_error(LB_ERR_IO, "%s: cannot write dataset /vocab: %s", file, lb_h5_cause());
    if (st == LB_OK)
        st = lb_h5_write_attr_string(dset, "kind", lb_vocab_kind_name(v->kind), file);
    if (st == LB_OK)
        st = lb_h5_write_attr_int(dset, "vocab_size", v->size, file);
    if (st == LB_OK)
        st = lb_h5_write_attr_int(dset, "unk_id", v->unk_id, file);
    if (st == LB_OK)
        st = lb_h5_write_attr_uint(dset, "crc32", crc_of(data, n_bytes), file);
    lb_h5_close(dset);
    lb_h5_close(plist);
    lb_h5_close(space);
    return st;
}

/* A vocabulary from its stored bytes, checked: byte = exactly 0..255; char = valid UTF-8
 * of exactly V code points, increasing before <unk>, which (last) is U+FFFD. */
static lb_vocab *vocab_from_bytes(lb_vocab_kind kind, int64_t size, int64_t unk_id, const unsigned char *bytes,
                                  int64_t n_bytes, const char *file)
{
    if (lb_vocab_kind_is_subword(kind)) {
        char name[600];
        snprintf(name, sizeof name, "%s: /vocab", file);
        lb_vocab *v = lb_vocab_new_sentencepiece(bytes, (size_t)n_bytes, name);
        if (v && (v->kind != kind || v->size != size || v->unk_id != unk_id)) {
            lb_error(LB_ERR_FORMAT, "%s: /vocab is a %s model of %lld pieces (<unk> %lld) but its attributes say %s, %lld "
                     "(<unk> %lld)", file, lb_vocab_kind_name(v->kind), (long long)v->size, (long long)v->unk_id,
                     lb_vocab_kind_name(kind), (long long)size, (long long)unk_id);
            lb_vocab_free(v);
            v = NULL;
        }
        if (!v && lb_last_status() != LB_ERR_MEMORY)
            lb_error(LB_ERR_FORMAT, "%s", lb_last_error());
        return v;
    }
    if (kind == LB_VOCAB_BYTE) {
        int ok = size == 256 && n_bytes == 256 && unk_id == -1;
        for (int i = 0; ok && i < 256; i++)
            ok = bytes[i] == i;
        if (!ok) {
            lb_error(LB_ERR_FORMAT, "%s: /vocab is not the byte vocabulary (the 256 bytes 0..255, no <unk>)", file);
            return NULL;
        }
        return lb_vocab_new_bytes();
    }
    if (size < 1 || size > CODE_POINTS + 1 || n_bytes > 4 * size || (unk_id != -1 && unk_id != size - 1)) {
        lb_error(LB_ERR_FORMAT, "%s: /vocab: vocab_size %lld, unk_id %lld and %lld bytes do not describe a character "
                 "vocabulary (<unk>, when present, is the last id)", file, (long long)size, (long long)unk_id,
                 (long long)n_bytes);
        return NULL;
    }
    int32_t *cps = malloc((size_t)size * sizeof *cps);
    if (!cps) {
        lb_error(LB_ERR_MEMORY, "%s: out of memory for the vocabulary", file);
        return NULL;
    }
    int64_t count = 0;
    lb_status st = LB_OK;
    for (int64_t pos = 0; st == LB_OK && pos < n_bytes;) {
        int32_t cp;
        utf8proc_ssize_t k = utf8proc_iterate(bytes + pos, (utf8proc_ssize_t)(n_bytes - pos), &cp);
        if (k < 0)
            st = lb_error(LB_ERR_FORMAT, "%s: /vocab is not valid UTF-8 (byte offset %lld)", file, (long long)pos);
        else if (count >= size)
            st = lb_error(LB_ERR_FORMAT, "%s: /vocab holds more than vocab_size = %lld characters", file, (long long)size);
        else
            cps[count++] = cp;
        pos += k > 0 ? k : 1;
    }
    if (st == LB_OK && count != size)
        st = lb_error(LB_ERR_FORMAT, "%s: /vocab holds %lld characters but vocab_size is %lld", file, (long long)count,
                      (long long)size);
    if (st == LB_OK && unk_id >= 0 && cps[unk_id] != UNK_CODE_POINT)
        st = lb_error(LB_ERR_FORMAT, "%s: /vocab: the <unk> symbol (id %lld) is not U+FFFD", file, (long long)unk_id);
    lb_vocab *v = st == LB_OK ? lb_vocab_new_chars(cps, size - (unk_id >= 0), unk_id >= 0) : NULL;
    if (st == LB_OK && !v)
        lb_error(LB_ERR_FORMAT, "%s: /vocab: %s", file, lb_last_error());
    free(cps);
    return v;
}

/* Reads /vocab's attributes and bytes (malloc'd into *bytes). */
static lb_status read_vocab_raw(hid_t loc, const char *file, lb_vocab_kind *kind, int64_t *size, int64_t *unk_id,
                                unsigned char **bytes, int64_t *n_bytes, int64_t file_bytes)
{
    *bytes = NULL;
    if (!lb_h5_has_link(loc, "vocab"))
        return lb_error(LB_ERR_FORMAT, "%s holds no vocabulary (/vocab): it is not a text corpus or a model trained on one",
                        file);
    hid_t dset = H5Dopen2(loc, "vocab", H5P_DEFAULT);
    if (dset < 0)
        return lb_error(LB_ERR_FORMAT, "%s: cannot open dataset /vocab (damaged file?)", file);
    lb_h5_info info;
    char kind_text[16];
    lb_status st = lb_h5_dataset_info(dset, "/vocab", &info, file);
    if (st == LB_OK && (info.type_class != H5T_INTEGER || info.type_size != 1 || info.rank != 1)) {
        char found[96];
        st = lb_error(LB_ERR_FORMAT, "%s: dataset /vocab: expected uint8 [n_bytes], found %s", file,
                      lb_h5_info_str(&info, found, sizeof found));
    }
    if (st == LB_OK && file_bytes >= 0 && info.dims[0] > file_bytes * MAX_EXPANSION + (1 << 20))
        st = lb_error(LB_ERR_FORMAT, "%s: /vocab claims %lld bytes, more than the file can hold: corrupted", file,
                      (long long)info.dims[0]);
    if (st == LB_OK)
        st = lb_h5_read_attr_string(dset, "kind", kind_text, sizeof kind_text, file);
    if (st == LB_OK && lb_vocab_kind_parse(kind_text, kind) != LB_OK)
        st = lb_error(LB_ERR_FORMAT, "%s: /vocab attribute 'kind' = '%s' is not char, byte, bpe or unigram", file, kind_text);
    if (st == LB_OK)
        st = lb_h5_read_attr_int(dset, "vocab_size", LB_H5_INT, size, file);
    if (st == LB_OK)
        st = lb_h5_read_attr_int(dset, "unk_id", LB_H5_INT, unk_id, file);
    if (st == LB_OK) {
        *n_bytes = info.dims[0];
        *bytes = malloc((size_t)(*n_bytes > 0 ? *n_bytes : 1));
        if (!*bytes)
            st = lb_error(LB_ERR_MEMORY, "%s: out of memory for the vocabulary", file);
    }
    if (st == LB_OK && *n_bytes > 0)
        st = lb_h5_read(dset, LB_H5_ANY_INT, H5T_NATIVE_UCHAR, 0, -1, *bytes, "/vocab", file);
    if (st == LB_OK && lb_h5_has_attr(dset, "crc32")) {
        uint64_t stored = 0;
        st = lb_h5_read_attr_uint(dset, "crc32", LB_H5_U64, &stored, file);
        if (st == LB_OK && stored != crc_of(*bytes, (size_t)*n_bytes))
            st = lb_error(LB_ERR_FORMAT, "%s: dataset /vocab does not match its checksum: the file is damaged", file);
    }
    lb_h5_close(dset);
    if (st != LB_OK) {
        free(*bytes);
        *bytes = NULL;
    }
    return st;
}

lb_status lb_vocab_h5_read(hid_t loc, const char *file, lb_vocab **out)
{
    lb_vocab_kind kind;
    int64_t size = 0, unk = -1, n_bytes = 0;
    unsigned char *bytes;
    *out = NULL;
    lb_status st = read_vocab_raw(loc, file, &kind, &size, &unk, &bytes, &n_bytes, -1);
    if (st != LB_OK)
        return st;
    *out = vocab_from_bytes(kind, size, unk, bytes, n_bytes, file);
    free(bytes);
    return *out ? LB_OK : lb_last_status();
}

typedef struct vocab_job {
    const char *path;
    lb_vocab *vocab;
} vocab_job;

static lb_status vocab_read_job(void *ctx)
{
    vocab_job *job = ctx;
    hid_t fid;
    lb_status st = lb_h5_open_read(job->path, "file", &fid);
    if (st != LB_OK)
        return st;
    st = lb_vocab_h5_read(fid, job->path, &job->vocab);
    H5Fclose(fid);
    return st;
}

lb_vocab *lb_vocab_read(const char *path)
{
    if (!path) {
        lb_error(LB_ERR_VALUE, "lb_vocab_read: path is NULL");
        return NULL;
    }
    struct stat sb;
    if (stat(path, &sb) != 0) {
        lb_error(LB_ERR_IO, "%s: cannot open: %s", path, lb_system_error(errno));
        return NULL;
    }
    if (!S_ISREG(sb.st_mode)) {
        lb_error(LB_ERR_IO, "%s: not a regular file%s", path, S_ISDIR(sb.st_mode) ? " (a folder)" : "");
        return NULL;
    }
    if (access(path, R_OK) != 0) {
        lb_error(LB_ERR_IO, "%s: cannot read: %s", path, lb_system_error(errno));
        return NULL;
    }
    vocab_job job = {path, NULL};
    lb_h5_quiet quiet;
    lb_h5_quiet_begin(&quiet);
    /* first in a child (a hostile file costs only it), then here */
    lb_status st = lb_h5_isolated(vocab_read_job, NULL, &job, lb_h5_read_timeout((int64_t)sb.st_size), 0, path);
    if (st == LB_OK)
        st = vocab_read_job(&job);
    lb_h5_quiet_end(&quiet);
    return st == LB_OK ? job.vocab : NULL;
}

/* ---- a corpus file: reading ---- */

int lb_text_is_corpus(hid_t fid)
{
    char task[16];
    if (!lb_h5_has_attr(fid, "task"))
        return 0;
    lb_h5_quiet q;
    lb_h5_quiet_begin(&q);
    int is = lb_h5_read_attr_string(fid, "task", task, sizeof task, "") == LB_OK && strcmp(task, "text") == 0;
    lb_h5_quiet_end(&q);
    lb_clear_error();
    return is;
}

void lb_text_store_free(lb_text_store *s)
{
    if (!s)
        return;
    free(s->vocab_data);
    for (int i = 0; i < 3; i++)
        free(s->tokens[i]);
    memset(s, 0, sizeof *s);
}

static lb_status read_stream(hid_t fid, const char *file, int split, int load, int64_t file_bytes, int64_t *claimed,
                             lb_text_store *s)
{
    char where[32];
    snprintf(where, sizeof where, "/%s/tokens", split_names[split]);
    if (!lb_h5_has_link(fid, split_names[split]))
        return lb_error(LB_ERR_FORMAT, "%s: missing group /%s (a text corpus has train, val and test)", file,
                        split_names[split]);
    hid_t group = H5Gopen2(fid, split_names[split], H5P_DEFAULT);
    hid_t dset = group >= 0 && lb_h5_has_link(group, "tokens") ? H5Dopen2(group, "tokens", H5P_DEFAULT) : -1;
    lb_status st = dset < 0 ? lb_error(LB_ERR_FORMAT, "%s: missing dataset %s", file, where) : LB_OK;
    lb_h5_info info;
    if (st == LB_OK)
        st = lb_h5_dataset_info(dset, where, &info, file);
    if (st == LB_OK && (info.type_class != H5T_INTEGER || info.type_size > 8 || info.rank != 1)) {
        char found[96];
        st = lb_error(LB_ERR_FORMAT, "%s: dataset %s: expected int32 [N], found %s", file, where,
                      lb_h5_info_str(&info, found, sizeof found));
    }
    s->text_bytes[split] = s->text_characters[split] = -1;
    if (st == LB_OK && lb_h5_has_attr(group, "text_bytes"))
        st = lb_h5_read_attr_int(group, "text_bytes", LB_H5_INT, &s->text_bytes[split], file);
    if (st == LB_OK && lb_h5_has_attr(group, "text_characters"))
        st = lb_h5_read_attr_int(group, "text_characters", LB_H5_INT, &s->text_characters[split], file);
    if (st == LB_OK) {
        s->n[split] = info.dims[0];
        *claimed += load ? info.dims[0] * 4 : 0;
        if (*claimed > file_bytes * MAX_EXPANSION + (64 << 20))
            st = lb_error(LB_ERR_FORMAT, "%s: %s claims %lld tokens but the file has only %lld bytes: corrupted", file,
                          where, (long long)info.dims[0], (long long)file_bytes);
    }
    if (st == LB_OK && load) {
        int64_t n = s->n[split];
        if (!(s->tokens[split] = malloc((size_t)(n > 0 ? n : 1) * sizeof(int32_t))))
            st = lb_error(LB_ERR_MEMORY, "%s: out of memory for %lld tokens of %s", file, (long long)n, where);
        if (st == LB_OK && n > 0 && info.type_size > 4) { /* wide: check before narrowing */
            int64_t *wide = malloc((size_t)n * sizeof *wide);
            st = wide ? lb_h5_read(dset, LB_H5_ANY_INT, H5T_NATIVE_INT64, 0, -1, wide, where, file)
                      : lb_error(LB_ERR_MEMORY, "%s: out of memory reading %s", file, where);
            for (int64_t i = 0; st == LB_OK && i < n; i++) {
                if (wide[i] < 0 || wide[i] >= s->vocab_size)
                    st = lb_error(LB_ERR_FORMAT, "%s: dataset %s: value %lld at [%lld] is outside [0, %lld)", file, where,
                                  (long long)wide[i], (long long)i, (long long)s->vocab_size);
                else
                    s->tokens[split][i] = (int32_t)wide[i];
            }
            free(wide);
        } else if (st == LB_OK && n > 0) {
            st = lb_h5_read(dset, LB_H5_ANY_INT, H5T_NATIVE_INT32, 0, -1, s->tokens[split], where, file);
            for (int64_t i = 0; st == LB_OK && i < n; i++)
                if (s->tokens[split][i] < 0 || s->tokens[split][i] >= s->vocab_size)
                    st = lb_error(LB_ERR_FORMAT, "%s: dataset %s: value %d at [%lld] is outside [0, %lld)", file, where,
                                  s->tokens[split][i], (long long)i, (long long)s->vocab_size);
        }
    }
    lb_h5_close(dset);
    lb_h5_close(group);
    return st;
}

lb_status lb_text_read_store(hid_t fid, const char *file, int only, int64_t file_bytes, lb_text_store *s)
{
    memset(s, 0, sizeof *s);
    s->present = 1;
    int64_t version = 0, classes = 0;
    char kind[16];
    lb_status st = lb_h5_read_attr_int(fid, "format_version", LB_H5_INT, &version, file);
    if (st == LB_OK && version != LB_DATA_FORMAT_VERSION)
        st = lb_error(LB_ERR_FORMAT, "%s: format_version %lld is not supported (this lookback reads version %d): "
                      "import the text again with `lookback data text`", file, (long long)version, LB_DATA_FORMAT_VERSION);
    if (st == LB_OK)
        st = lb_h5_read_attr_int(fid, "vocab_size", LB_H5_INT, &s->vocab_size, file);
    if (st == LB_OK)
        st = lb_h5_read_attr_int(fid, "num_classes", LB_H5_INT, &classes, file);
    if (st == LB_OK && (classes != s->vocab_size || s->vocab_size < 1 || s->vocab_size > INT32_MAX))
        st = lb_error(LB_ERR_FORMAT, "%s: vocab_size %lld and num_classes %lld must be equal and >= 1 in a text corpus",
                      file, (long long)s->vocab_size, (long long)classes);
    if (st == LB_OK)
        st = lb_h5_read_attr_string(fid, "vocab", kind, sizeof kind, file);
    if (st == LB_OK && lb_vocab_kind_parse(kind, &s->kind) != LB_OK)
        st = lb_error(LB_ERR_FORMAT, "%s: attribute 'vocab' = '%s' is not char, byte, bpe or unigram", file, kind);
    if (st == LB_OK && lb_h5_has_attr(fid, "val_fraction"))
        st = lb_h5_read_attr_real(fid, "val_fraction", LB_H5_REAL, &s->val_fraction, file);
    if (st == LB_OK && lb_h5_has_attr(fid, "test_fraction"))
        st = lb_h5_read_attr_real(fid, "test_fraction", LB_H5_REAL, &s->test_fraction, file);
    if (st == LB_OK && lb_h5_has_attr(fid, "source_bytes"))
        st = lb_h5_read_attr_int(fid, "source_bytes", LB_H5_INT, &s->source_bytes, file);
    if (st == LB_OK && lb_h5_has_attr(fid, "source") &&
        lb_h5_read_attr_string(fid, "source", s->source, sizeof s->source, file) != LB_OK) {
        s->source[0] = '\0'; /* informative only (a long list may not fit): not an error */
        lb_clear_error();
    }
    lb_vocab_kind vk;
    int64_t vsize = 0;
    if (st == LB_OK)
        st = read_vocab_raw(fid, file, &vk, &vsize, &s->unk_id, &s->vocab_data, &s->vocab_bytes, file_bytes);
    if (st == LB_OK && (vk != s->kind || vsize != s->vocab_size))
        st = lb_error(LB_ERR_FORMAT, "%s: /vocab (%s, %lld symbols) disagrees with the root attributes (%s, %lld)", file,
                      lb_vocab_kind_name(vk), (long long)vsize, kind, (long long)s->vocab_size);
    if (st == LB_OK) { /* the vocabulary itself must be valid */
        lb_vocab *v = vocab_from_bytes(s->kind, s->vocab_size, s->unk_id, s->vocab_data, s->vocab_bytes, file);
        st = v ? LB_OK : lb_last_status();
        lb_vocab_free(v);
    }
    int64_t claimed = 0;
    for (int sp = 0; st == LB_OK && sp < 3; sp++)
        st = read_stream(fid, file, sp, only < 0 || only == sp, file_bytes, &claimed, s);
    if (st != LB_OK)
        lb_text_store_free(s);
    return st;
}

/* What crosses the socket before the arrays: every field but the pointers. */
typedef struct store_header {
    lb_vocab_kind kind;
    int64_t vocab_size, unk_id, source_bytes, vocab_bytes, n[3], text_bytes[3], text_characters[3];
    int loaded[3];
    double val_fraction, test_fraction;
    char source[1024];
} store_header;

int lb_text_store_transfer(int fd, lb_text_store *s, int send_side)
{
    store_header h;
    memset(&h, 0, sizeof h);
    if (send_side) {
        h.kind = s->kind;
        h.vocab_size = s->vocab_size;
        h.unk_id = s->unk_id;
        h.source_bytes = s->source_bytes;
        h.vocab_bytes = s->vocab_bytes;
        h.val_fraction = s->val_fraction;
        h.test_fraction = s->test_fraction;
        memcpy(h.source, s->source, sizeof h.source);
        for (int i = 0; i < 3; i++) {
            h.n[i] = s->n[i];
            h.text_bytes[i] = s->text_bytes[i];
            h.text_characters[i] = s->text_characters[i];
            h.loaded[i] = s->tokens[i] != NULL;
        }
    }
    if (lb_transfer_bytes(fd, &h, sizeof h, send_side) != 0)
        return -1;
    if (!send_side) {
        memset(s, 0, sizeof *s);
        s->present = 1;
        s->kind = h.kind;
        s->vocab_size = h.vocab_size;
        s->unk_id = h.unk_id;
        s->source_bytes = h.source_bytes;
        s->vocab_bytes = h.vocab_bytes;
        s->val_fraction = h.val_fraction;
        s->test_fraction = h.test_fraction;
        memcpy(s->source, h.source, sizeof s->source);
        s->source[sizeof s->source - 1] = '\0';
        if (h.vocab_bytes < 0 || !(s->vocab_data = malloc((size_t)(h.vocab_bytes > 0 ? h.vocab_bytes : 1))))
            return -1;
        for (int i = 0; i < 3; i++) {
            s->n[i] = h.n[i];
            s->text_bytes[i] = h.text_bytes[i];
            s->text_characters[i] = h.text_characters[i];
            if (h.loaded[i] && (h.n[i] < 0 || !(s->tokens[i] = malloc((size_t)(h.n[i] > 0 ? h.n[i] : 1) * 4))))
                return -1;
        }
    }
    if (lb_transfer_bytes(fd, s->vocab_data, (size_t)s->vocab_bytes, send_side) != 0)
        return -1;
    for (int i = 0; i < 3; i++)
        if (s->tokens[i] && lb_transfer_bytes(fd, s->tokens[i], (size_t)s->n[i] * 4, send_side) != 0)
            return -1;
    return 0;
}

lb_vocab *lb_text_store_vocab(const lb_text_store *s, const char *file)
{
    return vocab_from_bytes(s->kind, s->vocab_size, s->unk_id, s->vocab_data, s->vocab_bytes, file);
}

/* ---- import ---- */

void lb_text_options_default(lb_text_options *opt)
{
    LB_CHECK_ARG(opt);
    memset(opt, 0, sizeof *opt);
    opt->vocab = LB_VOCAB_CHAR;
    opt->val_fraction = 0.1;
    opt->test_fraction = 0.05;
    opt->unk = LB_UNK_MAP;
    opt->max_vocab = LB_TEXT_MAX_VOCAB_DEFAULT;
    opt->vocab_size = LB_TEXT_SUBWORD_VOCAB_DEFAULT;
    opt->character_coverage = 0.9995;
    opt->seed = 1;
}

/* One input as read: its name and where its bytes start in the text. */
typedef struct input_file {
    const char *name; /* as given, "standard input" for "-" */
    int64_t start, bytes; /* its text in the buffer (after a byte-order mark) */
    int64_t origin;       /* where the file's byte 0 is in the buffer (messages give offsets from it) */
    dev_t dev;
    ino_t ino;
    int has_id;
} input_file;

/* Reads all of fd into *buf (grown), appending at *len. */
static lb_status read_all(int fd, const char *name, unsigned char **buf, int64_t *len, int64_t *cap, int64_t hint)
{
    if (hint > 0 && *len + hint + 1 > *cap) {
        unsigned char *grown = realloc(*buf, (size_t)(*len + hint + 1));
        if (!grown)
            return lb_error(LB_ERR_MEMORY, "%s: out of memory for %lld bytes of text", name, (long long)(*len + hint));
        *buf = grown;
        *cap = *len + hint + 1;
    }
    for (;;) {
        if (*len == *cap) {
            int64_t next = *cap < (1 << 20) ? (1 << 20) : *cap * 2;
            unsigned char *grown = realloc(*buf, (size_t)next);
            if (!grown)
                return lb_error(LB_ERR_MEMORY, "%s: out of memory for %lld bytes of text", name, (long long)next);
            *buf = grown;
            *cap = next;
        }
        ssize_t n = read(fd, *buf + *len, (size_t)(*cap - *len));
        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0)
            return lb_error(LB_ERR_IO, "%s: cannot read: %s", name, lb_system_error(errno));
        if (n == 0)
            return LB_OK;
        *len += n;
    }
}

static lb_status open_input(const char *path, input_file *in, unsigned char **buf, int64_t *len, int64_t *cap)
{
    int is_stdin = strcmp(path, "-") == 0;
    in->name = is_stdin ? "standard input" : path;
    in->start = *len;
    int fd = is_stdin ? STDIN_FILENO : open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return lb_error(LB_ERR_IO, "%s: cannot read: %s", path, lb_system_error(errno));
    struct stat sb;
    lb_status st = fstat(fd, &sb) == 0 ? LB_OK : lb_error(LB_ERR_IO, "%s: cannot stat: %s", in->name, lb_system_error(errno));
    if (st == LB_OK && S_ISDIR(sb.st_mode))
        st = lb_error(LB_ERR_IO, "%s: is a folder, not a text file", in->name);
    else if (st == LB_OK && (S_ISCHR(sb.st_mode) || S_ISBLK(sb.st_mode)) && !is_stdin)
        st = lb_error(LB_ERR_IO, "%s: is a device, not a text file", in->name);
    else if (st == LB_OK && S_ISSOCK(sb.st_mode) && !is_stdin)
        st = lb_error(LB_ERR_IO, "%s: is a socket, not a text file", in->name);
    if (st == LB_OK && S_ISREG(sb.st_mode)) {
        in->dev = sb.st_dev;
        in->ino = sb.st_ino;
        in->has_id = 1;
    }
    if (st == LB_OK)
        st = read_all(fd, in->name, buf, len, cap, S_ISREG(sb.st_mode) ? (int64_t)sb.st_size : 0);
    if (!is_stdin)
        close(fd);
    in->origin = in->start;
    in->bytes = *len - in->start;
    int64_t bom = st == LB_OK ? (int64_t)lb_text_bom_length(*buf + in->start, (size_t)in->bytes) : 0;
    in->start += bom;
    in->bytes -= bom;
    if (st == LB_OK && in->bytes == 0)
        st = lb_error(LB_ERR_VALUE, "%s: is empty: there is no text to import", in->name);
    return st;
}

/* "FILE, byte offset K" of byte `pos` of the concatenated text. */
static void where_is(const input_file *in, int n, int64_t pos, char *buf, size_t size)
{
    int f = 0;
    while (f + 1 < n && pos >= in[f + 1].start)
        f++;
    snprintf(buf, size, "%s, byte offset %lld", in[f].name, (long long)(pos - in[f].origin));
}

/* The byte position of symbol `index` (char: re-decodes from the start; rare: errors only). */
static int64_t byte_of_symbol(const unsigned char *text, const input_file *in, int n_in, int64_t index, int is_char)
{
    if (!is_char)
        return index;
    int64_t count = 0;
    for (int f = 0; f < n_in; f++)
        for (int64_t pos = in[f].start, end = in[f].start + in[f].bytes; pos < end;) {
            if (count++ == index)
                return pos;
            int32_t cp;
            utf8proc_ssize_t k = utf8proc_iterate(text + pos, (utf8proc_ssize_t)(end - pos), &cp);
            pos += k > 0 ? k : 1;
        }
    return -1;
}

/* Decodes every input into code points (char: validated by utf8proc per file, so a
 * character cannot span two files) or bytes; *n receives the count. */
static lb_status decode_text(const unsigned char *text, const input_file *in, int n_in, int is_char, int32_t *cps,
                             int64_t *n)
{
    int64_t count = 0;
    for (int f = 0; f < n_in; f++) {
        int64_t end = in[f].start + in[f].bytes;
        for (int64_t pos = in[f].start; pos < end;) {
            unsigned char c = text[pos];
            if (!is_char || c < 0x80) { /* ASCII (or a byte): itself */
                cps[count++] = c;
                pos++;
                continue;
            }
            int32_t cp;
            utf8proc_ssize_t k = utf8proc_iterate(text + pos, (utf8proc_ssize_t)(end - pos), &cp);
            if (k < 0) {
                char why[160];
                return lb_error(LB_ERR_VALUE, "%s: invalid UTF-8 at byte offset %lld (byte 0x%02x: %s): fix the text, or "
                                "import it byte by byte with --vocab byte",
                                in[f].name, (long long)(pos - in[f].origin), (unsigned)c,
                                lb_text_utf8_problem(text + pos, (size_t)(end - pos), why, sizeof why));
            }
            cps[count++] = cp;
            pos += k;
        }
    }
    *n = count;
    return LB_OK;
}

/* What the writing child needs. */
typedef struct text_writer {
    const char *file, *tmp;
    const lb_text_options *opt;
    const lb_vocab *vocab;
    const int32_t *tokens; /* [N] every split in order */
    int64_t n[3];
    const char *source;
    int64_t source_bytes;
    const int64_t *split_bytes, *split_characters; /* [3] */
} text_writer;

static lb_status write_stream(hid_t fid, const text_writer *w, int split, const int32_t *data)
{
    int64_t n = w->n[split];
    hid_t group = lb_h5_create_group(fid, split_names[split]);
    hsize_t cur[1] = {(hsize_t)n}, max[1] = {H5S_UNLIMITED};
    hsize_t chunk[1] = {(hsize_t)(n < CHUNK_TOKENS ? (n > 0 ? n : 1) : CHUNK_TOKENS)};
    hid_t space = H5Screate_simple(1, cur, max);
    hid_t plist = H5Pcreate(H5P_DATASET_CREATE);
    int ok = group >= 0 && space >= 0 && plist >= 0 && H5Pset_chunk(plist, 1, chunk) >= 0 && H5Pset_shuffle(plist) >= 0 &&
             H5Pset_deflate(plist, 1) >= 0 && H5Pset_fletcher32(plist) >= 0 && H5Pset_obj_track_times(plist, 0) >= 0;
    hid_t dset = ok ? H5Dcreate2(group, "tokens", H5T_STD_I32LE, space, H5P_DEFAULT, plist, H5P_DEFAULT) : -1;
    lb_status st = dset < 0 ? lb_error(LB_ERR_IO, "%s: cannot create dataset /%s/tokens: %s", w->file, split_names[split], lb_h5_cause()) : LB_OK;
    if (st == LB_OK && n > 0 && H5Dwrite(dset, H5T_NATIVE_INT32, H5S_ALL, H5S_ALL, H5P_DEFAULT, data) < 0)
        st = lb_error(LB_ERR_IO, "%s: cannot write /%s/tokens: %s", w->file, split_names[split], lb_h5_cause());
    if (st == LB_OK)
        st = lb_h5_write_attr_int(group, "text_bytes", w->split_bytes[split], w->file);
    if (st == LB_OK)
        st = lb_h5_write_attr_int(group, "text_characters", w->split_characters[split], w->file);
    lb_h5_close(dset);
    lb_h5_close(plist);
    lb_h5_close(space);
    lb_h5_close(group);
    return st;
}

static lb_status write_corpus(void *ctx)
{
    text_writer *w = ctx;
    hid_t fid = H5Fcreate(w->tmp, H5F_ACC_TRUNC, H5P_DEFAULT, H5P_DEFAULT);
    if (fid < 0)
        return lb_error(LB_ERR_IO, "%s: cannot create the temporary file %s: %s",
                        w->file, w->tmp, lb_h5_cause());
    int64_t v = lb_vocab_size(w->vocab);
    lb_status st = lb_h5_write_attr_string(fid, "task", "text", w->file);
    if (st == LB_OK)
        st = lb_h5_write_attr_int(fid, "format_version", LB_DATA_FORMAT_VERSION, w->file);
    if (st == LB_OK)
        st = lb_h5_write_attr_int(fid, "vocab_size", v, w->file);
    if (st == LB_OK)
        st = lb_h5_write_attr_int(fid, "num_classes", v, w->file);
    if (st == LB_OK)
        st = lb_h5_write_attr_string(fid, "vocab", lb_vocab_kind_name(w->opt->vocab), w->file);
    if (st == LB_OK)
        st = lb_h5_write_attr_int(fid, "unk_id", lb_vocab_unk_id(w->vocab), w->file);
    if (st == LB_OK)
        st = lb_h5_write_attr_real(fid, "val_fraction", w->opt->val_fraction, w->file);
    if (st == LB_OK)
        st = lb_h5_write_attr_real(fid, "test_fraction", w->opt->test_fraction, w->file);
    if (st == LB_OK)
        st = lb_h5_write_attr_string(fid, "source", w->source, w->file);
    if (st == LB_OK)
        st = lb_h5_write_attr_int(fid, "source_bytes", w->source_bytes, w->file);
    if (st == LB_OK && w->opt->documents)
        st = lb_h5_write_attr_string(fid, "documents", documents_names[w->opt->documents], w->file);
    if (st == LB_OK)
        st = lb_vocab_h5_write(fid, w->vocab, w->file);
    const int32_t *p = w->tokens;
    for (int s = 0; st == LB_OK && s < 3; p += w->n[s], s++)
        st = write_stream(fid, w, s, p);
    return lb_h5_finish_temporary(fid, w->tmp, w->file, st);
}

static lb_status check_options(const lb_text_options *o)
{
    if (!lb_vocab_kind_name(o->vocab))
        return lb_error(LB_ERR_VALUE, "text import: vocab must be char, byte, bpe or unigram (got %d)", (int)o->vocab);
    if (o->vocab_size < LB_TEXT_SUBWORD_VOCAB_MIN || o->vocab_size > LB_TEXT_SUBWORD_VOCAB_MAX)
        return lb_error(LB_ERR_VALUE, "option --vocab-size: %lld is outside [%d, %d]", (long long)o->vocab_size,
                        LB_TEXT_SUBWORD_VOCAB_MIN, LB_TEXT_SUBWORD_VOCAB_MAX);
    if (o->documents < LB_DOCUMENTS_NONE || o->documents > LB_DOCUMENTS_BLANK_LINES)
        return lb_error(LB_ERR_VALUE, "text import: documents must be none, lines or blank-lines (got %d)", (int)o->documents);
    if (o->long_documents < LB_DOC_DROP || o->long_documents > LB_DOC_REFUSE)
        return lb_error(LB_ERR_VALUE, "text import: the --short policy must be drop, truncate or refuse (got %d)",
                        (int)o->long_documents);
    if (o->context != 0 && (o->context < 3 || o->context > (1 << 24)))
        return lb_error(LB_ERR_VALUE, "option --context: %lld is outside [3, %d] (or 0: any length)", (long long)o->context,
                        1 << 24);
    if (!(o->character_coverage > 0 && o->character_coverage <= 1))
        return lb_error(LB_ERR_VALUE, "option --character-coverage: %g is outside (0, 1]", o->character_coverage);
    if (!lb_unk_policy_name(o->unk))
        return lb_error(LB_ERR_VALUE, "text import: unk must be map or error (got %d)", (int)o->unk);
    if (!(o->val_fraction >= 0 && o->val_fraction <= 0.5))
        return lb_error(LB_ERR_VALUE, "option --val-fraction: %g is outside [0, 0.5]", o->val_fraction);
    if (!(o->test_fraction >= 0 && o->test_fraction <= 0.5))
        return lb_error(LB_ERR_VALUE, "option --test-fraction: %g is outside [0, 0.5]", o->test_fraction);
    if (o->max_vocab < 2 || o->max_vocab > CODE_POINTS)
        return lb_error(LB_ERR_VALUE, "option --max-vocab: %lld is outside [2, %d]", (long long)o->max_vocab, CODE_POINTS);
    return LB_OK;
}

/* Maps code points to ids in place: the training split's distinct code points in order;
 * val/test characters outside them to <unk> (map) or an error naming the first. */
/* With o->like: maps code points (or bytes) to like's ids in place; a symbol outside it
 * becomes its <unk> (unk map, when it has one) or refuses the text naming the first. */
static lb_status like_vocab(const lb_text_options *o, int32_t *tok, const int64_t *n, const unsigned char *text,
                            const input_file *in, int n_in, lb_vocab **vocab_out, lb_text_summary *sum)
{
    const lb_vocab *v = o->like;
    const char *name = o->like_name ? o->like_name : "the --like file";
    int64_t unk = lb_vocab_unk_id(v), unknown = 0, first = -1, total = n[0] + n[1] + n[2];
    for (int64_t i = 0; i < total; i++)
        if (lb_vocab_lookup(v, tok[i]) < 0 && unknown++ == 0)
            first = i;
    if (unknown > 0) {
        char where[512], what[48];
        int is_char = lb_vocab_get_kind(v) == LB_VOCAB_CHAR;
        where_is(in, n_in, byte_of_symbol(text, in, n_in, first, is_char), where, sizeof where);
        describe_cp(tok[first], what, sizeof what);
        const char *split = first < n[0] ? "train" : first < n[0] + n[1] ? "val" : "test";
        if (o->unk == LB_UNK_ERROR)
            return lb_error(LB_ERR_VALUE, "%s: character %s of the %s split is not in the vocabulary of %s (%lld such "
                            "characters): use --unk map to map them to <unk>", where, what, split, name,
                            (long long)unknown);
        if (unk < 0)
            return lb_error(LB_ERR_VALUE, "%s: character %s of the %s split is not in the vocabulary of %s (%lld such "
                            "characters), which has no <unk> symbol to map it to (its training text had no unknown "
                            "characters): remove such characters from the text", where, what, split, name,
                            (long long)unknown);
        if (sum) {
            sum->unknown = unknown;
            sum->first_unknown = tok[first];
            snprintf(sum->first_unknown_where, sizeof sum->first_unknown_where, "%s", where);
        }
    }
    for (int64_t i = 0; i < total; i++) {
        int64_t id = lb_vocab_lookup(v, tok[i]);
        tok[i] = (int32_t)(id >= 0 ? id : unk);
    }
    *vocab_out = lb_vocab_copy(v);
    return *vocab_out ? LB_OK : lb_last_status();
}

static lb_status build_vocab(const lb_text_options *o, int32_t *tok, const int64_t *n, const unsigned char *text,
                             const input_file *in, int n_in, lb_vocab **vocab_out, lb_text_summary *sum)
{
    if (o->like)
        return like_vocab(o, tok, n, text, in, n_in, vocab_out, sum);
    if (o->vocab == LB_VOCAB_BYTE) {
        *vocab_out = lb_vocab_new_bytes();
        return *vocab_out ? LB_OK : lb_last_status();
    }
    int32_t *id_of = malloc((size_t)CODE_POINTS * sizeof *id_of); /* code point -> id, -1 = absent */
    if (!id_of)
        return lb_error(LB_ERR_MEMORY, "text import: out of memory for the code-point table");
    memset(id_of, 0xff, (size_t)CODE_POINTS * sizeof *id_of);
    for (int64_t i = 0; i < n[0]; i++)
        id_of[tok[i]] = 0;
    int64_t distinct = 0;
    for (int32_t cp = 0; cp < CODE_POINTS; cp++)
        if (id_of[cp] == 0)
            id_of[cp] = (int32_t)distinct++;
    lb_status st = LB_OK;
    if (distinct > o->max_vocab)
        st = lb_error(LB_ERR_VALUE, "%s%s: the training text has %lld distinct characters, more than the limit of %lld "
                      "(--max-vocab): import it with --vocab byte (256 symbols), or raise --max-vocab",
                      in[0].name, n_in > 1 ? " ..." : "", (long long)distinct, (long long)o->max_vocab);
    int64_t unknown = 0, first = -1, total = n[0] + n[1] + n[2];
    for (int64_t i = n[0]; st == LB_OK && i < total; i++)
        if (id_of[tok[i]] < 0 && unknown++ == 0)
            first = i;
    if (st == LB_OK && unknown > 0) {
        char where[512], what[48];
        where_is(in, n_in, byte_of_symbol(text, in, n_in, first, 1), where, sizeof where);
        if (o->unk == LB_UNK_ERROR)
            st = lb_error(LB_ERR_VALUE, "%s: character %s of the %s split is not in the training text's vocabulary "
                          "(%lld such characters): use --unk map to map them to <unk>, or --vocab byte",
                          where, describe_cp(tok[first], what, sizeof what), first < n[0] + n[1] ? "val" : "test",
                          (long long)unknown);
        if (sum) {
            sum->unknown = unknown;
            sum->first_unknown = tok[first];
            snprintf(sum->first_unknown_where, sizeof sum->first_unknown_where, "%s", where);
        }
    }
    int32_t *cps = st == LB_OK ? malloc((size_t)(distinct > 0 ? distinct : 1) * sizeof *cps) : NULL;
    if (st == LB_OK && !cps)
        st = lb_error(LB_ERR_MEMORY, "text import: out of memory");
    for (int32_t cp = 0, k = 0; st == LB_OK && cp < CODE_POINTS; cp++)
        if (id_of[cp] >= 0)
            cps[k++] = cp;
    if (st == LB_OK) {
        for (int64_t i = 0; i < total; i++) /* in place: code point -> id */
            tok[i] = id_of[tok[i]] >= 0 ? id_of[tok[i]] : (int32_t)distinct;
        *vocab_out = lb_vocab_new_chars(cps, distinct, unknown > 0);
        st = *vocab_out ? LB_OK : lb_last_status();
    }
    free(cps);
    free(id_of);
    return st;
}

/* ---- documents ---- */

enum { DOC_SEPARATOR = 0x03 }; /* U+0003 (END OF TEXT), the byte that separates documents */

static const char *const long_names[] = {"drop", "truncate", "refuse"};

lb_status lb_documents_kind_parse(const char *name, lb_documents_kind *out)
{
    LB_CHECK_ARG(out, LB_ERR_VALUE);
    for (int i = 0; name && i < 3; i++)
        if (strcmp(name, documents_names[i]) == 0) {
            *out = (lb_documents_kind)i;
            return LB_OK;
        }
    return lb_error(LB_ERR_VALUE, "documents '%s': expected lines or blank-lines", name ? name : "(null)");
}

lb_status lb_long_document_parse(const char *name, lb_long_document *out)
{
    LB_CHECK_ARG(out, LB_ERR_VALUE);
    for (int i = 0; name && i < 3; i++)
        if (strcmp(name, long_names[i]) == 0) {
            *out = (lb_long_document)i;
            return LB_OK;
        }
    return lb_error(LB_ERR_VALUE, "'%s': expected drop, truncate or refuse", name ? name : "(null)");
}

int64_t lb_vocab_separator_id(const lb_vocab *v)
{
    LB_CHECK_ARG(v, -1);
    if (v->spm)
        return lb_spm_eos_id(v->spm);
    return lb_vocab_lookup(v, DOC_SEPARATOR);
}

struct lb_doc_set {
    int32_t *tokens;  /* the split's stream (a copy) */
    int64_t *start;   /* [n] where each document starts in tokens */
    int64_t *length;  /* [n] its tokens */
    int64_t *order;   /* [n] the documents sorted by their tokens */
    int64_t n;
};

static const lb_doc_set *sorting_set;
static int doc_compare(const int32_t *a, int64_t na, const int32_t *b, int64_t nb)
{
    for (int64_t i = 0; i < na && i < nb; i++)
        if (a[i] != b[i])
            return a[i] < b[i] ? -1 : 1;
    return na < nb ? -1 : na > nb;
}
static int by_document(const void *x, const void *y)
{
    const lb_doc_set *d = sorting_set;
    int64_t i = *(const int64_t *)x, j = *(const int64_t *)y;
    return doc_compare(d->tokens + d->start[i], d->length[i], d->tokens + d->start[j], d->length[j]);
}

void lb_doc_set_free(lb_doc_set *set)
{
    if (!set)
        return;
    free(set->tokens);
    free(set->start);
    free(set->length);
    free(set->order);
    free(set);
}

lb_doc_set *lb_doc_set_new(const lb_dataset *ds, const char *split)
{
    LB_CHECK_ARG(ds, NULL);
    int64_t n = 0;
    const int32_t *tok = lb_dataset_tokens(ds, split, &n);
    if (!tok)
        return NULL;
    int64_t sep = lb_vocab_separator_id(lb_dataset_vocab(ds));
    if (sep < 0) {
        lb_error(LB_ERR_VALUE, "%s: its vocabulary has no document separator: it was not imported with --documents",
                 lb_dataset_path(ds));
        return NULL;
    }
    lb_doc_set *d = calloc(1, sizeof *d);
    int64_t docs = 0;
    for (int64_t i = 0; i < n; i++)
        docs += tok[i] == sep;
    if (d) {
        d->tokens = malloc((size_t)(n > 0 ? n : 1) * sizeof *d->tokens);
        d->start = malloc((size_t)(docs + 1) * sizeof *d->start);
        d->length = malloc((size_t)(docs + 1) * sizeof *d->length);
        d->order = malloc((size_t)(docs + 1) * sizeof *d->order);
    }
    if (!d || !d->tokens || !d->start || !d->length || !d->order) {
        lb_doc_set_free(d);
        lb_error(LB_ERR_MEMORY, "%s: out of memory for the documents of the %s split", lb_dataset_path(ds), split);
        return NULL;
    }
    memcpy(d->tokens, tok, (size_t)n * sizeof *tok);
    for (int64_t i = 0, begin = 0; i <= n; i++)
        if (i == n || tok[i] == sep) {
            if (i > begin) {
                d->start[d->n] = begin;
                d->length[d->n] = i - begin;
                d->order[d->n] = d->n;
                d->n++;
            }
            begin = i + 1;
        }
    sorting_set = d;
    qsort(d->order, (size_t)d->n, sizeof *d->order, by_document);
    return d;
}

int lb_doc_set_has(const lb_doc_set *set, const int32_t *ids, int64_t n)
{
    LB_CHECK_ARG(set, 0);
    LB_CHECK_ARG(ids, 0);
    int64_t lo = 0, hi = set->n;
    while (lo < hi) {
        int64_t mid = lo + (hi - lo) / 2, k = set->order[mid];
        int c = doc_compare(set->tokens + set->start[k], set->length[k], ids, n);
        if (c == 0)
            return 1;
        if (c < 0)
            lo = mid + 1;
        else
            hi = mid;
    }
    return 0;
}

int64_t lb_doc_set_size(const lb_doc_set *set)
{
    LB_CHECK_ARG(set, 0);
    return set->n;
}

/* One document of the text: bytes [start, end). */
typedef struct doc_span {
    int64_t start, end;
    int split;
} doc_span;

/* A line [start, end) without its '\r' is blank (only spaces, tabs) or empty. */
static int blank_line(const unsigned char *t, int64_t start, int64_t end)
{
    for (int64_t i = start; i < end; i++)
        if (t[i] != ' ' && t[i] != '\t' && t[i] != '\r')
            return 0;
    return 1;
}

/* The symbols of text[start, end): characters (char and subword import) or bytes. */
static int64_t symbols_in(const unsigned char *t, int64_t start, int64_t end, int is_char)
{
    int64_t k = 0;
    for (int64_t i = start; i < end; i++)
        k += !is_char || (t[i] & 0xC0) != 0x80;
    return k;
}

/* Rewrites the text into its documents split by a seeded draw: each split's documents in
 * file order, each after a separator byte, and one more separator at the end of each
 * split; doc_at[0..4) receive the splits' byte boundaries. A document longer than the
 * context (characters or bytes, for char and byte; bpe and unigram are checked in tokens
 * when encoded) is dropped, truncated or refused here. */
static lb_status arrange_documents(const lb_text_options *o, unsigned char **text, int64_t *len, const input_file *in,
                                   int n_in, int64_t *doc_at, lb_text_summary *sum)
{
    const unsigned char *t = *text;
    for (int64_t i = 0; i < *len; i++)
        if (t[i] == DOC_SEPARATOR) {
            char where[512];
            where_is(in, n_in, i, where, sizeof where);
            return lb_error(LB_ERR_VALUE, "%s: the text holds the byte 0x03 (U+0003), the separator --documents puts "
                            "between documents: remove it", where);
        }
    doc_span *docs = malloc((size_t)(*len / 2 + 2) * sizeof *docs);
    if (!docs)
        return lb_error(LB_ERR_MEMORY, "text import: out of memory for the documents");
    int64_t n = 0, open_start = -1, open_end = -1;
    for (int64_t pos = 0; pos < *len;) {
        int64_t end = pos;
        while (end < *len && t[end] != '\n')
            end++;
        int64_t stop = end > pos && t[end - 1] == '\r' ? end - 1 : end;
        int blank = blank_line(t, pos, stop);
        if (o->documents == LB_DOCUMENTS_LINES) {
            if (!blank)
                docs[n++] = (doc_span){pos, stop, 0};
        } else if (!blank) { /* a paragraph grows by this line */
            if (open_start < 0)
                open_start = pos;
            open_end = stop;
        }
        if (o->documents == LB_DOCUMENTS_BLANK_LINES && open_start >= 0 && (blank || end >= *len)) {
            docs[n++] = (doc_span){open_start, open_end, 0};
            open_start = -1;
        }
        pos = end + 1;
    }
    if (o->documents == LB_DOCUMENTS_BLANK_LINES && open_start >= 0)
        docs[n++] = (doc_span){open_start, open_end, 0};
    /* the split: a seeded permutation, val first, then test, the rest train */
    int64_t n_val = (int64_t)floor((double)n * o->val_fraction), n_test = (int64_t)floor((double)n * o->test_fraction);
    int64_t *perm = malloc((size_t)(n > 0 ? n : 1) * sizeof *perm);
    if (!perm) {
        free(docs);
        return lb_error(LB_ERR_MEMORY, "text import: out of memory for the documents");
    }
    lb_rng rng;
    lb_rng_seed(&rng, o->seed);
    for (int64_t i = 0; i < n; i++)
        perm[i] = i;
    for (int64_t i = n - 1; i > 0; i--) {
        int64_t j = (int64_t)lb_rng_below(&rng, (uint64_t)(i + 1)), x = perm[i];
        perm[i] = perm[j];
        perm[j] = x;
    }
    for (int64_t i = 0; i < n; i++)
        docs[perm[i]].split = i < n_val ? 1 : i < n_val + n_test ? 2 : 0;
    free(perm);
    int is_char = o->vocab != LB_VOCAB_BYTE, subword = lb_vocab_kind_is_subword(o->vocab);
    unsigned char *out = malloc((size_t)(*len + n + 4));
    lb_status st = out ? LB_OK : lb_error(LB_ERR_MEMORY, "text import: out of memory for the documents");
    int64_t used = 0;
    for (int s = 0; st == LB_OK && s < 3; s++) {
        doc_at[s] = used;
        out[used++] = DOC_SEPARATOR;
        for (int64_t d = 0; st == LB_OK && d < n; d++) {
            if (docs[d].split != s)
                continue;
            int64_t start = docs[d].start, end = docs[d].end, k = symbols_in(t, start, end, is_char);
            if (!subword && o->context > 0 && k + 2 > o->context) {
                if (o->long_documents == LB_DOC_REFUSE) {
                    char where[512];
                    where_is(in, n_in, start, where, sizeof where);
                    st = lb_error(LB_ERR_VALUE, "%s: a document of %lld %s, more than --context %lld holds with its "
                                  "two separators: use --short drop or truncate, or a longer --context", where,
                                  (long long)k, is_char ? "characters" : "bytes", (long long)o->context);
                    break;
                }
                if (o->long_documents == LB_DOC_DROP) {
                    sum->documents_dropped++;
                    continue;
                }
                sum->documents_truncated++;
                for (int64_t kept = 0, i = start; i < end; i++) { /* cut at a character */
                    kept += !is_char || (t[i] & 0xC0) != 0x80;
                    if (kept > o->context - 2) {
                        end = i;
                        break;
                    }
                }
            }
            memcpy(out + used, t + start, (size_t)(end - start));
            used += end - start;
            out[used++] = DOC_SEPARATOR;
            sum->documents[s]++;
        }
    }
    doc_at[3] = used;
    free(docs);
    if (st != LB_OK) {
        free(out);
        return st;
    }
    if (n == 0 || sum->documents[0] == 0) {
        free(out);
        return lb_error(LB_ERR_VALUE, "%s%s: %s", in[0].name, n_in > 1 ? " ..." : "",
                        n == 0 ? "holds no document (every line is blank)"
                               : "no document is left for the training split (all longer than --context?)");
    }
    free(*text);
    *text = out;
    *len = used;
    return LB_OK;
}

/* Encodes one split's text of documents for a subword vocabulary: each document on its
 * own, SEP (</s>) before the first and after each; a document longer than the context
 * in tokens dropped, truncated or refused. ids NULL: counts only. */
static lb_status subword_documents(const lb_text_options *o, const lb_vocab *v, const unsigned char *t, int64_t len,
                                   int32_t *ids, int64_t *count, lb_text_summary *sum, int64_t *kept, const char *name)
{
    int32_t eos = (int32_t)lb_vocab_eos_id(v);
    if (eos < 0)
        return lb_error(LB_ERR_VALUE, "%s: the tokenizer has no </s> piece to end documents with", name);
    int64_t k = 0;
    if (ids)
        ids[k] = eos;
    k++;
    lb_status st = LB_OK;
    for (int64_t pos = 1; st == LB_OK && pos < len;) { /* t[0] is a separator */
        int64_t end = pos;
        while (end < len && t[end] != DOC_SEPARATOR)
            end++;
        int32_t *doc = NULL;
        int64_t n = 0;
        char why[256];
        if (lb_spm_encode(v->spm, (const char *)t + pos, (size_t)(end - pos), &doc, &n, why, sizeof why) != 0)
            st = lb_error(LB_ERR_MEMORY, "SentencePiece encoding failed: %s", why);
        int keep = 1;
        if (st == LB_OK && o->context > 0 && n + 2 > o->context) {
            if (o->long_documents == LB_DOC_REFUSE)
                st = lb_error(LB_ERR_VALUE, "%s: a document of %lld tokens, more than --context %lld holds with its two "
                              "separators: use --short drop or truncate, or a longer --context", name, (long long)n,
                              (long long)o->context);
            else if (o->long_documents == LB_DOC_DROP)
                keep = 0;
            else
                n = o->context - 2;
            if (ids && st == LB_OK) { /* counted once, on the pass that writes */
                *(keep ? &sum->documents_truncated : &sum->documents_dropped) += 1;
                *kept -= !keep;
            }
        }
        if (st == LB_OK && keep) {
            if (ids) {
                memcpy(ids + k, doc, (size_t)n * sizeof *doc);
                ids[k + n] = eos;
            }
            k += n + 1;
        }
        free(doc);
        pos = end + 1;
    }
    *count = k;
    return st;
}

/* The tokenizer of a bpe or unigram corpus: like's (--like, --tokenizer) or one trained
 * by SentencePiece on the training split's text alone; then each split's text
 * text[byte_at[s] .. byte_at[s + 1]) encoded on its own. *tok is replaced by the pieces'
 * ids and n by their counts. */
static lb_status subword_corpus(const lb_text_options *o, const unsigned char *text, const int64_t *byte_at,
                                int32_t **tok, int64_t *n, lb_vocab **vocab_out, lb_text_summary *sum, const char *name)
{
    lb_vocab *v = NULL;
    lb_status st = LB_OK;
    if (o->like) {
        v = lb_vocab_copy(o->like);
    } else {
        lb_spm_train_options to = {lb_vocab_kind_name(o->vocab), o->vocab_size, o->character_coverage, o->seed, 1};
        void *model = NULL;
        size_t model_bytes = 0;
        int64_t lowest = 0, highest = 0;
        char why[512];
        double t0 = lb_clock_wall();
        if (lb_spm_train(&to, (const char *)text, (size_t)byte_at[1], &model, &model_bytes, &lowest, &highest, why,
                         sizeof why) != 0) {
            if (highest > 0 && highest < LB_TEXT_SUBWORD_VOCAB_MIN + 32)
                st = lb_error(LB_ERR_VALUE, "%s: the training text (%lld characters) is too small to train a %s tokenizer: "
                              "SentencePiece finds at most %lld pieces in it, little beyond the 259 of byte fallback, "
                              "<unk>, <s> and </s>; give more text", name, (long long)n[0], to.type, (long long)highest);
            else if (highest > 0)
                st = lb_error(LB_ERR_VALUE, "--vocab-size %lld: SentencePiece can make at most %lld %s pieces from this "
                              "training text (%s, %lld characters): choose --vocab-size %lld or less", (long long)o->vocab_size,
                              (long long)highest, to.type, name, (long long)n[0], (long long)highest);
            else if (lowest > 0)
                st = lb_error(LB_ERR_VALUE, "--vocab-size %lld: a %s tokenizer of this training text (%s) needs at least %lld "
                              "pieces (its characters kept by --character-coverage, the 256 bytes of byte fallback, "
                              "<unk>, <s> and </s>): choose --vocab-size %lld or more, or lower --character-coverage",
                              (long long)o->vocab_size, to.type, name, (long long)lowest, (long long)lowest);
            else
                st = lb_error(LB_ERR_VALUE, "%s: SentencePiece could not train a %s tokenizer on the training text: %s", name,
                              to.type, why);
        }
        sum->tokenizer_seconds = lb_clock_wall() - t0;
        if (st == LB_OK)
            v = lb_vocab_new_sentencepiece(model, model_bytes, "the trained tokenizer");
        free(model);
    }
    if (st == LB_OK && !v)
        st = lb_last_status();
    int32_t *ids = NULL;
    int64_t count[3] = {0, 0, 0}, total = 0;
    for (int s = 0; st == LB_OK && s < 3; s++) {
        int64_t got = 0;
        if (o->documents)
            st = subword_documents(o, v, text + byte_at[s], byte_at[s + 1] - byte_at[s], NULL, &got, sum,
                                   &sum->documents[s], name);
        else
            st = lb_vocab_encode(v, (const char *)text + byte_at[s], (size_t)(byte_at[s + 1] - byte_at[s]), 1, NULL, 0,
                                 &got);
        count[s] = got;
        total += got;
    }
    if (st == LB_OK && !(ids = malloc((size_t)(total > 0 ? total : 1) * sizeof *ids)))
        st = lb_error(LB_ERR_MEMORY, "text import: out of memory for %lld tokens", (long long)total);
    for (int s = 0; st == LB_OK && s < 3; s++) {
        int64_t got = 0, offset = s == 0 ? 0 : s == 1 ? count[0] : count[0] + count[1];
        if (o->documents)
            st = subword_documents(o, v, text + byte_at[s], byte_at[s + 1] - byte_at[s], ids + offset, &got, sum,
                                   &sum->documents[s], name);
        else
            st = lb_vocab_encode(v, (const char *)text + byte_at[s], (size_t)(byte_at[s + 1] - byte_at[s]), 1,
                                 ids + offset, count[s], &got);
    }
    int64_t unk = v ? lb_vocab_unk_id(v) : -1, unknown = 0;
    for (int64_t i = 0; st == LB_OK && i < total; i++)
        unknown += ids[i] == unk;
    if (st == LB_OK && unknown > 0 && o->unk == LB_UNK_ERROR)
        st = lb_error(LB_ERR_VALUE, "%s: %lld tokens of the text are <unk> (the tokenizer has neither a piece nor byte "
                      "fallback for them): use --unk map to keep them as <unk>", name, (long long)unknown);
    if (st == LB_OK) {
        sum->unknown = unknown;
        free(*tok);
        *tok = ids;
        for (int s = 0; s < 3; s++)
            n[s] = count[s];
        *vocab_out = v;
        return LB_OK;
    }
    free(ids);
    lb_vocab_free(v);
    return st;
}

lb_status lb_text_import(const lb_text_options *opt, const char *const *paths, int n_paths, const char *out_path,
                         lb_text_summary *summary)
{
    if (!opt || !paths || !out_path)
        return lb_error(LB_ERR_VALUE, "lb_text_import: options, paths and output must not be NULL");
    if (n_paths < 1)
        return lb_error(LB_ERR_VALUE, "text import: no input file (give one or more, or - for standard input)");
    lb_text_summary local;
    lb_text_summary *sum = summary ? summary : &local;
    memset(sum, 0, sizeof *sum);
    lb_status st = check_options(opt);
    if (st != LB_OK)
        return st;
    lb_text_options with_like;
    if (opt->like) { /* the kind is the --like vocabulary's */
        with_like = *opt;
        with_like.vocab = lb_vocab_get_kind(opt->like);
        opt = &with_like;
    }
    int stdin_uses = 0;
    for (int i = 0; i < n_paths; i++) {
        if (!paths[i] || !paths[i][0])
            return lb_error(LB_ERR_VALUE, "text import: input %d is an empty path", i + 1);
        stdin_uses += strcmp(paths[i], "-") == 0;
    }
    if (stdin_uses > 1)
        return lb_error(LB_ERR_VALUE, "text import: - (standard input) is given %d times; it can be read once", stdin_uses);
    if ((st = lb_output_check(out_path, "text corpus")) != LB_OK)
        return st;
    int replace = lb_output_present(out_path); /* what the user saw there (--force); nothing else is replaced */
    input_file *in = calloc((size_t)n_paths, sizeof *in);
    unsigned char *text = NULL;
    int64_t len = 0, cap = 0;
    if (!in)
        return lb_error(LB_ERR_MEMORY, "text import: out of memory");
    for (int i = 0; st == LB_OK && i < n_paths; i++)
        st = open_input(paths[i], &in[i], &text, &len, &cap);
    struct stat ob;
    if (st == LB_OK && stat(out_path, &ob) == 0)
        for (int i = 0; st == LB_OK && i < n_paths; i++)
            if (in[i].has_id && in[i].dev == ob.st_dev && in[i].ino == ob.st_ino)
                st = lb_error(LB_ERR_IO, "%s: is the input %s of this command; lookback never writes over its inputs "
                              "(choose another output path)", out_path, in[i].name);
    sum->source_bytes = len;
    int is_char = opt->vocab != LB_VOCAB_BYTE; /* bpe, unigram: split by characters as char */
    /* (documents add at most 4 separators to the text's length) */
    int32_t *tok = st == LB_OK ? malloc((size_t)(len + 8) * sizeof *tok) : NULL;
    if (st == LB_OK && !tok)
        st = lb_error(LB_ERR_MEMORY, "text import: out of memory for %lld symbols (4 bytes each)", (long long)len);
    int64_t total = 0, doc_at[4] = {0, 0, 0, 0};
    if (st == LB_OK && opt->documents && is_char) /* invalid UTF-8 named in the file as given */
        st = decode_text(text, in, n_paths, is_char, tok, &total);
    if (st == LB_OK && opt->documents) {
        st = arrange_documents(opt, &text, &len, in, n_paths, doc_at, sum);
        for (int i = 0; st == LB_OK && i < n_paths; i++) { /* one text now: its documents */
            in[i].start = i ? len : 0;
            in[i].bytes = i ? 0 : len;
        }
    }
    if (st == LB_OK)
        st = decode_text(text, in, n_paths, is_char, tok, &total);
    const char *unit = is_char ? "characters" : "bytes";
    if (st == LB_OK && total < LB_TEXT_MIN_TOKENS)
        st = lb_error(LB_ERR_VALUE, "%s%s: the text has %lld %s, fewer than the %d needed (a few windows of context for "
                      "training, validation and test)", in[0].name, n_paths > 1 ? " ..." : "", (long long)total, unit,
                      LB_TEXT_MIN_TOKENS);
    int64_t n[3] = {0, (int64_t)floor((double)total * opt->val_fraction), (int64_t)floor((double)total * opt->test_fraction)};
    n[0] = total - n[1] - n[2];
    for (int s = 0; opt->documents && s < 3; s++)
        n[s] = symbols_in(text, doc_at[s], doc_at[s + 1], is_char);
    const double fraction[3] = {1, opt->val_fraction, opt->test_fraction};
    for (int s = 0; st == LB_OK && s < 3; s++) {
        int64_t need = s == 0 ? LB_TEXT_MIN_TRAIN_TOKENS : LB_TEXT_MIN_SPLIT_TOKENS;
        if (fraction[s] > 0 && n[s] < need)
            st = lb_error(LB_ERR_VALUE, "%s%s: the %s split would hold %lld %s of %lld, fewer than %lld%s", in[0].name,
                          n_paths > 1 ? " ..." : "", split_names[s], (long long)n[s], unit, (long long)total,
                          (long long)need, s == 0 ? ": lower --val-fraction or --test-fraction" : ": raise its fraction, or set it to 0");
    }
    int64_t byte_at[4] = {0, 0, 0, len}; /* where each split's text starts, in bytes */
    for (int s = 1; st == LB_OK && s < 3; s++) {
        int64_t index = n[0] + (s == 2 ? n[1] : 0);
        byte_at[s] = index >= total ? len : byte_of_symbol(text, in, n_paths, index, is_char);
    }
    for (int s = 0; st == LB_OK && s < 3; s++) {
        sum->split_bytes[s] = byte_at[s + 1] - byte_at[s];
        sum->split_characters[s] = 0;
        for (int64_t i = byte_at[s]; i < byte_at[s + 1]; i++)
            sum->split_characters[s] += (text[i] & 0xC0) != 0x80;
    }
    lb_vocab *vocab = NULL;
    if (st == LB_OK && lb_vocab_kind_is_subword(opt->vocab))
        st = subword_corpus(opt, text, byte_at, &tok, n, &vocab, sum, in[0].name);
    else if (st == LB_OK)
        st = build_vocab(opt, tok, n, text, in, n_paths, &vocab, sum);
    /* the inputs' names, for the file's source attribute */
    char source[2048] = "";
    for (int i = 0; i < n_paths; i++)
        snprintf(source + strlen(source), sizeof source - strlen(source), "%s%s", i ? "; " : "", paths[i]);
    free(text);
    text = NULL;
    if (st == LB_OK) {
        text_writer w = {out_path, NULL, opt, vocab, tok, {n[0], n[1], n[2]}, source, len, sum->split_bytes,
                         sum->split_characters};
        st = lb_h5_write_new(out_path, "text corpus", replace, write_corpus, NULL, &w, &w.tmp);
    }
    if (st == LB_OK) {
        for (int s = 0; s < 3; s++)
            sum->tokens[s] = n[s];
        sum->vocab_size = lb_vocab_size(vocab);
    }
    lb_vocab_free(vocab);
    free(tok);
    free(text);
    free(in);
    return st;
}

/* ---- windows and statistics of an open corpus ---- */

void lb_text_fill_window(const int32_t *tok, int64_t n, int64_t offset, int64_t T, int32_t *inputs, int32_t *targets)
{
    for (int64_t t = 0; t < T; t++) {
        int64_t i = offset + t;
        inputs[t] = i < n ? tok[i] : 0;
        targets[t] = i + 1 < n ? tok[i + 1] : LB_IGNORE_INDEX;
    }
}

/* Counts of every symbol of a split's stream into counts [V] (all its tokens). */
static lb_status split_counts(const lb_dataset *ds, const char *split, int64_t *counts, int64_t *n)
{
    const int32_t *tok = lb_dataset_tokens(ds, split, n);
    if (!tok && lb_last_status() != LB_OK && *n == 0 && !lb_dataset_is_text(ds))
        return lb_last_status();
    int64_t V = lb_dataset_vocab_size(ds);
    memset(counts, 0, (size_t)V * sizeof *counts);
    for (int64_t i = 0; i < *n; i++)
        counts[tok[i]]++;
    return LB_OK;
}

lb_status lb_text_unigram_bits(const lb_dataset *ds, const char *split, double *entropy, double *cross)
{
    LB_CHECK_ARG(ds, LB_ERR_VALUE);
    LB_CHECK_ARG(split, LB_ERR_VALUE);
    LB_CHECK_ARG(entropy, LB_ERR_VALUE);
    if (!lb_dataset_is_text(ds))
        return lb_error(LB_ERR_STATE, "%s: holds a task, not a text corpus: no unigram statistics", lb_dataset_path(ds));
    int64_t V = lb_dataset_vocab_size(ds), n = 0, n_train = 0;
    int64_t *c = calloc((size_t)V, sizeof *c), *ct = calloc((size_t)V, sizeof *ct);
    lb_status st = c && ct ? LB_OK : lb_error(LB_ERR_MEMORY, "%s: out of memory", lb_dataset_path(ds));
    if (st == LB_OK && lb_split_index_of(split) < 0)
        st = lb_error(LB_ERR_VALUE, "%s: unknown split '%s' (expected train, val or test)", lb_dataset_path(ds), split);
    if (st == LB_OK)
        st = split_counts(ds, split, c, &n);
    if (st == LB_OK && n == 0)
        st = lb_error(LB_ERR_VALUE, "%s: the %s split is empty (or not read)", lb_dataset_path(ds), split);
    if (st == LB_OK && cross)
        st = split_counts(ds, "train", ct, &n_train);
    if (st == LB_OK) {
        double h = 0, x = 0;
        for (int64_t v = 0; v < V; v++) {
            if (c[v] == 0)
                continue;
            double p = (double)c[v] / (double)n;
            h -= p * log2(p);
            if (cross)
                x -= p * log2(((double)ct[v] + 1.0) / ((double)n_train + (double)V));
        }
        *entropy = h;
        if (cross)
            *cross = x;
    }
    free(c);
    free(ct);
    return st;
}

/* Ids sorted by count, most frequent first (ties: lower id first). */
static const int64_t *sort_counts;
static int by_count(const void *a, const void *b)
{
    int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;
    if (sort_counts[x] != sort_counts[y])
        return sort_counts[x] > sort_counts[y] ? -1 : 1;
    return x < y ? -1 : x > y;
}

lb_status lb_text_print_info(const lb_dataset *ds, FILE *out)
{
    const lb_vocab *v = lb_dataset_vocab(ds);
    int64_t V = lb_vocab_size(v), n[3];
    int is_char = lb_vocab_get_kind(v) == LB_VOCAB_CHAR, is_subword = lb_vocab_kind_is_subword(lb_vocab_get_kind(v));
    const char *unit = is_char ? "character" : is_subword ? "token" : "byte";
    for (int s = 0; s < 3; s++)
        lb_dataset_tokens(ds, split_names[s], &n[s]);
    fprintf(out, "file      %s\n", lb_dataset_path(ds));
    fprintf(out, "task      text (format_version %d): token streams, one target per token (the next one)\n",
            LB_DATA_FORMAT_VERSION);
    fprintf(out, "vocab     %s: %lld symbols", lb_vocab_kind_name(lb_vocab_get_kind(v)), (long long)V);
    if (is_subword)
        fprintf(out, " (a SentencePiece model's pieces; id %lld is <unk>)", (long long)lb_vocab_unk_id(v));
    else if (lb_vocab_unk_id(v) >= 0)
        fprintf(out, " (id %lld is <unk>: val/test characters absent from the training text)",
                (long long)lb_vocab_unk_id(v));
    fputc('\n', out);
    fputs("splits    tokens (the window length is chosen when training: lookback train --seq-len)\n", out);
    for (int s = 0; s < 3; s++)
        fprintf(out, "  %-6s %12lld\n", split_names[s], (long long)n[s]);
    int64_t *counts = calloc((size_t)V, sizeof *counts), *order = malloc((size_t)V * sizeof *order), total = 0;
    if (counts && order && split_counts(ds, "train", counts, &total) == LB_OK && total > 0) {
        for (int64_t i = 0; i < V; i++)
            order[i] = i;
        sort_counts = counts;
        qsort(order, (size_t)V, sizeof *order, by_count);
        fprintf(out, "most frequent (train):");
        for (int64_t i = 0; i < V && i < 16; i++) {
            char what[64];
            fprintf(out, "%s%s %.2f%%", i % 4 ? "   " : "\n  ", lb_vocab_describe(v, order[i], what, sizeof what),
                    100.0 * (double)counts[order[i]] / (double)total);
        }
        fputc('\n', out);
        double h = 0, x = 0;
        if (lb_text_unigram_bits(ds, "train", &h, NULL) == LB_OK)
            fprintf(out, "unigram entropy (train): %.4f bits per %s (%.4f nats): a model ignoring all context scores "
                    "this; the baseline to beat\n", h, unit, h * log(2.0));
        for (int s = 1; s < 3; s++)
            if (n[s] > 0 && lb_text_unigram_bits(ds, split_names[s], &h, &x) == LB_OK)
                fprintf(out, "unigram on %s (train frequencies, add-one): %.4f bits per %s\n", split_names[s], x, unit);
    }
    free(counts);
    free(order);
    if (ferror(out))
        return lb_error(LB_ERR_IO, "%s: writing the description failed", lb_dataset_path(ds));
    return LB_OK;
}

/* ---- whole characters out of pieces ---- */

/* Moves the characters complete at the front of p->pending to out (U+FFFD for a byte
 * sequence that cannot become one); keeps an incomplete tail. */
static size_t utf8_drain(lb_utf8_pending *p, char *out)
{
    size_t used = 0;
    while (p->n > 0) {
        unsigned char lead = p->bytes[0];
        int need = lead < 0x80 ? 1 : lead >= 0xC2 && lead <= 0xDF ? 2 : lead >= 0xE0 && lead <= 0xEF ? 3
                 : lead >= 0xF0 && lead <= 0xF4 ? 4 : 0;
        int bad = need == 0;
        for (int i = 1; !bad && i < p->n && i < need; i++)
            bad = (p->bytes[i] & 0xC0) != 0x80;
        int32_t cp;
        if (!bad && p->n < need)
            return used; /* wait for the rest */
        if (!bad && utf8proc_iterate(p->bytes, need, &cp) != need)
            bad = 1;
        int take = bad ? 1 : need;
        if (bad) {
            memcpy(out + used, "\xEF\xBF\xBD", 3);
            used += 3;
        } else {
            memcpy(out + used, p->bytes, (size_t)need);
            used += (size_t)need;
        }
        memmove(p->bytes, p->bytes + take, (size_t)(p->n - take));
        p->n -= take;
    }
    return used;
}

size_t lb_utf8_whole(lb_utf8_pending *p, const char *bytes, size_t len, char *out)
{
    LB_CHECK_ARG(p, 0);
    LB_CHECK_ARG(bytes, 0);
    LB_CHECK_ARG(out, 0);
    size_t used = 0;
    for (size_t i = 0; i < len; i++) {
        p->bytes[p->n++] = (unsigned char)bytes[i];
        used += utf8_drain(p, out + used);
    }
    return used;
}

int32_t *lb_vocab_encode_new(const lb_vocab *v, const char *text, size_t len, int64_t *n)
{
    LB_CHECK_ARG(v && n, NULL);
    int64_t count = 1;
    if (text && lb_vocab_encode(v, text, len, 0, NULL, 0, &count) != LB_OK)
        return NULL;
    int32_t *ids = malloc((size_t)(count > 0 ? count : 1) * sizeof *ids);
    if (!ids) {
        lb_error(LB_ERR_MEMORY, "out of memory for %lld tokens", (long long)count);
        return NULL;
    }
    if (!text) { /* nanoGPT's start = "\n"; a vocabulary without it starts from its first symbol */
        int64_t got = 0;
        if (lb_vocab_encode(v, "\n", 1, 0, ids, 1, &got) != LB_OK || got != 1)
            ids[0] = 0;
        lb_clear_error();
        *n = 1;
        return ids;
    }
    if (lb_vocab_encode(v, text, len, 0, ids, count, n) != LB_OK) {
        free(ids);
        return NULL;
    }
    return ids;
}

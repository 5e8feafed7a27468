/* Internal to data/: a C interface over SentencePiece (Kudo and Richardson 2018,
 * "SentencePiece: A simple and language independent subword tokenizer and detokenizer
 * for Neural Text Processing"), Debian's libsentencepiece 0.1.97, implemented by
 * data/spm.cc, the one C++ file of the project. data/text.c builds the bpe and unigram
 * vocabularies of data/text.h on it.
 *
 * Nothing here records an lb_error: every function that can fail writes one line into
 * err[err_size] (SentencePiece's own message, shortened) and returns NULL or -1; the
 * caller adds the file and the option. No C++ exception crosses this interface. */
#ifndef LB_DATA_SPM_INTERNAL_H
#define LB_DATA_SPM_INTERNAL_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef struct lb_spm lb_spm;

/* What kind of piece an id is (SentencePiece's ModelProto.SentencePiece.Type). */
typedef enum lb_spm_piece_type {
    LB_SPM_NORMAL = 1,
    LB_SPM_UNKNOWN = 2,
    LB_SPM_CONTROL = 3, /* <s>, </s>: no text */
    LB_SPM_USER = 4,
    LB_SPM_BYTE = 6,    /* <0x41>: one byte of byte fallback */
    LB_SPM_UNUSED = 5
} lb_spm_piece_type;

/* The model types of SentencePiece's TrainerSpec.model_type. */
enum { LB_SPM_UNIGRAM = 1, LB_SPM_BPE = 2, LB_SPM_WORD = 3, LB_SPM_CHAR = 4 };

/* A processor from a serialized ModelProto (the bytes of a .model file). NULL with the
 * reason in err when the bytes are not a model SentencePiece loads. */
lb_spm *lb_spm_load(const void *model, size_t n_bytes, char *err, size_t err_size);
void lb_spm_free(lb_spm *spm);

/* V (pieces), the <unk>, <s> and </s> ids (-1 when the model has none). */
int64_t lb_spm_size(const lb_spm *spm);
int64_t lb_spm_unk_id(const lb_spm *spm);
int64_t lb_spm_bos_id(const lb_spm *spm);
int64_t lb_spm_eos_id(const lb_spm *spm);
/* LB_SPM_UNIGRAM, LB_SPM_BPE, ... from the model's trainer_spec (UNIGRAM when absent). */
int lb_spm_model_type(const lb_spm *spm);
/* The type of piece id in [0, V). */
lb_spm_piece_type lb_spm_piece_kind(const lb_spm *spm, int64_t id);
/* The piece as the model stores it ("▁the", "<0x0A>", "<unk>"): a pointer that lives as
 * long as spm, its length in *len. */
const char *lb_spm_piece(const lb_spm *spm, int64_t id, size_t *len);

/* Text -> ids: SentencePiece's EncodeAsIds of text[0..len), into *ids (malloc'd, the
 * caller frees; NULL when *n is 0). -1 with err when out of memory. */
int lb_spm_encode(const lb_spm *spm, const char *text, size_t len, int32_t **ids, int64_t *n, char *err,
                  size_t err_size);
/* Ids -> text: SentencePiece's DecodeIds of ids[0..n) (every id in [0, V)), into *text
 * (malloc'd, NUL-terminated, the caller frees) and its length in bytes in *len. */
int lb_spm_decode(const lb_spm *spm, const int32_t *ids, int64_t n, char **text, size_t *len, char *err,
                  size_t err_size);

/* Training. type "bpe" or "unigram"; vocab_size V; character_coverage in (0, 1] (the
 * share of the text's characters that get a piece of their own; the rest encode as
 * bytes); seed: SentencePiece's random generator seed. The text is read as sentences:
 * its lines (and documents: U+0003 separates them too), and a line longer than 2,048 bytes is cut before a space (or between
 * characters) into parts of at most that length. Every other setting is chosen for a
 * tokenizer that restores the text byte for byte: byte_fallback, the identity
 * normalization, no dummy prefix, no whitespace removal; and <unk> = 0, <s> = 1,
 * </s> = 2. The serialized model goes into *model (malloc'd) and its size *n_bytes.
 * On -1: err holds the reason; *lowest and *highest receive the vocabulary sizes
 * SentencePiece said it can reach when the failure was the size (0 when unknown). */
typedef struct lb_spm_train_options {
    const char *type;
    int64_t vocab_size;
    double character_coverage;
    uint32_t seed;
    int threads;
} lb_spm_train_options;

int lb_spm_train(const lb_spm_train_options *opt, const char *text, size_t len, void **model, size_t *n_bytes,
                 int64_t *lowest, int64_t *highest, char *err, size_t err_size);

#ifdef __cplusplus
}
#endif

#endif

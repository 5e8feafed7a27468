/* Text corpora: a text file becomes a character-level (or byte-level) token stream,
 * split into train, val and test, with its vocabulary; and the vocabulary's
 * encode/decode for every later command.
 *
 * Import (lb_text_import): the input files are concatenated as they are, in order; the
 * text is decoded as UTF-8 by utf8proc (every byte sequence validated: an invalid one is
 * refused with its file and byte offset) or taken byte by byte. The N symbols are split
 * contiguously, in file order: train = the first N - N_val - N_test symbols, then val
 * (N_val = floor(N * val_fraction)), then test (N_test = floor(N * test_fraction)): the
 * fractions are of the whole text, so the defaults 0.1 and 0.05 leave 85 % to train.
 *
 * Vocabulary: LB_VOCAB_CHAR = the distinct Unicode code points of the TRAINING split, in
 * code-point order (ids 0 .. V-1); LB_VOCAB_BYTE = the 256 byte values (id = byte).
 * A character of val or test that the training split lacks: LB_UNK_MAP (default) adds one
 * id, the last (V - 1), named <unk> and decoded as U+FFFD, and maps every such character
 * to it; LB_UNK_ERROR refuses the text, naming the character, its file and byte offset.
 *
 * File (HDF5, docs/text.md): root attributes task = "text", format_version 1,
 * vocab_size = num_classes = V, vocab ("char"/"byte"), unk_id (-1 = none),
 * val_fraction, test_fraction, source (the inputs, "; "-separated), source_bytes;
 * dataset /vocab uint8 [n_bytes] = the symbols' encodings concatenated in id order
 * (for char the UTF-8 text of the V code points; attributes kind, vocab_size, unk_id);
 * /train/tokens, /val/tokens, /test/tokens int32 [N_split]. lb_dataset_open reads such a
 * file as a text dataset (data/dataset.h: lb_dataset_is_text, lb_dataset_set_seq_len).
 *
 * Dimensions: N symbols (tokens) of the text or of a split, V = vocab_size.
 */
#ifndef LB_DATA_TEXT_H
#define LB_DATA_TEXT_H

#include "tensor/api.h"

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "tensor/error.h"

LB_API_BEGIN

/* char, byte; bpe and unigram: a SentencePiece model's pieces (see "Subword" below). */
typedef enum lb_vocab_kind { LB_VOCAB_CHAR = 0, LB_VOCAB_BYTE = 1, LB_VOCAB_BPE = 2, LB_VOCAB_UNIGRAM = 3 } lb_vocab_kind;
typedef enum lb_unk_policy { LB_UNK_MAP = 0, LB_UNK_ERROR = 1 } lb_unk_policy;
/* Documents (data text --documents): none (one stream), one per line, or paragraphs
 * (runs of lines between blank lines); and what becomes of a document longer than the
 * context (--short): dropped, truncated to it, or the text refused. */
typedef enum lb_documents_kind { LB_DOCUMENTS_NONE = 0, LB_DOCUMENTS_LINES = 1, LB_DOCUMENTS_BLANK_LINES = 2 } lb_documents_kind;
typedef enum lb_long_document { LB_DOC_DROP = 0, LB_DOC_TRUNCATE = 1, LB_DOC_REFUSE = 2 } lb_long_document;
/* "none"/"lines"/"blank-lines" and "drop"/"truncate"/"refuse"; LB_ERR_VALUE naming the
 * accepted words. */
lb_status lb_documents_kind_parse(const char *name, lb_documents_kind *out);
lb_status lb_long_document_parse(const char *name, lb_long_document *out);

enum {
    LB_TEXT_MIN_TOKENS = 1024,       /* the shortest text imported (symbols) */
    LB_TEXT_MIN_TRAIN_TOKENS = 512,  /* the shortest training split */
    LB_TEXT_MIN_SPLIT_TOKENS = 2,    /* the shortest non-empty val or test split (one target) */
    LB_TEXT_MAX_VOCAB_DEFAULT = 8192, /* distinct characters allowed unless max_vocab says otherwise */
    LB_TEXT_DEFAULT_SEQ_LEN = 256,    /* the window of a corpus until lb_dataset_set_seq_len (nanoGPT's block_size) */
    LB_TEXT_SUBWORD_VOCAB_DEFAULT = 2048, /* bpe, unigram: the pieces of a tokenizer trained on the text */
    LB_TEXT_SUBWORD_VOCAB_MIN = 260,  /* the 256 bytes of byte fallback, <unk>, <s>, </s> and one more */
    LB_TEXT_SUBWORD_VOCAB_MAX = 1 << 20
};

/* "char"/"byte"/"bpe"/"unigram" and "map"/"error"; NULL for a value out of range.
 * Parsing errors (LB_ERR_VALUE) name the word and the accepted ones. */
const char *lb_vocab_kind_name(lb_vocab_kind k);
/* 1 for bpe and unigram (a SentencePiece tokenizer), 0 otherwise. */
int lb_vocab_kind_is_subword(lb_vocab_kind k);
lb_status lb_vocab_kind_parse(const char *name, lb_vocab_kind *out);
const char *lb_unk_policy_name(lb_unk_policy p);
lb_status lb_unk_policy_parse(const char *name, lb_unk_policy *out);

/* ---- the vocabulary ---- */

typedef struct lb_vocab lb_vocab;

/* The vocabulary stored in a text corpus or in a checkpoint of a model trained on one
 * (both hold the same /vocab dataset). The file is read in a child process with a time
 * limit, as every HDF5 file a user names (data/h5io.h). NULL on error: LB_ERR_IO (missing,
 * unreadable), LB_ERR_FORMAT (not HDF5, no /vocab: "FILE holds no vocabulary: it is not a
 * text corpus or a model trained on one", a vocabulary that is not valid UTF-8 of
 * vocab_size code points, ...), LB_ERR_VALUE (NULL path). */
lb_vocab *lb_vocab_read(const char *path);
/* The byte vocabulary (256 symbols, id = byte value). NULL only when out of memory. */
lb_vocab *lb_vocab_new_bytes(void);
/* A character vocabulary of the n distinct code points cps[0..n) (strictly increasing,
 * each a Unicode scalar value: <= 0x10FFFF, not a surrogate), plus an <unk> id n when
 * with_unk. Errors (NULL, LB_ERR_VALUE): an unsorted, repeated or invalid code point. */
lb_vocab *lb_vocab_new_chars(const int32_t *cps, int64_t n, int with_unk);
lb_vocab *lb_vocab_copy(const lb_vocab *v);

/* Subword vocabularies: SentencePiece (Kudo and Richardson 2018; Debian's
 * libsentencepiece) BPE or unigram models. The vocabulary is the model's V pieces (ids
 * as the model numbers them: lookback's ids are SentencePiece's, so `spm_encode
 * --output_format=id` gives the same ids); /vocab stores the serialized model (the bytes
 * of a .model file) with the same attributes and crc32 as a character vocabulary, and
 * encode/decode are SentencePiece's EncodeAsIds/DecodeIds. lb_vocab_symbol gives a
 * piece's text (U+2581 as a space, a byte piece <0xNN> as its byte, <unk> as U+FFFD,
 * <s> and </s> as nothing); lb_vocab_code_point is -1 for every piece; lb_vocab_lookup
 * of a code point is the id of the one piece that encodes it alone (or -1).
 *
 * A vocabulary from a serialized model [n_bytes]; `name` names it in messages. NULL
 * with LB_ERR_FORMAT "NAME is not a SentencePiece model (REASON)", LB_ERR_VALUE for a
 * word or char model (lookback takes bpe and unigram), LB_ERR_MEMORY. */
lb_vocab *lb_vocab_new_sentencepiece(const void *model, size_t n_bytes, const char *name);
/* The same from a .model file (at most 256 MiB); LB_ERR_IO when it cannot be read. */
lb_vocab *lb_vocab_read_sentencepiece(const char *path);
/* Writes the serialized model of a bpe or unigram vocabulary to `path` (a .model file
 * that spm_encode and Python's sentencepiece load), through a temporary file renamed
 * into place and data/output.h's checks. `from` names where v came from. Errors:
 * LB_ERR_VALUE for a char or byte vocabulary (naming `from`), LB_ERR_IO. */
lb_status lb_vocab_write_sentencepiece(const lb_vocab *v, const char *from, const char *path);
/* The end-of-sentence id </s> of a subword vocabulary, -1 for the others or when the
 * model has none. */
int64_t lb_vocab_eos_id(const lb_vocab *v);
void lb_vocab_free(lb_vocab *v);

lb_vocab_kind lb_vocab_get_kind(const lb_vocab *v);
int64_t lb_vocab_size(const lb_vocab *v);   /* V, the <unk> id included */
int64_t lb_vocab_unk_id(const lb_vocab *v); /* the <unk> id, or -1 when there is none */
/* The code point of id (char vocabularies; U+FFFD for <unk>), or the byte value; -1
 * with LB_ERR_VALUE for an id outside [0, V). */
int32_t lb_vocab_code_point(const lb_vocab *v, int64_t id);
/* The bytes of symbol id (its UTF-8 encoding, or the one byte) and their count in *len;
 * NULL with LB_ERR_VALUE for an id outside [0, V). The pointer lives as long as v. */
const char *lb_vocab_symbol(const lb_vocab *v, int64_t id, size_t *len);
/* The id of code point cp (char) or byte value cp (byte), or -1 when it is not in the
 * vocabulary (no error recorded). */
int64_t lb_vocab_lookup(const lb_vocab *v, int32_t cp);
/* The concatenated encodings of every symbol in id order ([n_bytes]) as /vocab stores
 * them (bpe, unigram: the serialized model); *n_bytes receives their count. */
const unsigned char *lb_vocab_bytes(const lb_vocab *v, size_t *n_bytes);

/* Text -> ids: text[0..len) (UTF-8 for a char vocabulary, any bytes for byte) into
 * ids[0..capacity); *n receives the number of symbols (call with ids NULL and capacity 0
 * to count them). A character outside the vocabulary becomes the <unk> id when map_unk
 * and the vocabulary has one; otherwise LB_ERR_VALUE "character 'x' (U+0078) at byte
 * offset 12 is not in the vocabulary". Invalid UTF-8: LB_ERR_VALUE naming the byte offset.
 * More symbols than capacity (ids not NULL): LB_ERR_VALUE. */
lb_status lb_vocab_encode(const lb_vocab *v, const char *text, size_t len, int map_unk, int32_t *ids,
                          int64_t capacity, int64_t *n);
/* The ids of text[0..len) (lb_vocab_encode without map_unk) in a new array (caller frees;
 * *n ids, room for one at least). text NULL: the start of a generation without a prompt,
 * one id: "\n" (as nanoGPT's sample.py), or id 0 when the vocabulary has no newline.
 * Errors (NULL): lb_vocab_encode's, LB_ERR_MEMORY "out of memory for N tokens". */
int32_t *lb_vocab_encode_new(const lb_vocab *v, const char *text, size_t len, int64_t *n);
/* Ids -> text: the symbols of ids[0..n) appended into buf[0..size), NUL-terminated and
 * truncated to size - 1 bytes; *len (may be NULL) receives the full length in bytes
 * (without the NUL). A byte vocabulary's output may end inside a UTF-8 character.
 * Errors: LB_ERR_VALUE for an id outside [0, V) (naming its position). */
lb_status lb_vocab_decode(const lb_vocab *v, const int32_t *ids, int64_t n, char *buf, size_t size, size_t *len);
/* A symbol as a reader sees it in a message: 'a', '\n', ' ', U+00E9 'é', <unk>, or the
 * byte 0x9f, into buf; returns buf. */
char *lb_vocab_describe(const lb_vocab *v, int64_t id, char *buf, size_t size);

/* Unigram statistics of a split of an open text corpus (data/dataset.h), in bits per
 * symbol: *entropy = the entropy of the split's own symbol frequencies,
 * -sum p log2 p (the loss of a model that predicts every symbol with the split's
 * frequencies, ignoring all context: the baseline a model must beat); *cross (may be
 * NULL) = the mean -log2 q of the split's symbols under q = the TRAINING split's
 * frequencies with add-one (Laplace) smoothing over the V symbols (what that baseline
 * scores on held-out text). Errors: LB_ERR_STATE for a task file, LB_ERR_VALUE for an
 * unknown or empty split. */
typedef struct lb_dataset lb_dataset;
lb_status lb_text_unigram_bits(const lb_dataset *ds, const char *split, double *entropy, double *cross);

/* The size of a split of an open text corpus: *tokens its tokens, *bytes the UTF-8 bytes
 * and *characters the characters (code points) of its text, as the import recorded them
 * (attributes text_bytes, text_characters), or for a corpus written before they were
 * recorded: the tokens for char (characters) and byte (bytes), the rest measured by
 * decoding the split when it is loaded, else -1. Errors: LB_ERR_STATE for a task file,
 * LB_ERR_VALUE for an unknown split. */
lb_status lb_text_split_size(const lb_dataset *ds, const char *split, int64_t *tokens, int64_t *bytes,
                             int64_t *characters);
/* The measures that compare tokenizers on one scale: a loss of `loss` mean nats per token
 * over a split, as bits per byte = loss * tokens / (bytes * ln 2) and bits per character =
 * loss * tokens / (characters * ln 2) of the split's text (the total nats over the split
 * divided by its UTF-8 bytes or characters; for char, bits per character is loss / ln 2,
 * for byte, bits per byte is). NAN when the size is unknown or ds is not a text corpus
 * (no error kept). Either output may be NULL. */
void lb_text_bits(const lb_dataset *ds, const char *split, double loss, double *bits_per_byte, double *bits_per_char);

/* LB_OK when a and b are the same vocabulary (kind, symbols in order, <unk> id);
 * otherwise LB_ERR_VALUE "A and B have different vocabularies (char, 85 symbols vs char,
 * 90 symbols): ..." naming the first difference, with name_a and name_b for the two, and
 * the command that imports B's text with A's vocabulary (data text --like A). */
lb_status lb_vocab_check_same(const lb_vocab *a, const lb_vocab *b, const char *name_a, const char *name_b);

/* The one check of every command that scores a text corpus with a model (eval, predict,
 * compare): LB_OK when the corpus ds holds exactly the vocabulary `model_vocab` the model
 * was trained with (same kind, symbols, ids and <unk>); otherwise LB_ERR_VALUE
 *   "gpl.h5 does not hold the vocabulary the model was trained with (sotu.h5: char, 85
 *    symbols with <unk> vs char, 74 symbols): the model's ids would mean other characters;
 *    import its text with the model's vocabulary: `lookback data text gpl.txt --like
 *    sotu.h5 -o gpl-like.h5`"
 * where `model_file` is the checkpoint or the training corpus that holds model_vocab
 * (both work with --like) and the text is the corpus's recorded source (TEXT when it was
 * standard input or several files). Errors: LB_ERR_VALUE also for NULL arguments and for
 * a dataset that is not a text corpus. */
lb_status lb_dataset_check_vocab(const lb_dataset *ds, const lb_vocab *model_vocab, const char *model_file);

/* Pieces in, whole characters out: the bytes of pieces (a byte-fallback piece is one byte
 * of a character) are held until they complete a UTF-8 character, so a reader never sees
 * half of one. lb_utf8_whole appends bytes[0..len) and writes to out the characters now
 * complete, returning their count in bytes (out needs room for 3 * (len + 3)); a byte
 * that cannot start or continue a character (or an overlong form, a surrogate) comes out
 * as U+FFFD. Zero-initialize the state; bytes still held at the end are an unfinished
 * character (the caller drops them). NULL p, bytes or out: 0 with an LB_ERR_VALUE error. */
typedef struct lb_utf8_pending {
    unsigned char bytes[4];
    int n;
} lb_utf8_pending;
size_t lb_utf8_whole(lb_utf8_pending *p, const char *bytes, size_t len, char *out);

/* The document separator of a vocabulary (see lb_text_options.documents): the id of
 * U+0003 (char), 3 (byte), </s> (bpe, unigram); -1 when the vocabulary has none. */
int64_t lb_vocab_separator_id(const lb_vocab *v);

/* The documents of a split of an open corpus imported with documents (the token
 * sequences between separators), for asking whether a generated document is a copy of
 * one (makemore's "in train"). NULL with an error: LB_ERR_VALUE when ds is not a text
 * corpus or has no separator, LB_ERR_MEMORY. */
typedef struct lb_doc_set lb_doc_set;
lb_doc_set *lb_doc_set_new(const lb_dataset *ds, const char *split);
/* 1 when ids[0..n) (a document without its separators) is one of the set's documents;
 * 0 otherwise, and (with an LB_ERR_VALUE error) for a NULL set or ids. */
int lb_doc_set_has(const lb_doc_set *set, const int32_t *ids, int64_t n);
int64_t lb_doc_set_size(const lb_doc_set *set);
void lb_doc_set_free(lb_doc_set *set);

/* ---- import ---- */

typedef struct lb_text_options {
    lb_vocab_kind vocab;  /* default LB_VOCAB_CHAR */
    double val_fraction;  /* [0, 0.5], default 0.1 */
    double test_fraction; /* [0, 0.5], default 0.05 */
    lb_unk_policy unk;    /* default LB_UNK_MAP */
    int64_t max_vocab;    /* the most distinct training characters (char): 2 .. 1,114,112, default 8192 */
    const lb_vocab *like; /* NULL (default), or the vocabulary to import with exactly (`data text --like`:
                           * a corpus's or a checkpoint's, lb_vocab_read): the same kind, symbols and
                           * ids, so a model trained with it scores the new corpus; vocab and
                           * max_vocab are then not used, and a character of ANY split outside it
                           * is <unk> (unk map, when like has an <unk> id) or refused */
    const char *like_name; /* the file like came from, for messages (may be NULL) */
    /* bpe, unigram (a SentencePiece tokenizer trained on the training split only): */
    int64_t vocab_size;        /* the pieces V, default 2048 */
    double character_coverage; /* (0, 1], default 0.9995 (SentencePiece's): the share of the
                                * training characters with a piece of their own; the rarest
                                * others are encoded as their UTF-8 bytes (byte fallback) */
    uint32_t seed;             /* SentencePiece's random seed, and the documents' split; default 1 */
    /* Documents: each document is encoded on its own and the stream is
     *   SEP doc_1 SEP doc_2 SEP ... doc_n SEP
     * with one separator symbol SEP before and after every document, its begin and its end
     * (makemore's '.'): U+0003 for char (a code point of the vocabulary; a text holding it
     * is refused), the byte 0x03 for byte, </s> for bpe and unigram. A window crossing two
     * documents holds the separator between them. val and test are documents drawn at
     * random (seeded by seed): floor(D * val_fraction) and floor(D * test_fraction) of the
     * D documents; each split keeps its documents in file order. */
    lb_documents_kind documents; /* default LB_DOCUMENTS_NONE */
    int64_t context;             /* documents: the most tokens a document may take with its two
                                  * separators (the context of the models to train); 0 = any */
    lb_long_document long_documents; /* a longer document: default LB_DOC_DROP */
} lb_text_options;

void lb_text_options_default(lb_text_options *opt);

/* What an import made. */
typedef struct lb_text_summary {
    int64_t source_bytes;          /* bytes read from every input */
    int64_t tokens[3];             /* symbols of train, val, test */
    int64_t vocab_size;            /* V, <unk> included */
    int64_t unknown;               /* val/test characters mapped to <unk> (with like: of any split) */
    int32_t first_unknown;         /* the first of them (code point), when unknown > 0 */
    char first_unknown_where[512]; /* its file and byte offset, "FILE, byte offset K" */
    int64_t split_bytes[3];        /* UTF-8 bytes of the text of train, val, test */
    int64_t split_characters[3];   /* their characters (code points; bytes that do not continue one) */
    double tokenizer_seconds;      /* bpe, unigram: the time SentencePiece took to train (0 when imported) */
    int64_t documents[3];          /* documents: the documents of train, val, test */
    int64_t documents_dropped, documents_truncated; /* longer than the context */
} lb_text_summary;

/* Reads paths[0..n_paths) ("-" = standard input, at most once), builds the token streams
 * and the vocabulary (above) and writes the corpus to `out_path`: written to
 * "<out_path>.tmp" by a child process and renamed into place only when complete, through
 * data/output.h's checks (a device, FIFO, folder or symbolic link at the path is refused,
 * and so is a path that is one of the inputs, whatever its spelling); nothing is written
 * on any error. Memory: the text (1 byte per byte) plus 4 bytes per symbol (and 4.4 MB
 * of code-point tables for char).
 * Errors (one message naming the file, and the byte offset where it applies):
 * LB_ERR_IO: a missing or unreadable input ("Permission denied"), an input that is a
 * folder, a device or a socket, a read or write failure, another process writing
 * out_path; LB_ERR_VALUE: an empty input, invalid UTF-8 with LB_VOCAB_CHAR, a text of
 * fewer than LB_TEXT_MIN_TOKENS symbols, a training split of fewer than
 * LB_TEXT_MIN_TRAIN_TOKENS or a val/test split of fewer than LB_TEXT_MIN_SPLIT_TOKENS
 * (when its fraction is > 0), more than max_vocab distinct training characters ("...:
 * import it with --vocab byte"), a val/test character outside the training vocabulary
 * with LB_UNK_ERROR, options out of range; with like: a character outside it under
 * LB_UNK_ERROR, or when like has no <unk> id to map it to; LB_ERR_MEMORY. summary may be NULL. */
lb_status lb_text_import(const lb_text_options *opt, const char *const *paths, int n_paths, const char *out_path,
                         lb_text_summary *summary);

/* The length of a UTF-8 byte-order mark (EF BB BF) at the start of `text`: 3, or 0 when
 * there is none (and for NULL text, with LB_ERR_VALUE). A corpus's files and a prompt
 * file skip it, as `data csv` does. */
size_t lb_text_bom_length(const void *text, size_t len);

/* What is wrong with the invalid UTF-8 sequence at `text` (`avail` bytes left before the
 * end of its file), in words, into buf (NULL text or buf: "" and LB_ERR_VALUE): a
 * continuation byte without a lead byte, a byte
 * that never occurs in UTF-8, a lead byte followed by a byte that does not continue it
 * (and where), the file ending inside a character, an overlong form, a surrogate or a
 * code point above U+10FFFF (RFC 3629, section 3). Returns buf. */
const char *lb_text_utf8_problem(const unsigned char *text, size_t avail, char *buf, size_t size);

LB_API_END

#endif

/* Internal to data/: a text corpus as read from its HDF5 file, shared by the dataset
 * reader (data/dataset.c, which runs HDF5 in a child process and sends the result over
 * a socket) and data/text.c. */
#ifndef LB_DATA_TEXT_INTERNAL_H
#define LB_DATA_TEXT_INTERNAL_H

#include "data/dataset.h"
#include "data/h5io.h"
#include "data/text.h"

/* The corpus's streams and vocabulary: what crosses the socket from the reading child. */
typedef struct lb_text_store {
    int present;                 /* 1: the file is a text corpus */
    lb_vocab_kind kind;
    int64_t vocab_size, unk_id;  /* V, -1 = no <unk> */
    double val_fraction, test_fraction;
    int64_t source_bytes;
    int64_t vocab_bytes;         /* bytes of vocab_data */
    unsigned char *vocab_data;   /* [vocab_bytes] the /vocab dataset */
    int64_t n[3];                /* tokens of train, val, test */
    int32_t *tokens[3];          /* [n[s]] or NULL (a split not read: lb_dataset_open_split) */
    int64_t text_bytes[3];       /* UTF-8 bytes of each split's text (attribute text_bytes), -1 when not stored */
    int64_t text_characters[3];  /* its characters (attribute text_characters), -1 when not stored */
    char source[1024];           /* the source attribute (inputs), possibly truncated */
} lb_text_store;

/* 1 when the open file's root attribute task is "text". */
int lb_text_is_corpus(hid_t fid);
/* Reads and checks a corpus: attributes, the vocabulary (valid UTF-8 of V code points in
 * increasing order, or the 256 bytes; its crc32), and the token streams (dtype, rank,
 * values in [0, V)); only split `only` is read (-1: all; the others: shape checked).
 * `file_bytes` guards against sizes the file cannot hold. LB_ERR_FORMAT naming the file
 * and the object on any mismatch. */
lb_status lb_text_read_store(hid_t fid, const char *file, int only, int64_t file_bytes, lb_text_store *out);
void lb_text_store_free(lb_text_store *s);
/* Sends (send_side 1) or receives (0) the store over a stream socket; the receiver
 * allocates the arrays. 0 on success, -1 when the peer went away or out of memory. */
int lb_text_store_transfer(int fd, lb_text_store *s, int send_side);
/* The vocabulary of a store (NULL with an error when its data is not a valid one). */
lb_vocab *lb_text_store_vocab(const lb_text_store *s, const char *file);

/* 1 when a and b differ, with the first difference in detail[size] ("char, 74 symbols vs
 * char, 85 symbols with <unk>", "id 3 is 'a' in one and 'b' in the other"); 0 otherwise. */
int lb_vocab_difference(const lb_vocab *a, const lb_vocab *b, char *detail, size_t size);

/* Reads the /vocab dataset under loc (a corpus or a checkpoint), checked as above. */
lb_status lb_vocab_h5_read(hid_t loc, const char *file, lb_vocab **out);

/* One window of a token stream tok[0..n): inputs[t] = tok[offset + t] and
 * targets[t] = tok[offset + t + 1] for t in [0, T); positions past the stream get input
 * 0 and target -100 (ignored). offset in [0, n). */
void lb_text_fill_window(const int32_t *tok, int64_t n, int64_t offset, int64_t T, int32_t *inputs, int32_t *targets);

/* `lookback data info` of a text corpus (lb_dataset_print_info calls it). */
lb_status lb_text_print_info(const lb_dataset *ds, FILE *out);

#endif

/* Checked HDF5 calls, used by the data files (data/), the checkpoints (train/) and the
 * command's outputs (cli/). Each returns LB_OK or an lb_error whose message names the
 * file, the object and what was expected versus found. All calls are meant to run
 * between lb_h5_quiet_begin and lb_h5_quiet_end, which silence the printing of HDF5's
 * own error stack. Including this header needs HDF5's headers (the installed
 * lookback.pc lists hdf5, so `pkg-config --cflags lookback` gives their path); the
 * example-row writers of the data files are internal (data/h5io_internal.h). */
#ifndef LB_DATA_H5IO_H
#define LB_DATA_H5IO_H

#include "tensor/api.h"

#include <hdf5.h>
#include <stddef.h>
#include <stdint.h>

#include "tensor/error.h"

LB_API_BEGIN

typedef struct lb_h5_quiet {
    H5E_auto2_t func;
    void *data;
} lb_h5_quiet;

/* Saves the current HDF5 error printer and disables it; _end restores it. */
void lb_h5_quiet_begin(lb_h5_quiet *saved);
void lb_h5_quiet_end(const lb_h5_quiet *saved);

/* Why the HDF5 call that just failed could not write (or create, or open) its file, in
 * the operating system's words: the errno the HDF5 library recorded on its error stack
 * (its POSIX driver notes the errno of each failed open, write or close), through
 * lb_system_error, e.g. "No space left on device (the disk is full)"; "the HDF5 library
 * gives no reason" when the stack holds none. Call it right after the failed call: the
 * next HDF5 call clears the stack. The text is in a buffer of the calling thread, valid
 * until its next call. */
const char *lb_h5_cause(void);

/* Closes any HDF5 identifier if valid (>= 0). */
void lb_h5_close(hid_t id);

/* ---- containment ----
 * libhdf5 is not memory-safe on hostile input, and after a failed write (a full disk)
 * its close-time cleanup can crash the process. Every open of a file a user names,
 * and every write, therefore runs first (reads) or only (writes) in a child process. */

typedef lb_status (*lb_h5_job)(void *ctx);

/* Runs job(ctx) in a forked child with HDF5's error printing off and returns its
 * status and message (lb_last_error) here. While the child runs, feed(ctx) (may be
 * NULL) runs in this process, e.g. to send it data; it returns LB_ERR_STATE when
 * the child stopped taking the data (then the child's message is returned), any
 * other error when it failed by itself (then its own message is returned). A child killed by a signal, or
 * still running after timeout_seconds (> 0; 0 = no limit, then it is killed), gives
 * LB_ERR_FORMAT "FILE: damaged or hostile HDF5 file ..." when `writing` is 0, and
 * LB_ERR_IO naming FILE when writing. The child never returns: it ends with _exit,
 * so this process's buffers and exit handlers run once. Nothing the job changes in
 * memory reaches this process. The child's standard error goes to /dev/null (set
 * LOOKBACK_HDF5_DEBUG to see what libhdf5 or a sanitizer prints there). */
lb_status lb_h5_isolated(lb_h5_job job, lb_h5_job feed, void *ctx, double timeout_seconds, int writing,
                         const char *file);

/* The one way lookback writes an HDF5 file it makes from scratch (data files, text
 * corpora, event files): locked against a second writer of `path` (lb_output_lock), then
 * job(ctx) runs in a child (lb_h5_isolated, with feed(ctx) beside it, libhdf5 quiet) and
 * writes the temporary file PATH.tmp, whose name is stored in *tmp_slot (a member of ctx)
 * before the job starts; then the file is renamed into place (lb_output_finish: over
 * what was at `path` when the writer began only when `replace`, never over a file that
 * appeared meanwhile). On failure the temporary file is removed and `path` is untouched;
 * the lock is released either way. The caller checks `path` first (lb_output_check) and
 * takes `replace` from lb_output_present then. `what` names the file in messages.
 * Errors: the lock's, LB_ERR_MEMORY, the job's or feed's, the rename's. */
lb_status lb_h5_write_new(const char *path, const char *what, int replace, lb_h5_job job, lb_h5_job feed, void *ctx,
                          const char **tmp_slot);

/* Time limit for validating a file of `bytes` bytes in a child: 20 s plus 1 s per
 * 20 MB, or the environment variable LOOKBACK_HDF5_TIMEOUT (seconds) when set to a
 * decimal number in [1, 86400]; any other value of it gives the default here, and
 * lb_h5_timeout_check says what is wrong with it. */
double lb_h5_read_timeout(int64_t bytes);
/* Checks LOOKBACK_HDF5_TIMEOUT: LB_OK when unset or a decimal number of seconds in
 * [1, 86400]; LB_ERR_VALUE naming the variable, its value and the range otherwise
 * ("abc", "", "0", "-1", "0.001"). */
lb_status lb_h5_timeout_check(void);

/* Opens an existing file read-only and checks that it holds its data itself
 * (lb_h5_check_contained). LB_ERR_IO "is locked by another process" when another
 * process holds it open for writing (HDF5 file locking, flock), LB_ERR_FORMAT "not an
 * HDF5 file" / "damaged or truncated" / what check_contained refuses otherwise. `what`
 * names the kind of file in messages ("data file", "checkpoint"). */
lb_status lb_h5_open_read(const char *path, const char *what, hid_t *out);

/* Visits every link of an open file and refuses (LB_ERR_FORMAT naming the object) what
 * would make a reader read other files: soft, external and user-defined links,
 * datasets with external raw storage (H5Pset_external) and virtual datasets; also
 * more than 100,000 links. Nothing is read from the datasets. */
lb_status lb_h5_check_contained(hid_t file, const char *path, const char *what);

/* ---- writing ---- */
lb_status lb_h5_write_attr_int(hid_t loc, const char *name, int64_t value, const char *file);
lb_status lb_h5_write_attr_uint(hid_t loc, const char *name, uint64_t value, const char *file);
lb_status lb_h5_write_attr_real(hid_t loc, const char *name, double value, const char *file);
/* A fixed-length UTF-8 string (its length, at least 1 byte, NUL-padded): reading it
 * back never needs HDF5's global heap. */
lb_status lb_h5_write_attr_string(hid_t loc, const char *name, const char *value, const char *file);

/* A uint8 [n] dataset `name` under loc holding n bytes (no timestamps): text such as the
 * events schema's JSON. LB_ERR_IO naming the file when it cannot be written. */
lb_status lb_h5_write_bytes(hid_t loc, const char *name, const void *data, size_t n, const char *file);
/* Reads a 1-byte integer [n] dataset into a new NUL-terminated buffer *out (caller
 * frees; *len = n, may be NULL). LB_ERR_FORMAT when missing, of another type or rank,
 * or longer than max_bytes; LB_ERR_MEMORY. */
lb_status lb_h5_read_bytes(hid_t loc, const char *name, size_t max_bytes, char **out, size_t *len, const char *file);
/* The vocabulary of a text corpus (data/text.h) as the dataset "vocab" under loc: uint8
 * [n_bytes], the symbols' encodings in id order, with attributes kind ("char"/"byte"),
 * vocab_size, unk_id and crc32 (corpora and checkpoints of models trained on one both
 * hold it; lb_vocab_read reads either). Errors: LB_ERR_IO naming the file. */
typedef struct lb_vocab lb_vocab;
lb_status lb_vocab_h5_write(hid_t loc, const lb_vocab *v, const char *file);

/* Creates group `name` without timestamps; < 0 on failure. */
hid_t lb_h5_create_group(hid_t loc, const char *name);

/* ---- reading ---- */

/* What a reader expects of a dataset's or attribute's file type: exact types for
 * what lookback writes (checkpoints), lossless families for data files that other
 * programs (h5py) may write. */
typedef enum lb_h5_want {
    LB_H5_I64,      /* signed 64-bit integer */
    LB_H5_U64,      /* unsigned 64-bit integer (generator states and seeds) */
    LB_H5_F32,      /* IEEE float, 4 bytes */
    LB_H5_F64,      /* IEEE float, 8 bytes */
    LB_H5_STRING,   /* a string, fixed or variable length */
    LB_H5_INT,      /* an integer that converts to int64 without loss: int8..int64, uint8..uint32 */
    LB_H5_ANY_INT,  /* any integer of at most 8 bytes (values are range-checked by the caller) */
    LB_H5_NONNEG,   /* an unsigned integer, or a signed one whose value is >= 0 (checked) */
    LB_H5_REAL,     /* float32 or float64, or an integer of LB_H5_INT */
    LB_H5_FLOAT     /* float32 or float64 (values range-checked by the caller) */
} lb_h5_want;

/* Checks file type `type` (its class, size and sign) against `want`. LB_ERR_FORMAT
 * "FILE: WHERE: expected E, found F" otherwise. */
lb_status lb_h5_check_type(hid_t type, lb_h5_want want, const char *where, const char *file);

/* The one checked read: checks the file type of dataset or attribute `obj` against
 * `want`, then reads it converted to memory type `mtype` into buf: everything, or for
 * a dataset with count >= 0, rows [start, start + count) along its first dimension.
 * LB_ERR_FORMAT naming `where` on a type mismatch or a failed read (a checksum
 * mismatch of a Fletcher-32 dataset included). */
lb_status lb_h5_read(hid_t obj, lb_h5_want want, hid_t mtype, int64_t start, int64_t count, void *buf,
                     const char *where, const char *file);

/* Reads a scalar attribute through lb_h5_read; LB_ERR_FORMAT when missing, not one
 * value, or of a type `want` does not allow. int: LB_H5_I64 / LB_H5_INT;
 * uint: LB_H5_U64 / LB_H5_NONNEG; real: LB_H5_F64 / LB_H5_REAL. */
lb_status lb_h5_read_attr_int(hid_t loc, const char *name, lb_h5_want want, int64_t *out, const char *file);
lb_status lb_h5_read_attr_uint(hid_t loc, const char *name, lb_h5_want want, uint64_t *out, const char *file);
lb_status lb_h5_read_attr_real(hid_t loc, const char *name, lb_h5_want want, double *out, const char *file);
/* Reads a scalar string attribute (fixed or variable length) into buf. */
lb_status lb_h5_read_attr_string(hid_t loc, const char *name, char *buf, size_t size, const char *file);
/* 1 if attribute / link `name` exists under loc, 0 if not. */
int lb_h5_has_attr(hid_t loc, const char *name);
int lb_h5_has_link(hid_t loc, const char *name);

/* What a dataset holds: class (H5T_INTEGER, H5T_FLOAT, ...), element size, rank and
 * dims. "int32", "float64", "string" ... into `name`. */
typedef struct lb_h5_info {
    H5T_class_t type_class;
    size_t type_size;
    int is_signed;
    int rank;
    int64_t dims[H5S_MAX_RANK];
    char type_name[32];
} lb_h5_info;
lb_status lb_h5_dataset_info(hid_t dset, const char *where, lb_h5_info *out, const char *file);
/* Formats "float32 [4, 16]" from an info into buf; returns buf. */
char *lb_h5_info_str(const lb_h5_info *info, char *buf, size_t size);

LB_API_END

#endif

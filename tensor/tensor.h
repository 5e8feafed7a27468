/* Dense row-major tensors of float32 and float64.
 *
 * A tensor is a view (shape, strides and offset, all in elements) onto a
 * reference-counted storage. Views (reshape of a contiguous tensor, permute,
 * transpose, slice, expand) share storage; everything else allocates. Shapes have
 * at most LB_MAX_DIMS dimensions; a 0-dimensional tensor is a scalar with one
 * element. Broadcasting follows numpy's rules (align trailing dimensions; a
 * dimension of size 1 stretches).
 *
 * Every function that can fail returns NULL or an lb_status and leaves a message
 * in lb_last_error() naming the function and the shapes involved.
 */
#ifndef LB_TENSOR_H
#define LB_TENSOR_H

#include "tensor/api.h"

#include <stddef.h>
#include <stdint.h>

#include "tensor/error.h"

LB_API_BEGIN

/* The most dims a tensor may have (PyTorch allows more; every op names this limit when a
 * shape exceeds it). */
enum { LB_MAX_DIMS = 8 };

typedef enum lb_dtype { LB_FLOAT32 = 0, LB_FLOAT64 = 1 } lb_dtype;

typedef struct lb_storage lb_storage;

typedef struct lb_tensor {
    lb_dtype dtype;
    int ndim;
    int64_t shape[LB_MAX_DIMS];
    int64_t strides[LB_MAX_DIMS]; /* in elements; 0 on a broadcast (expanded) dimension */
    int64_t offset;               /* in elements, into the storage */
    lb_storage *storage;
} lb_tensor;

/* Runs the statements after it twice, with `T` a typedef of float or of double,
 * choosing by `dtype`: one source for both precisions. */
#define LB_DISPATCH(dtype, T, ...)                                                   \
    do {                                                                             \
        if ((dtype) == LB_FLOAT32) {                                                 \
            typedef float T;                                                         \
            __VA_ARGS__                                                              \
        } else {                                                                     \
            typedef double T;                                                        \
            __VA_ARGS__                                                              \
        }                                                                            \
    } while (0)

/* Size in bytes of one element, and the dtype's name ("float32", "float64"). */
size_t lb_dtype_size(lb_dtype dtype);
const char *lb_dtype_name(lb_dtype dtype);

/* a * b into *out (out may be NULL) for a, b >= 0. Returns 0, or -1 (and writes nothing,
 * records no error) when a or b is negative or the product overflows int64. The one
 * multiply every size computed from user input goes through. */
int lb_checked_mul(int64_t a, int64_t b, int64_t *out);
/* Checks a shape for op `op` (named in the message) and writes its element count into
 * *numel (may be NULL). LB_ERR_SHAPE, with a message naming op and the shape, when ndim
 * is outside 0..LB_MAX_DIMS, a size is negative, or the element count or its bytes in
 * `dtype` overflow int64 / size_t (e.g. [INT64_MAX/2, 4] or [2^31, 2^31, 2^31]);
 * LB_ERR_VALUE when op or shape is NULL. */
lb_status lb_shape_numel(const char *op, int ndim, const int64_t *shape, lb_dtype dtype, int64_t *numel);

/* A new contiguous tensor of the given shape filled with zeros. NULL on a bad
 * shape (NULL, negative size, more than LB_MAX_DIMS dimensions, more elements or bytes
 * than a 64-bit size holds: lb_shape_numel's message) or out of memory. */
lb_tensor *lb_tensor_zeros(lb_dtype dtype, int ndim, const int64_t *shape);
/* A new contiguous tensor with the same dtype and shape as `like`, zeros. */
lb_tensor *lb_tensor_zeros_like(const lb_tensor *like);
/* As lb_tensor_zeros and lb_tensor_zeros_like, but the elements are undefined: for
 * outputs that a kernel overwrites entirely (saves clearing a reused buffer). Memory
 * comes from the calling thread's buffer pool when it has one (tensor/pool.h). */
lb_tensor *lb_tensor_empty(lb_dtype dtype, int ndim, const int64_t *shape);
lb_tensor *lb_tensor_empty_like(const lb_tensor *like);
/* A new contiguous tensor copied from `values` (row-major, numel elements of the
 * given dtype). NULL with LB_ERR_VALUE when values is NULL (lb_tensor_zeros makes zeros). */
lb_tensor *lb_tensor_from_data(lb_dtype dtype, int ndim, const int64_t *shape, const void *values);
/* A new contiguous tensor from an array of doubles, converted to `dtype`. */
lb_tensor *lb_tensor_from_doubles(lb_dtype dtype, int ndim, const int64_t *shape, const double *values);
/* A 0-dimensional tensor holding `value`. */
lb_tensor *lb_tensor_scalar(lb_dtype dtype, double value);
/* Frees the view; the storage goes when its last view does. NULL is allowed. */
void lb_tensor_free(lb_tensor *t);

/* Element count; -1 (LB_ERR_VALUE) when t is NULL. */
int64_t lb_tensor_numel(const lb_tensor *t);
/* 1 or 0; 0 (LB_ERR_VALUE) when an argument is NULL. */
int lb_tensor_is_contiguous(const lb_tensor *t);
int lb_tensor_same_shape(const lb_tensor *a, const lb_tensor *b);
/* LB_OK when a and b have one dtype; else LB_ERR_DTYPE "<op>: dtypes differ: <a> and <b>
 * (convert one with lb_tensor_copy)" (op may be NULL: "op"), and LB_ERR_VALUE for a NULL
 * tensor. */
lb_status lb_tensor_check_same_dtype(const char *op, const lb_tensor *a, const lb_tensor *b);
/* Pointer to the first element of the view (storage base + offset). */
void *lb_tensor_data(const lb_tensor *t);
/* Version counter of the storage (shared by every view of it), as PyTorch's
 * tensor._version: lb_tensor_set, lb_tensor_fill, lb_tensor_copy_into and optimizer
 * steps add one. Autograd records it when an op uses a tensor and lb_backward
 * refuses to run that op's backward once it has changed. Code that writes through
 * lb_tensor_data into a tensor an op has already used calls lb_tensor_bump_version. */
uint64_t lb_tensor_version(const lb_tensor *t);
void lb_tensor_bump_version(lb_tensor *t);
/* Value at a multi-index of ndim entries (each 0 <= index[d] < shape[d]), converted to
 * double. NaN and LB_ERR_VALUE (naming the index and the tensor) when t or index is
 * NULL or an entry is out of range; lb_tensor_set then writes nothing. */
double lb_tensor_get(const lb_tensor *t, const int64_t *index);
void lb_tensor_set(lb_tensor *t, const int64_t *index, double value);
/* Value at row-major flat position `i` of the view (0 <= i < numel), as double; NaN and
 * LB_ERR_VALUE when t is NULL or i is out of range. */
double lb_tensor_flat(const lb_tensor *t, int64_t i);
/* Formats "float32[2, 3]" into buf; returns buf. */
char *lb_tensor_describe(const lb_tensor *t, char *buf, size_t size);

/* A contiguous copy in `dtype` (copies even if already contiguous). */
lb_tensor *lb_tensor_copy(const lb_tensor *t, lb_dtype dtype);
/* Copies src into dst elementwise (same shape; dtypes may differ; dst may be a view,
 * but not one that repeats elements: a stride-0 (expanded) dim of size > 1 in dst is
 * LB_ERR_VALUE, as torch.Tensor.copy_ refuses it). */
lb_status lb_tensor_copy_into(lb_tensor *dst, const lb_tensor *src);
/* Sets every element of the view to value. */
void lb_tensor_fill(lb_tensor *t, double value);

/* Views. They share storage with `t`, which stays valid and must be freed separately. */
/* Reshape to `shape` (one entry may be -1, inferred). A view when `t` is contiguous,
 * otherwise a contiguous copy. Error if the element counts differ. */
lb_tensor *lb_tensor_reshape(const lb_tensor *t, int ndim, const int64_t *shape);
/* Reorders dimensions: result dim i is t's dim perm[i]. perm must be a permutation. */
lb_tensor *lb_tensor_permute(const lb_tensor *t, const int *perm);
/* Swaps dims d0 and d1 (negative dims count from the end). */
lb_tensor *lb_tensor_transpose(const lb_tensor *t, int d0, int d1);
/* Elements start, start+step, ... < stop along `dim` (python t[..., start:stop:step, ...]),
 * step >= 1, 0 <= start <= stop <= size. */
lb_tensor *lb_tensor_slice(const lb_tensor *t, int dim, int64_t start, int64_t stop, int64_t step);
/* Broadcasts t to `shape` (numpy rules) by giving stretched dims stride 0. */
lb_tensor *lb_tensor_expand(const lb_tensor *t, int ndim, const int64_t *shape);
/* Another view object onto exactly the same elements. */
lb_tensor *lb_tensor_view(const lb_tensor *t);

/* numpy broadcast of two shapes into out (LB_MAX_DIMS entries); *out_ndim receives
 * the rank. LB_ERR_SHAPE (message names `op` and both shapes) when incompatible. */
lb_status lb_broadcast_shapes(const char *op, int ndim_a, const int64_t *shape_a, int ndim_b,
                              const int64_t *shape_b, int *out_ndim, int64_t *out_shape);

/* Tells the C allocator (glibc) to keep freed memory in the process instead of
 * returning it to the system (mallopt M_MMAP_THRESHOLD 512 MiB, M_TRIM_THRESHOLD
 * 1 GiB). Training no longer needs it: each graph's buffer pool (tensor/pool.h) keeps
 * the step's memory, and neither the lookback command nor the benchmarks call it. It
 * remains for programs that allocate large tensors outside a graph in a loop; it is
 * process-wide, so the library never calls it by itself. Returns 1 when applied. */
int lb_keep_freed_memory(void);

/* Normalises a possibly negative dimension index; -1 on out of range (no message). */
int lb_normalize_dim(int dim, int ndim);

LB_API_END

#endif

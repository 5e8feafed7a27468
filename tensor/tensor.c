#include <math.h>
#include "tensor/tensor.h"

#include <malloc.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tensor/pool.h"
#include "tensor/strided_internal.h"

struct lb_storage {
    void *data;
    size_t nbytes;
    int refcount;
    lb_pool *pool;     /* where the buffer goes back to; NULL: free() */
    size_t capacity;   /* of the buffer, >= nbytes */
    uint64_t version;  /* in-place writes so far (lb_tensor_version) */
};

size_t lb_dtype_size(lb_dtype dtype) { return dtype == LB_FLOAT32 ? sizeof(float) : sizeof(double); }

const char *lb_dtype_name(lb_dtype dtype) { return dtype == LB_FLOAT32 ? "float32" : "float64"; }

int lb_normalize_dim(int dim, int ndim)
{
    if (dim < 0)
        dim += ndim;
    return (dim < 0 || dim >= ndim) ? -1 : dim;
}

static int64_t shape_numel(int ndim, const int64_t *shape)
{
    int64_t n = 1;
    for (int i = 0; i < ndim; i++)
        n *= shape[i];
    return n;
}

int lb_checked_mul(int64_t a, int64_t b, int64_t *out)
{
    int64_t r;
    if (a < 0 || b < 0 || __builtin_mul_overflow(a, b, &r))
        return -1;
    if (out)
        *out = r;
    return 0;
}

lb_status lb_shape_numel(const char *op, int ndim, const int64_t *shape, lb_dtype dtype, int64_t *numel)
{
    LB_CHECK_ARG(op, LB_ERR_VALUE);
    LB_CHECK_SHAPE(ndim, shape, LB_ERR_VALUE);
    char buf[160];
    if (ndim < 0 || ndim > LB_MAX_DIMS)
        return lb_error(LB_ERR_SHAPE, "%s: rank %d is outside 0..%d (LB_MAX_DIMS, the most dims a lookback tensor has)",
                        op, ndim, LB_MAX_DIMS);
    for (int i = 0; i < ndim; i++)
        if (shape[i] < 0)
            return lb_error(LB_ERR_SHAPE, "%s: shape %s has a negative size at dim %d", op,
                            lb_shape_str(ndim, shape, buf, sizeof buf), i);
    /* Element count and bytes both fit in int64 (so in ptrdiff_t and size_t on 64-bit):
     * every size, stride and offset computed from the shape is then exact. */
    int64_t n = 1, bytes;
    for (int i = 0; i < ndim; i++)
        if (lb_checked_mul(n, shape[i], &n) != 0)
            n = -1;
    size_t elem = lb_dtype_size(dtype);
    if (n < 0 || lb_checked_mul(n, (int64_t)(elem ? elem : 8), &bytes) != 0 || (uint64_t)bytes > (uint64_t)SIZE_MAX)
        return lb_error(LB_ERR_SHAPE,
                        "%s: shape %s has more elements than a tensor can hold (its %s bytes would overflow a "
                        "64-bit size)",
                        op, lb_shape_str(ndim, shape, buf, sizeof buf), lb_dtype_name(dtype));
    if (numel)
        *numel = n;
    return LB_OK;
}

static void contiguous_strides(int ndim, const int64_t *shape, int64_t *strides)
{
    int64_t s = 1;
    for (int i = ndim - 1; i >= 0; i--) {
        strides[i] = s;
        s *= shape[i];
    }
}

static lb_status check_shape(const char *fn, int ndim, const int64_t *shape, lb_dtype dtype)
{
    return lb_shape_numel(fn, ndim, shape, dtype, NULL);
}

static lb_tensor *tensor_alloc_view(const lb_tensor *base)
{
    lb_tensor *t = malloc(sizeof *t);
    if (!t) {
        lb_error(LB_ERR_MEMORY, "tensor view: out of memory");
        return NULL;
    }
    *t = *base;
    t->storage->refcount++;
    return t;
}

/* A contiguous tensor whose elements are zero (zero != 0) or undefined. */
static lb_tensor *tensor_new(const char *fn, lb_dtype dtype, int ndim, const int64_t *shape, int zero)
{
    if (dtype != LB_FLOAT32 && dtype != LB_FLOAT64) {
        lb_error(LB_ERR_DTYPE, "%s: unknown dtype %d", fn, (int)dtype);
        return NULL;
    }
    if (check_shape(fn, ndim, shape, dtype) != LB_OK)
        return NULL;
    int64_t n = shape_numel(ndim, shape);
    lb_tensor *t = calloc(1, sizeof *t);
    lb_storage *s = calloc(1, sizeof *s);
    size_t nbytes = (size_t)(n > 0 ? n : 1) * lb_dtype_size(dtype);
    void *data = (t && s) ? lb_pool_take(nbytes, zero, &s->pool, &s->capacity) : NULL;
    if (!data) {
        free(t);
        free(s);
        char buf[128];
        lb_error(LB_ERR_MEMORY, "%s: cannot allocate %s %s (%zu bytes)", fn, lb_dtype_name(dtype),
                 lb_shape_str(ndim, shape, buf, sizeof buf), nbytes);
        return NULL;
    }
    s->data = data;
    s->nbytes = nbytes;
    s->refcount = 1;
    t->dtype = dtype;
    t->ndim = ndim;
    if (ndim > 0)
        memcpy(t->shape, shape, (size_t)ndim * sizeof *shape);
    contiguous_strides(ndim, shape, t->strides);
    t->offset = 0;
    t->storage = s;
    return t;
}

lb_tensor *lb_tensor_zeros(lb_dtype dtype, int ndim, const int64_t *shape)
{
    LB_CHECK_SHAPE(ndim, shape, NULL);
    return tensor_new("lb_tensor_zeros", dtype, ndim, shape, 1);
}

lb_tensor *lb_tensor_empty(lb_dtype dtype, int ndim, const int64_t *shape)
{
    LB_CHECK_SHAPE(ndim, shape, NULL);
    return tensor_new("lb_tensor_empty", dtype, ndim, shape, 0);
}

lb_tensor *lb_tensor_empty_like(const lb_tensor *like)
{
    LB_CHECK_ARG(like, NULL);
    return lb_tensor_empty(like->dtype, like->ndim, like->shape);
}

lb_tensor *lb_tensor_zeros_like(const lb_tensor *like)
{
    LB_CHECK_ARG(like, NULL);
    return lb_tensor_zeros(like->dtype, like->ndim, like->shape);
}

lb_tensor *lb_tensor_from_data(lb_dtype dtype, int ndim, const int64_t *shape, const void *values)
{
    LB_CHECK_SHAPE(ndim, shape, NULL);
    if (!values) { /* a shape too large is said first */
        int64_t n = 0;
        if (lb_shape_numel("lb_tensor_from_data", ndim, shape, dtype, &n) == LB_OK)
            lb_error(LB_ERR_VALUE, "lb_tensor_from_data: values is NULL (for a tensor of zeros use lb_tensor_zeros)");
        return NULL;
    }
    lb_tensor *t = lb_tensor_empty(dtype, ndim, shape);
    if (t)
        memcpy(t->storage->data, values, (size_t)lb_tensor_numel(t) * lb_dtype_size(dtype));
    return t;
}

lb_tensor *lb_tensor_from_doubles(lb_dtype dtype, int ndim, const int64_t *shape, const double *values)
{
    LB_CHECK_SHAPE(ndim, shape, NULL);
    LB_CHECK_ARG(values, NULL);
    lb_tensor *t = lb_tensor_empty(dtype, ndim, shape);
    if (!t)
        return NULL;
    int64_t n = lb_tensor_numel(t);
    LB_DISPATCH(dtype, T, {
        T *p = lb_tensor_data(t);
        for (int64_t i = 0; i < n; i++)
            p[i] = (T)values[i];
    });
    return t;
}

lb_tensor *lb_tensor_scalar(lb_dtype dtype, double value)
{
    return lb_tensor_from_doubles(dtype, 0, NULL, &value);
}

void lb_tensor_free(lb_tensor *t)
{
    if (!t)
        return;
    if (--t->storage->refcount == 0) {
        lb_pool_give(t->storage->pool, t->storage->data, t->storage->capacity);
        free(t->storage);
    }
    free(t);
}

int64_t lb_tensor_numel(const lb_tensor *t)
{
    LB_CHECK_ARG(t, -1);
    return shape_numel(t->ndim, t->shape);
}

int lb_tensor_is_contiguous(const lb_tensor *t)
{
    LB_CHECK_ARG(t, 0);
    int64_t s = 1;
    for (int i = t->ndim - 1; i >= 0; i--) {
        if (t->shape[i] != 1 && t->strides[i] != s)
            return 0;
        s *= t->shape[i];
    }
    return 1;
}

int lb_tensor_same_shape(const lb_tensor *a, const lb_tensor *b)
{
    LB_CHECK_ARG(a, 0);
    LB_CHECK_ARG(b, 0);
    if (a->ndim != b->ndim)
        return 0;
    for (int i = 0; i < a->ndim; i++)
        if (a->shape[i] != b->shape[i])
            return 0;
    return 1;
}

void *lb_tensor_data(const lb_tensor *t)
{
    LB_CHECK_ARG(t, NULL);
    return (char *)t->storage->data + (size_t)t->offset * lb_dtype_size(t->dtype);
}

uint64_t lb_tensor_version(const lb_tensor *t)
{
    LB_CHECK_ARG(t, 0);
    return t->storage->version;
}

void lb_tensor_bump_version(lb_tensor *t)
{
    LB_CHECK_ARG(t);
    t->storage->version++;
}

/* LB_ERR_VALUE naming fn, the index and the tensor when an entry is outside [0, size). */
static lb_status check_index(const char *fn, const lb_tensor *t, const int64_t *index)
{
    for (int i = 0; i < t->ndim; i++)
        if (index[i] < 0 || index[i] >= t->shape[i]) {
            char a[160], b[160];
            return lb_error(LB_ERR_VALUE, "%s: index %s is out of range for %s (dim %d: %lld not in [0, %lld))", fn,
                            lb_shape_str(t->ndim, index, a, sizeof a), lb_tensor_describe(t, b, sizeof b), i,
                            (long long)index[i], (long long)t->shape[i]);
        }
    return LB_OK;
}

static int64_t index_offset(const lb_tensor *t, const int64_t *index)
{
    int64_t off = t->offset;
    for (int i = 0; i < t->ndim; i++)
        off += index[i] * t->strides[i];
    return off;
}

static int64_t flat_offset(const lb_tensor *t, int64_t flat)
{
    int64_t off = t->offset;
    for (int i = t->ndim - 1; i >= 0; i--) {
        off += (flat % t->shape[i]) * t->strides[i];
        flat /= t->shape[i];
    }
    return off;
}

static double load(const lb_tensor *t, int64_t off)
{
    return t->dtype == LB_FLOAT32 ? (double)((const float *)t->storage->data)[off]
                                  : ((const double *)t->storage->data)[off];
}

static void store(lb_tensor *t, int64_t off, double v)
{
    if (t->dtype == LB_FLOAT32)
        ((float *)t->storage->data)[off] = (float)v;
    else
        ((double *)t->storage->data)[off] = v;
}

double lb_tensor_get(const lb_tensor *t, const int64_t *index)
{
    LB_CHECK_ARG(t, NAN);
    LB_CHECK_ARG(index, NAN);
    if (check_index("lb_tensor_get", t, index) != LB_OK)
        return NAN;
    return load(t, index_offset(t, index));
}
void lb_tensor_set(lb_tensor *t, const int64_t *index, double v)
{
    LB_CHECK_ARG(t);
    LB_CHECK_ARG(index);
    if (check_index("lb_tensor_set", t, index) != LB_OK)
        return;
    store(t, index_offset(t, index), v);
    t->storage->version++;
}
double lb_tensor_flat(const lb_tensor *t, int64_t i)
{
    LB_CHECK_ARG(t, NAN);
    int64_t n = lb_tensor_numel(t);
    if (i < 0 || i >= n) {
        char b[160];
        lb_error(LB_ERR_VALUE, "lb_tensor_flat: flat index %lld is out of range for %s (need 0 <= i < %lld)",
                 (long long)i, lb_tensor_describe(t, b, sizeof b), (long long)n);
        return NAN;
    }
    return load(t, flat_offset(t, i));
}

char *lb_tensor_describe(const lb_tensor *t, char *buf, size_t size)
{
    LB_CHECK_ARG(t, NULL);
    LB_CHECK_ARG(buf, NULL);
    char shape[128];
    snprintf(buf, size, "%s%s", lb_dtype_name(t->dtype), lb_shape_str(t->ndim, t->shape, shape, sizeof shape));
    return buf;
}

/* Walks every element of dst (odometer order) alongside src with its own strides. */
lb_status lb_tensor_copy_into(lb_tensor *dst, const lb_tensor *src)
{
    LB_CHECK_ARG(dst, LB_ERR_VALUE);
    LB_CHECK_ARG(src, LB_ERR_VALUE);
    if (!lb_tensor_same_shape(dst, src)) {
        char a[128], b[128];
        return lb_error(LB_ERR_SHAPE, "lb_tensor_copy_into: destination %s and source %s differ",
                        lb_tensor_describe(dst, a, sizeof a), lb_tensor_describe(src, b, sizeof b));
    }
    int64_t count = lb_tensor_numel(dst);
    if (count == 0)
        return LB_OK;
    for (int i = 0; i < dst->ndim; i++)
        if (dst->strides[i] == 0 && dst->shape[i] > 1) {
            char a[128];
            return lb_error(LB_ERR_VALUE,
                            "lb_tensor_copy_into: destination %s repeats elements (stride 0 in dim %d, an expanded "
                            "view): several of its elements are one memory location; copy into a contiguous tensor "
                            "(lb_tensor_copy), as torch.Tensor.copy_ refuses",
                            lb_tensor_describe(dst, a, sizeof a), i);
        }
    dst->storage->version++;
    if (dst->dtype == src->dtype && lb_tensor_is_contiguous(dst) && lb_tensor_is_contiguous(src)) {
        memmove(lb_tensor_data(dst), lb_tensor_data(src), (size_t)count * lb_dtype_size(dst->dtype));
        return LB_OK;
    }
    if (dst->dtype == src->dtype) {
        /* Each run of dst's last dim is written by one thread unless dst repeats elements. */
        int distinct = 1;
        for (int i = 0; i + 1 < dst->ndim; i++)
            if (dst->strides[i] == 0 && dst->shape[i] > 1)
                distinct = 0;
        LB_DISPATCH(dst->dtype, T, {
            T *pd = dst->storage->data;
            const T *ps = src->storage->data;
            LB_STRIDED_LOOP3(distinct, dst->ndim, dst->shape, dst->strides, src->strides, src->strides, dst->offset,
                             src->offset, src->offset, {
                                 T *d = pd + oa;
                                 const T *x = ps + ob;
                                 if (la == 1 && lb == 1)
                                     memcpy(d, x, (size_t)n * sizeof *d);
                                 else
                                     for (int64_t i = 0; i < n; i++)
                                         d[i * la] = x[i * lb];
                             });
        });
        return LB_OK;
    }
    int64_t idx[LB_MAX_DIMS] = {0};
    int64_t od = dst->offset, os = src->offset;
    for (int64_t k = 0; k < count; k++) {
        store(dst, od, load(src, os));
        for (int d = dst->ndim - 1; d >= 0; d--) {
            idx[d]++;
            od += dst->strides[d];
            os += src->strides[d];
            if (idx[d] < dst->shape[d])
                break;
            od -= idx[d] * dst->strides[d];
            os -= idx[d] * src->strides[d];
            idx[d] = 0;
        }
    }
    return LB_OK;
}

lb_tensor *lb_tensor_copy(const lb_tensor *t, lb_dtype dtype)
{
    LB_CHECK_ARG(t, NULL);
    lb_tensor *out = lb_tensor_empty(dtype, t->ndim, t->shape);
    if (out && lb_tensor_copy_into(out, t) != LB_OK) {
        lb_tensor_free(out);
        return NULL;
    }
    return out;
}

void lb_tensor_fill(lb_tensor *t, double value)
{
    LB_CHECK_ARG(t);
    int64_t n = lb_tensor_numel(t);
    t->storage->version++;
    if (lb_tensor_is_contiguous(t)) {
        LB_DISPATCH(t->dtype, T, {
            T *p = lb_tensor_data(t);
            for (int64_t i = 0; i < n; i++)
                p[i] = (T)value;
        });
        return;
    }
    for (int64_t i = 0; i < n; i++)
        store(t, flat_offset(t, i), value);
}

lb_tensor *lb_tensor_view(const lb_tensor *t)
{
    LB_CHECK_ARG(t, NULL);
    return tensor_alloc_view(t);
}

lb_tensor *lb_tensor_reshape(const lb_tensor *t, int ndim, const int64_t *shape)
{
    LB_CHECK_ARG(t, NULL);
    LB_CHECK_SHAPE(ndim, shape, NULL);
    char a[128], b[128];
    int64_t resolved[LB_MAX_DIMS];
    int infer = -1;
    int64_t known = 1;
    if (ndim < 0 || ndim > LB_MAX_DIMS) {
        lb_error(LB_ERR_SHAPE, "reshape: rank %d is outside 0..%d (LB_MAX_DIMS, the most dims a lookback tensor has)",
                 ndim, LB_MAX_DIMS);
        return NULL;
    }
    for (int i = 0; i < ndim; i++) {
        resolved[i] = shape[i];
        if (shape[i] == -1) {
            if (infer >= 0) {
                lb_error(LB_ERR_SHAPE, "reshape: more than one -1 in %s", lb_shape_str(ndim, shape, a, sizeof a));
                return NULL;
            }
            infer = i;
        } else if (shape[i] < 0) {
            lb_error(LB_ERR_SHAPE, "reshape: negative size in %s", lb_shape_str(ndim, shape, a, sizeof a));
            return NULL;
        } else if (lb_checked_mul(known, shape[i], &known) != 0) {
            lb_error(LB_ERR_SHAPE, "reshape: shape %s has more elements than a tensor can hold (overflows int64)",
                     lb_shape_str(ndim, shape, a, sizeof a));
            return NULL;
        }
    }
    int64_t n = lb_tensor_numel(t);
    if (infer >= 0) {
        if (known == 0 || n % known != 0) {
            lb_error(LB_ERR_SHAPE, "reshape: cannot infer -1 in %s for %s", lb_shape_str(ndim, shape, a, sizeof a),
                     lb_tensor_describe(t, b, sizeof b));
            return NULL;
        }
        resolved[infer] = n / known;
    }
    if (shape_numel(ndim, resolved) != n) {
        lb_error(LB_ERR_SHAPE, "reshape: %s has %lld elements but the new shape %s has %lld", lb_tensor_describe(t, b, sizeof b),
                 (long long)n, lb_shape_str(ndim, resolved, a, sizeof a), (long long)shape_numel(ndim, resolved));
        return NULL;
    }
    lb_tensor *out = lb_tensor_is_contiguous(t) ? tensor_alloc_view(t) : lb_tensor_copy(t, t->dtype);
    if (!out)
        return NULL;
    out->ndim = ndim;
    if (ndim > 0)
        memcpy(out->shape, resolved, (size_t)ndim * sizeof *resolved);
    contiguous_strides(ndim, resolved, out->strides);
    return out;
}

lb_tensor *lb_tensor_permute(const lb_tensor *t, const int *perm)
{
    LB_CHECK_ARG(t, NULL);
    LB_CHECK_ARG(perm, NULL);
    int seen[LB_MAX_DIMS] = {0};
    for (int i = 0; i < t->ndim; i++) {
        if (perm[i] < 0 || perm[i] >= t->ndim || seen[perm[i]]++) {
            char b[128];
            lb_error(LB_ERR_SHAPE, "permute: the order given for %s is not a permutation of 0..%d (entry %d)",
                     lb_tensor_describe(t, b, sizeof b), t->ndim - 1, i);
            return NULL;
        }
    }
    lb_tensor *out = tensor_alloc_view(t);
    if (!out)
        return NULL;
    for (int i = 0; i < t->ndim; i++) {
        out->shape[i] = t->shape[perm[i]];
        out->strides[i] = t->strides[perm[i]];
    }
    return out;
}

lb_tensor *lb_tensor_transpose(const lb_tensor *t, int d0, int d1)
{
    LB_CHECK_ARG(t, NULL);
    int a = lb_normalize_dim(d0, t->ndim), b = lb_normalize_dim(d1, t->ndim);
    if (a < 0 || b < 0) {
        char buf[128];
        lb_error(LB_ERR_SHAPE, "transpose: dims (%d, %d) out of range for %s", d0, d1, lb_tensor_describe(t, buf, sizeof buf));
        return NULL;
    }
    int perm[LB_MAX_DIMS];
    for (int i = 0; i < t->ndim; i++)
        perm[i] = i;
    perm[a] = b;
    perm[b] = a;
    return lb_tensor_permute(t, perm);
}

lb_tensor *lb_tensor_slice(const lb_tensor *t, int dim, int64_t start, int64_t stop, int64_t step)
{
    LB_CHECK_ARG(t, NULL);
    char buf[128];
    int d = lb_normalize_dim(dim, t->ndim);
    if (d < 0) {
        lb_error(LB_ERR_SHAPE, "slice: dim %d out of range for %s", dim, lb_tensor_describe(t, buf, sizeof buf));
        return NULL;
    }
    if (step < 1 || start < 0 || stop < start || stop > t->shape[d]) {
        lb_error(LB_ERR_VALUE, "slice: range %lld:%lld:%lld is invalid for dim %d of %s (need 0 <= start <= stop <= %lld, step >= 1)",
                 (long long)start, (long long)stop, (long long)step, d, lb_tensor_describe(t, buf, sizeof buf),
                 (long long)t->shape[d]);
        return NULL;
    }
    int64_t stride;
    if (lb_checked_mul(t->strides[d] < 0 ? -t->strides[d] : t->strides[d], step, &stride) != 0) {
        lb_error(LB_ERR_VALUE, "slice: step %lld times the stride %lld of dim %d of %s overflows int64", (long long)step,
                 (long long)t->strides[d], d, lb_tensor_describe(t, buf, sizeof buf));
        return NULL;
    }
    lb_tensor *out = tensor_alloc_view(t);
    if (!out)
        return NULL;
    out->offset += start * t->strides[d];
    out->shape[d] = (stop - start) / step + ((stop - start) % step != 0);
    out->strides[d] = t->strides[d] < 0 ? -stride : stride;
    return out;
}

lb_status lb_broadcast_shapes(const char *op, int ndim_a, const int64_t *shape_a, int ndim_b,
                              const int64_t *shape_b, int *out_ndim, int64_t *out_shape)
{
    LB_CHECK_ARG(op, LB_ERR_VALUE);
    LB_CHECK_SHAPE(ndim_a, shape_a, LB_ERR_VALUE);
    LB_CHECK_SHAPE(ndim_b, shape_b, LB_ERR_VALUE);
    LB_CHECK_ARG(out_ndim, LB_ERR_VALUE);
    LB_CHECK_ARG(out_shape, LB_ERR_VALUE);
    if (ndim_a < 0 || ndim_a > LB_MAX_DIMS || ndim_b < 0 || ndim_b > LB_MAX_DIMS)
        return lb_error(LB_ERR_SHAPE, "%s: ranks %d and %d must be in 0..%d (LB_MAX_DIMS)", op, ndim_a, ndim_b,
                        LB_MAX_DIMS);
    int n = ndim_a > ndim_b ? ndim_a : ndim_b;
    for (int i = 0; i < n; i++) {
        int ia = ndim_a - n + i, ib = ndim_b - n + i;
        int64_t sa = ia >= 0 ? shape_a[ia] : 1, sb = ib >= 0 ? shape_b[ib] : 1;
        if (sa < 0 || sb < 0) {
            char a[128], b[128];
            return lb_error(LB_ERR_SHAPE, "%s: shapes %s and %s: a size is negative (dim %d: %lld vs %lld)", op,
                            lb_shape_str(ndim_a, shape_a, a, sizeof a), lb_shape_str(ndim_b, shape_b, b, sizeof b), i,
                            (long long)sa, (long long)sb);
        }
        if (sa != sb && sa != 1 && sb != 1) {
            char a[128], b[128];
            return lb_error(LB_ERR_SHAPE, "%s: shapes %s and %s do not broadcast (dim %d: %lld vs %lld)", op,
                            lb_shape_str(ndim_a, shape_a, a, sizeof a), lb_shape_str(ndim_b, shape_b, b, sizeof b), i,
                            (long long)sa, (long long)sb);
        }
        out_shape[i] = sa == 1 ? sb : sa;
    }
    *out_ndim = n;
    return LB_OK;
}

lb_tensor *lb_tensor_expand(const lb_tensor *t, int ndim, const int64_t *shape)
{
    LB_CHECK_ARG(t, NULL);
    LB_CHECK_SHAPE(ndim, shape, NULL);
    char a[128], b[128];
    if (ndim < t->ndim || ndim > LB_MAX_DIMS) {
        lb_error(LB_ERR_SHAPE, "expand: cannot expand %s to %s", lb_tensor_describe(t, a, sizeof a),
                 lb_shape_str(ndim, shape, b, sizeof b));
        return NULL;
    }
    if (lb_shape_numel("expand", ndim, shape, t->dtype, NULL) != LB_OK)
        return NULL;
    lb_tensor *out = tensor_alloc_view(t);
    if (!out)
        return NULL;
    int lead = ndim - t->ndim;
    for (int i = ndim - 1; i >= 0; i--) {
        int src = i - lead;
        int64_t size = src >= 0 ? t->shape[src] : 1;
        int64_t stride = src >= 0 ? t->strides[src] : 0;
        if (size != shape[i]) {
            if (size != 1) {
                lb_error(LB_ERR_SHAPE, "expand: cannot expand %s to %s (dim %d)", lb_tensor_describe(t, a, sizeof a),
                         lb_shape_str(ndim, shape, b, sizeof b), i);
                lb_tensor_free(out);
                return NULL;
            }
            stride = 0;
        }
        out->shape[i] = shape[i];
        out->strides[i] = stride;
    }
    out->ndim = ndim;
    return out;
}

int lb_keep_freed_memory(void)
{
    /* Blocks below 512 MiB come from the heap, and the heap is trimmed only past 1 GiB free. */
    return mallopt(M_MMAP_THRESHOLD, 512 << 20) == 1 && mallopt(M_TRIM_THRESHOLD, 1 << 30) == 1;
}

lb_status lb_tensor_check_same_dtype(const char *op, const lb_tensor *a, const lb_tensor *b)
{
    LB_CHECK_ARG(a && b, LB_ERR_VALUE);
    if (a->dtype == b->dtype)
        return LB_OK;
    char sa[128], sb[128];
    return lb_error(LB_ERR_DTYPE, "%s: dtypes differ: %s and %s (convert one with lb_tensor_copy)", op ? op : "op",
                    lb_tensor_describe(a, sa, sizeof sa), lb_tensor_describe(b, sb, sizeof sb));
}

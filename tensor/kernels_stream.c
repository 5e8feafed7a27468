/* Row movement for streaming state (tensor/kernels_stream.h). Named dims B, M, R, D. */
#include "tensor/kernels_stream.h"

#include <string.h>

lb_status lb_k_copy_rows(lb_tensor *dst, const int64_t *dst_row, const lb_tensor *src, const int64_t *src_row,
                         const int64_t *count)
{
    char sd[128], ss[128];
    int nd = dst ? dst->ndim : 0;
    int fits = dst && src && nd >= 3 && src->ndim == nd && dst->dtype == src->dtype && lb_tensor_is_contiguous(dst) &&
               lb_tensor_is_contiguous(src) && dst->shape[nd - 1] == src->shape[nd - 1];
    for (int d = 0; fits && d < nd - 2; d++)
        fits = dst->shape[d] == src->shape[d];
    if (!fits)
        return lb_error(LB_ERR_SHAPE, "copy_rows: dst %s and src %s must be contiguous [B, ..., R, D] of one dtype with "
                                      "the same B, middle dims and D",
                        dst ? lb_tensor_describe(dst, sd, sizeof sd) : "NULL",
                        src ? lb_tensor_describe(src, ss, sizeof ss) : "NULL");
    int64_t b = dst->shape[0], m = 1, rd = dst->shape[nd - 2], rs = src->shape[nd - 2], d = dst->shape[nd - 1];
    for (int i = 1; i < nd - 2; i++)
        m *= dst->shape[i];
    for (int64_t bi = 0; bi < b; bi++)
        if (count[bi] < 0 || dst_row[bi] < 0 || src_row[bi] < 0 || dst_row[bi] + count[bi] > rd ||
            src_row[bi] + count[bi] > rs)
            return lb_error(LB_ERR_VALUE, "copy_rows: stream %lld copies %lld rows from row %lld of src %s to row %lld of "
                                          "dst %s, outside their rows",
                            (long long)bi, (long long)count[bi], (long long)src_row[bi],
                            lb_tensor_describe(src, ss, sizeof ss), (long long)dst_row[bi],
                            lb_tensor_describe(dst, sd, sizeof sd));
    size_t es = lb_dtype_size(dst->dtype), row = (size_t)d * es;
    char *pd = lb_tensor_data(dst);
    const char *ps = lb_tensor_data(src);
    for (int64_t bi = 0; bi < b; bi++) {
        if (count[bi] == 0)
            continue;
        for (int64_t mi = 0; mi < m; mi++) {
            char *to = pd + ((size_t)((bi * m + mi) * rd + dst_row[bi])) * row;
            const char *from = ps + ((size_t)((bi * m + mi) * rs + src_row[bi])) * row;
            memmove(to, from, (size_t)count[bi] * row); /* [count, D] */
        }
    }
    return LB_OK;
}

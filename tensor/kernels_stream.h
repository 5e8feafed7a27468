/* Data movement for streaming state: the rows of per-stream buffers (key-value
 * caches, convolution input histories) are appended, shifted and copied into larger
 * buffers by one small kernel.
 *
 * Named dims: B streams, M the product of any middle dims (heads for a key-value
 * cache [B, H, R, D]; 1 for a convolution history [B, R, D]), R rows (time steps)
 * per stream, D row width.
 */
#ifndef LB_KERNELS_STREAM_H
#define LB_KERNELS_STREAM_H

#include "tensor/api.h"
#include "tensor/tensor.h"

LB_API_BEGIN

/* Copies, for every stream b < B and middle index m < M, the rows
 *   dst[b, m, dst_row[b] + i, :] = src[b, m, src_row[b] + i, :]   for i < count[b].
 *   dst: contiguous [B, ..., Rd, D]; src: contiguous [B, ..., Rs, D] with the same
 *   leading dims and D, the same dtype. dst and src may be the same tensor (the rows
 *   may overlap: the copy behaves as memmove), never partly overlapping other storage.
 * dst_row, src_row, count: int64 [B], count[b] >= 0; rows must stay inside R.
 * Errors: LB_ERR_SHAPE / LB_ERR_DTYPE naming both tensors, LB_ERR_VALUE naming the
 * stream whose rows fall outside (nothing is copied then). */
lb_status lb_k_copy_rows(lb_tensor *dst, const int64_t *dst_row, const lb_tensor *src, const int64_t *src_row,
                         const int64_t *count);

LB_API_END

#endif

/* Row-major walks over strided tensors, split over threads (for tensor/ only). */
#ifndef LB_STRIDED_INTERNAL_H
#define LB_STRIDED_INTERNAL_H

#include <stdint.h>
#ifdef _OPENMP
#include <omp.h>
#endif

#include "tensor/tensor.h"
#include "tensor/threads.h"

/* The calling thread's number in the enclosing OpenMP region (0 outside one). */
static inline int64_t thread_index(void)
{
#ifdef _OPENMP
    return omp_get_thread_num();
#else
    return 0;
#endif
}

/* Visits every element of `shape` in row-major order. For each run of the last
 * dimension, BODY sees `n` (run length), and offsets oa, ob, oc of the run's first
 * element in three operands with strides sa, sb, sc (la, lb, lc: last-dim strides).
 * With `parallel` nonzero the runs are split into contiguous ranges, one per thread
 * (lb_threads_for): BODY must then write only elements no other run writes, and each
 * element is computed as in the serial loop, whatever the thread count. */
#define LB_STRIDED_LOOP3(parallel_, ndim_, shape_, sa, sb, sc, oa0, ob0, oc0, ...)         \
    do {                                                                                    \
        int nd_ = (ndim_);                                                                  \
        int64_t n = nd_ ? (shape_)[nd_ - 1] : 1;                                            \
        int64_t la = nd_ ? (sa)[nd_ - 1] : 0, lb = nd_ ? (sb)[nd_ - 1] : 0,                 \
                lc = nd_ ? (sc)[nd_ - 1] : 0;                                               \
        int64_t runs_ = 1;                                                                  \
        for (int d_ = 0; d_ < nd_ - 1; d_++)                                                \
            runs_ *= (shape_)[d_];                                                          \
        int nt_ = (parallel_) && n > 0 ? lb_threads_for(runs_ * n, LB_GRAIN_ELEMENTS) : 1; \
        _Pragma("omp parallel num_threads(nt_) if (nt_ > 1)")                              \
        {                                                                                   \
            int64_t r0_ = runs_ * thread_index() / nt_, r1_ = runs_ * (thread_index() + 1) / nt_; \
            int64_t idx_[LB_MAX_DIMS] = {0};                                                \
            int64_t oa = (oa0), ob = (ob0), oc = (oc0);                                     \
            for (int64_t q_ = r0_, d_ = r0_ < r1_ ? nd_ - 2 : -1; d_ >= 0; d_--) {                           \
                idx_[d_] = q_ % (shape_)[d_];                                               \
                q_ /= (shape_)[d_];                                                         \
                oa += idx_[d_] * (sa)[d_];                                                  \
                ob += idx_[d_] * (sb)[d_];                                                  \
                oc += idx_[d_] * (sc)[d_];                                                  \
            }                                                                               \
            for (int64_t r_ = r0_; r_ < r1_ && n > 0; r_++) {                               \
                __VA_ARGS__                                                                 \
                for (int d_ = nd_ - 2; d_ >= 0; d_--) {                                     \
                    idx_[d_]++;                                                             \
                    oa += (sa)[d_];                                                         \
                    ob += (sb)[d_];                                                         \
                    oc += (sc)[d_];                                                         \
                    if (idx_[d_] < (shape_)[d_])                                            \
                        break;                                                              \
                    oa -= idx_[d_] * (sa)[d_];                                              \
                    ob -= idx_[d_] * (sb)[d_];                                              \
                    oc -= idx_[d_] * (sc)[d_];                                              \
                    idx_[d_] = 0;                                                           \
                }                                                                           \
            }                                                                               \
        }                                                                                   \
        (void)la;                                                                           \
        (void)lb;                                                                           \
        (void)lc;                                                                           \
    } while (0)

#endif

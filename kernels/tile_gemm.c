/* The float32 tile product: C [m, n] (+)= alpha * A [m, k] B [k, n] on a register-blocked
 * micro-kernel (kernels/tile_micro_internal.h), compiled once per instruction-set build
 * (tensor/isa.h). Declared in kernels/tile_gemm_internal.h. */
#include "kernels/tile_gemm_internal.h"

#include <string.h>

#include "tensor/isa.h"

#if defined(__GNUC__) && defined(__x86_64__)
#define LB_TILE_X86 1
#define LB_INLINE static inline __attribute__((always_inline))
#else
#define LB_INLINE static inline
#endif

/* The micro-kernel's helpers are always inlined, so no vector crosses a call boundary. */
#pragma GCC diagnostic ignored "-Wpsabi"

#ifdef LB_TILE_X86
#define LB_VL 8
#include "kernels/vector_internal.h"
#include "kernels/tile_micro_internal.h"
#undef LB_VL
#define LB_VL 16
#include "kernels/vector_internal.h"
#include "kernels/tile_micro_internal.h"
#undef LB_VL

__attribute__((target("avx2,fma"))) void lb_k_tile_gemm_avx2(int64_t m, int64_t n, int64_t k, float alpha,
                                                             const float *a, int64_t a_rs, int64_t a_cs,
                                                             const float *b, int64_t ldb, int accumulate, float *c,
                                                             int64_t ldc)
{
    tile_gemm_f8(m, n, k, alpha, a, a_rs, a_cs, b, ldb, accumulate, c, ldc);
}

__attribute__((target("avx512f,fma"))) void lb_k_tile_gemm_avx512(int64_t m, int64_t n, int64_t k, float alpha,
                                                                  const float *a, int64_t a_rs, int64_t a_cs,
                                                                  const float *b, int64_t ldb, int accumulate,
                                                                  float *c, int64_t ldc)
{
    tile_gemm_f16(m, n, k, alpha, a, a_rs, a_cs, b, ldb, accumulate, c, ldc);
}
#endif

/* The chosen build's product, NULL in the baseline build. */
static lb_tile_gemm_fn chosen_build(void)
{
#ifdef LB_TILE_X86
    switch (lb_isa()) {
    case LB_BUILD_AVX512: return lb_k_tile_gemm_avx512;
    case LB_BUILD_AVX2: return lb_k_tile_gemm_avx2;
    default: break;
    }
#endif
    return NULL;
}

int lb_k_tile_gemm_ready(void) { return chosen_build() != NULL; }

int lb_k_tile_gemm_f32(int64_t m, int64_t n, int64_t k, float alpha, const float *a, int64_t a_rs, int64_t a_cs,
                       const float *b, int64_t ldb, int accumulate, float *c, int64_t ldc)
{
    lb_tile_gemm_fn mk = chosen_build();
    if (!mk)
        return 0;
    mk(m, n, k, alpha, a, a_rs, a_cs, b, ldb, accumulate, c, ldc);
    return 1;
}

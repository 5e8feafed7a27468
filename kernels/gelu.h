/* GELU and its backward, elementwise, on the vector build the instruction-set choice
 * names (tensor/isa.h) for float32. */
#ifndef LB_KERNELS_GELU_H
#define LB_KERNELS_GELU_H

#include "tensor/api.h"

#include "tensor/tensor.h"

LB_API_BEGIN

/* GELU, exact form (torch.nn.functional.gelu with approximate="none"; Hendrycks and
 * Gimpel 2016): gelu(x) = x Φ(x) = 0.5 x erfc(-x / sqrt 2), elementwise.
 *   x, y: [n] contiguous, of `dtype`; y = gelu(x), or y += gelu(x) when `residual`
 *   (a residual branch); y may be x when not residual.
 * float64: 0.5 x erfc(-x / sqrt 2) in double with libm's erfc. float32: on x86-64
 * with AVX-512 or AVX2, glibc's vector erfcf (libmvec) on 16 or 8 lanes, every element
 * (the last partial vector too) through the same vector function, so a value's result
 * does not depend on n, its position or the thread count; elsewhere the float64
 * formula rounded to float. The erfc form keeps the relative precision of the small
 * results at negative x (where 1 + erf(x / sqrt 2) cancels to 0 from x = -8.3 in double).
 * Errors: LB_ERR_VALUE for NULL x or y, n < 0, or a dtype other than float32/float64. */
lb_status lb_k_gelu(lb_dtype dtype, int64_t n, const void *x, void *y, int residual);

/* GELU's backward: dx += dy * gelu'(x), gelu'(x) = Φ(x) + x φ(x)
 * = 0.5 erfc(-x / sqrt 2) + x exp(-x² / 2) / sqrt(2 π).
 *   x, dy, dx: [n] contiguous, of `dtype`. Precision and lanes as lb_k_gelu (vector
 *   erfcf and expf for float32).
 * Errors: LB_ERR_VALUE for a NULL pointer, n < 0 or another dtype. */
lb_status lb_k_gelu_backward(lb_dtype dtype, int64_t n, const void *x, const void *dy, void *dx);

/* The activation of a gated linear unit's gate. */
typedef enum lb_glu_act { LB_GLU_SILU = 0, LB_GLU_GELU } lb_glu_act;

/* The gated product of a gated linear unit (Shazeer 2020, "GLU Variants Improve
 * Transformer", eqs. 5-6): for each row of x [N, 2 H] holding the gate a = x[:, :H]
 * and the value b = x[:, H:],
 *   y [N, H] = act(a) * b,  act = silu (SwiGLU: a sigmoid(a), torch.nn.functional.silu)
 *                              or gelu (GeGLU: the exact form above).
 * Each element in double, rounded once; rows over the threads (the same bits at any
 * thread count). Errors: LB_ERR_VALUE for a NULL pointer, N or H < 0, another dtype
 * or act. */
lb_status lb_k_glu(lb_dtype dtype, lb_glu_act act, int64_t N, int64_t H, const void *x, void *y);

/* Its backward: dx [N, 2 H] += [dy * b * act'(a), dy * act(a)], dy [N, H].
 * Errors: as lb_k_glu. */
lb_status lb_k_glu_backward(lb_dtype dtype, lb_glu_act act, int64_t N, int64_t H, const void *x, const void *dy,
                            void *dx);

LB_API_END

#endif

/* Gradient clipping by global norm, and the finiteness check that guards a step.
 *
 * All functions take the same array the optimizer was built from
 * (lb_var *const *params, n_params); parameters whose grad is NULL are ignored, as
 * torch ignores parameters whose .grad is None. Gradients are float32 or float64
 * and contiguous (autograd always makes them so).
 *
 * The norm cannot overflow or underflow: it is accumulated in double after scaling
 * every element by one power of two chosen from the largest |g| (exact, so the
 * result equals the unscaled sum wherever that is representable). float32
 * gradients of 1e21, whose squares overflow float32, and float64 gradients of
 * 1e200 or 1e-200, whose squares overflow or underflow double, give the right norm.
 *
 * Non-finite gradients: lb_clip_grad_norm and lb_grad_check_finite return
 * LB_ERR_NUMERIC with a message naming the first parameter holding a NaN or an
 * infinity (its name, the element's flat index and value), and change nothing.
 * The caller then skips the optimizer step, leaving the parameters untouched (and
 * typically drops the gradients with lb_optim_zero_grad), e.g.
 *
 *     double norm;
 *     lb_status st = lb_clip_grad_norm(params, n, max_norm, &norm);
 *     if (st == LB_OK) st = lb_optim_step(opt);
 *     else if (st == LB_ERR_NUMERIC) { log lb_last_error(); skipped++; }
 *     lb_optim_zero_grad(opt);
 */
#ifndef LB_CLIP_H
#define LB_CLIP_H

#include "tensor/api.h"

#include "autograd/autograd.h"

LB_API_BEGIN

/* The global 2-norm of all gradients, sqrt(sum over parameters and elements of
 * g^2), into *total_norm (0 when no parameter has a gradient).
 * Errors: LB_ERR_NUMERIC when a gradient holds NaN or +-Inf (*total_norm is then
 * NaN if any element is NaN, else +Inf), or when finite float64 gradients have a
 * norm beyond the largest double; LB_ERR_VALUE for n_params < 0, a NULL array or
 * parameter, or a non-contiguous gradient. */
lb_status lb_grad_norm(lb_var *const *params, int n_params, double *total_norm);

/* torch.nn.utils.clip_grad_norm_(params, max_norm, norm_type=2.0,
 * error_if_nonfinite=True): computes total = lb_grad_norm(...), writes it to
 * *total_norm (may be NULL), and when coef = max_norm / (total + 1e-6) is below 1
 * multiplies every gradient by coef in place (in double, rounded to the gradient's
 * dtype). Returns the norm before clipping, as torch does.
 * Differences from torch: a float32 norm is computed in double (torch accumulates
 * float32 and overflows to inf above ~1.8e19 per element); non-finite gradients are
 * always an error (torch's error_if_nonfinite defaults to False and then scales
 * every gradient by NaN).
 * Errors: LB_ERR_VALUE when max_norm is not finite and > 0; LB_ERR_NUMERIC as in
 * lb_grad_norm — gradients are then left unchanged. */
lb_status lb_clip_grad_norm(lb_var *const *params, int n_params, double max_norm, double *total_norm);

/* LB_OK when every present gradient is finite; otherwise LB_ERR_NUMERIC naming the
 * first parameter (in array order) with a NaN or infinity, its flat index and
 * value. Nothing is modified. */
lb_status lb_grad_check_finite(lb_var *const *params, int n_params);

LB_API_END

#endif

/* Learning-rate schedules as data: a small struct, a pure function of the step.
 *
 * `step` is the number of optimizer steps already taken (0 for the first update);
 * lb_schedule_lr(s, step) is the learning rate to use for update number step + 1.
 * The trainer calls lb_optim_set_lr(opt, lb_schedule_lr(&s, step)) before each
 * lb_optim_step. With W = warmup_steps, T = total_steps, base = base_lr:
 *
 *   warm-up (every kind), step < W:   lr = base * (step + 1) / W
 *       linear from base/W at the first step to base at step W - 1
 *       (torch.optim.lr_scheduler.LinearLR(start_factor=1/W, end_factor=1,
 *        total_iters=W-1)).
 *   constant, step >= W:              lr = base
 *   cosine,   W <= step < T:          lr = min + (base - min) * (1 + cos(pi * (step - W) / (T - W))) / 2
 *             step >= T:              lr = min,   where min = base * min_lr_ratio
 *       (torch.optim.lr_scheduler.CosineAnnealingLR(T_max=T-W, eta_min=min) after
 *        the warm-up, without its restart: the rate stays at min after T; Loshchilov
 *        & Hutter 2017, SGDR, one cycle). base at step W, (base + min)/2 at the
 *        midpoint step W + (T - W)/2, min at step T.
 *   step,     step >= W:              lr = base * gamma ^ floor((step - W) / step_size)
 *       (torch.optim.lr_scheduler.StepLR(step_size, gamma), counted from the end
 *        of the warm-up).
 *
 * Steps before 0 are treated as step 0.
 */
#ifndef LB_SCHEDULE_H
#define LB_SCHEDULE_H

#include "tensor/api.h"

#include <stdint.h>

#include "tensor/error.h"

LB_API_BEGIN

typedef enum lb_schedule_kind { LB_SCHEDULE_CONSTANT = 0, LB_SCHEDULE_COSINE, LB_SCHEDULE_STEP } lb_schedule_kind;

typedef struct lb_schedule {
    lb_schedule_kind kind;
    double base_lr;       /* peak rate, finite and >= 0 */
    int64_t warmup_steps; /* W >= 0 (0: no warm-up) */
    /* cosine */
    int64_t total_steps;  /* T > W: the step at which the rate reaches min */
    double min_lr_ratio;  /* in [0, 1]: min = base_lr * min_lr_ratio */
    /* step */
    int64_t step_size;    /* >= 1: steps between decays */
    double gamma;         /* in [0, 1]: factor per decay (torch's default 0.1) */
} lb_schedule;

/* Ready-made schedules (warm-up 0; set .warmup_steps to add one). */
lb_schedule lb_schedule_constant(double base_lr);
lb_schedule lb_schedule_cosine(double base_lr, int64_t warmup_steps, int64_t total_steps, double min_lr_ratio);
lb_schedule lb_schedule_step(double base_lr, int64_t step_size, double gamma);

/* Checks every field the kind uses (ranges above). Errors: LB_ERR_VALUE naming the
 * field, its value and the valid range. */
lb_status lb_schedule_check(const lb_schedule *s);

/* The learning rate for 0-based `step` (formulas above). Returns NaN when `s`
 * fails lb_schedule_check (check it once when the schedule is built). */
double lb_schedule_lr(const lb_schedule *s, int64_t step);

/* "constant", "cosine", "step" (case-insensitive) -> kind. Errors: LB_ERR_VALUE
 * naming the word and listing the valid names. */
lb_status lb_schedule_kind_parse(const char *name, lb_schedule_kind *kind);
/* "constant", "cosine", "step"; "unknown" for a value outside the enum. */
const char *lb_schedule_kind_name(lb_schedule_kind kind);

LB_API_END

#endif

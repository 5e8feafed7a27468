/* Learning-rate schedules (see schedule.h for the formulas). */
#include "optim/schedule.h"
#include "tensor/names.h"

#include <math.h>
#include <string.h>
#include <strings.h>

static const char *const kind_names[] = {"constant", "cosine", "step"};
enum { N_KINDS = (int)(sizeof kind_names / sizeof kind_names[0]) };

const char *lb_schedule_kind_name(lb_schedule_kind kind)
{
    return lb_name_of(kind_names, LB_COUNT_OF(kind_names), (int)kind, "unknown");
}

lb_status lb_schedule_kind_parse(const char *name, lb_schedule_kind *kind)
{
    LB_CHECK_ARG(kind, LB_ERR_VALUE);
    int i = 0;
    lb_status st = lb_name_parse("schedule", kind_names, LB_COUNT_OF(kind_names), name, 1, &i);
    if (st == LB_OK)
        *kind = (lb_schedule_kind)i;
    return st;
}

static lb_schedule blank(lb_schedule_kind kind, double base_lr)
{
    lb_schedule s;
    memset(&s, 0, sizeof s);
    s.kind = kind;
    s.base_lr = base_lr;
    s.step_size = 1;
    s.gamma = 1.0;
    return s;
}

lb_schedule lb_schedule_constant(double base_lr) { return blank(LB_SCHEDULE_CONSTANT, base_lr); }

lb_schedule lb_schedule_cosine(double base_lr, int64_t warmup_steps, int64_t total_steps, double min_lr_ratio)
{
    lb_schedule s = blank(LB_SCHEDULE_COSINE, base_lr);
    s.warmup_steps = warmup_steps;
    s.total_steps = total_steps;
    s.min_lr_ratio = min_lr_ratio;
    return s;
}

lb_schedule lb_schedule_step(double base_lr, int64_t step_size, double gamma)
{
    lb_schedule s = blank(LB_SCHEDULE_STEP, base_lr);
    s.step_size = step_size;
    s.gamma = gamma;
    return s;
}

/* 0 when valid; otherwise records nothing and returns the first failing field. */
static const char *invalid_field(const lb_schedule *s)
{
    if ((int)s->kind < 0 || (int)s->kind >= N_KINDS)
        return "kind";
    if (!isfinite(s->base_lr) || s->base_lr < 0)
        return "base_lr";
    if (s->warmup_steps < 0)
        return "warmup_steps";
    if (s->kind == LB_SCHEDULE_COSINE) {
        if (s->total_steps <= s->warmup_steps)
            return "total_steps";
        if (!(s->min_lr_ratio >= 0 && s->min_lr_ratio <= 1))
            return "min_lr_ratio";
    }
    if (s->kind == LB_SCHEDULE_STEP) {
        if (s->step_size < 1)
            return "step_size";
        if (!(s->gamma >= 0 && s->gamma <= 1))
            return "gamma";
    }
    return NULL;
}

lb_status lb_schedule_check(const lb_schedule *s)
{
    if (!s)
        return lb_error(LB_ERR_VALUE, "schedule: NULL schedule");
    const char *field = invalid_field(s);
    if (!field)
        return LB_OK;
    const char *k = lb_schedule_kind_name(s->kind);
    if (strcmp(field, "kind") == 0)
        return lb_error(LB_ERR_VALUE, "schedule: unknown kind %d; expected constant, cosine or step", (int)s->kind);
    if (strcmp(field, "base_lr") == 0)
        return lb_error(LB_ERR_VALUE, "schedule %s: base_lr = %g; expected a finite value >= 0", k, s->base_lr);
    if (strcmp(field, "warmup_steps") == 0)
        return lb_error(LB_ERR_VALUE, "schedule %s: warmup_steps = %lld; expected >= 0", k,
                        (long long)s->warmup_steps);
    if (strcmp(field, "total_steps") == 0)
        return lb_error(LB_ERR_VALUE,
                        "schedule cosine: total_steps = %lld must exceed warmup_steps = %lld (the decay needs at "
                        "least one step)",
                        (long long)s->total_steps, (long long)s->warmup_steps);
    if (strcmp(field, "min_lr_ratio") == 0)
        return lb_error(LB_ERR_VALUE, "schedule cosine: min_lr_ratio = %g; expected a value in [0, 1]",
                        s->min_lr_ratio);
    if (strcmp(field, "step_size") == 0)
        return lb_error(LB_ERR_VALUE, "schedule step: step_size = %lld; expected >= 1", (long long)s->step_size);
    return lb_error(LB_ERR_VALUE, "schedule step: gamma = %g; expected a value in [0, 1]", s->gamma);
}

double lb_schedule_lr(const lb_schedule *s, int64_t step)
{
    LB_CHECK_ARG(s, NAN);
    if (!s || invalid_field(s))
        return NAN;
    if (step < 0)
        step = 0;
    const double base = s->base_lr;
    const int64_t w = s->warmup_steps;
    if (step < w)
        return base * (double)(step + 1) / (double)w;
    switch (s->kind) {
    case LB_SCHEDULE_COSINE: {
        double lo = base * s->min_lr_ratio;
        if (step >= s->total_steps)
            return lo;
        double progress = (double)(step - w) / (double)(s->total_steps - w);
        return lo + (base - lo) * 0.5 * (1.0 + cos(M_PI * progress));
    }
    case LB_SCHEDULE_STEP:
        return base * pow(s->gamma, (double)((step - w) / s->step_size));
    case LB_SCHEDULE_CONSTANT:
    default:
        return base;
    }
}

/* SGD, Adam and AdamW over an array of parameters (see optim.h for the rules). */
#include "optim/optim.h"
#include "tensor/names.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

/* Per parameter: its step count and up to two buffers of its dtype and shape. */
typedef struct lb_optim_slot {
    lb_var *param;
    lb_tensor *step; /* float64, 0-dimensional */
    lb_tensor *buf0; /* SGD: momentum_buffer; Adam(W): exp_avg; or NULL */
    lb_tensor *buf1; /* Adam(W): exp_avg_sq; or NULL */
    int no_decay;    /* 1: weight_decay 0 for this parameter (lb_optim_set_decay) */
} lb_optim_slot;

struct lb_optim {
    lb_optim_config cfg;
    int n_params;
    lb_optim_slot *slots;
    int n_state;
    char **state_names;        /* owned */
    lb_tensor **state_tensors; /* borrowed from slots */
};

/* Largest count stored exactly in a double (2^53). */
static const double LB_MAX_STEP = 9007199254740992.0;

static const char *const kind_names[] = {"sgd", "adam", "adamw"};

const char *lb_optim_kind_name(lb_optim_kind kind)
{
    return lb_name_of(kind_names, LB_COUNT_OF(kind_names), (int)kind, "unknown");
}

lb_status lb_optim_kind_parse(const char *name, lb_optim_kind *kind)
{
    LB_CHECK_ARG(kind, LB_ERR_VALUE);
    int i = 0;
    lb_status st = lb_name_parse("optimizer", kind_names, LB_COUNT_OF(kind_names), name, 1, &i);
    if (st == LB_OK)
        *kind = (lb_optim_kind)i;
    return st;
}

lb_optim_config lb_optim_defaults(lb_optim_kind kind)
{
    lb_optim_config c;
    memset(&c, 0, sizeof c);
    c.kind = kind;
    c.lr = 1e-3;
    c.beta1 = 0.9;
    c.beta2 = 0.999;
    c.eps = 1e-8;
    c.weight_decay = kind == LB_OPTIM_ADAMW ? 1e-2 : 0.0;
    return c;
}

static lb_status check_field(const char *kind, const char *field, double value, double low, int low_open,
                             double high, int high_open, const char *expect)
{
    int bad = !isfinite(value) || (low_open ? value <= low : value < low) || (high_open ? value >= high : value > high);
    if (bad)
        return lb_error(LB_ERR_VALUE, "optimizer %s: %s = %g is invalid; expected %s", kind, field, value, expect);
    return LB_OK;
}

lb_status lb_optim_config_check(const lb_optim_config *cfg)
{
    if (!cfg)
        return lb_error(LB_ERR_VALUE, "optimizer: NULL configuration; start from lb_optim_defaults(kind)");
    if ((int)cfg->kind < LB_OPTIM_SGD || (int)cfg->kind > LB_OPTIM_ADAMW)
        return lb_error(LB_ERR_VALUE, "optimizer: unknown kind %d; expected LB_OPTIM_SGD, _ADAM or _ADAMW",
                        (int)cfg->kind);
    const char *k = lb_optim_kind_name(cfg->kind);
    lb_status st;
    if ((st = check_field(k, "lr", cfg->lr, 0, 0, INFINITY, 0, "a finite value >= 0")))
        return st;
    if ((st = check_field(k, "weight_decay", cfg->weight_decay, 0, 0, INFINITY, 0, "a finite value >= 0")))
        return st;
    if (cfg->kind == LB_OPTIM_SGD) {
        if ((st = check_field(k, "momentum", cfg->momentum, 0, 0, INFINITY, 0, "a finite value >= 0")))
            return st;
        if ((st = check_field(k, "dampening", cfg->dampening, 0, 0, INFINITY, 0, "a finite value >= 0")))
            return st;
        if (cfg->nesterov && (cfg->momentum <= 0 || cfg->dampening != 0))
            return lb_error(LB_ERR_VALUE,
                            "optimizer sgd: nesterov needs momentum > 0 and dampening 0 (got momentum %g, "
                            "dampening %g), as in torch.optim.SGD",
                            cfg->momentum, cfg->dampening);
    } else {
        if ((st = check_field(k, "beta1", cfg->beta1, 0, 0, 1, 1, "a value in [0, 1)")))
            return st;
        if ((st = check_field(k, "beta2", cfg->beta2, 0, 0, 1, 1, "a value in [0, 1)")))
            return st;
        if ((st = check_field(k, "eps", cfg->eps, 0, 0, INFINITY, 0, "a finite value >= 0")))
            return st;
    }
    return LB_OK;
}

void lb_optim_free(lb_optim *opt)
{
    if (!opt)
        return;
    for (int i = 0; opt->slots && i < opt->n_params; i++) {
        lb_tensor_free(opt->slots[i].step);
        lb_tensor_free(opt->slots[i].buf0);
        lb_tensor_free(opt->slots[i].buf1);
    }
    for (int i = 0; opt->state_names && i < opt->n_state; i++)
        free(opt->state_names[i]);
    free(opt->state_names);
    free(opt->state_tensors);
    free(opt->slots);
    free(opt);
}

static lb_status add_state(lb_optim *opt, const char *prefix, const char *param_name, lb_tensor *t)
{
    if (!t)
        return lb_last_status();
    size_t len = strlen(prefix) + 1 + strlen(param_name) + 1;
    char *name = malloc(len);
    if (!name)
        return lb_error(LB_ERR_MEMORY, "lb_optim_new: out of memory naming state '%s.%s'", prefix, param_name);
    snprintf(name, len, "%s.%s", prefix, param_name);
    opt->state_names[opt->n_state] = name;
    opt->state_tensors[opt->n_state] = t;
    opt->n_state++;
    return LB_OK;
}

static lb_status check_params(lb_var *const *params, int n_params)
{
    if (n_params < 0)
        return lb_error(LB_ERR_VALUE, "lb_optim_new: n_params = %d; expected >= 0", n_params);
    if (n_params > 0 && !params)
        return lb_error(LB_ERR_VALUE, "lb_optim_new: params is NULL with n_params = %d", n_params);
    for (int i = 0; i < n_params; i++) {
        const lb_var *p = params[i];
        if (!p || !p->value)
            return lb_error(LB_ERR_VALUE, "lb_optim_new: parameter %d is NULL or has no value", i);
        if (!p->name || !p->name[0])
            return lb_error(LB_ERR_VALUE,
                            "lb_optim_new: parameter %d has no name; optimizer state is saved by name, so "
                            "create parameters with lb_param_new(value, name)",
                            i);
        if (p->value->dtype != LB_FLOAT32 && p->value->dtype != LB_FLOAT64)
            return lb_error(LB_ERR_DTYPE, "lb_optim_new: parameter '%s' has an unsupported dtype", p->name);
        if (!lb_tensor_is_contiguous(p->value))
            return lb_error(LB_ERR_VALUE, "lb_optim_new: parameter '%s' has a non-contiguous value", p->name);
        for (int j = 0; j < i; j++) {
            if (params[j] == p)
                return lb_error(LB_ERR_VALUE,
                                "lb_optim_new: parameter '%s' appears twice (positions %d and %d); pass each "
                                "parameter once",
                                p->name, j, i);
            if (strcmp(params[j]->name, p->name) == 0)
                return lb_error(LB_ERR_VALUE,
                                "lb_optim_new: two parameters are named '%s' (positions %d and %d); state names "
                                "must be unique",
                                p->name, j, i);
        }
    }
    return LB_OK;
}

lb_optim *lb_optim_new(const lb_optim_config *cfg, lb_var *const *params, int n_params)
{
    if (lb_optim_config_check(cfg) || check_params(params, n_params))
        return NULL;
    lb_optim *opt = calloc(1, sizeof *opt);
    int max_state = 3 * n_params;
    if (!opt || !(opt->slots = calloc((size_t)n_params + 1, sizeof *opt->slots)) ||
        !(opt->state_names = calloc((size_t)max_state + 1, sizeof *opt->state_names)) ||
        !(opt->state_tensors = calloc((size_t)max_state + 1, sizeof *opt->state_tensors))) {
        lb_optim_free(opt);
        lb_error(LB_ERR_MEMORY, "lb_optim_new: out of memory for %d parameters", n_params);
        return NULL;
    }
    opt->cfg = *cfg;
    opt->n_params = n_params;
    for (int i = 0; i < n_params; i++) {
        lb_optim_slot *s = &opt->slots[i];
        const lb_tensor *v = params[i]->value;
        s->param = params[i];
        s->step = lb_tensor_scalar(LB_FLOAT64, 0.0);
        lb_status st = add_state(opt, "step", s->param->name, s->step);
        if (!st && cfg->kind == LB_OPTIM_SGD && cfg->momentum != 0) {
            s->buf0 = lb_tensor_zeros_like(v);
            st = add_state(opt, "momentum_buffer", s->param->name, s->buf0);
        } else if (!st && cfg->kind != LB_OPTIM_SGD) {
            s->buf0 = lb_tensor_zeros_like(v);
            st = add_state(opt, "exp_avg", s->param->name, s->buf0);
            if (!st) {
                s->buf1 = lb_tensor_zeros_like(v);
                st = add_state(opt, "exp_avg_sq", s->param->name, s->buf1);
            }
        }
        if (st) {
            lb_optim_free(opt);
            return NULL;
        }
    }
    return opt;
}

/* ---- validation before any update ---- */

static lb_status check_slot(const lb_optim_slot *s)
{
    const lb_var *p = s->param;
    const lb_tensor *v = p->value, *g = p->grad;
    char a[128], b[128];
    if (!v || !lb_tensor_is_contiguous(v))
        return lb_error(LB_ERR_VALUE, "lb_optim_step: parameter '%s' has no contiguous value", p->name);
    if (g->dtype != v->dtype)
        return lb_error(LB_ERR_DTYPE, "lb_optim_step: parameter '%s' is %s but its gradient is %s", p->name,
                        lb_tensor_describe(v, a, sizeof a), lb_tensor_describe(g, b, sizeof b));
    if (!lb_tensor_same_shape(g, v))
        return lb_error(LB_ERR_SHAPE, "lb_optim_step: parameter '%s' is %s but its gradient is %s", p->name,
                        lb_tensor_describe(v, a, sizeof a), lb_tensor_describe(g, b, sizeof b));
    if (!lb_tensor_is_contiguous(g))
        return lb_error(LB_ERR_VALUE, "lb_optim_step: the gradient of parameter '%s' is not contiguous", p->name);
    const lb_tensor *bufs[2] = {s->buf0, s->buf1};
    for (int k = 0; k < 2; k++) {
        if (bufs[k] && (bufs[k]->dtype != v->dtype || !lb_tensor_same_shape(bufs[k], v)))
            return lb_error(LB_ERR_STATE,
                            "lb_optim_step: parameter '%s' is now %s but its optimizer state is %s; the "
                            "parameter's value was replaced after lb_optim_new",
                            p->name, lb_tensor_describe(v, a, sizeof a), lb_tensor_describe(bufs[k], b, sizeof b));
    }
    double t = *(const double *)lb_tensor_data(s->step);
    if (!(t >= 0 && t < LB_MAX_STEP && t == floor(t)))
        return lb_error(LB_ERR_STATE,
                        "lb_optim_step: state 'step.%s' is %g; expected a non-negative integer (was it restored "
                        "from a corrupt checkpoint?)",
                        p->name, t);
    return LB_OK;
}

/* ---- the updates, elementwise in double ---- */

static void sgd_update(const lb_optim_config *c, lb_optim_slot *s, int first)
{
    lb_tensor *value = s->param->value;
    const lb_tensor *grad = s->param->grad;
    int64_t n = lb_tensor_numel(value);
    const double lr = c->lr, wd = c->weight_decay, mom = c->momentum, damp = 1.0 - c->dampening;
    const int nesterov = c->nesterov;
    LB_DISPATCH(value->dtype, T, {
        T *p = lb_tensor_data(value);
        const T *g = lb_tensor_data(grad);
        T *buf = s->buf0 ? (T *)lb_tensor_data(s->buf0) : NULL;
        for (int64_t i = 0; i < n; i++) {
            double d = g[i];
            if (wd != 0)
                d += wd * (double)p[i];
            if (buf) {
                buf[i] = first ? (T)d : (T)(mom * (double)buf[i] + damp * d);
                d = nesterov ? d + mom * (double)buf[i] : (double)buf[i];
            }
            p[i] = (T)((double)p[i] - lr * d);
        }
    });
}

static void adam_update(const lb_optim_config *c, lb_optim_slot *s, double t)
{
    lb_tensor *value = s->param->value;
    const lb_tensor *grad = s->param->grad;
    int64_t n = lb_tensor_numel(value);
    const double lr = c->lr, b1 = c->beta1, b2 = c->beta2, eps = c->eps;
    const double l2 = c->kind == LB_OPTIM_ADAM ? c->weight_decay : 0.0;
    const double decay = c->kind == LB_OPTIM_ADAMW ? 1.0 - lr * c->weight_decay : 1.0;
    /* torch: step_size = lr / bias_correction1; denom = sqrt(v) / sqrt(bias_correction2) + eps. */
    const double step_size = lr / (1.0 - pow(b1, t));
    const double bc2_sqrt = sqrt(1.0 - pow(b2, t));
    /* The loop of each case with its flags constant (no branch inside: the vector
     * lanes run the same IEEE operations, sqrt and division included, as one element
     * at a time, so the bits are those of the scalar loop). */
#define LB_ADAM_LOOP(T, use_l2, use_decay)                                                                       \
    _Pragma("omp simd") for (int64_t i = 0; i < n; i++)                                                        \
    {                                                                                                          \
        double pi = p[i], gi = g[i];                                                                           \
        if (use_l2)                                                                                            \
            gi += l2 * pi;                                                                                     \
        if (use_decay)                                                                                         \
            pi *= decay;                                                                                       \
        double mi = b1 * (double)m[i] + (1.0 - b1) * gi, vi = b2 * (double)v[i] + (1.0 - b2) * gi * gi;     \
        m[i] = (T)mi;                                                                                          \
        v[i] = (T)vi;                                                                                          \
        double denom = sqrt((double)v[i]) / bc2_sqrt + eps;                                                    \
        p[i] = (T)(pi - step_size * ((double)m[i] / denom));                                                   \
    }
    LB_DISPATCH(value->dtype, T, {
        T *restrict p = lb_tensor_data(value);
        const T *restrict g = lb_tensor_data(grad);
        T *restrict m = lb_tensor_data(s->buf0);
        T *restrict v = lb_tensor_data(s->buf1);
        if (l2 == 0 && decay != 1.0) {
            LB_ADAM_LOOP(T, 0, 1)
        } else if (l2 == 0) {
            LB_ADAM_LOOP(T, 0, 0)
        } else if (decay == 1.0) {
            LB_ADAM_LOOP(T, 1, 0)
        } else {
            LB_ADAM_LOOP(T, 1, 1)
        }
    });
#undef LB_ADAM_LOOP
}

lb_status lb_optim_step(lb_optim *opt)
{
    if (!opt)
        return lb_error(LB_ERR_VALUE, "lb_optim_step: NULL optimizer");
    for (int i = 0; i < opt->n_params; i++) {
        if (opt->slots[i].param->grad) {
            lb_status st = check_slot(&opt->slots[i]);
            if (st)
                return st;
        }
    }
    for (int i = 0; i < opt->n_params; i++) {
        lb_optim_slot *s = &opt->slots[i];
        if (!s->param->grad)
            continue; /* no gradient: value, buffers and step count stay as they are */
        double *step = lb_tensor_data(s->step);
        double t = *step + 1.0;
        *step = t;
        lb_optim_config c = opt->cfg; /* the parameter's group: weight_decay 0 when exempt */
        if (s->no_decay)
            c.weight_decay = 0.0;
        if (c.kind == LB_OPTIM_SGD)
            sgd_update(&c, s, t == 1.0);
        else
            adam_update(&c, s, t);
        lb_tensor_bump_version(s->param->value); /* an in-place update, as torch.optim's */
    }
    return LB_OK;
}

lb_status lb_optim_set_decay(lb_optim *opt, int index, int decay)
{
    if (!opt)
        return lb_error(LB_ERR_VALUE, "lb_optim_set_decay: NULL optimizer");
    if (index < 0 || index >= opt->n_params)
        return lb_error(LB_ERR_VALUE, "lb_optim_set_decay: parameter index %d is outside [0, %d)", index, opt->n_params);
    opt->slots[index].no_decay = !decay;
    return LB_OK;
}

int lb_optim_decays(const lb_optim *opt, int index)
{
    LB_CHECK_ARG(opt, -1);
    if (index < 0 || index >= opt->n_params) {
        lb_error(LB_ERR_VALUE, "lb_optim_decays: parameter index %d is outside [0, %d)", index, opt->n_params);
        return -1;
    }
    return !opt->slots[index].no_decay;
}

void lb_optim_zero_grad(lb_optim *opt)
{
    for (int i = 0; opt && i < opt->n_params; i++)
        lb_param_zero_grad(opt->slots[i].param);
}

lb_status lb_optim_set_lr(lb_optim *opt, double lr)
{
    if (!opt)
        return lb_error(LB_ERR_VALUE, "lb_optim_set_lr: NULL optimizer");
    if (!isfinite(lr) || lr < 0)
        return lb_error(LB_ERR_VALUE, "lb_optim_set_lr: lr = %g; expected a finite value >= 0", lr);
    opt->cfg.lr = lr;
    return LB_OK;
}

double lb_optim_lr(const lb_optim *opt)
{
    LB_CHECK_ARG(opt, NAN);
    return opt->cfg.lr;
}
const lb_optim_config *lb_optim_get_config(const lb_optim *opt)
{
    LB_CHECK_ARG(opt, NULL);
    return &opt->cfg;
}
int lb_optim_param_count(const lb_optim *opt)
{
    LB_CHECK_ARG(opt, -1);
    return opt->n_params;
}

int lb_optim_state_count(const lb_optim *opt)
{
    LB_CHECK_ARG(opt, -1);
    return opt ? opt->n_state : 0;
}

const char *lb_optim_state_name(const lb_optim *opt, int i)
{
    LB_CHECK_ARG(opt, NULL);
    return (opt && i >= 0 && i < opt->n_state) ? opt->state_names[i] : NULL;
}

lb_tensor *lb_optim_state_tensor(const lb_optim *opt, int i)
{
    LB_CHECK_ARG(opt, NULL);
    return (opt && i >= 0 && i < opt->n_state) ? opt->state_tensors[i] : NULL;
}

lb_tensor *lb_optim_state_find(const lb_optim *opt, const char *name)
{
    LB_CHECK_ARG(opt, NULL);
    LB_CHECK_ARG(name, NULL);
    for (int i = 0; i < opt->n_state; i++)
        if (strcmp(opt->state_names[i], name) == 0)
            return opt->state_tensors[i];
    return NULL;
}

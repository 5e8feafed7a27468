/* Global gradient norm without overflow, clipping, finiteness check (see clip.h). */
#include "optim/clip.h"

#include <math.h>

/* Largest |g| over one gradient, and the first non-finite element if any
 * (*bad_index = -1 when all are finite). */
static double grad_absmax(const lb_tensor *g, int64_t *bad_index, double *bad_value)
{
    int64_t n = lb_tensor_numel(g);
    double amax = 0.0;
    *bad_index = -1;
    *bad_value = 0.0;
    LB_DISPATCH(g->dtype, T, {
        const T *x = lb_tensor_data(g);
        for (int64_t i = 0; i < n; i++) {
            double a = fabs((double)x[i]);
            if (!(a <= amax)) { /* also true for NaN */
                if (!isfinite(a)) {
                    *bad_index = i;
                    *bad_value = (double)x[i];
                    return amax;
                }
                amax = a;
            }
        }
    });
    return amax;
}

/* Sum of (g * scale1 * scale2)^2 in double; both scales are powers of two. */
static double grad_scaled_sumsq(const lb_tensor *g, double scale1, double scale2)
{
    int64_t n = lb_tensor_numel(g);
    double sum = 0.0;
    LB_DISPATCH(g->dtype, T, {
        const T *x = lb_tensor_data(g);
        for (int64_t i = 0; i < n; i++) {
            double y = ((double)x[i] * scale1) * scale2;
            sum += y * y;
        }
    });
    return sum;
}

static lb_status check_args(const char *fn, lb_var *const *params, int n_params)
{
    if (n_params < 0)
        return lb_error(LB_ERR_VALUE, "%s: n_params = %d; expected >= 0", fn, n_params);
    if (n_params > 0 && !params)
        return lb_error(LB_ERR_VALUE, "%s: params is NULL with n_params = %d", fn, n_params);
    for (int i = 0; i < n_params; i++) {
        if (!params[i])
            return lb_error(LB_ERR_VALUE, "%s: parameter %d is NULL", fn, i);
        const lb_tensor *g = params[i]->grad;
        if (g && !lb_tensor_is_contiguous(g))
            return lb_error(LB_ERR_VALUE, "%s: the gradient of parameter '%s' is not contiguous", fn,
                            params[i]->name ? params[i]->name : "(unnamed)");
    }
    return LB_OK;
}

static const char *param_label(const lb_var *p) { return p->name ? p->name : "(unnamed)"; }

/* Checks finiteness and finds the largest |g| over every gradient. On a non-finite
 * element records the error (naming `fn`) and sets *nonfinite to NaN or +Inf. */
static lb_status scan(const char *fn, lb_var *const *params, int n_params, double *amax_out, double *nonfinite)
{
    lb_status st = check_args(fn, params, n_params);
    if (st)
        return st;
    double amax = 0.0;
    for (int i = 0; i < n_params; i++) {
        const lb_tensor *g = params[i]->grad;
        if (!g)
            continue;
        int64_t bad;
        double bad_value, a = grad_absmax(g, &bad, &bad_value);
        if (bad >= 0) {
            /* The norm torch would report: NaN if any NaN anywhere, else +Inf. */
            int any_nan = isnan(bad_value);
            for (int j = i; j < n_params && !any_nan; j++) {
                if (!params[j]->grad)
                    continue;
                int64_t n = lb_tensor_numel(params[j]->grad);
                for (int64_t k = 0; k < n && !any_nan; k++)
                    any_nan = isnan(lb_tensor_flat(params[j]->grad, k));
            }
            *nonfinite = any_nan ? NAN : INFINITY;
            char shape[128];
            return lb_error(LB_ERR_NUMERIC,
                            "%s: gradient of parameter '%s' %s holds %g at flat index %lld; skip this step "
                            "(the parameters are untouched) and look for a diverging loss or a too-large "
                            "learning rate",
                            fn, param_label(params[i]), lb_tensor_describe(g, shape, sizeof shape), bad_value,
                            (long long)bad);
        }
        if (a > amax)
            amax = a;
    }
    *amax_out = amax;
    return LB_OK;
}

static lb_status norm_impl(const char *fn, lb_var *const *params, int n_params, double *total_norm)
{
    double amax = 0.0, nonfinite = NAN;
    lb_status st = scan(fn, params, n_params, &amax, &nonfinite);
    if (st) {
        *total_norm = nonfinite;
        return st;
    }
    if (amax == 0.0) {
        *total_norm = 0.0;
        return LB_OK;
    }
    /* amax = f * 2^e with f in [0.5, 1): every element is scaled by 2^-e (exact), so
     * each scaled square is <= 1 and the sum cannot overflow, nor underflow for the
     * elements that matter. 2^-e itself overflows for subnormal amax (e < -1021),
     * so it is applied as two halves, each a representable power of two. */
    int e;
    (void)frexp(amax, &e);
    double scale1 = ldexp(1.0, -(e / 2)), scale2 = ldexp(1.0, -(e - e / 2));
    double sum = 0.0;
    for (int i = 0; i < n_params; i++)
        if (params[i]->grad)
            sum += grad_scaled_sumsq(params[i]->grad, scale1, scale2);
    double total = ldexp(sqrt(sum), e);
    if (!isfinite(total)) {
        *total_norm = INFINITY;
        return lb_error(LB_ERR_NUMERIC,
                        "%s: the global gradient norm exceeds the largest double (max |g| = %g); skip this step",
                        fn, amax);
    }
    *total_norm = total;
    return LB_OK;
}

lb_status lb_grad_norm(lb_var *const *params, int n_params, double *total_norm)
{
    double dummy;
    return norm_impl("lb_grad_norm", params, n_params, total_norm ? total_norm : &dummy);
}

lb_status lb_grad_check_finite(lb_var *const *params, int n_params)
{
    double amax, nonfinite;
    return scan("lb_grad_check_finite", params, n_params, &amax, &nonfinite);
}

lb_status lb_clip_grad_norm(lb_var *const *params, int n_params, double max_norm, double *total_norm)
{
    double dummy;
    if (!total_norm)
        total_norm = &dummy;
    if (!isfinite(max_norm) || max_norm <= 0) {
        *total_norm = NAN;
        return lb_error(LB_ERR_VALUE, "lb_clip_grad_norm: max_norm = %g; expected a finite value > 0", max_norm);
    }
    lb_status st = norm_impl("lb_clip_grad_norm", params, n_params, total_norm);
    if (st)
        return st;
    double coef = max_norm / (*total_norm + 1e-6);
    if (!(coef < 1.0))
        return LB_OK; /* torch multiplies by clamp(coef, max=1) = 1: nothing changes */
    for (int i = 0; i < n_params; i++) {
        lb_tensor *g = params[i]->grad;
        if (!g)
            continue;
        int64_t n = lb_tensor_numel(g);
        LB_DISPATCH(g->dtype, T, {
            T *x = lb_tensor_data(g);
            for (int64_t k = 0; k < n; k++)
                x[k] = (T)((double)x[k] * coef);
        });
    }
    return LB_OK;
}

#include "autograd/gradcheck.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

lb_gradcheck_options lb_gradcheck_defaults(void)
{
    lb_gradcheck_options o = {1e-6, 1e-5, 1e-3};
    return o;
}

/* Runs fn on a fresh graph state and copies its output into out (n_out doubles). */
static lb_status eval_output(lb_graph *g, lb_gradcheck_fn fn, void *user, lb_var *const *leaves, double *out,
                             int64_t n_out)
{
    lb_graph_reset(g);
    lb_var *y = fn(g, leaves, user);
    if (!y)
        return lb_last_status() != LB_OK ? lb_last_status() : lb_error(LB_ERR_VALUE, "gradcheck: the function returned NULL");
    if (lb_tensor_numel(y->value) != n_out)
        return lb_error(LB_ERR_SHAPE, "gradcheck: the function's output size changed between calls");
    for (int64_t i = 0; i < n_out; i++)
        out[i] = lb_tensor_flat(y->value, i);
    return LB_OK;
}

lb_status lb_gradcheck(lb_gradcheck_fn fn, void *user, int n_leaves, lb_var *const *leaves,
                       const lb_gradcheck_options *options, lb_gradcheck_leaf *report)
{
    LB_CHECK_ARG(fn, LB_ERR_VALUE);
    LB_CHECK_ARG(leaves, LB_ERR_VALUE);
    lb_gradcheck_options opt = options ? *options : lb_gradcheck_defaults();
    for (int l = 0; l < n_leaves; l++) {
        if (!leaves[l] || leaves[l]->value->dtype != LB_FLOAT64)
            return lb_error(LB_ERR_DTYPE, "gradcheck: leaf %d (%s) must be a float64 variable", l,
                            leaves[l] && leaves[l]->name ? leaves[l]->name : "unnamed");
        lb_param_zero_grad(leaves[l]);
    }
    lb_graph *g = lb_graph_new();
    if (!g)
        return lb_last_status();
    lb_status st = LB_OK;
    double *analytic = NULL, *plus = NULL, *minus = NULL;
    int64_t total = 0, n_out = 0;
    for (int l = 0; l < n_leaves; l++)
        total += lb_tensor_numel(leaves[l]->value);

    lb_var *y = fn(g, leaves, user);
    if (!y) {
        st = lb_last_status() != LB_OK ? lb_last_status() : lb_error(LB_ERR_VALUE, "gradcheck: the function returned NULL");
        goto done;
    }
    n_out = lb_tensor_numel(y->value);
    analytic = calloc((size_t)(n_out * total + 1), sizeof *analytic);
    plus = calloc((size_t)n_out + 1, sizeof *plus);
    minus = calloc((size_t)n_out + 1, sizeof *minus);
    if (!analytic || !plus || !minus) {
        st = lb_error(LB_ERR_MEMORY, "gradcheck: out of memory for a %lld x %lld Jacobian", (long long)n_out,
                      (long long)total);
        goto done;
    }
    /* Analytic Jacobian, row j: backward of a one-hot gradient on output element j. */
    for (int64_t j = 0; j < n_out; j++) {
        if (j > 0) {
            lb_graph_reset(g);
            y = fn(g, leaves, user);
            if (!y) {
                st = lb_last_status();
                goto done;
            }
        }
        if (!y->requires_grad)
            break; /* nothing depends on the leaves: analytic stays 0 */
        lb_tensor *seed = lb_tensor_zeros_like(y->value);
        if (!seed) {
            st = lb_last_status();
            goto done;
        }
        LB_DISPATCH(seed->dtype, T, { ((T *)lb_tensor_data(seed))[j] = 1; });
        st = lb_backward(g, y, seed);
        lb_tensor_free(seed);
        if (st != LB_OK)
            goto done;
        int64_t col = 0;
        for (int l = 0; l < n_leaves; l++) {
            int64_t n = lb_tensor_numel(leaves[l]->value);
            for (int64_t i = 0; i < n && leaves[l]->grad; i++)
                analytic[j * total + col + i] = lb_tensor_flat(leaves[l]->grad, i);
            col += n;
            lb_param_zero_grad(leaves[l]);
        }
    }
    /* Numeric Jacobian, column by column, compared as it is computed. */
    int old_mode = lb_graph_set_grad_enabled(g, 0);
    int64_t col = 0;
    int failed_leaf = -1;
    lb_gradcheck_leaf first_fail = {0};
    for (int l = 0; l < n_leaves && st == LB_OK; l++) {
        lb_gradcheck_leaf worst = {-1, -1, 0, 0, 0, 0, 1};
        double *x = lb_tensor_data(leaves[l]->value);
        int64_t n = lb_tensor_numel(leaves[l]->value);
        for (int64_t i = 0; i < n && st == LB_OK; i++) {
            double saved = x[i];
            x[i] = saved + opt.eps;
            st = eval_output(g, fn, user, leaves, plus, n_out);
            x[i] = saved - opt.eps;
            if (st == LB_OK)
                st = eval_output(g, fn, user, leaves, minus, n_out);
            x[i] = saved;
            for (int64_t j = 0; j < n_out && st == LB_OK; j++) {
                double num = (plus[j] - minus[j]) / (2 * opt.eps);
                double ana = analytic[j * total + col + i];
                double err = fabs(ana - num);
                double ratio = err / (opt.atol + opt.rtol * fabs(num));
                if (isnan(ratio))
                    ratio = INFINITY;
                if (worst.index < 0 || ratio > worst.ratio) {
                    worst.index = i;
                    worst.output_index = j;
                    worst.analytic = ana;
                    worst.numeric = num;
                    worst.abs_error = err;
                    worst.ratio = ratio;
                }
            }
        }
        worst.passed = worst.ratio <= 1.0;
        if (!worst.passed && failed_leaf < 0) {
            failed_leaf = l;
            first_fail = worst;
        }
        if (report)
            report[l] = worst;
        col += n;
    }
    lb_graph_set_grad_enabled(g, old_mode);
    if (st == LB_OK && failed_leaf >= 0)
        st = lb_error(LB_ERR_NUMERIC,
                      "gradcheck: leaf %d (%s), element %lld, output %lld: analytic %.10g vs numeric %.10g "
                      "(|error| %.3g > atol %.1g + rtol %.1g * |numeric|)",
                      failed_leaf, leaves[failed_leaf]->name ? leaves[failed_leaf]->name : "unnamed",
                      (long long)first_fail.index, (long long)first_fail.output_index, first_fail.analytic,
                      first_fail.numeric, first_fail.abs_error, opt.atol, opt.rtol);
done:
    for (int l = 0; l < n_leaves; l++)
        lb_param_zero_grad(leaves[l]);
    free(analytic);
    free(plus);
    free(minus);
    lb_graph_free(g);
    return st;
}

void lb_gradcheck_print(FILE *out, int n_leaves, lb_var *const *leaves, const lb_gradcheck_leaf *report)
{
    LB_CHECK_ARG(out);
    LB_CHECK_INPUT(leaves);
    LB_CHECK_ARG(report);
    for (int l = 0; l < n_leaves; l++) {
        char shape[128];
        const lb_gradcheck_leaf *r = &report[l];
        fprintf(out, "%-32s %-16s worst |error| %.3e (analytic %.6g, numeric %.6g, element %lld)  %s\n",
                leaves[l]->name ? leaves[l]->name : "unnamed",
                lb_shape_str(leaves[l]->value->ndim, leaves[l]->value->shape, shape, sizeof shape), r->abs_error,
                r->analytic, r->numeric, (long long)r->index, r->passed ? "PASS" : "FAIL");
    }
}

/* Numerical gradient checking, a user feature: verify that the backward pass of
 * any differentiable function built from lookback ops (a single op, a layer, a
 * whole model) matches finite differences.
 *
 * Follows torch.autograd.gradcheck: float64, central differences
 *   numeric = (f(x + eps) - f(x - eps)) / (2 eps),
 * and an element passes when |analytic - numeric| <= atol + rtol * |numeric|.
 * The full Jacobian is compared: one backward per output element (seeded with a
 * one-hot gradient) and two forward passes per leaf element.
 */
#ifndef LB_GRADCHECK_H
#define LB_GRADCHECK_H

#include "tensor/api.h"

#include <stdio.h>

#include "autograd/autograd.h"

LB_API_BEGIN

/* The function under test: builds its graph on `g` from the persistent `leaves`
 * (made with lb_param_new, float64) and returns its output variable (any shape).
 * It must be deterministic (reseed any dropout generator inside). */
typedef lb_var *(*lb_gradcheck_fn)(lb_graph *g, lb_var *const *leaves, void *user);

typedef struct lb_gradcheck_options {
    double eps;  /* perturbation, default 1e-6 */
    double atol; /* default 1e-5 */
    double rtol; /* default 1e-3 */
} lb_gradcheck_options;

/* The defaults above (PyTorch's eps and atol; rtol 1e-3). */
lb_gradcheck_options lb_gradcheck_defaults(void);

/* The worst element of one leaf: the one with the largest
 * |analytic - numeric| / (atol + rtol * |numeric|) (> 1 fails). */
typedef struct lb_gradcheck_leaf {
    int64_t index; /* row-major index into the leaf, -1 if the leaf is empty */
    int64_t output_index; /* which output element's gradient it was */
    double analytic, numeric, abs_error, ratio;
    int passed;
} lb_gradcheck_leaf;

/* Checks d output / d leaf for every leaf (inputs and parameters alike).
 *   leaves: n_leaves persistent float64 variables; report: n_leaves entries or NULL.
 * Returns LB_OK when every element passes; LB_ERR_NUMERIC when one fails (message
 * names the leaf, the element, analytic and numeric values); LB_ERR_DTYPE for a
 * float32 leaf; any error the function itself raises. Leaf values are restored
 * and their gradients cleared before returning. */
lb_status lb_gradcheck(lb_gradcheck_fn fn, void *user, int n_leaves, lb_var *const *leaves,
                       const lb_gradcheck_options *options, lb_gradcheck_leaf *report);

/* Prints one line per leaf: name, shape, worst error and PASS/FAIL. */
void lb_gradcheck_print(FILE *out, int n_leaves, lb_var *const *leaves, const lb_gradcheck_leaf *report);

LB_API_END

#endif

/* Numerical gradient checking of a whole model (the engine of `lookback gradcheck`). */
#ifndef LB_LAB_GRADCHECK_H
#define LB_LAB_GRADCHECK_H

#include <stdint.h>
#include <stdio.h>

#include "autograd/gradcheck.h"
#include "layers/model.h"
#include "tensor/api.h"

LB_API_BEGIN

/* What to check: the model's options (its kind is given to lb_model_gradcheck; dtype,
 * the input, class and head fields, max_seq_len, dropout and seed are set from the rest),
 * the batch (seq_len T, batch B, features F, classes C, head), the seed of the model and
 * the data, the tolerances, and break_gradient: a deliberately wrong backward on the
 * loss (its gradient x 1.01), which must make the check fail (the test of the tester). */
typedef struct lb_model_gradcheck_setup {
    lb_model_config model;
    int64_t seq_len, batch, features, classes;
    lb_head_kind head;
    int64_t seed;
    lb_gradcheck_options tol;
    int break_gradient;
} lb_model_gradcheck_setup;

/* Builds model `kind` with the setup and a random batch, compares every parameter's
 * gradient with central differences, and prints a header line and one line per
 * parameter (lb_gradcheck_print) to `out` (NULL: nothing printed). *n_params receives
 * the parameters checked, *n_failed those that failed. LB_OK when every parameter
 * passed; LB_ERR_NUMERIC when one failed (the counts and the table are filled, and the
 * message names the first failure's analytic and numeric values). Errors: the model's
 * (LB_ERR_VALUE for options that do not make a model, LB_ERR_MEMORY; *n_params stays 0)
 * and lb_gradcheck's. */
lb_status lb_model_gradcheck(const lb_model_gradcheck_setup *s, lb_model_kind kind, FILE *out, int *n_params,
                             int *n_failed);

/* The setup of `lookback gradcheck` before its options: the model at small sizes (2 layers,
 * d_model 8, 2 heads, d_ff 16, hidden 6, kernel 3, window 3, learned positions: about a
 * second per family), T 7, B 2, F 3, C 4, the last position's head, seed 1 and
 * lb_gradcheck_defaults()'s tolerances. */
void lb_model_gradcheck_defaults(lb_model_gradcheck_setup *s);
/* Sets one option of the setup from text: --seq-len, --batch, --features, --classes,
 * --seed, --eps, --atol, --rtol, --head last|every, or a model option the check takes
 * ("--d-model"; *model_option, when not NULL, then names it, else is set to NULL).
 * Returns 1 when set, 0 when `option` is none of them (nothing set), -1 with LB_ERR_VALUE
 * naming the option when the value is out of range or not a value of it. */
int lb_model_gradcheck_option(lb_model_gradcheck_setup *s, const char *option, const char *value,
                              const char **model_option);

/* 1 for the model options a gradient check does not take: those without an option, the
 * model kind (checked per family), dropout (off in the checked forward) and the model
 * seed (the setup's seed seeds both the model and the data); 0 otherwise. */
int lb_model_gradcheck_skips(const lb_model_field *f);

LB_API_END

#endif

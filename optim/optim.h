/* Optimizers: SGD (momentum, dampening, Nesterov, weight decay), Adam and AdamW,
 * with the exact update rules of torch.optim (PyTorch 1.13, single-tensor path).
 *
 * An optimizer sees parameters and their gradients only: it is given an array of
 * persistent variables (lb_var from lb_param_new; each has a value and, after a
 * backward pass, a gradient of the same dtype and shape) and knows nothing of the
 * layers that own them. The array is read at creation; the variables must outlive
 * the optimizer and must not be reallocated (the same lb_var, the same value
 * tensor).
 *
 * Notation for one parameter p with gradient g, learning rate lr, weight decay wd,
 * and t the number of steps this parameter has taken, counting this one:
 *
 *   SGD   (torch.optim.SGD; Sutskever et al. 2013 for the Nesterov form)
 *         d = g + wd*p
 *         with momentum > 0:  buf = d                                   (t == 1)
 *                             buf = momentum*buf + (1 - dampening)*d    (t > 1)
 *                             d = d + momentum*buf   (nesterov)   or   d = buf
 *         p = p - lr*d
 *   Adam  (torch.optim.Adam; Kingma & Ba 2015, Algorithm 1, with L2 decay)
 *         g = g + wd*p
 *         m = beta1*m + (1 - beta1)*g
 *         v = beta2*v + (1 - beta2)*g*g
 *         p = p - (lr / (1 - beta1^t)) * m / (sqrt(v) / sqrt(1 - beta2^t) + eps)
 *         i.e. p -= lr * m_hat / (sqrt(v_hat) + eps): eps sits OUTSIDE the square
 *         root of the bias-corrected second moment, as in torch.
 *   AdamW (torch.optim.AdamW; Loshchilov & Hutter 2019, decoupled weight decay)
 *         p = p * (1 - lr*wd)          first, decay multiplied by the current lr
 *         then the Adam update above with g unchanged (no L2 term).
 *
 * A parameter whose grad is NULL (it received no gradient this step, or its
 * gradient was dropped with lb_param_zero_grad) is skipped entirely: its value,
 * its moments and its step count stay as they are, as torch skips parameters whose
 * .grad is None. Each parameter therefore keeps its own step count t, which is
 * what torch stores in state['step'].
 *
 * Precision: state tensors have the parameter's dtype (float32 or float64); every
 * update is computed elementwise in double and rounded to the dtype when stored
 * (so float32 results can differ from torch's all-float32 arithmetic in the last
 * bits). float64 parameters agree with torch to about 1e-15 relative.
 *
 * Parameter groups: only the weight decay can differ per parameter
 * (lb_optim_set_decay), which is torch's two groups {"params": decay,
 * "weight_decay": wd} and {"params": no_decay, "weight_decay": 0.0} (nanoGPT's
 * configure_optimizers). Not supported (torch options): amsgrad, maximize, other
 * per-group hyperparameters, sparse gradients. Gradients are not checked for
 * NaN/Inf here: check them with lb_clip_grad_norm or lb_grad_check_finite
 * (optim/clip.h) before stepping.
 *
 * State for checkpoints: every state tensor has a name (see lb_optim_state_name)
 * and is a contiguous tensor the caller may read and overwrite in place; saving
 * all of them and writing them back into an optimizer created with the same
 * configuration and parameters continues training bit-for-bit.
 */
#ifndef LB_OPTIM_H
#define LB_OPTIM_H

#include "tensor/api.h"

#include <stdint.h>

#include "autograd/autograd.h"

LB_API_BEGIN

typedef enum lb_optim_kind { LB_OPTIM_SGD = 0, LB_OPTIM_ADAM, LB_OPTIM_ADAMW } lb_optim_kind;

typedef struct lb_optim_config {
    lb_optim_kind kind;
    double lr;           /* learning rate, >= 0; change it between steps with lb_optim_set_lr */
    double weight_decay; /* >= 0; L2 added to the gradient (SGD, Adam) or decoupled (AdamW) */
    /* SGD */
    double momentum;  /* >= 0; 0 disables the momentum buffer */
    double dampening; /* >= 0; must be 0 with nesterov */
    int nesterov;     /* nonzero: Nesterov momentum (needs momentum > 0, dampening 0) */
    /* Adam, AdamW */
    double beta1, beta2; /* in [0, 1) */
    double eps;          /* >= 0, added to sqrt(v_hat) */
} lb_optim_config;

typedef struct lb_optim lb_optim;

/* torch.optim's defaults for `kind`: Adam lr 1e-3, betas (0.9, 0.999), eps 1e-8,
 * weight_decay 0; AdamW the same with weight_decay 1e-2; SGD momentum 0, dampening 0,
 * no Nesterov, weight_decay 0 and lr 1e-3 (torch has no default lr for SGD: set one). */
lb_optim_config lb_optim_defaults(lb_optim_kind kind);

/* Checks a configuration against torch's own argument checks: every value finite,
 * lr >= 0, weight_decay >= 0, momentum >= 0, dampening >= 0, nesterov only with
 * momentum > 0 and dampening 0, 0 <= beta1, beta2 < 1, eps >= 0.
 * Errors: LB_ERR_VALUE naming the field and its value. */
lb_status lb_optim_config_check(const lb_optim_config *cfg);

/* A new optimizer over the n_params (>= 0) parameters params[0..n_params-1], with
 * zeroed state (step counts 0). Each parameter must have a non-empty name, unique
 * in the array (state names are built from it), appear once, and hold a contiguous
 * float32 or float64 value. The array itself is copied; the variables are not.
 * Errors (NULL returned): LB_ERR_VALUE for a bad configuration, a NULL, unnamed,
 * repeated or same-named parameter; LB_ERR_MEMORY. */
lb_optim *lb_optim_new(const lb_optim_config *cfg, lb_var *const *params, int n_params);
/* Frees the optimizer and its state; the parameters are untouched. NULL is allowed. */
void lb_optim_free(lb_optim *opt);

/* One update of every parameter that has a gradient (see the rules above), using
 * the current learning rate; parameters with grad == NULL are skipped.
 * Every parameter is validated before any is changed, so on error nothing moved.
 * Errors: LB_ERR_SHAPE / LB_ERR_DTYPE when a gradient's shape or dtype differs from
 * its value's (message names the parameter and both); LB_ERR_VALUE for a
 * non-contiguous value or gradient; LB_ERR_STATE when a step count is not a
 * non-negative integer (a corrupt restored checkpoint). */
lb_status lb_optim_step(lb_optim *opt);

/* Puts parameter `index` (its position in the array given to lb_optim_new) in the
 * decayed group (decay != 0, the default for every parameter) or the exempt one
 * (decay == 0: its weight_decay is 0, for every kind). Not part of the saved state:
 * set it again after creating the optimizer for a resumed run.
 * Errors: LB_ERR_VALUE for a NULL optimizer or an index out of range. */
lb_status lb_optim_set_decay(lb_optim *opt, int index, int decay);
/* 1 when parameter `index` is decayed, 0 when exempt; -1 with LB_ERR_VALUE for a NULL
 * optimizer or an index out of range. */
int lb_optim_decays(const lb_optim *opt, int index);

/* Sets every parameter's gradient to NULL (torch's zero_grad(set_to_none=True)). */
void lb_optim_zero_grad(lb_optim *opt);

/* The learning rate used by the next step; setting it is how a schedule
 * (optim/schedule.h) drives the optimizer. Errors: LB_ERR_VALUE when lr is
 * negative or not finite (the rate is then unchanged). */
lb_status lb_optim_set_lr(lb_optim *opt, double lr);
double lb_optim_lr(const lb_optim *opt);
/* The configuration (with the current lr). */
const lb_optim_config *lb_optim_get_config(const lb_optim *opt);
int lb_optim_param_count(const lb_optim *opt);

/* ---- state, for checkpoints ----
 * State tensors are enumerated by index 0..lb_optim_state_count()-1, grouped by
 * parameter in the order given to lb_optim_new; for parameter "<p>":
 *   "step.<p>"             float64, 0-dimensional: steps this parameter has taken
 *                          (a non-negative integer stored exactly)           all kinds
 *   "momentum_buffer.<p>"  p's dtype and shape (zeros until the first step)  SGD, momentum > 0
 *   "exp_avg.<p>"          p's dtype and shape: first moment m               Adam, AdamW
 *   "exp_avg_sq.<p>"       p's dtype and shape: second moment v              Adam, AdamW
 * The names follow torch's state keys. The tensors are owned by the optimizer and
 * contiguous; read them, or overwrite their elements in place (lb_tensor_data,
 * lb_tensor_copy_into) to restore a checkpoint. A step count of 0 means the
 * parameter has not been updated yet and its buffers are unused (torch: no state). */
int lb_optim_state_count(const lb_optim *opt);
/* Name of state tensor i, or NULL when i is out of range. */
const char *lb_optim_state_name(const lb_optim *opt, int i);
/* State tensor i, or NULL when i is out of range. */
lb_tensor *lb_optim_state_tensor(const lb_optim *opt, int i);
/* The state tensor with this exact name, or NULL (no error recorded); NULL with
 * LB_ERR_VALUE when opt or name is NULL. */
lb_tensor *lb_optim_state_find(const lb_optim *opt, const char *name);

/* ---- names for the command line ----
 * "sgd", "adam", "adamw" (case-insensitive) -> kind. Errors: LB_ERR_VALUE naming
 * the word and listing the valid names. */
lb_status lb_optim_kind_parse(const char *name, lb_optim_kind *kind);
/* "sgd", "adam", "adamw"; "unknown" for a value outside the enum. */
const char *lb_optim_kind_name(lb_optim_kind kind);

LB_API_END

#endif

/* The parameters of a model: an ordered list of persistent variables, each with a
 * stable hierarchical name ("blocks.0.attn.w_q") and shape. Optimizers and
 * checkpoints iterate over it; layers register their weights into it when built.
 */
#ifndef LB_PARAMS_H
#define LB_PARAMS_H

#include "tensor/api.h"

#include "autograd/autograd.h"
#include "tensor/rng.h"

LB_API_BEGIN

typedef struct lb_params {
    lb_var **items;
    int count, capacity;
} lb_params;

/* An empty list (all fields zero is also a valid empty list). */
void lb_params_init(lb_params *ps);
/* Frees every parameter and the list itself. */
void lb_params_free(lb_params *ps);

/* Creates a zero-filled parameter named "<prefix>.<name>" (or "<name>" when prefix
 * is NULL or empty) of the given dtype and shape, appends it and returns it.
 * Errors: LB_ERR_VALUE when the name is already taken; LB_ERR_MEMORY when it cannot be
 * allocated, or when the list's parameters would exceed the machine's memory (RAM and
 * swap: such a model could never be trained, and the lazily granted pages would end the
 * process at initialisation); NULL is returned. */
lb_var *lb_params_add(lb_params *ps, const char *prefix, const char *name, lb_dtype dtype, int ndim,
                      const int64_t *shape);
/* The parameter with this exact name, or NULL (no error recorded); NULL with
 * LB_ERR_VALUE when ps or name is NULL. */
lb_var *lb_params_find(const lb_params *ps, const char *name);
/* Total number of scalar parameters. */
int64_t lb_params_numel(const lb_params *ps);
/* Drops every gradient (lb_param_zero_grad on each). */
void lb_params_zero_grad(lb_params *ps);

/* Initialisers, drawing from rng in row-major order:
 * uniform U(-bound, bound); normal N(0, std^2);
 * Xavier/Glorot uniform for a [fan_in, fan_out] matrix: bound sqrt(6 / (fan_in + fan_out))
 * (torch.nn.init.xavier_uniform_); fan_in or fan_out < 1 is an LB_ERR_VALUE error and
 * leaves p unchanged. */
void lb_init_uniform(lb_var *p, lb_rng *rng, double bound);
void lb_init_normal(lb_var *p, lb_rng *rng, double std);
void lb_init_xavier_uniform(lb_var *p, lb_rng *rng, int64_t fan_in, int64_t fan_out);
void lb_init_constant(lb_var *p, double value);

/* Builds "<prefix>.<name>" (or "<name>") into buf (always NUL-terminated); returns buf. */
char *lb_param_name(char *buf, size_t size, const char *prefix, const char *name);

LB_API_END

#endif

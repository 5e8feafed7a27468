/* Define-by-run reverse-mode automatic differentiation.
 *
 * Every differentiable op (autograd/ops.h) takes an lb_graph, computes its value
 * at once and, when gradients are enabled and an input requires them, records
 * itself on the graph's tape. lb_backward walks the tape in reverse creation
 * order (always a topological order) and accumulates gradients with +=, so a
 * value used twice receives the sum of both uses.
 *
 * Memory has two lifetimes, kept apart:
 *  - parameters (lb_param_new) persist across steps with their gradients; the
 *    optimizer reads and writes them; they are freed with lb_param_free;
 *  - the per-step graph (inputs, intermediate values, saved tensors, their
 *    gradients) is released in one call, lb_graph_reset, and grows by itself.
 *    Its large buffers are kept by the graph's buffer pool (tensor/pool.h) and
 *    reused by the next step instead of going back to the system: while a graph's
 *    ops (and lb_backward) run, the graph's pool is the calling thread's allocation
 *    pool, and stays so until another graph's op runs on that thread or the graph
 *    is freed. Tensors allocated meanwhile (optimizer state, parameter gradients)
 *    may come from it; they remain valid after the graph is freed.
 *
 * Every value held by a variable is a contiguous tensor. A variable's gradient,
 * when present, has exactly its value's dtype and shape.
 */
#ifndef LB_AUTOGRAD_H
#define LB_AUTOGRAD_H

#include <signal.h> /* sig_atomic_t */

#include "tensor/api.h"
#include "tensor/tensor.h"

LB_API_BEGIN

/* A buffer pool (tensor/pool.h, an advanced header). */
typedef struct lb_pool lb_pool;

enum { LB_MAX_OP_INPUTS = 5, LB_MAX_SAVED = 4 };

typedef struct lb_graph lb_graph;
typedef struct lb_var lb_var;

struct lb_var {
    lb_tensor *value;  /* contiguous; owned */
    lb_tensor *grad;   /* NULL until a gradient arrives; then value's dtype and shape */
    char *name;        /* parameters: stable hierarchical name; others NULL */
    int requires_grad; /* gradients flow to (and through) this variable */
    int op;            /* lb_op_kind that produced it; LB_OP_LEAF for inputs and parameters */
    int n_inputs;
    lb_var *inputs[LB_MAX_OP_INPUTS];
    lb_tensor *saved[LB_MAX_SAVED]; /* tensors an op keeps for its backward */
    uint64_t input_versions[LB_MAX_OP_INPUTS]; /* lb_tensor_version of each input's value when recorded */
    uint64_t value_version;         /* and of this variable's own value */
    double attr_f[4];               /* op attributes (scales, eps, ...) */
    int64_t attr_i[8];              /* op attributes (dims, flags, sizes, ...) */
    void *ctx;                      /* op-owned extra state, freed with ctx_free */
    void (*ctx_free)(void *ctx);
    lb_status (*custom_backward)(lb_var *node); /* lb_custom ops only */
    lb_graph *graph;                /* NULL for parameters */
};

/* A new empty graph with gradients enabled. NULL when out of memory. */
lb_graph *lb_graph_new(void);
/* Frees every variable the graph owns, then the graph and its buffer pool's cache.
 * Parameters are untouched. */
void lb_graph_free(lb_graph *g);
/* Frees every variable the graph owns (values, gradients, saved tensors) and makes it
 * ready for the next step; the graph keeps its grad mode. Ends a step of the graph's
 * buffer pool (lb_pool_trim): buffers released in this step stay cached for the next
 * one, those not reused since the previous reset go back to the system. */
void lb_graph_reset(lb_graph *g);
/* lb_graph_reset without ending a step of the pool: the buffers released go to the
 * cache and nothing cached goes back to the system. For a loop whose passes differ in
 * shape (an evaluation whose last batch is smaller): clear after each pass and reset
 * once after the loop, so the next loop finds the buffers of every shape it uses. */
void lb_graph_clear(lb_graph *g);
/* A stop flag the graph reads between ops: while *flag is nonzero, every op recorded
 * (forward) and every node of lb_backward fails with LB_ERR_STATE "interrupted (a stop
 * was requested) ...", so a long forward or backward pass ends within one op of a
 * signal handler setting the flag (a trainer then discards the step). NULL (the
 * default) reads no flag. g NULL does nothing. */
void lb_graph_set_stop(lb_graph *g, const volatile sig_atomic_t *flag);
/* The graph's buffer pool (tensor/pool.h), e.g. for lb_pool_get_stats. */
lb_pool *lb_graph_pool(lb_graph *g);
/* Gradient mode: with 0 (evaluation), ops record nothing and their results do not
 * require gradients (torch.no_grad). Returns the previous mode. */
int lb_graph_set_grad_enabled(lb_graph *g, int enabled);
int lb_graph_grad_enabled(const lb_graph *g);
/* Number of variables currently recorded on the graph. */
int64_t lb_graph_size(const lb_graph *g);

/* A graph leaf holding `value` (ownership passes to the graph; a non-contiguous value
 * is replaced by a contiguous copy). `requires_grad` makes lb_backward fill its grad.
 * NULL on error (value is then freed), except that a tensor the graph already owns (given
 * to lb_input before) is LB_ERR_STATE and stays the graph's. */
lb_var *lb_input(lb_graph *g, lb_tensor *value, int requires_grad);
/* A leaf holding a copy of `value`. */
lb_var *lb_input_copy(lb_graph *g, const lb_tensor *value, int requires_grad);

/* A persistent parameter named `name` holding `value` (ownership passes). Its grad
 * accumulates across backward passes until lb_param_zero_grad. NULL on error; a NULL
 * value (a constructor that failed, as in lb_param_new(lb_tensor_zeros(...), name))
 * keeps that call's error, LB_ERR_MEMORY when it ran out of memory. */
lb_var *lb_param_new(lb_tensor *value, const char *name);
void lb_param_free(lb_var *param);
/* Drops the gradient (sets it to NULL, like PyTorch's zero_grad(set_to_none=True)). */
void lb_param_zero_grad(lb_var *param);

/* Reverse pass from `output`. With grad_output NULL, output must hold one element
 * and its gradient is 1; otherwise grad_output has output's shape and dtype.
 * Accumulates into the grad of every variable that requires it.
 * Errors: LB_ERR_STATE if the graph's backward already ran since the last reset
 * (run the forward pass again), or if output does not require gradients, or if an
 * op's input or output was modified in place after the op recorded it (its
 * lb_tensor_version changed; the message names the op, like PyTorch's "one of the
 * variables needed for gradient computation has been modified by an inplace
 * operation");
 * LB_ERR_SHAPE for a wrong grad_output or a non-scalar output without one. */
lb_status lb_backward(lb_graph *g, lb_var *output, const lb_tensor *grad_output);

/* Adds `grad` (which may be broadcast-larger than v's value; it is summed back to
 * v's shape) into v->grad, allocating it on first use. Used by op backwards. */
lb_status lb_accumulate_grad(lb_var *v, const lb_tensor *grad);

/* The gradient buffer of v (v->grad), allocated as zeros with v's dtype and shape on
 * first use, for a backward function that adds into it directly (for example a gemm
 * with beta = 1 writing dL/dv). Add to it, never overwrite: v may receive gradients
 * from several uses. Call it only when v->requires_grad (otherwise lb_backward would
 * not read it). NULL when out of memory (lb_last_error() says so). */
lb_tensor *lb_grad_buffer(lb_var *v);

/* For backward functions: declares `buf` as v's gradient buffer (lb_grad_buffer) and
 * returns from the calling function, with LB_OK when v needs no gradient or with the
 * error when the buffer cannot be allocated. */
#define LB_GRAD_BUFFER_OR_RETURN(buf, v)                            \
    lb_tensor *buf = (v)->requires_grad ? lb_grad_buffer(v) : NULL; \
    if (!buf)                                                       \
        return (v)->requires_grad ? lb_last_status() : LB_OK

/* A user-defined differentiable op (like torch.autograd.Function): records `value`
 * (ownership passes) as computed from the n_inputs (<= LB_MAX_OP_INPUTS) inputs;
 * during lb_backward, `backward(node)` reads node->grad and adds each input's
 * gradient with lb_accumulate_grad (or into lb_grad_buffer(input) directly). `ctx`
 * (freed with ctx_free, may be NULL) is available as node->ctx. Check a custom op's
 * backward with lb_gradcheck. */
lb_var *lb_custom(lb_graph *g, int n_inputs, lb_var *const *inputs, lb_tensor *value,
                  lb_status (*backward)(lb_var *node), void *ctx, void (*ctx_free)(void *ctx));

/* Name of an op kind ("matmul", "masked_softmax", ...). */
const char *lb_op_name(int op);

LB_API_END

#endif

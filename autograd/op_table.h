/* Internal: the op kinds and their table of names and backward functions (both
 * generated from the op list, autograd/ops.def), and the helpers op
 * implementations share. Not installed for users of the library. */
#ifndef LB_OP_TABLE_H
#define LB_OP_TABLE_H

#include "autograd/autograd.h"

struct lb_attn_mask; /* autograd/ops.h */

/* The op kinds, from the op list (autograd/ops.def); 0 is a graph leaf (no op). */
typedef enum lb_op_kind {
    LB_OP_LEAF = 0,
#define LB_OP(kind, name, backward, ...) LB_OP_##kind,
#include "autograd/ops.def"
#undef LB_OP
    LB_OP_COUNT
} lb_op_kind;

/* Accumulates the gradients of node->inputs from node->grad. */
typedef lb_status (*lb_backward_fn)(lb_var *node);

/* What an op's backward does not read of the values it was recorded with: the
 * optional fourth column of the op list. Absent (0): it reads its inputs' values and
 * its own, and lb_backward refuses to run it when any of them was modified in place
 * since (lb_tensor_version). */
enum {
    LB_READS_OUTPUT = 1,  /* only its output's value (its inputs' are not read) */
    LB_READS_INPUTS = 2,  /* only its inputs' values */
    LB_READS_NOTHING = 3  /* no values at all (sums, shapes, scalings) */
};

typedef struct lb_op_info {
    const char *name;
    lb_backward_fn backward; /* NULL only for LB_OP_LEAF */
    unsigned unread;         /* LB_READS_*: values its backward does not read */
} lb_op_info;

const lb_op_info *lb_op_info_of(int op);

/* Backward functions named by the op list, defined in the ops_*.c files (and
 * graph.c for lb_custom). Each accumulates the gradients of node->inputs. */
#define LB_OP(kind, name, backward, ...) lb_status backward(lb_var *node);
#include "autograd/ops.def"
#undef LB_OP

/* Records a new variable holding `value` (ownership passes) produced by `op` from
 * `inputs`. It requires grad when grad mode is on and any input does; inputs are
 * kept only then. NULL (value freed) when out of memory. */
lb_var *lb_graph_record(lb_graph *g, lb_op_kind op, lb_tensor *value, int n_inputs, lb_var *const *inputs);

/* Checks that every input is non-NULL, lives on no graph or on g, and shares
 * inputs[0]'s dtype; otherwise sets an error naming `op` and returns it. */
lb_status lb_check_inputs(const char *op, lb_graph *g, int n, lb_var *const *inputs);

/* Checks an attention mask against scores of shape [B, ..., Tq, Tk] (ndim >= 2) for op
 * `op` (the message names it, the mask and the scores): a negative window, allowed or
 * additive masks that do not broadcast, key_lengths without a batch dim or outside
 * [0, Tk], query_positions outside [0, Tk). Fills the element strides of allowed and
 * additive over the scores' dims (0 where broadcast; untouched for an absent mask).
 * mask may be NULL (nothing to check). Defined in ops_softmax.c. */
lb_status lb_attn_mask_check(const char *op, int ndim, const int64_t *shape, const struct lb_attn_mask *mask,
                             int64_t *allowed_strides, int64_t *additive_strides);

#endif

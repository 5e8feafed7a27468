/* Internal: the op kinds, their table of names and backward functions, and the
 * helpers op implementations share. Not installed for users of the library. */
#ifndef LB_OP_TABLE_H
#define LB_OP_TABLE_H

#include "autograd/autograd.h"

struct lb_attn_mask; /* autograd/ops.h */

typedef enum lb_op_kind {
    LB_OP_LEAF = 0,
    LB_OP_ADD, LB_OP_SUB, LB_OP_MUL, LB_OP_DIV, LB_OP_NEG, LB_OP_SCALE,
    LB_OP_EXP, LB_OP_LOG, LB_OP_TANH, LB_OP_SIGMOID, LB_OP_RELU, LB_OP_GELU,
    LB_OP_MATMUL,
    LB_OP_RESHAPE, LB_OP_PERMUTE, LB_OP_SLICE, LB_OP_CONCAT,
    LB_OP_SUM, LB_OP_MEAN,
    LB_OP_SOFTMAX, LB_OP_LOG_SOFTMAX, LB_OP_MASKED_SOFTMAX, LB_OP_ATTENTION,
    LB_OP_LAYER_NORM, LB_OP_EMBEDDING, LB_OP_DROPOUT, LB_OP_CROSS_ENTROPY, LB_OP_MSE,
    LB_OP_CUSTOM,
    LB_OP_COUNT
} lb_op_kind;

/* Accumulates the gradients of node->inputs from node->grad. */
typedef lb_status (*lb_backward_fn)(lb_var *node);

typedef struct lb_op_info {
    const char *name;
    lb_backward_fn backward; /* NULL only for LB_OP_LEAF */
} lb_op_info;

const lb_op_info *lb_op_info_of(int op);

/* Backward functions, defined in the ops_*.c files. */
lb_status lb_add_backward(lb_var *node);
lb_status lb_sub_backward(lb_var *node);
lb_status lb_mul_backward(lb_var *node);
lb_status lb_div_backward(lb_var *node);
lb_status lb_neg_backward(lb_var *node);
lb_status lb_scale_backward(lb_var *node);
lb_status lb_unary_backward(lb_var *node);
lb_status lb_matmul_backward(lb_var *node);
lb_status lb_reshape_backward(lb_var *node);
lb_status lb_permute_backward(lb_var *node);
lb_status lb_slice_backward(lb_var *node);
lb_status lb_concat_backward(lb_var *node);
lb_status lb_sum_backward(lb_var *node);
lb_status lb_softmax_backward(lb_var *node);
lb_status lb_log_softmax_backward(lb_var *node);
lb_status lb_masked_softmax_backward(lb_var *node);
lb_status lb_attention_backward(lb_var *node);
lb_status lb_layer_norm_backward(lb_var *node);
lb_status lb_embedding_backward(lb_var *node);
lb_status lb_dropout_backward(lb_var *node);
lb_status lb_cross_entropy_backward(lb_var *node);
lb_status lb_mse_backward(lb_var *node);

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

/* Gradient buffer of v, allocated as zeros on first use (NULL when out of memory). */
lb_tensor *lb_grad_buffer(lb_var *v);

#endif

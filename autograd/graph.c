#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "autograd/op_table.h"
#include "tensor/kernels.h"
#include "tensor/pool.h"

struct lb_graph {
    lb_var **nodes; /* creation order = a topological order */
    int64_t size, capacity;
    int grad_enabled;
    int backward_done; /* backward ran since the last reset */
    lb_pool *pool;     /* per-step buffers, reused across steps */
    const volatile sig_atomic_t *stop; /* lb_graph_set_stop; NULL: none */
};

void lb_graph_set_stop(lb_graph *g, const volatile sig_atomic_t *flag)
{
    if (g)
        g->stop = flag;
}

static lb_status interrupted(const char *where)
{
    return lb_error(LB_ERR_STATE, "interrupted (a stop was requested) %s", where);
}

/* lb_custom nodes carry their own backward function. */
lb_status lb_custom_backward(lb_var *node) { return node->custom_backward(node); }

/* Indexed by lb_op_kind; one row per line of the op list. */
static const lb_op_info op_table[] = {
    [LB_OP_LEAF] = {"leaf", NULL},
#define LB_OP(kind, name, backward, ...) [LB_OP_##kind] = {name, backward, __VA_ARGS__},
#include "autograd/ops.def"
#undef LB_OP
};
_Static_assert(sizeof op_table / sizeof op_table[0] == LB_OP_COUNT, "one table row per op kind");

const lb_op_info *lb_op_info_of(int op) { return (op >= 0 && op < LB_OP_COUNT) ? &op_table[op] : NULL; }

const char *lb_op_name(int op)
{
    const lb_op_info *info = lb_op_info_of(op);
    return info && info->name ? info->name : "unknown";
}

lb_graph *lb_graph_new(void)
{
    lb_graph *g = calloc(1, sizeof *g);
    if (!g) {
        lb_error(LB_ERR_MEMORY, "lb_graph_new: out of memory");
        return NULL;
    }
    g->grad_enabled = 1;
    if (!(g->pool = lb_pool_new())) {
        free(g);
        return NULL;
    }
    return g;
}

static void var_free(lb_var *v)
{
    if (!v)
        return;
    lb_tensor_free(v->value);
    lb_tensor_free(v->grad);
    for (int i = 0; i < LB_MAX_SAVED; i++)
        lb_tensor_free(v->saved[i]);
    if (v->ctx_free)
        v->ctx_free(v->ctx);
    free(v->name);
    free(v);
}

void lb_graph_clear(lb_graph *g)
{
    if (!g)
        return;
    for (int64_t i = 0; i < g->size; i++)
        var_free(g->nodes[i]);
    g->size = 0;
    g->backward_done = 0;
}

void lb_graph_reset(lb_graph *g)
{
    if (!g)
        return;
    lb_graph_clear(g);
    lb_pool_trim(g->pool);
}

lb_pool *lb_graph_pool(lb_graph *g)
{
    LB_CHECK_ARG(g, NULL);
    return g ? g->pool : NULL;
}

void lb_graph_free(lb_graph *g)
{
    if (!g)
        return;
    lb_graph_reset(g);
    lb_pool_free(g->pool);
    free(g->nodes);
    free(g);
}

int lb_graph_set_grad_enabled(lb_graph *g, int enabled)
{
    LB_CHECK_ARG(g, -1);
    int old = g->grad_enabled;
    g->grad_enabled = enabled ? 1 : 0;
    return old;
}

int lb_graph_grad_enabled(const lb_graph *g)
{
    LB_CHECK_ARG(g, -1);
    return g->grad_enabled;
}
int64_t lb_graph_size(const lb_graph *g)
{
    LB_CHECK_ARG(g, -1);
    return g->size;
}

static lb_status graph_push(lb_graph *g, lb_var *v)
{
    if (g->size == g->capacity) {
        int64_t cap = g->capacity ? g->capacity * 2 : 64;
        lb_var **nodes = realloc(g->nodes, (size_t)cap * sizeof *nodes);
        if (!nodes)
            return lb_error(LB_ERR_MEMORY, "graph: out of memory recording variable %lld", (long long)g->size);
        g->nodes = nodes;
        g->capacity = cap;
    }
    g->nodes[g->size++] = v;
    return LB_OK;
}

/* LB_ERR_STATE naming the op when a tensor its backward reads was written in place
 * after the op recorded it. */
static lb_status check_versions(const lb_var *v)
{
    char a[128];
    unsigned unread = op_table[v->op].unread;
    for (int i = -1; i < v->n_inputs; i++) {
        /* LB_READS_OUTPUT (bit 1) leaves the inputs unread, LB_READS_INPUTS (bit 2) the output. */
        if ((i >= 0 && (unread & LB_READS_OUTPUT)) || (i < 0 && (unread & LB_READS_INPUTS)))
            continue;
        const lb_tensor *t = i < 0 ? v->value : v->inputs[i]->value;
        uint64_t then = i < 0 ? v->value_version : v->input_versions[i];
        if (lb_tensor_version(t) == then)
            continue;
        char which[32];
        if (i < 0)
            snprintf(which, sizeof which, "its output");
        else
            snprintf(which, sizeof which, "its input %d", i);
        return lb_error(LB_ERR_STATE,
                        "backward of %s: %s (%s) was modified in place after the forward pass used it (version %llu "
                        "then, %llu now), so its gradient would be wrong; copy the tensor before changing it, or run "
                        "the forward pass again",
                        lb_op_name(v->op), which, lb_tensor_describe(t, a, sizeof a), (unsigned long long)then,
                        (unsigned long long)lb_tensor_version(t));
    }
    return LB_OK;
}

static lb_var *var_new(lb_tensor *value)
{
    lb_var *v = calloc(1, sizeof *v);
    if (!v) {
        lb_tensor_free(value);
        lb_error(LB_ERR_MEMORY, "variable: out of memory");
        return NULL;
    }
    v->value = value;
    return v;
}

lb_var *lb_graph_record(lb_graph *g, lb_op_kind op, lb_tensor *value, int n_inputs, lb_var *const *inputs)
{
    if (!value)
        return NULL;
    lb_var *v = var_new(value);
    if (!v)
        return NULL;
    if (g->stop && *g->stop) {
        var_free(v);
        interrupted("during the forward pass");
        return NULL;
    }
    v->op = op;
    v->graph = g;
    int needs = 0;
    for (int i = 0; i < n_inputs; i++)
        needs |= inputs[i]->requires_grad;
    if (g->grad_enabled && needs) {
        v->requires_grad = 1;
        v->n_inputs = n_inputs;
        memcpy(v->inputs, inputs, (size_t)n_inputs * sizeof *inputs);
        for (int i = 0; i < n_inputs; i++)
            v->input_versions[i] = lb_tensor_version(inputs[i]->value);
        v->value_version = lb_tensor_version(value);
    }
    if (graph_push(g, v) != LB_OK) {
        var_free(v);
        return NULL;
    }
    return v;
}

lb_status lb_check_inputs(const char *op, lb_graph *g, int n, lb_var *const *inputs)
{
    if (!g)
        return lb_error(LB_ERR_STATE, "%s: the graph is NULL (create one with lb_graph_new)", op);
    lb_pool_use(g->pool); /* the op's results come from its graph's buffers */
    for (int i = 0; i < n; i++) {
        if (!inputs[i]) {
            /* Keep the message of the op that failed upstream, if any. */
            if (lb_last_status() == LB_OK)
                lb_error(LB_ERR_VALUE, "%s: input %d is NULL", op, i);
            return lb_last_status();
        }
        if (inputs[i]->graph && inputs[i]->graph != g)
            return lb_error(LB_ERR_STATE, "%s: input %d belongs to another graph", op, i);
        if (inputs[i]->value->dtype != inputs[0]->value->dtype) {
            char a[128], b[128];
            return lb_error(LB_ERR_DTYPE, "%s: dtypes differ: input 0 is %s, input %d is %s", op,
                            lb_tensor_describe(inputs[0]->value, a, sizeof a), i,
                            lb_tensor_describe(inputs[i]->value, b, sizeof b));
        }
    }
    return LB_OK;
}

lb_var *lb_custom(lb_graph *g, int n_inputs, lb_var *const *inputs, lb_tensor *value,
                  lb_status (*backward)(lb_var *node), void *ctx, void (*ctx_free)(void *ctx))
{
    if (n_inputs < 1 || n_inputs > LB_MAX_OP_INPUTS || !backward) {
        lb_tensor_free(value);
        if (ctx_free)
            ctx_free(ctx);
        lb_error(LB_ERR_VALUE, "lb_custom: need 1..%d inputs and a backward function (got %d inputs%s)",
                 LB_MAX_OP_INPUTS, n_inputs, backward ? "" : ", no backward");
        return NULL;
    }
    if (lb_check_inputs("custom", g, n_inputs, inputs) != LB_OK) {
        lb_tensor_free(value);
        value = NULL;
    }
    lb_var *v = lb_graph_record(g, LB_OP_CUSTOM, value, n_inputs, inputs); /* frees value on failure */
    if (!v) {
        if (ctx_free)
            ctx_free(ctx);
        return NULL;
    }
    v->custom_backward = backward;
    v->ctx = ctx;
    v->ctx_free = ctx_free;
    return v;
}

/* A leaf variable holding `value` (ownership passes), made contiguous if needed. */
static lb_var *leaf_new(lb_tensor *value)
{
    if (value && !lb_tensor_is_contiguous(value)) {
        lb_tensor *c = lb_tensor_copy(value, value->dtype);
        lb_tensor_free(value);
        value = c;
    }
    return value ? var_new(value) : NULL;
}

lb_var *lb_input(lb_graph *g, lb_tensor *value, int requires_grad)
{
    LB_CHECK_INPUT(value, NULL);
    if (value && !g) {
        lb_tensor_free(value);
        lb_error(LB_ERR_STATE, "lb_input: the graph is NULL (create one with lb_graph_new)");
        return NULL;
    }
    for (int64_t i = 0; value && g && i < g->size; i++)
        if (g->nodes[i]->value == value) { /* already the graph's: freeing it twice would follow */
            lb_error(LB_ERR_STATE,
                     "lb_input: this tensor was given to the graph already (variable %lld owns it); give each "
                     "lb_input its own tensor, or use lb_input_copy",
                     (long long)i);
            return NULL;
        }
    if (g)
        lb_pool_use(g->pool);
    lb_var *v = leaf_new(value);
    if (!v)
        return NULL;
    v->graph = g;
    v->requires_grad = requires_grad ? 1 : 0;
    if (graph_push(g, v) != LB_OK) {
        var_free(v);
        return NULL;
    }
    return v;
}

lb_var *lb_input_copy(lb_graph *g, const lb_tensor *value, int requires_grad)
{
    LB_CHECK_ARG(value, NULL);
    if (g)
        lb_pool_use(g->pool); /* the copy is the step's memory too */
    return lb_input(g, value ? lb_tensor_copy(value, value->dtype) : NULL, requires_grad);
}

lb_var *lb_param_new(lb_tensor *value, const char *name)
{
    LB_CHECK_INPUT(value, NULL); /* NULL from a failed constructor keeps its error (out of memory) */
    lb_var *v = leaf_new(value);
    if (!v)
        return NULL;
    v->requires_grad = 1;
    if (name && !(v->name = strdup(name))) {
        var_free(v);
        lb_error(LB_ERR_MEMORY, "lb_param_new: out of memory");
        return NULL;
    }
    return v;
}

void lb_param_free(lb_var *param) { var_free(param); }

void lb_param_zero_grad(lb_var *param)
{
    LB_CHECK_INPUT(param);
    lb_tensor_free(param->grad);
    param->grad = NULL;
}

lb_tensor *lb_grad_buffer(lb_var *v)
{
    LB_CHECK_INPUT(v, NULL);
    if (!v->grad)
        v->grad = lb_tensor_zeros_like(v->value);
    return v->grad;
}

lb_status lb_accumulate_grad(lb_var *v, const lb_tensor *grad)
{
    LB_CHECK_INPUT(v, LB_ERR_VALUE);
    LB_CHECK_ARG(grad, LB_ERR_VALUE);
    if (!v->requires_grad)
        return LB_OK;
    if (!v->grad && lb_tensor_same_shape(grad, v->value) && grad->dtype == v->value->dtype) {
        v->grad = lb_tensor_copy(grad, grad->dtype); /* 0 + grad: skip the zeros */
        return v->grad ? LB_OK : lb_last_status();
    }
    LB_GRAD_BUFFER_OR_RETURN(buf, v);
    return lb_k_accumulate(buf, grad, 1.0);
}

lb_status lb_backward(lb_graph *g, lb_var *output, const lb_tensor *grad_output)
{
    char a[128], b[128];
    if (!g || !output)
        return lb_error(LB_ERR_VALUE, "backward: %s is NULL", g ? "output" : "graph");
    if (g->backward_done)
        return lb_error(LB_ERR_STATE, "backward: this graph's backward already ran and its saved tensors are "
                                      "spent; call lb_graph_reset and run the forward pass again");
    if (!output->requires_grad)
        return lb_error(LB_ERR_STATE, "backward: the output (%s, from %s) does not require gradients: no "
                                      "parameter or input with requires_grad reaches it, or grad mode was off",
                        lb_tensor_describe(output->value, a, sizeof a), lb_op_name(output->op));
    lb_pool_use(g->pool);
    lb_tensor *seed;
    if (grad_output) {
        if (!lb_tensor_same_shape(grad_output, output->value) || grad_output->dtype != output->value->dtype)
            return lb_error(LB_ERR_SHAPE, "backward: grad_output %s does not match the output %s",
                            lb_tensor_describe(grad_output, a, sizeof a), lb_tensor_describe(output->value, b, sizeof b));
        seed = lb_tensor_copy(grad_output, grad_output->dtype);
    } else {
        if (lb_tensor_numel(output->value) != 1)
            return lb_error(LB_ERR_SHAPE, "backward: the output %s is not a scalar; pass grad_output",
                            lb_tensor_describe(output->value, a, sizeof a));
        seed = lb_tensor_zeros_like(output->value);
        if (seed)
            lb_tensor_fill(seed, 1.0);
    }
    if (!seed)
        return lb_last_status();
    lb_status st = LB_OK;
    if (!output->grad) { /* the seed is the output's gradient: no second copy */
        output->grad = seed;
    } else {
        st = lb_accumulate_grad(output, seed);
        lb_tensor_free(seed);
    }
    if (st != LB_OK)
        return st;
    g->backward_done = 1;
    for (int64_t i = g->size - 1; i >= 0; i--) {
        lb_var *v = g->nodes[i];
        if (!v->grad || v->op == LB_OP_LEAF || !v->requires_grad)
            continue;
        if (g->stop && *g->stop)
            return interrupted("during the backward pass");
        st = check_versions(v);
        if (st != LB_OK)
            return st;
        st = op_table[v->op].backward(v);
        if (st != LB_OK)
            return lb_error_context("backward of %s", lb_op_name(v->op));
        /* Saved tensors are spent: free them now to bound peak memory. */
        for (int k = 0; k < LB_MAX_SAVED; k++) {
            lb_tensor_free(v->saved[k]);
            v->saved[k] = NULL;
        }
        if (v != output) {
            lb_tensor_free(v->grad);
            v->grad = NULL;
        }
    }
    return LB_OK;
}

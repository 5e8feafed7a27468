/* Elementwise ops: broadcasting arithmetic and unary functions. */
#include <math.h>

#include "autograd/op_table.h"
#include "autograd/ops.h"
#include "kernels/gelu.h"
#include "tensor/kernels.h"
#include "tensor/threads.h"

/* ---- binary, with broadcasting ----
 * a: [*A], b: [*B] -> out: [*broadcast(A, B)] */

static lb_var *binary(lb_graph *g, lb_op_kind op, lb_binary_op kernel, lb_var *a, lb_var *b)
{
    lb_var *in[2] = {a, b};
    if (lb_check_inputs(lb_op_name(op), g, 2, in) != LB_OK)
        return NULL;
    int ndim;
    int64_t shape[LB_MAX_DIMS];
    if (lb_broadcast_shapes(lb_op_name(op), a->value->ndim, a->value->shape, b->value->ndim, b->value->shape, &ndim,
                            shape) != LB_OK)
        return NULL;
    lb_tensor *out = lb_tensor_empty(a->value->dtype, ndim, shape); /* every element written */
    if (!out)
        return NULL;
    if (lb_k_binary(kernel, a->value, b->value, out) != LB_OK) {
        lb_tensor_free(out);
        return NULL;
    }
    return lb_graph_record(g, op, out, 2, in);
}

lb_var *lb_add(lb_graph *g, lb_var *a, lb_var *b) { return binary(g, LB_OP_ADD, LB_BIN_ADD, a, b); }
lb_var *lb_sub(lb_graph *g, lb_var *a, lb_var *b) { return binary(g, LB_OP_SUB, LB_BIN_SUB, a, b); }
lb_var *lb_mul(lb_graph *g, lb_var *a, lb_var *b) { return binary(g, LB_OP_MUL, LB_BIN_MUL, a, b); }
lb_var *lb_div(lb_graph *g, lb_var *a, lb_var *b) { return binary(g, LB_OP_DIV, LB_BIN_DIV, a, b); }

lb_status lb_add_backward(lb_var *node)
{
    lb_status st = lb_accumulate_grad(node->inputs[0], node->grad);
    return st != LB_OK ? st : lb_accumulate_grad(node->inputs[1], node->grad);
}

lb_status lb_sub_backward(lb_var *node)
{
    lb_var *b = node->inputs[1];
    lb_status st = lb_accumulate_grad(node->inputs[0], node->grad);
    if (st != LB_OK)
        return st;
    LB_GRAD_BUFFER_OR_RETURN(gb, b);
    return lb_k_accumulate(gb, node->grad, -1.0);
}

/* Accumulates alpha * (grad (op) other) into target's gradient, reduced to its shape.
 *   grad: [*out], other: broadcastable to [*out] */
static lb_status accumulate_product(lb_var *target, lb_binary_op kernel, const lb_tensor *grad, const lb_tensor *other,
                                    double alpha)
{
    if (!target->requires_grad)
        return LB_OK;
    lb_tensor *tmp = lb_tensor_empty_like(grad); /* every element written */
    lb_tensor *buf = lb_grad_buffer(target);
    lb_status st = (tmp && buf) ? lb_k_binary(kernel, grad, other, tmp) : lb_last_status();
    if (st == LB_OK)
        st = lb_k_accumulate(buf, tmp, alpha);
    lb_tensor_free(tmp);
    return st;
}

lb_status lb_mul_backward(lb_var *node)
{
    lb_var *a = node->inputs[0], *b = node->inputs[1];
    lb_status st = accumulate_product(a, LB_BIN_MUL, node->grad, b->value, 1.0);
    return st != LB_OK ? st : accumulate_product(b, LB_BIN_MUL, node->grad, a->value, 1.0);
}

/* d(a/b)/da = 1/b; d(a/b)/db = -(a/b)/b = -out/b. */
lb_status lb_div_backward(lb_var *node)
{
    lb_var *a = node->inputs[0], *b = node->inputs[1];
    lb_status st = accumulate_product(a, LB_BIN_DIV, node->grad, b->value, 1.0);
    if (st != LB_OK || !b->requires_grad)
        return st;
    lb_tensor *go = lb_tensor_empty_like(node->grad);
    st = go ? lb_k_binary(LB_BIN_MUL, node->grad, node->value, go) : lb_last_status();
    if (st == LB_OK)
        st = accumulate_product(b, LB_BIN_DIV, go, b->value, -1.0);
    lb_tensor_free(go);
    return st;
}


static lb_var *unary(lb_graph *g, lb_op_kind op, lb_var *x, double c);

/* ---- scaling ---- x: [*] -> c * x */

lb_var *lb_neg(lb_graph *g, lb_var *x) { return unary(g, LB_OP_NEG, x, -1.0); }
lb_var *lb_scale(lb_graph *g, lb_var *x, double c) { return unary(g, LB_OP_SCALE, x, c); }

lb_status lb_scale_backward(lb_var *node)
{
    lb_var *x = node->inputs[0];
    LB_GRAD_BUFFER_OR_RETURN(gx, x);
    return lb_k_accumulate(gx, node->grad, node->attr_f[0]);
}

lb_status lb_neg_backward(lb_var *node) { return lb_scale_backward(node); }

/* ---- unary functions ---- x: [*] -> y: [*] */

/* GELU (exact form) and its derivative: tensor/kernels.h's lb_k_gelu, lb_k_gelu_backward. */

/* GELU's tanh approximation (torch's approximate="tanh"; Hendrycks and Gimpel 2016):
 * 0.5 x (1 + tanh(u)), u = sqrt(2/pi) (x + 0.044715 x^3). */
#define GELU_TANH_K 0.7978845608028654 /* sqrt(2 / pi) */
static double gelu_tanh(double x) { return 0.5 * x * (1.0 + tanh(GELU_TANH_K * (x + 0.044715 * x * x * x))); }

/* d/dx = 0.5 (1 + t) + 0.5 x (1 - t^2) sqrt(2/pi) (1 + 3 * 0.044715 x^2), t = tanh(u). */
static double gelu_tanh_grad(double x)
{
    double t = tanh(GELU_TANH_K * (x + 0.044715 * x * x * x));
    return 0.5 * (1.0 + t) + 0.5 * x * (1.0 - t * t) * GELU_TANH_K * (1.0 + 3.0 * 0.044715 * x * x);
}

static double sigmoid(double x)
{
    if (x >= 0)
        return 1.0 / (1.0 + exp(-x));
    double e = exp(x);
    return e / (1.0 + e);
}

/* y = f(x) elementwise; for NEG and SCALE, f(x) = c * x. */
static lb_var *unary(lb_graph *g, lb_op_kind op, lb_var *x, double c)
{
    if (lb_check_inputs(lb_op_name(op), g, 1, &x) != LB_OK)
        return NULL;
    lb_tensor *out = lb_tensor_empty_like(x->value);
    if (!out)
        return NULL;
    int64_t n = lb_tensor_numel(out);
    /* Elements split over threads in fixed ranges: the same bits for any thread count. */
    int nt = lb_threads_for(n, op == LB_OP_NEG || op == LB_OP_SCALE || op == LB_OP_RELU ? LB_GRAIN_ELEMENTS : 4096);
    if (op == LB_OP_GELU) { /* vector kernel (tensor/kernels.h) */
        if (lb_k_gelu(out->dtype, n, lb_tensor_data(x->value), lb_tensor_data(out), 0) != LB_OK) {
            lb_tensor_free(out);
            return NULL;
        }
    } else LB_DISPATCH(out->dtype, T, {
        const T *px = lb_tensor_data(x->value);
        T *py = lb_tensor_data(out);
        T k = (T)c;
        _Pragma("omp parallel for schedule(static) num_threads(nt) if (nt > 1)")
        for (int64_t i = 0; i < n; i++) {
            switch (op) {
            case LB_OP_NEG:
            case LB_OP_SCALE: py[i] = k * px[i]; break;
            case LB_OP_EXP: py[i] = (T)exp((double)px[i]); break;
            case LB_OP_LOG: py[i] = (T)log((double)px[i]); break;
            case LB_OP_TANH: py[i] = (T)tanh((double)px[i]); break;
            case LB_OP_SIGMOID: py[i] = (T)sigmoid((double)px[i]); break;
            case LB_OP_RELU: py[i] = px[i] > 0 ? px[i] : (T)0; break;
            case LB_OP_GELU_TANH: py[i] = (T)gelu_tanh((double)px[i]); break;
            default: py[i] = px[i]; break;
            }
        }
    });
    lb_var *v = lb_graph_record(g, op, out, 1, &x);
    if (v)
        v->attr_f[0] = c;
    return v;
}

lb_var *lb_exp(lb_graph *g, lb_var *x) { return unary(g, LB_OP_EXP, x, 1.0); }
lb_var *lb_log(lb_graph *g, lb_var *x) { return unary(g, LB_OP_LOG, x, 1.0); }
lb_var *lb_tanh(lb_graph *g, lb_var *x) { return unary(g, LB_OP_TANH, x, 1.0); }
lb_var *lb_sigmoid(lb_graph *g, lb_var *x) { return unary(g, LB_OP_SIGMOID, x, 1.0); }
lb_var *lb_relu(lb_graph *g, lb_var *x) { return unary(g, LB_OP_RELU, x, 1.0); }
lb_var *lb_gelu(lb_graph *g, lb_var *x) { return unary(g, LB_OP_GELU, x, 1.0); }
lb_var *lb_gelu_tanh(lb_graph *g, lb_var *x) { return unary(g, LB_OP_GELU_TANH, x, 1.0); }

/* dx += dy * f'(x), with f' written from x or from y = f(x). */
lb_status lb_unary_backward(lb_var *node)
{
    lb_var *x = node->inputs[0];
    LB_GRAD_BUFFER_OR_RETURN(gx, x);
    int64_t n = lb_tensor_numel(gx);
    int op = node->op;
    if (op == LB_OP_GELU)
        return lb_k_gelu_backward(gx->dtype, n, lb_tensor_data(x->value), lb_tensor_data(node->grad),
                                  lb_tensor_data(gx));
    int nt = lb_threads_for(n, op == LB_OP_RELU || op == LB_OP_TANH || op == LB_OP_SIGMOID ? LB_GRAIN_ELEMENTS : 4096);
    LB_DISPATCH(gx->dtype, T, {
        const T *px = lb_tensor_data(x->value), *py = lb_tensor_data(node->value), *dy = lb_tensor_data(node->grad);
        T *dx = lb_tensor_data(gx);
        _Pragma("omp parallel for schedule(static) num_threads(nt) if (nt > 1)")
        for (int64_t i = 0; i < n; i++) {
            switch (op) {
            case LB_OP_EXP: dx[i] += dy[i] * py[i]; break;
            case LB_OP_LOG: dx[i] += dy[i] / px[i]; break;
            case LB_OP_TANH: dx[i] += dy[i] * (1 - py[i] * py[i]); break;
            case LB_OP_SIGMOID: dx[i] += dy[i] * py[i] * (1 - py[i]); break;
            case LB_OP_RELU: dx[i] += px[i] > 0 ? dy[i] : (T)0; break;
            case LB_OP_GELU_TANH: dx[i] += dy[i] * (T)gelu_tanh_grad((double)px[i]); break;
            default: break;
            }
        }
    });
    return LB_OK;
}

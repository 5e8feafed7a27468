/* Tensor version counters: backward refuses an op whose input or output was
 * modified in place after the forward pass recorded it (as PyTorch's _version). */
#include <string.h>

#include "autograd/ops.h"
#include "optim/optim.h"
#include "support.h"

static void test_counter_counts_in_place_writes(void)
{
    int64_t shape[2] = {2, 3}, idx[2] = {1, 2};
    lb_tensor *t = lb_tensor_zeros(LB_FLOAT32, 2, shape);
    lb_tensor *u = lb_tensor_zeros(LB_FLOAT32, 2, shape);
    CU_ASSERT_EQUAL(lb_tensor_version(t), 0);
    lb_tensor_set(t, idx, 1.0);
    CU_ASSERT_EQUAL(lb_tensor_version(t), 1);
    lb_tensor_fill(t, 2.0);
    CU_ASSERT_EQUAL(lb_tensor_version(t), 2);
    CU_ASSERT_EQUAL(lb_tensor_copy_into(t, u), LB_OK);
    CU_ASSERT_EQUAL(lb_tensor_version(t), 3);
    CU_ASSERT_EQUAL(lb_tensor_version(u), 0); /* reading does not count */
    lb_tensor *view = lb_tensor_transpose(t, 0, 1);
    lb_tensor_set(view, (int64_t[]){2, 1}, 5.0); /* a view shares the counter */
    CU_ASSERT_EQUAL(lb_tensor_version(t), 4);
    lb_tensor_bump_version(t);
    CU_ASSERT_EQUAL(lb_tensor_version(view), 5);
    lb_tensor_free(view);
    lb_tensor_free(t);
    lb_tensor_free(u);
}

static void test_backward_refuses_modified_output(void)
{
    lb_graph *g = lb_graph_new();
    int64_t shape[2] = {2, 3};
    lb_var *x = lb_input(g, lb_test_random_tensor(LB_FLOAT64, 2, shape, 1), 1);
    lb_var *y = lb_tanh(g, x); /* tanh's backward reads its output */
    lb_var *loss = lb_sum(g, y);
    lb_tensor_set(y->value, (int64_t[]){0, 1}, 0.25);
    CU_ASSERT_EQUAL(lb_backward(g, loss, NULL), LB_ERR_STATE);
    CU_ASSERT_TRUE(lb_test_error_has("backward of tanh"));
    CU_ASSERT_TRUE(lb_test_error_has("its output"));
    CU_ASSERT_TRUE(lb_test_error_has("float64[2, 3]"));
    CU_ASSERT_TRUE(lb_test_error_has("version 0 then, 1 now"));
    CU_ASSERT_PTR_NULL(x->grad); /* nothing reached x */
    /* Run again: the same computation without the write gives tanh's gradient. */
    lb_graph_reset(g);
    x = lb_input(g, lb_test_random_tensor(LB_FLOAT64, 2, shape, 1), 1);
    y = lb_tanh(g, x);
    CU_ASSERT_EQUAL(lb_backward(g, lb_sum(g, y), NULL), LB_OK);
    double yv = lb_tensor_flat(y->value, 4);
    CU_ASSERT_DOUBLE_EQUAL(lb_tensor_flat(x->grad, 4), 1.0 - yv * yv, 1e-12);
    /* A sum's backward reads no values: changing its input afterwards is allowed. */
    lb_graph_reset(g);
    x = lb_input(g, lb_test_random_tensor(LB_FLOAT64, 2, shape, 1), 1);
    lb_var *s = lb_sum(g, x);
    lb_tensor_fill(x->value, 3.0);
    CU_ASSERT_EQUAL(lb_backward(g, s, NULL), LB_OK);
    CU_ASSERT_DOUBLE_EQUAL(lb_tensor_flat(x->grad, 5), 1.0, 0);
    lb_graph_free(g);
}

static void test_backward_refuses_modified_input(void)
{
    lb_graph *g = lb_graph_new();
    int64_t sa[2] = {2, 3}, sb[2] = {3, 4};
    lb_var *a = lb_input(g, lb_test_random_tensor(LB_FLOAT32, 2, sa, 2), 1);
    lb_var *b = lb_input(g, lb_test_random_tensor(LB_FLOAT32, 2, sb, 3), 1);
    lb_var *loss = lb_sum(g, lb_matmul(g, a, b)); /* d/da needs b, d/db needs a */
    lb_tensor *view = lb_tensor_view(b->value);
    lb_tensor_fill(view, 0.0); /* through a view: the same storage */
    lb_tensor_free(view);
    CU_ASSERT_EQUAL(lb_backward(g, loss, NULL), LB_ERR_STATE);
    CU_ASSERT_TRUE(lb_test_error_has("backward of matmul"));
    CU_ASSERT_TRUE(lb_test_error_has("its input 1"));
    CU_ASSERT_TRUE(lb_test_error_has("float32[3, 4]"));
    lb_graph_free(g);
}

static void test_optimizer_step_between_forward_and_backward(void)
{
    int64_t shape[2] = {3, 3};
    lb_var *w = lb_test_random_param(2, shape, 4, "w");
    lb_optim_config cfg = lb_optim_defaults(LB_OPTIM_SGD);
    lb_optim *opt = lb_optim_new(&cfg, &w, 1);
    CU_ASSERT_PTR_NOT_NULL_FATAL(opt);
    lb_graph *g = lb_graph_new();
    lb_var *x = lb_input(g, lb_test_random_tensor(LB_FLOAT64, 2, shape, 5), 0);
    lb_var *loss = lb_sum(g, lb_matmul(g, x, w));
    CU_ASSERT_EQUAL(lb_backward(g, loss, NULL), LB_OK);
    uint64_t before = lb_tensor_version(w->value);
    CU_ASSERT_EQUAL(lb_optim_step(opt), LB_OK);
    CU_ASSERT_EQUAL(lb_tensor_version(w->value), before + 1);
    /* A forward, then a step, then backward of that forward: refused. */
    lb_graph_reset(g);
    lb_optim_zero_grad(opt);
    x = lb_input(g, lb_test_random_tensor(LB_FLOAT64, 2, shape, 5), 0);
    loss = lb_sum(g, lb_matmul(g, x, w));
    lb_var *other = lb_input(g, lb_test_random_tensor(LB_FLOAT64, 2, shape, 6), 0);
    w->grad = lb_tensor_zeros_like(w->value); /* a gradient from elsewhere makes the step move w */
    lb_tensor_fill(w->grad, 1.0);
    CU_ASSERT_EQUAL(lb_optim_step(opt), LB_OK);
    lb_optim_zero_grad(opt);
    CU_ASSERT_EQUAL(lb_backward(g, loss, NULL), LB_ERR_STATE);
    CU_ASSERT_TRUE(lb_test_error_has("backward of matmul"));
    CU_ASSERT_TRUE(lb_test_error_has("its input 1"));
    (void)other;
    lb_graph_free(g);
    lb_optim_free(opt);
    lb_param_free(w);
}

int main(void)
{
    static const lb_test_case cases[] = {
        {"set, fill, copy_into and views count in-place writes", test_counter_counts_in_place_writes},
        {"backward refuses an op whose output was modified, naming it", test_backward_refuses_modified_output},
        {"backward refuses an op whose input was modified through a view", test_backward_refuses_modified_input},
        {"an optimizer step between forward and backward is refused", test_optimizer_step_between_forward_and_backward},
        {NULL, NULL},
    };
    return lb_test_main("autograd_versions", cases);
}

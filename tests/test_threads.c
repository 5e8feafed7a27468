/* Thread-count independence of a whole training step: the elementwise kernels,
 * LayerNorm, copies, gradient accumulation and the fused attention split their work
 * so that 1 and 2 threads give the same bits. (OpenBLAS itself does not promise this:
 * its threaded sgemm rounds some of the step's products differently, so the matrix
 * products run on one thread here.) */
#include <cblas.h>
#include <stdlib.h>
#include <string.h>

#include "autograd/autograd.h"
#include "autograd/ops.h"
#include "layers/model.h"
#include "optim/optim.h"
#include "tensor/threads.h"
#include "support.h"

enum { B = 4, T = 192, V = 11 };

/* Two AdamW steps of a 2-layer transformer (LayerNorm, GELU, residuals, 4 heads, a
 * head on every position) from the same seed; returns the parameters, concatenated. */
static float *train_two_steps(int threads, int64_t *n_out)
{
    lb_set_num_threads(threads);
    openblas_set_num_threads(1); /* OpenBLAS rounds some products differently with 2 threads */
    lb_model_config cfg;
    lb_model_config_default(LB_MODEL_TRANSFORMER, &cfg);
    cfg.vocab_size = V;
    cfg.num_classes = V;
    cfg.head = LB_HEAD_EVERY;
    cfg.max_seq_len = T;
    cfg.n_layers = 2;
    cfg.d_model = 96; /* B*T*d_model elements: above the size where loops split */
    cfg.n_heads = 4;
    cfg.d_ff = 192;
    cfg.causal = 1;
    cfg.dropout = 0.0;
    cfg.seed = 5;
    lb_model *m = lb_model_new(&cfg);
    CU_ASSERT_PTR_NOT_NULL_FATAL(m);
    int32_t tokens[B * T], targets[B * T];
    for (int i = 0; i < B * T; i++) {
        tokens[i] = (int32_t)((i * 7 + i / 13) % V);
        targets[i] = (int32_t)((i * 5 + 3) % V);
    }
    lb_model_input in = {B, T, tokens, NULL, NULL};
    lb_params *ps = lb_model_params(m);
    lb_optim_config oc = lb_optim_defaults(LB_OPTIM_ADAMW);
    lb_optim *opt = lb_optim_new(&oc, ps->items, ps->count);
    lb_graph *g = lb_graph_new();
    for (int step = 0; step < 2; step++) {
        lb_var *logits = lb_model_forward(g, m, &in, 1, NULL, NULL);
        lb_var *loss = lb_cross_entropy(g, logits, targets, -100);
        CU_ASSERT_PTR_NOT_NULL_FATAL(loss);
        CU_ASSERT_EQUAL(lb_backward(g, loss, NULL), LB_OK);
        CU_ASSERT_EQUAL(lb_optim_step(opt), LB_OK);
        lb_optim_zero_grad(opt);
        lb_graph_reset(g);
    }
    int64_t n = lb_params_numel(ps), at = 0;
    float *all = malloc((size_t)n * sizeof *all);
    for (int i = 0; i < ps->count; i++) {
        const lb_tensor *v = ps->items[i]->value;
        int64_t k = lb_tensor_numel(v);
        memcpy(all + at, lb_tensor_data(v), (size_t)k * sizeof *all);
        at += k;
    }
    *n_out = n;
    lb_graph_free(g);
    lb_optim_free(opt);
    lb_model_free(m);
    return all;
}

static void test_transformer_step_same_bits(void)
{
    int before = lb_get_num_threads();
    int64_t n1 = 0, n2 = 0, n2b = 0;
    float *two = train_two_steps(2, &n2);
    float *two_again = train_two_steps(2, &n2b);
    float *one = train_two_steps(1, &n1);
    CU_ASSERT_EQUAL_FATAL(n1, n2);
    CU_ASSERT_EQUAL_FATAL(n2, n2b);
    CU_ASSERT_TRUE(n1 > 100000);
    CU_ASSERT_EQUAL(memcmp(one, two, (size_t)n1 * sizeof *one), 0);
    CU_ASSERT_EQUAL(memcmp(two, two_again, (size_t)n1 * sizeof *one), 0);
    free(one);
    free(two);
    free(two_again);
    lb_set_num_threads(before);
}

/* Loops split only when there is enough work for each thread. */
static void test_threads_for(void)
{
    int before = lb_get_num_threads();
    lb_set_num_threads(2);
    CU_ASSERT_EQUAL(lb_threads_for(10, 100), 1);
    CU_ASSERT_EQUAL(lb_threads_for(150, 100), 1);
    CU_ASSERT_EQUAL(lb_threads_for(200, 100), 2);
    CU_ASSERT_EQUAL(lb_threads_for(1 << 30, 100), 2);
    lb_set_num_threads(1);
    CU_ASSERT_EQUAL(lb_threads_for(1 << 30, 100), 1);
    lb_set_num_threads(before);
}

int main(void)
{
    const lb_test_case cases[] = {
        {"lb_threads_for splits only large loops", test_threads_for},
        {"a transformer training step: 1 and 2 threads, same bits", test_transformer_step_same_bits},
        {NULL, NULL},
    };
    return lb_test_main("threads", cases);
}

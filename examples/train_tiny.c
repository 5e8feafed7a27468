/* Train a tiny attention model from C with the installed lookback library.
 *
 *   cc train_tiny.c $(pkg-config --cflags --libs lookback) -o train_tiny && ./train_tiny
 *
 * It generates a small `spike` task (the alarm must recall a sensor's reading from
 * up to 40 events back), builds a one-block transformer, trains it with AdamW, and
 * reports validation accuracy. It then checks the gradient of a small float64 model
 * numerically, as a user would after changing a layer. */
#include <stdio.h>

#include "lookback.h"

static lb_var *loss_fn(lb_graph *g, lb_var *const *leaves, void *user)
{
    /* A single-head attention score softmax over a leaf matrix, reduced to a scalar. */
    lb_attn_mask mask = {.causal = 1};
    (void)user;
    lb_var *scores = lb_matmul_t(g, leaves[0], 0, leaves[1], 1); /* [3, 4] @ [5, 4]^T -> [3, 5] */
    return lb_sum(g, lb_mul(g, lb_masked_softmax(g, scores, &mask, 0.5), scores));
}

int main(void)
{
    const char *path = "tiny_spike.h5";
    lb_task_options task;
    lb_task_options_default(LB_TASK_SPIKE, &task);
    task.seq_len = 48;
    task.min_distance = 1;
    task.max_distance = 40;
    task.n_train = 2000;
    task.n_val = 200;
    task.n_test = 0;
    if (lb_task_generate(&task, path, NULL, NULL) != LB_OK) {
        fprintf(stderr, "generate: %s\n", lb_last_error());
        return 1;
    }
    lb_dataset *data = lb_dataset_open(path);
    if (!data) {
        fprintf(stderr, "open: %s\n", lb_last_error());
        return 1;
    }
    lb_model_config mc;
    lb_model_config_default(LB_MODEL_TRANSFORMER, &mc);
    mc.vocab_size = lb_dataset_vocab_size(data);
    mc.num_classes = lb_dataset_num_classes(data);
    mc.n_layers = 1;
    mc.d_model = 32;
    mc.n_heads = 2;
    lb_model *model = lb_model_new(&mc);
    lb_train_config tc;
    lb_train_config_default(&tc);
    tc.steps = 300;
    tc.optim.lr = 3e-3;
    lb_trainer *trainer = model ? lb_trainer_new(model, data, &tc) : NULL;
    if (!trainer || lb_trainer_run(trainer, NULL, NULL, NULL, NULL) != LB_OK) {
        fprintf(stderr, "train: %s\n", lb_last_error());
        return 1;
    }
    lb_eval_result r;
    if (lb_evaluate(model, data, "val", 0, 32, 0, &r, NULL) != LB_OK) {
        fprintf(stderr, "eval: %s\n", lb_last_error());
        return 1;
    }
    printf("%lld parameters, %lld steps: validation accuracy %.3f (chance %.3f)\n",
           (long long)lb_params_numel(lb_model_params(model)), (long long)lb_trainer_steps_done(trainer), r.accuracy,
           1.0 / (double)mc.num_classes);

    /* Numerical gradient check of a small float64 function of two leaves. */
    lb_rng rng;
    lb_rng_seed(&rng, 7);
    int64_t qs[2] = {3, 4}, ks[2] = {5, 4};
    lb_var *leaves[2] = {lb_param_new(lb_tensor_zeros(LB_FLOAT64, 2, qs), "query"),
                         lb_param_new(lb_tensor_zeros(LB_FLOAT64, 2, ks), "key")};
    lb_rng_fill_normal(&rng, leaves[0]->value, 0, 1);
    lb_rng_fill_normal(&rng, leaves[1]->value, 0, 1);
    lb_gradcheck_leaf report[2];
    lb_status st = lb_gradcheck(loss_fn, NULL, 2, leaves, NULL, report);
    lb_gradcheck_print(stdout, 2, leaves, report);
    lb_param_free(leaves[0]);
    lb_param_free(leaves[1]);
    lb_trainer_free(trainer);
    lb_model_free(model);
    lb_dataset_close(data);
    remove(path);
    return st == LB_OK && r.accuracy > 0.5 ? 0 : 1;
}

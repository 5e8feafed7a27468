/* Train a tiny attention model from C with the installed lookback library.
 *
 *   cc train_tiny.c $(pkg-config --cflags --libs lookback) -o train_tiny && ./train_tiny
 *
 * It makes its data in memory (no data file): sequences of ordinary symbols with one
 * marked symbol somewhere, whose identity is the label, so the model must find it
 * wherever it is. It builds a one-block transformer on those arrays
 * (lb_dataset_from_arrays), trains it with AdamW, and reports validation accuracy. It
 * then checks the gradient of a small float64 model numerically, as a user would after
 * changing a layer. */
#include <stdio.h>
#include <stdlib.h>

#include "lookback.h"

enum {
    T = 32,        /* seq_len */
    ORDINARY = 4,  /* ordinary symbols: tokens 1 .. 4 */
    MARKED = 8,    /* marked symbols: tokens 5 .. 12, one per sequence; the class is which */
    N_TRAIN = 2000,
    N_VAL = 200
};

/* n sequences of T tokens into tokens [n, T] and their classes into targets [n]. */
static void make_split(lb_rng *rng, int64_t n, int32_t *tokens, int32_t *targets)
{
    for (int64_t i = 0; i < n; i++) {
        for (int t = 0; t < T; t++)
            tokens[i * T + t] = 1 + (int32_t)lb_rng_below(rng, ORDINARY);
        int32_t cls = (int32_t)lb_rng_below(rng, MARKED);
        tokens[i * T + lb_rng_below(rng, T)] = 1 + ORDINARY + cls;
        targets[i] = cls;
    }
}

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
    lb_rng rng;
    lb_rng_seed(&rng, 7);
    int32_t *tokens = malloc(sizeof(int32_t) * (N_TRAIN + N_VAL) * T);
    int32_t *targets = malloc(sizeof(int32_t) * (N_TRAIN + N_VAL));
    if (!tokens || !targets)
        return 1;
    make_split(&rng, N_TRAIN, tokens, targets);
    make_split(&rng, N_VAL, tokens + N_TRAIN * T, targets + N_TRAIN);
    lb_array_data arrays = {.seq_len = T, .vocab_size = 1 + ORDINARY + MARKED, .num_classes = MARKED,
                            .train = {N_TRAIN, tokens, NULL, targets},
                            .val = {N_VAL, tokens + N_TRAIN * T, NULL, targets + N_TRAIN}};
    lb_dataset *data = lb_dataset_from_arrays(&arrays, "marked symbols");
    free(tokens); /* the dataset holds copies */
    free(targets);
    if (!data) {
        fprintf(stderr, "data: %s\n", lb_last_error());
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
    return st == LB_OK && r.accuracy > 0.5 ? 0 : 1;
}

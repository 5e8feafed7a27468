/* The study's recipes: how each method is trained on each task (one table, one row per
 * (task, method)), and the training data of each task. Shared by lookback study
 * (lab/study.c) and the product-path benchmark (bench/bench_product.c), so that the
 * benchmark times exactly the models the study trains. */
#ifndef LB_LAB_RECIPES_H
#define LB_LAB_RECIPES_H

#include <stddef.h>
#include <stdint.h>

#include "data/tasks.h"
#include "layers/model.h"
#include "tensor/api.h"

LB_API_BEGIN

enum { LB_RECIPE_MAX_LRS = 4 };

typedef enum lb_recipe_task { LB_RECIPE_T_SPIKE16 = 0, LB_RECIPE_T_RECALL, LB_RECIPE_T_LOCAL, LB_RECIPE_T_PARITY, LB_RECIPE_T_COPY, LB_RECIPE_T_MODSUM, LB_RECIPE_T_COUNT } lb_recipe_task;
typedef enum lb_recipe_method { LB_RECIPE_M_TRANSFORMER = 0, LB_RECIPE_M_LOCAL, LB_RECIPE_M_LSTM, LB_RECIPE_M_CONV, LB_RECIPE_M_SSMAX, LB_RECIPE_M_MIXED, LB_RECIPE_M_LOGN, LB_RECIPE_M_LINEAR, LB_RECIPE_M_MAMBA, LB_RECIPE_M_COUNT } lb_recipe_method;

extern const char *const lb_recipe_task_names[LB_RECIPE_T_COUNT];   /* "spike16", "recall", ... */
extern const char *const lb_recipe_method_names[LB_RECIPE_M_COUNT]; /* "transformer", "local", ... */

/* How a method is trained on a task. Every (task, method) the study runs has exactly one
 * row (checked when a study is planned); adding a task or a method is adding rows. */
typedef struct lb_recipe {
    lb_recipe_task task;
    lb_recipe_method method;
    int layers;         /* attention blocks, LSTM layers; conv: 0 = enough for the receptive field */
    int width;          /* d_model; the LSTM's hidden size */
    int window;         /* local attention: keys per query */
    int kernel;         /* conv */
    lb_pos_kind pos;    /* attention */
    lb_length_scale scale;
    int mixed;          /* trained on spike16's mixed-length file (64..256) */
    int batch;
    double weight_decay;
    double lrs[LB_RECIPE_MAX_LRS]; /* candidates (0 ends the list); the first is the default: --quick and a
                            probe that cannot rank them use it */
    const char *source;
} lb_recipe;

extern const lb_recipe lb_recipes[];
extern const int lb_recipes_count;

/* The row of (t, m); NULL when there is none. */
const lb_recipe *lb_recipe_of(lb_recipe_task t, lb_recipe_method m);

/* The training file of task t (n_train, n_val, seed and n_test left to the caller):
 * the generator's options as the study makes it; `quick` shortens copy memory to
 * T = 200, `zoology` sets recall to Arora et al.'s scale (T 512, 64 pairs, 8,192
 * symbols). */
void lb_recipe_task_data(lb_recipe_task t, int quick, int zoology, lb_task_options *o);

/* Makes spike16's training options o the "mixed" method's file: lengths drawn from
 * [64, 256] with the clue within the shortest length (the caller sets the seed). */
void lb_recipe_mixed_lengths(lb_task_options *o);

/* The model family method m trains (transformer for ssmax, mixed and logn);
 * LB_MODEL_KIND_COUNT (no family) with LB_ERR_VALUE for a value that is not a method. */
lb_model_kind lb_recipe_method_kind(lb_recipe_method m);

/* The model of a recipe row, trained on sequences of train_len events (the conv's depth
 * is sized to it when the row leaves it at 0): kind, widths, positions and the rest of
 * lb_model_config (the data-derived fields are left to the trainer), and one line saying
 * what it is in text. */
void lb_recipe_model(const lb_recipe *row, int64_t train_len, lb_model_config *mc, char *text, size_t size);

LB_API_END

#endif

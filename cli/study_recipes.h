/* The study's recipes: how each method is trained on each task (one table, one row per
 * (task, method)), and the training data of each task. Shared by lookback study
 * (cli/study.c) and the product-path benchmark (bench/bench_product.c), so that the
 * benchmark times exactly the models the study trains. */
#ifndef LB_CLI_STUDY_RECIPES_H
#define LB_CLI_STUDY_RECIPES_H

#include <stddef.h>
#include <stdint.h>

#include "data/tasks.h"
#include "layers/model.h"

enum { MAX_LRS = 4 };

typedef enum task_id { T_SPIKE16 = 0, T_RECALL, T_LOCAL, T_PARITY, T_COPY, T_MODSUM, T_COUNT } task_id;
typedef enum method_id { M_TRANSFORMER = 0, M_LOCAL, M_LSTM, M_CONV, M_SSMAX, M_MIXED, M_LOGN, M_COUNT } method_id;

extern const char *const task_names[T_COUNT];   /* "spike16", "recall", ... */
extern const char *const method_names[M_COUNT]; /* "transformer", "local", ... */

/* How a method is trained on a task. Every (task, method) the study runs has exactly one
 * row (checked when a study is planned); adding a task or a method is adding rows. */
typedef struct recipe_row {
    task_id task;
    method_id method;
    int layers;         /* attention blocks, LSTM layers; conv: 0 = enough for the receptive field */
    int width;          /* d_model; the LSTM's hidden size */
    int window;         /* local attention: keys per query */
    int kernel;         /* conv */
    lb_pos_kind pos;    /* attention */
    lb_length_scale scale;
    int mixed;          /* trained on spike16's mixed-length file (64..256) */
    int batch;
    double weight_decay;
    double lrs[MAX_LRS]; /* candidates (0 ends the list); the first is the default: --quick and a
                            probe that cannot rank them use it */
    const char *source;
} recipe_row;

extern const recipe_row study_recipes[];
extern const int study_n_recipes;

/* The row of (t, m); NULL when there is none. */
const recipe_row *recipe_of(task_id t, method_id m);

/* The training file of task t (n_train, n_val, seed and n_test left to the caller):
 * the generator's options as the study makes it; `quick` shortens copy memory to
 * T = 200, `zoology` sets recall to Arora et al.'s scale (T 512, 64 pairs, 8,192
 * symbols). */
void study_task_data(task_id t, int quick, int zoology, lb_task_options *o);

/* Makes spike16's training options o the "mixed" method's file: lengths drawn from
 * [64, 256] with the clue within the shortest length (the caller sets the seed). */
void study_mixed_lengths(lb_task_options *o);

/* The model of a recipe row, trained on sequences of train_len events (the conv's depth
 * is sized to it when the row leaves it at 0): kind, widths, positions and the rest of
 * lb_model_config (the data-derived fields are left to the trainer), and one line saying
 * what it is in text. */
void study_recipe_model(const recipe_row *row, int64_t train_len, lb_model_config *mc, char *text, size_t size);

#endif

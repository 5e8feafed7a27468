/* Looking inside a trained attention model: where each head looks on one example
 * (`lookback attention`, docs/inspect.md).
 *
 * Named dims: L the model's layers, H heads, T the example's positions, Q the queries
 * drawn, K the keys listed per query.
 */
#ifndef LB_LAB_INSPECT_H
#define LB_LAB_INSPECT_H

#include <stdint.h>

#include "tensor/api.h"
#include "tensor/error.h"

LB_API_BEGIN

enum { LB_INSPECT_MAX_CHOSEN = 64, LB_INSPECT_ALL_QUERIES = 256 };

/* What to look at. Lists of 0 entries mean "all" (queries: every query when
 * T <= LB_INSPECT_ALL_QUERIES, else the last one: the query a sequence classifier reads). */
typedef struct lb_inspect_options {
    const char *checkpoint;  /* a checkpoint of an attention family (layers/family.h `attention`) */
    const char *data;        /* a task file or text corpus the model reads */
    const char *split;       /* "train", "val" or "test" (NULL = "test") */
    int64_t example;         /* the example's index in the split, >= 0 */
    int n_layers, n_heads, n_queries;
    int layers[LB_INSPECT_MAX_CHOSEN];      /* layer indices in [0, L) */
    int heads[LB_INSPECT_MAX_CHOSEN];       /* head indices in [0, H) */
    int64_t queries[LB_INSPECT_MAX_CHOSEN]; /* query positions in [0, T) */
    int top_k;               /* keys listed per query (0 = 5) */
    const char *out_dir;     /* made here: it must not exist */
} lb_inspect_options;

/* What was written. */
typedef struct lb_inspect_result {
    int layers, heads;       /* drawn */
    int64_t seq_len, queries;
    int plots;               /* heatmap files written (PNG and SVG count apart) */
    char model[32];          /* the family */
} lb_inspect_result;

/* Runs the checkpoint's model on example o->example of o->split of o->data (no dropout,
 * every position a query) and writes into the new folder o->out_dir:
 *   attention.h5   every chosen layer's weights in bertviz's layout, "attention" float32
 *                  [L_chosen, 1, H, T, T], "layers", "tokens" (data/results.h,
 *                  lb_attention_layers_write): all heads, all queries;
 *   layer<l>_head<h>.png and .svg   per chosen layer and head, the chosen queries'
 *                  weights [Q, T] as a heatmap (lab/plot.h lb_plot_attention_matrix);
 *   top_keys.txt   per chosen layer, head and query the top_k keys with their weights
 *                  and distance back (query - key).
 * Errors (LB_ERR_VALUE, one line): a family without attention (naming those with it), a
 * layer, head or query out of range, an example past the split, an existing out_dir;
 * the checkpoint's, the data's, the plots' and the file's own errors. A failure leaves no
 * folder behind. */
lb_status lb_inspect_attention(const lb_inspect_options *o, lb_inspect_result *out);

LB_API_END

#endif

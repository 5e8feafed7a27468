/* The model's parts, shared by layers/model.c (training-time forward) and
 * layers/stream.c (decoding). Internal to layers/. */
#ifndef LB_LAYERS_MODEL_INTERNAL_H
#define LB_LAYERS_MODEL_INTERNAL_H

#include "layers/conv.h"
#include "layers/linear.h"
#include "layers/lstm.h"
#include "layers/model.h"
#include "layers/positional.h"
#include "layers/transformer.h"

struct lb_model {
    lb_model_config cfg;
    lb_params params;
    lb_var *embedding; /* token inputs: [V, D] */
    lb_linear input;   /* feature inputs: [F, D] + [D] */
    lb_positional pos; /* transformer and local */
    lb_transformer transformer;
    lb_lstm lstm;
    lb_conv1d *conv;   /* n_layers causal convolutions D -> D, dilation 2^i */
    lb_linear head;    /* [body width, C or 1] + [C or 1]; with tie_embeddings weight is NULL
                          (the embedding serves) and bias may be NULL (bias 0) */
};

/* Transformer or local attention. */
int lb_model_kind_is_attention(lb_model_kind kind);
/* Checks tokens / features and lengths of `in` against the config (lengths in [1, T]). */
lb_status lb_model_check_input(const lb_model *m, const lb_model_input *in);
/* The embedded input [B, T, D] (token embedding or the input projection). */
lb_var *lb_model_embed(lb_graph *g, const lb_model *m, const lb_model_input *in);
/* The head on the body's output h [..., width] -> [..., C or 1]: the head's linear
 * layer, or with tie_embeddings h @ embedding^T (+ the head's bias when it has one). */
lb_var *lb_model_head(lb_graph *g, const lb_model *m, lb_var *h);
/* The same on raw rows h [n, width] of the model dtype into out [n, C or 1] (decoding). */
void lb_model_head_rows(const lb_model *m, int64_t n, const void *h, void *out);
/* One residual conv layer given its convolution y = conv_i(x): x + GELU(y). */
lb_var *lb_model_conv_residual(lb_graph *g, lb_var *x, lb_var *y);

#endif

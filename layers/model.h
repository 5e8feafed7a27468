/* Sequence models: input -> body -> head, built from a small config so the trainer
 * can create any family by name.
 *
 *   input: token ids int32 [B, T] through an embedding (vocab_size > 0), or real
 *          features [B, T, F] through a linear layer (input_features > 0);
 *   body:  a transformer stack (full or local attention), an LSTM, or a stack of
 *          causal dilated 1-D convolutions;
 *   head:  a linear layer reading the last valid position of each sequence
 *          (LB_HEAD_LAST -> [B, C]) or every position (LB_HEAD_EVERY -> [B, T, C]).
 *          With num_classes == 0 the head is regression: [B] or [B, T].
 */
#ifndef LB_MODEL_H
#define LB_MODEL_H

#include "tensor/api.h"

#include "autograd/ops.h"
#include "layers/attention.h"
#include "layers/params.h"
#include "layers/positional.h" /* lb_pos_kind */

LB_API_BEGIN

typedef enum lb_model_kind {
    LB_MODEL_TRANSFORMER = 0, /* pre-norm transformer blocks, full (causal) attention */
    LB_MODEL_LOCAL,           /* the same with sliding-window attention of `window` keys */
    LB_MODEL_LSTM,            /* torch.nn.LSTM-compatible stack */
    LB_MODEL_CONV             /* causal dilated 1-D convolutions */
} lb_model_kind;

typedef enum lb_head_kind { LB_HEAD_LAST = 0, LB_HEAD_EVERY } lb_head_kind;

typedef struct lb_model_config {
    lb_model_kind kind;
    lb_dtype dtype;           /* float32 for training, float64 for gradient checks */
    int64_t vocab_size;       /* > 0: token inputs */
    int64_t input_features;   /* > 0 (with vocab_size 0): real-valued inputs */
    int64_t num_classes;      /* > 0: classification logits; 0: regression */
    lb_head_kind head;
    int64_t max_seq_len;      /* longest sequence for learned positions; reference N of length_scale */
    int n_layers;             /* blocks, LSTM layers or conv layers */
    /* transformer and local */
    int64_t d_model;          /* also the embedding width for every family */
    int n_heads;
    int64_t d_ff;
    lb_pos_kind pos;
    int64_t window;           /* LB_MODEL_LOCAL: keys each query sees */
    int causal;               /* attention masks future positions */
    lb_length_scale length_scale; /* logits times ln(keys seen) / ln(max_seq_len), or x s learned per head
                                     (layers/attention.h) */
    double dropout;
    /* lstm */
    int64_t hidden_size;
    double forget_bias;       /* added to the forget-gate biases at init (0 = PyTorch init) */
    /* conv */
    int64_t kernel_size;      /* dilation doubles per layer: 1, 2, 4, ... */
    uint64_t seed;            /* parameter initialisation */
} lb_model_config;

/* Defaults for a family (small sizes suitable for the synthetic tasks). */
void lb_model_config_default(lb_model_kind kind, lb_model_config *cfg);
/* "transformer", "local", "lstm", "conv" <-> kind. Parse errors name the word. */
lb_status lb_model_kind_parse(const char *name, lb_model_kind *kind);
const char *lb_model_kind_name(lb_model_kind kind);

typedef struct lb_model lb_model;

/* One batch of model input. */
typedef struct lb_model_input {
    int64_t batch, seq_len;    /* B, T */
    const int32_t *tokens;     /* [B, T] ids in [0, vocab_size) when vocab_size > 0 */
    const lb_tensor *features; /* [B, T, F] in the model dtype when input_features > 0 */
    const int32_t *lengths;    /* [B] valid lengths in [1, T] (padding after), or NULL = all T */
} lb_model_input;

/* Builds and initialises a model. NULL with a message naming the field when the
 * config is invalid (e.g. d_model not divisible by n_heads, window < 1). */
lb_model *lb_model_new(const lb_model_config *cfg);
void lb_model_free(lb_model *m);
const lb_model_config *lb_model_get_config(const lb_model *m);
/* The model's parameters, in a stable order with stable names. */
lb_params *lb_model_params(lb_model *m);

/* Forward pass on graph g:
 *   LB_HEAD_LAST:  logits [B, C] (regression: [B]) read at position lengths[b] - 1;
 *   LB_HEAD_EVERY: logits [B, T, C] (regression: [B, T]).
 * training enables dropout (drawn from rng; rng may be NULL when dropout is 0).
 * attention_out, when non-NULL, receives a new tensor (caller frees) with the last
 * attention layer's weights [B, n_heads, Tq, T] (Tq = 1 when only the last position
 * is read), or NULL for families without attention.
 * Errors: inputs that do not match the config (missing tokens, ids out of range,
 * wrong feature width, T > max_seq_len with learned positions). */
lb_var *lb_model_forward(lb_graph *g, lb_model *m, const lb_model_input *in, int training, lb_rng *rng,
                         lb_tensor **attention_out);

LB_API_END

#endif

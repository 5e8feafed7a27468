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

#include <stddef.h>
#include <stdint.h>
#include "tensor/api.h"

#include "autograd/ops.h"
#include "layers/attention.h"
#include "layers/ffn.h"
#include "layers/norm.h"
#include "layers/params.h"
#include "layers/positional.h" /* lb_pos_kind */

LB_API_BEGIN

typedef enum lb_model_kind {
    LB_MODEL_TRANSFORMER = 0, /* pre-norm transformer blocks, full (causal) attention */
    LB_MODEL_LOCAL,           /* the same with sliding-window attention of `window` keys */
    LB_MODEL_LSTM,            /* torch.nn.LSTM-compatible stack */
    LB_MODEL_CONV,            /* causal dilated 1-D convolutions */
    LB_MODEL_LINEAR,          /* pre-norm blocks with causal linear attention */
    LB_MODEL_MAMBA,           /* selective state-space blocks (Gu & Dao 2023) */
    LB_MODEL_KIND_COUNT       /* the number of families (layers/family.h has their table) */
} lb_model_kind;

typedef enum lb_head_kind { LB_HEAD_LAST = 0, LB_HEAD_EVERY } lb_head_kind;

/* Initialisation of an attention model's parameters (the `init` field).
 * LB_INIT_DEFAULT: each layer's own (Xavier uniform projections, N(0, 1) embeddings and
 *   position table, zero biases, LayerNorm 1 / 0).
 * LB_INIT_GPT2: GPT-2's (Radford et al. 2019; nanoGPT's GPT._init_weights): every weight
 *   matrix, the token embedding and the position table N(0, 0.02^2); the residual
 *   output projections (attn.w_o and ffn.fc2.weight of each block) N(0, (0.02 /
 *   sqrt(2 n_layers))^2); biases 0; LayerNorm weights 1, biases 0. */
typedef enum lb_init_scheme { LB_INIT_DEFAULT = 0, LB_INIT_GPT2 } lb_init_scheme;
/* "default" / "gpt2" <-> scheme; parse errors (LB_ERR_VALUE) name the word. */
lb_status lb_init_scheme_parse(const char *name, lb_init_scheme *out);
const char *lb_init_scheme_name(lb_init_scheme s);

/* Bits for the families that use a configuration field. */
enum {
    LB_FAMILY_TRANSFORMER = 1 << LB_MODEL_TRANSFORMER,
    LB_FAMILY_LOCAL = 1 << LB_MODEL_LOCAL,
    LB_FAMILY_LSTM = 1 << LB_MODEL_LSTM,
    LB_FAMILY_CONV = 1 << LB_MODEL_CONV,
    LB_FAMILY_LINEAR = 1 << LB_MODEL_LINEAR,
    LB_FAMILY_MAMBA = 1 << LB_MODEL_MAMBA,
    LB_FAMILY_ATTENTION = LB_FAMILY_TRANSFORMER | LB_FAMILY_LOCAL,
    LB_FAMILY_ALL = (1 << LB_MODEL_KIND_COUNT) - 1
};
/* Field flags (layers/model_fields.def). */
enum { LB_FIELD_INIT = 1 };

/* The type of a configuration field, and the C type of its member. */
typedef enum lb_field_type {
    LB_FIELD_INT64, LB_FIELD_INT, LB_FIELD_REAL, LB_FIELD_U64, LB_FIELD_KIND, LB_FIELD_POS, LB_FIELD_HEAD,
    LB_FIELD_DTYPE, LB_FIELD_SCALE, LB_FIELD_INITIALIZER, LB_FIELD_NORM, LB_FIELD_NORM_POSITION, LB_FIELD_FFN
} lb_field_type;
#define LB_FIELD_CTYPE_INT64 int64_t
#define LB_FIELD_CTYPE_INT int
#define LB_FIELD_CTYPE_REAL double
#define LB_FIELD_CTYPE_U64 uint64_t
#define LB_FIELD_CTYPE_KIND lb_model_kind
#define LB_FIELD_CTYPE_POS lb_pos_kind
#define LB_FIELD_CTYPE_HEAD lb_head_kind
#define LB_FIELD_CTYPE_DTYPE lb_dtype
#define LB_FIELD_CTYPE_SCALE lb_length_scale
#define LB_FIELD_CTYPE_INITIALIZER lb_init_scheme
#define LB_FIELD_CTYPE_NORM lb_norm_kind
#define LB_FIELD_CTYPE_NORM_POSITION lb_norm_position
#define LB_FIELD_CTYPE_FFN lb_ffn_kind

/* A model's configuration: one member per row of layers/model_fields.def, which
 * documents each (kind, dtype, vocab_size, input_features, num_classes, head,
 * max_seq_len, n_layers, d_model, n_heads, n_kv_heads, d_ff, pos, window, causal,
 * length_scale, dropout, bias, norm, norm_position, ffn, tie_embeddings, init, hidden_size,
 * forget_bias, kernel_size, d_state, d_conv, expand, dt_rank, seed, in that order). Start from
 * lb_model_config_default and set what differs. */
typedef struct lb_model_config {
#define LB_MODEL_FIELD(member, option, type, families, when, def, min, max, flags, help) LB_FIELD_CTYPE_##type member;
#include "layers/model_fields.def"
#undef LB_MODEL_FIELD
} lb_model_config;

/* One row of the field list, as data: what parsing, --help, JSON, checkpoints and
 * validation read. */
typedef struct lb_model_field {
    const char *member;  /* C member and checkpoint attribute "model.<member>" */
    const char *option;  /* option name ("d-model"), NULL when the program sets the field */
    lb_field_type type;
    unsigned families;   /* LB_FAMILY_* bits of the families that use it */
    double min, max;     /* accepted range of a number */
    unsigned flags;      /* LB_FIELD_INIT */
    const char *help;
    size_t offset;       /* of the member in lb_model_config */
} lb_model_field;

/* The field list in order; *count receives its length. */
const lb_model_field *lb_model_fields(int *count);
/* The field with this option name ("d-model") or, failing that, member name
 * ("d_model"); NULL when there is none. */
const lb_model_field *lb_model_field_find(const char *name);
/* 1 when family `kind` uses the field at all (its families bit). */
int lb_model_field_in_family(const lb_model_field *f, lb_model_kind kind);
/* 1 when the model `cfg` uses the field: its family does and the field's condition
 * holds (max_seq_len only with learned positions or log-n length scaling). */
int lb_model_field_applies(const lb_model_field *f, const lb_model_config *cfg);
/* Sets a field from text: a whole number or decimal in [min, max], or the name of an
 * enum value ("rotary", "every", "float64", "lstm", "log-n", "rmsnorm", "post", "swiglu"). Setting "kind" does not reset the
 * other fields. Errors: LB_ERR_VALUE naming the option as "--<option>" (or the member)
 * and the accepted range. Nothing is changed on error. */
lb_status lb_model_field_set(lb_model_config *cfg, const lb_model_field *f, const char *text);
/* The field's value as text ("64", "0.1", "rotary") into buf; returns buf. Reals use
 * the shortest text that reads back to the same double. */
char *lb_model_field_format(const lb_model_config *cfg, const lb_model_field *f, char *buf, size_t size);
/* The field's value as a double (enums as their index); for range checks and JSON. */
double lb_model_field_number(const lb_model_config *cfg, const lb_model_field *f);
/* LB_OK when every field that cfg uses is inside its range; else LB_ERR_VALUE naming
 * the field, its value, the range and the family. */
lb_status lb_model_config_check_ranges(const lb_model_config *cfg);

/* The key/value heads of an attention model's layers: n_kv_heads, or n_heads when it
 * is 0 (the default: multi-head attention). */
int lb_model_kv_heads(const lb_model_config *cfg);

/* Defaults for a family (small sizes suitable for the synthetic tasks): each field's
 * default, then the family's own (its row's `defaults`, layers/family.h). */
void lb_model_config_default(lb_model_kind kind, lb_model_config *cfg);
/* A family's name ("transformer", "local", "lstm", "conv", "mamba": the rows of layers/family.h)
 * <-> kind. Parse errors name the word and list the families. */
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
 * config is invalid (e.g. d_model not divisible by n_heads, window < 1, tied embeddings
 * without token inputs, with num_classes != vocab_size or a body width != d_model). */
lb_model *lb_model_new(const lb_model_config *cfg);
void lb_model_free(lb_model *m);
const lb_model_config *lb_model_get_config(const lb_model *m);
/* The model's parameters, in a stable order with stable names. */
lb_params *lb_model_params(lb_model *m);
/* 1 when parameter p is one of the model's lookup tables (the token embedding
 * "embedding.weight", also the head's weight when tie_embeddings, or the learned
 * position table "pos_embedding"), 0 otherwise (and for NULL arguments). Weight-decay
 * rules that exempt embeddings use it (train/trainer.h, lb_decay_params). */
int lb_model_param_is_table(const lb_model *m, const lb_var *p);

/* A lower bound, in bytes, on the memory one training step (forward and backward) of
 * `batch` sequences of `seq_len` positions allocates beyond the parameters: the logits
 * and their gradient (LB_HEAD_EVERY: [B, T, C]; LB_HEAD_LAST: [B, C]; regression C = 1),
 * each layer's output and its gradient ([B, T, d_model], the LSTM's [B, T, hidden_size])
 * and, in attention blocks, the feed-forward hidden layer [B, T, d_ff], in the config's
 * dtype. A step needs more than this (norms, queries, keys, values, gates), never less:
 * a trainer that finds even this beyond the free memory can refuse before the first
 * step. Saturates at INT64_MAX; -1 with LB_ERR_VALUE for a NULL cfg or batch or seq_len
 * below 1. */
int64_t lb_model_step_bytes(const lb_model_config *cfg, int64_t batch, int64_t seq_len);

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

/* Every attention layer's weights for one forward pass of `in` without dropout, every
 * position a query (whatever the head reads): weights[l] (an array of n_layers entries)
 * receives a new tensor [B, n_heads, T, T] in the model's dtype (caller frees), row q
 * the softmax over the keys of query q (bertviz's per-layer [B, H, T, T]; masked keys
 * exactly 0). The same numbers as the weights lb_model_forward gives for its last layer.
 * Errors: LB_ERR_VALUE for NULL arguments and for a model whose family has no attention
 * (the message names the families that have it), the input errors of lb_model_forward,
 * LB_ERR_MEMORY. On error every weights[l] is NULL. */
lb_status lb_model_attention_weights(lb_model *m, const lb_model_input *in, lb_tensor **weights);

LB_API_END

#endif

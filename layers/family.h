/* The model families: one row per family in one table, which everything outside a
 * family's own file consults instead of switching on lb_model_kind.
 *
 * A family is its layers/ file (layers/family_<name>.c: the body's parameters, forward,
 * streaming step and state, state size, and the rules of its configuration) and its
 * row (lb_family). Model building (layers/model.c), streaming (layers/stream.c),
 * generation, the trainer, compare, the study's recipes, gradcheck, the demo and the
 * benchmarks read what they need of a family from its row:
 *
 *   family       file                       body
 *   transformer  layers/family_attention.c  pre-norm transformer blocks, causal attention
 *   local        layers/family_attention.c  the same with sliding-window attention
 *   lstm         layers/family_lstm.c       a torch.nn.LSTM-compatible stack
 *   conv         layers/family_conv.c       residual causal dilated 1-D convolutions
 *   mamba        layers/family_mamba.c      RMSNorm residual blocks of the selective scan (Mamba)
 *
 * Adding a family: its value in lb_model_kind (layers/model.h), its file with its row
 * (its `flops` count included: tests/test_costs.c checks each against a hand count),
 * the row's place in layers/family.c, and the configuration fields it uses
 * (layers/model_fields.def families column).
 *
 * Named dims: L layers, D d_model, H hidden_size, K kernel_size, W window, T events seen.
 */
#ifndef LB_LAYERS_FAMILY_H
#define LB_LAYERS_FAMILY_H

#include <stddef.h>
#include <stdint.h>

#include "tensor/api.h"
#include "layers/model.h"

LB_API_BEGIN

/* The numbers a recipe gives a model of any family (the study's recipe table,
 * lab/recipes.c): depth and width, and the family's own size where it has one. */
typedef struct lb_family_size {
    int layers;        /* blocks / layers; conv: 0 = enough for a receptive field of train_len */
    int64_t width;     /* d_model (attention, conv); the LSTM's hidden_size */
    int64_t window;    /* local attention: keys per query */
    int64_t kernel;    /* conv: kernel size */
    int64_t train_len; /* the training sequences' length */
} lb_family_size;

struct lb_family_ops; /* the body's code, internal to layers/ (layers/model_internal.h) */

/* One model family. Every function takes a configuration of this family. */
typedef struct lb_family {
    lb_model_kind kind;
    const char *name;    /* "transformer": --model's value, checkpoints' model.kind */
    const char *summary; /* one line for --help and docs */
    int attention;       /* 1: the body is attention layers (attention weights to read out, a
                          * key-value cache to bound with --max-context) */
    /* Sets the family's own defaults after the field list's (lb_model_config_default). */
    void (*defaults)(lb_model_config *c);
    /* 1 when the output at a position depends only on that position and earlier ones
     * (what next-token text and streaming need). */
    int (*is_causal)(const lb_model_config *c);
    /* The longest sequence the model reads (the rows of a learned position table), or 0
     * when it reads any length. */
    int64_t (*max_positions)(const lb_model_config *c);
    /* 1 when generation should crop its context to the training length (nanoGPT's
     * block_size): the model was never trained to read further back than that; 0 when its
     * streaming state computes the same function at any length (recurrent state, bounded
     * windows with relative positions). */
    int (*crops_context)(const lb_model_config *c);
    /* The width the head reads: D, or the LSTM's H. */
    int64_t (*body_width)(const lb_model_config *c);
    /* Floats per position and layer that a training step keeps at least (the layer's output,
     * and the feed-forward hidden layer where there is one): lb_model_step_bytes's bound. */
    double (*layer_floats)(const lb_model_config *c);
    /* Floats of decoding state one stream carries after t events (layers/stream.h):
     * transformer 2 L T D, local 2 L min(T, W) D, lstm 2 L H, conv Σ_i (K - 1) 2^i D. */
    double (*state_floats)(const lb_model_config *c, int64_t t);
    /* Sizes c (already at this family's defaults) from a recipe's numbers. */
    void (*size)(lb_model_config *c, const lb_family_size *s);
    /* One line saying what the model is ("2 blocks, d_model 64, 4 heads, rotary positions"). */
    void (*describe)(const lb_model_config *c, char *text, size_t size);
    const struct lb_family_ops *ops;
    /* The body's matrix-product FLOPs (2 per multiply-add) on one sequence of t positions
     * of which the last `read` reach the head (read = t for a head at every position, 1
     * for the last-position head, whose last attention block computes that query only),
     * the attention's query-key and weight-value products (the n² term) included in the
     * total and given apart in *attention. Elementwise work (norms, softmax, activations,
     * positions) is not counted (nanoGPT's estimate_mfu, Kaplan et al. 2020 §2.1).
     * Per layer: attention 8 t D² + 4 t D F, plus 4 D per key each query reads (causal:
     * min(i + 1, W) keys at position i; not causal: t); LSTM 8 t H (in + H); conv
     * 2 t K D²; mamba 2 t Di (3 D + 2 R + 4 N + K), Di = expand D. NULL: the family has no
     * count (lb_model_flops gives NAN). */
    double (*flops)(const lb_model_config *c, int64_t t, int64_t read, double *attention);
} lb_family;

/* The row of family `kind`; NULL (and LB_ERR_VALUE) when kind is not a family. */
const lb_family *lb_family_of(lb_model_kind kind);
/* The row named `name` ("lstm"); NULL when there is none (no error recorded), or for a
 * NULL name (LB_ERR_VALUE). */
const lb_family *lb_family_find(const char *name);
/* Families in table order: i in [0, LB_MODEL_KIND_COUNT); NULL outside. */
const lb_family *lb_family_at(int i);

/* The row's answers for configuration c, 0 when c->kind is not a family (and for a NULL
 * c, with LB_ERR_VALUE):
 * whether its outputs depend only on the past (is_causal), and the longest sequence it
 * reads (max_positions, 0 = any length). */
int lb_model_is_causal(const lb_model_config *c);
int64_t lb_model_max_positions(const lb_model_config *c);

/* What one position of a training sequence costs: matrix-product FLOPs of the whole model
 * (input layer, body, head) per position, for sequences of seq_len positions. */
typedef struct lb_model_flops {
    int64_t seq_len;   /* T the count is for */
    double forward;    /* forward FLOPs per position (the body's row, the input layer's 2 F D
                        * for real-valued inputs, the head's 2 W C at each read position) */
    double attention;  /* of forward: the attention's Q Kᵀ and weights · V (the n² term) */
    double training;   /* forward + backward = 3 × forward (the backward pass's two products
                        * per forward product: Kaplan et al. 2020, nanoGPT's 6 N) */
} lb_model_flops;

/* Counts c's FLOPs per position (lb_model_flops) for sequences of seq_len positions, from
 * its family's row (layers/family.h, `flops`). A family without a count gives NAN
 * figures (and LB_OK). Errors: LB_ERR_VALUE for NULL arguments, seq_len < 1 or a kind that
 * is not a family. */
lb_status lb_model_flops_count(const lb_model_config *c, int64_t seq_len, lb_model_flops *out);

/* "transformer, local" (joined by sep) for the families that use field f; "" when every
 * family does. Returns buf; NULL (LB_ERR_VALUE) when f, sep or buf is NULL. */
char *lb_model_field_families(const lb_model_field *f, const char *sep, char *buf, size_t size);

LB_API_END

#endif

/* The model's parts, shared by layers/model.c (training-time forward), layers/stream.c
 * (decoding) and the family files (layers/family_*.c). Internal to layers/. */
#ifndef LB_LAYERS_MODEL_INTERNAL_H
#define LB_LAYERS_MODEL_INTERNAL_H

#include "layers/conv.h"
#include "layers/family.h"
#include "layers/kv_cache.h"
#include "layers/linear.h"
#include "layers/lstm.h"
#include "layers/model.h"
#include "layers/positional.h"
#include "layers/stream.h"
#include "layers/transformer.h"

struct lb_model {
    lb_model_config cfg;
    const lb_family *family;
    lb_params params;
    lb_var *embedding; /* token inputs: [V, D] */
    lb_linear input;   /* feature inputs: [F, D] + [D] */
    lb_positional pos; /* attention families */
    lb_transformer transformer;
    lb_lstm lstm;
    lb_conv1d *conv;   /* n_layers causal convolutions D -> D, dilation 2^i */
    void *family_body; /* a family's own parts, made and read by its file only (mamba) */
    lb_linear head;    /* [body width, C or 1] + [C or 1]; with tie_embeddings weight is NULL
                          (the embedding serves) and bias may be NULL (bias 0) */
};

/* A streaming state (layers/stream.h): what every family shares, and `body`, the
 * family's own (its caches or carried state), made and read by its ops only. */
struct lb_model_state {
    lb_model *model;
    int64_t batch;
    int64_t *events;     /* [B] events seen per stream */
    lb_graph *graph;     /* one step's computation, reset after each step */
    void *body;          /* the family's state */
    /* The graph-free step of one event per stream (token models): buffers allocated once. */
    void *x, *a, *f;     /* [B, D] the residual stream; [B, max(D, body width)] a layer's output;
                          * [B, max(D, the family's scratch_width)] scratch */
    size_t work_bytes;   /* what the above and the family's event buffers hold */
    int64_t *valid1;     /* [B] and */
    int32_t *positions1; /* [B]: a one-event chunk's valid counts and positions */
    int graph_used;      /* the graph holds a step's nodes */
};

/* The code of a family's body. x is the embedded input [B, T, D]; "width" is the
 * row's body_width. Unless said otherwise an error returns NULL / a status with the
 * message recorded. */
typedef struct lb_family_ops {
    /* The family's own configuration rules (after the fields' ranges are checked). */
    lb_status (*check)(const lb_model_config *c);
    /* Adds the body's parameters to m->params (after the input's, before the head's),
     * drawing positions from r_pos and the body from r_body. */
    lb_status (*build)(lb_model *m, lb_rng *r_pos, lb_rng *r_body);
    /* Redraws parameters after the head is built (GPT-2's init) from `master`; may be NULL. */
    void (*finish)(lb_model *m, lb_rng *master);
    void (*free)(lb_model *m);
    /* The body: [B, T, D] -> [B, T, width], or [B, P, width] at the read positions when
     * read is non-NULL. weights, when non-NULL, receives the last attention layer's
     * weights (attention families). */
    lb_var *(*forward)(lb_graph *g, const lb_model *m, lb_var *x, const lb_model_input *in,
                       const lb_attn_queries *read, int training, lb_rng *rng, lb_var **weights);
    /* Width of the event step's scratch rows s->f beyond D (0 when D is enough). */
    int64_t (*scratch_width)(const lb_model_config *c);
    /* Makes s->body for s->batch streams, every stream empty. */
    lb_status (*state_new)(lb_model_state *s, const lb_stream_options *o);
    /* The event step's own buffers (weights in the layout its kernels read); adds their
     * bytes to s->work_bytes. May be NULL. */
    lb_status (*work_new)(lb_model_state *s);
    void (*state_free)(lb_model_state *s);
    /* Forgets stream b. */
    void (*state_reset)(lb_model_state *s, int64_t b);
    /* Bytes the next event of stream b depends on; bytes held for all streams. */
    size_t (*state_bytes)(const lb_model_state *s, int64_t b);
    size_t (*state_allocated)(const lb_model_state *s);
    /* Makes room for n more events per stream before a step (may be NULL). */
    lb_status (*reserve)(lb_model_state *s, int64_t n);
    /* The body over a chunk through s->graph: x [B, C, D] embedded -> [B, C, width], the
     * state after the chunk kept aside until commit. ragged: some stream has fewer than C
     * valid events. */
    lb_var *(*chunk)(lb_model_state *s, lb_var *x, const lb_decode_chunk *chunk, int ragged);
    /* One event per stream without a graph: s->x [B, D] holds the embedded rows; returns
     * the body's output rows [B, width] (in a buffer of s). NULL: one event goes through
     * chunk like any chunk. */
    const void *(*event)(lb_model_state *s, const lb_decode_chunk *chunk);
    /* Makes the step permanent (valid[b] events of stream b). */
    void (*commit)(lb_model_state *s, const int64_t *valid);
    /* The key-value cache of layer `layer`, or NULL (families without one). */
    lb_kv_cache *(*kv_cache)(lb_model_state *s, int layer);
} lb_family_ops;

/* Row functions that families share: 1, 0, and 0 positions (any length). */
int lb_family_always(const lb_model_config *c);
int lb_family_never(const lb_model_config *c);
int64_t lb_family_any_length(const lb_model_config *c);
/* An event step that needs no scratch beyond D (lb_family_ops.scratch_width 0). */
int64_t lb_family_no_scratch(const lb_model_config *c);

/* Checks tokens / features and lengths of `in` against the config (lengths in [1, T]). */
lb_status lb_model_check_input(const lb_model *m, const lb_model_input *in);
/* The embedded input [B, T, D] (token embedding or the input projection). */
lb_var *lb_model_embed(lb_graph *g, const lb_model *m, const lb_model_input *in);
/* The head on the body's output h [..., width] -> [..., C or 1]: the head's linear
 * layer, or with tie_embeddings h @ embedding^T (+ the head's bias when it has one). */
lb_var *lb_model_head(lb_graph *g, const lb_model *m, lb_var *h);
/* The same on raw rows h [n, width] of the model dtype into out [n, C or 1] (decoding). */
void lb_model_head_rows(const lb_model *m, int64_t n, const void *h, void *out);
/* Copies layer rows [L, B, N] of stream b from src into dst (carried per-layer state). */
void lb_model_copy_stream_rows(lb_tensor *dst, const lb_tensor *src, int64_t b);
/* Zeroes stream b's rows of a carried state [L, B, N] or [B, ...] (batch_dim 1 or 0). */
void lb_model_zero_stream_rows(lb_tensor *t, int batch_dim, int64_t b);
/* Bytes of a tensor's elements (0 for NULL). */
size_t lb_model_tensor_bytes(const lb_tensor *t);

#endif

/* Streaming inference: a model reads its input one event (or one chunk of events) at
 * a time, for B independent streams, and carries what it needs between calls.
 *
 * Named dims: B streams, C events per chunk, L layers, D d_model, H hidden_size (LSTM),
 * K kernel_size, T events a stream has seen, W the attention window, D_kv the width of
 * the key/value heads (D · n_kv_heads / n_heads: D itself without grouped-query attention).
 *
 * What each family carries per stream (the decoding state):
 *   transformer  per layer a key-value cache of every past event, 2 · L · T · D_kv values,
 *                growing with T (memory grows by doubling, or is pre-sized);
 *                max_context N keeps only the last N events (an approximation: the
 *                model then sees what a local-attention model of window N would);
 *   local        per layer the keys and values of the last W events, 2 · L · W · D_kv
 *                values (bounded);
 *   lstm         per layer (h, c), 2 · L · H values (constant);
 *   conv         per layer the last (K - 1) · dilation inputs, Σ_i (K - 1) · 2^i · D
 *                values (bounded);
 *   mamba        per block the last K - 1 inputs of its convolution and the scan state
 *                [Di, N], L · (Di · N + (K - 1) · Di) values (constant).
 * A chunk of C events costs O(C · T · D) in attention (each query compares with every
 * cached key) and O(C) for the other families.
 *
 * Exactness: feeding a sequence event by event or in chunks of any size gives the
 * outputs the training-time forward (lb_model_forward with LB_HEAD_EVERY) gives at
 * each position, up to floating-point rounding (tested to 1e-5 in float32 and 1e-12
 * in float64). Positions (sinusoidal, learned, rotary, alibi) continue from the number of
 * events the stream has seen. The causal mask of a chunk is aligned bottom-right:
 * event i of a chunk sees the cached events and the chunk's events up to itself.
 * Only causal models stream: an attention model built with causal = 0 is refused.
 *
 * A step either succeeds for every stream or changes nothing (a failed step, e.g.
 * out of memory, leaves the state as it was).
 */
#ifndef LB_LAYERS_STREAM_H
#define LB_LAYERS_STREAM_H

#include "tensor/api.h"
#include "layers/attention.h"
#include "layers/kv_cache.h"
#include "layers/model.h"

LB_API_BEGIN

typedef struct lb_stream_options {
    int64_t capacity;    /* transformer: events per stream the caches hold before they first grow
                          * (0 = 256); the caches double when full */
    int64_t max_context; /* transformer: attend to the last N events only and keep no more
                          * (0 = every event); local: lowers the window if smaller */
    size_t max_bytes;    /* the state (all streams) may not grow beyond this many bytes
                          * (0 = no limit); growth past it is an LB_ERR_MEMORY error */
} lb_stream_options;

typedef struct lb_model_state lb_model_state;

/* A decoding state of model m for `streams` streams (B >= 1), every stream empty.
 * m must outlive the state and must not change while it is used (its parameters are
 * read at each step, and the LSTM's and conv's event steps keep copies of their weights
 * made here). opt may be NULL (defaults: grow without bound, all context).
 * Errors (NULL): a non-causal attention model, B < 1, a negative option, max_bytes
 * below what the state needs for one event, out of memory. */
lb_model_state *lb_model_state_new(lb_model *m, int64_t streams, const lb_stream_options *opt);
void lb_model_state_free(lb_model_state *s);

/* Forgets what stream `stream` has seen (-1: every stream); it restarts at position 0.
 * A stream outside [0, B) and not -1 changes nothing and records LB_ERR_VALUE. */
void lb_model_state_reset(lb_model_state *s, int64_t stream);

/* B, and the events stream `stream` has seen so far (-1 with LB_ERR_VALUE for a stream
 * outside [0, B)). */
int64_t lb_model_state_streams(const lb_model_state *s);
int64_t lb_model_state_events(const lb_model_state *s, int64_t stream);

/* Bytes of state the next event of stream `stream` depends on (the formulas above,
 * times sizeof(dtype)): transformer 2 · L · T' · D_kv with T' the events cached (T, or at
 * most max_context), local 2 · L · min(T, W) · D_kv, lstm 2 · L · H, conv Σ (K-1) 2^i D. */
size_t lb_model_state_bytes(const lb_model_state *s, int64_t stream); /* 0 + LB_ERR_VALUE: stream outside [0, B) */
/* Bytes the state holds for all streams, spare capacity and scratch included. */
size_t lb_model_state_allocated(const lb_model_state *s);
/* Bytes of the graph-free event step's buffers, allocated once by lb_model_state_new
 * and not counted above (nor in max_bytes): for token models, the rows of one event
 * (B · (D + max(D, H) + max(D, 4 H, d_ff)) values, H the LSTM's hidden_size, d_ff the
 * transformer's, each 0 for the other families) plus the LSTM's
 * float32 copies of W_ihᵀ and W_hhᵀ (4 H (D + H) + (L - 1) · 8 H² values, where the
 * float32 step runs on the AVX2 / AVX-512 tile micro-kernel), the conv's tap-major weights
 * (L · K · D² values) or the attention layer's query, output, key and value rows
 * (4 B D values, B · n_heads for the log-sum-exp, 2 B int32). 0 for feature models,
 * whose steps build a graph; 0 with an LB_ERR_VALUE error when s is NULL. */
size_t lb_model_state_work_bytes(const lb_model_state *s);

/* The key-value cache of attention layer `layer` (transformer and local models), or
 * NULL (other families, a layer out of range). For inspection, and for benchmarks that
 * fill a long cache directly: rows written with lb_k_copy_rows and committed with
 * lb_kv_cache_advance count as cached events (positions still continue from the
 * events the stream was fed). */
lb_kv_cache *lb_model_state_kv_cache(lb_model_state *s, int layer);

/* One event per stream: tokens int32 [B] (token models). Returns a new tensor
 * (caller frees) with the model's output for that event: logits [B, num_classes], or
 * [B] for regression, in the model dtype. The output is the head applied at the new
 * position (what LB_HEAD_LAST gives for the sequence ending there).
 * Errors (NULL): ids outside the vocabulary (named by stream), a feature model,
 * learned positions past max_seq_len, memory (the state is then unchanged). */
lb_tensor *lb_model_step(lb_model_state *s, const int32_t *tokens);

/* lb_model_step into the caller's tensor out: contiguous [B, num_classes] (regression
 * [B]) of the model dtype. For a token model the event runs without an autograd graph
 * on buffers made by lb_model_state_new (lb_model_state_work_bytes): the step itself
 * allocates nothing (the fused attention kernel still takes its per-call scratch, one
 * allocation per attention layer, and OpenBLAS may make its own). Errors as lb_model_step, LB_ERR_SHAPE for out;
 * nothing changes on error. */
lb_status lb_model_step_into(lb_model_state *s, const int32_t *tokens, lb_tensor *out);

/* A chunk of C events per stream (chunked prefill): in->batch = B, in->seq_len = C,
 * tokens [B, C] or features [B, C, F] as for lb_model_forward; in->lengths, when not
 * NULL, gives the events of each stream in this chunk, in [0, C] (the rest of its row
 * is padding and ignored; 0 leaves the stream as it is). Returns a new tensor [B, C,
 * num_classes] (regression: [B, C]) with the output at every new event (rows past a
 * stream's length are unspecified). Errors (NULL) as lb_model_step; nothing changes. */
lb_tensor *lb_model_step_chunk(lb_model_state *s, const lb_model_input *in);

/* ---- one stream of token ids with a sliding window ----
 *
 * A model with learned positions (--pos learned) has a position table of max_seq_len
 * rows and cannot step past it. lb_window_stream carries one stream of token ids with a
 * window of W events (W <= max_seq_len for learned positions): while the stream holds
 * fewer than W events each id is one event (lb_model_step_into); when it holds W and
 * another comes, the state is reset and the last W ids (the new one last) are prefilled
 * again in one chunk (nanoGPT's `idx[:, -block_size:]` crop; the same policy as
 * layers/generate.h), so the cache is exact for positions 0..W-1 and every output equals
 * the full forward (lb_model_forward) on the last W events at its last position.
 * Cost: each event past W is a prefill of W events, O(L · W² · D) for attention instead
 * of O(L · W · D); memory: the state of W events and 2 W ids. */
typedef struct lb_window_stream lb_window_stream;

/* A window stream of token model m (vocab_size > 0) with window W >= 1 (for learned
 * positions at most max_seq_len). opt as lb_model_state_new (its capacity is raised to W;
 * max_context must be 0: the window replaces it). Errors (NULL, LB_ERR_VALUE): a feature
 * model, W out of range, the state's errors; LB_ERR_MEMORY. */
lb_window_stream *lb_window_stream_new(lb_model *m, int64_t window, const lb_stream_options *opt);
void lb_window_stream_free(lb_window_stream *w);
/* Feeds one id; out: [1, num_classes] (regression [1]) of the model dtype receives the
 * output at it. Errors as lb_model_step_into (an id outside the vocabulary, memory);
 * the stream is then unchanged. */
lb_status lb_window_stream_step(lb_window_stream *w, int32_t token, lb_tensor *out);
/* The decoding state (for lb_model_state_bytes), and the number of slides so far. */
lb_model_state *lb_window_stream_state(lb_window_stream *w);
int64_t lb_window_stream_slides(const lb_window_stream *w);

LB_API_END

#endif

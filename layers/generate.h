/* Text generation from a token language model through its streaming state.
 *
 * Named dims: V vocab_size, P the prompt's tokens, N max_new_tokens, W the context
 * window (the most tokens one prediction reads; 0 = no limit).
 *
 * A token language model reads token ids and predicts, at every position, the next
 * token over the same vocabulary: vocab_size > 0, num_classes == vocab_size and a head
 * at every position (LB_HEAD_EVERY), as `lookback train` makes from a text corpus.
 *
 * lb_generate runs the autoregressive loop of nanoGPT's `generate` (sample.py) without
 * recomputing the context per token:
 *
 *   1. prefill: the prompt (its last W tokens when longer) goes through the model's
 *      decoding state (layers/stream.h: the key-value cache of every attention layer,
 *      the LSTM's (h, c), the conv stack's past inputs) in one chunk;
 *   2. the logits [V] at the last event give the next token (layers/sample.h:
 *      temperature, top-k, top-p, or greedy at temperature 0);
 *   3. that token is fed as one event (lb_model_step_into: no graph, no allocation)
 *      and its logits give the next, until N tokens are made or the callback stops.
 *
 * The context window W: a model with learned positions (--pos learned) has a position
 * table of max_seq_len rows and cannot read more events; W is then max_seq_len, or the
 * caller's smaller `context`. Sinusoidal, rotary and no positions, the LSTM and the
 * conv stack have no such limit: W = `context`, and 0 reads every token. Policy when the
 * context reaches W and one more token must be read: the window slides, as nanoGPT's
 * `idx[:, -block_size:]` crop does. The state is reset and the last W tokens (the new
 * token last) are prefilled again in one chunk, so every prediction reads exactly the
 * last min(context, W) tokens and the result equals re-running the full forward on that
 * window at every token (tested for every family). Each token past W therefore costs a
 * prefill of W events instead of one event. With `slide_keep` K < W the window jumps
 * instead (as llama.cpp's context shift discards part of its context): the last K tokens
 * are prefilled, the next W - K tokens go one event each, and the predictions read
 * between K and W tokens; each slide then serves W - K + 1 tokens.
 *
 * <unk>: with sampling.mask_unk and sampling.unk_id (layers/sample.h) the vocabulary's
 * <unk> id is never generated, in every sampling mode (lookback generate sets it from
 * the checkpoint's vocabulary).
 *
 * Determinism: the same model, prompt, options and rng state give the same tokens
 * on every thread count (the kernels split work without changing any sum's order).
 * Each sampled token takes exactly one lb_rng_uniform draw (greedy takes none), so
 * samples generated one after another from one rng continue its stream.
 */
#ifndef LB_LAYERS_GENERATE_H
#define LB_LAYERS_GENERATE_H

#include <stdint.h>

#include "tensor/api.h"
#include "tensor/error.h"
#include "tensor/rng.h"
#include "layers/model.h"
#include "layers/sample.h"

LB_API_BEGIN

/* Called once per generated token, in order: index in [0, N), the token id, and the
 * model's logits [V] (float32, before temperature and filtering) it was drawn from.
 * Return 0 to continue, anything else to stop (lb_generate then returns LB_OK with
 * result->stopped = 1). */
typedef int (*lb_generate_callback)(void *user, int64_t index, int32_t token, const float *logits);

typedef struct lb_generate_options {
    int64_t max_new_tokens;         /* N >= 0 tokens to generate */
    lb_sampling sampling;           /* layers/sample.h */
    int64_t context;                /* W: most tokens one prediction reads, >= 0 (0 = the model's limit:
                                     * max_seq_len with learned positions, else every token) */
    int64_t slide_keep;             /* K: tokens read again when the window slides, in [0, W] (0 = W, nanoGPT's
                                     * crop); ignored without a window */
    lb_generate_callback on_token;  /* may be NULL (e.g. for timing) */
    void *user;                     /* handed to on_token */
} lb_generate_options;

/* N = 256, lb_sampling_defaults(), context 0, slide_keep 0, no callback. */
lb_generate_options lb_generate_defaults(void);

/* What a generation did. */
typedef struct lb_generate_result {
    int64_t generated;      /* tokens made (N, or fewer when the callback stopped) */
    int64_t prefills;       /* prefill chunks: 1 for the prompt, plus one per slide of the window */
    int64_t prefill_events; /* events fed in those chunks */
    int64_t steps;          /* events fed one at a time */
    int64_t context;        /* the window W used (0: none) */
    int stopped;            /* 1 when on_token ended the loop */
} lb_generate_result;

/* LB_OK when m is a token language model (above); else LB_ERR_VALUE saying which of
 * vocab_size > 0, num_classes == vocab_size and the every-position head fails, e.g.
 * "the model is not a token language model: it reads real-valued features". */
lb_status lb_generate_check_model(const lb_model *m);

/* The window W for `context` (>= 0): min(context, max_seq_len) with learned
 * positions (max_seq_len when context is 0), else context. -1 with LB_ERR_VALUE when m
 * is NULL or context < 0. */
int64_t lb_generate_context(const lb_model *m, int64_t context);

/* Generates opt->max_new_tokens tokens after prompt [P] (ids in [0, V), P >= 1) with
 * model m, drawing from rng (not used at temperature 0). out [N], when not NULL,
 * receives the tokens; result, when not NULL, what was done. m must not change during
 * the call. The model's state is made and freed here (layers/stream.h), so the call
 * holds O(W) events of state (O(P + N) with no window for attention).
 * Errors (LB_ERR_VALUE unless said): NULL m, prompt, opt or rng; m not a token
 * language model; P < 1; a prompt id outside [0, V) (named with its position);
 * N < 0; context < 0; slide_keep outside [0, W]; sampling options out of range; LB_ERR_NUMERIC for non-finite
 * logits; LB_ERR_MEMORY. On error out holds the tokens made so far (result->generated
 * of them). */
lb_status lb_generate(lb_model *m, const int32_t *prompt, int64_t prompt_len, const lb_generate_options *opt,
                      lb_rng *rng, int32_t *out, lb_generate_result *result);

LB_API_END

#endif

/* Drawing the next token from a language model's logits: repetition penalties,
 * temperature, top-k, top-p (nucleus) and min-p filtering, then one draw from the softmax
 * of what is left.
 *
 * Named dims: V vocab_size, N the tokens so far (o->recent). Every function reads one row
 * of logits float32 [V] (the model's output at the last position) and keeps no state
 * between calls: the tokens the penalties look at are passed in the options.
 *
 * The distribution, in this order (llama.cpp's penalties first, as in its default chain;
 * then the order of Hugging Face's logits warpers: temperature, top-k, top-p, min-p;
 * nanoGPT's sample.py does temperature and top-k):
 *
 *   0. penalties (llama.cpp's penalties sampler, llama_sampler_init_penalties): over the
 *      last repeat_last_n tokens of o->recent (-1: all of them, 0: none), every distinct
 *      token id i that occurs there gets, once whatever its count,
 *        repeat_penalty r:    x_i = x_i / r when x_i > 0, x_i · r when x_i <= 0
 *                             (r > 1 makes repeating less likely; 1 = off);
 *        presence_penalty a:  x_i = x_i - a (after r; 0 = off).
 *   1. temperature T > 0: z_i = x_i / T (T < 1 sharpens, T > 1 flattens);
 *   2. top-k, k > 0: every z_i below the k-th largest z is set to -inf. Tokens tied
 *      with the k-th largest value are all kept, so more than k may stay (as nanoGPT's
 *      `logits[logits < v[:, [-1]]] = -float('Inf')` and transformers' TopKLogitsWarper);
 *      k = 0 or k >= V keeps every token;
 *   3. top-p, p < 1 (Holtzman et al. 2019, "The Curious Case of Neural Text
 *      Degeneration", §3.1): with q = softmax(z) over the tokens still kept, sorted by
 *      decreasing q (equal q: the lower id first), the smallest prefix whose cumulative
 *      probability is >= p is kept and the rest set to -inf; at least one token is always
 *      kept (p = 0 keeps the most probable one). This is transformers' TopPLogitsWarper
 *      and llama.cpp's top-p sampler (which, in its default chain, applies the
 *      temperature after top-p instead: the two agree at T = 1);
 *   4. min-p, m > 0 (Nguyen et al. 2024, "Turning Up the Heat: Min-p Sampling"): of the
 *      tokens still kept, those with q_i < m · max q are set to -inf, i.e. z_i < max z +
 *      ln m (transformers' MinPLogitsWarper and llama.cpp's min-p sampler, which again
 *      comes before the temperature in llama.cpp's chain: the two agree at T = 1); the
 *      most probable token always stays;
 *   5. the draw: token i with probability softmax(z)_i, computed in double after
 *      subtracting the largest z, from exactly one lb_rng_uniform draw u in [0, 1): the
 *      first id, in id order, whose cumulative exp(z - max) exceeds u times their sum.
 *
 *   T = 0 is greedy decoding: the arg-max of the penalised logits (the lowest id on
 *   ties), with top-k, top-p and min-p ignored (none can change the arg-max) and no
 *   draw from the rng.
 *
 * <unk>: when o->mask_unk, the logit of o->unk_id is taken as -inf after step 0
 *    (the id a text vocabulary gives to characters it does not hold: it is never a
 *    training target, and a prompt holding U+FFFD is refused, so it is never generated
 *    either). Greedy decoding then takes the arg-max of the other tokens.
 *
 * Masked tokens are -inf (never a large negative number), so a masked token has
 * probability exactly 0 and can never be drawn. Logits may already hold -inf (a token
 * the caller masked; the penalties keep it -inf); NaN and +inf are errors.
 *
 * The same logits, options and rng state give the same token on every machine and
 * thread count (nothing here is parallel; the rng is tensor/rng.h's xoshiro256**).
 */
#ifndef LB_LAYERS_SAMPLE_H
#define LB_LAYERS_SAMPLE_H

#include <stddef.h>
#include <stdint.h>

#include "tensor/api.h"
#include "tensor/error.h"
#include "tensor/rng.h"

LB_API_BEGIN

/* The sampling options, named as in nanoGPT's sample.py and llama.cpp. */
typedef struct lb_sampling {
    double temperature; /* 0 = greedy, else in [LB_SAMPLING_MIN_TEMPERATURE, LB_SAMPLING_MAX_TEMPERATURE] */
    int64_t top_k;      /* 0 = off (every token), else the k most likely tokens (ties kept) */
    double top_p;       /* in [0, 1]; 1 = off */
    int64_t unk_id;     /* with mask_unk: the id of the vocabulary's <unk> (characters outside the vocabulary,
                         * never a training target), never drawn: its logit is -inf before step 1, in every
                         * mode, greedy included; in [0, V) */
    int mask_unk;       /* 1 = mask unk_id; 0 (the default, also of {T, k, p} initialisers) = no token masked */
    /* The members below are off when an initialiser leaves them out (0). */
    double min_p;            /* in [0, 1]; 0 = off */
    double repeat_penalty;   /* in [LB_SAMPLING_MIN_PENALTY, LB_SAMPLING_MAX_PENALTY]; 1 = off, and 0 = off */
    double presence_penalty; /* finite, |a| <= LB_SAMPLING_MAX_PENALTY; 0 = off */
    int64_t repeat_last_n;   /* the penalties look at the last N tokens of recent; -1 = all, 0 = none
                              * (llama.cpp's --repeat-last-n; lb_sampling_defaults: 64) */
    const int32_t *recent;   /* [n_recent] the tokens so far, oldest first (prompt, then generated);
                              * NULL = none; ids outside [0, V) are refused */
    int64_t n_recent;
} lb_sampling;

#define LB_SAMPLING_MIN_TEMPERATURE 1e-6
#define LB_SAMPLING_MAX_TEMPERATURE 1e6
#define LB_SAMPLING_MIN_PENALTY 1e-3
#define LB_SAMPLING_MAX_PENALTY 1e3

/* Plain sampling from the model's distribution: temperature 1, top_k 0, top_p 1, min_p 0,
 * repeat_penalty 1, presence_penalty 0, repeat_last_n 64 (llama.cpp's), no tokens. */
lb_sampling lb_sampling_defaults(void);

/* LB_OK when every option is in its range (above), else LB_ERR_VALUE naming the option
 * ("temperature", "top_k", "top_p", "min_p", "repeat_penalty", "presence_penalty",
 * "repeat_last_n" < -1, "n_recent" < 0 or > 0 with recent NULL, "unk_id" < 0 with
 * mask_unk), its value and the range. An unk_id >= V or a recent id outside [0, V) is
 * refused by the functions below, which know V. */
lb_status lb_sampling_check(const lb_sampling *o);

/* Bytes of the scratch buffer the functions below take as `work` for V tokens
 * (24 · V: the filtered logits in double and the sort's (value, id) pairs); 0 with an
 * LB_ERR_VALUE error when V is outside [1, INT32_MAX]. */
size_t lb_sample_work_bytes(int64_t vocab_size);

/* Steps 0-4 above: filtered [V] double receives z_i, or -inf for every token removed
 * by top-k, top-p or min-p (with T = 0: the arg-max keeps its penalised logit, every
 * other token -inf).
 * work: lb_sample_work_bytes(V) bytes, or NULL (the function then allocates its own).
 * Errors: LB_ERR_VALUE (V < 1, an option out of range, unk_id >= V), LB_ERR_NUMERIC (a NaN
 * or +inf logit, named with its id; every logit -inf, <unk>'s aside), LB_ERR_MEMORY; filtered is then
 * unspecified. */
lb_status lb_sample_filter(const float *logits, int64_t vocab_size, const lb_sampling *o, void *work,
                           double *filtered);

/* The distribution the draw follows: probs [V] double = softmax(filtered) (0 for every
 * removed token; one-hot on the arg-max for T = 0). For tests and for reporting.
 * work as lb_sample_filter; errors as lb_sample_filter. */
lb_status lb_sample_probs(const float *logits, int64_t vocab_size, const lb_sampling *o, void *work, double *probs);

/* Draws one token id in [0, V) into *token: greedy for T = 0 (no rng draw), else one
 * lb_rng_uniform draw from rng (step 4). work as lb_sample_filter.
 * Errors as lb_sample_filter (*token is then untouched and the rng not advanced). */
lb_status lb_sample_token(const float *logits, int64_t vocab_size, const lb_sampling *o, lb_rng *rng, void *work,
                          int32_t *token);

LB_API_END

#endif

/* The generation loop (layers/generate.h). Named dims: V vocab_size, P prompt tokens,
 * N max_new_tokens, W the context window. */
#include "layers/generate.h"

#include <stdlib.h>
#include <string.h>

#include "layers/model_internal.h"
#include "layers/stream.h"

/* The initial cache rows of a state without a window (it doubles when full). */
enum { INITIAL_CAPACITY = 4096 };

lb_generate_options lb_generate_defaults(void)
{
    lb_generate_options o = {256, lb_sampling_defaults(), 0, 0, NULL, NULL};
    return o;
}

lb_status lb_generate_check_model(const lb_model *m)
{
    LB_CHECK_ARG(m, LB_ERR_VALUE);
    const lb_model_config *c = &m->cfg;
    if (c->vocab_size <= 0)
        return lb_error(LB_ERR_VALUE, "generate: the model is not a token language model: it reads real-valued "
                                      "features (input_features = %lld), not token ids",
                        (long long)c->input_features);
    if (c->num_classes != c->vocab_size)
        return lb_error(LB_ERR_VALUE, "generate: the model is not a token language model: it predicts %s (num_classes "
                                      "= %lld), not the next token over its vocabulary (vocab_size = %lld)",
                        c->num_classes > 0 ? "classes" : "a real value", (long long)c->num_classes,
                        (long long)c->vocab_size);
    if (c->head != LB_HEAD_EVERY)
        return lb_error(LB_ERR_VALUE, "generate: the model is not a token language model: its head reads the last "
                                      "position only (one prediction per sequence), not every position");
    return LB_OK;
}

int64_t lb_generate_context(const lb_model *m, int64_t context)
{
    LB_CHECK_ARG(m, -1);
    if (context < 0) {
        lb_error(LB_ERR_VALUE, "generate: context = %lld must be >= 0 (0 = the model's limit)", (long long)context);
        return -1;
    }
    const lb_model_config *c = &m->cfg;
    int64_t table = m->family->max_positions(c);
    if (table > 0 && (context == 0 || context > table))
        return table;
    return context;
}

/* The tokens a slide re-reads: the last W of the context, kept in a buffer of 2 W that
 * is compacted when full (amortised O(1) per token). Unused without a window. */
typedef struct window_tokens {
    int32_t *ids;
    int64_t length, capacity, window;
    int64_t keep; /* tokens a slide prefills, in [1, window] */
} window_tokens;

static void window_push(window_tokens *w, int32_t id)
{
    if (!w->ids)
        return;
    if (w->length == w->capacity) {
        memmove(w->ids, w->ids + w->length - (w->window - 1), (size_t)(w->window - 1) * sizeof *w->ids);
        w->length = w->window - 1;
    }
    w->ids[w->length++] = id;
}

/* The generation's working set. */
typedef struct generation {
    lb_model *model;
    lb_model_state *state;
    lb_tensor *step_out; /* [1, V] in the model dtype: one event's logits */
    float *logits;       /* [V]: the logits the next token is drawn from */
    void *work;          /* the sampler's scratch */
    window_tokens window;
    int64_t vocab;
    lb_generate_result *result;
} generation;

/* Row `row` of a [.., V] tensor of the model dtype into g->logits as float32. */
static void take_row(generation *g, const lb_tensor *t, int64_t row)
{
    const int64_t v = g->vocab;
    if (t->dtype == LB_FLOAT32) {
        memcpy(g->logits, (const float *)lb_tensor_data(t) + row * v, (size_t)v * sizeof *g->logits);
    } else {
        const double *src = (const double *)lb_tensor_data(t) + row * v;
        for (int64_t i = 0; i < v; i++)
            g->logits[i] = (float)src[i];
    }
}

/* Prefills ids [n] as one chunk of a fresh stream; the logits at its last event. */
static lb_status prefill(generation *g, const int32_t *ids, int64_t n)
{
    lb_model_state_reset(g->state, 0);
    lb_model_input in = {1, n, ids, NULL, NULL};
    lb_tensor *y = lb_model_step_chunk(g->state, &in); /* [1, n, V] */
    if (!y)
        return lb_error_context("generate: prefill of %lld tokens", (long long)n);
    take_row(g, y, n - 1);
    lb_tensor_free(y);
    g->result->prefills++;
    g->result->prefill_events += n;
    return LB_OK;
}

/* Feeds the token just drawn: one event, or a slide of the window when the stream
 * already holds W events. */
static lb_status feed(generation *g, int32_t token)
{
    const int64_t w = g->window.window;
    if (w > 0 && lb_model_state_events(g->state, 0) + 1 > w)
        return prefill(g, g->window.ids + g->window.length - g->window.keep, g->window.keep);
    if (lb_model_step_into(g->state, &token, g->step_out) != LB_OK)
        return lb_error_context("generate: token %lld", (long long)g->result->generated);
    take_row(g, g->step_out, 0);
    g->result->steps++;
    return LB_OK;
}

static lb_status check_arguments(lb_model *m, const int32_t *prompt, int64_t p, const lb_generate_options *o,
                                 int64_t *window, int64_t *keep)
{
    if (lb_generate_check_model(m) != LB_OK)
        return lb_last_status();
    if (p < 1)
        return lb_error(LB_ERR_VALUE, "generate: the prompt has %lld tokens; it needs at least one (nanoGPT's sample.py "
                                      "starts from \"\\n\")",
                        (long long)p);
    const int64_t v = m->cfg.vocab_size;
    for (int64_t i = 0; i < p; i++)
        if (prompt[i] < 0 || prompt[i] >= v)
            return lb_error(LB_ERR_VALUE, "generate: prompt token %d at position %lld is outside [0, vocab_size = %lld)",
                            (int)prompt[i], (long long)i, (long long)v);
    if (o->max_new_tokens < 0)
        return lb_error(LB_ERR_VALUE, "generate: max_new_tokens = %lld must be >= 0", (long long)o->max_new_tokens);
    if (lb_sampling_check(&o->sampling) != LB_OK)
        return lb_error_context("generate");
    if ((*window = lb_generate_context(m, o->context)) < 0)
        return lb_last_status();
    if (*window > 0 && (o->slide_keep < 0 || o->slide_keep > *window))
        return lb_error(LB_ERR_VALUE, "generate: slide_keep = %lld must be in [0, W = %lld] (0 = W)",
                        (long long)o->slide_keep, (long long)*window);
    *keep = o->slide_keep > 0 ? o->slide_keep : *window;
    return LB_OK;
}

static lb_status generation_init(generation *g, lb_model *m, int64_t window, int64_t keep, int64_t total)
{
    const lb_model_config *c = &m->cfg;
    g->vocab = c->vocab_size;
    int64_t capacity = window > 0 ? window : total < INITIAL_CAPACITY ? total : INITIAL_CAPACITY;
    lb_stream_options so = {capacity, 0, 0};
    int64_t shape[2] = {1, g->vocab};
    if (!(g->state = lb_model_state_new(m, 1, &so)) || !(g->step_out = lb_tensor_empty(c->dtype, 2, shape)))
        return lb_error_context("generate");
    size_t work = lb_sample_work_bytes(g->vocab);
    if (work == 0)
        return lb_last_status();
    if (!(g->logits = malloc((size_t)g->vocab * sizeof *g->logits)) || !(g->work = malloc(work)))
        return lb_error(LB_ERR_MEMORY, "generate: out of memory for the logits and the sampler of V = %lld tokens",
                        (long long)g->vocab);
    g->window.window = window;
    g->window.keep = keep;
    if (window > 0) {
        g->window.capacity = 2 * window;
        if (!(g->window.ids = malloc((size_t)g->window.capacity * sizeof *g->window.ids)))
            return lb_error(LB_ERR_MEMORY, "generate: out of memory for a window of %lld tokens", (long long)window);
    }
    return LB_OK;
}

static void generation_free(generation *g)
{
    lb_model_state_free(g->state);
    lb_tensor_free(g->step_out);
    free(g->logits);
    free(g->work);
    free(g->window.ids);
}

lb_status lb_generate(lb_model *m, const int32_t *prompt, int64_t prompt_len, const lb_generate_options *opt,
                      lb_rng *rng, int32_t *out, lb_generate_result *result)
{
    lb_generate_result local;
    if (!result)
        result = &local;
    memset(result, 0, sizeof *result);
    LB_CHECK_ARG(m, LB_ERR_VALUE);
    LB_CHECK_ARG(prompt, LB_ERR_VALUE);
    LB_CHECK_ARG(opt, LB_ERR_VALUE);
    LB_CHECK_ARG(rng, LB_ERR_VALUE);
    int64_t window = 0, keep = 0;
    if (check_arguments(m, prompt, prompt_len, opt, &window, &keep) != LB_OK)
        return lb_last_status();
    result->context = window;
    const int64_t n = opt->max_new_tokens;
    if (n == 0)
        return LB_OK;
    generation g = {0};
    g.result = result;
    lb_status st = generation_init(&g, m, window, keep, prompt_len + n);
    /* the tokens so far, which the sampler's penalties read (layers/sample.h step 0) */
    lb_sampling sampling = opt->sampling;
    int32_t *history = st == LB_OK ? malloc((size_t)(prompt_len + n) * sizeof *history) : NULL;
    if (st == LB_OK && !history)
        st = lb_error(LB_ERR_MEMORY, "generate: out of memory for the %lld tokens the penalties read",
                      (long long)(prompt_len + n));
    if (history)
        memcpy(history, prompt, (size_t)prompt_len * sizeof *history);
    sampling.recent = history;
    sampling.n_recent = prompt_len;
    /* the prompt: its last W tokens when longer than the window */
    int64_t start = window > 0 && prompt_len > window ? prompt_len - window : 0;
    for (int64_t i = start; st == LB_OK && i < prompt_len; i++)
        window_push(&g.window, prompt[i]);
    if (st == LB_OK)
        st = prefill(&g, prompt + start, prompt_len - start);
    while (st == LB_OK) {
        int32_t token;
        if ((st = lb_sample_token(g.logits, g.vocab, &sampling, rng, g.work, &token)) != LB_OK) {
            lb_error_context("generate: token %lld", (long long)result->generated);
            break;
        }
        if (out)
            out[result->generated] = token;
        result->generated++;
        history[sampling.n_recent++] = token;
        window_push(&g.window, token);
        if (opt->on_token && opt->on_token(opt->user, result->generated - 1, token, g.logits) != 0) {
            result->stopped = 1;
            break;
        }
        if (result->generated == n)
            break;
        st = feed(&g, token);
    }
    free(history);
    generation_free(&g);
    return st;
}

/* ---- lb_window_stream (layers/stream.h): one stream of ids with the same slide ---- */

struct lb_window_stream {
    lb_model *model;
    lb_model_state *state;
    window_tokens ids;
    lb_stream_options opt;
    int64_t slides;
};

lb_window_stream *lb_window_stream_new(lb_model *m, int64_t window, const lb_stream_options *opt)
{
    LB_CHECK_ARG(m, NULL);
    const lb_model_config *c = &m->cfg;
    if (c->vocab_size <= 0) {
        lb_error(LB_ERR_VALUE, "window stream: the model reads real-valued features, not token ids");
        return NULL;
    }
    int64_t table = m->family->max_positions(c);
    int learned = table > 0;
    if (window < 1 || (learned && window > table) || window > (INT32_MAX / 2)) {
        lb_error(LB_ERR_VALUE, "window stream: window = %lld must be in [1, %lld]%s", (long long)window,
                 (long long)(learned ? table : INT32_MAX / 2),
                 learned ? " (the learned positions end at max_seq_len)" : "");
        return NULL;
    }
    lb_stream_options so = opt ? *opt : (lb_stream_options){0, 0, 0};
    if (so.max_context != 0) {
        lb_error(LB_ERR_VALUE, "window stream: max_context = %lld: the window replaces it (give 0)",
                 (long long)so.max_context);
        return NULL;
    }
    if (so.capacity < window)
        so.capacity = window;
    lb_window_stream *w = calloc(1, sizeof *w);
    if (!w) {
        lb_error(LB_ERR_MEMORY, "window stream: out of memory");
        return NULL;
    }
    w->model = m;
    w->opt = so;
    w->ids.window = w->ids.keep = window;
    w->ids.capacity = 2 * window;
    w->ids.ids = malloc((size_t)w->ids.capacity * sizeof *w->ids.ids);
    if (!w->ids.ids) {
        lb_error(LB_ERR_MEMORY, "window stream: out of memory for a window of %lld ids", (long long)window);
        free(w);
        return NULL;
    }
    if (!(w->state = lb_model_state_new(m, 1, &so))) {
        free(w->ids.ids);
        free(w);
        return NULL;
    }
    return w;
}

void lb_window_stream_free(lb_window_stream *w)
{
    if (!w)
        return;
    lb_model_state_free(w->state);
    free(w->ids.ids);
    free(w);
}

lb_status lb_window_stream_step(lb_window_stream *w, int32_t token, lb_tensor *out)
{
    LB_CHECK_ARG(w, LB_ERR_VALUE);
    LB_CHECK_ARG(out, LB_ERR_VALUE);
    const int64_t v = w->model->cfg.vocab_size, cols = out->ndim == 2 ? out->shape[1] : 1;
    if (token < 0 || token >= v)
        return lb_error(LB_ERR_VALUE, "window stream: token %d is outside [0, vocab_size = %lld)", (int)token,
                        (long long)v);
    if (lb_model_state_events(w->state, 0) < w->ids.window) {
        lb_status st = lb_model_step_into(w->state, &token, out);
        if (st == LB_OK)
            window_push(&w->ids, token);
        return st;
    }
    /* the slide: the last W - 1 ids and this one, prefilled in one chunk of a fresh stream */
    int32_t *chunk = malloc((size_t)w->ids.window * sizeof *chunk);
    if (!chunk)
        return lb_error(LB_ERR_MEMORY, "window stream: out of memory for a slide of %lld ids", (long long)w->ids.window);
    memcpy(chunk, w->ids.ids + w->ids.length - (w->ids.window - 1), (size_t)(w->ids.window - 1) * sizeof *chunk);
    chunk[w->ids.window - 1] = token;
    lb_model_state *fresh = lb_model_state_new(w->model, 1, &w->opt);
    lb_model_input in = {1, w->ids.window, chunk, NULL, NULL};
    lb_tensor *y = fresh ? lb_model_step_chunk(fresh, &in) : NULL; /* [1, W, C] or [1, W] */
    lb_status st = y ? LB_OK : lb_last_status();
    if (st == LB_OK && (lb_tensor_numel(out) != cols || out->dtype != y->dtype || !lb_tensor_is_contiguous(out)))
        st = lb_error(LB_ERR_SHAPE, "window stream: out must be a contiguous tensor of the model dtype holding one "
                      "event's output (%lld values)", (long long)cols);
    if (st == LB_OK) {
        size_t size = lb_dtype_size(y->dtype);
        memcpy(lb_tensor_data(out), (const char *)lb_tensor_data(y) + (size_t)((w->ids.window - 1) * cols) * size,
               (size_t)cols * size);
        lb_model_state_free(w->state); /* the new state holds exactly the window */
        w->state = fresh;
        fresh = NULL;
        window_push(&w->ids, token);
        w->slides++;
    }
    lb_tensor_free(y);
    lb_model_state_free(fresh);
    free(chunk);
    return st;
}

lb_model_state *lb_window_stream_state(lb_window_stream *w)
{
    LB_CHECK_ARG(w, NULL);
    return w->state;
}

int64_t lb_window_stream_slides(const lb_window_stream *w)
{
    LB_CHECK_ARG(w, -1);
    return w->slides;
}

#include "data/loader.h"

#include <stdlib.h>
#include <string.h>

#include "data/dataset_internal.h"
#include "data/text_internal.h"

struct lb_loader {
    const char *file;   /* the dataset's path, for messages */
    const char *split;  /* "train", "val" or "test" */
    const lb_rows *src; /* the split, N examples */
    int64_t batch_size; /* B */
    int shuffle, drop_last;
    int64_t shard, shards; /* part `shard` of `shards` of every batch (0 of 1: all of it) */
    int64_t epoch, position;
    lb_rng epoch_rng;   /* generator state before this epoch's permutation */
    lb_rng rng;         /* after it: the next epoch starts here */
    int64_t *order;     /* [N] this epoch's order */
    lb_batch_store store;
    /* A text corpus: windows of T tokens of the stream tok[0..n_tokens). With shuffle,
     * every batch is B windows at uniformly random offsets (nanoGPT's get_batch) drawn
     * from `rng`, with no epochs; without, the split's non-overlapping windows in order. */
    int text;
    const int32_t *tok;
    int64_t n_tokens, T;
    int64_t *offsets;   /* [B] the batch's offsets */
    int64_t text_windows; /* the split's non-overlapping windows */
};

/* Draws the order of the current epoch from epoch_rng. */
static void start_epoch(lb_loader *ld)
{
    ld->rng = ld->epoch_rng;
    if (ld->shuffle)
        lb_rng_permutation(&ld->rng, ld->src->n, ld->order);
    else
        for (int64_t i = 0; i < ld->src->n; i++)
            ld->order[i] = i;
}

/* The text form of lb_loader_new (ld has its file and split). */
static lb_loader *text_loader(lb_loader *ld, const lb_dataset *ds, int64_t batch_size, int shuffle, int drop_last,
                              uint64_t seed)
{
    ld->text = 1;
    ld->tok = lb_dataset_tokens(ds, ld->split, &ld->n_tokens);
    ld->T = lb_dataset_seq_len(ds);
    ld->batch_size = batch_size;
    ld->shuffle = shuffle != 0;
    ld->drop_last = drop_last != 0;
    ld->shards = 1;
    lb_rng_seed(&ld->epoch_rng, seed);
    ld->rng = ld->epoch_rng;
    ld->text_windows = lb_dataset_split_size(ds, ld->split);
    lb_status st = LB_OK;
    if (shuffle && ld->n_tokens < ld->T + 1)
        st = lb_error(LB_ERR_VALUE, "%s: the %s split has %lld tokens, fewer than one window of --seq-len %lld plus its "
                      "target (%lld): lower --seq-len", ld->file, ld->split, (long long)ld->n_tokens, (long long)ld->T,
                      (long long)(ld->T + 1));
    ld->offsets = st == LB_OK ? malloc((size_t)batch_size * sizeof *ld->offsets) : NULL;
    if (st == LB_OK && !ld->offsets)
        st = lb_error(LB_ERR_MEMORY, "%s: out of memory for a loader", ld->file);
    if (st == LB_OK)
        st = lb_batch_store_init(&ld->store, lb_dataset_layout(ds), batch_size, ld->file);
    if (st != LB_OK) {
        free(ld->offsets);
        free(ld);
        return NULL;
    }
    return ld;
}

/* The next batch of a text loader (see lb_loader_next). */
static int text_next(lb_loader *ld, lb_batch *out)
{
    int64_t n = ld->batch_size;
    if (ld->shuffle) { /* offsets uniform over [0, N - T - 1]: x = tok[i .. i+T), y = tok[i+1 .. i+T+1) */
        for (int64_t i = 0; i < n; i++)
            ld->offsets[i] = (int64_t)lb_rng_below(&ld->rng, (uint64_t)(ld->n_tokens - ld->T));
    } else {
        int64_t left = ld->text_windows - ld->position;
        if (left <= 0 || (ld->drop_last && left < n)) {
            ld->epoch++;
            ld->position = 0;
            return 0;
        }
        n = left < n ? left : n;
        for (int64_t i = 0; i < n; i++)
            ld->offsets[i] = (ld->position + i) * ld->T;
    }
    int64_t first = n * ld->shard / ld->shards, last = n * (ld->shard + 1) / ld->shards;
    if (lb_text_batch_fill(&ld->store, ld->tok, ld->n_tokens, ld->offsets + first, 0, last - first, ld->T, out) != LB_OK)
        return -1;
    ld->position += n;
    return 1;
}

lb_loader *lb_loader_new(const lb_dataset *ds, const char *split, int64_t batch_size, int shuffle, int drop_last,
                         uint64_t seed)
{
    if (!ds) {
        lb_error(LB_ERR_VALUE, "lb_loader_new: dataset is NULL");
        return NULL;
    }
    const char *file = lb_dataset_path(ds);
    int s = lb_split_index(split, file);
    if (s < 0)
        return NULL;
    if (batch_size < 1) {
        lb_error(LB_ERR_VALUE, "%s: batch size %lld must be >= 1", file, (long long)batch_size);
        return NULL;
    }
    lb_loader *ld = calloc(1, sizeof *ld);
    if (!ld) {
        lb_error(LB_ERR_MEMORY, "%s: out of memory for a loader", file);
        return NULL;
    }
    ld->file = file;
    ld->split = lb_split_name(s);
    ld->src = lb_dataset_rows(ds, s);
    if (lb_dataset_is_text(ds))
        return text_loader(ld, ds, batch_size, shuffle, drop_last, seed);
    ld->batch_size = batch_size;
    ld->shuffle = shuffle != 0;
    ld->drop_last = drop_last != 0;
    ld->shards = 1;
    lb_rng_seed(&ld->epoch_rng, seed);
    ld->order = malloc((size_t)(ld->src->n > 0 ? ld->src->n : 1) * sizeof *ld->order);
    int64_t capacity = batch_size < ld->src->n ? batch_size : (ld->src->n > 0 ? ld->src->n : 1);
    lb_status st = ld->order ? lb_batch_store_init(&ld->store, lb_dataset_layout(ds), capacity, file)
                             : lb_error(LB_ERR_MEMORY, "%s: out of memory for the order of %lld examples of split %s",
                                        file, (long long)ld->src->n, ld->split);
    if (st != LB_OK) {
        free(ld->order);
        free(ld);
        return NULL;
    }
    start_epoch(ld);
    return ld;
}

void lb_loader_free(lb_loader *ld)
{
    if (!ld)
        return;
    lb_batch_store_free(&ld->store);
    free(ld->order);
    free(ld->offsets);
    free(ld);
}

int lb_loader_next(lb_loader *ld, lb_batch *out)
{
    if (!ld || !out) {
        lb_error(LB_ERR_VALUE, "lb_loader_next: loader and batch must not be NULL");
        return -1;
    }
    if (ld->text)
        return text_next(ld, out);
    int64_t left = ld->src->n - ld->position;
    if (left <= 0 || (ld->drop_last && left < ld->batch_size)) {
        ld->epoch++;
        ld->position = 0;
        ld->epoch_rng = ld->rng;
        start_epoch(ld);
        return 0;
    }
    int64_t n = left < ld->batch_size ? left : ld->batch_size;
    int64_t first = n * ld->shard / ld->shards, last = n * (ld->shard + 1) / ld->shards;
    if (lb_batch_store_fill(&ld->store, ld->src, ld->order + ld->position + first, 0, last - first, out) != LB_OK)
        return -1;
    ld->position += n;
    return 1;
}

lb_status lb_loader_set_shard(lb_loader *ld, int64_t index, int64_t count)
{
    if (!ld)
        return lb_error(LB_ERR_VALUE, "lb_loader_set_shard: loader is NULL");
    if (count < 1 || count > ld->batch_size || index < 0 || index >= count)
        return lb_error(LB_ERR_VALUE, "%s: shard %lld of %lld does not fit batches of %lld examples", ld->file,
                        (long long)index, (long long)count, (long long)ld->batch_size);
    ld->shard = index;
    ld->shards = count;
    return LB_OK;
}

int64_t lb_loader_batches_per_epoch(const lb_loader *ld)
{
    LB_CHECK_ARG(ld, -1);
    int64_t n = ld->text ? ld->text_windows : ld->src->n, b = ld->batch_size;
    if (ld->text && ld->shuffle)
        return n / b > 0 ? n / b : 1; /* random windows: an epoch's worth of tokens, for reference */
    return ld->drop_last ? n / b : (n + b - 1) / b;
}

int64_t lb_loader_size(const lb_loader *ld)
{
    LB_CHECK_ARG(ld, -1);
    return ld->text ? ld->text_windows : ld->src->n;
}

lb_status lb_loader_get_state(const lb_loader *ld, lb_loader_state *out)
{
    if (!ld || !out)
        return lb_error(LB_ERR_VALUE, "lb_loader_get_state: loader and state must not be NULL");
    out->epoch = ld->epoch;
    out->position = ld->position;
    out->rng = ld->text && ld->shuffle ? ld->rng : ld->epoch_rng; /* random windows: the generator as it is now */
    return LB_OK;
}

lb_status lb_loader_set_state(lb_loader *ld, const lb_loader_state *st)
{
    if (!ld || !st)
        return lb_error(LB_ERR_VALUE, "lb_loader_set_state: loader and state must not be NULL");
    if (ld->text) {
        if (st->epoch < 0 || st->position < 0 || (!ld->shuffle && st->position > ld->text_windows))
            return lb_error(LB_ERR_VALUE, "%s: the saved loader state (epoch %lld, position %lld) does not fit split %s of "
                            "%lld windows (was it saved for another data file or --seq-len?)", ld->file,
                            (long long)st->epoch, (long long)st->position, ld->split, (long long)ld->text_windows);
        ld->epoch = st->epoch;
        ld->position = st->position;
        ld->rng = ld->epoch_rng = st->rng;
        return LB_OK;
    }
    if (st->epoch < 0 || st->position < 0 || st->position > ld->src->n)
        return lb_error(LB_ERR_VALUE,
                        "%s: the saved loader state (epoch %lld, position %lld) does not fit split %s of %lld "
                        "examples (was it saved for another data file or split?)",
                        ld->file, (long long)st->epoch, (long long)st->position, ld->split, (long long)ld->src->n);
    ld->epoch = st->epoch;
    ld->position = st->position;
    ld->epoch_rng = st->rng;
    start_epoch(ld);
    return LB_OK;
}

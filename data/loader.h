/* Batches of a split in a seeded shuffled order, epoch after epoch.
 *
 * Order: epoch e visits the split in the permutation drawn (lb_rng_permutation, a
 * Fisher-Yates shuffle) from the loader's generator, which is seeded once with
 * `seed` and advances by one permutation per epoch; without shuffling, file order.
 * A short last batch is returned, or dropped with drop_last. The state (epoch,
 * position within the epoch and the generator state at the start of the epoch)
 * can be saved and restored, so a checkpoint resumes mid-epoch bit for bit.
 *
 * Text corpora (data/text.h, lb_dataset_is_text): with shuffle, every batch is B windows
 * of T = seq_len tokens at offsets i drawn uniformly from [0, N_tokens - T - 1] by the
 * generator (lb_rng_below, one draw per window in batch order): inputs tokens[i .. i+T),
 * targets tokens[i+1 .. i+T+1) (nanoGPT's get_batch); there are no epochs (the loader
 * never returns 0) and the saved state's rng is the generator's current state, position
 * the windows drawn so far. Without shuffle: the split's non-overlapping windows in order
 * (as lb_dataset_slice). The split needs N_tokens >= T + 1 for random windows.
 *
 * Dimensions: N examples in the split, B = batch_size, T = seq_len, F features.
 */
#ifndef LB_DATA_LOADER_H
#define LB_DATA_LOADER_H

#include "tensor/api.h"

#include <stdint.h>

#include "data/dataset.h"
#include "tensor/rng.h"

LB_API_BEGIN

typedef struct lb_loader lb_loader;

typedef struct lb_loader_state {
    int64_t epoch;    /* epochs completed */
    int64_t position; /* examples of this epoch already returned, in [0, N] */
    lb_rng rng;       /* generator state at the start of this epoch (before its permutation) */
} lb_loader_state;

/* A loader over split "train", "val" or "test" of `ds` (which must outlive it).
 * NULL with LB_ERR_VALUE for an unknown split or batch_size < 1, LB_ERR_MEMORY. */
lb_loader *lb_loader_new(const lb_dataset *ds, const char *split, int64_t batch_size, int shuffle, int drop_last,
                         uint64_t seed);
void lb_loader_free(lb_loader *loader);

/* Next batch into *out: returns 1 with a batch of B examples (fewer for the last one
 * unless drop_last); 0 at the end of an epoch, and the next call starts the next
 * epoch; -1 on error (NULL arguments). The batch is owned by the loader and valid
 * until the next call or lb_loader_free: tokens [B, T] int32, features float32
 * [B, T, F], targets [B] or [B, T] int32, target_values [B] float, distance [B],
 * lengths [B], indices [B] (see lb_batch). */
int lb_loader_next(lb_loader *loader, lb_batch *out);

/* Makes every later batch part `index` of `count` (DistributedSampler's rule for one
 * global batch): of each batch of n examples the loader would return, only examples
 * [n*index/count, n*(index+1)/count) are read and returned, while the position still
 * advances by n. Loaders with the same seed and batch_size and shards 0..count-1
 * together return exactly the batches of one unsharded loader. The saved state is
 * that of the whole batch, so it does not depend on the shard.
 * Errors: LB_ERR_VALUE unless 0 <= index < count <= batch_size. */
lb_status lb_loader_set_shard(lb_loader *loader, int64_t index, int64_t count);

/* Batches one epoch yields: ceil(N / B), or floor(N / B) with drop_last. */
int64_t lb_loader_batches_per_epoch(const lb_loader *loader);
/* N of the loader's split. */
int64_t lb_loader_size(const lb_loader *loader);

/* Saves the position; restoring it into a loader over the same split with the same
 * batch_size, shuffle and drop_last resumes the exact sequence of batches.
 * set_state: LB_ERR_VALUE when position is outside [0, N] or epoch < 0. */
lb_status lb_loader_get_state(const lb_loader *loader, lb_loader_state *out);
lb_status lb_loader_set_state(lb_loader *loader, const lb_loader_state *state);

LB_API_END

#endif

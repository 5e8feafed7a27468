/* The batch loader: shuffled epochs cover every example once, drop_last, seeded
 * order, batches hold the right examples, saved state resumes bit for bit, and shards
 * (one per data-parallel rank) partition every batch. */
#include "data/arrays.h"
#include "data/dataset.h"
#include "data/loader.h"
#include "data/tasks.h"
#include "support.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

enum { N_TRAIN = 37, T = 12 };

static lb_dataset *open_task(lb_task_kind task)
{
    char path[256];
    const char *dir = getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp";
    snprintf(path, sizeof path, "%s/lb_test_data_loader_%d_%d.h5", dir, (int)getpid(), (int)task);
    lb_task_options o;
    lb_task_options_default(task, &o);
    o.seq_len = T;
    o.n_train = N_TRAIN;
    o.n_val = 0;
    o.n_test = 3;
    o.variable_length = 1;
    o.pairs = 2; /* recall: 2 * pairs + queries <= T / 2 */
    CU_ASSERT_EQUAL_FATAL(lb_task_generate(&o, path, NULL, NULL), LB_OK);
    lb_dataset *ds = lb_dataset_open(path);
    CU_ASSERT_PTR_NOT_NULL_FATAL(ds);
    remove(path);
    return ds;
}

/* Every field of batch example b equals example indices[b] of the split, in order. */
static int batch_matches(const lb_dataset *ds, const lb_batch *batch)
{
    int ok = 1;
    for (int64_t b = 0; b < batch->batch_size; b++) {
        lb_batch one;
        if (lb_dataset_slice(ds, "train", batch->indices[b], 1, &one) != LB_OK)
            return 0;
        if (one.tokens)
            ok &= memcmp(one.tokens, batch->tokens + b * T, T * sizeof(int32_t)) == 0;
        if (one.features)
            ok &= memcmp(lb_tensor_data(one.features), (float *)lb_tensor_data(batch->features) + b * T * 2,
                         T * 2 * sizeof(float)) == 0;
        int64_t per = one.per_position ? T : 1;
        if (one.targets)
            ok &= memcmp(one.targets, batch->targets + b * per, (size_t)per * sizeof(int32_t)) == 0;
        if (one.target_values)
            ok &= one.target_values[0] == batch->target_values[b];
        if (one.distance)
            ok &= one.distance[0] == batch->distance[b];
        ok &= one.lengths[0] == batch->lengths[b];
        lb_batch_free(&one);
    }
    return ok;
}

/* Runs one epoch; indices of the examples seen go to order[]; returns batches. */
static int64_t run_epoch(const lb_dataset *ds, lb_loader *ld, int64_t *order, int64_t *seen, int64_t *last_size)
{
    lb_batch batch;
    int64_t batches = 0, r;
    *seen = 0;
    while ((r = lb_loader_next(ld, &batch)) == 1) {
        CU_ASSERT_TRUE(batch_matches(ds, &batch));
        CU_ASSERT_EQUAL(batch.seq_len, T);
        memcpy(order + *seen, batch.indices, (size_t)batch.batch_size * sizeof *order);
        *seen += batch.batch_size;
        *last_size = batch.batch_size;
        batches++;
    }
    CU_ASSERT_EQUAL(r, 0);
    return batches;
}

static void test_shuffle_covers_each_once(void)
{
    lb_dataset *ds = open_task(LB_TASK_SPIKE);
    lb_loader *ld = lb_loader_new(ds, "train", 5, 1, 0, 11);
    CU_ASSERT_PTR_NOT_NULL_FATAL(ld);
    CU_ASSERT_EQUAL(lb_loader_batches_per_epoch(ld), 8);
    CU_ASSERT_EQUAL(lb_loader_size(ld), N_TRAIN);
    int64_t first[N_TRAIN], second[N_TRAIN], seen = 0, last = 0;
    CU_ASSERT_EQUAL(run_epoch(ds, ld, first, &seen, &last), 8);
    CU_ASSERT_EQUAL(seen, N_TRAIN);
    CU_ASSERT_EQUAL(last, 2); /* 37 = 7 * 5 + 2: the short batch is kept */
    int count[N_TRAIN] = {0}, in_order = 1;
    for (int i = 0; i < N_TRAIN; i++) {
        count[first[i]]++;
        in_order &= first[i] == i;
    }
    for (int i = 0; i < N_TRAIN; i++)
        CU_ASSERT_EQUAL(count[i], 1);
    CU_ASSERT_FALSE(in_order);
    CU_ASSERT_EQUAL(run_epoch(ds, ld, second, &seen, &last), 8);
    CU_ASSERT_EQUAL(seen, N_TRAIN);
    CU_ASSERT_NOT_EQUAL(memcmp(first, second, sizeof first), 0); /* a new order each epoch */
    lb_loader_state st;
    CU_ASSERT_EQUAL(lb_loader_get_state(ld, &st), LB_OK);
    CU_ASSERT_EQUAL(st.epoch, 2);
    CU_ASSERT_EQUAL(st.position, 0);
    lb_loader_free(ld);

    ld = lb_loader_new(ds, "train", 5, 1, 0, 11); /* same seed, same order */
    run_epoch(ds, ld, second, &seen, &last);
    CU_ASSERT_EQUAL(memcmp(first, second, sizeof first), 0);
    lb_loader_free(ld);
    ld = lb_loader_new(ds, "train", 5, 1, 0, 12);
    run_epoch(ds, ld, second, &seen, &last);
    CU_ASSERT_NOT_EQUAL(memcmp(first, second, sizeof first), 0);
    lb_loader_free(ld);
    lb_dataset_close(ds);
}

static void test_drop_last_and_order(void)
{
    lb_dataset *ds = open_task(LB_TASK_RECALL);
    lb_loader *ld = lb_loader_new(ds, "train", 5, 1, 1, 3);
    CU_ASSERT_EQUAL(lb_loader_batches_per_epoch(ld), 7);
    int64_t order[N_TRAIN], seen = 0, last = 0;
    CU_ASSERT_EQUAL(run_epoch(ds, ld, order, &seen, &last), 7);
    CU_ASSERT_EQUAL(seen, 35);
    CU_ASSERT_EQUAL(last, 5);
    lb_loader_free(ld);

    ld = lb_loader_new(ds, "train", 10, 0, 0, 3); /* no shuffle: file order */
    lb_batch batch;
    CU_ASSERT_EQUAL(lb_loader_next(ld, &batch), 1);
    CU_ASSERT_TRUE(batch.per_position);
    for (int64_t i = 0; i < 10; i++)
        CU_ASSERT_EQUAL(batch.indices[i], i);
    CU_ASSERT_TRUE(batch_matches(ds, &batch));
    lb_loader_free(ld);

    ld = lb_loader_new(ds, "test", 8, 1, 0, 3); /* batch larger than the split */
    CU_ASSERT_EQUAL(lb_loader_next(ld, &batch), 1);
    CU_ASSERT_EQUAL(batch.batch_size, 3);
    CU_ASSERT_EQUAL(lb_loader_next(ld, &batch), 0);
    lb_loader_free(ld);
    ld = lb_loader_new(ds, "test", 8, 1, 1, 3); /* ... and dropped */
    CU_ASSERT_EQUAL(lb_loader_batches_per_epoch(ld), 0);
    CU_ASSERT_EQUAL(lb_loader_next(ld, &batch), 0);
    lb_loader_free(ld);
    ld = lb_loader_new(ds, "val", 4, 1, 0, 3); /* empty split: every call ends an epoch */
    CU_ASSERT_EQUAL(lb_loader_next(ld, &batch), 0);
    CU_ASSERT_EQUAL(lb_loader_next(ld, &batch), 0);
    lb_loader_state st;
    lb_loader_get_state(ld, &st);
    CU_ASSERT_EQUAL(st.epoch, 2);
    lb_loader_free(ld);
    lb_dataset_close(ds);
}

/* Batches from a loader restored mid-epoch equal those of the loader that went on. */
static void test_state_resumes_identically(void)
{
    lb_dataset *ds = open_task(LB_TASK_SPIKE);
    lb_loader *a = lb_loader_new(ds, "train", 4, 1, 0, 99);
    lb_batch batch;
    for (int i = 0; i < 10 + 3; i++) /* epoch 0 has 10 batches: stop 3 into epoch 1 */
        lb_loader_next(a, &batch);
    lb_loader_state st;
    CU_ASSERT_EQUAL(lb_loader_get_state(a, &st), LB_OK);
    CU_ASSERT_EQUAL(st.epoch, 1);
    CU_ASSERT_EQUAL(st.position, 8);
    lb_loader *b = lb_loader_new(ds, "train", 4, 1, 0, 12345); /* another seed: the state overrides it */
    CU_ASSERT_EQUAL(lb_loader_set_state(b, &st), LB_OK);
    int same = 1;
    for (int i = 0; i < 30; i++) { /* through the end of epoch 1 and into epoch 3 */
        lb_batch x, y;
        int ra = lb_loader_next(a, &x);
        int64_t xi[4] = {0}, n = ra == 1 ? x.batch_size : 0;
        int32_t xt[4 * T] = {0};
        if (ra == 1) {
            memcpy(xi, x.indices, (size_t)n * sizeof *xi);
            memcpy(xt, x.tokens, (size_t)(n * T) * sizeof *xt);
        }
        int rb = lb_loader_next(b, &y);
        same &= ra == rb;
        if (ra == 1 && rb == 1)
            same &= y.batch_size == n && memcmp(xi, y.indices, (size_t)n * sizeof *xi) == 0 &&
                    memcmp(xt, y.tokens, (size_t)(n * T) * sizeof *xt) == 0;
    }
    CU_ASSERT_TRUE(same);
    lb_loader_state sa, sb;
    lb_loader_get_state(a, &sa);
    lb_loader_get_state(b, &sb);
    CU_ASSERT_EQUAL(sa.epoch, sb.epoch);
    CU_ASSERT_EQUAL(sa.position, sb.position);
    CU_ASSERT_EQUAL(memcmp(&sa.rng, &sb.rng, sizeof sa.rng), 0);

    lb_loader_state bad = st;
    bad.position = N_TRAIN + 1;
    CU_ASSERT_EQUAL(lb_loader_set_state(b, &bad), LB_ERR_VALUE);
    CU_ASSERT_PTR_NOT_NULL(strstr(lb_last_error(), "position 38"));
    lb_loader_free(a);
    lb_loader_free(b);
    lb_dataset_close(ds);
}

static void test_feature_batches(void)
{
    lb_dataset *ds = open_task(LB_TASK_ADDING);
    lb_loader *ld = lb_loader_new(ds, "train", 16, 1, 0, 5);
    lb_batch batch;
    int64_t sizes[3] = {0};
    for (int i = 0; i < 3; i++) {
        CU_ASSERT_EQUAL_FATAL(lb_loader_next(ld, &batch), 1);
        sizes[i] = batch.batch_size;
        CU_ASSERT_PTR_NULL(batch.tokens);
        CU_ASSERT_PTR_NULL(batch.targets);
        CU_ASSERT_PTR_NOT_NULL_FATAL(batch.features);
        CU_ASSERT_EQUAL(batch.features->ndim, 3);
        CU_ASSERT_EQUAL(batch.features->shape[0], batch.batch_size);
        CU_ASSERT_EQUAL(batch.features->shape[1], T);
        CU_ASSERT_EQUAL(batch.features->shape[2], 2);
        CU_ASSERT_TRUE(batch_matches(ds, &batch));
    }
    CU_ASSERT_EQUAL(sizes[0], 16);
    CU_ASSERT_EQUAL(sizes[2], 5); /* 37 = 16 + 16 + 5 */
    CU_ASSERT_EQUAL(lb_loader_next(ld, &batch), 0);
    lb_loader_free(ld);
    lb_dataset_close(ds);
}

/* Shards 0..2 of 3 together return the batches of one loader, part by part (batches of
 * 7 split 2 + 2 + 3; the short last batch of 37 = 5 * 7 + 2 splits 0 + 1 + 1), and a
 * shard's saved state is the whole loader's. */
static void test_shards_partition_each_batch(void)
{
    lb_dataset *ds = open_task(LB_TASK_SPIKE);
    lb_loader *whole = lb_loader_new(ds, "train", 7, 1, 0, 5), *part[3];
    CU_ASSERT_PTR_NOT_NULL_FATAL(whole);
    for (int k = 0; k < 3; k++) {
        part[k] = lb_loader_new(ds, "train", 7, 1, 0, 5);
        CU_ASSERT_PTR_NOT_NULL_FATAL(part[k]);
        CU_ASSERT_EQUAL(lb_loader_set_shard(part[k], k, 3), LB_OK);
    }
    lb_batch b;
    for (int step = 0; step < 8; step++) { /* past the end of the first epoch */
        int r = lb_loader_next(whole, &b);
        int64_t expected[7], n = r == 1 ? b.batch_size : 0, got = 0;
        if (r == 1)
            memcpy(expected, b.indices, (size_t)n * sizeof *expected);
        for (int k = 0; k < 3; k++) {
            lb_batch p;
            CU_ASSERT_EQUAL(lb_loader_next(part[k], &p), r);
            if (r != 1)
                continue;
            CU_ASSERT_EQUAL(p.batch_size, n * (k + 1) / 3 - n * k / 3);
            CU_ASSERT_TRUE(batch_matches(ds, &p));
            for (int64_t i = 0; i < p.batch_size && got + i < 7; i++)
                CU_ASSERT_EQUAL(p.indices[i], expected[got + i]);
            got += p.batch_size;
        }
        CU_ASSERT_EQUAL(got, n);
    }
    lb_loader_state a, c;
    lb_loader_get_state(whole, &a);
    lb_loader_get_state(part[2], &c);
    CU_ASSERT_EQUAL(a.epoch, c.epoch);
    CU_ASSERT_EQUAL(a.position, c.position);
    CU_ASSERT_EQUAL(lb_loader_set_shard(part[0], 3, 3), LB_ERR_VALUE);
    CU_ASSERT_PTR_NOT_NULL(strstr(lb_last_error(), "shard 3 of 3"));
    CU_ASSERT_EQUAL(lb_loader_set_shard(part[0], 0, 8), LB_ERR_VALUE); /* more parts than examples */
    lb_loader_free(whole);
    for (int k = 0; k < 3; k++)
        lb_loader_free(part[k]);
    lb_dataset_close(ds);
}

static void test_loader_errors(void)
{
    lb_dataset *ds = open_task(LB_TASK_LOCAL);
    CU_ASSERT_PTR_NULL(lb_loader_new(ds, "training", 4, 1, 0, 1));
    CU_ASSERT_PTR_NOT_NULL(strstr(lb_last_error(), "unknown split 'training'"));
    CU_ASSERT_PTR_NULL(lb_loader_new(ds, "train", 0, 1, 0, 1));
    CU_ASSERT_PTR_NOT_NULL(strstr(lb_last_error(), "batch size 0"));
    CU_ASSERT_PTR_NULL(lb_loader_new(NULL, "train", 4, 1, 0, 1));
    CU_ASSERT_EQUAL(lb_loader_next(NULL, NULL), -1);
    lb_batch b;
    CU_ASSERT_EQUAL(lb_dataset_slice(ds, "train", -1, 2, &b), LB_ERR_VALUE);
    CU_ASSERT_EQUAL(lb_dataset_slice(ds, "train", 36, 2, &b), LB_ERR_VALUE);
    CU_ASSERT_EQUAL(lb_dataset_slice(ds, "train", 36, 1, &b), LB_OK);
    CU_ASSERT_EQUAL(b.indices[0], 36);
    lb_batch_free(&b);
    CU_ASSERT_PTR_NULL(b.tokens);
    lb_dataset_close(ds);
}

/* lb_dataset_from_arrays: a dataset of the caller's arrays, copied, read back by the
 * loader and by lb_dataset_slice as a file's would be. */
static void test_dataset_from_arrays(void)
{
    /* 3 train and 2 val sequences of T = 4 tokens (V = 6), a class per position (C = 3) */
    int32_t tokens[5 * 4] = {1, 2, 3, 4, 5, 0, 1, 2, 3, 3, 3, 3, 2, 4, 1, 5, 0, 0, 1, 2};
    int32_t targets[5 * 4] = {0, 1, 2, 0, 1, 2, 0, 1, 2, 2, -100, 1, 0, 0, 1, 2, -100, -100, 2, 1};
    lb_array_data d = {.seq_len = 4, .vocab_size = 6, .num_classes = 3, .per_position = 1,
                       .train = {3, tokens, NULL, targets}, .val = {2, tokens + 12, NULL, targets + 12}};
    lb_dataset *ds = lb_dataset_from_arrays(&d, "my arrays");
    CU_ASSERT_PTR_NOT_NULL_FATAL(ds);
    tokens[0] = 5; /* the dataset holds a copy: the loader below still reads 1 */
    CU_ASSERT_STRING_EQUAL(lb_dataset_path(ds), "my arrays");
    CU_ASSERT_STRING_EQUAL(lb_dataset_task_name(ds), "arrays");
    CU_ASSERT_EQUAL(lb_dataset_seq_len(ds), 4);
    CU_ASSERT_EQUAL(lb_dataset_vocab_size(ds), 6);
    CU_ASSERT_EQUAL(lb_dataset_num_classes(ds), 3);
    CU_ASSERT_EQUAL(lb_dataset_per_position(ds), 1);
    CU_ASSERT_EQUAL(lb_dataset_split_size(ds, "train"), 3);
    CU_ASSERT_EQUAL(lb_dataset_split_size(ds, "val"), 2);
    CU_ASSERT_EQUAL(lb_dataset_split_size(ds, "test"), 0);
    lb_batch b;
    CU_ASSERT_EQUAL_FATAL(lb_dataset_slice(ds, "val", 1, 1, &b), LB_OK);
    CU_ASSERT_EQUAL(b.tokens[0], 0);
    CU_ASSERT_EQUAL(b.tokens[3], 2);
    CU_ASSERT_EQUAL(b.targets[0], -100);
    CU_ASSERT_EQUAL(b.targets[3], 1);
    lb_batch_free(&b);
    /* the loader in file order: the first train sequence as given, before the change */
    lb_loader *ld = lb_loader_new(ds, "train", 2, 0, 0, 1);
    CU_ASSERT_PTR_NOT_NULL_FATAL(ld);
    CU_ASSERT_EQUAL(lb_loader_next(ld, &b), 1);
    CU_ASSERT_EQUAL(b.batch_size, 2);
    CU_ASSERT_EQUAL(b.tokens[0], 1);
    CU_ASSERT_EQUAL(b.tokens[5], 0);
    CU_ASSERT_EQUAL(b.targets[6], 0);
    lb_loader_free(ld);
    int64_t counts[3], ignored;
    CU_ASSERT_EQUAL(lb_dataset_label_histogram(ds, "train", counts, &ignored), LB_OK);
    CU_ASSERT_EQUAL(counts[0], 3);
    CU_ASSERT_EQUAL(counts[1], 4);
    CU_ASSERT_EQUAL(counts[2], 4);
    CU_ASSERT_EQUAL(ignored, 1);
    lb_dataset_close(ds);

    /* real-valued inputs [N, T, F], a class per sequence */
    float features[2 * 3 * 2] = {0.5f, -1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11};
    int32_t classes[2] = {1, 0};
    lb_array_data f = {.seq_len = 3, .num_features = 2, .num_classes = 2, .train = {2, NULL, features, classes}};
    ds = lb_dataset_from_arrays(&f, NULL);
    CU_ASSERT_PTR_NOT_NULL_FATAL(ds);
    CU_ASSERT_STRING_EQUAL(lb_dataset_path(ds), "arrays");
    CU_ASSERT_EQUAL(lb_dataset_num_features(ds), 2);
    CU_ASSERT_EQUAL_FATAL(lb_dataset_slice(ds, "train", 0, 2, &b), LB_OK);
    CU_ASSERT_DOUBLE_EQUAL(lb_tensor_get(b.features, (int64_t[]){1, 2, 1}), 11.0, 0);
    CU_ASSERT_DOUBLE_EQUAL(lb_tensor_get(b.features, (int64_t[]){0, 0, 1}), -1.0, 0);
    CU_ASSERT_EQUAL(b.targets[0], 1);
    lb_batch_free(&b);
    lb_dataset_close(ds);
}

/* What lb_dataset_from_arrays refuses, each with a message naming what was wrong. */
static void test_dataset_from_arrays_errors(void)
{
    int32_t tokens[2 * 4] = {1, 2, 3, 4, 5, 0, 1, 9}, targets[2] = {0, 1};
    lb_array_data d = {.seq_len = 4, .vocab_size = 6, .num_classes = 2, .train = {2, tokens, NULL, targets}};
    CU_ASSERT_PTR_NULL(lb_dataset_from_arrays(&d, "a"));
    CU_ASSERT_EQUAL(lb_last_status(), LB_ERR_VALUE);
    CU_ASSERT_PTR_NOT_NULL(strstr(lb_last_error(), "a: train split: tokens [1, 3] is 9, outside [0, 6)"));
    tokens[7] = 2;
    targets[1] = 2;
    CU_ASSERT_PTR_NULL(lb_dataset_from_arrays(&d, "a"));
    CU_ASSERT_PTR_NOT_NULL(strstr(lb_last_error(), "targets [1] is 2, outside [0, 2) and not -100"));
    targets[1] = 1;
    d.val = (lb_array_split){1, tokens, NULL, NULL};
    CU_ASSERT_PTR_NULL(lb_dataset_from_arrays(&d, "a"));
    CU_ASSERT_PTR_NOT_NULL(strstr(lb_last_error(), "a: val split: no targets array"));
    d.val.n = 0;
    d.num_features = 3;
    CU_ASSERT_PTR_NULL(lb_dataset_from_arrays(&d, "a"));
    CU_ASSERT_PTR_NOT_NULL(strstr(lb_last_error(), "give one of them"));
    d.num_features = 0;
    d.train.n = 0;
    CU_ASSERT_PTR_NULL(lb_dataset_from_arrays(&d, "a"));
    CU_ASSERT_PTR_NOT_NULL(strstr(lb_last_error(), "the train split is empty"));
    d.train.n = 2;
    lb_dataset *ds = lb_dataset_from_arrays(&d, "a"); /* all fixed: accepted */
    CU_ASSERT_PTR_NOT_NULL(ds);
    lb_dataset_close(ds);
}

int main(void)
{
    const lb_test_case cases[] = {
        {"a shuffled epoch covers each example exactly once", test_shuffle_covers_each_once},
        {"drop_last, file order, small and empty splits", test_drop_last_and_order},
        {"saved state resumes mid-epoch identically", test_state_resumes_identically},
        {"real-valued batches are float32 [B, T, F] tensors", test_feature_batches},
        {"shards of a loader partition each of its batches", test_shards_partition_each_batch},
        {"bad loader arguments give errors", test_loader_errors},
        {"a dataset from arrays in memory", test_dataset_from_arrays},
        {"a dataset from arrays: what is refused", test_dataset_from_arrays_errors},
        {NULL, NULL},
    };
    return lb_test_main("data loader", cases);
}

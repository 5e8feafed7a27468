/* Data-parallel scaling of the W2 training step (bench/run_distributed runs it with 1
 * and 2 processes and prints the table; see docs/distributed.md).
 *
 *   mpirun -np N bench_distributed DATA.h5 [--batch B] [--reps R] [--warmup W] [--bucket-bytes BYTES]
 *
 * The model is W2's (bench_lookback.c): a 2-layer pre-norm causal transformer, d_model
 * 64, 4 heads, d_ff 256, a linear head on every position; global batch B=16 (--batch) of T=1024
 * positions from DATA.h5 (a recall file, bench/run_distributed writes it), AdamW, one
 * thread per process. Each step goes through lb_trainer_step, so with N > 1 it includes
 * the loader's shard, the gradient allreduce and the step agreement. Rank 0 prints one
 * JSON line: the median step time (the slowest rank's), tokens per second, gradient
 * bytes each rank reduces per step, buckets, the median time per step spent in
 * MPI_Iallreduce + MPI_Wait for the gradients (the transfer and any wait for a slower
 * rank), and the median time of an MPI_Allreduce of the same bytes entered together
 * (after a barrier): the transfer alone. */
#define _POSIX_C_SOURCE 200809L
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#ifdef LB_HAVE_MPI
#include <mpi.h>
#endif

#include "harness.h"
#include "train/distributed.h"
#include "train/trainer.h"

static int compare_doubles(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

static double median(double *v, int n)
{
    qsort(v, (size_t)n, sizeof *v, compare_doubles);
    return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

int main(int argc, char **argv)
{
    if (argc < 2) {
        fprintf(stderr, "usage: mpirun -np N bench_distributed DATA.h5 [--batch B] [--reps R] [--warmup W] "
                        "[--bucket-bytes BYTES]\n");
        return 2;
    }
    int reps = 5, warmup = 1, batch = 16;
    lb_dist_config dc;
    lb_dist_config_default(&dc);
    for (int i = 2; i + 1 < argc; i += 2) {
        if (strcmp(argv[i], "--reps") == 0)
            reps = atoi(argv[i + 1]);
        else if (strcmp(argv[i], "--warmup") == 0)
            warmup = atoi(argv[i + 1]);
        else if (strcmp(argv[i], "--batch") == 0)
            batch = atoi(argv[i + 1]);
        else if (strcmp(argv[i], "--bucket-bytes") == 0)
            dc.bucket_bytes = atoll(argv[i + 1]);
    }
    if (reps < 1 || reps > 1000 || warmup < 0 || batch < 1) {
        fprintf(stderr, "bench_distributed: --reps must be in [1, 1000], --warmup >= 0 and --batch >= 1\n");
        return 2;
    }
    lb_keep_freed_memory();
    if (lb_dist_init() != LB_OK) {
        fprintf(stderr, "bench_distributed: %s\n", lb_last_error());
        return 1;
    }
    bench_set_threads(1);
    lb_dataset *data = lb_dataset_open(argv[1]);
    lb_model_config mc;
    lb_model_config_default(LB_MODEL_TRANSFORMER, &mc);
    if (data) {
        mc.vocab_size = lb_dataset_vocab_size(data);
        mc.num_classes = lb_dataset_num_classes(data);
        mc.max_seq_len = lb_dataset_seq_len(data);
    }
    mc.head = LB_HEAD_EVERY;
    mc.n_layers = 2;
    mc.d_model = 64;
    mc.n_heads = 4;
    mc.d_ff = 256;
    mc.pos = LB_POS_NONE;
    mc.causal = 1;
    mc.dropout = 0;
    lb_train_config tc;
    lb_train_config_default(&tc);
    tc.steps = warmup + reps;
    tc.batch_size = batch;
    tc.threads = 1;
    lb_model *model = data ? lb_model_new(&mc) : NULL;
    lb_trainer *t = model ? lb_trainer_new(model, data, &tc) : NULL;
    if (!t || lb_trainer_distribute(t, &dc) != LB_OK) {
        fprintf(stderr, "bench_distributed: rank %d: %s\n", lb_dist_rank(), lb_last_error());
        lb_dist_abort(1);
        return 1;
    }
    double *step = calloc((size_t)reps, sizeof *step), *comm = calloc((size_t)reps, sizeof *comm);
    lb_step_stats s;
    int64_t tokens = 0;
    for (int i = 0; i < warmup + reps; i++) {
        lb_dist_stats before, after;
        lb_trainer_dist_stats(t, &before);
        if (lb_trainer_step(t, &s) != LB_OK) {
            fprintf(stderr, "bench_distributed: rank %d: %s\n", lb_dist_rank(), lb_last_error());
            lb_dist_abort(1);
            return 1;
        }
        lb_trainer_dist_stats(t, &after);
        if (i >= warmup) {
            step[i - warmup] = s.seconds;
            comm[i - warmup] = after.allreduce_seconds - before.allreduce_seconds;
            tokens = s.tokens;
        }
    }
    lb_dist_stats ds;
    lb_trainer_dist_stats(t, &ds);
    double step_median = median(step, reps), comm_median = median(comm, reps);
    /* The allreduce alone: the same bytes, all ranks entering together (after a barrier),
     * so the time is the transfer and not a wait for a slower rank. */
    double alone_median = 0;
#ifdef LB_HAVE_MPI
    if (lb_dist_size() > 1) {
        enum { ALONE = 21 };
        double alone[ALONE];
        float *buf = calloc((size_t)ds.bytes_per_step / sizeof(float) + 1, sizeof *buf);
        for (int i = 0; buf && i < ALONE; i++) {
            MPI_Barrier(MPI_COMM_WORLD);
            double t0 = bench_now();
            MPI_Allreduce(MPI_IN_PLACE, buf, (int)(ds.bytes_per_step / (int64_t)sizeof(float)), MPI_FLOAT, MPI_SUM,
                          MPI_COMM_WORLD);
            alone[i] = bench_now() - t0;
        }
        alone_median = buf ? median(alone, ALONE) : 0;
        free(buf);
    }
#endif
    if (lb_dist_rank() == 0)
        printf("{\"impl\":\"lookback\",\"workload\":\"W2-dp\",\"processes\":%d,\"batch\":%d,\"threads\":1,\"reps\":%d,"
               "\"median_s\":%.6f,\"tokens_per_s\":%.1f,\"params\":%lld,\"bytes_reduced_per_step\":%lld,"
               "\"buckets\":%lld,\"allreduce_median_s\":%.6f,\"allreduce_alone_s\":%.6f}\n",
               lb_dist_size(), batch, reps, step_median, (double)tokens / step_median,
               (long long)lb_params_numel(lb_model_params(model)), (long long)ds.bytes_per_step,
               (long long)ds.buckets, comm_median, alone_median);
    free(step);
    free(comm);
    lb_trainer_free(t);
    lb_model_free(model);
    lb_dataset_close(data);
    lb_dist_finalize();
    return 0;
}

/* Data-parallel training over MPI processes ("ranks"), with the semantics of
 * PyTorch's DistributedDataParallel, and whole runs spread over ranks.
 *
 * One model is trained by N ranks (on one machine or several, started by mpirun):
 *  - every rank holds the same parameters: rank 0's are broadcast when training starts;
 *  - every rank follows the same seeded shuffled order of the train split and takes
 *    part r of each global batch of B examples, examples [B*r/N, B*(r+1)/N)
 *    (torch.utils.data.DistributedSampler's rule applied to one global batch), so the
 *    global batches are those of one process with batch B;
 *  - each rank's loss is weighted by its share of the global batch's scored targets,
 *    exactly as gradient accumulation weights micro-batches, and the gradients are
 *    summed over ranks with MPI_Allreduce, in buckets of flattened gradients; so the
 *    result is the gradient of the global batch's mean loss;
 *  - clipping sees the global norm and every rank takes the same optimizer step;
 *  - validation batches are split over the ranks and the sums reduced;
 *  - every check_every steps a checksum of the parameters is compared across ranks.
 * N ranks with global batch B and M micro-batches each compute what one process
 * computes with batch B and N*M micro-batches (the summation order of the gradient
 * differs only in the reduction over ranks). Dropout masks are drawn from the same
 * generator on every rank (as DDP ranks seeded alike do), so with dropout the result
 * is not that of one process.
 *
 * Faults: library calls return errors (MPI_ERRORS_RETURN); a program that gets an error
 * on one rank must end them all with lb_dist_abort, as the lookback command does.
 *
 * Without MPI (a build where CMake found none) the same calls work for one process:
 * rank 0 of 1, and lb_dist_init fails when the process was started by an MPI launcher.
 */
#ifndef LB_DISTRIBUTED_H
#define LB_DISTRIBUTED_H

#include "tensor/api.h"

#include <stddef.h>
#include <stdint.h>

#include "tensor/error.h"
#include "train/trainer.h"

LB_API_BEGIN

/* 1 when the library was built with MPI. */
int lb_dist_compiled(void);
/* 1 when the environment shows an MPI launcher started this process (mpirun / mpiexec
 * of Open MPI: OMPI_COMM_WORLD_SIZE; PMI_SIZE or PMIX_RANK of Slurm, Hydra and PMIx). */
int lb_dist_launched(void);
/* The rank the launcher gave this process (OMPI_COMM_WORLD_RANK, PMI_RANK or PMIX_RANK),
 * readable without joining the job; 0 when not launched or not said. */
int lb_dist_launch_rank(void);
/* Joins the MPI job when lb_dist_launched() (MPI_Init_thread, MPI_THREAD_FUNNELED; errors
 * returned, not fatal); does nothing otherwise. LB_ERR_STATE when launched but built
 * without MPI (the message says how to rebuild), or when MPI fails to start. */
lb_status lb_dist_init(void);
/* 1 between a successful lb_dist_init that joined a job and lb_dist_finalize. */
int lb_dist_active(void);
/* This process's rank in [0, size) and the number of ranks (0 and 1 when not active). */
int lb_dist_rank(void);
int lb_dist_size(void);
/* Ranks on this host (OMPI_COMM_WORLD_LOCAL_SIZE; 1 when unknown or not active). */
int lb_dist_local_size(void);
/* Leaves the job (MPI_Finalize) after all ranks reach it. */
void lb_dist_finalize(void);
/* Ends every rank of the job at once with exit code `code` (MPI_Abort); returns only
 * when not active. */
void lb_dist_abort(int code);
/* Waits until every rank reaches it (MPI_Barrier). LB_ERR_STATE when MPI fails. */
lb_status lb_dist_barrier(void);
/* At the end of a program: waits at most timeout_seconds for every rank to reach this
 * call (a non-blocking barrier, polled), then checks that every rank brings the same
 * exit code. LB_OK when they all do (the job can then end normally, every rank with that
 * code); LB_ERR_STATE when a rank did not arrive in time (it is still working, or waits
 * in a collective for this one), when the codes differ, or when MPI fails: the caller
 * then ends the job with lb_dist_abort. LB_OK when not active. */
lb_status lb_dist_same_exit(int code, double timeout_seconds);

/* Checks that every rank passed the same value (a file's size or checksum, a count).
 * Collective. LB_ERR_STATE when they differ: "the ranks disagree on <what>: rank 0 has A,
 * rank r has B (ranks differing from rank 0: ...)", or when MPI fails; LB_ERR_MEMORY.
 * Does nothing when not active. */
lb_status lb_dist_check_same(int64_t value, const char *what);

/* ---- one model on N ranks ---- */

typedef struct lb_dist_config {
    int64_t bucket_bytes; /* gradient bytes per allreduce (a bucket); 0 = one flattened buffer */
    int64_t check_every;  /* steps between parameter checksum comparisons (0 = at the start only) */
} lb_dist_config;

/* Defaults: buckets of 4 MiB, checksums every 100 steps. */
void lb_dist_config_default(lb_dist_config *cfg);

/* Makes `t` one of lb_dist_size() data-parallel replicas. Collective: every rank calls
 * it, after lb_trainer_load when resuming and before the first step. Broadcasts rank 0's
 * parameters, checks that every rank has the same step, data position, options and data
 * (task, seq_len, vocab_size, num_classes, features, target layout, train and val sizes),
 * and sets this rank's part of each global batch. Does nothing when not active or with one
 * rank. Errors: LB_ERR_VALUE when the batch is not divisible by ranks x micro-batches,
 * LB_ERR_STATE when the ranks disagree (names the ranks and what differs) or MPI fails. */
lb_status lb_trainer_distribute(lb_trainer *t, const lb_dist_config *cfg);

/* Communication measured since lb_trainer_distribute. */
typedef struct lb_dist_stats {
    int64_t steps;            /* optimizer steps taken */
    int64_t bytes_per_step;   /* gradient bytes each rank contributes to the allreduce per step */
    int64_t buckets;          /* allreduce calls for the gradient per step */
    double allreduce_seconds; /* wall time spent in gradient allreduces (posting and waiting), summed */
} lb_dist_stats;
/* Zeros when `t` is not distributed. */
void lb_trainer_dist_stats(const lb_trainer *t, lb_dist_stats *out);

/* FNV-1a 64-bit hash of the bytes of every parameter value, in list order. */
uint64_t lb_params_checksum(const lb_params *ps);

/* ---- whole runs spread over ranks ----
 * For work made of independent items (runs of compare or study): item i belongs to
 * rank i mod N. Each rank fills the results of its own items; lb_dist_gather then
 * copies every item's result from its owner to every rank. */

/* 1 when this rank owns item i (always 1 when not active). */
int lb_dist_owns(int64_t item);
/* The rank that owns item i (i mod N; 0 when not active). */
int lb_dist_owner(int64_t item);
/* results: n_items records of item_size bytes (plain data: no pointers). Collective.
 * LB_ERR_STATE when MPI fails. Does nothing when not active. */
lb_status lb_dist_gather(void *results, size_t item_size, int64_t n_items);
/* Sums n values over ranks, in place (every rank gets the sums). Collective; also a
 * barrier. LB_ERR_STATE when MPI fails. Does nothing when not active. */
lb_status lb_dist_sum(int64_t *values, int n);
/* One record of item_size bytes from the owner of `item` to every rank. Collective. */
lb_status lb_dist_share(void *record, size_t item_size, int64_t item);
/* A tensor (any shape and dtype, or NULL) from the owner of `item` to every rank: the
 * other ranks' *t is freed and replaced by a contiguous copy. Collective.
 * LB_ERR_MEMORY, or LB_ERR_STATE when MPI fails. */
lb_status lb_dist_share_tensor(lb_tensor **t, int64_t item);

LB_API_END

#endif

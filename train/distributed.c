#include "train/distributed.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "train/trainer_internal.h"
#include "tensor/clock.h"

#ifdef LB_HAVE_MPI
#include <mpi.h>
#endif

int lb_dist_compiled(void)
{
#ifdef LB_HAVE_MPI
    return 1;
#else
    return 0;
#endif
}

int lb_dist_launched(void)
{
    return getenv("OMPI_COMM_WORLD_SIZE") || getenv("PMI_SIZE") || getenv("PMIX_RANK");
}

int lb_dist_launch_rank(void)
{
    static const char *const names[] = {"OMPI_COMM_WORLD_RANK", "PMI_RANK", "PMIX_RANK"};
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++) {
        const char *v = getenv(names[i]);
        if (v && *v)
            return atoi(v);
    }
    return 0;
}

uint64_t lb_params_checksum(const lb_params *ps)
{
    LB_CHECK_ARG(ps, 0);
    uint64_t h = 1469598103934665603ull;
    for (int i = 0; i < ps->count; i++) {
        const lb_tensor *v = ps->items[i]->value;
        const unsigned char *p = (const unsigned char *)lb_tensor_data(v);
        size_t n = (size_t)lb_tensor_numel(v) * lb_dtype_size(v->dtype);
        for (size_t k = 0; k < n; k++)
            h = (h ^ p[k]) * 1099511628211ull;
    }
    return h;
}

void lb_dist_config_default(lb_dist_config *cfg)
{
    LB_CHECK_ARG(cfg);
    cfg->bucket_bytes = 4 << 20;
    cfg->check_every = 100;
}

#ifdef LB_HAVE_MPI

static int g_active, g_rank, g_size = 1;

/* An MPI error code as an lb_error naming the call. */
static lb_status mpi_fail(int code, const char *call)
{
    char text[MPI_MAX_ERROR_STRING];
    int len = 0;
    if (MPI_Error_string(code, text, &len) != MPI_SUCCESS)
        snprintf(text, sizeof text, "error %d", code);
    return lb_error(LB_ERR_STATE, "%s failed: %s", call, text);
}
#define MPI_CHECK(call) \
    do { \
        int mpi_code_ = (call); \
        if (mpi_code_ != MPI_SUCCESS) \
            return mpi_fail(mpi_code_, #call); \
    } while (0)

lb_status lb_dist_init(void)
{
    if (g_active || !lb_dist_launched())
        return LB_OK;
    int provided = 0, flag = 0;
    MPI_Initialized(&flag);
    if (!flag && MPI_Init_thread(NULL, NULL, MPI_THREAD_FUNNELED, &provided) != MPI_SUCCESS)
        return lb_error(LB_ERR_STATE, "MPI_Init_thread failed: the MPI job could not start");
    MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
    MPI_Comm_rank(MPI_COMM_WORLD, &g_rank);
    MPI_Comm_size(MPI_COMM_WORLD, &g_size);
    g_active = 1;
    return LB_OK;
}

int lb_dist_active(void) { return g_active; }
int lb_dist_rank(void) { return g_active ? g_rank : 0; }
int lb_dist_size(void) { return g_active ? g_size : 1; }

void lb_dist_finalize(void)
{
    if (!g_active)
        return;
    MPI_Finalize();
    g_active = 0;
    g_rank = 0;
    g_size = 1;
}

void lb_dist_abort(int code)
{
    if (g_active)
        MPI_Abort(MPI_COMM_WORLD, code);
}

lb_status lb_dist_barrier(void)
{
    if (g_active)
        MPI_CHECK(MPI_Barrier(MPI_COMM_WORLD));
    return LB_OK;
}

lb_status lb_dist_same_exit(int code, double timeout_seconds)
{
    if (!g_active || g_size == 1)
        return LB_OK;
    MPI_Request request;
    MPI_CHECK(MPI_Ibarrier(MPI_COMM_WORLD, &request));
    double deadline = lb_clock_wall() + timeout_seconds;
    int done = 0;
    while (!done) {
        MPI_CHECK(MPI_Test(&request, &done, MPI_STATUS_IGNORE));
        if (!done && lb_clock_wall() > deadline)
            return lb_error(LB_ERR_STATE, "another rank did not finish within %g s of this one", timeout_seconds);
        if (!done) {
            struct timespec pause = {0, 2000000}; /* 2 ms */
            nanosleep(&pause, NULL);
        }
    }
    int range[2] = {code, -code}, all[2];
    MPI_CHECK(MPI_Allreduce(range, all, 2, MPI_INT, MPI_MAX, MPI_COMM_WORLD));
    if (all[0] != -all[1])
        return lb_error(LB_ERR_STATE, "the ranks ended with different exit codes (%d to %d)", -all[1], all[0]);
    return LB_OK;
}

int lb_dist_owner(int64_t item) { return g_active ? (int)(item % g_size) : 0; }
int lb_dist_owns(int64_t item) { return lb_dist_owner(item) == lb_dist_rank(); }

lb_status lb_dist_sum(int64_t *values, int n)
{
    LB_CHECK_ARG(values, LB_ERR_VALUE);
    if (g_active && g_size > 1)
        MPI_CHECK(MPI_Allreduce(MPI_IN_PLACE, values, n, MPI_INT64_T, MPI_SUM, MPI_COMM_WORLD));
    return LB_OK;
}

lb_status lb_dist_share(void *record, size_t item_size, int64_t item)
{
    LB_CHECK_ARG(record, LB_ERR_VALUE);
    if (!g_active || g_size == 1)
        return LB_OK;
    for (size_t done = 0; done < item_size;) { /* counts are int: large records go in pieces */
        size_t piece = item_size - done < (1u << 30) ? item_size - done : (1u << 30);
        MPI_CHECK(MPI_Bcast((char *)record + done, (int)piece, MPI_BYTE, lb_dist_owner(item), MPI_COMM_WORLD));
        done += piece;
    }
    return LB_OK;
}

lb_status lb_dist_gather(void *results, size_t item_size, int64_t n_items)
{
    LB_CHECK_ARG(results, LB_ERR_VALUE);
    for (int64_t i = 0; i < n_items; i++)
        if (lb_dist_share((char *)results + (size_t)i * item_size, item_size, i) != LB_OK)
            return lb_last_status();
    return LB_OK;
}

lb_status lb_dist_share_tensor(lb_tensor **t, int64_t item)
{
    LB_CHECK_ARG(t, LB_ERR_VALUE);
    if (!g_active || g_size == 1)
        return LB_OK;
    int mine = lb_dist_owns(item);
    int64_t head[2 + LB_MAX_DIMS] = {0}; /* ndim (-1: NULL), dtype, shape */
    head[0] = mine && *t ? (*t)->ndim : -1;
    if (mine && *t) {
        head[1] = (*t)->dtype;
        for (int d = 0; d < (*t)->ndim; d++)
            head[2 + d] = (*t)->shape[d];
    }
    MPI_CHECK(MPI_Bcast(head, 2 + LB_MAX_DIMS, MPI_INT64_T, lb_dist_owner(item), MPI_COMM_WORLD));
    lb_tensor *buf = NULL;
    if (head[0] >= 0) {
        buf = mine ? lb_tensor_copy(*t, (lb_dtype)head[1]) : lb_tensor_zeros((lb_dtype)head[1], (int)head[0], head + 2);
        if (!buf) /* the other ranks wait in the broadcast: the caller ends them (lb_dist_abort) */
            return lb_error(LB_ERR_MEMORY, "sharing a tensor between ranks: out of memory");
        size_t bytes = (size_t)lb_tensor_numel(buf) * lb_dtype_size(buf->dtype);
        lb_status st = lb_dist_share(lb_tensor_data(buf), bytes, item);
        if (st != LB_OK) {
            lb_tensor_free(buf);
            return st;
        }
    }
    if (mine) {
        lb_tensor_free(buf);
    } else {
        lb_tensor_free(*t);
        *t = buf;
    }
    return LB_OK;
}

/* ---- data-parallel replicas ---- */

/* A run of consecutive parameters whose gradients are reduced in one call. */
typedef struct bucket {
    int first, count;   /* parameters [first, first + count) of the list */
    int64_t numel;      /* scalars of those parameters */
    MPI_Request request;
} bucket;

struct lb_dist_state {
    int rank, size;
    lb_dist_config cfg;
    MPI_Datatype type;  /* MPI_FLOAT or MPI_DOUBLE: the parameters' dtype */
    size_t elem;        /* bytes per scalar */
    char *buffer;       /* every gradient, flattened in parameter order */
    int64_t *offset;    /* [count] where each parameter's gradient starts in buffer (scalars) */
    bucket *buckets;
    int n_buckets;
    double *small;      /* [5 + count] the step's agreement vector */
    int stop_agreed;
    lb_dist_stats stats;
};

void lb_dist_state_free(lb_dist_state *d)
{
    if (!d)
        return;
    free(d->buffer);
    free(d->offset);
    free(d->buckets);
    free(d->small);
    free(d);
}

void lb_trainer_dist_stats(const lb_trainer *t, lb_dist_stats *out)
{
    LB_CHECK_ARG(t);
    LB_CHECK_ARG(out);
    memset(out, 0, sizeof *out);
    if (t->dist)
        *out = t->dist->stats;
}

int lb_dist_stop_agreed(const lb_trainer *t) { return t->dist->stop_agreed; }

/* The ranks whose value in all [g_size] (values of `width` bytes) differs from rank 0's:
 * the first returned (-1: none), every one listed in differ ("1, 3"). */
static int ranks_differing(const void *all, size_t width, char *differ, size_t size)
{
    const char *v = all;
    size_t used = 0;
    int first = -1;
    differ[0] = '\0';
    for (int r = 1; r < g_size; r++)
        if (memcmp(v + (size_t)r * width, v, width) != 0) {
            if (first < 0)
                first = r;
            if (used + 16 < size)
                used += (size_t)snprintf(differ + used, size - used, "%s%d", used ? ", " : "", r);
        }
    return first;
}

/* Every rank's value of x; LB_ERR_STATE naming the first rank that differs from rank 0
 * and every rank that differs. */
static lb_status check_same(int64_t x, const char *what, int64_t *all)
{
    MPI_CHECK(MPI_Allgather(&x, 1, MPI_INT64_T, all, 1, MPI_INT64_T, MPI_COMM_WORLD));
    char differ[256];
    int first = ranks_differing(all, sizeof *all, differ, sizeof differ);
    if (first < 0)
        return LB_OK;
    return lb_error(LB_ERR_STATE, "the ranks disagree on %s: rank 0 has %lld, rank %d has %lld (ranks differing from "
                    "rank 0: %s)", what, (long long)all[0], first, (long long)all[first], differ);
}

lb_status lb_dist_check_same(int64_t value, const char *what)
{
    LB_CHECK_ARG(what, LB_ERR_VALUE);
    if (!g_active || g_size == 1)
        return LB_OK;
    int64_t *all = malloc((size_t)g_size * sizeof *all);
    if (!all)
        return lb_error(LB_ERR_MEMORY, "comparing %s across ranks: out of memory", what ? what : "a value");
    lb_status st = check_same(value, what ? what : "a value", all);
    free(all);
    return st;
}

/* The data's shape as every rank must see it: task, T, vocabulary, classes, features,
 * target layout, split sizes. LB_ERR_STATE naming the ranks and what differs. */
static lb_status check_same_data(const lb_dataset *ds, int64_t *all)
{
    const struct {
        int64_t value;
        const char *what;
    } items[] = {
        {lb_dataset_task(ds), "the data file's task (every rank must read the same data file)"},
        {lb_dataset_seq_len(ds), "the data file's seq_len (every rank must read the same data file)"},
        {lb_dataset_vocab_size(ds), "the data file's vocab_size (every rank must read the same data file)"},
        {lb_dataset_num_classes(ds), "the data file's num_classes (every rank must read the same data file)"},
        {lb_dataset_num_features(ds), "the data file's features (every rank must read the same data file)"},
        {lb_dataset_per_position(ds), "the data file's targets per position (every rank must read the same data file)"},
        {lb_dataset_split_size(ds, "train"), "the data file's train examples (every rank must read the same data file)"},
        {lb_dataset_split_size(ds, "val"), "the data file's val examples (every rank must read the same data file)"},
    };
    for (size_t i = 0; i < sizeof items / sizeof items[0]; i++) {
        lb_status st = check_same(items[i].value, items[i].what, all);
        if (st != LB_OK)
            return st;
    }
    return LB_OK;
}

/* Options that must be the same everywhere, hashed. */
static int64_t config_hash(const lb_train_config *c)
{
    double fields[] = {(double)c->steps, (double)c->batch_size, (double)c->micro_batches, c->optim.lr,
                       c->optim.weight_decay, c->clip, (double)c->seed, (double)c->optim.kind,
                       (double)c->schedule.kind, (double)c->schedule.warmup_steps, (double)c->eval_every,
                       (double)c->eval_examples, c->time_budget};
    uint64_t h = 1469598103934665603ull;
    const unsigned char *p = (const unsigned char *)fields;
    for (size_t k = 0; k < sizeof fields; k++)
        h = (h ^ p[k]) * 1099511628211ull;
    return (int64_t)(h >> 1);
}

static lb_status compare_checksums(lb_trainer *t, int64_t step)
{
    uint64_t mine = lb_params_checksum(lb_model_params(t->model));
    uint64_t *all = malloc((size_t)g_size * sizeof *all);
    if (!all)
        return lb_error(LB_ERR_MEMORY, "parameter checksum: out of memory");
    int code = MPI_Allgather(&mine, 1, MPI_UINT64_T, all, 1, MPI_UINT64_T, MPI_COMM_WORLD);
    if (code != MPI_SUCCESS) {
        free(all);
        return mpi_fail(code, "MPI_Allgather");
    }
    char differ[256];
    int first = ranks_differing(all, sizeof *all, differ, sizeof differ);
    lb_status st = LB_OK;
    if (first >= 0)
        st = lb_error(LB_ERR_STATE,
                      "the parameters diverged after step %lld: rank 0 has checksum %016llx, rank %d has %016llx "
                      "(ranks differing from rank 0: %s); a rank computed a different update (mixed builds or "
                      "libraries on the hosts, or a hardware fault)",
                      (long long)step, (unsigned long long)all[0], first, (unsigned long long)all[first], differ);
    free(all);
    return st;
}

lb_status lb_trainer_distribute(lb_trainer *t, const lb_dist_config *cfg)
{
    LB_CHECK_ARG(t, LB_ERR_VALUE);
    if (!g_active || g_size == 1 || t->dist)
        return LB_OK;
    lb_dist_config c;
    if (cfg)
        c = *cfg;
    else
        lb_dist_config_default(&c);
    if (c.bucket_bytes < 0 || c.check_every < 0)
        return lb_error(LB_ERR_VALUE, "distributed config: bucket bytes and check-every must be >= 0");
    const lb_train_config *tc = &t->cfg;
    if (tc->batch_size % ((int64_t)g_size * tc->micro_batches) != 0)
        return lb_error(LB_ERR_VALUE,
                        "--batch %lld is not divisible by %d ranks x --micro-batches %lld; choose a --batch that is a "
                        "multiple of %lld",
                        (long long)tc->batch_size, g_size, (long long)tc->micro_batches,
                        (long long)((int64_t)g_size * tc->micro_batches));
    lb_params *ps = lb_model_params(t->model);
    lb_dtype dtype = ps->count > 0 ? ps->items[0]->value->dtype : LB_FLOAT32;
    for (int i = 0; i < ps->count; i++)
        if (ps->items[i]->value->dtype != dtype)
            return lb_error(LB_ERR_DTYPE, "distributed training: parameter %s has another dtype than %s",
                            ps->items[i]->name, ps->items[0]->name);
    int64_t *all = malloc((size_t)g_size * sizeof *all);
    if (!all)
        return lb_error(LB_ERR_MEMORY, "distributed training: out of memory");
    lb_loader_state ls;
    lb_loader_get_state(t->loader, &ls);
    lb_status st = check_same(t->step, "the step to start from (were they given different checkpoints?)", all);
    if (st == LB_OK)
        st = check_same(ls.epoch * (int64_t)1 << 32 ^ ls.position, "the data position (epoch, example)", all);
    if (st == LB_OK)
        st = check_same(config_hash(tc), "the training options (run every rank with the same options)", all);
    if (st == LB_OK)
        st = check_same(lb_params_numel(ps), "the number of parameters (the same model on every rank?)", all);
    if (st == LB_OK)
        st = check_same_data(t->data, all);
    free(all);
    if (st != LB_OK)
        return st;

    lb_dist_state *d = calloc(1, sizeof *d);
    if (!d)
        return lb_error(LB_ERR_MEMORY, "distributed training: out of memory");
    d->rank = g_rank;
    d->size = g_size;
    d->cfg = c;
    d->type = dtype == LB_FLOAT64 ? MPI_DOUBLE : MPI_FLOAT;
    d->elem = lb_dtype_size(dtype);
    int64_t total = lb_params_numel(ps);
    d->buffer = malloc((size_t)(total > 0 ? total : 1) * d->elem);
    d->offset = malloc((size_t)(ps->count > 0 ? ps->count : 1) * sizeof *d->offset);
    d->buckets = malloc((size_t)(ps->count > 0 ? ps->count : 1) * sizeof *d->buckets);
    d->small = malloc((size_t)(5 + ps->count) * sizeof *d->small);
    if (!d->buffer || !d->offset || !d->buckets || !d->small) {
        lb_dist_state_free(d);
        return lb_error(LB_ERR_MEMORY, "distributed training: out of memory for %lld gradients", (long long)total);
    }
    /* Buckets from the last parameter backwards (the order backward produces them, as DDP). */
    int64_t at = 0;
    for (int i = 0; i < ps->count; i++) {
        d->offset[i] = at;
        at += lb_tensor_numel(ps->items[i]->value);
    }
    int64_t limit = c.bucket_bytes > 0 ? c.bucket_bytes / (int64_t)d->elem : total;
    if (limit < 1)
        limit = 1;
    for (int i = ps->count - 1; i >= 0;) {
        bucket *b = &d->buckets[d->n_buckets++];
        b->count = 0;
        b->numel = 0;
        do {
            b->numel += lb_tensor_numel(ps->items[i]->value);
            b->count++;
            i--;
        } while (i >= 0 && b->numel + lb_tensor_numel(ps->items[i]->value) <= limit);
        b->first = i + 1;
    }
    d->stats.bytes_per_step = total * (int64_t)d->elem;
    d->stats.buckets = d->n_buckets;

    /* Rank 0's parameters everywhere. */
    for (int i = 0; i < ps->count && st == LB_OK; i++) {
        lb_tensor *v = ps->items[i]->value;
        int code = MPI_Bcast(lb_tensor_data(v), (int)lb_tensor_numel(v), d->type, 0, MPI_COMM_WORLD);
        if (code != MPI_SUCCESS)
            st = mpi_fail(code, "MPI_Bcast of the parameters");
    }
    if (st == LB_OK)
        st = lb_loader_set_shard(t->loader, g_rank, g_size);
    if (st != LB_OK) {
        lb_dist_state_free(d);
        return st;
    }
    t->dist = d;
    return LB_OK;
}

lb_status lb_dist_total_scored(lb_trainer *t, int64_t *scored)
{
    int64_t local = *scored;
    MPI_CHECK(MPI_Allreduce(&local, scored, 1, MPI_INT64_T, MPI_SUM, MPI_COMM_WORLD));
    return LB_OK;
}

/* Sums the gradients over ranks, bucket by bucket: each bucket is packed, its
 * non-blocking allreduce started, and the next packed while it runs. Parameters
 * without a gradient on a rank count as zeros there; present[i] says whether any
 * rank had one (if none did, the gradient stays NULL, and the optimizer skips it). */
static lb_status reduce_gradients(lb_dist_state *d, lb_params *ps, const double *present)
{
    double t0 = lb_clock_wall();
    for (int k = 0; k < d->n_buckets; k++) {
        bucket *b = &d->buckets[k];
        for (int i = b->first; i < b->first + b->count; i++) {
            char *dst = d->buffer + (size_t)d->offset[i] * d->elem;
            const lb_tensor *g = ps->items[i]->grad;
            size_t bytes = (size_t)lb_tensor_numel(ps->items[i]->value) * d->elem;
            if (g)
                memcpy(dst, lb_tensor_data(g), bytes);
            else
                memset(dst, 0, bytes);
        }
        char *start = d->buffer + (size_t)d->offset[b->first] * d->elem;
        int code = MPI_Iallreduce(MPI_IN_PLACE, start, (int)b->numel, d->type, MPI_SUM, MPI_COMM_WORLD, &b->request);
        if (code != MPI_SUCCESS)
            return mpi_fail(code, "MPI_Iallreduce of the gradients");
    }
    for (int k = 0; k < d->n_buckets; k++) {
        bucket *b = &d->buckets[k];
        int code = MPI_Wait(&b->request, MPI_STATUS_IGNORE);
        if (code != MPI_SUCCESS)
            return mpi_fail(code, "MPI_Wait for the gradients");
        for (int i = b->first; i < b->first + b->count; i++) {
            lb_var *p = ps->items[i];
            if (present[i] == 0)
                continue;
            if (!p->grad && !(p->grad = lb_tensor_zeros(p->value->dtype, p->value->ndim, p->value->shape)))
                return lb_last_status();
            memcpy(lb_tensor_data(p->grad), d->buffer + (size_t)d->offset[i] * d->elem,
                   (size_t)lb_tensor_numel(p->value) * d->elem);
        }
    }
    d->stats.allreduce_seconds += lb_clock_wall() - t0;
    return LB_OK;
}

lb_status lb_dist_reduce_step(lb_trainer *t, lb_status local, double *loss_sum, int64_t *correct, int64_t *counted)
{
    lb_dist_state *d = t->dist;
    lb_params *ps = lb_model_params(t->model);
    double *v = d->small;
    /* failures, stop requests, the step's sums, and which gradients exist */
    v[0] = local != LB_OK;
    v[1] = t->stop_requested != 0;
    v[2] = *loss_sum;
    v[3] = (double)*correct;
    v[4] = (double)*counted;
    for (int i = 0; i < ps->count; i++)
        v[5 + i] = ps->items[i]->grad != NULL;
    MPI_CHECK(MPI_Allreduce(MPI_IN_PLACE, v, 5 + ps->count, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD));
    d->stop_agreed = v[1] > 0;
    if (v[0] > 0) {
        /* The lowest failed rank and its status, so every rank reports the same. */
        int mine[2] = {local != LB_OK ? d->rank : g_size, (int)local}, lowest[2] = {0, 0};
        MPI_CHECK(MPI_Allreduce(mine, lowest, 1, MPI_2INT, MPI_MINLOC, MPI_COMM_WORLD));
        if (local != LB_OK)
            return local;
        return lb_error((lb_status)lowest[1], "step %lld failed on rank %d (%g rank%s failed); the parameters were "
                        "not updated", (long long)t->step + 1, lowest[0], v[0], v[0] == 1 ? "" : "s");
    }
    *loss_sum = v[2];
    *correct = (int64_t)llround(v[3]);
    *counted = (int64_t)llround(v[4]);
    return reduce_gradients(d, ps, v + 5);
}

lb_status lb_dist_end_step(lb_trainer *t, double *seconds, double *budget_seconds)
{
    lb_dist_state *d = t->dist;
    /* The slowest rank's times, so that every rank stops at the same step. */
    double mine[2] = {*seconds, *budget_seconds}, all[2];
    MPI_CHECK(MPI_Allreduce(mine, all, 2, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD));
    *seconds = all[0];
    *budget_seconds = all[1];
    d->stats.steps++;
    if (d->cfg.check_every > 0 && t->step % d->cfg.check_every == 0)
        return compare_checksums(t, t->step);
    return LB_OK;
}

lb_status lb_dist_evaluate(lb_trainer *t, const char *split, int64_t max_examples, int64_t batch_size,
                           lb_eval_result *out)
{
    double loss_sum = 0;
    int64_t correct = 0;
    lb_graph *g = lb_trainer_eval_graph(t);
    lb_status st = g ? lb_evaluate_part(t->model, t->data, split, max_examples, batch_size, 0, t->dist->rank,
                                        t->dist->size, g, out, &loss_sum, &correct, NULL)
                     : lb_last_status();
    /* Every rank joins the reduction, also after a local failure, so none waits forever. */
    double v[5] = {st != LB_OK, loss_sum, (double)correct, (double)out->scored, (double)out->examples};
    MPI_CHECK(MPI_Allreduce(MPI_IN_PLACE, v, 5, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD));
    if (st != LB_OK)
        return st;
    if (v[0] > 0)
        return lb_error(LB_ERR_STATE, "validation failed on another rank");
    out->scored = (int64_t)llround(v[3]);
    out->examples = (int64_t)llround(v[4]);
    /* the confusion matrices add up; the average precision needs every score (NAN here) */
    MPI_CHECK(MPI_Allreduce(MPI_IN_PLACE, out->classes.confusion, LB_METRICS_MAX_CLASSES * LB_METRICS_MAX_CLASSES,
                            MPI_INT64_T, MPI_SUM, MPI_COMM_WORLD));
    out->average_precision = NAN;
    lb_eval_finish(out, v[1], (int64_t)llround(v[2]), lb_dataset_is_regression(t->data));
    return LB_OK;
}

#else /* built without MPI: one process */

lb_status lb_dist_init(void)
{
    if (!lb_dist_launched())
        return LB_OK;
    return lb_error(LB_ERR_STATE, "this process was started by an MPI launcher (mpirun), but lookback was built "
                                  "without MPI: install libopenmpi-dev and openmpi-bin and rebuild (./run build) "
                                  "to train on several processes");
}

int lb_dist_active(void) { return 0; }
int lb_dist_rank(void) { return 0; }
int lb_dist_size(void) { return 1; }
void lb_dist_finalize(void) {}
void lb_dist_abort(int code) { (void)code; }
lb_status lb_dist_barrier(void) { return LB_OK; }
lb_status lb_dist_same_exit(int code, double timeout_seconds) { return LB_OK; }
int lb_dist_owner(int64_t item) { return 0; }
int lb_dist_owns(int64_t item) { return 1; }
lb_status lb_dist_share(void *record, size_t item_size, int64_t item) { return LB_OK; }
lb_status lb_dist_sum(int64_t *values, int n) { return LB_OK; }
lb_status lb_dist_gather(void *results, size_t item_size, int64_t n_items) { return LB_OK; }
lb_status lb_dist_share_tensor(lb_tensor **t, int64_t item) { return LB_OK; }
lb_status lb_dist_check_same(int64_t value, const char *what)
{
    LB_CHECK_ARG(what, LB_ERR_VALUE);
    return LB_OK;
}

struct lb_dist_state {
    int unused;
};

void lb_dist_state_free(lb_dist_state *d) { free(d); }
lb_status lb_trainer_distribute(lb_trainer *t, const lb_dist_config *cfg) { return LB_OK; }
void lb_trainer_dist_stats(const lb_trainer *t, lb_dist_stats *out) { memset(out, 0, sizeof *out); }
int lb_dist_stop_agreed(const lb_trainer *t) { return 0; }
lb_status lb_dist_total_scored(lb_trainer *t, int64_t *scored) { return LB_OK; }
lb_status lb_dist_reduce_step(lb_trainer *t, lb_status local, double *loss_sum, int64_t *correct, int64_t *counted)
{
    return local;
}
lb_status lb_dist_end_step(lb_trainer *t, double *seconds, double *budget_seconds) { return LB_OK; }
lb_status lb_dist_evaluate(lb_trainer *t, const char *split, int64_t max_examples, int64_t batch_size,
                           lb_eval_result *out)
{
    return lb_evaluate(t->model, t->data, split, max_examples, batch_size, 0, out, NULL);
}

#endif

int lb_dist_local_size(void)
{
    const char *s = getenv("OMPI_COMM_WORLD_LOCAL_SIZE");
    int n = s ? atoi(s) : 1;
    return lb_dist_active() && n > 0 ? n : 1;
}

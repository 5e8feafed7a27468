/* Checkpoints in HDF5 (format: docs/training.md).
 *
 *   /                 attributes: format "lookback-checkpoint", format_version, step,
 *                     elapsed_seconds, budget_spent_seconds (absent in older checkpoints:
 *                     elapsed_seconds), data_file, data_task (absent in older checkpoints),
 *                     interval.* (the metrics' train row so far), best.step / best.metric /
 *                     best.evals_since (the best validation so far; absent in older
 *                     checkpoints), every model config field as
 *                     "model.<field>", the optimizer kind and hyperparameters as "optim.<field>"
 *   /params/<name>    every parameter, its dtype and shape
 *   /optim/<name>     every optimizer state tensor (step.<p>, exp_avg.<p>, ...)
 *   /rng/dropout      uint64 [4]  dropout generator state
 *   /rng/loader       uint64 [4]  data-order generator state at the start of the epoch
 *   /loader           attributes epoch, position
 *
 * Every dataset carries an attribute crc32 (uint64): the CRC-32 of its values as
 * stored (little-endian), checked on loading so that a flipped bit is reported. The
 * model config attributes are covered the same way: root attributes model_fields (the
 * members written, comma-separated) and model_crc32 (uint64: the CRC-32 of the text
 * "member=value\n" of each, values as lb_model_field_format gives them), so a deleted
 * or changed model.* attribute is reported instead of read as a default.
 * Checkpoints written before these existed load without the checks.
 */
#include <errno.h>
#include <fcntl.h>
#include <hdf5.h>
#include <libgen.h>
#include <math.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zlib.h>

#include "data/events.h"
#include "data/h5io.h"
#include "data/output.h"
#include "data/text.h"
#include "tensor/kernels.h"
#include "train/trainer_internal.h"

enum { CHECKPOINT_FORMAT_VERSION = 1 };
static const char *CHECKPOINT_FORMAT = "lookback-checkpoint";

/* ---- the model config as attributes "model.<member>", one per row of the field list ---- */

/* The config's checksum covers the text "member=value\n" of every field the writer
 * wrote, in the order of MODEL_FIELDS_ATTR (its comma-separated members). */
static const char *MODEL_FIELDS_ATTR = "model_fields", *MODEL_CRC_ATTR = "model_crc32";
enum { MODEL_FIELDS_MAX = 4096 };

static uLong config_line_crc(uLong crc, const lb_model_config *cfg, const lb_model_field *f)
{
    char line[160], text[64];
    int len = snprintf(line, sizeof line, "%s=%s\n", f->member, lb_model_field_format(cfg, f, text, sizeof text));
    return crc32(crc, (const Bytef *)line, (uInt)(len < (int)sizeof line ? len : (int)sizeof line - 1));
}

static lb_status write_model_config(hid_t file, const lb_model_config *cfg, const char *path)
{
    int n;
    const lb_model_field *fields = lb_model_fields(&n);
    char list[MODEL_FIELDS_MAX] = "";
    uLong crc = crc32(0L, Z_NULL, 0);
    for (int i = 0; i < n; i++) {
        size_t used = strlen(list);
        snprintf(list + used, sizeof list - used, "%s%s", used ? "," : "", fields[i].member);
        crc = config_line_crc(crc, cfg, &fields[i]);
    }
    lb_status st = lb_h5_write_attr_string(file, MODEL_FIELDS_ATTR, list, path);
    if (st == LB_OK)
        st = lb_h5_write_attr_uint(file, MODEL_CRC_ATTR, (uint64_t)crc, path);
    if (st != LB_OK)
        return st;
    for (int i = 0; i < n; i++) {
        const lb_model_field *f = &fields[i];
        const char *p = (const char *)cfg + f->offset;
        char name[96], text[64];
        snprintf(name, sizeof name, "model.%s", f->member);
        switch (f->type) {
        case LB_FIELD_INT64: st = lb_h5_write_attr_int(file, name, *(const int64_t *)p, path); break;
        case LB_FIELD_INT: st = lb_h5_write_attr_int(file, name, *(const int *)p, path); break;
        case LB_FIELD_REAL: st = lb_h5_write_attr_real(file, name, *(const double *)p, path); break;
        case LB_FIELD_U64: st = lb_h5_write_attr_uint(file, name, *(const uint64_t *)p, path); break;
        default: st = lb_h5_write_attr_string(file, name, lb_model_field_format(cfg, f, text, sizeof text), path);
        }
        if (st != LB_OK)
            return st;
    }
    return LB_OK;
}

/* Checks the config read against its checksum (checkpoints written before it had none:
 * nothing to check). A field the writer wrote must be there; a field this version does
 * not know (a newer writer) leaves the config unchecked. */
static lb_status verify_model_config(hid_t file, const lb_model_config *cfg, const char *path)
{
    if (!lb_h5_has_attr(file, MODEL_CRC_ATTR))
        return LB_OK;
    static char list[MODEL_FIELDS_MAX];
    uint64_t stored = 0;
    if (lb_h5_read_attr_uint(file, MODEL_CRC_ATTR, LB_H5_U64, &stored, path) != LB_OK ||
        lb_h5_read_attr_string(file, MODEL_FIELDS_ATTR, list, sizeof list, path) != LB_OK)
        return lb_error(LB_ERR_FORMAT, "%s: the checkpoint is damaged: the checksum of its model config (attributes "
                        "'%s', '%s') cannot be read: %s", path, MODEL_CRC_ATTR, MODEL_FIELDS_ATTR, lb_last_error());
    int n;
    const lb_model_field *fields = lb_model_fields(&n);
    uLong crc = crc32(0L, Z_NULL, 0);
    char *save = NULL;
    for (char *member = strtok_r(list, ",", &save); member; member = strtok_r(NULL, ",", &save)) {
        const lb_model_field *f = NULL;
        for (int i = 0; i < n && !f; i++)
            if (strcmp(fields[i].member, member) == 0)
                f = &fields[i];
        if (!f)
            return LB_OK;
        char name[96];
        snprintf(name, sizeof name, "model.%s", member);
        if (!lb_h5_has_attr(file, name))
            return lb_error(LB_ERR_FORMAT, "%s: the checkpoint is damaged: its model config attribute '%s' is missing "
                            "(the checksum '%s' covers it)", path, name, MODEL_CRC_ATTR);
        crc = config_line_crc(crc, cfg, f);
    }
    if ((uint64_t)crc != stored)
        return lb_error(LB_ERR_FORMAT, "%s: the checkpoint is damaged: its model config attributes (model.*) do not "
                        "match their checksum (%s stored %08llx, computed %08llx)", path, MODEL_CRC_ATTR,
                        (unsigned long long)stored, (unsigned long long)crc);
    return LB_OK;
}

/* Reads "model.kind", starts from that family's defaults, then reads every field the
 * file has: a checkpoint written before a field existed keeps the field's default. */
static lb_status read_model_config(hid_t file, lb_model_config *cfg, const char *path)
{
    char text[64];
    lb_model_kind kind;
    if (lb_h5_read_attr_string(file, "model.kind", text, sizeof text, path) != LB_OK ||
        lb_model_kind_parse(text, &kind) != LB_OK)
        return lb_error(LB_ERR_FORMAT, "%s: model config attribute 'model.kind' is missing or invalid: %s", path,
                        lb_last_error());
    lb_model_config_default(kind, cfg);
    int n;
    const lb_model_field *fields = lb_model_fields(&n);
    for (int i = 0; i < n; i++) {
        const lb_model_field *f = &fields[i];
        char *p = (char *)cfg + f->offset;
        char name[96];
        int64_t iv = 0;
        lb_status st = LB_OK;
        snprintf(name, sizeof name, "model.%s", f->member);
        if (!lb_h5_has_attr(file, name))
            continue;
        switch (f->type) {
        case LB_FIELD_INT64: st = lb_h5_read_attr_int(file, name, LB_H5_I64, (int64_t *)p, path); break;
        case LB_FIELD_INT:
            if ((st = lb_h5_read_attr_int(file, name, LB_H5_I64, &iv, path)) == LB_OK && (iv < INT32_MIN || iv > INT32_MAX))
                st = lb_error(LB_ERR_FORMAT, "%lld does not fit an int", (long long)iv);
            *(int *)p = (int)iv;
            break;
        case LB_FIELD_REAL: st = lb_h5_read_attr_real(file, name, LB_H5_F64, (double *)p, path); break;
        case LB_FIELD_U64: st = lb_h5_read_attr_uint(file, name, LB_H5_U64, (uint64_t *)p, path); break;
        default:
            if ((st = lb_h5_read_attr_string(file, name, text, sizeof text, path)) == LB_OK)
                st = lb_model_field_set(cfg, f, text);
        }
        if (st != LB_OK)
            return lb_error(LB_ERR_FORMAT, "%s: model config attribute '%s' is invalid: %s", path, name,
                            lb_last_error());
    }
    return verify_model_config(file, cfg, path);
}

/* LB_OK when the two configs describe the same model; else an error naming the first
 * field that differs. Fields that only affect initialisation, and fields the
 * checkpoint's model does not use (max_seq_len without learned positions, window
 * outside local attention, ...), are not compared. */
static lb_status compare_model_config(const lb_model_config *saved, const lb_model_config *model, const char *path)
{
    int n;
    const lb_model_field *fields = lb_model_fields(&n);
    for (int i = 0; i < n; i++) {
        const lb_model_field *f = &fields[i];
        if ((f->flags & LB_FIELD_INIT) || !lb_model_field_applies(f, saved))
            continue;
        char ta[64], tb[64];
        lb_model_field_format(saved, f, ta, sizeof ta);
        lb_model_field_format(model, f, tb, sizeof tb);
        if (strcmp(ta, tb) != 0)
            return lb_error(LB_ERR_VALUE, "%s: the checkpoint's model has %s = %s but this model has %s = %s", path,
                            f->member, ta, f->member, tb);
    }
    return LB_OK;
}

/* ---- tensors ---- */

static hid_t native_type(lb_dtype dtype) { return dtype == LB_FLOAT32 ? H5T_NATIVE_FLOAT : H5T_NATIVE_DOUBLE; }

/* CRC-32 of n bytes (zlib's crc32, fed in pieces that fit its uInt length). */
static uint64_t checksum(const void *data, size_t n)
{
    uLong crc = crc32(0L, Z_NULL, 0);
    const Bytef *p = data;
    while (n > 0) {
        uInt part = n > (1u << 30) ? (1u << 30) : (uInt)n;
        crc = crc32(crc, p, part);
        p += part;
        n -= part;
    }
    return (uint64_t)crc;
}

/* One dataset of `type` holding `data` (rank 0 = scalar), with its crc32 attribute. */
static lb_status write_dataset(hid_t group, const char *group_name, const char *name, hid_t type, int rank,
                               const hsize_t *dims, const void *data, size_t bytes, const char *path)
{
    hid_t space = rank ? H5Screate_simple(rank, dims, NULL) : H5Screate(H5S_SCALAR);
    hid_t dset = space >= 0 ? H5Dcreate2(group, name, type, space, H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT) : -1;
    herr_t err = dset >= 0 ? H5Dwrite(dset, type, H5S_ALL, H5S_ALL, H5P_DEFAULT, data) : -1;
    lb_status st = err < 0 ? lb_error(LB_ERR_IO, "%s: cannot write dataset /%s/%s: %s", path,
                                      group_name, name, lb_h5_cause())
                           : lb_h5_write_attr_uint(dset, "crc32", checksum(data, bytes), path);
    lb_h5_close(dset);
    lb_h5_close(space);
    return st;
}

static lb_status write_tensor(hid_t group, const char *group_name, const char *name, const lb_tensor *t,
                              const char *path)
{
    hsize_t dims[LB_MAX_DIMS];
    for (int i = 0; i < t->ndim; i++)
        dims[i] = (hsize_t)t->shape[i];
    return write_dataset(group, group_name, name, native_type(t->dtype), t->ndim, dims, lb_tensor_data(t),
                         (size_t)lb_tensor_numel(t) * lb_dtype_size(t->dtype), path);
}

/* Compares the values read from /group/name (bytes at data) with its crc32
 * attribute, when it has one. */
static lb_status verify_checksum(hid_t dset, const char *group_name, const char *name, const void *data,
                                 size_t bytes, const char *path)
{
    if (!lb_h5_has_attr(dset, "crc32"))
        return LB_OK; /* written before checksums existed */
    uint64_t stored = 0;
    char where[256];
    snprintf(where, sizeof where, "/%s/%s", group_name, name);
    lb_status st = lb_h5_read_attr_uint(dset, "crc32", LB_H5_U64, &stored, path);
    if (st != LB_OK)
        return lb_error_context("dataset %s", where);
    uint64_t actual = checksum(data, bytes);
    if (stored != actual)
        return lb_error(LB_ERR_FORMAT,
                        "%s: dataset %s does not match its checksum (crc32 stored %08llx, computed %08llx): the "
                        "checkpoint is damaged",
                        path, where, (unsigned long long)stored, (unsigned long long)actual);
    return LB_OK;
}

/* Reads dataset `name` into a new tensor of `like`'s dtype, checking its type,
 * shape and checksum. */
static lb_status read_tensor_like(hid_t group, const char *group_name, const char *name, const lb_tensor *like,
                                  lb_tensor **out, const char *path)
{
    char want[128], got[128], where[256];
    snprintf(where, sizeof where, "dataset /%s/%s", group_name, name);
    *out = NULL;
    if (!lb_h5_has_link(group, name))
        return lb_error(LB_ERR_FORMAT, "%s: dataset /%s/%s is missing (a checkpoint of a different model?)", path,
                        group_name, name);
    hid_t dset = H5Dopen2(group, name, H5P_DEFAULT);
    hid_t space = dset >= 0 ? H5Dget_space(dset) : -1;
    int rank = space >= 0 ? H5Sget_simple_extent_ndims(space) : -1;
    hsize_t dims[H5S_MAX_RANK] = {0};
    int64_t shape[H5S_MAX_RANK] = {0};
    if (rank >= 0 && rank <= H5S_MAX_RANK)
        H5Sget_simple_extent_dims(space, dims, NULL);
    int same = rank == like->ndim;
    for (int i = 0; i < rank && rank <= LB_MAX_DIMS && rank >= 0; i++) {
        shape[i] = (int64_t)dims[i];
        same &= i < like->ndim && shape[i] == like->shape[i];
    }
    lb_status st = LB_OK;
    if (rank < 0) {
        st = lb_error(LB_ERR_FORMAT, "%s: dataset /%s/%s cannot be read", path, group_name, name);
    } else if (!same) {
        st = lb_error(LB_ERR_VALUE, "%s: /%s/%s has shape %s in the checkpoint but %s in the model", path, group_name,
                      name, lb_shape_str(rank > LB_MAX_DIMS ? LB_MAX_DIMS : rank, shape, got, sizeof got),
                      lb_shape_str(like->ndim, like->shape, want, sizeof want));
    } else if (!(*out = lb_tensor_zeros_like(like))) {
        st = lb_last_status();
    } else if ((st = lb_h5_read(dset, like->dtype == LB_FLOAT32 ? LB_H5_F32 : LB_H5_F64, native_type(like->dtype), 0,
                                -1, lb_tensor_data(*out), where, path)) == LB_OK &&
               (st = verify_checksum(dset, group_name, name, lb_tensor_data(*out),
                                     (size_t)lb_tensor_numel(*out) * lb_dtype_size(like->dtype), path)) == LB_OK &&
               !lb_k_all_finite(*out)) {
        st = lb_error(LB_ERR_FORMAT, "%s: /%s/%s holds NaN or infinite values", path, group_name, name);
    }
    lb_h5_close(space);
    lb_h5_close(dset);
    if (st != LB_OK) {
        lb_tensor_free(*out);
        *out = NULL;
    }
    return st;
}

static lb_status write_u64s(hid_t group, const char *name, const uint64_t *v, int n, const char *path)
{
    hsize_t dims[1] = {(hsize_t)n};
    return write_dataset(group, "rng", name, H5T_NATIVE_UINT64, 1, dims, v, (size_t)n * sizeof *v, path);
}

/* A generator state: exactly n uint64 values (a float or signed copy is refused,
 * not converted). */
static lb_status read_u64s(hid_t group, const char *name, uint64_t *v, int n, const char *path)
{
    char where[96];
    snprintf(where, sizeof where, "dataset /rng/%s", name);
    hid_t dset = lb_h5_has_link(group, name) ? H5Dopen2(group, name, H5P_DEFAULT) : -1;
    hid_t space = dset >= 0 ? H5Dget_space(dset) : -1;
    hssize_t count = space >= 0 ? H5Sget_simple_extent_npoints(space) : -1;
    lb_h5_close(space);
    lb_status st = LB_OK;
    if (dset < 0)
        st = lb_error(LB_ERR_FORMAT, "%s: %s is missing", path, where);
    else if (count != n)
        st = lb_error(LB_ERR_FORMAT, "%s: %s holds %lld values; expected %d uint64 values", path, where,
                      (long long)count, n);
    else if ((st = lb_h5_read(dset, LB_H5_U64, H5T_NATIVE_UINT64, 0, -1, v, where, path)) == LB_OK)
        st = verify_checksum(dset, "rng", name, v, (size_t)n * sizeof *v, path);
    lb_h5_close(dset);
    return st;
}

/* fsync a file, and its directory so the rename itself is durable. */
static void sync_path(const char *path, int directory)
{
    char copy[4096];
    snprintf(copy, sizeof copy, "%s", path);
    int fd = open(directory ? dirname(copy) : path, directory ? O_RDONLY | O_DIRECTORY : O_RDONLY);
    if (fd >= 0) {
        fsync(fd);
        close(fd);
    }
}

/* ---- save ---- */

static lb_status save_contents(const lb_trainer *t, hid_t file, const char *path)
{
    lb_status st;
    lb_params *ps = lb_model_params(t->model);
    if ((st = lb_h5_write_attr_string(file, "format", CHECKPOINT_FORMAT, path)) ||
        (st = lb_h5_write_attr_int(file, "format_version", CHECKPOINT_FORMAT_VERSION, path)) ||
        (st = lb_h5_write_attr_int(file, "step", t->step, path)) ||
        (st = lb_h5_write_attr_real(file, "elapsed_seconds", t->elapsed, path)) ||
        (st = lb_h5_write_attr_real(file, "budget_spent_seconds", t->budget_spent, path)) ||
        (st = lb_h5_write_attr_string(file, "data_file", lb_dataset_path(t->data), path)) ||
        (st = lb_h5_write_attr_string(file, "data_task", lb_dataset_task_name(t->data), path)) ||
        (st = lb_h5_write_attr_string(file, "optim.kind", lb_optim_kind_name(t->cfg.optim.kind), path)) ||
        (st = lb_h5_write_attr_real(file, "optim.lr", t->cfg.optim.lr, path)) ||
        (st = lb_h5_write_attr_real(file, "optim.weight_decay", t->cfg.optim.weight_decay, path)) ||
        (st = lb_h5_write_attr_int(file, "train.batch_size", t->cfg.batch_size, path)) ||
        (st = lb_h5_write_attr_int(file, "train.steps", t->cfg.steps, path)) ||
        (st = lb_h5_write_attr_uint(file, "train.seed", t->cfg.seed, path)) ||
        (st = lb_h5_write_attr_int(file, "best.step", t->best_step, path)) ||
        (st = lb_h5_write_attr_real(file, "best.metric", t->best_metric, path)) ||
        (st = lb_h5_write_attr_int(file, "best.evals_since", t->evals_since_best, path)) ||
        (st = lb_h5_write_attr_real(file, "interval.loss_sum", t->interval_loss, path)) ||
        (st = lb_h5_write_attr_real(file, "interval.accuracy_sum", t->interval_acc, path)) ||
        (st = lb_h5_write_attr_int(file, "interval.steps", t->interval_steps, path)) ||
        (st = lb_h5_write_attr_int(file, "interval.accuracy_steps", t->interval_acc_steps, path)) ||
        (st = lb_h5_write_attr_int(file, "interval.skipped", t->interval_skipped, path)) ||
        (st = write_model_config(file, lb_model_get_config(t->model), path)))
        return st;
    size_t events_len = 0;
    const char *events = lb_dataset_events_json(t->data, &events_len);
    if (!events)
        lb_clear_error(); /* a generated task: no schema to carry */
    if (events) { /* the events schema of the training file: scaling and token maps for new rows */
        hsize_t dims[1] = {(hsize_t)events_len};
        if ((st = write_dataset(file, "", "data_events", H5T_NATIVE_UINT8, 1, dims, events, events_len, path)) != LB_OK)
            return st;
    }
    /* a model of a text corpus carries its vocabulary and context: generation needs only the checkpoint */
    if (lb_dataset_is_text(t->data) && ((st = lb_vocab_h5_write(file, lb_dataset_vocab(t->data), path)) ||
                                        (st = lb_h5_write_attr_int(file, "train.seq_len", lb_dataset_seq_len(t->data), path))))
        return st;
    hid_t params = lb_h5_create_group(file, "params"), optim = lb_h5_create_group(file, "optim");
    hid_t rng = lb_h5_create_group(file, "rng"), loader = lb_h5_create_group(file, "loader");
    st = (params < 0 || optim < 0 || rng < 0 || loader < 0) ? lb_error(LB_ERR_IO, "%s: cannot create groups", path) : LB_OK;
    for (int i = 0; i < ps->count && st == LB_OK; i++)
        st = write_tensor(params, "params", ps->items[i]->name, ps->items[i]->value, path);
    for (int i = 0; i < lb_optim_state_count(t->optim) && st == LB_OK; i++)
        st = write_tensor(optim, "optim", lb_optim_state_name(t->optim, i), lb_optim_state_tensor(t->optim, i), path);
    lb_loader_state ls;
    if (st == LB_OK)
        st = lb_loader_get_state(t->loader, &ls);
    if (st == LB_OK)
        st = write_u64s(rng, "dropout", t->dropout_rng.s, 4, path);
    if (st == LB_OK)
        st = write_u64s(rng, "loader", ls.rng.s, 4, path);
    if (st == LB_OK)
        st = lb_h5_write_attr_int(loader, "epoch", ls.epoch, path);
    if (st == LB_OK)
        st = lb_h5_write_attr_int(loader, "position", ls.position, path);
    lb_h5_close(params);
    lb_h5_close(optim);
    lb_h5_close(rng);
    lb_h5_close(loader);
    return st;
}

/* What the child process of lb_trainer_save writes. */
typedef struct save_job {
    const lb_trainer *t;
    const char *tmp;
} save_job;

/* Writes the whole checkpoint into job->tmp; every HDF5 handle is closed once. */
static lb_status save_file(void *ctx)
{
    save_job *job = ctx;
    hid_t file = H5Fcreate(job->tmp, H5F_ACC_TRUNC, H5P_DEFAULT, H5P_DEFAULT);
    lb_status st = file < 0 ? lb_error(LB_ERR_IO, "%s: cannot create the checkpoint: %s",
                                       job->tmp, lb_h5_cause())
                            : save_contents(job->t, file, job->tmp);
    if (file >= 0 && H5Fclose(file) < 0 && st == LB_OK)
        st = lb_error(LB_ERR_IO, "%s: cannot finish writing the checkpoint: %s", job->tmp, lb_h5_cause());
    if (st == LB_OK) {
        int fd = open(job->tmp, O_RDONLY);
        if (fd < 0 || fsync(fd) != 0)
            st = lb_error(LB_ERR_IO, "%s: cannot flush the checkpoint to disk: %s", job->tmp, lb_system_error(errno));
        if (fd >= 0)
            close(fd);
    }
    return st;
}

lb_status lb_trainer_save(const lb_trainer *t, const char *path)
{
    char tmp[4096];
    lb_status st = lb_output_check(path, "checkpoint");
    if (st != LB_OK)
        return st;
    int replace = lb_output_present(path); /* the previous checkpoint; nothing that appears meanwhile */
    if (snprintf(tmp, sizeof tmp, "%s.tmp", path) >= (int)sizeof tmp)
        return lb_error(LB_ERR_VALUE, "checkpoint: path too long: %s", path);
    /* HDF5 writes in a child process: after a failed write (a full disk) libhdf5's
     * cleanup can crash, and then only the child goes. */
    save_job job = {t, tmp};
    lb_h5_quiet quiet;
    lb_h5_quiet_begin(&quiet);
    st = lb_h5_isolated(save_file, NULL, &job, 0, 1, tmp);
    lb_h5_quiet_end(&quiet);
    if (st != LB_OK) {
        unlink(tmp);
        /* Tell the truth about what is on disk, after the cause: an earlier checkpoint, or none. */
        char cause[1024];
        snprintf(cause, sizeof cause, "%s", lb_last_error());
        if (access(path, F_OK) == 0)
            return lb_error(st, "%s; the previous checkpoint %s is kept", cause, path);
        return lb_error(st, "%s; no checkpoint was written to %s", cause, path);
    }
    st = lb_output_finish(tmp, path, "checkpoint", replace);
    if (st == LB_OK)
        sync_path(path, 1);
    return st;
}

/* ---- load ---- */

static hid_t open_checkpoint(const char *path)
{
    hid_t file = -1;
    if (lb_h5_open_read(path, "checkpoint", &file) != LB_OK)
        return -1;
    char fmt[64] = "";
    int64_t version = 0;
    if (lb_h5_read_attr_string(file, "format", fmt, sizeof fmt, path) != LB_OK || strcmp(fmt, CHECKPOINT_FORMAT) != 0) {
        lb_error(LB_ERR_FORMAT, "%s: not a lookback checkpoint (root attribute 'format' is not '%s')", path,
                 CHECKPOINT_FORMAT);
        H5Fclose(file);
        return -1;
    }
    lb_status st = lb_h5_read_attr_int(file, "format_version", LB_H5_I64, &version, path);
    if (st != LB_OK || version != CHECKPOINT_FORMAT_VERSION) {
        if (st == LB_OK)
            lb_error(LB_ERR_FORMAT, "%s: checkpoint format_version %lld is not supported (expected %d)", path,
                     (long long)version, CHECKPOINT_FORMAT_VERSION);
        H5Fclose(file);
        return -1;
    }
    return file;
}

/* Runs a whole checkpoint read in a child process first (lb_h5_isolated), then here:
 * a file that crashes or hangs libhdf5 is reported before this process opens it. */
static lb_status read_isolated(const char *path, lb_h5_job job, void *ctx)
{
    struct stat sb;
    if (!path || !*path)
        return lb_error(LB_ERR_VALUE, "the checkpoint path is empty");
    if (stat(path, &sb) != 0)
        return lb_error(LB_ERR_IO, "%s: no such checkpoint (or not readable): %s", path, lb_system_error(errno));
    lb_h5_quiet quiet;
    lb_h5_quiet_begin(&quiet);
    lb_status st = lb_h5_isolated(job, NULL, ctx, lb_h5_read_timeout((int64_t)sb.st_size), 0, path);
    if (st == LB_OK)
        st = job(ctx);
    lb_h5_quiet_end(&quiet);
    return st;
}

typedef struct config_job {
    const char *path;
    lb_model_config *cfg;
} config_job;

static lb_status read_config_job(void *ctx)
{
    config_job *job = ctx;
    hid_t file = open_checkpoint(job->path);
    lb_status st = file < 0 ? lb_last_status() : read_model_config(file, job->cfg, job->path);
    lb_h5_close(file);
    return st;
}

lb_status lb_checkpoint_read_model_config(const char *path, lb_model_config *cfg)
{
    config_job job = {path, cfg};
    return read_isolated(path, read_config_job, &job);
}

typedef struct task_job {
    const char *path;
    char *task;
    size_t size;
} task_job;

static lb_status read_task_job(void *ctx)
{
    task_job *job = ctx;
    hid_t file = open_checkpoint(job->path);
    lb_status st = file < 0 ? lb_last_status() : LB_OK;
    job->task[0] = '\0';
    if (st == LB_OK && lb_h5_has_attr(file, "data_task"))
        st = lb_h5_read_attr_string(file, "data_task", job->task, job->size, job->path);
    lb_h5_close(file);
    return st;
}

typedef struct seq_len_job {
    const char *path;
    int64_t *seq_len;
} seq_len_job;

static lb_status read_seq_len_job(void *ctx)
{
    seq_len_job *job = ctx;
    hid_t file = open_checkpoint(job->path);
    lb_status st = file < 0 ? lb_last_status() : LB_OK;
    *job->seq_len = 0;
    if (st == LB_OK && lb_h5_has_attr(file, "train.seq_len"))
        st = lb_h5_read_attr_int(file, "train.seq_len", LB_H5_I64, job->seq_len, job->path);
    lb_h5_close(file);
    return st;
}

lb_status lb_checkpoint_read_seq_len(const char *path, int64_t *seq_len)
{
    LB_CHECK_ARG(seq_len, LB_ERR_VALUE);
    seq_len_job job = {path, seq_len};
    *seq_len = 0;
    return read_isolated(path, read_seq_len_job, &job);
}

lb_status lb_checkpoint_fit_corpus(const char *checkpoint, lb_dataset *corpus, int64_t seq_len)
{
    LB_CHECK_ARG(checkpoint, LB_ERR_VALUE);
    LB_CHECK_ARG(corpus, LB_ERR_VALUE);
    if (!lb_dataset_is_text(corpus))
        return lb_error(LB_ERR_VALUE, "%s holds the %s task, not a text corpus", lb_dataset_path(corpus),
                        lb_dataset_task_name(corpus));
    int64_t trained = 0;
    lb_status st = lb_checkpoint_read_seq_len(checkpoint, &trained);
    if (st == LB_OK && seq_len == 0)
        seq_len = trained > 0 ? trained : lb_dataset_seq_len(corpus);
    if (st == LB_OK)
        st = lb_dataset_set_seq_len(corpus, seq_len);
    lb_vocab *v = st == LB_OK ? lb_vocab_read(checkpoint) : NULL;
    if (st == LB_OK && v)
        st = lb_dataset_check_vocab(corpus, v, checkpoint);
    else if (st == LB_OK)
        lb_clear_error(); /* a checkpoint without a vocabulary: lb_model_data_check compares the sizes */
    lb_vocab_free(v);
    return st;
}

lb_status lb_checkpoint_read_task(const char *path, char *task, size_t size)
{
    LB_CHECK_ARG(task, LB_ERR_VALUE);
    task_job job = {path, task, size};
    task[0] = '\0';
    return read_isolated(path, read_task_job, &job);
}

typedef struct events_job {
    const char *path;
    lb_event_schema *schema;
} events_job;

static lb_status read_events_job(void *ctx)
{
    events_job *job = ctx;
    lb_event_schema_free(job->schema);
    job->schema = NULL;
    hid_t file = open_checkpoint(job->path);
    lb_status st = file < 0 ? lb_last_status() : LB_OK;
    char *json = NULL;
    size_t len = 0;
    if (st == LB_OK && lb_h5_has_link(file, "data_events")) {
        st = lb_h5_read_bytes(file, "data_events", (size_t)1 << 28, &json, &len, job->path);
        hid_t dset = st == LB_OK ? H5Dopen2(file, "data_events", H5P_DEFAULT) : -1;
        if (st == LB_OK)
            st = verify_checksum(dset, "", "data_events", json, len, job->path);
        lb_h5_close(dset);
        if (st == LB_OK && !(job->schema = lb_event_schema_from_json(json, len, job->path)))
            st = lb_last_status();
    }
    free(json);
    lb_h5_close(file);
    return st;
}

lb_status lb_checkpoint_read_events(const char *path, lb_event_schema **out)
{
    LB_CHECK_ARG(out, LB_ERR_VALUE);
    *out = NULL;
    events_job job = {path, NULL};
    lb_status st = read_isolated(path, read_events_job, &job);
    if (st != LB_OK) {
        lb_event_schema_free(job.schema);
        return st;
    }
    *out = job.schema;
    return LB_OK;
}

/* Reads every parameter into new tensors (vals[i]) without touching the model. */
static lb_status read_params(hid_t file, lb_model *model, lb_tensor **vals, const char *path)
{
    lb_model_config saved;
    lb_status st = read_model_config(file, &saved, path);
    if (st == LB_OK)
        st = compare_model_config(&saved, lb_model_get_config(model), path);
    if (st != LB_OK)
        return st;
    lb_params *ps = lb_model_params(model);
    hid_t group = lb_h5_has_link(file, "params") ? H5Gopen2(file, "params", H5P_DEFAULT) : -1;
    if (group < 0)
        return lb_error(LB_ERR_FORMAT, "%s: group /params is missing", path);
    for (int i = 0; i < ps->count && st == LB_OK; i++)
        st = read_tensor_like(group, "params", ps->items[i]->name, ps->items[i]->value, &vals[i], path);
    lb_h5_close(group);
    return st;
}

static void free_tensors(lb_tensor **v, int n)
{
    for (int i = 0; i < n; i++)
        lb_tensor_free(v[i]);
    free(v);
}

/* A checkpoint read into new tensors and values, nothing of the model changed. */
typedef struct load_job {
    const char *path;
    lb_model *model;
    const lb_trainer *t; /* NULL: parameters only */
    lb_tensor **vals;    /* [params + optimizer states] */
    int64_t step, epoch, position;
    double elapsed, budget_spent;
    lb_rng dropout, loader_rng;
    int64_t best_step, evals_since; /* the best validation so far (0: none, or an older checkpoint) */
    double best_metric;
    double interval_loss, interval_acc; /* the metrics' train row so far (0: an older checkpoint) */
    int64_t interval_steps, interval_acc_steps, interval_skipped;
} load_job;

/* Every training-state attribute in its range, so that a damaged or edited checkpoint
 * (step = -5) is refused before it changes the run (resume would rewrite metrics.csv
 * from that step). LB_ERR_FORMAT naming the attribute, its value and the range. */
static lb_status check_training_state(const load_job *j)
{
    const char *path = j->path;
    const int64_t huge = INT64_C(1) << 62;
    struct {
        const char *name;
        int64_t value, lo, hi;
    } ints[] = {
        {"step", j->step, 0, huge},
        {"loader epoch", j->epoch, 0, huge},
        {"loader position", j->position, 0, huge},
        {"best.step", j->best_step, 0, j->step},
        {"best.evals_since", j->evals_since, 0, j->step},
        {"interval.steps", j->interval_steps, 0, j->step},
        {"interval.accuracy_steps", j->interval_acc_steps, 0, j->interval_steps},
        {"interval.skipped", j->interval_skipped, 0, j->step},
    };
    for (size_t i = 0; i < sizeof ints / sizeof ints[0]; i++)
        if (ints[i].value < ints[i].lo || ints[i].value > ints[i].hi)
            return lb_error(LB_ERR_FORMAT, "%s: checkpoint attribute '%s' = %lld is outside [%lld, %lld] (a damaged or "
                                           "edited checkpoint)",
                            path, ints[i].name, (long long)ints[i].value, (long long)ints[i].lo, (long long)ints[i].hi);
    struct {
        const char *name;
        double value;
        int check;
    } reals[] = {
        {"elapsed_seconds", j->elapsed, 1},
        {"budget_spent_seconds", j->budget_spent, 1},
        {"interval.loss_sum", j->interval_loss, 2}, /* a skipped step's non-finite loss is summed too */
        {"interval.accuracy_sum", j->interval_acc, 1},
        {"best.metric", j->best_metric, j->best_step > 0},
    };
    for (size_t i = 0; i < sizeof reals / sizeof reals[0]; i++) {
        double v = reals[i].value;
        int ok = reals[i].check == 0 || (reals[i].check == 2 ? !(v < 0) : isfinite(v) && (i == 4 || v >= 0));
        if (!ok)
            return lb_error(LB_ERR_FORMAT, "%s: checkpoint attribute '%s' = %g is not a%s number%s (a damaged or "
                                           "edited checkpoint)",
                            path, reals[i].name, v, reals[i].check == 2 ? "" : " finite", i == 4 ? "" : " >= 0");
    }
    if (j->interval_acc > (double)j->interval_acc_steps)
        return lb_error(LB_ERR_FORMAT, "%s: checkpoint attribute 'interval.accuracy_sum' = %g exceeds its %lld steps "
                                       "(accuracies are at most 1)",
                        path, j->interval_acc, (long long)j->interval_acc_steps);
    return LB_OK;
}

static lb_status read_training_state(hid_t file, load_job *job)
{
    const lb_trainer *t = job->t;
    const char *path = job->path;
    int n_params = lb_model_params(t->model)->count, n_state = lb_optim_state_count(t->optim);
    char kind[32] = "";
    lb_status st = lb_h5_read_attr_string(file, "optim.kind", kind, sizeof kind, path);
    if (st == LB_OK && strcmp(kind, lb_optim_kind_name(t->cfg.optim.kind)) != 0)
        st = lb_error(LB_ERR_VALUE, "%s: the checkpoint was trained with --optim %s but this run uses %s", path, kind,
                      lb_optim_kind_name(t->cfg.optim.kind));
    if (st != LB_OK)
        return st;
    hid_t og = lb_h5_has_link(file, "optim") ? H5Gopen2(file, "optim", H5P_DEFAULT) : -1;
    hid_t rg = lb_h5_has_link(file, "rng") ? H5Gopen2(file, "rng", H5P_DEFAULT) : -1;
    hid_t lg = lb_h5_has_link(file, "loader") ? H5Gopen2(file, "loader", H5P_DEFAULT) : -1;
    if (og < 0 || rg < 0 || lg < 0)
        st = lb_error(LB_ERR_FORMAT, "%s: group /optim, /rng or /loader is missing", path);
    for (int i = 0; i < n_state && st == LB_OK; i++)
        st = read_tensor_like(og, "optim", lb_optim_state_name(t->optim, i), lb_optim_state_tensor(t->optim, i),
                              &job->vals[n_params + i], path);
    if (st == LB_OK)
        st = read_u64s(rg, "dropout", job->dropout.s, 4, path);
    if (st == LB_OK)
        st = read_u64s(rg, "loader", job->loader_rng.s, 4, path);
    if (st == LB_OK)
        st = lb_h5_read_attr_int(lg, "epoch", LB_H5_I64, &job->epoch, path);
    if (st == LB_OK)
        st = lb_h5_read_attr_int(lg, "position", LB_H5_I64, &job->position, path);
    if (st == LB_OK)
        st = lb_h5_read_attr_int(file, "step", LB_H5_I64, &job->step, path);
    if (st == LB_OK)
        st = lb_h5_read_attr_real(file, "elapsed_seconds", LB_H5_F64, &job->elapsed, path);
    job->budget_spent = job->elapsed; /* older checkpoints: the wall clock */
    if (st == LB_OK && lb_h5_has_attr(file, "budget_spent_seconds"))
        st = lb_h5_read_attr_real(file, "budget_spent_seconds", LB_H5_F64, &job->budget_spent, path);
    /* The best validation so far (absent in older checkpoints: none yet). */
    if (st == LB_OK && lb_h5_has_attr(file, "best.step") &&
        ((st = lb_h5_read_attr_int(file, "best.step", LB_H5_I64, &job->best_step, path)) != LB_OK ||
         (st = lb_h5_read_attr_real(file, "best.metric", LB_H5_F64, &job->best_metric, path)) != LB_OK ||
         (st = lb_h5_read_attr_int(file, "best.evals_since", LB_H5_I64, &job->evals_since, path)) != LB_OK))
        lb_error_context("%s: the best-validation attributes", path);
    if (st == LB_OK && lb_h5_has_attr(file, "interval.steps") &&
        ((st = lb_h5_read_attr_real(file, "interval.loss_sum", LB_H5_F64, &job->interval_loss, path)) != LB_OK ||
         (st = lb_h5_read_attr_real(file, "interval.accuracy_sum", LB_H5_F64, &job->interval_acc, path)) != LB_OK ||
         (st = lb_h5_read_attr_int(file, "interval.steps", LB_H5_I64, &job->interval_steps, path)) != LB_OK ||
         (st = lb_h5_read_attr_int(file, "interval.accuracy_steps", LB_H5_I64, &job->interval_acc_steps, path)) !=
             LB_OK ||
         (st = lb_h5_read_attr_int(file, "interval.skipped", LB_H5_I64, &job->interval_skipped, path)) != LB_OK))
        lb_error_context("%s: the metrics-interval attributes", path);
    if (st == LB_OK)
        st = check_training_state(job);
    lb_h5_close(og);
    lb_h5_close(rg);
    lb_h5_close(lg);
    return st;
}

static lb_status load_job_run(void *ctx)
{
    load_job *job = ctx;
    hid_t file = open_checkpoint(job->path);
    lb_status st = file < 0 ? lb_last_status() : read_params(file, job->model, job->vals, job->path);
    if (st == LB_OK && job->t)
        st = read_training_state(file, job);
    lb_h5_close(file);
    return st;
}

lb_status lb_checkpoint_load_params(const char *path, lb_model *model)
{
    LB_CHECK_ARG(model, LB_ERR_VALUE);
    lb_params *ps = lb_model_params(model);
    load_job job = {.path = path, .model = model};
    job.vals = calloc((size_t)ps->count + 1, sizeof *job.vals);
    if (!job.vals)
        return lb_error(LB_ERR_MEMORY, "checkpoint: out of memory");
    lb_status st = read_isolated(path, load_job_run, &job);
    for (int i = 0; i < ps->count && st == LB_OK; i++)
        lb_tensor_copy_into(ps->items[i]->value, job.vals[i]);
    free_tensors(job.vals, ps->count);
    return st;
}

lb_status lb_trainer_load(lb_trainer *t, const char *path)
{
    LB_CHECK_ARG(t, LB_ERR_VALUE);
    lb_params *ps = lb_model_params(t->model);
    int n_state = lb_optim_state_count(t->optim);
    load_job job = {.path = path, .model = t->model, .t = t};
    job.vals = calloc((size_t)(ps->count + n_state) + 1, sizeof *job.vals);
    if (!job.vals)
        return lb_error(LB_ERR_MEMORY, "checkpoint: out of memory");
    lb_status st = read_isolated(path, load_job_run, &job);
    lb_loader_state ls = {job.epoch, job.position, job.loader_rng};
    /* Everything read and checked: now change the trainer. */
    if (st == LB_OK && (st = lb_loader_set_state(t->loader, &ls)) != LB_OK)
        lb_error_context("checkpoint %s", path); /* the data file's message: say which checkpoint */
    if (st == LB_OK) {
        for (int i = 0; i < ps->count; i++)
            lb_tensor_copy_into(ps->items[i]->value, job.vals[i]);
        for (int i = 0; i < n_state; i++)
            lb_tensor_copy_into(lb_optim_state_tensor(t->optim, i), job.vals[ps->count + i]);
        t->dropout_rng = job.dropout;
        t->step = job.step;
        t->elapsed = job.elapsed;
        t->budget_spent = job.budget_spent;
        t->best_step = job.best_step;
        t->best_metric = job.best_metric;
        t->evals_since_best = job.evals_since;
        t->interval_loss = job.interval_loss;
        t->interval_acc = job.interval_acc;
        t->interval_steps = job.interval_steps;
        t->interval_acc_steps = job.interval_acc_steps;
        t->interval_skipped = job.interval_skipped;
    }
    free_tensors(job.vals, ps->count + n_state);
    return st;
}

lb_model *lb_checkpoint_load_model(const char *path)
{
    lb_model_config mc;
    if (lb_checkpoint_read_model_config(path, &mc) != LB_OK)
        return NULL;
    lb_model *model = lb_model_new(&mc);
    if (model && lb_checkpoint_load_params(path, model) != LB_OK) {
        lb_model_free(model);
        return NULL;
    }
    return model;
}

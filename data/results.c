/* The predictions file and the attention file (data/results.h). */
#include "data/results.h"

#include <hdf5.h>
#include <math.h>
#include <stdlib.h>

#include "data/h5io.h"
#include "data/output.h"

/* One dataset `name` of `rank` dims from `data` in memory type `type`. */
static lb_status write_set(hid_t file, const char *name, hid_t type, int rank, const hsize_t *dims, const void *data,
                           const char *path)
{
    hid_t space = H5Screate_simple(rank, dims, NULL);
    hid_t dset = space >= 0 ? H5Dcreate2(file, name, type, space, H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT) : -1;
    lb_status st = LB_OK;
    if (dset < 0 || H5Dwrite(dset, type, H5S_ALL, H5S_ALL, H5P_DEFAULT, data) < 0)
        st = lb_error(LB_ERR_IO, "%s: cannot write dataset '%s': %s", path, name, lb_h5_cause());
    lb_h5_close(dset);
    lb_h5_close(space);
    return st;
}

/* Closes a file written by a job; a failed close (the last data not on disk) is an error. */
static lb_status finish_file(hid_t file, lb_status st, const char *path)
{
    if (file >= 0 && H5Fclose(file) < 0 && st == LB_OK)
        st = lb_error(LB_ERR_IO, "%s: cannot finish writing the file: %s", path, lb_h5_cause());
    return st;
}

/* ---- predictions ---- */

typedef struct predictions_job {
    const lb_predictions *pr;
    const lb_batch *examples;
    const lb_predictions_source *source;
    const int32_t *predicted; /* [N, P], NULL for regression */
    const char *tmp;          /* set by lb_h5_write_new */
} predictions_job;

static lb_status write_predictions_attrs(hid_t root, const predictions_job *job)
{
    const lb_predictions_source *s = job->source;
    const char *names[] = {"checkpoint", "data", "split", "model", "path"};
    const char *values[] = {s->checkpoint, s->data, s->split, s->model, s->path};
    lb_status st = LB_OK;
    for (int i = 0; i < 5 && st == LB_OK; i++)
        st = lb_h5_write_attr_string(root, names[i], values[i] ? values[i] : "", job->tmp);
    if (st == LB_OK)
        st = lb_h5_write_attr_int(root, "examples", job->pr->n, job->tmp);
    return st;
}

/* Runs in the child of lb_h5_write_new: after a failed write (a full disk) libhdf5
 * cannot close the file, and at exit it would print its close-loop trace. */
static lb_status write_predictions_file(void *ctx)
{
    const predictions_job *job = ctx;
    const lb_predictions *pr = job->pr;
    const lb_batch *b = job->examples;
    int per_position = pr->positions > 1;
    hsize_t dims[3] = {(hsize_t)pr->n, (hsize_t)pr->positions, (hsize_t)pr->width};
    hsize_t rows[2] = {(hsize_t)pr->n, (hsize_t)pr->positions};
    int out_rank = (per_position ? 2 : 1) + (pr->regression ? 0 : 1);
    if (!per_position)
        dims[1] = (hsize_t)pr->width;
    hid_t file = H5Fcreate(job->tmp, H5F_ACC_TRUNC, H5P_DEFAULT, H5P_DEFAULT);
    if (file < 0)
        return lb_error(LB_ERR_IO, "%s: cannot create the file: %s", job->tmp, lb_h5_cause());
    const char *f = job->tmp;
    int row_rank = per_position ? 2 : 1;
    lb_status st = write_set(file, pr->regression ? "output" : "logits", H5T_NATIVE_DOUBLE, out_rank, dims,
                             pr->output, f);
    if (st == LB_OK && job->predicted)
        st = write_set(file, "predicted", H5T_NATIVE_INT32, row_rank, rows, job->predicted, f);
    if (st == LB_OK && b->targets)
        st = write_set(file, "target", H5T_NATIVE_INT32, row_rank, rows, b->targets, f);
    if (st == LB_OK && b->target_values)
        st = write_set(file, "target", H5T_NATIVE_FLOAT, 1, rows, b->target_values, f);
    if (st == LB_OK && b->distance)
        st = write_set(file, "distance", H5T_NATIVE_INT32, 1, rows, b->distance, f);
    if (st == LB_OK && b->lengths)
        st = write_set(file, "length", H5T_NATIVE_INT32, 1, rows, b->lengths, f);
    if (st == LB_OK)
        st = write_predictions_attrs(file, job);
    return finish_file(file, st, f);
}

void lb_predictions_free(lb_predictions *pr)
{
    if (!pr)
        return;
    free(pr->output);
    pr->output = NULL;
}

/* The predicted class of each row of W logits: the first largest, -1 when NaN. */
static void argmax_rows(const lb_predictions *pr, int32_t *predicted)
{
    for (int64_t i = 0; i < pr->n * pr->positions; i++) {
        const double *row = pr->output + i * pr->width;
        int best = isnan(row[0]) ? -1 : 0;
        for (int64_t k = 1; best >= 0 && k < pr->width; k++)
            if (row[k] > row[best])
                best = (int)k;
        predicted[i] = best;
    }
}

lb_status lb_predictions_write(const char *path, const lb_predictions *pr, const lb_batch *examples,
                               const lb_predictions_source *source, int replace)
{
    LB_CHECK_ARG(path && pr && examples && source, LB_ERR_VALUE);
    if (!pr->output || pr->n < 1 || pr->positions < 1 || pr->width < 1)
        return lb_error(LB_ERR_VALUE, "%s: no predictions to write (%lld examples, %lld positions, %lld outputs)",
                        path, (long long)pr->n, (long long)pr->positions, (long long)pr->width);
    int32_t *predicted = NULL;
    if (!pr->regression) {
        predicted = malloc((size_t)(pr->n * pr->positions) * sizeof *predicted);
        if (!predicted)
            return lb_error(LB_ERR_MEMORY, "%s: out of memory for the predicted classes", path);
        argmax_rows(pr, predicted);
    }
    predictions_job job = {pr, examples, source, predicted, NULL};
    lb_status st = lb_h5_write_new(path, "predictions file", replace, write_predictions_file, NULL, &job, &job.tmp);
    free(predicted);
    return st;
}

/* ---- attention weights ---- */

typedef struct attention_job {
    const lb_tensor *weights; /* float32 [E, H, Tq, Tk], contiguous */
    const lb_batch *batch;    /* the E examples */
    const char *tmp;          /* set by lb_h5_write_new */
} attention_job;

static lb_status write_attention_file(void *ctx)
{
    const attention_job *job = ctx;
    const lb_batch *b = job->batch;
    hsize_t e = (hsize_t)job->weights->shape[0], w[4];
    for (int i = 0; i < 4; i++)
        w[i] = (hsize_t)job->weights->shape[i];
    hsize_t tokens[2] = {e, (hsize_t)b->seq_len};
    hid_t file = H5Fcreate(job->tmp, H5F_ACC_TRUNC, H5P_DEFAULT, H5P_DEFAULT);
    if (file < 0)
        return lb_error(LB_ERR_IO, "%s: cannot create the file: %s", job->tmp, lb_h5_cause());
    lb_status st = write_set(file, "weights", H5T_NATIVE_FLOAT, 4, w, lb_tensor_data(job->weights), job->tmp);
    if (st == LB_OK && b->tokens)
        st = write_set(file, "tokens", H5T_NATIVE_INT32, 2, tokens, b->tokens, job->tmp);
    if (st == LB_OK && b->distance)
        st = write_set(file, "distance", H5T_NATIVE_INT32, 1, &e, b->distance, job->tmp);
    return finish_file(file, st, job->tmp);
}

lb_status lb_attention_write(const char *path, const lb_tensor *weights, const lb_dataset *data, const char *split)
{
    LB_CHECK_ARG(path && weights && data && split, LB_ERR_VALUE);
    if (weights->ndim != 4)
        return lb_error(LB_ERR_VALUE, "%s: attention weights must be [E, H, Tq, Tk], got %d dimensions", path,
                        weights->ndim);
    lb_status st = lb_output_check(path, "attention output");
    if (st != LB_OK)
        return st;
    int replace = lb_output_present(path);
    lb_batch b;
    if ((st = lb_dataset_slice(data, split, 0, weights->shape[0], &b)) != LB_OK)
        return st;
    lb_tensor *w32 = lb_tensor_copy(weights, LB_FLOAT32);
    if (!w32)
        st = lb_last_status();
    attention_job job = {w32, &b, NULL};
    if (st == LB_OK)
        st = lb_h5_write_new(path, "attention output", replace, write_attention_file, NULL, &job, &job.tmp);
    lb_tensor_free(w32);
    lb_batch_free(&b);
    return st;
}

/* ---- every layer's attention weights ---- */

typedef struct layers_job {
    const lb_tensor *weights; /* float32 [L, B, H, T, T], contiguous */
    const int32_t *layers;    /* [L] */
    const lb_batch *batch;    /* the B examples */
    const char *source;
    const char *tmp;          /* set by lb_h5_write_new */
} layers_job;

static lb_status write_layers_file(void *ctx)
{
    const layers_job *job = ctx;
    const lb_batch *b = job->batch;
    hsize_t w[5], l = (hsize_t)job->weights->shape[0], tokens[2] = {(hsize_t)b->batch_size, (hsize_t)b->seq_len};
    for (int i = 0; i < 5; i++)
        w[i] = (hsize_t)job->weights->shape[i];
    hid_t file = H5Fcreate(job->tmp, H5F_ACC_TRUNC, H5P_DEFAULT, H5P_DEFAULT);
    if (file < 0)
        return lb_error(LB_ERR_IO, "%s: cannot create the file: %s", job->tmp, lb_h5_cause());
    lb_status st = write_set(file, "attention", H5T_NATIVE_FLOAT, 5, w, lb_tensor_data(job->weights), job->tmp);
    if (st == LB_OK)
        st = write_set(file, "layers", H5T_NATIVE_INT32, 1, &l, job->layers, job->tmp);
    if (st == LB_OK && b->tokens)
        st = write_set(file, "tokens", H5T_NATIVE_INT32, 2, tokens, b->tokens, job->tmp);
    if (st == LB_OK && b->indices) {
        int64_t example = b->indices[0];
        st = lb_h5_write_attr_int(file, "example", example, job->tmp);
    }
    if (st == LB_OK && b->distance)
        st = lb_h5_write_attr_int(file, "distance", b->distance[0], job->tmp);
    if (st == LB_OK)
        st = lb_h5_write_attr_string(file, "source", job->source, job->tmp);
    return finish_file(file, st, job->tmp);
}

lb_status lb_attention_layers_write(const char *path, const lb_tensor *weights, const int32_t *layers,
                                    const lb_batch *examples, const char *source)
{
    LB_CHECK_ARG(path && weights && layers && examples && source, LB_ERR_VALUE);
    if (weights->ndim != 5 || weights->dtype != LB_FLOAT32 || weights->shape[1] != examples->batch_size)
        return lb_error(LB_ERR_VALUE, "%s: attention weights must be float32 [L, B, H, T, T] with B = %lld examples",
                        path, (long long)examples->batch_size);
    lb_status st = lb_output_check(path, "attention file");
    if (st != LB_OK)
        return st;
    layers_job job = {weights, layers, examples, source, NULL};
    return lb_h5_write_new(path, "attention file", lb_output_present(path), write_layers_file, NULL, &job, &job.tmp);
}

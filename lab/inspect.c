/* `lookback attention`'s engine (lab/inspect.h). */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "lab/inspect.h"

#include "data/dataset.h"
#include "data/results.h"
#include "lab/files.h"
#include "lab/plot.h"
#include "layers/family.h"
#include "layers/model.h"
#include "train/trainer.h"

/* Checks each of n indices against [0, limit); "--layers 5: the model has 2 layers (0..1)". */
static lb_status check_range(const char *option, const char *what, int n, const int64_t *values, int64_t limit)
{
    for (int i = 0; i < n; i++)
        if (values[i] < 0 || values[i] >= limit)
            return lb_error(LB_ERR_VALUE, "%s %lld: the model has %lld %s (0..%lld)", option, (long long)values[i],
                            (long long)limit, what, (long long)(limit - 1));
    return LB_OK;
}

static lb_status check_ints(const char *option, const char *what, int n, const int *values, int64_t limit)
{
    int64_t wide[LB_INSPECT_MAX_CHOSEN];
    for (int i = 0; i < n && i < LB_INSPECT_MAX_CHOSEN; i++)
        wide[i] = values[i];
    return check_range(option, what, n, wide, limit);
}

/* The keys of one query row w [T] in decreasing weight (ties: the nearer key first),
 * the first k written as " key (distance back) weight". */
static void write_top_keys(FILE *f, const float *w, int64_t t, int64_t query, int k)
{
    int64_t *picked = calloc((size_t)k, sizeof *picked);
    int n = 0;
    for (; picked && n < k && n < t; n++) {
        int64_t best = -1;
        for (int64_t j = t - 1; j >= 0; j--) {
            int used = 0;
            for (int i = 0; i < n; i++)
                used |= picked[i] == j;
            if (!used && (best < 0 || w[j] > w[best]))
                best = j;
        }
        picked[n] = best;
        fprintf(f, "  key %lld (%lld back) %.4f", (long long)best, (long long)(query - best), w[best]);
    }
    fputc('\n', f);
    free(picked);
}

/* Draws one head's chosen query rows rows [Q, T] as PNG and SVG. */
static lb_status draw_head(const char *dir, int layer, int head, const float *rows, int64_t q, int64_t t,
                           const char *model, int *plots)
{
    char name[64], path[4200], title[160];
    snprintf(name, sizeof name, "layer%d_head%d.png", layer, head);
    lb_files_join(path, sizeof path, dir, name);
    snprintf(title, sizeof title, "%s layer %d head %d: queries x keys", model, layer, head);
    lb_status st = lb_plot_attention_matrix(path, title, rows, q, t);
    if (st != LB_OK)
        return st;
    (*plots)++;
    if (strcmp(lb_plot_device(), "svg") == 0) /* the PNG device was missing: the SVG is written */
        return LB_OK;
    if (lb_plot_use_device("svg") != LB_OK) {
        lb_clear_error(); /* no SVG device: the PNG alone */
        return LB_OK;
    }
    st = lb_plot_attention_matrix(path, title, rows, q, t); /* x.png -> x.svg */
    lb_plot_use_device(NULL);
    if (st == LB_OK)
        (*plots)++;
    return st;
}

/* The folder's files from the weights of every layer (weights[l] [1, H, T, T]). */
static lb_status write_outputs(const lb_inspect_options *o, lb_tensor *const *weights, const lb_batch *b,
                               const lb_model_config *mc, lb_inspect_result *out)
{
    const int64_t h = mc->n_heads, t = b->seq_len;
    int layers[LB_INSPECT_MAX_CHOSEN], heads[LB_INSPECT_MAX_CHOSEN];
    int64_t queries[LB_INSPECT_ALL_QUERIES > LB_INSPECT_MAX_CHOSEN ? LB_INSPECT_ALL_QUERIES : LB_INSPECT_MAX_CHOSEN];
    int nl = o->n_layers ? o->n_layers : (mc->n_layers < LB_INSPECT_MAX_CHOSEN ? mc->n_layers : LB_INSPECT_MAX_CHOSEN);
    int nh = o->n_heads ? o->n_heads : (int)(h < LB_INSPECT_MAX_CHOSEN ? h : LB_INSPECT_MAX_CHOSEN);
    int64_t nq = o->n_queries ? o->n_queries : t <= LB_INSPECT_ALL_QUERIES ? t : 1;
    for (int i = 0; i < nl; i++)
        layers[i] = o->n_layers ? o->layers[i] : i;
    for (int i = 0; i < nh; i++)
        heads[i] = o->n_heads ? o->heads[i] : i;
    for (int64_t i = 0; i < nq; i++)
        queries[i] = o->n_queries ? o->queries[i] : nq == t ? i : t - 1;
    /* attention.h5: [L_chosen, 1, H, T, T] */
    int64_t shape[5] = {nl, 1, h, t, t};
    lb_tensor *all = lb_tensor_empty(LB_FLOAT32, 5, shape);
    if (!all)
        return lb_last_status();
    int32_t layer_ids[LB_INSPECT_MAX_CHOSEN];
    const size_t per_layer = (size_t)(h * t * t);
    for (int i = 0; i < nl; i++) {
        layer_ids[i] = layers[i];
        lb_tensor *w32 = lb_tensor_copy(weights[layers[i]], LB_FLOAT32);
        if (!w32) {
            lb_tensor_free(all);
            return lb_last_status();
        }
        memcpy((float *)lb_tensor_data(all) + (size_t)i * per_layer, lb_tensor_data(w32), per_layer * sizeof(float));
        lb_tensor_free(w32);
    }
    char path[4200];
    lb_status st = lb_attention_layers_write(lb_files_join(path, sizeof path, o->out_dir, "attention.h5"), all,
                                             layer_ids, b, o->checkpoint);
    FILE *top = NULL;
    if (st == LB_OK && !(top = fopen(lb_files_join(path, sizeof path, o->out_dir, "top_keys.txt"), "w")))
        st = lb_error(LB_ERR_IO, "%s: cannot write: %s", path, lb_system_error(errno));
    float *rows = st == LB_OK ? malloc((size_t)(nq * t) * sizeof *rows) : NULL;
    if (st == LB_OK && !rows)
        st = lb_error(LB_ERR_MEMORY, "attention: out of memory for %lld x %lld weights", (long long)nq, (long long)t);
    const int k = o->top_k > 0 ? o->top_k : 5;
    for (int i = 0; st == LB_OK && i < nl; i++)
        for (int j = 0; st == LB_OK && j < nh; j++) {
            const float *w = (const float *)lb_tensor_data(all) + (size_t)i * per_layer + (size_t)(heads[j] * t * t);
            for (int64_t q = 0; q < nq; q++) {
                memcpy(rows + q * t, w + queries[q] * t, (size_t)t * sizeof *rows);
                fprintf(top, "layer %d head %d query %lld:", layers[i], heads[j], (long long)queries[q]);
                write_top_keys(top, rows + q * t, t, queries[q], k);
            }
            st = draw_head(o->out_dir, layers[i], heads[j], rows, nq, t, out->model, &out->plots);
        }
    free(rows);
    if (top && fclose(top) != 0 && st == LB_OK)
        st = lb_error(LB_ERR_IO, "%s/top_keys.txt: cannot finish writing: %s", o->out_dir, lb_system_error(errno));
    lb_tensor_free(all);
    out->layers = nl;
    out->heads = nh;
    out->seq_len = t;
    out->queries = nq;
    return st;
}

lb_status lb_inspect_attention(const lb_inspect_options *o, lb_inspect_result *out)
{
    LB_CHECK_ARG(o && out && o->checkpoint && o->data && o->out_dir, LB_ERR_VALUE);
    memset(out, 0, sizeof *out);
    const char *split = o->split ? o->split : "test";
    if (lb_files_exists(o->out_dir))
        return lb_error(LB_ERR_VALUE, "-o %s already exists; choose a new folder", o->out_dir);
    if (o->n_layers < 0 || o->n_layers > LB_INSPECT_MAX_CHOSEN || o->n_heads < 0 ||
        o->n_heads > LB_INSPECT_MAX_CHOSEN || o->n_queries < 0 || o->n_queries > LB_INSPECT_MAX_CHOSEN)
        return lb_error(LB_ERR_VALUE, "attention: at most %d layers, heads and queries each", LB_INSPECT_MAX_CHOSEN);
    lb_model_config mc;
    if (lb_checkpoint_read_model_config(o->checkpoint, &mc) != LB_OK)
        return lb_last_status();
    snprintf(out->model, sizeof out->model, "%s", lb_model_kind_name(mc.kind));
    const lb_family *f = lb_family_of(mc.kind);
    if (!f)
        return lb_last_status();
    if (!f->attention) {
        char names[256] = "";
        for (int i = 0; i < LB_MODEL_KIND_COUNT; i++)
            if (lb_family_at(i)->attention)
                snprintf(names + strlen(names), sizeof names - strlen(names), "%s%s", names[0] ? ", " : "",
                         lb_family_at(i)->name);
        return lb_error(LB_ERR_VALUE, "%s holds a %s model, which has no attention to show (the families with "
                        "attention: %s)", o->checkpoint, f->name, names);
    }
    lb_status st;
    if ((st = check_ints("--layers", "layers", o->n_layers, o->layers, mc.n_layers)) != LB_OK ||
        (st = check_ints("--heads", "heads", o->n_heads, o->heads, mc.n_heads)) != LB_OK)
        return st;
    if (o->example < 0)
        return lb_error(LB_ERR_VALUE, "--example %lld must be >= 0", (long long)o->example);
    lb_dataset *data = lb_dataset_open_split(o->data, split);
    if (!data)
        return lb_last_status();
    char task[64];
    st = lb_checkpoint_read_task(o->checkpoint, task, sizeof task);
    if (st == LB_OK && lb_dataset_is_text(data))
        st = lb_checkpoint_fit_corpus(o->checkpoint, data, 0);
    if (st == LB_OK)
        st = lb_model_data_check(&mc, task, data);
    int64_t n = lb_dataset_split_size(data, split);
    if (st == LB_OK && o->example >= n)
        st = lb_error(LB_ERR_VALUE, "--example %lld is past the %s split of %s (%lld examples: 0..%lld)",
                      (long long)o->example, split, o->data, (long long)n, (long long)(n - 1));
    lb_batch b = {0};
    int have_batch = st == LB_OK && (st = lb_dataset_slice(data, split, o->example, 1, &b)) == LB_OK;
    if (st == LB_OK)
        st = check_range("--queries", "positions in this example", o->n_queries, o->queries, b.seq_len);
    lb_model *model = st == LB_OK ? lb_checkpoint_load_model(o->checkpoint) : NULL;
    if (st == LB_OK && !model)
        st = lb_last_status();
    lb_tensor **weights = st == LB_OK ? calloc((size_t)mc.n_layers, sizeof *weights) : NULL;
    if (st == LB_OK && !weights)
        st = lb_error(LB_ERR_MEMORY, "attention: out of memory");
    if (st == LB_OK) {
        lb_model_input in = {1, b.seq_len, b.tokens, b.features, b.lengths};
        st = lb_model_attention_weights(model, &in, weights);
    }
    int made = 0;
    if (st == LB_OK && (st = lb_files_mkdir(o->out_dir)) == LB_OK)
        made = 1;
    if (st == LB_OK)
        st = write_outputs(o, weights, &b, &mc, out);
    if (st != LB_OK && made)
        lb_files_remove_tree(o->out_dir);
    for (int l = 0; weights && l < mc.n_layers; l++)
        lb_tensor_free(weights[l]);
    free(weights);
    lb_model_free(model);
    if (have_batch)
        lb_batch_free(&b);
    lb_dataset_close(data);
    return st;
}

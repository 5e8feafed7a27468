/* Opening and validating a data file; accessors; `data info`. */
#include "data/dataset.h"

#include <errno.h>
#include <float.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/time.h>
#include <unistd.h>

#include "data/dataset_internal.h"
#include "data/events.h"
#include "data/h5io.h"
#include "data/options.h"
#include "data/text_internal.h"

enum {
    MAX_WINDOW = 1 << 24, /* a text corpus's window (lb_dataset_set_seq_len; train --seq-len) */
    MAX_FEATURES = 1 << 16,
    MAX_EXAMPLES = 1 << 30,
    /* Deflate cannot shrink data more than ~1032:1, so a file claiming more than this
     * many bytes of data per byte on disk is corrupted (checked before allocating). */
    MAX_EXPANSION = 1100
};

struct lb_dataset {
    char *path;
    lb_task_options options;
    int all_options_present;
    uint64_t recorded; /* bit i: option table row i was read from the file */
    int64_t format_version, vocab_size, num_classes;
    lb_layout layout;
    lb_rows split[LB_SPLIT_COUNT];
    int is_events;          /* task "events": imported by lookback data csv */
    char *events_json;      /* its /events/schema text (NULL otherwise) */
    size_t events_len;
    lb_event_schema *events;
    lb_text_store text; /* a text corpus (text.present): its token streams */
    lb_vocab *vocab;    /* and its vocabulary; NULL for a task file */
    int from_arrays;    /* made in memory by lb_dataset_from_arrays (data/arrays.h) */
};

enum { MAX_SCHEMA_BYTES = 1 << 28 };

static const char *const split_names[LB_SPLIT_COUNT] = {"train", "val", "test"};

const char *lb_split_name(int split) { return (split >= 0 && split < LB_SPLIT_COUNT) ? split_names[split] : "?"; }

int lb_split_index(const char *name, const char *file)
{
    for (int s = 0; name && s < LB_SPLIT_COUNT; s++)
        if (strcmp(name, split_names[s]) == 0)
            return s;
    lb_error(LB_ERR_VALUE, "%s: unknown split '%s' (expected train, val or test)", file ? file : "dataset",
             name ? name : "(null)");
    return -1;
}

/* State of one open: the file, its size and the running total of data claimed. */
typedef struct reader {
    lb_dataset *ds;
    const char *file;
    hid_t fid;
    int64_t file_bytes;
    int64_t claimed_bytes;
    int only; /* the one split read into memory (the others: structure only), or -1: all */
} reader;

/* ---- root attributes ---- */

static lb_status check_attr_range(const char *file, const char *name, int64_t v, int64_t lo, int64_t hi)
{
    if (v < lo || v > hi)
        return lb_error(LB_ERR_FORMAT, "%s: attribute '%s' = %lld is outside [%lld, %lld]", file, name, (long long)v,
                        (long long)lo, (long long)hi);
    return LB_OK;
}

static lb_status read_task_and_version(reader *r)
{
    char task[64];
    lb_dataset *ds = r->ds;
    lb_task_kind kind;
    lb_status st = lb_h5_read_attr_string(r->fid, "task", task, sizeof task, r->file);
    ds->is_events = st == LB_OK && strcmp(task, "events") == 0;
    if (st == LB_OK && !ds->is_events && lb_task_parse_name(task, &kind) != LB_OK) {
        char names[256];
        st = lb_error(LB_ERR_FORMAT, "%s: attribute 'task' = '%s' is not a known task (%s)", r->file, task,
                      lb_task_names_text(names, sizeof names));
    }
    if (st == LB_OK)
        st = lb_h5_read_attr_int(r->fid, "format_version", LB_H5_INT, &ds->format_version, r->file);
    if (st == LB_OK && ds->format_version != LB_DATA_FORMAT_VERSION)
        st = lb_error(LB_ERR_FORMAT,
                      "%s: format_version %lld is not supported (this lookback reads version %d): regenerate the "
                      "file with `lookback data` or use a matching lookback",
                      r->file, (long long)ds->format_version, LB_DATA_FORMAT_VERSION);
    if (st == LB_OK)
        lb_task_options_default(ds->is_events ? LB_TASK_SPIKE : kind, &ds->options);
    if (st == LB_OK && ds->is_events)
        ds->options.task = LB_TASK_COUNT; /* no generator task: the rows came from a CSV file */
    return st;
}

/* One option attribute into ds->options; *present receives whether it exists. */
static lb_status read_option(reader *r, const lb_option_spec *spec, int *present)
{
    lb_task_options *o = &r->ds->options;
    *present = lb_h5_has_attr(r->fid, spec->name);
    if (!*present)
        return LB_OK;
    lb_status st;
    if (spec->type == LB_OPT_SEED) {
        uint64_t u = 0;
        if ((st = lb_h5_read_attr_uint(r->fid, spec->name, LB_H5_NONNEG, &u, r->file)) == LB_OK)
            lb_option_set_seed(o, spec, u);
        return st;
    }
    if (spec->type == LB_OPT_REAL) {
        double v = 0;
        st = lb_h5_read_attr_real(r->fid, spec->name, LB_H5_REAL, &v, r->file);
        if (st == LB_OK)
            st = lb_option_check_real(spec, v, r->file);
        if (st == LB_OK)
            lb_option_set_real(o, spec, v);
    } else {
        int64_t i = 0;
        st = lb_h5_read_attr_int(r->fid, spec->name, LB_H5_INT, &i, r->file);
        if (st == LB_OK)
            st = lb_option_check_int(spec, i, r->file);
        if (st == LB_OK)
            lb_option_set_int(o, spec, i);
    }
    return st;
}

/* When every option is present, the stored sizes must be those the options imply. */
static lb_status check_options_consistent(reader *r)
{
    lb_dataset *ds = r->ds;
    lb_task_options o = ds->options;
    lb_status st = lb_task_options_check(&o, r->file);
    if (st != LB_OK)
        return st;
    if (lb_task_vocab_size(&o) != ds->vocab_size || lb_task_num_classes(&o) != ds->num_classes)
        return lb_error(LB_ERR_FORMAT,
                        "%s: vocab_size %lld / num_classes %lld do not match the task options (expected %lld / %lld)",
                        r->file, (long long)ds->vocab_size, (long long)ds->num_classes,
                        (long long)lb_task_vocab_size(&o), (long long)lb_task_num_classes(&o));
    return LB_OK;
}

static lb_status read_root_attrs(reader *r)
{
    lb_dataset *ds = r->ds;
    int64_t seq_len = 0;
    uint64_t seed = 0;
    lb_status st = read_task_and_version(r);
    if (st == LB_OK)
        st = lb_h5_read_attr_uint(r->fid, "seed", LB_H5_NONNEG, &seed, r->file);
    if (st == LB_OK)
        st = lb_h5_read_attr_int(r->fid, "seq_len", LB_H5_INT, &seq_len, r->file);
    if (st == LB_OK)
        st = check_attr_range(r->file, "seq_len", seq_len, ds->is_events ? 1 : 2, LB_DATA_MAX_SEQ_LEN);
    if (st == LB_OK)
        st = lb_h5_read_attr_int(r->fid, "vocab_size", LB_H5_INT, &ds->vocab_size, r->file);
    if (st == LB_OK)
        st = check_attr_range(r->file, "vocab_size", ds->vocab_size, 0, INT32_MAX);
    if (st == LB_OK)
        st = lb_h5_read_attr_int(r->fid, "num_classes", LB_H5_INT, &ds->num_classes, r->file);
    if (st == LB_OK)
        st = check_attr_range(r->file, "num_classes", ds->num_classes, 0, INT32_MAX);
    int count = 0, present = 0, missing = 0;
    const lb_option_spec *t = lb_option_table(&count);
    for (int i = 0; st == LB_OK && i < count; i++) {
        if (!lb_option_applies(&t[i], ds->options.task))
            continue;
        st = read_option(r, &t[i], &present);
        missing += !present;
        if (present && i < 64)
            ds->recorded |= (uint64_t)1 << i;
    }
    ds->options.seq_len = seq_len;
    ds->options.seed = seed;
    ds->layout.seq_len = seq_len;
    ds->all_options_present = missing == 0;
    if (st == LB_OK && ds->all_options_present && !ds->is_events)
        st = check_options_consistent(r);
    return st;
}

/* ---- datasets ---- */

/* "int32 [N, 1024]": what a field should look like. */
static char *expected_str(const lb_layout *l, lb_field f, char *buf, size_t size)
{
    int64_t dims[3];
    int rank = lb_layout_dims(l, f, 0, dims);
    int used = snprintf(buf, size, "%s [N", lb_layout_is_float(l, f) ? "float32" : "int32");
    for (int i = 1; i < rank && used > 0 && (size_t)used < size; i++)
        used += snprintf(buf + used, size - (size_t)used, ", %lld", (long long)dims[i]);
    if (used > 0 && (size_t)used < size)
        snprintf(buf + used, size - (size_t)used, "]");
    return buf;
}

/* Fixes the parts of the layout only the datasets tell: F, per-position targets,
 * and which optional datasets exist. Decided on /train, then required of every split. */
static lb_status infer_layout(reader *r)
{
    lb_dataset *ds = r->ds;
    lb_layout *l = &ds->layout;
    hid_t group = lb_h5_has_link(r->fid, "train") ? H5Gopen2(r->fid, "train", H5P_DEFAULT) : -1;
    if (group < 0)
        return lb_error(LB_ERR_FORMAT, "%s: missing group /train (every file has train, val and test)", r->file);
    lb_status st = LB_OK;
    lb_h5_info info = {0};
    l->regression = ds->num_classes == 0;
    l->has_distance = lb_h5_has_link(group, "distance");
    l->has_lengths = lb_h5_has_link(group, "lengths");
    hid_t dset = lb_h5_has_link(group, "inputs") ? H5Dopen2(group, "inputs", H5P_DEFAULT) : -1;
    if (dset < 0)
        st = lb_error(LB_ERR_FORMAT, "%s: missing dataset /train/inputs", r->file);
    if (st == LB_OK)
        st = lb_h5_dataset_info(dset, "/train/inputs", &info, r->file);
    if (st == LB_OK && ds->vocab_size == 0)
        l->features = info.rank == 3 ? info.dims[2] : -1;
    if (st == LB_OK && (l->features < 0 || l->features > MAX_FEATURES || (ds->vocab_size == 0 && l->features == 0))) {
        char found[160];
        st = lb_error(LB_ERR_FORMAT, "%s: /train/inputs: vocab_size is 0 so expected float32 [N, %lld, F] with 1 <= F <= %d, found %s",
                      r->file, (long long)l->seq_len, MAX_FEATURES, lb_h5_info_str(&info, found, sizeof found));
    }
    lb_h5_close(dset);
    dset = (st == LB_OK && lb_h5_has_link(group, "targets")) ? H5Dopen2(group, "targets", H5P_DEFAULT) : -1;
    if (st == LB_OK && dset < 0)
        st = lb_error(LB_ERR_FORMAT, "%s: missing dataset /train/targets", r->file);
    if (st == LB_OK)
        st = lb_h5_dataset_info(dset, "/train/targets", &info, r->file);
    if (st == LB_OK)
        l->per_position = !l->regression && info.rank == 2;
    lb_h5_close(dset);
    lb_h5_close(group);
    return st;
}

/* Decompressed bytes a dataset may hold per byte it stores, beyond its first 64 MiB:
 * LOOKBACK_MAX_EXPANSION (a number in [1, 1e6]) or 512. Deflate bombs reach about
 * 1000:1; lookback's most compressible files (copy memory at T = 16,384: blanks)
 * about 400:1. -1 with an error when the variable holds something else. */
enum { EXPANSION_FREE_BYTES = 64 << 20, DEFAULT_MAX_EXPANSION = 512 };
static double max_expansion(void)
{
    const char *text = getenv("LOOKBACK_MAX_EXPANSION");
    if (!text)
        return DEFAULT_MAX_EXPANSION;
    char *end = NULL;
    errno = 0;
    double v = strtod(text, &end);
    if (end == text || *end || errno || !(v >= 1 && v <= 1e6)) {
        lb_error(LB_ERR_VALUE, "LOOKBACK_MAX_EXPANSION='%s': expected a number of bytes of data per stored byte in [1, 1e6]",
                 text);
        return -1;
    }
    return v;
}

/* The data a dataset claims must be in the file: a dataset created but never written
 * (HDF5 would read its fill value) is refused, and so is one that decompresses to
 * more than max_expansion() bytes per stored byte beyond its first 64 MiB (a
 * decompression bomb), before anything is allocated for it. */
static lb_status check_stored(reader *r, hid_t dset, const char *where, const lb_h5_info *info)
{
    double elems = 1;
    for (int i = 0; i < info->rank; i++)
        elems *= (double)info->dims[i];
    double logical = elems * (double)info->type_size;
    if (logical <= 0)
        return LB_OK;
    double stored = (double)H5Dget_storage_size(dset);
    if (stored <= 0)
        return lb_error(LB_ERR_FORMAT,
                        "%s: dataset %s: none of its %.0f bytes of data are stored in the file (created but never "
                        "written)",
                        r->file, where, logical);
    double limit = max_expansion();
    if (limit < 0)
        return lb_last_status();
    if (logical > EXPANSION_FREE_BYTES && logical > limit * stored)
        return lb_error(LB_ERR_FORMAT,
                        "%s: dataset %s decompresses to %.0f bytes from %.0f stored (%.0f per stored byte): lookback "
                        "reads at most %g bytes per stored byte beyond the first 64 MiB (a decompression bomb?); "
                        "LOOKBACK_MAX_EXPANSION=N raises the limit",
                        r->file, where, logical, stored, logical / stored, limit);
    return LB_OK;
}

/* Checks the dtype class, rank and shape of `field` and that its data is stored;
 * *n receives its N and *info what the file stores. */
static lb_status check_field_shape(reader *r, const char *where, hid_t dset, lb_field f, int64_t *n,
                                   lb_h5_info *info_out)
{
    const lb_layout *l = &r->ds->layout;
    lb_h5_info info = {0};
    lb_status st = lb_h5_dataset_info(dset, where, &info, r->file);
    if (st != LB_OK)
        return st;
    *info_out = info;
    int64_t dims[3];
    int rank = lb_layout_dims(l, f, info.rank > 0 ? info.dims[0] : 0, dims);
    int ok = info.type_class == (lb_layout_is_float(l, f) ? H5T_FLOAT : H5T_INTEGER) && info.type_size <= 8 &&
             info.rank == rank;
    for (int i = 0; ok && i < rank; i++)
        ok = info.dims[i] == dims[i];
    if (!ok) {
        char want[96], found[160];
        return lb_error(LB_ERR_FORMAT, "%s: dataset %s: expected %s, found %s", r->file, where,
                        expected_str(l, f, want, sizeof want), lb_h5_info_str(&info, found, sizeof found));
    }
    st = check_stored(r, dset, where, &info);
    if (st != LB_OK)
        return st;
    if (dims[0] > MAX_EXAMPLES)
        return lb_error(LB_ERR_FORMAT, "%s: dataset %s holds %lld examples; a split holds at most %d", r->file, where,
                        (long long)dims[0], MAX_EXAMPLES);
    *n = dims[0];
    return LB_OK;
}

/* N of the split, from its inputs, and a guard against sizes the file cannot hold. */
static lb_status claim_bytes(reader *r, const char *group_name, int64_t n)
{
    int64_t per_example = 0;
    for (int f = 0; f < LB_FIELD_COUNT; f++)
        if (lb_layout_has(&r->ds->layout, (lb_field)f))
            per_example += lb_layout_row_elems(&r->ds->layout, (lb_field)f) * 4;
    r->claimed_bytes += n * per_example;
    int64_t limit = r->file_bytes * MAX_EXPANSION + (64 << 20);
    if (r->claimed_bytes > limit)
        return lb_error(LB_ERR_FORMAT, "%s: /%s claims %lld examples (%lld bytes of data) but the file has only %lld bytes: corrupted",
                        r->file, group_name, (long long)n, (long long)r->claimed_bytes, (long long)r->file_bytes);
    return LB_OK;
}

/* ---- values ---- */

enum { READ_BLOCK_ELEMS = 1 << 20 }; /* elements per block when converting wide types */

/* What an integer field may hold. */
typedef struct int_rule {
    int64_t lo, hi;
    int allow_ignore; /* -100 too (class targets) */
} int_rule;

static int_rule int_rule_of(const reader *r, lb_field f)
{
    const lb_layout *l = &r->ds->layout;
    int_rule rule = {0, 0, f == LB_FIELD_TARGETS};
    switch (f) {
    case LB_FIELD_INPUTS: rule.hi = r->ds->vocab_size - 1; break;
    case LB_FIELD_TARGETS: rule.hi = r->ds->num_classes - 1; break;
    case LB_FIELD_DISTANCE: rule.hi = l->seq_len - 1; break;
    default: rule.lo = 1, rule.hi = l->seq_len; break;
    }
    return rule;
}

static int int_ok(const int_rule *rule, int64_t v)
{
    return (v >= rule->lo && v <= rule->hi) || (rule->allow_ignore && v == LB_IGNORE_INDEX);
}

/* Position "[i]", "[i, t]" or "[i, t, k]" of element `flat` of a field, in the
 * dataset's own rank. */
static char *index_str(const lb_layout *l, lb_field f, int64_t flat, char *buf, size_t size)
{
    int64_t dims[3], index[3];
    int rank = lb_layout_dims(l, f, 1, dims);
    for (int k = rank - 1; k >= 1; k--) {
        index[k] = dims[k] > 0 ? flat % dims[k] : 0;
        flat = dims[k] > 0 ? flat / dims[k] : 0;
    }
    index[0] = flat;
    return lb_shape_str(rank, index, buf, size);
}

/* The error for element `flat` of `where`, whose value is `value` (as text). */
static lb_status bad_int(const reader *r, const char *where, lb_field f, int64_t flat, const char *value)
{
    int_rule rule = int_rule_of(r, f);
    char at[96];
    return lb_error(LB_ERR_FORMAT, "%s: dataset %s: value %s at %s is outside [%lld, %lld]%s", r->file, where, value,
                    index_str(&r->ds->layout, f, flat, at, sizeof at), (long long)rule.lo, (long long)rule.hi,
                    rule.allow_ignore ? " and is not -100" : "");
}

static lb_status bad_float(const reader *r, const char *where, lb_field f, int64_t flat, double value)
{
    char at[96];
    index_str(&r->ds->layout, f, flat, at, sizeof at);
    if (!isfinite(value))
        return lb_error(LB_ERR_FORMAT, "%s: dataset %s: value %g at %s is not finite", r->file, where, value, at);
    return lb_error(LB_ERR_FORMAT, "%s: dataset %s: value %g at %s does not fit float32 (|x| <= %g)", r->file, where,
                    value, at, (double)FLT_MAX);
}

/* Reads an integer field whose file type fits int32 (int8..int32, uint8, uint16)
 * straight into buf [count] and checks it. */
static lb_status read_narrow_int(reader *r, hid_t dset, const char *where, lb_field f, int32_t *buf, int64_t count)
{
    lb_status st = lb_h5_read(dset, LB_H5_ANY_INT, H5T_NATIVE_INT32, 0, -1, buf, where, r->file);
    int_rule rule = int_rule_of(r, f);
    for (int64_t i = 0; st == LB_OK && i < count; i++) {
        if (!int_ok(&rule, buf[i])) {
            char value[32];
            snprintf(value, sizeof value, "%d", buf[i]);
            return bad_int(r, where, f, i, value);
        }
    }
    return st;
}

/* Reads an integer field of a wider file type (int64, uint32, uint64) block by block
 * as 64-bit values, so that a value outside int32 is reported as it is in the file
 * (HDF5 would clamp it to INT32_MAX when converting), then stores it as int32. */
static lb_status read_wide_int(reader *r, hid_t dset, const char *where, lb_field f, int is_unsigned, int32_t *buf,
                               int64_t n)
{
    int64_t per_row = lb_layout_row_elems(&r->ds->layout, f);
    int64_t rows = READ_BLOCK_ELEMS / (per_row > 0 ? per_row : 1);
    rows = rows < 1 ? 1 : rows > n ? n : rows;
    int64_t *block = malloc((size_t)(rows > 0 ? rows : 1) * (size_t)per_row * sizeof *block);
    if (!block)
        return lb_error(LB_ERR_MEMORY, "%s: out of memory reading %s", r->file, where);
    int_rule rule = int_rule_of(r, f);
    lb_status st = LB_OK;
    for (int64_t start = 0; st == LB_OK && start < n; start += rows) {
        int64_t count = n - start < rows ? n - start : rows;
        st = lb_h5_read(dset, LB_H5_ANY_INT, is_unsigned ? H5T_NATIVE_UINT64 : H5T_NATIVE_INT64, start, count, block,
                        where, r->file);
        for (int64_t i = 0; st == LB_OK && i < count * per_row; i++) {
            int64_t flat = start * per_row + i;
            uint64_t u = (uint64_t)block[i];
            int ok = is_unsigned ? (u <= (uint64_t)INT64_MAX && int_ok(&rule, block[i])) : int_ok(&rule, block[i]);
            if (!ok) {
                char value[32];
                if (is_unsigned)
                    snprintf(value, sizeof value, "%llu", (unsigned long long)u);
                else
                    snprintf(value, sizeof value, "%lld", (long long)block[i]);
                st = bad_int(r, where, f, flat, value);
                break;
            }
            buf[flat] = (int32_t)block[i];
        }
    }
    free(block);
    return st;
}

/* Reads a float field of a type no wider than float32 straight into buf and checks
 * that every value is finite. */
static lb_status read_narrow_float(reader *r, hid_t dset, const char *where, lb_field f, float *buf, int64_t count)
{
    lb_status st = lb_h5_read(dset, LB_H5_FLOAT, H5T_NATIVE_FLOAT, 0, -1, buf, where, r->file);
    for (int64_t i = 0; st == LB_OK && i < count; i++)
        if (!isfinite(buf[i]))
            return bad_float(r, where, f, i, buf[i]);
    return st;
}

/* Reads a float64 field block by block as double, so that a value too large for
 * float32 is reported as it is (not as the inf the conversion makes of it). */
static lb_status read_wide_float(reader *r, hid_t dset, const char *where, lb_field f, float *buf, int64_t n)
{
    int64_t per_row = lb_layout_row_elems(&r->ds->layout, f);
    int64_t rows = READ_BLOCK_ELEMS / (per_row > 0 ? per_row : 1);
    rows = rows < 1 ? 1 : rows > n ? n : rows;
    double *block = malloc((size_t)(rows > 0 ? rows : 1) * (size_t)per_row * sizeof *block);
    if (!block)
        return lb_error(LB_ERR_MEMORY, "%s: out of memory reading %s", r->file, where);
    lb_status st = LB_OK;
    for (int64_t start = 0; st == LB_OK && start < n; start += rows) {
        int64_t count = n - start < rows ? n - start : rows;
        st = lb_h5_read(dset, LB_H5_FLOAT, H5T_NATIVE_DOUBLE, start, count, block, where, r->file);
        for (int64_t i = 0; st == LB_OK && i < count * per_row; i++) {
            int64_t flat = start * per_row + i;
            if (!isfinite(block[i]) || fabs(block[i]) > FLT_MAX) {
                st = bad_float(r, where, f, flat, block[i]);
                break;
            }
            buf[flat] = (float)block[i];
        }
    }
    free(block);
    return st;
}

/* Reads and checks every value of a field of n examples into buf. */
static lb_status read_values(reader *r, hid_t dset, const char *where, lb_field f, const lb_h5_info *info, void *buf,
                             int64_t n)
{
    const lb_layout *l = &r->ds->layout;
    int64_t count = n * lb_layout_row_elems(l, f);
    if (lb_layout_is_float(l, f))
        return info->type_size > 4 ? read_wide_float(r, dset, where, f, buf, n)
                                   : read_narrow_float(r, dset, where, f, buf, count);
    if (info->type_size > 4 || (info->type_size == 4 && !info->is_signed))
        return read_wide_int(r, dset, where, f, !info->is_signed, buf, n);
    return read_narrow_int(r, dset, where, f, buf, count);
}

static lb_status read_field(reader *r, hid_t group, int split, lb_field f, int64_t *n)
{
    const lb_layout *l = &r->ds->layout;
    const char *name = lb_field_name(f);
    char where[64];
    snprintf(where, sizeof where, "/%s/%s", split_names[split], name);
    if (!lb_h5_has_link(group, name))
        return lb_error(LB_ERR_FORMAT, "%s: missing dataset %s", r->file, where);
    hid_t dset = H5Dopen2(group, name, H5P_DEFAULT);
    int64_t this_n = -1;
    lb_h5_info info = {0};
    lb_status st = dset < 0 ? lb_error(LB_ERR_FORMAT, "%s: dataset %s cannot be opened (corrupted?)", r->file, where)
                            : check_field_shape(r, where, dset, f, &this_n, &info);
    if (st == LB_OK && *n >= 0 && this_n != *n)
        st = lb_error(LB_ERR_FORMAT, "%s: dataset %s has %lld examples but /%s/inputs has %lld", r->file, where,
                      (long long)this_n, split_names[split], (long long)*n);
    int load = r->only < 0 || r->only == split;
    if (st == LB_OK && *n < 0) { /* inputs come first: they fix N and allocate the split */
        *n = this_n;
        if (load)
            st = claim_bytes(r, split_names[split], this_n);
        if (st == LB_OK && load)
            st = lb_rows_alloc(l, this_n, NULL, r->file, &r->ds->split[split]);
    }
    if (st == LB_OK && load)
        st = read_values(r, dset, where, f, &info, r->ds->split[split].data[f], this_n);
    lb_h5_close(dset);
    return st;
}

static lb_status read_split(reader *r, int split)
{
    const char *name = split_names[split];
    hid_t group = lb_h5_has_link(r->fid, name) ? H5Gopen2(r->fid, name, H5P_DEFAULT) : -1;
    if (group < 0)
        return lb_error(LB_ERR_FORMAT, "%s: missing group /%s (every file has train, val and test; a split may be empty)",
                        r->file, name);
    int64_t n = -1;
    lb_status st = LB_OK;
    for (int f = 0; st == LB_OK && f < LB_FIELD_COUNT; f++) {
        if (lb_layout_has(&r->ds->layout, (lb_field)f))
            st = read_field(r, group, split, (lb_field)f, &n);
        else if (lb_h5_has_link(group, lb_field_name((lb_field)f)))
            st = lb_error(LB_ERR_FORMAT, "%s: /%s/%s exists but /train has none (splits must hold the same datasets)",
                          r->file, name, lb_field_name((lb_field)f));
    }
    lb_h5_close(group);
    return st;
}

/* ---- the events schema (task "events") ---- */

/* Parses ds->events_json and checks it against the file: seq_len, features, classes and
 * the kind of targets must be the schema's. */
static lb_status parse_events(lb_dataset *ds, const char *file)
{
    ds->events = lb_event_schema_from_json(ds->events_json, ds->events_len, file);
    if (!ds->events)
        return lb_last_status();
    const lb_event_schema *e = ds->events;
    if (e->seq_len != ds->layout.seq_len || e->input_features != ds->layout.features ||
        e->num_classes != ds->num_classes || (e->label_per == LB_LABEL_PER_EVENT) != ds->layout.per_position ||
        ds->vocab_size != 0)
        return lb_error(LB_ERR_FORMAT,
                        "%s: /events/schema does not describe the datasets (schema: seq_len %lld, %lld features, %lld "
                        "classes, labels per %s; file: seq_len %lld, %lld features, %lld classes, %s targets)",
                        file, (long long)e->seq_len, (long long)e->input_features, (long long)e->num_classes,
                        e->label_per == LB_LABEL_PER_EVENT ? "event" : "sequence", (long long)ds->layout.seq_len,
                        (long long)ds->layout.features, (long long)ds->num_classes,
                        ds->layout.per_position ? "per-position" : "per-sequence");
    return LB_OK;
}

static lb_status read_events(reader *r)
{
    hid_t group = lb_h5_has_link(r->fid, "events") ? H5Gopen2(r->fid, "events", H5P_DEFAULT) : -1;
    if (group < 0)
        return lb_error(LB_ERR_FORMAT, "%s: task 'events' but no group /events (the schema of the import)", r->file);
    lb_status st = lb_h5_read_bytes(group, "schema", MAX_SCHEMA_BYTES, &r->ds->events_json, &r->ds->events_len, r->file);
    lb_h5_close(group);
    if (st == LB_OK)
        st = parse_events(r->ds, r->file);
    return st;
}

/* ---- open / close ---- */

static lb_status read_file(reader *r)
{
    lb_status st = lb_h5_open_read(r->file, "data file", &r->fid);
    if (st != LB_OK)
        return st;
    if (lb_text_is_corpus(r->fid)) {
        st = lb_text_read_store(r->fid, r->file, r->only, r->file_bytes, &r->ds->text);
        if (H5Fclose(r->fid) < 0 && st == LB_OK)
            st = lb_error(LB_ERR_FORMAT, "%s: closing the file failed (corrupted file?)", r->file);
        return st;
    }
    st = read_root_attrs(r);
    if (st == LB_OK)
        st = infer_layout(r);
    for (int s = 0; st == LB_OK && s < LB_SPLIT_COUNT; s++)
        st = read_split(r, s);
    if (st == LB_OK && r->ds->is_events)
        st = read_events(r);
    if (H5Fclose(r->fid) < 0 && st == LB_OK)
        st = lb_error(LB_ERR_FORMAT, "%s: closing the file failed (corrupted file?)", r->file);
    return st;
}

/* Opening runs in two processes: a child reads and validates the file with HDF5
 * (lb_h5_isolated, with a time limit) and sends the checked dataset over a socket;
 * this process never calls HDF5 on the file, so a file that makes libhdf5 crash or
 * hang costs only the child. */
typedef struct open_job {
    reader r;
    int sock[2]; /* [0] this process, [1] the child */
} open_job;

/* What the child sends before the rows: every field of lb_dataset but the pointers. */
typedef struct dataset_header {
    lb_task_options options;
    int all_options_present;
    uint64_t recorded;
    int64_t format_version, vocab_size, num_classes;
    lb_layout layout;
    int64_t n[LB_SPLIT_COUNT];
    int is_events;
    uint64_t events_len;
    int is_text; /* a text corpus: lb_text_store_transfer follows instead of rows */
} dataset_header;

static lb_status open_child(void *ctx)
{
    open_job *job = ctx;
    close(job->sock[0]);
    lb_status st = read_file(&job->r);
    if (st != LB_OK)
        return st;
    const lb_dataset *ds = job->r.ds;
    dataset_header h;
    memset(&h, 0, sizeof h);
    h.options = ds->options;
    h.all_options_present = ds->all_options_present;
    h.recorded = ds->recorded;
    h.format_version = ds->format_version;
    h.vocab_size = ds->vocab_size;
    h.num_classes = ds->num_classes;
    h.layout = ds->layout;
    for (int s = 0; s < LB_SPLIT_COUNT; s++)
        h.n[s] = ds->split[s].n;
    h.is_events = ds->is_events;
    h.events_len = ds->events_json ? (uint64_t)ds->events_len : 0;
    h.is_text = ds->text.present;
    int bad = lb_transfer_bytes(job->sock[1], &h, sizeof h, 1) != 0;
    if (!bad && h.is_text)
        bad = lb_text_store_transfer(job->sock[1], &job->r.ds->text, 1) != 0;
    for (int s = 0; !bad && !h.is_text && s < LB_SPLIT_COUNT; s++)
        bad = lb_rows_transfer(job->sock[1], &ds->layout, &job->r.ds->split[s], 1) != 0;
    if (!bad && h.events_len)
        bad = lb_transfer_bytes(job->sock[1], ds->events_json, (size_t)h.events_len, 1) != 0;
    return bad ? lb_error(LB_ERR_IO, "%s: the reading process could not send the data", job->r.file) : LB_OK;
}

static lb_status text_setup(lb_dataset *ds, const char *file);

/* This process: receives what the child read. LB_ERR_STATE when the child stopped
 * (its own message says why). */
static lb_status open_receive(void *ctx)
{
    open_job *job = ctx;
    close(job->sock[1]);
    lb_dataset *ds = job->r.ds;
    dataset_header h;
    lb_status st = lb_transfer_bytes(job->sock[0], &h, sizeof h, 0) == 0 ? LB_OK : LB_ERR_STATE;
    if (st == LB_OK) {
        ds->options = h.options;
        ds->all_options_present = h.all_options_present;
        ds->recorded = h.recorded;
        ds->format_version = h.format_version;
        ds->vocab_size = h.vocab_size;
        ds->num_classes = h.num_classes;
        ds->layout = h.layout;
        ds->is_events = h.is_events;
    }
    if (st == LB_OK && h.is_text) {
        st = lb_text_store_transfer(job->sock[0], &ds->text, 0) == 0 ? LB_OK : LB_ERR_STATE;
        close(job->sock[0]);
        if (st != LB_OK)
            return lb_error(LB_ERR_STATE, "%s: the reading process stopped", job->r.file);
        return text_setup(ds, job->r.file);
    }
    for (int s = 0; st == LB_OK && s < LB_SPLIT_COUNT; s++) {
        st = lb_rows_alloc(&ds->layout, h.n[s], NULL, job->r.file, &ds->split[s]);
        if (st == LB_OK && lb_rows_transfer(job->sock[0], &ds->layout, &ds->split[s], 0) != 0)
            st = LB_ERR_STATE;
    }
    if (st == LB_OK && ds->is_events) {
        ds->events_json = h.events_len <= MAX_SCHEMA_BYTES ? malloc((size_t)h.events_len + 1) : NULL;
        ds->events_len = (size_t)h.events_len;
        if (!ds->events_json)
            st = lb_error(LB_ERR_MEMORY, "%s: out of memory for the events schema", job->r.file);
        else if (lb_transfer_bytes(job->sock[0], ds->events_json, ds->events_len, 0) != 0)
            st = LB_ERR_STATE;
        else
            ds->events_json[ds->events_len] = '\0';
        if (st == LB_OK)
            st = parse_events(ds, job->r.file);
    }
    close(job->sock[0]);
    return st == LB_ERR_STATE ? lb_error(LB_ERR_STATE, "%s: the reading process stopped", job->r.file) : st;
}

static lb_dataset *open_splits(const char *path, int only);

/* The window T a text corpus starts with: LB_TEXT_DEFAULT_SEQ_LEN, or less when the
 * training split is shorter (T + 1 tokens make one window). */
static int64_t default_window(const lb_text_store *t)
{
    int64_t n = t->n[0] > 0 ? t->n[0] : t->n[1] > 0 ? t->n[1] : t->n[2];
    int64_t w = LB_TEXT_DEFAULT_SEQ_LEN;
    return n - 1 < w ? (n > 2 ? n - 1 : 1) : w;
}

/* A received text corpus as a dataset: one class per token, a target at every position. */
static lb_status text_setup(lb_dataset *ds, const char *file)
{
    if (!(ds->vocab = lb_text_store_vocab(&ds->text, file)))
        return lb_last_status();
    lb_task_options_default(LB_TASK_SPIKE, &ds->options);
    ds->format_version = LB_DATA_FORMAT_VERSION;
    ds->vocab_size = ds->num_classes = ds->text.vocab_size;
    memset(&ds->layout, 0, sizeof ds->layout);
    ds->layout.per_position = 1;
    ds->layout.seq_len = ds->options.seq_len = default_window(&ds->text);
    ds->all_options_present = 0;
    return LB_OK;
}

lb_status lb_dataset_check_vocab(const lb_dataset *ds, const lb_vocab *model_vocab, const char *model_file)
{
    LB_CHECK_ARG(ds, LB_ERR_VALUE);
    LB_CHECK_ARG(model_vocab, LB_ERR_VALUE);
    model_file = model_file ? model_file : "MODEL.h5";
    if (!ds->text.present)
        return lb_error(LB_ERR_VALUE, "%s: holds the %s task, not a text corpus: it has no vocabulary", ds->path,
                        lb_task_name(ds->options.task));
    char detail[160];
    if (!lb_vocab_difference(model_vocab, ds->vocab, detail, sizeof detail))
        return LB_OK;
    /* the text to import again: the corpus's one input file, when it was one */
    const char *src = ds->text.source;
    int one_file = src[0] && strcmp(src, "-") != 0 && !strstr(src, "; ");
    /* NEW.h5: the corpus's name with "-like" before its extension */
    const char *base = strrchr(ds->path, '/') ? strrchr(ds->path, '/') + 1 : ds->path;
    const char *dot = strrchr(base, '.');
    int stem = dot && dot > base ? (int)(dot - base) : (int)strlen(base);
    return lb_error(LB_ERR_VALUE, "%s does not hold the vocabulary the model was trained with (%s: %s): the model's ids "
                    "would mean other characters; import its text with the model's vocabulary: `lookback data text "
                    "%s --like %s -o %.*s-like.h5`",
                    ds->path, model_file, detail, one_file ? src : "TEXT", model_file, stem, base);
}

lb_dataset *lb_dataset_open(const char *path)
{
    if (!path) {
        lb_error(LB_ERR_VALUE, "lb_dataset_open: path is NULL");
        return NULL;
    }
    return open_splits(path, -1);
}

lb_dataset *lb_dataset_open_split(const char *path, const char *split)
{
    if (!path || !split) {
        lb_error(LB_ERR_VALUE, "lb_dataset_open_split: path and split must not be NULL");
        return NULL;
    }
    int only = lb_split_index(split, path);
    return only < 0 ? NULL : open_splits(path, only);
}

static lb_dataset *open_splits(const char *path, int only)
{
    if (!*path) {
        lb_error(LB_ERR_VALUE, "lb_dataset_open: the data file path is empty");
        return NULL;
    }
    lb_dataset *ds = calloc(1, sizeof *ds);
    char *copy = ds ? strdup(path) : NULL;
    if (!copy) {
        free(ds);
        lb_error(LB_ERR_MEMORY, "%s: out of memory", path);
        return NULL;
    }
    ds->path = copy;
    open_job job = {.r = {.ds = ds, .file = path, .fid = -1, .only = only}, .sock = {-1, -1}};
    struct stat sb;
    lb_status st = stat(path, &sb) == 0 ? LB_OK : lb_error(LB_ERR_IO, "%s: cannot open: %s", path, lb_system_error(errno));
    if (st == LB_OK && !S_ISREG(sb.st_mode))
        st = lb_error(LB_ERR_IO, "%s: not a regular file%s", path, S_ISDIR(sb.st_mode) ? " (a folder)" : "");
    job.r.file_bytes = st == LB_OK ? (int64_t)sb.st_size : 0;
    double timeout = lb_h5_read_timeout(job.r.file_bytes);
    if (st == LB_OK && socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, job.sock) != 0)
        st = lb_error(LB_ERR_IO, "%s: cannot create a socket pair for reading: %s", path, lb_system_error(errno));
    if (st == LB_OK) {
        struct timeval tv = {(time_t)timeout, (suseconds_t)((timeout - (double)(time_t)timeout) * 1e6)};
        setsockopt(job.sock[0], SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv); /* a hanging child */
        lb_h5_quiet quiet;
        lb_h5_quiet_begin(&quiet);
        st = lb_h5_isolated(open_child, open_receive, &job, timeout, 0, path);
        lb_h5_quiet_end(&quiet);
    }
    if (st != LB_OK) {
        lb_dataset_close(ds);
        return NULL;
    }
    return ds;
}

lb_dataset *lb_dataset_adopt_rows(const char *name, const lb_layout *layout, int64_t vocab_size, int64_t num_classes,
                                  lb_rows *rows)
{
    lb_dataset *ds = calloc(1, sizeof *ds);
    char *copy = ds ? strdup(name) : NULL;
    if (!copy) {
        free(ds);
        for (int s = 0; s < LB_SPLIT_COUNT; s++)
            lb_rows_free(&rows[s]);
        lb_error(LB_ERR_MEMORY, "%s: out of memory", name);
        return NULL;
    }
    ds->path = copy;
    ds->from_arrays = 1;
    ds->options.task = LB_TASK_COUNT;
    ds->format_version = LB_DATA_FORMAT_VERSION;
    ds->layout = *layout;
    ds->vocab_size = vocab_size;
    ds->num_classes = num_classes;
    for (int s = 0; s < LB_SPLIT_COUNT; s++)
        ds->split[s] = rows[s];
    return ds;
}

void lb_dataset_close(lb_dataset *ds)
{
    if (!ds)
        return;
    for (int s = 0; s < LB_SPLIT_COUNT; s++)
        lb_rows_free(&ds->split[s]);
    free(ds->events_json);
    lb_event_schema_free(ds->events);
    lb_text_store_free(&ds->text);
    lb_vocab_free(ds->vocab);
    free(ds->path);
    free(ds);
}

/* ---- accessors ---- */

const char *lb_dataset_path(const lb_dataset *ds)
{
    LB_CHECK_ARG(ds, NULL);
    return ds->path;
}
const char *lb_dataset_task_name(const lb_dataset *ds)
{
    LB_CHECK_ARG(ds, NULL);
    if (ds->from_arrays)
        return "arrays";
    return ds->text.present ? "text" : ds->is_events ? "events" : lb_task_name(ds->options.task);
}
const lb_event_schema *lb_dataset_events(const lb_dataset *ds)
{
    LB_CHECK_ARG(ds, NULL);
    if (!ds->events)
        lb_error(LB_ERR_STATE, "%s: not an events file (task %s)", ds->path, lb_dataset_task_name(ds));
    return ds->events;
}
const char *lb_dataset_events_json(const lb_dataset *ds, size_t *len)
{
    LB_CHECK_ARG(ds, NULL);
    if (len)
        *len = ds->events_len;
    if (!ds->events_json)
        lb_error(LB_ERR_STATE, "%s: not an events file (task %s)", ds->path, lb_dataset_task_name(ds));
    return ds->events_json;
}
lb_task_kind lb_dataset_task(const lb_dataset *ds)
{
    LB_CHECK_ARG(ds, LB_TASK_COUNT);
    return ds->options.task;
}
const lb_task_options *lb_dataset_options(const lb_dataset *ds)
{
    LB_CHECK_ARG(ds, NULL);
    return &ds->options;
}
int64_t lb_dataset_seq_len(const lb_dataset *ds)
{
    LB_CHECK_ARG(ds, -1);
    return ds->layout.seq_len;
}
int64_t lb_dataset_vocab_size(const lb_dataset *ds)
{
    LB_CHECK_ARG(ds, -1);
    return ds->vocab_size;
}
int64_t lb_dataset_num_classes(const lb_dataset *ds)
{
    LB_CHECK_ARG(ds, -1);
    return ds->num_classes;
}
int64_t lb_dataset_num_features(const lb_dataset *ds)
{
    LB_CHECK_ARG(ds, -1);
    return ds->layout.features;
}
int lb_dataset_is_regression(const lb_dataset *ds)
{
    LB_CHECK_ARG(ds, 0);
    return ds->layout.regression;
}
int lb_dataset_per_position(const lb_dataset *ds)
{
    LB_CHECK_ARG(ds, -1);
    return ds->layout.per_position;
}
int lb_dataset_has_distance(const lb_dataset *ds)
{
    LB_CHECK_ARG(ds, 0);
    return ds->layout.has_distance;
}
int lb_dataset_has_lengths(const lb_dataset *ds)
{
    LB_CHECK_ARG(ds, 0);
    return ds->layout.has_lengths;
}
const lb_layout *lb_dataset_layout(const lb_dataset *ds) { return &ds->layout; }
const lb_rows *lb_dataset_rows(const lb_dataset *ds, int split) { return &ds->split[split]; }

int64_t lb_dataset_split_size(const lb_dataset *ds, const char *split)
{
    LB_CHECK_ARG(ds, -1);
    int s = lb_split_index(split, ds->path);
    if (s >= 0 && ds->text.present) /* non-overlapping windows covering every target */
        return ds->text.tokens[s] && ds->text.n[s] >= 2 ? (ds->text.n[s] - 1 + ds->layout.seq_len - 1) / ds->layout.seq_len
                                                        : 0;
    return s < 0 ? -1 : ds->split[s].n;
}

int lb_dataset_is_text(const lb_dataset *ds)
{
    LB_CHECK_ARG(ds, 0);
    return ds->text.present;
}

const lb_vocab *lb_dataset_vocab(const lb_dataset *ds)
{
    LB_CHECK_ARG(ds, NULL);
    return ds->vocab;
}

const int32_t *lb_dataset_tokens(const lb_dataset *ds, const char *split, int64_t *n)
{
    LB_CHECK_ARG(ds, NULL);
    LB_CHECK_ARG(n, NULL);
    *n = 0;
    int s = lb_split_index(split, ds->path);
    if (s < 0)
        return NULL;
    if (!ds->text.present) {
        lb_error(LB_ERR_STATE, "%s: holds the %s task, not a text corpus: it has no token stream", ds->path,
                 lb_task_name(ds->options.task));
        return NULL;
    }
    *n = ds->text.tokens[s] ? ds->text.n[s] : 0;
    return ds->text.tokens[s];
}

/* The bytes and characters of tok[0..n) decoded with v (a corpus stored before they were
 * recorded); -1 each when out of memory. */
static void measure_decoded(const lb_vocab *v, const int32_t *tok, int64_t n, int64_t *bytes, int64_t *chars)
{
    size_t len = 0;
    *bytes = *chars = -1;
    if (lb_vocab_decode(v, tok, n, NULL, 0, &len) != LB_OK)
        return;
    char *text = malloc(len + 1);
    if (!text || lb_vocab_decode(v, tok, n, text, len + 1, &len) != LB_OK) {
        free(text);
        lb_clear_error();
        return;
    }
    *bytes = (int64_t)len;
    *chars = 0;
    for (size_t i = 0; i < len; i++)
        *chars += ((unsigned char)text[i] & 0xC0) != 0x80;
    free(text);
}

lb_status lb_text_split_size(const lb_dataset *ds, const char *split, int64_t *tokens, int64_t *bytes,
                             int64_t *characters)
{
    LB_CHECK_ARG(ds && tokens && bytes && characters, LB_ERR_VALUE);
    int s = lb_split_index(split, ds->path);
    if (s < 0)
        return lb_last_status();
    if (!ds->text.present)
        return lb_error(LB_ERR_STATE, "%s: holds the %s task, not a text corpus", ds->path, lb_task_name(ds->options.task));
    const lb_text_store *t = &ds->text;
    *tokens = t->n[s];
    *bytes = t->text_bytes[s];
    *characters = t->text_characters[s];
    if (*bytes >= 0 && *characters >= 0)
        return LB_OK;
    if (t->kind == LB_VOCAB_CHAR)
        *characters = t->n[s];
    else if (t->kind == LB_VOCAB_BYTE)
        *bytes = t->n[s];
    if ((*bytes < 0 || *characters < 0) && t->tokens[s])
        measure_decoded(ds->vocab, t->tokens[s], t->n[s], bytes, characters);
    return LB_OK;
}

void lb_text_bits(const lb_dataset *ds, const char *split, double loss, double *bits_per_byte, double *bits_per_char)
{
    int64_t tokens = 0, bytes = -1, chars = -1;
    if (lb_text_split_size(ds, split, &tokens, &bytes, &chars) != LB_OK)
        lb_clear_error();
    double bits = loss / log(2.0);
    if (bits_per_byte)
        *bits_per_byte = bytes > 0 ? bits * (double)tokens / (double)bytes : NAN;
    if (bits_per_char)
        *bits_per_char = chars > 0 ? bits * (double)tokens / (double)chars : NAN;
}

lb_status lb_dataset_set_seq_len(lb_dataset *ds, int64_t seq_len)
{
    LB_CHECK_ARG(ds, LB_ERR_VALUE);
    if (!ds->text.present)
        return lb_error(LB_ERR_STATE, "%s: holds the %s task, whose sequences have a fixed length (%lld); only a text "
                        "corpus takes a window length", ds->path, lb_task_name(ds->options.task),
                        (long long)ds->layout.seq_len);
    if (seq_len < 1 || seq_len > MAX_WINDOW)
        return lb_error(LB_ERR_VALUE, "%s: window length %lld is outside [1, %d]", ds->path, (long long)seq_len, MAX_WINDOW);
    ds->layout.seq_len = ds->options.seq_len = seq_len;
    return LB_OK;
}

lb_status lb_dataset_label_histogram(const lb_dataset *ds, const char *split, int64_t *counts, int64_t *ignored)
{
    LB_CHECK_ARG(ds, LB_ERR_VALUE);
    LB_CHECK_ARG(counts, LB_ERR_VALUE);
    int s = lb_split_index(split, ds->path);
    if (s < 0)
        return LB_ERR_VALUE;
    if (ds->layout.regression)
        return lb_error(LB_ERR_STATE, "%s: regression targets have no label histogram (no classes)", ds->path);
    if (ds->text.present) { /* every token but the first is a target */
        memset(counts, 0, (size_t)ds->num_classes * sizeof *counts);
        const int32_t *tok = ds->text.tokens[s];
        for (int64_t i = 1; tok && i < ds->text.n[s]; i++)
            counts[tok[i]]++;
        if (ignored)
            *ignored = 0;
        return LB_OK;
    }
    const int32_t *t = ds->split[s].data[LB_FIELD_TARGETS];
    int64_t n = ds->split[s].n * lb_layout_row_elems(&ds->layout, LB_FIELD_TARGETS), skipped = 0;
    memset(counts, 0, (size_t)ds->num_classes * sizeof *counts);
    for (int64_t i = 0; i < n; i++) {
        if (t[i] == LB_IGNORE_INDEX)
            skipped++;
        else
            counts[t[i]]++;
    }
    if (ignored)
        *ignored = skipped;
    return LB_OK;
}

/* Smallest and largest of an int32 field over a split (n > 0). */
static void int_range(const int32_t *v, int64_t n, int32_t *min, int32_t *max)
{
    *min = *max = v[0];
    for (int64_t i = 1; i < n; i++) {
        *min = v[i] < *min ? v[i] : *min;
        *max = v[i] > *max ? v[i] : *max;
    }
}

lb_status lb_dataset_distance_range(const lb_dataset *ds, const char *split, int32_t *min, int32_t *max)
{
    LB_CHECK_ARG(ds, LB_ERR_VALUE);
    LB_CHECK_ARG(min, LB_ERR_VALUE);
    LB_CHECK_ARG(max, LB_ERR_VALUE);
    int s = lb_split_index(split, ds->path);
    if (s < 0)
        return LB_ERR_VALUE;
    if (!ds->layout.has_distance || ds->split[s].n == 0)
        return lb_error(LB_ERR_STATE, "%s: split %s has no distances (%s)", ds->path, split,
                        ds->layout.has_distance ? "it is empty" : "the task has none");
    int_range(ds->split[s].data[LB_FIELD_DISTANCE], ds->split[s].n, min, max);
    return LB_OK;
}

/* ---- data info ---- */

static void print_shapes(const lb_dataset *ds, FILE *out)
{
    static const char *const meaning[LB_FIELD_COUNT] = {"inputs", "targets", "clue-to-query distance",
                                                        "real length (PAD after)"};
    for (int f = 0; f < LB_FIELD_COUNT; f++) {
        if (!lb_layout_has(&ds->layout, (lb_field)f))
            continue;
        char shape[96];
        const char *what = meaning[f];
        if (f == LB_FIELD_INPUTS)
            what = ds->layout.features ? "real-valued features" : "token ids, 0 = PAD";
        else if (f == LB_FIELD_TARGETS)
            what = ds->layout.regression ? "regression target" : ds->layout.per_position
                                                                   ? "class per position, -100 = ignored"
                                                                   : "class per sequence";
        fprintf(out, "  %-9s %-22s %s\n", lb_field_name((lb_field)f),
                expected_str(&ds->layout, (lb_field)f, shape, sizeof shape), what);
    }
}

static void print_split_row(const lb_dataset *ds, int s, FILE *out)
{
    const lb_rows *rows = &ds->split[s];
    fprintf(out, "  %-6s %10lld", split_names[s], (long long)rows->n);
    int32_t lo, hi;
    if (ds->layout.has_distance && rows->n > 0) {
        int_range(rows->data[LB_FIELD_DISTANCE], rows->n, &lo, &hi);
        fprintf(out, "   distance %d..%d", lo, hi);
    }
    if (ds->layout.has_lengths && rows->n > 0) {
        int_range(rows->data[LB_FIELD_LENGTHS], rows->n, &lo, &hi);
        fprintf(out, "   length %d..%d", lo, hi);
    }
    fputc('\n', out);
}

static int compare_int32(const void *a, const void *b)
{
    int32_t x = *(const int32_t *)a, y = *(const int32_t *)b;
    return (x > y) - (x < y);
}

/* Classes printed one by one even when absent, when num_classes is at most this or at
 * most the split's targets; beyond, only the classes that occur (the report is bounded
 * by the data in the file, whatever num_classes claims). */
enum { HISTOGRAM_ALL_CLASSES = 4096, HISTOGRAM_SHOWN = 64 };

/* After a histogram that shows only the classes that occur: how many do, of how many. */
static void print_classes_note(FILE *out, int64_t present, int64_t num_classes)
{
    fprintf(out, "\n  (%lld of the %lld classes occur", (long long)present, (long long)num_classes);
    if (present > HISTOGRAM_SHOWN)
        fprintf(out, ", the first %d shown", HISTOGRAM_SHOWN);
    fputs("; the others have 0)", out);
}

static void print_histogram_of(const lb_dataset *ds, const char *split, FILE *out)
{
    int s = lb_split_index(split, ds->path);
    const lb_rows *rows = &ds->split[s];
    int64_t n = rows->n * lb_layout_row_elems(&ds->layout, LB_FIELD_TARGETS);
    int dense = ds->num_classes <= HISTOGRAM_ALL_CLASSES || ds->num_classes <= n;
    /* dense: a count per class; sparse: the targets sorted (as many as the file holds) */
    int64_t *counts = dense ? calloc((size_t)ds->num_classes, sizeof *counts) : NULL;
    int32_t *sorted = dense ? NULL : malloc((size_t)(n > 0 ? n : 1) * sizeof *sorted);
    if (!counts && !sorted) {
        fputs("label histogram: (out of memory)\n", out);
        return;
    }
    fprintf(out, "label histogram (%s%s):", split, ds->layout.per_position ? ", scored positions" : "");
    int64_t total = 0, top = -1, top_count = 0, present = 0;
    if (dense) {
        int64_t ignored = 0;
        lb_dataset_label_histogram(ds, split, counts, &ignored);
        /* every class when they fit in 8 lines; otherwise the classes that occur, at most
         * HISTOGRAM_SHOWN of them */
        int all = ds->num_classes <= HISTOGRAM_SHOWN;
        int64_t shown = 0;
        for (int64_t c = 0; c < ds->num_classes; c++) {
            if ((all || counts[c]) && shown < HISTOGRAM_SHOWN) {
                fprintf(out, "%s%lld:%lld", shown % 8 ? "  " : "\n  ", (long long)c, (long long)counts[c]);
                shown++;
            }
            present += counts[c] > 0;
            total += counts[c];
            if (top < 0 || counts[c] > top_count)
                top = c, top_count = counts[c];
        }
        if (!all)
            print_classes_note(out, present, ds->num_classes);
    } else {
        const int32_t *t = rows->data[LB_FIELD_TARGETS];
        int64_t m = 0;
        for (int64_t i = 0; i < n; i++)
            if (t[i] != LB_IGNORE_INDEX)
                sorted[m++] = t[i];
        qsort(sorted, (size_t)m, sizeof *sorted, compare_int32);
        for (int64_t i = 0; i < m;) {
            int64_t j = i;
            while (j < m && sorted[j] == sorted[i])
                j++;
            if (present < HISTOGRAM_SHOWN)
                fprintf(out, "%s%d:%lld", present % 8 ? "  " : "\n  ", sorted[i], (long long)(j - i));
            if (j - i > top_count)
                top = sorted[i], top_count = j - i;
            present++;
            i = j;
        }
        total = m;
        print_classes_note(out, present, ds->num_classes);
    }
    if (ds->is_events && total > 0)
        fprintf(out, "\n  majority class %lld: %.4f of the scored targets", (long long)top,
                (double)top_count / (double)total);
    fputc('\n', out);
    free(counts);
    free(sorted);
}

static void print_histogram(const lb_dataset *ds, FILE *out) { print_histogram_of(ds, "train", out); }

/* Events files: each numeric feature's mean, std, min and max per split, in the CSV's
 * units (the stored inputs scaled back), over the windows' positions. */
static void print_feature_stats(const lb_dataset *ds, FILE *out)
{
    const lb_event_schema *e = ds->events;
    if (e->n_features == 0)
        return;
    fputs("features per split (CSV units, over the windows' positions: mean std min max)\n", out);
    for (int64_t c = 0; c < e->n_features; c++) {
        const lb_event_feature *f = &e->features[c];
        fprintf(out, "  %-14s scaling mean %.6g std %.6g\n", f->name, f->mean, f->std);
        for (int s = 0; s < LB_SPLIT_COUNT; s++) {
            const lb_rows *rows = &ds->split[s];
            const float *x = rows->data[LB_FIELD_INPUTS];
            int64_t n = rows->n * ds->layout.seq_len, F = ds->layout.features;
            double mean = 0, m2 = 0, lo = INFINITY, hi = -INFINITY;
            for (int64_t i = 0; i < n; i++) {
                double v = (double)x[i * F + c] * f->std + f->mean, d = v - mean;
                mean += d / (double)(i + 1);
                m2 += d * (v - mean);
                lo = v < lo ? v : lo;
                hi = v > hi ? v : hi;
            }
            if (n > 0)
                fprintf(out, "    %-6s %12.6g %12.6g %12.6g %12.6g\n", split_names[s], mean, sqrt(m2 / (double)n), lo, hi);
            else
                fprintf(out, "    %-6s (empty)\n", split_names[s]);
        }
    }
}

static void print_target_moments(const lb_dataset *ds, FILE *out)
{
    const lb_rows *rows = &ds->split[0];
    const float *y = rows->data[LB_FIELD_TARGETS];
    double mean = 0, m2 = 0;
    for (int64_t i = 0; i < rows->n; i++) { /* Welford */
        double delta = y[i] - mean;
        mean += delta / (double)(i + 1);
        m2 += delta * (y[i] - mean);
    }
    fprintf(out, "targets (train): mean %.6f, variance %.6f (= MSE of predicting the mean)\n", mean,
            rows->n ? m2 / (double)rows->n : 0.0);
}

lb_status lb_dataset_print_info(const lb_dataset *ds, FILE *out)
{
    LB_CHECK_ARG(ds, LB_ERR_VALUE);
    LB_CHECK_ARG(out, LB_ERR_VALUE);
    if (ds->text.present)
        return lb_text_print_info(ds, out);
    const lb_task_options *o = &ds->options;
    fprintf(out, "file      %s\n", ds->path);
    fprintf(out, "task      %s (format_version %lld)\n", lb_dataset_task_name(ds), (long long)ds->format_version);
    if (ds->is_events) {
        lb_event_schema_print(ds->events, out);
    } else {
        fputs("options   ", out);
        lb_task_print_recorded_options(o, ds->recorded, " ", out);
        fputc('\n', out);
    }
    if (ds->is_events)
        fprintf(out, "vocab     real-valued inputs (%lld per row), num_classes %lld\n", (long long)ds->layout.features,
                (long long)ds->num_classes);
    else if (ds->layout.regression)
        fprintf(out, "vocab     vocab_size %lld, regression (num_classes 0)\n", (long long)ds->vocab_size);
    else
        fprintf(out, "vocab     vocab_size %lld, num_classes %lld (chance accuracy %.4f)\n", (long long)ds->vocab_size,
                (long long)ds->num_classes, 1.0 / (double)ds->num_classes);
    if (o->task == LB_TASK_COPY && o->blank_targets)
        fprintf(out, "baseline  memoryless loss %.4f per position (copy_symbols * ln(alphabet) / seq_len: blanks "
                     "predicted, outputs guessed uniformly)\n",
                (double)o->copy_symbols * log((double)o->alphabet) / (double)o->seq_len);
    fputs("datasets (per split)\n", out);
    print_shapes(ds, out);
    fputs("splits\n", out);
    for (int s = 0; s < LB_SPLIT_COUNT; s++)
        print_split_row(ds, s, out);
    if (ds->is_events) {
        for (int s = 0; s < LB_SPLIT_COUNT; s++)
            print_histogram_of(ds, split_names[s], out);
        print_feature_stats(ds, out);
    } else if (ds->layout.regression) {
        print_target_moments(ds, out);
    } else {
        print_histogram(ds, out);
    }
    if (ferror(out))
        return lb_error(LB_ERR_IO, "%s: writing the description failed", ds->path);
    return LB_OK;
}

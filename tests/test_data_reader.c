/* The validating reader: round trips, files from another writer, every kind of bad
 * input (one clear error, never a crash), and a corpus of corrupted files. */
#include "data/dataset.h"
#include "data/loader.h"
#include "data/tasks.h"
#include "support.h"

#include <fcntl.h>
#include <hdf5.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

/* HDF5 1.10.8 itself leaks a few KB (and prints "infinite loop closing library" at
 * exit) after failing to open some corrupted files, also in programs without lookback.
 * LeakSanitizer is told to ignore allocations made inside libhdf5; that identifiers
 * of ours are all closed is asserted separately (H5Fget_obj_count after each case). */
const char *__lsan_default_suppressions(void);
const char *__lsan_default_suppressions(void) { return "leak:libhdf5\n"; }

static const char *tmp_path(const char *name)
{
    static char buf[4][256];
    static int slot;
    const char *dir = getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp";
    slot = (slot + 1) % 4;
    snprintf(buf[slot], sizeof buf[slot], "%s/lb_test_data_reader_%d_%s.h5", dir, (int)getpid(), name);
    return buf[slot];
}

/* A small valid file: T = 16 (copy 24, recall 32), 8 / 3 / 2 examples, variable lengths. */
static void make_small(lb_task_kind task, const char *path)
{
    lb_task_options o;
    lb_task_options_default(task, &o);
    o.seq_len = task == LB_TASK_COPY ? 24 : task == LB_TASK_RECALL ? 32 : 16;
    o.variable_length = 1;
    o.n_train = 8;
    o.n_val = 3;
    o.n_test = 2;
    o.seed = 5;
    lb_status st = lb_task_generate(&o, path, NULL, NULL);
    if (st != LB_OK)
        fprintf(stderr, "\n  generate: %s\n", lb_last_error());
    CU_ASSERT_EQUAL_FATAL(st, LB_OK);
}

/* Opening `path` must fail with `status` and a message containing every needle. */
static void expect_open_error(const char *path, lb_status status, const char *const *needles)
{
    lb_clear_error();
    lb_dataset *ds = lb_dataset_open(path);
    CU_ASSERT_PTR_NULL(ds);
    lb_dataset_close(ds);
    CU_ASSERT_EQUAL(lb_last_status(), status);
    for (int i = 0; needles[i]; i++) {
        if (!strstr(lb_last_error(), needles[i])) {
            fprintf(stderr, "\n  message '%s' lacks '%s'\n", lb_last_error(), needles[i]);
            CU_FAIL("error message incomplete");
        }
    }
}

/* ---- editing files with the HDF5 API ---- */

static hid_t open_rw(const char *path)
{
    hid_t f = H5Fopen(path, H5F_ACC_RDWR, H5P_DEFAULT);
    CU_ASSERT_TRUE_FATAL(f >= 0);
    return f;
}

static void set_attr(const char *path, const char *name, hid_t type, const void *value)
{
    hid_t f = open_rw(path);
    if (H5Aexists(f, name) > 0)
        H5Adelete(f, name);
    if (type >= 0) {
        hid_t space = H5Screate(H5S_SCALAR);
        hid_t a = H5Acreate2(f, name, type, space, H5P_DEFAULT, H5P_DEFAULT);
        CU_ASSERT_TRUE(H5Awrite(a, type, value) >= 0);
        H5Aclose(a);
        H5Sclose(space);
    }
    H5Fclose(f);
}

static void set_attr_int(const char *path, const char *name, int64_t value)
{
    set_attr(path, name, H5T_NATIVE_INT64, &value);
}

/* Replaces dataset `where` with `data` of memory type `type` and the given shape. */
static void replace_dataset(const char *path, const char *where, hid_t type, int rank, const hsize_t *dims,
                            const void *data)
{
    hid_t f = open_rw(path);
    if (H5Lexists(f, where, H5P_DEFAULT) > 0)
        H5Ldelete(f, where, H5P_DEFAULT);
    if (data) {
        hid_t space = H5Screate_simple(rank, dims, NULL);
        hid_t d = H5Dcreate2(f, where, type, space, H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT);
        CU_ASSERT_TRUE(H5Dwrite(d, type, H5S_ALL, H5S_ALL, H5P_DEFAULT, data) >= 0);
        H5Dclose(d);
        H5Sclose(space);
    }
    H5Fclose(f);
}

/* Sets element [row, col] of an int32 dataset (col ignored for rank 1). */
static void poke_int(const char *path, const char *where, hsize_t row, hsize_t col, int32_t value)
{
    hid_t f = open_rw(path), d = H5Dopen2(f, where, H5P_DEFAULT), space = H5Dget_space(d);
    hsize_t start[2] = {row, col}, count[2] = {1, 1};
    int rank = H5Sget_simple_extent_ndims(space);
    H5Sselect_hyperslab(space, H5S_SELECT_SET, start, NULL, count, NULL);
    hid_t mem = H5Screate_simple(rank, count, NULL);
    CU_ASSERT_TRUE(H5Dwrite(d, H5T_NATIVE_INT32, mem, space, H5P_DEFAULT, &value) >= 0);
    H5Sclose(mem);
    H5Sclose(space);
    H5Dclose(d);
    H5Fclose(f);
}

static long file_size(const char *path)
{
    struct stat sb;
    return stat(path, &sb) == 0 ? (long)sb.st_size : -1;
}

static unsigned char *read_bytes(const char *path, long *size)
{
    *size = file_size(path);
    unsigned char *buf = malloc((size_t)*size);
    FILE *f = fopen(path, "rb");
    CU_ASSERT_TRUE_FATAL(buf && f && fread(buf, 1, (size_t)*size, f) == (size_t)*size);
    fclose(f);
    return buf;
}

static void write_bytes(const char *path, const unsigned char *buf, long size)
{
    FILE *f = fopen(path, "wb");
    CU_ASSERT_TRUE_FATAL(f != NULL);
    CU_ASSERT_EQUAL(fwrite(buf, 1, (size_t)size, f), (size_t)size);
    fclose(f);
}

/* ---- round trips ---- */

static void test_round_trip(void)
{
    const char *path = tmp_path("round");
    lb_task_options o;
    lb_task_options_default(LB_TASK_SPIKE, &o);
    o.seq_len = 20;
    o.sensors = 2;
    o.readings = 4;
    o.max_distance = 9;
    o.n_train = 6;
    o.n_val = 0;
    o.n_test = 1;
    o.seed = 77;
    CU_ASSERT_EQUAL_FATAL(lb_task_generate(&o, path, NULL, NULL), LB_OK);
    lb_dataset *ds = lb_dataset_open(path);
    CU_ASSERT_PTR_NOT_NULL_FATAL(ds);
    const lb_task_options *r = lb_dataset_options(ds);
    CU_ASSERT_EQUAL(lb_dataset_task(ds), LB_TASK_SPIKE);
    CU_ASSERT_STRING_EQUAL(lb_dataset_path(ds), path);
    CU_ASSERT_EQUAL(r->seq_len, 20);
    CU_ASSERT_EQUAL(r->sensors, 2);
    CU_ASSERT_EQUAL(r->readings, 4);
    CU_ASSERT_EQUAL(r->min_distance, 1);
    CU_ASSERT_EQUAL(r->max_distance, 9);
    CU_ASSERT_EQUAL(r->seed, 77);
    CU_ASSERT_EQUAL(lb_dataset_vocab_size(ds), 1 + 16 + 8 + 2);
    CU_ASSERT_EQUAL(lb_dataset_split_size(ds, "train"), 6);
    CU_ASSERT_EQUAL(lb_dataset_split_size(ds, "val"), 0);
    CU_ASSERT_FALSE(lb_dataset_has_lengths(ds));

    /* The file holds exactly what the reader returns: read /train/inputs directly. */
    int32_t raw[6 * 20];
    hid_t f = H5Fopen(path, H5F_ACC_RDONLY, H5P_DEFAULT), d = H5Dopen2(f, "/train/inputs", H5P_DEFAULT);
    CU_ASSERT_TRUE(H5Dread(d, H5T_NATIVE_INT32, H5S_ALL, H5S_ALL, H5P_DEFAULT, raw) >= 0);
    hid_t plist = H5Dget_create_plist(d);
    CU_ASSERT_EQUAL(H5Pget_layout(plist), H5D_CHUNKED);
    CU_ASSERT_EQUAL(H5Pget_nfilters(plist), 3); /* shuffle, deflate, fletcher32 */
    H5Pclose(plist);
    H5Dclose(d);
    H5Fclose(f);
    lb_batch b;
    CU_ASSERT_EQUAL_FATAL(lb_dataset_slice(ds, "train", 0, 6, &b), LB_OK);
    CU_ASSERT_EQUAL(memcmp(raw, b.tokens, sizeof raw), 0);
    CU_ASSERT_TRUE(b.tokens[19] >= 1 + 16 + 8 && b.tokens[19] < 1 + 16 + 8 + 2); /* the last token is an alarm */
    lb_batch_free(&b);
    CU_ASSERT_EQUAL(lb_dataset_slice(ds, "train", 5, 2, &b), LB_ERR_VALUE);
    CU_ASSERT_EQUAL(lb_dataset_slice(ds, "val", 0, 0, &b), LB_OK);
    CU_ASSERT_EQUAL(b.batch_size, 0);
    lb_batch_free(&b);
    lb_dataset_close(ds);
    remove(path);
}

/* A file written by another program (as h5py would): fixed-length string task,
 * int64 tokens, uint8 targets, no option attributes, contiguous storage. */
static void write_foreign(const char *path, int64_t format_version)
{
    hid_t f = H5Fcreate(path, H5F_ACC_TRUNC, H5P_DEFAULT, H5P_DEFAULT);
    hid_t str = H5Tcopy(H5T_C_S1);
    H5Tset_size(str, 5);
    H5Tset_strpad(str, H5T_STR_NULLPAD);
    hid_t space = H5Screate(H5S_SCALAR);
    hid_t a = H5Acreate2(f, "task", str, space, H5P_DEFAULT, H5P_DEFAULT);
    H5Awrite(a, str, "local");
    H5Aclose(a);
    H5Sclose(space);
    H5Tclose(str);
    H5Fclose(f);
    set_attr_int(path, "format_version", format_version);
    set_attr_int(path, "seed", 3);
    set_attr_int(path, "seq_len", 4);
    set_attr_int(path, "vocab_size", 9);
    set_attr_int(path, "num_classes", 8);
    f = open_rw(path);
    const char *splits[3] = {"train", "val", "test"};
    for (int s = 0; s < 3; s++)
        H5Gclose(H5Gcreate2(f, splits[s], H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT));
    H5Fclose(f);
    int64_t tokens[2 * 4] = {1, 2, 3, 4, 8, 7, 6, 5};
    uint8_t targets[2] = {1, 2};
    hsize_t dims2[2] = {2, 4}, dims1[1] = {2}, empty2[2] = {0, 4}, empty1[1] = {0};
    replace_dataset(path, "/train/inputs", H5T_NATIVE_INT64, 2, dims2, tokens);
    replace_dataset(path, "/train/targets", H5T_NATIVE_UINT8, 1, dims1, targets);
    for (int s = 1; s < 3; s++) {
        char where[32];
        snprintf(where, sizeof where, "/%s/inputs", splits[s]);
        replace_dataset(path, where, H5T_NATIVE_INT32, 2, empty2, tokens);
        snprintf(where, sizeof where, "/%s/targets", splits[s]);
        replace_dataset(path, where, H5T_NATIVE_INT32, 1, empty1, targets);
    }
}

static void test_reads_foreign_writer(void)
{
    const char *path = tmp_path("foreign");
    write_foreign(path, 1);
    lb_dataset *ds = lb_dataset_open(path);
    if (!ds)
        fprintf(stderr, "\n  %s\n", lb_last_error());
    CU_ASSERT_PTR_NOT_NULL_FATAL(ds);
    CU_ASSERT_EQUAL(lb_dataset_task(ds), LB_TASK_LOCAL);
    CU_ASSERT_EQUAL(lb_dataset_seq_len(ds), 4);
    CU_ASSERT_EQUAL(lb_dataset_options(ds)->seed, 3);
    CU_ASSERT_EQUAL(lb_dataset_options(ds)->window, 3); /* absent: the task default */
    lb_batch b;
    CU_ASSERT_EQUAL_FATAL(lb_dataset_slice(ds, "train", 0, 2, &b), LB_OK);
    CU_ASSERT_EQUAL(b.tokens[4], 8);
    CU_ASSERT_EQUAL(b.tokens[7], 5);
    CU_ASSERT_EQUAL(b.targets[1], 2);
    CU_ASSERT_PTR_NULL(b.distance);
    lb_batch_free(&b);
    char *text = NULL;
    size_t size = 0;
    FILE *out = open_memstream(&text, &size);
    CU_ASSERT_EQUAL(lb_dataset_print_info(ds, out), LB_OK);
    fclose(out);
    /* The options the file does not record are said to be missing, not shown with defaults. */
    CU_ASSERT_PTR_NOT_NULL(strstr(text, "window=not recorded"));
    CU_ASSERT_PTR_NULL(strstr(text, "window=3"));
    CU_ASSERT_PTR_NOT_NULL(strstr(text, "seq_len=4"));
    CU_ASSERT_PTR_NOT_NULL(strstr(text, "seed=3"));
    free(text);
    lb_dataset_close(ds);
    remove(path);
}

/* ---- bad input ---- */

static void test_missing_and_not_hdf5(void)
{
    const char *const missing[] = {"/no/such/dir/data.h5", "No such file", NULL};
    expect_open_error("/no/such/dir/data.h5", LB_ERR_IO, missing);
    const char *path = tmp_path("text");
    write_bytes(path, (const unsigned char *)"task,seq_len\nspike,1024\n", 24);
    const char *const not_hdf5[] = {path, "not an HDF5 file", NULL};
    expect_open_error(path, LB_ERR_FORMAT, not_hdf5);
    write_bytes(path, (const unsigned char *)"", 0);
    expect_open_error(path, LB_ERR_FORMAT, not_hdf5);
    const char *const dir[] = {"/tmp", "not a regular file", NULL};
    expect_open_error("/tmp", LB_ERR_IO, dir);
    remove(path);
}

static void test_truncated(void)
{
    const char *path = tmp_path("trunc"), *cut = tmp_path("trunc_cut");
    make_small(LB_TASK_SPIKE, path);
    long size = 0;
    unsigned char *bytes = read_bytes(path, &size);
    write_bytes(cut, bytes, size / 2);
    lb_dataset *ds = lb_dataset_open(cut);
    CU_ASSERT_PTR_NULL(ds);
    CU_ASSERT_EQUAL(lb_last_status(), LB_ERR_FORMAT);
    CU_ASSERT_PTR_NOT_NULL(strstr(lb_last_error(), cut));
    free(bytes);
    remove(path);
    remove(cut);
}

/* HDF5 prints nothing to stderr while the reader fails, and its printer is restored. */
static void test_hdf5_stack_silenced(void)
{
    const char *path = tmp_path("quiet"), *log = tmp_path("quiet_log");
    make_small(LB_TASK_SPIKE, path);
    long size = 0;
    unsigned char *bytes = read_bytes(path, &size);
    write_bytes(path, bytes, size * 2 / 3);
    H5E_auto2_t before = NULL, after = NULL;
    void *data = NULL;
    H5Eget_auto2(H5E_DEFAULT, &before, &data);
    fflush(stderr);
    int saved = dup(2), fd = open(log, O_WRONLY | O_CREAT | O_TRUNC, 0600);
    dup2(fd, 2);
    lb_dataset *ds = lb_dataset_open(path);
    fflush(stderr);
    dup2(saved, 2);
    close(fd);
    close(saved);
    CU_ASSERT_PTR_NULL(ds);
    CU_ASSERT_EQUAL(file_size(log), 0);
    H5Eget_auto2(H5E_DEFAULT, &after, &data);
    CU_ASSERT_PTR_EQUAL((void *)after, (void *)before);
    free(bytes);
    remove(path);
    remove(log);
}

static void test_wrong_dtype(void)
{
    const char *path = tmp_path("dtype");
    make_small(LB_TASK_SPIKE, path);
    double values[8] = {0};
    hsize_t dims[1] = {8};
    replace_dataset(path, "/train/targets", H5T_NATIVE_DOUBLE, 1, dims, values);
    const char *const needles[] = {path, "/train/targets", "expected int32 [N]", "found float64 [8]", NULL};
    expect_open_error(path, LB_ERR_FORMAT, needles);

    make_small(LB_TASK_ADDING, path);
    int32_t ints[2] = {0};
    hsize_t dims2[1] = {2};
    replace_dataset(path, "/test/targets", H5T_NATIVE_INT32, 1, dims2, ints);
    const char *const regression[] = {"/test/targets", "expected float32 [N]", "found int32 [2]", NULL};
    expect_open_error(path, LB_ERR_FORMAT, regression);

    make_small(LB_TASK_SPIKE, path);
    set_attr(path, "task", H5T_NATIVE_INT64, &(int64_t){1});
    const char *const task[] = {"attribute 'task'", "expected a string", "found int64", NULL};
    expect_open_error(path, LB_ERR_FORMAT, task);
    remove(path);
}

static void test_wrong_shape(void)
{
    const char *path = tmp_path("shape");
    make_small(LB_TASK_SPIKE, path);
    int32_t tokens[3 * 17] = {0};
    hsize_t dims[2] = {3, 17};
    replace_dataset(path, "/val/inputs", H5T_NATIVE_INT32, 2, dims, tokens);
    const char *const needles[] = {"/val/inputs", "expected int32 [N, 16]", "found int32 [3, 17]", NULL};
    expect_open_error(path, LB_ERR_FORMAT, needles);

    make_small(LB_TASK_SPIKE, path);
    int32_t distance[7] = {1, 1, 1, 1, 1, 1, 1};
    hsize_t dims1[1] = {7};
    replace_dataset(path, "/train/distance", H5T_NATIVE_INT32, 1, dims1, distance);
    const char *const count[] = {"/train/distance", "7 examples", "/train/inputs has 8", NULL};
    expect_open_error(path, LB_ERR_FORMAT, count);

    make_small(LB_TASK_SPIKE, path);
    replace_dataset(path, "/test/lengths", 0, 0, NULL, NULL);
    const char *const missing[] = {"missing dataset /test/lengths", NULL};
    expect_open_error(path, LB_ERR_FORMAT, missing);

    make_small(LB_TASK_SPIKE, path);
    replace_dataset(path, "/test", 0, 0, NULL, NULL);
    const char *const group[] = {"missing group /test", NULL};
    expect_open_error(path, LB_ERR_FORMAT, group);
    remove(path);
}

static void test_out_of_range_values(void)
{
    const char *path = tmp_path("range");
    struct {
        const char *where;
        hsize_t row, col;
        int32_t value;
        const char *needle;
    } cases[] = {
        {"/train/inputs", 2, 3, 1 + 16 + 8 + 1, "value 26 at [2, 3] is outside [0, 25]"},
        {"/val/inputs", 0, 0, -1, "/val/inputs"},
        {"/train/targets", 5, 0, 8, "value 8 at [5] is outside [0, 7] and is not -100"},
        {"/test/lengths", 1, 0, 0, "/test/lengths"},
        {"/test/lengths", 1, 0, 17, "outside [1, 16]"},
        {"/train/distance", 0, 0, 16, "/train/distance"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        make_small(LB_TASK_SPIKE, path);
        poke_int(path, cases[i].where, cases[i].row, cases[i].col, cases[i].value);
        const char *const needles[] = {path, cases[i].needle, NULL};
        expect_open_error(path, LB_ERR_FORMAT, needles);
    }
    /* parity has two classes: a target of 2 is refused. */
    make_small(LB_TASK_PARITY, path);
    poke_int(path, "/val/targets", 1, 0, 2);
    const char *const parity[] = {path, "/val/targets", "value 2 at [1] is outside [0, 1]", NULL};
    expect_open_error(path, LB_ERR_FORMAT, parity);
    /* -100 is a valid target; a non-finite feature is not. */
    make_small(LB_TASK_SPIKE, path);
    poke_int(path, "/train/targets", 0, 0, -100);
    lb_dataset *ds = lb_dataset_open(path);
    CU_ASSERT_PTR_NOT_NULL(ds);
    lb_dataset_close(ds);
    make_small(LB_TASK_ADDING, path);
    float features[2 * 16 * 2] = {0};
    features[5] = NAN;
    hsize_t dims[3] = {2, 16, 2};
    replace_dataset(path, "/test/inputs", H5T_NATIVE_FLOAT, 3, dims, features);
    const char *const nan[] = {"/test/inputs", "not finite", NULL};
    expect_open_error(path, LB_ERR_FORMAT, nan);
    remove(path);
}

/* lb_dataset_open_split reads one split's values: a bad value in another split does
 * not stop it (lb_dataset_open refuses the file), the other splits appear empty, and a
 * bad value in the split read is still refused; structure is checked for every split. */
static void test_open_one_split(void)
{
    const char *path = tmp_path("one_split");
    make_small(LB_TASK_SPIKE, path);
    poke_int(path, "/train/inputs", 2, 3, 1 + 16 + 8 + 1);
    const char *const needles[] = {path, "/train/inputs", NULL};
    expect_open_error(path, LB_ERR_FORMAT, needles);
    lb_dataset *ds = lb_dataset_open_split(path, "test");
    CU_ASSERT_PTR_NOT_NULL_FATAL(ds);
    CU_ASSERT_EQUAL(lb_dataset_split_size(ds, "test"), 2);
    CU_ASSERT_EQUAL(lb_dataset_split_size(ds, "train"), 0);
    CU_ASSERT_EQUAL(lb_dataset_split_size(ds, "val"), 0);
    CU_ASSERT_EQUAL(lb_dataset_seq_len(ds), 16);
    lb_batch b;
    CU_ASSERT_EQUAL(lb_dataset_slice(ds, "test", 0, 2, &b), LB_OK);
    CU_ASSERT_EQUAL(b.batch_size, 2);
    lb_batch_free(&b);
    lb_dataset_close(ds);
    ds = lb_dataset_open_split(path, "train");
    CU_ASSERT_PTR_NULL(ds);
    CU_ASSERT_TRUE(lb_test_error_has("/train/inputs"));
    CU_ASSERT_PTR_NULL(lb_dataset_open_split(path, "dev"));
    CU_ASSERT_EQUAL(lb_last_status(), LB_ERR_VALUE);
    CU_ASSERT_PTR_NULL(lb_dataset_open_split(NULL, "test"));
    CU_ASSERT_PTR_NULL(lb_dataset_open_split(path, NULL));
    /* A missing dataset in another split is still found. */
    make_small(LB_TASK_SPIKE, path);
    hid_t f = open_rw(path);
    CU_ASSERT_TRUE(H5Ldelete(f, "/val/targets", H5P_DEFAULT) >= 0);
    H5Fclose(f);
    CU_ASSERT_PTR_NULL(lb_dataset_open_split(path, "test"));
    CU_ASSERT_TRUE(lb_test_error_has("/val/targets"));
    remove(path);
}

static void test_bad_attributes(void)
{
    const char *path = tmp_path("attrs");
    make_small(LB_TASK_SPIKE, path);
    set_attr_int(path, "format_version", 2);
    const char *const version[] = {path, "format_version 2 is not supported", NULL};
    expect_open_error(path, LB_ERR_FORMAT, version);

    make_small(LB_TASK_SPIKE, path);
    set_attr(path, "vocab_size", -1, NULL);
    const char *const missing[] = {"missing root attribute 'vocab_size'", NULL};
    expect_open_error(path, LB_ERR_FORMAT, missing);

    make_small(LB_TASK_SPIKE, path);
    set_attr_int(path, "seq_len", 0);
    const char *const seq[] = {"'seq_len' = 0 is outside", NULL};
    expect_open_error(path, LB_ERR_FORMAT, seq);

    /* a generated task's seq_len: the option's range [2, 2^20] (data/tasks.h), at either end */
    static const int64_t bad_seq_len[] = {1, (1 << 20) + 1, (1 << 24) + 1};
    for (size_t k = 0; k < sizeof bad_seq_len / sizeof bad_seq_len[0]; k++) {
        make_small(LB_TASK_SPIKE, path);
        set_attr_int(path, "seq_len", bad_seq_len[k]);
        char said[96];
        snprintf(said, sizeof said, "'seq_len' = %lld is outside [2, 1048576]", (long long)bad_seq_len[k]);
        const char *const range[] = {said, NULL};
        expect_open_error(path, LB_ERR_FORMAT, range);
    }
    CU_ASSERT_EQUAL(LB_DATA_MAX_SEQ_LEN, 1 << 20);

    make_small(LB_TASK_SPIKE, path);
    set_attr_int(path, "vocab_size", 40);
    const char *const vocab[] = {"vocab_size 40", "do not match", NULL};
    expect_open_error(path, LB_ERR_FORMAT, vocab);

    make_small(LB_TASK_SPIKE, path);
    set_attr_int(path, "readings", 1);
    const char *const readings[] = {"readings", "outside", NULL};
    expect_open_error(path, LB_ERR_FORMAT, readings);

    write_foreign(path, 1);
    set_attr(path, "task", -1, NULL);
    hid_t str = H5Tcopy(H5T_C_S1);
    H5Tset_size(str, 6);
    set_attr(path, "task", str, "spikes");
    H5Tclose(str);
    const char *const task[] = {"'spikes' is not a known task", NULL};
    expect_open_error(path, LB_ERR_FORMAT, task);
    remove(path);
}

/* ---- corrupted files ---- */

/* Opens the corrupted bytes: either an error with a message, or a dataset whose sizes
 * are sane. Returns 1 for an error, 0 for a valid dataset. */
static int open_corrupted(const char *path, const unsigned char *bytes, long size)
{
    write_bytes(path, bytes, size);
    lb_clear_error();
    lb_dataset *ds = lb_dataset_open(path);
    CU_ASSERT_EQUAL(H5Fget_obj_count(H5F_OBJ_ALL, H5F_OBJ_ALL), 0); /* no identifier leaked */
    if (!ds) {
        CU_ASSERT_NOT_EQUAL(lb_last_status(), LB_OK);
        CU_ASSERT_TRUE(strlen(lb_last_error()) > 10);
        if (strlen(lb_last_error()) <= 10 || H5Fget_obj_count(H5F_OBJ_ALL, H5F_OBJ_ALL))
            fprintf(stderr, "\n  [%ld bytes] status %d '%s', %ld open ids\n", size, (int)lb_last_status(), lb_last_error(),
                    (long)H5Fget_obj_count(H5F_OBJ_ALL, H5F_OBJ_ALL));
        return 1;
    }
    CU_ASSERT_EQUAL(lb_dataset_seq_len(ds), 16);
    CU_ASSERT_TRUE(lb_dataset_split_size(ds, "train") >= 0);
    lb_batch b;
    int64_t n = lb_dataset_split_size(ds, "train");
    CU_ASSERT_EQUAL(lb_dataset_slice(ds, "train", 0, n, &b), LB_OK);
    lb_batch_free(&b);
    lb_dataset_close(ds);
    return 0;
}

static void test_corrupted_corpus(void)
{
    const char *path = tmp_path("corpus_src"), *bad = tmp_path("corpus_bad");
    make_small(LB_TASK_SPIKE, path);
    long size = 0;
    unsigned char *bytes = read_bytes(path, &size), *copy = malloc((size_t)size);
    int errors = 0, cases = 0;
    for (long cut = 0; cut < size; cut += size / 40 + 1, cases++) /* truncations */
        errors += open_corrupted(bad, bytes, cut);
    uint32_t lcg = 12345;
    for (int i = 0; i < 400; i++, cases++) { /* single bit flips, deterministic positions */
        lcg = lcg * 1664525u + 1013904223u;
        long offset = (long)(lcg >> 8) % size;
        memcpy(copy, bytes, (size_t)size);
        copy[offset] ^= (unsigned char)(1u << (lcg & 7));
        errors += open_corrupted(bad, copy, size);
    }
    for (int i = 0; i < 60; i++, cases++) { /* a run of garbage bytes */
        lcg = lcg * 1664525u + 1013904223u;
        long offset = (long)(lcg >> 8) % size;
        memcpy(copy, bytes, (size_t)size);
        for (long k = offset; k < offset + 16 && k < size; k++)
            copy[k] = (unsigned char)(lcg >> (k % 24));
        errors += open_corrupted(bad, copy, size);
    }
    fprintf(stderr, "[%d of %d corrupted files rejected] ", errors, cases);
    CU_ASSERT_TRUE(errors >= 41); /* at least every truncation */
    free(bytes);
    free(copy);
    remove(path);
    remove(bad);
}

static void test_print_info(void)
{
    const char *path = tmp_path("info");
    make_small(LB_TASK_SPIKE, path);
    lb_dataset *ds = lb_dataset_open(path);
    CU_ASSERT_PTR_NOT_NULL_FATAL(ds);
    char *text = NULL;
    size_t size = 0;
    FILE *out = open_memstream(&text, &size);
    CU_ASSERT_EQUAL(lb_dataset_print_info(ds, out), LB_OK);
    fclose(out);
    const char *must[] = {"task      spike (format_version 1)", "seq_len=16", "variable_length=1", "min_length=8",
                          "vocab_size 26, num_classes 8 (chance accuracy 0.1250)", "int32 [N, 16]",
                          "train           8", "distance", "length", "label histogram (train)", NULL};
    for (int i = 0; must[i]; i++)
        if (!strstr(text, must[i])) {
            fprintf(stderr, "\n  info lacks '%s':\n%s\n", must[i], text);
            CU_FAIL("info incomplete");
        }
    int64_t counts[8], total = 0;
    CU_ASSERT_EQUAL(lb_dataset_label_histogram(ds, "train", counts, NULL), LB_OK);
    for (int c = 0; c < 8; c++)
        total += counts[c];
    CU_ASSERT_EQUAL(total, 8);
    free(text);
    lb_dataset_close(ds);

    make_small(LB_TASK_ADDING, path);
    ds = lb_dataset_open(path);
    CU_ASSERT_PTR_NOT_NULL_FATAL(ds);
    out = open_memstream(&text, &size);
    CU_ASSERT_EQUAL(lb_dataset_print_info(ds, out), LB_OK);
    fclose(out);
    CU_ASSERT_PTR_NOT_NULL(strstr(text, "MSE of predicting the mean"));
    CU_ASSERT_PTR_NOT_NULL(strstr(text, "float32 [N, 16, 2]"));
    CU_ASSERT_EQUAL(lb_dataset_label_histogram(ds, "train", counts, NULL), LB_ERR_STATE);
    free(text);
    lb_dataset_close(ds);
    remove(path);
}

/* ---- the modsum task's file ---- */

static int64_t attr_int(hid_t f, const char *name)
{
    int64_t v = -1;
    hid_t a = H5Aopen(f, name, H5P_DEFAULT);
    CU_ASSERT_TRUE(a >= 0 && H5Aread(a, H5T_NATIVE_INT64, &v) >= 0);
    H5Aclose(a);
    return v;
}

/* Rank and dimensions of dataset `where`, which must be int32. */
static int int32_shape(hid_t f, const char *where, hsize_t *dims)
{
    hid_t d = H5Dopen2(f, where, H5P_DEFAULT), type = H5Dget_type(d), space = H5Dget_space(d);
    CU_ASSERT_TRUE(H5Tget_class(type) == H5T_INTEGER && H5Tget_size(type) == 4 && H5Tget_sign(type) == H5T_SGN_2);
    int rank = H5Sget_simple_extent_dims(space, dims, NULL);
    H5Sclose(space);
    H5Tclose(type);
    H5Dclose(d);
    return rank;
}

/* modsum is stored in the common format: inputs int32 [N, T], targets int32 [N],
 * lengths when variable, no distance; task, vocab_size = K + 2, num_classes = K and
 * modulus as root attributes. The reader checks its values and attributes. */
static void test_modsum_file(void)
{
    const char *path = tmp_path("modsum");
    make_small(LB_TASK_MODSUM, path);
    hid_t f = H5Fopen(path, H5F_ACC_RDONLY, H5P_DEFAULT);
    CU_ASSERT_TRUE_FATAL(f >= 0);
    char task[16] = "";
    hid_t a = H5Aopen(f, "task", H5P_DEFAULT), type = H5Aget_type(a);
    CU_ASSERT_TRUE(H5Tget_size(type) < sizeof task && H5Aread(a, type, task) >= 0);
    H5Tclose(type);
    H5Aclose(a);
    CU_ASSERT_STRING_EQUAL(task, "modsum");
    CU_ASSERT_EQUAL(attr_int(f, "vocab_size"), 7);
    CU_ASSERT_EQUAL(attr_int(f, "num_classes"), 5);
    CU_ASSERT_EQUAL(attr_int(f, "modulus"), 5);
    CU_ASSERT_EQUAL(attr_int(f, "seq_len"), 16);
    CU_ASSERT_EQUAL(H5Aexists(f, "alphabet"), 0); /* only the options that apply are stored */
    const char *splits[3] = {"/train", "/val", "/test"};
    const hsize_t sizes[3] = {8, 3, 2};
    for (int s = 0; s < 3; s++) {
        char where[32];
        hsize_t dims[3] = {0, 0, 0};
        snprintf(where, sizeof where, "%s/inputs", splits[s]);
        CU_ASSERT_EQUAL(int32_shape(f, where, dims), 2);
        CU_ASSERT_TRUE(dims[0] == sizes[s] && dims[1] == 16);
        snprintf(where, sizeof where, "%s/targets", splits[s]);
        CU_ASSERT_EQUAL(int32_shape(f, where, dims), 1);
        CU_ASSERT_EQUAL(dims[0], sizes[s]);
        snprintf(where, sizeof where, "%s/lengths", splits[s]);
        CU_ASSERT_EQUAL(int32_shape(f, where, dims), 1);
        CU_ASSERT_EQUAL(dims[0], sizes[s]);
        snprintf(where, sizeof where, "%s/distance", splits[s]);
        CU_ASSERT_EQUAL(H5Lexists(f, where, H5P_DEFAULT), 0);
    }
    H5Fclose(f);

    lb_dataset *ds = lb_dataset_open(path);
    CU_ASSERT_PTR_NOT_NULL_FATAL(ds);
    CU_ASSERT_EQUAL(lb_dataset_options(ds)->modulus, 5);
    char *text = NULL;
    size_t size = 0;
    FILE *out = open_memstream(&text, &size);
    CU_ASSERT_EQUAL(lb_dataset_print_info(ds, out), LB_OK);
    fclose(out);
    const char *must[] = {"task      modsum (format_version 1)", "modulus=5",
                          "vocab_size 7, num_classes 5 (chance accuracy 0.2000)", "label histogram (train)", NULL};
    for (int i = 0; must[i]; i++)
        if (!strstr(text, must[i])) {
            fprintf(stderr, "\n  info lacks '%s':\n%s\n", must[i], text);
            CU_FAIL("info incomplete");
        }
    CU_ASSERT_PTR_NULL(strstr(text, "distance"));
    free(text);
    lb_dataset_close(ds);

    struct {
        const char *where;
        hsize_t row, col;
        int32_t value;
        const char *needle;
    } values[] = {
        {"/val/targets", 1, 0, 5, "value 5 at [1] is outside [0, 4] and is not -100"},
        {"/train/targets", 0, 0, -1, "/train/targets"},
        {"/test/inputs", 1, 2, 7, "value 7 at [1, 2] is outside [0, 6]"},
    };
    for (size_t i = 0; i < sizeof values / sizeof values[0]; i++) {
        make_small(LB_TASK_MODSUM, path);
        poke_int(path, values[i].where, values[i].row, values[i].col, values[i].value);
        const char *const needles[] = {path, values[i].where, values[i].needle, NULL};
        expect_open_error(path, LB_ERR_FORMAT, needles);
    }
    make_small(LB_TASK_MODSUM, path);
    set_attr_int(path, "modulus", 1);
    const char *const low[] = {path, "attribute 'modulus' = 1 is outside [2, 65536]", NULL};
    expect_open_error(path, LB_ERR_FORMAT, low);
    make_small(LB_TASK_MODSUM, path);
    set_attr_int(path, "modulus", 6);
    const char *const mismatch[] = {path, "vocab_size 7 / num_classes 5 do not match the task options (expected 8 / 6)",
                                    NULL};
    expect_open_error(path, LB_ERR_FORMAT, mismatch);
    remove(path);
}

/* ---- values wider than int32, positions in the dataset's rank ---- */

/* Opening fails with a message that ends with `tail` (after the file and dataset). */
static void expect_open_tail(const char *path, const char *where, const char *tail)
{
    char expected[512];
    snprintf(expected, sizeof expected, "%s: dataset %s: %s", path, where, tail);
    lb_clear_error();
    lb_dataset *ds = lb_dataset_open(path);
    CU_ASSERT_PTR_NULL(ds);
    lb_dataset_close(ds);
    CU_ASSERT_EQUAL(lb_last_status(), LB_ERR_FORMAT);
    if (strcmp(lb_last_error(), expected) != 0) {
        fprintf(stderr, "\n  got      '%s'\n  expected '%s'\n", lb_last_error(), expected);
        CU_FAIL("unexpected message");
    }
}

/* The whole int32 dataset `where` of a file (n elements). */
static void read_ints(const char *path, const char *where, int32_t *out)
{
    hid_t f = H5Fopen(path, H5F_ACC_RDONLY, H5P_DEFAULT), d = H5Dopen2(f, where, H5P_DEFAULT);
    CU_ASSERT_TRUE(H5Dread(d, H5T_NATIVE_INT32, H5S_ALL, H5S_ALL, H5P_DEFAULT, out) >= 0);
    H5Dclose(d);
    H5Fclose(f);
}

static void test_wide_values_reported_as_stored(void)
{
    const char *path = tmp_path("wide");
    /* int64 tokens: valid ones read back exactly; 2^33 + 1 is reported as such, not
     * as the 2147483647 a conversion to int32 would clamp it to. */
    make_small(LB_TASK_SPIKE, path);
    int32_t tokens32[8 * 16];
    int64_t tokens[8 * 16];
    read_ints(path, "/train/inputs", tokens32);
    for (int i = 0; i < 8 * 16; i++)
        tokens[i] = tokens32[i];
    hsize_t dims[2] = {8, 16};
    replace_dataset(path, "/train/inputs", H5T_NATIVE_INT64, 2, dims, tokens);
    lb_dataset *ds = lb_dataset_open(path);
    if (!ds)
        fprintf(stderr, "\n  %s\n", lb_last_error());
    CU_ASSERT_PTR_NOT_NULL_FATAL(ds);
    lb_batch b;
    CU_ASSERT_EQUAL_FATAL(lb_dataset_slice(ds, "train", 0, 8, &b), LB_OK);
    CU_ASSERT_EQUAL(memcmp(b.tokens, tokens32, sizeof tokens32), 0);
    lb_batch_free(&b);
    lb_dataset_close(ds);
    tokens[2 * 16 + 3] = ((int64_t)1 << 33) + 1;
    replace_dataset(path, "/train/inputs", H5T_NATIVE_INT64, 2, dims, tokens);
    expect_open_tail(path, "/train/inputs", "value 8589934593 at [2, 3] is outside [0, 25]");
    tokens[2 * 16 + 3] = INT64_MIN;
    replace_dataset(path, "/train/inputs", H5T_NATIVE_INT64, 2, dims, tokens);
    expect_open_tail(path, "/train/inputs", "value -9223372036854775808 at [2, 3] is outside [0, 25]");

    /* uint64 and uint32 one-dimensional datasets: real values, index [i] */
    make_small(LB_TASK_SPIKE, path);
    uint64_t targets[8] = {0, 1, 2, 3, 4, 5, 6, 7};
    targets[1] = ((uint64_t)1 << 63) + 5;
    hsize_t n8[1] = {8};
    replace_dataset(path, "/train/targets", H5T_NATIVE_UINT64, 1, n8, targets);
    expect_open_tail(path, "/train/targets", "value 9223372036854775813 at [1] is outside [0, 7] and is not -100");
    make_small(LB_TASK_SPIKE, path);
    uint32_t distance[8] = {1, 1, 1, 1, 3000000000u, 1, 1, 1};
    replace_dataset(path, "/train/distance", H5T_NATIVE_UINT32, 1, n8, distance);
    expect_open_tail(path, "/train/distance", "value 3000000000 at [4] is outside [0, 15]");

    /* int32 one-dimensional datasets: [i], not [i, 0] */
    make_small(LB_TASK_SPIKE, path);
    poke_int(path, "/test/lengths", 1, 0, 0);
    expect_open_tail(path, "/test/lengths", "value 0 at [1] is outside [1, 16]");
    make_small(LB_TASK_SPIKE, path);
    poke_int(path, "/val/distance", 2, 0, -3);
    expect_open_tail(path, "/val/distance", "value -3 at [2] is outside [0, 15]");
    /* per-position targets keep [i, t] */
    make_small(LB_TASK_RECALL, path);
    poke_int(path, "/train/targets", 3, 9, 64);
    expect_open_tail(path, "/train/targets", "value 64 at [3, 9] is outside [0, 63] and is not -100");

    /* features: [i, t, k]; a float64 value too large for float32 is shown as stored */
    make_small(LB_TASK_ADDING, path);
    float features[2 * 16 * 2] = {0};
    features[5] = NAN; /* [0, 2, 1] */
    hsize_t fdims[3] = {2, 16, 2};
    replace_dataset(path, "/test/inputs", H5T_NATIVE_FLOAT, 3, fdims, features);
    expect_open_tail(path, "/test/inputs", "value nan at [0, 2, 1] is not finite");
    make_small(LB_TASK_ADDING, path);
    double wide[2 * 16 * 2] = {0};
    wide[1 * 32 + 7 * 2 + 0] = 1e300;
    replace_dataset(path, "/test/inputs", H5T_NATIVE_DOUBLE, 3, fdims, wide);
    expect_open_tail(path, "/test/inputs", "value 1e+300 at [1, 7, 0] does not fit float32 (|x| <= 3.40282e+38)");
    wide[1 * 32 + 7 * 2 + 0] = 0.25; /* valid float64 values are read */
    replace_dataset(path, "/test/inputs", H5T_NATIVE_DOUBLE, 3, fdims, wide);
    ds = lb_dataset_open(path);
    CU_ASSERT_PTR_NOT_NULL_FATAL(ds);
    CU_ASSERT_EQUAL_FATAL(lb_dataset_slice(ds, "test", 0, 2, &b), LB_OK);
    CU_ASSERT_DOUBLE_EQUAL(((const float *)lb_tensor_data(b.features))[1 * 32 + 7 * 2], 0.25, 0);
    lb_batch_free(&b);
    lb_dataset_close(ds);
    remove(path);
}

/* ---- messages start with the file ---- */

static void expect_prefix(const char *prefix)
{
    if (strncmp(lb_last_error(), prefix, strlen(prefix)) != 0) {
        fprintf(stderr, "\n  message '%s' does not start with '%s'\n", lb_last_error(), prefix);
        CU_FAIL("message does not start with the file");
    }
    const char *functions[] = {"lb_dataset", "lb_loader", "lb_task", "lb_split", "lb_batch", NULL};
    for (int i = 0; functions[i]; i++)
        CU_ASSERT_PTR_NULL(strstr(lb_last_error(), functions[i]));
}

static void test_messages_start_with_the_file(void)
{
    char prefix[300];
    const char *missing = "/no/such/dir/data.h5";
    CU_ASSERT_PTR_NULL(lb_dataset_open(missing));
    expect_prefix("/no/such/dir/data.h5: cannot open: ");
    CU_ASSERT_PTR_NULL(lb_dataset_open("/tmp"));
    expect_prefix("/tmp: not a regular file");
    const char *path = tmp_path("prefix");
    write_bytes(path, (const unsigned char *)"hello", 5);
    CU_ASSERT_PTR_NULL(lb_dataset_open(path));
    snprintf(prefix, sizeof prefix, "%s: not an HDF5 file", path);
    expect_prefix(prefix);

    /* attributes: named as stored (underscores), with the file first */
    make_small(LB_TASK_SPIKE, path);
    set_attr_int(path, "max_distance", 99);
    CU_ASSERT_PTR_NULL(lb_dataset_open(path));
    CU_ASSERT_EQUAL(lb_last_status(), LB_ERR_FORMAT);
    snprintf(prefix, sizeof prefix,
             "%s: the option attributes are inconsistent: max_distance 99 exceeds min_length - 1 = 7", path);
    CU_ASSERT_STRING_EQUAL(lb_last_error(), prefix);
    make_small(LB_TASK_SPIKE, path);
    set_attr_int(path, "readings", 1);
    CU_ASSERT_PTR_NULL(lb_dataset_open(path));
    snprintf(prefix, sizeof prefix, "%s: attribute 'readings' = 1 is outside [2, 4096]", path);
    CU_ASSERT_STRING_EQUAL(lb_last_error(), prefix);
    make_small(LB_TASK_RECALL, path);
    set_attr(path, "power_a", H5T_NATIVE_DOUBLE, &(double){1e-7});
    CU_ASSERT_PTR_NULL(lb_dataset_open(path));
    snprintf(prefix, sizeof prefix, "%s: attribute 'power_a' = 1e-07 is outside [1e-06, 16]", path);
    CU_ASSERT_STRING_EQUAL(lb_last_error(), prefix);

    /* accessors, slices and loaders */
    make_small(LB_TASK_ADDING, path);
    lb_dataset *ds = lb_dataset_open(path);
    CU_ASSERT_PTR_NOT_NULL_FATAL(ds);
    snprintf(prefix, sizeof prefix, "%s: unknown split 'dev' (expected train, val or test)", path);
    CU_ASSERT_EQUAL(lb_dataset_split_size(ds, "dev"), -1);
    CU_ASSERT_STRING_EQUAL(lb_last_error(), prefix);
    lb_batch b;
    CU_ASSERT_EQUAL(lb_dataset_slice(ds, "dev", 0, 1, &b), LB_ERR_VALUE);
    CU_ASSERT_STRING_EQUAL(lb_last_error(), prefix);
    CU_ASSERT_PTR_NULL(lb_loader_new(ds, "dev", 4, 1, 0, 1));
    CU_ASSERT_STRING_EQUAL(lb_last_error(), prefix);
    CU_ASSERT_EQUAL(lb_dataset_slice(ds, "val", 2, 2, &b), LB_ERR_VALUE);
    snprintf(prefix, sizeof prefix, "%s: 2 examples from 2 are outside split val of 3 examples", path);
    CU_ASSERT_STRING_EQUAL(lb_last_error(), prefix);
    int64_t counts[1];
    CU_ASSERT_EQUAL(lb_dataset_label_histogram(ds, "train", counts, NULL), LB_ERR_STATE);
    snprintf(prefix, sizeof prefix, "%s: ", path);
    expect_prefix(prefix);
    CU_ASSERT_PTR_NULL(lb_loader_new(ds, "train", 0, 1, 0, 1));
    expect_prefix(prefix);
    lb_loader *ld = lb_loader_new(ds, "train", 4, 1, 0, 1);
    CU_ASSERT_PTR_NOT_NULL_FATAL(ld);
    lb_loader_state state;
    CU_ASSERT_EQUAL(lb_loader_get_state(ld, &state), LB_OK);
    state.position = 9;
    CU_ASSERT_EQUAL(lb_loader_set_state(ld, &state), LB_ERR_VALUE);
    snprintf(prefix, sizeof prefix,
             "%s: the saved loader state (epoch 0, position 9) does not fit split train of 8 examples (was it "
             "saved for another data file or split?)",
             path);
    CU_ASSERT_STRING_EQUAL(lb_last_error(), prefix);
    lb_loader_free(ld);
    lb_dataset_close(ds);
    remove(path);
}

/* ---- empty splits ---- */

/* Every task with an empty train split: sizes 0, an empty slice, a loader that
 * ends its epoch at once, histograms of zeros, info still prints. */
static void test_empty_splits(void)
{
    const char *path = tmp_path("empty");
    for (int k = 0; k < LB_TASK_COUNT; k++) {
        lb_task_options o;
        lb_task_options_default((lb_task_kind)k, &o);
        o.seq_len = k == LB_TASK_COPY ? 24 : k == LB_TASK_RECALL ? 32 : 16;
        o.n_train = 0;
        o.n_val = 0;
        o.n_test = 3;
        CU_ASSERT_EQUAL_FATAL(lb_task_generate(&o, path, NULL, NULL), LB_OK);
        lb_dataset *ds = lb_dataset_open(path);
        CU_ASSERT_PTR_NOT_NULL_FATAL(ds);
        CU_ASSERT_EQUAL(lb_dataset_split_size(ds, "train"), 0);
        CU_ASSERT_EQUAL(lb_dataset_split_size(ds, "val"), 0);
        CU_ASSERT_EQUAL(lb_dataset_split_size(ds, "test"), 3);
        lb_batch b;
        CU_ASSERT_EQUAL_FATAL(lb_dataset_slice(ds, "train", 0, 0, &b), LB_OK);
        CU_ASSERT_EQUAL(b.batch_size, 0);
        if (k == LB_TASK_ADDING) {
            CU_ASSERT_PTR_NOT_NULL_FATAL(b.features);
            CU_ASSERT_EQUAL(b.features->shape[0], 0);
            CU_ASSERT_EQUAL(b.features->shape[1], o.seq_len);
        }
        lb_batch_free(&b);
        CU_ASSERT_EQUAL_FATAL(lb_dataset_slice(ds, "test", 3, 0, &b), LB_OK); /* at the end of a split */
        CU_ASSERT_EQUAL(b.batch_size, 0);
        lb_batch_free(&b);
        CU_ASSERT_EQUAL(lb_dataset_slice(ds, "train", 0, 1, &b), LB_ERR_VALUE);

        lb_loader *ld = lb_loader_new(ds, "train", 4, 1, 0, 9);
        CU_ASSERT_PTR_NOT_NULL_FATAL(ld);
        CU_ASSERT_EQUAL(lb_loader_size(ld), 0);
        CU_ASSERT_EQUAL(lb_loader_batches_per_epoch(ld), 0);
        CU_ASSERT_EQUAL(lb_loader_next(ld, &b), 0);
        CU_ASSERT_EQUAL(lb_loader_next(ld, &b), 0);
        lb_loader_state state;
        CU_ASSERT_EQUAL(lb_loader_get_state(ld, &state), LB_OK);
        CU_ASSERT_EQUAL(state.epoch, 2);
        CU_ASSERT_EQUAL(state.position, 0);
        CU_ASSERT_EQUAL(lb_loader_set_state(ld, &state), LB_OK);
        lb_loader_free(ld);

        if (!lb_dataset_is_regression(ds)) {
            int64_t counts[64], ignored = -1;
            CU_ASSERT_EQUAL(lb_dataset_label_histogram(ds, "train", counts, &ignored), LB_OK);
            for (int64_t c = 0; c < lb_dataset_num_classes(ds); c++)
                CU_ASSERT_EQUAL(counts[c], 0);
            CU_ASSERT_EQUAL(ignored, 0);
        }
        int32_t lo = -1, hi = -1;
        if (lb_dataset_has_distance(ds)) {
            CU_ASSERT_EQUAL(lb_dataset_distance_range(ds, "train", &lo, &hi), LB_ERR_STATE);
            CU_ASSERT_PTR_NOT_NULL(strstr(lb_last_error(), "split train has no distances (it is empty)"));
            CU_ASSERT_EQUAL(lb_dataset_distance_range(ds, "test", &lo, &hi), LB_OK);
        }
        char *text = NULL;
        size_t size = 0;
        FILE *out = open_memstream(&text, &size);
        CU_ASSERT_EQUAL(lb_dataset_print_info(ds, out), LB_OK);
        fclose(out);
        CU_ASSERT_PTR_NOT_NULL(strstr(text, "  train           0"));
        CU_ASSERT_PTR_NULL(strstr(text, "nan"));
        free(text);
        lb_dataset_close(ds);
    }
    remove(path);
}

int main(void)
{
    const lb_test_case cases[] = {
        {"a generated file reads back exactly", test_round_trip},
        {"a file from another writer (int64, fixed strings) is read", test_reads_foreign_writer},
        {"missing file, directory and non-HDF5 file are rejected", test_missing_and_not_hdf5},
        {"a truncated file is rejected", test_truncated},
        {"HDF5's error stack is not printed and its printer is restored", test_hdf5_stack_silenced},
        {"wrong dtype is rejected naming expected and found", test_wrong_dtype},
        {"wrong shape, count or missing datasets are rejected", test_wrong_shape},
        {"out-of-range values are rejected with their position", test_out_of_range_values},
        {"one split read: other splits checked for structure only", test_open_one_split},
        {"bad or unknown attributes and format_version are rejected", test_bad_attributes},
        {"corrupted files give an error or a valid dataset, never a crash", test_corrupted_corpus},
        {"data info prints task, options, shapes and histogram", test_print_info},
        {"modsum files: schema, attributes and validation", test_modsum_file},
        {"values wider than int32/float32 are reported as stored, at their index", test_wide_values_reported_as_stored},
        {"messages start with the file, attributes named as stored", test_messages_start_with_the_file},
        {"empty splits: size 0, empty slices and loaders, info", test_empty_splits},
        {NULL, NULL},
    };
    return lb_test_main("data reader", cases);
}

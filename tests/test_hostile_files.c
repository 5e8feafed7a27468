/* Hostile HDF5 files, made here with the HDF5 C API: files that would make lookback
 * read other files (external raw storage, external and soft links, virtual datasets)
 * are refused in data files and checkpoints; reports and allocations are bounded by
 * the data a file actually holds (a num_classes of 2^31 - 1, a dataset created but
 * never written, a decompression bomb). */
#include "data/dataset.h"
#include "data/tasks.h"
#include "layers/model.h"
#include "support.h"
#include "train/trainer.h"

#include <hdf5.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

/* libhdf5 1.10 keeps a few allocations after failed opens (see test_data_reader.c). */
const char *__lsan_default_suppressions(void);
const char *__lsan_default_suppressions(void) { return "leak:libhdf5\n"; }

static const char *tmp_path(const char *name)
{
    static char buf[8][256];
    static int slot;
    const char *dir = getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp";
    slot = (slot + 1) % 8;
    snprintf(buf[slot], sizeof buf[slot], "%s/lb_test_hostile_%d_%s", dir, (int)getpid(), name);
    return buf[slot];
}

/* A valid spike file: T = 16, 8 / 4 / 4 examples. */
static void make_spike(const char *path)
{
    lb_task_options o;
    lb_task_options_default(LB_TASK_SPIKE, &o);
    o.seq_len = 16;
    o.n_train = 8;
    o.n_val = 4;
    o.n_test = 4;
    CU_ASSERT_EQUAL_FATAL(lb_task_generate(&o, path, NULL, NULL), LB_OK);
}

static void copy_file(const char *from, const char *to)
{
    FILE *in = fopen(from, "rb"), *out = fopen(to, "wb");
    CU_ASSERT_TRUE_FATAL(in && out);
    char buf[1 << 14];
    size_t n;
    while ((n = fread(buf, 1, sizeof buf, in)) > 0)
        CU_ASSERT_EQUAL(fwrite(buf, 1, n, out), n);
    fclose(in);
    fclose(out);
}

static hid_t open_rw(const char *path)
{
    hid_t f = H5Fopen(path, H5F_ACC_RDWR, H5P_DEFAULT);
    CU_ASSERT_TRUE_FATAL(f >= 0);
    return f;
}

/* Opening must fail with LB_ERR_FORMAT and a message holding every needle and none of
 * the secret's bytes. */
static void expect_refused(lb_dataset *ds, const char *const *needles)
{
    CU_ASSERT_PTR_NULL(ds);
    lb_dataset_close(ds);
    CU_ASSERT_EQUAL(lb_last_status(), LB_ERR_FORMAT);
    for (int i = 0; needles[i]; i++)
        if (!strstr(lb_last_error(), needles[i])) {
            fprintf(stderr, "\n  message '%s' lacks '%s'\n", lb_last_error(), needles[i]);
            CU_FAIL("message incomplete");
        }
    CU_ASSERT_PTR_NULL(strstr(lb_last_error(), "SECRET"));
}

static const char secret_text[] = "SECRET-BYTES-OF-ANOTHER-FILE-";

/* A file of 4 KB of secret text (what a hostile file would point at). */
static const char *secret_file(void)
{
    const char *path = tmp_path("secret.txt");
    FILE *f = fopen(path, "wb");
    CU_ASSERT_PTR_NOT_NULL_FATAL(f);
    for (int i = 0; i < 4096 / (int)(sizeof secret_text - 1) + 1; i++)
        fputs(secret_text, f);
    fclose(f);
    return path;
}

/* /train/inputs of `path` replaced by an int32 [8, 16] dataset whose 512 bytes are kept
 * in `external` (HDF5 external raw storage). */
static void external_storage_inputs(const char *path, const char *external)
{
    hid_t f = open_rw(path);
    CU_ASSERT_TRUE(H5Ldelete(f, "/train/inputs", H5P_DEFAULT) >= 0);
    hsize_t dims[2] = {8, 16};
    hid_t space = H5Screate_simple(2, dims, NULL), dcpl = H5Pcreate(H5P_DATASET_CREATE);
    CU_ASSERT_TRUE(H5Pset_external(dcpl, external, 0, 8 * 16 * 4) >= 0);
    hid_t d = H5Dcreate2(f, "/train/inputs", H5T_STD_I32LE, space, H5P_DEFAULT, dcpl, H5P_DEFAULT);
    CU_ASSERT_TRUE(d >= 0);
    H5Dclose(d);
    H5Pclose(dcpl);
    H5Sclose(space);
    H5Fclose(f);
}

static void test_data_file_reads_no_other_file(void)
{
    const char *base = tmp_path("base.h5"), *other = tmp_path("other.h5"), *secret = secret_file();
    make_spike(base);
    make_spike(other);
    lb_dataset *ds = lb_dataset_open(base);
    CU_ASSERT_PTR_NOT_NULL_FATAL(ds); /* the files as written are read */
    lb_dataset_close(ds);

    /* external raw storage: the dataset's bytes are another file's */
    const char *path = tmp_path("external-storage.h5");
    copy_file(base, path);
    external_storage_inputs(path, secret);
    const char *storage[] = {path, "/train/inputs", "external storage", NULL};
    expect_refused(lb_dataset_open(path), storage);
    expect_refused(lb_dataset_open_split(path, "val"), storage); /* whatever split is asked for */

    /* an external link: the name leads into another file */
    path = tmp_path("external-link.h5");
    copy_file(base, path);
    hid_t f = open_rw(path);
    CU_ASSERT_TRUE(H5Ldelete(f, "/val/inputs", H5P_DEFAULT) >= 0);
    CU_ASSERT_TRUE(H5Lcreate_external(other, "/val/inputs", f, "/val/inputs", H5P_DEFAULT, H5P_DEFAULT) >= 0);
    H5Fclose(f);
    const char *external[] = {path, "/val/inputs", "external link", NULL};
    expect_refused(lb_dataset_open(path), external);

    /* a soft link: /test is the /val group under another name */
    path = tmp_path("soft-link.h5");
    copy_file(base, path);
    f = open_rw(path);
    CU_ASSERT_TRUE(H5Ldelete(f, "/test", H5P_DEFAULT) >= 0);
    CU_ASSERT_TRUE(H5Lcreate_soft("/val", f, "/test", H5P_DEFAULT, H5P_DEFAULT) >= 0);
    H5Fclose(f);
    const char *soft[] = {path, "/test", "soft link", NULL};
    expect_refused(lb_dataset_open(path), soft);

    /* a virtual dataset: /test/inputs mapped from the other file */
    path = tmp_path("virtual.h5");
    copy_file(base, path);
    f = open_rw(path);
    CU_ASSERT_TRUE(H5Ldelete(f, "/test/inputs", H5P_DEFAULT) >= 0);
    hsize_t dims[2] = {4, 16};
    hid_t space = H5Screate_simple(2, dims, NULL), dcpl = H5Pcreate(H5P_DATASET_CREATE);
    CU_ASSERT_TRUE(H5Pset_virtual(dcpl, space, other, "/test/inputs", space) >= 0);
    hid_t d = H5Dcreate2(f, "/test/inputs", H5T_STD_I32LE, space, H5P_DEFAULT, dcpl, H5P_DEFAULT);
    CU_ASSERT_TRUE(d >= 0);
    H5Dclose(d);
    H5Pclose(dcpl);
    H5Sclose(space);
    H5Fclose(f);
    const char *virtual[] = {path, "/test/inputs", "virtual dataset", NULL};
    expect_refused(lb_dataset_open(path), virtual);
}

/* A checkpoint (the 0.1.0 fixture) with each of them: refused by every reader of
 * checkpoints, naming the object. */
static void test_checkpoint_reads_no_other_file(void)
{
    const char *fixture = lb_fixture_path("checkpoint_v1_lstm.h5"), *secret = secret_file();
    lb_model *m = lb_checkpoint_load_model(fixture);
    CU_ASSERT_PTR_NOT_NULL_FATAL(m);
    lb_model_free(m);
    for (int kind = 0; kind < 3; kind++) {
        const char *path = tmp_path(kind == 0 ? "ck-soft.h5" : kind == 1 ? "ck-external.h5" : "ck-storage.h5");
        copy_file(fixture, path);
        hid_t f = open_rw(path);
        if (kind == 0) {
            CU_ASSERT_TRUE(H5Lcreate_soft("/params", f, "/weights", H5P_DEFAULT, H5P_DEFAULT) >= 0);
        } else if (kind == 1) {
            CU_ASSERT_TRUE(H5Lcreate_external(secret, "/x", f, "/notes", H5P_DEFAULT, H5P_DEFAULT) >= 0);
        } else {
            hsize_t n = 16;
            hid_t space = H5Screate_simple(1, &n, NULL), dcpl = H5Pcreate(H5P_DATASET_CREATE);
            H5Pset_external(dcpl, secret, 0, 16);
            H5Dclose(H5Dcreate2(f, "/extra", H5T_STD_U8LE, space, H5P_DEFAULT, dcpl, H5P_DEFAULT));
            H5Pclose(dcpl);
            H5Sclose(space);
        }
        H5Fclose(f);
        const char *what = kind == 0 ? "soft link" : kind == 1 ? "external link" : "external storage";
        lb_clear_error();
        m = lb_checkpoint_load_model(path);
        CU_ASSERT_PTR_NULL(m);
        lb_model_free(m);
        CU_ASSERT_PTR_NOT_NULL(strstr(lb_last_error(), what));
        CU_ASSERT_PTR_NOT_NULL(strstr(lb_last_error(), path));
        CU_ASSERT_PTR_NULL(strstr(lb_last_error(), "SECRET"));
        lb_model_config cfg;
        CU_ASSERT_NOT_EQUAL(lb_checkpoint_read_model_config(path, &cfg), LB_OK);
        CU_ASSERT_PTR_NOT_NULL(strstr(lb_last_error(), what));
    }
}

/* num_classes 2^31 - 1 in a file that lacks an option attribute (so nothing ties it to
 * the task): the file opens (its targets are in range) and `data info` prints the
 * classes that occur, not two billion lines, in memory bounded by the data. */
static void test_report_bounded_by_the_data(void)
{
    const char *path = tmp_path("classes.h5");
    make_spike(path);
    hid_t f = open_rw(path);
    CU_ASSERT_TRUE(H5Adelete(f, "readings") >= 0);
    CU_ASSERT_TRUE(H5Adelete(f, "num_classes") >= 0);
    int64_t classes = INT32_MAX;
    hid_t space = H5Screate(H5S_SCALAR);
    hid_t a = H5Acreate2(f, "num_classes", H5T_STD_I64LE, space, H5P_DEFAULT, H5P_DEFAULT);
    CU_ASSERT_TRUE(H5Awrite(a, H5T_NATIVE_INT64, &classes) >= 0);
    H5Aclose(a);
    H5Sclose(space);
    H5Fclose(f);
    lb_dataset *ds = lb_dataset_open(path);
    CU_ASSERT_PTR_NOT_NULL_FATAL(ds);
    CU_ASSERT_EQUAL(lb_dataset_num_classes(ds), INT32_MAX);
    char *text = NULL;
    size_t size = 0;
    FILE *out = open_memstream(&text, &size);
    CU_ASSERT_EQUAL(lb_dataset_print_info(ds, out), LB_OK);
    fclose(out);
    CU_ASSERT_TRUE(size < 8192); /* 8 training targets: a few classes */
    CU_ASSERT_PTR_NOT_NULL(strstr(text, "of the 2147483647 classes occur"));
    /* the counts printed add up to the 8 training targets */
    const char *h = strstr(text, "label histogram (train):");
    CU_ASSERT_PTR_NOT_NULL_FATAL(h);
    long long sum = 0, cls, count;
    int used;
    h += strlen("label histogram (train):");
    while (sscanf(h, " %lld:%lld%n", &cls, &count, &used) == 2) {
        CU_ASSERT_TRUE(cls >= 0 && cls < 8);
        sum += count;
        h += used;
    }
    CU_ASSERT_EQUAL(sum, 8);
    free(text);
    lb_dataset_close(ds);
}

/* Replaces /train/inputs by an int32 [n, 16] dataset in chunks of `chunk_rows` rows,
 * deflated; `write_zeros`: its chunks allocated at creation and filled with zeros
 * (a compressed block of zeros), else never written. */
static void chunked_inputs(const char *path, hsize_t n, hsize_t chunk_rows, int write_zeros)
{
    hid_t f = open_rw(path);
    CU_ASSERT_TRUE(H5Ldelete(f, "/train/inputs", H5P_DEFAULT) >= 0);
    hsize_t dims[2] = {n, 16}, chunk[2] = {chunk_rows, 16};
    hid_t space = H5Screate_simple(2, dims, NULL), dcpl = H5Pcreate(H5P_DATASET_CREATE);
    H5Pset_chunk(dcpl, 2, chunk);
    H5Pset_deflate(dcpl, 9);
    if (write_zeros) {
        int32_t zero = 0;
        H5Pset_fill_value(dcpl, H5T_NATIVE_INT32, &zero);
        H5Pset_alloc_time(dcpl, H5D_ALLOC_TIME_EARLY);
        H5Pset_fill_time(dcpl, H5D_FILL_TIME_ALLOC);
    }
    hid_t d = H5Dcreate2(f, "/train/inputs", H5T_STD_I32LE, space, H5P_DEFAULT, dcpl, H5P_DEFAULT);
    CU_ASSERT_TRUE(d >= 0);
    H5Dclose(d);
    H5Pclose(dcpl);
    H5Sclose(space);
    H5Fclose(f);
}

/* A dataset created but never written (HDF5 would read its fill value): refused as
 * such, whether small or claiming 2^31 examples. */
static void test_never_written_dataset(void)
{
    const hsize_t sizes[2] = {8, (hsize_t)1 << 31};
    for (int i = 0; i < 2; i++) {
        const char *path = tmp_path(i ? "never-written-huge.h5" : "never-written.h5");
        make_spike(path);
        chunked_inputs(path, sizes[i], 8, 0);
        const char *needles[] = {path, "/train/inputs", "never written", NULL};
        expect_refused(lb_dataset_open(path), needles);
    }
}

/* 100 MB of zeros in ~100 KB: more than 512 bytes of data per stored byte beyond the
 * first 64 MiB is refused before anything is allocated; LOOKBACK_MAX_EXPANSION states
 * the limit (a bad value of it is said). */
static void test_decompression_bomb(void)
{
    const char *path = tmp_path("bomb.h5");
    make_spike(path);
    chunked_inputs(path, (hsize_t)100 << 20 >> 6, 65536, 1); /* [1.6 M, 16] int32: 100 MiB */
    struct stat sb;
    CU_ASSERT_EQUAL_FATAL(stat(path, &sb), 0);
    CU_ASSERT_TRUE(sb.st_size < (1 << 20)); /* a bomb: under 1 MB on disk */
    const char *needles[] = {path, "/train/inputs", "decompresses to 104857600 bytes", "LOOKBACK_MAX_EXPANSION", NULL};
    expect_refused(lb_dataset_open(path), needles);
    setenv("LOOKBACK_MAX_EXPANSION", "lots", 1);
    lb_dataset *ds = lb_dataset_open(path);
    CU_ASSERT_PTR_NULL(ds);
    lb_dataset_close(ds);
    CU_ASSERT_PTR_NOT_NULL(strstr(lb_last_error(), "LOOKBACK_MAX_EXPANSION='lots'"));
    unsetenv("LOOKBACK_MAX_EXPANSION");
}

/* Sets a scalar attribute of the root, replacing it. */
static void set_root_attr(const char *path, const char *name, hid_t type, const void *value)
{
    hid_t f = open_rw(path);
    if (H5Aexists(f, name) > 0)
        H5Adelete(f, name);
    hid_t space = H5Screate(H5S_SCALAR);
    hid_t a = H5Acreate2(f, name, type, space, H5P_DEFAULT, H5P_DEFAULT);
    CU_ASSERT_TRUE(H5Awrite(a, type, value) >= 0);
    H5Aclose(a);
    H5Sclose(space);
    H5Fclose(f);
}

/* A checkpoint whose training-state attributes are out of range (step = -5, a NaN clock,
 * more interval steps than steps, a best step after the last) is refused on load,
 * naming the attribute, and the trainer is left as it was. */
static void test_checkpoint_attributes_in_range(void)
{
    const char *data = tmp_path("ck-data.h5"), *ck = tmp_path("ck-ranges.h5"), *edited = tmp_path("ck-edited.h5");
    make_spike(data);
    lb_dataset *ds = lb_dataset_open(data);
    CU_ASSERT_PTR_NOT_NULL_FATAL(ds);
    lb_model_config mc;
    lb_train_config tc;
    lb_test_tiny_lstm(ds, 8, 3, &mc, &tc);
    tc.eval_examples = 4;
    lb_model *m = lb_model_new(&mc);
    lb_trainer *t = lb_trainer_new(m, ds, &tc);
    CU_ASSERT_PTR_NOT_NULL_FATAL(t);
    CU_ASSERT_EQUAL_FATAL(lb_trainer_run(t, ck, NULL, NULL, NULL), LB_OK);
    lb_trainer *u = lb_trainer_new(m, ds, &tc);
    CU_ASSERT_EQUAL(lb_trainer_load(u, ck), LB_OK); /* as written: loads */
    CU_ASSERT_EQUAL(lb_trainer_steps_done(u), 3);
    lb_trainer_free(u);
    const int64_t minus5 = -5, many = 1000;
    const double nan = NAN;
    const struct {
        const char *attr;
        hid_t type;
        const void *value;
        const char *says;
    } edits[] = {
        {"step", H5T_NATIVE_INT64, &minus5, "'step' = -5 is outside [0, "},
        {"elapsed_seconds", H5T_NATIVE_DOUBLE, &nan, "'elapsed_seconds' = nan"},
        {"interval.steps", H5T_NATIVE_INT64, &many, "'interval.steps' = 1000 is outside [0, 3]"},
        {"best.step", H5T_NATIVE_INT64, &many, "'best.step' = 1000 is outside [0, 3]"},
    };
    for (size_t i = 0; i < sizeof edits / sizeof edits[0]; i++) {
        copy_file(ck, edited);
        set_root_attr(edited, edits[i].attr, edits[i].type, edits[i].value);
        lb_trainer *v = lb_trainer_new(m, ds, &tc);
        CU_ASSERT_PTR_NOT_NULL_FATAL(v);
        lb_clear_error();
        CU_ASSERT_EQUAL(lb_trainer_load(v, edited), LB_ERR_FORMAT);
        if (!strstr(lb_last_error(), edits[i].says))
            fprintf(stderr, "\n  %s: '%s' lacks '%s'\n", edits[i].attr, lb_last_error(), edits[i].says);
        CU_ASSERT_PTR_NOT_NULL(strstr(lb_last_error(), edits[i].says));
        CU_ASSERT_EQUAL(lb_trainer_steps_done(v), 0); /* nothing of it was taken */
        lb_trainer_free(v);
    }
    lb_trainer_free(t);
    lb_model_free(m);
    lb_dataset_close(ds);
}

static void cleanup(void)
{
    const char *names[] = {"base.h5", "other.h5", "secret.txt", "external-storage.h5", "external-link.h5",
                           "soft-link.h5", "virtual.h5", "ck-soft.h5", "ck-external.h5", "ck-storage.h5",
                           "classes.h5", "never-written.h5", "never-written-huge.h5", "bomb.h5",
                           "ck-data.h5", "ck-ranges.h5", "ck-edited.h5"};
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++)
        remove(tmp_path(names[i]));
}

int main(void)
{
    const lb_test_case cases[] = {
        {"data files: external storage, external and soft links, virtual datasets refused",
         test_data_file_reads_no_other_file},
        {"checkpoints: soft and external links, external storage refused", test_checkpoint_reads_no_other_file},
        {"data info on num_classes 2^31 - 1: the classes that occur", test_report_bounded_by_the_data},
        {"a dataset never written is refused as such", test_never_written_dataset},
        {"a decompression bomb is refused at the stated limit", test_decompression_bomb},
        {"checkpoint attributes out of range are refused on load", test_checkpoint_attributes_in_range},
        {NULL, NULL},
    };
    int rc = lb_test_main("hostile files", cases);
    cleanup();
    return rc;
}

/* Files lookback reads and writes: output paths that are not regular files, types
 * checked on reading, checksums, locked versus damaged files, HDF5 contained in a
 * child process, fixed-length strings, files written by earlier versions, and a
 * seeded mutation fuzz of a data file and a checkpoint. */
#include <errno.h>
#include <hdf5.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "data/h5io.h"
#include "data/output.h"
#include "data/tasks.h"
#include "support.h"
#include "tensor/rng.h"
#include "train/trainer.h"

static char dir[256], data_path[512], ckpt_path[512];

static const char *in_dir(const char *name)
{
    static char buf[8][512];
    static int next;
    char *p = buf[next++ % 8];
    snprintf(p, 512, "%s/%s", dir, name);
    return p;
}

static lb_task_options small_options(void)
{
    lb_task_options o;
    lb_task_options_default(LB_TASK_SPIKE, &o);
    o.seq_len = 16;
    o.readings = 4;
    o.n_train = 32;
    o.n_val = 8;
    o.n_test = 8;
    o.seed = 11;
    return o;
}

/* A trainer of a tiny LSTM on data_path (the caller frees with free_trainer). */
static lb_trainer *tiny_trainer(lb_dataset **ds_out, lb_model **model_out)
{
    lb_dataset *ds = lb_dataset_open(data_path);
    if (!ds) {
        fprintf(stderr, "open: %s\n", lb_last_error());
        exit(1);
    }
    lb_model_config mc;
    lb_train_config tc;
    lb_test_tiny_lstm(ds, 4, 2, &mc, &tc);
    lb_model *m = lb_model_new(&mc);
    lb_trainer *t = lb_trainer_new(m, ds, &tc);
    if (!t) {
        fprintf(stderr, "trainer: %s\n", lb_last_error());
        exit(1);
    }
    *ds_out = ds;
    *model_out = m;
    return t;
}

static void free_trainer(lb_trainer *t, lb_dataset *ds, lb_model *m)
{
    lb_trainer_free(t);
    lb_model_free(m);
    lb_dataset_close(ds);
}

static void setup(void)
{
    snprintf(dir, sizeof dir, "/tmp/lookback_test_files_%d", (int)getpid());
    mkdir(dir, 0777);
    snprintf(data_path, sizeof data_path, "%s/data.h5", dir);
    snprintf(ckpt_path, sizeof ckpt_path, "%s/ck.h5", dir);
    lb_task_options o = small_options();
    if (lb_task_generate(&o, data_path, NULL, NULL) != LB_OK)
        fprintf(stderr, "generate: %s\n", lb_last_error());
    lb_dataset *ds;
    lb_model *m;
    lb_trainer *t = tiny_trainer(&ds, &m);
    lb_step_stats s;
    lb_trainer_step(t, &s);
    if (lb_trainer_save(t, ckpt_path) != LB_OK)
        fprintf(stderr, "save: %s\n", lb_last_error());
    free_trainer(t, ds, m);
}

/* ---- output paths ---- */

/* A listening UNIX socket at path (closed by the caller). */
static int make_socket(const char *path)
{
    int fd = socket(AF_UNIX, SOCK_STREAM, 0);
    struct sockaddr_un addr = {.sun_family = AF_UNIX};
    snprintf(addr.sun_path, sizeof addr.sun_path, "%s", path);
    if (fd >= 0 && bind(fd, (struct sockaddr *)&addr, sizeof addr) != 0) {
        close(fd);
        return -1;
    }
    return fd;
}

static mode_t mode_of(const char *path)
{
    struct stat sb;
    return stat(path, &sb) == 0 ? sb.st_mode & S_IFMT : 0;
}

static void test_output_paths_not_regular(void)
{
    const char *fifo = in_dir("fifo.h5"), *folder = in_dir("folder.h5"), *sock = in_dir("sock.h5");
    CU_ASSERT_EQUAL_FATAL(mkfifo(fifo, 0644), 0);
    CU_ASSERT_EQUAL_FATAL(mkdir(folder, 0755), 0);
    int sfd = make_socket(sock);
    CU_ASSERT_TRUE_FATAL(sfd >= 0);
    struct {
        const char *path;
        mode_t mode;
        const char *says;
    } targets[] = {{"/dev/null", S_IFCHR, "is a device"},
                   {fifo, S_IFIFO, "is a FIFO"},
                   {folder, S_IFDIR, "is a folder"},
                   {sock, S_IFSOCK, "is a socket"}};
    lb_task_options o = small_options();
    lb_dataset *ds;
    lb_model *m;
    lb_trainer *t = tiny_trainer(&ds, &m);
    for (size_t i = 0; i < sizeof targets / sizeof targets[0]; i++) {
        CU_ASSERT_EQUAL(lb_output_check(targets[i].path, "report"), LB_ERR_IO);
        CU_ASSERT_TRUE(lb_test_error_has(targets[i].says));
        CU_ASSERT_EQUAL(lb_task_generate(&o, targets[i].path, NULL, NULL), LB_ERR_IO);
        CU_ASSERT_TRUE(lb_test_error_has(targets[i].path));
        CU_ASSERT_TRUE(lb_test_error_has("not a regular file"));
        CU_ASSERT_EQUAL(lb_trainer_save(t, targets[i].path), LB_ERR_IO);
        CU_ASSERT_TRUE(lb_test_error_has(targets[i].says));
        CU_ASSERT_EQUAL(mode_of(targets[i].path), targets[i].mode); /* left alone */
    }
    /* The temporary sibling is judged too: a FIFO at PATH.tmp is never opened. */
    const char *tmp_fifo = in_dir("out.h5.tmp");
    CU_ASSERT_EQUAL_FATAL(mkfifo(tmp_fifo, 0644), 0);
    CU_ASSERT_EQUAL(lb_trainer_save(t, in_dir("out.h5")), LB_ERR_IO);
    CU_ASSERT_TRUE(lb_test_error_has("out.h5.tmp"));
    CU_ASSERT_EQUAL(mode_of(tmp_fifo), S_IFIFO);
    CU_ASSERT_EQUAL(mode_of(in_dir("out.h5")), 0);
    /* Empty paths. */
    CU_ASSERT_EQUAL(lb_task_generate(&o, "", NULL, NULL), LB_ERR_VALUE);
    CU_ASSERT_TRUE(lb_test_error_has("empty"));
    CU_ASSERT_EQUAL(lb_trainer_save(t, ""), LB_ERR_VALUE);
    CU_ASSERT_TRUE(lb_test_error_has("empty"));
    CU_ASSERT_PTR_NULL(lb_dataset_open(""));
    CU_ASSERT_TRUE(lb_test_error_has("empty"));
    /* A commit refuses a target that turned into something else meanwhile. */
    const char *late = in_dir("late.tmp");
    FILE *f = fopen(late, "w");
    CU_ASSERT_PTR_NOT_NULL_FATAL(f);
    fclose(f);
    CU_ASSERT_EQUAL(lb_output_commit(late, fifo, "report"), LB_ERR_IO);
    CU_ASSERT_EQUAL(mode_of(fifo), S_IFIFO);
    CU_ASSERT_EQUAL(mode_of(late), 0); /* the temporary file is removed */
    free_trainer(t, ds, m);
    close(sfd);
    unlink(sock);
    unlink(fifo);
    unlink(tmp_fifo);
    rmdir(folder);
}

/* ---- types, checksums ---- */

static void copy_file(const char *from, const char *to)
{
    FILE *in = fopen(from, "rb"), *out = fopen(to, "wb");
    char buf[65536];
    size_t n;
    while (in && out && (n = fread(buf, 1, sizeof buf, in)) > 0)
        fwrite(buf, 1, n, out);
    if (in)
        fclose(in);
    if (out)
        fclose(out);
}

/* Replaces dataset `where` (group/name) of file by one of `type` holding n values. */
static void replace_dataset(const char *file, const char *group, const char *name, hid_t type, const void *values,
                            hsize_t n)
{
    hid_t f = H5Fopen(file, H5F_ACC_RDWR, H5P_DEFAULT);
    hid_t g = H5Gopen2(f, group, H5P_DEFAULT);
    H5Ldelete(g, name, H5P_DEFAULT);
    hid_t space = H5Screate_simple(1, &n, NULL);
    hid_t d = H5Dcreate2(g, name, type, space, H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT);
    CU_ASSERT_TRUE(H5Dwrite(d, type, H5S_ALL, H5S_ALL, H5P_DEFAULT, values) >= 0);
    H5Dclose(d);
    H5Sclose(space);
    H5Gclose(g);
    H5Fclose(f);
}

static void replace_attr_real(const char *file, const char *name, double value)
{
    hid_t f = H5Fopen(file, H5F_ACC_RDWR, H5P_DEFAULT);
    H5Adelete(f, name);
    hid_t space = H5Screate(H5S_SCALAR);
    hid_t a = H5Acreate2(f, name, H5T_IEEE_F64LE, space, H5P_DEFAULT, H5P_DEFAULT);
    H5Awrite(a, H5T_NATIVE_DOUBLE, &value);
    H5Aclose(a);
    H5Sclose(space);
    H5Fclose(f);
}

static lb_status load_into_new_trainer(const char *path)
{
    lb_dataset *ds;
    lb_model *m;
    lb_trainer *t = tiny_trainer(&ds, &m);
    lb_status st = lb_trainer_load(t, path);
    free_trainer(t, ds, m);
    return st;
}

static void test_generator_state_types_refused(void)
{
    const char *copy = in_dir("types.h5");
    CU_ASSERT_EQUAL(load_into_new_trainer(ckpt_path), LB_OK);
    double as_float[4] = {1, 2, 3, 4};
    int64_t as_signed[4] = {1, 2, 3, 4};
    uint32_t as_narrow[4] = {1, 2, 3, 4};
    struct {
        hid_t type;
        const void *values;
        const char *found;
    } cases[] = {{H5T_IEEE_F64LE, as_float, "found float64"},
                 {H5T_STD_I64LE, as_signed, "found int64"},
                 {H5T_STD_U32LE, as_narrow, "found uint32"}};
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        copy_file(ckpt_path, copy);
        replace_dataset(copy, "rng", "loader", cases[i].type, cases[i].values, 4);
        CU_ASSERT_EQUAL(load_into_new_trainer(copy), LB_ERR_FORMAT);
        CU_ASSERT_TRUE(lb_test_error_has("/rng/loader"));
        CU_ASSERT_TRUE(lb_test_error_has("expected uint64"));
        CU_ASSERT_TRUE(lb_test_error_has(cases[i].found));
    }
    /* A parameter stored as float64 for a float32 model. */
    copy_file(ckpt_path, copy);
    double bias[16] = {0};
    replace_dataset(copy, "params", "lstm.bias_hh_l0", H5T_IEEE_F64LE, bias, 16);
    CU_ASSERT_EQUAL(load_into_new_trainer(copy), LB_ERR_FORMAT);
    CU_ASSERT_TRUE(lb_test_error_has("/params/lstm.bias_hh_l0"));
    CU_ASSERT_TRUE(lb_test_error_has("expected float32, found float64"));
    /* An integer attribute stored as a float. */
    copy_file(ckpt_path, copy);
    replace_attr_real(copy, "step", 1.0);
    CU_ASSERT_EQUAL(load_into_new_trainer(copy), LB_ERR_FORMAT);
    CU_ASSERT_TRUE(lb_test_error_has("attribute 'step'"));
    CU_ASSERT_TRUE(lb_test_error_has("expected int64, found float64"));
    /* Data files: a seed stored as a float, a sequence length as a negative signed
     * integer are refused; a non-negative signed seed (as h5py writes) is read. */
    copy_file(data_path, copy);
    replace_attr_real(copy, "seed", 11.0);
    CU_ASSERT_PTR_NULL(lb_dataset_open(copy));
    CU_ASSERT_TRUE(lb_test_error_has("attribute 'seed'"));
    CU_ASSERT_TRUE(lb_test_error_has("found float64"));
    remove(copy);
}

/* Offset in the file of the contiguous dataset /group/name's values. */
static haddr_t dataset_offset(const char *file, const char *where)
{
    hid_t f = H5Fopen(file, H5F_ACC_RDONLY, H5P_DEFAULT);
    hid_t d = H5Dopen2(f, where, H5P_DEFAULT);
    haddr_t off = H5Dget_offset(d);
    H5Dclose(d);
    H5Fclose(f);
    return off;
}

static void flip_bit(const char *file, long offset, int bit)
{
    FILE *f = fopen(file, "r+b");
    CU_ASSERT_PTR_NOT_NULL_FATAL(f);
    fseek(f, offset, SEEK_SET);
    int c = fgetc(f);
    fseek(f, offset, SEEK_SET);
    fputc(c ^ (1 << bit), f);
    fclose(f);
}

static void test_checkpoint_checksum(void)
{
    const char *copy = in_dir("flip.h5");
    const char *targets[] = {"/params/head.weight", "/optim/exp_avg.lstm.weight_ih_l0", "/rng/dropout",
                             "/optim/step.head.bias"};
    for (size_t i = 0; i < sizeof targets / sizeof targets[0]; i++) {
        copy_file(ckpt_path, copy);
        haddr_t off = dataset_offset(copy, targets[i]);
        CU_ASSERT_TRUE_FATAL(off != HADDR_UNDEF);
        flip_bit(copy, (long)off + 1, 3); /* a mantissa bit: the value stays finite */
        CU_ASSERT_EQUAL(load_into_new_trainer(copy), LB_ERR_FORMAT);
        CU_ASSERT_TRUE(lb_test_error_has(targets[i]));
        CU_ASSERT_TRUE(lb_test_error_has("does not match its checksum"));
    }
    /* eval's path (parameters only) checks it too. */
    copy_file(ckpt_path, copy);
    flip_bit(copy, (long)dataset_offset(copy, "/params/embedding.weight") + 2, 0);
    lb_model_config mc;
    CU_ASSERT_EQUAL_FATAL(lb_checkpoint_read_model_config(copy, &mc), LB_OK);
    lb_model *m = lb_model_new(&mc);
    CU_ASSERT_EQUAL(lb_checkpoint_load_params(copy, m), LB_ERR_FORMAT);
    CU_ASSERT_TRUE(lb_test_error_has("/params/embedding.weight"));
    lb_model_free(m);
    remove(copy);
}

/* ---- strings ---- */

static int is_variable_string(const char *file, const char *attr)
{
    hid_t f = H5Fopen(file, H5F_ACC_RDONLY, H5P_DEFAULT);
    hid_t a = H5Aopen(f, attr, H5P_DEFAULT);
    hid_t t = H5Aget_type(a);
    int v = H5Tget_class(t) == H5T_STRING ? H5Tis_variable_str(t) > 0 : -1;
    H5Tclose(t);
    H5Aclose(a);
    H5Fclose(f);
    return v;
}

static void test_fixed_length_strings(void)
{
    CU_ASSERT_EQUAL(is_variable_string(data_path, "task"), 0);
    CU_ASSERT_EQUAL(is_variable_string(ckpt_path, "format"), 0);
    CU_ASSERT_EQUAL(is_variable_string(ckpt_path, "model.kind"), 0);
    CU_ASSERT_EQUAL(is_variable_string(ckpt_path, "optim.kind"), 0);
    /* Files of the earlier format (variable-length strings, as h5py writes) still load. */
    CU_ASSERT_EQUAL(is_variable_string(lb_fixture_path("v1_data.h5"), "task"), 1);
    CU_ASSERT_EQUAL(is_variable_string(lb_fixture_path("v1_checkpoint.h5"), "model.kind"), 1);
}

/* ---- files of the earlier format ---- */

static void test_earlier_files_load(void)
{
    lb_dataset *ds = lb_dataset_open(lb_fixture_path("v1_data.h5"));
    if (!ds)
        fprintf(stderr, "\n  %s\n", lb_last_error());
    CU_ASSERT_PTR_NOT_NULL_FATAL(ds);
    CU_ASSERT_EQUAL(lb_dataset_task(ds), LB_TASK_SPIKE);
    CU_ASSERT_EQUAL(lb_dataset_seq_len(ds), 16);
    CU_ASSERT_EQUAL(lb_dataset_split_size(ds, "train"), 8);
    CU_ASSERT_EQUAL(lb_dataset_options(ds)->noise_types, 4);
    CU_ASSERT_EQUAL(lb_dataset_options(ds)->seed, 1);
    lb_model_config mc;
    CU_ASSERT_EQUAL_FATAL(lb_checkpoint_read_model_config(lb_fixture_path("v1_checkpoint.h5"), &mc), LB_OK);
    CU_ASSERT_EQUAL(mc.kind, LB_MODEL_LSTM);
    CU_ASSERT_EQUAL(mc.hidden_size, 4);
    CU_ASSERT_EQUAL(mc.num_classes, 8);
    lb_model *m = lb_model_new(&mc);
    CU_ASSERT_PTR_NOT_NULL_FATAL(m);
    CU_ASSERT_EQUAL(lb_checkpoint_load_params(lb_fixture_path("v1_checkpoint.h5"), m), LB_OK);
    lb_params *ps = lb_model_params(m);
    const lb_tensor *bias = NULL;
    for (int i = 0; i < ps->count; i++)
        if (strcmp(ps->items[i]->name, "head.bias") == 0)
            bias = ps->items[i]->value;
    CU_ASSERT_PTR_NOT_NULL_FATAL(bias);
    /* Values as h5dump prints them from the fixture. */
    const double expected[8] = {-0.00154987, 0.0015498, -0.0015506, 0.00155005,
                                -0.00155024, -0.00154759, -0.00155073, -0.00154903};
    LB_ASSERT_CLOSE(bias, expected, 1e-8, 1e-5);
    /* The whole training state resumes (optimizer, generators, loader). */
    lb_train_config tc;
    lb_train_config_default(&tc);
    tc.steps = 4;
    tc.batch_size = 2;
    tc.threads = 1;
    lb_trainer *t = lb_trainer_new(m, ds, &tc);
    CU_ASSERT_EQUAL(lb_trainer_load(t, lb_fixture_path("v1_checkpoint.h5")), LB_OK);
    CU_ASSERT_EQUAL(lb_trainer_steps_done(t), 2);
    lb_trainer_free(t);
    lb_model_free(m);
    lb_dataset_close(ds);
}

/* ---- locked versus damaged ---- */

static void test_locked_versus_damaged(void)
{
    int ready[2], release[2];
    CU_ASSERT_EQUAL_FATAL(pipe(ready), 0);
    CU_ASSERT_EQUAL_FATAL(pipe(release), 0);
    const char *paths[2] = {data_path, ckpt_path};
    for (int k = 0; k < 2; k++) {
        pid_t pid = fork();
        if (pid == 0) { /* another process holds the file open for writing */
            hid_t f = H5Fopen(paths[k], H5F_ACC_RDWR, H5P_DEFAULT);
            char c = f >= 0 ? 'y' : 'n';
            if (write(ready[1], &c, 1) != 1 || read(release[0], &c, 1) < 0)
                _exit(1);
            _exit(0);
        }
        char c = 0;
        CU_ASSERT_EQUAL(read(ready[0], &c, 1), 1);
        CU_ASSERT_EQUAL(c, 'y');
        if (k == 0) {
            CU_ASSERT_PTR_NULL(lb_dataset_open(data_path));
        } else {
            lb_model_config mc;
            CU_ASSERT_NOT_EQUAL(lb_checkpoint_read_model_config(ckpt_path, &mc), LB_OK);
        }
        CU_ASSERT_EQUAL(lb_last_status(), LB_ERR_IO);
        CU_ASSERT_TRUE(lb_test_error_has("locked by another process"));
        c = 'x';
        CU_ASSERT_EQUAL(write(release[1], &c, 1), 1);
        waitpid(pid, NULL, 0);
    }
    close(ready[0]);
    close(ready[1]);
    close(release[0]);
    close(release[1]);
    /* Unlocked again: it opens. A damaged file is called damaged, not locked. */
    lb_dataset *ds = lb_dataset_open(data_path);
    CU_ASSERT_PTR_NOT_NULL(ds);
    lb_dataset_close(ds);
    const char *cut = in_dir("cut.h5");
    copy_file(ckpt_path, cut);
    CU_ASSERT_EQUAL(truncate(cut, 3000), 0);
    lb_model_config mc;
    CU_ASSERT_EQUAL(lb_checkpoint_read_model_config(cut, &mc), LB_ERR_FORMAT);
    CU_ASSERT_TRUE(lb_test_error_has("damaged or truncated"));
    CU_ASSERT_PTR_NULL(strstr(lb_last_error(), "locked"));
    remove(cut);
}

/* ---- containment ---- */

static lb_status crash_job(void *ctx)
{
    (void)ctx;
    raise(SIGSEGV);
    return LB_OK;
}

static lb_status hang_job(void *ctx)
{
    (void)ctx;
    for (;;)
        pause();
    return LB_OK;
}

static lb_status fail_job(void *ctx)
{
    *(int *)ctx = 99; /* not seen by the parent */
    return lb_error(LB_ERR_FORMAT, "the job's own message");
}

static void test_isolated_jobs(void)
{
    CU_ASSERT_EQUAL(lb_h5_isolated(crash_job, NULL, NULL, 5, 0, "f.h5"), LB_ERR_FORMAT);
    CU_ASSERT_TRUE(lb_test_error_has("f.h5: damaged or hostile HDF5 file"));
    /* "crashed (signal 11, ...)"; under AddressSanitizer, which catches the signal,
     * "ended without an answer (exit status 1)". */
    CU_ASSERT_TRUE(strstr(lb_last_error(), "crashed (signal 11") || strstr(lb_last_error(), "ended without an answer"));
    struct timespec a, b;
    clock_gettime(CLOCK_MONOTONIC, &a);
    CU_ASSERT_EQUAL(lb_h5_isolated(hang_job, NULL, NULL, 0.3, 0, "g.h5"), LB_ERR_FORMAT);
    clock_gettime(CLOCK_MONOTONIC, &b);
    CU_ASSERT_TRUE(lb_test_error_has("did not finish within"));
    double waited = (double)(b.tv_sec - a.tv_sec) + 1e-9 * (double)(b.tv_nsec - a.tv_nsec);
    CU_ASSERT_TRUE(waited >= 0.29 && waited < 5);
    CU_ASSERT_EQUAL(lb_h5_isolated(crash_job, NULL, NULL, 0, 1, "w.h5"), LB_ERR_IO);
    CU_ASSERT_TRUE(lb_test_error_has("while writing it"));
    int value = 1;
    CU_ASSERT_EQUAL(lb_h5_isolated(fail_job, NULL, &value, 5, 0, "h.h5"), LB_ERR_FORMAT);
    CU_ASSERT_TRUE(lb_test_error_has("the job's own message"));
    CU_ASSERT_EQUAL(value, 1);
    setenv("LOOKBACK_HDF5_TIMEOUT", "7.5", 1);
    CU_ASSERT_DOUBLE_EQUAL(lb_h5_read_timeout(1 << 30), 7.5, 1e-12);
    unsetenv("LOOKBACK_HDF5_TIMEOUT");
    CU_ASSERT_DOUBLE_EQUAL(lb_h5_read_timeout(200000000), 30.0, 1e-9);
}

/* ---- seeded mutation fuzz ---- */

static unsigned char *slurp(const char *path, long *size)
{
    FILE *f = fopen(path, "rb");
    if (!f)
        return NULL;
    fseek(f, 0, SEEK_END);
    *size = ftell(f);
    fseek(f, 0, SEEK_SET);
    unsigned char *buf = malloc((size_t)*size);
    if (buf && fread(buf, 1, (size_t)*size, f) != (size_t)*size) {
        free(buf);
        buf = NULL;
    }
    fclose(f);
    return buf;
}

typedef struct fuzz_counts {
    int accepted, refused, contained;
} fuzz_counts;

/* Writes a mutant of `bytes` (1..8 bytes replaced by random ones) to path. */
static void write_mutant(const char *path, const unsigned char *bytes, long size, lb_rng *rng)
{
    unsigned char *copy = malloc((size_t)size);
    memcpy(copy, bytes, (size_t)size);
    int n = 1 + (int)lb_rng_below(rng, 8);
    for (int k = 0; k < n; k++)
        copy[lb_rng_below(rng, (uint64_t)size)] = (unsigned char)lb_rng_below(rng, 256);
    FILE *f = fopen(path, "wb");
    fwrite(copy, 1, (size_t)size, f);
    fclose(f);
    free(copy);
}

static void count_outcome(int ok, const char *path, fuzz_counts *c)
{
    if (ok) {
        c->accepted++;
        return;
    }
    /* Refused: one message, naming the file. */
    CU_ASSERT_TRUE(lb_last_error()[0] != '\0');
    CU_ASSERT_PTR_NOT_NULL(strstr(lb_last_error(), path));
    if (strstr(lb_last_error(), "damaged or hostile"))
        c->contained++;
    else
        c->refused++;
}

static void test_mutation_fuzz(void)
{
    enum { MUTANTS = 200 };
    setenv("LOOKBACK_HDF5_TIMEOUT", "5", 1);
    lb_rng rng;
    lb_rng_seed(&rng, 20261130);
    const char *mutant = in_dir("mutant.h5");
    long size = 0;
    unsigned char *bytes = slurp(data_path, &size);
    CU_ASSERT_PTR_NOT_NULL_FATAL(bytes);
    fuzz_counts data = {0};
    for (int i = 0; i < MUTANTS; i++) {
        write_mutant(mutant, bytes, size, &rng);
        lb_clear_error();
        lb_dataset *ds = lb_dataset_open(mutant);
        if (ds) { /* an accepted file is usable */
            lb_batch b;
            CU_ASSERT_EQUAL(lb_dataset_slice(ds, "train", 0, 2, &b), LB_OK);
            lb_batch_free(&b);
        }
        count_outcome(ds != NULL, mutant, &data);
        lb_dataset_close(ds);
    }
    free(bytes);
    bytes = slurp(ckpt_path, &size);
    CU_ASSERT_PTR_NOT_NULL_FATAL(bytes);
    fuzz_counts ck = {0};
    lb_dataset *ds;
    lb_model *m;
    lb_trainer *t = tiny_trainer(&ds, &m);
    for (int i = 0; i < MUTANTS; i++) {
        write_mutant(mutant, bytes, size, &rng);
        lb_clear_error();
        count_outcome(lb_trainer_load(t, mutant) == LB_OK, mutant, &ck);
    }
    free_trainer(t, ds, m);
    free(bytes);
    unsetenv("LOOKBACK_HDF5_TIMEOUT");
    printf("\n  data file: %d accepted, %d refused, %d contained (crash or hang in libhdf5)\n", data.accepted,
           data.refused, data.contained);
    printf("  checkpoint: %d accepted, %d refused, %d contained\n", ck.accepted, ck.refused, ck.contained);
    CU_ASSERT_EQUAL(data.accepted + data.refused + data.contained, MUTANTS);
    CU_ASSERT_EQUAL(ck.accepted + ck.refused + ck.contained, MUTANTS);
    CU_ASSERT_TRUE(data.refused > MUTANTS / 10); /* the mutations do damage */
    CU_ASSERT_TRUE(ck.refused > MUTANTS / 10);
    remove(mutant);
}

/* An input registered with lb_output_protect is never an output, however its path is
 * spelled; lb_output_lock lets one writer of a path at a time and names the collision. */
static void test_inputs_and_writer_locks(void)
{
    const char *input = in_dir("input.bin"), *sym = in_dir("input-link.bin"), *hard = in_dir("input-hard.bin");
    FILE *f = fopen(input, "w");
    CU_ASSERT_TRUE_FATAL(f != NULL);
    fputs("precious", f);
    fclose(f);
    CU_ASSERT_EQUAL(symlink(input, sym), 0);
    CU_ASSERT_EQUAL(link(input, hard), 0);
    CU_ASSERT_EQUAL(lb_output_check(hard, "report"), LB_OK); /* not registered yet */
    CU_ASSERT_EQUAL(lb_output_check(sym, "report"), LB_ERR_IO); /* a link is never written through */
    CU_ASSERT_TRUE(lb_test_error_has("is a symbolic link"));
    CU_ASSERT_EQUAL(lb_output_protect(input, "the --data file"), LB_OK);
    CU_ASSERT_EQUAL(lb_output_protect(in_dir("absent.bin"), "nothing"), LB_OK);
    const char *spellings[] = {input, sym, hard};
    for (int i = 0; i < 3; i++) {
        CU_ASSERT_EQUAL(lb_output_check(spellings[i], "report"), LB_ERR_IO);
        CU_ASSERT_TRUE(lb_test_error_has("is the --data file, an input of this command"));
        CU_ASSERT_EQUAL(lb_output_is_input(spellings[i]), 1);
    }
    const char *tmp = in_dir("report.tmp");
    f = fopen(tmp, "w");
    fputs("new", f);
    fclose(f);
    CU_ASSERT_EQUAL(lb_output_commit(tmp, hard, "report"), LB_ERR_IO);
    CU_ASSERT_EQUAL(access(tmp, F_OK), -1); /* the temporary file is dropped, the input stays */
    char text[16] = "";
    f = fopen(input, "r");
    CU_ASSERT_PTR_NOT_NULL(fgets(text, sizeof text, f));
    fclose(f);
    CU_ASSERT_STRING_EQUAL(text, "precious");
    lb_output_protect_clear();
    CU_ASSERT_EQUAL(lb_output_check(hard, "report"), LB_OK);
    CU_ASSERT_EQUAL(lb_output_check(sym, "report"), LB_ERR_IO);
    CU_ASSERT_TRUE(lb_test_error_has("is a symbolic link"));
    CU_ASSERT_EQUAL(lb_output_is_input(input), 0);
    CU_ASSERT_EQUAL(lb_output_protect(NULL, "x"), LB_ERR_VALUE);

    const char *target = in_dir("locked.h5");
    char lock_path[600];
    snprintf(lock_path, sizeof lock_path, "%s.lock", target);
    int first = -1, second = -1;
    CU_ASSERT_EQUAL(lb_output_lock(target, "data file", &first), LB_OK);
    CU_ASSERT_TRUE(first >= 0);
    CU_ASSERT_EQUAL(lb_output_lock(target, "data file", &second), LB_ERR_IO);
    CU_ASSERT_TRUE(lb_test_error_has("another lookback process is writing"));
    CU_ASSERT_EQUAL(second, -1);
    lb_output_unlock(target, first);
    CU_ASSERT_EQUAL(access(lock_path, F_OK), -1);
    CU_ASSERT_EQUAL(lb_output_lock(target, "data file", &second), LB_OK);
    lb_output_unlock(target, second);
    CU_ASSERT_EQUAL(lb_output_lock(in_dir("no-such-folder/x.h5"), "data file", &first), LB_ERR_IO);
    CU_ASSERT_TRUE(lb_test_error_has("no-such-folder does not exist"));
    remove(sym);
    remove(hard);
    remove(input);
}

static lb_status ok_job(void *ctx)
{
    (void)ctx;
    return LB_OK;
}

/* With standard input and standard error closed, the pipe to the child stays above
 * descriptor 2 and a good job is reported as good. */
static void test_isolated_with_closed_descriptors(void)
{
    int saved_in = dup(STDIN_FILENO), saved_err = dup(STDERR_FILENO);
    CU_ASSERT_TRUE_FATAL(saved_in >= 0 && saved_err >= 0);
    close(STDIN_FILENO);
    close(STDERR_FILENO);
    lb_status st = lb_h5_isolated(ok_job, NULL, NULL, 10, 0, "good.h5");
    dup2(saved_in, STDIN_FILENO);
    dup2(saved_err, STDERR_FILENO);
    close(saved_in);
    close(saved_err);
    CU_ASSERT_EQUAL(st, LB_OK);
    if (st != LB_OK)
        fprintf(stderr, "\n  %s", lb_last_error());
}

int main(void)
{
    setup();
    static const lb_test_case cases[] = {
        {"output paths that are devices, FIFOs, sockets, folders or empty are refused and left alone",
         test_output_paths_not_regular},
        {"a generator state or tensor stored with another type is refused, naming the dataset",
         test_generator_state_types_refused},
        {"a flipped bit in a checkpoint dataset is caught by its checksum", test_checkpoint_checksum},
        {"attributes are written as fixed-length strings", test_fixed_length_strings},
        {"data files and checkpoints of the earlier format load", test_earlier_files_load},
        {"a file locked by a writing process is told apart from a damaged one", test_locked_versus_damaged},
        {"a crash or hang in the child process becomes one error", test_isolated_jobs},
        {"inputs are never outputs; one writer of a path at a time", test_inputs_and_writer_locks},
        {"the child process works with stdin and stderr closed", test_isolated_with_closed_descriptors},
        {"seeded mutants of a data file and a checkpoint never crash or hang", test_mutation_fuzz},
        {NULL, NULL},
    };
    int rc = lb_test_main("files", cases);
    remove(data_path);
    remove(ckpt_path);
    rmdir(dir);
    return rc;
}

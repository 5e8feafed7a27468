/* Data pipeline throughput: generate N spike sequences of length T into an HDF5 file,
 * open it (read + validate everything), and draw one shuffled epoch of batches.
 *
 * Reference measured in the same run: the same bytes written with fwrite and read
 * back with fread (uncompressed, no validation) to the same directory, and memcpy
 * for the loader's gather. Ratios > 1 mean lookback is slower than the reference.
 *
 * Usage: bench_data [N=100000] [T=1024] [dir=/tmp] [batch=64]
 * Build: cc -O2 -fopenmp -I. bench/bench_data.c build/liblookback.a \
 *          $(pkg-config --libs hdf5) -lopenblas -lm -o bench_data
 */
#define _POSIX_C_SOURCE 200809L
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "data/dataset.h"
#include "data/loader.h"
#include "data/tasks.h"

static double now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static void report(const char *what, int64_t n, double bytes, double seconds, double ref_seconds)
{
    printf("%-34s %8.3f s  %12.0f seq/s  %9.1f MB/s", what, seconds, (double)n / seconds, bytes / seconds / 1e6);
    if (ref_seconds > 0)
        printf("   (reference %.3f s, ratio %.2f)", ref_seconds, seconds / ref_seconds);
    putchar('\n');
}

/* Reference: fwrite then fread of `bytes` bytes; returns write and read times. */
static int raw_io(const char *path, size_t bytes, double *write_s, double *read_s)
{
    char *buf = malloc(bytes);
    FILE *f = buf ? fopen(path, "wb") : NULL;
    if (!f) {
        free(buf);
        return -1;
    }
    for (size_t i = 0; i < bytes; i++)
        buf[i] = (char)(i * 2654435761u >> 24);
    double t0 = now();
    size_t w = fwrite(buf, 1, bytes, f);
    fclose(f);
    *write_s = now() - t0;
    f = fopen(path, "rb");
    t0 = now();
    size_t r = f ? fread(buf, 1, bytes, f) : 0;
    if (f)
        fclose(f);
    *read_s = now() - t0;
    remove(path);
    free(buf);
    return (w == bytes && r == bytes) ? 0 : -1;
}

/* Reference for the loader: N rows of T int32 gathered by memcpy in a scattered order
 * from a pool of up to 65,536 rows (the bytes a batch gather moves, minus bookkeeping). */
static double gather_reference(int64_t n, int64_t T, int64_t B)
{
    int64_t pool = n < 65536 ? (n > 0 ? n : 1) : 65536;
    int32_t *src = calloc((size_t)(pool * T), sizeof *src), *dst = malloc((size_t)(B * T) * sizeof *dst);
    double s = 0;
    if (src && dst) {
        double t0 = now();
        for (int64_t i = 0; i < n; i++)
            memcpy(dst + (i % B) * T, src + (i * 7919 % pool) * T, (size_t)T * sizeof *dst);
        s = now() - t0;
        printf("  (reference checksum %d)\n", dst[0]);
    }
    free(src);
    free(dst);
    return s;
}

static void progress(int64_t done, int64_t total, void *user)
{
    (void)user;
    if (done == total || done % 20000 < 4096)
        fprintf(stderr, "\r  generated %lld / %lld", (long long)done, (long long)total);
    if (done == total)
        fputc('\n', stderr);
}

int main(int argc, char **argv)
{
    int64_t N = argc > 1 ? atoll(argv[1]) : 100000, T = argc > 2 ? atoll(argv[2]) : 1024;
    const char *dir = argc > 3 ? argv[3] : "/tmp";
    int64_t B = argc > 4 ? atoll(argv[4]) : 64;
    char path[512], raw[512], value[32];
    snprintf(path, sizeof path, "%s/bench_data_%d.h5", dir, (int)getpid());
    snprintf(raw, sizeof raw, "%s/bench_data_%d.raw", dir, (int)getpid());

    lb_task_options opt;
    lb_task_options_default(LB_TASK_SPIKE, &opt);
    const char *keys[3] = {"seq_len", "n_train", "n_val"};
    const int64_t values[3] = {T, N, 0};
    for (int i = 0; i < 3; i++) {
        snprintf(value, sizeof value, "%lld", (long long)values[i]);
        if (lb_task_set_option(&opt, keys[i], value) != LB_OK) {
            fprintf(stderr, "bench_data: %s\n", lb_last_error());
            return 1;
        }
    }
    opt.n_test = 0;
    double bytes = (double)N * (double)(T + 2) * 4; /* inputs + targets + distance */
    double ref_write = 0, ref_read = 0;
    if (raw_io(raw, (size_t)bytes, &ref_write, &ref_read) != 0)
        fprintf(stderr, "bench_data: reference raw I/O failed in %s\n", dir);
    printf("spike, N = %lld sequences of T = %lld, %.1f MB of int32 data, batch %lld\n", (long long)N, (long long)T,
           bytes / 1e6, (long long)B);

    double t0 = now();
    if (lb_task_generate(&opt, path, progress, NULL) != LB_OK) {
        fprintf(stderr, "bench_data: %s\n", lb_last_error());
        return 1;
    }
    report("generate + write (shuffle+deflate)", N, bytes, now() - t0, ref_write);
    FILE *f = fopen(path, "rb");
    if (f) {
        fseek(f, 0, SEEK_END);
        printf("  file size %.1f MB (compression ratio %.1f)\n", (double)ftell(f) / 1e6, bytes / (double)ftell(f));
        fclose(f);
    }

    t0 = now();
    lb_dataset *ds = lb_dataset_open(path);
    double open_s = now() - t0;
    if (!ds) {
        fprintf(stderr, "bench_data: %s\n", lb_last_error());
        return 1;
    }
    report("open (read + validate all)", N, bytes, open_s, ref_read);

    lb_loader *ld = lb_loader_new(ds, "train", B, 1, 0, 42);
    lb_batch batch;
    int64_t seen = 0;
    t0 = now();
    while (lb_loader_next(ld, &batch) == 1)
        seen += batch.batch_size;
    double epoch_s = now() - t0;
    report("loader epoch (shuffled batches)", seen, bytes, epoch_s, gather_reference(N, T, B));
    lb_loader_free(ld);
    lb_dataset_close(ds);
    remove(path);
    return 0;
}

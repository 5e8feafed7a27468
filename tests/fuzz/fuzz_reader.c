/* libFuzzer target for the data reader: the input bytes are written to a temporary
 * file that lb_dataset_open must either accept (and then its batches are read) or
 * reject with a message, without crashing, leaking our HDF5 identifiers or aborting.
 *
 * Build (clang's libFuzzer, with ASan and UBSan), from the repository root:
 *   clang -g -O1 -fsanitize=fuzzer,address,undefined -fopenmp -D_GNU_SOURCE -I. \
 *     tests/fuzz/fuzz_reader.c tensor/error.c tensor/rng.c tensor/tensor.c data/[a-z]*.c \
 *     $(pkg-config --cflags --libs hdf5) -lm -o fuzz_reader
 * Seed corpus and run (tests/fuzz/README.md):
 *   mkdir -p corpus && ./fuzz_reader -make_seeds=corpus   (writes small valid files)
 *   ASAN_OPTIONS=detect_leaks=0 ./fuzz_reader corpus -max_len=65536 -max_total_time=600
 * detect_leaks=0: HDF5 1.10 itself leaks a few KB after failing to open some
 * corrupted files; our own identifiers are checked with H5Fget_obj_count below.
 * lb_dataset_open reads each input first in a child process with a time limit, so a
 * crash or hang inside libhdf5 comes back as an error ("damaged or hostile HDF5 file");
 * what the fuzzer reports is a fault of this process: lookback's own.
 */
#include <hdf5.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "data/dataset.h"
#include "data/loader.h"
#include "data/tasks.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerInitialize(int *argc, char ***argv);

static char path[64];

/* Reads every batch of every split so accepted files are fully exercised. */
static void exercise(const lb_dataset *ds)
{
    static const char *const splits[3] = {"train", "val", "test"};
    for (int s = 0; s < 3; s++) {
        lb_loader *ld = lb_loader_new(ds, splits[s], 3, 1, 0, 1);
        lb_batch batch;
        while (ld && lb_loader_next(ld, &batch) == 1)
            if (batch.batch_size < 1)
                abort(); /* a real bug: the fuzzer must report it */
        lb_loader_free(ld);
    }
    char *text = NULL;
    size_t len = 0;
    FILE *out = open_memstream(&text, &len);
    if (out) {
        lb_dataset_print_info(ds, out);
        fclose(out);
    }
    free(text);
}

/* With -make_seeds=DIR, writes one small valid file per task into DIR and exits. */
static void make_seeds(const char *dir)
{
    for (int k = 0; k < LB_TASK_COUNT; k++) {
        lb_task_options o;
        char file[512];
        lb_task_options_default((lb_task_kind)k, &o);
        o.seq_len = k == LB_TASK_COPY ? 24 : 16;
        o.pairs = 2;
        o.variable_length = k % 2;
        o.n_train = 4;
        o.n_val = 2;
        o.n_test = 1;
        snprintf(file, sizeof file, "%s/seed_%s.h5", dir, lb_task_name((lb_task_kind)k));
        if (lb_task_generate(&o, file, NULL, NULL) != LB_OK)
            fprintf(stderr, "fuzz_reader: %s\n", lb_last_error());
    }
    exit(0);
}

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
    for (int i = 1; i < *argc; i++)
        if (strncmp((*argv)[i], "-make_seeds=", 12) == 0)
            make_seeds((*argv)[i] + 12);
    snprintf(path, sizeof path, "/tmp/lb_fuzz_reader_%d.h5", (int)getpid());
    return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    FILE *f = fopen(path, "wb");
    if (!f)
        return 0;
    if (size && fwrite(data, 1, size, f) != size) {
        fclose(f);
        return 0;
    }
    fclose(f);
    lb_clear_error();
    lb_dataset *ds = lb_dataset_open(path);
    if (ds)
        exercise(ds);
    else if (lb_last_error()[0] == '\0')
        abort(); /* an error must always come with a message */
    lb_dataset_close(ds);
    if (H5Fget_obj_count(H5F_OBJ_ALL, H5F_OBJ_ALL) != 0)
        abort(); /* an HDF5 identifier of ours leaked */
    remove(path);
    return 0;
}

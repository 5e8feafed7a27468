/* lookback: train attention models and the LSTM baseline on long-range tasks. */
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "tensor/blas.h"
#include "tensor/tensor.h"
#include "tensor/threads.h"
#include "cli/cli.h"

static void usage(FILE *out)
{
    fputs("usage: lookback <command> [options]\n"
          "\n"
          "commands:\n"
          "  demo        attention vs the LSTM on a clue from 7,000 events ago (the main job)\n"
          "  study       the source's table of alternatives, measured: every method on every task\n"
          "  compare     train any models on one file and compare them on evaluation files\n"
          "  data        generate a synthetic long-range task (HDF5); 'data info FILE' describes one\n"
          "  train       train one model on a data file\n"
          "  eval        evaluate a checkpoint on a data file\n"
          "  predict     write a checkpoint's outputs for every example of a data file (HDF5)\n"
          "  stream      read token ids one event at a time and print the model's prediction per event\n"
          "  gradcheck   check a model's gradients numerically (float64, central differences)\n"
          "\n"
          "'lookback <command> --help' lists a command's options; 'lookback --version' prints the version.\n"
          "\n"
          "Every HDF5 file named is read first in a child process: one that crashes or hangs the HDF5\n"
          "library is reported as damaged. LOOKBACK_HDF5_TIMEOUT=S sets that time limit (default 20 s\n"
          "plus 1 s per 20 MB). Outputs are only ever regular files; a full disk stops with one line.\n",
          out);
}

/* No option takes an empty value and no argument is empty (`--out ""` would name the
 * current folder's parent, `-o ""` no file): one usage error for every command. */
static int empty_argument(int argc, char **argv)
{
    for (int i = 2; i < argc; i++) {
        const char *eq = argv[i][0] == '-' ? strchr(argv[i], '=') : NULL;
        if (eq && eq[1] == '\0') {
            lb_cli_error(argv[1], 2, "%.*s needs a value, got an empty string", (int)(eq - argv[i]), argv[i]);
            return 1;
        }
        if (argv[i][0] != '\0')
            continue;
        if (argv[i - 1][0] == '-' && i > 2)
            lb_cli_error(argv[1], 2, "%s needs a value, got an empty string (an empty path names no file)",
                         argv[i - 1]);
        else
            lb_cli_error(argv[1], 2, "argument %d is an empty string (an empty path names no file)", i - 1);
        return 1;
    }
    return 0;
}

int main(int argc, char **argv)
{
    /* libgomp's idle threads spin less than its default unless the user chose
     * (tensor/threads.h): libgomp reads the setting at load, so once more with it set */
    if (lb_omp_wait_defaults())
        execv("/proc/self/exe", argv);
    static const struct {
        const char *name;
        int (*run)(int, char **);
        int mpi; /* runs under mpirun: one model on every rank, or whole runs per rank */
    } commands[] = {
        {"demo", lb_cli_demo, 0},   {"compare", lb_cli_compare, 1}, {"data", lb_cli_data, 0},
        {"train", lb_cli_train, 1}, {"eval", lb_cli_eval, 0},       {"gradcheck", lb_cli_gradcheck, 0},
        {"study", lb_cli_study, 1}, {"predict", lb_cli_predict, 0}, {"stream", lb_cli_stream, 0},
    };
    if (argc < 2) {
        usage(stderr);
        return 2;
    }
    if (strcmp(argv[1], "--version") == 0) {
        /* what a performance report needs: the BLAS, its kernels, threads, the fused kernels' build */
        lb_blas_report blas;
        lb_blas_info(&blas);
        char line[512];
        lb_blas_describe(&blas, line, sizeof line);
        printf("lookback %s\n%s\n", LOOKBACK_VERSION, line);
        return 0;
    }
    if (strcmp(argv[1], "--help") == 0 || strcmp(argv[1], "-h") == 0 || strcmp(argv[1], "help") == 0) {
        usage(stdout);
        return 0;
    }
    for (size_t i = 0; i < sizeof commands / sizeof commands[0]; i++)
        if (strcmp(argv[1], commands[i].name) == 0) {
            if (empty_argument(argc, argv))
                return 2;
            return commands[i].mpi ? lb_cli_distributed(commands[i].name, commands[i].run, argc - 1, argv + 1)
                                   : commands[i].run(argc - 1, argv + 1);
        }
    fprintf(stderr, "lookback: unknown command '%s'\n", argv[1]);
    usage(stderr);
    return 2;
}

/* Under LeakSanitizer, ignore what the plotting and HDF5 libraries keep until exit. */
const char *__lsan_default_suppressions(void);
const char *__lsan_default_suppressions(void)
{
    return "leak:libhdf5\nleak:libfontconfig\nleak:libcairo\nleak:libltdl\nleak:libplplot\nleak:libQt5\n"
           "leak:libmpi\nleak:libopen-pal\nleak:libopen-rte\nleak:libpmix\nleak:libhwloc\nleak:libevent\n";
}

/* lookback: train attention models and the LSTM baseline on long-range tasks. */
#include <errno.h>
#include <stdarg.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "tensor/blas.h"
#include "tensor/isa.h"
#include "tensor/tensor.h"
#include "tensor/threads.h"
#include "cli/cli.h"
#include "lab/run_config.h"
#include "cli/preinit.h"
#include "data/h5io.h"

/* A usage error of the command word itself: one printable line, exit 2. */
__attribute__((format(printf, 1, 2))) static int word_error(const char *fmt, ...)
{
    char raw[1024], line[4096];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(raw, sizeof raw, fmt, ap);
    va_end(ap);
    lb_cli_printable(raw, line, sizeof line);
    fprintf(stderr, "lookback: %s\n", line);
    return 2;
}

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
          "  generate    generate text with a language model trained on a text corpus\n"
          "  attention   where each head looks on one example: heatmaps, top keys, weights (HDF5)\n"
          "  tokenizer   'tokenizer export': a bpe or unigram corpus's SentencePiece model as a .model file\n"
          "  gradcheck   check a model's gradients numerically (float64, central differences)\n"
          "\n"
          "'lookback <command> --help' (or 'lookback help <command>') lists a command's options;\n"
          "'lookback --version' prints the version. An option given twice is a usage error (exit 2).\n"
          "\n"
          "Every HDF5 file named is read first in a child process: one that crashes or hangs the HDF5\n"
          "library is reported as damaged. LOOKBACK_HDF5_TIMEOUT=S sets that time limit (1 to 86400\n"
          "s; default 20 s plus 1 s per 20 MB). Outputs are only ever regular files, never one of the\n"
          "command's own inputs (whatever the path's spelling, even with --force), and one writer at a\n"
          "time (FILE.lock); a full disk, an unwritable standard output or a lack of memory (ulimit\n"
          "-v) stops with one line and exit 1.\n",
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
            lb_cli_error(argv[1], 2, "%s needs a value, got an empty string%s", argv[i - 1],
                         lb_cli_option_takes_path(argv[i - 1]) ? " (an empty path names no file)" : "");
        else
            lb_cli_error(argv[1], 2, "argument %d is an empty string (an empty path names no file)", i - 1);
        return 1;
    }
    return 0;
}

/* Standard output is checked once, after the command: a write that failed (a full disk,
 * /dev/full, a closed terminal) is an error, never success. A closed pipe ends the
 * process with SIGPIPE (exit 141) before this is reached. */
static int check_stdout(const char *command, int code)
{
    if (fflush(stdout) == 0 && !ferror(stdout))
        return code;
    int err = errno;
    if (code == 0 || code == 2) {
        fprintf(stderr, "lookback %s: cannot write to standard output: %s\n", command,
                err ? lb_system_error(err) : "write error");
        return 1;
    }
    return code; /* the command already failed and said why */
}

int main(int argc, char **argv)
{
    lb_cli_restore_environment();
    /* libgomp's idle threads spin less than its default unless the user chose
     * (tensor/threads.h): libgomp reads the setting at load, so once more with it set */
    if (lb_omp_wait_defaults())
        execv("/proc/self/exe", argv);
    /* HDF5 prints its whole error stack by default; lookback reports each failure in one
     * line: its printing stays off for the whole process. */
    static lb_h5_quiet hdf5_printer;
    lb_h5_quiet_begin(&hdf5_printer);
    /* Over a file-size limit (ulimit -f) a write fails with EFBIG, which the error line
     * names, instead of SIGXFSZ ending the process with a core dump. */
    signal(SIGXFSZ, SIG_IGN);
    static const struct {
        const char *name;
        int (*run)(int, char **);
        int mpi; /* runs under mpirun: one model on every rank, or whole runs per rank */
    } commands[] = {
        {"demo", lb_cli_demo, 0},   {"compare", lb_cli_compare, 1}, {"data", lb_cli_data, 0},
        {"train", lb_cli_train, 1}, {"eval", lb_cli_eval, 0},       {"gradcheck", lb_cli_gradcheck, 0},
        {"study", lb_cli_study, 1}, {"predict", lb_cli_predict, 0}, {"stream", lb_cli_stream, 0},
        {"generate", lb_cli_generate, 0}, {"tokenizer", lb_cli_tokenizer, 0}, {"attention", lb_cli_attention, 0},
    };
    if (argc < 2) {
        usage(stderr);
        return 2;
    }
    if ((strcmp(argv[1], "--version") == 0 || strcmp(argv[1], "--help") == 0 || strcmp(argv[1], "-h") == 0) &&
        argc > 2) {
        return word_error("%s takes no argument, got '%s' (see lookback --help)", argv[1], argv[2]);
    }
    /* "lookback help COMMAND" is "lookback COMMAND --help". */
    char help_flag[] = "--help", *help_argv[] = {argv[0], argc > 2 ? argv[2] : NULL, help_flag, NULL};
    if (strcmp(argv[1], "help") == 0 && argc > 3) {
        return word_error("help takes one command, got '%s' and '%s' (see lookback --help)", argv[2], argv[3]);
    }
    if (strcmp(argv[1], "help") == 0 && argc == 3) {
        argc = 3;
        argv = help_argv;
    }
    if (strcmp(argv[1], "--version") == 0) {
        /* what a performance report needs: the BLAS, its kernels, threads, the fused kernels' build */
        lb_blas_report blas;
        lb_blas_info(&blas);
        char line[512];
        lb_blas_describe(&blas, line, sizeof line);
        printf("lookback %s\n%s\n", LOOKBACK_VERSION, line);
        return check_stdout("--version", 0);
    }
    if (strcmp(argv[1], "--help") == 0 || strcmp(argv[1], "-h") == 0 || strcmp(argv[1], "help") == 0) {
        usage(stdout);
        return check_stdout("--help", 0);
    }
    for (size_t i = 0; i < sizeof commands / sizeof commands[0]; i++)
        if (strcmp(argv[1], commands[i].name) == 0) {
            if (empty_argument(argc, argv))
                return 2;
            /* an option given twice is refused by every command, before it starts */
            if (lb_cli_check_repeats(argv[1], argc - 1, argv + 1) != LB_OK)
                return lb_cli_error(argv[1], 2, "%s (see lookback %s --help)", lb_last_error(), argv[1]);
            /* a forced instruction-set build this CPU cannot run (tensor/isa.h) */
            if (lb_isa_env_check() != LB_OK)
                return lb_cli_error(argv[1], 2, "%s", lb_last_error());
            /* the time limit of every HDF5 read: a bad value is said once, before any file is read */
            if (lb_h5_timeout_check() != LB_OK)
                return lb_cli_error(argv[1], 2, "%s", lb_last_error());
            int code = lb_cli_run_command(commands[i].name, commands[i].run, commands[i].mpi, argc - 1, argv + 1);
            return check_stdout(commands[i].name, code);
        }
    return word_error("unknown command '%s' (see lookback --help)", argv[1]);
}

/* Under LeakSanitizer, ignore what the plotting and HDF5 libraries keep until exit. */
const char *__lsan_default_suppressions(void);
const char *__lsan_default_suppressions(void)
{
    return "leak:libhdf5\nleak:libfontconfig\nleak:libcairo\nleak:libltdl\nleak:libplplot\nleak:libQt5\n"
           "leak:libmpi\nleak:libopen-pal\nleak:libopen-rte\nleak:libpmix\nleak:libhwloc\nleak:libevent\n";
}

/* lookback: train attention models and the LSTM baseline on long-range tasks. */
#include <stdio.h>
#include <string.h>

#include "tensor/tensor.h"
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
          "  gradcheck   check a model's gradients numerically (float64, central differences)\n"
          "\n"
          "'lookback <command> --help' lists a command's options; 'lookback --version' prints the version.\n",
          out);
}

int main(int argc, char **argv)
{
    lb_keep_freed_memory(); /* steps reuse their memory instead of faulting it in anew */
    static const struct {
        const char *name;
        int (*run)(int, char **);
    } commands[] = {
        {"demo", lb_cli_demo},   {"compare", lb_cli_compare}, {"data", lb_cli_data},
        {"train", lb_cli_train}, {"eval", lb_cli_eval},       {"gradcheck", lb_cli_gradcheck},
        {"study", lb_cli_study},
    };
    if (argc < 2) {
        usage(stderr);
        return 2;
    }
    if (strcmp(argv[1], "--version") == 0) {
        printf("lookback %s\n", LOOKBACK_VERSION);
        return 0;
    }
    if (strcmp(argv[1], "--help") == 0 || strcmp(argv[1], "-h") == 0 || strcmp(argv[1], "help") == 0) {
        usage(stdout);
        return 0;
    }
    for (size_t i = 0; i < sizeof commands / sizeof commands[0]; i++)
        if (strcmp(argv[1], commands[i].name) == 0)
            return commands[i].run(argc - 1, argv + 1);
    fprintf(stderr, "lookback: unknown command '%s'\n", argv[1]);
    usage(stderr);
    return 2;
}

/* Under LeakSanitizer, ignore what the plotting and HDF5 libraries keep until exit. */
const char *__lsan_default_suppressions(void);
const char *__lsan_default_suppressions(void)
{
    return "leak:libhdf5\nleak:libfontconfig\nleak:libcairo\nleak:libltdl\nleak:libplplot\nleak:libQt5\n";
}

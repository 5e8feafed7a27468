/* lookback tokenizer export: the SentencePiece model stored in a bpe or unigram corpus,
 * or in a checkpoint trained on one, written back out as a .model file (data/text.h). */
#include <getopt.h>
#include <string.h>

#include "cli/cli.h"
#include "data/output.h"
#include "data/text.h"

static void tokenizer_usage(FILE *out)
{
    fputs("usage: lookback tokenizer export (--checkpoint CK.h5 | --corpus CORPUS.h5) -o FILE.model [--force]\n"
          "\n"
          "Writes the SentencePiece tokenizer a bpe or unigram corpus holds (lookback data text --vocab\n"
          "bpe|unigram, or --tokenizer), or that a checkpoint trained on such a corpus holds, as a .model\n"
          "file: the same bytes, loadable by spm_encode, spm_decode and Python's sentencepiece.\n"
          "\n"
          "  --checkpoint CK.h5   a checkpoint of a model trained on a bpe or unigram corpus\n"
          "  --corpus CORPUS.h5   a bpe or unigram corpus\n"
          "  -o, --output FILE    the .model file to write (required)\n"
          "  --force              replace FILE if it exists (never one of the inputs)\n"
          "  -h, --help           this help\n",
          out);
}

int lb_cli_tokenizer(int argc, char **argv)
{
    const char *cmd = "tokenizer export";
    if (argc >= 2 && (strcmp(argv[1], "--help") == 0 || strcmp(argv[1], "-h") == 0)) {
        tokenizer_usage(stdout);
        return 0;
    }
    if (argc < 2 || strcmp(argv[1], "export") != 0)
        return lb_cli_error("tokenizer", 2, "%s%s%s: the one subcommand is export (lookback tokenizer export --checkpoint "
                            "CK.h5 -o FILE.model)", argc < 2 ? "missing the subcommand" : "unknown subcommand '",
                            argc < 2 ? "" : argv[1], argc < 2 ? "" : "'");
    argc--;
    argv++;
    const char *checkpoint = NULL, *corpus = NULL, *output = NULL;
    int force = 0;
    static const struct option opts[] = {
        {"checkpoint", required_argument, NULL, 'c'}, {"corpus", required_argument, NULL, 'C'},
        {"output", required_argument, NULL, 'o'},     {"force", no_argument, NULL, 'f'},
        {"help", no_argument, NULL, 'h'},             {NULL, 0, NULL, 0},
    };
    optind = 1;
    opterr = 0;
    int c;
    while ((c = getopt_long(argc, argv, ":o:h", opts, NULL)) != -1) {
        switch (c) {
        case 'c': checkpoint = optarg; break;
        case 'C': corpus = optarg; break;
        case 'o': output = optarg; break;
        case 'f': force = 1; break;
        case 'h': tokenizer_usage(stdout); return 0;
        default: return lb_cli_bad_option(cmd, c, argv);
        }
    }
    if (optind < argc)
        return lb_cli_error(cmd, 2, "unexpected argument '%s'", argv[optind]);
    if (!checkpoint == !corpus)
        return lb_cli_error(cmd, 2, "%s", checkpoint ? "give --checkpoint or --corpus, not both"
                                                     : "missing the file that holds the tokenizer: --checkpoint CK.h5 or "
                                                       "--corpus CORPUS.h5");
    if (!output || !*output)
        return lb_cli_error(cmd, 2, "missing the output file: add -o FILE.model");
    const char *from = checkpoint ? checkpoint : corpus;
    if (lb_output_protect(from, checkpoint ? "the --checkpoint file" : "the --corpus file") != LB_OK ||
        lb_output_check(output, "tokenizer model") != LB_OK)
        return lb_cli_fail(cmd);
    if (lb_files_exists(output) && !force)
        return lb_cli_error(cmd, 1, "%s already exists; use --force to overwrite it", output);
    lb_vocab *v = lb_vocab_read(from);
    if (!v)
        return lb_cli_fail(cmd);
    lb_status st = lb_vocab_write_sentencepiece(v, from, output);
    lb_vocab_free(v);
    if (st != LB_OK)
        return lb_cli_fail(cmd);
    return 0;
}

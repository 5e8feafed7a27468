/* `lookback data`: generate a synthetic long-range task into an HDF5 file, and
 * `lookback data info FILE`: validate a data file and describe it.
 *
 * Every generator option of data/tasks.h is accepted as `--name value` (or
 * `--name=value`; hyphens or underscores), forwarded to lb_task_set_option, which
 * checks the name against the chosen task and the value against the option's range,
 * and names the option when either is wrong. `--train/--val/--test N` are short for
 * `--n-train/--n-val/--n-test N`. A flag option given without a value means 1.
 *
 * Guards: a file whose splits hold more than 16 GiB before compression
 * (lb_task_raw_bytes: also the memory needed to read it back) is refused unless
 * --allow-large is given, and a note is printed when the output folder has less
 * free space than that (lb_task_check_size). While the file is written, SIGINT, SIGTERM
 * and SIGHUP remove FILE.h5.tmp and the writer's lock file FILE.h5.lock (the lock file
 * only once generation has reported progress, which it does only while holding the
 * lock) and then end the process by the same signal (exit status 130 for Ctrl-C, 143
 * for SIGTERM in a shell; lb_output_cleanup_arm, data/output.h).
 */
#include <ctype.h>
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <errno.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "data/dataset.h"
#include "data/output.h"
#include "data/tasks.h"
#include "data/text.h"
#include "cli/cli.h"
#include "lab/run_config.h"

static void data_usage(FILE *out)
{
    char tasks[256];
    fprintf(out, "usage: lookback data [--task TASK] [--seq-len T] [task options] [--train N --val N --test N]\n"
          "                     [--seed S] -o FILE.h5 [--force] [--allow-large] [--quiet]\n"
          "       lookback data info FILE.h5\n"
          "       lookback data csv FILE.csv -o FILE.h5 --label COL --features COLS ...  (your own event\n"
          "                     log: lookback data csv --help, docs/events.md)\n"
          "       lookback data text FILE... -o CORPUS.h5 [--vocab char|byte] ...   (your own text: see\n"
          "                     `lookback data text --help`)\n"
          "\n"
          "Generates the train, val and test splits of a synthetic task into FILE.h5 (format in\n"
          "docs/data.md); the file is a pure function of the options, seed included. 'data info'\n"
          "validates a file completely and describes it (exit 1 on a bad file).\n"
          "\n"
          "  --task TASK        %s (default: spike)\n"
          "  -o, --output FILE  the file to write (required)\n"
          "  --force            overwrite FILE if it exists (it is replaced only once complete)\n"
          "  --allow-large      allow splits of more than 16 GiB before compression (reading\n"
          "                     them back needs as much memory)\n"
          "  --quiet            no progress display\n"
          "  --train/--val/--test N   the same as --n-train/--n-val/--n-test N\n"
          "  -h, --help         this help\n"
          "\n",
          lb_task_names_text(tasks, sizeof tasks));
    lb_task_print_help(out);
}

/* An option name rather than a value: "-x" or "--x", but not "-5" or "-". */
static int is_option(const char *arg)
{
    return arg[0] == '-' && arg[1] != '\0' && !isdigit((unsigned char)arg[1]) && arg[1] != '.';
}

/* Generation progress: silent for a file written within a second, then a live bar
 * (a terminal) or a line every 10 seconds. */
typedef struct data_progress {
    lb_progress bar;
    int enabled, shown;
} data_progress;

static void on_progress(int64_t done, int64_t total, void *user)
{
    data_progress *p = user;
    lb_output_cleanup_locked(); /* generation runs only while this process holds FILE.h5.lock */
    if (!p->enabled)
        return;
    if (!p->shown) {
        if (lb_clock_wall() - p->bar.start < 1.0)
            return;
        p->shown = 1;
        p->bar.total = total;
    }
    lb_progress_update(&p->bar, done, NULL);
}

static int data_info(int argc, char **argv)
{
    const char *path = NULL;
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--help") == 0 || strcmp(argv[i], "-h") == 0) {
            fputs("usage: lookback data info FILE.h5\n"
                  "Validates every dataset and attribute of FILE.h5 and prints the task, options,\n"
                  "vocabulary and chance level, shapes, split sizes, distances and label histogram.\n",
                  stdout);
            return 0;
        }
        if (argv[i][0] == '-' && argv[i][1] != '\0')
            return lb_cli_error("data info", 2, "unknown option '%s' (usage: lookback data info FILE.h5)", argv[i]);
        if (path)
            return lb_cli_error("data info", 2, "one file at a time: got '%s' and '%s'", path, argv[i]);
        path = argv[i];
    }
    if (!path)
        return lb_cli_error("data info", 2, "missing the file to describe (usage: lookback data info FILE.h5)");
    lb_dataset *ds = lb_dataset_open(path);
    if (!ds)
        return lb_cli_fail("data info");
    lb_status st = lb_dataset_print_info(ds, stdout);
    lb_dataset_close(ds);
    if (st == LB_OK && fflush(stdout) != 0)
        st = lb_error(LB_ERR_IO, "cannot write to standard output: %s", lb_system_error(errno));
    return st == LB_OK ? 0 : lb_cli_fail("data info");
}

static void data_text_usage(FILE *out)
{
    fprintf(out,
            "usage: lookback data text FILE... -o CORPUS.h5 [--vocab char|byte] [--val-fraction F]\n"
            "                          [--test-fraction F] [--unk map|error] [--max-vocab N] [--force] [--quiet]\n"
            "       lookback data text FILE... -o CORPUS.h5 --vocab bpe|unigram [--vocab-size N]\n"
            "                          [--character-coverage C] [--seed S] ...\n"
            "       lookback data text FILE... -o CORPUS.h5 --tokenizer FILE.model ...\n"
            "       lookback data text FILE... -o CORPUS.h5 --documents lines|blank-lines [--context N]\n"
            "                          [--short drop|truncate|refuse] [--seed S] ...\n"
            "       lookback data text FILE... -o CORPUS.h5 --like CORPUS_OR_CHECKPOINT.h5 [--unk map|error] ...\n"
            "\n"
            "Imports text (- = standard input) as a character-level corpus: the files are concatenated\n"
            "in order and split contiguously into train (first), val and test (last); each split is one\n"
            "token stream, and the window length is chosen when training (train --seq-len). Format and\n"
            "policies: docs/text.md.\n"
            "\n"
            "  -o, --output FILE    the corpus to write (required; written whole or not at all)\n"
            "  --vocab char|byte    char (default): the distinct Unicode code points of the training\n"
            "                       text, in code-point order (the text must be valid UTF-8);\n"
            "                       byte: the 256 byte values (any bytes; scores are bits per byte)\n"
            "  --vocab bpe|unigram  subword tokens: a SentencePiece tokenizer of that model type trained\n"
            "                       on the training split only, with byte fallback (every text encodes,\n"
            "                       and decodes back byte for byte); stored in the corpus and in every\n"
            "                       checkpoint trained on it\n"
            "  --vocab-size N       bpe, unigram: the pieces, in [%d, %d] (default %d)\n"
            "  --character-coverage C  bpe, unigram: the share of the training characters that get a\n"
            "                       piece of their own, in (0, 1] (default 0.9995); the rest are bytes\n"
            "  --seed S             bpe, unigram: SentencePiece's random seed (default 1)\n"
            "  --tokenizer F.model  a SentencePiece bpe or unigram model made elsewhere (spm_train, a\n"
            "                       model's published tokenizer.model), used as it is\n"
            "  --documents lines|blank-lines  one document per line, or per paragraph (lines between\n"
            "                       blank lines): each is encoded on its own, with one separator symbol\n"
            "                       before and after it (U+0003; </s> for bpe and unigram); val and test\n"
            "                       are documents drawn at random (--seed), not the end of the text\n"
            "  --context N          documents: the most tokens a document may take with its two\n"
            "                       separators (the context you will train with); default any\n"
            "  --short drop|truncate|refuse  documents: a longer one is dropped (default), cut to\n"
            "                       fit, or the text refused\n"
            "  --val-fraction F     share of the whole text for val, in [0, 0.5] (default 0.1)\n"
            "  --test-fraction F    share of the whole text for test, taken from the end (default 0.05);\n"
            "                       train keeps the rest (85 %% by default)\n"
            "  --unk map|error      val/test characters absent from the training text: map (default)\n"
            "                       to one <unk> id (decoded as U+FFFD), or error naming the first\n"
            "  --max-vocab N        refuse more distinct training characters than N (default %d;\n"
            "                       --vocab byte takes any text)\n"
            "  --like FILE          import with the vocabulary of a corpus or of a checkpoint trained on\n"
            "                       one, exactly (same symbols and ids), so that model can eval and\n"
            "                       predict on this text; a character outside it, in any split, is\n"
            "                       <unk> (--unk map, when that vocabulary has <unk>) or refused\n"
            "                       (--unk error); --vocab and --max-vocab do not apply\n"
            "  --force              replace CORPUS.h5 if it exists (never one of the inputs)\n"
            "  --quiet              no summary on standard output\n"
            "  -h, --help           this help\n",
            LB_TEXT_SUBWORD_VOCAB_MIN, LB_TEXT_SUBWORD_VOCAB_MAX, LB_TEXT_SUBWORD_VOCAB_DEFAULT, LB_TEXT_MAX_VOCAB_DEFAULT);
}

/* `lookback data text FILE... -o CORPUS.h5`: lb_text_import with the command's options. */
static int data_text(int argc, char **argv)
{
    const char *cmd = "data text", *output = NULL, *like = NULL, *vocab_option = NULL, *tokenizer = NULL;
    const char *subword_option = NULL; /* the last option that applies only to a trained tokenizer */
    const char *documents_option = NULL; /* the last option that applies only with --documents */
    lb_text_options opt;
    lb_text_options_default(&opt);
    int force = 0, quiet = 0;
    static const struct option opts[] = {
        {"output", required_argument, NULL, 'o'},        {"vocab", required_argument, NULL, 'v'},
        {"val-fraction", required_argument, NULL, 'V'},  {"test-fraction", required_argument, NULL, 'T'},
        {"unk", required_argument, NULL, 'u'},           {"max-vocab", required_argument, NULL, 'm'},
        {"force", no_argument, NULL, 'f'},               {"quiet", no_argument, NULL, 'q'},
        {"like", required_argument, NULL, 'L'},          {"help", no_argument, NULL, 'h'},
        {"vocab-size", required_argument, NULL, 'N'},    {"character-coverage", required_argument, NULL, 'C'},
        {"seed", required_argument, NULL, 'S'},          {"tokenizer", required_argument, NULL, 'K'},
        {"documents", required_argument, NULL, 'D'},     {"context", required_argument, NULL, 'X'},
        {"short", required_argument, NULL, 's'},
        {NULL, 0, NULL, 0},
    };
    optind = 1;
    opterr = 0;
    int c;
    lb_status st = LB_OK;
    while ((c = getopt_long(argc, argv, ":o:qh", opts, NULL)) != -1 && st == LB_OK) {
        switch (c) {
        case 'o': output = optarg; break;
        case 'v': st = lb_vocab_kind_parse(optarg, &opt.vocab); vocab_option = "--vocab"; break;
        case 'L': like = optarg; break;
        case 'V': st = lb_option_real("--val-fraction", optarg, 0, 0.5, &opt.val_fraction); break;
        case 'T': st = lb_option_real("--test-fraction", optarg, 0, 0.5, &opt.test_fraction); break;
        case 'u': st = lb_unk_policy_parse(optarg, &opt.unk); break;
        case 'm':
            st = lb_option_int("--max-vocab", optarg, 2, 0x110000, &opt.max_vocab);
            vocab_option = vocab_option ? vocab_option : "--max-vocab";
            break;
        case 'N':
            st = lb_option_int("--vocab-size", optarg, LB_TEXT_SUBWORD_VOCAB_MIN, LB_TEXT_SUBWORD_VOCAB_MAX, &opt.vocab_size);
            subword_option = "--vocab-size";
            break;
        case 'C':
            st = lb_option_real("--character-coverage", optarg, 1e-6, 1, &opt.character_coverage);
            subword_option = "--character-coverage";
            break;
        case 'S': {
            int64_t seed = 0;
            st = lb_option_int("--seed", optarg, 0, UINT32_MAX, &seed);
            opt.seed = (uint32_t)seed;
            subword_option = "--seed";
            break;
        }
        case 'K': tokenizer = optarg; break;
        case 'D': st = lb_documents_kind_parse(optarg, &opt.documents); break;
        case 'X':
            st = lb_option_int("--context", optarg, 3, 1 << 24, &opt.context);
            documents_option = "--context";
            break;
        case 's':
            st = lb_long_document_parse(optarg, &opt.long_documents);
            documents_option = "--short";
            break;
        case 'f': force = 1; break;
        case 'q': quiet = 1; break;
        case 'h': data_text_usage(stdout); return 0;
        default: return lb_cli_bad_option(cmd, c, argv);
        }
        if (st != LB_OK && (c == 'v' || c == 'u' || c == 'D' || c == 's'))
            lb_error_context("%s", c == 'v' ? "--vocab" : c == 'u' ? "--unk" : c == 'D' ? "--documents" : "--short");
    }
    if (st != LB_OK)
        return lb_cli_error(cmd, 2, "%s", lb_last_error());
    int n_inputs = argc - optind;
    if (n_inputs < 1)
        return lb_cli_error(cmd, 2, "missing the text to import (usage: lookback data text FILE... -o CORPUS.h5; - reads "
                                    "standard input)");
    if (!output || !*output)
        return lb_cli_error(cmd, 2, "missing the output file: add -o CORPUS.h5");
    if (like && !like[0])
        return lb_cli_error(cmd, 2, "--like is empty: name a corpus or a checkpoint");
    if (like && vocab_option)
        return lb_cli_error(cmd, 2, "%s does not apply with --like: the vocabulary is %s's, exactly (drop %s)",
                            vocab_option, like, vocab_option);
    if (subword_option && strcmp(subword_option, "--seed") == 0 && opt.documents)
        subword_option = NULL; /* --seed draws the documents' split too */
    if (tokenizer && !tokenizer[0])
        return lb_cli_error(cmd, 2, "--tokenizer is empty: name a SentencePiece .model file");
    if (tokenizer && like)
        return lb_cli_error(cmd, 2, "--tokenizer and --like both name the vocabulary: give one");
    if (tokenizer && vocab_option)
        return lb_cli_error(cmd, 2, "%s does not apply with --tokenizer: the vocabulary is the pieces of %s (drop %s)",
                            vocab_option, tokenizer, vocab_option);
    if (subword_option && (tokenizer || like))
        return lb_cli_error(cmd, 2, "%s trains a tokenizer; with %s the tokenizer is %s's as it is (drop %s)",
                            subword_option, tokenizer ? "--tokenizer" : "--like", tokenizer ? tokenizer : like,
                            subword_option);
    if (documents_option && !opt.documents)
        return lb_cli_error(cmd, 2, "%s applies with --documents lines or blank-lines", documents_option);
    if (subword_option && !lb_vocab_kind_is_subword(opt.vocab))
        return lb_cli_error(cmd, 2, "%s applies to --vocab bpe or unigram, not %s", subword_option,
                            lb_vocab_kind_name(opt.vocab));
    if (like && lb_output_protect(like, "the --like file") != LB_OK)
        return lb_cli_fail(cmd);
    if (lb_output_check(output, "text corpus") != LB_OK)
        return lb_cli_fail(cmd);
    if (lb_files_exists(output) && !force)
        return lb_cli_error(cmd, 1, "%s already exists; use --force to overwrite it", output);
    lb_vocab *like_vocab = NULL;
    if (like && !(like_vocab = lb_vocab_read(like)))
        return lb_cli_fail(cmd);
    if (tokenizer && (lb_output_protect(tokenizer, "the --tokenizer file") != LB_OK ||
                      !(like_vocab = lb_vocab_read_sentencepiece(tokenizer))))
        return lb_cli_fail(cmd);
    like = like ? like : tokenizer;
    opt.like = like_vocab;
    opt.like_name = like;
    if (like_vocab)
        opt.vocab = lb_vocab_get_kind(like_vocab);
    double start = lb_clock_wall();
    lb_text_summary sum;
    lb_output_cleanup_arm(output);
    lb_output_cleanup_locked();
    st = lb_text_import(&opt, (const char *const *)(argv + optind), n_inputs, output, &sum);
    lb_output_cleanup_disarm();
    lb_vocab_free(like_vocab);
    if (st != LB_OK)
        return lb_cli_fail(cmd);
    if (sum.unknown > 0 && lb_vocab_kind_is_subword(opt.vocab))
        fprintf(stderr, "lookback %s: note: %lld tokens are <unk>: the tokenizer has no byte fallback for them\n", cmd,
                (long long)sum.unknown);
    else if (sum.unknown > 0 && like)
        fprintf(stderr, "lookback %s: note: %lld characters are not in the vocabulary of %s and are <unk> (the first: "
                        "U+%04X at %s)\n",
                cmd, (long long)sum.unknown, like, (unsigned)sum.first_unknown, sum.first_unknown_where);
    else if (sum.unknown > 0)
        fprintf(stderr, "lookback %s: note: %lld characters of val/test are not in the training text and are <unk> "
                        "(the first: U+%04X at %s)\n",
                cmd, (long long)sum.unknown, (unsigned)sum.first_unknown, sum.first_unknown_where);
    if (!quiet) {
        const char *unit = opt.vocab == LB_VOCAB_CHAR ? "characters" : opt.vocab == LB_VOCAB_BYTE ? "bytes" : "tokens";
        printf("wrote %s: %s vocabulary of %lld symbols%s%s; %s train %lld, val %lld, test %lld (%lld bytes read, "
               "%.1f s)\n", output, lb_vocab_kind_name(opt.vocab), (long long)sum.vocab_size, like ? ", that of " : "",
               like ? like : "", unit, (long long)sum.tokens[0],
               (long long)sum.tokens[1], (long long)sum.tokens[2], (long long)sum.source_bytes, lb_clock_wall() - start);
        if (opt.documents)
            printf("documents: train %lld, val %lld, test %lld%s", (long long)sum.documents[0], (long long)sum.documents[1],
                   (long long)sum.documents[2], sum.documents_dropped || sum.documents_truncated ? "" : "\n");
        if (opt.documents && (sum.documents_dropped || sum.documents_truncated))
            printf(" (longer than --context %lld: %lld %s)\n", (long long)opt.context,
                   (long long)(sum.documents_dropped + sum.documents_truncated),
                   sum.documents_dropped ? "dropped" : "truncated");
        if (lb_vocab_kind_is_subword(opt.vocab))
            printf("tokenizer: %.3f bytes per token on train (%lld bytes); %s (%.1f s)\n",
                   sum.tokens[0] > 0 ? (double)sum.split_bytes[0] / (double)sum.tokens[0] : 0.0,
                   (long long)sum.split_bytes[0], like ? "the given one" : "trained on train only", sum.tokenizer_seconds);
    }
    return 0;
}

/* The command line of data (generation). */
typedef struct data_args {
    const char *task_name, *output;
    int force, allow_large, quiet, n_pairs;
    const char **keys, **values; /* the task's options as given, applied once the task is known */
    char **owned;                /* keys split from "--key=value" */
    int n_owned;
} data_args;

/* Splits "--key=value"; otherwise the value is the next argument unless that is another
 * option (then it is absent, which a flag accepts). 0 or the exit code. */
static int data_option(data_args *a, int argc, char **argv, int *i)
{
    const char *arg = argv[*i];
    const char *eq = strchr(arg, '=');
    const char *key = arg, *value = NULL;
    if (eq && arg[1] == '-') {
        char *k = strndup(arg, (size_t)(eq - arg));
        if (!k)
            return lb_cli_error("data", 1, "out of memory");
        a->owned[a->n_owned++] = k;
        key = k;
        value = eq + 1;
    } else if (*i + 1 < argc && !is_option(argv[*i + 1])) {
        value = argv[++*i];
    }
    if (strcmp(key, "-o") == 0 || strcmp(key, "--output") == 0) {
        if (!value || !*value)
            return lb_cli_error("data", 2, "%s needs a file name", key);
        a->output = value;
    } else if (strcmp(key, "--task") == 0) {
        char tasks[256];
        if (!value)
            return lb_cli_error("data", 2, "--task needs a value (%s)", lb_task_names_text(tasks, sizeof tasks));
        a->task_name = value;
    } else if (key[1] != '-') {
        return lb_cli_error("data", 2, "unknown option '%s' (see `lookback data --help`)", key);
    } else {
        a->keys[a->n_pairs] = key;
        a->values[a->n_pairs++] = value;
    }
    return 0;
}

/* Reads the arguments into a; -1 to go on, else the exit code (printed; 0 after --help). */
static int data_parse(int argc, char **argv, data_args *a)
{
    for (int i = 1; i < argc; i++) {
        const char *arg = argv[i];
        int code = 0;
        if (strcmp(arg, "--help") == 0 || strcmp(arg, "-h") == 0) {
            data_usage(stdout);
            return 0;
        }
        if (strcmp(arg, "--force") == 0)
            a->force = 1;
        else if (strcmp(arg, "--allow-large") == 0)
            a->allow_large = 1;
        else if (strcmp(arg, "--quiet") == 0 || strcmp(arg, "-q") == 0)
            a->quiet = 1;
        else if (arg[0] != '-' || arg[1] == '\0')
            return lb_cli_error("data", 2, "unexpected argument '%s' (options are --name value; the output file "
                                           "goes after -o)", arg);
        else if ((code = data_option(a, argc, argv, &i)) != 0)
            return code;
    }
    return -1;
}

/* The task's options: its defaults, then those given. -1 to go on, else the exit code. */
static int task_options(const data_args *a, lb_task_kind *task, lb_task_options *opt)
{
    if (lb_task_parse_name(a->task_name, task) != LB_OK)
        return lb_cli_error("data", 2, "--task: %s", lb_last_error());
    lb_task_options_default(*task, opt);
    for (int p = 0; p < a->n_pairs; p++) {
        if (!a->values[p]) {
            /* No value: only a flag may stand alone, meaning "on". */
            lb_task_options probe = *opt;
            if (lb_task_set_option(&probe, a->keys[p], "true") == LB_OK) {
                *opt = probe;
                continue;
            }
            lb_task_set_option(&probe, a->keys[p], NULL); /* "needs a value", or names the unknown option */
            return lb_cli_error("data", 2, "%s", lb_last_error());
        }
        if (lb_task_set_option(opt, a->keys[p], a->values[p]) != LB_OK)
            return lb_cli_error("data", 2, "%s", lb_last_error());
    }
    if (lb_task_options_resolve(opt) != LB_OK)
        return lb_cli_error("data", 2, "%s", lb_last_error());
    return -1;
}

/* Writes the file (FILE.h5.tmp and its lock removed if a signal stops it) and says what
 * it holds. The exit code. */
static int generate(const data_args *a, lb_task_kind task, const lb_task_options *opt)
{
    const char *output = a->output;
    data_progress progress = {.enabled = !a->quiet};
    lb_progress_begin(&progress.bar, "generate", opt->n_train + opt->n_val + opt->n_test);
    double start = lb_clock_wall();
    lb_output_cleanup_arm(output);
    lb_status st = lb_task_generate(opt, output, on_progress, &progress);
    lb_output_cleanup_disarm();
    if (progress.shown)
        lb_progress_end(&progress.bar);
    if (st != LB_OK)
        return lb_cli_fail("data");
    struct stat sb;
    double megabytes = stat(output, &sb) == 0 ? (double)sb.st_size / 1e6 : 0;
    printf("wrote %s: task %s, seq_len %lld, train %lld, val %lld, test %lld (%.2f MB in %.1f s)\n", output,
           lb_task_name(task), (long long)opt->seq_len, (long long)opt->n_train, (long long)opt->n_val,
           (long long)opt->n_test, megabytes, lb_clock_wall() - start);
    fputs("options: ", stdout);
    lb_task_print_options(opt, " ", stdout);
    fputc('\n', stdout);
    return 0;
}

int lb_cli_data(int argc, char **argv)
{
    if (argc >= 2 && strcmp(argv[1], "info") == 0)
        return data_info(argc - 1, argv + 1);
    if (argc >= 2 && strcmp(argv[1], "csv") == 0)
        return lb_cli_data_csv(argc - 1, argv + 1);
    if (argc >= 2 && strcmp(argv[1], "text") == 0)
        return data_text(argc - 1, argv + 1);
    data_args a = {.task_name = "spike"};
    a.keys = calloc((size_t)argc + 1, sizeof *a.keys);
    a.values = calloc((size_t)argc + 1, sizeof *a.values);
    a.owned = calloc((size_t)argc + 1, sizeof *a.owned);
    lb_task_kind task;
    lb_task_options opt;
    int code = !a.keys || !a.values || !a.owned ? lb_cli_error("data", 1, "out of memory") : data_parse(argc, argv, &a);
    if (code < 0)
        code = task_options(&a, &task, &opt);
    if (code < 0 && !a.output)
        code = lb_cli_error("data", 2, "missing the output file: add -o FILE.h5");
    /* What may not be written at all (a device, a symbolic link, ...) is said so before
     * "already exists", which --force would answer. */
    if (code < 0 && lb_output_check(a.output, "data file") != LB_OK)
        code = lb_cli_fail("data");
    if (code < 0 && lb_files_exists(a.output) && !a.force)
        code = lb_cli_error("data", 1, "%s already exists; use --force to overwrite it", a.output);
    if (code < 0 && lb_task_check_size(&opt, a.output, a.allow_large, a.quiet) != LB_OK)
        code = lb_cli_error("data", 2, "%s", lb_last_error());
    if (code < 0)
        code = generate(&a, task, &opt);
    for (int k = 0; a.owned && k < a.n_owned; k++)
        free(a.owned[k]);
    free(a.owned);
    free(a.keys);
    free(a.values);
    return code;
}

/* lookback generate: text from a token language model's checkpoint, printed as it is
 * made, through the streaming state (layers/generate.h) and the checkpoint's stored
 * vocabulary (data/text.h). */
#include <errno.h>
#include <getopt.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "cli/cli.h"
#include "data/output.h"
#include "data/text.h"
#include "layers/family.h"
#include "layers/generate.h"
#include "tensor/clock.h"
#include "tensor/rng.h"
#include "train/trainer.h"

/* The defaults of nanoGPT's sample.py where it has the option. */
#define DEFAULT_MAX_NEW_TOKENS 500
#define DEFAULT_TEMPERATURE 0.8
#define DEFAULT_TOP_K 200
#define DEFAULT_SEED 1337

static void generate_usage(FILE *out)
{
    fputs("usage: lookback generate --checkpoint CK.h5 [--prompt TEXT | --prompt-file F] [options]\n"
          "\n"
          "Generates text with a language model trained on a text corpus (lookback data text, then\n"
          "lookback train): the prompt is read in one chunk, then each new token is one event through\n"
          "the model's streaming state (the key-value cache of attention, the LSTM's (h, c), the conv\n"
          "stack's last inputs), so nothing is recomputed per token. The prompt and then every token are\n"
          "printed on standard output as they are made (UTF-8; a byte vocabulary prints its bytes;\n"
          "a bpe or unigram one decodes piece by piece and prints whole characters only, a byte piece\n"
          "waiting for the rest of its character), and the tokens per second on standard error. The\n"
          "prompt is encoded with the checkpoint's tokenizer. Without a prompt, generation starts from a\n"
          "newline (as nanoGPT's sample.py), or from the vocabulary's first symbol when the text had\n"
          "no newline. The same --seed gives the same text with any --threads. The vocabulary's <unk>\n"
          "(the id of characters outside it, never a training target) is never generated, in any\n"
          "mode, greedy included.\n"
          "\n"
          "Context: a model with learned positions reads at most max_seq_len tokens, and an attention\n"
          "model reads by default at most the context it was trained with (train.seq_len); when the\n"
          "text grows past that window, the window slides (nanoGPT's crop): the last --ctx-size tokens\n"
          "are read again in one chunk before every further token. The LSTM, the conv stack and local\n"
          "attention with rotary or no positions read every token unless --ctx-size is given.\n"
          "\n"
          "  --prompt TEXT           the text to continue (use --prompt=TEXT for a text starting with -)\n"
          "  --prompt-file F         the text to continue, from a file\n"
          "  -n, --max-new-tokens N  tokens to generate per sample (default 500)\n"
          "  --temperature T         0 = greedy (the most probable token), else in [1e-06, 1e+06];\n"
          "                          below 1 sharper, above 1 flatter (default 0.8)\n"
          "  --top-k K               sample from the K most probable tokens only; 0 = all (default 200)\n"
          "  --top-p P               sample from the smallest set of most probable tokens whose\n"
          "                          probability reaches P, in [0, 1]; 1 = all (default 1)\n"
          "  --min-p M               drop the tokens less than M times as probable as the most\n"
          "                          probable one, in [0, 1]; 0 = off (default 0)\n"
          "  --repeat-penalty R      divide a positive logit (multiply a negative one) of every token\n"
          "                          among the last --repeat-last-n by R (llama.cpp's); 1 = off (default 1)\n"
          "  --presence-penalty A    subtract A from the logit of every token among them; 0 = off (default 0)\n"
          "  --repeat-last-n N       the tokens the penalties look at, prompt included; -1 = all,\n"
          "                          0 = none (default 64)\n"
          "  --seed S                random seed (default 1337)\n"
          "  --num-samples M         samples, one after another from one random stream, each followed\n"
          "                          by a line of dashes when M > 1 (default 1)\n"
          "  --ctx-size N            most tokens one prediction reads; 0 = as much as the model can\n"
          "                          (default: the training context for attention, all for the others\n"
          "                          and for local attention with rotary or no positions)\n"
          "  --threads N             threads (default 1: one event is too little work to share)\n"
          "  --documents             the model was trained on documents (data text --documents): each\n"
          "                          sample starts at the separator, begins with the prompt if one is\n"
          "                          given, ends at the separator (or after -n tokens) and is printed\n"
          "                          on one line\n"
          "  --data CORPUS.h5        with --documents: the corpus trained on; each sample is marked\n"
          "                          'in train' (a copy of a training document) or 'new'\n",
          out);
}

/* What the per-token callback needs. */
typedef struct generate_print {
    const lb_vocab *vocab;
    int write_failed;
    int err;
    int whole;               /* bpe, unigram: print whole UTF-8 characters only (a byte piece is part of one) */
    lb_utf8_pending pending; /* the bytes of a character not yet complete */
    int64_t separator;       /* --documents: the separator id (the sample ends there); -1 otherwise */
    int32_t *doc;            /* --documents: the document's ids so far [doc_len] */
    int64_t doc_len, doc_cap;
} generate_print;

/* Writes len bytes to standard output and flushes; 1 (and the error kept) when that fails. */
static int emit(generate_print *p, const char *bytes, size_t len)
{
    if (len > 0)
        fwrite(bytes, 1, len, stdout);
    if (fflush(stdout) != 0 || ferror(stdout)) {
        p->err = errno;
        p->write_failed = 1;
        return 1;
    }
    return 0;
}

/* The callback of lb_generate: the token's symbol, flushed at once. */
static int print_token(void *user, int64_t index, int32_t token, const float *logits)
{
    (void)index;
    (void)logits;
    generate_print *p = user;
    if (p->separator >= 0) { /* a document: kept until its end symbol */
        if (token == p->separator)
            return 1;
        if (p->doc_len == p->doc_cap) {
            int64_t cap = p->doc_cap ? 2 * p->doc_cap : 256;
            int32_t *grown = realloc(p->doc, (size_t)cap * sizeof *grown);
            if (!grown)
                return 1;
            p->doc = grown;
            p->doc_cap = cap;
        }
        p->doc[p->doc_len++] = token;
        return 0;
    }
    size_t len = 0;
    const char *bytes = lb_vocab_symbol(p->vocab, token, &len);
    if (!bytes || !p->whole)
        return emit(p, bytes, bytes ? len : 0);
    char whole[3 * (64 + 3)];
    size_t used = 0;
    for (size_t at = 0; at < len; at += 64) { /* a piece is at most a few dozen bytes */
        size_t part = len - at < 64 ? len - at : 64;
        used = lb_utf8_whole(&p->pending, bytes + at, part, whole);
        if (emit(p, whole, used))
            return 1;
    }
    return len == 0 ? emit(p, "", 0) : 0;
}

/* The whole of file `path` into a new buffer (*size bytes, NUL added). */
static char *read_prompt_file(const char *cmd, const char *path, size_t *size, int *code)
{
    char *buf = NULL;
    if (lb_files_read(path, &buf, size) != LB_OK) {
        *code = lb_cli_error(cmd, 1, "--prompt-file %s", lb_last_error());
        return NULL;
    }
    size_t bom = lb_text_bom_length(buf, *size); /* a byte-order mark is no part of the prompt */
    memmove(buf, buf + bom, *size - bom + 1);
    *size -= bom;
    if (*size == 0) {
        free(buf);
        *code = lb_cli_error(cmd, 1, "--prompt-file %s: is empty; a prompt needs at least one character (or give no "
                                     "prompt: generation then starts from a newline)",
                             path);
        return NULL;
    }
    return buf;
}

/* The options of one run, as read. */
typedef struct generate_args {
    const char *checkpoint, *prompt, *prompt_file;
    int64_t max_new_tokens, top_k, seed, num_samples, ctx_size, threads;
    double temperature, top_p;
    int ctx_given;
    int documents;     /* --documents */
    const char *data;  /* --data: the corpus trained on, for "in train" / "new" */
    double min_p, repeat_penalty, presence_penalty;
    int64_t repeat_last_n;
} generate_args;

static int parse_args(const char *cmd, int argc, char **argv, generate_args *a, int *help)
{
    static const struct option opts[] = {
        {"checkpoint", required_argument, NULL, 'c'},  {"prompt", required_argument, NULL, 'p'},
        {"prompt-file", required_argument, NULL, 'f'}, {"max-new-tokens", required_argument, NULL, 'n'},
        {"temperature", required_argument, NULL, 'T'}, {"top-k", required_argument, NULL, 'k'},
        {"top-p", required_argument, NULL, 'P'},       {"seed", required_argument, NULL, 's'},
        {"num-samples", required_argument, NULL, 'm'}, {"ctx-size", required_argument, NULL, 'x'},
        {"threads", required_argument, NULL, 't'},     {"help", no_argument, NULL, 'h'},
        {"documents", no_argument, NULL, 'D'},         {"data", required_argument, NULL, 'd'},
        {"min-p", required_argument, NULL, 'M'},       {"repeat-penalty", required_argument, NULL, 'R'},
        {"presence-penalty", required_argument, NULL, 'A'}, {"repeat-last-n", required_argument, NULL, 'L'},
        {NULL, 0, NULL, 0},
    };
    optind = 1;
    opterr = 0;
    int c;
    lb_status st = LB_OK;
    *help = 0;
    while ((c = getopt_long(argc, argv, ":hn:", opts, NULL)) != -1 && st == LB_OK) {
        switch (c) {
        case 'c': a->checkpoint = optarg; break;
        case 'p': a->prompt = optarg; break;
        case 'f': a->prompt_file = optarg; break;
        case 'n': st = lb_option_int("--max-new-tokens", optarg, 0, INT32_MAX, &a->max_new_tokens); break;
        case 'T':
            st = lb_option_real("--temperature", optarg, 0, LB_SAMPLING_MAX_TEMPERATURE, &a->temperature);
            if (st == LB_OK && a->temperature > 0 && a->temperature < LB_SAMPLING_MIN_TEMPERATURE)
                st = lb_error(LB_ERR_VALUE, "--temperature must be 0 (greedy) or in [%g, %g], got %g",
                              LB_SAMPLING_MIN_TEMPERATURE, LB_SAMPLING_MAX_TEMPERATURE, a->temperature);
            break;
        case 'k': st = lb_option_int("--top-k", optarg, 0, INT32_MAX, &a->top_k); break;
        case 'P': st = lb_option_real("--top-p", optarg, 0, 1, &a->top_p); break;
        case 'M': st = lb_option_real("--min-p", optarg, 0, 1, &a->min_p); break;
        case 'R':
            st = lb_option_real("--repeat-penalty", optarg, LB_SAMPLING_MIN_PENALTY, LB_SAMPLING_MAX_PENALTY,
                                &a->repeat_penalty);
            break;
        case 'A':
            st = lb_option_real("--presence-penalty", optarg, -LB_SAMPLING_MAX_PENALTY, LB_SAMPLING_MAX_PENALTY,
                                &a->presence_penalty);
            break;
        case 'L': st = lb_option_int("--repeat-last-n", optarg, -1, INT32_MAX, &a->repeat_last_n); break;
        case 's': st = lb_option_int("--seed", optarg, 0, INT64_MAX, &a->seed); break;
        case 'm': st = lb_option_int("--num-samples", optarg, 1, 1000000, &a->num_samples); break;
        case 'x':
            st = lb_option_int("--ctx-size", optarg, 0, INT32_MAX, &a->ctx_size);
            a->ctx_given = 1;
            break;
        case 't': st = lb_option_int("--threads", optarg, 0, 1024, &a->threads); break;
        case 'D': a->documents = 1; break;
        case 'd': a->data = optarg; break;
        case 'h': *help = 1; return 0;
        default: return lb_cli_bad_option(cmd, c, argv);
        }
    }
    if (st != LB_OK)
        return lb_cli_error(cmd, 2, "%s", lb_last_error());
    if (optind < argc)
        return lb_cli_error(cmd, 2, "unexpected argument '%s'", argv[optind]);
    if (!a->checkpoint)
        return lb_cli_error(cmd, 2, "--checkpoint is required");
    if (a->prompt && a->prompt_file)
        return lb_cli_error(cmd, 2, "--prompt and --prompt-file both give the prompt; give one");
    if (a->data && !a->documents)
        return lb_cli_error(cmd, 2, "--data applies with --documents (it marks the samples found in its training split)");
    return 0;
}

/* The window when --ctx-size is not given: the training context for attention models
 * (nanoGPT's block_size crop), except local attention with relative positions (rotary,
 * alibi or none), which computes the same thing at any length from its bounded cache,
 * and ALiBi, built to run past its training length (Press et al. 2022); every token for
 * the LSTM and the conv stack. Learned positions are capped at max_seq_len by
 * lb_generate_context either way. */
static int64_t default_context(const char *ck, const lb_model_config *mc)
{
    int64_t seq_len = 0;
    const lb_family *f = lb_family_of(mc->kind);
    if (f && f->crops_context(mc) &&
        lb_checkpoint_read_seq_len(ck, &seq_len) == LB_OK && seq_len > 0)
        return seq_len;
    lb_clear_error();
    return 0;
}

/* --documents: the prompt becomes the separator (the begin symbol) and then the prompt's
 * own ids; with --data, the training documents of that corpus are read to mark copies. */
static int start_documents(const char *cmd, const generate_args *a, const lb_vocab *vocab, int64_t separator,
                           int32_t **prompt, int64_t *prompt_len, lb_doc_set **train_docs)
{
    int64_t n = a->prompt || a->prompt_file ? *prompt_len : 0; /* the default start is not a document's */
    int32_t *ids = malloc((size_t)(n + 1) * sizeof *ids);
    if (!ids)
        return lb_cli_error(cmd, 1, "out of memory");
    ids[0] = (int32_t)separator;
    memcpy(ids + 1, *prompt, (size_t)n * sizeof *ids);
    free(*prompt);
    *prompt = ids;
    *prompt_len = n + 1;
    if (!a->data)
        return 0;
    if (lb_output_protect(a->data, "the --data file") != LB_OK)
        return lb_cli_fail(cmd);
    lb_dataset *ds = lb_dataset_open_split(a->data, "train");
    if (!ds)
        return lb_cli_fail(cmd);
    int code = 0;
    if (lb_dataset_check_vocab(ds, vocab, a->checkpoint) != LB_OK || !(*train_docs = lb_doc_set_new(ds, "train")))
        code = lb_cli_fail(cmd);
    lb_dataset_close(ds);
    return code;
}

/* One sample of --documents: its text on one line, then "in train" or "new" with --data. */
static int print_document(generate_print *p, const lb_doc_set *train_docs, int64_t *copies)
{
    size_t len = 0;
    if (lb_vocab_decode(p->vocab, p->doc, p->doc_len, NULL, 0, &len) != LB_OK)
        return 1;
    char *text = malloc(len + 1);
    if (!text) {
        lb_error(LB_ERR_MEMORY, "out of memory for a document of %zu bytes", len);
        return 1;
    }
    if (lb_vocab_decode(p->vocab, p->doc, p->doc_len, text, len + 1, &len) != LB_OK) {
        free(text);
        return 1;
    }
    for (size_t i = 0; i < len; i++) /* one document, one line */
        if (text[i] == '\n' || text[i] == '\r')
            text[i] = ' ';
    int copy = train_docs && p->doc_len > 0 && lb_doc_set_has(train_docs, p->doc, p->doc_len);
    *copies += copy;
    int failed = emit(p, text, len);
    if (!failed && train_docs)
        failed = emit(p, copy ? "\tin train" : "\tnew", copy ? 9 : 4);
    if (!failed)
        failed = emit(p, "\n", 1);
    free(text);
    if (failed)
        lb_error(LB_ERR_IO, "cannot write to standard output: %s", p->err ? lb_system_error(p->err) : "write error");
    return failed;
}

int lb_cli_generate(int argc, char **argv)
{
    const char *cmd = "generate";
    generate_args a = {NULL, NULL, NULL, DEFAULT_MAX_NEW_TOKENS, DEFAULT_TOP_K, DEFAULT_SEED, 1, 0, 1,
                       DEFAULT_TEMPERATURE, 1.0, 0, 0, NULL, 0.0, 1.0, 0.0, 64};
    int help = 0, code = parse_args(cmd, argc, argv, &a, &help);
    if (help) {
        generate_usage(stdout);
        return 0;
    }
    if (code)
        return code;
    if (lb_run_set_threads((int)a.threads) < 0)
        return lb_cli_fail(cmd);
    lb_model *model = lb_checkpoint_load_model(a.checkpoint);
    if (!model)
        return lb_cli_fail(cmd);
    const lb_model_config *mc = lb_model_get_config(model);
    lb_vocab *vocab = NULL;
    char *file_text = NULL;
    int32_t *prompt = NULL;
    int64_t prompt_len = 0;
    size_t file_len = 0;
    if (lb_generate_check_model(model) != LB_OK) {
        code = lb_cli_error(cmd, 1, "%s: %s", a.checkpoint, lb_last_error());
    } else if (!(vocab = lb_vocab_read(a.checkpoint))) {
        code = lb_cli_error(cmd, 1, "%s: %s", a.checkpoint, lb_last_error());
    } else if (a.ctx_given && a.ctx_size > 0 && lb_generate_context(model, a.ctx_size) < a.ctx_size) {
        code = lb_cli_error(cmd, 2, "--ctx-size %lld is more than %s reads: its learned positions (--pos learned) end "
                                    "at max_seq_len = %lld",
                            (long long)a.ctx_size, a.checkpoint, (long long)mc->max_seq_len);
    } else if (lb_vocab_size(vocab) != mc->vocab_size) {
        code = lb_cli_error(cmd, 1, "%s: the stored vocabulary has %lld symbols but the model reads %lld token ids",
                            a.checkpoint, (long long)lb_vocab_size(vocab), (long long)mc->vocab_size);
    } else if (a.prompt_file && !(file_text = read_prompt_file(cmd, a.prompt_file, &file_len, &code))) {
        /* said */
    } else {
        const char *text = a.prompt_file ? file_text : a.prompt;
        size_t len = a.prompt_file ? file_len : a.prompt ? strlen(a.prompt) : 0;
        char what[4200];
        snprintf(what, sizeof what, a.prompt_file ? "--prompt-file %s" : "--prompt", a.prompt_file);
        if (!(prompt = lb_vocab_encode_new(vocab, text, len, &prompt_len)))
            code = lb_cli_error(cmd, 1, "%s: %s", what, lb_last_error());
    }
    int64_t separator = code == 0 && a.documents ? lb_vocab_separator_id(vocab) : -1;
    lb_doc_set *train_docs = NULL;
    if (code == 0 && a.documents && separator < 0)
        code = lb_cli_error(cmd, 1, "--documents: %s was not trained on documents (its vocabulary has no separator: "
                            "import the text with data text --documents lines)", a.checkpoint);
    if (code == 0 && a.documents && (code = start_documents(cmd, &a, vocab, separator, &prompt, &prompt_len,
                                                            &train_docs)) != 0) {
        /* said */
    }
    lb_generate_options o = lb_generate_defaults();
    o.max_new_tokens = a.max_new_tokens;
    /* <unk> (characters outside the vocabulary, never a training target) is never sampled */
    int64_t unk = vocab ? lb_vocab_unk_id(vocab) : -1;
    o.sampling.temperature = a.temperature;
    o.sampling.top_k = a.top_k;
    o.sampling.top_p = a.top_p;
    o.sampling.unk_id = unk;
    o.sampling.mask_unk = unk >= 0;
    o.sampling.min_p = a.min_p;
    o.sampling.repeat_penalty = a.repeat_penalty;
    o.sampling.presence_penalty = a.presence_penalty;
    o.sampling.repeat_last_n = a.repeat_last_n;
    o.context = a.ctx_given ? a.ctx_size : default_context(a.checkpoint, mc);
    generate_print pr = {vocab, 0, 0, vocab && lb_vocab_kind_is_subword(lb_vocab_get_kind(vocab)), {{0}, 0}, separator,
                         NULL, 0, 0};
    int64_t copies = 0;
    o.on_token = print_token;
    o.user = &pr;
    lb_rng rng;
    lb_rng_seed(&rng, (uint64_t)a.seed);
    int64_t total = 0;
    double seconds = 0;
    for (int64_t s = 0; prompt && code == 0 && s < a.num_samples; s++) {
        /* the prompt as the model reads it: decoded from its ids (the same text for a valid prompt) */
        for (int64_t i = 0; i < prompt_len && !pr.write_failed && separator < 0; i++)
            print_token(&pr, -1, prompt[i], NULL);
        pr.doc_len = 0;
        for (int64_t i = 1; i < prompt_len && separator >= 0; i++) /* the document begins with the prompt */
            print_token(&pr, -1, prompt[i], NULL);
        lb_generate_result r;
        double t0 = lb_clock_wall();
        lb_status st = pr.write_failed ? LB_OK : lb_generate(model, prompt, prompt_len, &o, &rng, NULL, &r);
        double dt = lb_clock_wall() - t0;
        pr.pending.n = 0; /* an unfinished character at the end is not printed */
        if (separator >= 0 && st == LB_OK && print_document(&pr, train_docs, &copies) != 0)
            code = lb_cli_fail(cmd);
        else if (separator >= 0) {
            total += st == LB_OK ? r.generated : 0;
            seconds += dt;
            if (st != LB_OK)
                code = lb_cli_error(cmd, 1, "%s", lb_last_error());
            continue;
        }
        if (!pr.write_failed && st == LB_OK) {
            const char *end = a.num_samples > 1 ? "\n---------------\n" : "\n";
            emit(&pr, end, strlen(end));
        }
        if (pr.write_failed) {
            code = lb_cli_error(cmd, 1, "cannot write to standard output: %s", pr.err ? lb_system_error(pr.err) : "write error");
        } else if (st != LB_OK) {
            code = lb_cli_error(cmd, 1, "%s", lb_last_error());
        } else {
            total += r.generated;
            seconds += dt;
            char sample[64] = "";
            if (a.num_samples > 1)
                snprintf(sample, sizeof sample, "sample %lld: ", (long long)s + 1);
            fprintf(stderr, "lookback generate: %s%lld tokens in %.3f s (%.1f tokens/s; prompt of %lld tokens, %lld "
                            "window slides)\n",
                    sample, (long long)r.generated, dt, dt > 0 ? (double)r.generated / dt : 0.0, (long long)prompt_len,
                    (long long)(r.prefills > 0 ? r.prefills - 1 : 0));
        }
    }
    if (code == 0 && (a.num_samples > 1 || separator >= 0))
        fprintf(stderr, "lookback generate: %lld samples, %lld tokens in %.3f s (%.1f tokens/s)\n",
                (long long)a.num_samples, (long long)total, seconds, seconds > 0 ? (double)total / seconds : 0.0);
    if (code == 0 && train_docs)
        fprintf(stderr, "lookback generate: %lld of %lld documents are in the training split of %s (%lld documents), "
                "%lld new\n", (long long)copies, (long long)a.num_samples, a.data, (long long)lb_doc_set_size(train_docs),
                (long long)(a.num_samples - copies));
    lb_doc_set_free(train_docs);
    free(pr.doc);
    free(prompt);
    free(file_text);
    lb_vocab_free(vocab);
    lb_model_free(model);
    return code;
}

/* lookback stream: reads token ids one event at a time and prints the model's
 * prediction after each event, through the streaming path (layers/stream.h). */
#include <errno.h>
#include <getopt.h>
#include <json-c/json.h>
#include <math.h>
#include <stdint.h>
#include <string.h>
#include <sys/stat.h>

#include "cli/cli.h"
#include "data/events.h"
#include "data/token_ids.h"
#include "layers/stream.h"

static void stream_usage(FILE *out)
{
    fputs("usage: lookback stream --checkpoint CK.h5 [--input FILE|-] [options]\n"
          "       lookback stream --checkpoint CK.h5 --csv LOG.csv|- [--every N] [--json] [--max-context N]\n"
          "                       [--missing refuse|skip|previous]\n"
          "\n"
          "Reads whitespace-separated token ids (one event per id) from FILE or standard input and\n"
          "prints, after each event, the model's prediction: the class and its probability, or the\n"
          "regression value. Each line is flushed as it is printed, so the command can sit at the\n"
          "end of a pipe. The model keeps its state between events: attention a key-value cache\n"
          "that grows with every event, local attention its window, the LSTM (h, c), the conv\n"
          "stack its last inputs. A failed read, or a failed write to standard output (a full\n"
          "disk, /dev/full), stops the command at once with one line and exit 1; a reader that\n"
          "closes the pipe ends it with SIGPIPE (exit 141, as any filter); a standard output that\n"
          "was closed before the start is /dev/null. --max-context on a model without attention is\n"
          "a usage error (exit 2).\n"
          "\n"
          "  --input FILE|-          where the ids come from (default -: standard input)\n"
          "  --every N               print every N-th event only, and the last (default 1)\n"
          "  --json                  one JSON object per line: event, token, class and probability\n"
          "                          (or value), state_bytes\n"
          "  --strict                stop at the first bad id (exit 1); by default a bad id is\n"
          "                          reported on standard error and skipped (a NUL byte is a bad id,\n"
          "                          and so is a token of more than 24 bytes, read in bounded memory;\n"
          "                          other bytes than printable ASCII are shown as \\xHH)\n"
          "  --max-context N         full attention keeps the last N events only (an approximation:\n"
          "                          bounded memory and time per event; default all). With learned\n"
          "                          positions (--pos learned), whose table ends at max_seq_len, the\n"
          "                          window is the last N events (default max_seq_len) and slides:\n"
          "                          once full, each event re-encodes the last N in one chunk, so the\n"
          "                          output equals the full forward on them (costs a prefill of N\n"
          "                          events per event)\n"
          "  --csv FILE|-            (a model trained on an imported event log) read CSV rows of the\n"
          "                          training layout instead of token ids: the stored scaling and token\n"
          "                          maps applied, one stream per source; prints a CSV line per row:\n"
          "                          row, line, source, position, label, predicted, probability, score\n"
          "                          (the anomaly score; docs/events.md)\n"
          "  --missing POLICY        with --csv, an empty value in a key, order, feature, token or label\n"
          "                          column: refuse (stop with one line naming it), skip the row (counted),\n"
          "                          or previous (a feature or token takes its source's previous value), as\n"
          "                          data csv --missing; default: the policy the training file was\n"
          "                          imported with (stored in the checkpoint)\n"
          "  --threads N             threads (default 1: one event is too little work to share)\n",
          out);
}

typedef struct stream_run {
    lb_model_state *state;
    lb_window_stream *window; /* learned positions: the sliding window (state is its state) */
    const lb_model_config *mc;
    int64_t every, events, skipped;
    int json;
    int write_failed; /* a write to standard output failed: the error says so, nothing more is read */
    lb_tensor *held;  /* the last event's output when --every did not print it: printed at the end */
    int32_t held_token;
} stream_run;

/* Prints the prediction y of event r->events (token `token`); frees y. */
static lb_status print_event(stream_run *r, lb_tensor *y, int32_t token)
{
    int64_t classes = r->mc->num_classes;
    int best = 0;
    double p = 0, value = lb_tensor_flat(y, 0);
    if (classes > 0) { /* softmax probability of the arg-max class */
        for (int64_t k = 1; k < classes; k++)
            if (lb_tensor_flat(y, k) > lb_tensor_flat(y, best))
                best = (int)k;
        double top = lb_tensor_flat(y, best), sum = 0;
        for (int64_t k = 0; k < classes; k++)
            sum += exp(lb_tensor_flat(y, k) - top);
        p = 1.0 / sum;
    }
    size_t bytes = lb_model_state_bytes(r->state, 0);
    if (r->json) {
        json_object *o = json_object_new_object();
        json_object_object_add(o, "event", json_object_new_int64(r->events));
        json_object_object_add(o, "token", json_object_new_int(token));
        if (classes > 0) {
            json_object_object_add(o, "class", json_object_new_int(best));
            json_object_object_add(o, "probability", json_object_new_double(p));
        } else {
            json_object_object_add(o, "value", json_object_new_double(value));
        }
        json_object_object_add(o, "state_bytes", json_object_new_int64((int64_t)bytes));
        printf("%s\n", json_object_to_json_string_ext(o, JSON_C_TO_STRING_PLAIN));
        json_object_put(o);
    } else if (classes > 0) {
        printf("event %lld: class %d (p = %.4f)\n", (long long)r->events, best, p);
    } else {
        printf("event %lld: %.6g\n", (long long)r->events, value);
    }
    if (fflush(stdout) != 0 || ferror(stdout)) {
        int err = errno;
        lb_tensor_free(y);
        r->write_failed = 1;
        return lb_error(LB_ERR_IO, "cannot write to standard output: %s", err ? lb_system_error(err) : "write error");
    }
    lb_tensor_free(y);
    return LB_OK;
}

/* Feeds one id and prints the prediction when due (every --every-th event); the last
 * event's is kept, so that the end of the input prints it (stream_finish). */
static lb_status stream_event(stream_run *r, int32_t token)
{
    lb_tensor *y = NULL; /* [1, C] or [1] */
    if (r->window) {
        int64_t shape[2] = {1, r->mc->num_classes};
        y = lb_tensor_empty(r->mc->dtype, r->mc->num_classes > 0 ? 2 : 1, shape);
        if (y && lb_window_stream_step(r->window, token, y) != LB_OK) {
            lb_tensor_free(y);
            y = NULL;
        }
        r->state = lb_window_stream_state(r->window); /* a slide makes a new state */
    } else {
        y = lb_model_step(r->state, &token);
    }
    if (!y)
        return lb_last_status();
    r->events++;
    lb_tensor_free(r->held);
    r->held = NULL;
    if (r->events % r->every == 0)
        return print_event(r, y, token);
    r->held = y;
    r->held_token = token;
    return LB_OK;
}

/* At the end of the input: the last event, when --every skipped it. */
static lb_status stream_finish(stream_run *r)
{
    lb_tensor *y = r->held;
    r->held = NULL;
    return y ? print_event(r, y, r->held_token) : LB_OK;
}

/* What the reading of token ids needs: the run, how bad ids are taken, the exit code. */
typedef struct stream_input {
    stream_run *run;
    const char *name;
    int strict, code;
} stream_input;

/* An id: fed to the model, its prediction printed when due. Non-zero stops the reading. */
static int on_id(int32_t id, int64_t line, int64_t column, void *user)
{
    stream_input *in = user;
    if (stream_event(in->run, id) == LB_OK)
        return 0;
    in->code = in->run->write_failed ? lb_cli_error("stream", 1, "%s", lb_last_error())
                                     : lb_cli_error("stream", 1, "%s, line %lld, column %lld, event %lld: %s", in->name,
                                                    (long long)line, (long long)column,
                                                    (long long)in->run->events + 1, lb_last_error());
    return 1;
}

/* What is not an id: said, then skipped (or, with --strict, the end with exit 1). */
static int on_bad(const char *message, void *user)
{
    stream_input *in = user;
    fprintf(stderr, "lookback stream: %s%s\n", message, in->strict ? "" : "; skipped");
    in->run->skipped++;
    if (in->strict)
        in->code = 1;
    return in->strict;
}

/* Reads ids from `in` (data/token_ids.h); a bad id is named by line and column. Returns
 * the exit code. */
static int stream_read(stream_run *r, FILE *in, const char *name, int strict)
{
    stream_input input = {r, name, strict, 0};
    if (lb_token_ids_read(in, name, r->mc->vocab_size, on_id, on_bad, &input) != LB_OK && input.code == 0)
        input.code = lb_cli_error("stream", 1, "%s", lb_last_error());
    return input.code;
}

/* The command line of stream. */
typedef struct stream_args {
    const char *ck, *input, *csv;
    int64_t every, threads, max_context;
    int json, strict, input_set, missing;
} stream_args;

/* Reads the options into a; -1 to go on, else the exit code (printed). */
static int parse_args(int argc, char **argv, stream_args *a)
{
    const char *cmd = "stream";
    static const struct option opts[] = {
        {"checkpoint", required_argument, NULL, 'c'}, {"input", required_argument, NULL, 'i'},
        {"every", required_argument, NULL, 'e'},      {"json", no_argument, NULL, 'j'},
        {"strict", no_argument, NULL, 's'},           {"max-context", required_argument, NULL, 'm'},
        {"threads", required_argument, NULL, 't'},    {"help", no_argument, NULL, 'h'},
        {"csv", required_argument, NULL, 'V'},        {"missing", required_argument, NULL, 'M'},
        {NULL, 0, NULL, 0},
    };
    optind = 1;
    opterr = 0;
    int c;
    lb_status st = LB_OK;
    lb_missing_policy policy;
    while ((c = getopt_long(argc, argv, ":h", opts, NULL)) != -1 && st == LB_OK) {
        switch (c) {
        case 'c': a->ck = optarg; break;
        case 'V': a->csv = optarg; break;
        case 'M':
            if ((st = lb_missing_parse(optarg, &policy)) == LB_OK)
                a->missing = (int)policy;
            break;
        case 'i': a->input = optarg; a->input_set = 1; break;
        case 'e': st = lb_option_int("--every", optarg, 1, INT64_MAX, &a->every); break;
        case 'j': a->json = 1; break;
        case 's': a->strict = 1; break;
        case 'm': st = lb_option_int("--max-context", optarg, 1, INT32_MAX, &a->max_context); break;
        case 't': st = lb_option_int("--threads", optarg, 0, 1024, &a->threads); break;
        case 'h': stream_usage(stdout); return 0;
        default: return lb_cli_bad_option(cmd, c, argv);
        }
    }
    if (st != LB_OK)
        return lb_cli_error(cmd, 2, "%s", lb_last_error());
    if (optind < argc)
        return lb_cli_error(cmd, 2, "unexpected argument '%s'", argv[optind]);
    if (!a->ck)
        return lb_cli_error(cmd, 2, "--checkpoint is required");
    return -1;
}

/* stream --csv: an event log's rows, scored as they come. */
static int stream_csv(const stream_args *a)
{
    const char *cmd = "stream";
    if (a->input_set || a->strict)
        return lb_cli_error(cmd, 2, "--csv reads CSV rows: drop %s", a->input_set ? "--input" : "--strict");
    if (!a->csv[0])
        return lb_cli_error(cmd, 2, "--csv is empty: name a file, or - for standard input");
    if (lb_run_set_threads((int)a->threads) < 0)
        return lb_cli_fail(cmd);
    return lb_cli_stream_csv(a->ck, a->csv, a->every, a->json, a->max_context, a->missing);
}

/* The model's streaming state on the token ids of a->input; the exit code. */
static int stream_tokens(const stream_args *a, lb_model *model)
{
    const char *cmd = "stream", *ck = a->ck, *input = a->input;
    int64_t max_context = a->max_context;
    int strict = a->strict;
    int code = 0;
    const lb_model_config *mc = lb_model_get_config(model);
    stream_run r = {NULL, NULL, mc, a->every, 0, 0, a->json, 0, NULL, 0};
    /* learned positions end at max_seq_len: a window of the last --max-context events (default
     * the table) that slides, re-encoded so that every output is the full forward on it */
    int learned = lb_cli_has_attention(mc) && mc->pos == LB_POS_LEARNED;
    int64_t window = learned ? (max_context > 0 ? max_context : mc->max_seq_len) : 0;
    lb_stream_options so = {0, max_context, 0};
    FILE *in = strcmp(input, "-") == 0 ? stdin : fopen(input, "r");
    struct stat sb;
    if (mc->vocab_size == 0) {
        code = lb_cli_error(cmd, 1, "%s: the model reads real-valued features, but stream reads token ids", ck);
    } else if (lb_cli_check_max_context(ck, mc, max_context) != LB_OK) {
        code = lb_cli_error(cmd, 2, "%s", lb_last_error()); /* an option that does not apply: usage */
    } else if (learned && window > mc->max_seq_len) {
        code = lb_cli_error(cmd, 2, "--max-context %lld is more than %s reads: its learned positions (--pos learned) end "
                            "at max_seq_len = %lld (give at most that)", (long long)max_context, ck,
                            (long long)mc->max_seq_len);
    } else if (!in) {
        code = lb_cli_error(cmd, 1, "%s: cannot open: %s", input, lb_system_error(errno));
    } else if (fstat(fileno(in), &sb) == 0 && S_ISDIR(sb.st_mode)) {
        code = lb_cli_error(cmd, 1, "%s: is a folder, not a file of token ids", input);
    } else if (learned && !(r.window = lb_window_stream_new(model, window, NULL))) {
        code = lb_cli_fail(cmd);
    } else if (!learned && !(r.state = lb_model_state_new(model, 1, &so))) {
        code = lb_cli_fail(cmd);
    } else {
        code = stream_read(&r, in, strcmp(input, "-") == 0 ? "standard input" : input, strict);
        if (code == 0 && stream_finish(&r) != LB_OK)
            code = lb_cli_fail(cmd);
        /* The summary follows a complete read only: a failure is its one error line. */
        if (code == 0 && r.window)
            r.state = lb_window_stream_state(r.window);
        if (code == 0)
            fprintf(stderr, "lookback stream: %lld events, %lld bad ids skipped; state %zu bytes (%zu allocated)%s",
                    (long long)r.events, (long long)r.skipped, lb_model_state_bytes(r.state, 0),
                    lb_model_state_allocated(r.state), r.window ? "" : "\n");
        if (code == 0 && r.window)
            fprintf(stderr, "; window of %lld events (learned positions), slid %lld times\n", (long long)window,
                    (long long)lb_window_stream_slides(r.window));
    }
    if (in && in != stdin)
        fclose(in);
    lb_tensor_free(r.held);
    if (r.window)
        lb_window_stream_free(r.window);
    else
        lb_model_state_free(r.state);
    return code;
}

int lb_cli_stream(int argc, char **argv)
{
    const char *cmd = "stream";
    stream_args a = {.input = "-", .every = 1, .threads = 1, .missing = -1};
    int code = parse_args(argc, argv, &a);
    if (code >= 0)
        return code;
    if (a.csv)
        return stream_csv(&a);
    if (a.missing >= 0)
        return lb_cli_error(cmd, 2, "--missing applies to CSV rows (--csv) only: token ids have no empty values; drop it");
    if (!a.input[0])
        return lb_cli_error(cmd, 2, "--input is empty: name a file, or - for standard input");
    if (lb_run_set_threads((int)a.threads) < 0)
        return lb_cli_fail(cmd);
    lb_model *model = lb_checkpoint_load_model(a.ck);
    if (!model)
        return lb_cli_fail(cmd);
    code = stream_tokens(&a, model);
    lb_model_free(model);
    return code;
}

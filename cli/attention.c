/* `lookback attention`: where each head of a trained attention model looks on one
 * example (lab/inspect.h does the work). */
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli/cli.h"
#include "lab/inspect.h"
#include "lab/run.h"
#include "lab/run_config.h"

static void usage(FILE *out)
{
    fputs("usage: lookback attention --checkpoint C --data F [--split S] [--example I] [--layers L,...]\n"
          "                          [--heads H,...] [--queries Q,...] [--top-k K] -o DIR\n"
          "\n"
          "Runs the checkpoint's attention model on one example and writes into the new folder DIR,\n"
          "for every chosen layer and head, the chosen queries' attention weights as a heatmap\n"
          "(layer<l>_head<h>.png and .svg), the keys each query reads most (top_keys.txt), and every\n"
          "chosen layer's weights in bertviz's layout (attention.h5: \"attention\" [layers, 1, heads, T, T]).\n"
          "docs/inspect.md describes the files.\n"
          "\n"
          "  --checkpoint C   a checkpoint of an attention family (transformer, local, ...)\n"
          "  --data F         a task file or text corpus the model reads\n"
          "  --split S        train, val or test (default test)\n"
          "  --example I      the example's index in the split (default 0)\n"
          "  --layers L,...   layer indices, from 0 (default: all)\n"
          "  --heads H,...    head indices, from 0 (default: all)\n"
          "  --queries Q,...  query positions drawn and listed (default: every query up to 256\n"
          "                   positions, else the last one, which a sequence classifier reads)\n"
          "  --top-k K        keys listed per query (default 5)\n"
          "  -o, --out DIR    the folder to make (it must not exist)\n",
          out);
}

/* "0,2,5" into values (at most LB_INSPECT_MAX_CHOSEN, each in [0, INT32_MAX]). */
static lb_status parse_list(const char *option, const char *text, int64_t *values, int *n)
{
    *n = 0;
    const char *p = text;
    while (*p) {
        char *end;
        long long v = strtoll(p, &end, 10);
        if (end == p || v < 0 || v > INT32_MAX || (*end && *end != ','))
            return lb_error(LB_ERR_VALUE, "%s %s: a comma-separated list of indices >= 0", option, text);
        if (*n == LB_INSPECT_MAX_CHOSEN)
            return lb_error(LB_ERR_VALUE, "%s %s: at most %d indices", option, text, LB_INSPECT_MAX_CHOSEN);
        values[(*n)++] = v;
        p = *end ? end + 1 : end;
        if (*end && !*p)
            return lb_error(LB_ERR_VALUE, "%s %s: a comma-separated list of indices >= 0", option, text);
    }
    if (*n == 0)
        return lb_error(LB_ERR_VALUE, "%s: an empty list", option);
    return LB_OK;
}

static lb_status parse_ints(const char *option, const char *text, int *values, int *n)
{
    int64_t wide[LB_INSPECT_MAX_CHOSEN];
    lb_status st = parse_list(option, text, wide, n);
    for (int i = 0; st == LB_OK && i < *n; i++)
        values[i] = (int)wide[i];
    return st;
}

int lb_cli_attention(int argc, char **argv)
{
    const char *cmd = "attention";
    static const struct option opts[] = {
        {"checkpoint", required_argument, NULL, 'c'}, {"data", required_argument, NULL, 'd'},
        {"split", required_argument, NULL, 's'},      {"example", required_argument, NULL, 'e'},
        {"layers", required_argument, NULL, 'l'},     {"heads", required_argument, NULL, 'H'},
        {"queries", required_argument, NULL, 'q'},    {"top-k", required_argument, NULL, 'k'},
        {"out", required_argument, NULL, 'o'},        {"help", no_argument, NULL, 'h'},
        {NULL, 0, NULL, 0},
    };
    lb_inspect_options o;
    memset(&o, 0, sizeof o);
    int64_t top_k = 5;
    optind = 1;
    opterr = 0;
    int c;
    lb_status st = LB_OK;
    while ((c = getopt_long(argc, argv, ":ho:", opts, NULL)) != -1 && st == LB_OK) {
        switch (c) {
        case 'c': o.checkpoint = optarg; break;
        case 'd': o.data = optarg; break;
        case 's': st = lb_cli_split("--split", optarg, &o.split); break;
        case 'e': st = lb_option_int("--example", optarg, 0, INT64_MAX, &o.example); break;
        case 'l': st = parse_ints("--layers", optarg, o.layers, &o.n_layers); break;
        case 'H': st = parse_ints("--heads", optarg, o.heads, &o.n_heads); break;
        case 'q': st = parse_list("--queries", optarg, o.queries, &o.n_queries); break;
        case 'k': st = lb_option_int("--top-k", optarg, 1, 1000, &top_k); break;
        case 'o': o.out_dir = optarg; break;
        case 'h': usage(stdout); return 0;
        default: return lb_cli_bad_option(cmd, c, argv);
        }
    }
    if (st != LB_OK)
        return lb_cli_error(cmd, 2, "%s", lb_last_error());
    if (optind < argc)
        return lb_cli_error(cmd, 2, "unexpected argument '%s'", argv[optind]);
    if (!o.checkpoint || !o.data || !o.out_dir)
        return lb_cli_error(cmd, 2, "--checkpoint, --data and -o are required (lookback attention --help)");
    o.top_k = (int)top_k;
    if (lb_run_set_threads(0) < 0)
        return lb_cli_fail(cmd);
    lb_inspect_result r;
    if (lb_inspect_attention(&o, &r) != LB_OK)
        return lb_last_status() == LB_ERR_VALUE ? lb_cli_error(cmd, 2, "%s", lb_last_error()) : lb_cli_fail(cmd);
    printf("%s: %s model, %d layer%s x %d head%s, %lld queries over %lld positions: attention.h5, top_keys.txt and "
           "%d heatmaps\n",
           o.out_dir, r.model, r.layers, r.layers == 1 ? "" : "s", r.heads, r.heads == 1 ? "" : "s", (long long)r.queries,
           (long long)r.seq_len, r.plots);
    return 0;
}

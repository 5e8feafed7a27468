/* lookback predict: a checkpoint's outputs for every example of a split, as HDF5
 * datasets; --incremental computes them through the streaming path (layers/stream.h). */
#include <getopt.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "cli/cli.h"
#include "data/events.h"
#include "data/results.h"
#include "data/output.h"
#include "layers/stream.h"
#include "train/trainer.h"

static void predict_usage(FILE *out)
{
    fputs("usage: lookback predict --checkpoint CK.h5 --data FILE.h5 -o OUT.h5 [options]\n"
          "       lookback predict --checkpoint CK.h5 --csv LOG.csv -o SCORES.csv [--chunk N] [--max-context N]\n"
          "                        [--missing refuse|skip|previous]\n"
          "\n"
          "Writes, for each example of a split, the model's logits (or regression output), the\n"
          "predicted class, the target and the clue distance as HDF5 datasets, with attributes\n"
          "naming the checkpoint and the data file. Positions past an example's length hold NaN\n"
          "(predicted class -1).\n"
          "\n"
          "  -o, --out OUT.h5        the file to write (an existing file is refused without --force)\n"
          "  --split NAME            train | val | test (default test)\n"
          "  --examples N            the first N examples only (default all; a split with fewer\n"
          "                          gives all it has)\n"
          "  --batch N               examples per forward pass, or streams at once (default 16)\n"
          "  --seq-len T             text corpora: the window length (default: the one the model was\n"
          "                          trained with, as eval); the split is cut into non-overlapping\n"
          "                          windows of T tokens, each an example with T next-token targets\n"
          "  --incremental           feed each example through the streaming path, --chunk events\n"
          "                          at a time (the same numbers as the full forward, within 1e-4)\n"
          "  --chunk N               events per streaming step with --incremental (default 1)\n"
          "  --max-context N         with --incremental: full attention keeps the last N events only\n"
          "                          (an approximation; default all)\n"
          "  --force                 replace OUT.h5 if it is a regular file (never the --data file or\n"
          "                          the checkpoint, however the path is spelled)\n"
          "  --csv LOG.csv           (a model trained on an imported event log) score every row of a CSV\n"
          "                          of the training layout, its stored scaling and token maps applied,\n"
          "                          one stream per source; writes SCORES.csv: row, line, source,\n"
          "                          position, label, predicted, probability, score (the anomaly score:\n"
          "                          p(class 1), or 1 - p(class 0) with more classes); --chunk N feeds N\n"
          "                          rows at a time (default: each source at once); docs/events.md\n"
          "  --missing POLICY        with --csv, an empty value: refuse, skip the row or previous (its\n"
          "                          source's previous value), as data csv --missing (default: the policy\n"
          "                          the training file was imported with, stored in the checkpoint)\n"
          "  --threads N             threads (default OMP_NUM_THREADS or all processors)\n",
          out);
}

/* Copies a model output for examples [start, start + B): y [B, P, W] laid out as
 * `rows`, row of example b at position p; positions >= limit[b] become NaN. */
static void store_rows(lb_predictions *pr, int64_t start, int64_t b, const lb_tensor *y, const int32_t *lengths)
{
    int64_t p = pr->positions, w = pr->width;
    for (int64_t i = 0; i < b; i++)
        for (int64_t t = 0; t < p; t++)
            for (int64_t k = 0; k < w; k++) {
                int past = p > 1 && lengths && t >= lengths[i];
                pr->output[((start + i) * p + t) * w + k] = past ? NAN : lb_tensor_flat(y, (i * p + t) * w + k);
            }
}

/* The streaming path for one batch: every example is a stream, fed `chunk` events
 * at a time; the head's output at each example's last event (per-sequence targets)
 * or at every event (per-position targets) is kept. */
static lb_status predict_incremental(lb_model *model, const lb_model_input *in, int64_t chunk,
                                     const lb_stream_options *opt, lb_predictions *pr, int64_t start)
{
    int64_t b = in->batch, t = in->seq_len, w = pr->width, f = in->features ? in->features->shape[2] : 0;
    lb_model_state *s = lb_model_state_new(model, b, opt);
    int32_t *tokens = malloc((size_t)(b * chunk) * sizeof *tokens), *counts = malloc((size_t)b * sizeof *counts);
    lb_status st = s && tokens && counts ? LB_OK : lb_last_status();
    if (st == LB_OK && (!tokens || !counts))
        st = lb_error(LB_ERR_MEMORY, "predict: out of memory");
    for (int64_t t0 = 0; st == LB_OK && t0 < t; t0 += chunk) {
        int64_t n = t - t0 < chunk ? t - t0 : chunk;
        lb_tensor *feat = NULL;
        for (int64_t i = 0; i < b; i++) {
            int64_t left = (in->lengths ? in->lengths[i] : t) - t0;
            counts[i] = (int32_t)(left < 0 ? 0 : left > n ? n : left);
            if (in->tokens)
                memcpy(tokens + i * n, in->tokens + i * t + t0, (size_t)n * sizeof *tokens);
        }
        if (in->features) {
            lb_tensor *v = lb_tensor_slice(in->features, 1, t0, t0 + n, 1);
            feat = v ? lb_tensor_copy(v, v->dtype) : NULL;
            lb_tensor_free(v);
            if (!feat) {
                st = lb_last_status();
                break;
            }
        }
        lb_model_input ci = {b, n, in->tokens ? tokens : NULL, feat, counts};
        lb_tensor *y = lb_model_step_chunk(s, &ci); /* [B, n, W] or [B, n] */
        lb_tensor_free(feat);
        if (!y) {
            st = lb_last_status();
            break;
        }
        for (int64_t i = 0; i < b; i++)
            for (int64_t j = 0; j < counts[i]; j++) {
                int64_t pos = t0 + j, last = (in->lengths ? in->lengths[i] : t) - 1;
                if (pr->positions == 1 && pos != last)
                    continue;
                int64_t row = pr->positions == 1 ? 0 : pos;
                for (int64_t k = 0; k < w; k++)
                    pr->output[((start + i) * pr->positions + row) * w + k] = lb_tensor_flat(y, (i * n + j) * w + k);
            }
        lb_tensor_free(y);
    }
    (void)f;
    free(tokens);
    free(counts);
    lb_model_state_free(s);
    return st;
}

/* Accuracy over the scored targets (or MSE for regression), for the summary line. */
static double summary_metric(const lb_predictions *pr, const int32_t *targets, const float *values, int64_t *scored)
{
    double sum = 0;
    *scored = 0;
    for (int64_t i = 0; i < pr->n * pr->positions; i++) {
        const double *row = pr->output + i * pr->width;
        if (values) {
            sum += (row[0] - values[i]) * (row[0] - values[i]);
            ++*scored;
            continue;
        }
        if (targets[i] < 0 || isnan(row[0]))
            continue;
        int best = 0;
        for (int64_t k = 1; k < pr->width; k++)
            if (row[k] > row[best])
                best = (int)k;
        sum += best == targets[i];
        ++*scored;
    }
    return *scored ? sum / (double)*scored : NAN;
}

int lb_cli_predict(int argc, char **argv)
{
    const char *cmd = "predict", *ck = NULL, *data_path = NULL, *split = "test", *out = NULL, *csv = NULL;
    int64_t examples = 0, batch = 16, threads = 0, chunk = 1, max_context = 0, seq_len = 0;
    int incremental = 0, force = 0, missing = -1;
    lb_missing_policy policy;
    static const struct option opts[] = {
        {"checkpoint", required_argument, NULL, 'c'}, {"data", required_argument, NULL, 'd'},
        {"split", required_argument, NULL, 's'},      {"examples", required_argument, NULL, 'n'},
        {"batch", required_argument, NULL, 'b'},      {"out", required_argument, NULL, 'o'},
        {"incremental", no_argument, NULL, 'i'},      {"chunk", required_argument, NULL, 'C'},
        {"max-context", required_argument, NULL, 'm'}, {"force", no_argument, NULL, 'f'},
        {"threads", required_argument, NULL, 't'},    {"help", no_argument, NULL, 'h'},
        {"csv", required_argument, NULL, 'V'},        {"missing", required_argument, NULL, 'M'},
        {"seq-len", required_argument, NULL, 'T'},    {NULL, 0, NULL, 0},
    };
    optind = 1;
    opterr = 0;
    int c, chunk_set = 0, context_set = 0, other_set = 0;
    lb_status st = LB_OK;
    while ((c = getopt_long(argc, argv, ":ho:", opts, NULL)) != -1 && st == LB_OK) {
        switch (c) {
        case 'c': ck = optarg; break;
        case 'd': data_path = optarg; break;
        case 's': st = lb_cli_split("--split", optarg, &split); other_set = 1; break;
        case 'n': st = lb_option_int("--examples", optarg, 0, INT64_MAX, &examples); other_set = 1; break;
        case 'b': st = lb_option_int("--batch", optarg, 1, 1 << 16, &batch); other_set = 1; break;
        case 'o': out = optarg; break;
        case 'V': csv = optarg; break;
        case 'T': st = lb_cli_seq_len(optarg, &seq_len); other_set = 1; break;
        case 'M':
            if ((st = lb_missing_parse(optarg, &policy)) == LB_OK)
                missing = (int)policy;
            break;
        case 'i': incremental = 1; other_set = 1; break;
        case 'C': st = lb_option_int("--chunk", optarg, 1, 1 << 20, &chunk); chunk_set = 1; break;
        case 'm': st = lb_option_int("--max-context", optarg, 1, INT32_MAX, &max_context); context_set = 1; break;
        case 'f': force = 1; break;
        case 't': st = lb_option_int("--threads", optarg, 0, 1024, &threads); break;
        case 'h': predict_usage(stdout); return 0;
        default: return lb_cli_bad_option(cmd, c, argv);
        }
    }
    if (st != LB_OK)
        return lb_cli_error(cmd, 2, "%s", lb_last_error());
    if (optind < argc)
        return lb_cli_error(cmd, 2, "unexpected argument '%s'", argv[optind]);
    if (csv) { /* an event log of the training layout, row by row */
        if (data_path || other_set)
            return lb_cli_error(cmd, 2, "--csv reads rows, not a data file: drop --data, --split, --examples, --batch, "
                                "--seq-len and --incremental");
        if (!ck || !out || !out[0] || !csv[0])
            return lb_cli_error(cmd, 2, "--checkpoint, --csv and -o are required");
        if (lb_run_set_threads((int)threads) < 0)
            return lb_cli_fail(cmd);
        return lb_cli_predict_csv(ck, csv, out, force, chunk_set ? chunk : 0, max_context, missing);
    }
    if (missing >= 0)
        return lb_cli_error(cmd, 2, "--missing applies to CSV rows (--csv) only: a data file has no empty values; drop it");
    if (!ck || !data_path || !out)
        return lb_cli_error(cmd, 2, "--checkpoint, --data and -o are required");
    if (!out[0])
        return lb_cli_error(cmd, 2, "-o is empty: name the file to write");
    if ((chunk_set || context_set) && !incremental)
        return lb_cli_error(cmd, 2, "%s applies to the streaming path only: add --incremental",
                            chunk_set ? "--chunk" : "--max-context");
    /* whatever the spelling of -o, it is never the data file or the checkpoint (even with --force) */
    if (lb_output_protect(data_path, "the --data file") != LB_OK || lb_output_protect(ck, "the --checkpoint file") != LB_OK ||
        lb_output_check(out, "predictions file") != LB_OK)
        return lb_cli_fail(cmd);
    struct stat sb;
    if (stat(out, &sb) == 0 && !force)
        return lb_cli_error(cmd, 1, "%s already exists; choose another -o or add --force", out);
    int replace = lb_output_present(out); /* with --force: what was there now, nothing that appears later */
    if (lb_run_set_threads((int)threads) < 0)
        return lb_cli_fail(cmd);
    lb_dataset *data = lb_dataset_open(data_path);
    if (!data)
        return lb_cli_fail(cmd);
    /* a text corpus: windows of the model's context (or --seq-len), the model's vocabulary */
    int code = lb_cli_fit_data(cmd, ck, data, seq_len);
    if (code != 0) {
        lb_dataset_close(data);
        return code;
    }
    lb_model *model = lb_checkpoint_load_model(ck);
    int64_t n = lb_dataset_split_size(data, split);
    char task[64] = "";
    if (!model || lb_checkpoint_read_task(ck, task, sizeof task) != LB_OK ||
        lb_model_data_check(lb_model_get_config(model), task, data) != LB_OK || n < 0) {
        code = lb_cli_fail(cmd);
        goto done;
    }
    if (lb_cli_check_max_context(ck, lb_model_get_config(model), max_context) != LB_OK) {
        code = lb_cli_error(cmd, 2, "%s", lb_last_error()); /* an option that does not apply: usage */
        goto done;
    }
    if (examples > 0 && examples < n)
        n = examples;
    if (n == 0) {
        code = lb_cli_error(cmd, 1, "%s: the %s split is empty", data_path, split);
        goto done;
    }
    const lb_model_config *mc = lb_model_get_config(model);
    int64_t t = lb_dataset_seq_len(data);
    lb_predictions pr = {n, mc->head == LB_HEAD_EVERY ? t : 1, mc->num_classes > 0 ? mc->num_classes : 1,
                         mc->num_classes == 0, NULL};
    lb_batch all;
    memset(&all, 0, sizeof all);
    pr.output = malloc((size_t)(pr.n * pr.positions * pr.width) * sizeof *pr.output);
    if (!pr.output || lb_dataset_slice(data, split, 0, n, &all) != LB_OK) {
        if (!pr.output)
            lb_error(LB_ERR_MEMORY, "predict: out of memory for %lld examples", (long long)n);
        code = lb_cli_fail(cmd);
        free(pr.output);
        goto done;
    }
    lb_graph *g = lb_graph_new();
    lb_graph_set_grad_enabled(g, 0);
    lb_stream_options so = {0, max_context, 0};
    double t_start = lb_clock_wall();
    for (int64_t start = 0; start < n && st == LB_OK; start += batch) {
        int64_t count = n - start < batch ? n - start : batch;
        lb_batch b;
        if ((st = lb_dataset_slice(data, split, start, count, &b)) != LB_OK)
            break;
        lb_tensor *feat = b.features ? lb_tensor_copy(b.features, mc->dtype) : NULL;
        lb_model_input in = {count, t, b.tokens, feat, b.lengths};
        if (b.features && !feat) {
            st = lb_last_status();
        } else if (incremental) {
            st = predict_incremental(model, &in, chunk, &so, &pr, start);
        } else {
            lb_var *y = lb_model_forward(g, model, &in, 0, NULL, NULL);
            if (!y)
                st = lb_last_status();
            else
                store_rows(&pr, start, count, y->value, b.lengths);
            lb_graph_reset(g);
        }
        lb_tensor_free(feat);
        lb_batch_free(&b);
    }
    double seconds = lb_clock_wall() - t_start;
    lb_graph_free(g);
    lb_predictions_source source = {ck, data_path, split, lb_model_kind_name(mc->kind),
                                    incremental ? "incremental" : "full"};
    if (st != LB_OK || lb_predictions_write(out, &pr, &all, &source, replace) != LB_OK) {
        code = lb_cli_fail(cmd);
    } else {
        int64_t scored;
        double metric = summary_metric(&pr, all.targets, all.target_values, &scored);
        printf("%s: %lld examples of the %s split through the %s path in %.2f s; %s %.4f over %lld %s\n", out,
               (long long)n, split, incremental ? "streaming" : "full-sequence", seconds,
               all.target_values ? "mse" : "accuracy", metric, (long long)scored,
               pr.positions > 1 ? "positions" : "examples");
    }
    lb_batch_free(&all);
    free(pr.output);
done:
    lb_model_free(model);
    lb_dataset_close(data);
    return code;
}

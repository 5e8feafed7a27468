/* `lookback predict --csv` and `lookback stream --csv`: a trained detector scores the rows
 * of a CSV event log of its training layout (train/score.h: the stored scaling and token
 * maps applied, one stream per source). This file parses nothing but options; it calls
 * the library and prints. */
#include <errno.h>
#include <json-c/json.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cli/cli.h"
#include "data/events.h"
#include "data/output.h"
#include "layers/stream.h"
#include "train/score.h"
#include "tensor/clock.h"
#include "train/trainer.h"

int lb_cli_predict_csv(const char *ck, const char *csv, const char *out, int force, int64_t chunk, int64_t max_context,
                       int missing)
{
    const char *cmd = "predict";
    if (strcmp(csv, "-") != 0 && lb_output_protect(csv, "the --csv file") != LB_OK)
        return lb_cli_fail(cmd);
    if (lb_output_protect(ck, "the --checkpoint file") != LB_OK || lb_output_check(out, "scores file") != LB_OK)
        return lb_cli_fail(cmd);
    if (access(out, F_OK) == 0 && !force)
        return lb_cli_error(cmd, 1, "%s already exists; choose another -o or add --force", out);
    lb_event_schema *schema = NULL;
    lb_model *model = lb_event_model_load(ck, missing, &schema);
    if (!model)
        return lb_cli_fail(cmd);
    int code = 0;
    if (lb_cli_check_max_context(ck, lb_model_get_config(model), max_context) != LB_OK) {
        code = lb_cli_error(cmd, 2, "%s", lb_last_error());
        goto done;
    }
    if (strlen(out) + sizeof ".tmp" > 4200) {
        code = lb_cli_error(cmd, 2, "-o: path too long");
        goto done;
    }
    double start = lb_clock_wall();
    int64_t rows = 0, flagged = 0;
    if (lb_event_score_write(model, schema, csv, out, chunk, max_context, &rows, &flagged) != LB_OK)
        code = lb_cli_fail(cmd);
    else
        printf("%s: %lld rows of %s scored (one stream per source, %s) in %.2f s; %lld flagged (predicted class != 0)\n",
               out, (long long)rows, csv, chunk > 0 ? "chunked" : "each source as one chunk", lb_clock_wall() - start,
               (long long)flagged);
done:
    lb_model_free(model);
    lb_event_schema_free(schema);
    return code;
}

/* ---- stream ---- */

/* One scored row on standard output (CSV, or JSON with json); 1 when the write failed. */
static int print_score(const lb_event_score *s, int json)
{
    int bad;
    if (json) {
        json_object *o = json_object_new_object();
        json_object_object_add(o, "row", json_object_new_int64(s->row));
        json_object_object_add(o, "line", json_object_new_int64(s->line));
        json_object_object_add(o, "source", json_object_new_string(s->key));
        json_object_object_add(o, "position", json_object_new_int64(s->position));
        json_object_object_add(o, "label", s->label >= 0 ? json_object_new_int(s->label) : NULL);
        json_object_object_add(o, "class", json_object_new_int(s->predicted));
        json_object_object_add(o, "probability", json_object_new_double(s->probability));
        json_object_object_add(o, "score", json_object_new_double(s->score));
        json_object_object_add(o, "unseen_tokens", json_object_new_int64(s->unseen));
        bad = printf("%s\n", json_object_to_json_string_ext(o, JSON_C_TO_STRING_PLAIN)) < 0;
        json_object_put(o);
    } else {
        bad = lb_event_score_print_csv(stdout, s);
    }
    return bad || fflush(stdout) != 0 || ferror(stdout);
}

int lb_cli_stream_csv(const char *ck, const char *csv, int64_t every, int json, int64_t max_context, int missing)
{
    const char *cmd = "stream";
    lb_event_schema *schema = NULL;
    lb_model *model = lb_event_model_load(ck, missing, &schema);
    if (!model)
        return lb_cli_fail(cmd);
    int code = 0;
    char *held_key = NULL;
    lb_event_scorer *scorer = NULL;
    lb_event_reader *reader = NULL;
    if (lb_cli_check_max_context(ck, lb_model_get_config(model), max_context) != LB_OK) {
        code = lb_cli_error(cmd, 2, "%s", lb_last_error());
        goto done;
    }
    if (!(scorer = lb_event_scorer_new(model, schema, max_context)) || !(reader = lb_event_reader_open(csv, schema))) {
        code = lb_cli_fail(cmd);
        goto done;
    }
    if (!json && (printf("%s\n", lb_event_score_csv_header()) < 0 || fflush(stdout) != 0)) {
        code = lb_cli_error(cmd, 1, "cannot write to standard output: %s", lb_system_error(errno));
        goto done;
    }
    lb_event_row row;
    lb_event_score s, held; /* held: the last row when --every did not print it, printed at the end */
    int64_t n = 0, flagged = 0, unseen = 0;
    int got, have_held = 0;
    while ((got = lb_event_reader_next(reader, &row)) == 1) {
        if (lb_event_scorer_row(scorer, &row, &s) != LB_OK) {
            code = lb_cli_error(cmd, 1, "%s, row %lld: %s", strcmp(csv, "-") == 0 ? "standard input" : csv, (long long)row.row, lb_last_error());
            goto done;
        }
        n++;
        flagged += s.predicted != 0;
        unseen += s.unseen;
        have_held = n % every != 0;
        if (have_held) { /* the key is valid during the call only: kept as a copy */
            char *key = realloc(held_key, strlen(s.key) + 1);
            if (!key) {
                code = lb_cli_error(cmd, 1, "out of memory");
                goto done;
            }
            held_key = strcpy(key, s.key);
            held = s;
            held.key = held_key;
            continue;
        }
        if (print_score(&s, json)) {
            code = lb_cli_error(cmd, 1, "cannot write to standard output: %s", errno ? lb_system_error(errno) : "write error");
            goto done;
        }
    }
    if (got == 0 && have_held && print_score(&held, json)) { /* the last row, which --every skipped */
        code = lb_cli_error(cmd, 1, "cannot write to standard output: %s", errno ? lb_system_error(errno) : "write error");
        goto done;
    }
    if (got < 0) {
        code = lb_cli_fail(cmd);
        goto done;
    }
    fprintf(stderr, "lookback stream: %lld rows of %lld sources, %lld flagged (predicted class != 0), %lld token values "
                    "unseen in training, %lld rows with missing values skipped; states %zu bytes\n",
            (long long)n, (long long)lb_event_scorer_sources(scorer), (long long)flagged, (long long)unseen,
            (long long)lb_event_reader_skipped(reader), lb_event_scorer_bytes(scorer));
done:
    free(held_key);
    lb_event_reader_close(reader);
    lb_event_scorer_free(scorer);
    lb_model_free(model);
    lb_event_schema_free(schema);
    return code;
}

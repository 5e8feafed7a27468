/* CSV event logs: the RFC 4180 reader (quotes, embedded commas and line breaks, CRLF,
 * header, byte-order mark, blank lines), and the import: grouping, stable ordering,
 * windows, splits without leakage (time and seeded sequence), scaling from the train
 * split stored and applied identically (import, --like, the row reader), token maps and
 * the unseen slot, the schema's JSON round trip and its checks. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "data/csv.h"
#include "data/dataset.h"
#include "data/events.h"
#include "support.h"

static char dir[256];

static const char *path_of(const char *name)
{
    static char buf[4][512];
    static int next;
    char *p = buf[next++ % 4];
    snprintf(p, 512, "%s/%s", dir, name);
    return p;
}

static void write_text(const char *path, const char *text)
{
    FILE *f = fopen(path, "wb");
    CU_ASSERT_PTR_NOT_NULL_FATAL(f);
    fwrite(text, 1, strlen(text), f);
    fclose(f);
}

/* ---- the reader ---- */

static void test_reader_rfc4180(void)
{
    const char *p = path_of("rfc.csv");
    write_text(p, "\xEF\xBB\xBF\"id\",\"note\",value\r\n"
                  "1,\"hello, world\",2.5\r\n"
                  "2,\"line1\nline2\",3\r\n"
                  "\r\n"
                  "3,\"say \"\"hi\"\"\",4\n"
                  "4,,5");
    lb_csv_reader *r = lb_csv_open(p, "rfc.csv");
    CU_ASSERT_PTR_NOT_NULL_FATAL(r);
    lb_csv_record rec;
    CU_ASSERT_EQUAL(lb_csv_next(r, &rec), 1);
    CU_ASSERT_EQUAL(rec.n_fields, 3);
    CU_ASSERT_STRING_EQUAL(rec.field[0], "id"); /* the byte-order mark is not part of the name */
    CU_ASSERT_STRING_EQUAL(rec.field[2], "value");
    CU_ASSERT_EQUAL(rec.row, 1);
    CU_ASSERT_EQUAL(lb_csv_next(r, &rec), 1);
    CU_ASSERT_STRING_EQUAL(rec.field[1], "hello, world");
    CU_ASSERT_STRING_EQUAL(rec.field[2], "2.5"); /* CRLF: no \r left in the last field */
    CU_ASSERT_EQUAL(rec.row, 2);
    CU_ASSERT_EQUAL(rec.line, 2);
    CU_ASSERT_EQUAL(lb_csv_next(r, &rec), 1);
    CU_ASSERT_STRING_EQUAL(rec.field[1], "line1\nline2");
    CU_ASSERT_EQUAL(rec.row, 3);
    CU_ASSERT_EQUAL(rec.line, 3);
    CU_ASSERT_EQUAL(lb_csv_next(r, &rec), 1);
    CU_ASSERT_STRING_EQUAL(rec.field[1], "say \"hi\"");
    CU_ASSERT_EQUAL(rec.row, 4);
    CU_ASSERT_EQUAL(rec.line, 6); /* the embedded line break and the blank line are lines of the file */
    CU_ASSERT_EQUAL(lb_csv_next(r, &rec), 1);
    CU_ASSERT_EQUAL(rec.n_fields, 3);
    CU_ASSERT_STRING_EQUAL(rec.field[1], "");
    CU_ASSERT_STRING_EQUAL(rec.field[2], "5"); /* a last row without a line break */
    CU_ASSERT_EQUAL(rec.line, 7);
    CU_ASSERT_EQUAL(lb_csv_next(r, &rec), 0);
    CU_ASSERT_EQUAL(lb_csv_next(r, &rec), 0);
    lb_csv_close(r);
}

static void test_reader_malformed(void)
{
    static const struct {
        const char *text, *says;
    } cases[] = {
        {"a,b\n1,\"2\n", "still open at the end of the file"},
        {"a,b\n1,2\"x\n", "malformed CSV"},
        {"a,b\n1,\"2\"x\n", "malformed CSV"},
        {"a,b\n1,\0002\n", "NUL byte"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        const char *p = path_of("bad.csv");
        FILE *f = fopen(p, "wb");
        size_t len = i == 3 ? 10 : strlen(cases[i].text);
        fwrite(cases[i].text, 1, len, f);
        fclose(f);
        lb_csv_reader *r = lb_csv_open(p, "bad.csv");
        CU_ASSERT_PTR_NOT_NULL_FATAL(r);
        lb_csv_record rec;
        CU_ASSERT_EQUAL(lb_csv_next(r, &rec), 1); /* the header */
        CU_ASSERT_EQUAL(lb_csv_next(r, &rec), -1);
        CU_ASSERT_EQUAL(lb_last_status(), LB_ERR_FORMAT);
        CU_ASSERT_TRUE(lb_test_error_has(cases[i].says));
        CU_ASSERT_TRUE(lb_test_error_has("bad.csv: row 2 (line 2)"));
        if (!lb_test_error_has(cases[i].says))
            fprintf(stderr, "\n  case %zu: %s\n", i, lb_last_error());
        lb_csv_close(r);
    }
    CU_ASSERT_PTR_NULL(lb_csv_open(dir, NULL));
    CU_ASSERT_TRUE(lb_test_error_has("is a folder"));
    CU_ASSERT_PTR_NULL(lb_csv_open(path_of("absent.csv"), NULL));
    CU_ASSERT_EQUAL(lb_last_status(), LB_ERR_IO);
}

/* ---- the import ---- */

/* Two sources, out of order, a tie on the order key, a token column. */
static const char *const two_sources = "src,t,x,kind,y\n"
                                       "a,3,30,p,0\n"
                                       "b,1,100,q,1\n"
                                       "a,1,10,p,1\n"
                                       "a,2,20,q,0\n"
                                       "a,2,25,r,1\n"
                                       "b,2,200,q,0\n"
                                       "a,4,40,p,0\n"
                                       "b,3,300,p,1\n";

static lb_csv_options two_sources_options(void)
{
    lb_csv_options o;
    lb_csv_options_default(&o);
    o.sequence_key = "src";
    o.order_key = "t";
    o.features = "x";
    o.tokens = "kind";
    o.label = "y";
    o.seq_len = 2;
    o.val_fraction = 0;
    o.test_fraction = 0;
    return o;
}

static void test_import_groups_orders_windows(void)
{
    write_text(path_of("two.csv"), two_sources);
    lb_csv_options o = two_sources_options();
    lb_event_schema *s = NULL;
    CU_ASSERT_EQUAL_FATAL(lb_csv_import(path_of("two.csv"), &o, path_of("two.h5"), &s), LB_OK);
    /* x over the 8 train rows: mean 90.625, population std 98.69262573769126 */
    CU_ASSERT_EQUAL(s->n_features, 1);
    CU_ASSERT_DOUBLE_EQUAL(s->features[0].mean, 90.625, 1e-12);
    CU_ASSERT_DOUBLE_EQUAL(s->features[0].std, 98.69262573769126, 1e-9);
    CU_ASSERT_EQUAL(s->n_tokens, 1);
    CU_ASSERT_EQUAL(s->tokens[0].n_values, 3); /* p, q, r in order of first appearance */
    CU_ASSERT_STRING_EQUAL(s->tokens[0].values[0], "p");
    CU_ASSERT_STRING_EQUAL(s->tokens[0].values[1], "q");
    CU_ASSERT_STRING_EQUAL(s->tokens[0].values[2], "r");
    CU_ASSERT_EQUAL(s->input_features, 1 + 4);
    CU_ASSERT_EQUAL(s->num_classes, 2);
    CU_ASSERT_EQUAL(s->sources, 2);
    /* a: 5 rows -> windows at 0, 2 and one ending at row 5 (start 3); b: 3 rows -> 0, 1 */
    CU_ASSERT_EQUAL(s->windows[0], 5);
    lb_dataset *ds = lb_dataset_open(path_of("two.h5"));
    CU_ASSERT_PTR_NOT_NULL_FATAL(ds);
    CU_ASSERT_STRING_EQUAL(lb_dataset_task_name(ds), "events");
    CU_ASSERT_PTR_NOT_NULL(lb_dataset_events(ds));
    CU_ASSERT_EQUAL(lb_dataset_num_features(ds), 5);
    CU_ASSERT_EQUAL(lb_dataset_per_position(ds), 1);
    lb_batch b;
    CU_ASSERT_EQUAL_FATAL(lb_dataset_slice(ds, "train", 0, 5, &b), LB_OK);
    /* x of each position, unscaled: a sorted by t with the tie (t = 2) in file order */
    static const double x[5][2] = {{10, 20}, {25, 30}, {30, 40}, {100, 200}, {200, 300}};
    static const int32_t y[5][2] = {{1, 0}, {1, 0}, {-100, 0}, {1, 0}, {-100, 1}};
    static const int kind[5][2] = {{1, 2}, {3, 1}, {1, 1}, {2, 2}, {2, 1}}; /* p=1 q=2 r=3 */
    const float *f = lb_tensor_data(b.features);
    for (int w = 0; w < 5; w++)
        for (int p = 0; p < 2; p++) {
            const float *row = f + (w * 2 + p) * 5;
            CU_ASSERT_DOUBLE_EQUAL(row[0], (float)((x[w][p] - 90.625) / 98.69262573769126), 1e-6);
            for (int k = 0; k < 4; k++)
                CU_ASSERT_EQUAL(row[1 + k], k == kind[w][p] ? 1.0f : 0.0f);
            CU_ASSERT_EQUAL(b.targets[w * 2 + p], y[w][p]);
        }
    CU_ASSERT_DOUBLE_EQUAL(f[0], -0.816930336966492, 1e-6);
    lb_batch_free(&b);
    lb_dataset_close(ds);
    lb_event_schema_free(s);

    /* per sequence: each window's target is its last row's label */
    o.label_per = LB_LABEL_PER_SEQUENCE;
    CU_ASSERT_EQUAL_FATAL(lb_csv_import(path_of("two.csv"), &o, path_of("two_seq.h5"), NULL), LB_OK);
    ds = lb_dataset_open(path_of("two_seq.h5"));
    CU_ASSERT_PTR_NOT_NULL_FATAL(ds);
    CU_ASSERT_EQUAL(lb_dataset_per_position(ds), 0);
    CU_ASSERT_EQUAL_FATAL(lb_dataset_slice(ds, "train", 0, 5, &b), LB_OK);
    static const int32_t last[5] = {0, 0, 0, 0, 1};
    for (int w = 0; w < 5; w++)
        CU_ASSERT_EQUAL(b.targets[w], last[w]);
    lb_batch_free(&b);
    lb_dataset_close(ds);

    /* stride 1: windows at every row, each row still scored once */
    o.label_per = LB_LABEL_PER_EVENT;
    o.stride = 1;
    CU_ASSERT_EQUAL_FATAL(lb_csv_import(path_of("two.csv"), &o, path_of("two_s1.h5"), &s), LB_OK);
    CU_ASSERT_EQUAL(s->windows[0], 4 + 2);
    ds = lb_dataset_open(path_of("two_s1.h5"));
    int64_t counts[2], ignored = 0;
    CU_ASSERT_EQUAL(lb_dataset_label_histogram(ds, "train", counts, &ignored), LB_OK);
    CU_ASSERT_EQUAL(counts[0] + counts[1], 8); /* 8 rows, each scored once */
    CU_ASSERT_EQUAL(counts[1], 4);
    CU_ASSERT_EQUAL(ignored, 12 - 8);
    lb_dataset_close(ds);
    lb_event_schema_free(s);
}

/* x = 1000 * source + t: tells where every position came from. */
static void write_sources(const char *path, int sources, int rows, int unseen_at)
{
    FILE *f = fopen(path, "w");
    fprintf(f, "t,x,device,label\n");
    for (int t = 0; t < rows; t++)
        for (int s = 0; s < sources; s++)
            fprintf(f, "%d,%d,dev%d,%d\n", t, 1000 * s + t, s, t == unseen_at ? 1 : (t * 7 + s) % 5 == 0);
    fclose(f);
}

static void test_split_by_time_no_straddle(void)
{
    write_sources(path_of("time.csv"), 3, 10, -1);
    lb_csv_options o;
    lb_csv_options_default(&o);
    o.sequence_key = "device";
    o.order_key = "t";
    o.features = "x";
    o.label = "label";
    o.seq_len = 2;
    o.val_fraction = 0.2;
    o.test_fraction = 0.2;
    lb_event_schema *s = NULL;
    CU_ASSERT_EQUAL_FATAL(lb_csv_import(path_of("time.csv"), &o, path_of("time.h5"), &s), LB_OK);
    /* per source: rows 0..5 train (3 windows), 6..7 val (1), 8..9 test (1) */
    CU_ASSERT_EQUAL(s->windows[0], 9);
    CU_ASSERT_EQUAL(s->windows[1], 3);
    CU_ASSERT_EQUAL(s->windows[2], 3);
    /* the scaling comes from the train rows only: x = 1000 s + t, t in 0..5 */
    double mean = 0, m2 = 0;
    for (int src = 0; src < 3; src++)
        for (int t = 0; t < 6; t++)
            mean += (1000.0 * src + t) / 18.0;
    for (int src = 0; src < 3; src++)
        for (int t = 0; t < 6; t++)
            m2 += pow(1000.0 * src + t - mean, 2) / 18.0;
    CU_ASSERT_DOUBLE_EQUAL(s->features[0].mean, mean, 1e-9);
    CU_ASSERT_DOUBLE_EQUAL(s->features[0].std, sqrt(m2), 1e-9);
    lb_dataset *ds = lb_dataset_open(path_of("time.h5"));
    CU_ASSERT_PTR_NOT_NULL_FATAL(ds);
    static const char *const splits[3] = {"train", "val", "test"};
    static const int lo[3] = {0, 6, 8}, hi[3] = {5, 7, 9};
    for (int k = 0; k < 3; k++) {
        int64_t n = lb_dataset_split_size(ds, splits[k]);
        lb_batch b;
        CU_ASSERT_EQUAL_FATAL(lb_dataset_slice(ds, splits[k], 0, n, &b), LB_OK);
        const float *f = lb_tensor_data(b.features);
        for (int64_t i = 0; i < n * 2; i++) {
            double x = f[i] * s->features[0].std + s->features[0].mean;
            int t = (int)(lround(x) % 1000);
            CU_ASSERT_TRUE(t >= lo[k] && t <= hi[k]); /* never a row of another split */
        }
        lb_batch_free(&b);
    }
    lb_dataset_close(ds);
    lb_event_schema_free(s);
}

/* The source each window came from (x = 1000 s + t). */
static void window_sources(const char *path, int split_of[10])
{
    for (int i = 0; i < 10; i++)
        split_of[i] = -1;
    lb_dataset *ds = lb_dataset_open(path);
    CU_ASSERT_PTR_NOT_NULL_FATAL(ds);
    const lb_event_schema *s = lb_dataset_events(ds);
    static const char *const splits[3] = {"train", "val", "test"};
    for (int k = 0; k < 3; k++) {
        int64_t n = lb_dataset_split_size(ds, splits[k]);
        lb_batch b;
        CU_ASSERT_EQUAL_FATAL(lb_dataset_slice(ds, splits[k], 0, n, &b), LB_OK);
        const float *f = lb_tensor_data(b.features);
        for (int64_t i = 0; i < n * 4; i++) {
            int src = (int)lround((f[i] * s->features[0].std + s->features[0].mean) / 1000.0 - 0.004);
            CU_ASSERT_TRUE(split_of[src] == -1 || split_of[src] == k); /* a source lies in one split */
            split_of[src] = k;
        }
        lb_batch_free(&b);
    }
    lb_dataset_close(ds);
}

static void test_split_by_sequence_seeded(void)
{
    write_sources(path_of("seq.csv"), 10, 8, -1);
    lb_csv_options o;
    lb_csv_options_default(&o);
    o.sequence_key = "device";
    o.order_key = "t";
    o.features = "x";
    o.label = "label";
    o.seq_len = 4;
    o.split_by = LB_SPLIT_BY_SEQUENCE;
    o.val_fraction = 0.2;
    o.test_fraction = 0.3;
    lb_event_schema *s = NULL;
    CU_ASSERT_EQUAL_FATAL(lb_csv_import(path_of("seq.csv"), &o, path_of("seq1.h5"), &s), LB_OK);
    CU_ASSERT_EQUAL(s->sources_split[0], 5);
    CU_ASSERT_EQUAL(s->sources_split[1], 2);
    CU_ASSERT_EQUAL(s->sources_split[2], 3);
    CU_ASSERT_EQUAL(s->windows[0], 10); /* 8 rows of a source: 2 windows */
    lb_event_schema_free(s);
    int a[10], b[10], c[10];
    window_sources(path_of("seq1.h5"), a);
    CU_ASSERT_EQUAL(lb_csv_import(path_of("seq.csv"), &o, path_of("seq2.h5"), NULL), LB_OK);
    window_sources(path_of("seq2.h5"), b);
    o.seed = 2;
    CU_ASSERT_EQUAL(lb_csv_import(path_of("seq.csv"), &o, path_of("seq3.h5"), NULL), LB_OK);
    window_sources(path_of("seq3.h5"), c);
    int same = 1, differs = 0, count[3] = {0, 0, 0};
    for (int i = 0; i < 10; i++) {
        same &= a[i] == b[i];
        differs |= a[i] != c[i];
        CU_ASSERT_TRUE(a[i] >= 0);
        count[a[i] >= 0 ? a[i] : 0]++;
    }
    CU_ASSERT_TRUE(same);    /* the same seed: the same sources in each split */
    CU_ASSERT_TRUE(differs); /* another seed: another assignment */
    CU_ASSERT_EQUAL(count[0], 5);
    CU_ASSERT_EQUAL(count[1], 2);
    CU_ASSERT_EQUAL(count[2], 3);
}

static void test_tokens_unseen_and_like(void)
{
    /* kind 'z' appears only in the last (test) rows: unseen in training -> slot 0 */
    write_text(path_of("tok.csv"), "kind,x,label\np,1,0\nq,2,1\np,3,0\nq,4,1\np,5,0\nq,6,1\nz,7,0\nz,8,1\n");
    lb_csv_options o;
    lb_csv_options_default(&o);
    o.features = "x";
    o.tokens = "kind";
    o.label = "label";
    o.seq_len = 2;
    o.val_fraction = 0;
    o.test_fraction = 0.25;
    lb_event_schema *s = NULL;
    CU_ASSERT_EQUAL_FATAL(lb_csv_import(path_of("tok.csv"), &o, path_of("tok.h5"), &s), LB_OK);
    CU_ASSERT_EQUAL(s->tokens[0].n_values, 2); /* p, q: z is not a training value */
    CU_ASSERT_DOUBLE_EQUAL(s->features[0].mean, 3.5, 1e-12);
    lb_dataset *ds = lb_dataset_open(path_of("tok.h5"));
    CU_ASSERT_PTR_NOT_NULL_FATAL(ds);
    lb_batch b;
    CU_ASSERT_EQUAL_FATAL(lb_dataset_slice(ds, "test", 0, 1, &b), LB_OK);
    const float *f = lb_tensor_data(b.features); /* [1, 2, 1 + 3] */
    CU_ASSERT_EQUAL(f[1], 1.0f);                 /* unseen slot */
    CU_ASSERT_EQUAL(f[2] + f[3], 0.0f);
    CU_ASSERT_DOUBLE_EQUAL(f[0], (7 - 3.5) / s->features[0].std, 1e-6);
    lb_batch_free(&b);
    lb_dataset_close(ds);

    /* new rows with the stored schema: the same scaling and map, every window in test */
    write_text(path_of("new.csv"), "label,x,kind,extra\n1,100,q,a\n0,-3,w,b\n");
    lb_event_schema *n = NULL;
    CU_ASSERT_EQUAL_FATAL(lb_csv_import_like(path_of("new.csv"), s, path_of("new.h5"), &n), LB_OK);
    CU_ASSERT_TRUE(lb_event_schema_same_reading(s, n, NULL, 0));
    CU_ASSERT_EQUAL(n->windows[2], 1);
    ds = lb_dataset_open(path_of("new.h5"));
    CU_ASSERT_PTR_NOT_NULL_FATAL(ds);
    CU_ASSERT_EQUAL(lb_dataset_split_size(ds, "train"), 0);
    CU_ASSERT_EQUAL_FATAL(lb_dataset_slice(ds, "test", 0, 1, &b), LB_OK);
    f = lb_tensor_data(b.features);
    CU_ASSERT_DOUBLE_EQUAL(f[0], (float)((100 - 3.5) / s->features[0].std), 1e-6);
    CU_ASSERT_EQUAL(f[3], 1.0f); /* q = id 2 */
    CU_ASSERT_DOUBLE_EQUAL(f[4], (float)((-3 - 3.5) / s->features[0].std), 1e-6);
    CU_ASSERT_EQUAL(f[5], 1.0f); /* w: unseen */
    CU_ASSERT_EQUAL(b.targets[0], 1);
    CU_ASSERT_EQUAL(b.targets[1], 0);

    /* the row reader gives the same floats as the file */
    lb_event_reader *r = lb_event_reader_open(path_of("new.csv"), s);
    CU_ASSERT_PTR_NOT_NULL_FATAL(r);
    lb_event_row row;
    for (int i = 0; i < 2; i++) {
        CU_ASSERT_EQUAL_FATAL(lb_event_reader_next(r, &row), 1);
        CU_ASSERT_EQUAL(memcmp(row.features, f + i * 4, 4 * sizeof(float)), 0);
        CU_ASSERT_EQUAL(row.label, 1 - i);
        CU_ASSERT_EQUAL(row.unseen, i);
        CU_ASSERT_EQUAL(row.row, i + 2);
    }
    CU_ASSERT_EQUAL(lb_event_reader_next(r, &row), 0);
    lb_event_reader_close(r);
    lb_batch_free(&b);
    lb_dataset_close(ds);

    /* a file without a needed column cannot be read with the schema */
    write_text(path_of("nox.csv"), "label,kind\n1,p\n");
    CU_ASSERT_PTR_NULL(lb_event_reader_open(path_of("nox.csv"), s));
    CU_ASSERT_TRUE(lb_test_error_has("no column 'x'"));
    lb_event_schema_free(n);
    lb_event_schema_free(s);
}

static void test_missing_policies_and_short_sources(void)
{
    write_text(path_of("miss.csv"), "id,x,label\na,1,0\na,,1\na,3,0\na,4,1\nb,5,0\n");
    lb_csv_options o;
    lb_csv_options_default(&o);
    o.sequence_key = "id";
    o.features = "x";
    o.label = "label";
    o.seq_len = 2;
    o.val_fraction = 0;
    o.test_fraction = 0;
    CU_ASSERT_EQUAL(lb_csv_import(path_of("miss.csv"), &o, path_of("miss.h5"), NULL), LB_ERR_FORMAT);
    CU_ASSERT_TRUE(lb_test_error_has("row 3 (line 3), column 'x' (2): is missing"));
    CU_ASSERT_NOT_EQUAL(access(path_of("miss.h5"), F_OK), 0);
    lb_event_schema *s = NULL;
    o.missing = LB_MISSING_SKIP;
    CU_ASSERT_EQUAL_FATAL(lb_csv_import(path_of("miss.csv"), &o, path_of("miss.h5"), &s), LB_OK);
    CU_ASSERT_EQUAL(s->rows, 4);
    CU_ASSERT_EQUAL(s->rows_skipped, 1);
    CU_ASSERT_EQUAL(s->segments_short, 1); /* b: one row, no window */
    CU_ASSERT_EQUAL(s->windows[0], 2);     /* a: rows 1, 3, 4 -> windows at 0 and 1 */
    CU_ASSERT_DOUBLE_EQUAL(s->features[0].mean, (1 + 3 + 4 + 5) / 4.0, 1e-12);
    lb_event_schema_free(s);
    o.missing = LB_MISSING_PREVIOUS;
    CU_ASSERT_EQUAL_FATAL(lb_csv_import(path_of("miss.csv"), &o, path_of("miss.h5"), &s), LB_OK);
    CU_ASSERT_DOUBLE_EQUAL(s->features[0].mean, (1 + 1 + 3 + 4 + 5) / 5.0, 1e-12); /* the empty x took 1 */
    lb_event_schema_free(s);
    o.short_policy = LB_SHORT_REFUSE;
    CU_ASSERT_EQUAL(lb_csv_import(path_of("miss.csv"), &o, path_of("miss2.h5"), NULL), LB_ERR_FORMAT);
    CU_ASSERT_TRUE(lb_test_error_has("source 'b' has 1 rows"));
    CU_ASSERT_NOT_EQUAL(access(path_of("miss2.h5"), F_OK), 0);
}

static void test_schema_json(void)
{
    write_text(path_of("two.csv"), two_sources);
    lb_csv_options o = two_sources_options();
    lb_event_schema *s = NULL;
    CU_ASSERT_EQUAL_FATAL(lb_csv_import(path_of("two.csv"), &o, path_of("two.h5"), &s), LB_OK);
    char *json = lb_event_schema_to_json(s);
    CU_ASSERT_PTR_NOT_NULL_FATAL(json);
    lb_event_schema *back = lb_event_schema_from_json(json, strlen(json), "json");
    CU_ASSERT_PTR_NOT_NULL_FATAL(back);
    CU_ASSERT_TRUE(lb_event_schema_same_reading(s, back, NULL, 0)); /* the scaling bit for bit */
    CU_ASSERT_EQUAL(memcmp(&s->features[0].std, &back->features[0].std, sizeof(double)), 0);
    lb_event_schema_free(back);
    /* damaged schemas are refused, naming what is wrong */
    static const struct {
        const char *from, *to, *says;
    } edits[] = {
        {"\"std\":", "\"sd\":", "member 'std' is missing"},
        {"\"input_features\":5", "\"input_features\":6", "does not match its columns"},
        {"\"num_classes\":2", "\"num_classes\":1", "num_classes = 1 is outside"},
        {"\"label_per\":\"event\"", "\"label_per\":\"row\"", "label_per 'row'"},
    };
    for (size_t i = 0; i < sizeof edits / sizeof edits[0]; i++) {
        char *at = strstr(json, edits[i].from);
        CU_ASSERT_PTR_NOT_NULL_FATAL(at);
        size_t size = strlen(json) + 64;
        char *bad = malloc(size);
        snprintf(bad, size, "%.*s%s%s", (int)(at - json), json, edits[i].to, at + strlen(edits[i].from));
        CU_ASSERT_PTR_NULL(lb_event_schema_from_json(bad, strlen(bad), "x.h5"));
        CU_ASSERT_TRUE(lb_test_error_has(edits[i].says));
        if (!lb_test_error_has(edits[i].says))
            fprintf(stderr, "\n  edit %zu: %s\n", i, lb_last_error());
        free(bad);
    }
    CU_ASSERT_PTR_NULL(lb_event_schema_from_json("[1]", 3, "x.h5"));
    CU_ASSERT_PTR_NULL(lb_event_schema_from_json("{\"format\":\"lookback-events\"} x", 31, "x.h5"));
    /* a schema that differs in its scaling is not read the same way */
    lb_event_schema *other = lb_event_schema_from_json(json, strlen(json), "json");
    other->features[0].mean += 1e-9;
    char why[256];
    CU_ASSERT_FALSE(lb_event_schema_same_reading(s, other, why, sizeof why));
    CU_ASSERT_PTR_NOT_NULL(strstr(why, "scaled with"));
    lb_event_schema_free(other);
    free(json);
    lb_event_schema_free(s);
}

int main(void)
{
    snprintf(dir, sizeof dir, "/tmp/lookback_test_data_csv_%d", (int)getpid());
    mkdir(dir, 0777);
    const lb_test_case cases[] = {
        {"CSV reader: quotes, embedded commas and line breaks, CRLF, BOM, blank lines, rows and lines",
         test_reader_rfc4180},
        {"CSV reader: an open quote, a stray quote, a NUL byte: one error naming row and line", test_reader_malformed},
        {"import: grouping, stable order, windows, scored once, hand-computed scaling and one-hot",
         test_import_groups_orders_windows},
        {"split by time: windows never straddle, scaling from train rows only", test_split_by_time_no_straddle},
        {"split by sequence: whole sources per split, seeded", test_split_by_sequence_seeded},
        {"tokens: unseen values in slot 0; --like and the row reader apply the same scaling",
         test_tokens_unseen_and_like},
        {"missing values refuse / skip / previous; a short source skipped or refused", test_missing_policies_and_short_sources},
        {"schema JSON: round trip bit for bit, damaged schemas refused", test_schema_json},
        {NULL, NULL},
    };
    int rc = lb_test_main("data_csv", cases);
    char cmd[512];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
    if (system(cmd) != 0)
        rc = 1;
    return rc;
}

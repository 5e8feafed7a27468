/* `lookback data csv` as a user runs it: every malformed or hostile CSV gives exit 1 and
 * one line naming the file, row and column, and nothing is written (no data file, no
 * temporary file, no lock file); usage errors exit 2; `data info` on an imported file
 * shows the sources, windows per split, the features' statistics and a label histogram
 * per split. */
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cli_support.h"

static int exists(const char *path) { return access(path, F_OK) == 0; }

static int nothing_written(const char *out)
{
    char tmp[600], lock[600];
    snprintf(tmp, sizeof tmp, "%s.tmp", out);
    snprintf(lock, sizeof lock, "%s.lock", out);
    return !exists(out) && !exists(tmp) && !exists(lock);
}

static void test_malformed_files(void)
{
    static const struct {
        const char *name, *text;
        size_t len; /* 0: strlen */
        const char *says[3];
    } cases[] = {
        {"empty.csv", "", 0, {"empty.csv", "is empty", NULL}},
        {"header_only.csv", "id,x,label\n", 0, {"header_only.csv", "no data rows", NULL}},
        {"no_column.csv", "id,humidity,label\na,1,0\n", 0, {"no_column.csv", "row 1", "no column 'x'"}},
        {"twice.csv", "id,x,x,label\na,1,2,0\n", 0, {"twice.csv", "column 'x'", "appears twice"}},
        {"ragged.csv", "id,x,label\na,1,0\na,2\n", 0, {"ragged.csv", "row 3 (line 3)", "2 fields"}},
        {"long_row.csv", "id,x,label\na,1,0,9\n", 0, {"long_row.csv", "row 2", "4 fields"}},
        {"text.csv", "id,x,label\na,1,0\na,warm,1\n", 0, {"row 3 (line 3), column 'x' (2)", "'warm'", "not a number"}},
        {"inf.csv", "id,x,label\na,inf,0\n", 0, {"text", "column 'x'", "not a finite number"}},
        {"hex.csv", "id,x,label\na,1,0\na,0x1A,1\n", 0, {"row 3 (line 3), column 'x' (2)", "'0x1A'", "not a number"}},
        {"missing.csv", "id,x,label\na,1,0\na,,1\n", 0, {"missing.csv", "row 3", "is missing"}},
        {"missing_label.csv", "id,x,label\na,1,\n", 0, {"column 'label' (3)", "is missing", NULL}},
        {"real_label.csv", "id,x,label\na,1,0.5\n", 0, {"column 'label' (3)", "'0.5'", "not a whole number"}},
        {"negative_label.csv", "id,x,label\na,1,-1\n", 0, {"column 'label'", "'-1'", "outside"}},
        {"one_class.csv", "id,x,label\na,1,0\na,2,0\n", 0, {"one_class.csv", "single class", NULL}},
        {"open_quote.csv", "id,x,label\na,\"1,0\n", 0, {"open_quote.csv", "row 2", "still open"}},
        {"stray_quote.csv", "id,x,label\na,1\"2,0\n", 0, {"stray_quote.csv", "row 2", "malformed CSV"}},
        {"nul.csv", "id,x,label\na,1\0002,0\n", 18, {"nul.csv", "row 2", "NUL byte"}},
        {"embedded.csv", "id,x,label\n\"a\nb\",1,0\n\"a\nb\",\"3\n\",1\n", 0, {"row 3 (line 4), column 'x'", "'3\\x0a'", NULL}},
        {"crlf.csv", "id,x,label\r\na,1,0\r\na,two,1\r\n", 0, {"row 3 (line 3), column 'x'", "'two'", NULL}},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        char csv[500], out[520];
        snprintf(csv, sizeof csv, "%s", path_in(cases[i].name));
        snprintf(out, sizeof out, "%s.h5", csv);
        CU_ASSERT_TRUE_FATAL(write_all(csv, cases[i].text, cases[i].len ? cases[i].len : strlen(cases[i].text)));
        const char *args[] = {"data", "csv", csv, "-o", out, "--sequence-key", "id", "--features", "x", "--label",
                              "label", "--seq-len", "1", NULL};
        run_result r = run(args);
        int says = 1;
        for (int k = 0; k < 3 && cases[i].says[k]; k++)
            says &= contains(r.err, strcmp(cases[i].says[k], "text") == 0 ? cases[i].name : cases[i].says[k]);
        EXPECT(r.code == 1 && one_error_line(&r, "data csv") && says && contains(r.err, cases[i].name), r);
        CU_ASSERT_TRUE(nothing_written(out));
        run_free(&r);
    }
}

/* A field of 17 MiB: refused at 16 MiB, in bounded memory (the file is read in 64 KiB
 * chunks, never a whole line at once). */
static void test_huge_field(void)
{
    char csv[500], out[520];
    snprintf(csv, sizeof csv, "%s", path_in("huge.csv"));
    snprintf(out, sizeof out, "%s.h5", csv);
    size_t n = (size_t)17 << 20;
    char *text = malloc(n + 64);
    CU_ASSERT_PTR_NOT_NULL_FATAL(text);
    int head = snprintf(text, 64, "x,label\n1,0\n\"");
    memset(text + head, '7', n);
    memcpy(text + head + n, "\",1\n", 5);
    CU_ASSERT_TRUE_FATAL(write_all(csv, text, (size_t)head + n + 4));
    free(text);
    const char *args[] = {"data", "csv", csv, "-o", out, "--features", "x", "--label", "label", "--seq-len", "1", NULL};
    run_result r = run(args);
    EXPECT(r.code == 1 && one_error_line(&r, "data csv") && contains(r.err, "row 3 (line 3)") &&
               contains(r.err, "a field longer than 16777216 bytes"),
           r);
    CU_ASSERT_TRUE(nothing_written(out));
    run_free(&r);
    /* bare CR line ends are line ends too (libcsv): two data rows */
    const char *cr = "x,label\r1,0\r2,1\r";
    CU_ASSERT_TRUE_FATAL(write_all(csv, cr, strlen(cr)));
    r = run(args);
    EXPECT(r.code == 0 && contains(r.out, "2 rows of 1 sources"), r);
    run_free(&r);
}

static void test_short_sources_and_policies(void)
{
    char csv[500], out[520];
    snprintf(csv, sizeof csv, "%s", path_in("short.csv"));
    snprintf(out, sizeof out, "%s", path_in("short.h5"));
    const char *text = "id,x,label\na,1,0\na,2,1\na,3,0\na,4,1\nb,5,0\n";
    CU_ASSERT_TRUE_FATAL(write_all(csv, text, strlen(text)));
    const char *refuse[] = {"data", "csv", csv, "-o", out, "--sequence-key", "id", "--features", "x", "--label", "label",
                            "--seq-len", "2", "--val", "0", "--test", "0", "--short", "refuse", NULL};
    run_result r = run(refuse);
    EXPECT(r.code == 1 && one_error_line(&r, "data csv") && contains(r.err, "source 'b' has 1 rows"), r);
    CU_ASSERT_TRUE(nothing_written(out));
    run_free(&r);
    const char *skip[] = {"data", "csv", csv, "-o", out, "--sequence-key", "id", "--features", "x", "--label", "label",
                          "--seq-len", "2", "--val", "0", "--test", "0", NULL};
    r = run(skip);
    EXPECT(r.code == 0 && contains(r.out, "1 split segments shorter than a window skipped") &&
               contains(r.out, "train 2, val 0, test 0"),
           r);
    run_free(&r);
    /* an existing output needs --force */
    r = run(skip);
    EXPECT(r.code == 1 && contains(r.err, "already exists"), r);
    run_free(&r);
    /* usage errors: exit 2 before any file is read */
    const char *const usage[][12] = {
        {"data", "csv", csv, "-o", out, "--features", "x", NULL},
        {"data", "csv", csv, "-o", out, "--label", "label", NULL},
        {"data", "csv", csv, "--label", "label", "--features", "x", NULL},
        {"data", "csv", csv, "-o", out, "--label", "label", "--features", "x", "--split-by", "random", NULL},
        {"data", "csv", csv, "-o", out, "--label", "label", "--features", "x", "--seq-len", "0", NULL},
        {"data", "csv", csv, "-o", out, "--label", "label", "--features", "x,x", "--force", NULL},
    };
    for (size_t i = 0; i < sizeof usage / sizeof usage[0]; i++) {
        r = run(usage[i]);
        int expect = i == 5 ? 1 : 2; /* a column named twice is found by the import */
        EXPECT(r.code == expect && one_error_line(&r, "data csv"), r);
        run_free(&r);
    }
    /* the CSV itself is never the output */
    const char *self[] = {"data", "csv", csv, "-o", csv, "--label", "label", "--features", "x", "--force", NULL};
    r = run(self);
    EXPECT(r.code == 1 && contains(r.err, "an input of this command"), r);
    run_free(&r);
    size_t size = 0;
    char *back = read_all(csv, &size);
    CU_ASSERT_TRUE(back && size == strlen(text) && memcmp(back, text, size) == 0);
    free(back);
}

/* The order key's values: numbers, or text (ISO 8601); one value of the other kind is
 * refused naming its row, line, column and value, unless --order-as text says how to
 * compare; the choice is kept in the schema (data info). */
static void test_order_key_kinds(void)
{
    char csv[500], out[520];
    snprintf(csv, sizeof csv, "%s", path_in("order.csv"));
    snprintf(out, sizeof out, "%s", path_in("order.h5"));
    FILE *f = fopen(csv, "w");
    CU_ASSERT_PTR_NOT_NULL_FATAL(f);
    fprintf(f, "t,x,label\n");
    for (int i = 0; i < 30; i++) {
        if (i == 17)
            fprintf(f, "n/a,%d,%d\n", i, i % 4 == 0);
        else
            fprintf(f, "%d,%d,%d\n", (i * 7) % 30 * 10, i, i % 4 == 0);
    }
    fclose(f);
    const char *args[] = {"data", "csv", csv, "-o", out, "--order-key", "t", "--features", "x", "--label", "label",
                          "--seq-len", "2", NULL};
    run_result r = run(args);
    EXPECT(r.code == 1 && one_error_line(&r, "data csv") && contains(r.err, "row 19 (line 19), column 't' (1)") &&
               contains(r.err, "'n/a' is not a number, but 29 other values") && contains(r.err, "--order-as text"),
           r);
    CU_ASSERT_TRUE(nothing_written(out));
    run_free(&r);
    const char *number[] = {"data", "csv", csv, "-o", out, "--order-key", "t", "--order-as", "number", "--features",
                            "x", "--label", "label", "--seq-len", "2", NULL};
    r = run(number);
    EXPECT(r.code == 1 && one_error_line(&r, "data csv") && contains(r.err, "row 19 (line 19)") &&
               contains(r.err, "--order-as number"),
           r);
    run_free(&r);
    const char *text[] = {"data", "csv", csv, "-o", out, "--order-key", "t", "--order-as", "text", "--features", "x",
                          "--label", "label", "--seq-len", "2", NULL};
    r = run(text);
    EXPECT(r.code == 0 && contains(r.out, "30 rows of 1 sources"), r);
    run_free(&r);
    const char *info[] = {"data", "info", out, NULL};
    r = run(info);
    EXPECT(r.code == 0 && contains(r.out, "order key t as text"), r);
    run_free(&r);
    /* text with one number: the number is named */
    f = fopen(csv, "w");
    CU_ASSERT_PTR_NOT_NULL_FATAL(f);
    fprintf(f, "t,x,label\n");
    for (int i = 0; i < 30; i++) {
        if (i == 5)
            fprintf(f, "20240101,%d,%d\n", i, i % 4 == 0);
        else
            fprintf(f, "2024-01-01T00:%02d:00,%d,%d\n", 59 - i, i, i % 4 == 0);
    }
    fclose(f);
    const char *force[] = {"data", "csv", csv, "-o", out, "--order-key", "t", "--features", "x", "--label", "label",
                           "--seq-len", "2", "--force", NULL};
    r = run(force);
    EXPECT(r.code == 1 && contains(r.err, "row 7 (line 7), column 't' (1)") &&
               contains(r.err, "'20240101' is a number, but 29 other values of the order key are text"),
           r);
    run_free(&r);
    /* all numbers: compared as numbers */
    f = fopen(csv, "w");
    CU_ASSERT_PTR_NOT_NULL_FATAL(f);
    fprintf(f, "t,x,label\n");
    for (int i = 0; i < 30; i++)
        fprintf(f, " %d ,%d,%d\n", (i * 7) % 30 * 10, i, i % 4 == 0);
    fclose(f);
    r = run(force);
    EXPECT(r.code == 0, r);
    run_free(&r);
    r = run(info);
    EXPECT(r.code == 0 && contains(r.out, "order key t as number"), r);
    run_free(&r);
    /* --order-as without --order-key, or an unknown kind: usage */
    const char *alone[] = {"data", "csv", csv, "-o", out, "--order-as", "text", "--features", "x", "--label", "label",
                           NULL};
    r = run(alone);
    EXPECT(r.code == 2 && one_error_line(&r, "data csv") && contains(r.err, "--order-key"), r);
    run_free(&r);
    const char *unknown[] = {"data", "csv", csv, "-o", out, "--order-key", "t", "--order-as", "date", "--features",
                             "x", "--label", "label", NULL};
    r = run(unknown);
    EXPECT(r.code == 2 && one_error_line(&r, "data csv") && contains(r.err, "--order-as"), r);
    run_free(&r);
}

/* One stray label among 0/1 would make 1,001 classes: refused naming the values and the
 * row; --classes says how many there are; data info's histograms stay short. */
static void test_sparse_labels(void)
{
    char csv[500], out[520];
    snprintf(csv, sizeof csv, "%s", path_in("stray.csv"));
    snprintf(out, sizeof out, "%s", path_in("stray.h5"));
    FILE *f = fopen(csv, "w");
    CU_ASSERT_PTR_NOT_NULL_FATAL(f);
    fprintf(f, "t,x,label\n");
    for (int i = 0; i < 60; i++)
        fprintf(f, "%d,%d,%d\n", i, i % 5, i == 23 ? 1000 : i % 4 == 0);
    fclose(f);
    const char *args[] = {"data", "csv", csv, "-o", out, "--features", "x", "--label", "label", "--seq-len", "2", NULL};
    run_result r = run(args);
    EXPECT(r.code == 1 && one_error_line(&r, "data csv") && contains(r.err, "column 'label'") &&
               contains(r.err, "the labels take 3 values (0, 1, 1000)") && contains(r.err, "998 of them without a row") &&
               contains(r.err, "row 25 (line 25)") && contains(r.err, "--classes 1001"),
           r);
    CU_ASSERT_TRUE(nothing_written(out));
    run_free(&r);
    const char *two[] = {"data", "csv", csv, "-o", out, "--features", "x", "--label", "label", "--seq-len", "2",
                         "--classes", "2", NULL};
    r = run(two);
    EXPECT(r.code == 1 && one_error_line(&r, "data csv") && contains(r.err, "row 25 (line 25)") &&
               contains(r.err, "label 1000 is not one of the 2 classes"),
           r);
    run_free(&r);
    const char *many[] = {"data", "csv", csv, "-o", out, "--features", "x", "--label", "label", "--seq-len", "2",
                          "--classes", "1001", NULL};
    r = run(many);
    EXPECT(r.code == 0 && contains(r.out, "1001 classes"), r);
    run_free(&r);
    const char *info[] = {"data", "info", out, NULL};
    r = run(info);
    EXPECT(r.code == 0 && contains(r.out, "of the 1001 classes occur; the others have 0)") && count_lines(r.out) < 60,
           r);
    run_free(&r);
    const char *one[] = {"data", "csv", csv, "-o", out, "--features", "x", "--label", "label", "--classes", "1",
                         "--force", NULL};
    r = run(one);
    EXPECT(r.code == 2 && one_error_line(&r, "data csv") && contains(r.err, "--classes"), r);
    run_free(&r);
}

static void test_info_of_an_import(void)
{
    char csv[500], out[520];
    snprintf(csv, sizeof csv, "%s", path_in("log.csv"));
    snprintf(out, sizeof out, "%s", path_in("log.h5"));
    FILE *f = fopen(csv, "w");
    CU_ASSERT_PTR_NOT_NULL_FATAL(f);
    fprintf(f, "time,\"motor, id\",temp,state,alarm\r\n");
    for (int t = 0; t < 40; t++)
        for (int m = 0; m < 2; m++)
            fprintf(f, "2024-01-01T00:%02d:00,\"m%d\",%d.5,%s,%d\r\n", 59 - t, m, 20 + t % 7, t % 3 ? "run" : "idle",
                    t % 10 == 0);
    fclose(f);
    const char *args[] = {"data", "csv", csv, "-o", out, "--sequence-key", "\"motor, id\"", "--order-key", "time",
                          "--features", "temp", "--tokens", "state", "--label", "alarm", "--seq-len", "4", NULL};
    run_result r = run(args);
    EXPECT(r.code == 0 && contains(r.out, "80 rows of 2 sources"), r);
    run_free(&r);
    const char *info[] = {"data", "info", out, NULL};
    r = run(info);
    EXPECT(r.code == 0 && contains(r.out, "task      events") && contains(r.out, "sequence key motor, id") &&
               contains(r.out, "sources   2") && contains(r.out, "windows   train") &&
               contains(r.out, "label histogram (val") && contains(r.out, "label histogram (test") &&
               contains(r.out, "majority class 0") && contains(r.out, "scaling mean") &&
               contains(r.out, "token state") && contains(r.out, "idle="),
           r);
    run_free(&r);
}

int main(void)
{
    snprintf(work_dir, sizeof work_dir, "/tmp/lookback_test_cli_csv_%d", (int)getpid());
    mkdir(work_dir, 0777);
    const lb_test_case cases[] = {
        {"malformed CSVs: exit 1, one line naming file, row and column, nothing written", test_malformed_files},
        {"short sources skipped or refused; usage errors exit 2; the CSV is never the output",
         test_short_sources_and_policies},
        {"data info of an import: sources, windows, features, histograms per split", test_info_of_an_import},
        {"order key: numbers or text; one value of the other kind refused by row and column; --order-as",
         test_order_key_kinds},
        {"a stray label value refused by value and row; --classes; bounded histograms", test_sparse_labels},
        {"a 17 MiB field refused in bounded memory; bare CR line ends", test_huge_field},
        {NULL, NULL},
    };
    int rc = lb_test_main("cli_csv", cases);
    remove_tree(work_dir);
    return rc;
}

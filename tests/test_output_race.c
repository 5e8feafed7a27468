/* A file that appears at an output path while lookback writes there is never replaced:
 * the final rename of every writer is atomic and refuses an existing file
 * (lb_output_commit_new), unless that file was there when the writer began and the
 * user asked to replace it (lb_output_finish with replace). The file appears from the
 * generator's own progress callback, mid-write: no timing is involved. */
#include "data/output.h"
#include "data/tasks.h"
#include "support.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static const char *tmp_path(const char *name)
{
    static char buf[4][256];
    static int slot;
    const char *dir = getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp";
    slot = (slot + 1) % 4;
    snprintf(buf[slot], sizeof buf[slot], "%s/lb_test_output_race_%d_%s", dir, (int)getpid(), name);
    return buf[slot];
}

static const char planted[] = "another program's file\n";

static void write_text(const char *path, const char *text)
{
    FILE *f = fopen(path, "wb");
    CU_ASSERT_PTR_NOT_NULL_FATAL(f);
    fputs(text, f);
    fclose(f);
}

static int holds(const char *path, const char *text)
{
    char buf[256] = {0};
    FILE *f = fopen(path, "rb");
    if (!f)
        return 0;
    size_t n = fread(buf, 1, sizeof buf - 1, f);
    fclose(f);
    return n == strlen(text) && memcmp(buf, text, n) == 0;
}

/* The progress callback plants a file at the output path once, half-way. */
typedef struct planter {
    const char *path;
    int planted;
} planter;

static void plant(int64_t done, int64_t total, void *user)
{
    planter *p = user;
    if (!p->planted && done * 2 >= total) {
        write_text(p->path, planted);
        p->planted = 1;
    }
}

static void test_generator_keeps_a_file_that_appeared(void)
{
    const char *path = tmp_path("data.h5");
    remove(path);
    lb_task_options o;
    lb_task_options_default(LB_TASK_SPIKE, &o);
    o.seq_len = 16;
    o.n_train = 4000;
    o.n_val = 8;
    o.n_test = 8;
    planter p = {path, 0};
    lb_status st = lb_task_generate(&o, path, plant, &p);
    CU_ASSERT_TRUE_FATAL(p.planted);
    CU_ASSERT_EQUAL(st, LB_ERR_IO);
    CU_ASSERT_PTR_NOT_NULL(strstr(lb_last_error(), "a file appeared there"));
    CU_ASSERT_PTR_NOT_NULL(strstr(lb_last_error(), path));
    CU_ASSERT_TRUE(holds(path, planted)); /* left alone */
    char tmp[300];
    snprintf(tmp, sizeof tmp, "%s.tmp", path);
    CU_ASSERT_NOT_EQUAL(access(tmp, F_OK), 0); /* and no temporary file is left */
    /* A file that was there when the writer began (what --force replaces) is replaced. */
    write_text(path, planted);
    CU_ASSERT_EQUAL(lb_task_generate(&o, path, NULL, NULL), LB_OK);
    CU_ASSERT_FALSE(holds(path, planted));
    remove(path);
}

static void test_commit_new_never_replaces(void)
{
    const char *path = tmp_path("out.txt"), *tmp = tmp_path("out.txt.tmp");
    remove(path);
    write_text(tmp, "new\n");
    CU_ASSERT_EQUAL(lb_output_commit_new(tmp, path, "report"), LB_OK);
    CU_ASSERT_TRUE(holds(path, "new\n"));
    CU_ASSERT_NOT_EQUAL(access(tmp, F_OK), 0);
    write_text(tmp, "newer\n");
    CU_ASSERT_EQUAL(lb_output_finish(tmp, path, "report", 0), LB_ERR_IO);
    CU_ASSERT_PTR_NOT_NULL(strstr(lb_last_error(), "a file appeared there while the report was being written"));
    CU_ASSERT_TRUE(holds(path, "new\n"));
    CU_ASSERT_NOT_EQUAL(access(tmp, F_OK), 0);
    write_text(tmp, "newer\n");
    CU_ASSERT_EQUAL(lb_output_finish(tmp, path, "report", 1), LB_OK);
    CU_ASSERT_TRUE(holds(path, "newer\n"));
    CU_ASSERT_TRUE(lb_output_present(path));
    CU_ASSERT_FALSE(lb_output_present(tmp));
    CU_ASSERT_FALSE(lb_output_present(NULL));
    remove(path);
}

int main(void)
{
    const lb_test_case cases[] = {
        {"data generation keeps a file that appeared at its path", test_generator_keeps_a_file_that_appeared},
        {"lb_output_commit_new never replaces; lb_output_finish replaces only when asked",
         test_commit_new_never_replaces},
        {NULL, NULL},
    };
    return lb_test_main("output race", cases);
}

/* The job scheduler of lab/jobs.h, called from C with jobs that write small files: each
 * job in its own child, a phase only after the one before it, failures and crashes
 * counted while the others go on, at most `parallel` children at once, a stop passed on
 * to the running job and no job started after it. */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "support.h"
#include "lab/files.h"
#include "lab/jobs.h"

static char tmp_dir[256];

/* What the jobs of one test do: behaviour[phase][index]. */
enum { JOB_WRITE, JOB_FAIL, JOB_CRASH, JOB_SLEEP, JOB_STOP };
typedef struct fake_jobs {
    char dir[512];
    int count[2];
    int behaviour[2][4];
} fake_jobs;

static const char *job_path(const fake_jobs *f, int phase, int i, char *buf, size_t size)
{
    snprintf(buf, size, "%s/p%d-%d", f->dir, phase, i);
    return buf;
}

static int fake_count(void *ctx, int phase) { return ((fake_jobs *)ctx)->count[phase]; }

static const char *fake_name(void *ctx, int phase, int i)
{
    static char name[32];
    snprintf(name, sizeof name, "job-%d-%d", phase, i);
    return name;
}

static int fake_done(void *ctx, int phase, int i)
{
    char path[600];
    return lb_files_exists(job_path(ctx, phase, i, path, sizeof path));
}

static double fake_budget(void *ctx, int phase, int i) { return 0.1; }

static lb_status fake_run(void *ctx, int phase, int i)
{
    const fake_jobs *f = ctx;
    char path[600];
    switch (f->behaviour[phase][i]) {
    case JOB_FAIL: return lb_error(LB_ERR_VALUE, "job %d-%d fails on purpose", phase, i);
    case JOB_CRASH: raise(SIGKILL); break;
    case JOB_SLEEP: usleep(300000); break;
    case JOB_STOP: /* asks the scheduler to stop, then waits for the stop it passes on */
        kill(getppid(), SIGTERM);
        sleep(30);
        break;
    }
    /* a job of phase 1 needs every stored result of phase 0 */
    for (int k = 0; phase == 1 && k < f->count[0]; k++)
        if (f->behaviour[0][k] == JOB_WRITE && !fake_done(ctx, 0, k))
            return lb_error(LB_ERR_STATE, "job 1-%d started before job 0-%d ended", i, k);
    FILE *out = fopen(job_path(f, phase, i, path, sizeof path), "w");
    if (!out)
        return lb_error(LB_ERR_IO, "%s: cannot write", path);
    fclose(out);
    return LB_OK;
}

static const char *const phase_names[] = {"make", "use"};

static lb_job_list fake_list(fake_jobs *f, const char *name)
{
    snprintf(f->dir, sizeof f->dir, "%s/%s", tmp_dir, name);
    CU_ASSERT_EQUAL(lb_files_mkdir(f->dir), LB_OK);
    lb_job_list jobs = {f,         "test",    2,         phase_names, 1,    fake_count,
                        fake_name, fake_done, fake_budget, fake_run, NULL, NULL};
    return jobs;
}

static void test_phases_and_failures(void)
{
    fake_jobs f = {.count = {4, 2}, .behaviour = {{JOB_WRITE, JOB_FAIL, JOB_CRASH, JOB_WRITE}, {JOB_WRITE, JOB_WRITE}}};
    lb_job_list jobs = fake_list(&f, "phases");
    lb_jobs_result r;
    CU_ASSERT_EQUAL_FATAL(lb_jobs_run(&jobs, 3, 1, "test_jobs", &r), LB_OK);
    CU_ASSERT_EQUAL(r.ran, 6);
    CU_ASSERT_EQUAL(r.failed, 2); /* the error and the crash; the other jobs went on */
    CU_ASSERT_EQUAL(r.counted, 2);
    CU_ASSERT_EQUAL(r.counted_done, 2);
    CU_ASSERT_EQUAL(r.signal, 0);
    CU_ASSERT_TRUE(fake_done(&f, 0, 0) && fake_done(&f, 0, 3) && fake_done(&f, 1, 0) && fake_done(&f, 1, 1));
    CU_ASSERT_FALSE(fake_done(&f, 0, 1) || fake_done(&f, 0, 2));
    /* Run again: only what is not stored runs, and fails again. */
    CU_ASSERT_EQUAL_FATAL(lb_jobs_run(&jobs, 3, 1, "test_jobs", &r), LB_OK);
    CU_ASSERT_EQUAL(r.ran, 2);
    CU_ASSERT_EQUAL(r.failed, 2);
    CU_ASSERT_EQUAL(r.counted_done, 2);
}

static void test_parallel_limit(void)
{
    /* Four jobs of 0.3 s, two at a time: at least 0.6 s (all at once would take 0.3 s). */
    fake_jobs f = {.count = {4, 0}, .behaviour = {{JOB_SLEEP, JOB_SLEEP, JOB_SLEEP, JOB_SLEEP}}};
    lb_job_list jobs = fake_list(&f, "parallel");
    lb_jobs_result r;
    CU_ASSERT_EQUAL_FATAL(lb_jobs_run(&jobs, 2, 1, "test_jobs", &r), LB_OK);
    CU_ASSERT_EQUAL(r.ran, 4);
    CU_ASSERT_EQUAL(r.failed, 0);
    CU_ASSERT_TRUE(r.seconds >= 0.55);
    for (int i = 0; i < 4; i++)
        CU_ASSERT_TRUE(fake_done(&f, 0, i));
}

static void test_stop_passed_on(void)
{
    /* Job 0-0 asks the scheduler to stop and sleeps: the stop reaches it at once, job 0-1
     * (one at a time) and phase 1 never start. */
    fake_jobs f = {.count = {2, 1}, .behaviour = {{JOB_STOP, JOB_WRITE}, {JOB_WRITE}}};
    lb_job_list jobs = fake_list(&f, "stop");
    lb_jobs_result r;
    CU_ASSERT_EQUAL_FATAL(lb_jobs_run(&jobs, 1, 1, "test_jobs", &r), LB_OK);
    CU_ASSERT_EQUAL(r.signal, SIGTERM);
    CU_ASSERT_EQUAL(r.ran, 1);
    CU_ASSERT_EQUAL(r.failed, 1);
    CU_ASSERT_TRUE(r.seconds < lb_test_limit(20));
    CU_ASSERT_FALSE(fake_done(&f, 0, 0) || fake_done(&f, 0, 1) || fake_done(&f, 1, 0));
    /* The process's own dispositions are back. */
    struct sigaction sa;
    CU_ASSERT_EQUAL(sigaction(SIGTERM, NULL, &sa), 0);
    CU_ASSERT_TRUE(sa.sa_handler == SIG_DFL);
}

static void test_bad_arguments(void)
{
    fake_jobs f = {.count = {1, 1}};
    lb_job_list jobs = fake_list(&f, "bad");
    lb_jobs_result r;
    CU_ASSERT_EQUAL(lb_jobs_run(&jobs, 0, 1, "test_jobs", &r), LB_ERR_VALUE);
    CU_ASSERT_EQUAL(lb_jobs_run(&jobs, 65, 1, "test_jobs", &r), LB_ERR_VALUE);
    jobs.run = NULL;
    CU_ASSERT_EQUAL(lb_jobs_run(&jobs, 1, 1, "test_jobs", &r), LB_ERR_VALUE);
    CU_ASSERT_EQUAL(lb_jobs_run(NULL, 1, 1, "test_jobs", &r), LB_ERR_VALUE);
}

static void test_durations(void)
{
    char buf[32];
    lb_format_duration(0.25, buf, sizeof buf);
    CU_ASSERT_STRING_EQUAL(buf, "0.25 s");
    lb_format_duration(3.54, buf, sizeof buf);
    CU_ASSERT_STRING_EQUAL(buf, "3.5 s");
    lb_format_duration(42.4, buf, sizeof buf);
    CU_ASSERT_STRING_EQUAL(buf, "42 s");
    lb_format_duration(720, buf, sizeof buf);
    CU_ASSERT_STRING_EQUAL(buf, "12 min");
}

int main(void)
{
    snprintf(tmp_dir, sizeof tmp_dir, "/tmp/lb_test_jobs_XXXXXX");
    if (!mkdtemp(tmp_dir))
        return 1;
    static const lb_test_case cases[] = {
        {"phases in order, failures and crashes counted", test_phases_and_failures},
        {"at most `parallel` jobs at once", test_parallel_limit},
        {"a stop is passed on to the running job", test_stop_passed_on},
        {"bad arguments", test_bad_arguments},
        {"durations for progress lines", test_durations},
        {NULL, NULL},
    };
    int rc = lb_test_main("jobs", cases);
    lb_files_remove_tree(tmp_dir);
    return rc;
}

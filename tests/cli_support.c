/* Running the built `lookback` executable from tests (see cli_support.h). */
#include "cli_support.h"

#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

extern char **environ;

char work_dir[256];

const char *path_in(const char *name)
{
    static char buf[8][512];
    static int slot;
    slot = (slot + 1) % 8;
    snprintf(buf[slot], sizeof buf[slot], "%s/%s", work_dir, name);
    return buf[slot];
}

/* Whole file into a NUL-terminated buffer (caller frees); NULL if missing. */
char *read_all(const char *path, size_t *size)
{
    FILE *f = fopen(path, "rb");
    if (!f)
        return NULL;
    size_t cap = 4096, n = 0;
    char *buf = malloc(cap);
    size_t got;
    while (buf && (got = fread(buf + n, 1, cap - n - 1, f)) > 0) {
        n += got;
        if (cap - n - 1 == 0) {
            char *bigger = realloc(buf, cap * 2);
            if (!bigger) {
                free(buf);
                buf = NULL;
                break;
            }
            buf = bigger;
            cap *= 2;
        }
    }
    fclose(f);
    if (buf)
        buf[n] = '\0';
    if (size)
        *size = n;
    return buf;
}

int write_all(const char *path, const void *data, size_t size)
{
    FILE *f = fopen(path, "wb");
    if (!f)
        return 0;
    size_t put = fwrite(data, 1, size, f);
    return fclose(f) == 0 && put == size;
}

void run_free(run_result *r)
{
    free(r->out);
    free(r->err);
    memset(r, 0, sizeof *r);
}

pid_t start_program(const char *const *argv)
{
    posix_spawn_file_actions_t fa;
    posix_spawn_file_actions_init(&fa);
    posix_spawn_file_actions_addopen(&fa, 0, "/dev/null", O_RDONLY, 0);
    posix_spawn_file_actions_addopen(&fa, 1, path_in("stdout.txt"), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    posix_spawn_file_actions_addopen(&fa, 2, path_in("stderr.txt"), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    pid_t pid;
    int rc = posix_spawnp(&pid, argv[0], &fa, NULL, (char *const *)argv, environ);
    posix_spawn_file_actions_destroy(&fa);
    if (rc != 0) {
        fprintf(stderr, "\n  cannot start %s: %s\n", argv[0], strerror(rc));
        return -1;
    }
    return pid;
}

static double now_seconds(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

int wait_for_file(const char *path, double seconds)
{
    double end = now_seconds() + lb_test_limit(seconds);
    while (access(path, F_OK) != 0) {
        if (now_seconds() > end)
            return access(path, F_OK) == 0;
        usleep(10000);
    }
    return 1;
}

int wait_for_text(const char *path, const char *text, double seconds)
{
    double end = now_seconds() + lb_test_limit(seconds);
    for (;;) {
        char *got = read_all(path, NULL);
        int found = got && strstr(got, text) != NULL;
        free(got);
        if (found)
            return 1;
        if (now_seconds() > end)
            return 0;
        usleep(10000);
    }
}

run_result finish_program(pid_t pid, double timeout)
{
    run_result r = {-1, NULL, NULL};
    if (pid <= 0)
        return r;
    timeout = lb_test_limit(timeout);
    int status = 0;
    pid_t got = 0;
    for (double waited = 0; got == 0; waited += 0.05) {
        got = waitpid(pid, &status, timeout > 0 ? WNOHANG : 0);
        if (got < 0 && errno == EINTR)
            got = 0;
        if (got == 0 && timeout > 0 && waited >= timeout) {
            fprintf(stderr, "\n  still running after %.0f s: killed\n", timeout);
            kill(pid, SIGKILL);
            waitpid(pid, &status, 0);
            r.code = -2;
            break;
        }
        if (got == 0 && timeout > 0)
            usleep(50000);
    }
    if (r.code != -2)
        r.code = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + (WIFSIGNALED(status) ? WTERMSIG(status) : 0);
    r.out = read_all(path_in("stdout.txt"), NULL);
    r.err = read_all(path_in("stderr.txt"), NULL);
    if (!r.out)
        r.out = calloc(1, 1);
    if (!r.err)
        r.err = calloc(1, 1);
    return r;
}

run_result run(const char *const *args) { return run_program(LB_LOOKBACK_BIN, args); }

run_result run_program(const char *program, const char *const *args)
{
    const char *argv[256];
    int n = 0;
    argv[n++] = program;
    for (; args[n - 1] && n < 255; n++)
        argv[n] = args[n - 1];
    argv[n] = NULL;
    return finish_program(start_program(argv), 0);
}

int count_lines(const char *text)
{
    int n = 0;
    for (; *text; text++)
        n += *text == '\n';
    return n;
}

int contains(const char *text, const char *what) { return text && strstr(text, what) != NULL; }

/* One error line on stderr, starting "lookback <command>:", nothing on stdout. */
int one_error_line(const run_result *r, const char *command)
{
    char prefix[64];
    snprintf(prefix, sizeof prefix, "lookback %s: ", command);
    return count_lines(r->err) == 1 && strncmp(r->err, prefix, strlen(prefix)) == 0;
}

static int remove_entry(const char *path, const struct stat *sb, int flag, struct FTW *ftw)
{
    (void)sb;
    (void)flag;
    (void)ftw;
    return remove(path);
}

void remove_tree(const char *dir) { nftw(dir, remove_entry, 16, FTW_DEPTH | FTW_PHYS | FTW_MOUNT); }

const char *small_data(void)
{
    static char path[512];
    if (!path[0]) {
        snprintf(path, sizeof path, "%s", path_in("small.h5"));
        const char *args[] = {"data", "--seq-len", "16", "--readings", "4", "--train", "64", "--val", "16", "--test",
                              "16", "-o", path, "--quiet", NULL};
        run_result r = run(args);
        EXPECT(r.code == 0, r);
        run_free(&r);
    }
    return path;
}

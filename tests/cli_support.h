/* Shared by the tests that run the built `lookback` executable (LB_LOOKBACK_BIN) as a
 * user runs it: exit code, standard output and standard error are captured. */
#ifndef LB_CLI_SUPPORT_H
#define LB_CLI_SUPPORT_H

#include <stddef.h>
#include <stdio.h>
#include <sys/types.h>

#include "support.h"

#ifndef LB_LOOKBACK_BIN
#error "tests/CMakeLists.txt must define LB_LOOKBACK_BIN (the path of the lookback executable)"
#endif

/* The test's scratch folder (set by the test's main) and a path inside it (rotating
 * static buffers: up to 8 live at once). */
extern char work_dir[256];
const char *path_in(const char *name);

/* A tiny spike file in the scratch folder, made at the first call: T = 16, 4 readings,
 * 64 / 16 / 16 sequences (small.h5). */
const char *small_data(void);

/* Whole file into a NUL-terminated buffer (caller frees); NULL if missing. */
char *read_all(const char *path, size_t *size);
int write_all(const char *path, const void *data, size_t size);

typedef struct run_result {
    int code; /* exit code, or 128 + signal */
    char *out, *err;
} run_result;

/* Starts any program (argv[0] looked up in PATH) with standard input from /dev/null
 * and its outputs captured; -1 when it cannot start. finish_program waits for it (at
 * most lb_test_limit(timeout) seconds when timeout > 0, then kills it: code -2) and
 * collects the outputs. */
pid_t start_program(const char *const *argv);
run_result finish_program(pid_t pid, double timeout);

/* Waits for a state a program announces: `path` exists (wait_for_file), or the file
 * holds `text` (wait_for_text, e.g. a line of a captured stderr); polled every 10 ms
 * for at most lb_test_limit(seconds). 1 when the state was reached. */
int wait_for_file(const char *path, double seconds);
int wait_for_text(const char *path, const char *text, double seconds);

/* Runs `lookback args...` (NULL-terminated) with standard input from /dev/null and
 * its outputs captured. */
run_result run(const char *const *args);
/* The same for any program (a name without '/' is looked up in PATH); up to 254 args. */
run_result run_program(const char *program, const char *const *args);
void run_free(run_result *r);

/* Removes a folder and everything under it, not crossing into other file systems
 * (a tmpfs mounted inside stays mounted, its mount point stays). */
void remove_tree(const char *dir);

int count_lines(const char *text);
int contains(const char *text, const char *what);
/* One error line on stderr, starting "lookback <command>:". */
int one_error_line(const run_result *r, const char *command);

/* Reports a command's output when an expectation fails, to see why. */
#define EXPECT(cond, r)                                                                                       \
    do {                                                                                                      \
        CU_ASSERT_TRUE(cond);                                                                                 \
        if (!(cond))                                                                                          \
            fprintf(stderr, "\n  failed: %s\n  exit %d\n  stdout: %.2000s\n  stderr: %.2000s\n", #cond, (r).code, \
                    (r).out, (r).err);                                                                        \
    } while (0)

#endif

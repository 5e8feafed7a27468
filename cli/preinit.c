/* The first step of the lookback command (and of the benchmarks, which load the
 * libraries the same way): see cli/preinit.h. */
#include "cli/preinit.h"

#include <errno.h>
#include <fcntl.h>
#include <stddef.h>
#include <string.h>
#include <unistd.h>

static char blas_one_thread[] = "OPENBLAS_NUM_THREADS=1";
static char *borrowed_entry; /* the environment entry whose place it took until main */

/* libc sets `environ` from envp after this runs, so setenv() here would be lost: the
 * variable takes the place of an existing entry (OPENBLAS_NUM_THREADS itself when set,
 * else one that no library reads at load, such as "_=" or "OLDPWD=") and main puts that
 * entry back. */
static void early_setup(int argc, char **argv, char **envp)
{
    (void)argc;
    (void)argv;
    for (int fd = 0; fd <= 2; fd++)
        if (fcntl(fd, F_GETFD) < 0 && errno == EBADF) {
            int null_fd = open("/dev/null", fd == 0 ? O_RDONLY : O_WRONLY);
            if (null_fd >= 0 && null_fd != fd) {
                dup2(null_fd, fd);
                close(null_fd);
            }
        }
    if (!envp || !envp[0])
        return;
    static const char *const spare[] = {"OPENBLAS_NUM_THREADS=", "_=", "OLDPWD=", "SHLVL=", "PWD="};
    char **slot = NULL;
    for (size_t k = 0; k < sizeof spare / sizeof spare[0] && !slot; k++)
        for (char **e = envp; *e && !slot; e++)
            if (strncmp(*e, spare[k], strlen(spare[k])) == 0)
                slot = e;
    if (!slot) { /* the last entry */
        slot = envp;
        while (slot[1])
            slot++;
    }
    borrowed_entry = *slot;
    *slot = blas_one_thread;
}

void lb_cli_restore_environment(void)
{
    extern char **environ;
    for (char **e = environ; e && *e; e++)
        if (*e == blas_one_thread) {
            *e = borrowed_entry;
            break;
        }
}

__attribute__((section(".preinit_array"), used)) static void (*const lb_early_setup)(int, char **,
                                                                                      char **) = early_setup;

/* Before any library starts: the executable's .preinit_array entry in cli/preinit.c.
 * OpenBLAS starts its worker threads when it is loaded, before main, and each thread
 * allocates a 128 MB buffer at once; under an address-space limit (ulimit -v) that
 * allocation fails and the thread retries forever, so the process hangs in its next
 * fork() or at exit, and on an idle machine the workers spin on the other cores for a
 * while after the load. The entry runs before the initialisers of the shared libraries
 * and sets OPENBLAS_NUM_THREADS=1 for the load, so no worker starts (lookback runs
 * OpenBLAS single-threaded on its own OpenMP threads, tensor/blas.h); it also opens
 * /dev/null on any closed standard descriptor, so that no file or pipe a library opens
 * lands on descriptor 0, 1 or 2 (a job started with stdin or stderr closed). Linking
 * cli/preinit.c into an executable is all it takes. */
#ifndef LB_CLI_PREINIT_H
#define LB_CLI_PREINIT_H

/* Puts back the environment entry that OPENBLAS_NUM_THREADS=1 took the place of during
 * the load; the first call of main. */
void lb_cli_restore_environment(void);

#endif

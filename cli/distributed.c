/* The command under mpirun: join the job, run, and end every rank when one fails;
 * commands that are not distributed run on rank 0 alone. */
#include <stdio.h>

#include "train/distributed.h"
#include "cli/cli.h"

/* Seconds the ranks wait for each other after a usage error before the job is ended
 * with MPI_Abort (a rank that did not fail the same way may wait in a collective). */
#define USAGE_AGREEMENT_SECONDS 20.0

int lb_cli_distributed(const char *command, int (*run)(int, char **), int argc, char **argv)
{
    if (lb_dist_init() != LB_OK)
        return lb_cli_fail(command);
    int code = run(argc, argv);
    if (!lb_dist_active())
        return code;
    if (code == 0) {
        lb_dist_finalize();
        return code;
    }
    /* A stop every rank agreed on (Ctrl-C: rank 0 saved the checkpoint). mpirun is
     * ending the job and no longer joins MPI_Finalize, so leave without it. */
    if (code == 130) {
        fflush(stdout);
        fflush(stderr);
        return code;
    }
    fflush(stdout);
    fflush(stderr);
    /* A usage error is the same on every rank (the same command line) and found before
     * any work: rank 0 printed it, every rank leaves the job normally with exit code 2
     * (no MPI_Abort and its banner). */
    if (code == 2 && lb_dist_same_exit(code, USAGE_AGREEMENT_SECONDS) == LB_OK) {
        lb_dist_finalize();
        return code;
    }
    /* The other ranks may wait in a collective for this one: end them all. */
    lb_dist_abort(code);
    return code;
}

int lb_cli_run_command(const char *command, int (*run)(int, char **), int distributed, int argc, char **argv)
{
    if (distributed)
        return lb_cli_distributed(command, run, argc, argv);
    /* Under mpirun, a command that is not distributed would run once per rank: the same
     * table printed N times, the same file written N times. Rank 0 runs it alone (it
     * gets mpirun's standard input); the others leave at once, successfully. */
    if (lb_dist_launched() && lb_dist_launch_rank() != 0)
        return 0;
    return run(argc, argv);
}

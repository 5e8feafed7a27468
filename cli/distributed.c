/* The command under mpirun: join the job, run, and end every rank when one fails. */
#include <stdio.h>

#include "train/distributed.h"
#include "cli/cli.h"

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
    /* The other ranks may wait in a collective for this one: end them all. */
    fflush(stdout);
    fflush(stderr);
    lb_dist_abort(code);
    return code;
}

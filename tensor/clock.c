#include "tensor/clock.h"

#include <time.h>

#include "tensor/threads.h"

static double read_clock(clockid_t id)
{
    struct timespec ts;
    if (clock_gettime(id, &ts) != 0)
        return 0;
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

double lb_clock_wall(void) { return read_clock(CLOCK_MONOTONIC); }

double lb_clock_process_cpu(void) { return read_clock(CLOCK_PROCESS_CPUTIME_ID); }

double lb_clock_cpu(void) { return lb_clock_process_cpu() / lb_get_num_threads(); }

/* Clocks: the one place that reads the time.
 *
 * lb_clock_wall: monotonic seconds (CLOCK_MONOTONIC) since an arbitrary origin; for
 *   durations only.
 * lb_clock_process_cpu: CPU seconds of the whole process, every thread
 *   (CLOCK_PROCESS_CPUTIME_ID).
 * lb_clock_cpu: lb_clock_process_cpu divided by the thread count in use
 *   (lb_get_num_threads): the time a measurement took on its own cores, whatever else
 *   the machine runs (the clock of --budget-clock cpu).
 * None fails: a clock that cannot be read gives 0. Thread-safe. */
#ifndef LB_CLOCK_H
#define LB_CLOCK_H

#include "tensor/api.h"

LB_API_BEGIN

double lb_clock_wall(void);
double lb_clock_process_cpu(void);
double lb_clock_cpu(void);

LB_API_END

#endif

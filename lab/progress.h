/* Progress display on stderr for long runs: a live bar (step rate, ETA, loss, accuracy)
 * when stderr is a terminal, plain periodic lines (every 10 s) otherwise. */
#ifndef LB_LAB_PROGRESS_H
#define LB_LAB_PROGRESS_H

#include <stdint.h>

#include "tensor/api.h"

LB_API_BEGIN

typedef struct lb_progress {
    const char *label;
    int64_t total;
    int64_t first;       /* steps already done when this process started (a resumed run):
                            the rate and ETA count only this process's steps and time */
    double budget;       /* seconds; > 0: the bar and ETA follow the time budget instead of `total` */
    double budget_spent; /* seconds of the budget spent before this process (a resumed run) */
    int tty;
    double start, last_print;
} lb_progress;

/* Starts a display of `total` steps labelled `label` (not copied). */
void lb_progress_begin(lb_progress *p, const char *label, int64_t total);
/* Shows `done` steps with a printf-style suffix (fmt may be NULL); redraws at most 10
 * times a second on a terminal, every 10 s otherwise, and always at the last step. */
void lb_progress_update(lb_progress *p, int64_t done, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
/* Ends the live bar's line. */
void lb_progress_end(lb_progress *p);

LB_API_END

#endif

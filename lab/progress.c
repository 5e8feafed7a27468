#include "lab/progress.h"

#include <stdarg.h>
#include <stdio.h>
#include <unistd.h>

#include "tensor/clock.h"

void lb_progress_begin(lb_progress *p, const char *label, int64_t total)
{
    p->label = label;
    p->total = total;
    p->tty = isatty(STDERR_FILENO);
    p->budget = 0;
    p->first = 0;
    p->budget_spent = 0;
    p->start = lb_clock_wall();
    p->last_print = 0;
}

void lb_progress_update(lb_progress *p, int64_t done, const char *fmt, ...)
{
    double now = lb_clock_wall();
    int final = done >= p->total;
    /* A live bar redraws 10 times a second; plain lines every 10 seconds. */
    if (!final && now - p->last_print < (p->tty ? 0.1 : 10.0))
        return;
    p->last_print = now;
    /* Only this process's steps and time: a resumed run's earlier steps took other time. */
    double elapsed = now - p->start, rate = elapsed > 0 ? (double)(done - p->first) / elapsed : 0;
    double eta = rate > 0 ? (double)(p->total - done) / rate : 0;
    double fraction = p->total > 0 ? (double)done / (double)p->total : 1.0;
    double spent = p->budget_spent + elapsed;
    if (p->budget > 0 && spent / p->budget > fraction) {
        fraction = spent < p->budget ? spent / p->budget : 1.0;
        eta = p->budget - spent > 0 ? p->budget - spent : 0;
    }
    char extra[256] = "";
    if (fmt) {
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(extra, sizeof extra, fmt, ap);
        va_end(ap);
    }
    if (p->tty) {
        int width = 24, filled = (int)(width * fraction);
        char bar[32];
        for (int i = 0; i < width; i++)
            bar[i] = i < filled ? '#' : '.';
        bar[width] = '\0';
        fprintf(stderr, "\r%-12s [%s] step %lld %.1f/s ETA %.0fs %s\033[K", p->label, bar, (long long)done, rate,
                eta, extra);
    } else {
        fprintf(stderr, "%s: step %lld (%.0f%%, %.1f/s, ETA %.0fs) %s\n", p->label, (long long)done, 100 * fraction, rate,
                eta, extra);
    }
    fflush(stderr);
}

void lb_progress_end(lb_progress *p)
{
    if (p->tty)
        fputc('\n', stderr);
}

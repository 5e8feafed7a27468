/* What `lookback demo` adds to a comparison (lab/compare.h): its spike files, generated
 * once into a cache folder and reused while their options match, and a learning-rate
 * search for the LSTMs. */
#ifndef LB_LAB_DEMO_H
#define LB_LAB_DEMO_H

#include <stddef.h>
#include <stdint.h>

#include "lab/compare.h"
#include "tensor/api.h"

LB_API_BEGIN

/* One spike file of the demo: its name (DIR/<name>.h5) and generator options. */
typedef struct lb_demo_file {
    const char *name;
    int64_t seq_len, min_distance, max_distance, n_train, n_val, n_test;
} lb_demo_file;

/* The path DIR/<f->name>.h5 into path (size bytes), generated with seed unless a valid
 * file made with the same options is there already (one that differs is regenerated,
 * saying why on stderr). Errors: LB_ERR_VALUE (path too long), the generator's. */
lb_status lb_demo_ensure_file(const char *dir, const lb_demo_file *f, uint64_t seed, char *path, size_t size,
                              int quiet);
/* An exclusive lock on the cache (DIR/.lock) while the demo checks and makes its files:
 * a second demo on the same cache waits, saying so, and then finds them made. Returns
 * the descriptor (keep it open) or -1 with LB_ERR_IO. */
int lb_demo_lock_cache(const char *dir, int quiet);
/* Picks spec's learning rate from {3e-3, 1e-3, 3e-4} by validation accuracy after
 * `budget` seconds of training each (runs kept in out_dir/<name>-lr-search/) and says so
 * in spec->note. Errors: those of lb_run_train. */
lb_status lb_demo_choose_lr(lb_compare_model *spec, const char *out_dir, double budget, int quiet);

LB_API_END

#endif

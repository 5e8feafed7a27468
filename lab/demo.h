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

/* The demo's files, in the order the functions below take them: "train" (256 events,
 * clue 1..250 back), "short" (64, 4..60), "near-100", "far-1000" and "far-7000"
 * (evaluation only). */
enum { LB_DEMO_FILES = 5, LB_DEMO_MODELS = 3, LB_DEMO_EVALS = 4 };
/* Makes (or finds) the demo's files in data_dir (lb_demo_ensure_file, seeds 1000 + i;
 * --quick sizes when `quick`) and puts their paths in paths[i]. The caller holds the
 * cache's lock (lb_demo_lock_cache). Errors: those of lb_demo_ensure_file. */
lb_status lb_demo_make_data(const char *data_dir, int quick, int quiet, char paths[LB_DEMO_FILES][4096]);
/* The demo's models into models[0..3): "attention" (one pre-norm block of d_model 64, 4
 * heads, no positional encoding, lr 3e-3) and "lstm" (hidden 128, forget-gate bias 1) on
 * the train file, "lstm-short", the same LSTM on the short file; each with time_budget
 * `budget` on `clock`, warm-up 50 steps, validation every 25 (quick) or 100 steps on 256
 * examples, `threads` threads (0 = the default). */
void lb_demo_models(char paths[LB_DEMO_FILES][4096], int quick, double budget, lb_budget_clock clock, int threads,
                    lb_compare_model models[LB_DEMO_MODELS]);
/* The demo's evaluation files into evals[0..4): short, ~100, ~1000 and ~7000 events back. */
void lb_demo_evals(char paths[LB_DEMO_FILES][4096], lb_compare_eval evals[LB_DEMO_EVALS]);

LB_API_END

#endif

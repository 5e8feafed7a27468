/* Shared CUnit scaffolding for lookback's test programs. */
#ifndef LB_TEST_SUPPORT_H
#define LB_TEST_SUPPORT_H

#include <CUnit/CUnit.h>

#include "autograd/autograd.h"
#include "data/dataset.h"
#include "layers/model.h"
#include "layers/params.h"
#include "tensor/tensor.h"
#include "train/trainer.h"

typedef struct lb_test_case {
    const char *name;
    void (*fn)(void);
} lb_test_case;

/* Runs the NULL-terminated list of cases as one CUnit suite with the basic runner
 * (verbose) and returns 0 when every assertion held, 1 otherwise. */
int lb_test_main(const char *suite, const lb_test_case *cases);

/* Asserts every element of t is within atol + rtol*|expected| of expected[i]
 * (row-major); prints the first mismatch with `what`. Returns 1 if all matched. */
int lb_check_close(const lb_tensor *t, const double *expected, double atol, double rtol, const char *what);
#define LB_ASSERT_CLOSE(t, expected, atol, rtol) \
    CU_ASSERT_TRUE(lb_check_close((t), (expected), (atol), (rtol), #t))

/* Asserts that two tensors have the same shape and close values. */
int lb_check_tensors_close(const lb_tensor *a, const lb_tensor *b, double atol, double rtol, const char *what);
#define LB_ASSERT_TENSORS_CLOSE(a, b, atol, rtol) \
    CU_ASSERT_TRUE(lb_check_tensors_close((a), (b), (atol), (rtol), #a " vs " #b))

/* Helpers shared by the op tests. */
/* Values 0, 1, 2, ... in row-major order. */
lb_tensor *lb_test_iota(lb_dtype dtype, int ndim, const int64_t *shape);
/* Uniform U(low, high) values from a generator seeded with `seed` (one draw per element,
 * row-major, rounded to dtype); as a float64 parameter named `name`. */
lb_tensor *lb_test_uniform(lb_dtype dtype, int ndim, const int64_t *shape, uint64_t seed, double low, double high);
lb_var *lb_test_uniform_param(int ndim, const int64_t *shape, uint64_t seed, double low, double high,
                              const char *name);
/* The same with U(-1, 1). */
lb_tensor *lb_test_random_tensor(lb_dtype dtype, int ndim, const int64_t *shape, uint64_t seed);
lb_var *lb_test_random_param(int ndim, const int64_t *shape, uint64_t seed, const char *name);
/* Refills every parameter of ps, in order, from one generator seeded with `seed`. */
void lb_test_randomize_params(lb_params *ps, uint64_t seed, double low, double high);
/* 1 when the last error message contains `text`. */
int lb_test_error_has(const char *text);

/* A small model configuration of `kind` for the model tests: 2 layers (3 for the
 * convolution), d_model 16, 2 heads, d_ff 24, hidden_size 12, kernel_size 3, a head at
 * every position; vocab_size tokens, num_classes classes, positions `pos`, a window of
 * `window` keys (local attention only; 0 for the other kinds), max_seq_len, seed. */
lb_model_config lb_test_small_model(lb_model_kind kind, lb_pos_kind pos, lb_dtype dtype, int64_t vocab_size,
                                    int64_t num_classes, int64_t window, int64_t max_seq_len, uint64_t seed);

/* The tiny LSTM the file tests train and its training: one layer, d_model = hidden_size
 * = width, for ds's vocabulary, classes and length (into *mc); `steps` steps of batch 4
 * on one thread, no validation during the run (into *tc). */
void lb_test_tiny_lstm(const lb_dataset *ds, int64_t width, int64_t steps, lb_model_config *mc, lb_train_config *tc);
/* Asserts v is a contiguous variable of the given rank and shape. */
void lb_test_assert_shape(const lb_var *v, int ndim, const int64_t *shape);

/* Asserts the last call failed with `status` and a message naming `op` and `shape`. */
#define LB_ASSERT_ERROR(status, op, shape)                                                                  \
    do {                                                                                                 \
        CU_ASSERT_EQUAL(lb_last_status(), (status));                                                     \
        CU_ASSERT_TRUE(lb_test_error_has(op));                                                                         \
        CU_ASSERT_TRUE(lb_test_error_has(shape));                                                                      \
        if (lb_last_status() != (status) || !lb_test_error_has(op) || !lb_test_error_has(shape))                                     \
            fprintf(stderr, "\n  line %d: got status %d, message \"%s\"\n", __LINE__, (int)lb_last_status(), \
                    lb_last_error());                                                                    \
    } while (0)

/* Two metrics.csv files (lb_metrics_header's columns; a header line, if any, must be the
 * same) hold the same rows: same step and split, loss, accuracy, lr and grad_norm within
 * rtol (relative, at least absolute for values below 1), timing columns aside, and
 * expect_rows rows. Prints the first difference. */
int lb_test_metrics_match(const char *path_a, const char *path_b, int expect_rows, double rtol);

/* Time limits of the tests (how long a test waits for a program to reach a state it
 * announces, or to end) are multiplied by LOOKBACK_TEST_TIME_SCALE (a number in
 * [1, 1000], default 1; tests/README.md): a slow build or a busy machine raises it, no
 * assertion depends on it. lb_test_time_scale returns the factor (a bad value is said on
 * stderr once and counts as 1); lb_test_limit(s) is s seconds scaled. */
double lb_test_time_scale(void);
double lb_test_limit(double seconds);

/* Path of a fixture file under tests/fixtures (static buffer). */
const char *lb_fixture_path(const char *name);

/* Dataset `name` (a path such as "grad/input") of an open HDF5 file as a new tensor of
 * `dtype` (values read as double); NULL, with a note on stderr, when it is absent or
 * has more than LB_MAX_DIMS dims. */
lb_tensor *lb_test_h5_read(long long file, const char *name, lb_dtype dtype);
/* The same from a file path (opened and closed here). */
lb_tensor *lb_test_h5_read_path(const char *path, const char *name, lb_dtype dtype);

#endif

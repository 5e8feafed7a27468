/* Shared CUnit scaffolding for lookback's test programs. */
#ifndef LB_TEST_SUPPORT_H
#define LB_TEST_SUPPORT_H

#include <CUnit/CUnit.h>

#include "tensor/tensor.h"

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

/* Path of a fixture file under tests/fixtures (static buffer). */
const char *lb_fixture_path(const char *name);

#endif

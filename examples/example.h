/* Small helpers shared by the examples: printing a matrix, and checking a claim.
 *
 * Every example asserts the numbers it prints with CHECK, so that running it under
 * ctest keeps the tutorial (docs/tutorial.md) true: a claim that stops holding prints
 * "CLAIM FAILED" with the file and line, and the program exits with status 1. */
#ifndef LOOKBACK_EXAMPLE_H
#define LOOKBACK_EXAMPLE_H

#include <stdio.h>

#include "lookback.h"

static int example_failures = 0;

#define CHECK(cond, ...)                                                  \
    do {                                                                  \
        if (!(cond)) {                                                    \
            fprintf(stderr, "CLAIM FAILED (%s:%d): ", __FILE__, __LINE__); \
            fprintf(stderr, __VA_ARGS__);                                 \
            fprintf(stderr, "\n");                                        \
            example_failures++;                                           \
        }                                                                 \
    } while (0)

/* A library call returned NULL or an error: print lookback's message and stop. */
#define REQUIRE(ok, what)                                                  \
    do {                                                                   \
        if (!(ok)) {                                                       \
            fprintf(stderr, "%s failed: %s\n", (what), lb_last_error());   \
            return 1;                                                      \
        }                                                                  \
    } while (0)

/* Prints a 2-D tensor (or the last two dimensions of the first item) row by row. */
static inline void print_matrix(const char *name, const lb_tensor *t)
{
    int64_t rows = t->ndim >= 2 ? t->shape[t->ndim - 2] : 1;
    int64_t cols = t->shape[t->ndim - 1];
    for (int64_t i = 0; i < rows; i++) {
        printf("%-10s [", i == 0 ? name : "");
        for (int64_t j = 0; j < cols; j++)
            printf("%s%8.3f", j ? " " : "", lb_tensor_flat(t, i * cols + j));
        printf(" ]\n");
    }
}

/* The value the example returns from main. */
static inline int example_status(void)
{
    if (example_failures)
        fprintf(stderr, "%d claim(s) failed\n", example_failures);
    return example_failures ? 1 : 0;
}

#endif

/* Seeded pseudo-random numbers, identical on every machine and thread count.
 *
 * Algorithm: xoshiro256** (Blackman and Vigna, 2018) with its state seeded from a
 * 64-bit seed through splitmix64. Uniform doubles take the top 53 bits of a draw;
 * normals use the Box-Muller transform on two uniforms (one normal per pair);
 * bounded integers use Lemire's unbiased multiply-and-reject method; permutations
 * are Fisher-Yates shuffles. The state is four 64-bit words and can be saved and
 * restored (checkpoints do so).
 */
#ifndef LB_RNG_H
#define LB_RNG_H

#include "tensor/api.h"

#include <stdint.h>

#include "tensor/tensor.h"

LB_API_BEGIN

typedef struct lb_rng {
    uint64_t s[4];
} lb_rng;

/* Seeds the generator; any seed (including 0) gives a valid state. */
void lb_rng_seed(lb_rng *rng, uint64_t seed);
/* Next raw 64-bit draw. */
uint64_t lb_rng_next(lb_rng *rng);
/* Uniform double in [0, 1). */
double lb_rng_uniform(lb_rng *rng);
/* Uniform double in [low, high). */
double lb_rng_uniform_range(lb_rng *rng, double low, double high);
/* Standard normal draw (mean 0, variance 1). */
double lb_rng_normal(lb_rng *rng);
/* Uniform integer in [0, n) for n >= 1 (n == 0 returns 0). */
uint64_t lb_rng_below(lb_rng *rng, uint64_t n);
/* Uniform integer in [low, high] inclusive, any low <= high of int64 (the whole range
 * included). low > high or a NULL rng: -1 with an LB_ERR_VALUE error. */
int64_t lb_rng_int(lb_rng *rng, int64_t low, int64_t high);
/* Writes a uniformly random permutation of 0..n-1 into out (Fisher-Yates). n < 0 or a
 * NULL argument: an LB_ERR_VALUE error, out untouched. */
void lb_rng_permutation(lb_rng *rng, int64_t n, int64_t *out);
/* A new independent stream derived from this one (advances `rng` by one draw). With rng
 * NULL: a stream seeded with 0, and LB_ERR_VALUE in lb_last_error(). */
lb_rng lb_rng_split(lb_rng *rng);

/* Fills every element of t with U[low, high) / N(mean, std^2), row-major order. */
void lb_rng_fill_uniform(lb_rng *rng, lb_tensor *t, double low, double high);
void lb_rng_fill_normal(lb_rng *rng, lb_tensor *t, double mean, double std);

LB_API_END

#endif

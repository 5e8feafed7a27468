#include "tensor/rng.h"

#include <math.h>

static uint64_t splitmix64(uint64_t *x)
{
    uint64_t z = (*x += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}

static uint64_t rotl(uint64_t x, int k) { return (x << k) | (x >> (64 - k)); }

void lb_rng_seed(lb_rng *rng, uint64_t seed)
{
    LB_CHECK_ARG(rng);
    for (int i = 0; i < 4; i++)
        rng->s[i] = splitmix64(&seed);
}

uint64_t lb_rng_next(lb_rng *rng)
{
    LB_CHECK_ARG(rng, 0);
    uint64_t *s = rng->s;
    uint64_t result = rotl(s[1] * 5, 7) * 9;
    uint64_t t = s[1] << 17;
    s[2] ^= s[0];
    s[3] ^= s[1];
    s[1] ^= s[2];
    s[0] ^= s[3];
    s[2] ^= t;
    s[3] = rotl(s[3], 45);
    return result;
}

double lb_rng_uniform(lb_rng *rng)
{
    LB_CHECK_ARG(rng, NAN);
    return (double)(lb_rng_next(rng) >> 11) * 0x1.0p-53;
}

double lb_rng_uniform_range(lb_rng *rng, double low, double high)
{
    LB_CHECK_ARG(rng, NAN);
    return low + (high - low) * lb_rng_uniform(rng);
}

double lb_rng_normal(lb_rng *rng)
{
    LB_CHECK_ARG(rng, NAN);
    double u1 = 1.0 - lb_rng_uniform(rng); /* (0, 1]: log never sees 0 */
    double u2 = lb_rng_uniform(rng);
    return sqrt(-2.0 * log(u1)) * cos(2.0 * M_PI * u2);
}

uint64_t lb_rng_below(lb_rng *rng, uint64_t n)
{
    LB_CHECK_ARG(rng, 0);
    if (n == 0)
        return 0;
    unsigned __int128 m = (unsigned __int128)lb_rng_next(rng) * n;
    uint64_t low = (uint64_t)m;
    if (low < n) {
        uint64_t threshold = -n % n;
        while (low < threshold) {
            m = (unsigned __int128)lb_rng_next(rng) * n;
            low = (uint64_t)m;
        }
    }
    return (uint64_t)(m >> 64);
}

int64_t lb_rng_int(lb_rng *rng, int64_t low, int64_t high)
{
    LB_CHECK_ARG(rng, -1);
    if (low > high) {
        lb_error(LB_ERR_VALUE, "lb_rng_int: the range [%lld, %lld] is empty (low > high)", (long long)low,
                 (long long)high);
        return -1;
    }
    /* the width as unsigned (no signed overflow); the whole int64 range has 2^64 values */
    uint64_t width = (uint64_t)high - (uint64_t)low;
    uint64_t draw = width == UINT64_MAX ? lb_rng_next(rng) : lb_rng_below(rng, width + 1);
    return (int64_t)((uint64_t)low + draw);
}

void lb_rng_permutation(lb_rng *rng, int64_t n, int64_t *out)
{
    LB_CHECK_ARG(rng);
    LB_CHECK_ARG(out);
    if (n < 0) {
        lb_error(LB_ERR_VALUE, "lb_rng_permutation: n = %lld is negative", (long long)n);
        return;
    }
    for (int64_t i = 0; i < n; i++)
        out[i] = i;
    for (int64_t i = n - 1; i > 0; i--) {
        int64_t j = (int64_t)lb_rng_below(rng, (uint64_t)i + 1);
        int64_t tmp = out[i];
        out[i] = out[j];
        out[j] = tmp;
    }
}

lb_rng lb_rng_split(lb_rng *rng)
{
    lb_rng child;
    if (!rng) { /* a stream seeded with 0, and the error */
        lb_rng_seed(&child, 0);
        lb_error(LB_ERR_VALUE, "lb_rng_split: rng is NULL");
        return child;
    }
    lb_rng_seed(&child, lb_rng_next(rng));
    return child;
}

void lb_rng_fill_uniform(lb_rng *rng, lb_tensor *t, double low, double high)
{
    LB_CHECK_ARG(rng);
    LB_CHECK_ARG(t);
    int64_t n = lb_tensor_numel(t);
    lb_tensor *c = lb_tensor_is_contiguous(t) ? NULL : lb_tensor_zeros_like(t);
    lb_tensor *dst = c ? c : t;
    LB_DISPATCH(t->dtype, T, {
        T *p = lb_tensor_data(dst);
        for (int64_t i = 0; i < n; i++)
            p[i] = (T)lb_rng_uniform_range(rng, low, high);
    });
    if (c) {
        lb_tensor_copy_into(t, c);
        lb_tensor_free(c);
    }
}

void lb_rng_fill_normal(lb_rng *rng, lb_tensor *t, double mean, double std)
{
    LB_CHECK_ARG(rng);
    LB_CHECK_ARG(t);
    int64_t n = lb_tensor_numel(t);
    lb_tensor *c = lb_tensor_is_contiguous(t) ? NULL : lb_tensor_zeros_like(t);
    lb_tensor *dst = c ? c : t;
    LB_DISPATCH(t->dtype, T, {
        T *p = lb_tensor_data(dst);
        for (int64_t i = 0; i < n; i++)
            p[i] = (T)(mean + std * lb_rng_normal(rng));
    });
    if (c) {
        lb_tensor_copy_into(t, c);
        lb_tensor_free(c);
    }
}

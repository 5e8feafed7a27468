#include "layers/params.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/sysinfo.h>

void lb_params_init(lb_params *ps)
{
    LB_CHECK_ARG(ps);
    memset(ps, 0, sizeof *ps);
}

void lb_params_free(lb_params *ps)
{
    LB_CHECK_ARG(ps);
    for (int i = 0; i < ps->count; i++)
        lb_param_free(ps->items[i]);
    free(ps->items);
    memset(ps, 0, sizeof *ps);
}

char *lb_param_name(char *buf, size_t size, const char *prefix, const char *name)
{
    LB_CHECK_ARG(buf, NULL);
    LB_CHECK_ARG(name, NULL);
    if (prefix && prefix[0])
        snprintf(buf, size, "%s.%s", prefix, name);
    else
        snprintf(buf, size, "%s", name);
    return buf;
}

lb_var *lb_params_find(const lb_params *ps, const char *name)
{
    LB_CHECK_ARG(ps, NULL);
    LB_CHECK_ARG(name, NULL);
    for (int i = 0; i < ps->count; i++)
        if (strcmp(ps->items[i]->name, name) == 0)
            return ps->items[i];
    return NULL;
}

/* The machine's memory, RAM and swap, in bytes (0 when unknown). */
static double machine_memory_bytes(void)
{
    struct sysinfo si;
    if (sysinfo(&si) != 0)
        return 0;
    return ((double)si.totalram + (double)si.totalswap) * (double)si.mem_unit;
}

/* Parameters beyond the machine's memory could never be trained (the optimiser's state
 * and the gradients need as much again): refused before they are allocated, since the
 * kernel grants large zeroed allocations lazily and would end the process when the
 * initialisation touches them. */
static lb_status check_fits(const lb_params *ps, const char *full, lb_dtype dtype, int ndim, const int64_t *shape)
{
    double bytes = (double)lb_dtype_size(dtype), total = 0, mem = machine_memory_bytes();
    for (int d = 0; d < ndim; d++)
        bytes *= shape[d] > 0 ? (double)shape[d] : 0;
    for (int i = 0; i < ps->count; i++)
        total += (double)lb_tensor_numel(ps->items[i]->value) * (double)lb_dtype_size(ps->items[i]->value->dtype);
    if (mem > 0 && total + bytes > mem)
        return lb_error(LB_ERR_MEMORY,
                        "parameters: '%s' (%.3g GB) would bring the parameters to %.3g GB, more than this machine's "
                        "memory (%.3g GB with swap)",
                        full, bytes / 1e9, (total + bytes) / 1e9, mem / 1e9);
    return LB_OK;
}

lb_var *lb_params_add(lb_params *ps, const char *prefix, const char *name, lb_dtype dtype, int ndim,
                      const int64_t *shape)
{
    LB_CHECK_ARG(ps, NULL);
    LB_CHECK_ARG(name, NULL);
    LB_CHECK_SHAPE(ndim, shape, NULL);
    char full[256];
    lb_param_name(full, sizeof full, prefix, name);
    if (lb_params_find(ps, full)) {
        lb_error(LB_ERR_VALUE, "parameters: the name '%s' is already taken", full);
        return NULL;
    }
    if (ps->count == ps->capacity) {
        int cap = ps->capacity ? ps->capacity * 2 : 16;
        lb_var **items = realloc(ps->items, (size_t)cap * sizeof *items);
        if (!items) {
            lb_error(LB_ERR_MEMORY, "parameters: out of memory adding '%s'", full);
            return NULL;
        }
        ps->items = items;
        ps->capacity = cap;
    }
    if ((ndim == 0 || shape) && check_fits(ps, full, dtype, ndim, shape) != LB_OK)
        return NULL;
    lb_var *p = lb_param_new(lb_tensor_zeros(dtype, ndim, shape), full);
    if (p)
        ps->items[ps->count++] = p;
    return p;
}

int64_t lb_params_numel(const lb_params *ps)
{
    LB_CHECK_ARG(ps, -1);
    int64_t n = 0;
    for (int i = 0; i < ps->count; i++)
        n += lb_tensor_numel(ps->items[i]->value);
    return n;
}

void lb_params_zero_grad(lb_params *ps)
{
    LB_CHECK_ARG(ps);
    for (int i = 0; i < ps->count; i++)
        lb_param_zero_grad(ps->items[i]);
}

void lb_init_uniform(lb_var *p, lb_rng *rng, double bound)
{
    LB_CHECK_INPUT(p);
    LB_CHECK_ARG(rng);
    lb_rng_fill_uniform(rng, p->value, -bound, bound);
}
void lb_init_normal(lb_var *p, lb_rng *rng, double std)
{
    LB_CHECK_INPUT(p);
    LB_CHECK_ARG(rng);
    lb_rng_fill_normal(rng, p->value, 0.0, std);
}
void lb_init_constant(lb_var *p, double value)
{
    LB_CHECK_INPUT(p);
    lb_tensor_fill(p->value, value);
}

void lb_init_xavier_uniform(lb_var *p, lb_rng *rng, int64_t fan_in, int64_t fan_out)
{
    LB_CHECK_INPUT(p);
    LB_CHECK_ARG(rng);
    if (fan_in < 1 || fan_out < 1) {
        lb_error(LB_ERR_VALUE, "lb_init_xavier_uniform: fan_in %lld and fan_out %lld must be >= 1",
                 (long long)fan_in, (long long)fan_out);
        return;
    }
    lb_init_uniform(p, rng, sqrt(6.0 / ((double)fan_in + (double)fan_out)));
}

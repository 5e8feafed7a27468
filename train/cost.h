/* What training costs: the machine's matrix-product rate, the model FLOPs utilisation
 * (MFU) of a run against it, and the process's peak memory.
 *
 * MFU = (training FLOPs per position × positions per second) / the float32 sgemm rate
 * measured on this machine with the threads in use: nanoGPT's estimate_mfu and llm.c's
 * mfu.h divide by a data-sheet peak; lookback measures its own product instead, so a
 * figure near 1 means the step runs as fast as one large product would (docs/inspect.md).
 */
#ifndef LB_TRAIN_COST_H
#define LB_TRAIN_COST_H

#include <stddef.h>

#include "tensor/api.h"

LB_API_BEGIN

/* FLOP/s of float32 matrix products on this machine: the best of a few timed square
 * products c [N, N] = a [N, N] b [N, N] (N = 512, 2 N³ FLOPs each) through the library's
 * gemm (lb_k_gemm) on lb_get_num_threads() threads, after one warm-up product; about
 * 50 ms the first time, then remembered for the process (per thread count). 0 when the
 * buffers cannot be allocated (LB_ERR_MEMORY). */
double lb_sgemm_rate(void);

/* Model FLOPs utilisation: flops_per_position × positions_per_second / rate; NAN when a
 * figure is missing (rate <= 0, NAN FLOPs, no positions). */
double lb_mfu(double flops_per_position, double positions_per_second, double rate);

/* The process's peak resident set size so far in MiB (getrusage's ru_maxrss); NAN when it
 * cannot be read. */
double lb_peak_memory_mib(void);

/* A FLOP count as text with an SI prefix, three significant digits ("1.23M", "456k",
 * "12"; "nan"), into buf; returns buf (NULL with LB_ERR_VALUE for a NULL buf). */
char *lb_flops_text(double flops, char *buf, size_t size);

LB_API_END

#endif

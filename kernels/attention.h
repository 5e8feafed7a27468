/* Fused exact attention kernels: softmax(scale * Q Kᵀ + mask) V without ever holding
 * the Tq x Tk score matrix (FlashAttention-2, Dao 2023, algorithms 1 and 2).
 *
 * Named dims: L the leading dims of every operand (L[0] = B batch, then heads or any
 * others), N = prod(L) independent attention problems ("heads"), Tq queries, Tk keys,
 * D = d_k query/key width, Dv = d_v value width. Shapes:
 *   q        [*L, Tq, D]     k [*Lkv, Tk, D]   v [*Lkv, Tk, Dv]
 *   out      [*L, Tq, Dv]    lse [*L, Tq]      (the scores would be [*L, Tq, Tk])
 * Lkv is L except that its last dim may be a divisor Hkv of L's last dim H: grouped-query
 * attention (Ainslie et al. 2023; Hkv = 1 is multi-query, Shazeer 2019), where query head
 * h reads key/value head h / (H / Hkv) (torch's scaled_dot_product_attention with
 * enable_gqa=True, i.e. repeat_interleave of the key/value heads). The kernels read the
 * shared key/value head in place for every query head of its group (no copy per query
 * head); the backward sums dK and dV over the group.
 *
 * Forward. Queries are cut into tiles of BQ rows and keys into tiles of BK; each
 * (head, query tile) is one work item. For its key tiles in order it computes
 * S = scale * Q_tile K_tileᵀ (one gemm), applies the mask to S, and updates each row's
 * running max m and sum l (online softmax, Milakov and Gimelshein 2018):
 *   m' = max(m, rowmax S), P = exp(S - m'), l' = l e^(m - m') + rowsum P,
 *   O' = O e^(m - m') + P V_tile (one gemm);
 * at the end O /= l and lse = m + log l. Only out and lse ([*L, Tq]) are written.
 *
 * Backward. D_i = rowsum(dO_i * O_i) first. Key tiles are owned by work items: an item
 * (key/value head, group g) takes key tiles g, g + G, g + 2G, ... of one key/value head
 * and, for each query head that reads it in order, loops over the query tiles that can
 * see the key tile, recomputing S and P = exp(S - lse):
 *   dV_tile += Pᵀ dO_tile,  dP = dO_tile V_tileᵀ,  dS = P * (dP - D),
 *   dK_tile += scale dSᵀ Q_tile,  dQ_g[tile] += scale dS K_tile,
 * all products as tile products (see Products below). dK and dV need no atomics (an item owns its key tiles);
 * dQ is accumulated per group in G private buffers summed in group order at the end.
 * G depends only on the shapes (enough items for 8 threads: G = ceil(8 / Nkv), Nkv = prod(Lkv), at most
 * the number of key tiles), never on the thread count.
 *
 * Tiles: forward 128 queries x 128 keys, backward 64 queries x 128 keys (the sizes
 * and how they were chosen: docs/log/performance-history.md). A sliding window of W < 64 keys (local attention) gets band
 * tiles instead: query tiles (and the backward's key tiles) of W rounded up to a
 * multiple of 16, and each query tile's keys taken from the first one its rows may see,
 * so a query tile computes bq + W - 1 scores per row rather than one or two 128-key tiles.
 *
 * Products. float32 problems with Tq >= 8 run every tile product on a register-blocked
 * micro-kernel (kernels/tile_gemm.c: broadcast A, rows of B, the
 * C block in registers, no packing per call) in the AVX-512 and AVX2 builds of the
 * kernels (lb_k_attention_isa). Its right-hand operands must be row-major, so each head's Kᵀ [D, Tk]
 * (forward and backward) and Vᵀ [Dv, Tk] (backward) are packed once per call, before
 * the items run (extra memory: one copy of k, and of v in the backward). float64, and
 * float32 with fewer queries (a decoding step, where packing every key would not be
 * repaid), and the baseline build call OpenBLAS per tile instead (gemv for one query).
 * One query per head (a decoding step over a key cache) in the AVX-512 build, with D and
 * Dv multiples of 16 up to 64, reads each key and value row as whole vectors (16 rows'
 * dot products folded by a transposition tree) instead of OpenBLAS's gemv, which spends
 * about one instruction per cached float on rows this short.
 *
 * ALiBi's bias is added on every computed tile (with the per-element masks).
 * Masks are read per tile (lb_attn_kmask). Key tiles that the causal, window and
 * padding limits exclude for every query of a query tile are skipped, never
 * computed; tiles inside every row's limits skip the per-element test. On the
 * micro-kernel a tile that those limits cut (a causal diagonal tile) is computed in
 * groups of 16 queries, each over only the keys some query of the group may see (S, P V,
 * dP, dQ), and the backward's dV and dK sum each group of 16 keys over only the queries
 * that may see one of them. Masked scores become -inf before the max; a row with no allowed key gives out = 0 and
 * lse = +inf (so its recomputed P is 0 and its gradients are 0: never NaN).
 *
 * Threads (tensor/threads.h): OpenMP over the work items (dynamic schedule) with
 * lb_get_num_threads() threads, OpenBLAS single-threaded inside the region. Every
 * output element is computed by the same sequence of floating-point operations
 * whatever the number of threads and whichever thread runs an item, so results are
 * bit-for-bit identical for 1, 2 or any number of threads (and from run to run).
 * They can differ between machines: the float32 elementwise loops run in an AVX-512
 * or AVX2 build where the CPU has it (chosen at run time, lb_k_attention_isa) and in a
 * baseline build otherwise (the builds round differently: FMA), and OpenBLAS (float64,
 * short float32 queries) picks its kernels by CPU too.
 *
 * Numerics: float32 computes S, P and the products in float32 (each product element
 * is one float32 sum over its inner dimension in index order, then scaled), exp by a Cephes-style polynomial (max relative error about 2 ulp), row
 * sums l in double; float64 uses libm's exp. No -ffast-math: infinities carry the
 * masks.
 */
#ifndef LB_KERNELS_ATTENTION_H
#define LB_KERNELS_ATTENTION_H

#include "tensor/api.h"

#include "tensor/tensor.h"

LB_API_BEGIN

/* Which keys a query may attend to, in the form the tile kernels read it. Query i of
 * batch item b sits at key position pos(i) = query_positions[b * Tq + i] when given,
 * else i + (Tk - Tq) (the last query aligned with the last key). Key j is allowed when
 *   j < key_lengths[b]                                   (padding, if given)
 *   j <= pos(i)                                          (if causal or window > 0)
 *   j > pos(i) - window                                  (if window > 0)
 *   allowed[i, j] != 0                                   (if given)
 *   additive[i, j] != -inf                               (if given; added to S)
 * allowed and additive are read at element offsets sum_d idx_d * strides[d] over the
 * scores' dims [*L, Tq, Tk] (0 on broadcast dims), from their first element. */
typedef struct lb_attn_kmask {
    int causal;
    int64_t window;                        /* 0 = off */
    const int32_t *key_lengths;            /* [B] or NULL */
    const int32_t *query_positions;       /* [B, Tq] or NULL */
    const unsigned char *allowed;          /* nonzero = may attend; NULL = none */
    int64_t allowed_strides[LB_MAX_DIMS];
    const void *additive;                  /* the operands' dtype; NULL = none */
    int64_t additive_strides[LB_MAX_DIMS];
    double softcap;                        /* > 0: S = softcap tanh(S / softcap) before the
                                              mask (Gemma 2); 0 = off */
    const double *alibi_slopes;            /* [H] or NULL: ALiBi (Press et al. 2022), S of
                                              query i and key j += -m_h |pos(i) - j| after the
                                              soft-cap, h the index in the last leading dim of q
                                              (the heads of [B, H, Tq, D]), H that dim's size */
} lb_attn_kmask;

/* Forward (every operand contiguous, one dtype; mask may be NULL):
 *   q [*L, Tq, D], k [*Lkv, Tk, D], v [*Lkv, Tk, Dv] -> out [*L, Tq, Dv], lse [*L, Tq]
 *   out = softmax(scale * q kᵀ + mask) v over the keys; lse = log sum_j exp(z_ij)
 *   over the allowed keys (+inf for a row with none, whose out is 0).
 * Errors: LB_ERR_SHAPE / LB_ERR_DTYPE for operands that do not fit (message names the
 * shapes), LB_ERR_MEMORY. Values of key_lengths / query_positions are not checked
 * here (the autograd op checks them). */
lb_status lb_k_attention_forward(const lb_tensor *q, const lb_tensor *k, const lb_tensor *v, const lb_attn_kmask *mask,
                                 double scale, lb_tensor *out, lb_tensor *lse);

/* Backward: accumulates (+=) into grad_q [*L, Tq, D], grad_k [*Lkv, Tk, D],
 * grad_v [*Lkv, Tk, Dv] the gradients of sum(grad_out * out) given the forward's
 * out and lse, recomputing the scores tile by tile. Any of the three may be NULL (not
 * wanted). They must not overlap each other or the inputs. grad_out: [*L, Tq, Dv].
 * Errors as the forward. */
lb_status lb_k_attention_backward(const lb_tensor *q, const lb_tensor *k, const lb_tensor *v, const lb_tensor *out,
                                  const lb_tensor *lse, const lb_attn_kmask *mask, double scale,
                                  const lb_tensor *grad_out, lb_tensor *grad_q, lb_tensor *grad_k,
                                  lb_tensor *grad_v);

/* The build of the float32 elementwise loops and tile products the kernels use: "avx512" (AVX-512F with
 * FMA, 16 float lanes per register), "avx2" (AVX2 with FMA) or "generic" (baseline
 * x86-64 or any other CPU). By default the best the CPU supports (__builtin_cpu_supports
 * at the first call). */
const char *lb_k_attention_isa(void);
/* Chooses that build: "avx512", "avx2", "generic", or "auto" / NULL to return to the
 * automatic choice. Errors: LB_ERR_VALUE (choice unchanged) for an unknown name or a
 * build this CPU cannot run. For tests and benchmarks; not thread-safe against running
 * kernels. */
lb_status lb_k_attention_set_isa(const char *name);

LB_API_END

#endif

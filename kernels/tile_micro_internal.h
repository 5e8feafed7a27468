/* The float32 tile product on vectors of LB_VL lanes: a register-blocked micro-kernel
 * for small products (m, n, k up to a few hundred: one tile of the fused attention
 * kernels, a narrow layer, an LSTM's recurrent product), with no packing per call.
 * kernels/tile_gemm.c includes this file once per vector width (after
 * kernels/vector_internal.h, whose vf<LB_VL> types and loads it uses) with LB_VL
 * defined; each inclusion defines tile_gemm_f<LB_VL>.
 *
 *   C [m, n] = alpha * A B          (accumulate = 0)
 *   C [m, n] = C + alpha * A B      (accumulate = 1)
 *   A [m, k]: element (i, l) at a[i * a_rs + l * a_cs] (row-major A: a_rs = lda, a_cs = 1;
 *             the transpose of a row-major [k, m] matrix: a_rs = 1, a_cs = its row stride)
 *   B [k, n]: row-major, row stride ldb        C [m, n]: row-major, row stride ldc
 *
 * The operands the attention kernels pass (named dims of kernels/attention.h): Q tile [bq, D],
 * Kᵀ and Vᵀ packed once per head [D, Tk] and [Dv, Tk], V, K, dO and Q tiles as stored,
 * P and dS tiles [bq, bk] (or their transposes as A). B is read in rows of vectors, so the
 * products need the right-hand operand row-major: the reason Kᵀ and Vᵀ are packed.
 *
 * Blocking: C is cut into blocks of MR rows by NV vectors (NV * LB_VL columns); a block's
 * MR x NV accumulators stay in registers for the whole k loop, which per step loads NV
 * vectors of one B row and broadcasts MR elements of one A column (MR * NV multiply-adds
 * per MR + NV loads). MR is chosen per NV to fill the register file without spilling:
 *   16 lanes (AVX-512, 32 registers): NV 4, 3, 2, 1 -> MR 4, 4, 8, 16 (16 accumulators at most)
 *   8 lanes (AVX2, 16 registers):     NV 2, 1       -> MR 4, 8        (8 accumulators)
 * Rows left over after the MR blocks go in blocks of 4 and then of 1; a last partial
 * vector of columns (n not a multiple of LB_VL) is loaded and stored lane by lane (its
 * lanes past n are computed on zeros and dropped).
 *
 * Exactness: every C element is one sum over l = 0, 1, ..., k-1 in that order (a chain of
 * multiply-adds, fused in the FMA builds), then scaled by alpha (and added to C), whatever
 * the block it falls in: the result does not depend on m, n, the blocking or the thread
 * that runs it. */

#define VF LB_VW(vf, LB_VL)
#define MK_NVMAX LB_VW(MK_NVMAX_, LB_VL)
#define MK_NVMAX_16 4
#define MK_NVMAX_8 2
#define MK_MRMAX 16
/* MR for NV vectors: MK_MR<lanes>_<NV> (see the table above) */
#ifndef MK_MR16_4
#define MK_MR16_4 4
#define MK_MR16_3 4
#define MK_MR16_2 8
#define MK_MR16_1 16
#endif
#ifndef MK_MR8_2
#define MK_MR8_2 6
#define MK_MR8_1 12
#endif

/* A partial vector: lanes [0, lanes) from p, the rest 0. */
LB_INLINE VF LB_VW(vf_load_part, LB_VL)(const float *p, int lanes)
{
    float l[LB_VL] = {0};
    for (int i = 0; i < lanes; i++)
        l[i] = p[i];
    return LB_VW(VF, _load)(l);
}

LB_INLINE void LB_VW(vf_store_part, LB_VL)(float *p, const VF *v, int lanes)
{
    float l[LB_VL];
    memcpy(l, v, sizeof l);
    for (int i = 0; i < lanes; i++)
        p[i] = l[i];
}

/* One block: rows [0, mr) by vectors [0, nv) of C (the last vector holds `tail` lanes
 * when tail > 0). mr, nv and tail are constants where it is called for speed. */
LB_INLINE void LB_VW(tile_block_f, LB_VL)(int mr, int nv, int tail, int64_t k, float alpha, const float *a,
                                          int64_t a_rs, int64_t a_cs, const float *b, int64_t ldb, int accumulate,
                                          float *c, int64_t ldc)
{
    VF acc[MK_MRMAX][MK_NVMAX];
#pragma GCC unroll 16
    for (int r = 0; r < mr; r++)
#pragma GCC unroll 4
        for (int v = 0; v < nv; v++)
            acc[r][v] = (VF){0};
    for (int64_t l = 0; l < k; l++) {
        const float *bl = b + l * ldb, *al = a + l * a_cs; /* B row l, A column l */
        VF bv[MK_NVMAX];
#pragma GCC unroll 4
        for (int v = 0; v < nv; v++)
            bv[v] = tail && v == nv - 1 ? LB_VW(vf_load_part, LB_VL)(bl + v * LB_VL, tail)
                                        : LB_VW(VF, _load)(bl + v * LB_VL);
#pragma GCC unroll 16
        for (int r = 0; r < mr; r++) {
            VF ar = al[r * a_rs] - (VF){0}; /* a broadcast (x - 0 is x exactly) */
#pragma GCC unroll 4
            for (int v = 0; v < nv; v++)
                acc[r][v] += ar * bv[v];
        }
    }
#pragma GCC unroll 16
    for (int r = 0; r < mr; r++) {
        float *cr = c + r * ldc;
#pragma GCC unroll 4
        for (int v = 0; v < nv; v++) {
            int part = tail && v == nv - 1;
            VF x = acc[r][v] * alpha;
            if (accumulate)
                x = (part ? LB_VW(vf_load_part, LB_VL)(cr + v * LB_VL, tail) : LB_VW(VF, _load)(cr + v * LB_VL)) + x;
            if (part)
                LB_VW(vf_store_part, LB_VL)(cr + v * LB_VL, &x, tail);
            else
                LB_VW(VF, _store)(cr + v * LB_VL, &x);
        }
    }
}

/* The rows [0, m) of one column strip of nv vectors (constant) with `tail` lanes in the
 * last: blocks of mr rows (constant), then of 4, then of 1. */
#define MK_STRIP(mr_, nv_, tail_)                                                                                \
    do {                                                                                                       \
        int64_t i_ = 0;                                                                                        \
        for (; i_ + (mr_) <= m; i_ += (mr_))                                                                   \
            LB_VW(tile_block_f, LB_VL)((mr_), (nv_), (tail_), k, alpha, a + i_ * a_rs, a_rs, a_cs, b, ldb,     \
                                       accumulate, c + i_ * ldc, ldc);                                         \
        if ((mr_) > 4)                                                                                         \
            for (; i_ + 4 <= m; i_ += 4)                                                                       \
                LB_VW(tile_block_f, LB_VL)(4, (nv_), (tail_), k, alpha, a + i_ * a_rs, a_rs, a_cs, b, ldb,     \
                                           accumulate, c + i_ * ldc, ldc);                                     \
        for (; i_ < m; i_++)                                                                                   \
            LB_VW(tile_block_f, LB_VL)(1, (nv_), (tail_), k, alpha, a + i_ * a_rs, a_rs, a_cs, b, ldb,         \
                                       accumulate, c + i_ * ldc, ldc);                                         \
    } while (0)

/* MK_STRIP with tail a constant 0 on full strips (no lane tests in the k loop). */
#define MK_STRIP_T(mr_, nv_)                                                                                     \
    do {                                                                                                       \
        if (tail)                                                                                              \
            MK_STRIP(mr_, nv_, tail);                                                                          \
        else                                                                                                   \
            MK_STRIP(mr_, nv_, 0);                                                                             \
    } while (0)

/* C [m, n] (+)= alpha * A [m, k] B [k, n] as described at the top. */
LB_INLINE void LB_VW(tile_gemm_f, LB_VL)(int64_t m, int64_t n, int64_t k, float alpha, const float *a, int64_t a_rs,
                                         int64_t a_cs, const float *b, int64_t ldb, int accumulate, float *c,
                                         int64_t ldc)
{
    const int64_t strip = MK_NVMAX * LB_VL; /* columns per full strip */
    for (int64_t j = 0; j < n; j += strip, b += strip, c += strip) {
        int64_t cols = n - j < strip ? n - j : strip;
        int nv = (int)((cols + LB_VL - 1) / LB_VL), tail = (int)(cols % LB_VL);
        /* nv is made a constant for each case: the block's accumulators then live in registers */
#if LB_VL == 16
        switch (nv) {
        case 4: MK_STRIP_T(MK_MR16_4, 4); break;
        case 3: MK_STRIP_T(MK_MR16_3, 3); break;
        case 2: MK_STRIP_T(MK_MR16_2, 2); break;
        default: MK_STRIP_T(MK_MR16_1, 1); break;
        }
#else
        if (nv == 2)
            MK_STRIP_T(MK_MR8_2, 2);
        else
            MK_STRIP_T(MK_MR8_1, 1);
#endif
    }
}

#undef MK_STRIP_T
#undef MK_STRIP
#undef MK_MRMAX
#undef MK_NVMAX_8
#undef MK_NVMAX_16
#undef MK_NVMAX
#undef VF

/* Float32 row loops of the fused attention kernels on vectors of LB_VL lanes.
 * kernels/attention.c includes this file once per vector width (8: AVX2 and
 * baseline builds, 16: AVX-512) with LB_VL defined, after kernels/vector_internal.h
 * (the vf<LB_VL> types, loads and stores); each inclusion defines
 *   expf_v<LB_VL>, vf<LB_VL>_sum,
 *   row_max_f<LB_VL>, row_exp_f<LB_VL>, row_ds_f<LB_VL>, row_scale_f<LB_VL>
 * from the same text. Needs expf_poly, LB_EXPF_LO/HI, LB_EXPF_POLY, lb_fold_sum,
 * lb_fold_max and LB_INLINE.
 * Row tails run the vector loops' operations on scalars, so every element goes through
 * one sequence of IEEE operations whatever its position in the row. */

#define VF LB_VW(vf, LB_VL)
#define VI LB_VW(vi, LB_VL)

/* m ? a : b, lanewise, for a comparison mask m (-1 or 0 per lane). (Vectors go to
 * helpers by pointer: passing them by value draws GCC's ABI note in the baseline build.) */
#define VF_SELECT(m, a, b) ((VF)(((m) & (VI)(a)) | (~(m) & (VI)(b))))

/* exp of every lane as expf_poly. */
LB_INLINE VF LB_VW(expf_v, LB_VL)(const VF *xp)
{
    VF x = *xp;
    VI in_range = x >= LB_EXPF_LO; /* false for NaN */
    VF xc = VF_SELECT(in_range, x, (VF){0} + LB_EXPF_LO), n, r, y;
    VI not_above = xc <= LB_EXPF_HI;
    xc = VF_SELECT(not_above, xc, (VF){0} + LB_EXPF_HI);
    LB_EXPF_POLY(x, xc, n, r, y);
    VI bits = (__builtin_convertvector(n, VI) + 127) << 23;
    y = y * (VF)bits;
    VI below = x < LB_EXPF_LO, nan = x != x;
    y = VF_SELECT(below, (VF){0}, y);
    return VF_SELECT(nan, x, y);
}

/* Horizontal sum of the lanes, in a fixed order: the upper half added onto the lower
 * half, repeatedly (lb_fold_sum). */
LB_INLINE float LB_VW(VF, _sum)(const VF *v)
{
    float l[LB_VL];
    memcpy(l, v, sizeof l);
    return lb_fold_sum(l, LB_VL);
}

/* Largest element of s [n] (-inf when all are). */
LB_INLINE float LB_VW(row_max_f, LB_VL)(const float *s, int64_t n)
{
    VF mv = (VF){0} - INFINITY;
    int64_t c = 0;
    for (; c + LB_VL <= n; c += LB_VL) {
        VF x = LB_VW(VF, _load)(s + c);
        VI bigger = x > mv;
        mv = VF_SELECT(bigger, x, mv);
    }
    float l[LB_VL];
    memcpy(l, &mv, sizeof l);
    float mx = lb_fold_max(l, LB_VL);
    for (; c < n; c++)
        mx = s[c] > mx ? s[c] : mx;
    return mx;
}

/* s [n] <- exp(s - shift); returns the sum of the new s. */
LB_INLINE float LB_VW(row_exp_f, LB_VL)(float *s, int64_t n, float shift)
{
    VF acc = {0};
    int64_t c = 0;
    for (; c + LB_VL <= n; c += LB_VL) {
        VF x = LB_VW(VF, _load)(s + c) - shift;
        VF e = LB_VW(expf_v, LB_VL)(&x);
        LB_VW(VF, _store)(s + c, &e);
        acc += e;
    }
    float sum = LB_VW(VF, _sum)(&acc);
    for (; c < n; c++) {
        float e = expf_poly(s[c] - shift);
        s[c] = e;
        sum += e;
    }
    return sum;
}

/* s [n] <- p * (s - dsum): dS from P and dP. */
LB_INLINE void LB_VW(row_ds_f, LB_VL)(float *s, const float *p, int64_t n, float dsum)
{
    int64_t c = 0;
    for (; c + LB_VL <= n; c += LB_VL) {
        VF ds = LB_VW(VF, _load)(p + c) * (LB_VW(VF, _load)(s + c) - dsum);
        LB_VW(VF, _store)(s + c, &ds);
    }
    for (; c < n; c++)
        s[c] = p[c] * (s[c] - dsum);
}

/* o [n] *= a */
LB_INLINE void LB_VW(row_scale_f, LB_VL)(float *o, int64_t n, float a)
{
    int64_t c = 0;
    for (; c + LB_VL <= n; c += LB_VL) {
        VF x = LB_VW(VF, _load)(o + c) * a;
        LB_VW(VF, _store)(o + c, &x);
    }
    for (; c < n; c++)
        o[c] *= a;
}

#undef VF_SELECT
#undef VF
#undef VI

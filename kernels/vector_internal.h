/* Float vectors of LB_VL lanes (GCC/Clang vector extensions) for the kernels written on
 * vectors (the fused attention's row loops, the tile micro-kernel). A kernel file
 * includes this once per vector width with LB_VL defined (8: AVX2 and baseline builds,
 * 16: AVX-512); each inclusion defines the types vf<LB_VL> (float lanes) and vi<LB_VL>
 * (int32 lanes) and the unaligned vf<LB_VL>_load and vf<LB_VL>_store. Needs LB_INLINE
 * and <string.h>. Not installed. */

#ifndef LB_VW
#define LB_VW_(name, w) name##w
#define LB_VW(name, w) LB_VW_(name, w)
#endif

typedef float LB_VW(vf, LB_VL) __attribute__((vector_size(4 * LB_VL)));
typedef int32_t LB_VW(vi, LB_VL) __attribute__((vector_size(4 * LB_VL)));

/* LB_VL floats from p (any alignment). */
LB_INLINE LB_VW(vf, LB_VL) LB_VW(LB_VW(vf, LB_VL), _load)(const float *p)
{
    LB_VW(vf, LB_VL) v;
    memcpy(&v, p, sizeof v);
    return v;
}

/* *v's LB_VL floats to p (any alignment). */
LB_INLINE void LB_VW(LB_VW(vf, LB_VL), _store)(float *p, const LB_VW(vf, LB_VL) *v) { memcpy(p, v, sizeof *v); }

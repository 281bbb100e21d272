/*
 * x86/exact_template.h - template for the loops of the exact dot products
 * behind MoeTokenUnpermuteGrad's probs_grad (unpermute_grad/exact.c): the
 * rows widened to binary32, and the products taken apart into levels in
 * vectors of EXACT_LANES doubles.
 *
 * A file defines the parameters below, then includes this file, once per
 * translation unit: isa_template.h for each instruction set (into the
 * table of x86.h), and exact.c for its portable build, in two-double
 * vectors that every 64-bit target has (SSE2 on x86-64).
 *
 * SUFFIX:
 *	Name suffix of the instantiated function (moeperm_ug_exact_levels_avx512 ...).
 * ATTRIBUTES:
 *	The target attribute of every function, or nothing.
 * EXACT_LANES:
 *	Doubles in one vector: 2, 4 (AVX2) or 8 (AVX-512).
 *
 * The lanes change how fast, not what: widening is exact and every
 * addition below is exact, so every build gives the same sums
 * (tests/core/test_unpermute_grad_exact.c runs each).  The speed of each
 * build is in docs/performance.md, "Writing golden data".
 */

#include <math.h>
#include <stdint.h>
#include <string.h>

#include "core/fp.h"
#include "unpermute_grad/model.h"

#define EXACT_CONCAT_(a, b) a##b
#define EXACT_CONCAT(a, b) EXACT_CONCAT_(a, b)

/* Vectors summed apart, for the adds of a level not to wait on each
 * other; with EXACT_LANES they make MOEPERM_UG_EXACT_STEP at most. */
#define EXACT_VECTORS 4

typedef double exact_vd __attribute__((vector_size(8 * EXACT_LANES)));
typedef int64_t exact_vi __attribute__((vector_size(8 * EXACT_LANES)));

/* a where a > b, else b; and |a|.  Macros, as GNU C has no vector ?:. */
#define EXACT_MAX(a, b) ((exact_vd)(((exact_vi)(a) & ((a) > (b))) | ((exact_vi)(b) & ~((a) > (b)))))
#define EXACT_ABS(a) ((exact_vd)((exact_vi)(a) & INT64_MAX))

/* fp_fp16_to_float() without branches, for a loop the compiler
 * vectorises: the magnitude's bits moved into a binary32's places read as
 * a value 2^112 too small (normal or subnormal), which one exact
 * multiplication puts right; infinities and NaNs (a NaN left unquiet,
 * which is all the levels ask of it) are set apart.  Run in the default
 * environment (fp_env.h), where subnormals are not flushed. */
static inline ATTRIBUTES float EXACT_CONCAT(exact_fp16, SUFFIX)(uint16_t h)
{
    uint32_t magnitude = h & 0x7fffu;
    uint32_t bits = fp_bits(fp_from_bits(magnitude << 13) * 0x1p112f);
    uint32_t special = 0u - (uint32_t)(magnitude >= 0x7c00u); /* a mask, not a branch */
    bits = (bits & ~special) | ((0x7f800000u | magnitude << 13) & special);
    return fp_from_bits((uint32_t)(h & 0x8000u) << 16 | bits);
}

/* moeperm_ug_exact_widen (model.h). */
void ATTRIBUTES EXACT_CONCAT(moeperm_ug_exact_widen, SUFFIX)(moeperm_dtype dtype,
                                                             const void *row, int64_t count,
                                                             float *restrict out)
{
    const unsigned char *bytes = row;
    if (dtype == MOEPERM_FLOAT) {
        memcpy(out, row, (size_t)count * sizeof *out);
        return;
    }
    if (dtype == MOEPERM_BF16) {
        for (int64_t j = 0; j < count; j++) {
            uint16_t h;
            memcpy(&h, bytes + 2 * j, sizeof h);
            out[j] = fp_from_bits((uint32_t)h << 16);
        }
        return;
    }
    for (int64_t j = 0; j < count; j++) {
        uint16_t h;
        memcpy(&h, bytes + 2 * j, sizeof h);
        out[j] = EXACT_CONCAT(exact_fp16, SUFFIX)(h);
    }
}

static inline ATTRIBUTES double EXACT_CONCAT(exact_widest, SUFFIX)(const exact_vd *m)
{
    double widest = 0;
    for (int l = 0; l < EXACT_VECTORS; l++)
        for (int k = 0; k < EXACT_LANES; k++)
            widest = m[l][k] > widest ? m[l][k] : widest;
    return widest;
}

/*
 * moeperm_ug_exact_levels (model.h): the products x[j] * g[j] of a chunk
 * taken apart into levels whose parts add up without rounding.
 *
 * A level takes every product p (|p| <= m) apart as p = q + r with
 * sigma = 2^k >= 2^MOEPERM_UG_EXACT_CHUNK_BITS * m, q = (sigma + p) - sigma
 * and r = p - q, in double arithmetic rounding to nearest (Rump, Ogita and
 * Oishi's ExtractScalar, "Accurate floating-point summation part I", SIAM
 * J. Sci. Comput. 31, 2008):
 *
 * - sigma + p lies in [sigma / 2, 2 sigma], where doubles are multiples of
 *   u = 2^(k-53), so q is one too, and the subtraction is exact (Sterbenz);
 * - r is the rounding error of sigma + p, which a double always holds, so
 *   p = q + r exactly, with |r| <= u;
 * - the q's and every partial sum of them are multiples of u of magnitude
 *   at most count * (m + u) <= sigma = 2^53 u: a double holds each, so
 *   adding them rounds nothing, in any order and over any lanes.
 *
 * The level's sum is written out and the r's become the next level's
 * products, about 52 - MOEPERM_UG_EXACT_CHUNK_BITS bits narrower, until
 * none is left.
 */
int ATTRIBUTES EXACT_CONCAT(moeperm_ug_exact_levels, SUFFIX)(const float *x, const float *g,
                                                             int64_t count, double *sums,
                                                             double *left)
{
    exact_vd p[MOEPERM_UG_EXACT_CHUNK / EXACT_LANES];
    exact_vd m[EXACT_VECTORS] = {{0}}, special[EXACT_VECTORS] = {{0}};
    int64_t vectors = count / EXACT_LANES;
    for (int64_t j = 0; j < vectors; j += EXACT_VECTORS)
        for (int l = 0; l < EXACT_VECTORS; l++) {
            exact_vd v;
            for (int k = 0; k < EXACT_LANES; k++) {
                int64_t at = (j + l) * EXACT_LANES + k;
                v[k] = (double)x[at] * (double)g[at];
            }
            p[j + l] = v;
            m[l] = EXACT_MAX(EXACT_ABS(v), m[l]);
            special[l] += v * 0.0; /* NaN for an infinity or a NaN */
        }
    double widest = EXACT_CONCAT(exact_widest, SUFFIX)(m), specials = 0;
    for (int l = 0; l < EXACT_VECTORS; l++)
        for (int k = 0; k < EXACT_LANES; k++)
            specials += special[l][k];
    if (specials != 0)
        return -1;
    int level = 0;
    for (; widest != 0 && level < MOEPERM_UG_EXACT_LEVELS; level++) {
        int exponent;
        frexp(widest, &exponent); /* widest <= 2^exponent */
        exact_vd sigma = ldexp(1.0, exponent + MOEPERM_UG_EXACT_CHUNK_BITS) + (exact_vd){0};
        exact_vd sum[EXACT_VECTORS] = {{0}};
        for (int l = 0; l < EXACT_VECTORS; l++)
            m[l] = (exact_vd){0};
        for (int64_t j = 0; j < vectors; j += EXACT_VECTORS)
            for (int l = 0; l < EXACT_VECTORS; l++) {
                exact_vd v = p[j + l];
                exact_vd q = (sigma + v) - sigma;
                exact_vd r = v - q;
                p[j + l] = r;
                sum[l] += q;
                m[l] = EXACT_MAX(EXACT_ABS(r), m[l]);
            }
        double total = 0;
        for (int l = 0; l < EXACT_VECTORS; l++)
            for (int k = 0; k < EXACT_LANES; k++)
                total += sum[l][k];
        sums[level] = total;
        widest = EXACT_CONCAT(exact_widest, SUFFIX)(m);
    }
    if (widest != 0)
        for (int64_t j = 0; j < count; j++)
            left[j] = p[j / EXACT_LANES][j % EXACT_LANES];
    return widest != 0 ? MOEPERM_UG_EXACT_LEVELS + 1 : level;
}

#undef EXACT_CONCAT_
#undef EXACT_CONCAT
#undef EXACT_VECTORS
#undef EXACT_MAX
#undef EXACT_ABS

/*
 * stats.c - msprobe-style error statistics over two tensors, in double.
 * Kept apart from the comparator: these numbers summarise how far apart
 * two tensors are, the comparator decides whether they are the same.
 */
#include "golden/judge/stats.h"

#include <math.h>

#include "golden/judge/bits.h"

int golden_stats_compute(moeperm_dtype dtype, const void *expected, const void *actual, uint64_t n,
                         golden_stats *s)
{
    s->elements = n;
    s->finite = 0;
    s->max_abs_error = s->max_rel_error = s->cosine = NAN;
    s->mare = s->mere = s->rmse = NAN;
    if (moeperm_dtype_size(dtype) == 0)
        return -1;

    /* Every term is a product or quotient of two values of at most 2^128
     * in magnitude, so no sum overflows double. */
    double max_abs = 0, max_rel = 0, mare = 0;
    double sum_rel = 0, sum_sq = 0, dot = 0, norm_e = 0, norm_a = 0;
    uint64_t finite = 0, nonzero = 0;
    for (uint64_t i = 0; i < n; i++) {
        uint64_t eb = golden_bits_load(dtype, expected, i), ab = golden_bits_load(dtype, actual, i);
        if (!golden_bits_is_finite(dtype, eb) || !golden_bits_is_finite(dtype, ab))
            continue;
        double e = golden_bits_double(dtype, eb), a = golden_bits_double(dtype, ab);
        double diff = fabs(a - e);
        finite++;
        if (diff > max_abs)
            max_abs = diff;
        if (e != 0) {
            double rel = diff / fabs(e);
            nonzero++;
            if (rel > max_rel)
                max_rel = rel;
        }
        double rel_eps = diff / (fabs(e) + GOLDEN_STATS_EPSILON);
        if (rel_eps > mare)
            mare = rel_eps;
        sum_rel += rel_eps;
        sum_sq += diff * diff;
        dot += a * e;
        norm_e += e * e;
        norm_a += a * a;
    }
    s->finite = finite;
    if (finite == 0)
        return 0;
    s->max_abs_error = max_abs;
    s->max_rel_error = nonzero ? max_rel : NAN;
    s->mare = mare;
    s->mere = sum_rel / (double)finite;
    s->rmse = sqrt(sum_sq / (double)finite);
    if (norm_e == 0 && norm_a == 0)
        s->cosine = 1;
    else if (norm_e == 0 || norm_a == 0)
        s->cosine = NAN;
    else
        s->cosine = dot / (sqrt(norm_a) * sqrt(norm_e));
    return 0;
}

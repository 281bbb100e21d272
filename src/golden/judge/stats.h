/*
 * stats.h - the error statistics Ascend's precision tools report, next to
 * the bit-level verdict.
 *
 * A developer who knows msprobe / msaccucmp and the operator precision
 * standard looks for these numbers; they inform and never decide (the
 * verdict stays bit-exact, or within --max-ulp).  Every statistic is
 * computed in double over the elements that are finite (neither NaN nor
 * infinite) in both the expected tensor e and the actual tensor a; n is
 * their count:
 *
 *   max_abs_error  max |a - e|
 *   max_rel_error  max |a - e| / |e| over the elements with e != 0
 *                  (msaccucmp's MaxRelativeError, which leaves out e = 0)
 *   cosine         sum(a*e) / (sqrt(sum(a*a)) * sqrt(sum(e*e))); 1 when
 *                  both are all zeros, NaN when only one of them is
 *   mare           max |a - e| / (|e| + 1e-7)     (the standard's MARE)
 *   mere           mean |a - e| / (|e| + 1e-7)    (the standard's MERE)
 *   rmse           sqrt(mean (a - e)^2)           (the standard's RMSE)
 *
 * With n = 0 every statistic is NaN; max_rel_error is NaN too when no
 * element has e != 0.  Sums run in element order (one thread), so the
 * numbers do not depend on the machine's thread count.
 */
#ifndef MOEPERM_GOLDEN_JUDGE_STATS_H
#define MOEPERM_GOLDEN_JUDGE_STATS_H

#include <stdint.h>

#include <moeperm/moeperm.h>

/* The offset in the denominators of MARE and MERE. */
#define GOLDEN_STATS_EPSILON 1e-7

typedef struct golden_stats {
    uint64_t elements; /* compared */
    uint64_t finite;   /* finite in both: the elements the statistics use */
    double max_abs_error;
    double max_rel_error;
    double cosine;
    double mare;
    double mere;
    double rmse;
} golden_stats;

/*
 * golden_stats_compute() fills *s for n elements of dtype (float32,
 * float16, bf16 or one of the integer dtypes, read as their values) at
 * expected and actual.  Returns 0, or -1 for a dtype it does not know.
 * Thread safe.
 */
int golden_stats_compute(moeperm_dtype dtype, const void *expected, const void *actual, uint64_t n,
                         golden_stats *s);

#endif

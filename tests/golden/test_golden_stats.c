/*
 * The error statistics: a small case worked by hand, the edge rules
 * (non-finite elements left out, zero vectors, no element with e != 0),
 * and random tensors of every float dtype against this file's own
 * long-double computation of the documented formulas, with the values
 * decoded by the tests' independent conversions (naive.c).
 */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "golden/judge/stats.h"
#include "naive.h"

static void assert_close(double got, long double want)
{
    long double diff = fabsl((long double)got - want);
    if (!(diff <= 1e-12L * fabsl(want) || diff == 0))
        fail_msg("got %.17g, expected %.17Lg", got, want);
}

static void test_small_case_worked_by_hand(void **state)
{
    (void)state;
    float e[6] = {1, 2, 0, -4, INFINITY, NAN}, a[6] = {1, 2.5f, 0.5f, -3, 1, 2};
    golden_stats s;
    assert_int_equal(golden_stats_compute(MOEPERM_FLOAT, e, a, 6, &s), 0);
    assert_int_equal(s.elements, 6);
    assert_int_equal(s.finite, 4); /* the infinity and the NaN are left out */
    assert_true(s.max_abs_error == 1.0);
    assert_true(s.max_rel_error == 0.25); /* e = 0 is left out */
    assert_close(s.mare, 0.5L / 1e-7L);
    assert_close(s.mere, (0 + 0.5L / (2 + 1e-7L) + 0.5L / 1e-7L + 1 / (4 + 1e-7L)) / 4);
    assert_close(s.rmse, sqrtl(1.5L / 4));
    assert_close(s.cosine, 18 / (sqrtl(16.5L) * sqrtl(21)));
}

static void test_edge_rules(void **state)
{
    (void)state;
    golden_stats s;
    float zeros[3] = {0, -0.0f, 0}, ones[3] = {1, 1, 1}, nans[3] = {NAN, NAN, INFINITY};
    assert_int_equal(golden_stats_compute(MOEPERM_FLOAT, zeros, zeros, 3, &s), 0);
    assert_true(s.cosine == 1.0);        /* two zero vectors are alike */
    assert_true(isnan(s.max_rel_error)); /* no element with e != 0 */
    assert_true(s.max_abs_error == 0 && s.rmse == 0 && s.mare == 0 && s.mere == 0);
    assert_int_equal(golden_stats_compute(MOEPERM_FLOAT, zeros, ones, 3, &s), 0);
    assert_true(isnan(s.cosine)); /* an angle with a zero vector has no cosine */
    assert_true(s.mare == 1 / 1e-7);
    assert_int_equal(golden_stats_compute(MOEPERM_FLOAT, nans, ones, 3, &s), 0);
    assert_int_equal(s.finite, 0);
    assert_true(isnan(s.max_abs_error) && isnan(s.max_rel_error) && isnan(s.cosine) &&
                isnan(s.mare) && isnan(s.mere) && isnan(s.rmse));
    assert_int_equal(golden_stats_compute(MOEPERM_FLOAT, nans, ones, 0, &s), 0);
    assert_int_equal(s.elements, 0);
    assert_int_equal(golden_stats_compute((moeperm_dtype)77, nans, ones, 3, &s), -1);

    int32_t ie[2] = {-7, 100}, ia[2] = {-5, 100};
    assert_int_equal(golden_stats_compute(MOEPERM_INT32, ie, ia, 2, &s), 0);
    assert_int_equal(s.finite, 2);
    assert_true(s.max_abs_error == 2 && s.max_rel_error == 2.0 / 7);
}

static long double decode(moeperm_dtype dtype, const void *data, size_t i)
{
    if (dtype == MOEPERM_FLOAT) {
        float v;
        memcpy(&v, (const char *)data + 4 * i, 4);
        return v;
    }
    uint16_t v;
    memcpy(&v, (const char *)data + 2 * i, 2);
    return dtype == MOEPERM_BF16 ? naive_bf16_to_float(v) : naive_fp16_to_float(v);
}

static void test_random_tensors_match_the_formulas(void **state)
{
    (void)state;
    static const moeperm_dtype dtypes[] = {MOEPERM_BF16, MOEPERM_FLOAT16, MOEPERM_FLOAT};
    uint64_t rng = 2024;
    enum { N = 5000 };
    for (int d = 0; d < 3; d++) {
        moeperm_dtype dtype = dtypes[d];
        size_t es = naive_size(dtype);
        uint8_t *e = malloc(N * es), *a = malloc(N * es);
        assert_non_null(e);
        assert_non_null(a);
        for (size_t i = 0; i < N; i++) {
            /* Random bits, so NaNs, infinities, zeros and subnormals occur;
             * actual is expected nudged or replaced. */
            uint64_t r = naive_rand(&rng);
            uint32_t eb = (uint32_t)r, ab = eb;
            if (r >> 62)
                ab = eb + (uint32_t)((r >> 40) % 7) - 3;
            if ((r >> 32) % 50 == 0)
                ab = (uint32_t)(r >> 20);
            memcpy(e + i * es, &eb, es);
            memcpy(a + i * es, &ab, es);
        }
        long double max_abs = 0, max_rel = 0, mare = 0, sum_rel = 0, sum_sq = 0, dot = 0, ne = 0,
                    na = 0;
        uint64_t finite = 0;
        for (size_t i = 0; i < N; i++) {
            long double x = decode(dtype, e, i), y = decode(dtype, a, i);
            if (!isfinite(x) || !isfinite(y))
                continue;
            finite++;
            long double diff = fabsl(y - x);
            max_abs = fmaxl(max_abs, diff);
            if (x != 0)
                max_rel = fmaxl(max_rel, diff / fabsl(x));
            mare = fmaxl(mare, diff / (fabsl(x) + 1e-7L));
            sum_rel += diff / (fabsl(x) + 1e-7L);
            sum_sq += diff * diff;
            dot += x * y;
            ne += x * x;
            na += y * y;
        }
        golden_stats s;
        assert_int_equal(golden_stats_compute(dtype, e, a, N, &s), 0);
        assert_int_equal(s.finite, finite);
        assert_true(finite > N / 2);
        assert_close(s.max_abs_error, max_abs);
        assert_close(s.max_rel_error, max_rel);
        assert_close(s.mare, mare);
        assert_close(s.mere, sum_rel / finite);
        assert_close(s.rmse, sqrtl(sum_sq / finite));
        assert_close(s.cosine, dot / (sqrtl(na) * sqrtl(ne)));
        free(e);
        free(a);
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_small_case_worked_by_hand),
        cmocka_unit_test(test_edge_rules),
        cmocka_unit_test(test_random_tensors_match_the_formulas),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}

/*
 * --max-ulp semantics: differences of finite values within N units in the
 * last place make the verdict "within-tolerance", anything further, any
 * NaN against a number and any infinity against a finite value (however
 * close their bits) make it "different", and a tolerance of 0 is the
 * bit-exact contract.  The outputs are written out by hand.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include <moeperm/golden.h>

static moeperm_golden_verdict judge(moeperm_dtype dtype, const void *e, const void *a, int64_t n,
                            bool strict_nan, uint64_t max_ulp)
{
    moeperm_golden_compare_result r;
    assert_int_equal(moeperm_golden_compare(dtype, 1, n, e, a, strict_nan, &r), 0);
    moeperm_golden_verdict v = moeperm_golden_compare_verdict(&r, max_ulp);
    moeperm_golden_compare_free(&r);
    return v;
}

static void test_finite_differences_within_n_ulp_are_tolerated(void **state)
{
    (void)state;
    /* 1 ulp up, 1 ulp down, +0 against -0 (1 apart), 2 ulp up */
    uint16_t e[4] = {0x3f80, 0x4000, 0x0000, 0xc2f7}, a[4] = {0x3f81, 0x3fff, 0x8000, 0xc2f7};
    assert_int_equal(judge(MOEPERM_BF16, e, a, 4, false, 0), MOEPERM_GOLDEN_VERDICT_DIFFERENT);
    assert_int_equal(judge(MOEPERM_BF16, e, a, 4, false, 1), MOEPERM_GOLDEN_VERDICT_WITHIN_TOLERANCE);
    a[3] = 0xc2f9;
    assert_int_equal(judge(MOEPERM_BF16, e, a, 4, false, 1), MOEPERM_GOLDEN_VERDICT_DIFFERENT);
    assert_int_equal(judge(MOEPERM_BF16, e, a, 4, false, 2), MOEPERM_GOLDEN_VERDICT_WITHIN_TOLERANCE);
    assert_int_equal(judge(MOEPERM_BF16, e, e, 4, false, 0), MOEPERM_GOLDEN_VERDICT_SAME);
    assert_int_equal(judge(MOEPERM_BF16, e, e, 4, false, 5), MOEPERM_GOLDEN_VERDICT_SAME);

    float fe[2] = {1.0f, -3.0f}, fa[2] = {1.0f, -3.0f};
    uint32_t bits;
    memcpy(&bits, &fa[1], 4);
    bits += 3;
    memcpy(&fa[1], &bits, 4);
    assert_int_equal(judge(MOEPERM_FLOAT, fe, fa, 2, false, 2), MOEPERM_GOLDEN_VERDICT_DIFFERENT);
    assert_int_equal(judge(MOEPERM_FLOAT, fe, fa, 2, false, 3), MOEPERM_GOLDEN_VERDICT_WITHIN_TOLERANCE);
}

static void test_infinities_and_nans_are_never_within_tolerance(void **state)
{
    (void)state;
    /* overflow saturated: the largest finite value is 1 ulp from infinity */
    uint16_t e[2] = {0x7c00, 0x3c00}, a[2] = {0x7bff, 0x3c00};
    assert_int_equal(judge(MOEPERM_FLOAT16, e, a, 2, false, 1000), MOEPERM_GOLDEN_VERDICT_DIFFERENT);
    /* a NaN against a number */
    e[0] = 0x7e00;
    a[0] = 0x7c00;
    assert_int_equal(judge(MOEPERM_FLOAT16, e, a, 2, false, 1000), MOEPERM_GOLDEN_VERDICT_DIFFERENT);
    /* NaN payloads: equal unless strict, and then never tolerated */
    a[0] = 0x7e01;
    assert_int_equal(judge(MOEPERM_FLOAT16, e, a, 2, false, 1000), MOEPERM_GOLDEN_VERDICT_SAME);
    assert_int_equal(judge(MOEPERM_FLOAT16, e, a, 2, true, 1000), MOEPERM_GOLDEN_VERDICT_DIFFERENT);
}

static void test_verdict_names(void **state)
{
    (void)state;
    assert_string_equal(moeperm_golden_verdict_name(MOEPERM_GOLDEN_VERDICT_SAME), "same");
    assert_string_equal(moeperm_golden_verdict_name(MOEPERM_GOLDEN_VERDICT_WITHIN_TOLERANCE), "within-tolerance");
    assert_string_equal(moeperm_golden_verdict_name(MOEPERM_GOLDEN_VERDICT_DIFFERENT), "different");
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_finite_differences_within_n_ulp_are_tolerated),
        cmocka_unit_test(test_infinities_and_nans_are_never_within_tolerance),
        cmocka_unit_test(test_verdict_names),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}

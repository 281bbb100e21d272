/*
 * The comparator locates differences: one flipped bit anywhere is reported
 * at its (token, column) with its bits, and blocks of differences are
 * summarised as the token and column ranges a kernel developer would look
 * at ("columns 13-20 of every token").  Also pins the ULP distance on the
 * ordered integer line and the NaN rules.  The positions are chosen here,
 * so nothing expected comes from the comparator itself.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "golden/compare.h"
#include "golden/generate.h"

#define TOKENS 64
#define HIDDEN 40

static golden_case make_case(moeperm_dtype dtype)
{
    golden_spec s;
    char err[512];
    golden_case c;
    memset(&s, 0, sizeof s);
    snprintf(s.name, sizeof s.name, "compare");
    s.dtype = dtype;
    s.tokens_num = TOKENS;
    s.top_k = 4;
    s.hidden_size = HIDDEN;
    s.num_rows = -1;
    s.hot_percent = 50;
    s.seed = 99;
    s.values = GOLDEN_VALUES_NORMAL;
    s.routing = GOLDEN_ROUTING_ROUTED;
    int rc = golden_generate(&s, NULL, &c, err, sizeof err);
    if (rc != 0)
        fail_msg("%s", err);
    return c;
}

static void flip(moeperm_dtype dtype, void *data, int64_t t, int64_t h, unsigned bit)
{
    size_t es = golden_dtype_size(dtype);
    uint8_t *p = (uint8_t *)data + ((size_t)t * HIDDEN + (size_t)h) * es;
    p[bit / 8] ^= (uint8_t)(1u << (bit % 8));
}

static void test_one_flipped_bit_is_located_by_token_and_column(void **state)
{
    (void)state;
    static const moeperm_dtype dtypes[] = {MOEPERM_BF16, MOEPERM_FLOAT16, MOEPERM_FLOAT};
    uint64_t rng = 12345;
    for (int d = 0; d < 3; d++) {
        golden_case c = make_case(dtypes[d]);
        size_t bytes = golden_output_bytes(&c);
        void *actual = malloc(bytes);
        assert_non_null(actual);
        for (int trial = 0; trial < 50; trial++) {
            rng = rng * 6364136223846793005u + 1442695040888963407u;
            int64_t t = (int64_t)((rng >> 33) % TOKENS), h = (int64_t)((rng >> 20) % HIDDEN);
            /* Mantissa bit 0: never turns a number into a NaN. */
            memcpy(actual, c.input_grad, bytes);
            flip(c.dtype, actual, t, h, 0);
            golden_compare_result r;
            assert_int_equal(golden_compare(c.dtype, TOKENS, HIDDEN, c.input_grad, actual,
                                            false, &r), 0);
            assert_int_equal(r.differing, 1);
            assert_int_equal(r.max_ulp, 1);
            assert_int_equal(r.first_count, 1);
            assert_int_equal(r.first[0].token, t);
            assert_int_equal(r.first[0].column, h);
            assert_int_equal(r.first[0].expected ^ r.first[0].actual, 1);
            char where[64];
            snprintf(where, sizeof where, "token %lld: column %lld", (long long)t, (long long)h);
            assert_string_equal(r.where, where);
            golden_compare_free(&r);
        }
        free(actual);
        golden_case_free(&c);
    }
}

static void test_ranges_are_summarised(void **state)
{
    (void)state;
    golden_case c = make_case(MOEPERM_BF16);
    size_t bytes = golden_output_bytes(&c);
    void *actual = malloc(bytes);
    golden_compare_result r;
    assert_non_null(actual);

    /* A chunk edge gone wrong: the same columns of every token. */
    memcpy(actual, c.input_grad, bytes);
    for (int64_t t = 0; t < TOKENS; t++)
        for (int64_t h = 13; h <= 20; h++)
            flip(c.dtype, actual, t, h, 1);
    assert_int_equal(golden_compare(c.dtype, TOKENS, HIDDEN, c.input_grad, actual, false, &r), 0);
    assert_int_equal(r.differing, TOKENS * 8);
    assert_string_equal(r.where, "columns 13-20 of every token");
    golden_compare_free(&r);

    /* One core's tokens gone wrong: a token range, every column. */
    memcpy(actual, c.input_grad, bytes);
    for (int64_t t = 40; t < TOKENS; t++)
        for (int64_t h = 0; h < HIDDEN; h++)
            flip(c.dtype, actual, t, h, 2);
    assert_int_equal(golden_compare(c.dtype, TOKENS, HIDDEN, c.input_grad, actual, false, &r), 0);
    assert_string_equal(r.where, "tokens 40-63: all columns");
    assert_int_equal(r.first[0].token, 40);
    assert_int_equal(r.first[0].column, 0);
    golden_compare_free(&r);

    /* A tail and a separate token. */
    memcpy(actual, c.input_grad, bytes);
    for (int64_t t = 2; t <= 5; t++) {
        flip(c.dtype, actual, t, 38, 0);
        flip(c.dtype, actual, t, 39, 0);
    }
    flip(c.dtype, actual, 9, 0, 0);
    assert_int_equal(golden_compare(c.dtype, TOKENS, HIDDEN, c.input_grad, actual, false, &r), 0);
    assert_string_equal(r.where, "tokens 2-5: columns 38-39; token 9: column 0");
    golden_compare_free(&r);

    /* Equal outputs: nothing differs, no summary. */
    assert_int_equal(golden_compare(c.dtype, TOKENS, HIDDEN, c.input_grad, c.input_grad, true,
                                    &r), 0);
    assert_int_equal(r.differing, 0);
    assert_null(r.where);
    golden_compare_free(&r);
    free(actual);
    golden_case_free(&c);
}

static void test_ulp_distance_on_the_ordered_line(void **state)
{
    (void)state;
    assert_int_equal(golden_ulp_distance(MOEPERM_FLOAT, 0x00000000, 0x80000000), 1);
    assert_int_equal(golden_ulp_distance(MOEPERM_FLOAT, 0x7f7fffff, 0x7f800000), 1);
    assert_int_equal(golden_ulp_distance(MOEPERM_FLOAT, 0x3f800000, 0x3f800001), 1);
    assert_int_equal(golden_ulp_distance(MOEPERM_FLOAT, 0x80000001, 0x00000001), 3);
    assert_int_equal(golden_ulp_distance(MOEPERM_FLOAT, 0xbf800000, 0x3f800000),
                     2 * UINT64_C(0x3f800000) + 1);
    assert_int_equal(golden_ulp_distance(MOEPERM_BF16, 0x7f7f, 0x7f80), 1);
    assert_int_equal(golden_ulp_distance(MOEPERM_FLOAT16, 0x7bff, 0x7c00), 1);
    assert_int_equal(golden_ulp_distance(MOEPERM_FLOAT16, 0x8000, 0x0000), 1);
    assert_int_equal(golden_ulp_distance(MOEPERM_BF16, 0x8001, 0x0001), 3);
}

static void test_nans_are_equal_unless_strict(void **state)
{
    (void)state;
    uint16_t expected[2] = {0x7fc0, 0x3f80}, actual[2] = {0xffc1, 0x3f80};
    golden_compare_result r;
    assert_int_equal(golden_compare(MOEPERM_BF16, 1, 2, expected, actual, false, &r), 0);
    assert_int_equal(r.differing, 0);
    golden_compare_free(&r);
    assert_int_equal(golden_compare(MOEPERM_BF16, 1, 2, expected, actual, true, &r), 0);
    assert_int_equal(r.differing, 1);
    golden_compare_free(&r);
    /* NaN against a number differs in either mode and is counted apart. */
    actual[0] = 0x7f80;
    assert_int_equal(golden_compare(MOEPERM_BF16, 1, 2, expected, actual, false, &r), 0);
    assert_int_equal(r.differing, 1);
    assert_int_equal(r.nan_mismatch, 1);
    golden_compare_free(&r);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_one_flipped_bit_is_located_by_token_and_column),
        cmocka_unit_test(test_ranges_are_summarised),
        cmocka_unit_test(test_ulp_distance_on_the_ordered_line),
        cmocka_unit_test(test_nans_are_equal_unless_strict),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}

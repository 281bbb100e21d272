/*
 * The location summary names the structure of a mismatch the way a kernel
 * developer acts on it: a block of tokens, a column band of every token,
 * every other token, scattered errors; groups are joined across gaps and
 * the text stays bounded however many tokens differ.  The differing
 * elements are planted here, so every expected string is written out by
 * hand.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "golden/judge/where.h"
#include "naive.h"

/* A planted mask: element i differs when mask[i]. */
static bool masked(const void *ctx, uint64_t i)
{
    return ((const uint8_t *)ctx)[i] != 0;
}

static char *describe(const uint8_t *mask, int64_t rows, int64_t cols, const char *noun,
                      moeperm_golden_where *w)
{
    assert_int_equal(golden_where_describe(rows, cols, masked, mask, noun, w), 0);
    return w->text;
}

static void test_block_of_tokens_with_coincidences_is_one_group(void **state)
{
    (void)state;
    enum { T = 128, H = 4096 };
    uint8_t *m = calloc(T * H, 1);
    assert_non_null(m);
    uint64_t rng = 7;
    uint64_t planted = 0;
    /* tokens 48-95 hold other values: almost every column differs, a few
     * coincide by chance, in other columns in each token */
    for (int t = 48; t < 96; t++)
        for (int h = 0; h < H; h++)
            planted += m[t * H + h] = naive_rand(&rng) % 1000 != 0;
    moeperm_golden_where w;
    char want[256];
    snprintf(want, sizeof want, "tokens 48-95: most columns (%llu of %d elements)",
             (unsigned long long)planted, 48 * H);
    assert_string_equal(describe(m, T, H, "token", &w), want);
    assert_int_equal(w.groups, 1);
    assert_int_equal(w.group[0].columns, GOLDEN_WHERE_MOST);
    assert_int_equal(w.group[0].rows, 48);
    assert_int_equal(w.group[0].spans, 1);
    assert_int_equal(w.group[0].span[0].first, 48);
    assert_int_equal(w.group[0].span[0].last, 95);
    assert_int_equal(w.group[0].span[0].step, 1);
    assert_int_equal(w.elements, planted);
    golden_where_free(&w);

    /* without coincidences: all columns */
    for (int t = 48; t < 96; t++)
        memset(m + t * H, 1, H);
    assert_string_equal(describe(m, T, H, "token", &w), "tokens 48-95: all columns");
    golden_where_free(&w);
    free(m);
}

static void test_every_other_token_is_a_stride(void **state)
{
    (void)state;
    enum { T = 1000, H = 8 };
    uint8_t m[T * H] = {0};
    for (int t = 1; t < T; t += 2)
        memset(m + t * H, 1, H);
    moeperm_golden_where w;
    assert_string_equal(describe(m, T, H, "token", &w),
                        "every 2nd token from 1 to 999: all columns");
    assert_int_equal(w.group[0].span[0].step, 2);
    golden_where_free(&w);

    memset(m, 0, sizeof m);
    for (int t = 0; t < T; t += 3)
        m[t * H + 5] = 1;
    assert_string_equal(describe(m, T, H, "token", &w), "every 3rd token from 0 to 999: column 5");
    golden_where_free(&w);

    memset(m, 0, sizeof m);
    for (int t = 11; t < 200; t += 11)
        m[t * H + 2] = m[t * H + 3] = 1;
    assert_string_equal(describe(m, T, H, "token", &w),
                        "every 11th token from 11 to 198: columns 2-3");
    golden_where_free(&w);
}

static void test_column_band_of_every_token(void **state)
{
    (void)state;
    enum { T = 16, H = 8192 };
    uint8_t *m = calloc(T * H, 1);
    assert_non_null(m);
    for (int t = 0; t < T; t++)
        memset(m + t * H + 6144, 1, 1024);
    moeperm_golden_where w;
    assert_string_equal(describe(m, T, H, "token", &w), "columns 6144-7167 of every token");
    assert_int_equal(w.group[0].columns, GOLDEN_WHERE_RANGES);
    assert_int_equal(w.group[0].ranges, 1);
    assert_int_equal(w.group[0].lo[0], 6144);
    assert_int_equal(w.group[0].hi[0], 7167);
    golden_where_free(&w);

    /* A tail missed: the same two ranges in every row, most columns. */
    for (int t = 0; t < T; t++) {
        memset(m + t * H, 1, H);
        m[t * H + 100] = 0;
    }
    assert_string_equal(describe(m, T, H, NULL, &w), "columns 0-99, 101-8191 of every row");
    golden_where_free(&w);
    free(m);
}

static void test_scattered_errors_are_counted_not_listed(void **state)
{
    (void)state;
    enum { T = 64, H = 512 };
    uint8_t m[T * H] = {0};
    uint64_t rng = 99, planted = 0;
    for (int i = 0; i < T * H; i++)
        if (naive_rand(&rng) % 20 == 0) {
            m[i] = 1;
            planted++;
        }
    moeperm_golden_where w;
    describe(m, T, H, "token", &w);
    char want[256];
    snprintf(want, sizeof want,
             "scattered columns in %lld-%lld of every token (%llu of %d elements)",
             (long long)w.group[0].column_first, (long long)w.group[0].column_last,
             (unsigned long long)planted, T * H);
    assert_string_equal(w.text, want);
    assert_int_equal(w.groups, 1);
    assert_true(w.group[0].column_first < 20 && w.group[0].column_last > H - 20);
    golden_where_free(&w);

    /* one token alone keeps the old wording */
    memset(m, 0, sizeof m);
    for (int h = 3; h < H; h += 9)
        m[7 * H + h] = 1;
    assert_string_equal(describe(m, T, H, "token", &w), "token 7: 57 scattered columns in 3-507");
    golden_where_free(&w);
}

static void test_groups_join_across_gaps_and_lists_stay_bounded(void **state)
{
    (void)state;
    enum { T = 64, H = 4 };
    uint8_t m[T * H] = {0};
    int rows[] = {2, 3, 4, 5, 9, 11, 13, 15};
    for (size_t i = 0; i < sizeof rows / sizeof rows[0]; i++)
        memset(m + rows[i] * H, 1, H);
    m[40 * H + 1] = 1; /* another class in between */
    memset(m + 50 * H, 1, H);
    moeperm_golden_where w;
    assert_string_equal(describe(m, T, H, "token", &w),
                        "tokens 2-5, every 2nd from 9 to 15, 50: all columns; token 40: column 1");
    golden_where_free(&w);

    /* More spans than kept: the rest is counted. */
    memset(m, 0, sizeof m);
    for (int t = 0; t < 40; t += 4) {
        m[t * H] = 1;
        m[(t + 1) * H] = 1;
    }
    assert_string_equal(describe(m, T, H, "token", &w),
                        "tokens 0-1, 4-5, 8-9, 12-13, 16-17, 20-21, 24-25, 28-29, and 4 more: "
                        "column 0");
    assert_int_equal(w.group[0].spans, GOLDEN_WHERE_MAX_SPANS);
    assert_int_equal(w.group[0].rows, 20);
    assert_int_equal(w.group[0].rows_in_spans, 16);
    golden_where_free(&w);

    /* More classes than kept: the first by row are named, the rest counted. */
    uint8_t wide[20 * 32] = {0};
    for (int t = 0; t < 20; t++)
        wide[t * 32 + t] = 1;
    describe(wide, 20, 32, "token", &w);
    assert_int_equal(w.groups, GOLDEN_WHERE_MAX_GROUPS);
    assert_int_equal(w.rows_elsewhere, 20 - GOLDEN_WHERE_MAX_GROUPS);
    assert_non_null(strstr(w.text, "token 11: column 11; and 8 more tokens elsewhere"));
    golden_where_free(&w);

    /* Nothing to locate: no text. */
    memset(m, 0, sizeof m);
    assert_null(describe(m, T, H, "token", &w));
    assert_int_equal(w.groups, 0);
    golden_where_free(&w);
}

static void test_compute_compares_bits_with_the_nan_rule(void **state)
{
    (void)state;
    uint16_t e[4] = {0x3f80, 0x7fc0, 0x0000, 0x4000}, a[4] = {0x3f80, 0xffc1, 0x8000, 0x4000};
    moeperm_golden_where w;
    assert_int_equal(golden_where_compute(MOEPERM_BF16, 2, 2, e, a, false, "token", &w), 0);
    assert_string_equal(w.text, "token 1: column 0"); /* -0 differs from +0; NaNs are equal */
    golden_where_free(&w);
    assert_int_equal(golden_where_compute(MOEPERM_BF16, 2, 2, e, a, true, "token", &w), 0);
    assert_string_equal(w.text, "token 0: column 1; token 1: column 0");
    golden_where_free(&w);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_block_of_tokens_with_coincidences_is_one_group),
        cmocka_unit_test(test_every_other_token_is_a_stride),
        cmocka_unit_test(test_column_band_of_every_token),
        cmocka_unit_test(test_scattered_errors_are_counted_not_listed),
        cmocka_unit_test(test_groups_join_across_gaps_and_lists_stay_bounded),
        cmocka_unit_test(test_compute_compares_bits_with_the_nan_rule),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}

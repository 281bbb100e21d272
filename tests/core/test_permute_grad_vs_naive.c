/*
 * The arithmetic against the tests' own naive loop (naive_permute_grad.c), on seeded
 * random cases in all three dtypes: special values (signed zeros, inf, NaN,
 * subnormals, narrowing overflow, rounding ties, cancellation), extreme
 * top_k and hidden sizes, no tokens, dropped slots (a dropped slot 0 too),
 * and the -0.0 sum that proves the accumulator starts from slot 0.
 *
 * Each case is numbered; its seed is its number, so a failing case can be
 * rerun alone (MOEPERM_TEST_CASE=N).
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "call_permute_grad.h"
#include "naive.h"
#include "naive_permute_grad.h"

static const moeperm_dtype dtypes[3] = {MOEPERM_FLOAT, MOEPERM_FLOAT16, MOEPERM_BF16};

/* A value of `dtype` drawn to hit the edges: about half ordinary values,
 * the rest specials and near-overflow / subnormal / tie-making values. */
static uint32_t draw(uint64_t *rng, moeperm_dtype dtype)
{
    uint64_t r = naive_rand(rng);
    unsigned pick = (unsigned)(r % 16);
    uint32_t random_bits = (uint32_t)(r >> 32);
    if (dtype == MOEPERM_FLOAT) {
        static const uint32_t specials[] = {0x00000000, 0x80000000, 0x7f800000, 0xff800000,
                                            0x7fc00000, 0xffc00001, 0x7f7fffff, 0xff7fffff,
                                            0x00000001, 0x807fffff, 0x3f800000, 0x33800000};
        if (pick < 4)
            return specials[random_bits % 12];
        if (pick < 6) /* subnormal */
            return (random_bits & 0x807fffffu);
        if (pick < 8) /* huge: overflows narrowing and sometimes the sum */
            return (random_bits & 0x80ffffffu) | 0x7e000000u;
        if (pick < 10) /* values whose sums land on bf16/fp16 ties */
            return (random_bits & 0x8000e000u) | 0x3f800000u;
        return (random_bits & 0x803fffffu) | 0x3e000000u; /* ordinary, in [0.125, 0.25) */
    }
    static const uint16_t bf16_specials[] = {0x0000, 0x8000, 0x7f80, 0xff80, 0x7fc0,
                                             0xff81, 0x7f7f, 0xff7f, 0x0001, 0x807f};
    static const uint16_t fp16_specials[] = {0x0000, 0x8000, 0x7c00, 0xfc00, 0x7e00,
                                             0xfc01, 0x7bff, 0xfbff, 0x0001, 0x83ff};
    const uint16_t *specials = dtype == MOEPERM_BF16 ? bf16_specials : fp16_specials;
    if (pick < 4)
        return specials[random_bits % 10];
    if (pick < 6) /* subnormal */
        return random_bits & (dtype == MOEPERM_BF16 ? 0x807fu : 0x83ffu);
    if (pick < 8) /* near the top of the range */
        return (random_bits & 0x807fu) | (dtype == MOEPERM_BF16 ? 0x7f00u : 0x7800u);
    return (random_bits & 0x80ffu) | (dtype == MOEPERM_BF16 ? 0x3f00u : 0x3c00u);
}

static void fill(uint64_t *rng, moeperm_dtype dtype, void *buf, int64_t n)
{
    for (int64_t i = 0; i < n; i++) {
        if (dtype == MOEPERM_FLOAT)
            ((uint32_t *)buf)[i] = draw(rng, dtype);
        else
            ((uint16_t *)buf)[i] = (uint16_t)draw(rng, dtype);
    }
}

/* Runs one case and compares with the naive loop bit for bit (NaN-aware). */
static void check_case(int number, moeperm_dtype dtype, int64_t tokens, int64_t top_k,
                       int64_t hidden, int64_t rows)
{
    uint64_t rng = (uint64_t)number;
    size_t es = naive_size(dtype);
    int64_t count = tokens * top_k;
    void *grad = malloc((size_t)(rows * hidden) * es + 1);
    int32_t *indices = malloc((size_t)count * sizeof *indices + 1);
    void *want = malloc((size_t)(tokens * hidden) * es + 1);
    void *got = malloc((size_t)(tokens * hidden) * es + 1);
    assert_non_null(grad);
    assert_non_null(indices);
    assert_non_null(want);
    assert_non_null(got);
    fill(&rng, dtype, grad, rows * hidden);
    naive_permutation(&rng, indices, count);
    memset(got, 0xa5, (size_t)(tokens * hidden) * es);
    naive_permute_grad(dtype, grad, rows, hidden, indices, tokens, top_k, want);

    moeperm_status status =
        call_permute_grad(dtype, grad, rows, hidden, indices, tokens, top_k, got);
    if (status != MOEPERM_SUCCESS)
        fail_msg("case %d: status %d: %s", number, status, moeperm_last_error());
    int64_t first = -1;
    if (!naive_equal(dtype, want, got, tokens * hidden, &first)) {
        uint32_t w = es == 4 ? ((uint32_t *)want)[first] : ((uint16_t *)want)[first];
        uint32_t g = es == 4 ? ((uint32_t *)got)[first] : ((uint16_t *)got)[first];
        fail_msg("case %d (dtype %d, T=%lld K=%lld H=%lld R=%lld): token %lld column %lld: "
                 "expected 0x%x, got 0x%x",
                 number, dtype, (long long)tokens, (long long)top_k, (long long)hidden,
                 (long long)rows, (long long)(first / hidden), (long long)(first % hidden), w, g);
    }
    free(grad);
    free(indices);
    free(want);
    free(got);
}

static void test_random_cases_match_naive_loop_in_every_dtype(void **state)
{
    (void)state;
    const char *only = getenv("MOEPERM_TEST_CASE");
    for (int number = 0; number < 300; number++) {
        if (only && atoi(only) != number)
            continue;
        uint64_t rng = (uint64_t)number * 7919u + 1;
        moeperm_dtype dtype = dtypes[number % 3];
        int64_t tokens = 1 + (int64_t)(naive_rand(&rng) % 40);
        int64_t top_k = 1 + (int64_t)(naive_rand(&rng) % 9);
        int64_t hidden = 1 + (int64_t)(naive_rand(&rng) % 70);
        int64_t count = tokens * top_k;
        /* a third of the cases drop slots */
        int64_t rows = number % 3 == 1 ? (int64_t)(naive_rand(&rng) % (uint64_t)(count + 1))
                                       : count;
        check_case(number, dtype, tokens, top_k, hidden, rows);
    }
}

static void test_top_k_1_and_512_match_naive_loop(void **state)
{
    (void)state;
    for (int d = 0; d < 3; d++) {
        check_case(1000 + d, dtypes[d], 37, 1, 19, 37);
        check_case(1010 + d, dtypes[d], 3, 512, 17, 1536);
        check_case(1020 + d, dtypes[d], 2, 512, 5, 700); /* and dropped slots */
    }
}

static void test_hidden_1_and_non_multiple_of_16_match_naive_loop(void **state)
{
    (void)state;
    for (int d = 0; d < 3; d++) {
        check_case(1100 + d, dtypes[d], 50, 4, 1, 200);
        check_case(1110 + d, dtypes[d], 9, 8, 4097, 72); /* crosses a column block */
        check_case(1120 + d, dtypes[d], 5, 3, 2049, 15);
    }
}

static void test_zero_tokens_or_hidden_succeed_and_touch_nothing(void **state)
{
    (void)state;
    uint16_t grad[4] = {1, 2, 3, 4}, out[4] = {7, 7, 7, 7};
    int32_t indices[4] = {0, 1, 2, 3};
    for (int d = 0; d < 3; d++) {
        assert_int_equal(call_permute_grad(dtypes[d], grad, 0, 4, indices, 0, 2, out), 0);
        assert_int_equal(call_permute_grad(dtypes[d], grad, 4, 0, indices, 2, 2, out), 0);
        for (int i = 0; i < 4; i++)
            assert_int_equal(out[i], 7);
    }
}

static void test_dropped_first_slot_starts_from_plus_zero(void **state)
{
    (void)state;
    /* token 0: slot 0 -> row 3 (dropped: rows = 2), slot 1 -> row 0 (-0.0)
     * +0.0 + -0.0 = +0.0, while a sum started from -0.0 would stay -0.0. */
    int32_t indices[4] = {3, 0, 1, 2};
    uint16_t bf16_grad[2] = {0x8000, 0x8000}, bf16_out[2] = {0xffff, 0xffff};
    assert_int_equal(call_permute_grad(MOEPERM_BF16, bf16_grad, 2, 1, indices, 2, 2, bf16_out),
                     0);
    assert_int_equal(bf16_out[0], 0x0000);
    assert_int_equal(bf16_out[1], 0x8000); /* row 1 (-0.0), row 2 dropped */

    float f32_grad[2] = {-0.0f, -0.0f}, f32_out[2];
    assert_int_equal(call_permute_grad(MOEPERM_FLOAT, f32_grad, 2, 1, indices, 2, 2, f32_out),
                     0);
    assert_int_equal(naive_bits(f32_out[0]), 0x00000000u);
    assert_int_equal(naive_bits(f32_out[1]), 0x80000000u);
    for (int d = 0; d < 3; d++)
        check_case(1200 + d, dtypes[d], 30, 4, 9, 61);
}

static void test_all_minus_zero_slots_sum_to_minus_zero(void **state)
{
    (void)state;
    enum { T = 3, K = 4, H = 5 };
    int32_t indices[T * K];
    uint64_t rng = 5;
    naive_permutation(&rng, indices, T * K);
    uint16_t g16[T * K * H], o16[T * H];
    float g32[T * K * H], o32[T * H];
    for (int i = 0; i < T * K * H; i++) {
        g32[i] = -0.0f;
    }
    for (int d = 0; d < 3; d++) {
        uint16_t minus_zero = 0x8000;
        for (int i = 0; i < T * K * H; i++)
            g16[i] = minus_zero;
        if (dtypes[d] == MOEPERM_FLOAT) {
            assert_int_equal(call_permute_grad(MOEPERM_FLOAT, g32, T * K, H, indices, T, K, o32),
                             0);
            for (int i = 0; i < T * H; i++)
                assert_int_equal(naive_bits(o32[i]), 0x80000000u);
        } else {
            assert_int_equal(call_permute_grad(dtypes[d], g16, T * K, H, indices, T, K, o16), 0);
            for (int i = 0; i < T * H; i++)
                assert_int_equal(o16[i], 0x8000);
        }
    }
}

/* Hand-checked sums whose bits the spec fixes. */
static void test_known_sums_round_to_nearest_even_once(void **state)
{
    (void)state;
    int32_t indices[2] = {0, 1};
    /* bf16: 1 + 2^-8 = 0x3f808000 in fp32 is a tie between 0x3f80 and
     * 0x3f81: even is 0x3f80. */
    uint16_t grad[2] = {0x3f80, 0x3b80}, out[1];
    assert_int_equal(call_permute_grad(MOEPERM_BF16, grad, 2, 1, indices, 1, 2, out), 0);
    assert_int_equal(out[0], 0x3f80);
    /* 1 + 2^-8 + 2^-8 = 1 + 2^-7 exactly in the fp32 accumulator: 0x3f81.
     * A bf16 accumulator would round the first sum back to 1.0 and end at
     * 0x3f80, so this pins the single narrowing at the end. */
    int32_t three[3] = {0, 1, 2};
    uint16_t grad2[3] = {0x3f80, 0x3b80, 0x3b80};
    assert_int_equal(call_permute_grad(MOEPERM_BF16, grad2, 3, 1, three, 1, 3, out), 0);
    assert_int_equal(out[0], 0x3f81);
    /* fp16: 65504 + 16 = 65520, the midpoint to infinity: inf (IEEE, not saturation). */
    uint16_t grad3[2] = {0x7bff, 0x4c00}, out3[1];
    assert_int_equal(call_permute_grad(MOEPERM_FLOAT16, grad3, 2, 1, indices, 1, 2, out3), 0);
    assert_int_equal(out3[0], 0x7c00);
    /* inf + -inf is NaN, and NaN narrows to a quiet NaN. */
    uint16_t grad4[2] = {0x7f80, 0xff80};
    assert_int_equal(call_permute_grad(MOEPERM_BF16, grad4, 2, 1, indices, 1, 2, out), 0);
    assert_true((out[0] & 0x7fff) > 0x7f80 && (out[0] & 0x0040));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_random_cases_match_naive_loop_in_every_dtype),
        cmocka_unit_test(test_top_k_1_and_512_match_naive_loop),
        cmocka_unit_test(test_hidden_1_and_non_multiple_of_16_match_naive_loop),
        cmocka_unit_test(test_zero_tokens_or_hidden_succeed_and_touch_nothing),
        cmocka_unit_test(test_dropped_first_slot_starts_from_plus_zero),
        cmocka_unit_test(test_all_minus_zero_slots_sum_to_minus_zero),
        cmocka_unit_test(test_known_sums_round_to_nearest_even_once),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}

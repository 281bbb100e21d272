/*
 * MoeTokenUnpermute against the tests' own model (naive_family.c: the
 * definition's loop with every multiply and add a separate volatile
 * binary32 step, conversions rounded in double), bit for bit with any NaN
 * equal to any NaN.  Random cases over all nine pairs of tokens and probs
 * dtypes, values drawn to hit the edges (signed zeros, infinities, NaNs,
 * subnormals, overflowing products and sums, rounding ties); then the
 * cases that pin the definition down one by one: +0 and -0 probs masking
 * inf and NaN rows, the +0 start when slot 0 is left out, dropped slots,
 * the NaN order, strided views, thread counts and the caller's
 * floating-point environment.
 *
 * Each random case is numbered; its seed is its number
 * (MOEPERM_TEST_CASE=N runs one case alone).
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "call_family.h"
#include "core/internal.h"
#include "unpermute/unpermute.h"
#include "naive.h"
#include "naive_family.h"

#if defined(__x86_64__) || (defined(__i386__) && defined(__SSE2__))
#include <xmmintrin.h>
#define HAVE_MXCSR 1
#endif

static const moeperm_dtype dtypes[3] = {MOEPERM_FLOAT, MOEPERM_FLOAT16, MOEPERM_BF16};

/* A value of dtype drawn to hit the edges. */
static uint32_t draw(uint64_t *rng, moeperm_dtype dtype, bool prob)
{
    uint64_t r = naive_rand(rng);
    unsigned pick = (unsigned)(r % 16);
    uint32_t bits = (uint32_t)(r >> 32);
    if (dtype == MOEPERM_FLOAT) {
        static const uint32_t specials[] = {0x00000000, 0x80000000, 0x7f800000, 0xff800000,
                                            0x7fc00000, 0xffc00001, 0x7f7fffff, 0xff7fffff,
                                            0x00000001, 0x807fffff, 0x3f800000, 0x7f800001};
        if (pick < 3)
            return specials[bits % 12];
        if (pick < 5) /* subnormal */
            return bits & 0x807fffffu;
        if (pick < 7) /* huge: products and sums overflow */
            return (bits & 0x80ffffffu) | 0x7e000000u;
        if (pick < 9 && !prob) /* tiny: products underflow to subnormals */
            return (bits & 0x807fffffu) | 0x01000000u;
        if (pick < 11) /* few mantissa bits: products land on ties */
            return (bits & 0x8000f000u) | 0x3f800000u;
        return (bits & 0x807fffffu) | 0x3e000000u;
    }
    static const uint16_t bf16_specials[] = {0x0000, 0x8000, 0x7f80, 0xff80, 0x7fc0, 0xff81,
                                             0x7f7f, 0xff7f, 0x0001, 0x807f, 0x3f80, 0x7f81};
    static const uint16_t fp16_specials[] = {0x0000, 0x8000, 0x7c00, 0xfc00, 0x7e00, 0xfc01,
                                             0x7bff, 0xfbff, 0x0001, 0x83ff, 0x3c00, 0x7c01};
    bool bf16 = dtype == MOEPERM_BF16;
    if (pick < 3)
        return (bf16 ? bf16_specials : fp16_specials)[bits % 12];
    if (pick < 5) /* subnormal */
        return bits & (bf16 ? 0x807fu : 0x83ffu);
    if (pick < 7) /* near the top of the range */
        return (bits & (bf16 ? 0x807fu : 0x83ffu)) | (bf16 ? 0x7f00u : 0x7800u);
    if (pick < 9 && !prob) /* small: products fall below the 16-bit range */
        return (bits & (bf16 ? 0x807fu : 0x83ffu)) | (bf16 ? 0x0100u : 0x0400u);
    return (bits & (bf16 ? 0x80ffu : 0x83ffu)) | (bf16 ? 0x3f00u : 0x3800u);
}

static void fill(uint64_t *rng, moeperm_dtype dtype, void *buf, int64_t n, bool prob)
{
    for (int64_t i = 0; i < n; i++) {
        if (dtype == MOEPERM_FLOAT)
            ((uint32_t *)buf)[i] = draw(rng, dtype, prob);
        else
            ((uint16_t *)buf)[i] = (uint16_t)draw(rng, dtype, prob);
    }
}

static uint32_t element(moeperm_dtype dtype, const void *base, int64_t i)
{
    return dtype == MOEPERM_FLOAT ? ((const uint32_t *)base)[i] : ((const uint16_t *)base)[i];
}

static void expect_equal(int number, moeperm_dtype dtype, const void *want, const void *got,
                         int64_t tokens, int64_t hidden)
{
    int64_t first = -1;
    if (!naive_equal(dtype, want, got, tokens * hidden, &first))
        fail_msg("case %d (dtype %d): token %lld column %lld: expected 0x%x, got 0x%x", number,
                 dtype, (long long)(first / hidden), (long long)(first % hidden),
                 element(dtype, want, first), element(dtype, got, first));
}

static void check_case(int number, moeperm_dtype dtype, moeperm_dtype probs_dtype,
                       int64_t tokens, int64_t top_k, int64_t hidden, int64_t rows, bool probs)
{
    uint64_t rng = (uint64_t)number;
    size_t es = naive_size(dtype);
    int64_t count = tokens * top_k;
    void *x = malloc((size_t)(rows * hidden) * es + 1);
    int32_t *indices = malloc((size_t)count * 4 + 1);
    void *p = malloc((size_t)count * 4 + 1);
    void *want = malloc((size_t)(tokens * hidden) * es + 1);
    void *got = malloc((size_t)(tokens * hidden) * es + 1);
    assert_true(x && indices && p && want && got);
    fill(&rng, dtype, x, rows * hidden, false);
    fill(&rng, probs_dtype, p, count, true);
    naive_permutation(&rng, indices, count);
    memset(got, 0xa5, (size_t)(tokens * hidden) * es);
    naive_unpermute(dtype, x, rows, hidden, indices, tokens, top_k, probs_dtype,
                    probs ? p : NULL, want);
    moeperm_status status = call_unpermute(dtype, x, rows, hidden, indices, tokens, top_k,
                                           probs_dtype, probs ? p : NULL, got);
    if (status != MOEPERM_SUCCESS)
        fail_msg("case %d: status %d: %s", number, status, moeperm_last_error());
    expect_equal(number, dtype, want, got, tokens, hidden);
    free(x);
    free(indices);
    free(p);
    free(want);
    free(got);
}

static void test_random_cases_match_naive_model_for_every_dtype_pair(void **state)
{
    (void)state;
    const char *only = getenv("MOEPERM_TEST_CASE");
    for (int number = 0; number < 540; number++) {
        if (only && atoi(only) != number)
            continue;
        uint64_t rng = (uint64_t)number * 7919u + 1;
        int64_t tokens = 1 + (int64_t)(naive_rand(&rng) % 40);
        bool probs = number % 10 != 9; /* without probs, top_k is 1 */
        int64_t top_k = probs ? 1 + (int64_t)(naive_rand(&rng) % 9) : 1;
        int64_t hidden = 1 + (int64_t)(naive_rand(&rng) % 70);
        int64_t count = tokens * top_k;
        /* a third of the cases drop slots */
        int64_t rows = number % 3 == 1 ? (int64_t)(naive_rand(&rng) % (uint64_t)(count + 1))
                                       : count;
        check_case(number, dtypes[number % 3], dtypes[(number / 3) % 3], tokens, top_k, hidden,
                   rows, probs);
    }
}

static void test_top_k_512_and_column_blocks_match_naive_model(void **state)
{
    (void)state;
    for (int d = 0; d < 3; d++) {
        check_case(1000 + d, dtypes[d], dtypes[(d + 2) % 3], 3, 512, 17, 1536, true);
        check_case(1010 + d, dtypes[d], dtypes[d], 2, 512, 5, 700, true);
        check_case(1020 + d, dtypes[d], dtypes[(d + 1) % 3], 9, 8, 4097, 72, true);
        check_case(1030 + d, dtypes[d], dtypes[d], 5, 3, 2049, 11, true);
    }
}

/* One token, two slots, one column, fp32 everywhere: out = f(x0, p0, x1, p1). */
static uint32_t two_slots(uint32_t x0, uint32_t p0, uint32_t x1, uint32_t p1, int64_t rows)
{
    uint32_t x[2] = {x0, x1}, p[2] = {p0, p1}, out = 0x12345678u;
    int32_t indices[2] = {0, 1};
    assert_int_equal(call_unpermute(MOEPERM_FLOAT, x, rows, 1, indices, 1, 2, MOEPERM_FLOAT, p,
                                    &out),
                     MOEPERM_SUCCESS);
    return out;
}

static void test_zero_probs_mask_inf_and_nan_rows(void **state)
{
    (void)state;
    const uint32_t pos_zero = 0x00000000u, neg_zero = 0x80000000u, one = 0x3f800000u,
                   two = 0x40000000u, inf = 0x7f800000u, nan = 0x7fc00000u;
    /* a masked slot 1: out is slot 0's product alone */
    assert_int_equal(two_slots(two, one, inf, pos_zero, 2), two);
    assert_int_equal(two_slots(two, one, nan, neg_zero, 2), two);
    /* a masked slot 0: +0 + slot 1's product */
    assert_int_equal(two_slots(inf, neg_zero, two, two, 2), 0x40800000u);
    assert_int_equal(two_slots(nan, pos_zero, two, one, 2), two);
    /* both masked: +0 */
    assert_int_equal(two_slots(nan, pos_zero, inf, neg_zero, 2), pos_zero);
    /* and a prob that is not zero lets the inf through */
    assert_int_equal(two_slots(two, one, inf, 0x00000001u, 2), inf);
}

static void test_slot_0_left_out_starts_from_plus_zero(void **state)
{
    (void)state;
    const uint32_t neg_zero = 0x80000000u, one = 0x3f800000u;
    /* slot 0 included: -0 * 1 + -0 * 1 = -0 */
    assert_int_equal(two_slots(neg_zero, one, neg_zero, one, 2), neg_zero);
    /* slot 0's prob is zero: +0 + (-0) = +0 */
    assert_int_equal(two_slots(one, 0x00000000u, neg_zero, one, 2), 0x00000000u);
    /* slot 0 dropped (its row 1 is not below R = 1): +0 + (-0) = +0 */
    int32_t indices[2] = {1, 0};
    uint32_t x[1] = {neg_zero}, p[2] = {one, one}, out = 0x12345678u;
    assert_int_equal(call_unpermute(MOEPERM_FLOAT, x, 1, 1, indices, 1, 2, MOEPERM_FLOAT, p, &out),
                     MOEPERM_SUCCESS);
    assert_int_equal(out, 0x00000000u);
}

static void test_products_are_rounded_before_the_sum(void **state)
{
    (void)state;
    /* (1 + 2^-23) * (1 + 2^-23) = 1 + 2^-22 + 2^-46 rounds to 1 + 2^-22;
     * then + (-1) gives 2^-22 exactly.  A fused multiply-add would keep
     * 2^-46 and give 2^-22 + 2^-46. */
    const uint32_t a = 0x3f800001u, minus_one = 0xbf800000u, one = 0x3f800000u;
    assert_int_equal(two_slots(minus_one, one, a, a, 2), 0x34800000u);
    /* subnormal product: 2^-126 * 2^-10 = 2^-136 = 2^13 * 2^-149, kept */
    assert_int_equal(two_slots(0x00800000u, 0x3a800000u, 0x00000000u, one, 2), 0x00002000u);
    /* overflowing product: max * 2 = inf */
    assert_int_equal(two_slots(0x7f7fffffu, 0x40000000u, 0x00000000u, one, 2), 0x7f800000u);
}

static void test_nan_order_token_nan_wins_and_accumulator_nan_stays(void **state)
{
    (void)state;
    const uint32_t one = 0x3f800000u;
    /* a NaN token value times a NaN prob: the token's NaN, made quiet */
    assert_int_equal(two_slots(0x7f800001u, 0xffc00002u, 0x00000000u, one, 2), 0x7fc00001u);
    /* an ordinary token value times a NaN prob: the prob's NaN, made quiet */
    assert_int_equal(two_slots(one, 0xff800003u, 0x00000000u, one, 2), 0xffc00003u);
    /* a NaN accumulator plus a NaN product: the accumulator's NaN */
    assert_int_equal(two_slots(0x7fc00011u, one, 0xffc00022u, one, 2), 0x7fc00011u);
    assert_int_equal(two_slots(one, one, 0xffc00022u, one, 2), 0xffc00022u);
}

static void test_dropped_slots_are_skipped(void **state)
{
    (void)state;
    for (int d = 0; d < 3; d++)
        for (int64_t rows = 0; rows <= 12; rows += 3)
            check_case(2000 + d * 20 + (int)rows, dtypes[d], dtypes[(d + 1) % 3], 4, 3, 21, rows,
                       true);
}

/* Every tensor a strided view (columns 2 apart, padded rows, offsets); the
 * result equals the model on the dense copies and out's gaps keep their
 * pattern. */
static void test_strided_views_match_naive_model(void **state)
{
    (void)state;
    enum { T = 6, K = 3, H = 7, N = T * K, R = N - 2 };
    for (int d = 0; d < 9; d++) {
        moeperm_dtype dtype = dtypes[d % 3], probs_dtype = dtypes[d / 3];
        size_t es = naive_size(dtype), ps = naive_size(probs_dtype);
        uint64_t rng = 9000u + (uint64_t)d;
        unsigned char x_dense[R * H * 4], p_dense[N * 4], want[T * H * 4];
        int32_t indices_dense[N];
        fill(&rng, dtype, x_dense, R * H, false);
        fill(&rng, probs_dtype, p_dense, N, true);
        naive_permutation(&rng, indices_dense, N);
        naive_unpermute(dtype, x_dense, R, H, indices_dense, T, K, probs_dtype, p_dense, want);

        unsigned char x[(2 + R * (2 * H + 3)) * 4], p[(1 + T * (2 * K + 1)) * 4];
        int32_t indices[3 * N];
        memset(x, 0, sizeof x);
        memset(p, 0, sizeof p);
        for (int r = 0; r < R; r++)
            for (int h = 0; h < H; h++)
                memcpy(x + (2 + r * (2 * H + 3) + 2 * h) * es, x_dense + (r * H + h) * es, es);
        for (int t = 0; t < T; t++)
            for (int k = 0; k < K; k++)
                memcpy(p + (1 + t * (2 * K + 1) + 2 * k) * ps, p_dense + (t * K + k) * ps, ps);
        for (int i = 0; i < N; i++)
            indices[3 * i] = indices_dense[i], indices[3 * i + 1] = indices[3 * i + 2] = -7;
        unsigned char out[(1 + T * 2 * H) * 4];
        memset(out, 0x5a, sizeof out);

        int64_t x_dims[2] = {R, H}, x_strides[2] = {2 * H + 3, 2};
        int64_t i_dims[1] = {N}, i_strides[1] = {3};
        int64_t p_dims[2] = {T, K}, p_strides[2] = {2 * K + 1, 2};
        int64_t o_dims[2] = {T, H}, o_strides[2] = {2 * H, 2};
        moeperm_tensor *tx = moeperm_tensor_create(x_dims, 2, dtype, x_strides, 2, x);
        moeperm_tensor *ti = moeperm_tensor_create(i_dims, 1, MOEPERM_INT32, i_strides, 0, indices);
        moeperm_tensor *tp = moeperm_tensor_create(p_dims, 2, probs_dtype, p_strides, 1, p);
        moeperm_tensor *to = moeperm_tensor_create(o_dims, 2, dtype, o_strides, 1, out);
        uint64_t ws;
        moeperm_executor *plan;
        moeperm_status status =
            moeperm_token_unpermute_get_workspace_size(tx, ti, tp, false, NULL, 0, to, &ws, &plan);
        if (status != MOEPERM_SUCCESS)
            fail_msg("pair %d: status %d: %s", d, status, moeperm_last_error());
        assert_int_equal(moeperm_token_unpermute(NULL, ws, plan, NULL), MOEPERM_SUCCESS);
        unsigned char got[T * H * 4];
        for (int64_t e = 0; e < 1 + T * 2 * H; e++) {
            bool inside = e >= 1 && (e - 1) % 2 == 0;
            if (inside) {
                memcpy(got + (e - 1) / 2 * (int64_t)es, out + e * (int64_t)es, es);
                continue;
            }
            for (size_t b = 0; b < es; b++)
                if (out[e * (int64_t)es + (int64_t)b] != 0x5a)
                    fail_msg("pair %d: element %lld outside the view changed", d, (long long)e);
        }
        expect_equal(3000 + d, dtype, want, got, T, H);
        moeperm_tensor_destroy(tx);
        moeperm_tensor_destroy(ti);
        moeperm_tensor_destroy(tp);
        moeperm_tensor_destroy(to);
    }
}

/* A case large enough for three threads (about 53 MB moved): every thread
 * count gives the same bytes, NaNs included, and the model's bits. */
static void test_thread_counts_1_to_3_give_the_same_bytes(void **state)
{
    (void)state;
    enum { T = 1280, K = 8, H = 2304, N = T * K };
    uint64_t rng = 31;
    uint16_t *x = malloc(sizeof(uint16_t) * N * H), *want = malloc(sizeof(uint16_t) * T * H);
    uint16_t *first = malloc(sizeof(uint16_t) * T * H), *got = malloc(sizeof(uint16_t) * T * H);
    float *p = malloc(sizeof(float) * N);
    int32_t *indices = malloc(sizeof(int32_t) * N);
    assert_true(x && want && first && got && p && indices);
    fill(&rng, MOEPERM_BF16, x, (int64_t)N * H, false);
    fill(&rng, MOEPERM_FLOAT, p, N, true);
    naive_permutation(&rng, indices, N);
    naive_unpermute(MOEPERM_BF16, x, N, H, indices, T, K, MOEPERM_FLOAT, p, want);
    int64_t x_dims[2] = {N, H}, i_dims[1] = {N}, p_dims[2] = {T, K}, o_dims[2] = {T, H};
    moeperm_tensor *tx = moeperm_tensor_create(x_dims, 2, MOEPERM_BF16, NULL, 0, x);
    moeperm_tensor *ti = moeperm_tensor_create(i_dims, 1, MOEPERM_INT32, NULL, 0, indices);
    moeperm_tensor *tp = moeperm_tensor_create(p_dims, 2, MOEPERM_FLOAT, NULL, 0, p);
    moeperm_tensor *to = moeperm_tensor_create(o_dims, 2, MOEPERM_BF16, NULL, 0, got);
    for (int threads = 1; threads <= 3; threads++) {
        uint64_t ws;
        moeperm_executor *plan;
        assert_int_equal(
            moeperm_token_unpermute_get_workspace_size(tx, ti, tp, false, NULL, 0, to, &ws, &plan),
            MOEPERM_SUCCESS);
        memset(got, 0, sizeof(uint16_t) * T * H);
        moeperm_unpermute_run(plan->plan, threads);
        moeperm_executor_destroy(plan);
        expect_equal(4000 + threads, MOEPERM_BF16, want, got, T, H);
        if (threads == 1)
            memcpy(first, got, sizeof(uint16_t) * T * H);
        else if (memcmp(first, got, sizeof(uint16_t) * T * H) != 0)
            fail_msg("%d threads give other bytes than 1 thread", threads);
    }
    moeperm_tensor_destroy(tx);
    moeperm_tensor_destroy(ti);
    moeperm_tensor_destroy(tp);
    moeperm_tensor_destroy(to);
    free(x);
    free(want);
    free(first);
    free(got);
    free(p);
    free(indices);
}

/* Rounding upward and flushing subnormals (FTZ/DAZ) on the calling thread
 * change nothing: subnormal probs still count and products still round to
 * nearest. */
static void test_caller_floating_point_environment_does_not_change_bits(void **state)
{
    (void)state;
#ifdef HAVE_MXCSR
    for (int d = 0; d < 3; d++) {
        uint64_t rng = 123u + (uint64_t)d;
        enum { T = 20, K = 4, H = 33, N = T * K };
        unsigned char x[N * H * 4], p[N * 4], want[T * H * 4], got[T * H * 4];
        int32_t indices[N];
        fill(&rng, dtypes[d], x, N * H, false);
        fill(&rng, dtypes[(d + 1) % 3], p, N, true);
        naive_permutation(&rng, indices, N);
        naive_unpermute(dtypes[d], x, N, H, indices, T, K, dtypes[(d + 1) % 3], p, want);
        unsigned int saved = _mm_getcsr();
        _mm_setcsr((saved & ~0x6000u) | 0x4000u | 0x8040u); /* round up, FTZ, DAZ */
        moeperm_status status =
            call_unpermute(dtypes[d], x, N, H, indices, T, K, dtypes[(d + 1) % 3], p, got);
        unsigned int during = _mm_getcsr();
        _mm_setcsr(saved);
        assert_int_equal(status, MOEPERM_SUCCESS);
        assert_int_equal(during & 0xffc0u, ((saved & ~0x6000u) | 0x4000u | 0x8040u) & 0xffc0u);
        expect_equal(5000 + d, dtypes[d], want, got, T, H);
    }
#else
    skip();
#endif
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_random_cases_match_naive_model_for_every_dtype_pair),
        cmocka_unit_test(test_top_k_512_and_column_blocks_match_naive_model),
        cmocka_unit_test(test_zero_probs_mask_inf_and_nan_rows),
        cmocka_unit_test(test_slot_0_left_out_starts_from_plus_zero),
        cmocka_unit_test(test_products_are_rounded_before_the_sum),
        cmocka_unit_test(test_nan_order_token_nan_wins_and_accumulator_nan_stays),
        cmocka_unit_test(test_dropped_slots_are_skipped),
        cmocka_unit_test(test_strided_views_match_naive_model),
        cmocka_unit_test(test_thread_counts_1_to_3_give_the_same_bytes),
        cmocka_unit_test(test_caller_floating_point_environment_does_not_change_bits),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}

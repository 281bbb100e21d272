/*
 * MoeTokenUnpermute with every prob 1.0 is MoeTokenPermuteGrad: x * 1 is x,
 * so the same slots summed in the same order give the same bits (any NaN
 * equal to any NaN: the multiply makes a signalling NaN quiet where the sum
 * alone may not).  Every dtype pair of tokens and probs, dropped slots
 * included, values drawn to hit the edges.  Without probs the two operators
 * agree byte for byte, NaN payloads too: nothing is multiplied at all.
 *
 * Each case is numbered; its seed is its number (MOEPERM_TEST_CASE=N runs
 * one case alone).
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "call_permute_grad.h"
#include "call_family.h"
#include "naive.h"

static const moeperm_dtype dtypes[3] = {MOEPERM_FLOAT, MOEPERM_FLOAT16, MOEPERM_BF16};

/* Any bits, weighted towards the edges: signed zeros, infinities, NaNs,
 * subnormals, huge values whose sums overflow. */
static uint32_t draw(uint64_t *rng, moeperm_dtype dtype)
{
    uint64_t r = naive_rand(rng);
    uint32_t bits = (uint32_t)(r >> 32);
    switch (r % 8) {
    case 0:
        return dtype == MOEPERM_FLOAT ? bits : bits & 0xffffu; /* anything */
    case 1:
        return dtype == MOEPERM_FLOAT ? (bits & 0x807fffffu) : (bits & 0x807fu); /* subnormal */
    case 2: /* near the top of the range */
        return dtype == MOEPERM_FLOAT ? (bits & 0x80ffffffu) | 0x7e000000u
               : dtype == MOEPERM_BF16 ? (bits & 0x807fu) | 0x7f00u
                                       : (bits & 0x83ffu) | 0x7800u;
    default: /* ordinary */
        return dtype == MOEPERM_FLOAT ? (bits & 0x807fffffu) | 0x3f000000u
                                      : (bits & 0x80ffu) | (dtype == MOEPERM_BF16 ? 0x3f00u : 0x3c00u);
    }
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

static void fill_ones(moeperm_dtype dtype, void *buf, int64_t n)
{
    for (int64_t i = 0; i < n; i++) {
        if (dtype == MOEPERM_FLOAT)
            ((float *)buf)[i] = 1.0f;
        else
            ((uint16_t *)buf)[i] = dtype == MOEPERM_BF16 ? 0x3f80 : 0x3c00;
    }
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
    fill(&rng, dtype, x, rows * hidden);
    naive_permutation(&rng, indices, count);
    fill_ones(probs_dtype, p, count);
    memset(got, 0xa5, (size_t)(tokens * hidden) * es);

    moeperm_status status =
        call_permute_grad(dtype, x, rows, hidden, indices, tokens, top_k, want);
    if (status != MOEPERM_SUCCESS)
        fail_msg("case %d: permute grad: status %d: %s", number, status, moeperm_last_error());
    status = call_unpermute(dtype, x, rows, hidden, indices, tokens, top_k, probs_dtype,
                            probs ? p : NULL, got);
    if (status != MOEPERM_SUCCESS)
        fail_msg("case %d: unpermute: status %d: %s", number, status, moeperm_last_error());
    int64_t first = -1;
    bool same = probs ? naive_equal(dtype, want, got, tokens * hidden, &first)
                      : memcmp(want, got, (size_t)(tokens * hidden) * es) == 0;
    if (!same)
        fail_msg("case %d (dtype %d, probs %d, T=%lld K=%lld H=%lld R=%lld): element %lld "
                 "differs from MoeTokenPermuteGrad",
                 number, dtype, probs ? (int)probs_dtype : -1, (long long)tokens,
                 (long long)top_k, (long long)hidden, (long long)rows, (long long)first);
    free(x);
    free(indices);
    free(p);
    free(want);
    free(got);
}

static void test_unit_probs_give_permute_grad_bits_for_every_dtype_pair(void **state)
{
    (void)state;
    const char *only = getenv("MOEPERM_TEST_CASE");
    for (int number = 0; number < 450; number++) {
        if (only && atoi(only) != number)
            continue;
        uint64_t rng = (uint64_t)number * 6007u + 13;
        int64_t tokens = 1 + (int64_t)(naive_rand(&rng) % 30);
        int64_t top_k = 1 + (int64_t)(naive_rand(&rng) % 9);
        int64_t hidden = 1 + (int64_t)(naive_rand(&rng) % 80);
        int64_t count = tokens * top_k;
        int64_t rows = number % 2 ? count : (int64_t)(naive_rand(&rng) % (uint64_t)(count + 1));
        check_case(number, dtypes[number % 3], dtypes[(number / 3) % 3], tokens, top_k, hidden,
                   rows, true);
    }
}

static void test_no_probs_gives_permute_grad_bytes_with_top_k_1(void **state)
{
    (void)state;
    for (int number = 0; number < 60; number++) {
        uint64_t rng = (uint64_t)number + 500;
        int64_t tokens = 1 + (int64_t)(naive_rand(&rng) % 50);
        int64_t hidden = 1 + (int64_t)(naive_rand(&rng) % 70);
        int64_t rows = number % 2 ? tokens : (int64_t)(naive_rand(&rng) % (uint64_t)(tokens + 1));
        check_case(5000 + number, dtypes[number % 3], MOEPERM_FLOAT, tokens, 1, hidden, rows,
                   false);
    }
}

static void test_large_hidden_sizes_give_permute_grad_bits(void **state)
{
    (void)state;
    for (int d = 0; d < 3; d++) {
        check_case(6000 + d, dtypes[d], dtypes[(d + 1) % 3], 5, 8, 4099, 37, true);
        check_case(6010 + d, dtypes[d], dtypes[d], 3, 512, 33, 1536, true);
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_unit_probs_give_permute_grad_bits_for_every_dtype_pair),
        cmocka_unit_test(test_no_probs_gives_permute_grad_bytes_with_top_k_1),
        cmocka_unit_test(test_large_hidden_sizes_give_permute_grad_bits),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}

/*
 * test_permute_grad_sizes_above_2_31.c - the operator on a permuted_output_grad of more
 * than 2^31 elements (slow suite; about 5.4 GB of memory).
 *
 * 65536 rows x 32776 columns of bf16 is 2^31 + 2^21 elements (4.3 GB): the
 * rows from 65521 on start beyond element 2^31, so an offset computed in
 * int, or in int32 times int32, lands on the wrong row (TransformerEngine's
 * unpermute had exactly this bug).  Every row holds different
 * values, so a wrong row shows as wrong sums.  32776 = 16 * 2048 + 8 also
 * leaves a column tail after the kernel's blocks and vectors.
 *
 * The naive model runs only for sampled tokens: every token that reads a
 * row past 2^31 elements, the first and the last token, and 64 others.
 * Runs with 1 and 2 threads must agree bit for bit over the whole output.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#ifdef _OPENMP
#include <omp.h>
#endif

#include "call_permute_grad.h"
#include "naive.h"
#include "naive_permute_grad.h"

#define TOKENS INT64_C(8192)
#define TOP_K INT64_C(8)
#define ROWS (TOKENS * TOP_K)
#define HIDDEN INT64_C(32776)

static void set_threads(int n)
{
#ifdef _OPENMP
    omp_set_num_threads(n);
#else
    (void)n;
#endif
}

/* Checks token t of out against the naive loop over that token alone. */
static void expect_token(const uint16_t *grad, const int32_t *indices, const uint16_t *out,
                         int64_t t, uint16_t *scratch)
{
    naive_permute_grad(MOEPERM_BF16, grad, ROWS, HIDDEN, indices + t * TOP_K, 1, TOP_K, scratch);
    int64_t first = -1;
    if (!naive_equal(MOEPERM_BF16, scratch, out + t * HIDDEN, HIDDEN, &first))
        fail_msg("token %lld column %lld: 0x%04x, the naive loop says 0x%04x", (long long)t,
                 (long long)first, out[t * HIDDEN + first], scratch[first]);
}

static void test_rows_past_2_31_elements_sum_the_right_rows_with_1_and_2_threads(void **state)
{
    (void)state;
    size_t grad_elems = (size_t)(ROWS * HIDDEN), out_elems = (size_t)(TOKENS * HIDDEN);
    assert_true(grad_elems > (UINT64_C(1) << 31));
    uint16_t *grad = malloc(grad_elems * sizeof *grad);
    uint16_t *out = malloc(out_elems * sizeof *out);
    uint16_t *first_run = malloc(out_elems * sizeof *first_run);
    int32_t *indices = malloc((size_t)ROWS * sizeof *indices);
    uint16_t *scratch = malloc((size_t)HIDDEN * sizeof *scratch);
    if (!grad || !out || !first_run || !indices || !scratch)
        skip(); /* not enough memory here: say so instead of failing */

    /* Four bf16 values per draw, each of magnitude in [0.5, 1) with a
     * random sign and mantissa: sums of 8 stay finite and every row's
     * values differ from every other row's. */
    uint64_t seed = 0x2f31u;
    uint64_t *words = (uint64_t *)(void *)grad;
    for (size_t i = 0; i < grad_elems / 4; i++)
        words[i] = (naive_rand(&seed) & UINT64_C(0x807f807f807f807f)) |
                   UINT64_C(0x3f003f003f003f00);
    naive_permutation(&seed, indices, ROWS);

    /* The sample: tokens reading a row past 2^31 elements, then others. */
    int64_t sample[128], count = 0;
    int64_t far_row = (INT64_C(1) << 31) / HIDDEN + 1;
    for (int64_t i = 0; i < ROWS && count < 64; i++)
        if (indices[i] >= far_row && (count == 0 || sample[count - 1] != i / TOP_K))
            sample[count++] = i / TOP_K;
    assert_true(count >= 8); /* 15 rows start past 2^31 elements */
    sample[count++] = 0;
    sample[count++] = TOKENS - 1;
    while (count < 128)
        sample[count++] = (int64_t)(naive_rand(&seed) % (uint64_t)TOKENS);

    /* 1 thread, then 2: each run matches the naive loop on the samples, and
     * the two runs are identical everywhere. */
    for (int threads = 1; threads <= 2; threads++) {
        set_threads(threads);
        memset(out, 0xff, out_elems * sizeof *out);
        assert_int_equal(call_permute_grad(MOEPERM_BF16, grad, ROWS, HIDDEN, indices, TOKENS,
                                           TOP_K, out),
                         MOEPERM_SUCCESS);
        for (int64_t i = 0; i < count; i++)
            expect_token(grad, indices, out, sample[i], scratch);
        if (threads == 1)
            memcpy(first_run, out, out_elems * sizeof *out);
        else
            assert_memory_equal(first_run, out, out_elems * sizeof *out);
    }

    free(grad);
    free(out);
    free(first_run);
    free(indices);
    free(scratch);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_rows_past_2_31_elements_sum_the_right_rows_with_1_and_2_threads),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}

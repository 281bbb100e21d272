/*
 * Thread count does not change the bits: one case large enough to be split
 * over threads runs with 1, 2 and 3 OpenMP threads and again with 2, and
 * every run must equal the first byte for byte (NaNs included: the same
 * code on the same inputs must give the same NaN bits too).
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

#include "call.h"
#include "naive.h"

static void test_one_two_and_three_threads_give_identical_bits(void **state)
{
    (void)state;
#ifndef _OPENMP
    skip();
#else
    enum { T = 301, K = 8, H = 700 };
    const moeperm_dtype dtypes[3] = {MOEPERM_FLOAT, MOEPERM_FLOAT16, MOEPERM_BF16};
    int32_t *indices = malloc(sizeof(int32_t) * T * K);
    uint32_t *grad = malloc(sizeof(uint32_t) * T * K * H);
    uint32_t *first = malloc(sizeof(uint32_t) * T * H), *again = malloc(sizeof(uint32_t) * T * H);
    assert_true(indices && grad && first && again);
    uint64_t rng = 99;
    naive_permutation(&rng, indices, T * K);
    for (int64_t i = 0; i < (int64_t)T * K * H; i++)
        grad[i] = (uint32_t)naive_rand(&rng); /* any bits: inf and NaN included */
    int max_threads = omp_get_max_threads();
    for (int d = 0; d < 3; d++) {
        size_t bytes = naive_size(dtypes[d]) * T * H;
        omp_set_num_threads(1);
        assert_int_equal(call_permute_grad(dtypes[d], grad, T * K - 5, H, indices, T, K, first), 0);
        const int counts[] = {2, 3, 2, 1};
        for (int i = 0; i < 4; i++) {
            omp_set_num_threads(counts[i]);
            memset(again, 0, bytes);
            assert_int_equal(
                call_permute_grad(dtypes[d], grad, T * K - 5, H, indices, T, K, again), 0);
            if (memcmp(first, again, bytes) != 0)
                fail_msg("dtype %d: %d threads differ from 1 thread", dtypes[d], counts[i]);
        }
    }
    omp_set_num_threads(max_threads);
    free(indices);
    free(grad);
    free(first);
    free(again);
#endif
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_one_two_and_three_threads_give_identical_bits),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}

/*
 * Thread count does not change the bits: one case large enough to be split
 * over 2 or 3 threads runs with 1, 2 and 3 OpenMP threads and again with 2, and
 * every run must equal the first byte for byte (NaNs included: the same
 * code on the same inputs must give the same NaN bits too).
 */
#include <fenv.h>
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
#include "permute_grad/permute_grad.h"
#include "naive.h"
#include "naive_permute_grad.h"

#if defined(__x86_64__) || (defined(__i386__) && defined(__SSE2__))
#include <xmmintrin.h>
#define HAVE_MXCSR 1
#endif

/* The caller's floating-point environment does not reach the arithmetic:
 * a framework that rounds upward, flushes subnormals (FTZ/DAZ, as
 * torch.set_flush_denormal does) or unmasks the invalid exception still gets
 * spec 2's bits, on the calling thread and on OpenMP workers created while
 * that environment is in force (a worker inherits it from its creator). */
static void test_caller_floating_point_environment_does_not_change_bits(void **state)
{
    (void)state;
    /* Large enough (48 MiB moved) for the kernel to take two threads. */
    enum { T = 2048, K = 2, H = 2048 };
    const moeperm_dtype dtypes[2] = {MOEPERM_FLOAT, MOEPERM_BF16};
    int32_t *indices = malloc(sizeof(int32_t) * T * K);
    uint32_t *grad = malloc(sizeof(uint32_t) * T * K * H);
    uint32_t *expected = malloc(sizeof(uint32_t) * T * H), *actual = malloc(sizeof(uint32_t) * T * H);
    assert_true(indices && grad && expected && actual);
    for (int32_t i = 0; i < T * K; i++)
        indices[i] = i; /* token t sums rows 2t and 2t+1 */
#ifdef _OPENMP
    int max_threads = omp_get_max_threads();
#endif
    for (int d = 0; d < 2; d++) {
        bool f32 = dtypes[d] == MOEPERM_FLOAT;
        for (int64_t r = 0; r < T * K; r++) {
            for (int64_t h = 0; h < H; h++) {
                uint32_t v;
                switch (h % 4) {
                case 0: /* 1 + 2^-25: 1 to nearest, 1 + ulp upward */
                    v = r % 2 ? 0x33000000u : 0x3f800000u;
                    break;
                case 1: /* subnormal + subnormal: zero under FTZ/DAZ */
                    v = f32 ? 0x00000005u : 0x00050000u;
                    break;
                case 2: /* inf + -inf: the invalid exception */
                    v = r % 2 ? 0xff800000u : 0x7f800000u;
                    break;
                default:
                    v = 0x3e000000u + (uint32_t)(r * 7 + h);
                }
                if (f32)
                    grad[r * H + h] = v;
                else
                    ((uint16_t *)grad)[r * H + h] = (uint16_t)(v >> 16);
            }
        }
        size_t bytes = naive_size(dtypes[d]) * T * H;
        naive_permute_grad(dtypes[d], grad, T * K, H, indices, T, K, expected);
        for (int threads = 1; threads <= 2; threads++) {
#ifdef _OPENMP
            omp_set_num_threads(threads);
#endif
            memset(actual, 0, bytes);
#ifdef HAVE_MXCSR
            unsigned csr = _mm_getcsr();
            /* FTZ (bit 15), DAZ (bit 6), invalid unmasked (bit 7 clear) */
            _mm_setcsr((csr | 0x8040u) & ~0x0080u);
#endif
            fesetround(FE_UPWARD);
            moeperm_status status =
                call_permute_grad(dtypes[d], grad, T * K, H, indices, T, K, actual);
            fesetround(FE_TONEAREST);
#ifdef HAVE_MXCSR
            _mm_setcsr(csr);
#endif
            assert_int_equal(status, MOEPERM_SUCCESS);
            int64_t first = -1;
            if (!naive_equal(dtypes[d], expected, actual, (int64_t)T * H, &first))
                fail_msg("dtype %d, %d thread(s): element %lld differs under the caller's "
                         "rounding mode / FTZ / DAZ", dtypes[d], threads, (long long)first);
        }
    }
#ifdef _OPENMP
    omp_set_num_threads(max_threads);
#endif
    free(indices);
    free(grad);
    free(expected);
    free(actual);
}

#ifdef _OPENMP
/* The thread team the kernel would use for this case with 3 threads. */
static int team_for(moeperm_dtype dtype, void *grad, int64_t rows, int64_t hidden,
                    int32_t *indices, int64_t tokens, int64_t top_k, void *out)
{
    int64_t gd[2] = {rows, hidden}, id[1] = {tokens * top_k}, od[2] = {tokens, hidden};
    moeperm_tensor *g = moeperm_tensor_create(gd, 2, dtype, NULL, 0, grad);
    moeperm_tensor *ix = moeperm_tensor_create(id, 1, MOEPERM_INT32, NULL, 0, indices);
    moeperm_tensor *o = moeperm_tensor_create(od, 2, dtype, NULL, 0, out);
    uint64_t ws;
    moeperm_executor *plan = NULL;
    assert_int_equal(
        moeperm_token_permute_grad_get_workspace_size(g, ix, top_k, false, o, &ws, &plan), 0);
    int team =
        moeperm_sum_threads(&((const struct moeperm_permute_grad_plan *)plan->plan)->sum, 3);
    moeperm_executor_destroy(plan);
    moeperm_tensor_destroy(g);
    moeperm_tensor_destroy(ix);
    moeperm_tensor_destroy(o);
    return team;
}
#endif

static void test_one_two_and_three_threads_give_identical_bits(void **state)
{
    (void)state;
#ifndef _OPENMP
    skip();
#else
    /* Large enough that the kernel takes 3 threads for fp32 and 2 for the
     * 16-bit types (it sizes the team by the bytes moved); checked below so
     * the test cannot quietly become a one-thread test. */
    enum { T = 1024, K = 8, H = 2048 };
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
        assert_int_equal(team_for(dtypes[d], grad, T * K - 5, H, indices, T, K, first),
                         dtypes[d] == MOEPERM_FLOAT ? 3 : 2);
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
        /* first: the OpenMP workers must be created inside its environment */
        cmocka_unit_test(test_caller_floating_point_environment_does_not_change_bits),
        cmocka_unit_test(test_one_two_and_three_threads_give_identical_bits),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}

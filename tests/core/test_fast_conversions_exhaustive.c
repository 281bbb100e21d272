/*
 * The x86 fast paths' narrowings (AVX2 and AVX-512) against fp.h over
 * every one of the 2^32 binary32 patterns, for bf16 (in both layouts the
 * kernels use: even and odd columns in two vectors, and columns in order)
 * and for fp16 (the widenings, 2^16 each, are in
 * tests/core/test_fast_paths.c).  fp.h is itself checked over all 2^32
 * patterns against the tests' independent model in
 * test_conversions_exhaustive.c, so together they tie the vector code to
 * docs/arithmetic.md.  Slow suite: about two minutes on two cores.  Skips,
 * saying why, on a CPU or in a build without the fast path.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

#include <cmocka.h>

#include "core/fp.h"
#include "sum/sum.h"
#include "sum/sum_x86.h"

#ifdef MOEPERM_HAVE_X86_PATH

enum { CHUNK = 1 << 12, CHUNKS = 1 << 20 };

typedef void narrowing(const float *src, uint16_t *dst, size_t n);

/* Checks patterns [hi << 12, (hi + 1) << 12) for every hi; *ok says
 * whether all matched, *first_bad names a differing pattern. */
static void check_all(bool bf16, narrowing *narrow, bool *ok, uint32_t *first_bad)
{
    bool all = true;
    uint32_t bad = 0;
#ifdef _OPENMP
#pragma omp parallel for schedule(dynamic, 1024) reduction(&& : all) reduction(max : bad)
#endif
    for (int64_t hi = 0; hi < CHUNKS; hi++) {
        float src[CHUNK];
        uint16_t dst[CHUNK];
        for (uint32_t lo = 0; lo < CHUNK; lo++)
            src[lo] = fp_from_bits((uint32_t)hi << 12 | lo);
        narrow(src, dst, CHUNK);
        for (uint32_t lo = 0; lo < CHUNK; lo++) {
            uint16_t want = bf16 ? fp_float_to_bf16(src[lo]) : fp_float_to_fp16(src[lo]);
            if (dst[lo] != want) {
                all = false;
                uint32_t pattern = (uint32_t)hi << 12 | lo;
                bad = pattern > bad ? pattern : bad;
                break;
            }
        }
    }
    *ok = all;
    *first_bad = bad;
}

/* to: 0 bf16 (even and odd columns), 1 bf16 (columns in order), 2 fp16 */
static void check_set(int to, bool avx512)
{
    if (!moeperm_isa_supported(avx512 ? MOEPERM_ISA_X86_AVX512 : MOEPERM_ISA_X86_AVX2)) {
        print_message("skipped: this CPU has no %s\n",
                      avx512 ? "AVX-512 F, BW, DQ and VL" : "AVX2 and F16C");
        skip();
    }
    const moeperm_x86_kernels *k = avx512 ? &moeperm_x86_avx512 : &moeperm_x86_avx2;
    narrowing *narrow = to == 0   ? k->float_to_bf16
                        : to == 1 ? k->float_to_bf16_columns
                                  : k->float_to_fp16;
    bool ok;
    uint32_t bad;
    check_all(to < 2, narrow, &ok, &bad);
    if (!ok)
        fail_msg("float 0x%08x -> %s: the %s narrowing differs from fp.h", bad,
                 to == 0 ? "bf16" : to == 1 ? "bf16 (columns in order)" : "fp16", k->name);
}

static void test_every_float_narrows_to_bf16_like_fp_h_avx2(void **state)
{
    (void)state;
    check_set(0, false);
}

static void test_every_float_narrows_to_bf16_columns_like_fp_h_avx2(void **state)
{
    (void)state;
    check_set(1, false);
}

static void test_every_float_narrows_to_fp16_like_fp_h_avx2(void **state)
{
    (void)state;
    check_set(2, false);
}

static void test_every_float_narrows_to_bf16_like_fp_h_avx512(void **state)
{
    (void)state;
    check_set(0, true);
}

static void test_every_float_narrows_to_bf16_columns_like_fp_h_avx512(void **state)
{
    (void)state;
    check_set(1, true);
}

static void test_every_float_narrows_to_fp16_like_fp_h_avx512(void **state)
{
    (void)state;
    check_set(2, true);
}

#else

static void test_build_without_the_x86_path_skips(void **state)
{
    (void)state;
    print_message("skipped: this build has no x86 fast path, so no vector narrowing to check\n");
    skip();
}

#endif

int main(void)
{
    const struct CMUnitTest tests[] = {
#ifdef MOEPERM_HAVE_X86_PATH
        cmocka_unit_test(test_every_float_narrows_to_bf16_like_fp_h_avx2),
        cmocka_unit_test(test_every_float_narrows_to_bf16_columns_like_fp_h_avx2),
        cmocka_unit_test(test_every_float_narrows_to_fp16_like_fp_h_avx2),
        cmocka_unit_test(test_every_float_narrows_to_bf16_like_fp_h_avx512),
        cmocka_unit_test(test_every_float_narrows_to_bf16_columns_like_fp_h_avx512),
        cmocka_unit_test(test_every_float_narrows_to_fp16_like_fp_h_avx512),
#else
        cmocka_unit_test(test_build_without_the_x86_path_skips),
#endif
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}

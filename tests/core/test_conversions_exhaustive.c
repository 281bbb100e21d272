/*
 * Conversions over every input: all 65536 bf16 and fp16 patterns widen
 * exactly, and all 2^32 binary32 patterns narrow to bf16 and fp16 exactly
 * as the tests' double-arithmetic model (naive.c) says.  Where the CPU has
 * F16C, the hardware's vcvtps2ph / vcvtph2ps are a second, independent
 * oracle for fp16 (bf16 has none: AVX-512 vcvtneps2bf16 flushes
 * subnormals).
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <cmocka.h>

#include "core/internal.h"
#include "naive.h"

#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
#include <immintrin.h>
#define HAVE_X86 1
__attribute__((target("f16c"))) static uint16_t hw_float_to_fp16(float value)
{
    return (uint16_t)_cvtss_sh(value, _MM_FROUND_TO_NEAREST_INT);
}
__attribute__((target("f16c"))) static float hw_fp16_to_float(uint16_t bits)
{
    return _cvtsh_ss(bits);
}
static int have_f16c(void)
{
    __builtin_cpu_init();
    return __builtin_cpu_supports("f16c");
}
#else
#define HAVE_X86 0
#endif

/* Loops over all 2^32 patterns in parallel; returns the number of
 * mismatches and the smallest mismatching pattern in *first. */
typedef uint16_t (*narrow_fn)(float);

static uint64_t count_narrow_mismatches(narrow_fn library, narrow_fn oracle, uint32_t *first)
{
    uint64_t mismatches = 0;
    uint32_t lowest = UINT32_MAX;
#ifdef _OPENMP
#pragma omp parallel for schedule(static) reduction(+ : mismatches) reduction(min : lowest)
#endif
    for (int64_t i = 0; i <= (int64_t)UINT32_MAX; i++) {
        float value = naive_float((uint32_t)i);
        if (library(value) != oracle(value)) {
            mismatches++;
            if ((uint32_t)i < lowest)
                lowest = (uint32_t)i;
        }
    }
    *first = lowest;
    return mismatches;
}

static void report(const char *what, uint64_t mismatches, uint32_t first, narrow_fn library,
                   narrow_fn oracle)
{
    if (mismatches)
        fprintf(stderr, "%s: %llu mismatches, first at 0x%08x: library 0x%04x, oracle 0x%04x\n",
                what, (unsigned long long)mismatches, first, library(naive_float(first)),
                oracle(naive_float(first)));
}

static uint16_t lib_bf16(float v)
{
    return moeperm_float_to_bf16(v);
}
static uint16_t lib_fp16(float v)
{
    return moeperm_float_to_fp16(v);
}

static void test_every_float_narrows_to_bf16_as_the_double_model(void **state)
{
    (void)state;
    uint32_t first;
    uint64_t n = count_narrow_mismatches(lib_bf16, naive_float_to_bf16, &first);
    report("float->bf16", n, first, lib_bf16, naive_float_to_bf16);
    assert_int_equal(n, 0);
}

static void test_every_float_narrows_to_fp16_as_the_double_model(void **state)
{
    (void)state;
    uint32_t first;
    uint64_t n = count_narrow_mismatches(lib_fp16, naive_float_to_fp16, &first);
    report("float->fp16", n, first, lib_fp16, naive_float_to_fp16);
    assert_int_equal(n, 0);
}

static void test_every_float_narrows_to_fp16_as_f16c_hardware(void **state)
{
    (void)state;
#if HAVE_X86
    if (!have_f16c())
        skip();
    uint32_t first;
    uint64_t n = count_narrow_mismatches(lib_fp16, hw_float_to_fp16, &first);
    report("float->fp16 vs F16C", n, first, lib_fp16, hw_float_to_fp16);
    assert_int_equal(n, 0);
#else
    skip();
#endif
}

static void test_every_bf16_and_fp16_widens_exactly(void **state)
{
    (void)state;
    for (uint32_t h = 0; h <= 0xffff; h++) {
        uint32_t want = naive_bits(naive_bf16_to_float((uint16_t)h));
        uint32_t got = naive_bits(moeperm_bf16_to_float((uint16_t)h));
        if (want != got)
            fail_msg("bf16 0x%04x widens to 0x%08x, expected 0x%08x", h, got, want);
        want = naive_bits(naive_fp16_to_float((uint16_t)h));
        got = naive_bits(moeperm_fp16_to_float((uint16_t)h));
        if (want != got)
            fail_msg("fp16 0x%04x widens to 0x%08x, expected 0x%08x", h, got, want);
#if HAVE_X86
        if (have_f16c()) {
            want = naive_bits(hw_fp16_to_float((uint16_t)h));
            if (want != got)
                fail_msg("fp16 0x%04x widens to 0x%08x, F16C gives 0x%08x", h, got, want);
        }
#endif
    }
}

static void test_narrowing_a_widened_value_gives_it_back(void **state)
{
    (void)state;
    for (uint32_t h = 0; h <= 0xffff; h++) {
        int bf16_nan = (h & 0x7fff) > 0x7f80, fp16_nan = (h & 0x7fff) > 0x7c00;
        uint16_t bf16_want = (uint16_t)(bf16_nan ? h | 0x40 : h);
        uint16_t fp16_want = (uint16_t)(fp16_nan ? h | 0x200 : h);
        assert_int_equal(moeperm_float_to_bf16(moeperm_bf16_to_float((uint16_t)h)), bf16_want);
        assert_int_equal(moeperm_float_to_fp16(moeperm_fp16_to_float((uint16_t)h)), fp16_want);
    }
}

/* The bulk function must give the scalar bits for every pair of dtypes. */
static void test_bulk_convert_matches_scalar_for_every_dtype_pair(void **state)
{
    (void)state;
    enum { N = 1 << 16 };
    static uint32_t f32[N];
    static uint16_t h16[N], out16[N];
    static uint32_t out32[N];
    for (uint32_t i = 0; i < N; i++) {
        f32[i] = i * 0x00010001u ^ (i << 7);
        h16[i] = (uint16_t)i;
    }
    assert_int_equal(moeperm_convert(f32, MOEPERM_FLOAT, out16, MOEPERM_BF16, N), 0);
    for (uint32_t i = 0; i < N; i++)
        assert_int_equal(out16[i], naive_float_to_bf16(naive_float(f32[i])));
    assert_int_equal(moeperm_convert(f32, MOEPERM_FLOAT, out16, MOEPERM_FLOAT16, N), 0);
    for (uint32_t i = 0; i < N; i++)
        assert_int_equal(out16[i], naive_float_to_fp16(naive_float(f32[i])));
    assert_int_equal(moeperm_convert(h16, MOEPERM_BF16, out32, MOEPERM_FLOAT, N), 0);
    for (uint32_t i = 0; i < N; i++)
        assert_int_equal(out32[i], naive_bits(naive_bf16_to_float(h16[i])));
    assert_int_equal(moeperm_convert(h16, MOEPERM_FLOAT16, out32, MOEPERM_FLOAT, N), 0);
    for (uint32_t i = 0; i < N; i++)
        assert_int_equal(out32[i], naive_bits(naive_fp16_to_float(h16[i])));
    assert_int_equal(moeperm_convert(h16, MOEPERM_FLOAT16, out16, MOEPERM_BF16, N), 0);
    for (uint32_t i = 0; i < N; i++)
        assert_int_equal(out16[i], naive_float_to_bf16(naive_fp16_to_float(h16[i])));
    assert_int_equal(moeperm_convert(h16, MOEPERM_BF16, out16, MOEPERM_FLOAT16, N), 0);
    for (uint32_t i = 0; i < N; i++)
        assert_int_equal(out16[i], naive_float_to_fp16(naive_bf16_to_float(h16[i])));
    assert_int_equal(moeperm_convert(h16, MOEPERM_BF16, out16, MOEPERM_BF16, N), 0);
    assert_memory_equal(out16, h16, sizeof h16);
}

static void test_bulk_convert_refuses_other_dtypes_untouched(void **state)
{
    (void)state;
    uint16_t src[4] = {1, 2, 3, 4}, dst[4] = {9, 9, 9, 9};
    assert_int_equal(moeperm_convert(src, MOEPERM_INT32, dst, MOEPERM_BF16, 4),
                     MOEPERM_ERR_PARAM_INVALID);
    assert_non_null(strstr(moeperm_last_error(), "src_dtype 3"));
    assert_int_equal(moeperm_convert(src, MOEPERM_BF16, dst, (moeperm_dtype)9, 4),
                     MOEPERM_ERR_PARAM_INVALID);
    assert_non_null(strstr(moeperm_last_error(), "dst_dtype 9"));
    assert_int_equal(moeperm_convert(NULL, MOEPERM_BF16, dst, MOEPERM_BF16, 4),
                     MOEPERM_ERR_PARAM_NULLPTR);
    assert_int_equal(moeperm_convert(src, MOEPERM_BF16, NULL, MOEPERM_BF16, 4),
                     MOEPERM_ERR_PARAM_NULLPTR);
    for (int i = 0; i < 4; i++)
        assert_int_equal(dst[i], 9);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_every_bf16_and_fp16_widens_exactly),
        cmocka_unit_test(test_narrowing_a_widened_value_gives_it_back),
        cmocka_unit_test(test_bulk_convert_matches_scalar_for_every_dtype_pair),
        cmocka_unit_test(test_bulk_convert_refuses_other_dtypes_untouched),
        cmocka_unit_test(test_every_float_narrows_to_bf16_as_the_double_model),
        cmocka_unit_test(test_every_float_narrows_to_fp16_as_the_double_model),
        cmocka_unit_test(test_every_float_narrows_to_fp16_as_f16c_hardware),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}

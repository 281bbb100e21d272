/*
 * The generator's row loops (x86/golden_rows_template.h), built for every
 * instruction set this CPU runs, give every element the bits the
 * element-by-element path gives it (golden_element_bits(), which the
 * corpus and its numpy rebuild hold to the documented recipe): each kind
 * the rows make, each dtype, rows shorter than a block, across block
 * edges and longer, at rows far into a tensor.  The corpus tests run the
 * best build and the portable one; this one reaches the others too.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include <moeperm/golden.h>
#include <moeperm/moeperm.h>

#include "golden/common/prng.h"
#include "golden/generate/rows.h"
#include "golden/generate/values.h"

static uint32_t stored(moeperm_dtype dtype, const void *row, int64_t h)
{
    switch (moeperm_dtype_size(dtype)) {
    case 4: {
        uint32_t w;
        memcpy(&w, (const uint8_t *)row + 4 * h, 4);
        return w;
    }
    case 2: {
        uint16_t half;
        memcpy(&half, (const uint8_t *)row + 2 * h, 2);
        return half;
    }
    default:
        return ((const uint8_t *)row)[h];
    }
}

static void check_isa(moeperm_isa isa)
{
    if (moeperm_isa_choose(isa) != MOEPERM_SUCCESS) {
        print_message("%s: not on this CPU\n", moeperm_isa_name(isa));
        skip(); /* reported as skipped, not as a pass */
    }
    struct {
        moeperm_dtype dtype;
        moeperm_golden_values values;
    } const kinds[] = {
        {MOEPERM_BF16, MOEPERM_GOLDEN_VALUES_NORMAL},
        {MOEPERM_FLOAT16, MOEPERM_GOLDEN_VALUES_NORMAL},
        {MOEPERM_FLOAT, MOEPERM_GOLDEN_VALUES_NORMAL},
        {MOEPERM_BF16, MOEPERM_GOLDEN_VALUES_BITS},
        {MOEPERM_FLOAT16, MOEPERM_GOLDEN_VALUES_BITS},
        {MOEPERM_FLOAT, MOEPERM_GOLDEN_VALUES_BITS},
        {MOEPERM_BF16, MOEPERM_GOLDEN_VALUES_NEGZERO},
        {MOEPERM_FLOAT, MOEPERM_GOLDEN_VALUES_NEGZERO},
        {MOEPERM_INT8, MOEPERM_GOLDEN_VALUES_NORMAL},
    };
    const int64_t hiddens[] = {1, 7, 255, 256, 257, 1000, 4099};
    const int64_t top_k = 3, t = 70001, k = 2;
    void *row = malloc(4099 * 4);
    assert_non_null(row);
    for (size_t i = 0; i < sizeof kinds / sizeof kinds[0]; i++) {
        for (size_t j = 0; j < sizeof hiddens / sizeof hiddens[0]; j++) {
            int64_t hidden = hiddens[j];
            golden_generator g = {
                .f = golden_format_of(kinds[i].dtype),
                .values = kinds[i].values,
                .top_k = top_k,
                .hidden = hidden,
                .value_key = prng_stream_key(11 + i, PRNG_STREAM_VALUES),
                .rows = golden_row_kind_of(kinds[i].dtype, kinds[i].values),
                .row = golden_row_loops(),
            };
            assert_int_not_equal(g.rows, ROW_ELEMENTS);
            uint64_t n = (uint64_t)(t * top_k + k) * (uint64_t)hidden * 2;
            g.row(g.rows, kinds[i].dtype, g.value_key, n, hidden, row);
            for (int64_t h = 0; h < hidden; h++) {
                uint32_t want = golden_element_bits(&g, t, k, h);
                uint32_t got = stored(kinds[i].dtype, row, h);
                if (got != want)
                    fail_msg("%s, %s %s, hidden %lld, column %lld: 0x%x, want 0x%x",
                             moeperm_isa_name(isa), moeperm_dtype_name(kinds[i].dtype),
                             moeperm_golden_values_name(kinds[i].values), (long long)hidden,
                             (long long)h, got, want);
            }
        }
    }
    free(row);
    assert_int_equal(moeperm_isa_choose(MOEPERM_ISA_AUTO), MOEPERM_SUCCESS);
}

static void test_portable_rows_match_the_elements(void **state)
{
    (void)state;
    check_isa(MOEPERM_ISA_PORTABLE);
}

static void test_avx2_rows_match_the_elements(void **state)
{
    (void)state;
    check_isa(MOEPERM_ISA_X86_AVX2);
}

static void test_avx512_rows_match_the_elements(void **state)
{
    (void)state;
    check_isa(MOEPERM_ISA_X86_AVX512);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_portable_rows_match_the_elements),
        cmocka_unit_test(test_avx2_rows_match_the_elements),
        cmocka_unit_test(test_avx512_rows_match_the_elements),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}

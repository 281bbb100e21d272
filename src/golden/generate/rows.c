/*
 * rows.c - the row loops' portable build, and the choice among the builds
 * (rows.h): the instruction set libmoeperm's runs use.
 */
#include "golden/generate/rows.h"

#include <stddef.h>

row_kind golden_row_kind_of(moeperm_dtype dtype, moeperm_golden_values values)
{
    if (dtype == MOEPERM_INT8)
        return ROW_INT8;
    switch (values) {
    case MOEPERM_GOLDEN_VALUES_NORMAL:
        return ROW_NORMAL;
    case MOEPERM_GOLDEN_VALUES_BITS:
        return ROW_BITS;
    case MOEPERM_GOLDEN_VALUES_NEGZERO:
        return ROW_NEGZERO;
    default:
        return ROW_ELEMENTS;
    }
}

row_fn *golden_row_loops(void)
{
    switch (moeperm_isa_in_use()) {
#ifdef GOLDEN_HAVE_X86_ROWS
    case MOEPERM_ISA_X86_AVX512:
        return golden_rows_avx512;
    case MOEPERM_ISA_X86_AVX2:
        return golden_rows_avx2;
#endif
    default:
        return golden_rows_portable;
    }
}

/* The portable build of x86/golden_rows_template.h: plain C, which the
 * compiler vectorises for the build's baseline instruction set. */
#define SUFFIX _portable
#define ATTRIBUTES

static inline void narrow_fp16(const float *v, int64_t count, uint16_t *out)
{
    moeperm_convert(v, MOEPERM_FLOAT, out, MOEPERM_FLOAT16, (size_t)count);
}

#include "x86/golden_rows_template.h"

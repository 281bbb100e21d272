/*
 * compare.c - bit-for-bit comparison of one output tensor with its golden
 * twin, and its text report (counts, ULP distance, first differences,
 * where they lie).  Kept apart from the backends so the judge never knows
 * who produced the bits.
 */
#include <moeperm/golden.h>

#include "golden/common/text.h"
#include "golden/judge/bits.h"
#include "golden/judge/where.h"

#include <inttypes.h>
#include <stdlib.h>
#include <string.h>


/* Outputs are floats of 2 or 4 bytes, int32 indices or int8 tokens. */
static uint32_t load_bits(moeperm_dtype dtype, const void *data, uint64_t i)
{
    switch (golden_bits_size(dtype)) {
    case 4: {
        uint32_t v;
        memcpy(&v, (const uint8_t *)data + 4 * i, 4);
        return v;
    }
    case 2: {
        uint16_t v;
        memcpy(&v, (const uint8_t *)data + 2 * i, 2);
        return v;
    }
    default:
        return ((const uint8_t *)data)[i];
    }
}

static bool is_nan(moeperm_dtype dtype, uint32_t bits)
{
    switch (dtype) {
    case MOEPERM_FLOAT:
        return (bits & 0x7fffffffu) > 0x7f800000u;
    case MOEPERM_FLOAT16:
        return (bits & 0x7fffu) > 0x7c00u;
    case MOEPERM_BF16:
        return (bits & 0x7fffu) > 0x7f80u;
    default:
        return false;
    }
}

/* The bits' place on the format's ordered line: sign-magnitude for
 * floats, two's complement for integers (their distance is their
 * difference). */
static int64_t ordered(moeperm_dtype dtype, uint32_t bits)
{
    if (dtype == MOEPERM_INT32)
        return (int64_t)(int32_t)bits;
    if (dtype == MOEPERM_INT8)
        return (int64_t)(int8_t)(uint8_t)bits;
    uint32_t sign = dtype == MOEPERM_FLOAT ? 0x80000000u : 0x8000u;
    int64_t magnitude = (int64_t)(bits & (sign - 1));
    return (bits & sign) ? -magnitude - 1 : magnitude;
}

uint64_t moeperm_golden_ulp_distance(moeperm_dtype dtype, uint32_t a, uint32_t b)
{
    int64_t x = ordered(dtype, a), y = ordered(dtype, b);
    return x > y ? (uint64_t)(x - y) : (uint64_t)(y - x);
}

float moeperm_golden_bits_value(moeperm_dtype dtype, uint32_t bits)
{
    switch (dtype) {
    case MOEPERM_FLOAT: {
        float v;
        memcpy(&v, &bits, 4);
        return v;
    }
    case MOEPERM_FLOAT16:
        return moeperm_fp16_to_float((uint16_t)bits);
    case MOEPERM_BF16:
        return moeperm_bf16_to_float((uint16_t)bits);
    default:
        return (float)ordered(dtype, bits);
    }
}

int moeperm_golden_compare(moeperm_dtype dtype, int64_t tokens, int64_t hidden, const void *expected,
                   const void *actual, bool strict_nan, moeperm_golden_compare_result *r)
{
    return moeperm_golden_compare_named(dtype, tokens, hidden, expected, actual, strict_nan, "token",
                                "column", r);
}

int moeperm_golden_compare_named(moeperm_dtype dtype, int64_t tokens, int64_t hidden,
                         const void *expected, const void *actual, bool strict_nan,
                         const char *row_noun, const char *column_noun, moeperm_golden_compare_result *r)
{
    memset(r, 0, sizeof *r);
    r->row_noun = row_noun;
    r->column_noun = column_noun;
    uint64_t exponent = dtype == MOEPERM_FLOAT ? 0x7f800000u : dtype == MOEPERM_FLOAT16 ? 0x7c00u
                                                                                       : 0x7f80u;
    for (int64_t t = 0; t < tokens; t++) {
        for (int64_t h = 0; h < hidden; h++) {
            uint64_t i = (uint64_t)t * (uint64_t)hidden + (uint64_t)h;
            uint32_t e = load_bits(dtype, expected, i), a = load_bits(dtype, actual, i);
            if (e == a)
                continue;
            bool e_nan = is_nan(dtype, e), a_nan = is_nan(dtype, a);
            if (e_nan && a_nan && !strict_nan)
                continue;
            r->differing++;
            if ((e & exponent) == exponent || (a & exponent) == exponent)
                r->nonfinite_differing++;
            if (e_nan != a_nan)
                r->nan_mismatch++;
            else {
                uint64_t d = moeperm_golden_ulp_distance(dtype, e, a);
                if (d > r->max_ulp)
                    r->max_ulp = d;
            }
            if (r->first_count < MOEPERM_GOLDEN_COMPARE_FIRST)
                r->first[r->first_count++] = (moeperm_golden_diff){t, h, e, a};
        }
    }
    r->elements = (uint64_t)tokens * (uint64_t)hidden;
    if (r->differing == 0)
        return 0;
    /* A second pass, on a mismatch only, names where the differences lie. */
    if (!(r->ranges = calloc(1, sizeof *r->ranges)) ||
        golden_where_compute(dtype, tokens, hidden, expected, actual, strict_nan, row_noun,
                             r->ranges) != 0 ||
        !(r->where = golden_strdup_printf("%s", r->ranges->text ? r->ranges->text : ""))) {
        moeperm_golden_compare_free(r);
        return -1;
    }
    return 0;
}

moeperm_golden_verdict moeperm_golden_compare_verdict(const moeperm_golden_compare_result *r, uint64_t max_ulp)
{
    if (r->differing == 0)
        return MOEPERM_GOLDEN_VERDICT_SAME;
    if (max_ulp > 0 && r->nonfinite_differing == 0 && r->max_ulp <= max_ulp)
        return MOEPERM_GOLDEN_VERDICT_WITHIN_TOLERANCE;
    return MOEPERM_GOLDEN_VERDICT_DIFFERENT;
}

const char *moeperm_golden_verdict_name(moeperm_golden_verdict verdict)
{
    switch (verdict) {
    case MOEPERM_GOLDEN_VERDICT_SAME:
        return "same";
    case MOEPERM_GOLDEN_VERDICT_WITHIN_TOLERANCE:
        return "within-tolerance";
    default:
        return "different";
    }
}

void moeperm_golden_compare_free(moeperm_golden_compare_result *r)
{
    free(r->where);
    r->where = NULL;
    if (r->ranges)
        golden_where_free(r->ranges);
    free(r->ranges);
    r->ranges = NULL;
}

char *moeperm_golden_compare_summary(moeperm_dtype dtype, const moeperm_golden_compare_result *r)
{
    (void)dtype;
    if (r->differing == 0)
        return golden_strdup_printf("all %" PRIu64 " elements equal", r->elements);
    char nan_part[64] = "";
    if (r->nan_mismatch)
        snprintf(nan_part, sizeof nan_part, " (%" PRIu64 " of them NaN against a number)",
                 r->nan_mismatch);
    return golden_strdup_printf("%" PRIu64 " of %" PRIu64 " elements differ%s, max %" PRIu64
                                " ulp; where: %s",
                                r->differing, r->elements, nan_part, r->max_ulp,
                                r->where ? r->where : "?");
}

void moeperm_golden_compare_report(FILE *f, moeperm_dtype dtype, const moeperm_golden_compare_result *r,
                           const char *indent)
{
    if (r->differing == 0)
        return;
    int width = 2 * (int)moeperm_dtype_size(dtype);
    fprintf(f, "%s%" PRIu64 " of %" PRIu64 " elements differ", indent, r->differing,
            r->elements);
    if (r->nan_mismatch)
        fprintf(f, " (%" PRIu64 " NaN against a number)", r->nan_mismatch);
    fprintf(f, ", max distance %" PRIu64 " ulp\n", r->max_ulp);
    for (size_t i = 0; i < r->first_count; i++) {
        const moeperm_golden_diff *d = &r->first[i];
        /* A result filled by hand (memset, no nouns) reads as before. */
        const char *row = r->row_noun ? r->row_noun : "token";
        const char *column = r->row_noun ? r->column_noun : "column";
        fprintf(f, "%s  %s %" PRId64, indent, row, d->token);
        if (column)
            fprintf(f, ", %s %" PRId64, column, d->column);
        fprintf(f,
                ": expected 0x%0*" PRIx32 " (%.9g), actual 0x%0*" PRIx32 " (%.9g)\n",
                width, d->expected, (double)moeperm_golden_bits_value(dtype, d->expected), width,
                d->actual, (double)moeperm_golden_bits_value(dtype, d->actual));
    }
    if (r->differing > r->first_count)
        fprintf(f, "%s  ... %" PRIu64 " more\n", indent, r->differing - r->first_count);
    fprintf(f, "%swhere: %s\n", indent, r->where ? r->where : "?");
}

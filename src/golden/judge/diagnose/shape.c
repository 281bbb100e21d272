/*
 * shape.c - the hypotheses that read the output alone, viewed as
 * [rows, cols], so they work for every operator: rows holding other rows'
 * values, a region never written, subnormals flushed, overflow saturated,
 * NaN bits.
 */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "golden/judge/diagnose/model.h"
#include "golden/judge/where.h"

static void shape_nan_bits(const golden_diag_data *d, golden_diag_candidates *cs)
{
    if (!d->strict_nan || !golden_bits_is_float(d->dtype))
        return;
    golden_diag_tally t = {0, 0};
    uint64_t n = (uint64_t)d->rows * (uint64_t)d->cols, example = UINT64_MAX;
    for (uint64_t i = 0; i < n; i++) {
        uint64_t e = golden_bits_load(d->dtype, d->expected, i);
        uint64_t a = golden_bits_load(d->dtype, d->actual, i);
        if (e == a)
            continue;
        if (golden_bits_is_nan(d->dtype, e) && golden_bits_is_nan(d->dtype, a)) {
            t.explained++;
            if (example == UINT64_MAX)
                example = i;
        } else {
            t.contradicted++;
        }
    }
    if (example == UINT64_MAX)
        return;
    int width = (int)moeperm_dtype_size(d->dtype) * 2;
    char detail[256];
    snprintf(detail, sizeof detail,
             "only the sign or payload of NaNs differs (first: expected 0x%0*" PRIx64
             ", actual 0x%0*" PRIx64 ")",
             width, golden_bits_load(d->dtype, d->expected, example), width,
             golden_bits_load(d->dtype, d->actual, example));
    golden_diag_offer(cs, "nan-bits", GOLDEN_DIAG_RANK_SHAPE + 4, detail, t);
}

/* Subnormal results flushed to zero (of either sign). */
static void shape_ftz(const golden_diag_data *d, golden_diag_candidates *cs)
{
    if (!golden_bits_is_float(d->dtype))
        return;
    golden_diag_tally t = {0, 0};
    uint64_t n = (uint64_t)d->rows * (uint64_t)d->cols;
    uint64_t mag = golden_bits_sign(d->dtype) - 1;
    for (uint64_t i = 0; i < n; i++) {
        uint64_t e = golden_bits_load(d->dtype, d->expected, i);
        uint64_t a = golden_bits_load(d->dtype, d->actual, i);
        bool sub = golden_bits_is_subnormal(d->dtype, e);
        if (sub && (a & mag) == 0)
            t.explained++;
        else if (sub || !golden_diag_same(d, a, e))
            t.contradicted++; /* a kept subnormal, or a difference of another kind */
    }
    golden_diag_offer(cs, "ftz", GOLDEN_DIAG_RANK_SHAPE + 2,
                      "subnormal results are flushed to zero", t);
}

/* Overflow to the largest finite value instead of infinity. */
static void shape_saturate(const golden_diag_data *d, golden_diag_candidates *cs)
{
    if (!golden_bits_is_float(d->dtype))
        return;
    golden_diag_tally t = {0, 0};
    uint64_t n = (uint64_t)d->rows * (uint64_t)d->cols;
    uint64_t sign = golden_bits_sign(d->dtype), max = golden_bits_max_finite(d->dtype);
    for (uint64_t i = 0; i < n; i++) {
        uint64_t e = golden_bits_load(d->dtype, d->expected, i);
        uint64_t a = golden_bits_load(d->dtype, d->actual, i);
        if (golden_diag_same(d, a, e))
            continue;
        if (golden_bits_is_inf(d->dtype, e) && a == ((e & sign) | max))
            t.explained++;
        else
            t.contradicted++;
    }
    char detail[128];
    snprintf(detail, sizeof detail,
             "results that overflow become +-0x%0*" PRIx64 " (the largest finite value), not +-inf",
             (int)moeperm_dtype_size(d->dtype) * 2, max);
    golden_diag_offer(cs, "saturate", GOLDEN_DIAG_RANK_SHAPE + 3, detail, t);
}

static uint64_t hash_row(const golden_diag_data *d, const void *data, int64_t row)
{
    uint64_t h = 0x9e3779b97f4a7c15u;
    uint64_t base = (uint64_t)row * (uint64_t)d->cols;
    uint64_t quiet = golden_bits_exponent(d->dtype) | (golden_bits_exponent(d->dtype) >> 1);
    for (int64_t c = 0; c < d->cols; c++) {
        uint64_t v = golden_bits_load(d->dtype, data, base + (uint64_t)c);
        if (!d->strict_nan && golden_bits_is_nan(d->dtype, v))
            v = quiet; /* every NaN hashes alike when NaNs compare equal */
        h = (h ^ v) * 0x100000001b3u;
        h ^= h >> 29;
    }
    return h;
}

static bool rows_equal(const golden_diag_data *d, const void *a, int64_t ra, const void *b,
                       int64_t rb)
{
    uint64_t ba = (uint64_t)ra * (uint64_t)d->cols, bb = (uint64_t)rb * (uint64_t)d->cols;
    for (int64_t c = 0; c < d->cols; c++)
        if (!golden_diag_same(d, golden_bits_load(d->dtype, a, ba + (uint64_t)c),
                  golden_bits_load(d->dtype, b, bb + (uint64_t)c)))
            return false;
    return true;
}

static bool row_constant(const golden_diag_data *d, const void *data, int64_t row)
{
    uint64_t base = (uint64_t)row * (uint64_t)d->cols;
    uint64_t first = golden_bits_load(d->dtype, data, base);
    for (int64_t c = 1; c < d->cols; c++)
        if (golden_bits_load(d->dtype, data, base + (uint64_t)c) != first)
            return false;
    return true;
}

/* Rows of the output that hold the values of other expected rows.  Rows
 * whose values are all alike (zeros) say nothing about where they came
 * from and are not taken as sources. */
static int shape_block_shift(const golden_diag_data *d, golden_diag_candidates *cs)
{
    if (d->cols < 2)
        return 0;
    uint64_t slots = 1;
    while (slots < 2 * (uint64_t)d->rows)
        slots <<= 1;
    int64_t *table = malloc(slots * sizeof *table);
    uint64_t *hashes = malloc((size_t)d->rows * sizeof *hashes);
    int64_t *source = malloc((size_t)d->rows * sizeof *source);
    if (!table || !hashes || !source) {
        free(table);
        free(hashes);
        free(source);
        return -1;
    }
    for (uint64_t i = 0; i < slots; i++)
        table[i] = -1;
    for (int64_t r = 0; r < d->rows; r++) {
        if (row_constant(d, d->expected, r))
            continue;
        hashes[r] = hash_row(d, d->expected, r);
        uint64_t s = hashes[r] & (slots - 1);
        while (table[s] >= 0)
            s = (s + 1) & (slots - 1);
        table[s] = r;
    }
    golden_diag_tally t = {0, 0};
    int64_t offset = 0;
    for (int64_t r = 0; r < d->rows; r++) {
        source[r] = -1;
        if (d->row_differ[r] == 0)
            continue;
        uint64_t h = hash_row(d, d->actual, r);
        int64_t found = -1;
        for (uint64_t s = h & (slots - 1); table[s] >= 0; s = (s + 1) & (slots - 1)) {
            int64_t j = table[s];
            if (j == r || hashes[j] != h || !rows_equal(d, d->actual, r, d->expected, j))
                continue;
            /* Among equal rows, the one that continues the previous shift. */
            if (found < 0 || j - r == offset)
                found = j;
        }
        source[r] = found;
        if (found >= 0) {
            offset = found - r;
            t.explained += d->row_differ[r];
        } else {
            t.contradicted += d->row_differ[r];
        }
    }
    if (t.explained > 0) {
        /* Runs of rows with one shift: "tokens 48-95 hold the values of
         * tokens 0-47". */
        char detail[256];
        size_t len = 0, runs = 0;
        uint64_t rows_left = 0;
        for (int64_t r = 0; r < d->rows;) {
            if (source[r] < 0) {
                r++;
                continue;
            }
            int64_t end = r + 1;
            while (end < d->rows && source[end] >= 0 && source[end] - end == source[r] - r)
                end++;
            if (runs < 3 && len < sizeof detail) {
                const char *sep = runs ? "; " : "";
                if (end - r == 1)
                    len += (size_t)snprintf(detail + len, sizeof detail - len,
                                            "%s%s %" PRId64 " holds the values of %s %" PRId64, sep,
                                            d->noun, r, d->noun, source[r]);
                else
                    len += (size_t)snprintf(
                        detail + len, sizeof detail - len,
                        "%s%ss %" PRId64 "-%" PRId64 " hold the values of %ss %" PRId64 "-%" PRId64,
                        sep, d->noun, r, end - 1, d->noun, source[r], source[end - 1]);
            } else {
                rows_left += (uint64_t)(end - r);
            }
            runs++;
            r = end;
        }
        if (rows_left && len < sizeof detail)
            snprintf(detail + len, sizeof detail - len, "; and %" PRIu64 " more %ss", rows_left,
                     d->noun);
        golden_diag_offer(cs, "token-block-shift", GOLDEN_DIAG_RANK_SHAPE, detail, t);
    }
    free(table);
    free(hashes);
    free(source);
    return 0;
}

typedef struct region_ctx {
    const golden_diag_data *d;
    uint64_t value;
} region_ctx;

static bool in_region(const void *ctx, uint64_t i)
{
    const region_ctx *r = ctx;
    uint64_t a = golden_bits_load(r->d->dtype, r->d->actual, i);
    return a == r->value &&
           !golden_diag_same(r->d, a, golden_bits_load(r->d->dtype, r->d->expected, i));
}

/* A region left as zeros, or as whatever the buffer held: the differing
 * elements share one value and lie in a few blocks, not scattered. */
static int shape_unwritten(const golden_diag_data *d, golden_diag_candidates *cs)
{
    /* The most common actual value among differing elements (majority
     * vote), against +0.0. */
    uint64_t n = (uint64_t)d->rows * (uint64_t)d->cols, vote = 0, votes = 0;
    uint64_t zeros = 0, voted = 0;
    for (uint64_t i = 0; i < n; i++) {
        uint64_t a = golden_bits_load(d->dtype, d->actual, i);
        if (golden_diag_same(d, a, golden_bits_load(d->dtype, d->expected, i)))
            continue;
        zeros += a == 0;
        if (votes == 0)
            vote = a, votes = 1;
        else
            votes += a == vote ? 1 : (uint64_t)-1;
    }
    for (uint64_t i = 0; i < n && vote != 0; i++) {
        uint64_t a = golden_bits_load(d->dtype, d->actual, i);
        voted += a == vote && !golden_diag_same(d, a, golden_bits_load(d->dtype, d->expected, i));
    }
    uint64_t value = voted > zeros ? vote : 0, count = voted > zeros ? voted : zeros;
    /* What a buffer holds before a kernel writes it: zeros, a memset
     * pattern (every byte alike) or a NaN sentinel; and more than one
     * element of it, since one odd element is as likely a flipped bit. */
    size_t es = moeperm_dtype_size(d->dtype);
    bool fill = value == 0 || golden_bits_is_nan(d->dtype, value);
    uint64_t byte = value & 0xff, repeated = 0;
    for (size_t i = 0; i < es; i++)
        repeated |= byte << (8 * i);
    fill |= value == repeated;
    if (count < 2 || !fill)
        return 0;
    region_ctx rc = {d, value};
    moeperm_golden_where w;
    if (golden_where_describe(d->rows, d->cols, in_region, &rc, d->noun, &w) != 0)
        return -1;
    bool blocks = w.groups <= 4 && w.rows_elsewhere == 0;
    for (size_t i = 0; i < w.groups; i++)
        blocks &= w.group[i].columns != GOLDEN_WHERE_SCATTERED;
    if (blocks) {
        char detail[256];
        if (value == 0)
            snprintf(detail, sizeof detail, "left as zeros, as if never written: %s", w.text);
        else
            snprintf(detail, sizeof detail, "left holding 0x%0*" PRIx64 ", as if never written: %s",
                     (int)moeperm_dtype_size(d->dtype) * 2, value, w.text);
        golden_diag_offer(cs, "unwritten", GOLDEN_DIAG_RANK_SHAPE + 1, detail,
                          (golden_diag_tally){count, d->differing - count});
    }
    golden_where_free(&w);
    return 0;
}

static const golden_hypothesis_info catalogue[] = {
    {"token-block-shift", NULL, "rows of the output hold the values of other rows"},
    {"unwritten", NULL, "a region of the output is left as zeros or as it was"},
    {"ftz", NULL, "subnormal results are flushed to zero"},
    {"saturate", NULL, "results that overflow become the largest finite value"},
    {"nan-bits", NULL, "only the sign or payload of NaNs differs (with strict NaN rules)"},
};

const golden_hypothesis_info *golden_diag_shape_catalogue(size_t *count)
{
    *count = sizeof catalogue / sizeof catalogue[0];
    return catalogue;
}

int golden_diag_shapes(const golden_diag_data *d, golden_diag_candidates *cs)
{
    if (shape_block_shift(d, cs) != 0 || shape_unwritten(d, cs) != 0)
        return -1;
    shape_ftz(d, cs);
    shape_saturate(d, cs);
    shape_nan_bits(d, cs);
    return 0;
}

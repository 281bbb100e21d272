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

/* The element-wise hypotheses in one pass over the output: subnormal
 * results flushed to zero (of either sign), overflow saturated to the
 * largest finite value, and (with strict NaN rules) NaNs that differ only
 * in sign or payload.  Rows without differences only matter to ftz, whose
 * kept subnormals contradict it. */
typedef struct element_tallies {
    golden_diag_tally ftz, sat, nan;
    uint64_t example; /* the first NaN pair, or UINT64_MAX */
} element_tallies;

static GOLDEN_BITS_INLINE void tally_elements(moeperm_dtype dt, const golden_diag_data *d,
                                              element_tallies *t)
{
    uint64_t mag = golden_bits_sign(dt) - 1, sign = golden_bits_sign(dt);
    uint64_t max = golden_bits_max_finite(dt);
    for (int64_t r = 0; r < d->rows; r++) {
        uint64_t base = (uint64_t)r * (uint64_t)d->cols;
        for (int64_t c = 0; c < d->cols; c++) {
            uint64_t i = base + (uint64_t)c;
            uint64_t e = golden_bits_load(dt, d->expected, i);
            bool sub = golden_bits_is_subnormal(dt, e);
            if (d->row_differ[r] == 0) {
                t->ftz.contradicted += sub;
                continue;
            }
            uint64_t a = golden_bits_load(dt, d->actual, i);
            bool differ = !golden_bits_same(dt, a, e, d->strict_nan);
            if (sub && (a & mag) == 0)
                t->ftz.explained++;
            else if (sub || differ)
                t->ftz.contradicted++; /* a kept subnormal, or a difference of another kind */
            if (differ) {
                if (golden_bits_is_inf(dt, e) && a == ((e & sign) | max))
                    t->sat.explained++;
                else
                    t->sat.contradicted++;
            }
            if (d->strict_nan && e != a) {
                if (golden_bits_is_nan(dt, e) && golden_bits_is_nan(dt, a)) {
                    t->nan.explained++;
                    if (t->example == UINT64_MAX)
                        t->example = i;
                } else {
                    t->nan.contradicted++;
                }
            }
        }
    }
}

/* The element-wise hypotheses in one pass over the output: subnormal
 * results flushed to zero (of either sign), overflow saturated to the
 * largest finite value, and (with strict NaN rules) NaNs that differ only
 * in sign or payload.  Rows without differences only matter to ftz, whose
 * kept subnormals contradict it. */
static void shape_elements(const golden_diag_data *d, golden_diag_candidates *cs)
{
    if (!golden_bits_is_float(d->dtype))
        return;
    element_tallies t = {{0, 0}, {0, 0}, {0, 0}, UINT64_MAX};
    GOLDEN_BITS_SPECIALISE(d->dtype, tally_elements, d, &t);
    golden_diag_tally ftz = t.ftz, sat = t.sat, nan = t.nan;
    uint64_t max = golden_bits_max_finite(d->dtype), example = t.example;
    int width = (int)moeperm_dtype_size(d->dtype) * 2;
    char detail[256];
    golden_diag_offer(cs, "ftz", GOLDEN_DIAG_RANK_SHAPE + 2,
                      "subnormal results are flushed to zero", ftz);
    snprintf(detail, sizeof detail,
             "results that overflow become +-0x%0*" PRIx64 " (the largest finite value), not +-inf",
             width, max);
    golden_diag_offer(cs, "saturate", GOLDEN_DIAG_RANK_SHAPE + 3, detail, sat);
    if (example == UINT64_MAX)
        return;
    snprintf(detail, sizeof detail,
             "only the sign or payload of NaNs differs (first: expected 0x%0*" PRIx64
             ", actual 0x%0*" PRIx64 ")",
             width, golden_bits_load(d->dtype, d->expected, example), width,
             golden_bits_load(d->dtype, d->actual, example));
    golden_diag_offer(cs, "nan-bits", GOLDEN_DIAG_RANK_SHAPE + 4, detail, nan);
}

static GOLDEN_BITS_INLINE void hash_row_of(moeperm_dtype dt, const golden_diag_data *d,
                                            const void *data, int64_t row, uint64_t *hash)
{
    uint64_t h = 0x9e3779b97f4a7c15u;
    uint64_t base = (uint64_t)row * (uint64_t)d->cols;
    uint64_t quiet = golden_bits_exponent(dt) | (golden_bits_exponent(dt) >> 1);
    bool fold = !d->strict_nan && golden_bits_is_float(dt);
    for (int64_t c = 0; c < d->cols; c++) {
        uint64_t v = golden_bits_load(dt, data, base + (uint64_t)c);
        if (fold && golden_bits_is_nan(dt, v))
            v = quiet; /* every NaN hashes alike when NaNs compare equal */
        h = (h ^ v) * 0x100000001b3u;
        h ^= h >> 29;
    }
    *hash = h;
}

static uint64_t hash_row(const golden_diag_data *d, const void *data, int64_t row)
{
    uint64_t h;
    GOLDEN_BITS_SPECIALISE(d->dtype, hash_row_of, d, data, row, &h);
    return h;
}

static GOLDEN_BITS_INLINE void rows_equal_of(moeperm_dtype dt, const golden_diag_data *d,
                                              uint64_t ba, const void *a, uint64_t bb,
                                              const void *b, bool *equal)
{
    *equal = true;
    for (int64_t c = 0; c < d->cols && *equal; c++)
        *equal = golden_bits_same(dt, golden_bits_load(dt, a, ba + (uint64_t)c),
                                  golden_bits_load(dt, b, bb + (uint64_t)c), d->strict_nan);
}

static bool rows_equal(const golden_diag_data *d, const void *a, int64_t ra, const void *b,
                       int64_t rb)
{
    uint64_t ba = (uint64_t)ra * (uint64_t)d->cols, bb = (uint64_t)rb * (uint64_t)d->cols;
    size_t es = moeperm_dtype_size(d->dtype);
    if (memcmp((const uint8_t *)a + ba * es, (const uint8_t *)b + bb * es,
               (size_t)d->cols * es) == 0)
        return true;
    if (d->strict_nan || !golden_bits_is_float(d->dtype))
        return false;
    bool equal;
    GOLDEN_BITS_SPECIALISE(d->dtype, rows_equal_of, d, ba, a, bb, b, &equal);
    return equal;
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
    bool *listed = calloc((size_t)d->rows, sizeof *listed);
    if (!table || !hashes || !source || !listed) {
        free(table);
        free(hashes);
        free(source);
        free(listed);
        return -1;
    }
    for (uint64_t i = 0; i < slots; i++)
        table[i] = -1;
    for (int64_t r = 0; r < d->rows; r++) {
        if (row_constant(d, d->expected, r))
            continue;
        listed[r] = true;
        hashes[r] = hash_row(d, d->expected, r);
        /* A row equal to one in the table already is found through it (or
         * as the continuing shift, below): it stays out, so that many equal
         * rows never make one long chain. */
        uint64_t s = hashes[r] & (slots - 1);
        bool known = false;
        for (; table[s] >= 0 && !known; s = (s + 1) & (slots - 1))
            known = hashes[table[s]] == hashes[r] &&
                    rows_equal(d, d->expected, r, d->expected, table[s]);
        if (!known)
            table[s] = r;
    }
    golden_diag_tally t = {0, 0};
    int64_t offset = 0;
    for (int64_t r = 0; r < d->rows; r++) {
        source[r] = -1;
        if (d->row_differ[r] == 0)
            continue;
        uint64_t h = hash_row(d, d->actual, r);
        int64_t found = -1, next = r + offset;
        /* The row that continues the previous shift, when it holds these
         * values; else the first expected row that does. */
        if (next >= 0 && next < d->rows && next != r && listed[next] && hashes[next] == h &&
            rows_equal(d, d->actual, r, d->expected, next))
            found = next;
        for (uint64_t s = h & (slots - 1); found < 0 && table[s] >= 0; s = (s + 1) & (slots - 1)) {
            int64_t j = table[s];
            if (j != r && hashes[j] == h && rows_equal(d, d->actual, r, d->expected, j))
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
    free(listed);
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

typedef struct vote_state {
    uint64_t vote, votes, zeros, voted;
} vote_state;

/* One pass of the vote over the differing elements: pass 0 elects a
 * candidate (Boyer-Moore) and counts zeros, pass 1 counts the candidate. */
static GOLDEN_BITS_INLINE void vote_pass(moeperm_dtype dt, const golden_diag_data *d, int pass,
                                         vote_state *v)
{
    for (int64_t r = 0; r < d->rows; r++) {
        if (d->row_differ[r] == 0)
            continue;
        uint64_t base = (uint64_t)r * (uint64_t)d->cols;
        for (int64_t c = 0; c < d->cols; c++) {
            uint64_t a = golden_bits_load(dt, d->actual, base + (uint64_t)c);
            if (golden_bits_same(dt, a, golden_bits_load(dt, d->expected, base + (uint64_t)c),
                                 d->strict_nan))
                continue;
            if (pass == 1) {
                v->voted += a == v->vote;
                continue;
            }
            v->zeros += a == 0;
            if (v->votes == 0)
                v->vote = a, v->votes = 1;
            else
                v->votes += a == v->vote ? 1 : (uint64_t)-1;
        }
    }
}

bool golden_diag_fill_value(const golden_diag_data *d, uint64_t *value, uint64_t *count)
{
    /* The most common actual value among differing elements (majority
     * vote), against +0.0 (counted on the way). */
    vote_state v = {0, 0, 0, 0};
    GOLDEN_BITS_SPECIALISE(d->dtype, vote_pass, d, 0, &v);
    if (v.vote != 0)
        GOLDEN_BITS_SPECIALISE(d->dtype, vote_pass, d, 1, &v);
    uint64_t vote = v.vote, voted = v.voted, zeros = v.zeros;
    *value = voted > zeros ? vote : 0;
    *count = voted > zeros ? voted : zeros;
    /* What a buffer holds before a kernel writes it: zeros, a memset
     * pattern (every byte alike) or a NaN sentinel. */
    size_t es = moeperm_dtype_size(d->dtype);
    bool fill = *value == 0 || (golden_bits_is_float(d->dtype) && golden_bits_is_nan(d->dtype, *value));
    uint64_t byte = *value & 0xff, repeated = 0;
    for (size_t i = 0; i < es; i++)
        repeated |= byte << (8 * i);
    return fill || *value == repeated;
}

/* Whether v is a value arithmetic makes at its limits: an infinity, a NaN
 * or the largest finite magnitude (a saturation). */
static bool special_value(moeperm_dtype dtype, uint64_t v)
{
    return golden_bits_is_float(dtype) &&
           (!golden_bits_is_finite(dtype, v) ||
            (v & (golden_bits_sign(dtype) - 1)) == golden_bits_max_finite(dtype));
}

/* A region left as zeros, or as whatever the buffer held: the differing
 * elements share one value and lie in a few blocks, not scattered.  An
 * infinity, a NaN or the largest finite value that arithmetic on the
 * inputs can make at an element (the operator says where) is not taken for
 * an unwritten one there. */
static int shape_unwritten(const golden_diag_data *d, golden_diag_candidates *cs)
{
    uint64_t value, count;
    /* more than one element of it: one odd element is as likely a flipped
     * bit */
    if (!golden_diag_fill_value(d, &value, &count) || count < 2)
        return 0;
    region_ctx rc = {d, value};
    moeperm_golden_where w;
    if (golden_where_describe(d->rows, d->cols, in_region, &rc, d->noun, &w) != 0)
        return -1;
    bool blocks = w.groups <= 4 && w.rows_elsewhere == 0;
    for (size_t i = 0; i < w.groups; i++)
        blocks &= w.group[i].columns != GOLDEN_WHERE_SCATTERED;
    if (blocks) {
        /* Elements arithmetic could have made are not explained. */
        uint64_t made = 0;
        if (d->special_possible && special_value(d->dtype, value)) {
            uint64_t n = (uint64_t)d->rows * (uint64_t)d->cols;
            for (uint64_t i = 0; i < n; i++)
                made += in_region(&rc, i) &&
                        d->special_possible(d->special_ctx, (int64_t)(i / (uint64_t)d->cols),
                                            (int64_t)(i % (uint64_t)d->cols));
        }
        char detail[256];
        if (value == 0)
            snprintf(detail, sizeof detail, "left as zeros, as if never written: %s", w.text);
        else
            snprintf(detail, sizeof detail, "left holding 0x%0*" PRIx64 ", as if never written: %s",
                     (int)moeperm_dtype_size(d->dtype) * 2, value, w.text);
        golden_diag_offer(cs, "unwritten", GOLDEN_DIAG_RANK_SHAPE + 1, detail,
                          (golden_diag_tally){count - made, d->differing - count + made});
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
    shape_elements(d, cs);
    return 0;
}

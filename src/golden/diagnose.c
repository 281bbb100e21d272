/*
 * diagnose.c - the catalogue of known kernel bugs and the search that
 * tries it on a mismatching output.
 *
 * The operator-level models never redo the operator's arithmetic: they
 * rearrange data (which rows go into which slot, in what order, with a
 * +0.0 row or a gap) and let libmoeperm's public two-phase API do every
 * addition and narrowing.  A sum the bug keeps in another dtype is a chain
 * of top_k = 2 runs in that dtype; a sum in another order is a tree of such
 * runs in fp32; a sum narrowed another way is a run in fp32 on widened
 * inputs followed by that narrowing.  What remains written out here is
 * only the bug itself (a truncation, a flush to zero, a saturation).
 *
 * The search is bounded: every model runs first on a sample of the rows,
 * and only the ones that fit the sample run on the whole output, block by
 * block.
 */
#include "golden/diagnose.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "golden/bits.h"
#include "golden/where.h"

#define SAMPLE_DIFFERING 48
#define SAMPLE_EQUAL 16
/* Slot elements (tokens x (top_k + 1) x hidden_size) a model may touch on
 * the sample; a large top_k or hidden_size gets fewer sample tokens. */
#define SAMPLE_ELEMENTS ((size_t)1 << 24)
/* Slot elements of one run of the rows-ignored-from search (a token's
 * top_k + 1 variants); beyond it the search is not tried. */
#define FIT_ELEMENTS ((size_t)1 << 25)
/* Up to this top_k every missing slot is tried; beyond it only the slots
 * the differences point at. */
#define MISSING_ALL_K 16
#define BLOCK_BYTES ((size_t)32 << 20)
#define CONFIRM_MAX 6
#define MAX_CANDIDATES 64

/* ---------------------------------------------------------------------- */
/* What every hypothesis sees                                             */
/* ---------------------------------------------------------------------- */

typedef struct diag_data {
    moeperm_dtype dtype;
    int64_t rows, cols;
    const void *expected, *actual;
    bool strict_nan;
    uint64_t differing;
    uint64_t *row_differ; /* differing elements of each row */
    const char *noun;     /* what a row is called: "token", "row" */
} diag_data;

typedef struct tally {
    uint64_t explained, contradicted;
} tally;

static bool same(const diag_data *d, uint64_t a, uint64_t b)
{
    return golden_bits_same(d->dtype, a, b, d->strict_nan);
}

/* Counts, over the given rows, the differing elements model reproduces and
 * the elements where model and actual disagree; model holds n rows. */
static void tally_rows(const diag_data *d, const int64_t *rows, size_t n, const void *model,
                       tally *t)
{
    for (size_t i = 0; i < n; i++) {
        uint64_t base = (uint64_t)rows[i] * (uint64_t)d->cols;
        for (int64_t c = 0; c < d->cols; c++) {
            uint64_t e = golden_bits_load(d->dtype, d->expected, base + (uint64_t)c);
            uint64_t a = golden_bits_load(d->dtype, d->actual, base + (uint64_t)c);
            uint64_t m = golden_bits_load(d->dtype, model, i * (uint64_t)d->cols + (uint64_t)c);
            if (!same(d, m, a))
                t->contradicted++;
            else if (!same(d, a, e))
                t->explained++;
        }
    }
}

/* ---------------------------------------------------------------------- */
/* Candidates                                                             */
/* ---------------------------------------------------------------------- */

typedef struct candidate {
    golden_finding f;
    int rank; /* catalogue order: the tie-break among exact findings */
} candidate;

typedef struct candidates {
    candidate c[MAX_CANDIDATES];
    size_t n;
} candidates;

static bool better(const golden_finding *a, const golden_finding *b)
{
    if (a->exact != b->exact)
        return a->exact;
    if (a->explained != b->explained)
        return a->explained > b->explained;
    return a->contradicted < b->contradicted;
}

/* Records a tested hypothesis; one entry per id, the best of its variants. */
static void offer(candidates *cs, const char *id, int rank, const char *detail, tally t)
{
    golden_finding f;
    memset(&f, 0, sizeof f);
    snprintf(f.id, sizeof f.id, "%s", id);
    snprintf(f.detail, sizeof f.detail, "%s", detail);
    f.explained = t.explained;
    f.contradicted = t.contradicted;
    f.exact = t.contradicted == 0;
    if (f.explained == 0)
        return; /* a model equal to the expected output explains nothing */
    for (size_t i = 0; i < cs->n; i++) {
        if (strcmp(cs->c[i].f.id, id) == 0) {
            if (better(&f, &cs->c[i].f))
                cs->c[i].f = f;
            if (rank < cs->c[i].rank)
                cs->c[i].rank = rank;
            return;
        }
    }
    if (cs->n < MAX_CANDIDATES)
        cs->c[cs->n++] = (candidate){f, rank};
}

/* ---------------------------------------------------------------------- */
/* Shape-level hypotheses: the output alone, any operator                 */
/* ---------------------------------------------------------------------- */

enum {
    RANK_SHAPE = 100, /* after every operator-level model */
};

static void shape_nan_bits(const diag_data *d, candidates *cs)
{
    if (!d->strict_nan || !golden_bits_is_float(d->dtype))
        return;
    tally t = {0, 0};
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
    offer(cs, "nan-bits", RANK_SHAPE + 4, detail, t);
}

/* Subnormal results flushed to zero (of either sign). */
static void shape_ftz(const diag_data *d, candidates *cs)
{
    if (!golden_bits_is_float(d->dtype))
        return;
    tally t = {0, 0};
    uint64_t n = (uint64_t)d->rows * (uint64_t)d->cols;
    uint64_t mag = golden_bits_sign(d->dtype) - 1;
    for (uint64_t i = 0; i < n; i++) {
        uint64_t e = golden_bits_load(d->dtype, d->expected, i);
        uint64_t a = golden_bits_load(d->dtype, d->actual, i);
        bool sub = golden_bits_is_subnormal(d->dtype, e);
        if (sub && (a & mag) == 0)
            t.explained++;
        else if (sub || !same(d, a, e))
            t.contradicted++; /* a kept subnormal, or a difference of another kind */
    }
    offer(cs, "ftz", RANK_SHAPE + 2, "subnormal results are flushed to zero", t);
}

/* Overflow to the largest finite value instead of infinity. */
static void shape_saturate(const diag_data *d, candidates *cs)
{
    if (!golden_bits_is_float(d->dtype))
        return;
    tally t = {0, 0};
    uint64_t n = (uint64_t)d->rows * (uint64_t)d->cols;
    uint64_t sign = golden_bits_sign(d->dtype), max = golden_bits_max_finite(d->dtype);
    for (uint64_t i = 0; i < n; i++) {
        uint64_t e = golden_bits_load(d->dtype, d->expected, i);
        uint64_t a = golden_bits_load(d->dtype, d->actual, i);
        if (same(d, a, e))
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
    offer(cs, "saturate", RANK_SHAPE + 3, detail, t);
}

static uint64_t hash_row(const diag_data *d, const void *data, int64_t row)
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

static bool rows_equal(const diag_data *d, const void *a, int64_t ra, const void *b, int64_t rb)
{
    uint64_t ba = (uint64_t)ra * (uint64_t)d->cols, bb = (uint64_t)rb * (uint64_t)d->cols;
    for (int64_t c = 0; c < d->cols; c++)
        if (!same(d, golden_bits_load(d->dtype, a, ba + (uint64_t)c),
                  golden_bits_load(d->dtype, b, bb + (uint64_t)c)))
            return false;
    return true;
}

static bool row_constant(const diag_data *d, const void *data, int64_t row)
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
static int shape_block_shift(const diag_data *d, candidates *cs)
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
    tally t = {0, 0};
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
        offer(cs, "token-block-shift", RANK_SHAPE, detail, t);
    }
    free(table);
    free(hashes);
    free(source);
    return 0;
}

typedef struct region_ctx {
    const diag_data *d;
    uint64_t value;
} region_ctx;

static bool in_region(const void *ctx, uint64_t i)
{
    const region_ctx *r = ctx;
    uint64_t a = golden_bits_load(r->d->dtype, r->d->actual, i);
    return a == r->value && !same(r->d, a, golden_bits_load(r->d->dtype, r->d->expected, i));
}

/* A region left as zeros, or as whatever the buffer held: the differing
 * elements share one value and lie in a few blocks, not scattered. */
static int shape_unwritten(const diag_data *d, candidates *cs)
{
    /* The most common actual value among differing elements (majority
     * vote), against +0.0. */
    uint64_t n = (uint64_t)d->rows * (uint64_t)d->cols, vote = 0, votes = 0;
    uint64_t zeros = 0, voted = 0;
    for (uint64_t i = 0; i < n; i++) {
        uint64_t a = golden_bits_load(d->dtype, d->actual, i);
        if (same(d, a, golden_bits_load(d->dtype, d->expected, i)))
            continue;
        zeros += a == 0;
        if (votes == 0)
            vote = a, votes = 1;
        else
            votes += a == vote ? 1 : (uint64_t)-1;
    }
    for (uint64_t i = 0; i < n && vote != 0; i++) {
        uint64_t a = golden_bits_load(d->dtype, d->actual, i);
        voted += a == vote && !same(d, a, golden_bits_load(d->dtype, d->expected, i));
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
        offer(cs, "unwritten", RANK_SHAPE + 1, detail, (tally){count, d->differing - count});
    }
    golden_where_free(&w);
    return 0;
}

/* ---------------------------------------------------------------------- */
/* Running the operator on rearranged data                                */
/* ---------------------------------------------------------------------- */

/* One slot of a rearranged problem: a row of src (of dtype) or, with src
 * NULL, a +0.0 row (row >= 0) or a dropped slot (row < 0). */
typedef struct operand {
    const void *src;
    moeperm_dtype dtype;
    int64_t row;
} operand;

static const operand SKIP = {NULL, MOEPERM_FLOAT, -1};
static const operand ZERO = {NULL, MOEPERM_FLOAT, 0};

/* Runs MoeTokenPermuteGrad in dtype c on n tokens of kp slots: the rows
 * the operands name are copied (converted to c) into a fresh
 * permuted_output_grad, dropped slots get indices past its rows. */
static int run_program(moeperm_dtype c, int64_t h, int64_t n, int64_t kp, const operand *ops,
                       void *out, char *err, size_t err_len)
{
    int64_t total = n * kp, rows = 0;
    size_t es = moeperm_dtype_size(c);
    for (int64_t i = 0; i < total; i++)
        rows += ops[i].src != NULL || ops[i].row >= 0;
    uint8_t *grad = malloc(rows > 0 ? (size_t)rows * (size_t)h * es : 1);
    int32_t *idx = malloc((size_t)total * sizeof *idx);
    if (!grad || !idx) {
        free(grad);
        free(idx);
        snprintf(err, err_len, "out of memory for a diagnosis model");
        return -1;
    }
    int64_t next = 0, dropped = rows;
    for (int64_t i = 0; i < total; i++) {
        const operand *o = &ops[i];
        if (!o->src && o->row < 0) {
            idx[i] = (int32_t)dropped++;
            continue;
        }
        uint8_t *dst = grad + (size_t)next * (size_t)h * es;
        if (!o->src) {
            memset(dst, 0, (size_t)h * es);
        } else {
            size_t ses = moeperm_dtype_size(o->dtype);
            const uint8_t *src = (const uint8_t *)o->src + (size_t)o->row * (size_t)h * ses;
            if (o->dtype == c)
                memcpy(dst, src, (size_t)h * es);
            else
                moeperm_convert(src, o->dtype, dst, c, (size_t)h);
        }
        idx[i] = (int32_t)next++;
    }
    int64_t gd[2] = {rows, h}, id[1] = {total}, od[2] = {n, h};
    moeperm_tensor *gt = moeperm_tensor_create(gd, 2, c, NULL, 0, rows > 0 ? grad : NULL);
    moeperm_tensor *it = moeperm_tensor_create(id, 1, MOEPERM_INT32, NULL, 0, idx);
    moeperm_tensor *ot = moeperm_tensor_create(od, 2, c, NULL, 0, out);
    moeperm_status st = MOEPERM_ERR_INNER;
    if (gt && it && ot) {
        uint64_t ws;
        moeperm_executor *plan;
        st = moeperm_token_permute_grad_get_workspace_size(gt, it, kp, false, ot, &ws, &plan);
        if (st == MOEPERM_SUCCESS)
            st = moeperm_token_permute_grad(NULL, ws, plan, NULL);
    }
    moeperm_tensor_destroy(gt);
    moeperm_tensor_destroy(it);
    moeperm_tensor_destroy(ot);
    free(grad);
    free(idx);
    if (st != MOEPERM_SUCCESS) {
        snprintf(err, err_len, "a diagnosis model could not run the operator: %s",
                 moeperm_last_error());
        return -1;
    }
    return 0;
}

/* out = a + b row by row, one addition in dtype c per element (a top_k = 2
 * run); a row present on one side only is copied, on neither side it is
 * +0.0 and absent.  pout may alias pa. */
static int add_rows(moeperm_dtype c, int64_t h, int64_t n, const void *a, const bool *pa,
                    const void *b, const bool *pb, void *out, bool *pout, char *err, size_t err_len)
{
    operand *ops = malloc((size_t)n * 2 * sizeof *ops);
    if (!ops) {
        snprintf(err, err_len, "out of memory for a diagnosis model");
        return -1;
    }
    for (int64_t i = 0; i < n; i++) {
        operand oa = {a, c, i}, ob = {b, c, i};
        bool ha = !pa || pa[i], hb = !pb || pb[i];
        ops[2 * i] = ha ? oa : hb ? ob : SKIP;
        ops[2 * i + 1] = ha && hb ? ob : SKIP;
        if (pout)
            pout[i] = ha || hb;
    }
    int rc = run_program(c, h, n, 2, ops, out, err, err_len);
    free(ops);
    return rc;
}

/* ---------------------------------------------------------------------- */
/* MoeTokenPermuteGrad                                                    */
/* ---------------------------------------------------------------------- */

typedef struct pg_ctx {
    moeperm_dtype dtype;
    const void *grad;   /* permuted_output_grad [R, H] */
    const int32_t *idx; /* sorted_indices [T*K] */
    int64_t R, H, T, K;
    bool has_dropped;
    int32_t *owner; /* owner[row]: a slot position t*K+k that reads it, or -1 */
    bool x_found;   /* rows-ignored-from: X in [x_lo, x_hi] */
    int64_t x_lo, x_hi;
} pg_ctx;

static operand pg_slot(const pg_ctx *x, int64_t t, int64_t k)
{
    int32_t r = x->idx[t * x->K + k];
    return r < x->R ? (operand){x->grad, x->dtype, r} : SKIP;
}

/* The slots of the tokens, widened to fp32, slot-major: block k holds slot
 * k of every token ([K][n][H]); present[k*n + i] says whether that slot of
 * token i is kept (a dropped one is +0.0). */
static int pg_slots(const pg_ctx *x, const int64_t *tokens, size_t n, bool flush, float **slots,
                    bool **present, char *err, size_t err_len)
{
    size_t block = n * (size_t)x->H;
    *slots = malloc((size_t)x->K * block * sizeof(float));
    *present = malloc((size_t)x->K * n * sizeof(bool));
    if (!*slots || !*present) {
        free(*slots);
        free(*present);
        snprintf(err, err_len, "out of memory for a diagnosis model");
        return -1;
    }
    size_t es = moeperm_dtype_size(x->dtype);
    for (int64_t k = 0; k < x->K; k++) {
        for (size_t i = 0; i < n; i++) {
            float *dst = *slots + (size_t)k * block + i * (size_t)x->H;
            int32_t r = x->idx[tokens[i] * x->K + k];
            (*present)[(size_t)k * n + i] = r < x->R;
            if (r >= x->R) {
                memset(dst, 0, (size_t)x->H * sizeof(float));
                continue;
            }
            moeperm_convert((const uint8_t *)x->grad + (size_t)r * (size_t)x->H * es, x->dtype, dst,
                            MOEPERM_FLOAT, (size_t)x->H);
            if (flush)
                for (int64_t c = 0; c < x->H; c++)
                    if (golden_bits_is_subnormal(MOEPERM_FLOAT,
                                                 golden_bits_load(MOEPERM_FLOAT, dst, (uint64_t)c)))
                        golden_bits_store(MOEPERM_FLOAT, dst, (uint64_t)c,
                                          golden_bits_load(MOEPERM_FLOAT, dst, (uint64_t)c) &
                                              0x80000000u);
        }
    }
    return 0;
}

static void flush_subnormals(moeperm_dtype dtype, void *data, uint64_t n)
{
    for (uint64_t i = 0; i < n; i++) {
        uint64_t v = golden_bits_load(dtype, data, i);
        if (golden_bits_is_subnormal(dtype, v))
            golden_bits_store(dtype, data, i, v & golden_bits_sign(dtype));
    }
}

/* The fp32 sum of each token's slots in k order: the operator run in fp32
 * on widened inputs, whose narrowing is then the identity. */
static int pg_sum32(const pg_ctx *x, const int64_t *tokens, size_t n, float *acc, char *err,
                    size_t err_len)
{
    operand *ops = malloc(n * (size_t)x->K * sizeof *ops);
    if (!ops) {
        snprintf(err, err_len, "out of memory for a diagnosis model");
        return -1;
    }
    for (size_t i = 0; i < n; i++)
        for (int64_t k = 0; k < x->K; k++)
            ops[i * (size_t)x->K + (size_t)k] = pg_slot(x, tokens[i], k);
    int rc = run_program(MOEPERM_FLOAT, x->H, (int64_t)n, x->K, ops, acc, err, err_len);
    free(ops);
    return rc;
}

/* Narrowing rules other than ties-to-even, built on the library's
 * round-to-nearest-even conversion: the result is the RNE value moved one
 * step in magnitude where the rule disagrees with it. */
static uint16_t narrow_rne(moeperm_dtype dtype, float v)
{
    return dtype == MOEPERM_BF16 ? moeperm_float_to_bf16(v) : moeperm_float_to_fp16(v);
}

static double widen(moeperm_dtype dtype, uint16_t bits)
{
    return dtype == MOEPERM_BF16 ? moeperm_bf16_to_float(bits) : moeperm_fp16_to_float(bits);
}

static uint16_t narrow_truncate(moeperm_dtype dtype, float v)
{
    uint16_t r = narrow_rne(dtype, v);
    if (v != v)
        return r;
    double w = widen(dtype, r);
    /* Rounded away from zero: one step back (infinity steps back to the
     * largest finite value, as truncation never overflows). */
    if ((w < 0 ? -w : w) > (v < 0 ? -(double)v : (double)v))
        r--;
    return r;
}

static uint16_t narrow_half_away(moeperm_dtype dtype, float v)
{
    uint16_t r = narrow_rne(dtype, v);
    if (v != v || golden_bits_is_inf(dtype, r))
        return r;
    double w = widen(dtype, r), x = v;
    double aw = w < 0 ? -w : w, ax = x < 0 ? -x : x;
    if (aw >= ax)
        return r; /* exact, or already rounded away */
    uint16_t up = (uint16_t)(r + 1);
    double au = widen(dtype, up);
    au = au < 0 ? -au : au;
    return ax - aw == au - ax ? up : r; /* a tie RNE sent toward zero */
}

/* The models.  Each writes the output the buggy kernel would give for the
 * n tokens into out ([n, H] of the case's dtype). */

static int pg_acc_in_output_dtype(pg_ctx *x, int variant, const int64_t *tokens, size_t n,
                                  void *out, char *err, size_t err_len)
{
    (void)variant;
    size_t es = moeperm_dtype_size(x->dtype), row = (size_t)x->H * es;
    uint8_t *acc = malloc(n * row), *slot = malloc(n * row), *next = malloc(n * row);
    bool *present = malloc(n * sizeof *present);
    int rc = -1;
    if (!acc || !slot || !next || !present) {
        snprintf(err, err_len, "out of memory for a diagnosis model");
        goto done;
    }
    for (int64_t k = 0; k < x->K; k++) {
        for (size_t i = 0; i < n; i++) {
            int32_t r = x->idx[tokens[i] * x->K + k];
            uint8_t *dst = (k == 0 ? acc : slot) + i * row;
            present[i] = r < x->R;
            /* a dropped first slot starts the sum from +0.0 */
            if (r < x->R)
                memcpy(dst, (const uint8_t *)x->grad + (size_t)r * row, row);
            else
                memset(dst, 0, row);
        }
        if (k == 0)
            continue;
        if (add_rows(x->dtype, x->H, (int64_t)n, acc, NULL, slot, present, next, NULL, err,
                     err_len) != 0)
            goto done;
        uint8_t *swap = acc;
        acc = next;
        next = swap;
    }
    memcpy(out, acc, n * row);
    rc = 0;
done:
    free(acc);
    free(slot);
    free(next);
    free(present);
    return rc;
}

static int pg_narrowed(pg_ctx *x, const int64_t *tokens, size_t n, void *out,
                       uint16_t (*narrow)(moeperm_dtype, float), char *err, size_t err_len)
{
    size_t count = n * (size_t)x->H;
    float *acc = malloc(count * sizeof *acc);
    if (!acc) {
        snprintf(err, err_len, "out of memory for a diagnosis model");
        return -1;
    }
    if (pg_sum32(x, tokens, n, acc, err, err_len) != 0) {
        free(acc);
        return -1;
    }
    for (size_t i = 0; i < count; i++)
        golden_bits_store(x->dtype, out, i, narrow(x->dtype, acc[i]));
    free(acc);
    return 0;
}

static int pg_truncate(pg_ctx *x, int variant, const int64_t *tokens, size_t n, void *out,
                       char *err, size_t err_len)
{
    (void)variant;
    return pg_narrowed(x, tokens, n, out, narrow_truncate, err, err_len);
}

static int pg_half_away(pg_ctx *x, int variant, const int64_t *tokens, size_t n, void *out,
                        char *err, size_t err_len)
{
    (void)variant;
    return pg_narrowed(x, tokens, n, out, narrow_half_away, err, err_len);
}

/* Models that only rearrange slots: the operator in the case's dtype on
 * tokens whose slots slot_of() chooses. */
typedef operand (*slot_rule)(const pg_ctx *x, int variant, int64_t t, int64_t k);

static int pg_rearranged(pg_ctx *x, int variant, const int64_t *tokens, size_t n, void *out,
                         int64_t kp, slot_rule rule, char *err, size_t err_len)
{
    operand *ops = malloc(n * (size_t)kp * sizeof *ops);
    if (!ops) {
        snprintf(err, err_len, "out of memory for a diagnosis model");
        return -1;
    }
    for (size_t i = 0; i < n; i++)
        for (int64_t k = 0; k < kp; k++)
            ops[i * (size_t)kp + (size_t)k] = rule(x, variant, tokens[i], k);
    int rc = run_program(x->dtype, x->H, (int64_t)n, kp, ops, out, err, err_len);
    free(ops);
    return rc;
}

static operand rule_reversed(const pg_ctx *x, int variant, int64_t t, int64_t k)
{
    (void)variant;
    return pg_slot(x, t, x->K - 1 - k);
}

static operand rule_zero_start(const pg_ctx *x, int variant, int64_t t, int64_t k)
{
    (void)variant;
    return k == 0 ? ZERO : pg_slot(x, t, k - 1);
}

static operand rule_missing(const pg_ctx *x, int variant, int64_t t, int64_t k)
{
    return k == variant ? SKIP : pg_slot(x, t, k);
}

static operand rule_dropped(const pg_ctx *x, int variant, int64_t t, int64_t k)
{
    int32_t r = x->idx[t * x->K + k];
    if (r < x->R)
        return (operand){x->grad, x->dtype, r};
    switch (variant) {
    case 0:
        return ZERO;
    case 1:
        return (operand){x->grad, x->dtype, r % x->R};
    default:
        return (operand){x->grad, x->dtype, x->R - 1};
    }
}

static operand rule_rows_ignored(const pg_ctx *x, int variant, int64_t t, int64_t k)
{
    (void)variant;
    int32_t r = x->idx[t * x->K + k];
    return r < x->x_lo ? (operand){x->grad, x->dtype, r} : SKIP;
}

static int pg_reversed(pg_ctx *x, int v, const int64_t *t, size_t n, void *out, char *e, size_t l)
{
    return pg_rearranged(x, v, t, n, out, x->K, rule_reversed, e, l);
}

static int pg_zero_start(pg_ctx *x, int v, const int64_t *t, size_t n, void *out, char *e, size_t l)
{
    return pg_rearranged(x, v, t, n, out, x->K + 1, rule_zero_start, e, l);
}

static int pg_missing(pg_ctx *x, int v, const int64_t *t, size_t n, void *out, char *e, size_t l)
{
    return pg_rearranged(x, v, t, n, out, x->K, rule_missing, e, l);
}

static int pg_dropped(pg_ctx *x, int v, const int64_t *t, size_t n, void *out, char *e, size_t l)
{
    return pg_rearranged(x, v, t, n, out, x->K, rule_dropped, e, l);
}

static int pg_rows_ignored(pg_ctx *x, int v, const int64_t *t, size_t n, void *out, char *e,
                           size_t l)
{
    return pg_rearranged(x, v, t, n, out, x->K, rule_rows_ignored, e, l);
}

/* A tree over the slots in fp32: variant 0 adds neighbours ((0+1)+(2+3))+...,
 * variant 1 folds the upper half onto the lower ((0+4)+(2+6))+((1+5)+(3+7)).
 * A node with a dropped side is its other side. */
static int pg_pairwise(pg_ctx *x, int variant, const int64_t *tokens, size_t n, void *out,
                       char *err, size_t err_len)
{
    float *slots;
    bool *present;
    if (pg_slots(x, tokens, n, false, &slots, &present, err, err_len) != 0)
        return -1;
    size_t block = n * (size_t)x->H;
    float *scratch = malloc((size_t)x->K * block * sizeof(float));
    bool *scratch_present = malloc((size_t)x->K * n * sizeof(bool));
    int rc = -1;
    if (!scratch || !scratch_present) {
        snprintf(err, err_len, "out of memory for a diagnosis model");
        goto done;
    }
    for (int64_t m = x->K; m > 1;) {
        int64_t half = variant == 0 ? m / 2 : (m + 1) / 2, next = (m + 1) / 2;
        for (int64_t i = 0; i < next; i++) {
            int64_t a = variant == 0 ? 2 * i : i, b = variant == 0 ? 2 * i + 1 : i + half;
            float *dst = scratch + (size_t)i * block;
            bool *pdst = scratch_present + (size_t)i * n;
            if (b >= m) { /* the odd one out goes up alone */
                memcpy(dst, slots + (size_t)a * block, block * sizeof(float));
                memcpy(pdst, present + (size_t)a * n, n * sizeof(bool));
                continue;
            }
            if (add_rows(MOEPERM_FLOAT, x->H, (int64_t)n, slots + (size_t)a * block,
                         present + (size_t)a * n, slots + (size_t)b * block,
                         present + (size_t)b * n, dst, pdst, err, err_len) != 0)
                goto done;
        }
        float *sw = slots;
        slots = scratch;
        scratch = sw;
        bool *pw = present;
        present = scratch_present;
        scratch_present = pw;
        m = next;
    }
    /* A token with every slot dropped sums to +0.0; add_rows left it so. */
    moeperm_convert(slots, MOEPERM_FLOAT, out, x->dtype, block);
    rc = 0;
done:
    free(slots);
    free(present);
    free(scratch);
    free(scratch_present);
    return rc;
}

/* Subnormals flushed to zero: variant 0 in the inputs, 1 in the inputs and
 * the results, 2 also after every addition. */
static int pg_ftz(pg_ctx *x, int variant, const int64_t *tokens, size_t n, void *out, char *err,
                  size_t err_len)
{
    float *slots;
    bool *present;
    if (pg_slots(x, tokens, n, true, &slots, &present, err, err_len) != 0)
        return -1;
    size_t block = n * (size_t)x->H;
    float *acc = malloc(block * sizeof(float)), *next = malloc(block * sizeof(float));
    operand *ops = malloc(n * (size_t)x->K * sizeof *ops);
    int rc = -1;
    if (!acc || !next || !ops) {
        snprintf(err, err_len, "out of memory for a diagnosis model");
        goto done;
    }
    if (variant < 2) {
        for (size_t i = 0; i < n; i++)
            for (int64_t k = 0; k < x->K; k++)
                ops[i * (size_t)x->K + (size_t)k] =
                    present[(size_t)k * n + i]
                        ? (operand){slots, MOEPERM_FLOAT, (int64_t)((size_t)k * n + i)}
                        : SKIP;
        if (run_program(MOEPERM_FLOAT, x->H, (int64_t)n, x->K, ops, acc, err, err_len) != 0)
            goto done;
    } else {
        /* slot 0, or +0.0 where it is dropped (pg_slots zeroed it) */
        memcpy(acc, slots, block * sizeof(float));
        for (int64_t k = 1; k < x->K; k++) {
            if (add_rows(MOEPERM_FLOAT, x->H, (int64_t)n, acc, NULL, slots + (size_t)k * block,
                         present + (size_t)k * n, next, NULL, err, err_len) != 0)
                goto done;
            flush_subnormals(MOEPERM_FLOAT, next, block);
            float *sw = acc;
            acc = next;
            next = sw;
        }
    }
    moeperm_convert(acc, MOEPERM_FLOAT, out, x->dtype, block);
    if (variant >= 1)
        flush_subnormals(x->dtype, out, block);
    rc = 0;
done:
    free(slots);
    free(present);
    free(acc);
    free(next);
    free(ops);
    return rc;
}

/* Overflow to the largest finite value: variant 0 in the narrowing of a
 * finite fp32 sum, 1 also in every fp32 addition. */
static int pg_saturate(pg_ctx *x, int variant, const int64_t *tokens, size_t n, void *out,
                       char *err, size_t err_len)
{
    size_t block = n * (size_t)x->H;
    float *acc = NULL, *next = NULL, *slots = NULL;
    bool *present = NULL;
    int rc = -1;
    if (variant == 0) {
        acc = malloc(block * sizeof(float));
        if (!acc) {
            snprintf(err, err_len, "out of memory for a diagnosis model");
            return -1;
        }
        if (pg_sum32(x, tokens, n, acc, err, err_len) != 0)
            goto done;
    } else {
        if (pg_slots(x, tokens, n, false, &slots, &present, err, err_len) != 0)
            return -1;
        acc = malloc(block * sizeof(float));
        next = malloc(block * sizeof(float));
        if (!acc || !next) {
            snprintf(err, err_len, "out of memory for a diagnosis model");
            goto done;
        }
        memcpy(acc, slots, block * sizeof(float));
        for (int64_t k = 1; k < x->K; k++) {
            const float *s = slots + (size_t)k * block;
            if (add_rows(MOEPERM_FLOAT, x->H, (int64_t)n, acc, NULL, s, present + (size_t)k * n,
                         next, NULL, err, err_len) != 0)
                goto done;
            for (size_t i = 0; i < block; i++) {
                uint64_t r = golden_bits_load(MOEPERM_FLOAT, next, i);
                uint64_t a = golden_bits_load(MOEPERM_FLOAT, acc, i);
                uint64_t b = golden_bits_load(MOEPERM_FLOAT, s, i);
                if (golden_bits_is_inf(MOEPERM_FLOAT, r) &&
                    golden_bits_is_finite(MOEPERM_FLOAT, a) &&
                    golden_bits_is_finite(MOEPERM_FLOAT, b))
                    golden_bits_store(MOEPERM_FLOAT, next, i, (r & 0x80000000u) | 0x7f7fffffu);
            }
            float *sw = acc;
            acc = next;
            next = sw;
        }
    }
    moeperm_convert(acc, MOEPERM_FLOAT, out, x->dtype, block);
    for (size_t i = 0; i < block; i++) {
        uint64_t r = golden_bits_load(x->dtype, out, i);
        if (golden_bits_is_inf(x->dtype, r) &&
            golden_bits_is_finite(MOEPERM_FLOAT, golden_bits_load(MOEPERM_FLOAT, acc, i)))
            golden_bits_store(x->dtype, out, i,
                              (r & golden_bits_sign(x->dtype)) | golden_bits_max_finite(x->dtype));
    }
    rc = 0;
done:
    free(acc);
    free(next);
    free(slots);
    free(present);
    return rc;
}

/* rows-ignored-from: the X for which each given token's output matches.
 * For a token whose kept rows sorted are q_0 < ... < q_{m-1}, ignoring rows
 * >= X keeps the first j of them exactly when q_{j-1} < X <= q_j (with
 * q_{-1} = -1, q_m = R), so one run over m + 1 variants of each token gives
 * the X that fit it.  The hull of the fitting X is intersected into
 * [*lo, *hi]; *lo > *hi means no X fits. */
static int pg_fit_group(pg_ctx *x, const diag_data *d, const int64_t *tokens, size_t n, int64_t *lo,
                        int64_t *hi, char *err, size_t err_len)
{
    size_t pseudo = 0;
    for (size_t i = 0; i < n; i++) {
        pseudo++;
        for (int64_t k = 0; k < x->K; k++)
            pseudo += x->idx[tokens[i] * x->K + k] < x->R;
    }
    size_t es = moeperm_dtype_size(x->dtype);
    operand *ops = calloc(pseudo * (size_t)x->K, sizeof *ops);
    int32_t *sorted = malloc((size_t)x->K * sizeof *sorted);
    int64_t *rank = malloc((size_t)x->K * sizeof *rank);
    uint8_t *out = malloc(pseudo * (size_t)x->H * es);
    int rc = -1;
    if (!ops || !sorted || !rank || !out) {
        snprintf(err, err_len, "out of memory for a diagnosis model");
        goto done;
    }
    size_t p = 0;
    for (size_t i = 0; i < n; i++) {
        const int32_t *slots = x->idx + tokens[i] * x->K;
        for (int64_t k = 0; k < x->K; k++) {
            rank[k] = 0;
            for (int64_t q = 0; q < x->K; q++)
                rank[k] += slots[q] < x->R && slots[q] < slots[k];
        }
        int64_t m = 0;
        for (int64_t k = 0; k < x->K; k++)
            m += slots[k] < x->R;
        /* variant j keeps the j smallest kept rows */
        for (int64_t j = 0; j <= m; j++, p++)
            for (int64_t k = 0; k < x->K; k++)
                ops[p * (size_t)x->K + (size_t)k] =
                    slots[k] < x->R && rank[k] < j ? (operand){x->grad, x->dtype, slots[k]} : SKIP;
    }
    if (run_program(x->dtype, x->H, (int64_t)pseudo, x->K, ops, out, err, err_len) != 0)
        goto done;
    p = 0;
    for (size_t i = 0; i < n; i++) {
        const int32_t *slots = x->idx + tokens[i] * x->K;
        int64_t m = 0;
        for (int64_t k = 0; k < x->K; k++)
            if (slots[k] < x->R)
                sorted[m++] = slots[k];
        /* insertion sort: m <= K */
        for (int64_t a = 1; a < m; a++)
            for (int64_t b = a; b > 0 && sorted[b - 1] > sorted[b]; b--) {
                int32_t t = sorted[b];
                sorted[b] = sorted[b - 1];
                sorted[b - 1] = t;
            }
        int64_t fit_lo = INT64_MAX, fit_hi = -1;
        uint64_t base = (uint64_t)tokens[i] * (uint64_t)d->cols;
        for (int64_t j = 0; j <= m; j++, p++) {
            bool match = true;
            for (int64_t c = 0; c < d->cols && match; c++)
                match =
                    same(d, golden_bits_load(d->dtype, out, p * (uint64_t)d->cols + (uint64_t)c),
                         golden_bits_load(d->dtype, d->actual, base + (uint64_t)c));
            if (!match)
                continue;
            int64_t a = j == 0 ? 0 : (int64_t)sorted[j - 1] + 1, b = j == m ? x->R : sorted[j];
            fit_lo = a < fit_lo ? a : fit_lo;
            fit_hi = b > fit_hi ? b : fit_hi;
        }
        *lo = fit_lo > *lo ? fit_lo : *lo;
        *hi = fit_hi < *hi ? fit_hi : *hi;
    }
    rc = 0;
done:
    free(ops);
    free(sorted);
    free(rank);
    free(out);
    return rc;
}

/* pg_fit_group() over the tokens, as many at a time as FIT_ELEMENTS
 * allows (at least one). */
static int pg_fit_x(pg_ctx *x, const diag_data *d, const int64_t *tokens, size_t n, int64_t *lo,
                    int64_t *hi, char *err, size_t err_len)
{
    size_t per_token = (size_t)(x->K + 1) * (size_t)x->K * (size_t)x->H;
    size_t group = FIT_ELEMENTS / per_token ? FIT_ELEMENTS / per_token : 1;
    for (size_t start = 0; start < n && *lo <= *hi; start += group)
        if (pg_fit_group(x, d, tokens + start, n - start < group ? n - start : group, lo, hi, err,
                         err_len) != 0)
            return -1;
    return 0;
}

static int pg_prepare_rows_ignored(pg_ctx *x, const diag_data *d, const int64_t *sample, size_t n,
                                   char *err, size_t err_len)
{
    int64_t lo = 0, hi = x->R;
    x->x_found = false;
    if ((size_t)(x->K + 1) * (size_t)x->K * (size_t)x->H > FIT_ELEMENTS)
        return 0; /* one token's variants alone would exceed the budget */
    if (pg_fit_x(x, d, sample, n, &lo, &hi, err, err_len) != 0)
        return -1;
    if (lo > hi)
        return 0;
    if (!x->owner) {
        x->owner = malloc((size_t)(x->R > 0 ? x->R : 1) * sizeof *x->owner);
        if (!x->owner) {
            snprintf(err, err_len, "out of memory for a diagnosis model");
            return -1;
        }
        for (int64_t r = 0; r < x->R; r++)
            x->owner[r] = -1; /* a row no slot reads */
        for (int64_t i = 0; i < x->T * x->K; i++)
            if (x->idx[i] < x->R)
                x->owner[x->idx[i]] = (int32_t)i;
    }
    /* Narrow [lo, hi] with the tokens that read rows inside it: the token
     * reading row r tells X <= r from X > r, unless that row adds nothing
     * visible.  Sixteen rows a round, spread over the interval. */
    for (int round = 0; round < 12 && lo < hi; round++) {
        int64_t tokens[16];
        size_t count = 0;
        for (int64_t s = 0; s < 16; s++) {
            int64_t r = lo + (hi - lo) * s / 16;
            if (x->owner[r] < 0)
                continue;
            int64_t t = x->owner[r] / x->K;
            if (count == 0 || tokens[count - 1] != t)
                tokens[count++] = t;
        }
        int64_t before_lo = lo, before_hi = hi;
        if (pg_fit_x(x, d, tokens, count, &lo, &hi, err, err_len) != 0)
            return -1;
        if (lo > hi)
            return 0;
        if (lo == before_lo && hi == before_hi)
            break;
    }
    if (lo >= x->R)
        return 0; /* only "nothing ignored" fits */
    x->x_found = true;
    x->x_lo = lo;
    x->x_hi = hi;
    return 0;
}

/* ---------------------------------------------------------------------- */
/* The catalogue of operator-level models                                 */
/* ---------------------------------------------------------------------- */

typedef struct op_model {
    const golden_hypothesis_info *info; /* its catalogue entry: id and sentence */
    /* How many variants apply to this problem (0: the model does not). */
    int (*variants)(const pg_ctx *x);
    /* Optional: a search on the sample before the variants are counted. */
    int (*prepare)(pg_ctx *x, const diag_data *d, const int64_t *sample, size_t n, char *err,
                   size_t err_len);
    /* Optional: the variants worth trying, when trying all would cost too
     * much; fills at most *count of them into list and sets *count. */
    void (*select)(const pg_ctx *x, const diag_data *d, const int64_t *sample, size_t n, int *list,
                   size_t *count);
    int (*compute)(pg_ctx *x, int variant, const int64_t *tokens, size_t n, void *out, char *err,
                   size_t err_len);
    void (*describe)(const pg_ctx *x, int variant, char *out, size_t len);
} op_model;

static int v_narrow16(const pg_ctx *x)
{
    return x->dtype != MOEPERM_FLOAT;
}

static int v_one(const pg_ctx *x)
{
    return x->K >= 2;
}

static int v_pairwise(const pg_ctx *x)
{
    return x->K >= 3 ? 2 : 0;
}

static int v_zero_start(const pg_ctx *x)
{
    return x->K < MOEPERM_MAX_TOP_K;
}

static int v_dropped(const pg_ctx *x)
{
    return !x->has_dropped ? 0 : x->R == 0 ? 1 : 3;
}

static int v_missing(const pg_ctx *x)
{
    return (int)x->K;
}

static int v_rows_ignored(const pg_ctx *x)
{
    return x->x_found;
}

static int v_ftz(const pg_ctx *x)
{
    return 3;
}

static int v_saturate(const pg_ctx *x)
{
    return 2;
}

static void d_acc(const pg_ctx *x, int v, char *out, size_t len)
{
    snprintf(out, len, "the accumulator is rounded to %s after every addition",
             moeperm_dtype_name(x->dtype));
}

static void d_truncate(const pg_ctx *x, int v, char *out, size_t len)
{
    snprintf(out, len, "the fp32 sum is narrowed to %s by truncation, not to nearest even",
             moeperm_dtype_name(x->dtype));
}

static void d_half_away(const pg_ctx *x, int v, char *out, size_t len)
{
    snprintf(out, len, "ties are rounded away from zero when narrowing to %s, not to even",
             moeperm_dtype_name(x->dtype));
}

static void d_reversed(const pg_ctx *x, int v, char *out, size_t len)
{
    snprintf(out, len, "slots are added from k = %" PRId64 " down to k = 0", x->K - 1);
}

static void d_pairwise(const pg_ctx *x, int v, char *out, size_t len)
{
    if (v == 0)
        snprintf(out, len, "slots are added as a tree of neighbours: (0+1)+(2+3)+...");
    else
        snprintf(out, len,
                 "slots are added as a tree folding the upper half onto the lower: "
                 "slot k plus slot k+%" PRId64 " first",
                 (x->K + 1) / 2);
}

static void d_zero_start(const pg_ctx *x, int v, char *out, size_t len)
{
    snprintf(out, len,
             "the accumulator starts at +0.0 instead of slot 0 (a sum of -0.0 comes "
             "out +0.0)");
}

static void d_dropped(const pg_ctx *x, int v, char *out, size_t len)
{
    static const char *const what[] = {"add +0.0", "add row (index mod %" PRId64 ")",
                                       "add row %" PRId64 " (the last)"};
    char read[64];
    snprintf(read, sizeof read, what[v], v == 1 ? x->R : x->R - 1);
    snprintf(out, len,
             "slots whose index is %" PRId64 " (the rows of permuted_output_grad) or more are not "
             "skipped: they %s",
             x->R, read);
}

static void d_missing(const pg_ctx *x, int v, char *out, size_t len)
{
    snprintf(out, len, "slot %d is never added", v);
}

static void d_rows_ignored(const pg_ctx *x, int v, char *out, size_t len)
{
    if (x->x_lo == x->x_hi)
        snprintf(out, len, "rows %" PRId64 " and above of permuted_output_grad contribute nothing",
                 x->x_lo);
    else
        snprintf(out, len,
                 "rows %" PRId64 " and above of permuted_output_grad contribute nothing (any "
                 "limit from %" PRId64 " to %" PRId64 " fits)",
                 x->x_lo, x->x_lo, x->x_hi);
}

static void d_ftz(const pg_ctx *x, int v, char *out, size_t len)
{
    static const char *const what[] = {
        "subnormal inputs are read as zero",
        "subnormal inputs are read as zero and subnormal results flushed to zero",
        "subnormals are flushed to zero in the inputs, after every addition and in the results",
    };
    snprintf(out, len, "%s", what[v]);
}

static void d_saturate(const pg_ctx *x, int v, char *out, size_t len)
{
    if (v == 0)
        snprintf(out, len,
                 "a finite sum that overflows %s becomes +-0x%04" PRIx64 " (the largest finite "
                 "value), not +-inf",
                 moeperm_dtype_name(x->dtype), golden_bits_max_finite(x->dtype));
    else
        snprintf(out, len,
                 "every fp32 addition that overflows gives +-0x7f7fffff (the largest "
                 "finite value), not +-inf");
}

/* For a large top_k, the slots the differences point at: in a token whose
 * slot k is missing, expected minus actual is about slot k's row, so the
 * slot whose row is nearest (sum of absolute differences, in double) is the
 * candidate; a few differing sample tokens each name one. */
static void s_missing(const pg_ctx *x, const diag_data *d, const int64_t *sample, size_t n,
                      int *list, size_t *count)
{
    size_t cap = *count, found = 0;
    if (x->K <= MISSING_ALL_K) {
        for (int64_t k = 0; k < x->K && found < cap; k++)
            list[found++] = (int)k;
        *count = found;
        return;
    }
    size_t es = moeperm_dtype_size(x->dtype);
    for (size_t i = 0, tried = 0; i < n && tried < 8 && found < cap; i++) {
        int64_t t = sample[i];
        if (d->row_differ[t] == 0)
            continue;
        tried++;
        double best = -1;
        int best_k = -1;
        for (int64_t k = 0; k < x->K; k++) {
            int32_t r = x->idx[t * x->K + k];
            if (r >= x->R)
                continue;
            const uint8_t *row = (const uint8_t *)x->grad + (size_t)r * (size_t)x->H * es;
            double score = 0;
            for (int64_t c = 0; c < x->H; c++) {
                uint64_t i_e = (uint64_t)t * (uint64_t)x->H + (uint64_t)c;
                double e =
                    golden_bits_double(x->dtype, golden_bits_load(x->dtype, d->expected, i_e));
                double a = golden_bits_double(x->dtype, golden_bits_load(x->dtype, d->actual, i_e));
                double g =
                    golden_bits_double(x->dtype, golden_bits_load(x->dtype, row, (uint64_t)c));
                double diff = (e - a) - g;
                if (diff == diff)
                    score += diff < 0 ? -diff : diff;
            }
            if (best_k < 0 || score < best) {
                best = score;
                best_k = (int)k;
            }
        }
        bool known = best_k < 0;
        for (size_t j = 0; j < found && !known; j++)
            known = list[j] == best_k;
        if (!known)
            list[found++] = best_k;
    }
    *count = found;
}

static int p_rows_ignored(pg_ctx *x, const diag_data *d, const int64_t *s, size_t n, char *e,
                          size_t l)
{
    return pg_prepare_rows_ignored(x, d, s, n, e, l);
}

/* The catalogue: every operator's models, then the shape-level ones. */
static const golden_hypothesis_info catalogue[] = {
    {"acc-in-output-dtype", "MoeTokenPermuteGrad",
     "the accumulator is rounded to bf16/fp16 after every addition"},
    {"truncate", "MoeTokenPermuteGrad",
     "the fp32 sum is narrowed by truncation instead of to nearest even"},
    {"round-half-away", "MoeTokenPermuteGrad",
     "ties are rounded away from zero instead of to even when narrowing"},
    {"k-order-reversed", "MoeTokenPermuteGrad", "slots are added from k = K-1 down to 0"},
    {"k-order-pairwise", "MoeTokenPermuteGrad",
     "slots are added as a pairwise tree (neighbours, or folded halves)"},
    {"zero-start", "MoeTokenPermuteGrad", "the accumulator starts at +0.0 instead of slot 0"},
    {"dropped-not-skipped", "MoeTokenPermuteGrad",
     "slots with an index >= rows are added (as +0.0, row index mod rows, or the last row)"},
    {"missing-slot", "MoeTokenPermuteGrad", "slot k is never added"},
    {"rows-ignored-from", "MoeTokenPermuteGrad",
     "rows at or above some index X contribute nothing"},
    {"ftz", "MoeTokenPermuteGrad",
     "subnormals are flushed to zero (inputs, each addition, results)"},
    {"saturate", "MoeTokenPermuteGrad",
     "overflow gives the largest finite value instead of infinity"},
    {"token-block-shift", NULL, "rows of the output hold the values of other rows"},
    {"unwritten", NULL, "a region of the output is left as zeros or as it was"},
    {"ftz", NULL, "subnormal results are flushed to zero"},
    {"saturate", NULL, "results that overflow become the largest finite value"},
    {"nan-bits", NULL, "only the sign or payload of NaNs differs (with strict NaN rules)"},
};

/* MoeTokenPermuteGrad: its catalogue entries in order, one model each. */
static const op_model permute_grad_models[] = {
    {&catalogue[0], v_narrow16, NULL, NULL, pg_acc_in_output_dtype, d_acc},
    {&catalogue[1], v_narrow16, NULL, NULL, pg_truncate, d_truncate},
    {&catalogue[2], v_narrow16, NULL, NULL, pg_half_away, d_half_away},
    {&catalogue[3], v_one, NULL, NULL, pg_reversed, d_reversed},
    {&catalogue[4], v_pairwise, NULL, NULL, pg_pairwise, d_pairwise},
    {&catalogue[5], v_zero_start, NULL, NULL, pg_zero_start, d_zero_start},
    {&catalogue[6], v_dropped, NULL, NULL, pg_dropped, d_dropped},
    {&catalogue[7], v_missing, NULL, s_missing, pg_missing, d_missing},
    {&catalogue[8], v_rows_ignored, p_rows_ignored, NULL, pg_rows_ignored, d_rows_ignored},
    {&catalogue[9], v_ftz, NULL, NULL, pg_ftz, d_ftz},
    {&catalogue[10], v_saturate, NULL, NULL, pg_saturate, d_saturate},
};

static const golden_diag_tensor *find_input(const golden_diag_problem *p, const char *name)
{
    for (size_t i = 0; i < p->input_count; i++)
        if (p->inputs[i].name && strcmp(p->inputs[i].name, name) == 0)
            return &p->inputs[i];
    return NULL;
}

static bool find_attr(const golden_diag_problem *p, const char *name, int64_t *value)
{
    for (size_t i = 0; i < p->attr_count; i++) {
        if (p->attrs[i].name && strcmp(p->attrs[i].name, name) == 0) {
            *value = p->attrs[i].value;
            return true;
        }
    }
    return false;
}

/* Whether p is a MoeTokenPermuteGrad run the models can rearrange. */
static bool pg_setup(const golden_diag_problem *p, const golden_diag_tensor *expected, pg_ctx *x)
{
    memset(x, 0, sizeof *x);
    const golden_diag_tensor *g = find_input(p, "permuted_output_grad");
    const golden_diag_tensor *ix = find_input(p, "sorted_indices");
    int64_t k;
    if (!g || !ix || (!find_attr(p, "top_k", &k) && !find_attr(p, "num_topk", &k)))
        return false;
    if (g->ndim != 2 || ix->ndim != 1 || expected->ndim != 2 || ix->dtype != MOEPERM_INT32 ||
        g->dtype != expected->dtype || !golden_bits_is_float(g->dtype) || k < 1 ||
        k > MOEPERM_MAX_TOP_K || g->dims[1] != expected->dims[1] ||
        ix->dims[0] != expected->dims[0] * k || g->dims[0] > ix->dims[0] ||
        ix->dims[0] > INT32_MAX || (g->dims[0] > 0 && !g->data) || (ix->dims[0] > 0 && !ix->data))
        return false;
    x->dtype = g->dtype;
    x->grad = g->data;
    x->idx = ix->data;
    x->R = g->dims[0];
    x->H = g->dims[1];
    x->T = expected->dims[0];
    x->K = k;
    for (int64_t i = 0; i < x->T * x->K; i++) {
        if (x->idx[i] < 0)
            return false;
        x->has_dropped |= x->idx[i] >= x->R;
    }
    return x->H > 0;
}

typedef struct op_table {
    const char *op, *output, *noun;
    const op_model *models;
    size_t count;
} op_table;

static const op_table tables[] = {
    {"MoeTokenPermuteGrad", "input_grad", "token", permute_grad_models,
     sizeof permute_grad_models / sizeof permute_grad_models[0]},
};

/* ---------------------------------------------------------------------- */
/* The search                                                             */
/* ---------------------------------------------------------------------- */

/* Runs a model over the given rows block by block and tallies it; stops
 * early once it contradicts more elements than could ever be explained. */
static int evaluate(pg_ctx *x, const op_model *m, int variant, const diag_data *d,
                    const int64_t *rows, size_t n, bool all_rows, tally *t, char *err,
                    size_t err_len)
{
    size_t per_row = (size_t)(x->K + 1) * (size_t)x->H * sizeof(float);
    size_t block = BLOCK_BYTES / per_row ? BLOCK_BYTES / per_row : 1;
    size_t es = moeperm_dtype_size(d->dtype);
    uint8_t *out = malloc((block < n ? block : n) * (size_t)d->cols * es + 1);
    int64_t *ids = all_rows ? malloc(block * sizeof *ids) : NULL;
    int rc = -1;
    if (!out || (all_rows && !ids)) {
        snprintf(err, err_len, "out of memory for a diagnosis model");
        goto done;
    }
    *t = (tally){0, 0};
    for (size_t start = 0; start < n; start += block) {
        size_t count = n - start < block ? n - start : block;
        const int64_t *these = rows + start;
        if (all_rows) {
            for (size_t i = 0; i < count; i++)
                ids[i] = (int64_t)(start + i);
            these = ids;
        }
        if (m->compute(x, variant, these, count, out, err, err_len) != 0)
            goto done;
        tally_rows(d, these, count, out, t);
        if (t->contradicted > d->differing)
            break;
    }
    rc = 0;
done:
    free(out);
    free(ids);
    return rc;
}

typedef struct trial {
    const op_model *m;
    int variant;
    tally sample;
} trial;

static int sample_rank(const trial *a, const trial *b)
{
    bool ea = a->sample.contradicted == 0, eb = b->sample.contradicted == 0;
    if (ea != eb)
        return ea ? -1 : 1;
    int64_t sa = (int64_t)a->sample.explained - (int64_t)a->sample.contradicted;
    int64_t sb = (int64_t)b->sample.explained - (int64_t)b->sample.contradicted;
    return sa > sb ? -1 : sa < sb ? 1 : 0;
}

static int operator_models(const op_table *table, pg_ctx *x, const diag_data *d, candidates *cs,
                           char *err, size_t err_len)
{
    /* The sample: differing rows spread over all of them, and some equal
     * rows, which a model must leave equal. */
    int64_t sample[SAMPLE_DIFFERING + SAMPLE_EQUAL];
    size_t n = 0, per_token = (size_t)(x->K + 1) * (size_t)x->H;
    size_t budget = SAMPLE_ELEMENTS / per_token;
    uint64_t want_d = budget * 3 / 4 < 2                  ? 2
                      : budget * 3 / 4 > SAMPLE_DIFFERING ? SAMPLE_DIFFERING
                                                          : budget * 3 / 4;
    uint64_t want_e = budget / 4 < 1 ? 1 : budget / 4 > SAMPLE_EQUAL ? SAMPLE_EQUAL : budget / 4;
    uint64_t differ_rows = 0, equal_rows;
    for (int64_t r = 0; r < d->rows; r++)
        differ_rows += d->row_differ[r] > 0;
    equal_rows = (uint64_t)d->rows - differ_rows;
    uint64_t seen_d = 0, seen_e = 0, taken_d = 0, taken_e = 0;
    for (int64_t r = 0; r < d->rows; r++) {
        if (d->row_differ[r] > 0) {
            if (taken_d < want_d && seen_d * want_d >= taken_d * differ_rows) {
                sample[n++] = r;
                taken_d++;
            }
            seen_d++;
        } else {
            if (taken_e < want_e && seen_e * want_e >= taken_e * equal_rows) {
                sample[n++] = r;
                taken_e++;
            }
            seen_e++;
        }
    }

    trial trials[256];
    size_t count = 0;
    for (size_t i = 0; i < table->count; i++) {
        const op_model *m = &table->models[i];
        if (m->prepare && m->prepare(x, d, sample, n, err, err_len) != 0)
            return -1;
        int list[MISSING_ALL_K];
        size_t listed = sizeof list / sizeof list[0];
        int variants = m->variants(x);
        if (m->select) {
            m->select(x, d, sample, n, list, &listed);
            variants = (int)listed;
        }
        for (int i_v = 0; i_v < variants && count < sizeof trials / sizeof trials[0]; i_v++) {
            int v = m->select ? list[i_v] : i_v;
            trial t = {m, v, {0, 0}};
            if (evaluate(x, m, v, d, sample, n, false, &t.sample, err, err_len) != 0)
                return -1;
            if (t.sample.explained > t.sample.contradicted)
                trials[count++] = t;
        }
    }
    /* The best few on the sample run on everything. */
    for (size_t i = 1; i < count; i++)
        for (size_t j = i; j > 0 && sample_rank(&trials[j], &trials[j - 1]) < 0; j--) {
            trial s = trials[j];
            trials[j] = trials[j - 1];
            trials[j - 1] = s;
        }
    for (size_t i = 0; i < count && i < CONFIRM_MAX; i++) {
        tally t;
        if (evaluate(x, trials[i].m, trials[i].variant, d, NULL, (size_t)d->rows, true, &t, err,
                     err_len) != 0)
            return -1;
        char detail[256];
        trials[i].m->describe(x, trials[i].variant, detail, sizeof detail);
        offer(cs, trials[i].m->info->id, (int)(trials[i].m - table->models), detail, t);
    }
    return 0;
}

static int by_report_order(const void *pa, const void *pb)
{
    const candidate *a = pa, *b = pb;
    if (a->f.exact != b->f.exact)
        return a->f.exact ? -1 : 1;
    if (a->f.exact)
        return a->rank - b->rank;
    if (a->f.explained != b->f.explained)
        return a->f.explained > b->f.explained ? -1 : 1;
    return a->rank - b->rank;
}

int golden_diagnose(const golden_diag_problem *p, const golden_diag_tensor *expected,
                    const void *actual, bool strict_nan, golden_diagnosis *out, char *err,
                    size_t err_len)
{
    memset(out, 0, sizeof *out);
    diag_data d = {expected->dtype, 0, 1, expected->data, actual, strict_nan, 0, NULL, "row"};
    if (moeperm_dtype_size(d.dtype) == 0) {
        snprintf(err, err_len, "%s: dtype %d is not one the diagnosis reads",
                 expected->name ? expected->name : "output", (int)d.dtype);
        return -1;
    }
    /* [rows, cols]: the first dim against the rest. */
    d.rows = expected->ndim > 0 ? expected->dims[0] : 1;
    for (uint64_t i = 1; i < expected->ndim; i++)
        d.cols *= expected->dims[i];
    if (d.rows == 0 || d.cols == 0)
        return 0;
    const op_table *table = NULL;
    for (size_t i = 0; i < sizeof tables / sizeof tables[0]; i++)
        if (p && p->op && strcmp(p->op, tables[i].op) == 0 && expected->name &&
            strcmp(expected->name, tables[i].output) == 0)
            table = &tables[i];
    if (table)
        d.noun = table->noun;

    d.row_differ = calloc((size_t)d.rows, sizeof *d.row_differ);
    if (!d.row_differ) {
        snprintf(err, err_len, "out of memory for the diagnosis");
        return -1;
    }
    for (int64_t r = 0; r < d.rows; r++) {
        uint64_t base = (uint64_t)r * (uint64_t)d.cols;
        for (int64_t c = 0; c < d.cols; c++)
            d.row_differ[r] += !same(&d, golden_bits_load(d.dtype, d.expected, base + (uint64_t)c),
                                     golden_bits_load(d.dtype, d.actual, base + (uint64_t)c));
        d.differing += d.row_differ[r];
    }
    out->differing = d.differing;
    int rc = 0;
    candidates *cs = calloc(1, sizeof *cs);
    if (!cs) {
        snprintf(err, err_len, "out of memory for the diagnosis");
        free(d.row_differ);
        return -1;
    }
    if (d.differing == 0)
        goto done;

    pg_ctx x;
    if (table && pg_setup(p, expected, &x)) {
        rc = operator_models(table, &x, &d, cs, err, err_len);
        free(x.owner);
        if (rc != 0)
            goto done;
    }
    if (shape_block_shift(&d, cs) != 0 || shape_unwritten(&d, cs) != 0) {
        snprintf(err, err_len, "out of memory for the diagnosis");
        rc = -1;
        goto done;
    }
    shape_ftz(&d, cs);
    shape_saturate(&d, cs);
    shape_nan_bits(&d, cs);

    /* Exact findings alone when there are some; otherwise those that
     * explain more than they contradict. */
    qsort(cs->c, cs->n, sizeof cs->c[0], by_report_order);
    bool any_exact = cs->n > 0 && cs->c[0].f.exact;
    for (size_t i = 0; i < cs->n && out->count < GOLDEN_DIAG_MAX_FINDINGS; i++) {
        const golden_finding *f = &cs->c[i].f;
        if (any_exact ? f->exact : f->explained > f->contradicted)
            out->finding[out->count++] = *f;
    }
done:
    free(cs);
    free(d.row_differ);
    return rc;
}

void golden_diagnosis_report(FILE *f, const golden_diagnosis *d, const char *indent)
{
    if (d->differing == 0)
        return;
    if (d->count == 0)
        fprintf(f, "%sdiagnosis: no known bug reproduces these differences\n", indent);
    for (size_t i = 0; i < d->count; i++) {
        const golden_finding *g = &d->finding[i];
        if (g->exact)
            fprintf(f, "%sdiagnosis: %s: %s (reproduces the output exactly)\n", indent, g->id,
                    g->detail);
        else
            fprintf(f,
                    "%sdiagnosis: %s: %s (explains %" PRIu64 " of %" PRIu64
                    " differing elements, contradicts %" PRIu64 " others)\n",
                    indent, g->id, g->detail, g->explained, d->differing, g->contradicted);
    }
}

const golden_hypothesis_info *golden_diagnosis_catalogue(size_t *count)
{
    *count = sizeof catalogue / sizeof catalogue[0];
    return catalogue;
}

/*
 * The diagnosis names the bug: each bug of the catalogue is written here
 * as a naive loop of its own (the tests' conversions from naive.c, plain
 * float additions in the order the bug has), its output is fed back, and
 * the diagnosis must name that bug's id as an exact finding, on several
 * shapes and every dtype it applies to.  A correct output gives no
 * findings; random corruption gives no exact one.
 */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "golden/diagnose.h"
#include "naive.h"
#include "naive_permute_grad.h"

typedef enum values { NORMAL, NEGZERO, SUBNORMAL, HUGE_VALUES, TIES, WITH_NAN, ORDER } values;

typedef struct tcase {
    moeperm_dtype dtype;
    int64_t T, K, H, R;
    void *grad;
    int32_t *idx;
    void *expected;
} tcase;

/* ---------------------------------------------------------------------- */
/* The tests' own element access                                          */
/* ---------------------------------------------------------------------- */

static float widen(moeperm_dtype dtype, const void *data, int64_t i)
{
    if (dtype == MOEPERM_FLOAT) {
        float v;
        memcpy(&v, (const char *)data + 4 * i, 4);
        return v;
    }
    uint16_t v;
    memcpy(&v, (const char *)data + 2 * i, 2);
    return dtype == MOEPERM_BF16 ? naive_bf16_to_float(v) : naive_fp16_to_float(v);
}

static void store_bits(moeperm_dtype dtype, void *data, int64_t i, uint32_t bits)
{
    if (dtype == MOEPERM_FLOAT)
        memcpy((char *)data + 4 * i, &bits, 4);
    else {
        uint16_t v = (uint16_t)bits;
        memcpy((char *)data + 2 * i, &v, 2);
    }
}

static uint32_t load_bits(moeperm_dtype dtype, const void *data, int64_t i)
{
    if (dtype == MOEPERM_FLOAT) {
        uint32_t v;
        memcpy(&v, (const char *)data + 4 * i, 4);
        return v;
    }
    uint16_t v;
    memcpy(&v, (const char *)data + 2 * i, 2);
    return v;
}

static uint32_t narrow(moeperm_dtype dtype, float v)
{
    if (dtype == MOEPERM_FLOAT)
        return naive_bits(v);
    return dtype == MOEPERM_BF16 ? naive_float_to_bf16(v) : naive_float_to_fp16(v);
}

/* v narrowed to dtype and widened back: what a value kept in dtype is. */
static float through(moeperm_dtype dtype, float v)
{
    uint32_t bits = narrow(dtype, v);
    if (dtype == MOEPERM_FLOAT)
        return naive_float(bits);
    return dtype == MOEPERM_BF16 ? naive_bf16_to_float((uint16_t)bits)
                                 : naive_fp16_to_float((uint16_t)bits);
}

static const char *dtype_name(moeperm_dtype dtype)
{
    return dtype == MOEPERM_FLOAT ? "float32" : dtype == MOEPERM_BF16 ? "bf16" : "float16";
}

static float grad_at(const tcase *c, int64_t row, int64_t h)
{
    return widen(c->dtype, c->grad, row * c->H + h);
}

/* ---------------------------------------------------------------------- */
/* Cases                                                                  */
/* ---------------------------------------------------------------------- */

static float random_value(uint64_t *rng, moeperm_dtype dtype, values kind)
{
    uint64_t r = naive_rand(rng);
    float sign = (r & 1) ? -1.0f : 1.0f;
    float mant = 1.0f + (float)((r >> 8) & 0xffff) / 65536.0f;
    switch (kind) {
    case NEGZERO:
        return (r >> 40) % 4 ? -0.0f : sign * mant;
    case SUBNORMAL: {
        /* tiny values whose sums are subnormal in the dtype */
        float tiny = dtype == MOEPERM_FLOAT16 ? 6.0e-8f : 1.0e-39f;
        return (r >> 40) % 3 ? sign * tiny * (float)((r >> 20) % 200) : sign * mant;
    }
    case HUGE_VALUES: {
        float big = dtype == MOEPERM_FLOAT16 ? 30000.0f : dtype == MOEPERM_BF16 ? 1.5e38f : 2.0e38f;
        return (r >> 40) % 2 ? sign * big * mant * 0.6f : sign * mant;
    }
    case TIES:
        /* few significant bits over a small exponent range: sums that land
         * exactly halfway when narrowed */
        return sign * (float)((r >> 12) % 512) * ldexpf(1.0f, (int)((r >> 30) % 8) - 4);
    case ORDER: {
        /* Sums whose fp32 rounding depends on the order and lands on either
         * side of a bf16 or fp16 tie: a base B, half a 16-bit ulp of B, and
         * quarters of an fp32 ulp of B. */
        float b = dtype == MOEPERM_FLOAT16 ? 16.0f : 1.0f;
        float half = dtype == MOEPERM_FLOAT16 ? ldexpf(1.0f, -7) : ldexpf(1.0f, -8);
        float quarter = dtype == MOEPERM_FLOAT16 ? ldexpf(1.0f, -21) : ldexpf(1.0f, -25);
        const float set[5] = {b, half, quarter, 1.5f * quarter, -quarter};
        return set[(r >> 40) % 5];
    }
    case WITH_NAN:
        return (r >> 40) % 5 == 0 ? NAN : sign * mant;
    default:
        return sign * mant * ldexpf(1.0f, -(int)((r >> 30) % 9));
    }
}

static tcase make_case(moeperm_dtype dtype, int64_t T, int64_t K, int64_t H, int64_t R, values kind,
                       uint64_t seed)
{
    tcase c = {dtype, T, K, H, R < 0 ? T * K : R, NULL, NULL, NULL};
    size_t es = naive_size(dtype);
    uint64_t rng = seed;
    c.grad = malloc((size_t)(c.R * H) * es + 1);
    c.idx = malloc((size_t)(T * K) * sizeof(int32_t));
    c.expected = malloc((size_t)(T * H) * es);
    assert_true(c.grad && c.idx && c.expected);
    for (int64_t i = 0; i < c.R * H; i++)
        store_bits(dtype, c.grad, i, narrow(dtype, random_value(&rng, dtype, kind)));
    naive_permutation(&rng, c.idx, T * K);
    naive_permute_grad(dtype, c.grad, c.R, H, c.idx, T, K, c.expected);
    return c;
}

static void free_case(tcase *c)
{
    free(c->grad);
    free(c->idx);
    free(c->expected);
}

/* ---------------------------------------------------------------------- */
/* The bugs, as naive loops                                               */
/* ---------------------------------------------------------------------- */

typedef struct bug {
    const char *id;
    int param; /* the slot, the row limit, the variant */
} bug;

static bool kept(const tcase *c, int32_t r)
{
    return r < c->R;
}

/* fp16 truncation and ties-away in double: the grid step of |v|'s binade. */
static uint32_t fp16_round(float v, bool half_away)
{
    double a = fabs((double)v);
    if (v != v)
        return naive_float_to_fp16(v);
    int e = a == 0 ? -14 : (int)floor(log2(a));
    if (e < -14)
        e = -14;
    double step = ldexp(1.0, e - 10);
    double q = half_away ? floor(a / step + 0.5) * step : floor(a / step) * step;
    if (!half_away && q > 65504)
        q = 65504;
    float f = (float)(v < 0 ? -q : q);
    return q >= 65536 ? naive_float_to_fp16(v < 0 ? -INFINITY : INFINITY) : naive_float_to_fp16(f);
}

static uint32_t narrow_bug(moeperm_dtype dtype, float v, const char *rule)
{
    uint32_t bits = naive_bits(v);
    if (v != v)
        return narrow(dtype, v);
    bool half_away = strcmp(rule, "round-half-away") == 0;
    if (dtype == MOEPERM_BF16) {
        uint32_t mag = bits & 0x7fffffffu, sign = (bits >> 16) & 0x8000u;
        if (mag >= 0x7f800000u)
            return sign | (mag >> 16);
        return sign | ((half_away ? mag + 0x8000u : mag) >> 16);
    }
    return fp16_round(v, half_away);
}

static float ftz(float v)
{
    return fabsf(v) < 1.1754943508e-38f ? copysignf(0.0f, v) : v;
}

/* The pairwise tree of neighbours over the present slots' values. */
static float tree(const float *v, const bool *present, int n, bool *out_present)
{
    if (n == 1) {
        *out_present = present[0];
        return v[0];
    }
    float next[512];
    bool pnext[512];
    int m = (n + 1) / 2;
    for (int i = 0; i < m; i++) {
        if (2 * i + 1 >= n) {
            next[i] = v[2 * i];
            pnext[i] = present[2 * i];
        } else if (present[2 * i] && present[2 * i + 1]) {
            next[i] = v[2 * i] + v[2 * i + 1];
            pnext[i] = true;
        } else {
            next[i] = present[2 * i] ? v[2 * i] : v[2 * i + 1];
            pnext[i] = present[2 * i] || present[2 * i + 1];
        }
    }
    return tree(next, pnext, m, out_present);
}

/* out = what a kernel with the bug writes. */
static void buggy(const tcase *c, bug b, void *out)
{
    moeperm_dtype dt = c->dtype;
    for (int64_t t = 0; t < c->T; t++) {
        for (int64_t h = 0; h < c->H; h++) {
            const int32_t *s = c->idx + t * c->K;
            float acc = 0.0f;
            uint32_t bits;
            if (strcmp(b.id, "acc-in-output-dtype") == 0) {
                acc = kept(c, s[0]) ? grad_at(c, s[0], h) : 0.0f;
                for (int64_t k = 1; k < c->K; k++)
                    if (kept(c, s[k]))
                        acc = through(dt, acc + grad_at(c, s[k], h));
                bits = narrow(dt, acc);
            } else if (strcmp(b.id, "truncate") == 0 || strcmp(b.id, "round-half-away") == 0) {
                acc = kept(c, s[0]) ? grad_at(c, s[0], h) : 0.0f;
                for (int64_t k = 1; k < c->K; k++)
                    if (kept(c, s[k]))
                        acc = acc + grad_at(c, s[k], h);
                bits = narrow_bug(dt, acc, b.id);
            } else if (strcmp(b.id, "k-order-reversed") == 0) {
                acc = kept(c, s[c->K - 1]) ? grad_at(c, s[c->K - 1], h) : 0.0f;
                for (int64_t k = c->K - 2; k >= 0; k--)
                    if (kept(c, s[k]))
                        acc = acc + grad_at(c, s[k], h);
                bits = narrow(dt, acc);
            } else if (strcmp(b.id, "k-order-pairwise") == 0) {
                float v[512];
                bool p[512], any;
                for (int64_t k = 0; k < c->K; k++) {
                    p[k] = kept(c, s[k]);
                    v[k] = p[k] ? grad_at(c, s[k], h) : 0.0f;
                }
                acc = tree(v, p, (int)c->K, &any);
                bits = narrow(dt, any ? acc : 0.0f);
            } else if (strcmp(b.id, "zero-start") == 0) {
                acc = 0.0f;
                for (int64_t k = 0; k < c->K; k++)
                    if (kept(c, s[k]))
                        acc = acc + grad_at(c, s[k], h);
                bits = narrow(dt, acc);
            } else if (strcmp(b.id, "dropped-not-skipped") == 0) {
                /* the kernel reads row index mod R for a dropped slot */
                acc = grad_at(c, s[0] % c->R, h);
                for (int64_t k = 1; k < c->K; k++)
                    acc = acc + grad_at(c, s[k] % c->R, h);
                bits = narrow(dt, acc);
            } else if (strcmp(b.id, "missing-slot") == 0 ||
                       strcmp(b.id, "rows-ignored-from") == 0) {
                bool missing = b.id[0] == 'm';
                bool first = true;
                for (int64_t k = 0; k < c->K; k++) {
                    bool use = kept(c, s[k]) && (missing ? k != b.param : s[k] < b.param);
                    if (k == 0 && !use) {
                        acc = 0.0f;
                        first = false;
                        continue;
                    }
                    if (!use)
                        continue;
                    acc = first ? grad_at(c, s[k], h) : acc + grad_at(c, s[k], h);
                    first = false;
                }
                bits = narrow(dt, acc);
            } else if (strcmp(b.id, "ftz") == 0) {
                acc = kept(c, s[0]) ? ftz(grad_at(c, s[0], h)) : 0.0f;
                for (int64_t k = 1; k < c->K; k++)
                    if (kept(c, s[k]))
                        acc = acc + ftz(grad_at(c, s[k], h));
                bits = narrow(dt, acc);
                if (b.param == 1 &&
                    fabsf(through(dt, acc)) <
                        (dt == MOEPERM_FLOAT16 ? 6.103515625e-05f : 1.1754943508e-38f))
                    bits &= dt == MOEPERM_FLOAT ? 0x80000000u : 0x8000u;
            } else if (strcmp(b.id, "saturate") == 0) {
                /* param 1: every fp32 addition saturates too */
                acc = kept(c, s[0]) ? grad_at(c, s[0], h) : 0.0f;
                for (int64_t k = 1; k < c->K; k++) {
                    if (!kept(c, s[k]))
                        continue;
                    float x = grad_at(c, s[k], h), sum = acc + x;
                    if (b.param == 1 && isinf(sum) && isfinite(acc) && isfinite(x))
                        sum = copysignf(3.4028234664e38f, sum);
                    acc = sum;
                }
                bits = narrow(dt, acc);
                if (isinf(through(dt, acc)) && isfinite(acc))
                    bits = (acc < 0 ? (dt == MOEPERM_FLOAT ? 0x80000000u : 0x8000u) : 0) |
                           (dt == MOEPERM_FLOAT16 ? 0x7bffu
                            : dt == MOEPERM_BF16  ? 0x7f7fu
                                                  : 0x7f7fffffu);
            } else {
                fail_msg("no naive model for %s", b.id);
                return;
            }
            store_bits(dt, out, t * c->H + h, bits);
        }
    }
}

/* ---------------------------------------------------------------------- */
/* Running the diagnosis                                                  */
/* ---------------------------------------------------------------------- */

static golden_diagnosis diagnose(const tcase *c, const void *actual, bool strict)
{
    golden_diag_tensor inputs[2] = {
        {"permuted_output_grad", c->dtype, 2, {c->R, c->H}, c->grad},
        {"sorted_indices", MOEPERM_INT32, 1, {c->T * c->K}, c->idx},
    };
    golden_diag_attr attrs[1] = {{"top_k", c->K}};
    golden_diag_problem p = {"MoeTokenPermuteGrad", inputs, 2, attrs, 1};
    golden_diag_tensor expected = {"input_grad", c->dtype, 2, {c->T, c->H}, c->expected};
    golden_diagnosis d;
    char err[512];
    if (golden_diagnose(&p, &expected, actual, strict, &d, err, sizeof err) != 0)
        fail_msg("golden_diagnose: %s", err);
    return d;
}

static const golden_finding *exact_finding(const golden_diagnosis *d, const char *id)
{
    for (size_t i = 0; i < d->count; i++)
        if (d->finding[i].exact && strcmp(d->finding[i].id, id) == 0)
            return &d->finding[i];
    return NULL;
}

static void print_findings(const golden_diagnosis *d)
{
    for (size_t i = 0; i < d->count; i++)
        print_message("  %s%s: %s (explains %llu, contradicts %llu)\n", d->finding[i].id,
                      d->finding[i].exact ? " (exact)" : "", d->finding[i].detail,
                      (unsigned long long)d->finding[i].explained,
                      (unsigned long long)d->finding[i].contradicted);
}

static bool differs(const tcase *c, const void *actual)
{
    int64_t first;
    return !naive_equal(c->dtype, c->expected, actual, c->T * c->H, &first);
}

/* Feeds the bug's output back; returns whether the bug was visible (the
 * output differed) so a caller can insist that some configuration was. */
static bool expect_named(const tcase *c, bug b, const char *detail_part)
{
    size_t es = naive_size(c->dtype);
    void *out = malloc((size_t)(c->T * c->H) * es);
    assert_non_null(out);
    buggy(c, b, out);
    if (!differs(c, out)) {
        free(out);
        return false;
    }
    golden_diagnosis d = diagnose(c, out, false);
    const golden_finding *f = exact_finding(&d, b.id);
    if (!f) {
        print_message("%s (%d) on %s T=%lld K=%lld H=%lld R=%lld: %llu differ, findings:\n", b.id,
                      b.param, dtype_name(c->dtype), (long long)c->T, (long long)c->K,
                      (long long)c->H, (long long)c->R, (unsigned long long)d.differing);
        print_findings(&d);
        fail_msg("%s not named", b.id);
    }
    assert_int_equal(f->explained, d.differing);
    if (detail_part && !strstr(f->detail, detail_part))
        fail_msg("%s: detail \"%s\" lacks \"%s\"", b.id, f->detail, detail_part);
    free(out);
    return true;
}

static const moeperm_dtype all_dtypes[] = {MOEPERM_BF16, MOEPERM_FLOAT16, MOEPERM_FLOAT};

typedef struct shape {
    int64_t T, K, H, R;
} shape;

static const shape shapes[] = {
    {64, 4, 40, -1},
    {33, 8, 17, 200}, /* dropped slots */
    {20, 3, 130, -1},
};

static void each_case(values kind, bool narrow_only, void (*check)(const tcase *, int *),
                      int *visible)
{
    for (int d = 0; d < 3; d++) {
        if (narrow_only && all_dtypes[d] == MOEPERM_FLOAT)
            continue;
        for (size_t s = 0; s < sizeof shapes / sizeof shapes[0]; s++) {
            tcase c = make_case(all_dtypes[d], shapes[s].T, shapes[s].K, shapes[s].H, shapes[s].R,
                                kind, 1000 + 17 * s + (uint64_t)d);
            check(&c, visible);
            free_case(&c);
        }
    }
}

/* ---------------------------------------------------------------------- */
/* One test per bug                                                       */
/* ---------------------------------------------------------------------- */

static void check_acc(const tcase *c, int *v)
{
    *v += expect_named(c, (bug){"acc-in-output-dtype", 0}, "after every addition");
}

static void test_accumulator_in_output_dtype_is_named(void **state)
{
    (void)state;
    int visible = 0;
    each_case(NORMAL, true, check_acc, &visible);
    assert_true(visible >= 4);
}

static void check_truncate(const tcase *c, int *v)
{
    *v += expect_named(c, (bug){"truncate", 0}, "truncation");
}

static void check_half_away(const tcase *c, int *v)
{
    *v += expect_named(c, (bug){"round-half-away", 0}, "away from zero");
}

static void test_narrowing_rules_are_named(void **state)
{
    (void)state;
    int visible = 0;
    each_case(NORMAL, true, check_truncate, &visible);
    assert_true(visible >= 4);
    visible = 0;
    each_case(TIES, true, check_half_away, &visible);
    assert_true(visible >= 4);
}

static void check_orders(const tcase *c, int *v)
{
    *v += expect_named(c, (bug){"k-order-reversed", 0}, "down to k = 0");
    *v += expect_named(c, (bug){"k-order-pairwise", 0}, "neighbours");
}

static void test_slot_orders_are_named(void **state)
{
    (void)state;
    int visible = 0;
    each_case(ORDER, false, check_orders, &visible);
    assert_true(visible >= 12);
}

static void check_zero_start(const tcase *c, int *v)
{
    *v += expect_named(c, (bug){"zero-start", 0}, "+0.0");
}

static void test_zero_start_is_named_on_negative_zero_sums(void **state)
{
    (void)state;
    int visible = 0;
    each_case(NEGZERO, false, check_zero_start, &visible);
    assert_true(visible >= 6);
}

static void test_dropped_slots_added_are_named(void **state)
{
    (void)state;
    for (int d = 0; d < 3; d++) {
        tcase c = make_case(all_dtypes[d], 40, 6, 24, 150, NORMAL, 77 + (uint64_t)d);
        assert_true(expect_named(&c, (bug){"dropped-not-skipped", 0}, "index mod 150"));
        free_case(&c);
    }
}

static void check_missing(const tcase *c, int *v)
{
    for (int k = 0; k < c->K; k += 2) {
        char detail[64];
        snprintf(detail, sizeof detail, "slot %d is never added", k);
        *v += expect_named(c, (bug){"missing-slot", k}, detail);
    }
}

static void test_missing_slot_is_named_with_its_k(void **state)
{
    (void)state;
    int visible = 0;
    each_case(NORMAL, false, check_missing, &visible);
    assert_true(visible >= 20);
    /* a large top_k: only the slots the differences point at are tried */
    tcase c = make_case(MOEPERM_BF16, 24, 40, 32, -1, NORMAL, 4040);
    assert_true(expect_named(&c, (bug){"missing-slot", 27}, "slot 27 is never added"));
    free_case(&c);
}

static void check_rows_ignored(const tcase *c, int *v)
{
    int64_t limits[2] = {c->R / 2, c->R - c->R / 8};
    for (int i = 0; i < 2; i++) {
        char detail[96];
        snprintf(detail, sizeof detail, "rows %lld and above", (long long)limits[i]);
        *v += expect_named(c, (bug){"rows-ignored-from", (int)limits[i]}, detail);
    }
}

static void test_rows_ignored_from_finds_the_limit(void **state)
{
    (void)state;
    int visible = 0;
    each_case(NORMAL, false, check_rows_ignored, &visible);
    assert_true(visible >= 12);
    /* a larger case, where the limit is found by narrowing, not by the sample */
    tcase c = make_case(MOEPERM_BF16, 512, 8, 16, -1, NORMAL, 4242);
    assert_true(expect_named(&c, (bug){"rows-ignored-from", 1234}, "rows 1234 and above"));
    free_case(&c);
}

static void check_ftz(const tcase *c, int *v)
{
    *v += expect_named(c, (bug){"ftz", 0}, "subnormal inputs are read as zero");
}

static void test_flush_to_zero_is_named(void **state)
{
    (void)state;
    int visible = 0;
    /* bf16 and fp32 share fp32's subnormal range; fp16's own subnormals
     * are results only (its inputs widen to normal fp32) */
    for (int d = 0; d < 3; d += 2) {
        for (size_t s = 0; s < sizeof shapes / sizeof shapes[0]; s++) {
            tcase c = make_case(all_dtypes[d], shapes[s].T, shapes[s].K, shapes[s].H, shapes[s].R,
                                SUBNORMAL, 555 + s);
            check_ftz(&c, &visible);
            free_case(&c);
        }
    }
    assert_true(visible >= 4);
    /* fp16 results flushed: the shape-level hypothesis names it */
    tcase c = make_case(MOEPERM_FLOAT16, 64, 4, 40, -1, SUBNORMAL, 99);
    size_t bytes = (size_t)(c.T * c.H) * 2;
    uint16_t *out = malloc(bytes);
    assert_non_null(out);
    memcpy(out, c.expected, bytes);
    int flushed = 0;
    for (int64_t i = 0; i < c.T * c.H; i++)
        if ((out[i] & 0x7c00) == 0 && (out[i] & 0x3ff) != 0) {
            out[i] &= 0x8000;
            flushed++;
        }
    assert_true(flushed > 0);
    golden_diagnosis d = diagnose(&c, out, false);
    assert_non_null(exact_finding(&d, "ftz"));
    free(out);
    free_case(&c);
}

static void check_saturate(const tcase *c, int *v)
{
    /* fp16 overflows in the narrowing; bf16 and fp32 share fp32's range,
     * so their sums overflow in the additions */
    int every_add = c->dtype != MOEPERM_FLOAT16;
    *v += expect_named(c, (bug){"saturate", every_add}, "largest finite value");
}

static void test_saturation_is_named(void **state)
{
    (void)state;
    int visible = 0;
    each_case(HUGE_VALUES, false, check_saturate, &visible);
    assert_true(visible >= 6);
}

static void test_token_block_shift_is_named_with_the_mapping(void **state)
{
    (void)state;
    for (int d = 0; d < 3; d++) {
        tcase c = make_case(all_dtypes[d], 128, 4, 64, -1, NORMAL, 31 + (uint64_t)d);
        size_t es = naive_size(c.dtype), row = (size_t)c.H * es;
        uint8_t *out = malloc((size_t)c.T * row);
        assert_non_null(out);
        memcpy(out, c.expected, (size_t)c.T * row);
        memcpy(out + 48 * row, (uint8_t *)c.expected, 48 * row); /* tokens 48-95 <- 0-47 */
        golden_diagnosis dg = diagnose(&c, out, false);
        const golden_finding *f = exact_finding(&dg, "token-block-shift");
        if (!f) {
            print_findings(&dg);
            fail_msg("token-block-shift not named");
        }
        assert_string_equal(f->detail, "tokens 48-95 hold the values of tokens 0-47");
        free(out);
        free_case(&c);
    }
}

static void test_unwritten_region_is_named_with_its_place(void **state)
{
    (void)state;
    for (int d = 0; d < 3; d++) {
        tcase c = make_case(all_dtypes[d], 128, 4, 64, -1, NORMAL, 61 + (uint64_t)d);
        size_t es = naive_size(c.dtype), row = (size_t)c.H * es;
        uint8_t *out = malloc((size_t)c.T * row);
        assert_non_null(out);
        memcpy(out, c.expected, (size_t)c.T * row);
        memset(out + 100 * row, 0, 28 * row); /* tokens 100-127 never written */
        golden_diagnosis dg = diagnose(&c, out, false);
        const golden_finding *f = exact_finding(&dg, "unwritten");
        if (!f) {
            print_findings(&dg);
            fail_msg("unwritten not named");
        }
        assert_string_equal(f->detail,
                            "left as zeros, as if never written: tokens 100-127: all columns");
        /* a column band left holding what the buffer had */
        memcpy(out, c.expected, (size_t)c.T * row);
        for (int64_t t = 0; t < c.T; t++)
            memset(out + t * row + 32 * es, 0xff, 16 * es);
        dg = diagnose(&c, out, false);
        f = exact_finding(&dg, "unwritten");
        assert_non_null(f);
        assert_non_null(strstr(f->detail, "left holding 0xff"));
        assert_non_null(strstr(f->detail, "never written: columns 32-47 of every token"));
        free(out);
        free_case(&c);
    }
}

static void test_nan_bits_are_named_only_with_strict_nans(void **state)
{
    (void)state;
    for (int d = 0; d < 3; d++) {
        tcase c = make_case(all_dtypes[d], 64, 4, 40, -1, WITH_NAN, 3 + (uint64_t)d);
        size_t es = naive_size(c.dtype);
        void *out = malloc((size_t)(c.T * c.H) * es);
        assert_non_null(out);
        memcpy(out, c.expected, (size_t)(c.T * c.H) * es);
        uint32_t sign = c.dtype == MOEPERM_FLOAT ? 0x80000000u : 0x8000u;
        int flipped = 0;
        for (int64_t i = 0; i < c.T * c.H; i++)
            if (isnan(widen(c.dtype, out, i))) {
                store_bits(c.dtype, out, i, load_bits(c.dtype, out, i) ^ sign);
                flipped++;
            }
        assert_true(flipped > 0);
        golden_diagnosis dg = diagnose(&c, out, true);
        assert_non_null(exact_finding(&dg, "nan-bits"));
        dg = diagnose(&c, out, false);
        assert_int_equal(dg.differing, 0);
        assert_int_equal(dg.count, 0);
        free(out);
        free_case(&c);
    }
}

static void test_correct_output_gives_no_finding_and_corruption_no_exact_one(void **state)
{
    (void)state;
    uint64_t rng = 5;
    for (int d = 0; d < 3; d++) {
        for (size_t s = 0; s < sizeof shapes / sizeof shapes[0]; s++) {
            tcase c = make_case(all_dtypes[d], shapes[s].T, shapes[s].K, shapes[s].H, shapes[s].R,
                                NORMAL, 900 + s);
            golden_diagnosis dg = diagnose(&c, c.expected, false);
            assert_int_equal(dg.differing, 0);
            assert_int_equal(dg.count, 0);
            size_t es = naive_size(c.dtype);
            void *out = malloc((size_t)(c.T * c.H) * es);
            assert_non_null(out);
            for (int trial = 0; trial < 4; trial++) {
                memcpy(out, c.expected, (size_t)(c.T * c.H) * es);
                /* 1% of the elements, one random bit each */
                for (int64_t i = 0; i < c.T * c.H; i++)
                    if (naive_rand(&rng) % 100 == 0) {
                        uint32_t bit = (uint32_t)(naive_rand(&rng) % (es * 8));
                        store_bits(c.dtype, out, i, load_bits(c.dtype, out, i) ^ (1u << bit));
                    }
                dg = diagnose(&c, out, false);
                if (dg.differing == 0)
                    continue;
                for (size_t i = 0; i < dg.count; i++)
                    if (dg.finding[i].exact) {
                        print_findings(&dg);
                        fail_msg("random corruption named as %s", dg.finding[i].id);
                    }
            }
            free(out);
            free_case(&c);
        }
    }
}

static void test_other_operators_get_the_shape_level_hypotheses(void **state)
{
    (void)state;
    enum { T = 32, H = 8 };
    int32_t expected[T * H], actual[T * H];
    for (int i = 0; i < T * H; i++)
        expected[i] = actual[i] = i * 7 + 1;
    memcpy(actual + 16 * H, expected, 8 * H * sizeof(int32_t)); /* rows 16-23 <- 0-7 */
    golden_diag_tensor out = {"expanded_row_idx", MOEPERM_INT32, 2, {T, H}, expected};
    golden_diag_problem p = {"SomeOtherOperator", NULL, 0, NULL, 0};
    golden_diagnosis d;
    char err[256];
    assert_int_equal(golden_diagnose(&p, &out, actual, false, &d, err, sizeof err), 0);
    assert_int_equal(d.count, 1);
    assert_string_equal(d.finding[0].id, "token-block-shift");
    assert_string_equal(d.finding[0].detail, "rows 16-23 hold the values of rows 0-7");

    /* inputs that do not fit the operator: its models are skipped */
    tcase c = make_case(MOEPERM_BF16, 16, 4, 8, -1, NORMAL, 8);
    golden_diag_tensor inputs[1] = {{"permuted_output_grad", MOEPERM_BF16, 2, {c.R, 9}, c.grad}};
    golden_diag_problem bad = {"MoeTokenPermuteGrad", inputs, 1, NULL, 0};
    golden_diag_tensor e = {"input_grad", MOEPERM_BF16, 2, {c.T, c.H}, c.expected};
    uint16_t zeros[16 * 8] = {0};
    assert_int_equal(golden_diagnose(&bad, &e, zeros, false, &d, err, sizeof err), 0);
    assert_int_equal(d.count, 1);
    assert_string_equal(d.finding[0].id, "unwritten");

    /* the text report */
    char *text = NULL;
    size_t size = 0;
    FILE *f = open_memstream(&text, &size);
    assert_non_null(f);
    golden_diagnosis_report(f, &d, "  ");
    fclose(f);
    assert_string_equal(text, "  diagnosis: unwritten: left as zeros, as if never written: every "
                              "element of every token (reproduces the output exactly)\n");
    free(text);
    free_case(&c);
}

static void test_catalogue_lists_every_id(void **state)
{
    (void)state;
    static const char *const ids[] = {
        "acc-in-output-dtype",
        "truncate",
        "round-half-away",
        "k-order-reversed",
        "k-order-pairwise",
        "zero-start",
        "dropped-not-skipped",
        "missing-slot",
        "rows-ignored-from",
        "token-block-shift",
        "unwritten",
        "ftz",
        "saturate",
        "nan-bits",
    };
    size_t count;
    const golden_hypothesis_info *list = golden_diagnosis_catalogue(&count);
    for (size_t i = 0; i < sizeof ids / sizeof ids[0]; i++) {
        bool found = false;
        for (size_t j = 0; j < count; j++)
            found |= strcmp(list[j].id, ids[i]) == 0 && list[j].models && *list[j].models;
        if (!found)
            fail_msg("%s is not in the catalogue", ids[i]);
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_accumulator_in_output_dtype_is_named),
        cmocka_unit_test(test_narrowing_rules_are_named),
        cmocka_unit_test(test_slot_orders_are_named),
        cmocka_unit_test(test_zero_start_is_named_on_negative_zero_sums),
        cmocka_unit_test(test_dropped_slots_added_are_named),
        cmocka_unit_test(test_missing_slot_is_named_with_its_k),
        cmocka_unit_test(test_rows_ignored_from_finds_the_limit),
        cmocka_unit_test(test_flush_to_zero_is_named),
        cmocka_unit_test(test_saturation_is_named),
        cmocka_unit_test(test_token_block_shift_is_named_with_the_mapping),
        cmocka_unit_test(test_unwritten_region_is_named_with_its_place),
        cmocka_unit_test(test_nan_bits_are_named_only_with_strict_nans),
        cmocka_unit_test(test_correct_output_gives_no_finding_and_corruption_no_exact_one),
        cmocka_unit_test(test_other_operators_get_the_shape_level_hypotheses),
        cmocka_unit_test(test_catalogue_lists_every_id),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}

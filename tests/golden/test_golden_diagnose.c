/*
 * The diagnosis names the bug: each bug of the catalogue is written here
 * as a naive loop of its own (the tests' conversions from naive.c, plain
 * float additions in the order the bug has), its output is fed back, and
 * the diagnosis must name that bug's id as an exact finding, on several
 * shapes and every dtype it applies to.  A correct output gives no
 * findings; random corruption gives no exact one.
 */
/* MAP_ANONYMOUS (a guard page below probs) */
#define _DEFAULT_SOURCE
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
#include <sys/mman.h>
#include <unistd.h>

#include "golden/judge/diagnose/diagnose.h"
#include "naive.h"
#include "naive_permute_grad.h"
#include "naive_family.h"
#include "naive_unpermute_grad.h"

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

/* The tree folding the upper half onto the lower: slot k plus slot
 * k + ceil(n/2) first, then the same on the ceil(n/2) sums. */
static float folded_tree(const float *v, const bool *present, int n, bool *out_present)
{
    if (n == 1) {
        *out_present = present[0];
        return v[0];
    }
    float next[512];
    bool pnext[512];
    int m = (n + 1) / 2;
    for (int i = 0; i < m; i++) {
        if (i + m >= n) {
            next[i] = v[i];
            pnext[i] = present[i];
        } else if (present[i] && present[i + m]) {
            next[i] = v[i] + v[i + m];
            pnext[i] = true;
        } else {
            next[i] = present[i] ? v[i] : v[i + m];
            pnext[i] = present[i] || present[i + m];
        }
    }
    return folded_tree(next, pnext, m, out_present);
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

/* A copy of the read entries idx[0 .. read) followed by extra entries the
 * operator never reads, negative and huge in turn (the input domain's
 * edge); the caller frees it. */
static int32_t *with_unread(const int32_t *idx, int64_t read, int64_t extra)
{
    int32_t *all = malloc((size_t)(read + extra) * sizeof *all + 1);
    assert_non_null(all);
    memcpy(all, idx, (size_t)read * sizeof *all);
    for (int64_t i = read; i < read + extra; i++)
        all[i] = i % 2 ? -1 : INT32_MAX;
    return all;
}

/* The input domain's edge, as the domain suites have it: sorted_indices
 * followed by pg_extra (< K) entries the operator never reads, and K = 1
 * given as num_topk = -1. */
static int64_t pg_extra;
static bool pg_topk_minus1;

static int pg_edge_off(void **state)
{
    (void)state;
    pg_extra = 0;
    pg_topk_minus1 = false;
    return 0;
}

static golden_diagnosis diagnose(const tcase *c, const void *actual, bool strict)
{
    int64_t L = c->T * c->K + pg_extra;
    int32_t *idx = with_unread(c->idx, c->T * c->K, pg_extra);
    golden_diag_tensor inputs[2] = {
        {"permuted_output_grad", c->dtype, 2, {c->R, c->H}, c->grad},
        {"sorted_indices", MOEPERM_INT32, 1, {L}, idx},
    };
    golden_diag_attr attrs[1] = {{"top_k", pg_topk_minus1 && c->K == 1 ? -1 : c->K}};
    golden_diag_problem p = {"MoeTokenPermuteGrad", inputs, 2, attrs, 1};
    golden_diag_tensor expected = {"input_grad", c->dtype, 2, {c->T, c->H}, c->expected};
    golden_diagnosis d;
    char err[512];
    int rc = golden_diagnose(&p, &expected, actual, strict, &d, err, sizeof err);
    free(idx);
    if (rc != 0)
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

/* More rows than slots (rows no slot reads), entries past T*K the
 * operator never reads, num_topk = -1: the sums' bugs are still named. */
static void test_sum_bugs_are_named_at_the_domain_edge(void **state)
{
    (void)state;
    int visible = 0;
    pg_extra = 3;
    for (int d = 0; d < 3; d++) {
        tcase c = make_case(all_dtypes[d], 24, 4, 20, 24 * 4 + 37, NORMAL, 61 + (uint64_t)d);
        if (all_dtypes[d] != MOEPERM_FLOAT)
            visible += expect_named(&c, (bug){"truncate", 0}, "truncation");
        free_case(&c);
        c = make_case(all_dtypes[d], 24, 4, 20, 24 * 4 + 37, ORDER, 71 + (uint64_t)d);
        visible += expect_named(&c, (bug){"k-order-reversed", 0}, "down to k = 0");
        free_case(&c);
    }
    assert_true(visible >= 4);
    pg_extra = 0; /* with K = 1 every entry is read */
    pg_topk_minus1 = true;
    for (int d = 0; d < 3; d++) {
        tcase c = make_case(all_dtypes[d], 40, 1, 16, 25, NORMAL, 81 + (uint64_t)d);
        assert_true(expect_named(&c, (bug){"dropped-not-skipped", 0}, "index mod 25"));
        free_case(&c);
    }
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
    /* each operator's ids (docs/judging.md), then the shape-level ones */
    static const char *const ids[][2] = {
        {"MoeTokenPermuteGrad", "acc-in-output-dtype"},
        {"MoeTokenPermuteGrad", "truncate"},
        {"MoeTokenPermuteGrad", "round-half-away"},
        {"MoeTokenPermuteGrad", "k-order-reversed"},
        {"MoeTokenPermuteGrad", "k-order-pairwise"},
        {"MoeTokenPermuteGrad", "zero-start"},
        {"MoeTokenPermuteGrad", "dropped-not-skipped"},
        {"MoeTokenPermuteGrad", "missing-slot"},
        {"MoeTokenPermuteGrad", "rows-ignored-from"},
        {"MoeTokenPermuteGrad", "ftz"},
        {"MoeTokenPermuteGrad", "saturate"},
        {"MoeTokenUnpermute", "acc-in-output-dtype"},
        {"MoeTokenUnpermute", "product-in-output-dtype"},
        {"MoeTokenUnpermute", "truncate"},
        {"MoeTokenUnpermute", "round-half-away"},
        {"MoeTokenUnpermute", "k-order-reversed"},
        {"MoeTokenUnpermute", "k-order-pairwise"},
        {"MoeTokenUnpermute", "fma"},
        {"MoeTokenUnpermute", "zero-start"},
        {"MoeTokenUnpermute", "zero-prob-not-skipped"},
        {"MoeTokenUnpermute", "probs-ignored"},
        {"MoeTokenUnpermute", "dropped-not-skipped"},
        {"MoeTokenUnpermute", "missing-slot"},
        {"MoeTokenPermute", "unstable-sort"},
        {"MoeTokenPermute", "sorted-indices-inverted"},
        {"MoeTokenPermute", "token-row"},
        {"MoeTokenPermute", "num-out-ignored"},
        {"MoeTokenUnpermuteGrad", "probs-ignored"},
        {"MoeTokenUnpermuteGrad", "wrong-slot-prob"},
        {"MoeTokenUnpermuteGrad", "acc-in-output-dtype"},
        {NULL, "token-block-shift"},
        {NULL, "unwritten"},
        {NULL, "ftz"},
        {NULL, "saturate"},
        {NULL, "nan-bits"},
    };
    size_t count;
    const golden_hypothesis_info *list = golden_diagnosis_catalogue(&count);
    for (size_t i = 0; i < sizeof ids / sizeof ids[0]; i++) {
        size_t found = 0;
        for (size_t j = 0; j < count; j++)
            found += strcmp(list[j].id, ids[i][1]) == 0 && list[j].models && *list[j].models &&
                     (ids[i][0] ? list[j].op && strcmp(list[j].op, ids[i][0]) == 0 : !list[j].op);
        if (found != 1)
            fail_msg("%s of %s is in the catalogue %zu times", ids[i][1],
                     ids[i][0] ? ids[i][0] : "every operator", found);
    }
    assert_int_equal(count, sizeof ids / sizeof ids[0]);
}

/* ====================================================================== */
/* The other operators                                                    */
/* ====================================================================== */

static bool is_shape_level(const char *id)
{
    static const char *const shape_ids[] = {"token-block-shift", "unwritten", "ftz", "saturate",
                                            "nan-bits"};
    for (size_t i = 0; i < sizeof shape_ids / sizeof shape_ids[0]; i++)
        if (strcmp(id, shape_ids[i]) == 0)
            return true;
    return false;
}

/* Whether the actual output of a run is reproduced by one of the tests'
 * own models of id (any of its variants): how a test knows that an exact
 * finding it did not plant is backed by its model. */
typedef bool (*backs_fn)(const void *run, const char *id, const void *actual);

/* The diagnosis names id exactly, with detail_part in its sentence; every
 * finding is exact and operator-level, and each is backed by the tests'
 * own model of it. */
static void expect_family_named(const golden_diagnosis *d, const char *id, const char *detail_part,
                                const void *run, backs_fn backs, const void *actual,
                                const char *what)
{
    const golden_finding *f = exact_finding(d, id);
    if (!f) {
        print_message("%s: %llu differ, findings:\n", what, (unsigned long long)d->differing);
        print_findings(d);
        fail_msg("%s not named", id);
    }
    assert_int_equal(f->explained, d->differing);
    if (detail_part && !strstr(f->detail, detail_part))
        fail_msg("%s: detail \"%s\" lacks \"%s\"", id, f->detail, detail_part);
    for (size_t i = 0; i < d->count; i++) {
        const golden_finding *g = &d->finding[i];
        if (!g->exact || is_shape_level(g->id) || g->explained != d->differing ||
            g->contradicted != 0) {
            print_findings(d);
            fail_msg("%s: %s is reported beside the exact %s", what, g->id, id);
        }
        if (strcmp(g->id, id) != 0 && !backs(run, g->id, actual)) {
            print_findings(d);
            fail_msg("%s: %s claims the output exactly, but its model does not give it", what,
                     g->id);
        }
    }
}

static float load_float(moeperm_dtype dtype, const void *data, int64_t i)
{
    return widen(dtype, data, i);
}

/* ---------------------------------------------------------------------- */
/* MoeTokenUnpermute                                                      */
/* ---------------------------------------------------------------------- */

typedef enum uvalues { U_NORMAL, U_ORDER, U_NEGZERO, U_ZERO_PROBS, U_TIES, U_HUGE } uvalues;

typedef struct ucase {
    moeperm_dtype dtype, pdtype;
    int64_t N, K, H, R;
    void *x;       /* [R, H] */
    int32_t *idx;  /* [N*K] */
    void *probs;   /* [N, K], NULL for none */
    void *expected;
} ucase;

static float u_value(uint64_t *rng, moeperm_dtype dtype, uvalues kind)
{
    uint64_t r = naive_rand(rng);
    float sign = (r & 1) ? -1.0f : 1.0f;
    float mant = 1.0f + (float)((r >> 8) & 0xffff) / 65536.0f;
    switch (kind) {
    case U_ORDER:
        return random_value(rng, dtype, ORDER);
    case U_NEGZERO:
        return (r >> 40) % 3 ? -0.0f : sign * mant;
    case U_ZERO_PROBS:
        return (r >> 40) % 11 == 0 ? sign * INFINITY : (r >> 40) % 4 ? -0.0f : sign * mant;
    case U_TIES:
        return random_value(rng, dtype, TIES);
    case U_HUGE: {
        float big = dtype == MOEPERM_FLOAT16 ? 30000.0f : 1.5e38f;
        return (r >> 40) % 2 ? sign * big * mant * 0.6f : sign * mant;
    }
    default:
        return sign * mant * ldexpf(1.0f, -(int)((r >> 30) % 9));
    }
}

static float u_prob(uint64_t *rng, uvalues kind)
{
    uint64_t r = naive_rand(rng);
    switch (kind) {
    case U_ORDER:
    case U_TIES:
    case U_HUGE:
        /* powers of two keep the products exact, so the sums' rounding
         * is what the bug changes */
        return ((r & 1) ? -1.0f : 1.0f) * ldexpf(1.0f, (int)((r >> 8) % 3) - 1);
    case U_ZERO_PROBS:
        return (r >> 20) % 3 == 0 ? ((r & 1) ? -0.0f : 0.0f)
                                  : 0.25f + (float)((r >> 8) % 1000) / 1000.0f;
    case U_NEGZERO:
        return 0.5f + (float)((r >> 8) % 1000) / 1000.0f;
    default:
        return ((r & 1) ? -1.0f : 1.0f) * (0.05f + (float)((r >> 8) % 10000) / 10000.0f);
    }
}

static ucase make_ucase(moeperm_dtype dtype, moeperm_dtype pdtype, bool with_probs, int64_t N,
                        int64_t K, int64_t H, int64_t R, uvalues kind, uint64_t seed)
{
    ucase c = {dtype, pdtype, N, K, H, R < 0 ? N * K : R, NULL, NULL, NULL, NULL};
    uint64_t rng = seed;
    c.x = malloc((size_t)(c.R * H) * naive_size(dtype) + 1);
    c.idx = malloc((size_t)(N * K) * sizeof(int32_t));
    c.expected = malloc((size_t)(N * H) * naive_size(dtype));
    assert_true(c.x && c.idx && c.expected);
    for (int64_t i = 0; i < c.R * H; i++)
        store_bits(dtype, c.x, i, narrow(dtype, u_value(&rng, dtype, kind)));
    naive_permutation(&rng, c.idx, N * K);
    if (with_probs) {
        c.probs = malloc((size_t)(N * K) * naive_size(pdtype));
        assert_non_null(c.probs);
        for (int64_t i = 0; i < N * K; i++)
            store_bits(pdtype, c.probs, i, narrow(pdtype, u_prob(&rng, kind)));
    }
    naive_unpermute(dtype, c.x, c.R, H, c.idx, N, K, pdtype, c.probs, c.expected);
    return c;
}

static void free_ucase(ucase *c)
{
    free(c->x);
    free(c->idx);
    free(c->probs);
    free(c->expected);
}

static float u_x(const ucase *c, int64_t row, int64_t h)
{
    return load_float(c->dtype, c->x, row * c->H + h);
}

static float u_p(const ucase *c, int64_t n, int64_t k)
{
    return c->probs ? load_float(c->pdtype, c->probs, n * c->K + k) : 1.0f;
}

static bool u_in(const ucase *c, int64_t n, int64_t k)
{
    return c->idx[n * c->K + k] < c->R && u_p(c, n, k) != 0.0f;
}

/* slot k's product, one binary32 multiply (none without probs) */
static float u_term(const ucase *c, int64_t n, int64_t k, int64_t h)
{
    volatile float x = u_x(c, c->idx[n * c->K + k], h);
    if (!c->probs)
        return x;
    volatile float product = x * u_p(c, n, k);
    return product;
}

/* The bugs of docs/judging.md, element by element: each product and sum a
 * separate volatile binary32 operation in the order the bug has. */
static uint32_t unpermute_bug_at(const ucase *c, const char *id, int v, int64_t n, int64_t h)
{
    moeperm_dtype dt = c->dtype;
    int64_t K = c->K;
    volatile float acc = 0.0f;
    if (strcmp(id, "acc-in-output-dtype") == 0) {
        /* v 0: the first product narrowed too; v 1: kept until the first sum */
        int64_t start = v == 0 ? 1 : 2;
        for (int64_t k = 0; k < start && k < K; k++)
            if (u_in(c, n, k))
                acc = k == 0 ? u_term(c, n, k, h) : acc + u_term(c, n, k, h);
        acc = through(dt, acc);
        for (int64_t k = start; k < K; k++)
            if (u_in(c, n, k))
                acc = through(dt, acc + u_term(c, n, k, h));
    } else if (strcmp(id, "product-in-output-dtype") == 0) {
        for (int64_t k = 0; k < K; k++)
            if (u_in(c, n, k)) {
                float t = through(dt, u_term(c, n, k, h));
                acc = k == 0 ? t : acc + t;
            }
    } else if (strcmp(id, "truncate") == 0 || strcmp(id, "round-half-away") == 0) {
        for (int64_t k = 0; k < K; k++)
            if (u_in(c, n, k))
                acc = k == 0 ? u_term(c, n, k, h) : acc + u_term(c, n, k, h);
        return narrow_bug(dt, acc, id);
    } else if (strcmp(id, "k-order-reversed") == 0) {
        for (int64_t k = K - 1; k >= 0; k--)
            if (u_in(c, n, k))
                acc = k == K - 1 ? u_term(c, n, k, h) : acc + u_term(c, n, k, h);
    } else if (strcmp(id, "k-order-pairwise") == 0) {
        float t[512];
        bool p[512], any;
        for (int64_t k = 0; k < K; k++) {
            p[k] = u_in(c, n, k);
            t[k] = p[k] ? u_term(c, n, k, h) : 0.0f;
        }
        float sum = v == 0 ? tree(t, p, (int)K, &any) : folded_tree(t, p, (int)K, &any);
        acc = any ? sum : 0.0f;
    } else if (strcmp(id, "fma") == 0) {
        if (u_in(c, n, 0))
            acc = u_term(c, n, 0, h);
        for (int64_t k = 1; k < K; k++)
            if (u_in(c, n, k))
                acc = fmaf(u_x(c, c->idx[n * K + k], h), u_p(c, n, k), acc);
    } else if (strcmp(id, "zero-start") == 0) {
        for (int64_t k = 0; k < K; k++)
            if (u_in(c, n, k))
                acc = acc + u_term(c, n, k, h);
    } else if (strcmp(id, "zero-prob-not-skipped") == 0) {
        for (int64_t k = 0; k < K; k++)
            if (c->idx[n * K + k] < c->R)
                acc = k == 0 ? u_term(c, n, k, h) : acc + u_term(c, n, k, h);
    } else if (strcmp(id, "probs-ignored") == 0) {
        /* v 1: slots whose prob is 0 still skipped */
        for (int64_t k = 0; k < K; k++) {
            if (c->idx[n * K + k] >= c->R || (v == 1 && u_p(c, n, k) == 0.0f))
                continue;
            float x = u_x(c, c->idx[n * K + k], h);
            acc = k == 0 ? x : acc + x;
        }
    } else if (strcmp(id, "dropped-not-skipped") == 0) {
        /* a dropped slot reads zeros (v 0), row index mod R (1), row R-1 (2) */
        for (int64_t k = 0; k < K; k++) {
            int64_t r = c->idx[n * K + k];
            float p = u_p(c, n, k);
            if (c->probs && p == 0.0f)
                continue;
            volatile float x = r < c->R ? u_x(c, r, h)
                               : v == 0  ? 0.0f
                               : v == 1  ? u_x(c, r % c->R, h)
                                         : u_x(c, c->R - 1, h);
            volatile float t = c->probs ? x * p : x;
            acc = k == 0 ? t : acc + t;
        }
    } else if (strcmp(id, "missing-slot") == 0) {
        for (int64_t k = 0; k < K; k++)
            if (k != v && u_in(c, n, k))
                acc = k == 0 ? u_term(c, n, k, h) : acc + u_term(c, n, k, h);
    } else {
        return UINT32_MAX;
    }
    return narrow(dt, acc);
}

/* The whole output; false when the tests do not model that id (or variant). */
static bool unpermute_bug(const ucase *c, const char *id, int v, void *out)
{
    for (int64_t n = 0; n < c->N; n++)
        for (int64_t h = 0; h < c->H; h++) {
            uint32_t bits = unpermute_bug_at(c, id, v, n, h);
            if (bits == UINT32_MAX && !(c->dtype == MOEPERM_FLOAT && isnan(naive_float(bits))))
                return false;
            store_bits(c->dtype, out, n * c->H + h, bits);
        }
    return true;
}

static bool unpermute_backs(const void *run, const char *id, const void *actual)
{
    const ucase *c = run;
    size_t bytes = (size_t)(c->N * c->H) * naive_size(c->dtype);
    void *out = malloc(bytes);
    assert_non_null(out);
    bool backed = false;
    for (int v = 0; v < (int)(c->K > 3 ? c->K : 3) && !backed; v++) {
        int64_t first;
        backed = unpermute_bug(c, id, v, out) &&
                 naive_equal(c->dtype, out, actual, c->N * c->H, &first);
    }
    free(out);
    return backed;
}

/* With probs, sorted_indices may hold u_extra entries past N*K that the
 * operator never reads (the input domain's edge). */
static int64_t u_extra;

static int u_extra_off(void **state)
{
    (void)state;
    u_extra = 0;
    return 0;
}

static golden_diagnosis diagnose_unpermute(const ucase *c, const void *actual)
{
    int64_t L = c->N * c->K + (c->probs ? u_extra : 0);
    int32_t *idx = with_unread(c->idx, c->N * c->K, L - c->N * c->K);
    golden_diag_tensor inputs[3] = {
        {"permuted_tokens", c->dtype, 2, {c->R, c->H}, c->x},
        {"sorted_indices", MOEPERM_INT32, 1, {L}, idx},
        {"probs", c->pdtype, 2, {c->N, c->K}, c->probs},
    };
    golden_diag_attr attrs[1] = {{"top_k", c->K}};
    golden_diag_problem p = {"MoeTokenUnpermute", inputs, c->probs ? 3 : 2, attrs, 1};
    golden_diag_tensor expected = {"unpermuted_tokens", c->dtype, 2, {c->N, c->H}, c->expected};
    golden_diagnosis d;
    char err[512];
    int rc = golden_diagnose(&p, &expected, actual, false, &d, err, sizeof err);
    free(idx);
    if (rc != 0)
        fail_msg("golden_diagnose: %s", err);
    return d;
}

/* Plants the bug; returns whether it was visible. */
static bool expect_unpermute_named(const ucase *c, const char *id, int v, const char *detail_part)
{
    size_t bytes = (size_t)(c->N * c->H) * naive_size(c->dtype);
    void *out = malloc(bytes);
    assert_non_null(out);
    assert_true(unpermute_bug(c, id, v, out));
    int64_t first;
    if (naive_equal(c->dtype, c->expected, out, c->N * c->H, &first)) {
        free(out);
        return false;
    }
    golden_diagnosis d = diagnose_unpermute(c, out);
    char what[160];
    snprintf(what, sizeof what, "MoeTokenUnpermute %s (%d) on %s/%s N=%lld K=%lld H=%lld R=%lld",
             id, v, dtype_name(c->dtype), dtype_name(c->pdtype), (long long)c->N,
             (long long)c->K, (long long)c->H, (long long)c->R);
    expect_family_named(&d, id, detail_part, c, unpermute_backs, out, what);
    free(out);
    return true;
}

typedef struct ushape {
    int64_t N, K, H, R;
} ushape;

static const ushape ushapes[] = {
    {48, 4, 40, -1},
    {33, 8, 17, 200}, /* dropped slots */
    {20, 3, 130, -1},
};

/* Every (tokens, probs) dtype pair the operator takes that the test uses:
 * alike, and bf16 tokens with fp32 probs. */
static const moeperm_dtype upairs[][2] = {
    {MOEPERM_BF16, MOEPERM_BF16},
    {MOEPERM_FLOAT16, MOEPERM_FLOAT16},
    {MOEPERM_FLOAT, MOEPERM_FLOAT},
    {MOEPERM_BF16, MOEPERM_FLOAT},
};

/* Plants id (variant v) on every shape and dtype pair (narrow_only: not on
 * fp32 tokens); returns how many made the output differ. */
static int each_ucase(uvalues kind, bool narrow_only, const char *id, int v,
                      const char *detail_part)
{
    int visible = 0;
    for (size_t d = 0; d < sizeof upairs / sizeof upairs[0]; d++) {
        if (narrow_only && upairs[d][0] == MOEPERM_FLOAT)
            continue;
        for (size_t s = 0; s < sizeof ushapes / sizeof ushapes[0]; s++) {
            ucase c = make_ucase(upairs[d][0], upairs[d][1], true, ushapes[s].N, ushapes[s].K,
                                 ushapes[s].H, ushapes[s].R, kind, 7000 + 31 * s + d);
            visible += expect_unpermute_named(&c, id, v, detail_part);
            free_ucase(&c);
        }
    }
    return visible;
}

static void test_unpermute_sums_in_the_tokens_dtype_are_named(void **state)
{
    (void)state;
    assert_true(each_ucase(U_NORMAL, true, "acc-in-output-dtype", 0, "narrowed after every") >= 9);
    assert_true(each_ucase(U_NORMAL, true, "acc-in-output-dtype", 1, "not narrowed before") >= 9);
    assert_true(each_ucase(U_NORMAL, true, "product-in-output-dtype", 0, "before it is added") >=
                9);
    assert_true(each_ucase(U_NORMAL, true, "truncate", 0, "truncation") >= 9);
    assert_true(each_ucase(U_TIES, true, "round-half-away", 0, "away from zero") >= 9);
}

static void test_unpermute_slot_orders_and_fma_are_named(void **state)
{
    (void)state;
    assert_true(each_ucase(U_ORDER, false, "k-order-reversed", 0, "down to k = 0") >= 12);
    assert_true(each_ucase(U_ORDER, false, "k-order-pairwise", 0, "neighbours") >= 8);
    assert_true(each_ucase(U_ORDER, false, "k-order-pairwise", 1, "folding") >= 8);
    /* a fused step rounds once in fp32: seen through the narrowing on
     * float32 tokens mostly */
    assert_true(each_ucase(U_NORMAL, false, "fma", 0, "fused") >= 3);
}

static void test_unpermute_zeros_are_named(void **state)
{
    (void)state;
    assert_true(each_ucase(U_NEGZERO, false, "zero-start", 0, "+0.0") >= 12);
    /* 0 * inf gives NaN and -0 * p keeps its sign once the slot is added */
    assert_true(each_ucase(U_ZERO_PROBS, false, "zero-prob-not-skipped", 0, "prob is 0") >= 12);
    assert_true(each_ucase(U_NORMAL, false, "probs-ignored", 0, "unscaled") >= 12);
    assert_true(each_ucase(U_ZERO_PROBS, false, "probs-ignored", 1, "still skipped") >= 12);
}

/* More rows than slots (rows no slot reads) and entries past N*K the
 * operator never reads: the sums' bugs are still named. */
static void test_unpermute_bugs_are_named_at_the_domain_edge(void **state)
{
    (void)state;
    int visible = 0;
    u_extra = 5;
    for (size_t d = 0; d < sizeof upairs / sizeof upairs[0]; d++) {
        ucase c = make_ucase(upairs[d][0], upairs[d][1], true, 24, 4, 20, 24 * 4 + 37, U_NORMAL,
                             300 + d);
        if (upairs[d][0] != MOEPERM_FLOAT)
            visible += expect_unpermute_named(&c, "truncate", 0, "truncation");
        free_ucase(&c);
        c = make_ucase(upairs[d][0], upairs[d][1], true, 24, 4, 20, 24 * 4 + 37, U_ORDER,
                       400 + d);
        visible += expect_unpermute_named(&c, "k-order-reversed", 0, "down to k = 0");
        free_ucase(&c);
    }
    assert_true(visible >= 5);
}

static void test_unpermute_dropped_and_missing_slots_are_named(void **state)
{
    (void)state;
    int visible = 0;
    for (size_t d = 0; d < sizeof upairs / sizeof upairs[0]; d++) {
        /* zeros read for a dropped slot add +0.0: seen where the kept
         * slots sum to -0.0 */
        ucase c = make_ucase(upairs[d][0], upairs[d][1], true, 40, 6, 24, 150, U_NEGZERO,
                             88 + d);
        visible += expect_unpermute_named(&c, "dropped-not-skipped", 0, "read as zeros");
        free_ucase(&c);
        c = make_ucase(upairs[d][0], upairs[d][1], true, 40, 6, 24, 150, U_NORMAL, 88 + d);
        visible += expect_unpermute_named(&c, "dropped-not-skipped", 1, "index mod 150");
        free_ucase(&c);
    }
    assert_true(visible >= 8);
    for (int k = 0; k < 4; k++) {
        char detail[64];
        snprintf(detail, sizeof detail, "slot %d is never added", k);
        /* every case whose top_k has the slot */
        assert_true(each_ucase(U_NORMAL, false, "missing-slot", k, detail) >= (k < 3 ? 12 : 8));
    }
    /* a large top_k: only the slots the differences point at are tried */
    ucase c = make_ucase(MOEPERM_BF16, MOEPERM_BF16, true, 24, 40, 32, -1, U_NORMAL, 4041);
    assert_true(expect_unpermute_named(&c, "missing-slot", 29, "slot 29 is never added"));
    free_ucase(&c);
    /* without probs (top_k is 1) a missing slot leaves +0.0 */
    c = make_ucase(MOEPERM_FLOAT16, MOEPERM_FLOAT, false, 30, 1, 16, -1, U_NORMAL, 5);
    assert_true(expect_unpermute_named(&c, "missing-slot", 0, "slot 0"));
    free_ucase(&c);
}

/* A reversed sum of values near the largest finite one: inf in one order,
 * finite (often the largest finite value) in the other.  Neither a buffer
 * left unwritten nor a saturation: the order, named exactly. */
static void test_unpermute_reversed_overflow_is_the_order_not_unwritten(void **state)
{
    (void)state;
    int visible = 0;
    for (int d = 0; d < 2; d++) {
        for (size_t s = 0; s < sizeof ushapes / sizeof ushapes[0]; s++) {
            ucase c = make_ucase(upairs[d][0], upairs[d][1], true, ushapes[s].N, ushapes[s].K,
                                 ushapes[s].H, ushapes[s].R, U_HUGE, 123 + s + 7 * (uint64_t)d);
            visible += expect_unpermute_named(&c, "k-order-reversed", 0, "down to k = 0");
            free_ucase(&c);
        }
    }
    assert_true(visible >= 4);
}

static void test_unpermute_correct_output_gives_no_finding(void **state)
{
    (void)state;
    for (size_t d = 0; d < sizeof upairs / sizeof upairs[0]; d++) {
        ucase c = make_ucase(upairs[d][0], upairs[d][1], true, 33, 8, 17, 200, U_ZERO_PROBS, d);
        golden_diagnosis dg = diagnose_unpermute(&c, c.expected);
        assert_int_equal(dg.differing, 0);
        assert_int_equal(dg.count, 0);
        free_ucase(&c);
    }
}

/* ---------------------------------------------------------------------- */
/* MoeTokenPermute                                                        */
/* ---------------------------------------------------------------------- */

typedef struct pcase {
    moeperm_dtype dtype; /* of the tokens: a float dtype or int8 */
    int64_t N, K, H, num_out_tokens, num_out;
    void *tokens; /* [N, H] */
    int64_t *ids; /* [N*K], widened */
    int32_t *ids32;
    int32_t *sorted; /* the reference's sorted_indices */
    void *permuted;  /* [num_out, H] */
} pcase;

static size_t p_size(moeperm_dtype dtype)
{
    return dtype == MOEPERM_INT8 ? 1 : naive_size(dtype);
}

/* experts: ids drawn from [0, experts); few experts make many ties */
static pcase make_pcase(moeperm_dtype dtype, int64_t N, int64_t K, int64_t H, int64_t experts,
                        int64_t num_out_tokens, uint64_t seed)
{
    pcase c = {dtype, N, K, H, num_out_tokens, naive_num_out(num_out_tokens, N * K),
               NULL, NULL, NULL, NULL, NULL};
    uint64_t rng = seed;
    size_t es = p_size(dtype);
    c.tokens = malloc((size_t)(N * H) * es);
    c.ids = malloc((size_t)(N * K) * sizeof *c.ids);
    c.ids32 = malloc((size_t)(N * K) * sizeof *c.ids32);
    c.sorted = malloc((size_t)(N * K) * sizeof *c.sorted);
    c.permuted = malloc((size_t)(c.num_out * H) * es + 1);
    assert_true(c.tokens && c.ids && c.ids32 && c.sorted && c.permuted);
    for (int64_t i = 0; i < N * H * (int64_t)es; i++)
        ((uint8_t *)c.tokens)[i] = (uint8_t)naive_rand(&rng);
    for (int64_t i = 0; i < N * K; i++) {
        c.ids[i] = (int64_t)(naive_rand(&rng) % (uint64_t)experts);
        c.ids32[i] = (int32_t)c.ids[i];
    }
    naive_permute(es, c.tokens, N, H, c.ids, K, c.num_out, c.permuted, c.sorted);
    return c;
}

static void free_pcase(pcase *c)
{
    free(c->tokens);
    free(c->ids);
    free(c->ids32);
    free(c->sorted);
    free(c->permuted);
}

/* Entry i's row under a bug's placement (>= num_out: not written), and
 * which token it copies. */
typedef struct placement {
    int32_t *row;   /* [N*K] */
    int64_t *token; /* [N*K] */
    int64_t written; /* rows below this are written; the rest keep zeros */
} placement;

static bool place_bug(const pcase *c, const char *id, int v, uint64_t seed, placement *p)
{
    int64_t NK = c->N * c->K;
    p->written = c->num_out;
    for (int64_t i = 0; i < NK; i++) {
        p->row[i] = c->sorted[i];
        p->token[i] = i / c->K;
    }
    if (strcmp(id, "unstable-sort") == 0) {
        /* v 0: ties in reverse slot order; v 1: ties in a random order */
        int64_t *key = malloc((size_t)NK * sizeof *key);
        assert_non_null(key);
        for (int64_t i = 0; i < NK; i++)
            key[i] = v == 0 ? NK - 1 - i : (int64_t)(naive_rand(&seed) % (uint64_t)NK);
        for (int64_t i = 0; i < NK; i++) {
            int64_t below = 0;
            for (int64_t j = 0; j < NK; j++)
                below += c->ids[j] < c->ids[i] ||
                         (c->ids[j] == c->ids[i] && (key[j] < key[i] || (key[j] == key[i] && j < i)));
            p->row[i] = (int32_t)below;
        }
        free(key);
    } else if (strcmp(id, "sorted-indices-inverted") == 0) {
        /* row q holds the token of entry sorted[q] */
        for (int64_t q = 0; q < NK; q++) {
            p->row[q] = (int32_t)q;
            p->token[q] = c->sorted[q] / c->K;
        }
    } else if (strcmp(id, "token-row") == 0) {
        for (int64_t i = 0; i < NK; i++)
            p->token[i] = i % c->N;
    } else if (strcmp(id, "num-out-ignored") == 0) {
        int64_t d = NK - c->num_out;
        if (v == 0) { /* the first d rows dropped, not the last */
            for (int64_t i = 0; i < NK; i++)
                p->row[i] = c->sorted[i] - (int32_t)d < 0 ? (int32_t)NK : c->sorted[i] - (int32_t)d;
        } else if (v == 1 || v == 2) { /* num_out_tokens read as a count */
            int64_t n = c->num_out_tokens;
            p->written = v == 1 ? (n > 0 ? n : 0) : (n < 0 ? -n : n);
        } else { /* the cut applied to the entries */
            for (int64_t i = 0; i < NK; i++)
                if (i >= c->num_out)
                    p->row[i] = (int32_t)NK;
        }
    } else {
        return false;
    }
    return true;
}

/* permuted_tokens and sorted_indices as the bug writes them (rows not
 * written are zeros, as a harness's buffer is). */
static bool permute_bug(const pcase *c, const char *id, int v, uint64_t seed, void *rows,
                        int32_t *sorted)
{
    int64_t NK = c->N * c->K;
    size_t row_bytes = (size_t)c->H * p_size(c->dtype);
    placement p = {malloc((size_t)NK * sizeof(int32_t)), malloc((size_t)NK * sizeof(int64_t)), 0};
    assert_true(p.row && p.token);
    bool ok = place_bug(c, id, v, seed, &p);
    memset(rows, 0, (size_t)c->num_out * row_bytes);
    for (int64_t i = 0; ok && i < NK; i++)
        if (p.row[i] < c->num_out && p.row[i] < p.written)
            memcpy((uint8_t *)rows + (size_t)p.row[i] * row_bytes,
                   (const uint8_t *)c->tokens + (size_t)p.token[i] * row_bytes, row_bytes);
    for (int64_t i = 0; ok && i < NK; i++)
        sorted[i] = p.row[i];
    if (ok && strcmp(id, "sorted-indices-inverted") == 0)
        for (int64_t i = 0; i < NK; i++)
            sorted[c->sorted[i]] = (int32_t)i; /* the row-to-entry map */
    if (ok && strcmp(id, "num-out-ignored") == 0)
        memcpy(sorted, c->sorted, (size_t)NK * sizeof *sorted);
    free(p.row);
    free(p.token);
    return ok;
}

typedef struct pjudged {
    const pcase *c;
    bool tokens_output;
} pjudged;

/* Whether actual is what an unstable sort gives: each expert's rows (or
 * each entry's row) hold that expert's entries in some order. */
static bool unstable_order(const pcase *c, bool tokens_output, const void *actual)
{
    int64_t NK = c->N * c->K;
    size_t row_bytes = (size_t)c->H * p_size(c->dtype);
    bool *used = calloc((size_t)NK, sizeof *used);
    assert_non_null(used);
    bool fits = true;
    for (int64_t i = 0; i < NK && fits; i++) {
        /* the rows of entry i's expert */
        int64_t first = 0, count = 0;
        for (int64_t j = 0; j < NK; j++) {
            first += c->ids[j] < c->ids[i];
            count += c->ids[j] == c->ids[i];
        }
        if (!tokens_output) {
            int32_t q = ((const int32_t *)actual)[i];
            fits = q >= first && q < first + count && !used[q];
            if (fits)
                used[q] = true;
            continue;
        }
        int64_t q = c->sorted[i]; /* a row of this expert: some entry of it lands there */
        if (q >= c->num_out)
            continue;
        fits = false;
        for (int64_t j = 0; j < NK && !fits; j++)
            if (c->ids[j] == c->ids[i] && !used[j] &&
                memcmp((const uint8_t *)actual + (size_t)q * row_bytes,
                       (const uint8_t *)c->tokens + (size_t)(j / c->K) * row_bytes,
                       row_bytes) == 0) {
                used[j] = true;
                fits = true;
            }
    }
    free(used);
    return fits;
}

static bool permute_backs(const void *run, const char *id, const void *actual)
{
    const pjudged *j = run;
    const pcase *c = j->c;
    if (strcmp(id, "unstable-sort") == 0)
        return unstable_order(c, j->tokens_output, actual);
    int64_t NK = c->N * c->K;
    size_t bytes = (size_t)c->num_out * (size_t)c->H * p_size(c->dtype);
    void *rows = malloc(bytes + 1);
    int32_t *sorted = malloc((size_t)NK * sizeof *sorted);
    assert_true(rows && sorted);
    bool backed = false;
    for (int v = 0; v < 4 && !backed; v++) {
        if (!permute_bug(c, id, v, 1, rows, sorted))
            break;
        backed = j->tokens_output ? memcmp(rows, actual, bytes) == 0
                                  : memcmp(sorted, actual, (size_t)NK * sizeof *sorted) == 0;
    }
    free(rows);
    free(sorted);
    return backed;
}

/* When set, tokens and permuted_tokens reach the diagnosis as rank-3
 * tensors [rows, a, H / a] (a the least divisor of H above 1), as the
 * domain suites write them: the same bytes, a token still its H elements. */
static bool permute_rank3;

static golden_diagnosis diagnose_permute(const pcase *c, bool tokens_output, const void *actual)
{
    int64_t a = 2;
    while (a < c->H && c->H % a != 0)
        a++;
    golden_diag_tensor inputs[2] = {
        {"tokens", c->dtype, 2, {c->N, c->H}, c->tokens},
        {"indices", MOEPERM_INT32, 2, {c->N, c->K}, c->ids32},
    };
    golden_diag_attr attrs[2] = {{"top_k", c->K}, {"num_out_tokens", c->num_out_tokens}};
    golden_diag_problem p = {"MoeTokenPermute", inputs, 2, attrs, 2};
    golden_diag_tensor rows = {"permuted_tokens", c->dtype, 2, {c->num_out, c->H}, c->permuted};
    if (permute_rank3) {
        inputs[0] = (golden_diag_tensor){"tokens", c->dtype, 3, {c->N, a, c->H / a}, c->tokens};
        rows = (golden_diag_tensor){"permuted_tokens", c->dtype, 3, {c->num_out, a, c->H / a},
                                    c->permuted};
    }
    golden_diag_tensor sorted = {"sorted_indices", MOEPERM_INT32, 1, {c->N * c->K}, c->sorted};
    golden_diagnosis d;
    char err[512];
    if (golden_diagnose(&p, tokens_output ? &rows : &sorted, actual, false, &d, err,
                        sizeof err) != 0)
        fail_msg("golden_diagnose: %s", err);
    return d;
}

/* Plants the bug in both outputs; each that differs must be named.
 * Returns how many outputs differed. */
static int expect_permute_named(const pcase *c, const char *id, int v, const char *detail_part)
{
    int64_t NK = c->N * c->K;
    size_t bytes = (size_t)c->num_out * (size_t)c->H * p_size(c->dtype);
    void *rows = malloc(bytes + 1);
    int32_t *sorted = malloc((size_t)NK * sizeof *sorted);
    assert_true(rows && sorted);
    assert_true(permute_bug(c, id, v, 99, rows, sorted));
    int visible = 0;
    for (int o = 0; o < 2; o++) {
        bool tokens_output = o == 0;
        const void *actual = tokens_output ? rows : (const void *)sorted;
        if (tokens_output ? memcmp(rows, c->permuted, bytes) == 0
                          : memcmp(sorted, c->sorted, (size_t)NK * sizeof *sorted) == 0)
            continue;
        visible++;
        golden_diagnosis d = diagnose_permute(c, tokens_output, actual);
        char what[160];
        snprintf(what, sizeof what, "MoeTokenPermute %s (%d), %s, on %s N=%lld K=%lld H=%lld "
                 "num_out_tokens=%lld", id, v, tokens_output ? "permuted_tokens" : "sorted_indices",
                 c->dtype == MOEPERM_INT8 ? "int8" : dtype_name(c->dtype), (long long)c->N,
                 (long long)c->K, (long long)c->H, (long long)c->num_out_tokens);
        pjudged j = {c, tokens_output};
        expect_family_named(&d, id, detail_part, &j, permute_backs, actual, what);
    }
    free(rows);
    free(sorted);
    return visible;
}

static const moeperm_dtype pdtypes[] = {MOEPERM_BF16, MOEPERM_FLOAT16, MOEPERM_FLOAT,
                                        MOEPERM_INT8};

typedef struct pshape {
    int64_t N, K, H, experts, num_out_tokens;
} pshape;

static const pshape pshapes[] = {
    {24, 4, 16, 5, 0},
    {33, 2, 9, 3, -7},
    {10, 8, 33, 12, 50},
};

static int each_pcase(const char *id, int v, const char *detail_part)
{
    int visible = 0;
    for (size_t d = 0; d < sizeof pdtypes / sizeof pdtypes[0]; d++)
        for (size_t s = 0; s < sizeof pshapes / sizeof pshapes[0]; s++) {
            pcase c = make_pcase(pdtypes[d], pshapes[s].N, pshapes[s].K, pshapes[s].H,
                                 pshapes[s].experts, pshapes[s].num_out_tokens,
                                 500 + 13 * s + d);
            visible += expect_permute_named(&c, id, v, detail_part);
            free_pcase(&c);
        }
    return visible;
}

static void test_permute_unstable_sort_is_named_not_a_block_shift(void **state)
{
    (void)state;
    assert_true(each_pcase("unstable-sort", 0, "reverse slot order") >= 24);
    assert_true(each_pcase("unstable-sort", 1, "not kept in slot order") >= 24);
}

static void test_permute_bugs_are_named_with_tokens_of_rank_3(void **state)
{
    (void)state;
    permute_rank3 = true;
    assert_true(each_pcase("unstable-sort", 0, "reverse slot order") >= 24);
    assert_true(each_pcase("unstable-sort", 1, "not kept in slot order") >= 24);
    assert_true(each_pcase("sorted-indices-inverted", 0, "sorted_indices") >= 24);
    assert_true(each_pcase("token-row", 0, "instead of i /") >= 12);
    pcase c = make_pcase(MOEPERM_BF16, 24, 4, 16, 5, -3, 3);
    for (int o = 0; o < 2; o++) {
        golden_diagnosis dg = diagnose_permute(&c, o == 0, o == 0 ? c.permuted : c.sorted);
        assert_int_equal(dg.differing, 0);
        assert_int_equal(dg.count, 0);
    }
    free_pcase(&c);
}

static int permute_rank3_off(void **state)
{
    (void)state;
    permute_rank3 = false;
    return 0;
}

static void test_permute_index_and_copy_bugs_are_named(void **state)
{
    (void)state;
    assert_true(each_pcase("sorted-indices-inverted", 0, "sorted_indices") >= 24);
    assert_true(each_pcase("token-row", 0, "instead of i /") >= 12);
}

static void test_permute_num_out_rule_misapplied_is_named(void **state)
{
    (void)state;
    int visible = 0;
    for (size_t d = 0; d < sizeof pdtypes / sizeof pdtypes[0]; d++) {
        pcase c = make_pcase(pdtypes[d], 20, 3, 12, 6, -9, 40 + d);
        visible += expect_permute_named(&c, "num-out-ignored", 0, "drops the first 9 rows");
        visible += expect_permute_named(&c, "num-out-ignored", 2, "only 9 rows");
        visible += expect_permute_named(&c, "num-out-ignored", 3, "cuts the entries");
        free_pcase(&c);
    }
    assert_true(visible >= 12);
}

static void test_permute_correct_outputs_give_no_finding(void **state)
{
    (void)state;
    for (size_t d = 0; d < sizeof pdtypes / sizeof pdtypes[0]; d++) {
        pcase c = make_pcase(pdtypes[d], 24, 4, 16, 5, -3, 3 + d);
        for (int o = 0; o < 2; o++) {
            golden_diagnosis dg = diagnose_permute(&c, o == 0, o == 0 ? c.permuted : c.sorted);
            assert_int_equal(dg.differing, 0);
            assert_int_equal(dg.count, 0);
        }
        free_pcase(&c);
    }
}

/* ---------------------------------------------------------------------- */
/* MoeTokenUnpermuteGrad                                                  */
/* ---------------------------------------------------------------------- */

typedef struct gcase {
    moeperm_dtype dtype, pdtype;
    int64_t N, K, H, R, chunk;
    void *x, *g, *probs; /* [R, H], [N, H], [N, K] */
    int32_t *idx;
    void *grad, *probs_grad; /* the reference's */
} gcase;

static gcase make_gcase(moeperm_dtype dtype, moeperm_dtype pdtype, int64_t N, int64_t K,
                        int64_t H, int64_t R, bool huge, uint64_t seed)
{
    gcase c = {dtype, pdtype, N, K, H, R < 0 ? N * K : R, 0, NULL, NULL, NULL, NULL, NULL, NULL};
    uint64_t rng = seed;
    size_t es = naive_size(dtype), ps = naive_size(pdtype);
    c.x = malloc((size_t)(c.R * H) * es + 1);
    c.g = malloc((size_t)(N * H) * es);
    c.probs = malloc((size_t)(N * K) * ps);
    c.idx = malloc((size_t)(N * K) * sizeof(int32_t));
    c.grad = calloc((size_t)(c.R * H) + 1, es);
    c.probs_grad = malloc((size_t)(N * K) * ps);
    assert_true(c.x && c.g && c.probs && c.idx && c.grad && c.probs_grad);
    for (int64_t i = 0; i < c.R * H; i++)
        store_bits(dtype, c.x, i, narrow(dtype, u_value(&rng, dtype, U_NORMAL)));
    for (int64_t i = 0; i < N * H; i++) {
        float v = u_value(&rng, dtype, U_NORMAL);
        /* token 0's gradient large: its products (by 64) overflow fp16 */
        if (huge && i < H)
            v = (v < 0 ? -1.0f : 1.0f) * (1100.0f + 900.0f * fabsf(v) / 2.0f);
        store_bits(dtype, c.g, i, narrow(dtype, v));
    }
    for (int64_t i = 0; i < N * K; i++)
        store_bits(pdtype, c.probs, i, narrow(pdtype, huge ? 64.0f : u_prob(&rng, U_NORMAL)));
    naive_permutation(&rng, c.idx, N * K);
    c.chunk = naive_ug_chunk_for(N, K, H, dtype, pdtype, MOEPERM_CHIP_A2_UB_BYTES,
                                 MOEPERM_CHIP_A2_VECTOR_CORES);
    naive_unpermute_grad(dtype, pdtype, c.x, c.R, H, c.g, N, c.idx, c.probs, K, c.chunk, c.grad,
                         c.probs_grad);
    return c;
}

static void free_gcase(gcase *c)
{
    free(c->x);
    free(c->g);
    free(c->probs);
    free(c->idx);
    free(c->grad);
    free(c->probs_grad);
}

/* permuted_tokens_grad as the bug writes it: row s = g[n] * probs[n, k']
 * (one binary32 multiply, one narrowing) with k' the slot the bug takes,
 * or g[n]'s bits when probs are ignored. */
static bool grad_bug(const gcase *c, const char *id, int v, void *out)
{
    bool ignored = strcmp(id, "probs-ignored") == 0;
    if (!ignored && (strcmp(id, "wrong-slot-prob") != 0 || v > 4))
        return false;
    size_t es = naive_size(c->dtype);
    memcpy(out, c->grad, (size_t)(c->R * c->H) * es);
    for (int64_t i = 0; i < c->N * c->K; i++) {
        int64_t s = c->idx[i], n = i / c->K, k = i % c->K;
        if (s >= c->R)
            continue;
        if (ignored) {
            memcpy((uint8_t *)out + (size_t)(s * c->H) * es,
                   (const uint8_t *)c->g + (size_t)(n * c->H) * es, (size_t)c->H * es);
            continue;
        }
        int64_t j = v == 0   ? s
                    : v == 1 ? n * c->K
                    : v == 2 ? n * c->K + (c->K - 1 - k)
                    : v == 3 ? n * c->K + (k + 1) % c->K
                             : n * c->K + (k + c->K - 1) % c->K;
        float p = load_float(c->pdtype, c->probs, j);
        for (int64_t h = 0; h < c->H; h++) {
            volatile float product = load_float(c->dtype, c->g, n * c->H + h) * p;
            store_bits(c->dtype, out, s * c->H + h, narrow(c->dtype, product));
        }
    }
    return true;
}

/* probs_grad kept in the probs' dtype: each product narrowed, added column
 * by column to an accumulator in that dtype starting at +0.0. */
static bool probs_grad_bug(const gcase *c, const char *id, int v, void *out)
{
    if (strcmp(id, "acc-in-output-dtype") != 0 || v != 0)
        return false;
    for (int64_t i = 0; i < c->N * c->K; i++) {
        int64_t s = c->idx[i], n = i / c->K;
        float acc = 0.0f;
        for (int64_t h = 0; h < c->H; h++) {
            float x = s < c->R ? load_float(c->dtype, c->x, s * c->H + h) : 0.0f;
            volatile float product = x * load_float(c->dtype, c->g, n * c->H + h);
            volatile float sum = acc + through(c->pdtype, product);
            acc = through(c->pdtype, sum);
        }
        store_bits(c->pdtype, out, i, narrow(c->pdtype, acc));
    }
    return true;
}

typedef struct gjudged {
    const gcase *c;
    bool probs_grad;
} gjudged;

static bool unpermute_grad_backs(const void *run, const char *id, const void *actual)
{
    const gjudged *j = run;
    const gcase *c = j->c;
    int64_t n = j->probs_grad ? c->N * c->K : c->R * c->H;
    moeperm_dtype dt = j->probs_grad ? c->pdtype : c->dtype;
    void *out = malloc((size_t)n * naive_size(dt) + 1);
    assert_non_null(out);
    bool backed = false;
    for (int v = 0; v < 5 && !backed; v++) {
        int64_t first;
        backed = (j->probs_grad ? probs_grad_bug(c, id, v, out) : grad_bug(c, id, v, out)) &&
                 naive_equal(dt, out, actual, n, &first);
    }
    free(out);
    return backed;
}

/* g_extra entries past N*K the operator never reads (the input domain's
 * edge). */
static int64_t g_extra;

static int g_extra_off(void **state)
{
    (void)state;
    g_extra = 0;
    return 0;
}

static golden_diagnosis diagnose_unpermute_grad(const gcase *c, bool probs_grad,
                                                const void *actual)
{
    int64_t L = c->N * c->K + g_extra;
    int32_t *idx = with_unread(c->idx, c->N * c->K, g_extra);
    golden_diag_tensor inputs[4] = {
        {"permuted_tokens", c->dtype, 2, {c->R, c->H}, c->x},
        {"unpermuted_tokens_grad", c->dtype, 2, {c->N, c->H}, c->g},
        {"sorted_indices", MOEPERM_INT32, 1, {L}, idx},
        {"probs", c->pdtype, 2, {c->N, c->K}, c->probs},
    };
    golden_diag_attr attrs[1] = {{"top_k", c->K}};
    golden_diag_problem p = {"MoeTokenUnpermuteGrad", inputs, 4, attrs, 1};
    golden_diag_tensor grad = {"permuted_tokens_grad", c->dtype, 2, {c->R, c->H}, c->grad};
    golden_diag_tensor pg = {"probs_grad", c->pdtype, 2, {c->N, c->K}, c->probs_grad};
    golden_diagnosis d;
    char err[512];
    int rc = golden_diagnose(&p, probs_grad ? &pg : &grad, actual, false, &d, err, sizeof err);
    free(idx);
    if (rc != 0)
        fail_msg("golden_diagnose: %s", err);
    return d;
}

static bool expect_unpermute_grad_named(const gcase *c, bool probs_grad, const char *id, int v,
                                        const char *detail_part)
{
    int64_t n = probs_grad ? c->N * c->K : c->R * c->H;
    moeperm_dtype dt = probs_grad ? c->pdtype : c->dtype;
    void *out = malloc((size_t)n * naive_size(dt) + 1);
    assert_non_null(out);
    assert_true(probs_grad ? probs_grad_bug(c, id, v, out) : grad_bug(c, id, v, out));
    int64_t first;
    if (naive_equal(dt, probs_grad ? c->probs_grad : c->grad, out, n, &first)) {
        free(out);
        return false;
    }
    golden_diagnosis d = diagnose_unpermute_grad(c, probs_grad, out);
    char what[160];
    snprintf(what, sizeof what, "MoeTokenUnpermuteGrad %s (%d), %s, on %s/%s N=%lld K=%lld "
             "H=%lld R=%lld", id, v, probs_grad ? "probs_grad" : "permuted_tokens_grad",
             dtype_name(c->dtype), dtype_name(c->pdtype), (long long)c->N, (long long)c->K,
             (long long)c->H, (long long)c->R);
    gjudged j = {c, probs_grad};
    expect_family_named(&d, id, detail_part, &j, unpermute_grad_backs, out, what);
    free(out);
    return true;
}

static int each_gcase(bool probs_grad, bool narrow_probs, const char *id, int v,
                      const char *detail_part)
{
    int visible = 0;
    for (size_t d = 0; d < sizeof upairs / sizeof upairs[0]; d++) {
        if (narrow_probs && upairs[d][1] == MOEPERM_FLOAT)
            continue;
        for (size_t s = 0; s < sizeof ushapes / sizeof ushapes[0]; s++) {
            gcase c = make_gcase(upairs[d][0], upairs[d][1], ushapes[s].N, ushapes[s].K,
                                 ushapes[s].H, ushapes[s].R, false, 900 + 7 * s + d);
            visible += expect_unpermute_grad_named(&c, probs_grad, id, v, detail_part);
            free_gcase(&c);
        }
    }
    return visible;
}

static void test_unpermute_grad_prob_bugs_are_named(void **state)
{
    (void)state;
    assert_true(each_gcase(false, false, "probs-ignored", 0, "unscaled") >= 12);
    assert_true(each_gcase(false, false, "wrong-slot-prob", 0, "row's index") >= 12);
    assert_true(each_gcase(false, false, "wrong-slot-prob", 1, "slot 0's prob") >= 12);
    assert_true(each_gcase(false, false, "wrong-slot-prob", 3, "next slot") >= 12);
}

/* More rows than slots (rows no slot names, left as they were) and
 * entries past N*K the operator never reads: the bugs are still named. */
static void test_unpermute_grad_bugs_are_named_at_the_domain_edge(void **state)
{
    (void)state;
    int visible = 0;
    g_extra = 4;
    for (size_t d = 0; d < sizeof upairs / sizeof upairs[0]; d++) {
        gcase c = make_gcase(upairs[d][0], upairs[d][1], 24, 4, 20, 24 * 4 + 37, false, 60 + d);
        visible += expect_unpermute_grad_named(&c, false, "probs-ignored", 0, "unscaled");
        if (upairs[d][1] != MOEPERM_FLOAT)
            visible += expect_unpermute_grad_named(&c, true, "acc-in-output-dtype", 0, "kept in");
        free_gcase(&c);
    }
    assert_true(visible >= 6);
}

static void test_unpermute_grad_probs_grad_in_probs_dtype_is_named(void **state)
{
    (void)state;
    assert_true(each_gcase(true, true, "acc-in-output-dtype", 0, "kept in") >= 6);
}

/* A row of permuted_tokens_grad that a kernel computing in fp16 overflowed
 * to NaN: the inputs make those values by arithmetic, so it is not a
 * buffer left unwritten. */
static void test_unpermute_grad_overflow_nan_is_not_unwritten(void **state)
{
    (void)state;
    gcase c = make_gcase(MOEPERM_FLOAT, MOEPERM_FLOAT, 16, 4, 24, -1, true, 17);
    float *out = malloc((size_t)(c.R * c.H) * sizeof *out);
    assert_non_null(out);
    memcpy(out, c.grad, (size_t)(c.R * c.H) * sizeof *out);
    int64_t row = -1;
    for (int64_t i = 0; i < c.K; i++)
        if (c.idx[i] < c.R)
            row = c.idx[i]; /* a row token 0 writes */
    assert_true(row >= 0);
    for (int64_t h = 0; h < c.H; h++)
        out[row * c.H + h] = naive_float(0xffc00000u);
    golden_diagnosis d = diagnose_unpermute_grad(&c, false, out);
    assert_int_equal(d.differing, (uint64_t)c.H);
    for (size_t i = 0; i < d.count; i++) {
        if (strcmp(d.finding[i].id, "unwritten") == 0 || d.finding[i].exact) {
            print_findings(&d);
            fail_msg("an overflow to NaN is reported as %s", d.finding[i].id);
        }
    }
    /* the same row of NaNs where the inputs are small is an unwritten
     * buffer */
    gcase small = make_gcase(MOEPERM_FLOAT, MOEPERM_FLOAT, 16, 4, 24, -1, false, 17);
    memcpy(out, small.grad, (size_t)(small.R * small.H) * sizeof *out);
    for (int64_t h = 0; h < small.H; h++)
        out[row * small.H + h] = naive_float(0xffc00000u);
    d = diagnose_unpermute_grad(&small, false, out);
    assert_non_null(exact_finding(&d, "unwritten"));
    free(out);
    free_gcase(&small);
    free_gcase(&c);
}

/* A row index at or past N*K (more rows than slots): wrong-slot-prob's
 * "row index for the slot index" reading has no prob for it, and the
 * model never reads one.  probs end at a page that cannot be read, so a
 * read past them ends the test with a signal. */
static void test_unpermute_grad_rows_past_the_slots_read_no_prob_past_probs(void **state)
{
    (void)state;
    enum { R = 4096 };
    long page = sysconf(_SC_PAGESIZE);
    size_t guard = (size_t)R * sizeof(float) + (size_t)page; /* every read past probs */
    guard = (guard + (size_t)page - 1) / (size_t)page * (size_t)page;
    uint8_t *map = mmap(NULL, (size_t)page + guard, PROT_READ | PROT_WRITE,
                        MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    assert_true(map != MAP_FAILED);
    assert_int_equal(mprotect(map + page, guard, PROT_NONE), 0);
    float *probs = (float *)(map + page) - 1; /* [1, 1], the page's last float */
    *probs = 0.5f;
    float *x = calloc(R, sizeof *x), g = 1.0f;
    float *expected = calloc(R, sizeof *expected), *actual = calloc(R, sizeof *actual);
    assert_true(x && expected && actual);
    for (int i = 0; i < R; i++)
        x[i] = 1.0f;
    int32_t idx = R - 1;
    expected[R - 1] = 0.5f;
    actual[R - 1] = 1.0f; /* g unscaled: probs-ignored */
    golden_diag_tensor inputs[4] = {
        {"permuted_tokens", MOEPERM_FLOAT, 2, {R, 1}, x},
        {"unpermuted_tokens_grad", MOEPERM_FLOAT, 2, {1, 1}, &g},
        {"sorted_indices", MOEPERM_INT32, 1, {1}, &idx},
        {"probs", MOEPERM_FLOAT, 2, {1, 1}, probs},
    };
    golden_diag_attr attrs[1] = {{"top_k", 1}};
    golden_diag_problem p = {"MoeTokenUnpermuteGrad", inputs, 4, attrs, 1};
    golden_diag_tensor grad = {"permuted_tokens_grad", MOEPERM_FLOAT, 2, {R, 1}, expected};
    golden_diagnosis d;
    char err[512];
    assert_int_equal(golden_diagnose(&p, &grad, actual, false, &d, err, sizeof err), 0);
    assert_int_equal(d.differing, 1);
    assert_non_null(exact_finding(&d, "probs-ignored"));
    munmap(map, (size_t)page + guard);
    free(x);
    free(expected);
    free(actual);
}

static void test_unpermute_grad_correct_outputs_give_no_finding(void **state)
{
    (void)state;
    for (size_t d = 0; d < sizeof upairs / sizeof upairs[0]; d++) {
        gcase c = make_gcase(upairs[d][0], upairs[d][1], 33, 8, 17, 200, false, d);
        for (int o = 0; o < 2; o++) {
            golden_diagnosis dg =
                diagnose_unpermute_grad(&c, o == 1, o == 1 ? c.probs_grad : c.grad);
            assert_int_equal(dg.differing, 0);
            assert_int_equal(dg.count, 0);
        }
        free_gcase(&c);
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_accumulator_in_output_dtype_is_named),
        cmocka_unit_test(test_narrowing_rules_are_named),
        cmocka_unit_test(test_slot_orders_are_named),
        cmocka_unit_test(test_zero_start_is_named_on_negative_zero_sums),
        cmocka_unit_test_teardown(test_sum_bugs_are_named_at_the_domain_edge, pg_edge_off),
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
        cmocka_unit_test(test_unpermute_sums_in_the_tokens_dtype_are_named),
        cmocka_unit_test(test_unpermute_slot_orders_and_fma_are_named),
        cmocka_unit_test(test_unpermute_zeros_are_named),
        cmocka_unit_test_teardown(test_unpermute_bugs_are_named_at_the_domain_edge, u_extra_off),
        cmocka_unit_test(test_unpermute_dropped_and_missing_slots_are_named),
        cmocka_unit_test(test_unpermute_reversed_overflow_is_the_order_not_unwritten),
        cmocka_unit_test(test_unpermute_correct_output_gives_no_finding),
        cmocka_unit_test(test_permute_unstable_sort_is_named_not_a_block_shift),
        cmocka_unit_test_teardown(test_permute_bugs_are_named_with_tokens_of_rank_3,
                                  permute_rank3_off),
        cmocka_unit_test(test_permute_index_and_copy_bugs_are_named),
        cmocka_unit_test(test_permute_num_out_rule_misapplied_is_named),
        cmocka_unit_test(test_permute_correct_outputs_give_no_finding),
        cmocka_unit_test(test_unpermute_grad_prob_bugs_are_named),
        cmocka_unit_test_teardown(test_unpermute_grad_bugs_are_named_at_the_domain_edge,
                                  g_extra_off),
        cmocka_unit_test(test_unpermute_grad_probs_grad_in_probs_dtype_is_named),
        cmocka_unit_test(test_unpermute_grad_overflow_nan_is_not_unwritten),
        cmocka_unit_test(test_unpermute_grad_correct_outputs_give_no_finding),
        cmocka_unit_test(test_unpermute_grad_rows_past_the_slots_read_no_prob_past_probs),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}

/*
 * The fast paths against the portable path, bit for bit (docs/arithmetic.md
 * fixes the bits, and the portable loop of src/sum/sum.c is the reference),
 * on every instruction set this CPU has (AVX2 + F16C, AVX-512F): the x86
 * vector conversions over every 16-bit input and over edge and random
 * binary32 inputs (tests/core/test_fast_conversions_exhaustive.c does all 2^32),
 * and the x86 operator on seeded random cases with special values, tails
 * (hidden not a multiple of 16 or 32), dropped slots (slot 0 too), rows
 * read by several slots, more rows than slots, top_k 1 and 512, row strides
 * and offsets, strided columns (which fall back to
 * the portable path), column-split tasks, streamed output and any thread
 * count.
 *
 * MoeTokenUnpermute with probs runs the same paths with a multiplier per
 * row; its fast paths are held to its portable loop (unpermute.c) the same
 * way, over every pair of token and probs dtypes, with products that are
 * NaNs of either operand or both, infinities, -0 and subnormals, zero probs
 * (slot 0's too), dropped slots, probs in any layout, and strided rows or
 * output (which fall back to the portable loop).
 *
 * Case n is seeded with n, so a failing case can be rerun alone
 * (MOEPERM_TEST_CASE=n).  On a CPU without the fast path the tests skip.
 */
#include <fenv.h>
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#if (defined(__x86_64__) || defined(__i386__)) && defined(__GNUC__)
#include <cpuid.h>
#endif

#include "core/dispatch.h"
#include "core/fp.h"
#include "core/internal.h"
#include "sum/sum.h"
#include "sum/sum_x86.h"
#include "unpermute/unpermute.h"
#include "unpermute_grad/unpermute_grad.h"
#include "naive.h"

static bool have_fast_path(void)
{
    return moeperm_isa_supported(MOEPERM_ISA_X86_AVX2);
}

#ifdef MOEPERM_HAVE_X86_PATH

static const moeperm_dtype dtypes[3] = {MOEPERM_FLOAT, MOEPERM_FLOAT16, MOEPERM_BF16};

/* The kernels of each instruction set, and whether this CPU has it. */
typedef struct instruction_set {
    const char *name;
    moeperm_isa isa;
    const moeperm_x86_kernels *kernels;
} instruction_set;

static const instruction_set sets[2] = {
    {"avx2", MOEPERM_ISA_X86_AVX2, &moeperm_x86_avx2},
    {"avx512", MOEPERM_ISA_X86_AVX512, &moeperm_x86_avx512},
};

static void test_every_bf16_and_fp16_widening_matches_fp_h(void **state)
{
    (void)state;
    if (!have_fast_path())
        skip();
    uint16_t *src = malloc(65536 * sizeof *src);
    float *bf = malloc(65536 * sizeof *bf), *fp = malloc(65536 * sizeof *fp);
    assert_non_null(src);
    assert_non_null(bf);
    assert_non_null(fp);
    for (uint32_t i = 0; i < 65536; i++)
        src[i] = (uint16_t)i;
    for (int set = 0; set < 2; set++) {
        if (!moeperm_isa_supported(sets[set].isa))
            continue;
        sets[set].kernels->bf16_to_float(src, bf, 65536);
        sets[set].kernels->fp16_to_float(src, fp, 65536);
        for (uint32_t i = 0; i < 65536; i++) {
            if (fp_bits(bf[i]) != fp_bits(fp_bf16_to_float((uint16_t)i)))
                fail_msg("%s bf16 0x%04x: vector 0x%08x, fp.h 0x%08x", sets[set].name, i,
                         fp_bits(bf[i]), fp_bits(fp_bf16_to_float((uint16_t)i)));
            if (fp_bits(fp[i]) != fp_bits(fp_fp16_to_float((uint16_t)i)))
                fail_msg("%s fp16 0x%04x: vector 0x%08x, fp.h 0x%08x", sets[set].name, i,
                         fp_bits(fp[i]), fp_bits(fp_fp16_to_float((uint16_t)i)));
        }
    }
    free(src);
    free(bf);
    free(fp);
}

/* MoeTokenUnpermuteGrad's rows widen bf16 in column order without making
 * a signalling NaN quiet (the value is only multiplied, and x86 makes the
 * product quiet): every one of the 65536 values widens to its bits moved
 * up 16 places, the vector code and its scalar tail alike. */
static void test_every_bf16_widens_in_column_order_to_its_bits(void **state)
{
    (void)state;
    if (!have_fast_path())
        skip();
    enum { N = 65536 + 13 };
    uint16_t *src = malloc(N * sizeof *src);
    float *dst = malloc(N * sizeof *dst);
    assert_non_null(src);
    assert_non_null(dst);
    for (uint32_t i = 0; i < N; i++)
        src[i] = (uint16_t)(i * 40503u);
    for (int set = 0; set < 2; set++) {
        if (!moeperm_isa_supported(sets[set].isa))
            continue;
        sets[set].kernels->bf16_columns_to_float(src, dst, N);
        for (uint32_t i = 0; i < N; i++)
            if (fp_bits(dst[i]) != (uint32_t)src[i] << 16)
                fail_msg("%s bf16 0x%04x at %u: vector 0x%08x", sets[set].name, src[i], i,
                         fp_bits(dst[i]));
    }
    free(src);
    free(dst);
}

/* The copy past the caches (MoeTokenPermute's rows, MoeTokenUnpermuteGrad's
 * without probs) against memcpy: every length up to three lines and some
 * longer ones, at every offset of source and destination within a line,
 * and not a byte written outside the destination. */
static void test_stream_copy_equals_memcpy_and_writes_nothing_else(void **state)
{
    (void)state;
    if (!have_fast_path())
        skip();
    enum { ROOM = 1 << 14 };
    unsigned char *src = aligned_alloc(64, ROOM), *dst = aligned_alloc(64, ROOM + 128);
    assert_non_null(src);
    assert_non_null(dst);
    uint64_t rng = 5;
    for (size_t i = 0; i < ROOM; i++)
        src[i] = (unsigned char)naive_rand(&rng);
    static const size_t longer[] = {255, 4096, 8191, 12345};
    for (int set = 0; set < 2; set++) {
        if (!moeperm_isa_supported(sets[set].isa))
            continue;
        const moeperm_x86_kernels *k = sets[set].kernels;
        for (size_t n = 0; n < 192 + 4; n++) {
            size_t bytes = n < 192 ? n : longer[n - 192];
            for (size_t from = 0; from < 64; from += 7)
                for (size_t to = 0; to < 64; to++) {
                    size_t span = to + bytes + 128; /* the copy and a line on either side */
                    memset(dst, 0xa5, span);
                    k->stream_copy(dst + to, src + from, bytes);
                    k->fence();
                    for (size_t i = 0; i < span; i++) {
                        unsigned char want = i >= to && i < to + bytes ? src[from + i - to] : 0xa5;
                        if (dst[i] != want)
                            fail_msg("%s: %zu bytes from offset %zu to %zu: byte %zu is 0x%02x, "
                                     "not 0x%02x",
                                     k->name, bytes, from, to, i, dst[i], want);
                    }
                }
        }
    }
    free(src);
    free(dst);
}

/* Every boundary of both narrowings (and its neighbours), bf16 in both
 * layouts, then random patterns; the slow suite runs all 2^32. */
static void test_narrowing_edges_and_random_patterns_match_fp_h(void **state)
{
    (void)state;
    if (!have_fast_path())
        skip();
    enum { N = 1 << 20 };
    static const uint32_t edges[] = {
        0x00000000, 0x00000001, 0x007fffff, 0x00800000, 0x33000000, 0x33000001, 0x337fffff,
        0x33800000, 0x33c00000, 0x387fc000, 0x387fe000, 0x38800000, 0x3f800000, 0x3f808000,
        0x3f818000, 0x477fe000, 0x477fefff, 0x477ff000, 0x47800000, 0x7f7f7fff, 0x7f7f8000,
        0x7f7fffff, 0x7f800000, 0x7f800001, 0x7fbfffff, 0x7fc00000, 0x7fffffff, 0x3effe000,
    };
    float *src = malloc(N * sizeof *src);
    uint16_t *bf = malloc(N * sizeof *bf), *fp = malloc(N * sizeof *fp);
    uint16_t *columns = malloc(N * sizeof *columns);
    assert_non_null(src);
    assert_non_null(bf);
    assert_non_null(fp);
    assert_non_null(columns);
    uint64_t rng = 1;
    size_t n = 0;
    for (size_t e = 0; e < sizeof edges / sizeof *edges; e++)
        for (int32_t d = -2; d <= 2; d++)
            for (uint32_t sign = 0; sign < 2; sign++)
                src[n++] = fp_from_bits(((edges[e] + (uint32_t)d) & 0x7fffffffu) | sign << 31);
    while (n < N)
        src[n++] = fp_from_bits((uint32_t)naive_rand(&rng));
    for (int set = 0; set < 2; set++) {
        if (!moeperm_isa_supported(sets[set].isa))
            continue;
        sets[set].kernels->float_to_bf16(src, bf, N);
        sets[set].kernels->float_to_bf16_columns(src, columns, N);
        sets[set].kernels->float_to_fp16(src, fp, N);
        for (size_t i = 0; i < N; i++) {
            if (bf[i] != fp_float_to_bf16(src[i]))
                fail_msg("%s float 0x%08x -> bf16: vector 0x%04x, fp.h 0x%04x", sets[set].name,
                         fp_bits(src[i]), bf[i], fp_float_to_bf16(src[i]));
            if (columns[i] != fp_float_to_bf16(src[i]))
                fail_msg("%s float 0x%08x -> bf16 in column order: vector 0x%04x, fp.h 0x%04x",
                         sets[set].name, fp_bits(src[i]), columns[i], fp_float_to_bf16(src[i]));
            if (fp[i] != fp_float_to_fp16(src[i]))
                fail_msg("%s float 0x%08x -> fp16: vector 0x%04x, fp.h 0x%04x", sets[set].name,
                         fp_bits(src[i]), fp[i], fp_float_to_fp16(src[i]));
        }
    }
    free(src);
    free(bf);
    free(fp);
    free(columns);
}

/* A value of dtype drawn to hit the edges: specials (signed zeros, inf,
 * quiet and signalling NaNs of both signs), subnormals, values near
 * overflow, values whose sums land on rounding ties, ordinary values. */
static uint32_t draw(uint64_t *rng, moeperm_dtype dtype)
{
    uint64_t r = naive_rand(rng);
    unsigned pick = (unsigned)(r % 16);
    uint32_t bits = (uint32_t)(r >> 32);
    if (dtype == MOEPERM_FLOAT) {
        static const uint32_t specials[] = {0x00000000, 0x80000000, 0x7f800000, 0xff800000,
                                            0x7fc00000, 0xffc00001, 0x7f800001, 0xffa00000,
                                            0x7f7fffff, 0xff7fffff, 0x00000001, 0x807fffff};
        if (pick < 3)
            return specials[bits % 12];
        if (pick < 5)
            return bits & 0x807fffffu;
        if (pick < 7)
            return (bits & 0x80ffffffu) | 0x7e000000u;
        if (pick < 10)
            return (bits & 0x8000e000u) | 0x3f800000u;
        return (bits & 0x803fffffu) | 0x3e000000u;
    }
    static const uint16_t bf16_specials[] = {0x0000, 0x8000, 0x7f80, 0xff80, 0x7fc0, 0xff81,
                                             0x7f81, 0xffc1, 0x7f7f, 0xff7f, 0x0001, 0x807f};
    static const uint16_t fp16_specials[] = {0x0000, 0x8000, 0x7c00, 0xfc00, 0x7e00, 0xfc01,
                                             0x7c01, 0xfe01, 0x7bff, 0xfbff, 0x0001, 0x83ff};
    const uint16_t *specials = dtype == MOEPERM_BF16 ? bf16_specials : fp16_specials;
    if (pick < 3)
        return specials[bits % 12];
    if (pick < 5)
        return bits & (dtype == MOEPERM_BF16 ? 0x807fu : 0x83ffu);
    if (pick < 7)
        return (bits & 0x807fu) | (dtype == MOEPERM_BF16 ? 0x7f00u : 0x7800u);
    return (bits & 0x80ffu) | (dtype == MOEPERM_BF16 ? 0x3f00u : 0x3c00u);
}

/* One case: grad [rows, hidden] inside a buffer with row stride
 * grad_stride (>= hidden) and column stride grad_cstride, offset
 * grad_offset; out likewise.  Runs the portable path and each x86 path
 * this CPU has (with `threads`) and requires identical bits, NaNs
 * included. */
typedef struct layout {
    int64_t grad_stride, grad_cstride, grad_offset, out_stride, out_cstride, out_offset;
    /* 0: indices a permutation of the slots; else each drawn from
     * [0, index_span): rows read twice, and dropped slots where the span
     * passes the rows */
    int64_t index_span;
} layout;

/* The slots' indices as a case asks for them. */
static void draw_indices(uint64_t *rng, int32_t *indices, int64_t count, int64_t index_span)
{
    if (index_span == 0) {
        naive_permutation(rng, indices, count);
        return;
    }
    for (int64_t i = 0; i < count; i++)
        indices[i] = (int32_t)(naive_rand(rng) % (uint64_t)index_span);
}

/* A layout with its defaults filled in: unit column strides, row strides
 * of at least a row. */
static layout complete(layout lay, int64_t hidden)
{
    if (lay.grad_cstride == 0)
        lay.grad_cstride = 1;
    if (lay.out_cstride == 0)
        lay.out_cstride = 1;
    if (lay.grad_stride < hidden * lay.grad_cstride)
        lay.grad_stride = hidden * lay.grad_cstride;
    if (lay.out_stride < hidden * lay.out_cstride)
        lay.out_stride = hidden * lay.out_cstride;
    return lay;
}

static void check_case(int number, moeperm_dtype dtype, int64_t tokens, int64_t top_k,
                       int64_t hidden, int64_t rows, layout lay, int threads)
{
    uint64_t rng = (uint64_t)number;
    size_t es = naive_size(dtype);
    int64_t count = tokens * top_k;
    lay = complete(lay, hidden);
    int64_t grad_elems = lay.grad_offset + rows * lay.grad_stride + 1;
    int64_t out_elems = lay.out_offset + tokens * lay.out_stride + 1;
    char *grad = malloc((size_t)grad_elems * es);
    int32_t *indices = malloc((size_t)(count + 1) * sizeof *indices);
    char *want = malloc((size_t)out_elems * es), *got = malloc((size_t)out_elems * es);
    assert_non_null(grad);
    assert_non_null(indices);
    assert_non_null(want);
    assert_non_null(got);
    for (int64_t i = 0; i < grad_elems; i++) {
        uint32_t v = draw(&rng, dtype);
        if (es == 4)
            memcpy(grad + i * 4, &v, 4);
        else
            ((uint16_t *)grad)[i] = (uint16_t)v;
    }
    draw_indices(&rng, indices, count, lay.index_span);
    memset(want, 0x5a, (size_t)out_elems * es);
    memset(got, 0x5a, (size_t)out_elems * es);

    int64_t gdims[2] = {rows, hidden}, gstrides[2] = {lay.grad_stride, lay.grad_cstride};
    int64_t idims[1] = {count};
    int64_t odims[2] = {tokens, hidden}, ostrides[2] = {lay.out_stride, lay.out_cstride};
    moeperm_tensor *g = moeperm_tensor_create(gdims, 2, dtype, gstrides, lay.grad_offset, grad);
    moeperm_tensor *ix = moeperm_tensor_create(idims, 1, MOEPERM_INT32, NULL, 0, indices);
    moeperm_tensor *o = moeperm_tensor_create(odims, 2, dtype, ostrides, lay.out_offset, want);
    assert_non_null(g);
    assert_non_null(ix);
    assert_non_null(o);
    struct moeperm_sum plan = {.permuted = *g, .indices = *ix, .out = *o, .top_k = top_k};
    moeperm_sum_run(&plan, 1, MOEPERM_ISA_PORTABLE);
    plan.out.data = got;
    for (int p = 0; p < 2; p++) {
        if (!moeperm_isa_supported(sets[p].isa))
            continue;
        memset(got, 0x5a, (size_t)out_elems * es);
        moeperm_sum_run(&plan, threads, sets[p].isa);
        for (int64_t i = 0; i < out_elems; i++) {
            uint32_t w = 0, v = 0;
            memcpy(&w, want + i * (int64_t)es, es);
            memcpy(&v, got + i * (int64_t)es, es);
            if (w != v)
                fail_msg("case %d (dtype %d, T=%lld K=%lld H=%lld R=%lld, %s, %d threads): "
                         "element %lld of out's buffer: portable 0x%x, fast 0x%x",
                         number, dtype, (long long)tokens, (long long)top_k, (long long)hidden,
                         (long long)rows, sets[p].name, threads, (long long)i, w, v);
        }
    }
    moeperm_tensor_destroy(g);
    moeperm_tensor_destroy(ix);
    moeperm_tensor_destroy(o);
    free(grad);
    free(indices);
    free(want);
    free(got);
}

static bool selected(int number)
{
    const char *only = getenv("MOEPERM_TEST_CASE");
    return !only || atoi(only) == number;
}

/* The shape of random case `number`, the index-th of its series: tokens
 * in [1, max_tokens], top_k in [1, max_top_k], hidden every size from 1
 * to 150 for the first 450 (the vector tails), then up to max_hidden; a
 * third of the cases drop slots (slot 0 among them) and a fifth have row
 * strides and offsets (still the fast path). */
typedef struct shape {
    int64_t tokens, top_k, hidden, rows;
    layout lay;
} shape;

static shape random_shape(int index, uint64_t *rng, int64_t max_tokens, int64_t max_top_k,
                          int64_t max_hidden)
{
    shape sh = {0};
    sh.tokens = 1 + (int64_t)(naive_rand(rng) % (uint64_t)max_tokens);
    sh.top_k = 1 + (int64_t)(naive_rand(rng) % (uint64_t)max_top_k);
    sh.hidden = index < 450 ? 1 + index / 3 : 1 + (int64_t)(naive_rand(rng) % (uint64_t)max_hidden);
    int64_t count = sh.tokens * sh.top_k;
    sh.rows = index % 3 == 1 ? (int64_t)(naive_rand(rng) % (uint64_t)(count + 1)) : count;
    if (index % 5 == 2) {
        sh.lay.grad_stride = sh.hidden + 1 + (int64_t)(naive_rand(rng) % 7);
        sh.lay.grad_offset = (int64_t)(naive_rand(rng) % 5);
        sh.lay.out_stride = sh.hidden + (int64_t)(naive_rand(rng) % 3);
        sh.lay.out_offset = (int64_t)(naive_rand(rng) % 5);
    }
    return sh;
}

static void test_random_cases_fast_path_matches_portable_bits(void **state)
{
    (void)state;
    if (!have_fast_path())
        skip();
    for (int number = 0; number < 600; number++) {
        if (!selected(number))
            continue;
        uint64_t rng = (uint64_t)number * 104729u + 7;
        shape sh = random_shape(number, &rng, 24, 10, 700);
        check_case(number, dtypes[number % 3], sh.tokens, sh.top_k, sh.hidden, sh.rows, sh.lay,
                   1 + number % 3);
    }
}

static void test_top_k_1_and_512_fast_path_matches_portable_bits(void **state)
{
    (void)state;
    if (!have_fast_path())
        skip();
    layout lay = {0};
    for (int d = 0; d < 3; d++) {
        if (selected(1000 + d))
            check_case(1000 + d, dtypes[d], 41, 1, 77, 41, lay, 2);
        if (selected(1010 + d))
            check_case(1010 + d, dtypes[d], 3, 512, 67, 1536, lay, 2);
        if (selected(1020 + d))
            check_case(1020 + d, dtypes[d], 2, 512, 35, 700, lay, 1);
    }
}

/* Rows read by several slots, dropped slots anywhere (slot 0 too) and more
 * rows than slots: the inputs the device takes beyond a permutation. */
static void test_repeated_rows_and_dropped_slots_fast_path_matches_portable_bits(void **state)
{
    (void)state;
    if (!have_fast_path())
        skip();
    for (int number = 3000; number < 3150; number++) {
        if (!selected(number))
            continue;
        uint64_t rng = (uint64_t)number * 2654435761u + 11;
        int64_t tokens = 1 + (int64_t)(naive_rand(&rng) % 24);
        int64_t top_k = 1 + (int64_t)(naive_rand(&rng) % 12);
        int64_t hidden = 1 + (int64_t)(naive_rand(&rng) % 300);
        int64_t count = tokens * top_k;
        /* few rows (many repeats), as many as the slots, or many more */
        int64_t rows = number % 3 == 0 ? 1 + (int64_t)(naive_rand(&rng) % 4)
                       : number % 3 == 1 ? count
                                         : count * 3 + (int64_t)(naive_rand(&rng) % 9);
        layout lay = {0};
        lay.index_span = rows + (number % 2 ? rows / 2 + 1 : 0);
        check_case(number, dtypes[number % 3], tokens, top_k, hidden, rows, lay,
                   1 + number % 3);
    }
}

static void test_strided_columns_fall_back_and_match_portable_bits(void **state)
{
    (void)state;
    if (!have_fast_path())
        skip();
    for (int d = 0; d < 3; d++) {
        layout grad_strided = {.grad_cstride = 2, .grad_offset = 1};
        layout out_strided = {.out_cstride = 3, .out_offset = 2};
        if (selected(1100 + d))
            check_case(1100 + d, dtypes[d], 9, 4, 45, 36, grad_strided, 2);
        if (selected(1110 + d))
            check_case(1110 + d, dtypes[d], 9, 4, 45, 30, out_strided, 2);
    }
}

/* Fewer tokens than threads make the fast path split columns into blocks;
 * a large output makes it stream (non-temporal stores, aligned or not);
 * enough work (tens of MiB) gives it more than one thread. */
static void test_column_blocks_and_streamed_output_match_portable_bits(void **state)
{
    (void)state;
    if (!have_fast_path())
        skip();
    layout lay = {0};
    layout shifted = {.out_offset = 1};
    for (int d = 0; d < 3; d++) {
        if (selected(1200 + d))
            check_case(1200 + d, dtypes[d], 1, 3, 5000, 3, lay, 2);
        if (selected(1210 + d))
            check_case(1210 + d, dtypes[d], 5, 2, 4133, 9, lay, 2);
    }
    /* 16 MiB of float32 output, 8 MiB of bf16 at an odd offset, 8 MiB of
     * float16 at a 16-byte offset: 16- and 32-byte aligned streams and
     * unaligned stores */
    if (selected(1220))
        check_case(1220, MOEPERM_FLOAT, 1024, 2, 4096, 2048, lay, 2);
    if (selected(1221))
        check_case(1221, MOEPERM_BF16, 1024, 2, 4097, 2000, shifted, 2);
    layout sixteen_bytes = {.out_offset = 8};
    if (selected(1222))
        check_case(1222, MOEPERM_FLOAT16, 1024, 2, 4096, 2048, sixteen_bytes, 2);
    /* two tokens of a million columns: enough work for two threads, split
     * into column blocks */
    if (selected(1223))
        check_case(1223, MOEPERM_BF16, 2, 8, (1 << 20) + 3, 15, lay, 2);
}

/* A prob of dtype for the unpermute cases: +0 and -0 often (the slot is
 * then left out), else draw()'s values, which hold NaNs of both kinds and
 * signs, infinities, subnormals and values near overflow; a float32 one is
 * sometimes tiny, to make subnormal products of ordinary values. */
static uint32_t draw_prob(uint64_t *rng, moeperm_dtype dtype)
{
    uint64_t r = naive_rand(rng);
    unsigned pick = (unsigned)(r % 16);
    uint32_t bits = (uint32_t)(r >> 32);
    uint32_t sign = dtype == MOEPERM_FLOAT ? 0x80000000u : 0x8000u;
    if (pick < 2)
        return 0;
    if (pick < 3)
        return sign;
    if (pick < 4 && dtype == MOEPERM_FLOAT)
        return (bits & 0x807fffffu) | 0x0c000000u; /* about 2^-103 */
    return draw(rng, dtype);
}

/* A token value for the NaN-heavy cases: half of them NaNs of assorted
 * payloads, quiet and signalling, so that products of a NaN token value
 * and a NaN prob are common. */
static uint32_t draw_nan(uint64_t *rng, moeperm_dtype dtype)
{
    uint64_t r = naive_rand(rng);
    uint32_t bits = (uint32_t)(r >> 32);
    if (r % 2)
        return draw(rng, dtype);
    if (dtype == MOEPERM_FLOAT)
        return (bits & 0x807fffffu) | 0x7f800001u;
    return dtype == MOEPERM_BF16 ? (uint16_t)((bits & 0x807fu) | 0x7f81u)
                                 : (uint16_t)((bits & 0x83ffu) | 0x7c01u);
}

static void put(char *buffer, int64_t i, size_t es, uint32_t v)
{
    if (es == 4)
        memcpy(buffer + i * 4, &v, 4);
    else
        ((uint16_t *)(void *)buffer)[i] = (uint16_t)v;
}

/* The layout of an unpermute case: permuted_tokens (grad_*) and out as in
 * check_case(), and probs [tokens, top_k] row-major or transposed
 * (probs_transposed: column stride tokens), after probs_offset elements. */
typedef struct unpermute_layout {
    layout rows;
    bool probs_transposed;
    int64_t probs_offset;
} unpermute_layout;

/* Compares an output's whole buffer (what lies between and around the
 * rows too). */
static void expect_same_buffer(int number, const char *what, const char *output,
                               const char *want, const char *got, int64_t elems, size_t es)
{
    for (int64_t i = 0; i < elems; i++) {
        uint32_t w = 0, v = 0;
        memcpy(&w, want + i * (int64_t)es, es);
        memcpy(&v, got + i * (int64_t)es, es);
        if (w != v)
            fail_msg("case %d, %s: element %lld of %s's buffer: portable 0x%x, fast 0x%x",
                     number, what, (long long)i, output, w, v);
    }
}

/* A MoeTokenUnpermute plan with probs over four views (not NULL). */
static struct moeperm_unpermute_plan unpermute_plan_of(const moeperm_tensor *tx,
                                                       const moeperm_tensor *ti,
                                                       const moeperm_tensor *tp,
                                                       const moeperm_tensor *to, int64_t top_k)
{
    assert_non_null(tx);
    assert_non_null(ti);
    assert_non_null(tp);
    assert_non_null(to);
    struct moeperm_unpermute_plan plan = {
        .sum = {.permuted = *tx, .indices = *ti, .out = *to, .top_k = top_k},
        .probs = *tp,
        .has_probs = true,
    };
    return plan;
}

/* One MoeTokenUnpermute case: the portable loop on one thread gives the
 * expected bits; each x86 path this CPU has must give the same, called
 * directly (unit column strides only) and through moeperm_unpermute_run()
 * with that path chosen, on `threads` threads. */
static void check_unpermute_case(int number, moeperm_dtype dtype, moeperm_dtype probs_dtype,
                                 int64_t tokens, int64_t top_k, int64_t hidden, int64_t rows,
                                 unpermute_layout ul, int threads, bool nan_heavy)
{
    uint64_t rng = (uint64_t)number;
    size_t es = naive_size(dtype), ps = naive_size(probs_dtype);
    int64_t count = tokens * top_k;
    layout lay = ul.rows;
    lay = complete(lay, hidden);
    int64_t x_elems = lay.grad_offset + rows * lay.grad_stride + 1;
    int64_t out_elems = lay.out_offset + tokens * lay.out_stride + 1;
    int64_t p_elems = ul.probs_offset + count + 1;
    char *x = malloc((size_t)x_elems * es), *probs = malloc((size_t)p_elems * ps);
    int32_t *indices = malloc((size_t)(count + 1) * sizeof *indices);
    char *want = malloc((size_t)out_elems * es), *got = malloc((size_t)out_elems * es);
    assert_non_null(x);
    assert_non_null(probs);
    assert_non_null(indices);
    assert_non_null(want);
    assert_non_null(got);
    for (int64_t i = 0; i < x_elems; i++)
        put(x, i, es, nan_heavy ? draw_nan(&rng, dtype) : draw(&rng, dtype));
    for (int64_t i = 0; i < p_elems; i++)
        put(probs, i, ps, nan_heavy ? draw_nan(&rng, probs_dtype) : draw_prob(&rng, probs_dtype));
    draw_indices(&rng, indices, count, ul.rows.index_span);
    memset(want, 0x5a, (size_t)out_elems * es);

    int64_t xdims[2] = {rows, hidden}, xstrides[2] = {lay.grad_stride, lay.grad_cstride};
    int64_t idims[1] = {count};
    int64_t pdims[2] = {tokens, top_k};
    int64_t pstrides[2] = {ul.probs_transposed ? 1 : top_k, ul.probs_transposed ? tokens : 1};
    int64_t odims[2] = {tokens, hidden}, ostrides[2] = {lay.out_stride, lay.out_cstride};
    moeperm_tensor *tx = moeperm_tensor_create(xdims, 2, dtype, xstrides, lay.grad_offset, x);
    moeperm_tensor *ti = moeperm_tensor_create(idims, 1, MOEPERM_INT32, NULL, 0, indices);
    moeperm_tensor *tp =
        moeperm_tensor_create(pdims, 2, probs_dtype, pstrides, ul.probs_offset, probs);
    moeperm_tensor *to = moeperm_tensor_create(odims, 2, dtype, ostrides, lay.out_offset, want);
    struct moeperm_unpermute_plan plan = unpermute_plan_of(tx, ti, tp, to, top_k);
    assert_int_equal(moeperm_isa_choose(MOEPERM_ISA_PORTABLE), MOEPERM_SUCCESS);
    moeperm_unpermute_run(&plan, 1);
    plan.sum.out.data = got;
    bool unit_columns = lay.grad_cstride == 1 && lay.out_cstride == 1;
    char what[160];
    for (int p = 0; p < 2; p++) {
        if (!moeperm_isa_supported(sets[p].isa))
            continue;
        snprintf(what, sizeof what,
                 "tokens %s, probs %s, T=%lld K=%lld H=%lld R=%lld, %s, %d threads",
                 moeperm_dtype_name(dtype), moeperm_dtype_name(probs_dtype), (long long)tokens,
                 (long long)top_k, (long long)hidden, (long long)rows, sets[p].name, threads);
        if (unit_columns) {
            memset(got, 0x5a, (size_t)out_elems * es);
            moeperm_x86_run_unpermute(&plan.sum, &plan.probs, threads, sets[p].kernels);
            expect_same_buffer(number, what, "out", want, got, out_elems, es);
        }
        memset(got, 0x5a, (size_t)out_elems * es);
        assert_int_equal(moeperm_isa_choose(sets[p].isa), MOEPERM_SUCCESS);
        moeperm_unpermute_run(&plan, threads);
        expect_same_buffer(number, what, "out", want, got, out_elems, es);
    }
    assert_int_equal(moeperm_isa_choose(MOEPERM_ISA_AUTO), MOEPERM_SUCCESS);
    moeperm_tensor_destroy(tx);
    moeperm_tensor_destroy(ti);
    moeperm_tensor_destroy(tp);
    moeperm_tensor_destroy(to);
    free(x);
    free(probs);
    free(indices);
    free(want);
    free(got);
}

static void test_unpermute_random_cases_fast_path_matches_portable_bits(void **state)
{
    (void)state;
    if (!have_fast_path())
        skip();
    for (int number = 2000; number < 2540; number++) {
        if (!selected(number))
            continue;
        uint64_t rng = (uint64_t)number * 7919u + 3;
        int pair = number % 9;
        shape sh = random_shape(number - 2000, &rng, 24, 10, 700);
        unpermute_layout ul = {sh.lay, false, 0};
        if (number % 4 == 3) { /* probs transposed and offset: still the fast path */
            ul.probs_transposed = true;
            ul.probs_offset = 1 + (int64_t)(naive_rand(&rng) % 3);
        }
        check_unpermute_case(number, dtypes[pair / 3], dtypes[pair % 3], sh.tokens, sh.top_k,
                             sh.hidden, sh.rows, ul, 1 + number % 3, number % 7 == 0);
    }
}

/* The scaled path on rows read by several slots, dropped slots and more
 * rows than slots, over every dtype pair. */
static void test_unpermute_repeated_rows_and_dropped_slots_fast_path_matches_portable_bits(
    void **state)
{
    (void)state;
    if (!have_fast_path())
        skip();
    for (int number = 3200; number < 3290; number++) {
        if (!selected(number))
            continue;
        uint64_t rng = (uint64_t)number * 40503u + 5;
        int pair = number % 9;
        int64_t tokens = 1 + (int64_t)(naive_rand(&rng) % 20);
        int64_t top_k = 1 + (int64_t)(naive_rand(&rng) % 9);
        int64_t hidden = 1 + (int64_t)(naive_rand(&rng) % 200);
        int64_t count = tokens * top_k;
        int64_t rows = number % 3 == 0 ? 1 + (int64_t)(naive_rand(&rng) % 3)
                       : number % 3 == 1 ? count
                                         : count * 2 + 5;
        unpermute_layout ul = {{0}, false, 0};
        ul.rows.index_span = rows + (number % 2 ? rows + 1 : 0);
        check_unpermute_case(number, dtypes[pair / 3], dtypes[pair % 3], tokens, top_k, hidden,
                             rows, ul, 1 + number % 3, false);
    }
}

/* Products of two NaNs decide by operand order: half the token values and
 * half the probs are NaNs of different payloads, every dtype pair, tails of
 * both widths. */
static void test_unpermute_nan_products_fast_path_matches_portable_bits(void **state)
{
    (void)state;
    if (!have_fast_path())
        skip();
    unpermute_layout ul = {{0}, false, 0};
    for (int pair = 0; pair < 9; pair++) {
        if (selected(2600 + pair))
            check_unpermute_case(2600 + pair, dtypes[pair / 3], dtypes[pair % 3], 12, 6, 77, 72,
                                 ul, 2, true);
        if (selected(2610 + pair))
            check_unpermute_case(2610 + pair, dtypes[pair / 3], dtypes[pair % 3], 7, 3, 37, 19,
                                 ul, 1, true);
    }
}

static void test_unpermute_top_k_1_and_512_fast_path_matches_portable_bits(void **state)
{
    (void)state;
    if (!have_fast_path())
        skip();
    unpermute_layout ul = {{0}, false, 0};
    for (int pair = 0; pair < 9; pair++) {
        moeperm_dtype d = dtypes[pair / 3], q = dtypes[pair % 3];
        if (selected(2700 + pair))
            check_unpermute_case(2700 + pair, d, q, 41, 1, 77, 41, ul, 2, false);
        if (selected(2710 + pair))
            check_unpermute_case(2710 + pair, d, q, 3, 512, 67, 1536, ul, 2, false);
        if (selected(2720 + pair))
            check_unpermute_case(2720 + pair, d, q, 2, 512, 35, 700, ul, 1, false);
    }
}

static void test_unpermute_strided_columns_fall_back_and_match_portable_bits(void **state)
{
    (void)state;
    if (!have_fast_path())
        skip();
    for (int pair = 0; pair < 9; pair++) {
        moeperm_dtype d = dtypes[pair / 3], q = dtypes[pair % 3];
        unpermute_layout rows_strided = {{.grad_cstride = 2, .grad_offset = 1}, true, 2};
        unpermute_layout out_strided = {{.out_cstride = 3, .out_offset = 2}, false, 0};
        if (selected(2800 + pair))
            check_unpermute_case(2800 + pair, d, q, 9, 4, 45, 36, rows_strided, 2, false);
        if (selected(2810 + pair))
            check_unpermute_case(2810 + pair, d, q, 9, 4, 45, 30, out_strided, 2, false);
    }
}

/* Column blocks (fewer tokens than four per thread), streamed output
 * (aligned and not), and enough work for two threads. */
static void test_unpermute_column_blocks_and_streamed_output_match_portable_bits(void **state)
{
    (void)state;
    if (!have_fast_path())
        skip();
    unpermute_layout ul = {{0}, false, 0};
    unpermute_layout shifted = {{.out_offset = 1}, false, 0};
    unpermute_layout sixteen_bytes = {{.out_offset = 8}, true, 1};
    for (int pair = 0; pair < 9; pair++) {
        moeperm_dtype d = dtypes[pair / 3], q = dtypes[pair % 3];
        if (selected(2900 + pair))
            check_unpermute_case(2900 + pair, d, q, 1, 3, 5000, 3, ul, 2, false);
        if (selected(2910 + pair))
            check_unpermute_case(2910 + pair, d, q, 5, 2, 4133, 9, ul, 2, false);
    }
    if (selected(2920))
        check_unpermute_case(2920, MOEPERM_FLOAT, MOEPERM_BF16, 1024, 2, 4096, 2048, ul, 2,
                             false);
    if (selected(2921))
        check_unpermute_case(2921, MOEPERM_BF16, MOEPERM_FLOAT, 1024, 2, 4097, 2000, shifted, 2,
                             false);
    if (selected(2922))
        check_unpermute_case(2922, MOEPERM_FLOAT16, MOEPERM_FLOAT16, 1024, 2, 4096, 2048,
                             sixteen_bytes, 2, false);
    if (selected(2923))
        check_unpermute_case(2923, MOEPERM_BF16, MOEPERM_BF16, 2, 8, (1 << 20) + 3, 15, ul, 2,
                             false);
}

/* Where a row ends inside a masked pair (AVX-512), the lanes past the end
 * multiply +0.0 by +0.0, not by the prob: infinite probs times ordinary
 * values raise no invalid-operation flag, on any path, as in the portable
 * loop (the run adds the flags it raised to the caller's). */
static void test_unpermute_infinite_probs_raise_no_invalid_flag(void **state)
{
    (void)state;
    if (!have_fast_path())
        skip();
    enum { T = 3, K = 2, H = 45 };
    static const uint32_t one[3] = {0x3f800000u, 0x3c00u, 0x3f80u};
    float probs[T * K];
    int32_t indices[T * K];
    uint32_t x[T * K * H], out[T * H];
    for (int i = 0; i < T * K; i++) {
        probs[i] = fp_from_bits(0x7f800000u);
        indices[i] = i;
    }
    for (int d = 0; d < 3; d++) {
        size_t es = naive_size(dtypes[d]);
        for (int i = 0; i < T * K * H; i++)
            put((char *)x, i, es, one[d]);
        for (int64_t h = 1; h <= H; h += 22) { /* a masked pair of 1 and of 23 columns */
            int64_t xdims[2] = {T * K, h}, idims[1] = {T * K}, pdims[2] = {T, K},
                    odims[2] = {T, h};
            moeperm_tensor *tx = moeperm_tensor_create(xdims, 2, dtypes[d], NULL, 0, x);
            moeperm_tensor *ti = moeperm_tensor_create(idims, 1, MOEPERM_INT32, NULL, 0, indices);
            moeperm_tensor *tp = moeperm_tensor_create(pdims, 2, MOEPERM_FLOAT, NULL, 0, probs);
            moeperm_tensor *to = moeperm_tensor_create(odims, 2, dtypes[d], NULL, 0, out);
            struct moeperm_unpermute_plan plan = unpermute_plan_of(tx, ti, tp, to, K);
            assert_int_equal(moeperm_isa_choose(MOEPERM_ISA_PORTABLE), MOEPERM_SUCCESS);
            feclearexcept(FE_ALL_EXCEPT);
            moeperm_unpermute_run(&plan, 1);
            if (fetestexcept(FE_INVALID))
                fail_msg("%s, H=%lld: the portable loop raised invalid",
                         moeperm_dtype_name(dtypes[d]), (long long)h);
            assert_int_equal(moeperm_isa_choose(MOEPERM_ISA_AUTO), MOEPERM_SUCCESS);
            for (int set = 0; set < 2; set++) {
                if (!moeperm_isa_supported(sets[set].isa))
                    continue;
                feclearexcept(FE_ALL_EXCEPT);
                moeperm_x86_run_unpermute(&plan.sum, &plan.probs, 1, sets[set].kernels);
                if (fetestexcept(FE_INVALID))
                    fail_msg("%s, H=%lld, %s: invalid raised", moeperm_dtype_name(dtypes[d]),
                             (long long)h, sets[set].name);
            }
            feclearexcept(FE_ALL_EXCEPT);
            moeperm_tensor_destroy(tx);
            moeperm_tensor_destroy(ti);
            moeperm_tensor_destroy(tp);
            moeperm_tensor_destroy(to);
        }
    }
}

/*
 * MoeTokenUnpermuteGrad: a value for a case, by kind: 0 draw()'s edge
 * values (which make most sums NaN), 1 ordinary values spread over a few
 * binades of both signs, so that the order of the sums shows in their
 * bits, 2 the same with one value in 64 drawn by draw(), 3 draw_nan()'s
 * (NaNs of every payload half the time, whose low bits meet the bf16
 * rounding); 4 is 1 for the tokens and g and 3 for the probs (a NaN
 * product from p alone).
 */
static uint32_t draw_ug(uint64_t *rng, moeperm_dtype dtype, int kind)
{
    uint64_t r = naive_rand(rng);
    if (kind == 3)
        return draw_nan(rng, dtype);
    if (kind == 4)
        kind = 1;
    if (kind == 0 || (kind == 2 && r % 64 == 0))
        return draw(rng, dtype);
    float mantissa = (float)(r & 0xffffff) / (float)(1 << 24) + 0.5f;
    float value = ((r >> 40) & 1 ? -1.0f : 1.0f) * ldexpf(mantissa, (int)((r >> 24) % 12) - 6);
    return dtype == MOEPERM_FLOAT   ? fp_bits(value)
           : dtype == MOEPERM_BF16 ? fp_float_to_bf16(value)
                                   : fp_float_to_fp16(value);
}

/* The layout of a MoeTokenUnpermuteGrad case: permuted_tokens (grad_*)
 * and permuted_tokens_grad (out_*) as in check_case(), g with row stride
 * hidden + g_pad, probs and probs_grad [tokens, top_k] row-major or
 * transposed. */
typedef struct ug_layout {
    layout rows;
    int64_t g_pad;
    bool probs_transposed;
} ug_layout;

typedef struct ug_buffers {
    char *x, *g, *p, *out, *pg;
    int32_t *indices;
    int64_t x_elems, g_elems, p_elems, out_elems;
} ug_buffers;

/* Plans the case on buffers b, with `chip` when not NULL. */
static moeperm_executor *ug_plan_of(const ug_buffers *b, moeperm_dtype dtype,
                                    moeperm_dtype probs_dtype, int64_t tokens, int64_t top_k,
                                    int64_t hidden, int64_t rows, const layout *lay,
                                    const ug_layout *ul, const moeperm_chip *chip)
{
    int64_t count = tokens * top_k;
    int64_t xdims[2] = {rows, hidden}, xstrides[2] = {lay->grad_stride, lay->grad_cstride};
    int64_t gdims[2] = {tokens, hidden}, gstrides[2] = {hidden + ul->g_pad, 1};
    int64_t idims[1] = {count}, pdims[2] = {tokens, top_k};
    int64_t pstrides[2] = {ul->probs_transposed ? 1 : top_k, ul->probs_transposed ? tokens : 1};
    int64_t ostrides[2] = {lay->out_stride, lay->out_cstride};
    moeperm_tensor *tx = moeperm_tensor_create(xdims, 2, dtype, xstrides, lay->grad_offset, b->x);
    moeperm_tensor *tg = moeperm_tensor_create(gdims, 2, dtype, gstrides, 0, b->g);
    moeperm_tensor *ti = moeperm_tensor_create(idims, 1, MOEPERM_INT32, NULL, 0, b->indices);
    moeperm_tensor *tp = moeperm_tensor_create(pdims, 2, probs_dtype, pstrides, 0, b->p);
    moeperm_tensor *to = moeperm_tensor_create(xdims, 2, dtype, ostrides, lay->out_offset, b->out);
    moeperm_tensor *tq = moeperm_tensor_create(pdims, 2, probs_dtype, pstrides, 0, b->pg);
    assert_non_null(tx);
    assert_non_null(tg);
    assert_non_null(ti);
    assert_non_null(tp);
    assert_non_null(to);
    assert_non_null(tq);
    uint64_t workspace;
    moeperm_executor *plan = NULL;
    if (moeperm_token_unpermute_grad_get_workspace_size(tx, tg, ti, tp, false, NULL, 0, to, tq,
                                                        &workspace, &plan) != MOEPERM_SUCCESS)
        fail_msg("plan: %s", moeperm_last_error());
    if (chip)
        assert_int_equal(moeperm_executor_set_chip(plan, chip), MOEPERM_SUCCESS);
    moeperm_tensor_destroy(tx);
    moeperm_tensor_destroy(tg);
    moeperm_tensor_destroy(ti);
    moeperm_tensor_destroy(tp);
    moeperm_tensor_destroy(to);
    moeperm_tensor_destroy(tq);
    return plan;
}

/* One MoeTokenUnpermuteGrad case: the portable loop on one thread gives
 * the expected bits of both outputs' whole buffers; each x86 path this CPU
 * has must give the same on `threads` threads. */
static void check_unpermute_grad_case(int number, moeperm_dtype dtype, moeperm_dtype probs_dtype,
                                      int64_t tokens, int64_t top_k, int64_t hidden,
                                      int64_t rows, ug_layout ul, const moeperm_chip *chip,
                                      int threads, int kind)
{
    uint64_t rng = (uint64_t)number;
    size_t es = naive_size(dtype), ps = naive_size(probs_dtype);
    int64_t count = tokens * top_k;
    layout lay = ul.rows;
    lay = complete(lay, hidden);
    ug_buffers b = {
        .x_elems = lay.grad_offset + rows * lay.grad_stride + 1,
        .g_elems = tokens * (hidden + ul.g_pad) + 1,
        .p_elems = count + 1,
        .out_elems = lay.out_offset + rows * lay.out_stride + 1,
    };
    /* 64-byte aligned, as framework allocators give tensors, so that the
     * offsets decide the alignment of the rows */
    b.x = aligned_alloc(64, ((size_t)b.x_elems * es + 63) / 64 * 64);
    b.g = aligned_alloc(64, ((size_t)b.g_elems * es + 63) / 64 * 64);
    b.p = malloc((size_t)b.p_elems * ps);
    b.pg = malloc((size_t)b.p_elems * ps);
    b.out = aligned_alloc(64, ((size_t)b.out_elems * es + 63) / 64 * 64);
    b.indices = malloc((size_t)(count + 1) * sizeof *b.indices);
    char *want = malloc((size_t)b.out_elems * es), *want_pg = malloc((size_t)b.p_elems * ps);
    assert_true(b.x && b.g && b.p && b.pg && b.out && b.indices && want && want_pg);
    for (int64_t i = 0; i < b.x_elems; i++)
        put(b.x, i, es, draw_ug(&rng, dtype, kind));
    for (int64_t i = 0; i < b.g_elems; i++)
        put(b.g, i, es, draw_ug(&rng, dtype, kind));
    for (int64_t i = 0; i < b.p_elems; i++)
        put(b.p, i, ps,
            kind == 0   ? draw_prob(&rng, probs_dtype)
            : kind == 4 ? draw_nan(&rng, probs_dtype)
                        : draw_ug(&rng, probs_dtype, kind));
    naive_permutation(&rng, b.indices, count);

    moeperm_executor *plan =
        ug_plan_of(&b, dtype, probs_dtype, tokens, top_k, hidden, rows, &lay, &ul, chip);
    memset(b.out, 0x5a, (size_t)b.out_elems * es);
    memset(b.pg, 0x5a, (size_t)b.p_elems * ps);
    assert_true(moeperm_unpermute_grad_run(plan->plan, 1, MOEPERM_ISA_PORTABLE));
    memcpy(want, b.out, (size_t)b.out_elems * es);
    memcpy(want_pg, b.pg, (size_t)b.p_elems * ps);
    char what[200];
    for (int p = 0; p < 2; p++) {
        if (!moeperm_isa_supported(sets[p].isa))
            continue;
        snprintf(what, sizeof what,
                 "unpermute grad: tokens %s, probs %s, T=%lld K=%lld H=%lld R=%lld, %s, %d "
                 "threads",
                 moeperm_dtype_name(dtype), moeperm_dtype_name(probs_dtype), (long long)tokens,
                 (long long)top_k, (long long)hidden, (long long)rows, sets[p].name, threads);
        memset(b.out, 0x5a, (size_t)b.out_elems * es);
        memset(b.pg, 0x5a, (size_t)b.p_elems * ps);
        assert_true(moeperm_unpermute_grad_run(plan->plan, threads, sets[p].isa));
        expect_same_buffer(number, what, "permuted_tokens_grad", want, b.out, b.out_elems, es);
        expect_same_buffer(number, what, "probs_grad", want_pg, b.pg, b.p_elems, ps);
    }
    moeperm_executor_destroy(plan);
    free(b.x);
    free(b.g);
    free(b.p);
    free(b.pg);
    free(b.out);
    free(b.indices);
    free(want);
    free(want_pg);
}

/* Every dtype pair, every hidden size from 1 to 150 (the vector tails and
 * the chunks under 64 columns) and then larger ones, edge values, ordinary
 * values and ordinary values with a few edge ones, dropped slots, row
 * strides and offsets. */
static void test_unpermute_grad_random_cases_fast_path_matches_portable_bits(void **state)
{
    (void)state;
    if (!have_fast_path())
        skip();
    for (int number = 3000; number < 3540; number++) {
        if (!selected(number))
            continue;
        uint64_t rng = (uint64_t)number * 6151u + 11;
        int pair = number % 9;
        shape sh = random_shape(number - 3000, &rng, 6, 8, 1200);
        sh.rows = sh.rows > 0 ? sh.rows : 1; /* the device refuses R = 0 */
        ug_layout ul = {sh.lay, number % 5 == 2 ? (int64_t)(naive_rand(&rng) % 4) : 0,
                        number % 4 == 3};
        check_unpermute_grad_case(number, dtypes[pair / 3], dtypes[pair % 3], sh.tokens,
                                  sh.top_k, sh.hidden, sh.rows, ul, NULL, 1 + number % 3,
                                  number % 3);
    }
}

/* Every branch of the chunk's reduction on both sides of its thresholds:
 * T = 64, 512 and 4096 exactly (the first step a level of the tree), one
 * fold, the halving loop (3000, 1920, 300 columns), rows cut into chunks
 * by a small chip, and the 16-bit row cut in two on A2. */
static void test_unpermute_grad_every_branch_fast_path_matches_portable_bits(void **state)
{
    (void)state;
    if (!have_fast_path())
        skip();
    static const int64_t hiddens[] = {63,   64,   65,   127,  128,  129,  200,  300,
                                      511,  512,  513,  1000, 1024, 1025, 1920, 3000,
                                      4095, 4096, 4097, 5000, 7168, 8192, 8193};
    const moeperm_chip small = {MOEPERM_CHIP_MIN_UB_BYTES, 48};
    int number = 3600;
    for (size_t h = 0; h < sizeof hiddens / sizeof *hiddens; h++)
        for (int pair = 0; pair < 9; pair++, number++) {
            if (!selected(number))
                continue;
            ug_layout ul = {{0}, 0, false};
            if (number % 4 == 1) /* rows that start mid-line */
                ul.rows.out_offset = 3, ul.rows.grad_offset = 5;
            check_unpermute_grad_case(number, dtypes[pair / 3], dtypes[pair % 3], 3, 3,
                                      hiddens[h], 8, ul, number % 5 == 0 ? &small : NULL,
                                      1 + number % 2, 1 + number % 2);
        }
}

/* Products of NaNs (of every payload), infinities and zeros in every
 * combination, dropped slots meeting infinite g, on every dtype pair, in
 * rows whose length leaves vector tails and in rows of T columns. */
static void test_unpermute_grad_edge_values_fast_path_matches_portable_bits(void **state)
{
    (void)state;
    if (!have_fast_path())
        skip();
    static const int64_t hiddens[] = {37, 64, 100, 512, 777};
    int number = 3900;
    for (size_t h = 0; h < sizeof hiddens / sizeof *hiddens; h++)
        for (int pair = 0; pair < 9; pair++)
            for (int kind = 0; kind < 5; kind += kind ? 1 : 3, number++)
                if (selected(number))
                    check_unpermute_grad_case(number, dtypes[pair / 3], dtypes[pair % 3], 5, 4,
                                              hiddens[h], 15, (ug_layout){{0}, 0, false}, NULL,
                                              2, kind);
}

/* Strided columns fall back to the portable loop; large outputs (8 MiB
 * and more) are streamed, aligned or not, on two threads. */
static void test_unpermute_grad_strided_and_streamed_match_portable_bits(void **state)
{
    (void)state;
    if (!have_fast_path())
        skip();
    for (int pair = 0; pair < 9; pair++) {
        moeperm_dtype d = dtypes[pair / 3], q = dtypes[pair % 3];
        ug_layout rows_strided = {{.grad_cstride = 2, .grad_offset = 1}, 0, true};
        ug_layout out_strided = {{.out_cstride = 3, .out_offset = 2}, 0, false};
        if (selected(4100 + pair))
            check_unpermute_grad_case(4100 + pair, d, q, 9, 4, 45, 36, rows_strided, NULL, 2, 2);
        if (selected(4110 + pair))
            check_unpermute_grad_case(4110 + pair, d, q, 9, 4, 45, 30, out_strided, NULL, 2, 2);
    }
    ug_layout aligned = {{0}, 0, false}, shifted = {{.out_offset = 1, .grad_offset = 3}, 0, false};
    ug_layout sixteen_bytes = {{.out_offset = 8}, 1, true};
    if (selected(4120))
        check_unpermute_grad_case(4120, MOEPERM_FLOAT, MOEPERM_BF16, 256, 8, 1024, 2048, aligned,
                                  NULL, 2, 2);
    if (selected(4121))
        check_unpermute_grad_case(4121, MOEPERM_BF16, MOEPERM_FLOAT, 256, 8, 2101, 2000, shifted,
                                  NULL, 2, 2);
    if (selected(4122))
        check_unpermute_grad_case(4122, MOEPERM_FLOAT16, MOEPERM_FLOAT16, 128, 8, 4096, 1024,
                                  sixteen_bytes, NULL, 2, 1);
}

/* Where a row ends inside a masked pair (AVX-512), the lanes past the end
 * multiply +0.0 by +0.0, not g by the prob: infinite probs times ordinary
 * g raise no invalid-operation flag, on any path, as in the portable loop
 * (the run adds the flags it raised to the caller's). */
static void test_unpermute_grad_infinite_probs_raise_no_invalid_flag(void **state)
{
    (void)state;
    if (!have_fast_path())
        skip();
    enum { T = 2, K = 2, H = 45 };
    static const uint32_t one[3] = {0x3f800000u, 0x3c00u, 0x3f80u};
    float probs[T * K], probs_grad[T * K];
    int32_t indices[T * K];
    uint32_t x[T * K * H], g[T * H], out[T * K * H];
    for (int i = 0; i < T * K; i++) {
        probs[i] = fp_from_bits(0x7f800000u);
        indices[i] = i;
    }
    for (int d = 0; d < 3; d++) {
        size_t es = naive_size(dtypes[d]);
        for (int i = 0; i < T * K * H; i++)
            put((char *)x, i, es, one[d]);
        for (int i = 0; i < T * H; i++)
            put((char *)g, i, es, one[d]);
        for (int64_t h = 1; h <= H; h += 22) {
            ug_buffers b = {.x = (char *)x, .g = (char *)g, .p = (char *)probs,
                            .out = (char *)out, .pg = (char *)probs_grad, .indices = indices};
            layout lay = {.grad_stride = h, .out_stride = h, .grad_cstride = 1, .out_cstride = 1};
            ug_layout ul = {lay, 0, false};
            moeperm_executor *plan =
                ug_plan_of(&b, dtypes[d], MOEPERM_FLOAT, T, K, h, T * K, &lay, &ul, NULL);
            for (int path = 0; path < 3; path++) {
                if (path > 0 && !moeperm_isa_supported(sets[path - 1].isa))
                    continue;
                feclearexcept(FE_ALL_EXCEPT);
                assert_true(moeperm_unpermute_grad_run(
                    plan->plan, 1,
                    path == 0 ? MOEPERM_ISA_PORTABLE : sets[path - 1].isa));
                if (fetestexcept(FE_INVALID))
                    fail_msg("%s, H=%lld, path %d: invalid raised", moeperm_dtype_name(dtypes[d]),
                             (long long)h, path);
            }
            feclearexcept(FE_ALL_EXCEPT);
            moeperm_executor_destroy(plan);
        }
    }
}

#endif

/* What this CPU runs, asked here apart from the library: AVX2 with F16C,
 * and AVX-512 F, BW, DQ and VL (the library's requirements, moeperm.h). */
static moeperm_isa cpu_best_isa(void)
{
#if (defined(__x86_64__) || defined(__i386__)) && defined(__GNUC__)
    unsigned int eax, ebx, ecx, edx;
    __builtin_cpu_init();
    bool avx2 = __builtin_cpu_supports("avx2") && __get_cpuid(1, &eax, &ebx, &ecx, &edx) &&
                (ecx & bit_F16C) != 0;
    if (avx2 && __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
        __builtin_cpu_supports("avx512dq") && __builtin_cpu_supports("avx512vl"))
        return MOEPERM_ISA_X86_AVX512;
    if (avx2)
        return MOEPERM_ISA_X86_AVX2;
#endif
    return MOEPERM_ISA_PORTABLE;
}

/* MOEPERM_FORCE_PORTABLE=1 makes the default instruction set the portable
 * one, else it is the best this CPU has (tests/core/meson.build runs this
 * test alone once more with the variable set). */
static void test_force_portable_env_picks_the_portable_path(void **state)
{
    (void)state;
    const char *force = getenv("MOEPERM_FORCE_PORTABLE");
    moeperm_isa want = force && strcmp(force, "1") == 0 ? MOEPERM_ISA_PORTABLE : cpu_best_isa();
    assert_int_equal(moeperm_isa_best(), want);
    assert_int_equal(moeperm_isa_in_use(), want);
}

/* moeperm_isa_choose() changes what runs use until AUTO goes back to the
 * default; a set this CPU lacks, or no set at all, is refused with a
 * sentence and leaves the choice as it was. */
static void test_isa_choose_sets_the_set_in_use_and_refuses_what_the_cpu_lacks(void **state)
{
    (void)state;
    moeperm_isa best = moeperm_isa_in_use();
    assert_int_equal(moeperm_isa_choose(MOEPERM_ISA_PORTABLE), MOEPERM_SUCCESS);
    assert_int_equal(moeperm_isa_in_use(), MOEPERM_ISA_PORTABLE);
    moeperm_isa cpu = cpu_best_isa();
    static const moeperm_isa vector_sets[2] = {MOEPERM_ISA_X86_AVX2, MOEPERM_ISA_X86_AVX512};
    for (int i = 0; i < 2; i++) {
        moeperm_status status = moeperm_isa_choose(vector_sets[i]);
        if (vector_sets[i] <= cpu) {
            assert_int_equal(status, MOEPERM_SUCCESS);
            assert_int_equal(moeperm_isa_in_use(), vector_sets[i]);
        } else {
            assert_int_equal(status, MOEPERM_ERR_PARAM_INVALID);
            assert_non_null(strstr(moeperm_last_error(), moeperm_isa_name(vector_sets[i])));
        }
    }
    moeperm_isa before = moeperm_isa_in_use();
    assert_int_equal(moeperm_isa_choose((moeperm_isa)7), MOEPERM_ERR_PARAM_INVALID);
    assert_non_null(strstr(moeperm_last_error(), "isa = 7"));
    assert_int_equal(moeperm_isa_in_use(), before);
    assert_int_equal(moeperm_isa_choose(MOEPERM_ISA_AUTO), MOEPERM_SUCCESS);
    assert_int_equal(moeperm_isa_in_use(), best);
    assert_string_equal(moeperm_isa_name(MOEPERM_ISA_AUTO), "auto");
    assert_string_equal(moeperm_isa_name(MOEPERM_ISA_PORTABLE), "portable");
    assert_string_equal(moeperm_isa_name(MOEPERM_ISA_X86_AVX2), "x86-avx2");
    assert_string_equal(moeperm_isa_name(MOEPERM_ISA_X86_AVX512), "x86-avx512");
    assert_string_equal(moeperm_isa_name((moeperm_isa)9), "unknown");
}

int main(int argc, char **argv)
{
    /* `test_fast_paths path-choice` runs the path choice alone. */
    const struct CMUnitTest path_choice[] = {
        cmocka_unit_test(test_force_portable_env_picks_the_portable_path),
    };
    if (argc > 1) {
        if (argc == 2 && strcmp(argv[1], "path-choice") == 0)
            return cmocka_run_group_tests(path_choice, NULL, NULL);
        fprintf(stderr, "usage: test_fast_paths [path-choice]\n");
        return 2;
    }
    const struct CMUnitTest tests[] = {
#ifdef MOEPERM_HAVE_X86_PATH
        cmocka_unit_test(test_every_bf16_and_fp16_widening_matches_fp_h),
        cmocka_unit_test(test_every_bf16_widens_in_column_order_to_its_bits),
        cmocka_unit_test(test_stream_copy_equals_memcpy_and_writes_nothing_else),
        cmocka_unit_test(test_narrowing_edges_and_random_patterns_match_fp_h),
        cmocka_unit_test(test_random_cases_fast_path_matches_portable_bits),
        cmocka_unit_test(test_top_k_1_and_512_fast_path_matches_portable_bits),
        cmocka_unit_test(test_repeated_rows_and_dropped_slots_fast_path_matches_portable_bits),
        cmocka_unit_test(test_strided_columns_fall_back_and_match_portable_bits),
        cmocka_unit_test(test_column_blocks_and_streamed_output_match_portable_bits),
        cmocka_unit_test(test_unpermute_random_cases_fast_path_matches_portable_bits),
        cmocka_unit_test(
            test_unpermute_repeated_rows_and_dropped_slots_fast_path_matches_portable_bits),
        cmocka_unit_test(test_unpermute_nan_products_fast_path_matches_portable_bits),
        cmocka_unit_test(test_unpermute_top_k_1_and_512_fast_path_matches_portable_bits),
        cmocka_unit_test(test_unpermute_strided_columns_fall_back_and_match_portable_bits),
        cmocka_unit_test(
            test_unpermute_column_blocks_and_streamed_output_match_portable_bits),
        cmocka_unit_test(test_unpermute_infinite_probs_raise_no_invalid_flag),
        cmocka_unit_test(test_unpermute_grad_random_cases_fast_path_matches_portable_bits),
        cmocka_unit_test(test_unpermute_grad_every_branch_fast_path_matches_portable_bits),
        cmocka_unit_test(test_unpermute_grad_edge_values_fast_path_matches_portable_bits),
        cmocka_unit_test(test_unpermute_grad_strided_and_streamed_match_portable_bits),
        cmocka_unit_test(test_unpermute_grad_infinite_probs_raise_no_invalid_flag),
#endif
        cmocka_unit_test(test_force_portable_env_picks_the_portable_path),
        cmocka_unit_test(test_isa_choose_sets_the_set_in_use_and_refuses_what_the_cpu_lacks),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}

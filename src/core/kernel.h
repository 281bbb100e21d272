/*
 * kernel.h - the operator kernel's paths: the portable C11 loop of
 * permute_grad.c, which is the reference every other path is tested
 * against, and the vectorised x86 paths of src/x86/, chosen at run time.
 *
 * The arithmetic (docs/arithmetic.md) is defined once: the conversions of
 * fp.h, the addition step moeperm_accumulate() and the per-slot rule
 * moeperm_token_rows() below, put together by the portable loop.  A fast
 * path exists to reach memory bandwidth, never to change a bit: it uses
 * moeperm_token_rows() for the rows it sums, widens and narrows exactly as
 * fp.h does and adds the k slots of each column in order, vectorising
 * across columns only.  tests/core/test_fast_paths.c and
 * tests/core/test_fast_conversions_exhaustive.c prove it against the portable
 * path.  Which path runs is dispatch.h's choice (moeperm_isa_resolve()).
 */
#ifndef MOEPERM_KERNEL_H
#define MOEPERM_KERNEL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "core/dispatch.h"
#include "core/fp.h"
#include "core/internal.h"

#if defined(__GNUC__)
#define MOEPERM_FORCE_INLINE inline __attribute__((always_inline))
#else
#define MOEPERM_FORCE_INLINE inline
#endif

/*
 * One step of the sum, acc + x, as one binary32 addition, shared by every
 * path.  The only freedom a C compiler has with `acc + x` is the operand
 * order, and on x86 that decides which NaN comes out when both are NaNs;
 * fixing it here makes the bits independent of the compiler and equal
 * between paths: a NaN accumulator stays, made quiet (what x86 does with the
 * accumulator as first operand); a NaN x alone comes out made quiet;
 * inf - inf gives the CPU's default NaN.  The vector forms in src/x86/ pin
 * the same operand order.
 */
static inline float moeperm_accumulate(float acc, float x)
{
    /* a select by mask, without a branch, so that compilers still vectorise
     * the portable loop across columns */
    uint32_t bits = fp_bits(acc);
    uint32_t sum = fp_bits(acc + x);
    uint32_t nan = 0u - (uint32_t)((bits & 0x7fffffffu) > 0x7f800000u);
    return fp_from_bits((sum & ~nan) | ((bits | 0x00400000u) & nan));
}

/* Element j of a row of dtype (float32, float16 or bf16) widened to
 * binary32, and a binary32 narrowed into element j of an output row, as
 * fp.h does it.  Called with a constant dtype, the switch folds away. */
static MOEPERM_FORCE_INLINE float moeperm_widen(moeperm_dtype dtype, const void *row, int64_t j)
{
    switch (dtype) {
    case MOEPERM_FLOAT:
        return ((const float *)row)[j];
    case MOEPERM_FLOAT16:
        return fp_fp16_to_float(((const uint16_t *)row)[j]);
    default:
        return fp_bf16_to_float(((const uint16_t *)row)[j]);
    }
}

static MOEPERM_FORCE_INLINE void moeperm_narrow(moeperm_dtype dtype, void *out, int64_t j,
                                                float value)
{
    switch (dtype) {
    case MOEPERM_FLOAT:
        ((float *)out)[j] = value;
        break;
    case MOEPERM_FLOAT16:
        ((uint16_t *)out)[j] = fp_float_to_fp16(value);
        break;
    default:
        ((uint16_t *)out)[j] = fp_float_to_bf16(value);
        break;
    }
}

/* Where the rows of a plan's tokens come from: sorted_indices and the rows
 * of permuted_output_grad. */
typedef struct moeperm_gather {
    const int32_t *idx; /* sorted_indices' first element */
    int64_t idx_stride;
    int64_t top_k;
    const char *grad; /* grad's first element, NULL when grad has no rows */
    int64_t rows;     /* grad's rows: an index outside [0, rows) is dropped */
    /* grad's row stride in elements, and its element size: multiplied
     * only for rows that exist, since validation bounds the stride only
     * as far as the last row reaches (with one row, not at all) */
    int64_t row_stride, size;
} moeperm_gather;

static inline moeperm_gather moeperm_gather_of(const struct moeperm_executor *plan)
{
    const struct moeperm_tensor *g = &plan->grad, *ix = &plan->indices;
    int64_t size = (int64_t)moeperm_dtype_size(g->dtype);
    return (moeperm_gather){
        .idx = (const int32_t *)ix->data + ix->offset,
        .idx_stride = ix->strides[0],
        .top_k = plan->top_k,
        /* NULL when grad has no rows (every slot dropped): no row is read
         * then, offsetting a null pointer, even by 0, is undefined, and the
         * offset of a view with no element was never checked (offset * size
         * may overflow). */
        .grad = g->data && g->dims[0] > 0 ? (const char *)g->data + g->offset * size : NULL,
        .rows = g->dims[0],
        .row_stride = g->strides[0],
        .size = size,
    };
}

/*
 * The per-slot rule of docs/arithmetic.md, written once for every path:
 * lists in `rows`, in slot order, the rows of grad that token t sums, each
 * `column_bytes` into its row.  Returns how many it listed (up to top_k).
 * An index outside [0, rows) drops its slot; a negative one compares as a
 * huge unsigned value and is dropped too.  *zero_start says slot 0 was
 * dropped: the sum then starts from +0.0 and adds every listed row;
 * otherwise it starts from the first listed row and adds the others.
 */
static inline int64_t moeperm_token_rows(const moeperm_gather *g, int64_t t,
                                         int64_t column_bytes, const void **rows,
                                         bool *zero_start)
{
    const int32_t *slots = g->idx + t * g->top_k * g->idx_stride;
    int64_t count = 0;
    *zero_start = false;
    rows[0] = NULL; /* set below whenever it is read, which compilers cannot see */
    for (int64_t k = 0; k < g->top_k; k++) {
        uint64_t r = (uint64_t)(int64_t)slots[k * g->idx_stride];
        if (r < (uint64_t)g->rows)
            rows[count++] = g->grad + (int64_t)r * g->row_stride * g->size + column_bytes;
        else if (k == 0)
            *zero_start = true;
    }
    return count;
}

/* moeperm_kernel_run() on a chosen instruction set (moeperm_isa_resolve()
 * of dispatch.h says what AUTO means).  A set the CPU does not have, or a
 * plan the vector code does not handle (a column stride other than 1),
 * runs the portable loop. */
void moeperm_kernel_run_isa(const struct moeperm_executor *plan, int threads, moeperm_isa isa);

/* The number of threads moeperm_kernel_run() uses for a plan: the request
 * (0 = the OpenMP default), cut down so that every thread gets enough bytes
 * to pay for waking it. */
int moeperm_kernel_threads(const struct moeperm_executor *plan, int threads);

#if (defined(__x86_64__) || defined(__i386__)) && defined(__GNUC__)
#define MOEPERM_HAVE_X86_PATH 1
#include "x86/x86.h"
#endif

#endif

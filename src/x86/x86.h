/*
 * x86/x86.h - the x86 fast paths of every operator, one table per
 * instruction set.
 *
 * Every vector loop of libmoeperm is written once, in a template
 * (permute_grad_template.h: the sums of MoeTokenPermuteGrad and
 * MoeTokenUnpermute; unpermute_grad_template.h: MoeTokenUnpermuteGrad's
 * rows; exact_template.h: the loops of its exact dot products;
 * copy_template.h: the non-temporal row copy of MoeTokenPermute and
 * of MoeTokenUnpermuteGrad without probs), over the primitives of one
 * instruction set (vec_avx2.h: AVX2 + F16C; vec_avx512.h: AVX-512 F, BW
 * and VL).  isa_template.h puts them together; avx2.c and avx512.c compile
 * it once each, into the tables moeperm_x86_avx2 and moeperm_x86_avx512.
 * An operator asks moeperm_x86_kernels_for() for the table of the
 * instruction set the library's one choice resolved to
 * (moeperm_isa_resolve(), core/dispatch.h), and runs its portable loop
 * when there is none.  The CPU is asked once, in cpu_features.c, by
 * dispatch.c.
 *
 * Only included where core/dispatch.h defines MOEPERM_HAVE_X86_PATH (x86
 * with a GNU C compiler).
 */
#ifndef MOEPERM_X86_X86_H
#define MOEPERM_X86_X86_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <moeperm/moeperm.h>

#include "core/dispatch.h"

#include "cpu_features.h"
#include "unpermute_grad/kernel.h"
#include "unpermute_grad/model.h"

/* One task: output columns [0, width) of out, the sum of the listed rows
 * (moeperm_token_rows(), each pointing at the task's first column), for
 * the scaled segments each times its multiplier in scales. */
typedef struct moeperm_x86_task {
    const void *rows[MOEPERM_MAX_TOP_K];
    float scales[MOEPERM_MAX_TOP_K];
    int64_t count, width;
    bool zero_start;
    void *out;
} moeperm_x86_task;

/*
 * One segment: out[j] = narrow(sum over r of widen(rows[r][j])) for j in
 * [0, width), the sum in r order, starting as moeperm_token_rows() says.
 * stream asks for non-temporal stores where out is aligned for them (the
 * caller fences).  The rows of `next`, when not NULL, are prefetched while
 * this task is summed.  A scaled segment sums widen(rows[r][j]) * scales[r]
 * instead, each product rounded to binary32 before it is added, and starts
 * from the first product or from +0.0 when zero_start: MoeTokenUnpermute's
 * loop (unpermute.c), which fixes the NaN order of the product.
 */
typedef void moeperm_x86_segment(const moeperm_x86_task *task, const moeperm_x86_task *next,
                                 bool stream);

/* MoeTokenUnpermuteGrad's tokens [first, end) of a plan with probs whose
 * permuted_tokens, unpermuted_tokens_grad and permuted_tokens_grad have
 * unit column strides, with one thread's scratch of
 * moeperm_x86_ug_scratch_floats() floats, 64-byte aligned; stream asks for
 * non-temporal stores of permuted_tokens_grad.  The bits of kernel.c's
 * portable loop. */
typedef void moeperm_x86_ug_range(const moeperm_ug_ctx *c, int64_t first, int64_t end,
                                  float *scratch, bool stream);

/* An instruction set's kernels. */
typedef struct moeperm_x86_kernels {
    const char *name;
    /* by dtype: float32, float16, bf16 (moeperm_x86_dtype_index()) */
    moeperm_x86_segment *segment[3], *scaled_segment[3];
    moeperm_x86_ug_range *ug_range;
    /* the loops of MoeTokenUnpermuteGrad's exact dot products
     * (unpermute_grad/model.h), in vectors of the set's width */
    moeperm_ug_exact_levels *ug_exact_levels;
    moeperm_ug_exact_widen *ug_exact_widen;
    /* memcpy(dst, src, bytes) with non-temporal stores for the whole
     * 64-byte lines of dst; the thread that copied fences before its
     * stores are read */
    void (*stream_copy)(void *dst, const void *src, size_t bytes);
    /* makes this thread's non-temporal stores visible (sfence) */
    void (*fence)(void);
    /* The vector conversions the kernels use, over n elements, for the
     * tests (n a multiple of 32 exercises only the vector code): bf16 in
     * the sums' layout (even and odd columns apart) and in column order
     * (MoeTokenUnpermuteGrad's rows, whose widening keeps a signalling
     * NaN as it is: the value is only multiplied), and fp16. */
    void (*bf16_to_float)(const uint16_t *src, float *dst, size_t n);
    void (*bf16_columns_to_float)(const uint16_t *src, float *dst, size_t n);
    void (*fp16_to_float)(const uint16_t *src, float *dst, size_t n);
    void (*float_to_bf16)(const float *src, uint16_t *dst, size_t n);
    void (*float_to_bf16_columns)(const float *src, uint16_t *dst, size_t n);
    void (*float_to_fp16)(const float *src, uint16_t *dst, size_t n);
} moeperm_x86_kernels;

extern const moeperm_x86_kernels moeperm_x86_avx2, moeperm_x86_avx512;

/* The kernels of an instruction set that moeperm_isa_resolve() (dispatch.h)
 * gave, or NULL for MOEPERM_ISA_PORTABLE: the caller runs its portable
 * loop. */
static inline const moeperm_x86_kernels *moeperm_x86_kernels_for(moeperm_isa isa)
{
    return isa == MOEPERM_ISA_X86_AVX512 ? &moeperm_x86_avx512
           : isa == MOEPERM_ISA_X86_AVX2 ? &moeperm_x86_avx2
                                         : NULL;
}

static inline int moeperm_x86_dtype_index(moeperm_dtype dtype)
{
    return dtype == MOEPERM_FLOAT ? 0 : dtype == MOEPERM_FLOAT16 ? 1 : 2;
}

/* The scratch of moeperm_x86_ug_range: the widened probs and the
 * accumulators (top_k floats each, rounded up to 16), then three
 * chunk-long rows (g widened, the reduction buffer and its second half),
 * each a multiple of 16 floats so that every row starts on a cache line. */
static inline int64_t moeperm_x86_ug_round16(int64_t n)
{
    return (n + 15) / 16 * 16;
}

static inline int64_t moeperm_x86_ug_row_floats(const moeperm_ug_ctx *c)
{
    return moeperm_x86_ug_round16(c->chunk > 64 ? c->chunk : 64);
}

static inline int64_t moeperm_x86_ug_scratch_floats(const moeperm_ug_ctx *c)
{
    return 2 * moeperm_x86_ug_round16(c->top_k) + 3 * moeperm_x86_ug_row_floats(c);
}

#endif

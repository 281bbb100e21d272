/*
 * x86/permute_grad_x86.h - the x86 fast paths of MoeTokenPermuteGrad, and
 * of MoeTokenUnpermute with probs, which is the same sum with each row
 * multiplied by its prob first.
 *
 * permute_grad_x86.c schedules the work: it splits a plan into tasks (a
 * token, or a column block of one), lists each task's rows with
 * moeperm_token_rows() (for MoeTokenUnpermute, with unpermute.c's rule and
 * the probs as multipliers) and hands them to a segment, prefetching the
 * next task's rows meanwhile.  A segment sums one task's rows into its
 * output columns; the segments and the conversions are written once, in
 * permute_grad_template.h, and compiled for AVX2 + F16C by
 * permute_grad_avx2.c and for AVX-512 F, BW and VL by
 * permute_grad_avx512.c.  Only included through sum/sum.h, on x86 with a
 * GNU C compiler (MOEPERM_HAVE_X86_PATH).
 */
#ifndef MOEPERM_X86_PERMUTE_GRAD_X86_H
#define MOEPERM_X86_PERMUTE_GRAD_X86_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <moeperm/moeperm.h>

#include "cpu_features.h"

struct moeperm_sum;
struct moeperm_tensor;

/* Runs a sum (src/sum/) with unit column strides on `team` threads, with
 * the AVX-512 segments when avx512 (only when moeperm_x86_avx512_available())
 * and the AVX2 ones otherwise (only when moeperm_x86_available()). */
void moeperm_x86_run(const struct moeperm_sum *plan, int team, bool avx512);

/* The same for MoeTokenUnpermute with probs: its sum, each row times its
 * prob; permuted_tokens and out have unit column strides. */
void moeperm_x86_run_unpermute(const struct moeperm_sum *plan, const struct moeperm_tensor *probs,
                               int team, bool avx512);

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

moeperm_x86_segment moeperm_x86_segment_f32_avx2, moeperm_x86_segment_f16_avx2,
    moeperm_x86_segment_bf16_avx2;
moeperm_x86_segment moeperm_x86_segment_f32_avx512, moeperm_x86_segment_f16_avx512,
    moeperm_x86_segment_bf16_avx512;
moeperm_x86_segment moeperm_x86_scaled_segment_f32_avx2, moeperm_x86_scaled_segment_f16_avx2,
    moeperm_x86_scaled_segment_bf16_avx2;
moeperm_x86_segment moeperm_x86_scaled_segment_f32_avx512,
    moeperm_x86_scaled_segment_f16_avx512, moeperm_x86_scaled_segment_bf16_avx512;

/* The vector conversions the segments use, over n elements, for the tests
 * (n a multiple of 32 exercises only the vector code).  Only call the
 * AVX2 ones when moeperm_x86_available(), the AVX-512 ones when
 * moeperm_x86_avx512_available(). */
void moeperm_x86_bf16_to_float_avx2(const uint16_t *src, float *dst, size_t n);
void moeperm_x86_fp16_to_float_avx2(const uint16_t *src, float *dst, size_t n);
void moeperm_x86_float_to_bf16_avx2(const float *src, uint16_t *dst, size_t n);
void moeperm_x86_float_to_fp16_avx2(const float *src, uint16_t *dst, size_t n);
void moeperm_x86_bf16_to_float_avx512(const uint16_t *src, float *dst, size_t n);
void moeperm_x86_fp16_to_float_avx512(const uint16_t *src, float *dst, size_t n);
void moeperm_x86_float_to_bf16_avx512(const float *src, uint16_t *dst, size_t n);
void moeperm_x86_float_to_fp16_avx512(const float *src, uint16_t *dst, size_t n);

#endif

/*
 * kernel.h - the operator kernel's paths: the portable C11 loop of
 * permute_grad.c (THE arithmetic of spec §2, and the reference every other
 * path is tested against) and the vectorised x86 form in
 * permute_grad_x86.c, chosen at run time.
 *
 * A fast path exists to reach memory bandwidth, never to change a bit: it
 * widens and narrows exactly as fp.h does and adds the k slots of each
 * column in order, vectorising across columns only.  tests/test_fast_paths.c
 * and tests/test_fast_conversions_exhaustive.c prove it against the portable
 * path.  Setting MOEPERM_FORCE_PORTABLE=1 in the environment (read once,
 * at the first run) or asking for MOEPERM_PATH_PORTABLE here turns every
 * fast path off.
 */
#ifndef MOEPERM_KERNEL_H
#define MOEPERM_KERNEL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "fp.h"
#include "internal.h"

/*
 * One step of spec §2's sum, acc + x, as one binary32 addition, shared by
 * every path.  The only freedom a C compiler has with `acc + x` is the
 * operand order, and on x86 that decides which NaN comes out when both are
 * NaNs; fixing it here makes the bits independent of the compiler and
 * equal between paths: a NaN accumulator stays, made quiet (what x86 does
 * with the accumulator as first operand); a NaN x alone comes out made
 * quiet; inf - inf gives the CPU's default NaN.  The vector form in
 * permute_grad_x86.c pins the same operand order.
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

typedef enum moeperm_kernel_path {
    MOEPERM_PATH_AUTO = 0,     /* the best path this CPU has, unless forced portable */
    MOEPERM_PATH_PORTABLE = 1, /* the C11 loop of permute_grad.c */
    MOEPERM_PATH_X86_AVX2 = 2, /* permute_grad_x86.c: AVX2 + F16C */
    MOEPERM_PATH_X86_AVX512 = 3 /* permute_grad_x86.c: AVX-512 F, BW and VL */
} moeperm_kernel_path;

/* The path MOEPERM_PATH_AUTO resolves to on this CPU and environment. */
moeperm_kernel_path moeperm_kernel_best_path(void);

/* Makes MOEPERM_PATH_AUTO (and so the public API) run `path` from now on,
 * process-wide; MOEPERM_PATH_AUTO goes back to the best path.  For the
 * benchmark's --path; not meant to be called while a run is in flight. */
void moeperm_kernel_choose_path(moeperm_kernel_path path);

/* "portable", "x86-avx2", "x86-avx512" (for the benchmark's report). */
const char *moeperm_kernel_path_name(moeperm_kernel_path path);

/* The path a plan with unit column strides runs when `path` is asked: AUTO
 * becomes the chosen or the best path, and a path this CPU lacks the
 * portable one. */
moeperm_kernel_path moeperm_kernel_resolve_path(moeperm_kernel_path path);

/* moeperm_kernel_run() on a chosen path.  A path the CPU does not have, or
 * a plan the path does not handle (a column stride other than 1), runs on
 * the portable path. */
void moeperm_kernel_run_path(const struct moeperm_executor *plan, int threads,
                             moeperm_kernel_path path);

/* The number of threads moeperm_kernel_run() uses for a plan: the request
 * (0 = the OpenMP default), cut down so that every thread gets enough bytes
 * to pay for waking it. */
int moeperm_kernel_threads(const struct moeperm_executor *plan, int threads);

#if (defined(__x86_64__) || defined(__i386__)) && defined(__GNUC__)
#define MOEPERM_HAVE_X86_PATH 1

/* Whether this CPU (and its OS) runs AVX2 and F16C; and AVX-512 F, BW, VL too. */
bool moeperm_x86_available(void);
bool moeperm_x86_avx512_available(void);

/*
 * One output row segment: out[j] = narrow(sum over r of widen(rows[r][j]))
 * for j in [0, n), the sum in r order.  rows lists only the slots that are
 * rows of the grad (dropped ones removed), each already pointing at the
 * segment's first column; count may be 0.  zero_start says slot 0 was
 * dropped, so the accumulator starts from +0.0 and every listed row is
 * added to it; otherwise it starts from rows[0].  stream asks for
 * non-temporal stores where out is aligned for them (the caller fences).
 * next lists the rows of the segment that comes after this one (next_count
 * of them, next_n columns), to be prefetched while this one is summed; it
 * may be empty.
 * Only call these when moeperm_x86_available().
 */
void moeperm_x86_segment_f32(const void *const *rows, int64_t count, bool zero_start, void *out,
                             int64_t n, bool stream, const void *const *next,
                             int64_t next_count, int64_t next_n);
void moeperm_x86_segment_f16(const void *const *rows, int64_t count, bool zero_start, void *out,
                             int64_t n, bool stream, const void *const *next,
                             int64_t next_count, int64_t next_n);
void moeperm_x86_segment_bf16(const void *const *rows, int64_t count, bool zero_start,
                              void *out, int64_t n, bool stream, const void *const *next,
                              int64_t next_count, int64_t next_n);
/* The same segments in AVX-512 (only when moeperm_x86_avx512_available()). */
void moeperm_x86_segment_f32_avx512(const void *const *rows, int64_t count, bool zero_start,
                                    void *out, int64_t n, bool stream, const void *const *next,
                                    int64_t next_count, int64_t next_n);
void moeperm_x86_segment_f16_avx512(const void *const *rows, int64_t count, bool zero_start,
                                    void *out, int64_t n, bool stream, const void *const *next,
                                    int64_t next_count, int64_t next_n);
void moeperm_x86_segment_bf16_avx512(const void *const *rows, int64_t count, bool zero_start,
                                     void *out, int64_t n, bool stream, const void *const *next,
                                     int64_t next_count, int64_t next_n);
/* Makes earlier non-temporal stores of this thread visible. */
void moeperm_x86_fence(void);

/* The vector conversions the segments use, over n elements, for the tests
 * (n a multiple of 32 exercises only the vector code). */
void moeperm_x86_bf16_to_float(const uint16_t *src, float *dst, size_t n);
void moeperm_x86_fp16_to_float(const uint16_t *src, float *dst, size_t n);
void moeperm_x86_float_to_bf16(const float *src, uint16_t *dst, size_t n);
void moeperm_x86_float_to_fp16(const float *src, uint16_t *dst, size_t n);
void moeperm_x86_bf16_to_float_avx512(const uint16_t *src, float *dst, size_t n);
void moeperm_x86_fp16_to_float_avx512(const uint16_t *src, float *dst, size_t n);
void moeperm_x86_float_to_bf16_avx512(const float *src, uint16_t *dst, size_t n);
void moeperm_x86_float_to_fp16_avx512(const float *src, uint16_t *dst, size_t n);
#endif

#endif

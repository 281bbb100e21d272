/*
 * model.h - THE model of how the Ascend kernel of
 * MoeTokenUnpermuteGrad sums probs_grad, in one place: the tiling that cuts
 * the hidden dimension into chunks (model.c) and the
 * reduction of one chunk (below, inline, so that every instruction-set
 * variant of the kernel compiles the same C and vectorises it).
 *
 * For the slot i = n*K + k with row s, probs_grad[n, k] is
 *
 *   acc = +0.0f
 *   for each chunk [c0, c0 + len) of the tiling, in column order:
 *       buf[j] = fl(x[c0 + j] * g[c0 + j])     x = row s widened, zeros if s >= R
 *       acc = fl(acc + ug_reduce_chunk(buf, len))
 *   probs_grad[n, k] = narrow(acc)             one round-to-nearest-even step
 *
 * and ug_reduce_chunk() is the kernel's ReduceSumFunc: halving adds
 * (BinaryAddFunc) down to T = 4096, 512 or 64 columns, then a pairwise
 * tree over adjacent elements (BlockReduceSum three or fewer times, then
 * WholeReduceSum), or for chunks under 64 columns the tree alone
 * (WholeReduceSum over len lanes).  docs/unpermute-grad.md has a worked
 * example.  Every add is one binary32 addition rounded to nearest even
 * (the build forbids contraction and fast-math); the lanes of a fold are
 * independent, which is what lets the compiler vectorise them.
 *
 * Which NaN comes out is not modelled: the operator replaces a NaN sum by
 * the quiet NaN 0x7fc00000, so operand order inside the vector code never
 * shows in its bits.
 */
#ifndef MOEPERM_UNPERMUTE_GRAD_MODEL_H
#define MOEPERM_UNPERMUTE_GRAD_MODEL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "core/internal.h"

/* The tiling of the kernel's host code for a problem that
 * moeperm_token_unpermute_grad_tiling() has checked (all sizes positive,
 * dtype sizes 2 or 4, chip in range): the vendor's arithmetic, restated. */
void moeperm_ug_tiling(int64_t tokens_num, int64_t top_k, int64_t hidden_size,
                       int64_t num_out_tokens, int64_t tokens_size, bool has_probs,
                       int64_t probs_size, const moeperm_chip *chip,
                       moeperm_unpermute_grad_tiling *tiling);

/* Beside the model, the value it approximates: for every slot of views
 * that moeperm_token_unpermute_grad_exact_probs_grad() has validated, the
 * exact dot product rounded once to a double (exact.c).  It allocates
 * nothing and returns MOEPERM_SUCCESS. */
moeperm_status moeperm_ug_exact(const moeperm_tensor *tokens, const moeperm_tensor *grad,
                                const moeperm_tensor *indices, int64_t top_k, double *exact);

/* What moeperm_ug_exact() takes a row apart in: chunks of at most
 * MOEPERM_UG_EXACT_CHUNK columns (2^MOEPERM_UG_EXACT_CHUNK_BITS >=
 * 2 * (MOEPERM_UG_EXACT_CHUNK + 2)), each padded with zeros to a multiple
 * of MOEPERM_UG_EXACT_STEP, and at most MOEPERM_UG_EXACT_LEVELS levels a
 * chunk: each takes about 52 - MOEPERM_UG_EXACT_CHUNK_BITS bits off the
 * widest product, so only products that span hundreds of binades are
 * left after the last. */
#define MOEPERM_UG_EXACT_CHUNK 2048
#define MOEPERM_UG_EXACT_CHUNK_BITS 13
#define MOEPERM_UG_EXACT_STEP 32
#define MOEPERM_UG_EXACT_LEVELS 8

/*
 * The levels of one chunk (x86/exact_template.h, built per instruction
 * set and portable): the products x[j] * g[j], j < count (a multiple of
 * MOEPERM_UG_EXACT_STEP, at most MOEPERM_UG_EXACT_CHUNK), taken apart
 * into levels whose parts add up without rounding, the sum of each level
 * (which a double holds exactly) written to sums.  Returns -1, writing
 * nothing, when a product is an infinity or a NaN (the caller adds the
 * products one by one); else the number n <= MOEPERM_UG_EXACT_LEVELS of
 * sums when the levels took every product whole; or
 * MOEPERM_UG_EXACT_LEVELS + 1 when products are still left after
 * MOEPERM_UG_EXACT_LEVELS sums: what is left of them, in left[0, count).
 * The sums of the levels and what is left add up to the exact dot
 * product.
 */
typedef int moeperm_ug_exact_levels(const float *x, const float *g, int64_t count, double *sums,
                                    double *left);
moeperm_ug_exact_levels moeperm_ug_exact_levels_portable;

/* The count elements of a row of dtype (FLOAT, FLOAT16 or BF16) with unit
 * stride widened exactly into out, for the levels; a NaN may come out
 * without fp.h's quiet bit, which changes nothing there (x86/
 * exact_template.h). */
typedef void moeperm_ug_exact_widen(moeperm_dtype dtype, const void *row, int64_t count,
                                    float *restrict out);
moeperm_ug_exact_widen moeperm_ug_exact_widen_portable;

/* The halving step of BinaryAddFunc: lo[i] = lo[i] + hi[i] for i < n, where
 * lo and hi are the two halves of one buffer, hi starting at least n
 * elements after lo (so they never overlap). */
static inline void ug_fold(float *restrict lo, const float *restrict hi, int64_t n)
{
    for (int64_t i = 0; i < n; i++)
        lo[i] = lo[i] + hi[i];
}

/* One level of the pairwise tree: dst[j] = src[2j] + src[2j+1]. */
static inline void ug_pair_level(float *restrict dst, const float *restrict src, int64_t pairs)
{
    for (int64_t j = 0; j < pairs; j++)
        dst[j] = src[2 * j] + src[2 * j + 1];
}

/*
 * The sum of src[0..n) as a pairwise tree over adjacent elements, level by
 * level: (a0+a1), (a2+a3), ... then the sums of neighbouring pairs, and so
 * on; an element left without a partner at the end of a level moves up
 * unchanged.  For n = 8 that is ((a0+a1)+(a2+a3))+((a4+a5)+(a6+a7)), the
 * documented order of BlockReduceSum over one 32-byte block; for a power of
 * two it is three BlockReduceSums and a WholeReduceSum of 8 chained, as the
 * kernel does after folding; for any n <= 64 it is WholeReduceSum over n
 * lanes (the lanes a mask leaves out would add zeros, which changes nothing
 * once the chunk sum meets an accumulator started at +0.0).  src and tmp are
 * used as scratch; tmp holds (n + 1) / 2 floats.  n >= 1.
 */
static inline float ug_pairwise(float *src, float *tmp, int64_t n)
{
    float *from = src, *to = tmp;
    while (n > 1) {
        int64_t pairs = n / 2;
        ug_pair_level(to, from, pairs);
        if (n & 1)
            to[pairs] = from[n - 1];
        n -= pairs;
        float *swap = from;
        from = to;
        to = swap;
    }
    return from[0];
}

/* AlignUp(CeilDiv(len, 2), 8): where BinaryAddFunc splits len columns. */
static inline int64_t ug_half(int64_t len)
{
    return ((len + 1) / 2 + 7) / 8 * 8;
}

/* The T that a chunk of len >= 64 columns folds to (its branch). */
static inline int64_t ug_target(int64_t len)
{
    return len >= 4096 ? 4096 : len >= 512 ? 512 : 64;
}

/*
 * The folds and the tree of ReduceSumFunc once the chunk of len columns
 * (len >= 64) has been folded down to `total` columns: the halving loop
 * goes on while more than 2T are left, then the last fold to T, then the
 * pairwise tree over T.
 */
static inline float ug_reduce_folded(float *buf, float *tmp, int64_t len, int64_t total)
{
    int64_t target = ug_target(len);
    while (total > 2 * target) {
        int64_t half = ug_half(total);
        ug_fold(buf, buf + half, total - half);
        total = half;
    }
    ug_fold(buf, buf + target, total - target);
    return ug_pairwise(buf, tmp, target);
}

/*
 * The first operation ReduceSumFunc applies to a chunk of len columns, so
 * that the kernel can apply it as the products are computed: the distance
 * d of a first fold that adds something (buf[i] += buf[d + i] for
 * i < len - d; then ug_reduce_folded(buf, tmp, len, d) finishes), or 0 when
 * the first operation is a level of the pairwise tree (len < 64, or
 * len = T, whose last fold adds nothing; then the tree goes on over
 * ceil(len / 2) pair sums, the odd last element moved up unchanged).
 */
static inline int64_t ug_first_fold(int64_t len)
{
    if (len < 64)
        return 0;
    int64_t target = ug_target(len);
    if (len > 2 * target)
        return ug_half(len);
    return len > target ? target : 0;
}

/*
 * ReduceSumFunc: the sum of the chunk buf[0..len), len >= 1, in the
 * kernel's order.  Chunks of 4096 columns or more fold to T = 4096 (the
 * halving loop runs while more than 8192 are left), chunks of 512 or more
 * to 512 (loop above 1024), chunks of 64 or more to 64 (loop above 128):
 *
 *   total = len
 *   while total > 2T:  half = roundup8(ceil(total / 2))
 *                      buf[i] += buf[half + i] for i < total - half
 *                      total = half
 *   buf[i] += buf[T + i] for i < total - T
 *   return pairwise(buf, T)
 *
 * Shorter chunks are one WholeReduceSum: pairwise(buf, len).  buf and tmp
 * are scratch; tmp holds at least (max(len, 64) + 1) / 2 floats.  The
 * kernel runs the same steps split in two (ug_first_fold(), then
 * ug_reduce_folded() or the rest of the tree).
 */
static inline float ug_reduce_chunk(float *buf, float *tmp, int64_t len)
{
    if (len < 64)
        return ug_pairwise(buf, tmp, len);
    return ug_reduce_folded(buf, tmp, len, len);
}

#endif

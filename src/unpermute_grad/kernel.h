/*
 * unpermute_grad/kernel.h - MoeTokenUnpermuteGrad's kernel as its paths
 * share it: a plan resolved to pointers and strides (kernel.c makes it),
 * and the per-token steps that are the same on every path, so that the
 * portable loop of kernel.c and the x86 template
 * (src/x86/unpermute_grad_template.h) differ only in how they go over a
 * row.
 */
#ifndef MOEPERM_UNPERMUTE_GRAD_KERNEL_H
#define MOEPERM_UNPERMUTE_GRAD_KERNEL_H

#include <math.h>
#include <stdbool.h>
#include <stdint.h>
#include <string.h>

#include "core/fp.h"
#include "core/internal.h"

/* A plan with probs resolved to pointers at element 0 and strides in
 * elements, and the tiling's cut of the hidden dimension. */
typedef struct moeperm_ug_ctx {
    const char *tokens, *grad, *probs;
    const int32_t *indices;
    char *tokens_grad, *probs_grad;
    int64_t tokens_s0, tokens_s1, grad_s0, grad_s1, probs_s0, probs_s1;
    int64_t tokens_grad_s0, tokens_grad_s1, probs_grad_s0, probs_grad_s1, indices_s;
    int64_t tokens_num, top_k, hidden, rows, size, probs_size;
    moeperm_dtype dtype, probs_dtype;
    int64_t chunk, loops, tail; /* chunk q is [q * chunk, + (q == loops - 1 ? tail : chunk)) */
} moeperm_ug_ctx;

/* The row slot k of token n reads and writes, or -1 when the slot is
 * dropped.  Unsigned compare: a negative index is dropped like one past
 * the rows (indices changed after validation never reach outside). */
static inline int64_t moeperm_ug_row(const moeperm_ug_ctx *c, int64_t n, int64_t k)
{
    uint64_t s = (uint64_t)(int64_t)c->indices[(n * c->top_k + k) * c->indices_s];
    return s < (uint64_t)c->rows ? (int64_t)s : -1;
}

/* probs[n, k] widened to binary32 for k < top_k. */
static inline void moeperm_ug_read_probs(const moeperm_ug_ctx *c, int64_t n, float *p)
{
    for (int64_t k = 0; k < c->top_k; k++) {
        const char *pk = c->probs + (n * c->probs_s0 + k * c->probs_s1) * c->probs_size;
        uint16_t h = 0;
        if (c->probs_dtype == MOEPERM_FLOAT)
            memcpy(&p[k], pk, sizeof p[k]);
        else
            memcpy(&h, pk, sizeof h);
        if (c->probs_dtype == MOEPERM_BF16)
            p[k] = fp_bf16_to_float(h);
        else if (c->probs_dtype == MOEPERM_FLOAT16)
            p[k] = fp_fp16_to_float(h);
    }
}

/* What a dropped slot adds to its accumulator for a chunk: the sum of a
 * row of zeros times g, +-0 (which leaves the accumulator as it is), or a
 * NaN when g holds an infinity or a NaN (0 * inf). */
static inline float moeperm_ug_dropped_chunk(bool special_seen)
{
    return special_seen ? NAN : 0.0f;
}

/* probs_grad[n, k] = narrow(acc[k]), a NaN as the quiet NaN 0x7fc00000
 * (the device's NaN is not modelled: docs/unpermute-grad.md). */
static inline void moeperm_ug_write_probs_grad(const moeperm_ug_ctx *c, int64_t n,
                                               const float *acc)
{
    for (int64_t k = 0; k < c->top_k; k++) {
        float value = isnan(acc[k]) ? fp_from_bits(0x7fc00000u) : acc[k];
        char *out = c->probs_grad + (n * c->probs_grad_s0 + k * c->probs_grad_s1) * c->probs_size;
        if (c->probs_dtype == MOEPERM_FLOAT) {
            memcpy(out, &value, sizeof value);
        } else {
            uint16_t h =
                c->probs_dtype == MOEPERM_BF16 ? fp_float_to_bf16(value) : fp_float_to_fp16(value);
            memcpy(out, &h, sizeof h);
        }
    }
}

#endif

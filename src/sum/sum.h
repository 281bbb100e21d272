/*
 * sum/sum.h - the sum of each token's slot rows in slot order, the
 * arithmetic MoeTokenPermuteGrad is and MoeTokenUnpermute without probs is
 * too (docs/arithmetic.md):
 *
 *   out[t, h] = narrow(sum over k = 0..K-1, in k order, of
 *                      widen(permuted[sorted_indices[t*K + k], h]))
 *
 * where a slot whose index is not a row of `permuted` is dropped and the
 * sum starts from the first kept slot when it is slot 0, else from +0.0.
 *
 * Here are the per-slot rule moeperm_token_rows(), written once for every
 * path, the portable C11 loop of sum.c, which is the reference, and the
 * choice of path: the x86 vector code of src/x86/ runs the same rule and
 * the same additions (core/kernel.h), vectorised across columns only, and
 * tests/core/test_fast_paths.c holds it to the portable loop bit for bit.
 */
#ifndef MOEPERM_SUM_H
#define MOEPERM_SUM_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "core/dispatch.h"
#include "core/internal.h"
#include "core/kernel.h"

/* A validated sum: copies of the views. */
struct moeperm_sum {
    struct moeperm_tensor permuted; /* [R, H]: permuted_output_grad or permuted_tokens */
    struct moeperm_tensor indices;  /* sorted_indices, [T*K] (or more; the rest unread) */
    struct moeperm_tensor out;      /* [T, H] */
    int64_t top_k;                  /* K */
};

/* Where the rows of a sum's tokens come from: sorted_indices and the rows
 * of the permuted tensor. */
typedef struct moeperm_gather {
    const int32_t *idx; /* sorted_indices' first element */
    int64_t idx_stride;
    int64_t top_k;
    const char *grad; /* the permuted tensor's first element, NULL when it has no rows */
    int64_t rows;     /* its rows: an index outside [0, rows) is dropped */
    /* its row stride in elements, and its element size: multiplied only
     * for rows that exist, since validation bounds the stride only as far
     * as the last row reaches (with one row, not at all) */
    int64_t row_stride, size;
} moeperm_gather;

static inline moeperm_gather moeperm_gather_of(const struct moeperm_sum *plan)
{
    const struct moeperm_tensor *g = &plan->permuted, *ix = &plan->indices;
    int64_t size = (int64_t)moeperm_dtype_size(g->dtype);
    return (moeperm_gather){
        .idx = (const int32_t *)ix->data + ix->offset,
        .idx_stride = ix->strides[0],
        .top_k = plan->top_k,
        /* NULL when there are no rows (every slot dropped): no row is read
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
 * lists in `rows`, in slot order, the rows of the permuted tensor that
 * token t sums, each `column_bytes` into its row.  Returns how many it
 * listed (up to top_k).  An index outside [0, rows) drops its slot; a
 * negative one compares as a huge unsigned value and is dropped too.
 * *zero_start says slot 0 was dropped: the sum then starts from +0.0 and
 * adds every listed row; otherwise it starts from the first listed row and
 * adds the others.
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

/* The sum on a chosen instruction set (moeperm_isa_resolve() of
 * dispatch.h says what AUTO means), on `threads` threads (0 = as many as
 * the bytes pay for).  A set the CPU does not have, or a sum the vector
 * code does not handle (a column stride other than 1), runs the portable
 * loop.  Any index outside [0, R) is dropped, so indices changed after
 * validation cannot make it read out of bounds. */
void moeperm_sum_run(const struct moeperm_sum *sum, int threads, moeperm_isa isa);

/* The number of threads moeperm_sum_run() uses: the request (0 = the
 * OpenMP default), cut down so that every thread gets enough bytes to pay
 * for waking it. */
int moeperm_sum_threads(const struct moeperm_sum *sum, int threads);

#ifdef MOEPERM_HAVE_X86_PATH
#include "x86/x86.h"
#endif

#endif

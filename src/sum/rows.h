/*
 * sum/rows.h - a sum's plan and the per-slot rule: which rows of the
 * permuted tensor each token sums, in slot order (docs/arithmetic.md).
 * Written once for every path: sum.c's portable loop and sum_x86.c's
 * tasks list their rows with moeperm_token_rows().
 */
#ifndef MOEPERM_SUM_ROWS_H
#define MOEPERM_SUM_ROWS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "core/internal.h"

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

#endif

/*
 * checks.h - the first-phase checks every operator shares (checks.c).
 * Each returns MOEPERM_SUCCESS or the failing status with
 * moeperm_last_error() set; `what` names the argument in the sentence.
 * What only one operator checks lives beside that operator.
 */
#ifndef MOEPERM_CHECKS_H
#define MOEPERM_CHECKS_H

#include <stdbool.h>
#include <stdint.h>

#include "core/internal.h"

/* Elements a view addresses: 0 when a dim is 0, INT64_MAX when the count
 * overflows. */
int64_t moeperm_view_elements(const moeperm_tensor *t);

/* dtype is FLOAT, FLOAT16 or BF16. */
moeperm_status moeperm_check_float_dtype(const moeperm_tensor *t, const char *what);

/* t's dtype is like's. */
moeperm_status moeperm_check_same_dtype(const moeperm_tensor *t, const char *what,
                                        const moeperm_tensor *like, const char *like_what);

/* dtype is INT32 (sorted_indices of the three operators that read it). */
moeperm_status moeperm_check_int32(const moeperm_tensor *t, const char *what);

/* t has ndim dims; `layout` describes them for the sentence, e.g. "[rows, hidden_size]". */
moeperm_status moeperm_check_ndim(const moeperm_tensor *t, const char *what, uint64_t ndim,
                                  const char *layout);

/* A view with elements has data, and the bytes it spans fit in memory. */
moeperm_status moeperm_check_view(const moeperm_tensor *t, const char *what);

/* No two elements of the 1-D or 2-D output view share memory. */
moeperm_status moeperm_check_no_self_overlap(const moeperm_tensor *out, const char *what);

/* The memory of output `out` and of view `other` do not overlap (views
 * already passed moeperm_check_view()). */
moeperm_status moeperm_check_disjoint(const moeperm_tensor *out, const char *out_name,
                                      const moeperm_tensor *other, const char *other_name);

/* The 1-D INT32 view sorted_indices holds a permutation of [0, n): the
 * sentence names the first entry out of range, or a repeat and the earlier
 * position of its value. */
moeperm_status moeperm_check_sorted_indices(const moeperm_tensor *sorted_indices);

#endif

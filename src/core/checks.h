/*
 * checks.h - the first-phase checks every operator shares (checks.c).
 * Each returns MOEPERM_SUCCESS or the failing status with
 * moeperm_last_error() set, the sentence led by "the device refuses" or
 * "the device's result is undetermined:" (internal.h); `what` names the
 * argument in it.  What only one operator checks lives beside that
 * operator.
 */
#ifndef MOEPERM_CHECKS_H
#define MOEPERM_CHECKS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "core/internal.h"

/* Elements a view addresses: 0 when a dim is 0, INT64_MAX when the count
 * overflows. */
int64_t moeperm_view_elements(const moeperm_tensor *t);

/* Whether every one of n outputs is NULL or has no elements.  The device
 * then does nothing and succeeds, before its tiling runs (docs/operators.md,
 * "The input domain"): a first phase that finds it makes a plan that does
 * nothing. */
bool moeperm_outputs_empty(const moeperm_tensor *const *outputs, size_t n);

/* A required tensor is not NULL (161001). */
moeperm_status moeperm_check_required(const void *tensor, const char *what);

/* The first phase's out-pointers, workspace_size and executor, are not
 * NULL (161001). */
moeperm_status moeperm_check_plan_outputs(const uint64_t *workspace_size,
                                          moeperm_executor *const *executor);

/* dtype is FLOAT, FLOAT16 or BF16 (161002). */
moeperm_status moeperm_check_float_dtype(const moeperm_tensor *t, const char *what);

/* t's dtype is like's (161002). */
moeperm_status moeperm_check_same_dtype(const moeperm_tensor *t, const char *what,
                                        const moeperm_tensor *like, const char *like_what);

/* dtype is INT32, as sorted_indices of the three operators that read it
 * (161002). */
moeperm_status moeperm_check_int32(const moeperm_tensor *t, const char *what);

/* t has ndim dims; `layout` describes them for the sentence, e.g.
 * "[rows, hidden_size]" (161002: the kernels read dims by position). */
moeperm_status moeperm_check_ndim(const moeperm_tensor *t, const char *what, uint64_t ndim,
                                  const char *layout);

/* The 2-D view t is [d0, d1] (161002: the kernel reads or writes d0 rows
 * of d1 elements whatever the view's shape); `why` says where the
 * expected shape comes from. */
moeperm_status moeperm_check_shape2(const moeperm_tensor *t, const char *what, int64_t d0,
                                    int64_t d1, const char *why);

/* A view with elements has data (161001), and the bytes it spans fit in
 * memory (161002). */
moeperm_status moeperm_check_view(const moeperm_tensor *t, const char *what);

/* No two elements of the output view share memory (161002). */
moeperm_status moeperm_check_no_self_overlap(const moeperm_tensor *out, const char *what);

/* The memory of output `out` and of view `other` do not overlap (views
 * already passed moeperm_check_view(); 161002). */
moeperm_status moeperm_check_disjoint(const moeperm_tensor *out, const char *out_name,
                                      const moeperm_tensor *other, const char *other_name);

/* None of the first `slots` entries of the 1-D INT32 view sorted_indices
 * is negative (161002: the kernel would read, or write, outside the tensor
 * named rows_of, whose rows the entries name).  Entries at or above the
 * rows are dropped slots, accepted.  A scan of the sign bits: it runs on
 * every call. */
moeperm_status moeperm_check_slots_nonnegative(const moeperm_tensor *sorted_indices,
                                               int64_t slots, const char *rows_of);

#endif

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
 * rows.h has the plan and the per-slot rule moeperm_token_rows(), written
 * once for every path; here are the portable C11 loop of sum.c, which is
 * the reference, and the choice of path: the x86 vector code (sum_x86.c
 * over the kernels of src/x86/) runs the same rule and the same additions
 * (core/kernel.h), vectorised across columns only, and
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
#include "sum/rows.h"

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

#endif

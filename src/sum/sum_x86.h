/*
 * sum/sum_x86.h - a sum on the x86 kernels of src/x86/ (sum_x86.c).  Only
 * where core/dispatch.h defines MOEPERM_HAVE_X86_PATH.
 */
#ifndef MOEPERM_SUM_X86_H
#define MOEPERM_SUM_X86_H

#include "core/dispatch.h"

#ifdef MOEPERM_HAVE_X86_PATH
#include "sum/rows.h"
#include "x86/x86.h"

/* sum_x86.c: runs a sum (MoeTokenPermuteGrad, MoeTokenUnpermute without
 * probs) with unit column strides on `team` threads with the x86 kernels
 * k, splitting it into tasks and prefetching each task's rows. */
void moeperm_x86_run(const struct moeperm_sum *plan, int team, const moeperm_x86_kernels *k);

/* The same for MoeTokenUnpermute with probs: its sum, each row times its
 * prob; permuted_tokens and out have unit column strides. */
void moeperm_x86_run_unpermute(const struct moeperm_sum *plan, const struct moeperm_tensor *probs,
                               int team, const moeperm_x86_kernels *k);
#endif

#endif

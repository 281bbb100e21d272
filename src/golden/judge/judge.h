/*
 * judge.h - the judge's diagnosis of one output of a case, as
 * moeperm_golden_judge() runs it, for the library's own callers (the
 * benchmark of the diagnosis times it alone).
 */
#ifndef MOEPERM_GOLDEN_JUDGE_JUDGE_H
#define MOEPERM_GOLDEN_JUDGE_JUDGE_H

#include <stdbool.h>
#include <stddef.h>

#include <moeperm/golden.h>

#include "golden/judge/diagnose/diagnose.h"

/* Diagnoses actual against output (a golden output of c, loaded with c's
 * inputs): golden_diagnose() on the case's inputs and attributes, then,
 * for MoeTokenUnpermuteGrad's probs_grad, the "order" or "wrong" finding
 * (order.h).  Returns 0, or -1 with a sentence in err. */
int golden_judge_diagnose(const moeperm_golden_case *c, const moeperm_golden_tensor *output,
                          const void *actual, bool strict_nan, golden_diagnosis *d, char *err,
                          size_t err_len);

#endif

/*
 * order.h - the finding that leads a differing probs_grad of
 * MoeTokenUnpermuteGrad: "order" (every difference within the error some
 * order of the reduction could make around the exact dot product) or
 * "wrong".
 */
#ifndef MOEPERM_GOLDEN_JUDGE_ORDER_H
#define MOEPERM_GOLDEN_JUDGE_ORDER_H

#include <stdbool.h>

#include <moeperm/golden.h>

#include "golden/judge/diagnose/diagnose.h"

/* For c's probs_grad (expected) against actual, puts the "order" or
 * "wrong" finding first in d ("wrong" after the exact findings of the
 * operator's models), when something differs, c's inputs and exact values
 * are loaded and d has room.  Returns whether it did. */
bool golden_judge_order(const moeperm_golden_case *c, const moeperm_golden_tensor *expected,
                        const void *actual, golden_diagnosis *d);

#endif

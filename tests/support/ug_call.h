/*
 * ug_call.h - the tests' one way of calling MoeTokenUnpermuteGrad through
 * the public two-phase API on contiguous buffers.
 */
#ifndef MOEPERM_TEST_UG_CALL_H
#define MOEPERM_TEST_UG_CALL_H

#include <moeperm/moeperm.h>

/* One problem: contiguous row-major buffers, probs NULL for none (then
 * top_k is 1 and probs_grad is ignored), chip NULL for the default. */
typedef struct ug_problem {
    moeperm_dtype dtype, probs_dtype;
    int64_t tokens_num, top_k, hidden, rows;
    const void *tokens, *grad, *probs;
    const int32_t *indices;
    void *tokens_grad, *probs_grad;
    const moeperm_chip *chip;
} ug_problem;

/* Creates the tensors, runs both phases (setting the chip between them
 * when one is given), destroys everything; returns the first failure. */
moeperm_status ug_call(const ug_problem *p);

/* Only the first phase; *executor receives the plan. */
moeperm_status ug_plan(const ug_problem *p, moeperm_executor **executor);

#endif

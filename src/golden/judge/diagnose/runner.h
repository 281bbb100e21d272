/*
 * runner.h - MoeTokenPermuteGrad run on rearranged rows: the primitive
 * every operator-level model is built from.  A sum of top_k slots in a
 * dtype is one run; a model chooses which row goes into which slot (or a
 * +0.0 row, or none), and libmoeperm does every addition and narrowing.
 */
#ifndef MOEPERM_GOLDEN_JUDGE_DIAGNOSE_RUNNER_H
#define MOEPERM_GOLDEN_JUDGE_DIAGNOSE_RUNNER_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <moeperm/moeperm.h>

/* One slot of a rearranged problem: a row of src (of dtype) or, with src
 * NULL, a +0.0 row (row >= 0) or a dropped slot (row < 0). */
typedef struct golden_diag_operand {
    const void *src;
    moeperm_dtype dtype;
    int64_t row;
} golden_diag_operand;

#define GOLDEN_DIAG_SKIP ((golden_diag_operand){NULL, MOEPERM_FLOAT, -1})
#define GOLDEN_DIAG_ZERO ((golden_diag_operand){NULL, MOEPERM_FLOAT, 0})

/* Runs MoeTokenPermuteGrad in dtype c on n tokens of kp slots, ops[t*kp +
 * k] the operand of slot k of token t, into out ([n, h] of c).  Returns 0
 * or -1 with a sentence in err. */
int golden_diag_run(moeperm_dtype c, int64_t h, int64_t n, int64_t kp,
                    const golden_diag_operand *ops, void *out, char *err, size_t err_len);

/* out = a + b row by row, one addition in dtype c per element (a top_k = 2
 * run); a row present on one side only is copied, on neither side it is
 * +0.0 and absent.  pa, pb say which rows are present (NULL: all); pout
 * (when not NULL) receives it for out and may alias pa.  Returns 0 or -1
 * with a sentence in err. */
int golden_diag_add_rows(moeperm_dtype c, int64_t h, int64_t n, const void *a, const bool *pa,
                         const void *b, const bool *pb, void *out, bool *pout, char *err,
                         size_t err_len);

#endif

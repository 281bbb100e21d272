/*
 * runner.h - the operators run on rearranged rows: the primitives every
 * operator-level model is built from.  A sum of top_k slots in a dtype is
 * one MoeTokenPermuteGrad run, a sum of scaled slots one
 * MoeTokenUnpermute run, a row times a prob one scaled row; a model
 * chooses which row goes into which slot (or a +0.0 row, or none) and with
 * which prob, and libmoeperm does every multiplication, addition and
 * narrowing.  What is left to a model by hand is only the bug itself (a
 * narrowing rule, a fused multiply-add), documented where it is done.
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

static inline bool golden_diag_is_skip(golden_diag_operand o)
{
    return !o.src && o.row < 0;
}

/* A run's tensors, made one by one as the first phase wants them and
 * destroyed together. */
#define GOLDEN_DIAG_TENSORS 6
typedef struct golden_diag_tensors {
    moeperm_tensor *t[GOLDEN_DIAG_TENSORS];
    size_t n;
    bool made; /* every one asked for was made */
} golden_diag_tensors;

#define GOLDEN_DIAG_TENSORS_INIT ((golden_diag_tensors){{NULL}, 0, true})

/* A contiguous [dims] tensor of dtype over data, kept in ts (NULL, and
 * ts->made false, when it cannot be made). */
moeperm_tensor *golden_diag_tensor_add(golden_diag_tensors *ts, const int64_t *dims,
                                       uint64_t ndim, moeperm_dtype dtype, const void *data);

/* After a first phase that returned first (MOEPERM_ERR_INNER when a tensor
 * could not be made) with ws and plan: runs the plan when it succeeded,
 * destroys ts's tensors, and returns 0, or -1 with a sentence in err. */
int golden_diag_tensors_run(golden_diag_tensors *ts, moeperm_status first, uint64_t ws,
                            moeperm_executor *plan, char *err, size_t err_len);

/* Runs MoeTokenPermuteGrad in dtype c on n tokens of kp slots, ops[t*kp +
 * k] the operand of slot k of token t, into out ([n, h] of c).  Returns 0
 * or -1 with a sentence in err. */
int golden_diag_run(moeperm_dtype c, int64_t h, int64_t n, int64_t kp,
                    const golden_diag_operand *ops, void *out, char *err, size_t err_len);

/* Runs MoeTokenUnpermute with tokens of dtype c and probs of dtype pd on n
 * tokens of kp slots: ops as for golden_diag_run(), probs[t*kp + k] the
 * bits of slot k's prob (an array of pd), out [n, h] of c.  A skipped
 * operand is a dropped slot; a prob of +-0 skips its slot, as the operator
 * does.  probs NULL runs the operator without probs, which is
 * MoeTokenPermuteGrad (any kp).  Returns 0 or -1 with a sentence in err. */
int golden_diag_unpermute(moeperm_dtype c, moeperm_dtype pd, int64_t h, int64_t n, int64_t kp,
                          const golden_diag_operand *ops, const void *probs, void *out,
                          char *err, size_t err_len);

/* out row i = row i times probs[i] (bits of pd), narrowed to c, as both
 * MoeTokenUnpermute and MoeTokenUnpermuteGrad multiply: a row whose prob
 * is not +-0 through a top_k = 1 MoeTokenUnpermute, one whose prob is
 * +-0 (which that operator skips) through MoeTokenUnpermuteGrad, whose
 * product is never skipped.  With c = FLOAT the product is the fp32 one
 * the operators add.  A skipped operand leaves its row of out untouched.
 * Returns 0 or -1 with a sentence in err. */
int golden_diag_scale_rows(moeperm_dtype c, moeperm_dtype pd, int64_t h, int64_t n,
                           const golden_diag_operand *ops, const void *probs, void *out,
                           char *err, size_t err_len);

/* golden_diag_scale_rows() on rows 0..n-1 of one buffer of dtype rd,
 * none skipped: the run reads the buffer in place when rd is c, else a
 * copy converted to c. */
int golden_diag_scale_block(moeperm_dtype c, moeperm_dtype pd, int64_t h, int64_t n,
                            const void *rows, moeperm_dtype rd, const void *probs, void *out,
                            char *err, size_t err_len);

/* out = a + b row by row, one addition in dtype c per element (a top_k = 2
 * run); a row present on one side only is copied, on neither side it is
 * +0.0 and absent.  pa, pb say which rows are present (NULL: all); pout
 * (when not NULL) receives it for out and may alias pa.  Returns 0 or -1
 * with a sentence in err. */
int golden_diag_add_rows(moeperm_dtype c, int64_t h, int64_t n, const void *a, const bool *pa,
                         const void *b, const bool *pb, void *out, bool *pout, char *err,
                         size_t err_len);

/* A pairwise tree of fp32 additions over kp blocks of n rows of h values:
 * slots [kp][n*h], present [kp][n] (both used as scratch).  Variant 0 adds
 * neighbours ((0+1)+(2+3))+..., variant 1 folds the upper half onto the
 * lower ((0+4)+(2+6))+((1+5)+(3+7)); a node with an absent side is its
 * other side, a row with nothing present is +0.0.  The sums go into out
 * ([n*h] fp32).  Returns 0 or -1 with a sentence in err. */
int golden_diag_tree(int variant, int64_t kp, int64_t n, int64_t h, float *slots, bool *present,
                     float *out, char *err, size_t err_len);

/* Narrowing rules other than the library's round to nearest even, for the
 * models of kernels that narrow another way. */
typedef enum golden_diag_rule {
    GOLDEN_DIAG_TRUNCATE,  /* toward zero (never overflows to infinity) */
    GOLDEN_DIAG_HALF_AWAY, /* to nearest, ties away from zero */
} golden_diag_rule;

/* out[i] = in[i] narrowed to dtype (FLOAT16 or BF16) by rule.  Each result
 * is the library's narrowing moved one step where the rule disagrees with
 * it. */
void golden_diag_narrow(moeperm_dtype dtype, golden_diag_rule rule, const float *in, void *out,
                        size_t n);

/* The bits of 1.0 in dtype (FLOAT, FLOAT16 or BF16). */
uint64_t golden_diag_one(moeperm_dtype dtype);

#endif

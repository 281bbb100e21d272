/*
 * diagnose.h - a diagnosis that names the bug behind a mismatch.
 *
 * When an output differs from the golden one, a catalogue of bugs kernels
 * really have is tried against it.  Each hypothesis is a small model: the
 * output the buggy kernel would have produced, computed from the case's
 * inputs with libmoeperm's own public API (a different slot order, a slot
 * left out, a sum kept in fp32 and narrowed another way), or a pattern
 * read from the two outputs alone (a block of tokens holding another
 * block's values, a region never written).  A hypothesis whose model
 * reproduces the actual output bit for bit is exact; failing that, one
 * that reproduces more of the differing elements than it contradicts is
 * reported with those counts.
 *
 * Hypotheses come in two kinds.  Shape-level ones (token-block-shift,
 * unwritten, ftz and saturate on the results, nan-bits) look at the
 * output alone, viewed as [rows, cols], so they work for every operator
 * (shape.c).  Operator-level ones are rows of a per-operator table, each
 * an id, a test of whether it applies and a model; supporting another
 * operator is one file holding its table (model.h says what it defines)
 * and its line in operators.c.  docs/judging.md lists every id, what it
 * models, how it is detected and what its detail says.
 *
 * Everything here works on plain buffers (name, dtype, shape, pointer), not
 * on a case, so any caller with tensors in memory can use it.
 */
#ifndef MOEPERM_GOLDEN_JUDGE_DIAGNOSE_H
#define MOEPERM_GOLDEN_JUDGE_DIAGNOSE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include <moeperm/moeperm.h>

#define GOLDEN_DIAG_MAX_FINDINGS 8

/* A contiguous row-major tensor in memory, named as the operator names it
 * ("permuted_output_grad", "sorted_indices", "input_grad"). */
typedef struct golden_diag_tensor {
    const char *name;
    moeperm_dtype dtype;
    uint64_t ndim;
    int64_t dims[MOEPERM_MAX_DIMS];
    const void *data;
} golden_diag_tensor;

/* An integer attribute of the operator ("top_k"). */
typedef struct golden_diag_attr {
    const char *name;
    int64_t value;
} golden_diag_attr;

/* One run of an operator: its name, its inputs and attributes. */
typedef struct golden_diag_problem {
    const char *op; /* "MoeTokenPermuteGrad" */
    const golden_diag_tensor *inputs;
    size_t input_count;
    const golden_diag_attr *attrs;
    size_t attr_count;
} golden_diag_problem;

typedef struct golden_finding {
    char id[32];           /* stable: "missing-slot", "token-block-shift", ... */
    char detail[256];      /* one sentence: "slot 3 is never added" */
    uint64_t explained;    /* differing elements the model reproduces bit for bit */
    uint64_t contradicted; /* elements where the model and the actual output disagree */
    bool exact;            /* the model is the actual output (contradicted == 0) */
} golden_finding;

typedef struct golden_diagnosis {
    uint64_t differing; /* elements in which actual differs from expected */
    size_t count;       /* findings, best first */
    golden_finding finding[GOLDEN_DIAG_MAX_FINDINGS];
} golden_diagnosis;

/*
 * golden_diagnose() tests the catalogue on one output of a run of p.
 * expected is the golden output (its name selects the operator's models),
 * actual holds the same number of elements of the same dtype.  Elements
 * are equal when their bits are, or when both are NaNs and strict_nan is
 * false (the comparator's rule).
 *
 * Findings: when some hypotheses are exact (the model is the actual output
 * bit for bit), those alone, in catalogue order, and an operator's exact
 * model alone, without the shape-level patterns; otherwise the hypotheses
 * that explain more differing elements than they contradict, most
 * explained first; at most one per id, at most GOLDEN_DIAG_MAX_FINDINGS.
 * An infinity, NaN or largest finite value the operator's arithmetic can
 * make from the inputs is not taken for an unwritten buffer.  Nothing
 * differing gives no findings.  An operator or output without a table in
 * the catalogue, or inputs that do not fit the operator, get the
 * shape-level hypotheses only.
 *
 * Cost: a few passes over the output, the operator-level models on a
 * sample of at most 64 rows, then the models that fit the sample on the
 * whole output (those exact on the sample first; partial ones up to three
 * outputs' worth), in blocks of at most 32 MiB of widened input; memory
 * stays near that block size plus about 64 bytes per output row.  It runs
 * only when something differs.
 *
 * Returns 0 and fills *d, or -1 with a sentence in err (memory ran out).
 * Thread safe; the operator runs on as many threads as it would anyway.
 */
int golden_diagnose(const golden_diag_problem *p, const golden_diag_tensor *expected,
                    const void *actual, bool strict_nan, golden_diagnosis *d, char *err,
                    size_t err_len);

/*
 * golden_diagnosis_report() prints d for the text report, one line per
 * finding, each starting with indent:
 *
 *   diagnosis: missing-slot: slot 3 is never added (reproduces the output exactly)
 *   diagnosis: truncate: ... (explains 120 of 4096 differing elements, contradicts 3 others)
 *   diagnosis: no known bug reproduces these differences
 *
 * and nothing when nothing differs.
 */
void golden_diagnosis_report(FILE *f, const golden_diagnosis *d, const char *indent);

/* One entry of the catalogue: its id, the operator it belongs to (NULL for
 * the shape-level ones) and what bug it models. */
typedef struct golden_hypothesis_info {
    const char *id;
    const char *op;
    const char *models;
} golden_hypothesis_info;

/* golden_diagnosis_catalogue() returns the catalogue, *count entries,
 * static; an id appears once per operator.  Thread safe. */
const golden_hypothesis_info *golden_diagnosis_catalogue(size_t *count);

#endif

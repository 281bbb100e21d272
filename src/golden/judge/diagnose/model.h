/*
 * model.h - what the files of the diagnosis share: the data every
 * hypothesis sees, the tally of what a model explains and contradicts, the
 * findings kept so far, and the shape of an operator's table of models.
 *
 * Adding an operator's models is one file and its entry in operators.c:
 * the file defines a golden_diag_operator (its context, the setup that
 * fills it from a golden_diag_problem, and its models, each with its
 * catalogue entry), operators.c declares and lists it.  The search (search.c) runs every operator's
 * models the same way: each on a sample of the rows first, the ones that
 * fit the sample on the whole output, block by block.
 */
#ifndef MOEPERM_GOLDEN_JUDGE_DIAGNOSE_MODEL_H
#define MOEPERM_GOLDEN_JUDGE_DIAGNOSE_MODEL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "golden/judge/bits.h"
#include "golden/judge/diagnose/diagnose.h"

/* ---------------------------------------------------------------------- */
/* What every hypothesis sees                                             */
/* ---------------------------------------------------------------------- */

/* One output as [rows, cols], with what differs row by row. */
typedef struct golden_diag_data {
    moeperm_dtype dtype;
    int64_t rows, cols;
    const void *expected, *actual;
    bool strict_nan;
    uint64_t differing;
    uint64_t *row_differ; /* differing elements of each row */
    const char *noun;     /* what a row is called: "token", "row" */
    /* The operator's answer (may be NULL): whether arithmetic on the
     * inputs can make element (row, col) an infinity, a NaN or the largest
     * finite value (golden_diag_operator.special_possible). */
    bool (*special_possible)(const void *ctx, int64_t row, int64_t col);
    const void *special_ctx;
} golden_diag_data;

/* The comparator's rule: equal bits, or two NaNs unless strict. */
static inline bool golden_diag_same(const golden_diag_data *d, uint64_t a, uint64_t b)
{
    return golden_bits_same(d->dtype, a, b, d->strict_nan);
}

typedef struct golden_diag_tally {
    uint64_t explained, contradicted;
} golden_diag_tally;

/* Counts, over the given rows, the differing elements model reproduces and
 * the elements where model and actual disagree; model holds n rows. */
void golden_diag_tally_rows(const golden_diag_data *d, const int64_t *rows, size_t n,
                            const void *model, golden_diag_tally *t);

/* What slot k of row t adds at column c (in double), or NaN when the slot
 * adds nothing there. */
typedef double (*golden_diag_contribution)(const void *ctx, int64_t t, int64_t k, int64_t c);

/* missing-slot's choice for a large top_k: in a row whose slot k is
 * missing, expected minus actual is about slot k's contribution, so the
 * slot nearest to it (sum of absolute differences) is the candidate; up to
 * eight differing sample rows each name one.  Fills list (at most *count)
 * with the slots named, in order, and sets *count.  A heuristic that
 * chooses which models run, never a model. */
void golden_diag_pick_slots(const golden_diag_data *d, const void *ctx, int64_t top_k,
                            golden_diag_contribution contribution, const int64_t *sample,
                            size_t n, int *list, size_t *count);

/* ---------------------------------------------------------------------- */
/* The findings so far                                                    */
/* ---------------------------------------------------------------------- */

#define GOLDEN_DIAG_MAX_CANDIDATES 64

typedef struct golden_diag_candidate {
    golden_finding f;
    int rank; /* catalogue order: the tie-break among exact findings */
} golden_diag_candidate;

typedef struct golden_diag_candidates {
    golden_diag_candidate c[GOLDEN_DIAG_MAX_CANDIDATES];
    size_t n;
} golden_diag_candidates;

/* Records a tested hypothesis; one entry per id, the best of its variants.
 * rank orders exact findings: an operator's models by their place in its
 * table, the shape-level ones after (GOLDEN_DIAG_RANK_SHAPE). */
void golden_diag_offer(golden_diag_candidates *cs, const char *id, int rank, const char *detail,
                       golden_diag_tally t);

/* ---------------------------------------------------------------------- */
/* Shape-level hypotheses (shape.c): the output alone, any operator       */
/* ---------------------------------------------------------------------- */

enum { GOLDEN_DIAG_RANK_SHAPE = 100 }; /* after every operator-level model */

/* Tests every shape-level hypothesis on d.  Returns 0, or -1 when memory
 * runs out. */
int golden_diag_shapes(const golden_diag_data *d, golden_diag_candidates *cs);

/* The value most of the differing elements of the actual output hold
 * (+0.0 unless another is more common), into *value, with how many hold
 * it; returns whether it is what a buffer holds before a kernel writes it
 * (zeros, one byte repeated, a NaN). */
bool golden_diag_fill_value(const golden_diag_data *d, uint64_t *value, uint64_t *count);

/* Their catalogue entries, *count of them. */
const golden_hypothesis_info *golden_diag_shape_catalogue(size_t *count);

/* ---------------------------------------------------------------------- */
/* Operator-level models                                                  */
/* ---------------------------------------------------------------------- */

/* The most variants a model's select() may list. */
#define GOLDEN_DIAG_SELECT_MAX 16

/* One model: ctx is its operator's context, filled by the operator's
 * setup(). */
typedef struct golden_diag_model {
    golden_hypothesis_info info; /* its catalogue entry: id, operator, sentence */
    /* How many variants apply to this problem (0: the model does not). */
    int (*variants)(const void *ctx);
    /* Optional: a search on the sample before the variants are counted. */
    int (*prepare)(void *ctx, const golden_diag_data *d, const int64_t *sample, size_t n,
                   char *err, size_t err_len);
    /* Optional: the variants worth trying, when trying all would cost too
     * much; fills at most *count (<= GOLDEN_DIAG_SELECT_MAX) of them into
     * list and sets *count. */
    void (*select)(const void *ctx, const golden_diag_data *d, const int64_t *sample, size_t n,
                   int *list, size_t *count);
    /* The output the buggy kernel would give for the n given rows, into
     * out ([n, cols] of the output's dtype). */
    int (*compute)(void *ctx, int variant, const int64_t *rows, size_t n, void *out, char *err,
                   size_t err_len);
    /* The finding's sentence for this problem and variant. */
    void (*describe)(const void *ctx, int variant, char *out, size_t len);
} golden_diag_model;

/* One operator's models of one of its outputs. */
typedef struct golden_diag_operator {
    const char *op;     /* "MoeTokenPermuteGrad" */
    const char *output; /* the output the models reproduce: "input_grad" */
    const char *noun;   /* what one of its rows is: "token" */
    const golden_diag_model *models;
    size_t count;
    size_t context_size;
    /* Whether p is a run the models can take; fills ctx (context_size
     * bytes, zeroed). */
    bool (*setup)(const golden_diag_problem *p, const golden_diag_tensor *expected, void *ctx);
    /* Frees what setup() and the models left in ctx (may be NULL). */
    void (*cleanup)(void *ctx);
    /* Elements a model touches per output row: the budget of the sample
     * and the size of the blocks. */
    size_t (*row_elements)(const void *ctx);
    /* Optional: whether the arithmetic of output element (row, col) can
     * give an infinity, a NaN or the largest finite value from these
     * inputs: an operand is not finite, or the magnitudes it multiplies
     * and sums reach the end of fp16's range (where a kernel computing in
     * a narrower type overflows).  Such a value is never taken for a
     * buffer left unwritten (shape.c). */
    bool (*special_possible)(const void *ctx, int64_t row, int64_t col);
} golden_diag_operator;

/* The end of fp16's range: magnitudes at or beyond it overflow a kernel
 * that computes in fp16. */
#define GOLDEN_DIAG_FP16_LIMIT 65504.0

/* ---------------------------------------------------------------------- */
/* What the two summing operators share                                   */
/* ---------------------------------------------------------------------- */

/* MoeTokenPermuteGrad and MoeTokenUnpermute: output row t sums top_k
 * slots, slot k reading row idx[t*K + k] of an [R, H] tensor of dtype
 * (an index >= R is a dropped slot).  Their contexts begin with this, so
 * the variant counts, sentences and choices below (sums.c) serve both. */
typedef struct golden_diag_sum {
    moeperm_dtype dtype;
    const int32_t *idx; /* [T*K] */
    int64_t R, H, T, K;
    bool has_dropped;   /* some slot reads a row >= R */
    /* what slot k of row t adds at column c (missing-slot's choice) */
    golden_diag_contribution contribution;
} golden_diag_sum;

/* Notes has_dropped; false when an index is negative (not a run the
 * models take). */
bool golden_diag_sum_indices(golden_diag_sum *s);

/* Variant counts (golden_diag_model.variants) on a context that begins
 * with a golden_diag_sum: narrow16 (1 unless the dtype is float32), two
 * (1 from top_k 2), pairwise (2 trees from top_k 3), zero_start (1 while
 * a slot can be added), dropped (3 readings of a dropped slot, 1 when R is
 * 0, none without dropped slots), missing (one per slot). */
int golden_diag_sum_narrow16(const void *ctx);
int golden_diag_sum_two(const void *ctx);
int golden_diag_sum_pairwise(const void *ctx);
int golden_diag_sum_zero_start(const void *ctx);
int golden_diag_sum_dropped(const void *ctx);
int golden_diag_sum_missing(const void *ctx);

/* missing-slot's variants (golden_diag_model.select): every slot up to
 * GOLDEN_DIAG_SELECT_MAX of them, beyond it the slots the differences point
 * at (golden_diag_pick_slots()). */
void golden_diag_sum_select_missing(const void *ctx, const golden_diag_data *d,
                                    const int64_t *sample, size_t n, int *list, size_t *count);

/* Sentences (golden_diag_model.describe) both operators say alike. */
void golden_diag_sum_truncate(const void *ctx, int v, char *out, size_t len);
void golden_diag_sum_half_away(const void *ctx, int v, char *out, size_t len);
void golden_diag_sum_reversed(const void *ctx, int v, char *out, size_t len);
void golden_diag_sum_missing_slot(const void *ctx, int v, char *out, size_t len);

/* The operators with models (operators.c), *count of them. */
const golden_diag_operator *const *golden_diag_operators(size_t *count);

/* The input of p called name, or NULL. */
static inline const golden_diag_tensor *golden_diag_input(const golden_diag_problem *p,
                                                          const char *name)
{
    for (size_t i = 0; i < p->input_count; i++)
        if (p->inputs[i].name && strcmp(p->inputs[i].name, name) == 0)
            return &p->inputs[i];
    return NULL;
}

/* The optional probs [tokens, K] of p, a float dtype, into *top_k, *dtype
 * and *data (1, FLOAT and NULL when p has none); false when they are
 * there but not of that shape, dtype or size. */
bool golden_diag_probs(const golden_diag_problem *p, int64_t tokens, int64_t *top_k,
                       moeperm_dtype *dtype, const void **data);

/* The attribute of p called name into *value; false when p has none. */
static inline bool golden_diag_attr_value(const golden_diag_problem *p, const char *name,
                                          int64_t *value)
{
    for (size_t i = 0; i < p->attr_count; i++) {
        if (p->attrs[i].name && strcmp(p->attrs[i].name, name) == 0) {
            *value = p->attrs[i].value;
            return true;
        }
    }
    return false;
}

#endif

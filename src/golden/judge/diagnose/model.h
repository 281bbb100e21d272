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
} golden_diag_operator;

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

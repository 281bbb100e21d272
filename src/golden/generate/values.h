/*
 * values.h - the value kinds of the generator: what a kind needs to know
 * about a format, and one generator per tensor, which gives every element
 * its bits from its position alone (docs/golden-format.md).
 */
#ifndef MOEPERM_GOLDEN_GENERATE_VALUES_H
#define MOEPERM_GOLDEN_GENERATE_VALUES_H

#include <stdint.h>

#include <moeperm/golden.h>

#include "golden/generate/rows.h"

/* What a value kind needs to know about the format, as raw bits. */
typedef struct golden_format {
    moeperm_dtype dtype;
    int mantissa; /* stored mantissa bits: 23, 10, 7 */
    int emax;     /* exponent of the largest finite value (also the bias) */
    uint32_t sign, inf, max, one, qnan;
} golden_format;

golden_format golden_format_of(moeperm_dtype dtype);

/* Which tensor a generator fills: the coordinated kinds give each its own
 * part of the recipe. */
typedef enum golden_fill {
    GOLDEN_FILL_PERMUTED, /* element (t, k, h) of a permuted tensor, stored in a row */
    GOLDEN_FILL_TOKENS,   /* MoeTokenPermute's tokens [T, H] */
    GOLDEN_FILL_GRAD,     /* MoeTokenUnpermuteGrad's unpermuted_tokens_grad [T, H] */
    GOLDEN_FILL_PROBS     /* probs [T, K] */
} golden_fill;

typedef struct golden_generator {
    golden_format f;
    moeperm_golden_values values;
    int64_t top_k, hidden; /* of the draw numbering: (t * top_k + k) * hidden + h */
    uint64_t value_key, pick_key;
    golden_fill fills;
    /* The case, for the coordinated kinds: its top_k and hidden_size, the
     * formats of the tokens and of probs, and the key of the slot draws. */
    int64_t slots, columns;
    golden_format tokens, probs;
    uint64_t slot_key;
    int scenarios; /* of the adversarial kinds: column h holds scenario h mod scenarios */
    row_kind rows; /* ROW_ELEMENTS: element by element */
    row_fn *row;
} golden_generator;

/* The bits of element (t, k, h) of g's tensor, by the recipe of its value
 * kind. */
uint32_t golden_element_bits(const golden_generator *g, int64_t t, int64_t k, int64_t h);

#endif

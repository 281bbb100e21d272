/*
 * generate.h - the golden generator: routings, value kinds, built-in
 * suites, and the reference run that fills in the golden output.
 *
 * Inputs come from the counter-based PRNG of prng.h, so a case is a pure
 * function of its spec; outputs come from libmoeperm's public two-phase
 * API, because the arithmetic lives in one place and the generator must not
 * re-derive it.  docs/golden-format.md describes every kind and suite.
 */
#ifndef MOEPERM_GOLDEN_GENERATE_H
#define MOEPERM_GOLDEN_GENERATE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "golden/case.h"

typedef enum golden_routing {
    GOLDEN_ROUTING_ROUTED,   /* top_k distinct experts per token, some hot */
    GOLDEN_ROUTING_IDENTITY, /* sorted_indices[i] = i */
    GOLDEN_ROUTING_REVERSE,  /* sorted_indices[i] = T*K-1-i */
    GOLDEN_ROUTING_RANDOM    /* a uniformly random permutation */
} golden_routing;

typedef enum golden_values {
    GOLDEN_VALUES_NORMAL,    /* gradient-like values in (-1, 1), mixed magnitudes */
    GOLDEN_VALUES_NAN_INF,   /* NaN and infinity propagation */
    GOLDEN_VALUES_SUBNORMAL, /* subnormal inputs and subnormal sums */
    GOLDEN_VALUES_OVERFLOW,  /* overflow in the sum and in the narrowing */
    GOLDEN_VALUES_ROUNDING,  /* RNE ties, cancellation, signed zero */
    GOLDEN_VALUES_NEGZERO,   /* every element -0.0 */
    GOLDEN_VALUES_BITS       /* uniformly random bit patterns */
} golden_values;

typedef struct golden_spec {
    char name[96];
    char description[256];
    moeperm_dtype dtype;
    int64_t tokens_num, top_k, hidden_size;
    int64_t num_rows;    /* -1: tokens_num*top_k */
    int64_t num_experts; /* routed only; 0: the default (max(64, 2*top_k)) */
    int hot_percent;     /* routed only: share of picks among the hot eighth of experts */
    golden_values values;
    golden_routing routing;
    uint64_t seed;
} golden_spec;

/* Names as used by --routing and --values; parse returns false if unknown. */
const char *golden_routing_name(golden_routing routing);
bool golden_routing_parse(const char *name, golden_routing *routing);
const char *golden_values_name(golden_values values);
bool golden_values_parse(const char *name, golden_values *values);
/* Comma-separated list of all names, for usage messages. */
const char *golden_routing_names(void);
const char *golden_values_names(void);

/* A default name for a one-off case ("bf16-t4-k2-h16-routed-normal-s1"). */
void golden_spec_default_name(golden_spec *spec);

/*
 * golden_spec_check() validates a spec before any work: dims positive and
 * bounded, num_rows <= T*K, num_experts >= top_k for routed, the name a
 * plain directory name.  Returns 0 or -1 with a sentence in err.
 */
int golden_spec_check(const golden_spec *spec, char *err, size_t err_len);

/*
 * golden_generate() builds the case of spec in *c: inputs from the PRNG,
 * sorted_indices from the routing (routed goes through the public
 * moeperm_route_sorted_indices()), and input_grad from the public operator.
 * generator and command are copied into the manifest fields.  Returns 0
 * or -1 with a sentence in err (*c is then empty).
 */
int golden_generate(const golden_spec *spec, const char *command, golden_case *c, char *err,
                    size_t err_len);

/*
 * golden_run_reference() computes c's input_grad into out (T*H elements of
 * c->dtype) with libmoeperm's public two-phase API.  Returns
 * MOEPERM_SUCCESS or the operator's status, with moeperm_last_error()'s
 * sentence in err.  Every backend and the generator share this one path.
 */
moeperm_status golden_run_reference(const golden_case *c, void *out, char *err,
                                    size_t err_len);

/* The checks of golden_run_reference() alone (the first phase): whether the
 * operator takes c, with the same status and sentence when it does not.
 * out is not written. */
moeperm_status golden_check_reference(const golden_case *c, void *out, char *err,
                                      size_t err_len);

/* ---------------------------------------------------------------------- */
/* Built-in suites                                                        */
/* ---------------------------------------------------------------------- */

typedef struct golden_suite {
    const char *name;
    const char *description;
    bool in_default; /* written by `moeperm golden` without --suite */
} golden_suite;

/* The built-in suites, *count of them, in their fixed order. */
const golden_suite *golden_suites(size_t *count);
const golden_suite *golden_suite_find(const char *name);

/*
 * golden_suite_specs() lists the cases of a suite with the given base seed:
 * *specs is a malloc'd array of *count specs (free()).  Returns 0 or -1
 * when memory runs out.
 */
int golden_suite_specs(const golden_suite *suite, uint64_t seed, golden_spec **specs,
                       size_t *count);

/* The seed `moeperm golden` uses without --seed. */
#define GOLDEN_DEFAULT_SEED 1

#endif

/*
 * recipe.c - the vocabulary of a case's recipe: the routings and value
 * kinds by name, and what each scenario of the adversarial kinds puts in a
 * column, as the generator makes them and docs/golden-format.md describes
 * them.
 */
#include "golden/case/recipe.h"

#include <stddef.h>
#include <string.h>

static const char *const routing_names[] = {"routed", "identity", "reverse", "random",
                                            "repeats", "sparse"};
static const char *const values_names[] = {
    "normal",           "nan-inf",           "subnormal",        "overflow",
    "rounding",         "negzero",           "bits",             "masking",
    "grad-inf",         "product-rounding",  "product-subnormal", "product-overflow",
    "cancel",           "tiny",              "one"};

#define COUNT(a) (sizeof(a) / sizeof((a)[0]))

const char *moeperm_golden_routing_name(moeperm_golden_routing routing)
{
    return (size_t)routing < COUNT(routing_names) ? routing_names[routing] : "unknown";
}

bool moeperm_golden_routing_parse(const char *name, moeperm_golden_routing *routing)
{
    for (size_t i = 0; i < COUNT(routing_names); i++)
        if (strcmp(name, routing_names[i]) == 0) {
            *routing = (moeperm_golden_routing)i;
            return true;
        }
    return false;
}

const char *moeperm_golden_values_name(moeperm_golden_values values)
{
    return (size_t)values < COUNT(values_names) ? values_names[values] : "unknown";
}

bool moeperm_golden_values_parse(const char *name, moeperm_golden_values *values)
{
    for (size_t i = 0; i < COUNT(values_names); i++)
        if (strcmp(name, values_names[i]) == 0) {
            *values = (moeperm_golden_values)i;
            return true;
        }
    return false;
}

const char *moeperm_golden_routing_names(void)
{
    return "routed, identity, reverse, random, repeats, sparse";
}

const char *moeperm_golden_values_names(void)
{
    return "normal, nan-inf, subnormal, overflow, rounding, negzero, bits, masking, grad-inf, "
           "product-rounding, product-subnormal, product-overflow, cancel, tiny, one";
}

static const int scenario_count[] = {1, 8, 6, 6, 11, 1, 1};

/* What each scenario of the adversarial kinds puts in a column, as the
 * comments of kind_nan_inf() ... kind_rounding() say, for reports. */
static const char *const nan_inf_scenarios[] = {
    "control", "one NaN among numbers", "one +inf", "one -inf", "+inf + -inf = NaN",
    "+inf + +inf = +inf", "a signalling NaN input", "every slot a NaN: whose payload survives"};
static const char *const subnormal_scenarios[] = {
    "subnormals only", "the smallest normal among subnormals",
    "two normals with a subnormal sum", "one subnormal repeated, growing into the normals",
    "a normal plus subnormals", "alternating signs: a zero or one subnormal"};
static const char *const overflow_scenarios[] = {
    "max + max: inf, or max on a saturating device", "-max - max",
    "max + a quarter ulp: stays max", "max + half an ulp: a tie, to even is inf",
    "max, max, -max: the k-order sum overflows first", "+-max/2 in every slot"};
static const char *const rounding_scenarios[] = {
    "a tie that stays (even)", "a tie that rounds up (to even)", "above the tie",
    "absorption and cancellation in k order", "every slot -0: -0", "every slot +0",
    "-0 first, +0 after: +0", "x + -x = +0, then -0s", "-0, x, -x, -0...: +0",
    "(1 + ulp) - 1: exact cancellation", "control"};

int golden_values_scenarios(moeperm_golden_values values)
{
    return (size_t)values < COUNT(scenario_count) ? scenario_count[values] : 1;
}

const char *golden_scenario_name(const char *values, int64_t column, int *scenario)
{
    moeperm_golden_values v;
    if (!values || !moeperm_golden_values_parse(values, &v) || (size_t)v >= COUNT(scenario_count) ||
        scenario_count[v] <= 1)
        return NULL;
    *scenario = (int)(column % scenario_count[v]);
    switch (v) {
    case MOEPERM_GOLDEN_VALUES_NAN_INF:
        return nan_inf_scenarios[*scenario];
    case MOEPERM_GOLDEN_VALUES_SUBNORMAL:
        return subnormal_scenarios[*scenario];
    case MOEPERM_GOLDEN_VALUES_OVERFLOW:
        return overflow_scenarios[*scenario];
    case MOEPERM_GOLDEN_VALUES_ROUNDING:
        return rounding_scenarios[*scenario];
    default:
        return NULL;
    }
}

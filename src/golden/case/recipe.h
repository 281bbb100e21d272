/*
 * recipe.h - the words of a manifest's "recipe" (routings and value kinds,
 * golden.h) and the scenarios of the adversarial value kinds: the
 * generator lays them out over the columns, the judge names the ones that
 * differ (docs/golden-format.md).
 */
#ifndef MOEPERM_GOLDEN_CASE_RECIPE_H
#define MOEPERM_GOLDEN_CASE_RECIPE_H

#include <stdint.h>

#include <moeperm/golden.h>

/* How many scenarios values cycles through over the columns (column h
 * holds scenario h mod that count); 1 for a kind without scenarios. */
int golden_values_scenarios(moeperm_golden_values values);

/* For a case made with one of the adversarial value kinds (values, the
 * recipe's name for it), which scenario column h holds: its number in
 * *scenario and a few words on what it tests; NULL for other kinds. */
const char *golden_scenario_name(const char *values, int64_t column, int *scenario);

#endif

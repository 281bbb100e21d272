/*
 * route.h - the routings of a generated case (docs/golden-format.md,
 * "Routing").
 */
#ifndef MOEPERM_GOLDEN_GENERATE_ROUTE_H
#define MOEPERM_GOLDEN_GENERATE_ROUTE_H

#include <stddef.h>
#include <stdint.h>

#include <moeperm/golden.h>

/* sorted_indices of spec s into indices: the tokens_num * top_k entries
 * of its routing (huge ones put in with huge_indices), then its
 * extra_indices entries.  Returns 0 or -1 with a sentence in err. */
int golden_make_indices(const moeperm_golden_spec *s, int32_t *indices, char *err, size_t err_len);

/* MoeTokenPermute's expert ids [T, K] of the index dtype into t's data:
 * the routing's choices, and with sentinels every 7th slot the dtype's
 * minimum or maximum (alternately), the ids the device sorts first and
 * last.  Returns 0 or -1 with a sentence in err. */
int golden_fill_expert_ids(const moeperm_golden_spec *s, moeperm_golden_tensor *t, char *err,
                           size_t err_len);

#endif

/*
 * spec.h - what the rooms of the generator share about a spec.
 */
#ifndef MOEPERM_GOLDEN_GENERATE_SPEC_H
#define MOEPERM_GOLDEN_GENERATE_SPEC_H

#include <stdint.h>

#include <moeperm/golden.h>

/* The experts a routed case chooses from when its spec says 0:
 * max(64, 2 top_k). */
int64_t golden_default_experts(int64_t top_k);

/* huge_indices puts these values in sorted_indices, every one of them a
 * dropped slot only while the rows are at most the smallest, 2^24. */
#define HUGE_MAX_ROWS 16777216
#define HUGE_VALUES {1065353216, INT32_MAX, -1, 2139095040, 16777216}
#define HUGE_COUNT 5

#endif

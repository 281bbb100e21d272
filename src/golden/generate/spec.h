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

#endif

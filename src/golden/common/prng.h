/*
 * prng.h - the golden generator's random numbers: counter-based SplitMix64.
 *
 * Every random value of a case is a pure function of (seed, stream, n), so
 * any element can be computed alone: generation gives the same bytes with
 * any number of threads, and a numpy user can re-create a case with a few
 * vectorised uint64 operations (docs/golden-format.md, "PRNG", writes the
 * algorithm out in full).  SplitMix64 is Steele, Lea and Flood's generator
 * (OOPSLA 2014), the one Java's SplittableRandom uses.
 */
#ifndef MOEPERM_GOLDEN_PRNG_H
#define MOEPERM_GOLDEN_PRNG_H

#include <stdint.h>

#define PRNG_GAMMA UINT64_C(0x9E3779B97F4A7C15)

/* The SplitMix64 output function (a bijection on 64-bit integers). */
static inline uint64_t prng_mix64(uint64_t z)
{
    z = (z ^ (z >> 30)) * UINT64_C(0xBF58476D1CE4E5B9);
    z = (z ^ (z >> 27)) * UINT64_C(0x94D049BB133111EB);
    return z ^ (z >> 31);
}

/* The key of one stream of a case: the stream-th output of SplitMix64
 * seeded with seed.  Streams (enum below) separate the uses of randomness,
 * so adding a use never shifts the numbers of another. */
static inline uint64_t prng_stream_key(uint64_t seed, uint64_t stream)
{
    return prng_mix64(seed + (stream + 1) * PRNG_GAMMA);
}

/* Draw n (0-based) of the stream with key: the n-th output of SplitMix64
 * seeded with key. */
static inline uint64_t prng_draw(uint64_t key, uint64_t n)
{
    return prng_mix64(key + (n + 1) * PRNG_GAMMA);
}

/* An integer uniform in [0, bound), bound <= 2^32, from one draw: the
 * high 32 bits times bound, shifted down 32 (Lemire's multiply without
 * rejection).  No loop keeps it counter-based, the bias (under
 * bound / 2^32) is irrelevant for test data, and numpy computes it in
 * uint64 without a 128-bit type. */
static inline uint64_t prng_below(uint64_t draw, uint64_t bound)
{
    return ((draw >> 32) * bound) >> 32;
}

enum prng_stream {
    PRNG_STREAM_VALUES = 0,  /* element values */
    PRNG_STREAM_ROUTING = 1, /* expert choice per token */
    PRNG_STREAM_PERMUTATION = 2, /* --routing random: Fisher-Yates swaps */
    PRNG_STREAM_PICK = 3, /* adversarial kinds: which slots of a (token, column) */
    PRNG_STREAM_PROBS = 4, /* probs */
    PRNG_STREAM_GRAD = 5,  /* unpermuted_tokens_grad */
    PRNG_STREAM_SLOT = 6,  /* coordinated kinds: one draw per slot, shared by probs and rows */
    PRNG_STREAM_ROWS = 7   /* the repeats and sparse routings (draw i for slot i) and the
                            * unread entries past T*K (draw T*K + j for entry j of them) */
};

#endif

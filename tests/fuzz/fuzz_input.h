/*
 * fuzz_input.h - turns a libFuzzer input into a stream of small choices.
 *
 * Each target reads its decisions (shape, layout, which argument to break)
 * from the front of the input one byte at a time, so that libFuzzer's
 * mutations map onto meaningful changes of the call; an exhausted input
 * reads as zeros, which always means "the plain, valid choice".
 */
#ifndef MOEPERM_FUZZ_INPUT_H
#define MOEPERM_FUZZ_INPUT_H

#include <stddef.h>
#include <stdint.h>

typedef struct fuzz_input {
    const uint8_t *data;
    size_t size;
} fuzz_input;

static inline uint8_t take8(fuzz_input *in)
{
    if (in->size == 0)
        return 0;
    in->size--;
    return *in->data++;
}

static inline uint16_t take16(fuzz_input *in)
{
    uint16_t hi = take8(in);
    return (uint16_t)(hi << 8 | take8(in));
}

static inline uint64_t take64(fuzz_input *in)
{
    uint64_t v = 0;
    for (int i = 0; i < 8; i++)
        v = v << 8 | take8(in);
    return v;
}

#endif

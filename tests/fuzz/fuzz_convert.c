/*
 * fuzz_convert.c - libFuzzer target for the conversions.
 *
 * The first byte picks a source and a destination dtype (now and then one
 * the library does not convert); the rest of the input is the source
 * array, raw bits.  The target checks, bit for bit and NaNs included (the
 * header fixes their bits), that moeperm_convert() and the four scalar
 * functions agree with tests/support/naive.c's double-precision model, and that a
 * refused conversion leaves dst untouched.  Buffers are allocated to their
 * exact size so AddressSanitizer sees any overrun.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <moeperm/moeperm.h>

#include "naive.h"

#define CHECK(cond, ...)                                                                     \
    do {                                                                                     \
        if (!(cond)) {                                                                       \
            fprintf(stderr, "fuzz_convert: %s failed: ", #cond);                             \
            fprintf(stderr, __VA_ARGS__);                                                    \
            fprintf(stderr, "\n");                                                           \
            abort();                                                                         \
        }                                                                                    \
    } while (0)

/* The model's value of element i of src, widened to float bits. */
static uint32_t naive_widen(moeperm_dtype dtype, const unsigned char *src, size_t i)
{
    if (dtype == MOEPERM_FLOAT) {
        uint32_t bits;
        memcpy(&bits, src + 4 * i, 4);
        return bits;
    }
    uint16_t h;
    memcpy(&h, src + 2 * i, 2);
    return naive_bits(dtype == MOEPERM_BF16 ? naive_bf16_to_float(h) : naive_fp16_to_float(h));
}

static uint32_t naive_narrow(moeperm_dtype dtype, uint32_t bits)
{
    float value = naive_float(bits);
    if (dtype == MOEPERM_FLOAT)
        return bits;
    return dtype == MOEPERM_BF16 ? naive_float_to_bf16(value) : naive_float_to_fp16(value);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    static const moeperm_dtype dtypes[4] = {MOEPERM_FLOAT, MOEPERM_FLOAT16, MOEPERM_BF16,
                                            MOEPERM_INT32};
    if (size == 0)
        return 0;
    moeperm_dtype sd = dtypes[data[0] & 3], dd = dtypes[data[0] >> 2 & 3];
    data++;
    size--;

    /* The scalar functions over every 16-bit and 32-bit window. */
    for (size_t i = 0; i + 2 <= size; i += 2) {
        uint16_t h;
        memcpy(&h, data + i, 2);
        CHECK(naive_bits(moeperm_bf16_to_float(h)) == naive_bits(naive_bf16_to_float(h)),
              "bf16 %04x widens wrong", h);
        CHECK(naive_bits(moeperm_fp16_to_float(h)) == naive_bits(naive_fp16_to_float(h)),
              "fp16 %04x widens wrong", h);
    }
    for (size_t i = 0; i + 4 <= size; i += 4) {
        uint32_t bits;
        memcpy(&bits, data + i, 4);
        float value = naive_float(bits);
        CHECK(moeperm_float_to_bf16(value) == naive_float_to_bf16(value),
              "float %08x narrows to bf16 %04x, model %04x", bits, moeperm_float_to_bf16(value),
              naive_float_to_bf16(value));
        CHECK(moeperm_float_to_fp16(value) == naive_float_to_fp16(value),
              "float %08x narrows to fp16 %04x, model %04x", bits, moeperm_float_to_fp16(value),
              naive_float_to_fp16(value));
    }

    /* The array conversion, on exactly sized copies. */
    size_t ssize = sd == MOEPERM_FLOAT || sd == MOEPERM_INT32 ? 4 : 2;
    size_t dsize = dd == MOEPERM_FLOAT || dd == MOEPERM_INT32 ? 4 : 2;
    size_t n = size / ssize;
    unsigned char *src = malloc(n * ssize + 1), *dst = malloc(n * dsize + 1),
                  *before = malloc(n * dsize + 1);
    if (!src || !dst || !before)
        abort();
    memcpy(src, data, n * ssize);
    memset(dst, 0xa5, n * dsize);
    memcpy(before, dst, n * dsize);
    moeperm_status status = moeperm_convert(n ? src : NULL, sd, n ? dst : NULL, dd, n);
    if (sd == MOEPERM_INT32 || dd == MOEPERM_INT32) {
        CHECK(status == MOEPERM_ERR_PARAM_INVALID, "int32 conversion answered %s",
              moeperm_status_name(status));
        CHECK(memcmp(before, dst, n * dsize) == 0, "a refused conversion wrote dst");
    } else {
        CHECK(status == MOEPERM_SUCCESS, "convert %d -> %d of %zu answered %s", (int)sd, (int)dd,
              n, moeperm_status_name(status));
        for (size_t i = 0; i < n; i++) {
            uint32_t want = naive_narrow(dd, naive_widen(sd, src, i)), got = 0;
            /* Same dtype is a copy: the bits, NaN payloads and all. */
            if (sd == dd)
                want = dsize == 4 ? naive_widen(MOEPERM_FLOAT, src, i)
                                  : (uint32_t)(src[2 * i] | src[2 * i + 1] << 8);
            if (dsize == 4)
                memcpy(&got, dst + 4 * i, 4);
            else
                got = (uint32_t)(dst[2 * i] | dst[2 * i + 1] << 8);
            CHECK(got == want, "convert %d -> %d element %zu: %08x, model %08x", (int)sd, (int)dd,
                  i, got, want);
        }
    }
    free(src);
    free(dst);
    free(before);
    return 0;
}

/*
 * convert.c - the public conversion functions: thin wrappers over fp.h, so
 * that the library, its kernels and its users share one definition of every
 * rounding.
 */
#include <string.h>

#include "core/fp.h"
#include "core/internal.h"

float moeperm_bf16_to_float(uint16_t bits)
{
    return fp_bf16_to_float(bits);
}

uint16_t moeperm_float_to_bf16(float value)
{
    return fp_float_to_bf16(value);
}

float moeperm_fp16_to_float(uint16_t bits)
{
    return fp_fp16_to_float(bits);
}

uint16_t moeperm_float_to_fp16(float value)
{
    return fp_float_to_fp16(value);
}

static float load_float(const void *src, moeperm_dtype dtype, size_t i)
{
    switch (dtype) {
    case MOEPERM_FLOAT16:
        return fp_fp16_to_float(((const uint16_t *)src)[i]);
    case MOEPERM_BF16:
        return fp_bf16_to_float(((const uint16_t *)src)[i]);
    default:
        return ((const float *)src)[i];
    }
}

static bool is_float_dtype(moeperm_dtype dtype)
{
    return dtype == MOEPERM_FLOAT || dtype == MOEPERM_FLOAT16 || dtype == MOEPERM_BF16;
}

moeperm_status moeperm_convert(const void *src, moeperm_dtype src_dtype, void *dst,
                               moeperm_dtype dst_dtype, size_t n)
{
    if (!is_float_dtype(src_dtype))
        return moeperm_fail(MOEPERM_ERR_PARAM_INVALID,
                            "src_dtype %d is not FLOAT (0), FLOAT16 (1) or BF16 (27)",
                            (int)src_dtype);
    if (!is_float_dtype(dst_dtype))
        return moeperm_fail(MOEPERM_ERR_PARAM_INVALID,
                            "dst_dtype %d is not FLOAT (0), FLOAT16 (1) or BF16 (27)",
                            (int)dst_dtype);
    if (n == 0)
        return MOEPERM_SUCCESS;
    if (!src)
        return moeperm_fail(MOEPERM_ERR_PARAM_NULLPTR, "src is NULL with n = %zu", n);
    if (!dst)
        return moeperm_fail(MOEPERM_ERR_PARAM_NULLPTR, "dst is NULL with n = %zu", n);

    if (src_dtype == dst_dtype) {
        memcpy(dst, src, n * moeperm_dtype_size(src_dtype));
        return MOEPERM_SUCCESS;
    }
    switch (dst_dtype) {
    case MOEPERM_FLOAT:
        for (size_t i = 0; i < n; i++)
            ((float *)dst)[i] = load_float(src, src_dtype, i);
        break;
    case MOEPERM_FLOAT16:
        for (size_t i = 0; i < n; i++)
            ((uint16_t *)dst)[i] = fp_float_to_fp16(load_float(src, src_dtype, i));
        break;
    default:
        for (size_t i = 0; i < n; i++)
            ((uint16_t *)dst)[i] = fp_float_to_bf16(load_float(src, src_dtype, i));
        break;
    }
    return MOEPERM_SUCCESS;
}

/*
 * x86/isa_template.h - every vector loop of libmoeperm, for one
 * instruction set: included once by avx2.c after vec_avx2.h and once by
 * avx512.c after vec_avx512.h, it compiles the templates over that set's
 * primitives and fills the set's table of kernels (x86.h).
 *
 * The primitives define SUFFIX (_avx2, _avx512: the table's name), ISA_NAME
 * (the path's name, "x86-avx2", "x86-avx512"),
 * ATTRIBUTES (the target attribute every function gets), vec_t, VL,
 * USE_MASKING and, with masking, mask_t; this file undefines them at the
 * end.
 */

#include <string.h>

#include "unpermute_grad/model.h"
#include "x86/x86.h"

#define MOEPERM_CONCAT_(a, b) a##b
#define MOEPERM_CONCAT(a, b) MOEPERM_CONCAT_(a, b)
#define ADD_SUFFIX(name) MOEPERM_CONCAT(name, SUFFIX)

/* Element j of a row of elements of `size` bytes. */
static MOEPERM_FORCE_INLINE const char *at(const void *row, int64_t j, int64_t size)
{
    return (const char *)row + j * size;
}

/* One column's x * p, x the first operand as in vscale(). */
static MOEPERM_FORCE_INLINE ATTRIBUTES float scale_one(float x, float p)
{
    float product;
    __asm__("vmulss %2, %1, %0" : "=x"(product) : "x"(x), "xm"(p));
    return product;
}

#include "x86/copy_template.h"
#include "x86/permute_grad_template.h"
#include "x86/unpermute_grad_template.h"

#define EXACT_LANES (VL / 2)
#include "x86/exact_template.h"
#undef EXACT_LANES

const moeperm_x86_kernels ADD_SUFFIX(moeperm_x86) = {
    .name = ISA_NAME,
    .segment = {segment_f32, segment_f16, segment_bf16},
    .scaled_segment = {scaled_segment_f32, scaled_segment_f16, scaled_segment_bf16},
    .ug_range = unpermute_grad_range,
    .ug_exact_levels = ADD_SUFFIX(moeperm_ug_exact_levels),
    .ug_exact_widen = ADD_SUFFIX(moeperm_ug_exact_widen),
    .stream_copy = stream_copy,
    .fence = fence,
    .bf16_to_float = bf16_to_float,
    .bf16_columns_to_float = bf16_columns_to_float,
    .fp16_to_float = fp16_to_float,
    .float_to_bf16 = float_to_bf16,
    .float_to_bf16_columns = float_to_bf16_columns,
    .float_to_fp16 = float_to_fp16,
};

#undef MOEPERM_CONCAT_
#undef MOEPERM_CONCAT
#undef ADD_SUFFIX
#undef SUFFIX
#undef ISA_NAME
#undef ATTRIBUTES
#undef vec_t
#undef VL
#undef USE_MASKING
#undef mask_t
#undef STREAM_ALIGNED

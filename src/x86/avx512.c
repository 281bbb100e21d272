/*
 * x86/avx512.c - every vector loop of libmoeperm in AVX-512 F, BW and VL: the
 * templates of isa_template.h over the primitives of vec_avx512.h, into the
 * table moeperm_x86_avx512 (x86.h).
 */
#include "core/kernel.h"

#ifdef MOEPERM_HAVE_X86_PATH

#include "x86/vec_avx512.h"

#include "x86/isa_template.h"

#endif

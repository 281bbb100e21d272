/*
 * x86/avx2.c - every vector loop of libmoeperm in AVX2 + F16C: the
 * templates of isa_template.h over the primitives of vec_avx2.h, into the
 * table moeperm_x86_avx2 (x86.h).
 */
#include "core/kernel.h"

#ifdef MOEPERM_HAVE_X86_PATH

#include "x86/vec_avx2.h"

#include "x86/isa_template.h"

#endif

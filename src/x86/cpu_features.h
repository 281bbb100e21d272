/*
 * x86/cpu_features.h - which of the x86 fast paths this CPU runs.
 */
#ifndef MOEPERM_X86_CPU_FEATURES_H
#define MOEPERM_X86_CPU_FEATURES_H

#include <stdbool.h>

/* Whether this CPU (and its OS) runs AVX2 and F16C; and AVX-512 F, BW, DQ
 * and VL too.  Asked once, then cached; thread safe. */
bool moeperm_x86_available(void);
bool moeperm_x86_avx512_available(void);

#endif

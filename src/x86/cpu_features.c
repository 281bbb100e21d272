/*
 * x86/cpu_features.c - CPU detection for the x86 fast paths.
 *
 * The instruction sets are asked once per process: CPUID traps to the
 * hypervisor in a virtual machine (microseconds), and the kernel asks
 * before every run.
 */
#include "core/kernel.h"

#ifdef MOEPERM_HAVE_X86_PATH

#include <cpuid.h>
#include <stdatomic.h>

enum { KNOWN = 1, AVX2_F16C = 2, AVX512_F_BW_DQ_VL = 4 };

/* 0 = not yet asked, then KNOWN and the sets this CPU has. */
static atomic_int x86_features;

static int features(void)
{
    int known = atomic_load_explicit(&x86_features, memory_order_relaxed);
    if (known)
        return known;
    /* F16C through CPUID.1:ECX (bit_F16C): clang 14, the fuzz build's
     * compiler, does not know __builtin_cpu_supports("f16c").  "avx2" and
     * "avx512f" also check that the OS saves the YMM / ZMM registers, which
     * F16C needs too. */
    unsigned int eax, ebx, ecx, edx;
    __builtin_cpu_init();
    bool avx2 = __builtin_cpu_supports("avx2") && __get_cpuid(1, &eax, &ebx, &ecx, &edx) &&
                (ecx & bit_F16C) != 0;
    /* DQ for the golden generator's row loops (its 64-bit multiplies);
     * every CPU with AVX-512 BW and VL has it. */
    bool avx512 = avx2 && __builtin_cpu_supports("avx512f") &&
                  __builtin_cpu_supports("avx512bw") && __builtin_cpu_supports("avx512dq") &&
                  __builtin_cpu_supports("avx512vl");
    known = KNOWN | (avx2 ? AVX2_F16C : 0) | (avx512 ? AVX512_F_BW_DQ_VL : 0);
    atomic_store_explicit(&x86_features, known, memory_order_relaxed);
    return known;
}

bool moeperm_x86_available(void)
{
    return (features() & AVX2_F16C) != 0;
}

bool moeperm_x86_avx512_available(void)
{
    return (features() & AVX512_F_BW_DQ_VL) != 0;
}

#endif

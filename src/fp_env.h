/*
 * fp_env.h - the floating-point environment an operator's threads compute
 * in: round to nearest, subnormals kept, exceptions masked, whatever the
 * caller set.  A framework may round upward, flush subnormals (MXCSR
 * FTZ/DAZ) or unmask exceptions on its thread, and OpenMP workers keep the
 * environment of the thread that created them, so every thread that runs
 * part of an operator enters this environment and leaves it restoring the
 * caller's, adding the exception flags the run raised.  That is MXCSR on
 * x86; elsewhere only the rounding mode, which is all C11's <fenv.h> can
 * reset portably (docs/arithmetic.md).  The same rule as permute_grad.c.
 */
#ifndef MOEPERM_FP_ENV_H
#define MOEPERM_FP_ENV_H

#if defined(__x86_64__) || (defined(__i386__) && defined(__SSE2__))
#include <xmmintrin.h>

typedef unsigned int moeperm_fp_env;

static inline moeperm_fp_env moeperm_fp_env_enter(void)
{
    moeperm_fp_env saved = _mm_getcsr();
    _mm_setcsr(0x1f80u | (saved & 0x3fu));
    return saved;
}

static inline void moeperm_fp_env_leave(moeperm_fp_env saved)
{
    _mm_setcsr(saved | (_mm_getcsr() & 0x3fu));
}
#else
#include <fenv.h>

typedef int moeperm_fp_env;

static inline moeperm_fp_env moeperm_fp_env_enter(void)
{
    moeperm_fp_env saved = fegetround();
    fesetround(FE_TONEAREST);
    return saved;
}

static inline void moeperm_fp_env_leave(moeperm_fp_env saved)
{
    fesetround(saved);
}
#endif

#endif

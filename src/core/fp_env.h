/*
 * fp_env.h - the floating-point environment the operators' arithmetic runs
 * in, whatever the caller's.
 *
 * The additions and multiplications of the operators are IEEE binary32
 * operations rounded to nearest with subnormals kept, whatever the caller's
 * floating-point environment: a framework may round upward, flush
 * subnormals (MXCSR FTZ/DAZ) or unmask exceptions on its thread, and OpenMP
 * workers keep the environment of the thread that created them.  Every
 * thread that runs arithmetic therefore sets the default environment (all
 * exceptions masked, round to nearest, no flushing) for the duration, then
 * restores the caller's, adding the exception flags the run raised.  That
 * is MXCSR on x86; elsewhere only the rounding mode, which is all C11's
 * <fenv.h> can reset portably (an AArch64 caller's FPCR.FZ stays in effect:
 * docs/arithmetic.md).
 */
#ifndef MOEPERM_FP_ENV_H
#define MOEPERM_FP_ENV_H

#if defined(__x86_64__) || (defined(__i386__) && defined(__SSE2__))
#include <xmmintrin.h>
#define MOEPERM_HAVE_MXCSR 1
#else
#include <fenv.h>
#endif

#ifdef MOEPERM_HAVE_MXCSR
typedef unsigned int fp_env;
static inline fp_env fp_env_enter(void)
{
    fp_env saved = _mm_getcsr();
    _mm_setcsr(0x1f80u | (saved & 0x3fu));
    return saved;
}
static inline void fp_env_leave(fp_env saved)
{
    _mm_setcsr(saved | (_mm_getcsr() & 0x3fu));
}
#else
typedef int fp_env;
static inline fp_env fp_env_enter(void)
{
    fp_env saved = fegetround();
    fesetround(FE_TONEAREST);
    return saved;
}
static inline void fp_env_leave(fp_env saved)
{
    fesetround(saved);
}
#endif

#endif

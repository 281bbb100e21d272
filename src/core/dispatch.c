/*
 * dispatch.c - the instruction set and the thread count of a run
 * (dispatch.h says what each rule is for).
 */
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#ifdef _OPENMP
#include <omp.h>
#endif

#include "core/dispatch.h"
#include "core/internal.h"

/* Below this many bytes per thread, waking another thread risks more than
 * it saves: a wake-up is tens of microseconds on an idle machine but a
 * scheduler time slice (milliseconds) on a busy one, while 16 MiB keep a
 * core busy for about a millisecond (`moeperm bench`, docs/performance.md). */
#define BYTES_PER_THREAD (INT64_C(16) << 20)

int moeperm_threads_for_bytes(int threads, double bytes)
{
    int team = threads;
#ifdef _OPENMP
    if (team <= 0)
        team = omp_get_max_threads();
#endif
    if (team <= 1)
        return 1;
    double useful = bytes / (double)BYTES_PER_THREAD;
    if (useful < team)
        team = useful < 1 ? 1 : (int)useful;
    return team;
}

bool moeperm_isa_supported(moeperm_isa isa)
{
    switch (isa) {
    case MOEPERM_ISA_AUTO:
    case MOEPERM_ISA_PORTABLE:
        return true;
#ifdef MOEPERM_HAVE_X86_PATH
    case MOEPERM_ISA_X86_AVX2:
        return moeperm_x86_available();
    case MOEPERM_ISA_X86_AVX512:
        return moeperm_x86_avx512_available();
#endif
    default:
        return false;
    }
}

static moeperm_isa detect_best(void)
{
    const char *force = getenv("MOEPERM_FORCE_PORTABLE");
    if (force && *force && strcmp(force, "0") != 0)
        return MOEPERM_ISA_PORTABLE;
    if (moeperm_isa_supported(MOEPERM_ISA_X86_AVX512))
        return MOEPERM_ISA_X86_AVX512;
    if (moeperm_isa_supported(MOEPERM_ISA_X86_AVX2))
        return MOEPERM_ISA_X86_AVX2;
    return MOEPERM_ISA_PORTABLE;
}

/* Read once: the environment and the CPU do not change under a run. */
static atomic_int best_isa = -1;
static atomic_int chosen_isa = MOEPERM_ISA_AUTO;

moeperm_isa moeperm_isa_best(void)
{
    int isa = atomic_load_explicit(&best_isa, memory_order_relaxed);
    if (isa < 0) {
        isa = (int)detect_best();
        atomic_store_explicit(&best_isa, isa, memory_order_relaxed);
    }
    return (moeperm_isa)isa;
}

moeperm_isa moeperm_isa_resolve(moeperm_isa isa)
{
    if (isa == MOEPERM_ISA_AUTO)
        isa = (moeperm_isa)atomic_load_explicit(&chosen_isa, memory_order_relaxed);
    if (isa == MOEPERM_ISA_AUTO)
        isa = moeperm_isa_best();
    if (isa != MOEPERM_ISA_AUTO && moeperm_isa_supported(isa))
        return isa;
    return MOEPERM_ISA_PORTABLE;
}

/* ---- the public API (moeperm.h) ------------------------------------------ */

moeperm_isa moeperm_isa_in_use(void)
{
    return moeperm_isa_resolve(MOEPERM_ISA_AUTO);
}

const char *moeperm_isa_name(moeperm_isa isa)
{
    switch (isa) {
    case MOEPERM_ISA_AUTO:
        return "auto";
    case MOEPERM_ISA_PORTABLE:
        return "portable";
    case MOEPERM_ISA_X86_AVX2:
        return "x86-avx2";
    case MOEPERM_ISA_X86_AVX512:
        return "x86-avx512";
    }
    return "unknown";
}

moeperm_status moeperm_isa_choose(moeperm_isa isa)
{
    if ((int)isa < MOEPERM_ISA_AUTO || (int)isa > MOEPERM_ISA_X86_AVX512)
        return moeperm_fail(MOEPERM_ERR_PARAM_INVALID,
                            "isa = %d is not an instruction set (0 auto, 1 portable, "
                            "2 x86-avx2, 3 x86-avx512)",
                            (int)isa);
    if (!moeperm_isa_supported(isa))
        return moeperm_fail(MOEPERM_ERR_PARAM_INVALID,
                            "isa = %d (%s) needs %s, which this CPU or this build lacks",
                            (int)isa, moeperm_isa_name(isa),
                            isa == MOEPERM_ISA_X86_AVX2 ? "AVX2 and F16C"
                                                        : "AVX-512 F, BW and VL");
    atomic_store_explicit(&chosen_isa, (int)isa, memory_order_relaxed);
    return MOEPERM_SUCCESS;
}

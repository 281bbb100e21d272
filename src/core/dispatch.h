/*
 * dispatch.h - how a run is carried out, decided in one place: which
 * instruction set the vector code of every operator uses, and how many
 * threads a run wakes.  Neither changes a bit of any result: every
 * instruction set is held to the portable loops bit for bit
 * (tests/core/test_fast_paths.c), and every output element is computed by
 * one thread in a fixed order.
 *
 * The public face is moeperm_isa_in_use(), moeperm_isa_name() and
 * moeperm_isa_choose() (moeperm.h).  MOEPERM_FORCE_PORTABLE in the
 * environment (any value but empty or "0") is read here and nowhere else,
 * once per process, and makes MOEPERM_ISA_AUTO mean the portable loops.
 * The CPU is asked through src/x86/cpu_features.c, whose only caller this
 * is.
 */
#ifndef MOEPERM_DISPATCH_H
#define MOEPERM_DISPATCH_H

#include <stdbool.h>

#include <moeperm/moeperm.h>

/* The x86 vector code is built on x86 with a GNU C compiler (its
 * intrinsics and target attributes). */
#if (defined(__x86_64__) || defined(__i386__)) && defined(__GNUC__)
#define MOEPERM_HAVE_X86_PATH 1
#include "x86/cpu_features.h"
#endif

/* The instruction set MOEPERM_ISA_AUTO means when nothing was chosen: the
 * best this CPU runs, or MOEPERM_ISA_PORTABLE when MOEPERM_FORCE_PORTABLE
 * is set.  Asked once, then cached; thread safe. */
moeperm_isa moeperm_isa_best(void);

/* Whether this CPU (and its OS) runs isa; AUTO and PORTABLE always. */
bool moeperm_isa_supported(moeperm_isa isa);

/* The instruction set a run asking for isa uses: AUTO becomes the one
 * moeperm_isa_choose() chose or else moeperm_isa_best(), and one this CPU
 * lacks becomes MOEPERM_ISA_PORTABLE.  Never returns AUTO. */
moeperm_isa moeperm_isa_resolve(moeperm_isa isa);

/* The number of threads a run moving `bytes` bytes uses: the request
 * (0 = the OpenMP default), cut down so that every thread gets enough
 * bytes to pay for waking it. */
int moeperm_threads_for_bytes(int threads, double bytes);

#endif

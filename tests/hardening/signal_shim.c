/*
 * signal_shim.c - an LD_PRELOAD library that sends the process a signal at
 * the worst moment of an atomic write: just before its Nth rename(), when
 * the temporary output is complete and not yet in place.
 *
 *   SHIM_SIGNAL_AT_RENAME=N   which rename() call (1 = the first)
 *   SHIM_SIGNAL=NAME          INT (default), TERM or HUP
 *
 * Timing a kill from outside can only hope to land in that window; this
 * lands in it every time, so the fault tests are deterministic.  It also
 * makes renames fail as on a full disk (ENOSPC, nothing moved):
 *
 *   SHIM_FAIL_RENAME_AT=N     the Nth rename() only
 *   SHIM_FAIL_RENAME_FROM=N   the Nth and every later one
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int rename(const char *from, const char *to)
{
    static int calls;
    int (*real)(const char *, const char *);
    /* POSIX's way to store dlsym()'s object pointer in a function pointer. */
    *(void **)&real = dlsym(RTLD_NEXT, "rename");
    const char *at = getenv("SHIM_SIGNAL_AT_RENAME");
    const char *fail_at = getenv("SHIM_FAIL_RENAME_AT");
    const char *fail_from = getenv("SHIM_FAIL_RENAME_FROM");
    calls++;
    if ((fail_at && calls == atoi(fail_at)) || (fail_from && calls >= atoi(fail_from))) {
        errno = ENOSPC;
        return -1;
    }
    if (at && calls == atoi(at)) {
        const char *name = getenv("SHIM_SIGNAL");
        int sig = !name || strcmp(name, "INT") == 0 ? SIGINT
                  : strcmp(name, "TERM") == 0       ? SIGTERM
                                                    : SIGHUP;
        raise(sig);
    }
    return real(from, to);
}

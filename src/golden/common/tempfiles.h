/*
 * tempfiles.h - cleanup of temporaries when a signal ends the process.
 *
 * An output appears only by rename(), so a process killed mid-write never
 * leaves a torn output; what it can leave is its temporary, or (for a
 * directory replaced with --force) the old one under a temporary name.
 * golden_temp_track() registers such a path; on the first call it
 * installs, for every signal whose default action ends the process (all
 * but SIGKILL and SIGSTOP, which cannot be caught: SIGINT, SIGTERM, SIGHUP,
 * SIGQUIT, SIGPIPE, SIGALRM, SIGUSR1, SIGUSR2, SIGXCPU, SIGVTALRM, SIGPROF,
 * the real-time signals, the fault signals ...) whose disposition is still
 * the default, a handler that removes every tracked temporary, moves a
 * parked directory back where it was (unless a new one already took its
 * place), prints one line on stderr naming the signal when it removed
 * anything, and re-raises the signal, so the process still ends by it
 * (shell status 128+N).  A signal the caller ignores or handles is left
 * alone.  It also ignores SIGXFSZ, so that a write past RLIMIT_FSIZE fails
 * with EFBIG and the ordinary error path reports it and cleans up, instead
 * of the process dying silently.
 *
 * kind: GOLDEN_TEMP_FILE (unlinked), GOLDEN_TEMP_DIR (a directory holding
 * nothing but files named in files[0..file_count): those unlinked, then
 * the directory removed) or GOLDEN_TEMP_PARKED (a directory renamed back
 * to target, or removed like a GOLDEN_TEMP_DIR when target exists again).
 * files must stay valid while the slot is tracked (a static list: the
 * handler may not allocate).  Returns a slot for golden_temp_untrack(), or
 * -1 when a path is too long or all slots are taken (the write still
 * works; only the cleanup on a signal is lost).  Not thread safe: outputs
 * are written from one thread.
 */
#ifndef MOEPERM_GOLDEN_COMMON_TEMPFILES_H
#define MOEPERM_GOLDEN_COMMON_TEMPFILES_H

#include <stddef.h>

enum { GOLDEN_TEMP_FILE = 1, GOLDEN_TEMP_DIR = 2, GOLDEN_TEMP_PARKED = 3 };
int golden_temp_track(int kind, const char *path, const char *target, const char *const *files,
                      size_t file_count);
/* Forgets a slot (after a rename or removal made it moot); -1 is a no-op. */
void golden_temp_untrack(int slot);

#endif

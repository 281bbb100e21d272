/*
 * registry.c - which objects and which blocks of device memory are alive.
 *
 * A device runtime knows every handle it gave out; a program that passes a
 * stale or foreign one gets an error there, or a fault on the device.  The
 * host runtime keeps the same knowledge so that such a program gets a
 * status and a sentence instead of a crash in the host process, so that
 * the second phase can check that every tensor lies in device memory, and
 * so that the tests can count what a program left alive.
 *
 * Two balanced trees of libc's tsearch(), under one mutex: objects by
 * address, and blocks of memory ordered as disjoint intervals, which makes
 * "the block holding this address" one lookup.
 *
 * Handles are plain pointers, as the vendor's are, so an address is all
 * that tells one object from another.  Were a freed object's memory handed
 * straight back to the C library, the next object of its kind would often
 * get the same address, and a stale handle would name it: a plan that ran
 * would run (and use up) the next plan.  So freed objects wait in a
 * quarantine, a FIFO of the last HOST_QUARANTINE freed of each kind, and
 * their memory goes back only when HOST_QUARANTINE more of that kind have
 * been freed after them, at aclFinalize(), or when the library is unloaded
 * or the process exits.  Until then no new object can be at that address,
 * and the handle is refused.  Device memory is not held back: a block may
 * be gigabytes, and holding freed ones would change how much memory a
 * program can have.
 */
#define _XOPEN_SOURCE 700 /* tsearch() and friends */

#include <pthread.h>
#include <search.h>
#include <stdlib.h>
#include <string.h>

#include "internal.h"

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static void *objects; /* tree of objects, keyed by address */
static void *blocks;  /* tree of struct block, keyed by interval */
static host_live live;

/* Per kind, a ring of freed objects: quarantine[k][ring_next[k]] is the
 * oldest when the ring is full, NULL before. */
static void *quarantine[HOST_KINDS][HOST_QUARANTINE];
static size_t ring_next[HOST_KINDS];

struct block {
    const char *start;
    size_t size;
};

static int compare_address(const void *a, const void *b)
{
    uintptr_t x = (uintptr_t)a, y = (uintptr_t)b;
    return x < y ? -1 : x > y;
}

/* Intervals that do not overlap are ordered; overlapping ones compare
 * equal, so a lookup with [p, p + n) finds the block that p lies in. */
static int compare_interval(const void *a, const void *b)
{
    const struct block *x = a, *y = b;
    if ((uintptr_t)x->start + x->size <= (uintptr_t)y->start)
        return -1;
    if ((uintptr_t)y->start + y->size <= (uintptr_t)x->start)
        return 1;
    return 0;
}

bool registry_add(void *object)
{
    pthread_mutex_lock(&lock);
    bool ok = tsearch(object, &objects, compare_address) != NULL;
    if (ok)
        live.count[*(const host_kind *)object]++;
    pthread_mutex_unlock(&lock);
    return ok;
}

/* The live object at address, or NULL; with the lock held.  Reading the
 * kind of a live object is safe: it is ours. */
static const void *find(const void *object, host_kind kind)
{
    void *const *node = tfind(object, &objects, compare_address);
    if (node == NULL || *(const host_kind *)*node != kind)
        return NULL;
    return *node;
}

bool registry_has(const void *object, host_kind kind)
{
    if (object == NULL)
        return false;
    pthread_mutex_lock(&lock);
    bool found = find(object, kind) != NULL;
    pthread_mutex_unlock(&lock);
    return found;
}

bool registry_take(const void *object, host_kind kind)
{
    if (object == NULL)
        return false;
    pthread_mutex_lock(&lock);
    bool found = find(object, kind) != NULL;
    if (found) {
        tdelete(object, &objects, compare_address);
        live.count[kind]--;
    }
    pthread_mutex_unlock(&lock);
    return found;
}

void registry_retire(void *object, host_kind kind)
{
    pthread_mutex_lock(&lock);
    void *oldest = quarantine[kind][ring_next[kind]];
    quarantine[kind][ring_next[kind]] = object;
    ring_next[kind] = (ring_next[kind] + 1) % HOST_QUARANTINE;
    pthread_mutex_unlock(&lock);
    free(oldest);
}

void registry_release(void)
{
    pthread_mutex_lock(&lock);
    for (int k = 0; k < HOST_KINDS; k++) {
        for (size_t i = 0; i < HOST_QUARANTINE; i++) {
            free(quarantine[k][i]);
            quarantine[k][i] = NULL;
        }
        ring_next[k] = 0;
    }
    pthread_mutex_unlock(&lock);
}

#if defined(__GNUC__)
/* At exit or when the library is unloaded (a destructor rather than
 * atexit(), which would call into an unloaded library): a program that
 * freed all it made then holds nothing of the runtime's, even without
 * aclFinalize(), and leak checkers see nothing left. */
__attribute__((destructor)) static void release_at_exit(void)
{
    registry_release();
}
#endif

bool registry_add_block(void *start, size_t size)
{
    struct block *b = malloc(sizeof *b);
    if (b == NULL)
        return false;
    b->start = start;
    b->size = size;
    pthread_mutex_lock(&lock);
    bool ok = tsearch(b, &blocks, compare_interval) != NULL;
    if (ok) {
        live.count[HOST_MEMORY]++;
        live.bytes += size;
    }
    pthread_mutex_unlock(&lock);
    if (!ok)
        free(b);
    return ok;
}

bool registry_take_block(const void *start, size_t *size)
{
    struct block key = {start, 1};
    struct block *found = NULL;
    pthread_mutex_lock(&lock);
    struct block **node = tfind(&key, &blocks, compare_interval);
    /* An address inside a block is not the block: only its start frees it,
     * as only the address aclrtMalloc returned may be passed to aclrtFree. */
    if (node != NULL && (*node)->start == (const char *)start) {
        found = *node;
        tdelete(found, &blocks, compare_interval);
        live.count[HOST_MEMORY]--;
        live.bytes -= found->size;
    }
    pthread_mutex_unlock(&lock);
    if (found == NULL)
        return false;
    *size = found->size;
    free(found);
    return true;
}

bool registry_holds_span(const void *start, size_t bytes)
{
    struct block key = {start, bytes};
    pthread_mutex_lock(&lock);
    struct block **node = tfind(&key, &blocks, compare_interval);
    bool inside = node != NULL && (uintptr_t)(*node)->start <= (uintptr_t)start &&
                  (uintptr_t)start - (uintptr_t)(*node)->start <= (*node)->size &&
                  bytes <= (*node)->size - ((uintptr_t)start - (uintptr_t)(*node)->start);
    pthread_mutex_unlock(&lock);
    return inside;
}

void host_live_get(host_live *out)
{
    pthread_mutex_lock(&lock);
    *out = live;
    pthread_mutex_unlock(&lock);
}

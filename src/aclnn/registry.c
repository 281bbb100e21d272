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

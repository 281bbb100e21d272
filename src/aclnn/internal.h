/*
 * internal.h - what the files of libmoeperm-aclnn share: the objects the
 * host runtime hands out, the registry that knows which are alive, the
 * per-thread error message, and the chip.
 *
 * The library sits on libmoeperm's public API alone (<moeperm/moeperm.h>);
 * everything here is hidden, and only the vendor's names are exported
 * (docs/aclnn-host.md).
 */
#ifndef MOEPERM_ACLNN_INTERNAL_H
#define MOEPERM_ACLNN_INTERNAL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <moeperm/moeperm.h>

#include "acl/acl.h"
#include "aclnn/aclnn_base.h"
#include "aclnn/opdev/op_errno.h"

#if defined(__GNUC__)
#define HOST_PRINTF(f, a) __attribute__((format(printf, f, a)))
#else
#define HOST_PRINTF(f, a)
#endif

/* The kinds of object a program gets from the runtime.  Every object
 * begins with its kind, so that an address the registry finds can be told
 * apart from an object of another kind. */
typedef enum host_kind {
    HOST_MEMORY = 0, /* aclrtMalloc: counted, not an object with a header */
    HOST_STREAM,
    HOST_TENSOR,
    HOST_INT_ARRAY,
    HOST_EXECUTOR,
    HOST_KINDS
} host_kind;

/* How many freed objects of each kind the registry keeps before their
 * memory goes back to the C library, so that no new object is at a freed
 * object's address until that many more of its kind were freed
 * (registry.c; docs/aclnn-host.md states it). */
#define HOST_QUARANTINE 1024

/* The most dims of a tensor, as for aclTensor and moeperm_tensor. */
#define HOST_MAX_DIMS MOEPERM_MAX_DIMS

struct aclTensor {
    host_kind kind; /* HOST_TENSOR */
    aclDataType dtype;
    aclFormat format;
    uint64_t ndim;
    int64_t dims[HOST_MAX_DIMS];
    int64_t strides[HOST_MAX_DIMS]; /* in elements */
    int64_t offset;                 /* in elements */
    uint64_t storage_ndim;
    int64_t storage_dims[HOST_MAX_DIMS];
    void *data;
};

struct aclIntArray {
    host_kind kind; /* HOST_INT_ARRAY */
    uint64_t size;
    int64_t *values;
};

/* A stream: a handle and nothing more, since work runs at its launch. */
typedef struct host_stream {
    host_kind kind; /* HOST_STREAM */
} host_stream;

/* --- registry.c: the live objects and blocks of device memory ---------- */

/* Adds a new object (which begins with its kind); false when memory for
 * the registry runs out. */
bool registry_add(void *object);
/* Whether object is a live object of kind. */
bool registry_has(const void *object, host_kind kind);
/* Removes a live object of kind: true when it was one (the caller then
 * frees it), false when it was not (nothing changes).  Taking is atomic,
 * so of two threads taking one object only one gets it. */
bool registry_take(const void *object, host_kind kind);
/* Frees an object registry_take() took, once the caller has freed what it
 * points to: into the quarantine, whose oldest object of kind it frees. */
void registry_retire(void *object, host_kind kind);
/* Frees every object in the quarantine (aclFinalize, and at exit). */
void registry_release(void);

/* Adds a block of device memory [start, start + size); false when memory
 * for the registry runs out. */
bool registry_add_block(void *start, size_t size);
/* Removes the block that begins at start; its size in *size.  False when
 * no live block begins there. */
bool registry_take_block(const void *start, size_t *size);
/* Whether [start, start + bytes) lies inside one live block (bytes > 0). */
bool registry_holds_span(const void *start, size_t bytes);

/* What is alive now: objects of each kind, and bytes of device memory
 * (as asked for, before padding).  For the tests, which reach it through
 * the static archive. */
typedef struct host_live {
    uint64_t count[HOST_KINDS];
    uint64_t bytes;
} host_live;
void host_live_get(host_live *live);

/* --- error.c: the message aclGetRecentErrMsg() returns ------------------ */

/* Sets the calling thread's message (formatted); returns nothing. */
void host_error(const char *format, ...) HOST_PRINTF(1, 2);

/* --- chip.c: the chip the runtime presents ------------------------------ */

typedef struct host_chip {
    const char *name; /* as aclrtGetSocName() returns it */
    moeperm_chip chip;
} host_chip;

/* The chip: the Atlas A2 default, or the one MOEPERM_ACLNN_CHIP names.
 * NULL when that variable names no chip the project knows; then *why (if
 * why is not NULL) says so.  Read once per process.  Thread safe. */
const host_chip *host_chip_get(const char **why);

#endif

/*
 * backend.h - the one interface every backend (cpu, npu, any later one)
 * implements, so that `moeperm run` and `moeperm check` have a single loop
 * and the comparator never knows which backend produced the bits.
 *
 * Return values follow the command line's exit codes (interfaces.md §3):
 * BACKEND_OK, BACKEND_BAD_INPUT (the operator refused the case: exit 2) and
 * BACKEND_FAILURE (the runtime or operator failed: exit 3).  Every failure
 * writes one sentence into the caller's err buffer.
 */
#ifndef MOEPERM_BACKEND_H
#define MOEPERM_BACKEND_H

#include <stddef.h>

#include "golden/case.h"

enum { BACKEND_OK = 0, BACKEND_BAD_INPUT = 2, BACKEND_FAILURE = 3 };

typedef struct backend_options {
    int device_id; /* npu: --device N, else MOEPERM_NPU_DEVICE, else 0 */
} backend_options;

typedef struct backend backend; /* a backend's open state */

typedef struct backend_ops {
    const char *name; /* "cpu", "npu" */
    /* Opens the backend once per process (runtime init, device, stream). */
    int (*open)(const backend_options *options, backend **out, char *err, size_t err_len);
    /* Computes c's input_grad into out (tokens_num*hidden_size elements of
     * c->dtype, contiguous).  On failure out may hold anything: callers
     * write files only after success. */
    int (*run_case)(backend *self, const golden_case *c, void *out, char *err, size_t err_len);
    /* Releases everything open() and run_case() acquired.  NULL is a no-op. */
    void (*close)(backend *self);
} backend_ops;

/* The backend called name, or NULL when there is none. */
const backend_ops *backend_find(const char *name);

extern const backend_ops backend_cpu;
extern const backend_ops backend_npu;

#endif

/*
 * backend.h - the one interface every backend (cpu, npu, any later one)
 * implements, so that `moeperm run` and `moeperm check` have a single loop
 * and the judge never knows which backend produced the bits.
 *
 * A backend gets a plain problem: the operator, its attributes and its
 * tensors as host buffers in the operator's argument order.  It knows
 * nothing of case files, manifests or hashes (those are the golden
 * library's, a layer above), so it builds and is tested with libmoeperm's
 * public header alone.
 *
 * Return values follow the command line's exit codes (README): BACKEND_OK,
 * BACKEND_BAD_INPUT (the operator refused the problem: exit 2) and
 * BACKEND_FAILURE (the runtime or operator failed: exit 3).  Every failure
 * writes one sentence into the caller's err buffer.
 */
#ifndef MOEPERM_BACKEND_H
#define MOEPERM_BACKEND_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <moeperm/moeperm.h>

enum { BACKEND_OK = 0, BACKEND_BAD_INPUT = 2, BACKEND_FAILURE = 3 };

/* The most tensors a problem has (MoeTokenUnpermuteGrad: four in, two out). */
#define BACKEND_MAX_TENSORS 8

/* One tensor of a problem: contiguous row-major host memory. */
typedef struct backend_tensor {
    const char *name; /* the operator's name for it, for messages */
    moeperm_dtype dtype;
    uint64_t ndim;
    int64_t shape[MOEPERM_MAX_DIMS];
    void *data;   /* inputs: read; outputs: written by run() */
    size_t bytes; /* of data */
    bool present; /* false for an optional tensor the problem leaves out (probs) */
} backend_tensor;

/*
 * A problem: the operator and what its first phase takes.  inputs and
 * outputs are in the operator's argument order, optional ones (probs,
 * probs_grad) present or not; an output's memory holds what the caller
 * put there, which matters where the operator leaves elements untouched
 * (rows of MoeTokenUnpermuteGrad's permuted_tokens_grad that no slot
 * names): a backend must give those elements back as they were.
 */
typedef struct backend_problem {
    moeperm_op op;
    int64_t top_k;          /* MoeTokenPermuteGrad's num_topk */
    int64_t num_out_tokens; /* MoeTokenPermute */
    bool padded_mode;
    const int64_t *restore_shape; /* MoeTokenUnpermute(Grad): NULL when absent */
    uint64_t restore_shape_len;
    moeperm_chip chip;      /* MoeTokenUnpermuteGrad: the chip the CPU models */
    backend_tensor inputs[BACKEND_MAX_TENSORS];
    size_t input_count;
    backend_tensor outputs[BACKEND_MAX_TENSORS];
    size_t output_count;
} backend_problem;

typedef struct backend_options {
    int device_id; /* npu: --device N, else MOEPERM_NPU_DEVICE, else 0 */
} backend_options;

typedef struct backend backend; /* a backend's open state */

typedef struct backend_ops {
    const char *name; /* "cpu", "npu" */
    /* Opens the backend once per process (runtime init, device, stream). */
    int (*open)(const backend_options *options, backend **out, char *err, size_t err_len);
    /* Computes p's outputs into their buffers.  On failure the outputs may
     * hold anything: callers write files only after success. */
    int (*run)(backend *self, backend_problem *p, char *err, size_t err_len);
    /* Releases everything open() and run() acquired.  NULL is a no-op. */
    void (*close)(backend *self);
    /* The chip whose arithmetic the backend's outputs follow (only
     * MoeTokenUnpermuteGrad's probs_grad depends on it): true with *chip
     * filled when the backend knows it; false when it cannot tell.  Either
     * way *name is the chip's name when the backend has one (a name
     * libmoeperm does not know, when false), else NULL.  The name stays
     * valid until close().  NULL for a backend that
     * computes every case for the case's own chip (cpu). */
    bool (*chip)(const backend *self, moeperm_chip *chip, const char **name);
} backend_ops;

/* The backend called name, or NULL when there is none. */
const backend_ops *backend_find(const char *name);

/* The names of every backend, "cpu, npu", for messages. */
const char *backend_names(void);

/*
 * backend_cpu_call() runs problem p through libmoeperm's public two-phase
 * API (the cpu backend; the npu backend uses its first phase alone, run is
 * false, to refuse on the host what the reference refuses).  Returns the
 * operator's status with moeperm_last_error()'s sentence in err.
 */
moeperm_status backend_cpu_call(const backend_problem *p, bool run, char *err, size_t err_len);

extern const backend_ops backend_cpu;
extern const backend_ops backend_npu;

#endif

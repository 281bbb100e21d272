/*
 * internal.h - what the files of libmoeperm share and the public header
 * does not show: the tensor and executor layouts, error reporting, and the
 * kernel entry points that tests and the benchmark reach through the static
 * archive.
 */
#ifndef MOEPERM_INTERNAL_H
#define MOEPERM_INTERNAL_H

#include <stddef.h>
#include <stdint.h>

#include <moeperm/moeperm.h>

#if defined(__GNUC__)
#define MOEPERM_PRINTF(f, a) __attribute__((format(printf, f, a)))
#else
#define MOEPERM_PRINTF(f, a)
#endif

struct moeperm_tensor {
    moeperm_dtype dtype;
    uint64_t ndim;
    int64_t dims[MOEPERM_MAX_DIMS];
    int64_t strides[MOEPERM_MAX_DIMS]; /* in elements, never negative */
    int64_t offset;                    /* in elements */
    void *data;
};

/* A validated plan: copies of the views, so the caller may destroy its
 * tensor objects between the two phases.  One struct for every operator:
 * op says which, and each operator's file reads only its own fields. */
struct moeperm_executor {
    moeperm_op op; /* which operator planned it: a plan runs only through that operator */
    /* MoeTokenPermuteGrad (permute_grad.c) */
    struct moeperm_tensor grad;    /* permuted_output_grad [R, H] */
    struct moeperm_tensor indices; /* sorted_indices [T*K] */
    struct moeperm_tensor out;     /* input_grad [T, H] */
    int64_t top_k;
};

/* Records a sentence for moeperm_last_error() and returns status, so that a
 * check reads `return moeperm_fail(MOEPERM_ERR_PARAM_INVALID, "...", ...);`. */
moeperm_status moeperm_fail(moeperm_status status, const char *format, ...)
    MOEPERM_PRINTF(2, 3);


/* Every argument check of the first phase (validate.c). */
moeperm_status moeperm_validate(const moeperm_tensor *grad, const moeperm_tensor *indices,
                                int64_t top_k, bool padded_mode, const moeperm_tensor *out);

/* The arithmetic of spec §2 over a validated plan (permute_grad.c), split
 * over threads when threads > 1 (0 = the OpenMP default).  Any index outside
 * [0, R) is skipped, so even indices that changed after validation cannot
 * make it read out of bounds. */
void moeperm_kernel_run(const struct moeperm_executor *plan, int threads);

#endif

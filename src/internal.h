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

/* Which operator planned an executor: a plan runs only through the
 * second phase of the operator that made it. */
typedef enum moeperm_op_kind {
    MOEPERM_OP_PERMUTE_GRAD = 1,
    MOEPERM_OP_PERMUTE = 2,
    MOEPERM_OP_UNPERMUTE = 3,
    MOEPERM_OP_UNPERMUTE_GRAD = 4
} moeperm_op_kind;

/* --- MoeTokenUnpermuteGrad (unpermute_grad.c) ---------------------------
 * Its plan: copies of the six views (probs and probs_grad hold nothing
 * without probs), top_k, and the chip whose tiling probs_grad follows. */
struct moeperm_unpermute_grad_plan {
    struct moeperm_tensor permuted_tokens; /* [R, H] */
    struct moeperm_tensor grad;            /* unpermuted_tokens_grad [N, H] */
    struct moeperm_tensor indices;         /* sorted_indices [N*K] */
    struct moeperm_tensor probs;           /* [N, K] */
    struct moeperm_tensor tokens_grad;     /* permuted_tokens_grad [R, H] */
    struct moeperm_tensor probs_grad;      /* [N, K] */
    bool has_probs;
    int64_t top_k;
    moeperm_chip chip;
};

/* The arithmetic over a validated plan on exactly `threads` threads, or
 * with 0 on the OpenMP default cut down so that every thread has enough
 * bytes to move to pay for waking it; `path` picks the instruction set as for
 * moeperm_kernel_run_path() (a moeperm_kernel_path of kernel.h).  Any index
 * outside [0, R) is a dropped slot, so indices changed after validation
 * cannot make it touch memory outside the views.  Returns false when
 * scratch memory runs out (outputs untouched). */
bool moeperm_unpermute_grad_run(const struct moeperm_unpermute_grad_plan *plan, int threads,
                                int path);
/* --- end of MoeTokenUnpermuteGrad ----------------------------------------- */

/* A validated plan: copies of the views, so the caller may destroy its
 * tensor objects between the two phases.  One struct for every operator:
 * op says which, and each operator's file reads only its own fields. */
struct moeperm_executor {
    moeperm_op_kind op;
    /* MoeTokenPermuteGrad (permute_grad.c) */
    struct moeperm_tensor grad;    /* permuted_output_grad [R, H] */
    struct moeperm_tensor indices; /* sorted_indices [T*K] */
    struct moeperm_tensor out;     /* input_grad [T, H] */
    int64_t top_k;
    /* MoeTokenUnpermuteGrad (unpermute_grad.c) */
    struct moeperm_unpermute_grad_plan unpermute_grad;
};

/* Records a sentence for moeperm_last_error() and returns status, so that a
 * check reads `return moeperm_fail(MOEPERM_ERR_PARAM_INVALID, "...", ...);`. */
moeperm_status moeperm_fail(moeperm_status status, const char *format, ...)
    MOEPERM_PRINTF(2, 3);

/* Bytes per element of dtype, 0 for a dtype the library does not know. */
size_t moeperm_dtype_size(moeperm_dtype dtype);
/* "float32", "float16", "bf16", "int32" (the manifest's names), or "unknown". */
const char *moeperm_dtype_name(moeperm_dtype dtype);

/* Checks of validate.c that every operator's validation shares.  A view's
 * element count (0 when a dim is 0, INT64_MAX when it overflows); the byte
 * range [*lo, *hi) a non-empty view spans from its data pointer; a NULL
 * data pointer under elements; distinct elements of a 2-D view sharing
 * memory; indices that are not a permutation of [0, n) (named as
 * sorted_indices); a dtype that is not FLOAT, FLOAT16 or BF16; ndim. */
int64_t element_count(const moeperm_tensor *t);
moeperm_status byte_span(const moeperm_tensor *t, const char *what, int64_t *lo, int64_t *hi);
moeperm_status check_data(const moeperm_tensor *t, const char *what);
bool overlaps_itself(const moeperm_tensor *out);
moeperm_status check_indices(const moeperm_tensor *indices);
moeperm_status check_float_dtype(const moeperm_tensor *t, const char *what);
moeperm_status check_ndim(const moeperm_tensor *t, const char *what, uint64_t ndim,
                          const char *layout);

/* Every argument check of the first phase (validate.c). */
moeperm_status moeperm_validate(const moeperm_tensor *grad, const moeperm_tensor *indices,
                                int64_t top_k, bool padded_mode, const moeperm_tensor *out);

/* The arithmetic of spec §2 over a validated plan (permute_grad.c), split
 * over threads when threads > 1 (0 = the OpenMP default).  Any index outside
 * [0, R) is skipped, so even indices that changed after validation cannot
 * make it read out of bounds. */
void moeperm_kernel_run(const struct moeperm_executor *plan, int threads);

#endif

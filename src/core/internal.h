/*
 * internal.h - what the files of libmoeperm share and the public header
 * does not show: the tensor and executor layouts, error reporting, and the
 * kernel entry points that tests and the benchmark reach through the static
 * archive.
 */
#ifndef MOEPERM_INTERNAL_H
#define MOEPERM_INTERNAL_H

#include <stdbool.h>
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
 * bytes to move to pay for waking it; `isa` picks the instruction set
 * (moeperm_isa_resolve() of dispatch.h says what AUTO means).  Any index
 * outside [0, R) is a dropped slot, so indices changed after validation
 * cannot make it touch memory outside the views.  Returns false when
 * scratch memory runs out (outputs untouched). */
bool moeperm_unpermute_grad_run(const struct moeperm_unpermute_grad_plan *plan, int threads,
                                moeperm_isa isa);
/* --- end of MoeTokenUnpermuteGrad ----------------------------------------- */

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

    /* MoeTokenPermute (permute.c) */
    struct {
        struct moeperm_tensor tokens;         /* tokens [N, H] */
        struct moeperm_tensor indices;        /* expert ids [N, K] or [N] */
        struct moeperm_tensor permute_tokens; /* permute_tokens_out [num_out_tokens, H] */
        struct moeperm_tensor sorted_indices; /* sorted_indices_out [N*K] */
        int64_t top_k;
        int64_t num_out_tokens; /* after the <= 0 rule and the clamp */
    } permute;

    /* MoeTokenUnpermute (unpermute.c) */
    struct {
        struct moeperm_tensor permuted_tokens; /* [R, H] */
        struct moeperm_tensor sorted_indices;  /* [N*K] */
        struct moeperm_tensor probs;           /* [N, K]; unread when !has_probs */
        struct moeperm_tensor out;             /* unpermuted_tokens [N, H] */
        int64_t top_k;                         /* 1 without probs */
        bool has_probs;
    } unpermute;
    /* MoeTokenUnpermuteGrad (unpermute_grad.c) */
    struct moeperm_unpermute_grad_plan unpermute_grad;
};

/* The second phase's checks (executor.c): executor given, no stream, and
 * planned by op; on failure the executor is freed and the status returned
 * with its sentence. */
moeperm_status moeperm_executor_accept(moeperm_executor *executor, void *stream, moeperm_op op);
/* "moeperm_token_X_get_workspace_size()" of op, for messages. */
const char *moeperm_executor_planner(moeperm_op op);

/* Records a sentence for moeperm_last_error() and returns status, so that a
 * check reads `return moeperm_fail(MOEPERM_ERR_PARAM_INVALID, "...", ...);`. */
moeperm_status moeperm_fail(moeperm_status status, const char *format, ...)
    MOEPERM_PRINTF(2, 3);


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

/* The arithmetic of docs/arithmetic.md over a validated plan (permute_grad.c), split
 * over threads when threads > 1 (0 = the OpenMP default).  Any index outside
 * [0, R) is skipped, so even indices that changed after validation cannot
 * make it read out of bounds. */
void moeperm_kernel_run(const struct moeperm_executor *plan, int threads);

/* ---- shared by the operator family -------------------------------------- */

/* The stable-sort rank of each of n int32 keys: ranks[i] is the position
 * key i takes in an ascending sort where equal keys keep their order.  Any
 * keys; ranks is a permutation of [0, n).  Writes ranks only on success;
 * MOEPERM_ERR_INNER when memory runs out (route.c). */
moeperm_status moeperm_route_ranks(const int32_t *keys, size_t n, int32_t *ranks);

/* Checks of validate.c that every operator's first phase uses.  Each returns
 * MOEPERM_SUCCESS or the failing status with moeperm_last_error() set; `what`
 * names the argument in the sentence. */

/* Elements a view addresses (0 when a dim is 0). */
int64_t moeperm_view_elements(const moeperm_tensor *t);
/* dtype is FLOAT, FLOAT16 or BF16. */
moeperm_status moeperm_check_float_dtype(const moeperm_tensor *t, const char *what);
/* t has ndim dims; `layout` describes them for the sentence, e.g. "[rows, hidden_size]". */
moeperm_status moeperm_check_ndim(const moeperm_tensor *t, const char *what, uint64_t ndim,
                                  const char *layout);
/* A view with elements has data, and the bytes it spans fit in memory. */
moeperm_status moeperm_check_view(const moeperm_tensor *t, const char *what);
/* No two elements of the 1-D or 2-D output view share memory. */
moeperm_status moeperm_check_no_self_overlap(const moeperm_tensor *out, const char *what);
/* The memory of output `out` and of view `other` do not overlap (views
 * already passed moeperm_check_view()). */
moeperm_status moeperm_check_disjoint(const moeperm_tensor *out, const char *out_name,
                                      const moeperm_tensor *other, const char *other_name);
/* The 1-D INT32 view sorted_indices holds a permutation of [0, n): the
 * sentence names the first entry out of range, or a repeat and the earlier
 * position of its value. */
moeperm_status moeperm_check_sorted_indices(const moeperm_tensor *sorted_indices);

/* The second phases' work over a validated plan, with `threads` as for
 * moeperm_kernel_run() (tests and the benchmark call these directly).
 * Whatever the index memory holds by then, neither reads nor writes out of
 * bounds.  moeperm_permute_run() fails only for memory (MOEPERM_ERR_INNER),
 * before writing anything. */
moeperm_status moeperm_permute_run(const struct moeperm_executor *plan, int threads);
void moeperm_unpermute_run(const struct moeperm_executor *plan, int threads);

#endif

/*
 * internal.h - what every file of libmoeperm shares and the public header
 * does not show: the tensor and executor layouts and error reporting.
 *
 * The core knows no operator.  Each operator keeps its plan in a struct of
 * its own (src/<operator>/<operator>.h) and registers, in its first phase,
 * the function that runs that plan; the executor carries both and runs one
 * through the other.
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

/* An operator's second phase over its validated plan, on `threads` threads
 * (0 = as many as the work pays for).  Whatever the caller's memory holds
 * by then, it neither reads nor writes outside the views.  Returns
 * MOEPERM_SUCCESS, or a failure (memory) with moeperm_last_error() set and
 * the outputs untouched. */
typedef moeperm_status moeperm_plan_run(const void *plan, int threads);

/* A plan that a first phase made: which operator, the function that runs
 * it, and the operator's own plan struct (allocated with the executor, so
 * one free() releases both).  run is NULL when there is nothing to do (the
 * device does nothing when every output is empty). */
struct moeperm_executor {
    moeperm_op op;
    moeperm_plan_run *run;
    void *plan;
};

/* A new executor for op whose plan is plan_size zeroed bytes, suitably
 * aligned for any struct; NULL with MOEPERM_ERR_INNER's sentence recorded
 * when memory runs out. */
moeperm_executor *moeperm_executor_new(moeperm_op op, moeperm_plan_run *run, size_t plan_size);

/* Every operator's second phase: checks the executor (given, no stream,
 * planned by op), runs its plan, frees it whatever happens, and returns
 * the status with its sentence. */
moeperm_status moeperm_executor_finish(moeperm_executor *executor, void *stream, moeperm_op op);

/* Records a sentence for moeperm_last_error() and returns status, so that a
 * check reads `return moeperm_fail(MOEPERM_ERR_PARAM_INVALID, "...", ...);`. */
moeperm_status moeperm_fail(moeperm_status status, const char *format, ...)
    MOEPERM_PRINTF(2, 3);

/* The two kinds of refusal of an operator's first phase (docs/operators.md,
 * "The input domain"), each with its sentence: what the Atlas A2/A3 device
 * refuses too, with its status (161001, 161002, or 561002 for its tiling),
 * the sentence led by "the device refuses "; and what the device's kernel
 * gives no determined result for, 161002, led by "the device's result is
 * undetermined: ".  Both name the offending value. */
moeperm_status moeperm_refuse(moeperm_status status, const char *format, ...)
    MOEPERM_PRINTF(2, 3);
moeperm_status moeperm_undetermined(const char *format, ...) MOEPERM_PRINTF(1, 2);

#endif

/*
 * executor.c - the plan every first phase makes and every second phase
 * runs, written once for all operators: a plan is given, no stream (the
 * CPU has none), and it was planned by the same operator; then the
 * operator's own run function, registered with the plan, does the work.
 * A plan runs once, so a refused one is freed too, as the vendor's
 * executors are.
 */
#include <stdalign.h>
#include <stddef.h>
#include <stdlib.h>

#include "core/internal.h"

/* Where the operator's plan starts after the executor. */
#define PLAN_OFFSET                                                                               \
    ((sizeof(struct moeperm_executor) + alignof(max_align_t) - 1) / alignof(max_align_t) *     \
     alignof(max_align_t))

moeperm_executor *moeperm_executor_new(moeperm_op op, moeperm_plan_run *run, size_t plan_size)
{
    struct moeperm_executor *executor = calloc(1, PLAN_OFFSET + plan_size);
    if (!executor) {
        moeperm_fail(MOEPERM_ERR_INNER, "out of memory allocating the executor");
        return NULL;
    }
    executor->op = op;
    executor->run = run;
    executor->plan = (char *)executor + PLAN_OFFSET;
    return executor;
}

static const char *planner(moeperm_op op)
{
    const char *name = moeperm_op_name(op);
    return name ? name : "no operator";
}

moeperm_status moeperm_executor_finish(moeperm_executor *executor, void *stream, moeperm_op op)
{
    if (!executor)
        return moeperm_fail(MOEPERM_ERR_PARAM_NULLPTR, "executor is NULL");
    moeperm_status status = MOEPERM_SUCCESS;
    if (stream)
        status = moeperm_fail(MOEPERM_ERR_PARAM_INVALID,
                              "stream must be NULL on the CPU backend, got %p", stream);
    else if (executor->op != op)
        status = moeperm_fail(MOEPERM_ERR_PARAM_INVALID,
                              "the executor was planned by %s's first phase, not %s's",
                              planner(executor->op), planner(op));
    else if (executor->run)
        status = executor->run(executor->plan, 0);
    free(executor);
    return status;
}

void moeperm_executor_destroy(moeperm_executor *executor)
{
    free(executor);
}

moeperm_status moeperm_executor_run(void *workspace, uint64_t workspace_size,
                                    moeperm_executor *executor, void *stream)
{
    (void)workspace;
    (void)workspace_size; /* a CPU plan needs no workspace, so any size is enough */
    if (!executor)
        return moeperm_fail(MOEPERM_ERR_PARAM_NULLPTR, "executor is NULL");
    return moeperm_executor_finish(executor, stream, executor->op);
}

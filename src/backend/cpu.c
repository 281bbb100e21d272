/*
 * cpu.c - the cpu backend: libmoeperm's public two-phase API, the same
 * path the golden generator uses (golden_run_reference), so `moeperm
 * check --backend cpu` tests the library exactly as a framework calls it.
 */
#include "backend/backend.h"

#include <stdio.h>
#include <stdlib.h>

#include "golden/generate.h"

/* The CPU needs no runtime state; open() hands out a token object so the
 * interface stays the same as for stateful backends. */
struct backend {
    int unused;
};

static int cpu_open(const backend_options *options, backend **out, char *err, size_t err_len)
{
    (void)options;
    *out = calloc(1, sizeof **out);
    if (!*out) {
        snprintf(err, err_len, "cpu backend: out of memory");
        return BACKEND_FAILURE;
    }
    return BACKEND_OK;
}

static int cpu_run_case(backend *self, const golden_case *c, void *out, char *err,
                        size_t err_len)
{
    (void)self;
    moeperm_status st = golden_run_reference(c, out, err, err_len);
    switch (st) {
    case MOEPERM_SUCCESS:
        return BACKEND_OK;
    case MOEPERM_ERR_PARAM_NULLPTR:
    case MOEPERM_ERR_PARAM_INVALID:
        /* The operator refused the case's inputs: a bad case, not a broken
         * backend; err already holds moeperm_last_error()'s sentence. */
        return BACKEND_BAD_INPUT;
    default: {
        char inner[512];
        snprintf(inner, sizeof inner, "%s", err);
        snprintf(err, err_len, "cpu backend failed (%s): %s", moeperm_status_name(st), inner);
        return BACKEND_FAILURE;
    }
    }
}

static void cpu_close(backend *self)
{
    free(self);
}

const backend_ops backend_cpu = {"cpu", cpu_open, cpu_run_case, cpu_close};

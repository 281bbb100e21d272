/*
 * cpu.c - the cpu backend: libmoeperm's public two-phase API, exactly as
 * a framework calls it, so `moeperm check --backend cpu` tests the library
 * as it ships (the tool links the shared library).
 */
#include "backend/backend.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* The library's views of p's tensors; absent optional ones stay NULL. */
typedef struct views {
    moeperm_tensor *in[BACKEND_MAX_TENSORS], *out[BACKEND_MAX_TENSORS];
} views;

static void views_free(const backend_problem *p, views *v)
{
    for (size_t i = 0; i < p->input_count; i++)
        moeperm_tensor_destroy(v->in[i]);
    for (size_t i = 0; i < p->output_count; i++)
        moeperm_tensor_destroy(v->out[i]);
}

static moeperm_tensor *view_of(const backend_tensor *t, char *err, size_t err_len)
{
    moeperm_tensor *view = moeperm_tensor_create(t->shape, t->ndim, t->dtype, NULL, 0, t->data);
    if (!view)
        snprintf(err, err_len, "cannot describe %s: %s", t->name, moeperm_last_error());
    return view;
}

static moeperm_status plan(const backend_problem *p, views *v, uint64_t *workspace,
                           moeperm_executor **executor)
{
    moeperm_tensor *const *in = v->in, *const *out = v->out;
    switch (p->op) {
    case MOEPERM_OP_PERMUTE_GRAD:
        return moeperm_token_permute_grad_get_workspace_size(in[0], in[1], p->top_k,
                                                             p->padded_mode, out[0], workspace,
                                                             executor);
    case MOEPERM_OP_PERMUTE:
        return moeperm_token_permute_get_workspace_size(in[0], in[1], p->num_out_tokens,
                                                        p->padded_mode, out[0], out[1],
                                                        workspace, executor);
    case MOEPERM_OP_UNPERMUTE:
        return moeperm_token_unpermute_get_workspace_size(in[0], in[1], in[2], p->padded_mode,
                                                          p->restore_shape, p->restore_shape_len,
                                                          out[0], workspace, executor);
    case MOEPERM_OP_UNPERMUTE_GRAD: {
        moeperm_status st = moeperm_token_unpermute_grad_get_workspace_size(
            in[0], in[1], in[2], in[3], p->padded_mode, p->restore_shape, p->restore_shape_len,
            out[0], out[1], workspace, executor);
        if (st == MOEPERM_SUCCESS && in[3]) {
            st = moeperm_executor_set_chip(*executor, &p->chip);
            if (st != MOEPERM_SUCCESS) {
                moeperm_executor_destroy(*executor);
                *executor = NULL;
            }
        }
        return st;
    }
    }
    return MOEPERM_ERR_PARAM_INVALID;
}

moeperm_status backend_cpu_call(const backend_problem *p, bool run, char *err, size_t err_len)
{
    views v;
    memset(&v, 0, sizeof v);
    if (!moeperm_op_name(p->op)) {
        snprintf(err, err_len, "operator %d is not one of the family", (int)p->op);
        return MOEPERM_ERR_PARAM_INVALID;
    }
    moeperm_status st = MOEPERM_SUCCESS;
    for (size_t i = 0; i < p->input_count && st == MOEPERM_SUCCESS; i++)
        if (p->inputs[i].present && !(v.in[i] = view_of(&p->inputs[i], err, err_len)))
            st = MOEPERM_ERR_INNER;
    for (size_t i = 0; i < p->output_count && st == MOEPERM_SUCCESS; i++)
        if (p->outputs[i].present && !(v.out[i] = view_of(&p->outputs[i], err, err_len)))
            st = MOEPERM_ERR_INNER;
    if (st != MOEPERM_SUCCESS) {
        views_free(p, &v);
        return st;
    }
    uint64_t workspace_size = 0;
    moeperm_executor *executor = NULL;
    void *workspace = NULL;
    st = plan(p, &v, &workspace_size, &executor);
    if (st == MOEPERM_SUCCESS && !run) {
        moeperm_executor_destroy(executor);
    } else if (st == MOEPERM_SUCCESS) {
        if (workspace_size > 0 && !(workspace = malloc((size_t)workspace_size))) {
            moeperm_executor_destroy(executor);
            views_free(p, &v);
            snprintf(err, err_len, "out of memory for a %llu-byte workspace",
                     (unsigned long long)workspace_size);
            return MOEPERM_ERR_INNER;
        }
        st = moeperm_executor_run(workspace, workspace_size, executor, NULL);
        free(workspace);
    }
    if (st != MOEPERM_SUCCESS)
        snprintf(err, err_len, "%s", moeperm_last_error());
    views_free(p, &v);
    return st;
}

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

static int cpu_run(backend *self, backend_problem *p, char *err, size_t err_len)
{
    (void)self;
    moeperm_status st = backend_cpu_call(p, true, err, err_len);
    switch (st) {
    case MOEPERM_SUCCESS:
        return BACKEND_OK;
    case MOEPERM_ERR_PARAM_NULLPTR:
    case MOEPERM_ERR_PARAM_INVALID:
    case MOEPERM_ERR_INNER_TILING_ERROR:
        /* The operator refused the problem: bad input, not a broken
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

const backend_ops backend_cpu = {"cpu", cpu_open, cpu_run, cpu_close};

/*
 * reference.c - the one call of libmoeperm's public two-phase API per
 * operator that computes a case's outputs, its first phase alone (whether
 * the operator takes a case), and the outputs a case made from inputs
 * needs, shaped as the operator shapes them.
 */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <moeperm/golden.h>

#ifdef _OPENMP
#include <omp.h>
#endif

#include "golden/case/ops.h"
#include "golden/case/writer.h"
#include "golden/common/text.h"

/* ---------------------------------------------------------------------- */
/* The reference: one call of the public API per operator                 */
/* ---------------------------------------------------------------------- */

/* The library's views of a case's tensors, in the case's order, with the
 * outputs pointing at the caller's buffers. */
typedef struct views {
    moeperm_tensor *t[MOEPERM_GOLDEN_MAX_TENSORS];
    size_t count;
} views;

static void views_free(views *v)
{
    for (size_t i = 0; i < v->count; i++)
        moeperm_tensor_destroy(v->t[i]);
}

/* MoeTokenPermute's tokens and permuted_tokens, whose columns the order
 * of its routing does not depend on. */
static bool routed_rows(const moeperm_golden_case *c, const moeperm_golden_tensor *t)
{
    return c->op == MOEPERM_OP_PERMUTE &&
           (strcmp(t->name, "tokens") == 0 || strcmp(t->name, "permuted_tokens") == 0);
}

/* With route_only, routed_rows() get views of their rows and no columns,
 * [rows, 0], so that a run makes the routing alone. */
static int views_make(const moeperm_golden_case *c, void *const *outputs, bool route_only,
                      views *v, char *err, size_t err_len)
{
    size_t out = 0;
    memset(v, 0, sizeof *v);
    for (size_t i = 0; i < c->tensor_count; i++) {
        const moeperm_golden_tensor *t = &c->tensors[i];
        void *data = t->data;
        if (t->role == MOEPERM_GOLDEN_ROLE_OUTPUT)
            data = outputs ? outputs[out++] : NULL;
        const int64_t rows_only[2] = {t->shape[0], 0};
        if (route_only && routed_rows(c, t))
            v->t[i] = moeperm_tensor_create(rows_only, 2, t->dtype, NULL, 0, data);
        else
            v->t[i] = moeperm_tensor_create(t->shape, t->ndim, t->dtype, NULL, 0, data);
        v->count = i + 1;
        if (!v->t[i]) {
            snprintf(err, err_len, "cannot describe %s: %s", t->name, moeperm_last_error());
            views_free(v);
            return -1;
        }
    }
    return 0;
}

/* The view of the tensor called name, or NULL when the case lacks it (an
 * optional one). */
static moeperm_tensor *view(const moeperm_golden_case *c, const views *v, const char *name)
{
    for (size_t i = 0; i < c->tensor_count; i++)
        if (strcmp(c->tensors[i].name, name) == 0)
            return v->t[i];
    return NULL;
}

/* The first phase of c's operator over v. */
static moeperm_status plan(const moeperm_golden_case *c, const views *v, uint64_t *workspace,
                           moeperm_executor **executor)
{
    const moeperm_golden_attrs *a = &c->attrs;
    const int64_t *restore = a->restore_shape_len ? a->restore_shape : NULL;
    switch (c->op) {
    case MOEPERM_OP_PERMUTE_GRAD:
        return moeperm_token_permute_grad_get_workspace_size(
            view(c, v, "permuted_output_grad"), view(c, v, "sorted_indices"), a->top_k,
            a->padded_mode, view(c, v, "input_grad"), workspace, executor);
    case MOEPERM_OP_PERMUTE:
        return moeperm_token_permute_get_workspace_size(
            view(c, v, "tokens"), view(c, v, "indices"), a->num_out_tokens, a->padded_mode,
            view(c, v, "permuted_tokens"), view(c, v, "sorted_indices"), workspace, executor);
    case MOEPERM_OP_UNPERMUTE:
        return moeperm_token_unpermute_get_workspace_size(
            view(c, v, "permuted_tokens"), view(c, v, "sorted_indices"), view(c, v, "probs"),
            a->padded_mode, restore, a->restore_shape_len, view(c, v, "unpermuted_tokens"),
            workspace, executor);
    case MOEPERM_OP_UNPERMUTE_GRAD: {
        moeperm_status st = moeperm_token_unpermute_grad_get_workspace_size(
            view(c, v, "permuted_tokens"), view(c, v, "unpermuted_tokens_grad"),
            view(c, v, "sorted_indices"), view(c, v, "probs"), a->padded_mode, restore,
            a->restore_shape_len, view(c, v, "permuted_tokens_grad"), view(c, v, "probs_grad"),
            workspace, executor);
        if (st == MOEPERM_SUCCESS && (a->ub_bytes || a->vector_cores)) {
            moeperm_chip chip = golden_chip_of(a);
            st = moeperm_executor_set_chip(*executor, &chip);
            if (st != MOEPERM_SUCCESS) {
                moeperm_executor_destroy(*executor);
                *executor = NULL;
            }
        }
        return st;
    }
    }
    return MOEPERM_ERR_PARAM_INVALID; /* reference() checked the operator */
}

/* The exact values of c's MOEPERM_GOLDEN_ROLE_EXACT tensors, in their order. */
static moeperm_status exact_values(const moeperm_golden_case *c, void *const *exact)
{
    const moeperm_golden_tensor *probs = moeperm_golden_case_tensor_const(c, "probs");
    const moeperm_golden_tensor *want = moeperm_golden_case_tensor_const(c, "probs_grad_exact");
    if (c->op != MOEPERM_OP_UNPERMUTE_GRAD || !probs || !want)
        return MOEPERM_SUCCESS;
    views v;
    char err[256];
    if (views_make(c, NULL, false, &v, err, sizeof err) != 0)
        return MOEPERM_ERR_INNER;
    moeperm_status st = moeperm_token_unpermute_grad_exact_probs_grad(
        view(c, &v, "permuted_tokens"), view(c, &v, "unpermuted_tokens_grad"),
        view(c, &v, "sorted_indices"), view(c, &v, "probs"), (double *)exact[0],
        moeperm_golden_tensor_elements(want));
    views_free(&v);
    return st;
}

/* The reference run; w (when not NULL) gets c's outputs as soon as the
 * operator has made them, while the exact values are worked out.  With
 * route_only (MoeTokenPermute), the run is over views_make()'s views of
 * no columns: it makes sorted_indices alone, and permuted_tokens is left
 * as it is, for the caller, not handed to w. */
static moeperm_status reference(const moeperm_golden_case *c, void *const *outputs, void *const *exact,
                                bool run, bool route_only, golden_case_writer *w, char *err,
                                size_t err_len)
{
    if (!moeperm_op_name(c->op)) {
        snprintf(err, err_len, "operator %d is not one of the family", (int)c->op);
        return MOEPERM_ERR_PARAM_INVALID;
    }
    views v;
    if (views_make(c, outputs, route_only, &v, err, err_len) != 0)
        return MOEPERM_ERR_INNER;
    uint64_t workspace_size = 0;
    moeperm_executor *executor = NULL;
    void *workspace = NULL;
    moeperm_status st = plan(c, &v, &workspace_size, &executor);
    if (st == MOEPERM_SUCCESS && !run) {
        moeperm_executor_destroy(executor);
    } else if (st == MOEPERM_SUCCESS) {
        if (workspace_size > 0 && !(workspace = malloc((size_t)workspace_size))) {
            moeperm_executor_destroy(executor);
            views_free(&v);
            snprintf(err, err_len, "out of memory for a %" PRIu64 "-byte workspace",
                     workspace_size);
            return MOEPERM_ERR_INNER;
        }
        st = moeperm_executor_run(workspace, workspace_size, executor, NULL);
        free(workspace);
        for (size_t i = 0; w && st == MOEPERM_SUCCESS && i < c->tensor_count; i++)
            if (c->tensors[i].role == MOEPERM_GOLDEN_ROLE_OUTPUT &&
                !(route_only && routed_rows(c, &c->tensors[i])))
                golden_case_writer_ready(w, &c->tensors[i], c->tensors[i].bytes);
        if (st == MOEPERM_SUCCESS && exact) {
            /* Beside w's hash of the outputs, on the generator's threads
             * (golden_case_writer_team()): the hash, the one serial stream,
             * keeps its core. */
#ifdef _OPENMP
            int threads = omp_get_max_threads();
            if (w)
                omp_set_num_threads(golden_case_writer_team(w));
#endif
            st = exact_values(c, exact);
#ifdef _OPENMP
            omp_set_num_threads(threads);
#endif
        }
    }
    if (st != MOEPERM_SUCCESS)
        snprintf(err, err_len, "%s", moeperm_last_error());
    views_free(&v);
    return st;
}

moeperm_status moeperm_golden_run_reference(const moeperm_golden_case *c, void *const *outputs,
                                    void *const *exact, char *err, size_t err_len)
{
    return reference(c, outputs, exact, true, false, NULL, err, err_len);
}

moeperm_status moeperm_golden_check_reference(const moeperm_golden_case *c, char *err, size_t err_len)
{
    /* The first phase checks the output views too (shape, overlap), so
     * they get buffers of their own; the plan is dropped unrun, so their
     * pages are never touched and cost no memory. */
    void *scratch[MOEPERM_GOLDEN_MAX_TENSORS] = {0};
    size_t n = 0;
    moeperm_status st = MOEPERM_SUCCESS;
    for (size_t i = 0; i < c->tensor_count; i++) {
        const moeperm_golden_tensor *t = &c->tensors[i];
        if (t->role != MOEPERM_GOLDEN_ROLE_OUTPUT)
            continue;
        size_t bytes = t->bytes ? t->bytes : 1;
        scratch[n] = malloc(bytes);
        if (!scratch[n]) {
            snprintf(err, err_len, "out of memory checking %s", t->name);
            st = MOEPERM_ERR_INNER;
            break;
        }
        n++;
    }
    if (st == MOEPERM_SUCCESS)
        st = reference(c, scratch, NULL, false, false, NULL, err, err_len);
    for (size_t i = 0; i < n; i++)
        free(scratch[i]);
    return st;
}

/* ---------------------------------------------------------------------- */
/* Outputs from inputs                                                    */
/* ---------------------------------------------------------------------- */

/* The input called name with ndim dimensions, or NULL after a sentence. */
static const moeperm_golden_tensor *input_of(const moeperm_golden_case *c, const char *name, uint64_t ndim,
                                     bool optional, char *err, size_t err_len)
{
    const moeperm_golden_tensor *t = moeperm_golden_case_tensor_const(c, name);
    if (!t) {
        if (!optional)
            snprintf(err, err_len, "%s needs the input %s", moeperm_op_name(c->op), name);
        return NULL;
    }
    if (t->ndim != ndim) {
        snprintf(err, err_len, "%s has %llu dimensions; %s takes it with %llu", name,
                 (unsigned long long)t->ndim, moeperm_op_name(c->op),
                 (unsigned long long)ndim);
        return NULL;
    }
    return t;
}

/* Appends an output of ndim dims, zeroed (what the operator leaves
 * untouched reads 0, as golden files have it) unless `filled` says that
 * every byte of it will be written. */
static int add_output(moeperm_golden_case *c, const char *name, moeperm_golden_role role,
                      moeperm_dtype dtype, const int64_t *dims, uint64_t ndim, bool filled,
                      char *err, size_t err_len)
{
    if (c->tensor_count == MOEPERM_GOLDEN_MAX_TENSORS || moeperm_golden_case_tensor(c, name)) {
        snprintf(err, err_len, "the case already has %s", name);
        return -1;
    }
    size_t count;
    const moeperm_golden_slot *slots = moeperm_golden_op_slots(c->op, &count);
    moeperm_golden_tensor *t = &c->tensors[c->tensor_count];
    memset(t, 0, sizeof *t);
    for (size_t i = 0; i < count; i++)
        if (strcmp(slots[i].name, name) == 0)
            t->name = slots[i].name;
    t->role = role;
    t->dtype = dtype;
    t->ndim = ndim;
    uint64_t bytes = moeperm_dtype_size(dtype);
    bool overflow = false;
    for (uint64_t d = 0; d < ndim; d++) {
        t->shape[d] = dims[d];
        overflow = overflow || __builtin_mul_overflow(bytes, (uint64_t)dims[d], &bytes);
    }
    if (overflow || bytes > SIZE_MAX) {
        snprintf(err, err_len, "%s of %lld rows is too large", name, (long long)dims[0]);
        return -1;
    }
    t->bytes = (size_t)bytes;
    t->file = golden_strdup_printf("%s.bin", name);
    t->data = golden_tensor_alloc(t->bytes, !filled);
    c->tensor_count++;
    if (!t->file || (t->bytes && !t->data)) {
        snprintf(err, err_len, "out of memory for %s", name);
        return -1;
    }
    return 0;
}

/* add_output() of a [d0, d1] tensor, or of [d0] when ndim is 1. */
static int add_output2(moeperm_golden_case *c, const char *name, moeperm_golden_role role,
                       moeperm_dtype dtype, int64_t d0, int64_t d1, uint64_t ndim, char *err,
                       size_t err_len)
{
    const int64_t dims[2] = {d0, d1};
    return add_output(c, name, role, dtype, dims, ndim, false, err, err_len);
}

/* The outputs of c's operator, shaped from its inputs as the operator
 * shapes them; with route_only, MoeTokenPermute's permuted_tokens is left
 * unzeroed for the caller to fill. */
static int add_outputs(moeperm_golden_case *c, bool route_only, char *err, size_t err_len)
{
    const moeperm_golden_tensor *a, *b, *probs;
    err[0] = '\0';
    switch (c->op) {
    case MOEPERM_OP_PERMUTE_GRAD: {
        if (!(a = input_of(c, "permuted_output_grad", 2, false, err, err_len)) ||
            !(b = input_of(c, "sorted_indices", 1, false, err, err_len)))
            return -1;
        /* floor(L / K) tokens, as the device takes them (-1 means 1); for a
         * num_topk it has no result for, no rows, and the operator's own
         * refusal below. */
        int64_t k = c->attrs.top_k == -1 ? 1 : c->attrs.top_k;
        return add_output2(c, "input_grad", MOEPERM_GOLDEN_ROLE_OUTPUT, a->dtype,
                           k >= 1 ? b->shape[0] / k : 0, a->shape[1], 2, err, err_len);
    }
    case MOEPERM_OP_PERMUTE: {
        a = moeperm_golden_case_tensor_const(c, "tokens");
        if (!a || a->ndim < 2) {
            snprintf(err, err_len, "MoeTokenPermute needs the input tokens, [tokens, hidden] or "
                                   "of a higher rank [tokens, ...]");
            return -1;
        }
        b = moeperm_golden_case_tensor_const(c, "indices");
        if (!b || b->ndim < 1 || b->ndim > 2) {
            snprintf(err, err_len, "MoeTokenPermute needs the input indices, [tokens, top_k] "
                                   "or [tokens]");
            return -1;
        }
        int64_t slots = (int64_t)moeperm_golden_tensor_elements(b), n = c->attrs.num_out_tokens;
        if (n <= 0)
            n += slots;
        n = n < 0 ? 0 : n > slots ? slots : n;
        /* The tokens' shape with its first dimension num_out, as the
         * device's graph mode shapes it. */
        int64_t dims[MOEPERM_MAX_DIMS];
        memcpy(dims, a->shape, sizeof dims);
        dims[0] = n;
        return add_output(c, "permuted_tokens", MOEPERM_GOLDEN_ROLE_OUTPUT, a->dtype, dims,
                          a->ndim, route_only, err, err_len) ||
               add_output2(c, "sorted_indices", MOEPERM_GOLDEN_ROLE_OUTPUT, MOEPERM_INT32, slots, 0,
                           1, err, err_len);
    }
    case MOEPERM_OP_UNPERMUTE: {
        if (!(a = input_of(c, "permuted_tokens", 2, false, err, err_len)) ||
            !(b = input_of(c, "sorted_indices", 1, false, err, err_len)))
            return -1;
        probs = input_of(c, "probs", 2, true, err, err_len);
        if (!probs && err[0])
            return -1;
        int64_t tokens = probs ? probs->shape[0] : b->shape[0];
        return add_output2(c, "unpermuted_tokens", MOEPERM_GOLDEN_ROLE_OUTPUT, a->dtype, tokens,
                           a->shape[1], 2, err, err_len);
    }
    case MOEPERM_OP_UNPERMUTE_GRAD:
        if (!(a = input_of(c, "permuted_tokens", 2, false, err, err_len)) ||
            !input_of(c, "unpermuted_tokens_grad", 2, false, err, err_len) ||
            !input_of(c, "sorted_indices", 1, false, err, err_len))
            return -1;
        probs = input_of(c, "probs", 2, true, err, err_len);
        if (!probs && err[0])
            return -1;
        if (add_output2(c, "permuted_tokens_grad", MOEPERM_GOLDEN_ROLE_OUTPUT, a->dtype,
                        a->shape[0], a->shape[1], 2, err, err_len) != 0)
            return -1;
        if (!probs)
            return 0;
        /* probs may have moved: add_output() writes into the same array */
        probs = moeperm_golden_case_tensor_const(c, "probs");
        int64_t n = probs->shape[0], k = probs->shape[1];
        moeperm_dtype dtype = probs->dtype;
        return add_output2(c, "probs_grad", MOEPERM_GOLDEN_ROLE_OUTPUT, dtype, n, k, 2, err,
                           err_len) ||
               add_output2(c, "probs_grad_exact", MOEPERM_GOLDEN_ROLE_EXACT, MOEPERM_FLOAT64, n, k,
                           2, err, err_len);
    }
    snprintf(err, err_len, "operator %d is not one of the family", (int)c->op);
    return -1;
}

int moeperm_golden_case_finish(moeperm_golden_case *c, char *err, size_t err_len)
{
    return golden_case_finish_writing(c, NULL, false, err, err_len);
}

int golden_case_finish_writing(moeperm_golden_case *c, golden_case_writer *w, bool route_only,
                               char *err, size_t err_len)
{
    for (size_t i = 0; i < c->tensor_count; i++)
        if (c->tensors[i].role != MOEPERM_GOLDEN_ROLE_INPUT) {
            snprintf(err, err_len, "the case already has the output %s", c->tensors[i].name);
            return -1;
        }
    route_only = route_only && c->op == MOEPERM_OP_PERMUTE;
    if (add_outputs(c, route_only, err, err_len) != 0)
        return -1;
    void *outputs[MOEPERM_GOLDEN_MAX_TENSORS] = {0}, *exact[MOEPERM_GOLDEN_MAX_TENSORS] = {0};
    size_t n_out = 0, n_exact = 0;
    for (size_t i = 0; i < c->tensor_count; i++) {
        if (c->tensors[i].role == MOEPERM_GOLDEN_ROLE_OUTPUT)
            outputs[n_out++] = c->tensors[i].data;
        else if (c->tensors[i].role == MOEPERM_GOLDEN_ROLE_EXACT)
            exact[n_exact++] = c->tensors[i].data;
    }
    /* A run of the routing alone is planned over views of no columns: the
     * first phase sees the case's own shapes first. */
    char inner[512];
    moeperm_status st = MOEPERM_SUCCESS;
    if (route_only)
        st = reference(c, outputs, NULL, false, false, NULL, inner, sizeof inner);
    if (st == MOEPERM_SUCCESS)
        st = reference(c, outputs, n_exact ? exact : NULL, true, route_only, w, inner,
                       sizeof inner);
    if (st != MOEPERM_SUCCESS) {
        snprintf(err, err_len, "the operator refuses the case (%s): %s", moeperm_status_name(st),
                 inner);
        return -1;
    }
    return 0;
}

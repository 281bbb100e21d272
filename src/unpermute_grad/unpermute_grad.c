/*
 * unpermute_grad.c - MoeTokenUnpermuteGrad: the two-phase API, its
 * validation and the chip a plan's tiling follows; kernel.c runs the
 * model of model.h over a plan.
 */
#include "core/checks.h"
#include "core/internal.h"
#include "unpermute_grad/model.h"
#include "unpermute_grad/unpermute_grad.h"

/* ---------------------------------------------------------------------- */
/* Validation                                                             */
/* ---------------------------------------------------------------------- */

typedef struct ug_shape {
    int64_t tokens, top_k, hidden, rows;
} ug_shape;

/* Everything about the inputs but the values of sorted_indices (checked
 * last, once the cheap checks have passed).  probs may be NULL. */
static moeperm_status check_inputs(const moeperm_tensor *tokens, const moeperm_tensor *grad,
                                   const moeperm_tensor *indices, const moeperm_tensor *probs,
                                   ug_shape *shape)
{
    moeperm_status status;
    if ((status = moeperm_check_float_dtype(tokens, "permuted_tokens")) ||
        (status = moeperm_check_same_dtype(grad, "unpermuted_tokens_grad", tokens, "permuted_tokens")))
        return status;
    if ((status = moeperm_check_int32(indices, "sorted_indices")) ||
        (probs && (status = moeperm_check_float_dtype(probs, "probs"))))
        return status;

    if ((status = moeperm_check_ndim(tokens, "permuted_tokens", 2, "[num_out_tokens, hidden_size]")) ||
        (status = moeperm_check_ndim(grad, "unpermuted_tokens_grad", 2, "[tokens_num, hidden_size]")) ||
        (status = moeperm_check_ndim(indices, "sorted_indices", 1, "[tokens_num * top_k]")) ||
        (probs && (status = moeperm_check_ndim(probs, "probs", 2, "[tokens_num, top_k]"))))
        return status;

    int64_t tokens_num = grad->dims[0], hidden = grad->dims[1], rows = tokens->dims[0];
    if (tokens->dims[1] != hidden)
        return moeperm_fail(MOEPERM_ERR_PARAM_INVALID,
                            "permuted_tokens has hidden_size %lld but unpermuted_tokens_grad has "
                            "%lld",
                            (long long)tokens->dims[1], (long long)hidden);
    int64_t top_k = 1;
    if (probs) {
        top_k = probs->dims[1];
        if (probs->dims[0] != tokens_num)
            return moeperm_fail(MOEPERM_ERR_PARAM_INVALID,
                                "probs has %lld rows but unpermuted_tokens_grad has %lld "
                                "(tokens_num)",
                                (long long)probs->dims[0], (long long)tokens_num);
        if (top_k < 1 || top_k > MOEPERM_MAX_TOP_K)
            return moeperm_fail(MOEPERM_ERR_PARAM_INVALID,
                                "top_k = %lld (the columns of probs) is outside [1, %d]",
                                (long long)top_k, MOEPERM_MAX_TOP_K);
    }
    int64_t count = indices->dims[0], slots;
    if (__builtin_mul_overflow(tokens_num, top_k, &slots) || slots != count)
        return moeperm_fail(MOEPERM_ERR_PARAM_INVALID,
                            "sorted_indices has %lld entries, expected tokens_num * top_k = "
                            "%lld * %lld",
                            (long long)count, (long long)tokens_num, (long long)top_k);
    if (count > (INT64_C(1) << 31))
        return moeperm_fail(MOEPERM_ERR_PARAM_INVALID,
                            "sorted_indices has %lld entries, more than the 2^31 that int32 "
                            "indices can address",
                            (long long)count);
    if (rows > count)
        return moeperm_fail(MOEPERM_ERR_PARAM_INVALID,
                            "permuted_tokens has %lld rows (num_out_tokens), more than the %lld "
                            "entries of sorted_indices",
                            (long long)rows, (long long)count);

    if ((status = moeperm_check_view(tokens, "permuted_tokens")) ||
        (status = moeperm_check_view(grad, "unpermuted_tokens_grad")) ||
        (status = moeperm_check_view(indices, "sorted_indices")) ||
        (probs && (status = moeperm_check_view(probs, "probs"))))
        return status;
    shape->tokens = tokens_num;
    shape->top_k = top_k;
    shape->hidden = hidden;
    shape->rows = rows;
    return MOEPERM_SUCCESS;
}

static moeperm_status check_shape2(const moeperm_tensor *t, const char *what, int64_t d0,
                                   int64_t d1, const char *like)
{
    if (t->dims[0] == d0 && t->dims[1] == d1)
        return MOEPERM_SUCCESS;
    return moeperm_fail(MOEPERM_ERR_PARAM_INVALID,
                        "%s shape is [%lld, %lld], expected [%lld, %lld] (the shape of %s)", what,
                        (long long)t->dims[0], (long long)t->dims[1], (long long)d0, (long long)d1,
                        like);
}

static moeperm_status check_output(const moeperm_tensor *out, const char *what,
                                   const moeperm_tensor *const inputs[4],
                                   const char *const input_names[4])
{
    moeperm_status status;
    if ((status = moeperm_check_view(out, what)) ||
        (status = moeperm_check_no_self_overlap(out, what)))
        return status;
    for (int i = 0; i < 4; i++)
        if (inputs[i] && (status = moeperm_check_disjoint(out, what, inputs[i], input_names[i])))
            return status;
    return MOEPERM_SUCCESS;
}

static moeperm_status validate(const moeperm_tensor *tokens, const moeperm_tensor *grad,
                               const moeperm_tensor *indices, const moeperm_tensor *probs,
                               bool padded_mode, const moeperm_tensor *tokens_grad,
                               const moeperm_tensor *probs_grad, ug_shape *shape)
{
    moeperm_status status;
    if (padded_mode)
        return moeperm_fail(MOEPERM_ERR_PARAM_INVALID,
                            "padded_mode = true is not supported; only false is");
    if ((status = check_inputs(tokens, grad, indices, probs, shape)))
        return status;
    if ((status = moeperm_check_same_dtype(tokens_grad, "permuted_tokens_grad_out", tokens, "permuted_tokens")) ||
        (probs && (status = moeperm_check_same_dtype(probs_grad, "probs_grad_out", probs, "probs"))))
        return status;
    if ((status = moeperm_check_ndim(tokens_grad, "permuted_tokens_grad_out", 2,
                             "[num_out_tokens, hidden_size]")) ||
        (probs && (status = moeperm_check_ndim(probs_grad, "probs_grad_out", 2, "[tokens_num, top_k]"))))
        return status;
    if ((status = check_shape2(tokens_grad, "permuted_tokens_grad_out", shape->rows, shape->hidden,
                               "permuted_tokens")) ||
        (probs && (status = check_shape2(probs_grad, "probs_grad_out", shape->tokens, shape->top_k,
                                         "probs"))))
        return status;

    const moeperm_tensor *const inputs[4] = {tokens, grad, indices, probs};
    const char *const names[4] = {"permuted_tokens", "unpermuted_tokens_grad", "sorted_indices",
                                  "probs"};
    if ((status = check_output(tokens_grad, "permuted_tokens_grad_out", inputs, names)) ||
        (probs && (status = check_output(probs_grad, "probs_grad_out", inputs, names))) ||
        (probs && (status = moeperm_check_disjoint(tokens_grad, "permuted_tokens_grad_out", probs_grad,
                                        "probs_grad_out"))))
        return status;
    return moeperm_check_sorted_indices(indices);
}

/* ---------------------------------------------------------------------- */
/* The API                                                                */
/* ---------------------------------------------------------------------- */

static moeperm_status run_plan(const void *plan, int threads)
{
    if (!moeperm_unpermute_grad_run(plan, threads, MOEPERM_ISA_AUTO))
        return moeperm_fail(MOEPERM_ERR_INNER, "out of memory allocating the kernel's scratch");
    return MOEPERM_SUCCESS;
}

moeperm_status moeperm_token_unpermute_grad_get_workspace_size(
    const moeperm_tensor *permuted_tokens, const moeperm_tensor *unpermuted_tokens_grad,
    const moeperm_tensor *sorted_indices, const moeperm_tensor *probs, bool padded_mode,
    const int64_t *restore_shape, uint64_t restore_shape_len,
    moeperm_tensor *permuted_tokens_grad_out, moeperm_tensor *probs_grad_out,
    uint64_t *workspace_size, moeperm_executor **executor)
{
    (void)restore_shape; /* the Atlas A2/A3 host code never reads it */
    (void)restore_shape_len;
    if (executor)
        *executor = NULL;
    if (!permuted_tokens)
        return moeperm_fail(MOEPERM_ERR_PARAM_NULLPTR, "permuted_tokens is NULL");
    if (!unpermuted_tokens_grad)
        return moeperm_fail(MOEPERM_ERR_PARAM_NULLPTR, "unpermuted_tokens_grad is NULL");
    if (!sorted_indices)
        return moeperm_fail(MOEPERM_ERR_PARAM_NULLPTR, "sorted_indices is NULL");
    if (!permuted_tokens_grad_out)
        return moeperm_fail(MOEPERM_ERR_PARAM_NULLPTR, "permuted_tokens_grad_out is NULL");
    if (probs && !probs_grad_out)
        return moeperm_fail(MOEPERM_ERR_PARAM_NULLPTR, "probs_grad_out is NULL but probs is given");
    if (!probs && probs_grad_out)
        return moeperm_fail(MOEPERM_ERR_PARAM_INVALID,
                            "probs_grad_out is given but probs is NULL: without probs there is "
                            "no probs gradient");
    if (!workspace_size)
        return moeperm_fail(MOEPERM_ERR_PARAM_NULLPTR, "workspace_size is NULL");
    if (!executor)
        return moeperm_fail(MOEPERM_ERR_PARAM_NULLPTR, "executor is NULL");

    ug_shape shape;
    moeperm_status status = validate(permuted_tokens, unpermuted_tokens_grad, sorted_indices, probs,
                                     padded_mode, permuted_tokens_grad_out, probs_grad_out, &shape);
    if (status != MOEPERM_SUCCESS)
        return status;

    moeperm_executor *made = moeperm_executor_new(MOEPERM_OP_UNPERMUTE_GRAD, run_plan,
                                                  sizeof(struct moeperm_unpermute_grad_plan));
    if (!made)
        return MOEPERM_ERR_INNER;
    struct moeperm_unpermute_grad_plan *ug = made->plan;
    ug->permuted_tokens = *permuted_tokens;
    ug->grad = *unpermuted_tokens_grad;
    ug->indices = *sorted_indices;
    ug->tokens_grad = *permuted_tokens_grad_out;
    ug->has_probs = probs != NULL;
    if (probs) {
        ug->probs = *probs;
        ug->probs_grad = *probs_grad_out;
    }
    ug->top_k = shape.top_k;
    ug->chip.ub_bytes = MOEPERM_CHIP_A2_UB_BYTES;
    ug->chip.vector_cores = MOEPERM_CHIP_A2_VECTOR_CORES;
    *workspace_size = 0;
    *executor = made;
    return MOEPERM_SUCCESS;
}

static moeperm_status check_chip(const moeperm_chip *chip)
{
    if (chip->ub_bytes < MOEPERM_CHIP_MIN_UB_BYTES || chip->ub_bytes > MOEPERM_CHIP_MAX_UB_BYTES)
        return moeperm_fail(MOEPERM_ERR_PARAM_INVALID, "chip ub_bytes = %lld is outside [%d, %d]",
                            (long long)chip->ub_bytes, MOEPERM_CHIP_MIN_UB_BYTES,
                            MOEPERM_CHIP_MAX_UB_BYTES);
    if (chip->vector_cores < 1 || chip->vector_cores > MOEPERM_CHIP_MAX_VECTOR_CORES)
        return moeperm_fail(MOEPERM_ERR_PARAM_INVALID,
                            "chip vector_cores = %lld is outside [1, %d]",
                            (long long)chip->vector_cores, MOEPERM_CHIP_MAX_VECTOR_CORES);
    return MOEPERM_SUCCESS;
}



moeperm_status moeperm_executor_set_chip(moeperm_executor *executor, const moeperm_chip *chip)
{
    if (!executor)
        return moeperm_fail(MOEPERM_ERR_PARAM_NULLPTR, "executor is NULL");
    if (!chip)
        return moeperm_fail(MOEPERM_ERR_PARAM_NULLPTR, "chip is NULL");
    if (executor->op != MOEPERM_OP_UNPERMUTE_GRAD)
        return moeperm_fail(MOEPERM_ERR_PARAM_INVALID,
                            "the executor was planned by %s's first phase, whose arithmetic "
                            "does not depend on the chip",
                            moeperm_op_name(executor->op) ? moeperm_op_name(executor->op)
                                                          : "no operator");
    moeperm_status status = check_chip(chip);
    if (status != MOEPERM_SUCCESS)
        return status;
    ((struct moeperm_unpermute_grad_plan *)executor->plan)->chip = *chip;
    return MOEPERM_SUCCESS;
}

moeperm_status moeperm_token_unpermute_grad(void *workspace, uint64_t workspace_size,
                                            moeperm_executor *executor, void *stream)
{
    (void)workspace;
    (void)workspace_size; /* the CPU plan needs no workspace, so any size is enough */
    return moeperm_executor_finish(executor, stream, MOEPERM_OP_UNPERMUTE_GRAD);
}

moeperm_status moeperm_token_unpermute_grad_tiling(int64_t tokens_num, int64_t top_k,
                                                   int64_t hidden_size, int64_t num_out_tokens,
                                                   moeperm_dtype tokens_dtype, bool has_probs,
                                                   moeperm_dtype probs_dtype,
                                                   const moeperm_chip *chip,
                                                   moeperm_unpermute_grad_tiling *tiling)
{
    static const moeperm_chip a2 = {MOEPERM_CHIP_A2_UB_BYTES, MOEPERM_CHIP_A2_VECTOR_CORES};
    moeperm_status status;
    if (!tiling)
        return moeperm_fail(MOEPERM_ERR_PARAM_NULLPTR, "tiling is NULL");
    if (!chip)
        chip = &a2;
    if ((status = check_chip(chip)))
        return status;
    if (tokens_num < 1)
        return moeperm_fail(MOEPERM_ERR_PARAM_INVALID,
                            "tokens_num = %lld; the kernel's tiling needs at least 1",
                            (long long)tokens_num);
    if (hidden_size < 1)
        return moeperm_fail(MOEPERM_ERR_PARAM_INVALID,
                            "hidden_size = %lld; the kernel's tiling needs at least 1",
                            (long long)hidden_size);
    if (top_k < 1 || top_k > MOEPERM_MAX_TOP_K)
        return moeperm_fail(MOEPERM_ERR_PARAM_INVALID, "top_k = %lld is outside [1, %d]",
                            (long long)top_k, MOEPERM_MAX_TOP_K);
    if (!has_probs && top_k != 1)
        return moeperm_fail(MOEPERM_ERR_PARAM_INVALID,
                            "top_k = %lld without probs; the kernel then takes top_k = 1",
                            (long long)top_k);
    if (num_out_tokens < 0)
        return moeperm_fail(MOEPERM_ERR_PARAM_INVALID, "num_out_tokens = %lld is negative",
                            (long long)num_out_tokens);
    moeperm_tensor tokens_view = {.dtype = tokens_dtype}, probs_view = {.dtype = probs_dtype};
    if ((status = moeperm_check_float_dtype(&tokens_view, "tokens_dtype")) ||
        (has_probs && (status = moeperm_check_float_dtype(&probs_view, "probs_dtype"))))
        return status;
    moeperm_ug_tiling(tokens_num, top_k, hidden_size, num_out_tokens,
                      (int64_t)moeperm_dtype_size(tokens_dtype), has_probs,
                      has_probs ? (int64_t)moeperm_dtype_size(probs_dtype) : 0, chip, tiling);
    return MOEPERM_SUCCESS;
}

moeperm_status moeperm_token_unpermute_grad_exact_probs_grad(
    const moeperm_tensor *permuted_tokens, const moeperm_tensor *unpermuted_tokens_grad,
    const moeperm_tensor *sorted_indices, const moeperm_tensor *probs, double *exact,
    uint64_t exact_len)
{
    if (!permuted_tokens)
        return moeperm_fail(MOEPERM_ERR_PARAM_NULLPTR, "permuted_tokens is NULL");
    if (!unpermuted_tokens_grad)
        return moeperm_fail(MOEPERM_ERR_PARAM_NULLPTR, "unpermuted_tokens_grad is NULL");
    if (!sorted_indices)
        return moeperm_fail(MOEPERM_ERR_PARAM_NULLPTR, "sorted_indices is NULL");
    if (!probs)
        return moeperm_fail(MOEPERM_ERR_PARAM_NULLPTR,
                            "probs is NULL; without probs there is no probs gradient");
    ug_shape shape;
    moeperm_status status =
        check_inputs(permuted_tokens, unpermuted_tokens_grad, sorted_indices, probs, &shape);
    if (status != MOEPERM_SUCCESS)
        return status;
    int64_t slots = shape.tokens * shape.top_k;
    if (exact_len != (uint64_t)slots)
        return moeperm_fail(MOEPERM_ERR_PARAM_INVALID,
                            "exact_len = %llu, expected tokens_num * top_k = %lld",
                            (unsigned long long)exact_len, (long long)slots);
    if (slots > 0 && !exact)
        return moeperm_fail(MOEPERM_ERR_PARAM_NULLPTR, "exact is NULL");
    /* exact as a view of 8-byte elements, for the overlap checks */
    moeperm_tensor view = {
        .dtype = MOEPERM_INT64, .ndim = 1, .dims = {slots}, .strides = {1}, .data = exact};
    const moeperm_tensor *inputs[4] = {permuted_tokens, unpermuted_tokens_grad, sorted_indices,
                                       probs};
    const char *names[4] = {"permuted_tokens", "unpermuted_tokens_grad", "sorted_indices", "probs"};
    for (int i = 0; i < 4; i++)
        if ((status = moeperm_check_disjoint(&view, "exact", inputs[i], names[i])))
            return status;
    if ((status = moeperm_check_sorted_indices(sorted_indices)))
        return status;
    return moeperm_ug_exact(permuted_tokens, unpermuted_tokens_grad, sorted_indices, shape.top_k,
                            exact);
}

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

/* An output the kernel writes: its view, its own elements apart, and apart
 * from every input. */
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

/* Every check after the NULL tensors (check.c has the operator's own):
 * dtypes, the outputs all empty (*nothing: the device does nothing), ranks,
 * the tiling's refusals, shapes, views, then the values of sorted_indices.
 * probs_grad without probs is never written, so only its dtype matters. */
static moeperm_status validate(const moeperm_tensor *tokens, const moeperm_tensor *grad,
                               const moeperm_tensor *indices, const moeperm_tensor *probs,
                               const moeperm_tensor *tokens_grad,
                               const moeperm_tensor *probs_grad, ug_shape *shape, bool *nothing)
{
    moeperm_status status;
    if ((status = moeperm_ug_check_dtypes(tokens, grad, indices, probs)) ||
        (status = moeperm_check_same_dtype(tokens_grad, "permuted_tokens_grad_out", tokens,
                                           "permuted_tokens")) ||
        (probs && (status = moeperm_check_same_dtype(probs_grad, "probs_grad_out", probs,
                                                     "probs"))) ||
        (!probs && probs_grad &&
         (status = moeperm_check_float_dtype(probs_grad, "probs_grad_out"))))
        return status;
    const moeperm_tensor *const outputs[2] = {tokens_grad, probs_grad};
    if (moeperm_outputs_empty(outputs, 2)) {
        *nothing = true;
        return MOEPERM_SUCCESS;
    }
    *nothing = false;

    if ((status = moeperm_ug_check_inputs(tokens, grad, indices, probs, shape)) ||
        (status = moeperm_check_ndim(tokens_grad, "permuted_tokens_grad_out", 2,
                                     "[num_out_tokens, hidden_size]")) ||
        (probs && (status = moeperm_check_ndim(probs_grad, "probs_grad_out", 2,
                                               "[tokens_num, top_k]"))) ||
        (status = moeperm_ug_check_tiling(shape)) ||
        (status = moeperm_ug_check_input_shapes(tokens, grad, indices, probs, shape)))
        return status;
    if ((status = moeperm_check_shape2(tokens_grad, "permuted_tokens_grad_out", shape->rows,
                                       shape->hidden, "the shape of permuted_tokens")) ||
        (probs && (status = moeperm_check_shape2(probs_grad, "probs_grad_out", shape->tokens,
                                                 shape->top_k, "the shape of probs"))))
        return status;

    const moeperm_tensor *const inputs[4] = {tokens, grad, indices, probs};
    const char *const names[4] = {"permuted_tokens", "unpermuted_tokens_grad", "sorted_indices",
                                  "probs"};
    if ((status = check_output(tokens_grad, "permuted_tokens_grad_out", inputs, names)) ||
        (probs && (status = check_output(probs_grad, "probs_grad_out", inputs, names))) ||
        (probs && (status = moeperm_check_disjoint(tokens_grad, "permuted_tokens_grad_out",
                                                   probs_grad, "probs_grad_out"))))
        return status;
    int64_t slots = shape->tokens * shape->top_k;
    if ((status = moeperm_check_slots_nonnegative(indices, slots, "permuted_tokens_grad_out")))
        return status;
    return moeperm_ug_check_rows_written_once(indices, slots, shape->rows);
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
    /* the Atlas A2/A3 host code never reads restore_shape and runs the
     * non-padded kernel whatever padded_mode says */
    (void)padded_mode;
    (void)restore_shape;
    (void)restore_shape_len;
    moeperm_status status;
    if (executor)
        *executor = NULL;
    if ((status = moeperm_check_required(permuted_tokens, "permuted_tokens")) ||
        (status = moeperm_check_required(unpermuted_tokens_grad, "unpermuted_tokens_grad")) ||
        (status = moeperm_check_required(sorted_indices, "sorted_indices")) ||
        (status = moeperm_check_required(permuted_tokens_grad_out, "permuted_tokens_grad_out")) ||
        (probs && (status = moeperm_check_required(probs_grad_out, "probs_grad_out"))) ||
        (status = moeperm_check_plan_outputs(workspace_size, executor)))
        return status;

    ug_shape shape;
    bool nothing = false;
    status = validate(permuted_tokens, unpermuted_tokens_grad, sorted_indices, probs,
                      permuted_tokens_grad_out, probs_grad_out, &shape, &nothing);
    if (status != MOEPERM_SUCCESS)
        return status;

    moeperm_executor *made =
        moeperm_executor_new(MOEPERM_OP_UNPERMUTE_GRAD, nothing ? NULL : run_plan,
                             sizeof(struct moeperm_unpermute_grad_plan));
    if (!made)
        return MOEPERM_ERR_INNER;
    struct moeperm_unpermute_grad_plan *ug = made->plan;
    ug->chip.ub_bytes = MOEPERM_CHIP_A2_UB_BYTES;
    ug->chip.vector_cores = MOEPERM_CHIP_A2_VECTOR_CORES;
    if (!nothing) {
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
    }
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
    moeperm_tensor tokens_view = {.dtype = tokens_dtype}, probs_view = {.dtype = probs_dtype};
    if ((status = moeperm_check_float_dtype(&tokens_view, "tokens_dtype")) ||
        (has_probs && (status = moeperm_check_float_dtype(&probs_view, "probs_dtype"))) ||
        (status = moeperm_ug_check_tiling_query(tokens_num, top_k, hidden_size, num_out_tokens,
                                                (int64_t)moeperm_dtype_size(tokens_dtype),
                                                has_probs, chip->vector_cores)))
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
    moeperm_status status;
    if ((status = moeperm_check_required(permuted_tokens, "permuted_tokens")) ||
        (status = moeperm_check_required(unpermuted_tokens_grad, "unpermuted_tokens_grad")) ||
        (status = moeperm_check_required(sorted_indices, "sorted_indices")))
        return status;
    if (!probs)
        return moeperm_fail(MOEPERM_ERR_PARAM_NULLPTR,
                            "probs is NULL; without probs there is no probs gradient");
    ug_shape shape;
    if ((status = moeperm_ug_check_dtypes(permuted_tokens, unpermuted_tokens_grad, sorted_indices,
                                          probs)) ||
        (status = moeperm_ug_check_inputs(permuted_tokens, unpermuted_tokens_grad, sorted_indices,
                                          probs, &shape)) ||
        (status = moeperm_ug_check_input_shapes(permuted_tokens, unpermuted_tokens_grad,
                                                sorted_indices, probs, &shape)))
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
    if ((status = moeperm_check_slots_nonnegative(sorted_indices, slots, "permuted_tokens")))
        return status;
    return moeperm_ug_exact(permuted_tokens, unpermuted_tokens_grad, sorted_indices, shape.top_k,
                            exact);
}

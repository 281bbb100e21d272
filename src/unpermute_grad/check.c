/*
 * unpermute_grad/check.c - the checks of MoeTokenUnpermuteGrad's first
 * phase, of its exact dot products and of its tiling query
 * (docs/operators.md and docs/unpermute-grad.md, "The input domain"): what
 * the Atlas A2/A3 device refuses, and what its kernel gives no determined
 * result for.  The checks every operator shares are core/checks.c's.
 *
 * The device's tiling (moe_token_unpermute_grad_tiling.cpp:295-356) takes
 * N and H from unpermuted_tokens_grad, K from probs (1 without), R from
 * permuted_tokens, refuses a 0 among them (:314-317) and K > 512
 * (:318-322), forces the non-padded kernel whatever padded_mode says
 * (:345-347) and never reads restore_shape.  The kernel writes the row of
 * every slot whose index is below R and nothing else
 * (moe_token_unpermute_grad_prob_none.h:114, _prob_not_none.h:295-299);
 * tokens are spread over the cores, so two slots naming one row would
 * race.
 */
#include <stdlib.h>
#include <string.h>

#include "core/checks.h"
#include "unpermute_grad/unpermute_grad.h"

/* The memory of the largest Atlas A2/A3 chip, 64 GiB: memory_size of the
 * platform configuration of Ascend910B1 (hicann/runtime,
 * src/platform/platform_config/cann/Ascend910B1.ini:23); no A2/A3 part has
 * more.  The device holds its inputs contiguously (the aclnn call makes
 * them so), so a tensor of more bytes cannot reach its kernel. */
#define DEVICE_MEMORY_BYTES (INT64_C(1) << 36)

/* A tensor of `count` elements of `size` bytes the device would hold. */
static moeperm_status device_holds(int64_t rows, int64_t columns, int64_t size,
                                   const char *what)
{
    int64_t elements, bytes;
    if (!__builtin_mul_overflow(rows, columns, &elements) &&
        !__builtin_mul_overflow(elements, size, &bytes) && bytes <= DEVICE_MEMORY_BYTES)
        return MOEPERM_SUCCESS;
    return moeperm_undetermined("%s of [%lld, %lld] elements of %lld bytes is more than the "
                                "%lld bytes of memory of the largest Atlas A2/A3 chip, so no "
                                "device holds it",
                                what, (long long)rows, (long long)columns, (long long)size,
                                (long long)DEVICE_MEMORY_BYTES);
}

moeperm_status moeperm_ug_check_dtypes(const moeperm_tensor *tokens, const moeperm_tensor *grad,
                                       const moeperm_tensor *indices, const moeperm_tensor *probs)
{
    moeperm_status status;
    if ((status = moeperm_check_float_dtype(tokens, "permuted_tokens")) ||
        (status = moeperm_check_same_dtype(grad, "unpermuted_tokens_grad", tokens,
                                           "permuted_tokens")) ||
        (status = moeperm_check_int32(indices, "sorted_indices")) ||
        (probs && (status = moeperm_check_float_dtype(probs, "probs"))))
        return status;
    return MOEPERM_SUCCESS;
}

moeperm_status moeperm_ug_check_inputs(const moeperm_tensor *tokens, const moeperm_tensor *grad,
                                       const moeperm_tensor *indices, const moeperm_tensor *probs,
                                       ug_shape *shape)
{
    moeperm_status status;
    if ((status = moeperm_check_ndim(tokens, "permuted_tokens", 2,
                                     "[num_out_tokens, hidden_size]")) ||
        (status = moeperm_check_ndim(grad, "unpermuted_tokens_grad", 2,
                                     "[tokens_num, hidden_size]")) ||
        (status = moeperm_check_ndim(indices, "sorted_indices", 1, "[tokens_num * top_k]")) ||
        (probs && (status = moeperm_check_ndim(probs, "probs", 2, "[tokens_num, top_k]"))))
        return status;
    shape->tokens = grad->dims[0];
    shape->hidden = grad->dims[1];
    shape->top_k = probs ? probs->dims[1] : 1;
    shape->rows = tokens->dims[0];
    return MOEPERM_SUCCESS;
}

moeperm_status moeperm_ug_check_tiling(const ug_shape *s)
{
    static const char *const names[4] = {
        "tokens_num = 0 (the rows of unpermuted_tokens_grad)",
        "top_k = 0 (the columns of probs)",
        "hidden_size = 0 (the columns of unpermuted_tokens_grad)",
        "num_out_tokens = 0 (the rows of permuted_tokens)",
    };
    const int64_t sizes[4] = {s->tokens, s->top_k, s->hidden, s->rows};
    for (int i = 0; i < 4; i++)
        if (sizes[i] == 0)
            return moeperm_refuse(MOEPERM_ERR_INNER_TILING_ERROR,
                                  "%s: its tiling refuses a shape with a 0 while an output has "
                                  "elements",
                                  names[i]);
    if (s->top_k > MOEPERM_MAX_TOP_K)
        return moeperm_refuse(MOEPERM_ERR_INNER_TILING_ERROR,
                              "top_k = %lld (the columns of probs): its tiling takes at most %d",
                              (long long)s->top_k, MOEPERM_MAX_TOP_K);
    return MOEPERM_SUCCESS;
}

moeperm_status moeperm_ug_check_input_shapes(const moeperm_tensor *tokens,
                                             const moeperm_tensor *grad,
                                             const moeperm_tensor *indices,
                                             const moeperm_tensor *probs, const ug_shape *s)
{
    moeperm_status status;
    int64_t size = (int64_t)moeperm_dtype_size(grad->dtype);
    if ((status = device_holds(s->tokens, s->hidden, size, "unpermuted_tokens_grad")) ||
        (status = device_holds(s->rows, s->hidden, size, "permuted_tokens")) ||
        (status = device_holds(indices->dims[0], 1, 4, "sorted_indices")))
        return status;
    if (tokens->dims[1] != s->hidden)
        return moeperm_undetermined("permuted_tokens has hidden_size %lld but "
                                    "unpermuted_tokens_grad has %lld: the kernel reads rows of "
                                    "the latter's width",
                                    (long long)tokens->dims[1], (long long)s->hidden);
    if (probs && probs->dims[0] != s->tokens)
        return moeperm_undetermined("probs has %lld rows but unpermuted_tokens_grad has %lld "
                                    "(tokens_num): the kernel reads tokens_num rows of probs",
                                    (long long)probs->dims[0], (long long)s->tokens);
    if (s->top_k > 0 && indices->dims[0] / s->top_k < s->tokens)
        return moeperm_undetermined("sorted_indices has %lld entries, fewer than tokens_num * "
                                    "top_k = %lld * %lld: the kernel would read past its end",
                                    (long long)indices->dims[0], (long long)s->tokens,
                                    (long long)s->top_k);
    if ((status = moeperm_check_view(tokens, "permuted_tokens")) ||
        (status = moeperm_check_view(grad, "unpermuted_tokens_grad")) ||
        (status = moeperm_check_view(indices, "sorted_indices")) ||
        (probs && (status = moeperm_check_view(probs, "probs"))))
        return status;
    return MOEPERM_SUCCESS;
}

/* Entries walked side by side by rows_are_distinct(). */
#define INDEX_WALKS 8

/*
 * Whether the n entries that are below rows name distinct rows: each marks
 * its bit in the zeroed bitmap `seen`, and a bit found set is a repeat.
 * INDEX_WALKS stretches of the entries are walked side by side:
 * neighbouring entries often share a bitmap word (expert-sorted orders),
 * and each update of a word waits for the one before it, so a single walk
 * stalls on every entry.  Only the words the entries touch are read, so a
 * bitmap of many more rows than entries costs nothing more.  Negative
 * entries were refused before; read as unsigned they are above rows.
 */
static bool rows_are_distinct(const int32_t *base, int64_t stride, int64_t n, uint64_t rows,
                              uint64_t *seen)
{
    int64_t walk = n / INDEX_WALKS;
    uint64_t repeats = 0;
    for (int64_t i = 0; i < walk; i++)
        for (int64_t w = 0; w < INDEX_WALKS; w++) {
            uint32_t value = (uint32_t)base[(w * walk + i) * stride];
            uint64_t below = value < rows;
            value = below ? value : 0;
            uint64_t bit = below << (value & 63), word = seen[value >> 6];
            repeats |= word & bit;
            seen[value >> 6] = word | bit;
        }
    for (int64_t i = INDEX_WALKS * walk; i < n; i++) {
        uint32_t value = (uint32_t)base[i * stride];
        if (value < rows) {
            uint64_t bit = UINT64_C(1) << (value & 63);
            repeats |= seen[value >> 6] & bit;
            seen[value >> 6] |= bit;
        }
    }
    return repeats == 0;
}

moeperm_status moeperm_ug_check_rows_written_once(const moeperm_tensor *indices, int64_t slots,
                                                  int64_t rows)
{
    if (slots == 0 || rows == 0)
        return MOEPERM_SUCCESS;
    const int32_t *base = (const int32_t *)indices->data + indices->offset;
    int64_t stride = indices->strides[0];
    /* int32 entries name rows below 2^31 only */
    uint64_t named = rows < (INT64_C(1) << 31) ? (uint64_t)rows : UINT64_C(1) << 31;
    size_t words = (size_t)((named + 63) / 64);
    uint64_t *seen = calloc(words, sizeof *seen);
    if (!seen)
        return moeperm_fail(MOEPERM_ERR_INNER,
                            "out of memory allocating %llu bytes to check sorted_indices",
                            (unsigned long long)(words * 8));
    moeperm_status status = MOEPERM_SUCCESS;
    if (!rows_are_distinct(base, stride, slots, named, seen)) {
        /* walk again in order, to name the first repeat and its first use */
        memset(seen, 0, words * sizeof *seen);
        for (int64_t i = 0; i < slots; i++) {
            uint32_t value = (uint32_t)base[i * stride];
            if (value >= named)
                continue;
            uint64_t bit = UINT64_C(1) << (value & 63);
            if (seen[value >> 6] & bit) {
                int64_t first = 0;
                while (base[first * stride] != (int32_t)value)
                    first++;
                status = moeperm_undetermined(
                    "sorted_indices[%lld] = %u and sorted_indices[%lld] = %u both name row %u "
                    "of permuted_tokens_grad_out, below num_out_tokens = %lld: the kernel "
                    "writes that row once per slot, from whichever cores hold the two tokens, "
                    "in no fixed order",
                    (long long)first, value, (long long)i, value, value, (long long)rows);
                break;
            }
            seen[value >> 6] |= bit;
        }
    }
    free(seen);
    return status;
}

moeperm_status moeperm_ug_check_tiling_query(int64_t tokens_num, int64_t top_k,
                                             int64_t hidden_size, int64_t num_out_tokens,
                                             int64_t tokens_size, bool has_probs,
                                             int64_t cores)
{
    if (tokens_num < 0 || top_k < 0 || hidden_size < 0 || num_out_tokens < 0) {
        const char *what = tokens_num < 0 ? "tokens_num" : top_k < 0 ? "top_k"
                           : hidden_size < 0 ? "hidden_size" : "num_out_tokens";
        int64_t value = tokens_num < 0 ? tokens_num : top_k < 0 ? top_k
                        : hidden_size < 0 ? hidden_size : num_out_tokens;
        return moeperm_undetermined("%s = %lld is negative: no tensor has such a shape", what,
                                    (long long)value);
    }
    if (!has_probs && top_k != 1)
        return moeperm_undetermined("top_k = %lld without probs: the kernel then takes top_k = 1",
                                    (long long)top_k);
    ug_shape shape = {tokens_num, top_k, hidden_size, num_out_tokens};
    moeperm_status status = moeperm_ug_check_tiling(&shape);
    if (status != MOEPERM_SUCCESS)
        return status;
    /* The vendor's int64 products (moe_token_unpermute_grad_tiling.cpp):
     * tokenNumEachCore * topK (:136), and the hidden size aligned up to
     * 512 bytes times the bytes a column takes in its buffers, 4 * size +
     * 12 with probs (:196-197, 209-213), 2 * size without (:155-161).
     * Beyond them its arithmetic overflows and the tiling is undefined. */
    int64_t each_core = tokens_num / cores + (tokens_num % cores ? 1 : 0), product;
    if (__builtin_mul_overflow(each_core, top_k, &product))
        return moeperm_undetermined("tokens_num = %lld: with top_k = %lld on %lld cores the "
                                    "tiling's tokens per core times top_k overflows int64",
                                    (long long)tokens_num, (long long)top_k, (long long)cores);
    int64_t unit = has_probs ? 512 / tokens_size : 32 / tokens_size;
    int64_t column = has_probs ? 4 * tokens_size + 12 : 2 * tokens_size;
    int64_t aligned;
    if (__builtin_add_overflow(hidden_size, unit - 1, &aligned) ||
        __builtin_mul_overflow(aligned / unit * unit, column, &product))
        return moeperm_undetermined("hidden_size = %lld: the tiling's aligned hidden size times "
                                    "the %lld bytes a column takes overflows int64",
                                    (long long)hidden_size, (long long)column);
    return MOEPERM_SUCCESS;
}

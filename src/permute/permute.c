/*
 * permute.c - MoeTokenPermute, the forward dispatch: every token copied
 * once per expert it chose, the copies grouped by expert.
 *
 * The order is the stable sort of the flattened expert ids, computed by the
 * project's one sort (moeperm_route_ranks() in route.c) on int32 keys: the
 * ids themselves, with the index dtype's minimum mapped below every id and
 * its maximum above every id, which is where the device's sort puts those
 * two sentinels.  The copy moves bytes, never values, so NaN payloads and
 * int8 tokens come through untouched and the caller's floating-point
 * environment does not matter.
 *
 * Each thread takes whole source tokens and writes their copies: a token
 * row is read from memory once and written K times, and every output row is
 * written by exactly one thread, so the result cannot depend on the number
 * of threads.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/checks.h"
#include "core/dispatch.h"
#include "core/internal.h"
#include "permute/permute.h"

#ifdef MOEPERM_HAVE_X86_PATH
#include "x86/x86.h"
#endif

/* Outputs at least this large are written with non-temporal stores where
 * the instruction set the library chose has them (the x86 ones:
 * src/x86/copy_template.h): nobody reads the copies soon, and skipping the
 * read-for-ownership of each destination line saves a third of the
 * traffic.  memcpy() does the same for large copies. */
#define STREAM_MIN_BYTES (INT64_C(8) << 20)

/* The ids the device sorts correctly, [0, ID_LIMIT), besides the two
 * sentinels; N*K must stay below it too. */
#define ID_LIMIT ((int64_t)MOEPERM_MAX_EXPERT_ID + 1)

/* Flat position i = n*K + k of the view indices ([N, K] or [N]). */
static int64_t read_id(const moeperm_tensor *ix, int64_t top_k, int64_t i)
{
    int64_t n = i / top_k, k = i % top_k;
    int64_t at = ix->offset + n * ix->strides[0] + (ix->ndim == 2 ? k * ix->strides[1] : 0);
    if (ix->dtype == MOEPERM_INT64)
        return ((const int64_t *)ix->data)[at];
    return ((const int32_t *)ix->data)[at];
}

static void id_sentinels(moeperm_dtype dtype, int64_t *lowest, int64_t *highest)
{
    *lowest = dtype == MOEPERM_INT64 ? INT64_MIN : INT32_MIN;
    *highest = dtype == MOEPERM_INT64 ? INT64_MAX : INT32_MAX;
}

static moeperm_status check_ids(const moeperm_tensor *ix, int64_t top_k, int64_t count)
{
    int64_t lowest, highest;
    id_sentinels(ix->dtype, &lowest, &highest);
    for (int64_t i = 0; i < count; i++) {
        int64_t id = read_id(ix, top_k, i);
        if ((id >= 0 && id < ID_LIMIT) || id == lowest || id == highest)
            continue;
        char where[64];
        if (ix->ndim == 2)
            snprintf(where, sizeof where, "indices[%lld][%lld]", (long long)(i / top_k),
                     (long long)(i % top_k));
        else
            snprintf(where, sizeof where, "indices[%lld]", (long long)i);
        return moeperm_undetermined("%s = %lld is outside [0, %lld] and is not the %s minimum "
                                    "or maximum (the sentinels): the sort's binary32 keys do "
                                    "not order it exactly",
                                    where, (long long)id, (long long)(ID_LIMIT - 1),
                                    moeperm_dtype_name(ix->dtype));
    }
    return MOEPERM_SUCCESS;
}

/* The elements of one token: the product of the dims after the first
 * (the device's cols, moe_token_permute_tiling.cpp:302-305), or -1 when it
 * overflows int64. */
static int64_t row_elements(const moeperm_tensor *t)
{
    int64_t cols = 1;
    for (uint64_t i = 1; i < t->ndim; i++)
        if (__builtin_mul_overflow(cols, t->dims[i], &cols))
            return -1;
    return cols;
}

/* "d1 x d2 x ...": the dims after the first, for a message. */
static const char *row_dims(const moeperm_tensor *t, char *buf, size_t len)
{
    size_t at = 0;
    buf[0] = '\0';
    for (uint64_t i = 1; i < t->ndim && at < len; i++) {
        int n = snprintf(buf + at, len - at, "%s%lld", i > 1 ? " x " : "",
                         (long long)t->dims[i]);
        if (n < 0)
            break;
        at += (size_t)n;
    }
    return buf;
}

/*
 * The first phase's checks (docs/operators.md, "The input domain"): what
 * the Atlas A2/A3 device refuses, and what its kernel gives no determined
 * result for.  Its tiling refuses, in this order, padded_mode
 * (moe_token_permute_tiling.cpp:295-298), indices of a rank other than 1
 * or 2 (307-311), indices whose rows are not the tokens' (313-318),
 * top_k > 512 (329-335), N*K >= 16777215 (338-344), then outputs of the
 * wrong shape (239-275); all with 561002.  On success *nothing says both
 * outputs are empty (the device does nothing), else *top_k_out and
 * *num_out_out are K and the rows kept.
 */
static moeperm_status check_permute(const moeperm_tensor *tokens, const moeperm_tensor *ix,
                                    int64_t num_out_tokens, bool padded_mode,
                                    const moeperm_tensor *out, const moeperm_tensor *sorted,
                                    int64_t *top_k_out, int64_t *num_out_out, bool *nothing)
{
    moeperm_status status;
    if (tokens->dtype != MOEPERM_FLOAT && tokens->dtype != MOEPERM_FLOAT16 &&
        tokens->dtype != MOEPERM_BF16 && tokens->dtype != MOEPERM_INT8)
        return moeperm_refuse(MOEPERM_ERR_PARAM_INVALID,
                              "tokens dtype %d (%s): it takes FLOAT (0), FLOAT16 (1), BF16 (27) "
                              "or INT8 (2)",
                              (int)tokens->dtype, moeperm_dtype_name(tokens->dtype));
    if ((status = moeperm_check_same_dtype(out, "permute_tokens_out", tokens, "tokens")))
        return status;
    if (ix->dtype != MOEPERM_INT32 && ix->dtype != MOEPERM_INT64)
        return moeperm_refuse(MOEPERM_ERR_PARAM_INVALID,
                              "indices dtype %d (%s): it takes INT32 (3) or INT64 (9)",
                              (int)ix->dtype, moeperm_dtype_name(ix->dtype));
    if ((status = moeperm_check_int32(sorted, "sorted_indices_out")))
        return status;
    const moeperm_tensor *const outputs[2] = {out, sorted};
    if (moeperm_outputs_empty(outputs, 2)) {
        *nothing = true;
        return MOEPERM_SUCCESS;
    }
    *nothing = false;

    if (padded_mode)
        return moeperm_refuse(MOEPERM_ERR_INNER_TILING_ERROR,
                              "padded_mode = true: its tiling supports only false");
    if (tokens->ndim < 2)
        return moeperm_refuse(MOEPERM_ERR_INNER_TILING_ERROR,
                              "tokens with %llu dims: it needs at least 2 ([tokens_num, "
                              "hidden_size...])",
                              (unsigned long long)tokens->ndim);
    if (ix->ndim != 1 && ix->ndim != 2)
        return moeperm_refuse(MOEPERM_ERR_INNER_TILING_ERROR,
                              "indices with %llu dims: its tiling takes 2 ([tokens_num, top_k]) "
                              "or 1 ([tokens_num], top_k = 1)",
                              (unsigned long long)ix->ndim);
    int64_t tokens_num = tokens->dims[0];
    if (ix->dims[0] != tokens_num)
        return moeperm_refuse(MOEPERM_ERR_INNER_TILING_ERROR,
                              "indices with %lld rows beside tokens with %lld (tokens_num): its "
                              "tiling wants the same",
                              (long long)ix->dims[0], (long long)tokens_num);
    int64_t top_k = ix->ndim == 2 ? ix->dims[1] : 1;
    if (top_k > MOEPERM_MAX_TOP_K)
        return moeperm_refuse(MOEPERM_ERR_INNER_TILING_ERROR,
                              "indices with %lld columns (top_k): its tiling takes at most %d",
                              (long long)top_k, MOEPERM_MAX_TOP_K);
    if (top_k > 0 && tokens_num > (ID_LIMIT - 1) / top_k)
        return moeperm_refuse(MOEPERM_ERR_INNER_TILING_ERROR,
                              "tokens_num * top_k = %lld * %lld: its tiling takes fewer than "
                              "%lld entries, the most its sort orders exactly",
                              (long long)tokens_num, (long long)top_k, (long long)ID_LIMIT);
    int64_t count = tokens_num * top_k;
    int64_t num_out = num_out_tokens <= 0 ? num_out_tokens + count : num_out_tokens;
    num_out = num_out < 0 ? 0 : num_out > count ? count : num_out;

    int64_t hidden = row_elements(tokens);
    char dims[256];
    if (hidden < 0)
        return moeperm_undetermined("the dims of tokens after the first, %s, multiply past 2^63",
                                    row_dims(tokens, dims, sizeof dims));
    if (out->ndim < 2)
        return moeperm_refuse(MOEPERM_ERR_INNER_TILING_ERROR,
                              "permute_tokens_out with %llu dims: its tiling wants at least 2",
                              (unsigned long long)out->ndim);
    if (sorted->ndim != 1)
        return moeperm_refuse(MOEPERM_ERR_INNER_TILING_ERROR,
                              "sorted_indices_out with %llu dims: its tiling wants 1 "
                              "([tokens_num * top_k])",
                              (unsigned long long)sorted->ndim);
    if (sorted->dims[0] != count)
        return moeperm_refuse(MOEPERM_ERR_INNER_TILING_ERROR,
                              "sorted_indices_out with %lld entries: its tiling wants "
                              "tokens_num * top_k = %lld * %lld = %lld",
                              (long long)sorted->dims[0], (long long)tokens_num,
                              (long long)top_k, (long long)count);
    int64_t out_hidden = row_elements(out);
    if (out_hidden < 0) /* the tiling's int64 product wraps: no determined verdict */
        return moeperm_undetermined("the dims of permute_tokens_out after the first, %s, "
                                    "multiply past 2^63",
                                    row_dims(out, dims, sizeof dims));
    if (out_hidden != hidden)
        return moeperm_refuse(MOEPERM_ERR_INNER_TILING_ERROR,
                              "permute_tokens_out with rows of %lld elements: its tiling wants "
                              "those of tokens, %lld (hidden_size)",
                              (long long)out_hidden, (long long)hidden);
    if (out->dims[0] != num_out)
        return moeperm_refuse(MOEPERM_ERR_INNER_TILING_ERROR,
                              "permute_tokens_out with %lld rows: its tiling wants %lld "
                              "(num_out_tokens = %lld keeps %lld of the %lld rows)",
                              (long long)out->dims[0], (long long)num_out,
                              (long long)num_out_tokens, (long long)num_out, (long long)count);

    if ((status = moeperm_check_view(tokens, "tokens")) ||
        (status = moeperm_check_view(ix, "indices")) ||
        (status = moeperm_check_view(out, "permute_tokens_out")) ||
        (status = moeperm_check_view(sorted, "sorted_indices_out")))
        return status;
    if ((status = moeperm_check_no_self_overlap(out, "permute_tokens_out")) ||
        (status = moeperm_check_no_self_overlap(sorted, "sorted_indices_out")) ||
        (status = moeperm_check_disjoint(out, "permute_tokens_out", sorted,
                                         "sorted_indices_out")) ||
        (status = moeperm_check_disjoint(out, "permute_tokens_out", tokens, "tokens")) ||
        (status = moeperm_check_disjoint(out, "permute_tokens_out", ix, "indices")) ||
        (status = moeperm_check_disjoint(sorted, "sorted_indices_out", tokens, "tokens")) ||
        (status = moeperm_check_disjoint(sorted, "sorted_indices_out", ix, "indices")))
        return status;
    if ((status = check_ids(ix, top_k, count)) != MOEPERM_SUCCESS)
        return status;

    *top_k_out = top_k;
    *num_out_out = num_out;
    return MOEPERM_SUCCESS;
}

static moeperm_status run_plan(const void *plan, int threads)
{
    return moeperm_permute_run(plan, threads);
}

moeperm_status moeperm_token_permute_get_workspace_size(
    const moeperm_tensor *tokens, const moeperm_tensor *indices, int64_t num_out_tokens,
    bool padded_mode, moeperm_tensor *permute_tokens_out, moeperm_tensor *sorted_indices_out,
    uint64_t *workspace_size, moeperm_executor **executor)
{
    moeperm_status status;
    if (executor)
        *executor = NULL;
    if ((status = moeperm_check_required(tokens, "tokens")) ||
        (status = moeperm_check_required(indices, "indices")) ||
        (status = moeperm_check_required(permute_tokens_out, "permute_tokens_out")) ||
        (status = moeperm_check_required(sorted_indices_out, "sorted_indices_out")) ||
        (status = moeperm_check_plan_outputs(workspace_size, executor)))
        return status;

    int64_t top_k = 0, num_out = 0;
    bool nothing = false;
    status = check_permute(tokens, indices, num_out_tokens, padded_mode, permute_tokens_out,
                           sorted_indices_out, &top_k, &num_out, &nothing);
    if (status != MOEPERM_SUCCESS)
        return status;

    moeperm_executor *made =
        moeperm_executor_new(MOEPERM_OP_PERMUTE, nothing ? NULL : run_plan,
                             nothing ? 0 : sizeof(struct moeperm_permute_plan));
    if (!made)
        return MOEPERM_ERR_INNER;
    if (!nothing) {
        struct moeperm_permute_plan *plan = made->plan;
        plan->tokens = *tokens;
        plan->indices = *indices;
        plan->permute_tokens = *permute_tokens_out;
        plan->sorted_indices = *sorted_indices_out;
        plan->top_k = top_k;
        plan->num_out_tokens = num_out;
    }
    *workspace_size = 0;
    *executor = made;
    return MOEPERM_SUCCESS;
}

/* The sort keys: ids as they are, the dtype's minimum below every id (-1)
 * and its maximum just above the largest id, so that the counters of the
 * counting sort still cover only the span of ids that occur.  Ids the
 * first phase accepted are never anything else; an id changed since is
 * sorted like the sentinel on its side, and the ranks stay a permutation
 * whatever the memory holds. */
static void sort_keys(const moeperm_tensor *ix, int64_t top_k, int64_t count, int32_t *keys)
{
    int32_t largest = -1;
    bool any_maximum = false;
    for (int64_t i = 0; i < count; i++) {
        int64_t id = read_id(ix, top_k, i);
        if (id < 0) {
            keys[i] = -1;
        } else if (id >= ID_LIMIT) {
            keys[i] = INT32_MAX;
            any_maximum = true;
        } else {
            keys[i] = (int32_t)id;
            largest = keys[i] > largest ? keys[i] : largest;
        }
    }
    if (any_maximum)
        for (int64_t i = 0; i < count; i++)
            if (keys[i] == INT32_MAX)
                keys[i] = largest + 1;
}

/* Copies one row of `hidden` elements of `size` bytes between views with
 * column strides src_step and dst_step; stream_copy, when not NULL, copies
 * a contiguous row past the caches. */
static void copy_row(char *restrict dst, int64_t dst_step, const char *restrict src,
                     int64_t src_step, int64_t hidden, int64_t size,
                     void (*stream_copy)(void *, const void *, size_t))
{
    if (src_step == 1 && dst_step == 1) {
        if (stream_copy)
            stream_copy(dst, src, (size_t)(hidden * size));
        else
            memcpy(dst, src, (size_t)(hidden * size));
        return;
    }
    int64_t ds = dst_step * size, ss = src_step * size;
    for (int64_t h = 0; h < hidden; h++)
        memcpy(dst + h * ds, src + h * ss, (size_t)size);
}

/* A token's elements (the dims after the first, row-major) as one run of
 * elements *step apart, when the strides allow it (dims of 1 aside). */
static bool row_step(const moeperm_tensor *t, int64_t *step)
{
    int64_t next = 0; /* the stride the next outer dim needs, once one is seen */
    *step = 1;
    for (uint64_t i = t->ndim - 1; i >= 1; i--) {
        if (t->dims[i] == 1)
            continue;
        if (next && t->strides[i] != next)
            return false;
        if (!next)
            *step = t->strides[i];
        next = t->strides[i] * t->dims[i];
    }
    return true;
}

/* Element h of a token's elements, in elements from the token's first. */
static int64_t element_at(const moeperm_tensor *t, int64_t h)
{
    int64_t at = 0;
    for (uint64_t i = t->ndim - 1; i >= 1; i--) {
        at += h % t->dims[i] * t->strides[i];
        h /= t->dims[i];
    }
    return at;
}

/* Copies one token between views whose dims after the first do not fold
 * into one stride: element by element. */
static void copy_elements(char *restrict dst, const moeperm_tensor *out,
                          const char *restrict src, const moeperm_tensor *tokens, int64_t hidden,
                          int64_t size)
{
    for (int64_t h = 0; h < hidden; h++)
        memcpy(dst + element_at(out, h) * size, src + element_at(tokens, h) * size,
               (size_t)size);
}

moeperm_status moeperm_permute_run(const struct moeperm_permute_plan *plan, int threads)
{
    const moeperm_tensor *tokens = &plan->tokens, *ix = &plan->indices;
    const moeperm_tensor *out = &plan->permute_tokens;
    const moeperm_tensor *sorted = &plan->sorted_indices;
    int64_t top_k = plan->top_k, num_out = plan->num_out_tokens;
    int64_t tokens_num = tokens->dims[0], count = tokens_num * top_k;
    if (count == 0)
        return MOEPERM_SUCCESS;
    int64_t hidden = moeperm_view_elements(tokens) / tokens_num; /* the first phase's cols */

    /* The ranks go straight into sorted_indices_out when it is contiguous;
     * moeperm_route_ranks() writes nothing unless it succeeds, so a failed
     * run leaves both outputs untouched either way. */
    bool direct = sorted->strides[0] == 1;
    int32_t *keys = malloc((size_t)count * sizeof *keys);
    int32_t *ranks = direct ? (int32_t *)sorted->data + sorted->offset
                            : malloc((size_t)count * sizeof *ranks);
    if (!keys || !ranks) {
        free(keys);
        if (!direct)
            free(ranks);
        return moeperm_fail(MOEPERM_ERR_INNER,
                            "out of memory allocating the sort of %lld expert ids",
                            (long long)count);
    }
    sort_keys(ix, top_k, count, keys);
    moeperm_status status = moeperm_route_ranks(keys, (size_t)count, ranks);
    free(keys);
    if (status != MOEPERM_SUCCESS) {
        if (!direct)
            free(ranks);
        return status;
    }

    if (num_out > 0 && hidden > 0) {
        int64_t size = (int64_t)moeperm_dtype_size(tokens->dtype);
        const char *src = (const char *)tokens->data + tokens->offset * size;
        char *dst = (char *)out->data + out->offset * size;
        int64_t src_row = tokens->strides[0] * size, dst_row = out->strides[0] * size;
        int64_t src_step = 0, dst_step = 0; /* set by row_step() when folds */
        bool folds = row_step(tokens, &src_step) && row_step(out, &dst_step);
        int team = moeperm_threads_for_bytes(
            threads, ((double)tokens_num + (double)num_out) * (double)hidden * (double)size);
        /* Runs of tokens handed out one at a time: a thread the OS keeps
         * waiting on a busy machine leaves its share to the others. */
        int64_t run = tokens_num / ((int64_t)team * 8);
        run = run < 1 ? 1 : run > 64 ? 64 : run;
        void (*stream_copy)(void *, const void *, size_t) = NULL;
        void (*fence)(void) = NULL;
#ifdef MOEPERM_HAVE_X86_PATH
        const moeperm_x86_kernels *kernels =
            moeperm_x86_kernels_for(moeperm_isa_resolve(MOEPERM_ISA_AUTO));
        if (kernels && num_out * hidden * size >= STREAM_MIN_BYTES)
            stream_copy = kernels->stream_copy, fence = kernels->fence;
#endif
        (void)team;
#ifdef _OPENMP
#pragma omp parallel num_threads(team) if (team > 1)
#endif
        {
#ifdef _OPENMP
#pragma omp for schedule(dynamic, run) nowait
#endif
            for (int64_t n = 0; n < tokens_num; n++) {
                for (int64_t k = 0; k < top_k; k++) {
                    int64_t row = ranks[n * top_k + k];
                    if (row < num_out && folds)
                        copy_row(dst + row * dst_row, dst_step, src + n * src_row, src_step,
                                 hidden, size, stream_copy);
                    else if (row < num_out)
                        copy_elements(dst + row * dst_row, out, src + n * src_row, tokens,
                                      hidden, size);
                }
            }
            /* makes this thread's non-temporal stores visible before the
             * run returns */
            if (fence)
                fence();
        }
    }

    if (!direct) {
        int32_t *base = (int32_t *)sorted->data + sorted->offset;
        for (int64_t i = 0; i < count; i++)
            base[i * sorted->strides[0]] = ranks[i];
        free(ranks);
    }
    return MOEPERM_SUCCESS;
}

moeperm_status moeperm_token_permute(void *workspace, uint64_t workspace_size,
                                     moeperm_executor *executor, void *stream)
{
    (void)workspace;
    (void)workspace_size; /* the CPU plan needs no workspace, so any size is enough */
    return moeperm_executor_finish(executor, stream, MOEPERM_OP_PERMUTE);
}

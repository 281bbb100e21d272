/*
 * unpermute.c - MoeTokenUnpermute, the forward combine: each token's K
 * expert outputs, scaled by its probs, summed back into one row.
 *
 * For every token n and column h (docs/operators.md):
 *   slot k is included  iff  sorted_indices[n*K+k] < R  and  probs[n, k] != 0
 *   acc = included(0) ? x_0 * p_0 : +0.0f
 *   acc = acc + x_k * p_k      for k = 1..K-1 in order, when included
 *   out[n, h] = narrow(acc)
 *
 * This is the sum of src/sum/ with a multiply and the p != 0 rule, and the
 * sum goes through the same moeperm_accumulate() (core/kernel.h), so it
 * gives the same bits, NaNs included, where the arithmetic meets.  Without
 * probs there is no multiply at all and the operator IS that sum with
 * top_k = 1: it runs it (moeperm_sum_run()).
 *
 * Work is split over (token, column block) tasks as in src/sum/sum.c;
 * each output element comes from one task with the k loop in order, so the
 * bits do not depend on the number of threads.  The multiply and the add
 * are separate statements and the build forbids contraction, so nothing is
 * fused; the loops vectorise across columns only.  A block is first summed
 * optimistically, with plain additions, and summed again with the NaN
 * order pinned only when it ends with a NaN (see DEFINE_ROW_OPS).
 *
 * That portable loop is the reference.  Where the library's one choice of
 * instruction set (src/core/dispatch.c) is an x86 one and the rows and out
 * have unit column strides, the operator runs that set's scaled segments
 * instead (src/x86/permute_grad_template.h), which keep the sums in
 * registers across all of a token's rows; tests/core/test_fast_paths.c
 * holds them to this loop bit for bit.
 */
#include <stdlib.h>
#include <string.h>

#include "core/fp.h"
#include "core/fp_env.h"
#include "core/checks.h"
#include "core/internal.h"
#include "core/kernel.h"
#include "unpermute/unpermute.h"
#include "sum/sum_x86.h"

/* Columns per task: 8 KiB of fp32 accumulators, comfortably inside L1. */
#define COLUMN_BLOCK 2048

/*
 * x * p when p is a NaN.  Where only x is a NaN, every IEEE CPU returns x
 * made quiet, whatever the operand order, so the ordinary product is
 * already independent of the compiler.  With two NaNs the order decides; it
 * is pinned here as x86 does with the token value as first operand: a NaN
 * x comes out (made quiet), otherwise the quiet p.
 */
static inline float nan_product(float x, uint32_t p_quiet)
{
    uint32_t bits = fp_bits(x);
    uint32_t nan = 0u - (uint32_t)((bits & 0x7fffffffu) > 0x7f800000u);
    return fp_from_bits(((bits | 0x00400000u) & nan) | (p_quiet & ~nan));
}

/* One row's products, started (first_) or added to the accumulators, with
 * an ordinary prob (add_fast_ and add_) or a NaN one (add_nan_), and the
 * narrowing store.  `stride` is passed as a literal 1 on the contiguous
 * path so the compiler can vectorise across columns.
 *
 * add_fast_ adds with a plain `+`, whose operand order the compiler may
 * choose.  That changes bits only when both operands are NaNs, and a NaN
 * accumulator stays a NaN through every later addition: when no column of
 * a block ends as a NaN, no addition met a NaN accumulator, and the plain
 * sums are exactly moeperm_accumulate()'s.  A block that does end with a
 * NaN is summed again with add_ and add_nan_, the order pinned.  For the
 * same reason the optimistic pass (first_fast_, add_fast_) may widen with
 * `fast_widen`, which need only be right for values that are not NaNs: a
 * NaN token value makes its product, and so the block, end as a NaN. */
#define DEFINE_ROW_OPS(suffix, type, widen, fast_widen, narrow)                               \
    static inline void first_##suffix(float *restrict acc, const type *restrict row,          \
                                      int64_t stride, float p, int64_t n)                     \
    {                                                                                         \
        for (int64_t j = 0; j < n; j++) {                                                     \
            float x = widen(row[j * stride]);                                                 \
            acc[j] = x * p;                                                                   \
        }                                                                                     \
    }                                                                                         \
    static inline void first_fast_##suffix(float *restrict acc, const type *restrict row,     \
                                           int64_t stride, float p, int64_t n)                \
    {                                                                                         \
        for (int64_t j = 0; j < n; j++) {                                                     \
            float x = fast_widen(row[j * stride]);                                            \
            acc[j] = x * p;                                                                   \
        }                                                                                     \
    }                                                                                         \
    static inline void add_fast_##suffix(float *restrict acc, const type *restrict row,       \
                                         int64_t stride, float p, int64_t n)                  \
    {                                                                                         \
        for (int64_t j = 0; j < n; j++) {                                                     \
            float x = fast_widen(row[j * stride]);                                            \
            float product = x * p;                                                            \
            acc[j] = acc[j] + product;                                                        \
        }                                                                                     \
    }                                                                                         \
    static void add_##suffix(float *restrict acc, const type *restrict row, int64_t stride,   \
                             float p, int64_t n)                                              \
    {                                                                                         \
        for (int64_t j = 0; j < n; j++) {                                                     \
            float x = widen(row[j * stride]);                                                 \
            float product = x * p;                                                            \
            acc[j] = moeperm_accumulate(acc[j], product);                                     \
        }                                                                                     \
    }                                                                                         \
    static void first_nan_##suffix(float *restrict acc, const type *restrict row,             \
                                   int64_t stride, uint32_t p_quiet, int64_t n)               \
    {                                                                                         \
        for (int64_t j = 0; j < n; j++)                                                       \
            acc[j] = nan_product(widen(row[j * stride]), p_quiet);                            \
    }                                                                                         \
    static void add_nan_##suffix(float *restrict acc, const type *restrict row,               \
                                 int64_t stride, uint32_t p_quiet, int64_t n)                 \
    {                                                                                         \
        for (int64_t j = 0; j < n; j++) {                                                     \
            float product = nan_product(widen(row[j * stride]), p_quiet);                     \
            acc[j] = moeperm_accumulate(acc[j], product);                                     \
        }                                                                                     \
    }                                                                                         \
    static inline void store_##suffix(type *restrict out, const float *restrict acc,         \
                                      int64_t stride, int64_t n)                              \
    {                                                                                         \
        for (int64_t j = 0; j < n; j++)                                                       \
            out[j * stride] = narrow(acc[j]);                                                 \
    }

static inline float widen_f32(float x)
{
    return x;
}
static inline float narrow_f32(float x)
{
    return x;
}

/* bf16 is the upper half of a binary32: for anything but a NaN (which
 * fp_bf16_to_float() makes quiet) widening is the shift alone. */
static inline float widen_bf16_not_nan(uint16_t h)
{
    return fp_from_bits((uint32_t)h << 16);
}

DEFINE_ROW_OPS(f32, float, widen_f32, widen_f32, narrow_f32)
DEFINE_ROW_OPS(f16, uint16_t, fp_fp16_to_float, fp_fp16_to_float, fp_float_to_fp16)
DEFINE_ROW_OPS(bf16, uint16_t, fp_bf16_to_float, widen_bf16_not_nan, fp_float_to_bf16)

/* Whether any of the n accumulators is a NaN (a reduction that vectorises). */
static inline bool any_nan(const float *acc, int64_t n)
{
    uint32_t found = 0;
    for (int64_t j = 0; j < n; j++)
        found |= (uint32_t)((fp_bits(acc[j]) & 0x7fffffffu) > 0x7f800000u);
    return found != 0;
}

/* An included slot of a token: its row of permuted_tokens and its prob. */
typedef struct included_slot {
    int64_t row;
    float p;
    uint32_t p_quiet; /* the quiet bits of p when p is a NaN, else 0 */
} included_slot;

static float widen_prob(const moeperm_tensor *probs, int64_t n, int64_t k)
{
    int64_t at = probs->offset + n * probs->strides[0] + k * probs->strides[1];
    if (probs->dtype == MOEPERM_FLOAT)
        return ((const float *)probs->data)[at];
    uint16_t bits = ((const uint16_t *)probs->data)[at];
    return probs->dtype == MOEPERM_FLOAT16 ? fp_fp16_to_float(bits) : fp_bf16_to_float(bits);
}

/* The included slots of token n in k order; *zero_start says slot 0 is not
 * among them, so the sum starts from +0.0.  p != 0 is a test of the bits,
 * so that a caller's denormals-are-zero mode cannot drop a subnormal prob. */
static int64_t included_slots(const struct moeperm_unpermute_plan *plan, int64_t n,
                              included_slot *slots, bool *zero_start)
{
    const moeperm_tensor *ix = &plan->sum.indices;
    const int32_t *idx = (const int32_t *)ix->data + ix->offset;
    int64_t rows = plan->sum.permuted.dims[0], top_k = plan->sum.top_k;
    int64_t count = 0;
    *zero_start = true;
    for (int64_t k = 0; k < top_k; k++) {
        /* Unsigned compare: a negative index is skipped like a dropped one. */
        uint64_t r = (uint64_t)(int64_t)idx[(n * top_k + k) * ix->strides[0]];
        if (r >= (uint64_t)rows)
            continue;
        float p = widen_prob(&plan->probs, n, k);
        uint32_t bits = fp_bits(p);
        if ((bits & 0x7fffffffu) == 0)
            continue;
        bool nan = (bits & 0x7fffffffu) > 0x7f800000u;
        slots[count++] = (included_slot){(int64_t)r, p, nan ? bits | 0x00400000u : 0};
        if (k == 0)
            *zero_start = false;
    }
    return count;
}

/* Asks for every line of token t's rows in columns [c0, c0+n) to be
 * brought towards the cache, so that the next task finds them there: the
 * rows are scattered over permuted_tokens, and a hardware prefetcher sees
 * each as a new stream. */
static void prefetch_task(const struct moeperm_unpermute_plan *plan, int64_t t, int64_t c0, int64_t n)
{
#if defined(__GNUC__)
    const moeperm_tensor *x = &plan->sum.permuted;
    const moeperm_tensor *ix = &plan->sum.indices;
    const int32_t *idx = (const int32_t *)ix->data + ix->offset;
    int64_t rows = x->dims[0], top_k = plan->sum.top_k;
    int64_t size = (int64_t)moeperm_dtype_size(x->dtype);
    if (x->strides[1] != 1 || t >= plan->sum.out.dims[0])
        return;
    for (int64_t k = 0; k < top_k; k++) {
        uint64_t r = (uint64_t)(int64_t)idx[(t * top_k + k) * ix->strides[0]];
        if (r >= (uint64_t)rows)
            continue;
        const char *row =
            (const char *)x->data + (x->offset + (int64_t)r * x->strides[0] + c0) * size;
        for (int64_t b = 0; b < n * size; b += 64)
            __builtin_prefetch(row + b, 0, 2);
    }
#else
    (void)plan, (void)t, (void)c0, (void)n;
#endif
}

/* One task: token t, columns [c0, c0+n): the optimistic sum, then, only
 * when a column ends as a NaN, the sum again with the NaN order pinned. */
#define DEFINE_TASK(suffix, type)                                                             \
    static void task_##suffix(const struct moeperm_unpermute_plan *plan, int64_t t,          \
                              int64_t c0, int64_t n)                                          \
    {                                                                                         \
        float acc[COLUMN_BLOCK];                                                              \
        included_slot slots[MOEPERM_MAX_TOP_K];                                               \
        const type *rows[MOEPERM_MAX_TOP_K];                                                  \
        bool zero_start;                                                                      \
        int64_t count = included_slots(plan, t, slots, &zero_start);                          \
        const moeperm_tensor *x = &plan->sum.permuted;                           \
        const moeperm_tensor *o = &plan->sum.out;                                       \
        int64_t sc = x->strides[1], oc = o->strides[1];                                       \
        type *out = (type *)o->data + o->offset + t * o->strides[0] + c0 * oc;                \
        bool nan_prob = false;                                                                \
        for (int64_t s = 0; s < count; s++) {                                                 \
            /* count > 0: x has rows, so its data is not NULL */                              \
            rows[s] =                                                                         \
                (const type *)x->data + x->offset + slots[s].row * x->strides[0] + c0 * sc;   \
            nan_prob |= slots[s].p_quiet != 0;                                                \
        }                                                                                     \
        int64_t first = zero_start ? 0 : 1;                                                   \
        if (zero_start)                                                                       \
            memset(acc, 0, (size_t)n * sizeof *acc);                                          \
        bool exact = nan_prob;                                                                \
        if (!nan_prob) {                                                                      \
            for (int64_t s = 0; s < count; s++) {                                             \
                if (s < first && sc == 1)                                                     \
                    first_fast_##suffix(acc, rows[s], 1, slots[s].p, n);                      \
                else if (s < first)                                                           \
                    first_fast_##suffix(acc, rows[s], sc, slots[s].p, n);                     \
                else if (sc == 1)                                                             \
                    add_fast_##suffix(acc, rows[s], 1, slots[s].p, n);                        \
                else                                                                          \
                    add_fast_##suffix(acc, rows[s], sc, slots[s].p, n);                       \
            }                                                                                 \
            exact = any_nan(acc, n);                                                          \
        }                                                                                     \
        if (exact) {                                                                          \
            if (zero_start)                                                                   \
                memset(acc, 0, (size_t)n * sizeof *acc);                                      \
            for (int64_t s = 0; s < count; s++) {                                             \
                if (slots[s].p_quiet && s < first)                                            \
                    first_nan_##suffix(acc, rows[s], sc, slots[s].p_quiet, n);                \
                else if (slots[s].p_quiet)                                                    \
                    add_nan_##suffix(acc, rows[s], sc, slots[s].p_quiet, n);                  \
                else if (s < first)                                                           \
                    first_##suffix(acc, rows[s], sc, slots[s].p, n);                          \
                else                                                                          \
                    add_##suffix(acc, rows[s], sc, slots[s].p, n);                            \
            }                                                                                 \
        }                                                                                     \
        if (oc == 1)                                                                          \
            store_##suffix(out, acc, 1, n);                                                   \
        else                                                                                  \
            store_##suffix(out, acc, oc, n);                                                  \
    }

DEFINE_TASK(f32, float)
DEFINE_TASK(f16, uint16_t)
DEFINE_TASK(bf16, uint16_t)

void moeperm_unpermute_run(const struct moeperm_unpermute_plan *plan, int threads)
{
    int64_t tokens = plan->sum.out.dims[0], hidden = plan->sum.out.dims[1];
    if (tokens == 0 || hidden == 0)
        return;
    if (!plan->has_probs) {
        moeperm_sum_run(&plan->sum, threads, MOEPERM_ISA_AUTO);
        return;
    }

    moeperm_dtype dtype = plan->sum.permuted.dtype;
    int team = moeperm_threads_for_bytes(
        threads, (double)tokens * (double)(plan->sum.top_k + 1) * (double)hidden *
                     (double)moeperm_dtype_size(dtype));
    int64_t blocks = (hidden + COLUMN_BLOCK - 1) / COLUMN_BLOCK;
    int64_t tasks = tokens * blocks;
#ifdef MOEPERM_HAVE_X86_PATH
    /* the same choice as the sum's in moeperm_sum_run() */
    const moeperm_x86_kernels *kernels =
        moeperm_x86_kernels_for(moeperm_isa_resolve(MOEPERM_ISA_AUTO));
    if (kernels && plan->sum.permuted.strides[1] == 1 && plan->sum.out.strides[1] == 1) {
        moeperm_x86_run_unpermute(&plan->sum, &plan->probs, team, kernels);
        return;
    }
#endif
    void (*task)(const struct moeperm_unpermute_plan *, int64_t, int64_t, int64_t) =
        dtype == MOEPERM_FLOAT     ? task_f32
        : dtype == MOEPERM_FLOAT16 ? task_f16
                                   : task_bf16;
    /* Runs of consecutive tasks handed out one at a time, as in
     * MoeTokenPermuteGrad: a thread the OS keeps waiting (a busy, shared
     * machine) leaves its share to the others instead of holding up the
     * end.  Which thread sums a task never changes its bits. */
    int64_t run = tasks / ((int64_t)team * 8);
    run = run < 1 ? 1 : run > 64 ? 64 : run;
    (void)team;
#ifdef _OPENMP
#pragma omp parallel num_threads(team) if (team > 1 && tasks > 1)
#endif
    {
        fp_env env = fp_env_enter();
#ifdef _OPENMP
#pragma omp for schedule(dynamic, run) nowait
#endif
        for (int64_t i = 0; i < tasks; i++) {
            int64_t t = i / blocks, c0 = (i % blocks) * COLUMN_BLOCK;
            int64_t n = hidden - c0 < COLUMN_BLOCK ? hidden - c0 : COLUMN_BLOCK;
            prefetch_task(plan, t + 1, c0, n);
            task(plan, t, c0, n);
        }
        fp_env_leave(env);
    }
}

/*
 * The first phase's checks (docs/operators.md, "The input domain"): what
 * the Atlas A2/A3 device refuses, and what its kernel gives no determined
 * result for.  The device's host code checks nothing but the dtypes: its
 * tiling cannot fail and reads no attribute (moe_token_unpermute_tiling.cpp
 * 86-90, 287-308), so padded_mode and restore_shape are ignored; it takes
 * N and K from probs (112-117), or K = 1 and N = L without (119-120), and
 * the kernel skips every slot whose index is not below R, or whose prob
 * is 0 (moe_token_unpermute.h:244-246, 262-264).  On success *nothing says
 * the output is empty (the plan does nothing), else *top_k_out is K.
 */
static moeperm_status check_unpermute(const moeperm_tensor *x, const moeperm_tensor *ix,
                                      const moeperm_tensor *probs, const moeperm_tensor *out,
                                      int64_t *top_k_out, bool *nothing)
{
    moeperm_status status;
    if ((status = moeperm_check_float_dtype(x, "permuted_tokens")) ||
        (status = moeperm_check_same_dtype(out, "out", x, "permuted_tokens")) ||
        (status = moeperm_check_int32(ix, "sorted_indices")) ||
        (probs && (status = moeperm_check_float_dtype(probs, "probs"))))
        return status;
    if (moeperm_outputs_empty(&out, 1)) {
        *nothing = true;
        return MOEPERM_SUCCESS;
    }
    *nothing = false;

    if ((status = moeperm_check_ndim(x, "permuted_tokens", 2, "[rows, hidden_size]")) ||
        (status = moeperm_check_ndim(ix, "sorted_indices", 1, "[tokens_num * top_k]")) ||
        (status = moeperm_check_ndim(out, "out", 2, "[tokens_num, hidden_size]")) ||
        (probs && (status = moeperm_check_ndim(probs, "probs", 2, "[tokens_num, top_k]"))))
        return status;

    int64_t count = ix->dims[0], hidden = x->dims[1];
    int64_t tokens = probs ? probs->dims[0] : count;
    int64_t top_k = probs ? probs->dims[1] : 1;
    if (top_k == 0)
        return moeperm_undetermined("probs has 0 columns (top_k = 0): the kernel still reads "
                                    "slot 0 of each token, which has none");
    if (top_k > MOEPERM_MAX_TOP_K)
        return moeperm_undetermined("probs has %lld columns (top_k), above %d, the vendor's "
                                    "documented limit, beyond which the kernel's buffers are "
                                    "not characterised",
                                    (long long)top_k, MOEPERM_MAX_TOP_K);
    if ((status = moeperm_check_shape2(out, "out", tokens, hidden,
                                       probs ? "tokens_num from probs, hidden_size from "
                                               "permuted_tokens"
                                             : "tokens_num = the entries of sorted_indices "
                                               "without probs, hidden_size from "
                                               "permuted_tokens")))
        return status;
    if (count / top_k < tokens)
        return moeperm_undetermined("sorted_indices has %lld entries, fewer than tokens_num * "
                                    "top_k = %lld * %lld: the kernel would read past its end",
                                    (long long)count, (long long)tokens, (long long)top_k);

    if ((status = moeperm_check_view(x, "permuted_tokens")) ||
        (status = moeperm_check_view(ix, "sorted_indices")) ||
        (probs && (status = moeperm_check_view(probs, "probs"))) ||
        (status = moeperm_check_view(out, "out")))
        return status;
    if ((status = moeperm_check_no_self_overlap(out, "out")) ||
        (status = moeperm_check_disjoint(out, "out", x, "permuted_tokens")) ||
        (status = moeperm_check_disjoint(out, "out", ix, "sorted_indices")) ||
        (probs && (status = moeperm_check_disjoint(out, "out", probs, "probs"))))
        return status;

    *top_k_out = top_k;
    return moeperm_check_slots_nonnegative(ix, tokens * top_k, "permuted_tokens");
}

static moeperm_status run_plan(const void *plan, int threads)
{
    moeperm_unpermute_run(plan, threads);
    return MOEPERM_SUCCESS;
}

moeperm_status moeperm_token_unpermute_get_workspace_size(
    const moeperm_tensor *permuted_tokens, const moeperm_tensor *sorted_indices,
    const moeperm_tensor *probs, bool padded_mode, const int64_t *restore_shape,
    uint64_t restore_shape_len, moeperm_tensor *out, uint64_t *workspace_size,
    moeperm_executor **executor)
{
    moeperm_status status;
    /* padded_mode and restore_shape: never read by the Atlas A2/A3 host
     * code; restore_shape is not even dereferenced, so NULL with a length
     * is accepted as on MoeTokenUnpermuteGrad */
    (void)padded_mode;
    (void)restore_shape;
    (void)restore_shape_len;
    if (executor)
        *executor = NULL;
    if ((status = moeperm_check_required(permuted_tokens, "permuted_tokens")) ||
        (status = moeperm_check_required(sorted_indices, "sorted_indices")) ||
        (status = moeperm_check_required(out, "out")) ||
        (status = moeperm_check_plan_outputs(workspace_size, executor)))
        return status;

    int64_t top_k = 0;
    bool nothing = false;
    status = check_unpermute(permuted_tokens, sorted_indices, probs, out, &top_k, &nothing);
    if (status != MOEPERM_SUCCESS)
        return status;

    moeperm_executor *made =
        moeperm_executor_new(MOEPERM_OP_UNPERMUTE, nothing ? NULL : run_plan,
                             nothing ? 0 : sizeof(struct moeperm_unpermute_plan));
    if (!made)
        return MOEPERM_ERR_INNER;
    if (!nothing) {
        struct moeperm_unpermute_plan *plan = made->plan;
        plan->sum.permuted = *permuted_tokens;
        plan->sum.indices = *sorted_indices;
        if (probs)
            plan->probs = *probs;
        plan->sum.out = *out;
        plan->sum.top_k = top_k;
        plan->has_probs = probs != NULL;
    }
    *workspace_size = 0;
    *executor = made;
    return MOEPERM_SUCCESS;
}

moeperm_status moeperm_token_unpermute(void *workspace, uint64_t workspace_size,
                                       moeperm_executor *executor, void *stream)
{
    (void)workspace;
    (void)workspace_size; /* the CPU plan needs no workspace, so any size is enough */
    return moeperm_executor_finish(executor, stream, MOEPERM_OP_UNPERMUTE);
}

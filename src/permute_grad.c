/*
 * permute_grad.c - MoeTokenPermuteGrad: the two-phase API and THE
 * arithmetic of spec §2, which lives here and nowhere else.
 *
 * For every output token t and column h:
 *   acc = (float)grad[idx[t*K], h]         if that index is a row, else +0.0f
 *   acc = acc + (float)grad[idx[t*K+k], h] for k = 1..K-1 whose index is a row
 *   out[t, h] = narrow(acc)                one round-to-nearest-even step
 *
 * Work is split over (token, column block) tasks; each output element is
 * produced by exactly one task with the k loop in order, so the bits do not
 * depend on the number of threads.  The build forbids FMA contraction and
 * fast-math, and a column block keeps its accumulators in a small array so
 * the k rows stream past an accumulator that stays in L1.
 */
#include <stdlib.h>

#ifdef _OPENMP
#include <omp.h>
#endif

#include "fp.h"
#include "internal.h"

/* Columns per task: 8 KiB of fp32 accumulators, comfortably inside L1. */
#define COLUMN_BLOCK 2048
/* Below this many element reads the thread team costs more than it saves. */
#define PARALLEL_MIN_WORK (INT64_C(1) << 16)

typedef struct row_view {
    const char *base;   /* element 0 of row 0 */
    int64_t row_stride; /* in elements */
    int64_t col_stride; /* in elements */
} row_view;

/* One widen / accumulate / narrow triple per dtype.  `stride` is passed as
 * a literal 1 on the contiguous path so the compiler can vectorise across
 * columns, which never reorders the k loop. */
#define DEFINE_ROW_OPS(suffix, type, widen, narrow)                                           \
    static inline void load_##suffix(float *restrict acc, const type *restrict row,           \
                                     int64_t stride, int64_t n)                               \
    {                                                                                         \
        for (int64_t j = 0; j < n; j++)                                                       \
            acc[j] = widen(row[j * stride]);                                                  \
    }                                                                                         \
    static inline void add_##suffix(float *restrict acc, const type *restrict row,            \
                                    int64_t stride, int64_t n)                                \
    {                                                                                         \
        for (int64_t j = 0; j < n; j++)                                                       \
            acc[j] = acc[j] + widen(row[j * stride]);                                         \
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

DEFINE_ROW_OPS(f32, float, widen_f32, narrow_f32)
DEFINE_ROW_OPS(f16, uint16_t, fp_fp16_to_float, fp_float_to_fp16)
DEFINE_ROW_OPS(bf16, uint16_t, fp_bf16_to_float, fp_float_to_bf16)

/* One task: token t, columns [c0, c0+n).  `sc` and `oc` are the column
 * strides of grad and out. */
#define DEFINE_TASK(suffix, type)                                                             \
    static void task_##suffix(const struct moeperm_executor *plan, int64_t t, int64_t c0,    \
                              int64_t n)                                                      \
    {                                                                                         \
        float acc[COLUMN_BLOCK];                                                              \
        const struct moeperm_tensor *g = &plan->grad, *ix = &plan->indices, *o = &plan->out;  \
        const type *grad = (const type *)g->data + g->offset;                                 \
        const int32_t *idx = (const int32_t *)ix->data + ix->offset;                          \
        type *out = (type *)o->data + o->offset + t * o->strides[0] + c0 * o->strides[1];     \
        int64_t rows = g->dims[0], k_count = plan->top_k;                                     \
        int64_t sc = g->strides[1], oc = o->strides[1];                                       \
        int64_t slot = t * k_count;                                                           \
        bool contiguous = sc == 1;                                                            \
        /* Unsigned compare: a negative index is skipped like a dropped one. */               \
        uint64_t r = (uint64_t)(int64_t)idx[slot * ix->strides[0]];                           \
        if (r < (uint64_t)rows) {                                                             \
            const type *row = grad + (int64_t)r * g->strides[0] + c0 * sc;                    \
            if (contiguous)                                                                   \
                load_##suffix(acc, row, 1, n);                                                \
            else                                                                              \
                load_##suffix(acc, row, sc, n);                                               \
        } else {                                                                              \
            for (int64_t j = 0; j < n; j++)                                                   \
                acc[j] = 0.0f;                                                                \
        }                                                                                     \
        for (int64_t k = 1; k < k_count; k++) {                                               \
            r = (uint64_t)(int64_t)idx[(slot + k) * ix->strides[0]];                          \
            if (r >= (uint64_t)rows)                                                          \
                continue;                                                                     \
            const type *row = grad + (int64_t)r * g->strides[0] + c0 * sc;                    \
            if (contiguous)                                                                   \
                add_##suffix(acc, row, 1, n);                                                 \
            else                                                                              \
                add_##suffix(acc, row, sc, n);                                                \
        }                                                                                     \
        if (oc == 1)                                                                          \
            store_##suffix(out, acc, 1, n);                                                   \
        else                                                                                  \
            store_##suffix(out, acc, oc, n);                                                  \
    }

DEFINE_TASK(f32, float)
DEFINE_TASK(f16, uint16_t)
DEFINE_TASK(bf16, uint16_t)

void moeperm_kernel_run(const struct moeperm_executor *plan, int threads)
{
    int64_t tokens = plan->out.dims[0], hidden = plan->out.dims[1];
    if (tokens == 0 || hidden == 0)
        return;
    int64_t blocks = (hidden + COLUMN_BLOCK - 1) / COLUMN_BLOCK;
    int64_t tasks = tokens * blocks;
    void (*task)(const struct moeperm_executor *, int64_t, int64_t, int64_t) =
        plan->grad.dtype == MOEPERM_FLOAT     ? task_f32
        : plan->grad.dtype == MOEPERM_FLOAT16 ? task_f16
                                              : task_bf16;
    bool parallel = tokens * plan->top_k * hidden >= PARALLEL_MIN_WORK && tasks > 1;
    (void)threads;
    (void)parallel;

#ifdef _OPENMP
    int team = threads > 0 ? threads : omp_get_max_threads();
#pragma omp parallel for schedule(static) num_threads(team) if (parallel)
#endif
    for (int64_t i = 0; i < tasks; i++) {
        int64_t t = i / blocks, c0 = (i % blocks) * COLUMN_BLOCK;
        int64_t n = hidden - c0 < COLUMN_BLOCK ? hidden - c0 : COLUMN_BLOCK;
        task(plan, t, c0, n);
    }
}

moeperm_status moeperm_token_permute_grad_get_workspace_size(
    const moeperm_tensor *permuted_output_grad, const moeperm_tensor *sorted_indices,
    int64_t num_topk, bool padded_mode, moeperm_tensor *out, uint64_t *workspace_size,
    moeperm_executor **executor)
{
    if (executor)
        *executor = NULL;
    if (!permuted_output_grad)
        return moeperm_fail(MOEPERM_ERR_PARAM_NULLPTR, "permuted_output_grad is NULL");
    if (!sorted_indices)
        return moeperm_fail(MOEPERM_ERR_PARAM_NULLPTR, "sorted_indices is NULL");
    if (!out)
        return moeperm_fail(MOEPERM_ERR_PARAM_NULLPTR, "out is NULL");
    if (!workspace_size)
        return moeperm_fail(MOEPERM_ERR_PARAM_NULLPTR, "workspace_size is NULL");
    if (!executor)
        return moeperm_fail(MOEPERM_ERR_PARAM_NULLPTR, "executor is NULL");

    moeperm_status status =
        moeperm_validate(permuted_output_grad, sorted_indices, num_topk, padded_mode, out);
    if (status != MOEPERM_SUCCESS)
        return status;

    struct moeperm_executor *plan = malloc(sizeof *plan);
    if (!plan)
        return moeperm_fail(MOEPERM_ERR_INNER, "out of memory allocating the executor");
    plan->grad = *permuted_output_grad;
    plan->indices = *sorted_indices;
    plan->out = *out;
    plan->top_k = num_topk;
    *workspace_size = 0;
    *executor = plan;
    return MOEPERM_SUCCESS;
}

moeperm_status moeperm_token_permute_grad(void *workspace, uint64_t workspace_size,
                                          moeperm_executor *executor, void *stream)
{
    (void)workspace;
    (void)workspace_size; /* the CPU plan needs no workspace, so any size is enough */
    if (!executor)
        return moeperm_fail(MOEPERM_ERR_PARAM_NULLPTR, "executor is NULL");
    if (stream) {
        free(executor);
        return moeperm_fail(MOEPERM_ERR_PARAM_INVALID,
                            "stream must be NULL on the CPU backend, got %p", stream);
    }
    moeperm_kernel_run(executor, 0);
    free(executor);
    return MOEPERM_SUCCESS;
}

void moeperm_executor_destroy(moeperm_executor *executor)
{
    free(executor);
}

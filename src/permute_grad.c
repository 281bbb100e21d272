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
 *
 * This portable loop is the reference.  On x86 CPUs with AVX2 and F16C the
 * same arithmetic runs vectorised across columns (permute_grad_x86.c,
 * chosen in moeperm_kernel_run_path() below), tested bit for bit against
 * this loop; MOEPERM_FORCE_PORTABLE=1 turns it off (kernel.h).
 */
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#ifdef _OPENMP
#include <omp.h>
#endif

#include "fp.h"
#include "fp_env.h"
#include "internal.h"
#include "kernel.h"

/* Columns per task: 8 KiB of fp32 accumulators, comfortably inside L1. */
#define COLUMN_BLOCK 2048

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
            acc[j] = moeperm_accumulate(acc[j], widen(row[j * stride]));                      \
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
        /* grad is NULL when it has no rows (every slot dropped); offsetting   \
         * a null pointer, even by 0, is undefined, and no row is read then.   \
         * Its offset was never checked either (it addresses no element).     \
         */                                                                    \
        const type *grad =                                                                    \
            g->data && g->dims[0] > 0 ? (const type *)g->data + g->offset : NULL;             \
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

/* Below this many bytes per thread, waking another thread risks more than
 * it saves: a wake-up is tens of microseconds on an idle machine but a
 * scheduler time slice (milliseconds) on a busy one, while 16 MiB keep a
 * core busy for about a millisecond (`moeperm bench`, docs/performance.md). */
#define BYTES_PER_THREAD (INT64_C(16) << 20)
/* Outputs at least this large are written with non-temporal stores on the
 * fast path: nobody reads them soon, and skipping the read-for-ownership
 * saves a tenth of the traffic. */
#define STREAM_MIN_BYTES (INT64_C(8) << 20)
/* Column block of the fast path when there are too few tokens to share. */
#define FAST_COLUMN_BLOCK 1024

int moeperm_threads_for_bytes(int threads, double bytes)
{
    int team = threads;
#ifdef _OPENMP
    if (team <= 0)
        team = omp_get_max_threads();
#endif
    if (team <= 1)
        return 1;
    double useful = bytes / (double)BYTES_PER_THREAD;
    if (useful < team)
        team = useful < 1 ? 1 : (int)useful;
    return team;
}

int moeperm_kernel_threads(const struct moeperm_executor *plan, int threads)
{
    /* in double: tokens * top_k * hidden may pass 2^63 when most slots are
     * dropped */
    double bytes = (double)plan->out.dims[0] * (double)(plan->top_k + 1) *
                   (double)plan->out.dims[1] * (double)moeperm_dtype_size(plan->grad.dtype);
    return moeperm_threads_for_bytes(threads, bytes);
}

static void run_portable(const struct moeperm_executor *plan, int team)
{
    int64_t tokens = plan->out.dims[0], hidden = plan->out.dims[1];
    int64_t blocks = (hidden + COLUMN_BLOCK - 1) / COLUMN_BLOCK;
    int64_t tasks = tokens * blocks;
    void (*task)(const struct moeperm_executor *, int64_t, int64_t, int64_t) =
        plan->grad.dtype == MOEPERM_FLOAT     ? task_f32
        : plan->grad.dtype == MOEPERM_FLOAT16 ? task_f16
                                              : task_bf16;
    (void)team;
#ifdef _OPENMP
#pragma omp parallel num_threads(team) if (team > 1 && tasks > 1)
#endif
    {
        fp_env env = fp_env_enter();
#ifdef _OPENMP
#pragma omp for schedule(static)
#endif
        for (int64_t i = 0; i < tasks; i++) {
            int64_t t = i / blocks, c0 = (i % blocks) * COLUMN_BLOCK;
            int64_t n = hidden - c0 < COLUMN_BLOCK ? hidden - c0 : COLUMN_BLOCK;
            task(plan, t, c0, n);
        }
        fp_env_leave(env);
    }
}

#ifdef MOEPERM_HAVE_X86_PATH
/* The rows a task of the x86 path sums: its token's valid slots, each
 * pointing at the task's first column. */
typedef struct x86_task {
    const void *rows[MOEPERM_MAX_TOP_K];
    int64_t count, width;
    bool zero_start;
    char *out;
} x86_task;

typedef struct x86_plan {
    const char *grad;
    const int32_t *idx;
    char *out;
    int64_t rows, hidden, k_count, block, blocks, size;
    int64_t grad_stride, idx_stride, out_stride;
} x86_plan;

/* Token and first column of a task (no division in the usual case of one
 * block per token: small tasks feel it). */
static inline void x86_where(const x86_plan *p, int64_t task, int64_t *t, int64_t *c0)
{
    if (p->blocks == 1) {
        *t = task;
        *c0 = 0;
    } else {
        *t = task / p->blocks;
        *c0 = (task % p->blocks) * p->block;
    }
}

static void x86_list(const x86_plan *p, int64_t task, x86_task *into)
{
    int64_t t, c0;
    x86_where(p, task, &t, &c0);
    into->width = p->hidden - c0 < p->block ? p->hidden - c0 : p->block;
    into->count = 0;
    into->zero_start = false;
    into->out = p->out + (t * p->out_stride + c0) * p->size;
    for (int64_t k = 0; k < p->k_count; k++) {
        /* Unsigned compare: a negative index is skipped like a dropped one. */
        uint64_t r = (uint64_t)(int64_t)p->idx[(t * p->k_count + k) * p->idx_stride];
        if (r < (uint64_t)p->rows)
            into->rows[into->count++] = p->grad + ((int64_t)r * p->grad_stride + c0) * p->size;
        else if (k == 0)
            into->zero_start = true;
    }
}

typedef void (*x86_segment)(const void *const *, int64_t, bool, void *, int64_t, bool,
                            const void *const *, int64_t, int64_t);

/* Tasks smaller than this are too short for prefetching one task ahead to
 * cover the memory latency; their rows are prefetched this many bytes ahead
 * instead. */
#define FAR_PREFETCH_BYTES (INT64_C(16) << 10)

/* Prefetches, into L2, every line of the rows of one task. */
static void x86_prefetch_task(const x86_plan *p, int64_t task)
{
    int64_t t, c0;
    x86_where(p, task, &t, &c0);
    int64_t bytes = (p->hidden - c0 < p->block ? p->hidden - c0 : p->block) * p->size;
    for (int64_t k = 0; k < p->k_count; k++) {
        uint64_t r = (uint64_t)(int64_t)p->idx[(t * p->k_count + k) * p->idx_stride];
        if (r >= (uint64_t)p->rows)
            continue;
        const char *row = p->grad + ((int64_t)r * p->grad_stride + c0) * p->size;
        for (int64_t b = 0; b < bytes; b += 64)
            __builtin_prefetch(row + b, 0, 2);
    }
}

/* Tasks [lo, hi) in order, each summed while the next one's rows are
 * prefetched (small tasks: the rows of a task further ahead), then a fence
 * for the non-temporal stores. */
static void x86_tasks(const x86_plan *p, x86_segment segment, bool stream, int64_t lo,
                      int64_t hi)
{
    x86_task lists[2];
    int64_t task_bytes = p->k_count * (p->hidden < p->block ? p->hidden : p->block) * p->size;
    int64_t ahead = task_bytes >= FAR_PREFETCH_BYTES ? 0 : FAR_PREFETCH_BYTES / task_bytes;
    ahead = ahead > 64 ? 64 : ahead;
    for (int64_t i = lo + 2; i < lo + ahead && i < hi; i++)
        x86_prefetch_task(p, i);
    if (lo < hi)
        x86_list(p, lo, &lists[lo & 1]);
    for (int64_t i = lo; i < hi; i++) {
        x86_task *cur = &lists[i & 1], *next = &lists[(i + 1) & 1];
        bool more = i + 1 < hi;
        if (ahead > 1 && i + ahead < hi)
            x86_prefetch_task(p, i + ahead);
        if (more)
            x86_list(p, i + 1, next);
        /* with far prefetching, the next task's rows are already on their way */
        bool near = more && ahead <= 1;
        segment(cur->rows, cur->count, cur->zero_start, cur->out, cur->width, stream, next->rows,
                near ? next->count : 0, near ? next->width : 0);
    }
    if (stream && lo < hi)
        moeperm_x86_fence();
}

/* The x86 path: threads take runs of consecutive tasks and hand each
 * task's rows to a vector segment of permute_grad_x86.c, with the next
 * task's rows to prefetch. */
static void run_x86(const struct moeperm_executor *plan, int team, bool avx512)
{
    const struct moeperm_tensor *g = &plan->grad, *ix = &plan->indices, *o = &plan->out;
    x86_plan p = {
        /* NULL when grad has no rows: no row is read then, offsetting a null
         * pointer, even by 0, is undefined, and the offset of a view with
         * no element was never checked (offset * size may overflow). */
        .grad = g->data && g->dims[0] > 0
                    ? (const char *)g->data + g->offset * (int64_t)moeperm_dtype_size(g->dtype)
                    : NULL,
        .idx = (const int32_t *)ix->data + ix->offset,
        .out = (char *)o->data + o->offset * (int64_t)moeperm_dtype_size(g->dtype),
        .rows = g->dims[0],
        .hidden = o->dims[1],
        .k_count = plan->top_k,
        .size = (int64_t)moeperm_dtype_size(g->dtype),
        .grad_stride = g->strides[0],
        .idx_stride = ix->strides[0],
        .out_stride = o->strides[0],
    };
    int64_t tokens = o->dims[0];
    p.block = tokens >= 4 * (int64_t)team ? p.hidden : FAST_COLUMN_BLOCK;
    p.blocks = (p.hidden + p.block - 1) / p.block;
    int64_t tasks = tokens * p.blocks;
    bool stream = tokens * p.hidden * p.size >= STREAM_MIN_BYTES;
    x86_segment segment =
        g->dtype == MOEPERM_FLOAT
            ? (avx512 ? moeperm_x86_segment_f32_avx512 : moeperm_x86_segment_f32)
        : g->dtype == MOEPERM_FLOAT16
            ? (avx512 ? moeperm_x86_segment_f16_avx512 : moeperm_x86_segment_f16)
            : (avx512 ? moeperm_x86_segment_bf16_avx512 : moeperm_x86_segment_bf16);
    if (team <= 1 || tasks <= 1) {
        fp_env env = fp_env_enter();
        x86_tasks(&p, segment, stream, 0, tasks);
        fp_env_leave(env);
    } else {
        /* Runs of tasks handed out one at a time, so that a thread the OS
         * keeps waiting (a busy, shared machine) leaves its share to the
         * others instead of holding up the end. */
        int64_t run = tasks / ((int64_t)team * 8);
        run = run < 1 ? 1 : run > 64 ? 64 : run;
        int64_t runs = (tasks + run - 1) / run;
        (void)runs;
#ifdef _OPENMP
#pragma omp parallel num_threads(team)
#endif
        {
            fp_env env = fp_env_enter();
#ifdef _OPENMP
#pragma omp for schedule(dynamic, 1) nowait
#endif
            for (int64_t r = 0; r < runs; r++)
                x86_tasks(&p, segment, stream, r * run,
                          r * run + run < tasks ? r * run + run : tasks);
            fp_env_leave(env);
        }
    }
}
#endif

static moeperm_kernel_path detect_best_path(void)
{
    const char *force = getenv("MOEPERM_FORCE_PORTABLE");
    if (force && *force && strcmp(force, "0") != 0)
        return MOEPERM_PATH_PORTABLE;
#ifdef MOEPERM_HAVE_X86_PATH
    if (moeperm_x86_avx512_available())
        return MOEPERM_PATH_X86_AVX512;
    if (moeperm_x86_available())
        return MOEPERM_PATH_X86_AVX2;
#endif
    return MOEPERM_PATH_PORTABLE;
}

/* Read once: the environment and the CPU do not change under a run. */
static atomic_int best_path = -1;
static atomic_int chosen_path = MOEPERM_PATH_AUTO;

moeperm_kernel_path moeperm_kernel_best_path(void)
{
    int path = atomic_load_explicit(&best_path, memory_order_relaxed);
    if (path < 0) {
        path = (int)detect_best_path();
        atomic_store_explicit(&best_path, path, memory_order_relaxed);
    }
    return (moeperm_kernel_path)path;
}

void moeperm_kernel_choose_path(moeperm_kernel_path path)
{
    atomic_store_explicit(&chosen_path, (int)path, memory_order_relaxed);
}

const char *moeperm_kernel_path_name(moeperm_kernel_path path)
{
    switch (path) {
    case MOEPERM_PATH_PORTABLE:
        return "portable";
    case MOEPERM_PATH_X86_AVX512:
        return "x86-avx512";
    case MOEPERM_PATH_X86_AVX2:
        return "x86-avx2";
    default:
        return "auto";
    }
}

moeperm_kernel_path moeperm_kernel_resolve_path(moeperm_kernel_path path)
{
    if (path == MOEPERM_PATH_AUTO)
        path = (moeperm_kernel_path)atomic_load_explicit(&chosen_path, memory_order_relaxed);
    if (path == MOEPERM_PATH_AUTO)
        path = moeperm_kernel_best_path();
#ifdef MOEPERM_HAVE_X86_PATH
    if (path == MOEPERM_PATH_X86_AVX512 && moeperm_x86_avx512_available())
        return path;
    if (path == MOEPERM_PATH_X86_AVX2 && moeperm_x86_available())
        return path;
#endif
    return MOEPERM_PATH_PORTABLE;
}

void moeperm_kernel_run_path(const struct moeperm_executor *plan, int threads,
                             moeperm_kernel_path path)
{
    int64_t tokens = plan->out.dims[0], hidden = plan->out.dims[1];
    if (tokens == 0 || hidden == 0)
        return;
    int team = moeperm_kernel_threads(plan, threads);
    path = moeperm_kernel_resolve_path(path);
#ifdef MOEPERM_HAVE_X86_PATH
    bool unit_columns = plan->grad.strides[1] == 1 && plan->out.strides[1] == 1;
    if (path != MOEPERM_PATH_PORTABLE && unit_columns) {
        run_x86(plan, team, path == MOEPERM_PATH_X86_AVX512);
        return;
    }
#endif
    run_portable(plan, team);
}

void moeperm_kernel_run(const struct moeperm_executor *plan, int threads)
{
    moeperm_kernel_run_path(plan, threads, MOEPERM_PATH_AUTO);
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
    plan->op = MOEPERM_OP_PERMUTE_GRAD;
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
    if (executor->op != MOEPERM_OP_PERMUTE_GRAD) {
        free(executor);
        return moeperm_fail(MOEPERM_ERR_PARAM_INVALID,
                            "the executor was planned by another operator, not "
                            "moeperm_token_permute_grad_get_workspace_size()");
    }
    moeperm_kernel_run(executor, 0);
    free(executor);
    return MOEPERM_SUCCESS;
}

void moeperm_executor_destroy(moeperm_executor *executor)
{
    free(executor);
}

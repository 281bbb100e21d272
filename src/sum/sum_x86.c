/*
 * sum/sum_x86.c - how a sum runs on the x86 kernels: split over threads
 * and keeping memory busy (docs/performance.md says why each choice).
 *
 * A task is one token, or a column block of one when there are too few
 * tokens to share; each output element belongs to exactly one task, which
 * sums its k slots in order, so the bits do not depend on the number of
 * threads.  Threads take runs of consecutive tasks; each task's rows are
 * listed with moeperm_token_rows() and summed by a segment of the
 * instruction set's table (x86.h) while the next task's rows are
 * prefetched.  MoeTokenUnpermute with probs runs the same way, its rows
 * listed with their probs by x86_scaled_rows() and summed by the scaled
 * segments.
 */
#include "sum/sum_x86.h"

#ifdef MOEPERM_HAVE_X86_PATH

#include "core/fp_env.h"

/* Outputs at least this large are written with non-temporal stores: nobody
 * reads them soon, and skipping the read-for-ownership saves a tenth of the
 * traffic. */
#define STREAM_MIN_BYTES (INT64_C(8) << 20)
/* Column block when there are too few tokens to share. */
#define COLUMN_BLOCK 1024
/* Tasks smaller than this are too short for prefetching one task ahead to
 * cover the memory latency; their rows are prefetched this many bytes ahead
 * instead. */
#define FAR_PREFETCH_BYTES (INT64_C(16) << 10)

typedef struct x86_plan {
    moeperm_gather gather;
    const struct moeperm_tensor *probs; /* MoeTokenUnpermute's, or NULL */
    char *out;
    int64_t hidden, block, blocks, size, out_stride;
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

/* probs[t, k] widened to binary32 as fp.h does (unpermute.c's
 * widen_prob()). */
static float x86_prob(const struct moeperm_tensor *probs, int64_t t, int64_t k)
{
    int64_t at = probs->offset + t * probs->strides[0] + k * probs->strides[1];
    if (probs->dtype == MOEPERM_FLOAT)
        return ((const float *)probs->data)[at];
    uint16_t bits = ((const uint16_t *)probs->data)[at];
    return probs->dtype == MOEPERM_FLOAT16 ? fp_fp16_to_float(bits) : fp_bf16_to_float(bits);
}

/*
 * MoeTokenUnpermute's per-slot rule, as unpermute.c's included_slots()
 * states it for the portable loop (tests/core/test_fast_paths.c holds the two
 * together): slot k of token t is listed, with its prob as multiplier,
 * when its index is a row and its prob is not +-0, tested on the bits so
 * that a caller's denormals-are-zero mode cannot drop a subnormal prob;
 * zero_start says slot 0 is not listed.
 */
static int64_t x86_scaled_rows(const x86_plan *p, int64_t t, int64_t column_bytes,
                               moeperm_x86_task *into)
{
    const moeperm_gather *g = &p->gather;
    const int32_t *slots = g->idx + t * g->top_k * g->idx_stride;
    int64_t count = 0;
    into->zero_start = true;
    for (int64_t k = 0; k < g->top_k; k++) {
        /* unsigned: a negative index is dropped like one past the rows */
        uint64_t r = (uint64_t)(int64_t)slots[k * g->idx_stride];
        if (r >= (uint64_t)g->rows)
            continue;
        float scale = x86_prob(p->probs, t, k);
        if ((fp_bits(scale) & 0x7fffffffu) == 0)
            continue;
        if (k == 0)
            into->zero_start = false;
        into->rows[count] = g->grad + (int64_t)r * g->row_stride * g->size + column_bytes;
        into->scales[count++] = scale;
    }
    return count;
}

static void x86_list(const x86_plan *p, int64_t task, moeperm_x86_task *into)
{
    int64_t t, c0;
    x86_where(p, task, &t, &c0);
    into->width = p->hidden - c0 < p->block ? p->hidden - c0 : p->block;
    into->out = p->out + (t * p->out_stride + c0) * p->size;
    if (p->probs)
        into->count = x86_scaled_rows(p, t, c0 * p->size, into);
    else
        into->count =
            moeperm_token_rows(&p->gather, t, c0 * p->size, into->rows, &into->zero_start);
}

/* Prefetches, into L2, every line of the rows of one task. */
static void x86_prefetch_task(const x86_plan *p, int64_t task)
{
    moeperm_x86_task rows;
    x86_list(p, task, &rows);
    int64_t bytes = rows.width * p->size;
    for (int64_t r = 0; r < rows.count; r++)
        for (int64_t b = 0; b < bytes; b += 64)
            __builtin_prefetch((const char *)rows.rows[r] + b, 0, 2);
}

/* Tasks [lo, hi) in order, each summed while the next one's rows are
 * prefetched (small tasks: the rows of a task further ahead), then a fence
 * for the non-temporal stores. */
static void x86_tasks(const x86_plan *p, const moeperm_x86_kernels *k, moeperm_x86_segment *segment,
                      bool stream, int64_t lo, int64_t hi)
{
    moeperm_x86_task lists[2];
    int64_t task_bytes =
        p->gather.top_k * (p->hidden < p->block ? p->hidden : p->block) * p->size;
    int64_t ahead = task_bytes >= FAR_PREFETCH_BYTES ? 0 : FAR_PREFETCH_BYTES / task_bytes;
    ahead = ahead > 64 ? 64 : ahead;
    for (int64_t i = lo + 2; i < lo + ahead && i < hi; i++)
        x86_prefetch_task(p, i);
    if (lo < hi)
        x86_list(p, lo, &lists[lo & 1]);
    for (int64_t i = lo; i < hi; i++) {
        moeperm_x86_task *cur = &lists[i & 1], *next = &lists[(i + 1) & 1];
        bool more = i + 1 < hi;
        if (ahead > 1 && i + ahead < hi)
            x86_prefetch_task(p, i + ahead);
        if (more)
            x86_list(p, i + 1, next);
        /* with far prefetching, the next task's rows are already on their way */
        segment(cur, more && ahead <= 1 ? next : NULL, stream);
    }
    if (stream && lo < hi)
        k->fence();
}

/* A sum (with probs for MoeTokenUnpermute) on `team` threads. */
static void x86_run(const struct moeperm_sum *plan, const struct moeperm_tensor *probs,
                    int team, const moeperm_x86_kernels *k)
{
    const struct moeperm_tensor *o = &plan->out;
    int64_t size = (int64_t)moeperm_dtype_size(plan->permuted.dtype);
    x86_plan p = {
        .gather = moeperm_gather_of(plan),
        .probs = probs,
        .out = (char *)o->data + o->offset * size,
        .hidden = o->dims[1],
        .size = size,
        .out_stride = o->strides[0],
    };
    int64_t tokens = o->dims[0];
    p.block = tokens >= 4 * (int64_t)team ? p.hidden : COLUMN_BLOCK;
    p.blocks = (p.hidden + p.block - 1) / p.block;
    int64_t tasks = tokens * p.blocks;
    bool stream = tokens * p.hidden * p.size >= STREAM_MIN_BYTES;
    int d = moeperm_x86_dtype_index(plan->permuted.dtype);
    moeperm_x86_segment *segment = probs ? k->scaled_segment[d] : k->segment[d];
    if (team <= 1 || tasks <= 1) {
        fp_env env = fp_env_enter();
        x86_tasks(&p, k, segment, stream, 0, tasks);
        fp_env_leave(env);
        return;
    }
    /* Runs of tasks handed out one at a time, so that a thread the OS keeps
     * waiting (a busy, shared machine) leaves its share to the others
     * instead of holding up the end. */
    int64_t run = tasks / ((int64_t)team * 8);
    run = run < 1 ? 1 : run > 64 ? 64 : run;
    int64_t runs = (tasks + run - 1) / run;
#ifdef _OPENMP
#pragma omp parallel num_threads(team)
#endif
    {
        fp_env env = fp_env_enter();
#ifdef _OPENMP
#pragma omp for schedule(dynamic, 1) nowait
#endif
        for (int64_t r = 0; r < runs; r++)
            x86_tasks(&p, k, segment, stream, r * run,
                      r * run + run < tasks ? r * run + run : tasks);
        fp_env_leave(env);
    }
}

void moeperm_x86_run(const struct moeperm_sum *plan, int team, const moeperm_x86_kernels *k)
{
    x86_run(plan, NULL, team, k);
}

void moeperm_x86_run_unpermute(const struct moeperm_sum *plan, const struct moeperm_tensor *probs,
                               int team, const moeperm_x86_kernels *k)
{
    x86_run(plan, probs, team, k);
}

#endif

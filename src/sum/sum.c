/*
 * sum/sum.c - the sum of each token's slot rows (sum.h): the portable loop
 * that is the reference for every path, and the choice of path.
 *
 * For every output token t and column h (docs/arithmetic.md):
 *   acc = (float)x[idx[t*K], h]         if that index is a row, else +0.0f
 *   acc = acc + (float)x[idx[t*K+k], h] for k = 1..K-1 whose index is a row
 *   out[t, h] = narrow(acc)             one round-to-nearest-even step
 *
 * with x the permuted tensor.  The pieces are defined once and shared by
 * every path: the conversions in fp.h, the addition step
 * moeperm_accumulate() in core/kernel.h and the per-slot rule
 * moeperm_token_rows() in sum.h.  The portable loop below puts them
 * together in plain C11.  Work is split over (token, column block) tasks;
 * each output element is produced by exactly one task with the k loop in
 * order, so the bits do not depend on the number of threads.  The build
 * forbids FMA contraction and fast-math, and a column block keeps its
 * accumulators in a small array so the k rows stream past an accumulator
 * that stays in L1.
 *
 * On x86 CPUs with AVX2 and F16C the same arithmetic runs vectorised across
 * columns (src/x86/, chosen in moeperm_sum_run() below by the rules of
 * src/core/dispatch.c), tested bit for bit against this loop.
 */
#include "core/fp.h"
#include "core/fp_env.h"
#include "sum/sum.h"
#include "sum/sum_x86.h"

/* Columns per task: 8 KiB of fp32 accumulators, comfortably inside L1. */
#define COLUMN_BLOCK 2048

/* The steps of a column block: the first row widened into the
 * accumulators, each further row added, the sums narrowed into out.  Each
 * is inlined with a constant dtype, and `stride` is passed as a literal 1
 * on the contiguous path, so that the compiler vectorises across columns,
 * which never reorders the k loop. */
static MOEPERM_FORCE_INLINE void load_row(moeperm_dtype dtype, float *restrict acc,
                                          const void *restrict row, int64_t stride, int64_t n)
{
    for (int64_t j = 0; j < n; j++)
        acc[j] = moeperm_widen(dtype, row, j * stride);
}

static MOEPERM_FORCE_INLINE void add_row(moeperm_dtype dtype, float *restrict acc,
                                         const void *restrict row, int64_t stride, int64_t n)
{
    for (int64_t j = 0; j < n; j++)
        acc[j] = moeperm_accumulate(acc[j], moeperm_widen(dtype, row, j * stride));
}

static MOEPERM_FORCE_INLINE void store_row(moeperm_dtype dtype, void *restrict out,
                                           const float *restrict acc, int64_t stride, int64_t n)
{
    for (int64_t j = 0; j < n; j++)
        moeperm_narrow(dtype, out, j * stride, acc[j]);
}

/* One task: token t, columns [c0, c0 + n).  `sc` and `oc` are the column
 * strides of the permuted tensor and of out. */
static MOEPERM_FORCE_INLINE void portable_task(moeperm_dtype dtype,
                                               const struct moeperm_sum *plan,
                                               const moeperm_gather *gather, int64_t t,
                                               int64_t c0, int64_t n)
{
    float acc[COLUMN_BLOCK];
    const void *rows[MOEPERM_MAX_TOP_K];
    bool zero_start;
    const struct moeperm_tensor *o = &plan->out;
    int64_t size = dtype == MOEPERM_FLOAT ? 4 : 2;
    int64_t sc = plan->permuted.strides[1], oc = o->strides[1];
    int64_t count = moeperm_token_rows(gather, t, c0 * sc * size, rows, &zero_start);
    char *out = (char *)o->data + (o->offset + t * o->strides[0] + c0 * oc) * size;

    if (zero_start) {
        for (int64_t j = 0; j < n; j++)
            acc[j] = 0.0f;
    } else if (sc == 1) {
        load_row(dtype, acc, rows[0], 1, n);
    } else {
        load_row(dtype, acc, rows[0], sc, n);
    }
    for (int64_t r = zero_start ? 0 : 1; r < count; r++) {
        if (sc == 1)
            add_row(dtype, acc, rows[r], 1, n);
        else
            add_row(dtype, acc, rows[r], sc, n);
    }
    if (oc == 1)
        store_row(dtype, out, acc, 1, n);
    else
        store_row(dtype, out, acc, oc, n);
}

int moeperm_sum_threads(const struct moeperm_sum *plan, int threads)
{
    /* in double: tokens * top_k * hidden may pass 2^63 when most slots are
     * dropped */
    double bytes = (double)plan->out.dims[0] * (double)(plan->top_k + 1) *
                   (double)plan->out.dims[1] * (double)moeperm_dtype_size(plan->permuted.dtype);
    return moeperm_threads_for_bytes(threads, bytes);
}

static void run_portable(const struct moeperm_sum *plan, int team)
{
    int64_t tokens = plan->out.dims[0], hidden = plan->out.dims[1];
    int64_t blocks = (hidden + COLUMN_BLOCK - 1) / COLUMN_BLOCK;
    int64_t tasks = tokens * blocks;
    moeperm_gather gather = moeperm_gather_of(plan);
    moeperm_dtype dtype = plan->permuted.dtype;
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
            switch (dtype) {
            case MOEPERM_FLOAT:
                portable_task(MOEPERM_FLOAT, plan, &gather, t, c0, n);
                break;
            case MOEPERM_FLOAT16:
                portable_task(MOEPERM_FLOAT16, plan, &gather, t, c0, n);
                break;
            default:
                portable_task(MOEPERM_BF16, plan, &gather, t, c0, n);
                break;
            }
        }
        fp_env_leave(env);
    }
}

void moeperm_sum_run(const struct moeperm_sum *plan, int threads, moeperm_isa isa)
{
    int64_t tokens = plan->out.dims[0], hidden = plan->out.dims[1];
    if (tokens == 0 || hidden == 0)
        return;
    int team = moeperm_sum_threads(plan, threads);
    isa = moeperm_isa_resolve(isa);
#ifdef MOEPERM_HAVE_X86_PATH
    const moeperm_x86_kernels *kernels = moeperm_x86_kernels_for(isa);
    bool unit_columns = plan->permuted.strides[1] == 1 && plan->out.strides[1] == 1;
    if (kernels && unit_columns) {
        moeperm_x86_run(plan, team, kernels);
        return;
    }
#endif
    run_portable(plan, team);
}

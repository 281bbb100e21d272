/*
 * fuzz_api.c - libFuzzer target for the two-phase operator API.
 *
 * The input picks a dtype, tokens, top_k, hidden, rows, the layout of each
 * of the three views (contiguous, padded rows, column-major, broadcast
 * rows, offsets) and, now and then, one way to change the call (a bad
 * dtype, a negative, repeated or dropped index, a wrong shape, overlapping
 * memory, a NULL, padded_mode, a stream, more rows than slots).  Every buffer is allocated to
 * exactly the bytes its view spans, so AddressSanitizer sees any access
 * outside a view.
 *
 * The target keeps its own model of which calls are valid and checks:
 *  - a valid call succeeds and writes exactly tests/support/naive_permute_grad.c's result into
 *    the elements of out, and nothing into the gaps between them;
 *  - an invalid call fails with NULLPTR or PARAM_INVALID, sets a message,
 *    hands back no executor and leaves every byte of out untouched.
 * A disagreement aborts, which libFuzzer reports as a crash.
 */
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <moeperm/moeperm.h>

#include "naive.h"
#include "naive_permute_grad.h"
#include "fuzz_input.h"

#define CHECK(cond, ...)                                                                     \
    do {                                                                                     \
        if (!(cond)) {                                                                       \
            fprintf(stderr, "fuzz_api: %s failed: ", #cond);                                 \
            fprintf(stderr, __VA_ARGS__);                                                    \
            fprintf(stderr, " (last error: %s)\n", moeperm_last_error());                   \
            abort();                                                                         \
        }                                                                                    \
    } while (0)

/* One strided 2-D (or 1-D) view and the buffer that holds exactly it. */
typedef struct view {
    int64_t dims[3];
    int64_t strides[3];
    uint64_t ndim;
    int64_t offset;
    bool default_strides; /* pass NULL strides to moeperm_tensor_create */
    size_t elem;
    size_t span; /* elements from the buffer start to one past the last */
    unsigned char *buf;
} view;

static int64_t count_of(const view *v)
{
    int64_t n = 1;
    for (uint64_t i = 0; i < v->ndim; i++)
        n *= v->dims[i];
    return n;
}

/* Lays out a [d0, d1] view by kind: 0 row-major (NULL strides), 1 padded
 * rows and spaced columns, 2 column-major, 3 every row at the same memory
 * (stride 0; legal for an input, an overlap for out). */
static void layout_2d(view *v, fuzz_input *in, int64_t d0, int64_t d1, int kind)
{
    v->ndim = 2;
    v->dims[0] = d0;
    v->dims[1] = d1;
    v->default_strides = false;
    int64_t step = 1 + take8(in) % 3, pad = take8(in) % 4;
    switch (kind) {
    case 0:
        v->default_strides = true;
        v->strides[0] = d1;
        v->strides[1] = 1;
        break;
    case 1:
        v->strides[1] = step;
        v->strides[0] = (d1 > 0 ? (d1 - 1) * step + 1 : 1) + pad;
        break;
    case 2:
        v->strides[0] = step;
        v->strides[1] = (d0 > 0 ? (d0 - 1) * step + 1 : 1) + pad;
        break;
    default:
        v->strides[0] = 0;
        v->strides[1] = 1;
        break;
    }
    v->offset = take8(in) % 4;
}

static void allocate(view *v, uint64_t *seed, bool fill)
{
    int64_t n = count_of(v);
    v->span = 0;
    if (n > 0) {
        int64_t last = v->offset;
        for (uint64_t i = 0; i < v->ndim; i++)
            last += (v->dims[i] - 1) * v->strides[i];
        v->span = (size_t)last + 1;
    }
    /* An empty view gets no buffer at all: NULL data is legal there. */
    v->buf = v->span ? malloc(v->span * v->elem) : NULL;
    if (v->span && !v->buf)
        abort();
    for (size_t i = 0; fill && i < v->span * v->elem; i++)
        v->buf[i] = (unsigned char)naive_rand(seed);
}

static size_t at(const view *v, int64_t i, int64_t j)
{
    return (size_t)(v->offset + i * v->strides[0] + (v->ndim > 1 ? j * v->strides[1] : 0));
}

static moeperm_tensor *make(const view *v, moeperm_dtype dtype, void *data)
{
    moeperm_tensor *t = moeperm_tensor_create(v->dims, v->ndim, dtype,
                                              v->default_strides ? NULL : v->strides, v->offset,
                                              data);
    CHECK(t != NULL, "tensor_create refused a non-negative view");
    return t;
}

static bool is_float_dtype(int64_t d)
{
    return d == MOEPERM_FLOAT || d == MOEPERM_FLOAT16 || d == MOEPERM_BF16;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    fuzz_input in = {data, size};
    uint8_t breaks = take8(&in); /* which argument, if any, to break */
    int breakage = breaks < 128 ? 0 : 1 + breaks % 14;

    static const moeperm_dtype dtypes[3] = {MOEPERM_FLOAT, MOEPERM_FLOAT16, MOEPERM_BF16};
    moeperm_dtype dtype = dtypes[take8(&in) % 3];
    moeperm_dtype out_dtype = dtype, grad_dtype = dtype, idx_dtype = MOEPERM_INT32;
    int64_t tokens = take8(&in) % 17;
    int64_t hidden = take8(&in) % 37;
    if (take8(&in) % 16 == 1) {
        /* Cross the kernel's 2048-column block with a few tokens only. */
        hidden = 2040 + take8(&in) % 20;
        tokens %= 4;
    }
    int64_t top_k = 1 + take8(&in) % 8;
    int64_t entries = tokens * top_k;
    int64_t rows = entries ? take16(&in) % (entries + 1) : 0;
    bool padded = false, null_stream = true;
    int64_t out_tokens = tokens, out_hidden = hidden;
    uint64_t seed = take64(&in);

    switch (breakage) {
    case 1:
        /* Never a float dtype here: the buffers are sized for `dtype`. */
        grad_dtype = out_dtype = (moeperm_dtype)(take8(&in) % 40);
        if (is_float_dtype(grad_dtype))
            grad_dtype = out_dtype = MOEPERM_INT32;
        break;
    case 2:
        out_dtype = (moeperm_dtype)(take8(&in) % 40);
        break;
    case 3:
        idx_dtype = (moeperm_dtype)(take8(&in) % 40);
        break;
    case 4: {
        static const int64_t bad_k[] = {0, -1, 513, INT64_MAX, INT64_MIN, INT64_C(1) << 32};
        top_k = bad_k[take8(&in) % 6];
        break;
    }
    case 5:
        rows = entries + 1 + take8(&in) % 3;
        break;
    case 6:
        out_tokens += take8(&in) % 2 ? 1 : -1;
        break;
    case 7:
        out_hidden += 1;
        break;
    case 8:
        padded = true;
        break;
    case 9:
        null_stream = false;
        break;
    default:
        break; /* 10..14 are handled below, once the views exist */
    }
    if (out_tokens < 0)
        out_tokens = 1;

    view g = {.elem = naive_size(dtype)}, ix = {.elem = 4}, o = {.elem = naive_size(dtype)};
    layout_2d(&g, &in, rows, hidden, take8(&in) % 4);
    layout_2d(&o, &in, out_tokens, out_hidden, take8(&in) % 3);
    ix.ndim = 1;
    ix.dims[0] = entries;
    ix.strides[0] = 1 + take8(&in) % 3;
    ix.default_strides = ix.strides[0] == 1 && take8(&in) % 2;
    ix.offset = take8(&in) % 3;
    if (breakage == 10) { /* a third dim of 1: the same elements, the wrong rank */
        g.ndim = 3;
        g.dims[2] = 1;
        g.strides[2] = 1;
    }
    allocate(&g, &seed, true);
    allocate(&ix, &seed, true);
    allocate(&o, &seed, true);

    int32_t *perm = malloc((size_t)(entries ? entries : 1) * sizeof *perm);
    if (!perm)
        abort();
    naive_permutation(&seed, perm, entries);
    bool indices_ok = true;
    if (breakage == 11 && entries > 0) {
        int64_t pos = take16(&in) % entries;
        switch (take8(&in) % 5) {
        case 0:
            perm[pos] = (int32_t)entries; /* one past the end: a dropped slot */
            break;
        case 1:
            perm[pos] = -1 - (int32_t)(take8(&in) % 3);
            indices_ok = false;
            break;
        case 2:
            perm[pos] = INT32_MIN;
            indices_ok = false;
            break;
        case 3:
            perm[pos] = INT32_MAX; /* a dropped slot */
            break;
        default: /* a row read twice */
            if (entries < 2)
                perm[pos] = (int32_t)entries;
            else
                perm[pos] = perm[(pos + 1 + take16(&in) % (entries - 1)) % entries];
            break;
        }
    }
    for (int64_t i = 0; i < entries; i++)
        memcpy(ix.buf + at(&ix, i, 0) * 4, &perm[i], 4);

    /* out's memory, possibly inside grad's for the overlap case. */
    unsigned char *out_mem = o.buf;
    bool overlap = false;
    /* Overlap means the element ranges intersect: the validator refuses
     * intersecting ranges even when the elements interleave. */
    if (breakage == 12 && count_of(&g) > 0 && count_of(&o) > 0 && o.span <= g.span &&
        (int64_t)o.span > g.offset) {
        out_mem = g.buf;
        overlap = true;
    }
    if (breakage == 13 && out_tokens >= 2 && out_hidden >= 1) {
        o.strides[0] = 0; /* every token's row at the same memory */
        o.strides[1] = 1;
        o.default_strides = false;
        overlap = true;
    }
    size_t out_bytes = overlap && out_mem == g.buf ? g.span * g.elem : o.span * o.elem;
    unsigned char *before = malloc(out_bytes ? out_bytes : 1);
    if (!before)
        abort();
    if (out_bytes)
        memcpy(before, out_mem, out_bytes);

    moeperm_tensor *tg = make(&g, grad_dtype, g.buf);
    moeperm_tensor *tix = make(&ix, idx_dtype, ix.buf);
    moeperm_tensor *to = make(&o, out_dtype, out_mem);
    uint64_t workspace = 123;
    moeperm_executor *plan = (moeperm_executor *)&workspace; /* must be reset to NULL */
    bool null_arg = breakage == 14;
    int which_null = null_arg ? take8(&in) % 5 : -1;
    moeperm_status status = moeperm_token_permute_grad_get_workspace_size(
        which_null == 0 ? NULL : tg, which_null == 1 ? NULL : tix, top_k, padded,
        which_null == 2 ? NULL : to, which_null == 3 ? NULL : &workspace,
        which_null == 4 ? NULL : &plan);
    moeperm_tensor_destroy(tg);
    moeperm_tensor_destroy(tix);
    moeperm_tensor_destroy(to);

    /* The model: every rule of the header's contract, checked directly.
     * Past the NULLs and the dtypes an empty out is a call that does
     * nothing; padded_mode is ignored, num_topk -1 means 1, rows may exceed
     * the entries and indices may repeat or be dropped (>= rows), but not
     * be negative. */
    int64_t k_eff = top_k == -1 ? 1 : top_k;
    bool out_empty = out_tokens == 0 || out_hidden == 0;
    bool typed = !null_arg && is_float_dtype(grad_dtype) && out_dtype == grad_dtype &&
                 idx_dtype == MOEPERM_INT32;
    bool args_ok = typed && (out_empty || (k_eff >= 1 && k_eff <= MOEPERM_MAX_TOP_K &&
                                           g.ndim == 2 && out_tokens == entries / k_eff &&
                                           out_hidden == hidden && !overlap && indices_ok));
    bool valid = args_ok && null_stream, phase1_valid = args_ok;
    if (phase1_valid) {
        CHECK(status == MOEPERM_SUCCESS, "valid call refused with %s (breakage %d)",
              moeperm_status_name(status), breakage);
        CHECK(plan != NULL && workspace == 0, "no plan or a CPU workspace of %llu",
              (unsigned long long)workspace);
        if (take8(&in) % 8 == 7) { /* a plan that is never run must free cleanly */
            moeperm_executor_destroy(plan);
            plan = NULL;
            CHECK(out_bytes == 0 || memcmp(before, out_mem, out_bytes) == 0,
                  "an unrun plan wrote out");
        } else {
            status = moeperm_token_permute_grad(NULL, 0, plan,
                                                null_stream ? NULL : (void *)&workspace);
        }
    } else {
        CHECK(status == MOEPERM_ERR_PARAM_INVALID || status == MOEPERM_ERR_PARAM_NULLPTR,
              "invalid call (breakage %d) answered %s", breakage, moeperm_status_name(status));
        CHECK(which_null == 4 || plan == NULL, "a failed first phase left an executor");
        CHECK(moeperm_last_error()[0] != '\0', "a failure without a message");
    }

    if (valid && plan && !out_empty) {
        CHECK(status == MOEPERM_SUCCESS, "run failed with %s", moeperm_status_name(status));
        /* Gather the views into the naive model's contiguous layout. */
        size_t e = g.elem;
        unsigned char *cg = malloc((size_t)(rows * hidden + 1) * e);
        unsigned char *co = malloc((size_t)(tokens * hidden + 1) * e);
        if (!cg || !co)
            abort();
        for (int64_t r = 0; r < rows; r++)
            for (int64_t h = 0; h < hidden; h++)
                memcpy(cg + (size_t)(r * hidden + h) * e, g.buf + at(&g, r, h) * e, e);
        naive_permute_grad(dtype, cg, rows, hidden, perm, tokens, k_eff, co);
        /* Every element of out holds the model's bits; every byte of the
         * buffer that is no element still holds what it held. */
        unsigned char *expect = malloc(out_bytes ? out_bytes : 1);
        if (!expect)
            abort();
        if (out_bytes)
            memcpy(expect, before, out_bytes);
        for (int64_t t = 0; t < tokens; t++)
            for (int64_t h = 0; h < hidden; h++)
                memcpy(expect + at(&o, t, h) * e, co + (size_t)(t * hidden + h) * e, e);
        /* Elements: the model's bits, any NaN equal to any NaN (which NaN
         * an addition of two NaNs gives is the compiler's operand order).
         * Every other byte of the buffer: exactly what it held. */
        unsigned char *is_elem = calloc(out_bytes ? out_bytes : 1, 1);
        if (!is_elem)
            abort();
        for (int64_t t = 0; t < tokens; t++)
            for (int64_t h = 0; h < hidden; h++) {
                size_t pos = at(&o, t, h) * e;
                memset(is_elem + pos, 1, e);
                CHECK(naive_equal(dtype, expect + pos, out_mem + pos, 1, NULL),
                      "token %lld column %lld differs from the naive loop", (long long)t,
                      (long long)h);
            }
        for (size_t i = 0; i < out_bytes; i++)
            CHECK(is_elem[i] || expect[i] == out_mem[i],
                  "out byte %zu outside every element changed from %02x to %02x", i, expect[i],
                  out_mem[i]);
        free(is_elem);
        free(expect);
        free(cg);
        free(co);
    } else if (!valid) {
        if (phase1_valid && plan)
            CHECK(status == MOEPERM_ERR_PARAM_INVALID, "a run with a stream answered %s",
                  moeperm_status_name(status));
        CHECK(out_bytes == 0 || memcmp(before, out_mem, out_bytes) == 0,
              "a failed call (breakage %d) wrote to out", breakage);
    }

    free(before);
    free(perm);
    free(g.buf);
    free(ix.buf);
    free(o.buf);
    return 0;
}

/*
 * assemble.c - a generated case put together: the operator's inputs
 * allocated and filled (a row at a time, by the routing and the value
 * kinds), handed to the case writer stretch by stretch as they are made,
 * and the golden outputs from the public two-phase API.
 */
#include <inttypes.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <moeperm/golden.h>

#include "golden/case/recipe.h"
#include "golden/case/writer.h"
#include "golden/common/prng.h"
#include "golden/common/text.h"
#include "golden/generate/route.h"
#include "golden/generate/rows.h"
#include "golden/generate/spec.h"
#include "golden/generate/values.h"

static void store(moeperm_dtype dtype, void *data, uint64_t i, uint32_t bits)
{
    switch (moeperm_dtype_size(dtype)) {
    case 4:
        memcpy((uint8_t *)data + 4 * i, &bits, 4);
        break;
    case 2: {
        uint16_t half = (uint16_t)bits;
        memcpy((uint8_t *)data + 2 * i, &half, 2);
        break;
    }
    default:
        ((uint8_t *)data)[i] = (uint8_t)bits;
    }
}

/* Appends an input of the operator's slot `name`.  A large one is
 * allocated for the writer to hand it to the disk without a copy
 * (golden_tensor_alloc()) and not zeroed: its fill writes every byte.
 * Returns it, or NULL when memory runs out. */
static moeperm_golden_tensor *add_tensor_dims(moeperm_golden_case *c, const char *name,
                                              moeperm_dtype dtype, uint64_t ndim,
                                              const int64_t *dims)
{
    size_t count;
    const moeperm_golden_slot *slots = moeperm_golden_op_slots(c->op, &count);
    const moeperm_golden_slot *slot = NULL;
    for (size_t i = 0; i < count && !slot; i++)
        if (strcmp(slots[i].name, name) == 0)
            slot = &slots[i];
    moeperm_golden_tensor *t = &c->tensors[c->tensor_count++];
    t->name = slot->name;
    t->role = slot->role;
    t->dtype = dtype;
    t->ndim = ndim;
    t->bytes = moeperm_dtype_size(dtype);
    for (uint64_t d = 0; d < ndim; d++) {
        t->shape[d] = dims[d];
        t->bytes *= (size_t)dims[d];
    }
    t->file = golden_strdup_printf("%s.bin", name);
    t->data = golden_tensor_alloc(t->bytes, t->bytes < GOLDEN_DIRECT_MIN);
    if (!t->file || (t->bytes && !t->data))
        return NULL;
    return t;
}

/* add_tensor_dims() of a [d0, d1] tensor, or [d0] when ndim is 1. */
static moeperm_golden_tensor *add_tensor(moeperm_golden_case *c, const char *name, moeperm_dtype dtype,
                                 uint64_t ndim, int64_t d0, int64_t d1)
{
    const int64_t dims[2] = {d0, d1};
    return add_tensor_dims(c, name, dtype, ndim, dims);
}

/* Row (t, k) of g, g->hidden elements, into dst. */
static void fill_row(const golden_generator *g, int64_t t, int64_t k, void *dst)
{
    if (g->rows != ROW_ELEMENTS) {
        uint64_t n = (uint64_t)(t * g->top_k + k) * (uint64_t)g->hidden * 2;
        g->row(g->rows, g->f.dtype, g->value_key, n, g->hidden, dst);
        return;
    }
    for (int64_t h = 0; h < g->hidden; h++)
        store(g->f.dtype, dst, (uint64_t)h, golden_element_bits(g, t, k, h));
}

/* A stretch of rows is at most this many bytes: a writer given the tensor
 * (see make_tensors()) hashes and writes each stretch while later ones
 * are made. */
#define STRETCH_BYTES ((size_t)8 << 20)

/* On the threads of the variable `team` in scope. */
#if defined(_OPENMP)
#define PARALLEL_FOR_DYNAMIC _Pragma("omp parallel for schedule(dynamic, 1) num_threads(team)")
#else
#define PARALLEL_FOR_DYNAMIC
#endif

/*
 * Fills the rows of a [rows, hidden] tensor: row r is row (r, 0) of g, or
 * with owner row (owner[r] / K, owner[r] % K).  The threads take stretches of rows
 * in order as they come free, and w (when not NULL) learns after each one
 * how many leading bytes are final.  Handing out stretches, rather than a
 * parallel loop per stretch, keeps the threads from waiting for each other
 * at every stretch, spinning on CPUs the writer's threads need.  Returns 0,
 * or -1 when memory runs out.
 */
static int fill_rows(const golden_generator *g, const int64_t *owner, moeperm_golden_tensor *t,
                     golden_case_writer *w)
{
    int64_t rows = t->shape[0];
    if (rows == 0 || t->bytes == 0)
        return 0;
    size_t row_bytes = t->bytes / (size_t)rows;
    /* At least 16 stretches, so that a tensor of a few MiB is still split. */
    int64_t per = (int64_t)(STRETCH_BYTES / row_bytes);
    per = per < (rows + 15) / 16 ? per : (rows + 15) / 16;
    per = per > 0 ? per : 1;
    int64_t stretches = (rows + per - 1) / per, prefix = 0;
    bool *done = calloc((size_t)stretches, sizeof *done);
    if (!done)
        return -1;
    if (w)
        golden_case_writer_ready(w, t, 0);
    /* A lock of this call's own rather than a named OpenMP critical
     * section, which would be a symbol the shared library exports. */
    pthread_mutex_t finished = PTHREAD_MUTEX_INITIALIZER; /* done[] and prefix */
    uint8_t *data = t->data;
    int team = golden_case_writer_team(w);
    (void)team;
    PARALLEL_FOR_DYNAMIC
    for (int64_t i = 0; i < stretches; i++) {
        int64_t end = rows - i * per < per ? rows : (i + 1) * per;
        for (int64_t r = i * per; r < end; r++) {
            if (!owner)
                fill_row(g, r, 0, data + (size_t)r * row_bytes);
            else
                fill_row(g, owner[r] / g->top_k, owner[r] % g->top_k,
                         data + (size_t)r * row_bytes);
        }
        if (w) {
            pthread_mutex_lock(&finished);
            done[i] = true;
            while (prefix < stretches && done[prefix])
                prefix++;
            int64_t final_rows = prefix * per < rows ? prefix * per : rows;
            golden_case_writer_ready(w, t, (size_t)final_rows * row_bytes);
            pthread_mutex_unlock(&finished);
        }
    }
    pthread_mutex_destroy(&finished);
    free(done);
    return 0;
}

/*
 * Fills the [R, H] permuted tensor: the value of token t's slot k at
 * column h lands in row sorted_indices[t*K + k] (nothing for a dropped
 * slot), so each row holds the values of the slot that owns it: the last
 * slot naming it, when several do.  A row no slot names holds what flat
 * slot T*K + r would (token (T*K + r) / K, slot (T*K + r) % K), values no
 * slot reads, so that a kernel reading the wrong row shows.  Made row by
 * row in order (each row from its owner) rather than slot by slot, so that
 * a writer can take the tensor in stretches.  Returns 0, or -1 when
 * memory runs out.
 */
static int fill_permuted(const golden_generator *g, const int32_t *indices, int64_t slots,
                         moeperm_golden_tensor *t, golden_case_writer *w)
{
    int64_t rows = t->shape[0];
    int64_t *owner = malloc((size_t)(rows > 0 ? rows : 1) * sizeof *owner);
    if (!owner)
        return -1;
    for (int64_t r = 0; r < rows; r++)
        owner[r] = slots + r;
    for (int64_t i = 0; i < slots; i++)
        if (indices[i] < rows)
            owner[indices[i]] = i;
    int rc = fill_rows(g, owner, t, w);
    free(owner);
    return rc;
}

/* The generator of one tensor of case s: dtype and value kind, its draws
 * numbered as (t * top_k + k) * hidden + h in stream. */
static golden_generator make_generator(const moeperm_golden_spec *s, moeperm_dtype dtype,
                                       moeperm_golden_values values, int64_t top_k,
                                       int64_t hidden, int stream, golden_fill fills)
{
    golden_generator g = {
        .f = golden_format_of(dtype),
        .values = values,
        .top_k = top_k,
        .hidden = hidden,
        .value_key = prng_stream_key(s->seed, (uint64_t)stream),
        .pick_key = prng_stream_key(s->seed, PRNG_STREAM_PICK),
        .fills = fills,
        .slots = s->top_k,
        .columns = s->hidden_size,
        .tokens = golden_format_of(s->dtype),
        .probs = golden_format_of(s->has_probs ? s->probs_dtype : s->dtype),
        .slot_key = prng_stream_key(s->seed, PRNG_STREAM_SLOT),
        .scenarios = golden_values_scenarios(values),
        .rows = golden_row_kind_of(dtype, values),
        .row = golden_row_loops(),
    };
    return g;
}

/* Allocates and fills c's inputs for spec s, handing each to w (when not
 * NULL) as it is made. */
static int make_tensors(const moeperm_golden_spec *s, moeperm_golden_case *c, golden_case_writer *w, char *err,
                        size_t err_len)
{
    int64_t T = s->tokens_num, K = s->top_k, H = s->hidden_size, slots = T * K;
    int64_t R = s->num_rows < 0 ? slots : s->num_rows, L = slots + s->extra_indices;
    golden_generator values =
        make_generator(s, s->dtype, s->values, K, H, PRNG_STREAM_VALUES, GOLDEN_FILL_PERMUTED);
    moeperm_golden_tensor *t, *idx;
    switch (c->op) {
    case MOEPERM_OP_PERMUTE: {
        /* Rank 3 with hidden_outer: a token is still its H elements in
         * row-major order. */
        const int64_t dims[3] = {T, s->hidden_outer ? s->hidden_outer : H,
                                 s->hidden_outer ? H / s->hidden_outer : 0};
        if (!(t = add_tensor_dims(c, "tokens", s->dtype, s->hidden_outer ? 3 : 2, dims)))
            return -1;
        values.top_k = 1;
        values.fills = GOLDEN_FILL_TOKENS;
        if (fill_rows(&values, NULL, t, w) != 0)
            return -1;
        if (!(idx = add_tensor(c, "indices", s->index_dtype, 2, T, K)) ||
            golden_fill_expert_ids(s, idx, err, err_len) != 0)
            return -1;
        return 0;
    }
    case MOEPERM_OP_PERMUTE_GRAD:
    case MOEPERM_OP_UNPERMUTE:
    case MOEPERM_OP_UNPERMUTE_GRAD:
        break;
    }
    /* The other three read a permuted tensor through sorted_indices. */
    int32_t *indices = malloc((size_t)(L > 0 ? L : 1) * sizeof *indices);
    if (!indices || golden_make_indices(s, indices, err, err_len) != 0) {
        free(indices);
        return -1;
    }
    const char *permuted = c->op == MOEPERM_OP_PERMUTE_GRAD ? "permuted_output_grad"
                                                           : "permuted_tokens";
    int rc = -1;
    if (!(t = add_tensor(c, permuted, s->dtype, 2, R, H)) ||
        fill_permuted(&values, indices, slots, t, w) != 0)
        goto done;
    if (c->op == MOEPERM_OP_UNPERMUTE_GRAD) {
        golden_generator g =
            make_generator(s, s->dtype, s->values, 1, H, PRNG_STREAM_GRAD, GOLDEN_FILL_GRAD);
        if (!(t = add_tensor(c, "unpermuted_tokens_grad", s->dtype, 2, T, H)) ||
            fill_rows(&g, NULL, t, w) != 0)
            goto done;
    }
    if (!(idx = add_tensor(c, "sorted_indices", MOEPERM_INT32, 1, L, 0)))
        goto done;
    memcpy(idx->data, indices, idx->bytes);
    if (s->has_probs && c->op != MOEPERM_OP_PERMUTE_GRAD) {
        golden_generator g = make_generator(s, s->probs_dtype, s->probs_values, 1, K,
                                     PRNG_STREAM_PROBS, GOLDEN_FILL_PROBS);
        if (!(t = add_tensor(c, "probs", s->probs_dtype, 2, T, K)) ||
            fill_rows(&g, NULL, t, w) != 0)
            goto done;
    }
    rc = 0;
done:
    free(indices);
    return rc;
}

/* moeperm_golden_generate(), handing each tensor to w (when not NULL) as it is
 * made.  On failure c is left to the caller to free: after w is stopped,
 * since w's threads may still be reading its tensors. */
static int generate(const moeperm_golden_spec *s, const char *command, moeperm_golden_case *c,
                    golden_case_writer *w, char *err, size_t err_len)
{
    memset(c, 0, sizeof *c);
    err[0] = '\0';
    if (moeperm_golden_spec_check(s, err, err_len) != 0)
        return -1;
    c->format_version = 2;
    c->op = s->op ? s->op : MOEPERM_OP_PERMUTE_GRAD;
    c->name = golden_strdup_printf("%s", s->name);
    c->description = golden_strdup_printf("%s", s->description);
    c->generator = golden_strdup_printf("moeperm %s", moeperm_version());
    c->command = command ? golden_strdup_printf("%s", command) : NULL;
    c->recipe.routing = golden_strdup_printf("%s", moeperm_golden_routing_name(s->routing));
    c->recipe.values = golden_strdup_printf("%s", moeperm_golden_values_name(s->values));
    c->recipe.probs_values =
        s->has_probs && c->op != MOEPERM_OP_PERMUTE_GRAD && c->op != MOEPERM_OP_PERMUTE
            ? golden_strdup_printf("%s", moeperm_golden_values_name(s->probs_values))
            : NULL;
    c->recipe.num_experts = s->num_experts ? s->num_experts : golden_default_experts(s->top_k);
    c->recipe.hot_percent = s->hot_percent;
    c->recipe.sentinels = c->op == MOEPERM_OP_PERMUTE && s->sentinels;
    c->recipe.huge_indices = s->huge_indices;
    c->seed = s->seed;
    c->attrs.top_k = c->op != MOEPERM_OP_PERMUTE_GRAD ? 0 : s->num_topk ? s->num_topk : s->top_k;
    c->attrs.num_out_tokens = c->op == MOEPERM_OP_PERMUTE ? s->num_out_tokens : 0;
    c->attrs.padded_mode = s->padded_mode;
    if (c->op == MOEPERM_OP_UNPERMUTE_GRAD && s->chip[0]) {
        /* A named chip is recorded by name and by its numbers. */
        moeperm_chip chip = {0, 0};
        moeperm_chip_by_name(s->chip, &chip);
        snprintf(c->attrs.chip, sizeof c->attrs.chip, "%s", s->chip);
        c->attrs.ub_bytes = chip.ub_bytes;
        c->attrs.vector_cores = chip.vector_cores;
    } else if (c->op == MOEPERM_OP_UNPERMUTE_GRAD && s->has_probs) {
        c->attrs.ub_bytes = s->ub_bytes;
        c->attrs.vector_cores = s->vector_cores;
    }
    bool recipe_ok = c->recipe.routing && c->recipe.values &&
                     (c->recipe.probs_values || !s->has_probs ||
                      c->op == MOEPERM_OP_PERMUTE_GRAD || c->op == MOEPERM_OP_PERMUTE);
    if (!c->name || !c->description || !c->generator || (command && !c->command) ||
        !recipe_ok || make_tensors(s, c, w, err, err_len) != 0) {
        if (err[0] == '\0')
            snprintf(err, err_len, "out of memory generating %s", s->name);
        return -1;
    }

    char inner[768];
    if (golden_case_finish_writing(c, w, inner, sizeof inner) != 0) {
        snprintf(err, err_len, "%s: %s", s->name, inner);
        return -1;
    }
    return 0;
}

int moeperm_golden_generate(const moeperm_golden_spec *s, const char *command, moeperm_golden_case *c, char *err,
                    size_t err_len)
{
    if (generate(s, command, c, NULL, err, err_len) != 0) {
        moeperm_golden_case_free(c);
        return -1;
    }
    return 0;
}

int moeperm_golden_generate_write(const moeperm_golden_spec *s, const char *command, const char *path,
                          bool force, char *err, size_t err_len)
{
    err[0] = '\0';
    if (moeperm_golden_spec_check(s, err, err_len) != 0)
        return -2;
    golden_case_writer *w = golden_case_writer_open(path, force, err, err_len);
    if (!w)
        return -1;
    moeperm_golden_case c;
    if (generate(s, command, &c, w, err, err_len) != 0) {
        golden_case_writer_abort(w);
        moeperm_golden_case_free(&c);
        return -2;
    }
    int rc = golden_case_writer_close_releasing(w, &c, err, err_len);
    moeperm_golden_case_free(&c);
    return rc;
}


/*
 * assemble.c - a generated case put together: the operator's inputs
 * allocated and filled (a row at a time, by the routing and the value
 * kinds), handed to the case writer stretch by stretch as they are made,
 * and the golden outputs from the public two-phase API, but for
 * MoeTokenPermute's permuted_tokens: a copy of token rows, made here in
 * order from the routing that API makes, so that the writer takes it in
 * stretches too.
 */
#include <inttypes.h>
#include <pthread.h>
#include <stdatomic.h>
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

/* A tensor being filled (fill_rows()): its stretches of `per` rows are
 * claimed in order, each by the first thread that comes free. */
typedef struct stretch_job {
    const golden_generator *g;
    const int64_t *owner;
    const uint8_t *copy;
    moeperm_golden_tensor *t;
    golden_case_writer *w;
    int64_t rows, per, stretches;
    size_t row_bytes;
    atomic_int_fast64_t next; /* the next stretch to claim */
    pthread_mutex_t finished; /* done[] and prefix */
    bool *done;
    int64_t prefix;
} stretch_job;

/* Claims the next stretch of j and makes it, telling j->w (when not NULL)
 * how many leading bytes are then final; false when none was left. */
static bool make_stretch(void *arg)
{
    stretch_job *j = arg;
    int64_t i = atomic_fetch_add(&j->next, 1);
    if (i >= j->stretches)
        return false;
    uint8_t *data = j->t->data;
    int64_t first = i * j->per, end = j->rows - first < j->per ? j->rows : first + j->per;
    if (j->t->bytes >= GOLDEN_DIRECT_MIN)
        golden_tensor_prefault(data + (size_t)first * j->row_bytes,
                               (size_t)(end - first) * j->row_bytes);
    for (int64_t r = first; r < end; r++) {
        uint8_t *dst = data + (size_t)r * j->row_bytes;
        if (j->copy)
            memcpy(dst, j->copy + (size_t)j->owner[r] * j->row_bytes, j->row_bytes);
        else if (!j->owner)
            fill_row(j->g, r, 0, dst);
        else
            fill_row(j->g, j->owner[r] / j->g->top_k, j->owner[r] % j->g->top_k, dst);
    }
    if (j->w) {
        pthread_mutex_lock(&j->finished);
        j->done[i] = true;
        while (j->prefix < j->stretches && j->done[j->prefix])
            j->prefix++;
        int64_t final_rows = j->prefix * j->per < j->rows ? j->prefix * j->per : j->rows;
        golden_case_writer_ready(j->w, j->t, (size_t)final_rows * j->row_bytes);
        pthread_mutex_unlock(&j->finished);
    }
    return true;
}

/*
 * Fills the rows of a [rows, hidden] tensor: row r is row (r, 0) of g, or
 * with owner row (owner[r] / K, owner[r] % K); or, with copy, a copy of
 * row owner[r] of copy (rows as long as t's).  The threads take stretches
 * of rows in order as they come free, and w (when not NULL) learns after
 * each one how many leading bytes are final.  Handing out stretches,
 * rather than a parallel loop per stretch, keeps the threads from waiting
 * for each other at every stretch, spinning on CPUs the writer's threads
 * need.  The generator's threads are one fewer than OpenMP's, so that w's
 * hashing thread, the one serial stream, always has a core
 * (golden_case_writer_team()); it makes stretches too whenever it has
 * nothing to hash (golden_case_writer_help()), so that no core idles while
 * the making is what the hash waits for.  Returns 0, or -1 when memory
 * runs out.
 */
static int fill_rows(const golden_generator *g, const int64_t *owner, const uint8_t *copy,
                     moeperm_golden_tensor *t, golden_case_writer *w)
{
    int64_t rows = t->shape[0];
    if (rows == 0 || t->bytes == 0)
        return 0;
    stretch_job j = {.g = g, .owner = owner, .copy = copy, .t = t, .w = w, .rows = rows,
                     .row_bytes = t->bytes / (size_t)rows};
    /* At least 16 stretches, so that a tensor of a few MiB is still split. */
    j.per = (int64_t)(STRETCH_BYTES / j.row_bytes);
    j.per = j.per < (rows + 15) / 16 ? j.per : (rows + 15) / 16;
    j.per = j.per > 0 ? j.per : 1;
    j.stretches = (rows + j.per - 1) / j.per;
    atomic_init(&j.next, 0);
    if (!(j.done = calloc((size_t)j.stretches, sizeof *j.done)))
        return -1;
    /* A lock of this call's own rather than a named OpenMP critical
     * section, which would be a symbol the shared library exports. */
    pthread_mutex_init(&j.finished, NULL);
    if (w) {
        golden_case_writer_ready(w, t, 0);
        golden_case_writer_help(w, make_stretch, &j);
    }
    int team = golden_case_writer_team(w);
    (void)team;
#if defined(_OPENMP)
#pragma omp parallel num_threads(team)
#endif
    while (make_stretch(&j))
        ;
    if (w) /* returns once a stretch the writer's thread is making is made */
        golden_case_writer_help(w, NULL, NULL);
    pthread_mutex_destroy(&j.finished);
    free(j.done);
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
    int rc = fill_rows(g, owner, NULL, t, w);
    free(owner);
    return rc;
}

/*
 * Fills MoeTokenPermute's permuted_tokens by the operator's definition
 * from the sorted_indices its reference run made (see
 * golden_case_finish_writing()): row sorted_indices[i] is token i / K's,
 * for each i below the rows kept.  A copy of the token's bytes, NaN
 * payloads and all, as the operator moves them.  Made in order, stretch by
 * stretch, as fill_rows() makes the inputs, so that the writer hashes and
 * writes it while the rest is made.  Returns 0, or -1 with a sentence.
 */
static int fill_permute_output(moeperm_golden_case *c, golden_case_writer *w, char *err,
                               size_t err_len)
{
    moeperm_golden_tensor *out = moeperm_golden_case_tensor(c, "permuted_tokens");
    const moeperm_golden_tensor *tokens = moeperm_golden_case_tensor_const(c, "tokens");
    const moeperm_golden_tensor *sorted = moeperm_golden_case_tensor_const(c, "sorted_indices");
    int64_t rows = out->shape[0], slots = sorted->shape[0], n = tokens->shape[0];
    if (rows == 0 || out->bytes == 0)
        return 0;
    int64_t *owner = malloc((size_t)rows * sizeof *owner);
    if (!owner) {
        snprintf(err, err_len, "out of memory generating %s", c->name);
        return -1;
    }
    for (int64_t r = 0; r < rows; r++)
        owner[r] = -1;
    const int32_t *at = sorted->data;
    for (int64_t i = 0; i < slots; i++)
        if (at[i] >= 0 && at[i] < rows)
            owner[at[i]] = i / (slots / n);
    /* The operator's sorted_indices are a permutation of the slots, so
     * every row kept has its token; anything else is the library's bug,
     * said rather than written. */
    for (int64_t r = 0; r < rows; r++)
        if (owner[r] < 0) {
            snprintf(err, err_len, "%s: the reference's sorted_indices name no slot for row "
                     "%lld of permuted_tokens", c->name, (long long)r);
            free(owner);
            return -1;
        }
    int rc = fill_rows(NULL, owner, tokens->data, out, w);
    free(owner);
    if (rc != 0)
        snprintf(err, err_len, "out of memory generating %s", c->name);
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
        if (fill_rows(&values, NULL, NULL, t, w) != 0)
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
            fill_rows(&g, NULL, NULL, t, w) != 0)
            goto done;
    }
    if (!(idx = add_tensor(c, "sorted_indices", MOEPERM_INT32, 1, L, 0)))
        goto done;
    memcpy(idx->data, indices, idx->bytes);
    if (s->has_probs && c->op != MOEPERM_OP_PERMUTE_GRAD) {
        golden_generator g = make_generator(s, s->probs_dtype, s->probs_values, 1, K,
                                     PRNG_STREAM_PROBS, GOLDEN_FILL_PROBS);
        if (!(t = add_tensor(c, "probs", s->probs_dtype, 2, T, K)) ||
            fill_rows(&g, NULL, NULL, t, w) != 0)
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

    /* MoeTokenPermute's largest output is made here from the routing the
     * reference makes, in order, for the writer to take in stretches. */
    char inner[768];
    if (golden_case_finish_writing(c, w, true, inner, sizeof inner) != 0) {
        snprintf(err, err_len, "%s: %s", s->name, inner);
        return -1;
    }
    if (c->op == MOEPERM_OP_PERMUTE)
        return fill_permute_output(c, w, err, err_len);
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


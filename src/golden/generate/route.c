/*
 * route.c - the routings of a generated case: top_k distinct experts per
 * token with some hot ones, sorted through the public
 * moeperm_route_sorted_indices(), or fixed and random permutations; and
 * MoeTokenPermute's expert ids themselves, sentinels included.
 */
#include "golden/generate/route.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>

#include "golden/common/prng.h"
#include "golden/generate/spec.h"

#if defined(_OPENMP)
#define PARALLEL_FOR _Pragma("omp parallel for schedule(static)")
#else
#define PARALLEL_FOR
#endif

/*
 * Token t draws experts from its own sub-stream (key prng_draw(routing key,
 * t)), one draw per attempt: the low 32 bits decide hot or not, the high 32
 * bits pick the expert among the hot eighth or among all.  A repeat of an
 * expert the token already has is drawn again, so the k-th slot holds the
 * k-th distinct expert drawn.
 */
static void route_token(uint64_t key, int64_t t, int64_t top_k, int64_t experts,
                        int hot_percent, int32_t *ids)
{
    uint64_t token_key = prng_draw(key, (uint64_t)t);
    uint64_t hot = (uint64_t)(experts / 8 > 0 ? experts / 8 : 1);
    uint64_t attempt = 0;
    for (int64_t k = 0; k < top_k;) {
        uint64_t d = prng_draw(token_key, attempt++);
        bool is_hot = ((d & 0xffffffffu) * 100u) >> 32 < (uint64_t)hot_percent;
        int32_t e = (int32_t)prng_below(d, is_hot ? hot : (uint64_t)experts);
        bool seen = false;
        for (int64_t j = 0; j < k && !seen; j++)
            seen = ids[j] == e;
        if (!seen)
            ids[k++] = e;
    }
}

/* Every token's top_k expert ids, [T, K] (malloc'd), or NULL after a
 * sentence in err. */
static int32_t *routed_ids(const moeperm_golden_spec *s, char *err, size_t err_len)
{
    int64_t n = s->tokens_num * s->top_k;
    int64_t experts = s->num_experts ? s->num_experts : golden_default_experts(s->top_k);
    int32_t *ids = malloc((size_t)n * sizeof *ids);
    if (!ids) {
        snprintf(err, err_len, "out of memory for %" PRId64 " expert ids", n);
        return NULL;
    }
    uint64_t key = prng_stream_key(s->seed, PRNG_STREAM_ROUTING);
    PARALLEL_FOR
    for (int64_t t = 0; t < s->tokens_num; t++)
        route_token(key, t, s->top_k, experts, s->hot_percent, ids + t * s->top_k);
    return ids;
}

/* The rows R of spec s's permuted tensor. */
static int64_t rows_of(const moeperm_golden_spec *s)
{
    return s->num_rows < 0 ? s->tokens_num * s->top_k : s->num_rows;
}

/* The routings that are no permutation: repeats draws every slot's row
 * from [0, R) on its own; sparse deals distinct rows out of [0, R) by the
 * first T*K steps of a Fisher-Yates shuffle of 0..R-1 (step i swaps entry
 * i with entry i + below(draw i, R - i)). */
static int domain_rows(const moeperm_golden_spec *s, int32_t *indices, char *err, size_t err_len)
{
    int64_t n = s->tokens_num * s->top_k, rows = rows_of(s);
    uint64_t key = prng_stream_key(s->seed, PRNG_STREAM_ROWS);
    if (s->routing == MOEPERM_GOLDEN_ROUTING_REPEATS) {
        for (int64_t i = 0; i < n; i++)
            indices[i] = (int32_t)prng_below(prng_draw(key, (uint64_t)i), (uint64_t)rows);
        return 0;
    }
    int32_t *deck = malloc((size_t)(rows > 0 ? rows : 1) * sizeof *deck);
    if (!deck) {
        snprintf(err, err_len, "out of memory for the %" PRId64 " rows of a sparse routing", rows);
        return -1;
    }
    for (int64_t r = 0; r < rows; r++)
        deck[r] = (int32_t)r;
    for (int64_t i = 0; i < n; i++) {
        int64_t j = i + (int64_t)prng_below(prng_draw(key, (uint64_t)i), (uint64_t)(rows - i));
        int32_t tmp = deck[i];
        deck[i] = deck[j];
        deck[j] = tmp;
        indices[i] = deck[i];
    }
    free(deck);
    return 0;
}

/* The slots' rows by the routing of s, n = T*K of them. */
static int route(const moeperm_golden_spec *s, int32_t *indices, char *err, size_t err_len)
{
    int64_t n = s->tokens_num * s->top_k;
    switch (s->routing) {
    case MOEPERM_GOLDEN_ROUTING_IDENTITY:
        for (int64_t i = 0; i < n; i++)
            indices[i] = (int32_t)i;
        return 0;
    case MOEPERM_GOLDEN_ROUTING_REVERSE:
        for (int64_t i = 0; i < n; i++)
            indices[i] = (int32_t)(n - 1 - i);
        return 0;
    case MOEPERM_GOLDEN_ROUTING_RANDOM: {
        /* Fisher-Yates from the identity, i = n-1 down to 1, swap with a
         * j drawn from [0, i] by draw i of the permutation stream. */
        uint64_t key = prng_stream_key(s->seed, PRNG_STREAM_PERMUTATION);
        for (int64_t i = 0; i < n; i++)
            indices[i] = (int32_t)i;
        for (int64_t i = n - 1; i > 0; i--) {
            int64_t j = (int64_t)prng_below(prng_draw(key, (uint64_t)i), (uint64_t)i + 1);
            int32_t tmp = indices[i];
            indices[i] = indices[j];
            indices[j] = tmp;
        }
        return 0;
    }
    case MOEPERM_GOLDEN_ROUTING_REPEATS:
    case MOEPERM_GOLDEN_ROUTING_SPARSE:
        return domain_rows(s, indices, err, err_len);
    case MOEPERM_GOLDEN_ROUTING_ROUTED:
        break;
    }
    int64_t experts = s->num_experts ? s->num_experts : golden_default_experts(s->top_k);
    int32_t *ids = routed_ids(s, err, err_len);
    if (!ids)
        return -1;
    moeperm_status st = moeperm_route_sorted_indices(ids, (size_t)n, (int32_t)experts, indices);
    free(ids);
    if (st != MOEPERM_SUCCESS) {
        snprintf(err, err_len, "moeperm_route_sorted_indices failed (%s): %s",
                 moeperm_status_name(st), moeperm_last_error());
        return -1;
    }
    return 0;
}

int golden_make_indices(const moeperm_golden_spec *s, int32_t *indices, char *err, size_t err_len)
{
    int64_t n = s->tokens_num * s->top_k, rows = rows_of(s);
    if (route(s, indices, err, err_len) != 0)
        return -1;
    /* Every third slot far past the rows: 1.0f's bits read as an int32
     * (as in the vendor's examples), INT32_MAX, R itself, +inf's bits,
     * 2^24. */
    if (s->huge_indices) {
        int64_t huge[HUGE_COUNT] = HUGE_VALUES;
        huge[2] = rows;
        for (int64_t i = 1; i < n; i += 3)
            indices[i] = (int32_t)huge[(i / 3) % HUGE_COUNT];
    }
    /* The entries past T*K, never read: rows drawn from [0, R) (0 when
     * there are none), so that a kernel reading them sums what it should
     * not rather than leaving the tensor. */
    uint64_t key = prng_stream_key(s->seed, PRNG_STREAM_ROWS);
    for (int64_t j = 0; j < s->extra_indices; j++)
        indices[n + j] = rows > 0 ? (int32_t)prng_below(prng_draw(key, (uint64_t)(n + j)),
                                                        (uint64_t)rows)
                                  : 0;
    return 0;
}

/* MoeTokenPermute's expert ids [T, K] of the index dtype: the routing's
 * choices, and with sentinels every 7th slot the dtype's minimum or maximum
 * (alternately), the ids the device sorts first and last. */
int golden_fill_expert_ids(const moeperm_golden_spec *s, moeperm_golden_tensor *t, char *err,
                           size_t err_len)
{
    int64_t n = s->tokens_num * s->top_k;
    int32_t *ids = routed_ids(s, err, err_len);
    if (!ids)
        return -1;
    for (int64_t i = 0; i < n; i++) {
        int64_t id = ids[i];
        if (s->sentinels && i % 7 == 3)
            id = (i / 7) % 2 == 0 ? (s->index_dtype == MOEPERM_INT64 ? INT64_MIN : INT32_MIN)
                                  : (s->index_dtype == MOEPERM_INT64 ? INT64_MAX : INT32_MAX);
        if (s->index_dtype == MOEPERM_INT64)
            ((int64_t *)t->data)[i] = id;
        else
            ((int32_t *)t->data)[i] = (int32_t)id;
    }
    free(ids);
    return 0;
}

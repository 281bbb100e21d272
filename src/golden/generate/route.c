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

int golden_make_indices(const moeperm_golden_spec *s, int32_t *indices, char *err, size_t err_len)
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

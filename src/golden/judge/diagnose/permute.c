/*
 * permute.c - MoeTokenPermute's models of known kernel bugs, for both its
 * outputs.  The operator sorts the N*K flattened expert ids stably and
 * copies token i / K to row sorted_indices[i] when that row is below
 * num_out (docs/operators.md); there is no arithmetic, so a model is a
 * placement: which entry lands on which row, and which token's row it
 * carries.  Placements come from the library's own sort (MoeTokenPermute
 * run on the ids, or on ids rearranged the way the bug has them); a row is
 * then its token's bits, moved as the operator moves them.
 *
 * permuted_tokens [num_out, H] is judged row by row (a row is a "row";
 * tokens and permuted_tokens of rank 3 or more are rows of their trailing
 * dims, as the operator reads them);
 * sorted_indices [N*K] entry by entry (a "slot").
 */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "golden/judge/diagnose/model.h"
#include "golden/judge/diagnose/runner.h"

/* The placements a model may ask for, made once each. */
enum {
    PLACE_TIES_REVERSED, /* the position of each entry with equal ids in reverse slot order */
    PLACE_INFERRED,      /* unstable-sort's placement read off the actual output */
    PLACES
};

typedef struct pm_ctx {
    moeperm_dtype dtype;     /* the tokens' */
    const void *tokens;      /* [N, H] */
    const golden_diag_tensor *indices;
    int64_t N, K, H, NK, num_out, num_out_tokens;
    bool tokens_output;      /* judging permuted_tokens, else sorted_indices */
    int32_t *si;             /* the reference's sorted_indices: entry -> row */
    int32_t *inv;            /* row -> entry */
    int32_t *group_first;    /* per row: the first row of its expert's block */
    int32_t *group_end;      /* per row: one past the last */
    /* per placement: for permuted_tokens, the token whose row lands on
     * each row (-1: none); for sorted_indices, each entry's row */
    int32_t *place[PLACES];
    bool inferred;           /* place[PLACE_INFERRED] was read off the output */
    uint64_t inferred_rows;  /* rows (or entries) it moves off the stable order */
    uint64_t fill;           /* what the rows no entry writes hold in the output */
} pm_ctx;

static int oom(char *err, size_t err_len)
{
    snprintf(err, err_len, "out of memory for a diagnosis model");
    return -1;
}

/* The rows MoeTokenPermute gives ids (count of them, int32 in [0,
 * MOEPERM_MAX_EXPERT_ID] or a tensor of the case's indices): its own
 * stable sort, run on a token of one int8 column per entry. */
static int sort_rows(const golden_diag_tensor *indices, const int32_t *ids, int64_t count,
                     int32_t *rows, char *err, size_t err_len)
{
    int64_t n = indices ? indices->dims[0] : count;
    int8_t *tokens = calloc((size_t)(n > 0 ? n : 1), 1);
    int8_t *permuted = malloc((size_t)(count > 0 ? count : 1));
    if (!tokens || !permuted) {
        free(tokens);
        free(permuted);
        return oom(err, err_len);
    }
    int64_t td[2] = {n, 1}, pd[2] = {count, 1}, sd[1] = {count};
    golden_diag_tensors ts = GOLDEN_DIAG_TENSORS_INIT;
    moeperm_tensor *tt = golden_diag_tensor_add(&ts, td, 2, MOEPERM_INT8, tokens);
    moeperm_tensor *it = indices ? golden_diag_tensor_add(&ts, indices->dims, indices->ndim,
                                                          indices->dtype, indices->data)
                                 : golden_diag_tensor_add(&ts, sd, 1, MOEPERM_INT32, ids);
    moeperm_tensor *pt = golden_diag_tensor_add(&ts, pd, 2, MOEPERM_INT8, permuted);
    moeperm_tensor *st = golden_diag_tensor_add(&ts, sd, 1, MOEPERM_INT32, rows);
    uint64_t ws = 0;
    moeperm_executor *plan = NULL;
    moeperm_status status =
        ts.made ? moeperm_token_permute_get_workspace_size(tt, it, 0, false, pt, st, &ws, &plan)
                : MOEPERM_ERR_INNER;
    int rc = golden_diag_tensors_run(&ts, status, ws, plan, err, err_len);
    free(tokens);
    free(permuted);
    return rc;
}

/* Entry i's expert id, widened. */
static int64_t id_of(const pm_ctx *x, int64_t i)
{
    return x->indices->dtype == MOEPERM_INT64 ? ((const int64_t *)x->indices->data)[i]
                                              : ((const int32_t *)x->indices->data)[i];
}

/* ---------------------------------------------------------------------- */
/* Placements                                                             */
/* ---------------------------------------------------------------------- */

/* Equal ids in reverse slot order: the library's sort of the ids read
 * backwards, read backwards again. */
static int place_ties_reversed(pm_ctx *x, char *err, size_t err_len)
{
    int32_t *rank = malloc((size_t)x->NK * sizeof *rank + 1);
    int32_t *rows = malloc((size_t)x->NK * sizeof *rows + 1);
    int32_t *place = malloc((size_t)(x->tokens_output ? x->num_out : x->NK) * sizeof *place + 1);
    int rc = -1;
    if (!rank || !rows || !place) {
        oom(err, err_len);
        goto done;
    }
    /* The ids' order among themselves is all the sort reads: the rank of
     * each id among the distinct values keeps the ids in range. */
    for (int64_t q = 0, r = -1; q < x->NK; q++) {
        int64_t i = x->inv[q];
        if (q == 0 || id_of(x, i) != id_of(x, x->inv[q - 1]))
            r++;
        rank[x->NK - 1 - i] = (int32_t)r;
    }
    if (sort_rows(NULL, rank, x->NK, rows, err, err_len) != 0)
        goto done;
    for (int64_t q = 0; x->tokens_output && q < x->num_out; q++)
        place[q] = -1;
    for (int64_t i = 0; i < x->NK; i++) {
        int32_t q = rows[x->NK - 1 - i];
        if (!x->tokens_output)
            place[i] = q;
        else if (q < x->num_out)
            place[q] = (int32_t)(i / x->K);
    }
    x->place[PLACE_TIES_REVERSED] = place;
    place = NULL;
    rc = 0;
done:
    free(rank);
    free(rows);
    free(place);
    return rc;
}

/* A row's bits hashed eight bytes at a time. */
static uint64_t hash_bytes(const uint8_t *p, size_t n)
{
    uint64_t h = 0x9e3779b97f4a7c15u ^ n;
    size_t i = 0;
    for (; i + 8 <= n; i += 8) {
        uint64_t w;
        memcpy(&w, p + i, 8);
        h = (h ^ w) * 0xff51afd7ed558ccdu;
        h ^= h >> 32;
    }
    for (; i < n; i++)
        h = (h ^ p[i]) * 0x100000001b3u;
    return h ^ (h >> 29);
}

typedef struct keyed {
    uint64_t key;
    int32_t entry;
} keyed;

static int by_key(const void *pa, const void *pb)
{
    const keyed *a = pa, *b = pb;
    if (a->key != b->key)
        return a->key < b->key ? -1 : 1;
    return (a->entry > b->entry) - (a->entry < b->entry);
}

/*
 * An unstable sort leaves each expert's block of rows holding that
 * expert's entries in some order.  Which order the output shows is read
 * off it: each row of permuted_tokens takes an unused entry of its block
 * whose token's row has its bits (rows of equal bits are interchangeable);
 * each entry of sorted_indices keeps the row the output gives it when that
 * row lies in its expert's block and no other entry took it.  Anything
 * else keeps the stable placement, which the tally then counts against the
 * model.
 */
static int place_inferred(pm_ctx *x, const golden_diag_data *d, char *err, size_t err_len)
{
    int64_t rows = x->tokens_output ? x->num_out : x->NK;
    int32_t *place = malloc((size_t)rows * sizeof *place + 1);
    if (!place)
        return oom(err, err_len);
    x->inferred_rows = 0;
    if (!x->tokens_output) {
        bool *taken = calloc((size_t)x->NK + 1, sizeof *taken);
        if (!taken) {
            free(place);
            return oom(err, err_len);
        }
        for (int64_t i = 0; i < x->NK; i++) {
            int32_t a = (int32_t)golden_bits_load(MOEPERM_INT32, d->actual, (uint64_t)i);
            int32_t q = x->si[i];
            bool fits = a >= x->group_first[q] && a < x->group_end[q] && !taken[a];
            place[i] = fits ? a : q;
            if (fits)
                taken[a] = true;
            x->inferred_rows += fits && a != q;
        }
        free(taken);
        x->place[PLACE_INFERRED] = place;
        return 0;
    }
    size_t row = (size_t)x->H * moeperm_dtype_size(x->dtype);
    uint64_t *token_hash = malloc((size_t)x->N * sizeof *token_hash + 1);
    keyed *entries = malloc((size_t)x->NK * sizeof *entries + 1);
    int64_t *used = calloc((size_t)x->NK + 1, sizeof *used);
    if (!token_hash || !entries || !used) {
        free(place);
        free(token_hash);
        free(entries);
        free(used);
        return oom(err, err_len);
    }
    for (int64_t t = 0; t < x->N; t++)
        token_hash[t] = hash_bytes((const uint8_t *)x->tokens + (size_t)t * row, row);
    /* An entry's key: its token's row and its expert's block. */
    for (int64_t i = 0; i < x->NK; i++)
        entries[i] = (keyed){token_hash[i / x->K] * 31u + (uint64_t)x->group_first[x->si[i]],
                             (int32_t)i};
    qsort(entries, (size_t)x->NK, sizeof *entries, by_key);
    for (int64_t q = 0; q < x->num_out; q++) {
        const uint8_t *a = (const uint8_t *)d->actual + (size_t)q * row;
        uint64_t key = hash_bytes(a, row) * 31u + (uint64_t)x->group_first[q];
        /* the first of the run of this key not yet used */
        size_t lo = 0, hi = (size_t)x->NK;
        while (lo < hi) {
            size_t mid = (lo + hi) / 2;
            if (entries[mid].key < key)
                lo = mid + 1;
            else
                hi = mid;
        }
        place[q] = x->inv[q] / (int32_t)x->K;
        if (lo >= (size_t)x->NK || entries[lo].key != key)
            continue;
        size_t at = lo + (size_t)used[lo];
        if (at >= (size_t)x->NK || entries[at].key != key)
            continue;
        int32_t t = entries[at].entry / (int32_t)x->K;
        if (memcmp(a, (const uint8_t *)x->tokens + (size_t)t * row, row) != 0)
            continue;
        used[lo]++;
        place[q] = t;
        x->inferred_rows += entries[at].entry != x->inv[q];
    }
    free(token_hash);
    free(entries);
    free(used);
    x->place[PLACE_INFERRED] = place;
    return 0;
}

static int prepare_inferred(void *ctx, const golden_diag_data *d, const int64_t *sample, size_t n,
                            char *err, size_t err_len)
{
    pm_ctx *x = ctx;
    (void)sample;
    (void)n;
    if (x->place[PLACE_INFERRED])
        return 0;
    if (place_inferred(x, d, err, err_len) != 0)
        return -1;
    x->inferred = true;
    return 0;
}

/* What the rows no entry writes hold: the output's own fill value. */
static int prepare_fill(void *ctx, const golden_diag_data *d, const int64_t *sample, size_t n,
                        char *err, size_t err_len)
{
    pm_ctx *x = ctx;
    uint64_t value, count;
    (void)sample;
    (void)n;
    (void)err;
    (void)err_len;
    if (x->tokens_output && x->num_out < x->NK) /* num-out-ignored applies */
        x->fill = golden_diag_fill_value(d, &value, &count) ? value : 0;
    return 0;
}

/* ---------------------------------------------------------------------- */
/* permuted_tokens                                                        */
/* ---------------------------------------------------------------------- */

/* The token whose row a model puts on row q, or -1 for none. */
typedef int64_t (*token_rule)(const pm_ctx *x, int variant, int64_t q);

/* Rows as rule places them: each a token's bits, as the operator moves
 * them, or the fill where nothing is written. */
static int pm_rows(pm_ctx *x, int variant, const int64_t *rows, size_t n, void *out,
                   token_rule rule)
{
    size_t es = moeperm_dtype_size(x->dtype), row = (size_t)x->H * es;
    for (size_t j = 0; j < n; j++) {
        int64_t t = rule(x, variant, rows[j]);
        uint8_t *dst = (uint8_t *)out + j * row;
        if (t >= 0)
            memcpy(dst, (const uint8_t *)x->tokens + (size_t)t * row, row);
        else
            for (int64_t c = 0; c < x->H; c++)
                golden_bits_store(x->dtype, dst, (uint64_t)c, x->fill);
    }
    return 0;
}

static int64_t t_placed(const pm_ctx *x, int variant, int64_t q)
{
    return x->place[variant][q];
}

static int64_t t_inverted(const pm_ctx *x, int variant, int64_t q)
{
    (void)variant;
    return x->si[q] / x->K;
}

static int64_t t_token_row(const pm_ctx *x, int variant, int64_t q)
{
    (void)variant;
    return x->inv[q] % x->N;
}

/* Variant 0: the last num_out rows kept instead of the first (the cut
 * taken from the front); 1: num_out_tokens read as a row count as it is
 * (none for 0 or less); 2: its magnitude read as the row count; 3: the
 * cut applied to the entry, not the row: only entries below num_out are
 * copied. */
static int64_t num_out_written(const pm_ctx *x, int variant)
{
    if (variant == 1)
        return x->num_out_tokens > 0 ? x->num_out_tokens : 0;
    return x->num_out_tokens < 0 ? -x->num_out_tokens : x->num_out_tokens;
}

static int64_t t_num_out(const pm_ctx *x, int variant, int64_t q)
{
    switch (variant) {
    case 0:
        return x->inv[q + (x->NK - x->num_out)] / x->K;
    case 1:
    case 2:
        return q < num_out_written(x, variant) ? x->inv[q] / x->K : -1;
    default:
        return x->inv[q] < x->num_out ? x->inv[q] / x->K : -1;
    }
}

static int m_unstable(void *ctx, int variant, const int64_t *rows, size_t n, void *out,
                      char *err, size_t err_len)
{
    pm_ctx *x = ctx;
    int p = variant == 0 ? PLACE_TIES_REVERSED : PLACE_INFERRED;
    if (p == PLACE_TIES_REVERSED && !x->place[p] && place_ties_reversed(x, err, err_len) != 0)
        return -1;
    if (!x->place[p]) {
        snprintf(err, err_len, "the diagnosis did not read the placement off the output");
        return -1;
    }
    if (!x->tokens_output) {
        for (size_t j = 0; j < n; j++)
            golden_bits_store(MOEPERM_INT32, out, j, (uint32_t)x->place[p][rows[j]]);
        return 0;
    }
    return pm_rows(x, p, rows, n, out, t_placed);
}

static int m_inverted(void *ctx, int variant, const int64_t *rows, size_t n, void *out,
                      char *err, size_t err_len)
{
    pm_ctx *x = ctx;
    (void)err;
    (void)err_len;
    if (!x->tokens_output) {
        for (size_t j = 0; j < n; j++)
            golden_bits_store(MOEPERM_INT32, out, j, (uint32_t)x->inv[rows[j]]);
        return 0;
    }
    return pm_rows(x, variant, rows, n, out, t_inverted);
}

static int m_num_out(void *ctx, int variant, const int64_t *rows, size_t n, void *out,
                     char *err, size_t err_len)
{
    (void)err;
    (void)err_len;
    return pm_rows(ctx, variant, rows, n, out, t_num_out);
}

static int m_token_row(void *ctx, int variant, const int64_t *rows, size_t n, void *out,
                       char *err, size_t err_len)
{
    (void)err;
    (void)err_len;
    return pm_rows(ctx, variant, rows, n, out, t_token_row);
}

/* ---------------------------------------------------------------------- */
/* Which variants apply, what each finding says                           */
/* ---------------------------------------------------------------------- */

static int v_unstable(const void *ctx)
{
    (void)ctx;
    return 2;
}

static int v_one(const void *ctx)
{
    (void)ctx;
    return 1;
}

static int v_num_out(const void *ctx)
{
    const pm_ctx *x = ctx;
    return x->tokens_output && x->num_out < x->NK ? 4 : 0;
}

static int v_token_row(const void *ctx)
{
    const pm_ctx *x = ctx;
    return x->tokens_output && x->K > 1;
}

static void d_unstable(const void *ctx, int v, char *out, size_t len)
{
    const pm_ctx *x = ctx;
    if (v == 0)
        snprintf(out, len, "entries with equal expert ids are placed in reverse slot order "
                           "(an unstable sort)");
    else
        snprintf(out, len,
                 "entries with equal expert ids are not kept in slot order (an unstable sort): "
                 "%" PRIu64 " %s hold another entry of the same expert",
                 x->inferred_rows, x->tokens_output ? "rows" : "slots");
}

static void d_inverted(const void *ctx, int v, char *out, size_t len)
{
    const pm_ctx *x = ctx;
    (void)v;
    if (x->tokens_output)
        snprintf(out, len, "sorted_indices is used the wrong way round: row q holds the token of "
                           "entry sorted_indices[q]");
    else
        snprintf(out, len, "the row-to-entry map is written: sorted_indices[q] is the entry that "
                           "lands on row q, not the row of entry q");
}

static void d_num_out(const void *ctx, int v, char *out, size_t len)
{
    const pm_ctx *x = ctx;
    switch (v) {
    case 0:
        snprintf(out, len,
                 "num_out_tokens = %" PRId64 " drops the first %" PRId64 " rows, not the last",
                 x->num_out_tokens, x->NK - x->num_out);
        break;
    case 1:
    case 2:
        snprintf(out, len,
                 "num_out_tokens = %" PRId64 " is read as a row count: only %" PRId64
                 " rows are written",
                 x->num_out_tokens, num_out_written(x, v));
        break;
    default:
        snprintf(out, len,
                 "num_out_tokens cuts the entries, not the rows: only entries below %" PRId64
                 " are copied",
                 x->num_out);
    }
}

static void d_token_row(const void *ctx, int v, char *out, size_t len)
{
    const pm_ctx *x = ctx;
    (void)v;
    snprintf(out, len,
             "entry i copies token i %% %" PRId64 " instead of i / %" PRId64
             " (the entries taken as slot-major)",
             x->N, x->K);
}

/* ---------------------------------------------------------------------- */
/* The two entries                                                        */
/* ---------------------------------------------------------------------- */

/* The elements of a row of t: the product of its dims after the first
 * (a token of rank-3 tokens is its trailing dims, row-major), or -1 when
 * t has fewer than two dims or the product overflows. */
static int64_t row_of(const golden_diag_tensor *t)
{
    int64_t h = 1;
    if (t->ndim < 2)
        return -1;
    for (uint64_t d = 1; d < t->ndim; d++)
        if (t->dims[d] < 0 || __builtin_mul_overflow(h, t->dims[d], &h))
            return -1;
    return h;
}

static bool setup_inputs(const golden_diag_problem *p, pm_ctx *x)
{
    const golden_diag_tensor *t = golden_diag_input(p, "tokens");
    const golden_diag_tensor *ix = golden_diag_input(p, "indices");
    if (!t || !ix || row_of(t) < 0 || (ix->ndim != 1 && ix->ndim != 2) ||
        (ix->dtype != MOEPERM_INT32 && ix->dtype != MOEPERM_INT64) || ix->dims[0] != t->dims[0] ||
        !golden_diag_attr_value(p, "num_out_tokens", &x->num_out_tokens) ||
        (t->dims[0] > 0 && (!t->data || !ix->data)))
        return false;
    x->dtype = t->dtype;
    x->tokens = t->data;
    x->indices = ix;
    x->N = t->dims[0];
    x->H = row_of(t);
    x->K = ix->ndim == 2 ? ix->dims[1] : 1;
    x->NK = x->N * x->K;
    if (x->K < 1 || x->NK > MOEPERM_MAX_EXPERT_ID || x->NK == 0)
        return false;
    x->num_out = x->num_out_tokens <= 0 ? x->num_out_tokens + x->NK : x->num_out_tokens;
    x->num_out = x->num_out < 0 ? 0 : x->num_out > x->NK ? x->NK : x->num_out;
    size_t bytes = (size_t)x->NK * sizeof(int32_t);
    x->si = malloc(bytes);
    x->inv = malloc(bytes);
    x->group_first = malloc(bytes);
    x->group_end = malloc(bytes);
    char err[256];
    if (!x->si || !x->inv || !x->group_first || !x->group_end ||
        sort_rows(ix, NULL, x->NK, x->si, err, sizeof err) != 0)
        return false;
    for (int64_t i = 0; i < x->NK; i++)
        x->inv[x->si[i]] = (int32_t)i;
    for (int64_t q = 0, first = 0; q < x->NK; q++) {
        if (q > 0 && id_of(x, x->inv[q]) != id_of(x, x->inv[q - 1])) {
            for (int64_t r = first; r < q; r++)
                x->group_end[r] = (int32_t)q;
            first = q;
        }
        x->group_first[q] = (int32_t)first;
        if (q == x->NK - 1)
            for (int64_t r = first; r <= q; r++)
                x->group_end[r] = (int32_t)x->NK;
    }
    return x->H > 0;
}

static bool setup_tokens(const golden_diag_problem *p, const golden_diag_tensor *expected,
                         void *ctx)
{
    pm_ctx *x = ctx;
    x->tokens_output = true;
    return setup_inputs(p, x) && row_of(expected) == x->H && expected->dims[0] == x->num_out &&
           expected->dtype == x->dtype;
}

static bool setup_indices(const golden_diag_problem *p, const golden_diag_tensor *expected,
                          void *ctx)
{
    pm_ctx *x = ctx;
    x->tokens_output = false;
    return setup_inputs(p, x) && expected->ndim == 1 && expected->dims[0] == x->NK &&
           expected->dtype == MOEPERM_INT32;
}

static void cleanup(void *ctx)
{
    pm_ctx *x = ctx;
    free(x->si);
    free(x->inv);
    free(x->group_first);
    free(x->group_end);
    for (int p = 0; p < PLACES; p++)
        free(x->place[p]);
}

static size_t row_elements(const void *ctx)
{
    const pm_ctx *x = ctx;
    return x->tokens_output ? (size_t)x->H : 1;
}

#define PM "MoeTokenPermute"

/* permuted_tokens takes them all, sorted_indices the first two. */
static const golden_diag_model token_models[] = {
    {{"unstable-sort", PM, "entries with equal expert ids are not kept in slot order"},
     v_unstable, prepare_inferred, NULL, m_unstable, d_unstable},
    {{"sorted-indices-inverted", PM,
      "the map from rows to entries is used or written where the map from entries to rows "
      "belongs"},
     v_one, NULL, NULL, m_inverted, d_inverted},
    {{"token-row", PM, "entry i copies token i % N instead of i / top_k"},
     v_token_row, NULL, NULL, m_token_row, d_token_row},
    {{"num-out-ignored", PM,
      "num_out_tokens misapplied: the wrong rows kept, or rows left unwritten"},
     v_num_out, prepare_fill, NULL, m_num_out, d_num_out},
};

const golden_diag_operator golden_diag_permute_tokens = {
    PM, "permuted_tokens", "row", token_models, sizeof token_models / sizeof token_models[0],
    sizeof(pm_ctx), setup_tokens, cleanup, row_elements, NULL,
};

const golden_diag_operator golden_diag_permute_indices = {
    PM, "sorted_indices", "slot", token_models, 2, sizeof(pm_ctx), setup_indices, cleanup,
    row_elements, NULL,
};

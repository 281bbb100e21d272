/*
 * search.c - the diagnosis of one differing output: the operator's models
 * (model.h) on a sample of the rows, the few that fit it on the whole
 * output block by block, then the shape-level hypotheses; the findings in
 * report order, and their lines in the text report.  The search is
 * bounded: memory stays near BLOCK_BYTES, however large the output.
 */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "golden/judge/diagnose/model.h"

#define SAMPLE_DIFFERING 48
#define SAMPLE_EQUAL 16
/* Slot elements (tokens x (top_k + 1) x hidden_size) a model may touch on
 * the sample; a large top_k or hidden_size gets fewer sample tokens. */
#define SAMPLE_ELEMENTS ((size_t)1 << 24)
#define BLOCK_BYTES ((size_t)32 << 20)
#define CONFIRM_MAX 6
/* Whole outputs' worth of rows the partial models may run on, after the
 * sample: what bounds a diagnosis that nothing explains exactly. */
#define CONFIRM_OUTPUTS 3

/* How a full evaluation may stop early: once the model contradicts
 * anything (when an exact finding is already in hand, a partial one is
 * never reported), or once it can no longer explain more than it
 * contradicts (what a partial finding needs to be reported). */
typedef enum stop_rule { STOP_ON_CONTRADICTION, STOP_WHEN_UNREPORTABLE } stop_rule;

/* Runs a model over the given rows (all of them when rows is NULL) block
 * by block and tallies it.  *done receives how many rows it ran on. */
static int evaluate(const golden_diag_operator *op, void *ctx, const golden_diag_model *m,
                    int variant, const golden_diag_data *d, const int64_t *rows, size_t n,
                    stop_rule rule, golden_diag_tally *t, size_t *done, char *err,
                    size_t err_len)
{
    size_t per_row = op->row_elements(ctx) * sizeof(float);
    size_t block = BLOCK_BYTES / per_row ? BLOCK_BYTES / per_row : 1;
    size_t es = moeperm_dtype_size(d->dtype);
    bool all_rows = rows == NULL;
    uint8_t *out = malloc((block < n ? block : n) * (size_t)d->cols * es + 1);
    int64_t *ids = all_rows ? malloc(block * sizeof *ids) : NULL;
    int rc = -1;
    if (!out || (all_rows && !ids)) {
        snprintf(err, err_len, "out of memory for a diagnosis model");
        goto done;
    }
    *t = (golden_diag_tally){0, 0};
    *done = 0;
    uint64_t left = 0; /* differing elements in the rows not yet run */
    for (size_t i = 0; i < n; i++)
        left += d->row_differ[all_rows ? (int64_t)i : rows[i]];
    for (size_t start = 0; start < n; start += block) {
        size_t count = n - start < block ? n - start : block;
        const int64_t *these = all_rows ? ids : rows + start;
        for (size_t i = 0; all_rows && i < count; i++)
            ids[i] = (int64_t)(start + i);
        if (m->compute(ctx, variant, these, count, out, err, err_len) != 0)
            goto done;
        golden_diag_tally_rows(d, these, count, out, t);
        for (size_t i = 0; i < count; i++)
            left -= d->row_differ[these[i]];
        *done += count;
        if (rule == STOP_ON_CONTRADICTION ? t->contradicted > 0
                                          : t->contradicted >= t->explained + left)
            break;
    }
    rc = 0;
done:
    free(out);
    free(ids);
    return rc;
}

typedef struct trial {
    const golden_diag_model *m;
    int variant;
    golden_diag_tally sample;
} trial;

static int sample_rank(const trial *a, const trial *b)
{
    bool ea = a->sample.contradicted == 0, eb = b->sample.contradicted == 0;
    if (ea != eb)
        return ea ? -1 : 1;
    int64_t sa = (int64_t)a->sample.explained - (int64_t)a->sample.contradicted;
    int64_t sb = (int64_t)b->sample.explained - (int64_t)b->sample.contradicted;
    return sa > sb ? -1 : sa < sb ? 1 : 0;
}

static int operator_models(const golden_diag_operator *op, void *ctx, const golden_diag_data *d,
                           golden_diag_candidates *cs, char *err, size_t err_len)
{
    /* The sample: differing rows spread over all of them, and some equal
     * rows, which a model must leave equal. */
    int64_t sample[SAMPLE_DIFFERING + SAMPLE_EQUAL];
    size_t n = 0, per_token = op->row_elements(ctx);
    size_t budget = SAMPLE_ELEMENTS / per_token;
    uint64_t want_d = budget * 3 / 4 < 2                  ? 2
                      : budget * 3 / 4 > SAMPLE_DIFFERING ? SAMPLE_DIFFERING
                                                          : budget * 3 / 4;
    uint64_t want_e = budget / 4 < 1 ? 1 : budget / 4 > SAMPLE_EQUAL ? SAMPLE_EQUAL : budget / 4;
    uint64_t differ_rows = 0, equal_rows;
    for (int64_t r = 0; r < d->rows; r++)
        differ_rows += d->row_differ[r] > 0;
    equal_rows = (uint64_t)d->rows - differ_rows;
    uint64_t seen_d = 0, seen_e = 0, taken_d = 0, taken_e = 0;
    for (int64_t r = 0; r < d->rows; r++) {
        if (d->row_differ[r] > 0) {
            if (taken_d < want_d && seen_d * want_d >= taken_d * differ_rows) {
                sample[n++] = r;
                taken_d++;
            }
            seen_d++;
        } else {
            if (taken_e < want_e && seen_e * want_e >= taken_e * equal_rows) {
                sample[n++] = r;
                taken_e++;
            }
            seen_e++;
        }
    }

    trial trials[256];
    size_t count = 0, ran;
    for (size_t i = 0; i < op->count; i++) {
        const golden_diag_model *m = &op->models[i];
        if (m->prepare && m->prepare(ctx, d, sample, n, err, err_len) != 0)
            return -1;
        int list[GOLDEN_DIAG_SELECT_MAX];
        size_t listed = sizeof list / sizeof list[0];
        int variants = m->variants(ctx);
        if (m->select && variants > 0) {
            m->select(ctx, d, sample, n, list, &listed);
            variants = (int)listed;
        }
        for (int i_v = 0; i_v < variants && count < sizeof trials / sizeof trials[0]; i_v++) {
            int v = m->select ? list[i_v] : i_v;
            trial t = {m, v, {0, 0}};
            if (evaluate(op, ctx, m, v, d, sample, n, STOP_WHEN_UNREPORTABLE, &t.sample, &ran,
                         err, err_len) != 0)
                return -1;
            if (t.sample.explained > t.sample.contradicted)
                trials[count++] = t;
        }
    }
    /* The best on the sample run on everything: those exact on the sample
     * first, then (when none turned out exact) the partial ones, until
     * CONFIRM_MAX have run or they have cost CONFIRM_OUTPUTS whole outputs. */
    for (size_t i = 1; i < count; i++)
        for (size_t j = i; j > 0 && sample_rank(&trials[j], &trials[j - 1]) < 0; j--) {
            trial s = trials[j];
            trials[j] = trials[j - 1];
            trials[j - 1] = s;
        }
    bool exact_found = false;
    uint64_t rows_run = 0, rows_budget = CONFIRM_OUTPUTS * (uint64_t)d->rows;
    for (size_t i = 0; i < count && i < CONFIRM_MAX; i++) {
        bool sample_exact = trials[i].sample.contradicted == 0;
        if (!sample_exact && (exact_found || rows_run >= rows_budget))
            break;
        golden_diag_tally t;
        if (evaluate(op, ctx, trials[i].m, trials[i].variant, d, NULL, (size_t)d->rows,
                     exact_found ? STOP_ON_CONTRADICTION : STOP_WHEN_UNREPORTABLE, &t, &ran, err,
                     err_len) != 0)
            return -1;
        rows_run += ran;
        if (ran < (size_t)d->rows)
            continue; /* stopped early: it cannot be reported */
        exact_found |= t.contradicted == 0;
        char detail[256];
        trials[i].m->describe(ctx, trials[i].variant, detail, sizeof detail);
        golden_diag_offer(cs, trials[i].m->info.id, (int)(trials[i].m - op->models), detail, t);
    }
    return 0;
}

/* d->row_differ and d->differing; rows whose bytes are equal cost a
 * memcmp. */
static GOLDEN_BITS_INLINE void count_differing(moeperm_dtype dt, golden_diag_data *d)
{
    size_t es = golden_bits_size(dt), row_bytes = (size_t)d->cols * es;
    for (int64_t r = 0; r < d->rows; r++) {
        uint64_t base = (uint64_t)r * (uint64_t)d->cols;
        if (memcmp((const uint8_t *)d->expected + base * es, (const uint8_t *)d->actual + base * es,
                   row_bytes) == 0)
            continue;
        for (int64_t c = 0; c < d->cols; c++)
            d->row_differ[r] += !golden_bits_same(
                dt, golden_bits_load(dt, d->expected, base + (uint64_t)c),
                golden_bits_load(dt, d->actual, base + (uint64_t)c), d->strict_nan);
        d->differing += d->row_differ[r];
    }
}

static int by_report_order(const void *pa, const void *pb)
{
    const golden_diag_candidate *a = pa, *b = pb;
    if (a->f.exact != b->f.exact)
        return a->f.exact ? -1 : 1;
    if (a->f.exact)
        return a->rank - b->rank;
    if (a->f.explained != b->f.explained)
        return a->f.explained > b->f.explained ? -1 : 1;
    return a->rank - b->rank;
}

int golden_diagnose(const golden_diag_problem *p, const golden_diag_tensor *expected,
                    const void *actual, bool strict_nan, golden_diagnosis *out, char *err,
                    size_t err_len)
{
    memset(out, 0, sizeof *out);
    golden_diag_data d = {expected->dtype, 0, 1, expected->data, actual, strict_nan, 0, NULL,
                          "row", NULL, NULL};
    if (moeperm_dtype_size(d.dtype) == 0) {
        snprintf(err, err_len, "%s: dtype %d is not one the diagnosis reads",
                 expected->name ? expected->name : "output", (int)d.dtype);
        return -1;
    }
    /* [rows, cols]: the first dim against the rest. */
    d.rows = expected->ndim > 0 ? expected->dims[0] : 1;
    for (uint64_t i = 1; i < expected->ndim; i++)
        d.cols *= expected->dims[i];
    if (d.rows == 0 || d.cols == 0)
        return 0;
    size_t count;
    const golden_diag_operator *const *operators = golden_diag_operators(&count);
    const golden_diag_operator *op = NULL;
    for (size_t i = 0; i < count; i++)
        if (p && p->op && strcmp(p->op, operators[i]->op) == 0 && expected->name &&
            strcmp(expected->name, operators[i]->output) == 0)
            op = operators[i];
    if (op)
        d.noun = op->noun;

    d.row_differ = calloc((size_t)d.rows, sizeof *d.row_differ);
    if (!d.row_differ) {
        snprintf(err, err_len, "out of memory for the diagnosis");
        return -1;
    }
    GOLDEN_BITS_SPECIALISE(d.dtype, count_differing, &d);
    out->differing = d.differing;
    int rc = 0;
    golden_diag_candidates *cs = calloc(1, sizeof *cs);
    if (!cs) {
        snprintf(err, err_len, "out of memory for the diagnosis");
        free(d.row_differ);
        return -1;
    }
    if (d.differing == 0)
        goto done;

    void *ctx = NULL;
    if (op) {
        ctx = calloc(1, op->context_size);
        if (!ctx) {
            snprintf(err, err_len, "out of memory for the diagnosis");
            rc = -1;
            goto done;
        }
        if (op->setup(p, expected, ctx)) {
            d.special_possible = op->special_possible;
            d.special_ctx = ctx;
            rc = operator_models(op, ctx, &d, cs, err, err_len);
        }
    }
    /* An operator's model that reproduces the output is the explanation: a
     * pattern read from the output alone is neither sought nor reported
     * beside it. */
    bool model_exact = false;
    for (size_t i = 0; i < cs->n; i++)
        model_exact |= cs->c[i].f.exact && cs->c[i].rank < GOLDEN_DIAG_RANK_SHAPE;
    if (rc == 0 && !model_exact && golden_diag_shapes(&d, cs) != 0) {
        snprintf(err, err_len, "out of memory for the diagnosis");
        rc = -1;
    }
    if (op) {
        if (op->cleanup)
            op->cleanup(ctx);
        free(ctx);
    }
    if (rc != 0)
        goto done;

    /* Exact findings alone when there are some; otherwise those that
     * explain more than they contradict. */
    qsort(cs->c, cs->n, sizeof cs->c[0], by_report_order);
    bool any_exact = cs->n > 0 && cs->c[0].f.exact;
    for (size_t i = 0; i < cs->n && out->count < GOLDEN_DIAG_MAX_FINDINGS; i++) {
        const golden_finding *f = &cs->c[i].f;
        if (any_exact ? f->exact : f->explained > f->contradicted)
            out->finding[out->count++] = *f;
    }
done:
    free(cs);
    free(d.row_differ);
    return rc;
}

void golden_diagnosis_report(FILE *f, const golden_diagnosis *d, const char *indent)
{
    if (d->differing == 0)
        return;
    if (d->count == 0)
        fprintf(f, "%sdiagnosis: no known bug reproduces these differences\n", indent);
    for (size_t i = 0; i < d->count; i++) {
        const golden_finding *g = &d->finding[i];
        if (g->exact)
            fprintf(f, "%sdiagnosis: %s: %s (reproduces the output exactly)\n", indent, g->id,
                    g->detail);
        else
            fprintf(f,
                    "%sdiagnosis: %s: %s (explains %" PRIu64 " of %" PRIu64
                    " differing elements, contradicts %" PRIu64 " others)\n",
                    indent, g->id, g->detail, g->explained, d->differing, g->contradicted);
    }
}

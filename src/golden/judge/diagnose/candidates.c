/*
 * candidates.c - the bookkeeping of a diagnosis: how much of what differs
 * a model reproduces and how much it contradicts, and the best finding of
 * each hypothesis so far.
 */
#include <stdio.h>
#include <string.h>

#include "golden/judge/diagnose/model.h"

void golden_diag_tally_rows(const golden_diag_data *d, const int64_t *rows, size_t n,
                            const void *model, golden_diag_tally *t)
{
    for (size_t i = 0; i < n; i++) {
        uint64_t base = (uint64_t)rows[i] * (uint64_t)d->cols;
        for (int64_t c = 0; c < d->cols; c++) {
            uint64_t e = golden_bits_load(d->dtype, d->expected, base + (uint64_t)c);
            uint64_t a = golden_bits_load(d->dtype, d->actual, base + (uint64_t)c);
            uint64_t m = golden_bits_load(d->dtype, model, i * (uint64_t)d->cols + (uint64_t)c);
            if (!golden_diag_same(d, m, a))
                t->contradicted++;
            else if (!golden_diag_same(d, a, e))
                t->explained++;
        }
    }
}

static bool better(const golden_finding *a, const golden_finding *b)
{
    if (a->exact != b->exact)
        return a->exact;
    if (a->explained != b->explained)
        return a->explained > b->explained;
    return a->contradicted < b->contradicted;
}

void golden_diag_offer(golden_diag_candidates *cs, const char *id, int rank, const char *detail,
                       golden_diag_tally t)
{
    golden_finding f;
    memset(&f, 0, sizeof f);
    snprintf(f.id, sizeof f.id, "%s", id);
    snprintf(f.detail, sizeof f.detail, "%s", detail);
    f.explained = t.explained;
    f.contradicted = t.contradicted;
    f.exact = t.contradicted == 0;
    if (f.explained == 0)
        return; /* a model equal to the expected output explains nothing */
    for (size_t i = 0; i < cs->n; i++) {
        if (strcmp(cs->c[i].f.id, id) == 0) {
            if (better(&f, &cs->c[i].f))
                cs->c[i].f = f;
            if (rank < cs->c[i].rank)
                cs->c[i].rank = rank;
            return;
        }
    }
    if (cs->n < GOLDEN_DIAG_MAX_CANDIDATES)
        cs->c[cs->n++] = (golden_diag_candidate){f, rank};
}

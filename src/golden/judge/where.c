/*
 * where.c - the location summary of a mismatch.  One pass over the rows;
 * each differing row gets a column class, rows of one class join one group
 * wherever they are, and each group's rows are kept as runs and strides
 * built as the rows arrive, so memory stays fixed whatever the tensor.
 */
#include "golden/judge/where.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "golden/judge/bits.h"

/* The differing columns of one row. */
typedef struct row_columns {
    uint64_t count;
    size_t ranges; /* all of them, even past GOLDEN_WHERE_MAX_RANGES */
    int64_t lo[GOLDEN_WHERE_MAX_RANGES], hi[GOLDEN_WHERE_MAX_RANGES];
    int64_t first, last;
} row_columns;

static void row_add(row_columns *r, int64_t col)
{
    bool adjacent = r->count > 0 && r->last == col - 1;
    if (r->count++ == 0)
        r->first = col;
    r->last = col;
    if (adjacent) {
        if (r->ranges <= GOLDEN_WHERE_MAX_RANGES)
            r->hi[r->ranges - 1] = col;
        return;
    }
    if (r->ranges < GOLDEN_WHERE_MAX_RANGES)
        r->lo[r->ranges] = r->hi[r->ranges] = col;
    r->ranges++;
}

static bool same_ranges(const row_columns *r, size_t ranges, const int64_t *lo, const int64_t *hi)
{
    if (r->ranges != ranges)
        return false;
    for (size_t i = 0; i < ranges; i++)
        if (r->lo[i] != lo[i] || r->hi[i] != hi[i])
            return false;
    return true;
}

/* A group being built: the public part, the span under construction, and
 * for MOST groups whether every row had the same ranges (then they are
 * worth naming). */
typedef struct builder {
    golden_where_group g;
    int64_t first, last, step;
    uint64_t count;
    bool uniform;
} builder;

static void emit_span(builder *b, int64_t first, int64_t last, int64_t step, uint64_t rows)
{
    if (b->g.spans < GOLDEN_WHERE_MAX_SPANS) {
        b->g.span[b->g.spans++] = (golden_where_span){first, last, step};
        b->g.rows_in_spans += rows;
    }
}

/* Closes the span under construction.  A pair with a gap is not a stride
 * yet: its first row goes out alone and its second may start a run. */
static void close_span(builder *b, bool final)
{
    if (b->count == 0)
        return;
    if (b->count == 2 && b->step > 1) {
        emit_span(b, b->first, b->first, 0, 1);
        if (final) {
            emit_span(b, b->last, b->last, 0, 1);
            b->count = 0;
        } else {
            b->first = b->last;
            b->count = 1;
            b->step = 0;
        }
        return;
    }
    emit_span(b, b->first, b->last, b->count == 1 ? 0 : b->step, b->count);
    b->count = 0;
}

static void add_row(builder *b, int64_t row)
{
    if (b->count == 0) {
        b->first = b->last = row;
        b->step = 0;
        b->count = 1;
    } else if (b->count == 1) {
        b->step = row - b->last;
        b->last = row;
        b->count = 2;
    } else if (row - b->last == b->step) {
        b->last = row;
        b->count++;
    } else {
        close_span(b, false);
        if (b->count == 1) {
            b->step = row - b->last;
            b->last = row;
            b->count = 2;
        } else {
            b->first = b->last = row;
            b->step = 0;
            b->count = 1;
        }
    }
}

static golden_where_columns classify(const row_columns *r, int64_t cols)
{
    if (r->count == (uint64_t)cols)
        return GOLDEN_WHERE_ALL;
    if (r->count * 10 >= (uint64_t)cols * 9)
        return GOLDEN_WHERE_MOST;
    if (r->ranges <= GOLDEN_WHERE_MAX_RANGES)
        return GOLDEN_WHERE_RANGES;
    return GOLDEN_WHERE_SCATTERED;
}

/* ---------------------------------------------------------------------- */
/* Text                                                                   */
/* ---------------------------------------------------------------------- */

static const char *ordinal_suffix(int64_t n)
{
    if (n % 100 >= 11 && n % 100 <= 13)
        return "th";
    switch (n % 10) {
    case 1:
        return "st";
    case 2:
        return "nd";
    case 3:
        return "rd";
    default:
        return "th";
    }
}

/* One span; alone, it carries the noun ("tokens 48-95"), in a list it
 * does not ("tokens 2-5, 9"). */
static void put_span_item(FILE *f, const golden_where_span *s, const char *noun, bool alone)
{
    if (s->step > 1) {
        fprintf(f, "every %" PRId64 "%s%s%s from %" PRId64 " to %" PRId64, s->step,
                ordinal_suffix(s->step), alone ? " " : "", alone ? noun : "", s->first, s->last);
        return;
    }
    if (alone)
        fprintf(f, "%s%s ", noun, s->step ? "s" : "");
    if (s->step == 0)
        fprintf(f, "%" PRId64, s->first);
    else
        fprintf(f, "%" PRId64 "-%" PRId64, s->first, s->last);
}

static void put_rows(FILE *f, const golden_where_group *g, const char *noun)
{
    if (g->spans == 1 && g->rows_in_spans == g->rows) {
        put_span_item(f, &g->span[0], noun, true);
        return;
    }
    fprintf(f, "%ss ", noun);
    for (size_t i = 0; i < g->spans; i++) {
        if (i)
            fputs(", ", f);
        put_span_item(f, &g->span[i], noun, false);
    }
    if (g->rows > g->rows_in_spans)
        fprintf(f, ", and %" PRIu64 " more", g->rows - g->rows_in_spans);
}

static void put_ranges(FILE *f, const golden_where_group *g)
{
    fputs(g->ranges == 1 && g->lo[0] == g->hi[0] ? "column " : "columns ", f);
    for (size_t i = 0; i < g->ranges; i++) {
        if (i)
            fputs(", ", f);
        if (g->lo[i] == g->hi[i])
            fprintf(f, "%" PRId64, g->lo[i]);
        else
            fprintf(f, "%" PRId64 "-%" PRId64, g->lo[i], g->hi[i]);
    }
}

static void put_group(FILE *f, const golden_where_group *g, const moeperm_golden_where *w, const char *noun)
{
    bool every = g->rows == (uint64_t)w->rows && w->rows > 1;
    uint64_t area = g->rows * (uint64_t)w->cols;
    if (every) {
        switch (g->columns) {
        case GOLDEN_WHERE_ALL:
            fprintf(f, "every element of every %s", noun);
            return;
        case GOLDEN_WHERE_RANGES:
            put_ranges(f, g);
            fprintf(f, " of every %s", noun);
            return;
        case GOLDEN_WHERE_MOST:
            fprintf(f, "most columns of every %s (%" PRIu64 " of %" PRIu64 " elements)", noun,
                    g->elements, area);
            return;
        default:
            fprintf(f,
                    "scattered columns in %" PRId64 "-%" PRId64 " of every %s (%" PRIu64
                    " of %" PRIu64 " elements)",
                    g->column_first, g->column_last, noun, g->elements, area);
            return;
        }
    }
    put_rows(f, g, noun);
    fputs(": ", f);
    switch (g->columns) {
    case GOLDEN_WHERE_ALL:
        fputs("all columns", f);
        break;
    case GOLDEN_WHERE_RANGES:
        put_ranges(f, g);
        break;
    case GOLDEN_WHERE_MOST:
        fprintf(f, "most columns (%" PRIu64 " of %" PRIu64 " elements)", g->elements, area);
        break;
    default:
        if (g->rows == 1)
            fprintf(f, "%" PRIu64 " scattered columns in %" PRId64 "-%" PRId64, g->elements,
                    g->column_first, g->column_last);
        else
            fprintf(f,
                    "scattered columns in %" PRId64 "-%" PRId64 " (%" PRIu64 " of %" PRIu64
                    " elements)",
                    g->column_first, g->column_last, g->elements, area);
        break;
    }
}

/* ---------------------------------------------------------------------- */
/* The pass                                                               */
/* ---------------------------------------------------------------------- */

/* Fills r with the differing columns of one row. */
typedef void (*row_scan)(const void *ctx, int64_t row, int64_t cols, row_columns *r);

static int describe(int64_t rows, int64_t cols, row_scan scan, const void *ctx,
                    const char *row_noun, moeperm_golden_where *w)
{
    const char *noun = row_noun ? row_noun : "row";
    builder b[GOLDEN_WHERE_MAX_GROUPS];
    size_t count = 0;

    memset(w, 0, sizeof *w);
    w->rows = rows;
    w->cols = cols;
    for (int64_t r = 0; r < rows; r++) {
        row_columns rc = {0};
        scan(ctx, r, cols, &rc);
        if (rc.count == 0)
            continue;
        w->elements += rc.count;
        w->rows_differ++;
        golden_where_columns kind = classify(&rc, cols);
        builder *g = NULL;
        /* A row with every column and a row with most of them are one kind
         * of damage (a block whose values coincide here and there). */
        bool dense = kind == GOLDEN_WHERE_ALL || kind == GOLDEN_WHERE_MOST;
        for (size_t i = 0; i < count && !g; i++) {
            bool group_dense =
                b[i].g.columns == GOLDEN_WHERE_ALL || b[i].g.columns == GOLDEN_WHERE_MOST;
            if (dense ? !group_dense : b[i].g.columns != kind)
                continue;
            if (kind == GOLDEN_WHERE_RANGES &&
                !same_ranges(&rc, b[i].g.ranges, b[i].g.lo, b[i].g.hi))
                continue;
            g = &b[i];
        }
        if (!g) {
            if (count == GOLDEN_WHERE_MAX_GROUPS) {
                w->rows_elsewhere++;
                continue;
            }
            g = &b[count++];
            memset(g, 0, sizeof *g);
            g->g.columns = kind;
            g->g.column_first = rc.first;
            g->g.column_last = rc.last;
            g->uniform = rc.ranges <= GOLDEN_WHERE_MAX_RANGES;
            if (g->uniform) {
                g->g.ranges = rc.ranges;
                memcpy(g->g.lo, rc.lo, sizeof rc.lo);
                memcpy(g->g.hi, rc.hi, sizeof rc.hi);
            }
        } else if (g->uniform && !same_ranges(&rc, g->g.ranges, g->g.lo, g->g.hi)) {
            g->uniform = false;
        }
        if (kind == GOLDEN_WHERE_MOST)
            g->g.columns = GOLDEN_WHERE_MOST;
        if (rc.first < g->g.column_first)
            g->g.column_first = rc.first;
        if (rc.last > g->g.column_last)
            g->g.column_last = rc.last;
        g->g.rows++;
        g->g.elements += rc.count;
        add_row(g, r);
    }

    for (size_t i = 0; i < count; i++) {
        close_span(&b[i], true);
        /* Rows that share exact ranges are named by them even when they
         * cover most columns ("columns 0-4094" says more than "most"). */
        if (b[i].g.columns == GOLDEN_WHERE_MOST && b[i].uniform)
            b[i].g.columns = GOLDEN_WHERE_RANGES;
        if (b[i].g.columns != GOLDEN_WHERE_RANGES)
            b[i].g.ranges = 0;
        w->group[i] = b[i].g;
    }
    w->groups = count;
    if (w->elements == 0)
        return 0;

    size_t size = 0;
    FILE *f = open_memstream(&w->text, &size);
    if (!f) {
        w->text = NULL;
        return -1;
    }
    for (size_t i = 0; i < w->groups; i++) {
        if (i)
            fputs("; ", f);
        put_group(f, &w->group[i], w, noun);
    }
    if (w->rows_elsewhere)
        fprintf(f, "; and %" PRIu64 " more %s%s elsewhere", w->rows_elsewhere, noun,
                w->rows_elsewhere == 1 ? "" : "s");
    if (fclose(f) != 0) {
        free(w->text);
        w->text = NULL;
        return -1;
    }
    return 0;
}

typedef struct pred_ctx {
    golden_where_pred pred;
    const void *ctx;
} pred_ctx;

static void scan_pred(const void *ctx, int64_t row, int64_t cols, row_columns *r)
{
    const pred_ctx *p = ctx;
    uint64_t base = (uint64_t)row * (uint64_t)cols;
    for (int64_t c = 0; c < cols; c++)
        if (p->pred(p->ctx, base + (uint64_t)c))
            row_add(r, c);
}

int golden_where_describe(int64_t rows, int64_t cols, golden_where_pred pred, const void *ctx,
                          const char *row_noun, moeperm_golden_where *w)
{
    pred_ctx p = {pred, ctx};
    return describe(rows, cols, scan_pred, &p, row_noun, w);
}

typedef struct pair_ctx {
    moeperm_dtype dtype;
    const void *expected, *actual;
    bool strict_nan;
} pair_ctx;

/* The comparator's rule, one loop per element size so that a large
 * mismatch is located at memory speed. */
#define SCAN_PAIR(name, type)                                                                      \
    static void name(const void *ctx, int64_t row, int64_t cols, row_columns *r)                   \
    {                                                                                              \
        const pair_ctx *p = ctx;                                                                   \
        const type *e = (const type *)p->expected + (size_t)row * (size_t)cols;                    \
        const type *a = (const type *)p->actual + (size_t)row * (size_t)cols;                      \
        for (int64_t c = 0; c < cols; c++)                                                         \
            if (e[c] != a[c] && !golden_bits_same(p->dtype, e[c], a[c], p->strict_nan))            \
                row_add(r, c);                                                                     \
    }
SCAN_PAIR(scan_pair8, uint8_t)
SCAN_PAIR(scan_pair16, uint16_t)
SCAN_PAIR(scan_pair32, uint32_t)
SCAN_PAIR(scan_pair64, uint64_t)

int golden_where_compute(moeperm_dtype dtype, int64_t rows, int64_t cols, const void *expected,
                         const void *actual, bool strict_nan, const char *row_noun, moeperm_golden_where *w)
{
    pair_ctx p = {dtype, expected, actual, strict_nan};
    switch (moeperm_dtype_size(dtype)) {
    case 1:
        return describe(rows, cols, scan_pair8, &p, row_noun, w);
    case 2:
        return describe(rows, cols, scan_pair16, &p, row_noun, w);
    case 4:
        return describe(rows, cols, scan_pair32, &p, row_noun, w);
    default:
        return describe(rows, cols, scan_pair64, &p, row_noun, w);
    }
}

void golden_where_free(moeperm_golden_where *w)
{
    free(w->text);
    w->text = NULL;
}

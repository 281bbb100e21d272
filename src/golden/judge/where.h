/*
 * where.h - where the differences between two [rows, cols] tensors lie,
 * in the words a kernel developer acts on.
 *
 * Each row that differs is classified by its differing columns: all of
 * them, the same few column ranges, most of them (at least 90%), or
 * scattered.  Rows of one class are gathered into one group however far
 * apart they are, and the group's rows are written as runs and strides:
 * "tokens 48-95: all columns", "columns 6144-7167 of every token", "every
 * 2nd token from 1 to 999: all columns", "token 123: column 4000".  The
 * structure is kept beside the text for machine-readable reports.
 *
 * It works on any tensor viewed as [rows, cols] (for an operator's output
 * the rows are its first dim), so every operator's report reads the same.
 */
#ifndef MOEPERM_GOLDEN_JUDGE_WHERE_H
#define MOEPERM_GOLDEN_JUDGE_WHERE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <moeperm/moeperm.h>

#define GOLDEN_WHERE_MAX_RANGES 6  /* column ranges a RANGES group may have */
#define GOLDEN_WHERE_MAX_SPANS 8   /* row spans kept per group */
#define GOLDEN_WHERE_MAX_GROUPS 12 /* groups kept (the first by their first row) */

typedef enum golden_where_columns {
    GOLDEN_WHERE_ALL,      /* every column of each of the group's rows */
    GOLDEN_WHERE_RANGES,   /* the same column ranges in each row */
    GOLDEN_WHERE_MOST,     /* at least 90% of the columns of each row, not all */
    GOLDEN_WHERE_SCATTERED /* anything else: more ranges than kept */
} golden_where_columns;

/* Rows first, first + step, ..., last (step 1 for a run, 0 for one row). */
typedef struct golden_where_span {
    int64_t first, last, step;
} golden_where_span;

typedef struct golden_where_group {
    golden_where_columns columns;
    size_t ranges; /* RANGES: the column ranges lo[i]-hi[i] */
    int64_t lo[GOLDEN_WHERE_MAX_RANGES], hi[GOLDEN_WHERE_MAX_RANGES];
    int64_t column_first, column_last; /* the span of differing columns over the rows */
    uint64_t rows;                     /* rows in the group */
    uint64_t elements;                 /* differing elements in those rows */
    size_t spans;                      /* kept spans: the first GOLDEN_WHERE_MAX_SPANS */
    golden_where_span span[GOLDEN_WHERE_MAX_SPANS];
    uint64_t rows_in_spans; /* rows the kept spans cover (< rows when spans were cut) */
} golden_where_group;

typedef struct moeperm_golden_where {
    int64_t rows, cols;
    uint64_t elements;    /* differing elements in all */
    uint64_t rows_differ; /* rows with a differing element */
    size_t groups;        /* kept groups, by first row */
    golden_where_group group[GOLDEN_WHERE_MAX_GROUPS];
    uint64_t rows_elsewhere; /* differing rows outside the kept groups */
    char *text;              /* malloc'd summary; NULL when nothing differs */
} moeperm_golden_where;

/* Whether element index (row * cols + col) is one to locate. */
typedef bool (*golden_where_pred)(const void *ctx, uint64_t index);

/*
 * golden_where_describe() locates the elements of a [rows, cols] tensor for
 * which pred(ctx, index) is true.  row_noun names a row in the text
 * ("token"; its plural adds "s"; NULL gives "row").  Returns 0 and fills
 * *w, or -1 when memory runs out (*w is then empty).  Free with
 * golden_where_free().  Thread safe.
 */
int golden_where_describe(int64_t rows, int64_t cols, golden_where_pred pred, const void *ctx,
                          const char *row_noun, moeperm_golden_where *w);

/*
 * golden_where_compute() locates the elements in which actual differs from
 * expected (rows*cols elements of dtype; two NaNs are equal unless
 * strict_nan), as golden_where_describe() does.
 */
int golden_where_compute(moeperm_dtype dtype, int64_t rows, int64_t cols, const void *expected,
                         const void *actual, bool strict_nan, const char *row_noun,
                         moeperm_golden_where *w);

/* golden_where_free() frees what *w owns and empties it. */
void golden_where_free(moeperm_golden_where *w);

#endif

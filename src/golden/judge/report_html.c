/*
 * report_html.c - the judge's report for people: one HTML page that needs
 * nothing but itself.  Style is inline, the heat maps are inline SVG with a
 * <title> per coloured rectangle for the hover text, and there is no
 * script at all, so the page shows the same in a browser with scripts off,
 * in a CI artefact viewer and printed; its Content-Security-Policy forbids
 * every fetch, so nothing in it can reach the network.  SVG rather than a
 * PNG: shapes stay sharp at any zoom, each block carries its exact count
 * on hover, and no image encoder is needed.
 *
 * A map shows an output as the judge compares it, [rows, cols] (a tensor of
 * one dimension as a line of slots wrapped MAP_CELLS cells a line), cut
 * into at most MAP_CELLS x MAP_CELLS blocks; each block is coloured by the
 * fraction of its elements that differ.  Blocks of one colour are merged
 * into rectangles, along a line and then down the lines, so a block of
 * flipped rows is one rectangle.  When a pattern would still take more
 * than MAP_RECTS_MAX rectangles (differences scattered everywhere), the
 * blocks are doubled until it does not: the page stays small, and a
 * scatter looks the same at any resolution.
 */
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <moeperm/golden.h>

#include "golden/common/fileio.h"
#include "golden/common/text.h"

#define MAP_CELLS 512       /* most blocks along each axis of a map */
#define MAP_BOX 640         /* the most CSS pixels a map's cells take along an axis */
#define MAP_CELL_PX_MAX 16  /* the largest block drawn, in CSS pixels */
#define MAP_RECTS_MAX 2048  /* rectangles a map may take */
#define MAP_PAD 10          /* room left and above the cells for the first-difference marks */
#define MAP_RING_PX 3       /* a rectangle narrower and shorter than this gets a ring... */
#define MAP_RINGS_MAX 64    /* ...when the map has at most this many rectangles */
/* The sections a page holds at most, in bytes: a browser still opens it.
 * Later cases that differ keep their row in the table, without a map. */
#define PAGE_SECTIONS_MAX ((size_t)32 << 20)

/* The page's colours: the blocks without a difference, and the six
 * fractions of differing elements (light to dark: a few to all). */
#define MAP_BACKGROUND "#e3e8ef"
enum { LEVELS = 6 };
static const char *const level_colour[LEVELS] = {"#fed976", "#feb24c", "#fd8d3c",
                                                 "#f03b20", "#bd0026", "#67001f"};
static const char *const level_label[LEVELS] = {"up to 1%",  "up to 10%", "up to 25%",
                                                "up to 50%", "over 50%",  "all"};

enum { VERDICT_NONE = -1, VERDICT_ERROR = 3, VERDICT_MISSING = 4 };
static const char *const verdict_names[] = {"same", "within-tolerance", "different", "error",
                                            "missing"};

/* One output's entry in the verdict table. */
typedef struct html_output {
    char *name;
    moeperm_golden_verdict verdict;
    uint64_t differing, elements, max_ulp, nan_mismatch;
} html_output;

typedef struct html_case {
    char *path, *op, *error;
    int worst; /* VERDICT_NONE, a moeperm_golden_verdict, VERDICT_ERROR or _MISSING */
    size_t outputs;
    html_output out[MOEPERM_GOLDEN_MAX_TENSORS];
    bool has_section;
} html_case;

struct moeperm_golden_html_report {
    char *title;
    html_case *cases;
    size_t count, capacity;
    /* The cases' sections, rendered as they are added: the collector
     * keeps text, never a tensor. */
    char *sections;
    size_t sections_len, sections_cap;
    size_t sections_left_out; /* differing cases past PAGE_SECTIONS_MAX */
    /* One map's block counts, MAP_CELLS^2 of them, reused by every map. */
    uint64_t *grid;
};

/* ---------------------------------------------------------------------- */
/* Text                                                                   */
/* ---------------------------------------------------------------------- */

/* Everything that is not the page's own markup goes through the XML
 * escape: &<>"' become references and what is not well-formed UTF-8
 * becomes visible "\xHH" text, which is as safe in HTML text and quoted
 * attributes as in XML. */
static void esc(FILE *f, const char *s)
{
    moeperm_golden_xml_escape(f, s ? s : "");
}

static char *copy(const char *s)
{
    return s ? golden_strdup_printf("%s", s) : NULL;
}

static int append_text(moeperm_golden_html_report *r, const char *text, size_t len)
{
    if (r->sections_len + len + 1 > r->sections_cap) {
        size_t cap = r->sections_cap ? r->sections_cap : 4096;
        while (cap < r->sections_len + len + 1)
            cap *= 2;
        char *grown = realloc(r->sections, cap);
        if (!grown)
            return -1;
        r->sections = grown;
        r->sections_cap = cap;
    }
    memcpy(r->sections + r->sections_len, text, len);
    r->sections_len += len;
    r->sections[r->sections_len] = '\0';
    return 0;
}

/* "token 5" or "tokens 5-9": the nouns are the report's (where.c makes
 * plurals the same way). */
static void span_text(FILE *f, const char *noun, int64_t first, int64_t last)
{
    esc(f, noun);
    if (first == last)
        fprintf(f, " %" PRId64, first);
    else
        fprintf(f, "s %" PRId64 "-%" PRId64, first, last);
}

/* ---------------------------------------------------------------------- */
/* Counting the differences into blocks                                   */
/* ---------------------------------------------------------------------- */

/* How the judge tells two elements apart: by their bits, except that two
 * NaNs are equal unless the run was strict. */
typedef struct scan {
    const unsigned char *expected, *actual;
    size_t size;                   /* bytes per element: 1, 2 or 4 */
    bool nan_equal;                /* a float dtype judged without --strict-nan */
    uint32_t magnitude, infinity; /* the bits of |x|, and of +infinity */
} scan;

static inline bool differs(const scan *s, uint32_t x, uint32_t y)
{
    return x != y && !(s->nan_equal && (x & s->magnitude) > s->infinity &&
                       (y & s->magnitude) > s->infinity);
}

static inline uint32_t bits_at(const unsigned char *p, uint64_t k, size_t size)
{
    if (size == 4) {
        uint32_t v;
        memcpy(&v, p + 4 * k, 4);
        return v;
    }
    if (size == 2) {
        uint16_t v;
        memcpy(&v, p + 2 * k, 2);
        return v;
    }
    return p[k];
}

/* Called with a constant size, so that each element size gets a loop of
 * its own. */
static inline uint64_t count_sized(const scan *s, const unsigned char *e, const unsigned char *a,
                                   uint64_t n, size_t size)
{
    uint64_t count = 0;
    for (uint64_t k = 0; k < n; k++)
        count += differs(s, bits_at(e, k, size), bits_at(a, k, size));
    return count;
}

/* The differing elements among n from element first on.  Equal stretches,
 * the common case, cost one memcmp. */
static uint64_t differing_in(const scan *s, uint64_t first, uint64_t n)
{
    const unsigned char *e = s->expected + first * s->size, *a = s->actual + first * s->size;
    if (memcmp(e, a, n * s->size) == 0)
        return 0;
    switch (s->size) {
    case 4:
        return count_sized(s, e, a, n, 4);
    case 2:
        return count_sized(s, e, a, n, 2);
    default:
        return count_sized(s, e, a, n, 1);
    }
}

/* A map's blocks.  A matrix map cuts [rows, cols] into blocks of bh rows
 * and bw columns; a line map (a tensor of one dimension, rows elements)
 * cuts it into blocks of bw consecutive elements, laid grid_cols a line. */
typedef struct map_geom {
    bool line;
    int64_t rows, cols;
    int64_t bh, bw;
    int64_t grid_rows, grid_cols;
    int64_t blocks; /* in all: a line map's last line may be short */
} map_geom;

static int64_t ceil_div(int64_t a, int64_t b)
{
    return a / b + (a % b != 0);
}

static void geom_lay_out(map_geom *g)
{
    if (g->line) {
        g->blocks = ceil_div(g->rows, g->bw);
        g->grid_cols = g->blocks < MAP_CELLS ? g->blocks : MAP_CELLS;
        g->grid_rows = ceil_div(g->blocks, g->grid_cols);
    } else {
        g->grid_rows = ceil_div(g->rows, g->bh);
        g->grid_cols = ceil_div(g->cols, g->bw);
        g->blocks = g->grid_rows * g->grid_cols;
    }
}

static void geom_init(map_geom *g, bool line, int64_t rows, int64_t cols)
{
    memset(g, 0, sizeof *g);
    g->line = line;
    g->rows = line ? rows * cols : rows;
    g->cols = line ? 1 : cols;
    g->bh = line ? 1 : ceil_div(rows, MAP_CELLS);
    g->bw = line ? ceil_div(g->rows, (int64_t)MAP_CELLS * MAP_CELLS) : ceil_div(cols, MAP_CELLS);
    geom_lay_out(g);
}

/* The elements of block (y, x), and for a matrix map its first and last
 * row and column (for a line map, its first and last element in *r0, *r1). */
static uint64_t block_extent(const map_geom *g, int64_t y, int64_t x, int64_t *r0, int64_t *r1,
                             int64_t *c0, int64_t *c1)
{
    if (g->line) {
        int64_t k = y * g->grid_cols + x;
        *r0 = k * g->bw;
        *r1 = (k + 1) * g->bw < g->rows ? (k + 1) * g->bw - 1 : g->rows - 1;
        *c0 = *c1 = 0;
        return (uint64_t)(*r1 - *r0 + 1);
    }
    *r0 = y * g->bh;
    *r1 = (y + 1) * g->bh < g->rows ? (y + 1) * g->bh - 1 : g->rows - 1;
    *c0 = x * g->bw;
    *c1 = (x + 1) * g->bw < g->cols ? (x + 1) * g->bw - 1 : g->cols - 1;
    return (uint64_t)(*r1 - *r0 + 1) * (uint64_t)(*c1 - *c0 + 1);
}

/* Counts the differing elements of every block into grid (g->blocks of
 * them): one pass, a memcmp per row first, so rows that match cost what
 * reading them costs.  Returns the total. */
static uint64_t count_blocks(const scan *s, const map_geom *g, uint64_t *grid)
{
    memset(grid, 0, (size_t)g->blocks * sizeof *grid);
    uint64_t total = 0;
    if (g->line) {
        for (int64_t k = 0; k < g->blocks; k++) {
            int64_t first = k * g->bw, n = first + g->bw <= g->rows ? g->bw : g->rows - first;
            grid[k] = differing_in(s, (uint64_t)first, (uint64_t)n);
            total += grid[k];
        }
        return total;
    }
    for (int64_t row = 0; row < g->rows; row++) {
        uint64_t base = (uint64_t)row * (uint64_t)g->cols;
        if (memcmp(s->expected + base * s->size, s->actual + base * s->size,
                   (size_t)g->cols * s->size) == 0)
            continue;
        uint64_t *line = grid + (row / g->bh) * g->grid_cols;
        for (int64_t x = 0; x < g->grid_cols; x++) {
            int64_t first = x * g->bw, n = first + g->bw <= g->cols ? g->bw : g->cols - first;
            uint64_t d = differing_in(s, base + (uint64_t)first, (uint64_t)n);
            line[x] += d;
            total += d;
        }
    }
    return total;
}

/* Doubles the blocks (along each axis that has more than one), summing
 * the counts in place: block k of the new grid only reads blocks at k or
 * later of the old one. */
static void coarsen(map_geom *g, uint64_t *grid)
{
    map_geom old = *g;
    if (g->line) {
        g->bw *= 2;
        geom_lay_out(g);
        for (int64_t k = 0; k < g->blocks; k++)
            grid[k] = grid[2 * k] + (2 * k + 1 < old.blocks ? grid[2 * k + 1] : 0);
        return;
    }
    int64_t fr = old.grid_rows > 1 ? 2 : 1, fc = old.grid_cols > 1 ? 2 : 1;
    g->bh *= fr;
    g->bw *= fc;
    geom_lay_out(g);
    for (int64_t y = 0; y < g->grid_rows; y++)
        for (int64_t x = 0; x < g->grid_cols; x++) {
            uint64_t sum = 0;
            for (int64_t dy = 0; dy < fr && y * fr + dy < old.grid_rows; dy++)
                for (int64_t dx = 0; dx < fc && x * fc + dx < old.grid_cols; dx++)
                    sum += grid[(y * fr + dy) * old.grid_cols + x * fc + dx];
            grid[y * g->grid_cols + x] = sum;
        }
}

/* The colour class of count differing elements out of size: 0 for none,
 * else 1..LEVELS (counts are far below 2^57, so the products are exact). */
static int level_of(uint64_t count, uint64_t size)
{
    if (count == 0)
        return 0;
    if (count >= size)
        return 6;
    if (2 * count > size)
        return 5;
    if (4 * count > size)
        return 4;
    if (10 * count > size)
        return 3;
    if (100 * count > size)
        return 2;
    return 1;
}

/* ---------------------------------------------------------------------- */
/* Drawing a map                                                          */
/* ---------------------------------------------------------------------- */

/* A rectangle of blocks of one colour: columns x0..x1 of lines y0..y1. */
typedef struct run {
    int64_t x0, x1, y0, y1;
    int level;
    uint64_t count, size;
} run;

typedef struct map_draw {
    FILE *f;
    const map_geom *g;
    const char *row_noun, *column_noun;
    int sx, sy; /* CSS pixels per block */
    bool rings; /* ring the rectangles too small to see */
    size_t rects, small;
} map_draw;

/* What a rectangle covers, in the output's own words. */
static void region_text(FILE *f, const map_draw *d, const run *u)
{
    int64_t r0, r1, c0, c1, r2, r3, c2, c3;
    block_extent(d->g, u->y0, u->x0, &r0, &r1, &c0, &c1);
    block_extent(d->g, u->y1, u->x1, &r2, &r3, &c2, &c3);
    span_text(f, d->row_noun, r0, r3);
    if (!d->g->line) {
        fputs(", ", f);
        span_text(f, d->column_noun, c0, c3);
    }
}

static void emit(map_draw *d, const run *u)
{
    d->rects++;
    if (d->rects > MAP_RECTS_MAX)
        return;
    int64_t x = MAP_PAD + u->x0 * d->sx, y = MAP_PAD + u->y0 * d->sy;
    int64_t w = (u->x1 - u->x0 + 1) * d->sx, h = (u->y1 - u->y0 + 1) * d->sy;
    fprintf(d->f, "<rect x=\"%" PRId64 "\" y=\"%" PRId64 "\" width=\"%" PRId64 "\" height=\"%" PRId64
                  "\" fill=\"%s\"><title>",
            x, y, w, h, level_colour[u->level - 1]);
    region_text(d->f, d, u);
    fprintf(d->f, ": %" PRIu64 " of %" PRIu64 " elements differ (%.3g%%)</title></rect>\n",
            u->count, u->size, 100.0 * (double)u->count / (double)u->size);
    /* A lone block of a pixel or two is easy to miss: a ring around it,
     * outside it, shows where it is (a map of many has no room for them). */
    if (w < MAP_RING_PX && h < MAP_RING_PX) {
        d->small++;
        if (d->rings)
            fprintf(d->f, "<rect class=\"ring\" x=\"%" PRId64 "\" y=\"%" PRId64 "\" width=\"%" PRId64
                          "\" height=\"%" PRId64 "\" fill=\"none\" stroke=\"%s\"/>\n",
                    x - 3, y - 3, w + 6, h + 6, level_colour[u->level - 1]);
    }
}

/* Draws the blocks of grid as merged rectangles.  Returns false when they
 * take more than MAP_RECTS_MAX (what was written is then to be dropped). */
static bool draw_blocks(map_draw *d, const uint64_t *grid)
{
    const map_geom *g = d->g;
    run a[MAP_CELLS], b[MAP_CELLS];
    run *prev = a, *cur = b;
    size_t nprev = 0;
    for (int64_t y = 0; y < g->grid_rows; y++) {
        size_t ncur = 0;
        int64_t width = g->line && y == g->grid_rows - 1 ? g->blocks - y * g->grid_cols
                                                         : g->grid_cols;
        for (int64_t x = 0; x < width;) {
            int64_t r0, r1, c0, c1;
            uint64_t size = block_extent(g, y, x, &r0, &r1, &c0, &c1);
            uint64_t count = grid[y * g->grid_cols + x];
            int level = level_of(count, size);
            if (level == 0) {
                x++;
                continue;
            }
            run u = {x, x, y, y, level, count, size};
            for (x++; x < width; x++) {
                size = block_extent(g, y, x, &r0, &r1, &c0, &c1);
                count = grid[y * g->grid_cols + x];
                if (level_of(count, size) != level)
                    break;
                u.x1 = x;
                u.count += count;
                u.size += size;
            }
            cur[ncur++] = u;
        }
        /* Down the lines: a rectangle of the line above with the same
         * columns and colour grows by this line.  A line map's lines are
         * consecutive only when they are whole. */
        size_t i = 0;
        for (size_t k = 0; k < ncur; k++) {
            while (i < nprev && prev[i].x0 < cur[k].x0)
                emit(d, &prev[i++]);
            bool mergeable = !g->line || (cur[k].x0 == 0 && cur[k].x1 == g->grid_cols - 1);
            if (i < nprev && mergeable && prev[i].x0 == cur[k].x0 && prev[i].x1 == cur[k].x1 &&
                prev[i].level == cur[k].level) {
                cur[k].y0 = prev[i].y0;
                cur[k].count += prev[i].count;
                cur[k].size += prev[i].size;
                i++;
            }
        }
        while (i < nprev)
            emit(d, &prev[i++]);
        run *t = prev;
        prev = cur;
        cur = t;
        nprev = ncur;
        if (d->rects > MAP_RECTS_MAX)
            return false;
    }
    for (size_t i = 0; i < nprev; i++)
        emit(d, &prev[i]);
    return d->rects <= MAP_RECTS_MAX;
}

static int clamp_px(int64_t cells)
{
    int64_t px = MAP_BOX / cells;
    return px < 1 ? 1 : px > MAP_CELL_PX_MAX ? MAP_CELL_PX_MAX : (int)px;
}

/* The block holding element (row, col) of the output as compared. */
static void block_of(const map_geom *g, int64_t row, int64_t col, int64_t *y, int64_t *x)
{
    if (g->line) {
        int64_t k = row / g->bw;
        *y = k / g->grid_cols;
        *x = k % g->grid_cols;
    } else {
        *y = row / g->bh;
        *x = col / g->bw;
    }
}

static void first_text(FILE *f, const moeperm_golden_compare_result *cr, moeperm_dtype dtype,
                       const moeperm_golden_diff *e)
{
    int width = 2 * (int)moeperm_dtype_size(dtype);
    esc(f, cr->row_noun);
    fprintf(f, " %" PRId64, e->token);
    if (cr->column_noun) {
        fputs(", ", f);
        esc(f, cr->column_noun);
        fprintf(f, " %" PRId64, e->column);
    }
    fprintf(f, ": expected 0x%0*" PRIx32 " (%.9g), actual 0x%0*" PRIx32 " (%.9g)", width,
            e->expected, (double)moeperm_golden_bits_value(dtype, e->expected), width, e->actual,
            (double)moeperm_golden_bits_value(dtype, e->actual));
}

/*
 * Writes the map of one differing output: the SVG, with marks in its
 * margins pointing at the first difference, and a caption saying what a
 * block is.  grid is the collector's scratch.  Returns -1 when memory runs
 * out.
 */
static int write_map(FILE *f, const scan *s, int64_t rows, int64_t cols,
                     const moeperm_golden_compare_result *cr, moeperm_dtype dtype, uint64_t *grid)
{
    map_geom g;
    geom_init(&g, cr->column_noun == NULL, rows, cols);
    uint64_t counted = count_blocks(s, &g, grid);
    char *svg = NULL;
    size_t svg_len = 0;
    map_draw d = {NULL, &g, cr->row_noun ? cr->row_noun : "row",
                  cr->column_noun ? cr->column_noun : "column", 0, 0, false, 0, 0};
    for (;;) {
        d.sx = clamp_px(g.grid_cols);
        d.sy = clamp_px(g.grid_rows);
        d.rects = d.small = 0;
        free(svg);
        svg = NULL;
        if (!(d.f = open_memstream(&svg, &svg_len)))
            return -1;
        bool fits = draw_blocks(&d, grid);
        if (fclose(d.f) != 0) {
            free(svg);
            return -1;
        }
        if (d.small > 0 && !d.rings && d.rects <= MAP_RINGS_MAX) {
            d.rings = true; /* the same again, with the rings */
            continue;
        }
        if (fits || g.blocks == 1)
            break;
        coarsen(&g, grid);
    }

    int64_t width = MAP_PAD + g.grid_cols * d.sx, height = MAP_PAD + g.grid_rows * d.sy;
    fprintf(f, "<figure class=\"map\"><svg xmlns=\"http://www.w3.org/2000/svg\" width=\"%" PRId64
               "\" height=\"%" PRId64 "\" viewBox=\"0 0 %" PRId64 " %" PRId64
               "\" shape-rendering=\"crispEdges\" role=\"img\"><title>where the "
               "differences lie: coloured blocks hold them</title>\n",
            width, height, width, height);
    /* The background: whole lines, then a line map's short last line. */
    int64_t full = g.line && g.blocks % g.grid_cols ? g.grid_rows - 1 : g.grid_rows;
    if (full > 0)
        fprintf(f, "<rect class=\"bg\" x=\"%d\" y=\"%d\" width=\"%" PRId64 "\" height=\"%" PRId64
                   "\" fill=\"" MAP_BACKGROUND "\"/>\n",
                MAP_PAD, MAP_PAD, g.grid_cols * d.sx, full * d.sy);
    if (full < g.grid_rows)
        fprintf(f, "<rect class=\"bg\" x=\"%d\" y=\"%" PRId64 "\" width=\"%" PRId64
                   "\" height=\"%d\" fill=\"" MAP_BACKGROUND "\"/>\n",
                MAP_PAD, MAP_PAD + full * d.sy, (g.blocks % g.grid_cols) * d.sx, d.sy);
    fwrite(svg, 1, svg_len, f);
    free(svg);
    if (cr->first_count > 0) {
        int64_t y, x;
        block_of(&g, cr->first[0].token, cr->first[0].column, &y, &x);
        int64_t cy = MAP_PAD + y * d.sy + d.sy / 2, cx = MAP_PAD + x * d.sx + d.sx / 2;
        for (int mark = 0; mark < 2; mark++) {
            if (mark == 0)
                fprintf(f, "<path class=\"first\" d=\"M0 %" PRId64 "L8 %" PRId64 "L0 %" PRId64
                           "Z\"><title>first difference, ",
                        cy - 5, cy, cy + 5);
            else
                fprintf(f, "<path class=\"first\" d=\"M%" PRId64 " 0L%" PRId64 " 8L%" PRId64
                           " 0Z\"><title>first difference, ",
                        cx - 5, cx, cx + 5);
            first_text(f, cr, dtype, &cr->first[0]);
            fputs("</title></path>\n", f);
        }
    }
    fputs("</svg>\n<figcaption>", f);
    if (g.line) {
        fputs("In reading order, ", f);
        esc(f, d.row_noun);
        fprintf(f, "s 0 to %" PRId64 ", %" PRId64 " block%s a line. Each "
                   "block: %" PRId64 " ",
                g.rows - 1, g.grid_cols, g.grid_cols == 1 ? "" : "s", g.bw);
        esc(f, d.row_noun);
        fputs(g.bw == 1 ? "" : "s", f);
        fputs(g.rows % g.bw ? " (the last one holds fewer)." : ".", f);
    } else {
        fputs("Down: ", f);
        esc(f, d.row_noun);
        fprintf(f, "s 0 to %" PRId64 "; across: ", g.rows - 1);
        esc(f, d.column_noun);
        fprintf(f, "s 0 to %" PRId64 ". Each block: %" PRId64 " ", g.cols - 1, g.bh);
        esc(f, d.row_noun);
        fprintf(f, "%s &#215; %" PRId64 " ", g.bh == 1 ? "" : "s", g.bw);
        esc(f, d.column_noun);
        fputs(g.bw == 1 ? "" : "s", f);
        fprintf(f, " (%" PRId64 " &#215; %" PRId64 " blocks", g.grid_rows, g.grid_cols);
        fputs(g.rows % g.bh || g.cols % g.bw ? "; the last ones hold fewer)." : ").", f);
    }
    if (d.rings)
        fputs(" Rings mark blocks too small to see.", f);
    if (cr->first_count > 0)
        fputs(" The dark marks point at the first difference.", f);
    if (counted != cr->differing)
        fprintf(f, " <strong>The map counts %" PRIu64 " differing elements, the judge %" PRIu64
                   ": the map was given other outputs or other NaN rules than the judge.</strong>",
                counted, cr->differing);
    fputs("</figcaption></figure>\n", f);
    return 0;
}

/* ---------------------------------------------------------------------- */
/* A case's section                                                       */
/* ---------------------------------------------------------------------- */

static void badge(FILE *f, int verdict)
{
    const char *name = verdict_names[verdict < 0 ? 0 : verdict];
    fprintf(f, "<span class=\"badge %s\">%s</span>", name, name);
}

static void number_cell(FILE *f, double v, bool cosine)
{
    if (!isfinite(v)) {
        fputs("<td class=\"num na\" title=\"not a finite number (null in the JSON report)\">"
              "&#8212;</td>",
              f);
        return;
    }
    /* Cosine lives just below 1, where "%.9g" would round the news away. */
    if (cosine && v < 1 && v > 0.999999)
        fprintf(f, "<td class=\"num\" title=\"%.17g\">1 &#8722; %.3g</td>", v, 1 - v);
    else
        fprintf(f, "<td class=\"num\" title=\"%.17g\">%.9g</td>", v, v);
}

static void legend(FILE *f)
{
    fputs("<div class=\"legend\"><span><i style=\"background:" MAP_BACKGROUND
          "\"></i>none</span>",
          f);
    for (int k = 0; k < LEVELS; k++)
        fprintf(f, "<span><i style=\"background:%s\"></i>%s</span>", level_colour[k],
                level_label[k]);
    fputs(" <em>of a block's elements differ</em></div>\n", f);
}

/* The first difference beside the map, each fact on its line. */
static void first_card(FILE *f, const moeperm_golden_compare_result *cr, moeperm_dtype dtype,
                       const moeperm_golden_diff *e)
{
    int width = 2 * (int)moeperm_dtype_size(dtype);
    fputs("<dl class=\"first-card\"><dt>first difference</dt><dd>", f);
    esc(f, cr->row_noun);
    fprintf(f, " <b>%" PRId64 "</b>", e->token);
    if (cr->column_noun) {
        fputs(", ", f);
        esc(f, cr->column_noun);
        fprintf(f, " <b>%" PRId64 "</b>", e->column);
    }
    fprintf(f,
            "</dd><dt>expected</dt><dd><code>0x%0*" PRIx32 "</code> %.9g</dd><dt>actual</dt>"
            "<dd><code>0x%0*" PRIx32 "</code> %.9g</dd><dt>distance</dt><dd>%" PRIu64
            " ulp</dd></dl>\n",
            width, e->expected, (double)moeperm_golden_bits_value(dtype, e->expected), width,
            e->actual, (double)moeperm_golden_bits_value(dtype, e->actual),
            moeperm_golden_ulp_distance(dtype, e->expected, e->actual));
}

static void first_table(FILE *f, const moeperm_golden_compare_result *cr, moeperm_dtype dtype)
{
    int width = 2 * (int)moeperm_dtype_size(dtype);
    fputs("<table class=\"first\"><caption>The first differences</caption><thead><tr><th>", f);
    esc(f, cr->row_noun);
    fputs("</th>", f);
    if (cr->column_noun) {
        fputs("<th>", f);
        esc(f, cr->column_noun);
        fputs("</th>", f);
    }
    fputs("<th>expected bits</th><th>expected value</th><th>actual bits</th><th>actual value</th>"
          "<th>ulp</th></tr></thead><tbody>\n",
          f);
    for (size_t i = 0; i < cr->first_count; i++) {
        const moeperm_golden_diff *e = &cr->first[i];
        fprintf(f, "<tr><td class=\"num\">%" PRId64 "</td>", e->token);
        if (cr->column_noun)
            fprintf(f, "<td class=\"num\">%" PRId64 "</td>", e->column);
        fprintf(f,
                "<td><code>0x%0*" PRIx32 "</code></td><td class=\"num\">%.9g</td><td><code>0x%0*"
                PRIx32 "</code></td><td class=\"num\">%.9g</td><td class=\"num\">%" PRIu64
                "</td></tr>\n",
                width, e->expected, (double)moeperm_golden_bits_value(dtype, e->expected), width,
                e->actual, (double)moeperm_golden_bits_value(dtype, e->actual),
                moeperm_golden_ulp_distance(dtype, e->expected, e->actual));
    }
    fputs("</tbody></table>\n", f);
    if (cr->differing > cr->first_count)
        fprintf(f, "<p class=\"more\">&#8230; and %" PRIu64 " more</p>\n",
                cr->differing - cr->first_count);
}

static void findings(FILE *f, const moeperm_golden_judgement *j, size_t i)
{
    size_t n = moeperm_golden_judgement_finding_count(j, i);
    fputs("<h4>Diagnosis</h4>\n", f);
    if (n == 0) {
        fputs("<p class=\"none\">No known kernel bug reproduces these differences (or the "
              "diagnosis was not asked for).</p>\n",
              f);
        return;
    }
    fputs("<ul class=\"findings\">\n", f);
    for (size_t k = 0; k < n; k++) {
        bool exact = moeperm_golden_judgement_finding_exact(j, i, k);
        fputs("<li><code class=\"id\">", f);
        esc(f, moeperm_golden_judgement_finding_id(j, i, k));
        fprintf(f, "</code> <span class=\"%s\">%s</span> <span class=\"detail\">",
                exact ? "exact" : "partial", exact ? "exact" : "partly");
        esc(f, moeperm_golden_judgement_finding_detail(j, i, k));
        fputs("</span></li>\n", f);
    }
    fputs("</ul>\n", f);
}

static void stats_table(FILE *f, const moeperm_golden_judgement *j)
{
    fputs("<h3 class=\"stats-title\">Statistics</h3>\n<table class=\"stats\"><thead><tr><th>output"
          "</th><th>finite</th><th>max abs error</th><th>max rel error</th><th>cosine</th>"
          "<th>MARE</th><th>MERE</th><th>RMSE</th></tr></thead><tbody>\n",
          f);
    for (size_t i = 0; i < moeperm_golden_judgement_output_count(j); i++) {
        moeperm_golden_stats st;
        fputs("<tr><th>", f);
        esc(f, moeperm_golden_judgement_output_name(j, i));
        fputs("</th>", f);
        if (!moeperm_golden_judgement_output_stats(j, i, &st)) {
            fputs("<td colspan=\"7\" class=\"na\">not computed for this dtype</td></tr>\n", f);
            continue;
        }
        fprintf(f, "<td class=\"num\">%" PRIu64 " of %" PRIu64 "</td>", st.finite, st.elements);
        number_cell(f, st.max_abs_error, false);
        number_cell(f, st.max_rel_error, false);
        number_cell(f, st.cosine, true);
        number_cell(f, st.mare, false);
        number_cell(f, st.mere, false);
        number_cell(f, st.rmse, false);
        fputs("</tr>\n", f);
    }
    fputs("</tbody></table>\n", f);
}

static void shape_text(FILE *f, const moeperm_golden_tensor *t)
{
    fprintf(f, "%s [", moeperm_dtype_name(t->dtype));
    for (uint64_t d = 0; d < t->ndim; d++)
        fprintf(f, "%s%" PRId64, d ? ", " : "", t->shape[d]);
    fputs("]", f);
}

/* Writes the section of the open case (index n) into f. */
static int write_section(FILE *f, const html_case *hc, size_t n, const moeperm_golden_case *c,
                         void *const *actual, bool strict_nan, const moeperm_golden_judgement *j,
                         const moeperm_golden_tensor *const *tensor, uint64_t *grid)
{
    fprintf(f, "<section class=\"case\" id=\"case-%zu\">\n<h2>", n + 1);
    badge(f, hc->worst);
    fputs(" <span class=\"path\">", f);
    esc(f, hc->path);
    fputs("</span></h2>\n<p class=\"meta\">", f);
    esc(f, hc->op ? hc->op : moeperm_op_name(c->op));
    fputs(" &#183; case ", f);
    esc(f, c->name);
    fputs("</p>\n", f);
    bool any_same = false;
    for (size_t i = 0; i < hc->outputs; i++) {
        const moeperm_golden_compare_result *cr = moeperm_golden_judgement_output_compare(j, i);
        const moeperm_golden_tensor *t = tensor[i];
        if (cr->differing == 0) {
            any_same = true;
            continue;
        }
        fprintf(f, "<div class=\"output\" id=\"case-%zu-%zu\">\n<h3>", n + 1, i + 1);
        esc(f, hc->out[i].name);
        fputs(" ", f);
        badge(f, (int)hc->out[i].verdict);
        fputs(" <span class=\"shape\">", f);
        shape_text(f, t);
        fputs("</span></h3>\n<div class=\"split\">\n", f);

        int64_t rows = t->ndim ? t->shape[0] : 1, cols = 1;
        for (uint64_t d = 1; d < t->ndim; d++)
            cols *= t->shape[d];
        bool is_float = t->dtype == MOEPERM_FLOAT || t->dtype == MOEPERM_FLOAT16 ||
                        t->dtype == MOEPERM_BF16;
        scan s = {t->data, actual[i], moeperm_dtype_size(t->dtype), is_float && !strict_nan,
                  t->dtype == MOEPERM_FLOAT ? 0x7fffffffu : 0x7fffu,
                  t->dtype == MOEPERM_FLOAT     ? 0x7f800000u
                  : t->dtype == MOEPERM_FLOAT16 ? 0x7c00u
                                                : 0x7f80u};
        if (write_map(f, &s, rows, cols, cr, t->dtype, grid) != 0)
            return -1;

        fprintf(f, "<div class=\"facts\">\n<p class=\"count\"><b>%" PRIu64 "</b> of %" PRIu64
                   " elements differ",
                cr->differing, cr->elements);
        if (cr->nan_mismatch)
            fprintf(f, " (%" PRIu64 " NaN against a number)", cr->nan_mismatch);
        fprintf(f, ", max distance %" PRIu64 " ulp</p>\n", cr->max_ulp);
        if (cr->first_count > 0)
            first_card(f, cr, t->dtype, &cr->first[0]);
        fputs("<p class=\"where\"><b>Where:</b> ", f);
        esc(f, cr->where ? cr->where : "?");
        fputs("</p>\n", f);
        legend(f);
        fputs("</div>\n</div>\n", f);
        first_table(f, cr, t->dtype);
        findings(f, j, i);
        fputs("</div>\n", f);
    }
    if (any_same) {
        fputs("<p class=\"same-outputs\">Bit for bit the same:", f);
        bool first = true;
        for (size_t i = 0; i < hc->outputs; i++)
            if (hc->out[i].differing == 0) {
                fputs(first ? " <b>" : ", <b>", f);
                esc(f, hc->out[i].name);
                fprintf(f, "</b> (%" PRIu64 " elements)", hc->out[i].elements);
                first = false;
            }
        fputs("</p>\n", f);
    }
    stats_table(f, j);
    fputs("</section>\n", f);
    return 0;
}

/* ---------------------------------------------------------------------- */
/* The collector                                                          */
/* ---------------------------------------------------------------------- */

moeperm_golden_html_report *moeperm_golden_html_report_new(const char *title)
{
    moeperm_golden_html_report *r = calloc(1, sizeof *r);
    if (!r)
        return NULL;
    r->title = copy(title ? title : "moeperm report");
    if (!r->title) {
        free(r);
        return NULL;
    }
    return r;
}

int moeperm_golden_html_report_add_case(moeperm_golden_html_report *r, const char *case_path,
                                        const char *op)
{
    if (r->count == r->capacity) {
        size_t cap = r->capacity ? 2 * r->capacity : 64;
        html_case *grown = realloc(r->cases, cap * sizeof *grown);
        if (!grown)
            return -1;
        r->cases = grown;
        r->capacity = cap;
    }
    html_case *hc = &r->cases[r->count];
    memset(hc, 0, sizeof *hc);
    hc->worst = VERDICT_NONE;
    hc->path = copy(case_path ? case_path : "");
    hc->op = copy(op);
    if (!hc->path || (op && !hc->op)) {
        free(hc->path);
        free(hc->op);
        return -1;
    }
    r->count++;
    return 0;
}

int moeperm_golden_html_report_set_failure(moeperm_golden_html_report *r,
                                           moeperm_golden_failure why, const char *sentence)
{
    if (r->count == 0)
        return -1;
    html_case *hc = &r->cases[r->count - 1];
    char *error = copy(sentence ? sentence : "");
    if (!error)
        return -1;
    free(hc->error);
    hc->error = error;
    hc->worst = why == MOEPERM_GOLDEN_FAILURE_MISSING ? VERDICT_MISSING : VERDICT_ERROR;
    return 0;
}

int moeperm_golden_html_report_set_error(moeperm_golden_html_report *r, const char *sentence)
{
    return moeperm_golden_html_report_set_failure(r, MOEPERM_GOLDEN_FAILURE_BACKEND, sentence);
}

int moeperm_golden_html_report_add_judgement(moeperm_golden_html_report *r,
                                             const moeperm_golden_case *c, void *const *actual,
                                             const moeperm_golden_judge_options *options,
                                             const moeperm_golden_judgement *j)
{
    if (r->count == 0)
        return -1;
    html_case *hc = &r->cases[r->count - 1];
    size_t n = moeperm_golden_judgement_output_count(j);
    if (hc->outputs != 0 || n > MOEPERM_GOLDEN_MAX_TENSORS)
        return -1;
    /* The judgement's outputs are c's, in c's order: the map reads each
     * one's golden bits beside actual's. */
    const moeperm_golden_tensor *tensor[MOEPERM_GOLDEN_MAX_TENSORS];
    size_t k = 0;
    for (size_t i = 0; i < c->tensor_count; i++)
        if (c->tensors[i].role == MOEPERM_GOLDEN_ROLE_OUTPUT) {
            if (k == n)
                return -1;
            tensor[k++] = &c->tensors[i];
        }
    if (k != n)
        return -1;
    bool differs = false;
    for (size_t i = 0; i < n; i++) {
        const moeperm_golden_compare_result *cr = moeperm_golden_judgement_output_compare(j, i);
        if (strcmp(tensor[i]->name, moeperm_golden_judgement_output_name(j, i)) != 0 ||
            cr->elements != moeperm_golden_tensor_elements(tensor[i]) ||
            (cr->differing > 0 && (!tensor[i]->data || !actual[i])))
            return -1;
        differs = differs || cr->differing > 0;
    }
    for (size_t i = 0; i < n; i++) {
        const moeperm_golden_compare_result *cr = moeperm_golden_judgement_output_compare(j, i);
        html_output *o = &hc->out[i];
        o->name = copy(moeperm_golden_judgement_output_name(j, i));
        if (!o->name) {
            hc->outputs = i;
            return -1;
        }
        o->verdict = moeperm_golden_judgement_output_verdict(j, i);
        o->differing = cr->differing;
        o->elements = cr->elements;
        o->max_ulp = cr->max_ulp;
        o->nan_mismatch = cr->nan_mismatch;
    }
    hc->outputs = n;
    if (hc->worst < VERDICT_ERROR)
        hc->worst = (int)moeperm_golden_judgement_verdict(j);
    if (!differs)
        return 0;
    if (r->sections_len >= PAGE_SECTIONS_MAX) {
        r->sections_left_out++;
        return 0;
    }

    if (!r->grid && !(r->grid = malloc((size_t)MAP_CELLS * MAP_CELLS * sizeof *r->grid)))
        return -1;
    char *text = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&text, &len);
    if (!f)
        return -1;
    bool strict_nan = options && options->strict_nan;
    int rc = write_section(f, hc, r->count - 1, c, actual, strict_nan, j, tensor, r->grid);
    if (fclose(f) != 0)
        rc = -1;
    if (rc == 0)
        rc = append_text(r, text, len);
    free(text);
    if (rc == 0)
        hc->has_section = true;
    return rc;
}

/* ---------------------------------------------------------------------- */
/* The page                                                               */
/* ---------------------------------------------------------------------- */

static const char style[] =
    ":root{color-scheme:light;--ink:#1f2933;--muted:#5f6b7a;--line:#d5dbe3}\n"
    "body{font:14px/1.45 system-ui,-apple-system,\"Segoe UI\",Roboto,\"DejaVu Sans\",sans-serif;"
    "color:var(--ink);background:#fafbfc;margin:0;padding:24px 32px}\n"
    "main{max-width:1280px;margin:0 auto}\n"
    "h1{font-size:22px;margin:0 0 4px}h2{font-size:17px;margin:0 0 4px;word-break:break-all}\n"
    "h3{font-size:15px;margin:18px 0 8px}h4{font-size:13px;margin:12px 0 4px}\n"
    ".sub,.meta{color:var(--muted);margin:0 0 12px}\n"
    "code{font:12px/1.3 ui-monospace,\"DejaVu Sans Mono\",monospace}\n"
    "table{border-collapse:collapse;background:#fff}\n"
    "th,td{border:1px solid var(--line);padding:3px 8px;text-align:left;vertical-align:top}\n"
    "thead th{background:#eef1f5;font-weight:600}\n"
    "td.num{text-align:right;font-variant-numeric:tabular-nums}\n"
    "table.verdicts{width:100%}table.verdicts td.path{word-break:break-all}\n"
    "table.verdicts tr.same td{color:var(--muted)}\n"
    "#only-differing:checked~table.verdicts tr.same{display:none}\n"
    ".out{white-space:nowrap}.out.same{color:var(--muted)}\n"
    ".badge{display:inline-block;border-radius:9px;padding:0 8px;font-size:12px;font-weight:600;"
    "color:#fff;background:#6b7280}\n"
    ".badge.same{background:#2f855a}.badge.within-tolerance{background:#b7791f}"
    ".badge.different{background:#c53030}.badge.error{background:#553c9a}"
    ".badge.missing{background:#975a16}\n"
    ".error-text{color:#553c9a}\n"
    "section.case{background:#fff;border:1px solid var(--line);border-radius:8px;"
    "padding:16px 20px;margin:24px 0;box-shadow:0 1px 2px rgba(0,0,0,.04)}\n"
    ".shape{color:var(--muted);font-weight:400;font-size:13px}\n"
    ".split{display:flex;flex-wrap:wrap;gap:24px;align-items:flex-start}\n"
    "figure.map{margin:0}figure.map figcaption{max-width:660px;color:var(--muted);"
    "font-size:12px;margin-top:6px}\n"
    "svg rect:not(.bg):not(.ring):hover{stroke:#111827;stroke-width:1}"
    "svg rect.ring{pointer-events:none}svg path.first{fill:#1f2933}\n"
    ".facts{flex:1;min-width:320px}.facts p{margin:0 0 8px}\n"
    "table.first{margin:12px 0 8px;font-size:13px}table.first td{white-space:nowrap}\n"
    "table.first caption{text-align:left;font-weight:600;padding-bottom:4px}\n"
    "dl.first-card{display:grid;grid-template-columns:max-content auto;gap:2px 12px;"
    "margin:0 0 10px;padding:8px 12px;background:#f6f8fa;border-left:3px solid #1f2933}\n"
    "dl.first-card dt{color:var(--muted)}dl.first-card dd{margin:0}\n"
    ".legend{display:flex;flex-wrap:wrap;gap:4px 12px;font-size:12px;color:var(--muted)}\n"
    ".legend i{display:inline-block;width:12px;height:12px;margin-right:4px;"
    "vertical-align:-2px;border:1px solid rgba(0,0,0,.15)}\n"
    "ul.findings{margin:0;padding-left:20px}.findings .exact{color:#2f855a;font-weight:600}"
    ".findings .partial{color:#b7791f;font-weight:600}\n"
    ".same-outputs{color:var(--muted)}.na{color:var(--muted)}\n"
    "table.stats{font-size:13px}\n"
    "label{color:var(--muted);user-select:none}\n";

static void table_row(FILE *f, const html_case *hc, size_t n)
{
    const char *verdict = verdict_names[hc->worst < 0 ? 0 : hc->worst];
    fprintf(f, "<tr class=\"%s\"><td class=\"num\">%zu</td><td class=\"path\">", verdict, n + 1);
    if (hc->has_section)
        fprintf(f, "<a href=\"#case-%zu\">", n + 1);
    esc(f, hc->path);
    fputs(hc->has_section ? "</a></td><td class=\"op\">" : "</td><td class=\"op\">", f);
    esc(f, hc->op ? hc->op : "");
    fputs("</td><td class=\"verdict\">", f);
    badge(f, hc->worst);
    fputs("</td><td class=\"outputs\">", f);
    if (hc->error) {
        fputs("<span class=\"error-text\">", f);
        esc(f, hc->error);
        fputs("</span>", f);
    }
    for (size_t i = 0; i < hc->outputs; i++) {
        const html_output *o = &hc->out[i];
        fprintf(f, "<div class=\"out%s\" data-verdict=\"%s\"><span class=\"name\">",
                o->differing ? "" : " same", moeperm_golden_verdict_name(o->verdict));
        esc(f, o->name);
        fprintf(f, "</span> <span class=\"differ\">%" PRIu64 "</span> of <span class=\"elements\">%"
                   PRIu64 "</span> differ",
                o->differing, o->elements);
        if (o->nan_mismatch)
            fprintf(f, " (<span class=\"nan\">%" PRIu64 "</span> NaN)", o->nan_mismatch);
        fprintf(f, ", max <span class=\"ulp\">%" PRIu64 "</span> ulp</div>", o->max_ulp);
    }
    fputs("</td></tr>\n", f);
}

static int write_page(const moeperm_golden_html_report *r, char **text, size_t *len)
{
    FILE *f = open_memstream(text, len);
    if (!f)
        return -1;
    uint64_t n[5] = {0, 0, 0, 0, 0};
    for (size_t i = 0; i < r->count; i++)
        n[r->cases[i].worst < 0 ? 0 : r->cases[i].worst]++;
    fputs("<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n"
          "<meta http-equiv=\"Content-Security-Policy\" content=\"default-src 'none'; "
          "style-src 'unsafe-inline'\">\n"
          "<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\n<title>",
          f);
    esc(f, r->title);
    fprintf(f, ": %zu case%s</title>\n<style>\n%s</style>\n</head>\n<body>\n<main>\n<h1>",
            r->count, r->count == 1 ? "" : "s", style);
    esc(f, r->title);
    fprintf(f, "</h1>\n<p class=\"sub\">%zu case%s: %" PRIu64 " same, %" PRIu64
               " within tolerance, %" PRIu64 " different, %" PRIu64 " missing, %" PRIu64
               " error%s &#183; moeperm ",
            r->count, r->count == 1 ? "" : "s", n[0], n[1], n[2], n[4], n[3],
            n[3] == 1 ? "" : "s");
    esc(f, moeperm_version());
    fputs("</p>\n<input type=\"checkbox\" id=\"only-differing\"> <label for=\"only-differing\">"
          "hide the cases that are the same</label>\n"
          "<table class=\"verdicts\"><thead><tr><th>#</th><th>case</th><th>operator</th>"
          "<th>verdict</th><th>outputs</th></tr></thead>\n<tbody>\n",
          f);
    for (size_t i = 0; i < r->count; i++)
        table_row(f, &r->cases[i], i);
    fputs("</tbody></table>\n", f);
    if (r->sections_len)
        fwrite(r->sections, 1, r->sections_len, f);
    if (r->sections_left_out)
        fprintf(f, "<p class=\"left-out\">%zu more case%s that differ%s no section here: the "
                   "page holds %zu MiB of them at most. The JSON report (--json) has every "
                   "case.</p>\n",
                r->sections_left_out, r->sections_left_out == 1 ? "" : "s",
                r->sections_left_out == 1 ? "s has" : " have", PAGE_SECTIONS_MAX >> 20);
    fputs("</main>\n</body>\n</html>\n", f);
    return fclose(f) == 0 ? 0 : -1;
}

int moeperm_golden_html_report_write_path(const moeperm_golden_html_report *r, const char *path,
                                          char *err, size_t err_len)
{
    char *text = NULL;
    size_t len = 0;
    if (write_page(r, &text, &len) != 0) {
        free(text);
        snprintf(err, err_len, "out of memory writing %s", path);
        return -1;
    }
    int rc = moeperm_golden_write_file_atomic(path, text, len, err, err_len);
    free(text);
    return rc;
}

void moeperm_golden_html_report_free(moeperm_golden_html_report *r)
{
    if (!r)
        return;
    for (size_t i = 0; i < r->count; i++) {
        free(r->cases[i].path);
        free(r->cases[i].op);
        free(r->cases[i].error);
        for (size_t k = 0; k < r->cases[i].outputs; k++)
            free(r->cases[i].out[k].name);
    }
    free(r->cases);
    free(r->sections);
    free(r->grid);
    free(r->title);
    free(r);
}

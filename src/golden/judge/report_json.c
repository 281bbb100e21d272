/*
 * report_json.c - the JSON report, built as a json-c tree while cases are
 * judged and serialised once.  Numbers that JSON cannot carry (NaN and the
 * infinities among the statistics and element values) become null; the
 * element's bits, always present, keep the truth.
 */
#include "golden/judge/report_json.h"

#include <inttypes.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include <json-c/json.h>

#include "golden/common/text.h"

typedef struct case_state {
    json_object *obj;     /* the case's object, owned by the cases array */
    json_object *outputs; /* its "outputs" object */
    char *suite;          /* the directory holding the case */
    /* -1 nothing yet, else a moeperm_golden_verdict, or VERDICT_ERROR or
     * VERDICT_MISSING */
    int worst;
    moeperm_golden_failure failure; /* why, for VERDICT_ERROR */
    bool other_chip;      /* not judged: made for another chip than the device's */
} case_state;

struct moeperm_golden_json_report {
    json_object *cases; /* array */
    case_state *state;
    size_t count, capacity;
    uint64_t left_out;
};

enum { VERDICT_ERROR = 3, VERDICT_MISSING = 4 };

/* Valid UTF-8 as is; each byte of an invalid sequence as the text "\xHH". */
static json_object *text(const char *s)
{
    if (!s)
        return NULL;
    size_t n = strlen(s);
    char *out = malloc(4 * n + 1);
    if (!out)
        return NULL;
    size_t o = 0;
    for (const unsigned char *p = (const unsigned char *)s; *p;) {
        uint32_t cp;
        size_t len = golden_utf8_sequence(p, SIZE_MAX, &cp);
        if (len == 0) {
            o += (size_t)sprintf(out + o, "\\x%02x", *p);
            p++;
            continue;
        }
        memcpy(out + o, p, len);
        o += len;
        p += len;
    }
    out[o] = '\0';
    json_object *j = json_object_new_string_len(out, (int)o);
    free(out);
    return j;
}

static json_object *number(double v)
{
    return isfinite(v) ? json_object_new_double(v) : NULL;
}

static json_object *count(uint64_t v)
{
    return json_object_new_int64(v > INT64_MAX ? INT64_MAX : (int64_t)v);
}

/* Two hex digits per byte of the dtype, as the text and HTML reports
 * write them: 0x3f80 for bf16, 0x00000016 for int32, 0x7f for int8. */
static json_object *hex(moeperm_dtype dtype, uint32_t bits)
{
    char buf[16];
    snprintf(buf, sizeof buf, "0x%0*" PRIx32, 2 * (int)moeperm_dtype_size(dtype), bits);
    return json_object_new_string(buf);
}

/* json_object_object_add() and _array_add() take the reference even when
 * they fail; a NULL value is a JSON null, which is why a failed allocation
 * is checked by the caller through `ok`. */
static void put(json_object *obj, const char *key, json_object *value, bool *ok)
{
    if (json_object_object_add(obj, key, value) != 0)
        *ok = false;
}

static void append(json_object *arr, json_object *value, bool *ok)
{
    if (!value || json_object_array_add(arr, value) != 0) {
        json_object_put(value);
        *ok = false;
    }
}

moeperm_golden_json_report *moeperm_golden_json_report_new(void)
{
    moeperm_golden_json_report *r = calloc(1, sizeof *r);
    if (!r)
        return NULL;
    r->cases = json_object_new_array();
    if (!r->cases) {
        free(r);
        return NULL;
    }
    return r;
}

int moeperm_golden_json_report_add_case(moeperm_golden_json_report *r, const char *case_path, const char *op)
{
    if (r->count == r->capacity) {
        size_t cap = r->capacity ? 2 * r->capacity : 64;
        case_state *grown = realloc(r->state, cap * sizeof *grown);
        if (!grown)
            return -1;
        r->state = grown;
        r->capacity = cap;
    }
    bool ok = true;
    json_object *c = json_object_new_object(), *outputs = json_object_new_object();
    json_object *path = text(case_path), *name = op ? text(op) : NULL;
    if (!c || !outputs || !path || (op && !name)) {
        json_object_put(c);
        json_object_put(outputs);
        json_object_put(path);
        json_object_put(name);
        return -1;
    }
    put(c, "case", path, &ok);
    put(c, "op", name, &ok);
    put(c, "verdict", json_object_new_string("same"), &ok);
    put(c, "outputs", outputs, &ok);
    append(r->cases, c, &ok);
    if (!ok)
        return -1;
    /* its suite, as moeperm check's table groups cases: the directory
     * holding it */
    const char *slash = strrchr(case_path, '/');
    char *suite = slash ? strndup(case_path, (size_t)(slash - case_path)) : strdup(".");
    if (!suite)
        return -1;
    r->state[r->count++] = (case_state){c, outputs, suite, -1, MOEPERM_GOLDEN_FAILURE_BACKEND,
                                        false};
    return 0;
}

static void set_verdict(case_state *s)
{
    static const char *const names[] = {"same", "within-tolerance", "different", "error",
                                        "missing"};
    json_object_object_add(s->obj, "verdict",
                           json_object_new_string(names[s->worst < 0 ? 0 : s->worst]));
}

int moeperm_golden_json_report_set_failure(moeperm_golden_json_report *r, moeperm_golden_failure why,
                                           const char *sentence)
{
    if (r->count == 0)
        return -1;
    case_state *s = &r->state[r->count - 1];
    json_object *msg = text(sentence ? sentence : "");
    if (!msg || json_object_object_add(s->obj, "error", msg) != 0)
        return -1;
    if (why != MOEPERM_GOLDEN_FAILURE_MISSING &&
        json_object_object_add(s->obj, "error_kind",
                               json_object_new_string(why == MOEPERM_GOLDEN_FAILURE_BAD_INPUT
                                                          ? "bad-input"
                                                          : "backend-failure")) != 0)
        return -1;
    s->worst = why == MOEPERM_GOLDEN_FAILURE_MISSING ? VERDICT_MISSING : VERDICT_ERROR;
    s->failure = why;
    set_verdict(s);
    return 0;
}

int moeperm_golden_json_report_set_error(moeperm_golden_json_report *r, const char *sentence)
{
    return moeperm_golden_json_report_set_failure(r, MOEPERM_GOLDEN_FAILURE_BACKEND, sentence);
}

void moeperm_golden_json_report_note_left_out(moeperm_golden_json_report *r, uint64_t cases)
{
    r->left_out += cases;
}

static json_object *ranges(const moeperm_golden_where *w, bool *ok)
{
    if (!w) /* nothing differs */
        return NULL;
    json_object *obj = json_object_new_object(), *groups = json_object_new_array();
    if (!obj || !groups) {
        json_object_put(obj);
        json_object_put(groups);
        *ok = false;
        return NULL;
    }
    static const char *const kinds[] = {"all", "ranges", "most", "scattered"};
    put(obj, "text", text(w->text ? w->text : ""), ok);
    for (size_t i = 0; i < w->groups; i++) {
        const golden_where_group *g = &w->group[i];
        json_object *group = json_object_new_object(), *spans = json_object_new_array();
        json_object *cols = json_object_new_array();
        if (!group || !spans || !cols) {
            json_object_put(group);
            json_object_put(spans);
            json_object_put(cols);
            *ok = false;
            continue;
        }
        for (size_t k = 0; k < g->spans; k++) {
            json_object *span = json_object_new_object();
            if (!span) {
                *ok = false;
                continue;
            }
            put(span, "first", count((uint64_t)g->span[k].first), ok);
            put(span, "last", count((uint64_t)g->span[k].last), ok);
            put(span, "step", count((uint64_t)g->span[k].step), ok);
            append(spans, span, ok);
        }
        for (size_t k = 0; k < g->ranges; k++) {
            json_object *range = json_object_new_array();
            if (!range) {
                *ok = false;
                continue;
            }
            append(range, count((uint64_t)g->lo[k]), ok);
            append(range, count((uint64_t)g->hi[k]), ok);
            append(cols, range, ok);
        }
        put(group, "rows", spans, ok);
        put(group, "row_count", count(g->rows), ok);
        put(group, "rows_listed", count(g->rows_in_spans), ok);
        put(group, "columns", json_object_new_string(kinds[g->columns]), ok);
        put(group, "column_ranges", cols, ok);
        put(group, "column_first", count((uint64_t)g->column_first), ok);
        put(group, "column_last", count((uint64_t)g->column_last), ok);
        put(group, "elements", count(g->elements), ok);
        append(groups, group, ok);
    }
    put(obj, "groups", groups, ok);
    put(obj, "rows_elsewhere", count(w->rows_elsewhere), ok);
    return obj;
}

int golden_json_report_add_output(moeperm_golden_json_report *r, const golden_json_output *o)
{
    if (r->count == 0 || !o->compare)
        return -1;
    case_state *s = &r->state[r->count - 1];
    const moeperm_golden_compare_result *c = o->compare;
    bool ok = true;
    json_object *out = json_object_new_object(), *first = json_object_new_array();
    if (!out || !first) {
        json_object_put(out);
        json_object_put(first);
        return -1;
    }
    put(out, "dtype", json_object_new_string(moeperm_dtype_name(o->dtype)), &ok);
    put(out, "verdict", json_object_new_string(moeperm_golden_verdict_name(o->verdict)), &ok);
    put(out, "elements", count(c->elements), &ok);
    put(out, "differ", count(c->differing), &ok);
    put(out, "nan_mismatch", count(c->nan_mismatch), &ok);
    put(out, "max_ulp", count(c->max_ulp), &ok);
    for (size_t i = 0; i < c->first_count; i++) {
        const moeperm_golden_diff *d = &c->first[i];
        json_object *e = json_object_new_object(), *index = json_object_new_array();
        if (!e || !index) {
            json_object_put(e);
            json_object_put(index);
            ok = false;
            continue;
        }
        append(index, count((uint64_t)d->token), &ok);
        append(index, count((uint64_t)d->column), &ok);
        put(e, "index", index, &ok);
        put(e, "expected", hex(o->dtype, d->expected), &ok);
        put(e, "actual", hex(o->dtype, d->actual), &ok);
        put(e, "expected_value", number(moeperm_golden_bits_value(o->dtype, d->expected)), &ok);
        put(e, "actual_value", number(moeperm_golden_bits_value(o->dtype, d->actual)), &ok);
        append(first, e, &ok);
    }
    put(out, "first", first, &ok);
    if (c->differing > 0)
        put(out, "ranges", ranges(c->ranges, &ok), &ok);
    else
        put(out, "ranges", NULL, &ok);

    json_object *diagnosis = json_object_new_array();
    if (!diagnosis)
        ok = false;
    for (size_t i = 0; diagnosis && o->diagnosis && i < o->diagnosis->count; i++) {
        const golden_finding *f = &o->diagnosis->finding[i];
        json_object *e = json_object_new_object();
        if (!e) {
            ok = false;
            continue;
        }
        put(e, "id", json_object_new_string(f->id), &ok);
        put(e, "detail", text(f->detail), &ok);
        put(e, "explained", count(f->explained), &ok);
        put(e, "contradicted", count(f->contradicted), &ok);
        put(e, "exact", json_object_new_boolean(f->exact), &ok);
        append(diagnosis, e, &ok);
    }
    put(out, "diagnosis", diagnosis, &ok);

    if (o->stats) {
        json_object *st = json_object_new_object();
        if (!st) {
            ok = false;
        } else {
            put(st, "finite", count(o->stats->finite), &ok);
            put(st, "max_abs_error", number(o->stats->max_abs_error), &ok);
            put(st, "max_rel_error", number(o->stats->max_rel_error), &ok);
            put(st, "cosine", number(o->stats->cosine), &ok);
            put(st, "mare", number(o->stats->mare), &ok);
            put(st, "mere", number(o->stats->mere), &ok);
            put(st, "rmse", number(o->stats->rmse), &ok);
        }
        put(out, "stats", st, &ok);
    } else {
        put(out, "stats", NULL, &ok);
    }
    json_object *name = text(o->name ? o->name : "output");
    if (!name) {
        json_object_put(out);
        return -1;
    }
    put(s->outputs, json_object_get_string(name), out, &ok);
    json_object_put(name);
    if (!ok)
        return -1;
    if (s->worst < VERDICT_ERROR && (int)o->verdict > s->worst) {
        s->worst = (int)o->verdict;
        set_verdict(s);
    }
    return 0;
}

/* The counts of the cases [first, end) under the keys moeperm check's
 * table has: same (pass), within_tolerance, different (mismatch),
 * missing, bad_input, backend_failure, and error (the last two together). */
static void put_counts(json_object *obj, const moeperm_golden_json_report *r, size_t first,
                       size_t end, bool *ok)
{
    uint64_t n[5] = {0, 0, 0, 0, 0}, bad = 0, other_chip = 0;
    for (size_t i = first; i < end; i++) {
        const case_state *s = &r->state[i];
        if (s->other_chip) {
            other_chip++;
            continue;
        }
        n[s->worst < 0 ? 0 : s->worst]++;
        bad += s->worst == VERDICT_ERROR && s->failure == MOEPERM_GOLDEN_FAILURE_BAD_INPUT;
    }
    put(obj, "cases", count(end - first), ok);
    put(obj, "same", count(n[MOEPERM_GOLDEN_VERDICT_SAME]), ok);
    put(obj, "within_tolerance", count(n[MOEPERM_GOLDEN_VERDICT_WITHIN_TOLERANCE]), ok);
    put(obj, "different", count(n[MOEPERM_GOLDEN_VERDICT_DIFFERENT]), ok);
    put(obj, "missing", count(n[VERDICT_MISSING]), ok);
    put(obj, "bad_input", count(bad), ok);
    put(obj, "backend_failure", count(n[VERDICT_ERROR] - bad), ok);
    put(obj, "error", count(n[VERDICT_ERROR]), ok);
    put(obj, "other_chip", count(other_chip), ok);
}

static json_object *document(const moeperm_golden_json_report *r, bool *ok)
{
    json_object *doc = json_object_new_object(), *summary = json_object_new_object();
    json_object *suites = json_object_new_array();
    if (!doc || !summary || !suites) {
        json_object_put(doc);
        json_object_put(summary);
        json_object_put(suites);
        *ok = false;
        return NULL;
    }
    put_counts(summary, r, 0, r->count, ok);
    put(summary, "left_out", count(r->left_out), ok);
    /* one row per run of cases in one directory, as the text table */
    for (size_t first = 0; first < r->count;) {
        size_t end = first + 1;
        while (end < r->count && strcmp(r->state[end].suite, r->state[first].suite) == 0)
            end++;
        json_object *row = json_object_new_object();
        if (row) {
            put(row, "suite", text(r->state[first].suite), ok);
            put_counts(row, r, first, end, ok);
        }
        append(suites, row, ok);
        first = end;
    }
    put(summary, "suites", suites, ok);
    put(doc, "format", json_object_new_string(GOLDEN_REPORT_FORMAT), ok);
    /* The document borrows the cases: the collector keeps its reference. */
    put(doc, "cases", json_object_get(r->cases), ok);
    put(doc, "summary", summary, ok);
    return doc;
}

static const char *serialise(const moeperm_golden_json_report *r, json_object **doc, size_t *len)
{
    bool ok = true;
    *doc = document(r, &ok);
    if (!ok || !*doc)
        return NULL;
    const char *s = json_object_to_json_string_length(
        *doc, JSON_C_TO_STRING_PRETTY | JSON_C_TO_STRING_SPACED | JSON_C_TO_STRING_NOSLASHESCAPE,
        len);
    return s;
}

int golden_json_report_write(const moeperm_golden_json_report *r, FILE *f, char *err, size_t err_len)
{
    json_object *doc;
    size_t len;
    const char *s = serialise(r, &doc, &len);
    if (!s) {
        json_object_put(doc);
        snprintf(err, err_len, "out of memory writing the JSON report");
        return -1;
    }
    int rc = fwrite(s, 1, len, f) == len && fputc('\n', f) != EOF && fflush(f) == 0 ? 0 : -1;
    json_object_put(doc);
    if (rc != 0)
        snprintf(err, err_len, "writing the JSON report failed");
    return rc;
}

int moeperm_golden_json_report_write_path(const moeperm_golden_json_report *r, const char *path, char *err,
                                  size_t err_len)
{
    if (strcmp(path, "-") == 0)
        return golden_json_report_write(r, stdout, err, err_len);
    json_object *doc;
    size_t len;
    const char *s = serialise(r, &doc, &len);
    if (!s) {
        json_object_put(doc);
        snprintf(err, err_len, "out of memory writing %s", path);
        return -1;
    }
    char *with_newline = malloc(len + 1);
    if (!with_newline) {
        json_object_put(doc);
        snprintf(err, err_len, "out of memory writing %s", path);
        return -1;
    }
    memcpy(with_newline, s, len);
    with_newline[len] = '\n';
    json_object_put(doc);
    int rc = moeperm_golden_write_file_atomic(path, with_newline, len + 1, err, err_len);
    free(with_newline);
    return rc;
}

void moeperm_golden_json_report_free(moeperm_golden_json_report *r)
{
    if (!r)
        return;
    json_object_put(r->cases);
    for (size_t i = 0; i < r->count; i++)
        free(r->state[i].suite);
    free(r->state);
    free(r);
}

/* {"name": ..., "ub_bytes": ..., "vector_cores": ...}, name null when the
 * chip has none. */
static json_object *chip_object(const char *name, const moeperm_chip *chip, bool *ok)
{
    json_object *o = json_object_new_object();
    if (!o) {
        *ok = false;
        return NULL;
    }
    put(o, "name", name && name[0] ? text(name) : NULL, ok);
    put(o, "ub_bytes", json_object_new_int64(chip->ub_bytes), ok);
    put(o, "vector_cores", json_object_new_int64(chip->vector_cores), ok);
    return o;
}

int moeperm_golden_json_report_set_other_chip(moeperm_golden_json_report *r,
                                              const char *device_name,
                                              const moeperm_chip *device,
                                              const char *case_name,
                                              const moeperm_chip *case_chip,
                                              const char *sentence)
{
    if (r->count == 0 || !device || !case_chip)
        return -1;
    case_state *s = &r->state[r->count - 1];
    bool ok = true;
    json_object *chips = json_object_new_object();
    if (!chips)
        return -1;
    put(chips, "device", chip_object(device_name, device, &ok), &ok);
    put(chips, "case", chip_object(case_name, case_chip, &ok), &ok);
    put(chips, "detail", text(sentence ? sentence : ""), &ok);
    put(s->obj, "other_chip", chips, &ok);
    put(s->obj, "verdict", json_object_new_string("other-chip"), &ok);
    s->other_chip = true;
    return ok ? 0 : -1;
}

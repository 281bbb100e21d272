/*
 * judge.c - the verdict on a case's outputs, however they were produced:
 * the bit-for-bit comparison of each output (compare.c), its statistics
 * (stats.c), the diagnosis of what differs (diagnose/), and for
 * MoeTokenUnpermuteGrad's probs_grad, whether a difference is one a
 * reduction in another order could make (order.c).  The tool, the Python package and
 * any harness get the same verdict, text and JSON from here.
 */
#include <inttypes.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include <moeperm/golden.h>

#include "golden/case/ops.h"
#include "golden/case/recipe.h"
#include "golden/judge/diagnose/diagnose.h"
#include "golden/judge/judge.h"
#include "golden/judge/order.h"
#include "golden/judge/report_json.h"
#include "golden/judge/stats.h"

/* The adversarial kinds have at most this many scenarios. */
#define SCENARIOS 16

typedef struct output_judgement {
    const moeperm_golden_tensor *expected;
    /* For a case of an adversarial value kind: the scenarios (columns
     * modulo the kind's count) of the differing elements. */
    const char *values;
    bool scenario_differs[SCENARIOS];
    moeperm_golden_compare_result compare;
    moeperm_golden_verdict verdict;
    golden_stats stats;
    bool has_stats;
    bool diagnosed;
    golden_diagnosis diagnosis;
} output_judgement;

struct moeperm_golden_judgement {
    uint64_t max_ulp;
    size_t count;
    output_judgement out[MOEPERM_GOLDEN_MAX_TENSORS];
};

/* ---------------------------------------------------------------------- */
/* The judgement                                                          */
/* ---------------------------------------------------------------------- */

/* Notes which scenarios the differing columns of o belong to, when the
 * case was made with an adversarial kind and o's columns are the hidden
 * columns the scenarios are laid out on (docs/golden-format.md). */
static void note_scenarios(const moeperm_golden_case *c, const void *actual, output_judgement *o)
{
    const moeperm_golden_tensor *t = o->expected;
    int scenario;
    if (!c->recipe.values || t->ndim != 2 || strcmp(t->name, "probs_grad") == 0 ||
        strcmp(t->name, "sorted_indices") == 0 ||
        !golden_scenario_name(c->recipe.values, 0, &scenario))
        return;
    size_t size = moeperm_dtype_size(t->dtype);
    int64_t rows = t->shape[0], cols = t->shape[1];
    for (int64_t r = 0; r < rows; r++)
        for (int64_t h = 0; h < cols; h++) {
            size_t at = (size_t)(r * cols + h) * size;
            if (memcmp((const char *)t->data + at, (const char *)actual + at, size) != 0 &&
                golden_scenario_name(c->recipe.values, h, &scenario) && scenario < SCENARIOS)
                o->scenario_differs[scenario] = true;
        }
    o->values = c->recipe.values;
}

static void report_scenarios(FILE *f, const output_judgement *o, const char *indent)
{
    bool any = false;
    for (int s = 0; o->values && s < SCENARIOS; s++) {
        int scenario;
        const char *name = golden_scenario_name(o->values, s, &scenario);
        if (!o->scenario_differs[s] || !name || scenario != s)
            continue;
        if (!any)
            fprintf(f, "%sscenarios of the %s values that differ (column modulo their count): ",
                    indent, o->values);
        fprintf(f, "%s%d (%s)", any ? ", " : "", s, name);
        any = true;
    }
    if (any)
        fputc('\n', f);
}

/* The tensor as the diagnosis takes it. */
static golden_diag_tensor diag_tensor(const moeperm_golden_tensor *t)
{
    golden_diag_tensor d;
    memset(&d, 0, sizeof d);
    d.name = t->name;
    d.dtype = t->dtype;
    d.ndim = t->ndim;
    memcpy(d.dims, t->shape, sizeof d.dims);
    d.data = t->data;
    return d;
}

int golden_judge_diagnose(const moeperm_golden_case *c, const moeperm_golden_tensor *output,
                          const void *actual, bool strict_nan, golden_diagnosis *d, char *err,
                          size_t err_len)
{
    golden_diag_tensor inputs[MOEPERM_GOLDEN_MAX_TENSORS];
    size_t n = 0;
    for (size_t i = 0; i < c->tensor_count; i++)
        if (c->tensors[i].role == MOEPERM_GOLDEN_ROLE_INPUT && c->tensors[i].data)
            inputs[n++] = diag_tensor(&c->tensors[i]);
    moeperm_chip chip = golden_chip_of(&c->attrs);
    golden_diag_attr attrs[4] = {{"top_k", c->attrs.top_k},
                                 {"num_out_tokens", c->attrs.num_out_tokens},
                                 {"ub_bytes", chip.ub_bytes},
                                 {"vector_cores", chip.vector_cores}};
    golden_diag_problem p = {moeperm_op_name(c->op), inputs, n, attrs, 4};
    golden_diag_tensor expected = diag_tensor(output);
    if (golden_diagnose(&p, &expected, actual, strict_nan, d, err, err_len) != 0)
        return -1;
    if (c->op == MOEPERM_OP_UNPERMUTE_GRAD && strcmp(output->name, "probs_grad") == 0)
        golden_judge_order(c, output, actual, d);
    return 0;
}

static int diagnose(const moeperm_golden_case *c, const void *actual, bool strict_nan,
                    output_judgement *o, char *err, size_t err_len)
{
    if (golden_judge_diagnose(c, o->expected, actual, strict_nan, &o->diagnosis, err, err_len) !=
        0)
        return -1;
    o->diagnosed = true;
    return 0;
}

/* What an output's rows and columns are, for the report: the permuted
 * tensors' rows are rows (a token's copy for one expert), sorted_indices
 * and probs_grad's columns are slots. */
static void nouns(const moeperm_golden_tensor *t, const char **row, const char **column)
{
    *row = "token";
    *column = "column";
    if (strcmp(t->name, "sorted_indices") == 0) {
        *row = "slot";
        *column = NULL;
    } else if (strcmp(t->name, "probs_grad") == 0) {
        *column = "slot";
    } else if (strncmp(t->name, "permuted_", 9) == 0) {
        *row = "row";
    }
}

int moeperm_golden_judge(const moeperm_golden_case *c, void *const *actual, const moeperm_golden_judge_options *options,
                 moeperm_golden_judgement **out, char *err, size_t err_len)
{
    *out = NULL;
    moeperm_golden_judgement *j = calloc(1, sizeof *j);
    if (!j) {
        snprintf(err, err_len, "out of memory judging %s", c->name ? c->name : "a case");
        return -1;
    }
    j->max_ulp = options->max_ulp;
    for (size_t i = 0; i < c->tensor_count; i++) {
        const moeperm_golden_tensor *t = &c->tensors[i];
        if (t->role != MOEPERM_GOLDEN_ROLE_OUTPUT)
            continue;
        if (!t->data && t->bytes) {
            snprintf(err, err_len, "%s: the golden %s is not loaded", c->name, t->name);
            moeperm_golden_judgement_free(j);
            return -1;
        }
        output_judgement *o = &j->out[j->count++];
        o->expected = t;
        const void *got = actual[j->count - 1];
        int64_t rows = t->ndim ? t->shape[0] : 1, cols = 1;
        for (uint64_t d = 1; d < t->ndim; d++)
            cols *= t->shape[d];
        const char *row_noun, *column_noun;
        nouns(t, &row_noun, &column_noun);
        if (moeperm_golden_compare_named(t->dtype, rows, cols, t->data, got, options->strict_nan,
                                 row_noun, column_noun, &o->compare) != 0) {
            snprintf(err, err_len, "out of memory comparing %s", t->name);
            moeperm_golden_judgement_free(j);
            return -1;
        }
        o->verdict = moeperm_golden_compare_verdict(&o->compare, options->max_ulp);
        o->has_stats = golden_stats_compute(t->dtype, t->data, got,
                                            moeperm_golden_tensor_elements(t), &o->stats) == 0;
        if (o->compare.differing > 0)
            note_scenarios(c, got, o);
        if (o->compare.differing > 0 && options->diagnose &&
            diagnose(c, got, options->strict_nan, o, err, err_len) != 0) {
            moeperm_golden_judgement_free(j);
            return -1;
        }
    }
    *out = j;
    return 0;
}

void moeperm_golden_judgement_free(moeperm_golden_judgement *j)
{
    if (!j)
        return;
    for (size_t i = 0; i < j->count; i++)
        moeperm_golden_compare_free(&j->out[i].compare);
    free(j);
}

moeperm_golden_verdict moeperm_golden_judgement_verdict(const moeperm_golden_judgement *j)
{
    moeperm_golden_verdict worst = MOEPERM_GOLDEN_VERDICT_SAME;
    for (size_t i = 0; i < j->count; i++)
        worst = j->out[i].verdict > worst ? j->out[i].verdict : worst;
    return worst;
}

size_t moeperm_golden_judgement_output_count(const moeperm_golden_judgement *j)
{
    return j->count;
}

const char *moeperm_golden_judgement_output_name(const moeperm_golden_judgement *j, size_t i)
{
    return i < j->count ? j->out[i].expected->name : NULL;
}

moeperm_golden_verdict moeperm_golden_judgement_output_verdict(const moeperm_golden_judgement *j, size_t i)
{
    return i < j->count ? j->out[i].verdict : MOEPERM_GOLDEN_VERDICT_DIFFERENT;
}

const moeperm_golden_compare_result *moeperm_golden_judgement_output_compare(const moeperm_golden_judgement *j,
                                                              size_t i)
{
    return i < j->count ? &j->out[i].compare : NULL;
}

size_t moeperm_golden_judgement_finding_count(const moeperm_golden_judgement *j, size_t i)
{
    return i < j->count && j->out[i].diagnosed ? j->out[i].diagnosis.count : 0;
}

static const golden_finding *finding(const moeperm_golden_judgement *j, size_t i, size_t k)
{
    return k < moeperm_golden_judgement_finding_count(j, i) ? &j->out[i].diagnosis.finding[k] : NULL;
}

const char *moeperm_golden_judgement_finding_id(const moeperm_golden_judgement *j, size_t i, size_t k)
{
    const golden_finding *f = finding(j, i, k);
    return f ? f->id : NULL;
}

const char *moeperm_golden_judgement_finding_detail(const moeperm_golden_judgement *j, size_t i, size_t k)
{
    const golden_finding *f = finding(j, i, k);
    return f ? f->detail : NULL;
}

bool moeperm_golden_judgement_finding_exact(const moeperm_golden_judgement *j, size_t i, size_t k)
{
    const golden_finding *f = finding(j, i, k);
    return f && f->exact;
}

void moeperm_golden_judgement_report(FILE *f, const moeperm_golden_judgement *j, const char *indent)
{
    for (size_t i = 0; i < j->count; i++) {
        const output_judgement *o = &j->out[i];
        if (o->compare.differing == 0)
            continue;
        char deeper[64];
        snprintf(deeper, sizeof deeper, "%s%s", indent, j->count > 1 ? "  " : "");
        if (j->count > 1)
            fprintf(f, "%s%s:\n", indent, o->expected->name);
        if (o->verdict == MOEPERM_GOLDEN_VERDICT_WITHIN_TOLERANCE)
            fprintf(f, "%swithin %" PRIu64 " ulp, not bit-exact\n", deeper, j->max_ulp);
        if (o->diagnosed)
            golden_diagnosis_report(f, &o->diagnosis, deeper);
        moeperm_golden_compare_report(f, o->expected->dtype, &o->compare, deeper);
        report_scenarios(f, o, deeper);
    }
}

char *moeperm_golden_judgement_summary(const moeperm_golden_judgement *j)
{
    char *text = NULL;
    size_t size = 0;
    FILE *f = open_memstream(&text, &size);
    if (!f)
        return NULL;
    bool first = true;
    for (size_t i = 0; i < j->count; i++) {
        const output_judgement *o = &j->out[i];
        if (o->compare.differing == 0)
            continue;
        char *line = moeperm_golden_compare_summary(o->expected->dtype, &o->compare);
        fprintf(f, "%s", first ? "" : "; ");
        if (j->count > 1)
            fprintf(f, "%s: ", o->expected->name);
        if (o->verdict == MOEPERM_GOLDEN_VERDICT_WITHIN_TOLERANCE)
            fprintf(f, "within %" PRIu64 " ulp, not bit-exact: ", j->max_ulp);
        fputs(line ? line : "elements differ", f);
        if (o->diagnosed && o->diagnosis.count > 0)
            fprintf(f, "; diagnosis: %s%s", o->diagnosis.finding[0].id,
                    o->diagnosis.finding[0].exact ? "" : " (partly)");
        free(line);
        first = false;
    }
    if (fclose(f) != 0) {
        free(text);
        return NULL;
    }
    return text;
}

int moeperm_golden_json_report_add_judgement(moeperm_golden_json_report *r, const moeperm_golden_judgement *j)
{
    for (size_t i = 0; i < j->count; i++) {
        const output_judgement *o = &j->out[i];
        golden_json_output out = {o->expected->name, o->expected->dtype, &o->compare,
                                  o->verdict,        o->diagnosed ? &o->diagnosis : NULL,
                                  o->has_stats ? &o->stats : NULL};
        if (golden_json_report_add_output(r, &out) != 0)
            return -1;
    }
    return 0;
}

bool moeperm_golden_judgement_output_stats(const moeperm_golden_judgement *j, size_t i,
                                           moeperm_golden_stats *s)
{
    if (i >= j->count || !j->out[i].has_stats)
        return false;
    const golden_stats *g = &j->out[i].stats;
    *s = (moeperm_golden_stats){g->elements, g->finite, g->max_abs_error, g->max_rel_error,
                                g->cosine,   g->mare,   g->mere,          g->rmse};
    return true;
}

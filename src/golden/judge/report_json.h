/*
 * report_json.h - the judge's report for machines: one JSON document per
 * run of compare or check, every case with its verdict and, per output
 * tensor, the bit-level facts (counts, ULP distance, first differences,
 * where they lie), the diagnosis and the precision tools' statistics.
 *
 * A collector gathers the cases as they are judged and writes the document
 * once at the end (atomically to a file, or to standard output).
 * docs/judging.md describes every key.
 */
#ifndef MOEPERM_GOLDEN_JUDGE_REPORT_JSON_H
#define MOEPERM_GOLDEN_JUDGE_REPORT_JSON_H

#include <stddef.h>
#include <stdio.h>

#include <moeperm/moeperm.h>

#include <moeperm/golden.h>

#include "golden/judge/diagnose/diagnose.h"
#include "golden/judge/stats.h"
#include "golden/judge/where.h"

/* The value of the document's "format" key. */
#define GOLDEN_REPORT_FORMAT "moeperm-report/1"

/* The collector (moeperm_golden_json_report_new() and the rest in golden.h) takes
 * each output through golden_json_report_add_output(). */

/* One output tensor of a case as judged. */
typedef struct golden_json_output {
    const char *name; /* "input_grad" */
    moeperm_dtype dtype;
    const moeperm_golden_compare_result *compare; /* required */
    moeperm_golden_verdict verdict;               /* under the run's --max-ulp */
    const golden_diagnosis *diagnosis;    /* NULL: not run (nothing differs) */
    const golden_stats *stats;            /* NULL: not computed */
} golden_json_output;

/* golden_json_report_add_output() adds an output tensor to the open case.
 * Returns 0, or -1 without an open case or memory. */
int golden_json_report_add_output(moeperm_golden_json_report *r, const golden_json_output *o);

/*
 * golden_json_report_write() writes the document to f (and
 * moeperm_golden_json_report_write_path() to a path).  Text that is not valid UTF-8 (a case directory
 * named with odd bytes) is written with each bad byte as the visible text
 * "\xHH", so the document is always valid JSON.  Returns 0, or -1 with a
 * sentence in err.
 */
int golden_json_report_write(const moeperm_golden_json_report *r, FILE *f, char *err, size_t err_len);

#endif

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
#ifndef MOEPERM_GOLDEN_REPORT_JSON_H
#define MOEPERM_GOLDEN_REPORT_JSON_H

#include <stddef.h>
#include <stdio.h>

#include <moeperm/moeperm.h>

#include "golden/internal.h"
#include "golden/diagnose.h"
#include "golden/stats.h"
#include "golden/where.h"

/* The value of the document's "format" key. */
#define GOLDEN_REPORT_FORMAT "moeperm-report/1"

typedef struct golden_json_report golden_json_report;

/* One output tensor of a case as judged. */
typedef struct golden_json_output {
    const char *name; /* "input_grad" */
    moeperm_dtype dtype;
    const golden_compare_result *compare; /* required */
    golden_verdict verdict;               /* under the run's --max-ulp */
    const golden_diagnosis *diagnosis;    /* NULL: not run (nothing differs) */
    const golden_stats *stats;            /* NULL: not computed */
} golden_json_output;

/* golden_json_report_new() returns an empty collector, or NULL when memory
 * runs out.  Not thread safe: one collector per thread. */
golden_json_report *golden_json_report_new(void);

/*
 * golden_json_report_add_case() opens the next case: case_path as the
 * tool names it, op the operator ("MoeTokenPermuteGrad"; NULL when the case
 * could not be read far enough to know).  Its verdict is the worst of its
 * outputs' (same < within-tolerance < different), or "error" once
 * golden_json_report_set_error() is called.  Returns 0, or -1 when memory
 * runs out.
 */
int golden_json_report_add_case(golden_json_report *r, const char *case_path, const char *op);

/* golden_json_report_set_error() marks the open case as an error with the
 * sentence that says why (a bad case, a missing output file, a backend
 * failure).  Returns 0, or -1 without an open case or memory. */
int golden_json_report_set_error(golden_json_report *r, const char *sentence);

/* golden_json_report_add_output() adds an output tensor to the open case.
 * Returns 0, or -1 without an open case or memory. */
int golden_json_report_add_output(golden_json_report *r, const golden_json_output *o);

/*
 * golden_json_report_write() writes the document to f; _write_path() to
 * path, atomically through golden_write_file_atomic(), or to standard
 * output when path is "-".  Text that is not valid UTF-8 (a case directory
 * named with odd bytes) is written with each bad byte as the visible text
 * "\xHH", so the document is always valid JSON.  Returns 0, or -1 with a
 * sentence in err.
 */
int golden_json_report_write(const golden_json_report *r, FILE *f, char *err, size_t err_len);
int golden_json_report_write_path(const golden_json_report *r, const char *path, char *err,
                                  size_t err_len);

/* golden_json_report_free() frees the collector.  NULL is a no-op. */
void golden_json_report_free(golden_json_report *r);

#endif

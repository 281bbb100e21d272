/*
 * compare.h - the judge: golden input_grad against a backend's, bit for
 * bit, and a report that tells a kernel developer where to look.
 *
 * The report is built for device bring-up: the count of differing
 * elements, the largest distance in units in the last place, the first few
 * differences with their bits, and a summary of where they lie as token and
 * column ranges ("columns 13312-15871 of every token"), which usually names
 * the kernel path at fault (a chunk edge, a tail, one core's tokens).
 */
#ifndef MOEPERM_GOLDEN_COMPARE_H
#define MOEPERM_GOLDEN_COMPARE_H

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

#include <moeperm/moeperm.h>

#include "golden/where.h"

/* How many differing elements a report lists one by one. */
#define GOLDEN_COMPARE_FIRST 8

typedef struct golden_diff {
    int64_t token, column;
    uint32_t expected, actual; /* raw bits (16 or 32 of them) */
} golden_diff;

typedef struct golden_compare_result {
    uint64_t elements;     /* compared */
    uint64_t differing;    /* elements whose bits differ (NaN-aware unless strict) */
    uint64_t nan_mismatch; /* of those, a NaN against a number */
    uint64_t max_ulp;      /* largest ULP distance among differing elements (see below) */
    golden_diff first[GOLDEN_COMPARE_FIRST];
    size_t first_count;
    char *where; /* malloc'd summary of token and column ranges, NULL if none */
    /* Of the differing elements, those where either value is a NaN or an
     * infinity: never within an ULP tolerance, however close their bits. */
    uint64_t nonfinite_differing;
    golden_where ranges; /* where, as groups of tokens and columns (where.h) */
} golden_compare_result;

/* What a comparison concludes, given an ULP tolerance. */
typedef enum golden_verdict {
    GOLDEN_VERDICT_SAME,             /* bit for bit (any NaN equals any NaN unless strict) */
    GOLDEN_VERDICT_WITHIN_TOLERANCE, /* differs, every difference finite and within max_ulp */
    GOLDEN_VERDICT_DIFFERENT         /* anything further */
} golden_verdict;

/*
 * golden_compare_verdict() judges r with a tolerance of max_ulp units in
 * the last place: SAME when nothing differs; WITHIN_TOLERANCE when
 * max_ulp > 0 and every differing element is a pair of finite values at
 * most max_ulp apart on the ordered line of golden_ulp_distance() (so +0
 * against -0 is 1 ulp, and the largest finite value against infinity is
 * never within); DIFFERENT otherwise.  With max_ulp = 0 it is SAME or
 * DIFFERENT, the bit-exact contract.  Thread safe.
 */
golden_verdict golden_compare_verdict(const golden_compare_result *r, uint64_t max_ulp);

/* "same", "within-tolerance" or "different": the names reports use. */
const char *golden_verdict_name(golden_verdict verdict);

/*
 * golden_ulp_distance() is the distance between two values of dtype on the
 * ordered integer line of the format: bits with sign s and magnitude m map
 * to m when s = 0 and to -m - 1 when s = 1, so +0 and -0 are 1 apart, the
 * largest finite value and infinity are 1 apart, and adjacent values are
 * always 1 apart.  NaNs sit beyond infinity on this line.
 */
uint64_t golden_ulp_distance(moeperm_dtype dtype, uint32_t a, uint32_t b);

/*
 * golden_compare() compares tokens*hidden elements of dtype (expected is
 * the golden input_grad).  Two NaNs are equal whatever their bits unless
 * strict_nan.  Returns 0 and fills *r, or -1 when memory runs out.  Free
 * with golden_compare_free().
 */
int golden_compare(moeperm_dtype dtype, int64_t tokens, int64_t hidden, const void *expected,
                   const void *actual, bool strict_nan, golden_compare_result *r);
void golden_compare_free(golden_compare_result *r);

/* The value of raw bits of dtype as a float (for messages). */
float golden_bits_value(moeperm_dtype dtype, uint32_t bits);

/* golden_compare_report() prints the mismatch report (nothing when equal),
 * each line starting with indent. */
void golden_compare_report(FILE *f, moeperm_dtype dtype, const golden_compare_result *r,
                           const char *indent);

/* A one-line summary ("3 of 4096 elements differ, max 1 ulp, ..."),
 * malloc'd, for JUnit failure messages. */
char *golden_compare_summary(moeperm_dtype dtype, const golden_compare_result *r);

/* ---------------------------------------------------------------------- */
/* JUnit XML                                                              */
/* ---------------------------------------------------------------------- */

typedef enum golden_outcome {
    GOLDEN_PASS,
    GOLDEN_MISMATCH, /* a <failure>: bits differ */
    GOLDEN_ERROR     /* an <error>: bad case or backend failure */
} golden_outcome;

typedef struct golden_junit golden_junit;

/* A collector of one testcase per golden case; NULL when memory runs out. */
golden_junit *golden_junit_new(const char *suite_name);
/* Adds a testcase: name is the case directory, message the summary line,
 * details the full report (may be NULL).  Returns 0 or -1 (no memory). */
int golden_junit_add(golden_junit *j, const char *name, double seconds, golden_outcome outcome,
                     const char *message, const char *details);
/* Writes the XML to path atomically.  Returns 0 or -1 with a sentence in
 * err. */
int golden_junit_write(const golden_junit *j, const char *path, char *err, size_t err_len);
void golden_junit_free(golden_junit *j);

/* Writes s into f with XML escaping, for attributes and text alike.  The
 * output is always well-formed UTF-8 of XML 1.0 characters: valid UTF-8 in
 * s passes through, while each byte of an invalid sequence and each
 * character XML 1.0 cannot carry (control characters other than tab, line
 * feed and carriage return, which become character references; DEL; U+FFFE,
 * U+FFFF) is written as a visible "\xHH" escape of its bytes. */
void golden_xml_escape(FILE *f, const char *s);

/* The length of the well-formed UTF-8 sequence at p (no overlong forms, no
 * surrogates, nothing above U+10FFFF), its code point in *cp; 0 when p does
 * not start one.  Never reads past a NUL. */
size_t golden_utf8_sequence(const unsigned char *p, uint32_t *cp);

#endif

/*
 * report_junit.c - the JUnit XML report CI systems read: one testcase per
 * golden case, written atomically, and always well-formed UTF-8 whatever
 * bytes the case directories' names hold.
 */
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include <moeperm/golden.h>

#include "golden/common/text.h"

typedef struct junit_case {
    char *name, *message, *details;
    double seconds;
    moeperm_golden_outcome outcome;
} junit_case;

struct moeperm_golden_junit {
    char *suite;
    junit_case *cases;
    size_t count, capacity;
};

moeperm_golden_junit *moeperm_golden_junit_new(const char *suite_name)
{
    moeperm_golden_junit *j = calloc(1, sizeof *j);
    if (!j)
        return NULL;
    j->suite = golden_strdup_printf("%s", suite_name);
    if (!j->suite) {
        free(j);
        return NULL;
    }
    return j;
}

int moeperm_golden_junit_add(moeperm_golden_junit *j, const char *name, double seconds, moeperm_golden_outcome outcome,
                     const char *message, const char *details)
{
    if (j->count == j->capacity) {
        size_t cap = j->capacity ? 2 * j->capacity : 32;
        junit_case *grown = realloc(j->cases, cap * sizeof *grown);
        if (!grown)
            return -1;
        j->cases = grown;
        j->capacity = cap;
    }
    junit_case *c = &j->cases[j->count];
    c->name = golden_strdup_printf("%s", name);
    c->message = golden_strdup_printf("%s", message ? message : "");
    c->details = details ? golden_strdup_printf("%s", details) : NULL;
    c->seconds = seconds;
    c->outcome = outcome;
    if (!c->name || !c->message || (details && !c->details)) {
        free(c->name);
        free(c->message);
        free(c->details);
        return -1;
    }
    j->count++;
    return 0;
}

/* The file says encoding="UTF-8", so what it holds must be well-formed
 * UTF-8 of characters XML 1.0 allows, whatever the bytes of a directory
 * name or message were.  What cannot be carried is written as a visible
 * "\xHH" per byte (lower-case hex) rather than U+FFFD, so that a CI page
 * still tells which byte of a file name was odd: each byte of an invalid
 * UTF-8 sequence, the control characters XML 1.0 forbids (and DEL, which
 * it allows but nobody can see), and U+FFFE and U+FFFF.  A literal "\x" in
 * the input passes unchanged, so the escape is for reading, not reversing. */
void moeperm_golden_xml_escape(FILE *f, const char *s)
{
    const unsigned char *p = (const unsigned char *)s;
    while (*p) {
        switch (*p) {
        case '&':
            fputs("&amp;", f);
            p++;
            continue;
        case '<':
            fputs("&lt;", f);
            p++;
            continue;
        case '>':
            fputs("&gt;", f);
            p++;
            continue;
        case '"':
            fputs("&quot;", f);
            p++;
            continue;
        case '\'':
            fputs("&apos;", f);
            p++;
            continue;
        case '\n':
            fputs("&#10;", f);
            p++;
            continue;
        case '\t':
            fputs("&#9;", f);
            p++;
            continue;
        case '\r':
            /* A raw CR would be read back as a line feed. */
            fputs("&#13;", f);
            p++;
            continue;
        default:
            break;
        }
        uint32_t cp;
        size_t n = golden_utf8_sequence(p, SIZE_MAX, &cp);
        if (n == 0 || cp < 0x20 || cp == 0x7f || cp == 0xfffe || cp == 0xffff) {
            for (size_t i = 0; i < (n ? n : 1); i++)
                fprintf(f, "\\x%02x", p[i]);
            p += n ? n : 1;
            continue;
        }
        fwrite(p, 1, n, f);
        p += n;
    }
}

int moeperm_golden_junit_write(const moeperm_golden_junit *j, const char *path, char *err, size_t err_len)
{
    char *text = NULL;
    size_t size = 0;
    FILE *f = open_memstream(&text, &size);
    if (!f) {
        snprintf(err, err_len, "out of memory writing %s", path);
        return -1;
    }
    size_t failures = 0, errors = 0, skipped = 0;
    double total = 0;
    for (size_t i = 0; i < j->count; i++) {
        failures += j->cases[i].outcome == MOEPERM_GOLDEN_MISMATCH;
        errors += j->cases[i].outcome == MOEPERM_GOLDEN_ERROR;
        skipped += j->cases[i].outcome == MOEPERM_GOLDEN_SKIPPED;
        total += j->cases[i].seconds;
    }
    fputs("<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n<testsuites>\n  <testsuite name=\"", f);
    moeperm_golden_xml_escape(f, j->suite);
    fprintf(f, "\" tests=\"%zu\" failures=\"%zu\" errors=\"%zu\"", j->count, failures, errors);
    /* Only a report that skipped something says so: the others stay as
     * they were. */
    if (skipped)
        fprintf(f, " skipped=\"%zu\"", skipped);
    fprintf(f, " time=\"%.3f\">\n", total);
    for (size_t i = 0; i < j->count; i++) {
        const junit_case *c = &j->cases[i];
        /* classname is the suite directory, name the case, as CI tools group
         * testcases by classname. */
        const char *slash = strrchr(c->name, '/');
        fputs("    <testcase classname=\"", f);
        if (slash) {
            char *cls = golden_strdup_printf("%.*s", (int)(slash - c->name), c->name);
            moeperm_golden_xml_escape(f, cls ? cls : "");
            free(cls);
        } else {
            moeperm_golden_xml_escape(f, j->suite);
        }
        fputs("\" name=\"", f);
        moeperm_golden_xml_escape(f, slash ? slash + 1 : c->name);
        fprintf(f, "\" time=\"%.3f\"", c->seconds);
        if (c->outcome == MOEPERM_GOLDEN_PASS) {
            fputs("/>\n", f);
            continue;
        }
        if (c->outcome == MOEPERM_GOLDEN_SKIPPED) {
            fputs(">\n      <skipped message=\"", f);
            moeperm_golden_xml_escape(f, c->message);
            fputs("\"/>\n    </testcase>\n", f);
            continue;
        }
        const char *tag = c->outcome == MOEPERM_GOLDEN_MISMATCH ? "failure" : "error";
        fprintf(f, ">\n      <%s message=\"", tag);
        moeperm_golden_xml_escape(f, c->message);
        fprintf(f, "\" type=\"%s\">", c->outcome == MOEPERM_GOLDEN_MISMATCH ? "mismatch" : "error");
        moeperm_golden_xml_escape(f, c->details ? c->details : c->message);
        fprintf(f, "</%s>\n    </testcase>\n", tag);
    }
    fputs("  </testsuite>\n</testsuites>\n", f);
    if (fclose(f) != 0) {
        free(text);
        snprintf(err, err_len, "out of memory writing %s", path);
        return -1;
    }
    int rc = moeperm_golden_write_file_atomic(path, text, size, err, err_len);
    free(text);
    return rc;
}

void moeperm_golden_junit_free(moeperm_golden_junit *j)
{
    if (!j)
        return;
    for (size_t i = 0; i < j->count; i++) {
        free(j->cases[i].name);
        free(j->cases[i].message);
        free(j->cases[i].details);
    }
    free(j->cases);
    free(j->suite);
    free(j);
}

/*
 * json_strict.h - a syntax check of JSON text against RFC 8259, run before
 * json-c sees a manifest.
 *
 * json-c, even with JSON_TOKENER_STRICT, accepts text that is not JSON
 * (single-quoted keys, raw control characters in strings, "00", NaN,
 * "1.") and cuts a string at an escaped NUL, so a manifest could say one
 * thing to moeperm and another to every other JSON reader.  This checker
 * accepts exactly the RFC 8259 grammar, minus what no manifest needs and
 * what readers disagree on (see golden_json_check_strict()).
 */
#ifndef MOEPERM_GOLDEN_CASE_JSON_STRICT_H
#define MOEPERM_GOLDEN_CASE_JSON_STRICT_H

#include <stddef.h>

/* The deepest nesting of objects and arrays accepted: json-c's own limit. */
#define GOLDEN_JSON_MAX_DEPTH 32

/*
 * golden_json_check_strict() checks that the len bytes at text are one
 * JSON text (RFC 8259): one value with white space (space, tab, line feed,
 * carriage return) around it and nothing else.  Refused besides what the
 * grammar refuses: a byte order mark, a string holding \u0000 or an
 * unpaired surrogate escape, bytes that are not UTF-8, an object that
 * names one key twice (after escapes are decoded), nesting deeper than
 * GOLDEN_JSON_MAX_DEPTH.  Returns 0, or -1 with one sentence in err that
 * starts "not valid JSON" and names the line, column and byte offset of the
 * fault and what is wrong there.  Reentrant; allocates only to compare the
 * keys of an object.
 */
int golden_json_check_strict(const char *text, size_t len, char *err, size_t err_len);

#endif

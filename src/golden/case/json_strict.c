/*
 * json_strict.c - RFC 8259 syntax, checked by recursive descent over the
 * bytes, with a message that says what a lenient parser would have let
 * through (a comment, single quotes, a trailing comma, NaN ...), so that a
 * person fixing a hand-edited manifest knows what to change.
 */
#include "golden/case/json_strict.h"

#include <stdarg.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "golden/common/text.h"

typedef struct parser {
    const unsigned char *text;
    size_t len, pos;
    int depth;
    char *err;
    size_t err_len;
} parser;

static int fail_at(parser *p, size_t at, const char *format, ...)
    __attribute__((format(printf, 3, 4)));

static int fail_at(parser *p, size_t at, const char *format, ...)
{
    size_t line = 1, column = 1;
    for (size_t i = 0; i < at && i < p->len; i++) {
        column++;
        if (p->text[i] == '\n') {
            line++;
            column = 1;
        }
    }
    char what[256];
    va_list ap;
    va_start(ap, format);
    vsnprintf(what, sizeof what, format, ap);
    va_end(ap);
    snprintf(p->err, p->err_len, "not valid JSON at line %zu, column %zu (byte %zu): %s", line,
             column, at, what);
    return -1;
}

static bool is_space(unsigned char c)
{
    return c == ' ' || c == '\t' || c == '\n' || c == '\r';
}

static void skip_space(parser *p)
{
    while (p->pos < p->len && is_space(p->text[p->pos]))
        p->pos++;
}

static bool is_alpha(unsigned char c)
{
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z');
}

static bool is_digit(unsigned char c)
{
    return c >= '0' && c <= '9';
}

/* ASCII only: strncasecmp() would follow the locale. */
static bool same_ignoring_case(const unsigned char *s, const char *word, size_t n)
{
    for (size_t i = 0; i < n; i++)
        if ((s[i] | 0x20) != (unsigned char)word[i])
            return false;
    return true;
}

/* The message for whatever stands at pos where `expected` should: the
 * lenient forms are named, everything else is quoted. */
static int unexpected(parser *p, const char *expected)
{
    size_t at = p->pos;
    if (at >= p->len)
        return fail_at(p, at, "the text ends where %s is expected", expected);
    const unsigned char *s = p->text + at;
    size_t left = p->len - at;
    if (s[0] == '/' && left > 1 && (s[1] == '/' || s[1] == '*'))
        return fail_at(p, at, "a comment (%s); JSON has no comments", s[1] == '/' ? "//" : "/*");
    if (s[0] == '\'')
        return fail_at(p, at, "a single quote; JSON strings and keys take double quotes");
    if (s[0] == '+')
        return fail_at(p, at, "a number starting with +; JSON numbers have no plus sign");
    if (s[0] == '.')
        return fail_at(p, at, "a number starting with '.'; JSON needs a digit before the point");
    if (left >= 3 && memcmp(s, "\xef\xbb\xbf", 3) == 0)
        return fail_at(p, at, "a byte order mark; a JSON text has none");
    if (is_alpha(s[0])) {
        size_t n = 0;
        while (n < left && n < 40 && (is_alpha(s[n]) || is_digit(s[n])))
            n++;
        static const char *const literals[] = {"true", "false", "null"};
        for (int i = 0; i < 3; i++)
            if (n == strlen(literals[i]) && same_ignoring_case(s, literals[i], n) &&
                memcmp(s, literals[i], n) != 0)
                return fail_at(p, at, "\"%.*s\"; the JSON literal is %s, in lower case", (int)n,
                               (const char *)s, literals[i]);
        if ((n == 3 && (same_ignoring_case(s, "nan", 3) || same_ignoring_case(s, "inf", 3))) ||
            (n == 8 && same_ignoring_case(s, "infinity", 8)))
            return fail_at(p, at, "%.*s, which is not a JSON number", (int)n, (const char *)s);
        return fail_at(p, at, "the word \"%.*s\" where %s is expected", (int)n, (const char *)s,
                       expected);
    }
    if (s[0] < 0x20 || s[0] >= 0x7f)
        return fail_at(p, at, "the byte 0x%02x where %s is expected", s[0], expected);
    return fail_at(p, at, "'%c' where %s is expected", s[0], expected);
}

/* The bytes of a number-like token at `at`, quoted in messages. */
static void token_text(const parser *p, size_t at, char *buf, size_t size)
{
    size_t n = 0;
    while (at + n < p->len && n + 1 < size &&
           (is_alpha(p->text[at + n]) || is_digit(p->text[at + n]) ||
            (p->text[at + n] != '\0' && strchr("+-.", p->text[at + n]))))
        n++;
    memcpy(buf, p->text + at, n);
    buf[n] = '\0';
}

static int number(parser *p)
{
    const unsigned char *t = p->text;
    size_t start = p->pos;
    char quoted[32];
    token_text(p, start, quoted, sizeof quoted);
    if (t[p->pos] == '-') {
        p->pos++;
        if (p->pos < p->len && is_alpha(t[p->pos]))
            return fail_at(p, start, "%s, which is not a JSON number", quoted);
        if (p->pos >= p->len || !is_digit(t[p->pos]))
            return fail_at(p, start, "'-' not followed by a digit");
    }
    if (t[p->pos] == '0') {
        p->pos++;
        if (p->pos < p->len && is_digit(t[p->pos]))
            return fail_at(p, start, "the number %s has a leading zero; JSON numbers have none",
                           quoted);
        if (p->pos < p->len && (t[p->pos] | 0x20) == 'x')
            return fail_at(p, start, "the hexadecimal number %s; JSON numbers are decimal",
                           quoted);
    } else {
        while (p->pos < p->len && is_digit(t[p->pos]))
            p->pos++;
    }
    if (p->pos < p->len && t[p->pos] == '.') {
        p->pos++;
        if (p->pos >= p->len || !is_digit(t[p->pos]))
            return fail_at(p, start, "the number %s has no digit after its decimal point",
                           quoted);
        while (p->pos < p->len && is_digit(t[p->pos]))
            p->pos++;
    }
    if (p->pos < p->len && (t[p->pos] | 0x20) == 'e') {
        p->pos++;
        if (p->pos < p->len && (t[p->pos] == '+' || t[p->pos] == '-'))
            p->pos++;
        if (p->pos >= p->len || !is_digit(t[p->pos]))
            return fail_at(p, start, "the number %s has an exponent without digits", quoted);
        while (p->pos < p->len && is_digit(t[p->pos]))
            p->pos++;
    }
    return 0;
}

static unsigned hex_digit(unsigned char c)
{
    if (is_digit(c))
        return (unsigned)(c - '0');
    c |= 0x20;
    return c >= 'a' && c <= 'f' ? (unsigned)(c - 'a' + 10) : 16;
}

/* The four hexadecimal digits at s; 0x10000 or more if they are not. */
static unsigned hex4_at(const unsigned char *s)
{
    unsigned v = 0;
    for (size_t i = 0; i < 4; i++) {
        unsigned d = hex_digit(s[i]);
        if (d == 16)
            return 0x10000;
        v = v << 4 | d;
    }
    return v;
}

static bool hex4(const parser *p, size_t at, unsigned *value)
{
    if (p->len < 4 || at > p->len - 4)
        return false;
    *value = hex4_at(p->text + at);
    return *value < 0x10000;
}

/* The string whose opening quote is at pos; pos ends past its closing one. */
static int string(parser *p)
{
    const unsigned char *t = p->text;
    size_t start = p->pos++;
    for (;;) {
        if (p->pos >= p->len)
            return fail_at(p, start, "a string that is never closed");
        unsigned char c = t[p->pos];
        if (c == '"') {
            p->pos++;
            return 0;
        }
        if (c < 0x20)
            return fail_at(p, p->pos, "the control character 0x%02x inside a string; JSON "
                           "writes it as an escape (\\n, \\t, \\u00XX)", c);
        if (c >= 0x80) {
            uint32_t cp;
            size_t n = golden_utf8_sequence(t + p->pos, p->len - p->pos, &cp);
            if (n == 0)
                return fail_at(p, p->pos, "the byte 0x%02x inside a string is not UTF-8", c);
            p->pos += n;
            continue;
        }
        if (c != '\\') {
            p->pos++;
            continue;
        }
        size_t at = p->pos;
        if (at + 1 >= p->len)
            return fail_at(p, start, "a string that is never closed");
        unsigned char e = t[at + 1];
        if (e != 'u') {
            if (!strchr("\"\\/bfnrt", e) || e == '\0')
                return fail_at(p, at, "the escape \\%c; JSON has only \\\" \\\\ \\/ \\b \\f \\n "
                               "\\r \\t and \\uXXXX", e >= 0x20 && e < 0x7f ? e : '?');
            p->pos += 2;
            continue;
        }
        unsigned v, low;
        if (!hex4(p, at + 2, &v))
            return fail_at(p, at, "\\u not followed by four hexadecimal digits");
        if (v == 0)
            return fail_at(p, at, "\\u0000 inside a string; a NUL would cut the string short "
                           "for C readers, so no manifest string may hold one");
        p->pos = at + 6;
        if (v >= 0xdc00 && v <= 0xdfff)
            return fail_at(p, at, "the unpaired surrogate \\u%04x", v);
        if (v >= 0xd800 && v <= 0xdbff) {
            if (p->pos + 1 >= p->len || t[p->pos] != '\\' || t[p->pos + 1] != 'u' ||
                !hex4(p, p->pos + 2, &low) || low < 0xdc00 || low > 0xdfff)
                return fail_at(p, at, "the unpaired surrogate \\u%04x", v);
            p->pos += 6;
        }
    }
}

/* The bytes a checked string stands for: s is its text between the quotes
 * (n bytes).  Malloc'd, *size bytes; NULL when memory runs out. */
static unsigned char *decode(const unsigned char *s, size_t n, size_t *size)
{
    /* No escape decodes to more bytes than it is written with. */
    unsigned char *out = malloc(n + 1), *o = out;
    if (!out)
        return NULL;
    for (size_t i = 0; i < n;) {
        if (s[i] != '\\') {
            *o++ = s[i++];
            continue;
        }
        unsigned char e = s[i + 1];
        if (e != 'u') {
            static const char from[] = "\"\\/bfnrt", to[] = "\"\\/\b\f\n\r\t";
            *o++ = (unsigned char)to[strchr(from, e) - from];
            i += 2;
            continue;
        }
        unsigned long v = hex4_at(s + i + 2);
        i += 6;
        if (v >= 0xd800 && v <= 0xdbff) {
            v = 0x10000 + ((v - 0xd800) << 10) + (hex4_at(s + i + 2) - 0xdc00);
            i += 6;
        }
        if (v < 0x80) {
            *o++ = (unsigned char)v;
        } else if (v < 0x800) {
            *o++ = (unsigned char)(0xc0 | v >> 6);
            *o++ = (unsigned char)(0x80 | (v & 0x3f));
        } else if (v < 0x10000) {
            *o++ = (unsigned char)(0xe0 | v >> 12);
            *o++ = (unsigned char)(0x80 | (v >> 6 & 0x3f));
            *o++ = (unsigned char)(0x80 | (v & 0x3f));
        } else {
            *o++ = (unsigned char)(0xf0 | v >> 18);
            *o++ = (unsigned char)(0x80 | (v >> 12 & 0x3f));
            *o++ = (unsigned char)(0x80 | (v >> 6 & 0x3f));
            *o++ = (unsigned char)(0x80 | (v & 0x3f));
        }
    }
    *size = (size_t)(o - out);
    return out;
}

typedef struct key {
    size_t at, len;      /* the key's text between its quotes */
    unsigned char *name; /* decoded */
    size_t size;
} key;

static int compare_keys(const void *a, const void *b)
{
    const key *x = a, *y = b;
    int c = memcmp(x->name, y->name, x->size < y->size ? x->size : y->size);
    if (c != 0)
        return c;
    return x->size < y->size ? -1 : x->size > y->size ? 1 : x->at < y->at ? -1 : 1;
}

/* json-c keeps the last of two equal keys, other readers the first: a
 * manifest that names a key twice means different things to each. */
static int duplicate_keys(parser *p, key *keys, size_t n)
{
    int rc = 0;
    size_t decoded = 0;
    for (; decoded < n; decoded++) {
        keys[decoded].name = decode(p->text + keys[decoded].at, keys[decoded].len,
                                    &keys[decoded].size);
        if (!keys[decoded].name) {
            rc = fail_at(p, keys[decoded].at, "out of memory comparing the keys of an object");
            break;
        }
    }
    if (rc == 0 && n > 1) {
        qsort(keys, n, sizeof *keys, compare_keys);
        for (size_t i = 1; i < n && rc == 0; i++)
            if (keys[i].size == keys[i - 1].size &&
                memcmp(keys[i].name, keys[i - 1].name, keys[i].size) == 0)
                rc = fail_at(p, keys[i].at - 1, "the key \"%.*s\" a second time in one object",
                             keys[i].len > 64 ? 64 : (int)keys[i].len,
                             (const char *)p->text + keys[i].at);
    }
    for (size_t i = 0; i < decoded; i++)
        free(keys[i].name);
    return rc;
}

static int value(parser *p);

/* After a ',': the next member or element, unless the comma was the last
 * thing before `close`. */
static int after_comma(parser *p, char close)
{
    size_t comma = p->pos++;
    skip_space(p);
    if (p->pos < p->len && p->text[p->pos] == (unsigned char)close)
        return fail_at(p, comma, "a comma before '%c'; JSON has no trailing commas", close);
    return 0;
}

static int array(parser *p)
{
    p->pos++;
    skip_space(p);
    if (p->pos < p->len && p->text[p->pos] == ']') {
        p->pos++;
        return 0;
    }
    for (;;) {
        if (value(p) != 0)
            return -1;
        skip_space(p);
        if (p->pos < p->len && p->text[p->pos] == ',') {
            if (after_comma(p, ']') != 0)
                return -1;
            continue;
        }
        if (p->pos < p->len && p->text[p->pos] == ']') {
            p->pos++;
            return 0;
        }
        return unexpected(p, "',' or ']'");
    }
}

static int object(parser *p)
{
    key *keys = NULL;
    size_t n = 0, capacity = 0;
    int rc = -1;
    p->pos++;
    skip_space(p);
    if (p->pos < p->len && p->text[p->pos] == '}') {
        p->pos++;
        return 0;
    }
    for (;;) {
        skip_space(p);
        if (p->pos >= p->len || p->text[p->pos] != '"') {
            unexpected(p, "a key in double quotes");
            goto done;
        }
        size_t at = p->pos;
        if (string(p) != 0)
            goto done;
        if (n == capacity) {
            capacity = capacity ? 2 * capacity : 16;
            key *grown = realloc(keys, capacity * sizeof *grown);
            if (!grown) {
                fail_at(p, at, "out of memory reading the keys of an object");
                goto done;
            }
            keys = grown;
        }
        keys[n++] = (key){at + 1, p->pos - at - 2, NULL, 0};
        skip_space(p);
        if (p->pos >= p->len || p->text[p->pos] != ':') {
            unexpected(p, "':' after the key");
            goto done;
        }
        p->pos++;
        if (value(p) != 0)
            goto done;
        skip_space(p);
        if (p->pos < p->len && p->text[p->pos] == ',') {
            if (after_comma(p, '}') != 0)
                goto done;
            continue;
        }
        if (p->pos < p->len && p->text[p->pos] == '}') {
            p->pos++;
            break;
        }
        unexpected(p, "',' or '}'");
        goto done;
    }
    rc = duplicate_keys(p, keys, n);
done:
    free(keys);
    return rc;
}

static int literal(parser *p, const char *word)
{
    size_t n = strlen(word);
    const unsigned char *s = p->text + p->pos;
    size_t left = p->len - p->pos;
    if (left >= n && memcmp(s, word, n) == 0 &&
        !(left > n && (is_alpha(s[n]) || is_digit(s[n])))) {
        p->pos += n;
        return 0;
    }
    return unexpected(p, "a value");
}

static int value(parser *p)
{
    skip_space(p);
    if (p->pos >= p->len)
        return unexpected(p, "a value");
    unsigned char c = p->text[p->pos];
    if (c == '{' || c == '[') {
        if (p->depth == GOLDEN_JSON_MAX_DEPTH)
            return fail_at(p, p->pos, "objects and arrays nested deeper than %d levels",
                           GOLDEN_JSON_MAX_DEPTH);
        p->depth++;
        int rc = c == '{' ? object(p) : array(p);
        p->depth--;
        return rc;
    }
    if (c == '"')
        return string(p);
    if (c == '-' || is_digit(c))
        return number(p);
    if (c == 't')
        return literal(p, "true");
    if (c == 'f')
        return literal(p, "false");
    if (c == 'n')
        return literal(p, "null");
    return unexpected(p, "a value");
}

int golden_json_check_strict(const char *text, size_t len, char *err, size_t err_len)
{
    parser p = {(const unsigned char *)text, len, 0, 0, err, err_len};
    if (value(&p) != 0)
        return -1;
    skip_space(&p);
    if (p.pos == len)
        return 0;
    if (p.text[p.pos] == '/' && p.pos + 1 < len &&
        (p.text[p.pos + 1] == '/' || p.text[p.pos + 1] == '*'))
        return unexpected(&p, "the end of the text");
    size_t first = 0;
    while (first < len && is_space(p.text[first]))
        first++;
    return fail_at(&p, p.pos, "unexpected text after the JSON %s",
                   p.text[first] == '{' ? "object" : "value");
}

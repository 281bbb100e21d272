/*
 * text.h - strings every room of libmoeperm-golden builds or checks:
 * formatted strings on the heap, and UTF-8 sequences (the manifest checker
 * refuses what is not UTF-8, the reports escape it).
 */
#ifndef MOEPERM_GOLDEN_COMMON_TEXT_H
#define MOEPERM_GOLDEN_COMMON_TEXT_H

#include <stddef.h>
#include <stdint.h>

/* snprintf into a malloc'd string; NULL when memory runs out. */
char *golden_strdup_printf(const char *format, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 1, 2)))
#endif
    ;

/* The length of the well-formed UTF-8 sequence at p (Unicode Table 3-7: no
 * overlong forms, no surrogates, nothing above U+10FFFF), its code point in
 * *cp; 0 when p does not start one.  It reads at most left bytes and never
 * past a NUL (no sequence holds one, so a NUL ends a truncated sequence
 * like any other byte outside its continuation range): pass SIZE_MAX for a
 * NUL-terminated string. */
size_t golden_utf8_sequence(const unsigned char *p, size_t left, uint32_t *cp);

/* The offset of the first byte of the NUL-terminated s that starts no
 * well-formed UTF-8 sequence, or SIZE_MAX when s is all UTF-8: what a
 * writer checks before text goes where the strict reader wants UTF-8. */
size_t golden_utf8_invalid_at(const char *s);

#endif

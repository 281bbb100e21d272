/*
 * text.c - formatted strings on the heap and the UTF-8 decoder the
 * manifest checker and the reports share.
 */
#include "golden/common/text.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>

char *golden_strdup_printf(const char *format, ...)
{
    va_list ap;
    va_start(ap, format);
    int n = vsnprintf(NULL, 0, format, ap);
    va_end(ap);
    if (n < 0)
        return NULL;
    char *s = malloc((size_t)n + 1);
    if (!s)
        return NULL;
    va_start(ap, format);
    vsnprintf(s, (size_t)n + 1, format, ap);
    va_end(ap);
    return s;
}

size_t golden_utf8_sequence(const unsigned char *p, size_t left, uint32_t *cp)
{
    if (left == 0)
        return 0;
    unsigned char b = p[0];
    size_t n;
    unsigned char lo = 0x80, hi = 0xbf; /* range of the second byte */
    if (b < 0x80) {
        *cp = b;
        return 1;
    }
    if (b >= 0xc2 && b <= 0xdf) {
        n = 2;
        *cp = b & 0x1f;
    } else if (b >= 0xe0 && b <= 0xef) {
        n = 3;
        *cp = b & 0x0f;
        if (b == 0xe0)
            lo = 0xa0;
        else if (b == 0xed)
            hi = 0x9f;
    } else if (b >= 0xf0 && b <= 0xf4) {
        n = 4;
        *cp = b & 0x07;
        if (b == 0xf0)
            lo = 0x90;
        else if (b == 0xf4)
            hi = 0x8f;
    } else {
        return 0;
    }
    if (left < n)
        return 0;
    for (size_t i = 1; i < n; i++) {
        if (p[i] < (i == 1 ? lo : 0x80) || p[i] > (i == 1 ? hi : 0xbf))
            return 0;
        *cp = *cp << 6 | (p[i] & 0x3f);
    }
    return n;
}

size_t golden_utf8_invalid_at(const char *s)
{
    const unsigned char *p = (const unsigned char *)s;
    size_t i = 0;
    uint32_t cp;
    while (p[i]) {
        size_t n = golden_utf8_sequence(p + i, SIZE_MAX, &cp);
        if (n == 0)
            return i;
        i += n;
    }
    return SIZE_MAX;
}

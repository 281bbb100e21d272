/*
 * x86/copy_template.h - the copy of a row past the caches, for one
 * instruction set: MoeTokenPermute's copies of the token rows, which
 * nobody reads soon.
 *
 * isa_template.h includes this once per instruction set, after the
 * primitives, of which it uses stream_line() (one 64-byte line to an
 * aligned destination with non-temporal stores).
 */

/* memcpy(dst, src, bytes), the whole 64-byte lines of dst written with
 * non-temporal stores, which skip the read for ownership of each line
 * (the caller fences); the partial lines at either end go through
 * memcpy(). */
static ATTRIBUTES void stream_copy(void *dst, const void *src, size_t bytes)
{
    char *to = dst;
    const char *from = src;
    size_t head = (64u - ((uintptr_t)to & 63u)) & 63u;
    head = head < bytes ? head : bytes;
    memcpy(to, from, head);
    size_t i = head;
    for (; i + 64 <= bytes; i += 64)
        stream_line(to + i, from + i);
    memcpy(to + i, from + i, bytes - i);
}

static ATTRIBUTES void fence(void)
{
    _mm_sfence();
}

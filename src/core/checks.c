/*
 * checks.c - the first-phase checks every operator shares (checks.h), each
 * with the aclnn status and a sentence that names the offending value.
 *
 * The kernels are written to stay in bounds whatever the indices hold
 * (they are the caller's memory and may change before the run); these
 * checks are what makes the result defined.
 */
#include <stdlib.h>
#include <string.h>

#include "core/checks.h"

/* Elements addressed by a view, or 0 when a dim is 0. */
static int64_t element_count(const moeperm_tensor *t)
{
    int64_t count = 1;
    for (uint64_t i = 0; i < t->ndim; i++) {
        if (t->dims[i] == 0)
            return 0;
        if (count > INT64_MAX / t->dims[i])
            return INT64_MAX;
        count *= t->dims[i];
    }
    return count;
}

/* The byte range [*lo, *hi) a non-empty view touches, relative to its data
 * pointer.  Fails when the range does not fit in 63 bits. */
static moeperm_status byte_span(const moeperm_tensor *t, const char *what, int64_t *lo, int64_t *hi)
{
    int64_t last = t->offset;
    for (uint64_t i = 0; i < t->ndim; i++) {
        int64_t extent;
        if (__builtin_mul_overflow(t->dims[i] - 1, t->strides[i], &extent) ||
            __builtin_add_overflow(last, extent, &last))
            return moeperm_fail(MOEPERM_ERR_PARAM_INVALID,
                                "%s: dims[%llu] = %lld with strides[%llu] = %lld reach past "
                                "2^63 elements",
                                what, (unsigned long long)i, (long long)t->dims[i],
                                (unsigned long long)i, (long long)t->strides[i]);
    }
    int64_t size = (int64_t)moeperm_dtype_size(t->dtype), end;
    if (__builtin_mul_overflow(t->offset, size, lo) || __builtin_add_overflow(last, 1, &end) ||
        __builtin_mul_overflow(end, size, hi) || (uint64_t)*hi > (uint64_t)SIZE_MAX)
        return moeperm_fail(MOEPERM_ERR_PARAM_INVALID,
                            "%s spans elements %lld (offset) to %lld of %lld bytes each, more "
                            "bytes than memory holds",
                            what, (long long)t->offset, (long long)last, (long long)size);
    return MOEPERM_SUCCESS;
}

static moeperm_status check_data(const moeperm_tensor *t, const char *what)
{
    int64_t count = element_count(t);
    if (count > 0 && !t->data)
        return moeperm_fail(MOEPERM_ERR_PARAM_NULLPTR,
                            "%s has %lld elements but its data pointer is NULL", what,
                            (long long)count);
    return MOEPERM_SUCCESS;
}

/* Whether two distinct elements of the 2-D view out share memory.  The test
 * is the usual sufficient one (the inner dim packs inside one step of the
 * outer dim); exotic interleavings that do not overlap are refused too. */
static bool overlaps_itself(const moeperm_tensor *out)
{
    int64_t d0 = out->dims[0], d1 = out->dims[1];
    int64_t s0 = out->strides[0], s1 = out->strides[1];
    if (d0 <= 1 && d1 <= 1)
        return false;
    if (d0 <= 1)
        return s1 == 0;
    if (d1 <= 1)
        return s0 == 0;
    if (s1 <= s0)
        return s1 == 0 || s0 < (d1 - 1) * s1 + 1;
    return s0 == 0 || s1 < (d0 - 1) * s0 + 1;
}

/* Indices walked side by side by valid_permutation(). */
#define INDEX_WALKS 8

/* Whether the n indices are a permutation of [0, n): all below n (a
 * negative one, read as unsigned, is too large) and, marked in the zeroed
 * bitmap `seen`, n distinct bits set.  INDEX_WALKS stretches of the indices
 * are walked side by side: neighbouring indices often share a bitmap word
 * (identity or expert-sorted orders), and each update of a word waits for
 * the one before it, so a single walk stalls on every index.  This is the
 * cost of validating a call with a small hidden size (docs/performance.md). */
static bool valid_permutation(const int32_t *base, int64_t stride, int64_t n, uint64_t *seen)
{
    int64_t walk = n / INDEX_WALKS;
    for (int64_t i = 0; i < walk; i++)
        for (int64_t w = 0; w < INDEX_WALKS; w++) {
            uint32_t value = (uint32_t)base[(w * walk + i) * stride];
            if (value >= (uint64_t)n)
                return false;
            seen[value >> 6] |= UINT64_C(1) << (value & 63);
        }
    for (int64_t i = INDEX_WALKS * walk; i < n; i++) {
        uint32_t value = (uint32_t)base[i * stride];
        if (value >= (uint64_t)n)
            return false;
        seen[value >> 6] |= UINT64_C(1) << (value & 63);
    }
    int64_t set = 0;
    for (int64_t word = 0; word < (n + 63) / 64; word++)
        set += __builtin_popcountll(seen[word]);
    return set == n;
}

/* Range and uniqueness with a bitmap of the values seen: the fast test
 * above, then, only when it fails, a walk in order that stops at the first
 * bad position to name it (and the earlier position of a repeated value). */
static moeperm_status check_indices(const moeperm_tensor *indices)
{
    int64_t n = indices->dims[0];
    if (n == 0)
        return MOEPERM_SUCCESS;
    const int32_t *base = (const int32_t *)indices->data + indices->offset;
    int64_t stride = indices->strides[0];
    size_t words = (size_t)(n + 63) / 64;
    uint64_t *seen = calloc(words, sizeof *seen);
    if (!seen)
        return moeperm_fail(MOEPERM_ERR_INNER,
                            "out of memory allocating %lld bytes to check sorted_indices",
                            (long long)(words * 8));
    if (valid_permutation(base, stride, n, seen)) {
        free(seen);
        return MOEPERM_SUCCESS;
    }
    memset(seen, 0, words * sizeof *seen);

    moeperm_status status = MOEPERM_SUCCESS;
    for (int64_t i = 0; i < n; i++) {
        int32_t value = base[i * stride];
        if (value < 0 || value >= n) {
            status = moeperm_fail(MOEPERM_ERR_PARAM_INVALID,
                                  "sorted_indices[%lld] = %d is outside [0, %lld]", (long long)i,
                                  value, (long long)(n - 1));
            break;
        }
        uint64_t bit = UINT64_C(1) << (value & 63);
        if (seen[value >> 6] & bit) {
            int64_t first = 0;
            while (base[first * stride] != value)
                first++;
            status = moeperm_fail(MOEPERM_ERR_PARAM_INVALID,
                                  "sorted_indices[%lld] = %d repeats sorted_indices[%lld]",
                                  (long long)i, value, (long long)first);
            break;
        }
        seen[value >> 6] |= bit;
    }
    free(seen);
    return status;
}

moeperm_status moeperm_check_float_dtype(const moeperm_tensor *t, const char *what)
{
    if (t->dtype == MOEPERM_FLOAT || t->dtype == MOEPERM_FLOAT16 || t->dtype == MOEPERM_BF16)
        return MOEPERM_SUCCESS;
    return moeperm_fail(MOEPERM_ERR_PARAM_INVALID,
                        "%s dtype %d (%s) is not FLOAT (0), FLOAT16 (1) or BF16 (27)", what,
                        (int)t->dtype, moeperm_dtype_name(t->dtype));
}

moeperm_status moeperm_check_ndim(const moeperm_tensor *t, const char *what, uint64_t ndim,
                                  const char *layout)
{
    if (t->ndim == ndim)
        return MOEPERM_SUCCESS;
    return moeperm_fail(MOEPERM_ERR_PARAM_INVALID, "%s has %llu dims; it must have %llu (%s)",
                        what, (unsigned long long)t->ndim, (unsigned long long)ndim, layout);
}


/* ---- views and memory -------------------------------------------------- */

int64_t moeperm_view_elements(const moeperm_tensor *t)
{
    return element_count(t);
}

moeperm_status moeperm_check_same_dtype(const moeperm_tensor *t, const char *what,
                                        const moeperm_tensor *like, const char *like_what)
{
    if (t->dtype == like->dtype)
        return MOEPERM_SUCCESS;
    return moeperm_fail(MOEPERM_ERR_PARAM_INVALID, "%s dtype %d (%s) differs from %s dtype %d (%s)",
                        what, (int)t->dtype, moeperm_dtype_name(t->dtype), like_what,
                        (int)like->dtype, moeperm_dtype_name(like->dtype));
}

moeperm_status moeperm_check_int32(const moeperm_tensor *t, const char *what)
{
    if (t->dtype == MOEPERM_INT32)
        return MOEPERM_SUCCESS;
    return moeperm_fail(MOEPERM_ERR_PARAM_INVALID, "%s dtype %d (%s) is not INT32 (3)", what,
                        (int)t->dtype, moeperm_dtype_name(t->dtype));
}

moeperm_status moeperm_check_view(const moeperm_tensor *t, const char *what)
{
    moeperm_status status = check_data(t, what);
    int64_t lo, hi;
    if (status == MOEPERM_SUCCESS && element_count(t) > 0)
        status = byte_span(t, what, &lo, &hi);
    return status;
}

moeperm_status moeperm_check_no_self_overlap(const moeperm_tensor *out, const char *what)
{
    if (element_count(out) == 0)
        return MOEPERM_SUCCESS;
    if (out->ndim == 1) {
        if (out->dims[0] > 1 && out->strides[0] == 0)
            return moeperm_fail(MOEPERM_ERR_PARAM_INVALID,
                                "%s stride 0 makes its %lld elements share memory", what,
                                (long long)out->dims[0]);
        return MOEPERM_SUCCESS;
    }
    if (overlaps_itself(out))
        return moeperm_fail(MOEPERM_ERR_PARAM_INVALID,
                            "%s strides [%lld, %lld] make distinct elements share memory", what,
                            (long long)out->strides[0], (long long)out->strides[1]);
    return MOEPERM_SUCCESS;
}

moeperm_status moeperm_check_disjoint(const moeperm_tensor *out, const char *out_name,
                                      const moeperm_tensor *other, const char *other_name)
{
    int64_t out_lo, out_hi, other_lo, other_hi;
    moeperm_status status;
    if (element_count(out) == 0 || element_count(other) == 0)
        return MOEPERM_SUCCESS;
    if ((status = byte_span(out, out_name, &out_lo, &out_hi)) != MOEPERM_SUCCESS ||
        (status = byte_span(other, other_name, &other_lo, &other_hi)) != MOEPERM_SUCCESS)
        return status;
    uintptr_t a = (uintptr_t)out->data, b = (uintptr_t)other->data;
    if (a + (uintptr_t)out_lo < b + (uintptr_t)other_hi &&
        b + (uintptr_t)other_lo < a + (uintptr_t)out_hi)
        return moeperm_fail(MOEPERM_ERR_PARAM_INVALID, "%s overlaps %s in memory", out_name,
                            other_name);
    return MOEPERM_SUCCESS;
}

moeperm_status moeperm_check_sorted_indices(const moeperm_tensor *sorted_indices)
{
    return check_indices(sorted_indices);
}

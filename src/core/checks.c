/*
 * checks.c - the first-phase checks every operator shares (checks.h), each
 * with the aclnn status and a sentence that says whether the device
 * refuses the value too or gives no determined result for it, and names
 * the value.
 *
 * The kernels are written to stay in bounds whatever the indices hold
 * (they are the caller's memory and may change before the run); these
 * checks are what makes the result defined.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/checks.h"

int64_t moeperm_view_elements(const moeperm_tensor *t)
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

bool moeperm_outputs_empty(const moeperm_tensor *const *outputs, size_t n)
{
    for (size_t i = 0; i < n; i++)
        if (outputs[i] && moeperm_view_elements(outputs[i]) > 0)
            return false;
    return true;
}

moeperm_status moeperm_check_required(const void *tensor, const char *what)
{
    if (tensor)
        return MOEPERM_SUCCESS;
    return moeperm_refuse(MOEPERM_ERR_PARAM_NULLPTR, "%s = NULL: it is a required tensor", what);
}

moeperm_status moeperm_check_plan_outputs(const uint64_t *workspace_size,
                                          moeperm_executor *const *executor)
{
    if (!workspace_size)
        return moeperm_fail(MOEPERM_ERR_PARAM_NULLPTR, "workspace_size is NULL");
    if (!executor)
        return moeperm_fail(MOEPERM_ERR_PARAM_NULLPTR, "executor is NULL");
    return MOEPERM_SUCCESS;
}

/* ---- dtypes ---------------------------------------------------------------- */

moeperm_status moeperm_check_float_dtype(const moeperm_tensor *t, const char *what)
{
    if (t->dtype == MOEPERM_FLOAT || t->dtype == MOEPERM_FLOAT16 || t->dtype == MOEPERM_BF16)
        return MOEPERM_SUCCESS;
    return moeperm_refuse(MOEPERM_ERR_PARAM_INVALID,
                          "%s dtype %d (%s): it takes FLOAT (0), FLOAT16 (1) or BF16 (27)", what,
                          (int)t->dtype, moeperm_dtype_name(t->dtype));
}

moeperm_status moeperm_check_same_dtype(const moeperm_tensor *t, const char *what,
                                        const moeperm_tensor *like, const char *like_what)
{
    if (t->dtype == like->dtype)
        return MOEPERM_SUCCESS;
    return moeperm_refuse(MOEPERM_ERR_PARAM_INVALID,
                          "%s dtype %d (%s): it must be %s's, %d (%s)", what, (int)t->dtype,
                          moeperm_dtype_name(t->dtype), like_what, (int)like->dtype,
                          moeperm_dtype_name(like->dtype));
}

moeperm_status moeperm_check_int32(const moeperm_tensor *t, const char *what)
{
    if (t->dtype == MOEPERM_INT32)
        return MOEPERM_SUCCESS;
    return moeperm_refuse(MOEPERM_ERR_PARAM_INVALID, "%s dtype %d (%s): it takes INT32 (3)",
                          what, (int)t->dtype, moeperm_dtype_name(t->dtype));
}

/* ---- shapes ---------------------------------------------------------------- */

moeperm_status moeperm_check_ndim(const moeperm_tensor *t, const char *what, uint64_t ndim,
                                  const char *layout)
{
    if (t->ndim == ndim)
        return MOEPERM_SUCCESS;
    return moeperm_undetermined("%s has %llu dims; the kernel reads it as %llu (%s)", what,
                                (unsigned long long)t->ndim, (unsigned long long)ndim, layout);
}

moeperm_status moeperm_check_shape2(const moeperm_tensor *t, const char *what, int64_t d0,
                                    int64_t d1, const char *why)
{
    if (t->dims[0] == d0 && t->dims[1] == d1)
        return MOEPERM_SUCCESS;
    return moeperm_undetermined("%s shape is [%lld, %lld], expected [%lld, %lld] (%s)", what,
                                (long long)t->dims[0], (long long)t->dims[1], (long long)d0,
                                (long long)d1, why);
}

/* ---- views and memory -------------------------------------------------------- */

/* The byte range [*lo, *hi) a non-empty view touches, relative to its data
 * pointer.  Fails when the range does not fit in 63 bits. */
static moeperm_status byte_span(const moeperm_tensor *t, const char *what, int64_t *lo,
                                int64_t *hi)
{
    int64_t last = t->offset;
    for (uint64_t i = 0; i < t->ndim; i++) {
        int64_t extent;
        if (__builtin_mul_overflow(t->dims[i] - 1, t->strides[i], &extent) ||
            __builtin_add_overflow(last, extent, &last))
            return moeperm_undetermined("%s: dims[%llu] = %lld with strides[%llu] = %lld reach "
                                        "past 2^63 elements",
                                        what, (unsigned long long)i, (long long)t->dims[i],
                                        (unsigned long long)i, (long long)t->strides[i]);
    }
    int64_t size = (int64_t)moeperm_dtype_size(t->dtype), end;
    if (__builtin_mul_overflow(t->offset, size, lo) || __builtin_add_overflow(last, 1, &end) ||
        __builtin_mul_overflow(end, size, hi) || (uint64_t)*hi > (uint64_t)SIZE_MAX)
        return moeperm_undetermined("%s spans elements %lld (offset) to %lld of %lld bytes "
                                    "each, more bytes than memory holds",
                                    what, (long long)t->offset, (long long)last,
                                    (long long)size);
    return MOEPERM_SUCCESS;
}

moeperm_status moeperm_check_view(const moeperm_tensor *t, const char *what)
{
    int64_t count = moeperm_view_elements(t), lo, hi;
    if (count == 0)
        return MOEPERM_SUCCESS;
    if (!t->data)
        return moeperm_refuse(MOEPERM_ERR_PARAM_NULLPTR,
                              "%s with %lld elements and a NULL data pointer", what,
                              (long long)count);
    return byte_span(t, what, &lo, &hi);
}

/*
 * Whether two distinct elements of a view share memory.  The test is the
 * usual sufficient one: taken in order of stride, each dim of more than
 * one element steps past everything the smaller ones reach.  Exotic
 * interleavings that do not overlap are refused too.  The view passed
 * moeperm_check_view(), so no product here overflows.
 */
static bool overlaps_itself(const moeperm_tensor *t)
{
    int64_t dims[MOEPERM_MAX_DIMS], strides[MOEPERM_MAX_DIMS];
    int n = 0;
    for (uint64_t i = 0; i < t->ndim; i++) {
        if (t->dims[i] <= 1)
            continue;
        int j = n++;
        for (; j > 0 && strides[j - 1] > t->strides[i]; j--) {
            dims[j] = dims[j - 1];
            strides[j] = strides[j - 1];
        }
        dims[j] = t->dims[i];
        strides[j] = t->strides[i];
    }
    int64_t reach = 0; /* the furthest element the smaller dims reach */
    for (int i = 0; i < n; i++) {
        if (strides[i] <= reach)
            return true;
        reach += (dims[i] - 1) * strides[i];
    }
    return false;
}

moeperm_status moeperm_check_no_self_overlap(const moeperm_tensor *out, const char *what)
{
    if (moeperm_view_elements(out) == 0 || !overlaps_itself(out))
        return MOEPERM_SUCCESS;
    char strides[MOEPERM_MAX_DIMS * 22] = "";
    size_t used = 0;
    for (uint64_t i = 0; i < out->ndim; i++)
        used += (size_t)snprintf(strides + used, sizeof strides - used, "%s%lld", i ? ", " : "",
                                 (long long)out->strides[i]);
    return moeperm_undetermined("%s strides [%s] make distinct elements share memory", what,
                                strides);
}

moeperm_status moeperm_check_disjoint(const moeperm_tensor *out, const char *out_name,
                                      const moeperm_tensor *other, const char *other_name)
{
    int64_t out_lo, out_hi, other_lo, other_hi;
    moeperm_status status;
    if (moeperm_view_elements(out) == 0 || moeperm_view_elements(other) == 0)
        return MOEPERM_SUCCESS;
    if ((status = byte_span(out, out_name, &out_lo, &out_hi)) != MOEPERM_SUCCESS ||
        (status = byte_span(other, other_name, &other_lo, &other_hi)) != MOEPERM_SUCCESS)
        return status;
    uintptr_t a = (uintptr_t)out->data, b = (uintptr_t)other->data;
    if (a + (uintptr_t)out_lo < b + (uintptr_t)other_hi &&
        b + (uintptr_t)other_lo < a + (uintptr_t)out_hi)
        return moeperm_undetermined("%s overlaps %s in memory", out_name, other_name);
    return MOEPERM_SUCCESS;
}

/* ---- sorted_indices ---------------------------------------------------------- */

/* Whether any of n entries, stride apart, is negative: an OR of the sign
 * bits, which compilers vectorise for the usual stride of 1. */
static bool any_negative(const int32_t *base, int64_t stride, int64_t n)
{
    uint32_t signs = 0;
    if (stride == 1) {
        for (int64_t i = 0; i < n; i++)
            signs |= (uint32_t)base[i];
    } else {
        for (int64_t i = 0; i < n; i++)
            signs |= (uint32_t)base[i * stride];
    }
    return (signs >> 31) != 0;
}

moeperm_status moeperm_check_slots_nonnegative(const moeperm_tensor *sorted_indices,
                                               int64_t slots, const char *rows_of)
{
    if (slots == 0)
        return MOEPERM_SUCCESS;
    const int32_t *base = (const int32_t *)sorted_indices->data + sorted_indices->offset;
    int64_t stride = sorted_indices->strides[0];
    if (!any_negative(base, stride, slots))
        return MOEPERM_SUCCESS;
    int64_t i = 0;
    while (base[i * stride] >= 0)
        i++;
    return moeperm_undetermined("sorted_indices[%lld] = %d is negative: the kernel would address "
                                "row %d of %s, outside the tensor",
                                (long long)i, base[i * stride], base[i * stride], rows_of);
}

/*
 * tensor.c - tensor views: dims, strides in elements, an offset, borrowed
 * memory.  Creation checks only what makes a view meaningless (negative
 * numbers, too many dims); whether a view suits the operator is the
 * operator's question (core/checks.c and each operator's checks).
 */
#include <stdlib.h>

#include "core/internal.h"

moeperm_tensor *moeperm_tensor_create(const int64_t *dims, uint64_t ndim, moeperm_dtype dtype,
                                      const int64_t *strides, int64_t offset, void *data)
{
    if (ndim > MOEPERM_MAX_DIMS) {
        moeperm_fail(MOEPERM_ERR_PARAM_INVALID, "ndim = %llu is above the limit of %d",
                     (unsigned long long)ndim, MOEPERM_MAX_DIMS);
        return NULL;
    }
    if (ndim > 0 && !dims) {
        moeperm_fail(MOEPERM_ERR_PARAM_NULLPTR, "dims is NULL with ndim = %llu",
                     (unsigned long long)ndim);
        return NULL;
    }
    if (offset < 0) {
        moeperm_fail(MOEPERM_ERR_PARAM_INVALID, "offset = %lld is negative", (long long)offset);
        return NULL;
    }
    for (uint64_t i = 0; i < ndim; i++) {
        if (dims[i] < 0) {
            moeperm_fail(MOEPERM_ERR_PARAM_INVALID, "dims[%llu] = %lld is negative",
                         (unsigned long long)i, (long long)dims[i]);
            return NULL;
        }
        if (strides && strides[i] < 0) {
            moeperm_fail(MOEPERM_ERR_PARAM_INVALID, "strides[%llu] = %lld is negative",
                         (unsigned long long)i, (long long)strides[i]);
            return NULL;
        }
    }

    moeperm_tensor *tensor = calloc(1, sizeof *tensor);
    if (!tensor) {
        moeperm_fail(MOEPERM_ERR_INNER, "out of memory allocating a tensor");
        return NULL;
    }
    tensor->dtype = dtype;
    tensor->ndim = ndim;
    tensor->offset = offset;
    tensor->data = data;
    /* Row-major strides when none are given; saturate instead of wrapping
     * so that an absurd shape is refused later rather than aliased. */
    int64_t step = 1;
    for (uint64_t i = ndim; i-- > 0;) {
        tensor->dims[i] = dims[i];
        tensor->strides[i] = strides ? strides[i] : step;
        if (dims[i] > 0 && step > INT64_MAX / dims[i])
            step = INT64_MAX;
        else if (dims[i] > 0)
            step *= dims[i];
    }
    return tensor;
}

void moeperm_tensor_destroy(moeperm_tensor *tensor)
{
    free(tensor);
}

/*
 * tensor.c - aclTensor and aclIntArray: descriptions the program makes and
 * frees, checked as the vendor's nnopbase checks them at creation
 * (hicann/opbase@aa3cd74 src/nnopbase/common/api/acl_op_api.cpp:34-44,
 * 57-62, 92-129) plus what a host process must refuse to stay whole:
 * negative extents and more dims than a tensor has.
 */
#include <stdlib.h>
#include <string.h>

#include "internal.h"

static bool check_dims(const char *what, const int64_t *dims, uint64_t n)
{
    if (dims == NULL && n > 0) {
        host_error("aclCreateTensor: %s is NULL with %llu dims", what, (unsigned long long)n);
        return false;
    }
    if (n > HOST_MAX_DIMS) {
        host_error("aclCreateTensor: %llu %s; a tensor has at most %d", (unsigned long long)n,
                   what, HOST_MAX_DIMS);
        return false;
    }
    for (uint64_t i = 0; i < n; i++)
        if (dims[i] < 0) {
            host_error("aclCreateTensor: %s[%llu] = %lld is negative", what,
                       (unsigned long long)i, (long long)dims[i]);
            return false;
        }
    return true;
}

aclTensor *aclCreateTensor(const int64_t *viewDims, uint64_t viewDimsNum, aclDataType dataType,
                           const int64_t *stride, int64_t offset, aclFormat format,
                           const int64_t *storageDims, uint64_t storageDimsNum, void *tensorData)
{
    if (!check_dims("viewDims", viewDims, viewDimsNum) ||
        !check_dims("storageDims", storageDims, storageDimsNum) ||
        (stride != NULL && !check_dims("stride", stride, viewDimsNum)))
        return NULL;
    if (offset < 0) {
        host_error("aclCreateTensor: offset %lld is negative", (long long)offset);
        return NULL;
    }
    aclTensor *t = calloc(1, sizeof *t);
    if (t == NULL) {
        host_error("aclCreateTensor: out of host memory");
        return NULL;
    }
    t->kind = HOST_TENSOR;
    t->dtype = dataType;
    t->format = format;
    t->ndim = viewDimsNum;
    t->offset = offset;
    t->storage_ndim = storageDimsNum;
    t->data = tensorData;
    if (viewDimsNum > 0)
        memcpy(t->dims, viewDims, viewDimsNum * sizeof *viewDims);
    if (storageDimsNum > 0)
        memcpy(t->storage_dims, storageDims, storageDimsNum * sizeof *storageDims);
    if (stride != NULL) {
        if (viewDimsNum > 0)
            memcpy(t->strides, stride, viewDimsNum * sizeof *stride);
    } else {
        /* The contiguous strides of the view, as the vendor's constructor
         * computes them (common_types.cpp:192-222). */
        int64_t step = 1;
        for (uint64_t i = viewDimsNum; i-- > 0;) {
            t->strides[i] = step;
            step = viewDims[i] > 0 && step <= INT64_MAX / viewDims[i] ? step * viewDims[i] : step;
        }
    }
    if (!registry_add(t)) {
        free(t);
        host_error("aclCreateTensor: out of host memory");
        return NULL;
    }
    return t;
}

aclnnStatus aclDestroyTensor(const aclTensor *tensor)
{
    if (tensor == NULL)
        return ACLNN_SUCCESS;
    if (!registry_take(tensor, HOST_TENSOR)) {
        host_error("aclDestroyTensor: %p is not a tensor of aclCreateTensor (or it was "
                   "destroyed)", (const void *)tensor);
        return ACLNN_ERR_PARAM_INVALID;
    }
    registry_retire((aclTensor *)tensor, HOST_TENSOR);
    return ACLNN_SUCCESS;
}

aclIntArray *aclCreateIntArray(const int64_t *value, uint64_t size)
{
    if (value == NULL && size > 0) {
        host_error("aclCreateIntArray: value is NULL with size %llu", (unsigned long long)size);
        return NULL;
    }
    if (size > SIZE_MAX / sizeof *value) {
        host_error("aclCreateIntArray: size %llu is too large", (unsigned long long)size);
        return NULL;
    }
    aclIntArray *a = malloc(sizeof *a);
    int64_t *values = size > 0 ? malloc((size_t)size * sizeof *value) : NULL;
    if (a == NULL || (size > 0 && values == NULL)) {
        free(a);
        free(values);
        host_error("aclCreateIntArray: out of host memory");
        return NULL;
    }
    a->kind = HOST_INT_ARRAY;
    a->size = size;
    a->values = values;
    if (size > 0)
        memcpy(values, value, (size_t)size * sizeof *value);
    if (!registry_add(a)) {
        free(values);
        free(a);
        host_error("aclCreateIntArray: out of host memory");
        return NULL;
    }
    return a;
}

aclnnStatus aclDestroyIntArray(const aclIntArray *array)
{
    if (array == NULL)
        return ACLNN_SUCCESS;
    if (!registry_take(array, HOST_INT_ARRAY)) {
        host_error("aclDestroyIntArray: %p is not an array of aclCreateIntArray (or it was "
                   "destroyed)", (const void *)array);
        return ACLNN_ERR_PARAM_INVALID;
    }
    free(array->values);
    registry_retire((aclIntArray *)array, HOST_INT_ARRAY);
    return ACLNN_SUCCESS;
}

/*
 * aclnn/acl_meta.h - the tensors, integer arrays and plans of the aclnn
 * operator API: the part of the vendor's nnopbase (CANN aclnn/acl_meta.h)
 * that programs of the four MoE operators use.  Signatures and return
 * types are the vendor's; unlike the vendor's header this one is C as well
 * as C++.
 *
 * Thread safety: every function may be called from several threads at
 * once on distinct objects.
 */
#ifndef MOEPERM_ACLNN_ACLNN_ACL_META_H
#define MOEPERM_ACLNN_ACLNN_ACL_META_H

#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>

#include "../acl/acl_base.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Opaque objects.  Only aclTensor, aclIntArray and aclOpExecutor are made
 * by the host runtime; the others are declared so that programs naming
 * them build. */
typedef struct aclOpExecutor aclOpExecutor;
typedef struct aclTensor aclTensor;
typedef struct aclScalar aclScalar;
typedef struct aclIntArray aclIntArray;
typedef struct aclFloatArray aclFloatArray;
typedef struct aclBoolArray aclBoolArray;
typedef struct aclTensorList aclTensorList;
typedef struct aclScalarList aclScalarList;

/* The status of an aclnn call: 0, or a code of aclnn/opdev/op_errno.h
 * (161001 a NULL argument, 161002 an invalid one, 561002 a tiling refusal,
 * docs/aclnn-host.md). */
typedef int32_t aclnnStatus;

/*
 * aclCreateTensor() describes a tensor in device memory, without copying
 * it: element (i0, ..., in-1) of the view lives at element index
 * offset + sum(i_j * stride[j]) from tensorData (offset and strides count
 * elements of dataType, not bytes).  stride NULL means the contiguous
 * strides of viewDims.  storageDims give the extent of the storage the
 * view lies in; the view must fit in it (checked by the operators).
 *
 * Returns NULL (and sets aclGetRecentErrMsg()) when viewDims or
 * storageDims is NULL with a non-zero count, a count exceeds 8, a dim,
 * stride or the offset is negative, or memory runs out.  dataType and
 * format are not checked here: the operators check them.  tensorData may
 * be NULL for a tensor no operator reads.  The caller frees the tensor
 * with aclDestroyTensor(); the memory stays the caller's.
 */
ACL_FUNC_VISIBILITY aclTensor *aclCreateTensor(const int64_t *viewDims, uint64_t viewDimsNum,
                                               aclDataType dataType, const int64_t *stride,
                                               int64_t offset, aclFormat format,
                                               const int64_t *storageDims, uint64_t storageDimsNum,
                                               void *tensorData);

/* aclCreateIntArray() copies size values from value (which may be NULL
 * only when size is 0).  NULL on failure.  Freed with aclDestroyIntArray(). */
ACL_FUNC_VISIBILITY aclIntArray *aclCreateIntArray(const int64_t *value, uint64_t size);

/* aclDestroyTensor() and aclDestroyIntArray() free an object; NULL is a
 * no-op returning 0, as on the device.  An address that is not a live
 * object of the kind is refused with 161002 (the device would crash). */
ACL_FUNC_VISIBILITY aclnnStatus aclDestroyTensor(const aclTensor *tensor);
ACL_FUNC_VISIBILITY aclnnStatus aclDestroyIntArray(const aclIntArray *array);

#ifdef __cplusplus
}
#endif

#endif

/*
 * acl.h - the few pieces of the Ascend ACL runtime and aclnn API that the
 * npu backend calls, restated from the vendor's documentation and headers.
 *
 * Why not include the CANN headers: the backend loads the runtime with
 * dlopen at run time, so it must build, and be tested against the fake
 * runtime in tests/fake_acl, on machines with no CANN install at all.
 * Declaring only what is used keeps this file checkable against the
 * vendor's headers line by line.  Every function is declared as a pointer type, because
 * nothing here is ever linked: the loader fills a table of them.
 *
 * The values below are ABI: they must equal the vendor's.
 */
#ifndef MOEPERM_NPU_ACL_H
#define MOEPERM_NPU_ACL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

typedef int aclError;
typedef int32_t aclnnStatus;
typedef void *aclrtStream;
typedef struct aclTensor aclTensor;         /* opaque, owned by libnnopbase */
typedef struct aclOpExecutor aclOpExecutor; /* opaque, single use */
typedef struct aclIntArray aclIntArray;     /* opaque, owned by libnnopbase */

#define ACL_SUCCESS 0
#define ACLNN_SUCCESS 0

typedef enum aclDataType {
    ACL_FLOAT = 0,
    ACL_FLOAT16 = 1,
    ACL_INT8 = 2,
    ACL_INT32 = 3,
    ACL_INT64 = 9,
    ACL_BF16 = 27
} aclDataType;

typedef enum aclFormat { ACL_FORMAT_ND = 2 } aclFormat;

typedef enum aclrtMemcpyKind {
    ACL_MEMCPY_HOST_TO_HOST = 0,
    ACL_MEMCPY_HOST_TO_DEVICE = 1,
    ACL_MEMCPY_DEVICE_TO_HOST = 2,
    ACL_MEMCPY_DEVICE_TO_DEVICE = 3
} aclrtMemcpyKind;

typedef enum aclrtMemMallocPolicy { ACL_MEM_MALLOC_HUGE_FIRST = 0 } aclrtMemMallocPolicy;

/* Runtime: libascendcl.so */
typedef aclError (*aclInit_fn)(const char *configPath);
typedef aclError (*aclFinalize_fn)(void);
typedef aclError (*aclrtSetDevice_fn)(int32_t deviceId);
typedef aclError (*aclrtResetDevice_fn)(int32_t deviceId);
typedef aclError (*aclrtCreateStream_fn)(aclrtStream *stream);
typedef aclError (*aclrtDestroyStream_fn)(aclrtStream stream);
typedef aclError (*aclrtSynchronizeStream_fn)(aclrtStream stream);
typedef aclError (*aclrtMalloc_fn)(void **devPtr, size_t size, aclrtMemMallocPolicy policy);
typedef aclError (*aclrtFree_fn)(void *devPtr);
typedef aclError (*aclrtMemcpy_fn)(void *dst, size_t destMax, const void *src, size_t count,
                                   aclrtMemcpyKind kind);
typedef const char *(*aclGetRecentErrMsg_fn)(void);
/* The chip's name, e.g. "Ascend910B2"; NULL on failure (acl_base_rt.h). */
typedef const char *(*aclrtGetSocName_fn)(void);

/* Tensors: libnnopbase.so */
typedef aclTensor *(*aclCreateTensor_fn)(const int64_t *viewDims, uint64_t viewDimsNum,
                                         aclDataType dataType, const int64_t *stride,
                                         int64_t offset, aclFormat format,
                                         const int64_t *storageDims, uint64_t storageDimsNum,
                                         void *tensorData);
typedef aclnnStatus (*aclDestroyTensor_fn)(const aclTensor *tensor);
typedef aclIntArray *(*aclCreateIntArray_fn)(const int64_t *value, uint64_t size);
typedef aclnnStatus (*aclDestroyIntArray_fn)(const aclIntArray *array);

/* The operator: libopapi*.so or a custom package's libcust_opapi.so */
typedef aclnnStatus (*aclnnMoeTokenPermuteGradGetWorkspaceSize_fn)(
    const aclTensor *permutedOutputGrad, const aclTensor *sortedIndices, int64_t numTopk,
    bool paddedMode, aclTensor *out, uint64_t *workspaceSize, aclOpExecutor **executor);
/* Every operator's second phase has this shape. */
typedef aclnnStatus (*aclnnRun_fn)(void *workspace, uint64_t workspaceSize,
                                   aclOpExecutor *executor, aclrtStream stream);
typedef aclnnStatus (*aclnnMoeTokenPermuteGetWorkspaceSize_fn)(
    const aclTensor *tokens, const aclTensor *indices, int64_t numOutTokens, bool paddedMode,
    aclTensor *permuteTokensOut, aclTensor *sortedIndicesOut, uint64_t *workspaceSize,
    aclOpExecutor **executor);
typedef aclnnStatus (*aclnnMoeTokenUnpermuteGetWorkspaceSize_fn)(
    const aclTensor *permutedTokens, const aclTensor *sortedIndices,
    const aclTensor *probsOptional, bool paddedMode, const aclIntArray *restoreShapeOptional,
    aclTensor *out, uint64_t *workspaceSize, aclOpExecutor **executor);
typedef aclnnStatus (*aclnnMoeTokenUnpermuteGradGetWorkspaceSize_fn)(
    const aclTensor *permuteTokens, const aclTensor *unpermutedTokensGrad,
    const aclTensor *sortedIndices, const aclTensor *probsOptional, bool paddedMode,
    const aclIntArray *restoreShapeOptional, aclTensor *permutedTokensGradOut,
    aclTensor *probsGradOut, uint64_t *workspaceSize, aclOpExecutor **executor);

#endif

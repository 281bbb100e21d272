// The vendor's signatures, types and values, restated from the vendor's
// headers (CANN acl/acl_rt.h, acl/acl_base_rt.h, aclnn/acl_meta.h,
// opdev/op_errno.h and the four operator headers of
// hicann/ops-transformer@c29bc10) and checked against the host runtime's
// headers at compile time: a function assigned to a pointer of another
// type, or a value that differs, does not compile.
#include <cstdint>
#include <type_traits>

#include "acl/acl.h"
#include "aclnn/opdev/op_errno.h"
#include "aclnnop/aclnn_moe_token_permute.h"
#include "aclnnop/aclnn_moe_token_permute_grad.h"
#include "aclnnop/aclnn_moe_token_unpermute.h"
#include "aclnnop/aclnn_moe_token_unpermute_grad.h"

static_assert(std::is_same<aclError, int>::value, "aclError is int");
static_assert(std::is_same<aclnnStatus, int32_t>::value, "aclnnStatus is int32_t");
static_assert(std::is_same<aclrtStream, void *>::value, "aclrtStream is void *");
static_assert(std::is_enum<aclDataType>::value && std::is_enum<aclFormat>::value &&
                  std::is_enum<aclrtMemcpyKind>::value && std::is_enum<aclrtMemMallocPolicy>::value,
              "real enumerations");

// The runtime.
aclError (*init)(const char *) = aclInit;
aclError (*finalize)() = aclFinalize;
const char *(*recent)() = aclGetRecentErrMsg;
aclError (*set_device)(int32_t) = aclrtSetDevice;
aclError (*reset_device)(int32_t) = aclrtResetDevice;
aclError (*device_count)(uint32_t *) = aclrtGetDeviceCount;
aclError (*malloc_fn)(void **, size_t, aclrtMemMallocPolicy) = aclrtMalloc;
aclError (*free_fn)(void *) = aclrtFree;
aclError (*memcpy_fn)(void *, size_t, const void *, size_t, aclrtMemcpyKind) = aclrtMemcpy;
aclError (*create_stream)(aclrtStream *) = aclrtCreateStream;
aclError (*destroy_stream)(aclrtStream) = aclrtDestroyStream;
aclError (*sync_stream)(aclrtStream) = aclrtSynchronizeStream;
const char *(*soc_name)() = aclrtGetSocName;

// Tensors and int arrays.
aclTensor *(*create_tensor)(const int64_t *, uint64_t, aclDataType, const int64_t *, int64_t,
                            aclFormat, const int64_t *, uint64_t, void *) = aclCreateTensor;
aclnnStatus (*destroy_tensor)(const aclTensor *) = aclDestroyTensor;
aclIntArray *(*create_int_array)(const int64_t *, uint64_t) = aclCreateIntArray;
aclnnStatus (*destroy_int_array)(const aclIntArray *) = aclDestroyIntArray;

// The operators; MoeTokenPermute's outputs are const, as in its header.
aclnnStatus (*permute_plan)(const aclTensor *, const aclTensor *, int64_t, bool, const aclTensor *,
                            const aclTensor *, uint64_t *, aclOpExecutor **) =
    aclnnMoeTokenPermuteGetWorkspaceSize;
aclnnStatus (*unpermute_plan)(const aclTensor *, const aclTensor *, const aclTensor *, bool,
                              const aclIntArray *, aclTensor *, uint64_t *, aclOpExecutor **) =
    aclnnMoeTokenUnpermuteGetWorkspaceSize;
aclnnStatus (*permute_grad_plan)(const aclTensor *, const aclTensor *, int64_t, bool, aclTensor *,
                                 uint64_t *, aclOpExecutor **) =
    aclnnMoeTokenPermuteGradGetWorkspaceSize;
aclnnStatus (*unpermute_grad_plan)(const aclTensor *, const aclTensor *, const aclTensor *,
                                   const aclTensor *, bool, const aclIntArray *, aclTensor *,
                                   aclTensor *, uint64_t *, aclOpExecutor **) =
    aclnnMoeTokenUnpermuteGradGetWorkspaceSize;
typedef aclnnStatus (*run_fn)(void *, uint64_t, aclOpExecutor *, aclrtStream);
run_fn runs[] = {aclnnMoeTokenPermute, aclnnMoeTokenUnpermute, aclnnMoeTokenPermuteGrad,
                 aclnnMoeTokenUnpermuteGrad};

// Every aclDataType, qualified as the vendor's examples write them.
static_assert(aclDataType::ACL_DT_UNDEFINED == -1 && aclDataType::ACL_FLOAT == 0 &&
                  aclDataType::ACL_FLOAT16 == 1 && aclDataType::ACL_INT8 == 2 &&
                  aclDataType::ACL_INT32 == 3 && aclDataType::ACL_UINT8 == 4 &&
                  aclDataType::ACL_INT16 == 6 && aclDataType::ACL_UINT16 == 7 &&
                  aclDataType::ACL_UINT32 == 8 && aclDataType::ACL_INT64 == 9 &&
                  aclDataType::ACL_UINT64 == 10 && aclDataType::ACL_DOUBLE == 11 &&
                  aclDataType::ACL_BOOL == 12 && aclDataType::ACL_STRING == 13 &&
                  aclDataType::ACL_COMPLEX64 == 16 && aclDataType::ACL_COMPLEX128 == 17 &&
                  aclDataType::ACL_BF16 == 27 && aclDataType::ACL_INT4 == 29 &&
                  aclDataType::ACL_UINT1 == 30 && aclDataType::ACL_COMPLEX32 == 33 &&
                  aclDataType::ACL_HIFLOAT8 == 34 && aclDataType::ACL_FLOAT8_E5M2 == 35 &&
                  aclDataType::ACL_FLOAT8_E4M3FN == 36 && aclDataType::ACL_FLOAT8_E8M0 == 37 &&
                  aclDataType::ACL_FLOAT6_E3M2 == 38 && aclDataType::ACL_FLOAT6_E2M3 == 39 &&
                  aclDataType::ACL_FLOAT4_E2M1 == 40 && aclDataType::ACL_FLOAT4_E1M2 == 41,
              "aclDataType");
static_assert(aclFormat::ACL_FORMAT_UNDEFINED == -1 && aclFormat::ACL_FORMAT_NCHW == 0 &&
                  aclFormat::ACL_FORMAT_NHWC == 1 && aclFormat::ACL_FORMAT_ND == 2 &&
                  aclFormat::ACL_FORMAT_NC1HWC0 == 3 && aclFormat::ACL_FORMAT_FRACTAL_Z == 4 &&
                  aclFormat::ACL_FORMAT_NC1HWC0_C04 == 12 && aclFormat::ACL_FORMAT_HWCN == 16 &&
                  aclFormat::ACL_FORMAT_NDHWC == 27 && aclFormat::ACL_FORMAT_FRACTAL_NZ == 29 &&
                  aclFormat::ACL_FORMAT_NCDHW == 30 && aclFormat::ACL_FORMAT_NDC1HWC0 == 32 &&
                  aclFormat::ACL_FRACTAL_Z_3D == 33 && aclFormat::ACL_FORMAT_NC == 35 &&
                  aclFormat::ACL_FORMAT_NCL == 47 && aclFormat::ACL_FORMAT_FRACTAL_NZ_C0_16 == 50 &&
                  aclFormat::ACL_FORMAT_FRACTAL_NZ_C0_32 == 51 &&
                  aclFormat::ACL_FORMAT_FRACTAL_NZ_C0_2 == 52 &&
                  aclFormat::ACL_FORMAT_FRACTAL_NZ_C0_4 == 53 &&
                  aclFormat::ACL_FORMAT_FRACTAL_NZ_C0_8 == 54,
              "aclFormat");
static_assert(ACL_MEMCPY_HOST_TO_HOST == 0 && ACL_MEMCPY_HOST_TO_DEVICE == 1 &&
                  ACL_MEMCPY_DEVICE_TO_HOST == 2 && ACL_MEMCPY_DEVICE_TO_DEVICE == 3 &&
                  ACL_MEMCPY_DEFAULT == 4 && ACL_MEMCPY_HOST_TO_BUF_TO_DEVICE == 5 &&
                  ACL_MEMCPY_INNER_DEVICE_TO_DEVICE == 6 && ACL_MEMCPY_INTER_DEVICE_TO_DEVICE == 7,
              "aclrtMemcpyKind");
static_assert(ACL_MEM_MALLOC_HUGE_FIRST == 0 && ACL_MEM_MALLOC_HUGE_ONLY == 1 &&
                  ACL_MEM_MALLOC_NORMAL_ONLY == 2 && ACL_MEM_MALLOC_HUGE_FIRST_P2P == 3 &&
                  ACL_MEM_MALLOC_HUGE_ONLY_P2P == 4 && ACL_MEM_MALLOC_NORMAL_ONLY_P2P == 5 &&
                  ACL_MEM_MALLOC_HUGE1G_ONLY == 6 && ACL_MEM_MALLOC_HUGE1G_ONLY_P2P == 7 &&
                  ACL_MEM_TYPE_LOW_BAND_WIDTH == 0x0100 && ACL_MEM_TYPE_HIGH_BAND_WIDTH == 0x1000 &&
                  ACL_MEM_ACCESS_USER_SPACE_READONLY == 0x100000,
              "aclrtMemMallocPolicy");
static_assert(ACLNN_SUCCESS == 0 && ACLNN_ERR_PARAM_NULLPTR == 161001 &&
                  ACLNN_ERR_PARAM_INVALID == 161002 && ACLNN_ERR_RUNTIME_ERROR == 361001 &&
                  ACLNN_ERR_INNER == 561000 && ACLNN_ERR_INNER_TILING_ERROR == 561002 &&
                  ACLNN_ERR_INNER_FIND_KERNEL_ERROR == 561003 &&
                  ACLNN_ERR_INNER_KEY_CONFLICT == 561105 && ACLNN_ERR_INNER_KEY_CONFILICT == 561105,
              "aclnn status codes");
static_assert(ACL_ERROR_RT_PARAM_INVALID == 107000 && ACL_ERROR_RT_INVALID_DEVICEID == 107001 &&
                  ACL_ERROR_RT_MEMORY_ALLOCATION == 207001 && ACL_ERROR_RT_MEMORY_FREE == 207002,
              "runtime-layer codes");

// `static const int` cannot be static_assert'ed in every dialect: checked
// at run time.
int main()
{
    return !(ACL_SUCCESS == 0 && ACL_ERROR_INVALID_PARAM == 100000 &&
             ACL_ERROR_REPEAT_INITIALIZE == 100002 && ACL_ERROR_REPEAT_FINALIZE == 100037 &&
             ACL_ERROR_BAD_ALLOC == 200000 && ACL_ERROR_INTERNAL_ERROR == 500000);
}

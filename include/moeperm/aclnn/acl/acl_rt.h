/*
 * acl/acl_rt.h - the part of the ACL runtime that programs of the aclnn
 * operators call: initialisation, the device, streams, device memory and
 * the last error message.  Signatures, enumerations and values are the
 * vendor's (CANN acl/acl_rt.h).
 *
 * On the host (libmoeperm-aclnn) the "device" is this process: device
 * memory is host memory the runtime hands out, a stream is a handle whose
 * work has already run when aclrtSynchronizeStream() returns, and there is
 * one device, number 0.  docs/aclnn-host.md has every difference a
 * program could observe.
 *
 * Thread safety: every function may be called from several threads at
 * once; aclGetRecentErrMsg() is per thread.  As on the device, two threads
 * must not race on one object (free a buffer another thread copies into,
 * destroy a stream another synchronizes).
 */
#ifndef MOEPERM_ACLNN_ACL_ACL_RT_H
#define MOEPERM_ACLNN_ACL_ACL_RT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "acl_base.h"

#ifdef __cplusplus
extern "C" {
#endif

/* The direction of aclrtMemcpy().  On the host every direction is a plain
 * copy; values past ACL_MEMCPY_HOST_TO_BUF_TO_DEVICE are refused, as the
 * vendor's runtime refuses them in aclrtMemcpy. */
typedef enum aclrtMemcpyKind {
    ACL_MEMCPY_HOST_TO_HOST = 0,
    ACL_MEMCPY_HOST_TO_DEVICE = 1,
    ACL_MEMCPY_DEVICE_TO_HOST = 2,
    ACL_MEMCPY_DEVICE_TO_DEVICE = 3,
    ACL_MEMCPY_DEFAULT = 4,
    ACL_MEMCPY_HOST_TO_BUF_TO_DEVICE = 5,
    ACL_MEMCPY_INNER_DEVICE_TO_DEVICE = 6,
    ACL_MEMCPY_INTER_DEVICE_TO_DEVICE = 7
} aclrtMemcpyKind;

/* How aclrtMalloc() should place memory.  Page policies mean nothing on
 * the host; every value is accepted, as on the device. */
typedef enum aclrtMemMallocPolicy {
    ACL_MEM_MALLOC_HUGE_FIRST = 0,
    ACL_MEM_MALLOC_HUGE_ONLY = 1,
    ACL_MEM_MALLOC_NORMAL_ONLY = 2,
    ACL_MEM_MALLOC_HUGE_FIRST_P2P = 3,
    ACL_MEM_MALLOC_HUGE_ONLY_P2P = 4,
    ACL_MEM_MALLOC_NORMAL_ONLY_P2P = 5,
    ACL_MEM_MALLOC_HUGE1G_ONLY = 6,
    ACL_MEM_MALLOC_HUGE1G_ONLY_P2P = 7,
    ACL_MEM_TYPE_LOW_BAND_WIDTH = 0x0100,
    ACL_MEM_TYPE_HIGH_BAND_WIDTH = 0x1000,
    ACL_MEM_ACCESS_USER_SPACE_READONLY = 0x100000
} aclrtMemMallocPolicy;

/*
 * aclInit() initialises the runtime; configPath (a JSON file on the
 * device) may be NULL and is not read on the host.  A second call without
 * aclFinalize() returns ACL_ERROR_REPEAT_INITIALIZE, as the vendor's does.
 * It also checks MOEPERM_ACLNN_CHIP: a name the project does not know is
 * ACL_ERROR_INVALID_PARAM.
 */
ACL_FUNC_VISIBILITY aclError aclInit(const char *configPath);

/* aclFinalize() ends what aclInit() began; a second call returns
 * ACL_ERROR_REPEAT_FINALIZE.  It frees nothing the program still holds. */
ACL_FUNC_VISIBILITY aclError aclFinalize(void);

/*
 * aclGetRecentErrMsg() returns, and clears, the message of the most
 * recent failed call of this library on the calling thread, naming the
 * offending value; NULL when there is none.  The pointer stays valid until
 * the next call of aclGetRecentErrMsg() on the same thread.
 */
ACL_FUNC_VISIBILITY const char *aclGetRecentErrMsg(void);

/* aclrtSetDevice() and aclrtResetDevice() take device 0, the only one;
 * another is ACL_ERROR_RT_INVALID_DEVICEID.  Setting it again is allowed. */
ACL_FUNC_VISIBILITY aclError aclrtSetDevice(int32_t deviceId);
ACL_FUNC_VISIBILITY aclError aclrtResetDevice(int32_t deviceId);

/* aclrtGetDeviceCount() stores 1 in *count. */
ACL_FUNC_VISIBILITY aclError aclrtGetDeviceCount(uint32_t *count);

/*
 * aclrtMalloc() allocates size bytes of "device" memory into *devPtr: host
 * memory, aligned to 64 bytes (the device aligns to 32), its size rounded
 * up to 32 bytes and padded by 32 more as the device pads it.  Its
 * contents are undefined, as on the device.  ACL_ERROR_INVALID_PARAM for a
 * NULL devPtr or size 0, ACL_ERROR_RT_MEMORY_ALLOCATION when memory runs
 * out.  The caller frees it with aclrtFree().
 */
ACL_FUNC_VISIBILITY aclError aclrtMalloc(void **devPtr, size_t size, aclrtMemMallocPolicy policy);

/* aclrtFree() frees memory of aclrtMalloc().  ACL_ERROR_INVALID_PARAM for
 * NULL, ACL_ERROR_RT_MEMORY_FREE for an address aclrtMalloc() did not
 * return (or that is already freed). */
ACL_FUNC_VISIBILITY aclError aclrtFree(void *devPtr);

/*
 * aclrtMemcpy() copies count bytes from src to dst, at once (it waits for
 * no stream), in any direction.  count 0 succeeds and does nothing; a NULL
 * dst or src or an unknown kind is ACL_ERROR_INVALID_PARAM; destMax 0 or
 * count > destMax is ACL_ERROR_RT_PARAM_INVALID, and nothing is copied.
 */
ACL_FUNC_VISIBILITY aclError aclrtMemcpy(void *dst, size_t destMax, const void *src, size_t count,
                                         aclrtMemcpyKind kind);

/* aclrtCreateStream() makes a stream; ACL_ERROR_INVALID_PARAM for a NULL
 * out-pointer, ACL_ERROR_RT_NO_STREAM_RESOURCE when host memory runs out
 * (the device's code when it has no stream left).  aclrtDestroyStream()
 * frees one: ACL_ERROR_INVALID_PARAM for NULL, ACL_ERROR_RT_PARAM_INVALID
 * for a handle that is not a live stream. */
ACL_FUNC_VISIBILITY aclError aclrtCreateStream(aclrtStream *stream);
ACL_FUNC_VISIBILITY aclError aclrtDestroyStream(aclrtStream stream);

/*
 * aclrtSynchronizeStream() waits for the work launched on stream (NULL:
 * the default stream).  On the host an operator runs inside its launch,
 * so the work is done already; a handle that is not a live stream is
 * ACL_ERROR_RT_PARAM_INVALID.
 */
ACL_FUNC_VISIBILITY aclError aclrtSynchronizeStream(aclrtStream stream);

#ifdef __cplusplus
}
#endif

#endif

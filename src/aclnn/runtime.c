/*
 * runtime.c - the ACL runtime calls: initialisation, the device, streams
 * and device memory, with the vendor's status codes (CANN's libascendcl,
 * hicann/runtime@681ef76 src/acl/aclrt_impl: acl.cpp, device.cpp,
 * stream.cpp, memory.cpp; docs/aclnn-host.md cites each).
 *
 * The device is this process.  Device memory is host memory from the C
 * library, registered so that aclrtFree() and the operators can tell it
 * from anything else.  A stream holds no queue: an operator runs inside
 * its launch (the second phase), so by the time aclrtSynchronizeStream()
 * is called the work is done.  A program that follows the rules (read
 * results only after synchronizing, change inputs only after
 * synchronizing) cannot tell the difference (docs/aclnn-host.md says why).
 */
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "internal.h"

/* --- initialisation ----------------------------------------------------- */

/* aclInit/aclFinalize state, as the vendor keeps it (acl.cpp:382-392,
 * 630-645): a count of aclInit calls and a "finalized" flag that starts
 * false, so that aclFinalize without aclInit succeeds once. */
static pthread_mutex_t init_lock = PTHREAD_MUTEX_INITIALIZER;
static unsigned long init_count;
static bool finalized;

aclError aclInit(const char *configPath)
{
    (void)configPath; /* the device's JSON configuration means nothing here */
    aclError rc = ACL_SUCCESS;
    pthread_mutex_lock(&init_lock);
    if (init_count > 0) {
        init_count++;
        host_error("aclInit: the runtime is already initialised (call aclFinalize first)");
        rc = ACL_ERROR_REPEAT_INITIALIZE;
    } else {
        const char *why = NULL;
        if (host_chip_get(&why) == NULL) {
            host_error("aclInit: %s", why);
            rc = ACL_ERROR_INVALID_PARAM;
        } else {
            init_count = 1;
            finalized = false;
        }
    }
    pthread_mutex_unlock(&init_lock);
    return rc;
}

aclError aclFinalize(void)
{
    aclError rc = ACL_SUCCESS;
    pthread_mutex_lock(&init_lock);
    if (finalized) {
        host_error("aclFinalize: the runtime is already finalized");
        rc = ACL_ERROR_REPEAT_FINALIZE;
    } else {
        finalized = true;
        init_count = 0;
        /* The runtime's end: what it held back of freed objects goes. */
        registry_release();
    }
    pthread_mutex_unlock(&init_lock);
    return rc;
}

/* --- the device --------------------------------------------------------- */

static aclError check_device(const char *call, int32_t deviceId)
{
    if (deviceId != 0) {
        host_error("%s: device %d does not exist; the host runtime has one device, 0", call,
                   (int)deviceId);
        return ACL_ERROR_RT_INVALID_DEVICEID;
    }
    return ACL_SUCCESS;
}

aclError aclrtSetDevice(int32_t deviceId)
{
    return check_device("aclrtSetDevice", deviceId);
}

aclError aclrtResetDevice(int32_t deviceId)
{
    return check_device("aclrtResetDevice", deviceId);
}

aclError aclrtGetDeviceCount(uint32_t *count)
{
    if (count == NULL) {
        host_error("aclrtGetDeviceCount: count is NULL");
        return ACL_ERROR_INVALID_PARAM;
    }
    *count = 1;
    return ACL_SUCCESS;
}

/* --- streams ------------------------------------------------------------ */

aclError aclrtCreateStream(aclrtStream *stream)
{
    if (stream == NULL) {
        host_error("aclrtCreateStream: stream is NULL");
        return ACL_ERROR_INVALID_PARAM;
    }
    host_stream *s = malloc(sizeof *s);
    if (s != NULL) {
        s->kind = HOST_STREAM;
        if (!registry_add(s)) {
            free(s);
            s = NULL;
        }
    }
    if (s == NULL) {
        host_error("aclrtCreateStream: out of host memory");
        return ACL_ERROR_RT_NO_STREAM_RESOURCE;
    }
    *stream = s;
    return ACL_SUCCESS;
}

aclError aclrtDestroyStream(aclrtStream stream)
{
    if (stream == NULL) {
        host_error("aclrtDestroyStream: stream is NULL");
        return ACL_ERROR_INVALID_PARAM;
    }
    if (!registry_take(stream, HOST_STREAM)) {
        host_error("aclrtDestroyStream: %p is not a stream of aclrtCreateStream (or it was "
                   "destroyed)", stream);
        return ACL_ERROR_RT_PARAM_INVALID;
    }
    registry_retire(stream, HOST_STREAM);
    return ACL_SUCCESS;
}

aclError aclrtSynchronizeStream(aclrtStream stream)
{
    /* NULL is the default stream, as on the device (stream.cpp:121-135
     * has no NULL check). */
    if (stream != NULL && !registry_has(stream, HOST_STREAM)) {
        host_error("aclrtSynchronizeStream: %p is not a stream of aclrtCreateStream (or it "
                   "was destroyed)", stream);
        return ACL_ERROR_RT_PARAM_INVALID;
    }
    return ACL_SUCCESS;
}

/* --- device memory ------------------------------------------------------ */

/* The device rounds a request up to 32 bytes and pads it by 32 more
 * (memory.cpp:291-306); the host does the same, so that a program that
 * reads a little past its tensor reads its own memory here as there.  The
 * address is aligned to 64 bytes, a multiple of the 32 that aclCreateTensor
 * requires of device addresses. */
#define DEVICE_ALIGN 32
#define DEVICE_PADDING 32
#define HOST_ALIGN 64

aclError aclrtMalloc(void **devPtr, size_t size, aclrtMemMallocPolicy policy)
{
    (void)policy; /* page policies mean nothing here; the device accepts any */
    if (devPtr == NULL) {
        host_error("aclrtMalloc: devPtr is NULL");
        return ACL_ERROR_INVALID_PARAM;
    }
    if (size == 0) {
        host_error("aclrtMalloc: size is 0; it must be positive");
        return ACL_ERROR_INVALID_PARAM;
    }
    if (size > SIZE_MAX - (DEVICE_PADDING + HOST_ALIGN)) {
        host_error("aclrtMalloc: size %zu is too large", size);
        return ACL_ERROR_INVALID_PARAM;
    }
    size_t padded = (size + DEVICE_PADDING + DEVICE_ALIGN - 1) / DEVICE_ALIGN * DEVICE_ALIGN;
    padded = (padded + HOST_ALIGN - 1) / HOST_ALIGN * HOST_ALIGN; /* aligned_alloc's rule */
    void *p = aligned_alloc(HOST_ALIGN, padded);
    if (p != NULL && !registry_add_block(p, size)) {
        free(p);
        p = NULL;
    }
    if (p == NULL) {
        host_error("aclrtMalloc: out of host memory for %zu bytes", size);
        return ACL_ERROR_RT_MEMORY_ALLOCATION;
    }
    *devPtr = p;
    return ACL_SUCCESS;
}

aclError aclrtFree(void *devPtr)
{
    if (devPtr == NULL) {
        host_error("aclrtFree: devPtr is NULL");
        return ACL_ERROR_INVALID_PARAM;
    }
    size_t size;
    if (!registry_take_block(devPtr, &size)) {
        host_error("aclrtFree: %p is not an address aclrtMalloc returned (or it was freed)",
                   devPtr);
        return ACL_ERROR_RT_MEMORY_FREE;
    }
    free(devPtr);
    return ACL_SUCCESS;
}

aclError aclrtMemcpy(void *dst, size_t destMax, const void *src, size_t count,
                     aclrtMemcpyKind kind)
{
    /* The vendor's order of checks (memory.cpp:650-666, then the runtime's
     * api_error.cc:2129-2139): nothing to copy succeeds before anything is
     * looked at. */
    if (count == 0)
        return ACL_SUCCESS;
    if (dst == NULL || src == NULL) {
        host_error("aclrtMemcpy: %s is NULL", dst == NULL ? "dst" : "src");
        return ACL_ERROR_INVALID_PARAM;
    }
    if ((int)kind < (int)ACL_MEMCPY_HOST_TO_HOST ||
        (int)kind > (int)ACL_MEMCPY_HOST_TO_BUF_TO_DEVICE) {
        host_error("aclrtMemcpy: kind %d is not a direction aclrtMemcpy takes (0 to 5)",
                   (int)kind);
        return ACL_ERROR_INVALID_PARAM;
    }
    if (destMax == 0 || count > destMax) {
        host_error("aclrtMemcpy: count %zu is more than destMax %zu", count, destMax);
        return ACL_ERROR_RT_PARAM_INVALID;
    }
    if (dst != src)
        memmove(dst, src, count);
    return ACL_SUCCESS;
}

/*
 * fake_runtime.c - the runtime half of a fake Ascend ACL (aclInit, aclrt*,
 * aclCreateTensor, aclCreateIntArray), so the npu backend is built, run and
 * held to account on machines without a device.
 *
 * It is strict where the real runtime is unforgiving and loud where the
 * real one is silent: device addresses are host addresses with high bits
 * flipped, so host code that dereferences one crashes at once; copies and
 * frees are checked against the live allocations; work on a stream runs
 * only at aclrtSynchronizeStream, so a copy that does not wait reads stale
 * bytes.  Every acquisition and release is counted, and the counts are
 * written when the library is unloaded (dlclose or exit) to the file named
 * by FAKE_ACL_REPORT, so a test can check that everything came back.
 *
 * Built with FAKE_ACL_NO_INT_ARRAY it lacks aclCreateIntArray and
 * aclDestroyIntArray, as an old libnnopbase might.
 *
 * Faults on demand, all read at each call (so a test can change them
 * between calls), counted from 1 since the library was loaded:
 *   FAKE_ACL_FAIL_MALLOC=n   the n-th aclrtMalloc call is refused
 *   FAKE_ACL_FAIL_MEMCPY=n   the n-th aclrtMemcpy call fails
 *   FAKE_ACL_FAIL_TENSOR=n   the n-th aclCreateTensor call returns NULL
 *   FAKE_ACL_FAIL_SYNC=n     the n-th aclrtSynchronizeStream fails
 *   FAKE_ACL_FAIL_STREAM=n   the n-th aclrtCreateStream fails
 *   FAKE_ACL_FAIL_INT_ARRAY=n the n-th aclCreateIntArray call returns NULL
 *   FAKE_ACL_DEVICES=n       devices 0..n-1 exist (default 1)
 *   FAKE_ACL_SOC_NAME=name   the chip aclrtGetSocName() names; unset, it
 *                            returns NULL, as a runtime that cannot tell
 * The operator half reads its own (fake_operator.c).  Single-threaded, as
 * the backend is.
 */
#include "fake_acl.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Error codes in the real runtime's ranges; only their being non-zero and
 * reported matters to the backend. */
#define FAKE_ERROR_INVALID_PARAM 100000
#define FAKE_ERROR_UNINITIALIZE 100001
#define FAKE_ERROR_REPEAT_INITIALIZE 100002
#define FAKE_ERROR_INVALID_DEVICE 107001
#define FAKE_ERROR_MEMORY_ALLOCATION 207001
#define FAKE_ERROR_STREAM_SYNC 507000
#define FAKE_ERROR_MEMCPY 507033

/* x86-64 and AArch64 both fault on these bits (non-canonical address, or
 * beyond the 48-bit translation range and below AArch64's ignored top
 * byte), so a device address can never be read as memory by mistake. */
#define FAKE_DEVICE_MASK ((uintptr_t)0x00f0000000000000u)

typedef struct allocation {
    unsigned char *host;
    size_t size;
} allocation;

#define FAKE_STREAM_MAGIC 0x57ea4u
#define FAKE_MAX_QUEUED 16
typedef struct fake_stream {
    uint32_t magic;
    size_t queued;
    struct {
        void (*fn)(void *);
        void *arg;
    } work[FAKE_MAX_QUEUED];
} fake_stream;

static fake_acl_stats stats;
static bool initialized;
static long devices_current; /* set minus reset */
static allocation *allocs;
static size_t num_allocs, cap_allocs;
static size_t pending_work; /* queued on any stream, not yet synchronized */
static char recent_error[512];

fake_acl_stats *fake_acl_stats_get(void)
{
    return &stats;
}

long fake_acl_env_long(const char *name, long fallback)
{
    const char *v = getenv(name);
    if (v == NULL || *v == '\0')
        return fallback;
    return strtol(v, NULL, 0);
}

void fake_acl_misuse(const char *fmt, ...)
{
    if (stats.misuses++ == 0) {
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(stats.first_misuse, sizeof stats.first_misuse, fmt, ap);
        va_end(ap);
    }
}

void fake_acl_set_error(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(recent_error, sizeof recent_error, fmt, ap);
    va_end(ap);
}

static void *to_device(void *host)
{
    return (void *)((uintptr_t)host ^ FAKE_DEVICE_MASK);
}

static unsigned char *to_host(const void *dev)
{
    return (unsigned char *)((uintptr_t)dev ^ FAKE_DEVICE_MASK);
}

/* The allocation that holds [host, host+bytes), or NULL. */
static allocation *find_allocation(const unsigned char *host, size_t bytes)
{
    for (size_t i = 0; i < num_allocs; i++) {
        allocation *a = &allocs[i];
        if (host >= a->host && host <= a->host + a->size &&
            bytes <= (size_t)(a->host + a->size - host))
            return a;
    }
    return NULL;
}

void *fake_acl_host(const void *dev, size_t bytes, const char *what)
{
    unsigned char *host = to_host(dev);
    if (dev == NULL || find_allocation(host, bytes) == NULL) {
        fake_acl_misuse("%s: %zu bytes at device address %p are not in a live allocation",
                        what, bytes, dev);
        return NULL;
    }
    return host;
}

static bool check_initialized(const char *call)
{
    if (!initialized)
        fake_acl_misuse("%s called outside aclInit/aclFinalize", call);
    return initialized;
}

aclError aclInit(const char *configPath)
{
    if (initialized) {
        fake_acl_misuse("aclInit called twice");
        return FAKE_ERROR_REPEAT_INITIALIZE;
    }
    initialized = true;
    stats.inits++;
    return ACL_SUCCESS;
}

aclError aclFinalize(void)
{
    if (!check_initialized("aclFinalize"))
        return FAKE_ERROR_UNINITIALIZE;
    if (num_allocs > 0 || devices_current > 0 || stats.streams_created != stats.streams_destroyed)
        fake_acl_misuse("aclFinalize with %zu allocations, %ld devices, %ld streams still held",
                        num_allocs, devices_current,
                        stats.streams_created - stats.streams_destroyed);
    initialized = false;
    stats.finalizes++;
    return ACL_SUCCESS;
}

aclError aclrtSetDevice(int32_t deviceId)
{
    if (!check_initialized("aclrtSetDevice"))
        return FAKE_ERROR_UNINITIALIZE;
    long devices = fake_acl_env_long("FAKE_ACL_DEVICES", 1);
    if (deviceId < 0 || deviceId >= devices) {
        fake_acl_set_error("fake ACL: device %d does not exist (%ld devices)", (int)deviceId,
                           devices);
        return FAKE_ERROR_INVALID_DEVICE;
    }
    devices_current++;
    stats.devices_set++;
    return ACL_SUCCESS;
}

aclError aclrtResetDevice(int32_t deviceId)
{
    if (!check_initialized("aclrtResetDevice"))
        return FAKE_ERROR_UNINITIALIZE;
    if (devices_current == 0) {
        fake_acl_misuse("aclrtResetDevice(%d) without aclrtSetDevice", (int)deviceId);
        return FAKE_ERROR_INVALID_DEVICE;
    }
    devices_current--;
    stats.devices_reset++;
    return ACL_SUCCESS;
}

static fake_stream *as_stream(aclrtStream stream, const char *call)
{
    fake_stream *s = stream;
    if (s == NULL || s->magic != FAKE_STREAM_MAGIC) {
        fake_acl_misuse("%s: %p is not a live stream", call, stream);
        return NULL;
    }
    return s;
}

aclError aclrtCreateStream(aclrtStream *stream)
{
    if (!check_initialized("aclrtCreateStream"))
        return FAKE_ERROR_UNINITIALIZE;
    if (stream == NULL || devices_current == 0) {
        fake_acl_misuse("aclrtCreateStream without a device or out-pointer");
        return FAKE_ERROR_INVALID_PARAM;
    }
    if (++stats.stream_calls == fake_acl_env_long("FAKE_ACL_FAIL_STREAM", 0)) {
        fake_acl_set_error("fake ACL: stream %ld refused (FAKE_ACL_FAIL_STREAM)",
                           stats.stream_calls);
        return FAKE_ERROR_MEMORY_ALLOCATION;
    }
    fake_stream *s = calloc(1, sizeof *s);
    if (s == NULL)
        return FAKE_ERROR_MEMORY_ALLOCATION;
    s->magic = FAKE_STREAM_MAGIC;
    *stream = s;
    stats.streams_created++;
    return ACL_SUCCESS;
}

aclError aclrtDestroyStream(aclrtStream stream)
{
    if (!check_initialized("aclrtDestroyStream"))
        return FAKE_ERROR_UNINITIALIZE;
    fake_stream *s = as_stream(stream, "aclrtDestroyStream");
    if (s == NULL)
        return FAKE_ERROR_INVALID_PARAM;
    if (s->queued > 0) {
        fake_acl_misuse("aclrtDestroyStream with %zu operations never synchronized", s->queued);
        for (size_t i = 0; i < s->queued; i++)
            free(s->work[i].arg);
        pending_work -= s->queued;
    }
    s->magic = 0;
    free(s);
    stats.streams_destroyed++;
    return ACL_SUCCESS;
}

int fake_acl_enqueue(aclrtStream stream, void (*fn)(void *), void *arg, const char *call)
{
    fake_stream *s = as_stream(stream, call);
    if (s == NULL || s->queued == FAKE_MAX_QUEUED)
        return -1;
    s->work[s->queued].fn = fn;
    s->work[s->queued].arg = arg;
    s->queued++;
    pending_work++;
    return 0;
}

#ifndef FAKE_ACL_NO_SYNC
aclError aclrtSynchronizeStream(aclrtStream stream)
{
    if (!check_initialized("aclrtSynchronizeStream"))
        return FAKE_ERROR_UNINITIALIZE;
    fake_stream *s = as_stream(stream, "aclrtSynchronizeStream");
    if (s == NULL)
        return FAKE_ERROR_INVALID_PARAM;
    stats.syncs++;
    bool fail = stats.syncs == fake_acl_env_long("FAKE_ACL_FAIL_SYNC", 0);
    /* A failed synchronisation still leaves the stream idle (the work was
     * abandoned), so the memory can be freed afterwards. */
    for (size_t i = 0; i < s->queued; i++) {
        if (!fail)
            s->work[i].fn(s->work[i].arg);
        free(s->work[i].arg);
    }
    pending_work -= s->queued;
    s->queued = 0;
    if (fail) {
        fake_acl_set_error("fake ACL: injected stream failure (FAKE_ACL_FAIL_SYNC=%ld)",
                           stats.syncs);
        return FAKE_ERROR_STREAM_SYNC;
    }
    return ACL_SUCCESS;
}
#endif

aclError aclrtMalloc(void **devPtr, size_t size, aclrtMemMallocPolicy policy)
{
    if (!check_initialized("aclrtMalloc"))
        return FAKE_ERROR_UNINITIALIZE;
    stats.malloc_calls++;
    if (devPtr == NULL || size == 0 || devices_current == 0) {
        fake_acl_misuse("aclrtMalloc(%p, %zu) without a device, size or out-pointer",
                        (void *)devPtr, size);
        return FAKE_ERROR_INVALID_PARAM;
    }
    if (stats.malloc_calls == fake_acl_env_long("FAKE_ACL_FAIL_MALLOC", 0)) {
        stats.refused_mallocs++;
        fake_acl_set_error("fake ACL: allocation %ld of %zu bytes refused (FAKE_ACL_FAIL_MALLOC)",
                           stats.malloc_calls, size);
        return FAKE_ERROR_MEMORY_ALLOCATION;
    }
    if (num_allocs == cap_allocs) {
        size_t cap = cap_allocs ? 2 * cap_allocs : 16;
        allocation *grown = realloc(allocs, cap * sizeof *grown);
        if (grown == NULL)
            return FAKE_ERROR_MEMORY_ALLOCATION;
        allocs = grown;
        cap_allocs = cap;
    }
    /* Garbage, not zeros, so an output the operator never wrote shows. */
    unsigned char *host = malloc(size);
    if (host == NULL)
        return FAKE_ERROR_MEMORY_ALLOCATION;
    memset(host, 0xa5, size);
    allocs[num_allocs++] = (allocation){host, size};
    stats.mallocs++;
    stats.live_bytes += (long long)size;
    if (stats.live_bytes > stats.peak_bytes)
        stats.peak_bytes = stats.live_bytes;
    *devPtr = to_device(host);
    return ACL_SUCCESS;
}

aclError aclrtFree(void *devPtr)
{
    if (!check_initialized("aclrtFree"))
        return FAKE_ERROR_UNINITIALIZE;
    unsigned char *host = to_host(devPtr);
    for (size_t i = 0; i < num_allocs; i++) {
        if (allocs[i].host != host)
            continue;
        if (pending_work > 0)
            fake_acl_misuse("aclrtFree(%p) while stream work is pending", devPtr);
        stats.live_bytes -= (long long)allocs[i].size;
        stats.frees++;
        free(host);
        allocs[i] = allocs[--num_allocs];
        return ACL_SUCCESS;
    }
    fake_acl_misuse("aclrtFree(%p): not a live allocation", devPtr);
    return FAKE_ERROR_INVALID_PARAM;
}

aclError aclrtMemcpy(void *dst, size_t destMax, const void *src, size_t count,
                     aclrtMemcpyKind kind)
{
    if (!check_initialized("aclrtMemcpy"))
        return FAKE_ERROR_UNINITIALIZE;
    stats.memcpys++;
    if (stats.memcpys == fake_acl_env_long("FAKE_ACL_FAIL_MEMCPY", 0)) {
        fake_acl_set_error("fake ACL: copy %ld refused (FAKE_ACL_FAIL_MEMCPY)", stats.memcpys);
        return FAKE_ERROR_MEMCPY;
    }
    if (count > destMax || dst == NULL || src == NULL) {
        fake_acl_misuse("aclrtMemcpy(count %zu, destMax %zu, dst %p, src %p)", count, destMax,
                        dst, (void *)src);
        return FAKE_ERROR_INVALID_PARAM;
    }
    if (pending_work > 0)
        fake_acl_misuse("aclrtMemcpy while stream work is pending (no aclrtSynchronizeStream)");
    void *d = dst;
    const void *s = src;
    if (kind == ACL_MEMCPY_HOST_TO_DEVICE || kind == ACL_MEMCPY_DEVICE_TO_DEVICE)
        d = fake_acl_host(dst, destMax, "aclrtMemcpy destination");
    if (kind == ACL_MEMCPY_DEVICE_TO_HOST || kind == ACL_MEMCPY_DEVICE_TO_DEVICE)
        s = fake_acl_host(src, count, "aclrtMemcpy source");
    if (d == NULL || s == NULL || (int)kind < 0 || (int)kind > 3)
        return FAKE_ERROR_INVALID_PARAM;
    memcpy(d, s, count);
    return ACL_SUCCESS;
}

const char *aclrtGetSocName(void)
{
    return getenv("FAKE_ACL_SOC_NAME");
}

const char *aclGetRecentErrMsg(void)
{
    /* The real call hands the message over once; so does this one. */
    static char taken[sizeof recent_error];
    if (recent_error[0] == '\0')
        return NULL;
    memcpy(taken, recent_error, sizeof taken);
    recent_error[0] = '\0';
    return taken;
}

aclTensor *aclCreateTensor(const int64_t *viewDims, uint64_t viewDimsNum, aclDataType dataType,
                           const int64_t *stride, int64_t offset, aclFormat format,
                           const int64_t *storageDims, uint64_t storageDimsNum,
                           void *tensorData)
{
    if (!check_initialized("aclCreateTensor"))
        return NULL;
    if (++stats.tensor_calls == fake_acl_env_long("FAKE_ACL_FAIL_TENSOR", 0)) {
        fake_acl_set_error("fake ACL: tensor %ld refused (FAKE_ACL_FAIL_TENSOR)",
                           stats.tensor_calls);
        return NULL;
    }
    if (viewDimsNum > FAKE_MAX_DIMS || storageDimsNum > FAKE_MAX_DIMS ||
        (viewDimsNum > 0 && (viewDims == NULL || stride == NULL)) ||
        (storageDimsNum > 0 && storageDims == NULL)) {
        fake_acl_set_error("fake ACL: aclCreateTensor with bad dims");
        return NULL;
    }
    aclTensor *t = calloc(1, sizeof *t);
    if (t == NULL)
        return NULL;
    t->magic = FAKE_TENSOR_MAGIC;
    t->dtype = dataType;
    t->ndim = viewDimsNum;
    for (uint64_t i = 0; i < viewDimsNum; i++) {
        t->dims[i] = viewDims[i];
        t->strides[i] = stride[i];
    }
    t->offset = offset;
    t->format = format;
    t->storage_ndim = storageDimsNum;
    for (uint64_t i = 0; i < storageDimsNum; i++)
        t->storage_dims[i] = storageDims[i];
    t->data = tensorData;
    stats.tensors_created++;
    return t;
}

aclnnStatus aclDestroyTensor(const aclTensor *tensor)
{
    if (tensor == NULL || tensor->magic != FAKE_TENSOR_MAGIC) {
        fake_acl_misuse("aclDestroyTensor(%p): not a live tensor", (const void *)tensor);
        return 161001;
    }
    aclTensor *t = (aclTensor *)tensor;
    t->magic = 0;
    free(t);
    stats.tensors_destroyed++;
    return ACLNN_SUCCESS;
}

#ifndef FAKE_ACL_NO_INT_ARRAY
aclIntArray *aclCreateIntArray(const int64_t *value, uint64_t size)
{
    if (!check_initialized("aclCreateIntArray"))
        return NULL;
    if (++stats.int_array_calls == fake_acl_env_long("FAKE_ACL_FAIL_INT_ARRAY", 0)) {
        fake_acl_set_error("fake ACL: int array %ld refused (FAKE_ACL_FAIL_INT_ARRAY)",
                           stats.int_array_calls);
        return NULL;
    }
    if (size > 0 && value == NULL) {
        fake_acl_set_error("fake ACL: aclCreateIntArray(%p, %llu)", (const void *)value,
                           (unsigned long long)size);
        return NULL;
    }
    aclIntArray *a = malloc(sizeof *a + (size_t)size * sizeof a->values[0]);
    if (a == NULL)
        return NULL;
    a->magic = FAKE_INT_ARRAY_MAGIC;
    a->size = size;
    if (size > 0)
        memcpy(a->values, value, (size_t)size * sizeof a->values[0]);
    stats.int_arrays_created++;
    return a;
}

aclnnStatus aclDestroyIntArray(const aclIntArray *array)
{
    if (array == NULL || array->magic != FAKE_INT_ARRAY_MAGIC) {
        fake_acl_misuse("aclDestroyIntArray(%p): not a live int array", (const void *)array);
        return 161001;
    }
    aclIntArray *a = (aclIntArray *)array;
    a->magic = 0;
    free(a);
    stats.int_arrays_destroyed++;
    return ACLNN_SUCCESS;
}
#endif

/* Written once per load, so a process that loads the fake twice reports
 * twice; readers add the blocks up. */
static void write_report(void)
{
    const char *path = getenv("FAKE_ACL_REPORT");
    if (path == NULL || *path == '\0')
        return;
    FILE *f = fopen(path, "a");
    if (f == NULL)
        return;
    const struct {
        const char *key;
        long long value;
    } rows[] = {
#define ROW(field) {#field, (long long)stats.field}
        {"loads", 1},
        ROW(inits), ROW(finalizes), ROW(devices_set), ROW(devices_reset),
        ROW(stream_calls), ROW(streams_created), ROW(streams_destroyed),
        ROW(malloc_calls), ROW(mallocs), ROW(frees), ROW(refused_mallocs),
        ROW(live_bytes), ROW(peak_bytes), {"live_allocations", (long long)num_allocs},
        ROW(tensor_calls), ROW(tensors_created), ROW(tensors_destroyed),
        ROW(int_array_calls), ROW(int_arrays_created), ROW(int_arrays_destroyed),
        ROW(int_arrays_planned),
        ROW(plans), ROW(executors_created), ROW(executors_run),
        ROW(padded_plans), ROW(num_topk_minus1_plans), ROW(rank3_plans),
        ROW(long_index_plans), ROW(wide_row_plans),
        ROW(memcpys), ROW(syncs), ROW(operator_runs), ROW(misuses),
#undef ROW
    };
    for (size_t i = 0; i < sizeof rows / sizeof rows[0]; i++)
        fprintf(f, "%s %lld\n", rows[i].key, rows[i].value);
    if (stats.misuses > 0)
        fprintf(f, "first_misuse %s\n", stats.first_misuse);
    fclose(f);
}

/* Leaks of the backend stay visible in the report; the fake's own
 * bookkeeping goes, so leak checkers run on moeperm see only moeperm. */
__attribute__((destructor)) static void unload(void)
{
    write_report();
    for (size_t i = 0; i < num_allocs; i++)
        free(allocs[i].host);
    free(allocs);
    allocs = NULL;
    num_allocs = cap_allocs = 0;
}

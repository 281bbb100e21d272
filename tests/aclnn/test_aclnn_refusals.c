/*
 * What the host runtime refuses, with which code and which sentence.
 *
 * The runtime calls return the vendor's ACL codes (NULLs and sizes
 * ACL_ERROR_INVALID_PARAM, count > destMax ACL_ERROR_RT_PARAM_INVALID,
 * ...).  An operator's first phase refuses what the device's host code
 * refuses, reading no tensor data: NULLs 161001, dtypes and formats
 * 161002 (561003 for the optional probs), the tiling's limits 561002; and
 * an empty output set is a success that runs nothing.  Its second phase
 * refuses what only the data shows (a negative index, two slots naming one
 * row of MoeTokenUnpermuteGrad's output, memory that is not the device's)
 * with 161002 and leaves the outputs as they were.  Every refusal sets a
 * message for this thread alone, and nothing leaks.
 */
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "acl/acl.h"
#include "aclnn/opdev/op_errno.h"
#include "aclnnop/aclnn_moe_token_permute.h"
#include "aclnnop/aclnn_moe_token_permute_grad.h"
#include "aclnnop/aclnn_moe_token_unpermute.h"
#include "aclnnop/aclnn_moe_token_unpermute_grad.h"
#include "internal.h"

/* The message of the last failure on this thread contains want. */
static void message_names(const char *want)
{
    const char *msg = aclGetRecentErrMsg();
    if (msg == NULL)
        fail_msg("no message; expected one naming \"%s\"", want);
    if (strstr(msg, want) == NULL)
        fail_msg("the message \"%s\" does not name \"%s\"", msg, want);
    assert_null(aclGetRecentErrMsg()); /* reading clears it */
}

#define EXPECT(call, code, want)                                                                \
    do {                                                                                        \
        int got_ = (int)(call);                                                                 \
        if (got_ != (int)(code))                                                                \
            fail_msg("%s returned %d, not %d (%s)", #call, got_, (int)(code),                   \
                     aclGetRecentErrMsg() ? aclGetRecentErrMsg() : "no message");               \
        message_names(want);                                                                    \
    } while (0)

/* --- the fixture: a runtime, a stream, and a count of what lives ---------- */

static host_live before;
static aclrtStream stream;
static size_t tensor_count; /* the device tensors below */

static int setup(void **state)
{
    (void)state;
    tensor_count = 0; /* what a failed test left is its own failure, not the next one's */
    host_live_get(&before);
    assert_int_equal(aclrtCreateStream(&stream), ACL_SUCCESS);
    while (aclGetRecentErrMsg() != NULL)
        ;
    return 0;
}

static int teardown(void **state)
{
    (void)state;
    assert_int_equal(aclrtDestroyStream(stream), ACL_SUCCESS);
    host_live now;
    host_live_get(&now);
    for (int k = 0; k < HOST_KINDS; k++)
        if (now.count[k] != before.count[k])
            fail_msg("objects of kind %d: %llu before the test, %llu after", k,
                     (unsigned long long)before.count[k], (unsigned long long)now.count[k]);
    assert_int_equal(now.bytes, before.bytes);
    return 0;
}

/* --- device tensors ------------------------------------------------------- */

#define MAX_TENSORS 8

typedef struct dev {
    aclTensor *t;
    void *mem;
    size_t bytes;
} dev;

static dev tensors[MAX_TENSORS];

static size_t size_of(aclDataType dt)
{
    return dt == ACL_INT64 ? 8 : dt == ACL_FLOAT || dt == ACL_INT32 ? 4 : dt == ACL_INT8 ? 1 : 2;
}

/* A contiguous tensor in fresh device memory filled with byte fill. */
static aclTensor *make(aclDataType dt, uint64_t ndim, const int64_t *dims, unsigned char fill)
{
    assert_true(tensor_count < MAX_TENSORS);
    dev *d = &tensors[tensor_count++];
    int64_t n = 1;
    for (uint64_t i = 0; i < ndim; i++)
        n *= dims[i];
    d->bytes = (size_t)(n > 0 ? n : 1) * size_of(dt);
    assert_int_equal(aclrtMalloc(&d->mem, d->bytes, ACL_MEM_MALLOC_HUGE_FIRST), ACL_SUCCESS);
    unsigned char *host = malloc(d->bytes);
    assert_non_null(host);
    memset(host, fill, d->bytes);
    assert_int_equal(aclrtMemcpy(d->mem, d->bytes, host, d->bytes, ACL_MEMCPY_HOST_TO_DEVICE), 0);
    free(host);
    d->t = aclCreateTensor(dims, ndim, dt, NULL, 0, ACL_FORMAT_ND, dims, ndim, d->mem);
    assert_non_null(d->t);
    return d->t;
}

#define T(dt, ...) make(dt, sizeof((int64_t[]){__VA_ARGS__}) / 8, (int64_t[]){__VA_ARGS__}, 0)

static dev *dev_of(const aclTensor *t)
{
    for (size_t i = 0; i < tensor_count; i++)
        if (tensors[i].t == t)
            return &tensors[i];
    fail_msg("no such tensor");
    return NULL;
}

static void upload(const aclTensor *t, const void *host, size_t bytes)
{
    dev *d = dev_of(t);
    assert_true(bytes <= d->bytes);
    assert_int_equal(aclrtMemcpy(d->mem, d->bytes, host, bytes, ACL_MEMCPY_HOST_TO_DEVICE), 0);
}

static void download(const aclTensor *t, void *host)
{
    dev *d = dev_of(t);
    assert_int_equal(aclrtMemcpy(host, d->bytes, d->mem, d->bytes, ACL_MEMCPY_DEVICE_TO_HOST), 0);
}

static void free_tensors(void)
{
    for (size_t i = 0; i < tensor_count; i++) {
        assert_int_equal(aclDestroyTensor(tensors[i].t), ACLNN_SUCCESS);
        assert_int_equal(aclrtFree(tensors[i].mem), ACL_SUCCESS);
    }
    tensor_count = 0;
}

/* --- the runtime's own codes --------------------------------------------- */

static void test_init_and_finalize_count_as_on_the_device(void **state)
{
    (void)state;
    /* main() initialised once. */
    EXPECT(aclInit(NULL), ACL_ERROR_REPEAT_INITIALIZE, "already initialised");
    assert_int_equal(aclFinalize(), ACL_SUCCESS);
    EXPECT(aclFinalize(), ACL_ERROR_REPEAT_FINALIZE, "already finalized");
    assert_int_equal(aclInit("/no/such/config.json"), ACL_SUCCESS);
}

static void test_one_device_numbered_zero(void **state)
{
    (void)state;
    uint32_t count = 7;
    assert_int_equal(aclrtGetDeviceCount(&count), ACL_SUCCESS);
    assert_int_equal(count, 1);
    EXPECT(aclrtGetDeviceCount(NULL), ACL_ERROR_INVALID_PARAM, "count");
    assert_int_equal(aclrtSetDevice(0), ACL_SUCCESS);
    assert_int_equal(aclrtSetDevice(0), ACL_SUCCESS);
    EXPECT(aclrtSetDevice(3), ACL_ERROR_RT_INVALID_DEVICEID, "device 3");
    EXPECT(aclrtResetDevice(-1), ACL_ERROR_RT_INVALID_DEVICEID, "device -1");
    assert_int_equal(aclrtResetDevice(0), ACL_SUCCESS);
    assert_string_equal(aclrtGetSocName(), "Ascend910B2");
}

static void test_device_memory_is_aligned_and_freed_once(void **state)
{
    (void)state;
    void *p = NULL;
    EXPECT(aclrtMalloc(NULL, 8, ACL_MEM_MALLOC_HUGE_FIRST), ACL_ERROR_INVALID_PARAM, "devPtr");
    EXPECT(aclrtMalloc(&p, 0, ACL_MEM_MALLOC_HUGE_FIRST), ACL_ERROR_INVALID_PARAM, "size is 0");
    EXPECT(aclrtMalloc(&p, SIZE_MAX, ACL_MEM_MALLOC_HUGE_FIRST), ACL_ERROR_INVALID_PARAM,
           "too large");
    for (size_t size = 1; size < 300; size += 37) {
        assert_int_equal(aclrtMalloc(&p, size, (aclrtMemMallocPolicy)size), ACL_SUCCESS);
        assert_int_equal((uintptr_t)p % 32, 0);
        /* The device pads every block by 32 bytes past its rounded size. */
        memset(p, 0xa5, (size + 31) / 32 * 32 + 32);
        EXPECT(aclrtFree((char *)p + 1), ACL_ERROR_RT_MEMORY_FREE, "not an address");
        assert_int_equal(aclrtFree(p), ACL_SUCCESS);
        EXPECT(aclrtFree(p), ACL_ERROR_RT_MEMORY_FREE, "not an address");
    }
    EXPECT(aclrtFree(NULL), ACL_ERROR_INVALID_PARAM, "devPtr");
}

static void test_memcpy_honours_dest_max_and_its_kinds(void **state)
{
    (void)state;
    char src[16] = "0123456789abcde", dst[16];
    memset(dst, '.', sizeof dst);
    EXPECT(aclrtMemcpy(dst, 8, src, 9, ACL_MEMCPY_HOST_TO_HOST), ACL_ERROR_RT_PARAM_INVALID,
           "count 9 is more than destMax 8");
    for (size_t i = 0; i < sizeof dst; i++)
        assert_int_equal(dst[i], '.'); /* nothing copied */
    EXPECT(aclrtMemcpy(dst, 0, src, 1, ACL_MEMCPY_HOST_TO_HOST), ACL_ERROR_RT_PARAM_INVALID,
           "destMax 0");
    assert_int_equal(aclrtMemcpy(NULL, 0, NULL, 0, ACL_MEMCPY_DEVICE_TO_HOST), ACL_SUCCESS);
    EXPECT(aclrtMemcpy(NULL, 8, src, 8, ACL_MEMCPY_HOST_TO_HOST), ACL_ERROR_INVALID_PARAM, "dst");
    EXPECT(aclrtMemcpy(dst, 8, NULL, 8, ACL_MEMCPY_HOST_TO_HOST), ACL_ERROR_INVALID_PARAM, "src");
    EXPECT(aclrtMemcpy(dst, 8, src, 8, ACL_MEMCPY_INNER_DEVICE_TO_DEVICE), ACL_ERROR_INVALID_PARAM,
           "kind 6");
    EXPECT(aclrtMemcpy(dst, 8, src, 8, (aclrtMemcpyKind)-1), ACL_ERROR_INVALID_PARAM, "kind -1");
    assert_int_equal(aclrtMemcpy(dst, 16, src, 16, ACL_MEMCPY_HOST_TO_BUF_TO_DEVICE), 0);
    assert_memory_equal(dst, src, 16);
}

static void test_streams_are_checked_handles(void **state)
{
    (void)state;
    aclrtStream s;
    EXPECT(aclrtCreateStream(NULL), ACL_ERROR_INVALID_PARAM, "stream is NULL");
    EXPECT(aclrtDestroyStream(NULL), ACL_ERROR_INVALID_PARAM, "stream is NULL");
    assert_int_equal(aclrtSynchronizeStream(NULL), ACL_SUCCESS); /* the default stream */
    assert_int_equal(aclrtCreateStream(&s), ACL_SUCCESS);
    assert_int_equal(aclrtSynchronizeStream(s), ACL_SUCCESS);
    assert_int_equal(aclrtDestroyStream(s), ACL_SUCCESS);
    EXPECT(aclrtSynchronizeStream(s), ACL_ERROR_RT_PARAM_INVALID, "not a stream");
    EXPECT(aclrtDestroyStream(s), ACL_ERROR_RT_PARAM_INVALID, "not a stream");
    aclTensor *t = T(ACL_FLOAT, 2);
    EXPECT(aclrtDestroyStream((aclrtStream)t), ACL_ERROR_RT_PARAM_INVALID, "not a stream");
    free_tensors();
}

static void test_tensors_and_int_arrays_refuse_what_they_cannot_hold(void **state)
{
    (void)state;
    int64_t dims[9] = {1, 1, 1, 1, 1, 1, 1, 1, 1}, neg[2] = {2, -1};
    assert_null(aclCreateTensor(NULL, 2, ACL_FLOAT, NULL, 0, ACL_FORMAT_ND, dims, 2, NULL));
    message_names("viewDims is NULL");
    assert_null(aclCreateTensor(dims, 2, ACL_FLOAT, NULL, 0, ACL_FORMAT_ND, NULL, 1, NULL));
    message_names("storageDims is NULL");
    assert_null(aclCreateTensor(dims, 9, ACL_FLOAT, NULL, 0, ACL_FORMAT_ND, dims, 9, NULL));
    message_names("at most 8");
    assert_null(aclCreateTensor(neg, 2, ACL_FLOAT, NULL, 0, ACL_FORMAT_ND, dims, 1, NULL));
    message_names("viewDims[1] = -1");
    assert_null(aclCreateTensor(dims, 2, ACL_FLOAT, neg, 0, ACL_FORMAT_ND, dims, 1, NULL));
    message_names("stride[1] = -1");
    assert_null(aclCreateTensor(dims, 2, ACL_FLOAT, NULL, -4, ACL_FORMAT_ND, dims, 1, NULL));
    message_names("offset -4");
    /* No data, an unknown dtype and format: accepted here, as on the device. */
    aclTensor *t = aclCreateTensor(dims, 2, (aclDataType)99, NULL, 0, (aclFormat)77, dims, 2,
                                   NULL);
    assert_non_null(t);
    assert_int_equal(aclDestroyTensor(t), ACLNN_SUCCESS);
    EXPECT(aclDestroyTensor(t), ACLNN_ERR_PARAM_INVALID, "not a tensor");
    assert_int_equal(aclDestroyTensor(NULL), ACLNN_SUCCESS);

    int64_t values[3] = {4, 5, 6};
    assert_null(aclCreateIntArray(NULL, 3));
    message_names("value is NULL");
    aclIntArray *a = aclCreateIntArray(values, 3), *e = aclCreateIntArray(NULL, 0);
    assert_non_null(a);
    assert_non_null(e);
    values[0] = 9; /* copied, not referenced */
    assert_int_equal(a->values[0], 4);
    assert_int_equal(aclDestroyIntArray(a), ACLNN_SUCCESS);
    assert_int_equal(aclDestroyIntArray(e), ACLNN_SUCCESS);
    EXPECT(aclDestroyIntArray(a), ACLNN_ERR_PARAM_INVALID, "not an array");
    assert_int_equal(aclDestroyIntArray(NULL), ACLNN_SUCCESS);
}

static void *fail_and_read(void *arg)
{
    (void)arg;
    aclrtSetDevice(5);
    const char *msg = aclGetRecentErrMsg();
    return msg != NULL && strstr(msg, "device 5") != NULL ? (void *)1 : NULL;
}

static void test_error_message_is_per_thread_and_read_once(void **state)
{
    (void)state;
    assert_null(aclGetRecentErrMsg());
    assert_int_equal(aclrtSetDevice(9), ACL_ERROR_RT_INVALID_DEVICEID);
    pthread_t other;
    void *seen;
    assert_int_equal(pthread_create(&other, NULL, fail_and_read, NULL), 0);
    assert_int_equal(pthread_join(other, &seen), 0);
    assert_non_null(seen);     /* the other thread read its own failure */
    message_names("device 9"); /* and this one still has its own */
}

/* --- first phases: what the device's host code refuses ------------------- */

/* MoeTokenPermute's tensors: tokens [3, 4], indices [3, 2], outputs [6, 4]
 * and [6]. */
typedef struct permute_args {
    aclTensor *x, *ix, *out, *sorted;
} permute_args;

static permute_args permute_tensors(aclDataType tokens, aclDataType index)
{
    permute_args a = {T(tokens, 3, 4), T(index, 3, 2), T(tokens, 6, 4), T(ACL_INT32, 6)};
    return a;
}

static aclnnStatus permute_plan(const permute_args *a, int64_t num_out, bool padded)
{
    uint64_t ws;
    aclOpExecutor *ex = (aclOpExecutor *)&ws;
    aclnnStatus st = aclnnMoeTokenPermuteGetWorkspaceSize(a->x, a->ix, num_out, padded, a->out,
                                                          a->sorted, &ws, &ex);
    if (st == ACLNN_SUCCESS)
        assert_int_equal(aclnnMoeTokenPermute(NULL, ws, ex, stream), ACLNN_SUCCESS);
    else
        assert_null(ex);
    return st;
}

static void test_permute_first_phase_refusals(void **state)
{
    (void)state;
    permute_args a = permute_tensors(ACL_BF16, ACL_INT32);
    uint64_t ws;
    aclOpExecutor *ex;
    EXPECT(aclnnMoeTokenPermuteGetWorkspaceSize(NULL, a.ix, 0, false, a.out, a.sorted, &ws, &ex),
           ACLNN_ERR_PARAM_NULLPTR, "tokens is NULL");
    EXPECT(aclnnMoeTokenPermuteGetWorkspaceSize(a.x, a.ix, 0, false, a.out, NULL, &ws, &ex),
           ACLNN_ERR_PARAM_NULLPTR, "sortedIndicesOut is NULL");
    EXPECT(aclnnMoeTokenPermuteGetWorkspaceSize(a.x, a.ix, 0, false, a.out, a.sorted, NULL, &ex),
           ACLNN_ERR_PARAM_NULLPTR, "workspaceSize is NULL");
    EXPECT(aclnnMoeTokenPermuteGetWorkspaceSize(a.x, a.ix, 0, false, a.out, a.sorted, &ws, NULL),
           ACLNN_ERR_PARAM_NULLPTR, "executor is NULL");
    EXPECT(permute_plan(&a, 0, true), ACLNN_ERR_INNER_TILING_ERROR, "paddedMode");
    EXPECT(permute_plan(&a, 5, false), ACLNN_ERR_INNER_TILING_ERROR, "numOutTokens = 5 keeps 5");
    EXPECT(permute_plan(&a, -1, false), ACLNN_ERR_INNER_TILING_ERROR, "has 6 rows");
    assert_int_equal(permute_plan(&a, 0, false), ACLNN_SUCCESS);
    assert_int_equal(permute_plan(&a, 6, false), ACLNN_SUCCESS);
    assert_int_equal(permute_plan(&a, 99, false), ACLNN_SUCCESS); /* clamped to 6 */
    free_tensors();

    permute_args bad = {T(ACL_INT32, 3, 4), T(ACL_INT32, 3, 2), T(ACL_INT32, 6, 4),
                        T(ACL_INT32, 6)};
    EXPECT(permute_plan(&bad, 0, false), ACLNN_ERR_PARAM_INVALID, "tokens has dtype 3");
    free_tensors();
    bad = (permute_args){T(ACL_FLOAT, 3, 4), T(ACL_FLOAT, 3, 2), T(ACL_FLOAT, 6, 4),
                         T(ACL_INT32, 6)};
    EXPECT(permute_plan(&bad, 0, false), ACLNN_ERR_PARAM_INVALID, "indices has dtype 0");
    free_tensors();
    bad = (permute_args){T(ACL_FLOAT, 3, 4), T(ACL_INT64, 3, 2), T(ACL_FLOAT16, 6, 4),
                         T(ACL_INT32, 6)};
    EXPECT(permute_plan(&bad, 0, false), ACLNN_ERR_PARAM_INVALID,
           "permuteTokensOut is ACL_FLOAT16 but tokens is ACL_FLOAT");
    free_tensors();
    bad = (permute_args){T(ACL_INT8, 3, 4), T(ACL_INT32, 3, 2, 1), T(ACL_INT8, 6, 4),
                         T(ACL_INT32, 6)};
    EXPECT(permute_plan(&bad, 0, false), ACLNN_ERR_INNER_TILING_ERROR, "indices has 3 dims");
    free_tensors();
    bad = (permute_args){T(ACL_INT8, 4, 4), T(ACL_INT32, 3, 2), T(ACL_INT8, 6, 4),
                         T(ACL_INT32, 6)};
    EXPECT(permute_plan(&bad, 0, false), ACLNN_ERR_INNER_TILING_ERROR, "tokens has 4 rows");
    free_tensors();
    bad = (permute_args){T(ACL_INT8, 1, 4), T(ACL_INT32, 1, 513), T(ACL_INT8, 513, 4),
                         T(ACL_INT32, 513)};
    EXPECT(permute_plan(&bad, 0, false), ACLNN_ERR_INNER_TILING_ERROR, "513 is above 512");
    free_tensors();
    bad = (permute_args){T(ACL_INT8, 3, 4), T(ACL_INT32, 3, 2), T(ACL_INT8, 24),
                         T(ACL_INT32, 6)};
    EXPECT(permute_plan(&bad, 0, false), ACLNN_ERR_INNER_TILING_ERROR, "at least 2");
    free_tensors();
    /* Tokens of rank 1, as libmoeperm refuses them (docs/operators.md). */
    bad = (permute_args){T(ACL_INT8, 3), T(ACL_INT32, 3, 2), T(ACL_INT8, 6, 1), T(ACL_INT32, 6)};
    EXPECT(permute_plan(&bad, 0, false), ACLNN_ERR_INNER_TILING_ERROR, "tokens has 1 dims");
    free_tensors();
    bad = (permute_args){T(ACL_INT8, 3, 4), T(ACL_INT32, 3, 2), T(ACL_INT8, 6, 5),
                         T(ACL_INT32, 6)};
    EXPECT(permute_plan(&bad, 0, false), ACLNN_ERR_INNER_TILING_ERROR, "holds 5 elements");
    free_tensors();
    bad = (permute_args){T(ACL_INT8, 3, 4), T(ACL_INT32, 3, 2), T(ACL_INT8, 6, 4),
                         T(ACL_INT32, 7)};
    EXPECT(permute_plan(&bad, 0, false), ACLNN_ERR_INNER_TILING_ERROR, "must be [6]");
    free_tensors();
    /* Both wrong: sortedIndicesOut is checked before the hidden size, as
     * the device's tiling checks them (moe_token_permute_tiling.cpp:252-268). */
    bad = (permute_args){T(ACL_INT8, 3, 4), T(ACL_INT32, 3, 2), T(ACL_INT8, 6, 5),
                         T(ACL_INT32, 7)};
    EXPECT(permute_plan(&bad, 0, false), ACLNN_ERR_INNER_TILING_ERROR, "must be [6]");
    free_tensors();

    /* A format other than ND. */
    int64_t d[2] = {3, 4};
    void *mem;
    assert_int_equal(aclrtMalloc(&mem, 64, ACL_MEM_MALLOC_HUGE_FIRST), 0);
    aclTensor *nchw = aclCreateTensor(d, 2, ACL_BF16, NULL, 0, ACL_FORMAT_NCHW, d, 2, mem);
    a = permute_tensors(ACL_BF16, ACL_INT32);
    a.x = nchw;
    EXPECT(permute_plan(&a, 0, false), ACLNN_ERR_PARAM_INVALID, "format 0");
    /* A view past its storage. */
    int64_t small[1] = {11};
    aclTensor *over = aclCreateTensor(d, 2, ACL_BF16, NULL, 0, ACL_FORMAT_ND, small, 1, mem);
    a.x = over;
    EXPECT(permute_plan(&a, 0, false), ACLNN_ERR_PARAM_INVALID, "reaches element 11");
    /* Not a tensor at all. */
    a.x = (aclTensor *)mem;
    EXPECT(permute_plan(&a, 0, false), ACLNN_ERR_PARAM_INVALID, "is not a tensor");
    assert_int_equal(aclDestroyTensor(nchw), 0);
    assert_int_equal(aclDestroyTensor(over), 0);
    assert_int_equal(aclrtFree(mem), 0);
    free_tensors();
}

/* A tensor over a few bytes of device memory whose view has the given dims
 * and strides (it may declare many more elements than the memory holds). */
static aclTensor *strided(aclDataType dt, uint64_t ndim, const int64_t *dims,
                          const int64_t *strides)
{
    assert_true(tensor_count < MAX_TENSORS);
    dev *d = &tensors[tensor_count++];
    d->bytes = 8;
    assert_int_equal(aclrtMalloc(&d->mem, d->bytes, ACL_MEM_MALLOC_HUGE_FIRST), ACL_SUCCESS);
    assert_int_equal(aclrtMemcpy(d->mem, d->bytes, (char[8]){0}, 8, ACL_MEMCPY_HOST_TO_DEVICE), 0);
    d->t = aclCreateTensor(dims, ndim, dt, strides, 0, ACL_FORMAT_ND, NULL, 0, d->mem);
    assert_non_null(d->t);
    return d->t;
}

/* A tensor without data whose view has the given dims and strides: the
 * first phase must refuse what is wrong with it on its metadata alone. */
static aclTensor *no_data(aclDataType dt, uint64_t ndim, const int64_t *dims,
                          const int64_t *strides)
{
    aclTensor *t = aclCreateTensor(dims, ndim, dt, strides, 0, ACL_FORMAT_ND, NULL, 0, NULL);
    assert_non_null(t);
    return t;
}

/* Extents past what an int64 counts are refused with the value, never
 * wrapped: the end of a view whose last element is element 2^63 - 1, and a
 * row of MoeTokenPermute's tokens or output of more than 2^63 - 1 elements
 * (two such rows must not pass as equal). */
static void test_extents_past_int64_are_refused(void **state)
{
    (void)state;
    int64_t dims[2] = {2, 1}, far[2] = {INT64_MAX, 0};
    aclTensor *x = no_data(ACL_INT8, 2, dims, far);
    permute_args a = {x, T(ACL_INT32, 2), T(ACL_INT8, 2, 1), T(ACL_INT32, 2)};
    EXPECT(permute_plan(&a, 0, false), ACLNN_ERR_PARAM_INVALID,
           "tokens: its last element is element 9223372036854775807");
    assert_int_equal(aclDestroyTensor(x), 0);
    free_tensors();

    int64_t wide[3] = {1, INT64_C(1) << 32, INT64_C(1) << 32}, zero[3] = {0, 0, 0};
    aclTensor *wx = no_data(ACL_INT8, 3, wide, zero), *wout = no_data(ACL_INT8, 3, wide, zero);
    a = (permute_args){wx, T(ACL_INT32, 1), wout, T(ACL_INT32, 1)};
    EXPECT(permute_plan(&a, 0, false), ACLNN_ERR_PARAM_INVALID,
           "a row of tokens holds more than 2^63 - 1 elements: dims[2] = 4294967296");
    a.x = T(ACL_INT8, 1, 4);
    EXPECT(permute_plan(&a, 0, false), ACLNN_ERR_PARAM_INVALID,
           "a row of permuteTokensOut holds more than 2^63 - 1 elements: dims[2] = 4294967296");
    assert_int_equal(aclDestroyTensor(wx), 0);
    assert_int_equal(aclDestroyTensor(wout), 0);
    free_tensors();

    /* Storage dims whose product passes 2^63 - 1. */
    int64_t huge[2] = {INT64_C(1) << 62, 4};
    void *mem;
    assert_int_equal(aclrtMalloc(&mem, 64, ACL_MEM_MALLOC_HUGE_FIRST), 0);
    aclTensor *sx = aclCreateTensor((int64_t[]){3, 4}, 2, ACL_BF16, NULL, 0, ACL_FORMAT_ND, huge,
                                    2, mem);
    a = permute_tensors(ACL_BF16, ACL_INT32);
    a.x = sx;
    EXPECT(permute_plan(&a, 0, false), ACLNN_ERR_PARAM_INVALID,
           "storageDims hold more than 2^63 - 1 elements: storageDims[1] = 4");
    assert_int_equal(aclDestroyTensor(sx), 0);
    assert_int_equal(aclrtFree(mem), 0);
    free_tensors();
}

/* The first phase's placeholder for the indices is never larger than the
 * memory the program holds for them: a sorted_indices view of 2^40 entries
 * (MoeTokenUnpermute reads only tokens x top_k of them) over one int32, or
 * over memory that is not the device's, costs nothing. */
static void test_first_phase_allocates_no_more_than_the_indices_hold(void **state)
{
    (void)state;
    uint64_t ws;
    aclOpExecutor *ex;
    int64_t many[1] = {INT64_C(1) << 40}, zero[1] = {0};
    aclTensor *x = T(ACL_FLOAT, 2, 2), *ix = strided(ACL_INT32, 1, many, zero),
              *probs = T(ACL_FLOAT, 1, 2), *out = T(ACL_FLOAT, 1, 2);
    float rows[4] = {1, 2, 3, 4}, p[2] = {0.5f, 0.25f}, result[2];
    upload(x, rows, sizeof rows);
    upload(probs, p, sizeof p);
    assert_int_equal(aclnnMoeTokenUnpermuteGetWorkspaceSize(x, ix, probs, false, NULL, out, &ws,
                                                            &ex),
                     ACLNN_SUCCESS);
    assert_int_equal(aclnnMoeTokenUnpermute(NULL, ws, ex, stream), ACLNN_SUCCESS);
    download(out, result);
    float want[2] = {0.5f * 1 + 0.25f * 1, 0.5f * 2 + 0.25f * 2}; /* both slots name row 0 */
    assert_memory_equal(result, want, sizeof want);

    static int32_t host[4];
    aclTensor *on_host = aclCreateTensor(many, 1, ACL_INT32, NULL, 0, ACL_FORMAT_ND, NULL, 0,
                                         host);
    assert_int_equal(aclnnMoeTokenUnpermuteGetWorkspaceSize(x, on_host, probs, false, NULL, out,
                                                            &ws, &ex),
                     ACLNN_SUCCESS);
    EXPECT(aclnnMoeTokenUnpermute(NULL, ws, ex, stream), ACLNN_ERR_PARAM_INVALID,
           "not inside device memory");
    assert_int_equal(aclDestroyTensor(on_host), 0);
    free_tensors();
}

/* Every output empty: the device runs nothing and succeeds. */
static void test_empty_outputs_are_a_success_that_runs_nothing(void **state)
{
    (void)state;
    permute_args a = {T(ACL_FLOAT, 0, 4), T(ACL_INT32, 0, 2), T(ACL_FLOAT, 0, 4),
                      T(ACL_INT32, 0)};
    assert_int_equal(permute_plan(&a, 0, true), ACLNN_SUCCESS); /* padded is not even read */
    free_tensors();

    /* MoeTokenUnpermuteGrad with no tokens: refused by the tiling while
     * probsGradOut has elements, a success when it has none either. */
    aclTensor *x = T(ACL_FLOAT, 4, 3), *g = T(ACL_FLOAT, 0, 3), *ix = T(ACL_INT32, 0),
              *tg = T(ACL_FLOAT, 4, 3), *pg = T(ACL_FLOAT, 1, 1);
    uint64_t ws;
    aclOpExecutor *ex;
    EXPECT(aclnnMoeTokenUnpermuteGradGetWorkspaceSize(x, g, ix, NULL, false, NULL, tg, pg, &ws,
                                                      &ex),
           ACLNN_ERR_INNER_TILING_ERROR, "must all be positive");
    free_tensors();
    x = T(ACL_FLOAT, 0, 3);
    g = T(ACL_FLOAT, 0, 3);
    ix = T(ACL_INT32, 0);
    tg = T(ACL_FLOAT, 0, 3);
    pg = T(ACL_FLOAT, 0);
    assert_int_equal(aclnnMoeTokenUnpermuteGradGetWorkspaceSize(x, g, ix, NULL, true, NULL, tg,
                                                                pg, &ws, &ex),
                     ACLNN_SUCCESS);
    assert_int_equal(ws, 0);
    assert_int_equal(aclnnMoeTokenUnpermuteGrad(NULL, 0, ex, stream), ACLNN_SUCCESS);
    free_tensors();
}

static void test_unpermute_and_permute_grad_first_phase_refusals(void **state)
{
    (void)state;
    uint64_t ws;
    aclOpExecutor *ex;
    aclTensor *x = T(ACL_BF16, 4, 2), *ix = T(ACL_INT32, 4), *probs = T(ACL_INT32, 2, 2),
              *out = T(ACL_BF16, 2, 2), *out16 = T(ACL_FLOAT16, 2, 2), *ix64 = T(ACL_INT64, 4);
    EXPECT(aclnnMoeTokenUnpermuteGetWorkspaceSize(x, ix, probs, false, NULL, out, &ws, &ex),
           ACLNN_ERR_INNER_FIND_KERNEL_ERROR, "probsOptional has dtype 3");
    /* A required tensor outside the definition is refused first, wherever
     * it stands among the arguments: no kernel is sought then. */
    EXPECT(aclnnMoeTokenUnpermuteGetWorkspaceSize(x, ix, probs, false, NULL, out16, &ws, &ex),
           ACLNN_ERR_PARAM_INVALID, "out is ACL_FLOAT16 but permutedTokens is ACL_BF16");
    EXPECT(aclnnMoeTokenUnpermuteGetWorkspaceSize(x, ix, NULL, false, NULL, out16, &ws, &ex),
           ACLNN_ERR_PARAM_INVALID, "out is ACL_FLOAT16 but permutedTokens is ACL_BF16");
    EXPECT(aclnnMoeTokenUnpermuteGetWorkspaceSize(x, ix64, NULL, false, NULL, out, &ws, &ex),
           ACLNN_ERR_PARAM_INVALID, "sortedIndices has dtype 9");
    EXPECT(aclnnMoeTokenUnpermuteGetWorkspaceSize(x, NULL, NULL, false, NULL, out, &ws, &ex),
           ACLNN_ERR_PARAM_NULLPTR, "sortedIndices is NULL");
    EXPECT(aclnnMoeTokenPermuteGradGetWorkspaceSize(x, ix, 2, false, out16, &ws, &ex),
           ACLNN_ERR_PARAM_INVALID, "out is ACL_FLOAT16 but permutedOutputGrad is ACL_BF16");
    EXPECT(aclnnMoeTokenPermuteGradGetWorkspaceSize(x, ix, 2, false, NULL, &ws, &ex),
           ACLNN_ERR_PARAM_NULLPTR, "out is NULL");
    /* What libmoeperm refuses on the shapes alone is refused here too. */
    EXPECT(aclnnMoeTokenPermuteGradGetWorkspaceSize(x, ix, 3, false, out, &ws, &ex),
           ACLNN_ERR_PARAM_INVALID, "aclnnMoeTokenPermuteGradGetWorkspaceSize");
    /* padded mode is ignored by these two on Atlas A2/A3. */
    int32_t idx[4] = {2, 0, 3, 1};
    upload(ix, idx, sizeof idx);
    assert_int_equal(aclnnMoeTokenPermuteGradGetWorkspaceSize(x, ix, 2, true, out, &ws, &ex), 0);
    assert_int_equal(aclnnMoeTokenPermuteGrad(NULL, 0, ex, stream), ACLNN_SUCCESS);
    assert_int_equal(aclnnMoeTokenUnpermuteGetWorkspaceSize(x, ix, NULL, true, NULL, T(ACL_BF16,
                                                            4, 2), &ws, &ex), 0);
    assert_int_equal(aclnnMoeTokenUnpermute(NULL, 0, ex, stream), ACLNN_SUCCESS);
    free_tensors();
}

static void test_unpermute_grad_first_phase_refusals(void **state)
{
    (void)state;
    uint64_t ws;
    aclOpExecutor *ex;
    aclTensor *x = T(ACL_FLOAT, 4, 8), *g = T(ACL_FLOAT, 2, 8), *ix = T(ACL_INT32, 4),
              *probs = T(ACL_FLOAT, 2, 2), *tg = T(ACL_FLOAT, 4, 8), *pg = T(ACL_BF16, 2, 2),
              *pg32 = T(ACL_INT32, 2, 2), *wide = T(ACL_FLOAT, 1, 513);
    EXPECT(aclnnMoeTokenUnpermuteGradGetWorkspaceSize(x, g, ix, NULL, false, NULL, tg, NULL, &ws,
                                                      &ex),
           ACLNN_ERR_PARAM_NULLPTR, "probsGradOut is NULL");
    EXPECT(aclnnMoeTokenUnpermuteGradGetWorkspaceSize(x, g, ix, probs, false, NULL, tg, pg, &ws,
                                                      &ex),
           ACLNN_ERR_INNER_FIND_KERNEL_ERROR, "probsGradOut is ACL_BF16 but probsOptional");
    EXPECT(aclnnMoeTokenUnpermuteGradGetWorkspaceSize(x, g, ix, NULL, false, NULL, tg, pg32, &ws,
                                                      &ex),
           ACLNN_ERR_PARAM_INVALID, "probsGradOut has dtype 3");
    /* probs and the required probsGradOut both outside the definition:
     * the required output is refused (161002) before any kernel is sought. */
    EXPECT(aclnnMoeTokenUnpermuteGradGetWorkspaceSize(x, g, ix, pg32, false, NULL, tg, pg32, &ws,
                                                      &ex),
           ACLNN_ERR_PARAM_INVALID, "probsGradOut has dtype 3");
    EXPECT(aclnnMoeTokenUnpermuteGradGetWorkspaceSize(x, g, ix, wide, false, NULL, tg, wide, &ws,
                                                      &ex),
           ACLNN_ERR_INNER_TILING_ERROR, "513 is above 512");
    free_tensors();
}

/* --- second phases: what only the data shows ------------------------------- */

/* The first phase reads nothing: the indices hold -1 (all bytes 0xff)
 * then, and a valid permutation by the second. */
static void test_first_phase_reads_no_data(void **state)
{
    (void)state;
    int64_t dims[2] = {4, 2}, idims[1] = {4};
    aclTensor *g = make(ACL_FLOAT, 2, dims, 0xff), *ix = make(ACL_INT32, 1, idims, 0xff),
              *out = make(ACL_FLOAT, 2, (int64_t[]){2, 2}, 0xff);
    uint64_t ws;
    aclOpExecutor *ex;
    assert_int_equal(aclnnMoeTokenPermuteGradGetWorkspaceSize(g, ix, 2, false, out, &ws, &ex), 0);
    float grad[8] = {1, 2, 3, 4, 5, 6, 7, 8};
    int32_t idx[4] = {3, 1, 0, 2};
    upload(g, grad, sizeof grad);
    upload(ix, idx, sizeof idx);
    assert_int_equal(aclnnMoeTokenPermuteGrad(NULL, ws, ex, stream), ACLNN_SUCCESS);
    float result[4];
    download(out, result);
    float want[4] = {7 + 3, 8 + 4, 1 + 5, 2 + 6};
    assert_memory_equal(result, want, sizeof want);
    free_tensors();
}

static void test_second_phase_refuses_bad_indices_and_leaves_outputs(void **state)
{
    (void)state;
    uint64_t ws;
    aclOpExecutor *ex;
    aclTensor *g = T(ACL_FLOAT, 4, 2), *ix = T(ACL_INT32, 4), *out = T(ACL_FLOAT, 2, 2);
    float grad[8] = {1, 2, 3, 4, 5, 6, 7, 8}, before_run[4] = {9, 9, 9, 9}, after[4];
    int32_t idx[4] = {3, 1, -7, 2};
    upload(out, before_run, sizeof before_run);
    assert_int_equal(aclnnMoeTokenPermuteGradGetWorkspaceSize(g, ix, 2, false, out, &ws, &ex), 0);
    upload(g, grad, sizeof grad);
    upload(ix, idx, sizeof idx);
    EXPECT(aclnnMoeTokenPermuteGrad(NULL, ws, ex, stream), ACLNN_ERR_PARAM_INVALID, "-7");
    download(out, after);
    assert_memory_equal(after, before_run, sizeof after);
    free_tensors();

    /* Two slots naming one row of MoeTokenUnpermuteGrad's output: the
     * device's cores would race for it. */
    aclTensor *x = T(ACL_FLOAT, 4, 2), *ug = T(ACL_FLOAT, 4, 2), *six = T(ACL_INT32, 4),
              *tg = T(ACL_FLOAT, 4, 2), *pg = T(ACL_FLOAT, 4, 1);
    int32_t twice[4] = {0, 1, 1, 3};
    float tg_before[8] = {5, 5, 5, 5, 5, 5, 5, 5}, tg_after[8];
    upload(tg, tg_before, sizeof tg_before);
    assert_int_equal(aclnnMoeTokenUnpermuteGradGetWorkspaceSize(x, ug, six, NULL, false, NULL, tg,
                                                                pg, &ws, &ex),
                     0);
    upload(six, twice, sizeof twice);
    EXPECT(aclnnMoeTokenUnpermuteGrad(NULL, ws, ex, stream), ACLNN_ERR_PARAM_INVALID,
           "sorted_indices");
    download(tg, tg_after);
    assert_memory_equal(tg_after, tg_before, sizeof tg_after);
    free_tensors();
}

static void test_second_phase_needs_device_memory_a_live_plan_and_stream(void **state)
{
    (void)state;
    uint64_t ws;
    aclOpExecutor *ex;
    aclTensor *g = T(ACL_FLOAT, 2, 2), *ix = T(ACL_INT32, 2), *out = T(ACL_FLOAT, 2, 2);
    int32_t idx[2] = {1, 0};
    upload(ix, idx, sizeof idx);

    /* Host memory behind a tensor: a device could not reach it. */
    float host[4] = {0};
    int64_t dims[2] = {2, 2};
    aclTensor *on_host = aclCreateTensor(dims, 2, ACL_FLOAT, NULL, 0, ACL_FORMAT_ND, dims, 2,
                                         host);
    assert_int_equal(aclnnMoeTokenPermuteGradGetWorkspaceSize(on_host, ix, 1, false, out, &ws,
                                                              &ex),
                     0);
    EXPECT(aclnnMoeTokenPermuteGrad(NULL, ws, ex, stream), ACLNN_ERR_PARAM_INVALID,
           "permutedOutputGrad (16 bytes");
    assert_int_equal(aclDestroyTensor(on_host), 0);

    /* A plan runs once, on a live stream, as the operator it was made for. */
    EXPECT(aclnnMoeTokenPermuteGrad(NULL, 0, NULL, stream), ACLNN_ERR_PARAM_NULLPTR,
           "executor is NULL");
    assert_int_equal(aclnnMoeTokenPermuteGradGetWorkspaceSize(g, ix, 1, false, out, &ws, &ex), 0);
    assert_int_equal(aclnnMoeTokenPermuteGrad(NULL, ws, ex, NULL), ACLNN_SUCCESS);
    EXPECT(aclnnMoeTokenPermuteGrad(NULL, ws, ex, stream), ACLNN_ERR_PARAM_INVALID, "runs once");
    assert_int_equal(aclnnMoeTokenPermuteGradGetWorkspaceSize(g, ix, 1, false, out, &ws, &ex), 0);
    EXPECT(aclnnMoeTokenUnpermute(NULL, ws, ex, stream), ACLNN_ERR_PARAM_INVALID,
           "plan of aclnnMoeTokenPermuteGrad");
    assert_int_equal(aclnnMoeTokenPermuteGradGetWorkspaceSize(g, ix, 1, false, out, &ws, &ex), 0);
    EXPECT(aclnnMoeTokenPermuteGrad(NULL, ws, ex, (aclrtStream)g), ACLNN_ERR_RUNTIME_ERROR,
           "not a stream");

    /* Memory freed between the phases. */
    assert_int_equal(aclnnMoeTokenPermuteGradGetWorkspaceSize(g, ix, 1, false, out, &ws, &ex), 0);
    dev *d = dev_of(g);
    assert_int_equal(aclrtFree(d->mem), 0);
    EXPECT(aclnnMoeTokenPermuteGrad(NULL, ws, ex, stream), ACLNN_ERR_PARAM_INVALID,
           "not inside device memory");
    assert_int_equal(aclrtMalloc(&d->mem, 4, ACL_MEM_MALLOC_HUGE_FIRST), 0);
    free_tensors();
}

/* A handle freed is refused even when a new object of its kind follows at
 * once, which the C library would place at the freed address: a plan that
 * ran must not run (and so consume) the next plan, a destroyed stream or
 * tensor must not be a live one again. */
static void test_stale_handles_stay_refused_when_new_objects_follow(void **state)
{
    (void)state;
    uint64_t ws;
    aclTensor *g = T(ACL_FLOAT, 2, 2), *ix = T(ACL_INT32, 2), *out = T(ACL_FLOAT, 2, 2);
    int32_t idx[2] = {1, 0};
    upload(ix, idx, sizeof idx);
    for (int i = 0; i < 64; i++) {
        aclOpExecutor *used, *fresh;
        assert_int_equal(aclnnMoeTokenPermuteGradGetWorkspaceSize(g, ix, 1, false, out, &ws,
                                                                  &used),
                         0);
        assert_int_equal(aclnnMoeTokenPermuteGrad(NULL, ws, used, stream), ACLNN_SUCCESS);
        assert_int_equal(aclnnMoeTokenPermuteGradGetWorkspaceSize(g, ix, 1, false, out, &ws,
                                                                  &fresh),
                         0);
        EXPECT(aclnnMoeTokenPermuteGrad(NULL, ws, used, stream), ACLNN_ERR_PARAM_INVALID,
               "runs once");
        assert_int_equal(aclnnMoeTokenPermuteGrad(NULL, ws, fresh, stream), ACLNN_SUCCESS);
    }

    /* Streams: none of the last HOST_QUARANTINE - 1 destroyed is handed
     * out again (docs/aclnn-host.md states the bound), and the oldest of
     * them is still refused. */
    enum { KEPT = HOST_QUARANTINE - 1 };
    static aclrtStream gone[KEPT]; /* the last destroyed, a ring */
    for (size_t i = 0; i < 2 * HOST_QUARANTINE; i++) {
        aclrtStream s;
        assert_int_equal(aclrtCreateStream(&s), ACL_SUCCESS);
        for (size_t j = 0; j < (i < KEPT ? i : KEPT); j++)
            if (gone[j] == s)
                fail_msg("stream %zu is at the address of one of the last %d destroyed", i,
                         KEPT);
        assert_int_equal(aclrtDestroyStream(s), ACL_SUCCESS);
        gone[i % KEPT] = s;
        EXPECT(aclrtSynchronizeStream(gone[i < KEPT ? 0 : (i + 1) % KEPT]),
               ACL_ERROR_RT_PARAM_INVALID, "not a stream");
    }

    /* Tensors: destroying one twice, a new one made in between. */
    for (int i = 0; i < 64; i++) {
        int64_t d[1] = {2};
        aclTensor *old = aclCreateTensor(d, 1, ACL_FLOAT, NULL, 0, ACL_FORMAT_ND, d, 1, NULL);
        assert_int_equal(aclDestroyTensor(old), ACLNN_SUCCESS);
        aclTensor *now = aclCreateTensor(d, 1, ACL_FLOAT, NULL, 0, ACL_FORMAT_ND, d, 1, NULL);
        EXPECT(aclDestroyTensor(old), ACLNN_ERR_PARAM_INVALID, "not a tensor");
        assert_int_equal(aclDestroyTensor(now), ACLNN_SUCCESS);
    }
    free_tensors();
}

/* Run alone, with MOEPERM_ACLNN_CHIP naming no chip (the variable is read
 * once per process): the runtime refuses to start, names no chip, and
 * MoeTokenUnpermuteGrad, whose result depends on the chip, plans nothing. */
static void test_an_unknown_chip_is_refused_by_init_and_unpermute_grad(void **state)
{
    (void)state;
    EXPECT(aclInit(NULL), ACL_ERROR_INVALID_PARAM, "MOEPERM_ACLNN_CHIP=Ascend999 names no chip");
    assert_null(aclrtGetSocName());
    message_names("Ascend999");
    uint64_t ws;
    aclOpExecutor *ex;
    aclTensor *x = T(ACL_FLOAT, 4, 8), *g = T(ACL_FLOAT, 2, 8), *ix = T(ACL_INT32, 4),
              *probs = T(ACL_FLOAT, 2, 2), *tg = T(ACL_FLOAT, 4, 8), *pg = T(ACL_FLOAT, 2, 2);
    EXPECT(aclnnMoeTokenUnpermuteGradGetWorkspaceSize(x, g, ix, probs, false, NULL, tg, pg, &ws,
                                                      &ex),
           ACLNN_ERR_RUNTIME_ERROR, "Ascend999");
    /* The other operators do not depend on the chip. */
    int32_t idx[4] = {1, 3, 0, 2};
    upload(ix, idx, sizeof idx);
    assert_int_equal(aclnnMoeTokenPermuteGradGetWorkspaceSize(x, ix, 2, false, g, &ws, &ex), 0);
    assert_int_equal(aclnnMoeTokenPermuteGrad(NULL, ws, ex, stream), ACLNN_SUCCESS);
    free_tensors();
}

int main(int argc, char **argv)
{
    if (argc > 1 && strcmp(argv[1], "unknown-chip") == 0) {
        const struct CMUnitTest alone[] = {cmocka_unit_test_setup_teardown(
            test_an_unknown_chip_is_refused_by_init_and_unpermute_grad, setup, teardown)};
        return cmocka_run_group_tests(alone, NULL, NULL);
    }
    const struct CMUnitTest tests[] = {
#define TEST(name) cmocka_unit_test_setup_teardown(name, setup, teardown)
        TEST(test_init_and_finalize_count_as_on_the_device),
        TEST(test_one_device_numbered_zero),
        TEST(test_device_memory_is_aligned_and_freed_once),
        TEST(test_memcpy_honours_dest_max_and_its_kinds),
        TEST(test_streams_are_checked_handles),
        TEST(test_tensors_and_int_arrays_refuse_what_they_cannot_hold),
        TEST(test_error_message_is_per_thread_and_read_once),
        TEST(test_permute_first_phase_refusals),
        TEST(test_extents_past_int64_are_refused),
        TEST(test_first_phase_allocates_no_more_than_the_indices_hold),
        TEST(test_empty_outputs_are_a_success_that_runs_nothing),
        TEST(test_unpermute_and_permute_grad_first_phase_refusals),
        TEST(test_unpermute_grad_first_phase_refusals),
        TEST(test_first_phase_reads_no_data),
        TEST(test_second_phase_refuses_bad_indices_and_leaves_outputs),
        TEST(test_second_phase_needs_device_memory_a_live_plan_and_stream),
        TEST(test_stale_handles_stay_refused_when_new_objects_follow),
#undef TEST
    };
    assert_int_equal(aclInit(NULL), ACL_SUCCESS);
    int failed = cmocka_run_group_tests(tests, NULL, NULL);
    aclFinalize();
    return failed;
}

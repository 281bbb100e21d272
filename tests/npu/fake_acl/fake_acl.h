/*
 * fake_acl.h - what the two halves of the fake Ascend runtime share: the
 * runtime half (fake_runtime.c: aclInit, aclrt*, tensors, accounting) and
 * the operator half (fake_operator.c: the aclnn calls).
 *
 * They are two files because the real stack is several libraries and the
 * backend must find each symbol in whichever library has it: the tests
 * load the halves as one library, as two, or one without the other, and
 * builds that leave out one operator or the int arrays (meson.build).
 *
 * Also the tests' window into the fake: fake_acl_stats() is what a cmocka
 * test reads, through dlsym, to see that every resource came back.
 */
#ifndef MOEPERM_FAKE_ACL_H
#define MOEPERM_FAKE_ACL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "npu/acl.h"

/* The fake's view of a tensor: the arguments of aclCreateTensor, copied. */
#define FAKE_TENSOR_MAGIC 0x7e45017eu
#define FAKE_MAX_DIMS 8
struct aclTensor {
    uint32_t magic; /* FAKE_TENSOR_MAGIC while alive, so a stale one is seen */
    aclDataType dtype;
    uint64_t ndim;
    int64_t dims[FAKE_MAX_DIMS];
    int64_t strides[FAKE_MAX_DIMS];
    int64_t offset;
    aclFormat format;
    uint64_t storage_ndim;
    int64_t storage_dims[FAKE_MAX_DIMS];
    void *data; /* a device address */
};

/* The fake's int array (aclCreateIntArray's copy of the values). */
#define FAKE_INT_ARRAY_MAGIC 0x1a7a77a1u
struct aclIntArray {
    uint32_t magic; /* FAKE_INT_ARRAY_MAGIC while alive */
    uint64_t size;
    int64_t values[]; /* size of them */
};

/* Counters, all since the library was loaded. */
typedef struct fake_acl_stats {
    long inits, finalizes;
    long devices_set, devices_reset;
    long stream_calls; /* every aclrtCreateStream call */
    long streams_created, streams_destroyed;
    long malloc_calls; /* every aclrtMalloc call, refused or not */
    long mallocs, frees, refused_mallocs;
    long long live_bytes, peak_bytes;
    long tensor_calls; /* every aclCreateTensor call */
    long tensors_created, tensors_destroyed;
    long int_array_calls; /* every aclCreateIntArray call */
    long int_arrays_created, int_arrays_destroyed;
    long int_arrays_planned; /* plans that got a (live) restoreShape */
    long plans; /* GetWorkspaceSize calls */
    /* Plans that got the input domain's edge as given: paddedMode true,
     * numTopk -1, tokens of rank 3 or more, sorted_indices longer than
     * the entries the kernel reads, more rows than slots. */
    long padded_plans, num_topk_minus1_plans, rank3_plans, long_index_plans, wide_row_plans;
    long executors_created, executors_run;
    long memcpys; /* every aclrtMemcpy call */
    long syncs, operator_runs;
    long misuses; /* calls the real runtime would reject or crash on */
    char first_misuse[256];
} fake_acl_stats;

/* Exported by the runtime half.  The operator half counts its own events
 * into the same record. */
fake_acl_stats *fake_acl_stats_get(void);
/* The host address behind a device address, if [dev, dev+bytes) lies in
 * one live allocation; NULL (and a misuse recorded) otherwise. */
void *fake_acl_host(const void *dev, size_t bytes, const char *what);
/* Records an API misuse: counted and kept for the report. */
void fake_acl_misuse(const char *fmt, ...);
/* Sets what aclGetRecentErrMsg() returns next. */
void fake_acl_set_error(const char *fmt, ...);
/* Queues work on a stream; it runs at aclrtSynchronizeStream, as on a
 * device, so a copy that does not wait for the stream reads stale data.
 * arg is malloc'd and freed once the work has run or been abandoned;
 * call names the queueing function in a misuse report. */
int fake_acl_enqueue(aclrtStream stream, void (*fn)(void *), void *arg, const char *call);

/* An environment variable as a number, or fallback when unset. */
long fake_acl_env_long(const char *name, long fallback);

#endif

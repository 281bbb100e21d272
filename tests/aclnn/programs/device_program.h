// device_program.h - the steps every one of the four programs takes, as a
// program written for an Ascend device takes them: initialise the runtime,
// put host vectors into device memory behind tensors, run the two phases,
// read results back, give everything back.
//
// The host vectors are handed over as they are, whatever the tensor's
// dtype: a std::vector<float> described as BF16 is seen by the operator as
// twice as many bf16 elements made of the floats' halves, and one
// described as INT32 as the floats' bit patterns.  The vendor's examples
// do this, and a device prints what the bytes say; so do these programs.
#ifndef MOEPERM_TESTS_DEVICE_PROGRAM_H
#define MOEPERM_TESTS_DEVICE_PROGRAM_H

#include <cstdint>
#include <cstdio>
#include <vector>

#include "acl/acl.h"

// Prints what failed and returns its status from the enclosing function.
#define MUST(call, what)                                                     \
    do {                                                                     \
        auto status_ = (call);                                               \
        if (status_ != ACL_SUCCESS) {                                        \
            std::printf("%s failed. ERROR: %d\n", what, (int)status_);       \
            return (int)status_;                                             \
        }                                                                    \
    } while (0)

// One tensor in device memory: its buffer, its descriptor, its bytes.
struct DeviceTensor {
    void *addr = nullptr;
    aclTensor *tensor = nullptr;
    std::size_t bytes = 0;
};

// The runtime, device 0 and one stream.
struct Device {
    int32_t id = 0;
    aclrtStream stream = nullptr;

    int Open()
    {
        MUST(aclInit(nullptr), "aclInit");
        MUST(aclrtSetDevice(id), "aclrtSetDevice");
        MUST(aclrtCreateStream(&stream), "aclrtCreateStream");
        return 0;
    }

    void Close()
    {
        aclrtDestroyStream(stream);
        aclrtResetDevice(id);
        aclFinalize();
    }
};

static int64_t ElementsOf(const std::vector<int64_t> &shape)
{
    int64_t n = 1;
    for (int64_t d : shape)
        n *= d;
    return n;
}

// Allocates device memory for as many Host elements as shape holds,
// copies host there, and describes it as a contiguous ND tensor of type.
template <typename Host>
static int Upload(const std::vector<Host> &host, const std::vector<int64_t> &shape,
                  aclDataType type, DeviceTensor *t)
{
    t->bytes = ElementsOf(shape) * sizeof(Host);
    MUST(aclrtMalloc(&t->addr, t->bytes, ACL_MEM_MALLOC_HUGE_FIRST), "aclrtMalloc");
    MUST(aclrtMemcpy(t->addr, t->bytes, host.data(), t->bytes, ACL_MEMCPY_HOST_TO_DEVICE),
         "aclrtMemcpy");
    std::vector<int64_t> strides(shape.size(), 1);
    for (std::size_t i = shape.size(); i-- > 1;)
        strides[i - 1] = strides[i] * shape[i];
    t->tensor = aclCreateTensor(shape.data(), shape.size(), type, strides.data(), 0,
                                aclFormat::ACL_FORMAT_ND, shape.data(), shape.size(), t->addr);
    return 0;
}

// Copies the whole buffer of t back as Host elements.
template <typename Host>
static int Download(const DeviceTensor &t, std::vector<Host> *host)
{
    host->assign(t.bytes / sizeof(Host), Host());
    MUST(aclrtMemcpy(host->data(), host->size() * sizeof(Host), t.addr, t.bytes,
                     ACL_MEMCPY_DEVICE_TO_HOST),
         "copy result from device to host");
    return 0;
}

// Prints the whole buffer of t as floats, "label[i] is: value", one a line.
static int PrintFloats(const DeviceTensor &t, const char *label)
{
    std::vector<float> values;
    if (int rc = Download(t, &values))
        return rc;
    for (std::size_t i = 0; i < values.size(); i++)
        std::printf("%s[%ld] is: %f\n", label, (long)i, values[i]);
    return 0;
}

static void Release(DeviceTensor *t)
{
    aclDestroyTensor(t->tensor);
    aclrtFree(t->addr);
    *t = DeviceTensor();
}

// Runs the second phase with the workspace the first asked for, then
// waits for the stream.
template <typename Run>
static int RunPlan(Run run, const char *name, uint64_t workspace_size, aclOpExecutor *executor,
                   aclrtStream stream)
{
    void *workspace = nullptr;
    if (workspace_size > 0)
        MUST(aclrtMalloc(&workspace, workspace_size, ACL_MEM_MALLOC_HUGE_FIRST),
             "allocate workspace");
    aclnnStatus status = run(workspace, workspace_size, executor, stream);
    if (status != ACL_SUCCESS) {
        std::printf("%s failed. ERROR: %d\n", name, (int)status);
        if (workspace != nullptr)
            aclrtFree(workspace);
        return status;
    }
    MUST(aclrtSynchronizeStream(stream), "aclrtSynchronizeStream");
    if (workspace != nullptr)
        aclrtFree(workspace);
    return 0;
}

#endif

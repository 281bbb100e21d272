/*
 * test_npu_backend.c - the npu backend (src/npu) driven directly against
 * the fake Ascend runtime in tests/fake_acl, with problems built in
 * memory, so it needs neither a device nor the golden library nor the CLI.
 *
 * The test holds the fake library open itself, so the library stays loaded
 * across the backend's open/close cycles and its counters can be read
 * (through dlsym) before and after each scenario: every scenario must give
 * back exactly what it took.  Expected outputs are worked out by hand from
 * the operator's definition (docs/operators.md) and written down as bits.
 *
 * Paths come from the environment meson sets: FAKE_ACL_FULL, FAKE_ACL_RT,
 * FAKE_ACL_OP, FAKE_ACL_NOSYNC, FAKE_ASCEND_HOME.
 */
#include <dlfcn.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmocka.h>

#include "backend/backend.h"
#include "fake_acl/fake_acl.h"

static fake_acl_stats *(*stats_get)(void);
static fake_acl_stats before;

static const char *env_path(const char *name)
{
    const char *v = getenv(name);
    if (v == NULL) {
        fprintf(stderr, "%s is not set: run this test through meson test\n", name);
        exit(1);
    }
    return v;
}

/* Every scenario starts from the full fake and no faults. */
static int reset_env(void **state)
{
    setenv("MOEPERM_ASCEND_LIBS", env_path("FAKE_ACL_FULL"), 1);
    static const char *const faults[] = {"FAKE_ACL_FAIL_MALLOC", "FAKE_ACL_FAIL_SYNC",
                                         "FAKE_ACL_FAIL_MEMCPY", "FAKE_ACL_FAIL_TENSOR",
                                         "FAKE_ACL_FAIL_STREAM",
                                         "FAKE_ACL_FAIL_PLAN",   "FAKE_ACL_FAIL_RUN",
                                         "FAKE_ACL_FLIP",        "FAKE_ACL_FLIP_RUN",
                                         "FAKE_ACL_WORKSPACE",   "ASCEND_HOME_PATH",
                                         "ASCEND_TOOLKIT_HOME"};
    for (size_t i = 0; i < sizeof faults / sizeof faults[0]; i++)
        unsetenv(faults[i]);
    before = *stats_get();
    return 0;
}

/* Whatever a scenario did, the runtime got back all it gave. */
static int assert_balanced(void **state)
{
    const fake_acl_stats *s = stats_get();
    assert_int_equal(s->inits - before.inits, s->finalizes - before.finalizes);
    assert_int_equal(s->devices_set - before.devices_set, s->devices_reset - before.devices_reset);
    assert_int_equal(s->streams_created - before.streams_created,
                     s->streams_destroyed - before.streams_destroyed);
    assert_int_equal(s->mallocs - before.mallocs, s->frees - before.frees);
    assert_int_equal(s->live_bytes, 0);
    assert_int_equal(s->tensors_created - before.tensors_created,
                     s->tensors_destroyed - before.tensors_destroyed);
    if (s->misuses != before.misuses)
        fail_msg("the backend misused the runtime: %s", s->first_misuse);
    return 0;
}

/* Holds the library whose counters the group reads.  The backend opens
 * its libraries RTLD_GLOBAL, so a held library stays in the global scope
 * and would catch the symbol lookups of another fake loaded later: each
 * group holds only the library its tests use. */
static int hold_library(void **state, const char *var)
{
    void *h = dlopen(env_path(var), RTLD_NOW | RTLD_LOCAL);
    if (h == NULL) {
        fprintf(stderr, "cannot load the fake: %s\n", dlerror());
        return -1;
    }
    void *sym = dlsym(h, "fake_acl_stats_get");
    if (sym == NULL)
        return -1;
    memcpy(&stats_get, &sym, sizeof sym);
    *state = h;
    return 0;
}

static int group_setup(void **state)
{
    return hold_library(state, "FAKE_ACL_FULL");
}

static int layouts_setup(void **state)
{
    return hold_library(state, "FAKE_ACL_RT");
}

static int group_teardown(void **state)
{
    dlclose(*state);
    return 0;
}

/*
 * A small case whose answer is worked out by hand.  T=2, K=3, H=3, R=5,
 * so sorted_indices value 5 is a dropped slot (token 1, slot 0):
 *   rows r0..r4 = [1, -0, 2^-8], [2, -0, 1], [0.5, -0, 2^-8],
 *                 [0.25, -0, 2^-8], [3, -0, 1]
 *   token 0 = r4 + r0 + r2 = [4.5, -0, 1 + 2^-7]  (fp32 accumulation: a bf16
 *             one would lose both 2^-8 to ties-to-even and give 1)
 *   token 1 = +0 + r1 + r3 = [2.25, +0, 1 + 2^-8]  (the dropped first slot
 *             starts from +0, so -0 + -0 sums to +0)
 */
static const int32_t hand_indices[6] = {4, 0, 2, 5, 1, 3};
static const float hand_grad[5][3] = {{1.0f, -0.0f, 0x1p-8f},
                                      {2.0f, -0.0f, 1.0f},
                                      {0.5f, -0.0f, 0x1p-8f},
                                      {0.25f, -0.0f, 0x1p-8f},
                                      {3.0f, -0.0f, 1.0f}};

/* The problem of the case above for dtype: its inputs grad (15 elements
 * of dtype) and hand_indices, its output out (6 elements), as a backend
 * gets them. */
static backend_problem hand_problem(moeperm_dtype dtype, const void *grad, void *out)
{
    size_t e = moeperm_dtype_size(dtype);
    backend_problem p;
    memset(&p, 0, sizeof p);
    p.op = MOEPERM_OP_PERMUTE_GRAD;
    p.top_k = 3;
    p.padded_mode = false;
    p.inputs[0] = (backend_tensor){"permuted_output_grad", dtype, 2, {5, 3}, (void *)grad,
                                   15 * e, true};
    p.inputs[1] = (backend_tensor){"sorted_indices", MOEPERM_INT32, 1, {6},
                                   (void *)hand_indices, sizeof hand_indices, true};
    p.input_count = 2;
    p.outputs[0] = (backend_tensor){"input_grad", dtype, 2, {2, 3}, out, 6 * e, true};
    p.output_count = 1;
    return p;
}

/* bf16 of the grad above: the upper halves of the floats (all exact). */
static void hand_grad_bf16(uint16_t out[15])
{
    for (int i = 0; i < 15; i++) {
        uint32_t bits;
        memcpy(&bits, &hand_grad[i / 3][i % 3], 4);
        out[i] = (uint16_t)(bits >> 16);
    }
}

static backend *open_npu(void)
{
    backend *b = NULL;
    char err[512] = "";
    backend_options opt = {0};
    int rc = backend_npu.open(&opt, &b, err, sizeof err);
    if (rc != BACKEND_OK)
        fail_msg("open failed: %s", err);
    return b;
}

static void test_bf16_gives_hand_computed_bits(void **state)
{
    uint16_t grad[15], out[6];
    hand_grad_bf16(grad);
    backend_problem p = hand_problem(MOEPERM_BF16, grad, out);
    backend *b = open_npu();
    char err[512] = "";
    assert_int_equal(backend_npu.run(b, &p, err, sizeof err), BACKEND_OK);
    backend_npu.close(b);
    static const uint16_t want[6] = {0x4090, 0x8000, 0x3f81, 0x4010, 0x0000, 0x3f80};
    assert_memory_equal(out, want, sizeof want);
    assert_int_equal(stats_get()->operator_runs - before.operator_runs, 1);
}

static void test_float32_gives_hand_computed_bits(void **state)
{
    float out[6];
    backend_problem p = hand_problem(MOEPERM_FLOAT, hand_grad, out);
    backend *b = open_npu();
    char err[512] = "";
    assert_int_equal(backend_npu.run(b, &p, err, sizeof err), BACKEND_OK);
    backend_npu.close(b);
    static const uint32_t want[6] = {0x40900000, 0x80000000, 0x3f810000,
                                     0x40100000, 0x00000000, 0x3f808000};
    assert_memory_equal(out, want, sizeof want);
}

static void test_zero_workspace_skips_the_workspace_allocation(void **state)
{
    setenv("FAKE_ACL_WORKSPACE", "0", 1);
    float out[6];
    backend_problem p = hand_problem(MOEPERM_FLOAT, hand_grad, out);
    backend *b = open_npu();
    char err[512] = "";
    assert_int_equal(backend_npu.run(b, &p, err, sizeof err), BACKEND_OK);
    backend_npu.close(b);
    assert_int_equal(stats_get()->malloc_calls - before.malloc_calls, 3);
}

/* Several cases on one open backend, as `moeperm check` runs them: each
 * call of one kind in turn fails (the fake counts the calls in the field
 * at offset counter and fails the one FAKE_ACL_FAIL_<var> names).  Every
 * failure must be a failure naming the call, leave nothing behind, and let
 * the next case run. */
static void each_call_fails_cleanly(const char *var, size_t counter, const char *call,
                                    const char *code, long calls_per_case)
{
    uint16_t grad[15], out[6];
    hand_grad_bf16(grad);
    backend_problem p = hand_problem(MOEPERM_BF16, grad, out);
    char err[512];
    backend *b = open_npu();
    long per_case = -1, failures = 0;
    for (long i = 1;; i++) {
        long start = *(const long *)((const char *)stats_get() + counter);
        char n[32];
        snprintf(n, sizeof n, "%ld", start + i);
        setenv(var, n, 1);
        err[0] = '\0';
        int rc = backend_npu.run(b, &p, err, sizeof err);
        if (rc == BACKEND_OK) {
            per_case = *(const long *)((const char *)stats_get() + counter) - start;
            break;
        }
        failures++;
        assert_int_equal(rc, BACKEND_FAILURE);
        if (strstr(err, call) == NULL || strstr(err, code) == NULL ||
            strstr(err, var) == NULL) /* var: the text of aclGetRecentErrMsg() */
            fail_msg("call %ld: \"%s\" lacks %s, %s or %s", i, err, call, code, var);
        assert_int_equal(stats_get()->live_bytes, 0);
        assert_int_equal(stats_get()->tensors_created, stats_get()->tensors_destroyed);
        assert_true(i < 100);
    }
    backend_npu.close(b);
    assert_int_equal(per_case, calls_per_case);
    assert_int_equal(failures, calls_per_case);
}

/* grad, indices, out, workspace */
static void test_each_refused_allocation_fails_and_leaks_nothing(void **state)
{
    each_call_fails_cleanly("FAKE_ACL_FAIL_MALLOC", offsetof(fake_acl_stats, malloc_calls),
                            "aclrtMalloc", "207001", 4);
    assert_int_equal(stats_get()->refused_mallocs - before.refused_mallocs, 4);
}

/* grad, indices and input_grad to the device (outputs go too, so that
 * elements an operator leaves untouched come back as the caller had
 * them), input_grad back */
static void test_each_failed_copy_fails_and_leaks_nothing(void **state)
{
    each_call_fails_cleanly("FAKE_ACL_FAIL_MEMCPY", offsetof(fake_acl_stats, memcpys),
                            "aclrtMemcpy", "507033", 4);
}

/* permuted_output_grad, sorted_indices, input_grad */
static void test_each_refused_tensor_fails_and_leaks_nothing(void **state)
{
    each_call_fails_cleanly("FAKE_ACL_FAIL_TENSOR", offsetof(fake_acl_stats, tensor_calls),
                            "aclCreateTensor", "returned NULL", 3);
}

static void expect_failure(const char *var, const char *value, const char *call,
                           const char *code, const char *message)
{
    setenv(var, value, 1);
    uint16_t grad[15], out[6];
    hand_grad_bf16(grad);
    backend_problem p = hand_problem(MOEPERM_BF16, grad, out);
    char err[512] = "";
    backend *b = open_npu();
    assert_int_equal(backend_npu.run(b, &p, err, sizeof err), BACKEND_FAILURE);
    backend_npu.close(b);
    assert_non_null(strstr(err, call));
    assert_non_null(strstr(err, code));
    assert_non_null(strstr(err, message));
}

/* A case the CPU reference refuses (a repeated index, padded mode) is bad
 * input, named as the reference names it, and never reaches the device:
 * the vendor's host code may let bad indices through to the kernel. */
static void test_case_the_reference_refuses_never_reaches_the_device(void **state)
{
    (void)state;
    float out[6];
    int32_t negative[6] = {4, 0, 2, 5, 1, -1};
    backend_problem p = hand_problem(MOEPERM_FLOAT, hand_grad, out);
    backend *b = open_npu();
    fake_acl_stats seen = *stats_get();
    char err[512] = "";
    p.inputs[1].data = negative;
    assert_int_equal(backend_npu.run(b, &p, err, sizeof err), BACKEND_BAD_INPUT);
    if (!strstr(err, "sorted_indices[5] = -1 is negative"))
        fail_msg("message: %s", err);
    p.inputs[1].data = (void *)hand_indices;
    p.top_k = 0;
    assert_int_equal(backend_npu.run(b, &p, err, sizeof err), BACKEND_BAD_INPUT);
    if (!strstr(err, "num_topk = 0"))
        fail_msg("message: %s", err);
    assert_int_equal(stats_get()->malloc_calls, seen.malloc_calls);
    assert_int_equal(stats_get()->memcpys, seen.memcpys);
    assert_int_equal(stats_get()->plans, seen.plans);
    /* and the backend still runs a good case afterwards */
    p.top_k = 3;
    assert_int_equal(backend_npu.run(b, &p, err, sizeof err), BACKEND_OK);
    backend_npu.close(b);
}

/* The fake counts from its loading, which this process holds: the next
 * call is number count + 1. */
static void test_operator_refusal_names_code_and_message(void **state)
{
    char n[32];
    snprintf(n, sizeof n, "%ld", stats_get()->plans + 1);
    expect_failure("FAKE_ACL_FAIL_PLAN", n, "aclnnMoeTokenPermuteGradGetWorkspaceSize",
                   "161002", "injected refusal");
}

static void test_operator_run_failure_names_code(void **state)
{
    char n[32];
    snprintf(n, sizeof n, "%ld", stats_get()->executors_run + 1);
    expect_failure("FAKE_ACL_FAIL_RUN", n, "aclnnMoeTokenPermuteGrad failed", "361001",
                   "injected runtime failure");
}

static void test_sync_failure_is_failure(void **state)
{
    char n[32];
    snprintf(n, sizeof n, "%ld", stats_get()->syncs + 1);
    expect_failure("FAKE_ACL_FAIL_SYNC", n, "aclrtSynchronizeStream", "507000",
                   "injected stream failure");
}

static void test_flipped_bit_reaches_the_output(void **state)
{
    setenv("FAKE_ACL_FLIP", "4:14", 1); /* token 1, column 1: +0 becomes 2 */
    uint16_t grad[15], out[6];
    hand_grad_bf16(grad);
    backend_problem p = hand_problem(MOEPERM_BF16, grad, out);
    char err[512] = "";
    backend *b = open_npu();
    assert_int_equal(backend_npu.run(b, &p, err, sizeof err), BACKEND_OK);
    backend_npu.close(b);
    static const uint16_t want[6] = {0x4090, 0x8000, 0x3f81, 0x4010, 0x4000, 0x3f80};
    assert_memory_equal(out, want, sizeof want);
}

static void expect_open_failure(const char *needle, const char *needle2)
{
    backend *b = (backend *)&b;
    char err[1024] = "";
    backend_options opt = {0};
    int rc = backend_npu.open(&opt, &b, err, sizeof err);
    if (rc == BACKEND_OK) {
        backend_npu.close(b); /* or every later test would find it open */
        fail_msg("open succeeded where it should fail");
    }
    assert_int_equal(rc, BACKEND_FAILURE);
    assert_null(b);
    if (strstr(err, needle) == NULL || (needle2 && strstr(err, needle2) == NULL))
        fail_msg("message \"%s\" lacks \"%s\" or \"%s\"", err, needle, needle2 ? needle2 : "");
}

static void test_missing_listed_library_is_named(void **state)
{
    setenv("MOEPERM_ASCEND_LIBS", "/nonexistent/libascendcl.so", 1);
    expect_open_failure("no Ascend runtime found", "/nonexistent/libascendcl.so");
}

/* A list longer than the message buffer: the reason a library did not
 * load comes first, so the buffer cuts the echo of the list, not the
 * reason (it once held only "looked in: MOEPERM_ASCEND_LIBS=..."). */
static void test_long_library_list_keeps_the_reason(void **state)
{
    char list[4096] = "", dir[300];
    memset(dir, 'd', 250);
    dir[250] = '\0';
    for (int i = 0; i < 12; i++)
        snprintf(list + strlen(list), sizeof list - strlen(list), "%s/nonexistent/%s/lib%d.so",
                 i ? ":" : "", dir, i);
    setenv("MOEPERM_ASCEND_LIBS", list, 1);
    expect_open_failure("no Ascend runtime found: cannot load ...",
                        "lib0.so (cannot open shared object file: No such file or directory)");
}

/* At most ACL_MAX_LIBS (16) libraries, said before any is loaded. */
static void test_more_than_16_libraries_are_refused_by_count(void **state)
{
    char list[8192] = "";
    for (int i = 0; i < 17; i++)
        snprintf(list + strlen(list), sizeof list - strlen(list), "%s%s", i ? "::" : "",
                 env_path("FAKE_ACL_FULL"));
    setenv("MOEPERM_ASCEND_LIBS", list, 1);
    expect_open_failure("MOEPERM_ASCEND_LIBS lists 17 libraries", "at most 16");
    int64_t inits = stats_get()->inits;
    /* 16 is fine (one library loaded 16 times is still one library). */
    strrchr(list, ':')[-1] = '\0';
    setenv("MOEPERM_ASCEND_LIBS", list, 1);
    backend *b = open_npu();
    backend_npu.close(b);
    assert_int_equal(stats_get()->inits - inits, 1);
}

static void test_default_search_finds_ascend_home_path(void **state)
{
    unsetenv("MOEPERM_ASCEND_LIBS");
    setenv("ASCEND_HOME_PATH", "/nonexistent/ascend", 1);
    setenv("ASCEND_TOOLKIT_HOME", env_path("FAKE_ASCEND_HOME"), 1);
    test_bf16_gives_hand_computed_bits(state);
}

static void test_missing_sync_symbol_is_named(void **state)
{
    setenv("MOEPERM_ASCEND_LIBS", env_path("FAKE_ACL_NOSYNC"), 1);
    expect_open_failure("aclrtSynchronizeStream", NULL);
}

static void test_missing_operator_symbol_is_named(void **state)
{
    setenv("MOEPERM_ASCEND_LIBS", env_path("FAKE_ACL_RT"), 1);
    expect_open_failure("aclnnMoeTokenPermuteGradGetWorkspaceSize", "libfake_acl_rt.so");
}

/* Runtime and operator in two libraries, as with a custom kernel package:
 * each symbol is found where it is. */
static void test_split_libraries_work_together(void **state)
{
    char list[8192];
    snprintf(list, sizeof list, "%s:%s", env_path("FAKE_ACL_RT"), env_path("FAKE_ACL_OP"));
    setenv("MOEPERM_ASCEND_LIBS", list, 1);
    uint16_t grad[15], out[6];
    hand_grad_bf16(grad);
    backend_problem p = hand_problem(MOEPERM_BF16, grad, out);
    char err[512] = "";
    backend *b = open_npu();
    int rc = backend_npu.run(b, &p, err, sizeof err);
    backend_npu.close(b);
    if (rc != BACKEND_OK)
        fail_msg("split run failed: %s", err);
    static const uint16_t want[6] = {0x4090, 0x8000, 0x3f81, 0x4010, 0x0000, 0x3f80};
    assert_memory_equal(out, want, sizeof want);
}

static void test_missing_device_fails_and_finalizes(void **state)
{
    backend *b = NULL;
    char err[512] = "";
    backend_options opt = {3};
    assert_int_equal(backend_npu.open(&opt, &b, err, sizeof err), BACKEND_FAILURE);
    assert_non_null(strstr(err, "aclrtSetDevice(3)"));
    assert_non_null(strstr(err, "107001"));
    assert_non_null(strstr(err, "does not exist"));
}

/* Open gives back what it took before the failure: the balance check
 * after this test sees aclFinalize and aclrtResetDevice. */
static void test_stream_refusal_fails_open_and_unwinds(void **state)
{
    char n[32];
    snprintf(n, sizeof n, "%ld", stats_get()->stream_calls + 1);
    setenv("FAKE_ACL_FAIL_STREAM", n, 1);
    expect_open_failure("aclrtCreateStream failed with ACL error 207001",
                        "FAKE_ACL_FAIL_STREAM");
    assert_int_equal(stats_get()->inits - before.inits, 1);
    assert_int_equal(stats_get()->devices_set - before.devices_set, 1);
}

static void test_second_open_is_refused(void **state)
{
    backend *b = open_npu(), *again = NULL;
    char err[512] = "";
    assert_int_equal(backend_npu.open(NULL, &again, err, sizeof err), BACKEND_FAILURE);
    assert_null(again);
    assert_non_null(strstr(err, "already open"));
    backend_npu.close(b);
}

/* The fake's promise the other tests rely on: a device address read by
 * host code kills the process. */
static void test_fake_device_address_faults_on_host_read(void **state)
{
    enum { SETUP_FAILED = 2, READ_SUCCEEDED = 42 };
    pid_t pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) {
        /* cmocka's handlers would catch the fault and carry on testing in
         * this child. */
        signal(SIGSEGV, SIG_DFL);
        signal(SIGBUS, SIG_DFL);
        void *h = dlopen(env_path("FAKE_ACL_FULL"), RTLD_NOW | RTLD_LOCAL);
        void *sym[3] = {dlsym(h, "aclInit"), dlsym(h, "aclrtSetDevice"), dlsym(h, "aclrtMalloc")};
        aclInit_fn init;
        aclrtSetDevice_fn set;
        aclrtMalloc_fn alloc;
        memcpy(&init, &sym[0], sizeof init);
        memcpy(&set, &sym[1], sizeof set);
        memcpy(&alloc, &sym[2], sizeof alloc);
        void *dev = NULL;
        if (init(NULL) != 0 || set(0) != 0 || alloc(&dev, 64, ACL_MEM_MALLOC_HUGE_FIRST) != 0)
            _exit(SETUP_FAILED);
        volatile unsigned char *p = dev;
        unsigned char byte = p[0];
        (void)byte;
        _exit(READ_SUCCEEDED);
    }
    int status;
    assert_int_equal(waitpid(pid, &status, 0), pid);
    /* Killed by the fault, or, under AddressSanitizer, which keeps its own
     * SIGSEGV handler, ended by its report: anything but surviving. */
    if (WIFEXITED(status)) {
        assert_int_not_equal(WEXITSTATUS(status), SETUP_FAILED);
        assert_int_not_equal(WEXITSTATUS(status), READ_SUCCEEDED);
        assert_int_not_equal(WEXITSTATUS(status), 0);
    } else {
        assert_true(WIFSIGNALED(status));
        assert_true(WTERMSIG(status) == SIGSEGV || WTERMSIG(status) == SIGBUS);
    }
}

int main(int argc, char **argv)
{
#define T(f) cmocka_unit_test_setup_teardown(f, reset_env, assert_balanced)
    const struct CMUnitTest tests[] = {
        T(test_bf16_gives_hand_computed_bits),
        T(test_float32_gives_hand_computed_bits),
        T(test_zero_workspace_skips_the_workspace_allocation),
        T(test_each_refused_allocation_fails_and_leaks_nothing),
        T(test_each_failed_copy_fails_and_leaks_nothing),
        T(test_each_refused_tensor_fails_and_leaks_nothing),
        T(test_case_the_reference_refuses_never_reaches_the_device),
        T(test_operator_refusal_names_code_and_message),
        T(test_operator_run_failure_names_code),
        T(test_sync_failure_is_failure),
        T(test_flipped_bit_reaches_the_output),
        T(test_missing_listed_library_is_named),
        T(test_long_library_list_keeps_the_reason),
        T(test_more_than_16_libraries_are_refused_by_count),
        T(test_default_search_finds_ascend_home_path),
        T(test_missing_device_fails_and_finalizes),
        T(test_stream_refusal_fails_open_and_unwinds),
        T(test_second_open_is_refused),
        T(test_fake_device_address_faults_on_host_read),
    };
    /* Other library layouts, in a process that never loads the full fake. */
    const struct CMUnitTest layouts[] = {
        T(test_split_libraries_work_together),
        T(test_missing_sync_symbol_is_named),
        T(test_missing_operator_symbol_is_named),
    };
#undef T
    if (argc > 1 && strcmp(argv[1], "layouts") == 0)
        return cmocka_run_group_tests_name("layouts", layouts, layouts_setup, group_teardown);
    return cmocka_run_group_tests(tests, group_setup, group_teardown);
}

/*
 * test_npu_family.c - the npu backend running MoeTokenPermute,
 * MoeTokenUnpermute and MoeTokenUnpermuteGrad (and MoeTokenPermuteGrad
 * beside them) against the fake Ascend runtime in tests/fake_acl, on
 * problems built here by hand.
 *
 * The fake computes with the tests' own models (naive_family.c,
 * naive_unpermute_grad.c) and the cpu backend with libmoeperm, so "the
 * device's bits equal the cpu backend's" compares two implementations
 * written apart.  Around that: every fault at every call site fails with a
 * sentence naming the call and gives back everything; a problem the
 * reference refuses never reaches the device; a runtime without one
 * operator (or without int arrays) fails naming what it lacks and still
 * runs the rest.
 *
 * One group per process, named by argv[1]: "main" holds the full fake,
 * "missing-<what>" a fake built without <what>.  The backend opens its
 * libraries RTLD_GLOBAL, so a fake the test holds stays in the global scope
 * and would catch the lookups of a second one loaded later: one fake per
 * process.  Paths come from the environment meson sets (fake_acl_env).
 */
#include <dlfcn.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "backend/backend.h"
#include "fake_acl/fake_acl.h"
#include "naive.h"
#include "naive_family.h"
#include "naive_unpermute_grad.h"

static fake_acl_stats *(*stats_get)(void);
static fake_acl_stats before;
static const char *fake_var = "FAKE_ACL_FULL"; /* the fake this process holds */
static backend *npu, *cpu;
static uint64_t seed;

static const char *env_path(const char *name)
{
    const char *v = getenv(name);
    if (v == NULL) {
        fprintf(stderr, "%s is not set: run this test through meson test\n", name);
        exit(1);
    }
    return v;
}

/* ---- problems ------------------------------------------------------ */

enum { NO_PROBS = -1 };

typedef struct problem {
    backend_problem p;
    int64_t restore[2];
} problem;

static backend_tensor tensor(const char *name, moeperm_dtype dtype, uint64_t ndim, int64_t d0,
                             int64_t d1)
{
    backend_tensor t;
    memset(&t, 0, sizeof t);
    t.name = name;
    t.dtype = dtype;
    t.ndim = ndim;
    t.shape[0] = d0;
    t.shape[1] = ndim == 2 ? d1 : 0;
    t.bytes = (size_t)(d0 * (ndim == 2 ? d1 : 1)) * moeperm_dtype_size(dtype);
    t.data = malloc(t.bytes > 0 ? t.bytes : 1);
    assert_non_null(t.data);
    /* Outputs start as this pattern, which no operator here writes as a
     * whole row, so an element the backend loses shows. */
    memset(t.data, 0x5a, t.bytes);
    t.present = true;
    return t;
}

static int64_t elements(const backend_tensor *t)
{
    return t->shape[0] * (t->ndim == 2 ? t->shape[1] : 1);
}

static void store(backend_tensor *t, int64_t i, float v)
{
    switch (t->dtype) {
    case MOEPERM_FLOAT:
        memcpy((float *)t->data + i, &v, sizeof v);
        break;
    case MOEPERM_BF16:
        ((uint16_t *)t->data)[i] = naive_float_to_bf16(v);
        break;
    case MOEPERM_FLOAT16:
        ((uint16_t *)t->data)[i] = naive_float_to_fp16(v);
        break;
    default:
        ((int8_t *)t->data)[i] = (int8_t)naive_rand(&seed);
        break;
    }
}

/* Finite values of both signs over a few binades: no NaN can arise, so
 * the comparison can be bit for bit with no NaN rule in between. */
static float value(void)
{
    float v = (float)((int)(naive_rand(&seed) % 4001) - 2000) / 256.0f;
    int shift = (int)(naive_rand(&seed) % 8) - 4;
    return shift >= 0 ? v * (float)(1 << shift) : v / (float)(1 << -shift);
}

static void fill(backend_tensor *t)
{
    for (int64_t i = 0; i < elements(t); i++)
        store(t, i, value());
}

/* Probabilities with +0 and -0 among them: those slots are left out. */
static void fill_probs(backend_tensor *t)
{
    for (int64_t i = 0; i < elements(t); i++)
        store(t, i, i % 5 == 3 ? 0.0f : i % 7 == 4 ? -0.0f : value() / 16.0f);
}

static void fill_permutation(backend_tensor *t)
{
    naive_permutation(&seed, t->data, t->shape[0]);
}

static void add_input(problem *pb, backend_tensor t)
{
    pb->p.inputs[pb->p.input_count++] = t;
}

static void add_output(problem *pb, backend_tensor t)
{
    pb->p.outputs[pb->p.output_count++] = t;
}

/* An optional tensor the problem leaves out. */
static backend_tensor absent(void)
{
    backend_tensor t;
    memset(&t, 0, sizeof t);
    return t;
}

static void problem_free(problem *pb)
{
    for (size_t i = 0; i < pb->p.input_count; i++)
        free(pb->p.inputs[i].data);
    for (size_t i = 0; i < pb->p.output_count; i++)
        free(pb->p.outputs[i].data);
    memset(pb, 0, sizeof *pb);
}

static void start(problem *pb, moeperm_op op)
{
    memset(pb, 0, sizeof *pb);
    pb->p.op = op;
    pb->p.chip = (moeperm_chip){MOEPERM_CHIP_A2_UB_BYTES, MOEPERM_CHIP_A2_VECTOR_CORES};
}

static void give_restore_shape(problem *pb, int64_t tokens, int64_t hidden)
{
    pb->restore[0] = tokens;
    pb->restore[1] = hidden;
    pb->p.restore_shape = pb->restore;
    pb->p.restore_shape_len = 2;
}

static void build_permute_grad(problem *pb, moeperm_dtype dtype, int64_t n, int64_t k,
                               int64_t h, int64_t rows)
{
    start(pb, MOEPERM_OP_PERMUTE_GRAD);
    pb->p.top_k = k;
    backend_tensor grad = tensor("permuted_output_grad", dtype, 2, rows, h);
    backend_tensor indices = tensor("sorted_indices", MOEPERM_INT32, 1, n * k, 0);
    fill(&grad);
    fill_permutation(&indices);
    add_input(pb, grad);
    add_input(pb, indices);
    add_output(pb, tensor("input_grad", dtype, 2, n, h));
}

/* Expert ids among few experts (many ties, so the sort's stability
 * matters), every fifth a sentinel of the index dtype when asked. */
static void build_permute(problem *pb, moeperm_dtype dtype, moeperm_dtype index_dtype, int64_t n,
                          int64_t k, bool one_d, int64_t h, int64_t num_out_tokens,
                          bool sentinels)
{
    start(pb, MOEPERM_OP_PERMUTE);
    pb->p.num_out_tokens = num_out_tokens;
    backend_tensor tokens = tensor("tokens", dtype, 2, n, h);
    backend_tensor ids = one_d ? tensor("indices", index_dtype, 1, n, 0)
                               : tensor("indices", index_dtype, 2, n, k);
    fill(&tokens);
    for (int64_t i = 0; i < n * k; i++) {
        int64_t id = (int64_t)(naive_rand(&seed) % 6);
        bool wide = index_dtype == MOEPERM_INT64;
        if (sentinels && i % 5 == 0)
            id = i % 10 == 0 ? (wide ? INT64_MIN : INT32_MIN) : (wide ? INT64_MAX : INT32_MAX);
        if (wide)
            ((int64_t *)ids.data)[i] = id;
        else
            ((int32_t *)ids.data)[i] = (int32_t)id;
    }
    add_input(pb, tokens);
    add_input(pb, ids);
    add_output(pb, tensor("permuted_tokens", dtype, 2, naive_num_out(num_out_tokens, n * k), h));
    add_output(pb, tensor("sorted_indices", MOEPERM_INT32, 1, n * k, 0));
}

static void build_unpermute(problem *pb, moeperm_dtype dtype, int probs_dtype, int64_t n,
                            int64_t k, int64_t h, int64_t rows)
{
    start(pb, MOEPERM_OP_UNPERMUTE);
    backend_tensor tokens = tensor("permuted_tokens", dtype, 2, rows, h);
    backend_tensor indices = tensor("sorted_indices", MOEPERM_INT32, 1, n * k, 0);
    fill(&tokens);
    fill_permutation(&indices);
    add_input(pb, tokens);
    add_input(pb, indices);
    if (probs_dtype == NO_PROBS) {
        add_input(pb, absent());
    } else {
        backend_tensor probs = tensor("probs", (moeperm_dtype)probs_dtype, 2, n, k);
        fill_probs(&probs);
        add_input(pb, probs);
    }
    add_output(pb, tensor("unpermuted_tokens", dtype, 2, n, h));
}

static void build_unpermute_grad(problem *pb, moeperm_dtype dtype, int probs_dtype, int64_t n,
                                 int64_t k, int64_t h, int64_t rows)
{
    start(pb, MOEPERM_OP_UNPERMUTE_GRAD);
    backend_tensor tokens = tensor("permuted_tokens", dtype, 2, rows, h);
    backend_tensor grad = tensor("unpermuted_tokens_grad", dtype, 2, n, h);
    backend_tensor indices = tensor("sorted_indices", MOEPERM_INT32, 1, n * k, 0);
    fill(&tokens);
    fill(&grad);
    fill_permutation(&indices);
    add_input(pb, tokens);
    add_input(pb, grad);
    add_input(pb, indices);
    bool probs = probs_dtype != NO_PROBS;
    if (probs) {
        backend_tensor p = tensor("probs", (moeperm_dtype)probs_dtype, 2, n, k);
        fill_probs(&p);
        add_input(pb, p);
    } else {
        add_input(pb, absent());
    }
    add_output(pb, tensor("permuted_tokens_grad", dtype, 2, rows, h));
    add_output(pb, probs ? tensor("probs_grad", (moeperm_dtype)probs_dtype, 2, n, k) : absent());
}

/* One small problem of each operator, with probs and restore_shape where
 * the operator takes them. */
static void build_one_of(problem *pb, moeperm_op op)
{
    switch (op) {
    case MOEPERM_OP_PERMUTE_GRAD:
        build_permute_grad(pb, MOEPERM_BF16, 3, 2, 5, 5);
        break;
    case MOEPERM_OP_PERMUTE:
        build_permute(pb, MOEPERM_BF16, MOEPERM_INT32, 3, 2, false, 5, -1, false);
        break;
    case MOEPERM_OP_UNPERMUTE:
        build_unpermute(pb, MOEPERM_FLOAT16, MOEPERM_FLOAT, 3, 2, 5, 5);
        give_restore_shape(pb, 3, 5);
        break;
    case MOEPERM_OP_UNPERMUTE_GRAD:
        build_unpermute_grad(pb, MOEPERM_BF16, MOEPERM_FLOAT, 3, 2, 5, 5);
        give_restore_shape(pb, 3, 5);
        break;
    }
}

static const moeperm_op all_ops[] = {MOEPERM_OP_PERMUTE_GRAD, MOEPERM_OP_PERMUTE,
                                     MOEPERM_OP_UNPERMUTE, MOEPERM_OP_UNPERMUTE_GRAD};

/* The vendor's two entry points of op. */
static const char *plan_name(moeperm_op op)
{
    switch (op) {
    case MOEPERM_OP_PERMUTE:
        return "aclnnMoeTokenPermuteGetWorkspaceSize";
    case MOEPERM_OP_UNPERMUTE:
        return "aclnnMoeTokenUnpermuteGetWorkspaceSize";
    case MOEPERM_OP_UNPERMUTE_GRAD:
        return "aclnnMoeTokenUnpermuteGradGetWorkspaceSize";
    default:
        return "aclnnMoeTokenPermuteGradGetWorkspaceSize";
    }
}

static const char *run_name(moeperm_op op)
{
    switch (op) {
    case MOEPERM_OP_PERMUTE:
        return "aclnnMoeTokenPermute";
    case MOEPERM_OP_UNPERMUTE:
        return "aclnnMoeTokenUnpermute";
    case MOEPERM_OP_UNPERMUTE_GRAD:
        return "aclnnMoeTokenUnpermuteGrad";
    default:
        return "aclnnMoeTokenPermuteGrad";
    }
}

/* ---- running ------------------------------------------------------- */

/* p with outputs of its own, holding p's initial bytes. */
static backend_problem own_outputs(const backend_problem *p)
{
    backend_problem q = *p;
    for (size_t i = 0; i < q.output_count; i++) {
        if (!q.outputs[i].present)
            continue;
        size_t bytes = q.outputs[i].bytes;
        q.outputs[i].data = malloc(bytes > 0 ? bytes : 1);
        assert_non_null(q.outputs[i].data);
        memcpy(q.outputs[i].data, p->outputs[i].data, bytes);
    }
    return q;
}

static void free_outputs(backend_problem *q)
{
    for (size_t i = 0; i < q->output_count; i++)
        if (q->outputs[i].present)
            free(q->outputs[i].data);
}

/* Runs p on the npu backend; returns its code, err its sentence. */
static int run_npu(const problem *pb, char *err, size_t err_len)
{
    backend_problem q = own_outputs(&pb->p);
    err[0] = '\0';
    int rc = backend_npu.run(npu, &q, err, err_len);
    free_outputs(&q);
    return rc;
}

/* p on both backends: both succeed and every output agrees bit for bit
 * (outputs start from the same bytes, so untouched elements count too). */
static void assert_npu_equals_cpu(const problem *pb, const char *what)
{
    backend_problem on_npu = own_outputs(&pb->p), on_cpu = own_outputs(&pb->p);
    char err[1024] = "";
    long runs = stats_get()->operator_runs;
    if (backend_npu.run(npu, &on_npu, err, sizeof err) != BACKEND_OK)
        fail_msg("%s: the npu backend failed: %s", what, err);
    if (stats_get()->operator_runs != runs + 1)
        fail_msg("%s: the fake's operator ran %ld times", what,
                 stats_get()->operator_runs - runs);
    if (backend_cpu.run(cpu, &on_cpu, err, sizeof err) != BACKEND_OK)
        fail_msg("%s: the cpu backend failed: %s", what, err);
    for (size_t i = 0; i < pb->p.output_count; i++) {
        const backend_tensor *a = &on_npu.outputs[i], *b = &on_cpu.outputs[i];
        if (!a->present)
            continue;
        for (size_t byte = 0; byte < a->bytes; byte++)
            if (((const unsigned char *)a->data)[byte] != ((const unsigned char *)b->data)[byte])
                fail_msg("%s: %s differs from the cpu backend's at byte %zu (element %zu)", what,
                         a->name, byte, byte / moeperm_dtype_size(a->dtype));
    }
    free_outputs(&on_npu);
    free_outputs(&on_cpu);
}

/* ---- fixtures ------------------------------------------------------ */

static const char *const fault_vars[] = {
    "FAKE_ACL_FAIL_MALLOC", "FAKE_ACL_FAIL_SYNC",   "FAKE_ACL_FAIL_MEMCPY",
    "FAKE_ACL_FAIL_TENSOR", "FAKE_ACL_FAIL_STREAM", "FAKE_ACL_FAIL_PLAN",
    "FAKE_ACL_FAIL_RUN",    "FAKE_ACL_FAIL_INT_ARRAY", "FAKE_ACL_FLIP",
    "FAKE_ACL_FLIP_RUN",    "FAKE_ACL_FLIP_OUTPUT", "FAKE_ACL_KEEP_ROW",
    "FAKE_ACL_WORKSPACE",   "FAKE_ACL_UB_BYTES",    "FAKE_ACL_VECTOR_CORES",
    "ASCEND_HOME_PATH",     "ASCEND_TOOLKIT_HOME",
};

/* Every test starts from this process's fake, no faults, both backends
 * open. */
static int test_setup(void **state)
{
    setenv("MOEPERM_ASCEND_LIBS", env_path(fake_var), 1);
    for (size_t i = 0; i < sizeof fault_vars / sizeof fault_vars[0]; i++)
        unsetenv(fault_vars[i]);
    seed = 0x5eed0000u;
    before = *stats_get();
    char err[512] = "";
    if (backend_npu.open(&(backend_options){0}, &npu, err, sizeof err) != BACKEND_OK ||
        backend_cpu.open(&(backend_options){0}, &cpu, err, sizeof err) != BACKEND_OK) {
        fprintf(stderr, "cannot open the backends: %s\n", err);
        return -1;
    }
    return 0;
}

/* Whatever a test did, the runtime got back all it gave, and nothing was
 * misused. */
static int test_teardown(void **state)
{
    backend_npu.close(npu);
    backend_cpu.close(cpu);
    npu = cpu = NULL;
    const fake_acl_stats *s = stats_get();
    assert_int_equal(s->inits - before.inits, s->finalizes - before.finalizes);
    assert_int_equal(s->devices_set - before.devices_set, s->devices_reset - before.devices_reset);
    assert_int_equal(s->streams_created - before.streams_created,
                     s->streams_destroyed - before.streams_destroyed);
    assert_int_equal(s->mallocs - before.mallocs, s->frees - before.frees);
    assert_int_equal(s->live_bytes, 0);
    assert_int_equal(s->tensors_created - before.tensors_created,
                     s->tensors_destroyed - before.tensors_destroyed);
    assert_int_equal(s->int_arrays_created - before.int_arrays_created,
                     s->int_arrays_destroyed - before.int_arrays_destroyed);
    if (s->misuses != before.misuses)
        fail_msg("the backend misused the runtime: %s", s->first_misuse);
    return 0;
}

static int group_setup(void **state)
{
    void *h = dlopen(env_path(fake_var), RTLD_NOW | RTLD_LOCAL);
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

static int group_teardown(void **state)
{
    dlclose(*state);
    return 0;
}

/* ---- bits against the cpu backend ---------------------------------- */

static const moeperm_dtype float_dtypes[] = {MOEPERM_FLOAT, MOEPERM_FLOAT16, MOEPERM_BF16};

static void test_permute_bits_equal_cpu_for_every_token_and_index_dtype(void **state)
{
    static const moeperm_dtype tokens_dtypes[] = {MOEPERM_FLOAT, MOEPERM_FLOAT16, MOEPERM_BF16,
                                                  MOEPERM_INT8};
    static const moeperm_dtype index_dtypes[] = {MOEPERM_INT32, MOEPERM_INT64};
    /* num_out_tokens: all, drop the last 3, keep 5, more than there are */
    static const int64_t num_outs[] = {0, -3, 5, 100};
    for (size_t d = 0; d < 4; d++)
        for (size_t x = 0; x < 2; x++)
            for (size_t o = 0; o < 4; o++)
                for (int sentinels = 0; sentinels < 2; sentinels++) {
                    problem pb;
                    char what[128];
                    build_permute(&pb, tokens_dtypes[d], index_dtypes[x], 4, 3, false, 7,
                                  num_outs[o], sentinels);
                    snprintf(what, sizeof what, "permute %s tokens, %s ids, num_out %lld%s",
                             moeperm_dtype_name(tokens_dtypes[d]),
                             moeperm_dtype_name(index_dtypes[x]), (long long)num_outs[o],
                             sentinels ? ", sentinels" : "");
                    assert_npu_equals_cpu(&pb, what);
                    problem_free(&pb);
                }
}

static void test_permute_with_one_dimensional_indices_bits_equal_cpu(void **state)
{
    problem pb;
    build_permute(&pb, MOEPERM_FLOAT16, MOEPERM_INT64, 6, 1, true, 9, 0, true);
    assert_npu_equals_cpu(&pb, "permute with indices [N]");
    problem_free(&pb);
}

static void test_unpermute_bits_equal_cpu_with_and_without_probs(void **state)
{
    for (size_t d = 0; d < 3; d++) {
        for (int p = -1; p < 3; p++) {
            problem pb;
            char what[128];
            int probs = p < 0 ? NO_PROBS : (int)float_dtypes[p];
            int64_t k = p < 0 ? 1 : 3;
            /* rows below N*K: some slots are dropped */
            build_unpermute(&pb, float_dtypes[d], probs, 5, k, 11, 5 * k - 2);
            if (d == 1)
                give_restore_shape(&pb, 5, 11);
            snprintf(what, sizeof what, "unpermute %s tokens, probs %s%s",
                     moeperm_dtype_name(float_dtypes[d]),
                     p < 0 ? "none" : moeperm_dtype_name(float_dtypes[p]),
                     d == 1 ? ", restore_shape" : "");
            assert_npu_equals_cpu(&pb, what);
            problem_free(&pb);
        }
    }
}

static void test_unpermute_grad_bits_equal_cpu_with_and_without_probs(void **state)
{
    /* hidden sizes reaching the reduction's < 64, >= 64 and >= 512 branches */
    static const int64_t hiddens[] = {5, 70, 600};
    for (size_t d = 0; d < 3; d++)
        for (int p = -1; p < 3; p++)
            for (size_t hi = 0; hi < 3; hi++) {
                problem pb;
                char what[128];
                int probs = p < 0 ? NO_PROBS : (int)float_dtypes[p];
                int64_t k = p < 0 ? 1 : 3;
                build_unpermute_grad(&pb, float_dtypes[d], probs, 4, k, hiddens[hi], 4 * k - 1);
                if (hi == 1)
                    give_restore_shape(&pb, 4, hiddens[hi]);
                snprintf(what, sizeof what, "unpermute grad %s tokens, probs %s, H %lld%s",
                         moeperm_dtype_name(float_dtypes[d]),
                         p < 0 ? "none" : moeperm_dtype_name(float_dtypes[p]),
                         (long long)hiddens[hi], hi == 1 ? ", restore_shape" : "");
                assert_npu_equals_cpu(&pb, what);
                problem_free(&pb);
            }
}

static void test_permute_grad_bits_equal_cpu_beside_the_family(void **state)
{
    for (size_t d = 0; d < 3; d++) {
        problem pb;
        build_permute_grad(&pb, float_dtypes[d], 4, 3, 9, 10);
        assert_npu_equals_cpu(&pb, moeperm_dtype_name(float_dtypes[d]));
        problem_free(&pb);
    }
}

static void test_empty_problems_bits_equal_cpu(void **state)
{
    problem pb;
    build_permute(&pb, MOEPERM_BF16, MOEPERM_INT32, 3, 2, false, 4, -6, false); /* 0 rows out */
    assert_npu_equals_cpu(&pb, "permute keeping no row");
    problem_free(&pb);
    build_unpermute(&pb, MOEPERM_FLOAT, MOEPERM_BF16, 3, 2, 0, 6); /* H = 0 */
    assert_npu_equals_cpu(&pb, "unpermute with hidden_size 0");
    problem_free(&pb);
    build_unpermute_grad(&pb, MOEPERM_FLOAT16, MOEPERM_FLOAT16, 0, 2, 5, 0); /* no outputs */
    assert_npu_equals_cpu(&pb, "unpermute grad with no tokens and no rows");
    problem_free(&pb);
}

/* The chip the fake models is the chip the problem names: then the bits
 * agree; with another chip they do not, which shows the chip matters to
 * this comparison at all. */
static void test_unpermute_grad_follows_the_chip_the_problem_names(void **state)
{
    const int64_t n = 2, k = 2, h = 6000;
    int64_t a2 = naive_ug_chunk_for(n, k, h, MOEPERM_FLOAT, MOEPERM_FLOAT, 196352, 48);
    int64_t big = naive_ug_chunk_for(n, k, h, MOEPERM_FLOAT, MOEPERM_FLOAT, 261888, 64);
    assert_true(a2 < h);
    assert_true(big != a2);
    problem pb;
    build_unpermute_grad(&pb, MOEPERM_FLOAT, MOEPERM_FLOAT, n, k, h, n * k);
    pb.p.chip = (moeperm_chip){261888, 64};
    setenv("FAKE_ACL_UB_BYTES", "261888", 1);
    setenv("FAKE_ACL_VECTOR_CORES", "64", 1);
    assert_npu_equals_cpu(&pb, "the 261888-byte, 64-core chip on both sides");

    unsetenv("FAKE_ACL_UB_BYTES");
    unsetenv("FAKE_ACL_VECTOR_CORES");
    backend_problem on_npu = own_outputs(&pb.p), on_cpu = own_outputs(&pb.p);
    char err[512];
    assert_int_equal(backend_npu.run(npu, &on_npu, err, sizeof err), BACKEND_OK);
    assert_int_equal(backend_cpu.run(cpu, &on_cpu, err, sizeof err), BACKEND_OK);
    assert_memory_equal(on_npu.outputs[0].data, on_cpu.outputs[0].data, on_npu.outputs[0].bytes);
    assert_true(memcmp(on_npu.outputs[1].data, on_cpu.outputs[1].data,
                       on_npu.outputs[1].bytes) != 0);
    free_outputs(&on_npu);
    free_outputs(&on_cpu);
    problem_free(&pb);
}

/* ---- what reaches the operator ------------------------------------- */

static void test_unpermute_grad_without_probs_gets_a_probs_grad_placeholder(void **state)
{
    /* The fake, like the vendor, refuses a NULL probsGradOut: success is
     * the placeholder; its tensor is the fifth. */
    problem pb;
    build_unpermute_grad(&pb, MOEPERM_BF16, NO_PROBS, 4, 1, 6, 3);
    fake_acl_stats was = *stats_get();
    assert_npu_equals_cpu(&pb, "unpermute grad without probs");
    assert_int_equal(stats_get()->tensors_created - was.tensors_created, 5);
    problem_free(&pb);
}

static void test_restore_shape_reaches_the_operator_as_an_int_array(void **state)
{
    for (size_t i = 0; i < 4; i++) {
        for (int given = 0; given < 2; given++) {
            problem pb;
            build_one_of(&pb, all_ops[i]);
            pb.p.restore_shape = given ? pb.restore : NULL;
            pb.p.restore_shape_len = given ? 2 : 0;
            pb.restore[0] = 3;
            pb.restore[1] = 5;
            fake_acl_stats was = *stats_get();
            assert_npu_equals_cpu(&pb, moeperm_op_name(all_ops[i]));
            bool takes = all_ops[i] == MOEPERM_OP_UNPERMUTE ||
                         all_ops[i] == MOEPERM_OP_UNPERMUTE_GRAD;
            assert_int_equal(stats_get()->int_arrays_created - was.int_arrays_created,
                             given && takes ? 1 : 0);
            assert_int_equal(stats_get()->int_arrays_destroyed - was.int_arrays_destroyed,
                             given && takes ? 1 : 0);
            assert_int_equal(stats_get()->int_arrays_planned - was.int_arrays_planned,
                             given && takes ? 1 : 0);
            problem_free(&pb);
        }
    }
}

/* A row the operator does not write comes back as the caller had it, not
 * as the device memory was: the backend uploads outputs too. */
static void test_rows_the_operator_leaves_come_back_as_the_caller_had_them(void **state)
{
    setenv("FAKE_ACL_KEEP_ROW", "1", 1);
    for (size_t i = 0; i < 4; i++) {
        problem pb;
        build_one_of(&pb, all_ops[i]);
        backend_problem on_npu = own_outputs(&pb.p), on_cpu = own_outputs(&pb.p);
        char err[512];
        assert_int_equal(backend_npu.run(npu, &on_npu, err, sizeof err), BACKEND_OK);
        assert_int_equal(backend_cpu.run(cpu, &on_cpu, err, sizeof err), BACKEND_OK);
        const backend_tensor *first = &on_npu.outputs[0];
        size_t row = first->bytes / (size_t)first->shape[0];
        const unsigned char *got = first->data, *want = on_cpu.outputs[0].data;
        for (size_t b = 0; b < first->bytes; b++) {
            unsigned char expected = b / row == 1 ? 0x5a : want[b];
            if (got[b] != expected)
                fail_msg("%s: %s byte %zu is 0x%02x, expected 0x%02x", moeperm_op_name(all_ops[i]),
                         first->name, b, got[b], expected);
        }
        free_outputs(&on_npu);
        free_outputs(&on_cpu);
        problem_free(&pb);
    }
}

/* ---- faults -------------------------------------------------------- */

typedef struct fault {
    const char *var;  /* FAKE_ACL_FAIL_... */
    size_t counter;   /* the fake's count of the calls it fails */
    const char *call; /* what the sentence names (NULL: the operator's phase) */
    const char *code; /* the code the sentence quotes */
} fault;

static const fault faults[] = {
    {"FAKE_ACL_FAIL_MALLOC", offsetof(fake_acl_stats, malloc_calls), "aclrtMalloc(", "207001"},
    {"FAKE_ACL_FAIL_MEMCPY", offsetof(fake_acl_stats, memcpys), "aclrtMemcpy(", "507033"},
    {"FAKE_ACL_FAIL_TENSOR", offsetof(fake_acl_stats, tensor_calls), "aclCreateTensor(",
     "returned NULL"},
    {"FAKE_ACL_FAIL_INT_ARRAY", offsetof(fake_acl_stats, int_array_calls),
     "aclCreateIntArray(restore_shape)", "returned NULL"},
    {"FAKE_ACL_FAIL_PLAN", offsetof(fake_acl_stats, plans), NULL, "161002"},
    {"FAKE_ACL_FAIL_RUN", offsetof(fake_acl_stats, executors_run), NULL, "361001"},
    {"FAKE_ACL_FAIL_SYNC", offsetof(fake_acl_stats, syncs), "aclrtSynchronizeStream", "507000"},
};

static long count_of(const fake_acl_stats *s, size_t counter)
{
    long v;
    memcpy(&v, (const char *)s + counter, sizeof v);
    return v;
}

/* Everything one run took came back; unrun plans were stranded by a
 * refused workspace, as aclnn has no call to drop a plan. */
static void assert_run_gave_back(const fake_acl_stats *was, long unrun, const char *what)
{
    const fake_acl_stats *s = stats_get();
    if (s->mallocs - was->mallocs != s->frees - was->frees || s->live_bytes != 0)
        fail_msg("%s: %ld allocations, %ld frees, %lld bytes left", what,
                 s->mallocs - was->mallocs, s->frees - was->frees, s->live_bytes);
    if (s->tensors_created - was->tensors_created != s->tensors_destroyed - was->tensors_destroyed)
        fail_msg("%s: %ld tensors made, %ld destroyed", what,
                 s->tensors_created - was->tensors_created,
                 s->tensors_destroyed - was->tensors_destroyed);
    if (s->int_arrays_created - was->int_arrays_created !=
        s->int_arrays_destroyed - was->int_arrays_destroyed)
        fail_msg("%s: %ld int arrays made, %ld destroyed", what,
                 s->int_arrays_created - was->int_arrays_created,
                 s->int_arrays_destroyed - was->int_arrays_destroyed);
    long stranded = (s->executors_created - was->executors_created) -
                    (s->executors_run - was->executors_run);
    if (stranded != unrun)
        fail_msg("%s: %ld plans never ran, expected %ld", what, stranded, unrun);
    if (s->misuses != was->misuses)
        fail_msg("%s: the backend misused the runtime: %s", what, s->first_misuse);
}

static void test_every_fault_at_every_call_site_names_the_call_and_leaks_nothing(void **state)
{
    for (size_t o = 0; o < 4; o++) {
        moeperm_op op = all_ops[o];
        problem pb;
        build_one_of(&pb, op);
        char err[1024];
        fake_acl_stats clean = *stats_get();
        if (run_npu(&pb, err, sizeof err) != BACKEND_OK)
            fail_msg("%s does not run without faults: %s", moeperm_op_name(op), err);
        long tensors = stats_get()->tensor_calls - clean.tensor_calls;
        assert_true(tensors >= 3);
        assert_int_equal(stats_get()->malloc_calls - clean.malloc_calls, tensors + 1);
        enum { FAULTS = sizeof faults / sizeof faults[0] };
        long clean_calls[FAULTS];
        for (size_t f = 0; f < FAULTS; f++)
            clean_calls[f] =
                count_of(stats_get(), faults[f].counter) - count_of(&clean, faults[f].counter);

        for (size_t f = 0; f < FAULTS; f++) {
            long calls = clean_calls[f];
            bool restore = op == MOEPERM_OP_UNPERMUTE || op == MOEPERM_OP_UNPERMUTE_GRAD;
            if (faults[f].counter == offsetof(fake_acl_stats, int_array_calls))
                assert_int_equal(calls, restore ? 1 : 0);
            else
                assert_true(calls >= 1);
            for (long n = 1; n <= calls; n++) {
                char value[32], what[160], call[96];
                snprintf(value, sizeof value, "%ld", count_of(stats_get(), faults[f].counter) + n);
                snprintf(what, sizeof what, "%s, %s = call %ld of %ld", moeperm_op_name(op),
                         faults[f].var, n, calls);
                if (faults[f].call != NULL)
                    snprintf(call, sizeof call, "%s", faults[f].call);
                else if (faults[f].counter == offsetof(fake_acl_stats, plans))
                    snprintf(call, sizeof call, "%s failed", plan_name(op));
                else
                    snprintf(call, sizeof call, "%s failed", run_name(op));
                setenv(faults[f].var, value, 1);
                fake_acl_stats was = *stats_get();
                int rc = run_npu(&pb, err, sizeof err);
                unsetenv(faults[f].var);
                if (rc != BACKEND_FAILURE)
                    fail_msg("%s: returned %d, not BACKEND_FAILURE (%s)", what, rc, err);
                if (strstr(err, call) == NULL || strstr(err, faults[f].code) == NULL ||
                    strstr(err, faults[f].var) == NULL)
                    fail_msg("%s: \"%s\" does not name %s, %s and the runtime's own text", what,
                             err, call, faults[f].code);
                /* The workspace is the last allocation; refusing it strands
                 * the plan made just before. */
                bool workspace = strstr(err, "of workspace") != NULL;
                assert_true(!workspace ||
                            (faults[f].counter == offsetof(fake_acl_stats, malloc_calls) &&
                             n == calls));
                assert_run_gave_back(&was, workspace ? 1 : 0, what);
            }
        }
        problem_free(&pb);
    }
}

/* ---- refusals on the host ------------------------------------------ */

static void assert_bad_input_before_any_device_call(const problem *pb, const char *words[2],
                                                    const char *what)
{
    char err[1024];
    fake_acl_stats was = *stats_get();
    int rc = run_npu(pb, err, sizeof err);
    const fake_acl_stats *s = stats_get();
    if (rc != BACKEND_BAD_INPUT)
        fail_msg("%s: returned %d, not BACKEND_BAD_INPUT (%s)", what, rc, err);
    for (int i = 0; i < 2; i++)
        if (strstr(err, words[i]) == NULL)
            fail_msg("%s: \"%s\" does not say \"%s\"", what, err, words[i]);
    if (s->malloc_calls != was.malloc_calls || s->memcpys != was.memcpys ||
        s->tensor_calls != was.tensor_calls || s->int_array_calls != was.int_array_calls ||
        s->plans != was.plans || s->syncs != was.syncs)
        fail_msg("%s: the device was called before the refusal", what);
}

static void test_a_problem_the_reference_refuses_is_bad_input_before_any_device_call(void **state)
{
    problem pb;
    build_permute(&pb, MOEPERM_BF16, MOEPERM_INT32, 3, 2, false, 4, 0, false);
    ((int32_t *)pb.p.inputs[1].data)[3] = 16777215; /* neither an id nor a sentinel */
    assert_bad_input_before_any_device_call(&pb, (const char *[2]){"indices[1][1]", "16777215"},
                                            "permute id 16777215");
    problem_free(&pb);

    build_unpermute(&pb, MOEPERM_FLOAT, MOEPERM_FLOAT, 3, 2, 4, 5);
    give_restore_shape(&pb, 3, 4);
    int32_t *ix = pb.p.inputs[1].data;
    ix[4] = -2;
    assert_bad_input_before_any_device_call(&pb, (const char *[2]){"sorted_indices[4]", "negative"},
                                            "unpermute negative index");
    problem_free(&pb);

    build_unpermute_grad(&pb, MOEPERM_BF16, MOEPERM_BF16, 3, 2, 4, 5);
    give_restore_shape(&pb, 3, 4);
    ((int32_t *)pb.p.inputs[2].data)[2] = -1;
    assert_bad_input_before_any_device_call(&pb, (const char *[2]){"sorted_indices[2]", "-1"},
                                            "unpermute grad negative index");
    problem_free(&pb);

    build_unpermute_grad(&pb, MOEPERM_FLOAT, NO_PROBS, 3, 1, 4, 3);
    ((int32_t *)pb.p.inputs[2].data)[0] = ((int32_t *)pb.p.inputs[2].data)[1];
    assert_bad_input_before_any_device_call(&pb, (const char *[2]){"sorted_indices[0]",
                                                                    "both name row"},
                                            "unpermute grad row written twice");
    problem_free(&pb);

    build_unpermute_grad(&pb, MOEPERM_FLOAT, MOEPERM_FLOAT, 3, 2, 4, 5);
    free(pb.p.outputs[1].data);
    pb.p.outputs[1] = absent();
    assert_bad_input_before_any_device_call(&pb, (const char *[2]){"probs_grad", "NULL"},
                                            "unpermute grad with probs but no probs_grad");
    problem_free(&pb);
}

/* ---- a runtime without one operator -------------------------------- */

/* In a missing-<what> group: the operator (or restore_shape's int arrays)
 * this fake lacks fails naming exactly what is missing, before any device
 * call; everything else runs and agrees with the cpu backend. */
static moeperm_op missing_op; /* 0: the int arrays are missing */

static void test_what_the_runtime_lacks_is_named_and_the_rest_still_runs(void **state)
{
    for (size_t i = 0; i < 4; i++) {
        moeperm_op op = all_ops[i];
        for (int restore = 0; restore < 2; restore++) {
            problem pb;
            build_one_of(&pb, op);
            pb.p.restore_shape = restore ? pb.restore : NULL;
            pb.p.restore_shape_len = restore ? 2 : 0;
            pb.restore[0] = 3;
            pb.restore[1] = 5;
            bool takes = op == MOEPERM_OP_UNPERMUTE || op == MOEPERM_OP_UNPERMUTE_GRAD;
            char expected[192] = "";
            if (op == missing_op)
                snprintf(expected, sizeof expected, "the Ascend runtime has no %s, which %s needs",
                         plan_name(op), moeperm_op_name(op));
            else if (missing_op == 0 && restore && takes)
                snprintf(expected, sizeof expected,
                         "the Ascend runtime has no aclCreateIntArray, which restore_shape needs");
            if (expected[0] == '\0') {
                assert_npu_equals_cpu(&pb, moeperm_op_name(op));
            } else {
                char err[1024];
                fake_acl_stats was = *stats_get();
                assert_int_equal(run_npu(&pb, err, sizeof err), BACKEND_FAILURE);
                if (strncmp(err, expected, strlen(expected)) != 0)
                    fail_msg("%s: \"%s\" is not \"%s ...\"", moeperm_op_name(op), err, expected);
                for (size_t j = 0; j < 4; j++)
                    if (all_ops[j] != op && strstr(err, plan_name(all_ops[j])) != NULL)
                        fail_msg("\"%s\" names another operator", err);
                assert_int_equal(stats_get()->malloc_calls, was.malloc_calls);
                assert_int_equal(stats_get()->tensor_calls, was.tensor_calls);
            }
            problem_free(&pb);
        }
    }
}

int main(int argc, char **argv)
{
    const char *group = argc > 1 ? argv[1] : "main";
#define T(name) cmocka_unit_test_setup_teardown(name, test_setup, test_teardown)
    const struct CMUnitTest main_tests[] = {
        T(test_permute_bits_equal_cpu_for_every_token_and_index_dtype),
        T(test_permute_with_one_dimensional_indices_bits_equal_cpu),
        T(test_unpermute_bits_equal_cpu_with_and_without_probs),
        T(test_unpermute_grad_bits_equal_cpu_with_and_without_probs),
        T(test_permute_grad_bits_equal_cpu_beside_the_family),
        T(test_empty_problems_bits_equal_cpu),
        T(test_unpermute_grad_follows_the_chip_the_problem_names),
        T(test_unpermute_grad_without_probs_gets_a_probs_grad_placeholder),
        T(test_restore_shape_reaches_the_operator_as_an_int_array),
        T(test_rows_the_operator_leaves_come_back_as_the_caller_had_them),
        T(test_every_fault_at_every_call_site_names_the_call_and_leaks_nothing),
        T(test_a_problem_the_reference_refuses_is_bad_input_before_any_device_call),
    };
    const struct CMUnitTest missing_tests[] = {
        T(test_what_the_runtime_lacks_is_named_and_the_rest_still_runs),
    };
#undef T
    if (strcmp(group, "main") == 0)
        return cmocka_run_group_tests_name("npu family", main_tests, group_setup,
                                           group_teardown);
    static const struct {
        const char *group, *var;
        moeperm_op op;
    } missing[] = {
        {"missing-permute", "FAKE_ACL_NOPERMUTE", MOEPERM_OP_PERMUTE},
        {"missing-unpermute", "FAKE_ACL_NOUNPERMUTE", MOEPERM_OP_UNPERMUTE},
        {"missing-unpermute-grad", "FAKE_ACL_NOUNPERMUTE_GRAD", MOEPERM_OP_UNPERMUTE_GRAD},
        {"missing-int-array", "FAKE_ACL_NOINTARRAY", 0},
    };
    for (size_t i = 0; i < sizeof missing / sizeof missing[0]; i++) {
        if (strcmp(group, missing[i].group) != 0)
            continue;
        fake_var = missing[i].var;
        missing_op = missing[i].op;
        return cmocka_run_group_tests_name(missing[i].group, missing_tests, group_setup,
                                           group_teardown);
    }
    fprintf(stderr, "usage: %s [main | missing-permute | missing-unpermute | "
                    "missing-unpermute-grad | missing-int-array]\n", argv[0]);
    return 2;
}

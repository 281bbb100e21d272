/*
 * The executor is a single-use plan: the run frees it (a leak checker sees
 * no leak, a second free would be caught by the sanitizer build), an unrun
 * plan is dropped with moeperm_executor_destroy(), tensors may be destroyed
 * between the phases, and the run sees the memory as it is at run time.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include <moeperm/moeperm.h>

enum { T = 2, K = 2, H = 2 };

typedef struct buffers {
    float grad[T * K * H];
    int32_t indices[T * K];
    float out[T * H];
} buffers;

static moeperm_executor *plan_for(buffers *b)
{
    int64_t gd[2] = {T * K, H}, id[1] = {T * K}, od[2] = {T, H};
    moeperm_tensor *g = moeperm_tensor_create(gd, 2, MOEPERM_FLOAT, NULL, 0, b->grad);
    moeperm_tensor *ix = moeperm_tensor_create(id, 1, MOEPERM_INT32, NULL, 0, b->indices);
    moeperm_tensor *o = moeperm_tensor_create(od, 2, MOEPERM_FLOAT, NULL, 0, b->out);
    uint64_t ws = 99;
    moeperm_executor *plan = NULL;
    assert_int_equal(moeperm_token_permute_grad_get_workspace_size(g, ix, K, false, o, &ws, &plan),
                     MOEPERM_SUCCESS);
    assert_int_equal(ws, 0);
    moeperm_tensor_destroy(g); /* the plan holds copies of the views */
    moeperm_tensor_destroy(ix);
    moeperm_tensor_destroy(o);
    return plan;
}

static void fill(buffers *b)
{
    for (int i = 0; i < T * K * H; i++)
        b->grad[i] = (float)(i + 1);
    for (int i = 0; i < T * K; i++)
        b->indices[i] = i;
    memset(b->out, 0, sizeof b->out);
}

static void test_run_after_tensors_destroyed_computes_and_frees_plan(void **state)
{
    (void)state;
    buffers b;
    fill(&b);
    moeperm_executor *plan = plan_for(&b);
    assert_non_null(plan);
    /* rows 0+1 and 2+3: {1,2}+{3,4}, {5,6}+{7,8} */
    assert_int_equal(moeperm_token_permute_grad(NULL, 0, plan, NULL), MOEPERM_SUCCESS);
    const float want[T * H] = {4, 6, 12, 14};
    assert_memory_equal(b.out, want, sizeof want);
}

/* moeperm_executor_run() is the second phase of whichever operator made
 * the plan: the same bits, the same refusals. */
static void test_executor_run_is_the_planning_operators_second_phase(void **state)
{
    (void)state;
    buffers b;
    fill(&b);
    assert_int_equal(moeperm_executor_run(NULL, 0, plan_for(&b), NULL), MOEPERM_SUCCESS);
    const float want[T * H] = {4, 6, 12, 14};
    assert_memory_equal(b.out, want, sizeof want);
    memset(b.out, 0, sizeof b.out);
    int stream;
    assert_int_equal(moeperm_executor_run(NULL, 0, plan_for(&b), &stream),
                     MOEPERM_ERR_PARAM_INVALID);
    assert_non_null(strstr(moeperm_last_error(), "stream must be NULL"));
    const float zero[T * H] = {0};
    assert_memory_equal(b.out, zero, sizeof zero);
    assert_int_equal(moeperm_executor_run(NULL, 0, NULL, NULL), MOEPERM_ERR_PARAM_NULLPTR);
}

static void test_destroying_an_unrun_plan_writes_nothing(void **state)
{
    (void)state;
    buffers b;
    fill(&b);
    moeperm_executor *plan = plan_for(&b);
    moeperm_executor_destroy(plan);
    moeperm_executor_destroy(NULL);
    const float zero[T * H] = {0};
    assert_memory_equal(b.out, zero, sizeof zero);
}

static void test_run_reads_grad_at_run_time(void **state)
{
    (void)state;
    buffers b;
    fill(&b);
    moeperm_executor *plan = plan_for(&b);
    b.grad[0] = 100.0f; /* like a device buffer filled after planning */
    assert_int_equal(moeperm_token_permute_grad(NULL, 0, plan, NULL), MOEPERM_SUCCESS);
    assert_true(b.out[0] == 103.0f);
}

static void test_indices_changed_after_planning_never_read_out_of_bounds(void **state)
{
    (void)state;
    buffers b;
    fill(&b);
    moeperm_executor *plan = plan_for(&b);
    b.indices[1] = 1 << 30; /* now outside the rows: skipped like a dropped slot */
    b.indices[2] = -7;
    assert_int_equal(moeperm_token_permute_grad(NULL, 0, plan, NULL), MOEPERM_SUCCESS);
    const float want[T * H] = {1, 2, 7, 8};
    assert_memory_equal(b.out, want, sizeof want);
}

static void test_many_plans_in_flight_are_independent(void **state)
{
    (void)state;
    buffers a, b;
    fill(&a);
    fill(&b);
    b.grad[0] = -1.0f;
    moeperm_executor *pa = plan_for(&a), *pb = plan_for(&b);
    assert_ptr_not_equal(pa, pb);
    assert_int_equal(moeperm_token_permute_grad(NULL, 0, pb, NULL), MOEPERM_SUCCESS);
    assert_int_equal(moeperm_token_permute_grad(NULL, 0, pa, NULL), MOEPERM_SUCCESS);
    assert_true(a.out[0] == 4.0f && b.out[0] == 2.0f);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_run_after_tensors_destroyed_computes_and_frees_plan),
        cmocka_unit_test(test_executor_run_is_the_planning_operators_second_phase),
        cmocka_unit_test(test_destroying_an_unrun_plan_writes_nothing),
        cmocka_unit_test(test_run_reads_grad_at_run_time),
        cmocka_unit_test(test_indices_changed_after_planning_never_read_out_of_bounds),
        cmocka_unit_test(test_many_plans_in_flight_are_independent),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}

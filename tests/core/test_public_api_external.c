/*
 * The public API as an outside program sees it: this file includes only
 * <moeperm/moeperm.h> and links the shared library, the way a framework
 * using the CPU fallback would.  It checks the documented codes, that
 * failures leave outputs untouched, exact bits of a hand-computed case,
 * the version, and that the last-error sentence is per thread.
 */
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <cmocka.h>

#include <moeperm/moeperm.h>

/* The build passes meson.build's project version as PROJECT_VERSION: the
 * header's macros, the parts they are made of and the linked library must
 * all say the same. */
static void test_header_and_library_versions_equal_meson_build(void **state)
{
    (void)state;
    assert_string_equal(MOEPERM_VERSION_STRING, PROJECT_VERSION);
    char parts[32];
    snprintf(parts, sizeof parts, "%d.%d.%d", MOEPERM_VERSION_MAJOR, MOEPERM_VERSION_MINOR,
             MOEPERM_VERSION_PATCH);
    assert_string_equal(parts, PROJECT_VERSION);
    assert_string_equal(moeperm_version(), PROJECT_VERSION);
}

/* fp16 case worked by hand:
 *   token 0 = row 2 + row 0 = 1.5 + 0.25 = 1.75 (0x3f00)
 *   token 1 = row 1 + row 3 = 2048 + 1 = 2049 -> not representable in fp16
 *             (spacing 2 above 2048): a tie, even is 2048 (0x6800) */
static void test_hand_computed_fp16_bits(void **state)
{
    (void)state;
    uint16_t grad[4] = {0x3400, 0x6800, 0x3e00, 0x3c00}; /* 0.25, 2048, 1.5, 1 */
    int32_t indices[4] = {2, 0, 1, 3};
    uint16_t out[2] = {0xdead, 0xdead};
    int64_t gd[2] = {4, 1}, id[1] = {4}, od[2] = {2, 1};
    moeperm_tensor *g = moeperm_tensor_create(gd, 2, MOEPERM_FLOAT16, NULL, 0, grad);
    moeperm_tensor *ix = moeperm_tensor_create(id, 1, MOEPERM_INT32, NULL, 0, indices);
    moeperm_tensor *o = moeperm_tensor_create(od, 2, MOEPERM_FLOAT16, NULL, 0, out);
    uint64_t ws;
    moeperm_executor *plan;
    assert_int_equal(moeperm_token_permute_grad_get_workspace_size(g, ix, 2, false, o, &ws, &plan),
                     MOEPERM_SUCCESS);
    assert_int_equal(moeperm_token_permute_grad(NULL, ws, plan, NULL), MOEPERM_SUCCESS);
    assert_int_equal(out[0], 0x3f00);
    assert_int_equal(out[1], 0x6800);
    moeperm_tensor_destroy(g);
    moeperm_tensor_destroy(ix);
    moeperm_tensor_destroy(o);
}

static void test_failure_codes_and_untouched_output(void **state)
{
    (void)state;
    float grad[4] = {1, 2, 3, 4};
    int32_t indices[4] = {0, 1, 2, -1};
    float out[2] = {-9, -9};
    int64_t gd[2] = {4, 1}, id[1] = {4}, od[2] = {2, 1};
    moeperm_tensor *g = moeperm_tensor_create(gd, 2, MOEPERM_FLOAT, NULL, 0, grad);
    moeperm_tensor *ix = moeperm_tensor_create(id, 1, MOEPERM_INT32, NULL, 0, indices);
    moeperm_tensor *o = moeperm_tensor_create(od, 2, MOEPERM_FLOAT, NULL, 0, out);
    uint64_t ws;
    moeperm_executor *plan;
    assert_int_equal(moeperm_token_permute_grad_get_workspace_size(g, ix, 2, false, o, &ws, &plan),
                     161002);
    assert_string_equal(moeperm_last_error(),
                        "the device's result is undetermined: sorted_indices[3] = -1 is "
                        "negative: the kernel would address row -1 of permuted_output_grad, outside "
                        "the tensor");
    assert_int_equal(moeperm_token_permute_grad_get_workspace_size(NULL, ix, 2, false, o, &ws,
                                                                   &plan),
                     161001);
    assert_string_equal(moeperm_last_error(),
                        "the device refuses permuted_output_grad = NULL: it is a required tensor");
    assert_true(out[0] == -9 && out[1] == -9);
    assert_string_equal(moeperm_status_name(561002), "MOEPERM_ERR_INNER_TILING_ERROR");
    moeperm_tensor_destroy(g);
    moeperm_tensor_destroy(ix);
    moeperm_tensor_destroy(o);
}

static void *fail_in_another_thread(void *arg)
{
    (void)arg;
    moeperm_convert(NULL, (moeperm_dtype)5, NULL, MOEPERM_FLOAT, 1);
    return (void *)strstr(moeperm_last_error(), "src_dtype 5");
}

static void test_last_error_is_per_thread(void **state)
{
    (void)state;
    moeperm_convert(NULL, MOEPERM_FLOAT, NULL, (moeperm_dtype)7, 1);
    pthread_t thread;
    void *seen = NULL;
    assert_int_equal(pthread_create(&thread, NULL, fail_in_another_thread, NULL), 0);
    assert_int_equal(pthread_join(thread, &seen), 0);
    assert_non_null(seen);
    assert_non_null(strstr(moeperm_last_error(), "dst_dtype 7"));
}

/* The instruction-set and named-chip functions are exported, and work
 * through the shared library alone. */
static void test_instruction_sets_and_named_chips_through_the_shared_library(void **state)
{
    (void)state;
    moeperm_isa in_use = moeperm_isa_in_use();
    assert_true(in_use >= MOEPERM_ISA_PORTABLE && in_use <= MOEPERM_ISA_X86_AVX512);
    assert_int_equal(moeperm_isa_choose(MOEPERM_ISA_PORTABLE), 0);
    assert_int_equal(moeperm_isa_in_use(), MOEPERM_ISA_PORTABLE);
    assert_string_equal(moeperm_isa_name(moeperm_isa_in_use()), "portable");
    assert_int_equal(moeperm_isa_choose(MOEPERM_ISA_AUTO), 0);
    assert_int_equal(moeperm_isa_in_use(), in_use);
    moeperm_chip chip = MOEPERM_CHIP_ASCEND910B4, named;
    assert_int_equal(moeperm_chip_by_name("Ascend910B4", &named), 0);
    assert_int_equal(named.ub_bytes, chip.ub_bytes);
    assert_int_equal(named.vector_cores, chip.vector_cores);
    assert_non_null(strstr(moeperm_chip_names(), "Ascend910_9392"));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_header_and_library_versions_equal_meson_build),
        cmocka_unit_test(test_hand_computed_fp16_bits),
        cmocka_unit_test(test_failure_codes_and_untouched_output),
        cmocka_unit_test(test_last_error_is_per_thread),
        cmocka_unit_test(test_instruction_sets_and_named_chips_through_the_shared_library),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}

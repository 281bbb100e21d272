/*
 * struct_layout prints, as JSON, the size of each public structure that the
 * Python package mirrors with ctypes (python/moeperm/_capi.py and
 * _golden_capi.py) and the offset of each of its fields, as this compiler
 * lays them out; test_struct_mirrors.py compares the mirrors with it.  A
 * field removed or renamed in a header fails this program's build; one
 * retyped, moved or added moves an offset or the size, and the comparison
 * fails until the mirror (and the list here) follow.
 */
#include <stddef.h>
#include <stdio.h>

#include <moeperm/golden.h>
#include <moeperm/moeperm.h>

static int first_struct = 1, first_field;

static void begin(const char *name, size_t size)
{
    printf("%s\n  \"%s\": {\"size\": %zu, \"fields\": {", first_struct ? "{" : ",", name, size);
    first_struct = 0;
    first_field = 1;
}

static void field(const char *name, size_t offset)
{
    printf("%s\"%s\": %zu", first_field ? "" : ", ", name, offset);
    first_field = 0;
}

static void end(void)
{
    printf("}}");
}

#define BEGIN(type) begin(#type, sizeof(type))
#define FIELD(type, member) field(#member, offsetof(type, member))

int main(void)
{
    BEGIN(moeperm_chip);
    FIELD(moeperm_chip, ub_bytes);
    FIELD(moeperm_chip, vector_cores);
    end();

    BEGIN(moeperm_golden_tensor);
    FIELD(moeperm_golden_tensor, name);
    FIELD(moeperm_golden_tensor, role);
    FIELD(moeperm_golden_tensor, dtype);
    FIELD(moeperm_golden_tensor, ndim);
    FIELD(moeperm_golden_tensor, shape);
    FIELD(moeperm_golden_tensor, file);
    FIELD(moeperm_golden_tensor, path);
    FIELD(moeperm_golden_tensor, data);
    FIELD(moeperm_golden_tensor, bytes);
    end();

    BEGIN(moeperm_golden_attrs);
    FIELD(moeperm_golden_attrs, top_k);
    FIELD(moeperm_golden_attrs, num_out_tokens);
    FIELD(moeperm_golden_attrs, padded_mode);
    FIELD(moeperm_golden_attrs, restore_shape_len);
    FIELD(moeperm_golden_attrs, restore_shape);
    FIELD(moeperm_golden_attrs, ub_bytes);
    FIELD(moeperm_golden_attrs, vector_cores);
    FIELD(moeperm_golden_attrs, chip);
    end();

    BEGIN(moeperm_golden_recipe);
    FIELD(moeperm_golden_recipe, routing);
    FIELD(moeperm_golden_recipe, values);
    FIELD(moeperm_golden_recipe, probs_values);
    FIELD(moeperm_golden_recipe, num_experts);
    FIELD(moeperm_golden_recipe, hot_percent);
    FIELD(moeperm_golden_recipe, sentinels);
    FIELD(moeperm_golden_recipe, huge_indices);
    end();

    BEGIN(moeperm_golden_case);
    FIELD(moeperm_golden_case, dir);
    FIELD(moeperm_golden_case, manifest_path);
    FIELD(moeperm_golden_case, format_version);
    FIELD(moeperm_golden_case, op);
    FIELD(moeperm_golden_case, name);
    FIELD(moeperm_golden_case, description);
    FIELD(moeperm_golden_case, generator);
    FIELD(moeperm_golden_case, command);
    FIELD(moeperm_golden_case, seed);
    FIELD(moeperm_golden_case, attrs);
    FIELD(moeperm_golden_case, recipe);
    FIELD(moeperm_golden_case, tensors);
    FIELD(moeperm_golden_case, tensor_count);
    end();

    BEGIN(moeperm_golden_slot);
    FIELD(moeperm_golden_slot, name);
    FIELD(moeperm_golden_slot, role);
    FIELD(moeperm_golden_slot, optional);
    end();

    BEGIN(moeperm_golden_spec);
    FIELD(moeperm_golden_spec, op);
    FIELD(moeperm_golden_spec, name);
    FIELD(moeperm_golden_spec, description);
    FIELD(moeperm_golden_spec, dtype);
    FIELD(moeperm_golden_spec, has_probs);
    FIELD(moeperm_golden_spec, probs_dtype);
    FIELD(moeperm_golden_spec, index_dtype);
    FIELD(moeperm_golden_spec, tokens_num);
    FIELD(moeperm_golden_spec, top_k);
    FIELD(moeperm_golden_spec, hidden_size);
    FIELD(moeperm_golden_spec, num_rows);
    FIELD(moeperm_golden_spec, num_out_tokens);
    FIELD(moeperm_golden_spec, num_experts);
    FIELD(moeperm_golden_spec, hot_percent);
    FIELD(moeperm_golden_spec, sentinels);
    FIELD(moeperm_golden_spec, values);
    FIELD(moeperm_golden_spec, probs_values);
    FIELD(moeperm_golden_spec, routing);
    FIELD(moeperm_golden_spec, ub_bytes);
    FIELD(moeperm_golden_spec, vector_cores);
    FIELD(moeperm_golden_spec, seed);
    FIELD(moeperm_golden_spec, padded_mode);
    FIELD(moeperm_golden_spec, num_topk);
    FIELD(moeperm_golden_spec, extra_indices);
    FIELD(moeperm_golden_spec, huge_indices);
    FIELD(moeperm_golden_spec, hidden_outer);
    FIELD(moeperm_golden_spec, chip);
    end();

    BEGIN(moeperm_golden_diff);
    FIELD(moeperm_golden_diff, token);
    FIELD(moeperm_golden_diff, column);
    FIELD(moeperm_golden_diff, expected);
    FIELD(moeperm_golden_diff, actual);
    end();

    BEGIN(moeperm_golden_compare_result);
    FIELD(moeperm_golden_compare_result, elements);
    FIELD(moeperm_golden_compare_result, differing);
    FIELD(moeperm_golden_compare_result, nan_mismatch);
    FIELD(moeperm_golden_compare_result, max_ulp);
    FIELD(moeperm_golden_compare_result, nonfinite_differing);
    FIELD(moeperm_golden_compare_result, first);
    FIELD(moeperm_golden_compare_result, first_count);
    FIELD(moeperm_golden_compare_result, where);
    FIELD(moeperm_golden_compare_result, ranges);
    FIELD(moeperm_golden_compare_result, row_noun);
    FIELD(moeperm_golden_compare_result, column_noun);
    end();

    BEGIN(moeperm_golden_judge_options);
    FIELD(moeperm_golden_judge_options, strict_nan);
    FIELD(moeperm_golden_judge_options, max_ulp);
    FIELD(moeperm_golden_judge_options, diagnose);
    end();

    printf("\n}\n");
    return 0;
}

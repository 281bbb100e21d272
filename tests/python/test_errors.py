"""Refusals: the library's status and sentence as moeperm.Error, Python
misuse as TypeError / ValueError naming the argument, nothing written."""
import numpy as np
import pytest

import moeperm

GRAD = np.ones((8, 3), dtype=np.float32)
IDX = np.arange(8, dtype=np.int32)


def refused(match, grad=GRAD, idx=IDX, top_k=2, padded_mode=False, out_shape=(4, 3)):
    """Calls with a sentinel-filled out; checks the Error and that out is
    untouched."""
    out = np.full(out_shape, 42.0, dtype=np.float32)
    with pytest.raises(moeperm.Error, match=match) as info:
        moeperm.moe_token_permute_grad(grad, idx, top_k, padded_mode, out=out)
    assert (out == 42.0).all()
    return info.value


def test_index_out_of_range_names_position_value_and_range():
    e = refused(r"^sorted_indices\[5\] = 8 is outside \[0, 7\]$",
                idx=np.array([0, 1, 2, 3, 4, 8, 6, 7], dtype=np.int32))
    assert e.status == 161002 and e.status_name == "MOEPERM_ERR_PARAM_INVALID"
    assert isinstance(e, ValueError)


def test_repeated_index_names_both_positions():
    refused(r"^sorted_indices\[4\] = 1 repeats sorted_indices\[1\]$",
            idx=np.array([0, 1, 2, 3, 1, 5, 6, 7], dtype=np.int32))


@pytest.mark.parametrize("top_k", [0, -3, 513, 1 << 70])
def test_top_k_outside_its_range_is_refused_with_the_value(top_k):
    e = refused(r"^num_topk = %d is outside \[1, 512\]$" % top_k, top_k=top_k, out_shape=(0, 3))
    assert e.status == 161002


def test_padded_mode_true_is_refused():
    refused(r"^padded_mode = true is not supported; only false is$", padded_mode=True)


def test_count_not_a_multiple_of_top_k_is_refused():
    refused(r"^sorted_indices has 8 entries, not a multiple of num_topk = 3$", top_k=3,
            out_shape=(2, 3))


def test_out_of_the_wrong_shape_is_refused():
    refused(r"^out shape is \[3, 3\], expected \[4, 3\]", out_shape=(3, 3))


def test_more_rows_than_entries_is_refused():
    refused(r"^permuted_output_grad has 9 rows, more than the 8 entries of sorted_indices$",
            grad=np.ones((9, 3), dtype=np.float32))


def test_out_overlapping_grad_is_refused_untouched():
    grad = np.ones((8, 3), dtype=np.float32)
    with pytest.raises(moeperm.Error, match=r"^out overlaps permuted_output_grad in memory$"):
        moeperm.moe_token_permute_grad(grad, IDX, 2, out=grad[:4])
    assert (grad == 1.0).all()


def test_int64_sorted_indices_are_refused_as_the_aclnn_api_refuses_them():
    e = refused(r"^sorted_indices dtype 9 \(int64\) is not INT32 \(3\)$",
                idx=np.arange(8, dtype=np.int64))
    assert e.status == 161002


def test_list_index_that_does_not_fit_int32_is_refused_with_the_value():
    idx = list(range(8))
    idx[6] = 1 << 40
    e = refused(r"^sorted_indices\[6\] = 1099511627776 is outside \[0, 7\]$", idx=idx)
    assert e.status == 161002


@pytest.mark.parametrize("dtype,word", [(np.float64, "float64"), (np.int32, "int32"),
                                        (np.int16, "int16")])
def test_unsupported_grad_dtype_is_a_type_error_naming_it(dtype, word):
    with pytest.raises(TypeError, match=r"^permuted_output_grad dtype %s is not supported here; "
                                        r"it must be float32, float16 or uint16 \(bf16 bit "
                                        r"patterns\)" % word):
        moeperm.moe_token_permute_grad(GRAD.astype(dtype), IDX, 2)


def test_int16_grad_refusal_says_how_to_pass_bf16():
    with pytest.raises(TypeError, match=r"array.view\(np.uint16\)"):
        moeperm.moe_token_permute_grad(GRAD.astype(np.int16), IDX, 2)


def test_float_indices_are_a_type_error_naming_them():
    with pytest.raises(TypeError, match=r"^sorted_indices dtype float32 is not supported here; "
                                        r"it must be int32 or int64$"):
        moeperm.moe_token_permute_grad(GRAD, IDX.astype(np.float32), 2)


def test_wrong_rank_is_a_value_error_naming_the_argument_and_layout():
    with pytest.raises(ValueError, match=r"^permuted_output_grad has 3 dims; it must have 2 "
                                         r"\(\[rows, hidden_size\]\)$"):
        moeperm.moe_token_permute_grad(GRAD.reshape(2, 4, 3), IDX, 2)
    with pytest.raises(ValueError, match=r"^sorted_indices has 2 dims; it must have 1"):
        moeperm.moe_token_permute_grad(GRAD, IDX.reshape(4, 2), 2)
    with pytest.raises(ValueError, match=r"^out has 1 dims; it must have 2"):
        moeperm.moe_token_permute_grad(GRAD, IDX, 2, out=np.zeros(12, dtype=np.float32))


def test_top_k_that_is_not_an_integer_is_a_type_error():
    with pytest.raises(TypeError, match=r"^num_topk is a float; it must be an integer$"):
        moeperm.moe_token_permute_grad(GRAD, IDX, 2.0)


def test_out_of_another_dtype_is_a_type_error_untouched():
    out = np.full((4, 3), 42.0, dtype=np.float16)
    with pytest.raises(TypeError, match=r"^out dtype float16 differs from permuted_output_grad "
                                        r"dtype float32$"):
        moeperm.moe_token_permute_grad(GRAD, IDX, 2, out=out)
    assert (out == 42.0).all()


def test_out_that_is_not_an_array_is_a_type_error():
    with pytest.raises(TypeError, match=r"^out is a list; it must be a numpy array or a CPU "
                                        r"torch.Tensor$"):
        moeperm.moe_token_permute_grad(GRAD, IDX, 2, out=[[0.0] * 3] * 4)


def test_read_only_out_is_a_value_error_untouched():
    out = np.full((4, 3), 42.0, dtype=np.float32)
    out.flags.writeable = False
    with pytest.raises(ValueError, match=r"^out is read-only$"):
        moeperm.moe_token_permute_grad(GRAD, IDX, 2, out=out)
    assert (out == 42.0).all()


def test_lists_are_accepted_as_inputs():
    result = moeperm.moe_token_permute_grad(GRAD, IDX.tolist(), 2)
    assert result.tolist() == [[2.0] * 3] * 4


def test_error_repr_and_str():
    e = refused(r"^padded_mode", padded_mode=True)
    assert str(e) == "padded_mode = true is not supported; only false is"
    assert repr(e).startswith("moeperm.Error(MOEPERM_ERR_PARAM_INVALID, ")


def test_threads_each_get_their_own_error_sentence():
    import threading
    failures = []

    def worker(t):
        idx = np.arange(8, dtype=np.int32)
        idx[3] = 100 + t
        for _ in range(200):
            try:
                moeperm.moe_token_permute_grad(GRAD, idx, 2)
                failures.append("thread %d: no error" % t)
            except moeperm.Error as e:
                if str(e) != "sorted_indices[3] = %d is outside [0, 7]" % (100 + t):
                    failures.append("thread %d: %s" % (t, e))
            moeperm.moe_token_permute_grad(GRAD, IDX, 2)

    threads = [threading.Thread(target=worker, args=(t,)) for t in range(6)]
    for th in threads:
        th.start()
    for th in threads:
        th.join()
    assert failures == []

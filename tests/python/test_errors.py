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


UNDETERMINED = r"^the device's result is undetermined: "


def test_negative_index_names_position_and_value():
    e = refused(UNDETERMINED + r"sorted_indices\[5\] = -1 is negative: the kernel would address "
                r"row -1 of permuted_output_grad, outside the tensor$",
                idx=np.array([0, 1, 2, 3, 4, -1, 6, 7], dtype=np.int32))
    assert e.status == 161002 and e.status_name == "MOEPERM_ERR_PARAM_INVALID"
    assert isinstance(e, ValueError)


def test_repeated_and_dropped_indices_are_summed_as_the_device_sums_them():
    # row 1 read twice, rows 8 and 9 beyond the 8 rows: dropped slots
    grad = np.arange(24, dtype=np.float32).reshape(8, 3)
    idx = np.array([0, 1, 2, 1, 8, 5, 9, 7], dtype=np.int32)
    got = moeperm.moe_token_permute_grad(grad, idx, 2)
    want = np.stack([grad[0] + grad[1], grad[2] + grad[1], grad[5], grad[7]])
    assert (got == want).all()


@pytest.mark.parametrize("top_k", [0, -3, 513])
def test_top_k_without_a_determined_result_is_refused_with_the_value(top_k):
    e = refused(UNDETERMINED + r"num_topk = %d" % top_k, top_k=top_k)
    assert e.status == 161002


def test_top_k_beyond_int64_is_refused_with_the_value():
    refused(r"^num_topk = %d is outside \[1, 512\]$" % (1 << 70), top_k=1 << 70, out_shape=(0, 3))


def test_top_k_minus_one_means_one():
    got = moeperm.moe_token_permute_grad(GRAD, IDX, -1)
    assert got.shape == (8, 3) and (got == GRAD).all()


def test_padded_mode_true_is_ignored():
    assert (moeperm.moe_token_permute_grad(GRAD, IDX, 2, True) ==
            moeperm.moe_token_permute_grad(GRAD, IDX, 2, False)).all()


def test_count_not_a_multiple_of_top_k_leaves_the_last_entries_unread():
    grad = np.arange(24, dtype=np.float32).reshape(8, 3)
    got = moeperm.moe_token_permute_grad(grad, IDX, 3)
    assert (got == np.stack([grad[0:3].sum(0), grad[3:6].sum(0)])).all()


def test_out_of_the_wrong_shape_is_refused():
    refused(UNDETERMINED + r"out shape is \[3, 3\], expected \[4, 3\]", out_shape=(3, 3))


def test_more_rows_than_entries_are_accepted():
    grad = np.ones((9, 3), dtype=np.float32)
    assert (moeperm.moe_token_permute_grad(grad, IDX, 2) == 2.0).all()


def test_out_overlapping_grad_is_refused_untouched():
    grad = np.ones((8, 3), dtype=np.float32)
    with pytest.raises(moeperm.Error, match=UNDETERMINED + r"out overlaps permuted_output_grad "
                                            r"in memory$"):
        moeperm.moe_token_permute_grad(grad, IDX, 2, out=grad[:4])
    assert (grad == 1.0).all()


def test_int64_index_that_does_not_fit_int32_is_refused_with_the_value():
    idx = np.arange(8, dtype=np.int64)
    idx[6] = 1 << 40
    e = refused(r"^sorted_indices\[6\] = 1099511627776 does not fit in int32$", idx=idx)
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
    e = refused(UNDETERMINED, idx=np.array([0, 1, 2, 3, 4, -1, 6, 7], dtype=np.int32))
    assert str(e) == ("the device's result is undetermined: sorted_indices[5] = -1 is negative: "
                      "the kernel would address row -1 of permuted_output_grad, outside the tensor")
    assert repr(e).startswith("moeperm.Error(MOEPERM_ERR_PARAM_INVALID, ")


def test_threads_each_get_their_own_error_sentence():
    import threading
    failures = []

    def worker(t):
        idx = np.arange(8, dtype=np.int32)
        idx[3] = -100 - t
        for _ in range(200):
            try:
                moeperm.moe_token_permute_grad(GRAD, idx, 2)
                failures.append("thread %d: no error" % t)
            except moeperm.Error as e:
                if "sorted_indices[3] = %d is negative" % (-100 - t) not in str(e):
                    failures.append("thread %d: %s" % (t, e))
            moeperm.moe_token_permute_grad(GRAD, IDX, 2)

    threads = [threading.Thread(target=worker, args=(t,)) for t in range(6)]
    for th in threads:
        th.start()
    for th in threads:
        th.join()
    assert failures == []

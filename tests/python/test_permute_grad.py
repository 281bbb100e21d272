"""moe_token_permute_grad against the numpy model, bit for bit."""
import numpy as np
import pytest

import moeperm
import models

DTYPES = [np.float32, np.float16, np.uint16]
IDS = {np.float32: "float32", np.float16: "float16", np.uint16: "bf16"}


@pytest.mark.parametrize("dtype", DTYPES, ids=IDS.get)
@pytest.mark.parametrize("tokens,top_k,hidden,dropped", [
    (1, 1, 1, 0), (7, 1, 17, 0), (33, 2, 64, 0), (64, 8, 130, 0), (50, 4, 33, 60),
    (16, 3, 8, 48), (9, 5, 3, 44), (0, 4, 16, 0), (5, 2, 0, 0)])
def test_random_sums_equal_numpy_model_bit_for_bit(dtype, tokens, top_k, hidden, dropped):
    rng = np.random.default_rng(tokens * 1000 + top_k * 10 + hidden)
    n = tokens * top_k
    rows = n - dropped
    grad = models.random_grad(rng, (rows, hidden), dtype)
    idx = models.random_permutation(rng, n)
    result = moeperm.moe_token_permute_grad(grad, idx, top_k)
    assert type(result) is np.ndarray and result.dtype == dtype
    models.assert_same_bits(models.permute_grad(grad, idx, top_k), result)


def test_bf16_rounds_once_after_float32_sum():
    # 1 + 2^-8 + 2^-8: a bf16 accumulator would lose each 2^-8 to rounding.
    grad = np.array([[0x3F80], [0x3B80], [0x3B80]], dtype=np.uint16)
    result = moeperm.moe_token_permute_grad(grad, np.arange(3, dtype=np.int32), 3)
    assert result.tolist() == [[0x3F81]]


def test_dropped_first_slot_starts_from_plus_zero():
    # Slot 0 of each token points past the rows; slot 1 holds -0.0.
    grad = np.array([[-0.0], [-0.0]], dtype=np.float32)
    result = moeperm.moe_token_permute_grad(grad, np.array([2, 0, 3, 1], dtype=np.int32), 2)
    assert models.bits(result).tolist() == [[0x00000000], [0x00000000]]
    kept = moeperm.moe_token_permute_grad(grad, np.array([0, 1, 2, 3], dtype=np.int32), 2)
    assert models.bits(kept).tolist() == [[0x80000000], [0x00000000]]


@pytest.mark.parametrize("dtype", DTYPES, ids=IDS.get)
def test_special_values_match_model_with_any_nan_equal(dtype):
    specials = np.array([0.0, -0.0, np.inf, -np.inf, np.nan, 1e-40, -1e-45, 3e38, 65504.0,
                         65519.0, 1.0, -1.0, 2.0 ** -24, 2.0 ** -14], dtype=np.float32)
    rng = np.random.default_rng(7)
    top_k, tokens = 3, 200
    values = rng.choice(specials, size=(tokens * top_k, 5))
    if dtype == np.uint16:
        grad = models.float32_to_bf16_bits(values)
    else:
        with np.errstate(over="ignore"):
            grad = values.astype(dtype)
    idx = models.random_permutation(rng, tokens * top_k)
    result = moeperm.moe_token_permute_grad(grad, idx, top_k)
    models.assert_same_bits(models.permute_grad(grad, idx, top_k), result, nan_aware=True)


def test_a_list_of_indices_gives_the_int32_arrays_result():
    rng = np.random.default_rng(3)
    grad = models.random_grad(rng, (40, 9), np.uint16)
    idx = models.random_permutation(rng, 40)
    expected = moeperm.moe_token_permute_grad(grad, idx, 4)
    models.assert_same_bits(expected, moeperm.moe_token_permute_grad(grad, idx.tolist(), 4))


@pytest.mark.parametrize("dtype", DTYPES, ids=IDS.get)
def test_out_is_written_and_returned(dtype):
    rng = np.random.default_rng(4)
    grad = models.random_grad(rng, (24, 7), dtype)
    idx = models.random_permutation(rng, 24)
    out = np.zeros((8, 7), dtype=dtype)
    result = moeperm.moe_token_permute_grad(grad, idx, 3, out=out)
    assert result is out
    models.assert_same_bits(models.permute_grad(grad, idx, 3), out)


def test_padded_mode_false_is_accepted_as_keyword_and_position():
    grad = np.ones((4, 2), dtype=np.float32)
    idx = np.arange(4, dtype=np.int32)
    a = moeperm.moe_token_permute_grad(grad, idx, 2, False)
    b = moeperm.moe_token_permute_grad(grad, idx, num_topk=2, padded_mode=False)
    assert a.tolist() == b.tolist() == [[2.0, 2.0], [2.0, 2.0]]


def test_results_are_fresh_arrays_each_call():
    grad = np.ones((2, 2), dtype=np.float32)
    idx = np.arange(2, dtype=np.int32)
    a = moeperm.moe_token_permute_grad(grad, idx, 1)
    b = moeperm.moe_token_permute_grad(grad, idx, 1)
    assert not np.shares_memory(a, b) and not np.shares_memory(a, grad)

"""moe_token_unpermute against the numpy model, bit for bit: float32
products and sums in slot order, zero probs skipping their rows, dropped
slots, one rounding."""
import numpy as np
import pytest

import moeperm
import models

DTYPES = [np.float32, np.float16, np.uint16]
IDS = {np.float32: "float32", np.float16: "float16", np.uint16: "bf16"}


def random_probs(rng, shape, dtype):
    """Routing-weight-like values: half of them powers of two in [1/8, 1]
    (so that large terms of equal magnitude and opposite sign cancel
    exactly, and the order of the sum shows), the rest random in (0, 1),
    one in ten an exact zero of either sign."""
    p = rng.uniform(0.01, 1.0, shape).astype(np.float32)
    power = rng.integers(0, 2, shape) == 1
    p = np.where(power, np.float32(2.0) ** -rng.integers(0, 4, shape).astype(np.float32), p)
    zero = rng.integers(0, 10, shape) == 0
    p = np.where(zero, np.where(rng.integers(0, 2, shape) == 1, np.float32(-0.0),
                                np.float32(0.0)), p)
    return models.narrow(p.astype(np.float32), dtype)


@pytest.mark.parametrize("dtype", DTYPES, ids=IDS.get)
@pytest.mark.parametrize("probs_dtype", DTYPES, ids=IDS.get)
@pytest.mark.parametrize("tokens,top_k,hidden,dropped", [
    (1, 1, 1, 0), (7, 2, 17, 0), (33, 4, 64, 0), (16, 8, 40, 30), (9, 3, 5, 27), (12, 5, 3, 7)])
def test_random_combine_equals_model_bit_for_bit(dtype, probs_dtype, tokens, top_k, hidden,
                                                 dropped):
    rng = np.random.default_rng(tokens * 1000 + top_k * 10 + hidden)
    rows = tokens * top_k - dropped
    x = models.random_grad(rng, (rows, hidden), dtype)
    idx = models.random_permutation(rng, tokens * top_k)
    probs = random_probs(rng, (tokens, top_k), probs_dtype)
    result = moeperm.moe_token_unpermute(x, idx, probs)
    assert type(result) is np.ndarray and result.dtype == dtype
    assert result.shape == (tokens, hidden)
    models.assert_same_bits(models.unpermute(x, idx, probs), result)


@pytest.mark.parametrize("dtype", DTYPES, ids=IDS.get)
def test_without_probs_top_k_is_one_and_rows_move_unchanged(dtype):
    rng = np.random.default_rng(2)
    x = models.random_grad(rng, (30, 9), dtype)
    idx = models.random_permutation(rng, 34)  # 4 dropped tokens read +0
    result = moeperm.moe_token_unpermute(x, idx)
    models.assert_same_bits(models.unpermute(x, idx), result)
    for n, s in enumerate(idx):
        expected = x[s] if s < 30 else np.zeros(9, dtype)
        assert models.bits(result[n]).tolist() == models.bits(expected).tolist()


def test_zero_probs_mask_inf_and_nan_rows():
    x = np.array([[np.inf], [np.nan], [1.0], [2.0]], dtype=np.float32)
    idx = np.array([0, 2, 1, 3], dtype=np.int32)
    probs = np.array([[0.0, 0.5], [-0.0, 0.25]], dtype=np.float32)
    result = moeperm.moe_token_unpermute(x, idx, probs)
    assert result.tolist() == [[0.5], [0.5]]
    nan_row = moeperm.moe_token_unpermute(x, idx, np.array([[0.0, 0.5], [1e-30, 0.25]],
                                                           dtype=np.float32))
    assert np.isnan(nan_row[1, 0])


def test_products_round_in_float32_before_the_sum():
    # (1 + 2^-12) * (1 + 2^-12) = 1 + 2^-11 + 2^-24: the float32 product
    # drops 2^-24 (a tie, to even), and the sum with -1 leaves 2^-11; a fused
    # multiply-add would keep 2^-24.
    a = np.float32(1 + 2.0 ** -12)
    x = np.array([[a], [1.0]], dtype=np.float32)
    probs = np.array([[a, -1.0]], dtype=np.float32)
    result = moeperm.moe_token_unpermute(x, np.array([0, 1], np.int32), probs)
    assert result.view(np.uint32).tolist() == [[np.float32(2.0 ** -11).view(np.uint32)]]


@pytest.mark.parametrize("dtype", DTYPES, ids=IDS.get)
def test_special_values_match_model_with_any_nan_equal(dtype):
    specials = np.array([0.0, -0.0, np.inf, -np.inf, np.nan, 1e-40, 3e38, 65504.0, 1.0, -2.0,
                         2.0 ** -24], dtype=np.float32)
    rng = np.random.default_rng(8)
    tokens, top_k = 50, 3
    x = models.narrow(rng.choice(specials, size=(tokens * top_k, 4)), dtype)
    probs = models.narrow(rng.choice(specials, size=(tokens, top_k)), dtype)
    idx = models.random_permutation(rng, tokens * top_k)
    result = moeperm.moe_token_unpermute(x, idx, probs)
    models.assert_same_bits(models.unpermute(x, idx, probs), result, nan_aware=True)


def test_restore_shape_is_accepted_and_ignored():
    rng = np.random.default_rng(9)
    x = models.random_grad(rng, (12, 6), np.uint16)
    idx = models.random_permutation(rng, 12)
    probs = random_probs(rng, (4, 3), np.uint16)
    plain = moeperm.moe_token_unpermute(x, idx, probs)
    shaped = moeperm.moe_token_unpermute(x, idx, probs, False, restore_shape=(4, 6))
    assert plain.tolist() == shaped.tolist()


STRIDED = {
    "every_other_column": lambda a: a[:, ::2],
    "transposed": lambda a: a.T,
    "offset_block": lambda a: a[4:, 6:],
}


@pytest.mark.parametrize("make_view", STRIDED.values(), ids=STRIDED.keys())
def test_strided_inputs_give_the_contiguous_result(make_view):
    rng = np.random.default_rng(10)
    x = make_view(models.random_grad(rng, (40, 40), np.float16))
    n = x.shape[0] + 2 - x.shape[0] % 2  # a dropped row or two
    idx_base = np.zeros(2 * n, dtype=np.int32)
    idx = idx_base[::2]
    idx[:] = models.random_permutation(rng, n)
    probs = random_probs(rng, (n // 2, 4), np.float32)[:, 1::2]
    result = moeperm.moe_token_unpermute(x, idx, probs)
    models.assert_same_bits(models.unpermute(np.ascontiguousarray(x), np.ascontiguousarray(idx),
                                             np.ascontiguousarray(probs)), result)


def test_refusals_carry_the_library_sentence():
    x = np.ones((4, 3), np.float32)
    undetermined = r"^the device's result is undetermined: "
    with pytest.raises(moeperm.Error, match=undetermined + r"sorted_indices has 4 entries, fewer "
                                            r"than tokens_num \* top_k = 2 \* 3"):
        moeperm.moe_token_unpermute(x, np.arange(4), np.ones((2, 3), np.float32))
    with pytest.raises(moeperm.Error, match=undetermined + r"sorted_indices\[3\] = -2 is "
                                            r"negative"):
        moeperm.moe_token_unpermute(x, np.array([0, 1, 2, -2]))
    # rows read twice, more rows than entries: accepted, as on the device
    assert (moeperm.moe_token_unpermute(np.ones((5, 3), np.float32),
                                        np.array([0, 1, 2, 2])) == 1.0).all()


def test_misuse_is_a_type_or_value_error_naming_the_argument():
    x = np.ones((4, 3), np.float32)
    with pytest.raises(ValueError, match=r"^probs has 3 dims; it must have 2 "
                                         r"\(\[tokens_num, top_k\]\)$"):
        moeperm.moe_token_unpermute(x, np.arange(4), np.ones((2, 2, 1), np.float32))
    with pytest.raises(TypeError, match=r"^probs dtype int32 is not supported here"):
        moeperm.moe_token_unpermute(x, np.arange(4), np.ones((2, 2), np.int32))
    with pytest.raises(TypeError, match=r"^restore_shape is a int; it must be a sequence of "
                                        r"integers or None$"):
        moeperm.moe_token_unpermute(x, np.arange(4), restore_shape=5)
    with pytest.raises(TypeError, match=r"^restore_shape\[1\] is a float; it must be an "
                                        r"integer$"):
        moeperm.moe_token_unpermute(x, np.arange(4), restore_shape=(4, 3.0))


def test_out_is_written_in_place_and_returned_and_untouched_on_refusal():
    rng = np.random.default_rng(12)
    x = models.random_grad(rng, (12, 5), np.uint16)
    idx = models.random_permutation(rng, 12)
    probs = random_probs(rng, (4, 3), np.float32)
    storage = np.full((5, 8), 3, np.uint16)
    out = storage.T[2:6]                       # [4, 5]: transposed, with an offset
    assert moeperm.moe_token_unpermute(x, idx, probs, out=out) is out
    models.assert_same_bits(models.unpermute(x, idx, probs), np.ascontiguousarray(out))
    assert (storage.T[:2] == 3).all() and (storage.T[6:] == 3).all()
    kept = out.copy()
    with pytest.raises(moeperm.Error, match=r"is negative"):
        moeperm.moe_token_unpermute(x, np.full(12, -1, np.int32), probs, out=out)
    assert (out == kept).all()
    with pytest.raises(ValueError, match=r"^out is read-only$"):
        moeperm.moe_token_unpermute(x, idx, probs, out=np.broadcast_to(kept, kept.shape))

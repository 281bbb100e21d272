"""moe_token_permute against the numpy model: sorted_indices the inverse of
the stable argsort, rows moved bit for bit, num_out_tokens resolved and
clamped."""
import numpy as np
import pytest

import moeperm
import models

TOKEN_DTYPES = [np.float32, np.float16, np.uint16, np.int8]
IDS = {np.float32: "float32", np.float16: "float16", np.uint16: "bf16", np.int8: "int8"}


def random_bits(rng, shape, dtype):
    """Uniformly random bit patterns: NaN payloads, signalling NaNs, -0 and
    subnormals among them, which a copy must keep."""
    dt = np.dtype(dtype)
    raw = rng.integers(0, 1 << (8 * dt.itemsize), size=shape, dtype=np.uint64)
    return raw.astype({1: np.uint8, 2: np.uint16, 4: np.uint32}[dt.itemsize]).view(dt)


@pytest.mark.parametrize("dtype", TOKEN_DTYPES, ids=IDS.get)
@pytest.mark.parametrize("index_dtype", [np.int32, np.int64], ids=["int32", "int64"])
@pytest.mark.parametrize("tokens,top_k,hidden,experts", [
    (1, 1, 1, 1), (7, 1, 17, 4), (33, 2, 64, 8), (64, 8, 130, 16), (5, 3, 3, 2), (40, 4, 16, 64)])
def test_random_routing_equals_model_bit_for_bit(dtype, index_dtype, tokens, top_k, hidden,
                                                 experts):
    rng = np.random.default_rng(tokens * 100 + top_k * 10 + hidden)
    x = random_bits(rng, (tokens, hidden), dtype)
    ids = rng.integers(0, experts, (tokens, top_k)).astype(index_dtype)  # ties on purpose
    permuted, sorted_indices = moeperm.moe_token_permute(x, ids)
    want_permuted, want_sorted = models.permute(x, ids)
    assert type(permuted) is np.ndarray and permuted.dtype == dtype
    assert sorted_indices.dtype == np.int32
    assert sorted_indices.tolist() == want_sorted.tolist()
    assert models.bits(permuted).tolist() == models.bits(want_permuted).tolist()


@pytest.mark.parametrize("num_out_tokens,rows", [
    (None, 24), (0, 24), (-5, 19), (-24, 0), (-100, 0), (7, 7), (24, 24), (1000, 24)])
def test_num_out_tokens_counts_back_from_every_copy_and_is_clamped(num_out_tokens, rows):
    rng = np.random.default_rng(3)
    x = random_bits(rng, (8, 5), np.uint16)
    ids = rng.integers(0, 6, (8, 3)).astype(np.int32)
    permuted, sorted_indices = moeperm.moe_token_permute(x, ids, num_out_tokens)
    want_permuted, want_sorted = models.permute(x, ids, num_out_tokens)
    assert permuted.shape == (rows, 5)
    assert sorted_indices.tolist() == want_sorted.tolist()
    assert permuted.tolist() == want_permuted.tolist()


def test_one_dimensional_indices_are_top_k_one():
    x = np.arange(12, dtype=np.float32).reshape(4, 3)
    permuted, sorted_indices = moeperm.moe_token_permute(x, np.array([2, 0, 2, 1], np.int32))
    assert sorted_indices.tolist() == [2, 0, 3, 1]
    assert permuted.tolist() == [x[1].tolist(), x[3].tolist(), x[0].tolist(), x[2].tolist()]


@pytest.mark.parametrize("index_dtype", [np.int32, np.int64], ids=["int32", "int64"])
def test_sentinel_ids_sort_first_and_last(index_dtype):
    info = np.iinfo(index_dtype)
    ids = np.array([[5, info.max], [info.min, 5], [0, info.max]], dtype=index_dtype)
    x = np.arange(6, dtype=np.float32).reshape(3, 2)
    permuted, sorted_indices = moeperm.moe_token_permute(x, ids)
    assert sorted_indices.tolist() == models.permute(x, ids)[1].tolist() == [2, 4, 0, 3, 1, 5]


def test_sorted_indices_equal_route_of_the_same_ids():
    rng = np.random.default_rng(5)
    ids = rng.integers(0, 32, (100, 6)).astype(np.int64)
    _, sorted_indices = moeperm.moe_token_permute(np.zeros((100, 1), np.float16), ids)
    assert sorted_indices.tolist() == moeperm.route(ids).tolist()


STRIDED = {
    "every_other_column": lambda a: a[:, ::2],
    "transposed": lambda a: a.T,
    "offset_block": lambda a: a[3:, 5:],
    "broadcast_row": lambda a: np.broadcast_to(a[:1], a.shape),
}


@pytest.mark.parametrize("make_view", STRIDED.values(), ids=STRIDED.keys())
def test_strided_tokens_and_indices_give_the_contiguous_result(make_view):
    rng = np.random.default_rng(6)
    x = make_view(random_bits(rng, (30, 30), np.uint16))
    ids_base = rng.integers(0, 9, (x.shape[0], 8)).astype(np.int32)
    ids = ids_base[:, ::3]  # a strided [tokens, 3]
    permuted, sorted_indices = moeperm.moe_token_permute(x, ids, -2)
    want_permuted, want_sorted = models.permute(np.ascontiguousarray(x),
                                                np.ascontiguousarray(ids), -2)
    assert sorted_indices.tolist() == want_sorted.tolist()
    assert permuted.tolist() == want_permuted.tolist()


def test_id_out_of_range_is_refused_with_the_library_sentence():
    ids = np.array([[1, 0], [2, 1], [0, 3], [3, -2]], np.int32)
    with pytest.raises(moeperm.Error, match=r"^the device's result is undetermined: "
                                            r"indices\[3\]\[1\] = -2 is outside \[0, 16777214\] "
                                            r"and is not the int32 minimum or maximum") as info:
        moeperm.moe_token_permute(np.ones((4, 3), np.float32), ids)
    assert info.value.status == 161002 and isinstance(info.value, ValueError)


def test_rows_of_indices_other_than_tokens_are_refused_as_the_device_tiling_does():
    with pytest.raises(moeperm.Error, match=r"^the device refuses indices with 5 rows beside "
                                            r"tokens with 4") as info:
        moeperm.moe_token_permute(np.ones((4, 3), np.float32), np.zeros((5, 2), np.int32))
    assert info.value.status == 561002 and isinstance(info.value, ValueError)


def test_padded_mode_true_is_refused_as_the_device_tiling_does():
    with pytest.raises(moeperm.Error, match=r"^the device refuses padded_mode = true") as info:
        moeperm.moe_token_permute(np.ones((4, 3), np.float32), np.zeros((4, 2), np.int32),
                                  padded_mode=True)
    assert info.value.status_name == "MOEPERM_ERR_INNER_TILING_ERROR"


def test_misuse_is_a_type_or_value_error_naming_the_argument():
    x = np.ones((4, 3), np.float32)
    ids = np.zeros((4, 2), np.int32)
    with pytest.raises(TypeError, match=r"^num_out_tokens is a float; it must be an integer$"):
        moeperm.moe_token_permute(x, ids, 2.0)
    with pytest.raises(TypeError, match=r"^tokens dtype float64 is not supported here; it must "
                                        r"be float32, float16, uint16 \(bf16 bit patterns\) or "
                                        r"int8$"):
        moeperm.moe_token_permute(x.astype(np.float64), ids)
    with pytest.raises(TypeError, match=r"^indices dtype float32 is not supported here"):
        moeperm.moe_token_permute(x, ids.astype(np.float32))
    with pytest.raises(ValueError, match=r"^indices has 3 dims; it must have 2 "
                                         r"\(\[tokens_num, top_k\]\) or 1"):
        moeperm.moe_token_permute(x, ids.reshape(4, 2, 1))
    with pytest.raises(ValueError, match=r"^tokens has 1 dims; it must have 2"):
        moeperm.moe_token_permute(x.reshape(-1), ids)
    with pytest.raises(TypeError, match=r"^padded_mode is a str; it must be a bool$"):
        moeperm.moe_token_permute(x, ids, padded_mode="no")


def test_out_pair_is_written_in_place_and_returned():
    rng = np.random.default_rng(11)
    x = random_bits(rng, (6, 4), np.uint16)
    ids = rng.integers(0, 3, (6, 2)).astype(np.int32)
    storage = np.full((12, 8), 7, np.uint16)
    permuted = storage[:, ::2]                 # strided [12, 4]
    sorted_indices = np.full(12, -1, np.int32)
    result = moeperm.moe_token_permute(x, ids, out=(permuted, sorted_indices))
    assert result[0] is permuted and result[1] is sorted_indices
    want = models.permute(x, ids)
    assert permuted.tolist() == want[0].tolist() and sorted_indices.tolist() == want[1].tolist()
    assert (storage[:, 1::2] == 7).all()


def test_refused_call_leaves_out_untouched():
    permuted = np.full((8, 3), 5.0, np.float32)
    sorted_indices = np.full(8, 9, np.int32)
    with pytest.raises(moeperm.Error, match=r"indices\[3\]\[1\] = -2 is outside"):
        moeperm.moe_token_permute(np.ones((4, 3), np.float32),
                                  np.array([[1, 0], [2, 1], [0, 3], [3, -2]], np.int32),
                                  out=(permuted, sorted_indices))
    assert (permuted == 5.0).all() and (sorted_indices == 9).all()
    with pytest.raises(TypeError, match=r"^out\[0\] dtype float16 differs from tokens dtype "
                                        r"float32$"):
        moeperm.moe_token_permute(np.ones((4, 3), np.float32), np.zeros((4, 2), np.int32),
                                  out=(permuted.astype(np.float16), sorted_indices))
    with pytest.raises(TypeError, match=r"^out is a ndarray; it must be a tuple "
                                        r"\(permuted_tokens, sorted_indices\)$"):
        moeperm.moe_token_permute(np.ones((4, 3), np.float32), np.zeros((4, 2), np.int32),
                                  out=permuted)

"""Strided numpy views reach the library where they lie: no copies of
inputs, writes into exactly the elements of an ``out`` view."""
import tracemalloc

import numpy as np
import pytest

import moeperm
import models
from moeperm import _arrays, _capi

VIEW_CASES = {
    "every_other_row_and_third_column": lambda a: a[::2, 1::3],
    "transposed": lambda a: a.T,
    "offset_block": lambda a: a[3:, 5:],
    "single_column": lambda a: a[:, 7:8],
}


def _base(rng, dtype):
    return models.random_grad(rng, (96, 96), dtype)


@pytest.mark.parametrize("dtype", [np.float32, np.float16, np.uint16],
                         ids=["float32", "float16", "bf16"])
@pytest.mark.parametrize("make_view", VIEW_CASES.values(), ids=VIEW_CASES.keys())
def test_strided_grad_gives_the_contiguous_result(dtype, make_view):
    rng = np.random.default_rng(11)
    grad = make_view(_base(rng, dtype))
    rows = grad.shape[0]
    top_k = 2
    n = rows + rows % 2  # one dropped row when the count is odd
    idx = models.random_permutation(rng, n)
    result = moeperm.moe_token_permute_grad(grad, idx, top_k)
    models.assert_same_bits(models.permute_grad(np.ascontiguousarray(grad), idx, top_k), result)


@pytest.mark.parametrize("make_view", VIEW_CASES.values(), ids=VIEW_CASES.keys())
def test_strided_view_is_described_in_place(make_view):
    base = np.zeros((96, 96), dtype=np.float32)
    view = make_view(base)
    v = _arrays.view(view, "permuted_output_grad", (_capi.FLOAT32,), 2)
    assert v.owner is view
    assert v.ptr == view.ctypes.data
    assert all(np.shares_memory(view, base) for _ in [0])
    for extent, stride, byte_stride in zip(v.shape, v.strides, view.strides):
        assert extent <= 1 or stride * 4 == byte_stride


def test_strided_inputs_are_not_copied():
    # A 16 MiB strided grad, read with out given: tracemalloc sees numpy's
    # allocations, so a copy of the grad (8 MiB) would show in the peak.
    rng = np.random.default_rng(12)
    base = rng.standard_normal((2048, 2048), dtype=np.float32)
    grad = base[:, ::2]
    idx_base = np.zeros(4096, dtype=np.int32)
    idx = idx_base[::2]
    idx[:] = models.random_permutation(rng, 2048)
    out = np.empty((1024, 1024), dtype=np.float32)
    tracemalloc.start()
    try:
        moeperm.moe_token_permute_grad(grad, idx, 2, out=out)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert peak < 64 * 1024, peak
    models.assert_same_bits(models.permute_grad(np.ascontiguousarray(grad), idx, 2), out)


def test_broadcast_grad_with_zero_strides_is_read():
    row = np.arange(5, dtype=np.float32)
    grad = np.broadcast_to(row, (6, 5))
    assert grad.strides[0] == 0
    result = moeperm.moe_token_permute_grad(grad, np.arange(6, dtype=np.int32), 3)
    assert result.tolist() == [list(3 * row), list(3 * row)]


def test_strided_out_writes_only_its_elements():
    rng = np.random.default_rng(13)
    grad = models.random_grad(rng, (12, 5), np.uint16)
    idx = models.random_permutation(rng, 12)
    buffer = np.full((8, 13), 0xABCD, dtype=np.uint16)
    out = buffer[1::2, 2::2][:, :5]
    assert out.shape == (4, 5)
    mask = np.zeros(buffer.shape, dtype=bool)
    mask[1::2, 2::2][:, :5] = True
    result = moeperm.moe_token_permute_grad(grad, idx, 3, out=out)
    assert result is out and np.shares_memory(result, buffer)
    models.assert_same_bits(models.permute_grad(grad, idx, 3), np.ascontiguousarray(out))
    assert (buffer[~mask] == 0xABCD).all()


def test_transposed_out_is_written_in_place():
    rng = np.random.default_rng(14)
    grad = models.random_grad(rng, (10, 6), np.float16)
    idx = models.random_permutation(rng, 10)
    storage = np.zeros((6, 5), dtype=np.float16)
    moeperm.moe_token_permute_grad(grad, idx, 2, out=storage.T)
    models.assert_same_bits(models.permute_grad(grad, idx, 2), np.ascontiguousarray(storage.T))


def test_reversed_grad_is_copied_and_gives_the_right_result():
    rng = np.random.default_rng(15)
    base = models.random_grad(rng, (8, 4), np.float32)
    grad = base[::-1, ::-1]
    idx = models.random_permutation(rng, 8)
    result = moeperm.moe_token_permute_grad(grad, idx, 2)
    models.assert_same_bits(models.permute_grad(np.ascontiguousarray(grad), idx, 2), result)


def test_reversed_indices_are_copied_and_give_the_right_result():
    rng = np.random.default_rng(16)
    grad = models.random_grad(rng, (8, 4), np.float32)
    idx = models.random_permutation(rng, 8)[::-1]
    result = moeperm.moe_token_permute_grad(grad, idx, 4)
    models.assert_same_bits(models.permute_grad(grad, np.ascontiguousarray(idx), 4), result)


def test_misaligned_and_byte_swapped_inputs_are_copied_and_read_right():
    rng = np.random.default_rng(17)
    grad = models.random_grad(rng, (6, 3), np.float32)
    raw = bytearray(grad.nbytes + 1)
    misaligned = np.frombuffer(raw, dtype=np.float32, count=grad.size, offset=1).reshape(6, 3)
    misaligned[...] = grad
    assert misaligned.ctypes.data % 4
    swapped = grad.astype(">f4")
    idx = models.random_permutation(rng, 6)
    expected = models.permute_grad(grad, idx, 3)
    models.assert_same_bits(expected, moeperm.moe_token_permute_grad(misaligned, idx, 3))
    models.assert_same_bits(expected, moeperm.moe_token_permute_grad(swapped, idx, 3))


def test_out_that_cannot_be_addressed_in_place_is_refused_untouched():
    grad = np.ones((4, 3), dtype=np.float32)
    idx = np.arange(4, dtype=np.int32)
    storage = np.full((2, 3), 7.0, dtype=np.float32)
    with pytest.raises(ValueError, match=r"^out has a layout libmoeperm cannot address"):
        moeperm.moe_token_permute_grad(grad, idx, 2, out=storage[::-1])
    raw = bytearray(storage.nbytes + 1)
    misaligned = np.frombuffer(raw, dtype=np.float32, count=6, offset=1).reshape(2, 3)
    with pytest.raises(ValueError, match=r"^out has a layout"):
        moeperm.moe_token_permute_grad(grad, idx, 2, out=misaligned)
    assert (storage == 7.0).all() and not any(raw)

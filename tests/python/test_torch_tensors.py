"""CPU torch tensors in, torch tensors out, without copies."""
import numpy as np
import pytest

import moeperm
import models
from moeperm import _arrays, _capi

torch = pytest.importorskip("torch")

TORCH_OF = {np.float32: torch.float32, np.float16: torch.float16, np.uint16: torch.bfloat16}


def to_torch(array):
    """A tensor with the bits of a numpy array (np.uint16 -> torch.bfloat16)."""
    if array.dtype == np.uint16:
        return torch.from_numpy(array.view(np.int16).copy()).view(torch.bfloat16)
    return torch.from_numpy(array.copy())


def to_numpy(tensor):
    if tensor.dtype == torch.bfloat16:
        return tensor.view(torch.int16).numpy().view(np.uint16)
    return tensor.numpy()


@pytest.mark.parametrize("dtype", [np.float32, np.float16, np.uint16],
                         ids=["float32", "float16", "bfloat16"])
@pytest.mark.parametrize("index_dtype", [torch.int32, torch.int64], ids=["int32", "int64"])
def test_tensor_results_equal_numpy_model_bit_for_bit(dtype, index_dtype):
    rng = np.random.default_rng(21)
    grad = models.random_grad(rng, (90, 33), dtype)
    idx = models.random_permutation(rng, 96)  # 6 dropped slots
    result = moeperm.moe_token_permute_grad(to_torch(grad), torch.from_numpy(idx).to(index_dtype),
                                            4)
    assert isinstance(result, torch.Tensor) and result.dtype == TORCH_OF[dtype]
    assert result.shape == (24, 33)
    models.assert_same_bits(models.permute_grad(grad, idx, 4), to_numpy(result))


STRIDED = {
    "every_other_column": lambda t: t[:, ::2],
    "transposed": lambda t: t.t(),
    "storage_offset": lambda t: t[5:, 3:],
    "expanded": lambda t: t[:1].expand(t.shape[0], -1),
}


@pytest.mark.parametrize("make_view", STRIDED.values(), ids=STRIDED.keys())
def test_strided_tensor_is_read_in_place(make_view):
    rng = np.random.default_rng(22)
    base = to_torch(models.random_grad(rng, (40, 40), np.uint16))
    grad = make_view(base)
    v = _arrays.view(grad, "permuted_output_grad", (_capi.BF16,), 2)
    assert v.ptr == grad.data_ptr() and v.owner is grad
    rows = grad.shape[0]
    idx = models.random_permutation(rng, rows + rows % 2)
    result = moeperm.moe_token_permute_grad(grad, torch.from_numpy(idx), 2)
    models.assert_same_bits(models.permute_grad(to_numpy(grad.contiguous()), idx, 2),
                            to_numpy(result))


def test_strided_out_tensor_is_written_in_place():
    rng = np.random.default_rng(23)
    grad = models.random_grad(rng, (12, 4), np.float16)
    idx = models.random_permutation(rng, 12)
    storage = torch.full((6, 6), 5.0, dtype=torch.float16)
    out = storage.t()[2:5, 1:5]  # out[i, j] is storage[1 + j, 2 + i]
    assert out.shape == (3, 4) and out.stride() == (1, 6) and out.storage_offset() == 8
    result = moeperm.moe_token_permute_grad(torch.from_numpy(grad), torch.from_numpy(idx), 4,
                                            out=out)
    assert result is out
    models.assert_same_bits(models.permute_grad(grad, idx, 4), out.contiguous().numpy())
    untouched = torch.ones_like(storage, dtype=torch.bool)
    untouched[1:5, 2:5] = False
    assert (storage[untouched] == 5.0).all()


def test_input_that_requires_grad_is_read():
    grad = torch.ones(4, 2, requires_grad=True)
    result = moeperm.moe_token_permute_grad(grad, torch.arange(4, dtype=torch.int32), 2)
    assert result.tolist() == [[2.0, 2.0], [2.0, 2.0]] and not result.requires_grad


def test_tensor_not_on_the_cpu_is_refused_naming_it():
    grad = torch.empty(4, 2, device="meta")
    with pytest.raises(TypeError, match=r"^permuted_output_grad is on device meta; moeperm "
                                        r"computes on the CPU"):
        moeperm.moe_token_permute_grad(grad, torch.arange(4, dtype=torch.int32), 2)


def test_sparse_tensor_is_refused_naming_it():
    idx = torch.arange(4, dtype=torch.int32).to_sparse()
    with pytest.raises(TypeError, match=r"^sorted_indices has layout torch.sparse_coo"):
        moeperm.moe_token_permute_grad(torch.ones(4, 2), idx, 2)


def test_unsupported_tensor_dtype_is_refused_naming_it():
    with pytest.raises(TypeError, match=r"^permuted_output_grad dtype torch.float64 is not "
                                        r"supported here; it must be torch.float32, "
                                        r"torch.float16 or torch.bfloat16$"):
        moeperm.moe_token_permute_grad(torch.ones(4, 2, dtype=torch.float64),
                                       torch.arange(4, dtype=torch.int32), 2)


def test_out_that_requires_grad_is_refused_untouched():
    out = torch.zeros(2, 2, requires_grad=True)
    with pytest.raises(ValueError, match=r"^out requires grad"):
        moeperm.moe_token_permute_grad(torch.ones(4, 2), torch.arange(4, dtype=torch.int32), 2,
                                       out=out)
    assert (out == 0).all()


def test_library_refusal_leaves_out_tensor_untouched():
    out = torch.full((2, 2), 9.0, dtype=torch.bfloat16)
    idx = torch.tensor([0, 1, 2, -2], dtype=torch.int32)
    with pytest.raises(moeperm.Error, match=r"sorted_indices\[3\] = -2 is negative"):
        moeperm.moe_token_permute_grad(torch.ones(4, 2, dtype=torch.bfloat16), idx, 2, out=out)
    assert (out == 9.0).all()


def test_route_of_tensor_is_an_int32_tensor_equal_to_model():
    rng = np.random.default_rng(24)
    ids = rng.integers(0, 16, (50, 4))
    result = moeperm.route(torch.from_numpy(ids))
    assert isinstance(result, torch.Tensor) and result.dtype == torch.int32
    assert (result.numpy() == models.route(ids)).all()


def test_conversions_of_tensors_are_tensors_with_the_model_bits():
    rng = np.random.default_rng(25)
    values = rng.standard_normal(1000, dtype=np.float32) * 1000
    t = torch.from_numpy(values)
    bf16 = moeperm.float32_to_bf16(t)
    assert bf16.dtype == torch.bfloat16
    assert (to_numpy(bf16) == models.float32_to_bf16_bits(values)).all()
    wide = moeperm.bf16_to_float32(bf16)
    assert wide.dtype == torch.float32
    assert (wide.numpy().view(np.uint32) == models.bf16_bits_to_float32(to_numpy(bf16))
            .view(np.uint32)).all()
    half = moeperm.float32_to_float16(t[::3])
    assert half.dtype == torch.float16 and (half.numpy() == values[::3].astype(np.float16)).all()
    assert moeperm.float16_to_float32(half).dtype == torch.float32


def test_every_operator_takes_strided_tensors_and_returns_tensors_of_the_input_kind():
    rng = np.random.default_rng(26)
    x = to_torch(models.random_grad(rng, (30, 60), np.uint16))[:, ::2]  # [30, 30] strided
    ids = torch.from_numpy(rng.integers(0, 6, (30, 4)))[:, 1:3]       # [30, 2] int64, strided
    permuted, sorted_indices = moeperm.moe_token_permute(x, ids, -4)
    want = models.permute(to_numpy(x.contiguous()), ids.numpy().copy(), -4)
    assert isinstance(permuted, torch.Tensor) and permuted.dtype == torch.bfloat16
    assert sorted_indices.dtype == torch.int32 and sorted_indices.tolist() == want[1].tolist()
    models.assert_same_bits(want[0], to_numpy(permuted))
    probs = torch.rand(30, 2, dtype=torch.float32)
    out = moeperm.moe_token_unpermute(permuted, sorted_indices.long(), probs.t().contiguous().t())
    assert isinstance(out, torch.Tensor) and out.dtype == torch.bfloat16
    models.assert_same_bits(models.unpermute(to_numpy(permuted), want[1], probs.numpy()),
                            to_numpy(out))
    grads = moeperm.moe_token_unpermute_grad(permuted, out, sorted_indices, probs,
                                             restore_shape=torch.Size([30, 30]))
    assert all(isinstance(g, torch.Tensor) for g in grads)
    assert grads[0].dtype == torch.bfloat16 and grads[1].dtype == torch.float32
    models.assert_same_bits(models.unpermute_grad_tokens(to_numpy(out), want[1], 56,
                                                         probs.numpy()), to_numpy(grads[0]))

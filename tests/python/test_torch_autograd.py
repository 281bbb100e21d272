"""moeperm.torch: torch_npu's npu_moe_token_permute and
npu_moe_token_unpermute as autograd functions.  The forward and the
gradients torch computes through them equal the operators' outputs bit for
bit, and the numpy models; loss.backward() runs through a small model."""
import numpy as np
import pytest

import moeperm
import models
from test_unpermute import random_probs

torch = pytest.importorskip("torch", reason="torch is not installed (Debian: python3-torch)")
from moeperm.torch import npu_moe_token_permute, npu_moe_token_unpermute  # noqa: E402

TORCH_OF = {np.float32: torch.float32, np.float16: torch.float16, np.uint16: torch.bfloat16}
DTYPES = [np.float32, np.float16, np.uint16]
IDS = {np.float32: "float32", np.float16: "float16", np.uint16: "bf16"}


def to_torch(array, requires_grad=False):
    if array.dtype == np.uint16:
        t = torch.from_numpy(array.view(np.int16).copy()).view(torch.bfloat16)
    else:
        t = torch.from_numpy(array.copy())
    return t.requires_grad_(requires_grad)


def to_numpy(tensor):
    tensor = tensor.detach()
    if tensor.dtype == torch.bfloat16:
        return tensor.view(torch.int16).numpy().view(np.uint16)
    return tensor.numpy()


def same_bits(expected, actual):
    models.assert_same_bits(np.ascontiguousarray(to_numpy(expected) if isinstance(
        expected, torch.Tensor) else expected), np.ascontiguousarray(to_numpy(actual)))


@pytest.mark.parametrize("dtype", DTYPES, ids=IDS.get)
@pytest.mark.parametrize("num_out_tokens", [None, -5, 30])
def test_permute_forward_and_tokens_grad_equal_the_operators_and_the_model(dtype,
                                                                           num_out_tokens):
    rng = np.random.default_rng(1)
    x = models.random_grad(rng, (12, 9), dtype)
    ids = rng.integers(0, 8, (12, 3)).astype(np.int64)
    tokens = to_torch(x, requires_grad=True)
    permuted, sorted_indices = npu_moe_token_permute(tokens, torch.from_numpy(ids),
                                                     num_out_tokens)
    want_permuted, want_sorted = models.permute(x, ids, num_out_tokens)
    assert sorted_indices.dtype == torch.int32 and not sorted_indices.requires_grad
    assert sorted_indices.tolist() == want_sorted.tolist()
    same_bits(want_permuted, permuted)
    upstream = models.random_grad(rng, tuple(permuted.shape), dtype)
    permuted.backward(to_torch(upstream))
    assert tokens.grad.dtype == TORCH_OF[dtype]
    # The gradient torch computed is MoeTokenPermuteGrad's, bit for bit ...
    same_bits(moeperm.moe_token_permute_grad(upstream, want_sorted, 3), tokens.grad)
    # ... and the model's: dropped copies contribute nothing.
    same_bits(models.permute_grad(upstream, want_sorted, 3), tokens.grad)


@pytest.mark.parametrize("dtype", DTYPES, ids=IDS.get)
@pytest.mark.parametrize("probs_dtype", DTYPES, ids=IDS.get)
def test_unpermute_forward_and_both_grads_equal_the_operators_and_the_model(dtype, probs_dtype):
    rng = np.random.default_rng(2)
    tokens_num, top_k, hidden = 10, 4, 33
    rows = tokens_num * top_k - 6
    x = models.random_grad(rng, (rows, hidden), dtype)
    idx = models.random_permutation(rng, tokens_num * top_k)
    p = random_probs(rng, (tokens_num, top_k), probs_dtype)
    permuted = to_torch(x, requires_grad=True)
    probs = to_torch(p, requires_grad=True)
    out = npu_moe_token_unpermute(permuted, torch.from_numpy(idx), probs)
    same_bits(models.unpermute(x, idx, p), out)
    g = models.random_grad(rng, (tokens_num, hidden), dtype)
    out.backward(to_torch(g))
    want_tokens_grad, want_probs_grad = moeperm.moe_token_unpermute_grad(x, g, idx, p)
    same_bits(want_tokens_grad, permuted.grad)
    same_bits(want_probs_grad, probs.grad)
    same_bits(models.unpermute_grad_tokens(g, idx, rows, p), permuted.grad)
    assert probs.grad.dtype == TORCH_OF[probs_dtype]


def test_unpermute_without_probs_has_the_gradient_rows_as_they_are():
    rng = np.random.default_rng(3)
    x = models.random_grad(rng, (20, 5), np.uint16)
    idx = models.random_permutation(rng, 24)
    permuted = to_torch(x, requires_grad=True)
    out = npu_moe_token_unpermute(permuted, torch.from_numpy(idx))
    g = models.random_grad(rng, (24, 5), np.uint16)
    out.backward(to_torch(g))
    same_bits(models.unpermute_grad_tokens(g, idx, 20), permuted.grad)


def test_probs_grad_follows_the_chip_keyword():
    rng = np.random.default_rng(4)
    x = (rng.standard_normal((32, 1000)) * 2.0 ** rng.integers(-12, 12, (32, 1000))).astype(
        np.float32)
    idx = models.random_permutation(rng, 32)
    g = (rng.standard_normal((8, 1000)) * 2.0 ** rng.integers(-12, 12, (8, 1000))).astype(
        np.float32)
    chip = moeperm.Chip(32768, 1)
    grads = {}
    for key, kwargs in (("a2", {}), ("small", {"chip": chip})):
        probs = torch.ones(8, 4, requires_grad=True)
        out = npu_moe_token_unpermute(torch.from_numpy(x), torch.from_numpy(idx), probs, **kwargs)
        out.backward(torch.from_numpy(g))
        grads[key] = probs.grad
    same_bits(moeperm.moe_token_unpermute_grad(x, g, idx, np.ones((8, 4), np.float32))[1],
              grads["a2"])
    same_bits(moeperm.moe_token_unpermute_grad(x, g, idx, np.ones((8, 4), np.float32),
                                               chip=chip)[1], grads["small"])
    assert not torch.equal(grads["a2"], grads["small"])


def test_only_the_inputs_that_require_grad_get_one():
    rng = np.random.default_rng(5)
    x = to_torch(models.random_grad(rng, (8, 4), np.float32))
    probs = torch.full((4, 2), 0.5, requires_grad=True)
    out = npu_moe_token_unpermute(x, torch.arange(8, dtype=torch.int32), probs)
    out.sum().backward()
    assert x.grad is None and probs.grad is not None
    # sum()'s gradient reaches the backward as an expanded tensor of ones.
    same_bits(moeperm.moe_token_unpermute_grad(x, torch.ones(4, 4),
                                               torch.arange(8, dtype=torch.int32),
                                               probs.detach())[1], probs.grad)


@pytest.mark.parametrize("dtype", [np.float32, np.uint16], ids=["float32", "bf16"])
def test_loss_backward_through_a_small_moe_layer_gives_the_chained_operator_gradients(dtype):
    # tokens -> permute -> each expert scales its rows -> unpermute with
    # probs -> loss.  Scaling by powers of two is exact, so the gradients
    # chain through the numpy models bit for bit.
    rng = np.random.default_rng(6)
    tokens_num, top_k, hidden, experts = 16, 2, 24, 4
    x = models.random_grad(rng, (tokens_num, hidden), dtype)
    ids = np.stack([rng.permutation(experts)[:top_k] for _ in range(tokens_num)]).astype(
        np.int32)
    p = random_probs(rng, (tokens_num, top_k), dtype)
    target = models.random_grad(rng, (tokens_num, hidden), dtype)

    tokens = to_torch(x, requires_grad=True)
    probs = to_torch(p, requires_grad=True)
    scale = torch.tensor([1.0, 2.0, 0.5, 4.0], dtype=TORCH_OF[dtype])
    permuted, sorted_indices = npu_moe_token_permute(tokens, torch.from_numpy(ids))
    expert_of_row = torch.from_numpy(np.sort(ids.reshape(-1), kind="stable").astype(np.int64))
    hidden_states = permuted * scale[expert_of_row][:, None]
    out = npu_moe_token_unpermute(hidden_states, sorted_indices, probs)
    loss = (out * to_torch(target)).sum()
    loss.backward()

    sorted_np = models.route(ids)
    row_scale = np.array([1.0, 2.0, 0.5, 4.0])[np.sort(ids.reshape(-1), kind="stable")]
    permuted_np = models.permute(x, ids)[0]
    scaled = models.narrow((models.widen(permuted_np) * row_scale[:, None]).astype(np.float32),
                           np.dtype(dtype).type)
    same_bits(models.unpermute(scaled, sorted_np, p), out)
    hidden_grad = models.unpermute_grad_tokens(target, sorted_np, tokens_num * top_k, p)
    permuted_grad = models.narrow((models.widen(hidden_grad) * row_scale[:, None]).astype(
        np.float32), np.dtype(dtype).type)
    same_bits(models.permute_grad(permuted_grad, sorted_np, top_k), tokens.grad)
    same_bits(moeperm.moe_token_unpermute_grad(scaled, target, sorted_np, p)[1], probs.grad)


def test_int8_tokens_permute_forward_without_grad():
    x = torch.arange(-6, 6, dtype=torch.int8).reshape(4, 3)
    permuted, sorted_indices = npu_moe_token_permute(x, torch.tensor([[1, 0], [0, 1], [1, 1],
                                                                      [0, 0]]))
    want = models.permute(x.numpy(), np.array([[1, 0], [0, 1], [1, 1], [0, 0]]))
    assert permuted.dtype == torch.int8 and permuted.tolist() == want[0].tolist()


def test_restore_shape_may_be_a_torch_size():
    x = torch.ones(6, 3)
    out = npu_moe_token_unpermute(x, torch.arange(6, dtype=torch.int32), torch.full((3, 2), 0.5),
                                  restore_shape=torch.Size([3, 3]))
    assert out.tolist() == [[1.0] * 3] * 3


def test_numpy_arguments_are_refused_naming_them():
    with pytest.raises(TypeError, match=r"^tokens is a ndarray; moeperm.torch takes "
                                        r"torch.Tensor"):
        npu_moe_token_permute(np.ones((2, 2), np.float32), torch.zeros(2, dtype=torch.int32))
    with pytest.raises(TypeError, match=r"^probs is a ndarray"):
        npu_moe_token_unpermute(torch.ones(2, 2), torch.arange(2), np.ones((2, 1)))


def test_library_refusal_in_the_forward_is_a_moeperm_error():
    with pytest.raises(moeperm.Error, match=r"^the device's result is undetermined: "
                                            r"sorted_indices\[1\] = -1 is negative"):
        npu_moe_token_unpermute(torch.ones(2, 2, requires_grad=True),
                                torch.tensor([0, -1], dtype=torch.int32))


@pytest.mark.parametrize("with_probs", [True, False])
def test_backward_of_no_permuted_rows_gives_an_empty_and_a_zero_gradient(with_probs):
    # Every slot dropped: the forward is zeros, and the backward returns as
    # torch_npu's does, since the device's operator refuses a permuted_tokens
    # of no rows.
    permuted = torch.randn(0, 8, requires_grad=True)
    probs = torch.rand(3, 2, dtype=torch.float16, requires_grad=True) if with_probs else None
    sorted_indices = torch.arange(6 if with_probs else 3, dtype=torch.int32)
    out = npu_moe_token_unpermute(permuted, sorted_indices, probs)
    assert out.shape == (3, 8) and not out.any()
    out.backward(torch.randn(3, 8))
    assert permuted.grad.shape == (0, 8) and permuted.grad.dtype == torch.float32
    if with_probs:
        same_bits(np.zeros((3, 2), np.float16), probs.grad)


def test_autograd_function_takes_a_chip_name_a_chip_and_a_torch_size():
    rng = np.random.default_rng(7)
    x = torch.from_numpy(models.random_grad(rng, (16, 300), np.float32))
    idx = torch.from_numpy(models.random_permutation(rng, 16))
    g = torch.from_numpy(models.random_grad(rng, (8, 300), np.float32))
    chip = moeperm.Chip.by_name("Ascend910B3")
    grads = []
    for how in ("Ascend910B3", chip, tuple(chip)):
        probs = torch.ones(8, 2, requires_grad=True)
        out = moeperm.torch.MoeTokenUnpermute.apply(x, idx, probs, False, torch.Size([8, 300]),
                                                    how)
        out.backward(g)
        grads.append(probs.grad)
    want = moeperm.moe_token_unpermute_grad(x, g, idx, torch.ones(8, 2), chip=chip)[1]
    for grad in grads:
        same_bits(want, grad)


def test_restore_shape_that_is_no_sequence_is_refused_naming_it():
    import moeperm.torch_npu
    x, idx = torch.ones(4, 3), torch.arange(4, dtype=torch.int32)
    for call in (lambda: npu_moe_token_unpermute(x, idx, restore_shape=5),
                 lambda: moeperm.torch_npu.npu_moe_token_unpermute(x, idx, restore_shape=5),
                 lambda: moeperm.torch_npu.npu_moe_token_unpermute_grad(x, x, idx,
                                                                        restore_shape=5),
                 lambda: moeperm.torch.MoeTokenUnpermute.apply(x, idx, None, False, 5, None)):
        with pytest.raises(TypeError, match=r"^restore_shape is a int; it must be a sequence "
                                            r"of integers or None$"):
            call()
    with pytest.raises(TypeError, match=r"^restore_shape\[1\] is a str; it must be an integer"):
        npu_moe_token_unpermute(x, idx, restore_shape=[4, "3"])

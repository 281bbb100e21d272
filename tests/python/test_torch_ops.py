"""torch.ops.moeperm: torch_npu's four operators and their grad forms as
torch operators.  Schemas as torch_npu's yaml writes them; CPU kernels with
the operators' bits (the numpy-level functions and the numpy models agree);
out= overloads that write in place without allocating; Meta kernels that
give shapes and dtypes alone; torch_npu's num_out_tokens arithmetic; autograd
as torch_npu's derivatives.yaml; TorchScript."""
import os
import subprocess
import sys

import numpy as np
import pytest

import moeperm
import models

torch = pytest.importorskip("torch", reason="torch is not installed (Debian: python3-torch)")
import moeperm.torch  # noqa: E402,F401  (registers the operators)
from moeperm import _torch_ops  # noqa: E402
from torch.profiler import ProfilerActivity, profile  # noqa: E402

ops = torch.ops.moeperm

# torch_npu's op_plugin_functions.yaml (domain notes, Task C), with the
# keyword chip added where the gradient of probs is summed.
TORCH_NPU_SCHEMAS = {
    "npu_moe_token_permute": "npu_moe_token_permute(Tensor tokens, Tensor indices, "
    "int? num_out_tokens=None, bool padded_mode=False) -> (Tensor, Tensor)",
    "npu_moe_token_unpermute": "npu_moe_token_unpermute(Tensor permuted_tokens, "
    "Tensor sorted_indices, Tensor? probs=None, bool padded_mode=False, "
    "int[]? restore_shape=None, *, int[]? chip=None) -> Tensor",
    "npu_moe_token_permute_grad": "npu_moe_token_permute_grad(Tensor tokens, "
    "Tensor grad_permuted_tokens, Tensor indices, Tensor sorted_indices, "
    "bool padded_mode=False) -> Tensor",
    "npu_moe_token_permute_grad_v2": "npu_moe_token_permute_grad_v2(Tensor grad_permuted_tokens, "
    "Tensor sorted_indices, int tokens_size_0, ScalarType tokens_dtype, int num_topK, "
    "bool padded_mode=False) -> Tensor",
    "npu_moe_token_unpermute_grad": "npu_moe_token_unpermute_grad(Tensor permuted_tokens, "
    "Tensor grad_unpermuted_tokens, Tensor sorted_indices, Tensor? probs=None, "
    "bool padded_mode=False, int[]? restore_shape=None, *, int[]? chip=None) "
    "-> (Tensor, Tensor)",
    "npu_moe_token_unpermute_grad_v2": "npu_moe_token_unpermute_grad_v2("
    "Tensor grad_unpermuted_tokens, Tensor sorted_indices, int permuted_tokens_size_0, "
    "ScalarType permuted_tokens_dtype, Tensor? probs=None, bool padded_mode=False, "
    "int[]? restore_shape=None, Tensor? permuted_tokens=None, *, int[]? chip=None) "
    "-> (Tensor, Tensor)",
}


def bits(t):
    t = t.detach().contiguous()
    if t.dtype == torch.bfloat16:
        return t.view(torch.int16).numpy().view(np.uint16)
    return t.numpy()


def same_bits(expected, actual):
    models.assert_same_bits(np.ascontiguousarray(bits(expected)),
                            np.ascontiguousarray(bits(actual)))


def bf16(rng, shape):
    return torch.from_numpy(models.random_grad(rng, shape, np.uint16).view(np.int16)).view(
        torch.bfloat16)


def allocated(fn):
    """Bytes the torch allocator handed out while fn() ran."""
    with profile(activities=[ProfilerActivity.CPU], profile_memory=True) as p:
        fn()
    return sum(e.cpu_memory_usage for e in p.events() if e.cpu_memory_usage > 0)


@pytest.mark.parametrize("name", sorted(TORCH_NPU_SCHEMAS))
def test_schema_is_torch_npus(name):
    assert str(getattr(ops, name).default._schema) == "moeperm::" + TORCH_NPU_SCHEMAS[name]
    assert sorted(getattr(ops, name).overloads()) == ["default", "out"]


def test_every_operator_has_cpu_meta_and_autograd_kernels():
    has = torch._C._dispatch_has_kernel_for_dispatch_key
    for name in TORCH_NPU_SCHEMAS:
        for overload in ("", ".out"):
            # Autograd: the alias key of AutogradCPU, AutogradMeta and the rest.
            for key in ("CPU", "Meta", "Autograd"):
                assert has("moeperm::" + name + overload, key), (name + overload, key)


def routing(rng, tokens, top_k, experts=8):
    return torch.from_numpy(rng.integers(0, experts, (tokens, top_k)))


@pytest.mark.parametrize("num_out_tokens", [None, 0, -5, 7, 10_000])
def test_permute_and_its_grads_equal_the_functions_and_the_models(num_out_tokens):
    rng = np.random.default_rng(40)
    x = bf16(rng, (12, 9))
    ids = routing(rng, 12, 3)
    permuted, sorted_indices = ops.npu_moe_token_permute(x, ids, num_out_tokens)
    rows = {None: 36, 0: 36, -5: 31, 7: 7, 10_000: 36}[num_out_tokens]
    assert permuted.shape == (rows, 9) and sorted_indices.dtype == torch.int32
    want_permuted, want_sorted = models.permute(bits(x), ids.numpy(), rows)
    same_bits(torch.from_numpy(want_sorted), sorted_indices)
    models.assert_same_bits(want_permuted, bits(permuted))
    g = bf16(rng, (rows, 9))
    want_grad = models.permute_grad(bits(g), want_sorted, 3)
    v2 = ops.npu_moe_token_permute_grad_v2(g, sorted_indices, 12, torch.bfloat16, 3)
    v1 = ops.npu_moe_token_permute_grad(x, g, ids, sorted_indices)
    for grad in (v1, v2):
        assert grad.dtype == torch.bfloat16 and grad.shape == (12, 9)
        models.assert_same_bits(want_grad, bits(grad))
    same_bits(moeperm.moe_token_permute_grad(g, sorted_indices, 3), v2)


@pytest.mark.parametrize("with_probs", [True, False], ids=["probs", "no_probs"])
def test_unpermute_and_its_grads_equal_the_functions_and_the_models(with_probs):
    rng = np.random.default_rng(41)
    top_k = 4 if with_probs else 1
    rows = 10 * top_k - 3
    x = bf16(rng, (rows, 20))
    idx = torch.from_numpy(models.random_permutation(rng, 10 * top_k))
    probs = torch.rand(10, top_k) if with_probs else None
    p = None if probs is None else probs.numpy()
    out = ops.npu_moe_token_unpermute(x, idx, probs)
    models.assert_same_bits(models.unpermute(bits(x), idx.numpy(), p), bits(out))
    g = bf16(rng, (10, 20))
    want = moeperm.moe_token_unpermute_grad(x, g, idx, probs)
    v1 = ops.npu_moe_token_unpermute_grad(x, g, idx, probs)
    v2 = ops.npu_moe_token_unpermute_grad_v2(g, idx, rows, torch.bfloat16, probs,
                                             permuted_tokens=x if with_probs else None)
    for tokens_grad, probs_grad in (v1, v2):
        same_bits(want[0], tokens_grad)
        models.assert_same_bits(models.unpermute_grad_tokens(bits(g), idx.numpy(), rows, p),
                                bits(tokens_grad))
        if with_probs:
            same_bits(want[1], probs_grad)
        else:
            # torch_npu: a 0-dim gradient of probs, of the gradient's dtype.
            assert probs_grad.shape == () and probs_grad.dtype == torch.bfloat16


def test_unpermute_grad_v2_with_probs_needs_the_permuted_tokens():
    with pytest.raises(ValueError, match=r"^permuted_tokens is None but probs is given"):
        ops.npu_moe_token_unpermute_grad_v2(torch.ones(2, 3), torch.arange(4, dtype=torch.int32),
                                            4, torch.float32, torch.ones(2, 2))


def test_num_out_tokens_follows_torch_npus_host_arithmetic():
    x = torch.ones(5, 3)
    ids = torch.zeros(5, 2, dtype=torch.int32)
    # -N*K < v < 0 keeps v + N*K rows; v > N*K keeps N*K.
    assert ops.npu_moe_token_permute(x, ids, -9)[0].shape == (1, 3)
    assert ops.npu_moe_token_permute(x, ids, 11)[0].shape == (10, 3)
    # Below -N*K torch_npu allocates a negative size: torch's RuntimeError,
    # before any work, the same from the Meta kernel and for out=.
    for tokens, indices in ((x, ids), (x.to("meta"), ids.to("meta"))):
        with pytest.raises(RuntimeError, match=r"^Trying to create tensor with negative "
                                               r"dimension -1: \[-1, 3\]$"):
            ops.npu_moe_token_permute(tokens, indices, -11)
    out = torch.full((2, 3), 7.0)
    sorted_out = torch.full((10,), 7, dtype=torch.int32)
    with pytest.raises(RuntimeError, match=r"negative dimension -1"):
        ops.npu_moe_token_permute(x, ids, -11, permute_tokens_out=out,
                                  sorted_indices_out=sorted_out)
    assert (out == 7).all() and (sorted_out == 7).all()
    # -N*K: torch_npu hands aclnn 0, "keep every copy", for a result of no
    # rows, and the operator refuses that shape.
    with pytest.raises(moeperm.Error, match=r"permute_tokens_out"):
        ops.npu_moe_token_permute(x, ids, -10)


def test_int64_sorted_indices_are_refused_as_the_aclnn_api_refuses_them():
    g = torch.ones(4, 3)
    with pytest.raises(moeperm.Error, match=r"sorted_indices dtype 9 \(int64\)"):
        ops.npu_moe_token_permute_grad_v2(g, torch.arange(4), 2, torch.float32, 2)
    with pytest.raises(RuntimeError, match=r"sorted_indices dtype 9 \(int64\)"):
        ops.npu_moe_token_unpermute(g, torch.arange(4))


def test_out_overloads_write_in_place_return_their_tensors_and_allocate_nothing():
    rng = np.random.default_rng(42)
    wide = bf16(rng, (32, 18))
    g = wide[:, ::2]  # a strided view, read where it lies
    idx = torch.from_numpy(models.random_permutation(rng, 32))
    out = torch.empty(8, 9, dtype=torch.bfloat16)
    result = ops.npu_moe_token_permute_grad_v2(g, idx, 8, torch.bfloat16, 4, out=out)
    assert result is out
    models.assert_same_bits(models.permute_grad(bits(g), idx.numpy(), 4), bits(out))
    assert allocated(lambda: ops.npu_moe_token_permute_grad_v2(g, idx, 8, torch.bfloat16, 4,
                                                               out=out)) == 0
    # The control: a copy of g is seen.
    assert allocated(lambda: g.contiguous()) > 0

    x = bf16(rng, (8, 9))
    ids = routing(rng, 8, 4)
    p_out, s_out = torch.empty(32, 9, dtype=torch.bfloat16), torch.empty(32, dtype=torch.int32)
    r = ops.npu_moe_token_permute(x, ids, permute_tokens_out=p_out, sorted_indices_out=s_out)
    assert r[0] is p_out and r[1] is s_out
    want = ops.npu_moe_token_permute(x, ids)
    same_bits(want[0], p_out)
    same_bits(want[1], s_out)

    probs = torch.rand(8, 4)
    u_out = torch.empty(8, 9, dtype=torch.bfloat16)
    assert ops.npu_moe_token_unpermute(p_out, s_out, probs, out=u_out) is u_out
    same_bits(ops.npu_moe_token_unpermute(p_out, s_out, probs), u_out)

    ug = (torch.empty(32, 9, dtype=torch.bfloat16), torch.empty(8, 4))
    r = ops.npu_moe_token_unpermute_grad_v2(u_out, s_out, 32, torch.bfloat16, probs,
                                            permuted_tokens=p_out, permuted_tokens_grad_out=ug[0],
                                            probs_grad_out=ug[1])
    assert r[0] is ug[0] and r[1] is ug[1]
    want = ops.npu_moe_token_unpermute_grad(p_out, u_out, s_out, probs)
    same_bits(want[0], ug[0])
    same_bits(want[1], ug[1])


def test_out_of_another_shape_is_refused_and_an_empty_one_resized():
    g = torch.ones(8, 3)
    idx = torch.arange(8, dtype=torch.int32)
    with pytest.raises(ValueError, match=r"^out has shape \[3, 3\]; the result has shape "
                                         r"\[4, 3\]$"):
        ops.npu_moe_token_permute_grad_v2(g, idx, 4, torch.float32, 2, out=torch.empty(3, 3))
    with pytest.raises(TypeError, match=r"^out dtype torch.float16 differs from the result's "
                                        r"dtype torch.float32$"):
        ops.npu_moe_token_permute_grad_v2(g, idx, 4, torch.float32, 2,
                                          out=torch.empty(4, 3, dtype=torch.float16))
    empty = torch.empty(0)
    ops.npu_moe_token_permute_grad_v2(g, idx, 4, torch.float32, 2, out=empty)
    assert empty.shape == (4, 3) and (empty == 2).all()


def test_out_overloads_refuse_inputs_that_require_grad():
    g = torch.ones(8, 3, requires_grad=True)
    with pytest.raises(RuntimeError, match=r"out= arguments don't support automatic "
                                           r"differentiation"):
        ops.npu_moe_token_permute_grad_v2(g, torch.arange(8, dtype=torch.int32), 4,
                                          torch.float32, 2, out=torch.empty(4, 3))


META_CASES = {
    "permute": (lambda m: ops.npu_moe_token_permute(m(6, 5), m(6, 3, dtype=torch.int64), -4),
                [((14, 5), torch.float32), ((18,), torch.int32)]),
    "unpermute": (lambda m: ops.npu_moe_token_unpermute(m(17, 5, dtype=torch.bfloat16),
                                                        m(18, dtype=torch.int32),
                                                        m(6, 3, dtype=torch.float16)),
                  [((6, 5), torch.bfloat16)]),
    "permute_grad": (lambda m: ops.npu_moe_token_permute_grad(
        m(6, 5, dtype=torch.float16), m(14, 5, dtype=torch.float16), m(6, 3),
        m(18, dtype=torch.int32)), [((6, 5), torch.float16)]),
    "permute_grad_v2": (lambda m: ops.npu_moe_token_permute_grad_v2(
        m(14, 5, dtype=torch.bfloat16), m(18, dtype=torch.int32), 6, torch.bfloat16, 3),
        [((6, 5), torch.bfloat16)]),
    "unpermute_grad": (lambda m: ops.npu_moe_token_unpermute_grad(
        m(17, 5), m(6, 5), m(18, dtype=torch.int32), m(6, 3, dtype=torch.bfloat16)),
        [((17, 5), torch.float32), ((6, 3), torch.bfloat16)]),
    "unpermute_grad_no_probs": (lambda m: ops.npu_moe_token_unpermute_grad(
        m(5, 4, dtype=torch.float16), m(6, 4, dtype=torch.float16), m(6, dtype=torch.int32)),
        [((5, 4), torch.float16), ((), torch.float16)]),
    "unpermute_grad_v2": (lambda m: ops.npu_moe_token_unpermute_grad_v2(
        m(6, 5, dtype=torch.bfloat16), m(18, dtype=torch.int32), 17, torch.bfloat16,
        m(6, 3), permuted_tokens=m(17, 5, dtype=torch.bfloat16)),
        [((17, 5), torch.bfloat16), ((6, 3), torch.float32)]),
}


@pytest.mark.parametrize("name", sorted(META_CASES))
def test_meta_kernels_give_shapes_and_dtypes_without_data(name):
    def meta(*shape, dtype=torch.float32):
        return torch.empty(shape, dtype=dtype, device="meta")
    call, expected = META_CASES[name]
    results = call(meta)
    results = results if isinstance(results, tuple) else (results,)
    assert [(tuple(r.shape), r.dtype) for r in results] == expected
    assert all(r.device.type == "meta" for r in results)


def test_autograd_runs_on_meta_tensors_too():
    tokens = torch.empty(6, 5, device="meta", requires_grad=True)
    probs = torch.empty(6, 3, device="meta", requires_grad=True)
    permuted, sorted_indices = ops.npu_moe_token_permute(tokens, torch.empty(
        6, 3, dtype=torch.int32, device="meta"))
    out = ops.npu_moe_token_unpermute(permuted, sorted_indices, probs)
    out.sum().backward()
    assert tokens.grad.shape == (6, 5) and tokens.grad.device.type == "meta"
    assert probs.grad.shape == (6, 3)


def test_backward_is_torch_npus_derivative_and_not_itself_differentiable():
    rng = np.random.default_rng(43)
    x = bf16(rng, (6, 8)).requires_grad_()
    ids = routing(rng, 6, 2)
    permuted, sorted_indices = ops.npu_moe_token_permute(x, ids, -3)
    g = bf16(rng, tuple(permuted.shape)).requires_grad_()
    (grad,) = torch.autograd.grad(permuted, x, g, create_graph=True)
    # permute_grad_v2 of the full sorted_indices with num_topK = K.
    same_bits(ops.npu_moe_token_permute_grad_v2(g, sorted_indices, 6, torch.bfloat16, 2), grad)
    with pytest.raises(RuntimeError, match=r"^moeperm::npu_moe_token_permute_grad_v2 has no "
                                           r"derivative"):
        grad.float().sum().backward()


def scripted_moe(tokens, indices, probs):
    permuted, sorted_indices = torch.ops.moeperm.npu_moe_token_permute(tokens, indices)
    return torch.ops.moeperm.npu_moe_token_unpermute(permuted * 2, sorted_indices, probs,
                                                     chip=[196352, 48])


def test_torchscript_scripts_a_function_calling_the_operators():
    scripted = torch.jit.script(scripted_moe)
    assert "moeperm::npu_moe_token_permute" in str(scripted.graph)
    rng = np.random.default_rng(44)
    x = bf16(rng, (5, 4)).requires_grad_()
    probs = torch.rand(5, 2, requires_grad=True)
    ids = routing(rng, 5, 2)
    out = scripted(x, ids, probs)
    same_bits(scripted_moe(x, ids, probs), out)
    out.float().sum().backward()
    assert x.grad is not None and probs.grad is not None
    traced = torch.jit.trace(scripted_moe, (x.detach(), ids, probs.detach()))
    assert "moeperm::npu_moe_token_unpermute" in str(traced.graph)
    same_bits(out, traced(x.detach(), ids, probs.detach()))


def test_a_second_copy_of_the_package_uses_the_operators_already_registered(tmp_path):
    package = os.path.dirname(moeperm.__file__)
    code = ("import importlib.util, sys, torch\n"
            "import moeperm.torch\n"
            "spec = importlib.util.spec_from_file_location('moeperm_copy', %r, "
            "submodule_search_locations=[%r])\n"
            "copy = importlib.util.module_from_spec(spec); sys.modules['moeperm_copy'] = copy\n"
            "spec.loader.exec_module(copy)\n"
            "import moeperm_copy.torch\n"
            "print(moeperm_copy._torch_ops._LIBRARY is None)\n"
            "print(moeperm_copy.torch.npu_moe_token_permute(torch.ones(2, 2), "
            "torch.zeros(2, 1, dtype=torch.int32))[1].tolist())\n"
            % (os.path.join(package, "__init__.py"), package))
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                       cwd=str(tmp_path), timeout=300)
    assert r.returncode == 0, r.stderr
    assert r.stdout.split("\n")[:2] == ["True", "[0, 1]"]


def test_the_version_switch_reads_the_installed_torch():
    major, minor = _torch_ops.TORCH_VERSION
    assert "%d.%d" % (major, minor) == ".".join(torch.__version__.split(".")[:2])
    with _torch_ops._below_autograd():
        # Below autograd the CPU kernel runs directly: no graph is recorded.
        out = ops.npu_moe_token_permute(torch.ones(2, 2, requires_grad=True),
                                        torch.zeros(2, 1, dtype=torch.int32))[0]
    assert out.grad_fn is None
    out = ops.npu_moe_token_permute(torch.ones(2, 2, requires_grad=True),
                                    torch.zeros(2, 1, dtype=torch.int32))[0]
    assert out.grad_fn is not None


# -- Meta and CPU refuse alike, naming the argument -------------------------

def i32(*shape, device):
    return torch.zeros(shape, dtype=torch.int32, device=device)


REFUSALS = {
    "float64 tokens": (
        lambda d: ops.npu_moe_token_permute(torch.zeros(4, 3, dtype=torch.float64, device=d),
                                            i32(4, 2, device=d)),
        TypeError, r"^tokens dtype torch.float64 is not supported here; it must be "
                   r"torch.float32, torch.float16, torch.bfloat16 or torch.int8$"),
    "float32 indices": (
        lambda d: ops.npu_moe_token_permute(torch.zeros(4, 3, device=d),
                                            torch.zeros(4, 2, device=d)),
        TypeError, r"^indices dtype torch.float32 is not supported here"),
    "3-D indices": (
        lambda d: ops.npu_moe_token_permute(torch.zeros(4, 3, device=d), i32(4, 2, 1, device=d)),
        ValueError, r"^indices has 3 dims; it must have 1 or 2$"),
    "int8 permuted_tokens": (
        lambda d: ops.npu_moe_token_unpermute(torch.zeros(4, 3, dtype=torch.int8, device=d),
                                              i32(4, device=d)),
        TypeError, r"^permuted_tokens dtype torch.int8 is not supported here"),
    "int64 sorted_indices": (
        lambda d: ops.npu_moe_token_unpermute(torch.zeros(4, 3, device=d),
                                              torch.zeros(4, dtype=torch.int64, device=d)),
        moeperm.Error, r"^the device refuses sorted_indices dtype 9 \(int64\): it takes "
                       r"INT32 \(3\)$"),
    "float64 probs": (
        lambda d: ops.npu_moe_token_unpermute(torch.zeros(4, 3, device=d), i32(4, device=d),
                                              torch.zeros(2, 2, dtype=torch.float64, device=d)),
        TypeError, r"^probs dtype torch.float64 is not supported here"),
    "tokens_dtype of another dtype than the gradient": (
        lambda d: ops.npu_moe_token_permute_grad_v2(torch.zeros(4, 3, device=d), i32(4, device=d),
                                                    2, torch.float16, 2),
        TypeError, r"^tokens_dtype torch.float16 differs from grad_permuted_tokens dtype "
                   r"torch.float32; they must be equal$"),
    "3-D probs of the unpermute gradient": (
        lambda d: ops.npu_moe_token_unpermute_grad_v2(
            torch.zeros(4, 3, device=d), i32(4, device=d), 4, torch.float32,
            torch.ones(4, 1, 1, device=d), permuted_tokens=torch.zeros(4, 3, device=d)),
        ValueError, r"^probs has 3 dims; it must have 2$"),
    "permuted_tokens of other rows than permuted_tokens_size_0": (
        lambda d: ops.npu_moe_token_unpermute_grad_v2(
            torch.zeros(4, 3, device=d), i32(4, device=d), 5, torch.float32,
            torch.ones(4, 1, device=d), permuted_tokens=torch.zeros(4, 3, device=d)),
        ValueError, r"^permuted_tokens has 4 rows and permuted_tokens_size_0 is 5"),
}


@pytest.mark.parametrize("name", sorted(REFUSALS))
@pytest.mark.parametrize("device", ["cpu", "meta"])
def test_meta_kernels_refuse_what_the_cpu_kernels_refuse(name, device):
    call, error, message = REFUSALS[name]
    with pytest.raises(error, match=message):
        call(device)


def test_wrong_ranks_and_dtypes_of_the_grad_operators_name_the_argument():
    tokens, sorted_indices = torch.zeros(4, 3), torch.arange(4, dtype=torch.int32)
    # A 0-dim gradient: not an IndexError from a size of no dim.
    with pytest.raises(ValueError, match=r"^grad_unpermuted_tokens has 0 dims; it must have 2$"):
        ops.npu_moe_token_unpermute_grad(tokens, torch.tensor(1.0), sorted_indices)
    # A 3-D gradient: its rank, not a mismatch of columns.
    with pytest.raises(ValueError, match=r"^grad_unpermuted_tokens has 3 dims; it must have 2$"):
        ops.npu_moe_token_unpermute_grad(tokens, torch.zeros(4, 3, 3), sorted_indices)
    # The tokens' dtype against the gradient's, with no out= in the message.
    with pytest.raises(TypeError, match=r"^tokens dtype torch.float16 differs from "
                                        r"grad_permuted_tokens dtype torch.float32; they must "
                                        r"be equal$"):
        ops.npu_moe_token_permute_grad(tokens.half(), torch.zeros(4, 3), i32(2, 2, device="cpu"),
                                       sorted_indices)
    with pytest.raises(TypeError, match=r"^permuted_tokens dtype torch.float32 differs from "
                                        r"grad_unpermuted_tokens dtype torch.float16"):
        ops.npu_moe_token_unpermute_grad(tokens, torch.zeros(4, 3, dtype=torch.float16),
                                         sorted_indices)
    with pytest.raises(TypeError, match=r"^permuted_tokens_dtype torch.float32 differs from "
                                        r"grad_unpermuted_tokens dtype torch.float16"):
        ops.npu_moe_token_unpermute_grad_v2(torch.zeros(4, 3, dtype=torch.float16),
                                            sorted_indices, 4, torch.float32)


@pytest.mark.parametrize("with_probs", [True, False])
def test_unpermute_grad_of_no_permuted_rows_returns_early_as_torch_npu_does(with_probs):
    # aclnnMoeTokenUnpermuteGrad refuses a permuted_tokens of no rows;
    # torch_npu returns an empty gradient and a zero one of probs instead.
    grad, sorted_indices = bf16(np.random.default_rng(45), (3, 8)), torch.arange(
        6, dtype=torch.int32)
    probs = torch.rand(3, 2) if with_probs else None
    tokens_grad, probs_grad = ops.npu_moe_token_unpermute_grad_v2(
        grad, sorted_indices, 0, torch.bfloat16, probs, permuted_tokens=torch.empty(
            0, 8, dtype=torch.bfloat16) if with_probs else None)
    assert tokens_grad.shape == (0, 8) and tokens_grad.dtype == torch.bfloat16
    want = torch.zeros(3, 2) if with_probs else torch.zeros((), dtype=torch.bfloat16)
    same_bits(want, probs_grad)
    # The out= overload zeroes what it is given.
    tokens_out = torch.empty(0, 8, dtype=torch.bfloat16)
    probs_out = torch.full(want.shape, float("nan"), dtype=want.dtype)
    ops.npu_moe_token_unpermute_grad(torch.empty(0, 8, dtype=torch.bfloat16), grad,
                                     sorted_indices, probs, permuted_tokens_grad_out=tokens_out,
                                     probs_grad_out=probs_out)
    same_bits(want, probs_out)

"""moeperm.torch_npu: torch_npu model code runs on the CPU, forward and
backward, with the device's bits.  A small MoE layer written with torch_npu's
names gives, through the stand-in, the gradients moeperm.torch gives, bit
for bit, and both equal those of the same layer over an independent
pure-torch model of the four operators (index_select and k-ordered float32
sums, the device's order of the probs gradient's reduction).  install()
makes `import torch_npu` find the stand-in only where no real torch_npu is
importable."""
import inspect
import os
import subprocess
import sys

import pytest

import moeperm

torch = pytest.importorskip("torch", reason="torch is not installed (Debian: python3-torch)")
import moeperm.torch  # noqa: E402
import moeperm.torch_npu as torch_npu  # noqa: E402

from test_torch_ops import TORCH_NPU_SCHEMAS  # noqa: E402


# -- an independent model of the operators, in torch ------------------------

def _narrow(acc, dtype):
    return acc.to(dtype)  # round to nearest even, as the kernels narrow


class RefPermute(torch.autograd.Function):
    """Stable sort of the expert ids; rows are tokens moved; the gradient
    of a token sums its slots' rows in k order in float32 (a dropped slot
    skipped; the first kept slot starts the sum), rounded once."""

    @staticmethod
    def forward(ctx, tokens, indices, num_out_tokens):
        flat = indices.reshape(-1)
        top_k = 1 if indices.dim() == 1 else indices.shape[1]
        order = torch.sort(flat, stable=True).indices
        sorted_indices = torch.empty_like(order)
        sorted_indices[order] = torch.arange(flat.numel())
        slots = flat.numel()
        v = num_out_tokens or 0
        rows = min(v, slots) if v > 0 else v + slots
        permuted = tokens.index_select(0, torch.div(order[:rows], top_k, rounding_mode="floor"))
        ctx.save_for_backward(sorted_indices)
        ctx.top_k, ctx.rows = top_k, rows
        sorted_indices = sorted_indices.to(torch.int32)
        ctx.mark_non_differentiable(sorted_indices)
        return permuted, sorted_indices

    @staticmethod
    def backward(ctx, grad, _):
        (sorted_indices,) = ctx.saved_tensors
        idx = sorted_indices.reshape(-1, ctx.top_k)
        wide = grad.float()
        acc = torch.zeros(idx.shape[0], grad.shape[1])
        for k in range(ctx.top_k):
            kept = idx[:, k] < ctx.rows
            values = wide.index_select(0, torch.where(kept, idx[:, k], torch.zeros_like(
                idx[:, k])))
            acc = torch.where(kept[:, None], values if k == 0 else acc + values, acc)
        return _narrow(acc, grad.dtype), None, None


def pairwise_sum(buf):
    """The AscendC reduction of one chunk under 64 columns: a pairwise tree
    over adjacent elements, an element without a partner moving up."""
    while buf.shape[1] > 1:
        pairs = buf[:, 0:buf.shape[1] - 1:2] + buf[:, 1::2]
        buf = torch.cat([pairs, buf[:, -1:]], 1) if buf.shape[1] % 2 else pairs
    return buf[:, 0]


class RefUnpermute(torch.autograd.Function):
    """Per token, the products of its kept slots (row present, prob not 0)
    added in k order in float32, rounded once.  The gradient of a row is the
    token's gradient times the prob, rounded once; the gradient of a prob is
    the dot product of the row (zeros when dropped) with the token's
    gradient, products summed pairwise (hidden < 64: one chunk) from +0."""

    @staticmethod
    def forward(ctx, permuted, sorted_indices, probs):
        rows = permuted.shape[0]
        top_k = probs.shape[1]
        idx = sorted_indices.long().reshape(-1, top_k)
        x, p = permuted.float(), probs.float()
        acc = torch.zeros(idx.shape[0], permuted.shape[1])
        for k in range(top_k):
            kept = (idx[:, k] < rows) & (p[:, k] != 0)
            term = x.index_select(0, torch.where(kept, idx[:, k], torch.zeros_like(
                idx[:, k]))) * p[:, k:k + 1]
            acc = torch.where(kept[:, None], term if k == 0 else acc + term, acc)
        ctx.save_for_backward(permuted, idx, probs)
        return _narrow(acc, permuted.dtype)

    @staticmethod
    def backward(ctx, grad):
        permuted, idx, probs = ctx.saved_tensors
        rows, hidden = permuted.shape
        assert hidden < 64, "the reference models one chunk under 64 columns"
        top_k = probs.shape[1]
        g, p = grad.float(), probs.float()
        tokens_of_slot = torch.arange(idx.numel()) // top_k
        slot_of = idx.reshape(-1)
        kept = slot_of < rows
        products = _narrow(g.index_select(0, tokens_of_slot) * p.reshape(-1, 1), grad.dtype)
        permuted_grad = torch.zeros(rows, hidden, dtype=grad.dtype)
        permuted_grad.index_copy_(0, slot_of[kept], products[kept])
        x = torch.zeros(idx.numel(), hidden)
        x[kept] = permuted.float().index_select(0, slot_of[kept])
        dots = pairwise_sum(x * g.index_select(0, tokens_of_slot))
        probs_grad = _narrow(torch.zeros(()) + dots, probs.dtype).reshape(-1, top_k)
        return permuted_grad, None, probs_grad


class PureTorchNpu:
    """torch_npu's two names over the reference model."""

    @staticmethod
    def npu_moe_token_permute(tokens, indices, num_out_tokens=None, padded_mode=False):
        return RefPermute.apply(tokens, indices, num_out_tokens)

    @staticmethod
    def npu_moe_token_unpermute(permuted_tokens, sorted_indices, probs=None, padded_mode=False,
                                restore_shape=None):
        return RefUnpermute.apply(permuted_tokens, sorted_indices, probs)


# -- a small MoE layer written against torch_npu ----------------------------

class MoE(torch.nn.Module):
    def __init__(self, npu, hidden=16, experts=6, top_k=2, num_out_tokens=None):
        super().__init__()
        self.npu, self.top_k, self.num_out_tokens = npu, top_k, num_out_tokens
        g = torch.Generator().manual_seed(7)
        self.router = torch.nn.Parameter(torch.randn(hidden, experts, generator=g))
        self.experts = torch.nn.Parameter(
            (torch.randn(experts, hidden, hidden, generator=g) / 4).to(torch.bfloat16))
        # Columns of magnitudes 2^-21 .. 2^24: the probs gradient's dot
        # products then round differently in another order of summation.
        self.register_buffer("scale", (2.0 ** (torch.arange(hidden) * 3 - 21)).to(
            torch.bfloat16))

    def forward(self, x):
        weights, ids = torch.softmax(x.float() @ self.router, -1).topk(self.top_k)
        permuted, sorted_indices = self.npu.npu_moe_token_permute(x, ids, self.num_out_tokens)
        # Rows come grouped by expert (a stable sort of the ids); dropped
        # copies are the last rows.
        counts = torch.bincount(ids.reshape(-1), minlength=self.experts.shape[0]).tolist()
        rows, start, outs = permuted.shape[0], 0, []
        for e, count in enumerate(counts):
            end = min(start + count, rows)
            if end > start:
                outs.append(torch.tanh(permuted[start:end] @ self.experts[e]) * self.scale)
            start += count
        expert_out = torch.cat(outs)
        return self.npu.npu_moe_token_unpermute(expert_out, sorted_indices, weights)


def run(npu, num_out_tokens):
    torch.manual_seed(3)
    x = torch.randn(11, 16).to(torch.bfloat16).requires_grad_()
    layer = MoE(npu, num_out_tokens=num_out_tokens)
    out = layer(x)
    target = torch.linspace(-1, 1, out.numel()).reshape(out.shape)
    loss = ((out.float() - target) ** 2).sum()
    loss.backward()
    return {"out": out, "loss": loss, "x.grad": x.grad, "router.grad": layer.router.grad,
            "experts.grad": layer.experts.grad}


def bits(t):
    t = t.detach().contiguous()
    return t.view(torch.int16) if t.dtype == torch.bfloat16 else t.view(torch.int32)


@pytest.mark.parametrize("num_out_tokens", [None, -5], ids=["all", "dropped"])
def test_moe_layer_through_the_stand_in_has_moeperm_torchs_and_the_models_bits(num_out_tokens):
    stand_in = run(torch_npu, num_out_tokens)
    own = run(moeperm.torch, num_out_tokens)
    model = run(PureTorchNpu, num_out_tokens)
    for name, value in stand_in.items():
        assert value is not None and torch.isfinite(value.float()).all(), name
        assert torch.equal(bits(value), bits(own[name])), name
        assert torch.equal(bits(value), bits(model[name])), name
    # The check can fail: a gradient one ulp off is told apart.
    nudged = bits(model["router.grad"]).clone()
    nudged.view(-1)[0] += 1
    assert not torch.equal(bits(stand_in["router.grad"]), nudged)


def test_a_wrong_reduction_order_would_be_told_apart():
    # With these products the pairwise tree and a left-to-right sum differ,
    # so the model's bits above pin the device's order of the probs gradient.
    buf = torch.tensor([[1.0, 2.0 ** 24, 1.0, -2.0 ** 24]])
    left_to_right = torch.zeros(1)
    for j in range(4):
        left_to_right = left_to_right + buf[:, j]
    assert pairwise_sum(buf).item() != left_to_right.item()


# -- the names and signatures ----------------------------------------------

@pytest.mark.parametrize("name", sorted(TORCH_NPU_SCHEMAS))
def test_functions_have_torch_npus_names_and_signatures(name):
    schema = getattr(torch.ops.moeperm, name).default._schema
    torch_npu_args = [a.name for a in schema.arguments if a.name != "chip"]
    params = inspect.signature(getattr(torch_npu, name)).parameters
    assert [p for p in params if p != "chip"] == torch_npu_args
    # chip, a keyword torch_npu does not have, is the stand-in's where the
    # operator has it, and only as a keyword.
    has_chip = any(a.name == "chip" for a in schema.arguments)
    assert ("chip" in params) == has_chip
    assert not has_chip or params["chip"].kind == inspect.Parameter.KEYWORD_ONLY


def test_other_torch_npu_names_say_what_the_stand_in_has():
    with pytest.raises(AttributeError, match=r"has no attribute 'npu_rms_norm': it stands in "
                                             r"for torch_npu's MoE token operators only "
                                             r"\(npu_moe_token_permute, npu_moe_token_unpermute"):
        torch_npu.npu_rms_norm


def test_num_out_tokens_below_minus_n_k_fails_as_torch_npu_fails():
    with pytest.raises(RuntimeError, match=r"^Trying to create tensor with negative dimension"):
        torch_npu.npu_moe_token_permute(torch.ones(3, 2), torch.zeros(3, 2, dtype=torch.int32),
                                        -7)


def test_int64_sorted_indices_are_refused():
    with pytest.raises(RuntimeError, match=r"sorted_indices dtype 9 \(int64\)"):
        torch_npu.npu_moe_token_unpermute(torch.ones(3, 2), torch.arange(3))


# -- install() ----------------------------------------------------------------

INSTALL = """
import sys, warnings
warnings.simplefilter("always")
with warnings.catch_warnings(record=True) as caught:
    import moeperm.torch_npu
    print("install", moeperm.torch_npu.install(), moeperm.torch_npu.install())
    import torch_npu
    import torch_npu as again
    print("same", torch_npu is moeperm.torch_npu, again is torch_npu)
    print("real", getattr(torch_npu, "REAL", False))
print("warnings", [w.category.__name__ for w in caught])
"""


def run_install(tmp_path, extra_path=None):
    env = dict(os.environ)
    paths = [os.path.dirname(os.path.dirname(moeperm.__file__))]
    if extra_path:
        paths.insert(0, extra_path)
    env["PYTHONPATH"] = os.pathsep.join(paths + [p for p in env.get("PYTHONPATH", "").split(
        os.pathsep) if p])
    r = subprocess.run([sys.executable, "-c", INSTALL], capture_output=True, text=True,
                       env=env, cwd=str(tmp_path), timeout=300)
    assert r.returncode == 0, r.stderr
    return r.stdout.splitlines()


def test_install_gives_the_stand_in_when_there_is_no_torch_npu_and_warns_once(tmp_path):
    import importlib.util
    if importlib.util.find_spec("torch_npu") is not None:
        pytest.skip("a real torch_npu is installed here")
    assert run_install(tmp_path) == ["install True True", "same True True", "real False",
                                     "warnings ['TorchNpuStandInWarning']"]


def test_install_never_shadows_a_real_torch_npu(tmp_path):
    fake = tmp_path / "site"
    (fake / "torch_npu").mkdir(parents=True)
    (fake / "torch_npu" / "__init__.py").write_text("REAL = True\n")
    assert run_install(tmp_path, str(fake)) == ["install False False", "same False True",
                                                "real True", "warnings []"]

"""torch_npu's MoE token operators for torch_npu model code on a CPU host.

    import moeperm.torch_npu as torch_npu

    permuted, sorted_indices = torch_npu.npu_moe_token_permute(hidden, topk_ids)
    out = torch_npu.npu_moe_token_unpermute(expert_out, sorted_indices, topk_weights)
    out.sum().backward()       # the device's gradients, bit for bit

Or, for code that says ``import torch_npu`` and cannot be edited:

    import moeperm.torch_npu
    moeperm.torch_npu.install()   # before the model's `import torch_npu`

after which ``import torch_npu`` gives this module only when no real
torch_npu can be imported (a real one always wins: this module never
shadows it), with one TorchNpuStandInWarning saying so.

The functions have torch_npu's names and signatures (op-plugin's
op_plugin_functions.yaml) and call the torch operators of the same names in
the ``moeperm`` namespace (``moeperm._torch_ops``): CPU tensors in, CPU
tensors out, the forward and backward of the device's kernels.

    npu_moe_token_permute(tokens, indices, num_out_tokens=None, padded_mode=False)
    npu_moe_token_unpermute(permuted_tokens, sorted_indices, probs=None,
                            padded_mode=False, restore_shape=None, *, chip=None)
    npu_moe_token_permute_grad(tokens, grad_permuted_tokens, indices, sorted_indices,
                               padded_mode=False)
    npu_moe_token_permute_grad_v2(grad_permuted_tokens, sorted_indices, tokens_size_0,
                                  tokens_dtype, num_topK, padded_mode=False)
    npu_moe_token_unpermute_grad(permuted_tokens, grad_unpermuted_tokens, sorted_indices,
                                 probs=None, padded_mode=False, restore_shape=None, *,
                                 chip=None)
    npu_moe_token_unpermute_grad_v2(grad_unpermuted_tokens, sorted_indices,
                                    permuted_tokens_size_0, permuted_tokens_dtype,
                                    probs=None, padded_mode=False, restore_shape=None,
                                    permuted_tokens=None, *, chip=None)

``chip``, a keyword torch_npu does not have, is the chip whose reduction
order the gradient of probs follows, as the device it stands for sums it: a
chip's name ("Ascend910B3", one of moeperm.chip_names()), or for a chip
without one a moeperm.Chip(ub_bytes, vector_cores); None is Atlas A2.

Nothing else of torch_npu is here: no devices, streams, ``tensor.npu()`` or
other operators; asking for one raises AttributeError naming what is.
"""
import importlib.abc
import importlib.util
import sys
import warnings

from . import _torch_ops
from ._torch_ops import chip_list, restore_shape_list

__all__ = ["npu_moe_token_permute", "npu_moe_token_unpermute", "npu_moe_token_permute_grad",
           "npu_moe_token_permute_grad_v2", "npu_moe_token_unpermute_grad",
           "npu_moe_token_unpermute_grad_v2", "install", "TorchNpuStandInWarning"]

_op = _torch_ops._op


def npu_moe_token_permute(tokens, indices, num_out_tokens=None, padded_mode=False):
    """torch_npu.npu_moe_token_permute: (permuted_tokens, sorted_indices)."""
    return _op("npu_moe_token_permute")(tokens, indices, num_out_tokens, padded_mode)


def npu_moe_token_unpermute(permuted_tokens, sorted_indices, probs=None, padded_mode=False,
                            restore_shape=None, *, chip=None):
    """torch_npu.npu_moe_token_unpermute: unpermuted_tokens (its backward
    sums the gradient of probs in the order of ``chip``)."""
    return _op("npu_moe_token_unpermute")(permuted_tokens, sorted_indices, probs, padded_mode,
                                           restore_shape_list(restore_shape), chip=chip_list(chip))


def npu_moe_token_permute_grad(tokens, grad_permuted_tokens, indices, sorted_indices,
                               padded_mode=False):
    """torch_npu.npu_moe_token_permute_grad: the gradient of tokens."""
    return _op("npu_moe_token_permute_grad")(tokens, grad_permuted_tokens, indices,
                                              sorted_indices, padded_mode)


def npu_moe_token_permute_grad_v2(grad_permuted_tokens, sorted_indices, tokens_size_0,
                                  tokens_dtype, num_topK, padded_mode=False):
    """torch_npu.npu_moe_token_permute_grad_v2: the gradient of tokens, the
    backward of npu_moe_token_permute."""
    return _op("npu_moe_token_permute_grad_v2")(grad_permuted_tokens, sorted_indices,
                                                 tokens_size_0, tokens_dtype, num_topK,
                                                 padded_mode)


def npu_moe_token_unpermute_grad(permuted_tokens, grad_unpermuted_tokens, sorted_indices,
                                 probs=None, padded_mode=False, restore_shape=None, *, chip=None):
    """torch_npu.npu_moe_token_unpermute_grad: (the gradient of
    permuted_tokens, the gradient of probs; 0-dim without probs)."""
    return _op("npu_moe_token_unpermute_grad")(
        permuted_tokens, grad_unpermuted_tokens, sorted_indices, probs, padded_mode,
        restore_shape_list(restore_shape), chip=chip_list(chip))


def npu_moe_token_unpermute_grad_v2(grad_unpermuted_tokens, sorted_indices,
                                    permuted_tokens_size_0, permuted_tokens_dtype, probs=None,
                                    padded_mode=False, restore_shape=None, permuted_tokens=None,
                                    *, chip=None):
    """torch_npu.npu_moe_token_unpermute_grad_v2, the backward of
    npu_moe_token_unpermute: (the gradient of permuted_tokens, the gradient
    of probs; 0-dim without probs)."""
    return _op("npu_moe_token_unpermute_grad_v2")(
        grad_unpermuted_tokens, sorted_indices, permuted_tokens_size_0, permuted_tokens_dtype,
        probs, padded_mode, restore_shape_list(restore_shape), permuted_tokens,
        chip=chip_list(chip))


def __getattr__(name):
    raise AttributeError(
        "module 'moeperm.torch_npu' has no attribute %r: it stands in for torch_npu's MoE token "
        "operators only (%s)" % (name, ", ".join(n for n in __all__ if n.startswith("npu_"))))


# -- import torch_npu ---------------------------------------------------

class TorchNpuStandInWarning(UserWarning):
    """``import torch_npu`` gave moeperm.torch_npu, since no real torch_npu
    is installed."""


class _StandIn(importlib.abc.MetaPathFinder, importlib.abc.Loader):
    """The last finder of sys.meta_path: asked for torch_npu only when every
    finder before it (the real package's) found nothing."""

    def find_spec(self, fullname, path=None, target=None):
        if fullname != "torch_npu":
            return None
        return importlib.util.spec_from_loader(fullname, self)

    def create_module(self, spec):
        warnings.warn("torch_npu is not installed: `import torch_npu` gives moeperm.torch_npu, "
                      "a CPU stand-in for torch_npu's MoE token operators only (moeperm."
                      "torch_npu.install() was called)", TorchNpuStandInWarning, stacklevel=2)
        return sys.modules[__name__]

    def exec_module(self, module):
        pass


_FINDER = _StandIn()


def _real_spec():
    for finder in sys.meta_path:
        if finder is _FINDER or not hasattr(finder, "find_spec"):
            continue
        spec = finder.find_spec("torch_npu", None)
        if spec is not None:
            return spec
    return None


def install():
    """install() makes ``import torch_npu`` give this module when no real
    torch_npu is importable, and returns True when that is so now; False
    when a real torch_npu is found (or already imported), which then stays
    the one ``import torch_npu`` gives.  The first import that gets this
    module warns with TorchNpuStandInWarning.  Calling it again does
    nothing more."""
    if _FINDER not in sys.meta_path:
        sys.meta_path.append(_FINDER)
    loaded = sys.modules.get("torch_npu")
    if loaded is not None:
        return loaded is sys.modules[__name__]
    return _real_spec() is None

"""torch_npu's MoE token operators on the CPU, with the NPU's bits, forward
and backward.

    npu_moe_token_permute(tokens, indices, num_out_tokens=None, padded_mode=False)
        -> (permuted_tokens, sorted_indices)
    npu_moe_token_unpermute(permuted_tokens, sorted_indices, probs=None,
                            padded_mode=False, restore_shape=None, *, chip=None)
        -> unpermuted_tokens

Each has torch_npu's signature and calls the torch operator of the same name,
``torch.ops.moeperm.npu_moe_token_permute`` or
``torch.ops.moeperm.npu_moe_token_unpermute`` (importing this module
registers them, and their grad operators: ``moeperm._torch_ops``).  Their
autograd is torch_npu's: the backward runs the operator the device runs
for it, MoeTokenPermuteGrad or MoeTokenUnpermuteGrad, so ``loss.backward()``
through a model written against torch_npu gives the device's gradients on a
CPU.  A model switches with one import:

    from moeperm.torch import npu_moe_token_permute, npu_moe_token_unpermute

(or runs unchanged with ``import moeperm.torch_npu as torch_npu``).

Tensors are CPU tensors of torch.float32, torch.float16 or torch.bfloat16
(tokens may also be torch.int8, without gradient); indices int32 or int64,
sorted_indices int32.  sorted_indices never has a gradient.  ``chip`` (a
keyword that torch_npu does not have) picks the chip whose reduction order
the gradient of probs follows: a chip's name ("Ascend910B3", one of
moeperm.chip_names()), or for a chip without one a moeperm.Chip(ub_bytes,
vector_cores) or a pair of integers; None is Atlas A2 (moeperm.CHIP_A2).
The torch operators themselves take the numbers, ``[ub_bytes,
vector_cores]``.  The backward is not
itself differentiable (no double backward).  Meta tensors give the results'
shapes and dtypes without computing.
"""
import torch

from . import _torch_ops
from ._torch_ops import MoeTokenPermute, MoeTokenUnpermute, chip_list, restore_shape_list

__all__ = ["npu_moe_token_permute", "npu_moe_token_unpermute", "MoeTokenPermute",
           "MoeTokenUnpermute"]


def _tensor(value, name, optional=False):
    if value is None and optional:
        return None
    if not isinstance(value, torch.Tensor):
        raise TypeError("%s is a %s; moeperm.torch takes torch.Tensor (moeperm.%s takes "
                        "numpy arrays)" % (name, type(value).__name__,
                                           "moe_token_permute / moe_token_unpermute"))
    return value


def npu_moe_token_permute(tokens, indices, num_out_tokens=None, padded_mode=False):
    """npu_moe_token_permute() returns (permuted_tokens, sorted_indices) as
    torch_npu.npu_moe_token_permute does (moeperm.moe_token_permute() says
    how; num_out_tokens follows torch_npu's host arithmetic, so a count below
    -N*K raises torch's negative-dimension RuntimeError), differentiable in
    tokens: the gradient of tokens is MoeTokenPermuteGrad of the gradient of
    permuted_tokens."""
    return _torch_ops._op("npu_moe_token_permute")(
        _tensor(tokens, "tokens"), _tensor(indices, "indices"), num_out_tokens, padded_mode)


def npu_moe_token_unpermute(permuted_tokens, sorted_indices, probs=None, padded_mode=False,
                            restore_shape=None, *, chip=None):
    """npu_moe_token_unpermute() returns unpermuted_tokens as
    torch_npu.npu_moe_token_unpermute does (moeperm.moe_token_unpermute()
    says how), differentiable in permuted_tokens and probs: their gradients
    are MoeTokenUnpermuteGrad's permuted_tokens_grad and probs_grad, the
    latter summed in the order of ``chip`` (None: Atlas A2)."""
    return _torch_ops._op("npu_moe_token_unpermute")(
        _tensor(permuted_tokens, "permuted_tokens"), _tensor(sorted_indices, "sorted_indices"),
        _tensor(probs, "probs", optional=True), padded_mode, restore_shape_list(restore_shape),
        chip=chip_list(chip))

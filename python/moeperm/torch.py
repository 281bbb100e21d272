"""torch_npu's MoE token operators on the CPU, with the NPU's bits, forward
and backward.

    npu_moe_token_permute(tokens, indices, num_out_tokens=None, padded_mode=False)
        -> (permuted_tokens, sorted_indices)
    npu_moe_token_unpermute(permuted_tokens, sorted_indices, probs=None,
                            padded_mode=False, restore_shape=None, *, chip=None)
        -> unpermuted_tokens

Each has torch_npu's signature and is a torch.autograd.Function: the forward
runs MoeTokenPermute or MoeTokenUnpermute, and the backward runs the
operator the device runs for it, MoeTokenPermuteGrad or
MoeTokenUnpermuteGrad, so ``loss.backward()`` through a model written
against torch_npu gives the device's gradients on a CPU.  A model switches
with one import:

    from moeperm.torch import npu_moe_token_permute, npu_moe_token_unpermute

Tensors are CPU tensors of torch.float32, torch.float16 or torch.bfloat16
(tokens may also be torch.int8, without gradient); indices int32 or int64.
sorted_indices is int32 and never has a gradient.  ``chip`` (a keyword that
torch_npu does not have) picks the chip whose reduction order the gradient
of probs follows; None is Atlas A2 (moeperm.CHIP_A2).  The backward is not
itself differentiable (no double backward).
"""
import torch

from . import _ops

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


class MoeTokenPermute(torch.autograd.Function):
    """MoeTokenPermute forward, MoeTokenPermuteGrad backward."""

    @staticmethod
    def forward(ctx, tokens, indices, num_out_tokens, padded_mode):
        permuted_tokens, sorted_indices = _ops.moe_token_permute(tokens, indices, num_out_tokens,
                                                                 padded_mode)
        ctx.top_k = 1 if indices.dim() == 1 else indices.shape[1]
        ctx.padded_mode = padded_mode
        ctx.save_for_backward(sorted_indices)
        ctx.mark_non_differentiable(sorted_indices)
        return permuted_tokens, sorted_indices

    @staticmethod
    @torch.autograd.function.once_differentiable
    def backward(ctx, permuted_tokens_grad, sorted_indices_grad):
        tokens_grad = None
        if ctx.needs_input_grad[0]:
            (sorted_indices,) = ctx.saved_tensors
            # Copies dropped by num_out_tokens have no row of the gradient:
            # the operator skips slots at or past its rows.
            tokens_grad = _ops.moe_token_permute_grad(permuted_tokens_grad, sorted_indices,
                                                      ctx.top_k, ctx.padded_mode)
        return tokens_grad, None, None, None


class MoeTokenUnpermute(torch.autograd.Function):
    """MoeTokenUnpermute forward, MoeTokenUnpermuteGrad backward."""

    @staticmethod
    def forward(ctx, permuted_tokens, sorted_indices, probs, padded_mode, restore_shape, chip):
        unpermuted_tokens = _ops.moe_token_unpermute(permuted_tokens, sorted_indices, probs,
                                                     padded_mode, restore_shape)
        ctx.save_for_backward(permuted_tokens, sorted_indices, probs)
        ctx.padded_mode, ctx.restore_shape, ctx.chip = padded_mode, restore_shape, chip
        return unpermuted_tokens

    @staticmethod
    @torch.autograd.function.once_differentiable
    def backward(ctx, unpermuted_tokens_grad):
        tokens_grad = probs_grad = None
        if ctx.needs_input_grad[0] or ctx.needs_input_grad[2]:
            permuted_tokens, sorted_indices, probs = ctx.saved_tensors
            tokens_grad, probs_grad = _ops.moe_token_unpermute_grad(
                permuted_tokens, unpermuted_tokens_grad, sorted_indices, probs, ctx.padded_mode,
                ctx.restore_shape, chip=ctx.chip)
            if not ctx.needs_input_grad[0]:
                tokens_grad = None
            if not ctx.needs_input_grad[2]:
                probs_grad = None
        return tokens_grad, None, probs_grad, None, None, None


def npu_moe_token_permute(tokens, indices, num_out_tokens=None, padded_mode=False):
    """npu_moe_token_permute() returns (permuted_tokens, sorted_indices) as
    torch_npu.npu_moe_token_permute does (moeperm.moe_token_permute() says
    how), differentiable in tokens: the gradient of tokens is
    MoeTokenPermuteGrad of the gradient of permuted_tokens."""
    return MoeTokenPermute.apply(_tensor(tokens, "tokens"), _tensor(indices, "indices"),
                                 num_out_tokens, padded_mode)


def npu_moe_token_unpermute(permuted_tokens, sorted_indices, probs=None, padded_mode=False,
                            restore_shape=None, *, chip=None):
    """npu_moe_token_unpermute() returns unpermuted_tokens as
    torch_npu.npu_moe_token_unpermute does (moeperm.moe_token_unpermute()
    says how), differentiable in permuted_tokens and probs: their gradients
    are MoeTokenUnpermuteGrad's permuted_tokens_grad and probs_grad, the
    latter summed in the order of ``chip`` (None: Atlas A2)."""
    return MoeTokenUnpermute.apply(_tensor(permuted_tokens, "permuted_tokens"),
                                   _tensor(sorted_indices, "sorted_indices"),
                                   _tensor(probs, "probs", optional=True), padded_mode,
                                   restore_shape, chip)

"""moeperm: the Ascend NPU's MoE token-permutation numerics on the CPU.

A ctypes face over libmoeperm: numpy arrays and CPU torch tensors go in
without copies and results come back of the same kind, with exactly the bits
of the device kernels.  bf16 has no numpy dtype: np.uint16 arrays hold bf16
bit patterns, in arguments and in results; torch uses torch.bfloat16.

    moe_token_permute(tokens, indices, num_out_tokens=None, padded_mode=False, *, out=None)
        -> (permuted_tokens, sorted_indices)
    moe_token_permute_grad(permuted_output_grad, sorted_indices, num_topk,
                           padded_mode=False, out=None) -> input_grad
    moe_token_unpermute(permuted_tokens, sorted_indices, probs=None,
                        padded_mode=False, restore_shape=None, *, out=None)
        -> unpermuted_tokens
    moe_token_unpermute_grad(permuted_tokens, unpermuted_tokens_grad,
                             sorted_indices, probs=None, padded_mode=False,
                             restore_shape=None, *, chip=None, out=None)
        -> (permuted_tokens_grad, probs_grad)
    Chip, CHIP_A2: the chip whose reduction order probs_grad follows;
        Chip.by_name("Ascend910B3") and chip_names(): the named Atlas A2/A3
        chips (every chip= takes a name too)
    route(expert_ids, num_experts=None) -> sorted_indices
    bf16_to_float32, float32_to_bf16, float16_to_float32, float32_to_float16
    version() -> the loaded libmoeperm's version
    Error: a refusal by the library, with .status and .status_name

Submodules, imported on first use: ``moeperm.golden`` (golden cases and
the judge, over libmoeperm-golden), ``moeperm.testing`` (assertions and a
pytest plugin), ``moeperm.torch`` (torch_npu's npu_moe_token_permute and
npu_moe_token_unpermute, differentiable; importing it registers the torch
operators ``torch.ops.moeperm.*``) and ``moeperm.torch_npu`` (a stand-in
for torch_npu's MoE token operators, for torch_npu model code on a CPU).

The libraries are found as ``moeperm._loader`` describes; ``library_path``
says which file was loaded.
"""
import importlib

from ._capi import Error, library_path
from ._convert import bf16_to_float32, float16_to_float32, float32_to_bf16, float32_to_float16
from ._ops import (CHIP_A2, Chip, chip_names, moe_token_permute, moe_token_permute_grad,
                   moe_token_unpermute, moe_token_unpermute_grad, route, version)

__version__ = version()

__all__ = ["CHIP_A2", "Chip", "Error", "bf16_to_float32", "chip_names", "float16_to_float32",
           "float32_to_bf16", "float32_to_float16", "library_path", "moe_token_permute",
           "moe_token_permute_grad", "moe_token_unpermute", "moe_token_unpermute_grad", "route",
           "version"]

_SUBMODULES = ("golden", "testing", "torch", "torch_npu")


def __getattr__(name):
    # moeperm.golden loads a second library and moeperm.torch imports torch:
    # neither is paid for by a user who never touches them.
    if name in _SUBMODULES:
        return importlib.import_module("." + name, __name__)
    raise AttributeError("module 'moeperm' has no attribute %r" % name)

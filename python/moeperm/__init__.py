"""moeperm: the Ascend NPU's MoE token-permutation numerics on the CPU.

A ctypes face over libmoeperm: numpy arrays and CPU torch tensors go in
without copies and results come back of the same kind, with exactly the bits
of the device kernels.  bf16 has no numpy dtype: np.uint16 arrays hold bf16
bit patterns, in arguments and in results; torch uses torch.bfloat16.

    moe_token_permute_grad(permuted_output_grad, sorted_indices, num_topk,
                           padded_mode=False, out=None) -> input_grad
    route(expert_ids, num_experts=None) -> sorted_indices
    bf16_to_float32, float32_to_bf16, float16_to_float32, float32_to_float16
    version() -> the loaded libmoeperm's version
    Error: a refusal by the library, with .status and .status_name

The library is found as ``moeperm._loader`` describes; ``library_path``
says which file was loaded.
"""
from ._capi import Error, library_path
from ._convert import bf16_to_float32, float16_to_float32, float32_to_bf16, float32_to_float16
from ._ops import moe_token_permute_grad, route, version

__version__ = version()

__all__ = ["Error", "bf16_to_float32", "float16_to_float32", "float32_to_bf16",
           "float32_to_float16", "library_path", "moe_token_permute_grad", "route", "version"]

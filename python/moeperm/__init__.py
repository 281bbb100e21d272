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
says which file was loaded.  ``import moeperm`` itself loads nothing: the
first use of a name above loads libmoeperm (and numpy), and raises the
loader's ImportError when it cannot be found.  So pytest, which imports
the plugin ``moeperm.testing`` at its start, pays for neither, and a suite
that never uses moeperm cannot fail for want of the library.
"""
import importlib

# Each public name and the module that defines it, imported on first use.
_NAMES = {
    "Error": "_capi", "library_path": "_capi",
    "bf16_to_float32": "_convert", "float16_to_float32": "_convert",
    "float32_to_bf16": "_convert", "float32_to_float16": "_convert",
    "CHIP_A2": "_ops", "Chip": "_ops", "chip_names": "_ops", "moe_token_permute": "_ops",
    "moe_token_permute_grad": "_ops", "moe_token_unpermute": "_ops",
    "moe_token_unpermute_grad": "_ops", "route": "_ops", "version": "_ops",
}

__all__ = sorted(_NAMES)

_SUBMODULES = ("golden", "testing", "torch", "torch_npu")


def __getattr__(name):
    # moeperm.golden loads a second library and moeperm.torch imports torch:
    # neither is paid for by a user who never touches them.
    if name in _SUBMODULES:
        return importlib.import_module("." + name, __name__)
    if name == "__version__":
        value = __getattr__("version")()
    elif name in _NAMES:
        value = getattr(importlib.import_module("." + _NAMES[name], __name__), name)
    else:
        raise AttributeError("module 'moeperm' has no attribute %r" % name)
    globals()[name] = value  # bound now: found without this function from here on
    return value


def __dir__():
    return sorted(set(globals()) | set(_NAMES) | set(_SUBMODULES) | {"__version__"})

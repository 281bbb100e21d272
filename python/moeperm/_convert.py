"""bf16 / fp16 / float32 conversions on whole arrays, by libmoeperm's
moeperm_convert(): the same bits as the operators' own widening and
narrowing (exact widening; round to nearest, ties to even, IEEE subnormals
and overflow to inf; NaNs kept as quiet NaNs of the same sign)."""
import numpy as np

from . import _arrays, _capi
from ._capi import BF16, FLOAT16, FLOAT32


def _convert(array, src, dst):
    v = _arrays.view(array, "array", (src,))
    arr = _arrays.as_numpy(v)
    if not arr.flags.c_contiguous:
        # moeperm_convert() walks contiguous memory; the result is new
        # memory anyway, so one more temporary costs little.
        arr = np.ascontiguousarray(arr)
    result = np.empty(arr.shape, dtype=_arrays.numpy_dtype(dst))
    n = arr.size
    if n:
        status = _capi.function("moeperm_convert")(
            arr.ctypes.data, src,
            result.ctypes.data, dst, n)
        if status != _capi.SUCCESS:
            raise _capi.error_for(status)
    return _arrays.from_numpy(v, result)


def bf16_to_float32(array):
    """bf16_to_float32() returns float32 values of bf16 ``array``, exactly.

    array: np.uint16 (np.uint16 arrays hold bf16 bit patterns) or a CPU
        torch.bfloat16 tensor, any shape and strides.
    Returns a new np.float32 array (torch.float32 tensor for a tensor) of the
    same shape.  A NaN comes back quiet with its sign and payload:
    (bits << 16) | 0x00400000.  Thread safe.
    """
    return _convert(array, BF16, FLOAT32)


def float32_to_bf16(array):
    """float32_to_bf16() returns ``array`` rounded to bf16, to nearest with
    ties to even (overflow gives +-inf, subnormals are kept).

    array: np.float32 or a CPU torch.float32 tensor, any shape and strides
        (float64 is refused: rounding it to float32 first could round twice).
    Returns a new np.uint16 array of bf16 bit patterns (np.uint16 arrays hold
    bf16 bit patterns), or a torch.bfloat16 tensor for a tensor.  A NaN
    becomes (bits >> 16) | 0x0040.  Thread safe.
    """
    return _convert(array, FLOAT32, BF16)


def float16_to_float32(array):
    """float16_to_float32() returns float32 values of float16 ``array``,
    exactly.

    array: np.float16 or a CPU torch.float16 tensor, any shape and strides.
    Returns a new np.float32 array (torch.float32 tensor for a tensor).  A
    NaN comes back quiet: sign | 0x7fc00000 | (mantissa << 13).  Thread safe.
    """
    return _convert(array, FLOAT16, FLOAT32)


def float32_to_float16(array):
    """float32_to_float16() returns ``array`` rounded to float16, to nearest
    with ties to even (65520 and above in magnitude give +-inf; subnormal
    results are kept).

    array: np.float32 or a CPU torch.float32 tensor, any shape and strides.
    Returns a new np.float16 array (torch.float16 tensor for a tensor).  A
    NaN becomes sign | 0x7e00 | (mantissa >> 13), as x86 F16C does.  Thread
    safe.
    """
    return _convert(array, FLOAT32, FLOAT16)

"""numpy arrays and CPU torch tensors as libmoeperm views, without copies.

A ``View`` is what moeperm_tensor_create() needs: a dtype code, the extents,
non-negative strides in elements and the address of element (0, ..., 0).
numpy strides are in bytes and torch's are in elements; both become element
strides here, so any slice, transpose or broadcast of a numpy array, and any
CPU tensor with a storage offset, reaches the library as it is.

bf16 has no numpy dtype: a ``np.uint16`` array holds bf16 bit patterns (the
upper half of a float32), and results in bf16 come back as ``np.uint16``.  A
``torch.bfloat16`` tensor is bf16 and bf16 results for tensors are
``torch.bfloat16``.

Only layouts the library cannot address are copied, and only for inputs:
negative strides (a reversed view), strides or addresses that are not a
multiple of the element size (a numpy view at an odd byte offset, a
``torch.frombuffer`` tensor at an odd offset), and non-native byte order.
An ``out`` argument is never copied: such an ``out`` is refused.
"""
import sys

import numpy as np

from ._capi import BF16, FLOAT16, FLOAT32, INT8, INT32, INT64

_NUMPY_CODES = {np.dtype(np.float32): FLOAT32, np.dtype(np.float16): FLOAT16,
                np.dtype(np.uint16): BF16, np.dtype(np.int8): INT8,
                np.dtype(np.int32): INT32, np.dtype(np.int64): INT64}
_NUMPY_DTYPES = {code: dt for dt, code in _NUMPY_CODES.items()}

# What each code is called to a numpy user and to a torch user.
_NUMPY_WORDS = {FLOAT32: "float32", FLOAT16: "float16", BF16: "uint16 (bf16 bit patterns)",
                INT8: "int8", INT32: "int32", INT64: "int64"}
_TORCH_WORDS = {FLOAT32: "torch.float32", FLOAT16: "torch.float16", BF16: "torch.bfloat16",
                INT8: "torch.int8", INT32: "torch.int32", INT64: "torch.int64"}

NUMPY = "numpy"
TORCH = "torch"


class View:
    """One argument as libmoeperm sees it; ``owner`` is the array or tensor
    whose memory it is, kept alive for as long as the view."""
    __slots__ = ("name", "kind", "dtype", "shape", "strides", "ptr", "owner")

    def __init__(self, name, kind, dtype, shape, strides, ptr, owner):
        self.name, self.kind, self.dtype = name, kind, dtype
        self.shape, self.strides, self.ptr, self.owner = shape, strides, ptr, owner


def _torch_module(obj):
    """torch when obj is a torch.Tensor, else None; never imports torch (a
    tensor cannot exist before torch was imported)."""
    torch = sys.modules.get("torch")
    if torch is not None and isinstance(obj, torch.Tensor):
        return torch
    return None


def _torch_codes(torch):
    return {torch.float32: FLOAT32, torch.float16: FLOAT16, torch.bfloat16: BF16,
            torch.int8: INT8, torch.int32: INT32, torch.int64: INT64}


def _torch_dtype(torch, code):
    return {FLOAT32: torch.float32, FLOAT16: torch.float16, BF16: torch.bfloat16,
            INT8: torch.int8, INT32: torch.int32, INT64: torch.int64}[code]


def _accepted(codes, words):
    names = [words[c] for c in codes]
    return names[0] if len(names) == 1 else ", ".join(names[:-1]) + " or " + names[-1]


def _check_ndim(name, shape, ndim, layout):
    if ndim is not None and len(shape) != ndim:
        raise ValueError("%s has %d dims; it must have %d (%s)"
                         % (name, len(shape), ndim, layout))


def view(obj, name, codes, ndim=None, layout="", out=False):
    """A View of ``obj`` (a numpy array, a CPU torch.Tensor, or for inputs
    anything np.asarray takes) whose dtype is one of ``codes`` and whose rank
    is ``ndim`` (``layout`` describes it in messages).  ``out`` views must be
    writable and expressible without a copy.  Raises TypeError or ValueError
    with a sentence naming ``name``."""
    torch = _torch_module(obj)
    if torch is not None:
        return _torch_view(torch, obj, name, codes, ndim, layout, out)
    if not isinstance(obj, np.ndarray):
        if out:
            raise TypeError("%s is a %s; it must be a numpy array or a CPU torch.Tensor"
                            % (name, type(obj).__name__))
        obj = np.asarray(obj)
    return _numpy_view(obj, name, codes, ndim, layout, out)


def _numpy_view(arr, name, codes, ndim, layout, out):
    dt = arr.dtype
    code = _NUMPY_CODES.get(dt)
    if code is None and not dt.isnative:
        code = _NUMPY_CODES.get(dt.newbyteorder("="))
    if code not in codes:
        hint = ""
        if dt.name == "bfloat16" or dt == np.int16:
            hint = "; for bf16 pass the bit patterns as np.uint16 (array.view(np.uint16))"
        raise TypeError("%s dtype %s is not supported here; it must be %s%s"
                        % (name, dt.name, _accepted(codes, _NUMPY_WORDS), hint))
    _check_ndim(name, arr.shape, ndim, layout)
    itemsize = dt.itemsize
    strides = []
    expressible = dt.isnative
    for extent, stride in zip(arr.shape, arr.strides):
        if extent <= 1:
            # A stride that never steps says nothing about the layout.
            stride = 0
        if stride < 0 or stride % itemsize:
            expressible = False
            break
        strides.append(stride // itemsize)
    ptr = arr.ctypes.data
    if arr.size and ptr % itemsize:
        expressible = False
    if out:
        if not arr.flags.writeable:
            raise ValueError("%s is read-only" % name)
        if not expressible:
            raise ValueError(
                "%s has a layout libmoeperm cannot address without a copy (negative strides, "
                "strides or an address not a multiple of its %d-byte elements, or non-native "
                "byte order); pass an array with non-negative, element-aligned strides"
                % (name, itemsize))
    elif not expressible:
        # A fresh array is aligned, native and contiguous.
        arr = np.array(arr, dtype=dt.newbyteorder("="), order="C")
        return _numpy_view(arr, name, codes, ndim, layout, out)
    return View(name, NUMPY, code, tuple(arr.shape), tuple(strides), ptr or None, arr)


def torch_code(torch, t, name, codes):
    """The dtype code of tensor ``t``, one of ``codes``; else TypeError
    naming ``name`` and the dtypes it may have.  The CPU kernels' check,
    which the torch operators' Meta kernels make too."""
    code = _torch_codes(torch).get(t.dtype)
    if code not in codes:
        raise TypeError("%s dtype %s is not supported here; it must be %s"
                        % (name, t.dtype, _accepted(codes, _TORCH_WORDS)))
    return code


def _torch_view(torch, t, name, codes, ndim, layout, out):
    if t.device.type != "cpu":
        raise TypeError("%s is on device %s; moeperm computes on the CPU: pass a CPU tensor"
                        % (name, t.device))
    if t.layout != torch.strided:
        raise TypeError("%s has layout %s; only dense (torch.strided) tensors are supported"
                        % (name, t.layout))
    code = torch_code(torch, t, name, codes)
    shape = tuple(t.shape)
    _check_ndim(name, shape, ndim, layout)
    if out and t.requires_grad:
        raise ValueError("%s requires grad; autograd cannot follow a write into it" % name)
    ptr = t.data_ptr()
    if t.numel() and ptr % t.element_size():
        # torch strides count elements, so only the address can be off: a
        # tensor over a buffer at an odd byte offset.  The library reads and
        # writes whole aligned elements.
        if out:
            raise ValueError(
                "%s has a layout libmoeperm cannot address without a copy (an address not a "
                "multiple of its %d-byte elements); pass a tensor whose address is aligned"
                % (name, t.element_size()))
        # clone() allocates fresh, aligned storage.
        t = t.detach().clone(memory_format=torch.contiguous_format)
        ptr = t.data_ptr()
    strides = tuple(0 if extent <= 1 else s for extent, s in zip(shape, t.stride()))
    return View(name, TORCH, code, shape, strides, ptr or None, t)


def dtype_word(view):
    """The dtype of ``view`` as its user spells it."""
    return (_TORCH_WORDS if view.kind == TORCH else _NUMPY_WORDS)[view.dtype]


def empty(like, shape, code, name):
    """A new, uninitialised array of the kind of ``like`` (numpy or torch)
    and its View.  bf16 is np.uint16 for numpy, torch.bfloat16 for torch."""
    if like.kind == TORCH:
        torch = sys.modules["torch"]
        t = torch.empty(shape, dtype=_torch_dtype(torch, code))
        return t, _torch_view(torch, t, name, (code,), None, "", True)
    arr = np.empty(shape, dtype=_NUMPY_DTYPES[code])
    return arr, _numpy_view(arr, name, (code,), None, "", True)


def zeros(like, shape, code, name):
    """As empty(), but zeroed: numpy's calloc'd memory (pages the kernel
    zeroes on first touch), shared with the tensor for torch, so a large
    result costs no pass of its own."""
    arr = np.zeros(shape, dtype=_NUMPY_DTYPES[code])
    if like.kind == TORCH:
        torch = sys.modules["torch"]
        t = from_numpy(like, arr)
        return t, _torch_view(torch, t, name, (code,), None, "", True)
    return arr, _numpy_view(arr, name, (code,), None, "", True)


def as_numpy(v):
    """A numpy array over the memory of View ``v`` (no copy); bf16 as uint16."""
    if v.kind == NUMPY:
        return v.owner
    torch = sys.modules["torch"]
    t = v.owner.detach()
    if v.dtype == BF16:
        return t.view(torch.int16).numpy().view(np.uint16)
    return t.numpy()


def from_numpy(like, arr):
    """``arr`` (a numpy result) in the kind of View ``like``: itself for
    numpy, a tensor sharing its memory for torch (bf16 as torch.bfloat16)."""
    if like.kind == NUMPY:
        return arr
    torch = sys.modules["torch"]
    if arr.dtype == np.uint16:
        return torch.from_numpy(arr.view(np.int16)).view(torch.bfloat16)
    return torch.from_numpy(arr)


def numpy_dtype(code):
    return _NUMPY_DTYPES[code]


"""The operators and routing, numpy and torch level.

Each function turns its arguments into views (``_arrays``), allocates
results of the input's kind, and hands both to libmoeperm; the arithmetic is
the library's alone.
"""
import operator

import numpy as np

from . import _arrays, _capi
from ._arrays import view
from ._capi import BF16, FLOAT16, FLOAT32, INT32, INT64

MAX_TOP_K = 512  # MOEPERM_MAX_TOP_K
_INT32_MIN, _INT32_MAX = -(1 << 31), (1 << 31) - 1
_INT64_MIN, _INT64_MAX = -(1 << 63), (1 << 63) - 1
_FLOATS = (FLOAT32, FLOAT16, BF16)


def _integer(value, name):
    try:
        return operator.index(value)
    except TypeError:
        raise TypeError("%s is a %s; it must be an integer"
                        % (name, type(value).__name__)) from None


def _int32_indices(v, describe):
    """Contiguous int32 numpy indices from View ``v`` (INT32 or INT64):
    ``v``'s own memory when it is already that, else a checked copy.
    ``describe(position, value)`` words the refusal of a value that does
    not fit in int32."""
    arr = _arrays.as_numpy(v)
    if v.dtype == INT64 and arr.size:
        bad = (arr < _INT32_MIN) | (arr > _INT32_MAX)
        if bad.any():
            position = int(np.flatnonzero(bad.ravel())[0])
            raise _capi.refuse(describe(position, int(arr.ravel()[position])))
    if arr.dtype == np.int32 and arr.flags.c_contiguous:
        return arr
    return np.ascontiguousarray(arr, dtype=np.int32)


def _int32_view(v, describe):
    """A View of int32 indices with the values of View ``v``: ``v`` itself
    when it is int32, else a checked int32 copy (see _int32_indices)."""
    if v.dtype == INT32:
        return v
    arr = _int32_indices(v, describe)
    return _arrays.View(v.name, v.kind, INT32, arr.shape, tuple(s // 4 for s in arr.strides),
                        arr.ctypes.data or None, arr)


def moe_token_permute_grad(permuted_output_grad, sorted_indices, num_topk, padded_mode=False,
                           out=None):
    """moe_token_permute_grad() returns input_grad, the backward of the MoE
    token permutation, with the Ascend kernel's bits:

        input_grad[t, h] = sum over k = 0..num_topk-1 of
                           permuted_output_grad[sorted_indices[t*num_topk + k], h]

    summed in float32 in k order from the first slot, rounded once to the
    dtype of permuted_output_grad; slots whose index is >= its rows are
    skipped (dropped tokens).

    permuted_output_grad: [rows, hidden_size], a numpy array of np.float32,
        np.float16 or np.uint16 (np.uint16 arrays hold bf16 bit patterns), or
        a CPU torch.Tensor of torch.float32, torch.float16 or torch.bfloat16.
    sorted_indices: [tokens_num * num_topk], int32 or int64 (numpy or torch),
        a permutation of 0..tokens_num*num_topk-1; int64 is narrowed to an
        int32 copy (a value that does not fit is refused).
    num_topk: top_k, in [1, 512].
    padded_mode: must be False.
    out: optional [tokens_num, hidden_size] array or tensor of the same dtype
        to write into (it is returned); any non-negative strides.

    Returns input_grad [tokens_num, hidden_size] of the input's kind and
    dtype: numpy in, numpy out (bf16 as np.uint16); torch in, torch out (bf16
    as torch.bfloat16).  Strided inputs are read where they lie.  Raises
    moeperm.Error (status and sentence from the library) for values the
    operator refuses, TypeError or ValueError for arguments of the wrong
    type, dtype, rank or device; nothing is written then.  Releases the GIL
    while it computes; thread safe.
    """
    grad = view(permuted_output_grad, "permuted_output_grad", _FLOATS, 2, "[rows, hidden_size]")
    indices = view(sorted_indices, "sorted_indices", (INT32, INT64), 1, "[tokens_num * num_topk]")
    count = indices.shape[0]
    indices = _int32_view(indices, lambda i, value: "sorted_indices[%d] = %d is outside [0, %d]"
                          % (i, value, count - 1))
    top_k = _integer(num_topk, "num_topk")
    if not _INT64_MIN <= top_k <= _INT64_MAX:
        raise _capi.refuse("num_topk = %d is outside [1, %d]" % (top_k, MAX_TOP_K))
    if out is None:
        tokens = count // top_k if top_k >= 1 else 0
        result, out_view = _arrays.empty(grad, (tokens, grad.shape[1]), grad.dtype, "out")
    else:
        out_view = view(out, "out", _FLOATS, 2, "[tokens_num, hidden_size]", out=True)
        if out_view.dtype != grad.dtype:
            raise TypeError("out dtype %s differs from permuted_output_grad dtype %s"
                            % (_arrays.dtype_word(out_view), _arrays.dtype_word(grad)))
        result = out
    _capi.call(_capi.TOKEN_PERMUTE_GRAD, {
        "permuted_output_grad": grad, "sorted_indices": indices, "num_topk": top_k,
        "padded_mode": padded_mode, "out": out_view})
    return result


def route(expert_ids, num_experts=None):
    """route() returns the sorted_indices that MoeTokenPermute produces for a
    routing: the inverse of the stable argsort of the flattened expert ids,
    so sorted_indices[i] is the row of the permuted tokens that holds the
    copy made for entry i (token i // top_k, slot i % top_k).

    expert_ids: [tokens_num, top_k] (or any shape, read in row-major order)
        int32 or int64 expert ids in [0, num_experts), numpy or torch.
    num_experts: the number of experts; None means max(expert_ids) + 1.

    Returns int32 sorted_indices [tokens_num * top_k] of the input's kind.
    Raises moeperm.Error naming the first id out of range.  Thread safe.
    """
    ids_view = view(expert_ids, "expert_ids", (INT32, INT64))
    ids = _arrays.as_numpy(ids_view)
    n = ids.size
    if num_experts is None:
        experts = int(ids.max()) + 1 if n else 1
    else:
        experts = _integer(num_experts, "num_experts")
    if experts < 1:
        raise _capi.refuse("num_experts = %d is below 1" % experts)
    if experts > _INT32_MAX:
        if num_experts is None:
            experts = _INT32_MAX
        else:
            raise _capi.refuse("num_experts = %d is above %d, the most int32 expert ids name"
                               % (experts, _INT32_MAX))
    flat = _int32_indices(ids_view, lambda i, value: "expert_ids[%d] = %d is outside [0, %d]"
                          % (i, value, experts - 1)).reshape(-1)
    result = np.empty(n, dtype=np.int32)
    status = _capi.function("moeperm_route_sorted_indices")(
        flat.ctypes.data if n else None, n, experts,
        result.ctypes.data if n else None)
    if status != _capi.SUCCESS:
        raise _capi.error_for(status)
    return _arrays.from_numpy(ids_view, result)


def version():
    """version() returns the version of the loaded libmoeperm,
    "MAJOR.MINOR.PATCH"."""
    return _capi.version()


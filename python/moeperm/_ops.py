"""The operators and routing, numpy and torch level.

Each function turns its arguments into views (``_arrays``), allocates
results of the input's kind, and hands both to libmoeperm; the arithmetic is
the library's alone.
"""
import collections
import ctypes
import operator

import numpy as np

from . import _arrays, _capi
from ._arrays import view
from ._capi import BF16, FLOAT16, FLOAT32, INT32, INT64

MAX_TOP_K = 512  # MOEPERM_MAX_TOP_K
_INT32_MIN, _INT32_MAX = -(1 << 31), (1 << 31) - 1
_INT64_MIN, _INT64_MAX = -(1 << 63), (1 << 63) - 1
_FLOATS = (FLOAT32, FLOAT16, BF16)
_INT8 = _capi.INT8


class Chip(collections.namedtuple("Chip", ["ub_bytes", "vector_cores"])):
    """The two parameters of an Ascend chip that MoeTokenUnpermuteGrad's
    tiling reads, and so the order in which its probs_grad is summed:
    unified-buffer bytes of one vector core, and the vector (AIV) cores the
    tokens are spread over.  ``CHIP_A2`` is Atlas A2 (and A3), the default.
    ``Chip.by_name("Ascend910B3")`` is a named chip's (chip_names() lists
    them); a chip without a name is given by its two numbers."""
    __slots__ = ()

    @classmethod
    def by_name(cls, name):
        """Chip.by_name() returns the numbers of the chip ``name`` names, the
        vendor's SoC_version as chip_names() spells it ("Ascend910B4-1",
        "Ascend910_9382").  Raises ValueError for a name moeperm does not
        know (a chip without a name is Chip(ub_bytes, vector_cores)),
        TypeError for a name that is not a str."""
        if not isinstance(name, str):
            raise TypeError("chip name is a %s; it must be a str such as \"Ascend910B3\""
                            % type(name).__name__)
        chip = _capi.ChipStruct()
        try:
            encoded = name.encode()
        except UnicodeEncodeError:
            encoded = None
        if encoded is None or b"\0" in encoded or _capi.function("moeperm_chip_by_name")(
                encoded, ctypes.byref(chip)) != _capi.SUCCESS:
            raise ValueError("chip is \"%s\", which is not a chip moeperm knows (%s); a chip "
                             "without a name is moeperm.Chip(ub_bytes, vector_cores)"
                             % (name, ", ".join(chip_names())))
        return cls(chip.ub_bytes, chip.vector_cores)


CHIP_A2 = Chip(ub_bytes=196352, vector_cores=48)


def chip_names():
    """chip_names() returns the names of the Atlas A2 and A3 chips moeperm
    knows, in the order of moeperm_chip_names() (include/moeperm/moeperm.h),
    each a name Chip.by_name() and every ``chip=`` take."""
    return tuple(_capi.function("moeperm_chip_names")().decode().split())


def _integer(value, name):
    # bool is an int to Python, but True for a count is a mistake, not 1.
    if isinstance(value, (bool, np.bool_)):
        raise TypeError("%s is a bool; it must be an integer" % name)
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
    sorted_indices: [tokens_num * num_topk], int32 (numpy or torch),
        non-negative; entries >= rows are dropped slots, rows may be read
        more than once, and entries past tokens_num*num_topk are unread.
        int64 is refused, as the aclnn API and the `moeperm` tool refuse it.
    num_topk: top_k, in [1, 512], or -1, which means 1.
    padded_mode: ignored, as the Atlas A2/A3 device ignores it.
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
    indices = _sorted_indices_view(sorted_indices, layout="[tokens_num * num_topk]")
    top_k = _integer(num_topk, "num_topk")
    if not _INT64_MIN <= top_k <= _INT64_MAX:
        raise _capi.refuse("num_topk = %d is outside [1, %d]" % (top_k, MAX_TOP_K))
    if out is None:
        k = 1 if top_k == -1 else top_k  # the device takes num_topk = -1 as 1
        tokens = indices.shape[0] // k if k >= 1 else 0
        result, out_view = _arrays.empty(grad, (tokens, grad.shape[1]), grad.dtype, "out")
    else:
        out_view = view(out, "out", _FLOATS, 2, "[tokens_num, hidden_size]", out=True)
        if out_view.dtype != grad.dtype:
            raise TypeError("out dtype %s differs from permuted_output_grad dtype %s"
                            % (_arrays.dtype_word(out_view), _arrays.dtype_word(grad)))
        result = out
    _capi.call(_capi.TOKEN_PERMUTE_GRAD, {
        "permuted_output_grad": grad, "sorted_indices": indices, "num_topk": top_k,
        "padded_mode": _bool(padded_mode, "padded_mode"), "out": out_view})
    return result


def _int64_value(value, name):
    value = _integer(value, name)
    if not _INT64_MIN <= value <= _INT64_MAX:
        raise _capi.refuse("%s = %d does not fit in int64" % (name, value))
    return value


def _shape_value(value, name):
    """restore_shape as a tuple of ints (any sequence, torch.Size, None)."""
    if value is None:
        return None
    try:
        items = list(value)
    except TypeError:
        raise TypeError("%s is a %s; it must be a sequence of integers or None"
                        % (name, type(value).__name__)) from None
    return tuple(_int64_value(v, "%s[%d]" % (name, i)) for i, v in enumerate(items))


def list_indices(value, name="sorted_indices"):
    """``value`` as it is when it is an array or a tensor; a list (which has
    no dtype of its own) as int32, each value checked to fit."""
    if _arrays._torch_module(value) is not None or isinstance(value, np.ndarray):
        return value
    arr = np.asarray(value)
    if arr.dtype.kind not in "iu" or arr.dtype == np.int32:
        return arr
    v = view(arr, name, (INT32, INT64))
    return _int32_indices(v, lambda i, x: "%s[%d] = %d does not fit in int32" % (name, i, x))


def _sorted_indices_view(value, name="sorted_indices", layout="[tokens_num * top_k]"):
    # An int64 array or tensor goes to the library as it is, which refuses
    # it with the sentence and status the aclnn API and the tool give: the
    # operators take INT32.
    return view(list_indices(value, name), name, (INT32, INT64), 1, layout)


def _bool(value, name):
    if isinstance(value, (bool, np.bool_, int, np.integer)):
        return bool(value)
    raise TypeError("%s is a %s; it must be a bool" % (name, type(value).__name__))


def _same_dtype(out_view, like, like_name):
    if out_view.dtype != like.dtype:
        raise TypeError("%s dtype %s differs from %s dtype %s"
                        % (out_view.name, _arrays.dtype_word(out_view), like_name,
                           _arrays.dtype_word(like)))
    return out_view


def _out_pair(out, names):
    if not isinstance(out, (tuple, list)) or len(out) != len(names):
        raise TypeError("out is a %s; it must be a tuple (%s)"
                        % (type(out).__name__, ", ".join(names)))
    return out


def moe_token_permute(tokens, indices, num_out_tokens=None, padded_mode=False, *, out=None):
    """moe_token_permute() returns (permuted_tokens, sorted_indices), the MoE
    token dispatch of the Ascend kernel, with its bits: each token is copied
    once for each of its top_k expert slots, and the copies are grouped by
    expert in a stable sort of the flattened expert ids,

        sorted_indices[i] = the rank of entry i (token i // top_k, slot
                            i % top_k) in a stable ascending sort of indices
        permuted_tokens[sorted_indices[i]] = tokens[i // top_k]
                            for every i with sorted_indices[i] < num_out

    The copy moves bits unchanged (NaN payloads included); nothing is
    computed.

    tokens: [tokens_num, hidden_size], np.float32, np.float16, np.uint16
        (np.uint16 arrays hold bf16 bit patterns) or np.int8, or a CPU
        torch.Tensor of torch.float32, torch.float16, torch.bfloat16 or
        torch.int8; or of a higher rank, [tokens_num, ...], a token being
        the elements of the other dims in row-major order (permuted_tokens
        then has the tokens' shape with num_out rows).
    indices: [tokens_num, top_k] or [tokens_num] (top_k = 1), int32 or int64
        expert ids, numpy or torch; ids in [0, 16777214], or exactly the
        minimum or maximum of the dtype (sorted first or last).
    num_out_tokens: the rows of permuted_tokens.  None or 0 keeps every copy
        (tokens_num * top_k rows); a negative -d drops the last d; a
        positive n keeps n; the count is then clamped to [0, tokens_num *
        top_k].  Copies ranked at or past it are dropped.
    padded_mode: must be False (the device's tiling refuses True, status
        561002).
    out: optional (permuted_tokens, sorted_indices) to write into (and
        return), any non-negative strides; a keyword torch_npu does not have.

    Returns permuted_tokens [num_out, hidden_size] of the dtype of tokens
    and int32 sorted_indices [tokens_num * top_k], both numpy arrays for a
    numpy tokens (bf16 as np.uint16) and tensors for a tensor.  Strided
    inputs are read where they lie.  Raises moeperm.Error (status and
    sentence from the library) for values the operator refuses, TypeError
    or ValueError naming the argument for arguments of the wrong type,
    dtype, rank or device.  Releases the GIL while it computes; thread safe.
    """
    tokens_view = view(tokens, "tokens", _FLOATS + (_INT8,))
    if len(tokens_view.shape) < 2:
        raise ValueError("tokens has %d dims; it must have 2 ([tokens_num, hidden_size]) or more "
                         "([tokens_num, ...])" % len(tokens_view.shape))
    indices_view = view(indices, "indices", (INT32, INT64))
    if len(indices_view.shape) not in (1, 2):
        raise ValueError("indices has %d dims; it must have 2 ([tokens_num, top_k]) or 1 "
                         "([tokens_num])" % len(indices_view.shape))
    count = 0 if num_out_tokens is None else _int64_value(num_out_tokens, "num_out_tokens")
    mode = _bool(padded_mode, "padded_mode")
    slots = int(np.prod(indices_view.shape, dtype=np.int64))
    rows = count + slots if count <= 0 else count
    rows = min(max(rows, 0), slots)
    if out is None:
        permuted, permuted_view = _arrays.empty(tokens_view, (rows,) + tuple(tokens_view.shape[1:]),
                                                tokens_view.dtype, "permuted_tokens")
        sorted_indices, sorted_view = _arrays.empty(tokens_view, (slots,), INT32,
                                                    "sorted_indices")
    else:
        permuted, sorted_indices = _out_pair(out, ("permuted_tokens", "sorted_indices"))
        permuted_view = _same_dtype(view(permuted, "out[0]", _FLOATS + (_INT8,), None,
                                         "[num_out, hidden_size]", out=True), tokens_view,
                                    "tokens")
        sorted_view = view(sorted_indices, "out[1]", (INT32,), 1, "[tokens_num * top_k]",
                           out=True)
    _capi.call(_capi.TOKEN_PERMUTE, {
        "tokens": tokens_view, "indices": indices_view, "num_out_tokens": count,
        "padded_mode": mode, "permute_tokens_out": permuted_view,
        "sorted_indices_out": sorted_view})
    return permuted, sorted_indices


def moe_token_unpermute(permuted_tokens, sorted_indices, probs=None, padded_mode=False,
                        restore_shape=None, *, out=None):
    """moe_token_unpermute() returns unpermuted_tokens, the MoE combine of the
    Ascend kernel, with its bits.  For token n, column h and its top_k slots
    k, with s = sorted_indices[n*top_k + k]:

        slot k is included  iff  s < rows of permuted_tokens
                                 and (with probs) probs[n, k] != 0
        acc = x_0 * p_0 if slot 0 is included, else +0.0
        acc = acc + x_k * p_k   for k = 1 .. top_k-1 in order, when included
        unpermuted_tokens[n, h] = acc rounded once to the tokens' dtype

    where x_k = permuted_tokens[s, h] and p_k = probs[n, k] widened to
    float32, every product and sum one float32 operation rounded to nearest
    even (never fused).  Without probs top_k is 1 and nothing is multiplied.

    permuted_tokens: [rows, hidden_size], float32, float16 or bf16
        (np.uint16 arrays hold bf16 bit patterns; torch.bfloat16); any rows.
    sorted_indices: at least tokens_num * top_k entries (the rest unread),
        int32, non-negative: entries >= rows are dropped slots, and rows may
        be read by several slots (moe_token_permute returns a permutation);
        int64 is refused, as the aclnn API refuses it.
    probs: None, or [tokens_num, top_k] routing weights, float32, float16 or
        bf16, of any of the three dtypes whatever the tokens' dtype.
    padded_mode: ignored, as the Atlas A2/A3 device ignores it.
    restore_shape: None or a sequence of integers (torch.Size); accepted and
        ignored, as the Atlas A2/A3 kernel ignores it.
    out: optional [tokens_num, hidden_size] array or tensor of the tokens'
        dtype to write into (and return), any non-negative strides.

    Returns unpermuted_tokens [tokens_num, hidden_size] of the dtype and kind
    of permuted_tokens.  Raises as moe_token_permute() does; thread safe.
    """
    tokens_view = view(permuted_tokens, "permuted_tokens", _FLOATS, 2, "[rows, hidden_size]")
    indices_view = _sorted_indices_view(sorted_indices)
    probs_view = None
    if probs is not None:
        probs_view = view(probs, "probs", _FLOATS, 2, "[tokens_num, top_k]")
    mode = _bool(padded_mode, "padded_mode")
    shape = _shape_value(restore_shape, "restore_shape")
    tokens = probs_view.shape[0] if probs_view is not None else indices_view.shape[0]
    if out is None:
        result, out_view = _arrays.empty(tokens_view, (tokens, tokens_view.shape[1]),
                                         tokens_view.dtype, "out")
    else:
        result = out
        out_view = _same_dtype(view(out, "out", _FLOATS, 2, "[tokens_num, hidden_size]",
                                    out=True), tokens_view, "permuted_tokens")
    _capi.call(_capi.TOKEN_UNPERMUTE, {
        "permuted_tokens": tokens_view, "sorted_indices": indices_view, "probs": probs_view,
        "padded_mode": mode, "restore_shape": shape, "out": out_view})
    return result


def chip_of(chip):
    """``chip`` as a Chip: a chip name (Chip.by_name()), a Chip, or a pair of
    integers."""
    if isinstance(chip, Chip):
        return chip
    if isinstance(chip, str):
        return Chip.by_name(chip)
    words = ("chip is a %s; it must be a moeperm.Chip(ub_bytes, vector_cores), a chip's name "
             "(a str such as \"Ascend910B3\") or None for Atlas A2" % type(chip).__name__)
    if isinstance(chip, bytes):
        raise TypeError(words)
    try:
        ub_bytes, cores = chip
    except (TypeError, ValueError):
        raise TypeError(words) from None
    return Chip(ub_bytes, cores)


def _chip_struct(chip):
    ub_bytes, cores = chip_of(chip)
    return _capi.ChipStruct(_int64_value(ub_bytes, "chip ub_bytes"),
                            _int64_value(cores, "chip vector_cores"))


def moe_token_unpermute_grad(permuted_tokens, unpermuted_tokens_grad, sorted_indices,
                             probs=None, padded_mode=False, restore_shape=None, *, chip=None,
                             out=None):
    """moe_token_unpermute_grad() returns (permuted_tokens_grad, probs_grad),
    the backward of moe_token_unpermute() as the Ascend kernel computes it.
    With g = unpermuted_tokens_grad, for every slot i = n*top_k + k whose row
    s = sorted_indices[i] is below the rows of permuted_tokens:

        permuted_tokens_grad[s, h] = g[n, h] * probs[n, k], rounded once
                                     (with probs; a float32 product)
        permuted_tokens_grad[s, h] = g[n, h], bits unchanged   (without)

    and, with probs, probs_grad[n, k] is the dot product of row s of
    permuted_tokens (zeros for a dropped slot) with g[n], summed in the
    order of the kernel's tiling on ``chip`` and rounded once to the dtype
    of probs (docs/unpermute-grad.md).

    permuted_tokens: [rows, hidden_size], float32, float16 or bf16 (np.uint16
        arrays hold bf16 bit patterns; torch.bfloat16): the forward's input.
    unpermuted_tokens_grad: [tokens_num, hidden_size], the same dtype.
    sorted_indices: at least tokens_num * top_k entries (the rest unread),
        int32 (int64 is refused), non-negative; entries >= rows are dropped
        slots, and no two entries below rows may be equal (the device's cores
        would race to write that row).
    probs: None, or [tokens_num, top_k] float32, float16 or bf16.
    padded_mode: ignored, as the Atlas A2/A3 device ignores it.
    restore_shape: None or a sequence of integers; accepted and ignored.
    chip: the chip whose reduction order probs_grad follows: a chip's name
        ("Ascend910B3", one of moeperm.chip_names()) or a
        moeperm.Chip(ub_bytes, vector_cores) for a chip without one; None
        means moeperm.CHIP_A2, Atlas A2 (and A3).  Only probs_grad depends
        on it.
    out: optional (permuted_tokens_grad, probs_grad) to write into (and
        return); probs_grad None exactly when probs is None.

    Returns permuted_tokens_grad [rows, hidden_size] (the tokens' dtype) and
    probs_grad [tokens_num, top_k] (the dtype of probs), or None for
    probs_grad when probs is None; of the kind of permuted_tokens.  Every row
    of permuted_tokens_grad is named by exactly one slot and written; a
    fresh result starts zeroed, so a row that no slot names would read
    zeros.  Raises as moe_token_permute() does; thread safe.
    """
    tokens_view = view(permuted_tokens, "permuted_tokens", _FLOATS, 2, "[rows, hidden_size]")
    grad_view = view(unpermuted_tokens_grad, "unpermuted_tokens_grad", _FLOATS, 2,
                     "[tokens_num, hidden_size]")
    indices_view = _sorted_indices_view(sorted_indices)
    probs_view = None
    if probs is not None:
        probs_view = view(probs, "probs", _FLOATS, 2, "[tokens_num, top_k]")
    mode = _bool(padded_mode, "padded_mode")
    shape = _shape_value(restore_shape, "restore_shape")
    chip_struct = None if chip is None else _chip_struct(chip)
    probs_grad, probs_grad_view = None, None
    if out is None:
        tokens_grad, tokens_grad_view = _arrays.zeros(tokens_view, tokens_view.shape,
                                                      tokens_view.dtype, "permuted_tokens_grad")
        if probs_view is not None:
            probs_grad, probs_grad_view = _arrays.zeros(tokens_view, probs_view.shape,
                                                        probs_view.dtype, "probs_grad")
    else:
        tokens_grad, probs_grad = _out_pair(out, ("permuted_tokens_grad", "probs_grad"))
        tokens_grad_view = _same_dtype(view(tokens_grad, "out[0]", _FLOATS, 2,
                                            "[rows, hidden_size]", out=True), tokens_view,
                                       "permuted_tokens")
        if (probs_grad is None) != (probs_view is None):
            raise ValueError("out[1] must be None exactly when probs is None")
        if probs_view is not None:
            probs_grad_view = _same_dtype(view(probs_grad, "out[1]", _FLOATS, 2,
                                               "[tokens_num, top_k]", out=True), probs_view,
                                          "probs")
    configure = None
    if chip_struct is not None:
        set_chip = _capi.function("moeperm_executor_set_chip")

        def configure(executor):
            return set_chip(executor, ctypes.byref(chip_struct))
    _capi.call(_capi.TOKEN_UNPERMUTE_GRAD, {
        "permuted_tokens": tokens_view, "unpermuted_tokens_grad": grad_view,
        "sorted_indices": indices_view, "probs": probs_view, "padded_mode": mode,
        "restore_shape": shape, "permuted_tokens_grad_out": tokens_grad_view,
        "probs_grad_out": probs_grad_view}, configure=configure)
    return tokens_grad, probs_grad


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


"""torch_npu's MoE token operators as torch operators, ``torch.ops.moeperm.*``.

Importing this module (``moeperm.torch`` and ``moeperm.torch_npu`` do)
registers in the namespace ``moeperm``, with torch_npu's names and schemas
(op-plugin's op_plugin_functions.yaml), each with a CPU kernel (libmoeperm,
through the package's ctypes layer, reading strided tensors where they lie),
a Meta kernel (shapes and dtypes only: no data is touched; the arguments'
dtypes and ranks are checked by the code the CPU kernel checks them with, so
both refuse alike), and an Autograd kernel:

    npu_moe_token_permute(Tensor tokens, Tensor indices, int? num_out_tokens=None,
                          bool padded_mode=False) -> (Tensor, Tensor)
    npu_moe_token_unpermute(Tensor permuted_tokens, Tensor sorted_indices,
                            Tensor? probs=None, bool padded_mode=False,
                            int[]? restore_shape=None, *, int[]? chip=None) -> Tensor
    npu_moe_token_permute_grad(Tensor tokens, Tensor grad_permuted_tokens,
                               Tensor indices, Tensor sorted_indices,
                               bool padded_mode=False) -> Tensor
    npu_moe_token_permute_grad_v2(Tensor grad_permuted_tokens, Tensor sorted_indices,
                                  int tokens_size_0, ScalarType tokens_dtype,
                                  int num_topK, bool padded_mode=False) -> Tensor
    npu_moe_token_unpermute_grad(Tensor permuted_tokens, Tensor grad_unpermuted_tokens,
                                 Tensor sorted_indices, Tensor? probs=None,
                                 bool padded_mode=False, int[]? restore_shape=None,
                                 *, int[]? chip=None) -> (Tensor, Tensor)
    npu_moe_token_unpermute_grad_v2(Tensor grad_unpermuted_tokens, Tensor sorted_indices,
                                    int permuted_tokens_size_0,
                                    ScalarType permuted_tokens_dtype, Tensor? probs=None,
                                    bool padded_mode=False, int[]? restore_shape=None,
                                    Tensor? permuted_tokens=None, *, int[]? chip=None)
                                    -> (Tensor, Tensor)

``chip`` (``[ub_bytes, vector_cores]``, a keyword torch_npu does not have)
picks the chip whose reduction order the gradient of probs follows; None is
Atlas A2.  An operator's schema holds numbers only; the Python functions
(moeperm.torch, moeperm.torch_npu) take a chip's name too and pass its
numbers.  Each also has an ``.out`` overload that writes into tensors the
caller made (the C API's output names, as keywords: ``permute_tokens_out``
and ``sorted_indices_out``; ``out``; ``permuted_tokens_grad_out`` and
``probs_grad_out``), for loops that should not pay for fresh results.

Autograd follows torch_npu's derivatives.yaml: the backward of
npu_moe_token_permute is npu_moe_token_permute_grad_v2 of the full
sorted_indices with num_topK = K, and that of npu_moe_token_unpermute is
npu_moe_token_unpermute_grad_v2, which gives the gradients of permuted_tokens
and probs (and, as torch_npu's does, returns an empty one and a zero one
when permuted_tokens has no rows, a shape the device's operator refuses).
The grad operators themselves have no derivative (no double backward), and
the ``.out`` overloads refuse inputs that require grad, as ATen's out=
functions do.

Sizes follow torch_npu's host code: npu_moe_token_permute keeps
``min(num_out_tokens, N*K)`` rows for a positive count and ``num_out_tokens +
N*K`` otherwise, so a count below -N*K fails as torch_npu fails, with torch's
RuntimeError about a negative dimension, before anything is computed.
"""
import contextlib
import re

import torch

from . import _arrays, _capi, _ops

NAMESPACE = "moeperm"

_PERMUTE_ARGS = "Tensor tokens, Tensor indices, int? num_out_tokens=None, bool padded_mode=False"
_UNPERMUTE_ARGS = ("Tensor permuted_tokens, Tensor sorted_indices, Tensor? probs=None, "
                   "bool padded_mode=False, int[]? restore_shape=None, *, int[]? chip=None")
_PERMUTE_GRAD_ARGS = ("Tensor tokens, Tensor grad_permuted_tokens, Tensor indices, "
                      "Tensor sorted_indices, bool padded_mode=False")
_PERMUTE_GRAD_V2_ARGS = ("Tensor grad_permuted_tokens, Tensor sorted_indices, int tokens_size_0, "
                         "ScalarType tokens_dtype, int num_topK, bool padded_mode=False")
_UNPERMUTE_GRAD_ARGS = ("Tensor permuted_tokens, Tensor grad_unpermuted_tokens, "
                        "Tensor sorted_indices, Tensor? probs=None, bool padded_mode=False, "
                        "int[]? restore_shape=None, *, int[]? chip=None")
_UNPERMUTE_GRAD_V2_ARGS = ("Tensor grad_unpermuted_tokens, Tensor sorted_indices, "
                           "int permuted_tokens_size_0, ScalarType permuted_tokens_dtype, "
                           "Tensor? probs=None, bool padded_mode=False, "
                           "int[]? restore_shape=None, Tensor? permuted_tokens=None, "
                           "*, int[]? chip=None")
_ONE_OUT = "Tensor(a!) out) -> Tensor(a!)"
_TWO_OUTS = "Tensor(a!) %s, Tensor(b!) %s) -> (Tensor(a!), Tensor(b!))"


def _out_schema(args, outs):
    return "(" + args + (", " if "*" in args else ", *, ") + outs


SCHEMAS = {
    "npu_moe_token_permute": "(%s) -> (Tensor, Tensor)" % _PERMUTE_ARGS,
    "npu_moe_token_permute.out": _out_schema(
        _PERMUTE_ARGS, _TWO_OUTS % ("permute_tokens_out", "sorted_indices_out")),
    "npu_moe_token_unpermute": "(%s) -> Tensor" % _UNPERMUTE_ARGS,
    "npu_moe_token_unpermute.out": _out_schema(_UNPERMUTE_ARGS, _ONE_OUT),
    "npu_moe_token_permute_grad": "(%s) -> Tensor" % _PERMUTE_GRAD_ARGS,
    "npu_moe_token_permute_grad.out": _out_schema(_PERMUTE_GRAD_ARGS, _ONE_OUT),
    "npu_moe_token_permute_grad_v2": "(%s) -> Tensor" % _PERMUTE_GRAD_V2_ARGS,
    "npu_moe_token_permute_grad_v2.out": _out_schema(_PERMUTE_GRAD_V2_ARGS, _ONE_OUT),
    "npu_moe_token_unpermute_grad": "(%s) -> (Tensor, Tensor)" % _UNPERMUTE_GRAD_ARGS,
    "npu_moe_token_unpermute_grad.out": _out_schema(
        _UNPERMUTE_GRAD_ARGS, _TWO_OUTS % ("permuted_tokens_grad_out", "probs_grad_out")),
    "npu_moe_token_unpermute_grad_v2": "(%s) -> (Tensor, Tensor)" % _UNPERMUTE_GRAD_V2_ARGS,
    "npu_moe_token_unpermute_grad_v2.out": _out_schema(
        _UNPERMUTE_GRAD_V2_ARGS, _TWO_OUTS % ("permuted_tokens_grad_out", "probs_grad_out")),
}


def _torch_version():
    match = re.match(r"(\d+)\.(\d+)", torch.__version__)
    return (int(match.group(1)), int(match.group(2))) if match else (0, 0)


TORCH_VERSION = _torch_version()

# The one place where torch versions differ for this module: how to dispatch
# below the Autograd keys (an Autograd kernel re-dispatches to the CPU or
# Meta kernel that way).  torch 1.x binds _AutoDispatchBelowAutograd as a
# plain guard object, active while it lives (``with`` raises TypeError);
# torch 2.x binds it as a context manager.  The rest (Library "DEF", define,
# impl for CPU, Meta and Autograd) is the same API in both; torch 2.4's
# custom_op, register_fake and register_autograd are not needed, and a Meta
# kernel also serves FakeTensor and torch.compile there.
if TORCH_VERSION >= (2, 0):
    def _below_autograd():
        return torch._C._AutoDispatchBelowAutograd()
else:
    @contextlib.contextmanager
    def _below_autograd():
        guard = torch._C._AutoDispatchBelowAutograd()
        try:
            yield guard
        finally:
            del guard


def _op(name, overload="default"):
    return getattr(getattr(torch.ops.moeperm, name), overload)


# -- sizes: shared by the CPU and the Meta kernels ----------------------

def _check(condition, message):
    if not condition:
        raise _capi.refuse(message)


def _dims(t, name, allowed):
    if t.dim() not in allowed:
        raise _capi.refuse("%s has %d dims; it must have %s"
                           % (name, t.dim(), " or ".join(str(d) for d in allowed)))


def _new(like, shape, dtype):
    # torch_npu allocates its outputs with at::empty, whose check of the
    # sizes raises "Trying to create tensor with negative dimension ...".
    return torch.empty(shape, dtype=dtype, device=like.device)


def _fit(out, shape, dtype, name):
    """``out`` checked to be a result of ``shape`` and ``dtype``; an empty
    tensor is resized to it, as ATen does with out= tensors."""
    if min(shape, default=0) < 0:
        torch.empty(shape, device="meta")  # the error a fresh result of that size raises
    if out.dtype != dtype:
        raise TypeError("%s dtype %s differs from the result's dtype %s" % (name, out.dtype, dtype))
    if out.device != torch.device("meta") and out.device.type != "cpu":
        raise TypeError("%s is on device %s; pass a CPU tensor" % (name, out.device))
    if tuple(out.shape) != tuple(shape):
        if out.numel() != 0:
            raise ValueError("%s has shape %s; the result has shape %s"
                             % (name, list(out.shape), list(shape)))
        out.resize_(shape)
    return out


def _permute_rows(indices, num_out_tokens):
    slots = indices.numel()
    v = 0 if num_out_tokens is None else num_out_tokens
    return min(v, slots) if v > 0 else v + slots


# The dtypes the CPU kernels take (the numpy level's, moeperm._ops), checked
# here so that the Meta kernels refuse what the CPU kernels refuse, with the
# same TypeError.
_FLOATS = _ops._FLOATS
_TOKENS = _FLOATS + (_ops._INT8,)
_INDICES = (_capi.INT32, _capi.INT64)


def _arg(t, name, codes, dims):
    """Tensor ``t`` checked as the CPU kernel checks it: a dtype of
    ``codes`` (TypeError) and a rank of ``dims`` (ValueError)."""
    _arrays.torch_code(torch, t, name, codes)
    _dims(t, name, dims)


def _sorted_indices_arg(sorted_indices, dims):
    _arg(sorted_indices, "sorted_indices", _INDICES, dims)
    # The library's refusal (core/checks.c), which a Meta kernel never
    # reaches: the operators take INT32, as the aclnn API does.
    _check(sorted_indices.dtype != torch.int64,
           "the device refuses sorted_indices dtype 9 (int64): it takes INT32 (3)")


def _same_dtype(dtype, dtype_name, t, name):
    if t.dtype != dtype:
        raise TypeError("%s %s differs from %s dtype %s; they must be equal"
                        % (dtype_name, dtype, name, t.dtype))


def _permute_shapes(tokens, indices, num_out_tokens):
    _arg(tokens, "tokens", _TOKENS, (2,))
    _arg(indices, "indices", _INDICES, (1, 2))
    rows = _permute_rows(indices, num_out_tokens)
    return rows, ((rows, tokens.size(1)), tokens.dtype), ((indices.numel(),), torch.int32)


def _unpermute_shape(permuted_tokens, sorted_indices, probs):
    _arg(permuted_tokens, "permuted_tokens", _FLOATS, (2,))
    _sorted_indices_arg(sorted_indices, (1,))
    top_k = 1
    if probs is not None:
        _arg(probs, "probs", _FLOATS, (2,))
        top_k = probs.size(1)
    _check(top_k > 0, "probs has 0 columns; top_k must be positive")
    return (sorted_indices.size(0) // top_k, permuted_tokens.size(-1)), permuted_tokens.dtype


def _permute_grad_top_k(indices):
    _dims(indices, "indices", (1, 2))
    return 1 if indices.dim() == 1 else indices.size(1)


def _permute_grad_shape(grad_permuted_tokens, sorted_indices, tokens_size_0, tokens_dtype):
    _arg(grad_permuted_tokens, "grad_permuted_tokens", _FLOATS, (2,))
    _sorted_indices_arg(sorted_indices, (1, 2))
    # The gradient of tokens has the gradient's dtype (the operator's out).
    _same_dtype(tokens_dtype, "tokens_dtype", grad_permuted_tokens, "grad_permuted_tokens")
    return (tokens_size_0, grad_permuted_tokens.size(1)), tokens_dtype


def _unpermute_grad_shapes(grad, sorted_indices, rows, dtype, probs, permuted_tokens=None):
    """The results' shapes and dtypes of npu_moe_token_unpermute_grad_v2
    (``rows`` and ``dtype`` those of permuted_tokens), its arguments checked
    as the CPU kernel checks them."""
    _arg(grad, "grad_unpermuted_tokens", _FLOATS, (2,))
    _sorted_indices_arg(sorted_indices, (1,))
    if probs is not None:
        _arg(probs, "probs", _FLOATS, (2,))
    if permuted_tokens is None:
        _same_dtype(dtype, "permuted_tokens_dtype", grad, "grad_unpermuted_tokens")
    else:
        _arg(permuted_tokens, "permuted_tokens", _FLOATS, (2,))
        _same_dtype(permuted_tokens.dtype, "permuted_tokens dtype", grad, "grad_unpermuted_tokens")
        _same_dtype(dtype, "permuted_tokens_dtype", permuted_tokens, "permuted_tokens")
        _check(permuted_tokens.size(0) == rows,
               "permuted_tokens has %d rows and permuted_tokens_size_0 is %d; they must be equal"
               % (permuted_tokens.size(0), rows))
        _check(permuted_tokens.size(1) == grad.size(1),
               "permuted_tokens has %d columns and grad_unpermuted_tokens %d; they must be equal"
               % (permuted_tokens.size(1), grad.size(1)))
    tokens_grad = ((rows, grad.size(1)), dtype)
    # Without probs torch_npu returns a 0-dim gradient of probs (of the
    # gradient's dtype) beside the gradient of the tokens.
    probs_grad = (tuple(probs.shape), probs.dtype) if probs is not None else ((), grad.dtype)
    return tokens_grad, probs_grad


def chip_list(chip):
    """``chip`` (None, a chip's name such as "Ascend910B3", a moeperm.Chip
    or a pair of integers) as the operators' ``int[]? chip`` argument, which
    holds the chip's numbers [ub_bytes, vector_cores]."""
    if chip is None:
        return None
    ub_bytes, vector_cores = _ops.chip_of(chip)
    return [_ops._integer(ub_bytes, "chip ub_bytes"),
            _ops._integer(vector_cores, "chip vector_cores")]


def _chip(chip):
    if chip is None:
        return None
    _check(len(chip) == 2, "chip has %d entries; it must be [ub_bytes, vector_cores]" % len(chip))
    return _ops.Chip(chip[0], chip[1])


def restore_shape_list(restore_shape):
    """``restore_shape`` (None or a sequence of integers, a torch.Size) as
    the operators' ``int[]? restore_shape`` argument; TypeError naming it
    for anything else."""
    shape = _ops._shape_value(restore_shape, "restore_shape")
    return None if shape is None else list(shape)


# -- the kernels ----------------------------------------------------------

def _permute_outputs(tokens, indices, num_out_tokens):
    _, (p_shape, p_dtype), (s_shape, s_dtype) = _permute_shapes(tokens, indices, num_out_tokens)
    return _new(tokens, p_shape, p_dtype), _new(tokens, s_shape, s_dtype)


def _permute_cpu(tokens, indices, num_out_tokens=None, padded_mode=False):
    permuted, sorted_indices = _permute_outputs(tokens, indices, num_out_tokens)
    return _permute_out_cpu(tokens, indices, num_out_tokens, padded_mode,
                            permute_tokens_out=permuted, sorted_indices_out=sorted_indices)


def _permute_meta(tokens, indices, num_out_tokens=None, padded_mode=False):
    return _permute_outputs(tokens, indices, num_out_tokens)


def _permute_out_meta(tokens, indices, num_out_tokens=None, padded_mode=False, *,
                      permute_tokens_out, sorted_indices_out):
    _, (p_shape, p_dtype), (s_shape, s_dtype) = _permute_shapes(tokens, indices, num_out_tokens)
    return (_fit(permute_tokens_out, p_shape, p_dtype, "permute_tokens_out"),
            _fit(sorted_indices_out, s_shape, s_dtype, "sorted_indices_out"))


def _permute_out_cpu(tokens, indices, num_out_tokens=None, padded_mode=False, *,
                     permute_tokens_out, sorted_indices_out):
    rows = _permute_rows(indices, num_out_tokens)
    _permute_out_meta(tokens, indices, num_out_tokens, padded_mode,
                      permute_tokens_out=permute_tokens_out, sorted_indices_out=sorted_indices_out)
    # The library gets the count torch_npu hands aclnn: 0 there means "keep
    # every copy", so num_out_tokens = -N*K fails on the shape of the
    # result, as on the device.
    _ops.moe_token_permute(tokens, indices, rows, padded_mode,
                           out=(permute_tokens_out, sorted_indices_out))
    return permute_tokens_out, sorted_indices_out


def _unpermute_meta(permuted_tokens, sorted_indices, probs=None, padded_mode=False,
                    restore_shape=None, *, chip=None):
    shape, dtype = _unpermute_shape(permuted_tokens, sorted_indices, probs)
    return _new(permuted_tokens, shape, dtype)


def _unpermute_cpu(permuted_tokens, sorted_indices, probs=None, padded_mode=False,
                   restore_shape=None, *, chip=None):
    out = _unpermute_meta(permuted_tokens, sorted_indices, probs, padded_mode, restore_shape)
    return _unpermute_out_cpu(permuted_tokens, sorted_indices, probs, padded_mode, restore_shape,
                              chip=chip, out=out)


def _unpermute_out_meta(permuted_tokens, sorted_indices, probs=None, padded_mode=False,
                        restore_shape=None, *, chip=None, out):
    shape, dtype = _unpermute_shape(permuted_tokens, sorted_indices, probs)
    return _fit(out, shape, dtype, "out")


def _unpermute_out_cpu(permuted_tokens, sorted_indices, probs=None, padded_mode=False,
                       restore_shape=None, *, chip=None, out):
    _unpermute_out_meta(permuted_tokens, sorted_indices, probs, padded_mode, restore_shape,
                        chip=chip, out=out)
    _chip(chip)
    return _ops.moe_token_unpermute(permuted_tokens, sorted_indices, probs, padded_mode,
                                    restore_shape_list(restore_shape), out=out)


def _permute_grad_v2_meta(grad_permuted_tokens, sorted_indices, tokens_size_0, tokens_dtype,
                          num_topK, padded_mode=False):
    shape, dtype = _permute_grad_shape(grad_permuted_tokens, sorted_indices, tokens_size_0,
                                       tokens_dtype)
    return _new(grad_permuted_tokens, shape, dtype)


def _permute_grad_v2_out_meta(grad_permuted_tokens, sorted_indices, tokens_size_0, tokens_dtype,
                              num_topK, padded_mode=False, *, out):
    shape, dtype = _permute_grad_shape(grad_permuted_tokens, sorted_indices, tokens_size_0,
                                       tokens_dtype)
    return _fit(out, shape, dtype, "out")


def _permute_grad_v2_out_cpu(grad_permuted_tokens, sorted_indices, tokens_size_0, tokens_dtype,
                             num_topK, padded_mode=False, *, out):
    _permute_grad_v2_out_meta(grad_permuted_tokens, sorted_indices, tokens_size_0, tokens_dtype,
                              num_topK, padded_mode, out=out)
    # sorted_indices may be [N, K] for torch_npu's size function; the
    # operator reads it flat.
    return _ops.moe_token_permute_grad(grad_permuted_tokens, sorted_indices.reshape(-1), num_topK,
                                       padded_mode, out=out)


def _permute_grad_v2_cpu(grad_permuted_tokens, sorted_indices, tokens_size_0, tokens_dtype,
                         num_topK, padded_mode=False):
    out = _permute_grad_v2_meta(grad_permuted_tokens, sorted_indices, tokens_size_0, tokens_dtype,
                                num_topK, padded_mode)
    return _permute_grad_v2_out_cpu(grad_permuted_tokens, sorted_indices, tokens_size_0,
                                    tokens_dtype, num_topK, padded_mode, out=out)


def _v1_permute_grad(kernel):
    """npu_moe_token_permute_grad's kernel from _v2's: torch_npu takes the
    rows and dtype from tokens and num_topK from the rank of indices."""
    def v1(tokens, grad_permuted_tokens, indices, sorted_indices, padded_mode=False, **out):
        _dims(tokens, "tokens", (2,))
        _arg(grad_permuted_tokens, "grad_permuted_tokens", _FLOATS, (2,))
        _same_dtype(tokens.dtype, "tokens dtype", grad_permuted_tokens, "grad_permuted_tokens")
        return kernel(grad_permuted_tokens, sorted_indices, tokens.size(0), tokens.dtype,
                      _permute_grad_top_k(indices), padded_mode, **out)
    return v1


def _unpermute_grad_v2_out_meta(grad_unpermuted_tokens, sorted_indices, permuted_tokens_size_0,
                                permuted_tokens_dtype, probs=None, padded_mode=False,
                                restore_shape=None, permuted_tokens=None, *, chip=None,
                                permuted_tokens_grad_out, probs_grad_out):
    (t_shape, t_dtype), (p_shape, p_dtype) = _unpermute_grad_shapes(
        grad_unpermuted_tokens, sorted_indices, permuted_tokens_size_0, permuted_tokens_dtype,
        probs, permuted_tokens)
    return (_fit(permuted_tokens_grad_out, t_shape, t_dtype, "permuted_tokens_grad_out"),
            _fit(probs_grad_out, p_shape, p_dtype, "probs_grad_out"))


def _unpermute_grad_v2_meta(grad_unpermuted_tokens, sorted_indices, permuted_tokens_size_0,
                            permuted_tokens_dtype, probs=None, padded_mode=False,
                            restore_shape=None, permuted_tokens=None, *, chip=None):
    (t_shape, t_dtype), (p_shape, p_dtype) = _unpermute_grad_shapes(
        grad_unpermuted_tokens, sorted_indices, permuted_tokens_size_0, permuted_tokens_dtype,
        probs, permuted_tokens)
    return (_new(grad_unpermuted_tokens, t_shape, t_dtype),
            _new(grad_unpermuted_tokens, p_shape, p_dtype))


def _unpermute_grad_v2_out_cpu(grad_unpermuted_tokens, sorted_indices, permuted_tokens_size_0,
                               permuted_tokens_dtype, probs=None, padded_mode=False,
                               restore_shape=None, permuted_tokens=None, *, chip=None,
                               permuted_tokens_grad_out, probs_grad_out):
    _unpermute_grad_v2_out_meta(grad_unpermuted_tokens, sorted_indices, permuted_tokens_size_0,
                                permuted_tokens_dtype, probs, padded_mode, restore_shape,
                                permuted_tokens, chip=chip,
                                permuted_tokens_grad_out=permuted_tokens_grad_out,
                                probs_grad_out=probs_grad_out)
    if permuted_tokens_size_0 == 0:
        # torch_npu returns here, as aclnnMoeTokenUnpermuteGrad refuses a
        # permuted_tokens of no rows: an empty gradient of permuted_tokens,
        # and a zero gradient of probs (no row contributed to the output).
        probs_grad_out.zero_()
        return permuted_tokens_grad_out, probs_grad_out
    if permuted_tokens is None:
        # Without probs the operator reads only the shape of permuted_tokens
        # (nothing is summed): a zero-stride view of one zero stands in.
        _check(probs is None, "permuted_tokens is None but probs is given: the gradient of probs "
                              "needs the forward's permuted_tokens")
        permuted_tokens = torch.zeros((), dtype=permuted_tokens_dtype).expand(
            permuted_tokens_size_0, grad_unpermuted_tokens.size(1))
    _ops.moe_token_unpermute_grad(
        permuted_tokens, grad_unpermuted_tokens, sorted_indices, probs, padded_mode,
        restore_shape_list(restore_shape), chip=_chip(chip),
        out=(permuted_tokens_grad_out, probs_grad_out if probs is not None else None))
    if probs is None:
        probs_grad_out.zero_()
    return permuted_tokens_grad_out, probs_grad_out


def _unpermute_grad_v2_cpu(grad_unpermuted_tokens, sorted_indices, permuted_tokens_size_0,
                           permuted_tokens_dtype, probs=None, padded_mode=False,
                           restore_shape=None, permuted_tokens=None, *, chip=None):
    (t_shape, t_dtype), (p_shape, p_dtype) = _unpermute_grad_shapes(
        grad_unpermuted_tokens, sorted_indices, permuted_tokens_size_0, permuted_tokens_dtype,
        probs, permuted_tokens)
    # Zeroed, so that a row no slot names reads zeros (the device leaves
    # such rows unwritten, whatever the memory held).
    tokens_grad = torch.zeros(t_shape, dtype=t_dtype)
    probs_grad = torch.zeros(p_shape, dtype=p_dtype)
    return _unpermute_grad_v2_out_cpu(
        grad_unpermuted_tokens, sorted_indices, permuted_tokens_size_0, permuted_tokens_dtype,
        probs, padded_mode, restore_shape, permuted_tokens, chip=chip,
        permuted_tokens_grad_out=tokens_grad, probs_grad_out=probs_grad)


def _v1_unpermute_grad(kernel):
    """npu_moe_token_unpermute_grad's kernel from _v2's: the rows and dtype
    of the gradient are those of permuted_tokens."""
    def v1(permuted_tokens, grad_unpermuted_tokens, sorted_indices, probs=None,
           padded_mode=False, restore_shape=None, *, chip=None, **out):
        # The rest of permuted_tokens is checked with the other arguments.
        _arg(permuted_tokens, "permuted_tokens", _FLOATS, (2,))
        return kernel(grad_unpermuted_tokens, sorted_indices, permuted_tokens.size(0),
                      permuted_tokens.dtype, probs, padded_mode, restore_shape, permuted_tokens,
                      chip=chip, **out)
    return v1


# -- autograd -------------------------------------------------------------

class MoeTokenPermute(torch.autograd.Function):
    """npu_moe_token_permute forward; backward npu_moe_token_permute_grad_v2
    of the gradient of permuted_tokens, the full sorted_indices and
    num_topK = K (torch_npu's derivatives.yaml)."""

    @staticmethod
    def forward(ctx, tokens, indices, num_out_tokens, padded_mode):
        with _below_autograd():
            permuted, sorted_indices = _op("npu_moe_token_permute")(tokens, indices,
                                                                     num_out_tokens, padded_mode)
        ctx.tokens_size_0, ctx.tokens_dtype = tokens.size(0), tokens.dtype
        ctx.num_topk = _permute_grad_top_k(indices)
        ctx.padded_mode = padded_mode
        ctx.save_for_backward(sorted_indices)
        ctx.mark_non_differentiable(sorted_indices)
        return permuted, sorted_indices

    @staticmethod
    def backward(ctx, permuted_tokens_grad, sorted_indices_grad):
        if not ctx.needs_input_grad[0]:
            return None, None, None, None
        (sorted_indices,) = ctx.saved_tensors
        # Copies dropped by num_out_tokens have no row of the gradient: the
        # operator skips slots at or past its rows.
        tokens_grad = _op("npu_moe_token_permute_grad_v2")(
            permuted_tokens_grad, sorted_indices, ctx.tokens_size_0, ctx.tokens_dtype,
            ctx.num_topk, ctx.padded_mode)
        return tokens_grad, None, None, None


class MoeTokenUnpermute(torch.autograd.Function):
    """npu_moe_token_unpermute forward; backward
    npu_moe_token_unpermute_grad_v2, the gradients of permuted_tokens and
    probs (torch_npu's derivatives.yaml)."""

    @staticmethod
    def forward(ctx, permuted_tokens, sorted_indices, probs, padded_mode, restore_shape, chip):
        # apply() is public: it takes what moeperm.torch's function takes (a
        # chip's name, a Chip, a torch.Size), which the schema's int[] do not.
        restore_shape, chip = restore_shape_list(restore_shape), chip_list(chip)
        with _below_autograd():
            out = _op("npu_moe_token_unpermute")(permuted_tokens, sorted_indices, probs,
                                                  padded_mode, restore_shape, chip=chip)
        ctx.save_for_backward(permuted_tokens, sorted_indices, probs)
        ctx.padded_mode, ctx.restore_shape, ctx.chip = padded_mode, restore_shape, chip
        return out

    @staticmethod
    def backward(ctx, unpermuted_tokens_grad):
        if not (ctx.needs_input_grad[0] or ctx.needs_input_grad[2]):
            return None, None, None, None, None, None
        permuted_tokens, sorted_indices, probs = ctx.saved_tensors
        tokens_grad, probs_grad = _op("npu_moe_token_unpermute_grad_v2")(
            unpermuted_tokens_grad, sorted_indices, permuted_tokens.size(0), permuted_tokens.dtype,
            probs, ctx.padded_mode, ctx.restore_shape, permuted_tokens, chip=ctx.chip)
        return (tokens_grad if ctx.needs_input_grad[0] else None, None,
                probs_grad if probs is not None and ctx.needs_input_grad[2] else None,
                None, None, None)


def _permute_autograd(tokens, indices, num_out_tokens=None, padded_mode=False):
    return tuple(MoeTokenPermute.apply(tokens, indices, num_out_tokens, padded_mode))


def _unpermute_autograd(permuted_tokens, sorted_indices, probs=None, padded_mode=False,
                        restore_shape=None, *, chip=None):
    return MoeTokenUnpermute.apply(permuted_tokens, sorted_indices, probs, padded_mode,
                                   restore_shape, chip)


class _NoDerivative(torch.autograd.Function):
    """The results of a grad operator: what they were computed from needs
    no gradient of them; asking for one (a double backward) fails."""

    @staticmethod
    def forward(ctx, name, run, *tensors):
        ctx.name = name
        return run()

    @staticmethod
    def backward(ctx, *grads):
        raise RuntimeError("moeperm::%s has no derivative: the backward of the MoE token "
                           "operators cannot itself be differentiated (no double backward)"
                           % ctx.name)


def _tensors(args, kwargs):
    return [a for a in list(args) + list(kwargs.values()) if isinstance(a, torch.Tensor)]


def _needs_grad(args, kwargs):
    return torch.is_grad_enabled() and any(t.requires_grad for t in _tensors(args, kwargs))


def _not_differentiable(name):
    def kernel(*args, **kwargs):
        def run():
            with _below_autograd():
                return _op(name)(*args, **kwargs)
        if not _needs_grad(args, kwargs):
            return run()
        return _NoDerivative.apply(name, run, *_tensors(args, kwargs))
    return kernel


def _out_autograd(name):
    def kernel(*args, **kwargs):
        tensors = _tensors(args, kwargs)
        if torch.is_grad_enabled() and any(t.requires_grad for t in tensors):
            raise RuntimeError("moeperm::%s.out: out= arguments don't support automatic "
                               "differentiation, but one of the arguments requires grad" % name)
        if all(t.device.type == "cpu" for t in tensors):
            # What the dispatch below autograd would reach: the CPU kernel,
            # without a second pass through the dispatcher (a loop of out=
            # calls should cost what the C calls cost).
            return _KERNELS[name + ".out"][0](*args, **kwargs)
        with _below_autograd():
            return _op(name, "out")(*args, **kwargs)
    return kernel


_KERNELS = {
    "npu_moe_token_permute": (_permute_cpu, _permute_meta, _permute_autograd),
    "npu_moe_token_permute.out": (_permute_out_cpu, _permute_out_meta,
                                  _out_autograd("npu_moe_token_permute")),
    "npu_moe_token_unpermute": (_unpermute_cpu, _unpermute_meta, _unpermute_autograd),
    "npu_moe_token_unpermute.out": (_unpermute_out_cpu, _unpermute_out_meta,
                                    _out_autograd("npu_moe_token_unpermute")),
    "npu_moe_token_permute_grad_v2": (_permute_grad_v2_cpu, _permute_grad_v2_meta,
                                      _not_differentiable("npu_moe_token_permute_grad_v2")),
    "npu_moe_token_permute_grad_v2.out": (_permute_grad_v2_out_cpu, _permute_grad_v2_out_meta,
                                          _out_autograd("npu_moe_token_permute_grad_v2")),
    "npu_moe_token_permute_grad": (_v1_permute_grad(_permute_grad_v2_cpu),
                                   _v1_permute_grad(_permute_grad_v2_meta),
                                   _not_differentiable("npu_moe_token_permute_grad")),
    "npu_moe_token_permute_grad.out": (_v1_permute_grad(_permute_grad_v2_out_cpu),
                                       _v1_permute_grad(_permute_grad_v2_out_meta),
                                       _out_autograd("npu_moe_token_permute_grad")),
    "npu_moe_token_unpermute_grad_v2": (_unpermute_grad_v2_cpu, _unpermute_grad_v2_meta,
                                        _not_differentiable("npu_moe_token_unpermute_grad_v2")),
    "npu_moe_token_unpermute_grad_v2.out": (_unpermute_grad_v2_out_cpu,
                                            _unpermute_grad_v2_out_meta,
                                            _out_autograd("npu_moe_token_unpermute_grad_v2")),
    "npu_moe_token_unpermute_grad": (_v1_unpermute_grad(_unpermute_grad_v2_cpu),
                                     _v1_unpermute_grad(_unpermute_grad_v2_meta),
                                     _not_differentiable("npu_moe_token_unpermute_grad")),
    "npu_moe_token_unpermute_grad.out": (_v1_unpermute_grad(_unpermute_grad_v2_out_cpu),
                                         _v1_unpermute_grad(_unpermute_grad_v2_out_meta),
                                         _out_autograd("npu_moe_token_unpermute_grad")),
}


def _registered():
    try:
        _op("npu_moe_token_permute")
    except (AttributeError, RuntimeError):
        return False
    return True


def _register():
    """Defines the operators and their kernels, once per process.  Another
    copy of this package imported under another path (a source tree beside
    an installed copy) finds them defined and uses them."""
    if _registered():
        return None
    lib = torch.library.Library(NAMESPACE, "DEF")
    for name, schema in SCHEMAS.items():
        lib.define(name + schema)
    for name, (cpu, meta, autograd) in _KERNELS.items():
        lib.impl(name, cpu, "CPU")
        lib.impl(name, meta, "Meta")
        lib.impl(name, autograd, "Autograd")
    return lib


# A module global: the registrations live as long as this Library object.
_LIBRARY = _register()

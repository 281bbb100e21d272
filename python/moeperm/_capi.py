"""libmoeperm through ctypes: prototypes, errors and the two-phase call.

Every operator of libmoeperm has the aclnn shape: a first call that
validates, plans and returns a workspace size and an executor, and a second
that runs the executor.  ``Operator`` describes one such pair by the kinds
of its parameters, and ``call()`` marshals any of them, so an operator is a
table row here plus its Python signature in ``_ops.py``.

Symbols are bound on first use: a library older than the package still loads,
and only the operators it lacks fail, with a sentence that says so.
"""
import ctypes
from ctypes import POINTER, c_bool, c_char_p, c_int, c_int32, c_int64, c_size_t, c_uint64, c_void_p

from ._loader import load

SUCCESS = 0
ERR_PARAM_NULLPTR = 161001
ERR_PARAM_INVALID = 161002
ERR_RUNTIME_ERROR = 361001
ERR_INNER = 561000
ERR_INNER_TILING_ERROR = 561002

# moeperm_dtype values (the vendor's aclDataType numbers).
FLOAT32 = 0
FLOAT16 = 1
INT8 = 2
INT32 = 3
INT64 = 9
BF16 = 27


class Error(RuntimeError):
    """A refusal or failure reported by libmoeperm.  A RuntimeError, as
    torch_npu's failures of these operators are.

    ``status`` is the aclnn status code (161002 for an invalid parameter,
    ...), ``status_name`` its name ("MOEPERM_ERR_PARAM_INVALID") and the
    message the library's sentence naming the offending value, e.g.
    "the device's result is undetermined: sorted_indices[17] = -1 is
    negative: ...".  Outputs are untouched when it is raised.
    """

    def __init__(self, status, message):
        super().__init__(message)
        self.status = int(status)
        self.status_name = _status_name(self.status)

    def __str__(self):
        return self.args[0]

    def __repr__(self):
        return "moeperm.Error(%s, %r)" % (self.status_name, self.args[0])


class ArgumentError(Error, ValueError):
    """An Error for a value the library does not accept (status 161001,
    161002, or 561002 where the device's tiling refuses it); also a
    ValueError, since it is the caller's value that is wrong."""


def _status_name(status):
    return _lib.moeperm_status_name(status).decode()


def error_for(status, message=None):
    """The exception for a failed call: the library's last sentence unless
    ``message`` is given (for values refused before they reach C)."""
    if message is None:
        message = _lib.moeperm_last_error().decode("utf-8", "replace")
    cls = ArgumentError if status in (ERR_PARAM_NULLPTR, ERR_PARAM_INVALID,
                                      ERR_INNER_TILING_ERROR) else Error
    return cls(status, message)


def refuse(message):
    """An ArgumentError for a value Python must refuse before the library
    can see it (one that does not fit the C type), worded as the library
    would word it."""
    return error_for(ERR_PARAM_INVALID, message)


_lib, library_path = load("moeperm")

_PROTOTYPES = {
    "moeperm_version": (c_char_p, []),
    "moeperm_status_name": (c_char_p, [c_int32]),
    "moeperm_last_error": (c_char_p, []),
    "moeperm_tensor_create": (c_void_p, [POINTER(c_int64), c_uint64, c_int, POINTER(c_int64),
                                         c_int64, c_void_p]),
    "moeperm_tensor_destroy": (None, [c_void_p]),
    "moeperm_executor_destroy": (None, [c_void_p]),
    "moeperm_route_sorted_indices": (c_int32, [c_void_p, c_size_t, c_int32, c_void_p]),
    "moeperm_convert": (c_int32, [c_void_p, c_int, c_void_p, c_int, c_size_t]),
}


def function(name):
    """The library's function ``name`` with its prototype set.  Raises
    NotImplementedError when the loaded library does not export it."""
    fn = _bound.get(name)
    if fn is not None:
        return fn
    try:
        fn = getattr(_lib, name)
    except AttributeError:
        raise NotImplementedError(
            "%s is not exported by libmoeperm %s at %s; this function needs a newer libmoeperm"
            % (name, version(), library_path)) from None
    restype, argtypes = _PROTOTYPES[name]
    fn.restype, fn.argtypes = restype, argtypes
    _bound[name] = fn
    return fn


_bound = {}
for _name in ("moeperm_version", "moeperm_status_name", "moeperm_last_error"):
    function(_name)


def version():
    """The version of the loaded libmoeperm, "MAJOR.MINOR.PATCH"."""
    return _lib.moeperm_version().decode()


_INT64_ARRAYS = [c_int64 * n for n in range(9)]


def tensor(view):
    """A moeperm_tensor describing ``view`` (an ``_arrays.View``); the caller
    destroys it."""
    ndim = len(view.shape)
    array_type = _INT64_ARRAYS[ndim] if ndim < len(_INT64_ARRAYS) else c_int64 * ndim
    dims = array_type(*view.shape)
    strides = array_type(*view.strides)
    handle = function("moeperm_tensor_create")(dims, ndim, view.dtype, strides, 0, view.ptr)
    if not handle:
        message = _lib.moeperm_last_error().decode("utf-8", "replace")
        raise error_for(ERR_INNER if message.startswith("out of memory") else ERR_PARAM_INVALID,
                        message)
    return handle


# Parameter kinds of a two-phase call, in the C argument list:
ARG_TENSOR = "tensor"          # const moeperm_tensor *, required
ARG_OPT_TENSOR = "opt_tensor"  # const moeperm_tensor *, NULL when the value is None
ARG_INT64 = "int64"            # int64_t
ARG_BOOL = "bool"              # bool
ARG_SHAPE = "shape"            # const int64_t *, uint64_t length; NULL, 0 when None
ARG_OUT = "out"                # moeperm_tensor *, required
ARG_OPT_OUT = "opt_out"        # moeperm_tensor *, NULL when the value is None

_CTYPES = {ARG_TENSOR: [c_void_p], ARG_OPT_TENSOR: [c_void_p], ARG_INT64: [c_int64],
           ARG_BOOL: [c_bool], ARG_SHAPE: [POINTER(c_int64), c_uint64], ARG_OUT: [c_void_p],
           ARG_OPT_OUT: [c_void_p]}


class Operator:
    """One aclnn-shaped operator: moeperm_<stem>_get_workspace_size(params...,
    uint64_t *workspace_size, moeperm_executor **executor) and
    moeperm_<stem>(workspace, workspace_size, executor, stream).
    ``params`` lists (name, kind) in the C order, under the header's names
    (a shape's pointer and length are one parameter, the pointer's name)."""

    def __init__(self, stem, params):
        self.stem = stem
        self.params = tuple(params)
        self.prepare_name = "moeperm_%s_get_workspace_size" % stem
        self.run_name = "moeperm_%s" % stem
        argtypes = [t for _, kind in self.params for t in _CTYPES[kind]]
        _PROTOTYPES[self.prepare_name] = (c_int32, argtypes + [POINTER(c_uint64),
                                                                POINTER(c_void_p)])
        _PROTOTYPES[self.run_name] = (c_int32, [c_void_p, c_uint64, c_void_p, c_void_p])

    def bind(self):
        """(prepare, run) as ctypes functions; NotImplementedError when the
        library lacks them."""
        return function(self.prepare_name), function(self.run_name)


TOKEN_PERMUTE_GRAD = Operator("token_permute_grad", [
    ("permuted_output_grad", ARG_TENSOR), ("sorted_indices", ARG_TENSOR),
    ("num_topk", ARG_INT64), ("padded_mode", ARG_BOOL), ("out", ARG_OUT)])

TOKEN_PERMUTE = Operator("token_permute", [
    ("tokens", ARG_TENSOR), ("indices", ARG_TENSOR), ("num_out_tokens", ARG_INT64),
    ("padded_mode", ARG_BOOL), ("permute_tokens_out", ARG_OUT), ("sorted_indices_out", ARG_OUT)])

TOKEN_UNPERMUTE = Operator("token_unpermute", [
    ("permuted_tokens", ARG_TENSOR), ("sorted_indices", ARG_TENSOR), ("probs", ARG_OPT_TENSOR),
    ("padded_mode", ARG_BOOL), ("restore_shape", ARG_SHAPE), ("out", ARG_OUT)])

TOKEN_UNPERMUTE_GRAD = Operator("token_unpermute_grad", [
    ("permuted_tokens", ARG_TENSOR), ("unpermuted_tokens_grad", ARG_TENSOR),
    ("sorted_indices", ARG_TENSOR), ("probs", ARG_OPT_TENSOR), ("padded_mode", ARG_BOOL),
    ("restore_shape", ARG_SHAPE), ("permuted_tokens_grad_out", ARG_OUT),
    ("probs_grad_out", ARG_OPT_OUT)])


class ChipStruct(ctypes.Structure):
    """moeperm_chip."""
    _fields_ = [("ub_bytes", c_int64), ("vector_cores", c_int64)]


_PROTOTYPES["moeperm_executor_set_chip"] = (c_int32, [c_void_p, POINTER(ChipStruct)])
_PROTOTYPES["moeperm_chip_by_name"] = (c_int32, [ctypes.c_char_p, POINTER(ChipStruct)])
_PROTOTYPES["moeperm_chip_names"] = (ctypes.c_char_p, [])


def _int64(name, value):
    # ctypes would wrap a larger value silently into another number.
    if not -(1 << 63) <= value < (1 << 63):
        raise refuse("%s = %d does not fit in int64" % (name, value))
    return value


def call(op, values, prepare=None, run=None, configure=None):
    """Runs ``op`` with ``values`` (parameter name -> View, int, bool, shape
    tuple or None) through both phases.  ``prepare`` and ``run`` replace the
    library's functions (the tests marshal into Python stubs).
    ``configure(executor)``, when given, runs between the phases and returns
    a status (moeperm_executor_set_chip() is one); a plan it refuses is
    destroyed unrun.  Raises Error with the library's sentence when any
    step fails; the library leaves the outputs untouched then."""
    if prepare is None:
        prepare, run = op.bind()
    args, tensors = [], []
    try:
        for name, kind in op.params:
            value = values[name]
            if kind in (ARG_TENSOR, ARG_OUT) or (kind in (ARG_OPT_TENSOR, ARG_OPT_OUT)
                                                 and value is not None):
                handle = tensor(value)
                tensors.append(handle)
                args.append(handle)
            elif kind in (ARG_OPT_TENSOR, ARG_OPT_OUT):
                args.append(None)
            elif kind == ARG_INT64:
                args.append(_int64(name, value))
            elif kind == ARG_BOOL:
                args.append(bool(value))
            elif value is None:  # ARG_SHAPE
                args += [None, 0]
            else:
                value = [_int64("%s[%d]" % (name, i), v) for i, v in enumerate(value)]
                args += [(c_int64 * len(value))(*value), len(value)]
        workspace_size = c_uint64(0)
        executor = c_void_p(None)
        status = prepare(*args, ctypes.byref(workspace_size), ctypes.byref(executor))
        if status != SUCCESS:
            raise error_for(status)
        if configure is not None:
            status = configure(executor)
            if status != SUCCESS:
                error = error_for(status)
                function("moeperm_executor_destroy")(executor)
                raise error
        try:
            workspace = (ctypes.c_char * workspace_size.value)() if workspace_size.value else None
        except BaseException:
            function("moeperm_executor_destroy")(executor)
            raise
        # The run frees the executor, whether it succeeds or not.
        status = run(workspace, workspace_size.value, executor, None)
        if status != SUCCESS:
            raise error_for(status)
    finally:
        destroy = function("moeperm_tensor_destroy")
        for handle in tensors:
            destroy(handle)

"""The two C calls of one operator (get_workspace_size, then the run) made
through ctypes on tensor descriptors created once: what `moeperm bench`
times, made in the benchmark's own process on its own arrays, for the
benchmarks to compare the Python and torch paths with."""
import ctypes

from moeperm import _arrays, _capi

_TENSORS = (_capi.ARG_TENSOR, _capi.ARG_OPT_TENSOR, _capi.ARG_OUT, _capi.ARG_OPT_OUT)
_CODES = (_capi.FLOAT32, _capi.FLOAT16, _capi.BF16, _capi.INT8, _capi.INT32, _capi.INT64)


def two_phase(op, values):
    """A function making both C calls of ``op`` (a _capi.Operator) with
    ``values``: parameter name -> numpy array or torch tensor (None for an
    optional tensor left out), integer or bool; a shape is always absent and
    a missing scalar is 0."""
    handles = []
    for name, kind in op.params:
        value = values.get(name)
        if kind in _TENSORS:
            handles.append(None if value is None else
                           _capi.tensor(_arrays.view(value, name, _CODES)))
        elif kind == _capi.ARG_SHAPE:
            handles += [None, 0]
        else:
            handles.append(0 if value is None else value)
    prepare, run = op.bind()
    ws, ex = ctypes.c_uint64(0), ctypes.c_void_p(None)
    ws_ref, ex_ref = ctypes.byref(ws), ctypes.byref(ex)

    def call():
        status = prepare(*handles, ws_ref, ex_ref) or run(None, 0, ex, None)
        if status:
            raise _capi.error_for(status)
    return call

"""The table-driven two-phase call passes each kind of parameter as its C
prototype says, into Python stubs that stand in for the library."""
import ctypes
from ctypes import POINTER, c_bool, c_int32, c_int64, c_uint64, c_void_p

import numpy as np
import pytest

from moeperm import _arrays, _capi

OP = _capi.Operator("stub_every_kind", [
    ("a", _capi.ARG_TENSOR), ("b", _capi.ARG_OPT_TENSOR), ("k", _capi.ARG_INT64),
    ("flag", _capi.ARG_BOOL), ("shape", _capi.ARG_SHAPE), ("out", _capi.ARG_OUT),
    ("extra", _capi.ARG_OPT_OUT)])

PREPARE = ctypes.CFUNCTYPE(c_int32, c_void_p, c_void_p, c_int64, c_bool, POINTER(c_int64),
                           c_uint64, c_void_p, c_void_p, POINTER(c_uint64), POINTER(c_void_p))
RUN = ctypes.CFUNCTYPE(c_int32, c_void_p, c_uint64, c_void_p, c_void_p)
EXECUTOR = 0x5EED0


def stubs(prepare_status=0, run_status=0, workspace=0):
    seen = {}

    def prepare(a, b, k, flag, shape, shape_len, out, extra, ws, executor):
        seen["prepare"] = dict(a=a, b=b, k=k, flag=flag, shape_len=shape_len, out=out,
                               extra=extra,
                               shape=[shape[i] for i in range(shape_len)] if shape else None)
        ws[0] = workspace
        executor[0] = EXECUTOR if prepare_status == 0 else None
        return prepare_status

    def run(ws, ws_size, executor, stream):
        seen["run"] = dict(ws=ws, ws_size=ws_size, executor=executor, stream=stream)
        return run_status

    return PREPARE(prepare), RUN(run), seen


def tensor_view(name):
    arr = np.zeros((2, 3), dtype=np.float32)
    return _arrays.view(arr, name, (_capi.FLOAT32,))


def values(**changes):
    v = dict(a=tensor_view("a"), b=None, k=-(1 << 40), flag=1, shape=None,
             out=tensor_view("out"), extra=None)
    v.update(changes)
    return v


def test_required_tensors_are_handles_and_absent_optionals_are_null():
    prepare, run, seen = stubs()
    _capi.call(OP, values(), prepare, run)
    p = seen["prepare"]
    assert p["a"] and p["out"] and p["a"] != p["out"]
    assert p["b"] is None and p["extra"] is None
    assert p["k"] == -(1 << 40) and p["flag"] is True
    assert p["shape"] is None and p["shape_len"] == 0


def test_optional_tensors_given_are_handles_and_shapes_are_pointer_and_length():
    prepare, run, seen = stubs()
    _capi.call(OP, values(b=tensor_view("b"), extra=tensor_view("extra"), shape=(7, 1 << 33)),
               prepare, run)
    p = seen["prepare"]
    assert p["b"] and p["extra"] and len({p["a"], p["b"], p["out"], p["extra"]}) == 4
    assert p["shape"] == [7, 1 << 33] and p["shape_len"] == 2


def test_run_gets_the_executor_a_workspace_of_the_planned_size_and_no_stream():
    prepare, run, seen = stubs(workspace=4096)
    _capi.call(OP, values(), prepare, run)
    r = seen["run"]
    assert r["executor"] == EXECUTOR and r["ws_size"] == 4096 and r["ws"] and r["stream"] is None
    prepare, run, seen = stubs(workspace=0)
    _capi.call(OP, values(), prepare, run)
    assert seen["run"]["ws"] is None and seen["run"]["ws_size"] == 0


def test_refused_plan_raises_its_status_and_never_runs():
    prepare, run, seen = stubs(prepare_status=_capi.ERR_PARAM_NULLPTR)
    with pytest.raises(_capi.Error) as e:
        _capi.call(OP, values(), prepare, run)
    assert e.value.status == 161001 and e.value.status_name == "MOEPERM_ERR_PARAM_NULLPTR"
    assert isinstance(e.value, ValueError)
    assert "run" not in seen


def test_failed_run_raises_its_status():
    prepare, run, seen = stubs(run_status=_capi.ERR_RUNTIME_ERROR)
    with pytest.raises(_capi.Error) as e:
        _capi.call(OP, values(), prepare, run)
    assert e.value.status == 361001 and not isinstance(e.value, ValueError)


@pytest.mark.parametrize("change,sentence", [
    (dict(k=1 << 63), r"^k = 9223372036854775808 does not fit in int64$"),
    (dict(shape=(1, -(1 << 63) - 1)),
     r"^shape\[1\] = -9223372036854775809 does not fit in int64$")])
def test_integers_beyond_int64_are_refused_not_wrapped(change, sentence):
    prepare, run, seen = stubs()
    with pytest.raises(_capi.Error, match=sentence) as e:
        _capi.call(OP, values(**change), prepare, run)
    assert e.value.status == 161002 and "prepare" not in seen

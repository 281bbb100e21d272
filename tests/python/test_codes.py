"""The dtype and status numbers the package passes and reports are the
public header's, and each numpy and torch dtype maps to the right one."""
import re

import numpy as np
import pytest

import moeperm
from moeperm import _arrays, _capi

import paths

HEADER = open(paths.HEADER).read()


def header_value(name):
    m = re.search(r"\b%s\s*=\s*(\d+)" % name, HEADER) or \
        re.search(r"#define %s (\d+)" % name, HEADER)
    return int(m.group(1))


@pytest.mark.parametrize("name,header", [
    ("FLOAT32", "MOEPERM_FLOAT32"), ("FLOAT16", "MOEPERM_FLOAT16"), ("INT8", "MOEPERM_INT8"),
    ("INT32", "MOEPERM_INT32"), ("INT64", "MOEPERM_INT64"), ("BF16", "MOEPERM_BF16"),
    ("SUCCESS", "MOEPERM_SUCCESS"), ("ERR_PARAM_NULLPTR", "MOEPERM_ERR_PARAM_NULLPTR"),
    ("ERR_PARAM_INVALID", "MOEPERM_ERR_PARAM_INVALID"),
    ("ERR_RUNTIME_ERROR", "MOEPERM_ERR_RUNTIME_ERROR"), ("ERR_INNER", "MOEPERM_ERR_INNER")])
def test_number_equals_the_headers(name, header):
    assert getattr(_capi, name) == header_value(header)


@pytest.mark.parametrize("dtype,header", [
    (np.float32, "MOEPERM_FLOAT32"), (np.float16, "MOEPERM_FLOAT16"), (np.uint16, "MOEPERM_BF16"),
    (np.int8, "MOEPERM_INT8"), (np.int32, "MOEPERM_INT32"), (np.int64, "MOEPERM_INT64")])
def test_numpy_dtype_maps_to_the_headers_code(dtype, header):
    v = _arrays.view(np.zeros(3, dtype), "a", (header_value(header),))
    assert v.dtype == header_value(header)


def test_torch_dtype_maps_to_the_headers_code():
    torch = pytest.importorskip("torch")
    for dtype, header in [(torch.float32, "MOEPERM_FLOAT32"), (torch.float16, "MOEPERM_FLOAT16"),
                          (torch.bfloat16, "MOEPERM_BF16"), (torch.int8, "MOEPERM_INT8"),
                          (torch.int32, "MOEPERM_INT32"), (torch.int64, "MOEPERM_INT64")]:
        v = _arrays.view(torch.zeros(3, dtype=dtype), "a", (header_value(header),))
        assert v.dtype == header_value(header)


def test_status_names_come_from_the_library():
    assert moeperm.Error(161002, "x").status_name == "MOEPERM_ERR_PARAM_INVALID"
    assert moeperm.Error(7, "x").status_name == "MOEPERM_UNKNOWN_STATUS"

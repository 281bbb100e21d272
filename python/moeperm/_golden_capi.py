"""libmoeperm-golden through ctypes: its structures, prototypes and the
conventions of include/moeperm/golden.h (a char buffer for the sentence of a
failure, malloc'd memory the library frees).

The structures mirror golden.h field for field; ctypes lays them out as the
C compiler does.  Memory a moeperm_golden_case owns (names, tensor data) is
allocated here with the C library's malloc, so that moeperm_golden_case_free()
releases it whichever side allocated it.
"""
import ctypes
import ctypes.util
from ctypes import (POINTER, Structure, c_bool, c_char, c_char_p, c_int, c_int64, c_size_t,
                    c_uint, c_uint32, c_uint64, c_void_p)

from . import _capi
from ._loader import load

MAX_DIMS = 8          # MOEPERM_MAX_DIMS
MAX_TENSORS = 8       # GOLDEN_MAX_TENSORS
COMPARE_FIRST = 8     # GOLDEN_COMPARE_FIRST
ERR_LEN = 1024

ROLE_INPUT, ROLE_OUTPUT, ROLE_EXACT = 1, 2, 3
# moeperm_op
OP_PERMUTE_GRAD, OP_PERMUTE, OP_UNPERMUTE, OP_UNPERMUTE_GRAD = 1, 2, 3, 4
LOAD_NONE, LOAD_INPUTS, LOAD_OUTPUTS, LOAD_ALL = 0, 1, 2, 3
FLOAT64 = 11

VERDICTS = ("same", "within-tolerance", "different")  # moeperm_golden_verdict, in order


class Tensor(Structure):
    _fields_ = [("name", c_char_p), ("role", c_int), ("dtype", c_int), ("ndim", c_uint64),
                ("shape", c_int64 * MAX_DIMS), ("file", c_void_p), ("path", c_void_p),
                ("data", c_void_p), ("bytes", c_size_t)]


CHIP_NAME_MAX = 32    # MOEPERM_GOLDEN_CHIP_NAME_MAX


class Attrs(Structure):
    _fields_ = [("top_k", c_int64), ("num_out_tokens", c_int64), ("padded_mode", c_bool),
                ("restore_shape_len", c_uint64), ("restore_shape", c_int64 * MAX_DIMS),
                ("ub_bytes", c_int64), ("vector_cores", c_int64),
                ("chip", c_char * CHIP_NAME_MAX)]


class Recipe(Structure):
    _fields_ = [("routing", c_void_p), ("values", c_void_p), ("probs_values", c_void_p),
                ("num_experts", c_int64), ("hot_percent", c_int64), ("sentinels", c_bool),
                ("huge_indices", c_bool)]


class Case(Structure):
    _fields_ = [("dir", c_void_p), ("manifest_path", c_void_p), ("format_version", c_int),
                ("op", c_int), ("name", c_void_p), ("description", c_void_p),
                ("generator", c_void_p), ("command", c_void_p), ("seed", c_uint64),
                ("attrs", Attrs), ("recipe", Recipe), ("tensors", Tensor * MAX_TENSORS),
                ("tensor_count", c_size_t)]


class Slot(Structure):
    # name as an address: a case's moeperm_golden_tensor.name must point at the
    # library's own static string.
    _fields_ = [("name", c_void_p), ("role", c_int), ("optional", c_bool)]


class Spec(Structure):
    _fields_ = [("op", c_int), ("name", c_char * 96), ("description", c_char * 256),
                ("dtype", c_int), ("has_probs", c_bool), ("probs_dtype", c_int),
                ("index_dtype", c_int), ("tokens_num", c_int64), ("top_k", c_int64),
                ("hidden_size", c_int64), ("num_rows", c_int64), ("num_out_tokens", c_int64),
                ("num_experts", c_int64), ("hot_percent", c_int), ("sentinels", c_bool),
                ("values", c_int), ("probs_values", c_int), ("routing", c_int),
                ("ub_bytes", c_int64), ("vector_cores", c_int64), ("seed", c_uint64),
                ("padded_mode", c_bool), ("num_topk", c_int64), ("extra_indices", c_int64),
                ("huge_indices", c_bool), ("hidden_outer", c_int64),
                ("chip", c_char * CHIP_NAME_MAX)]


class Diff(Structure):
    _fields_ = [("token", c_int64), ("column", c_int64), ("expected", c_uint32),
                ("actual", c_uint32)]


class CompareResult(Structure):
    _fields_ = [("elements", c_uint64), ("differing", c_uint64), ("nan_mismatch", c_uint64),
                ("max_ulp", c_uint64), ("nonfinite_differing", c_uint64),
                ("first", Diff * COMPARE_FIRST), ("first_count", c_size_t),
                ("where", c_char_p), ("ranges", c_void_p),
                ("row_noun", c_char_p), ("column_noun", c_char_p)]


class JudgeOptions(Structure):
    _fields_ = [("strict_nan", c_bool), ("max_ulp", c_uint64), ("diagnose", c_bool)]


_lib, library_path = load("moeperm-golden")

_CASE_P = POINTER(Case)
_PROTOTYPES = {
    "moeperm_golden_case_read": (c_int, [c_char_p, c_uint, _CASE_P, c_char_p, c_size_t]),
    "moeperm_golden_case_free": (None, [_CASE_P]),
    "moeperm_golden_case_write": (c_int, [c_char_p, _CASE_P, c_bool, c_char_p, c_size_t]),
    "moeperm_golden_case_finish": (c_int, [_CASE_P, c_char_p, c_size_t]),
    "moeperm_golden_check_reference": (c_int, [_CASE_P, c_char_p, c_size_t]),
    "moeperm_golden_find_cases": (c_int, [c_char_p, POINTER(POINTER(c_char_p)), POINTER(c_size_t),
                                  c_char_p, c_size_t]),
    "moeperm_golden_free_paths": (None, [POINTER(c_char_p), c_size_t]),
    "moeperm_golden_op_slots": (POINTER(Slot), [c_int, POINTER(c_size_t)]),
    "moeperm_golden_tensor_read_file": (c_int, [c_char_p, POINTER(Tensor), POINTER(c_void_p), c_char_p,
                                        c_size_t]),
    "moeperm_golden_spec_default": (Spec, [c_int, c_int, c_int64, c_int64, c_int64]),
    "moeperm_golden_spec_default_name": (None, [POINTER(Spec)]),
    "moeperm_golden_spec_check": (c_int, [POINTER(Spec), c_char_p, c_size_t]),
    "moeperm_golden_generate": (c_int, [POINTER(Spec), c_char_p, _CASE_P, c_char_p, c_size_t]),
    "moeperm_golden_routing_parse": (c_bool, [c_char_p, POINTER(c_int)]),
    "moeperm_golden_values_parse": (c_bool, [c_char_p, POINTER(c_int)]),
    "moeperm_golden_routing_name": (c_char_p, [c_int]),
    "moeperm_golden_values_name": (c_char_p, [c_int]),
    "moeperm_golden_routing_names": (c_char_p, []),
    "moeperm_golden_values_names": (c_char_p, []),
    "moeperm_golden_dtype_parse": (c_bool, [c_char_p, POINTER(c_int)]),
    "moeperm_golden_op_parse": (c_int, [c_char_p]),
    "moeperm_golden_spec_command": (c_void_p, [POINTER(Spec)]),
    "moeperm_golden_judge": (c_int, [_CASE_P, POINTER(c_void_p), POINTER(JudgeOptions),
                             POINTER(c_void_p), c_char_p, c_size_t]),
    "moeperm_golden_judgement_free": (None, [c_void_p]),
    "moeperm_golden_judgement_verdict": (c_int, [c_void_p]),
    "moeperm_golden_judgement_output_count": (c_size_t, [c_void_p]),
    "moeperm_golden_judgement_output_name": (c_char_p, [c_void_p, c_size_t]),
    "moeperm_golden_judgement_output_verdict": (c_int, [c_void_p, c_size_t]),
    "moeperm_golden_judgement_output_compare": (POINTER(CompareResult), [c_void_p, c_size_t]),
    "moeperm_golden_judgement_finding_count": (c_size_t, [c_void_p, c_size_t]),
    "moeperm_golden_judgement_finding_id": (c_char_p, [c_void_p, c_size_t, c_size_t]),
    "moeperm_golden_judgement_finding_detail": (c_char_p, [c_void_p, c_size_t, c_size_t]),
    "moeperm_golden_judgement_finding_exact": (c_bool, [c_void_p, c_size_t, c_size_t]),
    "moeperm_golden_judgement_report": (None, [c_void_p, c_void_p, c_char_p]),
    "moeperm_golden_judgement_summary": (c_void_p, [c_void_p]),
    "moeperm_golden_compare": (c_int, [c_int, c_int64, c_int64, c_void_p, c_void_p, c_bool,
                               POINTER(CompareResult)]),
    "moeperm_golden_compare_free": (None, [POINTER(CompareResult)]),
    "moeperm_golden_compare_verdict": (c_int, [POINTER(CompareResult), c_uint64]),
    "moeperm_golden_compare_report": (None, [c_void_p, c_int, POINTER(CompareResult), c_char_p]),
    "moeperm_golden_compare_summary": (c_void_p, [c_int, POINTER(CompareResult)]),
}

_bound = {}


def function(name):
    """The golden library's function ``name`` with its prototype set."""
    fn = _bound.get(name)
    if fn is None:
        try:
            fn = getattr(_lib, name)
        except AttributeError:
            raise NotImplementedError(
                "%s is not exported by libmoeperm-golden at %s; this function needs a newer "
                "libmoeperm-golden" % (name, library_path)) from None
        fn.restype, fn.argtypes = _PROTOTYPES[name]
        _bound[name] = fn
    return fn


# The C library of the process: malloc() and free() for memory the golden
# library owns or hands over, open_memstream() for its FILE * reports.
_libc = ctypes.CDLL(ctypes.util.find_library("c") or None)
_libc.malloc.restype, _libc.malloc.argtypes = c_void_p, [c_size_t]
_libc.free.restype, _libc.free.argtypes = None, [c_void_p]
_libc.open_memstream.restype = c_void_p
_libc.open_memstream.argtypes = [POINTER(c_void_p), POINTER(c_size_t)]
_libc.fclose.restype, _libc.fclose.argtypes = c_int, [c_void_p]


def malloc_copy(address, size):
    """A malloc'd copy of ``size`` bytes at ``address`` (an int or bytes);
    the golden library frees it."""
    ptr = _libc.malloc(size if size else 1)
    if not ptr:
        raise MemoryError("out of memory for %d bytes" % size)
    if size:
        ctypes.memmove(ptr, address, size)
    return ptr


def malloc_string(text):
    try:
        data = text.encode() + b"\0"
    except UnicodeEncodeError as e:
        raise ValueError("%r has %r at position %d, which is not text UTF-8 can hold (a lone "
                         "surrogate)" % (text, text[e.start], e.start)) from None
    return malloc_copy(data, len(data))


def free(ptr):
    _libc.free(ptr)


def string(ptr):
    """The C string at address ``ptr`` (None for NULL)."""
    return None if not ptr else ctypes.string_at(ptr).decode("utf-8", "replace")


def take_string(ptr):
    """A malloc'd C string the library handed over, as str; frees it."""
    try:
        return string(ptr)
    finally:
        if ptr:
            _libc.free(ptr)


def printed(write):
    """What ``write(FILE *)`` prints, as str: the reports of golden.h write
    to a stream."""
    buf, size = c_void_p(), c_size_t()
    stream = _libc.open_memstream(ctypes.byref(buf), ctypes.byref(size))
    if not stream:
        raise MemoryError("open_memstream failed")
    try:
        write(stream)
    finally:
        _libc.fclose(stream)
    try:
        return ctypes.string_at(buf.value, size.value).decode("utf-8", "replace")
    finally:
        _libc.free(buf)


def err_buffer():
    return ctypes.create_string_buffer(ERR_LEN)


def slots(op):
    """[(name, role, optional, address of the static name)] of operator code
    ``op``, in argument order."""
    count = c_size_t()
    table = function("moeperm_golden_op_slots")(op, ctypes.byref(count))
    return [(string(table[i].name), table[i].role, bool(table[i].optional), table[i].name)
            for i in range(count.value)]


def dtype_name(code):
    return _capi.function("moeperm_dtype_name")(code).decode()


def dtype_parse(text):
    code = c_int()
    if not function("moeperm_golden_dtype_parse")(text.encode(), ctypes.byref(code)):
        return None
    return code.value


def op_name(op):
    name = _capi.function("moeperm_op_name")(op)
    return name.decode() if name else None


def op_parse(text):
    """The operator code of a vendor name ("MoeTokenPermute") or a short
    name ("permute"), as the tool takes them; 0 for neither."""
    return function("moeperm_golden_op_parse")(text.encode())


_capi._PROTOTYPES["moeperm_op_name"] = (c_char_p, [c_int])
_capi._PROTOTYPES["moeperm_dtype_name"] = (c_char_p, [c_int])
_capi._PROTOTYPES["moeperm_dtype_size"] = (c_size_t, [c_int])

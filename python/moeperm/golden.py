"""Golden cases of the moeperm operators, from Python: read, make, write and
judge them with libmoeperm-golden, the library the `moeperm` tool uses, so
that a case, its bytes on disk and its report are the tool's own.

    Case.load(path)                     a case directory
    Case.generate(op=..., tokens=..., top_k=..., hidden=..., dtype=..., seed=1, ...)
                                        the case `moeperm golden` writes for the same options
    Case.from_arrays(op, inputs, **attrs)  a case from your own inputs; the
                                        expected outputs computed by the reference
    case.save(path, force=False)        write it as a case directory
    cases(root)                         every case below root, sorted
    compare(case, outputs, max_ulp=0)   a Report: verdict, counts, diagnosis,
                                        and str(report), the text `moeperm compare` prints

Arrays are numpy arrays: float32, float16, np.uint16 for bf16 (np.uint16
arrays hold bf16 bit patterns), int8, int32, int64 and float64 (the exact
values of probs_grad).  ``case.attrs`` holds the operator's attributes under
the keyword names of its moeperm function, so that
``case.function(**case.inputs, **case.attrs)`` runs the reference on the
case (``case.call()`` does that and names the outputs).

Failures of the golden library (a file that cannot be read, a manifest
that does not hold, a directory that cannot be written) raise CaseError, a
moeperm.Error, with the library's sentence naming the file, field or
value; an operator's refusal of a case's inputs raises moeperm.Error with
the operator's status and sentence.  Python misuse raises TypeError or
ValueError naming the argument.
"""
import ctypes
import os
import warnings

import numpy as np

from . import _arrays, _capi, _ops
from . import _golden_capi as _g
from ._capi import BF16, FLOAT16, FLOAT32, INT8, INT32, INT64

library_path = _g.library_path

OPERATORS = ("MoeTokenPermuteGrad", "MoeTokenPermute", "MoeTokenUnpermute",
             "MoeTokenUnpermuteGrad")
_FUNCTIONS = {"MoeTokenPermuteGrad": _ops.moe_token_permute_grad,
              "MoeTokenPermute": _ops.moe_token_permute,
              "MoeTokenUnpermute": _ops.moe_token_unpermute,
              "MoeTokenUnpermuteGrad": _ops.moe_token_unpermute_grad}
# The attributes of each operator: the keywords of its function, with the
# value a case has when none is given.
_ATTRS = {"MoeTokenPermuteGrad": {"num_topk": None, "padded_mode": False},
          "MoeTokenPermute": {"num_out_tokens": 0, "padded_mode": False},
          "MoeTokenUnpermute": {"padded_mode": False, "restore_shape": None},
          "MoeTokenUnpermuteGrad": {"padded_mode": False, "restore_shape": None, "chip": None}}

_NUMPY_OF = {FLOAT32: np.dtype(np.float32), FLOAT16: np.dtype(np.float16),
             BF16: np.dtype(np.uint16), INT8: np.dtype(np.int8), INT32: np.dtype(np.int32),
             INT64: np.dtype(np.int64), _g.FLOAT64: np.dtype(np.float64)}
_CODE_OF = {dt: code for code, dt in _NUMPY_OF.items()}

GOLDEN_MAX_DIM = 1 << 40
_INT32_MAX = (1 << 31) - 1


class CaseError(_capi.Error):
    """A golden case the library could not read, make, write or judge.  The
    message is the library's sentence, naming the file, field or value;
    ``status`` is 161002 (MOEPERM_ERR_PARAM_INVALID)."""

    def __init__(self, message):
        super().__init__(_capi.ERR_PARAM_INVALID, message)

    def __repr__(self):
        return "moeperm.golden.CaseError(%r)" % self.args[0]


def _op_code(op, argument="op"):
    if not isinstance(op, str):
        raise TypeError("%s is a %s; it must be an operator name such as "
                        "\"MoeTokenPermute\"" % (argument, type(op).__name__))
    code = _g.op_parse(op)
    if not code:
        raise ValueError("%s is \"%s\", expected MoeTokenPermuteGrad, MoeTokenPermute, "
                         "MoeTokenUnpermute or MoeTokenUnpermuteGrad (or permute-grad, "
                         "permute, unpermute, unpermute-grad)" % (argument, op))
    return code


def _fspath(path, argument="path"):
    try:
        path = os.fspath(path)
    except TypeError:
        raise TypeError("%s is a %s; it must be a path (str or os.PathLike)"
                        % (argument, type(path).__name__)) from None
    return path.decode() if isinstance(path, bytes) else path


def _array_of(tensor):
    """A numpy copy of moeperm_golden_tensor ``tensor``'s data."""
    shape = tuple(tensor.shape[d] for d in range(tensor.ndim))
    arr = np.empty(shape, dtype=_NUMPY_OF[tensor.dtype])
    if tensor.bytes:
        ctypes.memmove(arr.ctypes.data, tensor.data, tensor.bytes)
    return arr


class Case:
    """A golden case: an operator, its attributes, its inputs, and the
    outputs the reference computes from them.

    op: the operator's name, e.g. "MoeTokenPermute".
    name, description, generator, command, seed: the manifest's fields.
    path: the directory the case was read from (as given), or None.
    attrs: the operator's attributes under its function's keyword names
        (num_topk, -1 as the manifest gives it; num_out_tokens;
        restore_shape; chip: the chip's name for a case made for a named
        chip ("Ascend910B3"), else a moeperm.Chip, or None for Atlas A2;
        padded_mode).
    inputs, expected, exact: dicts of numpy arrays in the operator's
        argument order: the inputs, the golden outputs, and (for
        MoeTokenUnpermuteGrad with probs) "probs_grad_exact", the float64
        values of probs_grad before rounding.  bf16 is np.uint16.  A case
        found by cases() reads its tensors on first use.
    id: the case's path relative to the root cases() searched, the name a
        test report gives it ("hidden/bf16-h17"); the name otherwise.
    """

    def __init__(self):
        self.op = None
        self.name = self.description = self.generator = self.command = None
        self.seed = 0
        self.path = None
        self.id = None
        self.format_version = 2
        self.attrs = {}
        self.recipe = None
        self._chip_fields = (0, 0)
        self._tensors = None

    # -- reading --------------------------------------------------------

    @classmethod
    def load(cls, path):
        """Case.load() returns the case in directory ``path``, its tensors
        read and checked (size and sha256) and its shapes put to the
        operator's first phase.  Raises CaseError with the library's
        sentence naming the file and field when the case does not hold."""
        case = cls()
        case._read(_fspath(path), _g.LOAD_ALL)
        return case

    def _read(self, path, load):
        c = _g.Case()
        err = _g.err_buffer()
        if _g.function("moeperm_golden_case_read")(path.encode(), load, ctypes.byref(c), err,
                                           _g.ERR_LEN) != 0:
            raise CaseError(err.value.decode("utf-8", "replace"))
        try:
            self._take(c, load != _g.LOAD_NONE)
        finally:
            _g.function("moeperm_golden_case_free")(ctypes.byref(c))
        self.path = path
        if self.id is None:
            self.id = self.name

    def _take(self, c, with_data):
        """Copies what ``c`` holds into this object."""
        self.op = _g.op_name(c.op)
        self.format_version = c.format_version
        self.name = _g.string(c.name)
        self.description = _g.string(c.description)
        self.generator = _g.string(c.generator)
        self.command = _g.string(c.command)
        self.seed = c.seed
        a = c.attrs
        attrs = {}
        if c.op == _g.OP_PERMUTE_GRAD:
            attrs["num_topk"] = a.top_k
        elif c.op == _g.OP_PERMUTE:
            attrs["num_out_tokens"] = a.num_out_tokens
        else:
            attrs["restore_shape"] = (tuple(a.restore_shape[i]
                                            for i in range(a.restore_shape_len))
                                      if a.restore_shape_len else None)
        if c.op == _g.OP_UNPERMUTE_GRAD:
            self._chip_fields = (a.ub_bytes, a.vector_cores)
            # A case made for a named chip keeps its name.
            attrs["chip"] = a.chip.decode() if a.chip else self._chip_of_fields()
        attrs["padded_mode"] = bool(a.padded_mode)
        self.attrs = {key: attrs[key] for key in _ATTRS[self.op]}
        r = c.recipe
        self.recipe = None
        if r.routing:
            self.recipe = {"routing": _g.string(r.routing), "values": _g.string(r.values),
                           "probs_values": _g.string(r.probs_values),
                           "num_experts": r.num_experts, "hot_percent": r.hot_percent,
                           "sentinels": bool(r.sentinels),
                           "huge_indices": bool(r.huge_indices)}
        if with_data:
            tensors = {_g.ROLE_INPUT: {}, _g.ROLE_OUTPUT: {}, _g.ROLE_EXACT: {}}
            for i in range(c.tensor_count):
                t = c.tensors[i]
                tensors[t.role][t.name.decode()] = _array_of(t)
            self._tensors = tensors

    def _chip_of_fields(self):
        ub_bytes, cores = self._chip_fields
        if not ub_bytes and not cores:
            return None
        return _ops.Chip(ub_bytes or _ops.CHIP_A2.ub_bytes, cores or _ops.CHIP_A2.vector_cores)

    def _loaded(self):
        if self._tensors is None:
            self._read(self.path, _g.LOAD_ALL)
        return self._tensors

    @property
    def inputs(self):
        return self._loaded()[_g.ROLE_INPUT]

    @property
    def expected(self):
        return self._loaded()[_g.ROLE_OUTPUT]

    @property
    def exact(self):
        return self._loaded()[_g.ROLE_EXACT]

    @property
    def function(self):
        """The moeperm function of the case's operator."""
        return _FUNCTIONS[self.op]

    def call(self, function=None):
        """call() runs ``function`` (default: the case's moeperm function,
        the reference) as ``function(**case.inputs, **case.attrs)`` and
        returns its outputs as a dict named as ``case.expected`` is (a tuple
        result is taken in that order; a None, such as probs_grad without
        probs, is left out)."""
        fn = self.function if function is None else function
        result = fn(**self.inputs, **self.attrs)
        names = list(self.expected)
        if isinstance(result, dict):
            return result
        if not isinstance(result, (tuple, list)):
            result = (result,)
        result = [r for r in result if r is not None]
        if len(result) != len(names):
            raise ValueError("the function returned %d outputs; %s has %d (%s)"
                             % (len(result), self.op, len(names), ", ".join(names)))
        return dict(zip(names, result))

    def __fspath__(self):
        if self.path is None:
            raise TypeError("case %s was made in memory and has no path" % self.name)
        return self.path

    def __repr__(self):
        where = " at %r" % self.path if self.path else ""
        return "<moeperm.golden.Case %s %s%s>" % (self.op, self.id or self.name, where)

    # -- making ---------------------------------------------------------

    @classmethod
    def from_arrays(cls, op, inputs, name="from-arrays", description=None, **attrs):
        """Case.from_arrays() returns a case of operator ``op`` on your own
        ``inputs`` (a dict of numpy arrays or CPU tensors named as the
        operator names them, e.g. {"tokens": ..., "indices": ...}), with
        the operator's attributes as keywords (those of its moeperm
        function, the C API's names: num_topk, num_out_tokens,
        restore_shape, chip, padded_mode; or the manifest's: top_k for
        num_topk, ub_bytes and vector_cores for chip), its expected outputs
        computed by the reference (moeperm_golden_case_finish()).  Raises
        moeperm.Error with the operator's status and sentence when it
        refuses the inputs, TypeError or ValueError for an unknown input or
        attribute, or a name or description that is not UTF-8 text."""
        code = _op_code(op)
        op = _g.op_name(code)
        if not isinstance(inputs, dict):
            raise TypeError("inputs is a %s; it must be a dict of arrays named as %s's inputs"
                            % (type(inputs).__name__, op))
        slots = _g.slots(code)
        input_names = [s[0] for s in slots if s[1] == _g.ROLE_INPUT]
        for key in inputs:
            if key not in input_names:
                raise ValueError("inputs has \"%s\", which is not an input of %s (%s)"
                                 % (key, op, ", ".join(input_names)))
        for s in slots:
            if s[1] == _g.ROLE_INPUT and not s[2] and s[0] not in inputs:
                raise ValueError("inputs lacks \"%s\", which %s needs" % (s[0], op))
        case = cls()
        case.op = op
        case.name = _text(name, "name")
        case.description = _text(description, "description") if description is not None else \
            "made from arrays in Python"
        case.generator = "moeperm %s python" % _capi.version()
        case.attrs = _check_attrs(op, attrs)
        tensors = {_g.ROLE_INPUT: {}, _g.ROLE_OUTPUT: {}, _g.ROLE_EXACT: {}}
        for s in slots:
            if s[0] in inputs and s[1] == _g.ROLE_INPUT:
                tensors[_g.ROLE_INPUT][s[0]] = _input_array(
                    inputs[s[0]], "inputs[\"%s\"]" % s[0], s[0])
        case._tensors = tensors
        case.id = name
        c = case._c_case(with_outputs=False)
        try:
            err = _g.err_buffer()
            if _g.function("moeperm_golden_case_finish")(ctypes.byref(c), err, _g.ERR_LEN) != 0:
                sentence = err.value.decode("utf-8", "replace")
                inner = _g.err_buffer()
                has_outputs = any(c.tensors[i].role == _g.ROLE_OUTPUT
                                  for i in range(c.tensor_count))
                status = _g.function("moeperm_golden_check_reference")(
                    ctypes.byref(c), inner, _g.ERR_LEN) if has_outputs else 0
                if status:
                    raise _capi.error_for(status, inner.value.decode("utf-8", "replace"))
                raise CaseError(sentence)
            for i in range(c.tensor_count):
                t = c.tensors[i]
                if t.role != _g.ROLE_INPUT:
                    tensors[t.role][t.name.decode()] = _array_of(t)
        finally:
            _g.function("moeperm_golden_case_free")(ctypes.byref(c))
        return case

    @classmethod
    def generate(cls, op="MoeTokenPermuteGrad", tokens_num=None, top_k=None, hidden_size=None,
                 dtype=None, seed=1, num_rows=None, num_out_tokens=0, index_dtype="int32",
                 sentinels=False, probs_dtype=None, has_probs=True, probs_values="normal",
                 ub_bytes=None, vector_cores=None, num_experts=None, hot_percent=50,
                 values="normal", routing="routed", name=None, chip=None, padded_mode=False,
                 num_topk=None, extra_indices=0, huge_indices=False, hidden_outer=None):
        """Case.generate() returns the custom case `moeperm golden` writes
        for the same options, the same bytes.  Each keyword is the field of
        moeperm_golden_spec (include/moeperm/golden.h) of that name, the
        names the manifest uses: tokens_num is the tool's --tokens, top_k
        --top-k, hidden_size --hidden, num_rows --rows, num_experts --experts,
        hot_percent --hot, has_probs=False --no-probs.  None stands where the
        tool has a default that depends on others (num_rows:
        tokens_num*top_k; num_experts: max(64, 2*top_k); ub_bytes and
        vector_cores: Atlas A2; probs_dtype: dtype; name: made from the
        options).  The recorded command is the tool's, so case.save() of it
        and the tool's directory are byte for byte the same.

        op: an operator name, or permute-grad, permute, unpermute,
            unpermute-grad.
        tokens_num, top_k, hidden_size: the sizes (required).
        dtype, probs_dtype, index_dtype: "float32" ("fp32"), "float16"
            ("fp16"), "bf16" ("bfloat16"), "int8", "int32", "int64", or a
            numpy dtype (np.uint16 meaning bf16).
        values, probs_values, routing: value kinds and routings, named as
            the tool names them (`moeperm golden --help`; "repeats" and
            "sparse" are sorted_indices that are no permutation).
        num_topk: MoeTokenPermuteGrad's num_topk as recorded, when it is
            not top_k: -1 (taken as 1) with top_k 1, as the tool's --top-k
            -1 records.
        chip: MoeTokenUnpermuteGrad's chip by name ("Ascend910B3", recorded
            as such), or a moeperm.Chip (its numbers, as ub_bytes and
            vector_cores give them).
        padded_mode, extra_indices, huge_indices, hidden_outer: the input
            domain's edge, as --padded-mode, --extra-indices,
            --huge-indices and --hidden-outer (docs/golden-format.md).
        Raises TypeError or ValueError naming the keyword for a value the
        tool would refuse, CaseError with the library's sentence for a spec
        it refuses."""
        code = _op_code(op)
        for key, value in (("tokens_num", tokens_num), ("top_k", top_k),
                           ("hidden_size", hidden_size), ("dtype", dtype)):
            if value is None:
                raise TypeError("Case.generate() needs %s (and tokens_num, top_k, hidden_size, "
                                "dtype)" % key)
        tokens = _ranged(tokens_num, "tokens_num", 1, GOLDEN_MAX_DIM)
        top_k = _ranged(top_k, "top_k", 1, _ops.MAX_TOP_K)
        num_topk = 0 if num_topk is None else _ops._int64_value(num_topk, "num_topk")
        extra = _ranged(extra_indices, "extra_indices", 0, _INT32_MAX)
        outer = 0 if hidden_outer is None else _ranged(hidden_outer, "hidden_outer", 1,
                                                       GOLDEN_MAX_DIM)
        chip_name = b""
        if isinstance(chip, str):
            _ops.Chip.by_name(chip)
            chip_name = chip.encode()
        elif chip is not None:
            named = _ops.chip_of(chip)
            for key, given, value in (("ub_bytes", ub_bytes, named.ub_bytes),
                                      ("vector_cores", vector_cores, named.vector_cores)):
                if given is not None and given != value:
                    raise ValueError("chip gives %s %d, and %s is %d" % (key, value, key, given))
            ub_bytes, vector_cores = named
        hidden = _ranged(hidden_size, "hidden_size", 1, GOLDEN_MAX_DIM)
        num_out = _ranged(num_out_tokens, "num_out_tokens", -_INT32_MAX, _INT32_MAX)
        rows = -1 if num_rows is None else _ranged(num_rows, "num_rows", 0, _INT32_MAX)
        experts = 0 if num_experts is None else _ranged(num_experts, "num_experts", 1, _INT32_MAX)
        hot = _ranged(hot_percent, "hot_percent", 0, 99)
        ub = 0 if ub_bytes is None else _ranged(ub_bytes, "ub_bytes", 1, _INT32_MAX)
        cores = 0 if vector_cores is None else _ranged(vector_cores, "vector_cores", 1, 65536)
        seed = _ranged(seed, "seed", 0, (1 << 64) - 1)
        spec = _g.function("moeperm_golden_spec_default")(_g.OP_PERMUTE_GRAD, BF16, 0, 0, 0)
        spec.op = code
        spec.dtype = _dtype_code(dtype, "dtype")
        index_code = _dtype_code(index_dtype, "index_dtype")
        if index_code not in (INT32, INT64):
            raise ValueError("index_dtype is %s, expected int32 or int64"
                             % _g.dtype_name(index_code))
        spec.index_dtype = index_code
        spec.sentinels = _ops._bool(sentinels, "sentinels")
        spec.probs_dtype = spec.dtype if probs_dtype is None else \
            _dtype_code(probs_dtype, "probs_dtype")
        spec.has_probs = _ops._bool(has_probs, "has_probs") and code in (_g.OP_UNPERMUTE,
                                                                         _g.OP_UNPERMUTE_GRAD)
        spec.probs_values = _kind(probs_values, "probs_values", "values")
        spec.values = _kind(values, "values", "values")
        spec.routing = _kind(routing, "routing", "routing")
        spec.num_out_tokens = num_out
        spec.ub_bytes, spec.vector_cores = ub, cores
        spec.tokens_num, spec.top_k, spec.hidden_size = tokens, top_k, hidden
        # The spec says 0 for "as top_k"; the library refuses what else is
        # not -1 with a sentence.
        spec.num_topk = 0 if num_topk == top_k else num_topk
        spec.padded_mode = _ops._bool(padded_mode, "padded_mode")
        spec.extra_indices, spec.hidden_outer = extra, outer
        spec.huge_indices = _ops._bool(huge_indices, "huge_indices")
        spec.chip = chip_name
        spec.num_rows, spec.num_experts, spec.hot_percent = rows, experts, hot
        spec.seed = seed
        if name is not None:
            encoded = _text(name, "name").encode()
            if len(encoded) >= 96:
                raise ValueError("name \"%s\" is longer than 95 characters" % name)
            spec.name = encoded
        else:
            _g.function("moeperm_golden_spec_default_name")(ctypes.byref(spec))
        err = _g.err_buffer()
        if _g.function("moeperm_golden_spec_check")(ctypes.byref(spec), err, _g.ERR_LEN) != 0:
            raise CaseError(err.value.decode("utf-8", "replace"))
        spec.description = ("custom case: %s values, %s routing"
                            % (_kind_name("values", spec.values),
                               _kind_name("routing", spec.routing))).encode()
        command = _g.take_string(_g.function("moeperm_golden_spec_command")(ctypes.byref(spec)))
        if command is None:
            raise MemoryError("out of memory for the command of %s" % spec.name.decode())
        c = _g.Case()
        if _g.function("moeperm_golden_generate")(ctypes.byref(spec), command.encode(), ctypes.byref(c),
                                          err, _g.ERR_LEN) != 0:
            raise CaseError(err.value.decode("utf-8", "replace"))
        case = cls()
        try:
            case._take(c, True)
        finally:
            _g.function("moeperm_golden_case_free")(ctypes.byref(c))
        case.id = case.name
        return case

    # -- writing --------------------------------------------------------

    def save(self, path, force=False):
        """save() writes the case as the case directory ``path`` (manifest,
        tensors as .bin, sha256s), atomically: ``path`` then holds either
        its old content or the whole new case.  An existing ``path`` is
        replaced only with force=True, and only when it is a case (or an
        empty directory).  Raises CaseError with the library's sentence when
        nothing was written.  Not thread safe (the writer installs signal
        handlers that remove its temporaries)."""
        path = _fspath(path)
        c = self._c_case(with_outputs=True)
        try:
            err = _g.err_buffer()
            rc = _g.function("moeperm_golden_case_write")(path.encode(), ctypes.byref(c), bool(force),
                                                  err, _g.ERR_LEN)
        finally:
            _g.function("moeperm_golden_case_free")(ctypes.byref(c))
        if rc < 0:
            raise CaseError(err.value.decode("utf-8", "replace"))
        if rc > 0:
            warnings.warn(err.value.decode("utf-8", "replace"), RuntimeWarning, stacklevel=2)
        return path

    def _c_case(self, with_outputs):
        """A moeperm_golden_case holding this case (every string and tensor a
        malloc'd copy); the caller frees it with moeperm_golden_case_free()."""
        code = _g.op_parse(self.op)
        c = _g.Case()
        try:
            c.format_version = 2
            c.op = code
            c.name = _g.malloc_string(self.name or "")
            c.description = _g.malloc_string(self.description or "")
            c.generator = _g.malloc_string(self.generator or "")
            if self.command is not None:
                c.command = _g.malloc_string(self.command)
            c.seed = int(self.seed)
            _put_attrs(c.attrs, self.op, self.attrs, self._chip_fields)
            if self.recipe is not None:
                r = self.recipe
                c.recipe.routing = _g.malloc_string(r["routing"])
                c.recipe.values = _g.malloc_string(r["values"])
                if r.get("probs_values") is not None:
                    c.recipe.probs_values = _g.malloc_string(r["probs_values"])
                c.recipe.num_experts = r["num_experts"]
                c.recipe.hot_percent = r["hot_percent"]
                c.recipe.sentinels = bool(r.get("sentinels"))
                c.recipe.huge_indices = bool(r.get("huge_indices"))
            tensors = self._loaded()
            for name, role, _, static_name in _g.slots(code):
                if role != _g.ROLE_INPUT and not with_outputs:
                    continue
                arr = tensors[role].get(name)
                if arr is None:
                    continue
                t = c.tensors[c.tensor_count]
                t.name = ctypes.cast(static_name, ctypes.c_char_p)
                t.role = role
                arr = np.ascontiguousarray(arr)
                t.dtype = _CODE_OF[arr.dtype]
                t.ndim = arr.ndim
                for d, extent in enumerate(arr.shape):
                    t.shape[d] = extent
                t.file = _g.malloc_string(name + ".bin")
                t.bytes = arr.nbytes
                t.data = _g.malloc_copy(arr.ctypes.data, arr.nbytes) if arr.nbytes else None
                c.tensor_count += 1
        except BaseException:
            _g.function("moeperm_golden_case_free")(ctypes.byref(c))
            raise
        return c


def _text(value, name):
    """``value`` checked to be a str the manifest can hold (UTF-8)."""
    if not isinstance(value, str):
        raise TypeError("%s is a %s; it must be a str" % (name, type(value).__name__))
    try:
        value.encode()
    except UnicodeEncodeError as e:
        raise ValueError("%s has %r at position %d, which is not text UTF-8 can hold (a lone "
                         "surrogate)" % (name, value[e.start], e.start)) from None
    return value


def _ranged(value, name, low, high):
    value = _ops._integer(value, name)
    if not low <= value <= high:
        raise ValueError("%s is %d, expected an integer from %d to %d" % (name, value, low, high))
    return value


def _dtype_code(value, name):
    if isinstance(value, str):
        code = _g.dtype_parse(value)
        if code is None:
            raise ValueError("%s is \"%s\", expected float32 (fp32), float16 (fp16), "
                             "bf16 (bfloat16), int8, int32 or int64" % (name, value))
        return code
    try:
        dt = np.dtype(value)
    except TypeError:
        raise TypeError("%s is a %s; it must be a dtype name such as \"bf16\" or a numpy dtype"
                        % (name, type(value).__name__)) from None
    if dt not in _CODE_OF or dt == np.float64:
        raise ValueError("%s is %s, expected float32, float16, uint16 (bf16), int8, int32 or "
                         "int64" % (name, dt.name))
    return _CODE_OF[dt]


def _kind(value, name, table):
    if not isinstance(value, str):
        raise TypeError("%s is a %s; it must be a str" % (name, type(value).__name__))
    code = ctypes.c_int()
    if not _g.function("moeperm_golden_%s_parse" % table)(value.encode(), ctypes.byref(code)):
        raise ValueError("%s is \"%s\", expected one of %s"
                         % (name, value, _g.function("moeperm_golden_%s_names" % table)().decode()))
    return code.value


def _kind_name(table, code):
    return _g.function("moeperm_golden_%s_name" % table)(code).decode()


def _manifest_names(op, attrs):
    """``attrs`` with the manifest's names of attributes (top_k, ub_bytes,
    vector_cores) put as the function's (num_topk, chip)."""
    attrs = dict(attrs)
    if op == "MoeTokenPermuteGrad" and "top_k" in attrs:
        if "num_topk" in attrs:
            raise TypeError("give num_topk or top_k (its manifest name), not both")
        attrs["num_topk"] = attrs.pop("top_k")
    if op == "MoeTokenUnpermuteGrad" and ("ub_bytes" in attrs or "vector_cores" in attrs):
        if "chip" in attrs:
            raise TypeError("give chip or ub_bytes and vector_cores (its manifest names), "
                            "not both")
        ub_bytes = attrs.pop("ub_bytes", None)
        cores = attrs.pop("vector_cores", None)
        attrs["chip"] = (_ops.CHIP_A2.ub_bytes if ub_bytes is None else ub_bytes,
                         _ops.CHIP_A2.vector_cores if cores is None else cores)
    return attrs


def _check_attrs(op, attrs):
    attrs = _manifest_names(op, attrs)
    known = _ATTRS[op]
    for key in attrs:
        if key not in known:
            raise TypeError("%s has no attribute %s; its attributes are %s"
                            % (op, key, ", ".join(known)))
    result = dict(known)
    result.update(attrs)
    if op == "MoeTokenPermuteGrad" and result["num_topk"] is None:
        raise TypeError("a MoeTokenPermuteGrad case needs num_topk")
    if op == "MoeTokenPermuteGrad":
        result["num_topk"] = _ops._int64_value(result["num_topk"], "num_topk")
    if op == "MoeTokenPermute":
        if result["num_out_tokens"] is None:
            result["num_out_tokens"] = 0
        result["num_out_tokens"] = _ops._int64_value(result["num_out_tokens"], "num_out_tokens")
    if "restore_shape" in result:
        shape = _ops._shape_value(result["restore_shape"], "restore_shape")
        if shape is not None and len(shape) > _g.MAX_DIMS:
            raise ValueError("restore_shape has %d entries; at most %d are kept"
                             % (len(shape), _g.MAX_DIMS))
        result["restore_shape"] = shape
    if isinstance(result.get("chip"), str):
        _ops.Chip.by_name(result["chip"])  # a name it knows, kept as the name
    elif result.get("chip") is not None:
        struct = _ops._chip_struct(result["chip"])
        result["chip"] = _ops.Chip(struct.ub_bytes, struct.vector_cores)
    result["padded_mode"] = _ops._bool(result["padded_mode"], "padded_mode")
    return result


def _put_attrs(a, op, attrs, chip_fields):
    if op == "MoeTokenPermuteGrad":
        a.top_k = attrs["num_topk"]
    elif op == "MoeTokenPermute":
        a.num_out_tokens = attrs["num_out_tokens"]
    else:
        shape = attrs.get("restore_shape")
        if shape is not None:
            a.restore_shape_len = len(shape)
            for i, v in enumerate(shape):
                a.restore_shape[i] = v
    if op == "MoeTokenUnpermuteGrad":
        chip = attrs.get("chip")
        if chip is None:
            a.ub_bytes, a.vector_cores = 0, 0
        elif isinstance(chip, str):
            # A named chip: the manifest records the name and its numbers.
            a.chip = chip.encode()
            a.ub_bytes, a.vector_cores = _ops.Chip.by_name(chip)
        elif chip_fields != (0, 0) and tuple(chip) == tuple(_chip_from(chip_fields)):
            # As read: a manifest that named one field keeps naming one.
            a.ub_bytes, a.vector_cores = chip_fields
        else:
            a.ub_bytes, a.vector_cores = chip
    a.padded_mode = bool(attrs["padded_mode"])


def _chip_from(fields):
    ub_bytes, cores = fields
    return _ops.Chip(ub_bytes or _ops.CHIP_A2.ub_bytes, cores or _ops.CHIP_A2.vector_cores)


def _input_array(value, name, slot):
    """A contiguous numpy array with the bits of ``value`` (numpy, torch or
    anything np.asarray takes).  int64 sorted_indices stay int64, for the
    operator to refuse as `moeperm make-case` does; a list of them is int32,
    as the operators' functions read it."""
    if slot == "sorted_indices":
        value = _ops.list_indices(value, name)
    v = _arrays.view(value, name, tuple(c for c in _NUMPY_OF if c != _g.FLOAT64))
    return np.ascontiguousarray(_arrays.as_numpy(v))


def cases(root, op=None):
    """cases() returns every case at or below directory ``root`` as a list of
    Case, in byte order of their paths (the same on any file system): the
    manifests are read now, the tensors on first use.  Each case's ``id`` is
    its path relative to ``root`` ("hidden/bf16-h17"; the directory's name
    when root is itself a case).  ``op`` keeps only the cases of one
    operator.  Links are followed, each directory once; names starting with
    '.' are skipped.  Raises CaseError for a directory that cannot be read
    or a manifest that does not hold."""
    root = _fspath(root, "root")
    want = None if op is None else _g.op_name(_op_code(op))
    dirs = ctypes.POINTER(ctypes.c_char_p)()
    count = ctypes.c_size_t()
    err = _g.err_buffer()
    if _g.function("moeperm_golden_find_cases")(root.encode(), ctypes.byref(dirs), ctypes.byref(count),
                                        err, _g.ERR_LEN) != 0:
        raise CaseError(err.value.decode("utf-8", "replace"))
    try:
        paths = [dirs[i].decode() for i in range(count.value)]
    finally:
        _g.function("moeperm_golden_free_paths")(dirs, count.value)
    found = []
    for path in paths:
        case = Case()
        relative = os.path.relpath(path, root)
        case.id = os.path.basename(os.path.normpath(path)) if relative == "." else \
            relative.replace(os.sep, "/")
        case._read(path, _g.LOAD_NONE)
        if want is None or case.op == want:
            found.append(case)
    return found


# -- judging ------------------------------------------------------------

class Finding:
    """One entry of a diagnosis: the stable ``id`` of a known kernel bug
    ("missing-slot", "truncate", "order", ...), its ``detail`` sentence,
    and whether its model reproduces the output ``exact``ly."""
    __slots__ = ("id", "detail", "exact")

    def __init__(self, id, detail, exact):
        self.id, self.detail, self.exact = id, detail, exact

    def __repr__(self):
        return "Finding(%r, %r, exact=%r)" % (self.id, self.detail, self.exact)


class OutputReport:
    """The judgement of one output of a case.

    name, verdict ("same", "within-tolerance", "different"), same;
    elements: compared; differ: whose bits differ (any NaN equals any NaN
    unless strict_nan); nan_mismatch: of those, a NaN against a number;
    max_ulp: the largest distance in ulp among differing elements;
    nonfinite_differing: differing elements where either value is a NaN or
    an infinity; first: up to 8 differences as (token, column,
    expected bits, actual bits); where: the location summary or None;
    findings: the diagnosis, best first; diagnosis: their ids.
    """

    def __init__(self, name, verdict, r, findings):
        self.name = name
        self.verdict = verdict
        self.elements = r.elements
        self.differ = r.differing
        self.nan_mismatch = r.nan_mismatch
        self.max_ulp = r.max_ulp
        self.nonfinite_differing = r.nonfinite_differing
        self.first = [(d.token, d.column, d.expected, d.actual)
                      for d in r.first[:r.first_count]]
        self.where = r.where.decode("utf-8", "replace") if r.where else None
        self.findings = findings
        self.diagnosis = [f.id for f in findings]

    @property
    def same(self):
        return self.verdict == "same"

    def __repr__(self):
        return "<OutputReport %s: %s, %d of %d differ>" % (self.name, self.verdict, self.differ,
                                                           self.elements)


class Report:
    """What compare() concludes about a case's outputs.

    verdict: "same", "within-tolerance" or "different", the worst of the
        outputs'; same: verdict == "same".
    outputs: {name: OutputReport}, in the case's order.
    elements, differ: totals over the outputs.
    diagnosis: the ids of every output's findings, in order.
    summary: one line, as a JUnit failure message gives it ("" when same).
    str(report): the text `moeperm compare CASE OUTPUT` prints: the case and
        "ok, all N elements equal", or "MISMATCH" (or "WITHIN TOLERANCE")
        and the report, diagnosis first (docs/judging.md).
    """

    def __init__(self, label, verdict, outputs, summary, text):
        self.case = label
        self.verdict = verdict
        self.outputs = outputs
        self.summary = summary
        self._text = text

    @property
    def same(self):
        return self.verdict == "same"

    @property
    def elements(self):
        return sum(o.elements for o in self.outputs.values())

    @property
    def differ(self):
        return sum(o.differ for o in self.outputs.values())

    @property
    def diagnosis(self):
        return [i for o in self.outputs.values() for i in o.diagnosis]

    def __str__(self):
        if self.verdict == "same":
            return "%s: ok, all %d elements equal" % (self.case, self.elements)
        head = "%s: %s\n" % (self.case, "WITHIN TOLERANCE" if self.verdict == "within-tolerance"
                             else "MISMATCH")
        return (head + self._text).rstrip("\n")

    def __repr__(self):
        return "<moeperm.golden.Report %s: %s>" % (self.case, self.verdict)


def _output_arrays(case, outputs):
    """The actual outputs as contiguous numpy arrays in the case's order,
    each checked against its golden dtype and shape."""
    names = list(case.expected)
    if isinstance(outputs, (str, bytes, os.PathLike)):
        return _output_files(case, _fspath(outputs, "outputs"))
    if isinstance(outputs, dict):
        for key in outputs:
            if key not in names:
                raise ValueError("outputs has \"%s\", which is not an output of %s (%s)"
                                 % (key, case.op, ", ".join(names)))
        missing = [n for n in names if n not in outputs]
        if missing:
            raise ValueError("outputs lacks \"%s\", an output of %s" % (missing[0], case.op))
        items = [(n, outputs[n]) for n in names]
    elif isinstance(outputs, (tuple, list)):
        given = [o for o in outputs if o is not None]
        if len(given) != len(names):
            raise ValueError("outputs has %d arrays; %s has %d outputs (%s)"
                             % (len(given), case.op, len(names), ", ".join(names)))
        items = list(zip(names, given))
    else:
        if len(names) != 1:
            raise TypeError("outputs is one array; %s has %d outputs (%s): pass a dict or a "
                            "tuple" % (case.op, len(names), ", ".join(names)))
        items = [(names[0], outputs)]
    arrays = []
    for name, value in items:
        golden = case.expected[name]
        label = "outputs[\"%s\"]" % name
        v = _arrays.view(value, label, (_CODE_OF[golden.dtype],))
        arr = _arrays.as_numpy(v)
        if arr.shape != golden.shape:
            raise ValueError("%s has shape %s; the golden %s is %s"
                             % (label, list(arr.shape), name, list(golden.shape)))
        arrays.append(np.ascontiguousarray(arr))
    return arrays


def _output_files(case, path):
    """The outputs read as `moeperm compare` reads them: ``path`` is the
    file (raw or .npy) when the case has one output, else a directory of
    <output>.bin or <output>.npy."""
    names = list(case.expected)
    arrays = []
    for name in names:
        golden = case.expected[name]
        if len(names) == 1:
            file = path
        else:
            file = os.path.join(path, name + ".bin")
            npy = os.path.join(path, name + ".npy")
            if not os.path.exists(file) and os.path.exists(npy):
                file = npy
        like = _g.Tensor()
        like.dtype = _CODE_OF[golden.dtype]
        like.ndim = golden.ndim
        for d, extent in enumerate(golden.shape):
            like.shape[d] = extent
        data = ctypes.c_void_p()
        err = _g.err_buffer()
        if _g.function("moeperm_golden_tensor_read_file")(file.encode(), ctypes.byref(like),
                                                  ctypes.byref(data), err, _g.ERR_LEN) != 0:
            raise CaseError(err.value.decode("utf-8", "replace"))
        try:
            arr = np.empty(golden.shape, dtype=golden.dtype)
            if arr.nbytes:
                ctypes.memmove(arr.ctypes.data, data, arr.nbytes)
        finally:
            _g.free(data)
        arrays.append(arr)
    return arrays


def compare(case, outputs, max_ulp=0, strict_nan=False, diagnose=True):
    """compare() judges ``outputs`` against ``case``'s golden outputs, bit
    for bit, as `moeperm compare` does, and returns a Report.

    case: a Case (or a case directory's path).
    outputs: one array when the case has one output; else a dict by output
        name or a tuple in the case's order (a None is skipped, so
        moe_token_unpermute_grad's result passes as it is); numpy arrays or
        CPU tensors of the golden dtype (bf16 as np.uint16 or
        torch.bfloat16) and shape, any strides.  Or a path, read as the
        tool reads it: the file when there is one output, else a directory
        of <output>.bin or <output>.npy.
    max_ulp: elements within this many ulp are "within-tolerance" rather
        than "different" (0: the bit-exact contract).
    strict_nan: NaNs must match bit for bit too (default: any NaN equals any
        NaN).
    diagnose: name the known kernel bugs that reproduce a difference.

    Raises TypeError or ValueError naming an output of the wrong dtype or
    shape, CaseError when the library cannot judge."""
    if not isinstance(case, Case):
        case = Case.load(case)
    max_ulp = _ranged(max_ulp, "max_ulp", 0, (1 << 64) - 1)
    arrays = _output_arrays(case, outputs)
    c = case._c_case(with_outputs=True)
    judgement = ctypes.c_void_p()
    try:
        actual = (ctypes.c_void_p * max(len(arrays), 1))(
            *[a.ctypes.data if a.nbytes else None for a in arrays])
        options = _g.JudgeOptions(bool(strict_nan), max_ulp, bool(diagnose))
        err = _g.err_buffer()
        if _g.function("moeperm_golden_judge")(ctypes.byref(c), actual, ctypes.byref(options),
                                       ctypes.byref(judgement), err, _g.ERR_LEN) != 0:
            raise CaseError(err.value.decode("utf-8", "replace"))
        return _report(case, judgement)
    finally:
        if judgement:
            _g.function("moeperm_golden_judgement_free")(judgement)
        _g.function("moeperm_golden_case_free")(ctypes.byref(c))


def _report(case, j):
    fn = _g.function
    verdict = _g.VERDICTS[fn("moeperm_golden_judgement_verdict")(j)]
    outputs = {}
    for i in range(fn("moeperm_golden_judgement_output_count")(j)):
        name = fn("moeperm_golden_judgement_output_name")(j, i).decode()
        findings = [Finding(fn("moeperm_golden_judgement_finding_id")(j, i, k).decode(),
                            fn("moeperm_golden_judgement_finding_detail")(j, i, k).decode(
                                "utf-8", "replace"),
                            bool(fn("moeperm_golden_judgement_finding_exact")(j, i, k)))
                    for k in range(fn("moeperm_golden_judgement_finding_count")(j, i))]
        outputs[name] = OutputReport(
            name, _g.VERDICTS[fn("moeperm_golden_judgement_output_verdict")(j, i)],
            fn("moeperm_golden_judgement_output_compare")(j, i).contents, findings)
    summary = _g.take_string(fn("moeperm_golden_judgement_summary")(j)) or ""
    text = _g.printed(lambda stream: fn("moeperm_golden_judgement_report")(stream, j, b"  "))
    label = case.path if case.path is not None else case.name
    return Report(label, verdict, outputs, summary, text)


def compare_arrays(expected, actual, strict_nan=False):
    """compare_arrays() compares two arrays of one dtype and shape bit for
    bit, as the judge compares one output, and returns (differ, text):
    the number of differing elements and the tool's mismatch report ("" when
    none differ).  A tensor of more than two dimensions is compared as
    [shape[0], the rest]; float32, float16, bf16 (np.uint16), int32 and
    int8."""
    e_view = _arrays.view(expected, "expected", (FLOAT32, FLOAT16, BF16, INT32, INT8))
    a_view = _arrays.view(actual, "actual", (e_view.dtype,))
    e = np.ascontiguousarray(_arrays.as_numpy(e_view))
    a = np.ascontiguousarray(_arrays.as_numpy(a_view))
    if e.shape != a.shape:
        raise ValueError("actual has shape %s; expected has %s" % (list(a.shape), list(e.shape)))
    rows = e.shape[0] if e.ndim else 1
    cols = int(np.prod(e.shape[1:], dtype=np.int64)) if e.ndim > 1 else 1
    r = _g.CompareResult()
    if _g.function("moeperm_golden_compare")(e_view.dtype, rows, cols, e.ctypes.data if e.nbytes else None,
                                      a.ctypes.data if a.nbytes else None, bool(strict_nan),
                                      ctypes.byref(r)) != 0:
        raise MemoryError("out of memory comparing arrays")
    try:
        differ = r.differing
        text = _g.printed(lambda stream: _g.function("moeperm_golden_compare_report")(
            stream, e_view.dtype, ctypes.byref(r), b"  ")) if differ else ""
    finally:
        _g.function("moeperm_golden_compare_free")(ctypes.byref(r))
    return differ, text.rstrip("\n")

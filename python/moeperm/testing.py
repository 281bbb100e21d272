"""Bit-exact assertions and a pytest plugin for kernel tests.

    assert_bits_equal(case, outputs, max_ulp=None, allow_order=False)
        case a golden Case and outputs its outputs, or two arrays: passes
        when every element has the same bits (any NaN equals any NaN unless
        strict_nan=True), or within max_ulp, or (allow_order) when only
        MoeTokenUnpermuteGrad's probs_grad differs and the judge finds it
        summed in another order; fails with the report `moeperm compare`
        prints, with the helper's own frames hidden from pytest's
        traceback.

The plugin (enable it with ``pytest -p moeperm.testing``, or with
``pytest_plugins = ["moeperm.testing"]`` in a conftest.py) runs a test once
per golden case below a directory, the case's id ("hidden/bf16-h17") as the
test id.  A test asks for the argument ``golden_case`` and names the
directory with the ``golden`` mark, relative to the test file:

    @pytest.mark.golden("golden", op="MoeTokenPermute")
    def test_my_kernel(golden_case):
        outputs = golden_case.call(my_kernel)    # my_kernel(**inputs, **attrs)
        assert_bits_equal(golden_case, outputs)

or with ``--moeperm-golden DIR`` (relative to the directory pytest starts
in) or the ini option ``moeperm_golden`` (relative to the ini file's
directory) for every such test without a mark.  Without the plugin,
``golden_cases(DIR)`` is the same parametrization as a decorator.
"""
import os

# Nothing of the package beyond this module is imported here: pytest imports
# the plugin at its start (by the entry point, for any test suite), so what
# needs libmoeperm or numpy is imported by the functions that use it.  A
# pytest run that never asks for golden_case loads no library and cannot
# fail for want of one.

__all__ = ["assert_bits_equal", "golden_cases"]

_MARK = "golden"
_ARGUMENT = "golden_case"


def assert_bits_equal(expected, actual, max_ulp=None, allow_order=False, *, strict_nan=False):
    """assert_bits_equal() raises AssertionError unless ``actual`` has the
    bits of ``expected``.

    expected: a moeperm.golden.Case; actual: its outputs in any form
        moeperm.golden.compare() takes (one array, a dict by name, a tuple
        such as an operator returns).  The failure message is the text
        `moeperm compare` prints: the verdict, the diagnosis, the counts,
        the first differences and where they lie.
    max_ulp: with a case, also pass when every differing element is a pair
        of finite values at most this many ulp apart (the judge's
        "within-tolerance"; None or 0: bit for bit).
    allow_order: with a case of MoeTokenUnpermuteGrad, also pass when the
        only output that differs is probs_grad and the judge's finding for
        it is "order": every difference within what a reduction in another
        order makes (docs/judging.md).
    expected: an array (numpy, bf16 as np.uint16, or a CPU tensor); actual:
        an array of the same dtype and shape.  float32, float16, bf16, int32
        and int8 get the tool's mismatch report; other dtypes the count and
        the first difference.  Arrays of different dtypes or shapes fail;
        max_ulp and allow_order are for cases (TypeError with arrays).

    strict_nan: NaNs must match bit for bit too.  pytest shows the report,
    not this function's frames (__tracebackhide__).  Returns None (or, for
    a case, the Report of the comparison)."""
    __tracebackhide__ = True
    import numpy as np

    from . import golden
    if isinstance(expected, golden.Case):
        report = golden.compare(expected, actual, max_ulp=max_ulp or 0, strict_nan=strict_nan)
        if report.same or (max_ulp and report.verdict == "within-tolerance"):
            return report
        if allow_order and _only_order(report):
            return report
        raise AssertionError(str(report))
    if max_ulp or allow_order:
        raise TypeError("max_ulp and allow_order judge a golden case's outputs; "
                        "two arrays are compared bit for bit")
    e, a = _numpy(expected, "expected"), _numpy(actual, "actual")
    if e.dtype != a.dtype:
        raise AssertionError("actual dtype %s differs from expected dtype %s"
                             % (_word(a.dtype), _word(e.dtype)))
    if e.shape != a.shape:
        raise AssertionError("actual shape %s differs from expected shape %s"
                             % (list(a.shape), list(e.shape)))
    if e.dtype in (np.float32, np.float16, np.uint16, np.int32, np.int8):
        differ, text = golden.compare_arrays(e, a, strict_nan=strict_nan)
        if differ:
            raise AssertionError("bits differ (%s %s):\n%s" % (_word(e.dtype), list(e.shape),
                                                               text))
        return None
    eb, ab = _raw_bits(e), _raw_bits(a)
    same = eb == ab
    if not strict_nan and e.dtype.kind == "f":
        same |= np.isnan(e) & np.isnan(a)
    if not same.all():
        where = np.argwhere(~same)
        first = tuple(int(i) for i in where[0])
        raise AssertionError("bits differ (%s %s): %d of %d elements differ; first at %s: "
                             "expected %r, actual %r" % (_word(e.dtype), list(e.shape),
                                                         len(where), same.size, list(first),
                                                         e[first], a[first]))
    return None


def _only_order(report):
    """Whether every output that differs is probs_grad judged "order"."""
    differing = [o for o in report.outputs.values() if not o.same]
    return bool(differing) and all(
        o.name == "probs_grad" and o.findings and o.findings[0].id == "order" and
        o.findings[0].exact for o in differing)


def _numpy(value, name):
    """numpy bits of an array or tensor (bf16 tensors as np.uint16)."""
    import numpy as np

    from . import _arrays
    torch = _arrays._torch_module(value)
    if torch is not None:
        t = value.detach()
        if t.device.type != "cpu":
            raise TypeError("%s is on device %s; pass a CPU tensor" % (name, t.device))
        if t.dtype == torch.bfloat16:
            return t.contiguous().view(torch.int16).numpy().view(np.uint16)
        return t.contiguous().numpy()
    return np.asarray(value)


def _raw_bits(arr):
    import numpy as np
    arr = np.ascontiguousarray(arr)
    if arr.dtype.itemsize in (1, 2, 4, 8) and arr.dtype.kind in "fiub":
        return arr.view({1: np.uint8, 2: np.uint16, 4: np.uint32, 8: np.uint64}
                        [arr.dtype.itemsize])
    return arr


def _word(dtype):
    import numpy as np
    return "uint16 (bf16)" if dtype == np.uint16 else np.dtype(dtype).name


def _cases(root, op):
    from . import golden
    found = golden.cases(root, op=op)
    return found, [c.id for c in found]


def golden_cases(root, op=None):
    """golden_cases() returns a pytest.mark.parametrize of the argument
    ``golden_case`` over every case below ``root`` (relative to the current
    directory), optionally of one operator, with the cases' ids as test
    ids: the plugin's parametrization, for a test suite that does not load
    the plugin."""
    import pytest
    found, ids = _cases(os.fspath(root), op)
    return pytest.mark.parametrize(_ARGUMENT, found, ids=ids)


# -- the pytest plugin --------------------------------------------------

def pytest_addoption(parser):
    parser.addoption("--moeperm-golden", metavar="DIR", default=None,
                     help="moeperm: the golden cases a test's golden_case argument runs over, "
                          "when it has no golden mark (relative to the current directory)")
    parser.addini("moeperm_golden", "moeperm: the default directory of golden cases for "
                                    "golden_case arguments (relative to the ini file)",
                  default=None)


def pytest_configure(config):
    config.addinivalue_line(
        "markers", "%s(root, op=None): run the test once per moeperm golden case below root "
                   "(relative to the test file), optionally of one operator; the case is its "
                   "golden_case argument" % _MARK)


def _parametrized_already(definition):
    """A test that golden_cases() (or any parametrize) already runs over
    golden_case needs nothing of the plugin."""
    for mark in definition.iter_markers("parametrize"):
        names = mark.args[0] if mark.args else mark.kwargs.get("argnames", ())
        if isinstance(names, str):
            names = [n.strip() for n in names.split(",")]
        if _ARGUMENT in names:
            return True
    return False


def pytest_generate_tests(metafunc):
    if _ARGUMENT not in metafunc.fixturenames or _parametrized_already(metafunc.definition):
        return
    mark = metafunc.definition.get_closest_marker(_MARK)
    op = None
    if mark is not None:
        if not mark.args:
            raise ValueError("the golden mark of %s needs the directory of the cases"
                             % metafunc.definition.nodeid)
        root = os.fspath(mark.args[0])
        op = mark.kwargs.get("op")
        if not os.path.isabs(root):
            root = os.path.join(os.path.dirname(os.path.abspath(metafunc.module.__file__)), root)
    else:
        root = _option_root(metafunc.config)
        if not root:
            raise ValueError("%s takes golden_case but names no cases: mark it "
                             "@pytest.mark.golden(DIR) or pass --moeperm-golden DIR"
                             % metafunc.definition.nodeid)
    found, ids = _cases(root, op)
    metafunc.parametrize(_ARGUMENT, found, ids=ids)


def _option_root(config):
    """The directory of --moeperm-golden, relative to the directory pytest
    was started in, else of the ini option moeperm_golden, relative to the
    ini file's directory (the rootdir without one); None when neither is
    set."""
    root, base = config.getoption("--moeperm-golden"), config.invocation_params.dir
    if not root:
        root = config.getini("moeperm_golden")
        base = config.inipath.parent if config.inipath is not None else config.rootpath
    if not root:
        return None
    return os.path.join(os.fspath(base), os.fspath(root))

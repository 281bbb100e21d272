"""moeperm.testing: assert_bits_equal's verdicts and messages, and the
pytest plugin's parametrization over golden cases, run in a pytest of its
own."""
import os
import subprocess
import sys

import numpy as np
import pytest

import moeperm
import paths
from moeperm import golden
from moeperm.testing import assert_bits_equal


def test_equal_arrays_pass_and_any_nan_equals_any_nan():
    a = np.array([[1.0, np.nan], [-0.0, 2.0]], dtype=np.float32)
    b = a.copy()
    b.view(np.uint32)[0, 1] ^= 1
    assert_bits_equal(a, a.copy())
    assert_bits_equal(a, b)
    with pytest.raises(AssertionError):
        assert_bits_equal(a, b, strict_nan=True)


def test_differing_arrays_fail_with_the_tools_report():
    expected = moeperm.float32_to_bf16(np.linspace(-1, 1, 40, dtype=np.float32).reshape(4, 10))
    actual = expected.copy()
    actual[2, 7] ^= 0x0002
    differ, text = golden.compare_arrays(expected, actual)
    assert differ == 1
    with pytest.raises(AssertionError) as info:
        assert_bits_equal(expected, actual)
    message = str(info.value)
    assert message == "bits differ (uint16 (bf16) [4, 10]):\n" + text
    assert "1 of 40 elements differ, max distance 2 ulp" in message
    assert "token 2, column 7: expected 0x" in message


def test_signed_zero_differs():
    with pytest.raises(AssertionError, match="1 of 1 elements differ"):
        assert_bits_equal(np.array([0.0], np.float32), np.array([-0.0], np.float32))


def test_arrays_of_other_dtypes_or_shapes_fail():
    with pytest.raises(AssertionError, match=r"^actual dtype float16 differs from expected dtype "
                                             r"float32$"):
        assert_bits_equal(np.zeros(3, np.float32), np.zeros(3, np.float16))
    with pytest.raises(AssertionError, match=r"^actual shape \[2\] differs from expected shape "
                                             r"\[3\]$"):
        assert_bits_equal(np.zeros(3, np.int64), np.zeros(2, np.int64))
    with pytest.raises(AssertionError, match=r"^bits differ \(int64 \[3\]\): 1 of 3 elements "
                                             r"differ; first at \[1\]"):
        assert_bits_equal(np.arange(3), np.array([0, 5, 2]))


def test_a_case_and_wrong_outputs_fail_with_str_of_the_report():
    case = golden.Case.generate(tokens_num=6, top_k=2, hidden_size=9, dtype="bf16")
    wrong = case.expected["input_grad"].copy()
    wrong[0, 0] ^= 0x10
    with pytest.raises(AssertionError) as info:
        assert_bits_equal(case, wrong)
    assert str(info.value) == str(golden.compare(case, wrong))
    assert str(info.value).startswith("%s: MISMATCH\n" % case.name)
    assert assert_bits_equal(case, case.call()).same


def test_tensors_are_compared_by_their_bits():
    torch = pytest.importorskip("torch", reason="torch is not installed")
    t = torch.tensor([1.0, 2.0], dtype=torch.bfloat16)
    assert_bits_equal(t, t.clone())
    assert_bits_equal(t.view(torch.int16).numpy().view(np.uint16), t)
    with pytest.raises(AssertionError, match="bits differ"):
        assert_bits_equal(t, torch.tensor([1.0, 3.0], dtype=torch.bfloat16))


KERNEL_TEST = '''
import pytest
from moeperm.testing import assert_bits_equal

def kernel(permuted_output_grad, sorted_indices, num_topk, padded_mode):
    import moeperm
    out = moeperm.moe_token_permute_grad(permuted_output_grad, sorted_indices, num_topk)
    if BROKEN and out.size:
        out.reshape(-1)[0] ^= 1
    return out

BROKEN = %(broken)s

@pytest.mark.golden(%(root)r, op="MoeTokenPermuteGrad")
def test_marked(golden_case):
    assert_bits_equal(golden_case, golden_case.call(kernel))

def test_by_option(golden_case):
    assert golden_case.op
'''


def run_pytest(tmp_path, body, *args):
    tmp_path.mkdir(parents=True, exist_ok=True)
    (tmp_path / "test_kernel.py").write_text(body)
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(
        [os.path.dirname(os.path.dirname(moeperm.__file__))] +
        [p for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p]))
    return subprocess.run([sys.executable, "-m", "pytest", "-p", "moeperm.testing", "-p",
                           "no:cacheprovider", str(tmp_path / "test_kernel.py")] + list(args),
                          capture_output=True, text=True, cwd=str(tmp_path), env=env,
                          timeout=300)


def make_corpus(root):
    for name, op in (("s/b", "permute-grad"), ("s/a", "permute-grad"), ("t/c", "permute")):
        golden.Case.generate(op=op, tokens_num=4, top_k=2, hidden_size=3,
                             dtype="bf16").save(root / name)


def test_plugin_runs_a_test_per_case_with_the_case_ids(tmp_path):
    make_corpus(tmp_path / "corpus")
    r = run_pytest(tmp_path, KERNEL_TEST % {"broken": False, "root": "corpus"},
                   "--collect-only", "-q", "--moeperm-golden", "corpus")
    assert r.returncode == 0, r.stdout + r.stderr
    collected = [line for line in r.stdout.splitlines() if "::" in line]
    assert collected == ["test_kernel.py::test_marked[s/a]", "test_kernel.py::test_marked[s/b]",
                         "test_kernel.py::test_by_option[s/a]",
                         "test_kernel.py::test_by_option[s/b]",
                         "test_kernel.py::test_by_option[t/c]"]


def test_plugin_reports_a_wrong_kernel_with_the_tools_report(tmp_path):
    make_corpus(tmp_path / "corpus")
    r = run_pytest(tmp_path, KERNEL_TEST % {"broken": True, "root": "corpus"},
                   "-k", "test_marked", "--moeperm-golden", "corpus")
    assert r.returncode == 1, r.stdout + r.stderr
    assert "2 failed" in r.stdout
    assert "MISMATCH" in r.stdout and "1 of 12 elements differ" in r.stdout


def test_plugin_without_a_directory_says_how_to_give_one(tmp_path):
    r = run_pytest(tmp_path, "def test_x(golden_case):\n    pass\n")
    assert r.returncode != 0
    assert "mark it @pytest.mark.golden(DIR) or pass --moeperm-golden DIR" in r.stdout + r.stderr


def test_ini_option_is_relative_to_the_ini_file_and_the_command_line_to_the_invocation(
        tmp_path):
    # A project with its pytest.ini and corpus at the top, its tests in
    # tests/, pytest started in tests/.
    make_corpus(tmp_path / "corpus")
    (tmp_path / "pytest.ini").write_text("[pytest]\nmoeperm_golden = corpus\n")
    tests = tmp_path / "tests"
    body = KERNEL_TEST % {"broken": False, "root": "../corpus"}
    # Node ids are relative to the rootdir, the ini file's directory.
    expected = ["tests/test_kernel.py::test_by_option[%s]" % c for c in ("s/a", "s/b", "t/c")]
    for args in ([], ["--moeperm-golden", os.path.join("..", "corpus")]):
        r = run_pytest(tests, body, "--collect-only", "-q", "-k", "test_by_option", *args)
        assert r.returncode == 0, r.stdout + r.stderr
        assert [line for line in r.stdout.splitlines() if "::" in line] == expected


def test_plugin_in_a_run_that_never_uses_it_loads_no_library(tmp_path):
    # Loaded by its entry point (installed) or -p, for any suite: no library
    # is loaded and a library that cannot be found fails nothing.
    body = "import sys\n\ndef test_unrelated():\n    assert 'moeperm._capi' not in sys.modules\n"
    r = pytest_in(tmp_path, body, ["-q", "-p", "moeperm.testing"],
                  {"MOEPERM_LIBRARY_DIR": str(tmp_path / "nonexistent")})
    assert r.returncode == 0, r.stdout + r.stderr
    assert "1 passed" in r.stdout


def test_example_test_runs_over_the_committed_corpus():
    example = os.path.join(paths.SOURCE_ROOT, "examples", "test_my_kernel.py")
    env = dict(os.environ, PYTHONPATH=os.path.dirname(os.path.dirname(moeperm.__file__)))
    r = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "moeperm.testing", "-p",
                        "no:cacheprovider", example, "--collect-only"], capture_output=True,
                       text=True, env=env, timeout=300)
    assert r.returncode == 0, r.stdout + r.stderr
    ids = [line.split("[", 1)[1].rstrip("]") for line in r.stdout.splitlines() if "::" in line]
    grad_cases = [c.id for c in golden.cases(paths.CORPUS, op="MoeTokenPermuteGrad")]
    assert ids[:len(grad_cases)] == grad_cases


# -- how pytest finds the plugin, and xdist ----------------------------------

MARKED_TEST = '''
import os
import pytest
%(header)s
from moeperm.testing import assert_bits_equal

@pytest.mark.golden(%(root)r, op=%(op)r)
def test_case(golden_case):
    assert_bits_equal(golden_case, golden_case.call())
    log = os.environ.get("CASE_LOG")
    if log:
        with open(log, "a") as f:
            f.write("%%s %%s\\n" %% (os.environ.get("PYTEST_XDIST_WORKER", "-"), golden_case.id))
'''


def pytest_in(tmp_path, body, args, env_changes=None, drop=()):
    """pytest run in a process of its own on ``body`` as test_case.py, with
    this package importable and nothing naming the plugin unless ``args``
    or ``env_changes`` do."""
    (tmp_path / "test_case.py").write_text(body)
    env = {k: v for k, v in os.environ.items()
           if k not in ("PYTEST_PLUGINS", "PYTEST_DISABLE_PLUGIN_AUTOLOAD", "PYTEST_ADDOPTS")
           + tuple(drop)}
    env["PYTHONPATH"] = os.pathsep.join(
        [os.path.dirname(os.path.dirname(moeperm.__file__))] +
        [p for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p])
    env.update(env_changes or {})
    return subprocess.run([sys.executable, "-m", "pytest", "-p", "no:cacheprovider",
                           str(tmp_path / "test_case.py")] + list(args),
                          capture_output=True, text=True, cwd=str(tmp_path), env=env,
                          timeout=600)


def marked(header="", op="MoeTokenPermuteGrad", root=None):
    return MARKED_TEST % {"header": header, "op": op,
                          "root": root or os.path.join(paths.CORPUS, "dtype-topk")}


def entry_point_installed():
    from importlib import metadata
    try:
        group = metadata.entry_points(group="pytest11")
    except TypeError:  # Python < 3.10
        group = metadata.entry_points().get("pytest11", [])
    return any(ep.name == "moeperm.testing" and ep.value == "moeperm.testing" for ep in group)


def test_installed_package_loads_the_plugin_by_its_entry_point_without_p(tmp_path):
    if not entry_point_installed():
        pytest.skip("the package under test is not installed with its metadata (a source tree "
                    "has no pytest11 entry point)")
    r = pytest_in(tmp_path, marked(), ["-q"])
    assert r.returncode == 0, r.stdout + r.stderr
    assert "12 passed" in r.stdout and "PytestUnknownMarkWarning" not in r.stdout
    # -p with the entry point's name: one plugin, registered once.
    r = pytest_in(tmp_path, marked(), ["-q", "-p", "moeperm.testing"])
    assert r.returncode == 0, r.stdout + r.stderr
    # And it can be turned off by that name.
    r = pytest_in(tmp_path, marked(), ["-q", "-p", "no:moeperm.testing"])
    assert r.returncode != 0 and "fixture 'golden_case' not found" in r.stdout


@pytest.mark.parametrize("how", ["PYTEST_PLUGINS", "pytest_plugins", "PYTEST_PLUGINS and -p"])
def test_plugin_loads_by_the_ways_the_docs_give_for_a_source_tree(tmp_path, how):
    # Autoloading off: the source tree has no entry point, so one of these
    # must name the plugin (meson devenv sets PYTEST_PLUGINS).
    env = {"PYTEST_DISABLE_PLUGIN_AUTOLOAD": "1"}
    args = ["-q"]
    header = ""
    if how.startswith("PYTEST_PLUGINS"):
        env["PYTEST_PLUGINS"] = "moeperm.testing"
    else:
        header = 'pytest_plugins = ["moeperm.testing"]'
    if how.endswith("-p"):
        args += ["-p", "moeperm.testing"]
    r = pytest_in(tmp_path, marked(header), args, env)
    assert r.returncode == 0, r.stdout + r.stderr
    assert "12 passed" in r.stdout


def test_golden_corpus_spreads_over_xdist_workers_each_case_run_once(tmp_path):
    pytest.importorskip("xdist", reason="pytest-xdist is not installed (Debian: "
                                        "python3-pytest-xdist)")
    log = tmp_path / "cases.log"
    r = pytest_in(tmp_path, marked(op=None, root=paths.CORPUS),
                  ["-q", "-n", "2", "-p", "xdist.plugin", "-p", "moeperm.testing"],
                  {"PYTEST_DISABLE_PLUGIN_AUTOLOAD": "1", "CASE_LOG": str(log)})
    assert r.returncode == 0, r.stdout + r.stderr
    runs = [line.split(" ", 1) for line in log.read_text().splitlines()]
    ids = sorted(case_id for _, case_id in runs)
    corpus = sorted(c.id for c in golden.cases(paths.CORPUS))
    assert len(corpus) > 100
    # Every case exactly once, over both workers: each worker collected the
    # same ids in the same order (xdist refuses to run otherwise).
    assert ids == corpus
    assert {worker for worker, _ in runs} == {"gw0", "gw1"}
    assert "%d passed" % len(corpus) in r.stdout


def test_max_ulp_accepts_a_case_within_it_and_not_beyond():
    case = golden.Case.generate(tokens_num=6, top_k=2, hidden_size=9, dtype="bf16")
    near = case.expected["input_grad"].copy()
    near[1, 2] += 1 if near[1, 2] & 0x7f80 != 0x7f80 else 0
    with pytest.raises(AssertionError, match="MISMATCH"):
        assert_bits_equal(case, near)
    assert assert_bits_equal(case, near, max_ulp=1).verdict == "within-tolerance"
    far = near.copy()
    far[1, 3] ^= 0x0040
    with pytest.raises(AssertionError, match="MISMATCH"):
        assert_bits_equal(case, far, max_ulp=1)
    with pytest.raises(TypeError, match="golden case"):
        assert_bits_equal(near, near, max_ulp=1)


def _probs_grad_in_column_order(case):
    """probs_grad summed one column at a time in float32: another order of
    the same products, which the judge calls "order"."""
    x = case.inputs["permuted_tokens"].astype(np.float32)
    g = case.inputs["unpermuted_tokens_grad"].astype(np.float32)
    idx = case.inputs["sorted_indices"]
    k = case.expected["probs_grad"].shape[1]
    out = np.zeros(case.expected["probs_grad"].shape, np.float32)
    for i, s in enumerate(idx):
        acc = np.float32(0)
        for h in range(x.shape[1]):
            acc = np.float32(acc + np.float32(x[s, h] * g[i // k, h]))
        out[i // k, i % k] = acc
    return out


def test_allow_order_accepts_probs_grad_summed_in_another_order_only():
    case = golden.Case.generate(op="unpermute-grad", tokens_num=8, top_k=4, hidden_size=300,
                                dtype="float32")
    grad = case.expected["permuted_tokens_grad"]
    reordered = _probs_grad_in_column_order(case)
    outputs = {"permuted_tokens_grad": grad, "probs_grad": reordered}
    report = golden.compare(case, outputs)
    assert report.outputs["probs_grad"].diagnosis[0] == "order", str(report)
    with pytest.raises(AssertionError, match="order"):
        assert_bits_equal(case, outputs)
    assert assert_bits_equal(case, outputs, allow_order=True).verdict == "different"
    wrong = reordered * np.float32(2)
    with pytest.raises(AssertionError, match="wrong"):
        assert_bits_equal(case, {"permuted_tokens_grad": grad, "probs_grad": wrong},
                          allow_order=True)
    broken = grad.copy()
    broken[0, 0] = -broken[0, 0]
    with pytest.raises(AssertionError, match="permuted_tokens_grad"):
        assert_bits_equal(case, {"permuted_tokens_grad": broken, "probs_grad": reordered},
                          allow_order=True)


HIDDEN_FRAMES_TEST = '''
import numpy as np
from moeperm import golden
from moeperm.testing import assert_bits_equal

def test_wrong():
    case = golden.Case.generate(tokens_num=4, top_k=2, hidden_size=3, dtype="bf16")
    out = case.expected["input_grad"].copy()
    out[0, 0] ^= 1
    assert_bits_equal(case, out)
'''


def test_a_failure_shows_the_report_not_the_helpers_source(tmp_path):
    r = run_pytest(tmp_path, HIDDEN_FRAMES_TEST)
    assert r.returncode == 1, r.stdout + r.stderr
    assert "MISMATCH" in r.stdout and "diagnosis:" in r.stdout
    assert "assert_bits_equal(case, out)" in r.stdout
    assert "__tracebackhide__" not in r.stdout
    assert "golden.compare(expected, actual" not in r.stdout

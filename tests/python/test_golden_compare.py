"""moeperm.golden.compare: the verdict, the counts and the diagnosis of the
judge, and str(report) the very text `moeperm compare` prints for the same
case and the same outputs file."""
import os
import subprocess

import numpy as np
import pytest

import models
import paths
from moeperm import golden

CORPUS_CASE = os.path.join(paths.CORPUS, "hidden", "bf16-h17")


def tool_compare(case_dir, outputs_path, *options):
    r = subprocess.run([paths.tool(), "compare", case_dir, outputs_path] + list(options),
                       capture_output=True, text=True)
    assert r.returncode in (0, 1), r.stderr
    return r.stdout


def flipped(array, positions, mask):
    out = array.copy()
    bits = out.view({2: np.uint16, 4: np.uint32}[out.dtype.itemsize])
    for p in positions:
        bits[p] ^= mask
    return out


def test_same_outputs_are_same_with_the_tools_line(tmp_path):
    case = golden.Case.load(CORPUS_CASE)
    report = golden.compare(case, case.expected["input_grad"])
    assert report.verdict == "same" and report.same and report.diagnosis == []
    assert report.outputs["input_grad"].elements == 85 and report.differ == 0
    case.expected["input_grad"].tofile(tmp_path / "out.bin")
    assert str(report) + "\n" == tool_compare(CORPUS_CASE, str(tmp_path / "out.bin"))


@pytest.mark.parametrize("suffix", [".bin", ".npy"])
def test_flipped_bits_give_the_tools_report_line_for_line(tmp_path, suffix):
    case = golden.Case.load(CORPUS_CASE)
    bad = flipped(case.expected["input_grad"], [(1, 3), (2, 5), (4, 16)], 0x0001)
    path = str(tmp_path / ("out" + suffix))
    if suffix == ".npy":
        np.save(path, bad)
    else:
        bad.tofile(path)
    report = golden.compare(case, bad)
    assert report.verdict == "different" and not report.same
    out = report.outputs["input_grad"]
    assert (out.elements, out.differ, out.max_ulp, out.nan_mismatch) == (85, 3, 1, 0)
    assert out.first[0] == (1, 3, int(case.expected["input_grad"][1, 3]), int(bad[1, 3]))
    text = tool_compare(CORPUS_CASE, path)
    assert str(report).splitlines() == text.splitlines()
    assert str(golden.compare(case, path)) == str(report)


def test_max_ulp_gives_within_tolerance_as_the_tool_says_it(tmp_path):
    case = golden.Case.load(CORPUS_CASE)
    bad = case.expected["input_grad"].copy()
    bad[0, 0] += 1  # one ulp up (a positive value or a positive zero)
    bad.tofile(tmp_path / "out.bin")
    report = golden.compare(case, bad, max_ulp=2)
    assert report.verdict == "within-tolerance" and report.summary.startswith("within 2 ulp")
    assert str(report).splitlines() == tool_compare(CORPUS_CASE, str(tmp_path / "out.bin"),
                                                    "--max-ulp", "2").splitlines()
    assert golden.compare(case, bad).verdict == "different"


def test_every_output_of_a_two_output_case_is_judged_like_the_tool(tmp_path):
    case = golden.Case.generate(op="unpermute-grad", tokens_num=7, top_k=3, hidden_size=40,
                                dtype="float16", probs_dtype="bf16", values="cancel", seed=9)
    path = case.save(tmp_path / "case")
    ptg = flipped(case.expected["permuted_tokens_grad"], [(3, 4)], 0x0001)
    pg = flipped(case.expected["probs_grad"], [(1, 1)], 0x0003)
    (tmp_path / "out").mkdir()
    ptg.tofile(tmp_path / "out" / "permuted_tokens_grad.bin")
    np.save(tmp_path / "out" / "probs_grad.npy", pg)
    loaded = golden.Case.load(path)
    report = golden.compare(loaded, (ptg, pg))
    assert list(report.outputs) == ["permuted_tokens_grad", "probs_grad"]
    assert [o.differ for o in report.outputs.values()] == [1, 1]
    assert report.outputs["probs_grad"].diagnosis == report.diagnosis[-1:]
    assert str(report).splitlines() == tool_compare(path, str(tmp_path / "out")).splitlines()
    by_name = golden.compare(loaded, {"probs_grad": pg, "permuted_tokens_grad": ptg})
    assert str(by_name) == str(report)


def test_a_known_bug_is_named_in_the_diagnosis():
    # A kernel that never adds the last slot of each token.
    case = golden.Case.generate(tokens_num=16, top_k=4, hidden_size=32, dtype="float32", seed=4)
    grad = case.inputs["permuted_output_grad"]
    idx = case.inputs["sorted_indices"].copy()
    idx.reshape(-1, 4)[:, 3] = grad.shape[0] + 100  # past the rows: never added
    wrong = models.permute_grad(grad, idx, 4)
    report = golden.compare(case, wrong)
    assert report.verdict == "different"
    assert report.diagnosis[0] == "missing-slot"
    finding = report.outputs["input_grad"].findings[0]
    assert finding.exact and "slot 3" in finding.detail
    assert "diagnosis: missing-slot" in str(report)


def test_strict_nan_tells_nan_payloads_apart():
    case = golden.Case.generate(tokens_num=8, top_k=2, hidden_size=16, dtype="float32",
                                values="nan-inf")
    expected = case.expected["input_grad"]
    nan = np.isnan(expected)
    assert nan.any()
    other = expected.copy()
    other.view(np.uint32)[nan] ^= 0x1
    assert golden.compare(case, other).same
    strict = golden.compare(case, other, strict_nan=True)
    assert strict.outputs["input_grad"].differ == int(nan.sum())


def test_outputs_of_the_wrong_kind_are_refused_naming_them():
    case = golden.Case.generate(op="permute", tokens_num=4, top_k=2, hidden_size=3, dtype="bf16")
    permuted = case.expected["permuted_tokens"]
    with pytest.raises(TypeError, match=r"^outputs\[\"permuted_tokens\"\] dtype float32 is not "
                                        r"supported here; it must be uint16 \(bf16 bit "
                                        r"patterns\)$"):
        golden.compare(case, (permuted.astype(np.float32), case.expected["sorted_indices"]))
    with pytest.raises(ValueError, match=r"^outputs\[\"sorted_indices\"\] has shape \[7\]; the "
                                         r"golden sorted_indices is \[8\]$"):
        golden.compare(case, (permuted, case.expected["sorted_indices"][:7]))
    with pytest.raises(TypeError, match=r"^outputs is one array; MoeTokenPermute has 2 outputs"):
        golden.compare(case, permuted)
    with pytest.raises(ValueError, match=r"^outputs has 1 arrays; MoeTokenPermute has 2"):
        golden.compare(case, [permuted])
    with pytest.raises(ValueError, match=r"^outputs lacks \"sorted_indices\""):
        golden.compare(case, {"permuted_tokens": permuted})
    with pytest.raises(ValueError, match=r"^max_ulp is -1, expected an integer from 0"):
        golden.compare(case, case.call(), max_ulp=-1)

"""int64 sorted_indices are refused alike by every door: the aclnn API takes
INT32 only, and the package, the torch operators and the `moeperm` tool
(make-case, run) all give the library's sentence and status rather than
narrowing the values behind the caller's back."""
import hashlib
import json
import subprocess

import numpy as np
import pytest

import moeperm
from moeperm import golden

import paths

SENTENCE = "the device refuses sorted_indices dtype 9 (int64): it takes INT32 (3)"
GRAD = np.ones((4, 3), np.float32)
IDX64 = np.arange(4, dtype=np.int64)

CALLS = {
    "moe_token_permute_grad": lambda idx: moeperm.moe_token_permute_grad(GRAD, idx, 2),
    "moe_token_unpermute": lambda idx: moeperm.moe_token_unpermute(GRAD, idx),
    "moe_token_unpermute_grad": lambda idx: moeperm.moe_token_unpermute_grad(
        GRAD, np.ones((4, 3), np.float32), idx),
    "Case.from_arrays": lambda idx: golden.Case.from_arrays(
        "permute-grad", {"permuted_output_grad": GRAD, "sorted_indices": idx}, num_topk=2),
}


@pytest.mark.parametrize("name", sorted(CALLS))
def test_every_function_refuses_int64_with_the_librarys_sentence(name):
    with pytest.raises(moeperm.Error) as info:
        CALLS[name](IDX64)
    assert str(info.value) == SENTENCE and info.value.status == 161002
    CALLS[name](IDX64.astype(np.int32))  # the same values as int32 are taken


def test_tensors_are_refused_alike():
    torch = pytest.importorskip("torch", reason="torch is not installed")
    with pytest.raises(moeperm.Error) as info:
        moeperm.moe_token_permute_grad(torch.from_numpy(GRAD), torch.from_numpy(IDX64), 2)
    assert str(info.value) == SENTENCE


def test_make_case_refuses_int64_with_the_same_sentence(tmp_path):
    IDX64.tofile(tmp_path / "si.bin")
    GRAD.tofile(tmp_path / "g.bin")
    r = subprocess.run([paths.tool(), "make-case", "--out", str(tmp_path / "cases"), "--name",
                        "c", "--op", "permute-grad", "--top-k", "2",
                        "--input", "permuted_output_grad=%s:float32:4x3" % (tmp_path / "g.bin"),
                        "--input", "sorted_indices=%s:int64:4" % (tmp_path / "si.bin")],
                       capture_output=True, text=True)
    assert r.returncode == 2
    assert r.stderr.strip().endswith("(MOEPERM_ERR_PARAM_INVALID): " + SENTENCE)


def test_a_case_holding_int64_sorted_indices_is_refused_by_run_and_by_load(tmp_path):
    path = golden.Case.from_arrays("permute-grad", {
        "permuted_output_grad": GRAD, "sorted_indices": IDX64.astype(np.int32)},
        num_topk=2).save(tmp_path / "c")
    manifest = json.loads((tmp_path / "c" / "case.json").read_text())
    IDX64.tofile(tmp_path / "c" / "sorted_indices.bin")
    entry = manifest["tensors"]["sorted_indices"]
    entry["dtype"], entry["sha256"] = "int64", hashlib.sha256(IDX64.tobytes()).hexdigest()
    (tmp_path / "c" / "case.json").write_text(json.dumps(manifest))
    r = subprocess.run([paths.tool(), "run", path, "--out", str(tmp_path / "out.bin")],
                       capture_output=True, text=True)
    assert r.returncode == 2
    with pytest.raises(golden.CaseError) as info:
        golden.Case.load(path)
    assert str(info.value).endswith(SENTENCE)
    assert r.stderr.strip() == "moeperm run: " + str(info.value)
    assert not (tmp_path / "out.bin").exists()

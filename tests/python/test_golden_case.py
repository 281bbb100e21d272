"""moeperm.golden's cases: read as the manifest and the raw files say,
generated with the bytes of `moeperm golden`, made from arrays with the
models' outputs, written and found; refusals with the library's sentence
and nothing written."""
import filecmp
import json
import os
import subprocess

import numpy as np
import pytest

import moeperm
import models
import paths
from moeperm import golden

NUMPY_OF = {"float32": np.float32, "float16": np.float16, "bf16": np.uint16, "int8": np.int8,
            "int32": np.int32, "int64": np.int64, "float64": np.float64}


def corpus_case_dirs():
    found = []
    for top, _, files in os.walk(paths.CORPUS):
        if "case.json" in files:
            found.append(top)
    return sorted(found)


@pytest.mark.parametrize("path", corpus_case_dirs()[::7],
                         ids=lambda p: os.path.relpath(p, paths.CORPUS))
def test_load_gives_what_the_manifest_and_the_raw_files_hold(path):
    manifest = json.load(open(os.path.join(path, "case.json")))
    case = golden.Case.load(path)
    assert case.path == path and case.op == manifest["op"]
    assert case.name == manifest["name"] and case.description == manifest["description"]
    assert case.seed == manifest["seed"] and case.generator == manifest["generator"]
    assert case.command == manifest.get("command")
    attrs = manifest.get("attrs", manifest)
    if case.op == "MoeTokenPermuteGrad":
        assert case.attrs == {"num_topk": attrs["top_k"], "padded_mode": attrs["padded_mode"]}
    tensors = {**case.inputs, **case.expected, **case.exact}
    assert list(tensors) == list(manifest["tensors"])
    for name, spec in manifest["tensors"].items():
        raw = np.fromfile(os.path.join(path, spec["file"]), dtype=NUMPY_OF[spec["dtype"]])
        assert tensors[name].dtype == NUMPY_OF[spec["dtype"]]
        assert list(tensors[name].shape) == spec["shape"]
        assert models.bits(tensors[name]).reshape(-1).tolist() == models.bits(raw).tolist()


# Options of `moeperm golden`, and the same as Case.generate() keywords.
GENERATED = {
    "permute-grad-bf16": (["--tokens", "6", "--top-k", "3", "--hidden", "20", "--dtype", "bf16"],
                          dict(tokens_num=6, top_k=3, hidden_size=20, dtype="bf16")),
    "permute-grad-rows-values": (
        ["--tokens", "9", "--top-k", "2", "--hidden", "7", "--dtype", "fp16", "--rows", "11",
         "--values", "rounding", "--routing", "random", "--seed", "77"],
        dict(tokens_num=9, top_k=2, hidden_size=7, dtype=np.float16, num_rows=11, values="rounding",
             routing="random", seed=77)),
    "permute-int64-sentinels": (
        ["--op", "permute", "--tokens", "8", "--top-k", "4", "--hidden", "5", "--dtype", "int8",
         "--index-dtype", "int64", "--sentinels", "--num-out-tokens", "-3", "--experts", "9",
         "--hot", "20"],
        dict(op="permute", tokens_num=8, top_k=4, hidden_size=5, dtype="int8", index_dtype="int64",
             sentinels=True, num_out_tokens=-3, num_experts=9, hot_percent=20)),
    "unpermute-probs-dtype": (
        ["--op", "MoeTokenUnpermute", "--tokens", "5", "--top-k", "4", "--hidden", "33",
         "--dtype", "float32", "--probs-dtype", "bf16", "--probs-values", "masking",
         "--rows", "17"],
        dict(op="MoeTokenUnpermute", tokens_num=5, top_k=4, hidden_size=33, dtype="float32",
             probs_dtype="bf16", probs_values="masking", num_rows=17)),
    "unpermute-no-probs": (
        ["--op", "unpermute", "--tokens", "7", "--top-k", "1", "--hidden", "9", "--dtype",
         "bf16", "--no-probs"],
        dict(op="unpermute", tokens_num=7, top_k=1, hidden_size=9, dtype="bf16", has_probs=False)),
    "unpermute-grad-chip": (
        ["--op", "unpermute-grad", "--tokens", "6", "--top-k", "2", "--hidden", "1500",
         "--dtype", "float16", "--probs-dtype", "float32", "--values", "cancel",
         "--ub-bytes", "40000"],
        dict(op="unpermute-grad", tokens_num=6, top_k=2, hidden_size=1500, dtype="float16",
             probs_dtype="float32", values="cancel", ub_bytes=40000)),
    "unpermute-grad-named-chip": (
        ["--op", "unpermute-grad", "--tokens", "6", "--top-k", "2", "--hidden", "40",
         "--dtype", "bf16", "--probs-dtype", "float32", "--chip", "Ascend910B4-1"],
        dict(op="unpermute-grad", tokens_num=6, top_k=2, hidden_size=40, dtype="bf16",
             probs_dtype="float32", chip="Ascend910B4-1")),
    "permute-grad-domain-edge": (
        ["--tokens", "9", "--top-k", "-1", "--hidden", "5", "--dtype", "float32", "--rows", "12",
         "--routing", "repeats", "--huge-indices", "--padded-mode"],
        dict(tokens_num=9, top_k=1, num_topk=-1, hidden_size=5, dtype="float32", num_rows=12,
             routing="repeats", huge_indices=True, padded_mode=True)),
    "unpermute-grad-domain-edge": (
        ["--op", "unpermute-grad", "--tokens", "5", "--top-k", "3", "--hidden", "7", "--dtype",
         "bf16", "--rows", "40", "--routing", "sparse", "--extra-indices", "4"],
        dict(op="unpermute-grad", tokens_num=5, top_k=3, hidden_size=7, dtype="bf16",
             num_rows=40, routing="sparse", extra_indices=4)),
    "permute-rank-3": (
        ["--op", "permute", "--tokens", "6", "--top-k", "2", "--hidden", "12", "--dtype",
         "float16", "--hidden-outer", "4"],
        dict(op="permute", tokens_num=6, top_k=2, hidden_size=12, dtype="float16",
             hidden_outer=4)),
    "name-with-quotes": (
        ["--tokens", "3", "--top-k", "2", "--hidden", "4", "--dtype", "fp32", "--name",
         "it's \"$(x)\" a case"],
        dict(tokens_num=3, top_k=2, hidden_size=4, dtype="fp32", name="it's \"$(x)\" a case")),
}


@pytest.mark.parametrize("options,keywords", GENERATED.values(), ids=GENERATED.keys())
def test_generate_gives_the_bytes_of_the_tool(tmp_path, options, keywords):
    subprocess.run([paths.tool(), "golden", "--out", str(tmp_path / "tool")] + options,
                   check=True, capture_output=True)
    (made,) = os.listdir(tmp_path / "tool")
    case = golden.Case.generate(**keywords)
    assert case.name == made
    case.save(tmp_path / "python" / case.name)
    compared = filecmp.dircmp(tmp_path / "tool" / made, tmp_path / "python" / made)
    assert compared.left_only == compared.right_only == compared.diff_files == []
    _, mismatch, errors = filecmp.cmpfiles(tmp_path / "tool" / made, tmp_path / "python" / made,
                                           os.listdir(tmp_path / "tool" / made), shallow=False)
    assert mismatch == errors == []
    assert len(os.listdir(tmp_path / "tool" / made)) >= 4


def test_generated_case_reloads_with_equal_fields(tmp_path):
    case = golden.Case.generate(op="unpermute-grad", tokens_num=4, top_k=3, hidden_size=16,
                                dtype="bf16",
                                vector_cores=5, seed=3)
    path = case.save(tmp_path / "c")
    again = golden.Case.load(path)
    assert again.attrs == case.attrs == {"padded_mode": False, "restore_shape": None,
                                         "chip": (moeperm.CHIP_A2.ub_bytes, 5)}
    assert list(again.exact) == ["probs_grad_exact"] and again.exact["probs_grad_exact"].dtype \
        == np.float64
    for kind in ("inputs", "expected", "exact"):
        a, b = getattr(case, kind), getattr(again, kind)
        assert list(a) == list(b)
        assert all(models.bits(a[k]).tolist() == models.bits(b[k]).tolist() for k in a)
    assert (again.name, again.command, again.recipe) == (case.name, case.command, case.recipe)


def test_from_arrays_computes_the_models_outputs():
    rng = np.random.default_rng(1)
    grad = models.random_grad(rng, (30, 11), np.uint16)
    idx = models.random_permutation(rng, 36)
    case = golden.Case.from_arrays("MoeTokenPermuteGrad",
                                   {"permuted_output_grad": grad, "sorted_indices": idx},
                                   num_topk=4)
    assert case.op == "MoeTokenPermuteGrad" and case.attrs == {"num_topk": 4,
                                                               "padded_mode": False}
    models.assert_same_bits(models.permute_grad(grad, idx, 4), case.expected["input_grad"])

    x = models.random_grad(rng, (5, 6), np.float16)
    ids = rng.integers(0, 5, (5, 2)).astype(np.int64)
    case = golden.Case.from_arrays("permute", {"tokens": x, "indices": ids}, num_out_tokens=-1)
    want = models.permute(x, ids, -1)
    assert case.expected["sorted_indices"].tolist() == want[1].tolist()
    models.assert_same_bits(want[0], case.expected["permuted_tokens"])


def test_from_arrays_gives_exact_probs_grad_as_float64():
    # bf16 values over a few octaves: their products and the float64 sum of
    # 16 of them are exact, so numpy's dot is the exact value.
    rng = np.random.default_rng(2)
    x = models.float32_to_bf16_bits(rng.uniform(-4, 4, (12, 16)).astype(np.float32))
    g = models.float32_to_bf16_bits(rng.uniform(-4, 4, (4, 16)).astype(np.float32))
    idx = models.random_permutation(rng, 12)
    probs = models.float32_to_bf16_bits(rng.uniform(0, 1, (4, 3)).astype(np.float32))
    case = golden.Case.from_arrays("MoeTokenUnpermuteGrad",
                                   {"permuted_tokens": x, "unpermuted_tokens_grad": g,
                                    "sorted_indices": idx, "probs": probs},
                                   restore_shape=[4, 16])
    assert case.attrs["restore_shape"] == (4, 16)
    assert case.exact["probs_grad_exact"].tolist() == models.exact_dot(x, g, idx, 3).tolist()
    models.assert_same_bits(models.unpermute_grad_tokens(g, idx, 12, probs),
                            case.expected["permuted_tokens_grad"])


def test_from_arrays_takes_tensors():
    torch = pytest.importorskip("torch", reason="torch is not installed")
    x = torch.arange(12, dtype=torch.bfloat16).reshape(6, 2)
    case = golden.Case.from_arrays("unpermute", {"permuted_tokens": x,
                                                 "sorted_indices": torch.arange(
                                                     6, dtype=torch.int32)})
    assert case.inputs["permuted_tokens"].dtype == np.uint16
    assert case.inputs["sorted_indices"].dtype == np.int32
    assert moeperm.bf16_to_float32(case.expected["unpermuted_tokens"]).tolist() == \
        x.float().tolist()


def test_from_arrays_refused_by_the_operator_raises_its_status_and_sentence():
    with pytest.raises(moeperm.Error, match=r"^the device's result is undetermined: "
                                            r"sorted_indices\[4\] = -1 is negative") as info:
        golden.Case.from_arrays("permute-grad", {
            "permuted_output_grad": np.ones((8, 3), np.float32),
            "sorted_indices": np.array([0, 1, 2, 3, -1, 5, 6, 7], np.int32)}, num_topk=2)
    assert info.value.status == 161002


def test_from_arrays_misuse_names_the_input_or_attribute():
    grad = {"permuted_output_grad": np.ones((4, 2), np.float32),
            "sorted_indices": np.arange(4, dtype=np.int32)}
    with pytest.raises(ValueError, match=r"^inputs has \"tokens\", which is not an input of "
                                         r"MoeTokenPermuteGrad \(permuted_output_grad, "
                                         r"sorted_indices\)$"):
        golden.Case.from_arrays("MoeTokenPermuteGrad", dict(grad, tokens=grad["sorted_indices"]),
                                num_topk=2)
    with pytest.raises(ValueError, match=r"^inputs lacks \"sorted_indices\""):
        golden.Case.from_arrays("MoeTokenPermuteGrad",
                                {"permuted_output_grad": grad["permuted_output_grad"]},
                                num_topk=2)
    with pytest.raises(TypeError, match=r"^a MoeTokenPermuteGrad case needs num_topk$"):
        golden.Case.from_arrays("MoeTokenPermuteGrad", grad)
    with pytest.raises(TypeError, match=r"^MoeTokenPermuteGrad has no attribute num_out_tokens; "
                                        r"its attributes are num_topk, padded_mode$"):
        golden.Case.from_arrays("MoeTokenPermuteGrad", grad, num_topk=2, num_out_tokens=2)
    with pytest.raises(ValueError, match=r"^op is \"MoeTokenFrob\", expected "
                                         r"MoeTokenPermuteGrad"):
        golden.Case.from_arrays("MoeTokenFrob", grad)
    with pytest.raises(TypeError, match=r"^inputs\[\"permuted_output_grad\"\] dtype float64"):
        golden.Case.from_arrays("MoeTokenPermuteGrad", dict(
            grad, permuted_output_grad=np.ones((4, 2))), num_topk=2)


def test_generate_misuse_names_the_keyword():
    with pytest.raises(TypeError, match=r"^Case.generate\(\) needs hidden"):
        golden.Case.generate(tokens_num=4, top_k=2, dtype="bf16")
    with pytest.raises(ValueError, match=r"^top_k is 513, expected an integer from 1 to 512$"):
        golden.Case.generate(tokens_num=4, top_k=513, hidden_size=2, dtype="bf16")
    with pytest.raises(ValueError, match=r"^dtype is \"double\", expected float32"):
        golden.Case.generate(tokens_num=4, top_k=2, hidden_size=2, dtype="double")
    with pytest.raises(ValueError, match=r"^values is \"loud\", expected one of normal, "):
        golden.Case.generate(tokens_num=4, top_k=2, hidden_size=2, dtype="bf16", values="loud")
    with pytest.raises(ValueError, match=r"^index_dtype is float32, expected int32 or int64$"):
        golden.Case.generate(op="permute", tokens_num=4, top_k=2, hidden_size=2, dtype="bf16",
                             index_dtype="float32")


def test_generate_spec_refused_by_the_library_says_why():
    with pytest.raises(golden.CaseError, match=r"^top_k is 2, but without probs "
                                               r"MoeTokenUnpermute takes top_k 1$"):
        golden.Case.generate(op="unpermute", tokens_num=4, top_k=2, hidden_size=2, dtype="bf16",
                             has_probs=False)
    with pytest.raises(golden.CaseError, match=r"^routing sparse gives every slot its own row, "
                                               r"but num_rows 7 is below tokens_num\*top_k = 8$"):
        golden.Case.generate(tokens_num=4, top_k=2, hidden_size=2, dtype="bf16", num_rows=7,
                             routing="sparse")
    with pytest.raises(golden.CaseError, match=r"^num_rows is 9, expected 0 to 8$"):
        golden.Case.generate(op="permute", tokens_num=4, top_k=2, hidden_size=2, dtype="bf16",
                             num_rows=9)


def test_save_refuses_an_existing_case_without_force_and_leaves_it(tmp_path):
    a = golden.Case.generate(tokens_num=4, top_k=2, hidden_size=3, dtype="bf16", seed=1)
    b = golden.Case.generate(tokens_num=4, top_k=2, hidden_size=3, dtype="bf16", seed=2)
    a.save(tmp_path / "c")
    before = open(tmp_path / "c" / "case.json").read()
    with pytest.raises(golden.CaseError, match=r"already exists"):
        b.save(tmp_path / "c")
    assert open(tmp_path / "c" / "case.json").read() == before
    b.save(tmp_path / "c", force=True)
    assert golden.Case.load(tmp_path / "c").seed == 2


def test_save_with_force_refuses_a_directory_that_is_not_a_case(tmp_path):
    (tmp_path / "notes").mkdir()
    (tmp_path / "notes" / "notes.txt").write_text("keep me")
    case = golden.Case.generate(tokens_num=2, top_k=1, hidden_size=2, dtype="fp32")
    with pytest.raises(golden.CaseError, match=r"notes.txt"):
        case.save(tmp_path / "notes", force=True)
    assert os.listdir(tmp_path / "notes") == ["notes.txt"]


def test_load_of_a_missing_or_damaged_case_names_the_file(tmp_path):
    with pytest.raises(golden.CaseError, match=str(tmp_path / "nowhere")) as info:
        golden.Case.load(tmp_path / "nowhere")
    assert isinstance(info.value, moeperm.Error)
    case = golden.Case.generate(tokens_num=4, top_k=2, hidden_size=3, dtype="bf16")
    path = case.save(tmp_path / "c")
    data = bytearray(open(os.path.join(path, "input_grad.bin"), "rb").read())
    data[0] ^= 1
    open(os.path.join(path, "input_grad.bin"), "wb").write(bytes(data))
    with pytest.raises(golden.CaseError, match=r"input_grad.*sha256"):
        golden.Case.load(path)


def test_cases_are_sorted_with_relative_ids_and_filtered_by_operator(tmp_path):
    for name, op in (("b/two", "permute"), ("a/one", "permute-grad"), ("a/three", "unpermute"),
                     (".hidden/four", "permute")):
        golden.Case.generate(op=op, tokens_num=3, top_k=1, hidden_size=2, dtype="fp32").save(
            tmp_path / name)
    found = golden.cases(tmp_path)
    assert [c.id for c in found] == ["a/one", "a/three", "b/two"]
    assert [c.op for c in found] == ["MoeTokenPermuteGrad", "MoeTokenUnpermute",
                                     "MoeTokenPermute"]
    assert [c.id for c in golden.cases(str(tmp_path), op="MoeTokenPermute")] == ["b/two"]
    assert [c.id for c in golden.cases(tmp_path / "a" / "one")] == ["one"]
    # A case found is read on first use, and is a path.
    assert found[2].expected["permuted_tokens"].shape == (3, 2)
    assert golden.Case.load(found[0]).op == "MoeTokenPermuteGrad"


def test_cases_of_a_missing_directory_is_an_error_naming_it(tmp_path):
    with pytest.raises(golden.CaseError, match=str(tmp_path / "gone")):
        golden.cases(tmp_path / "gone")


def test_call_runs_the_reference_or_a_given_function_with_named_outputs():
    case = golden.Case.generate(op="unpermute-grad", tokens_num=3, top_k=2, hidden_size=8,
                                dtype="fp16")
    outputs = case.call()
    assert list(outputs) == ["permuted_tokens_grad", "probs_grad"]
    assert case.call(lambda **kw: {"x": 1}) == {"x": 1}
    with pytest.raises(ValueError, match=r"^the function returned 1 outputs; "
                                         r"MoeTokenUnpermuteGrad has 2"):
        case.call(lambda **kw: kw["permuted_tokens"])

"""The Python package at the input domain's edge and with named chips:
every case of the committed domain suites loads, runs through the
package's own functions and compares the same; ``chip=`` takes a chip's
name as well as a moeperm.Chip, in the operators, the golden cases (kept
as the name through save and load) and the torch_npu stand-in; tokens of
rank 3 go through moe_token_permute; the pytest plugin's parametrization
takes the domain suites."""
import os

import numpy as np
import pytest

import moeperm
from moeperm import golden
from moeperm.testing import assert_bits_equal, golden_cases

import paths

DOMAIN_SUITES = ("permute-grad-domain", "permute-domain", "unpermute-domain",
                 "unpermute-grad-domain")
B3 = os.path.join(paths.CORPUS, "unpermute-grad-chips", "bf16-pfloat32-t41-k101-h7685-ascend910b3")


def _domain_cases():
    found = []
    for suite in DOMAIN_SUITES:
        root = os.path.join(paths.CORPUS, suite)
        if os.path.isdir(root):
            found += golden.cases(root)
    return found


def test_the_corpus_has_the_domain_suites():
    for suite in DOMAIN_SUITES:
        assert golden.cases(os.path.join(paths.CORPUS, suite)), suite


@pytest.mark.parametrize("case", _domain_cases(), ids=lambda c: c.id)
def test_a_domain_case_runs_through_the_package_and_compares_the_same(case):
    outputs = case.call()
    assert_bits_equal(case, outputs)


@golden_cases(os.path.join(paths.CORPUS, "permute-grad-domain"))
def test_the_plugins_parametrization_takes_the_domain_suites(golden_case):
    assert golden_case.op == "MoeTokenPermuteGrad"
    assert golden.compare(golden_case, golden_case.call()).same


def test_num_topk_minus_one_and_padded_mode_are_kept_as_given(tmp_path):
    case = golden.Case.load(os.path.join(paths.CORPUS, "permute-grad-domain",
                                         "float32-num-topk-minus1-huge-repeats-padded-t24-h16"))
    assert case.attrs == {"num_topk": -1, "padded_mode": True}
    assert case.recipe["routing"] == "repeats" and case.recipe["huge_indices"]
    again = golden.Case.load(case.save(tmp_path / "copy"))
    assert again.attrs == case.attrs and again.recipe == case.recipe


def test_chip_takes_a_name_as_its_numbers():
    case = golden.Case.load(B3)
    assert case.attrs["chip"] == "Ascend910B3"
    by_name = case.call()
    by_numbers = case.call(lambda **kw: moeperm.moe_token_unpermute_grad(
        **dict(kw, chip=moeperm.Chip(196352, 40))))
    on_a2 = case.call(lambda **kw: moeperm.moe_token_unpermute_grad(
        **dict(kw, chip=moeperm.CHIP_A2)))
    assert golden.compare(case, by_name).same and golden.compare(case, by_numbers).same
    assert not golden.compare(case, on_a2).same
    assert moeperm.Chip.by_name("Ascend910B3") == moeperm.Chip(196352, 40)
    assert moeperm.chip_names()[0] == "Ascend910B1" and len(moeperm.chip_names()) == 13
    assert all(moeperm.Chip.by_name(n).ub_bytes == 196352 for n in moeperm.chip_names())


def test_a_named_chip_survives_save_and_load_and_from_arrays(tmp_path):
    case = golden.Case.generate(op="unpermute-grad", tokens_num=3, top_k=2, hidden_size=8,
                                dtype="bf16", chip="Ascend910_9362")
    assert case.attrs["chip"] == "Ascend910_9362"
    again = golden.Case.load(case.save(tmp_path / "named"))
    assert again.attrs == case.attrs
    made = golden.Case.from_arrays("unpermute-grad", case.inputs, chip="Ascend910_9362")
    assert made.attrs["chip"] == "Ascend910_9362"
    text = open(made.save(tmp_path / "made") + "/case.json").read()
    assert '"chip": "Ascend910_9362", "ub_bytes": 196352, "vector_cores": 40' in text
    with pytest.raises(ValueError, match=r'^chip is "Ascend950", which is not a chip moeperm '
                                         r'knows'):
        golden.Case.from_arrays("unpermute-grad", case.inputs, chip="Ascend950")
    with pytest.raises(ValueError, match=r"^chip gives vector_cores 40, and vector_cores is 48$"):
        golden.Case.generate(op="unpermute-grad", tokens_num=3, top_k=2, hidden_size=8,
                             dtype="bf16", chip=moeperm.Chip(196352, 40), vector_cores=48)


def test_tokens_of_rank_3_are_permuted_as_their_rows():
    rng = np.random.default_rng(3)
    tokens = rng.standard_normal((5, 2, 3)).astype(np.float32)
    ids = rng.integers(0, 6, (5, 2)).astype(np.int32)
    permuted, sorted_indices = moeperm.moe_token_permute(tokens, ids, -3)
    flat, flat_sorted = moeperm.moe_token_permute(tokens.reshape(5, 6), ids, -3)
    assert permuted.shape == (7, 2, 3)
    assert (permuted.reshape(7, 6) == flat).all() and (sorted_indices == flat_sorted).all()
    with pytest.raises(ValueError, match=r"^tokens has 1 dims; it must have 2"):
        moeperm.moe_token_permute(tokens.reshape(-1), ids)


def test_the_torch_npu_stand_in_takes_a_chips_name():
    torch = pytest.importorskip("torch")
    from moeperm import torch_npu
    case = golden.Case.load(B3)
    t = {k: torch.from_numpy(v.astype(np.int16)).view(torch.bfloat16) if v.dtype == np.uint16
         else torch.from_numpy(v) for k, v in case.inputs.items()}
    by_name = torch_npu.npu_moe_token_unpermute_grad(
        t["permuted_tokens"], t["unpermuted_tokens_grad"], t["sorted_indices"], t["probs"],
        chip="Ascend910B3")
    by_numbers = torch_npu.npu_moe_token_unpermute_grad(
        t["permuted_tokens"], t["unpermuted_tokens_grad"], t["sorted_indices"], t["probs"],
        chip=moeperm.Chip(196352, 40))
    assert torch.equal(by_name[1], by_numbers[1])
    assert (by_name[1].numpy() == case.expected["probs_grad"]).all()
    with pytest.raises(ValueError, match=r'^chip is "B3"'):
        torch_npu.npu_moe_token_unpermute_grad(
            t["permuted_tokens"], t["unpermuted_tokens_grad"], t["sorted_indices"], t["probs"],
            chip="B3")

"""Case.save() writes only what Case.load() reads: a case made from arrays
with a dimension beyond the format's 2^40 (an empty array numpy makes
freely) is refused with the library's sentence and nothing is written;
a case inside another case is refused; text of every UTF-8 length, in
every string the manifest carries, round-trips."""
import os

import numpy as np
import pytest

from moeperm import golden


def permute_grad_case(rows, hidden, **strings):
    return golden.Case.from_arrays(
        "MoeTokenPermuteGrad",
        {"permuted_output_grad": np.zeros((rows, hidden), np.float32),
         "sorted_indices": np.arange(rows, dtype=np.int32)},
        num_topk=1, **strings)


@pytest.mark.parametrize("hidden", [2**40 + 1, 2**41, 2**58])
def test_save_refuses_an_empty_array_wider_than_the_format(tmp_path, hidden):
    case = permute_grad_case(0, hidden)
    with pytest.raises(golden.CaseError, match=r"shape\[1\] is %d, larger than" % hidden):
        case.save(tmp_path / "wide")
    assert os.listdir(tmp_path) == []


def test_save_at_the_widest_dimension_reads_back(tmp_path):
    case = permute_grad_case(0, 2**40)
    back = golden.Case.load(case.save(tmp_path / "widest"))
    assert back.inputs["permuted_output_grad"].shape == (0, 2**40)


def test_save_refuses_a_case_inside_another(tmp_path):
    outer = permute_grad_case(4, 8).save(tmp_path / "outer")
    with pytest.raises(golden.CaseError, match="inside the case"):
        permute_grad_case(4, 8).save(os.path.join(outer, "inner"))
    assert sorted(os.listdir(outer)) == ["case.json", "input_grad.bin",
                                         "permuted_output_grad.bin", "sorted_indices.bin"]


def test_utf8_of_every_length_round_trips(tmp_path):
    text = "a \u00e9 \u20ac \U0001F600 \U0010FFFF"
    case = permute_grad_case(4, 8, name=text, description=text)
    back = golden.Case.load(case.save(tmp_path / "utf8"))
    assert back.name == text and back.description == text

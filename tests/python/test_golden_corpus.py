"""Every committed golden case, whatever operators the corpus holds,
reproduced from Python: the case's inputs through the package's function
of its operator give the golden outputs bit for bit.  And a generated case
of every operator and dtype, so that each operator's marshalling is
checked against the library's own call of it even where the corpus has no
case of it."""
import pytest

from moeperm import golden
from moeperm.testing import golden_cases

import paths

CORPUS = golden.cases(paths.CORPUS)


def test_the_corpus_is_there_and_holds_only_operators_of_the_family():
    assert CORPUS, "no case below %s" % paths.CORPUS
    assert {c.op for c in CORPUS} <= set(golden.OPERATORS)


@golden_cases(paths.CORPUS)
def test_committed_case_is_reproduced_from_python(golden_case):
    report = golden.compare(golden_case, golden_case.call(), strict_nan=True)
    assert report.same, str(report)


GENERATED = [
    dict(op=op, dtype=dtype, **extra)
    for op, extras in (
        ("MoeTokenPermuteGrad", [dict(top_k=4), dict(top_k=3, num_rows=20)]),
        ("MoeTokenPermute", [dict(top_k=4), dict(top_k=2, num_out_tokens=-5, index_dtype="int64",
                                                 sentinels=True)]),
        ("MoeTokenUnpermute", [dict(top_k=4, num_rows=25), dict(top_k=1, has_probs=False)]),
        ("MoeTokenUnpermuteGrad", [dict(top_k=4, num_rows=25, values="cancel"),
                                   dict(top_k=1, has_probs=False)]))
    for extra in extras
    for dtype in ("float32", "float16", "bf16")]


@pytest.mark.parametrize("spec", GENERATED, ids=lambda s: "-".join(str(v) for v in s.values()))
def test_generated_case_of_every_operator_is_reproduced_from_python(spec):
    case = golden.Case.generate(tokens_num=8, hidden_size=300, seed=11, **spec)
    outputs = case.call()
    report = golden.compare(case, outputs, strict_nan=True)
    assert report.same, str(report)

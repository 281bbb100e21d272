"""The package's argument names are the C API's and the manifest's: each
operator function's inputs are its C function's parameters, in order; the
two-phase marshalling table lists the header's parameters; Case.generate's
keywords are moeperm_golden_spec's fields; Case.from_arrays takes the
manifest's names of attributes as well as the functions'.  And values of
the wrong kind are refused naming the argument: a bool for an integer, a
string UTF-8 cannot hold."""
import inspect
import re

import numpy as np
import pytest

import moeperm
from moeperm import _capi, golden

import paths

HEADER = open(paths.HEADER).read()
GOLDEN_HEADER = open(paths.HEADER.replace("moeperm.h", "golden.h")).read()


def c_parameters(function, header=HEADER):
    """The parameter names of a prototype in the header, in order."""
    match = re.search(r"\b%s\(([^)]*)\);" % function, header)
    assert match, "no prototype of %s in the header" % function
    return [re.search(r"(\w+)(\[\w*\])?\s*$", p.strip()).group(1)
            for p in match.group(1).split(",")]


def c_fields(struct, header=GOLDEN_HEADER):
    body = re.search(r"typedef struct %s \{(.*?)\} %s;" % (struct, struct), header, re.S).group(1)
    body = re.sub(r"/\*.*?\*/", "", body, flags=re.S)
    names = []
    for declaration in body.split(";"):
        for part in declaration.split(","):
            found = re.search(r"(\w+)(\[\w*\])?\s*$", part.strip())
            if found:
                names.append(found.group(1))
    return names


OPERATORS = {
    "token_permute_grad": (moeperm.moe_token_permute_grad, _capi.TOKEN_PERMUTE_GRAD),
    "token_permute": (moeperm.moe_token_permute, _capi.TOKEN_PERMUTE),
    "token_unpermute": (moeperm.moe_token_unpermute, _capi.TOKEN_UNPERMUTE),
    "token_unpermute_grad": (moeperm.moe_token_unpermute_grad, _capi.TOKEN_UNPERMUTE_GRAD),
}
# The C outputs, which Python takes as out= (a tuple where there are two).
OUTPUTS = {"out", "permute_tokens_out", "sorted_indices_out", "permuted_tokens_grad_out",
           "probs_grad_out"}


@pytest.mark.parametrize("stem", sorted(OPERATORS))
def test_marshalling_table_lists_the_headers_parameters_in_order(stem):
    _, op = OPERATORS[stem]
    expected = [p for p in c_parameters("moeperm_%s_get_workspace_size" % stem)
                if p not in ("restore_shape_len", "workspace_size", "executor")]
    assert [name for name, _ in op.params] == expected


@pytest.mark.parametrize("stem", sorted(OPERATORS))
def test_function_inputs_are_the_c_functions_parameters_in_order(stem):
    function, _ = OPERATORS[stem]
    expected = [p for p in c_parameters("moeperm_%s_get_workspace_size" % stem)
                if p not in OUTPUTS | {"restore_shape_len", "workspace_size", "executor"}]
    python = [p for p in inspect.signature(function).parameters if p not in ("out", "chip")]
    assert python == expected


def test_the_chip_keyword_is_the_c_chips_name_and_fields():
    assert c_parameters("moeperm_executor_set_chip") == ["executor", "chip"]
    assert list(moeperm.Chip._fields) == c_fields("moeperm_chip", HEADER)


def test_route_takes_the_c_names():
    params = c_parameters("moeperm_route_sorted_indices")
    assert list(inspect.signature(moeperm.route).parameters) == [params[0], params[2]]


def test_generate_keywords_are_the_spec_fields():
    fields = c_fields("moeperm_golden_spec")
    keywords = list(inspect.signature(golden.Case.generate).parameters)
    assert keywords and set(keywords) <= set(fields), set(keywords) - set(fields)
    # Everything of the spec a caller sets (the description is made).
    assert set(fields) - set(keywords) == {"description"}


def test_from_arrays_takes_the_manifests_attribute_names_as_the_functions():
    grad = {"permuted_output_grad": np.ones((4, 2), np.float32),
            "sorted_indices": np.arange(4, dtype=np.int32)}
    by_c = golden.Case.from_arrays("permute-grad", grad, num_topk=2)
    by_manifest = golden.Case.from_arrays("permute-grad", grad, top_k=2)
    assert by_c.attrs == by_manifest.attrs == {"num_topk": 2, "padded_mode": False}
    assert (by_c.expected["input_grad"] == by_manifest.expected["input_grad"]).all()
    with pytest.raises(TypeError, match=r"^give num_topk or top_k \(its manifest name\), "
                                        r"not both$"):
        golden.Case.from_arrays("permute-grad", grad, top_k=2, num_topk=2)

    ug = {"permuted_tokens": np.ones((4, 3), np.float32),
          "unpermuted_tokens_grad": np.ones((2, 3), np.float32),
          "sorted_indices": np.arange(4, dtype=np.int32), "probs": np.ones((2, 2), np.float32)}
    a = golden.Case.from_arrays("unpermute-grad", ug, ub_bytes=40000)
    assert a.attrs["chip"] == moeperm.Chip(40000, 48)
    b = golden.Case.from_arrays("unpermute-grad", ug, chip=moeperm.Chip(40000, 48))
    assert a.attrs == b.attrs
    with pytest.raises(TypeError, match=r"^give chip or ub_bytes and vector_cores"):
        golden.Case.from_arrays("unpermute-grad", ug, chip=moeperm.CHIP_A2, vector_cores=4)


def test_loaded_case_attrs_call_the_function_under_its_names(tmp_path):
    case = golden.Case.generate(op="permute-grad", tokens_num=3, top_k=2, hidden_size=4,
                                dtype="float32")
    again = golden.Case.load(case.save(tmp_path / "c"))
    assert again.attrs == {"num_topk": 2, "padded_mode": False}
    assert set(again.attrs) <= set(inspect.signature(again.function).parameters)


BOOL_FOR_INTEGER = [
    ("num_topk", lambda v: moeperm.moe_token_permute_grad(np.ones((2, 1), np.float32),
                                                          np.arange(2, dtype=np.int32), v)),
    ("num_out_tokens", lambda v: moeperm.moe_token_permute(np.ones((2, 1), np.float32),
                                                           np.zeros(2, np.int32), v)),
    ("num_experts", lambda v: moeperm.route(np.zeros(2, np.int32), v)),
    (r"restore_shape\[0\]", lambda v: moeperm.moe_token_unpermute(
        np.ones((2, 1), np.float32), np.arange(2, dtype=np.int32), restore_shape=[v])),
    ("chip ub_bytes", lambda v: moeperm.moe_token_unpermute_grad(
        np.ones((2, 1), np.float32), np.ones((2, 1), np.float32), np.arange(2, dtype=np.int32),
        chip=(v, 48))),
    ("top_k", lambda v: golden.Case.generate(tokens_num=2, top_k=v, hidden_size=2,
                                             dtype="bf16")),
    ("num_topk", lambda v: golden.Case.from_arrays(
        "permute-grad", {"permuted_output_grad": np.ones((2, 1), np.float32),
                         "sorted_indices": np.arange(2, dtype=np.int32)}, num_topk=v)),
]


@pytest.mark.parametrize("name,call", BOOL_FOR_INTEGER, ids=[n for n, _ in BOOL_FOR_INTEGER])
@pytest.mark.parametrize("value", [True, np.bool_(True)], ids=["bool", "numpy_bool"])
def test_a_bool_for_an_integer_is_refused_naming_it(name, call, value):
    with pytest.raises(TypeError, match=r"^%s is a (bool|bool_); it must be an integer$" % name):
        call(value)


def test_a_lone_surrogate_in_a_description_or_name_is_a_value_error_naming_it(tmp_path):
    grad = {"permuted_output_grad": np.ones((2, 1), np.float32),
            "sorted_indices": np.arange(2, dtype=np.int32)}
    with pytest.raises(ValueError, match=r"^description has '\\udc80' at position 2, which is "
                                         r"not text UTF-8 can hold \(a lone surrogate\)$"):
        golden.Case.from_arrays("permute-grad", grad, num_topk=1, description="ab\udc80")
    with pytest.raises(ValueError, match=r"^name has '\\ud800' at position 0"):
        golden.Case.from_arrays("permute-grad", grad, num_topk=1, name="\ud800x")
    with pytest.raises(ValueError, match=r"^name has '\\ud800' at position 1"):
        golden.Case.generate(tokens_num=2, top_k=1, hidden_size=1, dtype="bf16", name="a\ud800")
    # Set on a case afterwards, it is refused when written, nothing written.
    case = golden.Case.from_arrays("permute-grad", grad, num_topk=1)
    case.description = "x\udfff"
    with pytest.raises(ValueError, match=r"^'x\\udfff' has '\\udfff' at position 1, which is "
                                         r"not text UTF-8 can hold"):
        case.save(tmp_path / "c")
    assert not (tmp_path / "c").exists()

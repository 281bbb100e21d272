"""How a kernel test in Python uses moeperm: run your kernel on every golden
case of its operator and judge its outputs bit for bit, with the report
`moeperm compare` prints when they differ.

The "kernels" here are stand-ins written in numpy, one for
MoeTokenPermuteGrad and one for MoeTokenPermute; replace them with calls
into yours (a torch_npu op, a simulator, a C extension).  Each takes the
case's inputs and attributes as keywords, as moeperm's own functions do.

    meson devenv -C build python3 -m pytest -p moeperm.testing examples/test_my_kernel.py
"""
import numpy as np
import pytest

import moeperm
from moeperm.testing import assert_bits_equal

# The committed corpus, relative to this file.
CORPUS = "../golden"


def widen(x):
    return moeperm.bf16_to_float32(x) if x.dtype == np.uint16 else x.astype(np.float32)


def narrow(acc, dtype):
    if dtype == np.uint16:
        return moeperm.float32_to_bf16(acc)
    return moeperm.float32_to_float16(acc) if dtype == np.float16 else acc


def my_permute_grad(permuted_output_grad, sorted_indices, num_topk, padded_mode=False):
    """input_grad[t] = the rows sorted_indices[t*K .. t*K+K-1] of the
    gradient, summed in float32 in slot order from the first slot (+0.0
    when it is dropped), dropped slots (index >= rows) skipped, rounded
    once; num_topk -1 is 1, and floor(L / K) tokens are summed, as on the
    device."""
    rows, hidden = permuted_output_grad.shape
    grad = widen(permuted_output_grad)
    top_k = 1 if num_topk == -1 else num_topk
    tokens = sorted_indices.size // top_k
    slots = sorted_indices[:tokens * top_k].reshape(tokens, top_k).astype(np.int64)
    acc = np.zeros((tokens, hidden), dtype=np.float32)
    with np.errstate(over="ignore", invalid="ignore"):
        for k in range(top_k):
            kept = slots[:, k] < rows
            row = grad[np.where(kept, slots[:, k], 0)] if rows else acc
            acc = np.where(kept[:, None], row if k == 0 else acc + row, acc)
    return narrow(acc, permuted_output_grad.dtype)


def my_permute(tokens, indices, num_out_tokens=0, padded_mode=False):
    """The copies of each token grouped by expert, in a stable sort of the
    flattened expert ids; the first num_out rows kept."""
    flat = indices.reshape(-1)
    top_k = 1 if indices.ndim == 1 else indices.shape[1]
    order = np.argsort(flat, kind="stable")
    sorted_indices = np.empty(flat.size, dtype=np.int32)
    sorted_indices[order] = np.arange(flat.size, dtype=np.int32)
    rows = num_out_tokens if num_out_tokens > 0 else num_out_tokens + flat.size
    rows = min(max(rows, 0), flat.size)
    return tokens[order[:rows] // top_k], sorted_indices


@pytest.mark.golden(CORPUS, op="MoeTokenPermuteGrad")
def test_my_permute_grad_matches_every_golden_case(golden_case):
    assert_bits_equal(golden_case, golden_case.call(my_permute_grad))


@pytest.mark.golden(CORPUS, op="MoeTokenPermute")
def test_my_permute_matches_every_golden_case(golden_case):
    assert_bits_equal(golden_case, golden_case.call(my_permute))

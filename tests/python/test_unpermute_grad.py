"""moe_token_unpermute_grad: permuted_tokens_grad against the numpy model
bit for bit; probs_grad within the rounding error any summation order could
make around the float64 dot product; the chip reaching the library."""
import numpy as np
import pytest

import moeperm
import models
from moeperm import golden
from test_unpermute import random_probs

DTYPES = [np.float32, np.float16, np.uint16]
IDS = {np.float32: "float32", np.float16: "float16", np.uint16: "bf16"}
UNIT_ROUNDOFF = {np.float32: 2.0 ** -24, np.float16: 2.0 ** -11, np.uint16: 2.0 ** -8}


def mixed_values(rng, shape, dtype, octaves=(-12, 12)):
    """Random signs and mantissas over many octaves: dot products whose
    float32 sums depend on their order."""
    v = rng.standard_normal(shape) * 2.0 ** rng.integers(octaves[0], octaves[1], shape)
    return models.narrow(v.astype(np.float32), dtype)


@pytest.mark.parametrize("dtype", DTYPES, ids=IDS.get)
@pytest.mark.parametrize("probs_dtype", DTYPES, ids=IDS.get)
@pytest.mark.parametrize("tokens,top_k,hidden,dropped", [
    (1, 1, 1, 0), (7, 2, 17, 0), (33, 4, 64, 0), (16, 8, 40, 30), (9, 3, 5, 26)])
def test_permuted_tokens_grad_equals_model_bit_for_bit(dtype, probs_dtype, tokens, top_k,
                                                       hidden, dropped):
    rng = np.random.default_rng(tokens * 1000 + top_k * 10 + hidden)
    rows = tokens * top_k - dropped
    x = models.random_grad(rng, (rows, hidden), dtype)
    g = models.random_grad(rng, (tokens, hidden), dtype)
    idx = models.random_permutation(rng, tokens * top_k)
    probs = random_probs(rng, (tokens, top_k), probs_dtype)
    tokens_grad, probs_grad = moeperm.moe_token_unpermute_grad(x, g, idx, probs)
    assert type(tokens_grad) is np.ndarray and tokens_grad.dtype == dtype
    assert tokens_grad.shape == (rows, hidden)
    assert probs_grad.dtype == probs_dtype and probs_grad.shape == (tokens, top_k)
    models.assert_same_bits(models.unpermute_grad_tokens(g, idx, rows, probs), tokens_grad)


@pytest.mark.parametrize("dtype", DTYPES, ids=IDS.get)
def test_without_probs_rows_are_the_gradient_bits_and_probs_grad_is_none(dtype):
    rng = np.random.default_rng(3)
    x = models.random_grad(rng, (20, 7), dtype)
    g = models.random_grad(rng, (24, 7), dtype)
    idx = models.random_permutation(rng, 24)
    tokens_grad, probs_grad = moeperm.moe_token_unpermute_grad(x, g, idx)
    assert probs_grad is None
    models.assert_same_bits(models.unpermute_grad_tokens(g, idx, 20), tokens_grad)


@pytest.mark.parametrize("dtype", DTYPES, ids=IDS.get)
@pytest.mark.parametrize("probs_dtype", DTYPES, ids=IDS.get)
@pytest.mark.parametrize("hidden", [5, 64, 150, 1000, 3000])
def test_probs_grad_is_the_dot_product_within_any_order_rounding(dtype, probs_dtype, hidden):
    # Any order of a float32 sum of H products is within (H+1) u32 * sum|x g|
    # of the exact value; the narrowing adds half an ulp of the result.
    rng = np.random.default_rng(hidden)
    tokens, top_k = 6, 4
    rows = tokens * top_k - 3
    # fp16 holds neither the inputs nor the sums of the wide range.
    octaves = (-8, 2) if np.float16 in (dtype, probs_dtype) else (-12, 12)
    x = mixed_values(rng, (rows, hidden), dtype, octaves)
    g = mixed_values(rng, (tokens, hidden), dtype, octaves)
    idx = models.random_permutation(rng, tokens * top_k)
    probs = random_probs(rng, (tokens, top_k), probs_dtype)
    _, probs_grad = moeperm.moe_token_unpermute_grad(x, g, idx, probs)
    exact = models.exact_dot(x, g, idx, top_k)
    xs = models.widen(x).astype(np.float64)
    gs = models.widen(g).astype(np.float64)
    slots = idx.reshape(tokens, top_k)
    magnitude = np.array([[np.abs(xs[s]) @ np.abs(gs[n]) if s < rows else 0.0
                           for s in slots[n]] for n in range(tokens)])
    got = models.widen(probs_grad).astype(np.float64)
    bound = ((hidden + 1) * 2.0 ** -24 * magnitude * (1 + UNIT_ROUNDOFF[probs_dtype])
             + UNIT_ROUNDOFF[probs_dtype] * np.abs(exact) * 1.01)
    assert (np.abs(got - exact) <= bound).all(), np.abs(got - exact) - bound
    assert (got[slots >= rows] == 0).all()


def test_chip_changes_the_order_only_where_the_tiling_cuts_rows():
    rng = np.random.default_rng(1)
    x = mixed_values(rng, (32, 1000), np.float32)
    g = mixed_values(rng, (8, 1000), np.float32)
    idx = models.random_permutation(rng, 32)
    probs = np.ones((8, 4), np.float32)
    default = moeperm.moe_token_unpermute_grad(x, g, idx, probs)
    a2 = moeperm.moe_token_unpermute_grad(x, g, idx, probs, chip=moeperm.CHIP_A2)
    small = moeperm.moe_token_unpermute_grad(x, g, idx, probs, chip=moeperm.Chip(32768, 1))
    assert models.bits(default[1]).tolist() == models.bits(a2[1]).tolist()
    # 1000 fp32 columns are one chunk on A2 and two on a 32 KiB buffer.
    assert (models.bits(default[1]) != models.bits(small[1])).any()
    assert models.bits(default[0]).tolist() == models.bits(small[0]).tolist()
    assert moeperm.CHIP_A2 == (196352, 48)


@pytest.mark.parametrize("ub_bytes,vector_cores", [(32768, 1), (65536, 7), (261888, 64)])
def test_chip_gives_the_probs_grad_of_a_case_generated_for_that_chip(ub_bytes, vector_cores):
    # The generator plans in C with moeperm_executor_set_chip(); the Python
    # call must reach the same plan.
    case = golden.Case.generate(op="MoeTokenUnpermuteGrad", tokens_num=9, top_k=3, hidden_size=2500,
                                dtype="bf16", probs_dtype="float32", values="cancel",
                                ub_bytes=ub_bytes, vector_cores=vector_cores)
    assert case.attrs["chip"] == (ub_bytes, vector_cores)
    tokens_grad, probs_grad = moeperm.moe_token_unpermute_grad(**case.inputs, **case.attrs)
    assert probs_grad.tolist() == case.expected["probs_grad"].tolist()
    assert tokens_grad.tolist() == case.expected["permuted_tokens_grad"].tolist()


def test_restore_shape_is_accepted_and_ignored():
    rng = np.random.default_rng(4)
    x = models.random_grad(rng, (12, 6), np.float16)
    g = models.random_grad(rng, (4, 6), np.float16)
    idx = models.random_permutation(rng, 12)
    probs = random_probs(rng, (4, 3), np.float16)
    plain = moeperm.moe_token_unpermute_grad(x, g, idx, probs)
    shaped = moeperm.moe_token_unpermute_grad(x, g, idx, probs, False, [4, 6])
    for a, b in zip(plain, shaped):
        assert models.bits(a).tolist() == models.bits(b).tolist()


def test_strided_inputs_give_the_contiguous_result():
    rng = np.random.default_rng(5)
    x = models.random_grad(rng, (40, 60), np.uint16)[::2, 3::2]  # [20, 29]
    g = models.random_grad(rng, (29, 12), np.uint16).T[2:7]      # [5, 29]
    idx = models.random_permutation(rng, 20)
    probs = random_probs(rng, (4, 5), np.float32).T               # [5, 4]
    got = moeperm.moe_token_unpermute_grad(x, g, idx, probs)
    want = moeperm.moe_token_unpermute_grad(np.ascontiguousarray(x), np.ascontiguousarray(g),
                                            idx, np.ascontiguousarray(probs))
    for a, b in zip(got, want):
        assert models.bits(a).tolist() == models.bits(b).tolist()
    models.assert_same_bits(models.unpermute_grad_tokens(np.ascontiguousarray(g), idx, 20,
                                                         np.ascontiguousarray(probs)), got[0])


def test_refusals_carry_the_library_sentence():
    x = np.ones((4, 3), np.float32)
    g = np.ones((2, 3), np.float32)
    idx = np.arange(4, dtype=np.int32)
    probs = np.ones((2, 2), np.float32)
    with pytest.raises(moeperm.Error, match=r"^the device refuses unpermuted_tokens_grad dtype 1 "
                                            r"\(float16\): it must be permuted_tokens's, 0 "
                                            r"\(float32\)$"):
        moeperm.moe_token_unpermute_grad(x, g.astype(np.float16), idx, probs)
    with pytest.raises(moeperm.Error, match=r"^the device refuses num_out_tokens = 0") as info:
        moeperm.moe_token_unpermute_grad(x[:0], g, idx, probs)
    assert info.value.status == 561002
    with pytest.raises(moeperm.Error, match=r"^chip vector_cores = 5000 is outside "
                                            r"\[1, 4096\]$") as info:
        moeperm.moe_token_unpermute_grad(x, g, idx, probs, chip=(32768, 5000))
    assert info.value.status == 161002
    with pytest.raises(moeperm.Error, match=r"^chip ub_bytes = 1 is outside \[32768, 16777216\]$"):
        moeperm.moe_token_unpermute_grad(x, g, idx, probs, chip=moeperm.Chip(1, 4))


def test_misuse_is_a_type_or_value_error_naming_the_argument():
    x = np.ones((4, 3), np.float32)
    g = np.ones((2, 3), np.float32)
    idx = np.arange(4, dtype=np.int32)
    with pytest.raises(ValueError, match=r'^chip is "A2", which is not a chip moeperm knows '
                                         r'\(Ascend910B1, .*, Ascend910_9392\); a chip without a '
                                         r'name is moeperm.Chip\(ub_bytes, vector_cores\)$'):
        moeperm.moe_token_unpermute_grad(x, g, idx, np.ones((2, 2), np.float32),
                                         chip="A2")
    with pytest.raises(TypeError, match=r"^chip is a bytes; it must be a moeperm.Chip"):
        moeperm.moe_token_unpermute_grad(x, g, idx, chip=b"Ascend910B3")
    with pytest.raises(TypeError, match=r"^chip is a int; it must be a moeperm.Chip"):
        moeperm.moe_token_unpermute_grad(x, g, idx, chip=5)
    with pytest.raises(ValueError, match=r"^unpermuted_tokens_grad has 3 dims; it must have 2 "
                                         r"\(\[tokens_num, hidden_size\]\)$"):
        moeperm.moe_token_unpermute_grad(x, g.reshape(2, 3, 1), idx)
    with pytest.raises(TypeError, match=r"^sorted_indices dtype float64 is not supported"):
        moeperm.moe_token_unpermute_grad(x, g, np.arange(4.0))


def test_out_pair_is_written_in_place_and_returned():
    rng = np.random.default_rng(13)
    x = models.random_grad(rng, (10, 6), np.float16)
    g = models.random_grad(rng, (4, 6), np.float16)
    idx = models.random_permutation(rng, 12)
    probs = random_probs(rng, (4, 3), np.uint16)
    want = moeperm.moe_token_unpermute_grad(x, g, idx, probs)
    out = (np.full((10, 6), 9, np.float16), np.full((3, 4), 9, np.uint16).T)
    result = moeperm.moe_token_unpermute_grad(x, g, idx, probs, out=out)
    assert result[0] is out[0] and result[1] is out[1]
    for a, b in zip(want, out):
        assert models.bits(a).tolist() == models.bits(b).tolist()
    with pytest.raises(ValueError, match=r"^out\[1\] must be None exactly when probs is None$"):
        moeperm.moe_token_unpermute_grad(x, g, idx, probs, out=(out[0], None))
    with pytest.raises(TypeError, match=r"^out\[1\] dtype float32 differs from probs dtype "
                                        r"uint16 \(bf16 bit patterns\)$"):
        moeperm.moe_token_unpermute_grad(x, g, idx, probs,
                                         out=(out[0], np.zeros((4, 3), np.float32)))

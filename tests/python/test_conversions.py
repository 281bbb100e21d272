"""The four conversions over every 16-bit pattern and every rounding tie,
against numpy, torch and the bit rules of docs/arithmetic.md."""
import numpy as np
import pytest

import moeperm
import models

ALL16 = np.arange(1 << 16, dtype=np.uint32).astype(np.uint16)
U32 = np.uint32


def _nan16(bits, exponent_mask):
    return ((bits & exponent_mask) == exponent_mask) & ((bits & ~exponent_mask & 0x7FFF) != 0)


def test_bf16_to_float32_every_pattern_is_the_upper_half_nans_made_quiet():
    result = moeperm.bf16_to_float32(ALL16)
    assert result.dtype == np.float32 and result.shape == (1 << 16,)
    wide = ALL16.astype(U32) << U32(16)
    nan = _nan16(ALL16, 0x7F80)
    expected = np.where(nan, wide | U32(0x00400000), wide)
    assert (result.view(U32) == expected).all()
    assert nan.sum() == 2 * 127  # the rule above was applied to real NaNs


def test_float16_to_float32_every_pattern_equals_numpy_and_the_nan_rule():
    result = moeperm.float16_to_float32(ALL16.view(np.float16))
    assert result.dtype == np.float32
    nan = _nan16(ALL16, 0x7C00)
    numpy_bits = ALL16.view(np.float16).astype(np.float32).view(U32)
    assert (result.view(U32)[~nan] == numpy_bits[~nan]).all()
    assert (result.view(U32)[nan] == models.float16_bits_nan_to_float32_bits(ALL16[nan])).all()


def _bf16_ties():
    """Every bf16 value as float32 and, beside each, the halfway point to the
    next pattern and the floats just below and above it."""
    base = ALL16.astype(U32) << U32(16)
    return np.concatenate([base, base + U32(0x8000), base + U32(0x7FFF),
                           base + U32(0x8001)]).view(np.float32)


def _float16_ties():
    """Every finite fp16 value as float32, the halfway points between
    neighbours (exact in float32) and the floats just beside them."""
    finite = ALL16[(ALL16 & 0x7C00) != 0x7C00].view(np.float16)
    values = np.sort(np.concatenate([finite.astype(np.float64), [65520.0, -65520.0]]))
    mids = ((values[:-1] + values[1:]) / 2).astype(np.float32)
    assert (mids.astype(np.float64) == (values[:-1] + values[1:]) / 2).all()
    mid_bits = mids.view(U32)
    return np.concatenate([finite.astype(np.float32), mids, (mid_bits - U32(1)).view(np.float32),
                           (mid_bits + U32(1)).view(np.float32)])


def _random_patterns(n, seed):
    return np.random.default_rng(seed).integers(0, 1 << 32, n, dtype=np.uint64).astype(
        U32).view(np.float32)


def test_float32_to_bf16_ties_and_random_patterns_equal_the_integer_model():
    values = np.concatenate([_bf16_ties(), _random_patterns(1 << 20, 41)])
    result = moeperm.float32_to_bf16(values)
    assert result.dtype == np.uint16
    assert (result == models.float32_to_bf16_bits(values)).all()


def test_float32_to_bf16_equals_torch_except_nan_bits():
    torch = pytest.importorskip("torch")
    values = np.concatenate([_bf16_ties(), _random_patterns(1 << 20, 42),
                             np.array([np.inf, -np.inf, 3.4e38, -3.4e38, 1e-45, -1e-45, 0.0,
                                       -0.0, 1e-39, np.float32(3.3895314e38)], np.float32)])
    result = moeperm.float32_to_bf16(values)
    theirs = torch.from_numpy(values).to(torch.bfloat16).view(torch.int16).numpy().view(np.uint16)
    nan = np.isnan(values)
    assert (result[~nan] == theirs[~nan]).all()
    assert _nan16(result[nan], 0x7F80).all() and _nan16(theirs[nan], 0x7F80).all()


def test_bf16_to_float32_every_pattern_equals_torch_except_nan_bits():
    torch = pytest.importorskip("torch")
    result = moeperm.bf16_to_float32(ALL16)
    theirs = torch.from_numpy(ALL16.view(np.int16)).view(torch.bfloat16).float().numpy()
    nan = _nan16(ALL16, 0x7F80)
    assert (result.view(U32)[~nan] == theirs.view(U32)[~nan]).all()
    assert np.isnan(theirs[nan]).all()


def test_float32_to_float16_ties_and_random_patterns_equal_numpy_and_the_nan_rule():
    values = np.concatenate([_float16_ties(), _random_patterns(1 << 20, 43)])
    result = moeperm.float32_to_float16(values)
    assert result.dtype == np.float16
    nan = np.isnan(values)
    with np.errstate(over="ignore"):
        theirs = values.astype(np.float16)
    assert (result.view(np.uint16)[~nan] == theirs.view(np.uint16)[~nan]).all()
    assert (result.view(np.uint16)[nan] ==
            models.float32_bits_nan_to_float16_bits(values.view(U32)[nan])).all()


def test_round_trips_through_16_bits_are_exact():
    assert (moeperm.float32_to_bf16(moeperm.bf16_to_float32(ALL16))[~_nan16(ALL16, 0x7F80)]
            == ALL16[~_nan16(ALL16, 0x7F80)]).all()
    half = ALL16.view(np.float16)
    back = moeperm.float32_to_float16(moeperm.float16_to_float32(half)).view(np.uint16)
    assert (back[~_nan16(ALL16, 0x7C00)] == ALL16[~_nan16(ALL16, 0x7C00)]).all()


def test_shapes_strides_and_scalars_are_kept():
    values = np.arange(24, dtype=np.float32).reshape(4, 6) / 7
    strided = values[::2, ::-2]
    result = moeperm.float32_to_bf16(strided)
    assert result.shape == (2, 3)
    assert (result == models.float32_to_bf16_bits(np.ascontiguousarray(strided))).all()
    scalar = moeperm.float32_to_float16(np.float32(1.0 / 3))
    assert scalar.shape == () and scalar == np.float16(1.0 / 3)
    assert moeperm.bf16_to_float32(np.zeros((0, 3), np.uint16)).shape == (0, 3)


def test_float64_is_refused_rather_than_rounded_twice():
    with pytest.raises(TypeError, match=r"^array dtype float64 is not supported here; it must "
                                        r"be float32$"):
        moeperm.float32_to_bf16(np.array([1.0]))


def test_int16_bits_are_refused_with_the_bf16_hint():
    with pytest.raises(TypeError, match=r"^array dtype int16 is not supported here; it must be "
                                        r"uint16 \(bf16 bit patterns\); for bf16 pass"):
        moeperm.bf16_to_float32(np.zeros(3, np.int16))

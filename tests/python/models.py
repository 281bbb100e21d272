"""Independent numpy models of what moeperm computes, written from
docs/arithmetic.md and docs/operators.md: integer bit manipulation for bf16,
numpy's own float16 conversions, the permute-grad and unpermute sums as
loops over k, the permutation as a loop over slots."""
import numpy as np


def is_nan32(bits):
    return (bits & np.uint32(0x7FFFFFFF)) > np.uint32(0x7F800000)


def bf16_bits_to_float32(bits):
    """bf16 bits -> float32: the upper half of a binary32; a NaN is made quiet."""
    wide = bits.astype(np.uint32) << np.uint32(16)
    wide = np.where(is_nan32(wide), wide | np.uint32(0x00400000), wide)
    return wide.view(np.float32)


def float32_to_bf16_bits(values):
    """float32 -> bf16 bits, round to nearest, ties to even, by integer ops."""
    bits = np.ascontiguousarray(values, dtype=np.float32).view(np.uint32).astype(np.uint64)
    lsb = (bits >> np.uint64(16)) & np.uint64(1)
    rounded = (bits + np.uint64(0x7FFF) + lsb) >> np.uint64(16)
    nan = is_nan32(bits.astype(np.uint32))
    quiet = (bits >> np.uint64(16)) | np.uint64(0x0040)
    return np.where(nan, quiet, rounded).astype(np.uint16)


def float16_bits_nan_to_float32_bits(bits):
    """The documented NaN rule for fp16 -> float32 (numpy's astype keeps
    signalling NaNs as they are, so the tests spell this one out)."""
    bits = bits.astype(np.uint32)
    return ((bits & np.uint32(0x8000)) << np.uint32(16)) | np.uint32(0x7FC00000) | (
        (bits & np.uint32(0x03FF)) << np.uint32(13))


def float32_bits_nan_to_float16_bits(bits):
    """The documented NaN rule for float32 -> fp16 (as x86 F16C does)."""
    bits = bits.astype(np.uint32)
    return (((bits >> np.uint32(16)) & np.uint32(0x8000)) | np.uint32(0x7E00) | (
        (bits & np.uint32(0x007FFFFF)) >> np.uint32(13))).astype(np.uint16)


def widen(grad):
    """float32 values of a float32, float16 or bf16 (np.uint16) array."""
    if grad.dtype == np.uint16:
        return bf16_bits_to_float32(grad)
    return grad.astype(np.float32)


def narrow(acc, dtype):
    """float32 accumulators -> an array of ``dtype`` (np.uint16 = bf16 bits)."""
    if dtype == np.uint16:
        return float32_to_bf16_bits(acc)
    if dtype == np.float16:
        with np.errstate(over="ignore"):
            return acc.astype(np.float16)
    return acc.astype(np.float32)


def permute_grad(grad, sorted_indices, top_k):
    """input_grad[t] = sum over k of grad[sorted_indices[t*top_k + k]] in
    float32: started from slot 0 (+0.0 when that slot is dropped), slots
    added in k order, dropped slots (index >= rows) skipped, one rounding
    to the dtype of grad."""
    rows, hidden = grad.shape
    idx = np.asarray(sorted_indices, dtype=np.int64).reshape(-1, top_k)
    wide = widen(grad)
    acc = np.zeros((idx.shape[0], hidden), dtype=np.float32)
    with np.errstate(over="ignore", invalid="ignore"):
        for k in range(top_k):
            slot = idx[:, k]
            kept = slot < rows
            if rows == 0 or not kept.any():
                continue
            values = wide[np.where(kept, slot, 0)]
            if k == 0:
                acc = np.where(kept[:, None], values, acc)
            else:
                acc = np.where(kept[:, None], acc + values, acc)
    return narrow(acc, grad.dtype)


def route(expert_ids):
    """sorted_indices for a routing: the inverse of the stable argsort."""
    flat = np.asarray(expert_ids).reshape(-1)
    order = np.argsort(flat, kind="stable")
    inverse = np.empty(flat.size, dtype=np.int32)
    inverse[order] = np.arange(flat.size, dtype=np.int32)
    return inverse


def bits(array):
    """The bit patterns of an array of 1-, 2-, 4- or 8-byte elements, as
    unsigned integers, for exact comparison."""
    array = np.ascontiguousarray(array)
    return array.view({1: np.uint8, 2: np.uint16, 4: np.uint32, 8: np.uint64}
                      [array.dtype.itemsize])


def assert_same_bits(expected, actual, nan_aware=False):
    """Exact bits; with nan_aware, any NaN matches any NaN."""
    assert expected.dtype == actual.dtype, (expected.dtype, actual.dtype)
    assert expected.shape == actual.shape, (expected.shape, actual.shape)
    e, a = bits(expected), bits(actual)
    same = e == a
    if nan_aware:
        fe, fa = as_float32(expected), as_float32(actual)
        same |= np.isnan(fe) & np.isnan(fa)
    if not same.all():
        where = np.argwhere(~same)
        first = tuple(int(i) for i in where[0])
        raise AssertionError("%d of %d elements differ; first at %s: expected 0x%x, got 0x%x"
                             % (len(where), same.size, first, e[first], a[first]))


def as_float32(array):
    if array.dtype == np.uint16:
        return bf16_bits_to_float32(array)
    return array.astype(np.float32)


# Octaves between the small values and the large ones: wider than a float32
# significand, so a sum that meets +big and -big shows its order and its
# start (1 + big - big is 0 in float32, 1 - big + big is 1).
SPREAD = {np.float32: 30, np.float16: 16, np.uint16: 40}


def random_grad(rng, shape, dtype, spread=None):
    """Values whose float32 sums round and cancel, so that the order and the
    start of the sum show after narrowing: random signs, exponents within 4
    octaves of 1 and random mantissas, and one value in three a power of two
    ``spread`` octaves up (so equal magnitudes meet with opposite signs);
    bf16 as np.uint16 bit patterns."""
    if spread is None:
        spread = SPREAD[dtype]
    size = int(np.prod(shape))
    sign = rng.integers(0, 2, size, dtype=np.uint32) << np.uint32(31)
    exponent = rng.integers(125, 130, size, dtype=np.uint32)
    mantissa = rng.integers(0, 1 << 23, size, dtype=np.uint32)
    big = rng.integers(0, 3, size) == 0
    top = np.uint32(127 + spread - 2) + rng.integers(0, 2, size, dtype=np.uint32)
    exponent = np.where(big, top, exponent)
    mantissa = np.where(big, np.uint32(0), mantissa)
    values = (sign | (exponent << np.uint32(23)) | mantissa).view(np.float32).reshape(shape)
    if dtype == np.uint16:
        return (values.view(np.uint32) >> np.uint32(16)).astype(np.uint16)
    return values.astype(dtype)


def random_permutation(rng, n):
    return rng.permutation(n).astype(np.int32)


def permute(tokens, indices, num_out_tokens=None):
    """(permuted_tokens, sorted_indices) of MoeTokenPermute: sorted_indices
    the inverse of the stable argsort of the flattened ids, each kept copy
    a row of tokens moved bit for bit."""
    flat = np.asarray(indices).reshape(-1)
    top_k = 1 if np.ndim(indices) == 1 else np.shape(indices)[1]
    sorted_indices = route(flat)
    n = 0 if num_out_tokens is None else num_out_tokens
    rows = n + flat.size if n <= 0 else n
    rows = min(max(rows, 0), flat.size)
    permuted = np.zeros((rows,) + tokens.shape[1:], dtype=tokens.dtype)
    for i in range(flat.size):
        if sorted_indices[i] < rows:
            permuted[sorted_indices[i]] = tokens[i // top_k]
    return permuted, sorted_indices


def unpermute(permuted_tokens, sorted_indices, probs=None):
    """MoeTokenUnpermute: for each token, its slots k in order; a slot is
    included when its row exists and (with probs) its prob is not +-0; the
    sum starts from slot 0's term when slot 0 is included, else from +0.0;
    each product and each sum one float32 operation; one rounding to the
    tokens' dtype at the end."""
    rows, hidden = permuted_tokens.shape
    top_k = 1 if probs is None else probs.shape[1]
    idx = np.asarray(sorted_indices, dtype=np.int64).reshape(-1, top_k)
    x = widen(permuted_tokens)
    p = None if probs is None else widen(probs)
    acc = np.zeros((idx.shape[0], hidden), dtype=np.float32)
    with np.errstate(over="ignore", invalid="ignore", under="ignore"):
        for k in range(top_k):
            slot = idx[:, k]
            included = slot < rows
            if p is not None:
                included &= p[:, k] != 0
            if rows == 0 or not included.any():
                continue
            term = x[np.where(included, slot, 0)]
            if p is not None:
                term = term * p[:, k][:, None]
            if k == 0:
                acc = np.where(included[:, None], term, acc)
            else:
                acc = np.where(included[:, None], acc + term, acc)
    return narrow(acc, permuted_tokens.dtype)


def unpermute_grad_tokens(unpermuted_tokens_grad, sorted_indices, rows, probs=None):
    """MoeTokenUnpermuteGrad's permuted_tokens_grad: row s = sorted_indices[i]
    (i = n*top_k + k, s < rows) is g[n] * probs[n, k], one float32 product
    rounded once to g's dtype, or g[n]'s bits without probs."""
    g = unpermuted_tokens_grad
    top_k = 1 if probs is None else probs.shape[1]
    idx = np.asarray(sorted_indices, dtype=np.int64)
    out = np.zeros((rows, g.shape[1]), dtype=g.dtype)
    for i, s in enumerate(idx):
        if s >= rows:
            continue
        n, k = divmod(i, top_k)
        if probs is None:
            out[s] = g[n]
        else:
            with np.errstate(over="ignore", invalid="ignore", under="ignore"):
                out[s] = narrow(widen(g[n:n + 1]) * widen(probs[n:n + 1, k:k + 1]), g.dtype)[0]
    return out


def exact_dot(permuted_tokens, unpermuted_tokens_grad, sorted_indices, top_k):
    """The dot products probs_grad approximates, in float64 from the widened
    values (exact enough to bound the rounded result): row s of
    permuted_tokens (zeros for a dropped slot) with g[n]."""
    rows = permuted_tokens.shape[0]
    x = widen(permuted_tokens).astype(np.float64)
    g = widen(unpermuted_tokens_grad).astype(np.float64)
    idx = np.asarray(sorted_indices, dtype=np.int64).reshape(-1, top_k)
    result = np.zeros(idx.shape, dtype=np.float64)
    for n in range(idx.shape[0]):
        for k in range(top_k):
            s = idx[n, k]
            result[n, k] = float(np.dot(x[s], g[n])) if s < rows else 0.0
    return result


def ulp_distance(dtype, a, b):
    """Distance between bit patterns on the ordered integer line (adjacent
    values 1 apart, +0 and -0 1 apart)."""
    a, b = bits(a).astype(np.int64), bits(b).astype(np.int64)
    sign = {2: 0x8000, 4: 0x80000000}[np.dtype(dtype).itemsize]

    def line(v):
        return np.where(v & sign, -(v & (sign - 1)) - 1, v)
    return np.abs(line(a) - line(b))

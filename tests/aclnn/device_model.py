"""What a device prints for the four example programs, derived from bytes.

An independent model, written from the kernels' documented semantics
(docs/operators.md, docs/unpermute-grad.md) and sharing no code with
libmoeperm.  Each float32 operation is done in Python's binary64 and
rounded once to binary32 (struct), which gives the binary32 result exactly:
a sum or product of two binary32 values is rounded correctly through
binary64, whose 53 bits are more than 2 * 24 + 2.  bf16 narrowing is done
by hand on the bits.

The programs hand std::vector<float> or std::vector<int> to tensors of
another dtype (the vendor's examples do), so the model starts from the host
bytes exactly as a device would: a BF16 tensor of n elements is the first
2n bytes of the vector, an INT32 tensor the first 4n.  The programs read the
whole output buffer back as floats (or ints) and print each with %f (%d);
Python's % formatting rounds as C's printf does.
"""

import struct


def host_bytes(values, fmt):
    """The bytes of a std::vector of float ('f') or int ('i')."""
    return struct.pack("<%d%s" % (len(values), fmt), *values)


def bf16s(data, count):
    """The first count bf16 elements of data, as uint16 bit patterns."""
    return list(struct.unpack_from("<%dH" % count, data))


def int32s(data, count):
    return list(struct.unpack_from("<%di" % count, data))


def f32(value):
    """value rounded to binary32 (to nearest, ties to even)."""
    return struct.unpack("<f", struct.pack("<f", value))[0]


def widen(bits):
    """bf16 bits to float32, exactly."""
    return struct.unpack("<f", struct.pack("<I", bits << 16))[0]


def narrow(value):
    """float32 to bf16 bits, round to nearest, ties to even (no NaN here)."""
    bits = struct.unpack("<I", struct.pack("<f", value))[0]
    assert (bits & 0x7F800000) != 0x7F800000, "the examples make no inf or NaN"
    return ((bits + 0x7FFF + ((bits >> 16) & 1)) >> 16) & 0xFFFF


def put_bf16(buffer, index, bits):
    struct.pack_into("<H", buffer, 2 * index, bits)


def float_lines(buffer, name):
    count = len(buffer) // 4
    return ["%s[%d] is: %f" % (name, i, v)
            for i, v in enumerate(struct.unpack("<%df" % count, bytes(buffer)))]


def int_lines(buffer, name):
    count = len(buffer) // 4
    return ["%s[%d] is: %d" % (name, i, v)
            for i, v in enumerate(struct.unpack("<%di" % count, bytes(buffer)))]


def permute():
    """MoeTokenPermute: tokens [3, 4] bf16, indices [3, 2] int32, all kept."""
    tokens = host_bytes([0.1] * 4 + [0.2] * 4 + [0.3] * 4, "f")
    ids = int32s(host_bytes([1, 2, 0, 1, 0, 2], "i"), 6)
    n, k, h = 3, 2, 4
    # Stable ascending sort of the flat ids; slot s goes to its rank.
    order = sorted(range(n * k), key=lambda s: (ids[s], s))
    rank = [0] * (n * k)
    for position, s in enumerate(order):
        rank[s] = position
    out = bytearray(24 * 4)
    for s in range(n * k):
        token = s // k
        out[rank[s] * 2 * h:(rank[s] + 1) * 2 * h] = tokens[token * 2 * h:(token + 1) * 2 * h]
    sorted_out = bytearray(host_bytes(rank, "i"))
    return float_lines(out, "expandedXData") + int_lines(sorted_out, "sortedIndicesData")


def combine(rows, h, slots, probs):
    """One output token of MoeTokenUnpermute (probs given) or
    MoeTokenPermuteGrad (probs None): slots whose row is missing, or whose
    prob is zero, are skipped; an excluded first slot starts from +0."""
    acc = [0.0] * h
    for j, row in enumerate(slots):
        if row >= len(rows) or (probs is not None and widen(probs[j]) == 0):
            continue
        for c in range(h):
            x = widen(rows[row][c])
            term = f32(x * widen(probs[j])) if probs is not None else x
            acc[c] = term if j == 0 else f32(acc[c] + term)
    return [narrow(v) for v in acc]


def two_slot_combine(with_probs):
    """MoeTokenUnpermute (with probs [1, 2] bf16) or MoeTokenPermuteGrad
    (top-k 2): rows [2, 2] bf16 from host floats {1, 2, 3, 4}, sorted
    indices host floats {0, 1} read as int32, out [1, 2] bf16."""
    data = bf16s(host_bytes([1, 2, 3, 4], "f"), 4)
    rows = [data[0:2], data[2:4]]
    slots = int32s(host_bytes([0.0, 1.0], "f"), 2)
    probs = bf16s(host_bytes([1, 1], "f"), 2) if with_probs else None
    out = bytearray(host_bytes([0, 0], "f"))
    for c, bits in enumerate(combine(rows, 2, slots, probs)):
        put_bf16(out, c, bits)
    return float_lines(out, "mean result")


def unpermute_grad():
    """MoeTokenUnpermuteGrad with probs: permuted tokens [3, 2], grad
    [1, 2], probs [1, 3] (all bf16 over host floats), sorted indices
    {0, 1, 2}; outputs [3, 2] and [1, 3] bf16."""
    h, k = 2, 3
    tokens = bf16s(host_bytes([1.0] * 6, "f"), 6)
    grad = bf16s(host_bytes([1.0, 1.0], "f"), 2)
    probs = bf16s(host_bytes([1.0, 1.0, 1.0], "f"), 3)
    slots = int32s(host_bytes([0, 1, 2], "i"), 3)
    tokens_grad = bytearray(host_bytes([0.0] * 6, "f"))
    probs_grad = bytearray(host_bytes([0.0] * 3, "f"))
    rows = 3
    for j, row in enumerate(slots):
        if row < rows:
            for c in range(h):
                put_bf16(tokens_grad, row * h + c, narrow(f32(widen(grad[c]) * widen(probs[j]))))
        # The dot product of the row (zeros when dropped) with the grad;
        # with two columns the kernel's pairwise reduction is one add.
        x = [widen(tokens[row * h + c]) if row < rows else 0.0 for c in range(h)]
        products = [f32(x[c] * widen(grad[c])) for c in range(h)]
        put_bf16(probs_grad, j, narrow(f32(products[0] + products[1])))
    assert k == len(slots)
    return float_lines(tokens_grad, "mean result") + float_lines(probs_grad, "mean result")


EXPECTED = {
    "moe_token_permute": permute,
    "moe_token_unpermute": lambda: two_slot_combine(True),
    "moe_token_permute_grad": lambda: two_slot_combine(False),
    "moe_token_unpermute_grad": unpermute_grad,
}


def expected_lines(program):
    """The lines a device prints for one of the four programs."""
    return EXPECTED[program]()

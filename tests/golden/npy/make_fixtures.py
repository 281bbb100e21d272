#!/usr/bin/env python3
"""Writes the .npy fixtures of test_golden_npy with numpy itself.

Regenerate (numpy 1.24 or later; the files are committed, so the tests
need no numpy):

    python3 tests/golden/npy/make_fixtures.py tests/golden/npy

Element i of every array is a value the test recomputes on its own:
float kinds hold (i - 3) / 4, integer kinds hold i * 37 - 100 (wrapped to
the width), the bf16 carriers hold the 16-bit pattern 0x3f80 + i.  The
hdr_*.bin files are numpy's header alone for shapes too large to store.
"""
import io
import os
import sys

import numpy as np
from numpy.lib import format as npformat


def values(dtype, n):
    i = np.arange(n)
    if np.dtype(dtype).kind == "f":
        return ((i - 3) / 4).astype(dtype)
    return (i * 37 - 100).astype(np.int64).astype(dtype)


def save(path, array, version=None):
    with open(path, "wb") as f:
        npformat.write_array(f, array, version=version, allow_pickle=False)


def save_raw(path, descr, shape, payload, fortran_order=False, version=(1, 0)):
    """A header numpy's own writer makes for a descr numpy cannot hold."""
    with open(path, "wb") as f:
        npformat._write_array_header(
            f, {"descr": descr, "fortran_order": fortran_order, "shape": shape}, version)
        f.write(payload)


def main(out):
    os.makedirs(out, exist_ok=True)
    j = lambda name: os.path.join(out, name)

    # Accepted: every dtype, the three versions, 0-d, empty, 8 dims.
    save(j("f4_3x4.npy"), values("<f4", 12).reshape(3, 4))
    save(j("f2_5.npy"), values("<f2", 5))
    save(j("i4_6.npy"), values("<i4", 6))
    save(j("i8_2x2.npy"), values("<i8", 4).reshape(2, 2))
    save(j("i1_7.npy"), values("i1", 7))
    bf16 = (0x3f80 + np.arange(6)).astype("<u2")
    save(j("u2_2x3.npy"), bf16.reshape(2, 3))
    save(j("i2_2x3.npy"), bf16.view("<i2").reshape(2, 3))
    save(j("V2_2x3.npy"), bf16.view("V2").reshape(2, 3))
    save_raw(j("lV2_2x3.npy"), "<V2", (2, 3), bf16.tobytes())
    save(j("f4_v2_3x4.npy"), values("<f4", 12).reshape(3, 4), version=(2, 0))
    save(j("f4_v3_3x4.npy"), values("<f4", 12).reshape(3, 4), version=(3, 0))
    save(j("f4_scalar.npy"), values("<f4", 1).reshape(()))
    save(j("f2_0x4.npy"), values("<f2", 0).reshape(0, 4))
    save(j("i1_8dims.npy"), values("i1", 2).reshape(1, 1, 1, 2, 1, 1, 1, 1))
    # Fortran order with one dim above 1 is C order's memory too.
    save_raw(j("f4_fortran_1d.npy"), "<f4", (5,), values("<f4", 5).tobytes(),
             fortran_order=True)

    # Refused.
    save(j("f4_fortran_3x4.npy"), np.asfortranarray(values("<f4", 12).reshape(3, 4)))
    save(j("bf4_3x4.npy"), values(">f4", 12).reshape(3, 4))
    save(j("f8_3.npy"), values("<f8", 3))
    save(j("struct_3.npy"), np.zeros(3, dtype=[("a", "<f4"), ("b", "<i4")]))
    save(j("f4_9dims.npy"), values("<f4", 1).reshape((1,) * 9))

    # Headers alone, for the writer's byte-for-byte test.
    for name, descr, shape in [
        ("hdr_f4_123456789012x7168.bin", "<f4", (123456789012, 7168)),
        ("hdr_u2_4096x4096.bin", "<u2", (4096, 4096)),
        ("hdr_i8_8dims.bin", "<i8", (2, 3, 4, 5, 6, 7, 8, 9)),
        ("hdr_i1_scalar.bin", "|i1", ()),
        ("hdr_f2_1.bin", "<f2", (1,)),
    ]:
        with open(j(name), "wb") as f:
            npformat._write_array_header(
                f, {"descr": descr, "fortran_order": False, "shape": shape}, (1, 0))


if __name__ == "__main__":
    main(sys.argv[1] if len(sys.argv) > 1 else os.path.dirname(os.path.abspath(__file__)))

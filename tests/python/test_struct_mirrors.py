"""The ctypes mirrors of the public structures (moeperm_chip in _capi.py,
nine of golden.h in _golden_capi.py) have the size and field offsets the C
compiler gives them: tests/python/struct_layout.c prints those, built by
meson with the project's headers (MOEPERM_STRUCT_LAYOUT names it)."""
import ctypes
import json
import os
import subprocess

import pytest

from moeperm import _capi
from moeperm import _golden_capi as g

MIRRORS = {
    "moeperm_chip": _capi.ChipStruct,
    "moeperm_golden_tensor": g.Tensor,
    "moeperm_golden_attrs": g.Attrs,
    "moeperm_golden_recipe": g.Recipe,
    "moeperm_golden_case": g.Case,
    "moeperm_golden_slot": g.Slot,
    "moeperm_golden_spec": g.Spec,
    "moeperm_golden_diff": g.Diff,
    "moeperm_golden_compare_result": g.CompareResult,
    "moeperm_golden_judge_options": g.JudgeOptions,
}


@pytest.fixture(scope="module")
def layout():
    tool = os.environ.get("MOEPERM_STRUCT_LAYOUT")
    if not tool:
        pytest.skip("MOEPERM_STRUCT_LAYOUT is not set (meson test sets it to the build's "
                    "tests/python/struct_layout)")
    return json.loads(subprocess.run([tool], check=True, capture_output=True,
                                     text=True).stdout)


def differences(mirror, c):
    """What differs between a ctypes Structure and the C layout of one
    struct, as sentences (none when they agree)."""
    found = []
    if ctypes.sizeof(mirror) != c["size"]:
        found.append("size %d, C has %d" % (ctypes.sizeof(mirror), c["size"]))
    mine = {name: getattr(mirror, name).offset for name, _ in mirror._fields_}
    for name, offset in c["fields"].items():
        if name not in mine:
            found.append("no field %s (C has it at offset %d)" % (name, offset))
        elif mine[name] != offset:
            found.append("%s at offset %d, C has %d" % (name, mine[name], offset))
    found += ["field %s, which C does not have" % name for name in mine if name not in c["fields"]]
    return found


def test_every_mirrored_struct_is_in_the_layout(layout):
    assert sorted(layout) == sorted(MIRRORS)


@pytest.mark.parametrize("name", sorted(MIRRORS))
def test_mirror_has_the_c_size_and_field_offsets(layout, name):
    assert differences(MIRRORS[name], layout[name]) == []


def test_a_mirror_missing_a_field_is_told_apart(layout):
    class Shorter(ctypes.Structure):
        _fields_ = [f for f in g.JudgeOptions._fields_ if f[0] != "max_ulp"]
    assert differences(Shorter, layout["moeperm_golden_judge_options"]) == [
        "size 2, C has 24", "no field max_ulp (C has it at offset 8)",
        "diagnose at offset 1, C has 16"]

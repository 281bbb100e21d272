"""Where the tests find the source tree, the committed corpus and the
`moeperm` tool they compare with."""
import os
import shutil

import pytest

import moeperm

SOURCE_ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(moeperm.__file__))))
CORPUS = os.path.join(SOURCE_ROOT, "golden")


def tool():
    """The `moeperm` tool: MOEPERM_TOOL (meson test sets it), else the one
    in this source tree's build/ or on PATH; skips when there is none."""
    path = os.environ.get("MOEPERM_TOOL")
    if path:
        return path
    built = os.path.join(SOURCE_ROOT, "build", "tools", "moeperm")
    if os.path.exists(built):
        return built
    found = shutil.which("moeperm")
    if found is None:
        pytest.skip("no moeperm tool to compare with (set MOEPERM_TOOL)")
    return found

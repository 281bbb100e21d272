"""Where the tests find the source tree, the committed corpus and the
`moeperm` tool they compare with.

The source tree is the one these tests sit in (or MOEPERM_SOURCE_ROOT), never
derived from the package: the same tests run against the package of the
source tree and against an installed copy (a venv, `meson install`), which
lies elsewhere."""
import os
import shutil

import pytest

SOURCE_ROOT = os.environ.get("MOEPERM_SOURCE_ROOT") or os.path.dirname(
    os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
CORPUS = os.path.join(SOURCE_ROOT, "golden")
HEADER = os.path.join(SOURCE_ROOT, "include", "moeperm", "moeperm.h")


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


def installed():
    """True when the package under test is not the source tree's python/
    (MOEPERM_INSTALLED_TEST says so: the install tests set it)."""
    return os.environ.get("MOEPERM_INSTALLED_TEST") == "1"

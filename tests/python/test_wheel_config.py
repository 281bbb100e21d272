"""The wheel's Meson configuration, as meson-python runs it: in the
environment pip gives the build, which has no numpy when pip isolates it
(numpy is a run-time dependency), and with the package installed where
meson-python puts the root of a wheel that holds libraries (platlib), beside
.moeperm.mesonpy.libs, which the package's recorded path names."""
import json
import os
import re
import shutil
import subprocess
import sys

import pytest

import paths


def wheel_setup_args():
    """pyproject.toml's [tool.meson-python.args] setup: what meson-python
    passes to `meson setup`."""
    with open(os.path.join(paths.SOURCE_ROOT, "pyproject.toml")) as f:
        text = f.read()
    match = re.search(r"^setup = (\[[^\]]*\])", text, re.M)
    assert match, "pyproject.toml has no [tool.meson-python.args] setup"
    return json.loads(match.group(1))


@pytest.fixture(scope="module")
def wheel_build(tmp_path_factory):
    """`meson setup` of the source tree with the wheel's arguments, run
    with a Python that has no numpy (a venv without the system's
    site-packages, as pip's isolated build environment): the
    CompletedProcess and the build directory."""
    meson = shutil.which("meson")
    if meson is None:
        pytest.skip("meson is not installed")
    tmp = tmp_path_factory.mktemp("wheel")
    venv = tmp / "venv"
    r = subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)],
                       capture_output=True, text=True)
    if r.returncode != 0:
        pytest.skip("python3 -m venv does not work here (Debian: python3-venv): " + r.stderr)
    python = venv / "bin" / "python"
    if subprocess.run([str(python), "-c", "import numpy"], capture_output=True).returncode == 0:
        pytest.skip("a venv without site-packages still imports numpy")
    # meson-python names its Python to meson the same way.
    native = tmp / "native.ini"
    native.write_text("[binaries]\npython = %r\n" % str(python))
    build = tmp / "build"
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "MESONINTROSPECT")}
    r = subprocess.run([meson, "setup", str(build), paths.SOURCE_ROOT, "--native-file",
                        str(native)] + wheel_setup_args(),
                       capture_output=True, text=True, env=env, timeout=300)
    return r, build


def test_the_wheel_configures_with_a_python_that_has_no_numpy(wheel_build):
    r, _ = wheel_build
    assert r.returncode == 0, r.stdout[-4000:] + r.stderr[-4000:]


def test_the_wheel_installs_the_package_in_platlib_beside_its_libraries(wheel_build):
    r, build = wheel_build
    if r.returncode != 0:
        pytest.skip("the wheel's configuration failed (the test above says why)")
    plan = json.loads(subprocess.run([shutil.which("meson"), "introspect", str(build),
                                      "--install-plan"], capture_output=True, text=True,
                                     check=True).stdout)
    package = sorted(info["destination"] for kind in plan.values() for info in kind.values()
                     if "/moeperm/" in info["destination"] and
                     info["destination"].endswith(".py"))
    names = sorted(os.path.basename(p) for p in package)
    assert "__init__.py" in names and "_paths.py" in names
    # {py_platlib} is the wheel's root; {py_purelib} would be its .data/
    # purelib, installed apart from the libraries where the two differ.
    assert package == ["{py_platlib}/moeperm/" + n for n in names]

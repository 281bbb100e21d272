"""Where the package finds libmoeperm, and what it says when it cannot.

The same tests run against the source tree's package and an installed copy
(a wheel's libraries are libmoeperm.so, meson install's libmoeperm.so.0):
expected file names come from the libraries the package under test loaded."""
import os
import re
import shutil
import subprocess
import sys

import pytest

import moeperm

import paths

PACKAGE = os.path.dirname(moeperm.__file__)
SOURCE_ROOT = paths.SOURCE_ROOT


def from_source_tree():
    """Skips unless the package under test is this source tree's python/."""
    if os.path.dirname(PACKAGE) != os.path.join(SOURCE_ROOT, "python"):
        pytest.skip("the package under test is an installed copy, not the source tree's")


def run_python(code, env_changes, cwd, pythonpath):
    env = {k: v for k, v in os.environ.items()
           if k not in ("MOEPERM_LIBRARY_DIR", "PYTHONPATH", "LD_LIBRARY_PATH")}
    env.update(env_changes)
    env["PYTHONPATH"] = pythonpath
    return subprocess.run([sys.executable, "-c", code], env=env, cwd=cwd,
                          capture_output=True, text=True, timeout=120)


def copy_package(tmp_path, libdir=None):
    """The package alone, outside any source tree, with an install-time
    _paths.py when libdir is given."""
    target = tmp_path / "site" / "moeperm"
    shutil.copytree(PACKAGE, target, ignore=shutil.ignore_patterns("__pycache__", "_paths.py*"))
    if libdir is not None:
        (target / "_paths.py").write_text("LIBDIR = %r\n" % libdir)
    return str(tmp_path / "site")


def test_version_is_the_projects():
    # meson.build defines the version; version.h is generated from it.
    build = open(os.path.join(SOURCE_ROOT, "meson.build")).read()
    expected = re.search(r"project\('moeperm',[^)]*?version: '([^']+)'", build).group(1)
    assert moeperm.version() == expected == moeperm.__version__


def test_directory_variable_that_lacks_the_library_is_an_import_error_naming_it(tmp_path):
    # `import moeperm` loads nothing; the first name used loads the library.
    r = run_python("import moeperm; import moeperm.testing; print('imported', flush=True); "
                   "from moeperm import moe_token_permute",
                   {"MOEPERM_LIBRARY_DIR": str(tmp_path)}, str(tmp_path),
                   os.path.dirname(PACKAGE))
    assert r.returncode == 1 and r.stdout == "imported\n"
    assert "ImportError: moeperm cannot find libmoeperm." in r.stderr
    assert "%s (MOEPERM_LIBRARY_DIR): no libmoeperm.so.0 or libmoeperm.so" % tmp_path in r.stderr


def test_directory_variable_is_searched_in_order(tmp_path):
    libdir = os.path.dirname(moeperm.library_path)
    r = run_python("import moeperm; print(moeperm.library_path)",
                   {"MOEPERM_LIBRARY_DIR": os.pathsep.join([str(tmp_path), libdir])},
                   str(tmp_path), os.path.dirname(PACKAGE))
    assert r.returncode == 0, r.stderr
    assert os.path.dirname(r.stdout.strip()) == libdir


def test_installed_package_loads_the_recorded_library_without_variables(tmp_path):
    libdir = os.path.dirname(moeperm.library_path)
    site = copy_package(tmp_path, libdir)
    r = run_python("import moeperm; print(moeperm.library_path)", {}, str(tmp_path), site)
    assert r.returncode == 0, r.stderr
    assert r.stdout.strip() == moeperm.library_path


def test_recorded_directory_is_relative_to_the_package_so_a_moved_tree_still_works(tmp_path):
    # As meson install records it: lib/ and lib/python3/dist-packages/ below
    # one prefix; then the whole prefix moves.
    prefix = tmp_path / "prefix"
    (prefix / "lib").mkdir(parents=True)
    for loaded in (moeperm.library_path, golden_path()):
        shutil.copy(loaded, prefix / "lib" / os.path.basename(loaded))
    site = copy_package(prefix, os.path.join("..", "..", "..", "..", "lib"))
    (prefix / "lib" / "python3").mkdir()
    shutil.move(site, str(prefix / "lib" / "python3" / "dist-packages"))
    moved = tmp_path / "moved"
    shutil.move(str(prefix), str(moved))
    r = run_python("import moeperm, moeperm.golden; print(moeperm.library_path); "
                   "print(moeperm.golden.library_path)", {}, str(tmp_path),
                   str(moved / "lib" / "python3" / "dist-packages"))
    assert r.returncode == 0, r.stderr
    assert r.stdout.split() == [str(moved / "lib" / os.path.basename(moeperm.library_path)),
                                str(moved / "lib" / os.path.basename(golden_path()))]


def test_nothing_found_lists_every_place_looked(tmp_path):
    site = copy_package(tmp_path, str(tmp_path / "gone"))
    probe = run_python("import ctypes.util; print(ctypes.util.find_library('moeperm'))", {},
                       str(tmp_path), site)
    if probe.stdout.strip() != "None":
        pytest.skip("a libmoeperm is installed where the dynamic loader finds it")
    r = run_python("import moeperm; moeperm.version()", {}, str(tmp_path), site)
    assert r.returncode == 1
    assert "MOEPERM_LIBRARY_DIR is not set" in r.stderr
    assert "%s (recorded by meson install): no libmoeperm.so.0" % (tmp_path / "gone") in r.stderr
    assert "the dynamic loader's search for libmoeperm.so.0" in r.stderr


def test_source_tree_without_variables_uses_its_build_directory(tmp_path):
    from_source_tree()
    built = os.path.join(SOURCE_ROOT, "build", "src", "libmoeperm.so.0")
    if not os.path.exists(built):
        pytest.skip("this source tree has no build/ directory")
    r = run_python("import moeperm; print(moeperm.library_path)", {}, str(tmp_path),
                   os.path.dirname(PACKAGE))
    assert r.returncode == 0, r.stderr
    assert r.stdout.strip() == built


def test_import_does_not_import_torch():
    r = run_python("import sys, moeperm; print('torch' in sys.modules)",
                   {"MOEPERM_LIBRARY_DIR": os.path.dirname(moeperm.library_path)},
                   SOURCE_ROOT, os.path.dirname(PACKAGE))
    assert r.returncode == 0, r.stderr
    assert r.stdout.strip() == "False"


def test_operator_the_library_lacks_fails_only_when_called():
    from moeperm import _capi
    op = _capi.Operator("token_frobnicate", [("x", _capi.ARG_TENSOR)])
    with pytest.raises(NotImplementedError,
                       match=r"^moeperm_token_frobnicate_get_workspace_size is not exported by "
                             r"libmoeperm \S+ at .*; this function needs a newer libmoeperm$"):
        op.bind()


def test_library_that_cannot_be_loaded_is_named_and_the_next_directory_tried(tmp_path):
    broken = tmp_path / "broken"
    broken.mkdir()
    (broken / "libmoeperm.so.0").write_bytes(b"not an ELF file")
    libdir = os.path.dirname(moeperm.library_path)
    code = "import moeperm; print(moeperm.library_path)"
    r = run_python(code, {"MOEPERM_LIBRARY_DIR": str(broken)}, str(tmp_path),
                   os.path.dirname(PACKAGE))
    assert r.returncode == 1
    assert "%s (MOEPERM_LIBRARY_DIR): %s could not be loaded: " % (
        broken, broken / "libmoeperm.so.0") in r.stderr
    r = run_python(code, {"MOEPERM_LIBRARY_DIR": os.pathsep.join([str(broken), libdir])},
                   str(tmp_path), os.path.dirname(PACKAGE))
    assert r.returncode == 0, r.stderr
    assert os.path.dirname(r.stdout.strip()) == libdir


def golden_path():
    from moeperm import golden
    return golden.library_path


def golden_dir():
    return os.path.dirname(golden_path())


def test_golden_library_is_loaded_on_first_use_only():
    r = run_python("import sys, moeperm; print('moeperm.golden' in sys.modules); "
                   "print(moeperm.golden.library_path)",
                   {"MOEPERM_LIBRARY_DIR": os.pathsep.join([os.path.dirname(
                       moeperm.library_path), golden_dir()])},
                   SOURCE_ROOT, os.path.dirname(PACKAGE))
    assert r.returncode == 0, r.stderr
    first, path = r.stdout.split()
    assert first == "False" and path == golden_path()


def test_directory_variable_without_the_golden_library_fails_only_golden(tmp_path):
    code = ("import numpy, moeperm\n"
            "print(moeperm.moe_token_permute_grad(numpy.ones((1, 1), numpy.float32), [0], 1)"
            ".tolist())\n"
            "import moeperm.golden")
    # libmoeperm alone in a directory (an installed copy keeps both in one).
    alone = tmp_path / "alone"
    alone.mkdir()
    shutil.copy(moeperm.library_path, alone / os.path.basename(moeperm.library_path))
    r = run_python(code, {"MOEPERM_LIBRARY_DIR": str(alone)}, str(tmp_path),
                   os.path.dirname(PACKAGE))
    assert r.stdout.strip() == "[[1.0]]"
    assert r.returncode == 1
    assert "ImportError: moeperm cannot find libmoeperm-golden." in r.stderr
    assert "no libmoeperm-golden.so.0 or libmoeperm-golden.so" in r.stderr


def test_installed_package_loads_both_recorded_libraries_without_variables(tmp_path):
    libdir = tmp_path / "lib"
    libdir.mkdir()
    names = [os.path.basename(p) for p in (moeperm.library_path, golden_path())]
    shutil.copy(moeperm.library_path, libdir / names[0])
    shutil.copy(golden_path(), libdir / names[1])
    site = copy_package(tmp_path, str(libdir))
    r = run_python("import moeperm, moeperm.golden; print(moeperm.library_path); "
                   "print(moeperm.golden.library_path)", {}, str(tmp_path), site)
    assert r.returncode == 0, r.stderr
    assert r.stdout.split() == [str(libdir / n) for n in names]


def test_source_tree_without_variables_uses_its_golden_build_directory(tmp_path):
    from_source_tree()
    built = os.path.join(SOURCE_ROOT, "build", "src", "golden", "libmoeperm-golden.so.0")
    if not os.path.exists(built):
        pytest.skip("this source tree has no build/ directory")
    r = run_python("import moeperm.golden; print(moeperm.golden.library_path)", {},
                   str(tmp_path), os.path.dirname(PACKAGE))
    assert r.returncode == 0, r.stderr
    assert r.stdout.strip() == built

#!/usr/bin/env python3
"""pip builds a wheel of the source tree with meson-python, installs it into
a fresh venv, and the package's own tests run against that installed copy.

    pip_install.py SOURCE_ROOT

Offline, as on a host without PyPI: the venv sees the system's numpy, torch
and pytest (--system-site-packages), and pip builds with the installed
meson-python (--no-build-isolation; --no-index so nothing is fetched).  The
source tree is copied first, since meson-python 0.12 writes its work files
into the tree it builds.  Checked:

  - `pip wheel` gives one wheel, which holds the package at its root beside
    its libraries, and `pip install` of it puts the package, its two
    libraries and the `moeperm` tool into the venv;
  - the tool and `import moeperm, moeperm.golden` run under `env -i`, the
    libraries found beside the package with no variable;
  - tests/python passes against the installed package (not the source
    tree's python/), with pytest's plugin autoloading on, so that the
    pytest11 entry point loads moeperm.testing without -p.

Exit 77 (skipped) when meson-python, venv or pip is missing."""
import glob
import os
import shutil
import subprocess
import sys
import tempfile
import zipfile

SKIP = 77


def run(args, what, **kwargs):
    print("$ " + " ".join(args), flush=True)
    r = subprocess.run(args, capture_output=True, text=True, **kwargs)
    if r.returncode != 0:
        print(r.stdout[-20000:] + r.stderr[-20000:])
        print("FAIL: " + what)
        sys.exit(1)
    return r


def main():
    root = os.path.abspath(sys.argv[1])
    for module in ("mesonpy", "venv", "pip"):
        r = subprocess.run([sys.executable, "-c", "import " + module], capture_output=True)
        if r.returncode != 0:
            print("%s is not installed for %s (Debian: python3-mesonpy, python3-venv, "
                  "python3-pip): skipped" % (module, sys.executable))
            sys.exit(SKIP)
    with tempfile.TemporaryDirectory() as tmp:
        src = os.path.join(tmp, "src")
        shutil.copytree(root, src, symlinks=True, ignore=shutil.ignore_patterns(
            "build*", ".git", ".mesonpy*", "__pycache__", ".pytest_cache"))
        venv = os.path.join(tmp, "venv")
        run([sys.executable, "-m", "venv", "--system-site-packages", venv], "python3 -m venv")
        python = os.path.join(venv, "bin", "python")
        wheels = os.path.join(tmp, "wheels")
        run([python, "-m", "pip", "wheel", "--no-build-isolation", "--no-deps", "--no-index",
             "-w", wheels, src], "pip wheel")
        (wheel,) = glob.glob(os.path.join(wheels, "moeperm-*.whl"))
        print("wheel: " + os.path.basename(wheel))
        with zipfile.ZipFile(wheel) as z:
            names = z.namelist()
        # The package at the wheel's root, beside the libraries its recorded
        # path names: not in .data/purelib, which pip installs apart from
        # them wherever purelib and platlib differ.
        if "moeperm/__init__.py" not in names or "moeperm/_paths.py" not in names or not any(
                n.startswith(".moeperm.mesonpy.libs/libmoeperm.so") for n in names):
            print("\n".join(names))
            print("FAIL: the wheel does not hold moeperm/ beside .moeperm.mesonpy.libs/")
            sys.exit(1)
        run([python, "-m", "pip", "install", "--no-index", "--no-deps", wheel], "pip install")

        tool = os.path.join(venv, "bin", "moeperm")
        r = run(["env", "-i", tool, "--version"], "the installed tool runs under env -i")
        print("tool: " + r.stdout.strip())
        r = run(["env", "-i", python, "-c",
                 "import moeperm, moeperm.golden; print(moeperm.__file__); "
                 "print(moeperm.library_path); print(moeperm.golden.library_path)"],
                "the installed package imports under env -i", cwd=tmp)
        package, lib, golden = r.stdout.split()
        for path in (package, lib, golden):
            if not os.path.realpath(path).startswith(os.path.realpath(venv) + os.sep):
                print("FAIL: %s is not in the venv %s" % (path, venv))
                sys.exit(1)
        print("package: %s\nlibraries: %s, %s" % (package, lib, golden))

        env = {k: v for k, v in os.environ.items()
               if k not in ("PYTHONPATH", "MOEPERM_LIBRARY_DIR", "LD_LIBRARY_PATH",
                            "PYTEST_DISABLE_PLUGIN_AUTOLOAD", "PYTEST_PLUGINS")}
        env.update(MOEPERM_SOURCE_ROOT=root, MOEPERM_TOOL=tool, MOEPERM_INSTALLED_TEST="1",
                   PYTHONDONTWRITEBYTECODE="1")
        r = subprocess.run([python, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-r", "s",
                            os.path.join(root, "tests", "python")],
                           env=env, cwd=tmp, text=True)
        if r.returncode != 0:
            print("FAIL: tests/python against the installed package")
            sys.exit(1)
    print("ok: pip wheel, pip install, and tests/python against the installed package")


if __name__ == "__main__":
    main()

#!/usr/bin/env python3
"""After `meson install`, the installed tree finds its own libraries with no
environment variable, wherever it lies: the tool by its RUNPATH
($ORIGIN/../LIBDIR) and the Python package by the directory it records
relative to itself.  The tree is installed under a scratch DESTDIR and then
moved, so that neither the configured prefix nor the DESTDIR holds it, and
both are run under `env -i`.

usage: install_relocated.py BUILD_DIR"""
import json
import os
import shutil
import subprocess
import sys
import tempfile


def fail(message, result=None):
    if result is not None:
        message += "\n--- stdout\n%s--- stderr\n%s" % (result.stdout, result.stderr)
    print("FAIL: " + message)
    sys.exit(1)


def option(build, name):
    out = subprocess.run(["meson", "introspect", build, "--buildoptions"], check=True,
                         capture_output=True, text=True).stdout
    return next(o["value"] for o in json.loads(out) if o["name"] == name)


def main():
    build = os.path.abspath(sys.argv[1])
    prefix = option(build, "prefix").lstrip("/")
    with tempfile.TemporaryDirectory() as tmp:
        dest = os.path.join(tmp, "dest")
        r = subprocess.run(["meson", "install", "-C", build, "--destdir", dest, "--no-rebuild",
                            "--quiet"], capture_output=True, text=True)
        if r.returncode != 0:
            fail("meson install", r)
        moved = os.path.join(tmp, "moved")
        shutil.move(dest, moved)
        root = os.path.join(moved, prefix)

        tool = os.path.join(root, "bin", "moeperm")
        r = subprocess.run(["env", "-i", tool, "--version"], capture_output=True, text=True)
        if r.returncode != 0 or not r.stdout.startswith("moeperm "):
            fail("the installed tool does not run from %s without LD_LIBRARY_PATH" % tool, r)
        print("tool: " + r.stdout.strip())

        site = next((d for d, _, files in os.walk(root)
                     if os.path.basename(d) == "moeperm" and "_paths.py" in files), None)
        if site is None:
            print("no Python package installed (-Dpython=disabled): skipped")
            sys.exit(77)
        site = os.path.dirname(site)
        code = ("import numpy, moeperm, moeperm.golden\n"
                "print(moeperm.library_path)\nprint(moeperm.golden.library_path)\n"
                "print(moeperm.moe_token_permute_grad(numpy.ones((2, 3), numpy.float32), "
                "numpy.arange(2, dtype=numpy.int32), 1).sum())\n")
        r = subprocess.run(["env", "-i", "PYTHONPATH=" + site, sys.executable, "-c", code],
                           capture_output=True, text=True, cwd=tmp)
        if r.returncode != 0:
            fail("the installed package does not load its libraries from %s" % site, r)
        lib, golden, total = r.stdout.split()
        for path in (lib, golden):
            if not os.path.realpath(path).startswith(os.path.realpath(root) + os.sep):
                fail("the installed package loaded %s, outside the installed tree %s"
                     % (path, root))
        if float(total) != 6.0:
            fail("the installed package computed %s, not 6.0" % total)
        print("package: %s and %s" % (lib, golden))
    print("ok: the installed tool and package find their libraries after a move")


if __name__ == "__main__":
    main()

"""Finding and loading moeperm's shared libraries.

The package is pure Python over two libraries: libmoeperm (the operators)
and libmoeperm-golden (golden cases and the judge, loaded when
``moeperm.golden`` is first used).  Where they live is decided at run time,
for each the same way, in this order (the first place that has it wins):

1. ``MOEPERM_LIBRARY_DIR``: one directory, or several separated by
   ``os.pathsep``.  When it is set, nothing else is searched: a setting that
   points at the wrong place is reported rather than quietly bypassed.
   ``meson devenv`` sets it to the build tree's two library directories.
2. The directory ``meson install`` (or the wheel) recorded in ``_paths.py``
   beside this file, relative to this package's directory: an installed
   tree finds its libraries at any prefix and after a move.
3. ``build/src`` (libmoeperm) or ``build/src/golden`` (libmoeperm-golden)
   of the source tree this package sits in, for a checkout used without
   ``meson devenv``.
4. The dynamic loader's own search (``LD_LIBRARY_PATH``, the ld.so cache) and
   ``ctypes.util.find_library``.

When none has it, the ImportError lists every place and what was found there.
"""
import ctypes
import ctypes.util
import os
import sys

_HERE = os.path.dirname(os.path.abspath(__file__))


def _file_names(stem, soversion):
    """File names a library called lib<stem> may have, most specific first."""
    if sys.platform == "darwin":
        return ["lib%s.%s.dylib" % (stem, soversion), "lib%s.dylib" % stem]
    if sys.platform in ("win32", "cygwin"):
        return ["lib%s-%s.dll" % (stem, soversion), "%s-%s.dll" % (stem, soversion),
                "lib%s.dll" % stem, "%s.dll" % stem]
    return ["lib%s.so.%s" % (stem, soversion), "lib%s.so" % stem]


def _recorded_dirs():
    try:
        from . import _paths
    except ImportError:
        return []
    # join() keeps an absolute LIBDIR (a libdir outside the prefix) as it is.
    return [os.path.normpath(os.path.join(_HERE, _paths.LIBDIR))]


# Where each library is built, below the build directory: the build tree
# mirrors the source tree.
_BUILD_SUBDIRS = {"moeperm": "src", "moeperm-golden": os.path.join("src", "golden")}


def _source_tree_dirs(stem):
    root = os.path.dirname(os.path.dirname(_HERE))  # python/moeperm/ -> the checkout
    if not os.path.isfile(os.path.join(root, "meson.build")) or stem not in _BUILD_SUBDIRS:
        return []
    return [os.path.join(root, "build", _BUILD_SUBDIRS[stem])]


def _try_dirs(dirs, names, origin, looked):
    for d in dirs:
        path = next((os.path.join(d, n) for n in names if os.path.exists(os.path.join(d, n))),
                    None)
        if path is None:
            looked.append("%s (%s): no %s" % (d, origin, " or ".join(names)))
            continue
        try:
            return ctypes.CDLL(path), path
        except OSError as e:
            looked.append("%s (%s): %s could not be loaded: %s" % (d, origin, path, e))
    return None, None


def load(stem, soversion="0"):
    """Loads lib<stem> and returns (ctypes.CDLL, the path or name it was
    loaded from).  Raises ImportError naming every place it looked."""
    names = _file_names(stem, soversion)
    looked = []
    env = os.environ.get("MOEPERM_LIBRARY_DIR")
    if env is not None:
        dirs = [d for d in env.split(os.pathsep) if d]
        lib, path = _try_dirs(dirs, names, "MOEPERM_LIBRARY_DIR", looked)
        if lib is None and not dirs:
            looked.append("MOEPERM_LIBRARY_DIR is set but empty")
        if lib is not None:
            return lib, path
        raise ImportError(_message(stem, looked))
    looked.append("MOEPERM_LIBRARY_DIR is not set")

    for dirs, origin in ((_recorded_dirs(), "recorded by meson install"),
                         (_source_tree_dirs(stem), "the source tree's build directory")):
        lib, path = _try_dirs(dirs, names, origin, looked)
        if lib is not None:
            return lib, path

    candidates = names[:1]
    found = ctypes.util.find_library(stem)
    if found and found not in candidates:
        candidates.append(found)
    for name in candidates:
        try:
            return ctypes.CDLL(name), name
        except OSError as e:
            looked.append("the dynamic loader's search for %s: %s" % (name, e))
    raise ImportError(_message(stem, looked))


def _message(stem, looked):
    return ("moeperm cannot find lib%s.  Looked in:\n  %s\n"
            "Set MOEPERM_LIBRARY_DIR to the directory that holds it, run from "
            "`meson devenv -C BUILD_DIR`, or install moeperm with `meson install`."
            % (stem, "\n  ".join(looked)))

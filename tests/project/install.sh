#!/bin/sh
# After `meson install` into a scratch prefix: pkg-config finds
# moeperm-golden, the example builds against the installed headers and
# libraries alone and judges the committed corpus, and the installed tool
# links the shared libraries.
#   install.sh BUILD_DIR SOURCE_ROOT
set -eu
build=$1 root=$2
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT INT TERM
dest=$tmp/dest

meson install -C "$build" --destdir "$dest" --no-rebuild >"$tmp/install.log" 2>&1 ||
    { cat "$tmp/install.log" >&2; echo "FAIL: meson install" >&2; exit 1; }
prefix=$(meson introspect "$build" --buildoptions |
    python3 -c 'import json,sys; print(next(o["value"] for o in json.load(sys.stdin) if o["name"] == "prefix"))')
libdir=$(meson introspect "$build" --buildoptions |
    python3 -c 'import json,sys; print(next(o["value"] for o in json.load(sys.stdin) if o["name"] == "libdir"))')
case $libdir in /*) ;; *) libdir=$prefix/$libdir ;; esac
pcdir=$dest$libdir/pkgconfig
[ -f "$pcdir/moeperm-golden.pc" ] || { echo "FAIL: no moeperm-golden.pc in $pcdir" >&2; exit 1; }

# pkg-config with the installed tree relocated under $dest
export PKG_CONFIG_PATH=$pcdir PKG_CONFIG_SYSROOT_DIR=$dest
flags=$(pkg-config --cflags --libs moeperm-golden) ||
    { echo "FAIL: pkg-config --cflags --libs moeperm-golden" >&2; exit 1; }
echo "pkg-config: $flags"
# Only the installed headers: no -I into the source or build tree.
cc -std=c11 -Wall -Werror "$root/examples/check_my_kernel.c" $flags -o "$tmp/check_my_kernel" ||
    { echo "FAIL: the example does not build against the installed headers" >&2; exit 1; }
LD_LIBRARY_PATH=$dest$libdir "$tmp/check_my_kernel" "$root/golden/hidden" >"$tmp/out" ||
    { cat "$tmp/out" >&2; echo "FAIL: the installed example does not pass the corpus" >&2; exit 1; }
tail -n 1 "$tmp/out"

tool=$dest$prefix/bin/moeperm
for lib in libmoeperm.so libmoeperm-golden.so; do
    if ! LD_LIBRARY_PATH=$dest$libdir ldd "$tool" | grep -q "$lib"; then
        echo "FAIL: the installed moeperm does not link $lib" >&2
        LD_LIBRARY_PATH=$dest$libdir ldd "$tool" >&2
        exit 1
    fi
done
echo "ok: installed headers, pkg-config, example and tool"

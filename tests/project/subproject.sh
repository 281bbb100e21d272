#!/bin/sh
# A parent Meson project that uses moeperm as a subproject with a plain
# dependency('moeperm') builds the library and registers none of
# moeperm's tests (README, "Using moeperm from Meson").
#   subproject.sh SOURCE_ROOT
set -eu
root=$1
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT INT TERM
mkdir -p "$tmp/parent/subprojects"
# a copy without build trees or the corpus, as a wrap would bring it
mkdir "$tmp/parent/subprojects/moeperm"
(cd "$root" && tar --exclude='./build*' --exclude='./.git' --exclude='./golden' -cf - .) |
    tar -xf - -C "$tmp/parent/subprojects/moeperm"
cat >"$tmp/parent/meson.build" <<'MESON'
project('parent', 'c', default_options: ['c_std=c11'])
moeperm = dependency('moeperm')
executable('uses_moeperm', 'main.c', dependencies: moeperm)
test('parent_own_test', find_program('true'))
MESON
cat >"$tmp/parent/main.c" <<'C'
#include <stdio.h>
#include <moeperm/moeperm.h>
int main(void) { printf("%s\n", moeperm_version()); return 0; }
C
meson setup "$tmp/b" "$tmp/parent" >"$tmp/setup.log" 2>&1 ||
    { cat "$tmp/setup.log" >&2; echo "FAIL: setup" >&2; exit 1; }
ninja -C "$tmp/b" >"$tmp/build.log" 2>&1 || { cat "$tmp/build.log" >&2; echo "FAIL: build" >&2; exit 1; }
"$tmp/b/uses_moeperm"
tests=$(meson test -C "$tmp/b" --list 2>/dev/null | grep -v "^ninja")
echo "registered tests: $tests"
if [ "$tests" != "parent_own_test" ]; then
    echo "FAIL: the parent's meson test lists more than its own test" >&2
    exit 1
fi
if grep -q "json-c\|libcrypto\|cmocka" "$tmp/setup.log"; then
    echo "FAIL: the subproject looked for the tools' or tests' dependencies:" >&2
    grep "json-c\|libcrypto\|cmocka" "$tmp/setup.log" >&2
    exit 1
fi
echo "ok: the library alone, no moeperm test registered"

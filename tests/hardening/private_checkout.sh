#!/bin/bash
# private_checkout.sh SOURCE_ROOT: the checks that run the tool as another
# user pass when the checkout sits below a directory only its owner can
# enter (root's home, any home directory, a mktemp -d directory), as a new
# user's clone often does.  Copies the tracked and untracked files of the
# source tree below a fresh mktemp -d (mode 0700), builds the tool there,
# and runs cli_refusals.sh against it: it must pass, with some of its
# refusals seen as another user.  Only root can drop to another user, so
# other users skip (exit 77).
set -u
src=$1
if [ "$(id -u)" -ne 0 ]; then
    echo "skipped: only root can run the tool as another user"
    exit 77
fi
work=$(mktemp -d "${TMPDIR:-/tmp}/moeperm-private.XXXXXX") || exit 1
trap 'rm -rf "$work"' EXIT
chmod 700 "$work"
mkdir "$work/src"
if git -C "$src" rev-parse --git-dir >/dev/null 2>&1; then
    git -C "$src" ls-files -z -co --exclude-standard |
        tar -C "$src" --null -T - -cf - | tar -C "$work/src" -xf - || exit 1
else
    tar -C "$src" --exclude='./build*' -cf - . | tar -C "$work/src" -xf - || exit 1
fi
meson setup "$work/build" "$work/src" -Dtests=disabled -Dpython=disabled >"$work/setup.log" 2>&1 &&
    ninja -C "$work/build" tools/moeperm >"$work/ninja.log" 2>&1 ||
    { cat "$work/setup.log" "$work/ninja.log"; echo "FAIL: cannot build the private checkout"; exit 1; }
bash "$src/tests/hardening/cli_refusals.sh" "$work/build/tools/moeperm" >"$work/refusals.log" 2>&1
rc=$?
cat "$work/refusals.log"
[ "$rc" -eq 0 ] || { echo "FAIL: cli_refusals.sh failed in a checkout below a 0700 directory"; exit 1; }
grep -q 'as another user than root)' "$work/refusals.log" &&
    ! grep -q '(0 of them as another user' "$work/refusals.log" ||
    { echo "FAIL: no refusal was checked as another user"; exit 1; }
echo "ok: the checks as another user pass below a 0700 directory"

#!/usr/bin/env bash
# cli_writer_and_judge_rules.sh MOEPERM - refusals of golden, check and
# compare that come before any work, each with one sentence:
#   - golden, with or without --force, checks every case it would write
#     (and README.md) before it writes any: a target --force may not
#     replace leaves the corpus untouched;
#   - golden --force replaces a README.md only when moeperm wrote it (its
#     first line), never the user's own file or a symbolic link.
set -u
moeperm=$1
work=$(mktemp -d "${TMPDIR:-/tmp}/moeperm-rules.XXXXXX")
trap 'rm -rf "$work"' EXIT
failures=0
fail() {
    echo "FAIL: $*"
    failures=$((failures + 1))
}
# expect STATUS WHAT COMMAND...: runs COMMAND (stdout to $work/out, stderr
# to $work/err) and checks its exit status.
expect() {
    local want=$1 what=$2 rc
    shift 2
    "$@" >"$work/out" 2>"$work/err"
    rc=$?
    [ "$rc" -eq "$want" ] || fail "$what: status $rc, expected $want (stderr: $(cat "$work/err"))"
}
# says WHAT TEXT: stderr of the last command contains TEXT.
says() {
    grep -qF -- "$2" "$work/err" || fail "$1: stderr does not say '$2': $(cat "$work/err")"
}
# snapshot DIR: a listing of every file under DIR with its checksum.
snapshot() {
    (cd "$1" && find . -type f -o -type l | sort | while read -r f; do
        printf '%s %s\n' "$f" "$(cksum <"$f" 2>/dev/null)"; done)
}

# --- golden: every target checked before any is written ----------------------
g=$work/g
expect 0 "golden --suite tokens" "$moeperm" golden --out "$g" --suite tokens
victim=$(ls "$g/tokens" | sort | tail -n 1)
touch "$g/tokens/$victim/mine.txt"
before=$(snapshot "$g")
sleep 1
expect 2 "golden --force over a case holding a stray file" \
    "$moeperm" golden --out "$g" --suite tokens --force
says "golden --force, stray file" "mine.txt"
[ "$(snapshot "$g")" = "$before" ] || fail "golden --force rewrote cases before refusing"
[ -z "$(find "$g" -newer "$g/tokens/$victim/mine.txt" -name case.json)" ] ||
    fail "golden --force wrote a case before refusing"

# --- golden --force and README.md ---------------------------------------------
r=$work/r
mkdir -p "$r"
echo "my own notes" >"$r/README.md"
expect 2 "golden --force over the user's README.md" "$moeperm" golden --out "$r" --force
says "golden --force, user's README" "$r/README.md does not begin with the line moeperm writes"
[ "$(cat "$r/README.md")" = "my own notes" ] || fail "golden --force replaced the user's README.md"
[ "$(ls "$r")" = README.md ] || fail "golden --force wrote cases before refusing the README.md"
rm "$r/README.md"
echo target >"$work/target"
ln -s "$work/target" "$r/README.md"
expect 2 "golden --force over a README.md link" "$moeperm" golden --out "$r" --force
says "golden --force, README link" "is a symbolic link, not a README.md moeperm wrote"
[ -L "$r/README.md" ] && [ "$(cat "$work/target")" = target ] ||
    fail "golden --force replaced a README.md link"

[ "$failures" -eq 0 ] || { echo "$failures failure(s)"; exit 1; }
echo "all checks passed"

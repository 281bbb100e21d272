#!/bin/sh
# The "command" a manifest records is a shell command that regenerates the
# case: run through sh -c from a directory of the case's name, it writes
# the identical case, also for names with a space, quotes and $(...), and
# runs nothing else.  And `golden --suite` takes the names of
# the usage's "--suite NAME ..." as well as repeated --suite options.
# usage: command_quoting.sh MOEPERM
set -eu
moeperm=$1
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT INT TERM

if command -v jq >/dev/null 2>&1; then
    command_of() { jq -r .command "$1"; }
elif python3 -c '' 2>/dev/null; then
    command_of() { python3 -c 'import json, sys; print(json.load(open(sys.argv[1]))["command"])' "$1"; }
else
    echo "SKIP: neither jq nor python3 to read case.json"
    exit 77
fi
# The recorded command says `moeperm`: make that this build.
mkdir "$tmp/bin"
ln -s "$(cd "$(dirname "$moeperm")" && pwd)/$(basename "$moeperm")" "$tmp/bin/moeperm"
PATH=$tmp/bin:$PATH
export PATH

for name in 'with space' "it's a \"\$(touch pwned)\" \`touch pwned\` case; touch pwned"; do
    "$moeperm" golden --out "$tmp/a" --tokens 8 --top-k 2 --hidden 24 --dtype bf16 --seed 5 \
        --name "$name" >/dev/null
    cmd=$(command_of "$tmp/a/$name/case.json")
    mkdir -p "$tmp/b/$name"
    if ! (cd "$tmp/b/$name" && sh -c "$cmd") >/dev/null 2>"$tmp/err"; then
        echo "FAIL: the recorded command for \"$name\" failed: $cmd" >&2
        cat "$tmp/err" >&2
        exit 1
    fi
    if ! diff -r "$tmp/a/$name" "$tmp/b/$name"; then
        echo "FAIL: the recorded command for \"$name\" wrote another case: $cmd" >&2
        exit 1
    fi
    if [ -n "$(find "$tmp" -name pwned)" ]; then
        echo "FAIL: the recorded command for \"$name\" ran a command from the name: $cmd" >&2
        exit 1
    fi
done

"$moeperm" golden --out "$tmp/s1" --suite routing dropped --seed 3 >/dev/null
"$moeperm" golden --out "$tmp/s2" --suite routing --suite dropped --seed 3 >/dev/null
"$moeperm" golden --out "$tmp/s3" --suite dropped --seed 3 --suite routing >/dev/null
[ -d "$tmp/s1/routing" ] && [ -d "$tmp/s1/dropped" ] || {
    echo "FAIL: --suite routing dropped did not write both suites" >&2
    exit 1
}
diff -r "$tmp/s1" "$tmp/s2" >/dev/null && diff -r "$tmp/s1" "$tmp/s3" >/dev/null || {
    echo "FAIL: --suite a b, --suite a --suite b and --suite b --suite a differ" >&2
    exit 1
}
rc=0
"$moeperm" golden --out "$tmp/s4" --suite routing bogus 2>"$tmp/err" || rc=$?
if [ "$rc" -ne 2 ] || ! grep -q '"bogus"' "$tmp/err" || [ -e "$tmp/s4" ]; then
    echo "FAIL: --suite routing bogus: status $rc, $(cat "$tmp/err")" >&2
    exit 1
fi
echo "ok: recorded commands regenerate quoted names; --suite takes several names"

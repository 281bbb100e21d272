#!/usr/bin/env bash
# valgrind-cli.sh MOEPERM - the moeperm tool under valgrind memcheck, on its
# success paths and its error paths (called by scripts/ci-sanitize valgrind).
#
# Each command must exit with the status it documents; memcheck turns any
# invalid read or write, use of uninitialised memory, or definite/indirect
# leak into status 99, which fails the script.  MOEPERM must be an ordinary
# (not a sanitizer) build.
set -u
moeperm=$1
work=$(mktemp -d "${TMPDIR:-/tmp}/moeperm-valgrind.XXXXXX")
trap 'rm -rf "$work"' EXIT
failures=0
# One thread: memcheck serialises threads anyway, and libgomp's thread
# pool would only add noise.
export OMP_NUM_THREADS=1
# shellcheck disable=SC2054 # the commas belong to valgrind's option values
vg=(valgrind -q --error-exitcode=99 --leak-check=full --show-leak-kinds=definite,indirect
    --errors-for-leak-kinds=definite,indirect --log-file="$work/vg.%p")

expect() { # expect STATUS WHAT ARGS...
    local want=$1 what=$2 rc
    shift 2
    "${vg[@]}" "$moeperm" "$@" >"$work/stdout" 2>"$work/stderr"
    rc=$?
    if [ "$rc" -ne "$want" ]; then
        echo "FAIL: $what: status $rc, expected $want (99 = memcheck error)"
        cat "$work"/vg.* 2>/dev/null | head -40
        failures=$((failures + 1))
    fi
    rm -f "$work"/vg.*
}

expect 0 "version" version
expect 2 "no command" 
expect 2 "unknown command" frobnicate
expect 2 "golden without --out" golden
expect 0 "golden custom case" golden --out "$work/g" --tokens 33 --top-k 4 --hidden 70 \
    --dtype float16 --rows 100 --name f16
expect 0 "golden custom bf16 case" golden --out "$work/g" --tokens 16 --top-k 8 --hidden 2100 \
    --dtype bf16 --name bf16
expect 0 "golden suite" golden --out "$work/s" --suite rounding
expect 2 "golden over an existing case" golden --out "$work/g" --tokens 3 --top-k 1 --hidden 2 \
    --dtype bf16 --name f16
expect 0 "run" run "$work/g/f16" --out "$work/f16.bin"
expect 0 "compare" compare "$work/g/f16" "$work/f16.bin"
printf '\x7f' | dd of="$work/f16.bin" bs=1 seek=10 conv=notrunc status=none
expect 1 "compare a changed output" compare "$work/g/f16" "$work/f16.bin"
expect 0 "check with junit" check "$work/g" "$work/s" --junit "$work/j.xml"
expect 2 "run a missing case" run "$work/nothing" --out "$work/x.bin"
cp -r "$work/g/bf16" "$work/bad"
printf '{"format": "moeperm-golden/1", "tokens_num": -1' >"$work/bad/case.json"
expect 2 "run a broken manifest" run "$work/bad" --out "$work/x.bin"
expect 2 "check a broken manifest" check "$work/bad"
expect 2 "compare against a short file" compare "$work/g/f16" "$work/g/f16/case.json"
# No Ascend runtime here: the npu backend fails to load, status 3.
ASCEND_HOME_PATH=$work/none expect 3 "run on a missing npu runtime" run "$work/g/f16" \
    --out "$work/x.bin" --backend npu
expect 0 "bench" bench --tokens 64 --top-k 2 --hidden 256 --dtype bf16 --threads 1

if [ "$failures" -ne 0 ]; then
    echo "valgrind-cli: $failures command(s) failed"
    exit 1
fi
echo "valgrind-cli: every command clean under memcheck"

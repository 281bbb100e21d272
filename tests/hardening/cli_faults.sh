#!/usr/bin/env bash
# cli_faults.sh MOEPERM SIGNAL_SHIM - atomic outputs under faults.
#
# `moeperm run` and `moeperm golden` write through a temporary name and a
# rename.  This checks what that promises (docs/reliability.md):
#   - a rename that fails (ENOSPC) while golden --force replaces a case:
#     the old case goes back, or is kept whole under its dot name and named;
#   - a signal (INT, TERM, HUP) at the worst moment - the temporary output
#     complete, the rename not done - kills the process by that signal
#     (shell status 128+N) with a message, removes the temporary, and leaves
#     the earlier output, file or case directory, exactly as it was;
#   - the same for a signal sent from outside at arbitrary times;
#   - a write that fails (RLIMIT_FSIZE, `ulimit -f`) exits 2 with a message
#     naming the error, and leaves no temporary and the earlier output;
#   - several processes reading one case, or writing one output, at once
#     all succeed and leave one complete output.
# The signal shim (signal_shim.c, LD_PRELOAD) raises the signal just before
# the Nth rename(), so the worst moment is hit every time.
set -u
moeperm=$1
shim=$2
work=$(mktemp -d "${TMPDIR:-/tmp}/moeperm-faults.XXXXXX")
trap 'rm -rf "$work"' EXIT
failures=0
fail() {
    echo "FAIL: $*"
    failures=$((failures + 1))
}
# A shim in LD_PRELOAD comes before the sanitizer runtime in a sanitizer
# build; tell ASan that this is intended.
export ASAN_OPTIONS="${ASAN_OPTIONS:+$ASAN_OPTIONS:}verify_asan_link_order=0"

# Temporaries of the atomic writes are hidden names with .tmp. or .old.
no_temporaries() {
    local left
    left=$(find "$1" -name '.*.tmp.*' -o -name '.*.old.*')
    [ -z "$left" ] || fail "$2: temporaries left behind: $left"
}

same_case() { # same_case DIR COPY: every file of the case unchanged
    local f
    for f in case.json permuted_output_grad.bin sorted_indices.bin input_grad.bin; do
        cmp -s "$1/$f" "$2/$f" || { fail "$3: $1/$f changed"; return; }
    done
}

gen() { # gen DIR NAME SEED [extra flags]
    local dir=$1 name=$2 seed=$3
    shift 3
    "$moeperm" golden --out "$dir" --tokens 64 --topk 4 --hidden 512 --dtype bf16 \
        --seed "$seed" --name "$name" "$@" >/dev/null
}

mkdir -p "$work/cases" "$work/out"
gen "$work/cases" c1 1 || { echo "FAIL: cannot generate c1"; exit 1; }
gen "$work/cases" c2 2 || { echo "FAIL: cannot generate c2"; exit 1; }
cp -r "$work/cases/c1" "$work/c1.orig"
"$moeperm" run "$work/cases/c1" --out "$work/out/r.bin" || fail "run c1"
cp "$work/out/r.bin" "$work/r.orig"
"$moeperm" run "$work/cases/c2" --out "$work/r2.bin" || fail "run c2"
cmp -s "$work/r.orig" "$work/r2.bin" && fail "c1 and c2 give the same output: the checks below prove nothing"

# --- a signal at the rename -------------------------------------------------
# A signal ignored when this script started stays ignored in the tool, as
# nohup needs (fileio.c); only the signals that arrive can be checked here.
signals="INT:130 TERM:143 HUP:129"
if [ -n "$(trap -p HUP)" ]; then
    echo "note: SIGHUP is ignored in this environment (nohup?): checking that the tool keeps ignoring it"
    signals="INT:130 TERM:143"
    SHIM_SIGNAL=HUP SHIM_SIGNAL_AT_RENAME=1 LD_PRELOAD=$shim \
        "$moeperm" run "$work/cases/c2" --out "$work/out/hup.bin" 2>"$work/err"
    rc=$?
    [ "$rc" -eq 0 ] || fail "run, an ignored SIGHUP at the rename: status $rc, expected 0"
    cmp -s "$work/out/hup.bin" "$work/r2.bin" || fail "run, an ignored SIGHUP: wrong output"
    rm -f "$work/out/hup.bin"
fi
for sig in $signals; do
    name=${sig%%:*} want=${sig##*:}
    # run over an existing output
    SHIM_SIGNAL=$name SHIM_SIGNAL_AT_RENAME=1 LD_PRELOAD=$shim \
        "$moeperm" run "$work/cases/c2" --out "$work/out/r.bin" 2>"$work/err"
    rc=$?
    [ "$rc" -eq "$want" ] || fail "run, SIG$name at the rename: status $rc, expected $want"
    grep -qi interrupt "$work/err" || fail "run, SIG$name: no message (stderr: $(cat "$work/err"))"
    cmp -s "$work/out/r.bin" "$work/r.orig" || fail "run, SIG$name: the earlier output changed"
    no_temporaries "$work/out" "run, SIG$name"
    # run to a new output: nothing may appear
    SHIM_SIGNAL=$name SHIM_SIGNAL_AT_RENAME=1 LD_PRELOAD=$shim \
        "$moeperm" run "$work/cases/c2" --out "$work/out/new.bin" 2>/dev/null
    [ -e "$work/out/new.bin" ] && fail "run, SIG$name: a new output appeared"
    no_temporaries "$work/out" "run to a new file, SIG$name"

    # golden --force over an existing case: rename 1 parks the old case,
    # rename 2 puts the new one in place; a signal before either keeps the
    # old case whole.
    for at in 1 2; do
        SHIM_SIGNAL=$name SHIM_SIGNAL_AT_RENAME=$at LD_PRELOAD=$shim \
            gen "$work/cases" c1 7 --force 2>"$work/err"
        rc=$?
        [ "$rc" -eq "$want" ] || fail "golden --force, SIG$name at rename $at: status $rc, expected $want"
        grep -qi interrupt "$work/err" || fail "golden, SIG$name at rename $at: no message"
        same_case "$work/cases/c1" "$work/c1.orig" "golden --force, SIG$name at rename $at"
        no_temporaries "$work/cases" "golden --force, SIG$name at rename $at"
    done
    # golden of a new case: no directory may appear
    SHIM_SIGNAL=$name SHIM_SIGNAL_AT_RENAME=1 LD_PRELOAD=$shim gen "$work/cases" c3 3 2>/dev/null
    [ -e "$work/cases/c3" ] && fail "golden, SIG$name: a new case appeared"
    no_temporaries "$work/cases" "golden of a new case, SIG$name"
done
"$moeperm" compare "$work/cases/c1" "$work/out/r.bin" >/dev/null ||
    fail "after the signals, c1 and its output no longer agree"

# --- a rename that fails, as on a full disk ---------------------------------
# golden --force: rename 1 parks the old case, rename 2 puts the new one in
# place.  When rename 2 fails the old case goes back (rename 3); when that
# fails too, it is kept whole under its dot name and the message names it.
SHIM_FAIL_RENAME_AT=2 LD_PRELOAD=$shim gen "$work/cases" c1 7 --force 2>"$work/err"
rc=$?
[ "$rc" -eq 2 ] || fail "golden --force, rename 2 fails: status $rc, expected 2"
grep -q "No space left" "$work/err" || fail "golden --force, rename 2 fails: message '$(cat "$work/err")'"
same_case "$work/cases/c1" "$work/c1.orig" "golden --force, rename 2 fails"
no_temporaries "$work/cases" "golden --force, rename 2 fails"
SHIM_FAIL_RENAME_FROM=2 LD_PRELOAD=$shim gen "$work/cases" c1 7 --force 2>"$work/err"
rc=$?
[ "$rc" -eq 2 ] || fail "golden --force, renames 2 and 3 fail: status $rc, expected 2"
kept=$(sed -n 's/.*kept at //p' "$work/err")
if [ -n "$kept" ] && [ -d "$kept" ]; then
    same_case "$kept" "$work/c1.orig" "golden --force, renames 2 and 3 fail: the kept case"
    [ -e "$work/cases/c1" ] && fail "golden --force, renames 2 and 3 fail: c1 exists"
    mv "$kept" "$work/cases/c1"
else
    fail "golden --force, renames 2 and 3 fail: the old case is not named or not there: $(cat "$work/err")"
fi
no_temporaries "$work/cases" "golden --force, renames 2 and 3 fail"

# --- a write that fails: RLIMIT_FSIZE ----------------------------------------
# 8 blocks (4 or 8 KiB, whichever unit this shell uses) is below every file
# of these cases (the output alone is 64 KiB).
(ulimit -f 8 && exec "$moeperm" run "$work/cases/c2" --out "$work/out/r.bin") 2>"$work/err"
rc=$?
[ "$rc" -eq 2 ] || fail "run under ulimit -f: status $rc, expected 2"
grep -qiE 'too large|write|writing' "$work/err" || fail "run under ulimit -f: message '$(cat "$work/err")'"
cmp -s "$work/out/r.bin" "$work/r.orig" || fail "run under ulimit -f: the earlier output changed"
no_temporaries "$work/out" "run under ulimit -f"
(ulimit -f 8 && exec "$moeperm" golden --out "$work/cases" --tokens 64 --topk 4 --hidden 512 \
    --dtype bf16 --seed 9 --name c1 --force) >/dev/null 2>"$work/err"
rc=$?
[ "$rc" -eq 2 ] || fail "golden under ulimit -f: status $rc, expected 2"
[ -s "$work/err" ] || fail "golden under ulimit -f: no message"
same_case "$work/cases/c1" "$work/c1.orig" "golden under ulimit -f"
no_temporaries "$work/cases" "golden under ulimit -f"

# --- signals from outside, at whatever moment they land ----------------------
"$moeperm" golden --out "$work/big" --tokens 1024 --topk 8 --hidden 4096 --dtype bf16 \
    --name b >/dev/null || fail "cannot generate the big case"
"$moeperm" run "$work/big/b" --out "$work/out/big.bin" || fail "run big"
cp "$work/out/big.bin" "$work/big.orig"
# Job control: a background job of a script would otherwise ignore SIGINT.
set -m
for delay in 0.05 0.2 0.4 0.8; do
    for name in INT TERM; do
        "$moeperm" run "$work/big/b" --out "$work/out/big.bin" 2>/dev/null &
        pid=$!
        sleep "$delay"
        kill -s "$name" "$pid" 2>/dev/null
        wait "$pid"
        rc=$?
        case $rc in
            0 | 130 | 143) ;;
            *) fail "run, SIG$name after ${delay}s: status $rc" ;;
        esac
        cmp -s "$work/out/big.bin" "$work/big.orig" ||
            fail "run, SIG$name after ${delay}s: the output is not the complete one"
        no_temporaries "$work/out" "run, SIG$name after ${delay}s"
    done
done
set +m

# --- concurrent readers and writers ------------------------------------------
pids=()
for i in 1 2 3 4; do
    "$moeperm" run "$work/cases/c1" --out "$work/out/p$i.bin" & pids+=($!)
    "$moeperm" run "$work/cases/c1" --out "$work/out/same.bin" & pids+=($!)
done
"$moeperm" check "$work/cases" >/dev/null & pids+=($!)
"$moeperm" compare "$work/cases/c1" "$work/r.orig" >/dev/null & pids+=($!)
for pid in "${pids[@]}"; do
    wait "$pid" || fail "a concurrent reader or writer (pid $pid) failed with status $?"
done
for i in 1 2 3 4; do
    cmp -s "$work/out/p$i.bin" "$work/r.orig" || fail "concurrent run $i: wrong output"
done
cmp -s "$work/out/same.bin" "$work/r.orig" || fail "concurrent writers of one file: wrong output"
no_temporaries "$work/out" "concurrent writers"
# Writers of one case directory: each may win or lose the race for the
# name (exit 0 or 2), but one complete case remains and nothing else.
pids=()
for i in 1 2 3; do
    gen "$work/par" p 5 --force 2>/dev/null & pids+=($!)
done
wins=0
for pid in "${pids[@]}"; do
    wait "$pid"
    rc=$?
    case $rc in
        0) wins=$((wins + 1)) ;;
        2) ;;
        *) fail "concurrent golden writer: status $rc" ;;
    esac
done
[ "$wins" -ge 1 ] || fail "no concurrent golden writer succeeded"
"$moeperm" run "$work/par/p" --out "$work/p.bin" && "$moeperm" compare "$work/par/p" "$work/p.bin" >/dev/null ||
    fail "concurrent golden writers left a case that does not check"
no_temporaries "$work/par" "concurrent golden writers"

if [ "$failures" -ne 0 ]; then
    echo "$failures check(s) failed"
    exit 1
fi
echo "all fault checks passed"

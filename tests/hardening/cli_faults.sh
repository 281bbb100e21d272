#!/usr/bin/env bash
# cli_faults.sh MOEPERM SIGNAL_SHIM steps|races - atomic outputs under faults.
#
# Two parts, run as two tests so that each stays short: "steps" (signals,
# SIGKILL, failing calls and `ulimit -f` at each step of each call site)
# and "races" (signals sent from outside, racing readers and writers).
#
# `moeperm run`, `check --junit` and `golden` write through a temporary
# name and a rename; `golden --force` swaps the new case directory with the
# old one (renameat2 RENAME_EXCHANGE), or, where the file system cannot,
# parks the old case and renames the new one in.  This checks what that
# promises (docs/reliability.md), at every step of every call site:
#   - a catchable signal (INT, TERM, HUP, QUIT, PIPE, ALRM, USR1, USR2,
#     XCPU, VTALRM, PROF, the first real-time signal) before or after each
#     rename, or in the middle of removing a replaced case, kills the
#     process by that signal (shell status 128+N) with a message naming it,
#     removes every temporary, and leaves at the name the earlier output or
#     the complete new one, never a mixture and never nothing;
#   - SIGKILL at the same steps leaves at the name a whole output or case
#     (the old or the new one) whenever the exchange is available, plus a
#     dot-named leftover; without the exchange, a kill between the two
#     renames leaves the name empty and `check` fails naming the parked case;
#   - renames and unlinks that fail (ENOSPC, EIO) exit 2 and say exactly
#     what is left where;
#   - a write that fails (RLIMIT_FSIZE, `ulimit -f`) exits 2 with a message
#     naming the error, and leaves no temporary and the earlier output;
#   - signals sent from outside at arbitrary times;
#   - racing readers and writers: every writer exits 0 or 2 with an honest
#     message, one complete output or case remains, no temporary is left.
# The shim (signal_shim.c, LD_PRELOAD) raises the signal, fails the call or
# pauses at the Nth rename, unlink or readdir, so each moment is hit every
# time.  Counts of each kind are printed at the end (docs/reliability.md).
set -u
moeperm=$1
shim=$2
part=${3:-}
case $part in
    steps | races) ;;
    *) echo "usage: cli_faults.sh MOEPERM SIGNAL_SHIM steps|races" >&2; exit 2 ;;
esac
work=$(mktemp -d "${TMPDIR:-/tmp}/moeperm-faults.XXXXXX")
trap 'rm -rf "$work"' EXIT
failures=0
# fail (cli_lib.sh).
. "$(dirname "$0")/cli_lib.sh"
interrupted=0 killed=0 failed_calls=0 racers=0
# A shim in LD_PRELOAD comes before the sanitizer runtime in a sanitizer
# build; tell ASan that this is intended.
export ASAN_OPTIONS="${ASAN_OPTIONS:+$ASAN_OPTIONS:}verify_asan_link_order=0"

# Temporaries of the atomic writes are hidden names with .tmp. or .old.
leftovers() { find "$1" -name '.*.tmp.*' -o -name '.*.old.*'; }
no_temporaries() {
    local left
    left=$(leftovers "$1")
    [ -z "$left" ] || fail "$2: temporaries left behind: $left"
}

same_case() { # same_case DIR COPY WHAT: every file of the case unchanged
    local f
    for f in case.json permuted_output_grad.bin sorted_indices.bin input_grad.bin; do
        cmp -s "$1/$f" "$2/$f" || { fail "$3: $1/$f differs from $2/$f"; return; }
    done
    [ "$(ls -A "$1" | wc -l)" -eq 4 ] || fail "$3: $1 holds more than the case: $(ls -A "$1")"
}

gen() { # gen DIR NAME SEED [extra flags]
    local dir=$1 name=$2 seed=$3
    shift 3
    "$moeperm" golden --out "$dir" --tokens 64 --topk 4 --hidden 512 --dtype bf16 \
        --seed "$seed" --name "$name" "$@" >/dev/null
}
# shimmed [NAME=VALUE ...] COMMAND...: COMMAND (a shell function too) with
# the shim preloaded and the variables set.
shimmed() (
    while [ $# -gt 0 ] && [ "${1#*=}" != "$1" ]; do
        export "${1?}"
        shift
    done
    export LD_PRELOAD=$shim
    "$@"
)

mkdir -p "$work/cases" "$work/out"
gen "$work/cases" c1 1 || { echo "FAIL: cannot generate c1"; exit 1; }
gen "$work/cases" c2 2 || { echo "FAIL: cannot generate c2"; exit 1; }
gen "$work/new" c1 7 || { echo "FAIL: cannot generate the replacement c1"; exit 1; }
cp -r "$work/cases/c1" "$work/c1.orig"
restore_c1() { rm -rf "$work/cases/c1" && cp -r "$work/c1.orig" "$work/cases/c1"; }
"$moeperm" run "$work/cases/c1" --out "$work/out/r.bin" || fail "run c1"
cp "$work/out/r.bin" "$work/r.orig"
"$moeperm" run "$work/cases/c2" --out "$work/r2.bin" || fail "run c2"
cmp -s "$work/r.orig" "$work/r2.bin" && fail "c1 and c2 give the same output: the checks below prove nothing"
"$moeperm" check "$work/cases/c1" --junit "$work/out/j.xml" >/dev/null || fail "check c1"
cp "$work/out/j.xml" "$work/j.orig"

if [ "$part" = steps ]; then

# --- a catchable signal at each step of each call site ----------------------
# A signal ignored when this script started stays ignored in the tool, as
# nohup needs (src/golden/common/tempfiles.c): then the command must simply succeed.
for name in INT TERM HUP QUIT PIPE ALRM USR1 USR2 XCPU VTALRM PROF RTMIN; do
    want=$((128 + $(kill -l "$name")))
    if [ -n "$(trap -p "$name" 2>/dev/null)" ]; then
        echo "note: SIG$name is ignored in this environment: checking that the tool keeps ignoring it"
        shimmed SHIM_SIGNAL=$name SHIM_SIGNAL_AT_RENAME=1 \
            "$moeperm" run "$work/cases/c2" --out "$work/out/ign.bin" 2>"$work/err" ||
            fail "run, an ignored SIG$name at the rename: status $?"
        cmp -s "$work/out/ign.bin" "$work/r2.bin" || fail "run, an ignored SIG$name: wrong output"
        rm -f "$work/out/ign.bin"
        continue
    fi
    # expect_signal WHAT COMMAND...: killed by SIG$name, with the message
    expect_signal() {
        local what=$1 rc
        shift
        "$@" >/dev/null 2>"$work/err"
        rc=$?
        interrupted=$((interrupted + 1))
        [ "$rc" -eq "$want" ] || fail "$what, SIG$name: status $rc, expected $want"
        grep -q "interrupted by SIG" "$work/err" ||
            fail "$what, SIG$name: no message (stderr: $(cat "$work/err"))"
    }
    # run --out over an existing output, and to a new one
    expect_signal "run at the rename" shimmed SHIM_SIGNAL=$name SHIM_SIGNAL_AT_RENAME=1 \
        "$moeperm" run "$work/cases/c2" --out "$work/out/r.bin"
    cmp -s "$work/out/r.bin" "$work/r.orig" || fail "run, SIG$name: the earlier output changed"
    expect_signal "run to a new file" shimmed SHIM_SIGNAL=$name SHIM_SIGNAL_AT_RENAME=1 \
        "$moeperm" run "$work/cases/c2" --out "$work/out/new.bin"
    [ -e "$work/out/new.bin" ] && fail "run, SIG$name: a new output appeared"
    # check --junit over an existing report
    expect_signal "check --junit at the rename" shimmed SHIM_SIGNAL=$name \
        SHIM_SIGNAL_AT_RENAME=1 "$moeperm" check "$work/cases/c2" --junit "$work/out/j.xml"
    cmp -s "$work/out/j.xml" "$work/j.orig" || fail "check --junit, SIG$name: the earlier report changed"
    no_temporaries "$work/out" "run and check --junit, SIG$name"

    # golden --force with the exchange: before it the old case stays, after
    # it (and in the middle of removing the old one) the new one is in place.
    expect_signal "golden --force before the exchange" shimmed SHIM_SIGNAL=$name \
        SHIM_SIGNAL_AT_RENAME=1 gen "$work/cases" c1 7 --force
    same_case "$work/cases/c1" "$work/c1.orig" "golden --force, SIG$name before the exchange"
    no_temporaries "$work/cases" "golden --force, SIG$name before the exchange"
    for step in SHIM_SIGNAL_AFTER_RENAME=1 SHIM_SIGNAL_AT_UNLINK=1 SHIM_SIGNAL_AT_UNLINK=3; do
        expect_signal "golden --force, $step" shimmed SHIM_SIGNAL=$name $step \
            gen "$work/cases" c1 7 --force
        same_case "$work/cases/c1" "$work/new/c1" "golden --force, SIG$name, $step"
        no_temporaries "$work/cases" "golden --force, SIG$name, $step"
        restore_c1
    done
    # golden --force without the exchange: rename 1 parks the old case,
    # rename 2 puts the new one in place; a signal before either keeps the
    # old case whole.
    for at in 1 2; do
        expect_signal "golden --force, no exchange, at rename $at" shimmed SHIM_NO_EXCHANGE=1 \
            SHIM_SIGNAL=$name SHIM_SIGNAL_AT_RENAME=$at gen "$work/cases" c1 7 --force
        same_case "$work/cases/c1" "$work/c1.orig" "golden --force, no exchange, SIG$name at rename $at"
        no_temporaries "$work/cases" "golden --force, no exchange, SIG$name at rename $at"
    done
    # golden of a new case: no directory may appear
    expect_signal "golden of a new case" shimmed SHIM_SIGNAL=$name SHIM_SIGNAL_AT_RENAME=1 \
        gen "$work/cases" c3 3
    [ -e "$work/cases/c3" ] && fail "golden, SIG$name: a new case appeared"
    no_temporaries "$work/cases" "golden of a new case, SIG$name"
done
"$moeperm" compare "$work/cases/c1" "$work/out/r.bin" >/dev/null ||
    fail "after the signals, c1 and its output no longer agree"

# --- SIGKILL: what survives ---------------------------------------------------
# No handler runs, so a dot-named leftover stays; what matters is what the
# name holds.  check_kill WHAT WANT_CASE: c1 is whole and equal to
# WANT_CASE, `check` passes over both cases, then the leftovers go.
check_kill() {
    killed=$((killed + 1))
    same_case "$work/cases/c1" "$2" "$1"
    "$moeperm" check "$work/cases" >"$work/check.out" 2>&1 ||
        fail "$1: check fails after the kill: $(cat "$work/check.out")"
    grep -q "^total *2 *2 " "$work/check.out" || fail "$1: check does not pass 2 cases: $(cat "$work/check.out")"
    rm -rf $(leftovers "$work/cases")
    restore_c1
}
shimmed SHIM_SIGNAL=KILL SHIM_SIGNAL_AT_RENAME=1 "$moeperm" run "$work/cases/c2" \
    --out "$work/out/r.bin" 2>/dev/null
rc=$?
killed=$((killed + 1))
[ "$rc" -eq 137 ] || fail "run, SIGKILL at the rename: status $rc, expected 137"
cmp -s "$work/out/r.bin" "$work/r.orig" || fail "run, SIGKILL at the rename: the earlier output changed"
[ -n "$(leftovers "$work/out")" ] || fail "run, SIGKILL at the rename: no temporary left (was the kill too early?)"
rm -rf $(leftovers "$work/out")
shimmed SHIM_SIGNAL=KILL SHIM_SIGNAL_AFTER_RENAME=1 "$moeperm" run "$work/cases/c2" \
    --out "$work/out/r.bin" 2>/dev/null
killed=$((killed + 1))
cmp -s "$work/out/r.bin" "$work/r2.bin" || fail "run, SIGKILL after the rename: not the new output"
no_temporaries "$work/out" "run, SIGKILL after the rename"
cp "$work/r.orig" "$work/out/r.bin"
shimmed SHIM_SIGNAL=KILL SHIM_SIGNAL_AT_RENAME=1 "$moeperm" check "$work/cases/c2" \
    --junit "$work/out/j.xml" >/dev/null 2>&1
killed=$((killed + 1))
cmp -s "$work/out/j.xml" "$work/j.orig" || fail "check --junit, SIGKILL at the rename: the earlier report changed"
rm -rf $(leftovers "$work/out")
shimmed SHIM_SIGNAL=KILL SHIM_SIGNAL_AT_RENAME=1 gen "$work/cases" c3 3 2>/dev/null
killed=$((killed + 1))
[ -e "$work/cases/c3" ] && fail "golden of a new case, SIGKILL at the rename: the case appeared"
rm -rf $(leftovers "$work/cases")
shimmed SHIM_SIGNAL=KILL SHIM_SIGNAL_AFTER_RENAME=1 gen "$work/cases" c3 3 2>/dev/null
killed=$((killed + 1))
"$moeperm" check "$work/cases/c3" >/dev/null || fail "golden of a new case, SIGKILL after the rename: no whole case"
no_temporaries "$work/cases" "golden of a new case, SIGKILL after the rename"
rm -rf "$work/cases/c3"
shimmed SHIM_SIGNAL=KILL SHIM_SIGNAL_AT_RENAME=1 gen "$work/cases" c1 7 --force 2>/dev/null
check_kill "golden --force, SIGKILL before the exchange" "$work/c1.orig"
for step in SHIM_SIGNAL_AFTER_RENAME=1 SHIM_SIGNAL_AT_UNLINK=1 SHIM_SIGNAL_AT_UNLINK=2 \
    SHIM_SIGNAL_AT_UNLINK=4; do
    shimmed SHIM_SIGNAL=KILL $step gen "$work/cases" c1 7 --force 2>/dev/null
    check_kill "golden --force, SIGKILL, $step" "$work/new/c1"
done
shimmed SHIM_NO_EXCHANGE=1 SHIM_SIGNAL=KILL SHIM_SIGNAL_AT_RENAME=1 gen "$work/cases" c1 7 --force 2>/dev/null
check_kill "golden --force, no exchange, SIGKILL before the park" "$work/c1.orig"
shimmed SHIM_NO_EXCHANGE=1 SHIM_SIGNAL=KILL SHIM_SIGNAL_AFTER_RENAME=2 gen "$work/cases" c1 7 --force 2>/dev/null
check_kill "golden --force, no exchange, SIGKILL after the put" "$work/new/c1"
# Without the exchange a kill between park and put leaves the name empty:
# the old case is whole under its dot name, and check says so instead of
# counting one case fewer.
shimmed SHIM_NO_EXCHANGE=1 SHIM_SIGNAL=KILL SHIM_SIGNAL_AT_RENAME=2 gen "$work/cases" c1 7 --force 2>/dev/null
killed=$((killed + 1))
parked=$(find "$work/cases" -maxdepth 1 -name '.c1.old.*')
if [ -e "$work/cases/c1" ] || [ -z "$parked" ]; then
    fail "golden --force, no exchange, SIGKILL between the renames: c1 or the parked case not where documented"
else
    same_case "$parked" "$work/c1.orig" "golden --force, no exchange, SIGKILL between the renames: the parked case"
    "$moeperm" check "$work/cases" >"$work/check.out" 2>&1
    rc=$?
    [ "$rc" -eq 2 ] || fail "check after a kill between the renames: status $rc, expected 2"
    grep -qF "$parked" "$work/check.out" || fail "check after a kill between the renames does not name $parked: $(cat "$work/check.out")"
fi
rm -rf $(leftovers "$work/cases")
restore_c1

# --- calls that fail ----------------------------------------------------------
# The exchange fails (ENOSPC): nothing changed.
shimmed SHIM_FAIL_RENAME_AT=1 gen "$work/cases" c1 7 --force 2>"$work/err"
rc=$?
failed_calls=$((failed_calls + 1))
[ "$rc" -eq 2 ] || fail "golden --force, the exchange fails: status $rc, expected 2"
grep -q "No space left" "$work/err" || fail "golden --force, the exchange fails: message '$(cat "$work/err")'"
same_case "$work/cases/c1" "$work/c1.orig" "golden --force, the exchange fails"
no_temporaries "$work/cases" "golden --force, the exchange fails"
# Without the exchange: rename 1 parks the old case, rename 2 puts the new
# one in place.  When rename 2 fails the old case goes back (rename 3);
# when that fails too, it is kept whole under its dot name and named.
shimmed SHIM_NO_EXCHANGE=1 SHIM_FAIL_RENAME_AT=2 gen "$work/cases" c1 7 --force 2>"$work/err"
rc=$?
failed_calls=$((failed_calls + 1))
[ "$rc" -eq 2 ] || fail "golden --force, rename 2 fails: status $rc, expected 2"
grep -q "No space left" "$work/err" || fail "golden --force, rename 2 fails: message '$(cat "$work/err")'"
same_case "$work/cases/c1" "$work/c1.orig" "golden --force, rename 2 fails"
no_temporaries "$work/cases" "golden --force, rename 2 fails"
shimmed SHIM_NO_EXCHANGE=1 SHIM_FAIL_RENAME_FROM=2 gen "$work/cases" c1 7 --force 2>"$work/err"
rc=$?
failed_calls=$((failed_calls + 1))
[ "$rc" -eq 2 ] || fail "golden --force, renames 2 and 3 fail: status $rc, expected 2"
kept=$(sed -n 's/.*it is kept whole at //p' "$work/err")
if [ -n "$kept" ] && [ -d "$kept" ]; then
    same_case "$kept" "$work/c1.orig" "golden --force, renames 2 and 3 fail: the kept case"
    [ -e "$work/cases/c1" ] && fail "golden --force, renames 2 and 3 fail: c1 exists"
    mv "$kept" "$work/cases/c1"
else
    fail "golden --force, renames 2 and 3 fail: the old case is not named or not there: $(cat "$work/err")"
fi
no_temporaries "$work/cases" "golden --force, renames 2 and 3 fail"
# The removal of the replaced case fails part way (EIO on its Nth file):
# the new case is in place, and the message lists exactly the files left.
for at in 1 2 3 4; do
    shimmed SHIM_FAIL_UNLINK_AT=$at gen "$work/cases" c1 7 --force 2>"$work/err"
    rc=$?
    failed_calls=$((failed_calls + 1))
    [ "$rc" -eq 2 ] || fail "golden --force, unlink $at fails: status $rc, expected 2"
    same_case "$work/cases/c1" "$work/new/c1" "golden --force, unlink $at fails"
    left_dir=$(leftovers "$work/cases")
    if [ -z "$left_dir" ] || [ ! -d "$left_dir" ]; then
        fail "golden --force, unlink $at fails: nothing left behind, yet the removal failed"
    else
        names=$(ls "$left_dir" | tr '\n' ' ')
        grep -qF "$left_dir" "$work/err" || fail "golden --force, unlink $at fails: $left_dir is not named: $(cat "$work/err")"
        if [ "$at" -eq 1 ]; then
            grep -q "kept whole" "$work/err" || fail "golden --force, unlink 1 fails: not said to be whole: $(cat "$work/err")"
        else
            grep -q "kept" "$work/err" && fail "golden --force, unlink $at fails: says kept, but holds only $names: $(cat "$work/err")"
            for f in $names; do
                grep -qF "$f" "$work/err" || fail "golden --force, unlink $at fails: $f is left but not named: $(cat "$work/err")"
            done
        fi
        rm -rf "$left_dir"
    fi
    restore_c1
done

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

fi

if [ "$part" = races ]; then

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

# --- racing readers and writers ----------------------------------------------
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
racers=$((racers + 4))
for i in 1 2 3 4; do
    cmp -s "$work/out/p$i.bin" "$work/r.orig" || fail "concurrent run $i: wrong output"
done
cmp -s "$work/out/same.bin" "$work/r.orig" || fail "concurrent writers of one file: wrong output"
no_temporaries "$work/out" "concurrent writers"
# Writers of one case directory, with and without the exchange: each may
# win or lose the race for the name (exit 0 or 2, never a message that
# blames the case), but one complete case remains and nothing else.
race_round() { # race_round ROUND [env assignments]
    local round=$1 pid rc wins=0 i
    shift
    local pids=()
    for i in 1 2 3 4; do
        env "$@" LD_PRELOAD=$shim "$moeperm" golden --out "$work/par" --tokens 16 --topk 4 \
            --hidden 96 --dtype bf16 --seed $((i % 2)) --name p --force >/dev/null 2>"$work/race$i.err" &
        pids+=($!)
    done
    i=0
    for pid in "${pids[@]}"; do
        i=$((i + 1))
        wait "$pid"
        rc=$?
        racers=$((racers + 1))
        case $rc in
            0) wins=$((wins + 1)) ;;
            2) grep -qE "not a regular file|not a golden case|no case.json|kept" "$work/race$i.err" &&
                   fail "racing golden writer, round $round $*: $(cat "$work/race$i.err")" ;;
            *) fail "racing golden writer, round $round $*: status $rc" ;;
        esac
    done
    [ "$wins" -ge 1 ] || fail "racing golden writers, round $round $*: none succeeded"
    "$moeperm" check "$work/par" >/dev/null || fail "racing golden writers, round $round $*: no complete case left"
    no_temporaries "$work/par" "racing golden writers, round $round $*"
}
for round in 1 2 3 4 5 6 7 8 9 10; do
    race_round "$round" SHIM_UNUSED=1
    race_round "$round" SHIM_NO_EXCHANGE=1
done
# One race made certain: writer B lists the old case, then pauses before
# looking at its files; meanwhile writer A (without the exchange) parks the
# old case and pauses with the name empty.  B must not call a file that A's
# park moved away "not a regular file": B goes on (exit 0) or loses the
# name to A (exit 2), and one complete case remains.
rm -rf "$work/par"
gen "$work/par" p 1 || fail "cannot generate the race's case"
shimmed SHIM_NO_EXCHANGE=1 SHIM_SLEEP=1 SHIM_SLEEP_AT_READDIR=3 gen "$work/par" p 2 --force 2>"$work/b.err" &
b=$!
sleep 0.3
shimmed SHIM_NO_EXCHANGE=1 SHIM_SLEEP=1.5 SHIM_SLEEP_AFTER_RENAME=1 gen "$work/par" p 3 --force 2>"$work/a.err" &
a=$!
wait "$b"
rc_b=$?
wait "$a"
rc_a=$?
racers=$((racers + 2))
for w in a b; do
    grep -qE "not a regular file|not a golden case|no case.json" "$work/$w.err" &&
        fail "the certain race: writer $w blames the case: $(cat "$work/$w.err")"
done
[ "$rc_a" -eq 0 ] || [ "$rc_b" -eq 0 ] || fail "the certain race: neither writer succeeded (A $rc_a, B $rc_b)"
"$moeperm" check "$work/par" >/dev/null || fail "the certain race left no complete case"
no_temporaries "$work/par" "the certain race"

# --- readers racing a writer that replaces the case ---------------------------
# make-case --force swaps the case directory's name with the new case's; a
# reader opens every file through one handle on the directory it found, so
# it reads one whole case, the old or the new, and reads again when the
# replacement removed the old one's files under it.  Two cases that differ
# in every byte alternate under one name while check, compare and run read
# it: every read must succeed (a reader opening the files by name mixed
# the two cases in about one read in eight, refused by a sha256).
for seed in 1 2; do
    "$moeperm" golden --out "$work/swap-src" --tokens 256 --topk 1 --hidden 4096 --dtype float32 \
        --seed "$seed" --name "s$seed" >/dev/null || fail "cannot generate the swapped case $seed"
done
swap() { # swap SEED: make-case --force of the case from source SEED
    local from=$work/swap-src/s$1
    "$moeperm" make-case --out "$work/swap" --name c --op permute-grad --top-k 1 --force \
        --input "permuted_output_grad=$from/permuted_output_grad.bin:float32:256x4096" \
        --input "sorted_indices=$from/sorted_indices.bin:int32:256" >/dev/null 2>>"$work/swap.err"
}
swap 1 || fail "make-case of the swapped case: $(cat "$work/swap.err")"
"$moeperm" run "$work/swap-src/s1" --out "$work/swap-out1.bin" || fail "run the swapped case 1"
(while [ ! -e "$work/swap.stop" ]; do swap 2; swap 1; done) &
writer=$!
reads=0 read_failures=0 replaced=0
for i in $(seq 50); do
    for cmd in check compare run; do
        case $cmd in
            check) set -- check "$work/swap" ;;
            # the output of case 1: compare exits 0 or 1 (mismatch), never 2
            compare) set -- compare "$work/swap/c" "$work/swap-out1.bin" ;;
            run) set -- run "$work/swap/c" --out "$work/swap-run.bin" ;;
        esac
        "$moeperm" "$@" >/dev/null 2>"$work/swap-read.err"
        rc=$?
        reads=$((reads + 1))
        if [ "$rc" -ge 2 ] || { [ "$cmd" != compare ] && [ "$rc" -ne 0 ]; }; then
            read_failures=$((read_failures + 1))
            [ "$read_failures" -le 3 ] &&
                echo "a reader racing the writer: $cmd exited $rc: $(head -c 400 "$work/swap-read.err")"
        fi
    done
done
touch "$work/swap.stop"
wait "$writer"
replaced=$(grep -c . "$work/swap.err" 2>/dev/null)
[ "$read_failures" -eq 0 ] || fail "readers racing a replacing writer: $read_failures of $reads reads failed"
[ "$replaced" -eq 0 ] || fail "the replacing writer failed: $(head -c 400 "$work/swap.err")"
echo "readers racing a replacing writer: $reads reads, $read_failures failed"

fi

echo "interrupted by a catchable signal: $interrupted; killed by SIGKILL: $killed; failing calls: $failed_calls; racing writers: $racers"
if [ "$failures" -ne 0 ]; then
    echo "$failures check(s) failed"
    exit 1
fi
echo "all fault checks passed"

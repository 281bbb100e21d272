#!/usr/bin/env bash
# cli_refusals.sh MOEPERM - what the command line refuses, and when.
#
#   - `run --out` and `check --junit` naming one of a case's own files
#     (case.json or a tensor file, however spelled: ./, .., a hard link, a
#     symbolic link) exit 2 with a sentence naming the path and the file,
#     and the case stays byte for byte what it was;
#   - a bad --junit ("", a missing directory, a directory, a read-only
#     directory) or --out ("", a missing directory) exits 2 before any case
#     runs (check prints no case line);
#   - an empty CASE_DIR or DIR exits 2 with a sentence that names it;
#   - MOEPERM_NPU_DEVICE is the npu backend's: a bad value does not stop a
#     cpu run;
#   - every command takes --help and -h;
#   - a failed write to standard output (/dev/full) is not a success: exit
#     2 and a sentence, except that a mismatch stays exit 1.
set -u
moeperm=$1
work=$(mktemp -d "${TMPDIR:-/tmp}/moeperm-refusals.XXXXXX")
trap 'chmod -R u+w "$work"; rm -rf "$work"' EXIT
failures=0
fail() {
    echo "FAIL: $*"
    failures=$((failures + 1))
}

# expect STATUS WHAT COMMAND...: runs COMMAND, stdout to $work/out and
# stderr to $work/err, and checks its exit status.
expect() {
    local want=$1 what=$2 rc
    shift 2
    "$@" >"$work/out" 2>"$work/err"
    rc=$?
    [ "$rc" -eq "$want" ] || fail "$what: status $rc, expected $want (stderr: $(cat "$work/err"))"
}
# says WHAT TEXT: stderr of the last command contains TEXT (fixed string).
says() {
    grep -qF -- "$2" "$work/err" || fail "$1: stderr does not say '$2': $(cat "$work/err")"
}
same_case() { # same_case DIR COPY WHAT: every file of the case unchanged
    local f
    for f in case.json permuted_output_grad.bin sorted_indices.bin input_grad.bin; do
        cmp -s "$1/$f" "$2/$f" || { fail "$3: $1/$f changed"; return; }
    done
}

gen() { # gen DIR NAME SEED
    "$moeperm" golden --out "$1" --tokens 16 --topk 4 --hidden 96 --dtype bf16 --seed "$3" \
        --name "$2" >/dev/null
}
gen "$work/cases" c1 1 && gen "$work/cases" c2 2 || { echo "FAIL: cannot generate the cases"; exit 1; }
cp -r "$work/cases" "$work/orig"
c1=$work/cases/c1

# --- outputs that are the case's own files ----------------------------------
ln "$c1/input_grad.bin" "$work/hard-link.bin"
ln -s "$c1/permuted_output_grad.bin" "$work/sym-link.bin"
for spelling in "$c1/permuted_output_grad.bin:permuted_output_grad" \
    "$c1/sorted_indices.bin:sorted_indices" "$c1/input_grad.bin:input_grad" \
    "$c1/case.json:manifest" "$c1/./input_grad.bin:input_grad" \
    "$work/cases/../cases/c1/case.json:manifest" "$work/hard-link.bin:input_grad" \
    "$work/sym-link.bin:permuted_output_grad"; do
    out=${spelling%:*} file=${spelling##*:}
    expect 2 "run --out $out" "$moeperm" run "$c1" --out "$out"
    says "run --out $out" "\"$out\""
    says "run --out $out" "$file"
    same_case "$c1" "$work/orig/c1" "run --out $out"
done
# check: the report path against every case found, not only the first.
for out in "$work/cases/c2/case.json" "$work/cases/c2/input_grad.bin"; do
    expect 2 "check --junit $out" "$moeperm" check "$work/cases" --junit "$out"
    says "check --junit $out" "\"$out\""
    [ -s "$work/out" ] && fail "check --junit $out: cases ran before the refusal: $(cat "$work/out")"
    same_case "$work/cases/c2" "$work/orig/c2" "check --junit $out"
done
# A tensor file under another name than the usual: what the manifest says.
cp -r "$c1" "$work/renamed"
mv "$work/renamed/input_grad.bin" "$work/renamed/golden.bin"
sed -i 's/"file": "input_grad.bin"/"file": "golden.bin"/' "$work/renamed/case.json"
"$moeperm" compare "$work/renamed" "$work/renamed/golden.bin" >/dev/null ||
    fail "the case with a renamed input_grad does not read: the check below proves nothing"
cp "$work/renamed/golden.bin" "$work/golden.orig"
expect 2 "run --out a renamed tensor file" "$moeperm" run "$work/renamed" --out "$work/renamed/golden.bin"
says "run --out a renamed tensor file" "input_grad file"
cmp -s "$work/renamed/golden.bin" "$work/golden.orig" || fail "run --out a renamed tensor file: it changed"
expect 2 "check --junit a renamed tensor file" "$moeperm" check "$work/renamed" --junit "$work/renamed/golden.bin"
says "check --junit a renamed tensor file" "input_grad file"
cmp -s "$work/renamed/golden.bin" "$work/golden.orig" || fail "check --junit a renamed tensor file: it changed"
# A manifest the reader refuses is still a file to keep.
cp -r "$c1" "$work/broken"
echo '{' >"$work/broken/case.json"
cp "$work/broken/case.json" "$work/broken.orig"
expect 2 "check --junit a broken manifest" "$moeperm" check "$work/broken" --junit "$work/broken/case.json"
says "check --junit a broken manifest" "manifest"
cmp -s "$work/broken/case.json" "$work/broken.orig" || fail "check --junit a broken manifest: it changed"
# ... and so are its tensor files, whatever the unreadable manifest names
cp "$work/broken/input_grad.bin" "$work/broken-tensor.orig"
expect 2 "check --junit a tensor beside a broken manifest" "$moeperm" check "$work/broken" \
    --junit "$work/broken/input_grad.bin"
says "check --junit a tensor beside a broken manifest" "cannot be read"
cmp -s "$work/broken/input_grad.bin" "$work/broken-tensor.orig" ||
    fail "check --junit a tensor beside a broken manifest: it changed"
# An output beside the case files, not one of them, is fine.
expect 0 "run --out beside the case files" "$moeperm" run "$c1" --out "$c1/mine.bin"
expect 0 "check --junit beside the case files" "$moeperm" check "$work/cases" --junit "$c1/junit.xml"
rm -f "$c1/mine.bin" "$c1/junit.xml"

# --- bad output paths, refused before any work ------------------------------
mkdir -p "$work/dir"
for junit in "" "$work/missing/j.xml" "$work/dir" "$work/dir/"; do
    expect 2 "check --junit '$junit'" "$moeperm" check "$work/cases" --junit "$junit"
    says "check --junit '$junit'" "\"$junit\""
    [ -s "$work/out" ] && fail "check --junit '$junit': cases ran before the refusal"
done
for out in "" "$work/missing/r.bin" "$work/dir"; do
    expect 2 "run --out '$out'" "$moeperm" run "$c1" --out "$out"
    says "run --out '$out'" "\"$out\""
done
[ -e "$work/missing" ] && fail "a refused output created its directory"
# A read-only directory stops only those who are not root.
if [ "$(id -u)" -ne 0 ]; then
    mkdir "$work/ro" && chmod 555 "$work/ro"
    expect 2 "check --junit in a read-only directory" "$moeperm" check "$work/cases" \
        --junit "$work/ro/j.xml"
    says "check --junit in a read-only directory" "\"$work/ro/j.xml\""
    [ -s "$work/out" ] && fail "check --junit in a read-only directory: cases ran before the refusal"
fi

# --- empty directory arguments ----------------------------------------------
expect 2 'run ""' "$moeperm" run "" --out "$work/r.bin"
says 'run ""' 'the case directory is an empty string'
expect 2 'compare ""' "$moeperm" compare "" "$work/r.bin"
says 'compare ""' 'the case directory is an empty string'
expect 2 'check ""' "$moeperm" check ""
says 'check ""' 'the directory to search is an empty string'
expect 2 'check DIR ""' "$moeperm" check "$work/cases" ""
says 'check DIR ""' 'the directory to search is an empty string'
[ -s "$work/out" ] && fail 'check DIR "": cases ran before the refusal'

# --- MOEPERM_NPU_DEVICE belongs to the npu backend --------------------------
expect 0 "run" "$moeperm" run "$c1" --out "$work/r.bin"
expect 0 "run on cpu, MOEPERM_NPU_DEVICE=abc" env MOEPERM_NPU_DEVICE=abc \
    "$moeperm" run "$c1" --out "$work/r-env.bin"
cmp -s "$work/r.bin" "$work/r-env.bin" || fail "run with MOEPERM_NPU_DEVICE=abc: another output"
expect 0 "check on cpu, MOEPERM_NPU_DEVICE=abc" env MOEPERM_NPU_DEVICE=abc \
    "$moeperm" check "$work/cases"
expect 2 "run on npu, MOEPERM_NPU_DEVICE=abc" env MOEPERM_NPU_DEVICE=abc \
    "$moeperm" run "$c1" --out "$work/r-npu.bin" --backend npu
says "run on npu, MOEPERM_NPU_DEVICE=abc" '"abc"'

# --- --help and -h everywhere -----------------------------------------------
for cmd in golden run compare check bench version; do
    for flag in --help -h; do
        expect 0 "$cmd $flag" "$moeperm" "$cmd" "$flag"
        grep -q "usage: moeperm $cmd" "$work/out" || fail "$cmd $flag: no usage on stdout"
    done
done

# --- standard output that cannot be written ----------------------------------
if [ -c /dev/full ]; then
    "$moeperm" run "$work/cases/c2" --out "$work/r2.bin" || fail "run c2"
    full() { # full STATUS WHAT COMMAND...
        local want=$1 what=$2 rc
        shift 2
        "$@" >/dev/full 2>"$work/err"
        rc=$?
        [ "$rc" -eq "$want" ] || fail "$what >/dev/full: status $rc, expected $want"
        grep -q "standard output" "$work/err" || fail "$what >/dev/full: no message: $(cat "$work/err")"
    }
    full 2 "compare (equal)" "$moeperm" compare "$c1" "$work/r.bin"
    full 1 "compare (mismatch)" "$moeperm" compare "$c1" "$work/r2.bin"
    full 2 "check" "$moeperm" check "$work/cases"
    full 2 "golden --list" "$moeperm" golden --list
    full 2 "version" "$moeperm" version
    full 2 "--help" "$moeperm" --help
    full 2 "golden" "$moeperm" golden --out "$work/g" --tokens 4 --topk 2 --hidden 8 --dtype bf16
fi

same_case "$c1" "$work/orig/c1" "at the end"
same_case "$work/cases/c2" "$work/orig/c2" "at the end"
if [ "$failures" -ne 0 ]; then
    echo "$failures check(s) failed"
    exit 1
fi
echo "all refusal checks passed"

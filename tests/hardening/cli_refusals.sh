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
#     2 and a sentence, except that a mismatch stays exit 1;
#   - an output path that is not a regular file or absent (a device, FIFO,
#     socket, directory, symbolic link), a file the caller could not write
#     with a shell redirect (read-only, another user's, another user's in a
#     sticky directory, a read-only one even for root), a file of another
#     case (existing or missing, or beside a manifest that cannot be read)
#     and a name too long for its temporary are refused, exit 2, before any
#     case runs, and left as they were, by every output option: run --out,
#     check --junit and --json, compare --json; run --out DIR/ checks each
#     file it would write, and check --shard a file of a case in any shard;
#   - `check` over a tree with a directory it cannot search fails, exit 2,
#     naming it, instead of passing with a case fewer.
# Checks that need a user other than root run as nobody (setpriv); where
# that cannot be done they are skipped with a note.
set -u
moeperm=$1
work=$(mktemp -d "${TMPDIR:-/tmp}/moeperm-refusals.XXXXXX")
trap 'chmod -R u+w "$work"; chmod -R u+rwx "$work" 2>/dev/null; rm -rf "$work"' EXIT
failures=0
# fail, and as_user and can_drop for the checks as a user other than root
# (cli_lib.sh); this script's own expect and says below.
. "$(dirname "$0")/cli_lib.sh"

# expect STATUS WHAT COMMAND...: runs COMMAND, stdout to $work/out and
# stderr to $work/err, and checks its exit status.
# Every refused output target is counted (docs/reliability.md).
targets=0 targets_user=0
expect() {
    local want=$1 what=$2 rc
    shift 2
    case $want:$what in
        "2:run --out"* | "2:check --junit"* | "2:check --json"* | "2:check --html"* | \
            "2:compare --json"* | "2:compare --html"*)
            targets=$((targets + 1))
            [ "$1" = as_user ] && targets_user=$((targets_user + 1)) ;;
    esac
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
cp "$work/renamed/golden.bin" "$work/renamed-output.bin"
"$moeperm" compare "$work/renamed" "$work/renamed-output.bin" >/dev/null ||
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
# --- output targets that are not a regular file, or not the caller's -------
# Each is refused before any work (check prints no case line) with a
# sentence naming the path and what it is, and is left as it was.
# as_user and can_drop (cli_lib.sh): checks as a user other than root.
drop_setup
# refused_target WHAT SAYS PATH [as_user]: run --out, check --junit,
# check --json and compare --json refuse PATH, saying SAYS, and PATH's
# kind and bytes stay what they were.
refused_target() {
    local what=$1 says=$2 target=$3 user=${4:-} before after
    # stat -L too: a link's target must not change either (but a link to
    # /proc/self/fd/1 leads to each stat's own standard output); only
    # regular files are
    # read (a FIFO or /dev/full would block or never end).
    state() {
        stat -c '%F %s %a %i' "$1" 2>/dev/null
        case $(readlink "$1") in /dev/* | /proc/*) ;; *) stat -L -c '%F %s %a %i' "$1" 2>/dev/null ;; esac
        [ -f "$1" ] && [ ! -L "$1" ] && cksum <"$1"
    }
    before=$(state "$target")
    expect 2 "run --out $what" $user "$moeperm" run "$c1" --out "$target"
    says "run --out $what" "\"$target\""
    says "run --out $what" "$says"
    expect 2 "check --junit $what" $user "$moeperm" check "$work/cases" --junit "$target"
    says "check --junit $what" "\"$target\""
    says "check --junit $what" "$says"
    [ -s "$work/out" ] && fail "check --junit $what: cases ran before the refusal"
    expect 2 "check --json $what" $user "$moeperm" check "$work/cases" --json "$target"
    says "check --json $what" "\"$target\""
    says "check --json $what" "$says"
    [ -s "$work/out" ] && fail "check --json $what: cases ran before the refusal"
    expect 2 "compare --json $what" $user "$moeperm" compare "$c1" "$work/r1.bin" --json "$target"
    says "compare --json $what" "\"$target\""
    says "compare --json $what" "$says"
    [ -s "$work/out" ] && fail "compare --json $what: compared before the refusal"
    after=$(state "$target")
    [ "$before" = "$after" ] || fail "$what: $target changed ($before -> $after)"
}
mkdir -p "$work/t"
"$moeperm" run "$c1" --out "$work/r1.bin" || fail "run c1"
# Never the system's own nodes as root: a tool that failed this test would
# replace /dev/null for the whole machine.  Root gets nodes of its own
# (the null device's numbers, and the loop device's as a block device);
# anyone else may be pointed at /dev, where a rename cannot succeed.
if [ "$(id -u)" -eq 0 ]; then
    mknod "$work/t/null" c 1 3 && refused_target "a character device" "is a character device" "$work/t/null"
    mknod "$work/t/loop" b 7 0 && refused_target "a block device" "is a block device" "$work/t/loop"
    ln -s /proc/self/fd/1 "$work/t/stdout" &&
        refused_target "a link to standard output" "is a symbolic link (to /proc/self/fd/1)" "$work/t/stdout"
else
    [ -c /dev/full ] && refused_target "/dev/full" "is a character device" /dev/full
    [ -e /dev/stdout ] && refused_target "/dev/stdout" "is a symbolic link (to " /dev/stdout
fi
mkfifo "$work/t/fifo" && refused_target "a FIFO" "is a FIFO" "$work/t/fifo"
if command -v python3 >/dev/null; then
    python3 -c 'import socket, sys; socket.socket(socket.AF_UNIX).bind(sys.argv[1])' "$work/t/sock" &&
        refused_target "a socket" "is a socket" "$work/t/sock"
else
    echo "note: no python3 to make a socket: skipping that output target"
fi
echo "keep me" >"$work/t/file.txt"
ln -s file.txt "$work/t/link"
refused_target "a symbolic link to a file" "is a symbolic link (to file.txt)" "$work/t/link"
grep -qx "keep me" "$work/t/file.txt" || fail "the link's target changed"
ln -s nowhere "$work/t/dangling"
refused_target "a dangling symbolic link" "is a symbolic link (to nowhere)" "$work/t/dangling"
ln -s ../t "$work/t/dirlink"
refused_target "a symbolic link to a directory" "is a symbolic link" "$work/t/dirlink"
refused_target "a directory" "is a directory" "$work/t"
echo "read only" >"$work/t/ro.txt" && chmod 444 "$work/t/ro.txt"
refused_target "a chmod 444 file" "mode 0444" "$work/t/ro.txt"
# Another case's files: existing, missing (writing it would complete the
# case with foreign data), and anything beside a manifest that cannot be
# read; a file of the case beside is fine.
cp -r "$work/cases/c2" "$work/t/other"
refused_target "another case's input_grad" "the input_grad file of the case" "$work/t/other/input_grad.bin"
refused_target "another case's manifest" "the manifest of the case" "$work/t/other/case.json"
rm "$work/t/other/input_grad.bin"
refused_target "another case's missing input_grad" "the input_grad file of the case" \
    "$work/t/other/input_grad.bin"
[ -e "$work/t/other/input_grad.bin" ] && fail "a refused output completed another case"
cp -r "$work/cases/c2" "$work/t/broken" && echo '{' >"$work/t/broken/case.json"
refused_target "a file beside a broken manifest" "whose manifest cannot be read" "$work/t/broken/notes.bin"
expect 0 "run --out beside another case's files" "$moeperm" run "$c1" --out "$work/t/other/mine.bin"
rm -f "$work/t/other/mine.bin"
# Names too long for the temporary (".NAME.tmp.XXXXXX", 12 bytes more):
# 244 bytes are refused, 243 written; a path that reaches PATH_MAX only
# with the temporary is refused too.
long=$(printf 'j%.0s' $(seq 244))
refused_target "a 244-byte name" "is too long: its file name is 244 bytes" "$work/t/$long"
expect 0 "check --junit, a 243-byte name" "$moeperm" check "$work/cases" --junit "$work/t/${long%j}"
[ -s "$work/t/${long%j}" ] || fail "check --junit, a 243-byte name: no report"
rm -f "$work/t/${long%j}"
deep=$work/t$(printf '/.%.0s' $(seq $(((4096 - ${#work} - 3 - 13) / 2))))/j.x
refused_target "a path at PATH_MAX with its temporary" "(PATH_MAX)" "$deep"
if [ "$can_drop" -eq 1 ] && [ "$(id -u)" -eq 0 ]; then
    # As a user who is not root: a file that user cannot write, a file of
    # another user in a sticky directory, and a directory it cannot write.
    chmod 755 "$work" "$work/cases" "$c1" "$work/cases/c2"
    mkdir -p "$work/u" "$work/sticky" "$work/ro"
    chmod 777 "$work/u" && chmod 1777 "$work/sticky" && chmod 555 "$work/ro"
    echo "root's" >"$work/u/roots.txt" && chmod 644 "$work/u/roots.txt"
    refused_target "a file the user cannot write" "a file you cannot write (mode 0644)" \
        "$work/u/roots.txt" as_user
    echo "root's" >"$work/sticky/shared.txt" && chmod 666 "$work/sticky/shared.txt"
    refused_target "another user's file in a sticky directory" "sticky directory" \
        "$work/sticky/shared.txt" as_user
    expect 2 "check --junit in a read-only directory" as_user "$moeperm" check "$work/cases" \
        --junit "$work/ro/j.xml"
    says "check --junit in a read-only directory" "\"$work/ro/j.xml\""
    [ -s "$work/out" ] && fail "check --junit in a read-only directory: cases ran before the refusal"
    expect 0 "run --out into a directory the user may write" as_user "$moeperm" run "$c1" \
        --out "$work/u/mine.bin"
elif [ "$(id -u)" -ne 0 ]; then
    mkdir "$work/ro" && chmod 555 "$work/ro"
    expect 2 "check --junit in a read-only directory" "$moeperm" check "$work/cases" \
        --junit "$work/ro/j.xml"
    says "check --junit in a read-only directory" "\"$work/ro/j.xml\""
    [ -s "$work/out" ] && fail "check --junit in a read-only directory: cases ran before the refusal"
fi

# A case of several outputs written into a directory: each file is checked
# the same way, before the case runs.
"$moeperm" golden --out "$work/multi" --op permute --tokens 8 --topk 2 --hidden 16 \
    --dtype bf16 --name p1 >/dev/null || fail "cannot generate a MoeTokenPermute case"
mkdir -p "$work/outdir"
ln -s ../t/file.txt "$work/outdir/permuted_tokens.bin"
expect 2 "run --out DIR/ holding a symbolic link" "$moeperm" run "$work/multi/p1" --out "$work/outdir/"
says "run --out DIR/ holding a symbolic link" "is a symbolic link"
[ -L "$work/outdir/permuted_tokens.bin" ] || fail "run --out DIR/: the link was replaced"
[ -e "$work/outdir/sorted_indices.bin" ] && fail "run --out DIR/: an output was written before the refusal"
cp -r "$work/cases/c2" "$work/t/other2"
expect 2 "run --out DIR/, a case directory" "$moeperm" run "$work/multi/p1" --out "$work/t/other2/"
says "run --out DIR/, a case directory" "the sorted_indices file of the case"
same_case "$work/t/other2" "$work/orig/c2" "run --out DIR/, a case directory"
# check --shard: a report must not replace a file of a case in another
# shard either (a hard link, so the case is not in the report's directory);
# one of the two shards leaves c1 out.
"$moeperm" check "$work/cases" --shard 1/2 | grep -q "c1\$" && other=2/2 || other=1/2
for shard in 1/2 2/2; do
    expect 2 "check --junit, --shard $shard" "$moeperm" check "$work/cases" --shard "$shard" \
        --junit "$work/hard-link.bin"
    says "check --junit, --shard $shard" "the input_grad file of the case $c1"
done
"$moeperm" check "$work/cases" --shard "$other" | grep -q "c1\$" &&
    fail "check --shard: both shards judge c1, so the check above proves nothing"
same_case "$c1" "$work/orig/c1" "check --shard --junit"

# --- reports that would replace what the command reads ----------------------
# The output being judged is read by compare (PATH, or PATH/<output>.bin
# and .npy) and by check (OUTDIR/<case>/<output>.bin and .npy, every case
# found, whichever shard): a report over it, however spelled, would be
# judged next time in its place.  Two reports naming one file would lose
# one.  Each is refused before any work, and the file is left as it was.
"$moeperm" run "$c1" --out "$work/judged.bin" || fail "run c1 for the judged output"
cp "$work/judged.bin" "$work/judged.orig"
ln "$work/judged.bin" "$work/judged-hard.bin"
ln -s judged.bin "$work/judged-sym.bin"
for spelling in "judged.bin:$work/judged.bin" "judged.bin:$work/./judged.bin" \
    "judged.bin:$work/t/../judged.bin" "judged-hard.bin:$work/judged.bin" \
    "judged-sym.bin:$work/judged.bin" "judged.bin:$work/judged-hard.bin"; do
    read=$work/${spelling%%:*} report=${spelling#*:}
    for flag in --json --html; do
        expect 2 "compare $flag over the output it reads ($read, $report)" \
            "$moeperm" compare "$c1" "$read" "$flag" "$report"
        says "compare $flag over the output it reads" "an output this command reads"
        [ -s "$work/out" ] && fail "compare $flag $report: compared before the refusal"
        cmp -s "$work/judged.bin" "$work/judged.orig" || fail "compare $flag $report: the output changed"
    done
done
# several outputs in a directory: both names of each, present or not
mkdir -p "$work/judged-dir"
"$moeperm" run "$work/multi/p1" --out "$work/judged-dir/" || fail "run p1 for the judged outputs"
for report in "$work/judged-dir/permuted_tokens.bin" "$work/judged-dir/sorted_indices.npy"; do
    expect 2 "compare --json over an output in PATH/ ($report)" \
        "$moeperm" compare "$work/multi/p1" "$work/judged-dir" --json "$report"
    says "compare --json over an output in PATH/" "an output this command reads"
done
[ -e "$work/judged-dir/sorted_indices.npy" ] && fail "compare --json: a refused report was written"
# check --outputs: every case's outputs, in both shards
mkdir -p "$work/outs/c1" "$work/outs/c2"
cp "$work/judged.bin" "$work/outs/c1/input_grad.bin"
"$moeperm" run "$work/cases/c2" --out "$work/outs/c2/input_grad.bin" || fail "run c2 for --outputs"
for flag in --junit --json --html; do
    for report in "$work/outs/c1/input_grad.bin" "$work/outs/c2/../c1/input_grad.bin" \
        "$work/outs/c2/input_grad.npy"; do
        for shard in 1/1 1/2 2/2; do
            expect 2 "check $flag over an output it reads ($report, --shard $shard)" \
                "$moeperm" check "$work/cases" --outputs "$work/outs" --shard "$shard" "$flag" "$report"
            says "check $flag over an output it reads" "an output this command reads"
            [ -s "$work/out" ] && fail "check $flag $report: cases ran before the refusal"
        done
    done
done
cmp -s "$work/outs/c1/input_grad.bin" "$work/judged.orig" || fail "check --outputs: an output changed"
[ -e "$work/outs/c2/input_grad.npy" ] && fail "check --outputs: a refused report was written"
expect 0 "check --outputs, reports beside the outputs" "$moeperm" check "$work/cases" \
    --outputs "$work/outs" --junit "$work/outs/j.xml" --json "$work/outs/c1/r.json" \
    --html "$work/outs/c1/r.html"
rm -f "$work/outs/j.xml" "$work/outs/c1/r.json" "$work/outs/c1/r.html"
# two reports, one file
for pair in "--json:--html" "--junit:--json" "--junit:--html"; do
    a=${pair%%:*} b=${pair#*:}
    expect 2 "check $a and $b naming one file" "$moeperm" check "$work/cases" "$a" "$work/r.x" \
        "$b" "$work/./r.x"
    says "check $a and $b naming one file" "name the same file"
    [ -e "$work/r.x" ] && fail "check $a and $b naming one file: a report was written"
done
expect 2 "compare --json and --html naming one file" "$moeperm" compare "$c1" "$work/judged.bin" \
    --json "$work/r.x" --html "$work/r.x"
says "compare --json and --html naming one file" "name the same file"

# --- run checks --out before it reads the tensors ----------------------------
# A bad --out is said first, even when the case's tensors are bad too, and
# without reading them: the case's outputs come from its manifest.
cp -r "$work/orig/c1" "$work/badtensor"
: >"$work/badtensor/permuted_output_grad.bin"
expect 2 "run --out in a missing directory, a truncated tensor" "$moeperm" run "$work/badtensor" \
    --out "$work/missing/r.bin"
says "run --out in a missing directory, a truncated tensor" "\"$work/missing/r.bin\""
expect 2 "run --out over its own truncated tensor" "$moeperm" run "$work/badtensor" \
    --out "$work/badtensor/permuted_output_grad.bin"
says "run --out over its own truncated tensor" "the permuted_output_grad file of the case"
[ -s "$work/badtensor/permuted_output_grad.bin" ] && fail "run --out over its own tensor: it changed"
# ... and a good --out then meets the bad case, and leaves no output
expect 2 "run, a truncated tensor" "$moeperm" run "$work/badtensor" --out "$work/never.bin"
says "run, a truncated tensor" "permuted_output_grad"
[ -e "$work/never.bin" ] && fail "run, a truncated tensor: an output was written"
cp -r "$work/multi/p1" "$work/badmulti" && : >"$work/badmulti/tokens.bin"
expect 2 "run --out DIR/, a truncated tensor" "$moeperm" run "$work/badmulti" --out "$work/newdir/a/"
[ -e "$work/newdir" ] && fail "run --out DIR/, a truncated tensor: the directory made for it was left"

# --- discovery that cannot see everything fails ------------------------------
if [ "$can_drop" -eq 1 ]; then
    mkdir -p "$work/walk/ok" "$work/walk/hidden"
    cp -r "$work/orig/c1" "$work/walk/ok/c1" && cp -r "$work/orig/c2" "$work/walk/hidden/c2"
    chmod -R a+rX "$work/walk" && chmod 755 "$work"
    chmod 644 "$work/walk/hidden" # listable, not searchable: its cases cannot be stat()ed
    expect 2 "check over a directory it cannot search" as_user "$moeperm" check "$work/walk"
    says "check over a directory it cannot search" "$work/walk/hidden"
    says "check over a directory it cannot search" "Permission denied"
    [ -s "$work/out" ] && fail "check over a directory it cannot search: cases ran: $(cat "$work/out")"
    chmod 755 "$work/walk/hidden"
    expect 0 "check over the same tree, searchable" as_user "$moeperm" check "$work/walk"
fi
# A symbolic link loop is not a dangling link: it fails the walk too.
mkdir -p "$work/looped" && cp -r "$work/orig/c1" "$work/looped/c1"
ln -s l2 "$work/looped/l1" && ln -s l1 "$work/looped/l2"
expect 2 "check over a symbolic link loop" "$moeperm" check "$work/looped"
says "check over a symbolic link loop" "Too many levels of symbolic links"

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

echo "output targets refused: $targets ($targets_user of them as another user than root)"
same_case "$c1" "$work/orig/c1" "at the end"
same_case "$work/cases/c2" "$work/orig/c2" "at the end"
if [ "$failures" -ne 0 ]; then
    echo "$failures check(s) failed"
    exit 1
fi
echo "all refusal checks passed"

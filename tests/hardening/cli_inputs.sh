#!/usr/bin/env bash
# cli_inputs.sh MOEPERM - what the command line reads and the values it is
# given, as a hostile user hands them over.
#
#   - every place a file is read (make-case's inputs, .npy and raw;
#     compare's output; the files below check --outputs; a case's tensor
#     files through run, compare and check) refuses a directory, a FIFO
#     and a file the user cannot read, exit 2, with a sentence naming the
#     path and the reason, and never hangs;
#   - check --outputs calls an output MISSING only when it is absent (exit
#     1); one it cannot look for (a directory it may not search, a link
#     loop, a file where a directory should be, a link to nothing) is
#     named with the reason, exit 2;
#   - make-case reads a file as it is or refuses it: a SHAPE or DTYPE that
#     the .npy header contradicts, an option the operator does not take, a
#     shape like "8x"; a file name holding ':' is read whole when such a
#     file exists, and :DTYPE:SHAPE is taken from the right;
#   - the writers (make-case, golden) write nothing their reader refuses:
#     a --name or --description that is not UTF-8, a dimension beyond 2^40
#     on an empty .npy; every case they do write passes `check`;
#   - a case is never written inside another, and `check` over a case put
#     inside another by hand fails naming both;
#   - --shard takes two decimal numbers 1 <= I <= N <= 65536 and nothing
#     else; --ub-bytes and --vector-cores beyond the operator's bounds exit
#     2 for golden as for make-case;
#   - .npy headers numpy itself refuses or writes for dtypes moeperm does
#     not read ((04, 8), '<U1') get the sentence that says so.
# Checks that need a user other than root run as nobody (cli_lib.sh).
# The counts of each kind are printed at the end (docs/reliability.md).
set -u
moeperm=$1
work=$(mktemp -d "${TMPDIR:-/tmp}/moeperm-inputs.XXXXXX")
trap 'chmod -R u+rwx "$work" 2>/dev/null; rm -rf "$work"' EXIT
failures=0 checks=0
# fail, and as_user and can_drop for the checks as a user other than root
# (cli_lib.sh); this script's own expect and says below.
. "$(dirname "$0")/cli_lib.sh"
# expect STATUS WHAT COMMAND...: COMMAND, stdout to $work/out and stderr to
# $work/err, within 20 s (a FIFO must never hang it; the tool, not a shell
# function of this script), exits STATUS.
expect() {
    local want=$1 what=$2 rc
    shift 2
    checks=$((checks + 1))
    if [ "$(type -t "$1")" = function ]; then
        "$@" >"$work/out" 2>"$work/err" </dev/null
    else
        timeout 20 "$@" >"$work/out" 2>"$work/err" </dev/null
    fi
    rc=$?
    [ "$rc" -eq "$want" ] ||
        fail "$what: status $rc, expected $want (stderr: $(cat "$work/err"); stdout: $(head -c 300 "$work/out"))"
}
# says WHAT TEXT: stderr or stdout of the last command holds TEXT.
says() {
    grep -qF -- "$2" "$work/err" "$work/out" ||
        fail "$1: does not say '$2': $(cat "$work/err") $(head -c 300 "$work/out")"
}
drop_setup
# nobody must reach everything below $work
chmod 755 "$work"

# npy FILE DESCR SHAPE [DATA]: a .npy file (format 1.0) with that header
# dict, and DATA's bytes (a file) after it.
npy() {
    local dict="{'descr': '$2', 'fortran_order': False, 'shape': $3, }"
    local total=$(((10 + ${#dict} + 1 + 63) / 64 * 64))
    local len=$((total - 10))
    {
        printf '\223NUMPY\001\000'
        printf "\\$(printf %03o $((len & 255)))\\$(printf %03o $((len >> 8)))"
        printf '%s%*s\n' "$dict" $((total - 11 - ${#dict})) ''
        [ -n "${4:-}" ] && cat "$4"
    } >"$1"
}

"$moeperm" golden --out "$work/src" --tokens 8 --topk 1 --hidden 4 --dtype float32 \
    --name pg >/dev/null || { echo "FAIL: cannot generate the source case"; exit 1; }
src=$work/src/pg
si=$src/sorted_indices.bin:int32:8
npy "$work/g.npy" '<f4' '(8, 4)' "$src/permuted_output_grad.bin"
"$moeperm" run "$src" --out "$work/r.bin" || fail "run the source case"
# make_case NAME INPUT [OPTIONS]: a MoeTokenPermuteGrad case from INPUT as
# its permuted_output_grad, into $work/mc/NAME.
make_case() {
    local name=$1 input=$2
    shift 2
    "$moeperm" make-case --out "$work/mc" --op permute-grad --name "$name" --top-k 1 \
        --input "permuted_output_grad=$input" --input "sorted_indices=$si" "$@"
}

# --- every place a file is read: a directory, a FIFO, an unreadable file ---
kinds=0
mkdir -p "$work/k"
# kind_of DIR NAME KIND: makes DIR/NAME a directory, a FIFO, or a copy of
# the good file that only root can read; prints what the sentence says.
kind_of() {
    rm -rf "${1:?}/$2"
    case $3 in
        directory) mkdir "$1/$2" && echo "is not a regular file: it is a directory" ;;
        fifo) mkfifo "$1/$2" && echo "is not a regular file: it is a FIFO" ;;
        unreadable) cp "$4" "$1/$2" && chmod 600 "$1/$2" && echo "Permission denied" ;;
    esac
}
for kind in directory fifo unreadable; do
    user=
    if [ "$kind" = unreadable ]; then
        [ "$can_drop" -eq 1 ] && [ "$(id -u)" -eq 0 ] || continue
        user=as_user
    fi
    # make-case's input, as .npy and as a raw file: FILE, the good file it
    # stands for, what the --input adds
    for input in "x.npy $work/g.npy" "x.bin $src/permuted_output_grad.bin :float32:8x4"; do
        set -- $input
        why=$(kind_of "$work/k" "$1" "$kind" "$2")
        expect 2 "make-case, an input $1 that is a $kind" $user "$moeperm" make-case \
            --out "$work/k/mc" --op permute-grad --name n --top-k 1 \
            --input "permuted_output_grad=$work/k/$1${3:-}" --input "sorted_indices=$si"
        says "make-case, an input $1 that is a $kind" "$work/k/$1"
        says "make-case, an input $1 that is a $kind" "$why"
    done
    [ -e "$work/k/mc" ] && fail "make-case, an input that is a $kind: something was written"
    # compare's output, a file below check --outputs
    why=$(kind_of "$work/k" out.bin "$kind" "$work/r.bin")
    if [ "$kind" = directory ]; then
        # a directory is the directory form, whatever the number of
        # outputs: an empty one holds no output (missing, exit 1)
        expect 1 "compare, an output that is a $kind" "$moeperm" compare "$src" "$work/k/out.bin"
        says "compare, an output that is a $kind" "no output file $work/k/out.bin/input_grad.bin"
    else
        expect 2 "compare, an output that is a $kind" $user "$moeperm" compare "$src" \
            "$work/k/out.bin"
        says "compare, an output that is a $kind" "$work/k/out.bin"
        says "compare, an output that is a $kind" "$why"
    fi
    mkdir -p "$work/k/outs/pg"
    why=$(kind_of "$work/k/outs/pg" input_grad.bin "$kind" "$work/r.bin")
    expect 2 "check --outputs, a file that is a $kind" $user "$moeperm" check "$work/src" \
        --outputs "$work/k/outs"
    says "check --outputs, a file that is a $kind" "BAD-INPUT"
    says "check --outputs, a file that is a $kind" "$work/k/outs/pg/input_grad.bin"
    says "check --outputs, a file that is a $kind" "$why"
    # a case's tensor file, through each command that reads it
    rm -rf "$work/k/case" && cp -r "$src" "$work/k/case" && chmod 755 "$work/k/case"
    why=$(kind_of "$work/k/case" sorted_indices.bin "$kind" "$src/sorted_indices.bin")
    mkdir -p "$work/k/w" && chmod 777 "$work/k/w"
    for cmd in run compare check; do
        case $cmd in
            run) set -- run "$work/k/case" --out "$work/k/w/r.bin" ;;
            compare) set -- compare "$work/k/case" "$work/r.bin" ;;
            check) set -- check "$work/k/case" ;;
        esac
        expect 2 "$cmd, a tensor that is a $kind" $user "$moeperm" "$@"
        says "$cmd, a tensor that is a $kind" "$work/k/case/sorted_indices.bin"
        says "$cmd, a tensor that is a $kind" "$why"
    done
    [ -e "$work/k/w/r.bin" ] && fail "run, a tensor that is a $kind: an output was written"
    kinds=$((kinds + 7))
done

# --- check --outputs: MISSING is absent, and only that ---------------------
"$moeperm" golden --out "$work/cases" --tokens 8 --topk 2 --hidden 16 --dtype bf16 \
    --name c1 >/dev/null || fail "cannot generate c1"
missing_checks=0
# outputs_at WHAT STATUS SAYS [as_user]: check --outputs $work/o, exit
# STATUS, saying SAYS and never MISSING unless STATUS is 1.
outputs_at() {
    expect "$2" "check --outputs, $1" ${4:-} "$moeperm" check "$work/cases" --outputs "$work/o"
    says "check --outputs, $1" "$3"
    [ "$2" -ne 1 ] && grep -q MISSING "$work/out" && fail "check --outputs, $1: called MISSING"
    missing_checks=$((missing_checks + 1))
}
rm -rf "$work/o" && mkdir -p "$work/o"
outputs_at "no file" 1 "MISSING"
rm -rf "$work/o" && mkdir -p "$work/o" && echo "not a directory" >"$work/o/c1"
outputs_at "a file where a directory should be" 2 "Not a directory"
rm -rf "$work/o" && mkdir -p "$work/o" && ln -s l2 "$work/o/l1" && ln -s l1 "$work/o/l2" &&
    ln -s l1 "$work/o/c1"
outputs_at "a link loop" 2 "Too many levels of symbolic links"
rm -rf "$work/o" && mkdir -p "$work/o/c1" && ln -s nowhere.bin "$work/o/c1/input_grad.bin"
outputs_at "a link to nothing" 2 "a symbolic link to nowhere.bin, which does not exist"
if [ "$can_drop" -eq 1 ] && [ "$(id -u)" -eq 0 ]; then
    chmod -R a+rX "$work/cases"
    rm -rf "$work/o" && mkdir -p "$work/o/c1" && chmod 700 "$work/o/c1"
    outputs_at "a directory it may not search" 2 "Permission denied" as_user
    chmod 744 "$work/o/c1"
    outputs_at "a directory it may list, not search" 2 "Permission denied" as_user
fi

# --- make-case reads a file as it is, or refuses it -----------------------
contradictions=0
for spec in "$work/g.npy:bf16:4x16|has shape (8, 4), but the shape given for it is (4, 16)" \
    "$work/g.npy:float32:4x8|(4, 8)" "$work/g.npy:float32:32|(32,)" \
    "$work/g.npy:float32:8x4x1|(8, 4, 1)" "$work/g.npy:int32|holds '<f4' data, expected int32" \
    "$work/g.npy:bf16|holds '<f4' data, expected bf16" \
    "$src/permuted_output_grad.bin:float32:8x|shape \"8x\" is not like 64x7168" \
    "$src/permuted_output_grad.bin:float32:x8|shape \"x8\"" \
    "$src/permuted_output_grad.bin:float32:8xx4|shape \"8xx4\"" \
    "$src/permuted_output_grad.bin:float32:8,|shape \"8,\"" \
    "$src/permuted_output_grad.bin:floatt:8x4|dtype \"floatt\" is not one of" \
    "$src/permuted_output_grad.bin:floatt|no file is named"; do
    input=${spec%%|*} want=${spec#*|}
    expect 2 "make-case --input $input" make_case n "$input"
    says "make-case --input $input" "$want"
    contradictions=$((contradictions + 1))
done
[ -e "$work/mc" ] && fail "make-case: a refused input wrote something"
# an option the operator does not take
for spec in "permute-grad:--num-out-tokens 3" "permute-grad:--restore-shape 8,4" \
    "permute-grad:--ub-bytes 65536" "permute-grad:--vector-cores 8" "permute:--top-k 2" \
    "permute:--restore-shape 8,4" "unpermute:--top-k 1" "unpermute:--ub-bytes 65536" \
    "unpermute:--num-out-tokens 2" "unpermute-grad:--top-k 1"; do
    op=${spec%%:*} option=${spec#*:}
    # shellcheck disable=SC2086
    expect 2 "make-case --op $op $option" "$moeperm" make-case --out "$work/mc" --op "$op" \
        --name n $option --input "nothing=$work/g.npy"
    says "make-case --op $op $option" "${option%% *} is not an option of"
    contradictions=$((contradictions + 1))
done
# file names holding ':': whole when such a file exists, else from the right
cp "$work/g.npy" "$work/a:b.npy"
cp "$src/permuted_output_grad.bin" "$work/c:d.bin"
for input in "$work/a:b.npy" "$work/a:b.npy:float32" "$work/a:b.npy:float32:8x4" \
    "$work/c:d.bin:float32:8x4"; do
    expect 0 "make-case --input $input" make_case colon "$input" --force
    expect 0 "check the case made from $input" "$moeperm" check "$work/mc/colon"
    expect 0 "compare the case made from $input" "$moeperm" compare "$work/mc/colon" "$work/r.bin"
    contradictions=$((contradictions + 1))
done

# --- writers write only what their reader reads -----------------------------
writers=0
rm -rf "$work/mc"
for name in $'n\xff' $'caf\xe9' $'half \xed\xa0\x80' $'over \xc0\xaf' $'cut \xe2\x82'; do
    expect 2 "make-case --name that is not UTF-8" make_case "$name" "$work/g.npy"
    says "make-case --name that is not UTF-8" "is not UTF-8 text"
    expect 2 "make-case --description that is not UTF-8" make_case n "$work/g.npy" --description "$name"
    says "make-case --description that is not UTF-8" "is not UTF-8 text"
    expect 2 "golden --name that is not UTF-8" "$moeperm" golden --out "$work/g8" --tokens 4 \
        --topk 2 --hidden 8 --dtype bf16 --name "$name"
    says "golden --name that is not UTF-8" "is not UTF-8 text"
    writers=$((writers + 3))
done
[ -e "$work/mc" ] || [ -e "$work/g8" ] && fail "a writer wrote a case whose text is not UTF-8"
# an empty array numpy saves with a dimension beyond 2^40
npy "$work/wide.npy" '<f4' '(0, 2199023255552)'
npy "$work/none.npy" '<i4' '(0,)'
expect 2 "make-case, an empty input of a dimension beyond 2^40" "$moeperm" make-case \
    --out "$work/mc" --op permute-grad --name wide --top-k 1 \
    --input "permuted_output_grad=$work/wide.npy" --input "sorted_indices=$work/none.npy"
says "make-case, an empty input of a dimension beyond 2^40" "2199023255552"
[ -e "$work/mc" ] && fail "make-case wrote a case with a dimension beyond 2^40"
writers=$((writers + 1))
# every case the writers do write reads back: make-case of each operator,
# golden's custom case of each, names of 2-, 3- and 4-byte UTF-8
for op in permute-grad permute unpermute unpermute-grad; do
    "$moeperm" golden --out "$work/rt" --op "$op" --tokens 6 --topk 2 --hidden 16 --dtype bf16 \
        --name "g-$op-"$'\xc3\xa9\xe2\x82\xac\xf0\x9f\x98\x80' >/dev/null ||
        fail "golden --op $op with a UTF-8 name"
    case $op in
        permute-grad) set -- --top-k 2 ;;
        permute) set -- --num-out-tokens 0 ;;
        unpermute) set -- --restore-shape 6,16 ;;
        unpermute-grad) set -- --ub-bytes 65536 --vector-cores 8 ;;
    esac
    from=$work/rt/g-$op-$'\xc3\xa9\xe2\x82\xac\xf0\x9f\x98\x80'
    inputs=()
    for f in "$from"/*.bin; do
        name=$(basename "$f" .bin)
        dtype=$(grep -o "\"$name\": {\"role\": \"input\", \"file\": \"$name.bin\", \"dtype\": \"[a-z0-9]*\", \"shape\": \[[0-9, ]*\]" "$from/case.json") || continue
        shape=$(echo "$dtype" | sed 's/.*"shape": \[\(.*\)\]/\1/; s/, /x/g')
        dtype=$(echo "$dtype" | sed 's/.*"dtype": "\([a-z0-9]*\)".*/\1/')
        inputs+=(--input "$name=$f:$dtype:$shape")
    done
    expect 0 "make-case --op $op" "$moeperm" make-case --out "$work/rt" --op "$op" \
        --name "m-$op-"$'\xc3\xa9' --description $'made from \xe2\x82\xac' "$@" "${inputs[@]}"
    writers=$((writers + 2))
done
expect 0 "check every case the writers wrote" "$moeperm" check "$work/rt"
[ "$(grep -c '^pass' "$work/out")" -eq 8 ] || fail "check: not 8 cases passed: $(cat "$work/out")"

# --- no case inside a case ---------------------------------------------------
nested=0
"$moeperm" golden --out "$work/n" --tokens 4 --topk 2 --hidden 8 --dtype bf16 --name outer \
    >/dev/null || fail "cannot generate the outer case"
for out in "$work/n/outer" "$work/n/outer/deeper" "$work/n/outer/../outer/x"; do
    expect 2 "golden --out $out" "$moeperm" golden --out "$out" --tokens 4 --topk 2 --hidden 8 \
        --dtype bf16 --name inner
    says "golden --out $out" "would be a case inside the case $work/n/outer"
    expect 2 "make-case --out $out" make_case inner "$work/g.npy" --out "$out"
    says "make-case --out $out" "would be a case inside the case"
    nested=$((nested + 2))
done
[ "$(ls "$work/n/outer" | wc -l)" -eq 4 ] || fail "a refused writer left something in the outer case"
"$moeperm" golden --out "$work/elsewhere" --tokens 4 --topk 2 --hidden 8 --dtype bf16 --seed 3 \
    --name inner >/dev/null || fail "cannot generate the inner case"
printf '\377' | dd of="$work/elsewhere/inner/input_grad.bin" bs=1 seek=1 conv=notrunc 2>/dev/null
mv "$work/elsewhere/inner" "$work/n/outer/inner"
expect 2 "check over a case inside a case" "$moeperm" check "$work/n"
says "check over a case inside a case" "$work/n/outer/inner holds a case inside the case $work/n/outer"
grep -q "^pass" "$work/out" && fail "check over a case inside a case judged the outer case alone"
nested=$((nested + 1))

# --- values: --shard, the chip ------------------------------------------------
values=0
for shard in "1/ -2" "1/-2" "-1/2" "1/99999999999999999999" "1/65537" "0/2" "3/2" " 1/2" "1/2 " \
    "+1/2" "1/+2" "1/2/3" "1/" "/2" "1" "" "1/0x2" "1/2e0" "1/２"; do
    expect 2 "check --shard '$shard'" "$moeperm" check "$work/cases" --shard "$shard"
    says "check --shard '$shard'" "expected I/N, two decimal numbers with 1 <= I <= N <= 65536"
    values=$((values + 1))
done
for shard in 1/1 1/65536 65536/65536 01/2; do
    expect 0 "check --shard $shard" "$moeperm" check "$work/cases" --shard "$shard"
done
for cmd in golden make-case; do
    for spec in "--ub-bytes:1" "--ub-bytes:32767" "--ub-bytes:16777217" "--vector-cores:0" \
        "--vector-cores:4097" "--vector-cores:5000"; do
        if [ "$cmd" = golden ]; then
            expect 2 "golden ${spec%%:*} ${spec#*:}" "$moeperm" golden --out "$work/chip" \
                --op unpermute-grad --tokens 4 --topk 2 --hidden 8 --dtype bf16 \
                "${spec%%:*}" "${spec#*:}"
        else
            expect 2 "make-case ${spec%%:*} ${spec#*:}" "$moeperm" make-case --out "$work/chip" \
                --op unpermute-grad --name n "${spec%%:*}" "${spec#*:}" --input "x=$work/g.npy"
        fi
        says "$cmd ${spec%%:*} ${spec#*:}" "is \"${spec#*:}\", expected an integer from"
        values=$((values + 1))
    done
done
[ -e "$work/chip" ] && fail "a refused chip wrote a case"

# --- .npy headers numpy refuses or cannot be moeperm tensors ----------------
head -c 32 /dev/zero >"$work/zeros32"
npy "$work/zero-lead.npy" '<f4' '(04, 2)' "$work/zeros32"
expect 2 "make-case, a .npy shape (04, 2)" make_case n "$work/zero-lead.npy"
says "make-case, a .npy shape (04, 2)" "leading zero"
head -c 8 /dev/zero >"$work/zeros8"
npy "$work/text.npy" '<U1' '(2,)' "$work/zeros8"
expect 2 "make-case, a '<U1' .npy" make_case n "$work/text.npy"
says "make-case, a '<U1' .npy" "holds '<U1' data, which moeperm does not read"
values=$((values + 2))

echo "file kinds refused where a file is read: $kinds; outputs that cannot be looked for: $missing_checks;" \
    "make-case inputs and options: $contradictions; writer refusals and round trips: $writers;" \
    "nested cases: $nested; values: $values; checks in all: $checks"
if [ "$failures" -ne 0 ]; then
    echo "$failures check(s) failed"
    exit 1
fi
echo "all input checks passed"

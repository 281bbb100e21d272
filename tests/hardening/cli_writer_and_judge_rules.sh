#!/usr/bin/env bash
# cli_writer_and_judge_rules.sh MOEPERM - refusals of golden, check and
# compare that come before any work, each with one sentence:
#   - golden, with or without --force, checks every case it would write
#     (and README.md) before it writes any: a target --force may not
#     replace leaves the corpus untouched;
#   - golden --force replaces a README.md only when moeperm wrote it (its
#     first line), never the user's own file or a symbolic link;
#   - an outputs directory holding both <output>.bin and <output>.npy is
#     refused by check, compare and run --out DIR/, naming both;
#   - compare calls absent what check calls absent (exit 1) and a link to
#     nothing or a path that cannot be looked for bad input (exit 2);
#   - compare reads the directory form whenever PATH is a directory (what
#     run --out DIR/ writes for a case of one output);
#   - compare --json writes its document when the case itself is bad;
#   - the case's own golden outputs, however spelled, are refused as the
#     outputs to judge (they would always pass);
#   - no output (a report, run --out) is named case.json: it would make
#     its directory a case and break the corpus for the next check;
#   - golden refuses an attribute option of another operator than --op's;
#   - a case's name and description are one line: no control characters
#     but the tab.
set -u
moeperm=$1
work=$(mktemp -d "${TMPDIR:-/tmp}/moeperm-rules.XXXXXX")
trap 'rm -rf "$work"' EXIT
failures=0
# fail, expect and says (cli_lib.sh).
. "$(dirname "$0")/cli_lib.sh"
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

# --- outputs: .bin and .npy, absent, directories, the golden files ------------
o=$work/o
"$moeperm" golden --out "$o" --tokens 4 --top-k 2 --hidden 8 --dtype bf16 --name w >/dev/null ||
    fail "cannot generate the case w"
w=$o/w
expect 0 "run --out DIR/ for a case of one output" "$moeperm" run "$w" --out "$work/sd/"
expect 0 "compare CASE DIR/ (what run --out DIR/ wrote)" "$moeperm" compare "$w" "$work/sd/"
expect 0 "compare CASE DIR (a directory without the slash)" "$moeperm" compare "$w" "$work/sd"
cp "$work/sd/input_grad.bin" "$work/sd/input_grad.npy"
for cmd in "compare $w $work/sd" "check $w --outputs $work/sd" "run $w --out $work/sd/"; do
    # shellcheck disable=SC2086
    expect 2 "$cmd with both .bin and .npy" "$moeperm" $cmd
    says "$cmd, both" "both $work/sd/input_grad.bin and $work/sd/input_grad.npy exist"
done
rm "$work/sd/input_grad.npy"
mkdir -p "$work/f"
ln -s "$work/nowhere" "$work/f/dangling.bin"
expect 2 "compare, a link to nothing" "$moeperm" compare "$w" "$work/f/dangling.bin"
says "compare, a link to nothing" "is a symbolic link to $work/nowhere, which does not exist"
expect 1 "compare, an absent file" "$moeperm" compare "$w" "$work/f/absent.bin"
says "compare, an absent file" "no output file $work/f/absent.bin"
echo x >"$work/f/plain"
expect 2 "compare, a path below a file" "$moeperm" compare "$w" "$work/f/plain/x.bin"
says "compare, a path below a file" "cannot look for the output $work/f/plain/x.bin"
expect 2 "compare --json on a bad case" "$moeperm" compare "$work/no-case" "$work/sd" \
    --json "$work/bad.json"
grep -q '"error_kind": "bad-input"' "$work/bad.json" 2>/dev/null ||
    fail "compare --json wrote no bad-input document for a bad case"
ln -s "$w/input_grad.bin" "$work/f/golden-link.bin"
for args in "compare $w $w/input_grad.bin" "compare $w $work/f/golden-link.bin" \
    "compare $w $w" "check $w --outputs $w"; do
    # shellcheck disable=SC2086
    expect 2 "$args (the golden output itself)" "$moeperm" $args
    says "$args" "is the case's own golden file"
done

# --- reports named case.json or inside a case -----------------------------------
for args in "check $g --json $g/tokens/case.json" "check $g --junit $work/case.json" \
    "compare $w $work/sd --html $work/f/case.json" "run $w --out $work/f/case.json"; do
    # shellcheck disable=SC2086
    expect 2 "$args" "$moeperm" $args
    says "$args" "is named case.json"
done
[ -e "$g/tokens/case.json" ] && fail "check --json wrote a case.json into the judged tree"
expect 0 "check of the tree after the refusals" "$moeperm" check "$g"

# --- golden: options of another operator ----------------------------------------
for opt in "--num-out-tokens 3" "--index-dtype int64" "--sentinels" "--probs-dtype bf16" \
    "--no-probs" "--probs-values normal" "--ub-bytes 196352" "--vector-cores 4"; do
    # shellcheck disable=SC2086
    expect 2 "golden (MoeTokenPermuteGrad) $opt" "$moeperm" golden --out "$work/g8" \
        --tokens 4 --top-k 2 --hidden 8 --dtype bf16 $opt
    says "golden $opt" "${opt%% *} is not an option of MoeTokenPermuteGrad"
done
expect 2 "golden --op permute --no-probs" "$moeperm" golden --out "$work/g8" --op permute \
    --tokens 4 --top-k 2 --hidden 8 --dtype bf16 --no-probs
says "golden --op permute --no-probs" "--no-probs is not an option of MoeTokenPermute"
[ -e "$work/g8" ] && fail "golden wrote a case with another operator's option"

# --- a name and a description of one line -------------------------------------
printf '\000\000\200\077\000\000\000\100' >"$work/pg.bin"   # float32 [1, 2]: 1.0, 2.0
printf '\000\000\000\000' >"$work/si.bin"                  # int32 [1]: 0
for field in "--name" "--description"; do
    for ch in '\n' '\r' '\033' '\177'; do
        value=$(printf "a${ch}b")
        name=plain
        [ "$field" = "--name" ] && name=$value
        args=(--name "$name")
        [ "$field" = "--description" ] && args+=(--description "$value")
        expect 2 "make-case $field with $ch" "$moeperm" make-case --out "$work/mc" \
            --op permute-grad "${args[@]}" --top-k 1 \
            --input "permuted_output_grad=$work/pg.bin:float32:1x2" \
            --input "sorted_indices=$work/si.bin:int32:1"
        says "make-case $field with $ch" "holds the control character"
    done
done
[ -n "$(ls -A "$work/mc" 2>/dev/null)" ] && fail "make-case wrote a case with a control character"
expect 0 "make-case with a one-line description" "$moeperm" make-case --out "$work/mc" \
    --op permute-grad --name plain --description "one line" --top-k 1 \
    --input "permuted_output_grad=$work/pg.bin:float32:1x2" \
    --input "sorted_indices=$work/si.bin:int32:1"

[ "$failures" -eq 0 ] || { echo "$failures failure(s)"; exit 1; }
echo "all checks passed"

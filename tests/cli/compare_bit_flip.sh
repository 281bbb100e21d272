#!/bin/sh
# One flipped bit in a run's output is found, and located by token and
# column: `moeperm compare` exits 1 and its report names the element.  The
# position is computed here from the byte offset (element = token*H + col),
# independently of the comparator.
# usage: compare_bit_flip.sh MOEPERM CASE_DIR (a bf16 MoeTokenPermuteGrad case of
# either format with T >= 4, H >= 12)
set -eu
moeperm=$1
case_dir=$2
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT INT TERM

# H: format 1 names it; format 2 gives input_grad's shape [T, H].
hidden=$(sed -n -e 's/^  "hidden_size": \([0-9]*\),$/\1/p' \
    -e 's/^ *"input_grad": {.*"shape": \[[0-9]*, \([0-9]*\)\].*/\1/p' "$case_dir/case.json" |
    head -n 1)
if [ -z "$hidden" ]; then
    echo "FAIL: no hidden_size in $case_dir/case.json" >&2
    exit 1
fi
token=3
column=11
element=$((token * hidden + column))
offset=$((element * 2)) # bf16: 2 bytes, little-endian: the low byte first

"$moeperm" run "$case_dir" --out "$tmp/out.bin"
"$moeperm" compare "$case_dir" "$tmp/out.bin" >/dev/null

# Flip bit 0 of the element's low byte.
byte=$(od -An -tu1 -j "$offset" -N1 "$tmp/out.bin" | tr -d ' ')
flipped=$((byte ^ 1))
printf "$(printf '\\%03o' "$flipped")" |
    dd of="$tmp/out.bin" bs=1 seek="$offset" conv=notrunc 2>/dev/null

rc=0
"$moeperm" compare "$case_dir" "$tmp/out.bin" >"$tmp/report" || rc=$?
cat "$tmp/report"
if [ "$rc" -ne 1 ]; then
    echo "FAIL: compare exited $rc after a bit flip, expected 1" >&2
    exit 1
fi
for fragment in "1 of" "max distance 1 ulp" "token $token, column $column:" \
    "where: token $token: column $column"; do
    if ! grep -qF "$fragment" "$tmp/report"; then
        echo "FAIL: the report lacks \"$fragment\"" >&2
        exit 1
    fi
done
# A file of the wrong size is bad input (exit 2), not a mismatch.
head -c 10 "$tmp/out.bin" >"$tmp/short.bin"
rc=0
"$moeperm" compare "$case_dir" "$tmp/short.bin" 2>/dev/null || rc=$?
if [ "$rc" -ne 2 ]; then
    echo "FAIL: a short file gave exit $rc, expected 2" >&2
    exit 1
fi
echo "ok: the flipped bit was located at token $token, column $column"

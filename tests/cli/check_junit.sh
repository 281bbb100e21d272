#!/bin/sh
# `moeperm check` over a directory: exit 0 when every case passes, 1 when
# one output is corrupted (the golden side of a copied case), 2 for a
# malformed case; the JUnit report is well-formed XML with one testcase per
# case and the mismatch summary as failure text.
# usage: check_junit.sh MOEPERM GOLDEN_DIR
set -eu
moeperm=$1
golden=$2
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT INT TERM

cp -r "$golden/dropped" "$golden/rounding" "$tmp/"
chmod -R u+w "$tmp"
"$moeperm" check "$tmp/dropped" "$tmp/rounding" --junit "$tmp/pass.xml" >"$tmp/out"
grep -q "^total" "$tmp/out"
cases=$(find "$tmp/dropped" "$tmp/rounding" -name case.json | wc -l)
testcases=$(grep -c "<testcase " "$tmp/pass.xml")
if [ "$testcases" -ne "$cases" ] || grep -q "<failure" "$tmp/pass.xml"; then
    echo "FAIL: $testcases testcases for $cases cases, or a failure in a passing run" >&2
    exit 1
fi

# Corrupt one golden output (and its sha256, so the case still reads): the
# case must now fail as a mismatch.
victim="$tmp/rounding/bf16-rounding-t16-k4-h22"
printf '\000\177' | dd of="$victim/input_grad.bin" bs=1 seek=0 conv=notrunc 2>/dev/null
sum=$(sha256sum "$victim/input_grad.bin" | cut -d' ' -f1)
sed -i "/\"input_grad\": {/s/\"sha256\": \"[0-9a-f]*\"/\"sha256\": \"$sum\"/" "$victim/case.json"
rc=0
"$moeperm" check "$tmp" --junit "$tmp/fail.xml" >"$tmp/out" || rc=$?
if [ "$rc" -ne 1 ]; then
    echo "FAIL: check exited $rc with one corrupted case, expected 1" >&2
    cat "$tmp/out" >&2
    exit 1
fi
grep -q "^MISMATCH $victim: 1 of 352 elements differ" "$tmp/out"
[ "$(grep -c "<failure " "$tmp/fail.xml")" -eq 1 ]
grep -q "token 0, column 0" "$tmp/fail.xml"

# A malformed case makes it a bad-input run (exit 2), reported as <error>.
echo '{' >"$tmp/dropped/bf16-rows0/case.json"
rc=0
"$moeperm" check "$tmp" --junit "$tmp/bad.xml" >"$tmp/out" || rc=$?
if [ "$rc" -ne 2 ]; then
    echo "FAIL: check exited $rc with a malformed case, expected 2" >&2
    exit 1
fi
[ "$(grep -c "<error " "$tmp/bad.xml")" -eq 1 ]

# Well-formed XML, if a parser is at hand.
for py in /usr/bin/python3 python3; do
    if "$py" -c 'import xml.dom.minidom' 2>/dev/null; then
        for x in pass fail bad; do
            "$py" -c 'import sys, xml.dom.minidom; xml.dom.minidom.parse(sys.argv[1])' "$tmp/$x.xml"
        done
        break
    fi
done
# No DIR with cases is bad usage.
rc=0
"$moeperm" check "$tmp/nonexistent" 2>/dev/null || rc=$?
[ "$rc" -eq 2 ]
echo "ok: check exit codes 0/1/2 and JUnit reports"

#!/bin/sh
# The project's Ascend backend (src/npu, which loads a runtime with dlopen)
# runs over libmoeperm-aclnn as over a device's runtime: `moeperm check
# --backend npu` passes the committed corpus, every case judged but those
# made for another chip than the one the library presents, which are
# reported OTHER-CHIP and not run, and which the JSON report gives the
# verdict "other-chip" and the JUnit report marks <skipped>.  With the
# library presenting the Ascend910B3, a case made for that chip is judged
# and passes.
#   npu_backend.sh MOEPERM LIBMOEPERM_ACLNN CORPUS
set -eu
moeperm=$1 lib=$2 corpus=$3
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT INT TERM
unset MOEPERM_ACLNN_CHIP MOEPERM_NPU_DEVICE
rc=0
MOEPERM_ASCEND_LIBS=$lib "$moeperm" check "$corpus" --backend npu --json "$tmp/report.json" \
    --junit "$tmp/report.xml" >"$tmp/out" 2>&1 || rc=$?
if [ "$rc" -ne 0 ]; then
    grep -v '^pass ' "$tmp/out" | head -60 >&2
    echo "FAIL: moeperm check --backend npu over libmoeperm-aclnn exits $rc" >&2
    exit 1
fi
# total: cases pass within mismatch missing bad-input backend-failure other-chip
set -- $(awk '$1 == "total" {print $2, $3, $9}' "$tmp/out")
cases=$1 passed=$2 other=$3
if [ "$cases" -eq 0 ] || [ $((passed + other)) -ne "$cases" ]; then
    tail -5 "$tmp/out" >&2
    echo "FAIL: of $cases cases $passed pass and $other are for another chip" >&2
    exit 1
fi
grep '^OTHER-CHIP' "$tmp/out" | grep -v 'for another chip' >&2 && exit 1
# The reports hold the cases of another chip as such, as many as the text.
json_other=$(grep -c '"verdict": "other-chip"' "$tmp/report.json" || true)
json_devices=$(grep -c '"name": "Ascend910B2"' "$tmp/report.json" || true)
junit_other=$(grep -c '<skipped message="for another chip' "$tmp/report.xml" || true)
if [ "$other" -eq 0 ] || [ "$json_other" -ne "$other" ] || [ "$json_devices" -ne "$other" ] ||
    [ "$junit_other" -ne "$other" ] || ! grep -q "\"other_chip\": $other" "$tmp/report.json" ||
    ! grep -q "skipped=\"$other\"" "$tmp/report.xml"; then
    echo "FAIL: $other cases for another chip, $json_other in the JSON report (naming the" \
         "Ascend910B2 $json_devices times), $junit_other skipped in the JUnit report" >&2
    exit 1
fi
# A named chip's case passes on that chip.
named=$(grep -l '"chip": "Ascend910B3"' "$corpus"/*/*/case.json | head -1)
if [ -n "$named" ]; then
    rc=0
    MOEPERM_ACLNN_CHIP=Ascend910B3 MOEPERM_ASCEND_LIBS=$lib "$moeperm" check \
        "$(dirname "$named")" --backend npu >"$tmp/b3" 2>&1 || rc=$?
    if [ "$rc" -ne 0 ] || ! grep -q '^pass ' "$tmp/b3"; then
        cat "$tmp/b3" >&2
        echo "FAIL: the case for the Ascend910B3 does not pass on the Ascend910B3" >&2
        exit 1
    fi
fi
note="${named:+; the Ascend910B3's case passes on it}"
echo "ok: $passed of $cases cases pass through libmoeperm-aclnn, $other are for another chip" \
     "(so in the JSON and JUnit reports)$note"

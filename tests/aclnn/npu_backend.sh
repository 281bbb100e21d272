#!/bin/sh
# The project's Ascend backend (src/npu, which loads a runtime with dlopen)
# runs over libmoeperm-aclnn as over a device's runtime: `moeperm check
# --backend npu` passes the committed corpus, every case judged but those
# made for another chip than the one the library presents, which are
# reported OTHER-CHIP and not run.
#   npu_backend.sh MOEPERM LIBMOEPERM_ACLNN CORPUS
set -eu
moeperm=$1 lib=$2 corpus=$3
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT INT TERM
unset MOEPERM_ACLNN_CHIP MOEPERM_NPU_DEVICE
rc=0
MOEPERM_ASCEND_LIBS=$lib "$moeperm" check "$corpus" --backend npu >"$tmp/out" 2>&1 || rc=$?
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
echo "ok: $passed of $cases cases pass through libmoeperm-aclnn, $other are for another chip"

#!/bin/sh
# `moeperm run` reproduces the input_grad of every independent vector
# (tests/vectors, computed with numpy/torch apart from this project) bit
# for bit; NaNs may differ in their bits (the vectors' README says so), so
# the judge is `moeperm compare` without --strict-nan, and a file without
# NaNs must also be byte-identical (cmp), which needs no comparator at all.
# usage: run_vectors.sh MOEPERM VECTORS_DIR
set -eu
moeperm=$1
vectors=$2
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT INT TERM
count=0
failures=0
for manifest in "$vectors"/*/case.json; do
    case_dir=$(dirname "$manifest")
    name=$(basename "$case_dir")
    if ! "$moeperm" run "$case_dir" --out "$tmp/$name.bin"; then
        echo "FAIL $name: run failed" >&2
        failures=$((failures + 1))
        continue
    fi
    if ! "$moeperm" compare "$case_dir" "$tmp/$name.bin"; then
        echo "FAIL $name: input_grad differs" >&2
        failures=$((failures + 1))
        continue
    fi
    # Vectors whose name does not promise special values hold no NaN.
    case $name in
    *special* | *all-bit-patterns*) ;;
    *)
        if ! cmp "$case_dir/input_grad.bin" "$tmp/$name.bin"; then
            echo "FAIL $name: not byte-identical" >&2
            failures=$((failures + 1))
        fi
        ;;
    esac
    count=$((count + 1))
done
if [ "$count" -lt 16 ] || [ "$failures" -ne 0 ]; then
    echo "FAIL: $failures failures, $count vectors reproduced (expected 16)" >&2
    exit 1
fi
echo "ok: $count vectors reproduced"

#!/bin/sh
# Files over 4 GiB: a float32 case whose permuted_output_grad is 4 GiB + 8
# bytes is written, read back (size and sha256 over the whole file), run
# and checked.  A 32-bit offset or a single short read()/write() anywhere
# would truncate or corrupt it.  Slow suite: needs about 10 GB of memory
# and 12 GB of disk in $TMPDIR.
# usage: large_file.sh MOEPERM
set -eu
moeperm=$1
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT INT TERM

hidden=536870913 # 2^29 + 1: 2 rows of float32 are 2^32 + 8 bytes
"$moeperm" golden --out "$tmp" --tokens 1 --top-k 2 --hidden $hidden --dtype float32 \
    --routing identity --name big >/dev/null
size=$(wc -c <"$tmp/big/permuted_output_grad.bin")
if [ "$size" -ne 4294967304 ]; then
    echo "FAIL: permuted_output_grad.bin is $size bytes, expected 4294967304" >&2
    exit 1
fi
sum=$(sha256sum "$tmp/big/permuted_output_grad.bin" | cut -d' ' -f1)
grep -q "$sum" "$tmp/big/case.json"
"$moeperm" check "$tmp/big"
"$moeperm" run "$tmp/big" --out "$tmp/out.bin"
cmp "$tmp/out.bin" "$tmp/big/input_grad.bin"
echo "ok: a 4 GiB + 8 byte tensor was written, hashed, read and run"

#!/usr/bin/env bash
# cli_determinism.sh MOEPERM - the same case gives the same bits whatever
# the thread count, kernel path or run (docs/arithmetic.md: "the result must not
# depend on the number of threads").
#
# Two cases of about 200 MB of input each (bf16 with every row, fp16 with
# dropped slots and a hidden size off the vector width) run with
# OMP_NUM_THREADS=1, 2 and 3, each twice, on the default (vectorised) path
# and the portable one; every output must be byte-identical to the first
# and pass `moeperm compare` against the golden input_grad.
set -u
moeperm=$1
work=$(mktemp -d "${TMPDIR:-/tmp}/moeperm-determinism.XXXXXX")
trap 'rm -rf "$work"' EXIT
failures=0
# fail (cli_lib.sh).
. "$(dirname "$0")/cli_lib.sh"

"$moeperm" golden --out "$work" --tokens 4096 --topk 8 --hidden 3072 --dtype bf16 \
    --seed 61 --name bf16-full >/dev/null || { echo "FAIL: generate bf16-full"; exit 1; }
"$moeperm" golden --out "$work" --tokens 3001 --topk 8 --hidden 4100 --dtype float16 \
    --rows 20000 --seed 62 --name fp16-dropped >/dev/null ||
    { echo "FAIL: generate fp16-dropped"; exit 1; }

for case in bf16-full fp16-dropped; do
    first=
    for portable in 0 1; do
        for threads in 1 2 3; do
            for repeat in 1 2; do
                out=$work/$case-p$portable-t$threads-r$repeat.bin
                MOEPERM_FORCE_PORTABLE=$portable OMP_NUM_THREADS=$threads \
                    "$moeperm" run "$work/$case" --out "$out" ||
                    { fail "$case portable=$portable threads=$threads: run failed"; continue; }
                if [ -z "$first" ]; then
                    first=$out
                    "$moeperm" compare "$work/$case" "$out" >/dev/null ||
                        fail "$case: the first run does not match the golden output"
                elif ! cmp -s "$first" "$out"; then
                    fail "$case portable=$portable threads=$threads repeat $repeat differs from $(basename "$first")"
                fi
                [ "$out" = "$first" ] || rm -f "$out"
            done
        done
    done
done

if [ "$failures" -ne 0 ]; then
    echo "$failures check(s) failed"
    exit 1
fi
echo "identical bits for 1, 2 and 3 threads, both kernel paths, repeated runs"

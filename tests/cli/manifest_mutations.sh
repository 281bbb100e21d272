#!/bin/sh
# A format-1 case whose manifest lies is refused: `moeperm run` exits 2
# with one sentence naming the field and the bad value, and writes no
# output file (format 2 has its own table: manifest_v2_mutations.sh).
# Each mutation is applied to a fresh copy of a good case, which must
# itself run (so a broken tool cannot pass by refusing everything).
# usage: manifest_mutations.sh MOEPERM GOOD_CASE_DIR
set -eu
moeperm=$1
good=$2
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT INT TERM
failures=0

fresh() {
    rm -rf "$tmp/case" "$tmp/out.bin"
    cp -r "$good" "$tmp/case"
    chmod -R u+w "$tmp/case"
}

# expect_refusal LABEL EXPECTED-MESSAGE-FRAGMENT
expect_refusal() {
    label=$1 fragment=$2
    rc=0
    "$moeperm" run "$tmp/case" --out "$tmp/out.bin" 2>"$tmp/stderr" >/dev/null || rc=$?
    if [ "$rc" -ne 2 ]; then
        echo "FAIL $label: exit $rc, expected 2" >&2
        failures=$((failures + 1))
    elif ! grep -qF -- "$fragment" "$tmp/stderr"; then
        echo "FAIL $label: message lacks \"$fragment\": $(cat "$tmp/stderr")" >&2
        failures=$((failures + 1))
    elif [ -e "$tmp/out.bin" ]; then
        echo "FAIL $label: an output file was written" >&2
        failures=$((failures + 1))
    elif ls -a "$tmp" | grep -q '^\.out\.bin'; then
        echo "FAIL $label: a temporary output file was left behind" >&2
        failures=$((failures + 1))
    else
        echo "ok   $label: $(cat "$tmp/stderr")"
    fi
}

# mutate SED-EXPRESSION: edit case.json in place
mutate() {
    sed -e "$1" "$tmp/case/case.json" >"$tmp/case.json.new"
    if cmp -s "$tmp/case/case.json" "$tmp/case.json.new"; then
        echo "FAIL: the mutation '$1' changed nothing" >&2
        exit 1
    fi
    mv "$tmp/case.json.new" "$tmp/case/case.json"
}

fresh
if ! "$moeperm" run "$tmp/case" --out "$tmp/out.bin"; then
    echo "FAIL: the unmutated case does not run" >&2
    exit 1
fi

fresh; mutate 's/"dtype": "bf16",$/"dtype": "float64",/'
expect_refusal "unknown dtype" 'dtype is "float64"'
fresh; mutate 's/"input_grad.bin", "dtype": "bf16"/"input_grad.bin", "dtype": "float16"/'
expect_refusal "tensor dtype differs" 'tensors.input_grad.dtype is "float16", expected "bf16"'
fresh; mutate 's/"sorted_indices.bin", "dtype": "int32"/"sorted_indices.bin", "dtype": "int64"/'
expect_refusal "indices not int32" 'tensors.sorted_indices.dtype is "int64", expected "int32"'
fresh; mutate 's/"shape": \[5, 17\]/"shape": [5, 18]/'
expect_refusal "wrong output shape" 'tensors.input_grad.shape is [5, 18], expected [5, 17]'
fresh; mutate 's/"hidden_size": 17/"hidden_size": 18/'
expect_refusal "hidden_size disagrees with shapes" 'tensors.permuted_output_grad.shape is [10, 17], expected [10, 18]'
fresh; mutate 's/"num_rows": 10/"num_rows": 11/'
expect_refusal "num_rows above tokens_num*top_k" 'num_rows is 11, more than tokens_num*top_k = 10'
fresh; mutate 's/"tokens_num": 5/"tokens_num": 5.0/'
expect_refusal "integer written as a float" 'tokens_num is 5.0, expected an integer'
fresh; mutate 's/"tokens_num": 5/"tokens_num": -5/'
expect_refusal "negative integer" 'tokens_num is -5, expected a non-negative integer'
fresh; mutate 's/"hidden_size": 17/"hidden_size": 99999999999999999999/'
expect_refusal "integer beyond 64 bits" 'hidden_size is 18446744073709551615 or more'
fresh; mutate 's/"top_k": 2/"top_k": 4294967296/'
expect_refusal "T*K overflow" 'times top_k 4294967296'
fresh; mutate 's/"format": "moeperm-golden\/1"/"format": "moeperm-golden\/3"/'
expect_refusal "unknown format" 'format is "moeperm-golden/3", expected "moeperm-golden/2" or "moeperm-golden/1"'
fresh; mutate 's/"format": "moeperm-golden\/1"/"format": "moeperm-golden\/2"/'
expect_refusal "format 1 keys under the format-2 label" 'attrs is missing'
fresh; mutate 's/"op": "MoeTokenPermuteGrad"/"op": "MoeTokenPermute"/'
expect_refusal "wrong op" 'op is "MoeTokenPermute", expected "MoeTokenPermuteGrad"'
fresh; mutate '/"sorted_indices": {/s/"sha256": "[0-9a-f]*"/"sha256": "0000000000000000000000000000000000000000000000000000000000000000"/'
expect_refusal "wrong sha256" 'tensors.sorted_indices.sha256 is 0000000000000000000000000000000000000000000000000000000000000000, but sorted_indices.bin hashes to'
fresh; rm "$tmp/case/permuted_output_grad.bin"
expect_refusal "missing file" 'cannot open'
fresh; mutate 's/"file": "sorted_indices.bin"/"file": "..\/sorted_indices.bin"/'
expect_refusal "file outside the case" 'tensors.sorted_indices.file is "../sorted_indices.bin", which leaves the case directory'
fresh; mutate 's/"file": "sorted_indices.bin"/"file": "sub\/sorted_indices.bin"/'
expect_refusal "file in a subdirectory" 'which leaves the case directory'
fresh; mutate 's/"file": "sorted_indices.bin"/"file": "\/etc\/passwd"/'
expect_refusal "absolute file" 'tensors.sorted_indices.file is "/etc/passwd", an absolute path'
fresh; truncate -s -2 "$tmp/case/permuted_output_grad.bin"
expect_refusal "truncated bin" 'is 338 bytes, expected 340'
fresh; mutate 's/"padded_mode": false/"padded_mode": 0/'
expect_refusal "padded_mode not a boolean" 'padded_mode is 0, expected a boolean'
fresh; mutate 's/"format"/"formt"/'
expect_refusal "missing field" 'format is missing'
fresh; printf '{"format": ' >"$tmp/case/case.json"
expect_refusal "not JSON" 'not valid JSON'
fresh; printf '\n{}\n' >>"$tmp/case/case.json"
expect_refusal "a second JSON value after the manifest" '(byte 1038): unexpected text after the JSON object'
fresh; mutate 's/"padded_mode": false/"padded_mode": true/'
# MoeTokenPermuteGrad ignores padded_mode, as the Atlas A2/A3 device does
if "$moeperm" run "$tmp/case" --out "$tmp/out.bin" >/dev/null 2>"$tmp/stderr"; then
    echo "ok   padded_mode true: accepted and ignored"
else
    echo "FAIL padded_mode true: refused ($(cat "$tmp/stderr")), the device ignores it" >&2
    failures=$((failures + 1))
fi

# Text that lenient JSON parsers accept is not a manifest (RFC 8259 only).
fresh; mutate 's/^{$/{ \/\/ edited by hand/'
expect_refusal "a comment" 'not valid JSON at line 1, column 3 (byte 2): a comment (//)'
fresh; mutate "s/\"dtype\": \"bf16\",\$/'dtype': 'bf16',/"
expect_refusal "single quotes" 'a single quote'
fresh; mutate 's/"shape": \[5, 17\]/"shape": [5, 17,]/'
expect_refusal "a trailing comma" "a comma before ']'"
fresh; mutate 's/"tokens_num": 5/"tokens_num": 05/'
expect_refusal "a leading zero" 'the number 05 has a leading zero'
fresh; mutate 's/"padded_mode": false/"padded_mode": False/'
expect_refusal "False" 'the JSON literal is false, in lower case'
fresh; mutate 's/"file": "sorted_indices.bin"/"file": "sorted_indices.bin\\u0000\/..\/..\/etc\/passwd"/'
expect_refusal "\\u0000 cutting a file name" '\u0000 inside a string'
fresh; mutate 's/"seed": \([0-9]*\)/"seed": NaN/'
expect_refusal "NaN" 'NaN, which is not a JSON number'
fresh; mutate 's/"top_k": 2/"top_k": 2, "top_k": 2/'
expect_refusal "a key twice" 'the key "top_k" a second time in one object'

# Not a manifest, but the same promise for `golden`: an empty --out would
# write under /, so it is bad usage.
rc=0
"$moeperm" golden --out "" --suite routing >"$tmp/empty.out" 2>&1 || rc=$?
if [ "$rc" -ne 2 ] || ! grep -q -- '--out is ""' "$tmp/empty.out"; then
    echo "FAIL: golden --out \"\" exited $rc: $(cat "$tmp/empty.out")" >&2
    failures=$((failures + 1))
fi

if [ "$failures" -ne 0 ]; then
    echo "$failures mutations were not refused properly" >&2
    exit 1
fi

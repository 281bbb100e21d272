#!/bin/sh
# A format-2 case whose manifest lies is refused, for every operator: `moeperm
# run` exits 2 with one sentence naming the field and the bad value, and
# writes no output (file, directory or temporary); `moeperm check` exits 2
# with the same sentence.  One small case of each operator is generated here,
# and each must itself run and pass (so a broken tool cannot pass by refusing
# everything); each row of the table below mutates a fresh copy of one.
# usage: manifest_v2_mutations.sh MOEPERM
set -eu
moeperm=$1
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT INT TERM
failures=0
zeros=0000000000000000000000000000000000000000000000000000000000000000

# Six tokens, two experts each: 12 slots, of which 10 rows are kept (the
# other two dropped); MoeTokenUnpermuteGrad with probs and their exact values.
gen() {
    op=$1
    shift
    "$moeperm" golden --out "$tmp/good" --name "$op" --op "$op" --tokens 6 --top-k 2 \
        --hidden 3 --dtype bf16 "$@" >/dev/null
}
gen MoeTokenPermuteGrad --rows 10
gen MoeTokenPermute --num-out-tokens 10
gen MoeTokenUnpermute --rows 10
gen MoeTokenUnpermuteGrad --rows 10 --probs-dtype float32
for op in MoeTokenPermuteGrad MoeTokenPermute MoeTokenUnpermute MoeTokenUnpermuteGrad; do
    rm -rf "$tmp/out"
    if ! "$moeperm" run "$tmp/good/$op" --out "$tmp/out" >/dev/null ||
        ! "$moeperm" check "$tmp/good/$op" >/dev/null; then
        echo "FAIL: the unmutated $op case does not run and pass" >&2
        exit 1
    fi
    grep -q '"format": "moeperm-golden/2"' "$tmp/good/$op/case.json"
done

# refused OP LABEL SED-EXPRESSION FRAGMENT: applies the edit to a fresh copy
# of the OP case's manifest, which must then be refused with FRAGMENT.
refused() {
    op=$1 label="$1: $2" edit=$3 fragment=$4
    rm -rf "$tmp/case" "$tmp/out" "$tmp"/.out*
    cp -r "$tmp/good/$op" "$tmp/case"
    sed -e "$edit" "$tmp/case/case.json" >"$tmp/case.json.new"
    if cmp -s "$tmp/case/case.json" "$tmp/case.json.new"; then
        echo "FAIL $label: the edit '$edit' changed nothing" >&2
        failures=$((failures + 1))
        return
    fi
    mv "$tmp/case.json.new" "$tmp/case/case.json"
    rc=0
    "$moeperm" run "$tmp/case" --out "$tmp/out" 2>"$tmp/stderr" >/dev/null || rc=$?
    if [ "$rc" -ne 2 ]; then
        echo "FAIL $label: run exited $rc, expected 2 ($(cat "$tmp/stderr"))" >&2
        failures=$((failures + 1))
    elif ! grep -qF -- "$fragment" "$tmp/stderr"; then
        echo "FAIL $label: message lacks \"$fragment\": $(cat "$tmp/stderr")" >&2
        failures=$((failures + 1))
    elif [ "$(wc -l <"$tmp/stderr")" -ne 1 ]; then
        echo "FAIL $label: more than one line: $(cat "$tmp/stderr")" >&2
        failures=$((failures + 1))
    elif [ -e "$tmp/out" ] || ls -a "$tmp" | grep -q '^\.out'; then
        echo "FAIL $label: an output or its temporary was written" >&2
        failures=$((failures + 1))
    else
        rc=0
        "$moeperm" check "$tmp/case" >"$tmp/check" 2>&1 || rc=$?
        if [ "$rc" -ne 2 ] || ! grep -qF -- "$fragment" "$tmp/check"; then
            echo "FAIL $label: check exited $rc, expected 2 with \"$fragment\": $(cat "$tmp/check")" >&2
            failures=$((failures + 1))
        else
            echo "ok   $label: $(cat "$tmp/stderr")"
        fi
    fi
}

# padded_mode = true: refused by MoeTokenPermute's tiling on the device
# (561002), ignored by the other three, as the Atlas A2/A3 device does.
refused MoeTokenPermute "padded_mode true (refused by the device's tiling)" \
    's/"padded_mode": false/"padded_mode": true/' \
    'the operator refuses the case (MOEPERM_ERR_INNER_TILING_ERROR)'
for op in MoeTokenPermuteGrad MoeTokenUnpermute MoeTokenUnpermuteGrad; do
    rm -rf "$tmp/case" "$tmp/out"
    cp -r "$tmp/good/$op" "$tmp/case"
    sed -e 's/"padded_mode": false/"padded_mode": true/' "$tmp/good/$op/case.json" \
        >"$tmp/case/case.json"
    if "$moeperm" check "$tmp/case" >"$tmp/check" 2>&1; then
        echo "ok   $op: padded_mode true is accepted and ignored"
    else
        echo "FAIL $op: padded_mode true refused, the device ignores it: $(cat "$tmp/check")" >&2
        failures=$((failures + 1))
    fi
done

# The same mutation of every operator's case (OP in the edit and the
# fragment stands for the operator's name).
for op in MoeTokenPermuteGrad MoeTokenPermute MoeTokenUnpermute MoeTokenUnpermuteGrad; do
    refused "$op" "unknown op" "s/\"op\": \"$op\"/\"op\": \"MoeTokenSort\"/" \
        'op is "MoeTokenSort", expected "MoeTokenPermuteGrad", "MoeTokenPermute", "MoeTokenUnpermute" or "MoeTokenUnpermuteGrad"'
    refused "$op" "unknown attribute" 's/"attrs": {/"attrs": {"num_topk": 2, /' \
        "attrs.num_topk is not an attribute of $op"
    refused "$op" "padded_mode not a boolean" 's/"padded_mode": false/"padded_mode": 0/' \
        'attrs.padded_mode is 0, expected a boolean'
    refused "$op" "attrs not an object" 's/"attrs": {[^}]*}/"attrs": []/' \
        'attrs is [], expected an object'
    refused "$op" "unknown tensor" 's/"sorted_indices": {/"sorted_idx": {/' \
        "tensors.sorted_idx is not a tensor of $op"
    refused "$op" "sha256 of other bytes" \
        "/\"sorted_indices\": {/s/\"sha256\": \"[0-9a-f]*\"/\"sha256\": \"$zeros\"/" \
        "tensors.sorted_indices.sha256 is $zeros, but sorted_indices.bin hashes to"
    refused "$op" "sha256 not 64 digits" \
        '/"sorted_indices": {/s/"sha256": "[0-9a-f]\([0-9a-f]*\)"/"sha256": "\1"/' \
        '", expected 64 hexadecimal digits'
    refused "$op" "file leaving the directory" \
        's/"file": "sorted_indices.bin"/"file": "..\/good\/sorted_indices.bin"/' \
        'tensors.sorted_indices.file is "../good/sorted_indices.bin", which leaves the case directory'
    refused "$op" "file in a subdirectory" \
        's/"file": "sorted_indices.bin"/"file": "sub\/sorted_indices.bin"/' \
        'which leaves the case directory'
    refused "$op" "absolute file" 's/"file": "sorted_indices.bin"/"file": "\/etc\/passwd"/' \
        'tensors.sorted_indices.file is "/etc/passwd", an absolute path'
    refused "$op" "dtype alias in a file" \
        '/"sorted_indices": {/!s/"dtype": "bf16"/"dtype": "bfloat16"/' \
        '.dtype is "bfloat16", expected one of "float32", "float16", "bf16", "int8", "int32", "int64", "float64"'
    refused "$op" "unknown dtype" '/"sorted_indices": {/s/"dtype": "int32"/"dtype": "uint32"/' \
        'tensors.sorted_indices.dtype is "uint32", expected one of'
    refused "$op" "nine dimensions" \
        '/"sorted_indices": {/s/"shape": \[\([0-9]*\)\]/"shape": [\1, 1, 1, 1, 1, 1, 1, 1, 1]/' \
        '], more than 8 dimensions'
    refused "$op" "negative extent" '/"sorted_indices": {/s/"shape": \[/"shape": [-/' \
        'tensors.sorted_indices.shape[0] is -'
    refused "$op" "extent beyond the format's 2^40" \
        '/"sorted_indices": {/s/"shape": \[[0-9]*\]/"shape": [1099511627777]/' \
        'tensors.sorted_indices.shape[0] is 1099511627777, larger than the 1099511627776 this format allows'
    refused "$op" "extent beyond 64 bits" \
        '/"sorted_indices": {/s/"shape": \[[0-9]*\]/"shape": [99999999999999999999]/' \
        'tensors.sorted_indices.shape[0] is 18446744073709551615 or more (json-c reads larger integers as that)'
    refused "$op" "extents too large together" \
        '/"sorted_indices": {/s/"shape": \[[0-9]*\]/"shape": [1099511627776, 1099511627776]/' \
        'tensors.sorted_indices.shape [1099511627776, 1099511627776] is too large to address'
    refused "$op" "extent of another file" \
        '/"sorted_indices": {/s/"shape": \[[0-9]*\]/"shape": [11]/' \
        'sorted_indices.bin is '
done

# Roles: each kind of tensor claiming another's.
refused MoeTokenPermuteGrad "input claims output" \
    '/"sorted_indices": {/s/"role": "input"/"role": "output"/' \
    'tensors.sorted_indices.role is "output", expected "input"'
refused MoeTokenPermute "output claims input" \
    '/"permuted_tokens": {/s/"role": "output"/"role": "input"/' \
    'tensors.permuted_tokens.role is "input", expected "output"'
refused MoeTokenUnpermuteGrad "exact claims output" \
    '/"probs_grad_exact": {/s/"role": "exact"/"role": "output"/' \
    'tensors.probs_grad_exact.role is "output", expected "exact"'
refused MoeTokenUnpermute "unknown role" '/"probs": {/s/"role": "input"/"role": "weights"/' \
    'tensors.probs.role is "weights", expected "input"'
refused MoeTokenUnpermute "role missing" '/"probs": {/s/"role": "input", //' \
    'tensors.probs.role is missing'

# Tensors the operator needs, missing (a middle line, so the JSON stays valid).
refused MoeTokenPermuteGrad "missing tensor" '/"sorted_indices": {/d' \
    'tensors.sorted_indices is missing'
refused MoeTokenPermute "missing tensor" '/"indices": {/d' 'tensors.indices is missing'
refused MoeTokenUnpermute "missing tensor" '/"permuted_tokens": {/d' \
    'tensors.permuted_tokens is missing'
refused MoeTokenUnpermuteGrad "missing tensor" '/"unpermuted_tokens_grad": {/d' \
    'tensors.unpermuted_tokens_grad is missing'
refused MoeTokenUnpermuteGrad "missing output" '/"permuted_tokens_grad": {/d' \
    'tensors.permuted_tokens_grad is missing'
# A tensor of another operator.
refused MoeTokenPermuteGrad "another operator's tensor" \
    's/"sorted_indices": {/"probs": {"role": "input", "file": "probs.bin", "dtype": "bf16", "shape": [6, 2], "sha256": "'"$zeros"'"}, "sorted_indices": {/' \
    'tensors.probs is not a tensor of MoeTokenPermuteGrad'

# probs and what comes with them.
refused MoeTokenUnpermuteGrad "probs without probs_grad" '/"probs_grad": {/d' \
    'tensors.probs is there without tensors.probs_grad: probs and probs_grad come together'
refused MoeTokenUnpermuteGrad "probs_grad without probs" '/"probs": {/d' \
    'tensors.probs_grad is there without tensors.probs: probs and probs_grad come together'

# Attributes each operator must have, and one it must not.
refused MoeTokenPermuteGrad "missing attrs.top_k" 's/"top_k": [0-9]*, //' \
    'attrs.top_k is missing'
# num_topk is recorded as given (-1 is taken as 1); the operator refuses the
# values the device has no result for.
refused MoeTokenPermuteGrad "attrs.top_k -2 (the operator refuses it)" \
    's/"top_k": \([0-9]*\)/"top_k": -\1/' \
    "the operator refuses the case (MOEPERM_ERR_PARAM_INVALID): the device's result is undetermined: num_topk = -2"
refused MoeTokenPermuteGrad "attrs.top_k below the format's -2^40" \
    's/"top_k": \([0-9]*\)/"top_k": -1099511627777/' \
    'attrs.top_k is -1099511627777, below the -1099511627776 this format allows'
refused MoeTokenPermuteGrad "attrs.top_k as a string" 's/"top_k": \([0-9]*\)/"top_k": "\1"/' \
    'attrs.top_k is "2", expected an integer'
refused MoeTokenPermute "missing attrs.num_out_tokens" 's/"num_out_tokens": [-0-9]*, //' \
    'attrs.num_out_tokens is missing'
refused MoeTokenPermute "attrs.num_out_tokens below the format's -2^40" \
    's/"num_out_tokens": [-0-9]*/"num_out_tokens": -1099511627777/' \
    'attrs.num_out_tokens is -1099511627777, below the -1099511627776 this format allows'
refused MoeTokenPermute "attrs.top_k on MoeTokenPermute" 's/"attrs": {/"attrs": {"top_k": 2, /' \
    'attrs.top_k is not an attribute of MoeTokenPermute'
refused MoeTokenPermuteGrad "missing attrs.padded_mode" 's/, "padded_mode": false}/}/' \
    'attrs.padded_mode is missing'
refused MoeTokenPermute "missing attrs.padded_mode" 's/, "padded_mode": false}/}/' \
    'attrs.padded_mode is missing'
refused MoeTokenUnpermute "missing attrs.padded_mode" 's/{"padded_mode": false}/{}/' \
    'attrs.padded_mode is missing'
refused MoeTokenUnpermuteGrad "missing attrs.padded_mode" 's/{"padded_mode": false}/{}/' \
    'attrs.padded_mode is missing'
refused MoeTokenUnpermuteGrad "attrs.ub_bytes zero" \
    's/"attrs": {/"attrs": {"ub_bytes": 0, /' \
    'attrs.ub_bytes is 0, below the 1 this format allows'
# A named chip: a name moeperm knows, beside its own numbers.
refused MoeTokenUnpermuteGrad "attrs.chip unknown" \
    's/"attrs": {/"attrs": {"chip": "Ascend999", "ub_bytes": 196352, "vector_cores": 48, /' \
    'attrs.chip is "Ascend999", which is not a chip moeperm knows (Ascend910B1 Ascend910B2'
refused MoeTokenUnpermuteGrad "attrs.chip and vector_cores disagree" \
    's/"attrs": {/"attrs": {"chip": "Ascend910B3", "ub_bytes": 196352, "vector_cores": 48, /' \
    'attrs.chip is "Ascend910B3", a chip of 196352 unified-buffer bytes and 40 vector cores, but attrs.ub_bytes is 196352 and attrs.vector_cores 48'
refused MoeTokenUnpermuteGrad "attrs.chip without its numbers" \
    's/"attrs": {/"attrs": {"chip": "Ascend910B3", /' \
    'but attrs.ub_bytes is 0 and attrs.vector_cores 0 (0: absent; a named chip gives both)'
refused MoeTokenUnpermuteGrad "attrs.chip not a string" \
    's/"attrs": {/"attrs": {"chip": 910, "ub_bytes": 196352, "vector_cores": 48, /' \
    'attrs.chip is 910, expected a string'
refused MoeTokenUnpermute "attrs.chip on MoeTokenUnpermute" \
    's/"attrs": {/"attrs": {"chip": "Ascend910B2", /' \
    'attrs.chip is not an attribute of MoeTokenUnpermute'
rm -rf "$tmp/case"
cp -r "$tmp/good/MoeTokenUnpermuteGrad" "$tmp/case"
sed -e 's/"attrs": {/"attrs": {"chip": "Ascend910B2", "ub_bytes": 196352, "vector_cores": 48, /' \
    "$tmp/good/MoeTokenUnpermuteGrad/case.json" >"$tmp/case/case.json"
if "$moeperm" check "$tmp/case" >"$tmp/check" 2>&1; then
    echo "ok   MoeTokenUnpermuteGrad: attrs.chip Ascend910B2 beside its numbers is read"
else
    echo "FAIL MoeTokenUnpermuteGrad: attrs.chip with its numbers refused: $(cat "$tmp/check")" >&2
    failures=$((failures + 1))
fi
refused MoeTokenUnpermute "attrs.restore_shape not a list" \
    's/"attrs": {/"attrs": {"restore_shape": 6, /' \
    'attrs.restore_shape is 6, expected a list of at most 8 integers'

# The format's own keys.
refused MoeTokenUnpermute "unknown format" \
    's/"format": "moeperm-golden\/2"/"format": "moeperm-golden\/3"/' \
    'format is "moeperm-golden/3", expected "moeperm-golden/2" or "moeperm-golden/1"'
refused MoeTokenUnpermute "format-2 keys under the format-1 label" \
    's/"format": "moeperm-golden\/2"/"format": "moeperm-golden\/1"/' \
    'op is "MoeTokenUnpermute", expected "MoeTokenPermuteGrad"'
refused MoeTokenPermuteGrad "format-2 keys under the format-1 label" \
    's/"format": "moeperm-golden\/2"/"format": "moeperm-golden\/1"/' \
    'dtype is missing'

if [ "$failures" -ne 0 ]; then
    echo "$failures mutations were not refused properly" >&2
    exit 1
fi

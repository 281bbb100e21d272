#!/usr/bin/env python3
"""golden/README.md lists every case of the corpus as its manifest
describes it: one heading per suite directory, in the order of
`moeperm golden --list`, and one line per case, in byte order of the
names, with the sizes read from the manifest's shapes and attributes
(formats 1 and 2) and its description.  The listing is made by the tool
from the suites' specs; this rebuilds it from the files alone, so a
listing that drifts from what the corpus holds fails here.

usage: readme_lists_corpus.py GOLDEN_DIR MOEPERM
"""
import json
import os
import subprocess
import sys


def suite_order(golden, moeperm):
    suites = sorted(d for d in os.listdir(golden)
                    if os.path.isdir(os.path.join(golden, d)) and not d.startswith("."))
    listed = subprocess.run([moeperm, "golden", "--list"], check=True, capture_output=True,
                            text=True).stdout.split("\n")
    order = [line.split()[0] for line in listed if line.strip()]
    return [s for s in order if s in suites] + [s for s in suites if s not in order]


def shape(m, tensor):
    return m["tensors"][tensor]["shape"]


def edge(m, slots):
    """What the case has of the input domain's edge: sorted_indices longer
    than the T*K entries read, huge entries, padded_mode."""
    words = ""
    extra = shape(m, "sorted_indices")[0] - slots
    if extra:
        words += ", L=%d (%d unread)" % (slots + extra, extra)
    if m.get("recipe", {}).get("huge_indices"):
        words += ", huge indices"
    if m["attrs"]["padded_mode"]:
        words += ", padded_mode true"
    return words


def sizes(m):
    """The case's sizes in words, from a manifest of either format."""
    if m["format"] == "moeperm-golden/1":
        return "T=%d, K=%d, H=%d, R=%d" % (m["tokens_num"], m["top_k"], m["hidden_size"],
                                           m["num_rows"])
    op, attrs = m["op"], m["attrs"]
    if op == "MoeTokenPermuteGrad":
        r, h = shape(m, "permuted_output_grad")
        k = attrs["top_k"]
        t = shape(m, "input_grad")[0]
        words = "T=%d, K=%s, H=%d, R=%d" % (t, "-1 (taken as 1)" if k == -1 else k, h, r)
        return words + edge(m, t * max(k, 1))
    if op == "MoeTokenPermute":
        dims = shape(m, "tokens")
        t, h = dims[0], 1
        for d in dims[1:]:
            h *= d
        ids = shape(m, "indices")
        k = ids[1] if len(ids) > 1 else 1
        rows = shape(m, "permuted_tokens")[0]
        words = "T=%d, K=%d, H=%d, %s, num_out_tokens %d: %d row%s, %s ids" % (
            t, k, h, m["tensors"]["tokens"]["dtype"], attrs["num_out_tokens"], rows,
            "" if rows == 1 else "s", m["tensors"]["indices"]["dtype"])
        if m.get("recipe", {}).get("sentinels"):
            words += " with sentinels"
        if len(dims) > 2:
            words += ", tokens [%s]" % ", ".join(str(d) for d in dims)
        return words
    r, h = shape(m, "permuted_tokens")
    t = shape(m, "unpermuted_tokens" if op == "MoeTokenUnpermute" else "unpermuted_tokens_grad")[0]
    tokens = m["tensors"]["permuted_tokens"]["dtype"]
    if "probs" in m["tensors"]:
        k = shape(m, "probs")[1]
        probs = "%s probs" % m["tensors"]["probs"]["dtype"]
    else:
        k, probs = 1, "no probs"
    words = "T=%d, K=%d, H=%d, R=%d, %s tokens, %s" % (t, k, h, r, tokens, probs)
    if "chip" in attrs:
        words += ", chip %s: %d-byte unified buffer, %d cores" % (
            attrs["chip"], attrs["ub_bytes"], attrs["vector_cores"])
    elif "ub_bytes" in attrs or "vector_cores" in attrs:
        words += ", chip: %s-byte unified buffer, %s cores" % (
            attrs.get("ub_bytes", "the A2's"), attrs.get("vector_cores", "the A2's"))
    return words + edge(m, t * k)


def cases(golden, suite):
    root = os.path.join(golden, suite)
    for case in sorted(os.listdir(root)):
        path = os.path.join(root, case, "case.json")
        if case.startswith(".") or not os.path.isfile(path):
            continue
        with open(path) as f:
            yield json.load(f)


def main():
    if len(sys.argv) != 3:
        sys.exit(__doc__.strip().split("\n\n")[1])
    golden, moeperm = sys.argv[1], sys.argv[2]
    want = []
    for suite in suite_order(golden, moeperm):
        want.append("### %s" % suite)
        for m in cases(golden, suite):
            want.append("- `%s` (%s): %s" % (m["name"], sizes(m), m["description"]))
    with open(os.path.join(golden, "README.md"), encoding="utf-8") as f:
        got = [line.rstrip("\n") for line in f if line.startswith(("### ", "- `"))]
    if got != want:
        for i, (g, w) in enumerate(zip(got + [""] * len(want), want + [""] * len(got))):
            if g != w:
                print("FAIL: line %d of the listing is\n  %s\nbut the manifests give\n  %s"
                      % (i + 1, g or "(nothing)", w or "(nothing)"))
                break
        sys.exit(1)
    print("ok: README.md lists the %d cases of %d suites as their manifests describe them"
          % (sum(1 for line in want if line.startswith("- ")),
             sum(1 for line in want if line.startswith("### "))))


main()

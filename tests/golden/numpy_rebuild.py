#!/usr/bin/env python3
"""Rebuilds golden cases with numpy from docs/golden-format.md alone.

An independent implementation of the documented PRNG (counter-based
SplitMix64) and the routings (both in numpy_routing.py), the normal / negzero / bits value kinds and the
arithmetic of MoeTokenPermuteGrad in docs/arithmetic.md (fp32 accumulator
started from slot 0, k-order binary32 adds, dropped slots skipped, one RNE
narrowing), checked against the committed files bit for bit (NaN-aware for
input_grad).  If the docs and the generator drift apart, this fails.

Manifests of both formats are read: format 1 gives tokens_num, top_k,
hidden_size, num_rows and dtype as keys; format 2 gives top_k as
attrs.top_k (-1 taken as 1) and the rest through the tensors' shapes and
dtypes, sorted_indices possibly longer than tokens_num * top_k (the
entries past it are never read).  The routings include those that are no
permutation (repeats, sparse), huge entries, and rows no slot names.  Cases of
the other operators are not rebuilt here.

usage: numpy_rebuild.py GOLDEN_DIR     (exit 77, "skipped", without numpy)
"""
import json
import os
import sys

try:
    import numpy as np
except ImportError:
    print("numpy is not available: skipped")
    sys.exit(77)

np.seterr(over="ignore", invalid="ignore")
from numpy_routing import U, draw, owners, sorted_indices, stream_key  # noqa: E402


def to_bf16_bits(f32):
    b = f32.view(np.uint32).astype(np.uint64)
    nan = (b & U(0x7FFFFFFF)) > U(0x7F800000)
    rounded = ((b + U(0x7FFF) + ((b >> U(16)) & U(1))) >> U(16)) & U(0xFFFF)
    return np.where(nan, (b >> U(16)) | U(0x40), rounded).astype(np.uint16)


def narrow(f32, dtype):
    if dtype == "float32":
        return f32.view(np.uint32)
    if dtype == "float16":
        return f32.astype(np.float16).view(np.uint16)
    return to_bf16_bits(f32)


def widen(bits, dtype):
    if dtype == "float32":
        return bits.view(np.float32)
    if dtype == "float16":
        return bits.view(np.float16).astype(np.float32)
    return (bits.astype(np.uint32) << 16).view(np.float32)


def values(m, recipe, flat):
    """The values of flat slots ``flat`` (t * K + k) as raw bits, shape
    [len(flat), H]."""
    H, seed, dtype = m["hidden_size"], m["seed"], m["dtype"]
    key0 = stream_key(seed, 0)
    n = (np.asarray(flat, dtype=U)[:, None] * U(H) + np.arange(H, dtype=U)[None, :]) * U(2)
    d0, d1 = draw(key0, n), draw(key0, n + U(1))
    kind = recipe["values"]
    if kind == "negzero":
        z = np.zeros(d0.shape, dtype=np.uint32 if dtype == "float32" else np.uint16)
        return z | (0x80000000 if dtype == "float32" else 0x8000)
    if kind == "bits":
        return (d0 & U(0xFFFFFFFF)).astype(np.uint32) if dtype == "float32" else \
            (d0 & U(0xFFFF)).astype(np.uint16)
    m24 = U(0xFFFFFF)
    s = (d0 & m24) + ((d0 >> U(24)) & m24) + (d1 & m24) + ((d1 >> U(24)) & m24)
    scale = np.exp2(-(25 + (d1 >> U(61)).astype(np.int64)).astype(np.float64))
    f32 = ((s.astype(np.int64) - 2**25).astype(np.float64) * scale).astype(np.float32)
    return narrow(f32, dtype)


def reference(grad_bits, idx, m):
    T, K, H, R, dtype = m["tokens_num"], m["top_k"], m["hidden_size"], m["num_rows"], m["dtype"]
    grad = widen(grad_bits, dtype).reshape(R, H)
    idx = idx[:T * K]  # floor(L / K) tokens: the entries past T*K are never read
    acc = np.zeros((T, H), np.float32)
    for k in range(K):
        rows = idx[k::K]
        ok = rows < R
        vals = np.zeros((T, H), np.float32)
        vals[ok] = grad[rows[ok]]
        acc = np.where(ok[:, None], vals if k == 0 else acc + vals, acc)
    return narrow(acc, dtype)


def is_nan(bits, dtype):
    if dtype == "float32":
        return (bits & 0x7FFFFFFF) > 0x7F800000
    if dtype == "float16":
        return (bits & 0x7FFF) > 0x7C00
    return (bits & 0x7FFF) > 0x7F80


def sizes(manifest):
    """A MoeTokenPermuteGrad manifest's sizes, seed and tensor files, the
    same for both formats; None for a case of another operator."""
    if manifest.get("op") != "MoeTokenPermuteGrad":
        return None
    tensors = manifest["tensors"]
    m = {"seed": manifest["seed"],
         "files": {name: t["file"] for name, t in tensors.items()}}
    if manifest["format"] == "moeperm-golden/1":
        for key in ("tokens_num", "top_k", "hidden_size", "num_rows", "dtype"):
            m[key] = manifest[key]
        m["extra"] = 0
    elif manifest["format"] == "moeperm-golden/2":
        grad, out = tensors["permuted_output_grad"], tensors["input_grad"]
        m["tokens_num"], m["hidden_size"] = out["shape"]
        m["num_rows"] = grad["shape"][0]
        # num_topk -1 is taken as 1.
        m["top_k"] = max(manifest["attrs"]["top_k"], 1)
        m["dtype"] = out["dtype"]
        if grad["dtype"] != m["dtype"] or grad["shape"][1] != m["hidden_size"]:
            raise ValueError("permuted_output_grad is %s %s, input_grad %s %s" % (
                grad["dtype"], grad["shape"], out["dtype"], out["shape"]))
        # floor(L / K) tokens: up to K - 1 entries past T*K, never read.
        extra = tensors["sorted_indices"]["shape"][0] - m["tokens_num"] * m["top_k"]
        if not 0 <= extra < m["top_k"]:
            raise ValueError("sorted_indices has shape %s" % tensors["sorted_indices"]["shape"])
        m["extra"] = extra
    else:
        raise ValueError("unknown format %r" % manifest["format"])
    return m


def check(case_dir):
    manifest = json.load(open(os.path.join(case_dir, "case.json")))
    recipe = manifest.get("recipe")
    if not recipe or recipe["values"] not in ("normal", "negzero", "bits"):
        return None
    m = sizes(manifest)
    if m is None:
        return None
    T, K, H, R, dtype = m["tokens_num"], m["top_k"], m["hidden_size"], m["num_rows"], m["dtype"]
    if T * K * H > 4_000_000:
        return None
    raw = np.uint32 if dtype == "float32" else np.uint16
    idx = sorted_indices(T, K, m["seed"], recipe, R, m["extra"])
    file_idx = np.fromfile(os.path.join(case_dir, m["files"]["sorted_indices"]), dtype="<i4")
    if not np.array_equal(idx, file_idx):
        return "sorted_indices differ"
    # Row r holds the values of the last slot naming it, or of flat slot
    # T*K + r when none does.
    grad = values(m, recipe, owners(idx, T, K, R)).astype(raw)
    file_grad = np.fromfile(os.path.join(case_dir, m["files"]["permuted_output_grad"]), dtype=raw)
    if not np.array_equal(grad.reshape(-1), file_grad):
        return "permuted_output_grad differs"
    out = reference(grad.reshape(-1), idx, m).reshape(-1)
    file_out = np.fromfile(os.path.join(case_dir, m["files"]["input_grad"]), dtype=raw)
    same = (out == file_out) | (is_nan(out, dtype) & is_nan(file_out, dtype))
    if not same.all():
        first = int(np.argmax(~same))
        return "input_grad differs at token %d column %d: numpy 0x%x, file 0x%x" % (
            first // H, first % H, int(out[first]), int(file_out[first]))
    return "ok"


# The edges of the input domain the corpus's MoeTokenPermuteGrad cases
# must reach, so that one that lost them does not pass by checking less.
EDGES = {"repeats", "sparse", "huge", "num_topk -1", "unread entries", "rows no slot names"}


def edges_of(case_dir):
    manifest = json.load(open(os.path.join(case_dir, "case.json")))
    m = sizes(manifest)
    recipe = manifest.get("recipe") or {}
    found = {recipe.get("routing")} & EDGES
    if recipe.get("huge_indices"):
        found.add("huge")
    if manifest.get("attrs", {}).get("top_k") == -1:
        found.add("num_topk -1")
    if m["extra"]:
        found.add("unread entries")
    if m["num_rows"] > m["tokens_num"] * m["top_k"]:
        found.add("rows no slot names")
    return found


def main():
    root = sys.argv[1]
    checked, failures = 0, 0
    edges = set()
    for dirpath, _dirs, files in sorted(os.walk(root)):
        if "case.json" not in files:
            continue
        result = check(dirpath)
        if result is None:
            continue
        checked += 1
        edges |= edges_of(dirpath)
        if result != "ok":
            failures += 1
            print("FAIL %s: %s" % (dirpath, result))
    kinds_needed = 40
    print("%d cases rebuilt from the documentation (the domain's edge: %s), %d failed"
          % (checked, ", ".join(sorted(edges)), failures))
    if edges != EDGES:
        print("FAIL: no MoeTokenPermuteGrad case of %s" % ", ".join(sorted(EDGES - edges)))
    if failures or checked < kinds_needed or edges != EDGES:
        sys.exit(1)


main()

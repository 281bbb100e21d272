#!/usr/bin/env python3
"""How long the judge's diagnosis takes on outputs that differ, for each
operator at one size (default T=4096, K=8, H=4096 bf16): planted bugs the
catalogue names, and adversarial outputs (differences everywhere; half of
the tokens from one bug and half from another, so that two models each
explain about half; one bug everywhere but the last differing row, so that
a model exact on the sample fails at the end).  The bugs are written here
with numpy, from docs/judging.md; tests/bench/bench_diagnose times the
judge on them.  Not a test: it measures, it asserts nothing.

usage: diagnose_bench.py MOEPERM BENCH_DIAGNOSE WORKDIR [--tokens T]
       [--top-k K] [--hidden H] [--dtype bf16|float16|float32] [--reps R]
       [--only OP]
"""
import argparse
import json
import os
import subprocess
import sys

import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "python"))
import models as M  # noqa: E402  (the tests' own numpy models)

p = argparse.ArgumentParser()
p.add_argument("moeperm")
p.add_argument("bench")
p.add_argument("workdir")
p.add_argument("--tokens", type=int, default=4096)
p.add_argument("--top-k", type=int, default=8)
p.add_argument("--hidden", type=int, default=4096)
p.add_argument("--dtype", default="bf16")
p.add_argument("--reps", type=int, default=3)
p.add_argument("--only", default=None)
args = p.parse_args()

NP = {"bf16": np.uint16, "float16": np.float16, "float32": np.float32, "int32": np.int32,
      "int64": np.int64, "int8": np.int8, "float64": np.float64}


def make_case(op):
    path = os.path.join(args.workdir, "cases", op)
    if not os.path.exists(os.path.join(path, "case.json")):
        subprocess.run([args.moeperm, "golden", "--out", os.path.join(args.workdir, "cases"),
                        "--op", op, "--tokens", str(args.tokens), "--top-k", str(args.top_k),
                        "--hidden", str(args.hidden), "--dtype", args.dtype, "--name", op,
                        "--force"], check=True, stdout=subprocess.DEVNULL)
    with open(os.path.join(path, "case.json")) as f:
        manifest = json.load(f)
    tensors = {}
    for name, entry in manifest["tensors"].items():
        tensors[name] = np.fromfile(os.path.join(path, entry["file"]),
                                    dtype=NP[entry["dtype"]]).reshape(entry["shape"])
    return path, manifest, tensors


def flip_all(a):
    """Every element's lowest bit flipped: a difference everywhere that no
    model explains."""
    bits = a.view({1: np.uint8, 2: np.uint16, 4: np.uint32}[a.dtype.itemsize])
    return (bits ^ 1).view(a.dtype)


def fill(a, bits):
    """Every element the same bits: a buffer never written (a NaN fill
    makes the diagnosis ask the operator, element by element, whether
    arithmetic could have made it)."""
    out = np.empty_like(a)
    out.view({1: np.uint8, 2: np.uint16, 4: np.uint32}[a.dtype.itemsize])[...] = bits
    return out


def mix(a, b):
    """The first half of the rows from a, the rest from b."""
    out = a.copy()
    out[a.shape[0] // 2:] = b[a.shape[0] // 2:]
    return out


def spoil_last(bug, expected):
    """bug everywhere but its last differing row, which is flipped: a model
    exact on the sample that fails at the end."""
    out = bug.copy()
    differ = np.nonzero((bug.view(np.uint8).reshape(bug.shape[0], -1) !=
                         expected.view(np.uint8).reshape(bug.shape[0], -1)).any(axis=1))[0]
    if len(differ):
        out[differ[-1]] = flip_all(out[differ[-1]])
    return out


def sum_slots(x, idx, probs, order, narrow_each=False):
    """MoeTokenUnpermute (or MoeTokenPermuteGrad with probs None) with the
    slots taken in `order`, optionally narrowing the sum after each add."""
    rows = x.shape[0]
    X = M.widen(x)
    P = None if probs is None else M.widen(probs)
    acc = np.zeros((idx.shape[0], x.shape[1]), np.float32)
    started = np.zeros(idx.shape[0], bool)
    with np.errstate(all="ignore"):
        for k in order:
            s = idx[:, k]
            inc = s < rows
            if P is not None:
                inc &= P[:, k] != 0
            term = X[np.where(inc, s, 0)]
            if P is not None:
                term = term * P[:, k][:, None]
            first = inc & ~started
            acc = np.where(first[:, None] & (k == order[0]), term,
                           np.where(inc[:, None], acc + term, acc))
            started |= inc
            if narrow_each:
                acc = M.widen(M.narrow(acc, x.dtype))
    return M.narrow(acc, x.dtype)


def bugs_permute_grad(t, m):
    x, si, K = t["permuted_output_grad"], t["sorted_indices"], m["attrs"]["top_k"]
    idx = si.reshape(-1, K).astype(np.int64)
    e = t["input_grad"]
    missing = sum_slots(x, np.where(np.arange(K) == 3, x.shape[0], idx), None, list(range(K)))
    acc = sum_slots(x, idx, None, list(range(K)), narrow_each=True)
    return {"missing-slot 3": {"input_grad": missing},
            "acc-in-output-dtype": {"input_grad": acc},
            "everywhere": {"input_grad": flip_all(e)},
            "half missing-slot, half acc": {"input_grad": mix(missing, acc)},
            "missing-slot but the last row": {"input_grad": spoil_last(missing, e)}}


def bugs_unpermute(t, m):
    x, si, probs = t["permuted_tokens"], t["sorted_indices"], t["probs"]
    K = probs.shape[1]
    idx = si.reshape(-1, K).astype(np.int64)
    e = t["unpermuted_tokens"]
    rev = sum_slots(x, idx, probs, list(range(K))[::-1])
    missing = sum_slots(x, np.where(np.arange(K) == K - 1, x.shape[0], idx), probs,
                        list(range(K)))
    acc = sum_slots(x, idx, probs, list(range(K)), narrow_each=True)
    name = "unpermuted_tokens"
    return {"k-order-reversed": {name: rev}, "acc-in-output-dtype": {name: acc},
            "missing-slot K-1": {name: missing}, "everywhere": {name: flip_all(e)},
            "half reversed, half missing": {name: mix(rev, missing)},
            "all NaN": {name: fill(e, 0x7fc0 if e.dtype.itemsize == 2 else 0x7fc00000)},
            "reversed but the last row": {name: spoil_last(rev, e)}}


def bugs_permute(t, m):
    tok, ind = t["tokens"], t["indices"]
    flat = ind.reshape(-1).astype(np.int64)
    K = ind.shape[1]
    N = tok.shape[0]
    e_rows, e_si = t["permuted_tokens"], t["sorted_indices"]
    rows = e_rows.shape[0]
    rng = np.random.default_rng(1)

    def place(key, source):
        order = np.lexsort((key, flat))
        si = np.empty(flat.size, np.int64)
        si[order] = np.arange(flat.size)
        out = np.zeros_like(e_rows)
        keep = si < rows
        out[si[keep]] = tok[source[keep]]
        return out, si.astype(np.int32)

    i = np.arange(flat.size)
    unstable, unstable_si = place(rng.permutation(flat.size), i // K)
    token_row, _ = place(i, i % N)
    return {"unstable-sort": {"permuted_tokens": unstable, "sorted_indices": unstable_si},
            "token-row": {"permuted_tokens": token_row},
            "everywhere": {"permuted_tokens": flip_all(e_rows), "sorted_indices": flip_all(e_si)},
            "half unstable, half token-row": {"permuted_tokens": mix(unstable, token_row)},
            "all zeros": {"permuted_tokens": fill(e_rows, 0)}}


def bugs_unpermute_grad(t, m):
    g, si, probs = t["unpermuted_tokens_grad"], t["sorted_indices"], t["probs"]
    x = t["permuted_tokens"]
    K = probs.shape[1]
    R = x.shape[0]
    e_grad, e_pg = t["permuted_tokens_grad"], t["probs_grad"]
    slot = np.arange(si.size)
    keep = si < R

    def scaled(p_of_slot):
        out = e_grad.copy()
        with np.errstate(all="ignore"):
            rowsv = M.widen(g[slot[keep] // K]) * M.widen(p_of_slot[keep])[:, None]
        out[si[keep]] = M.narrow(rowsv, g.dtype)
        return out

    flat = probs.reshape(-1)
    nxt = flat.reshape(-1, K)[:, (np.arange(K) + 1) % K].reshape(-1)
    wrong = scaled(nxt)
    ignored = e_grad.copy()
    ignored[si[keep]] = g[slot[keep] // K]
    # probs_grad kept in the probs' dtype: products narrowed, added column by
    # column from +0.0, each sum narrowed
    X = M.widen(x)
    G = M.widen(g)
    rowx = np.where(keep[:, None], X[np.where(keep, si, 0)], np.float32(0))
    gx = G[slot // K]
    acc = M.narrow(np.zeros(si.size, np.float32), probs.dtype)
    with np.errstate(all="ignore"):
        for h in range(x.shape[1]):
            prod = M.widen(M.narrow((rowx[:, h] * gx[:, h]).astype(np.float32), probs.dtype))
            acc = M.narrow(M.widen(acc) + prod, probs.dtype)
    acc = acc.reshape(e_pg.shape)
    return {"wrong-slot-prob (next slot)": {"permuted_tokens_grad": wrong},
            "probs-ignored": {"permuted_tokens_grad": ignored},
            "everywhere (permuted_tokens_grad)": {"permuted_tokens_grad": flip_all(e_grad)},
            "acc-in-output-dtype (probs_grad)": {"probs_grad": acc},
            "everywhere (probs_grad)": {"probs_grad": flip_all(e_pg)},
            "all NaN (probs_grad)": {"probs_grad": fill(e_pg, 0x7fc0 if e_pg.dtype.itemsize == 2
                                                      else 0x7fc00000)}}


OPS = [("permute-grad", bugs_permute_grad), ("unpermute", bugs_unpermute),
       ("permute", bugs_permute), ("unpermute-grad", bugs_unpermute_grad)]

print("T=%d K=%d H=%d %s, %d repetitions each" % (args.tokens, args.top_k, args.hidden,
                                                   args.dtype, args.reps))
for op, make in OPS:
    if args.only and args.only != op:
        continue
    path, manifest, tensors = make_case(op)
    for bug, outputs in make(tensors, manifest).items():
        outdir = os.path.join(args.workdir, "outputs", op,
                              bug.replace(" ", "_").replace("(", "").replace(")", ""))
        os.makedirs(outdir, exist_ok=True)
        for name in os.listdir(outdir):
            os.remove(os.path.join(outdir, name))
        for name, array in outputs.items():
            np.ascontiguousarray(array).tofile(os.path.join(outdir, name + ".bin"))
        r = subprocess.run([args.bench, path, outdir, str(args.reps)], stdout=subprocess.PIPE,
                           universal_newlines=True, check=True)
        print("== %s: %s" % (op, bug))
        print(r.stdout.rstrip())
        sys.stdout.flush()

#!/usr/bin/env python3
"""Times moe_token_permute, moe_token_unpermute and moe_token_unpermute_grad
called from Python against the C API.

For each operator: `moeperm bench --op OP --json -`'s median (the two-phase
API called from C, outputs reused, large shapes started cold); the same two
C calls made in this process on this script's arrays, tensors created once;
and the package's function on numpy arrays with out= (outputs made once, the
C loop's work) and without (a fresh result each call, whose new pages the
kernel must fault in and zero).  The last three are taken in turns, so that
a busy machine slows them alike; the percentages are over the C calls made
here.  Then the per-call cost on a tiny shape, numpy and torch.
(moe_token_permute_grad has its own script: bench_permute_grad.py.)

usage: bench_operators.py [--moeperm PATH] [--tokens T] [--top-k K]
                          [--hidden H] [--dtype bf16|float16|float32] [--reps N] [--json]

    meson devenv -C build python3 python/benchmarks/bench_operators.py
"""
import argparse
import importlib.util
import json
import os
import statistics
import subprocess
import sys
import time

import numpy as np

import moeperm
from moeperm import _capi

import c_calls

DTYPES = {"bf16": np.uint16, "float16": np.float16, "float32": np.float32}
OPS = ("permute", "unpermute", "unpermute-grad")


def c_seconds(tool, op, tokens, top_k, hidden, dtype, reps):
    out = subprocess.run([tool, "bench", "--op", op, "--dtype", dtype, "--json", "-", "--reps",
                          str(reps), "--tokens", str(tokens), "--top-k", str(top_k), "--hidden",
                          str(hidden)], check=True, capture_output=True, text=True).stdout
    doc = json.loads(out)
    return doc["results"][0]["seconds_median"], doc["threads"]


def values(rng, shape, dtype):
    bits = rng.integers(0, 1 << 32, shape, dtype=np.uint32)
    v = ((bits & np.uint32(0x807FFFFF)) | np.uint32(0x3F000000)).view(np.float32)
    return moeperm.float32_to_bf16(v) if DTYPES[dtype] == np.uint16 else v.astype(DTYPES[dtype])


def arguments(op, tokens, top_k, hidden, dtype, seed=42):
    """Positional arguments of the operator's function: a routing over 64
    experts, finite random values."""
    rng = np.random.default_rng(seed)
    if op == "permute":
        ids = np.stack([rng.permutation(64)[:top_k] for _ in range(tokens)]).astype(np.int32)
        return (values(rng, (tokens, hidden), dtype), ids)
    sorted_indices = moeperm.route(rng.integers(0, 64, tokens * top_k, dtype=np.int32), 64)
    permuted = values(rng, (tokens * top_k, hidden), dtype)
    probs = values(rng, (tokens, top_k), dtype)
    if op == "unpermute":
        return (permuted, sorted_indices, probs)
    return (permuted, values(rng, (tokens, hidden), dtype), sorted_indices, probs)


def with_out(op, args):
    """The operator's function, a call of it into outputs made once (out=,
    the C bench's work), and the two C calls alone on those arrays, through
    ctypes with the tensors created once: the C API in this process."""
    fn = {"permute": moeperm.moe_token_permute, "unpermute": moeperm.moe_token_unpermute,
          "unpermute-grad": moeperm.moe_token_unpermute_grad}[op]
    out = fn(*args)  # also faults the outputs' pages in
    result = out if isinstance(out, tuple) else (out,)
    table = {"permute": _capi.TOKEN_PERMUTE, "unpermute": _capi.TOKEN_UNPERMUTE,
             "unpermute-grad": _capi.TOKEN_UNPERMUTE_GRAD}[op]
    tensors = [name for name, kind in table.params if kind in (
        _capi.ARG_TENSOR, _capi.ARG_OPT_TENSOR, _capi.ARG_OUT, _capi.ARG_OPT_OUT)]
    c_call = c_calls.two_phase(table, dict(zip(tensors, list(args) + list(result))))
    return c_call, (lambda: fn(*args, out=out)), fn


def turns(fns, reps):
    times = [[] for _ in fns]
    for r in range(reps):
        for j in range(len(fns)):
            i = (j + r) % len(fns)
            t0 = time.perf_counter()
            fns[i]()
            times[i].append(time.perf_counter() - t0)
    return [statistics.median(t) for t in times]


def per_call(fn, reps, calls=5000):
    times = []
    for _ in range(reps):
        t0 = time.perf_counter()
        for _ in range(calls):
            fn()
        times.append((time.perf_counter() - t0) / calls)
    return statistics.median(times)


def to_torch(a):
    import torch
    if a.dtype == np.uint16:
        return torch.from_numpy(a.view(np.int16)).view(torch.bfloat16)
    return torch.from_numpy(a)


def main():
    here = os.path.dirname(os.path.abspath(__file__))
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--moeperm", default=os.path.normpath(
        os.path.join(here, "..", "..", "build", "tools", "moeperm")))
    p.add_argument("--tokens", type=int, default=4096)
    p.add_argument("--top-k", type=int, default=8)
    p.add_argument("--hidden", type=int, default=4096)
    p.add_argument("--dtype", choices=sorted(DTYPES), default="bf16")
    p.add_argument("--reps", type=int, default=5)
    p.add_argument("--json", action="store_true", help="print one JSON object")
    a = p.parse_args()
    have_torch = importlib.util.find_spec("torch") is not None

    report = {"tokens": a.tokens, "top_k": a.top_k, "hidden": a.hidden, "dtype": a.dtype,
              "reps": a.reps, "ops": {}}
    for op in OPS:
        c_median, threads = c_seconds(a.moeperm, op, a.tokens, a.top_k, a.hidden, a.dtype, a.reps)
        args = arguments(op, a.tokens, a.top_k, a.hidden, a.dtype)
        c_call, call, fn = with_out(op, args)
        c_here, py_out, py_new = turns([c_call, call, lambda: fn(*args)], 3 * a.reps)
        args = call = c_call = None  # the next operator's arrays need the memory
        tiny_args = arguments(op, 1, 1, 1, a.dtype)
        tiny_c, _ = c_seconds(a.moeperm, op, 1, 1, 1, a.dtype, a.reps)
        tiny_numpy = per_call(lambda: fn(*tiny_args), a.reps)
        tiny_torch = None
        if have_torch:
            targs = tuple(to_torch(x) for x in tiny_args)
            tiny_torch = per_call(lambda: fn(*targs), a.reps)
        report["threads"] = threads
        report["ops"][op] = {
            "c_seconds_median": c_median, "c_in_process_seconds_median": c_here,
            "python_out_seconds_median": py_out, "python_new_seconds_median": py_new,
            "python_out_over_c_in_process": py_out / c_here - 1,
            "python_new_over_c_in_process": py_new / c_here - 1,
            "tiny_c_seconds": tiny_c, "tiny_numpy_seconds": tiny_numpy,
            "tiny_torch_seconds": tiny_torch}
    if a.json:
        print(json.dumps(report))
        return 0
    print("T=%d K=%d H=%d %s, %d threads, medians of %d"
          % (a.tokens, a.top_k, a.hidden, a.dtype, report["threads"], a.reps))
    print("%-15s %10s %10s %18s %18s   %s" % ("operator", "C bench", "C here", "Python, out=",
                                              "Python, new", "tiny: C / numpy / torch"))
    for op, r in report["ops"].items():
        tiny = "%.2f / %.1f / %s us" % (r["tiny_c_seconds"] * 1e6, r["tiny_numpy_seconds"] * 1e6,
                                        "%.1f" % (r["tiny_torch_seconds"] * 1e6)
                                        if r["tiny_torch_seconds"] else "-")
        print("%-15s %7.2f ms %7.2f ms %8.2f ms %+5.1f%% %8.2f ms %+5.1f%%   %s"
              % (op, r["c_seconds_median"] * 1e3, r["c_in_process_seconds_median"] * 1e3,
                 r["python_out_seconds_median"] * 1e3, 100 * r["python_out_over_c_in_process"],
                 r["python_new_seconds_median"] * 1e3, 100 * r["python_new_over_c_in_process"],
                 tiny))
    return 0


if __name__ == "__main__":
    sys.exit(main())

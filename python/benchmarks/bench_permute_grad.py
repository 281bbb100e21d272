#!/usr/bin/env python3
"""Times moe_token_permute_grad called from Python against the C API.

Two C figures: `moeperm bench --json -`'s operator median for the same shape
(the two-phase API called from C on the tool's own buffers, output reused),
and the same two calls made in this process on this script's arrays, with
tensors made once, timed in turns with the Python calls so that a busy
machine slows both alike.  The Python figures are medians of single calls of
moeperm.moe_token_permute_grad on numpy arrays: with out= (the C loop's
work) and without (a fresh result each call, whose new pages the kernel
must fault in and zero).  Then the per-call overhead on a tiny shape, where
the operator's own work is nothing, for numpy and torch.

usage: bench_permute_grad.py [--moeperm PATH] [--tokens T] [--top-k K]
                             [--hidden H] [--dtype bf16|float16|float32] [--reps N]

Run it where the package finds libmoeperm, e.g.
    meson devenv -C build python3 python/benchmarks/bench_permute_grad.py
"""
import argparse
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


def c_operator_seconds(tool, tokens, top_k, hidden, dtype, reps):
    out = subprocess.run([tool, "bench", "--dtype", dtype, "--json", "-", "--reps", str(reps),
                          "--tokens", str(tokens), "--top-k", str(top_k), "--hidden", str(hidden)],
                         check=True, capture_output=True, text=True).stdout
    result = json.loads(out)["results"][0]
    return result["seconds_median"], result["seconds_best"], json.loads(out)["threads"]


def inputs(tokens, top_k, hidden, dtype, seed=42):
    """The C bench's kind of data: a routing over 64 experts, random values."""
    rng = np.random.default_rng(seed)
    n = tokens * top_k
    sorted_indices = moeperm.route(rng.integers(0, 64, n, dtype=np.int32), 64)
    bits = rng.integers(0, 1 << 32, (n, hidden), dtype=np.uint32)
    # finite values: exponents near 1, random signs and mantissas
    bits = (bits & np.uint32(0x807FFFFF)) | np.uint32(0x3F000000)
    grad = bits.view(np.float32)
    if DTYPES[dtype] == np.uint16:
        grad = moeperm.float32_to_bf16(grad)
    else:
        grad = grad.astype(DTYPES[dtype])
    return grad, sorted_indices


def c_api(grad, idx, top_k, out):
    """A function making the two C calls `moeperm bench` times, through
    ctypes, on tensors created once."""
    return c_calls.two_phase(_capi.TOKEN_PERMUTE_GRAD, {
        "permuted_output_grad": grad, "sorted_indices": idx, "num_topk": top_k, "out": out})


def turns(fns, reps):
    """Medians and bests of single calls of each of fns, taken in turns."""
    times = [[] for _ in fns]
    for r in range(reps):
        for j in range(len(fns)):
            i = (j + r) % len(fns)
            t0 = time.perf_counter()
            fns[i]()
            times[i].append(time.perf_counter() - t0)
    return [(statistics.median(t), min(t)) for t in times]


def large_shape(tokens, top_k, hidden, dtype, reps):
    """(C in process, Python with out=, Python with a new result), each a
    (median, best) of single calls taken in turns."""
    grad, idx = inputs(tokens, top_k, hidden, dtype)
    out = moeperm.moe_token_permute_grad(grad, idx, top_k)  # also warms the pages
    return turns([
        c_api(grad, idx, top_k, out),
        lambda: moeperm.moe_token_permute_grad(grad, idx, top_k, out=out),
        lambda: moeperm.moe_token_permute_grad(grad, idx, top_k)], reps)


def samples(fn, reps, calls=1):
    times = []
    for _ in range(reps):
        t0 = time.perf_counter()
        for _ in range(calls):
            fn()
        times.append((time.perf_counter() - t0) / calls)
    return statistics.median(times), min(times)


def main():
    here = os.path.dirname(os.path.abspath(__file__))
    default_tool = os.path.join(here, "..", "..", "build", "tools", "moeperm")
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--moeperm", default=os.path.normpath(default_tool),
                   help="the moeperm command (default: build/tools/moeperm)")
    p.add_argument("--tokens", type=int, default=4096)
    p.add_argument("--top-k", type=int, default=8)
    p.add_argument("--hidden", type=int, default=4096)
    p.add_argument("--dtype", choices=sorted(DTYPES), default="bf16")
    p.add_argument("--reps", type=int, default=5)
    p.add_argument("--json", action="store_true", help="print one JSON object")
    a = p.parse_args()

    c_median, c_best, threads = c_operator_seconds(a.moeperm, a.tokens, a.top_k, a.hidden,
                                                   a.dtype, a.reps)
    in_process, py_out, py_new = large_shape(a.tokens, a.top_k, a.hidden, a.dtype, 3 * a.reps)

    # Tiny shape: what a call costs besides the operator.
    tiny_c, _, _ = c_operator_seconds(a.moeperm, 1, 1, 1, a.dtype, a.reps)
    g1, i1 = inputs(1, 1, 1, a.dtype)
    o1 = moeperm.moe_token_permute_grad(g1, i1, 1)
    calls = 20000
    tiny_out = samples(lambda: moeperm.moe_token_permute_grad(g1, i1, 1, out=o1), a.reps, calls)
    tiny_new = samples(lambda: moeperm.moe_token_permute_grad(g1, i1, 1), a.reps, calls)
    tiny_torch = None
    try:
        import torch
    except ImportError:
        pass
    else:
        tg = torch.from_numpy(g1.view(np.int16)).view(torch.bfloat16) \
            if g1.dtype == np.uint16 else torch.from_numpy(g1)
        ti = torch.from_numpy(i1)
        tiny_torch = samples(lambda: moeperm.moe_token_permute_grad(tg, ti, 1), a.reps, calls)

    report = {
        "tokens": a.tokens, "top_k": a.top_k, "hidden": a.hidden, "dtype": a.dtype,
        "reps": a.reps, "threads": threads,
        "c_seconds_median": c_median, "c_seconds_best": c_best,
        "c_in_process_seconds_median": in_process[0], "c_in_process_seconds_best": in_process[1],
        "python_out_seconds_median": py_out[0], "python_out_seconds_best": py_out[1],
        "python_new_seconds_median": py_new[0], "python_new_seconds_best": py_new[1],
        "python_out_over_c": py_out[0] / c_median - 1,
        "python_new_over_c": py_new[0] / c_median - 1,
        "python_out_over_c_in_process": py_out[0] / in_process[0] - 1,
        "python_new_over_c_in_process": py_new[0] / in_process[0] - 1,
        "python_out_over_c_in_process_best": py_out[1] / in_process[1] - 1,
        "python_new_over_c_in_process_best": py_new[1] / in_process[1] - 1,
        "tiny_c_seconds": tiny_c,
        "tiny_python_out_seconds": tiny_out[0], "tiny_python_new_seconds": tiny_new[0],
        "tiny_python_torch_seconds": tiny_torch[0] if tiny_torch else None,
    }
    if a.json:
        print(json.dumps(report))
        return 0
    print("moe_token_permute_grad T=%d K=%d H=%d %s, %d threads, median (best)"
          % (a.tokens, a.top_k, a.hidden, a.dtype, threads))
    print("                             time                 over C here (median / best)")
    print("  C API (moeperm bench)      %9.3f ms (%.3f)" % (c_median * 1e3, c_best * 1e3))
    print("  C API, in turns here       %9.3f ms (%.3f)" % (in_process[0] * 1e3,
                                                           in_process[1] * 1e3))
    for label, t in (("out= reused", py_out), ("new result ", py_new)):
        print("  Python, %s        %9.3f ms (%.3f)  %+6.1f%% / %+6.1f%%"
              % (label, t[0] * 1e3, t[1] * 1e3, 100 * (t[0] / in_process[0] - 1),
                 100 * (t[1] / in_process[1] - 1)))
    print("per call on T=1 K=1 H=1 %s" % a.dtype)
    print("  C API (moeperm bench)      %9.2f us" % (tiny_c * 1e6))
    print("  Python numpy, out= reused  %9.2f us  (+%.2f us)"
          % (tiny_out[0] * 1e6, (tiny_out[0] - tiny_c) * 1e6))
    print("  Python numpy, new result   %9.2f us  (+%.2f us)"
          % (tiny_new[0] * 1e6, (tiny_new[0] - tiny_c) * 1e6))
    if tiny_torch:
        print("  Python torch, new result   %9.2f us  (+%.2f us)"
              % (tiny_torch[0] * 1e6, (tiny_torch[0] - tiny_c) * 1e6))
    return 0


if __name__ == "__main__":
    sys.exit(main())

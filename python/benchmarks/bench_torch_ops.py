#!/usr/bin/env python3
"""Times the torch operators torch.ops.moeperm.* with out= against the C API,
in the same process, in turns.

For each of the four operators: the two C calls (get_workspace_size and the
run) through ctypes on tensor descriptors made once over the very tensors
the operator reads and writes, and the torch operator's .out overload called
as a user would (torch.ops.moeperm.npu_moe_token_permute_grad_v2(...,
out=out), ...), which goes through torch's dispatcher, the Python CPU
kernel, the package's argument checks and the same two C calls.  The two
are timed call by call, alternating which goes first, so that a busy
machine slows both alike.  Reported per operator: the medians and their
ratio, the ratio of the best calls (least disturbed by other work on the
machine), and the spread of the ratio of the two calls of each turn (10th
to 90th percentile); with --runs N, the ratios of each run, so that the
range over runs shows.  Then what one call costs beside the operator, on a
shape where the operator does nothing.  On a shared machine, OMP_NUM_THREADS=1
makes both sides steadier (a parallel region waits for its slowest thread).

usage: bench_torch_ops.py [--tokens T] [--top-k K] [--hidden H]
                          [--dtype bf16|float16|float32] [--reps N] [--runs N] [--json]

    meson devenv -C build python3 python/benchmarks/bench_torch_ops.py
"""
import argparse
import json
import statistics
import sys
import time

import torch

import moeperm
import moeperm.torch  # noqa: F401  (registers torch.ops.moeperm)
from moeperm import _capi

import c_calls

DTYPES = {"bf16": torch.bfloat16, "float16": torch.float16, "float32": torch.float32}
ops = torch.ops.moeperm


def values(gen, shape, dtype):
    """Finite values: exponents near 1, random signs and mantissas."""
    return (torch.rand(shape, generator=gen) + 0.5).mul_(
        torch.randint(0, 2, shape, generator=gen) * 2 - 1).to(dtype)


def c_call(op, tensors, scalars):
    """The two C calls of ``op`` on descriptors made once over ``tensors``
    (by parameter name); ``scalars`` the other values."""
    return c_calls.two_phase(op, dict(tensors, **scalars))


def cases(tokens, top_k, hidden, dtype):
    """(name, C call, torch operator call) for each operator, on inputs made
    once and outputs made once (their pages faulted in by a first call)."""
    gen = torch.Generator().manual_seed(42)
    n = tokens * top_k
    ids = torch.stack([torch.randperm(64, generator=gen)[:top_k] for _ in range(tokens)]).int()
    x = values(gen, (tokens, hidden), dtype)
    permuted, sorted_indices = ops.npu_moe_token_permute(x, ids)
    probs = values(gen, (tokens, top_k), dtype)
    g = values(gen, (tokens, hidden), dtype)
    grad_permuted = values(gen, (n, hidden), dtype)

    p_out, s_out = torch.empty_like(permuted), torch.empty_like(sorted_indices)
    pg_out = ops.npu_moe_token_permute_grad_v2(grad_permuted, sorted_indices, tokens, dtype,
                                               top_k)
    u_out = ops.npu_moe_token_unpermute(permuted, sorted_indices, probs)
    ug_out = ops.npu_moe_token_unpermute_grad_v2(g, sorted_indices, n, dtype, probs,
                                                 permuted_tokens=permuted)
    yield ("npu_moe_token_permute",
           c_call(_capi.TOKEN_PERMUTE, {"tokens": x, "indices": ids, "permute_tokens_out": p_out,
                                        "sorted_indices_out": s_out}, {"num_out_tokens": n}),
           lambda: ops.npu_moe_token_permute(x, ids, permute_tokens_out=p_out,
                                             sorted_indices_out=s_out))
    yield ("npu_moe_token_permute_grad_v2",
           c_call(_capi.TOKEN_PERMUTE_GRAD, {"permuted_output_grad": grad_permuted,
                                             "sorted_indices": sorted_indices, "out": pg_out},
                  {"num_topk": top_k}),
           lambda: ops.npu_moe_token_permute_grad_v2(grad_permuted, sorted_indices, tokens,
                                                     dtype, top_k, out=pg_out))
    yield ("npu_moe_token_unpermute",
           c_call(_capi.TOKEN_UNPERMUTE, {"permuted_tokens": permuted,
                                          "sorted_indices": sorted_indices, "probs": probs,
                                          "out": u_out}, {}),
           lambda: ops.npu_moe_token_unpermute(permuted, sorted_indices, probs, out=u_out))
    yield ("npu_moe_token_unpermute_grad_v2",
           c_call(_capi.TOKEN_UNPERMUTE_GRAD, {
               "permuted_tokens": permuted, "unpermuted_tokens_grad": g,
               "sorted_indices": sorted_indices, "probs": probs,
               "permuted_tokens_grad_out": ug_out[0], "probs_grad_out": ug_out[1]}, {}),
           lambda: ops.npu_moe_token_unpermute_grad_v2(
               g, sorted_indices, n, dtype, probs, permuted_tokens=permuted,
               permuted_tokens_grad_out=ug_out[0], probs_grad_out=ug_out[1]))


def in_turns(c, t, reps):
    """Per-call seconds of c and t, alternating which goes first."""
    c_times, t_times = [], []
    for r in range(reps):
        for fn, times in ((c, c_times), (t, t_times))[::1 if r % 2 else -1]:
            t0 = time.perf_counter()
            fn()
            times.append(time.perf_counter() - t0)
    return c_times, t_times


def percentile(values, q):
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


def tiny_overheads(dtype, reps=5, calls=3000):
    """{operator: (C seconds, torch.ops seconds)} per call on T=K=H=1,
    where the operator does nothing: what the dispatcher, the kernel and
    the checks cost beside the C calls."""
    result = {}
    for name, c, t in cases(1, 1, 1, dtype):
        medians = []
        for fn in (c, t):
            samples = []
            for _ in range(reps):
                t0 = time.perf_counter()
                for _ in range(calls):
                    fn()
                samples.append((time.perf_counter() - t0) / calls)
            medians.append(statistics.median(samples))
        result[name] = tuple(medians)
    return result


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--tokens", type=int, default=4096)
    p.add_argument("--top-k", type=int, default=8)
    p.add_argument("--hidden", type=int, default=4096)
    p.add_argument("--dtype", choices=sorted(DTYPES), default="bf16")
    p.add_argument("--reps", type=int, default=21)
    p.add_argument("--runs", type=int, default=3)
    p.add_argument("--json", action="store_true", help="print one JSON object")
    a = p.parse_args()
    dtype = DTYPES[a.dtype]
    report = {"tokens": a.tokens, "top_k": a.top_k, "hidden": a.hidden, "dtype": a.dtype,
              "reps": a.reps, "runs": a.runs, "torch": torch.__version__,
              "libmoeperm": moeperm.version(), "operators": {}}
    tiny = tiny_overheads(dtype)
    report["tiny"] = tiny
    for name, c, t in cases(a.tokens, a.top_k, a.hidden, dtype):
        c(), t()  # warm: pages, caches, the dispatcher's first call
        runs = []
        for _ in range(a.runs):
            c_times, t_times = in_turns(c, t, a.reps)
            pairs = [ti / ci for ci, ti in zip(c_times, t_times)]
            runs.append({"c_median": statistics.median(c_times),
                         "torch_median": statistics.median(t_times),
                         "ratio_of_medians": statistics.median(t_times) /
                         statistics.median(c_times),
                         "c_best": min(c_times), "torch_best": min(t_times),
                         "ratio_of_bests": min(t_times) / min(c_times),
                         "pair_ratio_median": statistics.median(pairs),
                         "pair_ratio_p10": percentile(pairs, 0.1),
                         "pair_ratio_p90": percentile(pairs, 0.9)})
        report["operators"][name] = runs
        if not a.json:
            ratios = [r["ratio_of_medians"] for r in runs]
            bests = [r["ratio_of_bests"] for r in runs]
            c_median = statistics.median(r["c_median"] for r in runs)
            extra = tiny[name][1] - tiny[name][0]
            paired = [r["pair_ratio_median"] for r in runs]
            print("%s (T=%d K=%d H=%d %s)\n"
                  "  C %.2f ms, torch.ops out= %.2f ms; ratio of medians %.3f (runs %.3f..%.3f), "
                  "of bests %.3f..%.3f\n"
                  "  turn by turn: median ratio %.3f..%.3f over runs, p10..p90 %.2f..%.2f\n"
                  "  beside the operator (T=K=H=1): %.1f us per call, %.4f of the C median"
                  % (name, a.tokens, a.top_k, a.hidden, a.dtype, 1e3 * c_median,
                     1e3 * statistics.median(r["torch_median"] for r in runs),
                     statistics.median(ratios), min(ratios), max(ratios), min(bests),
                     max(bests), min(paired), max(paired),
                     min(r["pair_ratio_p10"] for r in runs),
                     max(r["pair_ratio_p90"] for r in runs), 1e6 * extra, extra / c_median),
                  flush=True)
    if a.json:
        print(json.dumps(report))
    return 0


if __name__ == "__main__":
    sys.exit(main())

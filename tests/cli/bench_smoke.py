#!/usr/bin/env python3
"""One-iteration smoke run of `moeperm bench --op all --json` on a tiny
shape, on the default path and with MOEPERM_FORCE_PORTABLE=1: it exits 0
and prints JSON with one row per operator and dtype, each with every field
docs/performance.md reads, the bytes the operator moves counted from its
tensors here, and positive timings whose rates and ratios agree with
them.  It says nothing about speed.  Bad usage and a shape too large to
address exit 2."""
import json
import os
import subprocess
import sys

OPS = ("MoeTokenPermuteGrad", "MoeTokenPermute", "MoeTokenUnpermute", "MoeTokenUnpermuteGrad")
DTYPES = ("bf16", "float16", "float32")
SIZE = {"bf16": 2, "float16": 2, "float32": 4}
TOKENS, TOP_K, HIDDEN = 16, 4, 77

POSITIVE = ("bytes", "seconds_median", "seconds_best", "gbps_median", "gbps_best",
            "memcpy_bytes", "memcpy_gbps_median", "memcpy_gbps_best", "ratio_memcpy",
            "copy_gbps_median", "copy_gbps_best", "ratio_copy",
            "read_gbps_median", "read_gbps_best", "ratio_read", "calls_per_sample")


def moved_bytes(op, dtype):
    """Every element the operator reads or writes, from its tensors'
    shapes: T tokens, K experts each, H columns, S = T*K slots (none
    dropped), int32 indices, probs in the tokens' dtype."""
    e, t, k, h = SIZE[dtype], TOKENS, TOP_K, HIDDEN
    s = t * k
    if op == "MoeTokenPermuteGrad":  # permuted_output_grad, sorted_indices -> input_grad
        return s * h * e + s * 4 + t * h * e
    if op == "MoeTokenPermute":  # tokens, indices -> permuted_tokens, sorted_indices
        return t * h * e + s * 4 + s * h * e + s * 4
    if op == "MoeTokenUnpermute":  # permuted_tokens, sorted_indices, probs -> unpermuted_tokens
        return s * h * e + s * 4 + s * e + t * h * e
    # permuted_tokens, unpermuted_tokens_grad, sorted_indices, probs
    #   -> permuted_tokens_grad, probs_grad
    return s * h * e + t * h * e + s * 4 + s * e + s * h * e + s * e


def close(a, b, what, row):
    # The JSON rounds rates and ratios to a few digits.
    if abs(a - b) > 2e-3 * max(abs(a), abs(b)) + 1e-4:
        sys.exit(f"{row}: {what} is {a}, expected {b}")


def check_report(moeperm, env, label):
    cmd = [moeperm, "bench", "--op", "all", "--tokens", str(TOKENS), "--topk", str(TOP_K),
           "--hidden", str(HIDDEN), "--dtype", "all", "--reps", "1", "--threads", "2", "--json"]
    run = subprocess.run(cmd, capture_output=True, text=True, timeout=120, env=env)
    if run.returncode != 0:
        sys.exit(f"{label}: {' '.join(cmd)} exited {run.returncode}: {run.stderr}")
    report = json.loads(run.stdout)
    want = {"tool": "moeperm bench", "threads": 2, "tokens": TOKENS, "top_k": TOP_K,
            "hidden_size": HIDDEN, "reps": 1}
    for key, value in want.items():
        if report.get(key) != value:
            sys.exit(f"{label}: {key} is {report.get(key)!r}, expected {value!r}")
    if not report.get("version"):
        sys.exit(f"{label}: no version in {run.stdout}")
    rows = [(r.get("op"), r.get("dtype")) for r in report["results"]]
    expected = [(op, dtype) for op in OPS for dtype in DTYPES]
    if rows != expected:
        sys.exit(f"{label}: rows {rows}, expected {expected}")
    for r in report["results"]:
        row = f"{label}: {r['op']} {r['dtype']}"
        missing = [key for key in POSITIVE if key not in r]
        if missing:
            sys.exit(f"{row}: fields {missing} missing")
        if not all(r[key] > 0 for key in POSITIVE):
            sys.exit(f"{row}: non-positive values in {r}")
        if r["bytes"] != moved_bytes(r["op"], r["dtype"]):
            sys.exit(f"{row}: bytes is {r['bytes']}, the tensors hold "
                     f"{moved_bytes(r['op'], r['dtype'])}")
        if r["seconds_best"] > r["seconds_median"]:
            sys.exit(f"{row}: the best time is above the median")
        close(r["gbps_median"], r["bytes"] / r["seconds_median"] * 1e-9, "gbps_median", row)
        for yardstick in ("memcpy", "copy", "read"):
            close(r[f"ratio_{yardstick}"], r["gbps_median"] / r[f"{yardstick}_gbps_median"],
                  f"ratio_{yardstick}", row)


def main():
    moeperm = sys.argv[1]
    env = dict(os.environ)
    env.pop("MOEPERM_FORCE_PORTABLE", None)
    check_report(moeperm, env, "default path")
    check_report(moeperm, dict(env, MOEPERM_FORCE_PORTABLE="1"), "MOEPERM_FORCE_PORTABLE=1")

    bad = subprocess.run([moeperm, "bench", "--dtype", "int8"], capture_output=True, text=True)
    if bad.returncode != 2 or "--dtype is \"int8\"" not in bad.stderr:
        sys.exit(f"bench --dtype int8 exited {bad.returncode} ({bad.stderr.strip()}), "
                 "expected 2 (bad usage) naming the dtype")
    bad = subprocess.run([moeperm, "bench", "--op", "MoeTokenSort"], capture_output=True,
                         text=True)
    if bad.returncode != 2 or "MoeTokenSort" not in bad.stderr:
        sys.exit(f"bench --op MoeTokenSort exited {bad.returncode} ({bad.stderr.strip()}), "
                 "expected 2 (bad usage) naming the operator")
    # T*K*H*4 bytes past 2^63: refused before any allocation, naming the shape
    # (it used to overflow int64 and report a negative size as out of memory),
    # for every operator.
    for op in OPS:
        huge = [moeperm, "bench", "--op", op, "--tokens", "4194303", "--topk", "512",
                "--hidden", "2147483647", "--dtype", "float32", "--reps", "1"]
        bad = subprocess.run(huge, capture_output=True, text=True, timeout=60)
        if bad.returncode != 2 or "too large to address" not in bad.stderr:
            sys.exit(f"{' '.join(huge)} exited {bad.returncode} ({bad.stderr.strip()}), "
                     "expected 2 and 'too large to address'")


if __name__ == "__main__":
    main()

#!/usr/bin/env python3
"""One-iteration smoke run of `moeperm bench --op all --json -` on a tiny
shape, on the default path and with MOEPERM_FORCE_PORTABLE=1: it exits 0
and prints JSON with one row per operator and dtype (and, for the
operators with probs, one of bf16 tokens with float32 probs), each with
every field docs/performance.md reads, the bytes the operator moves
counted from its tensors here, and positive timings whose rates and
ratios agree with them; `--json FILE` writes the same document to FILE and
the table to standard output.  It says nothing about speed.  Bad usage and
a shape too large to address exit 2."""
import json
import os
import subprocess
import sys
import tempfile

OPS = ("MoeTokenPermuteGrad", "MoeTokenPermute", "MoeTokenUnpermute", "MoeTokenUnpermuteGrad")
DTYPES = ("bf16", "float16", "float32")
SIZE = {"bf16": 2, "float16": 2, "float32": 4}
TOKENS, TOP_K, HIDDEN = 16, 4, 77

POSITIVE = ("bytes", "seconds_median", "seconds_best", "gbps_median", "gbps_best",
            "memcpy_bytes", "memcpy_gbps_median", "memcpy_gbps_best", "ratio_memcpy",
            "copy_gbps_median", "copy_gbps_best", "ratio_copy",
            "read_gbps_median", "read_gbps_best", "ratio_read",
            "portable_seconds_median", "portable_seconds_best", "portable_gbps_median",
            "portable_gbps_best", "ratio_portable", "calls_per_sample")
PROBS_OPS = ("MoeTokenUnpermute", "MoeTokenUnpermuteGrad")


def expected_rows():
    rows = []
    for op in OPS:
        rows += [(op, dtype, dtype if op in PROBS_OPS else None) for dtype in DTYPES]
        if op in PROBS_OPS:
            rows.append((op, "bf16", "float32"))
    return rows


def moved_bytes(op, dtype, probs_dtype):
    """Every element the operator reads or writes, from its tensors'
    shapes: T tokens, K experts each, H columns, S = T*K slots (none
    dropped), int32 indices, probs in their own dtype."""
    e, t, k, h = SIZE[dtype], TOKENS, TOP_K, HIDDEN
    s = t * k
    p = SIZE[probs_dtype] if probs_dtype else 0
    if op == "MoeTokenPermuteGrad":  # permuted_output_grad, sorted_indices -> input_grad
        return s * h * e + s * 4 + t * h * e
    if op == "MoeTokenPermute":  # tokens, indices -> permuted_tokens, sorted_indices
        return t * h * e + s * 4 + s * h * e + s * 4
    if op == "MoeTokenUnpermute":  # permuted_tokens, sorted_indices, probs -> unpermuted_tokens
        return s * h * e + s * 4 + s * p + t * h * e
    # permuted_tokens, unpermuted_tokens_grad, sorted_indices, probs
    #   -> permuted_tokens_grad, probs_grad
    return s * h * e + t * h * e + s * 4 + s * p + s * h * e + s * p


def close(a, b, what, row):
    # The JSON rounds rates and ratios to a few digits.
    if abs(a - b) > 2e-3 * max(abs(a), abs(b)) + 1e-4:
        sys.exit(f"{row}: {what} is {a}, expected {b}")


def check_report(moeperm, env, label, json_file=None):
    cmd = [moeperm, "bench", "--op", "all", "--tokens", str(TOKENS), "--top-k", str(TOP_K),
           "--hidden", str(HIDDEN), "--dtype", "all", "--reps", "1", "--threads", "2",
           "--json", json_file or "-"]
    run = subprocess.run(cmd, capture_output=True, text=True, timeout=120, env=env)
    if run.returncode != 0:
        sys.exit(f"{label}: {' '.join(cmd)} exited {run.returncode}: {run.stderr}")
    # The table goes to standard error when the JSON takes standard output.
    table = run.stdout if json_file else run.stderr
    if "operator GB/s" not in table or "MoeTokenUnpermuteGrad  bf16/float32" not in table:
        sys.exit(f"{label}: no table with the mixed row on "
                 f"{'stdout' if json_file else 'stderr'}: {table!r}")
    if json_file:
        with open(json_file) as f:
            report = json.load(f)
    else:
        report = json.loads(run.stdout)
    isa = "portable" if env.get("MOEPERM_FORCE_PORTABLE") == "1" else None
    # The threads asked for (2), or 1 where the build has no OpenMP.
    threads = int(os.environ.get("MOEPERM_TEST_THREADS", "2"))
    want = {"tool": "moeperm bench", "threads": threads, "tokens": TOKENS, "top_k": TOP_K,
            "hidden_size": HIDDEN, "reps": 1, "values": "normal"}
    for key, value in want.items():
        if report.get(key) != value:
            sys.exit(f"{label}: {key} is {report.get(key)!r}, expected {value!r}")
    if not report.get("version"):
        sys.exit(f"{label}: no version in {run.stdout}")
    if report.get("isa") not in ("portable", "x86-avx2", "x86-avx512") or \
            (isa and report["isa"] != isa):
        sys.exit(f"{label}: isa is {report.get('isa')!r}")
    rows = [(r.get("op"), r.get("dtype"), r.get("probs_dtype")) for r in report["results"]]
    if rows != expected_rows():
        sys.exit(f"{label}: rows {rows}, expected {expected_rows()}")
    for r in report["results"]:
        row = f"{label}: {r['op']} {r['dtype']}"
        missing = [key for key in POSITIVE if key not in r]
        if missing:
            sys.exit(f"{row}: fields {missing} missing")
        if not all(r[key] > 0 for key in POSITIVE):
            sys.exit(f"{row}: non-positive values in {r}")
        moved = moved_bytes(r["op"], r["dtype"], r.get("probs_dtype"))
        if r["bytes"] != moved:
            sys.exit(f"{row}: bytes is {r['bytes']}, the tensors hold {moved}")
        if r["seconds_best"] > r["seconds_median"]:
            sys.exit(f"{row}: the best time is above the median")
        if r["portable_seconds_best"] > r["portable_seconds_median"]:
            sys.exit(f"{row}: the portable loop's best time is above its median")
        close(r["gbps_median"], r["bytes"] / r["seconds_median"] * 1e-9, "gbps_median", row)
        close(r["portable_gbps_median"], r["bytes"] / r["portable_seconds_median"] * 1e-9,
              "portable_gbps_median", row)
        for yardstick in ("memcpy", "copy", "read", "portable"):
            close(r[f"ratio_{yardstick}"], r["gbps_median"] / r[f"{yardstick}_gbps_median"],
                  f"ratio_{yardstick}", row)


def main():
    moeperm = sys.argv[1]
    env = dict(os.environ)
    env.pop("MOEPERM_FORCE_PORTABLE", None)
    check_report(moeperm, env, "default path")
    check_report(moeperm, dict(env, MOEPERM_FORCE_PORTABLE="1"), "MOEPERM_FORCE_PORTABLE=1")
    with tempfile.TemporaryDirectory() as work:
        check_report(moeperm, env, "--json FILE", os.path.join(work, "bench.json"))

    bad = subprocess.run([moeperm, "bench", "--json"], capture_output=True, text=True)
    if bad.returncode != 2 or "--json" not in bad.stderr:
        sys.exit(f"bench --json without a file exited {bad.returncode} "
                 f"({bad.stderr.strip()}), expected 2 (bad usage)")
    bad = subprocess.run([moeperm, "bench", "--values", "gaussian"], capture_output=True,
                         text=True)
    if bad.returncode != 2 or "--values is \"gaussian\"" not in bad.stderr:
        sys.exit(f"bench --values gaussian exited {bad.returncode} ({bad.stderr.strip()}), "
                 "expected 2 (bad usage) naming the kind")

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
        huge = [moeperm, "bench", "--op", op, "--tokens", "4194303", "--top-k", "512",
                "--hidden", "2147483647", "--dtype", "float32", "--reps", "1"]
        bad = subprocess.run(huge, capture_output=True, text=True, timeout=60)
        if bad.returncode != 2 or "too large to address" not in bad.stderr:
            sys.exit(f"{' '.join(huge)} exited {bad.returncode} ({bad.stderr.strip()}), "
                     "expected 2 and 'too large to address'")


if __name__ == "__main__":
    main()

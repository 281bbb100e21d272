#!/usr/bin/env python3
"""One-iteration smoke run of `moeperm bench --json`: it runs, exits 0,
prints JSON with every field docs/performance.md reads, and the fast path
gave the portable loop's bits.  It says nothing about speed."""
import json
import subprocess
import sys

REQUIRED = ("dtype", "bytes", "seconds_median", "seconds_best", "gbps_median", "gbps_best",
            "memcpy_bytes", "memcpy_gbps_median", "memcpy_gbps_best", "ratio_memcpy",
            "copy_gbps_median", "copy_gbps_best", "ratio_copy",
            "read_gbps_median", "read_gbps_best", "ratio_read",
            "loop_seconds_median", "speedup_vs_loop", "kernel_threads", "bits_match_portable")


def main():
    moeperm = sys.argv[1]
    cmd = [moeperm, "bench", "--tokens", "16", "--topk", "4", "--hidden", "77",
           "--dtype", "all", "--reps", "1", "--threads", "2", "--json"]
    run = subprocess.run(cmd, capture_output=True, text=True, timeout=120)
    if run.returncode != 0:
        sys.exit(f"{' '.join(cmd)} exited {run.returncode}: {run.stderr}")
    report = json.loads(run.stdout)
    for key in ("tool", "version", "path", "threads", "tokens", "topk", "hidden", "reps"):
        if key not in report:
            sys.exit(f"field {key} missing from {run.stdout}")
    dtypes = [r.get("dtype") for r in report["results"]]
    if dtypes != ["bf16", "float16", "float32"]:
        sys.exit(f"results cover {dtypes}, expected bf16, float16, float32")
    for result in report["results"]:
        missing = [key for key in REQUIRED if key not in result]
        if missing:
            sys.exit(f"{result.get('dtype')}: fields {missing} missing")
        if result["bits_match_portable"] is not True:
            sys.exit(f"{result['dtype']}: the fast path's bits differ from the portable loop's")
        if not all(result[key] > 0 for key in ("seconds_median", "memcpy_gbps_median",
                                                "copy_gbps_median", "read_gbps_median")):
            sys.exit(f"{result['dtype']}: non-positive timings in {result}")
    bad = subprocess.run([moeperm, "bench", "--dtype", "int8"], capture_output=True, text=True)
    if bad.returncode != 2:
        sys.exit(f"bench --dtype int8 exited {bad.returncode}, expected 2 (bad usage)")
    # T*K*H*4 bytes past 2^63: refused before any allocation, naming the shape
    # (it used to overflow int64 and report a negative size as out of memory).
    huge = [moeperm, "bench", "--tokens", "4194303", "--topk", "512", "--hidden", "2147483647",
            "--dtype", "float32", "--reps", "1"]
    bad = subprocess.run(huge, capture_output=True, text=True, timeout=60)
    if bad.returncode != 2 or "too large to address" not in bad.stderr:
        sys.exit(f"{' '.join(huge)} exited {bad.returncode} ({bad.stderr.strip()}), expected 2 "
                 "and 'too large to address'")


if __name__ == "__main__":
    main()

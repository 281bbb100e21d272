#!/usr/bin/env python3
"""The judge from the command line, as a harness uses it: outputs written
elsewhere (raw and .npy) judged by `check --outputs`, the JSON report
against the text report, planted bugs named by their diagnosis id, a
missing output, --max-ulp, --shard covering the corpus exactly once, and
`make-case` from a user's own tensors.

usage: judge_cli.py MOEPERM            (exit 77, "skipped", without numpy)
"""
import json
import os
import shutil
import subprocess
import sys
import tempfile

try:
    import numpy as np
except ImportError:
    print("numpy is not available: skipped")
    sys.exit(77)

moeperm = sys.argv[1]
tmp = tempfile.mkdtemp(prefix="judge_cli.")
failures = 0


def run(*args, expect=None):
    p = subprocess.run([moeperm, *args], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                       universal_newlines=True)
    if expect is not None and p.returncode != expect:
        fail("moeperm %s: exit %d, expected %d\n%s%s"
             % (" ".join(args), p.returncode, expect, p.stdout[-3000:], p.stderr[-3000:]))
    return p


def fail(what):
    global failures
    failures += 1
    print("FAIL " + what)


def ok(what):
    print("ok   " + what)


def case(op, name, *extra):
    run("golden", "--out", os.path.join(tmp, "corpus"), "--op", op, "--tokens", "64",
        "--top-k", "4", "--hidden", "40", "--dtype", "bf16", "--name", name, *extra, expect=0)
    return os.path.join(tmp, "corpus", name)


def outputs_of(case_dir):
    with open(os.path.join(case_dir, "case.json")) as f:
        m = json.load(f)
    return {k: v for k, v in m["tensors"].items() if v["role"] == "output"}, m


def load(case_dir, name, entry):
    dtype = {"bf16": "<u2", "float16": "<u2", "float32": "<u4", "int32": "<i4", "int8": "<i1"}
    return np.fromfile(os.path.join(case_dir, entry["file"]),
                       dtype=dtype[entry["dtype"]]).reshape(entry["shape"])


# A corpus of every operator, and an outputs tree mirroring it: correct
# outputs (half raw, half .npy), and planted bugs.
cases = {
    "pg": case("MoeTokenPermuteGrad", "pg"),
    "pg-shift": case("MoeTokenPermuteGrad", "pg-shift", "--seed", "2"),
    "pg-unwritten": case("MoeTokenPermuteGrad", "pg-unwritten", "--seed", "3"),
    "pg-missing": case("MoeTokenPermuteGrad", "pg-missing", "--seed", "4"),
    "permute": case("MoeTokenPermute", "permute"),
    "unpermute": case("MoeTokenUnpermute", "unpermute"),
    "unpermute-grad": case("MoeTokenUnpermuteGrad", "unpermute-grad"),
}
out_root = os.path.join(tmp, "outputs")
for i, (key, c) in enumerate(sorted(cases.items())):
    outs, _ = outputs_of(c)
    target = os.path.join(out_root, key)
    os.makedirs(target)
    for name, entry in outs.items():
        a = load(c, name, entry).copy()
        if key == "pg-shift":      # tokens 32-63 hold tokens 0-31
            a[32:64] = a[0:32]
        if key == "pg-unwritten":  # tokens 40-63 never written
            a[40:64] = 0
        if key == "pg-missing":
            continue
        if i % 2:
            np.save(os.path.join(target, name + ".npy"), a)
        else:
            a.tofile(os.path.join(target, name + ".bin"))

report = os.path.join(tmp, "report.json")
p = run("check", os.path.join(tmp, "corpus"), "--outputs", out_root, "--json", report, expect=1)
doc = json.load(open(report))
by_case = {os.path.basename(c["case"]): c for c in doc["cases"]}
if len(doc["cases"]) == len(cases) == doc["summary"]["cases"]:
    ok("every case of the corpus is in the JSON report")
else:
    fail("the JSON report has %d cases, expected %d" % (len(doc["cases"]), len(cases)))
for key in ("pg", "permute", "unpermute", "unpermute-grad"):
    if by_case[key]["verdict"] == "same":
        ok("%s: correct outputs judged same" % key)
    else:
        fail("%s: verdict %s" % (key, by_case[key]["verdict"]))
for key, bug in (("pg-shift", "token-block-shift"), ("pg-unwritten", "unwritten")):
    ids = [d["id"] for d in by_case[key]["outputs"]["input_grad"]["diagnosis"]]
    if by_case[key]["verdict"] == "different" and bug in ids:
        ok("%s: named %s" % (key, bug))
    else:
        fail("%s: verdict %s, diagnosis %s, expected %s"
             % (key, by_case[key]["verdict"], ids, bug))
if by_case["pg-missing"]["verdict"] == "error" and "MISSING" in p.stdout:
    ok("a missing output file fails its case, never a skip")
else:
    fail("the missing output: verdict %s" % by_case["pg-missing"]["verdict"])
text_lines = [l for l in p.stdout.splitlines() if l.split(" ")[0] in
              ("pass", "MISMATCH", "MISSING", "BAD-INPUT", "WITHIN")]
summary = doc["summary"]
counted = {"pass": summary["same"], "MISMATCH": summary["different"],
           "MISSING": summary["error"], "WITHIN": summary["within_tolerance"]}
for word, n in counted.items():
    if sum(1 for l in text_lines if l.startswith(word)) != n:
        fail("the text report has %d %s lines, the JSON %d"
             % (sum(1 for l in text_lines if l.startswith(word)), word, n))
        break
else:
    ok("the JSON summary counts what the text report prints")
element = by_case["pg-shift"]["outputs"]["input_grad"]
if element["differ"] > 0 and element["first"] and "stats" in element and \
        element["stats"]["cosine"] is not None:
    ok("differing elements carry bits and statistics")
else:
    fail("the differing output lacks first elements or statistics: %s" % element)

# --max-ulp: one element one ulp off is within 1 ulp, exit 0, and not same.
c = cases["pg"]
outs, _ = outputs_of(c)
a = load(c, "input_grad", outs["input_grad"]).copy()
a[0, 0] = a[0, 0] + 1 if a[0, 0] not in (0x7f7f, 0xff7f, 0x7f80, 0xff80) else a[0, 0]
near = os.path.join(tmp, "near.bin")
a.tofile(near)
p = run("compare", c, near, "--max-ulp", "1", expect=0)
if "WITHIN TOLERANCE" in p.stdout and "within 1 ulp, not bit-exact" in p.stdout:
    ok("--max-ulp 1 accepts one ulp and says it is not bit-exact")
else:
    fail("--max-ulp 1: %s" % p.stdout)
run("compare", c, near, expect=1)
ok("without --max-ulp the same file is a mismatch")
p = run("compare", c, near, "--json", "-", expect=1)
if json.loads(p.stdout)["cases"][0]["verdict"] == "different":
    ok("compare --json - writes the document to standard output")

# A raw file that is really .npy gets the hint.
np.save(os.path.join(tmp, "wrong.npy"), load(c, "input_grad", outs["input_grad"]))
shutil.copy(os.path.join(tmp, "wrong.npy"), os.path.join(tmp, "wrong.bin"))
p = run("compare", c, os.path.join(tmp, "wrong.bin"), expect=2)
if "name it .npy" in p.stderr:
    ok("a raw file with a numpy header is refused with the hint")
else:
    fail("no .npy hint: %s" % p.stderr)

# --shard: every case in exactly one shard, by the documented hash.
corpus = os.path.join(tmp, "corpus")
seen = []
for i in range(1, 4):
    p = run("check", corpus, "--shard", "%d/3" % i)
    got = sorted(os.path.basename(l.split()[1].rstrip(":")) for l in p.stdout.splitlines()
                 if l.startswith("pass"))
    seen += got
if sorted(seen) == sorted(cases):
    ok("the shards together are the corpus, each case once")
else:
    fail("shards cover %s, the corpus is %s" % (sorted(seen), sorted(cases)))


def fnv1a(text):
    h = 0xcbf29ce484222325
    for b in text.encode():
        h = ((h ^ b) * 0x100000001b3) & 0xffffffffffffffff
    return h


for i in range(1, 4):
    p = run("check", corpus, "--shard", "%d/3" % i)
    got = sorted(os.path.basename(l.split()[1].rstrip(":")) for l in p.stdout.splitlines()
                 if l.startswith("pass"))
    want = sorted(k for k in cases if fnv1a(k) % 3 == i - 1)
    if got != want:
        fail("shard %d/3 is %s, the documented rule gives %s" % (i, got, want))
        break
else:
    ok("each shard is the documented FNV-1a rule")

# make-case: the same inputs give the same outputs as the generator's.
c = cases["unpermute-grad"]
_, m = outputs_of(c)
args = ["make-case", "--out", os.path.join(tmp, "mine"), "--op", "unpermute-grad",
        "--name", "from-files"]
for name, entry in m["tensors"].items():
    if entry["role"] != "input":
        continue
    a = load(c, name, entry)
    if name == "probs":
        np.save(os.path.join(tmp, "probs.npy"), a)
        args += ["--input", "probs=%s:bf16" % os.path.join(tmp, "probs.npy")]
    else:
        args += ["--input", "%s=%s:%s:%s" % (name, os.path.join(c, entry["file"]), entry["dtype"],
                                              "x".join(str(d) for d in entry["shape"]))]
run(*args, expect=0)
made = os.path.join(tmp, "mine", "from-files")
for name in ("permuted_tokens_grad.bin", "probs_grad.bin", "probs_grad_exact.bin"):
    if open(os.path.join(made, name), "rb").read() != open(os.path.join(c, name), "rb").read():
        fail("make-case's %s differs from the generator's" % name)
        break
else:
    ok("make-case from raw and .npy inputs gives the reference's outputs")
dup, grad = os.path.join(tmp, "dup.bin"), os.path.join(tmp, "grad.bin")
np.array([0, 1, 2, -1], np.int32).tofile(dup)
np.zeros((4, 40), np.uint16).tofile(grad)
p = run("make-case", "--out", os.path.join(tmp, "mine"), "--op", "permute-grad", "--name", "dup",
        "--top-k", "2", "--input", "permuted_output_grad=%s:bf16:4x40" % grad,
        "--input", "sorted_indices=%s:int32:4" % dup, expect=2)
if "is negative" in p.stderr and not os.path.exists(os.path.join(tmp, "mine", "dup")):
    ok("make-case refuses a negative index with the library's sentence, writing nothing")
else:
    fail("negative index: %s" % p.stderr)

# A built-in edge kind: the report names the scenario of the differing
# columns (a saturating device shows in the overflow kind's scenario 0).
run("golden", "--out", os.path.join(tmp, "edge"), "--tokens", "16", "--top-k", "4", "--hidden",
    "12", "--dtype", "bf16", "--values", "overflow", "--name", "ovf", expect=0)
c = os.path.join(tmp, "edge", "ovf")
outs, _ = outputs_of(c)
a = load(c, "input_grad", outs["input_grad"]).copy()
inf = (a & 0x7fff) == 0x7f80
a[inf] = (a[inf] & 0x8000) | 0x7f7f
a.tofile(os.path.join(tmp, "saturated.bin"))
p = run("compare", c, os.path.join(tmp, "saturated.bin"), expect=1)
if "saturate" in p.stdout and "0 (max + max: inf, or max on a saturating device)" in p.stdout:
    ok("a saturating output is named, with the scenario its columns hold")
else:
    fail("saturation: %s" % p.stdout)

shutil.rmtree(tmp)
print("%d failed" % failures)
sys.exit(1 if failures else 0)

#!/usr/bin/env python3
"""The judge from the command line, as a harness uses it: outputs written
elsewhere (raw and .npy) judged by `check --outputs`, the JSON report
against the text report, planted bugs of every operator named by their
diagnosis id, a missing output (check and compare), --op, --max-ulp,
--shard covering the corpus exactly once, and `make-case` from a user's
own tensors.

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
if by_case["pg-missing"]["verdict"] == "missing" and "MISSING" in p.stdout:
    ok("a missing output file fails its case, never a skip")
else:
    fail("the missing output: verdict %s" % by_case["pg-missing"]["verdict"])
text_lines = [l for l in p.stdout.splitlines() if l.split(" ")[0] in
              ("pass", "MISMATCH", "MISSING", "BAD-INPUT", "WITHIN", "BACKEND-FAILURE")]
summary = doc["summary"]
counted = {"pass": summary["same"], "MISMATCH": summary["different"],
           "MISSING": summary["missing"], "WITHIN": summary["within_tolerance"],
           "BAD-INPUT": summary["bad_input"], "BACKEND-FAILURE": summary["backend_failure"]}
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

# --- Planted bugs of every operator, as a harness writes them ------------
# Each bug of docs/judging.md, written here in numpy from the docs (the
# tests' own models, tests/python/models.py), planted in a case's outputs
# under --outputs (.bin and .npy alternately): each case must be judged
# different and named by its id as an exact finding, with no finding read
# off the output alone (token-block-shift, unwritten, ...) claimed beside
# it, and every finding exact.
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "python"))
import models as M  # noqa: E402
from fractions import Fraction  # noqa: E402

NP = {"bf16": np.uint16, "float16": np.float16, "float32": np.float32, "int32": np.int32,
      "int64": np.int64, "int8": np.int8, "float64": np.float64}
SHAPE_LEVEL = {"token-block-shift", "unwritten", "ftz", "saturate", "nan-bits"}


def tensors(case_dir):
    with open(os.path.join(case_dir, "case.json")) as f:
        m = json.load(f)
    return {k: np.fromfile(os.path.join(case_dir, v["file"]), dtype=NP[v["dtype"]])
            .reshape(v["shape"]) for k, v in m["tensors"].items()}, m


def through(values, dtype):
    return M.widen(M.narrow(values, dtype))


def fma32(a, b, c):
    """fmaf(a, b, c) elementwise: a*b is exact in float64; the sum is
    rounded once to float32 (exactly, through fractions, where float64's
    own rounding could meet a float32 tie)."""
    a64, b64, c64 = (np.asarray(v, np.float64) for v in (a, b, c))
    with np.errstate(all="ignore"):
        s = a64 * b64 + c64
        out = s.astype(np.float32)
    r = out.astype(np.float64)
    up = np.nextafter(out, np.float32(np.inf)).astype(np.float64)
    down = np.nextafter(out, np.float32(-np.inf)).astype(np.float64)
    risky = np.isfinite(s) & ((np.abs(s - r) * 2 == np.abs(up - r)) |
                              (np.abs(s - r) * 2 == np.abs(r - down)))
    for i in zip(*np.nonzero(risky)):
        exact = Fraction(float(a64[i])) * Fraction(float(b64[i])) + Fraction(float(c64[i]))
        cands = [np.float32(v) for v in (out[i], up[i], down[i])]
        best = min(cands, key=lambda v: (abs(Fraction(float(v)) - exact),
                                         int(np.float32(v).view(np.uint32)) & 1))
        out[i] = best
    return out


def unpermute_bug(t, bug, v=0):
    """MoeTokenUnpermute with a bug of docs/judging.md, slot by slot over
    all tokens and columns at once (every product and sum float32)."""
    x, idx, probs = t["permuted_tokens"], t["sorted_indices"], t.get("probs")
    K = 1 if probs is None else probs.shape[1]
    idx = idx.astype(np.int64).reshape(-1, K)
    R, H = x.shape
    X = M.widen(x)
    P = np.ones(idx.shape, np.float32) if probs is None else M.widen(probs)
    N = idx.shape[0]
    order = list(range(K))[::-1] if bug == "k-order-reversed" else list(range(K))
    acc = np.zeros((N, H), np.float32)
    terms, present = [], []
    with np.errstate(all="ignore"):
        for k in range(K):
            s = idx[:, k]
            kept = s < R
            inc = kept & (P[:, k] != 0)
            row = X[np.where(kept, s, 0)]
            if bug == "dropped-not-skipped":
                row = np.where(kept[:, None], row, 0.0).astype(np.float32)
                inc = P[:, k] != 0
            if bug == "zero-prob-not-skipped":
                inc = kept
            if bug == "probs-ignored":
                term = row
                inc = kept
            else:
                term = (row * P[:, k][:, None]).astype(np.float32)
            if bug == "product-in-output-dtype":
                term = through(term, x.dtype)
            if bug == "missing-slot" and k == v:
                inc = np.zeros_like(inc)
            terms.append(term)
            present.append(inc)
        if bug == "k-order-pairwise":
            vals, pres = terms, present
            while len(vals) > 1:
                nv, npres = [], []
                for i in range(0, len(vals), 2):
                    if i + 1 == len(vals):
                        nv.append(vals[i])
                        npres.append(pres[i])
                        continue
                    a, b, pa, pb = vals[i], vals[i + 1], pres[i], pres[i + 1]
                    both = pa & pb
                    nv.append(np.where(both[:, None], (a + b).astype(np.float32),
                                       np.where(pa[:, None], a, b)))
                    npres.append(pa | pb)
                vals, pres = nv, npres
            acc = np.where(pres[0][:, None], vals[0], np.float32(0))
            return M.narrow(acc, x.dtype)
        for j, k in enumerate(order):
            inc = present[k]
            if bug == "fma" and j > 0:
                new = fma32(X[np.where(idx[:, k] < R, idx[:, k], 0)],
                            np.broadcast_to(P[:, k][:, None], (N, H)), acc)
            elif j == 0 and bug != "zero-start":
                new = terms[k]
            else:
                new = (acc + terms[k]).astype(np.float32)
            if bug == "acc-in-output-dtype":
                new = through(new, x.dtype)
            acc = np.where(inc[:, None], new, acc)
        if bug == "acc-in-output-dtype":
            acc = through(acc, x.dtype)  # a slot 0 left out leaves +0.0
    return M.narrow(acc, x.dtype)


def permute_bug(t, m, bug, v=0):
    """MoeTokenPermute's two outputs with a bug: ties in reverse slot order,
    the row-to-entry map, token i % N, num_out_tokens' cut taken from the
    front."""
    tok, ind = t["tokens"], t["indices"]
    flat = ind.reshape(-1).astype(np.int64)
    K = 1 if ind.ndim == 1 else ind.shape[1]
    N, NK = tok.shape[0], flat.size
    rows = t["permuted_tokens"].shape[0]
    key = np.arange(NK)[::-1] if bug == "unstable-sort" else np.arange(NK)
    order = np.lexsort((key, flat))
    si = np.empty(NK, np.int64)
    si[order] = np.arange(NK)
    source = np.arange(NK) % N if bug == "token-row" else np.arange(NK) // K
    place = si - (NK - rows) if bug == "num-out-ignored" else si
    out = np.zeros_like(t["permuted_tokens"])
    keep = (place >= 0) & (place < rows)
    out[place[keep]] = tok[source[keep]]
    if bug == "sorted-indices-inverted":
        inv = np.empty(NK, np.int64)
        inv[si] = np.arange(NK)
        si = inv
    return {"permuted_tokens": out, "sorted_indices": si.astype(np.int32)}


def unpermute_grad_bug(t, bug):
    """MoeTokenUnpermuteGrad's outputs with a bug: permuted_tokens_grad
    unscaled or scaled by the next slot's prob; probs_grad kept in the
    probs' dtype (products narrowed, added column by column from +0.0), or
    summed in column order in float32 (an order), or doubled (wrong)."""
    x, g, si, probs = (t["permuted_tokens"], t["unpermuted_tokens_grad"], t["sorted_indices"],
                       t["probs"])
    K = probs.shape[1]
    R = x.shape[0]
    grad, pg = t["permuted_tokens_grad"].copy(), t["probs_grad"].copy()
    slot = np.arange(si.size)
    keep = si < R
    G = M.widen(g)
    if bug in ("probs-ignored", "wrong-slot-prob"):
        if bug == "probs-ignored":
            grad[si[keep]] = g[slot[keep] // K]
        else:
            p = M.widen(probs)[slot // K, (slot % K + 1) % K]
            with np.errstate(all="ignore"):
                grad[si[keep]] = M.narrow(G[slot[keep] // K] * p[keep][:, None], g.dtype)
        return {"permuted_tokens_grad": grad, "probs_grad": pg}
    X = np.where(keep[:, None], M.widen(x)[np.where(keep, si, 0)], np.float32(0))
    GX = G[slot // K]
    acc = np.zeros(si.size, np.float32)
    with np.errstate(all="ignore"):
        for h in range(x.shape[1]):
            prod = (X[:, h] * GX[:, h]).astype(np.float32)
            if bug == "acc-in-output-dtype":
                acc = through((acc + through(prod, probs.dtype)).astype(np.float32), probs.dtype)
            else:
                acc = (acc + prod).astype(np.float32)
    if bug == "wrong":
        acc = (acc * np.float32(2)).astype(np.float32)
    return {"permuted_tokens_grad": grad,
            "probs_grad": M.narrow(acc, probs.dtype).reshape(pg.shape)}


planted_root = os.path.join(tmp, "planted")
planted_out = os.path.join(tmp, "planted-outputs")
planted = []  # (case name, the output named, the id expected)


def plant(op, name, bugs, *options):
    run("golden", "--out", planted_root, "--op", op, "--tokens", "32", "--top-k", "4",
        "--hidden", "24", "--name", name, *options, expect=0)
    t, m = tensors(os.path.join(planted_root, name))
    for bug, v, output, make in bugs:
        key = "%s-%s-%d" % (name, bug, v)
        target = os.path.join(planted_out, key)
        os.makedirs(target)
        for i, (out_name, array) in enumerate(make(t, m, bug, v).items()):
            if (len(planted) + i) % 2:
                np.save(os.path.join(target, out_name + ".npy"), array)
            else:
                np.ascontiguousarray(array).tofile(os.path.join(target, out_name + ".bin"))
        shutil.copytree(os.path.join(planted_root, name), os.path.join(planted_root, key))
        planted.append((key, output, bug))
    shutil.rmtree(os.path.join(planted_root, name))


def up(t, m, bug, v):
    return {"unpermuted_tokens": unpermute_bug(t, bug, v)}


def pm(t, m, bug, v):
    return permute_bug(t, m, bug, v)


def ug(t, m, bug, v):
    return unpermute_grad_bug(t, bug)


U = "unpermuted_tokens"
plant("unpermute", "u-bf16", [("acc-in-output-dtype", 0, U, up),
                              ("product-in-output-dtype", 0, U, up),
                              ("missing-slot", 2, U, up), ("probs-ignored", 0, U, up)],
      "--dtype", "bf16")
plant("unpermute", "u-rounding", [("k-order-reversed", 0, U, up), ("k-order-pairwise", 0, U, up)],
      "--dtype", "float32", "--values", "rounding")
plant("unpermute", "u-fma", [("fma", 0, U, up)], "--dtype", "float32", "--values",
      "product-rounding")
plant("unpermute", "u-negzero", [("zero-start", 0, U, up)], "--dtype", "bf16", "--values",
      "negzero")
plant("unpermute", "u-masking", [("zero-prob-not-skipped", 0, U, up)], "--dtype", "bf16",
      "--probs-dtype", "float32", "--values", "masking", "--probs-values", "masking")
plant("unpermute", "u-dropped", [("dropped-not-skipped", 0, U, up)], "--dtype", "float16",
      "--values", "negzero", "--rows", "100")
plant("permute", "p-ties", [("unstable-sort", 0, "permuted_tokens", pm),
                            ("sorted-indices-inverted", 0, "sorted_indices", pm),
                            ("token-row", 0, "permuted_tokens", pm),
                            ("num-out-ignored", 0, "permuted_tokens", pm)],
      "--dtype", "bf16", "--experts", "6", "--num-out-tokens", "-40")
plant("unpermute-grad", "g-bf16", [("probs-ignored", 0, "permuted_tokens_grad", ug),
                                   ("wrong-slot-prob", 0, "permuted_tokens_grad", ug),
                                   ("acc-in-output-dtype", 0, "probs_grad", ug)],
      "--dtype", "bf16")
plant("unpermute-grad", "g-fp32", [("order", 0, "probs_grad", ug), ("wrong", 0, "probs_grad", ug)],
      "--dtype", "float32", "--hidden", "300")

report = os.path.join(tmp, "planted.json")
run("check", planted_root, "--outputs", planted_out, "--json", report, expect=1)
doc = json.load(open(report))
by_case = {os.path.basename(c["case"]): c for c in doc["cases"]}
for key, output, bug in planted:
    c = by_case[key]
    findings = c["outputs"][output]["diagnosis"] if output in c["outputs"] else []
    named = [f for f in findings if f["id"] == bug]
    exact_ok = bug == "wrong" or (named and named[0]["exact"])
    stray = [f["id"] for f in findings
             if f["id"] in SHAPE_LEVEL or (not f["exact"] and f["id"] != "wrong")]
    if c["verdict"] == "different" and named and exact_ok and not stray:
        ok("%s: %s judged different and named %s" % (key, output, bug))
    else:
        fail("%s: verdict %s, %s's diagnosis %s, expected %s alone and exact"
             % (key, c["verdict"], output, [(f["id"], f["exact"]) for f in findings], bug))

# The reports that named the wrong bug: a reversed unpermute near overflow
# is the order (not an unwritten buffer nor a saturation); an overflow of
# fp16 arithmetic to NaN in permuted_tokens_grad is not an unwritten row.
run("golden", "--out", planted_root, "--op", "unpermute", "--tokens", "32", "--top-k", "4",
    "--hidden", "24", "--dtype", "float32", "--values", "overflow", "--name", "u-overflow",
    expect=0)
t, _ = tensors(os.path.join(planted_root, "u-overflow"))
rev = os.path.join(tmp, "reversed-overflow.bin")
unpermute_bug(t, "k-order-reversed").tofile(rev)
p = run("compare", os.path.join(planted_root, "u-overflow"), rev, "--json", "-", expect=1)
ids = [(f["id"], f["exact"]) for f in
       json.loads(p.stdout)["cases"][0]["outputs"]["unpermuted_tokens"]["diagnosis"]]
if ("k-order-reversed", True) in ids and not any(i in ("unwritten", "saturate") for i, _ in ids):
    ok("a reversed unpermute near overflow is named the order, not unwritten or saturate")
else:
    fail("reversed unpermute near overflow: %s" % ids)
rng = np.random.default_rng(3)
g = rng.uniform(-1, 1, (8, 16)).astype(np.float32)
g[0] = np.sign(g[0]) * rng.uniform(1100, 2000, 16).astype(np.float32)  # * 64 > fp16's range
inputs = {"permuted_tokens": rng.uniform(-1, 1, (32, 16)).astype(np.float32),
          "unpermuted_tokens_grad": g, "sorted_indices": rng.permutation(32).astype(np.int32),
          "probs": np.full((8, 4), 64, np.float32)}
args = ["make-case", "--out", planted_root, "--op", "unpermute-grad", "--name", "g-overflow"]
for name, a in inputs.items():
    np.save(os.path.join(tmp, name + ".npy"), a)
    args += ["--input", "%s=%s" % (name, os.path.join(tmp, name + ".npy"))]
run(*args, expect=0)
gc = os.path.join(planted_root, "g-overflow")
t, _ = tensors(gc)
nan_row = os.path.join(tmp, "nan-row")
os.makedirs(nan_row)
grad = t["permuted_tokens_grad"].copy()
grad.view(np.uint32)[inputs["sorted_indices"][0]] = 0xffc00000  # the row token 0, slot 0 writes
grad.tofile(os.path.join(nan_row, "permuted_tokens_grad.bin"))
t["probs_grad"].tofile(os.path.join(nan_row, "probs_grad.bin"))
p = run("compare", gc, nan_row, "--json", "-", expect=1)
ids = [(f["id"], f["exact"]) for f in
       json.loads(p.stdout)["cases"][0]["outputs"]["permuted_tokens_grad"]["diagnosis"]]
if not any(i == "unwritten" or e for i, e in ids):
    ok("NaNs that fp16 arithmetic on the inputs makes are not taken for an unwritten row")
else:
    fail("fp16 overflow to NaN: %s" % ids)

# --op: only the named operators' cases are judged; the summary counts the
# rest, in the text and the JSON.
report = os.path.join(tmp, "op.json")
p = run("check", os.path.join(tmp, "corpus"), "--op", "permute", "--op", "MoeTokenUnpermute",
        "--json", report, expect=0)
doc = json.load(open(report))
judged = sorted(os.path.basename(c["case"]) for c in doc["cases"])
if judged == ["permute", "unpermute"] and doc["summary"]["left_out"] == len(cases) - 2 and \
        "left out: %d cases of other operators (--op)" % (len(cases) - 2) in p.stdout:
    ok("--op judges only the named operators and counts the cases left out")
else:
    fail("--op: judged %s, summary %s, text %s" % (judged, doc["summary"], p.stdout[-300:]))
p = run("check", os.path.join(tmp, "corpus"), "--op", "scatter", expect=2)
if "--op is \"scatter\"" in p.stderr:
    ok("an unknown --op is refused by name")
else:
    fail("--op scatter: %s" % p.stderr)

# compare with an output file missing: exit 1, the JSON verdict missing.
p = run("compare", cases["unpermute-grad"], os.path.join(tmp, "nowhere"), "--json", "-",
        expect=1)
if json.loads(p.stdout)["cases"][0]["verdict"] == "missing" and "wrote no" in p.stderr:
    ok("compare: a missing output file is a mismatch (exit 1), verdict missing")
else:
    fail("compare with no output file: %s %s" % (p.stdout[-300:], p.stderr))

shutil.rmtree(tmp)
print("%d failed" % failures)
sys.exit(1 if failures else 0)

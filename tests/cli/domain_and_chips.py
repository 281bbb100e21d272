#!/usr/bin/env python3
"""The command line at the input domain's edge and with named chips:
`moeperm golden` writes custom cases with --chip, --top-k -1,
--padded-mode, --extra-indices, --huge-indices, --hidden-outer and the
repeats and sparse routings, records them as given and in the command it
records, which regenerates the case byte for byte; `make-case` takes
--chip, --top-k -1, --padded-mode, tokens of rank 3 and sorted_indices
longer than the entries read; `run`, `compare` and `check` take every such
case; a chip whose name is unknown, or whose numbers disagree with the
name, is refused with exit 2 and one sentence; --help lists the chips.

The expected outputs here are numpy's, from the definitions in
docs/operators.md, not the tool's.

usage: domain_and_chips.py MOEPERM      (exit 77 without numpy)
"""
import filecmp
import json
import os
import shlex
import subprocess
import sys
import tempfile

try:
    import numpy as np
except ImportError:
    print("numpy is not available: skipped")
    sys.exit(77)

MOEPERM = sys.argv[1]
CHIPS = ("Ascend910B1 Ascend910B2 Ascend910B2C Ascend910B3 Ascend910B4 Ascend910B4-1 "
         "Ascend910_9362 Ascend910_9363 Ascend910_9372 Ascend910_9381 Ascend910_9382 "
         "Ascend910_9391 Ascend910_9392").split()
failures = []


def tool(*args, cwd=None):
    p = subprocess.run([MOEPERM] + [str(a) for a in args], cwd=cwd, stdout=subprocess.PIPE,
                       stderr=subprocess.PIPE, text=True)
    return p.returncode, p.stdout, p.stderr


def expect(cond, what):
    print(("ok   " if cond else "FAIL ") + what)
    if not cond:
        failures.append(what)


def manifest(case):
    with open(os.path.join(case, "case.json")) as f:
        return json.load(f)


def bf16(x):
    """float32 -> bf16 bits by round to nearest even (finite values)."""
    b = np.asarray(x, np.float32).view(np.uint32).astype(np.uint64)
    return ((b + 0x7FFF + ((b >> 16) & 1)) >> 16).astype(np.uint16)


def widen(bits):
    return (bits.astype(np.uint32) << 16).view(np.float32)


def regenerates(case, what):
    """The manifest's command, run from the case directory into a copy of
    its parent, writes the same bytes."""
    m = manifest(case)
    with tempfile.TemporaryDirectory() as other:
        copy = os.path.join(other, "parent", os.path.basename(case))
        os.makedirs(copy)
        args = shlex.split(m["command"])
        rc = subprocess.run([MOEPERM] + args[1:], cwd=copy, stdout=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL).returncode
        same = rc == 0 and all(filecmp.cmp(os.path.join(case, f), os.path.join(copy, f),
                                           shallow=False) for f in os.listdir(case))
    expect(same, "%s: the recorded command regenerates the case byte for byte" % what)


def run_compare_check(case, what):
    outputs = [n for n, t in manifest(case)["tensors"].items() if t["role"] == "output"]
    # One output is a file, several a directory of <output>.bin.
    out = case + (".out" if len(outputs) > 1 else ".bin")
    rc1, _, err1 = tool("run", case, "--out", out)
    rc2, _, err2 = tool("compare", case, out)
    rc3, _, err3 = tool("check", case)
    expect(rc1 == rc2 == rc3 == 0, "%s: run, compare and check take it (%s)"
           % (what, (err1 + err2 + err3).strip()[:300]))


def main():
    tmp = tempfile.mkdtemp(prefix="domain_and_chips.")
    # --help lists the chips by name, beside the numbers for the others.
    for command in ("golden", "make-case"):
        rc, out, _ = tool(command, "--help")
        expect(rc == 0 and "--chip NAME" in out and " ".join(CHIPS) in out and
               "--ub-bytes" in out, "%s --help lists --chip and every chip's name" % command)

    # golden: a named chip, recorded by name and numbers.
    rc, _, err = tool("golden", "--out", tmp, "--op", "unpermute-grad", "--tokens", 41,
                      "--top-k", 101, "--hidden", 7685, "--rows", 8, "--dtype", "bf16",
                      "--probs-dtype", "float32", "--chip", "Ascend910B3", "--name", "b3")
    case = os.path.join(tmp, "b3")
    m = manifest(case) if rc == 0 else {"attrs": {}, "command": ""}
    expect(rc == 0 and m["attrs"] == {"chip": "Ascend910B3", "ub_bytes": 196352,
                                      "vector_cores": 40, "padded_mode": False} and
           "--chip Ascend910B3" in m["command"] and "--vector-cores" not in m["command"],
           "golden --chip records the name beside its numbers (%s)" % err.strip())
    if rc == 0:
        regenerates(case, "--chip")
        run_compare_check(case, "--chip")
        # The same case for the A2's numbers is another case: its probs_grad
        # is cut into chunks otherwise.
        rc, _, _ = tool("golden", "--out", tmp, "--op", "unpermute-grad", "--tokens", 41,
                        "--top-k", 101, "--hidden", 7685, "--rows", 8, "--dtype", "bf16",
                        "--probs-dtype", "float32", "--chip", "Ascend910B2", "--name", "b2")
        b2 = np.fromfile(os.path.join(tmp, "b2", "probs_grad.bin"), "<u4")
        b3 = np.fromfile(os.path.join(case, "probs_grad.bin"), "<u4")
        expect(rc == 0 and b2.size == b3.size and (b2 != b3).any(),
               "the Ascend910B3's probs_grad differs from the Ascend910B2's")
    for args, sentence in (
            (["--chip", "Ascend310P3"], '--chip is "Ascend310P3", expected one of ' +
             " ".join(CHIPS)),
            (["--chip", "Ascend910B3", "--vector-cores", 48],
             "chip Ascend910B3 has 196352 unified-buffer bytes and 40 vector cores, but "
             "vector_cores 48 is given beside it"),
            (["--chip", "Ascend910B3", "--op", "unpermute"],
             'chip "Ascend910B3" is MoeTokenUnpermuteGrad\'s, not MoeTokenUnpermute\'s')):
        base = ["--op", "unpermute-grad"] if "--op" not in args else []
        rc, out, err = tool("golden", "--out", tmp, *base, "--tokens", 2, "--top-k", 1,
                            "--hidden", 4, "--dtype", "bf16", "--name", "refused", *args)
        expect(rc == 2 and sentence in err and len(err.strip().splitlines()) == 1 and
               not os.path.exists(os.path.join(tmp, "refused")),
               "golden %s is refused, exit 2: %s" % (" ".join(map(str, args)), err.strip()))

    # golden: the input domain's edge, as given.
    for name, args, check in (
            ("pg-minus1", ["--tokens", 9, "--top-k", -1, "--hidden", 5, "--dtype", "float32",
                           "--routing", "repeats", "--rows", 12, "--padded-mode",
                           "--huge-indices"],
             lambda m: m["attrs"] == {"top_k": -1, "padded_mode": True} and
             m["recipe"]["routing"] == "repeats" and m["recipe"]["huge_indices"] and
             m["tensors"]["sorted_indices"]["shape"] == [9] and
             m["tensors"]["permuted_output_grad"]["shape"] == [12, 5]),
            ("pg-extra", ["--tokens", 5, "--top-k", 4, "--hidden", 3, "--dtype", "bf16",
                          "--extra-indices", 3, "--routing", "sparse", "--rows", 30],
             lambda m: m["tensors"]["sorted_indices"]["shape"] == [23] and
             m["tensors"]["input_grad"]["shape"] == [5, 3]),
            ("p-rank3", ["--op", "permute", "--tokens", 6, "--top-k", 2, "--hidden", 12,
                         "--hidden-outer", 3, "--dtype", "int8", "--num-out-tokens", -2],
             lambda m: m["tensors"]["tokens"]["shape"] == [6, 3, 4] and
             m["tensors"]["permuted_tokens"]["shape"] == [10, 3, 4]),
            ("u-repeats", ["--op", "unpermute", "--tokens", 7, "--top-k", 3, "--hidden", 5,
                           "--dtype", "float16", "--routing", "repeats", "--rows", 40,
                           "--extra-indices", 2, "--padded-mode"],
             lambda m: m["tensors"]["sorted_indices"]["shape"] == [23] and
             m["attrs"]["padded_mode"]),
            ("ug-sparse", ["--op", "unpermute-grad", "--tokens", 7, "--top-k", 3, "--hidden", 5,
                           "--dtype", "bf16", "--routing", "sparse", "--rows", 40,
                           "--huge-indices", "--extra-indices", 2],
             lambda m: m["tensors"]["sorted_indices"]["shape"] == [23] and
             m["tensors"]["permuted_tokens_grad"]["shape"] == [40, 5]),
    ):
        rc, _, err = tool("golden", "--out", tmp, "--name", name, *args)
        case = os.path.join(tmp, name)
        expect(rc == 0 and check(manifest(case)),
               "golden %s is recorded as given (%s)" % (name, err.strip()))
        if rc == 0:
            regenerates(case, name)
            run_compare_check(case, name)
    rc, _, err = tool("golden", "--out", tmp, "--tokens", 3, "--top-k", 0, "--hidden", 2,
                      "--dtype", "bf16")
    expect(rc == 2 and '--top-k is "0"' in err, "golden --top-k 0 is refused: " + err.strip())

    # make-case: the user's tensors at the edge, outputs from numpy.
    rng = np.random.default_rng(5)
    grad = bf16(rng.standard_normal((11, 6)).astype(np.float32))
    idx = np.array([3, 3, 10, 0, 7, 1, 1, 12, 2], np.int32)   # repeats, a dropped 12
    np.save(os.path.join(tmp, "grad.npy"), grad)
    idx.tofile(os.path.join(tmp, "idx.bin"))
    rc, _, err = tool("make-case", "--out", tmp, "--op", "permute-grad", "--name", "mc-pg",
                      "--input", "permuted_output_grad=%s:bf16" % os.path.join(tmp, "grad.npy"),
                      "--input", "sorted_indices=%s:int32:9" % os.path.join(tmp, "idx.bin"),
                      "--top-k", 2, "--padded-mode")
    case = os.path.join(tmp, "mc-pg")
    if rc == 0:
        m = manifest(case)
        # floor(9 / 2) = 4 tokens; the last entry is never read.
        x = widen(grad)
        want = np.zeros((4, 6), np.float32)
        for t in range(4):
            acc = np.zeros(6, np.float32)       # +0.0 when slot 0 is dropped
            for k in range(2):
                r = idx[t * 2 + k]
                if r < 11:
                    acc = x[r].copy() if k == 0 else acc + x[r]
            want[t] = acc
        got = np.fromfile(os.path.join(case, "input_grad.bin"), "<u2")
        expect(m["attrs"] == {"top_k": 2, "padded_mode": True} and
               m["tensors"]["input_grad"]["shape"] == [4, 6] and
               (got == bf16(want).reshape(-1)).all(),
               "make-case: repeated rows, a dropped slot, an unread entry and padded_mode")
        run_compare_check(case, "make-case permute-grad")
    else:
        expect(False, "make-case of MoeTokenPermuteGrad at the edge: " + err.strip())
    rc, _, err = tool("make-case", "--out", tmp, "--op", "permute-grad", "--name", "mc-m1",
                      "--input", "permuted_output_grad=%s:bf16" % os.path.join(tmp, "grad.npy"),
                      "--input", "sorted_indices=%s:int32:9" % os.path.join(tmp, "idx.bin"),
                      "--top-k", -1)
    m = manifest(os.path.join(tmp, "mc-m1")) if rc == 0 else {}
    expect(rc == 0 and m["attrs"]["top_k"] == -1 and
           m["tensors"]["input_grad"]["shape"] == [9, 6],
           "make-case --top-k -1: recorded as -1, 9 tokens of one slot (%s)" % err.strip())

    tokens = rng.integers(-128, 128, (5, 2, 3), dtype=np.int8)
    ids = np.array([[2, 0], [1, 1], [0, 2], [3, 1], [2, 2]], np.int64)
    np.save(os.path.join(tmp, "tokens.npy"), tokens)
    np.save(os.path.join(tmp, "ids.npy"), ids)
    rc, _, err = tool("make-case", "--out", tmp, "--op", "permute", "--name", "mc-p",
                      "--input", "tokens=" + os.path.join(tmp, "tokens.npy"),
                      "--input", "indices=" + os.path.join(tmp, "ids.npy"),
                      "--num-out-tokens", 8)
    case = os.path.join(tmp, "mc-p")
    if rc == 0:
        m = manifest(case)
        order = np.argsort(ids.reshape(-1), kind="stable")
        want = tokens[order[:8] // 2]
        got = np.fromfile(os.path.join(case, "permuted_tokens.bin"), np.int8)
        expect(m["tensors"]["permuted_tokens"]["shape"] == [8, 2, 3] and
               (got == want.reshape(-1)).all(), "make-case: tokens of rank 3, copied by row")
        run_compare_check(case, "make-case permute rank 3")
    else:
        expect(False, "make-case of MoeTokenPermute with tokens of rank 3: " + err.strip())

    x = bf16(rng.standard_normal((9, 4)).astype(np.float32))
    g = bf16(rng.standard_normal((3, 4)).astype(np.float32))
    p = rng.standard_normal((3, 2)).astype(np.float32)
    sidx = np.array([5, 8, 0, 2, 6, 1, 4], np.int32)     # 7 = N*K + 1: the last unread
    for name, array in (("x", x), ("g", g), ("p", p)):
        np.save(os.path.join(tmp, name + ".npy"), array)
    sidx.tofile(os.path.join(tmp, "sidx.bin"))
    inputs = ["--input", "permuted_tokens=%s:bf16" % os.path.join(tmp, "x.npy"),
              "--input", "unpermuted_tokens_grad=%s:bf16" % os.path.join(tmp, "g.npy"),
              "--input", "sorted_indices=%s:int32:7" % os.path.join(tmp, "sidx.bin"),
              "--input", "probs=" + os.path.join(tmp, "p.npy")]
    rc, _, err = tool("make-case", "--out", tmp, "--op", "unpermute-grad", "--name", "mc-ug",
                      "--chip", "Ascend910_9382", *inputs)
    case = os.path.join(tmp, "mc-ug")
    if rc == 0:
        m = manifest(case)
        got = np.fromfile(os.path.join(case, "permuted_tokens_grad.bin"), "<u2").reshape(9, 4)
        gw = widen(g)
        want = np.zeros((9, 4), np.uint16)     # rows 3 and 7: no slot names them
        for i in range(6):
            want[sidx[i]] = bf16(gw[i // 2] * p[i // 2, i % 2])
        expect(m["attrs"] == {"chip": "Ascend910_9382", "ub_bytes": 196352,
                              "vector_cores": 48, "padded_mode": False} and
               (got == want).all(),
               "make-case --chip: recorded by name; rows no slot names are +0")
        run_compare_check(case, "make-case unpermute-grad --chip")
    else:
        expect(False, "make-case of MoeTokenUnpermuteGrad with --chip: " + err.strip())
    for args, sentence in ((["--chip", "Ascend910_9382", "--vector-cores", 40],
                            "--chip Ascend910_9382 has 196352 unified-buffer bytes and 48 "
                            "vector cores, but --vector-cores 40 is given beside it"),
                           (["--chip", "Ascend9"], '--chip is "Ascend9", expected one of')):
        rc, _, err = tool("make-case", "--out", tmp, "--op", "unpermute-grad", "--name",
                          "mc-refused", *inputs, *args)
        expect(rc == 2 and sentence in err and
               not os.path.exists(os.path.join(tmp, "mc-refused")),
               "make-case %s is refused, exit 2: %s" % (" ".join(map(str, args)), err.strip()))
    rc, _, err = tool("make-case", "--out", tmp, "--op", "unpermute", "--name", "mc-refused",
                      "--input", "permuted_tokens=%s:bf16" % os.path.join(tmp, "x.npy"),
                      "--input", "sorted_indices=%s:int32:7" % os.path.join(tmp, "sidx.bin"),
                      "--chip", "Ascend910B3")
    expect(rc == 2 and "--chip is MoeTokenUnpermuteGrad's; MoeTokenUnpermute has no chip" in err,
           "make-case --chip of another operator is refused: " + err.strip())

    subprocess.run(["rm", "-rf", tmp])
    if failures:
        print("%d failed" % len(failures))
        sys.exit(1)


main()

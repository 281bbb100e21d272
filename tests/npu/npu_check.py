#!/usr/bin/env python3
"""npu_check.py - `moeperm check --backend npu` end to end against the fake
Ascend runtime (tests/fake_acl), one scenario per meson test.

The committed corpus holds MoeTokenPermuteGrad; cases of MoeTokenPermute,
MoeTokenUnpermute and MoeTokenUnpermuteGrad are generated at test time
with `moeperm golden --op ...` (FAMILY_CASES), so every scenario that
matters per operator runs over all four.

Why a driver script rather than cmocka: these scenarios are about the whole
program (its exit code, what it prints, what it leaves behind in the
runtime) over the committed golden corpus, and each needs a fresh process
with its own environment.  After every run the fake's report (written when
the runtime library is unloaded) must balance exactly: every init
finalized, every device reset, every stream, allocation and tensor given
back, no byte left live, no misuse of the API.

Usage: npu_check.py SCENARIO --moeperm EXE --corpus DIR [--corpus DIR ...]
The first --corpus directory holding a case.json is used (cases of format 1
and 2 alike, of any operator).  The fake's libraries come from FAKE_ACL_FULL, FAKE_ACL_RT, FAKE_ACL_OP,
FAKE_ACL_NOSYNC, FAKE_ACL_NOPERMUTE, FAKE_ACL_NOUNPERMUTE,
FAKE_ACL_NOUNPERMUTE_GRAD, FAKE_ACL_NOINTARRAY and FAKE_ASCEND_HOME, which
meson sets.
"""
import argparse
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile

# LD_LIBRARY_PATH goes too: meson points it at the fake's directories,
# which would let the default search find the fake where a test says there
# is no runtime.
FAULT_VARS = ("LD_LIBRARY_PATH", "MOEPERM_ASCEND_LIBS", "MOEPERM_NPU_DEVICE",
              "ASCEND_HOME_PATH", "ASCEND_TOOLKIT_HOME", "FAKE_ACL_REPORT",
              "FAKE_ACL_FAIL_MALLOC", "FAKE_ACL_FAIL_MEMCPY", "FAKE_ACL_FAIL_TENSOR",
              "FAKE_ACL_FAIL_STREAM", "FAKE_ACL_FAIL_SYNC", "FAKE_ACL_FAIL_PLAN",
              "FAKE_ACL_FAIL_RUN", "FAKE_ACL_FAIL_INT_ARRAY", "FAKE_ACL_FLIP",
              "FAKE_ACL_FLIP_RUN", "FAKE_ACL_FLIP_OUTPUT", "FAKE_ACL_KEEP_ROW",
              "FAKE_ACL_WORKSPACE", "FAKE_ACL_DEVICES", "FAKE_ACL_UB_BYTES",
              "FAKE_ACL_VECTOR_CORES", "FAKE_ACL_SOC_NAME")

# Cases of the other three operators: (name, `moeperm golden` options,
# whether the manifest gets a restore_shape of [tokens, hidden]).  The
# first case of each operator is its small one, which the fault loops use.
SIZES = ["--tokens", "4", "--top-k", "3", "--hidden", "7"]
FAMILY_CASES = (
    ("permute-bf16", ["--op", "permute", "--dtype", "bf16"] + SIZES, False),
    ("permute-int8-int64-sentinels-drop3",
     ["--op", "permute", "--dtype", "int8", "--index-dtype", "int64", "--sentinels",
      "--num-out-tokens", "-3"] + SIZES, False),
    ("permute-float16-no-row-kept", ["--op", "permute", "--dtype", "float16",
                                     "--num-out-tokens", "-12"] + SIZES, False),
    ("permute-float32-top1-keep4", ["--op", "permute", "--dtype", "float32", "--tokens", "6",
                                    "--top-k", "1", "--hidden", "33", "--num-out-tokens", "4"],
     False),
    ("unpermute-float16-pfloat32-restore",
     ["--op", "unpermute", "--dtype", "float16", "--probs-dtype", "float32", "--rows", "10"]
     + SIZES, True),
    ("unpermute-bf16-noprobs", ["--op", "unpermute", "--dtype", "bf16", "--no-probs",
                                "--tokens", "5", "--top-k", "1", "--hidden", "9"], False),
    ("unpermute-float32-pbf16-nan-inf",
     ["--op", "unpermute", "--dtype", "float32", "--probs-dtype", "bf16", "--values", "nan-inf"]
     + SIZES, False),
    ("unpermute-grad-bf16-pfloat32-restore",
     ["--op", "unpermute-grad", "--dtype", "bf16", "--probs-dtype", "float32", "--rows", "11"]
     + SIZES, True),
    ("unpermute-grad-float16-noprobs",
     ["--op", "unpermute-grad", "--dtype", "float16", "--no-probs", "--tokens", "5",
      "--top-k", "1", "--hidden", "70", "--rows", "4"], False),
    ("unpermute-grad-float32-pfloat16-h600",
     ["--op", "unpermute-grad", "--dtype", "float32", "--probs-dtype", "float16",
      "--tokens", "3", "--top-k", "2", "--hidden", "600"], False),
    ("unpermute-grad-bf16-pbf16-nan-inf",
     ["--op", "unpermute-grad", "--dtype", "bf16", "--probs-dtype", "bf16", "--values",
      "nan-inf", "--probs-values", "nan-inf"] + SIZES, False),
)

# The chip a case is for unless its manifest says otherwise, and the
# fake's default: the Atlas A2 (unified-buffer bytes, vector cores).
A2_CHIP = (196352, 48)

# The library the fake is built without, and what its absence takes away.
MISSING = (("FAKE_ACL_NOPERMUTE", "MoeTokenPermute"),
           ("FAKE_ACL_NOUNPERMUTE", "MoeTokenUnpermute"),
           ("FAKE_ACL_NOUNPERMUTE_GRAD", "MoeTokenUnpermuteGrad"),
           ("FAKE_ACL_NOINTARRAY", None))


class Failed(Exception):
    pass


def expect(cond, what, run=None):
    if not cond:
        detail = ""
        if run is not None:
            detail = "\n--- command: %s\n--- exit %d\n--- output:\n%s" % (
                " ".join(run.args), run.returncode, run.output[-4000:])
        raise Failed(what + detail)


class Run:
    def __init__(self, args, returncode, output, report):
        self.args, self.returncode, self.output, self.report = args, returncode, output, report


def find_cases(root):
    cases = []
    for dirpath, _, files in os.walk(root):
        if "case.json" in files:
            cases.append(dirpath)
    return sorted(cases)


def case_size(case):
    return sum(os.path.getsize(os.path.join(case, f)) for f in os.listdir(case))


def case_shape(case):
    """op, tokens_num, hidden_size and the output dtype of a case, from a
    manifest of either format."""
    with open(os.path.join(case, "case.json")) as f:
        m = json.load(f)
    if m.get("format") == "moeperm-golden/1":
        return {"op": m["op"], "tokens_num": m["tokens_num"], "hidden_size": m["hidden_size"],
                "dtype": m["dtype"]}
    out = m["tensors"].get("input_grad")
    if m.get("op") != "MoeTokenPermuteGrad" or out is None:
        return {"op": m.get("op")}
    return {"op": m["op"], "tokens_num": out["shape"][0], "hidden_size": out["shape"][1],
            "dtype": out["dtype"]}


class Scenarios:
    def __init__(self, opts):
        self.moeperm = opts.moeperm
        self.tmp = tempfile.mkdtemp(prefix="npu_check.")
        self.runs = 0
        self.corpus = next((c for c in opts.corpus if find_cases(c)), None)
        if self.corpus is None:
            self.corpus = self.generate_corpus()
        self.cases = find_cases(self.corpus)
        # Fault loops run many processes: two small cases are enough to see
        # a failure in the first case and one after a case that succeeded.
        # MoeTokenPermuteGrad's, whose symbols the scenarios below name (the
        # other operators' small cases are family_small()'s).
        self.small = sorted((c for c in self.cases
                             if case_shape(c)["op"] == "MoeTokenPermuteGrad"),
                            key=case_size)[:2]
        expect(self.small, "no MoeTokenPermuteGrad case in %s" % self.corpus)
        self._family_root = None

    def family_root(self):
        """The generated cases of the other three operators, made once."""
        if self._family_root is None:
            root = os.path.join(self.tmp, "family")
            for name, options, restore in FAMILY_CASES:
                args = [self.moeperm, "golden", "--out", root, "--name", name] + options
                p = subprocess.run(args, stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
                expect(p.returncode == 0, "%s failed: %s" % (" ".join(args), p.stdout.decode()))
                if restore:
                    path = os.path.join(root, name, "case.json")
                    with open(path) as f:
                        m = json.load(f)
                    shape = m["tensors"]["unpermuted_tokens" if m["op"] == "MoeTokenUnpermute"
                                         else "unpermuted_tokens_grad"]["shape"]
                    m["attrs"]["restore_shape"] = shape
                    with open(path, "w") as f:
                        json.dump(m, f, indent=2)
            self._family_root = root
        return self._family_root

    def family_small(self):
        """One small case of each of the other three operators, those of
        MoeTokenUnpermute(Grad) with a restore_shape."""
        root, seen, small = self.family_root(), set(), []
        for name, options, _ in FAMILY_CASES:
            op = options[options.index("--op") + 1]
            if op not in seen:
                seen.add(op)
                small.append(os.path.join(root, name))
        return small

    def fault_cases(self):
        """Every operator: two MoeTokenPermuteGrad cases, then one of each
        other operator."""
        return self.small + self.family_small()

    def generate_corpus(self):
        """Without a committed corpus, a few small cases from the CLI."""
        root = os.path.join(self.tmp, "corpus")
        for dtype, rows in (("bf16", 7), ("float16", 8), ("float32", 5)):
            args = [self.moeperm, "golden", "--out", os.path.join(root, dtype), "--tokens", "4",
                    "--top-k", "2", "--hidden", "5", "--dtype", dtype, "--rows", str(rows)]
            p = subprocess.run(args, stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
            expect(p.returncode == 0, "%s failed: %s" % (" ".join(args), p.stdout.decode()))
        return root

    def lib(self, name):
        return os.environ[name]

    def check(self, dirs, env=None, extra=(), wrapper=()):
        """Runs `moeperm check DIRS --backend npu` with the full fake unless
        env says otherwise, and reads the fake's report."""
        self.runs += 1
        report = os.path.join(self.tmp, "report.%d" % self.runs)
        e = {k: v for k, v in os.environ.items() if k not in FAULT_VARS}
        e["MOEPERM_ASCEND_LIBS"] = self.lib("FAKE_ACL_FULL")
        e["FAKE_ACL_REPORT"] = report
        for k, v in (env or {}).items():
            if v is None:
                e.pop(k, None)
            else:
                e[k] = v
        args = list(wrapper) + [self.moeperm, "check"] + list(dirs) + ["--backend", "npu"] + list(extra)
        p = subprocess.run(args, env=e, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                           timeout=600)
        totals = {}
        if os.path.exists(report):
            with open(report) as f:
                for line in f:
                    key, _, value = line.strip().partition(" ")
                    if key == "first_misuse":
                        totals.setdefault("first_misuse", value)
                    elif key:
                        totals[key] = totals.get(key, 0) + int(value)
        return Run(args, p.returncode, p.stdout.decode(errors="replace"), totals)

    def balanced(self, run, loaded=True, unrun_executors=0):
        """Everything the backend took from the runtime came back."""
        r = run.report
        if not loaded:
            expect(not r, "nothing should have been loaded, yet the fake reported %s" % r, run)
            return
        expect(r.get("loads", 0) >= 1, "the fake was never loaded (no report)", run)
        expect(r.get("misuses", 0) == 0, "runtime misuse: %s" % r.get("first_misuse"), run)
        for a, b in (("inits", "finalizes"), ("devices_set", "devices_reset"),
                     ("streams_created", "streams_destroyed"), ("mallocs", "frees"),
                     ("tensors_created", "tensors_destroyed")):
            expect(r[a] == r[b], "%s %d != %s %d" % (a, r[a], b, r[b]), run)
        expect(r.get("int_arrays_created", 0) == r.get("int_arrays_destroyed", 0),
               "int arrays: %d made, %d destroyed" % (r.get("int_arrays_created", 0),
                                                      r.get("int_arrays_destroyed", 0)), run)
        expect(r["live_bytes"] == 0 and r["live_allocations"] == 0,
               "%d bytes in %d allocations left live" % (r["live_bytes"], r["live_allocations"]),
               run)
        # aclnn frees a plan only by running it; a refused workspace
        # allocation strands one, by the vendor's design.
        expect(r["executors_created"] - r["executors_run"] == unrun_executors,
               "%d plans made, %d run" % (r["executors_created"], r["executors_run"]), run)

    # -- scenarios -------------------------------------------------------

    def chip_of(self, case):
        """The chip a case's probs_grad was made for: (ub_bytes, vector_cores)."""
        attrs = self.manifest(case).get("attrs", {})
        return (attrs.get("ub_bytes", A2_CHIP[0]), attrs.get("vector_cores", A2_CHIP[1]))

    def check_by_chip(self, cases):
        """Checks cases as devices would see them: a device is one chip, so
        the cases of each chip run on a fake of that chip.  Returns the runs,
        each balanced and passing."""
        chips = {}
        for case in cases:
            chips.setdefault(self.chip_of(case), []).append(case)
        runs = []
        for (ub, cores), group in sorted(chips.items()):
            # The whole corpus: check walks the directory itself.
            dirs = [self.corpus] if group == self.cases else group
            run = self.check(dirs, {"FAKE_ACL_UB_BYTES": str(ub),
                                    "FAKE_ACL_VECTOR_CORES": str(cores)})
            expect(run.returncode == 0, "the cases of the %d-byte, %d-core chip do not pass on "
                   "the fake" % (ub, cores), run)
            self.balanced(run)
            expect(run.report["operator_runs"] == len(group),
                   "%d cases but %d operator runs" % (len(group), run.report["operator_runs"]),
                   run)
            runs.append(run)
        return runs

    def test_all_cases_pass(self):
        self.check_by_chip(self.cases)

    def test_all_four_operators_pass(self):
        family = find_cases(self.family_root())
        runs = self.check_by_chip(self.cases + family)
        restores = sum(1 for _, _, restore in FAMILY_CASES if restore)
        planned = sum(run.report["int_arrays_planned"] for run in runs)
        expect(planned == restores,
               "%d cases give restore_shape, %d plans got one" % (restores, planned), runs[0])
        for op in ("MoeTokenPermute", "MoeTokenUnpermute", "MoeTokenUnpermuteGrad"):
            expect(any(self.manifest(c)["op"] == op for c in family), "no %s case" % op)

    def chip_suite(self):
        """The generated suite of cases for a chip other than the Atlas A2."""
        root = os.path.join(self.tmp, "chips")
        if not os.path.isdir(root):
            args = [self.moeperm, "golden", "--out", root, "--suite", "unpermute-grad-ub261888"]
            p = subprocess.run(args, stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
            expect(p.returncode == 0, "%s failed: %s" % (" ".join(args), p.stdout.decode()))
        return root

    def test_a_case_of_another_chip_differs_only_in_probs_grad_by_order(self):
        """probs_grad follows the chip's tiling: a device of another chip
        than a case's sums in another order, and the judge says so (when the
        runtime does not name its chip)."""
        other = [c for c in find_cases(self.chip_suite()) if self.chip_of(c) != A2_CHIP]
        expect(other, "the suite has no case for another chip than the Atlas A2")
        (ub, cores) = self.chip_of(other[0])
        same = [c for c in other if self.chip_of(c) == (ub, cores)]
        run = self.check(same, {"FAKE_ACL_UB_BYTES": str(ub), "FAKE_ACL_VECTOR_CORES": str(cores)})
        expect(run.returncode == 0, "the cases pass not even on their own chip", run)
        run = self.check(same)
        expect(run.returncode == 1, "on an Atlas A2 no case of the %d-byte chip differs" % ub, run)
        self.balanced(run)
        expect("diagnosis: order" in run.output and "permuted_tokens_grad:" not in run.output,
               "the difference is not called order, or reaches permuted_tokens_grad", run)

    def test_a_runtime_naming_its_chip_is_judged_on_that_chip_alone(self):
        """A runtime whose aclrtGetSocName() names a chip moeperm knows runs
        only the cases of that chip: a MoeTokenUnpermuteGrad case with probs
        made for another is OTHER-CHIP ("for another chip"), not run, not a
        failure; every other case runs.  A name moeperm does not know
        changes nothing but a note: every case is judged."""
        cases = self.cases + find_cases(self.chip_suite())
        other = [c for c in cases if "probs" in self.manifest(c)["tensors"] and
                 self.chip_of(c) != A2_CHIP]
        expect(other, "no case with probs for another chip than the Atlas A2")
        mine = [c for c in cases if c not in other]
        run = self.check(mine + other, {"FAKE_ACL_SOC_NAME": "Ascend910B2"})
        expect(run.returncode == 0, "cases of another chip fail a run on the Atlas A2", run)
        self.balanced(run)
        for case in other:
            expect(re.search(r"^OTHER-CHIP +%s: for another chip" % re.escape(case), run.output,
                             re.M), "%s is not reported for another chip" % case, run)
        expect(run.report["operator_runs"] == len(mine),
               "%d cases of the chip, %d operator runs" % (len(mine),
                                                          run.report["operator_runs"]), run)
        expect(re.search(r"^total +%d +%d .* %d$" % (len(mine) + len(other), len(mine),
                                                     len(other)), run.output, re.M),
               "the summary does not count %d passes and %d of another chip"
               % (len(mine), len(other)), run)
        run = self.check(other, {"FAKE_ACL_SOC_NAME": "Ascend310P3"})
        expect(run.returncode == 1 and "runs Ascend310P3, a chip moeperm does not know" in
               run.output and "diagnosis: order" in run.output,
               "an unknown chip's run does not judge every case, with a note", run)
        self.balanced(run)

    def domain_suites(self):
        """The four suites of the input domain's edge, generated here (the
        committed corpus may not hold them)."""
        root = os.path.join(self.tmp, "domain")
        if not os.path.isdir(root):
            args = [self.moeperm, "golden", "--out", root, "--suite", "permute-grad-domain",
                    "permute-domain", "unpermute-domain", "unpermute-grad-domain"]
            p = subprocess.run(args, stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
            expect(p.returncode == 0, "%s failed: %s" % (" ".join(args), p.stdout.decode()))
        return root

    def edges_of(self, case):
        """What the device should be handed of the input domain's edge, from
        the manifest alone: (padded, num_topk -1, tokens of rank 3, more
        sorted_indices than read, more rows than slots)."""
        m = self.manifest(case)
        t, op, attrs = m["tensors"], m["op"], m["attrs"]
        if op == "MoeTokenPermute":
            return (False, False, len(t["tokens"]["shape"]) > 2, False, False)
        if op == "MoeTokenPermuteGrad":
            k = max(attrs["top_k"], 1)
            slots = t["input_grad"]["shape"][0] * k
            rows = t["permuted_output_grad"]["shape"][0]
        else:
            k = t["probs"]["shape"][1] if "probs" in t else 1
            n = t["unpermuted_tokens" if op == "MoeTokenUnpermute"
                  else "unpermuted_tokens_grad"]["shape"][0]
            slots, rows = n * k, t["permuted_tokens"]["shape"][0]
        return (attrs["padded_mode"], attrs.get("top_k") == -1, False,
                t["sorted_indices"]["shape"][0] > slots, rows > slots)

    def test_the_input_domains_edge_reaches_the_device_as_given(self):
        """The domain suites pass on the fake, whose planning counts what it
        was handed: every padded_mode true, num_topk -1, rank-3 tokens,
        longer sorted_indices and surplus of rows, as the manifests say."""
        cases = find_cases(self.domain_suites())
        run = self.check([self.domain_suites()])
        expect(run.returncode == 0, "the domain suites do not pass on the fake", run)
        self.balanced(run)
        expect(run.report["operator_runs"] == len(cases),
               "%d cases, %d operator runs" % (len(cases), run.report["operator_runs"]), run)
        edges = [self.edges_of(c) for c in cases]
        for i, counter in enumerate(("padded_plans", "num_topk_minus1_plans", "rank3_plans",
                                     "long_index_plans", "wide_row_plans")):
            want = sum(1 for e in edges if e[i])
            expect(want > 0, "no case of the domain suites has %s" % counter)
            expect(run.report.get(counter, 0) == want,
                   "%d cases should hand the device %s, it counted %d"
                   % (want, counter, run.report.get(counter, 0)), run)

    def chips_suites(self):
        """The cases made for another chip than the Atlas A2: by numbers
        alone (unpermute-grad-ub261888) and by name (unpermute-grad-chips)."""
        root = os.path.join(self.tmp, "named-chips")
        if not os.path.isdir(root):
            args = [self.moeperm, "golden", "--out", root, "--suite", "unpermute-grad-ub261888",
                    "unpermute-grad-chips", "dropped"]
            p = subprocess.run(args, stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
            expect(p.returncode == 0, "%s failed: %s" % (" ".join(args), p.stdout.decode()))
        return root

    def test_a_case_of_another_chip_is_other_chip_in_the_json_and_junit_reports(self):
        """A case made for another chip than the device's is in the JSON
        report with the verdict "other-chip", the device's chip and its own,
        and in the JUnit report as <skipped> with the reason; on its own chip
        it is judged, and the A2's cases are the other chip's."""
        root = self.chips_suites()
        cases = find_cases(root)
        for soc, cores in (("Ascend910B2", 48), ("Ascend910B3", 40)):
            json_path = os.path.join(self.tmp, "report-%s.json" % soc)
            junit_path = os.path.join(self.tmp, "report-%s.xml" % soc)
            run = self.check([root], {"FAKE_ACL_SOC_NAME": soc, "FAKE_ACL_VECTOR_CORES": str(cores)},
                             ["--json", json_path, "--junit", junit_path])
            expect(run.returncode == 0, "cases of another chip fail a run on %s" % soc, run)
            self.balanced(run)
            with open(json_path) as f:
                doc = json.load(f)
            other = {}
            for case in cases:
                m = self.manifest(case)
                mine = self.chip_of(case)
                if "probs" in m["tensors"] and mine != (196352, cores):
                    other[case] = (m["attrs"].get("chip"), mine)
            expect(other and len(other) < len(cases), "%s: no case of another chip, or no "
                   "case of its own" % soc)
            judged = {c["case"]: c for c in doc["cases"]}
            expect(sorted(judged) == cases, "%s: the JSON report does not hold every case" % soc)
            for case, c in judged.items():
                if case not in other:
                    expect(c["verdict"] == "same" and "other_chip" not in c,
                           "%s: %s is %s in the JSON report" % (soc, case, c["verdict"]))
                    continue
                name, (ub, vc) = other[case]
                o = c.get("other_chip", {})
                expect(c["verdict"] == "other-chip" and c["outputs"] == {} and
                       o.get("device") == {"name": soc, "ub_bytes": 196352,
                                           "vector_cores": cores} and
                       o.get("case") == {"name": name, "ub_bytes": ub, "vector_cores": vc} and
                       o.get("detail", "").startswith("for another chip"),
                       "%s: %s is not other-chip with both chips in the JSON report: %s"
                       % (soc, case, json.dumps(c)))
            expect(doc["summary"]["other_chip"] == len(other) and
                   doc["summary"]["same"] == len(cases) - len(other),
                   "%s: the JSON summary is %s" % (soc, doc["summary"]))
            with open(junit_path) as f:
                xml = f.read()
            expect('skipped="%d"' % len(other) in xml,
                   "%s: the JUnit testsuite does not count %d skipped" % (soc, len(other)))
            for case in cases:
                name = re.escape(os.path.basename(case))
                block = re.search(r'<testcase [^>]*name="%s"[^>]*?(/>|>(.*?)</testcase>)' % name,
                                  xml, re.S)
                expect(block is not None, "%s: no testcase %s in the JUnit report" % (soc, case))
                skipped = re.search(r'<skipped message="for another chip: [^"]*"/>',
                                    block.group(0))
                expect((skipped is not None) == (case in other),
                       "%s: %s is %sskipped in the JUnit report: %s"
                       % (soc, case, "not " if case in other else "", block.group(0)))

    def test_split_runtime_and_operator_libraries_pass(self):
        libs = self.lib("FAKE_ACL_RT") + ":" + self.lib("FAKE_ACL_OP")
        run = self.check(self.fault_cases(), {"MOEPERM_ASCEND_LIBS": libs})
        expect(run.returncode == 0, "runtime and operator in two libraries fail", run)
        self.balanced(run)

    def test_default_search_finds_ascend_home_path(self):
        run = self.check(self.small, {"MOEPERM_ASCEND_LIBS": None,
                                      "ASCEND_HOME_PATH": self.lib("FAKE_ASCEND_HOME")})
        expect(run.returncode == 0, "$ASCEND_HOME_PATH/lib64/libascendcl.so not used", run)
        self.balanced(run)

    def test_flipped_bit_is_a_mismatch_naming_token_and_column(self):
        # A case with at least two tokens, so the token is not trivially 0.
        case = next((c for c in sorted(self.cases, key=case_size)
                     if case_shape(c)["op"] == "MoeTokenPermuteGrad" and
                     case_shape(c)["tokens_num"] >= 2 and
                     case_shape(c)["hidden_size"] >= 3), None)
        expect(case is not None, "no case with 2 tokens and 3 columns in the corpus")
        m = case_shape(case)
        token, column = 1, min(2, m["hidden_size"] - 1)
        element = token * m["hidden_size"] + column
        # The top exponent bit: changes every value, NaN or not, so even a
        # NaN-tolerant comparison must see it.
        bit = 30 if m["dtype"] == "float32" else 14
        run = self.check([case], {"FAKE_ACL_FLIP": "%d:%d" % (element, bit)})
        expect(run.returncode == 1, "a flipped bit is not a mismatch (exit 1)", run)
        self.balanced(run)
        expect(re.search(r"\b1 of \d+ elements differ", run.output) is not None,
               "the report does not say exactly one element differs", run)
        m = re.search(r"token %d, column %d: expected 0x([0-9a-f]+) .*actual 0x([0-9a-f]+)"
                      % (token, column), run.output)
        expect(m is not None, "the report does not name token %d, column %d" % (token, column),
               run)
        expect(int(m.group(1), 16) ^ int(m.group(2), 16) == 1 << bit,
               "expected and actual bits differ in more than bit %d" % bit, run)

    def test_flipped_bit_in_a_family_output_is_named_by_output_token_and_column(self):
        root = self.family_root()
        # (case, output index in argument order, its name, token, column, bit,
        # and how the report names that element)
        for name, output, tensor, token, column, bit, named in (
                ("unpermute-grad-bf16-pfloat32-restore", 1, "probs_grad", 1, 2, 30,
                 "token 1, slot 2"),
                ("unpermute-grad-bf16-pfloat32-restore", 0, "permuted_tokens_grad", 3, 4, 14,
                 "row 3, column 4"),
                ("permute-bf16", 0, "permuted_tokens", 2, 5, 14, "row 2, column 5"),
                ("permute-bf16", 1, "sorted_indices", 9, 0, 3, "slot 9")):
            case = os.path.join(root, name)
            shape = self.manifest(case)["tensors"][tensor]["shape"]
            element = token * (shape[1] if len(shape) == 2 else 1) + column
            run = self.check([case], {"FAKE_ACL_FLIP": "%d:%d" % (element, bit),
                                      "FAKE_ACL_FLIP_OUTPUT": str(output)})
            expect(run.returncode == 1, "a flipped bit in %s is not a mismatch (exit 1)" % tensor,
                   run)
            self.balanced(run)
            expect(re.search(r"^\s*%s:\s*$" % tensor, run.output, re.M) is not None and
                   re.search(r"\b1 of \d+ elements differ", run.output) is not None,
                   "the report does not say one element of %s differs" % tensor, run)
            m = re.search(r"%s: expected 0x([0-9a-f]+) .*actual 0x([0-9a-f]+)" % named,
                          run.output)
            expect(m is not None, "the report does not name %s's %s" % (tensor, named), run)
            expect(int(m.group(1), 16) ^ int(m.group(2), 16) == 1 << bit,
                   "expected and actual bits differ in more than bit %d" % bit, run)

    def each_call_fails_cleanly(self, var, counter, call, code, least_per_case=3):
        """Fails each call of one kind in turn, over a case of every
        operator: the fake counts the calls in its report under counter and
        fails the one var names.  Each must be exit 3 with the call named,
        and balance; a refused workspace (the last allocation of a case)
        strands the plan made just before it, by aclnn's design."""
        cases = self.fault_cases()
        clean = self.check(cases)
        expect(clean.returncode == 0, "the small cases do not pass", clean)
        calls = clean.report[counter]
        expect(calls >= least_per_case * len(cases),
               "only %d calls counted as %s" % (calls, counter), clean)
        for n in range(1, calls + 1):
            run = self.check(cases, {var: str(n)})
            expect(run.returncode == 3, "%s=%d: not exit 3" % (var, n), run)
            expect(call in run.output and code in run.output and var in run.output,
                   "%s=%d: the message lacks %s, %s or the runtime's own text"
                   % (var, n, call, code), run)
            self.balanced(run, unrun_executors=1 if "of workspace)" in run.output else 0)

    def test_each_refused_allocation_is_a_failure_that_leaks_nothing(self):
        self.each_call_fails_cleanly("FAKE_ACL_FAIL_MALLOC", "malloc_calls", "aclrtMalloc",
                                     "207001")

    def test_each_failed_copy_is_a_failure_that_leaks_nothing(self):
        self.each_call_fails_cleanly("FAKE_ACL_FAIL_MEMCPY", "memcpys", "aclrtMemcpy", "507033")

    def test_each_refused_tensor_is_a_failure_that_leaks_nothing(self):
        self.each_call_fails_cleanly("FAKE_ACL_FAIL_TENSOR", "tensor_calls", "aclCreateTensor",
                                     "returned NULL")

    def test_each_refused_int_array_is_a_failure_that_leaks_nothing(self):
        # One per case of MoeTokenUnpermute(Grad) given a restore_shape.
        self.each_call_fails_cleanly("FAKE_ACL_FAIL_INT_ARRAY", "int_array_calls",
                                     "aclCreateIntArray(restore_shape)", "returned NULL",
                                     least_per_case=0)

    def test_family_operator_refusal_and_run_failure_name_the_operator(self):
        for case in self.family_small():
            op = self.manifest(case)["op"]
            for var, call, code in (("FAKE_ACL_FAIL_PLAN", "aclnn%sGetWorkspaceSize failed" % op,
                                     "161002"),
                                    ("FAKE_ACL_FAIL_RUN", "aclnn%s failed" % op, "361001")):
                run = self.check([case], {var: "1"})
                expect(run.returncode == 3, "%s, %s=1: not exit 3" % (op, var), run)
                expect(call in run.output and code in run.output and var in run.output,
                       "%s, %s=1: the message lacks %s, %s or the runtime's text"
                       % (op, var, call, code), run)
                self.balanced(run)

    def test_operator_refusal_is_a_failure_with_its_code(self):
        run = self.check(self.small, {"FAKE_ACL_FAIL_PLAN": "1"})
        expect(run.returncode == 3, "operator refusal: not exit 3", run)
        expect("161002" in run.output and "aclnnMoeTokenPermuteGradGetWorkspaceSize" in run.output,
               "the message lacks the call or 161002", run)
        expect("injected refusal" in run.output, "aclGetRecentErrMsg() text not shown", run)
        self.balanced(run)

    def test_operator_run_failure_is_a_failure_with_its_code(self):
        run = self.check(self.small, {"FAKE_ACL_FAIL_RUN": "2"})
        expect(run.returncode == 3, "operator run failure: not exit 3", run)
        expect("361001" in run.output and "aclnnMoeTokenPermuteGrad " in run.output,
               "the message lacks the call or 361001", run)
        self.balanced(run)

    def test_stream_failure_is_a_failure(self):
        run = self.check(self.small, {"FAKE_ACL_FAIL_SYNC": "1"})
        expect(run.returncode == 3, "stream failure: not exit 3", run)
        expect("aclrtSynchronizeStream" in run.output and "507000" in run.output,
               "the message does not name aclrtSynchronizeStream and its code", run)
        self.balanced(run)

    def test_missing_runtime_is_named(self):
        run = self.check(self.small, {"MOEPERM_ASCEND_LIBS": "/nonexistent/libascendcl.so"})
        expect(run.returncode == 3, "missing listed library: not exit 3", run)
        expect("no Ascend runtime found" in run.output and "/nonexistent/libascendcl.so" in
               run.output, "the message does not say what was looked for", run)
        self.balanced(run, loaded=False)
        if self.runtime_on_loader_path():
            print("note: libascendcl.so is on this host's loader path; the default search "
                  "cannot fail here, so that half is skipped")
            return
        run = self.check(self.small, {"MOEPERM_ASCEND_LIBS": None,
                                      "ASCEND_HOME_PATH": "/nonexistent/ascend"})
        expect(run.returncode == 3, "no runtime anywhere: not exit 3", run)
        expect("no Ascend runtime found" in run.output and "/nonexistent/ascend/lib64" in
               run.output, "the message does not list where it looked", run)
        self.balanced(run, loaded=False)

    def test_missing_symbol_is_named(self):
        for var, symbol in (("FAKE_ACL_NOSYNC", "aclrtSynchronizeStream"),
                            ("FAKE_ACL_RT", "aclnnMoeTokenPermuteGradGetWorkspaceSize")):
            run = self.check(self.small, {"MOEPERM_ASCEND_LIBS": self.lib(var)})
            expect(run.returncode == 3, "no %s: not exit 3" % symbol, run)
            expect(symbol in run.output, "the message does not name %s" % symbol, run)
            expect(run.report.get("inits", 0) == 0, "the runtime was used regardless", run)

    def test_missing_family_symbol_is_named_and_the_rest_pass(self):
        """A runtime without one operator (or without the int arrays)
        fails exactly the cases that need it, naming the missing symbol,
        and passes the others."""
        cases = self.fault_cases()
        for var, missing_op in MISSING:
            run = self.check(cases, {"MOEPERM_ASCEND_LIBS": self.lib(var)})
            expect(run.returncode == 3, "%s: not exit 3" % var, run)
            self.balanced(run)
            for case in cases:
                m = self.manifest(case)
                if missing_op is not None:
                    fails = m.get("op") == missing_op
                    sentence = "the Ascend runtime has no aclnn%sGetWorkspaceSize, which %s needs" \
                        % (missing_op, missing_op)
                else:
                    fails = "restore_shape" in m.get("attrs", {})
                    sentence = "the Ascend runtime has no aclCreateIntArray, which restore_shape needs"
                line = next((l for l in run.output.splitlines() if l.endswith(case) or
                             (case + ":") in l), "")
                if fails:
                    expect(line.startswith("BACKEND-FAILURE") and sentence in line,
                           "%s: %s does not fail naming what is missing" % (var, case), run)
                else:
                    expect(line.startswith("pass"), "%s: %s does not pass" % (var, case), run)

    def test_device_is_chosen_by_flag_or_environment(self):
        run = self.check(self.small, {"FAKE_ACL_DEVICES": "2"}, ["--device", "1"])
        expect(run.returncode == 0, "--device 1 of 2 fails", run)
        self.balanced(run)
        run = self.check(self.small, {}, ["--device", "5"])
        expect(run.returncode == 3 and "aclrtSetDevice(5)" in run.output,
               "--device 5 of 1 is not a failure naming aclrtSetDevice(5)", run)
        self.balanced(run)
        run = self.check(self.small, {"MOEPERM_NPU_DEVICE": "7"})
        expect(run.returncode == 3 and "aclrtSetDevice(7)" in run.output,
               "MOEPERM_NPU_DEVICE=7 is not used", run)
        self.balanced(run)

    def test_host_memory_is_freed_under_valgrind(self):
        """The fake accounts for device resources; valgrind for the host
        memory the backend allocates around them, on each failure path."""
        valgrind = shutil.which("valgrind")
        if valgrind is None:
            print("SKIP: valgrind is not installed")
            sys.exit(77)
        wrapper = [valgrind, "-q", "--leak-check=full", "--errors-for-leak-kinds=definite",
                   "--error-exitcode=99"]
        for env, code in (({}, 0), ({"FAKE_ACL_FAIL_MALLOC": "4"}, 3),
                          ({"FAKE_ACL_FAIL_TENSOR": "2"}, 3), ({"FAKE_ACL_FAIL_PLAN": "1"}, 3),
                          ({"FAKE_ACL_FAIL_RUN": "1"}, 3), ({"FAKE_ACL_FAIL_SYNC": "1"}, 3),
                          ({"FAKE_ACL_FAIL_INT_ARRAY": "2"}, 3),
                          ({"MOEPERM_ASCEND_LIBS": self.lib("FAKE_ACL_NOSYNC")}, 3),
                          ({"MOEPERM_ASCEND_LIBS": self.lib("FAKE_ACL_NOINTARRAY")}, 3)):
            run = self.check(self.fault_cases(), env, wrapper=wrapper)
            expect(run.returncode == code, "under valgrind with %s: exit %d, not %d"
                   % (env, run.returncode, code), run)

    def manifest(self, case):
        with open(os.path.join(case, "case.json")) as f:
            return json.load(f)

    def runtime_on_loader_path(self):
        """Whether a real runtime is installed where the loader looks."""
        e = {k: v for k, v in os.environ.items() if k != "LD_LIBRARY_PATH"}
        code = "import ctypes,sys\ntry: ctypes.CDLL('libascendcl.so')\nexcept OSError: sys.exit(1)"
        return subprocess.run([sys.executable, "-c", code], env=e).returncode == 0


def main():
    names = sorted(n[5:] for n in dir(Scenarios) if n.startswith("test_"))
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("scenario", choices=names + ["all"])
    ap.add_argument("--moeperm", required=True)
    ap.add_argument("--corpus", action="append", required=True)
    opts = ap.parse_args()
    try:
        s = Scenarios(opts)
        for name in names if opts.scenario == "all" else [opts.scenario]:
            getattr(s, "test_" + name)()
            print("ok %s (%d runs of moeperm, corpus %s)" % (name, s.runs, s.corpus))
    except Failed as e:
        print("FAIL: %s" % e)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())

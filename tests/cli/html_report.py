#!/usr/bin/env python3
"""The HTML report of `moeperm check --html` and `compare --html`, read
back strictly: every element closed and nested, nothing fetched from
anywhere, the verdict table's counts, the first differences, the findings
and the statistics equal to the JSON report's of the same run, the maps'
blocks where the differences were planted (and aggregated as
docs/judging.md says for a tensor of more than 512 rows), and a case
directory named with <>&"' and bytes that are not UTF-8 shown escaped
in a page that still parses.  The --html path is refused as --json's is.

usage: html_report.py MOEPERM         (exit 77, "skipped", without numpy)
"""
import json
import math
import os
import re
import shutil
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import html_pages as hp  # noqa: E402  (exits 77 without numpy)

np = hp.np

moeperm = sys.argv[1]
tmp = tempfile.mkdtemp(prefix="html_report.")
checks = hp.Checks()
fail, check = checks.fail, checks.check

corpus, out, cases, odd = hp.make_corpus(moeperm, tmp)
page_path = os.path.join(tmp, "page.html")
json_path = os.path.join(tmp, "report.json")
hp.run(moeperm, "check", corpus, "--outputs", out, "--html", page_path, "--json", json_path,
       expect=1)
with open(json_path) as f:
    doc = json.load(f)

# --- the page as a document --------------------------------------------
try:
    page, raw = hp.parse(page_path)
except UnicodeDecodeError as e:
    fail("the page is not well-formed UTF-8: %s" % e)
    sys.exit(1)
check(not page.errors, "every element is closed and nested properly", page.errors[:5])
check(all(u.startswith("#") for u in page.urls) and page.urls,
      "every link is to a place in the page itself", [u for u in page.urls if
                                                       not u.startswith("#")])
forbidden = [n.tag for n in page.root.all() if n.tag in
             ("script", "link", "img", "iframe", "object", "embed", "base", "form", "image")]
style = "".join(n.text() for n in page.root.all("style"))
inline = " ".join(n.attrs.get("style", "") for n in page.root.all() if n.attrs.get("style"))
check(not forbidden and "url(" not in style + inline and "@import" not in style,
      "no script, no external resource, no url() in the style", forbidden)
csp = [n.attrs.get("content", "") for n in page.root.all("meta")
       if (n.attrs.get("http-equiv") or "").lower() == "content-security-policy"]
check(csp and "default-src 'none'" in csp[0], "the page forbids itself every fetch", csp)

# --- the odd name -------------------------------------------------------
odd_path = hp.escaped_text(odd)
check(hp.ODD_NAME[:7] not in raw and b"<b>&amp;" not in raw and b"\xff\xfe" not in raw,
      "the odd directory name's markup and bytes never reach the file raw")
rows = page.root.first("table", "verdicts").first("tbody").kids("tr")
paths = [r.first("td", "path").text() for r in rows]
json_paths = [c["case"] for c in doc["cases"]]
check(odd_path in paths and odd_path in json_paths,
      "the odd name reads back as the JSON report writes it (bad bytes as \\xHH)",
      (odd_path, paths))

# --- the verdict table against the JSON report ---------------------------
check(len(rows) == len(doc["cases"]) == doc["summary"]["cases"],
      "one row per case, as many as the JSON report has", (len(rows), len(doc["cases"])))
mismatches = []
for row, case in zip(rows, doc["cases"]):
    got_path = row.first("td", "path").text()
    verdict = row.first("td", "verdict").text()
    op = row.first("td", "op").text()
    if got_path != case["case"] or verdict != case["verdict"] or op != (case["op"] or ""):
        mismatches.append((got_path, verdict, op, case["case"], case["verdict"], case["op"]))
    outs = {}
    for o in row.all("div", "out"):
        nan = o.first("span", "nan")
        outs[o.first("span", "name").text()] = (
            int(o.first("span", "differ").text()), int(o.first("span", "elements").text()),
            int(o.first("span", "ulp").text()), int(nan.text()) if nan else 0,
            o.attrs.get("data-verdict"))
    want = {k: (v["differ"], v["elements"], v["max_ulp"], v["nan_mismatch"], v["verdict"])
            for k, v in case["outputs"].items()}
    if outs != want:
        mismatches.append((got_path, outs, want))
    if case["verdict"] in ("error", "missing") and \
            row.first("span", "error-text").text() != case["error"]:
        mismatches.append((got_path, row.first("span", "error-text").text(), case["error"]))
check(not mismatches, "each row's path, operator, verdict, per-output counts, max ulp, NaN "
      "count and error equal the JSON report's", mismatches[:3])
verdicts = [r.first("td", "verdict").text() for r in rows]
check(verdicts.count("missing") == 1 and verdicts.count("same") == 1 and
      verdicts.count("different") == 4, "the corpus has the planted verdicts", verdicts)

# --- the sections ---------------------------------------------------------
sections = {}
for s in page.root.all("section", "case"):
    sections[s.first("span", "path").text()] = s
by_path = {c["case"]: c for c in doc["cases"]}
differing_cases = [c["case"] for c in doc["cases"] if any(
    o["differ"] > 0 for o in c["outputs"].values())]
check(sorted(sections) == sorted(differing_cases),
      "a section for each case with a differing output, none for the others",
      (sorted(sections), differing_cases))
links = [r.first("a") for r in rows]
check(all((a is not None) == (r.first("td", "path").text() in sections)
          for a, r in zip(links, rows)) and
      all(a is None or any(s.attrs.get("id") == a.attrs["href"][1:]
                           for s in sections.values()) for a in links),
      "each differing case's row links to its section")


def output_divs(section):
    return {d.first("h3").children[0].strip(): d for d in section.all("div", "output")}


def map_rects(div):
    svg = div.first("svg")
    bg = [r for r in svg.all("rect") if "bg" in r.classes()]
    cells = []
    for r in svg.all("rect"):
        if "bg" in r.classes() or "ring" in r.classes():
            continue
        m = re.fullmatch(r"(.*): (\d+) of (\d+) elements differ \(.*\)", r.first("title").text())
        cells.append({"region": m.group(1), "count": int(m.group(2)), "size": int(m.group(3)),
                      "x": int(r.attrs["x"]), "y": int(r.attrs["y"]),
                      "w": int(r.attrs["width"]), "h": int(r.attrs["height"]),
                      "fill": r.attrs["fill"]})
    return bg, cells


def region(noun_rows, noun_cols, r0, r1, c0, c1):
    def span(noun, a, b):
        return "%s %d" % (noun, a) if a == b else "%ss %d-%d" % (noun, a, b)
    text = span(noun_rows, r0, r1)
    return text + ", " + span(noun_cols, c0, c1) if noun_cols else text


def level_colours():
    """The legend's colours by label, read from the page."""
    legend = page.root.first("div", "legend")
    return {i.parent.text().strip(): re.search(r"#[0-9a-f]{6}", i.attrs["style"]).group(0)
            for i in legend.all("i")}


colours = level_colours()

# permute: blocks of one element; each planted rectangle is one map rectangle.
permute = sections[os.path.join(corpus, "permute")]
divs = output_divs(permute)
with open(os.path.join(cases["permute"], "case.json")) as f:
    shapes = {k: v["shape"] for k, v in json.load(f)["tensors"].items()}
nouns = {"permuted_tokens": ("row", "column"), "sorted_indices": ("slot", None)}
for name, plants in hp.PLANTS["permute"].items():
    bg, cells = map_rects(divs[name])
    rows_n = shapes[name][0]
    cols_n = shapes[name][1] if len(shapes[name]) > 1 else 1
    want = sorted((region(nouns[name][0], nouns[name][1], r0, r1, c0, c1),
                   (r1 - r0 + 1) * (c1 - c0 + 1)) for r0, r1, c0, c1, _ in plants)
    got = sorted((c["region"], c["count"]) for c in cells)
    check(got == want, "%s: one map rectangle per planted block, titled with its %s and "
          "count" % (name, "rows and columns" if nouns[name][1] else "slots"), (got, want))
    check(all(c["count"] == c["size"] and c["fill"] == colours["all"] for c in cells),
          "%s: fully differing blocks have the colour the legend calls 'all'" % name)
    if nouns[name][1]:
        b = bg[0]
        sx, sy = int(b.attrs["width"]) // cols_n, int(b.attrs["height"]) // rows_n
        geometry = sorted((c["x"], c["y"], c["w"], c["h"]) for c in cells)
        want_geometry = sorted((int(b.attrs["x"]) + c0 * sx, int(b.attrs["y"]) + r0 * sy,
                                (c1 - c0 + 1) * sx, (r1 - r0 + 1) * sy)
                               for r0, r1, c0, c1, _ in plants)
        check(sx * cols_n == int(b.attrs["width"]) and geometry == want_geometry,
              "%s: the rectangles lie over the planted rows and columns" % name,
              (geometry, want_geometry))
    # The first differences and the first-difference marks.
    j = by_path[os.path.join(corpus, "permute")]["outputs"][name]
    table = divs[name].first("table", "first").first("tbody").kids("tr")
    first = [[td.text() for td in tr.kids("td")] for tr in table]
    # Bits compared as numbers: the JSON report pads int32 to 4 digits, the
    # page (like the text report) to the dtype's width.
    want_first = [[int(i) for i in e["index"][:2 if nouns[name][1] else 1]] +
                  [int(e["expected"], 16), int(e["actual"], 16)] for e in j["first"]]
    # the cells: place, expected bits and value, actual bits and value, ulp
    got_first = [[int(x) for x in r[:2 if nouns[name][1] else 1]] +
                 [int(r[-5], 16), int(r[-3], 16)] for r in first]
    check(got_first == want_first, "%s: the first differences' places and bits are the JSON "
          "report's" % name, (got_first[:2], want_first[:2]))
    marks = [p.first("title").text() for p in divs[name].first("svg").all("path", "first")]
    e = j["first"][0]
    place = "%s %d" % (nouns[name][0], e["index"][0]) + (
        ", %s %d" % (nouns[name][1], e["index"][1]) if nouns[name][1] else "")
    bits = [[int(x, 16) for x in re.findall(r"0x[0-9a-f]+", m)] for m in marks]
    check(len(marks) == 2 and all(place + ":" in m for m in marks) and
          all(b == [int(e["expected"], 16), int(e["actual"], 16)] for b in bits),
          "%s: the marks' hover text names the first difference and its bits" % name, marks)

# permute-tall: more than 512 rows and columns, so blocks of ceil(rows/512)
# rows and ceil(cols/512) columns.  Each rectangle's title counts the planted
# elements inside it, its edges fall on block edges, and together the
# rectangles hold every planted element.
tall = output_divs(sections[os.path.join(corpus, "permute-tall")])["permuted_tokens"]
bg, cells = map_rects(tall)
with open(os.path.join(cases["permute-tall"], "case.json")) as f:
    rows_n, cols_n = json.load(f)["tensors"]["permuted_tokens"]["shape"]
bh, bw = -(-rows_n // 512), -(-cols_n // 512)
mask = np.zeros((rows_n, cols_n), dtype=bool)
for r0, r1, c0, c1, _ in hp.PLANTS["permute-tall"]["permuted_tokens"]:
    mask[r0:r1 + 1, c0:c1 + 1] = True
covered = np.zeros_like(mask)
bad, blocks = [], []
for c in cells:
    m = re.fullmatch(r"rows? (\d+)(?:-(\d+))?, columns? (\d+)(?:-(\d+))?", c["region"])
    r0, c0 = int(m.group(1)), int(m.group(3))
    r1, c1 = int(m.group(2) or r0), int(m.group(4) or c0)
    aligned = r0 % bh == 0 and c0 % bw == 0 and (r1 + 1 == rows_n or (r1 + 1) % bh == 0) and \
        (c1 + 1 == cols_n or (c1 + 1) % bw == 0)
    area = (r1 - r0 + 1) * (c1 - c0 + 1)
    if not aligned or c["count"] != mask[r0:r1 + 1, c0:c1 + 1].sum() or c["size"] != area:
        bad.append((c["region"], c["count"], c["size"]))
    covered[r0:r1 + 1, c0:c1 + 1] = True
    blocks.append((r0, r1, c0, c1, c["fill"]))
check(bh > 1 and bw > 1 and not bad, "a large output's rectangles fall on blocks of %d rows "
      "and %d columns and count the planted elements inside them" % (bh, bw), bad[:3])
check(not (mask & ~covered).any() and sum(c["count"] for c in cells) == mask.sum() ==
      by_path[os.path.join(corpus, "permute-tall")]["outputs"]["permuted_tokens"]["differ"],
      "the rectangles hold every planted element, and their counts add up to the judge's")
check(len(cells) < 12, "whole blocks merge into few rectangles", len(cells))
# Blocks of a pixel or two: each has a ring around it, in its colour.
rings = sorted((int(r.attrs["x"]) + 3, int(r.attrs["y"]) + 3, int(r.attrs["width"]) - 6,
                int(r.attrs["height"]) - 6, r.attrs["stroke"])
               for r in tall.first("svg").all("rect", "ring"))
small = sorted((c["x"], c["y"], c["w"], c["h"], c["fill"]) for c in cells
               if c["w"] < 3 and c["h"] < 3)
check(small and rings == small, "each rectangle too small to see is ringed, and only those",
      (rings, small))

def colour_for(count, size):
    """The legend's colour for a fraction, by its labels: "up to X%", "over
    X%" and "all"."""
    if count == size:
        return colours["all"]
    bounds = sorted((int(re.fullmatch(r"up to (\d+)%", label).group(1)), colour)
                    for label, colour in colours.items() if label.startswith("up to"))
    for percent, colour in bounds:
        if 100 * count <= percent * size:
            return colour
    return next(c for label, c in colours.items() if label.startswith("over"))


wrong = [(c["region"], c["count"], c["size"], c["fill"])
         for s in sections.values() for d in s.all("div", "output") for c in map_rects(d)[1]
         if c["fill"] != colour_for(c["count"], c["size"])]
check(not wrong, "every block has the legend's colour for the fraction of it that differs",
      wrong[:3])
# Down to each block: a rectangle only joins blocks of its colour.
mixed = []
for r0, r1, c0, c1, fill in blocks:
    for y in range(r0, r1 + 1, bh):
        for x in range(c0, c1 + 1, bw):
            block = mask[y:min(y + bh, rows_n), x:min(x + bw, cols_n)]
            if colour_for(int(block.sum()), block.size) != fill:
                mixed.append((y, x, int(block.sum()), block.size, fill))
check(not mixed, "each block inside a rectangle has the rectangle's colour (1, 2, 6 and 7 "
      "of 12 differing among them)", mixed[:3])
caption = tall.first("figcaption").text()
check("Each block: %d rows \u00d7 %d columns" % (bh, bw) in caption, "the caption says how many rows a block holds",
      caption)

# pg-shift: the diagnosis, and the statistics of every output.
pg = sections[os.path.join(corpus, "pg-shift")]
j = by_path[os.path.join(corpus, "pg-shift")]["outputs"]
findings = [(li.first("code", "id").text(), "exact" in [c for s in li.kids("span")
                                                        for c in s.classes()],
             li.first("span", "detail").text())
            for li in output_divs(pg)["input_grad"].first("ul", "findings").kids("li")]
want = [(d["id"], d["exact"], d["detail"]) for d in j["input_grad"]["diagnosis"]]
check(findings == want and any(f[0] == "token-block-shift" for f in findings),
      "the findings (id, exact or partly, sentence) are the JSON report's, the planted bug "
      "among them", (findings, want))
stat_keys = ["max_abs_error", "max_rel_error", "cosine", "mare", "mere", "rmse"]
bad = []
for sect_path, sect in sections.items():
    outs = by_path[sect_path]["outputs"]
    for tr in sect.first("table", "stats").first("tbody").kids("tr"):
        name = tr.first("th").text()
        tds = tr.kids("td")
        st = outs[name]["stats"]
        finite = tds[0].text().split(" of ")
        if int(finite[0]) != st["finite"] or int(finite[1]) != outs[name]["elements"]:
            bad.append((sect_path, name, "finite", tds[0].text()))
        for key, td in zip(stat_keys, tds[1:]):
            v = st[key]
            got = float(td.attrs["title"]) if "title" in td.attrs and "na" not in td.classes() \
                else None
            if (v is None) != (got is None) or (v is not None and not
                                                 math.isclose(got, v, rel_tol=1e-15)):
                bad.append((sect_path, name, key, got, v))
check(not bad, "every statistic of every output shown equals the JSON report's", bad[:4])

# --- compare --html, and the refusals --------------------------------------
single = os.path.join(tmp, "single.html")
hp.run(moeperm, "compare", cases["permute"], os.path.join(out, "permute"), "--html", single,
       expect=1)
p1, _ = hp.parse(single)
rows1 = p1.root.first("table", "verdicts").first("tbody").kids("tr")
check(not p1.errors and len(rows1) == 1 and rows1[0].first("td", "verdict").text() ==
      "different", "compare --html writes a page of one case")
manifest = os.path.join(cases["permute"], "case.json")
before = open(manifest, "rb").read()
for target, why in ((manifest, "golden case"), ("-", "expected a file name"),
                    (corpus, "is a directory")):
    p = hp.run(moeperm, "compare", cases["permute"], os.path.join(out, "permute"),
               "--html", target)
    err = p.stderr.decode(errors="replace")
    if p.returncode != 2 or why not in err or "--html" not in err:
        fail("--html %s: exit %d, %s" % (target, p.returncode, err))
        break
else:
    check(True, "--html refuses a case's file, '-' and a directory, with exit 2 and a sentence")
link = os.path.join(tmp, "link.html")
os.symlink(single, link)
p = hp.run(moeperm, "check", corpus, "--outputs", out, "--html", link)
check(p.returncode == 2 and b"symbolic link" in p.stderr and p.stdout == b"",
      "check --html refuses a symbolic link before judging anything", p.stderr[-300:])
check(open(manifest, "rb").read() == before and os.path.islink(link),
      "nothing refused was touched")
leftovers = [n for n in os.listdir(tmp) if n.startswith(".")]
check(not leftovers, "no temporary is left beside the pages", leftovers)

shutil.rmtree(tmp)
checks.exit()

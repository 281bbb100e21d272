"""What the tests of the HTML report share: a corpus with differences
planted where the tests know them, and a strict reader of the page.

The reader is Python's html.parser with a stack: every element must be
closed, in order (only HTML's void elements stand alone), and it builds a
small tree the tests query by tag and class.
"""
import json
import os
import subprocess
import sys
from html.parser import HTMLParser

try:
    import numpy as np
except ImportError:
    print("numpy is not available: skipped")
    sys.exit(77)

VOID = {"area", "base", "br", "col", "embed", "hr", "img", "input", "link", "meta", "source",
        "track", "wbr"}
# Inside inline SVG, elements may close themselves ("<rect .../>").
SVG = {"svg", "rect", "path", "title", "g", "line", "text"}

# A directory name that HTML must escape, with bytes that are not UTF-8.
ODD_NAME = "odd <b>&amp;\"quoted\" 'x'\t\xe9".encode() + b"\xff\xfe\xc3("

DTYPES = {"bf16": "<u2", "float16": "<u2", "float32": "<u4", "int32": "<i4", "int8": "<i1"}


class Node:
    def __init__(self, tag, attrs, parent):
        self.tag, self.attrs, self.parent = tag, dict(attrs), parent
        self.children = []  # Nodes and strings

    def classes(self):
        return (self.attrs.get("class") or "").split()

    def text(self):
        return "".join(c if isinstance(c, str) else c.text() for c in self.children)

    def all(self, tag=None, cls=None):
        for c in self.children:
            if isinstance(c, Node):
                if (tag is None or c.tag == tag) and (cls is None or cls in c.classes()):
                    yield c
                yield from c.all(tag, cls)

    def first(self, tag=None, cls=None):
        return next(self.all(tag, cls), None)

    def kids(self, tag=None):
        return [c for c in self.children if isinstance(c, Node) and (tag is None or c.tag == tag)]


class StrictPage(HTMLParser):
    """Parses a page, recording every nesting error in self.errors."""

    def __init__(self):
        super().__init__(convert_charrefs=True)
        self.root = Node("#document", [], None)
        self.at = self.root
        self.errors = []
        self.urls = []  # every src/href/xlink:href/action value

    def handle_starttag(self, tag, attrs):
        for k, v in attrs:
            if k in ("src", "href", "xlink:href", "action", "data", "poster", "srcset"):
                self.urls.append(v or "")
        node = Node(tag, attrs, self.at)
        self.at.children.append(node)
        if tag not in VOID:
            self.at = node

    def handle_startendtag(self, tag, attrs):
        if tag not in VOID and tag not in SVG:
            self.errors.append("<%s/> is not a void element at %s" % (tag, self.getpos()))
        self.handle_starttag(tag, attrs)
        if tag not in VOID:
            self.at = self.at.parent

    def handle_endtag(self, tag):
        if tag in VOID:
            self.errors.append("</%s> closes a void element at %s" % (tag, self.getpos()))
            return
        if self.at.tag != tag:
            self.errors.append("</%s> closes <%s> at %s" % (tag, self.at.tag, self.getpos()))
            return
        self.at = self.at.parent

    def handle_data(self, data):
        self.at.children.append(data)

    def close(self):
        super().close()
        if self.at is not self.root:
            self.errors.append("<%s> is never closed" % self.at.tag)


class Checks:
    """ok/FAIL lines and a count of failures, as the other CLI tests print."""

    def __init__(self):
        self.failures = 0

    def fail(self, what):
        self.failures += 1
        print("FAIL " + what)

    def check(self, cond, what, detail=""):
        if cond:
            print("ok   " + what)
        else:
            self.fail(what + (": " + str(detail) if detail != "" else ""))

    def exit(self):
        print("%d failure%s" % (self.failures, "" if self.failures == 1 else "s"))
        sys.exit(1 if self.failures else 0)


def parse(path):
    """The page's tree and parser; the file must be well-formed UTF-8."""
    with open(path, "rb") as f:
        raw = f.read()
    page = StrictPage()
    page.feed(raw.decode("utf-8"))  # strict: raises on a bad byte
    page.close()
    return page, raw


def run(moeperm, *args, expect=None):
    p = subprocess.run([moeperm, *args], stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    if expect is not None and p.returncode != expect:
        raise SystemExit("moeperm %s: exit %d, expected %d\n%s%s"
                         % (b" ".join(os.fsencode(a) for a in args).decode(errors="replace"),
                            p.returncode, expect, p.stdout.decode(errors="replace")[-3000:],
                            p.stderr.decode(errors="replace")[-3000:]))
    return p


def make_case(moeperm, corpus, op, name, tokens, top_k, hidden, seed=1):
    run(moeperm, "golden", "--out", corpus, "--op", op, "--tokens", str(tokens), "--top-k",
        str(top_k), "--hidden", str(hidden), "--dtype", "bf16", "--name", name,
        "--seed", str(seed), expect=0)
    return os.path.join(corpus, name)


def outputs_of(case_dir):
    with open(os.path.join(case_dir, "case.json")) as f:
        m = json.load(f)
    return {k: v for k, v in m["tensors"].items() if v["role"] == "output"}


def load(case_dir, entry):
    return np.fromfile(os.path.join(case_dir, entry["file"]),
                       dtype=DTYPES[entry["dtype"]]).reshape(entry["shape"])


# The planted differences, per case and output: (first row, last row, first
# column, last column, how), rows and columns as the judge names them (a
# tensor of one dimension has column 0 only).
PLANTS = {
    "permute": {"permuted_tokens": [(16, 31, 8, 23, "sign"), (200, 200, 0, 0, "nan")],
                "sorted_indices": [(100, 109, 0, 0, "plus1")]},
    # 1200 rows of 2000 columns: blocks of 3 rows and 4 columns, and in
    # rows 600-602 blocks of which 1, 2, 6 and 7 of 12 elements differ.
    "permute-tall": {"permuted_tokens": [(100, 199, 0, 1999, "sign"), (600, 600, 0, 0, "sign"),
                                         (600, 600, 4, 5, "sign"), (600, 601, 8, 10, "sign"),
                                         (600, 601, 12, 14, "sign"), (602, 602, 12, 12, "sign")]},
}


def plant(a, plants):
    a = a.copy()
    view = a.reshape(a.shape[0], -1)
    for r0, r1, c0, c1, how in plants:
        block = view[r0:r1 + 1, c0:c1 + 1]
        if how == "sign":
            block ^= 0x8000
        elif how == "nan":
            block[...] = 0x7fc0
        else:
            block += 1
    return a


def write_outputs(case_dir, target, plants=None, skip=()):
    os.makedirs(target, exist_ok=True)
    for name, entry in outputs_of(case_dir).items():
        if name in skip:
            continue
        a = load(case_dir, entry)
        if plants and name in plants:
            a = plant(a, plants[name])
        a.tofile(os.path.join(target, name + ".bin"))


def make_corpus(moeperm, tmp):
    """A corpus and an outputs tree beside it.  Returns (corpus, outputs,
    the case directories by key, the odd-named case's directory as bytes)."""
    corpus = os.path.join(tmp, "corpus")
    out = os.path.join(tmp, "outputs")
    cases = {
        "permute": make_case(moeperm, corpus, "permute", "permute", 64, 4, 40),
        "permute-tall": make_case(moeperm, corpus, "permute", "permute-tall", 300, 4, 2000, 2),
        "pg-shift": make_case(moeperm, corpus, "permute-grad", "pg-shift", 64, 4, 40, 3),
        "same": make_case(moeperm, corpus, "unpermute-grad", "same", 64, 4, 40, 4),
        "missing": make_case(moeperm, corpus, "unpermute", "missing", 64, 4, 40, 5),
    }
    for key, c in cases.items():
        target = os.path.join(out, key)
        if key == "pg-shift":  # tokens 32-63 hold tokens 0-31: a known kernel bug
            os.makedirs(target)
            for name, entry in outputs_of(c).items():
                a = load(c, entry).copy()
                a[32:64] = a[0:32]
                a.tofile(os.path.join(target, name + ".bin"))
        else:
            write_outputs(c, target, PLANTS.get(key), skip=("unpermuted_tokens",)
                          if key == "missing" else ())
    # The odd-named case: a copy of "permute" with its rows 0-3 negated.
    odd = os.path.join(os.fsencode(corpus), ODD_NAME)
    make_case(moeperm, corpus, "permute", "odd", 64, 4, 40, 6)
    os.rename(os.path.join(os.fsencode(corpus), b"odd"), odd)
    target = os.path.join(os.fsencode(out), ODD_NAME)
    write_outputs(odd.decode(errors="surrogateescape"), target.decode(errors="surrogateescape"),
                  {"permuted_tokens": [(0, 3, 0, 39, "sign")]})
    return corpus, out, cases, odd


def escaped_text(raw):
    """A name as both reports write it: valid UTF-8 as is, each byte of an
    invalid sequence as the text \\xHH."""
    out, i = [], 0
    while i < len(raw):
        for n in (1, 2, 3, 4):
            try:
                ch = raw[i:i + n].decode("utf-8")
            except UnicodeDecodeError:
                continue
            out.append(ch)
            i += n
            break
        else:
            out.append("\\x%02x" % raw[i])
            i += 1
    return "".join(out)
